//! `memkv sync` side by side with the anthropic SDK's own memory sync (`SessionMemoryStores`,
//! what its environment worker runs for a session), both against one real `memkv serve` on
//! loopback, in one run; prints the table of BENCHMARKS.md, Sync (issue 44's targets).
//!
//! ```sh
//! tools/bench-sync.sh         # builds the release binary and the SDK's virtualenv, then runs this
//! cargo bench --profile dev -p memkv-bench-compare --bench sync -- --memkv PATH [--python PATH] [--writes N]
//!     [--idle-seconds N] [--files N] [--bytes-each N] [--interval S] [--keep]
//! ```
//!
//! For each side, on a store of its own: a folder of `--files` files (`--bytes-each` bytes each,
//! in 20 folders) synced to the empty store, then the store synced to an empty folder (the first
//! sync each way, timed); then both folders kept in step by a sync each (memkv: two `memkv sync`
//! daemons; the SDK: two processes of tools/sdk_sync_bench.py, each calling `sync_if_due()`
//! every 0.1 s at the SDK's smallest interval, 5 s) and left alone for `--idle-seconds` (the
//! CPU time of each from /proc/PID/stat, and the server's requests by route from its /metrics);
//! then `--writes` writes into folder A, one every 0.5–1.5 s (uniformly at random, so that they
//! fall anywhere in the SDK's cycle), each a new content for a file no earlier write is still
//! on its way for, and the time until folder B holds it (looked at every 2 ms).
//!
//! Relative paths are taken from the workspace's root. Without `--python` the SDK's side is left
//! out. Everything runs in a scratch folder under
//! cargo's target tmp dir (on the real disk), removed at the end unless `--keep`; every process
//! started here is stopped at the end, also on a panic (each is killed when dropped).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

struct Options {
    memkv: PathBuf,
    python: Option<PathBuf>,
    writes: usize,
    idle: f64,
    files: usize,
    bytes_each: usize,
    interval: f64,
    keep: bool,
}

fn options() -> Options {
    let mut args = std::env::args().skip(1);
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut o = Options {
        memkv: root.join("target/release/memkv"),
        python: None,
        writes: 200,
        idle: 60.0,
        files: 2_000,
        bytes_each: 10_000,
        interval: 5.0,
        keep: false,
    };
    let num = |v: Option<String>, what: &str| -> f64 {
        v.and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("{what} N"))
    };
    while let Some(a) = args.next() {
        match a.as_str() {
            "--memkv" => o.memkv = args.next().map(PathBuf::from).expect("--memkv PATH"),
            "--python" => o.python = args.next().map(PathBuf::from),
            "--writes" => o.writes = num(args.next(), "--writes") as usize,
            "--idle-seconds" => o.idle = num(args.next(), "--idle-seconds"),
            "--files" => o.files = num(args.next(), "--files") as usize,
            "--bytes-each" => o.bytes_each = num(args.next(), "--bytes-each") as usize,
            "--interval" => o.interval = num(args.next(), "--interval"),
            "--keep" => o.keep = true,
            "--bench" => {}
            other => panic!("unknown argument {other}"),
        }
    }
    // `cargo bench` runs this in the package's folder: a relative path is the workspace's.
    o.memkv = root.join(&o.memkv);
    o.python = o
        .python
        .map(|p| if p.is_relative() { root.join(p) } else { p });
    o
}

/// A child process killed (and reaped) when dropped, whatever happened before.
struct Proc {
    child: Child,
    what: String,
}

