//! The clients: keep-alive HTTP/1.1 connections on one tokio runtime of their own (one thread by
//! default, `LOADGEN_CLIENT_THREADS`), so that 64 clients cost the machine little CPU besides
//! the server's. Each client sends one request at a time and times it from the first byte
//! written to the last byte read. Every read and write has a timeout.

use std::collections::BTreeMap;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// How long one request may take before it counts as failed.
const TIMEOUT: Duration = Duration::from_secs(30);

/// What a phase measured.
pub struct Measured {
    /// Requests answered per second.
    pub rate: f64,
    /// Latencies in µs, per label.
    pub latencies: BTreeMap<&'static str, Vec<u64>>,
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
                    let mut samples: Vec<(&'static str, u64)> = Vec::new();
                    let mut n = 0;
                    while !stop.load(Ordering::Relaxed) && n < max {
                        let r = next(t, n);
                        let head = format!(
                            "POST /v1/memory_stores/{}/tool HTTP/1.1\r\nhost: {addr}\r\nx-api-key: {key}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                            r.store,
                            r.body.len()
                        );
                        let began = Instant::now();
                        let answered =
                            tokio::time::timeout(TIMEOUT, conn.exchange(&head, &r.body)).await;
                        let took = began.elapsed().as_micros() as u64;
                        let ok = match answered {
                            Ok(Ok((200, body))) => {
                                !r.must_succeed
                                    || memchr_find(&body, br#""is_error":false"#)
                            }
                            Ok(Ok((status, body))) => {
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
                            samples.push((r.label, took));
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
        for task in tasks {
            for (label, us) in task.await.expect("a client task") {
                latencies.entry(label).or_default().push(us);
            }
        }
        let elapsed = start.elapsed().as_secs_f64();
        let answered: usize = latencies.values().map(Vec::len).sum();
        Measured {
            rate: answered as f64 / elapsed,
            latencies,
            errors: errors.load(Ordering::Relaxed),
        }
    })
}

fn memchr_find(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// One keep-alive connection.
struct Conn {
    stream: BufReader<TcpStream>,
    line: String,
}

impl Conn {
    async fn open(addr: SocketAddr) -> io::Result<Conn> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        Ok(Conn {
            stream: BufReader::new(stream),
            line: String::new(),
        })
    }

    /// Sends a request (`head` then `body`, in one write); reads the status and the
    /// `content-length` body of the answer.
    async fn exchange(&mut self, head: &str, body: &str) -> io::Result<(u16, Vec<u8>)> {
        let mut request = Vec::with_capacity(head.len() + body.len());
        request.extend_from_slice(head.as_bytes());
        request.extend_from_slice(body.as_bytes());
        self.stream.get_mut().write_all(&request).await?;
        self.line.clear();
        if self.stream.read_line(&mut self.line).await? == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the server closed the connection",
            ));
        }
        let status = self
            .line
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| io::Error::other(format!("bad status line {:?}", self.line)))?;
        let mut length = None;
        loop {
            self.line.clear();
            self.stream.read_line(&mut self.line).await?;
            let l = self.line.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some((n, v)) = l.split_once(':')
                && n.trim().eq_ignore_ascii_case("content-length")
            {
                length = v.trim().parse::<usize>().ok();
            }
        }
        let length = length.ok_or_else(|| io::Error::other("no content-length"))?;
        let mut body = vec![0; length];
        self.stream.read_exact(&mut body).await?;
        Ok((status, body))
    }
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
