//! The write pipeline: the one path every write of every face takes.
//!
//! ```text
//! intent (a Job)  ─▶  queue (group commit)  ─▶  transaction: locks, announced reads,
//!                                               expiry sweep, each job, changes noted
//!                 ◀─  answers  ◀─  commit hooks  ◀─  commit
//! ```
//!
//! - A write to one store (a memory-tool command, a memory-stores API write: [`Job`]) is
//!   submitted with [`submit`] (blocking) or [`submit_async`] (a
//!   future, for async servers; no runtime needed). Both join one queue (`queue`), whose
//!   batches share a transaction and a flush; `batch` runs a batch.
//! - A write over many stores or the whole database (import, restore from a directory, expiry
//!   and pruning over every store, store records, migrations) runs alone through [`transact`],
//!   the same transaction wrapper a batch uses.
//! - [`transact`] is the only caller of [`crate::storage::Backend::write`]. It gives the
//!   transaction a fresh [`Changes`], where every change is noted as it is made
//!   (`crate::history::change`), and after a commit hands them to the database's commit hooks, before
//!   any writer is answered. History is recorded in the same place a change is made
//!   (`crate::history::append`, which also notes the change).

pub(crate) mod batch;
mod engine;
pub(crate) mod jobs;
mod queue;
mod signal;
mod writers;

use std::any::Any;
use std::sync::Arc;

pub(crate) use engine::{Clock, Engine, Scope};
use queue::{Answer, Next, Pending, Queue, Slot};
pub use signal::CommitSignal;
pub(crate) use signal::{AsSignal, Signal};
pub(crate) use writers::Writers;

use crate::changes::ChangeRetention;
use crate::error::Error;
use crate::history::Actor;
use crate::history::change::{Changes, Hooks};
use crate::limits::Settings;
use crate::storage::{AnyBackend, Backend, Fetch, Finish, WriteTxn};
use crate::tree::Tree;

/// One write to one store, as the queue carries it. It may run more than once (a batch that
/// fails is retried one job at a time), so [`Self::run`] leaves the job as it found it.
pub(crate) trait Job: Send + 'static {
    /// The store (user id) it writes.
    fn user(&self) -> &str;
    /// Who makes it (recorded in its versions).
    fn actor(&self) -> Option<&Actor>;
    /// Whether it frees space (see [`crate::storage::Backend::write_freeing`]).
    fn frees_space(&self) -> bool;
    /// What it reads before its first write, for a backend where reads cost round trips.
    fn fetches(&self, settings: &Settings, now_ms: i64, out: &mut Vec<Fetch>);
    /// Runs in the transaction, after the store's expiry sweep. A refused job (a model error, a
    /// refusal of the API) has written nothing: every refusal is found before the first write.
    fn run(
        &mut self,
        tree: &mut Tree<'_, dyn WriteTxn + '_>,
        settings: &Settings,
        now_ms: i64,
    ) -> Result<Ran, Error>;
}

/// What a job's run answers.
pub(crate) struct Ran {
    pub answer: Box<dyn Any + Send>,
    /// Refused: alone, its transaction is aborted (rolling back the sweep too).
    pub refused: bool,
}

/// The queue, its writer threads and what every commit does besides its writes.
#[derive(Default)]
pub(crate) struct Pipeline {
    queue: Queue,
    pub(crate) writers: Writers,
    pub(crate) commits: Commits,
}

/// What every commit does besides its writes: the change log's entries (and its retention),
/// then the commit hooks.
#[derive(Debug, Clone, Default)]
pub(crate) struct Commits {
    pub(crate) hooks: Hooks,
    pub(crate) changes: ChangeRetention,
    /// Wakes the futures waiting for a commit ([`CommitSignal`]).
    pub(crate) signal: Arc<Signal>,
}

impl std::fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pipeline")
            .field("commits", &self.commits)
            .finish_non_exhaustive()
    }
}

impl Pipeline {
    pub(crate) fn new(commits: Commits) -> Pipeline {
        Pipeline {
            commits,
            ..Pipeline::default()
        }
    }

    /// Batches run and jobs in them.
    pub(crate) fn stats(&self) -> (u64, u64) {
        use std::sync::atomic::Ordering::Relaxed;
        (
            self.queue.batches.load(Relaxed),
            self.queue.jobs.load(Relaxed),
        )
    }

    /// Runs `batch` and answers its callers; returns the next batch when a writer thread must
    /// lead it.
    pub(crate) fn lead(&self, engine: &Engine, batch: queue::Batch) -> Option<queue::Batch> {
        let answered = self.run(engine, batch);
        answered.deliver();
        self.queue.hand_over()
    }

