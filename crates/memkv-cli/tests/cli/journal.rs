//! The redb journal (`DB.journal`, docs/design.md, Crash consistency) with real processes: a
//! writer killed (SIGKILL) leaves its acknowledged commits in the journal only, and the next open,
//! read-only or not, replays them; a journal left beside another database is refused, and
//! replayed once it is back beside its own.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use serde_json::json;

use crate::common::{self, fails, ok};

fn journal_of(db: &Path) -> PathBuf {
    db.with_file_name(format!(
        "{}.journal",
        db.file_name().unwrap().to_string_lossy()
    ))
}

/// `count` creates of `/memories/{prefix}-{i}.md`.
fn creates(prefix: &str, count: usize) -> Vec<serde_json::Value> {
    (0..count)
        .map(|i| json!({"command": "create", "path": format!("/memories/{prefix}-{i}.md"), "file_text": "kept\n"}))
        .collect()
}

/// Runs `commands` through one `memkv exec`, each answer awaited (acknowledged) and a success,
/// then kills the process with SIGKILL.
fn acknowledge_then_kill(db: &Path, commands: &[serde_json::Value]) {
    let mut exec = common::exec_piped(db, "u");
    let mut stdin = exec.0.stdin.take().unwrap();
    let mut answers = BufReader::new(exec.0.stdout.take().unwrap());
    for command in commands {
        writeln!(stdin, "{command}").unwrap();
        stdin.flush().unwrap();
        let mut line = String::new();
        answers.read_line(&mut line).unwrap();
        assert!(line.contains("\"is_error\":false"), "{line}");
    }
    exec.0.kill().unwrap();
    exec.0.wait().unwrap();
}

/// The files of store `u` (none when the store does not exist).
fn files(db: &Path) -> Vec<String> {
    let out = common::run_with_input(common::memkv(db).args(["tree", "-u", "u"]), b"");
    if common::stderr(&out).contains("no user \"u\"") {
        return Vec::new();
    }
    ok(&out)
        .lines()
        .map(|l| l.rsplit("  ").next().unwrap().to_owned())
        .collect()
}

#[test]
fn a_killed_writers_journal_is_replayed_by_the_next_open() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("j.redb");
    // Commits of every kind of effect: puts, removals, a directory's range removal (a
    // directory delete), renames, history.
    let mut commands = creates("acked", 30);
    commands.extend(creates("dir/gone", 5));
    commands.extend([
        json!({"command": "delete", "path": "/memories/dir"}),
        json!({"command": "rename", "old_path": "/memories/acked-0.md", "new_path": "/memories/moved.md"}),
        json!({"command": "str_replace", "path": "/memories/acked-1.md", "old_str": "kept", "new_str": "edited"}),
    ]);
    acknowledge_then_kill(&db, &commands);
    let journal = journal_of(&db);
    assert!(
        std::fs::metadata(&journal).unwrap().len() > 24,
        "the acknowledged commits are not in the journal"
    );
    // The file alone holds the last checkpoint, the process's first commit: without its
    // journal, a copy lacks every acknowledged write after it.
    let alone = dir.path().join("alone.redb");
    std::fs::copy(&db, &alone).unwrap();
    assert_eq!(files(&alone), ["/memories/acked-0.md"]);
    // A read-only command on the original replays the journal first, then removes it.
    let mut listed = files(&db);
    listed.sort();
    let mut expected: Vec<String> = (1..30).map(|i| format!("/memories/acked-{i}.md")).collect();
    expected.push("/memories/moved.md".into());
    expected.sort();
    assert_eq!(listed, expected);
    let cat = ok(&common::run_with_input(
        common::memkv(&db).args(["cat", "-u", "u", "/memories/acked-1.md"]),
        b"",
    ));
    assert_eq!(cat, "edited\n");
    assert!(!journal.exists());
    let check = ok(&common::run_with_input(
        common::memkv(&db).arg("check"),
        b"",
    ));
    assert!(check.contains("every invariant holds"), "{check}");
    // A clean exit leaves no journal either: the file alone is the database.
    ok(&common::run_with_input(
        common::memkv(&db).args(["exec", "-u", "u"]),
        format!(
            "{}\n",
            json!({"command": "create", "path": "/memories/clean.md", "file_text": "x"})
        )
        .as_bytes(),
    ));
    assert!(!journal.exists());
    std::fs::copy(&db, &alone).unwrap();
    assert_eq!(files(&alone).len(), 31);
    // The history replayed too: the edited memory has its two versions.
    let history = ok(&common::run_with_input(
        common::memkv(&db).args(["history", "-u", "u", "--json", "/memories/acked-1.md"]),
        b"",
    ));
    let operations: Vec<String> = history
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["operation"].to_string())
        .collect();
    assert_eq!(operations.len(), 2, "{history}");
}

#[test]
fn a_journal_beside_another_database_is_refused_and_replayed_beside_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("j.redb");
    acknowledge_then_kill(&db, &creates("first", 5));
    // The database is moved away and a new one is created under its name, beside the journal.
    let moved = dir.path().join("moved.redb");
    std::fs::rename(&db, &moved).unwrap();
    fails(
        &common::run_with_input(common::memkv(&db).arg("init"), b""),
        1,
        "belongs to another database",
    );
    assert_eq!(
        files(&moved),
        ["/memories/first-0.md"],
        "the commits after the first were only in the journal"
    );
    // Back beside its own database, the journal is replayed.
    std::fs::rename(journal_of(&db), journal_of(&moved)).unwrap();
    assert_eq!(files(&moved).len(), 5);
    assert!(!journal_of(&moved).exists());
}
