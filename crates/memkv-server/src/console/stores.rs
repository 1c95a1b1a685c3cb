//! The stores page, a store's page (its tree, a folder at a time, with sizes), its search and
//! its recent changes.

use axum::extract::Path;
use axum::response::Response;
use maud::{Markup, html};
use memkv::{ChangeEntry, Error, ListItem, SearchMode, SearchRequest, StoreInfo};
use std::collections::HashMap;

use super::{Ask, Problem, Visit, notice_for, view};
use crate::api::{blocking, failed, handle_and_info, on_store};
use crate::auth::Allowed;
use crate::params::Params;

/// Rows on one page of a folder.
const FOLDER_PAGE: usize = 200;
/// Stores shown at most (narrow the filter for others).
const STORES_SHOWN: usize = 500;
/// How far back in a store's feed its recent changes are looked for: the last ones shown.
const RECENT_SCAN: u64 = RECENT_SHOWN as u64;
/// Recent changes shown.
const RECENT_SHOWN: usize = 15;

/// One row of the stores page.
struct Row {
    info: StoreInfo,
    files: u64,
    bytes: u64,
    last_write_ms: Option<i64>,
}

/// `GET /console/stores?q=`: every store (admin) or the key's own, filtered by name or id.
pub async fn list(v: Visit, Params(ask): Params<Ask>) -> Result<Response, Problem> {
    let filter = ask.q.as_deref().unwrap_or("").trim().to_owned();
    let only = match &v.caller.allowed {
        Allowed::Store(s) => Some(s.clone()),
        _ => None,
    };
    let needle = filter.to_lowercase();
    let (rows, matched) = blocking(&v.state, move |db| {
        let mut infos = Vec::new();
        match &only {
            Some(id) => infos.extend(db.store_info(id).map_err(|e| failed(&e, id))?),
            None => {
                let mut after: Option<String> = None;
                loop {
                    let (page, more) = db
                        .list_stores(true, after.as_deref(), 1000)
                        .map_err(|e| failed(&e, ""))?;
                    after = page.last().map(|s| s.id.clone());
                    infos.extend(page);
                    if !more || after.is_none() {
                        break;
                    }
                }
            }
        }
        if let Some(id) = &only {
            infos.retain(|s| {
                needle.is_empty()
                    || s.name.to_lowercase().contains(&needle)
                    || s.id.to_lowercase().contains(&needle)
            });
            let matched = infos.len();
            let rows = infos
                .into_iter()
                .map(|info| {
                    let user = db
                        .user(id)
                        .map_err(|_| crate::error::ApiError::not_found())?;
                    let files = user.files().map_err(|e| failed(&e, id))?;
                    Ok(Row {
                        info,
                        files: files.len() as u64,
                        bytes: files.iter().map(|f| f.size).sum(),
                        last_write_ms: files.iter().map(|f| f.modified_ms).max(),
                    })
                })
                .collect::<Result<Vec<Row>, crate::error::ApiError>>()?;
            return Ok((rows, matched));
        }
        infos.retain(|s| {
            needle.is_empty()
                || s.name.to_lowercase().contains(&needle)
                || s.id.to_lowercase().contains(&needle)
        });
        let matched = infos.len();
        infos.truncate(STORES_SHOWN);
        let totals: HashMap<String, (u64, u64, i64)> = db
            .users()
            .map_err(|e| failed(&e, ""))?
            .into_iter()
            .map(|u| (u.user, (u.files, u.bytes, u.last_write_ms)))
            .collect();
        let rows: Vec<Row> = infos
            .into_iter()
            .map(|info| {
                let t = totals.get(&info.id).copied();
                Row {
                    files: t.map_or(0, |t| t.0),
                    bytes: t.map_or(0, |t| t.1),
                    last_write_ms: t.map(|t| t.2),
                    info,
                }
            })
            .collect();
        Ok((rows, matched))
    })
    .await?;
    let body = html! {
        form.filter method="get" action="/console/stores" role="search" {
            label for="q" { "Filter by name or id" }
            input #q type="search" name="q" value=(filter);
            button type="submit" { "Filter" }
        }
        @if rows.is_empty() {
            p { "No store matches." }
        } @else {
            table.stores {
                caption { (matched) " " (if matched == 1 { "store" } else { "stores" }) }
                thead { tr {
                    th scope="col" { "Name" } th scope="col" { "Id" }
                    th scope="col" class="num" { "Memories" } th scope="col" class="num" { "Bytes" }
                    th scope="col" { "Last write" } th scope="col" { "Archived" }
                } }
                tbody {
                    @for r in &rows {
                        tr {
                            td { a href=(view::store_url(&r.info.id)) { (r.info.name) } }
                            td { code { (r.info.id) } }
                            td.num { (r.files) }
                            td.num { (view::bytes(r.bytes)) }
                            td { @match r.last_write_ms { Some(ms) => (view::time(ms)), None => "—" } }
                            td { @match r.info.archived_ms { Some(ms) => (view::time(ms)), None => "no" } }
                        }
                    }
                }
            }
            @if matched > rows.len() {
                p { "Showing the first " (rows.len()) "; narrow the filter to see the others." }
            }
        }
    };
    Ok(v.page("Stores", body))
}

