//! A full consistency check of the stored data against the invariants of `crate::tree`
//! (`memkv check`). It reads everything, so it is for operators and tests, not for hot paths.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::ControlFlow;

use crate::error::Error;
use crate::history::body::Body;
use crate::history::content;
use crate::history::record::{self, IdEntry, VersionRecord};
use crate::history::{MemoryId, Operation, VersionId};
use crate::layout::{self, Node, Totals, UserTotals};
use crate::path::MemoryPath;
use crate::storage::{ReadTxn, Space};
use crate::tree::TreeRead;

type KeyValue = (Vec<u8>, Vec<u8>);

fn all<T: ReadTxn + ?Sized>(txn: &T, space: Space, user: &str) -> Result<Vec<KeyValue>, Error> {
    let mut out = Vec::new();
    txn.scan(space, user, &[], None, &mut |k, v| {
        out.push((k.to_vec(), v.to_vec()));
        Ok(ControlFlow::Continue(()))
    })?;
    Ok(out)
}

/// Every violated invariant of `user`'s data, as sentences; empty when all is well.
pub(crate) fn check_user<T: ReadTxn + ?Sized>(txn: &T, user: &str) -> Result<Vec<String>, Error> {
    let mut problems = Vec::new();
    let mut files: BTreeMap<MemoryPath, layout::FileMeta> = BTreeMap::new();
    let mut dirs: BTreeMap<MemoryPath, Totals> = BTreeMap::new();
    for (key, value) in all(txn, Space::Nodes, user)? {
        let path = layout::path_of_content_key(&layout::content_key_of_node_key(&key)?)?;
        match layout::decode::<Node>(&value, "index node")? {
            Node::File(meta) => {
                files.insert(path, meta);
            }
            Node::Dir(t) => {
                dirs.insert(path, t);
            }
        }
    }
    let mut contents: BTreeMap<MemoryPath, (usize, [u8; 32])> = BTreeMap::new();
    for (key, value) in all(txn, Space::Contents, user)? {
        if std::str::from_utf8(&value).is_err() {
            problems.push(format!(
                "content of {} is not UTF-8",
                layout::path_of_content_key(&key)?
            ));
        }
        contents.insert(
            layout::path_of_content_key(&key)?,
            (value.len(), layout::sha256(&value)),
        );
    }
    let mut access: BTreeSet<(MemoryPath, i64, u64)> = BTreeSet::new();
    for (key, value) in all(txn, Space::Access, user)? {
        let (ms, path) = layout::decode_access_key(&key)?;
        access.insert((path, ms, layout::decode(&value, "access entry")?));
    }

    let mut want_dirs: BTreeMap<MemoryPath, Totals> = BTreeMap::new();
    let mut total = Totals::default();
    for (path, meta) in &files {
        match contents.get(path) {
            None => problems.push(format!("{path} has no content")),
            Some(&(len, _)) if len as u64 != meta.size => problems.push(format!(
                "{path} has size {} but {len} bytes of content",
                meta.size
            )),
            Some((_, sha256)) if *sha256 != meta.sha256 => problems.push(format!(
                "the content of {path} does not match its SHA-256 (recorded {}, found {}): it was damaged",
                hex::encode(meta.sha256),
                hex::encode(sha256)
            )),
            Some(_) => {}
        }
        if !access.contains(&(path.clone(), meta.accessed_ms.max(0), meta.size)) {
            problems.push(format!(
                "{path} has no access entry at {}",
                meta.accessed_ms
            ));
        }
        if dirs.contains_key(path) {
            problems.push(format!("{path} is both a file and a directory"));
        }
        for dir in path.ancestors().skip(1) {
            let t = want_dirs.entry(dir).or_default();
            t.files += 1;
            t.bytes += meta.size;
        }
        total.files += 1;
        total.bytes += meta.size;
    }
    for path in contents.keys().filter(|p| !files.contains_key(*p)) {
        problems.push(format!("content without a file: {path}"));
    }
    for (path, ms, _) in access
        .iter()
        .filter(|(p, ms, _)| files.get(p).is_none_or(|m| m.accessed_ms.max(0) != *ms))
    {
        problems.push(format!("stray access entry for {path} at {ms}"));
    }
    if want_dirs != dirs {
        for (path, t) in &dirs {
            if want_dirs.get(path) != Some(t) {
                problems.push(format!(
                    "directory {path} records {t:?}, expected {:?}",
                    want_dirs.get(path)
                ));
            }
        }
        for path in want_dirs.keys().filter(|p| !dirs.contains_key(*p)) {
            problems.push(format!("directory {path} is missing from the index"));
        }
    }
    let recorded: Option<UserTotals> = match txn.get(Space::Totals, user, &[])? {
        Some(bytes) => Some(layout::decode(&bytes, "user totals")?),
        None => None,
    };
    match recorded {
        None if total.files > 0 => problems.push(format!("no totals recorded, expected {total:?}")),
        Some(_) if total.files == 0 => {
            problems.push("totals recorded for a user without files".into())
        }
        Some(t) if (t.files, t.bytes) != (total.files, total.bytes) => problems.push(format!(
            "totals record {} files, {} bytes; expected {total:?}",
            t.files, t.bytes
        )),
        _ => {}
    }
    check_history(txn, user, &files, &mut problems)?;
    // And the tree walk used by listings agrees with the raw index.
    let mut walked = 0;
    TreeRead::new(txn, user).files(&mut |_, _| {
        walked += 1;
        Ok(ControlFlow::Continue(()))
    })?;
    if walked != files.len() {
        problems.push(format!(
            "the tree walk finds {walked} files, the index {}",
            files.len()
        ));
    }
    Ok(problems)
}

