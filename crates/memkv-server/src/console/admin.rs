//! The admin pages: the API keys (list, add with the key shown once, revoke) and a store's
//! settings. Admin keys only (a store key gets 403, as on `/v1/keys`).

use axum::extract::Path;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use maud::{Markup, html};
use memkv::{ApiKey, Error, KeyScope, NewKey};
use serde_json::{Map, Value};

use super::{Ask, Form, Posted, Problem, Visit, after, notice_for, view};
use crate::api::settings::{parse_patch, settings_json};
use crate::api::{blocking, failed};
use crate::params::Params;

fn key_refused(e: &Error) -> Problem {
    match e {
        Error::InvalidKey(_) | Error::InvalidUser { .. } => Problem::bad(e.to_string()),
        _ => failed(e, "").into(),
    }
}

fn scope_words(k: &ApiKey) -> String {
    match &k.scope {
        KeyScope::Admin => "admin (every store)".to_owned(),
        KeyScope::Store {
            store,
            read_only: true,
        } => format!("store {store}, read-only"),
        KeyScope::Store { store, .. } => format!("store {store}"),
    }
}

fn keys_page(v: &Visit, keys: &[ApiKey], done: Option<&str>, problem: Option<&str>) -> Markup {
    html! {
        (notice_for(done))
        @if let Some(p) = problem { p.problem role="alert" { (p) } }
        @if keys.is_empty() {
            p { "No API key exists." }
        } @else {
            table.keys {
                thead { tr {
                    th scope="col" { "Id" } th scope="col" { "Opens" } th scope="col" { "Label" }
                    th scope="col" { "Created" } th scope="col" { "Expires" } th scope="col" { "Last used" } th scope="col" { "Actions" }
                } }
                tbody {
                    @for k in keys {
                        tr {
                            td { code { (k.id) } }
                            td { (scope_words(k)) }
                            td { (k.label) }
                            td { (view::time(k.created_ms)) }
                            td { @match k.expires_ms { Some(ms) => (view::time(ms)), None => "never" } }
                            td { @match k.last_used_ms { Some(ms) => (view::time(ms)), None => "—" } }
                            td { a href=(format!("/console/keys/{}/revoke", view::segment(&k.id))) { "Revoke…" } }
                        }
                    }
                }
            }
        }
        section aria-labelledby="add" {
            h2 #add { "Add a key" }
            form.add-key method="post" action="/console/keys" {
                input type="hidden" name="csrf" value=(v.csrf());
                p {
                    label for="store" { "Store (empty: an admin key for every store)" }
                    input #store type="text" name="store" autocomplete="off";
                }
                p {
                    input #read_only type="checkbox" name="read_only" value="1";
                    label for="read_only" { "Read-only (store keys only)" }
                }
                p {
                    label for="label" { "Label" }
                    input #label type="text" name="label" autocomplete="off";
                }
                p {
                    label for="expires" { "Expires after (such as 30d or 12h; empty: never)" }
                    input #expires type="text" name="expires" autocomplete="off";
                }
                button type="submit" { "Add the key" }
            }
        }
    }
}

/// `GET /console/keys`.
pub async fn keys(v: Visit, Params(ask): Params<Ask>) -> Result<Response, Problem> {
    v.admin("the API keys page")?;
    let keys = blocking(&v.state, |db| db.api_keys().map_err(|e| failed(&e, ""))).await?;
    Ok(v.page("API keys", keys_page(&v, &keys, ask.done.as_deref(), None)))
}

