//! What every console request passes: its session (the cookie, the session, the key asked
//! again through `auth::identify`), and for a form post its origin, its form and the session's
//! CSRF token. A page's visitor is an extractor ([`Visit`]).

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{FromRequest, FromRequestParts};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use maud::Markup;

use super::Problem;
use super::session::{self, Session};
use super::view::{self, Viewer};
use crate::AppState;
use crate::access::Intent;
use crate::auth::{self, Allowed, Caller};

/// A signed-in request: its session, and the key's caller as the API would see it.
pub struct Visit {
    pub(super) session: Session,
    pub(super) caller: Caller,
    /// What every handler shares.
    pub(super) state: Arc<AppState>,
}

impl Visit {
    /// The frame's view of the signed-in key.
    pub(super) fn viewer(&self) -> Viewer<'_> {
        let scope = match &self.caller.allowed {
            Allowed::Open => "every store (no keys)".to_owned(),
            Allowed::Admin => "admin: every store".to_owned(),
            Allowed::Store(s) if self.caller.read_only => format!("store {s}, read-only"),
            Allowed::Store(s) => format!("store {s}"),
        };
        Viewer {
            key_id: self.caller.key_id.as_deref(),
            scope,
            admin: self.is_admin(),
            csrf: &self.session.csrf,
        }
    }

    pub(super) fn is_admin(&self) -> bool {
        self.caller.is_admin()
    }

    /// A whole page for this visitor.
    pub(super) fn page(&self, title: &str, body: Markup) -> Response {
        view::page(title, Some(&self.viewer()), body).into_response()
    }

    pub(super) fn csrf(&self) -> &str {
        &self.session.csrf
    }

    /// The caller, allowed to read store `store` (404 otherwise, the API's answer for a store
    /// that is not the key's); counted against the store's rate limit (the key's was counted
    /// once, by [`visit`]).
    pub(super) fn reads(&self, store: &str) -> Result<Caller, Problem> {
        self.caller.admit(&self.state, store, Intent::Read)?;
        Ok(self.caller.clone())
    }

    /// The caller, allowed to change store `store` (403 for a read-only key, as on the API).
    pub(super) fn writes(&self, store: &str) -> Result<Caller, Problem> {
        self.caller.admit(&self.state, store, Intent::Write)?;
        Ok(self.caller.clone())
    }

    /// The caller, with an admin key (403 otherwise).
    pub(super) fn admin(&self, what: &str) -> Result<Caller, Problem> {
        Ok(self.caller.clone().admin(what)?)
    }
}

/// Whether the request came over TLS: a balancer that terminates it says so in
/// `X-Forwarded-Proto` (the first entry, the client's side).
pub(super) fn over_tls(headers: &HeaderMap) -> bool {
    headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(',').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("https"))
}

/// The session id the browser sent, if any: under TLS only the `__Host-` cookie counts (a
/// cookie of the plain name could have been planted by a sibling host).
pub(super) fn session_cookie(headers: &HeaderMap) -> Option<String> {
    let name = session::cookie_name(over_tls(headers));
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(n, _)| *n == name)
        .map(|(_, value)| value.to_owned())
}

pub(super) fn set_cookie(headers: &HeaderMap, value: &str, max_age: u64) -> HeaderValue {
    let secure = over_tls(headers);
    let name = session::cookie_name(secure);
    let flags = if secure { "; Secure" } else { "" };
    HeaderValue::from_str(&format!(
        "{name}={value}; Path=/; HttpOnly; SameSite=Strict; Max-Age={max_age}{flags}"
    ))
    .unwrap_or_else(|_| HeaderValue::from_static("memkv_console=; Path=/; Max-Age=0"))
}

