//! The memory tool on the wire, one answer for every face.
//!
//! `memkv exec`, the HTTP server, MCP and the SDK adapters all hand the JSON they receive to this
//! module, so a string can only differ between faces if a test says so. A message is one of:
//!
//! - the `input` object of a `tool_use` block, answered with a bare [`ToolOutput`]
//!   (`{"content", "is_error"}`);
//! - a whole [`ToolUse`] block, answered with a [`ToolResult`] block;
//! - an array of `tool_use` blocks (every memory call of one assistant turn), executed in order
//!   and answered with the array of results.
//!
//! A block without a string `id` is refused whole ([`InvalidMessage`]): nothing is executed,
//! since its answer could not be matched to the call.

use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use serde::Serialize;
use serde_json::Value;

use crate::api::MemoryStore;
use crate::blocks::{ToolOutput, ToolResult, ToolUse, block_call, input_call};
use crate::command::Command;
use crate::error::Error;
use crate::limits::Limits;
use crate::messages;
use crate::search::{self, SearchRequest};

/// The answer to one message (see [`answer`]); serializes as the bare object, the block, or
/// the array of blocks, with keys in the order of the Messages API.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Response {
    /// The answer to a bare command object: `{"content", "is_error"}`.
    Output(ToolOutput),
    /// The answer to a `tool_use` block: a `tool_result` block.
    Result(ToolResult),
    /// The answer to an array of `tool_use` blocks: their results, in order.
    Results(Vec<ToolResult>),
}

/// A message this module refuses whole, before executing anything.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidMessage {
    /// The text is not JSON (or not UTF-8).
    #[error("{0}")]
    Json(String),
    /// A line longer than the limit for one message.
    #[error("the line is longer than {limit} bytes")]
    TooLong {
        /// The limit, in bytes.
        limit: usize,
    },
    /// A `tool_use` block that cannot be answered: `id` or `name` missing or not a string.
    #[error("{0}")]
    Block(String),
}

impl InvalidMessage {
    /// What the model reads about it (a line-oriented face answers with this).
    pub fn output(&self) -> ToolOutput {
        let content = match self {
            InvalidMessage::Json(reason) => messages::invalid_json(reason),
            InvalidMessage::TooLong { .. } => messages::invalid_json(&self.to_string()),
            InvalidMessage::Block(reason) => messages::invalid_block(reason),
        };
        ToolOutput {
            content,
            is_error: true,
        }
    }
}

/// A parsed message: what to execute, before anything is.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    /// The `input` object of a `tool_use` block (or any other value: it gets the model's error).
    Input(Value),
    /// One `tool_use` block.
    Block(ToolUse),
    /// Several `tool_use` blocks, answered in order.
    Blocks(Vec<ToolUse>),
}

