//! The change log: every committed change, in commit order, with a sequence number that
//! increases across the whole database (an outbox: written in the transaction of the change, so
//! a change never commits without its entry, nor an entry without its change).
//!
//! - [`write()`] runs inside `crate::pipeline::transact`, after the transaction's jobs and
//!   before its commit: it scrubs what a redaction erased from the entries already stored,
//!   appends one entry per noted change ([`crate::storage::WriteTxn::log_append`], which
//!   numbers them in commit order on every backend), and, on an embedded backend, applies the
//!   retention.
//! - [`read()`] answers a page of entries after a cursor, for one store or all of them, or
//!   [`Error::CursorExpired`] when retention removed entries the cursor has not seen, or
//!   [`Error::CursorAhead`] for a cursor past the end (another database's, or one from before
//!   a restore: [`skip`] numbers a restored log past every `seq` its export had given out).
//! - [`trim()`] applies the retention on its own (`memkv prune`, and `memkv serve` from time to
//!   time on PostgreSQL, where writers do not trim: reading the bounds would cost each a round
//!   trip).

mod entry;
pub(crate) mod feed;
#[cfg(all(test, feature = "postgres"))]
mod hold_tests;

use std::time::Duration;

pub use entry::ChangeEntry;
use entry::Record;

use crate::error::Error;
use crate::history::change::{Change, ChangeKind, Erased};
use crate::storage::{ReadTxn, WriteTxn};

/// How much of the change log is kept: entries older than `max_age` and beyond the newest
/// `max_entries` are removed (`None`: no bound of that kind).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChangeRetention {
    /// Entries older than this are removed.
    pub max_age: Option<Duration>,
    /// At most this many entries are kept.
    pub max_entries: Option<u64>,
}

impl ChangeRetention {
    /// 30 days and 1,000,000 entries (about 150 MB of entries at most).
    pub const DEFAULT: ChangeRetention = ChangeRetention {
        max_age: Some(Duration::from_secs(30 * 86_400)),
        max_entries: Some(1_000_000),
    };

    /// No bound: every entry is kept.
    pub const UNBOUNDED: ChangeRetention = ChangeRetention {
        max_age: None,
        max_entries: None,
    };
}

impl Default for ChangeRetention {
    fn default() -> Self {
        ChangeRetention::DEFAULT
    }
}

/// A page of the change log ([`crate::Database::changes`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangePage {
    /// The entries after the cursor, oldest first.
    pub entries: Vec<ChangeEntry>,
    /// The cursor for the next page: the last `seq` this page looked at (which, for one
    /// store's page, may be another store's entry), or the cursor given when there was none.
    pub next_after: u64,
}

/// Retention trims only once this many entries are due, so that a commit seldom also rewrites
/// the page of the oldest entries.
const TRIM_SLACK: u64 = 64;
/// At most this many entries are looked at for their age in one trim.
const AGE_SCAN: usize = 4096;
/// Entries read at a time.
const CHUNK: usize = 1024;

/// Inside a write transaction, before its commit: the log's side of the `changes` noted in it.
pub(crate) fn write(
    txn: &mut dyn WriteTxn,
    changes: &[Change],
    erased: &[Erased],
    retention: &ChangeRetention,
    trims: bool,
) -> Result<(), Error> {
    if changes.is_empty() {
        return Ok(());
    }
    let mut records: Vec<Record> = Vec::with_capacity(changes.len());
    for change in changes {
        if change.kind == ChangeKind::VersionRedacted
            && let (Some(memory), Some(version)) = (change.memory, change.version)
        {
            let mut scrub = Scrub::new(&change.store, memory.0, version.0);
            // Known from the redaction itself: the version's own entry may be trimmed already.
            scrub.erased = erased
                .iter()
                .find(|e| e.store == change.store && e.version == version.0)
                .map(|e| e.path.clone());
            scrub_stored(txn, &mut scrub)?;
            for record in &mut records {
                scrub.visit(record);
            }
        }
        records.push(Record::of(change));
    }
    let encoded = feed::number(txn, &mut records)?;
    txn.log_append(&encoded)?;
    if trims {
        let now_ms = changes.iter().map(|c| c.at_ms).max().unwrap_or(0);
        trim_in(txn, retention, now_ms, TRIM_SLACK)?;
    }
    Ok(())
}

