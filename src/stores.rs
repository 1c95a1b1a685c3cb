//! Memory stores as the memory-stores API sees them: each memkv user is one, with its own record
//! (name, description, metadata, archival). On [`Store`].

use std::collections::BTreeMap;
use std::io::Read;
use std::ops::ControlFlow;

use crate::change::{Change, ChangeKind};
use crate::error::Error;
use crate::history::record::{self, StoreRecord};
use crate::history::{ApiRefusal, StoreInfo};
use crate::storage::{Backend, Finish, ReadTxn, Space};
use crate::store::{Store, validate_user};

fn info_of(id: &str, r: StoreRecord) -> StoreInfo {
    StoreInfo {
        id: id.to_owned(),
        name: r.name,
        description: r.description,
        metadata: r.metadata.into_iter().collect(),
        created_ms: r.created_ms,
        updated_ms: r.updated_ms,
        archived_ms: r.archived_ms,
        history: r.history,
    }
}

/// A new store id: `memstore_` and 24 lowercase hex digits from the OS's random source.
fn new_store_id() -> Result<String, Error> {
    let mut bytes = [0u8; 12];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(|e| Error::storage(format!("cannot read /dev/urandom: {e}")))?;
    Ok(format!("memstore_{}", crate::layout::hex(&bytes)))
}

/// Every key of a user's space lies below this bound: path encodings hold no 0xFF byte, and
/// the keys made of numbers (which may start with 0xFF: `Memories` counts down from it) are at
/// most 16 bytes long.
const ALL_KEYS_END: [u8; 17] = [0xFF; 17];

impl Store {
    /// Creates a memory store with a new id (`memstore_…`).
    ///
    /// # Errors
    /// A storage failure.
    pub fn create_store(
        &self,
        name: &str,
        description: &str,
        metadata: &BTreeMap<String, String>,
    ) -> Result<StoreInfo, Error> {
        let id = new_store_id()?;
        let now = self.now_ms();
        let mut store = StoreRecord::new(&id, now);
        store.name = name.to_owned();
        store.description = description.to_owned();
        store.metadata = metadata.clone().into_iter().collect();
        self.transact(&[&id], false, |txn, changes| {
            if record::store_record(txn, &id)?.is_some() {
                return Err(Error::Corrupt(format!("store id {id} was drawn twice")));
            }
            record::put_store_record(txn, &id, &store)?;
            changes.note(Change::of_store(ChangeKind::StoreCreated, &id, now));
            Ok(((), Finish::Commit))
        })?;
        Ok(info_of(&id, store))
    }

    /// The store `id`'s record; `None` when there is no such store (a user that never wrote).
    ///
    /// # Errors
    /// A storage failure.
    pub fn store_info(&self, id: &str) -> Result<Option<StoreInfo>, Error> {
        if validate_user(id).is_err() {
            return Ok(None);
        }
        let txn = self.backend.begin_read()?;
        Ok(record::store_record(&txn, id)?.map(|r| info_of(id, r)))
    }

    /// Stores ordered by id, strictly after `after`, at most `limit` of them, and whether more
    /// follow; archived ones only with `include_archived`.
    ///
    /// # Errors
    /// A storage failure.
    pub fn list_stores(
        &self,
        include_archived: bool,
        after: Option<&str>,
        limit: usize,
    ) -> Result<(Vec<StoreInfo>, bool), Error> {
        let txn = self.backend.begin_read()?;
        let mut ids = Vec::new();
        txn.users(Space::Store, &mut |u| {
            if after.is_none_or(|a| u > a) {
                ids.push(u.to_owned());
            }
            Ok(ControlFlow::Continue(()))
        })?;
        ids.sort_unstable();
        let mut out = Vec::new();
        for id in ids {
            let Some(r) = record::store_record(&txn, &id)? else {
                continue;
            };
            if r.archived_ms.is_some() && !include_archived {
                continue;
            }
            if out.len() == limit.max(1) {
                return Ok((out, true));
            }
            out.push(info_of(&id, r));
        }
        Ok((out, false))
    }

    /// Changes the store's name, description and metadata (`None` values remove keys).
    ///
    /// # Errors
    /// A storage failure. Refusals: [`ApiRefusal::NotFound`], [`ApiRefusal::Archived`].
    pub fn update_store(
        &self,
        id: &str,
        name: Option<&str>,
        description: Option<&str>,
        metadata: &BTreeMap<String, Option<String>>,
    ) -> Result<Result<StoreInfo, ApiRefusal>, Error> {
        self.change_store(id, |r| {
            if r.archived_ms.is_some() {
                return Err(ApiRefusal::Archived);
            }
            if let Some(name) = name {
                r.name = name.to_owned();
            }
            if let Some(description) = description {
                r.description = description.to_owned();
            }
            let mut map: BTreeMap<String, String> =
                std::mem::take(&mut r.metadata).into_iter().collect();
            for (k, v) in metadata {
                match v {
                    Some(v) => map.insert(k.clone(), v.clone()),
                    None => map.remove(k),
                };
            }
            r.metadata = map.into_iter().collect();
            Ok(())
        })
    }

    /// Archives the store: from now on read-only (its memories can still be read and deleted,
    /// their versions redacted, the store deleted). Archiving an archived store changes nothing.
    ///
    /// # Errors
    /// A storage failure. Refusal: [`ApiRefusal::NotFound`].
    pub fn archive_store(&self, id: &str) -> Result<Result<StoreInfo, ApiRefusal>, Error> {
        let now = self.now_ms();
        self.change_store(id, |r| {
            if r.archived_ms.is_none() {
                r.archived_ms = Some(now);
            }
            Ok(())
        })
    }

    fn change_store(
        &self,
        id: &str,
        mut change: impl FnMut(&mut StoreRecord) -> Result<(), ApiRefusal>,
    ) -> Result<Result<StoreInfo, ApiRefusal>, Error> {
        if validate_user(id).is_err() {
            return Ok(Err(ApiRefusal::NotFound));
        }
        let now = self.now_ms();
        self.transact(&[id], false, |txn, changes| {
            let Some(mut r) = record::store_record(txn, id)? else {
                return Ok((Err(ApiRefusal::NotFound), Finish::Abort));
            };
            let before = r.clone();
            if let Err(refusal) = change(&mut r) {
                return Ok((Err(refusal), Finish::Abort));
            }
            if r == before {
                return Ok((Ok(info_of(id, r)), Finish::Abort));
            }
            r.updated_ms = now;
            record::put_store_record(txn, id, &r)?;
            let kind = if before.archived_ms.is_none() && r.archived_ms.is_some() {
                ChangeKind::StoreArchived
            } else {
                ChangeKind::StoreUpdated
            };
            changes.note(Change::of_store(kind, id, now));
            Ok((Ok(info_of(id, r)), Finish::Commit))
        })
    }

    /// Deletes the store `id` with every memory and version. `false` when there was none.
    ///
    /// # Errors
    /// A storage failure.
    pub fn delete_store(&self, id: &str) -> Result<bool, Error> {
        if validate_user(id).is_err() {
            return Ok(false);
        }
        let now = self.now_ms();
        self.transact(&[id], true, |txn, changes| {
            let exists = record::store_record(txn, id)?.is_some()
                || txn.get(Space::Totals, id, &[])?.is_some();
            if !exists {
                return Ok((false, Finish::Abort));
            }
            for space in Space::ALL {
                txn.remove_range(space, id, &[], &ALL_KEYS_END)?;
            }
            changes.note(Change::of_store(ChangeKind::StoreDeleted, id, now));
            Ok((true, Finish::Commit))
        })
    }
}
