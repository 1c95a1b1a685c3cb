//! Backup and restore: `memkv export` / `memkv import`, in the JSON Lines format of
//! `docs/export-format.md`, and migration from and to plain directories.
//!
//! An export is one read snapshot, streamed. An import is verified whole first (format, every
//! line, every checksum, the trailer, every path and limit), then applied in one write
//! transaction: all or nothing. Both go through the same path rules, limits, secrets policy and
//! transactions as the six commands.
//!
//! - `export`: [`crate::Database::export`], the JSON Lines writer.
//! - `import`: [`crate::Database::import`], the two passes (verify, then apply) and the conflict
//!   policy.
//! - `dir`: [`crate::Database::import_dir`] and [`crate::Database::export_dir`], plain directory
//!   trees.

pub(crate) mod dir;
pub(crate) mod export;
mod history;
pub(crate) mod identity;
pub(crate) mod import;
mod source;
pub(crate) mod verify;

pub use export::ExportFile;
pub use source::ImportSource;

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::Error;
use crate::layout::FileMeta;
use crate::limits::Limits;
use crate::path::MemoryPath;

/// The `format` of an export's header line.
pub const EXPORT_FORMAT: &str = "memkv-export";
/// The version of the export format this build writes. It reads this one and every earlier
/// one: version 1 (files only), version 2 (stores, memory ids and versions too), version 3 (the
/// change-log position, incremental exports) and version 4 (the database's identity).
pub const EXPORT_VERSION: u64 = 4;

/// The first version with store and version lines, and ids on file lines.
const HISTORY_VERSION: u64 = 2;
/// The version whose header says where in the change log it stands, and which has
/// incremental exports.
const INCREMENTAL_VERSION: u64 = 3;
/// The version whose header names the database it was taken from.
const IDENTITY_VERSION: u64 = 4;

#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
enum Line {
    Header {
        format: String,
        version: u64,
        created_ms: i64,
        created: String,
        memkv_version: String,
        /// Version 3: the change log's last `seq` in the snapshot (what the export covers up
        /// to).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        seq: Option<u64>,
        /// Version 3, an incremental export: the `seq` it starts after (it covers the changes
        /// `base_seq + 1 ..= seq`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        base_seq: Option<u64>,
        /// Version 4: the identity of the database it was taken from (`identity`), when it
        /// has one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        database: Option<String>,
    },
    /// Version 3, in an incremental export: a store deleted in its range.
    StoreDeleted { user: String },
    /// A store's own record (version 2), before its files and versions.
    Store {
        user: String,
        name: String,
        description: String,
        metadata: BTreeMap<String, String>,
        created_ms: i64,
        updated_ms: i64,
        archived_ms: Option<i64>,
        next_seq: u64,
        pruned_versions: u64,
        pruned_bytes: u64,
        /// Version 4: the last number of the store's feed (its own numbering of its change-log
        /// entries), so that a restore goes on from it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        feed_seq: Option<u64>,
    },
    File {
        user: String,
        path: String,
        /// The memory's id and its current version's (version 2).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        memory: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        version: Option<String>,
        content: String,
        created_ms: i64,
        modified_ms: i64,
        accessed_ms: i64,
        sha256: String,
    },
    /// One kept version of a store (version 2), after the store's files, oldest first.
    Version(history::VersionLine),
    Trailer {
        files: u64,
        users: u64,
        /// Version lines (version 2).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        versions: Option<u64>,
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
    /// Versions written (an export), or restored (an import of a version-2 export).
    pub versions: u64,
    /// Stores of a version-2 export that already existed in the importing database: their
    /// files were imported like a version-1 export's (new versions by the operator, under the
    /// conflict policy), their ids and versions were not.
    pub merged: u64,
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
    /// Keep the existing file, import the rest (a directory, or a file in the way of a path,
    /// still refuses: skipping it would silently drop the file).
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

/// `path: reason`, the path with control and format characters escaped (safe for a terminal).
impl fmt::Display for Skipped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", escape_path(&self.path), self.reason)
    }
}

/// A host file name made safe to print: control characters (ESC, CR, LF, …), format characters
/// (bidi overrides, zero-width), line separators and backslashes escaped as `\u{…}`/`\\`; bytes
/// that are not UTF-8 as `\x..`.
pub(crate) fn escape_path(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    use unicode_properties::{GeneralCategory, UnicodeGeneralCategory};
    let mut out = String::new();
    for chunk in path.as_os_str().as_bytes().utf8_chunks() {
        for c in chunk.valid().chars() {
            if c == '\\' {
                out.push_str("\\\\");
            } else if c.is_control()
                || matches!(
                    c.general_category(),
                    GeneralCategory::Format
                        | GeneralCategory::LineSeparator
                        | GeneralCategory::ParagraphSeparator
                )
            {
                out.extend(c.escape_unicode());
            } else {
                out.push(c);
            }
        }
        for b in chunk.invalid() {
            out.push_str("\\x");
            out.push_str(&hex::encode([*b]));
        }
    }
    out
}

/// The longest line an import reads: a file line whose content is at the file-size limit,
/// JSON-escaped at worst six bytes per byte (`\u0000`), plus its path, user and other fields.
/// Past it the import stops reading, so input without newlines (`/dev/zero`) stays bounded.
pub(crate) fn max_line_bytes(limits: &Limits) -> usize {
    let file = usize::try_from(limits.max_file_bytes).unwrap_or(usize::MAX);
    file.saturating_mul(6).saturating_add(64 * 1024)
}

/// The latest time an import accepts: this long after the importing machine's clock (for
/// clocks that disagree a little). A time far in the future would make a file immune to expiry.
pub(crate) const MAX_CLOCK_SKEW_MS: i64 = 24 * 3600 * 1000;

fn sha256_hex(data: &[u8]) -> String {
    hex::encode(Sha256::digest(data))
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
