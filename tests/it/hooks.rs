//! The write pipeline's commit hooks see every committed change of every library face, on
//! both backends: memory-tool commands (blocking, async, and batches), the memory-stores API,
//! versions (redact, restore), store records, imports (an export, a directory), expiry; and
//! nothing that did not commit (refusals, model errors).

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use memkv::{ChangeKind, Conflict, Database, DatabaseBuilder};
use serde_json::json;

use crate::util::{Fresh, Seen, each_backend};

fn hooked(builder: DatabaseBuilder) -> (Database, Arc<Seen>) {
    let seen = Arc::new(Seen::default());
    let store = builder.commit_hook(seen.clone()).fresh().unwrap();
    (store, seen)
}

type Seen4 = (ChangeKind, String, Option<String>, Option<String>);

fn memory(kind: ChangeKind, store: &str, path: &str) -> Seen4 {
    (kind, store.into(), Some(path.into()), None)
}

fn moved(store: &str, from: &str, to: &str) -> Seen4 {
    (
        ChangeKind::MemoryRenamed,
        store.into(),
        Some(to.into()),
        Some(from.into()),
    )
}

#[test]
fn the_tool_commands_reach_the_hooks_and_refusals_do_not() {
    use ChangeKind::*;
    each_backend(|| {
        let (store, seen) = hooked(Database::builder());
        let u = store.user("u").unwrap();
        let run = |input: serde_json::Value| u.execute_json(&input).unwrap();
        run(json!({"command": "create", "path": "/memories/a/x.md", "file_text": "one\n"}));
        run(
            json!({"command": "str_replace", "path": "/memories/a/x.md", "old_str": "one", "new_str": "two"}),
        );
        run(
            json!({"command": "insert", "path": "/memories/a/x.md", "insert_line": 0, "insert_text": "zero"}),
        );
        run(json!({"command": "create", "path": "/memories/a/y.md", "file_text": "y"}));
        run(json!({"command": "rename", "old_path": "/memories/a", "new_path": "/memories/b"}));
        run(json!({"command": "view", "path": "/memories"}));
        // A model error commits nothing, so the hooks see nothing of it, and it is not
        // counted as a committed write.
        let (_, writes) = store.commit_stats();
        assert_eq!(writes, 5);
        assert!(run(json!({"command": "delete", "path": "/memories/none"})).is_error);
        assert_eq!(store.commit_stats().1, writes);
        run(json!({"command": "delete", "path": "/memories/b"}));
        assert_eq!(
            seen.take(),
            vec![
                memory(MemoryCreated, "u", "/memories/a/x.md"),
                memory(MemoryModified, "u", "/memories/a/x.md"),
                memory(MemoryModified, "u", "/memories/a/x.md"),
                memory(MemoryCreated, "u", "/memories/a/y.md"),
                moved("u", "/memories/a/x.md", "/memories/b/x.md"),
                moved("u", "/memories/a/y.md", "/memories/b/y.md"),
                memory(MemoryDeleted, "u", "/memories/b/x.md"),
                memory(MemoryDeleted, "u", "/memories/b/y.md"),
            ]
        );
        // A batch: one commit, its changes in order; the failing command adds none.
        let batch = [
            ("v".to_string(), create("/memories/1", "1")),
            ("v".to_string(), create("/memories/1", "again")),
            ("w".to_string(), create("/memories/2", "2")),
        ];
        let out = store.execute_batch(&batch);
        assert!(out[1].as_ref().unwrap().is_error);
        assert_eq!(store.commit_stats().1, 6 + 2);
        let commits = seen.take_commits();
        assert_eq!(commits.len(), 1, "{commits:?}");
        let paths: Vec<_> = commits[0]
            .iter()
            .map(|c| (c.store.as_str(), c.path.as_deref()))
            .collect();
        assert_eq!(
            paths,
            [("v", Some("/memories/1")), ("w", Some("/memories/2"))]
        );
        // Each change carries its ids, hash, size, actor and time.
        let c = &commits[0][0];
        let meta = &store.user("v").unwrap().files().unwrap()[0];
        assert_eq!(c.size, Some(1));
        assert_eq!(c.sha256.map(|s| hex(&s)), Some(meta.sha256.clone()));
        assert_eq!(c.at_ms, meta.modified_ms);
        assert!(c.memory.is_some() && c.version.is_some() && c.actor.is_none());
        seen.assert_logged(&store);
    });
}

