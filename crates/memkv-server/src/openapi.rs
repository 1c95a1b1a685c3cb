//! `GET /openapi.json`: the OpenAPI 3.1 description of every route of [`crate::app::router`],
//! derived: each documented route's operation comes from its handler's `#[utoipa::path]`, its
//! schemas from the types the handler answers (`api::objects`, `memkv::wire`), and utoipa-axum
//! adds each handler to the router and the document together ([`crate::app::documented`]). This
//! module adds what no handler type carries: the document's header, its security schemes and
//! server, `/mcp` (served by the memkv-mcp crate), the links schemathesis follows from what
//! creates a store or a memory, and the two limits of the tool route that the server's
//! settings give. `tools/test-schemathesis.sh` validates it and fuzzes a live server against
//! it.

use serde_json::{Value, json};
use utoipa::openapi::security::{ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{OpenApi as Document, ServerBuilder};
use utoipa::{Modify, OpenApi};

use crate::error::ErrorBody;
use crate::routes::{MEMORIES, MEMORY, STORES, TOOL_ROUTE};
use crate::spec::{NoRetry, Retry, Seconds};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "memkv",
        description = "A per-user, transactional store for Claude's memory tool (memory_20250818), over HTTP."
    ),
    paths(mcp_post, mcp_get, mcp_delete),
    modifiers(&Access)
)]
struct Header;

/// The server that serves the document, and the two ways to send a key.
struct Access;

impl Modify for Access {
    fn modify(&self, doc: &mut Document) {
        doc.servers = Some(vec![
            ServerBuilder::new()
                .url("/")
                .description(Some("The server that serves this document"))
                .build(),
        ]);
        let components = doc.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "apiKey",
            SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::new("x-api-key"))),
        );
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// The errors of `/mcp`'s operations (its own answers are MCP's).
#[derive(utoipa::IntoResponses)]
#[allow(dead_code)]
enum McpErrors<'a> {
    /// Not a valid MCP request (a session id missing or unknown), or the x-memkv-store header
    /// is not a store id
    #[response(status = 400)]
    Invalid(String),
    /// No API key, or an unknown one
    #[response(status = 401, headers(("x-should-retry" = inline(NoRetry))))]
    Unauthenticated(ErrorBody<'a>),
    /// A Host or Origin that is not allowed
    #[response(status = 403)]
    Forbidden(String),
    /// Not a store this key may use
    #[response(status = 404, headers(("x-should-retry" = inline(NoRetry))))]
    NotFound(ErrorBody<'a>),
    /// An Accept header without application/json and text/event-stream
    #[response(status = 406)]
    NotAcceptable(String),
    /// Not a JSON-RPC message
    #[response(status = 415)]
    Unsupported(String),
    /// The key is over its rate limit (rate_limit_error)
    #[response(status = 429, headers(("Retry-After" = inline(Seconds)), ("x-should-retry" = inline(Retry))))]
    RateLimited(ErrorBody<'a>),
    /// The API keys cannot be read
    #[response(status = 500)]
    Internal(ErrorBody<'a>),
}

/// The store an admin key acts on over MCP.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Header)]
#[allow(dead_code)]
struct McpStore {
    /// The store, percent-encoded (admin keys; a store key acts on its own store).
    #[param(rename = "x-memkv-store")]
    store: Option<String>,
}

const MCP_DESCRIPTION: &str = "MCP streamable HTTP (protocol 2025-06-18). A store key acts on its store; an admin key names the store in the `x-memkv-store` header (percent-encoded). One tool, `memory`.";

/// `POST /mcp`, served by `memkv_mcp::http`.
#[utoipa::path(post, path = "/mcp", operation_id = "mcp_post",
    summary = "Send a JSON-RPC message", description = MCP_DESCRIPTION, params(McpStore),
    responses((status = 200, description = "The JSON-RPC answer, as JSON or an event stream",
            content((Object = "application/json"), (String = "text/event-stream"))),
        (status = 202, description = "A notification or response, accepted"),
        McpErrors))]
#[allow(dead_code)]
fn mcp_post() {}

/// `GET /mcp`.
#[utoipa::path(get, path = "/mcp", operation_id = "mcp_get",
    summary = "Open the session's event stream", description = MCP_DESCRIPTION, params(McpStore),
    responses((status = 200, description = "Server-sent events", body = String,
            content_type = "text/event-stream"),
        McpErrors))]
