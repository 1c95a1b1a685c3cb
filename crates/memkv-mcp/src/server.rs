//! The MCP server: `initialize`, `tools/list` with `memory` and `memory_search`, and `tools/call`,
//! answered by the library's protocol module (locally) or by a memkv server (forwarded).

use std::sync::Arc;

use memkv::protocol::{self, Message, Response};
use memkv::{OwnedMemoryStore, ToolOutput, ToolUse};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::Value;
use tokio::sync::Semaphore;

use crate::forward::Forwarder;
use crate::tool;

/// The store granted to one request over HTTP (by `http`'s key check), read by the tool handler.
#[derive(Clone)]
pub(crate) struct Grant(pub(crate) OwnedMemoryStore);

/// Where a tool call is answered.
#[derive(Debug, Clone)]
enum Target {
    /// This process owns the database.
    Local(OwnedMemoryStore),
    /// A running `memkv serve` owns it.
    Remote(Forwarder),
    /// The store comes with each HTTP request, put there by [`crate::http`]'s gate; at most
    /// as many calls run at once as the semaphore has permits.
    PerRequest(Option<Arc<Semaphore>>),
}

/// The `memory` and `memory_search` tools as an MCP server. Cheap to clone.
#[derive(Debug, Clone)]
pub struct MemoryServer {
    target: Target,
}

impl MemoryServer {
    /// Answers with a store this process owns (runs each command off the async workers).
    pub fn local(user: OwnedMemoryStore) -> Self {
        MemoryServer {
            target: Target::Local(user),
        }
    }

    /// Forwards every call to a running `memkv serve`.
    pub fn remote(forwarder: Forwarder) -> Self {
        MemoryServer {
            target: Target::Remote(forwarder),
        }
    }

    /// For streamable HTTP: the store is the one granted to each request.
    pub(crate) fn per_request(in_flight: Option<Arc<Semaphore>>) -> Self {
        MemoryServer {
            target: Target::PerRequest(in_flight),
        }
    }

    /// Answers one call of `tool` (`memory` or `memory_search`) with `input`.
    async fn execute(
        &self,
        tool: &'static str,
        input: Value,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let mut permit = None;
        let user = match &self.target {
            Target::Remote(forwarder) => {
                return match forwarder.call(tool, &input).await {
                    Ok(output) => Ok(tool::result(output)),
                    Err(e) => {
                        tracing::error!(store = forwarder.store(), "memory call failed: {e}");
                        Err(ErrorData::internal_error(e.to_string(), None))
                    }
                };
            }
            Target::Local(user) => user.clone(),
            Target::PerRequest(in_flight) => {
                if let Some(in_flight) = in_flight {
                    permit = Some(Arc::clone(in_flight).try_acquire_owned().map_err(|_| {
                        ErrorData::internal_error("the memkv server is busy: retry shortly", None)
                    })?);
                }
                context
                    .extensions
                    .get::<axum::http::request::Parts>()
                    .and_then(|parts| parts.extensions.get::<Grant>())
                    .map(|grant| grant.0.clone())
                    .ok_or_else(|| {
                        ErrorData::internal_error("no store granted to this request", None)
                    })?
            }
        };
        let message = if tool == memkv::SEARCH_TOOL_NAME {
            Message::Block(ToolUse {
                id: "mcp".into(),
                name: tool.into(),
                input,
            })
        } else {
            Message::Input(input)
        };
        let answered = tokio::task::spawn_blocking(move || {
            let (response, errors) = protocol::answer(&user.handle(), message);
            for e in errors {
                tracing::error!(store = user.id(), "memory call failed in storage: {e}");
            }
            // Held until the command is done, even if the client has gone.
            drop(permit);
            response
        })
        .await;
        match answered {
            Ok(Response::Output(output)) => Ok(tool::result(output)),
            Ok(Response::Result(result)) => Ok(tool::result(ToolOutput {
                content: result.content,
                is_error: result.is_error,
            })),
            Ok(_) => unreachable!("one call is answered with one output"),
            Err(e) => Err(ErrorData::internal_error(
                format!("the command did not finish: {e}"),
                None,
            )),
        }
    }
}

impl ServerHandler for MemoryServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("memkv", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "memkv: the memory tool (memory_20250818). Call `memory` with \
                 {\"command\": \"view\", \"path\": \"/memories\"} to see what is stored.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(vec![
            tool::definition(),
            tool::search_definition(),
        ]))
    }

    /// None, `memory` included: rmcp then leaves the arguments to memkv, which answers a
    /// malformed command with the model's own error strings.
    fn get_tool(&self, _name: &str) -> Option<Tool> {
        None
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = match request.name.as_ref() {
            tool::NAME => tool::NAME,
            memkv::SEARCH_TOOL_NAME => memkv::SEARCH_TOOL_NAME,
            other => {
                return Err(ErrorData::invalid_params(
                    format!("unknown tool: {other}"),
                    None,
                ));
            }
        };
        let input = Value::Object(request.arguments.unwrap_or_default());
        self.execute(name, input, &context).await.map(Into::into)
    }
}
