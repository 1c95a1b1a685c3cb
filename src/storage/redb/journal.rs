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
//! 3. the record (number and ops) is appended to the journal and flushed (`fdatasync`): from
//!    here on the commit is durable;
//! 4. redb commits without a flush (`Durability::None`): readers see it;
//! 5. every [`CHECKPOINT_RECORDS`] commits or [`CHECKPOINT_BYTES`] of journal, a commit is
//!    redb-durable instead (a checkpoint, which writes each page touched since the last one
//!    once), and the journal starts over.
//!
//! Opening the file for writing replays, in one durable transaction, the records numbered after
//! the `journal_applied` of the last durable commit, in order, stopping at the first that is
//! cut short or fails its checksum (a record whose flush never returned, so never
//! acknowledged), then empties the journal. Replaying is exact: each record holds the effects
//! of one commit on the state the one before left. A clean close checkpoints, so the file alone
//! is then the whole database; redb arrangement 2 ([`super::REDB_FORMAT`]) marks files that may
//! have commits in a journal, which older builds, that would ignore it, refuse.
//!
//! The journal frame: `u32` length (little-endian), the first 8 bytes of the SHA-256 of the
//! payload, the payload (the commit's number, `u64` little-endian, then its ops, each a tag byte
//! and its fields: byte strings as a `u32` length and the bytes, numbers as `u64`s, all
//! little-endian; see [`Op::encode`]), after a 24-byte header (a magic number and the
//! database's id).

use std::fs::{File, OpenOptions};
use std::io::{self, BufReader, Read};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::error::Error;

/// The first bytes of every journal, before the database's id.
const MAGIC: &[u8; 16] = b"memkv journal 1\n";
/// The magic number and the id of the database the journal belongs to (`u64`, little-endian).
const HEADER_LEN: u64 = 24;
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

/// One effect on redb's tables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Op {
    /// Insert into `memkv_data` (or `memkv_snapshots`), under the stored key.
    Put {
        snapshots: bool,
        key: Vec<u8>,
        value: Vec<u8>,
    },
    /// Remove a stored key.
    Remove { snapshots: bool, key: Vec<u8> },
    /// Remove every stored key in `[start, end)`.
    RemoveRange {
        snapshots: bool,
        start: Vec<u8>,
        end: Vec<u8>,
    },
    /// Set a key of `memkv_meta`.
    Meta { key: String, value: u64 },
    /// Insert into the change log.
    LogPut { seq: u64, value: Vec<u8> },
    /// Remove the change log's entries up to and including `through`.
    LogTrim { through: u64 },
}

impl Op {
    /// Bytes of keys and values: about what the op adds to the journal.
    pub(super) fn size(&self) -> u64 {
        let n = match self {
            Op::Put { key, value, .. } => key.len() + value.len(),
            Op::Remove { key, .. } => key.len(),
            Op::RemoveRange { start, end, .. } => start.len() + end.len(),
            Op::Meta { key, .. } => key.len() + 8,
            Op::LogPut { value, .. } => value.len() + 8,
            Op::LogTrim { .. } => 8,
        };
        n as u64
    }
}

/// Op tags in the journal (the high bit: `memkv_snapshots` rather than `memkv_data`).
const PUT: u8 = 1;
const REMOVE: u8 = 2;
const REMOVE_RANGE: u8 = 3;
const META: u8 = 4;
const LOG_PUT: u8 = 5;
const LOG_TRIM: u8 = 6;
const SNAPSHOTS: u8 = 0x80;

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    // Lengths fit: a record is at most MAX_RECORD bytes, checked when it is appended.
    out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
    out.extend_from_slice(bytes);
}

/// Reads what [`Op::encode`] wrote, from the front of `input`.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, rest) = (self.0.get(..n)?, self.0.get(n..)?);
        self.0 = rest;
        Some(head)
    }

    fn byte(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }

    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }

    fn bytes(&mut self) -> Option<Vec<u8>> {
        let len = u32::from_le_bytes(self.take(4)?.try_into().ok()?);
        self.take(len as usize).map(<[u8]>::to_vec)
    }
}

