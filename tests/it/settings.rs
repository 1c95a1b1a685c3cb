//! Each store's own settings over the database's defaults, on every backend: quotas, time-to-live
//! and the secrets policy apply to that store's commands only; a reset goes back to the
//! default; another handle of the database sees a change once it refreshes.

use std::time::Duration;

use memkv::{Database, SecretPolicy, StoreSettings};
use serde_json::json;

use crate::util::{Clock, Fresh, each_backend, fresh, fresh_location};

fn create(db: &Database, user: &str, path: &str, text: &str) -> memkv::ToolOutput {
    db.user(user)
        .unwrap()
        .execute_json(&json!({"command": "create", "path": path, "file_text": text}))
        .unwrap()
}

#[test]
fn a_stores_own_quota_and_secrets_policy_apply_to_it_alone() {
    each_backend(|| {
        let db = fresh().unwrap();
        assert!(db.store_settings("alice").unwrap().is_default());
        let own = db
            .update_store_settings(
                "alice",
                &StoreSettings {
                    max_files: Some(2),
                    secrets: Some(SecretPolicy::Redact),
                    ..StoreSettings::default()
                },
                &[],
            )
            .unwrap();
        assert_eq!(own.max_files, Some(2));
        assert_eq!(db.store_settings("alice").unwrap(), own);
        assert_eq!(db.effective_settings("alice").unwrap().max_files, 2);
        assert_eq!(db.effective_settings("bob").unwrap().max_files, 10_000);
        // Settings before the store holds anything make no store of it.
        assert!(db.users().unwrap().is_empty());
        assert_eq!(db.check().unwrap(), Vec::<(String, String)>::new());

        for i in 0..2 {
            assert!(!create(&db, "alice", &format!("/memories/{i}"), "x").is_error);
        }
        let third = create(&db, "alice", "/memories/2", "x");
        assert_eq!(
            third.content,
            "Error: Memory quota exceeded: at most 2 files"
        );
        for i in 0..3 {
            assert!(!create(&db, "bob", &format!("/memories/{i}"), "x").is_error);
        }
        // A secret: redacted in alice's store, refused in bob's (the default).
        let token = format!("ghp_{}", "A1b2".repeat(9));
        let text = format!("token {token}\n");
        db.user("alice")
            .unwrap()
            .execute_json(&json!({"command": "delete", "path": "/memories/1"}))
            .unwrap();
        let out = create(&db, "alice", "/memories/t", &text);
        assert!(
            !out.is_error && out.content.contains("REDACTED"),
            "{}",
            out.content
        );
        assert!(create(&db, "bob", "/memories/t", &text).is_error);

        // A reset goes back to the default; a zero quota and an unknown name are refused.
        let own = db
            .update_store_settings("alice", &StoreSettings::default(), &["max_files"])
            .unwrap();
        assert_eq!(own.max_files, None);
        assert_eq!(own.secrets, Some(SecretPolicy::Redact));
        assert!(!create(&db, "alice", "/memories/3", "x").is_error);
        for bad in [
            db.update_store_settings(
                "alice",
                &StoreSettings {
                    max_files: Some(0),
                    ..StoreSettings::default()
                },
                &[],
            ),
            db.update_store_settings("alice", &StoreSettings::default(), &["colour"]),
            db.update_store_settings("", &StoreSettings::default(), &[]),
        ] {
            assert!(bad.is_err(), "{bad:?}");
        }
        assert_eq!(db.store_settings("alice").unwrap(), own);
        assert_eq!(db.stores_with_settings(), vec![("alice".to_owned(), own)]);

        // Deleting the store deletes its settings.
        assert!(db.delete_store("alice").unwrap());
        assert!(db.store_settings("alice").unwrap().is_default());
        db.refresh_store_settings().unwrap();
        assert!(db.stores_with_settings().is_empty());
    });
}

#[test]
fn a_stores_own_ttl_expires_its_files_alone() {
    each_backend(|| {
        let clock = Clock::new();
        let db = clock.builder().fresh().unwrap();
        db.update_store_settings(
            "short",
            &StoreSettings {
                ttl: Some(Some(Duration::from_secs(3600))),
                ..StoreSettings::default()
            },
            &[],
        )
        .unwrap();
        for user in ["short", "long"] {
            assert!(!create(&db, user, "/memories/a", "x").is_error);
        }
        clock.advance(2 * 3600 * 1000);
        let expired: Vec<String> = db
            .expire(false)
            .unwrap()
            .into_iter()
            .map(|f| f.user)
            .collect();
        assert_eq!(expired, ["short"]);
        assert_eq!(db.effective_settings("long").unwrap().ttl, None);
    });
}

/// Settings live in the database: another handle (another process, another server) sees them
/// once it reads them again, and a handle opened afterwards at once.
#[test]
fn another_handle_sees_settings_once_it_refreshes() {
    each_backend(|| {
        let Some(url) = fresh_location() else {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("s.redb");
            {
                let db = Database::open(&path).unwrap();
                db.update_store_settings(
                    "alice",
                    &StoreSettings {
                        max_bytes: Some(5),
                        ..StoreSettings::default()
                    },
                    &[],
                )
                .unwrap();
            }
            let again = Database::open(&path).unwrap();
            assert_eq!(again.effective_settings("alice").unwrap().max_bytes, 5);
            return;
        };
        let one = Database::open(&url).unwrap();
        let two = Database::open(&url).unwrap();
        one.update_store_settings(
            "alice",
            &StoreSettings {
                max_bytes: Some(5),
                ..StoreSettings::default()
            },
            &[],
        )
        .unwrap();
        assert_eq!(
            two.effective_settings("alice").unwrap().max_bytes,
            67_108_864
        );
        two.refresh_store_settings().unwrap();
        assert_eq!(two.effective_settings("alice").unwrap().max_bytes, 5);
        let out = create(&two, "alice", "/memories/a", "123456");
        assert_eq!(
            out.content,
            "Error: Memory quota exceeded: at most 5 bytes in total"
        );
    });
}
