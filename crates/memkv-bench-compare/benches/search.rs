//! Search, side by side in one run: memkv's exact search against ripgrep over the same tree
//! written to a directory (warm page cache), and ranked search's latency, on a store of 2,000
//! memories and 20 MB on the real disk. Prints the targets of BENCHMARKS.md ("Search").
//!
//! ```sh
//! cargo bench -p memkv-bench-compare --bench search -- [--reps N] [--bytes-each N] [--ranked-only]
//! ```
//!
//! `--bytes-each 50000` is a store at the hosted API's limits (2,000 memories, 100 MB);
//! `--ranked-only` skips the exact searches (and ripgrep).
//!
//! ripgrep (`rg`, Debian's `ripgrep`) must be on the PATH; it runs as a user would run it, one
//! process per search, its output discarded (`-n`, to /dev/null), with its default threads.

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

use std::path::Path;
use std::process::{Command as Process, Stdio};
use std::sync::Arc;
use std::time::Instant;

use memkv::{Database, SearchMode, SearchRequest};
use serde_json::json;

const MEMORIES: usize = 2_000;

/// A deterministic generator (xorshift).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    /// A word of a Zipf-like vocabulary of 5,000 words.
    fn word(&mut self) -> String {
        let r = (self.next() % 100_000) as f64 / 100_000.0;
        format!(
            "{}{}",
            ["ka", "lo", "mi", "ne", "su", "ta"][(self.next() % 6) as usize],
            (r * r * r * 5000.0) as u64
        )
    }
}

/// A memory of about `bytes` bytes: notes of 8–14 words a line, now and then a line a person
/// would search for.
fn memory(rng: &mut Rng, bytes: usize) -> String {
    let mut out = String::with_capacity(bytes + 100);
    let mut line: u64 = 0;
    while out.len() < bytes {
        line += 1;
        if rng.next().is_multiple_of(40) {
            out.push_str(&format!(
                "timezone: Europe/Paris (user_{:04})\n",
                rng.next() % 10_000
            ));
            continue;
        }
        let n = 8 + rng.next() % 7;
        let words: Vec<String> = (0..n).map(|_| rng.word()).collect();
        out.push_str(&format!(
            "- {} {}\n",
            words.join(" "),
            if line.is_multiple_of(9) {
                "Bakersville"
            } else {
                ""
            }
        ));
    }
    out
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn percentile(v: &[f64], p: f64) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v[((v.len() as f64 * p).ceil() as usize).clamp(1, v.len()) - 1]
}

fn rg(dir: &Path, args: &[&str]) -> f64 {
    let start = Instant::now();
    let status = Process::new("rg")
        .args(["--hidden", "--no-ignore", "--no-config", "-n"])
        .args(args)
        .arg("memories")
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("ripgrep (rg) is on the PATH");
    assert!(status.code().unwrap_or(2) <= 1, "rg {args:?}: {status}");
    start.elapsed().as_secs_f64()
}

