//! Group commit: write commands from concurrent callers share one write transaction and one
//! disk flush.
//!
//! A redb commit costs at least one flush, so a writer that commits each command alone is capped
//! by the disk's flush rate. Here every write command joins a queue. The first caller to find no
//! batch in progress becomes the leader: it takes everything queued (in arrival order), applies
//! it in one transaction, commits, and hands every caller its own result. Callers that arrive
//! while a batch is being flushed queue up and form the next batch, so batches grow exactly as
//! far as the load needs and a lone caller pays nothing but a mutex.
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

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

use crate::ToolOutput;
use crate::command::Command;
use crate::error::Error;

/// Most commands in one transaction; bounds the transaction's memory and the leader's work.
pub(crate) const MAX_BATCH: usize = 256;

/// One queued write command.
pub(crate) struct Request {
    ticket: u64,
    pub user: String,
    pub command: Command,
}

impl Request {
    /// A request outside the queue (for [`crate::Store::execute_batch`]).
    pub(crate) fn unqueued(user: &str, command: &Command) -> Self {
        Request {
            ticket: 0,
            user: user.to_owned(),
            command: command.clone(),
        }
    }
}

#[derive(Default)]
struct State {
    pending: Vec<Request>,
    leader: bool,
    next_ticket: u64,
    done: HashMap<u64, Result<ToolOutput, Error>>,
}

/// The queue in front of a store's write transactions.
#[derive(Default)]
pub(crate) struct GroupCommit {
    state: Mutex<State>,
    wake: Condvar,
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
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves the state consistent (no half-applied updates).
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues `command` and returns its result once durable. `run` applies a batch (in order)
    /// and returns one result per request, in the same order.
    pub(crate) fn submit(
        &self,
        user: &str,
        command: &Command,
        run: impl Fn(&[Request]) -> Vec<Result<ToolOutput, Error>>,
    ) -> Result<ToolOutput, Error> {
        let mut state = self.lock();
        let ticket = state.next_ticket;
        state.next_ticket += 1;
        state.pending.push(Request {
            ticket,
            user: user.to_owned(),
            command: command.clone(),
        });
        loop {
            if let Some(result) = state.done.remove(&ticket) {
                return result;
            }
            if !state.leader {
                state.leader = true;
                let take = state.pending.len().min(MAX_BATCH);
                let batch: Vec<Request> = state.pending.drain(..take).collect();
                drop(state);
                self.batches.fetch_add(1, Ordering::Relaxed);
                self.commands
                    .fetch_add(batch.len() as u64, Ordering::Relaxed);
                let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| run(&batch)));
                state = self.lock();
                let results = match outcome {
                    Ok(results) => results,
                    Err(panic) => {
                        // Never leave followers waiting on a leader that is gone.
                        for request in &batch {
                            state.done.insert(
                                request.ticket,
                                Err(Error::storage(
                                    "the writer thread panicked; the command was not applied",
                                )),
                            );
                        }
                        state.leader = false;
                        self.wake.notify_all();
                        drop(state);
                        std::panic::resume_unwind(panic);
                    }
                };
                debug_assert_eq!(results.len(), batch.len());
                for (request, result) in batch.iter().zip(results) {
                    state.done.insert(request.ticket, result);
                }
                state.leader = false;
                self.wake.notify_all();
                continue;
            }
            state = self
                .wake
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::AtomicUsize;

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
                        .submit("u", &command, |batch| {
                            batches.fetch_add(1, Ordering::SeqCst);
                            // A slow "flush", so that callers pile up behind it.
                            std::thread::sleep(std::time::Duration::from_millis(20));
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
        let n = batches.load(Ordering::SeqCst);
        assert!(n < 16, "16 callers took {n} batches: no batching happened");
    }
}
