//! The database's identity: 16 random bytes, made the first time a build that knows them opens
//! the database for writing (in `Space::Database`, key `id`), and named by every export
//! (`database` in its header), so that an incremental export applies only to a copy of the
//! database it was taken from. A restore records the identity it restored (`restored_from`).

use crate::error::Error;
use crate::pipeline::Commits;
use crate::storage::{AnyBackend, Backend, Finish, ReadTxn, Space};

/// The key of the identity in `Space::Database`.
const KEY: &[u8] = b"id";
/// The key of the identity of the database whose export was last restored whole.
const RESTORED_FROM: &[u8] = b"restored_from";

/// The database's identity, in hex; `None` before a writer has made it (a database of an older
/// build opened read-only).
pub(crate) fn of(txn: &dyn ReadTxn) -> Result<Option<String>, Error> {
    Ok(txn.get(Space::Database, "", KEY)?.map(hex::encode))
}

/// Makes the identity if the database has none and may be written. Never stops an open: a
/// database that cannot be written now (read-only, a role without the right, a full disk) gets
/// one at a later open, and until then its exports name none.
pub(crate) fn ensure(backend: &AnyBackend, commits: &Commits) {
    let _ = make(backend, commits);
}

fn make(backend: &AnyBackend, commits: &Commits) -> Result<(), Error> {
    if of(&backend.begin_read()?)?.is_some() {
        return Ok(());
    }
    let mut id = [0u8; 16];
    getrandom::fill(&mut id).map_err(|e| Error::storage(format!("no random bytes: {e}")))?;
    crate::pipeline::transact(backend, commits, &[""], false, |txn, _| {
        // Another process may have made it meanwhile.
        if txn.get(Space::Database, "", KEY)?.is_none() {
            txn.put(Space::Database, "", KEY, &id)?;
        }
        Ok(((), Finish::Commit))
    })
}

/// The identity of the database whose full export this one was last restored from.
pub(super) fn restored_from(txn: &dyn ReadTxn) -> Result<Option<String>, Error> {
    Ok(txn
        .get(Space::Database, "", RESTORED_FROM)?
        .and_then(|bytes| String::from_utf8(bytes).ok()))
}

/// Records (or forgets, `None`) which database this one was restored from.
pub(super) fn set_restored_from(
    txn: &mut dyn crate::storage::WriteTxn,
    from: Option<&str>,
) -> Result<(), Error> {
    match from {
        Some(id) => txn.put(Space::Database, "", RESTORED_FROM, id.as_bytes()),
        None => txn.remove(Space::Database, "", RESTORED_FROM),
    }
}