    /// Runs `batch`; its callers are answered by [`Answered::deliver`].
    pub(crate) fn run(&self, engine: &Engine, batch: queue::Batch) -> Answered {
        let (mut jobs, slots): (Vec<Box<dyn Job>>, Vec<Arc<Slot>>) = batch.into_iter().unzip();
        let answers = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            batch::run(engine, &mut jobs)
        }));
        let answers = match answers {
            Ok(answers) => {
                debug_assert_eq!(answers.len(), slots.len());
                answers
            }
            // A bug in a job: every caller of the batch gets an error (none of it was
            // committed) rather than waiting forever, and the queue goes on.
            Err(_) => slots
                .iter()
                .map(|_| Err(Error::storage("the write panicked; it was not applied")))
                .collect(),
        };
        Answered { slots, answers }
    }

    /// After a batch: the next one, when a writer thread must lead it (see [`Queue::hand_over`]).
    pub(crate) fn hand_over(&self) -> Option<queue::Batch> {
        self.queue.hand_over()
    }
}

/// A run batch's answers, not yet given to its callers.
pub(crate) struct Answered {
    slots: Vec<Arc<Slot>>,
    answers: Vec<Answer>,
}

impl Answered {
    /// Answers each caller.
    pub(crate) fn deliver(self) {
        for (slot, answer) in self.slots.iter().zip(self.answers) {
            slot.answer(answer);
        }
    }
}

fn lanes(db: &Engine) -> usize {
    db.backend.capabilities().write_lanes
}

/// Runs `job` in the next batch and returns its answer once durable (blocking).
pub(crate) fn submit<R: 'static>(db: &Engine, job: Box<dyn Job>) -> Result<R, Error> {
    let slot = Slot::new(true);
    let pipeline = &db.pipeline;
    let batch = match pipeline.queue.push(job, &slot, lanes(db)) {
        Next::Lead(batch) => batch,
        Next::Nobody => match pipeline.queue.wait(&slot) {
            Ok(answer) => return downcast(answer),
            Err(batch) => batch,
        },
        Next::Writer(_) => unreachable!("a blocking caller leads its own batch"),
    };
    let mut next = pipeline.lead(db, batch);
    // The next batch holds only async callers: a writer thread leads it, or, when this
    // database has none, this caller does.
    while let Some(batch) = next {
        next = match pipeline.writers.home() {
            Some(home) => {
                pipeline.writers.send(&home, batch);
                None
            }
            None => pipeline.lead(db, batch),
        };
    }
    downcast(Queue::own_answer(&slot))
}

/// Runs `job` in the next batch; the future resolves once that batch is durable. The batch is
/// run by a blocking caller in it or by one of the database's writer threads (started on first
/// use, one per write lane), never by the task that awaits.
pub(crate) async fn submit_async<R: 'static>(
    db: &Arc<Engine>,
    job: Box<dyn Job>,
) -> Result<R, Error> {
    let pipeline = &db.pipeline;
    pipeline.writers.set_home(db);
    let slot = Slot::new(false);
    match pipeline.queue.push(job, &slot, lanes(db)) {
        Next::Writer(batch) => pipeline.writers.send(db, batch),
        Next::Nobody => {}
        Next::Lead(_) => unreachable!("an async caller never leads"),
    }
    downcast(Pending(slot).await)
}

fn downcast<R: 'static>(answer: Answer) -> Result<R, Error> {
    let answer = answer?;
    match answer.downcast::<R>() {
        Ok(r) => Ok(*r),
        Err(_) => unreachable!("a job answers with its submitter's type"),
    }
}

