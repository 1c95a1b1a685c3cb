//! memkv serve's integration tests, in one binary (each test binary costs a link of the
//! server): the golden table over HTTP (`golden`) and over MCP (`golden_mcp`), the change feed
//! and its webhooks (`changes`), the memory-stores API's statuses and scoping
//! (`memory_stores`), several servers on one database (`fleet`). Each starts real servers on
//! loopback.

// The library's golden table (tests/it/golden.rs) is compiled twice on purpose: once with the
// HTTP session (`golden`), once with the MCP one (`golden_mcp`).
#![allow(clippy::duplicate_mod)]

mod client;
mod served;

/// The library's test helpers, for their backend factory.
#[allow(dead_code, unused_imports)]
#[path = "../../../../tests/it/util.rs"]
mod library;

mod changes;
mod fleet;
mod golden;
mod golden_mcp;
mod limits;
mod memory_stores;
