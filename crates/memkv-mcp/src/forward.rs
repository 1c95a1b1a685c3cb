//! Forwarding to a running `memkv serve`: one `POST {url}/v1/memory_stores/{store}/tool` per
//! tool call, with the bare command object as the body (see the serve contract). The server
//! owns the database; this process only carries calls to it.

use std::fmt;
use std::time::Duration;

use memkv::ToolOutput;
use reqwest::StatusCode;
use serde_json::Value;

/// How long one request may take, connecting included.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Retries after a 429 or 503 (the server's back-pressure), and the longest wait honoured.
const RETRIES: u32 = 3;
const MAX_RETRY_AFTER: Duration = Duration::from_secs(10);
/// The largest answer read, as the Python and TypeScript clients: far above any tool output a
/// server sends (a `view` is capped at its output budget), so that a wrong or hostile server
/// cannot make this process hold an unbounded body.
pub const MAX_ANSWER_BYTES: usize = 8 << 20;

/// A client for one store of a memkv server.
#[derive(Clone)]
pub struct Forwarder {
    client: reqwest::Client,
    endpoint: String,
    api_key: String,
    store: String,
}

impl fmt::Debug for Forwarder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The key stays out of logs.
        f.debug_struct("Forwarder")
            .field("endpoint", &self.endpoint)
            .finish_non_exhaustive()
    }
}

/// Why a call could not be carried to the server, or was refused there. The model's own
/// mistakes are not among them: they come back as a [`ToolOutput`] with `is_error`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ForwardError {
    /// The URL cannot be used.
    #[error("invalid server URL {url:?}: {reason}")]
    Url {
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The request did not complete (connection refused, timeout, ...).
    #[error("cannot reach the memkv server: {0}")]
    Transport(#[from] reqwest::Error),
    /// The server answered with an HTTP error (its envelope's message, when it sent one).
    #[error("the memkv server answered {status}: {message}")]
    Refused {
        /// The HTTP status.
        status: StatusCode,
        /// The `error.message` of the envelope, or the body.
        message: String,
    },
    /// A 200 answer that is not `{"content", "is_error"}`.
    #[error("the memkv server sent an answer that is not a tool output: {0}")]
    Malformed(String),
    /// An answer over [`MAX_ANSWER_BYTES`]: not read further. The command may have been
    /// applied.
    #[error(
        "the memkv server's answer is over {MAX_ANSWER_BYTES} bytes, more than any tool output; it was not read (the command may have been applied)"
    )]
    TooLarge,
}

impl Forwarder {
    /// A client for `store` on the server at `url` (e.g. `http://127.0.0.1:7437`), using
    /// `api_key`.
    ///
    /// # Errors
    /// [`ForwardError::Url`] unless `url` is an `http://` URL without query or fragment
    /// (memkv serve speaks plain HTTP; put TLS in front of it on the same host).
    pub fn new(url: &str, api_key: &str, store: &str) -> Result<Forwarder, ForwardError> {
        let bad = |reason: &str| ForwardError::Url {
            url: url.to_owned(),
            reason: reason.to_owned(),
        };
        let parsed = reqwest::Url::parse(url).map_err(|e| bad(&e.to_string()))?;
        if parsed.scheme() != "http" {
            return Err(bad("only http:// URLs are supported"));
        }
        if parsed.query().is_some() || parsed.fragment().is_some() {
            return Err(bad("a query or fragment is not allowed"));
        }
        if store == "." || store == ".." {
            // URL parsers resolve `.` and `..` segments, escaped or not: the request would go
            // to another path. Such a store is reachable at /mcp with x-memkv-store.
            return Err(bad(&format!(
                "the store id {store:?} cannot be carried in a URL path"
            )));
        }
        let client = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .connect_timeout(CONNECT_TIMEOUT)
            .build()?;
        Ok(Forwarder {
            client,
            endpoint: format!(
                "{}/v1/memory_stores/{}/tool",
                url.trim_end_matches('/'),
                encode_segment(store)
            ),
            api_key: api_key.to_owned(),
            store: store.to_owned(),
        })
    }

    /// The store this forwarder acts on.
    pub fn store(&self) -> &str {
        &self.store
    }

