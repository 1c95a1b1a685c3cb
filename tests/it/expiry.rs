//! Expiry and access times, on a clock the test moves.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

#[allow(unused_imports)]
use crate::util::{Clock, Fresh, each_backend, fresh};
use memkv::Database;
use memkv::storage::AnyBackend;
use serde_json::json;

const HOUR: u64 = 3_600_000;
const DAY: u64 = 24 * HOUR;

fn run(store: &Database, user: &str, input: serde_json::Value) -> (String, bool) {
    let out = store.user(user).unwrap().execute_json(&input).unwrap();
    (out.content, out.is_error)
}

fn create(store: &Database, user: &str, path: &str, text: &str) {
    let (content, err) = run(
        store,
        user,
        json!({"command": "create", "path": path, "file_text": text}),
    );
    assert!(!err, "{content}");
}

#[test]
fn unused_files_expire_and_vanish_from_every_command() {
    each_backend(|| {
        let clock = Clock::new();
        let store = clock
            .builder()
            .ttl(Duration::from_millis(7 * DAY))
            .fresh()
            .unwrap();
        create(&store, "u", "/memories/old/a.md", "aaaa");
        create(&store, "u", "/memories/keep.md", "kk");
        clock.advance(3 * DAY);
        create(&store, "u", "/memories/old/b.md", "b");
        // 7 days + the 1 hour granularity after its last use, a.md is gone; b.md is not.
        clock.advance(4 * DAY + HOUR);
        assert_eq!(
            run(&store, "u", json!({"command": "view", "path": "/memories"})),
            ("Here're the files and directories up to 2 levels deep in /memories, excluding hidden items and node_modules:\n1B\t/memories\n1B\t/memories/old/\n1B\t/memories/old/b.md".to_owned(), false)
        );
        assert_eq!(
            run(
                &store,
                "u",
                json!({"command": "view", "path": "/memories/keep.md"})
            ),
            (
                "The path /memories/keep.md does not exist. Please provide a valid path."
                    .to_owned(),
                true
            )
        );
        assert_eq!(store.user("u").unwrap().totals().unwrap(), (1, 1));
        let stats = &store.users().unwrap()[0];
        assert_eq!(
            (
                stats.files,
                stats.bytes,
                stats.expired_files,
                stats.expired_bytes
            ),
            (1, 1, 2, 6)
        );
        assert!(store.check().unwrap().is_empty());
        // Writes see the same: the path is free again, and the sweep reclaims the space.
        create(&store, "u", "/memories/keep.md", "new");
        let stats = &store.users().unwrap()[0];
        assert_eq!((stats.files, stats.bytes, stats.expired_files), (2, 4, 0));
        assert!(store.check().unwrap().is_empty());
    });
}

#[test]
fn a_directory_of_expired_files_is_gone() {
    each_backend(|| {
        let clock = Clock::new();
        let store = clock
            .builder()
            .ttl(Duration::from_millis(DAY))
            .access_granularity(Duration::ZERO)
            .fresh()
            .unwrap();
        create(&store, "u", "/memories/d/x", "1");
        create(&store, "u", "/memories/d/y/z", "22");
        clock.advance(DAY);
        for path in ["/memories/d", "/memories/d/y", "/memories/d/y/z"] {
            let (content, err) = run(&store, "u", json!({"command": "view", "path": path}));
            assert!(err, "{path}: {content}");
        }
        assert_eq!(
            run(
                &store,
                "u",
                json!({"command": "rename", "old_path": "/memories/d", "new_path": "/memories/e"})
            ),
            (
                "Error: The path /memories/d does not exist".to_owned(),
                true
            )
        );
        assert_eq!(
            run(
                &store,
                "u",
                json!({"command": "str_replace", "path": "/memories/d/x", "old_str": "1"})
            ),
            (
                "Error: The path /memories/d/x does not exist. Please provide a valid path."
                    .to_owned(),
                true
            )
        );
        assert!(store.user("u").unwrap().files().unwrap().is_empty());
        assert_eq!(
            store.user("u").unwrap().read_file("/memories/d/x").unwrap(),
            None
        );
    });
}

