//! The web console at `/console`: operators see, search, compare and govern what agents
//! remember, in server-rendered HTML (maud) with no script at all, over the same library calls
//! as the memory-stores API.
//!
//! - `session`: the sign-in (an API key exchanged for a server-side session) and its cookie;
//!   every request checks the session's key again (`auth::identify`, the API's own
//!   check), so a store key reaches only its store and a read-only key changes nothing, exactly
//!   as on the API;
//! - `view`: the page frame and shared pieces; `stores`: the stores and a store's tree, search
//!   and recent changes; `memory`: a memory, its versions, a version, and the diff of two;
//!   `diff`: the line and word diff; `actions`: restore, redact, delete, archive, each confirmed
//!   on a page of its own and recorded with the signed-in key as author; `admin`: API keys and a
//!   store's settings (admin keys only).
//!
//! Every state-changing request is a form post that must carry the session's CSRF token and
//! come from this origin (`Origin`, `Sec-Fetch-Site`); anything else is refused with nothing
//! changed. Every answer carries a strict Content-Security-Policy (`default-src 'self'`, no
//! script), `frame-ancestors 'none'`, `nosniff` and `no-referrer`.

mod actions;
mod admin;
mod diff;
mod memory;
pub mod session;
mod stores;
mod view;

use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::body::Body;
use axum::extract::{FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use maud::{Markup, html};

use crate::AppState;
use crate::auth::{self, Allowed, Caller};
use crate::error::ApiError;
use session::Session;
use view::Viewer;

/// Where the stylesheet is served.
pub const STYLE_PATH: &str = "/console/static/console.css";
const STYLE: &str = include_str!("console.css");
/// Where the icon is served.
pub const ICON_PATH: &str = "/console/static/favicon.svg";
const ICON: &str = include_str!("favicon.svg");

/// The Content-Security-Policy of every console answer: nothing but this origin's stylesheet
/// and forms; no script, no frames, no plugins.
pub const CSP: &str = "default-src 'self'; script-src 'none'; style-src 'self'; img-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// The console's routes (merged into [`crate::router`]).
pub fn router() -> Router<Arc<AppState>> {
    Router::new()
        .route("/console", get(home))
        .route("/console/", get(home))
        .route("/console/login", get(login_page).post(login))
        .route("/console/logout", post(logout))
        .route(STYLE_PATH, get(style))
        .route(ICON_PATH, get(icon))
        .route("/favicon.ico", get(icon))
        .route("/console/stores", get(stores::list))
        .route("/console/stores/{store}", get(stores::store))
        .route("/console/stores/{store}/search", get(stores::search))
        .route(
            "/console/stores/{store}/archive",
            get(actions::confirm_archive).post(actions::archive),
        )
        .route(
            "/console/stores/{store}/settings",
            get(admin::settings).post(admin::save_settings),
        )
        .route(
            "/console/stores/{store}/memories/{memory}",
            get(memory::memory),
        )
        .route(
            "/console/stores/{store}/memories/{memory}/diff",
            get(memory::diff),
        )
        .route(
            "/console/stores/{store}/memories/{memory}/delete",
            get(actions::confirm_delete).post(actions::delete),
        )
        .route(
            "/console/stores/{store}/versions/{version}",
            get(memory::version),
        )
        .route(
            "/console/stores/{store}/versions/{version}/restore",
            get(actions::confirm_restore).post(actions::restore),
        )
        .route(
            "/console/stores/{store}/versions/{version}/redact",
            get(actions::confirm_redact).post(actions::redact),
        )
        .route("/console/keys", get(admin::keys).post(admin::add_key))
        .route(
            "/console/keys/{key}/revoke",
            get(admin::confirm_revoke).post(admin::revoke),
        )
        .route("/console/{*rest}", axum::routing::any(nowhere))
        .layer(middleware::from_fn(secure))
}

/// Any other path below `/console`: a page of its own that says so.
async fn nowhere() -> Problem {
    Problem::not_found()
}

/// The security headers of every console answer, and `Server-Timing` (the time the server
/// took, for the render budget).
async fn secure(request: Request, next: Next) -> Response {
    let started = Instant::now();
    let mut response = next.run(request).await;
    let took = started.elapsed().as_secs_f64() * 1000.0;
    let h = response.headers_mut();
    for (name, value) in [
        ("content-security-policy", CSP),
        ("x-content-type-options", "nosniff"),
        ("referrer-policy", "no-referrer"),
        ("x-frame-options", "DENY"),
        ("cross-origin-opener-policy", "same-origin"),
        ("cross-origin-resource-policy", "same-origin"),
        ("cache-control", "no-store"),
    ] {
        h.insert(name, HeaderValue::from_static(value));
    }
    if let Ok(v) = HeaderValue::from_str(&format!("app;dur={took:.2}")) {
        h.insert("server-timing", v);
    }
    response
}

async fn style() -> Response {
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], STYLE).into_response()
}

