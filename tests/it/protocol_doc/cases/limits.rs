//! The store's limits, secrets, malformed and refused input, read-only stores and failures.

use memkv::protocol::{self, Message, Response};
use memkv::{Database, InvalidMessage, SecretPolicy, ToolOutput};
use serde_json::json;

use super::{Check, create, run};

/// A message as text, the template it is refused with, and the template's values.
type RawCase = (
    &'static [u8],
    &'static str,
    &'static [(&'static str, &'static str)],
);

pub(crate) fn limits(c: &Check) {
    let db = Database::builder()
        .max_file_bytes(10)
        .max_lines(3)
        .max_files(2)
        .max_bytes(15)
        .in_memory()
        .unwrap();
    let u = db.user("dana").unwrap();
    let write = |path: &str, text: &str| {
        run(
            &u,
            json!({"command": "create", "path": path, "file_text": text}),
        )
    };
    c.err(
        &write("/memories/a", "a\nb\nc\nd\ne\nf"),
        "file_too_large",
        &[("path", "/memories/a"), ("size", "11"), ("limit", "10")],
    );
    c.err(
        &write("/memories/a", "a\nb\nc\nd"),
        "too_many_lines",
        &[("path", "/memories/a"), ("max_lines", "3")],
    );
    create(c, &u, "/memories/a", "0123456789");
    c.err(
        &write("/memories/b", "123456"),
        "quota_bytes",
        &[("limit", "15")],
    );
    create(c, &u, "/memories/b", "12345");
    c.err(&write("/memories/c", ""), "quota_files", &[("limit", "2")]);
    // Edits are checked the same way.
    c.err(
        &run(
            &u,
            json!({"command": "insert", "path": "/memories/a", "insert_line": 0, "insert_text": "x"}),
        ),
        "file_too_large",
        &[("path", "/memories/a"), ("size", "12"), ("limit", "10")],
    );
}

pub(crate) fn secrets(c: &Check) {
    // A random-looking (not real) AWS access key id.
    let key = "AKIAUJZDEGXDNCF32EPF";
    let db = Database::in_memory().unwrap();
    let u = db.user("dana").unwrap();
    c.err(
        &run(
            &u,
            json!({"command": "create", "path": "/memories/a", "file_text": format!("id {key}\n")}),
        ),
        "secret",
        &[("kind", "AWS access key")],
    );
    let db = Database::builder()
        .secrets(SecretPolicy::Redact)
        .in_memory()
        .unwrap();
    let u = db.user("dana").unwrap();
    let created = c.fill("created", &[("path", "/memories/a")]);
    c.ok(
        &run(
            &u,
            json!({"command": "create", "path": "/memories/a", "file_text": format!("id {key}\n")}),
        ),
        "redacted",
        &[("message", &created), ("kinds", "AWS access key")],
    );
}

pub(crate) fn malformed_input(c: &Check) {
    let db = Database::in_memory().unwrap();
    let u = db.user("dana").unwrap();
    for (input, command) in [
        (json!({"path": "/memories"}), "null"),
        (json!({"command": null}), "null"),
        (json!({"command": "list"}), "\"list\""),
        (json!({"command": 7}), "7"),
        (json!({"command": ["view"]}), "[\"view\"]"),
        (json!("view"), "null"),
    ] {
        c.err(
            &run(&u, input),
            "unknown_command",
            &[("command_json", command)],
        );
    }
    for (input, field, command) in [
        (json!({"command": "view"}), "path", "view"),
        (
            json!({"command": "create", "path": "/etc/passwd"}),
            "file_text",
            "create",
        ),
        (
            json!({"command": "str_replace", "path": "/memories/a"}),
            "old_str",
            "str_replace",
        ),
        (
            json!({"command": "insert", "path": "/memories/a", "insert_text": "x"}),
            "insert_line",
            "insert",
        ),
        (json!({"command": "delete", "path": null}), "path", "delete"),
        (
            json!({"command": "rename", "new_path": "/memories/b"}),
            "old_path",
            "rename",
        ),
    ] {
        c.err(
            &run(&u, input),
            "missing_parameter",
            &[("field", field), ("command", command)],
        );
    }
    for (input, field, command, expected) in [
        (
            json!({"command": "view", "path": 3}),
            "path",
            "view",
            "string",
        ),
        (
            json!({"command": "str_replace", "path": "/memories/a", "old_str": "x", "new_str": false}),
            "new_str",
            "str_replace",
            "string",
        ),
        (
            json!({"command": "insert", "path": "/memories/a", "insert_line": "2", "insert_text": "x"}),
            "insert_line",
            "insert",
            "integer",
        ),
        (
            json!({"command": "insert", "path": "/memories/a", "insert_line": 2.0, "insert_text": "x"}),
            "insert_line",
            "insert",
            "integer",
        ),
    ] {
        c.err(
            &run(&u, input),
            "invalid_parameter",
            &[("field", field), ("command", command), ("type", expected)],
        );
    }
}

