//! The change feed's routes and schemas in the OpenAPI document.

use serde_json::{Map, Value, json};

use super::stores::{final_error, ok, op, path_param, query};
use crate::app::{CHANGES, STORE_CHANGES, WEBHOOK, WEBHOOKS};

fn params() -> Vec<Value> {
    vec![
        query(
            "after",
            "Answer the entries after this seq (0, the default: from the start of the log). Pass the previous answer's `next_after`.",
            json!({"type": "integer", "minimum": 0}),
        ),
        query(
            "limit",
            "Most entries on the page (default 100).",
            json!({"type": "integer", "minimum": 1, "maximum": 1000}),
        ),
        query(
            "wait",
            "Long poll: with no entry after `after`, wait up to this many seconds for one to commit (answered within 100 ms of its commit), then answer an empty page.",
            json!({"type": "number", "minimum": 0, "maximum": 60}),
        ),
    ]
}

fn feed(id: &str, summary: &str, description: &str, mut params: Vec<Value>) -> Value {
    params.extend(self::params());
    let mut op = op(
        id,
        summary,
        description,
        params,
        None,
        ok("ChangePage", "A page of the change log"),
    );
    op["responses"]["410"] = final_error(
        "The cursor expired: retention removed entries after `after`; start again from a full export (invalid_request_error)",
    );
    op
}

pub fn paths() -> Vec<(&'static str, Value)> {
    vec![
        (
            STORE_CHANGES,
            json!({"get": feed("changes_list", "Follow a store's changes",
                "The store's entries of the change log, oldest first: one per committed change of any face (the memory tool, MCP, this API, imports, restores, redactions, expiry).",
                vec![path_param("memory_store_id", "The store: its `memstore_…` id or memkv user id.")])}),
        ),
        (
            CHANGES,
            json!({"get": feed("changes_list_all", "Follow every store's changes",
                "Admin key. Every store's entries of the change log, oldest first.", vec![])}),
        ),
        (
            WEBHOOKS,
            json!({
                "post": op("webhooks_create", "Register a webhook endpoint",
                    "Admin key. memkv serve POSTs each change-log entry committed from now on (of `stores`, of `events`; all when empty) to `url`, signed as the Standard Webhooks specification says. The answer's `secret` is shown only here.",
                    vec![], Some("WebhookCreate"), ok("WebhookCreated", "The endpoint and its signing secret")),
                "get": op("webhooks_list", "List webhook endpoints",
                    "Admin key. Each endpoint with the last seq delivered, failures in a row and the next attempt.",
                    vec![], None, ok("WebhookList", "Every endpoint")),
            }),
        ),
        (
            WEBHOOK,
            json!({"delete": op("webhooks_delete", "Remove a webhook endpoint", "Admin key.",
                vec![path_param("webhook_id", "The endpoint (`wh_…`).")], None,
                ok("DeletedWebhook", "The endpoint is removed"))}),
        ),
    ]
}

pub fn schemas() -> Map<String, Value> {
    let nullable = |t: &str| json!({"type": [t, "null"]});
    let mut s = Map::new();
    s.insert(
        "ChangeEntry".into(),
        json!({"type": "object", "required": ["seq", "type", "memory_store_id", "created_by", "created_at"],
            "additionalProperties": false,
            "properties": {
                "seq": {"type": "integer", "minimum": 1},
                "type": {"enum": memkv::ChangeKind::all().map(memkv::ChangeKind::event_type).collect::<Vec<_>>()},
                "memory_store_id": {"type": "string"},
                "memory_id": {"type": "string"},
                "memory_version_id": {"type": "string"},
                "path": nullable("string"),
                "previous_path": nullable("string"),
                "content_sha256": {"anyOf": [{"type": "string", "pattern": "^[0-9a-f]{64}$"}, {"type": "null"}]},
                "content_size_bytes": {"type": ["integer", "null"], "minimum": 0},
                "created_by": {"anyOf": [{"$ref": "#/components/schemas/Actor"}, {"type": "null"}]},
                "created_at": {"type": "string", "format": "date-time"}
            }}),
    );
    let events = json!({"type": "array", "items": {"enum": memkv::ChangeKind::all().map(memkv::ChangeKind::event_type).collect::<Vec<_>>()}});
    let webhook = |secret: bool| {
        let mut required = vec![
            "type",
            "id",
            "url",
            "stores",
            "events",
            "created_at",
            "delivered_seq",
            "failures",
            "next_attempt_at",
            "last_error",
        ];
        let mut properties = json!({
            "type": {"const": "webhook"}, "id": {"type": "string"}, "url": {"type": "string"},
            "stores": {"type": "array", "items": {"type": "string"}}, "events": events.clone(),
            "created_at": {"type": "string", "format": "date-time"},
            "delivered_seq": {"type": "integer", "minimum": 0},
            "failures": {"type": "integer", "minimum": 0},
            "next_attempt_at": {"type": ["string", "null"], "format": "date-time"},
            "last_error": {"type": ["string", "null"]}});
        if secret {
            required.push("secret");
            properties["secret"] = json!({"type": "string", "pattern": "^whsec_"});
        }
        json!({"type": "object", "required": required, "additionalProperties": false, "properties": properties})
    };
    s.insert("Webhook".into(), webhook(false));
    s.insert("WebhookCreated".into(), webhook(true));
    s.insert(
        "WebhookList".into(),
        json!({"type": "object", "required": ["data"], "additionalProperties": false,
            "properties": {"data": {"type": "array", "items": {"$ref": "#/components/schemas/Webhook"}}}}),
    );
    s.insert(
        "WebhookCreate".into(),
        json!({"type": "object", "required": ["url"], "additionalProperties": false,
            "properties": {
                "url": {"type": "string", "pattern": "^https?://[^/\\s]", "maxLength": 2048},
                "stores": {"type": "array", "items": {"type": "string", "minLength": 1}},
                "events": events}}),
    );
    s.insert(
        "DeletedWebhook".into(),
        json!({"type": "object", "required": ["type", "id"], "additionalProperties": false,
            "properties": {"type": {"const": "webhook_deleted"}, "id": {"type": "string"}}}),
    );
    s.insert(
        "ChangePage".into(),
        json!({"type": "object", "required": ["data", "next_after"], "additionalProperties": false,
        "properties": {
            "data": {"type": "array", "items": {"$ref": "#/components/schemas/ChangeEntry"}},
            "next_after": {"type": "integer", "minimum": 0}
        }}),
    );
    s
}