async fn icon() -> Response {
    ([(header::CONTENT_TYPE, "image/svg+xml")], ICON).into_response()
}

/// A page the console answers with a status other than 200: an error, or a refusal.
#[derive(Debug)]
pub struct Problem {
    status: StatusCode,
    message: String,
}

impl Problem {
    fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Problem {
            status,
            message: message.into(),
        }
    }

    fn bad(message: impl Into<String>) -> Self {
        Problem::new(StatusCode::BAD_REQUEST, message)
    }

    fn not_found() -> Self {
        Problem::new(StatusCode::NOT_FOUND, "Not found")
    }

    fn forbidden(message: impl Into<String>) -> Self {
        Problem::new(StatusCode::FORBIDDEN, message)
    }
}

impl From<ApiError> for Problem {
    fn from(e: ApiError) -> Self {
        Problem::new(e.status, e.message)
    }
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let title = match self.status {
            StatusCode::NOT_FOUND => "Not found",
            StatusCode::UNAUTHORIZED => "Signed out",
            StatusCode::FORBIDDEN => "Refused",
            s if s.is_client_error() => "Not done",
            _ => "Something went wrong",
        };
        let body = html! {
            p.problem role="alert" { (self.message) }
            p { a href="/console" { "Back to the console" } }
        };
        (self.status, view::page(title, None, body)).into_response()
    }
}

/// A handler's outcome as the answer sent.
fn respond(outcome: Result<Response, Problem>) -> Response {
    outcome.unwrap_or_else(IntoResponse::into_response)
}

/// A signed-in request: its session, and the key's caller as the API would see it.
pub struct Visit {
    session: Session,
    caller: Caller,
}

impl Visit {
    /// The frame's view of the signed-in key.
    fn viewer(&self) -> Viewer<'_> {
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

    fn is_admin(&self) -> bool {
        matches!(self.caller.allowed, Allowed::Open | Allowed::Admin)
    }

    /// A whole page for this visitor.
    fn page(&self, title: &str, body: Markup) -> Response {
        view::page(title, Some(&self.viewer()), body).into_response()
    }

    fn csrf(&self) -> &str {
        &self.session.csrf
    }

    /// The caller, allowed to read store `store` (404 otherwise, the API's answer for a store
    /// that is not the key's); counted against the store's rate limit (the key's was counted
    /// once, by [`visit`]).
    fn reads(&self, state: &AppState, store: &str) -> Result<Caller, Problem> {
        if !self.caller.may_use(store) {
            return Err(Problem::not_found());
        }
        state.rates.store(store)?;
        Ok(self.caller.clone())
    }

    /// The caller, allowed to change store `store` (403 for a read-only key, as on the API).
    fn writes(&self, state: &AppState, store: &str) -> Result<Caller, Problem> {
        let caller = self.reads(state, store)?;
        if caller.read_only {
            return Err(Problem::forbidden(
                "This API key is read-only: it cannot change the memory store. Nothing was changed.",
            ));
        }
        Ok(caller)
    }

    /// The caller, with an admin key (403 otherwise).
    fn admin(&self, what: &str) -> Result<Caller, Problem> {
        if self.is_admin() {
            Ok(self.caller.clone())
        } else {
            Err(Problem::forbidden(format!("{what} needs an admin key")))
        }
    }
}

/// Whether the request came over TLS: a balancer that terminates it says so in
/// `X-Forwarded-Proto` (the first entry, the client's side).
fn over_tls(headers: &HeaderMap) -> bool {
    headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(',').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("https"))
}