/// The store's newest [`RECENT_SHOWN`] entries, the last [`RECENT_SCAN`] of its feed
/// (`last`: its feed's last number), newest first. The log is read forward, a page at a time, from
/// where it starts when it was trimmed since.
fn recent_changes(s: &memkv::MemoryStore<'_>, last: u64) -> Result<Vec<ChangeEntry>, Error> {
    const PAGE: usize = 1000;
    let mut after = last.saturating_sub(RECENT_SCAN);
    let mut kept = std::collections::VecDeque::with_capacity(RECENT_SHOWN);
    // Each page moves the cursor on by at least one entry, or ends the loop.
    for _ in 0..=(RECENT_SCAN as usize / PAGE + 2) {
        let page = match s.changes(after, PAGE) {
            Ok(page) => page,
            Err(Error::CursorExpired { trimmed, .. }) if trimmed > after => {
                after = trimmed;
                continue;
            }
            Err(e) => return Err(e),
        };
        for entry in page.entries {
            if kept.len() == RECENT_SHOWN {
                kept.pop_front();
            }
            kept.push_back(entry);
        }
        if page.next_after <= after || page.next_after >= last {
            break;
        }
        after = page.next_after;
    }
    Ok(kept.into_iter().rev().collect())
}

/// The folder `dir` as breadcrumbs: `/memories` › `a` › `b`.
fn breadcrumbs(store: &str, dir: &str) -> Markup {
    let parts: Vec<&str> = dir
        .strip_prefix("/memories")
        .unwrap_or(dir)
        .split('/')
        .filter(|p| !p.is_empty())
        .collect();
    html! {
        nav.crumbs aria-label="Folder" {
            ol {
                li { a href=(view::dir_url(store, "/memories")) { "/memories" } }
                @for (i, part) in parts.iter().enumerate() {
                    @let path = format!("/memories/{}", parts[..=i].join("/"));
                    li {
                        @if i + 1 == parts.len() {
                            span aria-current="page" { (part) }
                        } @else {
                            a href=(view::dir_url(store, &path)) { (part) }
                        }
                    }
                }
            }
        }
    }
}

fn change_row(store: &str, e: &ChangeEntry) -> Markup {
    let c = &e.change;
    html! {
        tr {
            td { (view::time(c.at_ms)) }
            td { (c.kind.event_type()) }
            td {
                @match (&c.memory, &c.path) {
                    (Some(m), Some(p)) => a href=(view::memory_url(store, &m.to_string())) { (p) },
                    (Some(m), None) => a href=(view::memory_url(store, &m.to_string())) { (m) },
                    _ => "—",
                }
                @if let Some(prev) = &c.previous_path { " (from " (prev) ")" }
            }
            td { (view::actor(c.actor.as_ref())) }
        }
    }
}

