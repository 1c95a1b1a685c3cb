//! Unit tests of the redb backend.

use std::ops::ControlFlow;

use super::*;
use crate::storage::ReadTxn;

fn collect(
    txn: &dyn ReadTxn,
    space: Space,
    user: &str,
    start: &[u8],
    end: Option<&[u8]>,
) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    txn.scan(space, user, start, end, &mut |k, _| {
        out.push(k.to_vec());
        Ok(ControlFlow::Continue(()))
    })
    .unwrap();
    out
}

fn commit(b: &RedbBackend, f: impl FnOnce(&mut dyn WriteTxn)) {
    let mut f = Some(f);
    b.write(&[], |w| {
        (f.take().unwrap())(w);
        Ok(((), Finish::Commit))
    })
    .unwrap();
}

#[test]
fn users_and_spaces_are_partitioned_exactly() {
    let b = RedbBackend::in_memory().unwrap();
    commit(&b, |w| {
        // "a" + key "b…" must never be confused with user "ab".
        w.put(Space::Contents, "a", b"bx", b"1").unwrap();
        w.put(Space::Contents, "ab", b"x", b"2").unwrap();
        w.put(Space::Contents, "ab", b"y", b"3").unwrap();
        w.put(Space::Nodes, "ab", b"x", b"n").unwrap();
        w.put(Space::Nodes, "zed", b"k", b"4").unwrap();
    });
    let r = b.begin_read().unwrap();
    assert_eq!(
        collect(&r, Space::Contents, "a", b"", None),
        vec![b"bx".to_vec()]
    );
    assert_eq!(
        collect(&r, Space::Contents, "ab", b"", None),
        vec![b"x".to_vec(), b"y".to_vec()]
    );
    assert_eq!(
        collect(&r, Space::Contents, "ab", b"x", Some(b"y")),
        vec![b"x".to_vec()]
    );
    assert_eq!(
        collect(&r, Space::Nodes, "ab", b"", None),
        vec![b"x".to_vec()]
    );
    assert_eq!(r.get(Space::Contents, "a", b"x").unwrap(), None);
    assert_eq!(
        r.get(Space::Nodes, "ab", b"x").unwrap(),
        Some(b"n".to_vec())
    );
    let mut users = Vec::new();
    r.users(Space::Contents, &mut |u| {
        users.push(u.to_owned());
        Ok(ControlFlow::Continue(()))
    })
    .unwrap();
    assert_eq!(users, ["a", "ab"]);
}

#[test]
fn aborted_writes_leave_no_trace_and_ranges_remove() {
    let b = RedbBackend::in_memory().unwrap();
    commit(&b, |w| {
        for k in [b"a1", b"a2", b"b1"] {
            w.put(Space::Nodes, "u", k, b"v").unwrap();
        }
    });
    let seen = b
        .write(&[], |w| {
            w.remove_range(Space::Nodes, "u", b"a", b"b").unwrap();
            Ok((collect(w, Space::Nodes, "u", b"", None), Finish::Abort))
        })
        .unwrap();
    assert_eq!(seen, vec![b"b1".to_vec()]);
    let failed: Result<(), Error> = b.write(&[], |w| {
        w.remove(Space::Nodes, "u", b"a1").unwrap();
        Err(Error::Corrupt("stop".into()))
    });
    assert!(failed.is_err());
    let r = b.begin_read().unwrap();
    assert_eq!(collect(&r, Space::Nodes, "u", b"", None).len(), 3);
}

