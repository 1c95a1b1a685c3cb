//! `memkv changes` as a process, on each backend: its columns and JSON; following the log while
//! four writer processes commit (PostgreSQL: entries readable in `seq` order by every process,
//! never one skipped); and a writer killed (SIGKILL) in a burst, after which the log holds every
//! acknowledged write and nothing that did not commit.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{self, Backend, Db, Reaper, each_backend, ok, pg};

fn create(path: &str) -> String {
    format!(
        "{}\n",
        json!({"command": "create", "path": path, "file_text": "x"})
    )
}

fn entries(db: &Db, args: &[&str]) -> Vec<Value> {
    let mut all = vec!["changes", "--json"];
    all.extend(args);
    ok(&common::run_with_input(common::memkv(db).args(&all), b""))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn changes_prints_the_log_as_columns_or_json() {
    each_backend(|backend| {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::fresh(backend, dir.path(), "c.redb");
        let input = [
            create("/memories/a.md"),
            format!(
                "{}\n",
                json!({"command": "rename", "old_path": "/memories/a.md", "new_path": "/memories/b.md"})
            ),
        ]
        .concat();
        ok(&common::run_with_input(
            common::memkv(&db).args(["exec", "-u", "alice"]),
            input.as_bytes(),
        ));
        ok(&common::run_with_input(
            common::memkv(&db).args(["exec", "-u", "bob"]),
            create("/memories/c.md").as_bytes(),
        ));
        let text = ok(&common::run_with_input(
            common::memkv(&db).arg("changes"),
            b"",
        ));
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert!(lines[0].trim_start().starts_with("1  "), "{text}");
        assert!(
            lines[0].contains("memory.created") && lines[0].contains("alice"),
            "{text}"
        );
        assert!(
            lines[1].contains("memory.renamed")
                && lines[1].ends_with("/memories/b.md <- /memories/a.md"),
            "{text}"
        );
        // One store's: numbered in its own feed (the log's 3 is bob's 1).
        let json = entries(&db, &["--user", "bob"]);
        assert_eq!(json.len(), 1);
        assert_eq!(json[0]["seq"], 1);
        assert_eq!(json[0]["path"], "/c.md");
        assert_eq!(json[0]["created_by"]["type"], "session_actor");
        assert_eq!(entries(&db, &["--after", "1", "--limit", "1"])[0]["seq"], 2);
        assert!(entries(&db, &["--after", "3"]).is_empty());
    });
}

#[test]
fn a_writer_killed_in_a_burst_leaves_exactly_its_commits_in_the_log() {
    each_backend(|backend| {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::fresh(backend, dir.path(), "k.redb");
        let mut exec = common::exec_piped(&db, "u");
        let mut stdin = exec.0.stdin.take().unwrap();
        let mut answers = BufReader::new(exec.0.stdout.take().unwrap());
        // Acknowledged one at a time, then a burst whose answers are not awaited.
        let mut acked = BTreeSet::new();
        for i in 0..40 {
            let path = format!("/memories/acked-{i}.md");
            stdin.write_all(create(&path).as_bytes()).unwrap();
            let mut line = String::new();
            answers.read_line(&mut line).unwrap();
            assert!(line.contains("\"is_error\":false"), "{line}");
            acked.insert(path);
        }
        for i in 0..400 {
            stdin
                .write_all(create(&format!("/memories/burst-{i}.md")).as_bytes())
                .unwrap();
        }
        stdin.flush().unwrap();
        // Killed once the burst is being written: its first answer came.
        let mut line = String::new();
        answers.read_line(&mut line).unwrap();
        exec.0.kill().unwrap();
        exec.0.wait().unwrap();
        // Every acknowledged write has its entry, each commit one entry, numbered 1, 2, …; and
        // each entry's file exists: nothing is logged that did not commit.
        let logged = entries(&db, &[]);
        let paths: Vec<String> = logged
            .iter()
            .map(|e| e["path"].as_str().unwrap().to_owned())
            .collect();
        for (i, e) in logged.iter().enumerate() {
            assert_eq!(e["seq"], i as u64 + 1);
            assert_eq!(e["type"], "memory.created");
        }
        for path in &acked {
            let api = path.strip_prefix("/memories").unwrap();
            assert!(
                paths.iter().any(|p| p == api),
                "{path} acknowledged, not logged"
            );
        }
        let tree = ok(&common::run_with_input(
            common::memkv(&db).args(["tree", "-u", "u"]),
            b"",
        ));
        let files: BTreeSet<String> = tree
            .lines()
            .map(|l| {
                l.rsplit("  ")
                    .next()
                    .unwrap()
                    .strip_prefix("/memories")
                    .unwrap()
                    .to_owned()
            })
            .collect();
        let logged: BTreeSet<String> = paths.into_iter().collect();
        assert_eq!(files, logged, "the log and the committed files differ");
        assert!(logged.len() > acked.len(), "nothing of the burst committed");
        if backend == Backend::Redb {
            let check = ok(&common::run_with_input(
                common::memkv(&db).arg("check"),
                b"",
            ));
            assert!(check.contains("every invariant holds"), "{check}");
        }
    });
}

#[test]
fn a_follower_reads_four_writers_entries_in_seq_order_without_a_gap() {
    let Some(cluster) = pg::cluster() else { return };
    let db = format!("{}&sslmode=disable", cluster.fresh_url());
    ok(&common::run_with_input(common::memkv(&db).arg("init"), b""));
    const WRITERS: usize = 4;
    const EACH: usize = 150;
    let total = WRITERS * EACH;
    // The follower: `memkv changes --follow` in a process of its own, started first.
    let mut follower = Reaper(
        common::memkv(&db)
            .args([
                "changes",
                "--follow",
                "--json",
                "--limit",
                &total.to_string(),
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let out = follower.0.stdout.take().unwrap();
    let reading = std::thread::spawn(move || {
        BufReader::new(out)
            .lines()
            .map(|l| serde_json::from_str::<Value>(&l.unwrap()).unwrap())
            .collect::<Vec<_>>()
    });
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let db = db.clone();
            std::thread::spawn(move || {
                // Each command its own commit, from four processes at once.
                let input: String = (0..EACH)
                    .map(|i| create(&format!("/memories/{w}-{i}.md")))
                    .collect();
                let store = format!("w{w}");
                ok(&common::run_with_input(
                    common::memkv(&db).args(["exec", "-u", &store]),
                    input.as_bytes(),
                ));
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while follower.0.try_wait().unwrap().is_none() {
        assert!(
            Instant::now() < deadline,
            "the follower never saw every entry"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(follower.0.wait().unwrap().success());
    let seen = reading.join().unwrap();
    // Followed page after page while the writers committed: had an entry become readable after
    // one with a higher number, the follower (whose cursor had moved past it) would lack it.
    let seqs: Vec<u64> = seen.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    let want: Vec<u64> = (1..=total as u64).collect();
    assert_eq!(seqs, want);
    let distinct: BTreeSet<(String, String)> = seen
        .iter()
        .map(|e| {
            (
                e["memory_store_id"].as_str().unwrap().to_owned(),
                e["path"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(distinct.len(), total);
    // Each writer's entries in its own order.
    for w in 0..WRITERS {
        let mine: Vec<String> = seen
            .iter()
            .filter(|e| e["memory_store_id"] == format!("w{w}"))
            .map(|e| e["path"].as_str().unwrap().to_owned())
            .collect();
        let order: Vec<String> = (0..EACH).map(|i| format!("/{w}-{i}.md")).collect();
        assert_eq!(mine, order);
    }
}

#[test]
fn export_since_and_import_rebuild_a_copy_and_refuse_a_gap() {
    each_backend(|backend| {
        let dir = tempfile::tempdir().unwrap();
        let source = Db::fresh(backend, dir.path(), "s.redb");
        let copy = Db::fresh(backend, dir.path(), "c.redb");
        let exec = |user: &str, input: String| {
            ok(&common::run_with_input(
                common::memkv(&source).args(["exec", "-u", user]),
                input.as_bytes(),
            ));
        };
        let export = |args: &[&str]| -> String {
            let mut all = vec!["export"];
            all.extend(args);
            ok(&common::run_with_input(
                common::memkv(&source).args(&all),
                b"",
            ))
        };
        let seq = |text: &str| -> u64 {
            serde_json::from_str::<Value>(text.lines().next().unwrap()).unwrap()["seq"]
                .as_u64()
                .unwrap()
        };
        exec("alice", create("/memories/a.md"));
        let full = export(&[]);
        exec("alice", create("/memories/b.md"));
        exec("bob", create("/memories/c.md"));
        let inc1 = export(&["--since", &seq(&full).to_string()]);
        exec(
            "bob",
            format!(
                "{}\n",
                json!({"command": "delete", "path": "/memories/c.md"})
            ),
        );
        let inc2 = export(&["--since", &seq(&inc1).to_string()]);
        let files: Vec<_> = [("full", &full), ("inc1", &inc1), ("inc2", &inc2)]
            .iter()
            .map(|(name, text)| {
                let path = dir.path().join(format!("{name}.jsonl"));
                std::fs::write(&path, text).unwrap();
                path
            })
            .collect();
        let import = |file: &std::path::Path| {
            common::run_with_input(common::memkv(&copy).arg("import").arg(file), b"")
        };
        ok(&import(&files[0]));
        common::fails(&import(&files[2]), 1, "a gap");
        ok(&import(&files[1]));
        ok(&import(&files[2]));
        // Every line but the header and trailer, without the store lines' `feed_seq`: each
        // database numbers its own stores' feeds.
        let body = |text: &str| -> Vec<String> {
            let lines: Vec<&str> = text.lines().collect();
            lines[1..lines.len() - 1]
                .iter()
                .map(|l| {
                    let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
                    if let Some(o) = v.as_object_mut() {
                        o.remove("feed_seq");
                    }
                    v.to_string()
                })
                .collect()
        };
        let copied = ok(&common::run_with_input(
            common::memkv(&copy).arg("export"),
            b"",
        ));
        assert_eq!(body(&copied), body(&export(&[])));
    });
}

#[test]
fn webhooks_say_what_each_endpoint_gets_and_never_give_an_id_again() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("w.redb");
    let memkv = |args: &[&str]| ok(&common::run_with_input(common::memkv(&db).args(args), b""));
    // Some changes before: a new endpoint starts at the log's end.
    ok(&common::run_with_input(
        common::memkv(&db).args(["exec", "-u", "alice"]),
        create("/memories/a.md").as_bytes(),
    ));
    let added = memkv(&[
        "webhooks",
        "add",
        "--url",
        "https://hooks.example.com/a",
        "--store",
        "alice",
        "--event",
        "memory.created",
        "--event",
        "memory.deleted",
    ]);
    assert!(
        added.starts_with("added wh_")
            && added.contains("for stores alice, events memory.created, memory.deleted, from seq "),
        "{added}"
    );
    let from: u64 = added
        .split("from seq ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap();
    assert!(from > 1, "the log had entries: {added}");
    let id = |out: &str| out.split_whitespace().nth(1).unwrap().to_owned();
    let first = id(&added);
    let second = id(&memkv(&[
        "webhooks",
        "add",
        "--url",
        "https://hooks.example.com/b",
    ]));
    let list = memkv(&["webhooks", "list"]);
    let lines: Vec<&str> = list.lines().collect();
    assert!(
        lines[0].contains("AFTER SEQ") && !list.contains("DELIVERED"),
        "{list}"
    );
    // In the order they were added, each with what it gets.
    let columns: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(columns[0], first, "{list}");
    assert_eq!(columns[1], (from - 1).to_string(), "AFTER SEQ: {list}");
    assert_eq!(
        lines[2].trim(),
        "stores alice, events memory.created, memory.deleted",
        "{list}"
    );
    assert!(lines[3].starts_with(&second), "{list}");
    assert_eq!(lines[4].trim(), "every store, every event", "{list}");
    // A removed endpoint's id is never given again.
    memkv(&["webhooks", "remove", &second]);
    let third = id(&memkv(&[
        "webhooks",
        "add",
        "--url",
        "https://hooks.example.com/c",
    ]));
    assert_ne!(third, second);
    assert_ne!(third, first);
}