/// Runs `f` in one write transaction locking the stores `lock` (through
/// [`Backend::write_freeing`] when `frees_space`), with a fresh [`Changes`] for each attempt;
/// before the commit, writes the change log's entries of the changes noted
/// ([`crate::changes::write`]: in the same transaction); after it, hands the changes to the
/// hooks. The one caller of the backend's writes.
pub(crate) fn transact<R>(
    backend: &AnyBackend,
    commits: &Commits,
    lock: &[&str],
    frees_space: bool,
    mut f: impl FnMut(&mut dyn WriteTxn, &Changes) -> Result<(R, Finish), Error>,
) -> Result<R, Error> {
    let mut noted = Changes::default();
    let trims = backend.capabilities().embedded;
    let mut changes = Vec::new();
    let run = |txn: &mut dyn WriteTxn| {
        noted = Changes::default();
        let (r, finish) = f(txn, &noted)?;
        changes = noted.take();
        if finish == Finish::Commit {
            let erased = noted.take_erased();
            crate::changes::write(txn, &changes, &erased, &commits.changes, trims)?;
        }
        Ok(((r, finish), finish))
    };
    let (r, finish) = if frees_space {
        backend.write_freeing(lock, run)?
    } else {
        backend.write(lock, run)?
    };
    if finish == Finish::Commit && !changes.is_empty() {
        commits.hooks.committed(&changes);
        commits.signal.committed();
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

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

    /// A job that writes nothing and answers its number; the first one run holds its batch
    /// until `hold` other jobs are queued behind it (an event, not a time).
    struct Probe {
        n: usize,
        engine: Arc<Engine>,
        hold: usize,
        runs: Arc<AtomicUsize>,
    }

    impl Job for Probe {
        fn user(&self) -> &str {
            "u"
        }
        fn actor(&self) -> Option<&Actor> {
            None
        }
        fn frees_space(&self) -> bool {
            false
        }
        fn fetches(&self, _: &Settings, _: i64, _: &mut Vec<Fetch>) {}
        fn run(
            &mut self,
            _: &mut Tree<'_, dyn WriteTxn + '_>,
            _: &Settings,
            _: i64,
        ) -> Result<Ran, Error> {
            if self.runs.fetch_add(1, Ordering::SeqCst) == 0 {
                wait_until(|| self.engine.pipeline.queue.queued() == self.hold);
            }
            Ok(Ran {
                answer: Box::new(self.n),
                refused: false,
            })
        }
    }

    #[test]
    fn concurrent_callers_share_batches_and_get_their_own_answers() {
        let db = crate::Database::in_memory().unwrap();
        let engine = Arc::clone(&db.engine);
        let runs = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..16)
            .map(|n| {
                let (engine, runs) = (Arc::clone(&engine), Arc::clone(&runs));
                std::thread::spawn(move || {
                    let job = Probe {
                        n,
                        engine: Arc::clone(&engine),
                        hold: 15,
                        runs,
                    };
                    let answer: usize = submit(&engine, Box::new(job)).unwrap();
                    assert_eq!(answer, n);
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        // The first caller's batch, then one batch of the 15 queued behind it.
        assert_eq!(engine.pipeline.stats(), (2, 16));
    }

    #[test]
    fn memory_stores_api_writes_share_the_batches_of_the_tool() {
        // A held batch, then 8 memory-stores API creates and 8 tool commands queued behind it:
        // they run as one batch, each with its own answer.
        let db = Arc::new(crate::Database::in_memory().unwrap());
        let engine = Arc::clone(&db.engine);
        let runs = Arc::new(AtomicUsize::new(0));
        let first = {
            let (engine, runs) = (Arc::clone(&engine), Arc::clone(&runs));
            std::thread::spawn(move || {
                let job = Probe {
                    n: 0,
                    engine: Arc::clone(&engine),
                    hold: 16,
                    runs,
                };
                submit::<usize>(&engine, Box::new(job)).unwrap()
            })
        };
        wait_until(|| runs.load(Ordering::SeqCst) == 1);
        let writers: Vec<_> = (0..16)
            .map(|n| {
                let db = Arc::clone(&db);
                std::thread::spawn(move || {
                    let user = db.user("u").unwrap();
                    let path = format!("/memories/{n}.md");
                    if n % 2 == 0 {
                        let memory = user.create_memory(&path, "api").unwrap().unwrap();
                        assert_eq!(memory.path, path);
                    } else {
                        let input = serde_json::json!(
                            {"command": "create", "path": path, "file_text": "tool"}
                        );
                        assert!(!user.execute_json(&input).unwrap().is_error);
                    }
                })
            })
            .collect();
        for t in writers {
            t.join().unwrap();
        }
        assert_eq!(first.join().unwrap(), 0);
        assert_eq!(engine.pipeline.stats(), (2, 17));
        assert_eq!(db.user("u").unwrap().files().unwrap().len(), 16);
    }

    #[test]
    fn batches_run_at_once_up_to_the_lanes_and_never_beyond() {
        for lanes in [1, 3] {
            let queue = Arc::new(Queue::default());
            let (running, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
            let submitted = Arc::new(AtomicUsize::new(0));
            let db = crate::Database::in_memory().unwrap();
            let engine = Arc::clone(&db.engine);
            let threads: Vec<_> = (0..24)
                .map(|n| {
                    let (queue, running, most) = (queue.clone(), running.clone(), most.clone());
                    let (submitted, engine) = (submitted.clone(), engine.clone());
                    std::thread::spawn(move || {
                        let slot = Slot::new(true);
                        let job = Box::new(Probe {
                            n,
                            engine,
                            hold: usize::MAX,
                            runs: Arc::new(AtomicUsize::new(1)),
                        });
                        submitted.fetch_add(1, Ordering::SeqCst);
                        let mut batch = match queue.push(job, &slot, lanes) {
                            Next::Lead(batch) => Some(batch),
                            Next::Nobody => queue.wait(&slot).err(),
                            Next::Writer(_) => unreachable!(),
                        };
                        // Lead like `Pipeline::lead`: a batch lasts until every lane runs one,
                        // or no other batch can come (every caller queued, the queue empty).
                        while let Some(b) = batch.take() {
                            let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                            most.fetch_max(now, Ordering::SeqCst);
                            wait_until(|| {
                                running.load(Ordering::SeqCst) >= lanes
                                    || (submitted.load(Ordering::SeqCst) == 24
                                        && queue.queued() == 0)
                            });
                            running.fetch_sub(1, Ordering::SeqCst);
                            queue.committed(b.len());
                            for (_, s) in &b {
                                s.answer(Ok(Box::new(())));
                            }
                            batch = queue.hand_over();
                        }
                    })
                })
                .collect();
            for t in threads {
                t.join().unwrap();
            }
            let most = most.load(Ordering::SeqCst);
            assert!(most <= lanes, "{most} batches at once with {lanes} lanes");
            assert_eq!(most, lanes, "24 callers never filled {lanes} lanes");
            assert_eq!(queue.jobs.load(Ordering::SeqCst), 24);
        }
    }
}
