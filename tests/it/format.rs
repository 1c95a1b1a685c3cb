//! Databases written by earlier storage formats still open and read back intact.

use memkv::Database;
use serde_json::json;

/// `tests/data/format-vN.redb` were written by builds of storage format N from
/// `examples/session.jsonl` as user `dana`, plus one file for `bob@example.com`. Each must open
/// (migrating to today's format), read back intact, pass every invariant, and take writes.
#[test]
fn format_v1_database_opens_and_reads_back() {
    old_format_reads_back("format-v1.redb");
}

#[test]
fn format_v2_database_opens_and_reads_back() {
    old_format_reads_back("format-v2.redb");
}

#[test]
fn format_v3_database_opens_and_reads_back() {
    old_format_reads_back("format-v3.redb");
}

#[test]
fn format_v4_database_opens_reads_back_and_gains_history() {
    old_format_reads_back("format-v4.redb");
    // Format 5 gave each file an id and one `created` version of its content, by nobody
    // recorded, and each store its record.
    let (_dir, db) = fixture("format-v4.redb");
    let store = Database::builder().open_existing(&db).unwrap();
    let dana = store.user("dana").unwrap();
    let history = dana.history(None).unwrap().unwrap();
    assert_eq!(history.len(), 3);
    for v in &history {
        assert_eq!(v.operation, memkv::Operation::Created);
        assert_eq!(v.actor, None);
        let memory = dana.memory(v.memory, true).unwrap().unwrap();
        assert_eq!(Some(memory.path.clone()), v.path);
        assert_eq!(memory.version, v.id);
        assert_eq!(memory.content, v.content);
    }
    let info = store.store_info("dana").unwrap().unwrap();
    assert_eq!((info.name.as_str(), info.history.versions), ("dana", 3));
    assert_eq!(store.check().unwrap(), Vec::<(String, String)>::new());
}

