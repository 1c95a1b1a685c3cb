//! memkv's memory tool as an MCP server, on the official Rust SDK (`rmcp`).
//!
//! One tool, `memory`, whose input schema is the six commands of `memory_20250818` and whose
//! result is memkv's exact answer as one text item, `isError` set on the model's mistakes. The
//! answer always comes from [`memkv::protocol`], so MCP says byte for byte what `memkv exec` and
//! the HTTP tool route say.
//!
//! # Layout
//! - [`tool`]: the tool's definition and the shape of its result.
//! - [`MemoryServer`] (`server`): the rmcp handler, backed by a store this process owns
//!   ([`MemoryServer::local`]) or by a running `memkv serve` ([`MemoryServer::remote`], through
//!   [`forward`]). A redb file has exactly one owner, so a second process forwards.
//! - [`serve_stdio`]: the stdio transport (`memkv mcp`).
//! - [`http`]: streamable HTTP, mounted by `memkv serve` at `/mcp`.

pub mod forward;
pub mod http;
mod server;
pub mod tool;

pub use forward::{ForwardError, Forwarder};
pub use server::MemoryServer;

use rmcp::ServiceExt;

/// Serves `server` over standard input and output until the client closes the stream. Nothing
/// else may write to standard output meanwhile: it carries the protocol.
///
/// # Errors
/// The transport failed to start or ended in error.
pub async fn serve_stdio(server: MemoryServer) -> Result<(), Box<dyn std::error::Error>> {
    let running = server.serve(rmcp::transport::io::stdio()).await?;
    running.waiting().await?;
    Ok(())
}
