//! The router: every route, and the layer that names, times, counts and logs each request.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::{Relaxed, SeqCst};
use std::time::Instant;

use axum::Router;
use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use tower_http::catch_panic::CatchPanicLayer;

use crate::AppState;
use crate::api;
use crate::auth;
use crate::error::ApiError;
use crate::metrics::StoreTotals;
use crate::tool::{self, ToolInfo};

/// The tool route: one memory message for one store.
pub const TOOL_ROUTE: &str = "/v1/memory_stores/{store}/tool";

/// The memory stores (anthropic's beta `memory_stores` resource).
pub const STORES: &str = "/v1/memory_stores";
/// One memory store.
pub const STORE: &str = "/v1/memory_stores/{memory_store_id}";
/// Archiving a store.
pub const ARCHIVE: &str = "/v1/memory_stores/{memory_store_id}/archive";
/// A store's memories.
pub const MEMORIES: &str = "/v1/memory_stores/{memory_store_id}/memories";
/// One memory.
pub const MEMORY: &str = "/v1/memory_stores/{memory_store_id}/memories/{memory_id}";
/// A store's memory versions.
pub const VERSIONS: &str = "/v1/memory_stores/{memory_store_id}/memory_versions";
/// One memory version.
pub const VERSION: &str = "/v1/memory_stores/{memory_store_id}/memory_versions/{memory_version_id}";
/// Redacting a memory version.
pub const REDACT: &str =
    "/v1/memory_stores/{memory_store_id}/memory_versions/{memory_version_id}/redact";

/// Searching a store's memories.
pub const SEARCH: &str = "/v1/memory_stores/{memory_store_id}/search";

/// A store's change feed.
pub const STORE_CHANGES: &str = "/v1/memory_stores/{memory_store_id}/changes";
/// Every store's change feed (admin).
pub const CHANGES: &str = "/v1/changes";

/// The webhook endpoints (admin).
pub const WEBHOOKS: &str = "/v1/webhooks";
/// One webhook endpoint (admin).
pub const WEBHOOK: &str = "/v1/webhooks/{webhook_id}";

/// One store's export.
pub const STORE_EXPORT: &str = "/v1/memory_stores/{memory_store_id}/export";
/// Every store's export (admin).
pub const EXPORT: &str = "/v1/export";
/// Applying an export (admin).
pub const IMPORT: &str = "/v1/import";

/// A store's own settings.
pub const SETTINGS: &str = "/v1/memory_stores/{memory_store_id}/settings";

/// The API keys (admin).
pub const KEYS: &str = "/v1/keys";
/// One API key (admin).
pub const KEY: &str = "/v1/keys/{key_id}";

/// Every route of [`router`] with its method, as the OpenAPI document lists them.
pub const ROUTES: &[(&str, &str)] = &[
    ("post", TOOL_ROUTE),
    ("post", STORES),
    ("get", STORES),
    ("get", STORE),
    ("post", STORE),
    ("delete", STORE),
    ("post", ARCHIVE),
    ("post", MEMORIES),
    ("get", MEMORIES),
    ("get", MEMORY),
    ("post", MEMORY),
    ("delete", MEMORY),
    ("get", VERSIONS),
    ("get", VERSION),
    ("post", REDACT),
    ("get", SEARCH),
    ("get", STORE_CHANGES),
    ("get", CHANGES),
    ("post", WEBHOOKS),
    ("get", WEBHOOKS),
    ("delete", WEBHOOK),
    ("get", STORE_EXPORT),
    ("get", EXPORT),
    ("post", IMPORT),
    ("get", SETTINGS),
    ("patch", SETTINGS),
    ("post", KEYS),
    ("get", KEYS),
    ("delete", KEY),
    ("get", "/healthz"),
    ("get", "/readyz"),
    ("get", "/metrics"),
    ("get", "/openapi.json"),
    ("get", memkv_mcp::http::PATH),
    ("post", memkv_mcp::http::PATH),
    ("delete", memkv_mcp::http::PATH),
];