#[allow(dead_code)]
fn mcp_get() {}

/// `DELETE /mcp`.
#[utoipa::path(delete, path = "/mcp", operation_id = "mcp_delete",
    summary = "End a session", description = MCP_DESCRIPTION, params(McpStore),
    responses((status = 200, description = "The session is ended"), McpErrors))]
#[allow(dead_code)]
fn mcp_delete() {}

/// Every operation with no `security` of its own takes a key either way, or none on loopback
/// while the server has no keys.
fn security(doc: &mut Value) {
    for item in doc["paths"].as_object_mut().expect("paths").values_mut() {
        for op in item.as_object_mut().expect("a path item").values_mut() {
            if op.get("security").is_none() {
                op["security"] = json!([{"apiKey": []}, {"bearer": []}, {}]);
            }
        }
    }
}

/// Links from what creates a store or a memory to what uses it (schemathesis follows them in
/// its stateful phase).
fn links(doc: &mut Value) {
    let link = |op: &str, parameters: &Value| json!({"operationId": op, "parameters": parameters});
    let in_store = json!({"memory_store_id": "$response.body#/id"});
    let store_links: serde_json::Map<String, Value> = [
        "memory_stores_retrieve",
        "memory_stores_update",
        "memory_stores_archive",
        "memory_stores_delete",
        "memories_create",
        "memories_list",
        "memory_versions_list",
    ]
    .into_iter()
    .map(|op| (op.to_owned(), link(op, &in_store)))
    .collect();
    let memory = json!({"memory_store_id": "$request.path.memory_store_id", "memory_id": "$response.body#/id"});
    let version = json!({"memory_store_id": "$request.path.memory_store_id",
        "memory_version_id": "$response.body#/memory_version_id"});
    let memory_links = json!({
        "memories_retrieve": link("memories_retrieve", &memory),
        "memories_update": link("memories_update", &memory),
        "memories_delete": link("memories_delete", &memory),
        "memory_versions_list": link("memory_versions_list", &memory),
        "memory_versions_retrieve": link("memory_versions_retrieve", &version),
        "memory_versions_redact": link("memory_versions_redact", &version),
    });
    doc["paths"][STORES]["post"]["responses"]["200"]["links"] = Value::Object(store_links);
    doc["paths"][MEMORIES]["post"]["responses"]["200"]["links"] = memory_links.clone();
    doc["paths"][MEMORY]["post"]["responses"]["200"]["links"] = memory_links;
}

/// The tool route's limits as configured: the body cap and the most blocks in a message.
fn tool_limits(doc: &mut Value, max_blocks: usize, max_body: usize) {
    let body = &mut doc["paths"][TOOL_ROUTE]["post"]["requestBody"];
    body["required"] = json!(true);
    body["description"] = json!(format!("At most {max_body} bytes."));
    let message = &mut doc["components"]["schemas"]["ToolMessage"];
    for variant in message["oneOf"]
        .as_array_mut()
        .expect("the message's forms")
    {
        if variant["type"] == "array" {
            variant["minItems"] = json!(1);
            variant["maxItems"] = json!(max_blocks);
        }
    }
}

/// The document, with `max_blocks` and the body cap as configured.
pub fn document(max_blocks: usize, max_body: usize) -> Value {
    let (_, routes) = crate::app::documented();
    let doc = Header::openapi().merge_from(routes);
    let mut doc = serde_json::to_value(doc).expect("the document serializes");
    security(&mut doc);
    links(&mut doc);
    tool_limits(&mut doc, max_blocks, max_body);
    doc
}

#[cfg(test)]
mod tests;
