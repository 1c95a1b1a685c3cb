//! `memkv serve` as a process: started on a free loopback port, driven over real sockets.

mod backup;
#[path = "../../../../memkv-server/tests/server/client/mod.rs"]
pub(crate) mod client;
mod keys;
#[cfg(target_os = "linux")]
mod pinning;
pub(crate) mod proc;
mod protection;

use std::process::Stdio;

use serde_json::{Value, json};

use client::{Client, encode};
use proc::{Served, memkv, temp_db};

pub(crate) fn exec(db: &std::path::Path, user: &str, input: &[u8]) -> String {
    use std::io::Write;
    let mut child = memkv(db)
        .args(["exec", "--user", user])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Each non-blank line of `input` POSTed in turn; the bodies, one per line.
pub(crate) fn over_http(client: &mut Client, store: &str, input: &str) -> String {
    let mut out = String::new();
    for line in input.lines().filter(|l| !l.trim().is_empty()) {
        let reply = client.tool(store, line.as_bytes());
        assert_eq!(reply.status, 200, "{line}: {}", reply.text());
        out.push_str(reply.text());
        out.push('\n');
    }
    out
}

pub(crate) fn data(path: &str) -> String {
    std::fs::read_to_string(format!("{}/../../{path}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

/// The recorded sessions: the README's (against its golden transcript) and the agent
/// benchmark's, through `memkv exec` and through HTTP, byte for byte the same.
#[test]
fn recorded_sessions_are_byte_identical_through_exec_and_http() {
    let (_dir, db) = temp_db();
    let server = Served::start(&db, &["--no-auth"]);
    let mut client = Client::new(server.addr);
    let session = data("examples/session.jsonl");
    assert_eq!(
        over_http(&mut client, "dana", &session),
        data("tests/data/session.expected.jsonl")
    );
    let agent = data("benches/data/agent-session.jsonl");
    let http = over_http(&mut client, "agent", &agent);
    drop(server);
    let (_dir2, db2) = temp_db();
    assert_eq!(http, exec(&db2, "agent", agent.as_bytes()));
    assert_eq!(http.lines().count(), 152);
}

#[test]
fn health_and_readiness_and_errors_in_the_envelope() {
    let (_dir, db) = temp_db();
    let server = Served::start(&db, &["--no-auth"]);
    let mut c = Client::new(server.addr);
    let r = c.get("/healthz");
    assert_eq!((r.status, r.text()), (200, "ok\n"));
    assert!(r.header("request-id").unwrap().starts_with("req_"));
    let r = c.get("/readyz");
    assert_eq!((r.status, r.text()), (200, "ready\n"));
    let r = c.get("/nope");
    assert_eq!(
        (r.status, r.error_type().as_str()),
        (404, "not_found_error")
    );
    let r = c.get("/v1/memory_stores/a/tool");
    assert_eq!(
        (r.status, r.error_type().as_str()),
        (405, "invalid_request_error")
    );
    let post = |c: &mut Client, ctype: &str, body: &str| {
        c.send(
            "POST",
            "/v1/memory_stores/a/tool",
            &[("content-type", ctype)],
            body.as_bytes(),
        )
        .unwrap()
    };
    // Refused messages are 400 with the protocol's reason; nothing runs.
    for (ctype, body, message) in [
        (
            "application/json",
            "{not json",
            "key must be a string at line 1 column 2",
        ),
        (
            "application/json",
            r#"[{"type":"tool_use","id":"ok","name":"memory","input":{"command":"create","path":"/memories/x","file_text":"x"}},{"type":"tool_use","name":"memory"}]"#,
            "element 1: `id` is missing",
        ),
        (
            "application/json",
            "[]",
            "an array of tool_use blocks must not be empty",
        ),
        (
            "text/plain",
            r#"{"command":"view","path":"/memories"}"#,
            "content-type must be application/json",
        ),
    ] {
        let r = post(&mut c, ctype, body);
        assert_eq!(r.status, 400, "{body}");
        assert_eq!(r.error_type(), "invalid_request_error");
        assert_eq!(r.json()["error"]["message"], message);
    }
    let r = post(
        &mut c,
        "application/json; charset=utf-8",
        r#"{"command":"view","path":"/memories/x"}"#,
    );
    assert_eq!(
        r.json(),
        json!({"content": "The path /memories/x does not exist. Please provide a valid path.", "is_error": true})
    );
    // Model mistakes are 200 with is_error.
    let r = post(&mut c, "application/json", r#"{"command":"launch"}"#);
    assert_eq!(r.status, 200);
    assert_eq!(
        r.text(),
        r#"{"content":"Error: Unknown command: \"launch\"","is_error":true}"#
    );
    let r = post(
        &mut c,
        "application/json",
        r#"{"command":"create","path":"/memories/m.md","file_text":"private words"}"#,
    );
    assert_eq!(r.status, 200);

    // Metrics: requests by route and status, latency, commits, stores, files, bytes.
    let m = c.get("/metrics");
    assert_eq!(m.status, 200);
    let text = m.text();
    for line in [
        r#"memkv_http_requests_total{route="/healthz",status="200"} 1"#,
        r#"memkv_http_requests_total{route="/v1/memory_stores/{store}/tool",status="200"} 3"#,
        r#"memkv_http_requests_total{route="/v1/memory_stores/{store}/tool",status="400"} 4"#,
        r#"memkv_http_requests_total{route="/v1/memory_stores/{store}/tool",status="405"} 1"#,
        r#"memkv_http_requests_total{route="unmatched",status="404"} 1"#,
        r#"memkv_http_request_duration_seconds_count{route="/v1/memory_stores/{store}/tool"} 8"#,
        r#"memkv_commands_total{command="create"} 1"#,
        "memkv_commits_total 1",
        "memkv_committed_commands_total 1",
        "memkv_stores 1",
        "memkv_files 1",
        "memkv_bytes 13",
    ] {
        assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
    }
    // One structured log line per request: id, route, store, commands, status, duration;
    // never contents.
    let log = server.log_with(|l| l.contains("commands=\"create\""));
    let line = log
        .lines()
        .find(|l| l.contains("commands=\"create\""))
        .unwrap_or_else(|| panic!("{log}"));
    for field in [
        "request_id=req_",
        "route=\"/v1/memory_stores/{store}/tool\"",
        "store=\"a\"",
        "status=200",
        "duration_us=",
    ] {
        assert!(line.contains(field), "{field} in {line}");
    }
    assert!(!log.contains("private words"));
}

/// No id, path or encoding trick reaches another store: a store key gets the same 404 for
/// every store but its own, whether it exists or not; with an admin key, each spelling is its
/// own store, exactly as `exec --user` names it.
#[test]
fn isolation_by_every_path_id_and_encoding_trick() {
    let (_dir, db) = temp_db();
    let alice_key = proc::add_key(&db, &["--store", "alice"]);
    let admin_key = proc::add_key(&db, &["--admin"]);
    let server = Served::start(&db, &[]);
    let mut admin = Client::with_key(server.addr, &admin_key);
    let mut alice = Client::with_key(server.addr, &alice_key);
    let create = |path: &str| {
        json!({"command": "create", "path": path, "file_text": "secret\n"})
            .to_string()
            .into_bytes()
    };
    assert_eq!(admin.tool("bob", &create("/memories/b.md")).status, 200);
    assert_eq!(alice.tool("alice", &create("/memories/a.md")).status, 200);

    let view = br#"{"command":"view","path":"/memories"}"#;
    let long = "a".repeat(300);
    let missing = alice
        .send(
            "POST",
            "/v1/memory_stores/nobody/tool",
            &[("content-type", "application/json")],
            view,
        )
        .unwrap();
    assert_eq!(missing.status, 404);
    let raw_targets = [
        "/v1/memory_stores/bob/tool".to_owned(),
        "/v1/memory_stores/alice%2F..%2Fbob/tool".into(),
        "/v1/memory_stores/alice%2f..%2fbob/tool".into(),
        "/v1/memory_stores/..%2Fbob/tool".into(),
        "/v1/memory_stores/alice%252F..%252Fbob/tool".into(),
        "/v1/memory_stores/%2Falice/tool".into(),
        "/v1/memory_stores/alice%2F/tool".into(),
        "/v1/memory_stores/alice%00/tool".into(),
        "/v1/memory_stores/alice%20/tool".into(),
        "/v1/memory_stores/ALICE/tool".into(),
        "/v1/memory_stores/%61lice%2F/tool".into(),
        "/v1/memory_stores/alic%C3%A9/tool".into(),
        "/v1/memory_stores/alice%C3%A9/tool".into(),
        "/v1/memory_stores/%E2%80%8Balice/tool".into(),
        "/v1/memory_stores/%FF%FE/tool".into(),
        "/v1/memory_stores/../tool".into(),
        "/v1/memory_stores/%2E%2E/tool".into(),
        "/v1/memory_stores/./tool".into(),
        "/v1/memory_stores/alice/../bob/tool".into(),
        "/v1/memory_stores/bob/../alice/tool".into(),
        "/v1/memory_stores//tool".into(),
        "/v1/memory_stores/alice/tool/../../bob/tool".into(),
        "/v1/memory_stores/alice;bob/tool".into(),
        format!("/v1/memory_stores/{long}/tool"),
        format!("/v1/memory_stores/{}/tool", "%41".repeat(5000)),
    ];
    for target in &raw_targets {
        let r = alice
            .send(
                "POST",
                target,
                &[("content-type", "application/json")],
                view,
            )
            .unwrap();
        assert_eq!(r.status, 404, "{target}: {}", r.text());
        assert_eq!(r.body, missing.body, "{target}");
        let mut names: Vec<_> = r.headers.iter().map(|(n, _)| n.as_str()).collect();
        let mut want: Vec<_> = missing.headers.iter().map(|(n, _)| n.as_str()).collect();
        names.sort_unstable();
        want.sort_unstable();
        assert_eq!(names, want, "{target}");
    }
    // Bob's store is as it was; alice's key still works on alice.
    let r = admin.tool("bob", view);
    assert_eq!(
        r.json()["content"],
        "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items and node_modules:\n7B\t/memories\n7B\t/memories/b.md"
    );
    assert_eq!(alice.tool("alice", view).status, 200);

    // Admin: every spelling is its own store, named exactly as exec --user names it.
    let ids = [
        "a/b",
        "a",
        "b",
        "..",
        ".",
        "a%2Fb",
        "caf\u{e9}",
        "cafe\u{301}",
        "x y",
        "\u{1F600}",
        "team/../bob",
    ];
    for (i, id) in ids.iter().enumerate() {
        let r = admin.tool(id, &create(&format!("/memories/{i}")));
        assert_eq!(r.status, 200, "{id}: {}", r.text());
    }
    // Dots sent raw: clients that normalize paths would change them, so encode them (%2E).
    let r = admin
        .send(
            "POST",
            "/v1/memory_stores/%2E%2E/tool",
            &[("content-type", "application/json")],
            view,
        )
        .unwrap();
    assert!(
        r.json()["content"]
            .as_str()
            .unwrap()
            .ends_with("/memories/3")
    );
    for (i, id) in ids.iter().enumerate() {
        let listing = admin.tool(id, view).json()["content"]
            .as_str()
            .unwrap()
            .to_owned();
        let files: Vec<_> = listing.lines().skip(2).collect();
        assert_eq!(files, [format!("7B\t/memories/{i}")], "{id}");
    }
    // Ids exec refuses are refused here too (400 to an admin, 404 to a store key).
    for id in ["", &"x".repeat(257), "a\u{7}"] {
        let target = format!("/v1/memory_stores/{}/tool", encode(id));
        let r = admin
            .send(
                "POST",
                &target,
                &[("content-type", "application/json")],
                view,
            )
            .unwrap();
        assert!(matches!(r.status, 400 | 404), "{id:?}: {}", r.status);
    }
    drop(server);
    // Each store holds exactly what was written to it, seen by exec after the server stopped.
    let out = exec(&db, "a/b", view);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert!(v["content"].as_str().unwrap().ends_with("/memories/0"));
}

/// GET /openapi.json documents exactly the routes the server serves: each documented operation
/// is routed (never 404 or 405, on a store and memory that exist), every other method on its
/// path is 405, and the document is OpenAPI 3.1.
#[test]
fn the_openapi_document_matches_the_router() {
    let (_dir, db) = temp_db();
    let admin = proc::add_key(&db, &["--admin"]);
    let server = Served::start(&db, &[]);
    let mut c = Client::with_key(server.addr, &admin);
    let doc = c.get("/openapi.json").json();
    assert_eq!(doc["openapi"], "3.1.0");
    let paths = doc["paths"].as_object().unwrap();
    assert_eq!(paths.len(), 25);
    for (n, (path, item)) in paths.iter().enumerate() {
        let methods: Vec<String> = item.as_object().unwrap().keys().cloned().collect();
        for method in ["get", "post", "put", "delete", "patch"] {
            // A store with one memory for each request (some requests archive or delete it).
            let store = format!("s{n}{method}");
            let (memory, version) = store_with_a_memory(&mut c, &store);
            // A webhook endpoint, on a loopback port nothing listens on.
            let hook = c
                .send(
                    "POST",
                    "/v1/webhooks",
                    &[("content-type", "application/json")],
                    br#"{"url":"http://127.0.0.1:9/hook"}"#,
                )
                .unwrap()
                .json()["id"]
                .as_str()
                .unwrap()
                .to_owned();
            // An API key, to revoke.
            let key = c
                .send(
                    "POST",
                    "/v1/keys",
                    &[("content-type", "application/json")],
                    format!(r#"{{"store":"{store}"}}"#).as_bytes(),
                )
                .unwrap();
            let key = key.json()["id"]
                .as_str()
                .unwrap_or_else(|| panic!("{}", key.text()))
                .to_owned();
            let target = path
                .replace("{key_id}", &key)
                .replace("{webhook_id}", &hook)
                .replace("{store}", &store)
                .replace("{memory_store_id}", &store)
                .replace("{memory_id}", &memory)
                .replace("{memory_version_id}", &version);
            let r = c
                .send(
                    &method.to_uppercase(),
                    &target,
                    &[
                        ("content-type", "application/json"),
                        ("x-memkv-store", &store),
                    ],
                    br#"{"command":"view","path":"/memories"}"#,
                )
                .unwrap();
            if methods.iter().any(|m| m == method) {
                assert!(
                    !matches!(r.status, 404 | 405),
                    "{method} {path}: {}",
                    r.status
                );
                // Each documented status of the operation is one of the contract's.
                let responses = item[method]["responses"].as_object().unwrap();
                assert!(
                    responses.contains_key(&r.status.to_string()),
                    "{method} {path}"
                );
            } else {
                assert_eq!(r.status, 405, "{method} {path}");
            }
            // A database keeps at most 100 endpoints: this one goes (if the request left it).
            c.send("DELETE", &format!("/v1/webhooks/{hook}"), &[], b"")
                .unwrap();
        }
    }
    assert_eq!(c.get("/v1/memory_stores/s/nothing").status, 404);
}

/// Writes `/memories/x` to `store` through the tool route; the memory's id and its version's,
/// from the memory-stores API.
fn store_with_a_memory(c: &mut Client, store: &str) -> (String, String) {
    let r = c.tool(
        store,
        br#"{"command":"create","path":"/memories/x","file_text":"x"}"#,
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let listed = c.get(&format!("/v1/memory_stores/{store}/memories")).json();
    let m = &listed["data"][0];
    (
        m["id"].as_str().unwrap().to_owned(),
        m["memory_version_id"].as_str().unwrap().to_owned(),
    )
}