impl Op {
    /// Appends the op's encoding to `out`.
    fn encode(&self, out: &mut Vec<u8>) {
        let table = |snapshots: bool| if snapshots { SNAPSHOTS } else { 0 };
        match self {
            Op::Put {
                snapshots,
                key,
                value,
            } => {
                out.push(PUT | table(*snapshots));
                put_bytes(out, key);
                put_bytes(out, value);
            }
            Op::Remove { snapshots, key } => {
                out.push(REMOVE | table(*snapshots));
                put_bytes(out, key);
            }
            Op::RemoveRange {
                snapshots,
                start,
                end,
            } => {
                out.push(REMOVE_RANGE | table(*snapshots));
                put_bytes(out, start);
                put_bytes(out, end);
            }
            Op::Meta { key, value } => {
                out.push(META);
                put_bytes(out, key.as_bytes());
                out.extend_from_slice(&value.to_le_bytes());
            }
            Op::LogPut { seq, value } => {
                out.push(LOG_PUT);
                out.extend_from_slice(&seq.to_le_bytes());
                put_bytes(out, value);
            }
            Op::LogTrim { through } => {
                out.push(LOG_TRIM);
                out.extend_from_slice(&through.to_le_bytes());
            }
        }
    }

    /// The next op of `r`; `None` at a malformed one.
    fn decode(r: &mut Reader<'_>) -> Option<Op> {
        let tag = r.byte()?;
        let snapshots = tag & SNAPSHOTS != 0;
        Some(match tag & !SNAPSHOTS {
            PUT => Op::Put {
                snapshots,
                key: r.bytes()?,
                value: r.bytes()?,
            },
            REMOVE => Op::Remove {
                snapshots,
                key: r.bytes()?,
            },
            REMOVE_RANGE => Op::RemoveRange {
                snapshots,
                start: r.bytes()?,
                end: r.bytes()?,
            },
            META if !snapshots => Op::Meta {
                key: String::from_utf8(r.bytes()?).ok()?,
                value: r.u64()?,
            },
            LOG_PUT if !snapshots => Op::LogPut {
                seq: r.u64()?,
                value: r.bytes()?,
            },
            LOG_TRIM if !snapshots => Op::LogTrim { through: r.u64()? },
            _ => return None,
        })
    }
}

/// A record's payload: `number`, then `ops`.
fn encode_record(number: u64, ops: &[Op]) -> Vec<u8> {
    let size: u64 = ops.iter().map(|op| op.size() + 9).sum();
    let mut out = Vec::with_capacity(8 + usize::try_from(size).unwrap_or(0));
    out.extend_from_slice(&number.to_le_bytes());
    for op in ops {
        op.encode(&mut out);
    }
    out
}

/// The number and ops of a record's payload; `None` if it is malformed.
fn decode_record(payload: &[u8]) -> Option<(u64, Vec<Op>)> {
    let mut r = Reader(payload);
    let number = r.u64()?;
    let mut ops = Vec::new();
    while !r.0.is_empty() {
        ops.push(Op::decode(&mut r)?);
    }
    Some((number, ops))
}

/// `DB.journal`, beside `DB`.
pub(super) fn path_of(db: &Path) -> PathBuf {
    let mut name = db.file_name().unwrap_or_default().to_os_string();
    name.push(".journal");
    db.with_file_name(name)
}

/// Whether the journal of `db` holds any record (so the file alone is not the whole database).
pub(super) fn pending(db: &Path) -> bool {
    std::fs::metadata(path_of(db)).is_ok_and(|m| m.len() > HEADER_LEN)
}