#[test]
fn reads_refresh_access_time_coarsely() {
    each_backend(|| {
        let clock = Clock::new();
        let store = clock
            .builder()
            .ttl(Duration::from_millis(10 * DAY))
            .fresh()
            .unwrap();
        create(&store, "u", "/memories/f", "x");
        let created = clock.now();
        let accessed = || store.user("u").unwrap().files().unwrap()[0].accessed_ms;
        // Within the granularity a read writes nothing.
        clock.advance(HOUR / 2);
        assert!(
            !run(
                &store,
                "u",
                json!({"command": "view", "path": "/memories/f"})
            )
            .1
        );
        assert_eq!(accessed(), created);
        // Past it, the read records its time.
        clock.advance(HOUR);
        assert!(
            !run(
                &store,
                "u",
                json!({"command": "view", "path": "/memories/f"})
            )
            .1
        );
        assert_eq!(accessed(), clock.now());
        // A directory listing is not a use of the files in it.
        let before = accessed();
        clock.advance(2 * HOUR);
        assert!(!run(&store, "u", json!({"command": "view", "path": "/memories"})).1);
        assert_eq!(accessed(), before);
        // Kept alive by reads, the file outlives its first ttl.
        for _ in 0..3 {
            clock.advance(6 * DAY);
            assert!(
                !run(
                    &store,
                    "u",
                    json!({"command": "view", "path": "/memories/f"})
                )
                .1
            );
        }
        assert!(store.check().unwrap().is_empty());
        // Times survive a rename.
        assert!(
            !run(
                &store,
                "u",
                json!({"command": "rename", "old_path": "/memories/f", "new_path": "/memories/g"})
            )
            .1
        );
        assert_eq!(accessed(), clock.now());
        assert!(store.check().unwrap().is_empty());
    });
}

#[test]
fn per_user_overrides_and_the_expire_call() {
    each_backend(|| {
        let clock = Clock::new();
        let store = clock
            .builder()
            .ttl(Duration::from_millis(DAY))
            .user_ttl("vip", None)
            .user_ttl("short", Some(Duration::from_millis(HOUR)))
            .fresh()
            .unwrap();
        for user in ["normal", "vip", "short"] {
            create(&store, user, "/memories/a", "12345");
            create(&store, user, "/memories/d/b", "1");
        }
        clock.advance(2 * HOUR + 1);
        let dry = store.expire(true).unwrap();
        let names: Vec<(String, String)> = dry
            .iter()
            .map(|f| (f.user.clone(), f.path.to_string()))
            .collect();
        assert_eq!(
            names,
            [
                ("short".into(), "/memories/a".into()),
                ("short".into(), "/memories/d/b".into())
            ]
        );
        // A dry run deletes nothing (the files stay pending).
        assert_eq!(
            store
                .users()
                .unwrap()
                .iter()
                .map(|u| u.expired_files)
                .sum::<u64>(),
            2
        );
        clock.advance(DAY);
        let done = store.expire(false).unwrap();
        assert_eq!(done.len(), 4);
        assert!(done.iter().all(|f| f.user != "vip"));
        assert_eq!(done.iter().map(|f| f.size).sum::<u64>(), 12);
        let users: Vec<(String, u64)> = store
            .users()
            .unwrap()
            .into_iter()
            .map(|u| (u.user, u.files))
            .collect();
        assert_eq!(users, [("vip".into(), 2)]);
        assert!(store.expire(false).unwrap().is_empty());
        assert!(store.check().unwrap().is_empty());
    });
}

#[test]
fn no_ttl_means_nothing_expires() {
    each_backend(|| {
        let clock = Clock::new();
        let store = clock.builder().fresh().unwrap();
        create(&store, "u", "/memories/a", "x");
        clock.advance(10_000 * DAY);
        assert!(
            !run(
                &store,
                "u",
                json!({"command": "view", "path": "/memories/a"})
            )
            .1
        );
        assert!(store.expire(false).unwrap().is_empty());
    });
}

/// Memory that counts flushes, and whose durable image can be opened again.
#[derive(Debug, Clone, Default)]
struct Counted {
    bytes: Arc<std::sync::Mutex<Vec<u8>>>,
    flushes: Arc<AtomicU64>,
}

