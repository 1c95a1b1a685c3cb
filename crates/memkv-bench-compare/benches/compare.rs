//! Side-by-side comparison, in one run, on this machine's disk: memkv against a bare redb
//! insert-and-commit, the disk's raw `fdatasync` rate, SQLite (WAL, `synchronous=FULL`), and the
//! Python SDK's reference handler. Prints a table of the targets of BENCHMARKS.md as ratios.
//!
//! ```sh
//! tools/bench-compare.sh            # sets up the Python virtualenv, then runs this
//! cargo bench -p memkv-bench-compare --bench compare -- [--python PATH] [--seconds N] [--rounds N]
//! ```
//!
//! `cargo bench` runs this binary in the package's directory (crates/memkv-bench-compare), so a
//! relative `--python` is taken from there; tools/bench-compare.sh passes an absolute one. The
//! SDK's side is tools/sdk_bench.py at the workspace root, found from `CARGO_MANIFEST_DIR`.

#[path = "../../../benches/common/mod.rs"]
mod common;

/// jemalloc, as in the memkv binary (crates/memkv-cli), where glibc's malloc and free were 15 %
/// of the server's CPU. It serves the Rust side of every figure here (memkv and bare redb);
/// SQLite's C code keeps the system's malloc.
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use memkv::Database;
use redb::TableDefinition;
use serde_json::{Value, json};

use common::{cmd, create, durable_store, prepare_tree, text};

const WRITERS: usize = 32;

struct Options {
    python: Option<PathBuf>,
    seconds: f64,
    rounds: usize,
}

fn options() -> Options {
    let mut args = std::env::args().skip(1);
    let mut o = Options {
        python: None,
        seconds: 2.0,
        rounds: 3,
    };
    while let Some(a) = args.next() {
        match a.as_str() {
            "--python" => o.python = args.next().map(PathBuf::from),
            "--seconds" => {
                o.seconds = args
                    .next()
                    .and_then(|s| s.parse().ok())
                    .expect("--seconds N")
            }
            "--rounds" => {
                o.rounds = args
                    .next()
                    .and_then(|s| s.parse().ok())
                    .expect("--rounds N")
            }
            "--bench" => {}
            other => panic!("unknown argument {other}"),
        }
    }
    o
}

/// Runs `op` repeatedly for about `seconds`; returns operations per second.
fn rate(seconds: f64, mut op: impl FnMut(u64)) -> f64 {
    let start = Instant::now();
    let mut n = 0;
    while start.elapsed().as_secs_f64() < seconds {
        op(n);
        n += 1;
    }
    n as f64 / start.elapsed().as_secs_f64()
}

/// `threads` threads run `op` for about `seconds`; returns total operations per second.
fn rate_concurrent(
    threads: usize,
    seconds: f64,
    op: impl Fn(usize, u64) + Send + Sync + 'static,
) -> f64 {
    let op = Arc::new(op);
    let stop = Arc::new(AtomicBool::new(false));
    let total = Arc::new(AtomicU64::new(0));
    let barrier = Arc::new(Barrier::new(threads + 1));
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (op, stop, total, barrier) =
                (op.clone(), stop.clone(), total.clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) {
                    op(t, n);
                    n += 1;
                }
                total.fetch_add(n, Ordering::Relaxed);
            })
        })
        .collect();
    barrier.wait();
    let start = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(seconds));
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        h.join().unwrap();
    }
    total.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64()
}

/// Bytes this process has caused to be written to storage so far (Linux `/proc/self/io`).
fn write_bytes() -> Option<u64> {
    let io = std::fs::read_to_string("/proc/self/io").ok()?;
    io.lines()
        .find_map(|l| l.strip_prefix("write_bytes: ")?.trim().parse().ok())
}

fn fdatasync_rate(dir: &Path, seconds: f64) -> f64 {
    let file = OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .open(dir.join("raw"))
        .unwrap();
    let block = vec![b'x'; 1024];
    rate(seconds, |n| {
        file.write_all_at(&block, n * 1024).unwrap();
        file.sync_data().unwrap();
    })
}

