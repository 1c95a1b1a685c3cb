//! `/v1/webhooks[/{webhook_id}]` (admin): register, list and remove the endpoints the change
//! log's entries are delivered to ([`crate::webhooks`]). The signing secret is in the answer of
//! the registration only.

use axum::body::Body;
use axum::http::HeaderMap;
use axum::response::Response;
use memkv::Error;
use serde::Deserialize;
use utoipa::{IntoParams, ToSchema};

use super::objects::{DeletedWebhook, WebhookCreated, WebhookList, WebhookObject};
use super::{failed, json_body};
use crate::access::{Admin, Item};
use crate::error::ApiError;
use crate::routes::{WEBHOOK, WEBHOOKS};
use crate::spec::{ApiErrors, Beta};

/// A new webhook endpoint.
#[derive(Deserialize, ToSchema)]
#[schema(as = WebhookCreate)]
#[serde(deny_unknown_fields)]
struct CreateWebhook {
    /// Where to POST the entries: `http://` or `https://`.
    #[schema(pattern = "^https?://[^/\\s]", max_length = 2048)]
    url: String,
    /// Only these stores' entries (empty: every store's).
    #[serde(default)]
    #[schema(required = false)]
    stores: Vec<String>,
    /// Only these kinds of entry (empty: every kind).
    #[serde(default)]
    #[schema(required = false, value_type = Vec<memkv::ChangeKind>)]
    events: Vec<String>,
    /// How deliveries are shaped: `memkv` (the default: every kind of entry, as the change
    /// feed shows it) or `hosted` (the hosted memory-stores API's webhook events, for
    /// applications written against them: `memory_store.created`, `.archived`, `.deleted`).
    #[serde(default)]
    #[schema(required = false, pattern = "^(memkv|hosted)$")]
    format: Option<String>,
}

/// A webhook endpoint in the path.
#[derive(IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)]
struct WebhookPath {
    /// The endpoint (`wh_…`).
    #[param(min_length = 1)]
    webhook_id: String,
}

fn refused(e: &Error) -> ApiError {
    match e {
        Error::InvalidWebhook(_) | Error::InvalidUser { .. } => ApiError::invalid(e.to_string()),
        _ => failed(e, ""),
    }
}

/// `POST /v1/webhooks`: `{"url", "stores"?, "events"?}`; the answer holds `secret` (`whsec_…`),
/// shown only here.
#[utoipa::path(post, path = WEBHOOKS, operation_id = "webhooks_create",
    summary = "Register a webhook endpoint",
    description = "Admin key. memkv serve POSTs each change-log entry committed from now on (of `stores`, of `events`; all when empty) to `url`, signed as the Standard Webhooks specification says. The answer's `secret` is shown only here.",
    params(Beta), request_body = CreateWebhook,
    responses((status = 200, description = "The endpoint and its signing secret", body = WebhookCreated), ApiErrors))]
pub async fn create_webhook(
    admin: Admin,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let req: CreateWebhook = json_body(&admin.state, &headers, body).await?;
    let kinds = crate::webhooks::events(&req.events).map_err(ApiError::invalid)?;
    let format = crate::webhooks::format(req.format.as_deref().unwrap_or("memkv"))
        .map_err(ApiError::invalid)?;
    let secret = crate::webhooks::new_secret()
        .map_err(|_| ApiError::internal("no random source for the signing secret"))?;
    admin
        .answer("webhooks.create", move |db| {
            let hook = db
                .add_webhook(&req.url, &secret, &req.stores, &kinds, format)
                .map_err(|e| refused(&e))?;
            Ok(WebhookCreated::new(&hook, secret))
        })
        .await
}

/// `GET /v1/webhooks`: every endpoint, by id (no secrets).
#[utoipa::path(get, path = WEBHOOKS, operation_id = "webhooks_list",
    summary = "List webhook endpoints",
    description = "Admin key. Each endpoint with the last seq delivered, failures in a row and the next attempt.",
    params(Beta),
    responses((status = 200, description = "Every endpoint", body = WebhookList), ApiErrors))]
pub async fn list_webhooks(admin: Admin) -> Result<Response, ApiError> {
    admin
        .answer("webhooks.list", |db| {
            let hooks = db.webhooks().map_err(|e| refused(&e))?;
            Ok(WebhookList {
                data: hooks.iter().map(WebhookObject::from).collect(),
            })
        })
        .await
}

/// `DELETE /v1/webhooks/{webhook_id}`.
#[utoipa::path(delete, path = WEBHOOK, operation_id = "webhooks_delete",
    summary = "Remove a webhook endpoint", description = "Admin key.",
    params(WebhookPath, Beta),
    responses((status = 200, description = "The endpoint is removed", body = DeletedWebhook), ApiErrors))]
pub async fn delete_webhook(admin: Admin, Item(id): Item<String>) -> Result<Response, ApiError> {
    admin
        .answer("webhooks.delete", move |db| {
            let gone = db.remove_webhook(&id).map_err(|e| refused(&e))?;
            gone.then(|| DeletedWebhook::new(id))
                .ok_or_else(ApiError::not_found)
        })
        .await
}