/// What the redaction of one version erases from the entries it is shown, in log order: the
/// entry of that version loses its path, previous path, hash and size, and the next entry of
/// the memory loses a previous path that was the erased one.
struct Scrub<'a> {
    store: &'a str,
    memory: u64,
    version: u64,
    /// The erased path, until the memory's next entry is seen.
    erased: Option<String>,
}

impl<'a> Scrub<'a> {
    fn new(store: &'a str, memory: u64, version: u64) -> Self {
        Scrub {
            store,
            memory,
            version,
            erased: None,
        }
    }

    /// Scrubs `r` if it must; whether it changed.
    fn visit(&mut self, r: &mut Record) -> bool {
        if r.store != self.store
            || r.memory != Some(self.memory)
            || r.kind == ChangeKind::VersionRedacted.number()
        {
            return false;
        }
        match r.version {
            Some(v) if v == self.version => {
                let erased = r.path.take().or_else(|| self.erased.take());
                let touched = erased.is_some()
                    || r.previous_path.is_some()
                    || r.sha256.is_some()
                    || r.size.is_some();
                self.erased = erased;
                r.previous_path = None;
                r.sha256 = None;
                r.size = None;
                touched
            }
            Some(v) if v > self.version => {
                let touched = self.erased.is_some() && r.previous_path == self.erased;
                if touched {
                    r.previous_path = None;
                }
                self.erased = None;
                touched
            }
            _ => false,
        }
    }
}

/// [`Scrub`] over the entries already stored (the whole log, a chunk at a time: the entry of
/// the version and the next one of its memory can be far apart); only what changed is
/// written back.
fn scrub_stored(txn: &mut dyn WriteTxn, scrub: &mut Scrub<'_>) -> Result<(), Error> {
    // Entries committed and not numbered yet are scrubbed too: numbered first, in this
    // transaction.
    txn.log_hold()?;
    txn.log_settle()?;
    let mut after = txn.log_bounds()?.trimmed;
    loop {
        let chunk = txn.log_read(after, CHUNK)?;
        let Some(&(last, _)) = chunk.last() else {
            return Ok(());
        };
        after = last;
        for (seq, bytes) in chunk {
            let mut record = Record::decode(&bytes)?;
            if scrub.visit(&mut record) {
                let bytes = record.encode();
                txn.log_rewrite(seq, &bytes)?;
                feed::rewrite(txn, &record, &bytes)?;
            }
        }
    }
}

/// Removes what `retention` does not keep, once at least `slack` entries are due.
fn trim_in(
    txn: &mut dyn WriteTxn,
    retention: &ChangeRetention,
    now_ms: i64,
    slack: u64,
) -> Result<u64, Error> {
    let bounds = txn.log_bounds()?;
    let mut through = bounds.trimmed;
    if let Some(max) = retention.max_entries
        && bounds.last.saturating_sub(bounds.trimmed) > max.saturating_add(slack)
    {
        through = bounds.last - max;
    }
    if let Some(age) = retention.max_age {
        let cutoff = now_ms.saturating_sub(crate::time::millis(age));
        let expired = |bytes: &[u8]| Record::decode(bytes).is_ok_and(|r| r.at_ms < cutoff);
        // The oldest entry first: usually young enough, and then nothing more is read.
        let oldest = txn.log_read(through, 1)?;
        if oldest.first().is_some_and(|(_, bytes)| expired(bytes)) {
            let due = txn.log_read(through, AGE_SCAN)?;
            let n = due.iter().take_while(|(_, bytes)| expired(bytes)).count();
            if n as u64 > slack.min(AGE_SCAN as u64 - 1) || (slack == 0 && n > 0) {
                through = through.max(due[n - 1].0);
            }
        }
    }
    if through > bounds.trimmed {
        feed::trim(txn, bounds.trimmed, through)?;
        txn.log_trim(through)?;
    }
    Ok(through - bounds.trimmed)
}

