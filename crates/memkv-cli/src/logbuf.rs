//! The server's log lines, written to standard error by a thread of their own, many to a write.
//!
//! `memkv serve` logs one line per request. Written at once, each line cost the async worker
//! that answered the request a `write(2)` on standard error, and the two workers contended for
//! its lock. Here a line is appended to a buffer, and a flusher thread writes the buffer out
//! every [`EVERY`], or as soon as it holds [`FLUSH_AT`] bytes: the `view` p99 of the load
//! generator's agent sessions went from 2.18–2.33 ms to 2.08–2.15 ms (BENCHMARKS.md).
//!
//! Nothing is lost and memory stays bounded: a line that would take the buffer past [`CAP`] is
//! written out by its own thread together with everything before it. Lines keep their order:
//! whoever writes to standard error holds `out` while taking the buffer. Dropping the
//! [`LogBuffer`] (the end of `serve`, an error included) writes out what is left; so does a
//! panic, before its message. A process killed outright loses at most the last [`EVERY`].
//!
//! Why not `tracing-appender`'s `NonBlocking` (issue 43 asked): built with `lossy(false)` it
//! is lossless and bounded too, and over a `BufWriter` its worker writes many lines to a
//! write. What it lacks is the panic's order: its queue is written out only by its worker or
//! when its `WorkerGuard` is dropped, and nothing else can flush it, so a panic on an async
//! worker prints its message (straight to standard error) while the lines logged before it,
//! the request that panicked among them, may still be queued; here the panic hook writes them
//! out first. Its bound is also a count of lines (128,000 by default), not of bytes, and the
//! lock file does not have it.

use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

/// How long a line may wait in the buffer.
const EVERY: Duration = Duration::from_millis(10);
/// Buffered bytes that wake the flusher at once.
const FLUSH_AT: usize = 64 << 10;
/// Buffered bytes past which a line is written out by the thread that logs it.
const CAP: usize = 1 << 20;

struct Shared {
    /// Where lines go (standard error); held while writing, and taken before `buf`.
    out: Mutex<Box<dyn Write + Send>>,
    buf: Mutex<Vec<u8>>,
    wake: Condvar,
    stop: AtomicBool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Shared {
    /// Writes out everything buffered, and `then`.
    fn flush(&self, then: &[u8]) -> io::Result<()> {
        let mut out = lock(&self.out);
        let pending = std::mem::take(&mut *lock(&self.buf));
        out.write_all(&pending)?;
        out.write_all(then)?;
        out.flush()
    }
}

/// The buffer and its flusher thread; a [`Writer`] per log line comes from [`LogBuffer::writer`].
pub struct LogBuffer {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl LogBuffer {
    /// Starts the flusher thread, and has a panic write out the buffer before its message.
    pub fn start() -> io::Result<LogBuffer> {
        Self::to(Box::new(io::stderr()))
    }

    fn to(out: Box<dyn Write + Send>) -> io::Result<LogBuffer> {
        let shared = Arc::new(Shared {
            out: Mutex::new(out),
            buf: Mutex::default(),
            wake: Condvar::new(),
            stop: AtomicBool::new(false),
        });
        let thread = std::thread::Builder::new()
            .name("memkv-log".into())
            .spawn({
                let shared = Arc::clone(&shared);
                move || run(&shared)
            })?;
        let previous = std::panic::take_hook();
        let on_panic = Arc::downgrade(&shared);
        std::panic::set_hook(Box::new(move |info| {
            if let Some(shared) = on_panic.upgrade() {
                let _ = shared.flush(b"");
            }
            previous(info);
        }));
        Ok(LogBuffer {
            shared,
            thread: Some(thread),
        })
    }

    /// A writer per log line (a `tracing_subscriber` `MakeWriter`).
    pub fn writer_factory(&self) -> impl Fn() -> Writer + Send + Sync + 'static {
        let shared = Arc::clone(&self.shared);
        move || Writer(Arc::clone(&shared))
    }
}

impl Drop for LogBuffer {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        self.shared.wake.notify_one();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        let _ = self.shared.flush(b"");
    }
}

fn run(shared: &Shared) {
    loop {
        {
            let buf = lock(&shared.buf);
            let _ = shared
                .wake
                .wait_timeout_while(buf, EVERY, |b| {
                    b.len() < FLUSH_AT && !shared.stop.load(Ordering::Acquire)
                })
                .unwrap_or_else(PoisonError::into_inner);
        }
        // A log line that cannot be written has nowhere else to go.
        let _ = shared.flush(b"");
        if shared.stop.load(Ordering::Acquire) {
            return;
        }
    }
}

/// Appends what it is given to the buffer.
pub struct Writer(Arc<Shared>);

impl Write for Writer {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let mut buf = lock(&self.0.buf);
        if buf.len() + data.len() > CAP {
            drop(buf);
            self.0.flush(data)?;
            return Ok(data.len());
        }
        buf.extend_from_slice(data);
        if buf.len() >= FLUSH_AT {
            self.0.wake.notify_one();
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        // Lines are written out by the flusher; a log line's own flush need not wait for it.
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sink the test can read.
    #[derive(Clone, Default)]
    struct Sink(Arc<Mutex<Vec<u8>>>);

    impl Write for Sink {
        fn write(&mut self, data: &[u8]) -> io::Result<usize> {
            lock(&self.0).extend_from_slice(data);
            Ok(data.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn every_line_arrives_in_order_and_the_buffer_stays_bounded() {
        let sink = Sink::default();
        let log = LogBuffer::to(Box::new(sink.clone())).unwrap();
        let mut w = log.writer_factory()();
        let mut want = Vec::new();
        // The flusher held off (as if standard error were slow): lines pile up to the cap.
        let held = lock(&log.shared.out);
        let mut n = 0;
        loop {
            let line = format!("{n:0999}\n");
            if lock(&log.shared.buf).len() + line.len() > CAP {
                break;
            }
            w.write_all(line.as_bytes()).unwrap();
            want.extend_from_slice(line.as_bytes());
            n += 1;
        }
        assert_eq!(lock(&log.shared.buf).len(), want.len());
        drop(held);
        // Past the cap, the logging thread writes out the buffer and its line itself.
        for _ in 0..3 {
            let line = format!("{n:0999}\n");
            w.write_all(line.as_bytes()).unwrap();
            want.extend_from_slice(line.as_bytes());
            n += 1;
            assert!(lock(&log.shared.buf).len() <= CAP);
        }
        // The flusher writes lines out on its own, within a few periods.
        w.write_all(b"soon\n").unwrap();
        want.extend_from_slice(b"soon\n");
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while lock(&sink.0).len() < want.len() && std::time::Instant::now() < deadline {
            std::thread::sleep(EVERY);
        }
        assert_eq!(lock(&sink.0).len(), want.len(), "the flusher did not write");
        // Dropping the buffer writes out the rest.
        w.write_all(b"last\n").unwrap();
        want.extend_from_slice(b"last\n");
        drop(log);
        assert!(*lock(&sink.0) == want, "lines lost or out of order");
    }
}
