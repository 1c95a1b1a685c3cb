//! The clients: keep-alive HTTP/1.1 connections on one tokio runtime of their own (one thread by
//! default, `LOADGEN_CLIENT_THREADS`), so that 64 clients cost the machine little CPU besides
//! the server's. Each client sends one request at a time and times it from the first byte
//! written to the last byte read, and also until the kernel received the answer's last bytes on
//! the client's socket (`SO_TIMESTAMPNS`): the difference is the time the answer waited for the
//! client's own thread, which is busy with 63 other connections, not for the server. Every read
//! and write has a timeout.

use std::collections::BTreeMap;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use std::os::fd::AsRawFd;
use std::time::SystemTime;

use tokio::io::{AsyncWriteExt, Interest};
use tokio::net::TcpStream;

/// How long one request may take before it counts as failed.
const TIMEOUT: Duration = Duration::from_secs(30);

/// What a phase measured.
pub struct Measured {
    /// Requests answered per second.
    pub rate: f64,
    /// Latencies in µs, per label: from the first byte written to the answer read by its
    /// client task.
    pub latencies: BTreeMap<&'static str, Vec<u64>>,
    /// The same requests, until the answer's last bytes reached the client's socket (the
    /// kernel's receive timestamp): without the time the answer waited for the client's own
    /// thread.
    pub arrivals: BTreeMap<&'static str, Vec<u64>>,
    /// Requests that failed (transport error, timeout, or the check said no).
    pub errors: u64,
}

/// One request to send: the store, the body, the latency label, and whether the answer
/// must be a successful tool result (`"is_error":false`) rather than any 200.
pub struct Request {
    pub store: String,
    pub body: Arc<str>,
    pub label: &'static str,
    pub must_succeed: bool,
}

