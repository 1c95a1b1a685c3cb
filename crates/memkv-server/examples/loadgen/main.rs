//! Load generator: the real `memkv serve`, a process of its own, under 64 concurrent HTTP
//! clients in this process, beside the in-process figures of the library measured in the same
//! run.
//!
//! ```sh
//! cargo build --release -p memkv-cli          # the server under test: target/release/memkv
//! cargo run --release -p memkv-server --example loadgen            # 10 s per phase
//! LOADGEN_SECONDS=3 LOADGEN_CLIENTS=16 cargo run --release -p memkv-server --example loadgen
//! MEMKV_BIN=/path/to/another/memkv cargo run --release -p memkv-server --example loadgen
//! LOADGEN_SERVE_ARGS=--pin-workers cargo run --release -p memkv-server --example loadgen
//! ```
//!
//! `LOADGEN_SERVE_ARGS` (split at whitespace) is added to each `memkv serve` command line.
//!
//! Loopback only; bounded in time (`LOADGEN_SECONDS` per phase) and in requests
//! (`LOADGEN_MAX_REQUESTS` per client per phase). Phases, each on a durable database in a fresh
//! temporary directory on the real disk (`LOADGEN_DIR` chooses where; `LOADGEN_KEEP=1` keeps
//! it, with the servers' logs):
//!
//! 1. in-process: 32 threads run durable 1 KiB `create`s through `MemoryStore::execute` (group
//!    commit), as `crates/memkv-bench-compare` measures it; nothing else runs meanwhile;
//! 2. HTTP create: `memkv serve` started with an admin key; `LOADGEN_CLIENTS` clients, one
//!    store each, POST durable 1 KiB `create`s; the server is stopped with SIGTERM (exit 0);
//! 3. HTTP sessions: a new `memkv serve`; the clients replay `benches/data/agent-session.jsonl`
//!    (152 calls of a real agent), each replay on a new store, reporting p50/p99 per command;
//! 4. the same replay by as many threads calling the library directly, for comparison.
//!
//! The clients run on a tokio runtime of their own (`LOADGEN_CLIENT_THREADS`, default 1), one
//! keep-alive connection each. Every answer is checked (status 200; a create must succeed).
//! Latencies are timed from the first byte written to the answer read by its client task, and
//! also to the kernel's receive timestamp of the answer's last bytes (the "at the socket"
//! column): what the server and the loopback took, without the client thread's own delay.
//! For each HTTP phase the server's CPU time per request, threads and peak memory come from
//! `/proc`, as does the load average at the start of each phase.

mod http;
mod served;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use memkv::{Command, Database};
use serde_json::{Value, json};

use http::Request;
use served::Served;

