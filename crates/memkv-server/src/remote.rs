//! Other processes' commits, on a database several processes write (PostgreSQL). Every write
//! transaction there notifies what it changed at its commit, and this server listens on one
//! connection ([`watch`], over [`memkv::Database::watch_remote`]): keys and settings are read
//! again when told, and the change log is looked at once for every waiter of this server (long
//! polls of the change feed, the webhook deliverer) when told that entries were committed. A
//! slow poll ([`FALLBACK`]) stays, for what a lost connection kept from being told; where the
//! database cannot notify, the old polls stay ([`REMOTE_POLL`], `keys::RELOAD`). This
//! process's own commits wake the waiters at once ([`memkv::Database::next_commit`]); this is
//! for the others'.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use memkv::storage::watch::{Changed, Listening, RemoteWatch};
use tokio::sync::{Notify, watch};

use crate::AppState;

/// How often the log is looked at while someone waits, on a database that cannot notify; and
/// how long a long poll refused for a busy moment waits before it looks again.
pub const REMOTE_POLL: Duration = Duration::from_millis(50);

/// How often what other processes change is read again when no notification told of it (one
/// may be lost while the listener's connection is made again).
pub const FALLBACK: Duration = Duration::from_secs(5);

/// The last `seq` seen by the looker, who waits for it to move, and what notifications said.
#[derive(Debug)]
pub struct RemoteCommits {
    last: watch::Sender<u64>,
    waiters: AtomicUsize,
    wake: Notify,
    /// A notification said entries were committed: the looker looks.
    told: Notify,
    /// Notifications of the webhook endpoints so far.
    hooks: watch::Sender<u64>,
    /// A notification said settings changed, not yet read again.
    settings: AtomicBool,
    /// Wakes the keeper of keys and settings (`server::keep_keys`).
    keeper: Notify,
    /// Whether a watch listens (the polls are then only the fallback), once one is started.
    listening: OnceLock<Listening>,
}

impl Default for RemoteCommits {
    fn default() -> Self {
        RemoteCommits {
            last: watch::Sender::new(0),
            waiters: AtomicUsize::new(0),
            wake: Notify::new(),
            told: Notify::new(),
            hooks: watch::Sender::new(0),
            settings: AtomicBool::new(false),
            keeper: Notify::new(),
            listening: OnceLock::new(),
        }
    }
}

/// A subscription taken before a read of the log: [`Subscription::changed`] completes once the
/// looker has seen the log move since.
#[derive(Debug)]
pub struct Subscription<'a> {
    remote: &'a RemoteCommits,
    seen: watch::Receiver<u64>,
}

impl RemoteCommits {
    /// Subscribes now (before the read that may find nothing).
    pub fn subscribe(&self) -> Subscription<'_> {
        Subscription {
            remote: self,
            seen: self.last.subscribe(),
        }
    }

    /// Whether a watch tells this server of other processes' commits now: false where none
    /// runs, and while its lost connection is made again (then the polls run at their old pace).
    pub fn listening(&self) -> bool {
        self.listening.get().is_some_and(Listening::is_listening)
    }

    /// Notifications of the webhook endpoints: `changed()` completes at the next one.
    pub fn hooks(&self) -> watch::Receiver<u64> {
        self.hooks.subscribe()
    }

    /// Whether a notification said settings changed since the last call.
    pub fn settings_told(&self) -> bool {
        self.settings.swap(false, Ordering::AcqRel)
    }

    /// Completes when a notification said keys or settings changed (or at once, if one came
    /// since the last wait).
    pub async fn keys_told(&self) {
        self.keeper.notified().await;
    }

    /// What a notification said (on the listener's thread: only flags and wakes here).
    fn tell(&self, changed: Changed, keys: &crate::keys::Keys) {
        if changed.keys {
            keys.changed_elsewhere();
        }
        if changed.settings {
            self.settings.store(true, Ordering::Release);
        }
        if changed.keys || changed.settings {
            self.keeper.notify_one();
        }
        if changed.webhooks {
            self.hooks.send_modify(|n| *n += 1);
        }
        if changed.changes {
            self.told.notify_one();
        }
    }
}

impl Subscription<'_> {
    /// Completes when the looker sees the log's last `seq` change (never, on a database only
    /// this process writes, where no looker runs).
    pub async fn changed(mut self) {
        let remote = self.remote;
        remote.waiters.fetch_add(1, Ordering::AcqRel);
        remote.wake.notify_one();
        struct Leave<'a>(&'a AtomicUsize);
        impl Drop for Leave<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::AcqRel);
            }
        }
        let _leave = Leave(&remote.waiters);
        if self.seen.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// Starts listening for other processes' commits (on PostgreSQL; `None` elsewhere, or where the
/// database cannot notify): the watch stops when the handle is dropped.
pub fn watch(state: &Arc<AppState>) -> Option<RemoteWatch> {
    let weak: Weak<AppState> = Arc::downgrade(state);
    let told = move |changed: Changed| {
        if let Some(state) = weak.upgrade() {
            state.remote.tell(changed, &state.keys);
        }
    };
    match state.store.watch_remote(told) {
        Ok(Some(watching)) => {
            let _ = state.remote.listening.set(watching.listening());
            Some(watching)
        }
        Ok(None) => None,
        Err(e) => {
            tracing::warn!(error = %e, "cannot listen for other servers' commits; polling instead");
            None
        }
    }
}

/// The looker (spawned by `Server::run` on a database several processes write): while anyone
/// waits, reads the log's last `seq` when a notification says entries were committed (at least
/// every [`FALLBACK`]; every [`REMOTE_POLL`] where nothing notifies) and tells the waiters when
/// it moved.
pub async fn run(state: Arc<AppState>) {
    let remote = &state.remote;
    loop {
        while remote.waiters.load(Ordering::Acquire) == 0 {
            remote.wake.notified().await;
        }
        let db = Arc::clone(&state.store);
        if let Ok(Ok(last)) = tokio::task::spawn_blocking(move || db.last_change()).await {
            state.metrics.remote_looks.inc();
            remote.last.send_if_modified(|seen| {
                let moved = *seen != last;
                *seen = last;
                moved
            });
        }
        // A notification during the look is kept (`notify_one`): the next look follows it.
        let pause = if remote.listening() {
            FALLBACK
        } else {
            REMOTE_POLL
        };
        tokio::select! {
            () = tokio::time::sleep(pause) => {}
            () = remote.told.notified() => {}
        }
    }
}
