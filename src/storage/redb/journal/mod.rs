//! The journal: how a database file opened exclusively makes a commit durable with one append
//! and one flush of a small file, `DB.journal`, instead of redb's durable commit.
//!
//! redb's copy-on-write B-tree writes, on a durable commit, every page a transaction touched and
//! their parents up to the root: a memkv create touches records in several places of its tree
//! (content, index entry, aggregates, version, change entry), about 20 pages, where an append of
//! what the transaction changed is a kilobyte or two. So a commit goes:
//!
//! 1. the transaction's changes are recorded as [`Op`]s while they are applied to redb's tables
//!    (every effect on a table goes through [`super::txn::RedbWrite`], which does both);
//! 2. redb's `journal_applied` (in `memkv_meta`) is set to the commit's number, in the same
//!    transaction;
//! 3. the record (number and ops) is appended to the journal and flushed (`fdatasync`), and the
//!    first time this process relies on the journal's name, its directory too: from here on the
//!    commit is durable;
//! 4. redb commits without a flush (`Durability::None`): readers see it;
//! 5. every [`CHECKPOINT_RECORDS`] commits or [`CHECKPOINT_BYTES`] of journal, a commit is
//!    redb-durable instead (a checkpoint, which writes each page touched since the last one
//!    once), and the journal starts over: written from its start again, in place, under a new
//!    random salt.
//!
//! A record whose write or flush fails is cut before the command is answered (its frame zeroed
//! and flushed, or the file cut back and flushed), so that "not applied" is certain; if even the
//! cut fails, the answer is [`Error::OutcomeUnknown`] and the database is reopened before its
//! next use, whose replay decides.
//!
//! Opening the file for writing replays, in one durable transaction, the records numbered after
//! the `journal_applied` of the last durable commit (see `read`), then removes the journal. A
//! clean close checkpoints, so the file alone is then the whole database; redb arrangement 2
//! ([`super::REDB_FORMAT`]) marks files that may have commits in a journal, which older builds,
//! that would ignore it, refuse.
//!
//! The format (version 2): a 40-byte header (the magic number, the database's id, the salt of
//! the records written since the journal last started over, and the first 8 bytes of the
//! SHA-256 of those 32 bytes), then records, each a frame of the payload's length (`u32`), the
//! salt, and the first 8 bytes of the SHA-256 of length, salt and payload, then the payload
//! ([`ops`]). All numbers little-endian. The header is written with the first record after the
//! journal starts over and flushed with it. Version 1 (no salt; a 24-byte header and 12-byte
//! frames) is still read, so that a journal an older build left is replayed.

mod ops;
mod read;

pub(crate) use self::ops::Op;
pub(super) use self::read::{pending, read_after};

use std::path::{Path, PathBuf};
use std::sync::Arc;

use self::ops::encode_record;
use super::files::{self, Access, FileOps, Files};
use crate::error::Error;

/// The first bytes of every journal this build writes, before the database's id.
const MAGIC: &[u8; 16] = b"memkv journal 2\n";
/// The magic number, the id of the database the journal belongs to, the salt, the checksum.
const HEADER_LEN: u64 = 40;
/// A record's frame before its payload: length, salt, checksum.
const FRAME_LEN: usize = 20;
/// Where, in `memkv_meta`, the number of the last journaled commit that redb holds is.
pub(super) const APPLIED_KEY: &str = "journal_applied";
/// Where, in `memkv_meta`, the database's id is: random, set when the file is first opened for
/// writing, so that a journal is never replayed into another database (a file deleted and
/// created again beside a journal left behind).
pub(super) const ID_KEY: &str = "database_id";
/// A checkpoint after this many journaled commits since the last one…
const CHECKPOINT_RECORDS: u64 = 2048;
/// … or once the journal is this long.
const CHECKPOINT_BYTES: u64 = 4 << 20;
/// Below this much free space on the disk, plus four times the journal's length, commits are
/// redb-durable (see [`Journal::checkpoint_due`]).
const HEADROOM: u64 = 64 << 20;
/// No record is longer (a batch of commands within the caps is far below it).
const MAX_RECORD: u32 = 1 << 30;

/// `DB.journal`, beside `DB`.
pub(super) fn path_of(db: &Path) -> PathBuf {
    let mut name = db.file_name().unwrap_or_default().to_os_string();
    name.push(".journal");
    db.with_file_name(name)
}

/// The first 8 bytes of the SHA-256 of `parts`, one after the other.
fn checksum(parts: &[&[u8]]) -> [u8; 8] {
    let mut all = Vec::with_capacity(parts.iter().map(|p| p.len()).sum());
    for part in parts {
        all.extend_from_slice(part);
    }
    let digest = crate::layout::sha256(&all);
    let mut out = [0; 8];
    out.copy_from_slice(&digest[..8]);
    out
}