impl Proc {
    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGTERM, then SIGKILL if it has not exited within `grace`.
    fn stop(mut self, grace: Duration) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status();
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        eprintln!("{} did not stop within {grace:?}: killed", self.what);
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// User and system CPU time of a process so far (/proc/PID/stat, clock ticks of 1/100 s).
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The fields after the command's closing parenthesis: state is field 3, utime 14, stime 15.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// One HTTP/1.1 request on a connection of its own: (status, body).
fn http(addr: SocketAddr, method: &str, path: &str, key: &str, body: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).expect("the server answers");
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nhost: {addr}\r\nx-api-key: {key}\r\n\
         content-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).expect("an answer");
    let raw = String::from_utf8_lossy(&raw).into_owned();
    let (head, rest) = raw.split_once("\r\n\r\n").expect("a header");
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .expect("a status");
    let chunked = head.lines().any(|l| {
        l.to_ascii_lowercase()
            .starts_with("transfer-encoding: chunked")
    });
    let body = if chunked {
        let mut out = String::new();
        let mut rest = rest;
        while let Some((size, more)) = rest.split_once("\r\n") {
            let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
            if n == 0 {
                break;
            }
            out.push_str(&more[..n]);
            rest = &more[n + 2..];
        }
        out
    } else {
        rest.to_owned()
    };
    (status, body)
}

/// The server's request counters: (route, status) → count.
fn requests(server: &Server) -> BTreeMap<String, u64> {
    let (status, body) = http(server.addr, "GET", "/metrics", &server.key, "");
    assert_eq!(status, 200, "/metrics: {body}");
    body.lines()
        .filter_map(|l| l.strip_prefix("memkv_http_requests_total{"))
        .filter_map(|l| l.split_once("} "))
        .map(|(labels, n)| (labels.to_owned(), n.trim().parse().unwrap_or(0)))
        .collect()
}

/// Requests answered between two counters, `/metrics` left out: "route status: n" each.
fn requests_between(
    before: &BTreeMap<String, u64>,
    after: &BTreeMap<String, u64>,
) -> Vec<(String, u64)> {
    after
        .iter()
        .filter(|(k, _)| !k.contains("/metrics"))
        .map(|(k, n)| (k.clone(), n - before.get(k).copied().unwrap_or(0)))
        .filter(|(_, n)| *n > 0)
        .collect()
}

struct Server {
    proc: Proc,
    addr: SocketAddr,
    key: String,
}

fn memkv(o: &Options, db: &Path) -> Command {
    let mut c = Command::new(&o.memkv);
    c.arg("--db")
        .arg(db)
        .env_remove("MEMKV_DB")
        .env_remove("MEMKV_KEYS")
        .env_remove("MEMKV_CONFIG");
    c
}

fn start_server(o: &Options, dir: &Path) -> Server {
    let db = dir.join("memkv.redb");
    let out = memkv(o, &db)
        .args(["keys", "add", "--admin"])
        .output()
        .expect("memkv runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let key = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .last()
        .expect("the key")
        .to_owned();
    let log = std::fs::File::create(dir.join("serve.log")).unwrap();
    let mut child = memkv(o, &db)
        .args(["serve", "--listen", "127.0.0.1:0"])
        .env("MEMKV_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .expect("memkv serve starts");
    let stdout = child.stdout.take().unwrap();
    let proc = Proc {
        child,
        what: "memkv serve".into(),
    };
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut lines = BufReader::new(stdout).lines();
        let _ = tx.send(lines.next());
        for _ in lines {}
    });
    let line = match rx.recv_timeout(Duration::from_secs(30)) {
        Ok(Some(Ok(line))) => line,
        other => panic!("memkv serve: no listening line ({other:?}); see serve.log"),
    };
    let addr = line
        .strip_prefix("listening on http://")
        .unwrap_or_else(|| panic!("{line:?}"))
        .parse()
        .unwrap();
    Server { proc, addr, key }
}

