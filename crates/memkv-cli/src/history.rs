//! `history`, `restore`, `redact`: a store's versions, thin over the library's history API.

use std::io::{self, Write};

use memkv::{Actor, ApiRefusal, Database, MemoryStore, Version, VersionId};
use serde_json::{Value, json};

use crate::Usage;
use crate::admin::{open_for_writing, open_read_only};
use crate::args::{Global, HistoryArgs, VersionArgs};

type Result<T = ()> = std::result::Result<T, Box<dyn std::error::Error>>;

/// `user:NAME`, `session:NAME`, `api_key:ID`, or `-` when nobody was recorded (expiry).
fn actor_text(actor: Option<&Actor>) -> String {
    match actor {
        None => "-".to_owned(),
        Some(Actor::User(id)) => format!("user:{id}"),
        Some(Actor::Session(id)) => format!("session:{id}"),
        Some(Actor::ApiKey(id)) => format!("api_key:{id}"),
    }
}

fn actor_json(actor: Option<&Actor>) -> Value {
    match actor {
        None => Value::Null,
        Some(Actor::User(id)) => json!({"type": "user", "id": id}),
        Some(Actor::Session(id)) => json!({"type": "session", "id": id}),
        Some(Actor::ApiKey(id)) => json!({"type": "api_key", "id": id}),
    }
}

/// The store `user`, which must exist (have written at least once).
fn existing<'s>(store: &'s Database, user: &str) -> Result<MemoryStore<'s>> {
    let handle = store.user(user)?;
    if store.store_info(user)?.is_none() {
        return Err(format!("no such user: {user:?} has no memories and no history").into());
    }
    Ok(handle)
}

/// The version id `text`, or a usage error.
fn version_id(text: &str) -> Result<VersionId> {
    text.parse().map_err(|_| {
        Usage(format!(
            "{text:?} is not a version id (memver_ and 16 hex digits, as `memkv history` shows)"
        ))
        .into()
    })
}

/// A refusal of the library, worded for the operator.
fn refused(user: &str, id: VersionId, refusal: &ApiRefusal) -> Box<dyn std::error::Error> {
    match refusal {
        ApiRefusal::NotFound => format!(
            "no version {id} of user {user:?} (never written, or pruned by the history retention)"
        )
        .into(),
        other => format!("{id}: {}", other.message()).into(),
    }
}

pub fn history(global: &Global, args: &HistoryArgs) -> Result {
    let store = open_read_only(global)?;
    let handle = existing(&store, &args.user)?;
    let versions = match handle.history(args.path.as_deref())? {
        Ok(versions) => versions,
        Err(ApiRefusal::NotFound) => {
            let path = args.path.as_deref().unwrap_or_default();
            let dir = memkv::MemoryPath::parse(path).is_ok_and(|p| {
                p.is_root()
                    || handle
                        .files()
                        .is_ok_and(|files| files.iter().any(|f| f.path.ancestors().any(|a| a == p)))
            });
            let what = if dir {
                format!(
                    "{path} is a directory of user {:?}, not a memory",
                    args.user
                )
            } else {
                format!("no memory at {path} for user {:?}", args.user)
            };
            return Err(format!(
                "{what} (`memkv history --user {}` lists every version, deleted memories' included)",
                args.user
            )
            .into());
        }
        Err(ApiRefusal::InvalidPath { reason, .. }) => return Err(Usage(reason).into()),
        Err(other) => return Err(other.message().into()),
    };
    let mut out = io::BufWriter::new(io::stdout().lock());
    if args.json {
        for v in &versions {
            let mut line = version_json(v);
            if args.content {
                line["content"] = json!(v.content);
            }
            serde_json::to_writer(&mut out, &line)?;
            out.write_all(b"\n")?;
        }
    } else {
        writeln!(
            out,
            "{:<23}  {:<20}  {:<8}  {:>8}  {:<12}  {:<20}  PATH",
            "VERSION", "TIME", "OP", "SIZE", "SHA256", "ACTOR"
        )?;
        for v in &versions {
            writeln!(out, "{}", crate::text::safe(&version_row(v)))?;
        }
    }
    out.flush()?;
    Ok(())
}