/// Format 6 keeps older versions as deltas. A format-5 database (`format-v5.redb`, written by
/// the format-5 build: the session with history, then one version redacted) migrates with every
/// version intact: `format-v5.<user>.history.jsonl` is what `memkv history --json --content`
/// printed for it before. Then edits, a redaction in the middle of a run of deltas and a deletion
/// keep every version readable.
#[test]
fn format_v5_database_opens_and_keeps_every_version() {
    old_format_reads_back("format-v5.redb");
    let (_dir, db) = fixture("format-v5.redb");
    let store = Database::builder().open_existing(&db).unwrap();
    for (user, expected) in [
        ("dana", "format-v5.dana.history.jsonl"),
        ("bob@example.com", "format-v5.bob.history.jsonl"),
    ] {
        let expected = std::fs::read_to_string(format!(
            "{}/tests/data/{expected}",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap();
        let expected: Vec<serde_json::Value> = expected
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let history = store.user(user).unwrap().history(None).unwrap().unwrap();
        assert_eq!(history.len(), expected.len(), "{user}");
        for (v, want) in history.iter().zip(&expected) {
            let got = json!({
                "id": v.id.to_string(),
                "memory": v.memory.to_string(),
                "operation": v.operation.as_str(),
                "path": v.path,
                "content": v.content,
                "size": v.size,
                "sha256": v.sha256.map(|h| h.iter().map(|b| format!("{b:02x}")).collect::<String>()),
                "created_ms": v.created_ms,
                "redacted": v.redacted.is_some(),
            });
            let mut want = want.clone();
            want["redacted"] = json!(!want["redacted"].is_null());
            for field in ["actor", "time"] {
                want.as_object_mut().unwrap().remove(field);
            }
            assert_eq!(got, want, "{user}");
        }
    }
    let dana = store.user("dana").unwrap();
    let path = "/memories/projects/ledger/decisions.md";
    let mut expected = vec![dana.read_file(path).unwrap().unwrap()];
    for i in 0..40 {
        let out = dana
            .execute_json(&json!({"command": "insert", "path": path, "insert_line": 1, "insert_text": format!("edit {i}")}))
            .unwrap();
        assert!(!out.is_error, "{}", out.content);
        expected.push(dana.read_file(path).unwrap().unwrap());
    }
    let memory = dana.history(Some(path)).unwrap().unwrap();
    let contents: Vec<_> = memory.iter().filter_map(|v| v.content.clone()).collect();
    assert_eq!(contents[contents.len() - 41..], expected[..]);
    let middle = memory[memory.len() - 20].id;
    dana.redact(middle).unwrap().unwrap();
    let out = dana
        .execute_json(&json!({"command": "delete", "path": path}))
        .unwrap();
    assert!(!out.is_error, "{}", out.content);
    let after = dana.versions(
        &memkv::VersionFilter {
            memory: Some(memory[0].memory),
            ..Default::default()
        },
        None,
        1000,
        true,
    );
    let after = after.unwrap().unwrap().items;
    for (before, now) in memory.iter().zip(&after) {
        let redacted = before.id == middle;
        assert_eq!(
            now.content.is_none(),
            redacted || before.content.is_none(),
            "{}",
            now.id
        );
        if !redacted {
            assert_eq!(now.content, before.content, "{}", now.id);
        }
    }
    assert_eq!(after.last().unwrap().operation, memkv::Operation::Deleted);
    assert_eq!(store.check().unwrap(), Vec::<(String, String)>::new());
}

fn fixture(name: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join(name);
    std::fs::copy(
        format!("{}/tests/data/{name}", env!("CARGO_MANIFEST_DIR")),
        &db,
    )
    .unwrap();
    (dir, db)
}

/// Format 7 added the change log. A format-6 database (`format-v6.redb`, the format-5 fixture
/// migrated by the format-6 build) migrates with an empty log: its first write is entry 1, and
/// what came before is in the history, not the log.
#[test]
fn format_v6_database_opens_and_starts_its_change_log() {
    old_format_reads_back("format-v6.redb");
    let (_dir, db) = fixture("format-v6.redb");
    let store = Database::builder().open_existing(&db).unwrap();
    assert_eq!(store.last_change().unwrap(), 0);
    assert!(store.changes(0, 10, None).unwrap().entries.is_empty());
    let out = store
        .user("bob@example.com")
        .unwrap()
        .execute_json(&json!({"command": "create", "path": "/memories/new.md", "file_text": "x"}))
        .unwrap();
    assert!(!out.is_error, "{}", out.content);
    let page = store.changes(0, 10, None).unwrap();
    assert_eq!(page.entries.len(), 1);
    assert_eq!(page.entries[0].seq, 1);
    assert_eq!(
        page.entries[0].change.kind,
        memkv::ChangeKind::MemoryCreated
    );
    assert!(store.webhooks().unwrap().is_empty());
    assert_eq!(store.check().unwrap(), Vec::<(String, String)>::new());
}

/// Format 8 added the API keys. A format-7 database (`format-v7.redb`, the format-6 fixture
/// migrated by the format-7 build, which then created `/memories/v7.md` for bob, change 1)
/// migrates with no keys, its change log kept, and takes keys.
#[test]
fn format_v7_database_opens_keeps_its_change_log_and_takes_keys() {
    let (_dir, db) = fixture("format-v7.redb");
    let store = Database::builder().open_existing(&db).unwrap();
    let users: Vec<(String, u64, u64)> = store
        .users()
        .unwrap()
        .into_iter()
        .map(|u| (u.user, u.files, u.bytes))
        .collect();
    // The fixtures' data, and bob's file of the format-7 build.
    assert_eq!(
        users,
        [
            ("bob@example.com".to_owned(), 2, 34),
            ("dana".to_owned(), 3, 474)
        ]
    );
    assert_eq!(
        store
            .user("bob@example.com")
            .unwrap()
            .read_file("/memories/v7.md")
            .unwrap()
            .as_deref(),
        Some("written by the format-7 build\n")
    );
    assert_eq!(store.last_change().unwrap(), 1);
    let page = store.changes(0, 10, None).unwrap();
    assert_eq!(page.entries.len(), 1);
    assert_eq!(
        page.entries[0].change.path.as_deref(),
        Some("/memories/v7.md")
    );
    // Format 9 numbered the entry in bob's own feed, and the next write goes on from it.
    let bob = store.user("bob@example.com").unwrap();
    let own = bob.changes(0, 10).unwrap();
    assert_eq!(own.entries.len(), 1);
    assert_eq!((own.entries[0].seq, own.next_after), (1, 1));
    assert_eq!(own.entries[0].change, page.entries[0].change);
    assert!(
        store
            .user("dana")
            .unwrap()
            .changes(0, 10)
            .unwrap()
            .entries
            .is_empty()
    );
    let input =
        serde_json::json!({"command": "create", "path": "/memories/v9.md", "file_text": "x"});
    assert!(!bob.execute_json(&input).unwrap().is_error);
    assert_eq!(bob.changes(1, 10).unwrap().entries[0].seq, 2);
    assert_eq!(store.last_change().unwrap(), 2);
    assert!(store.api_keys().unwrap().is_empty());
    let (added, _) = store
        .add_key(&memkv::NewKey::new(memkv::KeyScope::Admin))
        .unwrap();
    assert_eq!(store.api_keys().unwrap(), vec![added]);
    assert_eq!(store.check().unwrap(), Vec::<(String, String)>::new());
    drop(store);
    let reopened = Database::builder().open_read_only(&db).unwrap();
    assert_eq!(reopened.api_keys().unwrap().len(), 1);
}

fn old_format_reads_back(name: &str) {
    let (_dir, db) = fixture(name);
    reads_back_at(db.as_os_str());
}

/// The database at `db` (a path or a URL) holds the fixtures' data in an older format: it opens,
/// migrates, reads back, takes writes, and reopens read-only in today's format.
fn reads_back_at(db: &std::ffi::OsStr) {
    let store = Database::builder().open_existing(db).unwrap();
    assert_eq!(store.check().unwrap(), Vec::<(String, String)>::new());
    let users: Vec<(String, u64, u64)> = store
        .users()
        .unwrap()
        .into_iter()
        .map(|u| (u.user, u.files, u.bytes))
        .collect();
    assert_eq!(
        users,
        [
            ("bob@example.com".to_owned(), 1, 4),
            ("dana".to_owned(), 3, 474)
        ]
    );
    let dana = store.user("dana").unwrap();
    let out = dana
        .execute_json(&json!({"command": "view", "path": "/memories"}))
        .unwrap();
    assert_eq!(
        out.content,
        "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items and node_modules:\n474B\t/memories\n364B\t/memories/projects/\n364B\t/memories/projects/ledger/\n110B\t/memories/user_profile.md"
    );
    let decisions = dana
        .read_file("/memories/projects/ledger/decisions.md")
        .unwrap()
        .unwrap();
    assert!(
        decisions.ends_with("3. Currency codes are ISO 4217 strings, validated at the API edge.\n")
    );
    let bob = store.user("bob@example.com").unwrap();
    // The migration computed each file's SHA-256.
    let files = bob.files().unwrap();
    assert_eq!(
        files[0].sha256,
        "1a1707bb54e5fb4deddd19f07adcb4f1e022ca7879e3c8348da8d4fa496ae8e2"
    );
    assert_eq!(
        bob.read_file("/memories/cafe\u{301}/n.md")
            .unwrap()
            .unwrap(),
        "bob\n"
    );
    // And it is writable, and stays consistent.
    let out = bob
        .execute_json(&json!({"command": "delete", "path": "/memories/caf\u{e9}"}))
        .unwrap();
    assert!(!out.is_error, "{}", out.content);
    let out = dana
        .execute_json(&json!({"command": "rename", "old_path": "/memories/projects", "new_path": "/memories/archive"}))
        .unwrap();
    assert!(!out.is_error, "{}", out.content);
    assert_eq!(store.check().unwrap(), Vec::<(String, String)>::new());
    // Reopened, it is in today's format and needs nothing more.
    drop(store);
    let store = Database::builder().open_read_only(db).unwrap();
    assert_eq!(store.users().unwrap().len(), 1);
}

/// The format-4 fixture's records, copied byte for byte into PostgreSQL and stamped layout 4,
/// migrate there as they do in redb: the migration runs over the seam on every backend.
#[test]
fn format_v4_data_migrates_on_postgres_too() {
    use memkv::storage::postgres::{Access, PgBackend};
    use memkv::storage::redb::RedbBackend;
    use memkv::storage::{Backend, Finish, ReadTxn, Space, WriteTxn};
    use std::ops::ControlFlow;

    let Some(cluster) = crate::util::pg::cluster() else {
        return;
    };
    let (_dir, db) = fixture("format-v4.redb");
    let source = RedbBackend::open(&db, false).unwrap();
    let read = source.begin_read().unwrap();
    assert_eq!(read.layout_version().unwrap(), 4);
    let mut entries = Vec::new();
    for space in Space::ALL {
        let mut users = Vec::new();
        read.users(space, &mut |u| {
            users.push(u.to_owned());
            Ok(ControlFlow::Continue(()))
        })
        .unwrap();
        for user in users {
            read.scan(space, &user, &[], None, &mut |k, v| {
                entries.push((space, user.clone(), k.to_vec(), v.to_vec()));
                Ok(ControlFlow::Continue(()))
            })
            .unwrap();
        }
    }
    assert!(entries.len() > 10);
    let url = cluster.fresh_url();
    let target = PgBackend::connect(&url, Access::Create).unwrap();
    target
        .write(&[], |txn: &mut dyn WriteTxn| {
            for (space, user, k, v) in &entries {
                txn.put(*space, user, k, v)?;
            }
            txn.set_layout_version(4)?;
            Ok(((), Finish::Commit))
        })
        .unwrap();
    drop(target);
    reads_back_at(std::ffi::OsStr::new(&url));
    let store = Database::open(&url).unwrap();
    let dana = store.user("dana").unwrap();
    // Three `created` by the migration, then the two files the rename in `reads_back_at` moved.
    let ops: Vec<_> = dana
        .history(None)
        .unwrap()
        .unwrap()
        .iter()
        .map(|v| v.operation)
        .collect();
    use memkv::Operation::{Created, Modified};
    assert_eq!(ops, [Created, Created, Created, Modified, Modified]);
    assert_eq!(store.check().unwrap(), Vec::<(String, String)>::new());
}

#[test]
fn an_old_format_is_refused_read_only_with_a_clear_error() {
    let (_dir, db) = fixture("format-v1.redb");
    let err = Database::builder().open_read_only(&db).unwrap_err();
    assert!(
        matches!(err, memkv::Error::NeedsMigration { found: 1, .. }),
        "{err}"
    );
    assert!(
        err.to_string().contains("open it once for writing"),
        "{err}"
    );
    // The refusal changed nothing: a writer still migrates it.
    drop(Database::builder().open_existing(&db).unwrap());
    let store = Database::builder().open_read_only(&db).unwrap();
    assert_eq!(store.users().unwrap().len(), 2);
}

/// Flips one byte of the stored content of `path` (same length), through redb itself.
pub fn damage_content(db: &std::path::Path, user: &str, content_key: &[u8]) {
    use redb::ReadableTable;
    let table: redb::TableDefinition<&[u8], &[u8]> = redb::TableDefinition::new("memkv_data");
    let mut key = (user.len() as u32).to_be_bytes().to_vec();
    key.extend_from_slice(user.as_bytes());
    key.push(4); // the Contents space
    key.extend_from_slice(content_key);
    let db = redb::Database::open(db).unwrap();
    let w = db.begin_write().unwrap();
    {
        let mut t = w.open_table(table).unwrap();
        let mut value = t.get(key.as_slice()).unwrap().unwrap().value().to_vec();
        value[0] ^= 0x01; // 'h' -> 'i': still UTF-8, same size
        t.insert(key.as_slice(), value.as_slice()).unwrap();
    }
    w.commit().unwrap();
}

#[test]
fn check_finds_content_that_no_longer_matches_its_hash() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let store = Database::open(&db).unwrap();
    let out = store
        .user("u")
        .unwrap()
        .execute_json(
            &json!({"command": "create", "path": "/memories/a/notes.md", "file_text": "hello\n"}),
        )
        .unwrap();
    assert!(!out.is_error);
    assert_eq!(
        store.user("u").unwrap().files().unwrap()[0].sha256,
        "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03"
    );
    assert_eq!(store.check().unwrap(), Vec::<(String, String)>::new());
    drop(store);
    damage_content(&db, "u", b"a\x01notes.md");
    let store = Database::open(&db).unwrap();
    let problems = store.check().unwrap();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].0, "u");
    assert!(
        problems[0]
            .1
            .starts_with("the content of /memories/a/notes.md does not match its SHA-256"),
        "{problems:?}"
    );
}

