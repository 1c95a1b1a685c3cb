//! PROTOCOL.md through MCP: tests/it/golden.rs, the library's table of golden cases, compiled
//! here with a `Session` whose every command is a `tools/call` of rmcp's own client to `/mcp` on
//! a real server over loopback (streamable HTTP).

mod util;

#[path = "../../../../tests/it/golden.rs"]
mod table;

/// `memory_search` over MCP on both backends: every answer byte for byte the library's.
#[test]
fn memory_search_over_mcp_answers_as_the_library() {
    use serde_json::json;
    use util::Fresh;
    util::each_backend(|| {
        let session = util::Session::new(memkv::Database::builder().fresh().unwrap());
        for (path, text) in [
            (
                "/memories/notes/tz.md",
                "# Time\nlives in Paris\nTZ: Europe/Paris\n",
            ),
            ("/memories/trips.md", "Rome in May\nParis in June\n"),
        ] {
            let created =
                session.answer(json!({"command": "create", "path": path, "file_text": text}));
            assert_eq!(created["is_error"], false, "{created}");
        }
        for input in [
            json!({"query": "paris europe"}),
            json!({"query": "Paris", "mode": "literal", "context": 1}),
            json!({"query": "^tz", "mode": "regex", "case_insensitive": true, "path_prefix": "/memories/notes"}),
            json!({"query": "(", "mode": "regex"}),
            json!({"query": "london"}),
            json!({"query": "x", "glob": "*"}),
        ] {
            let want = session.user().answer_search(&input).unwrap();
            assert_eq!(
                session.search(input.clone()),
                json!({"content": want.content, "is_error": want.is_error}),
                "{input}"
            );
        }
        assert!(
            session.search(json!({"query": "paris europe"}))["content"]
                .as_str()
                .unwrap()
                .starts_with("/memories/notes/tz.md (score 0.92)\n")
        );
    });
}

#[test]
fn mcp_writes_reach_the_commit_hooks() {
    use memkv::ChangeKind::{MemoryCreated, MemoryDeleted};
    use util::Fresh;
    util::each_backend(|| {
        let seen = std::sync::Arc::new(util::Seen::default());
        let store = memkv::Database::builder()
            .commit_hook(seen.clone())
            .fresh()
            .unwrap();
        let session = util::Session::new(store);
        let user = session.user().id().to_owned();
        session.answer(
            serde_json::json!({"command": "create", "path": "/memories/a", "file_text": "a"}),
        );
        session.answer(serde_json::json!({"command": "view", "path": "/memories"}));
        session.answer(serde_json::json!({"command": "delete", "path": "/memories/a"}));
        let changes: Vec<_> = seen
            .take()
            .into_iter()
            .map(|(kind, store, path, _)| (kind, store, path))
            .collect();
        let a = Some("/memories/a".to_string());
        assert_eq!(
            changes,
            [
                (MemoryCreated, user.clone(), a.clone()),
                (MemoryDeleted, user, a)
            ]
        );
    });
}
