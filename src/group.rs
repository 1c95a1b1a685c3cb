//! Group commit: write commands from concurrent callers share one write transaction and one
//! disk flush.
//!
//! A redb commit costs at least one flush, so a writer that commits each command alone is capped
//! by the disk's flush rate. Here every write command joins a queue. The first caller to find no
//! batch in progress becomes the leader: it takes everything queued (in arrival order), applies
//! it in one transaction, commits, and hands every caller its own result. Callers that arrive
//! while a batch is being flushed queue up and form the next batch, so batches grow exactly as
//! far as the load needs and a lone caller pays nothing but a mutex. A backend may allow several
//! batches at once ([`crate::storage::Capabilities::write_lanes`]: PostgreSQL, whose store locks order
//! batches that share a store, and which flushes concurrent commits together); each lane has a
//! leader, and a finishing leader hands the next batch to the oldest waiting caller.
//!
//! Semantics:
//! - Commands of a batch run in arrival order; each sees the effects of those before it, so each
//!   caller gets exactly the result it would have had alone at that position. Conflicting
//!   commands are ordered by their arrival in the queue.
//! - A command that fails (a model error) changes nothing, because every model error is found
//!   before the first write (see `exec`); the rest of its batch commits.
//! - A caller is answered only after the batch's commit is durable.
//! - If the storage fails mid-batch, the batch is abandoned and each of its commands is retried
//!   in a transaction of its own, so one command's storage failure cannot sink the others.
//!
//! A batch gives way between its commands (`sched_yield`): run alone, a batch of many commands
//! holds its core for a whole time slice, and a reader woken meanwhile (a `view` on a server
//! with few cores) waits up to that long. A yield with nothing else to run costs under a
//! microsecond; a command costs tens. (BENCHMARKS.md, "HTTP server": the `view` p99.)

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

use crate::blocks::ToolOutput;
use crate::command::Command;
use crate::error::Error;
use crate::history::Actor;

/// Most commands in one transaction; bounds the transaction's memory and the leader's work.
pub(crate) const MAX_BATCH: usize = 256;

/// One queued write command.
pub(crate) struct Request {
    pub user: String,
    pub command: Command,
    /// Who sends it (recorded in the versions it writes).
    pub actor: Option<Actor>,
}

impl Request {
    /// A request outside the queue (for [`crate::Store::execute_batch`]).
    pub(crate) fn unqueued(user: &str, command: &Command, actor: Option<&Actor>) -> Self {
        Request {
            user: user.to_owned(),
            command: command.clone(),
            actor: actor.cloned(),
        }
    }
}

/// Where one caller waits: for its result, or to be made the next leader. Each caller has its
/// own, so a finished batch wakes exactly its callers and one successor, not every waiter; and
/// a caller that never slept (a leader's own request) costs no wake-up call at all.
#[derive(Default)]
struct Slot {
    state: Mutex<Waiting>,
    wake: Condvar,
}

#[derive(Default)]
struct Waiting {
    state: SlotState,
    /// The caller sleeps on `wake` (set and read under the lock, so no wake-up is lost).
    asleep: bool,
}

/// A batch taken from the queue: the requests and where their callers wait.
type Batch = Vec<(Request, Arc<Slot>)>;

#[derive(Default)]
enum SlotState {
    #[default]
    Waiting,
    /// Lead this batch (taken from the queue for this caller, whose request is its first).
    Lead(Batch),
    Done(Result<ToolOutput, Error>),
}

impl Slot {
    fn lock(&self) -> MutexGuard<'_, Waiting> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn set(&self, state: SlotState) {
        let mut slot = self.lock();
        slot.state = state;
        let asleep = slot.asleep;
        drop(slot);
        // `notify_one` is a system call even when no one waits: only for a caller asleep.
        if asleep {
            self.wake.notify_one();
        }
    }

    /// Takes what the slot holds (leaving it waiting).
    fn take(&self) -> SlotState {
        std::mem::take(&mut self.lock().state)
    }
}

#[derive(Default)]
struct Queue {
    pending: Batch,
    /// Leaders running a batch (or chosen to), at most the backend's lanes.
    leaders: usize,
}

impl Queue {
    /// The next batch: the oldest requests, at most [`MAX_BATCH`].
    fn take(&mut self) -> Batch {
        let take = self.pending.len().min(MAX_BATCH);
        self.pending.drain(..take).collect()
    }
}

/// The queue in front of a store's write transactions.
#[derive(Default)]
pub(crate) struct GroupCommit {
    queue: Mutex<Queue>,
    /// Batches run, and commands in them (for [`crate::Store::commit_stats`]).
    pub(crate) batches: AtomicU64,
    pub(crate) commands: AtomicU64,
}

impl std::fmt::Debug for GroupCommit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupCommit").finish_non_exhaustive()
    }
}

impl GroupCommit {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        // A panic while holding the lock leaves the queue consistent (no half-applied updates).
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues `command` and returns its result once durable. `run` applies a batch (in order)
    /// and returns one result per request, in the same order. At most `lanes` batches run at
    /// once (1 for an embedded database with one writer; more where the database itself orders
    /// writers of one store, by locks, and flushes concurrent commits together).
    pub(crate) fn submit(
        &self,
        user: &str,
        command: &Command,
        actor: Option<&Actor>,
        lanes: usize,
        run: impl Fn(&[Request]) -> Vec<Result<ToolOutput, Error>>,
    ) -> Result<ToolOutput, Error> {
        let slot = Arc::new(Slot::default());
        let request = Request::unqueued(user, command, actor);
        let lead_now = {
            let mut queue = self.lock();
            queue.pending.push((request, slot.clone()));
            if queue.leaders < lanes.max(1) {
                queue.leaders += 1;
                Some(queue.take())
            } else {
                None
            }
        };
        let batch = match lead_now {
            Some(batch) => batch,
            None => {
                let mut waiting = slot.lock();
                loop {
                    match std::mem::take(&mut waiting.state) {
                        SlotState::Done(result) => return result,
                        SlotState::Lead(batch) => break batch,
                        SlotState::Waiting => {
                            waiting.asleep = true;
                            waiting = slot
                                .wake
                                .wait(waiting)
                                .unwrap_or_else(PoisonError::into_inner);
                            waiting.asleep = false;
                        }
                    }
                }
            }
        };
        // This caller leads: its own request is in the batch it was given.
        self.lead(batch, &run);
        match slot.take() {
            SlotState::Done(result) => result,
            _ => unreachable!("a leader's own request is in the batch it ran"),
        }
    }

