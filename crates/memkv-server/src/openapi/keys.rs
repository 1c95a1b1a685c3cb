//! The API keys' and the stores' settings' routes and schemas in the OpenAPI document.

use serde_json::{Map, Value, json};

use super::stores::{ok, op, path_param};
use crate::app::{KEY, KEYS, SETTINGS};

pub fn paths() -> Vec<(&'static str, Value)> {
    let store = || {
        vec![path_param(
            "memory_store_id",
            "The store: its `memstore_…` id or memkv user id (it need not exist yet).",
        )]
    };
    vec![
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
