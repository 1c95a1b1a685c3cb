//! A small blocking HTTP/1.1 client over `std::net::TcpStream`, for the tests and the load
//! generator: it sends exactly the bytes asked for (no path normalization, so encoding tricks
//! reach the server as written), keeps the connection alive, and every read has a timeout.

#![allow(dead_code)]

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use serde_json::Value;

/// How long any read may block.
pub const READ_TIMEOUT: Duration = Duration::from_secs(60);

/// An answer.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Reply {
    /// A header's value (names compared case-insensitively).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn text(&self) -> &str {
        std::str::from_utf8(&self.body).expect("a UTF-8 body")
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("{e}: {:?}", String::from_utf8_lossy(&self.body)))
    }

    /// The envelope's `error.type`, asserting the envelope's shape.
    pub fn error_type(&self) -> String {
        let v = self.json();
        assert_eq!(v["type"], "error", "{v}");
        assert!(v["error"]["message"].is_string(), "{v}");
        assert_eq!(v.as_object().unwrap().len(), 2, "{v}");
        v["error"]["type"].as_str().unwrap().to_owned()
    }

    /// The envelope's `error.message`.
    pub fn message(&self) -> String {
        self.json()["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }
}

/// One keep-alive connection (reopened when the server closes it).
#[derive(Debug)]
pub struct Client {
    addr: SocketAddr,
    conn: Option<BufReader<TcpStream>>,
    /// Sent with every request (e.g. `x-api-key`).
    pub headers: Vec<(String, String)>,
}

impl Client {
    pub fn new(addr: SocketAddr) -> Self {
        Client {
            addr,
            conn: None,
            headers: Vec::new(),
        }
    }

    pub fn with_key(addr: SocketAddr, key: &str) -> Self {
        let mut c = Client::new(addr);
        c.headers.push(("x-api-key".into(), key.into()));
        c
    }

    /// POSTs JSON to the tool route of `store` (percent-encoded here).
    pub fn tool(&mut self, store: &str, body: &[u8]) -> Reply {
        let target = format!("/v1/memory_stores/{}/tool", encode(store));
        self.send(
            "POST",
            &target,
            &[("content-type", "application/json")],
            body,
        )
        .unwrap()
    }

    pub fn get(&mut self, target: &str) -> Reply {
        self.send("GET", target, &[], b"").unwrap()
    }

    /// Sends one request; retries once on a connection the server had closed.
    pub fn send(
        &mut self,
        method: &str,
        target: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> io::Result<Reply> {
        let reused = self.conn.is_some();
        match self.try_send(method, target, headers, body) {
            Err(_) if reused => {
                self.conn = None;
                self.try_send(method, target, headers, body)
            }
            other => other,
        }
    }

    fn try_send(
        &mut self,
        method: &str,
        target: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> io::Result<Reply> {
        if self.conn.is_none() {
            let stream = TcpStream::connect(self.addr)?;
            stream.set_read_timeout(Some(READ_TIMEOUT))?;
            stream.set_nodelay(true)?;
            self.conn = Some(BufReader::new(stream));
        }
        let conn = self.conn.as_mut().expect("connected");
        let mut head = format!(
            "{method} {target} HTTP/1.1\r\ncontent-length: {}\r\n",
            body.len()
        );
        if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("host")) {
            head.push_str(&format!("host: {}\r\n", self.addr));
        }
        for (n, v) in self
            .headers
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_str()))
            .chain(headers.iter().copied())
        {
            head.push_str(&format!("{n}: {v}\r\n"));
        }
        head.push_str("\r\n");
        let mut request = head.into_bytes();
        request.extend_from_slice(body);
        conn.get_mut().write_all(&request)?;
        let result = read_reply(conn);
        let close = match &result {
            Ok(r) => r
                .header("connection")
                .is_some_and(|v| v.eq_ignore_ascii_case("close")),
            Err(_) => true,
        };
        if close {
            self.conn = None;
        }
        result
    }
}

/// Reads one response: status line, headers, a `content-length` body (or to the end).
pub fn read_reply(conn: &mut BufReader<TcpStream>) -> io::Result<Reply> {
    let mut line = String::new();
    if conn.read_line(&mut line)? == 0 {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "connection closed",
        ));
    }
    let status = line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| io::Error::other(format!("bad status line {line:?}")))?;
    let mut headers = Vec::new();
    loop {
        line.clear();
        conn.read_line(&mut line)?;
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        let (n, v) = l
            .split_once(':')
            .ok_or_else(|| io::Error::other("bad header"))?;
        headers.push((n.trim().to_owned(), v.trim().to_owned()));
    }
    let mut reply = Reply {
        status,
        headers,
        body: Vec::new(),
    };
    match reply.header("content-length").map(str::parse::<usize>) {
        Some(Ok(n)) => {
            reply.body.resize(n, 0);
            conn.read_exact(&mut reply.body)?;
        }
        Some(Err(_)) => return Err(io::Error::other("bad content-length")),
        None if reply
            .header("transfer-encoding")
            .is_some_and(|v| v.eq_ignore_ascii_case("chunked")) =>
        {
            // Chunks: a hex size line, the bytes, CRLF; a zero size ends the body. A body cut
            // short (the connection closed before the last chunk) is an error.
            loop {
                line.clear();
                if conn.read_line(&mut line)? == 0 {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the chunked body ended before its last chunk",
                    ));
                }
                let size =
                    usize::from_str_radix(line.trim_end().split(';').next().unwrap_or(""), 16)
                        .map_err(|_| io::Error::other(format!("bad chunk size {line:?}")))?;
                let start = reply.body.len();
                reply.body.resize(start + size, 0);
                conn.read_exact(&mut reply.body[start..])?;
                line.clear();
                conn.read_line(&mut line)?;
                if size == 0 {
                    break;
                }
            }
        }
        None => {
            conn.read_to_end(&mut reply.body)?;
        }
    }
    Ok(reply)
}

/// Percent-encodes everything outside the unreserved characters (RFC 3986), `/` included.
pub fn encode(segment: &str) -> String {
    let mut out = String::new();
    for b in segment.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