/// The HTTP face of memkv. Every route is added here, in this one function (the MCP service
/// mounts at `/mcp` here too).
pub fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route(TOOL_ROUTE, post(tool::tool))
        .route(STORES, post(api::create_store).get(api::list_stores))
        .route(
            STORE,
            get(api::retrieve_store)
                .post(api::update_store)
                .delete(api::delete_store),
        )
        .route(ARCHIVE, post(api::archive_store))
        .route(MEMORIES, post(api::create_memory).get(api::list_memories))
        .route(
            MEMORY,
            get(api::retrieve_memory)
                .post(api::update_memory)
                .delete(api::delete_memory),
        )
        .route(VERSIONS, get(api::list_versions))
        .route(VERSION, get(api::retrieve_version))
        .route(REDACT, post(api::redact_version))
        .route(SEARCH, get(api::search))
        .route(STORE_CHANGES, get(api::store_changes))
        .route(CHANGES, get(api::all_changes))
        .route(WEBHOOKS, post(api::create_webhook).get(api::list_webhooks))
        .route(WEBHOOK, axum::routing::delete(api::delete_webhook))
        .route(STORE_EXPORT, get(api::export_store))
        .route(EXPORT, get(api::export_all))
        .route(IMPORT, post(api::import))
        .route(
            SETTINGS,
            get(api::retrieve_settings).patch(api::update_settings),
        )
        .route(KEYS, post(api::create_key).get(api::list_keys))
        .route(KEY, axum::routing::delete(api::delete_key))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route("/openapi.json", get(openapi))
        .route_service(
            memkv_mcp::http::PATH,
            memkv_mcp::http::router(
                Arc::clone(&state.store),
                memkv_mcp::http::HttpOptions {
                    in_flight: Some(Arc::clone(&state.in_flight)),
                    ..state.config.mcp.clone()
                },
                auth::McpKeys(Arc::clone(&state)),
            ),
        )
        .merge(crate::console::router())
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(middleware::from_fn_with_state(Arc::clone(&state), observe))
        .layer(middleware::map_response(retry_advice))
        .layer(CatchPanicLayer::custom(|_| {
            ApiError::internal("internal error").into_response()
        }))
        .with_state(state)
}

/// Every answer says whether a client may retry it ([`crate::error::should_retry`]).
async fn retry_advice(mut response: Response) -> Response {
    let status = response.status();
    crate::error::advise_retry(status, response.headers_mut());
    response
}

async fn healthz() -> &'static str {
    "ok\n"
}

async fn readyz(State(state): State<Arc<AppState>>) -> Response {
    if state.ready.load(SeqCst) {
        "ready\n".into_response()
    } else {
        ApiError::overloaded("shutting down").into_response()
    }
}

async fn metrics(State(state): State<Arc<AppState>>, headers: HeaderMap) -> Response {
    if let Err(e) = auth::authenticate_admin(&state, &headers) {
        return e.into_response();
    }
    let store = Arc::clone(&state.store);
    let totals = tokio::task::spawn_blocking(move || {
        let (commits, committed_commands) = store.commit_stats();
        let mut totals = StoreTotals {
            commits,
            committed_commands,
            ..StoreTotals::default()
        };
        match store.users() {
            Ok(users) => {
                totals.stores = users.len() as u64;
                totals.files = users.iter().map(|u| u.files).sum();
                totals.bytes = users.iter().map(|u| u.bytes).sum();
            }
            Err(e) => tracing::error!(error = %e, "cannot count stores for /metrics"),
        }
        totals
    })
    .await
    .unwrap_or_default();
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        state.metrics.render(&totals),
    )
        .into_response()
}

async fn openapi(State(state): State<Arc<AppState>>) -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        state.openapi.clone(),
    )
        .into_response()
}

async fn not_found() -> ApiError {
    ApiError::not_found()
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method not allowed on this route",
    )
}

static REQUESTS: AtomicU64 = AtomicU64::new(0);

/// Gives each request an id (`request-id` header), then counts, times and logs it: route
/// pattern, store and commands for the tool route (the operation, e.g. `memories.create`, for
/// the memory-stores API), status, duration. Never keys or contents.
async fn observe(State(state): State<Arc<AppState>>, request: Request, next: Next) -> Response {
    let started = Instant::now();
    let id = format!(
        "req_{:08x}_{:x}",
        state.instance,
        REQUESTS.fetch_add(1, Relaxed)
    );
    let route = route_label(request.extensions().get::<MatchedPath>());
    let method = request.method().clone();
    let (request, read) = crate::unread::watch(request);
    let mut response = next.run(request).await;
    crate::unread::close_if_unread(&mut response, &read);
    let took = started.elapsed();
    let status = response.status().as_u16();
    state.metrics.request(route, status, took);
    let info = response.extensions_mut().remove::<ToolInfo>();
    let (store, commands) = info.map_or((None, None), |i| (Some(i.store), Some(i.commands)));
    tracing::info!(
        request_id = %id,
        %method,
        route,
        store = store.as_deref(),
        commands = commands.map(|c| c.join(",")).as_deref(),
        status,
        duration_us = u64::try_from(took.as_micros()).unwrap_or(u64::MAX),
        "request"
    );
    if let Ok(v) = HeaderValue::from_str(&id) {
        response.headers_mut().insert("request-id", v);
    }
    response
}

/// The route pattern that matched, as a static label (bounded cardinality).
fn route_label(matched: Option<&MatchedPath>) -> &'static str {
    let Some(matched) = matched else {
        return "unmatched";
    };
    if matched.as_str().starts_with("/console") {
        return "/console";
    }
    ROUTES
        .iter()
        .map(|(_, r)| *r)
        .find(|r| *r == matched.as_str())
        .unwrap_or("other")
}
