use std::io;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;
use crate::storage::redb::files::OsFiles;

fn put(n: u8) -> Op {
    Op::Put {
        snapshots: false,
        key: vec![n],
        value: vec![n; 3],
    }
}

/// The host's files, failing the calls that [`Failing::fail`] names, and counting directory
/// flushes.
#[derive(Debug, Default)]
struct Failing {
    /// Each call is (what, countdown): the call of that kind fails when its countdown is 0.
    fail: Mutex<Vec<(&'static str, usize)>>,
    /// Calls of these kinds all fail.
    always: Mutex<Vec<&'static str>>,
    dir_syncs: AtomicUsize,
}

impl Failing {
    fn arm(&self, what: &'static str, after: usize) {
        self.fail.lock().unwrap().push((what, after));
    }

    fn fail_all(&self, what: &'static str) {
        self.always.lock().unwrap().push(what);
    }

    fn tick(&self, what: &str) -> io::Result<()> {
        if self.always.lock().unwrap().contains(&what) {
            return Err(io::Error::other(format!("injected {what} failure")));
        }
        let mut fail = self.fail.lock().unwrap();
        for (name, left) in fail.iter_mut() {
            if *name == what {
                if *left == 0 {
                    *left = usize::MAX;
                    return Err(io::Error::other(format!("injected {what} failure")));
                }
                *left = left.saturating_sub(1);
            }
        }
        Ok(())
    }
}

#[derive(Debug)]
struct FailingFile(Box<dyn FileOps>, Arc<Failing>);

impl FileOps for FailingFile {
    fn len(&self) -> io::Result<u64> {
        self.0.len()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.0.read_at(buf, offset)
    }
    fn write_at(&self, data: &[u8], offset: u64) -> io::Result<()> {
        self.1.tick("write")?;
        self.0.write_at(data, offset)
    }
    fn sync_data(&self) -> io::Result<()> {
        self.1.tick("sync")?;
        self.0.sync_data()
    }
    fn sync_all(&self) -> io::Result<()> {
        self.1.tick("sync")?;
        self.0.sync_all()
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.1.tick("set_len")?;
        self.0.set_len(len)
    }
    fn allocate(&self, offset: u64, len: u64) -> io::Result<()> {
        self.0.allocate(offset, len)
    }
    fn available(&self) -> io::Result<u64> {
        self.0.available()
    }
}

impl Files for Arc<Failing> {
    fn open(&self, path: &Path, access: Access) -> io::Result<Box<dyn FileOps>> {
        Ok(Box::new(FailingFile(
            OsFiles.open(path, access)?,
            Arc::clone(self),
        )))
    }
    fn exists(&self, path: &Path) -> io::Result<bool> {
        OsFiles.exists(path)
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        OsFiles.remove(path)
    }
    fn rename_new(&self, from: &Path, to: &Path) -> io::Result<()> {
        OsFiles.rename_new(from, to)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.tick("sync_dir")?;
        self.dir_syncs.fetch_add(1, Ordering::SeqCst);
        OsFiles.sync_dir(dir)
    }
}

fn os() -> Arc<dyn Files> {
    Arc::new(OsFiles)
}

fn read(db: &Path, id: u64, applied: u64) -> Result<Vec<Vec<Op>>, Error> {
    read_after(&OsFiles, &path_of(db), id, applied, false).map(|f| f.records)
}

/// A journal of database 9 holding records 1..=n (after a checkpoint at 0), and where each
/// record starts.
fn journal_of(db: &Path, n: u8) -> (Journal, Vec<u64>) {
    let mut j = Journal::open(os(), db, 9, 0).unwrap();
    j.checkpointed(0);
    let mut starts = Vec::new();
    for i in 1..=n {
        starts.push(j.len);
        j.append(j.next(), vec![put(i)]).unwrap();
    }
    (j, starts)
}

fn poke(db: &Path, offset: u64, bytes: &[u8]) {
    OsFiles
        .open(&path_of(db), Access::Write)
        .unwrap()
        .write_at(bytes, offset)
        .unwrap();
}

#[test]
fn records_are_read_back_after_the_applied_one_and_a_torn_tail_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("m.redb");
    let (_j, starts) = journal_of(&db, 3);
    assert_eq!(read(&db, 9, 0).unwrap().len(), 3);
    assert_eq!(read(&db, 9, 2).unwrap(), vec![vec![put(3)]]);
    assert!(read(&db, 9, 3).unwrap().is_empty());
    // A torn last record (its flush never returned): the ones before it stand.
    let len = std::fs::metadata(path_of(&db)).unwrap().len();
    let f = OsFiles.open(&path_of(&db), Access::Write).unwrap();
    f.set_len(len - 2).unwrap();
    assert_eq!(read(&db, 9, 0).unwrap().len(), 2);
    // Nothing is allocated beyond the file: a stale length of 1 GiB reads as a torn record.
    f.write_at(&MAX_RECORD.to_le_bytes(), starts[2]).unwrap();
    assert_eq!(read(&db, 9, 0).unwrap().len(), 2);
}

