//! The server under test: the real `memkv serve` binary, a process of its own on a free loopback
//! port, with an admin key; its CPU time and peak memory read from `/proc`; stopped with SIGTERM
//! (and required to exit 0) when dropped.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The `memkv` binary: `MEMKV_BIN`, else `memkv` beside this example's directory
/// (`target/release/memkv` for `target/release/examples/loadgen`).
pub fn memkv_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("MEMKV_BIN") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().expect("the example's own path");
    let bin = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>/examples/loadgen")
        .join("memkv");
    assert!(
        bin.exists(),
        "{} is missing: run `cargo build --release -p memkv-cli` first, or set MEMKV_BIN",
        bin.display()
    );
    bin
}

/// A running `memkv serve`.
pub struct Served {
    pub addr: SocketAddr,
    pub key: String,
    child: Option<Child>,
}

impl Served {
    /// `memkv --db DB keys add --admin`, then `memkv --db DB serve --listen 127.0.0.1:0 ARGS`
    /// with its log in `log`; waits (at most 30 s) for the `listening on` line.
    pub fn start(db: &Path, log: &Path, args: &[String]) -> Served {
        let bin = memkv_bin();
        let out = Command::new(&bin)
            .arg("--db")
            .arg(db)
            .args(["keys", "add", "--admin"])
            .env_remove("MEMKV_KEYS")
            .output()
            .expect("run memkv keys add");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let key = String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .last()
            .unwrap()
            .to_owned();
        let mut child = Command::new(&bin)
            .arg("--db")
            .arg(db)
            .args(["serve", "--listen", "127.0.0.1:0"])
            .args(args)
            .env_remove("MEMKV_KEYS")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(log).expect("the log file"))
            .spawn()
            .expect("run memkv serve");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            let _ = tx.send(lines.next());
            for _ in lines {}
        });
        let line = match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(Some(Ok(line))) => line,
            other => {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "memkv serve did not start ({other:?}); log:\n{}",
                    std::fs::read_to_string(log).unwrap_or_default()
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
            key,
            child: Some(child),
        }
    }

    fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// CPU time used so far (user + system).
    pub fn cpu(&self) -> Duration {
        cpu_of(&format!("/proc/{}/stat", self.pid()))
    }

    /// Peak resident memory so far, in MiB.
    pub fn peak_rss_mib(&self) -> f64 {
        peak_rss_mib(&format!("/proc/{}/status", self.pid()))
    }

    /// Threads now.
    pub fn threads(&self) -> u64 {
        let status =
            std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("Threads:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    }

    /// SIGTERM, then waits (at most 60 s); panics unless the exit is 0.
    pub fn stop(mut self) {
        self.stop_inner(true);
    }

    fn stop_inner(&mut self, check: bool) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let pid = libc::pid_t::try_from(child.id()).unwrap();
        // SAFETY: kill(2) on our own child's pid, which has not been waited for yet.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                assert!(
                    !check || status.success(),
                    "memkv serve exited with {status}"
                );
                return;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                assert!(!check, "memkv serve did not exit within 60 s of SIGTERM");
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        self.stop_inner(false);
    }
}

/// User + system CPU time of the process whose `/proc/…/stat` is `stat`.
pub fn cpu_of(stat: &str) -> Duration {
    let text = std::fs::read_to_string(stat).unwrap_or_default();
    // Fields after the command name (which is in parentheses and may hold spaces).
    let rest = text.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // utime and stime are fields 14 and 15 of stat(5), the 12th and 13th after the name.
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Duration::from_micros((ticks(11) + ticks(12)) * 1_000_000 / hz)
}

/// `VmHWM` of a `/proc/…/status` file, in MiB.
pub fn peak_rss_mib(status: &str) -> f64 {
    let status = std::fs::read_to_string(status).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}
