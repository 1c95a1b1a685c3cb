//! The web console at `/console`: operators see, search, compare and govern what agents
//! remember, in server-rendered HTML (maud) with no script at all, over the same library calls
//! as the memory-stores API.
//!
//! - `session`: the sessions an API key is exchanged for; `signin`: signing in and out;
//!   `guard`: what every request passes: its session and cookie, the key checked again
//!   (`auth::identify`, the API's own check: a store key reaches only its store and a read-only
//!   key changes nothing, exactly as on the API), and for a form post its origin and CSRF token;
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
mod guard;
mod memory;
pub mod session;
mod signin;
mod stores;
mod view;

use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use maud::{Markup, html};

use crate::AppState;
use crate::access::Denied;
use crate::error::ApiError;
use guard::{Form, Posted, Visit};

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
        .route("/console", get(signin::home))
        .route("/console/", get(signin::home))
        .route(
            "/console/login",
            get(signin::login_page).post(signin::login),
        )
        .route("/console/logout", post(signin::logout))
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

/// The console's words for the refusals of `crate::access`, as full sentences.
impl From<Denied> for Problem {
    fn from(denied: Denied) -> Self {
        match denied {
            Denied::OutOfScope => Problem::not_found(),
            Denied::Limited(e) => e.into(),
            Denied::ReadOnly => Problem::forbidden(
                "This API key is read-only: it cannot change the memory store. Nothing was changed.",
            ),
        }
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

/// What a console page's query string may say; each page reads its own fields.
#[derive(Debug, Default, serde::Deserialize)]
struct Ask {
    /// The action just done, for the page's notice.
    done: Option<String>,
    /// A filter of the stores page, or a search's text.
    q: Option<String>,
    /// A search's mode (`ranked`, `literal`, `regex`).
    mode: Option<String>,
    /// The folder shown on a store's page, and the page of it.
    dir: Option<String>,
    page: Option<String>,
    /// The versions a comparison shows.
    from: Option<String>,
    to: Option<String>,
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
        Some("saved") => "The settings were saved; every server applies them within moments.",
        _ => return view::nothing(),
    };
    view::notice(text)
}