    /// Checks that the server answers and takes the key for this store (a `view` of
    /// `/memories`, which changes nothing).
    ///
    /// # Errors
    /// [`ForwardError::Transport`] (the server cannot be reached) or [`ForwardError::Refused`]
    /// (the key is refused, or is for another store).
    pub async fn check(&self) -> Result<(), ForwardError> {
        self.execute(&serde_json::json!({"command": "view", "path": "/memories"}))
            .await
            .map(drop)
            .map_err(|e| match e {
                ForwardError::Refused { status, message } if status.as_u16() == 404 => {
                    ForwardError::Refused {
                        status,
                        message: format!(
                            "{message} (is the API key for store {:?}? a store key opens only its own store)",
                            self.store
                        ),
                    }
                }
                other => other,
            })
    }

    /// Sends one call of `tool` (`memory`: a command object; `memory_search`: as a `tool_use`
    /// block) and returns memkv's answer to it.
    ///
    /// # Errors
    /// See [`ForwardError`].
    pub async fn call(&self, tool: &str, input: &Value) -> Result<ToolOutput, ForwardError> {
        if tool != memkv::SEARCH_TOOL_NAME {
            return self.execute(input).await;
        }
        let block =
            serde_json::json!({"type": "tool_use", "id": "mcp", "name": tool, "input": input});
        let answer: memkv::ToolResult = self.post(&block).await?;
        Ok(ToolOutput {
            content: answer.content,
            is_error: answer.is_error,
        })
    }

    /// Sends one command object and returns memkv's answer to it. A 429 or 503 is retried a
    /// few times after its `Retry-After` (at most [`MAX_RETRY_AFTER`] each).
    ///
    /// # Errors
    /// See [`ForwardError`].
    pub async fn execute(&self, input: &Value) -> Result<ToolOutput, ForwardError> {
        self.post(input).await
    }

    /// POSTs `message` to the tool endpoint and reads memkv's answer as a `T`. A 429 or 503 is
    /// retried a few times after its `Retry-After` (at most [`MAX_RETRY_AFTER`] each).
    async fn post<T: serde::de::DeserializeOwned>(
        &self,
        message: &Value,
    ) -> Result<T, ForwardError> {
        let body = serde_json::to_vec(message).expect("a JSON value serializes");
        let mut attempt = 0;
        loop {
            let response = self
                .client
                .post(&self.endpoint)
                .header("x-api-key", &self.api_key)
                .header("content-type", "application/json")
                .body(body.clone())
                .send()
                .await?;
            let status = response.status();
            let wait = retry_after(&response);
            let bytes = read_capped(response).await?;
            if status == StatusCode::OK {
                return serde_json::from_slice::<T>(&bytes)
                    .map_err(|e| ForwardError::Malformed(e.to_string()));
            }
            let busy = status == StatusCode::TOO_MANY_REQUESTS
                || status == StatusCode::SERVICE_UNAVAILABLE;
            if busy && attempt < RETRIES {
                attempt += 1;
                tokio::time::sleep(wait.min(MAX_RETRY_AFTER)).await;
                continue;
            }
            return Err(ForwardError::Refused {
                status,
                message: envelope_message(&bytes),
            });
        }
    }
}

