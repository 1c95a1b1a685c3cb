//! `memkv history`, `restore`, `redact`, the history in `stats`, and the retention flags, as
//! processes on a redb file and on PostgreSQL.

use std::path::Path;
use std::process::Output;

use serde_json::{Value, json};

use crate::common::{Backend, Db, each_backend, fails, memkv, ok, run_with_input, stderr};

/// Runs memory-tool commands through `memkv exec` with `flags` before the subcommand and
/// `extra` after it; every one must succeed.
#[track_caller]
fn exec(db: &Db, flags: &[&str], extra: &[&str], commands: &[Value]) -> Output {
    let input: Vec<String> = commands.iter().map(Value::to_string).collect();
    let out = run_with_input(
        memkv(db).args(flags).args(["exec", "-u", "u"]).args(extra),
        input.join("\n").as_bytes(),
    );
    let text = ok(&out);
    assert!(
        text.lines().all(|l| l.contains(r#""is_error":false"#)),
        "{text}"
    );
    out
}

/// `memkv ARGS`, run by the operator `ops` (`$USER`).
fn run(db: &Db, args: &[&str]) -> Output {
    memkv(db).env("USER", "ops").args(args).output().unwrap()
}

/// `memkv history --json` of user `u`, at `path` if given.
fn history(db: &Db, path: Option<&str>) -> Vec<Value> {
    let mut args = vec!["history", "-u", "u", "--json"];
    args.extend(path);
    ok(&run(db, &args))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn temp(backend: Backend) -> (tempfile::TempDir, Db) {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::fresh(backend, dir.path(), "memkv.redb");
    (dir, db)
}

fn create(path: &str, text: &str) -> Value {
    json!({"command": "create", "path": path, "file_text": text})
}

/// The versions' (operation, path) pairs.
fn ops(versions: &[Value]) -> Vec<(String, Value)> {
    versions
        .iter()
        .map(|v| {
            (
                v["operation"].as_str().unwrap().to_owned(),
                v["path"].clone(),
            )
        })
        .collect()
}

#[test]
fn history_follows_a_memory_through_exec_restore_and_redact() {
    each_backend(|backend| {
        let (_dir, db) = temp(backend);
        let out = exec(
            &db,
            &[],
            &[],
            &[
                create("/memories/a.md", "one\n"),
                json!({"command": "str_replace", "path": "/memories/a.md", "old_str": "one", "new_str": "two"}),
                json!({"command": "rename", "old_path": "/memories/a.md", "new_path": "/memories/b.md"}),
            ],
        );
        assert!(out.status.success());
        exec(
            &db,
            &[],
            &["--session", "agent-7"],
            &[
                create("/memories/c.md", "see"),
                json!({"command": "delete", "path": "/memories/c.md"}),
            ],
        );

        let b = history(&db, Some("/memories/b.md"));
        assert_eq!(
            ops(&b),
            [
                ("created".into(), json!("/memories/a.md")),
                ("modified".into(), json!("/memories/a.md")),
                ("modified".into(), json!("/memories/b.md")),
            ]
        );
        // One memory, oldest first; the hash and size of each content; the exec session.
        assert!(b.iter().all(|v| v["memory"] == b[0]["memory"]));
        assert_eq!(b[0]["id"], "memver_0000000000000001");
        assert_eq!(b[0]["size"], 4);
        assert_eq!(
            b[0]["sha256"],
            "2c8b08da5ce60398e1f19af0e5dccc744df274b826abe585eaba68c525434806"
        );
        let session = b[0]["actor"].clone();
        assert_eq!(session["type"], "session");
        assert!(
            session["id"].as_str().unwrap().starts_with("exec:"),
            "{session}"
        );
        assert!(
            b.iter()
                .all(|v| v["redacted"].is_null() && v.get("content").is_none())
        );
        // With --content, what each version held.
        let with = ok(&run(
            &db,
            &[
                "history",
                "-u",
                "u",
                "--json",
                "--content",
                "/memories/b.md",
            ],
        ));
        let contents: Vec<Value> = with
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap()["content"].clone())
            .collect();
        assert_eq!(contents, [json!("one\n"), json!("two\n"), json!("two\n")]);
        assert!(b[0]["time"].as_str().unwrap().ends_with('Z'));
        // The whole store: the deleted memory's versions too, by the named session.
        let all = history(&db, None);
        assert_eq!(all.len(), 5);
        assert_eq!(
            ops(&all[3..]),
            [
                ("created".into(), json!("/memories/c.md")),
                ("deleted".into(), json!("/memories/c.md")),
            ]
        );
        assert_eq!(all[4]["actor"], json!({"type": "session", "id": "agent-7"}));
        assert!(all[4]["sha256"].is_null() && all[4]["size"].is_null());
        // The columns say the same.
        let text = ok(&run(&db, &["history", "-u", "u"]));
        let rows: Vec<&str> = text.lines().collect();
        assert_eq!(rows.len(), 6, "{text}");
        assert!(rows[0].starts_with("VERSION "), "{text}");
        let cols: Vec<&str> = rows[1].split_whitespace().collect();
        assert_eq!(cols[0], "memver_0000000000000001");
        assert_eq!(&cols[2..5], ["created", "4", "2c8b08da5ce6"]);
        assert!(cols[5].starts_with("session:exec:"), "{}", rows[1]);
        assert_eq!(cols[6], "/memories/a.md");
        assert!(rows[5].contains("session:agent-7"), "{text}");

        // Restore the first content: a new version of the same memory, at its current path, by the
        // operator.
        let out = ok(&run(
            &db,
            &["restore", "-u", "u", "memver_0000000000000001"],
        ));
        assert_eq!(
            out,
            format!(
                "restored memver_0000000000000001 as memver_0000000000000006 of {} at /memories/b.md\n",
                b[0]["memory"].as_str().unwrap()
            )
        );
        assert_eq!(
            ok(&run(&db, &["cat", "-u", "u", "/memories/b.md"])),
            "one\n"
        );
        let b = history(&db, Some("/memories/b.md"));
        assert_eq!(b.len(), 4);
        assert_eq!(b[3]["operation"], "modified");
        assert_eq!(b[3]["sha256"], b[0]["sha256"]);
        assert_eq!(b[3]["actor"], json!({"type": "user", "id": "ops"}));
        // Restoring the same content again records nothing.
        let again = ok(&run(
            &db,
            &["restore", "-u", "u", "memver_0000000000000001"],
        ));
        assert!(again.starts_with("unchanged: "), "{again}");
        assert_eq!(history(&db, None).len(), 6);
        // A deleted memory comes back as a new memory at its old path.
        let out = ok(&run(
            &db,
            &["restore", "-u", "u", "memver_0000000000000004"],
        ));
        assert_eq!(
            out,
            "restored memver_0000000000000004 as memver_0000000000000007 of mem_0000000000000007 at /memories/c.md\n"
        );
        assert_eq!(ok(&run(&db, &["cat", "-u", "u", "/memories/c.md"])), "see");

        // Redact the second version: what was erased, and the history shows only that it was.
        let out = ok(&run(&db, &["redact", "-u", "u", "memver_0000000000000002"]));
        assert!(
            out.starts_with("redacted memver_0000000000000002 of mem_0000000000000001 (modified): erased its path /memories/a.md, 4 bytes of content (sha256 27dd8ed4"),
            "{out}"
        );
        assert!(
            out.ends_with("; recorded as redacted by user:ops\n"),
            "{out}"
        );
        let b = history(&db, Some("/memories/b.md"));
        let r = &b[1];
        assert_eq!(r["operation"], "modified");
        assert!(r["path"].is_null() && r["sha256"].is_null() && r["size"].is_null());
        assert_eq!(r["redacted"]["by"], json!({"type": "user", "id": "ops"}));
        let text = ok(&run(&db, &["history", "-u", "u", "/memories/b.md"]));
        let row = text.lines().nth(2).unwrap();
        assert!(row.contains("(redacted 20"), "{text}");
        assert!(!row.contains("/memories/a.md"), "{text}");
        // Twice: nothing changes. Restoring it: refused.
        let twice = ok(&run(&db, &["redact", "-u", "u", "memver_0000000000000002"]));
        assert!(twice.starts_with("unchanged: memver_0000000000000002 was redacted at "));
        fails(
            &run(&db, &["restore", "-u", "u", "memver_0000000000000002"]),
            1,
            "memver_0000000000000002: Cannot restore this version: it is redacted",
        );
        fails(
            &run(&db, &["restore", "-u", "u", "memver_0000000000000005"]),
            1,
            "Cannot restore this version: it records a deletion",
        );
        assert_eq!(history(&db, None).len(), 7);
        assert_eq!(ok(&run(&db, &["check"])), "ok: every invariant holds\n");
    });
}

#[test]
fn unknown_users_paths_and_versions_are_refused_clearly() {
    each_backend(|backend| {
        let (_dir, db) = temp(backend);
        exec(&db, &[], &[], &[create("/memories/d/a.md", "a")]);
        fails(
            &run(&db, &["history", "-u", "nobody"]),
            1,
            "no such user: \"nobody\" has no memories and no history",
        );
        fails(
            &run(&db, &["history", "-u", "u", "/memories/d/b.md"]),
            1,
            "no memory at /memories/d/b.md for user \"u\" (`memkv history --user u` lists every version",
        );
        fails(
            &run(&db, &["history", "-u", "u", "/memories/d"]),
            1,
            "/memories/d is a directory of user \"u\", not a memory",
        );
        fails(
            &run(&db, &["history", "-u", "u", "/memories/../etc/passwd"]),
            2,
            "'.' and '..' segments are not allowed",
        );
        fails(
            &run(&db, &["history", "-u", "u", "/etc/passwd"]),
            2,
            "/etc/passwd",
        );
        for command in ["restore", "redact"] {
            fails(
                &run(&db, &[command, "-u", "u", "mem_0000000000000001"]),
                2,
                "\"mem_0000000000000001\" is not a version id",
            );
            fails(
                &run(&db, &[command, "-u", "u", "memver_00000000000000ff"]),
                1,
                "no version memver_00000000000000ff of user \"u\" (never written, or pruned",
            );
            fails(
                &run(&db, &[command, "-u", "nobody", "memver_0000000000000001"]),
                1,
                "no such user: \"nobody\"",
            );
        }
        // Nothing was written by any of them.
        assert_eq!(history(&db, None).len(), 1);
    });
}

/// The history table of `memkv stats`: (versions, bytes, pruned, pruned bytes) per store.
fn history_stats(db: &Db, flags: &[&str]) -> Vec<(u64, u64, u64, u64, String)> {
    let text = ok(&memkv(db).args(flags).arg("stats").output().unwrap());
    let mut rows = text.lines().skip_while(|l| !l.starts_with("VERSIONS"));
    assert!(rows.next().is_some(), "{text}");
    rows.map(|l| {
        let c: Vec<&str> = l.split_whitespace().collect();
        let n = |i: usize| c[i].parse::<u64>().unwrap();
        (n(0), n(1), n(2), n(3), c[5..].join(" "))
    })
    .collect()
}

#[test]
fn retention_flags_prune_and_stats_shows_it() {
    each_backend(|backend| {
        let (_dir, db) = temp(backend);
        let notes: Vec<Value> = (0..5)
            .map(|i| create(&format!("/memories/n{i}.md"), "12345"))
            .collect();
        // Five versions of 15 bytes each (the path: a live memory's current content is its
        // file's, not counted as history); three kept.
        exec(&db, &["--history-max-versions", "3"], &[], &notes);
        assert_eq!(history_stats(&db, &[]), [(3, 45, 2, 30, "u".to_owned())]);
        let kept: Vec<Value> = history(&db, None)
            .iter()
            .map(|v| v["path"].clone())
            .collect();
        assert_eq!(
            kept,
            [
                json!("/memories/n2.md"),
                json!("/memories/n3.md"),
                json!("/memories/n4.md")
            ]
        );
        // A budget of bytes: the next write prunes down to it.
        exec(
            &db,
            &["--history-max-bytes", "30"],
            &[],
            &[create("/memories/n5.md", "12345")],
        );
        assert_eq!(history_stats(&db, &[]), [(2, 30, 4, 60, "u".to_owned())]);
        // `off` lifts a bound; --no-history keeps nothing at all, and the ids still count on.
        exec(
            &db,
            &["--history-max-versions", "off", "--history-max-age", "off"],
            &[],
            &[create("/memories/n6.md", "12345")],
        );
        assert_eq!(history_stats(&db, &[])[0].0, 3);
        exec(
            &db,
            &["--no-history"],
            &[],
            &[create("/memories/n7.md", "12345")],
        );
        assert_eq!(history_stats(&db, &[]), [(0, 0, 7, 105, "u".to_owned())]);
        assert!(history(&db, None).is_empty());
        exec(&db, &[], &[], &[create("/memories/n8.md", "12345")]);
        let last = history(&db, None);
        assert_eq!(last.len(), 1);
        assert_eq!(last[0]["id"], "memver_0000000000000009");
        // A store whose memories are all deleted still shows its history.
        let other = run_with_input(
            memkv(&db).args(["exec", "-u", "gone"]),
            format!(
                "{}\n{}\n",
                create("/memories/x.md", "x"),
                json!({"command": "delete", "path": "/memories/x.md"})
            )
            .as_bytes(),
        );
        ok(&other);
        let stats = history_stats(&db, &[]);
        assert_eq!(stats[0], (2, 29, 0, 0, "gone".to_owned()));
        // Bad values are usage errors.
        fails(
            &run(&db, &["--history-max-versions", "lots", "stats"]),
            2,
            "is not a whole number",
        );
        fails(
            &run(&db, &["--no-history", "--history-max-age", "1d", "stats"]),
            2,
            "cannot be used with",
        );
        fails(
            &run(&db, &["exec", "-u", "u", "--session", "two words"]),
            2,
            "no whitespace",
        );
        assert_eq!(ok(&run(&db, &["check"])), "ok: every invariant holds\n");
    });
}

#[test]
fn export_and_import_carry_the_history() {
    each_backend(|backend| {
        let (dir, db) = temp(backend);
        exec(
            &db,
            &[],
            &["--session", "s1"],
            &[
                create("/memories/a.md", "one\n"),
                json!({"command": "str_replace", "path": "/memories/a.md", "old_str": "one", "new_str": "two"}),
                create("/memories/b.md", "bee"),
                json!({"command": "delete", "path": "/memories/b.md"}),
            ],
        );
        ok(&run(&db, &["redact", "-u", "u", "memver_0000000000000001"]));
        let export = run(&db, &["export"]);
        assert_eq!(
            stderr(&export),
            "exported 1 files of 1 users, 4 bytes, 4 versions\n"
        );
        let copy = Db::fresh(backend, dir.path(), "copy.redb");
        let out = run_with_input(memkv(&copy).args(["import", "-"]), &export.stdout);
        assert_eq!(
            stderr(&out),
            "imported 1 files of 1 users, 4 bytes, 4 versions\n"
        );
        // The same versions, redaction and deleted memory included, and the same stats.
        assert_eq!(history(&copy, None), history(&db, None));
        assert_eq!(history_stats(&copy, &[]), history_stats(&db, &[]));
        // Importing it again merges into the store that now exists: refused on the conflict.
        let again = run_with_input(memkv(&copy).args(["import", "-"]), &export.stdout);
        fails(
            &again,
            1,
            "line 3: /memories/a.md already exists for user \"u\"",
        );
        // A version-1 export (before history) imports as memories created by the operator.
        let fixture =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/export-v1.jsonl");
        let old = Db::fresh(backend, dir.path(), "old.redb");
        ok(&memkv(&old)
            .env("USER", "ops")
            .arg("import")
            .arg(&fixture)
            .output()
            .unwrap());
        let text = ok(&run(&old, &["history", "-u", "alice"]));
        let rows: Vec<&str> = text.lines().skip(1).collect();
        assert_eq!(rows.len(), 2, "{text}");
        assert!(
            rows.iter()
                .all(|r| r.contains(" created ") && r.contains(" user:ops ")),
            "{text}"
        );
    });
}