/// `GET /console/stores/{store}?dir=&page=&done=`: the store, a folder of its tree, the search
/// form and its recent changes.
pub async fn store(
    Path(id): Path<String>,
    v: Visit,
    Params(ask): Params<Ask>,
) -> Result<Response, Problem> {
    let caller = v.reads(&id)?;
    let dir = ask.dir.as_deref().unwrap_or("/memories").to_owned();
    let page = ask.page.as_deref().map(str::to_owned);
    let (folder, dir2) = (dir.clone(), dir.clone());
    let key = id.clone();
    let (info, totals, listing, recent) = blocking(&v.state, move |db| {
        let id = key.as_str();
        let (s, info) = handle_and_info(db, id, &caller)?;
        let totals = s.totals().map_err(|e| failed(&e, id))?;
        let listing = s
            .list_memories(&folder, 1, page.as_deref(), FOLDER_PAGE, false)
            .map_err(|e| failed(&e, id))?;
        let last = s.last_change().map_err(|e| failed(&e, id))?;
        let recent = recent_changes(&s, last).map_err(|e| failed(&e, id))?;
        Ok((info, totals, listing, recent))
    })
    .await?;
    let listing = listing.map_err(|r| Problem::bad(r.message()))?;
    let read_only = v.caller.read_only;
    let body = html! {
        (notice_for(ask.done.as_deref()))
        dl.facts {
            dt { "Id" } dd { code { (info.id) } }
            @if !info.description.is_empty() { dt { "Description" } dd { (info.description) } }
            dt { "Memories" } dd { (totals.0) }
            dt { "Size" } dd { (view::bytes(totals.1)) }
            dt { "Versions kept" } dd { (info.history.versions) }
            dt { "Created" } dd { (view::time(info.created_ms)) }
            dt { "Archived" } dd { @match info.archived_ms { Some(ms) => { (view::time(ms)) " (read-only)" }, None => "no" } }
        }
        @if v.is_admin() || (!read_only && info.archived_ms.is_none()) {
            ul.actions {
                @if !read_only && info.archived_ms.is_none() {
                    li { a href=(format!("{}/archive", view::store_url(&info.id))) { "Archive this store…" } }
                }
                @if v.is_admin() {
                    li { a href=(format!("{}/settings", view::store_url(&info.id))) { "Settings" } }
                }
            }
        }
        (search_form(&info.id, "", SearchMode::Ranked))
        section aria-labelledby="tree" {
            h2 #tree { "Memories" }
            (breadcrumbs(&info.id, &dir2))
            @if listing.items.is_empty() {
                p { "This folder is empty." }
            } @else {
                table.tree {
                    thead { tr { th scope="col" { "Name" } th scope="col" class="num" { "Size" } th scope="col" { "Changed" } } }
                    tbody {
                        @for item in &listing.items {
                            @match item {
                                ListItem::Prefix(p) => tr.folder {
                                    td { a href=(view::dir_url(&info.id, p.trim_end_matches('/'))) { (name_of(p)) "/" } }
                                    td.num { "—" } td { "—" }
                                },
                                ListItem::Memory(m) => tr {
                                    td { a href=(view::memory_url(&info.id, &m.id.to_string())) { (name_of(&m.path)) } }
                                    td.num { (view::bytes(m.size)) }
                                    td { (view::time(m.updated_ms)) }
                                },
                            }
                        }
                    }
                }
                @if let Some(next) = &listing.next {
                    p { a href=(format!("{}&page={}", view::dir_url(&info.id, &dir2), view::query_value(next))) { "Next page" } }
                }
            }
        }
        section aria-labelledby="recent" {
            h2 #recent { "Recent changes" }
            @if recent.is_empty() {
                p { "No change in the store's change log." }
            } @else {
                table.changes {
                    thead { tr { th scope="col" { "When" } th scope="col" { "What" } th scope="col" { "Memory" } th scope="col" { "By" } } }
                    tbody { @for e in &recent { (change_row(&info.id, e)) } }
                }
            }
        }
    };
    // Names need not be unique (a store made through the API may share a name with a
    // memory tool's store id): the title says which store this is.
    let title = if info.name == info.id {
        info.name.clone()
    } else {
        format!("{} ({})", info.name, info.id)
    };
    Ok(v.page(&title, body))
}

/// The last segment of a path (`/memories/a/b.md` → `b.md`, `/memories/a/` → `a`).
fn name_of(path: &str) -> &str {
    path.trim_end_matches('/')
        .rsplit('/')
        .next()
        .unwrap_or(path)
}

fn search_form(store: &str, query: &str, mode: SearchMode) -> Markup {
    html! {
        form.search method="get" action=(format!("{}/search", view::store_url(store))) role="search" {
            label for="search-q" { "Search this store" }
            input #search-q type="search" name="q" value=(query) required;
            label for="search-mode" { "How" }
            select #search-mode name="mode" {
                option value="ranked" selected[mode == SearchMode::Ranked] { "Ranked (best first)" }
                option value="literal" selected[mode == SearchMode::Literal] { "Exact text" }
                option value="regex" selected[mode == SearchMode::Regex] { "Regular expression" }
            }
            button type="submit" { "Search" }
        }
    }
}

/// `GET /console/stores/{store}/search?q=&mode=`: ranked or exact search, each hit with its
/// lines.
pub async fn search(
    Path(id): Path<String>,
    v: Visit,
    Params(ask): Params<Ask>,
) -> Result<Response, Problem> {
    let caller = v.reads(&id)?;
    let query = ask.q.as_deref().unwrap_or("").to_owned();
    let mode = match ask.mode.as_deref().unwrap_or("ranked") {
        "ranked" => SearchMode::Ranked,
        "literal" => SearchMode::Literal,
        "regex" => SearchMode::Regex,
        other => return Err(Problem::bad(format!("no search mode {other:?}"))),
    };
    let request = SearchRequest::new(query.clone(), mode)
        .case_insensitive(true)
        .context(1);
    let results = on_store(&v.state, &id, caller, move |s, _| Ok(s.search(&request))).await?;
    let body = html! {
        p { a href=(view::store_url(&id)) { "Back to the store" } }
        (search_form(&id, &query, mode))
        @match &results {
            Err(e) => p.problem role="alert" { (e) },
            Ok(r) if r.hits.is_empty() => p { "Nothing matches." },
            Ok(r) => {
                p { (r.hits.len()) " memories match"
                    @if r.more > 0 { "; " (r.more) " more not shown" }
                    @if r.unsearched > 0 { "; " (r.unsearched) " not searched in time" }
                    "." }
                @for hit in &r.hits {
                    section.hit {
                        h2 { a href=(view::memory_url(&id, &hit.memory_id.to_string())) { (hit.path) } }
                        table.lines {
                            tbody {
                                @for line in &hit.lines {
                                    tr.match[line.is_match] {
                                        th scope="row" class="num" { (line.line_number) }
                                        td { code { (line.text) } }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    };
    Ok(v.page(&format!("Search: {query}"), body))
}
