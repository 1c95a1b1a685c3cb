//! The `Session` of tests/it/golden.rs, over HTTP: each store is served by a real memkv server
//! (the one `memkv serve` runs) on a free loopback port, and every message is a POST.

use std::cell::RefCell;
use std::sync::Arc;

use memkv::protocol;
use memkv::{Database, MemoryStore, Response, ToolOutput, ToolResult};
use memkv_server::{Config, Server};
use serde_json::Value;

use crate::client::Client;

use crate::library;

pub use library::{Backend, Face, Fresh, current, each_backend, fresh, fresh_location, snapshot};

/// One user's session against a store served over HTTP.
pub struct Session {
    pub store: Arc<Database>,
    client: RefCell<Client>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    _dir: tempfile::TempDir,
}

const USER: &str = "tester";

impl Session {
    /// Whether this face carries whole `tool_use` blocks (and inputs that are not objects).
    pub const CARRIES_BLOCKS: bool = true;

    pub fn new(store: Database) -> Self {
        Session::serve(store, None)
    }

    /// A session whose messages carry a read-only key of the store (`user()` still writes, to
    /// set the store up).
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
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (bound, addr) = std::sync::mpsc::channel();
        let served = Arc::clone(&store);
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let server = Server::bind(served, config).await.unwrap();
                bound.send(server.local_addr().unwrap()).unwrap();
                server
                    .run(async move {
                        let _ = stopped.await;
                    })
                    .await;
            });
        });
        let addr = addr.recv().unwrap();
        Session {
            store,
            client: RefCell::new(match &key {
                Some(key) => Client::with_key(addr, key),
                None => Client::new(addr),
            }),
            stop: Some(stop),
            thread: Some(thread),
            _dir: dir,
        }
    }

    pub fn user(&self) -> MemoryStore<'_> {
        self.store.user(USER).unwrap()
    }

    /// The answer to any message, as JSON; the body must be exactly what `memkv exec` prints.
    #[track_caller]
    pub fn answer(&self, message: Value) -> Value {
        let body = serde_json::to_vec(&message).unwrap();
        let reply = self.client.borrow_mut().tool(USER, &body);
        assert_eq!(reply.status, 200, "{message}: {}", reply.text());
        assert_eq!(
            reply.header("content-type"),
            Some("application/json"),
            "{message}"
        );
        let value = reply.json();
        assert_eq!(
            reply.text(),
            canonical(&value),
            "not memkv's line for {message}"
        );
        value
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
        // Close the client's connection, stop the server, and wait until it let go of the store.
        self.client
            .replace(Client::new("127.0.0.1:9".parse().unwrap()));
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The line `memkv exec` prints for an answer: the library's own types, serialized.
pub fn canonical(value: &Value) -> String {
    let typed: Response = if value.is_array() {
        Response::Results(serde_json::from_value(value.clone()).unwrap())
    } else if value.get("type").is_some() {
        Response::Result(serde_json::from_value::<ToolResult>(value.clone()).unwrap())
    } else {
        Response::Output(serde_json::from_value(value.clone()).unwrap())
    };
    protocol::to_line(&typed)
}
