//! The config file and the environment: every global option and every option of `serve` comes
//! from the command line, else the environment, else the config file, else its default;
//! `memkv config show` says which, with a database URL's password masked.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

use crate::common::{fails, ok, run_with_input};
use crate::serve::proc::{Served, add_key};

const BIN: &str = env!("CARGO_BIN_EXE_memkv");

fn memkv() -> Command {
    let mut c = Command::new(BIN);
    for var in ["MEMKV_DB", "MEMKV_KEYS", "MEMKV_CONFIG", "MEMKV_MAX_FILES"] {
        c.env_remove(var);
    }
    c
}

/// How many of four creates `exec` takes with these extra arguments and environment.
fn creates_taken(db: &Path, args: &[&str], env: &[(&str, &str)]) -> usize {
    let _ = std::fs::remove_file(db);
    let input: String = (0..4)
        .map(|i| {
            format!("{{\"command\":\"create\",\"path\":\"/memories/{i}\",\"file_text\":\"x\"}}\n")
        })
        .collect();
    let mut c = memkv();
    c.arg("--db")
        .arg(db)
        .args(args)
        .args(["exec", "--user", "u"]);
    for (k, v) in env {
        c.env(k, v);
    }
    let out = run_with_input(&mut c, input.as_bytes());
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["is_error"] == false)
        .count()
}

#[test]
fn the_command_line_wins_over_the_environment_which_wins_over_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("m.redb");
    let file = dir.path().join("memkv.toml");
    std::fs::write(&file, "max-files = 3\n").unwrap();
    let config = file.to_str().unwrap();
    assert_eq!(creates_taken(&db, &[], &[]), 4);
    assert_eq!(creates_taken(&db, &["--config", config], &[]), 3);
    assert_eq!(creates_taken(&db, &[], &[("MEMKV_CONFIG", config)]), 3);
    assert_eq!(
        creates_taken(&db, &["--config", config], &[("MEMKV_MAX_FILES", "2")]),
        2
    );
    assert_eq!(
        creates_taken(
            &db,
            &["--config", config, "--max-files", "1"],
            &[("MEMKV_MAX_FILES", "2")]
        ),
        1
    );
}

#[test]
fn config_show_names_each_source_and_masks_passwords() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("memkv.toml");
    std::fs::write(
        &file,
        "db = \"postgres://memkv:hunter2secret@db.internal/memkv\"\nmax_files = 500\nttl = \"30d\"\n\n[serve]\nlisten = \"0.0.0.0:7437\"\nmcp-allow-host = [\"a.example\", \"b.example\"]\nno-auth = false\n",
    )
    .unwrap();
    let out = memkv()
        .args([
            "--config",
            file.to_str().unwrap(),
            "--view-max-chars",
            "99",
            "config",
            "show",
        ])
        .env("MEMKV_MAX_BYTES", "1234")
        .output()
        .unwrap();
    let text = ok(&out);
    assert!(!text.contains("hunter2secret"), "{text}");
    for line in [
        "db = \"postgres://memkv@db.internal/memkv\"  # config file",
        "max-files = \"500\"  # config file",
        "max-bytes = \"1234\"  # environment: MEMKV_MAX_BYTES",
        "view-max-chars = \"99\"  # command line",
        "max-file-bytes = \"102400\"  # default",
        "ttl = \"30d\"  # config file",
        "[serve]",
        "listen = \"0.0.0.0:7437\"  # config file",
        "mcp-allow-host = [\"a.example\", \"b.example\"]  # config file",
        "max-in-flight = \"128\"  # default",
        "# history-max-age (not set: memkv's default, 30d)",
    ] {
        assert!(text.lines().any(|l| l == line), "{line:?} not in:\n{text}");
    }
    // What it prints is a config file memkv reads back.
    let again = dir.path().join("again.toml");
    std::fs::write(&again, &text).unwrap();
    let out = memkv()
        .args(["--config", again.to_str().unwrap(), "config", "show"])
        .output()
        .unwrap();
    let back = ok(&out);
    assert!(
        back.contains("max-files = \"500\"  # config file"),
        "{back}"
    );
}

#[test]
fn a_bad_config_file_is_refused_saying_why() {
    let dir = tempfile::tempdir().unwrap();
    for (text, wanted) in [
        ("colour = \"blue\"\n", "unknown option \"colour\""),
        ("[serve]\nnope = 1\n", "unknown option \"serve.nope\""),
        ("serve = 1\n", "`serve` must be a table"),
        ("max-files = = 1\n", "not a TOML file"),
        (
            "max-files = { a = 1 }\n",
            "must be a string, a number or a boolean",
        ),
        ("config = \"other.toml\"\n", "cannot name another file"),
    ] {
        let file = dir.path().join("bad.toml");
        std::fs::write(&file, text).unwrap();
        let out = memkv()
            .args(["--config", file.to_str().unwrap(), "users"])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        fails(&out, 2, wanted);
    }
    let out: Output = memkv()
        .args(["--config", "/nonexistent/memkv.toml", "users"])
        .output()
        .unwrap();
    fails(&out, 2, "/nonexistent/memkv.toml");
    // A value the option refuses: the file, the key, the value and why.
    let file = dir.path().join("bad.toml");
    for (text, wanted) in [
        (
            "max-files = \"many\"\n",
            "max-files = \"many\": invalid value 'many' for '--max-files <N>'",
        ),
        (
            "[serve]\nmax-connections = \"x\"\n",
            "serve.max-connections = \"x\": invalid value 'x'",
        ),
        ("ttl = \"soon\"\n", "ttl = \"soon\": invalid value 'soon'"),
    ] {
        std::fs::write(&file, text).unwrap();
        let out = memkv()
            .args(["--config", file.to_str().unwrap(), "users"])
            .output()
            .unwrap();
        fails(&out, 2, &format!("{}: {wanted}", file.display()));
    }
}

/// `serve` takes its options from the file's [serve] table too.
#[test]
fn serve_reads_its_table() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("m.redb");
    let key = add_key(&db, &["--store", "alice"]);
    let file = dir.path().join("memkv.toml");
    std::fs::write(&file, "[serve]\nlog-format = \"json\"\nmax-blocks = 1\n").unwrap();
    let mut server = Served::start(&db, &["--config", file.to_str().unwrap()]);
    let mut alice = crate::serve::client::Client::with_key(server.addr, &key);
    let two = br#"[{"type":"tool_use","id":"a","name":"memory","input":{"command":"view","path":"/memories"}},{"type":"tool_use","id":"b","name":"memory","input":{"command":"view","path":"/memories"}}]"#;
    assert_eq!(alice.tool("alice", two).status, 413);
    assert!(server.stop_with(libc::SIGTERM).success());
    let log = server.log();
    assert!(
        log.lines()
            .all(|l| serde_json::from_str::<Value>(l).is_ok()),
        "{log}"
    );
}
