//! MCP over streamable HTTP, for `memkv serve` to mount at `/mcp`.
//!
//! [`router`] wraps rmcp's streamable HTTP service (sessions kept in memory) in a gate. The gate
//! asks the server's [`Authorize`] which store the request's key may reach, which the server
//! decides as it does for every route: a store key its own store, an admin key the store named
//! in the [`STORE_HEADER`] header (percent-encoded like the `{store}` path segment of the tool
//! route). A store key that names another store in that header gets 404, like the tool route. Every request is checked
//! on its own, so a session id carries no authority: each call acts on the store of the key that
//! came with it. A session is also bound to the key and store that opened it ([`Sessions`]): a
//! request naming a session another key opened, or one the gate does not know, is answered 404
//! (the transport's "start a new session"), so one key's writes never land under another's
//! session. Writes are recorded as made by the key ([`Actor::ApiKey`]), or by the session on a
//! server without keys.
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

/// The store a request may reach, as the server decided it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authorized {
    /// The store (the memkv user id).
    pub store: String,
    /// To read only: the memory tool's writes are answered with the read-only error.
    pub read_only: bool,
    /// The key's id (`key_…`): the actor of its writes, and what its sessions are bound to.
    pub key_id: Option<String>,
}

/// The server's side of authentication: its keys, the one decision of what a key may reach,
/// and its error format.
pub trait Authorize: Send + Sync + 'static {
    /// The store the request's key (`x-api-key` or `Authorization: Bearer`) may reach, given
    /// the store named in the [`STORE_HEADER`] header ([`named_store`]), or the response
    /// refusing the request (401 first, then 400 for a header that is not a store id or an
    /// admin key naming none, 404 for a store the key may not use, 429, ...).
    ///
    /// # Errors
    /// The response to send instead of serving the request.
    fn authorize(&self, headers: &HeaderMap) -> Result<Authorized, Box<Response>>;

    /// A refusal in the server's error format (400 or 404 here).
    fn refuse(&self, status: StatusCode, message: &str) -> Response;
}

/// The store named in the [`STORE_HEADER`] header (percent-encoded like the `{store}` path
/// segment of the tool route): `Ok(None)` when none is named; `Err` with the 400's message when
/// the header is not a store id.
///
/// # Errors
/// The header is not a percent-encoded UTF-8 store id.
pub fn named_store(headers: &HeaderMap) -> Result<Option<String>, String> {
    match headers.get(STORE_HEADER) {
        None => Ok(None),
        Some(value) => value
            .to_str()
            .ok()
            .and_then(decode_segment)
            .map(Some)
            .ok_or_else(|| {
                format!("the {STORE_HEADER} header is not a valid percent-encoded store id")
            }),
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
    sessions: Sessions,
}

/// The most sessions the gate keeps bound at once; opening one more forgets the least recently
/// used (whose client is then told to start a new session).
pub const MAX_SESSIONS: usize = 4096;
/// The most sessions one key keeps: more forget that key's least recently used, so no key can
/// push out the others' sessions.
pub const MAX_SESSIONS_PER_KEY: usize = 64;
/// A session unused this long is forgotten (rmcp ends its own sessions after 300 s idle).
const SESSION_IDLE: std::time::Duration = std::time::Duration::from_secs(300);

/// Who opened each live session (the key, by id, and the store) and when it was last used.
/// Bounded by [`MAX_SESSIONS`] and [`MAX_SESSIONS_PER_KEY`].
#[derive(Default)]
struct Sessions(std::sync::Mutex<std::collections::HashMap<String, (Owner, std::time::Instant)>>);

#[derive(Debug, Clone, PartialEq, Eq)]
struct Owner {
    key_id: Option<String>,
    store: String,
}

impl Sessions {
    fn lock(
        &self,
    ) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, (Owner, std::time::Instant)>>
    {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether `session` is `owner`'s; if so, it was used now.
    fn owned_by(&self, session: &str, owner: &Owner) -> bool {
        match self.lock().get_mut(session) {
            Some((o, used)) if o == owner => {
                *used = std::time::Instant::now();
                true
            }
            _ => false,
        }
    }

    fn open(&self, session: String, owner: Owner) {
        let now = std::time::Instant::now();
        let mut map = self.lock();
        map.retain(|_, (_, used)| now.duration_since(*used) < SESSION_IDLE);
        let least_used = |map: &std::collections::HashMap<String, (Owner, std::time::Instant)>,
                          of: Option<&Option<String>>| {
            map.iter()
                .filter(|(_, (o, _))| of.is_none_or(|key| &o.key_id == key))
                .min_by_key(|(_, (_, used))| *used)
                .map(|(id, _)| id.clone())
        };
        let of_key = map
            .values()
            .filter(|(o, _)| o.key_id == owner.key_id)
            .count();
        if of_key >= MAX_SESSIONS_PER_KEY
            && let Some(oldest) = least_used(&map, Some(&owner.key_id))
        {
            map.remove(&oldest);
        }
        if map.len() >= MAX_SESSIONS
            && let Some(oldest) = least_used(&map, None)
        {
            map.remove(&oldest);
        }
        map.insert(session, (owner, now));
    }

    fn end(&self, session: &str) {
        self.lock().remove(session);
    }
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
        sessions: Sessions::default(),
    });
    Router::new()
        .route_service(PATH, service)
        .layer(middleware::from_fn_with_state(gate, grant))
}

