//! The stdio transport of `memkv mcp`: one JSON-RPC message per line. Every line gets an answer
//! or is a notification: a line that is not JSON is answered with -32700 (parse error), one
//! that is JSON but not a JSON-RPC message, or longer than the cap, with -32600 (invalid
//! request), with its `id` when it can be read, so a client never waits forever for an id.

use std::borrow::Cow;
use std::fmt;
use std::io;
use std::sync::Arc;

use rmcp::RoleServer;
use rmcp::model::{
    ClientJsonRpcMessage, ErrorCode, ErrorData, RequestId, ServerJsonRpcMessage, ServerResult,
};
use rmcp::transport::Transport;
use serde_json::Value;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::Mutex;

/// How much of an over-long line is kept to read its `id` from.
const PREFIX: usize = 4096;

/// Lines from `reader`, answers to `writer` (each a whole line, written under one lock).
pub struct LineTransport<R, W> {
    reader: R,
    writer: Arc<Mutex<W>>,
    max_line: usize,
}

impl<R, W> LineTransport<R, W> {
    /// Reads lines of at most `max_line` bytes (the newline not counted).
    pub fn new(reader: R, writer: W, max_line: usize) -> Self {
        LineTransport {
            reader,
            writer: Arc::new(Mutex::new(writer)),
            max_line,
        }
    }
}

/// One line as read: whole, or cut at the cap (its first bytes kept).
enum Line {
    Whole(Vec<u8>),
    TooLong(Vec<u8>),
}

impl<R, W> LineTransport<R, W>
where
    R: AsyncBufRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    /// The next line, `None` at the end of input (a last line without a newline counts).
    async fn line(&mut self) -> io::Result<Option<Line>> {
        let mut line = Vec::new();
        let mut too_long = false;
        let mut any = false;
        loop {
            let buf = self.reader.fill_buf().await?;
            if buf.is_empty() {
                return Ok(any.then(|| finish(line, too_long)));
            }
            any = true;
            let (chunk, done) = match buf.iter().position(|&b| b == b'\n') {
                Some(i) => (&buf[..i], Some(i + 1)),
                None => (buf, None),
            };
            if !too_long {
                if line.len() + chunk.len() > self.max_line {
                    too_long = true;
                    let keep = PREFIX.saturating_sub(line.len()).min(chunk.len());
                    line.extend_from_slice(&chunk[..keep]);
                    line.truncate(PREFIX);
                } else {
                    line.extend_from_slice(chunk);
                }
            }
            let used = done.unwrap_or(buf.len());
            self.reader.consume(used);
            if done.is_some() {
                return Ok(Some(finish(line, too_long)));
            }
        }
    }

    async fn write(writer: &Mutex<W>, message: &ServerJsonRpcMessage) -> io::Result<()> {
        let mut text = serde_json::to_vec(message).map_err(io::Error::other)?;
        text.push(b'\n');
        let mut w = writer.lock().await;
        w.write_all(&text).await?;
        w.flush().await
    }

    /// Answers a line that is no message.
    async fn refuse(
        writer: Arc<Mutex<W>>,
        code: ErrorCode,
        message: impl Into<Cow<'static, str>> + fmt::Display,
        id: Option<RequestId>,
    ) {
        tracing::warn!(code = code.0, id = ?id, "{message}");
        let error = ServerJsonRpcMessage::error(ErrorData::new(code, message, None), id);
        Self::answer(&writer, &error).await;
    }

    /// Writes an answer of the transport's own; a failure to write is only logged (the
    /// client has gone, and the next read ends the session).
    async fn answer(writer: &Mutex<W>, message: &ServerJsonRpcMessage) {
        if let Err(e) = Self::write(writer, message).await {
            tracing::warn!(error = %e, "cannot write to standard output");
        }
    }
}

fn finish(mut line: Vec<u8>, too_long: bool) -> Line {
    if line.last() == Some(&b'\r') && !too_long {
        line.pop();
    }
    if too_long {
        Line::TooLong(line)
    } else {
        Line::Whole(line)
    }
}

