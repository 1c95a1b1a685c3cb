//! Protection: the body cap, slow clients, the in-flight limit, graceful shutdown.

use std::io::{BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use serde_json::json;

use super::client::{self, Client};
use super::proc::{Served, memkv, temp_db};

fn create(path: &str, text: &str) -> Vec<u8> {
    json!({"command": "create", "path": path, "file_text": text})
        .to_string()
        .into_bytes()
}

/// Whether the server closed `stream` within `limit` (reading what it sends meanwhile).
fn closed_within(stream: &mut TcpStream, limit: Duration) -> (bool, Vec<u8>) {
    stream
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let deadline = Instant::now() + limit;
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    while Instant::now() < deadline {
        match stream.read(&mut buf) {
            Ok(0) => return (true, got),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return (true, got),
            Err(_) => {}
        }
    }
    (false, got)
}

#[test]
fn bodies_over_the_cap_and_too_many_blocks_are_413() {
    let (_dir, db) = temp_db();
    let server = Served::start(&db, &["--no-auth", "--max-blocks", "3"]);
    let mut c = Client::new(server.addr);
    let cap = memkv::protocol::max_message_bytes(&memkv::Limits::DEFAULT);
    // The largest valid command fits (and is answered by memkv, not refused by HTTP).
    let big = "x".repeat(102_400);
    let r = c.tool("u", &create("/memories/big", &big));
    assert_eq!(r.status, 200, "{}", r.text());
    // Declared too long: refused before the body is read.
    let mut s = TcpStream::connect(server.addr).unwrap();
    s.write_all(format!("POST /v1/memory_stores/u/tool HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n", cap + 1).as_bytes()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let r = client::read_reply(&mut BufReader::new(s)).unwrap();
    assert_eq!(
        (r.status, r.error_type().as_str()),
        (413, "request_too_large")
    );
    // Chunked, with no length: refused once the cap is passed.
    let mut s = TcpStream::connect(server.addr).unwrap();
    s.write_all(b"POST /v1/memory_stores/u/tool HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n").unwrap();
    let chunk = vec![b' '; 64 * 1024];
    let mut sent = 0;
    while sent <= cap + chunk.len() {
        if s.write_all(format!("{:x}\r\n", chunk.len()).as_bytes())
            .is_err()
            || s.write_all(&chunk).is_err()
            || s.write_all(b"\r\n").is_err()
        {
            break;
        }
        sent += chunk.len();
    }
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let r = client::read_reply(&mut BufReader::new(s)).unwrap();
    assert_eq!(
        (r.status, r.error_type().as_str()),
        (413, "request_too_large")
    );

    let block = json!({"type": "tool_use", "id": "t", "name": "memory",
                       "input": {"command": "create", "path": "/memories/n", "file_text": ""}});
    let r = c.tool(
        "u",
        json!([block, block, block, block]).to_string().as_bytes(),
    );
    assert_eq!(
        (r.status, r.error_type().as_str()),
        (413, "request_too_large")
    );
    let r = c.tool("u", json!([block, block, block]).to_string().as_bytes());
    assert_eq!(r.status, 200);
    // Nothing refused was applied: only /memories/big and /memories/n exist.
    let r = c.tool("u", br#"{"command":"view","path":"/memories"}"#);
    let listing = r.json()["content"].as_str().unwrap().to_owned();
    assert_eq!(listing.lines().count(), 4, "{listing}");
}

/// A client that sends its headers or its body slowly is cut off, and holds no worker: with
/// room for one request in flight, others are answered meanwhile.
#[test]
fn slow_clients_are_cut_off_and_hold_no_worker() {
    let (_dir, db) = temp_db();
    let server = Served::start(
        &db,
        &[
            "--no-auth",
            "--header-timeout",
            "1s",
            "--body-timeout",
            "1s",
            "--max-in-flight",
            "1",
        ],
    );
    let started = Instant::now();
    // Headers, one byte every 100 ms, never finished.
    let mut slow_headers: Vec<TcpStream> = (0..4)
        .map(|_| {
            let mut s = TcpStream::connect(server.addr).unwrap();
            s.write_all(b"POST /v1/memory_stores/u/tool HTTP/1.1\r\nhost: 127.0.0.1\r\nx-slow: ")
                .unwrap();
            s
        })
        .collect();
    // A body that never arrives in full.
    let mut slow_bodies: Vec<TcpStream> = (0..4)
        .map(|_| {
            let mut s = TcpStream::connect(server.addr).unwrap();
            s.write_all(b"POST /v1/memory_stores/u/tool HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{\"command\"")
                .unwrap();
            s
        })
        .collect();
    for _ in 0..5 {
        for s in &mut slow_headers {
            let _ = s.write_all(b"a");
        }
        for s in &mut slow_bodies {
            let _ = s.write_all(b" ");
        }
        // Meanwhile, others are served: the slow clients hold no permit (with one permit, a
        // held one would make this a 503).
        let t = Instant::now();
        let r = Client::new(server.addr).tool("v", br#"{"command":"view","path":"/memories"}"#);
        assert_eq!(r.status, 200);
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
        std::thread::sleep(Duration::from_millis(100));
    }
    for s in &mut slow_headers {
        let (closed, _) = closed_within(s, Duration::from_secs(10));
        assert!(closed, "a slow header was not cut off");
    }
    for s in &mut slow_bodies {
        let (closed, answer) = closed_within(s, Duration::from_secs(10));
        assert!(closed, "a slow body was not cut off");
        let answer = String::from_utf8_lossy(&answer);
        assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
        assert!(answer.contains("was not received within 1 s"), "{answer}");
    }
    assert!(started.elapsed() < Duration::from_secs(15));
}

/// A write's path, status, `Retry-After` and error type.
type Outcome = (String, u16, Option<String>, String);

/// With the in-flight limit reached, a request gets 503 overloaded_error with Retry-After at
/// once (never a queue), and changes nothing; every request answered 200 was applied.
#[test]
fn overload_is_refused_with_retry_after() {
    let (_dir, db) = temp_db();
    let server = Served::start(&db, &["--no-auth", "--max-in-flight", "1"]);
    let addr = server.addr;
    let clients = 16;
    let barrier = Arc::new(Barrier::new(clients));
    let results: Vec<Vec<Outcome>> = (0..clients)
        .map(|t| {
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                let mut c = Client::new(addr);
                let text = "y".repeat(50_000);
                barrier.wait();
                (0..40)
                    .map(|i| {
                        let path = format!("/memories/{t}/{i}");
                        let r = c.tool("load", &create(&path, &text));
                        let kind = if r.status == 200 {
                            String::new()
                        } else {
                            r.error_type()
                        };
                        (
                            path,
                            r.status,
                            r.header("retry-after").map(str::to_owned),
                            kind,
                        )
                    })
                    .collect()
            })
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|h| h.join().unwrap())
        .collect();
    let all: Vec<_> = results.into_iter().flatten().collect();
    let refused: Vec<_> = all.iter().filter(|r| r.1 != 200).collect();
    assert!(
        !refused.is_empty(),
        "16 writers never exceeded one in flight"
    );
    for (path, status, retry, kind) in &refused {
        assert_eq!(
            (*status, kind.as_str()),
            (503, "overloaded_error"),
            "{path}"
        );
        assert_eq!(retry.as_deref(), Some("1"));
    }
    let mut c = Client::new(addr);
    let metrics = c.get("/metrics");
    let line = format!("memkv_overloaded_total {}", refused.len());
    assert!(metrics.text().lines().any(|l| l == line), "{line}");
    drop(server);
    // Exactly the answered writes are in the store.
    let out = memkv(&db)
        .args(["tree", "--user", "load"])
        .output()
        .unwrap();
    let tree = String::from_utf8(out.stdout).unwrap();
    let stored: std::collections::BTreeSet<_> = tree
        .lines()
        .map(|l| l.rsplit("  ").next().unwrap().to_owned())
        .collect();
    let answered: std::collections::BTreeSet<_> = all
        .iter()
        .filter(|r| r.1 == 200)
        .map(|r| r.0.clone())
        .collect();
    assert_eq!(stored, answered);
}

/// SIGTERM while 100 writes are in flight: the server stops accepting, answers what it has,
/// exits 0, and every write answered 200 is in the database afterwards.
#[test]
fn sigterm_during_100_writes_loses_no_answered_write() {
    let (_dir, db) = temp_db();
    let mut server = Served::start(&db, &["--no-auth"]);
    let addr = server.addr;
    let writers = 100;
    let barrier = Arc::new(Barrier::new(writers + 1));
    let done = Arc::new(AtomicUsize::new(0));
    let handles: Vec<_> = (0..writers)
        .map(|i| {
            let barrier = Arc::clone(&barrier);
            let done = Arc::clone(&done);
            std::thread::spawn(move || {
                let mut c = Client::new(addr);
                // Connected before the signal; the request races it.
                let _ = c.send("GET", "/healthz", &[], b"");
                barrier.wait();
                let path = format!("/memories/w{i}");
                let body = create(&path, &"z".repeat(1024));
                let status = c
                    .send(
                        "POST",
                        "/v1/memory_stores/shutdown/tool",
                        &[("content-type", "application/json")],
                        &body,
                    )
                    .map(|r| {
                        assert!(
                            r.status != 200 || r.text().contains("created"),
                            "{}",
                            r.text()
                        );
                        r.status
                    })
                    .unwrap_or(0);
                done.fetch_add(1, Ordering::SeqCst);
                (path, status)
            })
        })
        .collect();
    barrier.wait();
    // The signal comes once the first answer is out: the rest are in flight or on their way.
    let deadline = Instant::now() + Duration::from_secs(30);
    while done.load(Ordering::SeqCst) == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_micros(200));
    }
    let status = server.stop_with(libc::SIGTERM);
    assert!(status.success(), "exit {status}; log:\n{}", server.log());
    assert!(server.log().contains("SIGTERM received"));
    let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let answered: Vec<_> = results.iter().filter(|r| r.1 == 200).collect();
    assert!(!answered.is_empty());
    assert!(
        results.iter().all(|r| r.1 == 200 || r.1 == 0 || r.1 == 503),
        "{results:?}"
    );
    // After a restart, every answered write is there.
    let server = Served::start(&db, &["--no-auth"]);
    let mut c = Client::new(server.addr);
    for (path, _) in &answered {
        let r = c.tool(
            "shutdown",
            json!({"command": "view", "path": path})
                .to_string()
                .as_bytes(),
        );
        assert_eq!(
            r.json()["is_error"],
            false,
            "{path} was answered but is gone"
        );
    }
    eprintln!(
        "{} of {writers} writes answered before the shutdown",
        answered.len()
    );
}

/// Connections that never send a byte are closed within the header timeout, and at
/// `--max-connections` an idle one gives way at once to a new client.
#[test]
fn idle_connections_never_keep_a_client_out() {
    let (_dir, db) = temp_db();
    let server = Served::start(
        &db,
        &[
            "--no-auth",
            "--max-connections",
            "4",
            "--header-timeout",
            "2s",
        ],
    );
    let view = br#"{"command":"view","path":"/memories"}"#;
    let mut idle: Vec<TcpStream> = (0..4)
        .map(|_| TcpStream::connect(server.addr).unwrap())
        .collect();
    // Every place is taken by a connection that sent nothing; a real client is served at once
    // (not after the header timeout), several times over.
    for _ in 0..3 {
        let t = Instant::now();
        let r = Client::new(server.addr).tool("v", view);
        assert_eq!(r.status, 200);
        assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
    }
    let mut cut = 0;
    for s in &mut idle {
        cut += usize::from(closed_within(s, Duration::from_millis(300)).0);
    }
    assert!(cut >= 1, "no idle connection gave way");
    // The rest are closed by the header timeout, though they never sent a byte.
    let started = Instant::now();
    for s in &mut idle {
        let (closed, got) = closed_within(s, Duration::from_secs(10));
        assert!(closed && got.is_empty(), "{got:?}");
    }
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}