/// The signed-in visitor of a request, or why there is none: the session is missing or over,
/// or its key no longer works (revoked, expired: the session ends with it).
pub(super) fn visit(state: &Arc<AppState>, headers: &HeaderMap) -> Result<Visit, Problem> {
    let signed_out = || {
        Problem::new(
            StatusCode::UNAUTHORIZED,
            "You are not signed in, or your session has ended: sign in again. Nothing was changed.",
        )
    };
    let id = session_cookie(headers).ok_or_else(signed_out)?;
    let session = state.sessions.get(&id).ok_or_else(signed_out)?;
    let mut asked = HeaderMap::new();
    if let Some(host) = headers.get(header::HOST) {
        asked.insert(header::HOST, host.clone());
    }
    if !session.key.is_empty() {
        let key = HeaderValue::from_str(&session.key).map_err(|_| signed_out())?;
        asked.insert("x-api-key", key);
    }
    match auth::identify(state, &asked) {
        Ok(caller) => Ok(Visit {
            session,
            caller,
            state: Arc::clone(state),
        }),
        Err(e) if e.status == StatusCode::UNAUTHORIZED => {
            state.sessions.end(&id);
            Err(Problem::new(
                StatusCode::UNAUTHORIZED,
                format!("{}: sign in again. Nothing was changed.", e.message),
            ))
        }
        Err(e) => Err(e.into()),
    }
}

/// As [`visit`], for a page: without a session, the browser is sent to the sign-in page.
pub(super) fn visit_page(
    state: &Arc<AppState>,
    headers: &HeaderMap,
) -> Result<Visit, Box<Response>> {
    visit(state, headers).map_err(|p| {
        Box::new(if p.status == StatusCode::UNAUTHORIZED {
            Redirect::to("/console/login").into_response()
        } else {
            p.into_response()
        })
    })
}

/// A page's signed-in visitor, as an extractor: without a live session the browser is sent to
/// the sign-in page ([`visit_page`]).
impl FromRequestParts<Arc<AppState>> for Visit {
    type Rejection = Response;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &Arc<AppState>,
    ) -> Result<Self, Self::Rejection> {
        visit_page(state, &parts.headers).map_err(|r| *r)
    }
}

/// Whether a form post comes from a page of this console: the browser does not call it
/// cross-site (`Sec-Fetch-Site`), and its `Origin` names this host. Under this console's
/// `Referrer-Policy: no-referrer`, browsers send `Origin: null` with their forms: accepted only
/// when `Sec-Fetch-Site` says same-origin.
pub(super) fn same_origin(headers: &HeaderMap) -> bool {
    let site = headers
        .get("sec-fetch-site")
        .map(|v| v.to_str().unwrap_or(""));
    if site.is_some_and(|v| v != "same-origin" && v != "none") {
        return false;
    }
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
    match headers.get(header::ORIGIN).map(|v| v.to_str()) {
        None => true,
        Some(Ok("null")) => site == Some("same-origin"),
        Some(Ok(origin)) => {
            let bare = origin
                .strip_prefix("https://")
                .or_else(|| origin.strip_prefix("http://"));
            bare.is_some() && bare == host
        }
        Some(Err(_)) => false,
    }
}

/// A form post's fields: `application/x-www-form-urlencoded`, within the body cap and timeout.
pub(super) async fn form(
    state: &AppState,
    headers: &HeaderMap,
    body: Body,
) -> Result<Form, Problem> {
    form_within(headers, body, state.max_body, state.config.body_timeout).await
}

/// As [`form`], at most `cap` bytes within `timeout`.
pub(super) async fn form_within(
    headers: &HeaderMap,
    body: Body,
    cap: usize,
    timeout: std::time::Duration,
) -> Result<Form, Problem> {
    let kind = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(str::trim);
    if !kind.is_some_and(|k| k.eq_ignore_ascii_case("application/x-www-form-urlencoded")) {
        return Err(Problem::bad("the console takes only its own forms"));
    }
    let bytes = crate::tool::read_body_within(headers, body, cap, timeout).await?;
    Ok(Form(form_urlencoded::parse(&bytes).into_owned().collect()))
}

/// A posted form's fields.
pub struct Form(Vec<(String, String)>);

