//! The operator's objects: API keys, webhook endpoints, an import's summary, a store's
//! settings.

use std::time::Duration;

use memkv::{ApiKey, SecretPolicy, Webhook};
use serde::Serialize;
use utoipa::ToSchema;

use super::{ApiKeyType, ImportSummaryType, Off, SettingsType, WebhookType};
use crate::api::wire::{duration, rfc3339};

/// An API key's record (never the key).
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = ApiKey)]
#[serde(deny_unknown_fields)]
pub struct ApiKeyObject {
    #[schema(inline)]
    r#type: ApiKeyType,
    #[schema(pattern = "^key_[0-9a-f]{12}$")]
    id: String,
    /// The store it opens; `null`: every store (an admin key).
    #[schema(required = true)]
    store: Option<String>,
    /// A store key that only reads.
    read_only: bool,
    label: String,
    #[schema(format = DateTime)]
    created_at: String,
    #[schema(required = true, format = DateTime)]
    expires_at: Option<String>,
    #[schema(required = true, format = DateTime)]
    last_used_at: Option<String>,
}

impl From<&ApiKey> for ApiKeyObject {
    fn from(k: &ApiKey) -> Self {
        ApiKeyObject {
            r#type: ApiKeyType::Tag,
            id: k.id.clone(),
            store: k.scope.store().map(str::to_owned),
            read_only: k.scope.read_only(),
            label: k.label.clone(),
            created_at: rfc3339(k.created_ms),
            expires_at: k.expires_ms.map(rfc3339),
            last_used_at: k.last_used_ms.map(rfc3339),
        }
    }
}

/// A new API key's record, with the key: shown only here.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ApiKeyCreated {
    #[schema(inline)]
    r#type: ApiKeyType,
    #[schema(pattern = "^key_[0-9a-f]{12}$")]
    id: String,
    #[schema(required = true)]
    store: Option<String>,
    read_only: bool,
    label: String,
    #[schema(format = DateTime)]
    created_at: String,
    #[schema(required = true, format = DateTime)]
    expires_at: Option<String>,
    #[schema(required = true, format = DateTime)]
    last_used_at: Option<String>,
    /// The key, for `x-api-key` or `Authorization: Bearer`; the database keeps its SHA-256.
    #[schema(pattern = "^mkv_[0-9a-f]{64}$")]
    key: String,
}

impl ApiKeyCreated {
    /// The record of `k`, with the key itself.
    pub fn new(k: &ApiKey, key: String) -> Self {
        let ApiKeyObject {
            r#type,
            id,
            store,
            read_only,
            label,
            created_at,
            expires_at,
            last_used_at,
        } = ApiKeyObject::from(k);
        ApiKeyCreated {
            r#type,
            id,
            store,
            read_only,
            label,
            created_at,
            expires_at,
            last_used_at,
            key,
        }
    }
}

/// Every API key.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ApiKeyList {
    pub data: Vec<ApiKeyObject>,
}

/// A webhook endpoint and how its deliveries stand.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = Webhook)]
#[serde(deny_unknown_fields)]
pub struct WebhookObject {
    #[schema(inline)]
    r#type: WebhookType,
    /// Its id (`wh_…`).
    id: String,
    url: String,
    /// Only these stores' entries (empty: every store's).
    stores: Vec<String>,
    /// Only these kinds of entry (empty: every kind).
    events: Vec<memkv::ChangeKind>,
    #[schema(format = DateTime)]
    created_at: String,
    /// The last `seq` delivered or passed over.
    delivered_seq: u64,
    /// Failed attempts in a row.
    failures: u32,
    /// When the next attempt is due, while one is waiting.
    #[schema(required = true, format = DateTime)]
    next_attempt_at: Option<String>,
    /// Why the last attempt failed.
    #[schema(required = true)]
    last_error: Option<String>,
    /// How deliveries are shaped: `memkv` (every kind of entry) or `hosted` (the hosted API's
    /// `memory_store.*` events).
    #[schema(pattern = "^(memkv|hosted)$")]
    format: &'static str,
}

impl From<&Webhook> for WebhookObject {
    fn from(w: &Webhook) -> Self {
        WebhookObject {
            r#type: WebhookType::Tag,
            id: w.id.clone(),
            url: w.url.clone(),
            stores: w.stores.clone(),
            events: w.events.clone(),
            created_at: rfc3339(w.created_ms),
            delivered_seq: w.delivered,
            failures: w.failures,
            next_attempt_at: (w.next_attempt_ms > 0).then(|| rfc3339(w.next_attempt_ms)),
            last_error: w.last_error.clone(),
            format: w.format.as_str(),
        }
    }
}

