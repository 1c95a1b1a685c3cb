//! `memkv mcp`: the memory tool as an MCP server on stdin/stdout, backed by the database this
//! process opens, or forwarding to a running `memkv serve`.

use std::sync::Arc;

use memkv_mcp::{Forwarder, MemoryServer};

use crate::args::{Global, McpArgs};

pub fn run(global: &Global, args: &McpArgs) -> Result<(), Box<dyn std::error::Error>> {
    // Standard output is the protocol: every log line goes to standard error.
    crate::logs::to_stderr("warn");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (server, max_line) = match (&args.url, &args.api_key) {
        (Some(url), Some(key)) => {
            let forwarder = Forwarder::new(url, key, &args.user)?;
            // A bad key or URL is said now, at start, not at the first tool call.
            runtime.block_on(forwarder.check())?;
            (MemoryServer::remote(forwarder), memkv_mcp::FORWARD_MAX_LINE)
        }
        (Some(_), None) => return Err("--url needs --api-key (or MEMKV_API_KEY)".into()),
        (None, _) => {
            let path = global.db_path()?;
            global.create_db_dir()?;
            let store = Arc::new(global.builder().open(&path)?);
            // This process is one MCP session: its writes are recorded as made by it.
            let session = memkv::Actor::Session(format!("mcp-stdio:{}", std::process::id()));
            let max_line = memkv_mcp::max_line(store.limits());
            let user = store.owned_user(&args.user)?.with_actor(Some(session));
            (MemoryServer::local(user), max_line)
        }
    };
    runtime.block_on(memkv_mcp::serve_stdio(server, max_line))
}
