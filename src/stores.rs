//! Memory stores as the memory-stores API sees them: each memkv user is one, with its own record
//! (name, description, metadata, archival). On [`crate::Database`].

use std::collections::BTreeMap;
use std::io::Read;
use std::ops::ControlFlow;

use crate::error::Error;
use crate::history::change::{Change, ChangeKind};
use crate::history::record::{self, StoreRecord};
use crate::history::{Actor, ApiRefusal, StoreInfo};
use crate::pipeline::Engine;
use crate::storage::{Backend, Finish, ReadTxn, Space};
use crate::user_id::validate_user;

/// Longest store name, in characters.
pub const MAX_NAME_CHARS: usize = 255;
/// Longest description, in characters.
pub const MAX_DESCRIPTION_CHARS: usize = 1024;
/// Most metadata pairs of a store.
pub const MAX_METADATA_PAIRS: usize = 16;
/// Longest metadata key, in characters.
pub const MAX_METADATA_KEY_CHARS: usize = 64;
/// Longest metadata value, in characters.
pub const MAX_METADATA_VALUE_CHARS: usize = 512;

/// What a store's name, description and metadata may hold: the one set of rules that the
/// memory-stores API and an import both apply. Names and metadata keys hold no control
/// characters; descriptions and metadata values none but line breaks and tabs (so that
/// nothing stored can send escape sequences to an operator's terminal). Each function says
/// why a value is refused, or `None`.
pub mod fields {
    use super::*;

    /// A control character other than a line break or a tab.
    fn escapes(text: &str) -> bool {
        text.chars()
            .any(|c| c.is_control() && c != '\n' && c != '\t')
    }

    /// Why `name` is refused.
    pub fn name(name: &str) -> Option<String> {
        let chars = name.chars().count();
        if chars == 0 || chars > MAX_NAME_CHARS {
            return Some(format!(
                "name must be 1 to {MAX_NAME_CHARS} characters long"
            ));
        }
        name.chars()
            .any(char::is_control)
            .then(|| "name must not contain control characters".to_owned())
    }

    /// Why `description` is refused.
    pub fn description(description: &str) -> Option<String> {
        if description.chars().count() > MAX_DESCRIPTION_CHARS {
            return Some(format!(
                "description must be at most {MAX_DESCRIPTION_CHARS} characters long"
            ));
        }
        escapes(description).then(|| {
            "description must not contain control characters other than line breaks and tabs"
                .to_owned()
        })
    }

    /// Why the metadata pair `key`, `value` (`None`: a key being removed) is refused.
    pub fn pair(key: &str, value: Option<&str>) -> Option<String> {
        let chars = key.chars().count();
        if chars == 0 || chars > MAX_METADATA_KEY_CHARS {
            return Some(format!(
                "metadata keys must be 1 to {MAX_METADATA_KEY_CHARS} characters long"
            ));
        }
        if key.chars().any(char::is_control) {
            return Some("metadata keys must not contain control characters".to_owned());
        }
        let value = value?;
        if value.chars().count() > MAX_METADATA_VALUE_CHARS {
            return Some(format!(
                "metadata values must be at most {MAX_METADATA_VALUE_CHARS} characters long"
            ));
        }
        escapes(value).then(|| {
            "metadata values must not contain control characters other than line breaks and tabs"
                .to_owned()
        })
    }

    /// Why `pairs` metadata pairs are refused.
    pub fn count(pairs: usize) -> Option<String> {
        (pairs > MAX_METADATA_PAIRS)
            .then(|| format!("metadata can hold at most {MAX_METADATA_PAIRS} pairs"))
    }

    /// Why an actor's id (a key's, a session's, a user's) is refused: empty, over 256
    /// characters, or holding a control character (only an import can bring one).
    pub fn actor_id(id: &str) -> Option<String> {
        let chars = id.chars().count();
        if chars == 0 || chars > 256 {
            return Some("an actor's id must be 1 to 256 characters long".to_owned());
        }
        id.chars()
            .any(char::is_control)
            .then(|| "an actor's id must not contain control characters".to_owned())
    }
}

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
    Ok(format!("memstore_{}", hex::encode(bytes)))
}

