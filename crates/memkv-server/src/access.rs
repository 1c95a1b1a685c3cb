//! What a request's key may reach, decided in one place: [`Caller::admit`] (a store in the
//! key's scope, at the store's rate, to read or to change it). Every face asks it: the
//! memory-stores API through the extractors [`Reads`] and [`Writes`], the tool route through
//! [`ToolStore`], the console through `console::guard::Visit`, MCP through [`McpKeys`].
//!
//! The extractors check in an order that never reveals more than the key allows: the key
//! (401), then the store it may use (404, the same answer whether or not another store
//! exists), then the store's rate (429), then a read-only key's write (403); a memory's or a
//! version's id in the path ([`Item`], 404 for one that is not) comes after them all.

use std::marker::PhantomData;
use std::str::FromStr;
use std::sync::Arc;

use axum::extract::{FromRequestParts, MatchedPath, RawPathParams};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use memkv_mcp::http::Authorized;

use crate::AppState;
use crate::auth::{self, Allowed, Caller};
use crate::error::ApiError;
use crate::routes::ADMIN_ROUTES;

/// What a request wants of a store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Intent {
    /// To read it (or, on the tool route, to send the model's commands, whose writes a
    /// read-only key gets the model's read-only answer for): any key whose scope holds it.
    Read,
    /// To change it: not with a read-only key.
    Write,
}

/// Why a caller may not reach a store.
#[derive(Debug)]
pub enum Denied {
    /// Not in the key's scope: answered as a store that does not exist is (404), so that a
    /// store key learns nothing about other stores.
    OutOfScope,
    /// The store is over its rate limit (429, with when to retry).
    Limited(ApiError),
    /// A read-only key asked to change the store (403).
    ReadOnly,
}

impl Caller {
    /// Whether this caller may reach store `store` for `intent`, counting the request against
    /// the store's rate limit (the key's was counted when it was identified).
    ///
    /// # Errors
    /// [`Denied`]: out of the key's scope, over the store's rate, or a read-only key's write.
    pub fn admit(&self, state: &AppState, store: &str, intent: Intent) -> Result<(), Denied> {
        if !self.may_use(store) {
            return Err(Denied::OutOfScope);
        }
        state.rates.store(store).map_err(Denied::Limited)?;
        if intent == Intent::Write && self.read_only {
            return Err(Denied::ReadOnly);
        }
        Ok(())
    }

    /// Whether the key is an admin key (or there are no keys, on loopback).
    pub fn is_admin(&self) -> bool {
        matches!(self.allowed, Allowed::Open | Allowed::Admin)
    }

    /// This caller, when it holds an admin key; 403 naming `what` needs one otherwise.
    ///
    /// # Errors
    /// 403 for a store key.
    pub fn admin(self, what: &str) -> Result<Caller, ApiError> {
        if self.is_admin() {
            Ok(self)
        } else {
            Err(ApiError::forbidden(format!("{what} needs an admin key")))
        }
    }
}

impl From<Denied> for ApiError {
    fn from(denied: Denied) -> Self {
        match denied {
            Denied::OutOfScope => ApiError::not_found(),
            Denied::Limited(e) => e,
            Denied::ReadOnly => {
                ApiError::forbidden("this API key is read-only: it cannot change the memory store")
            }
        }
    }
}

/// The keys as the MCP endpoint (`/mcp`) sees them: the same check as every route, and the
/// same decision of what the key may reach: a store key its own store, an
/// admin key (or no keys, on loopback) the store named in the header.
pub struct McpKeys(pub Arc<AppState>);

impl memkv_mcp::http::Authorize for McpKeys {
    fn authorize(&self, headers: &HeaderMap) -> Result<Authorized, Box<Response>> {
        let refuse = |e: ApiError| Box::new(e.into_response());
        let caller = auth::identify(&self.0, headers).map_err(refuse)?;
        let named = memkv_mcp::http::named_store(headers)
            .map_err(|message| refuse(ApiError::invalid(message)))?;
        let store = match (named, &caller.allowed) {
            (Some(named), _) => named,
            (None, Allowed::Store(own)) => own.clone(),
            (None, Allowed::Open | Allowed::Admin) => {
                return Err(refuse(ApiError::invalid(format!(
                    "an admin key must name the store in the {} header",
                    memkv_mcp::http::STORE_HEADER
                ))));
            }
        };
        caller
            .admit(&self.0, &store, Intent::Read)
            .map_err(|denied| refuse(denied.into()))?;
        Ok(Authorized {
            store,
            read_only: caller.read_only,
            key_id: caller.key_id,
        })
    }

