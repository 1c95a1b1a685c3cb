//! Runs one batch of the queue in one transaction.
//!
//! - Jobs run in arrival order; each sees the effects of those before it, so each caller gets
//!   exactly the answer it would have had alone at that position.
//! - A refused job (a model error, an API refusal) changes nothing, because every refusal is
//!   found before the first write (see `crate::exec`); the rest of its batch commits.
//! - If the storage fails mid-batch, the batch is abandoned and each job is retried in a
//!   transaction of its own, so one job's storage failure cannot sink the others.
//! - Access times that views noted meanwhile are written first, so the jobs' expiry sweeps see
//!   them.
//!
//! A batch gives way between its jobs (`sched_yield`): run alone, a batch of many jobs holds its
//! core for a whole time slice, and a reader woken meanwhile (a `view` on a server with few
//! cores) waits up to that long. A yield with nothing else to run costs under a microsecond; a
//! job costs tens. (BENCHMARKS.md, "HTTP server": the `view` p99.)

use super::Engine;
use super::jobs::ToolJob;
use super::queue::Answer;
use super::{Job, transact};
use crate::access;
use crate::blocks::ToolOutput;
use crate::command::Command;
use crate::error::Error;
use crate::exec;
use crate::history::Actor;
use crate::storage::{Backend, Fetch, Finish};
use crate::tree::Tree;
use crate::user_id::validate_user;

/// Runs memory-tool `commands` as one batch ([`crate::Database::execute_batch`]): those of a bad
/// user id are answered at once, the others in one transaction.
pub(crate) fn tool_batch<'a>(
    db: &Engine,
    commands: impl ExactSizeIterator<Item = (&'a String, &'a Command, Option<&'a Actor>)>,
) -> Vec<Result<ToolOutput, Error>> {
    let mut results: Vec<Option<Result<ToolOutput, Error>>> = Vec::with_capacity(commands.len());
    let mut valid: Vec<Box<dyn Job>> = Vec::new();
    let mut views = Vec::new();
    for (user, command, actor) in commands {
        match validate_user(user) {
            Ok(()) => {
                views.push(match command {
                    Command::View { path, view_range } => {
                        Some((user.as_str(), path.as_str(), *view_range))
                    }
                    _ => None,
                });
                valid.push(Box::new(ToolJob {
                    user: user.as_str().into(),
                    command: command.clone(),
                    actor: actor.cloned(),
                }));
                results.push(None);
            }
            Err(e) => results.push(Some(Err(e))),
        }
    }
    // Views alone need no write transaction: each is answered from a read snapshot, as
    // `MemoryStore::execute` answers it (so a batch of views works on a read-only database too).
    if !valid.is_empty() && views.iter().all(Option::is_some) {
        let mut views = views.into_iter().flatten();
        return results
            .into_iter()
            .map(|r| {
                r.unwrap_or_else(|| {
                    let (user, path, range) = views.next().expect("one view per valid command");
                    db.view(user, path, range)
                })
            })
            .collect();
    }
    let mut applied = run(db, &mut valid).into_iter();
    results
        .into_iter()
        .map(|r| {
            r.unwrap_or_else(|| {
                let answer = applied.next().expect("one answer per valid command")?;
                Ok(*answer
                    .downcast::<ToolOutput>()
                    .expect("a command answers with its output"))
            })
        })
        .collect()
}

