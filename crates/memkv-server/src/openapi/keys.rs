//! The operator's routes and schemas in the OpenAPI document: API keys, stores' settings,
//! backups.

use serde_json::{Map, Value, json};

use super::stores::{final_error, ok, op, path_param, query};
use crate::app::{EXPORT, IMPORT, KEY, KEYS, SETTINGS, STORE_EXPORT};

/// A 200 whose body is an export (JSON Lines, `docs/export-format.md`).
fn export_ok() -> Value {
    json!({"description": "The export, streamed from one consistent snapshot (JSON Lines: header, stores, memories, versions, trailer with checksums)",
        "content": {"application/x-ndjson": {"schema": {"type": "string"}}}})
}

fn export_op(id: &str, summary: &str, description: &str, params: Vec<Value>) -> Value {
    let mut op = op(id, summary, description, params, None, export_ok());
    op["responses"]["410"] = final_error(
        "The change log no longer reaches back to `since`: take a full export (invalid_request_error)",
    );
    op
}

pub fn paths() -> Vec<(&'static str, Value)> {
    let store = || {
        vec![path_param(
            "memory_store_id",
            "The store: its `memstore_…` id or memkv user id (it need not exist yet).",
        )]
    };
    vec![
        (
            STORE_EXPORT,
            json!({"get": export_op("export_store", "Export a store",
                "The store's memories and versions in the export format, what `memkv export --user` writes; a store key or an admin key. Writes go on meanwhile.",
                store())}),
        ),
        (
            EXPORT,
            json!({"get": export_op("export_all", "Export every store",
            "Admin key. Every store (or those named by `user`) in the export format, what `memkv export` writes. Writes go on meanwhile.",
            vec![
                query("user", "Only this store (repeatable; not with `since`).", json!({"type": "string", "minLength": 1})),
                query("since", "An incremental export of every store: the stores changed after this change-log seq (the `seq` of the export it follows).", json!({"type": "integer", "minimum": 0})),
            ])}),
        ),
        (
            IMPORT,
            json!({"post": {
                "operationId": "import",
                "summary": "Import an export",
                "description": "Admin key. The body is an export (what `memkv export` or the export routes write); it is verified whole, then applied in one transaction, or not at all.",
                "security": [{"apiKey": []}, {"bearer": []}, {}],
                "parameters": [
                    query("conflict", "What a memory that exists already does: refuse the import (default), skip it, or replace it.", json!({"enum": ["refuse", "skip", "replace"]})),
                    query("user", "Only this store of the export (repeatable).", json!({"type": "string", "minLength": 1}))
                ],
                "requestBody": {"required": true, "content": {"application/x-ndjson": {"schema": {"type": "string"}}}},
                "responses": op("import", "", "", vec![], None, ok("ImportSummary", "What was imported"))["responses"].clone()
            }}),
        ),
        (
            SETTINGS,
            json!({
                "get": op("settings_retrieve", "A store's settings",
                    "The store's own quotas, time-to-live, history retention and secrets policy (`own`), and what its commands are checked against (`effective`: its own over the server's defaults; `off`: without limit).",
                    store(), None, ok("StoreSettings", "The store's settings")),
                "patch": op("settings_update", "Change a store's settings",
                    "Admin key. Each field given with a value becomes the store's own; each given as `null` goes back to the server's default; the others stay. Every server of the database applies them within a second, this one at once.",
                    store(), Some("StoreSettingsPatch"), ok("StoreSettings", "The store's settings")),
            }),
        ),
        (
            KEYS,
            json!({
                "post": op("keys_create", "Add an API key",
                    "Admin key. A key for one store (`store`; `read_only`: reads only) or, without `store`, for every store (admin), with an optional label and expiry. The answer's `key` is shown only here: the database keeps its SHA-256. Every server of the database accepts it within a second, this one at once.",
                    vec![], Some("ApiKeyCreate"), ok("ApiKeyCreated", "The key's record and the key")),
                "get": op("keys_list", "List API keys",
                    "Admin key. Every key's record (never a key), expired ones included.",
                    vec![], None, ok("ApiKeyList", "Every key")),
            }),
        ),
        (
            KEY,
            json!({"delete": op("keys_delete", "Revoke an API key",
                "Admin key. Every server of the database refuses the key within a second, this one at once.",
                vec![path_param("key_id", "The key (`key_…`).")], None,
                ok("DeletedApiKey", "The key is revoked"))}),
        ),
    ]
}

