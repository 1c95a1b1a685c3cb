//! Operations through the binary, as a careless operator and an attacker would try them:
//! `export`, `import`, `expire`, `cat`, and how the process ends.

use std::ffi::OsStr;
use std::io::Write;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

use crate::common::{Backend, Db, Reaper, each_backend, fails, memkv, ok, run_with_input, stderr};

/// Runs `command` to its end, and fails the test (killing the process) if that takes longer
/// than `limit`.
#[track_caller]
fn run_within(command: &mut Command, limit: Duration) -> Output {
    let child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(child.wait_with_output()));
    match rx.recv_timeout(limit) {
        Ok(out) => out.unwrap(),
        Err(_) => {
            let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
            panic!("still running after {limit:?}");
        }
    }
}

#[track_caller]
/// Waits (at most 20 s) until `/proc/PID/FILE` of the running `child` satisfies `wanted`.
fn wait_for_proc(child: &mut Child, file: &str, wanted: impl Fn(&str) -> bool) {
    let path = format!("/proc/{}/{file}", child.id());
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        assert!(child.try_wait().unwrap().is_none(), "the process exited");
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        if wanted(text.trim()) {
            return;
        }
        assert!(Instant::now() < deadline, "{path}: {text:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Waits (at most 20 s) until the running `child` has a file open whose link (`/proc/PID/fd/N`)
/// satisfies `wanted`.
fn wait_for_open_file(child: &mut Child, wanted: impl Fn(&str) -> bool) {
    let dir = format!("/proc/{}/fd", child.id());
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        assert!(child.try_wait().unwrap().is_none(), "the process exited");
        let found = std::fs::read_dir(&dir)
            .into_iter()
            .flatten()
            .flatten()
            .any(|e| std::fs::read_link(e.path()).is_ok_and(|t| wanted(&t.display().to_string())));
        if found {
            return;
        }
        assert!(Instant::now() < deadline, "no such file open in {dir}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn wait_within(child: &mut Child, limit: Duration) -> ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(start.elapsed() < limit, "still running after {limit:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A database of `backend` with `files` for each user, and a fresh directory (on redb, the
/// file's).
fn database_on(backend: Backend, users: &[(&str, &[(&str, &str)])]) -> (tempfile::TempDir, Db) {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::fresh(backend, dir.path(), "memkv.redb");
    for (user, files) in users {
        let input: Vec<String> = files
            .iter()
            .map(|(path, text)| {
                serde_json::json!({"command": "create", "path": path, "file_text": text})
                    .to_string()
            })
            .collect();
        let out = run_with_input(
            memkv(&db).args(["exec", "--user", user]),
            input.join("\n").as_bytes(),
        );
        assert!(ok(&out).lines().all(|l| l.contains(r#""is_error":false"#)));
    }
    (dir, db)
}

/// A redb database file with `files` for each user.
fn database(users: &[(&str, &[(&str, &str)])]) -> (tempfile::TempDir, PathBuf) {
    let (dir, db) = database_on(Backend::Redb, users);
    (dir, db.file().unwrap().to_owned())
}

/// A fresh, empty database of `backend` (on redb, a file not yet created).
fn empty(backend: Backend) -> (tempfile::TempDir, Db) {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::fresh(backend, dir.path(), "memkv.redb");
    (dir, db)
}

/// Asserts that nothing created database `db`: no redb file, no memkv tables in the schema.
#[track_caller]
fn assert_not_created(db: &Db) {
    match db.file() {
        Some(file) => assert!(!file.exists(), "{} exists", file.display()),
        None => fails(
            &memkv(db).arg("users").output().unwrap(),
            1,
            "memkv's tables do not exist here",
        ),
    }
}

fn cat(db: impl AsRef<OsStr>, user: &str, path: &str) -> String {
    ok(&memkv(db).args(["cat", "-u", user, path]).output().unwrap())
}

fn export_all(db: impl AsRef<OsStr>, to: &Path) {
    ok(&memkv(db).arg("export").arg("-o").arg(to).output().unwrap());
}

#[test]
fn import_user_restores_only_that_user() {
    each_backend(|backend| {
        let (dir, db) = database_on(
            backend,
            &[
                ("alice", &[("/memories/a", "alice old")]),
                ("bob", &[("/memories/b", "bob old")]),
            ],
        );
        let backup = dir.path().join("backup.jsonl");
        export_all(&db, &backup);
        // Both changed after the backup.
        let (_d2, fresh) = database_on(
            backend,
            &[
                ("alice", &[("/memories/a", "alice new")]),
                ("bob", &[("/memories/b", "bob new")]),
            ],
        );
        let out = memkv(&fresh)
            .args(["import", "--replace", "--user", "alice"])
            .arg(&backup)
            .output()
            .unwrap();
        ok(&out);
        assert_eq!(
            stderr(&out),
            "imported 1 files of 1 users, 9 bytes; replaced 1; merged into 1 existing stores as new versions (the export's ids and history of them not imported)\n"
        );
        assert_eq!(cat(&fresh, "alice", "/memories/a"), "alice old");
        assert_eq!(cat(&fresh, "bob", "/memories/b"), "bob new");
        // A user the backup does not hold is refused, and nothing changes.
        let out = memkv(&fresh)
            .args(["import", "--replace", "-u", "bob", "-u", "carol"])
            .arg(&backup)
            .output()
            .unwrap();
        fails(&out, 1, "memkv: the file holds no files of user \"carol\"");
        assert_eq!(cat(&fresh, "bob", "/memories/b"), "bob new");
    });
}

#[test]
fn export_output_is_never_the_database() {
    let (dir, db) = database(&[("u", &[("/memories/a", "precious")])]);
    let link = dir.path().join("link.jsonl");
    symlink(&db, &link).unwrap();
    let hard = dir.path().join("hard.jsonl");
    std::fs::hard_link(&db, &hard).unwrap();
    let before = std::fs::read(&db).unwrap();
    let dotted = dir.path().join(".").join("memkv.redb");
    for target in [&db, &dotted, &link, &hard] {
        let out = memkv(&db)
            .arg("export")
            .arg("-o")
            .arg(target)
            .output()
            .unwrap();
        fails(&out, 1, "is the database itself");
        assert!(stderr(&out).contains(&target.display().to_string()));
        assert_eq!(std::fs::read(&db).unwrap(), before);
    }
    assert_eq!(cat(&db, "u", "/memories/a"), "precious");
    // Nor its disk reserve, which the next open would cut back or grow.
    let reserve = dir.path().join("memkv.redb.reserve");
    let held = std::fs::metadata(&reserve).unwrap().len();
    let out = memkv(&db)
        .arg("export")
        .arg("-o")
        .arg(&reserve)
        .output()
        .unwrap();
    fails(&out, 1, "is the database's disk reserve");
    assert_eq!(std::fs::metadata(&reserve).unwrap().len(), held);
    // Nothing was left beside it either.
    let mut names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "hard.jsonl",
            "link.jsonl",
            "memkv.redb",
            "memkv.redb.reserve"
        ]
    );
}

#[test]
fn export_output_is_private_exclusive_and_named_in_errors() {
    each_backend(|backend| {
        let (dir, db) = database_on(backend, &[("u", &[("/memories/a", "secret memory")])]);
        let out_dir = dir.path().join("out");
        std::fs::create_dir(&out_dir).unwrap();
        let target = out_dir.join("backup.jsonl");
        // An attacker plants links at the temporary names an export might use.
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "not yours").unwrap();
        for name in [
            "backup.memkv-export-partial",
            ".backup.jsonl.partial",
            "backup.jsonl.tmp",
        ] {
            symlink(&victim, out_dir.join(name)).unwrap();
        }
        ok(&memkv(&db)
            .arg("export")
            .arg("-o")
            .arg(&target)
            .output()
            .unwrap());
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "not yours");
        let meta = std::fs::symlink_metadata(&target).unwrap();
        assert!(meta.is_file());
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        assert!(
            std::fs::read_to_string(&target)
                .unwrap()
                .contains("secret memory")
        );
        assert_eq!(
            std::fs::read_dir(&out_dir).unwrap().count(),
            4,
            "only the links and the export"
        );

        // Errors name the path.
        let out = memkv(&db)
            .arg("export")
            .arg("-o")
            .arg(&out_dir)
            .output()
            .unwrap();
        fails(&out, 1, &format!("{}: is a directory", out_dir.display()));
        let missing = dir.path().join("no/such/dir/x.jsonl");
        let out = memkv(&db)
            .arg("export")
            .arg("-o")
            .arg(&missing)
            .output()
            .unwrap();
        fails(&out, 1, &missing.display().to_string());
        // A failed export leaves no temporary file behind.
        let out = memkv(&db)
            .args(["export", "-u", "nobody", "-o"])
            .arg(out_dir.join("second.jsonl"))
            .output()
            .unwrap();
        fails(&out, 1, "no such user: \"nobody\" has no files");
        assert_eq!(std::fs::read_dir(&out_dir).unwrap().count(), 4);
    });
}

#[test]
fn import_reads_pipes_before_locking_the_database() {
    let (dir, db) = database(&[("u", &[("/memories/a", "from the source")])]);
    let backup = dir.path().join("backup.jsonl");
    export_all(&db, &backup);
    let target = dir.path().join("target.redb");
    let fifo = dir.path().join("fifo");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let mut import = Reaper(
        memkv(&target)
            .arg("import")
            .arg(&fifo)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    // The import is blocked opening its pipe (the kernel says where it sleeps), before any
    // writer: the moment to look at the database.
    wait_for_proc(&mut import.0, "wchan", |w| {
        matches!(w, "wait_for_partner" | "fifo_open")
    });
    // While the import waits for a writer on its pipe, the database is not locked.
    let out = run_with_input(
        memkv(&target).args(["exec", "--user", "other"]),
        br#"{"command":"create","path":"/memories/x","file_text":"meanwhile"}"#,
    );
    assert!(ok(&out).contains(r#""is_error":false"#));
    // Opening the pipe for writing waits for its reader: from a thread, so that an import that
    // died early fails the test below instead of hanging it.
    let (fifo_w, text) = (fifo.clone(), std::fs::read(&backup).unwrap());
    std::thread::spawn(move || std::fs::write(fifo_w, text));
    let status = wait_within(&mut import.0, Duration::from_secs(20));
    let mut err = String::new();
    std::io::Read::read_to_string(import.0.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(status.success(), "{err}");
    assert_eq!(cat(&target, "u", "/memories/a"), "from the source");
    assert_eq!(cat(&target, "other", "/memories/x"), "meanwhile");

    // Process substitution, as the README shows.
    let third = dir.path().join("third.redb");
    let out = Command::new("bash")
        .arg("-c")
        .arg(r#""$0" --db "$1" import <(cat "$2")"#)
        .arg(env!("CARGO_BIN_EXE_memkv"))
        .arg(&third)
        .arg(&backup)
        .env_remove("MEMKV_DB")
        .output()
        .unwrap();
    ok(&out);
    assert_eq!(cat(&third, "u", "/memories/a"), "from the source");
}

#[test]
fn import_of_endless_input_stops_soon() {
    each_backend(|backend| {
        let (_dir, db) = empty(backend);
        let out = run_within(
            memkv(&db).args(["import", "/dev/zero"]),
            Duration::from_secs(20),
        );
        fails(&out, 1, "line 1: longer than");
        assert_not_created(&db);
        // Endless lines that are not an export stop at the first.
        let out = run_within(
            Command::new("bash")
                .arg("-c")
                .arg(r#"yes | "$0" --db "$1" import -"#)
                .arg(env!("CARGO_BIN_EXE_memkv"))
                .arg(&db)
                .env_remove("MEMKV_DB"),
            Duration::from_secs(20),
        );
        fails(&out, 1, "line 1: not a valid export line");
        assert_not_created(&db);
    });
}

#[test]
fn a_killed_stdin_import_leaves_no_copy_behind() {
    each_backend(|backend| {
        let (dir, db) = empty(backend);
        let tmp = dir.path().join("tmp");
        std::fs::create_dir(&tmp).unwrap();
        let mut child = Reaper(
            memkv(&db)
                .args(["import", "-"])
                .env("TMPDIR", &tmp)
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        let mut stdin = child.0.stdin.take().unwrap();
        writeln!(stdin, r#"{{"type":"header","format":"memkv-export","version":1,"created_ms":0,"created":"1970-01-01T00:00:00Z","memkv_version":"x"}}"#).unwrap();
        stdin.flush().unwrap();
        // The copy is open (an anonymous file in TMPDIR, `#… (deleted)` to the kernel): it is
        // being written (every user's data, in real use), yet has no name.
        let anonymous = tmp.display().to_string();
        wait_for_open_file(&mut child.0, |target| {
            target.starts_with(&anonymous) && target.ends_with("(deleted)")
        });
        assert!(child.0.try_wait().unwrap().is_none());
        assert_eq!(std::fs::read_dir(&tmp).unwrap().count(), 0);
        child.0.kill().unwrap();
        child.0.wait().unwrap();
        assert_eq!(std::fs::read_dir(&tmp).unwrap().count(), 0);
    });
}

#[test]
fn a_refused_import_creates_nothing() {
    each_backend(|backend| {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::fresh(backend, dir.path(), "new/folders/memkv.redb");
        let bad = dir.path().join("bad.jsonl");
        std::fs::write(&bad, "{}\n").unwrap();
        let out = memkv(&db).arg("import").arg(&bad).output().unwrap();
        fails(&out, 1, "line 1:");
        let empty = dir.path().join("empty.jsonl");
        std::fs::write(&empty, "").unwrap();
        let out = memkv(&db).arg("import").arg(&empty).output().unwrap();
        assert_eq!(stderr(&out), "memkv: the file is empty\n");
        // --from-dir --strict with a file it would skip (a name that drives a terminal).
        let src = dir.path().join("src");
        std::fs::create_dir(&src).unwrap();
        std::fs::write(src.join("ok.md"), "fine").unwrap();
        symlink("/etc/passwd", src.join("evil\u{1b}]0;pwned\u{7}\r\n.md")).unwrap();
        let out = memkv(&db)
            .args(["import", "--strict", "-u", "u", "--from-dir"])
            .arg(&src)
            .output()
            .unwrap();
        fails(&out, 1, "--strict refuses the whole import");
        assert!(!stderr(&out).contains('\u{1b}'), "{:?}", stderr(&out));
        assert!(!dir.path().join("new").exists());
        assert_not_created(&db);
        // Without --strict it goes through, and the skipped name is printed escaped.
        let out = memkv(&db)
            .args(["import", "-u", "u", "--from-dir"])
            .arg(&src)
            .output()
            .unwrap();
        ok(&out);
        assert_eq!(
            stderr(&out),
            "skipped evil\\u{1b}]0;pwned\\u{7}\\u{d}\\u{a}.md: symbolic link (not followed)\nimported 1 files of 1 users, 4 bytes\n"
        );
    });
}

#[test]
fn unknown_users_and_bad_targets_are_refused() {
    each_backend(|backend| {
        let (dir, db) = database_on(backend, &[("u", &[("/memories/d/f", "x")])]);
        let out = memkv(&db)
            .args(["export", "-u", "nobody"])
            .output()
            .unwrap();
        fails(&out, 1, "no such user: \"nobody\" has no files");
        assert!(out.stdout.is_empty());
        let to = dir.path().join("tree");
        let out = memkv(&db)
            .args(["export", "-u", "nobody", "--to-dir"])
            .arg(&to)
            .output()
            .unwrap();
        fails(&out, 1, "no such user");
        assert!(!to.exists());
        // Usage mistakes clap cannot see exit 2, like clap's own.
        for args in [
            vec!["export", "--to-dir", "x"],
            vec!["export", "-u", "u", "-u", "v", "--to-dir", "x"],
        ] {
            let out = memkv(&db).args(&args).output().unwrap();
            fails(&out, 2, "give exactly one --user");
        }
        // A regular file is not blamed on symbolic links; a non-empty directory is refused.
        let file = dir.path().join("file");
        std::fs::write(&file, "").unwrap();
        let out = memkv(&db)
            .args(["export", "-u", "u", "--to-dir"])
            .arg(&file)
            .output()
            .unwrap();
        fails(&out, 1, "exists and is not a directory");
        assert!(!stderr(&out).contains("symbolic"));
        std::fs::create_dir_all(to.join("keep")).unwrap();
        let out = memkv(&db)
            .args(["export", "-u", "u", "--to-dir"])
            .arg(&to)
            .output()
            .unwrap();
        fails(&out, 1, "is not empty");
        // cat of a directory says so.
        let out = memkv(&db)
            .args(["cat", "-u", "u", "/memories/d"])
            .output()
            .unwrap();
        fails(
            &out,
            1,
            "/memories/d: a directory of user \"u\", not a file",
        );
        let out = memkv(&db)
            .args(["cat", "-u", "u", "/memories"])
            .output()
            .unwrap();
        fails(&out, 1, "a directory");
    });
}

#[test]
fn expire_needs_a_ttl() {
    each_backend(|backend| {
        let (_dir, db) = database_on(backend, &[("u", &[("/memories/a", "x")])]);
        let out = memkv(&db).arg("expire").output().unwrap();
        fails(&out, 2, "give --ttl DURATION or --user-ttl NAME=DURATION");
        let out = memkv(&db)
            .args(["--user-ttl", "u=off", "expire"])
            .output()
            .unwrap();
        fails(&out, 2, "--ttl");
        let out = memkv(&db)
            .args(["--user-ttl", "=off", "expire"])
            .output()
            .unwrap();
        fails(&out, 2, "the user name is empty");
        ok(&memkv(&db).args(["--ttl", "1d", "expire"]).output().unwrap());
        assert_eq!(cat(&db, "u", "/memories/a"), "x");
    });
}

/// A dry run on a redb file of an older format leaves the file as it was.
#[test]
fn a_dry_run_expire_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let old = dir.path().join("old.redb");
    std::fs::copy(
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/data/format-v1.redb"
        ),
        &old,
    )
    .unwrap();
    let before = std::fs::read(&old).unwrap();
    let out = memkv(&old)
        .args(["--ttl", "1d", "expire", "--dry-run"])
        .output()
        .unwrap();
    assert_eq!(std::fs::read(&old).unwrap(), before, "{}", stderr(&out));
    fails(&out, 1, "open it once for writing");
}

#[test]
fn a_closed_pipe_ends_an_export_quietly() {
    each_backend(|backend| {
        let files: Vec<(String, String)> = (0..300)
            .map(|i| (format!("/memories/f{i}"), "x".repeat(1000)))
            .collect();
        let files: Vec<(&str, &str)> = files
            .iter()
            .map(|(p, t)| (p.as_str(), t.as_str()))
            .collect();
        let (_dir, db) = database_on(backend, &[("u", &files)]);
        // The reader goes away at once; the export (300 kB) cannot fit in the pipe.
        let mut child = Reaper(
            memkv(&db)
                .arg("export")
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap(),
        );
        drop(child.0.stdout.take());
        let status = wait_within(&mut child.0, Duration::from_secs(20));
        let mut err = String::new();
        std::io::Read::read_to_string(child.0.stderr.as_mut().unwrap(), &mut err).unwrap();
        assert_eq!(err, "");
        assert_eq!(status.code(), Some(141));
        // With standard error closed too: the same, never a panic.
        let out = Command::new("bash")
            .arg("-c")
            .arg(r#""$0" --db "$1" export 2>&- | head -c 10 >/dev/null; echo "${PIPESTATUS[0]}""#)
            .arg(env!("CARGO_BIN_EXE_memkv"))
            .arg(&db)
            .env_remove("MEMKV_DB")
            .output()
            .unwrap();
        assert_eq!(ok(&out), "141\n");
        let bash = Command::new("bash")
            .arg("-c")
            .arg(r#""$0" --db "$1" users 2>&- >&-; echo $?"#)
            .arg(env!("CARGO_BIN_EXE_memkv"))
            .arg(&db)
            .output()
            .unwrap();
        assert_ne!(ok(&bash), "101\n");
    });
}

/// PROTOCOL.md pins the template `at most {limit} files` byte for byte, so the model reads it
/// unchanged even for a limit of 1.
#[test]
fn quota_of_one_file_keeps_the_protocol_template() {
    each_backend(|backend| {
        let (_dir, db) = empty(backend);
        let out = run_with_input(
            memkv(&db).args(["--max-files", "1", "exec", "-u", "u"]),
            b"{\"command\":\"create\",\"path\":\"/memories/a\",\"file_text\":\"\"}\n{\"command\":\"create\",\"path\":\"/memories/b\",\"file_text\":\"\"}\n",
        );
        assert!(
            ok(&out).contains("Error: Memory quota exceeded: at most 1 files\""),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
    });
}

#[test]
fn from_dir_skips_an_over_size_file_without_reading_it() {
    each_backend(|backend| {
        let (dir, db) = empty(backend);
        let src = dir.path().join("src");
        std::fs::create_dir(&src).unwrap();
        std::fs::write(src.join("ok.md"), "fine").unwrap();
        // 3 GB, sparse: costs no disk, but reading it whole would need 3 GB of memory, more than
        // the 1 GB address space the import is given.
        std::fs::File::create(src.join("huge.md"))
            .unwrap()
            .set_len(3 << 30)
            .unwrap();
        let out = Command::new("bash")
            .arg("-c")
            .arg(r#"ulimit -v 1048576 && exec "$0" --db "$1" import -u u --from-dir "$2""#)
            .arg(env!("CARGO_BIN_EXE_memkv"))
            .arg(&db)
            .arg(&src)
            .env_remove("MEMKV_DB")
            .output()
            .unwrap();
        ok(&out);
        assert_eq!(
            stderr(&out),
            "skipped huge.md: larger than the file-size limit (102400 bytes)\nimported 1 files of 1 users, 4 bytes\n"
        );
        // --strict refuses it.
        let out = memkv(&db)
            .args(["import", "--strict", "-u", "v", "--from-dir"])
            .arg(&src)
            .output()
            .unwrap();
        fails(&out, 1, "huge.md: larger than the file-size limit");
    });
}
