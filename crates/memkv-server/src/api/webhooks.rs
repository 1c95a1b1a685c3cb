//! `/v1/webhooks[/{webhook_id}]` (admin): register, list and remove the endpoints the change
//! log's entries are delivered to ([`crate::webhooks`]). The signing secret is in the answer of
//! the registration only.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::Response;
use memkv::{Error, Webhook};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{admin, answer, blocking, failed, json_body, respond, wire};
use crate::AppState;
use crate::error::ApiError;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateWebhook {
    url: String,
    #[serde(default)]
    stores: Vec<String>,
    #[serde(default)]
    events: Vec<String>,
}

/// A `webhook` object: the endpoint and how its deliveries stand.
pub fn webhook(w: &Webhook) -> Value {
    json!({
        "type": "webhook",
        "id": w.id,
        "url": w.url,
        "stores": w.stores,
        "events": w.events.iter().map(|k| k.event_type()).collect::<Vec<_>>(),
        "created_at": wire::rfc3339(w.created_ms),
        "delivered_seq": w.delivered,
        "failures": w.failures,
        "next_attempt_at": (w.next_attempt_ms > 0).then(|| wire::rfc3339(w.next_attempt_ms)),
        "last_error": w.last_error,
    })
}

fn refused(e: &Error) -> ApiError {
    match e {
        Error::InvalidWebhook(_) | Error::InvalidUser { .. } => ApiError::invalid(e.to_string()),
        _ => failed(e, ""),
    }
}

/// `POST /v1/webhooks`: `{"url", "stores"?, "events"?}`; the answer holds `secret` (`whsec_…`),
/// shown only here.
pub async fn create_webhook(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    respond(
        async {
            admin(&state, &headers, "registering a webhook")?;
            let req: CreateWebhook = json_body(&state, &headers, body).await?;
            let kinds = crate::webhooks::events(&req.events).map_err(ApiError::invalid)?;
            let secret = crate::webhooks::new_secret()
                .map_err(|_| ApiError::internal("no random source for the signing secret"))?;
            let given = secret.clone();
            let hook = blocking(&state, move |db| {
                db.add_webhook(&req.url, &given, &req.stores, &kinds)
                    .map_err(|e| refused(&e))
            })
            .await?;
            let mut out = webhook(&hook);
            out["secret"] = json!(secret);
            Ok(answer("", "webhooks.create", &out))
        }
        .await,
    )
}

/// `GET /v1/webhooks`: every endpoint, by id (no secrets).
pub async fn list_webhooks(State(state): State<Arc<AppState>>, headers: HeaderMap) -> Response {
    respond(
        async {
            admin(&state, &headers, "listing webhooks")?;
            let hooks = blocking(&state, |db| db.webhooks().map_err(|e| refused(&e))).await?;
            let data: Vec<Value> = hooks.iter().map(webhook).collect();
            Ok(answer("", "webhooks.list", &json!({"data": data})))
        }
        .await,
    )
}

/// `DELETE /v1/webhooks/{webhook_id}`.
pub async fn delete_webhook(
    State(state): State<Arc<AppState>>,
    id: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
) -> Response {
    respond(
        async {
            admin(&state, &headers, "removing a webhook")?;
            let Path(id) = id.map_err(|_| ApiError::not_found())?;
            let gone = id.clone();
            let removed = blocking(&state, move |db| {
                db.remove_webhook(&gone).map_err(|e| refused(&e))
            })
            .await?;
            if !removed {
                return Err(ApiError::not_found());
            }
            Ok(answer(
                "",
                "webhooks.delete",
                &json!({"type": "webhook_deleted", "id": id}),
            ))
        }
        .await,
    )
}