/// The header of a journal of database `id` whose records carry `salt`.
fn header(id: u64, salt: u64) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    out.extend_from_slice(&id.to_le_bytes());
    out.extend_from_slice(&salt.to_le_bytes());
    let sum = checksum(&[&out]);
    out.extend_from_slice(&sum);
    out
}

/// The frame of `payload` under `salt`: length, salt, checksum, payload.
fn frame(salt: u64, payload: &[u8]) -> Result<Vec<u8>, Error> {
    let len = u32::try_from(payload.len())
        .ok()
        .filter(|&l| l <= MAX_RECORD)
        .ok_or_else(|| Error::storage("one commit's changes exceed the journal's 1 GiB record"))?;
    let (len, salt) = (len.to_le_bytes(), salt.to_le_bytes());
    let mut out = Vec::with_capacity(FRAME_LEN + payload.len());
    out.extend_from_slice(&len);
    out.extend_from_slice(&salt);
    out.extend_from_slice(&checksum(&[&len, &salt, payload]));
    out.extend_from_slice(payload);
    Ok(out)
}

fn io_error(path: &Path, source: std::io::Error) -> Error {
    if super::health::is_full(&source) {
        return Error::DiskFull {
            location: path.display().to_string(),
        };
    }
    Error::Io {
        path: path.to_owned(),
        source,
    }
}

/// A random `u64` (never 0): the operating system's, or, should it have none to give, std's
/// per-process hash keys mixed with the time.
fn random() -> u64 {
    if let Ok(n) = getrandom::u64()
        && n != 0
    {
        return n;
    }
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.write_u32(std::process::id());
    h.finish().max(1)
}

/// A new database's id.
pub(super) fn new_id() -> u64 {
    random()
}

/// The open journal of a database this process writes exclusively.
#[derive(Debug)]
pub(super) struct Journal {
    files: Arc<dyn Files>,
    /// `None` when the journal could not be created for a full disk: every commit is then
    /// redb-durable.
    file: Option<Box<dyn FileOps>>,
    path: PathBuf,
    /// The database's id, in the header.
    id: u64,
    /// The salt of the records since the journal last started over.
    salt: u64,
    /// The header with [`Journal::salt`] was written and flushed: records need nothing more.
    header_written: bool,
    /// The journal's directory was flushed since this process opened it: its name is durable.
    named: bool,
    /// Bytes of the journal (where the next record goes).
    len: u64,
    /// The number of the last commit journaled (or that redb held when the journal was opened).
    last: u64,
    /// Records since the last checkpoint.
    records: u64,
    /// A checkpoint after this many records ([`CHECKPOINT_RECORDS`] unless a test says).
    every: u64,
    /// Every commit is redb-durable, the journal unused: since an append found the disk full
    /// (see [`Journal::checkpoint_due`]).
    direct: bool,
    /// No commit since the journal was opened: the first is redb-durable, so that a process
    /// that writes once (a `memkv` command) flushes once, not also at its close.
    first: bool,
}

impl Journal {
    /// Opens the (replayed) journal of `db`, whose id is `id` and whose last journaled commit
    /// redb holds is `applied`, creating the file if need be. Nothing is written until the first
    /// record: what the file holds until then is records that redb holds (or none), which a
    /// replay skips.
    /// On a full disk, where not even the file can be made, the journal is not used: every
    /// commit is then redb-durable, as in [`Journal::checkpoint_due`].
    pub(super) fn open(
        files: Arc<dyn Files>,
        db: &Path,
        id: u64,
        applied: u64,
    ) -> Result<Journal, Error> {
        let path = path_of(db);
        let file = match files.open(&path, Access::Create) {
            Ok(file) => Some(file),
            Err(e) if super::health::is_full(&e) => None,
            Err(e) => return Err(io_error(&path, e)),
        };
        Ok(Journal {
            files,
            first: true,
            direct: file.is_none(),
            file,
            path,
            id,
            salt: random(),
            header_written: false,
            named: false,
            len: HEADER_LEN,
            last: applied,
            records: 0,
            every: CHECKPOINT_RECORDS,
        })
    }

    /// The number the next commit takes.
    pub(super) fn next(&self) -> u64 {
        self.last + 1
    }

    /// Whether the next commit should be redb-durable (a checkpoint).
    ///
    /// The first commit after the journal is opened is one too (see [`Journal::first`]).
    ///
    /// A journaled commit defers the pages it needs in the file to the next checkpoint. So on a
    /// disk with too little room for that checkpoint (less than [`HEADROOM`] and four times the
    /// journal with this commit free), and once an append found the disk full, every commit is
    /// redb-durable and takes its pages when it commits: a full disk then refuses growing writes
    /// and lets the writes that free space commit (with the disk reserve), as without a journal.
    /// `adding` is the size of the commit's changes ([`Op::size`]).
    pub(super) fn checkpoint_due(&self, adding: u64) -> bool {
        let held = self.len.saturating_add(adding);
        self.first
            || self.direct
            || self.records >= self.every
            || self.len >= CHECKPOINT_BYTES
            || self.file.as_ref().is_none_or(|file| {
                file.available()
                    .is_ok_and(|free| free < HEADROOM.saturating_add(held.saturating_mul(4)))
            })
    }

