//! Who a request is: its key (`x-api-key: KEY` or `Authorization: Bearer KEY`) looked up in
//! the keys table. Keys are never logged.

use axum::http::{HeaderMap, header};

use crate::AppState;
use crate::error::ApiError;
use crate::keys::{Access, Scope};

/// What an authenticated request may use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Allowed {
    /// `serve --no-auth` (loopback only): keys are not checked.
    Open,
    /// An admin key: every store and the operator routes.
    Admin,
    /// A store key: that store only.
    Store(String),
}

/// The key sent with a request, if any.
pub fn sent_key(headers: &HeaderMap) -> Option<&str> {
    if let Some(v) = headers.get("x-api-key") {
        return v.to_str().ok();
    }
    let v = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = v.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then_some(token.trim())
}

/// Who sent a request: what it may use, and the id of its key (none without keys).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// What it may use.
    pub allowed: Allowed,
    /// The key's id (`key_…`), recorded as the author of the changes it makes.
    pub key_id: Option<String>,
    /// A read-only store key: the memory tool's writes are answered with the read-only error,
    /// the API's writes refused (403).
    pub read_only: bool,
}

impl Caller {
    /// The author recorded for a change this caller makes: its key, or nobody without keys.
    pub fn actor(&self) -> Option<memkv::Actor> {
        self.key_id.clone().map(memkv::Actor::ApiKey)
    }

    /// Whether it may use the store `id` (a store key only its own; others every store).
    pub fn may_use(&self, id: &str) -> bool {
        match &self.allowed {
            Allowed::Store(own) => own == id,
            Allowed::Open | Allowed::Admin => true,
        }
    }
}

/// Authenticates a request: 401 without a known key (and for every request while no key
/// exists), 500 when the API keys cannot be read (nothing is allowed then). Only a server
/// started with `--no-auth` serves without keys.
pub fn authenticate(state: &AppState, headers: &HeaderMap) -> Result<Allowed, ApiError> {
    identify(state, headers).map(|c| c.allowed)
}

/// As [`authenticate`], with the key's id.
pub fn identify(state: &AppState, headers: &HeaderMap) -> Result<Caller, ApiError> {
    if state.config.no_auth {
        // Without keys, only loopback names may reach the server (no DNS rebinding); the
        // listener is on loopback (checked at bind).
        if !loopback_host(headers) {
            return Err(ApiError::forbidden(
                "without keys (--no-auth), memkv answers only requests addressed to localhost",
            ));
        }
        // Keyless serving is for a database without keys: once one exists (added through this
        // server's /v1/keys, or by another process), nothing is served keyless any more.
        state.keys.refresh(false);
        if !state.keys.is_empty() {
            return Err(ApiError::unauthenticated(
                "an API key exists now: this server was started with --no-auth, which serves only while no key exists; restart it without --no-auth to use the keys",
            ));
        }
        state.rates.key("keyless")?;
        return Ok(Caller {
            allowed: Allowed::Open,
            key_id: None,
            read_only: false,
        });
    }
    let (access, key_id) = state.keys.identify(sent_key(headers));
    let read_only = matches!(&access, Access::Key(scope) if scope.read_only());
    let allowed = match access {
        Access::NoKeys => Err(ApiError::unauthenticated(NO_KEYS)),
        Access::Key(Scope::Admin) => Ok(Allowed::Admin),
        Access::Key(Scope::Store { store, .. }) => Ok(Allowed::Store(store)),
        Access::Expired => Err(ApiError::unauthenticated("this API key has expired")),
        Access::Missing => Err(ApiError::unauthenticated(
            "an API key is required: send it as x-api-key or Authorization: Bearer",
        )),
        Access::Unknown => Err(ApiError::unauthenticated("invalid API key")),
        Access::Unavailable => Err(ApiError::internal(
            "the API keys cannot be read; see the server log",
        )),
    }?;
    if let Some(id) = &key_id {
        state.rates.key(id)?;
    }
    Ok(Caller {
        allowed,
        key_id,
        read_only,
    })
}

/// Whether the request's key still works, for an answer given long after the request came (a
/// long poll of the change feed): a key revoked or expired meanwhile gets 401, not what
/// committed after. Not counted against the rate limit again.
pub fn still_valid(state: &AppState, headers: &HeaderMap) -> Result<(), ApiError> {
    if state.config.no_auth {
        return Ok(());
    }
    match state.keys.check(sent_key(headers)) {
        Access::Key(_) => Ok(()),
        Access::Expired => Err(ApiError::unauthenticated("this API key has expired")),
        _ => Err(ApiError::unauthenticated("invalid API key")),
    }
}

/// The 401 message while no key exists.
pub const NO_KEYS: &str = "no API key exists on this server: add one with `memkv keys add --store NAME` (or `--admin`) on the same --db; it works at once, without a restart";

/// Whether the `Host` header names this machine's loopback interface.
fn loopback_host(headers: &HeaderMap) -> bool {
    let Some(host) = headers.get(header::HOST).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let name = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Authenticates an operator request (`/metrics`): admin keys only (403 for a store key).
pub fn authenticate_admin(state: &AppState, headers: &HeaderMap) -> Result<(), ApiError> {
    match authenticate(state, headers)? {
        Allowed::Open | Allowed::Admin => Ok(()),
        Allowed::Store(_) => Err(ApiError::forbidden("this route needs an admin key")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn keys_come_from_either_header() {
        let mut h = HeaderMap::new();
        assert_eq!(sent_key(&h), None);
        h.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Bearer  k1 "),
        );
        assert_eq!(sent_key(&h), Some("k1"));
        h.insert(header::AUTHORIZATION, HeaderValue::from_static("bearer k1"));
        assert_eq!(sent_key(&h), Some("k1"));
        h.insert(header::AUTHORIZATION, HeaderValue::from_static("Basic k1"));
        assert_eq!(sent_key(&h), None);
        h.insert("x-api-key", HeaderValue::from_static("k2"));
        assert_eq!(sent_key(&h), Some("k2"));
    }

    #[test]
    fn loopback_hosts() {
        for (host, ok) in [
            ("127.0.0.1:7437", true),
            ("localhost", true),
            ("LOCALHOST:80", true),
            ("[::1]:7437", true),
            ("127.5.6.7", true),
            ("evil.example:7437", false),
            ("10.0.0.1:7437", false),
            ("[::2]:1", false),
        ] {
            let mut h = HeaderMap::new();
            h.insert(header::HOST, HeaderValue::from_str(host).unwrap());
            assert_eq!(loopback_host(&h), ok, "{host}");
        }
        assert!(!loopback_host(&HeaderMap::new()));
    }
}
