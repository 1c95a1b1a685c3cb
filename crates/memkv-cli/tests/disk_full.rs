//! A full disk, for real: `memkv exec` on a small tmpfs that the test mounts (as root; skipped
//! with a visible message otherwise). The same process must go on writing once space returns.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use serde_json::{Value, json};

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
        let mut child = Command::new(env!("CARGO_BIN_EXE_memkv"))
            .arg("--db")
            .arg(db)
            .args(["exec", "--user", user])
            .env_remove("MEMKV_DB")
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
}

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
    let mut created = 0;
    let mut failure = None;
    for i in 0..200 {
        let out = exec.call(
            json!({"command": "create", "path": format!("/memories/f{i}"), "file_text": text}),
        );
        if out["is_error"] == true {
            failure = Some(out);
            break;
        }
        created += 1;
    }
    let failure = failure.expect("the filesystem never filled up");
    assert!(created > 0);
    assert_eq!(failure["content"], STORAGE_FAILED);
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

    drop(exec.stdin);
    let mut stderr = String::new();
    std::io::Read::read_to_string(exec.child.stderr.as_mut().unwrap(), &mut stderr).unwrap();
    let status = exec.child.wait().unwrap();
    // The operator learns what failed, and the exit code says some commands were not applied.
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("No space left on device"),
        "stderr: {stderr}"
    );
    assert!(!stderr.contains("Previous I/O error"), "stderr: {stderr}");

    // Every acknowledged write is there, nothing else, and every invariant holds.
    let out = Command::new(env!("CARGO_BIN_EXE_memkv"))
        .arg("--db")
        .arg(&db)
        .arg("check")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = Command::new(env!("CARGO_BIN_EXE_memkv"))
        .arg("--db")
        .arg(&db)
        .args(["users"])
        .output()
        .unwrap();
    let users = String::from_utf8(out.stdout).unwrap();
    // f0 was deleted and `after` added.
    let files: Vec<&str> = users.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(files[0], created.to_string(), "{users}");
    assert_eq!(files[2], "u", "{users}");
}
