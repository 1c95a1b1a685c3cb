//! The memory-stores routes of `/openapi.json`: anthropic's beta `memory_stores`, `memories`
//! and `memory_versions` resources as memkv serves them, with their objects.

use serde_json::{Map, Value, json};

use crate::app::{ARCHIVE, MEMORIES, MEMORY, REDACT, STORE, STORES, VERSION, VERSIONS};

fn error(description: &str) -> Value {
    json!({"description": description,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}})
}

/// An error a client must not send again unchanged: `x-should-retry: false`.
pub fn final_error(description: &str) -> Value {
    let mut e = error(description);
    e["headers"] = json!({"x-should-retry": {
        "description": "`false`: the same request gets the same answer, so the anthropic SDKs do not retry it",
        "schema": {"type": "string", "enum": ["false"]}}});
    e
}

/// 503 with `Retry-After` and `x-should-retry: true`.
pub fn overloaded(description: &str) -> Value {
    let mut e = error(description);
    e["headers"] = json!({
        "Retry-After": {"schema": {"type": "string", "pattern": "^[0-9]+$"}},
        "x-should-retry": {"schema": {"type": "string", "enum": ["true"]}}});
    e
}

pub(super) fn ok(schema: &str, description: &str) -> Value {
    json!({"description": description,
        "content": {"application/json": {"schema": {"$ref": format!("#/components/schemas/{schema}")}}}})
}

pub(super) fn path_param(name: &str, description: &str) -> Value {
    json!({"name": name, "in": "path", "required": true, "description": description,
        "schema": {"type": "string", "minLength": 1}})
}

pub(super) fn query(name: &str, description: &str, schema: Value) -> Value {
    json!({"name": name, "in": "query", "required": false, "description": description,
        "schema": schema})
}

fn view(default: &str) -> Value {
    query(
        "view",
        &format!(
            "Whether memories and versions include `content` (`full`) or not (`basic`). Defaults to `{default}` here. With `full`, a list page holds at most 20 items."
        ),
        json!({"enum": ["basic", "full"]}),
    )
}

fn limit() -> Value {
    query(
        "limit",
        "Items per page, 1 to 100 (20 when omitted; at most 20 with `view=full`).",
        json!({"type": "integer", "minimum": 1, "maximum": 100}),
    )
}

fn page() -> Value {
    query(
        "page",
        "The `next_page` value of a previous answer.",
        json!({"type": "string"}),
    )
}

fn time(name: &str, description: &str) -> Value {
    query(
        name,
        description,
        json!({"type": "string", "format": "date-time"}),
    )
}

/// One operation: the key, the statuses every route shares, and `ok` for 200.
pub(super) fn op(
    id: &str,
    summary: &str,
    description: &str,
    params: Vec<Value>,
    body: Option<&str>,
    ok: Value,
) -> Value {
    let mut parameters = params;
    parameters.push(json!({"name": "anthropic-beta", "in": "header", "required": false,
        "description": "Sent by the anthropic SDKs (`agent-memory-2026-07-22`); accepted and not required.",
        "schema": {"type": "string"}}));
    let mut op = json!({
        "operationId": id,
        "summary": summary,
        "description": description,
        "security": [{"apiKey": []}, {"bearer": []}, {}],
        "parameters": parameters,
        "responses": {
            "200": ok,
            "400": final_error("A parameter or body memkv does not accept (invalid_request_error): a name, description, metadata, path, limit, view, page or hash outside its rules; content over the size limit; updating an archived store"),
            "401": final_error("No API key, an unknown one, or an expired one (authentication_error)"),
            "403": final_error("A store key on a route that needs an admin key, a read-only key on a route that changes the store, or keyless access from a host name other than localhost (permission_error)"),
            "404": final_error("No such store, memory or version, or a store this key may not use: the same answer either way (not_found_error)"),
            "405": final_error("A method the route does not have"),
            "409": final_error("A conflict (invalid_request_error): the precondition's content_sha256 is not the memory's, a memory exists at the path, or the store is archived"),
            "413": final_error("The body is over the cap (request_too_large)"),
            "429": overloaded("The key or the store is over its rate limit (rate_limit_error); retry after the given seconds"),
            "500": error("The API keys cannot be read, or the storage failed; nothing was changed (api_error)"),
            "503": overloaded("The in-flight limit is reached, or the database is busy; retry after the given seconds"),
            "507": final_error("The disk holding the database is full; nothing was changed. Deletes, redactions and store deletions still work")
        }
    });
    if let Some(body) = body {
        op["requestBody"] = json!({"required": true,
            "content": {"application/json": {"schema": {"$ref": format!("#/components/schemas/{body}")}}}});
    }
    op
}

