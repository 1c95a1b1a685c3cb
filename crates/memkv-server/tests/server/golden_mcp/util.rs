//! The `Session` of tests/it/golden.rs, over MCP: each store is served by a real memkv server on
//! a free loopback port, and every command is a `tools/call` of the `memory` tool, sent by
//! rmcp's streamable HTTP client to `/mcp`. The store is named in `x-memkv-store` (the server
//! has no keys and listens on loopback).

use std::collections::HashMap;
use std::sync::Arc;

use memkv::{Database, MemoryStore, ToolOutput};
use memkv_server::{Config, Server};
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, ClientConfig};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};

use crate::library;

pub use library::{
    Backend, Face, Fresh, Seen, current, each_backend, fresh, fresh_location, snapshot,
};

const USER: &str = "tester";

/// One user's session against a store served over MCP.
pub struct Session {
    pub store: Arc<Database>,
    runtime: tokio::runtime::Runtime,
    client: Option<RunningService<RoleClient, ClientConfig>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    served: Option<tokio::task::JoinHandle<()>>,
    _dir: tempfile::TempDir,
}

impl Session {
    /// MCP carries only command objects as arguments: whole `tool_use` blocks, arrays of them
    /// and inputs that are not objects are the Messages API's, not MCP's.
    pub const CARRIES_BLOCKS: bool = false;

    pub fn new(store: Database) -> Self {
        Session::serve(store, None)
    }

    /// A session whose calls carry a read-only key of the store (`user()` still writes, to set
    /// the store up).
    pub fn read_only(store: Database) -> Self {
        let scope = memkv::KeyScope::Store {
            store: USER.into(),
            read_only: true,
        };
        let (_, key) = store.add_key(&memkv::NewKey::new(scope)).unwrap();
        Session::serve(store, Some(key))
    }

    /// Serves `store` keyless, or with keys when `key` (one of them) is given.
    fn serve(store: Database, key: Option<String>) -> Self {
        let store = Arc::new(store);
        let dir = tempfile::tempdir().unwrap();
        let mut config = Config::new("127.0.0.1:0".parse().unwrap(), None);
        config.no_auth = key.is_none();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let server = runtime
            .block_on(Server::bind(Arc::clone(&store), config))
            .unwrap();
        let addr = server.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let served = runtime.spawn(server.run(async move {
            let _ = stopped.await;
        }));
        let mut headers =
            HashMap::from([("x-memkv-store".parse().unwrap(), USER.parse().unwrap())]);
        if let Some(key) = &key {
            headers.insert("x-api-key".parse().unwrap(), key.parse().unwrap());
        }
        let client = runtime
            .block_on(async {
                let transport = StreamableHttpClientTransport::from_config(
                    StreamableHttpClientTransportConfig::with_uri(format!("http://{addr}/mcp"))
                        .custom_headers(headers),
                );
                ClientConfig::default().serve(transport).await
            })
            .unwrap();
        Session {
            store,
            runtime,
            client: Some(client),
            stop: Some(stop),
            served: Some(served),
            _dir: dir,
        }
    }

    pub fn user(&self) -> MemoryStore<'_> {
        self.store.user(USER).unwrap()
    }

    /// The answer to a command object, as `{"content", "is_error"}`.
    #[track_caller]
    pub fn answer(&self, message: Value) -> Value {
        self.call("memory", message)
    }

    /// The answer of `memory_search` to `input`, as `{"content", "is_error"}`.
    #[track_caller]
    pub fn search(&self, input: Value) -> Value {
        self.call(memkv::SEARCH_TOOL_NAME, input)
    }

    #[track_caller]
    fn call(&self, tool: &'static str, message: Value) -> Value {
        let Value::Object(arguments) = message else {
            panic!("MCP carries only command objects: {message}");
        };
        assert_ne!(arguments.get("type"), Some(&json!("tool_use")));
        let client = self.client.as_ref().unwrap();
        let params = CallToolRequestParams::new(tool).with_arguments(arguments);
        let result = self.runtime.block_on(client.call_tool(params)).unwrap();
        let value = serde_json::to_value(&result).unwrap();
        let content = value["content"].as_array().unwrap();
        assert_eq!(content.len(), 1, "{value}");
        assert_eq!(content[0]["type"], "text", "{value}");
        json!({"content": content[0]["text"], "is_error": result.is_error == Some(true)})
    }
}

impl Face for Session {
    #[track_caller]
    fn run(&self, input: Value) -> ToolOutput {
        serde_json::from_value(self.answer(input)).unwrap()
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // End the MCP session, stop the server, and wait until it let go of the store.
        if let Some(client) = self.client.take() {
            let _ = self.runtime.block_on(client.cancel());
        }
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(served) = self.served.take() {
            let _ = self.runtime.block_on(served);
        }
    }
}
