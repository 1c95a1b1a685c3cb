//! Reading a journal back: which records a replay applies, and when it must refuse instead.
//!
//! The records after `journal_applied` are read in order from the header on. The journal's
//! records since it last started over carry its header's salt and are numbered one after
//! another; the first may be one redb holds already (skipped). Reading ends at the first frame
//! that is cut short or fails its checksum: after a crash, that is the record whose flush never
//! returned (never acknowledged), or older records under another salt.
//!
//! What a crash cannot leave is refused, with the file and the offset named, and the journal
//! kept: a record numbered out of order, one whose checksum holds but whose payload does not
//! decode, a damaged header, and any valid record of this salt numbered after the last one read
//! that lies beyond the end of the intact prefix (a damaged record before acknowledged ones).
//! Such records are found by looking for the salt, which is random and never leaves the file,
//! so what a user stored can never pass for one. [`read_after`] with `accept_damage` instead
//! returns the intact prefix and where it ends (`memkv check --accept-journal-loss`).
//!
//! A header of zeros (the file was made, or grew, but its first flush never returned) holds
//! nothing acknowledged: it reads as empty. Nothing is allocated beyond the file's own size.

use std::io;
use std::path::Path;

use super::ops::decode_record;
use super::{FRAME_LEN, HEADER_LEN, MAGIC, MAX_RECORD, Op, checksum, io_error};
use crate::error::Error;
use crate::storage::redb::files::{Access, FileOps, Files};

/// The magic number of version 1 journals (no salt; see the module's parent).
const MAGIC_V1: &[u8; 16] = b"memkv journal 1\n";
const HEADER_LEN_V1: u64 = 24;
const FRAME_LEN_V1: u64 = 12;
/// How much of the file the search for records after a damaged one reads at a time.
const SCAN_CHUNK: usize = 1 << 20;

/// The records a replay applies, in order.
#[derive(Debug, Default)]
pub(in crate::storage::redb) struct Found {
    /// Each commit's ops, numbered from `applied + 1` on.
    pub(in crate::storage::redb) records: Vec<Vec<Op>>,
    /// With `accept_damage`: the offset where the intact prefix ends before damage.
    pub(in crate::storage::redb) damaged_at: Option<u64>,
}

/// The records of the journal at `path` numbered after `applied`, in order (see the module).
/// A missing journal has none; one that is not a memkv journal, belongs to another database
/// than the one whose id is `id`, or is not a regular file, is refused, and so is a damaged
/// one unless `accept_damage`.
pub(in crate::storage::redb) fn read_after(
    files: &dyn Files,
    path: &Path,
    id: u64,
    applied: u64,
    accept_damage: bool,
) -> Result<Found, Error> {
    let file = match files.open(path, Access::Read) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Found::default()),
        Err(e) => return Err(io_error(path, e)),
    };
    let reader = Reader {
        file: file.as_ref(),
        len: file.len().map_err(|e| io_error(path, e))?,
        path,
    };
    let mut head = vec![0u8; reader.len.min(HEADER_LEN) as usize];
    reader.read(&mut head, 0)?;
    if head.iter().all(|&b| b == 0) {
        // Made, or grown, and never flushed: nothing in it was acknowledged.
        return Ok(Found::default());
    }
    let magic_is = |magic: &[u8]| head.len() >= 16 && head[..16] == *magic;
    let header_len = if magic_is(MAGIC_V1) {
        HEADER_LEN_V1
    } else {
        HEADER_LEN
    };
    if (reader.len as usize) < header_len as usize {
        if MAGIC.starts_with(&head) || MAGIC_V1.starts_with(&head) {
            return Ok(Found::default()); // cut off inside its header
        }
        return Err(not_a_journal(path));
    }
    if !magic_is(MAGIC) && !magic_is(MAGIC_V1) {
        return Err(not_a_journal(path));
    }
    let found = u64::from_le_bytes(head[16..24].try_into().expect("8 bytes"));
    if magic_is(MAGIC_V1) {
        check_id(path, found, id)?;
        return reader.v1_after(applied);
    }
    if checksum(&[&head[..32]]) != head[32..40] {
        return damaged(path, 0, "its header is damaged", accept_damage, Vec::new());
    }
    check_id(path, found, id)?;
    let salt = u64::from_le_bytes(head[24..32].try_into().expect("8 bytes"));
    reader.after(applied, salt, accept_damage)
}