impl Form {
    /// The first value of `name`.
    pub(super) fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A state-changing post: from this origin, signed in, with the session's CSRF token; the
/// visitor and the form. Anything else is refused before anything is read or changed.
pub(super) async fn posted(
    state: &Arc<AppState>,
    headers: &HeaderMap,
    body: Body,
) -> Result<(Visit, Form), Problem> {
    if !same_origin(headers) {
        return Err(Problem::forbidden(
            "This form was not sent from a page of this console. Nothing was changed.",
        ));
    }
    let visit = visit(state, headers)?;
    let form = form(state, headers, body).await?;
    if !visit.session.csrf_matches(form.get("csrf").unwrap_or("")) {
        return Err(Problem::forbidden(
            "This form is out of date or was not made by this console (its CSRF token does not match your session). Nothing was changed.",
        ));
    }
    Ok((visit, form))
}

/// A form post's signed-in visitor and its form, as an extractor ([`posted`]'s checks).
pub struct Posted(pub Visit, pub Form);

impl FromRequest<Arc<AppState>> for Posted {
    type Rejection = Problem;

    async fn from_request(
        request: axum::extract::Request,
        state: &Arc<AppState>,
    ) -> Result<Self, Self::Rejection> {
        let (parts, body) = request.into_parts();
        let (visit, form) = posted(state, &parts.headers, body).await?;
        Ok(Posted(visit, form))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn only_this_origin_may_post() {
        assert!(same_origin(&headers(&[("host", "127.0.0.1:8080")])));
        assert!(same_origin(&headers(&[
            ("host", "127.0.0.1:8080"),
            ("origin", "http://127.0.0.1:8080"),
            ("sec-fetch-site", "same-origin"),
        ])));
        assert!(same_origin(&headers(&[
            ("host", "127.0.0.1:8080"),
            ("origin", "null"),
            ("sec-fetch-site", "same-origin"),
        ])));
        assert!(!same_origin(&headers(&[("host", "h"), ("origin", "null")])));
        for bad in [
            [
                ("origin", "http://evil.example"),
                ("sec-fetch-site", "same-origin"),
            ],
            [("origin", "null"), ("sec-fetch-site", "none")],
            [
                ("origin", "http://127.0.0.1:8080"),
                ("sec-fetch-site", "cross-site"),
            ],
            [
                ("origin", "http://127.0.0.1:8080"),
                ("sec-fetch-site", "same-site"),
            ],
            [
                ("origin", "http://127.0.0.1:80800"),
                ("sec-fetch-site", "none"),
            ],
        ] {
            let mut h = headers(&bad);
            h.insert("host", HeaderValue::from_static("127.0.0.1:8080"));
            assert!(!same_origin(&h), "{bad:?}");
        }
    }

    #[test]
    fn the_session_cookie_is_found_among_others() {
        let h = headers(&[("cookie", "a=1; memkv_console=abc; b=2")]);
        assert_eq!(session_cookie(&h).as_deref(), Some("abc"));
        // Under TLS, only the __Host- cookie; without, only the plain one.
        let h = headers(&[
            ("cookie", "memkv_console=planted"),
            ("cookie", "__Host-memkv_console=xyz"),
            ("x-forwarded-proto", "https, http"),
        ]);
        assert_eq!(session_cookie(&h).as_deref(), Some("xyz"));
        let h = headers(&[("cookie", "__Host-memkv_console=xyz")]);
        assert_eq!(session_cookie(&h), None);
        assert_eq!(
            session_cookie(&headers(&[("cookie", "x=memkv_console")])),
            None
        );
    }

    #[test]
    fn cookies_are_strict_and_secure_over_tls() {
        let plain = set_cookie(&HeaderMap::new(), "v", 60);
        assert_eq!(
            plain,
            "memkv_console=v; Path=/; HttpOnly; SameSite=Strict; Max-Age=60"
        );
        let tls = set_cookie(&headers(&[("x-forwarded-proto", "https")]), "v", 60);
        assert_eq!(
            tls,
            "__Host-memkv_console=v; Path=/; HttpOnly; SameSite=Strict; Max-Age=60; Secure"
        );
    }
}
