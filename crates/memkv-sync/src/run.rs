//! The sync's loop: a full reconciliation at start (or a catch-up from the feed's cursor), then
//! the watcher's events, the feed's pages (or a listing at an interval) and a scan at an
//! interval, one path at a time on this thread. The feed is read by a thread of its own that
//! polls only when asked, from the cursor this thread gives it, so it never runs ahead.
//!
//! Offline (the server unreachable), the loop keeps watching and collecting paths, and tries
//! again with a backoff (0.5 s doubling to 30 s); a restart resumes from the state on disk.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

use notify::{RecursiveMode, Watcher};

use crate::api::{Api, ApiError, ChangePage, Memory};
use crate::engine::{Engine, Outcome, Remote};
use crate::local::{Folder, Fp};
use crate::rules::{IGNORE_FILE, local_name, memory_path};
use crate::state::{Cursor, State};
use crate::status::Report;
use crate::{Config, Error};

/// A long poll's wait.
const POLL_WAIT: Duration = Duration::from_secs(25);
/// Backoff after a failure: from this, doubling, to [`MAX_BACKOFF`].
const MIN_BACKOFF: Duration = Duration::from_millis(500);
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// The loop wakes at least this often (to notice `stop`).
const TICK: Duration = Duration::from_secs(1);

enum Msg {
    Fs(notify::Result<notify::Event>),
    Feed(u64, Result<ChangePage, ApiError>),
}

/// A path waiting to be looked at: since when it has been quiet, and its fingerprint then.
struct Dirty {
    since: Instant,
    fp: Option<Fp>,
}

/// One folder's sync.
pub struct Sync {
    cfg: Config,
    engine: Engine,
    /// Following the feed (else listing).
    feed: bool,
    cursor: Option<Cursor>,
    dirty: BTreeMap<String, Dirty>,
    scan_due: Instant,
    /// When to try again after a failure, and the next backoff.
    retry_at: Option<Instant>,
    backoff: Duration,
    list_due: Instant,
}

/// Reconciles `cfg`'s folder and store once, and returns the report.
///
/// # Errors
/// As [`Sync::open`], or the server cannot be reached.
pub fn once(cfg: Config) -> Result<Report, Error> {
    let mut sync = Sync::open(cfg)?;
    let result = sync.start();
    sync.engine.report.running = false;
    sync.save();
    result?;
    Ok(sync.engine.report.clone())
}

impl Sync {
    /// Opens `cfg`'s folder and state (nothing is synced yet).
    ///
    /// # Errors
    /// The folder is missing or not a folder, the state is inside it, another sync holds the
    /// state, or the state belongs to another folder.
    pub fn open(mut cfg: Config) -> Result<Sync, Error> {
        cfg.folder = cfg
            .folder
            .canonicalize()
            .map_err(|e| Error::Folder(format!("{}: {e}", cfg.folder.display())))?;
        let state_dir = absolute(&cfg.state);
        if state_dir.starts_with(&cfg.folder) {
            return Err(Error::Folder(format!(
                "the sync's state ({}) must be outside the folder it syncs ({})",
                state_dir.display(),
                cfg.folder.display()
            )));
        }
        let folder = Folder::open(&cfg.folder, cfg.max_file_bytes).map_err(Error::Folder)?;
        let state = State::open(&cfg.state, &cfg.folder, &cfg.url, &cfg.store)?;
        // What a sync killed while writing left behind (this sync holds the state: no other
        // sync of this folder is writing).
        for tmp in folder.scan().map_err(Error::Io)?.temporaries {
            let _ = std::fs::remove_file(tmp);
        }
        let api = Api::new(&cfg.url, &cfg.store, &cfg.key, cfg.timeout)?;
        let mut engine = Engine::new(api, folder, state, cfg.host.clone())?;
        engine.report.folder = cfg.folder.clone();
        engine.report.url = cfg.url.clone();
        engine.report.store = cfg.store.clone();
        engine.report.pid = std::process::id();
        engine.report.running = true;
        let cursor = engine.state.cursor()?;
        tracing::info!(
            folder = %cfg.folder.display(),
            store = cfg.store.as_str(),
            url = cfg.url.as_str(),
            state = %cfg.state.display(),
            "memkv sync starts"
        );
        let now = Instant::now();
        Ok(Sync {
            cfg,
            engine,
            feed: true,
            cursor,
            dirty: BTreeMap::new(),
            scan_due: now,
            retry_at: None,
            backoff: MIN_BACKOFF,
            list_due: now,
        })
    }

