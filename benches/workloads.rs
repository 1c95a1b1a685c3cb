//! Criterion benchmarks named after real use. Every store lives on the real disk and commits
//! durably; databases are prepared outside the timed loops.
//!
//! `cargo bench --bench workloads` (a few minutes). Figures are recorded in BENCHMARKS.md.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use criterion::{BatchSize, BenchmarkId, Criterion, criterion_group, criterion_main};
use serde_json::json;

use common::{agent_session, bulk_create, cmd, create, durable_store, prepare_tree, text};

static UNIQUE: AtomicU64 = AtomicU64::new(0);

fn unique() -> u64 {
    UNIQUE.fetch_add(1, Ordering::Relaxed)
}

fn durable_writes(c: &mut Criterion) {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let store = durable_store(dir.path());
    let user = store.user("bench").unwrap();
    let mut g = c.benchmark_group("durable_write");
    let kib = text(1024);
    g.bench_function("create_1KiB", |b| {
        b.iter(|| {
            let out = user
                .execute(&create(&format!("/memories/new/f{}.md", unique()), &kib))
                .unwrap();
            assert!(!out.is_error);
        })
    });
    // The same create without the group-commit queue (a batch of one goes straight to its
    // transaction): the difference is what the queue costs a lone caller.
    g.bench_function("create_1KiB_bypassing_queue", |b| {
        b.iter(|| {
            let c = create(&format!("/memories/new/f{}.md", unique()), &kib);
            let out = store.execute_batch(&[("bench".to_owned(), c)]);
            assert!(!out[0].as_ref().unwrap().is_error);
        })
    });
    for (label, size) in [("4KiB", 4 * 1024), ("100KiB", 100 * 1024 - 2048)] {
        let path = format!("/memories/edit/{label}.md");
        let mut content = text(size);
        content.insert_str(0, "MARKER-A\n");
        assert!(!user.execute(&create(&path, &content)).unwrap().is_error);
        let mut flip = false;
        g.bench_function(format!("str_replace_{label}"), |b| {
            b.iter(|| {
                flip = !flip;
                let (old, new) = if flip { ("MARKER-A", "MARKER-B") } else { ("MARKER-B", "MARKER-A") };
                let out = user
                    .execute(&cmd(json!({"command": "str_replace", "path": path, "old_str": old, "new_str": new})))
                    .unwrap();
                assert!(!out.is_error, "{}", out.content);
            })
        });
        // The same file each time: the setup (untimed) takes the inserted line out again, so the
        // file keeps its size and the routine measures one insert into it.
        let path = format!("/memories/insert/{label}.md");
        assert!(!user.execute(&create(&path, &text(size))).unwrap().is_error);
        let insert = cmd(
            json!({"command": "insert", "path": path, "insert_line": 10, "insert_text": "- a new fact\n"}),
        );
        let undo = cmd(
            json!({"command": "str_replace", "path": path, "old_str": "- a new fact\n", "new_str": ""}),
        );
        let mut inserted = false;
        g.bench_function(format!("insert_{label}"), |b| {
            b.iter_batched(
                || {
                    if inserted {
                        assert!(!user.execute(&undo).unwrap().is_error);
                    }
                    inserted = true;
                },
                |()| assert!(!user.execute(&insert).unwrap().is_error),
                BatchSize::PerIteration,
            )
        });
    }
    g.finish();
}

