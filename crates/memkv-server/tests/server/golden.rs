//! PROTOCOL.md through HTTP: tests/it/golden.rs, the library's table of golden cases, compiled
//! here with a `Session` that POSTs every message to a real server over loopback.

mod util;

#[path = "../../../../tests/it/golden.rs"]
mod table;