    /// Runs one batch, answers its callers, and hands leadership (with the next batch, taken
    /// from the queue here, so that no request is handed to two leaders) to the oldest waiting
    /// caller.
    fn lead(&self, batch: Batch, run: &impl Fn(&[Request]) -> Vec<Result<ToolOutput, Error>>) {
        self.batches.fetch_add(1, Ordering::Relaxed);
        self.commands
            .fetch_add(batch.len() as u64, Ordering::Relaxed);
        let (requests, slots): (Vec<Request>, Vec<Arc<Slot>>) = batch.into_iter().unzip();
        let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| run(&requests)));
        match outcome {
            Ok(results) => {
                debug_assert_eq!(results.len(), slots.len());
                for (slot, result) in slots.iter().zip(results) {
                    slot.set(SlotState::Done(result));
                }
            }
            Err(_) => {
                // A bug in a command: answer every caller of the batch with an error (none of
                // it was committed) rather than leave them waiting, and keep the queue going.
                for slot in &slots {
                    slot.set(SlotState::Done(Err(Error::storage(
                        "the writer thread panicked; the command was not applied",
                    ))));
                }
            }
        }
        {
            let mut queue = self.lock();
            let next = queue.take();
            match next.first() {
                Some((_, slot)) => {
                    let slot = Arc::clone(slot);
                    slot.set(SlotState::Lead(next));
                }
                None => queue.leaders -= 1,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::AtomicUsize;

    /// Waits (at most 10 s, else fails) until `done` holds.
    fn wait_until(done: impl Fn() -> bool) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !done() {
            assert!(
                std::time::Instant::now() < deadline,
                "the awaited state never came"
            );
            std::thread::yield_now();
        }
    }

    #[test]
    fn concurrent_callers_share_batches_and_get_their_own_results() {
        let group = Arc::new(GroupCommit::default());
        let batches = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..16)
            .map(|i| {
                let (group, batches) = (group.clone(), batches.clone());
                std::thread::spawn(move || {
                    let command = Command::Delete {
                        path: format!("/memories/{i}"),
                    };
                    let out = group
                        .submit("u", &command, None, 1, |batch| {
                            // The first "flush" lasts until every other caller is queued
                            // behind it (an event, not a time).
                            if batches.fetch_add(1, Ordering::SeqCst) == 0 {
                                wait_until(|| group.lock().pending.len() == 15);
                            }
                            batch
                                .iter()
                                .map(|r| match &r.command {
                                    Command::Delete { path } => Ok(ToolOutput {
                                        content: path.clone(),
                                        is_error: false,
                                    }),
                                    _ => unreachable!(),
                                })
                                .collect()
                        })
                        .unwrap();
                    assert_eq!(out.content, format!("/memories/{i}"));
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        // The first caller's batch, then one batch of the 15 queued behind it.
        let n = batches.load(Ordering::SeqCst);
        assert_eq!(n, 2, "16 callers took {n} batches");
    }

    #[test]
    fn batches_run_at_once_up_to_the_lanes_and_never_beyond() {
        for lanes in [1, 3] {
            let group = Arc::new(GroupCommit::default());
            let (running, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
            let submitted = Arc::new(AtomicUsize::new(0));
            let threads: Vec<_> = (0..24)
                .map(|i| {
                    let (group, running, most) = (group.clone(), running.clone(), most.clone());
                    let submitted = submitted.clone();
                    std::thread::spawn(move || {
                        let command = Command::Delete {
                            path: format!("/memories/{i}"),
                        };
                        submitted.fetch_add(1, Ordering::SeqCst);
                        let out = group
                            .submit("u", &command, None, lanes, |batch| {
                                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                                most.fetch_max(now, Ordering::SeqCst);
                                // A batch lasts until every lane runs one, or no other batch
                                // can come (every caller queued, and the queue empty).
                                wait_until(|| {
                                    running.load(Ordering::SeqCst) >= lanes
                                        || (submitted.load(Ordering::SeqCst) == 24
                                            && group.lock().pending.is_empty())
                                });
                                running.fetch_sub(1, Ordering::SeqCst);
                                batch
                                    .iter()
                                    .map(|r| match &r.command {
                                        Command::Delete { path } => Ok(ToolOutput {
                                            content: path.clone(),
                                            is_error: false,
                                        }),
                                        _ => unreachable!(),
                                    })
                                    .collect()
                            })
                            .unwrap();
                        assert_eq!(out.content, format!("/memories/{i}"));
                    })
                })
                .collect();
            for t in threads {
                t.join().unwrap();
            }
            let most = most.load(Ordering::SeqCst);
            assert!(most <= lanes, "{most} batches at once with {lanes} lanes");
            assert_eq!(most, lanes, "24 callers never filled {lanes} lanes");
            assert_eq!(group.commands.load(Ordering::SeqCst), 24);
        }
    }
}