#[test]
fn refuses_unknown_format_and_foreign_files() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    drop(RedbBackend::create(&path, false).unwrap());
    {
        let db = Database::open(&path).unwrap();
        let w = db.begin_write().unwrap();
        w.open_table(META).unwrap().insert(FORMAT_KEY, 99).unwrap();
        w.commit().unwrap();
    }
    let err = RedbBackend::open(&path, false).unwrap_err();
    assert!(
        matches!(
            err,
            Error::UnsupportedFormat {
                found: 99,
                supported: crate::layout::LAYOUT_VERSION,
                ..
            }
        ),
        "{err}"
    );
    let err = RedbBackend::open_read_only(&path).unwrap_err();
    assert!(
        matches!(err, Error::UnsupportedFormat { found: 99, .. }),
        "{err}"
    );

    let foreign = dir.path().join("foreign");
    {
        let db = Database::create(&foreign).unwrap();
        let w = db.begin_write().unwrap();
        w.open_table(TableDefinition::<&str, u64>::new("other"))
            .unwrap()
            .insert("x", 1)
            .unwrap();
        w.commit().unwrap();
    }
    assert!(matches!(
        RedbBackend::open(&foreign, false),
        Err(Error::NotMemkv { .. })
    ));
    assert!(matches!(
        RedbBackend::open_read_only(&foreign),
        Err(Error::NotMemkv { .. })
    ));

    let garbage = dir.path().join("garbage");
    std::fs::write(&garbage, vec![0x42u8; 10_000]).unwrap();
    assert!(RedbBackend::open(&garbage, false).is_err());
    assert_eq!(std::fs::read(&garbage).unwrap(), vec![0x42u8; 10_000]);
    assert!(matches!(
        RedbBackend::open(&dir.path().join("missing"), false),
        Err(Error::NotFound { .. })
    ));
}

#[test]
fn read_only_handles_do_not_write() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    drop(RedbBackend::create(&path, false).unwrap());
    let r = RedbBackend::open_read_only(&path).unwrap();
    assert!(matches!(
        r.write(&[], |_| Ok(((), Finish::Commit))),
        Err(Error::ReadOnly)
    ));
}

#[test]
fn a_file_left_by_an_interrupted_creation_is_initialised_again() {
    let dir = tempfile::tempdir().unwrap();
    // What a process killed while redb created the file leaves: zeros (sized, or empty), or
    // a header written without its magic number (which redb writes last).
    let mut header_only = vec![0u8; 8192];
    header_only[9..320].fill(0x5A);
    for (name, bytes) in [
        ("zeros", vec![0u8; 1 << 20]),
        ("empty", Vec::new()),
        ("short", vec![0u8; 100]),
        ("header-only", header_only),
    ] {
        let path = dir.path().join(name);
        std::fs::write(&path, &bytes).unwrap();
        let err = RedbBackend::open_read_only(&path).unwrap_err();
        assert!(
            err.to_string().contains("holds no committed data"),
            "{name}: {err}"
        );
        assert_eq!(std::fs::read(&path).unwrap(), bytes, "{name}");
        let b = if name == "empty" {
            RedbBackend::create(&path, false)
        } else {
            RedbBackend::open(&path, false)
        }
        .unwrap_or_else(|e| panic!("{name}: {e}"));
        commit(&b, |w| w.put(Space::Nodes, "u", b"k", b"v").unwrap());
        drop(b);
        let r = RedbBackend::open_read_only(&path).unwrap();
        assert_eq!(
            r.begin_read()
                .unwrap()
                .get(Space::Nodes, "u", b"k")
                .unwrap(),
            Some(b"v".to_vec())
        );
    }
    // No temporary file is left behind.
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["empty", "header-only", "short", "zeros"]);
}

#[test]
fn a_file_with_data_is_never_taken_for_an_interrupted_creation() {
    let dir = tempfile::tempdir().unwrap();
    // No magic number, but data after the header: not ours to overwrite.
    let mut bytes = vec![0u8; 8192];
    bytes[4000] = 1;
    let path = dir.path().join("data");
    std::fs::write(&path, &bytes).unwrap();
    assert!(RedbBackend::create(&path, false).is_err());
    assert!(RedbBackend::open_read_only(&path).is_err());
    assert_eq!(std::fs::read(&path).unwrap(), bytes);
    // A new database appears whole, under its name only.
    let path = dir.path().join("new.redb");
    drop(RedbBackend::create(&path, false).unwrap());
    assert!(!create::holds_no_data(&path).unwrap());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
}

