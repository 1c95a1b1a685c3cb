//! [`CommitSignal`]: a future that resolves once a change commits, for long polls of the change
//! log. It needs no runtime: a commit that noted changes wakes every waiting future.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

/// Commits with changes so far, and who waits for the next one.
#[derive(Debug, Default)]
pub(crate) struct Signal {
    commits: AtomicU64,
    next_id: AtomicU64,
    /// The wakers of pending futures, by future (removed when one is dropped, so that futures
    /// given up by a timeout leave nothing behind).
    waiting: Mutex<HashMap<u64, Waker>>,
}

impl Signal {
    /// After a commit that noted changes.
    pub(crate) fn committed(&self) {
        self.commits.fetch_add(1, Ordering::SeqCst);
        let waiting = std::mem::take(&mut *self.waiting.lock().unwrap_or_else(|p| p.into_inner()));
        for waker in waiting.into_values() {
            waker.wake();
        }
    }
}

/// Resolves once a change commits in this process after the signal was made
/// ([`crate::Database::next_commit`]). Make it before reading the log, then await it if the
/// read found nothing new: a commit in between is not missed.
#[derive(Debug)]
pub struct CommitSignal {
    signal: Arc<dyn AsSignal>,
    seen: u64,
    id: u64,
}

/// What holds the [`Signal`] (the engine), so a future keeps it alive.
pub(crate) trait AsSignal: Send + Sync + std::fmt::Debug {
    fn signal(&self) -> &Signal;
}

impl CommitSignal {
    pub(crate) fn new(holder: Arc<dyn AsSignal>) -> CommitSignal {
        let s = holder.signal();
        let seen = s.commits.load(Ordering::SeqCst);
        let id = s.next_id.fetch_add(1, Ordering::Relaxed);
        CommitSignal {
            signal: holder,
            seen,
            id,
        }
    }
}

impl Future for CommitSignal {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let s = self.signal.signal();
        if s.commits.load(Ordering::SeqCst) != self.seen {
            return Poll::Ready(());
        }
        s.waiting
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(self.id, cx.waker().clone());
        // A commit between the first look and the registration.
        if s.commits.load(Ordering::SeqCst) != self.seen {
            return Poll::Ready(());
        }
        Poll::Pending
    }
}

impl Drop for CommitSignal {
    fn drop(&mut self) {
        self.signal
            .signal()
            .waiting
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&self.id);
    }
}
