//! API keys kept in the database, on every backend: added, listed, revoked and imported all or
//! nothing; uses recorded; and what a read-only handle (a read-only key's) answers.

use memkv::{ImportedKey, KeyScope, NewKey};
use serde_json::json;

use crate::util::{each_backend, fresh, snapshot};

fn store(s: &str, read_only: bool) -> KeyScope {
    KeyScope::Store {
        store: s.into(),
        read_only,
    }
}

#[test]
fn keys_are_added_listed_revoked_and_imported() {
    each_backend(|| {
        let db = fresh().unwrap();
        assert!(db.api_keys().unwrap().is_empty());
        let changes = db.key_changes();
        let mut new = NewKey::new(store("alice", true));
        new.label = "auditor: ünïcode".into();
        new.expires_ms = Some(i64::MAX);
        let (alice, key) = db.add_key(&new).unwrap();
        assert!(db.key_changes() > changes);
        assert!(memkv::keys::valid_id(&alice.id), "{}", alice.id);
        assert_eq!(alice.scope, store("alice", true));
        assert_eq!(alice.label, "auditor: ünïcode");
        assert_eq!(alice.expires_ms, Some(i64::MAX));
        assert_eq!(alice.last_used_ms, None);
        assert_eq!(alice.sha256(), &memkv::keys::hash(&key));
        let (admin, _) = db.add_key(&NewKey::new(KeyScope::Admin)).unwrap();
        let mut listed = db.api_keys().unwrap();
        listed.sort_by(|a, b| a.id.cmp(&b.id));
        let mut want = vec![alice.clone(), admin.clone()];
        want.sort_by(|a, b| a.id.cmp(&b.id));
        assert_eq!(listed, want);
        // Keys are no store: nothing else sees them.
        assert!(db.users().unwrap().is_empty());
        assert_eq!(db.check().unwrap(), Vec::<(String, String)>::new());

        // Uses move forward only; a revoked key's use is passed over.
        db.record_key_use(&[(alice.id.clone(), 5_000), ("key_000000000000".into(), 1)])
            .unwrap();
        db.record_key_use(&[(alice.id.clone(), 4_000)]).unwrap();
        let used = db.api_keys().unwrap();
        let a = used.iter().find(|k| k.id == alice.id).unwrap();
        assert_eq!(a.last_used_ms, Some(5_000));

        // Refused: nothing added.
        for bad in [
            NewKey::new(store("", false)),
            NewKey {
                label: "a\u{7}".into(),
                ..NewKey::new(KeyScope::Admin)
            },
            NewKey {
                expires_ms: Some(1),
                ..NewKey::new(KeyScope::Admin)
            },
        ] {
            assert!(db.add_key(&bad).is_err(), "{bad:?}");
        }
        assert_eq!(db.api_keys().unwrap().len(), 2);

        assert!(db.revoke_key(&alice.id).unwrap());
        assert!(!db.revoke_key(&alice.id).unwrap());
        assert_eq!(db.api_keys().unwrap(), vec![admin.clone()]);
        // A revoked key never comes back through an import (a keys file that still holds it).
        let again = ImportedKey {
            id: alice.id.clone(),
            scope: store("alice", true),
            sha256: *alice.sha256(),
            label: String::new(),
            created_ms: alice.created_ms,
            expires_ms: None,
        };
        assert_eq!(db.import_keys(&[again]).unwrap(), 0);
        assert_eq!(db.api_keys().unwrap(), vec![admin.clone()]);

        // Imports: all or nothing, ids the database has passed over.
        let imported = ImportedKey {
            id: "key_0123456789ab".into(),
            scope: store("bob", false),
            sha256: memkv::keys::hash("mkv_legacy"),
            label: String::new(),
            created_ms: 1_000,
            expires_ms: None,
        };
        let bad = ImportedKey {
            id: "nope".into(),
            ..imported.clone()
        };
        assert!(db.import_keys(&[imported.clone(), bad]).is_err());
        assert_eq!(db.api_keys().unwrap().len(), 1);
        assert_eq!(db.import_keys(std::slice::from_ref(&imported)).unwrap(), 1);
        assert_eq!(db.import_keys(&[imported]).unwrap(), 0);
        let bob = db
            .api_keys()
            .unwrap()
            .into_iter()
            .find(|k| k.id == "key_0123456789ab")
            .unwrap();
        assert_eq!(bob.sha256(), &memkv::keys::hash("mkv_legacy"));
        assert_eq!(bob.created_ms, 1_000);
    });
}