    /// A checkpoint every `records` records (tests, to cross many checkpoints in few commits).
    pub(super) fn checkpoint_every(&mut self, records: u64) {
        self.every = records.max(1);
    }

    /// `fresh`, the journal of a reopen, with this one's settings.
    pub(super) fn succeeded_by(&self, mut fresh: Journal) -> Journal {
        fresh.every = self.every;
        fresh
    }

    /// The disk was found full after a record was flushed: from now on every commit is
    /// redb-durable (see [`Journal::checkpoint_due`]).
    pub(super) fn go_direct(&mut self) {
        self.direct = true;
    }

    /// Whether any commit since the last checkpoint is held only here.
    pub(super) fn holds_commits(&self) -> bool {
        self.records > 0
    }

    /// Appends commit `number`'s `ops` and flushes: the commit is durable when this returns
    /// `Ok`. On failure the record is cut, durably, before this returns the error: the commit
    /// is then certainly not applied, and its number is the next commit's. Should the cut fail
    /// too, the error is [`Error::OutcomeUnknown`] and the journal must not be used again (the
    /// database is reopened, whose replay decides).
    pub(super) fn append(&mut self, number: u64, ops: Vec<Op>) -> Result<(), Error> {
        let frame = frame(self.salt, &encode_record(number, &ops))?;
        let Some(file) = &self.file else {
            return Err(Error::storage("the journal is not in use"));
        };
        let at = self.len;
        let written = (|| {
            if !self.header_written {
                file.write_at(&header(self.id, self.salt), 0)?;
            }
            file.write_at(&frame, at)?;
            file.sync_data()?;
            if !self.named {
                self.files.sync_dir(files::parent_of(&self.path))?;
            }
            Ok(())
        })();
        if let Err(e) = written {
            // After a failed write or flush the file's state is unknown (a later flush may not
            // write what an earlier one failed to): the header is written again with the next
            // record, and this record is cut before anyone is answered.
            self.header_written = false;
            let e = io_error(&self.path, e);
            if matches!(e, Error::DiskFull { .. }) {
                self.direct = true;
            }
            return match cut(file.as_ref(), at) {
                Ok(()) => Err(e),
                Err(cut) => Err(Error::OutcomeUnknown {
                    location: self.path.display().to_string(),
                    reason: format!(
                        "the journal's flush failed ({e}) and so did cutting the record off ({cut})"
                    ),
                }),
            };
        }
        self.header_written = true;
        self.named = true;
        self.len += frame.len() as u64;
        self.last = number;
        self.records += 1;
        Ok(())
    }

    /// Commit `number` was redb-durable (a checkpoint, never journaled), and so is everything
    /// before it: the journal starts over.
    pub(super) fn checkpointed(&mut self, number: u64) {
        self.last = number;
        self.first = false;
        self.restart();
    }

    /// After a checkpoint of a commit that erased data (a redaction): cuts the file to nothing
    /// and flushes, so that no frame written before (the erased version's, whatever salt it had)
    /// survives in it. The next record writes the header again; an empty file reads as an empty
    /// journal.
    pub(super) fn erase(&mut self) -> std::io::Result<()> {
        if self.holds_commits() {
            return Err(std::io::Error::other(
                "the journal holds commits: checkpoint first",
            ));
        }
        if let Some(file) = &self.file {
            file.set_len(0)?;
            file.sync_all()?;
        }
        self.restart();
        Ok(())
    }

    /// On a clean close, after a checkpoint: the journal is no longer needed. (A removal lost
    /// in a crash leaves records redb holds, which the next open skips.)
    pub(super) fn remove(&self) {
        let _ = self.files.remove(&self.path);
    }

    /// After a redb-durable commit of everything journaled: the journal starts over, written
    /// from its start again under a new salt. The file keeps its length, so that a record
    /// overwrites blocks already allocated and its flush writes no file metadata; what lies
    /// after the newest record is older records, under other salts, which a replay never takes
    /// for this run's.
    fn restart(&mut self) {
        self.len = HEADER_LEN;
        self.records = 0;
        self.salt = random();
        self.header_written = false;
    }
}

/// Makes certain that the record at `at`, whose write or flush failed, is never replayed: its
/// frame zeroed and flushed, or, failing that, the file cut back to `at` and flushed.
fn cut(file: &dyn FileOps, at: u64) -> std::io::Result<()> {
    file.write_at(&[0; FRAME_LEN], at)
        .and_then(|()| file.sync_data())
        .or_else(|_| file.set_len(at).and_then(|()| file.sync_all()))
}

#[cfg(test)]
mod tests;