/// Whether the journal of `db` holds records after `applied` (so the file alone is not the
/// whole database): what a read-only open must know before it can read the file alone.
pub(in crate::storage::redb) fn pending(
    files: &dyn Files,
    db: &Path,
    id: u64,
    applied: u64,
) -> Result<usize, Error> {
    let path = super::path_of(db);
    if !files.exists(&path).map_err(|e| io_error(&path, e))? {
        return Ok(0);
    }
    Ok(read_after(files, &path, id, applied, false)?.records.len())
}

fn not_a_journal(path: &Path) -> Error {
    Error::Corrupt(format!(
        "{} is not a memkv journal; move it away only if the database beside it needs none of its commits",
        path.display()
    ))
}

fn check_id(path: &Path, found: u64, id: u64) -> Result<(), Error> {
    if found == id {
        return Ok(());
    }
    Err(Error::Corrupt(format!(
        "{} belongs to another database than the one beside it (which was replaced?); move it away to open this one",
        path.display()
    )))
}

/// Damage at `offset`: refused (nothing replayed, the journal kept), or with `accept` the
/// intact `records` before it.
fn damaged(
    path: &Path,
    offset: u64,
    what: &str,
    accept: bool,
    records: Vec<Vec<Op>>,
) -> Result<Found, Error> {
    if accept {
        return Ok(Found {
            records,
            damaged_at: Some(offset),
        });
    }
    Err(Error::Corrupt(format!(
        "{journal}: {what} (at byte {offset}), and commits that were acknowledged may lie beyond it; \
         nothing was replayed and the journal is kept. Restore the database and its journal from a \
         backup, or accept losing every commit from that byte on: `memkv --db {db} check \
         --accept-journal-loss` replays the intact records before it and keeps the journal as {journal}.damaged",
        journal = path.display(),
        db = path.with_extension("").display(),
    )))
}

/// One frame read at an offset.
enum Frame {
    /// Intact: its number, its ops and where the next frame starts.
    Valid { number: u64, ops: Vec<Op>, end: u64 },
    /// Cut short, of another salt, or failing its checksum.
    Invalid,
    /// Its checksum holds but its payload is not a record: never written so by memkv.
    Malformed,
}

struct Reader<'a> {
    file: &'a dyn FileOps,
    len: u64,
    path: &'a Path,
}

