//! A full disk, for real: memkv on a small tmpfs that the test mounts (as root; skipped with a
//! visible message otherwise). The same process must go on writing once space returns; and
//! while the disk stays full, the writes that free space (delete, rename, expire, prune, redact,
//! on every face) must still commit, through the disk reserve, while growing writes are refused
//! with a clear error.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use serde_json::{Value, json};

use crate::serve::proc::Served;

/// A tmpfs of `size` mounted on a fresh temporary directory, unmounted when dropped.
struct SmallFs {
    dir: tempfile::TempDir,
}

impl SmallFs {
    fn mount(size: &str) -> Result<SmallFs, String> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return Err("not running as root".into());
        }
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .output()
            .map_err(|e| format!("mount: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "mount failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(SmallFs { dir })
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.dir.path()).status();
    }
}

struct Exec {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Exec {
    fn start(db: &Path, user: &str) -> Exec {
        Exec::with(db, user, &[])
    }

    fn with(db: &Path, user: &str, flags: &[&str]) -> Exec {
        let mut child = crate::common::memkv(db)
            .args(flags)
            .args(["exec", "--user", user])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Exec {
            child,
            stdin,
            stdout,
        }
    }

    fn call(&mut self, command: Value) -> Value {
        writeln!(self.stdin, "{command}").unwrap();
        self.stdin.flush().unwrap();
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"))
    }

    /// Creates 90 kB files `{prefix}0`, `{prefix}1`, … until the disk refuses one; how many fit.
    fn fill(&mut self, prefix: &str) -> usize {
        let text = "x".repeat(90_000) + "\n";
        for i in 0..400 {
            let path = format!("/memories/{prefix}{i}");
            let out = self.call(json!({"command": "create", "path": path, "file_text": text}));
            if out["is_error"] == true {
                assert_eq!(out["content"], STORAGE_FAILED);
                return i;
            }
        }
        panic!("the filesystem never filled up");
    }

