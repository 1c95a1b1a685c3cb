//! memkv over HTTP: the server behind `memkv serve`.
//!
//! One process owns the database; agents in any language call it over HTTP. Requests pass
//! through these layers, each in its own module:
//!
//! - [`server`]: the listener, connection limit, header read timeout and graceful shutdown
//!   (hyper's HTTP/1 connections under tokio);
//! - [`app`]: the router, and the layer that gives every request an id, times, counts and logs
//!   it; `auth` and [`keys`]: who the request is; `access`: what its key may reach, decided in
//!   one place for every face (the API's and the tool route's extractors, the console, MCP);
//!   `params`: query parameters as types, parsed and documented by one struct; `work`: a place
//!   under the in-flight limit and the blocking pool;
//! - `tool`: the tool route: body cap and read timeout, the in-flight limit, then the message's
//!   calls through [`memkv::protocol`]: for an embedded store, views on the async worker (a
//!   read snapshot of microseconds: the hop to a thread would cost more) and writes awaited
//!   from the library's write pipeline ([`memkv::OwnedMemoryStore::execute_async`]: the store's
//!   writer thread commits them in shared batches); for PostgreSQL,
//!   [`memkv::protocol::answer`] on tokio's blocking pool (writes share commits through the
//!   same pipeline);
//! - `api`: the memory-stores API (anthropic's beta `memory_stores`, `memories` and
//!   `memory_versions` resources) over the same stores, each call on the blocking pool under
//!   the same in-flight limit;
//! - [`sched`]: the writer thread's lower priority (views first when both want a core), and
//!   the opt-in pinning of the async workers, one per CPU;
//! - [`webhooks`]: the change log's entries delivered to the endpoints the database keeps, by
//!   the one server of the database that holds the deliverer's lease, to public addresses only
//!   unless allowed (`webhooks::guard`); [`remote`]: on a database other processes write, one
//!   look at the log for every waiter (long polls, the deliverer);
//! - [`console`]: the web console at `/console`: server-rendered pages (no script) over the same
//!   library calls as `api`, signed in with an API key exchanged for a session of this server,
//!   every change a form post with the session's CSRF token;
//! - [`rate`]: each key's and each store's rate limit (429 with `Retry-After`);
//! - [`error`]: the Anthropic error envelope; [`metrics`]: `GET /metrics`; [`openapi`]:
//!   `GET /openapi.json`, derived from the handlers' `#[utoipa::path]` and the types they answer
//!   (`api::objects`, `memkv::wire`); `spec`: what those attributes share.
//!
//! The wire contract (routes, bodies, statuses) is in docs/server.md and `GET /openapi.json`.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod access;
mod api;
pub mod app;
mod auth;
mod conns;
pub mod console;
pub mod error;
pub mod keys;
pub mod metrics;
pub mod openapi;
mod params;
pub mod polls;
pub mod rate;
pub mod remote;
pub mod routes;
pub mod sched;
pub mod server;
mod spec;
mod tool;
mod unread;
pub mod webhooks;
mod work;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use memkv::Database;
use tokio::sync::Semaphore;

pub use app::router;
pub use routes::{ROUTES, TOOL_ROUTE};
pub use server::{Server, run};

/// A store's settings as `GET /v1/memory_stores/{store}/settings` answers them (for `memkv
/// settings --json`).
pub fn settings_json(
    id: &str,
    own: &memkv::StoreSettings,
    effective: &memkv::EffectiveSettings,
) -> serde_json::Value {
    api::settings::settings_json(id, own, effective)
}

/// An API key as `GET /v1/keys` answers it (for `memkv keys list --json`).
pub fn api_key_json(key: &memkv::ApiKey) -> serde_json::Value {
    api::keys::api_key(key)
}

