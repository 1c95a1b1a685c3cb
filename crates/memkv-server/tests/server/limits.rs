//! What a caller may hold of the server's connections by waiting (`crate::polls`), over real
//! sockets: long polls of the change feed within their bounds (per key, per store, in all), and
//! sign-ins whose body is still arriving, a few at a time, quickly; everyone else is served
//! meanwhile.

use std::io::{BufReader, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use memkv::Database;
use memkv_server::polls::{PER_KEY, SIGNIN_BODY_TIMEOUT};

use crate::changes::{create, wait_for_polls};
use crate::client::{self, read_reply};
use crate::library::Fresh;
use crate::served::{Served, ok, refused};

/// `n` threads, each a long poll of `u`'s feed (up to 30 s) with `key`.
fn polls(s: &Served, key: &str, n: usize) -> Vec<std::thread::JoinHandle<client::Reply>> {
    (0..n)
        .map(|_| {
            let (addr, key) = (s.addr, key.to_owned());
            std::thread::spawn(move || {
                client::Client::with_key(addr, &key)
                    .get("/v1/memory_stores/u/changes?after=1&wait=30")
            })
        })
        .collect()
}

#[test]
fn long_polls_wait_within_their_bounds_and_never_hold_every_connection() {
    // 16 connections: at most 4 polls wait.
    let s = Served::configured(Database::builder().fresh().unwrap(), |c| {
        c.max_connections = 16;
    });
    let mut admin = s.client(&s.admin);
    create(&mut admin, "u", "/memories/first.md");
    // A read-only key, as an attacker with the least a store gives.
    let (_, key) = s.store_key("u", true);
    let waiting = polls(&s, &key, 4);
    wait_for_polls(&mut admin, 4);
    // The fifth is answered at once: 429, retry in a second; it does not wait its 30 s.
    let started = Instant::now();
    let beyond =
        client::Client::with_key(s.addr, &key).get("/v1/memory_stores/u/changes?after=1&wait=30");
    refused(&beyond, 429, "rate_limit_error");
    assert!(
        beyond.message().contains("long polls waiting"),
        "{}",
        beyond.message()
    );
    assert_eq!(beyond.header("retry-after"), Some("1"));
    assert!(started.elapsed() < Duration::from_secs(20));
    // Meanwhile every other client is served, each on a connection of its own: more than
    // the connections the polls leave, so idle ones give way.
    for _ in 0..24 {
        assert_eq!(client::Client::new(s.addr).get("/healthz").status, 200);
    }
    // A commit wakes the waiting polls with it.
    create(&mut admin, "u", "/memories/second.md");
    for poll in waiting {
        let page = ok(&poll.join().unwrap());
        assert_eq!(page["data"][0]["seq"], 2, "{page}");
    }
}

#[test]
fn one_key_holds_at_most_its_own_share_of_long_polls() {
    let s = Served::new();
    let mut admin = s.client(&s.admin);
    create(&mut admin, "u", "/memories/first.md");
    let (_, key) = s.store_key("u", false);
    let waiting = polls(&s, &key, PER_KEY);
    wait_for_polls(&mut admin, PER_KEY);
    let beyond =
        client::Client::with_key(s.addr, &key).get("/v1/memory_stores/u/changes?after=1&wait=30");
    refused(&beyond, 429, "rate_limit_error");
    assert!(
        beyond
            .message()
            .contains(&format!("this key has {PER_KEY} long polls")),
        "{}",
        beyond.message()
    );
    // Another key of the same store still waits.
    let (_, other) = s.store_key("u", false);
    let more = polls(&s, &other, 1);
    wait_for_polls(&mut admin, PER_KEY + 1);
    create(&mut admin, "u", "/memories/second.md");
    for poll in waiting.into_iter().chain(more) {
        assert_eq!(poll.join().unwrap().status, 200);
    }
}

/// A sign-in whose headers came and whose body never comes.
fn slow_signin(s: &Served) -> BufReader<TcpStream> {
    let mut stream = TcpStream::connect(s.addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    write!(
        stream,
        "POST /console/login HTTP/1.1\r\nhost: {addr}\r\norigin: http://{addr}\r\ncontent-type: application/x-www-form-urlencoded\r\ncontent-length: 100\r\n\r\nk",
        addr = s.addr
    )
    .unwrap();
    BufReader::new(stream)
}

#[test]
fn slowly_sent_sign_ins_hold_a_few_connections_briefly() {
    // 16 connections: at most 2 sign-ins are read at once.
    let s = Served::configured(Database::builder().fresh().unwrap(), |c| {
        c.max_connections = 16;
    });
    // Six sign-ins whose body never comes, sent at once: whichever two are read first hold
    // the share; the other four are refused at once, whatever the order they arrived in.
    let slow: Vec<_> = (0..6).map(|_| slow_signin(&s)).collect();
    // Everyone else is served meanwhile.
    for _ in 0..24 {
        assert_eq!(client::Client::new(s.addr).get("/healthz").status, 200);
    }
    let (mut refused_at_once, mut read_briefly) = (0, 0);
    for mut conn in slow {
        let reply = read_reply(&mut conn).unwrap();
        match reply.status {
            503 => {
                assert!(
                    reply.text().contains("Too many sign-ins"),
                    "{}",
                    reply.text()
                );
                refused_at_once += 1;
            }
            // Answered once their short deadline passed, not the 30 s of other bodies.
            400 => {
                let deadline = format!("within {} s", SIGNIN_BODY_TIMEOUT.as_secs());
                assert!(reply.text().contains(&deadline), "{}", reply.text());
                read_briefly += 1;
            }
            _ => panic!("{reply:?}"),
        }
    }
    assert_eq!((read_briefly, refused_at_once), (2, 4));
}