impl Message {
    /// Classifies `value`. An object with `"type": "tool_use"` is a block; an array is a list of
    /// blocks; anything else is a command input (whose mistakes the model is told about).
    ///
    /// # Errors
    /// [`InvalidMessage::Block`] for a block without a non-empty string `id` or a string
    /// `name`, or an array that is empty or holds anything but `tool_use` blocks.
    pub fn from_json(value: Value) -> Result<Message, InvalidMessage> {
        match value {
            Value::Array(items) => {
                if items.is_empty() {
                    return Err(InvalidMessage::Block(
                        "an array of tool_use blocks must not be empty".into(),
                    ));
                }
                let blocks = items
                    .into_iter()
                    .enumerate()
                    .map(|(i, item)| {
                        if !is_tool_use(&item) {
                            return Err(InvalidMessage::Block(format!(
                                "element {i} of the array is not a tool_use block"
                            )));
                        }
                        block(item).map_err(|e| InvalidMessage::Block(format!("element {i}: {e}")))
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(Message::Blocks(blocks))
            }
            value if is_tool_use(&value) => block(value).map(Message::Block),
            value => Ok(Message::Input(value)),
        }
    }

    /// Parses one line or request body.
    ///
    /// # Errors
    /// [`InvalidMessage::Json`] for text that is not JSON or names a key of an object twice
    /// ([`crate::json::parse`]), then as [`Self::from_json`].
    pub fn parse(text: &[u8]) -> Result<Message, InvalidMessage> {
        let value = crate::json::parse(text).map_err(|e| InvalidMessage::Json(e.to_string()))?;
        Message::from_json(value)
    }
}

fn is_tool_use(value: &Value) -> bool {
    value.get("type").and_then(Value::as_str) == Some("tool_use")
}

fn block(mut value: Value) -> Result<ToolUse, InvalidMessage> {
    let field = |value: &mut Value, name: &str| match value.get_mut(name).map(Value::take) {
        Some(Value::String(s)) if !s.is_empty() || name != "id" => Ok(s),
        Some(Value::String(_)) => Err(InvalidMessage::Block(format!("`{name}` is empty"))),
        Some(_) => Err(InvalidMessage::Block(format!("`{name}` must be a string"))),
        None => Err(InvalidMessage::Block(format!("`{name}` is missing"))),
    };
    let id = field(&mut value, "id")?;
    let name = field(&mut value, "name")?;
    let input = value.get_mut("input").map_or(Value::Null, Value::take);
    Ok(ToolUse { id, name, input })
}

/// The longest message that can carry a valid command under `limits`: the two largest string
/// fields (`old_str` and `new_str`) at the file-size limit, each JSON-escaped at worst six
/// bytes per byte (`\u0000`), plus room for the rest. Faces cap lines and bodies at this.
pub fn max_message_bytes(limits: &Limits) -> usize {
    let file = usize::try_from(limits.max_file_bytes).unwrap_or(usize::MAX);
    file.saturating_mul(12).saturating_add(64 * 1024)
}

/// Answers `message` for `user`. A storage failure is answered to the model with
/// the storage-failure message (nothing was applied) and also returned, for the operator; in
/// an array, each block is answered on its own, in order.
pub fn answer(user: &MemoryStore<'_>, message: Message) -> (Response, Vec<Error>) {
    finish(answer_with(
        message,
        |command| std::future::ready(user.execute(&command)),
        |request| std::future::ready(user.search_output(&request)),
    ))
}

/// The one loop that answers a message, for every face: each of its calls
/// ([`Message::calls`]) run after the one before has returned, by `command` (a memory-tool
/// command) or `search` (a `memory_search` search), the model's mistakes answered as they are,
/// and the results handed to [`Message::respond`]. [`answer`] runs it on the caller's thread;
/// an async face awaits it, with its own way to run each call (the HTTP server awaits writes
/// from the write pipeline and runs searches off its async workers), and between two calls it
/// lets the executor run other tasks. It needs no particular async runtime.
pub async fn answer_with<C, CF, S, SF>(
    message: Message,
    mut command: C,
    mut search: S,
) -> (Response, Vec<Error>)
where
    C: FnMut(Command) -> CF,
    CF: Future<Output = Result<ToolOutput, Error>>,
    S: FnMut(SearchRequest) -> SF,
    SF: Future<Output = Result<ToolOutput, Error>>,
{
    let calls = message.calls();
    let mut results = Vec::with_capacity(calls.len());
    for (i, call) in calls.into_iter().enumerate() {
        if i > 0 {
            YieldOnce(false).await;
        }
        results.push(match call {
            Call::Command(c) => command(c).await,
            Call::Search(request) => search(request).await,
            Call::Answered(answered) => Ok(answered),
        });
    }
    message.respond(results)
}

/// Gives the executor one turn: pending once (asking to be polled again), then ready.
struct YieldOnce(bool);

impl Future for YieldOnce {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            Poll::Ready(())
        } else {
            self.0 = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }
}

/// Runs `future` to its end on this thread, for a future that never waits on anything but
/// [`YieldOnce`] (each poll makes progress): [`answer`]'s, whose calls are ready at once.
fn finish<T>(future: impl Future<Output = T>) -> T {
    let mut future = std::pin::pin!(future);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            return out;
        }
    }
}

/// Answers one line of a JSON Lines stream with one line of JSON (no newline), and the storage
/// failures beside it for the operator. A line that is not a valid message gets its
/// [`InvalidMessage::output`].
pub fn answer_line(user: &MemoryStore<'_>, line: &[u8]) -> (String, Vec<Error>) {
    match Message::parse(line) {
        Ok(message) => {
            let (response, errors) = answer(user, message);
            (to_line(&response), errors)
        }
        Err(invalid) => (to_line(&invalid.output()), Vec::new()),
    }
}