/// A read-only handle answers `view` and search as usual and every write with the read-only
/// error, byte for byte, changing nothing; through `protocol::answer` too.
#[test]
fn a_read_only_handle_answers_writes_with_the_read_only_error() {
    each_backend(|| {
        let db = fresh().unwrap();
        let writer = db.user("dana").unwrap();
        let out = writer
            .execute_json(
                &json!({"command": "create", "path": "/memories/a.md", "file_text": "one\n"}),
            )
            .unwrap();
        assert!(!out.is_error);
        let reader = db.user("dana").unwrap().read_only(true);
        assert!(reader.is_read_only());
        let before = snapshot(&writer);
        for (name, input) in [
            (
                "create",
                json!({"command": "create", "path": "/memories/b.md", "file_text": "x"}),
            ),
            (
                "str_replace",
                json!({"command": "str_replace", "path": "/memories/a.md", "old_str": "one", "new_str": "x"}),
            ),
            (
                "insert",
                json!({"command": "insert", "path": "/memories/a.md", "insert_line": 0, "insert_text": "x"}),
            ),
            (
                "delete",
                json!({"command": "delete", "path": "/memories/a.md"}),
            ),
            (
                "rename",
                json!({"command": "rename", "old_path": "/memories/a.md", "new_path": "/memories/c.md"}),
            ),
            // The path is not looked at: the store is read-only whatever it names.
            (
                "delete",
                json!({"command": "delete", "path": "/etc/passwd"}),
            ),
        ] {
            let out = reader.execute_json(&input).unwrap();
            assert_eq!(
                out.content,
                format!(
                    "Error: This memory store is read-only for this session; the {name} command was not applied."
                ),
                "{input}"
            );
            assert!(out.is_error);
            assert_eq!(snapshot(&writer), before, "{input}");
        }
        // Input that is not a command gets the model's usual error.
        let out = reader.execute_json(&json!({"command": "nope"})).unwrap();
        assert_eq!(out.content, "Error: Unknown command: \"nope\"");
        let out = reader
            .execute_json(&json!({"command": "view", "path": "/memories/a.md"}))
            .unwrap();
        assert!(
            !out.is_error && out.content.contains("one"),
            "{}",
            out.content
        );
        let message = memkv::Message::from_json(json!([
            {"type": "tool_use", "id": "a", "name": "memory", "input": {"command": "create", "path": "/memories/z", "file_text": "z"}},
            {"type": "tool_use", "id": "b", "name": "memory_search", "input": {"query": "one"}}
        ]))
        .unwrap();
        let (response, errors) = memkv::protocol::answer(&reader, message);
        assert!(errors.is_empty());
        let memkv::Response::Results(results) = response else {
            panic!("two blocks, two results")
        };
        assert!(results[0].is_error && results[0].content.contains("read-only"));
        assert!(!results[1].is_error && results[1].content.contains("a.md"));
        assert_eq!(snapshot(&writer), before);
        // The owned handle, as the server uses it.
        let owned = std::sync::Arc::new(db);
        let o = owned.owned_user("dana").unwrap().read_only(true);
        let out = futures_lite_block_on(o.execute_async(memkv::Command::Delete {
            path: "/memories/a.md".into(),
        }))
        .unwrap();
        assert!(
            out.is_error && out.content.contains("read-only"),
            "{}",
            out.content
        );
        assert_eq!(snapshot(&owned.user("dana").unwrap()), before);
    });
}

/// Polls a future to completion on this thread (the read-only answer never waits).
fn futures_lite_block_on<F: std::future::Future>(f: F) -> F::Output {
    let waker = std::task::Waker::noop();
    let mut cx = std::task::Context::from_waker(waker);
    let mut f = std::pin::pin!(f);
    loop {
        if let std::task::Poll::Ready(out) = f.as_mut().poll(&mut cx) {
            return out;
        }
        std::thread::yield_now();
    }
}
