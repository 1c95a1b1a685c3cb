//! Fixtures shared by the benchmarks: stores on the real disk, prepared trees, the recorded
//! agent session. Everything here runs outside the timed loops.

#![allow(dead_code)]

use std::path::Path;

use memkv::{Command, Database};
use serde_json::{Value, json};

/// A durable store on disk (every commit flushed), with quotas out of the way.
pub fn durable_store(dir: &Path) -> Database {
    Database::builder()
        .max_files(u64::MAX)
        .max_bytes(u64::MAX)
        .open(dir.join("bench.redb"))
        .unwrap()
}

pub fn cmd(value: Value) -> Command {
    Command::from_json(&value).unwrap()
}

pub fn create(path: &str, text: &str) -> Command {
    cmd(json!({"command": "create", "path": path, "file_text": text}))
}

/// `n` bytes of Markdown-like text in lines of about 60 characters.
pub fn text(n: usize) -> String {
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

/// Creates many files in few transactions (untimed preparation).
pub fn bulk_create(
    store: &Database,
    user: &str,
    files: impl IntoIterator<Item = (String, String)>,
) {
    let mut batch = Vec::new();
    let flush = |batch: &mut Vec<(String, Command)>| {
        for r in store.execute_batch(batch) {
            assert!(!r.unwrap().is_error);
        }
        batch.clear();
    };
    for (path, content) in files {
        batch.push((user.to_owned(), create(&path, &content)));
        if batch.len() == 5_000 {
            flush(&mut batch);
        }
    }
    flush(&mut batch);
}

/// A user with `total` files: 50 entries in `/memories/hot` (the directory the benchmarks list)
/// and the rest spread over `/memories/cold/dNNN/eNN/` (deeper than a listing looks).
pub fn prepare_tree(store: &Database, user: &str, total: usize) {
    let hot = (0..50).map(|i| {
        (
            format!("/memories/hot/f{i:02}.md"),
            format!("hot file {i}\n"),
        )
    });
    let cold = (0..total.saturating_sub(50)).map(|i| {
        (
            format!("/memories/cold/d{:03}/e{:02}/f{i}.md", i % 500, i % 17),
            format!("cold {i}\n"),
        )
    });
    bulk_create(store, user, hot.chain(cold));
}

/// The recorded agent session: 152 commands, mostly views, some edits.
pub fn agent_session() -> Vec<Command> {
    include_str!("../data/agent-session.jsonl")
        .lines()
        .map(|l| cmd(serde_json::from_str(l).unwrap()))
        .collect()
}
