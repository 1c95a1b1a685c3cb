//! Helpers shared by the CLI's process tests (`cli.rs`, `ops.rs`).

#![allow(dead_code)]

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// The `memkv` binary on database `db`, with `MEMKV_DB` cleared.
pub fn memkv(db: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_memkv"));
    c.arg("--db").arg(db).env_remove("MEMKV_DB");
    c
}

/// Runs `command` with `input` on its standard input, capturing both outputs.
pub fn run_with_input(command: &mut Command, input: &[u8]) -> Output {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A process that fails at start (a locked database, say) may exit before reading its input.
    match child.stdin.take().unwrap().write_all(input) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        other => other.unwrap(),
    }
    child.wait_with_output().unwrap()
}
