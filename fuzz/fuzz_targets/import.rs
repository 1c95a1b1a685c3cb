//! An export stream from anywhere, imported into a fresh in-memory store: it is refused with an
//! error or imported whole; an imported store passes `Database::check`, and its own export imports
//! again into another store with the same files.
//!
//! Inputs whose first byte is 0x01 are resealed first (every file and version line's `sha256`
//! and a version's `size`, and the trailer's counts and digest, recomputed), so that the fuzzer
//! also reaches what an import does after the checksums pass: paths, users, limits, times,
//! conflicts, and in format 2 the stores, ids and versions.
#![no_main]

use std::path::PathBuf;
use std::sync::LazyLock;

use libfuzzer_sys::fuzz_target;
use memkv::{Conflict, Database};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// One file per fuzzing process, rewritten for each input (`Database::import` reads a file).
static FILE: LazyLock<PathBuf> = LazyLock::new(|| {
    let dir = if std::path::Path::new("/dev/shm").is_dir() {
        PathBuf::from("/dev/shm")
    } else {
        std::env::temp_dir()
    };
    dir.join(format!("memkv-fuzz-import-{}.jsonl", std::process::id()))
});

fn files(store: &Database) -> Vec<(String, Vec<(String, String)>)> {
    store
        .users()
        .unwrap()
        .into_iter()
        .map(|u| {
            let user = store.user(&u.user).unwrap();
            let files = user
                .files()
                .unwrap()
                .into_iter()
                .map(|f| {
                    let path = f.path.to_string();
                    let content = user.read_file(&path).unwrap().unwrap();
                    (path, content)
                })
                .collect();
            (u.user, files)
        })
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `data` with the checksums and counts an export would carry for its lines.
fn reseal(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len() + 128);
    let (mut files, mut bytes, mut users) = (0u64, 0u64, std::collections::BTreeSet::new());
    // Format 2: the store lines are the users, and the trailer counts the versions.
    let (mut stores, mut versions, mut v2) = (0u64, 0u64, false);
    let data = data.strip_suffix(b"\n").unwrap_or(data);
    for raw in data.split(|&b| b == b'\n') {
        let Ok(mut line) = serde_json::from_slice::<Value>(raw) else {
            out.extend_from_slice(raw);
            out.push(b'\n');
            continue;
        };
        match line.get("type").and_then(Value::as_str) {
            Some("file") => {
                if let Some(content) = line.get("content").and_then(Value::as_str) {
                    let digest = hex(&Sha256::digest(content.as_bytes()));
                    files += 1;
                    bytes += content.len() as u64;
                    users.insert(line.get("user").cloned().unwrap_or(Value::Null).to_string());
                    line["sha256"] = json!(digest);
                }
            }
            Some("header") => v2 = line.get("version") != Some(&json!(1)),
            Some("store") => stores += 1,
            Some("version") => {
                versions += 1;
                if let Some(content) = line.get("content").and_then(Value::as_str) {
                    let (size, digest) = (content.len(), hex(&Sha256::digest(content.as_bytes())));
                    line["size"] = json!(size);
                    line["sha256"] = json!(digest);
                }
            }
            Some("trailer") => {
                line["files"] = json!(files);
                line["users"] = json!(if v2 { stores } else { users.len() as u64 });
                if v2 {
                    line["versions"] = json!(versions);
                }
                line["bytes"] = json!(bytes);
                line["sha256"] = json!(hex(&Sha256::digest(&out)));
            }
            _ => {}
        }
        out.extend_from_slice(line.to_string().as_bytes());
        out.push(b'\n');
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let data = match data.split_first() {
        Some((1, rest)) => reseal(rest),
        _ => data.to_vec(),
    };
    std::fs::write(&*FILE, &data).unwrap();
    let store = Database::in_memory().unwrap();
    if store.import(&FILE, Conflict::Refuse, &mut |_| {}).is_err() {
        return;
    }
    assert_eq!(store.check().unwrap(), Vec::new());
    let mut export = Vec::new();
    store.export(&[], &mut export, &mut |_| {}).unwrap();
    std::fs::write(&*FILE, &export).unwrap();
    let again = Database::in_memory().unwrap();
    again.import(&FILE, Conflict::Refuse, &mut |_| {}).unwrap();
    assert_eq!(files(&again), files(&store));
});
