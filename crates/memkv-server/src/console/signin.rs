//! Signing in (an API key exchanged for a session and its cookie), the console's home, and
//! signing out.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use maud::{Markup, html};

use super::guard::{Posted, form_within, same_origin, session_cookie, set_cookie, visit};
use super::{Problem, view};
use crate::AppState;
use crate::auth::{self, Allowed};
use crate::polls;

pub(super) async fn home(State(state): State<Arc<AppState>>, headers: HeaderMap) -> Response {
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

pub(super) async fn login_page(State(state): State<Arc<AppState>>) -> Response {
    view::page("Sign in", None, login_form(&state, None)).into_response()
}

pub(super) async fn login(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, Problem> {
    // The sign-in form has no token to check: it must at least say where it comes from
    // (every browser of the last years sends one or both).
    let says = headers.contains_key(header::ORIGIN) || headers.contains_key("sec-fetch-site");
    if !says || !same_origin(&headers) {
        return Err(Problem::forbidden(
            "This form was not sent from a page of this console.",
        ));
    }
    // The one form read before any key is known: few at once, small and quick, so that
    // no one without a key can hold the server's connections (`crate::polls`).
    let Some(_reading) = state.waiters.signin() else {
        return Err(Problem::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "Too many sign-ins are under way; try again in a moment.",
        ));
    };
    let form = form_within(
        &headers,
        body,
        polls::SIGNIN_MAX_BODY,
        polls::SIGNIN_BODY_TIMEOUT,
    )
    .await?;
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
                let page = view::page("Sign in", None, login_form(&state, Some("invalid API key")));
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

pub(super) async fn logout(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    _: Posted,
) -> Result<Response, Problem> {
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
