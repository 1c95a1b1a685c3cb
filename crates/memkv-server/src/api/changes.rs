//! The change feed: `GET /v1/memory_stores/{memory_store_id}/changes` (a store key or an admin
//! key) and `GET /v1/changes` (admin: every store), `?after=SEQ&limit=N&wait=S`, answering
//! `{"data": [entries], "next_after": SEQ, "database": ID}` from the library's change log
//! ([`memkv::Database::changes`]), oldest first: a store's numbered in its own feed, every
//! store's by the log's `seq`. With `wait`, a long poll: it answers as soon as
//! an entry commits (woken by this process's commits; on PostgreSQL, whose other processes
//! write too, also by `crate::remote`'s looker), or after `wait` seconds with an empty page.
//! A long poll holds an in-flight permit only while it reads, and a shutdown answers it at once.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use memkv::Error;
use memkv::wire::ChangeObject;
use serde::Deserialize;
use utoipa::IntoParams;

use super::objects::ChangePage;
use super::{answer, blocking, failed};
use crate::AppState;
use crate::access::{Admin, Reads};
use crate::error::{ApiError, ErrorBody};
use crate::params::{Params, limit_within};
use crate::routes::{CHANGES, STORE_CHANGES};
use crate::spec::{ApiErrors, Beta, NoRetry, StorePath};

/// Where a feed request reads from, and how long it waits.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct FeedQuery {
    /// Answer the entries after this seq (0, the default: from the start of the log). Pass the
    /// previous answer's `next_after`.
    #[param(value_type = Option<u64>, minimum = 0)]
    after: Option<String>,
    /// Most entries on the page (default 100).
    #[param(value_type = Option<u32>, minimum = 1, maximum = 1000)]
    limit: Option<String>,
    /// Long poll: with no entry after `after`, wait up to this many seconds for one to commit
    /// (answered within 100 ms of its commit), then answer an empty page.
    #[param(value_type = Option<f64>, minimum = 0, maximum = 60)]
    wait: Option<String>,
}

/// Entries on a page when `limit` is not given.
pub const DEFAULT_LIMIT: usize = 100;
/// The most entries a page may be asked for.
pub const MAX_LIMIT: usize = 1000;
/// The longest `wait`, in seconds.
pub const MAX_WAIT_SECONDS: f64 = 60.0;

/// `GET /v1/memory_stores/{memory_store_id}/changes`.
#[utoipa::path(get, path = STORE_CHANGES, operation_id = "changes_list",
    summary = "Follow a store's changes",
    description = "The store's entries of the change log, oldest first: one per committed change of any face (the memory tool, MCP, this API, imports, restores, redactions, expiry), numbered in the store's own feed (1, 2, 3, …), so that nothing on the page says how much other stores wrote.",
    params(StorePath, FeedQuery, Beta),
    responses((status = 200, description = "A page of the change log", body = ChangePage),
        (status = 410, description = "The cursor expired (retention removed entries after `after`) or is past the log's end (another database's, or from before a restore); start again from a full export (invalid_request_error)",
            body = ErrorBody, headers(("x-should-retry" = inline(NoRetry)))),
        ApiErrors))]
pub async fn store_changes(
    Reads {
        id, caller, state, ..
    }: Reads,
    Params(q): Params<FeedQuery>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    if state.store.user(&id).is_err() {
        return Err(ApiError::not_found());
    }
    let answer = feed(&state, &q, Some(id), caller.key_id.as_deref()).await?;
    crate::auth::still_valid(&state, &headers)?;
    Ok(answer)
}

/// `GET /v1/changes` (admin).
#[utoipa::path(get, path = CHANGES, operation_id = "changes_list_all",
    summary = "Follow every store's changes",
    description = "Admin key. Every store's entries of the change log, oldest first.",
    params(FeedQuery, Beta),
    responses((status = 200, description = "A page of the change log", body = ChangePage),
        (status = 410, description = "The cursor expired (retention removed entries after `after`) or is past the log's end (another database's, or from before a restore); start again from a full export (invalid_request_error)",
            body = ErrorBody, headers(("x-should-retry" = inline(NoRetry)))),
        ApiErrors))]
pub async fn all_changes(
    Admin { caller, state }: Admin,
    Params(q): Params<FeedQuery>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let answer = feed(&state, &q, None, caller.key_id.as_deref()).await?;
    crate::auth::still_valid(&state, &headers)?;
    Ok(answer)
}

/// The parameters of a feed request, checked.
struct Feed {
    after: u64,
    limit: usize,
    wait: Duration,
}

