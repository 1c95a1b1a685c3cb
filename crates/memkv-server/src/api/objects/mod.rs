//! The memory-stores API's objects as types: what each handler answers, serialized by serde and
//! described by utoipa (`ToSchema`), so `/openapi.json`'s schemas are these types'. The
//! library's objects (an actor, a change-log entry, search results) are in [`memkv::wire`].
//!
//! Every field of these objects is sent, `null` included, so each is `required` (a store's own
//! settings, which list only those it has, are the exception); a `type` field holds the
//! object's one type name. The operator's objects (keys, webhooks, an import's summary, a
//! store's settings) are in `operator`.

mod operator;

use std::collections::BTreeMap;

use memkv::wire::{ActorObject, ChangeObject};
use memkv::{ListItem, Memory, StoreInfo, Version};
use serde::Serialize;
use utoipa::ToSchema;

pub use operator::{
    ApiKeyCreated, ApiKeyList, ApiKeyObject, Bound, EffectiveSettings, ImportSummary, OwnSettings,
    Period, Secrets, SettingsObject, WebhookCreated, WebhookList, WebhookObject,
};

use super::wire::{api_path, hex, rfc3339};

/// A one-value type for an object's `type` field: serialized and described as that string.
/// (Written out rather than derived: utoipa does not read a `serde(rename)` a macro passes on.)
macro_rules! tag {
    ($name:ident = $value:literal) => {
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
        pub enum $name {
            #[default]
            Tag,
        }

        impl Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str($value)
            }
        }

        impl utoipa::PartialSchema for $name {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                utoipa::openapi::ObjectBuilder::new()
                    .schema_type(utoipa::openapi::schema::Type::String)
                    .enum_values(Some([$value]))
                    .into()
            }
        }

        impl ToSchema for $name {}
    };
}

tag!(MemoryStoreType = "memory_store");
tag!(MemoryStoreDeletedType = "memory_store_deleted");
tag!(MemoryType = "memory");
tag!(MemoryPrefixType = "memory_prefix");
tag!(MemoryDeletedType = "memory_deleted");
tag!(MemoryVersionType = "memory_version");
tag!(ApiKeyType = "api_key");
tag!(ApiKeyDeletedType = "api_key_deleted");
tag!(WebhookType = "webhook");
tag!(WebhookDeletedType = "webhook_deleted");
tag!(SettingsType = "memory_store_settings");
tag!(ImportSummaryType = "import_summary");
tag!(Off = "off");

