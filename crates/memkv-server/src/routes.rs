//! Every route's path, and the list of routes with their methods, as the OpenAPI document
//! lists them. The handlers name their paths from here in their `#[utoipa::path]`;
//! [`crate::app::documented`] routes each handler at the path its attribute gives.

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

/// The routes only an admin key may use, with what each does: a store key's 403 says it
/// ("creating a memory store needs an admin key"). The `crate::access::Admin` extractor reads
/// this table.
pub const ADMIN_ROUTES: &[(&str, &str, &str)] = &[
    ("POST", STORES, "creating a memory store"),
    ("GET", STORES, "listing memory stores"),
    ("GET", CHANGES, "the change feed of every store"),
    ("PATCH", SETTINGS, "changing a store's settings"),
    ("POST", KEYS, "adding an API key"),
    ("GET", KEYS, "listing API keys"),
    ("DELETE", KEY, "revoking an API key"),
    ("POST", WEBHOOKS, "registering a webhook"),
    ("GET", WEBHOOKS, "listing webhooks"),
    ("DELETE", WEBHOOK, "removing a webhook"),
    ("GET", EXPORT, "exporting every store"),
    ("POST", IMPORT, "importing an export"),
];

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_admin_route_is_a_route() {
        for (method, path, what) in ADMIN_ROUTES {
            assert!(
                ROUTES
                    .iter()
                    .any(|(m, p)| m.eq_ignore_ascii_case(method) && p == path),
                "{method} {path} ({what})"
            );
        }
    }
}
