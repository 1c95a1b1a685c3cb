//! The change log (`Database::changes`): pages and cursors, one store's entries, retention by
//! count and by age with the cursor-expired error, and redaction scrubbing what it erased; on
//! both backends. That every face's writes are logged exactly once, in order, is checked by
//! the commit-hook tests (`hooks.rs`, `Seen::assert_logged`).

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use memkv::{ChangeKind, ChangeRetention, Database, Error};
use serde_json::json;

use crate::util::{Fresh, each_backend};

fn create(db: &Database, user: &str, path: &str, text: &str) {
    let input = json!({"command": "create", "path": path, "file_text": text});
    assert!(
        !db.user(user)
            .unwrap()
            .execute_json(&input)
            .unwrap()
            .is_error
    );
}

#[test]
fn pages_follow_the_log_and_a_store_sees_only_its_own() {
    each_backend(|| {
        let db = Database::builder().fresh().unwrap();
        assert_eq!(db.last_change().unwrap(), 0);
        assert!(db.changes(0, 10, None).unwrap().entries.is_empty());
        for i in 0..12 {
            let user = if i % 3 == 0 { "a" } else { "b" };
            create(&db, user, &format!("/memories/{i}.md"), "x");
        }
        assert_eq!(db.last_change().unwrap(), 12);
        let first = db.changes(0, 5, None).unwrap();
        let seqs: Vec<u64> = first.entries.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, [1, 2, 3, 4, 5]);
        assert_eq!(first.next_after, 5);
        let rest = db.changes(first.next_after, 100, None).unwrap();
        assert_eq!(rest.entries.len(), 7);
        assert_eq!(rest.next_after, 12);
        // Past the end: nothing, and the cursor stays.
        let end = db.changes(12, 100, None).unwrap();
        assert_eq!((end.entries.len(), end.next_after), (0, 12));
        // One store: its entries only, numbered in its own feed (1, 2, 3, 4: the log's 1, 4, 7,
        // 10), its cursor on its own entries: nothing says how much other stores wrote.
        let a = db.user("a").unwrap().changes(0, 100).unwrap();
        let seqs: Vec<u64> = a.entries.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, [1, 2, 3, 4]);
        assert_eq!(a.next_after, 4);
        assert!(a.entries.iter().all(|e| e.change.store == "a"));
        let global: Vec<_> = rest
            .entries
            .iter()
            .chain(&first.entries)
            .filter(|e| e.change.store == "a")
            .map(|e| e.change.clone())
            .collect();
        let mut own: Vec<_> = a.entries.iter().map(|e| e.change.clone()).collect();
        own.sort_by_key(|c| c.path.clone());
        let mut global = global;
        global.sort_by_key(|c| c.path.clone());
        assert_eq!(own, global, "the same entries as the log's");
        let a2 = db.user("a").unwrap().changes(0, 2).unwrap();
        assert_eq!(a2.next_after, 2);
        // b's writes move nothing of a's feed.
        create(&db, "b", "/memories/more.md", "x");
        let after = db.user("a").unwrap().changes(4, 100).unwrap();
        assert_eq!((after.entries.len(), after.next_after), (0, 4));
        assert_eq!(db.user("a").unwrap().last_change().unwrap(), 4);
        assert!(matches!(
            db.user("a").unwrap().changes(5, 10),
            Err(Error::CursorAhead { after: 5, last: 4 })
        ));
        // A store that never wrote: an empty feed.
        assert!(
            db.user("c")
                .unwrap()
                .changes(0, 10)
                .unwrap()
                .entries
                .is_empty()
        );
        // The JSON every face shows.
        let json = a.entries[0].to_json();
        assert_eq!(json["seq"], 1);
        assert_eq!(json["type"], "memory.created");
        assert_eq!(json["memory_store_id"], "a");
        assert_eq!(json["path"], "/0.md");
        assert_eq!(json["content_size_bytes"], 1);
        assert_eq!(
            json["content_sha256"],
            "2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881"
        );
        assert!(json["memory_id"].as_str().unwrap().starts_with("mem_"));
        assert!(json["created_at"].as_str().unwrap().ends_with('Z'));
        assert!(matches!(
            db.changes(0, 1, Some("bad\u{0}id")),
            Err(Error::InvalidUser { .. })
        ));
    });
}

#[test]
fn retention_trims_by_count_and_a_cursor_behind_it_expires() {
    each_backend(|| {
        let retention = ChangeRetention {
            max_age: None,
            max_entries: Some(10),
        };
        let db = Database::builder()
            .change_retention(retention)
            .fresh()
            .unwrap();
        for i in 0..150 {
            create(&db, "u", &format!("/memories/{i}.md"), "x");
        }
        // Writers trim as they go on redb (once 64 are due); elsewhere the operator's trim does.
        db.trim_changes().unwrap();
        assert_eq!(db.last_change().unwrap(), 150);
        let kept = db.changes(140, 100, None).unwrap();
        assert_eq!(kept.entries.len(), 10);
        match db.changes(0, 10, None) {
            Err(Error::CursorExpired { after: 0, trimmed }) => assert_eq!(trimmed, 140),
            other => panic!("{other:?}"),
        }
        let err = db.changes(139, 10, None).unwrap_err().to_string();
        assert!(err.contains("cursor expired"), "{err}");
        assert!(err.contains("start again from a full export"), "{err}");
        // The store's feed is trimmed with the log: the same 10 entries, numbered in it.
        let u = db.user("u").unwrap();
        assert!(matches!(
            u.changes(0, 10),
            Err(Error::CursorExpired {
                after: 0,
                trimmed: 140
            })
        ));
        let own = u.changes(140, 100).unwrap();
        assert_eq!(own.entries.len(), 10);
        assert_eq!(own.entries[0].change, kept.entries[0].change);
        // Trimming again removes nothing more; new entries keep their numbers.
        assert_eq!(db.trim_changes().unwrap(), 0);
        create(&db, "u", "/memories/new.md", "x");
        assert_eq!(db.changes(150, 10, None).unwrap().entries[0].seq, 151);
        assert_eq!(u.changes(150, 10).unwrap().entries[0].seq, 151);
    });
}

