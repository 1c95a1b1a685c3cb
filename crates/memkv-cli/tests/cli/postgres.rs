//! `memkv` processes on one PostgreSQL database (skipped, visibly, without PostgreSQL).

use std::io::Write;
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};

use crate::common::{self, ok, pg};

/// `memkv --db DB ARGS` with `input` on its standard input.
fn memkv(db: &str, args: &[&str], input: &[u8]) -> Output {
    common::run_with_input(common::memkv(db).args(args), input)
}

const SHARED_MAX_FILES: u64 = 40;

/// The commands of process `p` on a shared store: inserts at the top of a common log (whose
/// final line order is the serial order of the inserts that succeeded), creates that run into
/// the file quota, deletes of its own files, and views.
fn shared_commands(p: usize, n: usize) -> Vec<Value> {
    (0..n)
        .map(|i| match i % 5 {
            0 => {
                json!({"command": "insert", "path": "/memories/log.md", "insert_line": 0, "insert_text": format!("p{p}-{i}")})
            }
            1 => {
                json!({"command": "create", "path": format!("/memories/p{p}/f{i}.md"), "file_text": format!("{p} {i}\n")})
            }
            2 => json!({"command": "view", "path": "/memories"}),
            3 => {
                if i % 10 == 3 {
                    json!({"command": "delete", "path": format!("/memories/p{p}/f{}.md", i - 2)})
                } else {
                    json!({"command": "str_replace", "path": format!("/memories/p{p}/f{}.md", i - 2), "old_str": format!("{p} {}", i - 2), "new_str": format!("{p} {} edited", i - 2)})
                }
            }
            _ => json!({"command": "view", "path": "/memories/log.md"}),
        })
        .collect()
}

fn lines(commands: &[Value]) -> Vec<u8> {
    commands
        .iter()
        .flat_map(|c| format!("{c}\n").into_bytes())
        .collect()
}