fn bare_redb_rate(path: &Path, seconds: f64) -> f64 {
    const T: TableDefinition<&str, &[u8]> = TableDefinition::new("files");
    let db = redb::Database::create(path).unwrap();
    let value = text(1024);
    rate(seconds, |n| {
        let txn = db.begin_write().unwrap();
        txn.open_table(T)
            .unwrap()
            .insert(format!("/memories/new/f{n}.md").as_str(), value.as_bytes())
            .unwrap();
        txn.commit().unwrap();
    })
}

fn sqlite_rate(path: &Path, threads: usize, seconds: f64) -> f64 {
    let setup = rusqlite::Connection::open(path).unwrap();
    setup.pragma_update(None, "journal_mode", "WAL").unwrap();
    setup
        .execute_batch(
            "CREATE TABLE files (user TEXT, path TEXT, content TEXT, PRIMARY KEY (user, path))",
        )
        .unwrap();
    drop(setup);
    let value = text(1024);
    let connections: Vec<_> = (0..threads)
        .map(|_| {
            let c = rusqlite::Connection::open(path).unwrap();
            c.pragma_update(None, "synchronous", "FULL").unwrap();
            c.busy_timeout(Duration::from_secs(30)).unwrap();
            std::sync::Mutex::new(c)
        })
        .collect();
    let connections = Arc::new(connections);
    rate_concurrent(threads, seconds, move |t, n| {
        let c = connections[t].lock().unwrap();
        c.execute_batch("BEGIN IMMEDIATE").unwrap();
        c.execute(
            "INSERT INTO files VALUES (?1, ?2, ?3)",
            (
                format!("user{}", t % 8),
                format!("/memories/t{t}/f{n}.md"),
                &value,
            ),
        )
        .unwrap();
        c.execute_batch("COMMIT").unwrap();
    })
}

fn memkv_create_rate(store: &Arc<Database>, threads: usize, seconds: f64) -> f64 {
    let kib = text(1024);
    static RUN: AtomicU64 = AtomicU64::new(0);
    let tag = format!("{threads}w{}", RUN.fetch_add(1, Ordering::Relaxed));
    let store = store.clone();
    rate_concurrent(threads, seconds, move |t, n| {
        let user = store.user(&format!("user{}", t % 8)).unwrap();
        let out = user
            .execute(&create(&format!("/memories/{tag}/t{t}/f{n}.md"), &kib))
            .unwrap();
        assert!(!out.is_error, "{}", out.content);
    })
}

/// Mean seconds per `view` of `/memories/hot` (50 entries) for a user with `total` files.
fn view_dir_time(store: &Database, total: usize, reps: u32) -> f64 {
    let name = format!("tree{total}");
    prepare_tree(store, &name, total);
    let user = store.user(&name).unwrap();
    let view = cmd(json!({"command": "view", "path": "/memories/hot"}));
    for _ in 0..100 {
        user.execute(&view).unwrap();
    }
    let start = Instant::now();
    for _ in 0..reps {
        user.execute(&view).unwrap();
    }
    start.elapsed().as_secs_f64() / f64::from(reps)
}

