//! A full consistency check of the stored data against the invariants of `crate::tree`
//! (`memkv check`). It reads everything, so it is for operators and tests, not for hot paths.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::ControlFlow;

use crate::error::Error;
use crate::history::MemoryId;
use crate::history::record::{self, VersionRecord};
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
                layout::hex(&meta.sha256),
                layout::hex(sha256)
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

/// The history's invariants: every live memory's id leads to its path and no other id exists;
/// versions and the lineage index agree; the store record counts the versions kept and is ahead
/// of every number used.
fn check_history<T: ReadTxn + ?Sized>(
    txn: &T,
    user: &str,
    files: &BTreeMap<MemoryPath, layout::FileMeta>,
    problems: &mut Vec<String>,
) -> Result<(), Error> {
    let mut ids: BTreeMap<u64, MemoryPath> = BTreeMap::new();
    for (key, value) in all(txn, Space::Ids, user)? {
        ids.insert(
            record::decode_seq(&key)?,
            layout::path_of_content_key(&value)?,
        );
    }
    let mut want_ids = BTreeMap::new();
    for (path, meta) in files {
        if want_ids.insert(meta.memory, path.clone()).is_some() {
            problems.push(format!(
                "memory {} is more than one file",
                MemoryId(meta.memory)
            ));
        }
    }
    if ids != want_ids {
        problems.push(format!(
            "the id index lists {} memories, the files are {}",
            ids.len(),
            want_ids.len()
        ));
    }
    let mut versions: BTreeMap<u64, u64> = BTreeMap::new();
    let mut bytes = 0;
    for (key, value) in all(txn, Space::Versions, user)? {
        let v: VersionRecord = layout::decode(&value, "version")?;
        bytes += v.weight();
        versions.insert(record::decode_seq(&key)?, v.memory);
    }
    let mut lineage: BTreeMap<u64, u64> = BTreeMap::new();
    for (key, _) in all(txn, Space::Lineage, user)? {
        if key.len() != 16 {
            problems.push("a lineage key is not 16 bytes".into());
            continue;
        }
        lineage.insert(
            record::decode_seq(&key[8..])?,
            record::decode_seq(&key[..8])?,
        );
    }
    if lineage != versions {
        problems.push(format!(
            "the lineage index lists {} versions, {} are kept",
            lineage.len(),
            versions.len()
        ));
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