fn create_store(server: &Server, name: &str) -> String {
    let (status, body) = http(
        server.addr,
        "POST",
        "/v1/memory_stores",
        &server.key,
        &format!(r#"{{"name":"{name}"}}"#),
    );
    assert!(
        status == 200 || status == 201,
        "create store: {status} {body}"
    );
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    v["id"].as_str().unwrap().to_owned()
}

/// `n` files of `bytes` each in 20 folders; the paths relative to `dir`.
fn generate(dir: &Path, n: usize, bytes: usize) -> Vec<String> {
    let mut paths = Vec::with_capacity(n);
    for i in 0..n {
        let rel = format!("topic{:02}/note{i:05}.md", i % 20);
        let p = dir.join(&rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, content(&format!("note {i}"), bytes)).unwrap();
        paths.push(rel);
    }
    paths
}

/// A first line naming the version, then Markdown-like lines, `bytes` in all.
fn content(first: &str, bytes: usize) -> String {
    let mut out = format!("# {first}\n");
    let mut i = 0;
    while out.len() < bytes {
        out.push_str(&format!(
            "- line {i:05}: the quick brown fox jumps over the lazy dog\n"
        ));
        i += 1;
    }
    out.truncate(bytes - 1);
    out.push('\n');
    out
}

/// Every file of a folder (hidden names left out): relative path → content.
fn tree(root: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_owned()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            if e.file_name().to_string_lossy().starts_with('.') {
                continue;
            }
            let t = e.file_type().unwrap();
            if t.is_dir() {
                stack.push(e.path());
            } else if t.is_file() {
                let rel = e
                    .path()
                    .strip_prefix(root)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                out.insert(rel, std::fs::read(e.path()).unwrap_or_default());
            }
        }
    }
    out
}

fn same_trees(a: &Path, b: &Path) -> bool {
    let (ta, tb) = (tree(a), tree(b));
    if ta != tb {
        let differ = ta
            .keys()
            .chain(tb.keys())
            .filter(|k| ta.get(*k) != tb.get(*k))
            .take(5)
            .collect::<Vec<_>>();
        eprintln!(
            "  the folders differ: {} vs {} files; e.g. {differ:?}",
            ta.len(),
            tb.len()
        );
        return false;
    }
    true
}

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// A write's latency from A to B: seconds, or None if B never showed it within the limit.
type Latencies = Vec<Option<f64>>;