fn new_key(form: &Form) -> Result<NewKey, String> {
    let store = form.get("store").unwrap_or("").trim();
    let read_only = form.get("read_only").is_some();
    let scope = match store {
        "" if read_only => return Err("read-only is for a store key: name the store".into()),
        "" => KeyScope::Admin,
        s => KeyScope::Store {
            store: s.to_owned(),
            read_only,
        },
    };
    let expires_ms = match form.get("expires").unwrap_or("").trim() {
        "" => None,
        text => {
            let d = humantime::parse_duration(text)
                .map_err(|e| format!("expires: {text:?} is not a duration such as 30d: {e}"))?;
            let now = i64::try_from(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap_or_default()
                    .as_millis(),
            )
            .unwrap_or(i64::MAX);
            Some(now.saturating_add(i64::try_from(d.as_millis()).unwrap_or(i64::MAX)))
        }
    };
    Ok(NewKey {
        scope,
        label: form.get("label").unwrap_or("").trim().to_owned(),
        expires_ms,
    })
}

/// `POST /console/keys`: adds a key and shows it, once.
pub async fn add_key(Posted(v, form): Posted) -> Result<Response, Problem> {
    v.admin("adding an API key")?;
    let problem = match new_key(&form) {
        Ok(new) => match blocking(&v.state, move |db| Ok(db.add_key(&new))).await? {
            Ok((added, key)) => {
                let body = html! {
                    p.notice role="status" { "The key " code { (added.id) } " (" (scope_words(&added)) ") was added. Copy it now: it is not shown again." }
                    p { label for="new-key" { "The new key" } }
                    p { input #new-key.key type="text" readonly value=(key) size="60"; }
                    p { a href="/console/keys" { "Back to the keys" } }
                };
                return Ok(v.page("Key added", body));
            }
            Err(e) => match key_refused(&e) {
                p if p.status == StatusCode::BAD_REQUEST => p.message,
                p => return Err(p),
            },
        },
        Err(message) => message,
    };
    let keys = blocking(&v.state, |db| db.api_keys().map_err(|e| failed(&e, ""))).await?;
    let page = v.page("API keys", keys_page(&v, &keys, None, Some(&problem)));
    Ok((StatusCode::BAD_REQUEST, page).into_response())
}

/// `GET /console/keys/{key}/revoke`.
pub async fn confirm_revoke(Path(id): Path<String>, v: Visit) -> Result<Response, Problem> {
    v.admin("revoking an API key")?;
    let keys = blocking(&v.state, |db| db.api_keys().map_err(|e| failed(&e, ""))).await?;
    let k = keys
        .iter()
        .find(|k| k.id == id)
        .ok_or_else(Problem::not_found)?;
    let own = v.caller.key_id.as_deref() == Some(k.id.as_str());
    let body = html! {
        p { "Revoking " code { (k.id) } " (" (scope_words(k)) @if !k.label.is_empty() { ", " (k.label) } ") "
            "stops it on every server of this database within moments. It cannot be undone." }
        @if own { p.problem { "This is the key you are signed in with: you will be signed out." } }
        form.confirm method="post" action=(format!("/console/keys/{}/revoke", view::segment(&k.id))) {
            input type="hidden" name="csrf" value=(v.csrf());
            button.danger type="submit" { "Revoke" }
            " " a href="/console/keys" { "Cancel" }
        }
    };
    Ok(v.page("Revoke this key?", body))
}

/// `POST /console/keys/{key}/revoke`.
pub async fn revoke(Path(id): Path<String>, Posted(v, _): Posted) -> Result<Response, Problem> {
    v.admin("revoking an API key")?;
    let removed = blocking(&v.state, move |db| {
        db.revoke_key(&id).map_err(|e| failed(&e, ""))
    })
    .await?;
    if !removed {
        return Err(Problem::not_found());
    }
    Ok(after("/console/keys", "revoked"))
}

/// A setting's value as the form shows it (empty: the store has none of its own).
fn shown(value: Option<&Value>) -> String {
    match value {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(v) => v.to_string(),
    }
}

fn settings_page(
    v: &Visit,
    store: &str,
    current: &Value,
    done: Option<&str>,
    problem: Option<&str>,
) -> Markup {
    html! {
        (notice_for(done))
        @if let Some(p) = problem { p.problem role="alert" { (p) } }
        p { a href=(view::store_url(store)) { "Back to the store" } }
        p { "A value given here is this store's own; an empty field uses the server's default. Counts are whole numbers, times durations such as 30d, "
            code { "off" } " for no limit where allowed; secrets is reject, redact or off." }
        form.settings method="post" action=(format!("{}/settings", view::store_url(store))) {
            input type="hidden" name="csrf" value=(v.csrf());
            table {
                thead { tr { th scope="col" { "Setting" } th scope="col" { "This store's own" } th scope="col" { "In effect" } } }
                tbody {
                    @for name in memkv::SETTINGS {
                        tr {
                            th scope="row" { label for=(name) { (name) } }
                            td { input id=(name) type="text" name=(name) value=(shown(current["own"].get(name))); }
                            td { (shown(current["effective"].get(name))) }
                        }
                    }
                }
            }
            button type="submit" { "Save" }
        }
    }
}

/// Store `id`'s settings as `GET /v1/memory_stores/{id}/settings` answers them; an id memkv
/// does not accept names no store (404, as on the API).
fn current_settings(db: &memkv::Database, id: &str) -> Result<Value, crate::error::ApiError> {
    let refused = |e: Error| match e {
        Error::InvalidUser { .. } => crate::error::ApiError::not_found(),
        e => failed(&e, id),
    };
    let own = db.store_settings(id).map_err(refused)?;
    let effective = db.effective_settings(id).map_err(refused)?;
    Ok(settings_json(id, &own, &effective))
}

/// `GET /console/stores/{store}/settings`.
pub async fn settings(
    Path(store): Path<String>,
    v: Visit,
    Params(ask): Params<Ask>,
) -> Result<Response, Problem> {
    v.admin("a store's settings")?;
    let key = store.clone();
    let current = blocking(&v.state, move |db| current_settings(db, &key)).await?;
    Ok(v.page(
        &format!("Settings of {store}"),
        settings_page(&v, &store, &current, ask.done.as_deref(), None),
    ))
}

/// The form as a settings patch: a number or word sets, an empty field resets.
fn patch_of(form: &Form) -> Map<String, Value> {
    memkv::SETTINGS
        .iter()
        .map(|name| {
            let text = form.get(name).unwrap_or("").trim();
            let value = if text.is_empty() {
                Value::Null
            } else if let Ok(n) = text.parse::<u64>() {
                Value::from(n)
            } else {
                Value::from(text)
            };
            ((*name).to_owned(), value)
        })
        .collect()
}

/// `POST /console/stores/{store}/settings`.
pub async fn save_settings(
    Path(store): Path<String>,
    Posted(v, form): Posted,
) -> Result<Response, Problem> {
    v.admin("changing a store's settings")?;
    let key = store.clone();
    let outcome = match parse_patch(&patch_of(&form)) {
        Err(message) => Err(message),
        Ok((change, reset)) => {
            blocking(&v.state, move |db| {
                match db.update_store_settings(&key, &change, &reset) {
                    Ok(_) => Ok(Ok(())),
                    Err(e @ (Error::InvalidSettings(_) | Error::InvalidUser { .. })) => {
                        Ok(Err(e.to_string()))
                    }
                    Err(e) => Err(failed(&e, &key)),
                }
            })
            .await?
        }
    };
    match outcome {
        Ok(()) => Ok(after(
            &format!("{}/settings", view::store_url(&store)),
            "saved",
        )),
        Err(problem) => {
            let key = store.clone();
            let current = blocking(&v.state, move |db| {
                let own = db.store_settings(&key).map_err(|e| failed(&e, &key))?;
                let effective = db.effective_settings(&key).map_err(|e| failed(&e, &key))?;
                Ok(settings_json(&key, &own, &effective))
            })
            .await?;
            let page = v.page(
                &format!("Settings of {store}"),
                settings_page(&v, &store, &current, None, Some(&problem)),
            );
            Ok((StatusCode::BAD_REQUEST, page).into_response())
        }
    }
}