fn checksum(payload: &[u8]) -> [u8; 8] {
    let digest = crate::layout::sha256(payload);
    let mut out = [0; 8];
    out.copy_from_slice(&digest[..8]);
    out
}

fn io_error(path: &Path, source: io::Error) -> Error {
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

/// A new database's id: random (std's per-process hash keys, mixed with the time).
pub(super) fn new_id() -> u64 {
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

/// The records of the journal at `path` numbered after `applied`, in order, up to the first that
/// is cut short, fails its checksum or does not follow its predecessor. A missing journal has
/// none; one that is not a memkv journal, or belongs to another database than the one whose id
/// is `id`, is refused.
pub(super) fn read_after(path: &Path, id: u64, applied: u64) -> Result<Vec<Vec<Op>>, Error> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_error(path, e)),
    };
    let mut r = BufReader::new(file);
    let mut header = [0u8; HEADER_LEN as usize];
    match r.read_exact(&mut header) {
        Ok(()) if header[..16] == MAGIC[..] => {
            let found = u64::from_le_bytes(header[16..].try_into().expect("8 bytes"));
            if found != id {
                return Err(Error::Corrupt(format!(
                    "{} belongs to another database than the one beside it (which was replaced?); move it away to open this one",
                    path.display()
                )));
            }
        }
        // Created, then cut off before its header was written: empty.
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(Vec::new()),
        Ok(()) => {
            return Err(Error::Corrupt(format!(
                "{} is not a memkv journal; move it away only if the database beside it needs none of its commits",
                path.display()
            )));
        }
        Err(e) => return Err(io_error(path, e)),
    }
    let mut out = Vec::new();
    let mut next = applied + 1;
    loop {
        let mut frame = [0u8; 12];
        match r.read_exact(&mut frame) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => break,
            Err(e) => return Err(io_error(path, e)),
        }
        let len = u32::from_le_bytes(frame[..4].try_into().expect("4 bytes"));
        if len == 0 || len > MAX_RECORD {
            break;
        }
        let mut payload = vec![0u8; len as usize];
        match r.read_exact(&mut payload) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => break,
            Err(e) => return Err(io_error(path, e)),
        }
        if checksum(&payload) != frame[4..] {
            break;
        }
        let Some((number, ops)) = decode_record(&payload) else {
            break;
        };
        if number < next {
            continue; // already in redb (a checkpoint's journal that was not emptied)
        }
        if number > next {
            break;
        }
        out.push(ops);
        next += 1;
    }
    Ok(out)
}

/// The open journal of a database this process writes exclusively.
#[derive(Debug)]
pub(super) struct Journal {
    /// `None` when the journal could not be created for a full disk: every commit is then
    /// redb-durable.
    file: Option<File>,
    path: PathBuf,
    /// Bytes of the journal (where the next record goes).
    len: u64,
    /// The number of the last commit journaled (or that redb held when the journal was opened).
    last: u64,
    /// Records since the last checkpoint.
    records: u64,
    /// Every commit is redb-durable, the journal unused: since an append found the disk full
    /// (see [`Journal::checkpoint_due`]).
    direct: bool,
    /// No commit since the journal was opened: the first is redb-durable, so that a process
    /// that writes once (a `memkv` command) flushes once, not also at its close.
    first: bool,
}