fn params(q: &FeedQuery) -> Result<Feed, ApiError> {
    let after = match q.after.as_deref() {
        None => 0,
        Some(v) => v.parse::<u64>().map_err(|_| {
            ApiError::invalid(format!(
                "after must be a seq (a whole number, 0 for the start), not {v:?}"
            ))
        })?,
    };
    let limit = limit_within(q.limit.as_deref(), DEFAULT_LIMIT, MAX_LIMIT)?;
    let wait = match q.wait.as_deref() {
        None => Duration::ZERO,
        Some(v) => v
            .parse::<f64>()
            .ok()
            .filter(|s| s.is_finite() && (0.0..=MAX_WAIT_SECONDS).contains(s))
            .map(Duration::from_secs_f64)
            .ok_or_else(|| {
                ApiError::invalid(format!(
                    "wait must be a number of seconds from 0 to {MAX_WAIT_SECONDS}, not {v:?}"
                ))
            })?,
    };
    Ok(Feed { after, limit, wait })
}

/// The feed of `store` (`None`: every store's) for the key `key`; a long poll waits only
/// within the bounds of `crate::polls` (429 beyond them).
async fn feed(
    state: &Arc<AppState>,
    q: &FeedQuery,
    store: Option<String>,
    key: Option<&str>,
) -> Result<Response, ApiError> {
    let Feed {
        mut after,
        limit,
        wait,
    } = params(q)?;
    let deadline = Instant::now() + wait;
    let label = store.clone().unwrap_or_default();
    let shutdown = state.config.mcp.shutdown.clone();
    let mut first = true;
    // The database's identity as the last read found it (a poll refused for a busy moment
    // answers with it).
    let mut known: Option<String> = None;
    let operation = if store.is_some() {
        "changes.list"
    } else {
        "changes.list_all"
    };
    loop {
        // Made before the read: a commit between the read and the wait is not missed.
        let signal = state.store.next_commit();
        let remote = state.remote.subscribe();
        let of = store.clone();
        let page = blocking(state, move |db| {
            let page = db
                .changes(after, limit, of.as_deref())
                .map_err(|e| refused(&e, of.as_deref().unwrap_or("")))?;
            let database = db.identity().map_err(|e| failed(&e, ""))?;
            Ok((page, database))
        })
        .await;
        let (page, database) = match page {
            Ok(page) => page,
            // A poll already waiting is not refused for a busy moment: it looks again.
            Err(e) if first || e.status != StatusCode::SERVICE_UNAVAILABLE => return Err(e),
            Err(_) => {
                if Instant::now() >= deadline {
                    let empty = ChangePage {
                        data: Vec::new(),
                        next_after: after,
                        database: known.clone(),
                    };
                    return Ok(answer(&label, operation, &empty));
                }
                tokio::select! {
                    () = tokio::time::sleep(crate::remote::REMOTE_POLL) => {}
                    () = shutdown.cancelled() => {}
                }
                continue;
            }
        };
        first = false;
        known.clone_from(&database);
        let now = Instant::now();
        if !page.entries.is_empty() || now >= deadline || shutdown.is_cancelled() {
            let page = ChangePage {
                data: page.entries.iter().map(ChangeObject::from).collect(),
                next_after: page.next_after,
                database,
            };
            return Ok(answer(&label, operation, &page));
        }
        after = page.next_after;
        let left = deadline - now;
        let _place = state
            .waiters
            .wait(key.unwrap_or(""), &label)
            .map_err(|full| ApiError::rate_limited(full.message(), 1))?;
        let waiting = Waiting::new(state);
        // A shutdown answers at once (with what the log holds) rather than hold the graceful
        // shutdown for the rest of the wait.
        tokio::select! {
            _ = tokio::time::timeout(left, signal) => {}
            () = remote.changed() => {}
            () = shutdown.cancelled() => {}
        }
        drop(waiting);
    }
}

/// Counts a long poll as waiting (`memkv_feed_waiting`) while it lives.
struct Waiting<'a>(&'a AppState);

impl<'a> Waiting<'a> {
    fn new(state: &'a AppState) -> Self {
        state.metrics.feed_waiting.inc();
        Waiting(state)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.metrics.feed_waiting.dec();
    }
}

/// A cursor behind the retention is 410 Gone (etcd's "required revision has been compacted"),
/// and so is one past the log's end (another database's, or from before a restore): following
/// on would skip changes.
fn refused(e: &Error, store: &str) -> ApiError {
    match e {
        Error::CursorExpired { .. } | Error::CursorAhead { .. } => {
            ApiError::new(StatusCode::GONE, e.to_string())
        }
        Error::InvalidUser { .. } => ApiError::not_found(),
        _ => failed(e, store),
    }
}
