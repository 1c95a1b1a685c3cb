//! `memkv serve` and `memkv keys`: thin over the memkv-server crate.

use std::io::{self, Write};
use std::sync::Arc;

use memkv_server::keys::{KeyFile, Scope};

use crate::args::{Global, KeysCommand, ServeArgs};

type Result<T = ()> = std::result::Result<T, Box<dyn std::error::Error>>;

pub fn serve(global: &Global, args: &ServeArgs) -> Result {
    // Declared first, so dropped last: every line is written out, whatever `serve` returns.
    let log = crate::logbuf::LogBuffer::start()?;
    let lines = log.writer_factory();
    tracing_subscriber::fmt()
        .with_writer(lines)
        .with_ansi(false)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("MEMKV_LOG")
                // memkv's own lines at info; rmcp's (whole Debug structs of each MCP session
                // at info) only from warn.
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,rmcp=warn")),
        )
        .init();
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
    config.shutdown_grace = args.shutdown_grace;
    config.pin_workers = args.pin_workers;
    config.no_auth = args.no_auth;
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
    let file = KeyFile::new(global.keys_path()?);
    let mut out = io::stdout().lock();
    match command {
        KeysCommand::Add { store, admin } => {
            let scope = match (store, admin) {
                (Some(name), _) => {
                    // The rules for store names are the library's rules for user ids.
                    memkv::Database::in_memory()?.user(name)?;
                    Scope::Store(name.clone())
                }
                (None, true) => Scope::Admin,
                (None, false) => unreachable!("clap requires --store or --admin"),
            };
            let (record, key) = file.add(&scope)?;
            let what = match &scope {
                Scope::Admin => "every store (admin)".to_owned(),
                Scope::Store(s) => format!("store {s:?}"),
            };
            writeln!(
                out,
                "added {} for {what} to {}; the key is shown only now:",
                record.id,
                file.path().display()
            )?;
            writeln!(out, "{key}")?;
        }
        KeysCommand::List => {
            writeln!(out, "{:<16}  {:<20}  SCOPE", "ID", "CREATED")?;
            for r in file.list()? {
                let scope = match &r.store {
                    None => "admin".to_owned(),
                    Some(s) => format!("store {s:?}"),
                };
                writeln!(out, "{:<16}  {:<20}  {scope}", r.id, r.created)?;
            }
        }
        KeysCommand::Revoke { id } => {
            if !file.revoke(id)? {
                return Err(format!("no key {id:?} in {}", file.path().display()).into());
            }
            writeln!(out, "revoked {id}")?;
        }
    }
    Ok(())
}