/// The process's resident memory and its peak, in MB (Linux's /proc/self/status).
fn memory_mb() -> (f64, f64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|kb| kb.parse::<f64>().ok())
            .map_or(0.0, |kb| kb / 1024.0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

fn main() {
    let mut reps = 21;
    let mut bytes_each = 10_000;
    let mut ranked_only = false;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--reps" => reps = args.next().and_then(|s| s.parse().ok()).expect("--reps N"),
            "--bytes-each" => {
                bytes_each = args
                    .next()
                    .and_then(|s| s.parse().ok())
                    .expect("--bytes-each N")
            }
            "--ranked-only" => ranked_only = true,
            "--bench" => {}
            other => panic!("unknown argument {other}"),
        }
    }
    let base = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let db = Arc::new(
        Database::builder()
            .max_files(u64::MAX)
            .max_bytes(u64::MAX)
            .open(base.path().join("search.redb"))
            .unwrap(),
    );
    let tree = base.path().join("tree");
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let store = db.user("bench").unwrap();
    let mut total = 0;
    for i in 0..MEMORIES {
        let path = format!("/memories/area{}/topic{}/note{i}.md", i % 10, i % 37);
        let text = memory(&mut rng, bytes_each);
        total += text.len();
        if !ranked_only {
            let file = tree.join(path.trim_start_matches('/'));
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            std::fs::write(&file, &text).unwrap();
        }
        let out = store
            .execute_json(&json!({"command": "create", "path": path, "file_text": text}))
            .unwrap();
        assert!(!out.is_error, "{}", out.content);
    }
    eprintln!("{MEMORIES} memories, {total} bytes; {reps} repetitions of each search");

    // Exact search: both sides scan every memory and report every matching line.
    let exact = [
        (
            "literal, frequent",
            "Bakersville",
            SearchMode::Literal,
            vec!["-F", "Bakersville"],
        ),
        (
            "literal, rare",
            "ka4999",
            SearchMode::Literal,
            vec!["-F", "ka4999"],
        ),
        (
            "literal, case-insensitive",
            "europe/paris",
            SearchMode::Literal,
            vec!["-F", "-i", "europe/paris"],
        ),
        (
            "regex",
            r"user_[0-9]{4}\)",
            SearchMode::Regex,
            vec![r"user_[0-9]{4}\)"],
        ),
        (
            "regex, word",
            r"\bmi4[0-9]{2}\b",
            SearchMode::Regex,
            vec![r"\bmi4[0-9]{2}\b"],
        ),
    ];
    let exact = if ranked_only {
        Vec::new()
    } else {
        exact.to_vec()
    };
    println!(
        "| exact search (median of {reps}) | memkv (ms) | ripgrep (ms) | ratio | target | met |"
    );
    println!("|---|---:|---:|---:|---|---|");
    for (name, query, mode, rg_args) in exact {
        let mut request = SearchRequest::new(query, mode).limit(1000);
        request.case_insensitive = rg_args.contains(&"-i");
        let found = store.search(&request).unwrap();
        let lines = found.matching_lines() as u64 + found.more;
        // Warm both (the page cache for ripgrep, redb's cache for memkv).
        rg(&tree, &rg_args);
        let ours = median(
            (0..reps)
                .map(|_| {
                    let start = Instant::now();
                    let r = store.search(&request).unwrap();
                    assert_eq!(r.matching_lines() as u64 + r.more, lines);
                    start.elapsed().as_secs_f64()
                })
                .collect(),
        );
        let theirs = median((0..reps).map(|_| rg(&tree, &rg_args)).collect());
        let ratio = ours / theirs;
        println!(
            "| {name} (`{query}`, {lines} lines) | {:.1} | {:.1} | {ratio:.2} | ≤ 1.5× ripgrep | {} |",
            ours * 1e3,
            theirs * 1e3,
            if ratio <= 1.5 { "yes" } else { "**no**" }
        );
    }

    // Ranked search: the first search builds the store's index; then queries of 1–3 words.
    let (rss_before, _) = memory_mb();
    let start = Instant::now();
    store
        .search(&SearchRequest::new("timezone", SearchMode::Ranked))
        .unwrap();
    let build = start.elapsed();
    let (rss_after, peak) = memory_mb();
    let mut times = Vec::new();
    let queries = 200;
    for _ in 0..queries {
        let n = 1 + rng.next() % 3;
        let q: Vec<String> = (0..n).map(|_| rng.word()).collect();
        let start = Instant::now();
        store
            .search(&SearchRequest::new(q.join(" "), SearchMode::Ranked))
            .unwrap();
        times.push(start.elapsed().as_secs_f64());
    }
    // After a write, the next search first applies it.
    let mut after_write = Vec::new();
    for i in 0..20 {
        let out = store
            .execute_json(&json!({"command": "create", "path": format!("/memories/new/{i}.md"), "file_text": "timezone: Asia/Tokyo\n"}))
            .unwrap();
        assert!(!out.is_error);
        let start = Instant::now();
        let r = store
            .search(&SearchRequest::new("tokyo", SearchMode::Ranked).limit(100))
            .unwrap();
        after_write.push(start.elapsed().as_secs_f64());
        assert_eq!(r.hits.len(), i + 1);
    }
    let p50 = percentile(&times, 0.5) * 1e3;
    let p99 = percentile(&times, 0.99) * 1e3;
    println!();
    println!("| ranked search ({queries} queries of 1–3 words) | figure | target | met |");
    println!("|---|---:|---|---|");
    println!(
        "| p50 (ms) | {p50:.2} | ≤ 5 | {} |",
        if p50 <= 5.0 { "yes" } else { "**no**" }
    );
    println!(
        "| p99 (ms) | {p99:.2} | ≤ 20 | {} |",
        if p99 <= 20.0 { "yes" } else { "**no**" }
    );
    println!(
        "| the first search: the index built (s) | {:.2} | (information) | |",
        build.as_secs_f64()
    );
    println!(
        "| a search right after a create, which it applies first: p50 (ms) | {:.2} | (information) | |",
        percentile(&after_write, 0.5) * 1e3
    );
    // 300 memories changed, then a search: applied to the index in place, or a rebuild.
    for i in 0..300 {
        let path = format!("/memories/area{}/topic{}/note{i}.md", i % 10, i % 37);
        let out = store
            .execute_json(&json!({"command": "insert", "path": path, "insert_line": 0, "insert_text": "timezone: Asia/Tokyo"}))
            .unwrap();
        assert!(!out.is_error, "{}", out.content);
    }
    let start = Instant::now();
    store
        .search(&SearchRequest::new("tokyo", SearchMode::Ranked))
        .unwrap();
    println!(
        "| the search after 300 memories changed (s) | {:.2} | (information) | |",
        start.elapsed().as_secs_f64()
    );
    println!(
        "| resident memory: before the first search, after it, peak (MB) | {rss_before:.0}, {rss_after:.0}, {peak:.0} | (information) | |"
    );
}