/// The history's invariants (`docs/design.md`, invariants 6 and 7): the id entries and the
/// files agree; each version is a sound link of its memory's chain and rebuilds to its hash;
/// snapshots are those the versions name; the store record counts the versions kept and is
/// ahead of every number used.
fn check_history<T: ReadTxn + ?Sized>(
    txn: &T,
    user: &str,
    files: &BTreeMap<MemoryPath, layout::FileMeta>,
    problems: &mut Vec<String>,
) -> Result<(), Error> {
    // `Memories`: each live memory with its path, each deleted one with versions kept with its
    // last.
    let mut ids: BTreeMap<u64, MemoryPath> = BTreeMap::new();
    let mut deleted: BTreeMap<u64, u64> = BTreeMap::new();
    for (key, value) in all(txn, Space::Memories, user)? {
        let memory = record::decode_memory_key(&key)?;
        match layout::decode(&value, "memory id entry")? {
            IdEntry::Live(content_key) => {
                ids.insert(memory, layout::path_of_content_key(&content_key)?);
            }
            IdEntry::Deleted { latest } => {
                deleted.insert(memory, latest);
            }
        }
    }
    let mut want_ids = BTreeMap::new();
    // Each memory's latest version: a live one's is its file's.
    let mut latest = deleted.clone();
    for (path, meta) in files {
        if want_ids.insert(meta.memory, path.clone()).is_some() {
            problems.push(format!(
                "memory {} is more than one file",
                MemoryId(meta.memory)
            ));
        }
        latest.insert(meta.memory, meta.version);
    }
    if ids != want_ids {
        problems.push(format!(
            "the id index lists {} live memories, the files are {}",
            ids.len(),
            want_ids.len()
        ));
    }
    let mut versions: BTreeMap<u64, VersionRecord> = BTreeMap::new();
    let mut bytes = 0;
    for (key, value) in all(txn, Space::Versions, user)? {
        let v: VersionRecord = layout::decode(&value, "version")?;
        bytes += v.weight();
        versions.insert(record::decode_seq(&key)?, v);
    }
    for (memory, last) in &deleted {
        if want_ids.contains_key(memory) || versions.get(last).is_none_or(|v| v.memory != *memory) {
            problems.push(format!(
                "the id index keeps deleted memory {} without its last version",
                MemoryId(*memory)
            ));
        }
    }
    for (seq, v) in &versions {
        check_chain(*seq, v, &versions, &latest, problems);
        check_content(txn, user, *seq, v, files, &want_ids, problems)?;
    }
    let snapshots: BTreeSet<u64> = all(txn, Space::Snapshots, user)?
        .iter()
        .map(|(key, _)| record::decode_seq(key))
        .collect::<Result<_, _>>()?;
    let want: BTreeSet<u64> = versions
        .iter()
        .filter(|(_, v)| matches!(v.body, Body::Snapshot))
        .map(|(seq, _)| *seq)
        .collect();
    if snapshots != want {
        problems.push(format!(
            "{} snapshots are kept for {} versions kept as snapshots",
            snapshots.len(),
            want.len()
        ));
    }
    let legacy = [
        (Space::Lineage, "lineage index"),
        (Space::Ids, "id index"),
        (Space::Meta, "store record"),
    ];
    for (space, name) in legacy {
        if !all(txn, space, user)?.is_empty() {
            problems.push(format!("the {name} of format 5 is still there"));
        }
    }
    let store = record::store_record(txn, user)?;
    match store {
        None if !files.is_empty() || !versions.is_empty() => {
            problems.push("a store with memories has no store record".into())
        }
        None => {}
        Some(store) => {
            let h = store.history;
            if (h.versions, h.bytes) != (versions.len() as u64, bytes) {
                problems.push(format!(
                    "the store record counts {} versions of {} bytes; kept are {} of {bytes}",
                    h.versions,
                    h.bytes,
                    versions.len()
                ));
            }
            let highest = versions
                .keys()
                .chain(files.values().map(|m| &m.version))
                .chain(files.values().map(|m| &m.memory))
                .max()
                .copied()
                .unwrap_or(0);
            if store.next_seq <= highest {
                problems.push(format!(
                    "the next version number {} is not above {highest}, already used",
                    store.next_seq
                ));
            }
        }
    }
    Ok(())
}

