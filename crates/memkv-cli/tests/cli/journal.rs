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
/// then kills the process with SIGKILL. A new database is made by `memkv init` first, so that
/// the exec's first commit (redb-durable, as every process's first) is its first command's
/// rather than the database identity's.
fn acknowledge_then_kill(db: &Path, commands: &[serde_json::Value]) {
    if !db.exists() {
        ok(&common::run_with_input(common::memkv(db).arg("init"), b""));
    }
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

/// Where each record of the journal at `path` starts (format 2: a 40-byte header, then frames
/// of a `u32` length, the salt and a checksum, 20 bytes, before the payload).
fn record_offsets(path: &Path) -> Vec<u64> {
    let bytes = std::fs::read(path).unwrap();
    let salt = &bytes[24..32];
    let mut at = 40;
    let mut out = Vec::new();
    while at + 20 <= bytes.len() && &bytes[at + 4..at + 12] == salt {
        out.push(at as u64);
        at += 20 + u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
    }
    out
}

/// Runs `command` with no input, and fails the test if it has not ended after 60 s (a command
/// that waits on a FIFO would never end).
fn bounded(command: &mut std::process::Command) -> std::process::Output {
    let mut child = command
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > std::time::Duration::from_secs(60) {
            child.kill().unwrap();
            panic!("{command:?} still runs after 60 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn a_damaged_record_before_acknowledged_ones_is_refused_until_the_loss_is_accepted() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("j.redb");
    // The first commit is a checkpoint; the nine after it are journaled.
    acknowledge_then_kill(&db, &creates("acked", 10));
    let journal = journal_of(&db);
    let offsets = record_offsets(&journal);
    assert_eq!(offsets.len(), 9, "{offsets:?}");
    // One flipped byte inside record 6 of 9: records 7-9 were acknowledged and are intact.
    let mut bytes = std::fs::read(&journal).unwrap();
    bytes[offsets[5] as usize + 30] ^= 0x40;
    std::fs::write(&journal, &bytes).unwrap();
    for args in [&["tree", "-u", "u"][..], &["check"], &["init"]] {
        let out = bounded(common::memkv(&db).args(args));
        fails(&out, 1, &format!("(at byte {})", offsets[5]));
        let message = common::stderr(&out);
        assert!(
            message.contains("j.redb.journal") && message.contains("--accept-journal-loss"),
            "{message}"
        );
    }
    assert_eq!(
        std::fs::read(&journal).unwrap(),
        bytes,
        "the journal is kept"
    );
    // The operator accepts the loss: the five intact records are replayed, the rest given up.
    let out = bounded(common::memkv(&db).args(["check", "--accept-journal-loss"]));
    assert!(ok(&out).contains("every invariant holds"));
    assert!(
        common::stderr(&out).contains(&format!(
            "damaged at byte {}: 5 intact commit(s)",
            offsets[5]
        )),
        "{}",
        common::stderr(&out)
    );
    assert!(!journal.exists());
    assert_eq!(
        std::fs::read(dir.path().join("j.redb.journal.damaged")).unwrap(),
        bytes
    );
    let mut listed = files(&db);
    listed.sort();
    let mut expected: Vec<String> = (0..6).map(|i| format!("/memories/acked-{i}.md")).collect();
    expected.sort();
    assert_eq!(listed, expected);
}

#[cfg(unix)]
#[test]
fn a_fifo_or_a_link_beside_the_database_is_refused_at_once_and_never_followed() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("j.redb");
    ok(&common::run_with_input(common::memkv(&db).arg("init"), b""));
    let journal = journal_of(&db);
    let create = format!(
        "{}\n",
        json!({"command": "create", "path": "/memories/a.md", "file_text": "x"})
    );
    // A FIFO: no command waits on it.
    let name = std::ffi::CString::new(journal.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: `name` is a valid C string that lives through the call.
    assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
    for args in [&["check"][..], &["exec", "-u", "u"]] {
        let out = bounded(common::memkv(&db).args(args));
        fails(&out, 1, "a FIFO, not a regular file");
    }
    std::fs::remove_file(&journal).unwrap();
    // A dangling link: its target is never created.
    let target = dir.path().join("elsewhere");
    std::os::unix::fs::symlink(&target, &journal).unwrap();
    let out = bounded(common::memkv(&db).args(["exec", "-u", "u"]));
    fails(&out, 1, "a symbolic link, not a regular file");
    assert!(!target.exists());
    std::fs::remove_file(&journal).unwrap();
    // A link named like the reserve, to someone else's file: not followed, nothing cut.
    let other = dir.path().join("other.bin");
    std::fs::write(&other, vec![7u8; 5 << 20]).unwrap();
    let reserve = dir.path().join("j.redb.reserve");
    let _ = std::fs::remove_file(&reserve);
    std::os::unix::fs::symlink(&other, &reserve).unwrap();
    let out = common::run_with_input(
        common::memkv(&db).args(["exec", "-u", "u"]),
        create.as_bytes(),
    );
    assert!(ok(&out).contains("File created successfully"));
    assert_eq!(std::fs::metadata(&other).unwrap().len(), 5 << 20);
    assert!(std::fs::read(&other).unwrap().iter().all(|&b| b == 7));
}

#[cfg(unix)]
#[test]
fn a_reader_who_may_not_write_is_told_the_journal_needs_replaying_and_changes_nothing() {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("j.redb");
    acknowledge_then_kill(&db, &creates("acked", 4));
    let journal = journal_of(&db);
    let before = (
        std::fs::read(&db).unwrap(),
        std::fs::read(&journal).unwrap(),
    );
    use std::os::unix::fs::PermissionsExt;
    let set = |path: &Path, mode: u32| {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    };
    // Readable by anyone, writable by the owner (root here) only.
    set(dir.path(), 0o755);
    set(&db, 0o644);
    set(&journal, 0o644);
    let reader = |args: &[&str]| {
        let mut c = if root {
            // Another user than the files' owner.
            let mut c = std::process::Command::new("setpriv");
            c.args(["--reuid=nobody", "--regid=nogroup", "--clear-groups"])
                .arg(env!("CARGO_BIN_EXE_memkv"));
            c
        } else {
            set(dir.path(), 0o555);
            set(&db, 0o444);
            std::process::Command::new(env!("CARGO_BIN_EXE_memkv"))
        };
        c.arg("--db").arg(&db).args(args).env_remove("MEMKV_DB");
        bounded(&mut c)
    };
    for args in [&["tree", "-u", "u"][..], &["check"], &["users"]] {
        let out = reader(args);
        // (A writer killed leaves redb's repair to do, before the journal's replay.)
        fails(&out, 1, "a writer stopped mid-write");
        assert!(
            common::stderr(&out).contains("needs write access to the file and its directory"),
            "{}",
            common::stderr(&out)
        );
    }
    set(dir.path(), 0o755);
    set(&db, 0o644);
    assert_eq!(
        (
            std::fs::read(&db).unwrap(),
            std::fs::read(&journal).unwrap()
        ),
        before,
        "nothing changed"
    );
    // The owner's read-only command replays it; then anyone may read.
    assert_eq!(files(&db).len(), 4);
    assert!(ok(&reader(&["tree", "-u", "u"])).contains("acked-3.md"));
}

#[cfg(unix)]
#[test]
fn the_database_its_journal_reserve_and_directory_are_its_owners_alone() {
    use std::os::unix::fs::PermissionsExt;
    // SAFETY: umask has no preconditions; 022 is the common default the files must not follow.
    unsafe { libc::umask(0o022) };
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("data/memkv/j.redb");
    let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
    // A killed writer leaves its journal; every file was made for its owner alone.
    acknowledge_then_kill(&db, &creates("private", 3));
    assert_eq!(mode(&db), 0o600);
    assert_eq!(mode(&journal_of(&db)), 0o600);
    assert_eq!(mode(&dir.path().join("data/memkv/j.redb.reserve")), 0o600);
    assert_eq!(mode(&dir.path().join("data/memkv")), 0o700);
    assert_eq!(mode(&dir.path().join("data")), 0o700);
}