/// Runs `jobs` as one batch and answers each, in order.
pub(crate) fn run(engine: &Engine, jobs: &mut [Box<dyn Job>]) -> Vec<Answer> {
    let notes = engine.access.take();
    match jobs {
        [] if notes.is_empty() => return Vec::new(),
        [job] if notes.is_empty() => return vec![alone(engine, job.as_mut())],
        _ => {}
    }
    let users: Vec<String> = jobs.iter().map(|j| j.user().to_owned()).collect();
    let mut lock: Vec<&str> = users.iter().map(String::as_str).collect();
    lock.extend(notes.iter().map(|(user, _, _)| user.as_str()));
    lock.sort_unstable();
    lock.dedup();
    // Every job's reads, announced at once: one round trip for the whole batch. (Each job's
    // fetches depend on its arguments alone, not on what the others write; the backend serves
    // later reads from what it fetched, updated by the batch's writes.)
    let nows: Vec<i64> = jobs.iter().map(|_| engine.now_ms()).collect();
    let mut fetches: Vec<Fetch> = Vec::new();
    if engine.backend.capabilities().prefetch {
        let mut one = Vec::new();
        for (job, &now) in jobs.iter().zip(&nows) {
            job.fetches(&engine.settings(job.user()), now, &mut one);
            for f in one.drain(..) {
                if !fetches.contains(&f) {
                    fetches.push(f);
                }
            }
        }
    }
    let hooks = &engine.pipeline.commits;
    let applied = transact(&engine.backend, hooks, &lock, false, |txn, changes| {
        txn.prefetch(&fetches, false)?;
        access::apply(txn, &notes, changes)?;
        let mut answers = Vec::with_capacity(jobs.len());
        let mut changed = 0;
        for (job, &now) in jobs.iter_mut().zip(&nows) {
            let settings = engine.settings(job.user());
            let user = job.user().to_owned();
            let rec = settings.recorder(now, job.actor(), changes);
            let mut tree = Tree::new(txn, &user, rec);
            exec::sweep(&mut tree, settings.expiry_cutoff(now))?;
            let ran = job.run(&mut tree, &settings, now)?;
            changed += usize::from(!ran.refused);
            answers.push(ran.answer);
            // Give way: a batch is hundreds of jobs of tens of microseconds each, and the
            // scheduler would otherwise let it keep its core for a whole time slice
            // (milliseconds) while a reader waits.
            std::thread::yield_now();
        }
        Ok(((answers, changed), Finish::Commit))
    });
    match applied {
        Ok((answers, changed)) => {
            engine.pipeline.queue.committed(changed);
            answers.into_iter().map(Ok).collect()
        }
        // The shared commit may have been applied: re-running a job (an `insert`, say) could
        // apply it twice. Every caller learns that the outcome is unknown. The notes are kept
        // (writing one twice changes nothing).
        Err(Error::OutcomeUnknown { location, reason }) => {
            engine.access.restore(notes);
            jobs.iter()
                .map(|_| {
                    Err(Error::OutcomeUnknown {
                        location: location.clone(),
                        reason: reason.clone(),
                    })
                })
                .collect()
        }
        // Any other failure rolled the shared transaction back: give every job a transaction
        // of its own, so each fails or succeeds alone, and keep the notes for the next batch.
        Err(_) => {
            engine.access.restore(notes);
            jobs.iter_mut()
                .map(|job| alone(engine, job.as_mut()))
                .collect()
        }
    }
}

/// Runs `job` in a transaction of its own, aborted when the job is refused.
fn alone(engine: &Engine, job: &mut dyn Job) -> Answer {
    let now = engine.now_ms();
    let user = job.user().to_owned();
    let settings = engine.settings(&user);
    let mut fetches = Vec::new();
    if engine.backend.capabilities().prefetch {
        job.fetches(&settings, now, &mut fetches);
    }
    let hooks = &engine.pipeline.commits;
    let answer = transact(
        &engine.backend,
        hooks,
        &[&user],
        job.frees_space(),
        |txn, changes| {
            txn.prefetch(&fetches, false)?;
            let rec = settings.recorder(now, job.actor(), changes);
            let mut tree = Tree::new(txn, &user, rec);
            exec::sweep(&mut tree, settings.expiry_cutoff(now))?;
            let ran = job.run(&mut tree, &settings, now)?;
            let finish = if ran.refused {
                Finish::Abort
            } else {
                Finish::Commit
            };
            Ok(((ran.answer, finish), finish))
        },
    );
    match answer {
        Ok((answer, finish)) => {
            if finish == Finish::Commit {
                engine.pipeline.queue.committed(1);
            }
            Ok(answer)
        }
        Err(e) => Err(e),
    }
}
