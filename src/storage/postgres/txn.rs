//! The two kinds of transaction over PostgreSQL, over a [`Session`]: a read-only snapshot
//! ([`PgRead`]) and a write transaction ([`PgWrite`]). Reads are the same in both (the
//! session's cache, or one round trip); writes update the cache and are queued for the next
//! round trip or the commit ([`super::session`]).

use std::cell::RefCell;
use std::ops::ControlFlow;
use std::sync::atomic::Ordering;

use super::super::{Fetch, LogBounds, ReadTxn, Space, Visit, WriteTxn};
use super::cache::ck;
use super::session::Session;
use super::sql;
use crate::error::Error;

/// A read-only snapshot (`REPEATABLE READ READ ONLY`), begun with its first read.
pub struct PgRead {
    pub(crate) session: RefCell<Session>,
}

impl Drop for PgRead {
    fn drop(&mut self) {
        let session = self.session.get_mut();
        if session.begun && !session.ended {
            session.shared.trips.fetch_add(1, Ordering::Relaxed);
            let ok = session
                .conn
                .as_mut()
                .is_some_and(|c| c.client().batch_execute("ROLLBACK").is_ok());
            if !ok && let Some(conn) = session.conn.take() {
                conn.discard();
            }
        }
    }
}

/// Reads are the same in a snapshot and a write transaction.
macro_rules! impl_read_txn {
    ($t:ty, $last:expr) => {
        impl ReadTxn for $t {
            fn layout_version(&self) -> Result<u64, Error> {
                self.session.borrow_mut().layout_version()
            }

            fn prefetch(&self, fetches: &[Fetch], last: bool) -> Result<(), Error> {
                let mut session = self.session.borrow_mut();
                let missing = session.missing(fetches);
                if $last && last && session.begun && !session.ended {
                    // The snapshot ends with this round trip: no read outside the cache follows.
                    session.ended = true;
                    return session.fetch(&missing, "COMMIT;");
                }
                if !$last && session.assume(&missing) {
                    return Ok(());
                }
                session.fetch(&missing, "")
            }

            fn read_ahead(&self, fetches: &[Fetch]) -> Result<(), Error> {
                let mut session = self.session.borrow_mut();
                let missing = session.missing(fetches);
                session.fetch(&missing, "")
            }

            fn get(&self, space: Space, user: &str, key: &[u8]) -> Result<Option<Vec<u8>>, Error> {
                self.session.borrow_mut().get(space, user, key)
            }

            fn scan(
                &self,
                space: Space,
                user: &str,
                start: &[u8],
                end: Option<&[u8]>,
                visit: Visit<'_>,
            ) -> Result<(), Error> {
                self.session
                    .borrow_mut()
                    .ensure_range(space, user, start, end)?;
                // Copied out: the visitor may read again.
                let mut entries = Vec::new();
                self.session
                    .borrow()
                    .cache
                    .scan(space, user, start, end, &mut |k, v| {
                        entries.push((k.to_vec(), v.to_vec()));
                        Ok(ControlFlow::Continue(()))
                    })?;
                for (k, v) in entries {
                    if visit(&k, &v)?.is_break() {
                        break;
                    }
                }
                Ok(())
            }

            fn users(
                &self,
                space: Space,
                visit: &mut dyn FnMut(&str) -> Result<ControlFlow<()>, Error>,
            ) -> Result<(), Error> {
                let users = self.session.borrow_mut().users(space)?;
                for user in users {
                    if visit(&user)?.is_break() {
                        break;
                    }
                }
                Ok(())
            }

            fn log_read(&self, after: u64, limit: usize) -> Result<Vec<(u64, Vec<u8>)>, Error> {
                self.session.borrow_mut().log_read(after, limit)
            }

            fn log_bounds(&self) -> Result<LogBounds, Error> {
                self.session.borrow_mut().log_bounds()
            }
        }
    };
}

impl_read_txn!(PgRead, true);
impl_read_txn!(PgWrite, false);

/// A write transaction (`READ COMMITTED`, after locking its stores): reads from the cache or in
/// one round trip, writes queued until the next round trip or the commit.
pub struct PgWrite {
    pub(crate) session: RefCell<Session>,
}

