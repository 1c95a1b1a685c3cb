//! Databases written by earlier releases still open and read back intact.

use memkv::Store;
use serde_json::json;

/// `tests/data/format-v1.redb` was written by the first release (storage format 1) from
/// `examples/session.jsonl` as user `dana`, plus one file for `bob@example.com`.
#[test]
fn format_v1_database_opens_and_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("v1.redb");
    std::fs::copy(
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/format-v1.redb"),
        &db,
    )
    .unwrap();
    let store = Store::builder().open_existing(&db).unwrap();
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
    assert_eq!(
        bob.read_file("/memories/cafe\u{301}/n.md")
            .unwrap()
            .unwrap(),
        "bob\n"
    );
    // And it is writable.
    let out = bob
        .execute_json(&json!({"command": "delete", "path": "/memories/caf\u{e9}"}))
        .unwrap();
    assert!(!out.is_error, "{}", out.content);
}
