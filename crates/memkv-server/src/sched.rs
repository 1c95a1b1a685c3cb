//! Scheduling hints (Linux; nothing elsewhere): the writer thread's lower priority, and the
//! opt-in pinning of the async workers, one per CPU (`memkv serve --pin-workers`).
//!
//! **The writer's priority.** A write batch is throughput work that its clients wait
//! milliseconds for anyway (the flush), while a `view` is answered on an async worker in
//! microseconds once it has a core. `perf sched` on the server under the session replay
//! (docs/perf-log.md, HTTP server) found the writer running during about a third of the
//! workers' waits for a core of over 1 ms. So the writer runs [`WRITER_NICE`] nice levels below
//! the rest of the process (at most 19): when both want a core, the workers get it first; when
//! they are idle, the writer has the core to itself. Lowering one's own priority needs no
//! privilege; a failure leaves the thread as it was. The async workers keep the kernel's default
//! time slice and priority: only the writer is moved.
//!
//! **Pinned workers.** Left to the kernel, a woken async worker is placed beside the other
//! one whenever the second core runs the writer, and waits out its time slice: on a 2-core
//! machine that is most of a `view`'s p99 (BENCHMARKS.md, HTTP server; the `perf sched`
//! measurements in docs/perf-log.md). [`Pinning`] gives each worker a CPU of its own from those
//! the process may use, so the workers always run side by side. The cost is that the kernel can
//! no longer move a worker away from a busy CPU: the writer and everything else on the machine
//! share CPUs with pinned workers. Hence opt-in, for a machine (or a cpuset) given to memkv;
//! never the default.

use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// How many nice levels below the process the writer thread runs.
pub const WRITER_NICE: i32 = 10;

/// For the calling thread, the writer: [`WRITER_NICE`] levels nicer than it is (at most 19).
pub fn background() {
    // The store starts its writer thread from the first thread that writes, which may be a
    // pinned async worker: the writer runs on every CPU of the process again.
    if let Some(cpus) = PROCESS_CPUS.get()
        && let Err(e) = run_on(cpus)
    {
        tracing::warn!(error = %e, "cannot let the writer thread run on every CPU");
    }
    #[cfg(target_os = "linux")]
    {
        // Linux keeps a nice value per thread: this one's, by its thread id.
        let me = Some(rustix::thread::gettid());
        let lowered = rustix::process::getpriority_process(me)
            .and_then(|n| rustix::process::setpriority_process(me, (n + WRITER_NICE).min(19)));
        if let Err(e) = lowered {
            tracing::debug!(error = %e, "cannot lower the writer thread's priority");
        }
    }
}

/// The CPUs the calling thread may run on, in order (empty where that cannot be known).
pub fn allowed_cpus() -> Vec<usize> {
    #[cfg(target_os = "linux")]
    {
        use rustix::thread::{CpuSet, sched_getaffinity};
        if let Ok(set) = sched_getaffinity(None) {
            return (0..CpuSet::MAX_CPU).filter(|&c| set.is_set(c)).collect();
        }
    }
    Vec::new()
}

/// Hands out CPUs to threads, one each, in turn: see the module documentation.
#[derive(Debug)]
pub struct Pinning {
    cpus: Vec<usize>,
    next: AtomicUsize,
}

/// The CPUs of the process when pinning was set up (what [`background`] frees the writer to).
static PROCESS_CPUS: std::sync::OnceLock<Vec<usize>> = std::sync::OnceLock::new();

thread_local! {
    /// Whether this thread has had its turn (pinned or not).
    static PLACED: Cell<bool> = const { Cell::new(false) };
}

impl Pinning {
    /// One CPU per thread, from `cpus` (the process's, from [`allowed_cpus`]), in order;
    /// `None` when there is nothing to pin to (not Linux, or the CPUs cannot be read).
    pub fn new(cpus: Vec<usize>) -> Option<Pinning> {
        if cpus.is_empty() {
            return None;
        }
        let _ = PROCESS_CPUS.set(cpus.clone());
        Some(Pinning {
            cpus,
            next: AtomicUsize::new(0),
        })
    }