/// Older versions are rebuilt from deltas and snapshots (`docs/design.md`, History): when one
/// they rely on is lost, `check` names the damage, and reading those versions is an error,
/// never a wrong content.
#[test]
fn check_finds_history_that_no_longer_rebuilds() {
    use memkv::storage::redb::RedbBackend;
    use memkv::storage::{Backend, Finish, Space, WriteTxn};
    use std::ops::ControlFlow;

    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let store = Database::open(&db).unwrap();
    let u = store.user("u").unwrap();
    let run = |input: serde_json::Value| assert!(!u.execute_json(&input).unwrap().is_error);
    run(json!({"command": "create", "path": "/memories/n.md", "file_text": "v0\n"}));
    for i in 1..40 {
        run(
            json!({"command": "str_replace", "path": "/memories/n.md", "old_str": format!("v{}", i - 1), "new_str": format!("v{i}")}),
        );
    }
    assert_eq!(store.check().unwrap(), Vec::<(String, String)>::new());
    drop(u);
    drop(store);
    // Lose the first snapshot, and with it what the deltas before it rebuild from.
    let backend = RedbBackend::open(&db, false).unwrap();
    backend
        .write(&["u"], |txn: &mut dyn WriteTxn| {
            let mut first = None;
            txn.scan(Space::Snapshots, "u", &[], None, &mut |k, _| {
                first = Some(k.to_vec());
                Ok(ControlFlow::Break(()))
            })?;
            txn.remove(Space::Snapshots, "u", &first.expect("a snapshot"))?;
            Ok(((), Finish::Commit))
        })
        .unwrap();
    drop(backend);
    let store = Database::open(&db).unwrap();
    let problems: Vec<String> = store.check().unwrap().into_iter().map(|p| p.1).collect();
    assert!(
        problems
            .iter()
            .any(|p| p.contains("snapshots are kept for")),
        "{problems:?}"
    );
    assert!(
        problems
            .iter()
            .any(|p| p.contains("the snapshot of memver_")),
        "{problems:?}"
    );
    let u = store.user("u").unwrap();
    assert!(matches!(u.history(None), Err(memkv::Error::Corrupt(_))));
    // The newest versions do not depend on it and still read.
    let latest = u.memory(memkv::MemoryId(1), true).unwrap().unwrap();
    assert_eq!(latest.content.as_deref(), Some("v39\n"));
    let newest = u.version(latest.version, true).unwrap().unwrap();
    assert_eq!(newest.content.as_deref(), Some("v39\n"));
}
