//! Load generator: `memkv serve`'s server under 64 concurrent HTTP clients, beside the
//! in-process group-commit create rate measured in the same run.
//!
//! ```sh
//! cargo run --release -p memkv-server --example loadgen            # 10 s per phase
//! LOADGEN_SECONDS=3 LOADGEN_CLIENTS=64 cargo run --release -p memkv-server --example loadgen
//! ```
//!
//! Loopback only; bounded in time (`LOADGEN_SECONDS` per phase) and in requests
//! (`LOADGEN_MAX_REQUESTS` per client per phase). Phases, each on a durable database in a
//! fresh temporary directory on the real disk:
//!
//! 1. in-process: 32 threads run durable 1 KiB `create`s through `UserHandle::execute` (group
//!    commit), as `crates/memkv-bench-compare` measures it;
//! 2. HTTP create: `LOADGEN_CLIENTS` clients, one store each, POST durable 1 KiB `create`s;
//! 3. HTTP sessions: the same clients replay `benches/data/agent-session.jsonl` (152 calls of a
//!    real agent), each replay on a new store, reporting p50/p99 per command;
//! 4. the same replay by as many threads calling the library directly, for comparison.
//!
//! Every answer is checked (status 200; a create must succeed). Peak memory is read from
//! `/proc/self/status`.

#[path = "../tests/client/mod.rs"]
mod client;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use client::Client;
use memkv::{Command, Store};
use memkv_server::{Config, Server};
use serde_json::{Value, json};

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn text(n: usize) -> String {
    let mut out = String::with_capacity(n + 64);
    let mut i = 0;
    while out.len() < n {
        out.push_str(&format!(
            "- line {i:05}: the quick brown fox jumps over the lazy dog\n"
        ));
        i += 1;
    }
    out.truncate(n - 1);
    out.push('\n');
    out
}

fn durable_store(dir: &std::path::Path, name: &str) -> Store {
    Store::builder()
        .max_files(u64::MAX)
        .max_bytes(u64::MAX)
        .open(dir.join(name))
        .unwrap()
}

/// Runs `op(thread, n)` on `threads` threads for `seconds` (at most `max` times per thread);
/// returns (operations per second, per-label latencies in µs, errors).
fn drive(
    threads: usize,
    seconds: f64,
    max: u64,
    op: impl Fn(usize, u64, &mut Vec<(&'static str, u64)>) -> bool + Send + Sync + 'static,
) -> (f64, BTreeMap<&'static str, Vec<u64>>, u64) {
    let op = Arc::new(op);
    let stop = Arc::new(AtomicBool::new(false));
    let errors = Arc::new(AtomicU64::new(0));
    let barrier = Arc::new(Barrier::new(threads + 1));
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (op, stop, errors, barrier) = (
                Arc::clone(&op),
                Arc::clone(&stop),
                Arc::clone(&errors),
                Arc::clone(&barrier),
            );
            std::thread::spawn(move || {
                let mut samples = Vec::new();
                barrier.wait();
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) && n < max {
                    if !op(t, n, &mut samples) {
                        errors.fetch_add(1, Ordering::Relaxed);
                    }
                    n += 1;
                }
                samples
            })
        })
        .collect();
    barrier.wait();
    let start = Instant::now();
    while start.elapsed().as_secs_f64() < seconds && handles.iter().any(|h| !h.is_finished()) {
        std::thread::sleep(Duration::from_millis(10));
    }
    stop.store(true, Ordering::Relaxed);
    let mut latencies: BTreeMap<&'static str, Vec<u64>> = BTreeMap::new();
    for h in handles {
        for (label, us) in h.join().unwrap() {
            latencies.entry(label).or_default().push(us);
        }
    }
    let elapsed = start.elapsed().as_secs_f64();
    let ops: usize = latencies.values().map(Vec::len).sum();
    (
        ops as f64 / elapsed,
        latencies,
        errors.load(Ordering::Relaxed),
    )
}

fn percentile(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i] as f64 / 1000.0
}

fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

/// A server on its own runtime, on a free loopback port; stopped when the guard drops.
struct Served {
    addr: std::net::SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Served {
    fn start(store: Arc<Store>, keys: std::path::PathBuf, clients: usize) -> Served {
        let mut config = Config::new("127.0.0.1:0".parse().unwrap(), keys);
        config.max_in_flight = config.max_in_flight.max(clients);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (bound, addr) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            // As `memkv serve` builds it (memkv_server::run).
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .max_blocking_threads(config.max_in_flight + 16)
                .build()
                .unwrap();
            runtime.block_on(async move {
                let server = Server::bind(store, config).await.unwrap();
                bound.send(server.local_addr().unwrap()).unwrap();
                server
                    .run(async move {
                        let _ = stopped.await;
                    })
                    .await;
            });
        });
        Served {
            addr: addr.recv().unwrap(),
            stop: Some(stop),
            thread: Some(thread),
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.stop.take().map(|s| s.send(()));
        let _ = self.thread.take().map(std::thread::JoinHandle::join);
    }
}