    /// The report so far.
    pub fn report(&self) -> &Report {
        &self.engine.report
    }

    fn save(&mut self) {
        self.engine.report.pending = self.dirty.len();
        if let Err(e) = self.refresh_skipped() {
            tracing::warn!("{e}");
        }
        let dir = self.cfg.state.clone();
        self.engine.report.save(&dir);
    }

    /// Brings both sides in step: the feed caught up from the cursor (or, with none, a full
    /// reconciliation against a listing), then the folder scanned.
    fn start(&mut self) -> Result<(), Error> {
        let result = self
            .catch_up()
            .and_then(|()| self.scan())
            .and_then(|()| self.process_all());
        self.engine.report.online = !matches!(result, Err(Error::Api(ApiError::Unavailable(_))));
        result?;
        self.engine.state.flush()?;
        if self.dirty.is_empty() {
            self.engine.report.in_step();
        }
        Ok(())
    }

    /// Applies the feed from the cursor to its end; a full reconciliation without a cursor, or
    /// when the server no longer has it.
    fn catch_up(&mut self) -> Result<(), Error> {
        let Some(mut cursor) = self.cursor.clone() else {
            return self.full();
        };
        loop {
            match self.engine.api.changes(cursor.after, Duration::ZERO) {
                Ok(page) if page.database != cursor.database => return self.full(),
                Ok(page) if page.data.is_empty() => return Ok(()),
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
    fn feed_end(&mut self) -> Result<Option<Cursor>, Error> {
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
    fn full(&mut self) -> Result<(), Error> {
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
    fn reconcile_listing(&mut self, listed: Vec<Memory>) -> Result<(), Error> {
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
    fn apply(&mut self, page: &ChangePage) -> Result<(), Error> {
        // What each path is at the page's end, and the renames on the way.
        let mut at: BTreeMap<String, Remote> = BTreeMap::new();
        let mut renames: Vec<(String, Memory)> = Vec::new();
        // The memory each deletion was of.
        let mut gone_ids: BTreeMap<String, String> = BTreeMap::new();
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
                    gone_ids.remove(path);
                }
                "memory.renamed" => {
                    if let Some(from) = &c.previous_path {
                        at.insert(from.clone(), Remote::Gone);
                        gone_ids.insert(from.clone(), id.clone());
                        renames.push((from.clone(), memory()));
                    }
                    at.insert(path.clone(), Remote::At(memory()));
                    gone_ids.remove(path);
                }
                "memory.deleted" => {
                    at.insert(path.clone(), Remote::Gone);
                    gone_ids.insert(path.clone(), id.clone());
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
                Remote::Gone => match (&base, gone_ids.get(&path)) {
                    (Some(b), Some(id)) if &b.id != id => continue,
                    _ => self.engine.confirm_absent(&path)?,
                },
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

    /// The folder scanned: every file changed since its base, and every base whose file is
    /// gone, marked.
    fn scan(&mut self) -> Result<(), Error> {
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

    fn refresh_skipped(&mut self) -> Result<(), Error> {
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
    fn mark(&mut self, path: &str) {
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
    fn process_all(&mut self) -> Result<(), Error> {
        let due: BTreeSet<String> = std::mem::take(&mut self.dirty).into_keys().collect();
        self.process(due)
    }

    /// Paths quiet for the debounce, and unchanged since they were marked, processed.
    fn process_due(&mut self) -> Result<(), Error> {
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

    fn process(&mut self, paths: BTreeSet<String>) -> Result<(), Error> {
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

    /// Runs until `stop` is set: the loop of this module's header.
    ///
    /// # Errors
    /// The watcher cannot be started, or the state fails; the server being unreachable is not
    /// an error (the sync waits for it).
    pub fn run(mut self, stop: &AtomicBool) -> Result<(), Error> {
        let (tx, rx) = mpsc::channel::<Msg>();
        let fs_tx = tx.clone();
        let mut watcher = notify::recommended_watcher(move |e| {
            let _ = fs_tx.send(Msg::Fs(e));
        })
        .map_err(|e| Error::Folder(format!("cannot watch {}: {e}", self.cfg.folder.display())))?;
        watcher
            .watch(&self.cfg.folder, RecursiveMode::Recursive)
            .map_err(|e| {
                Error::Folder(format!("cannot watch {}: {e}", self.cfg.folder.display()))
            })?;
        let ask = feed_thread(self.engine.api.clone(), tx);
        let mut polling = false;
        if let Err(e) = self.start() {
            self.failed(&e)?;
        }
        self.save();
        while !stop.load(Ordering::Relaxed) {
            if self.feed
                && !polling
                && self.retry_at.is_none()
                && let Some(c) = &self.cursor
            {
                polling = ask.send(c.after).is_ok();
            }
            let wait = self.next_wake();
            let mut worked = match rx.recv_timeout(wait) {
                Ok(msg) => {
                    let mut worked = self.on_msg(msg, &mut polling)?;
                    // Take whatever else is waiting before working.
                    while let Ok(msg) = rx.try_recv() {
                        worked |= self.on_msg(msg, &mut polling)?;
                    }
                    worked
                }
                Err(RecvTimeoutError::Timeout) => false,
                Err(RecvTimeoutError::Disconnected) => break,
            };
            worked |= self.on_time()?;
            if worked {
                if self.dirty.is_empty() && self.retry_at.is_none() {
                    self.engine.report.in_step();
                }
                self.save();
            }
        }
        drop(watcher);
        self.engine.report.running = false;
        self.save();
        Ok(())
    }

    /// How long the loop may sleep.
    fn next_wake(&self) -> Duration {
        let now = Instant::now();
        let mut at = now + TICK;
        if let Some(first) = self
            .dirty
            .values()
            .map(|d| d.since + self.cfg.debounce)
            .min()
        {
            at = at.min(first);
        }
        at = at.min(self.scan_due);
        if let Some(r) = self.retry_at {
            at = at.min(r);
        }
        if !self.feed {
            at = at.min(self.list_due);
        }
        at.saturating_duration_since(now)
    }

    /// A failure: offline (try again later) or reported; only the state failing ends the run.
    fn failed(&mut self, e: &Error) -> Result<(), Error> {
        if let Error::State(_) = e {
            return Err(Error::State(e.to_string()));
        }
        self.engine.report.online = !matches!(e, Error::Api(ApiError::Unavailable(_)));
        self.engine.report.error(&e.to_string());
        self.retry_at = Some(Instant::now() + self.backoff);
        self.backoff = (self.backoff * 2).min(MAX_BACKOFF);
        Ok(())
    }

    fn succeeded(&mut self) {
        self.engine.report.online = true;
        self.backoff = MIN_BACKOFF;
    }

    fn on_msg(&mut self, msg: Msg, polling: &mut bool) -> Result<bool, Error> {
        match msg {
            // Reads (the sync's own among them) change nothing.
            Msg::Fs(Ok(event)) if matches!(event.kind, notify::EventKind::Access(_)) => Ok(false),
            Msg::Fs(Ok(event)) => {
                if event.need_rescan() {
                    self.scan_due = Instant::now();
                }
                for p in &event.paths {
                    self.on_path(p);
                }
                Ok(false)
            }
            Msg::Fs(Err(e)) => {
                tracing::warn!("the watcher: {e}: scanning the folder");
                self.scan_due = Instant::now();
                Ok(false)
            }
            Msg::Feed(from, result) => {
                *polling = false;
                if self.cursor.as_ref().map(|c| c.after) != Some(from) {
                    return Ok(false);
                }
                let outcome = match result {
                    Ok(page)
                        if page.database
                            != self.cursor.as_ref().and_then(|c| c.database.clone()) =>
                    {
                        self.full()
                    }
                    Ok(page) if page.data.is_empty() => Ok(()),
                    Ok(page) => self.apply(&page),
                    Err(ApiError::Gone(_)) => self.full(),
                    Err(ApiError::NotFound(_)) => {
                        self.feed = false;
                        self.engine.report.following = "listing".to_owned();
                        Ok(())
                    }
                    Err(e) => Err(e.into()),
                };
                match outcome {
                    Ok(()) => self.succeeded(),
                    Err(e) => self.failed(&e)?,
                }
                Ok(true)
            }
        }
    }

    /// A path the watcher named: its file marked, or a scan for a folder or the ignore file.
    fn on_path(&mut self, p: &Path) {
        let Ok(rel) = p.strip_prefix(&self.cfg.folder) else {
            return;
        };
        let Some(rel) = rel.to_str().map(|r| r.replace('\\', "/")) else {
            self.scan_due = Instant::now();
            return;
        };
        if rel.is_empty() {
            return;
        }
        if rel == IGNORE_FILE {
            if let Err(e) = self.engine.folder.reload_rules() {
                self.engine.report.error(&e);
            }
            self.scan_due = Instant::now();
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

    /// What is due by the clock: the retry, debounced paths, a scan, a listing.
    fn on_time(&mut self) -> Result<bool, Error> {
        let now = Instant::now();
        if self.retry_at.is_some_and(|r| r > now) {
            return Ok(false);
        }
        let mut worked = false;
        if self.retry_at.take().is_some() {
            worked = true;
            let result = if self.cursor.is_none() || !self.engine.report.online {
                self.start()
            } else {
                Ok(())
            };
            if let Err(e) = result {
                self.failed(&e)?;
                return Ok(true);
            }
        }
        if self.scan_due <= now {
            worked = true;
            if let Err(e) = self.scan() {
                self.failed(&e)?;
            }
        }
        if !self.feed && self.list_due <= now {
            worked = true;
            self.list_due = now + self.cfg.poll;
            let result = self
                .engine
                .api
                .list(false)
                .map_err(Error::from)
                .and_then(|listed| self.listed(listed));
            if let Err(e) = result {
                self.failed(&e)?;
                return Ok(true);
            }
        }
        if !self.dirty.is_empty() {
            let before = self.dirty.len();
            match self.process_due() {
                Ok(()) => {
                    worked |= self.dirty.len() != before;
                    self.succeeded();
                }
                Err(e) => {
                    self.failed(&e)?;
                    worked = true;
                }
            }
        }
        Ok(worked)
    }

    /// A listing (hashes only) compared with the bases: what differs is reconciled.
    fn listed(&mut self, listed: Vec<Memory>) -> Result<(), Error> {
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

/// The feed's reader: polls from each cursor it is sent, and sends the answer back.
fn feed_thread(api: Api, tx: Sender<Msg>) -> Sender<u64> {
    let (ask, asked): (Sender<u64>, Receiver<u64>) = mpsc::channel();
    std::thread::Builder::new()
        .name("memkv-sync-feed".into())
        .spawn(move || {
            while let Ok(after) = asked.recv() {
                let page = api.changes(after, POLL_WAIT);
                if tx.send(Msg::Feed(after, page)).is_err() {
                    return;
                }
            }
        })
        .expect("a thread can be started");
    ask
}

fn absolute(p: &Path) -> std::path::PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_owned())
}