fn create(path: &str, text: &str) -> memkv::Command {
    memkv::Command::Create {
        path: path.into(),
        file_text: text.into(),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A minimal executor: polls `future` on this thread, parking between wake-ups.
fn block_on<F: std::future::Future>(future: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl std::task::Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Arc::new(Unpark(std::thread::current())).into();
    let mut cx = std::task::Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        if let std::task::Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            return out;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the write never completed"
        );
        std::thread::park_timeout(Duration::from_secs(1));
    }
}

#[test]
fn async_writes_share_the_pipeline_with_blocking_ones() {
    each_backend(|| {
        let (store, seen) = hooked(Database::builder());
        let store = Arc::new(store);
        let threads: Vec<_> = (0..8)
            .map(|i| {
                let user = store.owned_user("u").unwrap();
                std::thread::spawn(move || {
                    let command = create(&format!("/memories/{i}"), "x");
                    if i % 2 == 0 {
                        block_on(user.execute_async(command)).unwrap()
                    } else {
                        user.handle().execute(&command).unwrap()
                    }
                })
            })
            .collect();
        for t in threads {
            let out = t.join().unwrap();
            assert!(!out.is_error, "{}", out.content);
        }
        let mut paths: Vec<_> = seen.take().into_iter().map(|c| c.2.unwrap()).collect();
        paths.sort();
        let want: Vec<_> = (0..8).map(|i| format!("/memories/{i}")).collect();
        assert_eq!(paths, want);
        let (batches, jobs) = store.commit_stats();
        assert_eq!(jobs, 8);
        assert!(batches <= 8);
        // A view through the async call is answered in place, and changes nothing.
        let user = store.owned_user("u").unwrap();
        let view = memkv::Command::View {
            path: "/memories/0".into(),
            view_range: None,
        };
        assert!(!block_on(user.execute_async(view)).unwrap().is_error);
        assert!(seen.take().is_empty());
        seen.assert_logged(&store);
    });
}

#[test]
fn a_store_can_go_while_its_writer_thread_finishes() {
    // The last handle of the store may be dropped on the writer thread itself (it holds one
    // while it runs a batch): the store goes, and nothing waits forever.
    for _ in 0..20 {
        let store = Arc::new(Database::in_memory().unwrap());
        let user = store.owned_user("u").unwrap();
        drop(store);
        let out = block_on(user.execute_async(create("/memories/a", "a"))).unwrap();
        assert!(!out.is_error);
        drop(user);
    }
}

#[test]
fn a_database_file_is_closed_when_its_last_caller_lets_go() {
    // The writer thread lets go of the store before it answers the batch's callers, so the
    // caller that drops the last handle closes the file, and reopening it at once succeeds.
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    for i in 0..50 {
        let store = Arc::new(Database::open(&db).unwrap());
        let user = store.owned_user("u").unwrap();
        drop(store);
        let out = block_on(user.execute_async(create(&format!("/memories/{i}"), "a"))).unwrap();
        assert!(!out.is_error, "{}", out.content);
        drop(user);
    }
    let store = Database::open(&db).unwrap();
    assert_eq!(store.users().unwrap().len(), 1);
}

#[test]
fn the_memory_stores_api_and_versions_reach_the_hooks() {
    use ChangeKind::*;
    each_backend(|| {
        let (store, seen) = hooked(Database::builder().max_file_bytes(100));
        let info = store
            .create_store("notes", "", &Default::default())
            .unwrap();
        let id = info.id.clone();
        store
            .update_store(&id, Some("renamed"), None, &Default::default())
            .unwrap()
            .unwrap();
        let u = store.user(&id).unwrap();
        let m = u.create_memory("/memories/a.md", "one").unwrap().unwrap();
        // Refused: a taken path, content over the cap; nothing is seen of them.
        assert!(u.create_memory("/memories/a.md", "again").unwrap().is_err());
        assert!(
            u.create_memory("/memories/big.md", &"x".repeat(200))
                .unwrap()
                .is_err()
        );
        let m2 = u
            .update_memory(m.id, Some("two"), None, None)
            .unwrap()
            .unwrap();
        u.update_memory(m.id, Some("three"), None, None)
            .unwrap()
            .unwrap();
        u.update_memory(m.id, None, Some("/memories/b.md"), None)
            .unwrap()
            .unwrap();
        u.redact(m.version).unwrap().unwrap();
        u.restore(m2.version).unwrap().unwrap();
        u.delete_memory(m.id, None).unwrap().unwrap();
        store.archive_store(&id).unwrap().unwrap();
        assert!(store.delete_store(&id).unwrap());
        let kinds: Vec<_> = seen
            .take()
            .into_iter()
            .map(|(kind, s, path, previous)| {
                assert_eq!(s, id);
                (kind, path, previous)
            })
            .collect();
        let p = |s: &str| Some(s.to_string());
        assert_eq!(
            kinds,
            vec![
                (StoreCreated, None, None),
                (StoreUpdated, None, None),
                (MemoryCreated, p("/memories/a.md"), None),
                (MemoryModified, p("/memories/a.md"), None),
                (MemoryModified, p("/memories/a.md"), None),
                (MemoryRenamed, p("/memories/b.md"), p("/memories/a.md")),
                (VersionRedacted, None, None),
                (MemoryModified, p("/memories/b.md"), None),
                (MemoryDeleted, p("/memories/b.md"), None),
                (StoreArchived, None, None),
                (StoreDeleted, None, None),
            ]
        );
        seen.assert_logged(&store);
    });
}

