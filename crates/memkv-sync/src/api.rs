//! The memory-stores API, as the sync uses it: list a store's memories, read one, create,
//! update and delete under a `content_sha256` precondition, and follow the store's change feed
//! (memkv's `GET /v1/memory_stores/{id}/changes`; a server without it is followed by listing).
//!
//! Requests are blocking (the sync is a few threads, not a runtime). Every answer the server
//! gives is sorted into an [`ApiError`] kind that says what the sync should do: retry later
//! ([`ApiError::Unavailable`]), look again ([`ApiError::Conflict`]), give up on this file until
//! it changes ([`ApiError::Refused`]), or stop ([`ApiError::Denied`]).

use std::time::Duration;

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use reqwest::StatusCode;
use reqwest::blocking::{Client, RequestBuilder, Response};
use serde::Deserialize;
use serde_json::json;

/// The `anthropic-beta` value the SDKs send with the memory-stores API.
const BETA: &str = "agent-memory-2026-07-22";
/// Memories a listing page asks for (the API's most).
const PAGE: usize = 100;
/// Entries a feed page asks for.
const FEED_PAGE: usize = 1000;

/// What went wrong with a request, sorted by what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The server cannot be reached, timed out, or failed (5xx, 429): try again later.
    #[error("the server is unreachable or failing: {0}")]
    Unavailable(String),
    /// 409: a precondition failed, the path is taken, or the store is archived.
    #[error("conflict: {0}")]
    Conflict(String),
    /// 404: no such memory (or store).
    #[error("not found: {0}")]
    NotFound(String),
    /// 410: the feed's cursor expired or belongs to another database.
    #[error("the change feed no longer has this cursor: {0}")]
    Gone(String),
    /// 401 or 403: the key is wrong, revoked or not allowed to do this.
    #[error("the key was refused ({status}): {message}")]
    Denied { status: u16, message: String },
    /// Another 4xx: the request itself is refused (a path the server's rules refuse, a file over
    /// the store's size limit); it will be refused again until the file changes.
    #[error("the server refused it ({status}): {message}")]
    Refused { status: u16, message: String },
}

impl ApiError {
    fn from_http(e: reqwest::Error) -> ApiError {
        ApiError::Unavailable(e.to_string())
    }
}

pub type Result<T> = std::result::Result<T, ApiError>;

/// A memory as the API answers it.
#[derive(Debug, Clone, Deserialize)]
pub struct Memory {
    pub id: String,
    /// Relative to the store's root, starting with `/`.
    pub path: String,
    pub content_sha256: String,
    /// With `view=full`.
    #[serde(default)]
    pub content: Option<String>,
}

/// One entry of the change feed (memkv's change log).
#[derive(Debug, Clone, Deserialize)]
pub struct Change {
    pub seq: u64,
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub memory_id: Option<String>,
    #[serde(default)]
    pub path: Option<String>,
    #[serde(default)]
    pub previous_path: Option<String>,
    #[serde(default)]
    pub content_sha256: Option<String>,
}

/// A page of the feed.
#[derive(Debug, Clone, Deserialize)]
pub struct ChangePage {
    pub data: Vec<Change>,
    pub next_after: u64,
    #[serde(default)]
    pub database: Option<String>,
}

/// A listing's item: a memory, or a folder rolled up (`memory_prefix`).
#[derive(Deserialize)]
struct Item {
    #[serde(rename = "type")]
    kind: String,
    #[serde(flatten)]
    memory: Option<Memory>,
}

/// A page of a listing.
#[derive(Deserialize)]
struct ListPage {
    data: Vec<Item>,
    #[serde(default)]
    next_page: Option<String>,
}

impl ListPage {
    fn memories(&self) -> impl Iterator<Item = Memory> + '_ {
        self.data
            .iter()
            .filter(|i| i.kind == "memory")
            .filter_map(|i| i.memory.clone())
    }
}

/// A client of one store.
#[derive(Clone)]
pub struct Api {
    http: Client,
    base: String,
    store: String,
    key: String,
}