/// Reads share the latest commit's snapshot until the next commit; a read begun before a commit
/// keeps what it saw, and every read begun after the commit sees it (a command is answered
/// after its commit, so whoever learns of a write reads it).
#[test]
fn reads_share_the_latest_commit_and_never_miss_a_later_one() {
    let b = RedbBackend::in_memory().unwrap();
    commit(&b, |w| w.put(Space::Contents, "u", b"k", b"1").unwrap());
    let (r1, r2) = (b.begin_read().unwrap(), b.begin_read().unwrap());
    let shared = |x: &RedbRead, y: &RedbRead| {
        std::ptr::eq(
            std::ptr::from_ref(x.tables()),
            std::ptr::from_ref(y.tables()),
        )
    };
    assert!(
        shared(&r1, &r2),
        "two reads between commits open one snapshot"
    );
    for round in 2..6u8 {
        let value = [b'0' + round];
        commit(&b, |w| w.put(Space::Contents, "u", b"k", &value).unwrap());
        let r = b.begin_read().unwrap();
        assert!(!shared(&r, &r1));
        assert_eq!(
            r.get(Space::Contents, "u", b"k").unwrap(),
            Some(value.to_vec())
        );
        // The reads begun before every later commit still see the first.
        assert_eq!(
            r1.get(Space::Contents, "u", b"k").unwrap(),
            Some(b"1".to_vec())
        );
    }
    // A write that ends without committing changes nothing a read sees.
    b.write(&[], |w| {
        w.put(Space::Contents, "u", b"k", b"x").unwrap();
        Ok(((), Finish::Abort))
    })
    .unwrap();
    let r = b.begin_read().unwrap();
    assert_eq!(
        r.get(Space::Contents, "u", b"k").unwrap(),
        Some(b"5".to_vec())
    );
}

/// The host's files, whose reads of the journal find the disk full once when armed (as a
/// reopen's replay does on a full disk).
#[derive(Debug, Default)]
struct FullOnce(std::sync::atomic::AtomicBool);

impl Files for FullOnce {
    fn open(&self, path: &Path, access: files::Access) -> std::io::Result<Box<dyn files::FileOps>> {
        let journal = path.to_string_lossy().ends_with(".journal");
        if journal
            && access == files::Access::Read
            && self.0.swap(false, std::sync::atomic::Ordering::SeqCst)
        {
            return Err(std::io::ErrorKind::StorageFull.into());
        }
        OsFiles.open(path, access)
    }
    fn exists(&self, path: &Path) -> std::io::Result<bool> {
        OsFiles.exists(path)
    }
    fn remove(&self, path: &Path) -> std::io::Result<()> {
        OsFiles.remove(path)
    }
    fn rename_new(&self, from: &Path, to: &Path) -> std::io::Result<()> {
        OsFiles.rename_new(from, to)
    }
    fn sync_dir(&self, dir: &Path) -> std::io::Result<()> {
        OsFiles.sync_dir(dir)
    }
}

#[test]
fn a_reserve_given_up_by_a_reopen_is_taken_back_by_the_next_write() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.redb");
    let files = Arc::new(FullOnce::default());
    let b = RedbBackend::open_with_files(&path, Arc::clone(&files) as Arc<dyn Files>)
        .unwrap()
        .with_disk_reserve(1 << 20);
    let reserve = reserve::path_for(&path);
    let kept = b.disk_reserve();
    assert_eq!(kept, 1 << 20);
    commit(&b, |w| w.put(Space::Contents, "u", b"a", b"1").unwrap());
    commit(&b, |w| w.put(Space::Contents, "u", b"b", b"2").unwrap());
    // A failure forces a reopen, whose replay finds the disk full and gives the reserve up.
    files.0.store(true, std::sync::atomic::Ordering::SeqCst);
    b.health.force_reopen();
    commit(&b, |w| w.put(Space::Contents, "u", b"c", b"3").unwrap());
    assert!(
        !files.0.load(std::sync::atomic::Ordering::SeqCst),
        "not armed"
    );
    // Right after that write, the reserve holds its goal again, in the file too.
    assert_eq!(b.disk_reserve(), kept);
    assert_eq!(std::fs::metadata(&reserve).unwrap().len(), kept);
    let read = b.begin_read().unwrap();
    assert_eq!(collect(&read, Space::Contents, "u", b"", None).len(), 3);
}
