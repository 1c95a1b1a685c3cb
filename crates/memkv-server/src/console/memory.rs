//! A memory's page (its content with line numbers, its facts and its versions), a version's
//! page, and the diff of two versions.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, Uri};
use axum::response::Response;
use maud::{Markup, html};
use memkv::{Memory, MemoryId, Operation, Version, VersionFilter, VersionId};

use super::{Problem, Visit, diff, notice_for, respond, view, visit_page};
use crate::AppState;
use crate::api::{Query, failed, on_store, wire};

/// `1 line`, `3 lines`.
fn lines(n: usize) -> String {
    if n == 1 {
        "1 line".to_owned()
    } else {
        format!("{n} lines")
    }
}

/// The most versions a memory's page lists.
const VERSIONS_SHOWN: usize = 500;

/// A content with its line numbers.
pub fn numbered(content: &str) -> Markup {
    html! {
        table.content {
            caption.visually-hidden { "Content, by line" }
            tbody {
                @for (i, line) in content.lines().enumerate() {
                    tr { th scope="row" class="num" { (i + 1) } td { code { (line) } } }
                }
            }
        }
    }
}

fn operation(v: &Version) -> &'static str {
    match (v.redacted.is_some(), v.operation) {
        (true, _) => "redacted",
        (false, op) => op.as_str(),
    }
}