impl std::fmt::Debug for Api {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Api")
            .field("base", &self.base)
            .field("store", &self.store)
            .finish_non_exhaustive()
    }
}

impl Api {
    /// A client of store `store` at `base` (`http://host:port`), with API key `key`;
    /// `timeout` bounds every request but long polls.
    ///
    /// # Errors
    /// The HTTP client cannot be built (its TLS backend failed to load).
    pub fn new(base: &str, store: &str, key: &str, timeout: Duration) -> Result<Api> {
        let mut builder = Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .timeout(timeout)
            .tcp_keepalive(Duration::from_secs(30));
        if base.starts_with("http://") {
            // No TLS: the system's root certificates need not be loaded (a tenth of a second).
            builder = builder.tls_certs_only(Vec::new());
        }
        Ok(Api {
            http: builder.build().map_err(ApiError::from_http)?,
            base: base.trim_end_matches('/').to_owned(),
            store: store.to_owned(),
            key: key.to_owned(),
        })
    }

    fn url(&self, tail: &str) -> String {
        format!(
            "{}/v1/memory_stores/{}{tail}",
            self.base,
            segment(&self.store)
        )
    }

    fn with_headers(&self, r: RequestBuilder) -> RequestBuilder {
        r.header("x-api-key", &self.key)
            .header("anthropic-version", "2023-06-01")
            .header("anthropic-beta", BETA)
    }

    fn send<T: serde::de::DeserializeOwned>(&self, r: RequestBuilder) -> Result<T> {
        let response = self.with_headers(r).send().map_err(ApiError::from_http)?;
        decode(response)
    }

    /// Whether the store exists (and the key may reach it): [`ApiError::NotFound`] when not.
    pub fn check_store(&self) -> Result<()> {
        self.send::<serde_json::Value>(self.http.get(self.url("")))
            .map(|_| ())
            .map_err(|e| match e {
                ApiError::NotFound(_) => ApiError::NotFound(format!(
                    "store {} does not exist at {} (or the key cannot reach it): create it with POST /v1/memory_stores, or check --store",
                    self.store, self.base
                )),
                e => e,
            })
    }

    /// Every memory of the store, with contents when `full`.
    pub fn list(&self, full: bool) -> Result<Vec<Memory>> {
        let mut all = Vec::new();
        let mut page: Option<String> = None;
        // Each page moves on, or the listing ends: bounded by the store's size.
        loop {
            let mut query = vec![
                ("view", if full { "full" } else { "basic" }.to_owned()),
                ("limit", PAGE.to_string()),
            ];
            if let Some(p) = &page {
                query.push(("page", p.clone()));
            }
            let got: ListPage = self.send(self.http.get(self.url("/memories")).query(&query))?;
            all.extend(got.memories());
            match got.next_page {
                Some(next) if Some(&next) != page.as_ref() && !next.is_empty() => page = Some(next),
                _ => return Ok(all),
            }
        }
    }

    /// The memory at `path`, with its content, if there is one.
    pub fn find(&self, path: &str) -> Result<Option<Memory>> {
        let dir = &path[..path.rfind('/').map_or(0, |i| i + 1)];
        let dir = if dir.is_empty() { "/" } else { dir };
        let mut page: Option<String> = None;
        loop {
            let mut query = vec![
                ("view", "full".to_owned()),
                ("limit", PAGE.to_string()),
                ("path_prefix", dir.to_owned()),
                ("depth", "1".to_owned()),
            ];
            if let Some(p) = &page {
                query.push(("page", p.clone()));
            }
            let got: ListPage = self.send(self.http.get(self.url("/memories")).query(&query))?;
            if let Some(m) = got.memories().find(|m| m.path == path) {
                return Ok(Some(m));
            }
            match got.next_page {
                Some(next) if Some(&next) != page.as_ref() && !next.is_empty() => page = Some(next),
                _ => return Ok(None),
            }
        }
    }

    /// Memory `id` with its content; `None` when it is gone.
    pub fn get(&self, id: &str) -> Result<Option<Memory>> {
        let url = self.url(&format!("/memories/{}", segment(id)));
        match self.send(self.http.get(url).query(&[("view", "full")])) {
            Err(ApiError::NotFound(_)) => Ok(None),
            other => other.map(Some),
        }
    }