    fn refuse(&self, status: StatusCode, message: &str) -> Response {
        if status == StatusCode::NOT_FOUND {
            ApiError::not_found().into_response()
        } else {
            ApiError::new(status, message).into_response()
        }
    }
}

/// A store named by a route's path (its first parameter), which the caller may reach for what
/// `K` says: [`Reads`], [`Writes`], [`ToolStore`].
#[derive(Debug)]
pub struct Scoped<K> {
    /// The store's id, as decoded from the path.
    pub id: String,
    /// Who asks.
    pub caller: Caller,
    /// What every handler shares.
    pub state: Arc<AppState>,
    kind: PhantomData<K>,
}

/// What a [`Scoped`] route wants of its store, and its answer to a store id that is not UTF-8.
pub trait Kind {
    /// What it wants.
    const INTENT: Intent;

    /// The answer to a store id that is not UTF-8: no store can have it (404).
    fn not_utf8(caller: &Caller) -> ApiError {
        let _ = caller;
        ApiError::not_found()
    }
}

/// A memory-stores API route that reads the store (`{memory_store_id}`).
#[derive(Debug)]
pub enum Read {}
/// A memory-stores API route that changes the store: a read-only key is refused (403).
#[derive(Debug)]
pub enum Write {}
/// The tool route (`{store}`): read-only keys get in (the model's writes are answered with the
/// read-only message); a store id that is not UTF-8 is a 400 for a key that may name any store
/// (no store can have it), a 404 for a store key.
#[derive(Debug)]
pub enum Tool {}

impl Kind for Read {
    const INTENT: Intent = Intent::Read;
}

impl Kind for Write {
    const INTENT: Intent = Intent::Write;
}

impl Kind for Tool {
    const INTENT: Intent = Intent::Read;

    fn not_utf8(caller: &Caller) -> ApiError {
        match caller.allowed {
            Allowed::Store(_) => ApiError::not_found(),
            _ => ApiError::invalid("the store id in the path is not valid UTF-8"),
        }
    }
}

/// A store the caller may read.
pub type Reads = Scoped<Read>;
/// A store the caller may change.
pub type Writes = Scoped<Write>;
/// The tool route's store.
pub type ToolStore = Scoped<Tool>;

impl<K: Kind> FromRequestParts<Arc<AppState>> for Scoped<K> {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &Arc<AppState>,
    ) -> Result<Self, Self::Rejection> {
        let caller = auth::identify(state, &parts.headers)?;
        let store = match RawPathParams::from_request_parts(parts, state).await {
            Ok(params) => params.iter().next().map(|(_, value)| value.to_owned()),
            Err(_) => return Err(K::not_utf8(&caller)),
        };
        let store = store.ok_or_else(ApiError::not_found)?;
        caller.admit(state, &store, K::INTENT)?;
        Ok(Scoped {
            id: store,
            caller,
            state: Arc::clone(state),
            kind: PhantomData,
        })
    }
}

/// A request on a route of [`ADMIN_ROUTES`] by an admin key (or no keys, on loopback): 401
/// without a known key, 403 for a store key, naming what the route does.
#[derive(Debug)]
pub struct Admin {
    /// Who asks.
    pub caller: Caller,
    /// What every handler shares.
    pub state: Arc<AppState>,
}

impl FromRequestParts<Arc<AppState>> for Admin {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &Arc<AppState>,
    ) -> Result<Self, Self::Rejection> {
        let caller = auth::identify(state, &parts.headers)?;
        let route = parts
            .extensions
            .get::<MatchedPath>()
            .map(MatchedPath::as_str);
        // A HEAD is answered by the GET route.
        let asked = match parts.method.as_str() {
            "HEAD" => "GET",
            other => other,
        };
        let what = ADMIN_ROUTES
            .iter()
            .find(|(method, path, _)| asked == *method && route == Some(*path))
            .map_or("this route", |(_, _, what)| what);
        Ok(Admin {
            caller: caller.admin(what)?,
            state: Arc::clone(state),
        })
    }
}

/// The last parameter of a route's path as `I` (a memory's `mem_…`, a version's `memver_…`, a
/// key's or a webhook's id; the store of an admin's route, as a `String`): 404 for one that is
/// not (or is not UTF-8).
#[derive(Debug)]
pub struct Item<I>(pub I);

impl<I: FromStr, S: Send + Sync> FromRequestParts<S> for Item<I> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let params = RawPathParams::from_request_parts(parts, state)
            .await
            .map_err(|_| ApiError::not_found())?;
        params
            .iter()
            .last()
            .and_then(|(_, value)| value.parse().ok())
            .map(Item)
            .ok_or_else(ApiError::not_found)
    }
}