/// The version `seq` keeps its content as its body says: only a live memory's latest version
/// relies on the file, and the content of every other (rebuilt from deltas) has the recorded
/// hash and size.
fn check_content<T: ReadTxn + ?Sized>(
    txn: &T,
    user: &str,
    seq: u64,
    v: &VersionRecord,
    files: &BTreeMap<MemoryPath, layout::FileMeta>,
    live: &BTreeMap<u64, MemoryPath>,
    problems: &mut Vec<String>,
) -> Result<(), Error> {
    let name = VersionId(seq);
    if let Body::Current { .. } = v.body {
        let latest = live.get(&v.memory).and_then(|path| files.get(path));
        if latest.is_none_or(|meta| meta.version != seq) {
            problems.push(format!(
                "{name} relies on the live file but is not its memory's latest version"
            ));
        }
        return Ok(()); // its content is the file's, checked with the files
    }
    match content::content(txn, user, seq, v) {
        Err(Error::Corrupt(why)) => problems.push(format!("{name}: {why}")),
        Err(other) => return Err(other),
        Ok(None) => {
            if v.redacted.is_none() && v.operation != Operation::Deleted {
                problems.push(format!("{name} has no content"));
            }
        }
        Ok(Some(content)) => {
            if (
                Some(layout::sha256(content.as_bytes())),
                Some(content.len() as u64),
            ) != (v.sha256, v.size)
            {
                problems.push(format!(
                    "the content of {name} does not match its hash and size"
                ));
            }
        }
    }
    Ok(())
}

/// The version `seq` is a link of its memory's chain: the version before it is older and of the
/// same memory, a delta's next version follows it, and its memory's entry names a version as
/// recent.
fn check_chain(
    seq: u64,
    v: &VersionRecord,
    versions: &BTreeMap<u64, VersionRecord>,
    latest: &BTreeMap<u64, u64>,
    problems: &mut Vec<String>,
) {
    let name = VersionId(seq);
    if latest.get(&v.memory).is_none_or(|&last| last < seq) {
        problems.push(format!(
            "{name} is newer than what the id index names as its memory's latest"
        ));
    }
    if let Some(previous) = v.previous
        && (previous >= seq
            || versions
                .get(&previous)
                .is_some_and(|p| p.memory != v.memory))
    {
        problems.push(format!("{name} names a version before it that is not"));
    }
    if let Body::Delta(delta) = &v.body
        && versions
            .get(&delta.next)
            .is_none_or(|n| n.memory != v.memory || n.previous != Some(seq))
    {
        problems.push(format!(
            "{name} is a delta against a version that does not follow it"
        ));
    }
}