/// One call of a message, as [`Message::calls`] lists them.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Call {
    /// A memory-tool command to run ([`MemoryStore::execute`]).
    Command(Command),
    /// A `memory_search` search to run ([`MemoryStore::search_output`]): a `tool_use` block
    /// named [`crate::SEARCH_TOOL_NAME`].
    Search(SearchRequest),
    /// The model's mistake, already answered (input that is not a command, a search input
    /// memkv refuses, another tool's name).
    Answered(ToolOutput),
}

impl Message {
    /// The calls that [`answer`] runs, in order, for a face that runs the commands itself (an
    /// async server that reads on its own threads and queues writes, say). Run each command
    /// after the previous one has returned, and hand the results to [`Message::respond`].
    pub fn calls(&self) -> Vec<Call> {
        let command = |call: Result<Command, ToolOutput>| match call {
            Ok(command) => Call::Command(command),
            Err(answered) => Call::Answered(answered),
        };
        let block = |block: &ToolUse| {
            if block.name == crate::SEARCH_TOOL_NAME {
                match search::tool::search_request(&block.input) {
                    Ok(request) => Call::Search(request),
                    Err(reason) => Call::Answered(search::tool::refused_input(&reason)),
                }
            } else {
                command(block_call(block))
            }
        };
        match self {
            Message::Input(input) => vec![command(input_call(input))],
            Message::Block(b) => vec![block(b)],
            Message::Blocks(blocks) => blocks.iter().map(block).collect(),
        }
    }

    /// The answer to this message, given the result of each of its [`Message::calls`] in order
    /// (an answered call's result is its output), exactly as [`answer`] gives it: a storage
    /// failure is answered with the storage-failure message and also returned. A call without
    /// a result counts as a storage failure.
    pub fn respond(
        self,
        results: impl IntoIterator<Item = Result<ToolOutput, Error>>,
    ) -> (Response, Vec<Error>) {
        let mut errors = Vec::new();
        let mut results = results.into_iter();
        let mut next = || match results.next() {
            Some(Ok(output)) => output,
            Some(Err(e)) => {
                errors.push(e);
                storage_failure()
            }
            None => {
                errors.push(Error::storage("a call of the message was not run"));
                storage_failure()
            }
        };
        let response = match self {
            Message::Input(_) => Response::Output(next()),
            Message::Block(block) => Response::Result(ToolResult::new(block.id, next())),
            Message::Blocks(blocks) => Response::Results(
                blocks
                    .into_iter()
                    .map(|block| ToolResult::new(block.id, next()))
                    .collect(),
            ),
        };
        (response, errors)
    }
}

fn storage_failure() -> ToolOutput {
    ToolOutput {
        content: messages::storage_failure(),
        is_error: true,
    }
}

