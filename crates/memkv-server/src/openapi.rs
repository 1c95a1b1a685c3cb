//! `GET /openapi.json`: the OpenAPI 3.1 description of every route of [`crate::router`].
//! A test checks that its paths are exactly [`crate::ROUTES`], and the router serves exactly
//! those (`tools/test-schemathesis.sh` fuzzes a live server against this document).

use serde_json::{Value, json};

use crate::app::TOOL_ROUTE;
use stores::final_error;

mod changes;
mod keys;
mod search;
mod stores;

/// `/mcp`: MCP's streamable HTTP transport (JSON-RPC), served by the memkv-mcp crate. Its
/// messages are MCP's; `tools/test-mcp.sh` tests it with the official MCP client, and the
/// schemathesis run leaves it out.
fn mcp() -> Value {
    let plain = |description: &str| json!({"description": description, "content": {"text/plain": {"schema": {"type": "string"}}}});
    let error = |description: &str| {
        json!({"description": description,
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}})
    };
    let common = json!({
        "400": plain("Not a valid MCP request (a session id missing or unknown), or the x-memkv-store header is not a store id"),
        "401": final_error("No API key, or an unknown one"),
        "403": plain("A Host or Origin that is not allowed"),
        "404": final_error("Not a store this key may use"),
        "406": plain("An Accept header without application/json and text/event-stream"),
        "429": final_error("The key is over its rate limit (rate_limit_error)"),
        "415": plain("Not a JSON-RPC message"),
        "500": error("The API keys cannot be read")
    });
    let op = |id: &str, summary: &str, ok: Value| {
        let mut responses = common.clone();
        responses
            .as_object_mut()
            .expect("an object")
            .extend(ok.as_object().expect("an object").clone());
        json!({"operationId": id, "summary": summary,
            "description": "MCP streamable HTTP (protocol 2025-06-18). A store key acts on its store; an admin key names the store in the `x-memkv-store` header (percent-encoded). One tool, `memory`.",
            "security": [{"apiKey": []}, {"bearer": []}, {}],
            "parameters": [{"name": "x-memkv-store", "in": "header", "required": false,
                "schema": {"type": "string"}}],
            "responses": responses})
    };
    json!({
        "post": op("mcp_post", "Send a JSON-RPC message",
            json!({"200": {"description": "The JSON-RPC answer, as JSON or an event stream",
                "content": {"application/json": {"schema": {"type": "object"}},
                            "text/event-stream": {"schema": {"type": "string"}}}},
                   "202": {"description": "A notification or response, accepted"}})),
        "get": op("mcp_get", "Open the session's event stream",
            json!({"200": {"description": "Server-sent events",
                "content": {"text/event-stream": {"schema": {"type": "string"}}}}})),
        "delete": op("mcp_delete", "End a session",
            json!({"200": {"description": "The session is ended"}}))
    })
}

