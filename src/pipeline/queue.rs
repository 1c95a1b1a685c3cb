//! The queue in front of the write transactions: group commit, so that writes from concurrent
//! callers share one transaction and one disk flush.
//!
//! A redb commit costs at least one flush, so a writer that commits each write alone is capped
//! by the disk's flush rate. Here every write joins a queue. A caller that finds a lane free
//! leads: it takes everything queued (in arrival order), runs it as one batch, and hands every
//! caller its own result. Callers that arrive while a batch is being flushed queue up and form
//! the next batch, so batches grow exactly as far as the load needs and a lone caller pays
//! nothing but a mutex. A backend may allow several batches at once
//! ([`crate::storage::Capabilities::write_lanes`]: PostgreSQL, whose store locks order batches
//! that share a store, and which flushes concurrent commits together); each lane has a leader.
//!
//! Two kinds of caller wait here:
//! - a **blocking** caller sleeps on its slot's condition variable, and may be made the next
//!   leader;
//! - an **async** caller holds a future that its slot wakes; it never leads (it must not block
//!   an async worker), so a batch with no blocking caller in it is led by one of the database's
//!   writer threads (`super::Writers`).
//!
//! A finishing leader hands the next batch to a blocking caller in it, else to a writer thread
//! (a writer thread keeps it). A caller is answered only after its batch's commit is durable.

use std::any::Any;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};

use super::Job;
use crate::error::Error;

/// Most writes in one transaction; bounds the transaction's memory and the leader's work.
pub(crate) const MAX_BATCH: usize = 256;

/// A write's answer, its type erased (each job knows its own).
pub(crate) type Answer = Result<Box<dyn Any + Send>, Error>;

/// Where one caller waits: for its answer, or (a blocking caller) to be made the next leader.
/// Each caller has its own, so a finished batch wakes exactly its callers and one successor.
pub(crate) struct Slot {
    state: Mutex<Waiting>,
    wake: Condvar,
    blocking: bool,
}

#[derive(Default)]
struct Waiting {
    state: SlotState,
    /// A blocking caller sleeps on `wake` (set and read under the lock: no wake-up is lost).
    asleep: bool,
    /// An async caller's waker, from its last poll.
    waker: Option<Waker>,
}

/// A batch taken from the queue: the jobs and where their callers wait.
pub(crate) type Batch = Vec<(Box<dyn Job>, Arc<Slot>)>;

#[derive(Default)]
enum SlotState {
    #[default]
    Waiting,
    /// Lead this batch (a blocking caller, whose job is in it).
    Lead(Batch),
    Done(Answer),
}

impl Slot {
    pub(crate) fn new(blocking: bool) -> Arc<Slot> {
        Arc::new(Slot {
            state: Mutex::default(),
            wake: Condvar::new(),
            blocking,
        })
    }

    fn lock(&self) -> MutexGuard<'_, Waiting> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn set(&self, state: SlotState) {
        let mut slot = self.lock();
        slot.state = state;
        let (asleep, waker) = (slot.asleep, slot.waker.take());
        drop(slot);
        // `notify_one` is a system call even when no one waits: only for a caller asleep.
        if asleep {
            self.wake.notify_one();
        }
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    /// Answers the caller.
    pub(crate) fn answer(&self, answer: Answer) {
        self.set(SlotState::Done(answer));
    }

    /// What the slot holds (leaving it waiting).
    fn take(&self) -> SlotState {
        std::mem::take(&mut self.lock().state)
    }

    /// A blocking caller's wait: its answer, or a batch to lead.
    fn wait(&self) -> Result<Answer, Batch> {
        let mut waiting = self.lock();
        loop {
            match std::mem::take(&mut waiting.state) {
                SlotState::Done(answer) => return Ok(answer),
                SlotState::Lead(batch) => return Err(batch),
                SlotState::Waiting => {
                    waiting.asleep = true;
                    waiting = self
                        .wake
                        .wait(waiting)
                        .unwrap_or_else(PoisonError::into_inner);
                    waiting.asleep = false;
                }
            }
        }
    }
}