/// How the server listens and what it allows.
#[derive(Debug, Clone)]
pub struct Config {
    /// The address to listen on (port 0: any free port).
    pub listen: SocketAddr,
    /// The keys file: imported into the database at start, and whenever it changes (keys that
    /// `memkv keys` wrote beside the running server); `None` for none.
    pub keys: Option<PathBuf>,
    /// Requests executed at once; more get 503 with `Retry-After`.
    pub max_in_flight: usize,
    /// Open connections at once; more wait in the kernel's accept queue.
    pub max_connections: usize,
    /// Most `tool_use` blocks in one request (413 beyond).
    pub max_blocks: usize,
    /// A client must send a request's headers within this time, or the connection is closed.
    pub header_timeout: Duration,
    /// A client must send a request's body within this time (400 and the connection closed).
    pub body_timeout: Duration,
    /// The largest body `POST /v1/import` takes (413 beyond): the export is spooled to a
    /// temporary file before it is verified, and this bounds the file.
    pub max_import_bytes: u64,
    /// How long a shutdown waits for requests in flight.
    pub shutdown_grace: Duration,
    /// How long, once shutdown is asked for, the server goes on serving with `/readyz` answering
    /// 503, before it stops accepting (for a balancer's health checks to take it out first).
    pub drain_delay: Duration,
    /// How long a console session lasts without a request ([`console::session`]).
    pub console_idle: Duration,
    /// The MCP endpoint at `/mcp`: allowed `Host` and `Origin` values (loopback by default);
    /// its sessions end when shutdown starts.
    pub mcp: memkv_mcp::http::HttpOptions,
    /// Serve without keys (`serve --no-auth`): every request may use every store. Allowed only
    /// on a loopback address and while no key exists; requests must name a loopback `Host`.
    /// Off by default: then a server with no key refuses every request but `/healthz` (401).
    pub no_auth: bool,
    /// One async worker per CPU the process may use, each pinned to its CPU (Linux; see
    /// [`sched`]); for [`run`]. Off by default.
    pub pin_workers: bool,
    /// How webhook deliveries are made ([`webhooks`]).
    pub webhooks: webhooks::WebhookOptions,
    /// Requests per second (and burst) of each API key ([`rate`]); `None`: no limit.
    pub rate_limit_key: Option<rate::Rate>,
    /// Requests per second (and burst) to each store; `None`: no limit.
    pub rate_limit_store: Option<rate::Rate>,
}

/// The default of [`Config::max_import_bytes`]: 4 GiB.
pub const DEFAULT_MAX_IMPORT_BYTES: u64 = 4 << 30;

impl Config {
    /// The defaults, listening on `listen`, with the keys file `keys` (if any).
    pub fn new(listen: SocketAddr, keys: Option<PathBuf>) -> Self {
        Config {
            listen,
            keys,
            max_in_flight: 128,
            max_connections: 1024,
            max_blocks: 64,
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            max_import_bytes: DEFAULT_MAX_IMPORT_BYTES,
            shutdown_grace: Duration::from_secs(30),
            drain_delay: Duration::ZERO,
            console_idle: console::session::IDLE,
            mcp: memkv_mcp::http::HttpOptions::default(),
            pin_workers: false,
            no_auth: false,
            webhooks: webhooks::WebhookOptions::default(),
            rate_limit_key: None,
            rate_limit_store: None,
        }
    }
}

/// What every handler shares.
#[derive(Debug)]
pub struct AppState {
    /// The database.
    pub store: Arc<Database>,
    /// The settings.
    pub config: Config,
    /// The keys requests are checked against.
    pub keys: keys::Keys,
    /// The largest request body.
    pub max_body: usize,
    /// An embedded store: views are answered on the async workers and writes awaited from the
    /// store's writer thread. Otherwise (PostgreSQL, whose commands wait on the network) every
    /// message is answered on tokio's blocking pool.
    pub embedded: bool,
    /// Permits for requests in flight.
    pub in_flight: Arc<Semaphore>,
    /// Counters for `/metrics`.
    pub metrics: Arc<metrics::Metrics>,
    /// Cleared when shutdown starts (`/readyz` then answers 503).
    pub ready: AtomicBool,
    /// 32 random bits drawn at start, part of every request id: the ids of the servers of a
    /// fleet (started in the same second, say) never collide.
    pub instance: u32,
    /// `GET /openapi.json`, rendered once.
    pub openapi: String,
    /// Other processes' commits, looked for once for every waiter (see `remote`).
    pub remote: remote::RemoteCommits,
    /// The rate limits' buckets.
    pub rates: rate::RateLimits,
    /// The web console's sessions ([`console`]).
    pub sessions: console::session::Sessions,
    /// The bounds on long polls and sign-ins ([`polls`]).
    pub waiters: polls::Waiters,
}