/// The versions table, newest first, with each one's actions for a writer.
fn versions_table(
    v: &Visit,
    store: &str,
    versions: &[Version],
    current: Option<VersionId>,
) -> Markup {
    let writer = !v.caller.read_only;
    html! {
        table.versions {
            thead { tr {
                th scope="col" { "Version" } th scope="col" { "Operation" } th scope="col" { "When" }
                th scope="col" { "By" } th scope="col" class="num" { "Size" } th scope="col" { "Actions" }
            } }
            tbody {
                @for ver in versions.iter().rev() {
                    @let id = ver.id.to_string();
                    tr {
                        td {
                            a href=(format!("{}/versions/{}", view::store_url(store), view::segment(&id))) { code { (id) } }
                            @if Some(ver.id) == current { " (current)" }
                        }
                        td { (operation(ver)) }
                        td { (view::time(ver.created_ms)) }
                        td { (view::actor(ver.actor.as_ref())) }
                        td.num { @match ver.size { Some(n) => (view::bytes(n)), None => "—" } }
                        td {
                            @if writer && ver.redacted.is_none() && ver.operation != Operation::Deleted && Some(ver.id) != current {
                                a href=(format!("{}/versions/{}/restore", view::store_url(store), view::segment(&id))) { "Restore…" }
                                " "
                            }
                            @if writer && ver.redacted.is_none() && Some(ver.id) != current {
                                a href=(format!("{}/versions/{}/redact", view::store_url(store), view::segment(&id))) { "Redact…" }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The form choosing two versions to compare (the older first).
fn diff_form(
    store: &str,
    memory: &str,
    versions: &[Version],
    from: Option<VersionId>,
    to: Option<VersionId>,
) -> Markup {
    let comparable: Vec<&Version> = versions.iter().filter(|v| v.redacted.is_none()).collect();
    let newest = comparable.last().map(|v| v.id);
    let before = comparable.iter().rev().nth(1).map(|v| v.id);
    let from = from.or(before);
    let to = to.or(newest);
    html! {
        @if comparable.len() >= 2 {
            form.compare method="get" action=(format!("{}/diff", view::memory_url(store, memory))) {
                label for="from" { "Compare" }
                select #from name="from" {
                    @for ver in comparable.iter().rev() {
                        option value=(ver.id.to_string()) selected[Some(ver.id) == from] { (ver.id) " · " (operation(ver)) }
                    }
                }
                label for="to" { "with" }
                select #to name="to" {
                    @for ver in comparable.iter().rev() {
                        option value=(ver.id.to_string()) selected[Some(ver.id) == to] { (ver.id) " · " (operation(ver)) }
                    }
                }
                button type="submit" { "Show the differences" }
            }
        }
    }
}

/// A memory and its versions: the live memory, or `None` when it was deleted.
type Found = (Option<Memory>, Vec<Version>);

async fn found(
    state: &Arc<AppState>,
    v: &Visit,
    store: &str,
    memory: &str,
) -> Result<Found, Problem> {
    let caller = v.reads(state, store)?;
    let id: MemoryId = memory.parse().map_err(|_| Problem::not_found())?;
    let (live, versions) = on_store(state, store, caller, move |s, store| {
        let live = s.memory(id, true).map_err(|e| failed(&e, store))?;
        let filter = VersionFilter {
            memory: Some(id),
            ..VersionFilter::default()
        };
        let versions = s
            .versions(&filter, None, VERSIONS_SHOWN, false)
            .map_err(|e| failed(&e, store))?
            .map_or_else(|_| Vec::new(), |p| p.items);
        Ok((live, versions))
    })
    .await?;
    if live.is_none() && versions.is_empty() {
        return Err(Problem::not_found());
    }
    Ok((live, versions))
}

/// `GET /console/stores/{store}/memories/{memory}`.
pub async fn memory(
    State(state): State<Arc<AppState>>,
    Path((store, memory)): Path<(String, String)>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    let v = match visit_page(&state, &headers) {
        Ok(v) => v,
        Err(r) => return *r,
    };
    respond(
        async {
            let (live, versions) = found(&state, &v, &store, &memory).await?;
            let q = Query::of(&uri);
            let title = live
                .as_ref()
                .map(|m| m.path.clone())
                .or_else(|| versions.iter().rev().find_map(|v| v.path.clone()))
                .unwrap_or_else(|| memory.clone());
            let writer = !v.caller.read_only;
            let body = html! {
                (notice_for(q.get("done")))
                p { a href=(view::store_url(&store)) { "Back to the store" } }
                @match &live {
                    Some(m) => {
                        dl.facts {
                            dt { "Path" } dd { code { (m.path) } }
                            dt { "Id" } dd { code { (m.id) } }
                            dt { "Size" } dd { (view::bytes(m.size)) " (" (m.size) " bytes)" }
                            dt { "SHA-256" } dd { code.hash { (wire::hex(&m.sha256)) } }
                            dt { "Created" } dd { (view::time(m.created_ms)) }
                            dt { "Changed" } dd { (view::time(m.updated_ms)) }
                        }
                        @if writer {
                            ul.actions { li { a href=(format!("{}/delete", view::memory_url(&store, &memory))) { "Delete this memory…" } } }
                        }
                        section aria-labelledby="content" {
                            h2 #content { "Content" }
                            (numbered(m.content.as_deref().unwrap_or("")))
                        }
                    },
                    None => p.notice { "This memory was deleted; its versions are kept below." },
                }
                section aria-labelledby="versions" {
                    h2 #versions { "Versions" }
                    (diff_form(&store, &memory, &versions, None, None))
                    (versions_table(&v, &store, &versions, live.as_ref().map(|m| m.version)))
                }
            };
            Ok(v.page(&title, body))
        }
        .await,
    )
}

/// `GET /console/stores/{store}/versions/{version}`: one version's facts and content.
pub async fn version(
    State(state): State<Arc<AppState>>,
    Path((store, version)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    let v = match visit_page(&state, &headers) {
        Ok(v) => v,
        Err(r) => return *r,
    };
    respond(
        async {
            let caller = v.reads(&state, &store)?;
            let id: VersionId = version.parse().map_err(|_| Problem::not_found())?;
            let ver = on_store(&state, &store, caller, move |s, store| {
                s.version(id, true).map_err(|e| failed(&e, store))
            })
            .await?
            .ok_or_else(Problem::not_found)?;
            let memory = ver.memory.to_string();
            let body = html! {
                p { a href=(view::memory_url(&store, &memory)) { "Back to the memory" } }
                dl.facts {
                    dt { "Version" } dd { code { (ver.id) } }
                    dt { "Memory" } dd { code { (memory) } }
                    dt { "Operation" } dd { (operation(&ver)) }
                    dt { "When" } dd { (view::time(ver.created_ms)) }
                    dt { "By" } dd { (view::actor(ver.actor.as_ref())) }
                    dt { "Path" } dd { @match &ver.path { Some(p) => code { (p) }, None => "— (redacted)" } }
                    @if let Some(sha) = &ver.sha256 { dt { "SHA-256" } dd { code.hash { (wire::hex(sha)) } } }
                    @if let Some(r) = &ver.redacted {
                        dt { "Redacted" } dd { (view::time(r.at_ms)) " by " (view::actor(r.by.as_ref())) }
                    }
                }
                @match &ver.content {
                    Some(c) => section aria-labelledby="content" { h2 #content { "Content" } (numbered(c)) },
                    None if ver.redacted.is_some() => p { "This version was redacted: its content is erased." },
                    None => p { "A deletion has no content." },
                }
            };
            Ok(v.page(&format!("Version {}", ver.id), body))
        }
        .await,
    )
}

/// `GET /console/stores/{store}/memories/{memory}/diff?from=&to=`: the differences between two
/// versions of the memory.
pub async fn diff(
    State(state): State<Arc<AppState>>,
    Path((store, memory)): Path<(String, String)>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    let v = match visit_page(&state, &headers) {
        Ok(v) => v,
        Err(r) => return *r,
    };
    respond(
        async {
            let q = Query::of(&uri);
            let pick = |name: &str| -> Result<VersionId, Problem> {
                q.get(name)
                    .and_then(|t| t.parse().ok())
                    .ok_or_else(|| Problem::bad(format!("choose two versions to compare ({name} is missing or not a version id)")))
            };
            let (from, to) = (pick("from")?, pick("to")?);
            let (_, versions) = found(&state, &v, &store, &memory).await?;
            let caller = v.reads(&state, &store)?;
            let (a, b) = on_store(&state, &store, caller, move |s, store| {
                let get = |id| s.version(id, true).map_err(|e| failed(&e, store));
                Ok((get(from)?, get(to)?))
            })
            .await?;
            let mem_id: MemoryId = memory.parse().map_err(|_| Problem::not_found())?;
            let (Some(a), Some(b)) = (a, b) else {
                return Err(Problem::not_found());
            };
            if a.memory != mem_id || b.memory != mem_id {
                return Err(Problem::bad("both versions must be versions of this memory"));
            }
            let (table, counts) = diff::render(
                a.content.as_deref().unwrap_or(""),
                b.content.as_deref().unwrap_or(""),
            );
            let body = html! {
                p { a href=(view::memory_url(&store, &memory)) { "Back to the memory" } }
                (diff_form(&store, &memory, &versions, Some(from), Some(to)))
                p.summary {
                    "From " code { (a.id) } " (" (operation(&a)) ", " (view::time(a.created_ms)) ") to "
                    code { (b.id) } " (" (operation(&b)) ", " (view::time(b.created_ms)) "): "
                    (lines(counts.added)) " added, " (lines(counts.removed)) " removed."
                }
                @if let Some(pa) = &a.path { @if Some(pa) != b.path.as_ref() {
                    p { "Path: " code { (pa) } " → " code { (b.path.as_deref().unwrap_or("—")) } }
                } }
                (table)
            };
            Ok(v.page("Differences", body))
        }
        .await,
    )
}
