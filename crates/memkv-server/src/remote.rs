//! Other processes' commits, on a database several processes write (PostgreSQL): one look at
//! the change log's last `seq` every [`REMOTE_POLL`], for every waiter of this server at once
//! (long polls of the change feed, the webhook deliverer), and only while one waits. This
//! process's own commits wake the waiters at once ([`memkv::Database::next_commit`]); this is
//! for the others'.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::{Notify, watch};

use crate::AppState;

/// How often the log is looked at while someone waits.
pub const REMOTE_POLL: Duration = Duration::from_millis(50);

/// The last `seq` seen by the looker, and who waits for it to move.
#[derive(Debug)]
pub struct RemoteCommits {
    last: watch::Sender<u64>,
    waiters: AtomicUsize,
    wake: Notify,
}

impl Default for RemoteCommits {
    fn default() -> Self {
        RemoteCommits {
            last: watch::Sender::new(0),
            waiters: AtomicUsize::new(0),
            wake: Notify::new(),
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

/// The looker (spawned by `Server::run` on a database several processes write): while anyone
/// waits, reads the log's last `seq` every [`REMOTE_POLL`] and tells the waiters when it moved.
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
        tokio::time::sleep(REMOTE_POLL).await;
    }
}
