//! The `memkv` binary, run as a process.

use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{Backend, Db, each_backend, memkv, run_with_input};

fn exec(db: impl AsRef<OsStr>, user: &str, input: &str) -> Output {
    run_with_input(memkv(db).args(["exec", "--user", user]), input.as_bytes())
}

fn answers(out: &Output) -> Vec<Value> {
    String::from_utf8(out.stdout.clone())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn temp_db() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("nested/dir/memkv.redb");
    (dir, db)
}

/// A fresh database of `backend` (on redb, a file in a directory not yet created).
fn temp(backend: Backend) -> (tempfile::TempDir, Db) {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::fresh(backend, dir.path(), "nested/dir/memkv.redb");
    (dir, db)
}

#[test]
fn exec_answers_every_line_and_persists() {
    each_backend(|backend| {
        let (_dir, db) = temp(backend);
        let input = [
            r#"{"command":"create","path":"/memories/notes.md","file_text":"hello\n"}"#,
            "",
            r#"{"type":"tool_use","id":"toolu_1","name":"memory","input":{"command":"view","path":"/memories/notes.md"}}"#,
            "not json",
            r#"{"command":"delete","path":"/memories"}"#,
        ]
        .join("\n");
        let out = exec(&db, "alice", &input);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            answers(&out),
            vec![
                json!({"content": "File created successfully at: /memories/notes.md", "is_error": false}),
                json!({"type": "tool_result", "tool_use_id": "toolu_1", "is_error": false,
                       "content": "Here's the content of /memories/notes.md with line numbers:\n     1\thello"}),
                json!({"content": "Error: Invalid JSON: expected ident at line 1 column 2", "is_error": true}),
                json!({"content": "Error: Cannot delete the /memories directory itself", "is_error": true}),
            ]
        );
        // Key order on the wire, as documented.
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(text.starts_with(
            r#"{"content":"File created successfully at: /memories/notes.md","is_error":false}"#
        ));
        assert!(text.contains(r#"{"type":"tool_result","tool_use_id":"toolu_1","content":"#));

        // The next process reads it back; another user does not see it.
        let out = exec(&db, "alice", r#"{"command":"view","path":"/memories"}"#);
        assert_eq!(
            answers(&out)[0]["content"],
            "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items and node_modules:\n6B\t/memories\n6B\t/memories/notes.md"
        );
        let out = exec(
            &db,
            "bob",
            r#"{"command":"view","path":"/memories/notes.md"}"#,
        );
        assert_eq!(answers(&out)[0]["is_error"], true);
    });
}

#[test]
fn exec_is_interactive_and_a_second_process_is_refused() {
    let (_dir, db) = temp_db();
    let mut child = memkv(&db)
        .args(["--shared", "exec", "--user", "u"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    // Each answer arrives while stdin is still open: flushed per line, not at exit.
    writeln!(
        stdin,
        r#"{{"command":"create","path":"/memories/a","file_text":"1"}}"#
    )
    .unwrap();
    stdin.flush().unwrap();
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert_eq!(
        line,
        "{\"content\":\"File created successfully at: /memories/a\",\"is_error\":false}\n"
    );

    // While the first process holds the database, a second one fails fast and clearly.
    let start = Instant::now();
    let out = exec(&db, "u", r#"{"command":"view","path":"/memories"}"#);
    assert!(start.elapsed() < Duration::from_secs(10));
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("the database is open in another process"),
        "{err}"
    );
    // Operators can look meanwhile (the writer runs with --shared): read-only commands share
    // the file with it and see its commits.
    let out = memkv(&db).arg("users").output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8(out.stdout)
            .unwrap()
            .ends_with("       1             1  u\n")
    );
    writeln!(
        stdin,
        r#"{{"command":"create","path":"/memories/b","file_text":"22"}}"#
    )
    .unwrap();
    stdin.flush().unwrap();
    line.clear();
    stdout.read_line(&mut line).unwrap();
    let out = memkv(&db)
        .args(["cat", "-u", "u", "/memories/b"])
        .output()
        .unwrap();
    assert_eq!(out.stdout, b"22");
    let out = memkv(&db).args(["export", "-u", "u"]).output().unwrap();
    assert!(out.status.success());
    // The header, the store, two files, their two versions, the trailer.
    assert_eq!(String::from_utf8(out.stdout).unwrap().lines().count(), 7);
    // Writers are refused while it runs.
    let out = memkv(&db)
        .args(["--ttl", "30d", "expire"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("open in another process"));

    drop(stdin);
    assert!(child.wait().unwrap().success());
    // The first process's data is intact.
    let out = memkv(&db)
        .args(["cat", "--user", "u", "/memories/a"])
        .output()
        .unwrap();
    assert_eq!(out.stdout, b"1");
}

#[test]
fn operator_commands() {
    each_backend(|backend| {
        let (_dir, db) = temp(backend);
        let input = [
            r#"{"command":"create","path":"/memories/b/x.md","file_text":"12345"}"#,
            r#"{"command":"create","path":"/memories/a.md","file_text":"1"}"#,
        ]
        .join("\n");
        assert!(exec(&db, "alice@example.com", &input).status.success());
        assert!(
            exec(
                &db,
                "bob",
                r#"{"command":"create","path":"/memories/z","file_text":""}"#
            )
            .status
            .success()
        );

        let out = memkv(&db).arg("users").output().unwrap();
        assert!(out.status.success());
        assert_eq!(
            String::from_utf8(out.stdout).unwrap(),
            "   FILES         BYTES  USER\n       2             6  alice@example.com\n       1             0  bob\n"
        );
        let out = memkv(&db)
            .args(["tree", "--user", "alice@example.com"])
            .output()
            .unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        let rows: Vec<(&str, &str)> = text
            .lines()
            .map(|l| {
                let cols: Vec<&str> = l.split_whitespace().collect();
                (cols[0], cols[2])
            })
            .collect();
        assert_eq!(rows, [("1", "/memories/a.md"), ("5", "/memories/b/x.md")]);
        let out = memkv(&db)
            .args(["cat", "-u", "alice@example.com", "/memories/b/x.md"])
            .output()
            .unwrap();
        assert_eq!(out.stdout, b"12345");

        let out = memkv(&db)
            .args(["cat", "-u", "bob", "/memories/a.md"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1));
        assert!(String::from_utf8_lossy(&out.stderr).contains("no such file"));
        let out = memkv(&db)
            .args(["cat", "-u", "bob", "/memories/../x"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1));
        assert!(String::from_utf8_lossy(&out.stderr).contains("invalid memory path"));
    });
}

#[test]
fn operator_commands_never_create_a_database() {
    each_backend(|backend| {
        let (_dir, db) = temp(backend);
        for args in [
            &["users"][..],
            &["stats"],
            &["check"],
            &["export"],
            &["tree", "-u", "u"],
            &["--ttl", "1d", "expire"],
            // The last one finds nothing created by the others (on PostgreSQL: no tables).
            &["users"],
        ] {
            let out = memkv(&db).args(args).output().unwrap();
            assert_eq!(out.status.code(), Some(1), "{args:?}");
            let err = String::from_utf8_lossy(&out.stderr);
            let why = match backend {
                Backend::Redb => "no such database",
                Backend::Postgres => "memkv's tables do not exist here",
            };
            assert!(err.contains(why), "{args:?}: {err}");
            if backend == Backend::Redb {
                assert!(
                    err.contains("hint: `memkv init` creates a database"),
                    "{err}"
                );
            }
        }
        if let Some(file) = db.file() {
            assert!(!file.exists());
        }
    });
}

#[test]
fn bad_invocations_fail_clearly() {
    let (dir, db) = temp_db();
    // An empty user id.
    let out = exec(&db, "", "");
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("invalid user id"));
    // A file that is not a database.
    let junk = dir.path().join("junk");
    std::fs::write(&junk, "just text, not redb").unwrap();
    let out = exec(&junk, "u", "");
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(std::fs::read(&junk).unwrap(), b"just text, not redb");
    // Usage errors are clap's, exit 2.
    let out = memkv(&db).args(["exec"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn db_from_environment_and_limits_from_flags() {
    each_backend(|backend| {
        let (_dir, db) = temp(backend);
        let out = run_with_input(
            Command::new(env!("CARGO_BIN_EXE_memkv"))
                .env("MEMKV_DB", &db)
                .args(["--max-file-bytes", "3", "exec", "--user", "u"]),
            br#"{"command":"create","path":"/memories/a","file_text":"1234"}"#,
        );
        assert_eq!(
            answers(&out),
            vec![
                json!({"content": "Error: File /memories/a would be 4 bytes, over the limit of 3 bytes", "is_error": true})
            ]
        );
        if let Some(file) = db.file() {
            assert!(file.exists());
        }
        // The writable open created the database, on either backend.
        assert!(memkv(&db).arg("users").output().unwrap().status.success());
    });
}

/// Writes a valid export of `users` × `per_user` files, as `memkv export` would.
fn write_export(path: &Path, users: usize, per_user: usize) -> usize {
    use sha2::{Digest, Sha256};
    let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
    let mut body = String::from(
        r#"{"type":"header","format":"memkv-export","version":1,"created_ms":0,"created":"1970-01-01T00:00:00Z","memkv_version":"test"}"#,
    );
    body.push('\n');
    let mut bytes = 0;
    for u in 0..users {
        for i in 0..per_user {
            let content = format!("memory {i} of user {u}: {}\n", "lorem ipsum ".repeat(8));
            bytes += content.len();
            let line = json!({"type": "file", "user": format!("user{u}"), "path": format!("/memories/d{}/f{i}.md", i % 50),
                "content": content, "created_ms": 1, "modified_ms": 2, "accessed_ms": 3, "sha256": hex(&Sha256::digest(content.as_bytes()))});
            body.push_str(&line.to_string());
            body.push('\n');
        }
    }
    let trailer = json!({"type": "trailer", "files": users * per_user, "users": users, "bytes": bytes, "sha256": hex(&Sha256::digest(body.as_bytes()))});
    body.push_str(&trailer.to_string());
    body.push('\n');
    std::fs::write(path, body).unwrap();
    bytes
}

#[test]
fn a_killed_import_leaves_the_database_as_it_was() {
    each_backend(|backend| {
        let (dir, mut db) = temp(backend);
        let export = dir.path().join("big.jsonl");
        let bytes = write_export(&export, 4, 5_000);
        assert!(
            exec(
                &db,
                "keep",
                r#"{"command":"create","path":"/memories/k","file_text":"kept"}"#
            )
            .status
            .success()
        );
        let users = |db: &Db| {
            let out = memkv(db).arg("users").output().unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8(out.stdout).unwrap()
        };
        let before = users(&db);
        let mut killed_mid_way = 0;
        for delay_ms in [30, 80, 150, 250, 400, 600, 900] {
            let mut child = memkv(&db)
                .arg("import")
                .arg(&export)
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            std::thread::sleep(Duration::from_millis(delay_ms));
            let finished = child.try_wait().unwrap().is_some();
            child.kill().unwrap();
            let status = child.wait().unwrap();
            let now = users(&db);
            if finished && status.success() {
                // It got to the end before the kill: all of it is there. Start over.
                assert!(now.contains("    5000"), "{now}");
                match db.file() {
                    Some(file) => std::fs::remove_file(file).unwrap(),
                    None => db = Db::fresh(backend, dir.path(), "memkv.redb"),
                }
                assert!(
                    exec(
                        &db,
                        "keep",
                        r#"{"command":"create","path":"/memories/k","file_text":"kept"}"#
                    )
                    .status
                    .success()
                );
            } else {
                killed_mid_way += 1;
                assert_eq!(now, before, "after a kill at {delay_ms} ms");
            }
            let check = memkv(&db).arg("check").output().unwrap();
            assert!(
                check.status.success(),
                "{}",
                String::from_utf8_lossy(&check.stdout)
            );
        }
        assert!(
            killed_mid_way >= 2,
            "the import finished too fast to be killed mid-way"
        );
        // And uninterrupted, it imports everything, quietly: no progress bar off a terminal.
        let out = memkv(&db).arg("import").arg(&export).output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            String::from_utf8(out.stderr).unwrap(),
            format!("imported 20000 files of 4 users, {bytes} bytes\n")
        );
        let after = users(&db);
        assert_eq!(after.lines().count(), 6, "{after}");
    });
}

#[test]
fn an_exclusive_writer_refuses_readers_with_a_hint() {
    let (_dir, db) = temp_db();
    let mut child = memkv(&db)
        .args(["exec", "--user", "u"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    writeln!(stdin, r#"{{"command":"view","path":"/memories"}}"#).unwrap();
    stdin.flush().unwrap();
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    for args in [vec!["users"], vec!["export"], vec!["exec", "--user", "v"]] {
        let out = memkv(&db)
            .args(&args)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(
            err.contains("the database is open in another process"),
            "{err}"
        );
        assert!(err.contains("--shared"), "{err}");
    }
    drop(stdin);
    assert!(child.wait().unwrap().success());
    assert!(memkv(&db).arg("users").output().unwrap().status.success());
}

/// The recorded session of the README, through the binary, byte for byte against its golden
/// transcript (regenerate deliberately, and review the diff, if PROTOCOL.md changes).
#[test]
fn recorded_session_matches_its_golden_transcript() {
    each_backend(|backend| {
        let (_dir, db) = temp(backend);
        let input = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../examples/session.jsonl"
        ))
        .unwrap();
        let out = exec(&db, "dana", &input);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let want = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/data/session.expected.jsonl"
        ))
        .unwrap();
        assert_eq!(String::from_utf8(out.stdout).unwrap(), want);
    });
}

#[test]
fn expiry_stats_and_secrets_from_the_command_line() {
    each_backend(|backend| {
        let (_dir, db) = temp(backend);
        let input = [
            r#"{"command":"create","path":"/memories/old.md","file_text":"old\n"}"#,
            r#"{"command":"create","path":"/memories/key.md","file_text":"AKIAUJZDEGXDNCF32EPF"}"#,
        ]
        .join("\n");
        let out = run_with_input(
            memkv(&db).args(["--secrets", "redact", "exec", "--user", "u"]),
            input.as_bytes(),
        );
        let answers = answers(&out);
        assert_eq!(answers[1]["is_error"], false);
        assert!(
            answers[1]["content"]
                .as_str()
                .unwrap()
                .contains("[REDACTED:<kind>]")
        );
        let cat = memkv(&db)
            .args(["cat", "-u", "u", "/memories/key.md"])
            .output()
            .unwrap();
        assert_eq!(cat.stdout, b"[REDACTED:AWS access key]");

        // Unused for a millisecond: the two processes since the files were written (the exec
        // and the cat) took longer than that, whatever the machine.
        let ttl = ["--ttl", "1ms", "--access-granularity", "0s"];
        let stats = memkv(&db).args(ttl).arg("stats").output().unwrap();
        let text = String::from_utf8(stats.stdout).unwrap();
        assert!(text.starts_with("database "), "{text}");
        // The database, the header, the user's row; then the history table.
        let row = text.lines().nth(2).unwrap();
        let cols: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(
            (cols[0], cols[1], cols[3], cols[4], cols[5]),
            ("0", "0", "2", "29", "u"),
            "{text}"
        );
        let dry = memkv(&db)
            .args(ttl)
            .args(["expire", "--dry-run"])
            .output()
            .unwrap();
        assert_eq!(String::from_utf8(dry.stdout).unwrap().lines().count(), 2);
        assert_eq!(
            String::from_utf8(dry.stderr).unwrap(),
            "would delete 2 expired files, 29 bytes\n"
        );
        let done = memkv(&db).args(ttl).arg("expire").output().unwrap();
        assert_eq!(
            String::from_utf8(done.stderr).unwrap(),
            "deleted 2 expired files, 29 bytes\n"
        );
        // Without a ttl nothing expires; the files are gone for good now.
        let users = memkv(&db).arg("users").output().unwrap();
        assert_eq!(
            String::from_utf8(users.stdout).unwrap(),
            "   FILES         BYTES  USER\n"
        );
        let bad = memkv(&db).args(["--ttl", "3q", "users"]).output().unwrap();
        assert_eq!(bad.status.code(), Some(2));
    });
}

#[test]
fn export_piped_into_import() {
    each_backend(|backend| {
        let (dir, db) = temp(backend);
        let input = [
            r#"{"command":"create","path":"/memories/a.md","file_text":"alpha\n"}"#,
            r#"{"command":"create","path":"/memories/d/b.md","file_text":"beta"}"#,
        ]
        .join("\n");
        assert!(exec(&db, "u", &input).status.success());
        let export = memkv(&db).arg("export").output().unwrap();
        assert!(export.status.success());
        assert_eq!(
            String::from_utf8(export.stderr).unwrap(),
            "exported 2 files of 1 users, 10 bytes, 2 versions\n"
        );
        let copy = Db::fresh(backend, dir.path(), "copy.redb");
        let out = run_with_input(memkv(&copy).args(["import", "-"]), &export.stdout);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            String::from_utf8(out.stderr).unwrap(),
            "imported 2 files of 1 users, 10 bytes, 2 versions\n"
        );
        let cat = memkv(&copy)
            .args(["cat", "-u", "u", "/memories/d/b.md"])
            .output()
            .unwrap();
        assert_eq!(cat.stdout, b"beta");
        // A damaged stream is refused whole, with the line.
        let mut damaged = export.stdout.clone();
        damaged.truncate(damaged.len() - 5);
        let out = run_with_input(
            memkv(Db::fresh(backend, dir.path(), "third.redb")).args(["import", "-"]),
            &damaged,
        );
        assert_eq!(out.status.code(), Some(1));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("memkv: line 7:"),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    });
}

#[test]
fn exec_answers_a_line_that_is_not_utf8_and_goes_on() {
    each_backend(|backend| {
        let (_dir, db) = temp(backend);
        let mut input =
            br#"{"command":"create","path":"/memories/a.md","file_text":"a\n"}"#.to_vec();
        input.extend_from_slice(b"\n\xff\xfe{\"command\":\"view\",\"path\":\"/memories\"}\n");
        input.extend_from_slice(b"{\"command\":\"view\",\"path\":\"/memories/a.md\"}\n");
        let out = run_with_input(memkv(&db).args(["exec", "--user", "u"]), &input);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            answers(&out),
            vec![
                json!({"content": "File created successfully at: /memories/a.md", "is_error": false}),
                json!({"content": "Error: Invalid JSON: expected value at line 1 column 1", "is_error": true}),
                json!({"content": "Here's the content of /memories/a.md with line numbers:\n     1\ta", "is_error": false}),
            ]
        );
    });
}

/// The peak resident memory of a running process, in bytes (`VmHWM` in /proc).
fn peak_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .map(|v| v.trim().parse().unwrap())
        .expect("VmHWM in /proc/PID/status");
    kib * 1024
}

#[test]
fn exec_answers_a_300_mb_line_with_bounded_memory_and_goes_on() {
    each_backend(|backend| {
        const LINE: u64 = 300 << 20;
        const RSS_BOUND: u64 = 64 << 20;
        let (_dir, db) = temp(backend);
        let mut child = memkv(&db)
            .args(["exec", "--user", "u"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        // A generator: 300 MB without a newline, written in chunks, never held whole.
        let writer = std::thread::spawn(move || {
            let chunk = vec![b'a'; 1 << 20];
            for _ in 0..LINE / chunk.len() as u64 {
                stdin.write_all(&chunk).unwrap();
            }
            stdin
                .write_all(b"\n{\"command\":\"create\",\"path\":\"/memories/after.md\",\"file_text\":\"ok\\n\"}\n")
                .unwrap();
            stdin.flush().unwrap();
            stdin // kept open until the answers are read
        });
        let mut first = String::new();
        stdout.read_line(&mut first).unwrap();
        let mut second = String::new();
        stdout.read_line(&mut second).unwrap();
        let stdin = writer.join().unwrap();
        // Measured while the process still runs, after it has read the whole line.
        let peak = peak_rss(child.id());
        drop(stdin);
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let first: Value = serde_json::from_str(&first).unwrap();
        assert_eq!(first["is_error"], true);
        let message = first["content"].as_str().unwrap();
        assert!(
            message.starts_with("Error: Invalid JSON: the line is longer than "),
            "{message}"
        );
        let second: Value = serde_json::from_str(&second).unwrap();
        assert_eq!(
            second,
            json!({"content": "File created successfully at: /memories/after.md", "is_error": false})
        );
        assert!(
            peak < RSS_BOUND,
            "peak RSS {peak} bytes for a {LINE}-byte line (bound {RSS_BOUND})"
        );
    });
}

/// `memkv settings`: the store options given with it become the store's own (the others stay
/// the defaults), `--reset` puts one back, and every later process applies them.
#[test]
fn settings_give_a_store_its_own_quota() {
    each_backend(|backend| {
        let (_dir, db) = temp(backend);
        crate::common::ok(&memkv(&db).arg("init").output().unwrap());
        let out = memkv(&db)
            .args([
                "settings",
                "--user",
                "alice",
                "--max-files",
                "1",
                "--ttl",
                "30d",
            ])
            .output()
            .unwrap();
        let text = crate::common::ok(&out);
        assert!(
            text.contains("max_files               1             the store's own"),
            "{text}"
        );
        assert!(
            text.contains("max_bytes               67108864      default"),
            "{text}"
        );
        let answers = answers(&exec(
            &db,
            "alice",
            "{\"command\":\"create\",\"path\":\"/memories/a\",\"file_text\":\"x\"}\n{\"command\":\"create\",\"path\":\"/memories/b\",\"file_text\":\"x\"}\n",
        ));
        assert_eq!(
            answers[1]["content"],
            "Error: Memory quota exceeded: at most 1 files"
        );
        let out = memkv(&db)
            .args([
                "settings",
                "--user",
                "alice",
                "--reset",
                "max_files",
                "--json",
            ])
            .output()
            .unwrap();
        let json: Value = serde_json::from_str(&crate::common::ok(&out)).unwrap();
        assert_eq!(json["own"], json!({"ttl": "30d"}));
        assert_eq!(json["effective"]["max_files"], 10_000);
        let out = memkv(&db)
            .args(["settings", "--user", "alice", "--max-files", "0"])
            .output()
            .unwrap();
        crate::common::fails(&out, 1, "max_files must be at least 1");
    });
}

/// `memkv compact` rewrites a redb file with its live data (everything still reads the same);
/// a file another process holds is refused, and a PostgreSQL URL is told what does the same.
#[test]
fn compact_rewrites_a_file_and_refuses_what_it_cannot() {
    each_backend(|backend| {
        let (_dir, db) = temp(backend);
        let input = json!({"command": "create", "path": "/memories/a.md", "file_text": "kept\n"});
        let out = run_with_input(
            memkv(&db).args(["exec", "-u", "u"]),
            format!("{input}\n").as_bytes(),
        );
        assert!(out.status.success());
        let out = memkv(&db).arg("compact").output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        match backend {
            Backend::Redb => {
                assert!(out.status.success(), "{err}");
                assert!(err.starts_with("compacted "), "{err}");
                let cat = memkv(&db)
                    .args(["cat", "-u", "u", "/memories/a.md"])
                    .output()
                    .unwrap();
                assert_eq!(cat.stdout, b"kept\n");
                // Held by a writer: refused, nothing changed.
                let mut holder = crate::common::exec_piped(&db, "u");
                let mut answers = BufReader::new(holder.0.stdout.take().unwrap());
                let stdin = holder.0.stdin.as_mut().unwrap();
                let view = json!({"command": "view", "path": "/memories"});
                writeln!(stdin, "{view}").unwrap();
                stdin.flush().unwrap();
                let mut line = String::new();
                answers.read_line(&mut line).unwrap();
                let out = memkv(&db).arg("compact").output().unwrap();
                assert_eq!(out.status.code(), Some(1));
                let err = String::from_utf8_lossy(&out.stderr);
                assert!(err.contains("open in another process"), "{err}");
            }
            Backend::Postgres => {
                assert_eq!(out.status.code(), Some(2), "{err}");
                assert!(err.contains("VACUUM FULL"), "{err}");
            }
        }
    });
}