/// Every key of a user's space lies below this bound: path encodings hold no 0xFF byte, and
/// the keys made of numbers (which may start with 0xFF: `Memories` counts down from it) are at
/// most 16 bytes long.
pub(crate) const ALL_KEYS_END: [u8; 17] = [0xFF; 17];

/// The body of [`crate::Database::create_store`].
pub(crate) fn create_store(
    db: &Engine,
    actor: Option<&Actor>,
    name: &str,
    description: &str,
    metadata: &BTreeMap<String, String>,
) -> Result<StoreInfo, Error> {
    let id = new_store_id()?;
    let now = db.now_ms();
    let mut store = StoreRecord::new(&id, now);
    store.name = name.to_owned();
    store.description = description.to_owned();
    store.metadata = metadata.clone().into_iter().collect();
    db.transact(&[&id], false, |txn, changes| {
        if record::store_record(txn, &id)?.is_some() {
            return Err(Error::Corrupt(format!("store id {id} was drawn twice")));
        }
        record::put_store_record(txn, &id, &store)?;
        changes.note(Change::of_store(ChangeKind::StoreCreated, &id, now).by(actor));
        Ok(((), Finish::Commit))
    })?;
    Ok(info_of(&id, store))
}

/// The body of [`crate::Database::store_info`].
pub(crate) fn store_info(db: &Engine, id: &str) -> Result<Option<StoreInfo>, Error> {
    if validate_user(id).is_err() {
        return Ok(None);
    }
    let txn = db.backend.begin_read()?;
    Ok(record::store_record(&txn, id)?.map(|r| info_of(id, r)))
}

/// The body of [`crate::Database::list_stores`].
pub(crate) fn list_stores(
    db: &Engine,
    include_archived: bool,
    after: Option<&str>,
    limit: usize,
) -> Result<(Vec<StoreInfo>, bool), Error> {
    let txn = db.backend.begin_read()?;
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

/// The body of [`crate::Database::update_store`].
pub(crate) fn update_store(
    db: &Engine,
    actor: Option<&Actor>,
    id: &str,
    name: Option<&str>,
    description: Option<&str>,
    metadata: &BTreeMap<String, Option<String>>,
) -> Result<Result<StoreInfo, ApiRefusal>, Error> {
    change_store(db, actor, id, |r| {
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

/// The body of [`crate::Database::archive_store`].
pub(crate) fn archive_store(
    db: &Engine,
    actor: Option<&Actor>,
    id: &str,
) -> Result<Result<StoreInfo, ApiRefusal>, Error> {
    let now = db.now_ms();
    change_store(db, actor, id, |r| {
        if r.archived_ms.is_none() {
            r.archived_ms = Some(now);
        }
        Ok(())
    })
}

fn change_store(
    db: &Engine,
    actor: Option<&Actor>,
    id: &str,
    mut change: impl FnMut(&mut StoreRecord) -> Result<(), ApiRefusal>,
) -> Result<Result<StoreInfo, ApiRefusal>, Error> {
    if validate_user(id).is_err() {
        return Ok(Err(ApiRefusal::NotFound));
    }
    let now = db.now_ms();
    db.transact(&[id], false, |txn, changes| {
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
        changes.note(Change::of_store(kind, id, now).by(actor));
        Ok((Ok(info_of(id, r)), Finish::Commit))
    })
}

/// The body of [`crate::Database::delete_store`].
pub(crate) fn delete_store(db: &Engine, actor: Option<&Actor>, id: &str) -> Result<bool, Error> {
    if validate_user(id).is_err() {
        return Ok(false);
    }
    let now = db.now_ms();
    db.transact(&[id], true, |txn, changes| {
        let exists =
            record::store_record(txn, id)?.is_some() || txn.get(Space::Totals, id, &[])?.is_some();
        if !exists {
            return Ok((false, Finish::Abort));
        }
        // Its feed stays (its numbers are never given again; retention trims its entries).
        for space in Space::ALL.into_iter().filter(|s| *s != Space::Feed) {
            txn.remove_range(space, id, &[], &ALL_KEYS_END)?;
        }
        changes.note(Change::of_store(ChangeKind::StoreDeleted, id, now).by(actor));
        Ok((true, Finish::Commit))
    })
    .inspect(|deleted| {
        if *deleted {
            db.store_settings.forget(id);
            // Best effort, as after a redaction (`crate::versions::redact`).
            let _ = db.backend.erased();
        }
    })
}
