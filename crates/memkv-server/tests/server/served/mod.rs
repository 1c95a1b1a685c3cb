//! A real server on a loopback port for the API's tests, and the helpers they share.

use std::sync::Arc;

use memkv::Database;
use memkv::{ApiKey, KeyScope, NewKey};
use memkv_server::{Config, Server};
use serde_json::Value;

use crate::client::{Client, Reply};
use crate::library::Fresh;

/// A server on a free loopback port with an admin key, over a fresh store of the current
/// backend, stopped on drop.
pub struct Served {
    pub addr: std::net::SocketAddr,
    pub admin: String,
    /// The database the server serves.
    pub db: Arc<Database>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    _dir: tempfile::TempDir,
}

impl Served {
    pub fn new() -> Served {
        Served::over(Database::builder().max_file_bytes(1000).fresh().unwrap())
    }

    pub fn over(store: Database) -> Served {
        Served::configured(store, |_| {})
    }

    /// A server whose webhooks may be delivered to a receiver on loopback.
    pub fn delivering_locally(store: Database) -> Served {
        Served::configured(store, |c| c.webhooks.allow_private = true)
    }

    pub fn configured(store: Database, tweak: impl FnOnce(&mut Config)) -> Served {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(store);
        let db = Arc::clone(&store);
        let (_, admin) = store.add_key(&NewKey::new(KeyScope::Admin)).unwrap();
        let mut config = Config::new("127.0.0.1:0".parse().unwrap(), None);
        tweak(&mut config);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (bound, addr) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let server = Server::bind(store, config).await.unwrap();
                bound.send(server.local_addr().unwrap()).unwrap();
                server
                    .run(async move {
                        let _ = stopped.await;
                    })
                    .await;
            });
        });
        Served {
            addr: addr.recv().unwrap(),
            admin,
            db,
            stop: Some(stop),
            thread: Some(thread),
            _dir: dir,
        }
    }

    /// A new key for `store` (read-only when asked): its record and the key.
    pub fn store_key(&self, store: &str, read_only: bool) -> (ApiKey, String) {
        self.db
            .add_key(&NewKey::new(KeyScope::Store {
                store: store.into(),
                read_only,
            }))
            .unwrap()
    }

    pub fn client(&self, key: &str) -> Client {
        Client::with_key(self.addr, key)
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

pub fn send(c: &mut Client, method: &str, target: &str, body: Option<Value>) -> Reply {
    match body {
        Some(b) => c
            .send(
                method,
                target,
                &[("content-type", "application/json")],
                b.to_string().as_bytes(),
            )
            .unwrap(),
        None => c.send(method, target, &[], b"").unwrap(),
    }
}

/// Asserts the status and the envelope's error type; returns the message.
#[track_caller]
pub fn refused(reply: &Reply, status: u16, kind: &str) -> String {
    assert_eq!(reply.status, status, "{}", reply.text());
    assert_eq!(reply.header("content-type"), Some("application/json"));
    assert_eq!(reply.error_type(), kind, "{}", reply.text());
    reply.json()["error"]["message"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[track_caller]
pub fn ok(reply: &Reply) -> Value {
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert_eq!(reply.header("content-type"), Some("application/json"));
    reply.json()
}