/// The workload of tools/sdk_bench.py, against memkv: mean seconds per command.
fn memkv_sdk_workload(store: &Database, reps: usize) -> Vec<(&'static str, f64)> {
    let u = store.user("sdk").unwrap();
    let run = |v: Value| assert!(!u.execute(&cmd(v)).unwrap().is_error);
    run(
        json!({"command": "create", "path": "/memories/notes.md", "file_text": format!("MARKER-A\n{}", text(4096))}),
    );
    common::bulk_create(
        store,
        "sdk",
        (0..2000).map(|i| (format!("/memories/big/f{i:04}.md"), format!("file {i}\n"))),
    );
    common::bulk_create(
        store,
        "sdk",
        (0..reps).flat_map(|i| {
            [
                (format!("/memories/del/f{i}.md"), "x\n".to_owned()),
                (format!("/memories/ren/f{i}.md"), "x\n".to_owned()),
            ]
        }),
    );
    let timed = |inputs: Vec<Value>| {
        let commands: Vec<_> = inputs.into_iter().map(cmd).collect();
        let start = Instant::now();
        for c in &commands {
            let out = u.execute(c).unwrap();
            assert!(!out.is_error, "{}", out.content);
        }
        start.elapsed().as_secs_f64() / commands.len() as f64
    };
    let kib = text(1024);
    vec![
        ("view_file_4KiB", timed(vec![json!({"command": "view", "path": "/memories/notes.md"}); reps])),
        ("view_dir_2000_files", timed(vec![json!({"command": "view", "path": "/memories/big"}); (reps / 20).max(5)])),
        ("create_1KiB", timed((0..reps).map(|i| json!({"command": "create", "path": format!("/memories/new/f{i}.md"), "file_text": kib})).collect())),
        (
            "str_replace_4KiB",
            timed(
                (0..reps)
                    .map(|i| {
                        let (a, b) = if i % 2 == 0 { ("MARKER-A", "MARKER-B") } else { ("MARKER-B", "MARKER-A") };
                        json!({"command": "str_replace", "path": "/memories/notes.md", "old_str": a, "new_str": b})
                    })
                    .collect(),
            ),
        ),
        ("insert_4KiB", timed(vec![json!({"command": "insert", "path": "/memories/notes.md", "insert_line": 10, "insert_text": "- a new fact\n"}); reps])),
        ("delete_file", timed((0..reps).map(|i| json!({"command": "delete", "path": format!("/memories/del/f{i}.md")})).collect())),
        ("rename_file", timed((0..reps).map(|i| json!({"command": "rename", "old_path": format!("/memories/ren/f{i}.md"), "new_path": format!("/memories/ren/g{i}.md")})).collect())),
    ]
}