/// The body of `response`, refused as soon as it is over [`MAX_ANSWER_BYTES`] (declared or
/// sent).
async fn read_capped(mut response: reqwest::Response) -> Result<Vec<u8>, ForwardError> {
    if response
        .content_length()
        .is_some_and(|n| n > MAX_ANSWER_BYTES as u64)
    {
        return Err(ForwardError::TooLarge);
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        if body.len() + chunk.len() > MAX_ANSWER_BYTES {
            return Err(ForwardError::TooLarge);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

fn retry_after(response: &reqwest::Response) -> Duration {
    response
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map_or(Duration::from_secs(1), Duration::from_secs)
}

/// The `error.message` of an Anthropic-style error envelope, else the body itself (cut short).
fn envelope_message(body: &[u8]) -> String {
    serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| v["error"]["message"].as_str().map(str::to_owned))
        .unwrap_or_else(|| String::from_utf8_lossy(&body[..body.len().min(512)]).into_owned())
}

/// `id` as one path segment: every byte but `A-Z a-z 0-9 - _ ~` is percent-encoded, `/`, `%`
/// and `.` included (URL parsers resolve `.` and `..` segments, so the ids `.` and `..` would
/// otherwise name another path).
pub fn encode_segment(id: &str) -> String {
    let mut out = String::with_capacity(id.len());
    for &b in id.as_bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The inverse of [`encode_segment`] for any percent-encoding: `None` for a malformed escape or
/// bytes that are not UTF-8.
pub fn decode_segment(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            // Two hex digits exactly (`from_str_radix` alone would take `%+a`).
            let hex = bytes
                .get(i + 1..i + 3)
                .filter(|h| h.iter().all(u8::is_ascii_hexdigit))?;
            out.push(u8::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_decode_two_hex_digits_exactly() {
        assert_eq!(decode_segment("a%2Fb%20c").as_deref(), Some("a/b c"));
        for bad in ["%+a", "%2", "%zz", "%-1", "%ff"] {
            assert_eq!(decode_segment(bad), None, "{bad}");
        }
    }

    /// A server on loopback that answers one request with `head` and then `body_bytes` zero
    /// bytes (or until the client goes); its address.
    fn oversized_server(head: &'static str, body_bytes: usize) -> std::net::SocketAddr {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            let (mut conn, _) = listener.accept().unwrap();
            let mut request = [0u8; 4096];
            let _ = conn.read(&mut request);
            conn.write_all(head.as_bytes()).unwrap();
            let chunk = vec![b' '; 64 << 10];
            let mut sent = 0;
            while sent < body_bytes {
                if conn.write_all(&chunk).is_err() {
                    return; // the client stopped reading
                }
                sent += chunk.len();
            }
        });
        addr
    }

    #[tokio::test]
    async fn an_oversized_answer_is_refused_without_being_read() {
        // Declared: refused before the body. Undeclared (close-delimited): refused once over.
        for (head, bytes) in [
            (
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 1073741824\r\n\r\n",
                1 << 30,
            ),
            (
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n",
                MAX_ANSWER_BYTES + (1 << 20),
            ),
        ] {
            let addr = oversized_server(head, bytes);
            let forwarder = Forwarder::new(&format!("http://{addr}"), "k", "s").unwrap();
            let err = forwarder
                .execute(&serde_json::json!({"command": "view", "path": "/memories"}))
                .await
                .unwrap_err();
            assert!(matches!(err, ForwardError::TooLarge), "{err}");
            assert!(err.to_string().contains("may have been applied"), "{err}");
        }
    }

    #[test]
    fn segments_round_trip_and_never_keep_a_separator() {
        for id in [
            "dana",
            "a/b",
            "../x",
            "100%",
            "ünï code",
            "a?b#c",
            "",
            "%2F",
        ] {
            let enc = encode_segment(id);
            assert!(!enc.contains('/') && !enc.contains('?') && !enc.contains('#'));
            assert_eq!(decode_segment(&enc).as_deref(), Some(id));
        }
        assert_eq!(encode_segment("a b/c"), "a%20b%2Fc");
        assert_eq!(encode_segment(".."), "%2E%2E");
        assert_eq!(decode_segment("%zz"), None);
        assert_eq!(decode_segment("%4"), None);
        assert_eq!(decode_segment("%FF"), None);
        assert_eq!(decode_segment("plain").as_deref(), Some("plain"));
    }

    #[test]
    fn only_plain_http_urls() {
        assert!(Forwarder::new("http://127.0.0.1:7437", "k", "u").is_ok());
        let dots = Forwarder::new("http://127.0.0.1:7437", "k", "...").unwrap();
        let url = reqwest::Url::parse(&dots.endpoint).unwrap();
        assert_eq!(url.path(), "/v1/memory_stores/%2E%2E%2E/tool");
        for store in [".", ".."] {
            assert!(matches!(
                Forwarder::new("http://127.0.0.1:7437", "k", store),
                Err(ForwardError::Url { .. })
            ));
        }
        let f = Forwarder::new("http://127.0.0.1:7437/", "k", "a/b").unwrap();
        assert_eq!(
            f.endpoint,
            "http://127.0.0.1:7437/v1/memory_stores/a%2Fb/tool"
        );
        assert!(!format!("{f:?}").contains("\"k\""));
        for bad in ["https://x", "ftp://x", "not a url", "http://x/?q=1"] {
            assert!(
                matches!(Forwarder::new(bad, "k", "u"), Err(ForwardError::Url { .. })),
                "{bad}"
            );
        }
    }

    #[test]
    fn envelope_messages() {
        assert_eq!(
            envelope_message(
                br#"{"type":"error","error":{"type":"not_found_error","message":"no such store"}}"#
            ),
            "no such store"
        );
        assert_eq!(envelope_message(b"plain"), "plain");
    }
}