    /// Ends the process; its exit code and standard error.
    fn finish(mut self) -> (Option<i32>, String) {
        drop(self.stdin);
        let mut stderr = String::new();
        std::io::Read::read_to_string(self.child.stderr.as_mut().unwrap(), &mut stderr).unwrap();
        (self.child.wait().unwrap().code(), stderr)
    }
}

/// `memkv --db DB ARGS…`: exit code, stdout, stderr.
fn memkv(db: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let out = crate::common::memkv(db)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

fn free_bytes(dir: &Path) -> u64 {
    let out = Command::new("df")
        .args(["--output=avail", "-B1"])
        .arg(dir)
        .output()
        .unwrap();
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .nth(1)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

const FULL: &str = "the disk is full; nothing was changed";

const STORAGE_FAILED: &str =
    "Error: The memory store failed; the command was not applied. Try again later.";

#[test]
fn after_a_full_disk_the_same_exec_process_goes_on_once_space_returns() {
    let fs = match SmallFs::mount("4m") {
        Ok(fs) => fs,
        Err(why) => {
            eprintln!("SKIPPED disk-full test: {why} (it mounts a small tmpfs)");
            return;
        }
    };
    let db: PathBuf = fs.path().join("memkv.redb");
    let ballast = fs.path().join("ballast");
    std::fs::write(&ballast, vec![1u8; 1 << 20]).unwrap();

    let mut exec = Exec::start(&db, "u");
    let text = "x".repeat(90_000) + "\n";
    exec.call(json!({"command": "view", "path": "/memories"}));
    let reserve = fs.path().join("memkv.redb.reserve");
    let reserve_len = || std::fs::metadata(&reserve).unwrap().len();
    let kept = reserve_len();
    assert!(kept > 0, "no reserve was kept");
    let created = exec.fill("f");
    assert!(created > 0);
    // Still full: still refused, and nothing half-done is visible.
    let out = exec.call(json!({"command": "create", "path": "/memories/late", "file_text": text}));
    assert_eq!(out["content"], STORAGE_FAILED);

    // Space returns: the very same process deletes, writes and reads again.
    std::fs::remove_file(&ballast).unwrap();
    let out = exec.call(json!({"command": "delete", "path": "/memories/f0"}));
    assert_eq!(out["content"], "Successfully deleted /memories/f0", "{out}");
    let out =
        exec.call(json!({"command": "create", "path": "/memories/after", "file_text": "back\n"}));
    assert_eq!(
        out["content"], "File created successfully at: /memories/after",
        "{out}"
    );
    let out = exec.call(json!({"command": "view", "path": "/memories/after"}));
    assert_eq!(
        out["content"],
        "Here's the content of /memories/after with line numbers:\n     1\tback"
    );
    // The reserve given up on the way (the reopen after the failure) was taken back…
    assert_eq!(reserve_len(), kept, "the reserve was not taken back");
    // … so when the disk fills again, deletes still commit.
    let refilled = exec.fill("g");
    assert!(created > 3, "{created}");
    for i in 1..=3 {
        let path = format!("/memories/f{i}");
        let out = exec.call(json!({"command": "delete", "path": path}));
        assert_eq!(
            out["content"],
            format!("Successfully deleted {path}"),
            "{out}"
        );
    }

    drop(exec.stdin);
    let mut stderr = String::new();
    std::io::Read::read_to_string(exec.child.stderr.as_mut().unwrap(), &mut stderr).unwrap();
    let status = exec.child.wait().unwrap();
    // The operator learns what failed, and the exit code says some commands were not applied.
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("the disk is full"), "stderr: {stderr}");
    assert!(!stderr.contains("Previous I/O error"), "stderr: {stderr}");

    // Every acknowledged write is there, nothing else, and every invariant holds.
    let out = crate::common::memkv(&db).arg("check").output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = crate::common::memkv(&db).args(["users"]).output().unwrap();
    let users = String::from_utf8(out.stdout).unwrap();
    // f0-f3 were deleted, `after` and the second filling added.
    let files: Vec<&str> = users.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(files[0], (created + refilled - 3).to_string(), "{users}");
    assert_eq!(files[2], "u", "{users}");
}

#[test]
fn on_a_full_disk_writes_that_free_space_still_commit_and_growing_ones_are_refused() {
    let fs = match SmallFs::mount("6m") {
        Ok(fs) => fs,
        Err(why) => {
            eprintln!("SKIPPED disk-full test: {why} (it mounts a small tmpfs)");
            return;
        }
    };
    let db: PathBuf = fs.path().join("memkv.redb");
    let reserve = fs.path().join("memkv.redb.reserve");
    let mut exec = Exec::start(&db, "u");
    let out = exec.call(json!({"command": "create", "path": "/memories/a", "file_text": "a\n"}));
    assert_eq!(out["is_error"], false, "{out}");
    // A first reserve takes at most half of what the disk had free.
    let held = std::fs::metadata(&reserve).unwrap().len();
    assert!(held > 0 && held <= 3 << 20, "reserve of {held} bytes");
    // Opened again and again, it keeps to that share of the disk.
    exec.finish();
    for _ in 0..3 {
        let mut again = Exec::start(&db, "u");
        let out = again.call(json!({"command": "view", "path": "/memories"}));
        assert_eq!(out["is_error"], false, "{out}");
        again.finish();
        let now = std::fs::metadata(&reserve).unwrap().len();
        assert!(
            now <= held + (64 << 10),
            "reserve grew from {held} to {now} bytes"
        );
    }
    let mut exec = Exec::start(&db, "u");
    let created = exec.fill("f");
    assert!(created > 3, "only {created} files fit");
    assert!(free_bytes(fs.path()) < 128 << 10, "the disk is not full");
    // Full, and nothing outside memkv frees anything: deletes and renames still commit (with
    // history kept they free nothing at all), growing writes do not.
    let out = exec.call(json!({"command": "delete", "path": "/memories/f0"}));
    assert_eq!(out["content"], "Successfully deleted /memories/f0", "{out}");
    let out = exec
        .call(json!({"command": "rename", "old_path": "/memories/f1", "new_path": "/memories/g1"}));
    assert_eq!(
        out["content"], "Successfully renamed /memories/f1 to /memories/g1",
        "{out}"
    );
    let out = exec.call(
        json!({"command": "create", "path": "/memories/late", "file_text": "x".repeat(90_000)}),
    );
    assert_eq!(out["content"], STORAGE_FAILED);
    let (code, stderr) = exec.finish();
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains(FULL), "stderr: {stderr}");
    assert!(!stderr.contains("Previous I/O error"), "stderr: {stderr}");

    // After that run, the database opens and checks fine on the same full disk.
    let (code, out, err) = memkv(&db, &["check"]);
    assert_eq!(code, Some(0), "{out}{err}");
    let (code, out, err) = memkv(&db, &["export"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("/memories/g1"), "{out}");

    // Redacting the deleted memory's last content version commits on the full disk.
    let (code, out, err) = memkv(&db, &["history", "--user", "u", "--json"]);
    assert_eq!(code, Some(0), "{err}");
    let created_version = out
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|v| v["operation"] == "created" && v["path"] == "/memories/f0")
        .unwrap_or_else(|| panic!("{out}"));
    let id = created_version["id"].as_str().unwrap();
    let (code, _, err) = memkv(&db, &["redact", "--user", "u", id]);
    assert_eq!(code, Some(0), "{err}");

    // So does pruning the history, which frees the space of the old versions inside the file:
    // growing writes then fit again, through memkv alone.
    let (code, out, err) = memkv(&db, &["--history-max-versions", "0", "prune"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.trim_end().ends_with(" u"), "{out}");
    assert!(err.contains("pruned "), "{err}");
    let mut exec = Exec::with(&db, "u", &["--history-max-versions", "0"]);
    let again = exec.fill("h");
    assert!(again > 0, "pruning freed nothing a write could use");
    let (_, stderr) = exec.finish();
    assert!(stderr.contains(FULL), "stderr: {stderr}");

    // Full again: expiry deletes every file (unused for over a millisecond).
    let (code, out, err) = memkv(
        &db,
        &["--ttl", "1ms", "--access-granularity", "1ms", "expire"],
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("/memories/g1"), "{out}");
    let (code, out, err) = memkv(&db, &["tree", "--user", "u"]);
    assert_eq!((code, out.as_str()), (Some(0), ""), "{err}");
    let (code, out, err) = memkv(&db, &["check"]);
    assert_eq!(code, Some(0), "{out}{err}");
    // A growing write on a full disk is refused by every operator command with the same words.
    let dir = tempfile::tempdir().unwrap();
    // More than any room left after the fill below: 2 MB.
    for i in 0..20 {
        std::fs::write(dir.path().join(format!("big{i}.md")), "y".repeat(100_000)).unwrap();
    }
    let mut exec = Exec::start(&db, "v");
    exec.fill("k");
    exec.finish();
    let from = dir.path().to_str().unwrap();
    let (code, _, err) = memkv(&db, &["import", "--user", "w", "--from-dir", from]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains(FULL), "{err}");
}

/// The HTTP faces on a full disk: the memory tool answers the model's usual failure, the
/// memory-stores API answers 507 to a growing write and commits deletes and redactions.
#[test]
fn serve_on_a_full_disk_answers_507_and_still_deletes() {
    use std::io::Read;
    use std::net::TcpStream;
    let fs = match SmallFs::mount("6m") {
        Ok(fs) => fs,
        Err(why) => {
            eprintln!("SKIPPED disk-full test: {why} (it mounts a small tmpfs)");
            return;
        }
    };
    let db: PathBuf = fs.path().join("memkv.redb");
    let keys = tempfile::tempdir().unwrap();
    let keys = keys.path().join("keys");
    let mut served = Served::start(&db, &["--no-auth", "--keys", keys.to_str().unwrap()]);
    let addr = served.addr;
    let request = |method: &str, path: &str, body: Option<Value>| -> (u16, Value) {
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        let mut s = TcpStream::connect(addr).unwrap();
        write!(
            s,
            "{method} {path} HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut answer = String::new();
        s.read_to_string(&mut answer).unwrap();
        let status = answer[9..12].parse().unwrap();
        let body = answer.split_once("\r\n\r\n").unwrap().1;
        (status, serde_json::from_str(body).unwrap_or(Value::Null))
    };
    let text = "x".repeat(90_000);
    let mut filled = false;
    for i in 0..400 {
        let (status, out) = request(
            "POST",
            "/v1/memory_stores/u/tool",
            Some(
                json!({"command": "create", "path": format!("/memories/f{i}"), "file_text": text}),
            ),
        );
        assert_eq!(status, 200);
        if out["is_error"] == true {
            assert_eq!(out["content"], STORAGE_FAILED);
            filled = true;
            break;
        }
    }
    assert!(filled, "the filesystem never filled up");
    let (status, out) = request(
        "POST",
        "/v1/memory_stores/u/memories",
        Some(json!({"path": "/late.md", "content": text})),
    );
    assert_eq!(status, 507, "{out}");
    assert_eq!(out["error"]["type"], "api_error", "{out}");
    assert!(
        out["error"]["message"].as_str().unwrap().contains("disk"),
        "{out}"
    );

    let (status, list) = request("GET", "/v1/memory_stores/u/memories", None);
    assert_eq!(status, 200, "{list}");
    let id = list["data"][0]["id"].as_str().unwrap().to_owned();
    let (status, out) = request(
        "DELETE",
        &format!("/v1/memory_stores/u/memories/{id}"),
        None,
    );
    assert!((200..300).contains(&status), "{status} {out}");
    let (status, out) = request(
        "POST",
        "/v1/memory_stores/u/tool",
        Some(json!({"command": "delete", "path": "/memories/f1"})),
    );
    assert_eq!(
        (status, &out["content"]),
        (200, &json!("Successfully deleted /memories/f1"))
    );

    let status = served.stop_with(libc::SIGTERM);
    let stderr = served.log();
    assert!(status.success(), "{stderr}");
    assert!(stderr.contains(FULL), "{stderr}");
    let (code, out, err) = memkv(&db, &["check"]);
    assert_eq!(code, Some(0), "{out}{err}");
}

/// The largest delete the default quota allows in one command, on a full disk: a 60 MB
/// directory, with history kept (its content moves into the history, so the commit writes more
/// than it removes), commits with the default reserve.
#[test]
fn the_default_reserve_covers_deleting_a_whole_store() {
    let fs = match SmallFs::mount("300m") {
        Ok(fs) => fs,
        Err(why) => {
            eprintln!("SKIPPED disk-full test: {why} (it mounts a small tmpfs)");
            return;
        }
    };
    let db: PathBuf = fs.path().join("memkv.redb");
    let mut exec = Exec::start(&db, "u");
    let text = "y".repeat(100_000) + "\n";
    for i in 0..600 {
        let path = format!("/memories/d/f{i}");
        let out = exec.call(json!({"command": "create", "path": path, "file_text": text}));
        assert_eq!(out["is_error"], false, "{out}");
    }
    // Everything else on the disk fills it up.
    let mut ballast = std::fs::File::create(fs.path().join("ballast")).unwrap();
    let chunk = vec![b'z'; 1 << 16];
    let full = (0..10_000).find_map(|_| ballast.write_all(&chunk).err());
    assert_eq!(
        full.map(|e| e.kind()),
        Some(std::io::ErrorKind::StorageFull)
    );
    let out = exec.call(json!({"command": "create", "path": "/memories/x", "file_text": text}));
    assert_eq!(out["content"], STORAGE_FAILED);
    let out = exec.call(json!({"command": "delete", "path": "/memories/d"}));
    assert_eq!(out["content"], "Successfully deleted /memories/d", "{out}");
    let (code, stderr) = exec.finish();
    assert_eq!(code, Some(1), "{stderr}");
    let (code, out, err) = memkv(&db, &["check"]);
    assert_eq!(code, Some(0), "{out}{err}");
}
