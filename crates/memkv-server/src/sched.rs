//! A scheduling hint for the writer thread (Linux; nothing elsewhere), so that on a machine
//! with few cores a `view` is not kept waiting behind the write batches.
//!
//! A write batch is throughput work that its clients wait milliseconds for anyway (the
//! flush), while a `view` is answered on an async worker in microseconds once it has a core.
//! `perf sched` on the server under the session replay (BENCHMARKS.md) found the writer
//! running during about a third of the workers' waits for a core of over 1 ms. So the writer
//! runs [`WRITER_NICE`] nice levels below the rest of the process (at most 19): when both want
//! a core, the workers get it first; when they are idle, the writer has the core to itself.
//!
//! Lowering one's own priority needs no privilege; a failure leaves the thread as it was.
//! (Tried and not kept: a 0.1 ms time slice for the async workers, `sched_setattr`: views did
//! no better.)

/// How many nice levels below the process the writer thread runs.
pub const WRITER_NICE: i32 = 10;

/// For the calling thread, the writer: [`WRITER_NICE`] levels nicer than it is (at most 19).
pub fn background() {
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
