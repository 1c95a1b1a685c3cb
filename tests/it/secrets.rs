//! The secrets guard on every write path.

use memkv::{SecretPolicy, Store};
use serde_json::json;

const KEY: &str = "AKIAIOSFODNN7EXAMPLE";

fn run(store: &Store, input: serde_json::Value) -> (String, bool) {
    let out = store.user("u").unwrap().execute_json(&input).unwrap();
    (out.content, out.is_error)
}

#[test]
fn reject_is_the_default_on_every_write() {
    let store = Store::in_memory().unwrap();
    let refused = "Error: The content appears to contain a secret (AWS access key). Secrets must not be stored in memory; remove it and try again.".to_owned();
    assert_eq!(
        run(
            &store,
            json!({"command": "create", "path": "/memories/a", "file_text": format!("id {KEY}")})
        ),
        (refused.clone(), true)
    );
    assert!(
        !run(
            &store,
            json!({"command": "create", "path": "/memories/a", "file_text": "line one\n"})
        )
        .1
    );
    assert_eq!(
        run(
            &store,
            json!({"command": "str_replace", "path": "/memories/a", "old_str": "one", "new_str": KEY})
        ),
        (refused.clone(), true)
    );
    assert_eq!(
        run(&store, json!({"command": "insert", "path": "/memories/a", "insert_line": 1, "insert_text": format!("token ghp_{}", "A1b2".repeat(9))})),
        ("Error: The content appears to contain a secret (GitHub token). Secrets must not be stored in memory; remove it and try again.".to_owned(), true)
    );
    assert_eq!(
        store
            .user("u")
            .unwrap()
            .read_file("/memories/a")
            .unwrap()
            .unwrap(),
        "line one\n"
    );
}

#[test]
fn redact_replaces_and_reports() {
    let store = Store::builder()
        .secrets(SecretPolicy::Redact)
        .in_memory()
        .unwrap();
    assert_eq!(
        run(&store, json!({"command": "create", "path": "/memories/a", "file_text": format!("aws {KEY}\nnext\n")})),
        ("File created successfully at: /memories/a\nNote: the content appeared to contain secrets (AWS access key); each was replaced with [REDACTED:<kind>] before saving.".to_owned(), false)
    );
    assert_eq!(
        store
            .user("u")
            .unwrap()
            .read_file("/memories/a")
            .unwrap()
            .unwrap(),
        "aws [REDACTED:AWS access key]\nnext\n"
    );
    let jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U";
    assert_eq!(
        run(&store, json!({"command": "str_replace", "path": "/memories/a", "old_str": "next", "new_str": format!("jwt {jwt}")})),
        ("The memory file has been edited. Here is the snippet showing the change (with line numbers):\n     1\taws [REDACTED:AWS access key]\n     2\tjwt [REDACTED:JSON Web Token]\nNote: the content appeared to contain secrets (JSON Web Token); each was replaced with [REDACTED:<kind>] before saving.".to_owned(), false)
    );
    // Clean edits carry no note.
    assert_eq!(
        run(
            &store,
            json!({"command": "insert", "path": "/memories/a", "insert_line": 0, "insert_text": "top"})
        ),
        ("The file /memories/a has been edited.".to_owned(), false)
    );
}

#[test]
fn off_stores_as_given() {
    let store = Store::builder()
        .secrets(SecretPolicy::Off)
        .in_memory()
        .unwrap();
    assert_eq!(
        run(
            &store,
            json!({"command": "create", "path": "/memories/a", "file_text": KEY})
        ),
        (
            "File created successfully at: /memories/a".to_owned(),
            false
        )
    );
    assert_eq!(
        store
            .user("u")
            .unwrap()
            .read_file("/memories/a")
            .unwrap()
            .unwrap(),
        KEY
    );
}
