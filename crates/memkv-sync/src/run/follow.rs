//! Following the store: the feed caught up from the cursor, a full reconciliation against a
//! listing (at start without a cursor, and when the server no longer has it), a page of the
//! feed applied, and a listing compared at an interval for a server without the feed.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::Sync;
use crate::Error;
use crate::api::{ApiError, ChangePage, Memory};
use crate::engine::{Outcome, Remote};
use crate::rules::memory_path;
use crate::state::Cursor;

impl Sync {
    /// Applies the feed from the cursor to its end; a full reconciliation without a cursor, or
    /// when the server no longer has it.
    pub(super) fn catch_up(&mut self) -> Result<(), Error> {
        let Some(mut cursor) = self.cursor.clone() else {
            return self.full();
        };
        self.engine.report.following = "feed".to_owned();
        loop {
            match self.engine.api.changes(cursor.after, Duration::ZERO) {
                Ok(page) if page.database != cursor.database => return self.full(),
                Ok(page) if page.data.is_empty() => return Ok(()),
                Ok(page) if page.next_after <= cursor.after => {
                    return Err(ApiError::Unavailable(format!(
                        "the feed's page after {} does not move on (next_after {})",
                        cursor.after, page.next_after
                    ))
                    .into());
                }
                Ok(page) => {
                    self.apply(&page)?;
                    cursor = self.cursor.clone().expect("apply sets the cursor");
                }
                Err(ApiError::Gone(why)) => {
                    tracing::info!("the feed's cursor is gone ({why}): reconciling everything");
                    return self.full();
                }
                Err(ApiError::NotFound(_)) => return self.full(),
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// The cursor at the feed's end now, or `None` for a server without the feed.
    pub(super) fn feed_end(&mut self) -> Result<Option<Cursor>, Error> {
        let mut after = 0;
        // Each page moves `after` on; the feed is finite.
        loop {
            match self.engine.api.changes(after, Duration::ZERO) {
                Ok(page) if page.data.is_empty() || page.next_after <= after => {
                    return Ok(Some(Cursor {
                        database: page.database,
                        after: page.next_after.max(after),
                    }));
                }
                Ok(page) => after = page.next_after,
                Err(ApiError::NotFound(_)) => return Ok(None),
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Every file against every memory: the feed's end first, then a listing (changes after
    /// the end come through the feed again, and applying them twice changes nothing).
    pub(super) fn full(&mut self) -> Result<(), Error> {
        self.engine.api.check_store()?;
        let end = self.feed_end()?;
        self.feed = end.is_some();
        self.engine.report.following = if self.feed { "feed" } else { "listing" }.to_owned();
        let listed = self.engine.api.list(true)?;
        self.reconcile_listing(listed)?;
        self.scan()?;
        self.process_all()?;
        self.cursor = end;
        self.engine.state.set_cursor(self.cursor.as_ref())?;
        Ok(())
    }

    /// Every path of `listed` (the whole store), every file and every base, reconciled.
    pub(super) fn reconcile_listing(&mut self, listed: Vec<Memory>) -> Result<(), Error> {
        let mut remote: BTreeMap<String, Memory> =
            listed.into_iter().map(|m| (m.path.clone(), m)).collect();
        let scan = self.engine.folder.scan().map_err(Error::Io)?;
        let mut paths: BTreeSet<String> = scan.files.keys().map(|r| memory_path(r)).collect();
        paths.extend(remote.keys().cloned());
        paths.extend(self.engine.bases().keys().cloned());
        // Renames: a vanished file whose memory is unchanged, and a new file of its content.
        let renamable: BTreeSet<String> = paths
            .iter()
            .filter(|p| match (self.engine.bases().get(*p), remote.get(*p)) {
                (Some(b), Some(r)) => b.sha == r.content_sha256,
                (None, None) => true,
                _ => false,
            })
            .cloned()
            .collect();
        let left = self.engine.local_renames(renamable.clone())?;
        for path in paths {
            if renamable.contains(&path) && !left.contains(&path) {
                continue;
            }
            let r = match remote.remove(&path) {
                Some(m) => Remote::At(m),
                None => self.engine.confirm_absent(&path)?,
            };
            if self.engine.reconcile(&path, r)? == Outcome::Again {
                self.mark(&path);
            }
        }
        Ok(())
    }

    /// A page of the feed applied, and the cursor moved past it.
    pub(super) fn apply(&mut self, page: &ChangePage) -> Result<(), Error> {
        // What each path is at the page's end, and the renames on the way.
        let mut at: BTreeMap<String, Remote> = BTreeMap::new();
        let mut renames: Vec<(String, Memory)> = Vec::new();
        for c in &page.data {
            let (Some(id), Some(path)) = (&c.memory_id, &c.path) else {
                if c.kind == "store.deleted" {
                    self.engine.report.error("the store was deleted");
                }
                continue;
            };
            let memory = || Memory {
                id: id.clone(),
                path: path.clone(),
                content_sha256: c.content_sha256.clone().unwrap_or_default(),
                content: None,
            };
            match c.kind.as_str() {
                "memory.created" | "memory.modified" | "version.redacted" => {
                    at.insert(path.clone(), Remote::At(memory()));
                }
                "memory.renamed" => {
                    if let Some(from) = &c.previous_path {
                        at.insert(from.clone(), Remote::Gone);
                        renames.push((from.clone(), memory()));
                    }
                    at.insert(path.clone(), Remote::At(memory()));
                }
                "memory.deleted" => {
                    at.insert(path.clone(), Remote::Gone);
                }
                _ => {}
            }
        }
        for (from, to) in renames {
            let unchanged = matches!(at.get(&to.path), Some(Remote::At(m)) if m.content_sha256 == to.content_sha256)
                && matches!(at.get(&from), Some(Remote::Gone));
            if unchanged && self.engine.rename_local(&from, &to)? {
                at.remove(&from);
                at.remove(&to.path);
            }
        }
        for (path, remote) in at {
            // An entry says what a memory was at its commit, not what it is now (the sync's
            // own later writes among what came after): what differs from the base is asked for
            // as it is now, and a deletion of another memory than the base's is not this
            // file's.
            let base = self.engine.bases().get(&path).cloned();
            let remote = match remote {
                Remote::At(m)
                    if base
                        .as_ref()
                        .is_some_and(|b| b.id == m.id && b.sha == m.content_sha256) =>
                {
                    Remote::At(m)
                }
                Remote::At(m) => match self.engine.api.get(&m.id)? {
                    Some(now) if now.path == path => Remote::At(now),
                    _ => self.engine.confirm_absent(&path)?,
                },
                // Asked for by the base's own id: a deletion of another memory at the path
                // leaves the base's memory as it is.
                Remote::Gone => self.engine.confirm_absent(&path)?,
                Remote::AsBase => Remote::AsBase,
            };
            if self.engine.reconcile(&path, remote)? == Outcome::Again {
                self.mark(&path);
            }
        }
        self.cursor = Some(Cursor {
            database: page.database.clone(),
            after: page.next_after,
        });
        self.engine.state.set_cursor(self.cursor.as_ref())?;
        Ok(())
    }

    /// A listing (hashes only) compared with the bases: what differs is reconciled.
    pub(super) fn listed(&mut self, listed: Vec<Memory>) -> Result<(), Error> {
        let mut seen = BTreeSet::new();
        for m in listed {
            seen.insert(m.path.clone());
            let same = self
                .engine
                .bases()
                .get(&m.path)
                .is_some_and(|b| b.sha == m.content_sha256 && b.id == m.id);
            if !same {
                let path = m.path.clone();
                if self.engine.reconcile(&path, Remote::At(m))? == Outcome::Again {
                    self.mark(&path);
                }
            }
        }
        let gone: Vec<String> = self
            .engine
            .bases()
            .keys()
            .filter(|p| !seen.contains(*p))
            .cloned()
            .collect();
        for path in gone {
            let remote = self.engine.confirm_absent(&path)?;
            if self.engine.reconcile(&path, remote)? == Outcome::Again {
                self.mark(&path);
            }
        }
        self.succeeded();
        Ok(())
    }
}