/// `writes` writes into `a`, one every 0.5–1.5 s, each looked for in `b` until it is there (at
/// most `limit`).
fn latencies(
    a: &Path,
    b: &Path,
    paths: &[String],
    writes: usize,
    bytes: usize,
    limit: Duration,
    tag: &str,
) -> Latencies {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut out: Latencies = vec![None; writes];
    // (write, path, its first line, when written)
    let mut pending: Vec<(usize, String, String, Instant)> = Vec::new();
    let mut next_write = Instant::now();
    let mut written = 0;
    let started = Instant::now();
    while written < writes || !pending.is_empty() {
        let now = Instant::now();
        if written < writes && now >= next_write {
            let mut i = (rng.next() % paths.len() as u64) as usize;
            while pending.iter().any(|p| p.1 == paths[i]) {
                i = (i + 1) % paths.len();
            }
            let first = format!("# {tag} write {written}");
            std::fs::write(a.join(&paths[i]), content(&first[2..], bytes)).unwrap();
            pending.push((written, paths[i].clone(), first, Instant::now()));
            written += 1;
            next_write = now + Duration::from_secs_f64(0.5 + rng.unit());
        }
        pending.retain(|(w, rel, first, at)| {
            let mut head = [0u8; 64];
            let n = std::fs::File::open(b.join(rel))
                .and_then(|mut f| f.read(&mut head))
                .unwrap_or(0);
            let line = String::from_utf8_lossy(&head[..n]);
            if line.lines().next() == Some(first.as_str()) {
                out[*w] = Some(at.elapsed().as_secs_f64());
                false
            } else if at.elapsed() > limit {
                eprintln!("  write {w} ({rel}) not in B after {limit:?}");
                false
            } else {
                true
            }
        });
        if started.elapsed() > limit + Duration::from_secs_f64(2.0 * writes as f64 + 60.0) {
            eprintln!("  latency run out of time: {} writes left", pending.len());
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    out
}

/// p50, p99 and max of the writes that arrived; how many did not.
fn summary(l: &Latencies) -> (f64, f64, f64, usize) {
    let mut got: Vec<f64> = l.iter().flatten().copied().collect();
    got.sort_by(f64::total_cmp);
    let missed = l.len() - got.len();
    if got.is_empty() {
        return (f64::NAN, f64::NAN, f64::NAN, missed);
    }
    // Nearest rank; a missed write counts as longer than any that arrived.
    let rank = |q: f64| {
        let r = ((q * l.len() as f64).ceil() as usize).clamp(1, l.len());
        got.get(r - 1).copied().unwrap_or(f64::INFINITY)
    };
    (rank(0.50), rank(0.99), *got.last().unwrap(), missed)
}

/// What one side measured.
#[derive(Default)]
struct Side {
    first_up: f64,
    first_down: f64,
    first_ok: bool,
    idle_cpu: Vec<f64>,
    idle_requests: Vec<(String, u64)>,
    idle_seconds: f64,
    latency: Latencies,
    latency_cpu: Vec<f64>,
    latency_seconds: f64,
    loads: Vec<(String, String)>,
}

/// The latency phase: `o.writes` writes into `a` timed until `b` holds them, and the CPU the
/// two syncs (`pids`) used meanwhile.
fn latency_phase(
    o: &Options,
    a: &Path,
    b: &Path,
    paths: &[String],
    pids: &[u32],
    label: &str,
    side: &mut Side,
) {
    note(side, "latency");
    let cpu0: Vec<f64> = pids.iter().map(|p| cpu_seconds(*p)).collect();
    let t = Instant::now();
    side.latency = latencies(
        a,
        b,
        paths,
        o.writes,
        o.bytes_each,
        Duration::from_secs(60),
        label,
    );
    side.latency_seconds = t.elapsed().as_secs_f64();
    side.latency_cpu = pids
        .iter()
        .zip(cpu0)
        .map(|(p, c0)| cpu_seconds(*p) - c0)
        .collect();
    note(side, "latency done");
}

fn note(side: &mut Side, phase: &str) {
    let l = loadavg();
    eprintln!("  [{phase}] load average {l}");
    side.loads.push((phase.to_owned(), l));
}

fn memkv_sync(
    o: &Options,
    server: &Server,
    store: &str,
    dir: &Path,
    state: &Path,
    once: bool,
) -> Command {
    let mut c = Command::new(&o.memkv);
    c.arg("sync")
        .arg(dir)
        .args([
            "--url",
            &format!("http://{}", server.addr),
            "--store",
            store,
            "--name",
        ])
        .arg(dir.file_name().unwrap())
        .arg("--state")
        .arg(state)
        .env("MEMKV_API_KEY", &server.key)
        .env_remove("MEMKV_CONFIG")
        .env("MEMKV_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    if once {
        c.arg("--once");
    }
    c
}

fn run_memkv(o: &Options, server: &Server, scratch: &Path) -> Side {
    let mut side = Side::default();
    eprintln!("memkv sync:");
    let store = create_store(server, "sync-bench-memkv");
    let (a, b) = (scratch.join("memkv-a"), scratch.join("memkv-b"));
    std::fs::create_dir_all(&b).unwrap();
    let paths = generate(&a, o.files, o.bytes_each);
    let log = |n: &str| std::fs::File::create(scratch.join(n)).unwrap();
    // `sync` of the generated files, so that the first sync reads them from the disk's cache as
    // the SDK's side does.
    let _ = Command::new("sync").status();
    note(&mut side, "first sync, folder to store");
    let t = Instant::now();
    let st = memkv_sync(o, server, &store, &a, &scratch.join("state-a"), true)
        .stderr(log("sync-a-once.log"))
        .status()
        .unwrap();
    side.first_up = t.elapsed().as_secs_f64();
    assert!(st.success(), "memkv sync --once A: see sync-a-once.log");
    note(&mut side, "first sync, store to folder");
    let t = Instant::now();
    let st = memkv_sync(o, server, &store, &b, &scratch.join("state-b"), true)
        .stderr(log("sync-b-once.log"))
        .status()
        .unwrap();
    side.first_down = t.elapsed().as_secs_f64();
    assert!(st.success(), "memkv sync --once B: see sync-b-once.log");
    side.first_ok = same_trees(&a, &b);
    eprintln!(
        "  first sync: up {:.2} s, down {:.2} s, folders identical: {}",
        side.first_up, side.first_down, side.first_ok
    );

    let start = |dir: &Path, state: &str, logname: &str| Proc {
        child: memkv_sync(o, server, &store, dir, &scratch.join(state), false)
            .stderr(log(logname))
            .spawn()
            .unwrap(),
        what: format!("memkv sync {}", dir.display()),
    };
    let da = start(&a, "state-a", "sync-a.log");
    let db = start(&b, "state-b", "sync-b.log");
    settle(&a, &b, &paths, o.bytes_each, "memkv-settle");
    idle(o, server, &[da.pid(), db.pid()], &mut side);
    latency_phase(o, &a, &b, &paths, &[da.pid(), db.pid()], "memkv", &mut side);
    da.stop(Duration::from_secs(10));
    db.stop(Duration::from_secs(10));
    side
}

/// Waits until a probe write in A shows in B (both syncs running and in step), at most 60 s.
fn settle(a: &Path, b: &Path, paths: &[String], bytes: usize, tag: &str) {
    let l = latencies(a, b, &paths[..1], 1, bytes, Duration::from_secs(60), tag);
    eprintln!("  settled: a probe write reached B after {:?} s", l[0]);
}

/// Both syncs left alone for `--idle-seconds`: their CPU time and the server's requests.
fn idle(o: &Options, server: &Server, pids: &[u32], side: &mut Side) {
    // The syncs' own aftermath of the probe write (its debounce, the feed's answer) first.
    std::thread::sleep(Duration::from_secs(2));
    note(side, "idle");
    let before = requests(server);
    let cpu0: Vec<f64> = pids.iter().map(|p| cpu_seconds(*p)).collect();
    let t = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(o.idle));
    let secs = t.elapsed().as_secs_f64();
    side.idle_cpu = pids
        .iter()
        .zip(cpu0)
        .map(|(p, c0)| (cpu_seconds(*p) - c0) / secs * 100.0)
        .collect();
    side.idle_requests = requests_between(&before, &requests(server));
    side.idle_seconds = secs;
    note(side, "idle done");
    eprintln!(
        "  idle {secs:.0} s: CPU {:?} % of a core; requests {:?}",
        side.idle_cpu, side.idle_requests
    );
}

/// One SDK sandbox: tools/sdk_sync_bench.py, spoken to line by line.
struct Sandbox {
    proc: Proc,
    stdin: ChildStdin,
    answers: mpsc::Receiver<String>,
}

impl Sandbox {
    fn start(
        o: &Options,
        python: &Path,
        server: &Server,
        store: &str,
        mount: &Path,
        work: &Path,
        log: std::fs::File,
    ) -> Sandbox {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tools/sdk_sync_bench.py");
        let mut child = Command::new(python)
            .arg(script)
            .args([
                "--url",
                &format!("http://{}", server.addr),
                "--store",
                store,
            ])
            .arg("--mount")
            .arg(mount)
            .arg("--workdir")
            .arg(work)
            .args(["--interval", &o.interval.to_string()])
            .env("MEMKV_API_KEY", &server.key)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .expect("the Python interpreter runs");
        let stdin = child.stdin.take().unwrap();
        let stdout: ChildStdout = child.stdout.take().unwrap();
        let (tx, answers) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Sandbox {
            proc: Proc {
                child,
                what: format!("the SDK's sync of {}", mount.display()),
            },
            stdin,
            answers,
        }
    }

    /// Sends a command; its answer's number (seconds), if any.
    fn ask(&mut self, command: &str, limit: Duration) -> f64 {
        writeln!(self.stdin, "{command}").unwrap();
        self.stdin.flush().unwrap();
        let line = self.answers.recv_timeout(limit).unwrap_or_else(|e| {
            panic!(
                "{}: no answer to {command} ({e}); see its log",
                self.proc.what
            )
        });
        let rest = line
            .strip_prefix("ok")
            .unwrap_or_else(|| panic!("{}: {command}: {line}", self.proc.what));
        rest.trim().parse().unwrap_or(0.0)
    }

    fn quit(mut self) {
        let _ = writeln!(self.stdin, "quit");
        let _ = self.stdin.flush();
        let _ = self.answers.recv_timeout(Duration::from_secs(30));
        self.proc.stop(Duration::from_secs(10));
    }
}

fn run_sdk(o: &Options, python: &Path, server: &Server, scratch: &Path) -> Side {
    let mut side = Side::default();
    eprintln!(
        "the SDK's SessionMemoryStores (sync_interval {} s):",
        o.interval
    );
    let store = create_store(server, "sync-bench-sdk");
    let (a, b) = (scratch.join("sdk-a"), scratch.join("sdk-b"));
    let log = |n: &str| std::fs::File::create(scratch.join(n)).unwrap();
    let limit = Duration::from_secs(600);
    let mut sa = Sandbox::start(
        o,
        python,
        server,
        &store,
        &a,
        &scratch.join("work-a"),
        log("sdk-a.log"),
    );
    sa.ask("download", limit);
    let paths = generate(&a, o.files, o.bytes_each);
    let _ = Command::new("sync").status();
    note(&mut side, "first sync, folder to store");
    side.first_up = sa.ask("sync", limit);
    note(&mut side, "first sync, store to folder");
    let mut sb = Sandbox::start(
        o,
        python,
        server,
        &store,
        &b,
        &scratch.join("work-b"),
        log("sdk-b.log"),
    );
    side.first_down = sb.ask("download", limit);
    side.first_ok = same_trees(&a, &b);
    eprintln!(
        "  first sync: up {:.2} s, down {:.2} s, folders identical: {}",
        side.first_up, side.first_down, side.first_ok
    );
    sa.ask("loop", limit);
    sb.ask("loop", limit);
    settle(&a, &b, &paths, o.bytes_each, "sdk-settle");
    let pids = [sa.proc.pid(), sb.proc.pid()];
    idle(o, server, &pids, &mut side);
    latency_phase(o, &a, &b, &paths, &pids, "sdk", &mut side);
    sa.ask("stop", limit);
    sb.ask("stop", limit);
    sa.quit();
    sb.quit();
    side
}

fn cell_latency(s: Option<&Side>, f: impl Fn((f64, f64, f64, usize)) -> String) -> String {
    s.map_or("not run".to_owned(), |s| f(summary(&s.latency)))
}

fn main() {
    let o = options();
    assert!(
        o.memkv.exists(),
        "{} is missing: cargo build --release -p memkv-cli (or --memkv PATH)",
        o.memkv.display()
    );
    let base = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    std::fs::create_dir_all(&base).unwrap();
    let scratch = tempfile::Builder::new()
        .prefix("sync-bench-")
        .disable_cleanup(o.keep)
        .tempdir_in(&base)
        .unwrap();
    eprintln!(
        "sync bench: {} files of {} bytes, {} writes, idle {} s; scratch {}; load average {}",
        o.files,
        o.bytes_each,
        o.writes,
        o.idle,
        scratch.path().display(),
        loadavg()
    );
    let server = start_server(&o, scratch.path());
    let ours = run_memkv(&o, &server, scratch.path());
    let sdk = o
        .python
        .as_ref()
        .map(|py| run_sdk(&o, py, &server, scratch.path()));
    server.proc.stop(Duration::from_secs(20));

    let mb = (o.files * o.bytes_each) as f64 / 1e6;
    let met = |ok: bool| if ok { "yes" } else { "**no**" };
    let sdk_name = format!("SDK `SessionMemoryStores`, {} s", o.interval);
    println!();
    println!("| measure | target | memkv sync | {sdk_name} | met (memkv sync) |");
    println!("|---|---|---:|---:|---|");
    let (p50, p99, _, missed) = summary(&ours.latency);
    println!(
        "| A → B, p50 of {} writes (s) | (information) | {p50:.3} | {} | |",
        o.writes,
        cell_latency(sdk.as_ref(), |s| format!("{:.3}", s.0))
    );
    println!(
        "| A → B, p99 (s) | ≤ 1 s | {p99:.3} | {} | {} |",
        cell_latency(sdk.as_ref(), |s| format!("{:.3}", s.1)),
        met(p99 <= 1.0 && missed == 0)
    );
    println!(
        "| A → B, slowest; writes that never arrived (60 s) | (information) | {:.3}; {missed} | {} | |",
        summary(&ours.latency).2,
        cell_latency(sdk.as_ref(), |s| format!("{:.3}; {}", s.2, s.3))
    );
    let first = |s: &Side, up: bool| {
        let t = if up { s.first_up } else { s.first_down };
        format!(
            "{t:.2}{}",
            if s.first_ok { "" } else { " (folders differ)" }
        )
    };
    println!(
        "| first sync, folder of {} files / {mb:.0} MB → empty store (s) | ≤ 10 s | {} | {} | {} |",
        o.files,
        first(&ours, true),
        sdk.as_ref().map_or("not run".into(), |s| first(s, true)),
        met(ours.first_up <= 10.0 && ours.first_ok)
    );
    println!(
        "| first sync, store → empty folder (s) | ≤ 10 s | {} | {} | {} |",
        first(&ours, false),
        sdk.as_ref().map_or("not run".into(), |s| first(s, false)),
        met(ours.first_down <= 10.0 && ours.first_ok)
    );
    let cpu = |s: &Side| {
        s.idle_cpu
            .iter()
            .map(|c| format!("{c:.2}"))
            .collect::<Vec<_>>()
            .join(" / ")
    };
    println!(
        "| idle, {} files, {:.0} s: CPU, % of a core (A / B) | < 1 % | {} | {} | {} |",
        o.files,
        ours.idle_seconds,
        cpu(&ours),
        sdk.as_ref().map_or("not run".into(), cpu),
        met(ours.idle_cpu.iter().all(|c| *c < 1.0))
    );
    let reqs = |s: &Side| {
        if s.idle_requests.is_empty() {
            return "none".to_owned();
        }
        s.idle_requests
            .iter()
            .map(|(k, n)| format!("{n}× {}", k.replace('"', "").replace(",status=", " ")))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let only_feed = ours
        .idle_requests
        .iter()
        .all(|(k, _)| k.contains("/changes") && k.contains("status=\"200\""));
    println!(
        "| idle: requests answered, both syncs | its long poll only | {} | {} | {} |",
        reqs(&ours),
        sdk.as_ref().map_or("not run".into(), reqs),
        met(only_feed)
    );
    let lcpu = |s: &Side| {
        s.latency_cpu
            .iter()
            .map(|c| format!("{:.1}", c / s.latency_seconds * 100.0))
            .collect::<Vec<_>>()
            .join(" / ")
    };
    println!(
        "| during the writes: CPU, % of a core (A / B) | (information) | {} | {} | |",
        lcpu(&ours),
        sdk.as_ref().map_or("not run".into(), lcpu)
    );
    println!();
    let loads = |s: &Side| {
        s.loads
            .iter()
            .map(|(p, l)| format!("{p}: {l}"))
            .collect::<Vec<_>>()
            .join("; ")
    };
    println!(
        "load average (1, 5, 15 min) at each phase: memkv sync: {}",
        loads(&ours)
    );
    if let Some(s) = &sdk {
        println!("SDK: {}", loads(s));
    }
    if o.keep {
        println!("scratch kept: {}", scratch.path().display());
    }
}
