//! The memory-stores API over a real socket, on redb and on PostgreSQL: every refusal's status
//! and envelope, the keys' scoping (a store key sees its store only, in the same bytes as a
//! store that does not exist), and the tool route on a store the API made. The SDK-level
//! behaviour is tested with the real anthropic client in tests/memory_stores
//! (tools/test-memory-stores.sh).

use std::sync::Arc;

use crate::client::{self, Client};
use memkv::Database;
use serde_json::{Value, json};

use crate::library::{Fresh, Seen, each_backend};
use crate::served::{Served, ok, refused, send};

#[test]
fn refusals_map_to_statuses_in_the_api_envelope() {
    each_backend(refusals);
}

fn refusals() {
    let s = Served::new();
    let mut c = s.client(&s.admin);
    let store = ok(&send(
        &mut c,
        "POST",
        "/v1/memory_stores",
        Some(json!({"name": "n"})),
    ));
    let id = store["id"].as_str().unwrap().to_owned();
    let memories = format!("/v1/memory_stores/{id}/memories");
    let m = ok(&send(
        &mut c,
        "POST",
        &memories,
        Some(json!({"path": "/a.md", "content": "a"})),
    ));
    assert_eq!(m["content"], Value::Null);
    let memory = format!("{memories}/{}", m["id"].as_str().unwrap());

    // 400: fields, parameters, bodies.
    for (method, target, body) in [
        (
            "POST",
            "/v1/memory_stores".to_owned(),
            Some(json!({"name": ""})),
        ),
        ("POST", "/v1/memory_stores".to_owned(), Some(json!({}))),
        (
            "POST",
            "/v1/memory_stores".to_owned(),
            Some(json!({"name": "n", "extra": 1})),
        ),
        ("POST", "/v1/memory_stores".to_owned(), None),
        ("GET", "/v1/memory_stores?limit=0".to_owned(), None),
        (
            "GET",
            "/v1/memory_stores?include_archived=yes".to_owned(),
            None,
        ),
        ("GET", "/v1/memory_stores?page=x".to_owned(), None),
        ("GET", format!("{memories}?limit=101"), None),
        ("GET", format!("{memories}?view=all"), None),
        ("GET", format!("{memories}?path_prefix=/a"), None),
        ("GET", format!("{memories}?depth=-1"), None),
        (
            "POST",
            memories.clone(),
            Some(json!({"path": "a.md", "content": "x"})),
        ),
        ("POST", memories.clone(), Some(json!({"path": "/b.md"}))),
        (
            "POST",
            memories.clone(),
            Some(json!({"path": "/b.md", "content": "x".repeat(1001)})),
        ),
        (
            "DELETE",
            format!("{memory}?expected_content_sha256=00"),
            None,
        ),
        (
            "POST",
            memory.clone(),
            Some(json!({"precondition": {"type": "etag"}})),
        ),
        (
            "GET",
            format!("/v1/memory_stores/{id}/memory_versions?operation=x"),
            None,
        ),
        (
            "GET",
            format!("/v1/memory_stores/{id}/memory_versions?created_at[gte]=x"),
            None,
        ),
    ] {
        let reply = send(&mut c, method, &target, body.clone());
        let message = refused(&reply, 400, "invalid_request_error");
        assert!(!message.is_empty(), "{method} {target} {body:?}");
    }
    let reply = c
        .send("POST", &memories, &[("content-type", "text/plain")], b"{}")
        .unwrap();
    refused(&reply, 400, "invalid_request_error");

    // 404: unknown stores, memories and versions, malformed ids.
    for target in [
        "/v1/memory_stores/memstore_000000000000000000000000".to_owned(),
        "/v1/memory_stores/%FF".to_owned(),
        format!("{memories}/mem_nope"),
        format!("{memories}/mem_ffffffffffffffff"),
        format!("/v1/memory_stores/{id}/memory_versions/nope"),
        format!("/v1/memory_stores/{id}/memory_versions/memver_ffffffffffffffff"),
        "/v1/memory_stores/memstore_000000000000000000000000/memories".to_owned(),
    ] {
        refused(&send(&mut c, "GET", &target, None), 404, "not_found_error");
    }

    // 409: a taken path, a stale precondition, a stale delete; nothing changes.
    let taken = send(
        &mut c,
        "POST",
        &memories,
        Some(json!({"path": "/a.md", "content": "b"})),
    );
    refused(&taken, 409, "invalid_request_error");
    let stale = json!({"content": "c", "precondition": {"type": "content_sha256", "content_sha256": "0".repeat(64)}});
    refused(
        &send(&mut c, "POST", &memory, Some(stale)),
        409,
        "invalid_request_error",
    );
    let target = format!("{memory}?expected_content_sha256={}", "0".repeat(64));
    refused(
        &send(&mut c, "DELETE", &target, None),
        409,
        "invalid_request_error",
    );
    assert_eq!(ok(&send(&mut c, "GET", &memory, None))["content"], "a");

    // 405 on a method the route lacks.
    refused(
        &send(&mut c, "PUT", &memory, None),
        405,
        "invalid_request_error",
    );

    // 413 over the body cap.
    let big = json!({"path": "/big.md", "content": "x".repeat(100_000)});
    refused(
        &send(&mut c, "POST", &memories, Some(big)),
        413,
        "request_too_large",
    );

    // Archived: memory writes 409, a store update 400, reads and deletes allowed.
    ok(&send(
        &mut c,
        "POST",
        &format!("/v1/memory_stores/{id}/archive"),
        None,
    ));
    refused(
        &send(
            &mut c,
            "POST",
            &memories,
            Some(json!({"path": "/n.md", "content": "n"})),
        ),
        409,
        "invalid_request_error",
    );
    refused(
        &send(&mut c, "POST", &memory, Some(json!({"content": "z"}))),
        409,
        "invalid_request_error",
    );
    refused(
        &send(
            &mut c,
            "POST",
            &format!("/v1/memory_stores/{id}"),
            Some(json!({"name": "z"})),
        ),
        400,
        "invalid_request_error",
    );
    assert_eq!(ok(&send(&mut c, "GET", &memory, None))["content"], "a");
    assert_eq!(
        ok(&send(&mut c, "DELETE", &memory, None))["type"],
        "memory_deleted"
    );
    assert_eq!(
        ok(&send(
            &mut c,
            "DELETE",
            &format!("/v1/memory_stores/{id}"),
            None
        ))["type"],
        "memory_store_deleted"
    );
}