    /// How many threads get a CPU of their own: as many as there are CPUs.
    pub fn threads(&self) -> usize {
        self.cpus.len()
    }

    /// Lets the calling thread run on every CPU of the process again. A new thread inherits
    /// the CPUs of the thread that started it, and tokio starts a blocking-pool thread from
    /// whichever thread asked for it, a pinned worker included: meant for tokio's
    /// `on_thread_start`, so that only the workers stay pinned.
    pub fn free_current(&self) {
        if let Err(e) = run_on(&self.cpus) {
            tracing::warn!(error = %e, "cannot let a thread run on every CPU");
        }
    }

    /// Pins the calling thread to the next CPU, the first time it calls (later calls cost a
    /// thread-local read). Meant for tokio's `on_thread_park`, which only the async workers
    /// call; a failure is logged and leaves the thread free.
    pub fn place_current(&self) {
        if PLACED.with(|p| p.replace(true)) {
            return;
        }
        let cpu = self.cpus[self.next.fetch_add(1, Relaxed) % self.cpus.len()];
        match run_on(&[cpu]) {
            Ok(()) => tracing::debug!(cpu, "async worker pinned"),
            Err(e) => tracing::warn!(cpu, error = %e, "cannot pin an async worker"),
        }
    }
}

/// Lets the calling thread run on `cpus` only (Linux; elsewhere, nothing and no error).
fn run_on(cpus: &[usize]) -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        let mut set = rustix::thread::CpuSet::new();
        for &cpu in cpus {
            set.set(cpu);
        }
        rustix::thread::sched_setaffinity(None, &set)?;
    }
    #[cfg(not(target_os = "linux"))]
    let _ = cpus;
    Ok(())
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn each_thread_gets_the_next_cpu_once() {
        let mine = allowed_cpus();
        assert!(!mine.is_empty(), "a Linux thread may run somewhere");
        let pinning = std::sync::Arc::new(Pinning::new(mine.clone()).unwrap());
        assert_eq!(pinning.threads(), mine.len());
        let placed: Vec<Vec<usize>> = (0..mine.len())
            .map(|_| {
                let pinning = std::sync::Arc::clone(&pinning);
                std::thread::spawn(move || {
                    pinning.place_current();
                    pinning.place_current(); // a second call changes nothing
                    allowed_cpus()
                })
                .join()
                .unwrap()
            })
            .collect();
        let expected: Vec<Vec<usize>> = mine.iter().map(|&c| vec![c]).collect();
        assert_eq!(placed, expected);
        // This thread never called: it may still run anywhere it could.
        assert_eq!(allowed_cpus(), mine);
    }

    #[test]
    fn a_thread_started_by_a_pinned_one_is_freed() {
        let mine = allowed_cpus();
        let pinning = std::sync::Arc::new(Pinning::new(mine.clone()).unwrap());
        let p = std::sync::Arc::clone(&pinning);
        let (pinned, inherited, freed) = std::thread::spawn(move || {
            p.place_current();
            let pinned = allowed_cpus();
            let q = std::sync::Arc::clone(&p);
            let (inherited, freed) = std::thread::spawn(move || {
                let inherited = allowed_cpus();
                q.free_current();
                (inherited, allowed_cpus())
            })
            .join()
            .unwrap();
            (pinned, inherited, freed)
        })
        .join()
        .unwrap();
        assert_eq!(pinned, vec![mine[0]]);
        assert_eq!(
            inherited, pinned,
            "Linux: a new thread inherits its starter's CPUs"
        );
        assert_eq!(freed, mine);
    }

    #[test]
    fn nothing_to_pin_to_is_no_pinning() {
        assert!(Pinning::new(Vec::new()).is_none());
    }
}
