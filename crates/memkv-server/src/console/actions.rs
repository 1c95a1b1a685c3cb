//! The console's actions: restore a version, redact a version, delete a memory, archive a store.
//! Each is confirmed on a page of its own that says what it does (a `GET`), then done by a form
//! post with the session's CSRF token, through the same library calls as the memory-stores
//! API, with the signed-in key recorded as the author of the versions it makes.

use axum::extract::Path;
use axum::response::Response;
use maud::{Markup, html};
use memkv::{MemoryId, VersionId};

use super::{Posted, Problem, Visit, after, view};
use crate::api::{blocking, existing, failed, handle, on_store, settled};
use crate::error::ApiError;

/// A confirmation page: what the action does, a button that does it, and a way back.
fn confirm(
    v: &Visit,
    title: &str,
    explain: Markup,
    action: &str,
    button: &str,
    back: &str,
) -> Response {
    v.page(
        title,
        html! {
            (explain)
            form.confirm method="post" action=(action) {
                input type="hidden" name="csrf" value=(v.csrf());
                button.danger type="submit" { (button) }
                " "
                a href=(back) { "Cancel" }
            }
        },
    )
}

fn version_url(store: &str, version: &str, what: &str) -> String {
    format!(
        "{}/versions/{}/{what}",
        view::store_url(store),
        view::segment(version)
    )
}

/// The version `version` of `store` (without its content), for a confirmation page: the visitor
/// must be able to change the store; 404 for an id that names no version of it.
async fn version_to_change(
    v: &Visit,
    store: &str,
    version: &str,
) -> Result<memkv::Version, Problem> {
    let caller = v.writes(store)?;
    let id: VersionId = version.parse().map_err(|_| Problem::not_found())?;
    on_store(&v.state, store, caller, move |s, store| {
        s.version(id, false).map_err(|e| failed(&e, store))
    })
    .await?
    .ok_or_else(Problem::not_found)
}

/// `GET /console/stores/{store}/versions/{version}/restore`.
pub async fn confirm_restore(
    Path((store, version)): Path<(String, String)>,
    v: Visit,
) -> Result<Response, Problem> {
    let asked = ("restore", "Restore this version?", "Restore");
    confirm_version(&v, &store, &version, asked, |ver| {
        html! {
            p { "Restoring makes the content of version " code { (ver.id) } " ("
                (ver.operation.as_str()) " " (view::time(ver.created_ms)) ") the memory's current content again, as a new version written by your key. "
                "If the memory was deleted since, it comes back at the version's path. Nothing is erased: every version stays." }
            @if let Some(p) = &ver.path { p { "Path: " code { (p) } } }
        }
    })
    .await
}

/// The page asking to confirm a change to version `version` of store `store`: `asked` is the
/// action's path segment, the page's title and the button's words; `explain` says what the
/// change does to this version.
async fn confirm_version(
    v: &Visit,
    store: &str,
    version: &str,
    (what, title, button): (&str, &str, &str),
    explain: impl FnOnce(&memkv::Version) -> Markup,
) -> Result<Response, Problem> {
    let ver = version_to_change(v, store, version).await?;
    Ok(confirm(
        v,
        title,
        explain(&ver),
        &version_url(store, version, what),
        button,
        &view::memory_url(store, &ver.memory.to_string()),
    ))
}

/// `POST /console/stores/{store}/versions/{version}/restore`.
pub async fn restore(
    Path((store, version)): Path<(String, String)>,
    Posted(v, _): Posted,
) -> Result<Response, Problem> {
    on_version(&v, &store, &version, "restored", |s, id, store| {
        Ok(settled(s.restore(id), store)?.id)
    })
    .await
}

