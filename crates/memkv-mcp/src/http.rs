//! MCP over streamable HTTP, for `memkv serve` to mount at `/mcp`.
//!
//! [`router`] wraps rmcp's streamable HTTP service (sessions kept in memory) in a gate. The gate
//! asks the server's [`Authorize`] who the request's key lets in, and grants the request one
//! store: a store key its own store, an admin key the store named in the [`STORE_HEADER`]
//! header (percent-encoded like the `{store}` path segment of the tool route). A store key that
//! names another store in that header gets 404, like the tool route. Every request is checked
//! on its own, so a session id carries no authority: each call acts on the store of the key that
//! came with it.
//!
//! rmcp then checks `Host` (DNS rebinding) and `Origin` (cross-site requests from a browser)
//! against [`HttpOptions`] — both loopback by default — and refuses others with 403.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::{self, Next};
use axum::response::Response;
use memkv::{Actor, Database};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::forward::decode_segment;
use crate::server::{Grant, MemoryServer};

/// The header in which an admin key names its store.
pub const STORE_HEADER: &str = "x-memkv-store";

/// The path the MCP endpoint is served at.
pub const PATH: &str = "/mcp";

/// Whom a request's key lets in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Access {
    /// Every store.
    Admin,
    /// One store (the memkv user id).
    Store(String),
    /// One store, to read only: the memory tool's writes are answered with the read-only error.
    ReadOnly(String),
}

/// The server's side of authentication: its keys and its error format.
pub trait Authorize: Send + Sync + 'static {
    /// Who the request's key (`x-api-key` or `Authorization: Bearer`) lets in, or the response
    /// refusing the request (401, 429, ...).
    ///
    /// # Errors
    /// The response to send instead of serving the request.
    fn authorize(&self, headers: &HeaderMap) -> Result<Access, Box<Response>>;

    /// A refusal in the server's error format (400 or 404 here).
    fn refuse(&self, status: StatusCode, message: &str) -> Response;

    /// Whether a request to `store` may go ahead now (a rate limit, say); the refusal to send
    /// otherwise.
    ///
    /// # Errors
    /// The response to send instead of serving the request.
    fn admit(&self, store: &str) -> Result<(), Box<Response>> {
        let _ = store;
        Ok(())
    }
}

/// Settings of the HTTP face.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// Allowed `Host` values (`name` or `name:port`). Default: `localhost`, `127.0.0.1`, `::1`.
    /// Empty allows every host (only behind a proxy that checks it).
    pub allowed_hosts: Vec<String>,
    /// Allowed browser origins (`scheme://host:port`, `:*` for any port). A request without
    /// `Origin` (not from a browser) is always allowed. Default: loopback origins, any port.
    pub allowed_origins: Vec<String>,
    /// Cancelled on shutdown: ends every session and its event streams, so a graceful shutdown
    /// does not wait for clients that keep a stream open.
    pub shutdown: CancellationToken,
    /// Permits for commands running at once, shared with the server's other routes: a call
    /// that finds none is refused at once (a JSON-RPC error saying the server is busy), never
    /// queued. `None`: no bound.
    pub in_flight: Option<Arc<Semaphore>>,
}

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions {
            allowed_hosts: ["localhost", "127.0.0.1", "::1"].map(String::from).to_vec(),
            allowed_origins: [
                "http://localhost:*",
                "http://127.0.0.1:*",
                "http://[::1]:*",
                "https://localhost:*",
                "https://127.0.0.1:*",
                "https://[::1]:*",
            ]
            .map(String::from)
            .to_vec(),
            shutdown: CancellationToken::new(),
            in_flight: None,
        }
    }
}

/// The header that carries the MCP session id (streamable HTTP).
const SESSION_HEADER: &str = "mcp-session-id";

struct Gate {
    store: Arc<Database>,
    authorize: Box<dyn Authorize>,
}

/// The MCP endpoint at [`PATH`], to merge into the server's router.
pub fn router(store: Arc<Database>, options: HttpOptions, authorize: impl Authorize) -> Router {
    let body_cap = memkv::protocol::max_message_bytes(store.limits()).saturating_add(64 * 1024);
    let mut config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(options.allowed_hosts)
        .with_allowed_origins(options.allowed_origins)
        .with_cancellation_token(options.shutdown)
        .with_max_request_body_bytes(body_cap);
    if config.allowed_origins.is_empty() {
        config = config.enforce_origin_validation();
    }
    let in_flight = options.in_flight;
    let service = StreamableHttpService::new(
        move || Ok(MemoryServer::per_request(in_flight.clone())),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let gate = Arc::new(Gate {
        store,
        authorize: Box::new(authorize),
    });
    Router::new()
        .route_service(PATH, service)
        .layer(middleware::from_fn_with_state(gate, grant))
}

async fn grant(State(gate): State<Arc<Gate>>, mut request: Request, next: Next) -> Response {
    let access = match gate.authorize.authorize(request.headers()) {
        Ok(access) => access,
        Err(refusal) => return *refusal,
    };
    let named = match request.headers().get(STORE_HEADER) {
        None => None,
        Some(value) => match value.to_str().ok().and_then(decode_segment) {
            Some(id) => Some(id),
            None => {
                return gate.authorize.refuse(
                    StatusCode::BAD_REQUEST,
                    &format!("the {STORE_HEADER} header is not a valid percent-encoded store id"),
                );
            }
        },
    };
    let read_only = matches!(access, Access::ReadOnly(_));
    let id = match (access, named) {
        (Access::Store(own) | Access::ReadOnly(own), None) => own,
        (Access::Store(own) | Access::ReadOnly(own), Some(named)) if named == own => own,
        // Like the tool route: a store key must not learn whether another store exists.
        (Access::Store(_) | Access::ReadOnly(_), Some(_)) => {
            return gate
                .authorize
                .refuse(StatusCode::NOT_FOUND, "no such memory store");
        }
        (Access::Admin, Some(named)) => named,
        (Access::Admin, None) => {
            return gate.authorize.refuse(
                StatusCode::BAD_REQUEST,
                &format!("an admin key must name the store in the {STORE_HEADER} header"),
            );
        }
    };
    // Writes are recorded as made by the MCP session (the id rmcp gave it at `initialize`).
    let session = request
        .headers()
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(|sid| Actor::Session(format!("mcp:{sid}")));
    if let Err(refusal) = gate.authorize.admit(&id) {
        return *refusal;
    }
    match gate.store.owned_user(&id) {
        Ok(user) => {
            request
                .extensions_mut()
                .insert(Grant(user.with_actor(session).read_only(read_only)));
            let ends_session = request.method() == axum::http::Method::DELETE;
            let mut response = next.run(request).await;
            // A session ended: rmcp answers 202, where the streamable-HTTP transport's clients
            // (the official `mcp` package) expect 200 or 204 and log a failure otherwise.
            if ends_session && response.status() == StatusCode::ACCEPTED {
                *response.status_mut() = StatusCode::NO_CONTENT;
                *response.body_mut() = axum::body::Body::empty();
            }
            response
        }
        Err(e) => gate
            .authorize
            .refuse(StatusCode::BAD_REQUEST, &format!("invalid store id: {e}")),
    }
}
