//! A database's writer threads: they lead the batches that hold only async callers, so an async
//! server's handlers await their writes without blocking a worker or a thread of their own.
//! Started on the first async write, one per write lane; 64 concurrent async writers cost the
//! machine one thread on an embedded database. They end when the database is dropped.

use std::sync::mpsc::{self, Receiver, Sender};

use crate::storage::Backend;
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};
use std::thread::{JoinHandle, ThreadId};

use super::Engine;
use super::queue::Batch;

type Work = (Arc<Engine>, Batch);

#[derive(Default)]
pub(crate) struct Writers {
    /// The engine, set by the first async write.
    home: OnceLock<Weak<Engine>>,
    /// Run first on each writer thread (a server lowers their priority).
    setup: OnceLock<fn()>,
    started: Mutex<Option<Started>>,
}

struct Started {
    work: Sender<Work>,
    threads: Vec<JoinHandle<()>>,
}

impl Writers {
    pub(crate) fn set_home(&self, engine: &Arc<Engine>) {
        if self.home.get().is_none() {
            let _ = self.home.set(Arc::downgrade(engine));
        }
    }

    pub(crate) fn home(&self) -> Option<Arc<Engine>> {
        self.home.get().and_then(Weak::upgrade)
    }

    /// Sets what each writer thread runs first; `false` when it was set already or the threads
    /// have started (they read it once, when they start).
    pub(crate) fn set_setup(&self, setup: fn()) -> bool {
        let started = self.started.lock().unwrap_or_else(PoisonError::into_inner);
        started.is_none() && self.setup.set(setup).is_ok()
    }

    /// Hands `batch` to a writer thread, starting them on first use.
    pub(crate) fn send(&self, engine: &Arc<Engine>, batch: Batch) {
        let mut started = self.started.lock().unwrap_or_else(PoisonError::into_inner);
        if started.is_none() {
            *started = Some(self.start(engine.backend.capabilities().write_lanes));
        }
        let work = (Arc::clone(engine), batch);
        let sent = started.as_ref().map(|s| s.work.send(work));
        drop(started);
        if let Some(Err(mpsc::SendError((engine, batch)))) = sent {
            // No writer thread could be started (the system refused every one): the batch is
            // led here, on the caller's thread, rather than never.
            let mut next = Some(batch);
            while let Some(batch) = next {
                next = engine.pipeline.lead(&engine, batch);
            }
        }
    }

    fn start(&self, lanes: usize) -> Started {
        let (work, queue) = mpsc::channel::<Work>();
        let queue = Arc::new(Mutex::new(queue));
        let setup = self.setup.get().copied();
        let threads = (0..lanes.max(1))
            .filter_map(|_| {
                let queue = Arc::clone(&queue);
                std::thread::Builder::new()
                    .name("memkv-writer".into())
                    .spawn(move || {
                        if let Some(setup) = setup {
                            setup();
                        }
                        serve(&queue);
                    })
                    .ok()
            })
            .collect();
        Started { work, threads }
    }
}

/// A writer thread: leads each batch it is given, and the batches after it that no blocking
/// caller can lead, until the database is dropped.
fn serve(queue: &Mutex<Receiver<Work>>) {
    loop {
        let work = queue.lock().unwrap_or_else(PoisonError::into_inner).recv();
        let Ok((engine, mut batch)) = work else {
            return;
        };
        loop {
            let answered = engine.pipeline.run(&engine, batch);
            match engine.pipeline.hand_over() {
                Some(next) => {
                    answered.deliver();
                    batch = next;
                }
                None => {
                    // The engine's handle goes before the callers are answered: each of them holds
                    // one until its answer, so the last handle is let go on a caller's thread
                    // and the database is closed when that caller drops the store, not later
                    // here (a caller reopening the file must not find it still open).
                    drop(engine);
                    answered.deliver();
                    break;
                }
            }
        }
    }
}

impl Drop for Writers {
    fn drop(&mut self) {
        let started = self
            .started
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let Some(Started { work, threads }) = started else {
            return;
        };
        drop(work);
        let here: ThreadId = std::thread::current().id();
        for thread in threads {
            // The store may be dropped by a writer thread itself: it ends once this returns.
            if thread.thread().id() != here {
                let _ = thread.join();
            }
        }
    }
}