impl Reader<'_> {
    fn read(&self, buf: &mut [u8], offset: u64) -> Result<(), Error> {
        self.file
            .read_at(buf, offset)
            .map_err(|e| io_error(self.path, e))
    }

    /// The frame at `at` under `salt`. Nothing beyond the file is read or allocated.
    fn frame_at(&self, at: u64, salt: u64) -> Result<Frame, Error> {
        let Some(body) = at.checked_add(FRAME_LEN as u64).filter(|&b| b <= self.len) else {
            return Ok(Frame::Invalid);
        };
        let mut head = [0u8; FRAME_LEN];
        self.read(&mut head, at)?;
        let len = u32::from_le_bytes(head[..4].try_into().expect("4 bytes"));
        if head[4..12] != salt.to_le_bytes() || !(8..=MAX_RECORD).contains(&len) {
            return Ok(Frame::Invalid);
        }
        let end = body + u64::from(len);
        if end > self.len {
            return Ok(Frame::Invalid);
        }
        let mut payload = vec![0u8; len as usize];
        self.read(&mut payload, body)?;
        if checksum(&[&head[..12], &payload]) != head[12..] {
            return Ok(Frame::Invalid);
        }
        Ok(match decode_record(&payload) {
            Some((number, ops)) => Frame::Valid { number, ops, end },
            None => Frame::Malformed,
        })
    }

    /// The records of a version 2 journal after `applied` (see the module).
    fn after(&self, applied: u64, salt: u64, accept: bool) -> Result<Found, Error> {
        let mut records = Vec::new();
        let mut at = HEADER_LEN;
        let mut previous: Option<u64> = None;
        loop {
            let damage = match self.frame_at(at, salt)? {
                Frame::Valid { number, ops, end } => {
                    let in_order = match previous {
                        Some(p) => p.checked_add(1) == Some(number),
                        None => number <= applied.saturating_add(1),
                    };
                    if in_order {
                        previous = Some(number);
                        if number > applied {
                            records.push(ops);
                        }
                        at = end;
                        continue;
                    }
                    "a record is numbered out of order"
                }
                Frame::Malformed => "a record's checksum holds but it does not decode",
                Frame::Invalid => {
                    // The end of what was written since the journal started over, or damage
                    // before records that were acknowledged.
                    let unread = previous.map_or(applied, |p| p.max(applied)) + 1;
                    if !self.any_after(at + 1, salt, unread)? {
                        return Ok(Found {
                            records,
                            damaged_at: None,
                        });
                    }
                    "a record is damaged"
                }
            };
            return damaged(self.path, at, damage, accept, records);
        }
    }

    /// Whether an intact record under `salt` numbered `unread` or later starts at or after
    /// `from`, found by its salt.
    fn any_after(&self, from: u64, salt: u64, unread: u64) -> Result<bool, Error> {
        let needle = salt.to_le_bytes();
        // The salt sits 4 bytes into a frame.
        let mut chunk_start = from + 4;
        let mut buf = vec![0u8; SCAN_CHUNK.min(self.len.saturating_sub(chunk_start) as usize)];
        while chunk_start + 8 <= self.len {
            let n = (self.len - chunk_start).min(buf.len() as u64) as usize;
            self.read(&mut buf[..n], chunk_start)?;
            for (i, window) in buf[..n].windows(8).enumerate() {
                if window != needle {
                    continue;
                }
                let at = chunk_start + i as u64 - 4;
                if let Frame::Valid { number, .. } = self.frame_at(at, salt)?
                    && number >= unread
                {
                    return Ok(true);
                }
            }
            if chunk_start + (n as u64) >= self.len {
                break;
            }
            // The next chunk overlaps this one by 7 bytes, so no salt is split between them.
            chunk_start += n as u64 - 7;
        }
        Ok(false)
    }

    /// The records of a version 1 journal (written by an older build) after `applied`, up to
    /// the first that is cut short, fails its checksum or does not follow its predecessor, as
    /// that build read them; nothing allocated beyond the file's size.
    fn v1_after(&self, applied: u64) -> Result<Found, Error> {
        let mut records = Vec::new();
        let mut at = HEADER_LEN_V1;
        let mut next = applied + 1;
        while at + FRAME_LEN_V1 <= self.len {
            let mut head = [0u8; FRAME_LEN_V1 as usize];
            self.read(&mut head, at)?;
            let len = u32::from_le_bytes(head[..4].try_into().expect("4 bytes"));
            let end = at + FRAME_LEN_V1 + u64::from(len);
            if len == 0 || len > MAX_RECORD || end > self.len {
                break;
            }
            let mut payload = vec![0u8; len as usize];
            self.read(&mut payload, at + FRAME_LEN_V1)?;
            if checksum(&[&payload]) != head[4..] {
                break;
            }
            let Some((number, ops)) = decode_record(&payload) else {
                break;
            };
            if number > next {
                break;
            }
            if number == next {
                records.push(ops);
                next += 1;
            }
            at = end;
        }
        Ok(Found {
            records,
            damaged_at: None,
        })
    }
}