#[test]
fn a_store_key_sees_its_store_only() {
    each_backend(scoping);
}

fn scoping() {
    let s = Served::new();
    let mut admin = s.client(&s.admin);
    let make = |c: &mut Client, name: &str| {
        ok(&send(
            c,
            "POST",
            "/v1/memory_stores",
            Some(json!({"name": name})),
        ))["id"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let mine = make(&mut admin, "mine");
    let theirs = make(&mut admin, "theirs");
    let (record, key) = s.store_key(&mine, false);
    let mut c = s.client(&key);

    // Its own store: reads and writes, recorded as the key's.
    ok(&send(
        &mut c,
        "GET",
        &format!("/v1/memory_stores/{mine}"),
        None,
    ));
    ok(&send(
        &mut c,
        "POST",
        &format!("/v1/memory_stores/{mine}/memories"),
        Some(json!({"path": "/m.md", "content": "m"})),
    ));
    let versions = ok(&send(
        &mut c,
        "GET",
        &format!("/v1/memory_stores/{mine}/memory_versions"),
        None,
    ));
    assert_eq!(
        versions["data"][0]["created_by"],
        json!({"type": "api_actor", "api_key_id": record.id})
    );
    // The tool route serves the store the API made, and the API sees the tool's write.
    let reply = c.tool(
        &mine,
        br#"{"command":"create","path":"/memories/t.md","file_text":"t"}"#,
    );
    assert_eq!(
        ok(&reply),
        json!({"content": "File created successfully at: /memories/t.md", "is_error": false})
    );
    let listed = ok(&send(
        &mut c,
        "GET",
        &format!("/v1/memory_stores/{mine}/memories"),
        None,
    ));
    let paths: Vec<&str> = listed["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, ["/m.md", "/t.md"]);
    // The tool's write is recorded as the key's too (on redb it went through the writer
    // thread's batch, not the caller's handle).
    let versions = ok(&send(
        &mut c,
        "GET",
        &format!("/v1/memory_stores/{mine}/memory_versions"),
        None,
    ));
    let versions = versions["data"].as_array().unwrap();
    assert_eq!(versions.len(), 2, "{versions:?}");
    for v in versions {
        assert_eq!(
            v["created_by"],
            json!({"type": "api_actor", "api_key_id": record.id}),
            "{v}"
        );
    }

    // Another store, existing or not: the same 404, byte for byte, on every route.
    let unknown = send(
        &mut c,
        "GET",
        "/v1/memory_stores/memstore_000000000000000000000000",
        None,
    );
    refused(&unknown, 404, "not_found_error");
    for (method, suffix) in [
        ("GET", ""),
        ("POST", ""),
        ("DELETE", ""),
        ("POST", "/archive"),
        ("GET", "/memories"),
        ("POST", "/memories"),
        ("GET", "/memories/mem_0000000000000001"),
        ("GET", "/memory_versions"),
        ("POST", "/memory_versions/memver_0000000000000001/redact"),
    ] {
        let target = format!("/v1/memory_stores/{theirs}{suffix}");
        let reply = send(&mut c, method, &target, Some(json!({"name": "x"})));
        assert_eq!(reply.status, 404, "{method} {target}");
        assert_eq!(reply.body, unknown.body, "{method} {target}");
    }
    // Creating and listing stores need an admin key, and so does every operator route: the
    // refusal says what the route does.
    for (method, target, what) in [
        ("GET", "/v1/memory_stores", "listing memory stores"),
        ("POST", "/v1/memory_stores", "creating a memory store"),
        ("GET", "/v1/changes", "the change feed of every store"),
        ("GET", "/v1/keys", "listing API keys"),
        ("DELETE", "/v1/keys/key_000000000000", "revoking an API key"),
        ("POST", "/v1/webhooks", "registering a webhook"),
        ("GET", "/v1/export", "exporting every store"),
    ] {
        let reply = send(&mut c, method, target, Some(json!({"name": "x"})));
        let message = refused(&reply, 403, "permission_error");
        assert_eq!(
            message,
            format!("{what} needs an admin key"),
            "{method} {target}"
        );
    }
    let settings = format!("/v1/memory_stores/{mine}/settings");
    let reply = send(&mut c, "PATCH", &settings, Some(json!({})));
    let message = refused(&reply, 403, "permission_error");
    assert_eq!(message, "changing a store's settings needs an admin key");
    // No key, an unknown key: 401.
    let mut anonymous = Client::new(s.addr);
    refused(
        &send(
            &mut anonymous,
            "GET",
            &format!("/v1/memory_stores/{mine}"),
            None,
        ),
        401,
        "authentication_error",
    );
    refused(
        &send(
            &mut s.client("mkv_unknown"),
            "GET",
            &format!("/v1/memory_stores/{mine}"),
            None,
        ),
        401,
        "authentication_error",
    );
    // Nothing of theirs changed.
    let theirs_now = ok(&send(
        &mut admin,
        "GET",
        &format!("/v1/memory_stores/{theirs}"),
        None,
    ));
    assert_eq!(theirs_now["archived_at"], Value::Null);
    assert_eq!(theirs_now["name"], "theirs");
}

#[test]
fn every_write_of_the_server_reaches_the_commit_hooks() {
    each_backend(|| {
        let seen = Arc::new(Seen::default());
        let store = Database::builder()
            .commit_hook(seen.clone())
            .fresh()
            .unwrap();
        let s = Served::over(store);
        let mut c = s.client(&s.admin);
        let made = ok(&send(
            &mut c,
            "POST",
            "/v1/memory_stores",
            Some(json!({"name": "n"})),
        ));
        let id = made["id"].as_str().unwrap().to_owned();
        // Concurrent writers on both routes: the tool's (awaited from the pipeline on the async
        // workers) and the API's (blocking callers of the same queue).
        let threads: Vec<_> = (0..8)
            .map(|i| {
                let (addr, admin, id) = (s.addr, s.admin.clone(), id.clone());
                std::thread::spawn(move || {
                    let mut c = Client::with_key(addr, &admin);
                    if i % 2 == 0 {
                        let body = json!({"command": "create", "path": format!("/memories/t{i}.md"), "file_text": "t"});
                        let reply = c.tool(&id, body.to_string().as_bytes());
                        assert_eq!(ok(&reply)["is_error"], false, "{}", reply.text());
                    } else {
                        ok(&send(
                            &mut c,
                            "POST",
                            &format!("/v1/memory_stores/{id}/memories"),
                            Some(json!({"path": format!("/a{i}.md"), "content": "a"})),
                        ));
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let mut changes: Vec<(memkv::ChangeKind, String, Option<String>)> = seen
            .take()
            .into_iter()
            .map(|(kind, store, path, _)| (kind, store, path))
            .collect();
        changes.sort_by(|a, b| a.2.cmp(&b.2));
        let mut want = vec![(memkv::ChangeKind::StoreCreated, id.clone(), None)];
        for i in 0..8 {
            let path = if i % 2 == 0 {
                format!("/memories/t{i}.md")
            } else {
                format!("/memories/a{i}.md")
            };
            want.push((memkv::ChangeKind::MemoryCreated, id.clone(), Some(path)));
        }
        want.sort_by(|a, b| a.2.cmp(&b.2));
        assert_eq!(changes, want);
        // A refused API write reaches no hook.
        let taken = send(
            &mut c,
            "POST",
            &format!("/v1/memory_stores/{id}/memories"),
            Some(json!({"path": "/a1.md", "content": "again"})),
        );
        assert_eq!(taken.status, 409, "{}", taken.text());
        assert!(seen.take().is_empty());
    });
}

/// `GET …/search` over a real socket on both backends: the library's JSON, the keys' scoping,
/// each parameter's refusal; and a `memory_search` block on the tool route, answered as the
/// library answers it.
#[test]
fn search_answers_the_librarys_json_and_the_tool_route_the_models_text() {
    each_backend(|| {
        let s = Served::new();
        let mut admin = s.client(&s.admin);
        for (path, text) in [
            (
                "/memories/notes/tz.md",
                "# Time\nlives in Paris\nTZ: Europe/Paris\n",
            ),
            ("/memories/notes2.md", "Paris again\n"),
        ] {
            let body = json!({"command": "create", "path": path, "file_text": text}).to_string();
            assert_eq!(
                admin.tool("dana", body.as_bytes()).json()["is_error"],
                false
            );
        }
        let body = json!({"command": "create", "path": "/memories/x.md", "file_text": "Paris\n"});
        admin.tool("other", body.to_string().as_bytes());
        let found = ok(&admin.get(
            "/v1/memory_stores/dana/search?q=paris&mode=literal&case_insensitive=true&path_prefix=/notes/",
        ));
        let library =
            s.db.user("dana")
                .unwrap()
                .search(
                    &memkv::SearchRequest::new("paris", memkv::SearchMode::Literal)
                        .case_insensitive(true)
                        .path_prefix("/memories/notes"),
                )
                .unwrap();
        assert_eq!(found, library.to_json());
        assert_eq!(found["data"][0]["path"], "/notes/tz.md");
        assert_eq!(found["data"].as_array().unwrap().len(), 1);
        let file = ok(&admin.get("/v1/memory_stores/dana/search?q=P.r%5Cw%2B&mode=regex&path_prefix=/notes2.md&context=1&limit=5"));
        assert_eq!(
            file["data"],
            json!([{"path": "/notes2.md", "memory_id": file["data"][0]["memory_id"], "lines": [{"line_number": 1, "text": "Paris again", "is_match": true}]}])
        );
        // Ranked, the default: the library's answer, scores included.
        let ranked = ok(&admin.get("/v1/memory_stores/dana/search?q=europe%20paris&limit=1"));
        let library = s
            .db
            .user("dana")
            .unwrap()
            .search(&memkv::SearchRequest::new("europe paris", memkv::SearchMode::Ranked).limit(1))
            .unwrap();
        assert_eq!(ranked, library.to_json());
        assert_eq!(ranked["data"][0]["path"], "/notes/tz.md");
        assert!(ranked["data"][0]["score"].as_f64().unwrap() > 0.0);
        assert_eq!(ranked["more"], 1);
        // A store key searches its own store; another store answers as one that does not exist.
        let (_, key) = s.store_key("dana", false);
        let mut own = s.client(&key);
        assert_eq!(
            ok(&own.get("/v1/memory_stores/dana/search?q=Paris"))["data"]
                .as_array()
                .unwrap()
                .len(),
            2
        );
        refused(
            &own.get("/v1/memory_stores/other/search?q=Paris"),
            404,
            "not_found_error",
        );
        // A store never written is empty, as the tool route's `memory_search` finds it: no
        // match, not 404.
        let (_, fresh) = s.store_key("never-written", false);
        let empty = ok(&s
            .client(&fresh)
            .get("/v1/memory_stores/never-written/search?q=Paris"));
        assert_eq!(empty["data"], json!([]));
        for (query, message) in [
            ("", "q, the text to search for, is required"),
            ("q=", "search refused: the query is empty"),
            (
                "q=a&mode=fuzzy",
                "the search mode must be ranked, regex or literal",
            ),
            (
                "q=(&mode=regex",
                "search refused: the regular expression is invalid",
            ),
            ("q=a&limit=0", "limit must be an integer from 1 to 1000"),
            ("q=a&context=11", "context must be an integer from 0 to 10"),
            (
                "q=a&case_insensitive=yes",
                "case_insensitive must be true or false",
            ),
            ("q=a&path_prefix=notes/", "path_prefix must start with /"),
            ("q=a&path_prefix=/../x", "is not a memory path"),
        ] {
            let reply = admin.get(&format!("/v1/memory_stores/dana/search?{query}"));
            let got = refused(&reply, 400, "invalid_request_error");
            assert!(got.contains(message), "{query}: {got}");
        }
        // The tool route answers a memory_search block with the model's text.
        let block = json!({"type": "tool_use", "id": "t1", "name": "memory_search", "input": {"query": "Paris", "mode": "literal", "path_prefix": "/memories/notes"}});
        let reply = admin.tool("dana", block.to_string().as_bytes());
        let want =
            s.db.user("dana")
                .unwrap()
                .answer_search(
                    &json!({"query": "Paris", "mode": "literal", "path_prefix": "/memories/notes"}),
                )
                .unwrap();
        assert_eq!(
            reply.json(),
            json!({"type": "tool_result", "tool_use_id": "t1", "content": want.content, "is_error": false})
        );
        assert_eq!(
            want.content,
            "/memories/notes/tz.md:2: lives in Paris\n/memories/notes/tz.md:3: TZ: Europe/Paris"
        );
    });
}

/// `/v1/keys` adds, lists and revokes keys (admin only), and a read-only store key reads its
/// store through every face but changes nothing: the tool's writes get the read-only error,
/// the API's writes 403.
#[test]
fn keys_are_managed_through_the_api_and_read_only_keys_change_nothing() {
    each_backend(keys_and_read_only);
}

fn keys_and_read_only() {
    let s = Served::new();
    let mut admin = s.client(&s.admin);
    let store = ok(&send(
        &mut admin,
        "POST",
        "/v1/memory_stores",
        Some(json!({"name": "audited"})),
    ));
    let id = store["id"].as_str().unwrap().to_owned();
    let memories = format!("/v1/memory_stores/{id}/memories");
    let m = ok(&send(
        &mut admin,
        "POST",
        &memories,
        Some(json!({"path": "/a.md", "content": "alpha beta\n"})),
    ));
    let memory = format!("{memories}/{}", m["id"].as_str().unwrap());

    let added = ok(&send(
        &mut admin,
        "POST",
        "/v1/keys",
        Some(json!({"store": id, "read_only": true, "label": "auditor"})),
    ));
    assert_eq!(added["type"], "api_key");
    assert_eq!(added["store"], json!(id));
    assert_eq!(added["read_only"], json!(true));
    assert_eq!(added["label"], "auditor");
    assert_eq!(added["expires_at"], Value::Null);
    let key = added["key"].as_str().unwrap().to_owned();
    let key_id = added["id"].as_str().unwrap().to_owned();
    assert!(key.starts_with("mkv_") && key.len() == 68, "{key}");
    // Listed, without the key.
    let listed = ok(&send(&mut admin, "GET", "/v1/keys", None));
    let mine = listed["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["id"] == json!(key_id))
        .unwrap()
        .clone();
    assert_eq!(mine.get("key"), None);
    assert_eq!(mine["label"], "auditor");
    assert!(!listed.to_string().contains(&key[4..]));

    let mut ro = s.client(&key);
    let before = ok(&send(&mut admin, "GET", &memories, None));
    // Reads work.
    ok(&send(&mut ro, "GET", &memory, None));
    let viewed = ok(&ro.tool(&id, br#"{"command":"view","path":"/memories/a.md"}"#));
    assert_eq!(viewed["is_error"], json!(false), "{viewed}");
    let found = ok(&ro.tool(
        &id,
        br#"{"type":"tool_use","id":"s","name":"memory_search","input":{"query":"beta"}}"#,
    ));
    assert_eq!(found["is_error"], json!(false), "{found}");
    // The tool's writes: the read-only error, byte for byte, for every write command.
    for (name, input) in [
        (
            "create",
            json!({"command": "create", "path": "/memories/b.md", "file_text": "x"}),
        ),
        (
            "str_replace",
            json!({"command": "str_replace", "path": "/memories/a.md", "old_str": "alpha", "new_str": "x"}),
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
    ] {
        let out = ok(&ro.tool(&id, input.to_string().as_bytes()));
        assert_eq!(
            out,
            json!({
                "content": format!("Error: This memory store is read-only for this session; the {name} command was not applied."),
                "is_error": true
            })
        );
    }
    // The API's writes: 403.
    for (method, target, body) in [
        (
            "POST",
            memories.clone(),
            Some(json!({"path": "/b.md", "content": "b"})),
        ),
        ("POST", memory.clone(), Some(json!({"content": "changed"}))),
        ("DELETE", memory.clone(), None),
        (
            "POST",
            format!("/v1/memory_stores/{id}"),
            Some(json!({"name": "renamed"})),
        ),
        ("POST", format!("/v1/memory_stores/{id}/archive"), None),
        ("DELETE", format!("/v1/memory_stores/{id}"), None),
    ] {
        let reply = send(&mut ro, method, &target, body);
        let message = refused(&reply, 403, "permission_error");
        assert!(
            message.contains("read-only"),
            "{method} {target}: {message}"
        );
    }
    // Every block of an array, and a redaction, a store's settings: refused too.
    let blocks = json!([
        {"type": "tool_use", "id": "a", "name": "memory", "input": {"command": "view", "path": "/memories"}},
        {"type": "tool_use", "id": "b", "name": "memory", "input": {"command": "create", "path": "/memories/z", "file_text": "z"}},
        {"type": "tool_use", "id": "c", "name": "memory", "input": {"command": "delete", "path": "/memories/a.md"}}
    ]);
    let out = ok(&ro.tool(&id, blocks.to_string().as_bytes()));
    assert_eq!(out[0]["is_error"], json!(false), "{out}");
    assert_eq!(out[1]["is_error"], json!(true), "{out}");
    assert_eq!(
        out[2]["content"],
        "Error: This memory store is read-only for this session; the delete command was not applied."
    );
    let versions = ok(&send(
        &mut admin,
        "GET",
        &format!("/v1/memory_stores/{id}/memory_versions"),
        None,
    ));
    let version = versions["data"][0]["id"].as_str().unwrap().to_owned();
    let reply = send(
        &mut ro,
        "POST",
        &format!("/v1/memory_stores/{id}/memory_versions/{version}/redact"),
        None,
    );
    refused(&reply, 403, "permission_error");
    let reply = send(
        &mut ro,
        "PATCH",
        &format!("/v1/memory_stores/{id}/settings"),
        Some(json!({"max_files": 1})),
    );
    refused(&reply, 403, "permission_error");
    assert_eq!(ok(&send(&mut admin, "GET", &memories, None)), before);
    let history = ok(&send(
        &mut admin,
        "GET",
        &format!("/v1/memory_stores/{id}/memory_versions"),
        None,
    ));
    assert_eq!(history, versions);
    // Keys are the admin's to manage.
    for (method, target) in [
        ("GET", "/v1/keys"),
        ("POST", "/v1/keys"),
        ("DELETE", "/v1/keys/key_000000000000"),
    ] {
        let reply = send(&mut ro, method, target, Some(json!({})));
        refused(&reply, 403, "permission_error");
    }

    // Requests the API refuses.
    for body in [
        json!({"read_only": true}),
        json!({"store": ""}),
        json!({"store": id, "expires_at": "soon"}),
        json!({"store": id, "expires_at": "2001-01-01T00:00:00Z"}),
        json!({"store": id, "label": "a\nb"}),
        json!({"store": id, "extra": 1}),
    ] {
        let reply = send(&mut admin, "POST", "/v1/keys", Some(body.clone()));
        refused(&reply, 400, "invalid_request_error");
    }

    // Revoked: refused at once on this server; a second revocation finds nothing.
    ok(&send(
        &mut admin,
        "DELETE",
        &format!("/v1/keys/{key_id}"),
        None,
    ));
    let reply = send(&mut ro, "GET", &memory, None);
    refused(&reply, 401, "authentication_error");
    let reply = send(&mut admin, "DELETE", &format!("/v1/keys/{key_id}"), None);
    refused(&reply, 404, "not_found_error");

    // An expired key is refused, saying so.
    let soon = ok(&send(
        &mut admin,
        "POST",
        "/v1/keys",
        Some(json!({"store": id, "expires_at": memkv::rfc3339_ms(now_ms() + 400)})),
    ));
    let mut expiring = s.client(soon["key"].as_str().unwrap());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let reply = send(&mut expiring, "GET", &memory, None);
        if reply.status == 401 {
            let message = refused(&reply, 401, "authentication_error");
            assert!(message.contains("expired"), "{message}");
            break;
        }
        ok(&reply);
        assert!(
            std::time::Instant::now() < deadline,
            "the key never expired"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// `/v1/memory_stores/{id}/settings`: a store key reads its own store's, an admin changes them
/// (a value sets, null resets), and the store's commands are checked against them.
#[test]
fn store_settings_are_read_and_changed_through_the_api() {
    each_backend(settings_api);
}

fn settings_api() {
    let s = Served::new();
    let mut admin = s.client(&s.admin);
    let (_, key) = s.store_key("alice", false);
    let mut alice = s.client(&key);
    let path = "/v1/memory_stores/alice/settings";
    let got = ok(&send(&mut alice, "GET", path, None));
    assert_eq!(got["type"], "memory_store_settings");
    assert_eq!(got["own"], json!({}));
    assert_eq!(got["effective"]["max_files"], 10_000);
    assert_eq!(got["effective"]["ttl"], "off");
    assert_eq!(got["effective"]["history_max_age"], "30d");
    // Changing them is an admin's: a store must not raise its own quota.
    let reply = send(
        &mut alice,
        "PATCH",
        path,
        Some(json!({"max_files": 1_000_000})),
    );
    refused(&reply, 403, "permission_error");
    // Another store's: the same 404 as for any store this key may not use.
    let reply = send(&mut alice, "GET", "/v1/memory_stores/bob/settings", None);
    refused(&reply, 404, "not_found_error");

    let changed = ok(&send(
        &mut admin,
        "PATCH",
        path,
        Some(
            json!({"max_files": 1, "ttl": "30d", "history_max_versions": "off", "secrets": "redact"}),
        ),
    ));
    assert_eq!(
        changed["own"],
        json!({"max_files": 1, "ttl": "30d", "history_max_versions": "off", "secrets": "redact"})
    );
    assert_eq!(changed["effective"]["max_files"], 1);
    assert_eq!(ok(&send(&mut alice, "GET", path, None)), changed);
    let create =
        |n: u32| format!(r#"{{"command":"create","path":"/memories/{n}","file_text":"x"}}"#);
    assert_eq!(
        ok(&alice.tool("alice", create(0).as_bytes()))["is_error"],
        false
    );
    assert_eq!(
        ok(&alice.tool("alice", create(1).as_bytes())),
        json!({"content": "Error: Memory quota exceeded: at most 1 files", "is_error": true})
    );
    // null resets one; the others stay.
    let reset = ok(&send(
        &mut admin,
        "PATCH",
        path,
        Some(json!({"max_files": null})),
    ));
    assert_eq!(
        reset["own"],
        json!({"ttl": "30d", "history_max_versions": "off", "secrets": "redact"})
    );
    assert_eq!(
        ok(&alice.tool("alice", create(1).as_bytes()))["is_error"],
        false
    );
    // Refused, changing nothing.
    for body in [
        json!({"max_files": 0}),
        json!({"max_files": "many"}),
        json!({"ttl": "soon"}),
        json!({"ttl": "0s"}),
        // The periods' bounds are the same for both: from 1 s to 100 years.
        json!({"history_max_age": "0s"}),
        json!({"ttl": "500ms"}),
        json!({"ttl": "36501d"}),
        json!({"history_max_age": "1000000000years"}),
        json!({"secrets": "maybe"}),
        json!({"colour": "blue"}),
        json!([1]),
    ] {
        let reply = send(&mut admin, "PATCH", path, Some(body.clone()));
        refused(&reply, 400, "invalid_request_error");
    }
    assert_eq!(ok(&send(&mut admin, "GET", path, None)), reset);
    // humantime's year is 365.25 days: 100 of them are beyond the bound, which says so.
    let reply = send(&mut admin, "PATCH", path, Some(json!({"ttl": "100years"})));
    let message = refused(&reply, 400, "invalid_request_error");
    assert!(
        message.contains("ttl must be from 1s to 36500d"),
        "{message}"
    );
    // Every value is shown back as it can be sent again: the longest, the shortest, another.
    for (sent, shown) in [("36500d", "36500d"), ("1s", "1s"), ("1h 30m", "90m")] {
        let body = json!({"ttl": sent, "history_max_age": sent});
        let got = ok(&send(&mut admin, "PATCH", path, Some(body)));
        assert_eq!(got["own"]["ttl"], shown);
        assert_eq!(got["own"]["history_max_age"], shown);
        let again =
            json!({"ttl": got["own"]["ttl"], "history_max_age": got["own"]["history_max_age"]});
        assert_eq!(
            ok(&send(&mut admin, "PATCH", path, Some(again)))["own"],
            got["own"]
        );
    }
}

/// Backups over HTTP: an export taken while writes go on is one consistent snapshot that
/// imports whole; a store key exports its own store only; an import is all or nothing.
#[test]
fn exports_stream_a_snapshot_and_imports_are_all_or_nothing() {
    each_backend(backups);
}

fn backups() {
    let s = Served::new();
    let mut admin = s.client(&s.admin);
    let create = |path: &str| {
        format!(r#"{{"command":"create","path":"/memories/{path}","file_text":"{path}\n"}}"#)
    };
    for i in 0..20 {
        assert_eq!(
            ok(&admin.tool("bob", create(&format!("b{i}")).as_bytes()))["is_error"],
            false
        );
    }
    // Writes to alice go on while the export is taken.
    let writer = {
        let addr = s.addr;
        let key = s.admin.clone();
        std::thread::spawn(move || {
            let mut c = client::Client::with_key(addr, &key);
            for i in 0..150 {
                let body =
                    format!(r#"{{"command":"create","path":"/memories/a{i}","file_text":"a\n"}}"#);
                assert_eq!(c.tool("alice", body.as_bytes()).status, 200);
            }
        })
    };
    let export = admin.send("GET", "/v1/export", &[], b"").unwrap();
    writer.join().unwrap();
    assert_eq!(export.status, 200, "{}", export.text());
    assert_eq!(export.header("content-type"), Some("application/x-ndjson"));
    // It imports whole into an empty database, which then checks clean.
    let copy = Database::in_memory().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("export.jsonl");
    std::fs::write(&file, &export.body).unwrap();
    copy.import(&file, memkv::Conflict::Refuse, &mut |_| {})
        .unwrap();
    assert_eq!(copy.check().unwrap(), Vec::<(String, String)>::new());
    let users: Vec<(String, u64)> = copy
        .users()
        .unwrap()
        .into_iter()
        .map(|u| (u.user, u.files))
        .collect();
    assert_eq!(users.iter().find(|u| u.0 == "bob").unwrap().1, 20);
    // One snapshot: alice's writes came one after another, so the export holds exactly the
    // first n of them, whatever n the export caught.
    let alice = users.iter().find(|u| u.0 == "alice").map_or(0, |u| u.1);
    let mut caught: Vec<String> = match alice {
        0 => Vec::new(),
        _ => copy
            .user("alice")
            .unwrap()
            .files()
            .unwrap()
            .into_iter()
            .map(|f| f.path.to_string())
            .collect(),
    };
    caught.sort();
    let mut first: Vec<String> = (0..alice).map(|i| format!("/memories/a{i}")).collect();
    first.sort();
    assert_eq!(caught, first);

    // A store key: its own store's export; another store's is the usual 404; every store's, 403.
    let (_, key) = s.store_key("bob", true);
    let mut bob = s.client(&key);
    let own = bob
        .send("GET", "/v1/memory_stores/bob/export", &[], b"")
        .unwrap();
    assert_eq!(own.status, 200);
    let own_text = own.text();
    assert!(own_text.contains("/memories/b19") && !own_text.contains("/memories/a0"));
    refused(
        &bob.send("GET", "/v1/memory_stores/alice/export", &[], b"")
            .unwrap(),
        404,
        "not_found_error",
    );
    refused(
        &bob.send("GET", "/v1/export", &[], b"").unwrap(),
        403,
        "permission_error",
    );
    refused(
        &bob.send("POST", "/v1/import", &[], own.body.as_slice())
            .unwrap(),
        403,
        "permission_error",
    );
    refused(
        &admin.send("GET", "/v1/export?since=x", &[], b"").unwrap(),
        400,
        "invalid_request_error",
    );
    // An incremental export covers every store (it moves a copy on to its seq).
    for target in [
        "/v1/export?since=1&user=bob",
        "/v1/memory_stores/bob/export?since=1",
    ] {
        refused(
            &admin.send("GET", target, &[], b"").unwrap(),
            400,
            "invalid_request_error",
        );
    }
    let incremental = admin.send("GET", "/v1/export?since=1", &[], b"").unwrap();
    assert_eq!(incremental.status, 200);
    assert!(
        incremental.text().contains("\"base_seq\":1"),
        "{}",
        incremental.text()
    );

    // Imports: a truncated export, and one whose memories exist, change nothing; with
    // conflict=skip it applies what is new.
    let before = ok(&send(
        &mut admin,
        "GET",
        "/v1/memory_stores/bob/memories?limit=100",
        None,
    ));
    let cut = &own.body[..own.body.len() - 10];
    let reply = admin
        .send(
            "POST",
            "/v1/import",
            &[("content-type", "application/x-ndjson")],
            cut,
        )
        .unwrap();
    refused(&reply, 400, "invalid_request_error");
    let reply = admin
        .send("POST", "/v1/import", &[], own.body.as_slice())
        .unwrap();
    let message = refused(&reply, 400, "invalid_request_error");
    assert!(message.contains("already exists"), "{message}");
    refused(
        &admin
            .send(
                "POST",
                "/v1/import?conflict=maybe",
                &[],
                own.body.as_slice(),
            )
            .unwrap(),
        400,
        "invalid_request_error",
    );
    assert_eq!(
        ok(&send(
            &mut admin,
            "GET",
            "/v1/memory_stores/bob/memories?limit=100",
            None
        )),
        before
    );
    let reply = admin
        .send("POST", "/v1/import?conflict=skip", &[], own.body.as_slice())
        .unwrap();
    let summary = ok(&reply);
    assert_eq!(summary["type"], "import_summary");
    assert_eq!(summary["skipped"], 20);
    // Into a store deleted meanwhile: restored whole.
    ok(&send(&mut admin, "DELETE", "/v1/memory_stores/bob", None));
    let summary = ok(&admin
        .send("POST", "/v1/import", &[], own.body.as_slice())
        .unwrap());
    assert_eq!(summary["files"], 20);
    let restored = ok(&send(
        &mut admin,
        "GET",
        "/v1/memory_stores/bob/memories?limit=100",
        None,
    ));
    assert_eq!(restored["data"].as_array().unwrap().len(), 20);
}

/// Rate limits: a key over its limit gets 429 `rate_limit_error` with `Retry-After`, other keys
/// carry on; a store's limit counts every key that uses it; a bucket fills again with time.
#[test]
fn keys_and_stores_over_their_rate_limits_get_429() {
    let s = Served::configured(Database::in_memory().unwrap(), |c| {
        c.rate_limit_key = Some("1:3".parse().unwrap());
        c.rate_limit_store = Some("1:5".parse().unwrap());
    });
    let view = br#"{"command":"view","path":"/memories"}"#;
    let (_, a) = s.store_key("alice", false);
    let mut alice = s.client(&a);
    for _ in 0..3 {
        assert_eq!(alice.tool("alice", view).status, 200);
    }
    let over = alice.tool("alice", view);
    let message = refused(&over, 429, "rate_limit_error");
    assert!(message.contains("this API key"), "{message}");
    let wait: u64 = over.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=2).contains(&wait), "{wait}");
    assert_eq!(over.header("x-should-retry"), Some("true"));
    // Another key on the same store: its own bucket, but the store's is shared (5, of which
    // alice took 3).
    let mut admin = s.client(&s.admin);
    for _ in 0..2 {
        assert_eq!(admin.tool("alice", view).status, 200);
    }
    let over = admin.tool("alice", view);
    let message = refused(&over, 429, "rate_limit_error");
    assert!(message.contains("this memory store"), "{message}");
    // Another store: a bucket of its own.
    let (_, b) = s.store_key("bob", false);
    assert_eq!(s.client(&b).tool("bob", view).status, 200);
    // A second later, the bucket has room again.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while alice.tool("alice", view).status == 429 {
        assert!(
            std::time::Instant::now() < deadline,
            "the bucket never filled again"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// An import over `--max-import-bytes` is answered 413 and changes nothing; one at the cap is
/// applied.
#[test]
fn an_import_over_the_cap_is_413_and_changes_nothing() {
    let source = Served::new();
    let mut admin = source.client(&source.admin);
    for i in 0..20 {
        let body = format!(r#"{{"command":"create","path":"/memories/m{i}","file_text":"{i}\n"}}"#);
        assert_eq!(admin.tool("alice", body.as_bytes()).status, 200);
    }
    let export = admin.send("GET", "/v1/export", &[], b"").unwrap();
    assert_eq!(export.status, 200);
    let bytes = export.body.len() as u64;

    let tight = Served::configured(Database::in_memory().unwrap(), |c| {
        c.max_import_bytes = bytes - 1;
    });
    let mut target = tight.client(&tight.admin);
    let reply = target
        .send("POST", "/v1/import", &[], export.body.as_slice())
        .unwrap();
    let message = refused(&reply, 413, "request_too_large");
    assert!(message.contains("--max-import-bytes"), "{message}");
    assert!(tight.db.users().unwrap().is_empty());

    let exact = Served::configured(Database::in_memory().unwrap(), |c| {
        c.max_import_bytes = bytes;
    });
    let mut target = exact.client(&exact.admin);
    let reply = target
        .send("POST", "/v1/import", &[], export.body.as_slice())
        .unwrap();
    assert_eq!(ok(&reply)["files"], 20, "{}", reply.text());
}

/// A request answered before its body was read (another store's tool route, a missing key)
/// says `Connection: close`: hyper closes such a connection after the answer, and a client that
/// sent its next request on it got no answer. A request whose body was read keeps the
/// connection, error or not.
#[test]
fn a_request_refused_before_its_body_was_read_says_the_connection_closes() {
    let s = Served::new();
    let (_, key) = s.store_key("alice", false);
    let body = json!({"command": "view", "path": "/memories"}).to_string();
    let mut c = s.client(&key);
    let theirs = c.tool("bob", body.as_bytes());
    assert_eq!(theirs.status, 404);
    assert_eq!(theirs.header("connection"), Some("close"));
    let mut nobody = Client::new(s.addr);
    let unknown = nobody.tool("alice", body.as_bytes());
    assert_eq!(unknown.status, 401);
    assert_eq!(unknown.header("connection"), Some("close"));
    let mut c = s.client(&key);
    let mine = c.tool("alice", body.as_bytes());
    assert_eq!(mine.status, 200);
    assert_eq!(mine.header("connection"), None);
    // Read, then refused (not JSON): the connection stays open for the next request.
    let bad = c.tool("alice", b"{not json");
    assert_eq!(bad.status, 400);
    assert_eq!(bad.header("connection"), None);
    assert_eq!(c.tool("alice", body.as_bytes()).status, 200);
}