#[test]
fn damage_before_acknowledged_records_is_refused_with_its_offset_and_can_be_accepted() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("m.redb");
    let (_j, starts) = journal_of(&db, 9);
    // One flipped byte in record 6 of 9: records 7-9 were acknowledged and are intact.
    poke(&db, starts[5] + FRAME_LEN as u64 + 9, &[0xee]);
    let Err(Error::Corrupt(message)) = read(&db, 9, 0) else {
        panic!("damage was not refused")
    };
    assert!(
        message.contains(&format!("at byte {}", starts[5]))
            && message.contains("m.redb.journal")
            && message.contains("--accept-journal-loss"),
        "{message}"
    );
    // Records 7-9 are in redb already: nothing acknowledged is lost, nothing to refuse.
    assert!(read(&db, 9, 9).unwrap().is_empty());
    // Accepted: the five intact records before the damage, and where it is.
    let found = read_after(&OsFiles, &path_of(&db), 9, 0, true).unwrap();
    assert_eq!(found.records.len(), 5);
    assert_eq!(found.damaged_at, Some(starts[5]));
}

#[test]
fn records_out_of_order_or_undecodable_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("m.redb");
    let mut j = Journal::open(os(), &db, 9, 0).unwrap();
    j.checkpointed(0);
    j.append(1, vec![put(1)]).unwrap();
    let gap_at = j.len;
    j.append(3, vec![put(3)]).unwrap();
    let Err(Error::Corrupt(message)) = read(&db, 9, 0) else {
        panic!("a gap was not refused")
    };
    assert!(
        message.contains(&format!("out of order (at byte {gap_at})")),
        "{message}"
    );
    // A first record after the one the file holds next is a gap too.
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("m.redb");
    let mut j = Journal::open(os(), &db, 9, 0).unwrap();
    j.checkpointed(4);
    j.append(6, vec![put(6)]).unwrap();
    assert!(matches!(read(&db, 9, 4), Err(Error::Corrupt(_))));
    assert!(read(&db, 9, 6).unwrap().is_empty(), "all in redb: fine");
    // A frame whose checksum holds over a payload that is no record.
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("m.redb");
    let mut j = Journal::open(os(), &db, 9, 0).unwrap();
    j.checkpointed(0);
    let f = j.file.as_ref().unwrap();
    f.write_at(&header(9, j.salt), 0).unwrap();
    f.write_at(
        &frame(j.salt, &[1, 0, 0, 0, 0, 0, 0, 0, 0x7f]).unwrap(),
        HEADER_LEN,
    )
    .unwrap();
    let Err(Error::Corrupt(message)) = read(&db, 9, 0) else {
        panic!("a malformed record was not refused")
    };
    assert!(message.contains("does not decode"), "{message}");
}

#[test]
fn after_a_restart_older_records_under_other_salts_are_never_taken() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("m.redb");
    let (mut j, _) = journal_of(&db, 6);
    // A checkpoint at 7: written from the start again, over older records numbered 1-6.
    j.checkpointed(7);
    j.append(8, vec![put(8)]).unwrap();
    assert_eq!(read(&db, 9, 7).unwrap(), vec![vec![put(8)]]);
    // Torn over the old records: nothing of this salt after it, so nothing is refused.
    let at = j.len;
    j.append(9, vec![put(9)]).unwrap();
    poke(&db, at + 25, &[0xee]);
    assert_eq!(read(&db, 9, 7).unwrap(), vec![vec![put(8)]]);
    // A lost header rewrite (the old salt) leaves the old records, which redb holds.
    poke(&db, 0, &header(9, 12345));
    assert!(read(&db, 9, 7).unwrap().is_empty());
}