/// One value as one line of JSON.
pub fn to_line(value: &impl Serialize) -> String {
    serde_json::to_string(value).expect("plain structs serialize")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn blocks_without_a_string_id_or_name_are_refused() {
        for (value, reason) in [
            (
                json!({"type": "tool_use", "name": "memory", "input": {}}),
                "`id` is missing",
            ),
            (
                json!({"type": "tool_use", "id": 7, "name": "memory"}),
                "`id` must be a string",
            ),
            (
                json!({"type": "tool_use", "id": "", "name": "memory"}),
                "`id` is empty",
            ),
            (json!({"type": "tool_use", "id": "t"}), "`name` is missing"),
            (json!([]), "an array of tool_use blocks must not be empty"),
            (
                json!([{"command": "view"}]),
                "element 0 of the array is not a tool_use block",
            ),
            (
                json!([{"type": "tool_use", "id": "a", "name": "memory"}, {"type": "tool_use", "name": "memory"}]),
                "element 1: `id` is missing",
            ),
        ] {
            assert_eq!(
                Message::from_json(value.clone()),
                Err(InvalidMessage::Block(reason.into())),
                "{value}"
            );
        }
    }

    #[test]
    fn messages_are_classified() {
        let block =
            json!({"type": "tool_use", "id": "a", "name": "memory", "input": {"command": "view"}});
        let want = ToolUse {
            id: "a".into(),
            name: "memory".into(),
            input: json!({"command": "view"}),
        };
        assert_eq!(
            Message::from_json(block.clone()),
            Ok(Message::Block(want.clone()))
        );
        assert_eq!(
            Message::from_json(json!([block])),
            Ok(Message::Blocks(vec![want]))
        );
        let input = json!({"command": "view", "path": "/memories"});
        assert_eq!(Message::from_json(input.clone()), Ok(Message::Input(input)));
        assert!(matches!(
            Message::parse(b"{not json"),
            Err(InvalidMessage::Json(_))
        ));
        assert!(matches!(
            Message::parse(b"\"\xff\""),
            Err(InvalidMessage::Json(_))
        ));
    }

    #[test]
    fn calls_and_respond_answer_as_answer_does() {
        let store = crate::Database::in_memory().unwrap();
        let user = store.user("u").unwrap();
        let text = json!([
            {"type": "tool_use", "id": "a", "name": "memory", "input": {"command": "create", "path": "/memories/x", "file_text": "hi\n"}},
            {"type": "tool_use", "id": "b", "name": "other", "input": {}},
            {"type": "tool_use", "id": "c", "name": "memory", "input": {"command": "nope"}},
            {"type": "tool_use", "id": "d", "name": "memory", "input": {"command": "view", "path": "/memories/x"}},
            {"type": "tool_use", "id": "e", "name": "memory_search", "input": {"query": "hi"}},
            {"type": "tool_use", "id": "f", "name": "memory_search", "input": {"query": ""}}
        ])
        .to_string();
        let message = Message::parse(text.as_bytes()).unwrap();
        let calls = message.calls();
        assert!(matches!(&calls[0], Call::Command(Command::Create { .. })));
        assert!(matches!(&calls[1], Call::Answered(_)) && matches!(&calls[2], Call::Answered(_)));
        assert!(matches!(&calls[4], Call::Search(r) if r.query == "hi"));
        let results: Vec<_> = calls
            .into_iter()
            .map(|call| match call {
                Call::Command(command) => user.execute(&command),
                Call::Search(request) => user.search_output(&request),
                Call::Answered(answered) => Ok(answered),
            })
            .collect();
        let mine = message.clone().respond(results);
        let other = crate::Database::in_memory().unwrap();
        let theirs = answer(&other.user("u").unwrap(), message.clone());
        assert_eq!(to_line(&mine.0), to_line(&theirs.0));
        assert!(mine.1.is_empty());
        let Response::Results(mine) = mine.0 else {
            panic!("six blocks, six results")
        };
        let ids: Vec<_> = mine.iter().map(|r| r.tool_use_id.as_str()).collect();
        assert_eq!(ids, ["a", "b", "c", "d", "e", "f"]);
        // Ranked, the default: one memory of one word, idf ln(1 + 0.5 / 1.5) = 0.29.
        assert_eq!(
            mine[4].content,
            "/memories/x (score 0.29)\n/memories/x:1: hi"
        );
        assert!(mine[5].is_error);
        assert!(!mine[0].is_error && mine[1].is_error && mine[2].is_error && !mine[3].is_error);
        assert_eq!(mine[1].content, messages::unknown_tool("\"other\""));
        assert!(mine[3].content.contains("hi"), "{}", mine[3].content);
        // A call left without a result is a storage failure, reported and answered as one.
        let (response, errors) = message.respond(Vec::new());
        assert_eq!(errors.len(), 6);
        let Response::Results(results) = response else {
            panic!("six blocks, six results")
        };
        assert!(
            results
                .iter()
                .all(|r| r.content == messages::storage_failure() && r.is_error)
        );
    }

    #[test]
    fn the_message_cap_fits_the_largest_valid_command() {
        let limits = Limits::DEFAULT;
        let worst = r"\u0000".repeat(limits.max_file_bytes as usize);
        let line = format!(
            r#"{{"command":"str_replace","path":"/memories/{}","old_str":"{worst}","new_str":"{worst}"}}"#,
            "a/".repeat(20)
        );
        assert!(line.len() <= max_message_bytes(&limits));
    }
}