/// Applies `retention` now; returns how many entries it removed.
pub(crate) fn trim(
    txn: &mut dyn WriteTxn,
    retention: &ChangeRetention,
    now_ms: i64,
) -> Result<u64, Error> {
    trim_in(txn, retention, now_ms, 0)
}

/// The entries after `after`, oldest first, at most `limit`: every store's, numbered by the
/// log's `seq`, or, when `store` is given, that store's own, numbered in its feed (`feed`), so
/// that its page and cursor say nothing of other stores.
pub(crate) fn read(
    txn: &dyn ReadTxn,
    after: u64,
    limit: usize,
    store: Option<&str>,
) -> Result<ChangePage, Error> {
    if let Some(store) = store {
        return feed::read(txn, store, after, limit);
    }
    let bounds = txn.log_bounds()?;
    if after < bounds.trimmed {
        return Err(Error::CursorExpired {
            after,
            trimmed: bounds.trimmed,
        });
    }
    if after > bounds.last {
        return Err(Error::CursorAhead {
            after,
            last: bounds.last,
        });
    }
    let chunk = txn.log_read(after, limit)?;
    let mut page = ChangePage {
        entries: Vec::with_capacity(chunk.len()),
        next_after: after,
    };
    for (seq, bytes) in chunk {
        let record = Record::decode(&bytes)?;
        page.entries.push(ChangeEntry {
            seq,
            change: record.change()?,
        });
        page.next_after = seq;
    }
    Ok(page)
}

/// Inside the write transaction of a restore from an export taken at `seq`: the log moves on
/// to `seq` if it is behind it, so that no number the exported database gave out is given again
/// (a follower's cursor from it then either expires, below `seq`, or follows on from the
/// restore). The entries of this transaction are numbered after it. Whether it moved.
pub(crate) fn skip(txn: &mut dyn WriteTxn, seq: u64) -> Result<bool, Error> {
    txn.log_hold()?;
    txn.log_settle()?;
    let bounds = txn.log_bounds()?;
    if bounds.last < seq {
        feed::trim(txn, bounds.trimmed, bounds.last)?;
        txn.log_skip(seq)?;
        return Ok(true);
    }
    Ok(false)
}

/// The last `seq` committed (0: none yet): where a full export taken now stands in the log.
pub(crate) fn last(txn: &dyn ReadTxn) -> Result<u64, Error> {
    Ok(txn.log_bounds()?.last)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(kind: u8, memory: u64, version: u64, path: &str, previous: Option<&str>) -> Record {
        Record {
            kind,
            store: "s".into(),
            memory: Some(memory),
            version: Some(version),
            path: Some(path.into()),
            previous_path: previous.map(Into::into),
            sha256: Some([1; 32]),
            size: Some(3),
            actor: None,
            at_ms: 0,
            store_seq: 0,
        }
    }

    #[test]
    fn a_scrub_erases_the_version_and_the_next_entrys_memory_of_it() {
        let mut records = [
            record(0, 1, 1, "/memories/a", None),
            record(2, 1, 2, "/memories/secret", Some("/memories/a")),
            record(0, 5, 3, "/memories/other", None),
            record(2, 1, 4, "/memories/b", Some("/memories/secret")),
            record(2, 1, 6, "/memories/c", Some("/memories/b")),
        ];
        let mut scrub = Scrub::new("s", 1, 2);
        let changed: Vec<bool> = records.iter_mut().map(|r| scrub.visit(r)).collect();
        assert_eq!(changed, [false, true, false, true, false]);
        assert_eq!(records[1].path, None);
        assert_eq!(records[1].sha256, None);
        assert_eq!(records[1].previous_path, None);
        assert_eq!(records[3].previous_path, None);
        assert_eq!(records[3].path.as_deref(), Some("/memories/b"));
        assert_eq!(records[4].previous_path.as_deref(), Some("/memories/b"));
        assert_eq!(records[0].path.as_deref(), Some("/memories/a"));
    }
}