/// The routes, keyed by path, with links from what creates a store or a memory to what uses
/// it (schemathesis follows them in its stateful phase).
pub fn paths() -> Vec<(&'static str, Value)> {
    let link = |op: &str, parameters: Value| json!({"operationId": op, "parameters": parameters});
    let in_store = json!({"memory_store_id": "$response.body#/id"});
    let store_links: Map<String, Value> = [
        "memory_stores_retrieve",
        "memory_stores_update",
        "memory_stores_archive",
        "memory_stores_delete",
        "memories_create",
        "memories_list",
        "memory_versions_list",
    ]
    .into_iter()
    .map(|op| (op.to_owned(), link(op, in_store.clone())))
    .collect();
    let memory = json!({"memory_store_id": "$request.path.memory_store_id", "memory_id": "$response.body#/id"});
    let version = json!({"memory_store_id": "$request.path.memory_store_id",
        "memory_version_id": "$response.body#/memory_version_id"});
    let memory_links = json!({
        "memories_retrieve": link("memories_retrieve", memory.clone()),
        "memories_update": link("memories_update", memory.clone()),
        "memories_delete": link("memories_delete", memory.clone()),
        "memory_versions_list": link("memory_versions_list", memory),
        "memory_versions_retrieve": link("memory_versions_retrieve", version.clone()),
        "memory_versions_redact": link("memory_versions_redact", version),
    });
    let mut paths = routes();
    for (path, item) in &mut paths {
        match *path {
            STORES => {
                item["post"]["responses"]["200"]["links"] = Value::Object(store_links.clone())
            }
            MEMORIES => item["post"]["responses"]["200"]["links"] = memory_links.clone(),
            MEMORY => item["post"]["responses"]["200"]["links"] = memory_links.clone(),
            _ => {}
        }
    }
    paths
}

