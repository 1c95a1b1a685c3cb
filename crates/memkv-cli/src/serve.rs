//! `memkv serve` and `memkv keys`: thin over the memkv-server crate.

use std::io::{self, Write};
use std::sync::Arc;

use memkv::NewKey;

use crate::remote::now_ms;
use memkv_server::keys::{KeyFile, Scope};

use crate::args::{Global, KeysCommand, ServeArgs};

type Result<T = ()> = std::result::Result<T, Box<dyn std::error::Error>>;

pub fn serve(global: &Global, args: &ServeArgs) -> Result {
    // Declared first, so dropped last: every line is written out, whatever `serve` returns.
    let log = crate::logbuf::LogBuffer::start()?;
    let lines = log.writer_factory();
    let logs = tracing_subscriber::fmt()
        .with_writer(lines)
        .with_ansi(false)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("MEMKV_LOG")
                // memkv's own lines at info; rmcp's (whole Debug structs of each MCP session
                // at info) only from warn.
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,rmcp=warn")),
        );
    if args.log_format == "json" {
        // One object per line: timestamp, level, target, fields (message among them).
        logs.json().flatten_event(true).init();
    } else {
        logs.init();
    }
    let path = global.db_path()?;
    let keys = global.keys_path()?;
    global.create_db_dir()?;
    let store = Arc::new(global.builder().open(&path)?);
    // The location, never the URL as given: it may hold a password.
    let location = store.location().to_owned();
    let mut config = memkv_server::Config::new(args.listen, keys);
    config.max_in_flight = args.max_in_flight.max(1);
    config.max_connections = args.max_connections.max(1);
    config.max_blocks = args.max_blocks.max(1);
    config.header_timeout = args.header_timeout;
    config.body_timeout = args.body_timeout;
    config.max_import_bytes = args.max_import_bytes;
    config.shutdown_grace = args.shutdown_grace;
    config.drain_delay = args.drain_delay;
    config.console_idle = args.console_idle;
    config.pin_workers = args.pin_workers;
    config.no_auth = args.no_auth;
    config.rate_limit_key = args.rate_limit_key;
    config.rate_limit_store = args.rate_limit_store;
    config.webhooks = memkv_server::webhooks::WebhookOptions {
        timeout: args.webhook_timeout,
        retry_base: args.webhook_retry_base,
        retry_max: args.webhook_retry_max.max(args.webhook_retry_base),
        allow_private: args.webhook_allow_private,
    };
    if !args.mcp_allow_host.is_empty() {
        config.mcp.allowed_hosts = args.mcp_allow_host.clone();
        if args.mcp_allow_host.iter().any(|h| h == "*") {
            config.mcp.allowed_hosts.clear();
        }
    }
    if !args.mcp_allow_origin.is_empty() {
        config.mcp.allowed_origins = args.mcp_allow_origin.clone();
    }
    memkv_server::run(store, config, |addr| {
        let mut out = io::stdout().lock();
        let _ = writeln!(out, "listening on http://{addr}");
        let _ = out.flush();
        tracing::info!(%addr, db = %location, "serving");
    })?;
    Ok(())
}