/// One version as a line of columns; a redacted one says when and by whom instead of its path.
fn version_row(v: &Version) -> String {
    let dash = || "-".to_owned();
    let where_ = match (&v.redacted, &v.path) {
        (Some(r), _) => format!(
            "(redacted {} by {})",
            memkv::utc(r.at_ms),
            actor_text(r.by.as_ref())
        ),
        (None, Some(path)) => path.clone(),
        (None, None) => dash(),
    };
    format!(
        "{:<23}  {:<20}  {:<8}  {:>8}  {:<12}  {:<20}  {where_}",
        v.id.to_string(),
        memkv::utc(v.created_ms),
        v.operation.as_str(),
        v.size.map_or_else(dash, |s| s.to_string()),
        v.sha256.map_or_else(dash, |h| hex::encode(&h[..6])),
        actor_text(v.actor.as_ref()),
    )
}

/// A version as `memkv history --json` prints it (and the in-process bindings answer it).
pub fn version_json(v: &Version) -> Value {
    json!({
        "id": v.id.to_string(),
        "memory": v.memory.to_string(),
        "operation": v.operation.as_str(),
        "time": memkv::utc(v.created_ms),
        "created_ms": v.created_ms,
        "path": v.path,
        "size": v.size,
        "sha256": v.sha256.map(hex::encode),
        "actor": actor_json(v.actor.as_ref()),
        "redacted": v.redacted.as_ref().map(|r| json!({
            "time": memkv::utc(r.at_ms),
            "at_ms": r.at_ms,
            "by": actor_json(r.by.as_ref()),
        })),
    })
}

pub fn restore(global: &Global, args: &VersionArgs) -> Result {
    let id = version_id(&args.version)?;
    let store = open_for_writing(global)?;
    let handle = existing(&store, &args.user)?.with_actor(Some(Actor::operator()));
    let Some(old) = handle.version(id, false)? else {
        return Err(refused(&args.user, id, &ApiRefusal::NotFound));
    };
    let before = handle.memory(old.memory, false)?.map(|m| m.version);
    let memory = handle
        .restore(id)?
        .map_err(|refusal| refused(&args.user, id, &refusal))?;
    let mut out = io::stdout().lock();
    if before == Some(memory.version) {
        let line = format!(
            "unchanged: {} at {} already has the content of {id} ({})",
            memory.id, memory.path, memory.version
        );
        writeln!(out, "{}", crate::text::safe(&line))?;
    } else {
        let line = format!(
            "restored {id} as {} of {} at {}",
            memory.version, memory.id, memory.path
        );
        writeln!(out, "{}", crate::text::safe(&line))?;
    }
    Ok(())
}

pub fn redact(global: &Global, args: &VersionArgs) -> Result {
    let id = version_id(&args.version)?;
    let store = open_for_writing(global)?;
    let handle = existing(&store, &args.user)?.with_actor(Some(Actor::operator()));
    let Some(old) = handle.version(id, false)? else {
        return Err(refused(&args.user, id, &ApiRefusal::NotFound));
    };
    let mut out = io::stdout().lock();
    if let Some(r) = &old.redacted {
        let line = format!(
            "unchanged: {id} was redacted at {} by {}",
            memkv::utc(r.at_ms),
            actor_text(r.by.as_ref())
        );
        writeln!(out, "{}", crate::text::safe(&line))?;
        return Ok(());
    }
    let done = handle
        .redact(id)?
        .map_err(|refusal| refused(&args.user, id, &refusal))?;
    let erased = match (&old.path, old.size, old.sha256) {
        (Some(path), Some(size), Some(sha)) => {
            format!(
                "path {path}, {size} bytes of content (sha256 {})",
                hex::encode(sha)
            )
        }
        (Some(path), _, _) => format!("path {path} (a deletion: no content)"),
        _ => "nothing left to erase".to_owned(),
    };
    let by = done.redacted.as_ref().map(|r| r.by.as_ref());
    let line = format!(
        "redacted {id} of {} ({}): erased its {erased}; recorded as redacted by {}",
        old.memory,
        old.operation.as_str(),
        actor_text(by.flatten())
    );
    writeln!(out, "{}", crate::text::safe(&line))?;
    Ok(())
}