#[test]
fn a_header_of_zeros_is_empty_and_a_damaged_one_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("m.redb");
    let _j = journal_of(&db, 2);
    // The header's block was never flushed, so nothing in the file was acknowledged.
    poke(&db, 0, &[0; HEADER_LEN as usize]);
    assert!(read(&db, 9, 0).unwrap().is_empty());
    // A flipped bit in a flushed header is damage.
    let _j = journal_of(&db, 2);
    poke(&db, 30, &[0xee]);
    let Err(Error::Corrupt(message)) = read(&db, 9, 0) else {
        panic!("a damaged header was not refused")
    };
    assert!(message.contains("header is damaged"), "{message}");
    // Shorter than a header: made, then cut off before its header was whole.
    std::fs::write(path_of(&db), &MAGIC[..10]).unwrap();
    assert!(read(&db, 9, 0).unwrap().is_empty());
    std::fs::write(
        path_of(&db),
        b"something else entirely, and longer than a header",
    )
    .unwrap();
    assert!(matches!(read(&db, 9, 0), Err(Error::Corrupt(_))));
    let _j = journal_of(&db, 2);
    assert!(
        matches!(read(&db, 8, 0), Err(Error::Corrupt(_))),
        "another database's"
    );
    assert!(
        read(&dir.path().join("none.redb"), 9, 0)
            .unwrap()
            .is_empty()
    );
}

#[test]
fn a_version_1_journal_an_older_build_left_is_still_replayed() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("m.redb");
    let mut bytes = b"memkv journal 1\n".to_vec();
    bytes.extend_from_slice(&9u64.to_le_bytes());
    for n in 1..=3u8 {
        let payload = ops::encode_record(u64::from(n), &[put(n)]);
        bytes.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        bytes.extend_from_slice(&checksum(&[&payload]));
        bytes.extend_from_slice(&payload);
    }
    bytes.extend_from_slice(&[0xff; 7]); // a torn tail
    std::fs::write(path_of(&db), &bytes).unwrap();
    assert_eq!(read(&db, 9, 1).unwrap(), vec![vec![put(2)], vec![put(3)]]);
}

#[test]
fn a_failed_flush_is_cut_before_the_answer_and_never_replayed() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("m.redb");
    let failing = Arc::new(Failing::default());
    let mut j = Journal::open(Arc::new(Arc::clone(&failing)), &db, 9, 0).unwrap();
    j.checkpointed(0);
    j.append(1, vec![put(1)]).unwrap();
    // The flush of record 2 fails after its bytes were written: the record is cut, durably,
    // and its number is the next commit's.
    failing.arm("sync", 0);
    assert!(matches!(j.append(2, vec![put(2)]), Err(Error::Io { .. })));
    assert_eq!(read(&db, 9, 0).unwrap(), vec![vec![put(1)]]);
    assert_eq!(j.next(), 2);
    j.append(2, vec![put(22)]).unwrap();
    assert_eq!(read(&db, 9, 0).unwrap(), vec![vec![put(1)], vec![put(22)]]);
    // The flush fails and so does the cut (both ways): the outcome is unknown.
    failing.fail_all("sync");
    let e = j.append(3, vec![put(3)]).unwrap_err();
    assert!(matches!(e, Error::OutcomeUnknown { .. }), "{e}");
    assert!(
        e.to_string().contains("may or may not have been applied"),
        "{e}"
    );
}

#[test]
fn the_directory_is_flushed_before_the_first_answer_that_relies_on_the_name() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("m.redb");
    let failing = Arc::new(Failing::default());
    let mut j = Journal::open(Arc::new(Arc::clone(&failing)), &db, 9, 0).unwrap();
    j.checkpointed(0);
    // The directory's flush fails: the record is cut, not acknowledged.
    failing.arm("sync_dir", 0);
    assert!(j.append(1, vec![put(1)]).is_err());
    assert!(read(&db, 9, 0).unwrap().is_empty());
    for n in 1..=3 {
        j.append(n, vec![put(n as u8)]).unwrap();
    }
    assert_eq!(failing.dir_syncs.load(Ordering::SeqCst), 1, "once per open");
    j.checkpointed(3);
    j.append(4, vec![put(4)]).unwrap();
    assert_eq!(
        failing.dir_syncs.load(Ordering::SeqCst),
        1,
        "the name stays"
    );
}

#[test]
fn checkpoints_fall_due_by_count() {
    let dir = tempfile::tempdir().unwrap();
    let mut j = Journal::open(os(), &dir.path().join("m.redb"), 9, 0).unwrap();
    assert!(
        !j.holds_commits() && j.checkpoint_due(0),
        "the first commit is a checkpoint"
    );
    j.checkpointed(0);
    assert!(!j.checkpoint_due(0));
    for _ in 0..CHECKPOINT_RECORDS {
        j.append(j.next(), vec![Op::LogTrim { through: 1 }])
            .unwrap();
    }
    assert!(j.holds_commits() && j.checkpoint_due(0));
    j.checkpointed(j.next() - 1);
    assert!(!j.checkpoint_due(0));
    assert_eq!(j.next(), CHECKPOINT_RECORDS + 1);
}
