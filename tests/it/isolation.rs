//! Users cannot see, change or name each other's files, whatever they send.

#[allow(unused_imports)]
use crate::util::{Fresh, each_backend, fresh};
use memkv::Error;
use proptest::prelude::*;
use serde_json::json;

#[test]
fn user_ids_are_checked_and_kept_apart_exactly() {
    each_backend(|| {
        let store = fresh().unwrap();
        for bad in ["", "a\nb", "tab\there", &"u".repeat(257)] {
            assert!(
                matches!(store.user(bad), Err(Error::InvalidUser { .. })),
                "{bad:?}"
            );
        }
        // Ids that look like paths, prefixes of each other, or differ only in normalization.
        let ids = [
            "a",
            "ab",
            "a@example.com",
            ".",
            "..",
            "a/b",
            "/memories",
            "caf\u{e9}",
            "cafe\u{301}",
            &"u".repeat(256),
        ];
        for (i, id) in ids.iter().enumerate() {
            let u = store.user(id).unwrap();
            let out = u
                .execute_json(
                    &json!({"command": "create", "path": "/memories/who", "file_text": format!("{i}")}),
                )
                .unwrap();
            assert!(!out.is_error, "{id:?}: {}", out.content);
        }
        for (i, id) in ids.iter().enumerate() {
            let u = store.user(id).unwrap();
            assert_eq!(
                u.read_file("/memories/who").unwrap().unwrap(),
                i.to_string(),
                "{id:?}"
            );
            assert_eq!(u.totals().unwrap(), (1, i.to_string().len() as u64));
        }
        let users: Vec<String> = store.users().unwrap().into_iter().map(|u| u.user).collect();
        let mut want: Vec<String> = ids.iter().map(|s| s.to_string()).collect();
        want.sort();
        assert_eq!(want.len(), 10);
        assert_eq!(users, want);
    });
}

fn hostile_path() -> impl Strategy<Value = String> {
    prop_oneof![
        "/memories/[a-z]{1,3}(/[a-z]{1,3}){0,2}",
        "/memories/(\\.\\.|%2e%2e|%252e|\\.)/[a-z]{1,3}",
        "/memories/[a-z]{1,3}(/|\\\\|%2f|%5c|//)[a-z]{1,3}",
        "(\\.\\./)+[a-z]{1,3}",
        "/[a-z]{1,8}/[a-z]{1,3}",
        "/memories/bob/[a-z]{1,3}",
        "\\PC{0,12}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Whatever alice writes, under whatever spelling, bob's tree stays exactly as it was.
    #[test]
    fn nothing_alice_sends_reaches_bob(paths in prop::collection::vec(hostile_path(), 1..12)) {
        for backend in crate::util::backends() {
            let _on = crate::util::using(backend);
            let store = fresh().unwrap();
            let alice = store.user("alice").unwrap();
            let bob = store.user("bob").unwrap();
            bob.execute_json(&json!({"command": "create", "path": "/memories/secret", "file_text": "TOPSECRET"})).unwrap();
            let before = bob.files().unwrap();
            for p in &paths {
                for input in [
                    json!({"command": "create", "path": p, "file_text": "alice"}),
                    json!({"command": "view", "path": p}),
                    json!({"command": "str_replace", "path": p, "old_str": "SECRET", "new_str": "x"}),
                    json!({"command": "insert", "path": p, "insert_line": 0, "insert_text": "x"}),
                    json!({"command": "rename", "old_path": p, "new_path": "/memories/stolen"}),
                    json!({"command": "rename", "old_path": "/memories/secret", "new_path": p}),
                    json!({"command": "delete", "path": p}),
                ] {
                    let out = alice.execute_json(&input).unwrap();
                    prop_assert!(!out.content.contains("TOPSECRET"), "{}", out.content);
                }
            }
            prop_assert_eq!(bob.files().unwrap(), before);
            prop_assert_eq!(bob.read_file("/memories/secret").unwrap().unwrap(), "TOPSECRET");
            // And every file alice ended up with lies inside her own /memories.
            for f in alice.files().unwrap() {
                prop_assert!(f.path.to_string().starts_with("/memories/"));
            }
        }
    }
}
