//! The sync's loop: a full reconciliation at start (or a catch-up from the feed's cursor), then
//! the watcher's events, the feed's pages (or a listing at an interval) and a scan at an
//! interval, one path at a time on this thread. The feed is read by a thread of its own that
//! polls only when asked, from the cursor this thread gives it, so it never runs ahead.
//!
//! Offline (the server unreachable), the loop keeps watching and collecting paths, and tries
//! again with a backoff (0.5 s doubling to 30 s); a restart resumes from the state on disk.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

use notify::{RecursiveMode, Watcher};

mod folder;
mod follow;

use crate::api::{Api, ApiError, ChangePage};
use crate::engine::Engine;
use crate::local::{Folder, Fp};
use crate::state::{Cursor, State};
use crate::status::Report;
use crate::{Config, Error};

/// A long poll's wait.
const POLL_WAIT: Duration = Duration::from_secs(25);
/// Backoff after a failure: from this, doubling, to [`MAX_BACKOFF`].
const MIN_BACKOFF: Duration = Duration::from_millis(500);
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// Empty answers of the feed are asked for at most this often.
const MIN_EMPTY_POLL: Duration = Duration::from_secs(1);
/// How often the folder is scanned when it cannot be watched.
const FALLBACK_SCAN: Duration = Duration::from_secs(2);
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
    /// The folder's watch is to be made again (the folder was removed or moved).
    rewatch: bool,
    /// Everything is to be reconciled again (the ignore rules changed).
    refull: bool,
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
            rewatch: false,
            refull: false,
        })
    }

    /// The report so far.
    pub fn report(&self) -> &Report {
        &self.engine.report
    }

    pub(super) fn save(&mut self) {
        self.engine.report.pending = self.dirty.len();
        if let Err(e) = self.refresh_skipped() {
            tracing::warn!("{e}");
        }
        let dir = self.cfg.state.clone();
        self.engine.report.save(&dir);
    }

    /// Brings both sides in step: the feed caught up from the cursor (or, with none, a full
    /// reconciliation against a listing), then the folder scanned.
    pub(super) fn start(&mut self) -> Result<(), Error> {
        let result = self
            .catch_up()
            .and_then(|()| self.scan())
            .and_then(|()| self.process_all());
        self.engine.report.online = !matches!(result, Err(Error::Api(ApiError::Unavailable(_))));
        result?;
        if self.dirty.is_empty() {
            self.engine.report.in_step();
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
        let watcher = notify::recommended_watcher(move |e| {
            let _ = fs_tx.send(Msg::Fs(e));
        })
        .and_then(|mut w| {
            w.watch(&self.cfg.folder, RecursiveMode::Recursive)
                .map(|()| w)
        });
        let mut watcher = match watcher {
            Ok(w) => Some(w),
            Err(e) => {
                // Out of inotify watches, say: the folder is scanned every few seconds instead.
                self.cfg.rescan = self.cfg.rescan.min(FALLBACK_SCAN);
                let what = format!(
                    "cannot watch {} ({e}): scanning it every {} s instead",
                    self.cfg.folder.display(),
                    self.cfg.rescan.as_secs()
                );
                self.engine.report.error(&what);
                None
            }
        };
        let ask = feed_thread(self.engine.api.clone(), tx);
        let mut polling = false;
        // `memkv sync status` answers from the start: running, not yet in step.
        self.save();
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
            if self.rewatch
                && let Some(w) = watcher.as_mut()
            {
                let _ = w.unwatch(&self.cfg.folder);
                if w.watch(&self.cfg.folder, RecursiveMode::Recursive).is_ok() {
                    self.rewatch = false;
                    self.scan_due = Instant::now();
                }
            }
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
        // Waiting out a failure: nothing else is due before the retry (an earlier deadline
        // would wake the loop for nothing, over and over).
        if let Some(r) = self.retry_at
            && r > now
        {
            return at.min(r).saturating_duration_since(now);
        }
        if let Some(first) = self
            .dirty
            .values()
            .map(|d| d.since + self.cfg.debounce)
            .min()
        {
            at = at.min(first);
        }
        at = at.min(self.scan_due);
        if !self.feed {
            at = at.min(self.list_due);
        }
        at.saturating_duration_since(now)
    }

    /// A failure: offline (try again later) or reported; only the state failing ends the run.
    pub(super) fn failed(&mut self, e: &Error) -> Result<(), Error> {
        if let Error::State(_) = e {
            return Err(Error::State(e.to_string()));
        }
        self.engine.report.online = !matches!(e, Error::Api(ApiError::Unavailable(_)));
        self.engine.report.error(&e.to_string());
        self.retry_at = Some(Instant::now() + self.backoff);
        self.backoff = (self.backoff * 2).min(MAX_BACKOFF);
        Ok(())
    }

    pub(super) fn succeeded(&mut self) {
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
                // The folder failing the start (removed while it ran) does not hold back the
                // files the watcher named meanwhile: their deletions are uploaded, as the
                // watcher's always are. The server failing holds everything back.
                if !matches!(e, Error::Io(_)) {
                    return Ok(true);
                }
            }
        }
        if self.refull {
            self.refull = false;
            worked = true;
            if let Err(e) = self.full() {
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
}

/// The feed's reader: polls from each cursor it is sent, and sends the answer back.
fn feed_thread(api: Api, tx: Sender<Msg>) -> Sender<u64> {
    let (ask, asked): (Sender<u64>, Receiver<u64>) = mpsc::channel();
    std::thread::Builder::new()
        .name("memkv-sync-feed".into())
        .spawn(move || {
            let mut last_empty: Option<Instant> = None;
            while let Ok(after) = asked.recv() {
                // A server that answers an empty page at once (one that ignores `wait`) is
                // asked at most once a second.
                if let Some(t) = last_empty {
                    std::thread::sleep(MIN_EMPTY_POLL.saturating_sub(t.elapsed()));
                }
                let started = Instant::now();
                let page = api.changes(after, POLL_WAIT);
                last_empty = match &page {
                    Ok(p) if p.data.is_empty() => Some(started),
                    _ => None,
                };
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
