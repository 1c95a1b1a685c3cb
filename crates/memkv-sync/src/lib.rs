//! `memkv sync`: keeps a folder of memory files and a store of the memory-stores API (memkv's,
//! or any server that speaks it) identical, both ways, continuously.
//!
//! - Local changes are seen by a file-system watcher (`notify`: inotify, FSEvents,
//!   ReadDirectoryChangesW), debounced until a file is stable, and by a full scan at start and at
//!   an interval (a watcher can overflow). They are uploaded with a `content_sha256`
//!   precondition against the version last synced.
//! - Remote changes arrive through the store's change feed (a long poll) from a cursor kept on
//!   disk; a cursor the server no longer has starts a full reconciliation. A server without the
//!   feed is listed at an interval instead. Files are written atomically.
//! - Each file's last agreed state (the 3-way base) decides who changed what
//!   ([`engine`]'s table): nothing is lost, and nothing is uploaded twice.
//!
//! The layers, top down: [`run`] (the loop: watcher, feed, scans) → [`engine`] (one path's
//! decision) → [`api`] (HTTP), [`local`] (the folder), [`state`] (the bases) and [`status`].

pub mod api;
pub mod engine;
pub mod local;
pub mod rules;
pub mod run;
pub mod state;
pub mod status;

use std::path::{Path, PathBuf};
use std::time::Duration;

use sha2::{Digest, Sha256};

pub use api::ApiError;
pub use run::{Sync, once};
pub use status::Report;

/// What can stop a sync.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Api(#[from] ApiError),
    #[error("{0}")]
    Io(std::io::Error),
    /// The sync's own state cannot be used.
    #[error("the sync's state: {0}")]
    State(String),
    /// Another sync holds this state.
    #[error(
        "another memkv sync is running on this folder (its state {} is in use)",
        .0.display()
    )]
    Busy(PathBuf),
    /// The folder cannot be synced.
    #[error("{0}")]
    Folder(String),
}

/// One folder's sync.
#[derive(Debug, Clone)]
pub struct Config {
    /// The folder.
    pub folder: PathBuf,
    /// The server (`http://host:port`).
    pub url: String,
    /// The store's id.
    pub store: String,
    /// The API key.
    pub key: String,
    /// The sync's state folder (outside `folder`): [`default_state_dir`] by default.
    pub state: PathBuf,
    /// This machine's name, in conflict copies' names.
    pub host: String,
    /// How long a file must be left alone before it is uploaded.
    pub debounce: Duration,
    /// How often the whole folder is scanned besides the watcher.
    pub rescan: Duration,
    /// How often a server without the change feed is listed.
    pub poll: Duration,
    /// Files larger than this are not synced.
    pub max_file_bytes: u64,
    /// Every request but a long poll.
    pub timeout: Duration,
}

impl Config {
    /// A folder's sync with the defaults: state under the user's state folder, a 100 ms
    /// debounce, a scan a minute, a listing every 10 s without the feed, files up to 1 MiB.
    pub fn new(folder: &Path, url: &str, store: &str, key: &str) -> Config {
        Config {
            folder: folder.to_owned(),
            url: url.to_owned(),
            store: store.to_owned(),
            key: key.to_owned(),
            state: default_state_dir(folder, url, store),
            host: host_name(),
            debounce: Duration::from_millis(100),
            rescan: Duration::from_secs(60),
            poll: Duration::from_secs(10),
            max_file_bytes: 1 << 20,
            timeout: Duration::from_secs(30),
        }
    }
}

/// The state folder of `folder`'s sync with `store` at `url`: under `$XDG_STATE_HOME` (or
/// `~/.local/state`), `memkv/sync/NAME-HASH`, NAME the folder's name and HASH of all three.
pub fn default_state_dir(folder: &Path, url: &str, store: &str) -> PathBuf {
    let base = std::env::var_os("XDG_STATE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|h| PathBuf::from(h).join(".local/state"))
        })
        .or_else(|| std::env::var_os("LOCALAPPDATA").map(PathBuf::from))
        .unwrap_or_else(std::env::temp_dir);
    let mut h = Sha256::new();
    h.update(folder.as_os_str().as_encoded_bytes());
    h.update([0]);
    h.update(url.trim_end_matches('/').as_bytes());
    h.update([0]);
    h.update(store.as_bytes());
    let name: String = folder
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(40)
        .collect();
    base.join("memkv")
        .join("sync")
        .join(format!("{name}-{}", &hex::encode(h.finalize())[..12]))
}

/// This machine's name (`uname -n`), or `host`.
pub fn host_name() -> String {
    #[cfg(unix)]
    {
        let mut buf = [0u8; 256];
        // SAFETY: the buffer is valid for its length, and gethostname writes within it.
        let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
        if rc == 0 {
            let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
            if let Ok(name) = std::str::from_utf8(&buf[..end])
                && !name.is_empty()
            {
                return name.to_owned();
            }
        }
    }
    std::env::var("COMPUTERNAME").unwrap_or_else(|_| "host".to_owned())
}
