//! A memory's page (its content with line numbers, its facts and its versions), a version's
//! page, and the diff of two versions.

use std::collections::VecDeque;
use std::sync::Arc;

use axum::extract::Path;
use axum::response::Response;
use maud::{Markup, html};
use memkv::{Memory, MemoryId, Operation, Version, VersionFilter, VersionId};

use super::{Ask, Problem, Visit, diff, notice_for, view};
use crate::AppState;
use crate::api::{blocking, failed, handle_and_info, on_store, settled, wire};
use crate::auth::Caller;
use crate::params::Params;

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
    archived: bool,
) -> Markup {
    let writer = !v.caller.read_only;
    // An archived store takes no restore (the library refuses it); redaction it takes.
    let restorer = writer && !archived;
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
                            @if restorer && ver.redacted.is_none() && ver.operation != Operation::Deleted && Some(ver.id) != current {
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

/// A memory, its newest versions (oldest first) and whether older ones were left out, and
/// whether its store is archived.
struct Found {
    live: Option<Memory>,
    versions: Vec<Version>,
    older: bool,
    archived: bool,
}

async fn found(
    state: &Arc<AppState>,
    caller: Caller,
    store: &str,
    memory: &str,
) -> Result<Found, Problem> {
    let id: MemoryId = memory.parse().map_err(|_| Problem::not_found())?;
    let key = store.to_owned();
    let found = blocking(state, move |db| {
        let store = key.as_str();
        let (s, info) = handle_and_info(db, store, &caller)?;
        let archived = info.archived_ms.is_some();
        let live = s.memory(id, true).map_err(|e| failed(&e, store))?;
        let filter = VersionFilter {
            memory: Some(id),
            ..VersionFilter::default()
        };
        // The newest VERSIONS_SHOWN, a page at a time (the library lists oldest first).
        let mut kept = VecDeque::new();
        let mut older = false;
        let mut page = None;
        loop {
            let got = s.versions(&filter, page.as_deref(), VERSIONS_SHOWN, false);
            let got = settled(got, store)?;
            for v in got.items {
                if kept.len() == VERSIONS_SHOWN {
                    kept.pop_front();
                    older = true;
                }
                kept.push_back(v);
            }
            match got.next {
                Some(next) => page = Some(next),
                None => break,
            }
        }
        Ok(Found {
            live,
            versions: kept.into(),
            older,
            archived,
        })
    })
    .await?;
    if found.live.is_none() && found.versions.is_empty() {
        return Err(Problem::not_found());
    }
    Ok(found)
}

/// `GET /console/stores/{store}/memories/{memory}`.
pub async fn memory(
    Path((store, memory)): Path<(String, String)>,
    v: Visit,
    Params(ask): Params<Ask>,
) -> Result<Response, Problem> {
    let caller = v.reads(&store)?;
    let Found {
        live,
        versions,
        older,
        archived,
    } = found(&v.state, caller, &store, &memory).await?;
    let title = live
        .as_ref()
        .map(|m| m.path.clone())
        .or_else(|| versions.iter().rev().find_map(|v| v.path.clone()))
        .unwrap_or_else(|| memory.clone());
    let writer = !v.caller.read_only;
    let body = html! {
        (notice_for(ask.done.as_deref()))
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
            @if older { p { "Only the newest " (VERSIONS_SHOWN) " versions are listed." } }
            (versions_table(&v, &store, &versions, live.as_ref().map(|m| m.version), archived))
        }
    };
    Ok(v.page(&title, body))
}

/// `GET /console/stores/{store}/versions/{version}`: one version's facts and content.
pub async fn version(
    Path((store, version)): Path<(String, String)>,
    v: Visit,
) -> Result<Response, Problem> {
    let caller = v.reads(&store)?;
    let id: VersionId = version.parse().map_err(|_| Problem::not_found())?;
    let ver = on_store(&v.state, &store, caller, move |s, store| {
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

/// `GET /console/stores/{store}/memories/{memory}/diff?from=&to=`: the differences between two
/// versions of the memory.
pub async fn diff(
    Path((store, memory)): Path<(String, String)>,
    v: Visit,
    Params(ask): Params<Ask>,
) -> Result<Response, Problem> {
    let pick = |name: &str, value: &Option<String>| -> Result<VersionId, Problem> {
        value
            .as_deref()
            .and_then(|t| t.parse().ok())
            .ok_or_else(|| {
                Problem::bad(format!(
                    "choose two versions to compare ({name} is missing or not a version id)"
                ))
            })
    };
    let (from, to) = (pick("from", &ask.from)?, pick("to", &ask.to)?);
    let caller = v.reads(&store)?;
    let found = found(&v.state, caller.clone(), &store, &memory).await?;
    let mem_id: MemoryId = memory.parse().map_err(|_| Problem::not_found())?;
    let (a, b) = on_store(&v.state, &store, caller, move |s, store| {
        let get = |id| s.version(id, true).map_err(|e| failed(&e, store));
        Ok((get(from)?, get(to)?))
    })
    .await?;
    let (Some(a), Some(b)) = (a, b) else {
        return Err(Problem::not_found());
    };
    if a.memory != mem_id || b.memory != mem_id {
        return Err(Problem::bad(
            "both versions must be versions of this memory",
        ));
    }
    if let Some(gone) = [&a, &b].into_iter().find(|v| v.redacted.is_some()) {
        return Err(Problem::bad(format!(
            "version {} was redacted: it has no content to compare",
            gone.id
        )));
    }
    let (old, new) = (
        a.content.clone().unwrap_or_default(),
        b.content.clone().unwrap_or_default(),
    );
    // Up to the diff's deadline of work: off the async workers.
    let (table, counts) = blocking(&v.state, move |_| Ok(diff::render(&old, &new))).await?;
    let versions = found.versions;
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