/// A new webhook endpoint, with its signing secret: shown only here.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WebhookCreated {
    #[schema(inline)]
    r#type: WebhookType,
    id: String,
    url: String,
    stores: Vec<String>,
    events: Vec<memkv::ChangeKind>,
    #[schema(format = DateTime)]
    created_at: String,
    delivered_seq: u64,
    failures: u32,
    #[schema(required = true, format = DateTime)]
    next_attempt_at: Option<String>,
    #[schema(required = true)]
    last_error: Option<String>,
    #[schema(pattern = "^(memkv|hosted)$")]
    format: &'static str,
    /// The secret deliveries are signed with (Standard Webhooks).
    #[schema(pattern = "^whsec_")]
    secret: String,
}

impl WebhookCreated {
    /// Endpoint `w`, with its secret.
    pub fn new(w: &Webhook, secret: String) -> Self {
        let WebhookObject {
            r#type,
            id,
            url,
            stores,
            events,
            created_at,
            delivered_seq,
            failures,
            next_attempt_at,
            last_error,
            format,
        } = WebhookObject::from(w);
        WebhookCreated {
            r#type,
            id,
            url,
            stores,
            events,
            created_at,
            delivered_seq,
            failures,
            next_attempt_at,
            last_error,
            format,
            secret,
        }
    }
}

/// Every webhook endpoint.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WebhookList {
    pub data: Vec<WebhookObject>,
}

/// What an import applied.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ImportSummary {
    #[schema(inline)]
    r#type: ImportSummaryType,
    stores: u64,
    files: u64,
    bytes: u64,
    versions: u64,
    skipped: u64,
    replaced: u64,
    merged: u64,
}

impl From<&memkv::Summary> for ImportSummary {
    fn from(s: &memkv::Summary) -> Self {
        ImportSummary {
            r#type: ImportSummaryType::Tag,
            stores: s.users,
            files: s.files,
            bytes: s.bytes,
            versions: s.versions,
            skipped: s.skipped,
            replaced: s.replaced,
            merged: s.merged,
        }
    }
}

/// A period: `30d`, `12h`, `15m`, `90s`, `250ms`, or `off` (without limit).
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(value_type = String, pattern = "^(off|[0-9]+ ?[a-z]+)$")]
pub struct Period(String);

impl Period {
    /// `d`, or `off` for `None`.
    pub fn of(d: Option<Duration>) -> Self {
        Period(d.map_or_else(|| "off".to_owned(), duration))
    }
}

/// A count, or `off` (without limit).
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(untagged)]
pub enum Bound {
    Count(u64),
    Off(#[schema(inline)] Off),
}

impl Bound {
    /// `n`, or `off` for `None`.
    pub fn of(n: Option<u64>) -> Self {
        n.map_or(Bound::Off(Off::Tag), Bound::Count)
    }
}

/// What the secrets guard does with a write that holds a secret.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Secrets {
    Reject,
    Redact,
    Off,
}

impl From<SecretPolicy> for Secrets {
    fn from(p: SecretPolicy) -> Self {
        match p {
            SecretPolicy::Redact => Secrets::Redact,
            SecretPolicy::Off => Secrets::Off,
            _ => Secrets::Reject,
        }
    }
}

/// A store's own settings: only those it has.
#[derive(Debug, Clone, Default, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct OwnSettings {
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = u64, required = false, minimum = 1)]
    pub max_files: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = u64, required = false, minimum = 1)]
    pub max_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Period)]
    pub ttl: Option<Period>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Period)]
    pub history_max_age: Option<Period>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Bound)]
    pub history_max_versions: Option<Bound>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Bound)]
    pub history_max_bytes: Option<Bound>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Secrets)]
    pub secrets: Option<Secrets>,
}

/// What a store's commands are checked against: its own settings over the server's defaults.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EffectiveSettings {
    #[schema(minimum = 1)]
    pub max_files: u64,
    #[schema(minimum = 1)]
    pub max_bytes: u64,
    pub ttl: Period,
    pub history_max_age: Period,
    pub history_max_versions: Bound,
    pub history_max_bytes: Bound,
    pub secrets: Secrets,
}

/// A store's settings.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = StoreSettings)]
#[serde(deny_unknown_fields)]
pub struct SettingsObject {
    #[schema(inline)]
    pub r#type: SettingsType,
    pub memory_store_id: String,
    pub own: OwnSettings,
    pub effective: EffectiveSettings,
}