/// `{"type": "…_deleted", "id": …}`: what a deletion answers.
macro_rules! deleted {
    ($(#[$doc:meta])* $name:ident, $tag:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Serialize, ToSchema)]
        #[serde(deny_unknown_fields)]
        pub struct $name {
            #[schema(inline)]
            r#type: $tag,
            /// The id of what was deleted.
            id: String,
        }

        impl $name {
            /// The answer for `id`.
            pub fn new(id: impl Into<String>) -> Self {
                $name { r#type: $tag::Tag, id: id.into() }
            }
        }
    };
}

deleted!(
    /// A deleted memory store.
    DeletedMemoryStore,
    MemoryStoreDeletedType
);
deleted!(
    /// A deleted memory (its versions stay).
    DeletedMemory,
    MemoryDeletedType
);
deleted!(
    /// A revoked API key.
    DeletedApiKey,
    ApiKeyDeletedType
);
deleted!(
    /// A removed webhook endpoint.
    DeletedWebhook,
    WebhookDeletedType
);

/// `{"data": […], "next_page": token | null}`: a page of a listing.
macro_rules! page {
    ($(#[$doc:meta])* $name:ident, $item:ty) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Serialize, ToSchema)]
        #[serde(deny_unknown_fields)]
        pub struct $name {
            /// The items, in the listing's order.
            pub data: Vec<$item>,
            /// The `page` parameter that gives the next page; `null` on the last.
            #[schema(required = true)]
            pub next_page: Option<String>,
        }
    };
}

page!(
    /// A page of memory stores.
    MemoryStorePage,
    MemoryStoreObject
);
page!(
    /// A page of memories and prefixes.
    MemoryPage,
    MemoryItem
);
page!(
    /// A page of memory versions.
    MemoryVersionPage,
    MemoryVersionObject
);

/// A memory store.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = MemoryStore)]
#[serde(deny_unknown_fields)]
pub struct MemoryStoreObject {
    #[schema(inline)]
    r#type: MemoryStoreType,
    /// Its id: `memstore_…`, or the memkv user id of a store the memory tool wrote.
    id: String,
    /// Its name.
    name: String,
    /// Its description (empty when unset).
    description: String,
    /// The application's key-value pairs.
    metadata: BTreeMap<String, String>,
    #[schema(format = DateTime)]
    created_at: String,
    #[schema(format = DateTime)]
    updated_at: String,
    /// When it was archived (read-only from then on).
    #[schema(required = true, format = DateTime)]
    archived_at: Option<String>,
}

impl From<&StoreInfo> for MemoryStoreObject {
    fn from(info: &StoreInfo) -> Self {
        MemoryStoreObject {
            r#type: MemoryStoreType::Tag,
            id: info.id.clone(),
            name: info.name.clone(),
            description: info.description.clone(),
            metadata: info.metadata.clone(),
            created_at: rfc3339(info.created_ms),
            updated_at: rfc3339(info.updated_ms),
            archived_at: info.archived_ms.map(rfc3339),
        }
    }
}

/// A memory.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = Memory)]
#[serde(deny_unknown_fields)]
pub struct MemoryObject {
    #[schema(inline)]
    r#type: MemoryType,
    /// Its id (`mem_…`), kept through renames.
    id: String,
    memory_store_id: String,
    /// Its current version (`memver_…`).
    memory_version_id: String,
    /// Its path, relative to the store's root (`/notes.md` is the memory tool's
    /// `/memories/notes.md`).
    path: String,
    /// Its content with `view=full`; `null` with `view=basic`.
    #[schema(required = true)]
    content: Option<String>,
    #[schema(pattern = "^[0-9a-f]{64}$")]
    content_sha256: String,
    content_size_bytes: u64,
    #[schema(format = DateTime)]
    created_at: String,
    #[schema(format = DateTime)]
    updated_at: String,
}

impl MemoryObject {
    /// Memory `m` of `store`; its content only with `full`.
    pub fn new(store: &str, m: &Memory, full: bool) -> Self {
        MemoryObject {
            r#type: MemoryType::Tag,
            id: m.id.to_string(),
            memory_store_id: store.to_owned(),
            memory_version_id: m.version.to_string(),
            path: api_path(&m.path),
            content: if full { m.content.clone() } else { None },
            content_sha256: hex(&m.sha256),
            content_size_bytes: m.size,
            created_at: rfc3339(m.created_ms),
            updated_at: rfc3339(m.updated_ms),
        }
    }
}

/// A directory of a listing whose memories lie deeper than `depth`.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryPrefix {
    #[schema(inline)]
    r#type: MemoryPrefixType,
    /// The directory, relative to the store's root, ending in `/`.
    path: String,
}

/// An item of a memory listing.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = MemoryListItem)]
#[serde(untagged)]
pub enum MemoryItem {
    Memory(MemoryObject),
    Prefix(MemoryPrefix),
}

impl MemoryItem {
    /// Item `item` of `store`'s listing; a memory's content only with `full`.
    pub fn new(store: &str, item: &ListItem, full: bool) -> Self {
        match item {
            ListItem::Memory(m) => MemoryItem::Memory(MemoryObject::new(store, m, full)),
            ListItem::Prefix(p) => MemoryItem::Prefix(MemoryPrefix {
                r#type: MemoryPrefixType::Tag,
                path: api_path(p),
            }),
        }
    }
}

/// What a version recorded.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Operation {
    Created,
    Modified,
    Deleted,
}

impl From<memkv::Operation> for Operation {
    fn from(op: memkv::Operation) -> Self {
        match op {
            memkv::Operation::Created => Operation::Created,
            memkv::Operation::Modified => Operation::Modified,
            _ => Operation::Deleted,
        }
    }
}

/// A memory version: one change to a memory, through this API or the memory tool.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = MemoryVersion)]
#[serde(deny_unknown_fields)]
pub struct MemoryVersionObject {
    #[schema(inline)]
    r#type: MemoryVersionType,
    /// Its id (`memver_…`).
    id: String,
    memory_id: String,
    memory_store_id: String,
    operation: Operation,
    #[schema(format = DateTime)]
    created_at: String,
    /// Who made the change, when known.
    #[schema(required = true)]
    created_by: Option<ActorObject>,
    /// The memory's path after the change; `null` once redacted.
    #[schema(required = true)]
    path: Option<String>,
    /// The content after the change with `view=full`; `null` with `view=basic`, for a
    /// deletion, and once redacted.
    #[schema(required = true)]
    content: Option<String>,
    #[schema(required = true, pattern = "^[0-9a-f]{64}$")]
    content_sha256: Option<String>,
    #[schema(required = true)]
    content_size_bytes: Option<u64>,
    /// When it was redacted.
    #[schema(required = true, format = DateTime)]
    redacted_at: Option<String>,
    /// Who redacted it.
    #[schema(required = true)]
    redacted_by: Option<ActorObject>,
}

impl MemoryVersionObject {
    /// Version `v` of `store`; its content only with `full`.
    pub fn new(store: &str, v: &Version, full: bool) -> Self {
        MemoryVersionObject {
            r#type: MemoryVersionType::Tag,
            id: v.id.to_string(),
            memory_id: v.memory.to_string(),
            memory_store_id: store.to_owned(),
            operation: v.operation.into(),
            created_at: rfc3339(v.created_ms),
            created_by: v.actor.as_ref().map(ActorObject::from),
            path: v.path.as_deref().map(api_path),
            content: if full { v.content.clone() } else { None },
            content_sha256: v.sha256.as_ref().map(hex),
            content_size_bytes: v.size,
            redacted_at: v.redacted.as_ref().map(|r| rfc3339(r.at_ms)),
            redacted_by: v
                .redacted
                .as_ref()
                .and_then(|r| r.by.as_ref())
                .map(ActorObject::from),
        }
    }
}

/// A page of the change log.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ChangePage {
    /// The entries, oldest first.
    pub data: Vec<ChangeObject>,
    /// The `after` that reads on from this page.
    pub next_after: u64,
    /// The database's identity: a follower keeps it beside its cursor, and when it changes (a
    /// restored copy, another database) starts again from a full export.
    #[schema(required = true)]
    pub database: Option<String>,
}