impl Journal {
    /// Opens the (replayed) journal of `db`, whose id is `id` and whose last journaled commit
    /// redb holds is `applied`, empty, creating it if need be.
    /// On a full disk, where not even that fits, the journal is not used: every commit is then
    /// redb-durable, as in [`Journal::checkpoint_due`].
    pub(super) fn open(db: &Path, id: u64, applied: u64) -> Result<Journal, Error> {
        let path = path_of(db);
        let mut header = MAGIC.to_vec();
        header.extend_from_slice(&id.to_le_bytes());
        let opened = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .and_then(|file| {
                file.set_len(0)?;
                file.write_all_at(&header, 0)?;
                Ok(file)
            })
            .map_err(|e| io_error(&path, e));
        let file = match opened {
            Ok(file) => Some(file),
            Err(Error::DiskFull { .. }) => {
                let _ = std::fs::remove_file(&path);
                None
            }
            Err(e) => return Err(e),
        };
        Ok(Journal {
            first: true,
            direct: file.is_none(),
            file,
            path,
            len: HEADER_LEN,
            last: applied,
            records: 0,
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
    /// journal with this commit free), and once an append found the disk full, every commit is redb-durable and
    /// takes its pages when it commits: a full disk then refuses growing writes and lets the
    /// writes that free space commit (with the disk reserve), as without a journal.
    /// `adding` is the size of the commit's changes ([`Op::size`]).
    pub(super) fn checkpoint_due(&self, adding: u64) -> bool {
        let held = self.len.saturating_add(adding);
        self.first
            || self.direct
            || self.records >= CHECKPOINT_RECORDS
            || self.len >= CHECKPOINT_BYTES
            || self.file.as_ref().is_none_or(|file| {
                super::reserve::available(file)
                    .is_ok_and(|free| free < HEADROOM.saturating_add(held.saturating_mul(4)))
            })
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
    /// `Ok`. On failure the journal is cut back to where it was.
    pub(super) fn append(&mut self, number: u64, ops: Vec<Op>) -> Result<(), Error> {
        let payload = encode_record(number, &ops);
        let len = u32::try_from(payload.len())
            .ok()
            .filter(|&l| l <= MAX_RECORD)
            .ok_or_else(|| {
                Error::storage("one commit's changes exceed the journal's 1 GiB record")
            })?;
        let mut frame = Vec::with_capacity(12 + payload.len());
        frame.extend_from_slice(&len.to_le_bytes());
        frame.extend_from_slice(&checksum(&payload));
        frame.extend_from_slice(&payload);
        let Some(file) = &self.file else {
            return Err(Error::storage("the journal is not in use"));
        };
        let written = file
            .write_all_at(&frame, self.len)
            .and_then(|()| file.sync_data());
        if let Err(e) = written {
            // A record whose flush failed is not acknowledged; best effort to drop it, and a
            // replay stops at it anyway if it is torn.
            let _ = file.set_len(self.len);
            let e = io_error(&self.path, e);
            if matches!(e, Error::DiskFull { .. }) {
                self.direct = true;
            }
            return Err(e);
        }
        self.len += frame.len() as u64;
        self.last = number;
        self.records += 1;
        Ok(())
    }

    /// Commit `number` was redb-durable (a checkpoint, never journaled), and so is everything
    /// before it: the journal starts over.
    pub(super) fn checkpointed(&mut self, number: u64) -> Result<(), Error> {
        self.last = number;
        self.first = false;
        self.restart()
    }

    /// On a clean close, after a checkpoint: the journal is no longer needed.
    pub(super) fn remove(&self) {
        let _ = std::fs::remove_file(&self.path);
    }

    /// After a redb-durable commit of everything journaled: the journal starts over, written
    /// from its start again. The file keeps its length, so that a record overwrites blocks
    /// already allocated and its flush writes no file metadata; what lies after the newest
    /// record is older records, numbered at or below what redb holds (skipped by a replay), or
    /// the torn rest of one (where a replay stops).
    pub(super) fn restart(&mut self) -> Result<(), Error> {
        self.len = HEADER_LEN;
        self.records = 0;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(n: u8) -> Op {
        Op::Put {
            snapshots: false,
            key: vec![n],
            value: vec![n; 3],
        }
    }

    #[test]
    fn records_are_read_back_after_the_applied_one_and_a_torn_tail_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("m.redb");
        let mut j = Journal::open(&db, 9, 4).unwrap();
        for n in 5..=7u8 {
            j.append(j.next(), vec![put(n)]).unwrap();
        }
        assert_eq!(read_after(&path_of(&db), 9, 4).unwrap().len(), 3);
        assert_eq!(read_after(&path_of(&db), 9, 6).unwrap(), vec![vec![put(7)]]);
        // A torn last record (its flush never returned): the ones before it stand.
        let len = std::fs::metadata(path_of(&db)).unwrap().len();
        let f = OpenOptions::new().write(true).open(path_of(&db)).unwrap();
        f.set_len(len - 2).unwrap();
        assert_eq!(read_after(&path_of(&db), 9, 4).unwrap().len(), 2);
        // A flipped byte fails the checksum: nothing after it either.
        f.write_all_at(&[0xff], HEADER_LEN + 12).unwrap();
        assert!(read_after(&path_of(&db), 9, 4).unwrap().is_empty());
    }

    #[test]
    fn a_gap_in_the_numbers_ends_the_replay_and_a_foreign_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("m.redb");
        let mut j = Journal::open(&db, 9, 0).unwrap();
        j.append(1, vec![put(1)]).unwrap();
        j.append(3, vec![put(3)]).unwrap();
        assert_eq!(read_after(&path_of(&db), 9, 0).unwrap(), vec![vec![put(1)]]);
        // Written from the start again after a checkpoint at 3: the older records are skipped.
        j.checkpointed(3).unwrap();
        j.append(4, vec![put(4)]).unwrap();
        assert_eq!(read_after(&path_of(&db), 9, 3).unwrap(), vec![vec![put(4)]]);
        assert!(read_after(&path_of(&db), 9, 4).unwrap().is_empty());
        assert!(matches!(
            read_after(&path_of(&db), 8, 0),
            Err(Error::Corrupt(_))
        ));
        std::fs::write(path_of(&db), b"something else entirely, and longer").unwrap();
        assert!(matches!(
            read_after(&path_of(&db), 9, 0),
            Err(Error::Corrupt(_))
        ));
        assert!(
            read_after(&dir.path().join("none.journal"), 9, 0)
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn every_op_reads_back_as_written() {
        let ops = vec![
            put(1),
            Op::Put {
                snapshots: true,
                key: vec![],
                value: vec![0; 70_000],
            },
            Op::Remove {
                snapshots: true,
                key: b"k".to_vec(),
            },
            Op::RemoveRange {
                snapshots: false,
                start: b"a".to_vec(),
                end: b"b".to_vec(),
            },
            Op::Meta {
                key: "journal_applied".into(),
                value: u64::MAX,
            },
            Op::LogPut {
                seq: 7,
                value: b"{}".to_vec(),
            },
            Op::LogTrim { through: 3 },
        ];
        let payload = encode_record(42, &ops);
        assert_eq!(decode_record(&payload), Some((42, ops)));
        // Cut anywhere inside an op, or with an unknown tag, a payload is malformed.
        for cut in [9, 12, payload.len() - 1] {
            assert_eq!(decode_record(&payload[..cut]), None, "cut at {cut}");
        }
        let mut bad = payload.clone();
        bad[8] = 0x7f;
        assert_eq!(decode_record(&bad), None);
    }

    #[test]
    fn checkpoints_fall_due_by_count() {
        let dir = tempfile::tempdir().unwrap();
        let mut j = Journal::open(&dir.path().join("m.redb"), 9, 0).unwrap();
        assert!(
            !j.holds_commits() && j.checkpoint_due(0),
            "the first commit is a checkpoint"
        );
        j.checkpointed(0).unwrap();
        assert!(!j.checkpoint_due(0));
        for _ in 0..CHECKPOINT_RECORDS {
            j.append(j.next(), vec![Op::LogTrim { through: 1 }])
                .unwrap();
        }
        assert!(j.holds_commits() && j.checkpoint_due(0));
        j.restart().unwrap();
        assert!(!j.checkpoint_due(0));
        assert_eq!(j.next(), CHECKPOINT_RECORDS + 1);
    }
}