fn reads(c: &mut Criterion) {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let store = durable_store(dir.path());
    let mut g = c.benchmark_group("read");
    let user = store.user("reader").unwrap();
    assert!(
        !user
            .execute(&create("/memories/notes.md", &text(4 * 1024)))
            .unwrap()
            .is_error
    );
    g.bench_function("view_file_4KiB", |b| {
        let view = cmd(json!({"command": "view", "path": "/memories/notes.md"}));
        b.iter(|| user.execute(&view).unwrap())
    });
    assert!(
        !user
            .execute(&create("/memories/big.md", &text(100 * 1024 - 2048)))
            .unwrap()
            .is_error
    );
    g.bench_function("view_range_50_lines_of_100KiB", |b| {
        let view =
            cmd(json!({"command": "view", "path": "/memories/big.md", "view_range": [1000, 1049]}));
        b.iter(|| user.execute(&view).unwrap())
    });
    for total in [1_000, 10_000, 100_000] {
        let name = format!("tree{total}");
        prepare_tree(&store, &name, total);
        let user = store.user(&name).unwrap();
        let view = cmd(json!({"command": "view", "path": "/memories/hot"}));
        assert!(user.execute(&view).unwrap().content.lines().count() == 52);
        g.bench_with_input(
            BenchmarkId::new("view_dir_50_entries", total),
            &view,
            |b, view| b.iter(|| user.execute(view).unwrap()),
        );
    }
    g.finish();
}

fn directories(c: &mut Criterion) {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let store = durable_store(dir.path());
    let user = store.user("dirs").unwrap();
    let mut g = c.benchmark_group("directory");
    g.sample_size(10);
    let fill = |root: &str| {
        bulk_create(
            &store,
            "dirs",
            (0..1_000).map(|i| {
                (
                    format!("{root}/sub{}/f{i}.md", i % 10),
                    format!("file {i}\n"),
                )
            }),
        );
    };
    g.bench_function("rename_1000_files", |b| {
        b.iter_batched(
            || {
                let n = unique();
                fill(&format!("/memories/r{n}"));
                n
            },
            |n| {
                let out = user
                    .execute(&cmd(json!({"command": "rename", "old_path": format!("/memories/r{n}"), "new_path": format!("/memories/moved{n}")})))
                    .unwrap();
                assert!(!out.is_error);
            },
            BatchSize::PerIteration,
        )
    });
    g.bench_function("delete_1000_files", |b| {
        b.iter_batched(
            || {
                let n = unique();
                fill(&format!("/memories/d{n}"));
                n
            },
            |n| {
                let out = user
                    .execute(&cmd(
                        json!({"command": "delete", "path": format!("/memories/d{n}")}),
                    ))
                    .unwrap();
                assert!(!out.is_error);
            },
            BatchSize::PerIteration,
        )
    });
    g.finish();
}

fn session(c: &mut Criterion) {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let store = durable_store(dir.path());
    let commands = agent_session();
    let mut g = c.benchmark_group("session");
    g.sample_size(10);
    g.bench_function("replay_agent_session_152_commands", |b| {
        b.iter(|| {
            // A fresh user per replay: the session starts from an empty tree.
            let user = store.user(&format!("agent{}", unique())).unwrap();
            for c in &commands {
                user.execute(c).unwrap();
            }
        })
    });
    g.finish();
}

/// CPU per command, without the disk: creates in batches of 32 as group commit forms them under
/// load, on a file in memory (tmpfs, where a flush costs nothing; redb's in-memory backend would
/// add copies of the whole database as it grows).
fn cpu(c: &mut Criterion) {
    let shm = std::path::Path::new("/dev/shm");
    let dir = if shm.is_dir() {
        tempfile::tempdir_in(shm).unwrap()
    } else {
        tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
    };
    let store = durable_store(dir.path());
    let kib = text(1024);
    let mut g = c.benchmark_group("cpu");
    g.throughput(criterion::Throughput::Elements(32));
    g.bench_function("create_1KiB_in_memory_batch_of_32", |b| {
        b.iter_batched(
            || {
                (0..32)
                    .map(|t| {
                        let path = format!("/memories/w/t{t}/f{}.md", unique());
                        (format!("user{}", t % 8), create(&path, &kib))
                    })
                    .collect::<Vec<_>>()
            },
            |batch| {
                for r in store.execute_batch(&batch) {
                    assert!(!r.unwrap().is_error);
                }
            },
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
}

criterion_group! {
    name = benches;
    config = config();
    targets = durable_writes, reads, directories, session, cpu
}
criterion_main!(benches);