/// Runs `clients` clients against `addr` for `seconds` (at most `max` requests each); client
/// `t`'s `n`th request is `next(t, n)`.
pub fn drive(
    addr: SocketAddr,
    key: &str,
    clients: usize,
    seconds: f64,
    max: u64,
    next: impl Fn(usize, u64) -> Request + Send + Sync + 'static,
) -> Measured {
    let threads = crate::env("LOADGEN_CLIENT_THREADS", 1).max(1) as usize;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()
        .expect("the clients' runtime");
    let next = Arc::new(next);
    let stop = Arc::new(AtomicBool::new(false));
    let errors = Arc::new(AtomicU64::new(0));
    let key: Arc<str> = key.into();
    runtime.block_on(async move {
        // Connect every client before the clock starts.
        let mut conns = Vec::with_capacity(clients);
        for _ in 0..clients {
            conns.push(Conn::open(addr).await.expect("connect to memkv serve"));
        }
        let start = Instant::now();
        let tasks: Vec<_> = conns
            .into_iter()
            .enumerate()
            .map(|(t, mut conn)| {
                let (next, stop, errors, key) = (
                    Arc::clone(&next),
                    Arc::clone(&stop),
                    Arc::clone(&errors),
                    Arc::clone(&key),
                );
                tokio::spawn(async move {
                    let mut samples: Vec<(&'static str, u64, u64)> = Vec::new();
                    let mut n = 0;
                    while !stop.load(Ordering::Relaxed) && n < max {
                        let r = next(t, n);
                        let head = format!(
                            "POST /v1/memory_stores/{}/tool HTTP/1.1\r\nhost: {addr}\r\nx-api-key: {key}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                            r.store,
                            r.body.len()
                        );
                        let began = Instant::now();
                        let began_wall = SystemTime::now();
                        let answered =
                            tokio::time::timeout(TIMEOUT, conn.exchange(&head, &r.body)).await;
                        let took = began.elapsed().as_micros() as u64;
                        let mut arrived = took;
                        let ok = match answered {
                            Ok(Ok(Answer {
                                status: 200,
                                body,
                                arrived: at,
                            })) => {
                                if let Some(d) = at.and_then(|a| a.duration_since(began_wall).ok())
                                {
                                    arrived = (d.as_micros() as u64).min(took);
                                }
                                !r.must_succeed
                                    || memchr_find(&body, br#""is_error":false"#)
                            }
                            Ok(Ok(Answer { status, body, .. })) => {
                                eprintln!(
                                    "loadgen: HTTP {status}: {}",
                                    String::from_utf8_lossy(&body)
                                );
                                false
                            }
                            Ok(Err(e)) => {
                                eprintln!("loadgen: {e}");
                                false
                            }
                            Err(_) => {
                                eprintln!("loadgen: no answer within {TIMEOUT:?}");
                                false
                            }
                        };
                        if ok {
                            samples.push((r.label, took, arrived));
                        } else {
                            errors.fetch_add(1, Ordering::Relaxed);
                            match Conn::open(addr).await {
                                Ok(c) => conn = c,
                                Err(_) => break,
                            }
                        }
                        n += 1;
                    }
                    samples
                })
            })
            .collect();
        let deadline = start + Duration::from_secs_f64(seconds);
        while Instant::now() < deadline && tasks.iter().any(|t| !t.is_finished()) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        stop.store(true, Ordering::Relaxed);
        let mut latencies: BTreeMap<&'static str, Vec<u64>> = BTreeMap::new();
        let mut arrivals: BTreeMap<&'static str, Vec<u64>> = BTreeMap::new();
        for task in tasks {
            for (label, us, arrived) in task.await.expect("a client task") {
                latencies.entry(label).or_default().push(us);
                arrivals.entry(label).or_default().push(arrived);
            }
        }
        let elapsed = start.elapsed().as_secs_f64();
        let answered: usize = latencies.values().map(Vec::len).sum();
        Measured {
            rate: answered as f64 / elapsed,
            latencies,
            arrivals,
            errors: errors.load(Ordering::Relaxed),
        }
    })
}

fn memchr_find(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// One keep-alive connection, with the kernel's receive timestamps turned on
/// (`SO_TIMESTAMPNS`): each read also says when its last bytes reached this socket.
struct Conn {
    stream: TcpStream,
    /// Bytes read and not yet taken (a keep-alive answer ends exactly at its body's end, but
    /// nothing here relies on that).
    buf: Vec<u8>,
}

/// An answer: the status, the body, and when its last bytes reached the client's socket.
pub struct Answer {
    pub status: u16,
    pub body: Vec<u8>,
    pub arrived: Option<SystemTime>,
}

impl Conn {
    async fn open(addr: SocketAddr) -> io::Result<Conn> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        let on: libc::c_int = 1;
        // SAFETY: setsockopt on the stream's own open descriptor, with a c_int option value
        // that outlives the call.
        let r = unsafe {
            libc::setsockopt(
                stream.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_TIMESTAMPNS,
                (&raw const on).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Conn {
            stream,
            buf: Vec::with_capacity(16 * 1024),
        })
    }

    /// Sends a request (`head` then `body`, in one write); reads the status and the
    /// `content-length` body of the answer.
    async fn exchange(&mut self, head: &str, body: &str) -> io::Result<Answer> {
        let mut request = Vec::with_capacity(head.len() + body.len());
        request.extend_from_slice(head.as_bytes());
        request.extend_from_slice(body.as_bytes());
        self.stream.write_all(&request).await?;
        let mut arrived = None;
        loop {
            if let Some(end) = find(&self.buf, b"\r\n\r\n") {
                let (status, length) = parse_head(&self.buf[..end])?;
                let total = end + 4 + length;
                if self.buf.len() >= total {
                    let body = self.buf[end + 4..total].to_vec();
                    self.buf.drain(..total);
                    return Ok(Answer {
                        status,
                        body,
                        arrived,
                    });
                }
            }
            arrived = self.read_more().await?;
        }
    }

    /// Reads what the socket has (waiting for something); returns when its last bytes arrived.
    async fn read_more(&mut self) -> io::Result<Option<SystemTime>> {
        let mut chunk = [0u8; 16 * 1024];
        loop {
            self.stream.readable().await?;
            let fd = self.stream.as_raw_fd();
            match self
                .stream
                .try_io(Interest::READABLE, || recv_stamped(fd, &mut chunk))
            {
                Ok((0, _)) => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the server closed the connection",
                    ));
                }
                Ok((n, arrived)) => {
                    self.buf.extend_from_slice(&chunk[..n]);
                    return Ok(arrived);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        }
    }
}

/// `recvmsg` into `chunk`: the bytes read, and the receive timestamp the kernel attached.
fn recv_stamped(fd: i32, chunk: &mut [u8]) -> io::Result<(usize, Option<SystemTime>)> {
    let mut iov = libc::iovec {
        iov_base: chunk.as_mut_ptr().cast(),
        iov_len: chunk.len(),
    };
    let mut control = [0u64; 16];
    // SAFETY: an all-zero msghdr is valid (no name, no buffers) before the fields are set.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &raw mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control);
    // SAFETY: `msg` points at `iov` (into `chunk`) and `control`, all alive and writable for
    // the call; `fd` is the stream's open descriptor.
    let n = unsafe { libc::recvmsg(fd, &raw mut msg, libc::MSG_DONTWAIT) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut arrived = None;
    // SAFETY: the CMSG_* walk stays within `control` as filled in by the kernel (`msg`'s
    // control length); a timestamp's data is one timespec.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&raw const msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS {
                let ts: libc::timespec = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                arrived = Some(
                    SystemTime::UNIX_EPOCH + Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32),
                );
            }
            c = libc::CMSG_NXTHDR(&raw const msg, c);
        }
    }
    Ok((n as usize, arrived))
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// The status and `content-length` of an answer's head.
fn parse_head(head: &[u8]) -> io::Result<(u16, usize)> {
    let head = std::str::from_utf8(head).map_err(io::Error::other)?;
    let mut lines = head.split("\r\n");
    let first = lines.next().unwrap_or("");
    let status = first
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| io::Error::other(format!("bad status line {first:?}")))?;
    let length = lines
        .filter_map(|l| l.split_once(':'))
        .find(|(n, _)| n.trim().eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.trim().parse().ok())
        .ok_or_else(|| io::Error::other("no content-length"))?;
    Ok((status, length))
}

/// A blocking `GET target` on a connection of its own (closed after): the body, or "" on failure.
pub fn get(addr: SocketAddr, key: &str, target: &str) -> String {
    use std::io::{Read, Write};
    let Ok(mut stream) = std::net::TcpStream::connect_timeout(&addr, TIMEOUT) else {
        return String::new();
    };
    let _ = stream.set_read_timeout(Some(TIMEOUT));
    let request = format!(
        "GET {target} HTTP/1.1\r\nhost: {addr}\r\nx-api-key: {key}\r\nconnection: close\r\n\r\n"
    );
    let mut answer = Vec::new();
    if stream.write_all(request.as_bytes()).is_err() || stream.read_to_end(&mut answer).is_err() {
        return String::new();
    }
    let answer = String::from_utf8_lossy(&answer);
    answer
        .split_once("\r\n\r\n")
        .map_or(String::new(), |(_, body)| body.to_owned())
}