fn routes() -> Vec<(&'static str, Value)> {
    let store_id = || {
        path_param(
            "memory_store_id",
            "The store: its `memstore_…` id, or the memkv user id of a store the memory tool wrote (one percent-encoded segment).",
        )
    };
    let memory_id = || path_param("memory_id", "The memory (`mem_…`).");
    let version_id = || path_param("memory_version_id", "The version (`memver_…`).");
    vec![
        (
            STORES,
            json!({
                "post": op("memory_stores_create", "Create a memory store",
                    "Admin key (or keyless on loopback). The store's id is a memkv user id: the tool route and MCP serve it at once.",
                    vec![], Some("MemoryStoreCreate"), ok("MemoryStore", "The new store")),
                "get": op("memory_stores_list", "List memory stores",
                    "Admin key (or keyless on loopback). In id order; archived stores only with `include_archived=true`.",
                    vec![
                        query("include_archived", "Include archived stores.", json!({"type": "boolean"})),
                        time("created_at[gte]", "Only stores created at or after this time."),
                        time("created_at[lte]", "Only stores created at or before this time."),
                        limit(), page(),
                    ], None, ok("MemoryStorePage", "A page of stores")),
            }),
        ),
        (
            STORE,
            json!({
                "get": op("memory_stores_retrieve", "Retrieve a memory store", "", vec![store_id()], None,
                    ok("MemoryStore", "The store")),
                "post": op("memory_stores_update", "Update a memory store",
                    "Name, description, and metadata changes (a key set to null is removed). 400 on an archived store.",
                    vec![store_id()], Some("MemoryStoreUpdate"), ok("MemoryStore", "The store as changed")),
                "delete": op("memory_stores_delete", "Delete a memory store",
                    "The store, every memory and every version; it cannot be undone.",
                    vec![store_id()], None, ok("DeletedMemoryStore", "The store is deleted")),
            }),
        ),
        (
            ARCHIVE,
            json!({
                "post": op("memory_stores_archive", "Archive a memory store",
                    "Afterwards the store is read-only: its memories can still be read and deleted, its versions redacted, the store deleted. Archiving again changes nothing.",
                    vec![store_id()], None, ok("MemoryStore", "The archived store")),
            }),
        ),
        (
            MEMORIES,
            json!({
                "post": op("memories_create", "Create a memory",
                    "The path is relative to the store's root: `/notes.md` is the memory tool's `/memories/notes.md`. 409 when a memory exists at the path or the store is archived.",
                    vec![store_id(), view("basic")], Some("MemoryCreate"), ok("Memory", "The new memory")),
                "get": op("memories_list", "List memories",
                    "In path order. `depth` 0 lists every memory below `path_prefix`; `depth` d lists memories at most d segments below it and rolls deeper ones up into `memory_prefix` items.",
                    vec![
                        store_id(),
                        query("path_prefix", "Only memories below this directory, such as `/notes/`: it must start and end with `/` and matches whole segments.",
                            json!({"type": "string"})),
                        query("depth", "How many segments below `path_prefix` to list (0: all).", json!({"type": "integer", "minimum": 0})),
                        limit(), page(), view("basic"),
                    ], None, ok("MemoryPage", "A page of memories and prefixes")),
            }),
        ),
        (
            MEMORY,
            json!({
                "get": op("memories_retrieve", "Retrieve a memory", "", vec![store_id(), memory_id(), view("full")], None,
                    ok("Memory", "The memory")),
                "post": op("memories_update", "Update a memory",
                    "New content and/or a new path (a rename: the memory keeps its id). 409 when the precondition fails, the new path is taken, or the store is archived.",
                    vec![store_id(), memory_id(), view("basic")], Some("MemoryUpdate"), ok("Memory", "The memory as changed")),
                "delete": op("memories_delete", "Delete a memory",
                    "Its versions stay. 409 (nothing deleted) when `expected_content_sha256` is not the memory's.",
                    vec![store_id(), memory_id(),
                        query("expected_content_sha256", "Delete only if the memory's content has this SHA-256 (64 lowercase hex digits).",
                            json!({"type": "string", "pattern": "^[0-9a-f]{64}$"}))],
                    None, ok("DeletedMemory", "The memory is deleted")),
            }),
        ),
        (
            VERSIONS,
            json!({
                "get": op("memory_versions_list", "List memory versions",
                    "Oldest first. Every change to a memory, through this API or the memory tool, is a version; a deleted memory's versions stay.",
                    vec![
                        store_id(),
                        query("memory_id", "Only this memory's versions (`mem_…`), deleted or not.", json!({"type": "string"})),
                        query("operation", "Only this kind of change.", json!({"enum": ["created", "modified", "deleted"]})),
                        query("api_key_id", "Only changes made with this key (`key_…`).", json!({"type": "string"})),
                        query("session_id", "Only changes made by this session.", json!({"type": "string"})),
                        query("service_account_id", "Only changes made by this service account (memkv has none: no version matches).", json!({"type": "string"})),
                        time("created_at[gte]", "Only versions written at or after this time."),
                        time("created_at[lte]", "Only versions written at or before this time."),
                        limit(), page(), view("basic"),
                    ], None, ok("MemoryVersionPage", "A page of versions")),
            }),
        ),
        (
            VERSION,
            json!({
                "get": op("memory_versions_retrieve", "Retrieve a memory version", "",
                    vec![store_id(), version_id(), view("full")], None, ok("MemoryVersion", "The version")),
            }),
        ),
        (
            REDACT,
            json!({
                "post": op("memory_versions_redact", "Redact a memory version",
                    "Nulls its content, path, hash and size and records when and by whom. Allowed on an archived store.",
                    vec![store_id(), version_id()], None, ok("MemoryVersion", "The redacted version")),
            }),
        ),
    ]
}

