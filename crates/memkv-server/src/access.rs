//! What a request's key may reach, decided in one place: [`Caller::admit`] (a store in the
//! key's scope, at the store's rate, to read or to change it). Every face asks it: the
//! memory-stores API through the extractors [`Reads`] and [`Writes`], the tool route through
//! [`ToolStore`], the console through `console::guard::Visit`, MCP through [`McpKeys`].
//!
//! The extractors check in an order that never reveals more than the key allows: the key
//! (401), then the store it may use (404, the same answer whether or not another store
//! exists), then the store's rate (429), then a read-only key's write (403).

use std::str::FromStr;
use std::sync::Arc;

use axum::extract::{FromRequestParts, RawPathParams};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use memkv_mcp::http::Authorized;

use crate::AppState;
use crate::auth::{self, Allowed, Caller};
use crate::error::ApiError;

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

/// The request's caller (401 without a known key), for routes that name no store.
impl FromRequestParts<Arc<AppState>> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &Arc<AppState>,
    ) -> Result<Self, Self::Rejection> {
        auth::identify(state, &parts.headers)
    }
}

/// The keys as the MCP endpoint (`/mcp`) sees them: the same check as every route, and the
/// same decision of what the key may reach: a store key its own store, an
/// admin key (or no keys, on loopback) the store named in the header.
pub struct McpKeys(pub Arc<AppState>);

impl memkv_mcp::http::Authorize for McpKeys {
    fn authorize(
        &self,
        headers: &HeaderMap,
        named: Option<&str>,
    ) -> Result<Authorized, Box<Response>> {
        let refuse = |e: ApiError| Box::new(e.into_response());
        let caller = auth::identify(&self.0, headers).map_err(refuse)?;
        let store = match (named, &caller.allowed) {
            (Some(named), _) => named.to_owned(),
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

/// A store named by a memory-stores API route (`{memory_store_id}`), which the caller may read.
#[derive(Debug)]
pub struct Reads {
    /// The store's id, as decoded from the path.
    pub store: String,
    /// Who asks.
    pub caller: Caller,
}

/// As [`Reads`], for a route that changes the store: a read-only key is refused (403).
#[derive(Debug)]
pub struct Writes {
    /// The store's id, as decoded from the path.
    pub store: String,
    /// Who asks.
    pub caller: Caller,
}

/// The store of the tool route (`{store}`): read-only keys get in (the model's writes are
/// answered with the read-only message); a store id that is not UTF-8 is a 400 for a key that
/// may name any store (no store can have it), a 404 for a store key.
#[derive(Debug)]
pub struct ToolStore {
    /// The store's id, as decoded from the path.
    pub store: String,
    /// Who asks.
    pub caller: Caller,
}

/// The caller, and the first parameter of the route's path (the store) once decided.
async fn scoped(
    parts: &mut Parts,
    state: &AppState,
    intent: Intent,
    not_utf8: fn(&Caller) -> ApiError,
) -> Result<(String, Caller), ApiError> {
    let caller = auth::identify(state, &parts.headers)?;
    let store = match RawPathParams::from_request_parts(parts, state).await {
        Ok(params) => params.iter().next().map(|(_, value)| value.to_owned()),
        Err(_) => return Err(not_utf8(&caller)),
    };
    let store = store.ok_or_else(ApiError::not_found)?;
    caller.admit(state, &store, intent)?;
    Ok((store, caller))
}

impl FromRequestParts<Arc<AppState>> for Reads {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &Arc<AppState>,
    ) -> Result<Self, Self::Rejection> {
        let (store, caller) = scoped(parts, state, Intent::Read, |_| ApiError::not_found()).await?;
        Ok(Reads { store, caller })
    }
}

impl FromRequestParts<Arc<AppState>> for Writes {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &Arc<AppState>,
    ) -> Result<Self, Self::Rejection> {
        let (store, caller) =
            scoped(parts, state, Intent::Write, |_| ApiError::not_found()).await?;
        Ok(Writes { store, caller })
    }
}

impl FromRequestParts<Arc<AppState>> for ToolStore {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &Arc<AppState>,
    ) -> Result<Self, Self::Rejection> {
        let not_utf8 = |caller: &Caller| match caller.allowed {
            Allowed::Store(_) => ApiError::not_found(),
            _ => ApiError::invalid("the store id in the path is not valid UTF-8"),
        };
        let (store, caller) = scoped(parts, state, Intent::Read, not_utf8).await?;
        Ok(ToolStore { store, caller })
    }
}

/// The last parameter of a route's path (a memory's `mem_…`, a version's `memver_…`, a key's
/// or a webhook's id) as `I`: 404 for one that is not.
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

/// The store a route's path names (its first parameter), for a route whose caller is checked
/// otherwise (an admin's): 404 for an id that is not UTF-8.
#[derive(Debug)]
pub struct Named(pub String);

impl<S: Send + Sync> FromRequestParts<S> for Named {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let params = RawPathParams::from_request_parts(parts, state)
            .await
            .map_err(|_| ApiError::not_found())?;
        params
            .iter()
            .next()
            .map(|(_, value)| Named(value.to_owned()))
            .ok_or_else(ApiError::not_found)
    }
}
