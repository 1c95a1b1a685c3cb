//! memkv's memory tool as an MCP server, on the official Rust SDK (`rmcp`).
//!
//! Two tools: `memory`, whose input schema is the six commands of `memory_20250818`, and
//! `memory_search`, memkv's search over the same store (defined by the library). Each result is
//! memkv's exact answer as one text item, `isError` set on the model's mistakes. The answer
//! always comes from [`memkv::protocol`], so MCP says byte for byte what `memkv exec` and the
//! HTTP tool route say.
//!
//! # Layout
//! - [`tool`]: the two tools' definitions and the shape of their results.
//! - [`MemoryServer`] (`server`): the rmcp handler, backed by a store this process owns
//!   ([`MemoryServer::local`]) or by a running `memkv serve` ([`MemoryServer::remote`], through
//!   [`forward`]). A redb file has exactly one owner, so a second process forwards.
//! - [`serve_stdio`]: the stdio transport (`memkv mcp`): one message a line, every bad line
//!   answered ([`stdio`]).
//! - [`http`]: streamable HTTP, mounted by `memkv serve` at `/mcp`.

pub mod forward;
pub mod http;
mod server;
pub mod stdio;
pub mod tool;

pub use forward::{ForwardError, Forwarder};
pub use server::MemoryServer;

use rmcp::ServiceExt;

/// The longest line [`serve_stdio`] reads when forwarding (the server's limits are its own):
/// rmcp's default.
pub const FORWARD_MAX_LINE: usize = rmcp::transport::async_rw::DEFAULT_MAX_LINE_LENGTH;

/// The longest line [`serve_stdio`] reads for a store with `limits`: the largest valid
/// command, with room for the JSON-RPC envelope.
pub fn max_line(limits: &memkv::Limits) -> usize {
    memkv::protocol::max_message_bytes(limits).saturating_add(64 * 1024)
}

/// Serves `server` over standard input and output until the client closes the stream, reading
/// lines of at most `max_line` bytes. Nothing else may write to standard output meanwhile: it
/// carries the protocol.
///
/// # Errors
/// The transport failed to start or ended in error.
pub async fn serve_stdio(
    server: MemoryServer,
    max_line: usize,
) -> Result<(), Box<dyn std::error::Error>> {
    let transport = stdio::LineTransport::new(
        tokio::io::BufReader::new(tokio::io::stdin()),
        tokio::io::stdout(),
        max_line,
    );
    let running = server.serve(transport).await?;
    running.waiting().await?;
    Ok(())
}