struct Round {
    fsync: f64,
    bare: f64,
    /// Bytes written to storage per bare redb commit.
    bare_bytes: Option<f64>,
    single: f64,
    many: f64,
    sqlite: f64,
    per_batch: f64,
    bytes: Option<f64>,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// tools/sdk_bench.py, at the workspace root (two levels above this package).
fn sdk_script() -> PathBuf {
    let package = Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = package.ancestors().nth(2).unwrap_or(package);
    root.join("tools/sdk_bench.py")
}

/// Ends the run with `message` on stderr, without a panic's backtrace noise.
fn fail(message: String) -> ! {
    eprintln!("compare: {message}");
    std::process::exit(2)
}

/// Before any measurement: the script exists and `python` can be started, so that a wrong path
/// costs seconds, not the minutes of the throughput rounds.
fn check_sdk(python: &Path, script: &Path) {
    if !script.is_file() {
        fail(format!(
            "the SDK workload {} does not exist",
            script.display()
        ));
    }
    if let Err(e) = std::process::Command::new(python).arg("--version").output() {
        fail(cannot_run(python, &e));
    }
}

fn cannot_run(python: &Path, e: &std::io::Error) -> String {
    let cwd = std::env::current_dir().map_or_else(|_| "?".into(), |d| d.display().to_string());
    let hint = if python.is_relative() && python.components().count() > 1 {
        format!(
            " (a relative --python is taken from the bench's working directory, {cwd}; pass an absolute path)"
        )
    } else {
        String::new()
    };
    format!(
        "cannot run the Python interpreter {}: {e}{hint}",
        python.display()
    )
}

/// Runs tools/sdk_bench.py under `python`: mean seconds per command of the SDK's handler.
fn sdk_workload(python: &Path, script: &Path, dir: &Path, reps: usize) -> Value {
    let out = std::process::Command::new(python)
        .arg(script)
        .arg(dir)
        .arg(reps.to_string())
        .output()
        .unwrap_or_else(|e| fail(cannot_run(python, &e)));
    if !out.status.success() {
        fail(format!(
            "{} {} failed ({}):\n{}",
            python.display(),
            script.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        fail(format!(
            "{} printed no JSON ({e}): {}",
            script.display(),
            String::from_utf8_lossy(&out.stdout)
        ))
    })
}

struct Row {
    measure: String,
    memkv: String,
    other: String,
    ratio: f64,
    target: String,
    pass: bool,
}

fn main() {
    let o = options();
    let script = sdk_script();
    if let Some(python) = &o.python {
        check_sdk(python, &script);
    }
    let base = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let dir = base.path();
    let s = o.seconds;
    let mut rows = Vec::new();
    eprintln!("measuring in {} ({s} s per measurement)…", dir.display());

    // Throughput: several rounds, each measuring everything back to back, so that every ratio
    // compares figures taken under the same disk conditions; medians are reported.
    let store = Arc::new(durable_store(dir));
    let mut rounds = Vec::new();
    for round in 0..o.rounds {
        let fsync = fdatasync_rate(dir, s);
        let bare_before = write_bytes();
        let bare_start = Instant::now();
        let bare = bare_redb_rate(&dir.join(format!("bare{round}.redb")), s);
        let bare_commits = bare * bare_start.elapsed().as_secs_f64();
        let bare_bytes = bare_before
            .zip(write_bytes())
            .map(|(a, b)| (b - a) as f64 / bare_commits);
        let bytes_before = write_bytes();
        let single_start = Instant::now();
        let single = memkv_create_rate(&store, 1, s);
        let commits = single * single_start.elapsed().as_secs_f64();
        let bytes = bytes_before
            .zip(write_bytes())
            .map(|(a, b)| (b - a) as f64 / commits);
        let (b0, c0) = store.commit_stats();
        let many = memkv_create_rate(&store, WRITERS, s);
        let (b1, c1) = store.commit_stats();
        let per_batch = (c1 - c0) as f64 / (b1 - b0).max(1) as f64;
        let sqlite = sqlite_rate(&dir.join(format!("sqlite{round}.db")), WRITERS, s);
        eprintln!(
            "round {}: fdatasync {fsync:.0}/s, bare redb {bare:.0}/s, memkv 1 thread {single:.0}/s, memkv {WRITERS} threads {many:.0}/s ({per_batch:.1}/commit), SQLite {sqlite:.0}/s",
            round + 1
        );
        rounds.push(Round {
            fsync,
            bare,
            bare_bytes,
            single,
            many,
            sqlite,
            per_batch,
            bytes,
        });
    }
    let med = |f: &dyn Fn(&Round) -> f64| median(rounds.iter().map(f).collect());
    let (fsync, bare, single, many, sqlite) = (
        med(&|r| r.fsync),
        med(&|r| r.bare),
        med(&|r| r.single),
        med(&|r| r.many),
        med(&|r| r.sqlite),
    );
    let per_batch = med(&|r| r.per_batch);
    let bytes_per_commit = rounds
        .iter()
        .all(|r| r.bytes.is_some())
        .then(|| med(&|r| r.bytes.unwrap_or(0.0)));
    // The write targets hold in every round: met when the lowest round's ratio meets them.
    let lowest = |f: &dyn Fn(&Round) -> f64| rounds.iter().map(f).fold(f64::INFINITY, f64::min);
    let single_ratio = med(&|r| r.single / r.bare);
    let single_low = lowest(&|r| r.single / r.bare);
    rows.push(Row {
        measure: format!("durable create 1 KiB, 1 thread (ops/s); lowest round {single_low:.2}"),
        memkv: format!("{single:.0}"),
        other: format!("{bare:.0} bare redb"),
        ratio: single_ratio,
        target: ">= 0.9 every round".into(),
        pass: single_low >= 0.9,
    });
    let fsync_ratio = med(&|r| r.many / r.fsync);
    let fsync_low = lowest(&|r| r.many / r.fsync);
    rows.push(Row {
        measure: format!(
            "durable create 1 KiB, {WRITERS} threads (ops/s); lowest round {fsync_low:.2}"
        ),
        memkv: format!("{many:.0}"),
        other: format!("{fsync:.0} fdatasync/s"),
        ratio: fsync_ratio,
        target: ">= 2 every round".into(),
        pass: fsync_low >= 2.0,
    });
    let sqlite_ratio = med(&|r| r.many / r.sqlite);
    let sqlite_low = lowest(&|r| r.many / r.sqlite);
    rows.push(Row {
        measure: format!(
            "durable create 1 KiB, {WRITERS} threads (ops/s); lowest round {sqlite_low:.2}"
        ),
        memkv: format!("{many:.0}"),
        other: format!("{sqlite:.0} SQLite WAL FULL"),
        ratio: sqlite_ratio,
        target: ">= 3 every round".into(),
        pass: sqlite_low >= 3.0,
    });
    if rounds
        .iter()
        .all(|r| r.bytes.is_some() && r.bare_bytes.is_some())
    {
        let of = |r: &Round| r.bytes.unwrap_or(0.0) / r.bare_bytes.unwrap_or(1.0);
        let (ratio, highest) = (med(&of), rounds.iter().map(of).fold(0.0, f64::max));
        rows.push(Row {
            measure: format!(
                "bytes written per durable create 1 KiB, 1 thread; highest round {highest:.2}"
            ),
            memkv: format!("{:.0}", med(&|r| r.bytes.unwrap_or(0.0))),
            other: format!("{:.0} bare redb", med(&|r| r.bare_bytes.unwrap_or(0.0))),
            ratio,
            target: "<= 1.5 every round".into(),
            pass: highest <= 1.5,
        });
    }
    // What --shared costs: the same single-thread create, with read-only processes allowed.
    let shared_store = Arc::new(
        Database::builder()
            .max_files(u64::MAX)
            .max_bytes(u64::MAX)
            .shared(true)
            .open(dir.join("shared.redb"))
            .unwrap(),
    );
    let shared = memkv_create_rate(&shared_store, 1, s);
    let exclusive = memkv_create_rate(&store, 1, s);
    rows.push(Row {
        measure: "durable create 1 KiB, 1 thread, --shared (ops/s)".into(),
        memkv: format!("{shared:.0}"),
        other: format!("{exclusive:.0} exclusive"),
        ratio: shared / exclusive,
        target: "(information)".into(),
        pass: true,
    });
    let small = view_dir_time(&store, 1_000, 20_000);
    let large = view_dir_time(&store, 100_000, 20_000);
    rows.push(Row {
        measure: "view 50-entry dir, 100,000 vs 1,000 files (µs)".into(),
        memkv: format!("{:.1}", large * 1e6),
        other: format!("{:.1} at 1,000", small * 1e6),
        ratio: large / small,
        target: "0.8 - 1.2".into(),
        pass: (0.8..=1.2).contains(&(large / small)),
    });

    if let Some(python) = &o.python {
        let reps = 300;
        let sdk_dir = dir.join("sdk");
        std::fs::create_dir_all(&sdk_dir).unwrap();
        let sdk = sdk_workload(python, &script, &sdk_dir, reps);
        for (op, ours) in memkv_sdk_workload(&store, reps) {
            let theirs = sdk[op].as_f64().unwrap_or_else(|| {
                fail(format!(
                    "{} gave no figure for {op}: {sdk}",
                    script.display()
                ))
            });
            let (target, need) = match op {
                "view_file_4KiB" => (">= 10", 10.0),
                "view_dir_2000_files" => (">= 100", 100.0),
                _ => ("> 1", 1.0),
            };
            let speedup = theirs / ours;
            rows.push(Row {
                measure: format!("{op} vs Python SDK handler (µs/op)"),
                memkv: format!("{:.1}", ours * 1e6),
                other: format!("{:.1}", theirs * 1e6),
                ratio: speedup,
                target: target.into(),
                pass: if need > 1.0 {
                    speedup >= need
                } else {
                    speedup > 1.0
                },
            });
        }
    }

    println!("| measure | memkv | compared with | ratio | target | met |");
    println!("|---|---:|---:|---:|---|---|");
    for r in &rows {
        println!(
            "| {} | {} | {} | {:.2} | {} | {} |",
            r.measure,
            r.memkv,
            r.other,
            r.ratio,
            r.target,
            if r.pass { "yes" } else { "**no**" }
        );
    }
    println!();
    println!(
        "raw fdatasync: {fsync:.0}/s; bare redb commit: {bare:.0}/s; SQLite WAL FULL, {WRITERS} threads: {sqlite:.0}/s"
    );
    println!(
        "group commit with {WRITERS} writers: {per_batch:.1} commands per transaction (one flush each)"
    );
    if let Some(b) = bytes_per_commit {
        println!("bytes written to storage per single-thread memkv create (1 KiB payload): {b:.0}");
    }
    std::io::stdout().flush().unwrap();
}