async fn grant(State(gate): State<Arc<Gate>>, mut request: Request, next: Next) -> Response {
    let Authorized {
        store: id,
        read_only,
        key_id,
    } = match gate.authorize.authorize(request.headers()) {
        Ok(authorized) => authorized,
        Err(refusal) => return *refusal,
    };
    let session = request
        .headers()
        .get(SESSION_HEADER)
        .map(|v| v.to_str().unwrap_or_default().to_owned());
    let owner = Owner {
        key_id: key_id.clone(),
        store: id.clone(),
    };
    if let Some(session) = &session
        && !gate.sessions.owned_by(session, &owner)
    {
        // Another key's session, or one this gate never opened or has ended: the transport's
        // clients start a new session on 404.
        return gate
            .authorize
            .refuse(StatusCode::NOT_FOUND, "no such MCP session");
    }
    // Writes are recorded as made by the key; on a server without keys, by the MCP session
    // (the id rmcp gave it at `initialize`).
    let actor = match &key_id {
        Some(key) => Some(Actor::ApiKey(key.clone())),
        None => session
            .as_ref()
            .map(|sid| Actor::Session(format!("mcp:{sid}"))),
    };
    match gate.store.owned_user(&id) {
        Ok(user) => {
            request
                .extensions_mut()
                .insert(Grant(user.with_actor(actor).read_only(read_only)));
            let ends_session = request.method() == axum::http::Method::DELETE;
            let mut response = next.run(request).await;
            match &session {
                None => {
                    let opened = response.headers().get(SESSION_HEADER);
                    if let Some(opened) = opened.and_then(|v| v.to_str().ok()) {
                        gate.sessions.open(opened.to_owned(), owner);
                    }
                }
                // Ended, or already gone from rmcp (which ends idle sessions itself).
                Some(session)
                    if (ends_session && response.status().is_success())
                        || response.status() == StatusCode::NOT_FOUND =>
                {
                    gate.sessions.end(session);
                }
                Some(_) => {}
            }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn owner(key: &str) -> Owner {
        Owner {
            key_id: Some(key.to_owned()),
            store: "s".to_owned(),
        }
    }

    #[test]
    fn a_key_pushes_out_only_its_own_least_recently_used_sessions() {
        let sessions = Sessions::default();
        sessions.open("b-1".into(), owner("b"));
        for i in 0..MAX_SESSIONS_PER_KEY {
            sessions.open(format!("a-{i}"), owner("a"));
        }
        // a-0 used again: a-1 is now a's least recently used.
        assert!(sessions.owned_by("a-0", &owner("a")));
        sessions.open("a-new".into(), owner("a"));
        assert!(sessions.owned_by("a-0", &owner("a")));
        assert!(!sessions.owned_by("a-1", &owner("a")), "pushed out");
        assert!(sessions.owned_by("a-new", &owner("a")));
        // Another key's session is untouched, and never usable by a.
        assert!(sessions.owned_by("b-1", &owner("b")));
        assert!(!sessions.owned_by("b-1", &owner("a")));
        sessions.end("b-1");
        assert!(!sessions.owned_by("b-1", &owner("b")));
        assert!(sessions.lock().len() <= MAX_SESSIONS_PER_KEY);
    }
}
