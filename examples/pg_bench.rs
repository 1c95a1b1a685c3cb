//! Throughput of durable `create`s and latency of `view` on any database, for BENCHMARKS.md:
//!
//! ```sh
//! cargo run --release --example pg_bench -- create URL CLIENTS SECONDS
//! cargo run --release --example pg_bench -- view URL FILES
//! ```
//!
//! `create`: CLIENTS threads on one `Database` (group commit), each creating 1 KiB files in a store
//! of its own, for SECONDS; prints commands per second. `view`: fills a store with FILES files
//! (in batches) beside a directory of 50, then times 200 views of that directory.

use std::sync::Arc;
use std::time::{Duration, Instant};

use memkv::{Command, Database};

/// jemalloc, as in the `memkv` binary (`crates/memkv-cli/src/main.rs`): what `memkv exec` and
/// `memkv serve` run with, so what a user of memkv on PostgreSQL gets. (With glibc's malloc,
/// malloc and free were about a fifth of this process's CPU at 32 callers; BENCHMARKS.md.)
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["create", url, clients, secs] => {
            create(url, clients.parse().unwrap(), secs.parse().unwrap())
        }
        ["view", url, files] => view(url, files.parse().unwrap()),
        _ => eprintln!("usage: pg_bench create URL CLIENTS SECONDS | view URL FILES"),
    }
}

fn create(url: &str, clients: usize, secs: u64) {
    let store = Arc::new(
        Database::builder()
            .max_files(u64::MAX)
            .max_bytes(u64::MAX)
            .open(url)
            .unwrap(),
    );
    let text = "x".repeat(1023) + "\n";
    let run = format!("{}", std::process::id());
    let deadline = Instant::now() + Duration::from_secs(secs);
    let start = Instant::now();
    let done: usize = std::thread::scope(|s| {
        let workers: Vec<_> = (0..clients)
            .map(|c| {
                let (store, text, run) = (Arc::clone(&store), text.clone(), run.clone());
                s.spawn(move || {
                    let user = store.user(&format!("bench-{run}-{c}")).unwrap();
                    let mut n = 0;
                    while Instant::now() < deadline {
                        let cmd = Command::Create {
                            path: format!("/memories/d{}/f{n}.md", n % 16),
                            file_text: text.clone(),
                        };
                        assert!(!user.execute(&cmd).unwrap().is_error);
                        n += 1;
                    }
                    n
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).sum()
    });
    let elapsed = start.elapsed().as_secs_f64();
    let (batches, commands) = store.commit_stats();
    let trips = store.storage().round_trips().unwrap_or(0);
    println!(
        "create 1KiB: {clients} clients: {done} in {elapsed:.1}s = {:.0}/s \
         ({:.1} commands per transaction, {:.2} round trips per command)",
        done as f64 / elapsed,
        commands as f64 / batches.max(1) as f64,
        trips as f64 / done.max(1) as f64,
    );
}

fn view(url: &str, files: usize) {
    let store = Database::builder()
        .max_files(u64::MAX)
        .max_bytes(u64::MAX)
        .open(url)
        .unwrap();
    let user = format!("view-{files}-{}", std::process::id());
    let mut batch = Vec::new();
    for i in 0..files.saturating_sub(50) {
        let path = format!("/memories/bulk/b{}/f{i}.md", i % 100);
        batch.push((
            user.clone(),
            Command::Create {
                path,
                file_text: "y\n".into(),
            },
        ));
        if batch.len() == 250 {
            store.execute_batch(&batch);
            batch.clear();
        }
    }
    for i in 0..50 {
        batch.push((
            user.clone(),
            Command::Create {
                path: format!("/memories/fifty/f{i}.md"),
                file_text: "z\n".into(),
            },
        ));
    }
    store.execute_batch(&batch);
    let u = store.user(&user).unwrap();
    let view = Command::View {
        path: "/memories/fifty".into(),
        view_range: None,
    };
    assert!(!u.execute(&view).unwrap().is_error);
    let n = 200;
    let start = Instant::now();
    for _ in 0..n {
        assert!(!u.execute(&view).unwrap().is_error);
    }
    let per = start.elapsed().as_secs_f64() / n as f64 * 1e6;
    println!("view of a 50-entry directory with {files} files in the store: {per:.0} µs");
}