fn main() {
    let seconds = env("LOADGEN_SECONDS", 10) as f64;
    let clients = env("LOADGEN_CLIENTS", 64) as usize;
    let max = env("LOADGEN_MAX_REQUESTS", 1_000_000);
    let dir = tempfile::tempdir().unwrap();
    let kib = Arc::new(text(1024));
    eprintln!(
        "loadgen: {clients} clients, {seconds} s per phase, in {}",
        dir.path().display()
    );

    // 1. In-process, 32 threads, group commit.
    let store = Arc::new(durable_store(dir.path(), "inprocess.redb"));
    let (inproc, _, inproc_errors) = {
        let store = Arc::clone(&store);
        let kib = Arc::clone(&kib);
        drive(32, seconds, max, move |t, n, samples| {
            let user = store.user(&format!("user{}", t % 8)).unwrap();
            let command = Command::from_json(
                &json!({"command": "create", "path": format!("/memories/t{t}/f{n}.md"), "file_text": *kib}),
            )
            .unwrap();
            let start = Instant::now();
            let ok = user.execute(&command).is_ok_and(|o| !o.is_error);
            samples.push(("create", start.elapsed().as_micros() as u64));
            ok
        })
    };
    let (batches, commands) = store.commit_stats();
    drop(store);
    println!(
        "in-process, 32 threads: durable create {inproc:.0}/s ({:.1} commands/commit), errors {inproc_errors}",
        commands as f64 / batches.max(1) as f64
    );

    // 2. HTTP durable creates, one store per client.
    let store = Arc::new(durable_store(dir.path(), "http.redb"));
    let served = Served::start(Arc::clone(&store), dir.path().join("keys"), clients);
    let addr = served.addr;
    let (http_create, latencies, create_errors) = {
        let kib = Arc::clone(&kib);
        let conns: Vec<_> = (0..clients)
            .map(|_| std::sync::Mutex::new(Client::new(addr)))
            .collect();
        drive(clients, seconds, max, move |t, n, samples| {
            let body = json!({"command": "create", "path": format!("/memories/f{n}.md"), "file_text": *kib})
                .to_string();
            let mut c = conns[t].lock().unwrap();
            let start = Instant::now();
            let r = c.tool(&format!("store-{t}"), body.as_bytes());
            samples.push(("create", start.elapsed().as_micros() as u64));
            r.status == 200 && r.json()["is_error"] == false
        })
    };
    let (batches, commands) = store.commit_stats();
    let mut created = latencies.get("create").cloned().unwrap_or_default();
    created.sort_unstable();
    println!(
        "HTTP, {clients} clients: durable create {http_create:.0}/s ({:.1} commands/commit), p50 {:.2} ms, p99 {:.2} ms, errors {create_errors}; {:.2}x in-process",
        commands as f64 / batches.max(1) as f64,
        percentile(&created, 0.5),
        percentile(&created, 0.99),
        http_create / inproc
    );

    // 3. HTTP sessions: the recorded agent session, replayed on fresh stores.
    let session: Arc<Vec<(String, &'static str)>> = Arc::new(
        include_str!("../../../benches/data/agent-session.jsonl")
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| {
                let v: Value = serde_json::from_str(l).unwrap();
                let command = match v["command"].as_str().unwrap() {
                    "view" => "view",
                    "create" => "create",
                    "str_replace" => "str_replace",
                    "insert" => "insert",
                    "delete" => "delete",
                    "rename" => "rename",
                    other => panic!("{other}"),
                };
                (l.to_owned(), command)
            })
            .collect(),
    );
    let (session_rate, latencies, session_errors) = {
        let conns: Vec<_> = (0..clients)
            .map(|_| std::sync::Mutex::new(Client::new(addr)))
            .collect();
        let session = Arc::clone(&session);
        drive(clients, seconds, max, move |t, n, samples| {
            let len = session.len() as u64;
            let (line, command) = &session[(n % len) as usize];
            let store = format!("agent-{t}-{}", n / len);
            let mut c = conns[t].lock().unwrap();
            let start = Instant::now();
            let r = c.tool(&store, line.as_bytes());
            samples.push((command, start.elapsed().as_micros() as u64));
            r.status == 200
        })
    };
    drop(served);
    drop(store);

    // 4. The same replay in-process (64 threads on the library), for the HTTP layer's share.
    let store = Arc::new(durable_store(dir.path(), "sessions.redb"));
    let (inproc_session_rate, inproc_latencies, inproc_session_errors) = {
        let session = Arc::clone(&session);
        let store = Arc::clone(&store);
        drive(clients, seconds, max, move |t, n, samples| {
            let len = session.len() as u64;
            let (line, command) = &session[(n % len) as usize];
            let user = store.user(&format!("agent-{t}-{}", n / len)).unwrap();
            let start = Instant::now();
            let (_, errors) = memkv::protocol::answer_line(&user, line.as_bytes());
            samples.push((command, start.elapsed().as_micros() as u64));
            errors.is_empty()
        })
    };
    println!(
        "agent sessions, {clients} clients: HTTP {session_rate:.0} requests/s (errors {session_errors}), in-process {inproc_session_rate:.0}/s (errors {inproc_session_errors})"
    );
    println!(
        "| command | HTTP requests | HTTP p50 (ms) | HTTP p99 (ms) | in-process p50 (ms) | in-process p99 (ms) |\n|---|---:|---:|---:|---:|---:|"
    );
    for (command, mut us) in latencies {
        us.sort_unstable();
        let mut local = inproc_latencies.get(command).cloned().unwrap_or_default();
        local.sort_unstable();
        println!(
            "| {command} | {} | {:.2} | {:.2} | {:.2} | {:.2} |",
            us.len(),
            percentile(&us, 0.5),
            percentile(&us, 0.99),
            percentile(&local, 0.5),
            percentile(&local, 0.99)
        );
    }
    println!(
        "peak memory (RSS, server and clients in one process): {:.0} MiB",
        peak_rss_mib()
    );
    if inproc_errors + create_errors + session_errors + inproc_session_errors > 0 {
        std::process::exit(1);
    }
}
