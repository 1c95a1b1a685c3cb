//! Backup and restore: `memkv export` / `memkv import`, in the JSON Lines format of
//! `docs/export-format.md`, and migration from and to plain directories.
//!
//! An export is one read snapshot, streamed. An import is verified whole first (format, every
//! line, every checksum, the trailer, every path and limit), then applied in one write
//! transaction: all or nothing. Both go through the same path rules, limits, secrets policy and
//! transactions as the six commands.

//!
//! - `export`: [`Store::export`], the JSON Lines writer.
//! - `import`: [`Store::import`], the two passes (verify, then apply) and the conflict policy.
//! - `dir`: [`Store::import_dir`] and [`Store::export_dir`], plain directory trees.

mod dir;
mod export;
mod import;

use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::Error;
use crate::layout::FileMeta;
use crate::path::MemoryPath;

/// The `format` of an export's header line.
pub const EXPORT_FORMAT: &str = "memkv-export";
/// The version of the export format this build writes and reads.
pub const EXPORT_VERSION: u64 = 1;

#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
enum Line {
    Header {
        format: String,
        version: u64,
        created_ms: i64,
        created: String,
        memkv_version: String,
    },
    File {
        user: String,
        path: String,
        content: String,
        created_ms: i64,
        modified_ms: i64,
        accessed_ms: i64,
        sha256: String,
    },
    Trailer {
        files: u64,
        users: u64,
        bytes: u64,
        sha256: String,
    },
}

/// What an export or import moved.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Summary {
    /// Files written.
    pub files: u64,
    /// Distinct users among them.
    pub users: u64,
    /// Bytes of content.
    pub bytes: u64,
    /// Files left alone because they existed (`--skip-existing`).
    pub skipped: u64,
    /// Existing files overwritten (`--replace`).
    pub replaced: u64,
}

/// How far a long operation has come, for progress bars.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Progress {
    /// What is going on: `exporting`, `verifying`, `importing`.
    pub phase: &'static str,
    /// Files done in this phase.
    pub done: u64,
    /// Files in all, when known.
    pub total: Option<u64>,
}

/// What an import does with a file that already exists.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Conflict {
    /// Refuse the whole import (the default).
    #[default]
    Refuse,
    /// Keep the existing file, import the rest.
    Skip,
    /// Overwrite the existing file (a directory, or a file in the way of a path, still refuses).
    Replace,
}

/// A file an import from a directory left out, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// The file, relative to the directory.
    pub path: PathBuf,
    /// Why it was left out.
    pub reason: String,
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn sha256_hex(data: &[u8]) -> String {
    hex(&Sha256::digest(data))
}

fn io_error(path: &Path) -> impl FnOnce(io::Error) -> Error + '_ {
    move |source| Error::Io {
        path: path.to_owned(),
        source,
    }
}

fn import_error(line: u64, reason: impl Into<String>) -> Error {
    Error::Import {
        line,
        reason: reason.into(),
    }
}

/// One file about to be imported, from a line or from a directory.
struct Entry {
    user: String,
    path: MemoryPath,
    content: String,
    meta: FileMeta,
}
