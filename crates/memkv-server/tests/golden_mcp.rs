//! PROTOCOL.md through MCP: tests/it/golden.rs, the library's table of golden cases, compiled
//! here with a `Session` whose every command is a `tools/call` of rmcp's own client to `/mcp` on
//! a real server over loopback (streamable HTTP).

#[path = "golden_mcp/util.rs"]
mod util;

#[path = "../../../tests/it/golden.rs"]
mod golden;
