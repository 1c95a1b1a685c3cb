//! The operations, each answering what `memkv serve` answers for the same request
//! ([`Answer`]): the tool route, the search route and a store's deletion as the SDK adapters
//! use them, then the operator's calls (stores, export, import, expiry, history).

use std::io::Write;
use std::path::Path;

use memkv::protocol::{self, Message, Response};
use memkv::wire::SearchResultsObject;
use memkv::{ApiRefusal, Conflict, Error, MemoryStore, ToolOutput};
use serde_json::{Value, json};

use crate::{Answer, Opened};

/// The handle, if this process may use it (see [`Opened::usable`]).
fn usable(opened: &Opened) -> Result<(), Answer> {
    opened.usable().map_err(Answer::invalid)
}

/// The most `tool_use` blocks in one message, as `memkv serve`'s default.
pub const MAX_BLOCKS: usize = 64;

/// `POST /v1/memory_stores/{store}/tool`: `body` is what `memkv exec` takes (a command's input
/// object, a `tool_use` block, or an array of blocks); the answer's body is what it prints.
/// A storage failure is answered to the model with the storage-failure message (nothing was
/// applied), as the route does.
pub fn tool(opened: &Opened, store: &str, body: &[u8]) -> Answer {
    match parse(opened, store, body) {
        Ok((user, message)) => {
            let (response, _errors) = protocol::answer(&user, message);
            Answer::ok(protocol::to_line(&response))
        }
        Err(refused) => refused,
    }
}

/// One call as the SDK adapters make it (a command's input object, or one `tool_use` block, as
/// `memory_search`'s are sent): the text the model reads and whether it is an error, without
/// the JSON around it, which the adapters would only take apart again. The tool route's answer
/// for anything it refuses; an array of blocks is refused here (see [`tool`]).
pub fn call(opened: &Opened, store: &str, body: &[u8]) -> Result<ToolOutput, Answer> {
    const ONE: &str =
        "one command or one tool_use block per call; an array of blocks goes to the tool route";
    let (user, message) = parse(opened, store, body)?;
    if let Message::Blocks(_) = message {
        return Err(Answer::invalid(ONE));
    }
    let (response, _errors) = protocol::answer(&user, message);
    match response {
        Response::Output(output) => Ok(output),
        Response::Result(result) => Ok(ToolOutput {
            content: result.content,
            is_error: result.is_error,
        }),
        Response::Results(_) => Err(Answer::invalid(ONE)),
    }
}

/// The store's handle and the parsed message, or the route's refusal.
fn parse<'d>(
    opened: &'d Opened,
    store: &str,
    body: &[u8],
) -> Result<(MemoryStore<'d>, Message), Answer> {
    usable(opened)?;
    let user = opened
        .db
        .user(store)
        .map_err(|e| Answer::invalid(e.to_string()))?
        .read_only(opened.read_only);
    let cap = protocol::max_message_bytes(opened.db.limits());
    if body.len() > cap {
        return Err(Answer::error(
            413,
            "request_too_large",
            format!("the request body is over {cap} bytes"),
        ));
    }
    let message = Message::parse(body).map_err(|e| Answer::invalid(e.to_string()))?;
    if let Message::Blocks(blocks) = &message
        && blocks.len() > MAX_BLOCKS
    {
        return Err(Answer::error(
            413,
            "request_too_large",
            format!("at most {MAX_BLOCKS} tool_use blocks per request"),
        ));
    }
    Ok((user, message))
}

/// The search route's parameters (`GET /v1/memory_stores/{store}/search`), typed: the
/// library's, which checks them.
pub use memkv::search::SearchParams as Search;

/// The search route: `{"data": [...], "more", "unsearched"}`.
pub fn search(opened: &Opened, store: &str, q: &Search) -> Answer {
    if let Err(refused) = usable(opened) {
        return refused;
    }
    let request = match q.request() {
        Ok(r) => r,
        Err(why) => return Answer::invalid(why),
    };
    let user = match opened.db.user(store) {
        Ok(u) => u,
        Err(_) => return Answer::not_found(format!("no memory store {store:?}")),
    };
    match user.search(&request) {
        Ok(results) => match serde_json::to_string(&SearchResultsObject::from(&results)) {
            Ok(body) => Answer::ok(body),
            Err(e) => Answer::error(500, "api_error", e.to_string()),
        },
        Err(e @ Error::InvalidSearch(_)) => Answer::invalid(e.to_string()),
        Err(Error::InvalidPath { path, reason }) => Answer::invalid(format!(
            "path_prefix {:?} is not a memory path: {reason}",
            memkv::path::api_path(&path)
        )),
        Err(e) => Answer::failed(&e),
    }
}

/// `DELETE /v1/memory_stores/{store}`: the store with every memory and version; 404 when it
/// was never written.
pub fn delete_store(opened: &Opened, store: &str) -> Answer {
    if let Err(refused) = usable(opened) {
        return refused;
    }
    if opened.read_only {
        return Answer::failed(&Error::ReadOnly);
    }
    match opened.db.delete_store(store) {
        Ok(true) => Answer::json(&json!({"id": store, "type": "memory_store_deleted"})),
        Ok(false) => Answer::not_found(format!("no memory store {store:?}")),
        Err(e) => Answer::failed(&e),
    }
}