#[test]
fn processes_on_shared_and_own_stores_serialize_and_lose_nothing() {
    let Some(cluster) = pg::cluster() else { return };
    let db = cluster.fresh_url();
    ok(&memkv(&db, &["init"], b""));
    let limits = ["--max-files", &SHARED_MAX_FILES.to_string()];
    for store in ["shared-a", "shared-b"] {
        let seed =
            lines(&[json!({"command": "create", "path": "/memories/log.md", "file_text": ""})]);
        let mut args = limits.to_vec();
        args.extend(["exec", "-u", store]);
        ok(&memkv(&db, &args, &seed));
    }
    // Four processes on the two shared stores (two each), four on stores of their own.
    let mut jobs = Vec::new();
    for p in 0..8usize {
        let (store, commands) = if p < 4 {
            let store = if p % 2 == 0 { "shared-a" } else { "shared-b" };
            (store.to_owned(), shared_commands(p, 500))
        } else {
            (format!("own-{p}"), shared_commands(p, 100))
        };
        let db = db.clone();
        jobs.push(std::thread::spawn(move || {
            let mut args = vec!["--max-files", "40", "exec", "-u"];
            args.push(&store);
            let out = memkv(&db, &args, &lines(&commands));
            let answers: Vec<Value> = ok(&out)
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
            assert_eq!(answers.len(), commands.len(), "every command answered");
            (p, store, commands, answers)
        }));
    }
    let results: Vec<_> = jobs.into_iter().map(|j| j.join().unwrap()).collect();
    let check = ok(&memkv(&db, &["check"], b""));
    assert!(check.contains("every invariant holds"), "{check}");
    let export = ok(&memkv(&db, &["export"], b""));
    let files: Vec<Value> = export
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["type"] == "file")
        .collect();
    let content = |store: &str, path: &str| {
        files
            .iter()
            .find(|f| f["user"] == store && f["path"] == path)
            .map(|f| f["content"].as_str().unwrap().to_owned())
    };
    for store in ["shared-a", "shared-b", "own-4", "own-5", "own-6", "own-7"] {
        let n = files.iter().filter(|f| f["user"] == store).count() as u64;
        assert!(n <= SHARED_MAX_FILES, "{store} holds {n} files");
    }
    let mut quota_refusals = 0;
    for store in ["shared-a", "shared-b"] {
        // The log's lines, top to bottom, are the inserts that succeeded in reverse serial order:
        // exactly those, each once, and each process's in its own order.
        let log = content(store, "/memories/log.md").expect("the log survives");
        let mut serial: Vec<&str> = log.lines().collect();
        serial.reverse();
        let mut expected = Vec::new();
        for (p, s, commands, answers) in &results {
            if s != store {
                continue;
            }
            let mine: Vec<String> = commands
                .iter()
                .zip(answers)
                .filter(|(c, a)| c["command"] == "insert" && a["is_error"] == false)
                .map(|(c, _)| c["insert_text"].as_str().unwrap().to_owned())
                .collect();
            let order: Vec<&str> = serial
                .iter()
                .copied()
                .filter(|l| l.starts_with(&format!("p{p}-")))
                .collect();
            assert_eq!(order, mine, "process {p}'s inserts in its own order");
            expected.extend(mine);
        }
        assert_eq!(serial.len(), expected.len(), "no insert lost or doubled");
        // Every answered create is there unless its own process deleted it; every refused one is
        // absent; edits that succeeded show.
        for (p, s, commands, answers) in &results {
            if s != store {
                continue;
            }
            for (i, (c, a)) in commands.iter().zip(answers).enumerate() {
                if c["command"] != "create" {
                    continue;
                }
                let path = c["path"].as_str().unwrap();
                let deleted = commands
                    .get(i + 2)
                    .zip(answers.get(i + 2))
                    .is_some_and(|(d, da)| d["command"] == "delete" && da["is_error"] == false);
                let found = content(store, path);
                if a["is_error"] == true {
                    let why = a["content"].as_str().unwrap();
                    assert!(why.contains("quota"), "process {p}: {why}");
                    quota_refusals += 1;
                    assert_eq!(found, None, "a refused create left {path}");
                } else if deleted {
                    assert_eq!(found, None, "{path} was deleted");
                } else {
                    let edited = answers.get(i + 2).is_some_and(|e| e["is_error"] == false);
                    let want = if edited {
                        format!("{p} {i} edited\n")
                    } else {
                        format!("{p} {i}\n")
                    };
                    assert_eq!(found.as_deref(), Some(want.as_str()), "{path}");
                }
            }
        }
    }
    assert!(quota_refusals > 0, "the quota was never reached");
}

#[test]
fn an_export_crosses_backends_and_comes_back_the_same() {
    let Some(cluster) = pg::cluster() else { return };
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.redb").display().to_string();
    let c = dir.path().join("c.redb").display().to_string();
    let pg = cluster.fresh_url();
    let mut input = Vec::new();
    for i in 0..60 {
        input.extend(format!("{}\n", json!({"command": "create", "path": format!("/memories/d{}/n{i}.md", i % 4), "file_text": format!("note {i}\nü ✓ \"quoted\"\n")})).into_bytes());
    }
    for user in ["alice", "bob@example.com"] {
        ok(&memkv(&a, &["exec", "-u", user], &input));
    }
    let from_redb = ok(&memkv(&a, &["export"], b""));
    ok(&memkv(&pg, &["import", "-"], from_redb.as_bytes()));
    let from_pg = ok(&memkv(&pg, &["export"], b""));
    ok(&memkv(&c, &["import", "-"], from_pg.as_bytes()));
    let back = ok(&memkv(&c, &["export"], b""));
    // Byte for byte, but for the header (it records when the export was made) and so the
    // trailer's digest of the lines before it.
    let body = |export: &str| -> Vec<String> {
        let lines: Vec<&str> = export.lines().collect();
        // Without the store lines' `feed_seq`: each database numbers its own stores' feeds.
        let mut out: Vec<String> = lines[1..lines.len() - 1]
            .iter()
            .map(|l| {
                let mut v: Value = serde_json::from_str(l).unwrap();
                if let Some(o) = v.as_object_mut() {
                    o.remove("feed_seq");
                }
                v.to_string()
            })
            .collect();
        let mut trailer: Value = serde_json::from_str(lines[lines.len() - 1]).unwrap();
        trailer.as_object_mut().unwrap().remove("sha256");
        out.push(trailer.to_string());
        out
    };
    // Per user: the store line, 60 files, their 60 versions; and the trailer.
    assert_eq!(body(&from_redb).len(), 243);
    assert_eq!(body(&from_redb), body(&from_pg));
    assert_eq!(body(&from_pg), body(&back));
}