pub(crate) fn refused_messages(c: &Check) {
    let db = Database::in_memory().unwrap();
    let u = db.user("dana").unwrap();
    let refused = |text: &[u8]| match Message::parse(text) {
        Err(e) => (e.clone(), e.output()),
        Ok(m) => panic!("{m:?} was not refused"),
    };
    let (e, out) = refused(b"{\"command\": ");
    let InvalidMessage::Json(reason) = e else {
        panic!("{e:?}")
    };
    assert!(!reason.is_empty());
    c.err(&out, "invalid_json", &[("reason", &reason)]);
    c.err(
        &InvalidMessage::TooLong { limit: 1_228_864 }.output(),
        "invalid_json_too_long",
        &[("limit", "1228864")],
    );
    let cases: [RawCase; 7] = [
        (
            br#"{"type": "tool_use", "name": "memory", "input": {}}"#,
            "block_missing",
            &[("field", "id")],
        ),
        (
            br#"{"type": "tool_use", "id": "t1", "input": {}}"#,
            "block_missing",
            &[("field", "name")],
        ),
        (
            br#"{"type": "tool_use", "id": "", "name": "memory", "input": {}}"#,
            "block_empty_id",
            &[],
        ),
        (
            br#"{"type": "tool_use", "id": 7, "name": "memory", "input": {}}"#,
            "block_not_a_string",
            &[("field", "id")],
        ),
        (b"[]", "block_empty_array", &[]),
        (
            br#"[{"type": "tool_use", "id": "t1", "name": "memory", "input": {}}, {"command": "view"}]"#,
            "block_not_a_block",
            &[("i", "1")],
        ),
        (
            br#"[{"type": "tool_use", "id": "t1", "name": "memory", "input": {}}, {"type": "tool_use", "id": "t2", "name": false}]"#,
            "block_element",
            &[("i", "1"), ("reason", "`name` must be a string")],
        ),
    ];
    for (text, id, values) in cases {
        c.err(&refused(text).1, id, values);
    }
    // Another tool's block is answered in its own tool_result.
    let message = Message::from_json(
        json!({"type": "tool_use", "id": "t1", "name": "bash", "input": {"command": "ls"}}),
    )
    .unwrap();
    let (response, errors) = protocol::answer(&u, message);
    assert!(errors.is_empty());
    let Response::Result(result) = response else {
        panic!("{response:?}")
    };
    assert_eq!(result.tool_use_id, "t1");
    c.err(
        &ToolOutput {
            content: result.content,
            is_error: result.is_error,
        },
        "unknown_tool",
        &[("name_json", "\"bash\"")],
    );
}

pub(crate) fn read_only_and_failures(c: &Check) {
    let db = Database::in_memory().unwrap();
    create(c, &db.user("dana").unwrap(), "/memories/a.md", "x");
    let reader = db.user("dana").unwrap().read_only(true);
    for (command, input) in [
        (
            "create",
            json!({"command": "create", "path": "/memories/b.md", "file_text": "x"}),
        ),
        (
            "rename",
            json!({"command": "rename", "old_path": "/memories/a.md", "new_path": "/memories/c.md"}),
        ),
    ] {
        c.err(
            &run(&reader, input),
            "read_only_store",
            &[("command", command)],
        );
    }
    db.archive_store("dana").unwrap().unwrap();
    let u = db.user("dana").unwrap();
    for input in [
        json!({"command": "create", "path": "/memories/b.md", "file_text": "x"}),
        json!({"command": "delete", "path": "/memories/a.md"}),
    ] {
        c.err(&run(&u, input), "store_archived", &[]);
    }
    // A call left without a result is answered as a storage failure.
    let message = Message::from_json(json!({"command": "view", "path": "/memories"})).unwrap();
    let (response, errors) = message.respond(Vec::new());
    assert_eq!(errors.len(), 1);
    let Response::Output(out) = response else {
        panic!("{response:?}")
    };
    c.err(&out, "storage_failure", &[]);
}
