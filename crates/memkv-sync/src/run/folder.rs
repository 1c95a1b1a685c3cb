//! The folder's side of the loop: scans, paths marked by the watcher and waiting out the
//! debounce, and the marked paths processed (renames first).

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Instant;

use super::{Dirty, Sync};
use crate::Error;
use crate::engine::{Outcome, Remote};
use crate::rules::{IGNORE_FILE, local_name, memory_path};

impl Sync {
    /// The folder scanned: every file changed since its base, and every base whose file is
    /// gone, marked.
    pub(super) fn scan(&mut self) -> Result<(), Error> {
        // The next one is due in any case: a failing scan is not tried again at once.
        self.scan_due = Instant::now() + self.cfg.rescan;
        let scan = self.engine.folder.scan().map_err(Error::Io)?;
        let known = self.engine.state.skipped()?;
        for (rel, skip) in &scan.skipped {
            if known.get(rel).map(|(s, _)| s) != Some(skip) {
                tracing::warn!(file = rel.as_str(), "not synced: {skip}");
                self.engine.state.set_skipped(rel, Some((skip, None)))?;
            }
        }
        for rel in known.keys() {
            if !scan.skipped.contains_key(rel) && !scan.files.contains_key(rel) {
                self.engine.state.set_skipped(rel, None)?;
            }
        }
        let mut marked = Vec::new();
        for (rel, fp) in &scan.files {
            let path = memory_path(rel);
            if self.engine.bases().get(&path).and_then(|b| b.fp) != Some(*fp) {
                marked.push(path);
            }
        }
        for path in self.engine.bases().keys() {
            if let Ok(rel) = local_name(path)
                && !scan.files.contains_key(&rel)
            {
                marked.push(path.clone());
            }
        }
        for path in marked {
            self.mark(&path);
        }
        self.scan_due = Instant::now() + self.cfg.rescan;
        Ok(())
    }

    pub(super) fn refresh_skipped(&mut self) -> Result<(), Error> {
        self.engine.report.skipped = self
            .engine
            .state
            .skipped()?
            .into_iter()
            .map(|(path, (why, _))| crate::status::Left {
                path,
                why: why.to_string(),
            })
            .collect();
        Ok(())
    }

    /// `path` to be looked at once it has been quiet for the debounce (a path marked again
    /// unchanged keeps its time).
    pub(super) fn mark(&mut self, path: &str) {
        let fp = local_name(path)
            .ok()
            .and_then(|rel| self.engine.folder.stat(&rel).ok().flatten());
        match self.dirty.get(path) {
            Some(d) if d.fp == fp => {}
            _ => {
                self.dirty.insert(
                    path.to_owned(),
                    Dirty {
                        since: Instant::now(),
                        fp,
                    },
                );
            }
        }
    }

    /// Every marked path, now (at start, and for `--once`).
    pub(super) fn process_all(&mut self) -> Result<(), Error> {
        let due: BTreeSet<String> = std::mem::take(&mut self.dirty).into_keys().collect();
        self.process(due)
    }

    /// Paths quiet for the debounce, and unchanged since they were marked, processed.
    pub(super) fn process_due(&mut self) -> Result<(), Error> {
        let now = Instant::now();
        let mut due = BTreeSet::new();
        let debounce = self.cfg.debounce;
        let folder = &self.engine.folder;
        for (path, d) in &mut self.dirty {
            if now.duration_since(d.since) < debounce {
                continue;
            }
            let fp = local_name(path)
                .ok()
                .and_then(|rel| folder.stat(&rel).ok().flatten());
            if fp == d.fp {
                due.insert(path.clone());
            } else {
                // Still being written: wait until it settles.
                d.fp = fp;
                d.since = now;
            }
        }
        for path in &due {
            self.dirty.remove(path);
        }
        self.process(due)
    }

    pub(super) fn process(&mut self, paths: BTreeSet<String>) -> Result<(), Error> {
        if paths.is_empty() {
            return Ok(());
        }
        let left = match self.engine.local_renames(paths.clone()) {
            Ok(left) => left,
            Err(e) => {
                for p in &paths {
                    self.mark(p);
                }
                return Err(e);
            }
        };
        let mut todo = left.into_iter();
        while let Some(path) = todo.next() {
            match self.engine.reconcile(&path, Remote::AsBase) {
                Ok(Outcome::Done) => {}
                Ok(Outcome::Again) => self.mark(&path),
                Err(e) => {
                    // Kept for the next try, with everything not yet done.
                    self.mark(&path);
                    for rest in todo {
                        self.mark(&rest);
                    }
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    /// A path the watcher named: its file marked, or a scan for a folder or the ignore file.
    pub(super) fn on_path(&mut self, p: &Path) {
        let Ok(rel) = p.strip_prefix(&self.cfg.folder) else {
            return;
        };
        let Some(rel) = rel.to_str().map(|r| r.replace('\\', "/")) else {
            self.scan_due = Instant::now();
            return;
        };
        if rel.is_empty() {
            // The folder itself, removed or moved (as an SDK's "clear all memory" does): its
            // watch is gone with it, and is made again once the folder is back.
            self.rewatch = true;
            self.scan_due = self.scan_due.min(Instant::now() + self.cfg.debounce);
            return;
        }
        if rel == IGNORE_FILE {
            if let Err(e) = self.engine.folder.reload_rules() {
                self.engine.report.error(&e);
            }
            // Memories no longer left out are in no feed entry: a full reconciliation finds them.
            self.refull = true;
            return;
        }
        let is_dir = std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir());
        if self.engine.folder.rules.ignored(&rel, is_dir) {
            return;
        }
        let path = memory_path(&rel);
        let known = self.engine.bases().contains_key(&path);
        if is_dir || (!known && !p.exists()) {
            // A folder made, moved or removed: what is in it is found by a scan.
            self.scan_due = self.scan_due.min(Instant::now() + self.cfg.debounce);
            return;
        }
        self.mark(&path);
    }
}
