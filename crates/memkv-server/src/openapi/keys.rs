//! The API keys' routes and schemas in the OpenAPI document.

use serde_json::{Map, Value, json};

use super::stores::{ok, op, path_param};
use crate::app::{KEY, KEYS};

pub fn paths() -> Vec<(&'static str, Value)> {
    vec![
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