/// Every store with memories: `{"data": [{"id", "files", "bytes", "last_write", "expired_files"}]}`.
pub fn stores(opened: &Opened) -> Answer {
    if let Err(refused) = usable(opened) {
        return refused;
    }
    match opened.db.users() {
        Ok(users) => Answer::json(&json!({"data": users.iter().map(|u| json!({
            "id": u.user,
            "files": u.files,
            "bytes": u.bytes,
            "last_write": memkv::rfc3339_ms(u.last_write_ms),
            "expired_files": u.expired_files,
        })).collect::<Vec<_>>()})),
        Err(e) => Answer::failed(&e),
    }
}

/// Writes an export (the format of `memkv export`, docs/export-format.md) of `stores` (every
/// store when empty) to `file`, whole or not at all (a temporary file beside it, renamed).
pub fn export(opened: &Opened, stores: &[String], file: &Path) -> Answer {
    if let Err(refused) = usable(opened) {
        return refused;
    }
    let dir = match file.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let result = tempfile::NamedTempFile::new_in(dir)
        .map_err(|e| Answer::invalid(format!("{}: {e}", dir.display())))
        .and_then(|mut tmp| {
            let summary = opened
                .db
                .export(stores, tmp.as_file_mut(), &mut |_| {})
                .map_err(|e| Answer::failed(&e))?;
            tmp.as_file_mut()
                .flush()
                .and_then(|()| tmp.as_file().sync_all())
                .map_err(|e| Answer::error(500, "api_error", e.to_string()))?;
            tmp.persist(file)
                .map_err(|e| Answer::invalid(format!("{}: {}", file.display(), e.error)))?;
            // The new name is durable too before the answer says the export is written.
            std::fs::File::open(dir)
                .and_then(|d| d.sync_all())
                .map_err(|e| Answer::error(500, "api_error", format!("{}: {e}", dir.display())))?;
            Ok(summary)
        });
    match result {
        Ok(s) => Answer::json(&summary(&s)),
        Err(answer) => answer,
    }
}

/// Imports an export file: every store in it, in one transaction; `conflict` is `refuse` (the
/// default: a memory already there refuses the whole import), `skip` or `replace`.
pub fn import(opened: &Opened, file: &Path, conflict: Option<&str>) -> Answer {
    if let Err(refused) = usable(opened) {
        return refused;
    }
    if opened.read_only {
        return Answer::failed(&Error::ReadOnly);
    }
    let conflict = match conflict {
        None | Some("refuse") => Conflict::Refuse,
        Some("skip") => Conflict::Skip,
        Some("replace") => Conflict::Replace,
        Some(other) => {
            return Answer::invalid(format!(
                "conflict must be refuse, skip or replace, not {other:?}"
            ));
        }
    };
    match opened.db.import(file, conflict, &mut |_| {}) {
        Ok(s) => Answer::json(&summary(&s)),
        Err(e) => Answer::failed(&e),
    }
}

fn summary(s: &memkv::Summary) -> Value {
    json!({
        "files": s.files,
        "stores": s.users,
        "bytes": s.bytes,
        "versions": s.versions,
        "skipped": s.skipped,
        "replaced": s.replaced,
    })
}

/// Deletes the memories whose time-to-live has passed (with `dry_run`, only lists them):
/// `{"data": [{"memory_store_id", "path", "size", "last_used"}]}`.
pub fn expire(opened: &Opened, dry_run: bool) -> Answer {
    if let Err(refused) = usable(opened) {
        return refused;
    }
    if opened.read_only && !dry_run {
        return Answer::failed(&Error::ReadOnly);
    }
    match opened.db.expire(dry_run) {
        Ok(files) => Answer::json(&json!({"data": files.iter().map(|f| json!({
            "memory_store_id": f.user,
            "path": memkv::path::api_path(&f.path.to_string()),
            "size": f.size,
            "last_used": memkv::rfc3339_ms(f.last_used_ms),
        })).collect::<Vec<_>>()})),
        Err(e) => Answer::failed(&e),
    }
}

/// The versions of the memory at `path` (a model path, `/memories/…`), or of the whole store,
/// oldest first: `{"data": [...]}`, each as `memkv history --json` prints it.
pub fn history(opened: &Opened, store: &str, path: Option<&str>) -> Answer {
    if let Err(refused) = usable(opened) {
        return refused;
    }
    let user = match opened.db.user(store) {
        Ok(u) => u,
        Err(e) => return Answer::invalid(e.to_string()),
    };
    match user.history(path) {
        Ok(Ok(versions)) => Answer::json(&json!({
            "data": versions.iter().map(memkv_cli::version_json).collect::<Vec<_>>()
        })),
        Ok(Err(ApiRefusal::NotFound)) => Answer::not_found(match path {
            Some(p) => format!("no memory at {p} in store {store:?}"),
            None => format!("no memory store {store:?}"),
        }),
        Ok(Err(refusal)) => Answer::invalid(refusal.message()),
        Err(e) => Answer::failed(&e),
    }
}