impl WriteTxn for PgWrite {
    fn put(&mut self, space: Space, user: &str, key: &[u8], value: &[u8]) -> Result<(), Error> {
        let session = self.session.get_mut();
        let k = ck(space, user, key);
        if !session.dirty.contains(&k)
            && session.cache.entries.get(&k).and_then(Option::as_deref) == Some(value)
        {
            // The database holds this already (the cache has what it read, or what was sent):
            // rewriting it would cost a new row version and its WAL for nothing.
            return Ok(());
        }
        session.note(space);
        session
            .cache
            .entries
            .insert(k.clone(), Some(value.to_vec()));
        session.dirty.insert(k);
        Ok(())
    }

    fn put_new(&mut self, space: Space, user: &str, key: &[u8], value: &[u8]) -> Result<(), Error> {
        let session = self.session.get_mut();
        let k = ck(space, user, key);
        // Not if this transaction wrote the key before (the database may hold it until the
        // commit) or saw it present.
        if !session.dirty.contains(&k)
            && !session.cache.entries.get(&k).is_some_and(Option::is_some)
        {
            session.fresh.insert(k);
        }
        self.put(space, user, key, value)
    }

    fn remove(&mut self, space: Space, user: &str, key: &[u8]) -> Result<(), Error> {
        let session = self.session.get_mut();
        let k = ck(space, user, key);
        if !session.dirty.contains(&k) && session.cache.lookup(space, user, key) == Some(None) {
            // Known to be absent (or in a range removal already queued).
            return Ok(());
        }
        session.note(space);
        session.cache.entries.insert(k.clone(), None);
        session.dirty.insert(k);
        Ok(())
    }

    fn remove_range(
        &mut self,
        space: Space,
        user: &str,
        start: &[u8],
        end: &[u8],
    ) -> Result<(), Error> {
        let session = self.session.get_mut();
        session.note(space);
        session
            .removed_ranges
            .push((space, user.to_owned(), start.to_vec(), end.to_vec()));
        session.cache.drop_range(space, user, start, Some(end));
        session.cache.known.push((
            sql::space_number(space),
            user.to_owned(),
            start.to_vec(),
            Some(end.to_vec()),
        ));
        Ok(())
    }

    fn set_layout_version(&mut self, version: u64) -> Result<(), Error> {
        let session = self.session.get_mut();
        session.pending.push_str(&format!(
            "UPDATE memkv_meta SET value = {version} WHERE name = 'layout_version';\n"
        ));
        Ok(())
    }

    fn log_append(&mut self, entries: &[Vec<u8>]) -> Result<(), Error> {
        let session = self.session.get_mut();
        session.changed.changes |= !entries.is_empty();
        session.log.extend_from_slice(entries);
        Ok(())
    }

    fn log_settle(&mut self) -> Result<(), Error> {
        self.session.get_mut().pending.push_str(sql::SETTLE);
        Ok(())
    }

    fn quiet(&mut self) {
        self.session.get_mut().quiet = true;
    }

    fn log_hold(&mut self) -> Result<(), Error> {
        self.session.get_mut().pending.push_str(sql::HOLD);
        Ok(())
    }

    fn log_rewrite(&mut self, seq: u64, value: &[u8]) -> Result<(), Error> {
        let mut text = String::from("UPDATE memkv_changes SET value = ");
        sql::bytea(&mut text, value);
        text.push_str(&format!(" WHERE seq = {seq};\n"));
        self.session.get_mut().pending.push_str(&text);
        Ok(())
    }

    fn log_trim(&mut self, through: u64) -> Result<(), Error> {
        // Idempotent: concurrent trims agree.
        self.session.get_mut().pending.push_str(&format!(
            "DELETE FROM memkv_changes WHERE seq <= {through};\n\
             UPDATE memkv_meta SET value = greatest(value, {through}) \
             WHERE name = 'changes_trimmed';\n"
        ));
        Ok(())
    }

    fn log_skip(&mut self, to: u64) -> Result<(), Error> {
        // After `log_hold` and `log_settle` in this transaction: it holds the row lock of
        // `changes_last`, so entries waiting in other transactions are numbered after `to`.
        self.session.get_mut().changed.changes = true;
        self.session.get_mut().pending.push_str(&format!(
            "DELETE FROM memkv_changes WHERE seq <= {to};\n\
             UPDATE memkv_meta SET value = greatest(value, {to}) \
             WHERE name IN ('changes_last', 'changes_trimmed');\n"
        ));
        Ok(())
    }
}