/// No file path is ever derived from a PostgreSQL URL, and its password is never printed:
/// `keys` keeps its keys in the database (no keys file), `mcp` creates no directory named after
/// the URL.
#[test]
fn a_url_names_no_file_and_its_password_is_never_printed() {
    let dir = tempfile::tempdir().unwrap();
    // Nothing listens on port 1: the commands that connect fail, after saying so.
    let url = "postgres://memkv:hunter2secret@127.0.0.1:1/db";
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_memkv"))
            .args(["--db", url])
            .args(args)
            .current_dir(dir.path())
            .env_remove("MEMKV_KEYS")
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    for args in [
        &["keys", "add", "--admin"][..],
        &["keys", "list"],
        &["serve", "--listen", "127.0.0.1:0"],
        &["mcp", "--user", "dana"],
    ] {
        let out = run(args);
        assert!(!out.status.success(), "{args:?}");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!text.contains("hunter2secret"), "{args:?}: {text}");
        let stray: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert!(stray.is_empty(), "{args:?} left {stray:?}");
    }
    // Keys go to the database, never to a file instead: with --keys too, a database that
    // cannot be reached is an error, and nothing is written.
    let keys = dir.path().join("fleet.keys");
    let out = run(&["--keys", keys.to_str().unwrap(), "keys", "add", "--admin"]);
    assert!(!out.status.success());
    assert!(!String::from_utf8_lossy(&out.stderr).contains("hunter2secret"));
    assert!(!keys.exists());
}

/// `serve` and `mcp` on PostgreSQL exit 0 on SIGTERM, SIGINT and (mcp) the end of stdin, with
/// open connections in their pool, and never panic (a `postgres::Client` closed inside the
/// async runtime did).
#[test]
fn serve_and_mcp_on_postgres_exit_cleanly() {
    use std::io::Read;
    use std::path::Path;

    use crate::serve::proc::Served;
    let Some(cluster) = pg::cluster() else { return };
    let db = cluster.fresh_url();
    ok(&memkv(&db, &["init"], b""));
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("keys");
    let keys = keys.to_str().unwrap();
    for signal in [libc::SIGTERM, libc::SIGINT] {
        let mut served = Served::start(Path::new(&db), &["--keys", keys, "--no-auth"]);
        let addr = served.addr;
        // Two requests at once, so the pool holds more than one connection when it closes.
        let answers: Vec<String> = (0..2)
            .map(|i| {
                std::thread::spawn(move || {
                    let body = format!(
                        r#"{{"command":"create","path":"/memories/{i}.md","file_text":"x"}}"#
                    );
                    let mut s = std::net::TcpStream::connect(addr).unwrap();
                    write!(
                        s,
                        "POST /v1/memory_stores/dana/tool HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
                        body.len()
                    )
                    .unwrap();
                    let mut answer = String::new();
                    s.read_to_string(&mut answer).unwrap();
                    answer
                })
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|t| t.join().unwrap())
            .collect();
        for a in &answers {
            assert!(a.starts_with("HTTP/1.1 200"), "{a}");
        }
        let status = served.stop_with(signal);
        let err = served.log();
        assert_eq!(status.code(), Some(0), "signal {signal}: {err}");
        assert!(!err.contains("panic"), "{err}");
    }
    // mcp over stdio: a session that writes, then the end of stdin.
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#;
    let call = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"memory","arguments":{"command":"view","path":"/memories"}}}"#;
    let input = format!(
        "{init}\n{}\n{call}\n",
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#
    );
    let out = memkv(&db, &["mcp", "--user", "dana"], input.as_bytes());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(!err.contains("panic"), "{err}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        stdout.contains("0.md") && stdout.contains("1.md"),
        "{stdout}"
    );
}
