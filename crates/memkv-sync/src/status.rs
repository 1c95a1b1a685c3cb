//! What a sync reports about itself: `status.json` in its state folder, rewritten (atomically)
//! as it works, and read by `memkv sync status` while the sync runs (the state file itself is
//! held by the running sync).

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// The report's file in the state folder.
pub const STATUS_FILE: &str = "status.json";
/// Conflicts and errors kept in the report (the newest).
const KEPT: usize = 50;

/// Milliseconds since the epoch, now.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Now as `YYYYMMDD-HHMMSS` (UTC), for conflict copies' names.
pub fn stamp() -> String {
    let t = memkv::utc(now_ms());
    let digits: String = t.chars().filter(char::is_ascii_digit).collect();
    format!("{}-{}", &digits[..8], &digits[8..14])
}

fn now() -> String {
    memkv::rfc3339_ms(now_ms())
}

/// A conflict: the memory kept the name, the file became `copy`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Conflict {
    pub at: String,
    pub path: String,
    pub copy: String,
}

/// Something the sync could not do, and when.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Event {
    pub at: String,
    pub what: String,
}

/// A file or memory left out, and why.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Left {
    pub path: String,
    pub why: String,
}

/// The report.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Report {
    pub folder: PathBuf,
    pub url: String,
    pub store: String,
    /// The process running the sync.
    pub pid: u32,
    /// Whether it still runs (false once it ended cleanly; a killed sync leaves `true`, and
    /// `memkv sync status` tells by the pid).
    pub running: bool,
    /// Whether the last request reached the server.
    pub online: bool,
    /// How remote changes are followed: `feed` (long poll) or `listing` (at an interval).
    pub following: String,
    /// When both sides were last in step (nothing pending).
    pub last_sync: Option<String>,
    /// Paths waiting to be looked at.
    pub pending: usize,
    /// Writes made to the store and to the folder since the sync started.
    pub uploads: u64,
    pub downloads: u64,
    pub conflicts: VecDeque<Conflict>,
    /// Files not synced (until they change), and memories that cannot be files here.
    pub skipped: Vec<Left>,
    pub problems: Vec<Left>,
    pub errors: VecDeque<Event>,
    pub updated_at: String,
}

impl Report {
    pub fn uploaded(&mut self, path: &str, what: &str) {
        self.uploads += 1;
        tracing::info!(path, "uploaded: {what}");
    }

    pub fn downloaded(&mut self, path: &str, what: &str) {
        self.downloads += 1;
        tracing::info!(path, "downloaded: {what}");
    }

    pub fn conflict(&mut self, path: &str, copy: &str) {
        push(
            &mut self.conflicts,
            Conflict {
                at: now(),
                path: path.to_owned(),
                copy: copy.to_owned(),
            },
        );
    }

    /// A memory that cannot be a file here (reported once).
    pub fn problem(&mut self, path: &str, why: &str) {
        if !self.problems.iter().any(|p| p.path == path) {
            tracing::warn!(path, "not synced: {why}");
            self.problems.push(Left {
                path: path.to_owned(),
                why: why.to_owned(),
            });
        }
    }

    pub fn error(&mut self, what: &str) {
        if self.errors.back().is_none_or(|e| e.what != what) {
            tracing::warn!("{what}");
            push(
                &mut self.errors,
                Event {
                    at: now(),
                    what: what.to_owned(),
                },
            );
        }
    }

    pub fn in_step(&mut self) {
        self.last_sync = Some(now());
    }

    /// Writes the report to `dir`'s status file (a failure to is only logged).
    pub fn save(&mut self, dir: &Path) {
        self.updated_at = now();
        let text = serde_json::to_vec_pretty(self).expect("a report serializes");
        let written = tempfile::NamedTempFile::new_in(dir).and_then(|mut f| {
            use std::io::Write as _;
            f.write_all(&text)?;
            f.persist(dir.join(STATUS_FILE)).map_err(|e| e.error)?;
            Ok(())
        });
        if let Err(e) = written {
            tracing::warn!("{}: {e}", dir.join(STATUS_FILE).display());
        }
    }

    /// The report in state folder `dir`.
    ///
    /// # Errors
    /// There is none, or it cannot be read.
    pub fn load(dir: &Path) -> Result<Report, String> {
        let path = dir.join(STATUS_FILE);
        let text = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        serde_json::from_slice(&text).map_err(|e| format!("{}: {e}", path.display()))
    }
}

fn push<T>(list: &mut VecDeque<T>, item: T) {
    if list.len() == KEPT {
        list.pop_front();
    }
    list.push_back(item);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_are_compact_utc() {
        let s = stamp();
        assert_eq!(s.len(), 15, "{s}");
        assert_eq!(&s[8..9], "-");
        assert!(s.starts_with("20"), "{s}");
    }

    #[test]
    fn a_report_round_trips_through_its_file() {
        let dir = tempfile::tempdir().unwrap();
        let mut r = Report {
            store: "s".into(),
            ..Report::default()
        };
        r.conflict("/a.md", "/a.sync-conflict-x.md");
        r.error("down");
        r.error("down");
        r.save(dir.path());
        let back = Report::load(dir.path()).unwrap();
        assert_eq!(back.conflicts.len(), 1);
        assert_eq!(back.errors.len(), 1, "a repeated error is kept once");
        assert_eq!(back.store, "s");
    }
}
