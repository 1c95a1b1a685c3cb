//! Starting and stopping `memkv serve` processes.

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub fn memkv(db: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_memkv"));
    c.arg("--db")
        .arg(db)
        .env_remove("MEMKV_DB")
        .env_remove("MEMKV_KEYS");
    c
}

pub fn temp_db() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("memkv.redb");
    (dir, db)
}

/// `memkv keys add ARGS`: the key, from the last line of stdout.
pub fn add_key(db: &Path, args: &[&str]) -> String {
    let out = memkv(db).args(["keys", "add"]).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let key = text.lines().last().unwrap().to_owned();
    assert!(key.starts_with("mkv_") && key.len() == 68, "{text}");
    key
}

/// A running `memkv serve`; stopped (SIGTERM, then SIGKILL after 20 s) when dropped.
pub struct Served {
    pub addr: SocketAddr,
    child: Option<Child>,
    stderr: Arc<Mutex<String>>,
    stdout: Arc<Mutex<String>>,
    /// The threads reading stdout and stderr: they end at the pipes' end, once the server exits.
    readers: Vec<std::thread::JoinHandle<()>>,
}

impl Served {
    /// Starts `memkv --db DB serve --listen 127.0.0.1:0 ARGS` and waits (at most 30 s) for its
    /// `listening on` line.
    pub fn start(db: &Path, args: &[&str]) -> Served {
        let mut child = memkv(db)
            .args(["serve", "--listen", "127.0.0.1:0"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        let more = Arc::new(Mutex::new(String::new()));
        let rest = Arc::clone(&more);
        let out_reader = std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            let _ = tx.send(lines.next());
            // Anything more on stdout is a defect (checked when stopped): it holds one line.
            for line in lines.map_while(Result::ok) {
                rest.lock().unwrap().push_str(&line);
            }
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let log = Arc::clone(&stderr);
        let mut err = child.stderr.take().unwrap();
        let err_reader = std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = err.read(&mut buf) {
                if n == 0 {
                    break;
                }
                log.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        let line = match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(Some(Ok(line))) => line,
            other => {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "no listening line ({other:?}); stderr:\n{}",
                    stderr.lock().unwrap()
                );
            }
        };
        let addr = line
            .strip_prefix("listening on http://")
            .unwrap_or_else(|| panic!("{line:?}"))
            .parse()
            .unwrap();
        Served {
            addr,
            child: Some(child),
            stderr,
            stdout: more,
            readers: vec![out_reader, err_reader],
        }
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("the server is running").id()
    }

    /// What the server logged so far.
    pub fn log(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// The server's stderr once it has a line for which `wanted` holds (a response can reach
    /// the client before its log line is written and read): at most 10 s, then what there is.
    pub fn log_with(&self, wanted: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let log = self.log();
            if log.lines().any(&wanted) || Instant::now() > deadline {
                return log;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Sends `signal` and waits (at most 60 s) for the exit.
    pub fn stop_with(&mut self, signal: libc::c_int) -> ExitStatus {
        let mut child = self.child.take().unwrap();
        let pid = libc::pid_t::try_from(child.id()).unwrap();
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(pid, signal) };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                // The server has exited, so its pipes end: the readers have everything once
                // they finish.
                for reader in self.readers.drain(..) {
                    reader.join().unwrap();
                }
                let more = self.stdout.lock().unwrap();
                assert!(more.is_empty(), "more than one line on stdout: {more}");
                return status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("the server did not exit within 60 s of signal {signal}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if self.child.is_some() {
            let status = self.stop_with(libc::SIGTERM);
            if !std::thread::panicking() {
                assert!(status.success(), "exit {status}; log:\n{}", self.log());
            }
        }
    }
}
