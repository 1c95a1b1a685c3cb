//! The server's write queue, for an embedded store: async handlers queue write commands here
//! and await their results; one thread of its own takes everything queued, runs it in one
//! transaction with one flush ([`memkv::Store::execute_batch_as`]), and answers each.
//!
//! This is the library's group commit (same batches, same order, same answers), without a
//! blocked thread per waiting request: a write costs its handler no hop to tokio's blocking
//! pool, and 64 concurrent writers cost the machine one writer thread instead of 64 threads
//! handing leadership to each other. A request is answered only once its batch is durable.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::thread::JoinHandle;

use memkv::{Actor, Command, Error, OwnedUserHandle, Store, ToolOutput};
use tokio::sync::{mpsc, oneshot};

/// Most commands in one transaction (as the library's group commit).
const MAX_BATCH: usize = 256;

type Job = (
    (String, Command, Option<Actor>),
    oneshot::Sender<Result<ToolOutput, Error>>,
);

/// The queue and its thread; dropping it lets the thread finish what is queued and waits.
#[derive(Debug)]
pub struct Writer {
    queue: Option<mpsc::UnboundedSender<Job>>,
    thread: Option<JoinHandle<()>>,
    counts: Arc<Counts>,
}

/// Batches committed, and commands in them.
#[derive(Debug, Default)]
struct Counts {
    batches: AtomicU64,
    commands: AtomicU64,
}

impl Writer {
    /// Starts the writer thread for `store`.
    ///
    /// # Errors
    /// The thread cannot be started.
    pub fn start(store: Arc<Store>) -> std::io::Result<Writer> {
        let (queue, jobs) = mpsc::unbounded_channel();
        let counts = Arc::new(Counts::default());
        let thread = std::thread::Builder::new()
            .name("memkv-writer".into())
            .spawn({
                let counts = Arc::clone(&counts);
                move || {
                    crate::sched::background();
                    run(&store, jobs, &counts)
                }
            })?;
        Ok(Writer {
            queue: Some(queue),
            thread: Some(thread),
            counts,
        })
    }

    /// Runs `command` for `user` (recorded as made by its actor) in the next batch; returns once
    /// that batch is durable.
    pub async fn write(
        &self,
        user: &OwnedUserHandle,
        command: Command,
    ) -> Result<ToolOutput, Error> {
        let (answer, answered) = oneshot::channel();
        let job = (
            (
                user.id().to_owned(),
                command,
                user.handle().actor().cloned(),
            ),
            answer,
        );
        let queued = self.queue.as_ref().is_some_and(|q| q.send(job).is_ok());
        if !queued {
            return Err(stopped());
        }
        answered.await.unwrap_or_else(|_| Err(stopped()))
    }

    /// Write batches committed by this queue, and the commands in them.
    pub fn stats(&self) -> (u64, u64) {
        (
            self.counts.batches.load(Relaxed),
            self.counts.commands.load(Relaxed),
        )
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        drop(self.queue.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn stopped() -> Error {
    Error::Storage("the writer thread stopped; the command was not applied".into())
}

/// The writer thread: waits for a job, takes everything queued behind it (at most
/// [`MAX_BATCH`]), runs the lot as one batch, answers each; until every sender is gone.
fn run(store: &Store, mut jobs: mpsc::UnboundedReceiver<Job>, counts: &Counts) {
    let mut batch: Vec<Job> = Vec::new();
    while let Some(first) = jobs.blocking_recv() {
        batch.push(first);
        while batch.len() < MAX_BATCH {
            match jobs.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        let (commands, answers): (Vec<_>, Vec<_>) = batch.drain(..).unzip();
        counts.batches.fetch_add(1, Relaxed);
        counts.commands.fetch_add(commands.len() as u64, Relaxed);
        let results =
            std::panic::catch_unwind(AssertUnwindSafe(|| store.execute_batch_as(&commands)));
        match results {
            Ok(results) => {
                for (answer, result) in answers.into_iter().zip(results) {
                    // The request may have gone (its client left): the write stands.
                    let _ = answer.send(result);
                }
            }
            Err(_) => {
                // A bug in a command: none of the batch was committed; say so to each.
                tracing::error!("a write batch panicked; its commands were not applied");
                for answer in answers {
                    let _ = answer.send(Err(Error::Storage(
                        "the writer thread panicked; the command was not applied".into(),
                    )));
                }
            }
        }
    }
}