#[test]
fn imports_and_expiry_reach_the_hooks() {
    use ChangeKind::*;
    each_backend(|| {
        let dir = tempfile::tempdir().unwrap();
        // An export of one store, imported into another database.
        let source = Database::builder().fresh().unwrap();
        let a = source.user("a").unwrap();
        a.execute(&create("/memories/x.md", "x")).unwrap();
        let file = dir.path().join("export.jsonl");
        source
            .export(&[], std::fs::File::create(&file).unwrap(), &mut |_| {})
            .unwrap();
        let t = Arc::new(Mutex::new(SystemTime::now()));
        let clock = Arc::clone(&t);
        let (store, seen) = hooked(
            Database::builder()
                .ttl(Duration::from_secs(60))
                .clock(move || *clock.lock().unwrap()),
        );
        let mut from = memkv::ImportSource::open(&file, store.limits()).unwrap();
        store
            .import_from(&mut from, &[], Conflict::Refuse, &mut |_| {})
            .unwrap();
        let kinds: Vec<_> = seen.take().into_iter().map(|c| (c.0, c.1, c.2)).collect();
        assert!(
            kinds.contains(&(MemoryCreated, "a".into(), Some("/memories/x.md".into()))),
            "{kinds:?}"
        );
        // A plain directory.
        let plain = dir.path().join("plain");
        std::fs::create_dir(&plain).unwrap();
        std::fs::write(plain.join("y.md"), "y").unwrap();
        store
            .import_dir(&plain, "b", false, Conflict::Refuse, &mut |_| {})
            .unwrap();
        assert_eq!(
            seen.take(),
            vec![memory(MemoryCreated, "b", "/memories/y.md")]
        );
        // Expiry: deletions made on nobody's behalf.
        *t.lock().unwrap() += Duration::from_secs(30 * 86_400);
        let expired = store.expire(false).unwrap();
        assert_eq!(expired.len(), 2);
        let mut deleted = seen.take();
        deleted.sort_by(|a, b| a.1.cmp(&b.1));
        assert_eq!(
            deleted,
            vec![
                memory(MemoryDeleted, "a", "/memories/x.md"),
                memory(MemoryDeleted, "b", "/memories/y.md"),
            ]
        );
        seen.assert_logged(&store);
    });
}

#[test]
fn a_batch_of_views_needs_no_write_transaction() {
    // Views alone are answered from read snapshots: on a read-only database too, and no write
    // is counted for them; a view beside a write is counted as no change either.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    {
        let db = Database::open(&path).unwrap();
        let out = db
            .user("u")
            .unwrap()
            .execute(&create("/memories/a", "a\n"))
            .unwrap();
        assert!(!out.is_error, "{}", out.content);
    }
    let view = memkv::Command::View {
        path: "/memories/a".into(),
        view_range: None,
    };
    let read_only = Database::builder().open_read_only(&path).unwrap();
    let out = read_only.execute_batch(&[("u".into(), view.clone()), ("u".into(), view.clone())]);
    for o in &out {
        let o = o.as_ref().unwrap();
        assert!(!o.is_error && o.content.contains("a"), "{}", o.content);
    }
    assert_eq!(read_only.commit_stats(), (0, 0));
    drop(read_only);
    let db = Database::open(&path).unwrap();
    let out = db.execute_batch(&[("u".into(), create("/memories/b", "b")), ("u".into(), view)]);
    assert!(out.iter().all(|o| !o.as_ref().unwrap().is_error));
    assert_eq!(db.commit_stats(), (1, 1));
}