pub fn env(name: &str, default: u64) -> u64 {
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

fn durable_store(dir: &Path, name: &str) -> Database {
    Database::builder()
        .max_files(u64::MAX)
        .max_bytes(u64::MAX)
        .open(dir.join(name))
        .unwrap()
}

/// The same limits for `memkv serve`.
fn serve_args(clients: usize) -> Vec<String> {
    let max = u64::MAX.to_string();
    vec![
        "--max-files".into(),
        max.clone(),
        "--max-bytes".into(),
        max,
        "--max-in-flight".into(),
        clients.max(128).to_string(),
    ]
    .into_iter()
    .chain(
        std::env::var("LOADGEN_SERVE_ARGS")
            .unwrap_or_default()
            .split_whitespace()
            .map(str::to_owned),
    )
    .collect()
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// Runs `op(thread, n)` on `threads` threads for `seconds` (at most `max` times per thread);
/// returns (operations per second, per-label latencies in µs, errors).
fn drive_threads(
    threads: usize,
    seconds: f64,
    max: u64,
    op: impl Fn(usize, u64, &mut Vec<(&'static str, u64)>) -> bool + Send + Sync + 'static,
) -> http::Measured {
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
    http::Measured {
        rate: ops as f64 / elapsed,
        arrivals: BTreeMap::new(),
        latencies,
        errors: errors.load(Ordering::Relaxed),
    }
}

fn percentile(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i] as f64 / 1000.0
}

fn sorted(latencies: &BTreeMap<&'static str, Vec<u64>>, label: &str) -> Vec<u64> {
    let mut v = latencies.get(label).cloned().unwrap_or_default();
    v.sort_unstable();
    v
}

/// `memkv_commands_per_commit` from the server's `/metrics`.
fn commands_per_commit(served: &Served) -> f64 {
    let addr = served.addr;
    let key = served.key.clone();
    let measured = http::get(addr, &key, "/metrics");
    measured
        .lines()
        .find_map(|l| l.strip_prefix("memkv_commands_per_commit "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

/// The server's costs over one phase, as a line of the report.
fn server_line(served: &Served, cpu_before: Duration, requests: usize) -> String {
    let cpu = served.cpu() - cpu_before;
    format!(
        "server: {:.0} µs CPU per request, {} threads, peak RSS {:.0} MiB",
        cpu.as_secs_f64() * 1e6 / requests.max(1) as f64,
        served.threads(),
        served.peak_rss_mib()
    )
}

fn main() {
    let seconds = env("LOADGEN_SECONDS", 10) as f64;
    let clients = env("LOADGEN_CLIENTS", 64) as usize;
    let max = env("LOADGEN_MAX_REQUESTS", 1_000_000);
    let dir = match std::env::var_os("LOADGEN_DIR") {
        Some(d) => tempfile::tempdir_in(d),
        None => tempfile::tempdir(),
    }
    .unwrap();
    let kib: Arc<str> = text(1024).into();
    println!(
        "loadgen: {clients} clients, {seconds} s per phase, server {}, in {}; load average {}",
        served::memkv_bin().display(),
        dir.path().display(),
        load_average()
    );

    // 1. In-process, 32 threads, group commit.
    let store = Arc::new(durable_store(dir.path(), "inprocess.redb"));
    let inproc = {
        let store = Arc::clone(&store);
        let kib = Arc::clone(&kib);
        drive_threads(32, seconds, max, move |t, n, samples| {
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
        "in-process, 32 threads: durable create {:.0}/s ({:.1} commands/commit), errors {}",
        inproc.rate,
        commands as f64 / batches.max(1) as f64,
        inproc.errors
    );

    // 2. HTTP durable creates, one store per client.
    println!("load average {}", load_average());
    let served = Served::start(
        &dir.path().join("http.redb"),
        &dir.path().join("http.log"),
        &serve_args(clients),
    );
    let cpu = served.cpu();
    let created = {
        let kib = Arc::clone(&kib);
        http::drive(
            served.addr,
            &served.key,
            clients,
            seconds,
            max,
            move |t, n| {
                Request {
                store: format!("store-{t}"),
                body: json!({"command": "create", "path": format!("/memories/f{n}.md"), "file_text": *kib})
                    .to_string()
                    .into(),
                label: "create",
                must_succeed: true,
            }
            },
        )
    };
    let create_requests: usize = created.latencies.values().map(Vec::len).sum();
    let create_server = server_line(&served, cpu, create_requests);
    let create_per_commit = commands_per_commit(&served);
    served.stop();
    let lat = sorted(&created.latencies, "create");
    println!(
        "HTTP, {clients} clients: durable create {:.0}/s ({create_per_commit:.1} commands/commit), p50 {:.2} ms, p99 {:.2} ms, errors {}; {:.2}x in-process",
        created.rate,
        percentile(&lat, 0.5),
        percentile(&lat, 0.99),
        created.errors,
        created.rate / inproc.rate
    );
    println!("  {create_server}");

    // 3. HTTP sessions: the recorded agent session, replayed on fresh stores.
    let session: Arc<Vec<(Arc<str>, &'static str)>> = Arc::new(
        include_str!("../../../../benches/data/agent-session.jsonl")
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
                (l.into(), command)
            })
            .collect(),
    );
    println!("load average {}", load_average());
    let served = Served::start(
        &dir.path().join("sessions-http.redb"),
        &dir.path().join("sessions-http.log"),
        &serve_args(clients),
    );
    let cpu = served.cpu();
    let replayed = {
        let session = Arc::clone(&session);
        http::drive(
            served.addr,
            &served.key,
            clients,
            seconds,
            max,
            move |t, n| {
                let len = session.len() as u64;
                let (line, command) = &session[(n % len) as usize];
                Request {
                    store: format!("agent-{t}-{}", n / len),
                    body: Arc::clone(line),
                    label: command,
                    must_succeed: false,
                }
            },
        )
    };
    let session_requests: usize = replayed.latencies.values().map(Vec::len).sum();
    let session_server = server_line(&served, cpu, session_requests);
    served.stop();

    // 4. The same replay in-process (as many threads on the library), for the HTTP layer's share.
    println!("load average {}", load_average());
    let store = Arc::new(durable_store(dir.path(), "sessions.redb"));
    let local = {
        let session = Arc::clone(&session);
        let store = Arc::clone(&store);
        drive_threads(clients, seconds, max, move |t, n, samples| {
            let len = session.len() as u64;
            let (line, command) = &session[(n % len) as usize];
            let user = store.user(&format!("agent-{t}-{}", n / len)).unwrap();
            let start = Instant::now();
            let (_, errors) = memkv::protocol::answer_line(&user, line.as_bytes());
            samples.push((command, start.elapsed().as_micros() as u64));
            errors.is_empty()
        })
    };
    drop(store);
    println!(
        "agent sessions, {clients} clients: HTTP {:.0} requests/s (errors {}), in-process {:.0}/s (errors {})",
        replayed.rate, replayed.errors, local.rate, local.errors
    );
    println!("  {session_server}");
    println!(
        "| command | HTTP requests | HTTP p50 (ms) | HTTP p99 (ms) | at the socket p50 / p99 (ms) | in-process p50 (ms) | in-process p99 (ms) |\n|---|---:|---:|---:|---:|---:|---:|"
    );
    for command in replayed.latencies.keys() {
        let us = sorted(&replayed.latencies, command);
        let socket = sorted(&replayed.arrivals, command);
        let here = sorted(&local.latencies, command);
        println!(
            "| {command} | {} | {:.2} | {:.2} | {:.2} / {:.2} | {:.2} | {:.2} |",
            us.len(),
            percentile(&us, 0.5),
            percentile(&us, 0.99),
            percentile(&socket, 0.5),
            percentile(&socket, 0.99),
            percentile(&here, 0.5),
            percentile(&here, 0.99)
        );
    }
    println!(
        "load average {}; peak RSS of this process (clients, in-process phases) {:.0} MiB",
        load_average(),
        served::peak_rss_mib("/proc/self/status")
    );
    if std::env::var_os("LOADGEN_KEEP").is_some() {
        println!(
            "kept {} (the servers' logs are there)",
            dir.keep().display()
        );
    }
    if inproc.errors + created.errors + replayed.errors + local.errors > 0 {
        std::process::exit(1);
    }
}