/// The document, with `max_blocks` and the body cap as configured.
pub fn document(max_blocks: usize, max_body: usize) -> Value {
    let error = |description: &str| {
        json!({
            "description": description,
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
        })
    };
    let overloaded =
        stores::overloaded("The in-flight limit is reached; retry after the given seconds");
    let text = |description: &str| json!({"description": description, "content": {"text/plain": {"schema": {"type": "string"}}}});
    let tool = json!({
        "post": {
            "operationId": "tool",
            "summary": "Run memory-tool commands against one store",
            "description": "Takes what `memkv exec` takes and answers exactly what it answers. Model mistakes (a bad path, a missing file) are answered 200 with `is_error: true`.",
            "security": [{"apiKey": []}, {"bearer": []}, {}],
            "parameters": [{
                "name": "store",
                "in": "path",
                "required": true,
                "description": "The memkv user id, as one percent-encoded path segment (`/` and `.` encoded too). At most 256 bytes, no control characters.",
                "schema": {"type": "string", "minLength": 1}
            }],
            "requestBody": {
                "required": true,
                "description": format!("At most {max_body} bytes."),
                "content": {"application/json": {"schema": {"anyOf": [
                    {"$ref": "#/components/schemas/Input"},
                    {"$ref": "#/components/schemas/ToolUse"},
                    {"type": "array", "minItems": 1, "maxItems": max_blocks,
                     "items": {"$ref": "#/components/schemas/ToolUse"}}
                ]}}}
            },
            "responses": {
                "200": {
                    "description": "memkv's answer: a bare output for an input, a tool_result block for a block, an array of them for an array",
                    "content": {"application/json": {"schema": {"anyOf": [
                        {"$ref": "#/components/schemas/Output"},
                        {"$ref": "#/components/schemas/ToolResult"},
                        {"type": "array", "items": {"$ref": "#/components/schemas/ToolResult"}}
                    ]}}}
                },
                "400": final_error("The message is refused whole (not JSON, a block without an id, an empty array), the content type is not application/json, the store id is not one memkv accepts, or the body was not received in time"),
                "401": final_error("No API key, or an unknown one (authentication_error)"),
                "403": final_error("Keyless access from a host name other than localhost (permission_error)"),
                "404": final_error("Not a store this key may use; the same answer whether it exists or not (not_found_error)"),
                "405": final_error("Another method than POST"),
                "413": final_error("The body is over the cap, or holds too many blocks (request_too_large)"),
                "429": stores::overloaded("The key or the store is over its rate limit (rate_limit_error); retry after the given seconds"),
                "500": error("The API keys cannot be read (api_error)"),
                "503": overloaded
            }
        }
    });
    let mut paths = serde_json::Map::new();
    paths.insert(TOOL_ROUTE.to_owned(), tool);
    paths.insert(
        "/healthz".into(),
        json!({"get": {"operationId": "healthz", "summary": "Liveness",
            "security": [{}],
            "responses": {"200": text("Up"), "405": final_error("Another method than GET")}}}),
    );
    paths.insert(
        "/readyz".into(),
        json!({"get": {"operationId": "readyz", "summary": "Readiness: the store is open and the server is serving",
            "security": [{}],
            "responses": {"200": text("Ready"), "503": overloaded.clone(), "405": final_error("Another method than GET")}}}),
    );
    paths.insert(
        "/metrics".into(),
        json!({"get": {"operationId": "metrics", "summary": "Prometheus metrics (admin key)",
        "security": [{"apiKey": []}, {"bearer": []}, {}],
        "responses": {
            "200": text("Prometheus text exposition format 0.0.4"),
            "401": final_error("No API key, or an unknown one"),
            "403": final_error("A store key, or keyless access from another host name"),
            "405": final_error("Another method than GET"),
            "429": stores::overloaded("The key is over its rate limit (rate_limit_error)"),
            "500": error("The API keys cannot be read")
        }}}),
    );
    paths.insert(
        "/openapi.json".into(),
        json!({"get": {"operationId": "openapi", "summary": "This document",
            "security": [{}],
            "responses": {"200": {"description": "OpenAPI 3.1",
                "content": {"application/json": {"schema": {"type": "object"}}}},
                "405": final_error("Another method than GET")}}}),
    );
    paths.insert(memkv_mcp::http::PATH.to_owned(), mcp());
    for (path, item) in stores::paths()
        .into_iter()
        .chain(changes::paths())
        .chain(keys::paths())
        .chain(search::paths())
    {
        paths.insert(path.to_owned(), item);
    }
    let path_text = json!({"type": "string"});
    let mut doc = json!({
        "openapi": "3.1.0",
        "info": {
            "title": "memkv",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "A per-user, transactional store for Claude's memory tool (memory_20250818), over HTTP."
        },
        "servers": [{"url": "/", "description": "The server that serves this document"}],
        "paths": paths,
        "components": {
            "securitySchemes": {
                "apiKey": {"type": "apiKey", "in": "header", "name": "x-api-key"},
                "bearer": {"type": "http", "scheme": "bearer"}
            },
            "schemas": {
                "Input": {
                    "type": "object",
                    "description": "The input of a memory tool_use block (memory_20250818)",
                    "required": ["command"],
                    "properties": {
                        "command": {"enum": ["view", "create", "str_replace", "insert", "delete", "rename"]},
                        "path": path_text,
                        "view_range": {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 2},
                        "file_text": {"type": "string"},
                        "old_str": {"type": "string"},
                        "new_str": {"type": "string"},
                        "insert_line": {"type": "integer"},
                        "insert_text": {"type": "string"},
                        "old_path": path_text,
                        "new_path": path_text
                    }
                },
                "ToolUse": {
                    "type": "object",
                    "required": ["type", "id", "name", "input"],
                    "properties": {
                        "type": {"const": "tool_use"},
                        "id": {"type": "string", "minLength": 1},
                        "name": {"type": "string"},
                        "input": {"$ref": "#/components/schemas/Input"}
                    }
                },
                "Output": {
                    "type": "object",
                    "required": ["content", "is_error"],
                    "additionalProperties": false,
                    "properties": {"content": {"type": "string"}, "is_error": {"type": "boolean"}}
                },
                "ToolResult": {
                    "type": "object",
                    "required": ["type", "tool_use_id", "content", "is_error"],
                    "additionalProperties": false,
                    "properties": {
                        "type": {"const": "tool_result"},
                        "tool_use_id": {"type": "string"},
                        "content": {"type": "string"},
                        "is_error": {"type": "boolean"}
                    }
                },
                "Error": {
                    "type": "object",
                    "required": ["type", "error"],
                    "additionalProperties": false,
                    "properties": {
                        "type": {"const": "error"},
                        "error": {
                            "type": "object",
                            "required": ["type", "message"],
                            "additionalProperties": false,
                            "properties": {
                                "type": {"enum": [
                                    "invalid_request_error", "authentication_error", "permission_error",
                                    "not_found_error", "request_too_large", "rate_limit_error",
                                    "api_error", "overloaded_error"
                                ]},
                                "message": {"type": "string"}
                            }
                        }
                    }
                }
            }
        }
    });
    doc["components"]["schemas"]
        .as_object_mut()
        .expect("an object")
        .extend(
            stores::schemas()
                .into_iter()
                .chain(changes::schemas())
                .chain(keys::schemas())
                .chain(search::schemas()),
        );
    doc
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::ROUTES;

    #[test]
    fn every_operation_says_how_it_is_authenticated() {
        let doc = document(64, 1 << 20);
        assert_eq!(doc["servers"][0]["url"], "/");
        for (path, item) in doc["paths"].as_object().unwrap() {
            for (method, op) in item.as_object().unwrap() {
                let security = op["security"].as_array();
                assert!(
                    security.is_some_and(|s| !s.is_empty()),
                    "{method} {path} has no security"
                );
            }
        }
    }

    #[test]
    fn the_document_lists_exactly_the_routes() {
        let doc = document(64, 1000);
        assert_eq!(doc["openapi"], "3.1.0");
        let mut documented: Vec<(String, String)> = doc["paths"]
            .as_object()
            .unwrap()
            .iter()
            .flat_map(|(path, item)| {
                item.as_object()
                    .unwrap()
                    .keys()
                    .map(move |m| (m.clone(), path.clone()))
            })
            .collect();
        let mut routes: Vec<(String, String)> = ROUTES
            .iter()
            .map(|(m, p)| ((*m).to_owned(), (*p).to_owned()))
            .collect();
        documented.sort();
        routes.sort();
        assert_eq!(documented, routes);
    }

    #[test]
    fn every_reference_resolves() {
        fn refs(v: &Value, out: &mut Vec<String>) {
            match v {
                Value::Object(map) => {
                    if let Some(Value::String(r)) = map.get("$ref") {
                        out.push(r.clone());
                    }
                    map.values().for_each(|v| refs(v, out));
                }
                Value::Array(items) => items.iter().for_each(|v| refs(v, out)),
                _ => {}
            }
        }
        let doc = document(64, 1000);
        let mut found = Vec::new();
        refs(&doc, &mut found);
        assert!(found.len() > 30);
        for r in found {
            let name = r.strip_prefix("#/components/schemas/").expect(&r);
            assert!(doc["components"]["schemas"].get(name).is_some(), "{r}");
        }
    }

    #[test]
    fn every_link_names_an_operation_and_its_parameters() {
        let doc = document(64, 1000);
        let ops: Vec<&Value> = doc["paths"]
            .as_object()
            .unwrap()
            .values()
            .flat_map(|item| item.as_object().unwrap().values())
            .collect();
        let mut links = 0;
        for op in &ops {
            for response in op["responses"].as_object().unwrap().values() {
                let Some(found) = response.get("links") else {
                    continue;
                };
                for link in found.as_object().unwrap().values() {
                    links += 1;
                    let target = ops
                        .iter()
                        .find(|o| o["operationId"] == link["operationId"])
                        .unwrap_or_else(|| panic!("{link}"));
                    for name in link["parameters"].as_object().unwrap().keys() {
                        let params = target["parameters"].as_array().unwrap();
                        assert!(params.iter().any(|p| p["name"] == **name), "{link}");
                    }
                }
            }
        }
        assert!(links >= 19, "{links}");
    }
}
