//! What one durable redb commit of `k` records costs, whatever program writes them: the floor
//! under a memkv create, which must write records in several places of its tree (content, index
//! entry, version, change entry, and the aggregates beside them). Side by side in one run:
//!
//! - bare redb as `compare` measures it (one insert into a fresh table);
//! - redb committing `k` inserts, one at the end of each of `k` regions of one table already
//!   holding 20,000 records per region (a tree as tall as a used memkv file's), for k = 1 … 8;
//! - the same with one more insert into a second table (a log kept in a table of its own);
//! - memkv's durable 1 KiB create, on a store prepared with 20,000 files.
//!
//! ```sh
//! cargo bench -p memkv-bench-compare --bench floor -- [--seconds N] [--rounds N]
//! ```
//!
//! Prints, per configuration, the median rate over the rounds, its ratio to bare redb, and the
//! bytes written to storage per commit (Linux `/proc/self/io`).

#[path = "../../../benches/common/mod.rs"]
mod common;

/// jemalloc, as in the memkv binary (crates/memkv-cli), where glibc's malloc and free were 15 %
/// of the server's CPU. It serves the Rust side of every figure here (memkv and bare redb);
/// SQLite's C code keeps the system's malloc.
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

use std::path::Path;
use std::time::Instant;

use redb::{Database, TableDefinition};

use common::{bulk_create, create, durable_store, text};

const DATA: TableDefinition<&[u8], &[u8]> = TableDefinition::new("data");
const LOG: TableDefinition<u64, &[u8]> = TableDefinition::new("log");
/// Records per region before the timed commits.
const PREFILL: u64 = 20_000;
const REGIONS: [usize; 7] = [1, 2, 3, 4, 5, 6, 8];

fn args() -> (f64, usize) {
    let mut args = std::env::args().skip(1);
    let (mut seconds, mut rounds) = (2.0, 3);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--seconds" => {
                seconds = args
                    .next()
                    .and_then(|s| s.parse().ok())
                    .expect("--seconds N")
            }
            "--rounds" => {
                rounds = args
                    .next()
                    .and_then(|s| s.parse().ok())
                    .expect("--rounds N")
            }
            "--bench" => {}
            other => panic!("unknown argument {other}"),
        }
    }
    (seconds, rounds)
}

/// Bytes this process has caused to be written to storage so far.
fn write_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/io")
        .ok()
        .and_then(|io| {
            io.lines()
                .find_map(|l| l.strip_prefix("write_bytes: ")?.trim().parse().ok())
        })
        .unwrap_or(0)
}

/// Runs `op` for about `seconds`: (operations per second, bytes written per operation).
fn measure(seconds: f64, mut op: impl FnMut(u64)) -> (f64, f64) {
    let bytes = write_bytes();
    let start = Instant::now();
    let mut n = 0;
    while start.elapsed().as_secs_f64() < seconds {
        op(n);
        n += 1;
    }
    let rate = n as f64 / start.elapsed().as_secs_f64();
    (rate, (write_bytes() - bytes) as f64 / n.max(1) as f64)
}

fn key(region: usize, i: u64) -> Vec<u8> {
    let mut k = vec![region as u8];
    k.extend_from_slice(&i.to_be_bytes());
    k
}

fn bare(path: &Path, seconds: f64) -> (f64, f64) {
    let db = Database::create(path).unwrap();
    let v = text(1024);
    measure(seconds, |n| {
        let txn = db.begin_write().unwrap();
        txn.open_table(DATA)
            .unwrap()
            .insert(format!("/memories/new/f{n}.md").as_bytes(), v.as_bytes())
            .unwrap();
        txn.commit().unwrap();
    })
}

fn regions(path: &Path, k: usize, log: bool, seconds: f64) -> (f64, f64) {
    let db = Database::create(path).unwrap();
    let kib = text(1024).into_bytes();
    let small = vec![b'r'; 120];
    // Region 0 holds 1 KiB values (contents), the others 120-byte records.
    let values: Vec<&[u8]> = (0..k)
        .map(|r| if r == 0 { &kib[..] } else { &small[..] })
        .collect();
    let txn = db.begin_write().unwrap();
    {
        let mut t = txn.open_table(DATA).unwrap();
        for (r, v) in values.iter().enumerate() {
            for i in 0..PREFILL {
                t.insert(key(r, i).as_slice(), *v).unwrap();
            }
        }
        let mut l = txn.open_table(LOG).unwrap();
        for i in 0..PREFILL {
            l.insert(i, small.as_slice()).unwrap();
        }
    }
    txn.commit().unwrap();
    measure(seconds, |n| {
        let txn = db.begin_write().unwrap();
        {
            let mut t = txn.open_table(DATA).unwrap();
            for (r, v) in values.iter().enumerate() {
                t.insert(key(r, PREFILL + n).as_slice(), *v).unwrap();
            }
        }
        if log {
            txn.open_table(LOG)
                .unwrap()
                .insert(PREFILL + n, small.as_slice())
                .unwrap();
        }
        txn.commit().unwrap();
    })
}

fn memkv(dir: &Path, seconds: f64) -> (f64, f64) {
    let store = durable_store(dir);
    let kib = text(1024);
    bulk_create(
        &store,
        "user0",
        (0..PREFILL).map(|i| (format!("/memories/old/f{i}.md"), kib.clone())),
    );
    let user = store.user("user0").unwrap();
    measure(seconds, |n| {
        let out = user
            .execute(&create(&format!("/memories/new/t0/f{n}.md"), &kib))
            .unwrap();
        assert!(!out.is_error, "{}", out.content);
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let (seconds, rounds) = args();
    let base = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let mut names = vec!["bare redb (compare's)".to_owned()];
    for k in REGIONS {
        names.push(format!("redb, {k} regions"));
        names.push(format!("redb, {k} regions + log table"));
    }
    names.push("memkv create".to_owned());
    let mut figures: Vec<Vec<(f64, f64)>> = vec![Vec::new(); names.len()];
    for round in 0..rounds {
        let dir = base.path().join(format!("round{round}"));
        std::fs::create_dir_all(&dir).unwrap();
        let mut row = vec![bare(&dir.join("bare.redb"), seconds)];
        for k in REGIONS {
            row.push(regions(&dir.join(format!("r{k}.redb")), k, false, seconds));
            row.push(regions(&dir.join(format!("r{k}l.redb")), k, true, seconds));
        }
        row.push(memkv(&dir, seconds));
        eprintln!(
            "round {}: {}",
            round + 1,
            row.iter()
                .map(|(r, _)| format!("{r:.0}"))
                .collect::<Vec<_>>()
                .join(" ")
        );
        for (f, m) in figures.iter_mut().zip(row) {
            f.push(m);
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
    let bare_rate = median(figures[0].iter().map(|f| f.0).collect());
    println!("| configuration | commits/s | ÷ bare redb | bytes written per commit |");
    println!("|---|---:|---:|---:|");
    for (name, f) in names.iter().zip(&figures) {
        let rate = median(f.iter().map(|f| f.0).collect());
        let bytes = median(f.iter().map(|f| f.1).collect());
        println!(
            "| {name} | {rate:.0} | {:.2} | {bytes:.0} |",
            rate / bare_rate
        );
    }
}