#[test]
fn retention_trims_by_age() {
    each_backend(|| {
        let t = Arc::new(Mutex::new(SystemTime::now()));
        let clock = Arc::clone(&t);
        let db = Database::builder()
            .change_retention(ChangeRetention {
                max_age: Some(Duration::from_secs(3600)),
                max_entries: None,
            })
            .clock(move || *clock.lock().unwrap())
            .fresh()
            .unwrap();
        for i in 0..5 {
            create(&db, "u", &format!("/memories/{i}.md"), "x");
        }
        *t.lock().unwrap() += Duration::from_secs(2 * 3600);
        create(&db, "u", "/memories/late.md", "x");
        assert_eq!(db.trim_changes().unwrap(), 5);
        assert!(matches!(
            db.changes(0, 10, None),
            Err(Error::CursorExpired { trimmed: 5, .. })
        ));
        let left = db.changes(5, 10, None).unwrap();
        assert_eq!(left.entries.len(), 1);
        assert_eq!(
            left.entries[0].change.path.as_deref(),
            Some("/memories/late.md")
        );
    });
}

#[test]
fn a_redaction_leaves_nothing_of_what_it_erased_in_the_log() {
    each_backend(|| {
        let db = Database::builder().fresh().unwrap();
        let u = db.user("u").unwrap();
        let m = u
            .create_memory("/memories/plain.md", "plain")
            .unwrap()
            .unwrap();
        let secret = u
            .update_memory(
                m.id,
                Some("password hunter2"),
                Some("/memories/secret-name.md"),
                None,
            )
            .unwrap()
            .unwrap();
        // Other stores' and memories' entries in between, and the memory moved on.
        create(&db, "other", "/memories/secret-name.md", "unrelated");
        u.update_memory(m.id, Some("clean"), Some("/memories/after.md"), None)
            .unwrap()
            .unwrap();
        let hash: String = secret.sha256.iter().map(|b| format!("{b:02x}")).collect();
        // The store's feed and the log's entries of the store (each a copy of the other).
        let text = |db: &Database| {
            let own = db.changes(0, 100, Some("u")).unwrap().entries;
            let all = db.changes(0, 100, None).unwrap().entries;
            own.iter()
                .chain(all.iter().filter(|e| e.change.store == "u"))
                .map(|e| e.to_json().to_string())
                .collect::<Vec<_>>()
                .join("\n")
        };
        assert!(text(&db).contains("secret-name") && text(&db).contains(&hash));
        u.redact(secret.version).unwrap().unwrap();
        let after = text(&db);
        assert!(!after.contains("secret-name"), "{after}");
        assert!(!after.contains(&hash), "{after}");
        // What was not erased stays, and the redaction has its own entry.
        assert!(
            after.contains("/plain.md") && after.contains("/after.md"),
            "{after}"
        );
        let last = db.changes(0, 100, Some("u")).unwrap().entries;
        let redacted = last.last().unwrap();
        assert_eq!(redacted.change.kind, ChangeKind::VersionRedacted);
        assert_eq!(redacted.change.version, Some(secret.version));
        // The other store's entry of the same path is its own, and stays.
        let other = db.changes(0, 100, Some("other")).unwrap().entries;
        assert_eq!(
            other[0].change.path.as_deref(),
            Some("/memories/secret-name.md")
        );
    });
}

#[test]
fn a_redaction_scrubs_the_next_entry_also_when_its_own_was_trimmed() {
    each_backend(|| {
        let db = Database::builder()
            .change_retention(ChangeRetention {
                max_age: None,
                max_entries: Some(1),
            })
            .fresh()
            .unwrap();
        let u = db.user("u").unwrap();
        let m = u.create_memory("/memories/a.md", "a").unwrap().unwrap();
        let secret = u
            .update_memory(m.id, None, Some("/memories/secret-name.md"), None)
            .unwrap()
            .unwrap();
        u.update_memory(m.id, None, Some("/memories/after.md"), None)
            .unwrap()
            .unwrap();
        db.trim_changes().unwrap();
        let kept = db.changes(db.last_change().unwrap() - 1, 10, None).unwrap();
        assert_eq!(kept.entries.len(), 1);
        assert!(
            kept.entries[0]
                .to_json()
                .to_string()
                .contains("secret-name")
        );
        u.redact(secret.version).unwrap().unwrap();
        let after = db.changes(kept.entries[0].seq - 1, 10, None).unwrap();
        let text: String = after
            .entries
            .iter()
            .map(|e| e.to_json().to_string())
            .collect();
        assert!(!text.contains("secret-name"), "{text}");
        assert!(text.contains("/after.md"), "{text}");
    });
}