/// An async caller's answer, once its batch is durable.
pub(crate) struct Pending(pub(crate) Arc<Slot>);

impl Future for Pending {
    type Output = Answer;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Answer> {
        let mut waiting = self.0.lock();
        match std::mem::take(&mut waiting.state) {
            SlotState::Done(answer) => Poll::Ready(answer),
            SlotState::Waiting => {
                waiting.waker = Some(cx.waker().clone());
                Poll::Pending
            }
            SlotState::Lead(_) => unreachable!("an async caller is never made a leader"),
        }
    }
}

#[derive(Default)]
struct Inner {
    pending: Batch,
    /// Leaders running a batch (or chosen to), at most the backend's lanes.
    leaders: usize,
}

impl Inner {
    /// The next batch: the oldest jobs, at most [`MAX_BATCH`].
    fn take(&mut self) -> Batch {
        let take = self.pending.len().min(MAX_BATCH);
        self.pending.drain(..take).collect()
    }
}

/// Who runs a batch taken from the queue.
pub(crate) enum Next {
    /// The calling blocking caller: it leads this batch.
    Lead(Batch),
    /// A writer thread must lead it (no blocking caller is in it).
    Writer(Batch),
    /// Nobody: another leader has it, or the queue was empty.
    Nobody,
}

/// The queue and its counters.
#[derive(Default)]
pub(crate) struct Queue {
    inner: Mutex<Inner>,
    /// Transactions committed, and the jobs in them that changed something (for
    /// [`crate::Database::commit_stats`]).
    pub(crate) batches: AtomicU64,
    pub(crate) jobs: AtomicU64,
}

impl Queue {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves the queue consistent (no half-applied updates).
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues `job`; with a lane free, takes the next batch for the caller (blocking) or for a
    /// writer thread (async).
    pub(crate) fn push(&self, job: Box<dyn Job>, slot: &Arc<Slot>, lanes: usize) -> Next {
        let mut inner = self.lock();
        inner.pending.push((job, Arc::clone(slot)));
        if inner.leaders >= lanes.max(1) {
            return Next::Nobody;
        }
        inner.leaders += 1;
        let batch = inner.take();
        if slot.blocking {
            Next::Lead(batch)
        } else {
            Next::Writer(batch)
        }
    }

    /// A blocking caller's wait after [`Self::push`] gave it nothing to lead.
    pub(crate) fn wait(&self, slot: &Slot) -> Result<Answer, Batch> {
        slot.wait()
    }

    /// Counts a committed transaction and the jobs in it that were not refused.
    pub(crate) fn committed(&self, jobs: usize) {
        self.batches.fetch_add(1, Ordering::Relaxed);
        self.jobs.fetch_add(jobs as u64, Ordering::Relaxed);
    }

    /// After a batch: takes the next one and hands it to a blocking caller in it, or returns it
    /// for a writer thread; frees the lane when the queue is empty.
    pub(crate) fn hand_over(&self) -> Option<Batch> {
        let mut inner = self.lock();
        let next = inner.take();
        if next.is_empty() {
            inner.leaders -= 1;
            return None;
        }
        drop(inner);
        match next.iter().position(|(_, slot)| slot.blocking) {
            Some(i) => {
                let slot = Arc::clone(&next[i].1);
                slot.set(SlotState::Lead(next));
                None
            }
            None => Some(next),
        }
    }

    /// A leader's own answer, after the batch that held its job.
    pub(crate) fn own_answer(slot: &Slot) -> Answer {
        match slot.take() {
            SlotState::Done(answer) => answer,
            _ => unreachable!("a leader's own job is in the batch it ran"),
        }
    }

    #[cfg(test)]
    pub(crate) fn queued(&self) -> usize {
        self.lock().pending.len()
    }
}