impl redb::StorageBackend for Counted {
    fn len(&self) -> std::io::Result<u64> {
        Ok(self.bytes.lock().unwrap().len() as u64)
    }
    fn read(&self, offset: u64, out: &mut [u8]) -> std::io::Result<()> {
        let bytes = self.bytes.lock().unwrap();
        out.copy_from_slice(&bytes[offset as usize..offset as usize + out.len()]);
        Ok(())
    }
    fn set_len(&self, len: u64) -> std::io::Result<()> {
        self.bytes.lock().unwrap().resize(len as usize, 0);
        Ok(())
    }
    fn sync_data(&self) -> std::io::Result<()> {
        self.flushes.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
    fn write(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        let mut bytes = self.bytes.lock().unwrap();
        bytes[offset as usize..offset as usize + data.len()].copy_from_slice(data);
        Ok(())
    }
}

impl Counted {
    fn flushes(&self) -> u64 {
        self.flushes.load(Ordering::SeqCst)
    }
    /// A store over a copy of what has been written so far.
    fn reopen(&self, clock: &Clock) -> Database {
        let copy = Counted {
            bytes: Arc::new(std::sync::Mutex::new(self.bytes.lock().unwrap().clone())),
            flushes: Arc::default(),
        };
        let redb = memkv::storage::redb::RedbBackend::with_storage(copy, "copy").unwrap();
        clock.builder().backend(AnyBackend::from(redb)).unwrap()
    }
}

#[test]
fn a_view_never_flushes_its_access_time_is_written_with_the_next_write() {
    let clock = Clock::new();
    let storage = Counted::default();
    let redb = memkv::storage::redb::RedbBackend::with_storage(storage.clone(), "counted").unwrap();
    let store = clock
        .builder()
        .ttl(Duration::from_millis(10 * DAY))
        .backend(AnyBackend::from(redb))
        .unwrap();
    create(&store, "u", "/memories/f", "x");
    let created = clock.now();
    clock.advance(2 * HOUR);
    let viewed = clock.now();
    let flushes = storage.flushes();
    // A stale access time: the view notes it, and writes nothing.
    for _ in 0..3 {
        let (content, err) = run(
            &store,
            "u",
            json!({"command": "view", "path": "/memories/f"}),
        );
        assert!(!err, "{content}");
    }
    assert_eq!(storage.flushes(), flushes, "a view flushed");
    // Every decision of this store counts the noted time already.
    assert_eq!(
        store.user("u").unwrap().files().unwrap()[0].accessed_ms,
        viewed
    );
    let recorded = |s: &Database| s.user("u").unwrap().files().unwrap()[0].accessed_ms;
    assert_eq!(recorded(&storage.reopen(&clock)), created);
    // A file viewed just before it would have expired stays alive on the noted time.
    clock.advance(10 * DAY - HOUR);
    let (content, err) = run(
        &store,
        "u",
        json!({"command": "view", "path": "/memories/f"}),
    );
    assert!(!err, "{content}");
    // The next write takes the note along, in its own transaction: one commit for both.
    let flushes = storage.flushes();
    create(&store, "u", "/memories/g", "y");
    let per_commit = storage.flushes() - flushes;
    assert_eq!(recorded(&storage.reopen(&clock)), clock.now());
    // The write after it flushes no more than it did.
    let flushes = storage.flushes();
    create(&store, "u", "/memories/h", "z");
    assert_eq!(storage.flushes() - flushes, per_commit);
    assert!(store.check().unwrap().is_empty());

    // Notes still waiting when the store goes are written then.
    clock.advance(2 * HOUR);
    let (_, err) = run(
        &store,
        "u",
        json!({"command": "view", "path": "/memories/g"}),
    );
    assert!(!err);
    let last_view = clock.now();
    drop(store);
    let reopened = storage.reopen(&clock);
    let files = reopened.user("u").unwrap().files().unwrap();
    assert_eq!(files[1].path.to_string(), "/memories/g");
    assert_eq!(files[1].accessed_ms, last_view);
    assert!(reopened.check().unwrap().is_empty());
}

/// A short time-to-live expires promptly: the access granularity (1 hour by default) is at
/// most a tenth of it, so a file unused for 10 minutes with a 10-minute ttl is gone after 11
/// minutes, not after 70; and a read recorded at that finer granularity keeps it alive.
#[test]
fn a_short_ttl_is_not_held_up_by_the_hourly_granularity() {
    const MINUTE: u64 = 60_000;
    each_backend(|| {
        let clock = Clock::new();
        let store = clock
            .builder()
            .ttl(Duration::from_millis(10 * MINUTE))
            .fresh()
            .unwrap();
        create(&store, "u", "/memories/read.md", "r");
        create(&store, "u", "/memories/unread.md", "u");
        clock.advance(5 * MINUTE);
        let view = json!({"command": "view", "path": "/memories/read.md"});
        assert!(!run(&store, "u", view.clone()).1);
        store.flush_access_times().unwrap();
        // 10 minutes and the granularity (1 minute) after its creation, unread.md is gone.
        clock.advance(6 * MINUTE + 1);
        let gone = json!({"command": "view", "path": "/memories/unread.md"});
        assert!(run(&store, "u", gone).1, "expired");
        assert!(!run(&store, "u", view).1, "read 6 minutes ago: alive");
    });
}