/// The objects, for `components.schemas`.
pub fn schemas() -> Map<String, Value> {
    let time = json!({"type": "string", "format": "date-time"});
    let time_or_null = json!({"type": ["string", "null"], "format": "date-time"});
    let hash = json!({"type": "string", "pattern": "^[0-9a-f]{64}$"});
    let actor = json!({"anyOf": [{"$ref": "#/components/schemas/Actor"}, {"type": "null"}]});
    let no_control = "^[^\\u0000-\\u001f\\u007f-\\u009f]*$";
    let metadata = |values: Value| {
        json!({"type": "object", "maxProperties": 16,
            "propertyNames": {"minLength": 1, "maxLength": 64},
            "additionalProperties": values})
    };
    let object = |required: &[&str], properties: Value| {
        json!({"type": "object", "required": required, "additionalProperties": false,
            "properties": properties})
    };
    let page = |items: Value| {
        object(
            &["data", "next_page"],
            json!({"data": {"type": "array", "items": items},
                "next_page": {"type": ["string", "null"]}}),
        )
    };
    let mut s = Map::new();
    s.insert("MemoryStore".into(), object(
        &["type", "id", "name", "description", "metadata", "created_at", "updated_at", "archived_at"],
        json!({"type": {"const": "memory_store"}, "id": {"type": "string"}, "name": {"type": "string"},
            "description": {"type": "string"}, "metadata": {"type": "object", "additionalProperties": {"type": "string"}},
            "created_at": time, "updated_at": time, "archived_at": time_or_null})));
    s.insert(
        "DeletedMemoryStore".into(),
        object(
            &["type", "id"],
            json!({"type": {"const": "memory_store_deleted"}, "id": {"type": "string"}}),
        ),
    );
    s.insert(
        "MemoryStorePage".into(),
        page(json!({"$ref": "#/components/schemas/MemoryStore"})),
    );
    s.insert(
        "MemoryStoreCreate".into(),
        object(
            &["name"],
            json!({
        "name": {"type": "string", "minLength": 1, "maxLength": 255, "pattern": no_control},
        "description": {"type": "string", "maxLength": 1024},
        "metadata": metadata(json!({"type": "string", "maxLength": 512}))}),
        ),
    );
    s.insert("MemoryStoreUpdate".into(), object(&[], json!({
        "name": {"type": ["string", "null"], "minLength": 1, "maxLength": 255, "pattern": no_control},
        "description": {"type": ["string", "null"], "maxLength": 1024},
        "metadata": {"anyOf": [metadata(json!({"type": ["string", "null"], "maxLength": 512})), {"type": "null"}]}})));
    s.insert("Memory".into(), object(
        &["type", "id", "memory_store_id", "memory_version_id", "path", "content", "content_sha256",
          "content_size_bytes", "created_at", "updated_at"],
        json!({"type": {"const": "memory"}, "id": {"type": "string"}, "memory_store_id": {"type": "string"},
            "memory_version_id": {"type": "string"}, "path": {"type": "string"},
            "content": {"type": ["string", "null"]}, "content_sha256": hash,
            "content_size_bytes": {"type": "integer", "minimum": 0},
            "created_at": time, "updated_at": time})));
    s.insert(
        "MemoryPrefix".into(),
        object(
            &["type", "path"],
            json!({"type": {"const": "memory_prefix"}, "path": {"type": "string"}}),
        ),
    );
    s.insert(
        "DeletedMemory".into(),
        object(
            &["type", "id"],
            json!({"type": {"const": "memory_deleted"}, "id": {"type": "string"}}),
        ),
    );
    s.insert(
        "MemoryPage".into(),
        page(json!({"anyOf": [
        {"$ref": "#/components/schemas/Memory"}, {"$ref": "#/components/schemas/MemoryPrefix"}]})),
    );
    s.insert("MemoryCreate".into(), object(&["content", "path"], json!({
        "content": {"type": ["string", "null"], "description": "The content (null: empty). At most the store's file-size limit."},
        "path": {"type": "string", "pattern": "^/.", "description": "Relative to the store's root, starting with `/`."}})));
    s.insert("MemoryUpdate".into(), object(&[], json!({
        "content": {"type": ["string", "null"]},
        "path": {"type": ["string", "null"], "pattern": "^/."},
        "precondition": {"type": "object", "required": ["type", "content_sha256"], "additionalProperties": false,
            "properties": {"type": {"const": "content_sha256"}, "content_sha256": hash}}})));
    s.insert("Actor".into(), json!({"anyOf": [
        object(&["type", "api_key_id"], json!({"type": {"const": "api_actor"}, "api_key_id": {"type": "string"}})),
        object(&["type", "session_id"], json!({"type": {"const": "session_actor"}, "session_id": {"type": "string"}})),
        object(&["type", "user_id"], json!({"type": {"const": "user_actor"}, "user_id": {"type": "string"}})),
    ]}));
    s.insert("MemoryVersion".into(), object(
        &["type", "id", "memory_id", "memory_store_id", "operation", "created_at", "created_by", "path",
          "content", "content_sha256", "content_size_bytes", "redacted_at", "redacted_by"],
        json!({"type": {"const": "memory_version"}, "id": {"type": "string"}, "memory_id": {"type": "string"},
            "memory_store_id": {"type": "string"}, "operation": {"enum": ["created", "modified", "deleted"]},
            "created_at": time, "created_by": actor, "path": {"type": ["string", "null"]},
            "content": {"type": ["string", "null"]},
            "content_sha256": {"anyOf": [hash, {"type": "null"}]},
            "content_size_bytes": {"type": ["integer", "null"], "minimum": 0},
            "redacted_at": time_or_null, "redacted_by": actor})));
    s.insert(
        "MemoryVersionPage".into(),
        page(json!({"$ref": "#/components/schemas/MemoryVersion"})),
    );
    s
}
