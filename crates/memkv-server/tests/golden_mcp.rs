//! PROTOCOL.md through MCP: tests/it/golden.rs, the library's table of golden cases, compiled
//! here with a `Session` whose every command is a `tools/call` of rmcp's own client to `/mcp` on
//! a real server over loopback (streamable HTTP).

#[path = "golden_mcp/util.rs"]
mod util;

#[path = "../../../tests/it/golden.rs"]
mod golden;

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
