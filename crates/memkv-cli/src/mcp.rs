//! `memkv mcp`: the memory tool as an MCP server on stdin/stdout, backed by the database this
//! process opens, or forwarding to a running `memkv serve`.

use std::sync::Arc;

use memkv_mcp::{Forwarder, MemoryServer};

use crate::args::{Global, McpArgs};

pub fn run(global: &Global, args: &McpArgs) -> Result<(), Box<dyn std::error::Error>> {
    // Standard output is the protocol: every log line goes to standard error.
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("MEMKV_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    let server = match (&args.url, &args.api_key) {
        (Some(url), Some(key)) => MemoryServer::remote(Forwarder::new(url, key, &args.user)?),
        (Some(_), None) => return Err("--url needs --api-key (or MEMKV_API_KEY)".into()),
        (None, _) => {
            let path = global.db_path()?;
            if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
                std::fs::create_dir_all(parent)
                    .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
            }
            let store = Arc::new(global.builder().open(&path)?);
            // This process is one MCP session: its writes are recorded as made by it.
            let session = memkv::Actor::Session(format!("mcp-stdio:{}", std::process::id()));
            MemoryServer::local(store.owned_user(&args.user)?.with_actor(Some(session)))
        }
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(memkv_mcp::serve_stdio(server))
}