/// The `id` of a JSON-RPC request, from the parsed line.
fn id_of(value: &Value) -> Option<RequestId> {
    serde_json::from_value(value.get("id")?.clone()).ok()
}

/// The `id` at the start of an over-long line: as the first member of the object, or after
/// `jsonrpc` and `method` members with plain string values (how clients write a request), so
/// that no `id` inside `params` is taken for it.
fn leading_id(prefix: &[u8]) -> Option<RequestId> {
    let text = String::from_utf8_lossy(prefix);
    let mut rest = text.trim_start().strip_prefix('{')?;
    loop {
        rest = rest.trim_start();
        let after_quote = rest.strip_prefix('"')?;
        let (key, tail) = after_quote.split_once('"')?;
        let tail = tail.trim_start().strip_prefix(':')?.trim_start();
        match key {
            "id" => {
                let end = tail.find([',', '}']).unwrap_or(tail.len());
                return serde_json::from_str(tail[..end].trim()).ok();
            }
            "jsonrpc" | "method" => {
                let value = tail.strip_prefix('"')?;
                let (v, after) = value.split_once('"')?;
                if v.contains('\\') {
                    return None;
                }
                rest = after.trim_start().strip_prefix(',')?;
            }
            _ => return None,
        }
    }
}

impl<R, W> Transport<RoleServer> for LineTransport<R, W>
where
    R: AsyncBufRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    type Error = io::Error;

    fn name() -> Cow<'static, str> {
        "memkv-stdio".into()
    }

    fn send(
        &mut self,
        item: ServerJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let writer = Arc::clone(&self.writer);
        async move { Self::write(&writer, &item).await }
    }

    async fn receive(&mut self) -> Option<ClientJsonRpcMessage> {
        loop {
            let line = match self.line().await {
                Ok(Some(line)) => line,
                Ok(None) => return None,
                Err(e) => {
                    tracing::error!(error = %e, "cannot read standard input");
                    return None;
                }
            };
            let bytes = match line {
                Line::TooLong(prefix) => {
                    Self::refuse(
                        Arc::clone(&self.writer),
                        ErrorCode::INVALID_REQUEST,
                        "message too large: a line is at most the largest memory-tool command",
                        leading_id(&prefix),
                    )
                    .await;
                    continue;
                }
                Line::Whole(bytes) => bytes,
            };
            if bytes.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let value: Value = match memkv::json::parse(&bytes) {
                Ok(v) => v,
                Err(e) if e.is_data() => {
                    // A key named twice (which serde would resolve to the last): refused as
                    // every face refuses it; a tool call is answered with the model's
                    // invalid-input message, as `memkv exec` answers such a line.
                    let lenient: Option<Value> = serde_json::from_slice(&bytes).ok();
                    let id = lenient.as_ref().and_then(id_of);
                    let call = lenient.as_ref().and_then(|v| v.get("method"))
                        == Some(&Value::from("tools/call"));
                    let reason = e.to_string();
                    match id {
                        Some(id) if call => {
                            let output = memkv::protocol::InvalidMessage::Json(reason).output();
                            let result = ServerResult::CallToolResult(crate::tool::result(output));
                            let answer = ServerJsonRpcMessage::response(result, id);
                            Self::answer(&self.writer, &answer).await;
                        }
                        id => {
                            Self::refuse(
                                Arc::clone(&self.writer),
                                ErrorCode::INVALID_REQUEST,
                                format!("invalid request: {reason}"),
                                id,
                            )
                            .await;
                        }
                    }
                    continue;
                }
                Err(_) => {
                    Self::refuse(
                        Arc::clone(&self.writer),
                        ErrorCode::PARSE_ERROR,
                        "parse error: not JSON",
                        None,
                    )
                    .await;
                    continue;
                }
            };
            match serde_json::from_value::<ClientJsonRpcMessage>(value) {
                Ok(message) => return Some(message),
                Err(_) => {
                    // A notification (no id) that is not understood gets no answer, as
                    // JSON-RPC says; anything else is an invalid request. (Parsed again:
                    // rare, and it spares every good message a copy.)
                    let value: Value = serde_json::from_slice(&bytes).unwrap_or_default();
                    let id = id_of(&value);
                    if id.is_none() && value.get("method").is_some() {
                        tracing::warn!("an unknown notification was ignored");
                        continue;
                    }
                    Self::refuse(
                        Arc::clone(&self.writer),
                        ErrorCode::INVALID_REQUEST,
                        "invalid request: not a JSON-RPC 2.0 message",
                        id,
                    )
                    .await;
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.writer.lock().await.flush().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leading_ids() {
        assert_eq!(
            leading_id(br#"{"id":7,"jsonrpc":"2.0","params":{"#),
            Some(RequestId::Number(7))
        );
        assert_eq!(
            leading_id(br#" { "jsonrpc" : "2.0", "method":"tools/call", "id":"a-1", "params""#),
            Some(RequestId::String("a-1".into()))
        );
        assert_eq!(leading_id(br#"{"params":{"id":3},"id":4"#), None);
        assert_eq!(leading_id(br#"{"method":"x\"y","id":4"#), None);
        assert_eq!(leading_id(b"not json"), None);
    }

    async fn exchange(input: &[u8], max_line: usize) -> (Vec<ClientJsonRpcMessage>, Vec<Value>) {
        let (out_w, mut out_r) = tokio::io::duplex(1 << 20);
        let mut t = LineTransport::new(input, out_w, max_line);
        let mut got = Vec::new();
        while let Some(m) = Transport::<RoleServer>::receive(&mut t).await {
            got.push(m);
        }
        drop(t);
        let mut text = String::new();
        tokio::io::AsyncReadExt::read_to_string(&mut out_r, &mut text)
            .await
            .unwrap();
        let answers = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        (got, answers)
    }

    #[tokio::test]
    async fn every_bad_line_is_answered_and_good_ones_pass() {
        let ping = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
        let long = format!(
            r#"{{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{{"x":"{}"}}}}"#,
            "a".repeat(300)
        );
        let dup_call = r#"{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"memory","arguments":{"command":"view","path":"/memories","command":"create"}}}"#;
        let dup_other = r#"{"jsonrpc":"2.0","id":7,"id":8,"method":"ping"}"#;
        let input = format!(
            "{ping}\nnot json\n\n{long}\n{dup_call}\n{dup_other}\n{{\"id\":5,\"nope\":1}}\n{{\"jsonrpc\":\"2.0\",\"method\":\"x/unknown\"}}\r\n{{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}}"
        );
        let (got, answers) = exchange(input.as_bytes(), 200).await;
        // The two pings, and the unknown notification (rmcp ignores it).
        assert_eq!(got.len(), 3, "{got:?}");
        let (results, errors): (Vec<&Value>, Vec<&Value>) =
            answers.iter().partition(|a| a.get("result").is_some());
        let codes: Vec<(i64, Value)> = errors
            .iter()
            .map(|a| (a["error"]["code"].as_i64().unwrap(), a["id"].clone()))
            .collect();
        assert_eq!(
            codes,
            vec![
                (-32700, Value::Null),
                (-32600, Value::from(9)),
                (-32600, Value::from(8)),
                (-32600, Value::from(5)),
            ],
            "{answers:?}"
        );
        // The tool call with a key named twice: the model's invalid-input answer, as exec's.
        let [call] = results[..] else {
            panic!("{answers:?}")
        };
        assert_eq!(call["id"], 6);
        assert_eq!(call["result"]["isError"], true);
        let text = call["result"]["content"][0]["text"].as_str().unwrap();
        assert!(
            text.starts_with("Error: Invalid JSON: duplicate key `command`"),
            "{text}"
        );
        for a in &answers {
            assert_eq!(a["jsonrpc"], "2.0");
        }
    }
}