/// The session id the browser sent, if any: under TLS only the `__Host-` cookie counts (a
/// cookie of the plain name could have been planted by a sibling host).
fn session_cookie(headers: &HeaderMap) -> Option<String> {
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

fn set_cookie(headers: &HeaderMap, value: &str, max_age: u64) -> HeaderValue {
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
fn visit(state: &AppState, headers: &HeaderMap) -> Result<Visit, Problem> {
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
        Ok(caller) => Ok(Visit { session, caller }),
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
fn visit_page(state: &AppState, headers: &HeaderMap) -> Result<Visit, Box<Response>> {
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
fn same_origin(headers: &HeaderMap) -> bool {
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
async fn form(state: &AppState, headers: &HeaderMap, body: Body) -> Result<Form, Problem> {
    let kind = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(str::trim);
    if !kind.is_some_and(|k| k.eq_ignore_ascii_case("application/x-www-form-urlencoded")) {
        return Err(Problem::bad("the console takes only its own forms"));
    }
    let bytes = crate::tool::read_body(state, headers, body).await?;
    Ok(Form(form_urlencoded::parse(&bytes).into_owned().collect()))
}

/// A posted form's fields.
pub struct Form(Vec<(String, String)>);

impl Form {
    /// The first value of `name`.
    fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A state-changing post: from this origin, signed in, with the session's CSRF token; the
/// visitor and the form. Anything else is refused before anything is read or changed.
async fn posted(
    state: &AppState,
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

async fn home(State(state): State<Arc<AppState>>, headers: HeaderMap) -> Response {
    match visit(&state, &headers) {
        Ok(v) => match &v.caller.allowed {
            Allowed::Store(s) => Redirect::to(&view::store_url(s)).into_response(),
            _ => Redirect::to("/console/stores").into_response(),
        },
        Err(_) => Redirect::to("/console/login").into_response(),
    }
}

fn login_form(state: &AppState, message: Option<&str>) -> Markup {
    html! {
        @if let Some(m) = message {
            p.problem role="alert" { (m) }
        }
        form.login method="post" action="/console/login" {
            @if state.config.no_auth {
                p { "This server runs without keys (--no-auth): leave the key empty." }
            }
            label for="key" { "API key" }
            input #key type="password" name="key" autocomplete="off" required[!state.config.no_auth] autofocus;
            p.hint { "An admin key sees every store; a store key its own store. The key is checked on every page and never shown again." }
            button type="submit" { "Sign in" }
        }
    }
}

async fn login_page(State(state): State<Arc<AppState>>) -> Response {
    view::page("Sign in", None, login_form(&state, None)).into_response()
}

async fn login(State(state): State<Arc<AppState>>, headers: HeaderMap, body: Body) -> Response {
    respond(
        async {
            // The sign-in form has no token to check: it must at least say where it comes from
            // (every browser of the last years sends one or both).
            let says =
                headers.contains_key(header::ORIGIN) || headers.contains_key("sec-fetch-site");
            if !says || !same_origin(&headers) {
                return Err(Problem::forbidden(
                    "This form was not sent from a page of this console.",
                ));
            }
            let form = form(&state, &headers, body).await?;
            let key = form.get("key").unwrap_or("").trim().to_owned();
            let mut asked = HeaderMap::new();
            if let Some(host) = headers.get(header::HOST) {
                asked.insert(header::HOST, host.clone());
            }
            if !key.is_empty() {
                match HeaderValue::from_str(&key) {
                    Ok(v) => {
                        asked.insert("x-api-key", v);
                    }
                    Err(_) => {
                        let page = view::page(
                            "Sign in",
                            None,
                            login_form(&state, Some("invalid API key")),
                        );
                        return Ok((StatusCode::UNAUTHORIZED, page).into_response());
                    }
                }
            }
            let caller = match auth::identify(&state, &asked) {
                Ok(caller) => caller,
                Err(e) if e.status == StatusCode::UNAUTHORIZED => {
                    let page = view::page("Sign in", None, login_form(&state, Some(&e.message)));
                    return Ok((StatusCode::UNAUTHORIZED, page).into_response());
                }
                Err(e) => return Err(e.into()),
            };
            if let Some(old) = session_cookie(&headers) {
                state.sessions.end(&old);
            }
            let id = state
                .sessions
                .start(key)
                .ok_or_else(|| Problem::new(StatusCode::INTERNAL_SERVER_ERROR, "no randomness"))?;
            let to = match &caller.allowed {
                Allowed::Store(s) => view::store_url(s),
                _ => "/console/stores".to_owned(),
            };
            let mut response = Redirect::to(&to).into_response();
            response.headers_mut().insert(
                header::SET_COOKIE,
                set_cookie(&headers, &id, state.sessions.lifetime().as_secs()),
            );
            Ok(response)
        }
        .await,
    )
}

async fn logout(State(state): State<Arc<AppState>>, headers: HeaderMap, body: Body) -> Response {
    respond(
        async {
            posted(&state, &headers, body).await?;
            if let Some(id) = session_cookie(&headers) {
                state.sessions.end(&id);
            }
            let mut response = view::page(
                "Signed out",
                None,
                html! { p { "You are signed out. " a href="/console/login" { "Sign in again" } } },
            )
            .into_response();
            response
                .headers_mut()
                .insert(header::SET_COOKIE, set_cookie(&headers, "", 0));
            Ok(response)
        }
        .await,
    )
}

/// After an action: back to `to`, with the action named for the notice.
fn after(to: &str, done: &str) -> Response {
    let sep = if to.contains('?') { '&' } else { '?' };
    Redirect::to(&format!("{to}{sep}done={done}")).into_response()
}

/// The notice for `?done=…` (fixed words: nothing from the URL is shown).
fn notice_for(done: Option<&str>) -> Markup {
    let text = match done {
        Some("restored") => "The version was restored: it is the memory's current content now.",
        Some("redacted") => "The version was redacted: its content, path and hash are erased.",
        Some("deleted") => "The memory was deleted. Its versions are kept.",
        Some("archived") => "The store was archived: it is read-only now.",
        Some("revoked") => "The key was revoked on every server of this database.",
        Some("saved") => "The settings were saved; every server applies them within a second.",
        _ => return view::nothing(),
    };
    view::notice(text)
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