pub fn keys(global: &Global, command: &KeysCommand) -> Result {
    if let KeysCommand::List {
        json,
        url: Some(url),
        api_key: Some(key),
    } = command
    {
        return crate::remote::keys_list(url, key, *json);
    }
    let file = global.keys_path()?.map(KeyFile::new);
    let path = global.db_path()?;
    // A key memkv would refuse is refused before anything is opened or created.
    let new = match command {
        KeysCommand::Add { .. } => Some(new_key(command)?),
        _ => None,
    };
    let opened = match command {
        KeysCommand::Add { .. } => {
            global.create_db_dir()?;
            global.builder().open(&path)
        }
        _ => global.builder().open_existing(&path),
    };
    let db = match opened {
        Ok(db) => db,
        // A running server holds the file: a key (or a revocation) goes to its keys file,
        // which the server imports within a second.
        Err(memkv::Error::Locked { .. })
            if file.is_some() && !matches!(command, KeysCommand::List { .. }) =>
        {
            return keys_beside_server(file.as_ref().expect("checked"), command, new.as_ref());
        }
        Err(e @ memkv::Error::Locked { .. }) => {
            return Err(format!(
                "{e}; a running `memkv serve` lists its keys: `memkv keys list --url URL --api-key ADMIN_KEY` (GET /v1/keys)"
            )
            .into());
        }
        Err(e) => return Err(e.into()),
    };
    if let Some(f) = &file
        && let Some(done) = f.import_into(&db)?
    {
        eprintln!(
            "memkv: imported {} key(s) and {} revocation(s) from {} into the database; the file is now {}",
            done.added,
            done.revoked,
            f.path().display(),
            done.renamed_to.display()
        );
    }
    let mut out = io::stdout().lock();
    match command {
        KeysCommand::Add { .. } => {
            let new = new.expect("made above");
            let (record, key) = db.add_key(&new)?;
            writeln!(
                out,
                "added {} for {}; the key is shown only now:",
                record.id,
                describe(&new)
            )?;
            writeln!(out, "{key}")?;
        }
        KeysCommand::List { json, .. } => {
            let keys: Vec<serde_json::Value> = db
                .api_keys()?
                .iter()
                .map(memkv_server::api_key_json)
                .collect();
            crate::remote::print_keys(&mut out, &keys, *json)?;
        }
        KeysCommand::Revoke { id } => {
            if !db.revoke_key(id)? {
                return Err(format!("no key {id:?} in {}", db.location()).into());
            }
            writeln!(out, "revoked {id}")?;
        }
    }
    Ok(())
}

/// `keys add` or `keys revoke` while a server holds the database: through its keys file.
fn keys_beside_server(file: &KeyFile, command: &KeysCommand, new: Option<&NewKey>) -> Result {
    let mut out = io::stdout().lock();
    match command {
        KeysCommand::Add { .. } => {
            let new = new.expect("made for keys add");
            let (record, key) = file.add(new)?;
            writeln!(
                out,
                "added {} for {} to {} (the database is open in a running server, which imports it within a second); the key is shown only now:",
                record.id,
                describe(new),
                file.path().display()
            )?;
            writeln!(out, "{key}")?;
        }
        KeysCommand::Revoke { id } => {
            if !memkv::keys::valid_id(id) {
                return Err(format!("{id:?} is not a key id (key_ and 12 hex digits)").into());
            }
            file.revoke(id)?;
            writeln!(
                out,
                "revoking {id}: written to {} (the database is open in a running server, which applies it within a second)",
                file.path().display()
            )?;
        }
        KeysCommand::List { .. } => unreachable!("listed only from the database"),
    }
    Ok(())
}

fn new_key(command: &KeysCommand) -> Result<NewKey> {
    let KeysCommand::Add {
        store,
        admin,
        read_only,
        label,
        expires,
    } = command
    else {
        unreachable!("only for keys add")
    };
    let scope = match (store, admin) {
        (Some(name), _) => Scope::Store {
            store: name.clone(),
            read_only: *read_only,
        },
        (None, true) => Scope::Admin,
        (None, false) => unreachable!("clap requires --store or --admin"),
    };
    let expires_ms =
        expires.map(|d| now_ms().saturating_add(i64::try_from(d.as_millis()).unwrap_or(i64::MAX)));
    if let Some(name) = scope.store() {
        // The rules for store names are the library's rules for user ids.
        memkv::Database::in_memory()?.user(name)?;
    }
    Ok(NewKey {
        scope,
        label: label.clone(),
        expires_ms,
    })
}

fn describe(new: &NewKey) -> String {
    let mut what = match &new.scope {
        Scope::Admin => "every store (admin)".to_owned(),
        Scope::Store { store, read_only } => {
            format!(
                "store {store:?}{}",
                if *read_only { ", read-only" } else { "" }
            )
        }
    };
    if !new.label.is_empty() {
        what.push_str(&format!(", label {:?}", new.label));
    }
    if let Some(at) = new.expires_ms {
        what.push_str(&format!(", expiring {}", memkv::utc(at)));
    }
    what
}