pub fn schemas() -> Map<String, Value> {
    let mut s = Map::new();
    let duration = json!({"type": "string", "pattern": "^(off|[0-9]+ ?[a-z]+)$"});
    let count = |min: u64| json!({"type": "integer", "minimum": min});
    let bound = json!({"anyOf": [{"type": "integer", "minimum": 0}, {"const": "off"}]});
    let policy = json!({"enum": ["reject", "redact", "off"]});
    let fields = |nullable: bool| {
        let or_null = |v: Value| {
            if nullable {
                json!({"anyOf": [v, {"type": "null"}]})
            } else {
                v
            }
        };
        json!({
            "max_files": or_null(count(1)),
            "max_bytes": or_null(count(1)),
            "ttl": or_null(duration.clone()),
            "history_max_age": or_null(duration.clone()),
            "history_max_versions": or_null(bound.clone()),
            "history_max_bytes": or_null(bound.clone()),
            "secrets": or_null(policy.clone()),
        })
    };
    s.insert(
        "ImportSummary".into(),
        json!({"type": "object", "additionalProperties": false,
            "required": ["type", "stores", "files", "bytes", "versions", "skipped", "replaced", "merged"],
            "properties": {
                "type": {"const": "import_summary"},
                "stores": {"type": "integer", "minimum": 0},
                "files": {"type": "integer", "minimum": 0},
                "bytes": {"type": "integer", "minimum": 0},
                "versions": {"type": "integer", "minimum": 0},
                "skipped": {"type": "integer", "minimum": 0},
                "replaced": {"type": "integer", "minimum": 0},
                "merged": {"type": "integer", "minimum": 0}
            }}),
    );
    s.insert(
        "StoreSettingsPatch".into(),
        json!({"type": "object", "additionalProperties": false, "properties": fields(true)}),
    );
    s.insert(
        "StoreSettings".into(),
        json!({"type": "object", "required": ["type", "memory_store_id", "own", "effective"],
        "additionalProperties": false,
        "properties": {
            "type": {"const": "memory_store_settings"},
            "memory_store_id": {"type": "string"},
            "own": {"type": "object", "additionalProperties": false, "properties": fields(false)},
            "effective": {"type": "object", "additionalProperties": false,
                "required": memkv::SETTINGS, "properties": fields(false)}
        }}),
    );
    let key = |with_key: bool| {
        let mut required = vec![
            "type",
            "id",
            "store",
            "read_only",
            "label",
            "created_at",
            "expires_at",
            "last_used_at",
        ];
        let mut properties = json!({
            "type": {"const": "api_key"},
            "id": {"type": "string", "pattern": "^key_[0-9a-f]{12}$"},
            "store": {"type": ["string", "null"]},
            "read_only": {"type": "boolean"},
            "label": {"type": "string"},
            "created_at": {"type": "string", "format": "date-time"},
            "expires_at": {"type": ["string", "null"], "format": "date-time"},
            "last_used_at": {"type": ["string", "null"], "format": "date-time"}});
        if with_key {
            required.push("key");
            properties["key"] = json!({"type": "string", "pattern": "^mkv_[0-9a-f]{64}$"});
        }
        json!({"type": "object", "required": required, "additionalProperties": false, "properties": properties})
    };
    s.insert("ApiKey".into(), key(false));
    s.insert("ApiKeyCreated".into(), key(true));
    s.insert(
        "ApiKeyList".into(),
        json!({"type": "object", "required": ["data"], "additionalProperties": false,
            "properties": {"data": {"type": "array", "items": {"$ref": "#/components/schemas/ApiKey"}}}}),
    );
    s.insert(
        "ApiKeyCreate".into(),
        json!({"type": "object", "additionalProperties": false,
            "properties": {
                "store": {"type": ["string", "null"], "minLength": 1},
                "read_only": {"type": "boolean"},
                "label": {"type": "string", "maxLength": 200},
                "expires_at": {"type": ["string", "null"], "format": "date-time"}}}),
    );
    s.insert(
        "DeletedApiKey".into(),
        json!({"type": "object", "required": ["type", "id"], "additionalProperties": false,
            "properties": {"type": {"const": "api_key_deleted"}, "id": {"type": "string"}}}),
    );
    s
}