    /// A new memory at `path`; [`ApiError::Conflict`] when one is there.
    pub fn create(&self, path: &str, content: &str) -> Result<Memory> {
        let body = json!({ "path": path, "content": content });
        self.send(self.http.post(self.url("/memories")).json(&body))
    }

    /// Memory `id` given `content` and/or moved to `path`, if its content still has hash
    /// `expected`; [`ApiError::Conflict`] when not.
    pub fn update(
        &self,
        id: &str,
        content: Option<&str>,
        path: Option<&str>,
        expected: &str,
    ) -> Result<Memory> {
        let mut body = json!({
            "precondition": { "type": "content_sha256", "content_sha256": expected },
        });
        if let Some(c) = content {
            body["content"] = json!(c);
        }
        if let Some(p) = path {
            body["path"] = json!(p);
        }
        let url = self.url(&format!("/memories/{}", segment(id)));
        self.send(self.http.post(url).json(&body))
    }

    /// Memory `id` deleted if its content still has hash `expected`; a memory already gone is
    /// not an error.
    pub fn delete(&self, id: &str, expected: &str) -> Result<()> {
        let url = self.url(&format!("/memories/{}", segment(id)));
        let r = self
            .http
            .delete(url)
            .query(&[("expected_content_sha256", expected)]);
        match self.send::<serde_json::Value>(r) {
            Ok(_) | Err(ApiError::NotFound(_)) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// The feed's entries after `after`, waiting up to `wait` for one.
    /// [`ApiError::NotFound`] from a server without memkv's feed.
    pub fn changes(&self, after: u64, wait: Duration) -> Result<ChangePage> {
        let query = [
            ("after", after.to_string()),
            ("limit", FEED_PAGE.to_string()),
            ("wait", format!("{:.3}", wait.as_secs_f64())),
        ];
        let r = self
            .http
            .get(self.url("/changes"))
            .query(&query)
            // The poll's own bound (over the client's): the wait, and time to answer.
            .timeout(wait + Duration::from_secs(20));
        self.send(r)
    }
}

/// A response's JSON, or its error sorted by kind.
fn decode<T: serde::de::DeserializeOwned>(response: Response) -> Result<T> {
    let status = response.status();
    let text = response.text().map_err(ApiError::from_http)?;
    if status.is_success() {
        return serde_json::from_str(&text).map_err(|e| {
            ApiError::Unavailable(format!("the server's answer is not what the API says: {e}"))
        });
    }
    let message = serde_json::from_str::<serde_json::Value>(&text)
        .ok()
        .and_then(|v| v["error"]["message"].as_str().map(str::to_owned))
        .unwrap_or_else(|| text.chars().take(200).collect());
    let code = status.as_u16();
    Err(match status {
        StatusCode::CONFLICT => ApiError::Conflict(message),
        StatusCode::NOT_FOUND => ApiError::NotFound(message),
        StatusCode::GONE => ApiError::Gone(message),
        StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => ApiError::Denied {
            status: code,
            message,
        },
        StatusCode::TOO_MANY_REQUESTS | StatusCode::REQUEST_TIMEOUT => {
            ApiError::Unavailable(format!("{status}: {message}"))
        }
        s if s.is_server_error() => ApiError::Unavailable(format!("{status}: {message}")),
        _ => ApiError::Refused {
            status: code,
            message,
        },
    })
}

/// What a path segment keeps as it is: letters, digits and `-_~`.
const KEPT: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'_').remove(b'~');

/// The percent-encoding of one path segment (all but letters, digits and `-_~`).
fn segment(text: &str) -> String {
    utf8_percent_encode(text, KEPT).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_are_percent_encoded() {
        assert_eq!(segment("memstore_Ab-1~"), "memstore_Ab-1~");
        assert_eq!(segment("a/b c"), "a%2Fb%20c");
        assert_eq!(segment("é"), "%C3%A9");
    }
}
