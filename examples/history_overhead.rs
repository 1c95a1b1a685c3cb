//! What keeping history costs a write, measured so that a busy machine affects both sides alike:
//! two stores, one keeping every version (`Retention::DEFAULT`) and one keeping none
//! (`Retention::NONE`), take turns doing rounds of the same writes; the median round of each
//! is compared.
//!
//! ```sh
//! cargo run --release --example history_overhead -- [ROUNDS] [WRITES_PER_ROUND] [FILES]
//! ```
//!
//! BENCHMARKS.md uses `101 100 200`: short rounds in turn, so that the disk's drift falls on
//! both stores alike. Both stores first get `FILES` files of 1 KiB (default 200: a store in use, whose records
//! span many pages; with 0, the store without history fits in a page or two, which no store
//! in use does).
//!
//! Durable stores are redb files in a temporary directory beside the build (fsync per commit);
//! in-memory stores show the CPU cost alone. Prints one line per workload.

use std::time::Instant;

use memkv::{Command, Database, Retention};
use serde_json::json;

fn cmd(value: serde_json::Value) -> Command {
    Command::from_json(&value).unwrap()
}

fn text(len: usize) -> String {
    let line = "- a remembered fact about the project, kept for later\n";
    line.repeat(len / line.len() + 1)[..len].to_owned()
}

fn open(retention: Retention, file: Option<&std::path::Path>) -> Database {
    let builder = Database::builder()
        .max_files(u64::MAX)
        .max_bytes(u64::MAX)
        .retention(retention);
    match file {
        Some(path) => builder.open(path).unwrap(),
        None => builder.in_memory().unwrap(),
    }
}

/// Bytes this process has handed to `write` calls so far (`wchar` of `/proc/self/io`; 0 where
/// there is no such file): what redb writes, page by page.
fn written() -> u64 {
    std::fs::read_to_string("/proc/self/io")
        .ok()
        .and_then(|io| {
            io.lines().find_map(|l| {
                l.strip_prefix("wchar: ")
                    .and_then(|n| n.trim().parse().ok())
            })
        })
        .unwrap_or(0)
}

/// Runs `writes` writes of `workload` on `store`; returns microseconds and bytes written per
/// write.
fn round(store: &Database, workload: &str, writes: usize, counter: &mut u64) -> (f64, f64) {
    let user = store.user("bench").unwrap();
    let kib = text(1024);
    let before = written();
    let start = Instant::now();
    for _ in 0..writes {
        *counter += 1;
        let command = match workload {
            "create_1KiB" => cmd(
                json!({"command": "create", "path": format!("/memories/new/f{counter}.md"), "file_text": kib}),
            ),
            _ => {
                let (old, new) = if *counter % 2 == 1 {
                    ("MARKER-A", "MARKER-B")
                } else {
                    ("MARKER-B", "MARKER-A")
                };
                cmd(
                    json!({"command": "str_replace", "path": "/memories/edit/4KiB.md", "old_str": old, "new_str": new}),
                )
            }
        };
        let out = user.execute(&command).unwrap();
        assert!(!out.is_error, "{}", out.content);
    }
    let micros = start.elapsed().as_secs_f64() * 1e6 / writes as f64;
    (micros, (written() - before) as f64 / writes as f64)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("ROUNDS and WRITES_PER_ROUND are numbers"))
        .collect();
    let rounds = args.first().copied().unwrap_or(15);
    let writes = args.get(1).copied().unwrap_or(200);
    let files = args.get(2).copied().unwrap_or(200);
    let dir = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
    println!(
        "{rounds} alternating rounds of {writes} writes each, on stores of {files} files; \
         median µs and bytes written per write"
    );
    for durable in [true, false] {
        for workload in ["create_1KiB", "str_replace_4KiB"] {
            let kind = if durable { "durable" } else { "in_memory" };
            let path = |name: &str| dir.path().join(format!("{kind}-{workload}-{name}.redb"));
            let kept = open(Retention::DEFAULT, durable.then(|| path("kept")).as_deref());
            let none = open(Retention::NONE, durable.then(|| path("none")).as_deref());
            let mut four = text(4096);
            four.insert_str(0, "MARKER-A\n");
            for store in [&kept, &none] {
                let user = store.user("bench").unwrap();
                for i in 0..files {
                    let create = cmd(json!({
                        "command": "create",
                        "path": format!("/memories/kept/{}/f{i}.md", i % 10),
                        "file_text": text(1024),
                    }));
                    assert!(!user.execute(&create).unwrap().is_error);
                }
                let create = cmd(
                    json!({"command": "create", "path": "/memories/edit/4KiB.md", "file_text": four}),
                );
                assert!(
                    !store
                        .user("bench")
                        .unwrap()
                        .execute(&create)
                        .unwrap()
                        .is_error
                );
            }
            let (mut a, mut b) = (Vec::new(), Vec::new());
            let (mut wa, mut wb) = (Vec::new(), Vec::new());
            let (mut ca, mut cb) = (0, 0);
            // One warm-up round each, not counted.
            round(&kept, workload, writes, &mut ca);
            round(&none, workload, writes, &mut cb);
            for _ in 0..rounds {
                let (t, w) = round(&kept, workload, writes, &mut ca);
                a.push(t);
                wa.push(w);
                let (t, w) = round(&none, workload, writes, &mut cb);
                b.push(t);
                wb.push(w);
            }
            let (a, b) = (median(a), median(b));
            let bytes = match durable {
                true => format!("  bytes {:7.0} / {:7.0}", median(wa), median(wb)),
                false => String::new(),
            };
            println!(
                "{kind:>9} {workload:<17} kept {a:8.1}  none {b:8.1}  overhead {:+6.1} %{bytes}",
                (a / b - 1.0) * 100.0
            );
        }
    }
}