/// A form post's change to version `version` of store `store` (a key that may change the
/// store; 404 for an id that is not a version's): `act` on the blocking pool, then back to the
/// page of the memory it names, with `done` for the notice.
async fn on_version(
    v: &Visit,
    store: &str,
    version: &str,
    done: &str,
    act: impl FnOnce(memkv::MemoryStore<'_>, VersionId, &str) -> Result<MemoryId, ApiError>
    + Send
    + 'static,
) -> Result<Response, Problem> {
    let caller = v.writes(store)?;
    let id: VersionId = version.parse().map_err(|_| Problem::not_found())?;
    let memory = on_store(&v.state, store, caller, move |s, store| act(s, id, store)).await?;
    Ok(after(&view::memory_url(store, &memory.to_string()), done))
}

/// `GET /console/stores/{store}/versions/{version}/redact`.
pub async fn confirm_redact(
    Path((store, version)): Path<(String, String)>,
    v: Visit,
) -> Result<Response, Problem> {
    let asked = ("redact", "Redact this version?", "Redact for good");
    confirm_version(&v, &store, &version, asked, |ver| {
        html! {
            p { "Redacting version " code { (ver.id) } " (" (ver.operation.as_str()) " " (view::time(ver.created_ms)) ") "
                strong { "erases its content, its path and its hash for good" }
                ": from every page of this console, the API, exports and backups taken from now on. "
                "The version stays in the memory's list, marked redacted, with when and by which key. This cannot be undone." }
            p { "The current version of a live memory cannot be redacted (the memory would go on showing it): change or delete the memory first." }
        }
    })
    .await
}

/// `POST /console/stores/{store}/versions/{version}/redact`.
pub async fn redact(
    Path((store, version)): Path<(String, String)>,
    Posted(v, _): Posted,
) -> Result<Response, Problem> {
    on_version(&v, &store, &version, "redacted", |s, id, store| {
        Ok(settled(s.redact(id), store)?.memory)
    })
    .await
}

/// `GET /console/stores/{store}/memories/{memory}/delete`.
pub async fn confirm_delete(
    Path((store, memory)): Path<(String, String)>,
    v: Visit,
) -> Result<Response, Problem> {
    let caller = v.writes(&store)?;
    let id: MemoryId = memory.parse().map_err(|_| Problem::not_found())?;
    let m = on_store(&v.state, &store, caller, move |s, store| {
        s.memory(id, false).map_err(|e| failed(&e, store))
    })
    .await?
    .ok_or_else(Problem::not_found)?;
    let explain = html! {
        p { "Deleting " code { (m.path) } " (" (view::bytes(m.size)) ") removes it from the store: the agent no longer sees it. "
            "Its versions are kept (a deletion version is added, written by your key), so it can be restored from its page." }
    };
    Ok(confirm(
        &v,
        "Delete this memory?",
        explain,
        &format!("{}/delete", view::memory_url(&store, &memory)),
        "Delete",
        &view::memory_url(&store, &memory),
    ))
}

/// `POST /console/stores/{store}/memories/{memory}/delete`.
pub async fn delete(
    Path((store, memory)): Path<(String, String)>,
    Posted(v, _): Posted,
) -> Result<Response, Problem> {
    let caller = v.writes(&store)?;
    let id: MemoryId = memory.parse().map_err(|_| Problem::not_found())?;
    let dir = on_store(&v.state, &store, caller, move |s, store| {
        let path = s
            .memory(id, false)
            .map_err(|e| failed(&e, store))?
            .map(|m| m.path);
        settled(s.delete_memory(id, None), store)?;
        Ok(path)
    })
    .await?;
    let dir = dir
        .as_deref()
        .and_then(|p| p.rsplit_once('/'))
        .map_or("/memories", |(d, _)| d)
        .to_owned();
    Ok(after(&view::dir_url(&store, &dir), "deleted"))
}

/// `GET /console/stores/{store}/archive`.
pub async fn confirm_archive(Path(store): Path<String>, v: Visit) -> Result<Response, Problem> {
    v.writes(&store)?;
    let key = store.clone();
    let info = blocking(&v.state, move |db| existing(db, &key)).await?;
    let explain = html! {
        p { "Archiving " strong { (info.name) } " (" code { (info.id) } ") makes it read-only for good: "
            "the agent's writes and the API's changes are refused from then on. Its memories can still be read and deleted, "
            "its versions redacted, and the store deleted. There is no un-archiving." }
    };
    Ok(confirm(
        &v,
        "Archive this store?",
        explain,
        &format!("{}/archive", view::store_url(&store)),
        "Archive",
        &view::store_url(&store),
    ))
}

/// `POST /console/stores/{store}/archive`.
pub async fn archive(Path(store): Path<String>, Posted(v, _): Posted) -> Result<Response, Problem> {
    let caller = v.writes(&store)?;
    let key = store.clone();
    blocking(&v.state, move |db| {
        handle(db, &key, &caller)?;
        settled(db.acting_as(caller.actor()).archive_store(&key), &key)
    })
    .await?;
    Ok(after(&view::store_url(&store), "archived"))
}
