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
use tower_http::catch_panic::CatchPanicLayer;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::AppState;
use crate::api;
use crate::auth;
use crate::error::{ApiError, ErrorBody};
use crate::metrics::StoreTotals;
use crate::routes::ROUTES;
use crate::spec::{GetOnly, NoRetry, Retry, Seconds};
use crate::tool::{self, ToolInfo};

/// The documented routes, each handler added to the router and to the OpenAPI document
/// together from its `#[utoipa::path]` (utoipa-axum), so the two cannot differ. `/mcp` and the
/// console are added by [`router`]; `crate::openapi` documents `/mcp` itself.
pub fn documented() -> (Router<Arc<AppState>>, utoipa::openapi::OpenApi) {
    use api::{backup, changes, keys, memories, search, settings, stores, versions, webhooks};
    OpenApiRouter::new()
        .routes(routes!(tool::tool))
        .routes(routes!(stores::create_store, stores::list_stores))
        .routes(routes!(
            stores::retrieve_store,
            stores::update_store,
            stores::delete_store
        ))
        .routes(routes!(stores::archive_store))
        .routes(routes!(memories::create_memory, memories::list_memories))
        .routes(routes!(
            memories::retrieve_memory,
            memories::update_memory,
            memories::delete_memory
        ))
        .routes(routes!(versions::list_versions))
        .routes(routes!(versions::retrieve_version))
        .routes(routes!(versions::redact_version))
        .routes(routes!(search::search))
        .routes(routes!(changes::store_changes))
        .routes(routes!(changes::all_changes))
        .routes(routes!(webhooks::create_webhook, webhooks::list_webhooks))
        .routes(routes!(webhooks::delete_webhook))
        .routes(routes!(backup::export_store))
        .routes(routes!(backup::export_all))
        .routes(routes!(backup::import))
        .routes(routes!(
            settings::retrieve_settings,
            settings::update_settings
        ))
        .routes(routes!(keys::create_key, keys::list_keys))
        .routes(routes!(keys::delete_key))
        .routes(routes!(healthz))
        .routes(routes!(readyz))
        .routes(routes!(metrics))
        .routes(routes!(openapi))
        .split_for_parts()
}

/// The HTTP face of memkv: the [`documented`] routes, the MCP service at `/mcp`, the console,
/// and the layers every request goes through.
pub fn router(state: Arc<AppState>) -> Router {
    let (documented, _) = documented();
    documented
        .route_service(
            memkv_mcp::http::PATH,
            memkv_mcp::http::router(
                Arc::clone(&state.store),
                memkv_mcp::http::HttpOptions {
                    in_flight: Some(Arc::clone(&state.in_flight)),
                    ..state.config.mcp.clone()
                },
                crate::access::McpKeys(Arc::clone(&state)),
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

/// Liveness: the process answers.
#[utoipa::path(get, path = "/healthz", operation_id = "healthz", summary = "Liveness",
    security(()),
    responses((status = 200, description = "Up", body = String), GetOnly))]
async fn healthz() -> &'static str {
    "ok\n"
}

/// Readiness: what a load balancer's health check asks.
#[utoipa::path(get, path = "/readyz", operation_id = "readyz",
    summary = "Readiness: the store is open and the server is serving",
    security(()),
    responses((status = 200, description = "Ready", body = String),
        (status = 503, description = "Shutting down; retry after the given seconds", body = ErrorBody,
            headers(("Retry-After" = inline(Seconds)), ("x-should-retry" = inline(Retry)))),
        GetOnly))]
async fn readyz(State(state): State<Arc<AppState>>) -> Response {
    if state.ready.load(SeqCst) {
        "ready\n".into_response()
    } else {
        ApiError::overloaded("shutting down").into_response()
    }
}

/// The Prometheus metrics (admin key).
#[utoipa::path(get, path = "/metrics", operation_id = "metrics",
    summary = "Prometheus metrics (admin key)",
    responses((status = 200, description = "Prometheus text exposition format 0.0.4", body = String),
        (status = 401, description = "No API key, or an unknown one", body = ErrorBody,
            headers(("x-should-retry" = inline(NoRetry)))),
        (status = 403, description = "A store key, or keyless access from another host name", body = ErrorBody,
            headers(("x-should-retry" = inline(NoRetry)))),
        (status = 429, description = "The key is over its rate limit (rate_limit_error)", body = ErrorBody,
            headers(("Retry-After" = inline(Seconds)), ("x-should-retry" = inline(Retry)))),
        (status = 500, description = "The API keys cannot be read", body = ErrorBody),
        GetOnly))]
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

/// This document.
#[utoipa::path(get, path = "/openapi.json", operation_id = "openapi", summary = "This document",
    security(()),
    responses((status = 200, description = "OpenAPI 3.1", body = Object), GetOnly))]
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
