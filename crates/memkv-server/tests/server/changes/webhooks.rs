//! Webhooks over real sockets, on redb and on PostgreSQL: the admin API's registration, listing
//! and removal (and what it refuses); deliveries to a receiver on loopback that checks each
//! signature, in order, filtered by store and event type; and, on PostgreSQL, two servers on one
//! database of which exactly one delivers, the other taking over when it stops. (The signatures
//! are verified with the Standard Webhooks library itself in python/tests/test_webhooks.py.)

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use memkv::Database;
use serde_json::{Value, json};

use crate::client;
use crate::library::{self, Fresh, each_backend};
use crate::served::{Served, ok, refused, send};

/// Deliveries received: (webhook-id, body) of each request whose signature held.
#[derive(Default)]
struct Inbox {
    got: Mutex<Vec<(String, Value)>>,
    bad: Mutex<Vec<String>>,
    changed: Condvar,
}

impl Inbox {
    /// Waits (at most 20 s) until `n` deliveries came.
    fn wait(&self, n: usize) -> Vec<(String, Value)> {
        let got = self.got.lock().unwrap();
        let (got, timeout) = self
            .changed
            .wait_timeout_while(got, Duration::from_secs(20), |g| g.len() < n)
            .unwrap();
        assert!(
            !timeout.timed_out(),
            "{} of {n} deliveries came; refused: {:?}",
            got.len(),
            self.bad.lock().unwrap()
        );
        assert!(self.bad.lock().unwrap().is_empty(), "{:?}", self.bad);
        got.clone()
    }
}

/// A receiver on a loopback port that answers 204 to every delivery signed with the secret it
/// is given (and 400, noted, to any other); stopped with the test process.
fn receiver(secret: Arc<Mutex<String>>) -> (String, Arc<Inbox>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let inbox = Arc::new(Inbox::default());
    let sink = Arc::clone(&inbox);
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { return };
            let (secret, sink) = (Arc::clone(&secret), Arc::clone(&sink));
            std::thread::spawn(move || serve_one(conn, &secret, &sink));
        }
    });
    (url, inbox)
}

fn serve_one(conn: std::net::TcpStream, secret: &Mutex<String>, inbox: &Inbox) {
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut writer = conn;
    loop {
        let mut headers = Vec::new();
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            if line == "\r\n" {
                break;
            }
            if let Some((k, v)) = line.trim_end().split_once(':') {
                headers.push((k.to_ascii_lowercase(), v.trim().to_owned()));
            }
        }
        let header = |name: &str| {
            headers
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
                .unwrap_or_default()
        };
        let mut body = vec![0; header("content-length").parse().unwrap_or(0)];
        reader.read_exact(&mut body).unwrap();
        let (id, ts) = (header("webhook-id"), header("webhook-timestamp"));
        let want = memkv_server::webhooks::signature(
            &secret.lock().unwrap(),
            &id,
            ts.parse().unwrap_or(0),
            &body,
        );
        let status = if want.as_deref() == Some(header("webhook-signature").as_str()) {
            inbox
                .got
                .lock()
                .unwrap()
                .push((id, serde_json::from_slice(&body).unwrap()));
            "204 No Content"
        } else {
            inbox.bad.lock().unwrap().push(id);
            "400 Bad Request"
        };
        inbox.changed.notify_all();
        let _ = write!(writer, "HTTP/1.1 {status}\r\ncontent-length: 0\r\n\r\n");
    }
}

fn tool(c: &mut client::Client, store: &str, command: Value) {
    let reply = c.tool(store, command.to_string().as_bytes());
    assert_eq!(reply.json()["is_error"], false, "{}", reply.text());
}

#[test]
fn endpoints_are_managed_by_admins_and_get_what_they_asked_for_in_order() {
    each_backend(|| {
        let s =
            Served::delivering_locally(Database::builder().max_file_bytes(1000).fresh().unwrap());
        let mut admin = s.client(&s.admin);
        let secret = Arc::new(Mutex::new(String::new()));
        let (url, inbox) = receiver(Arc::clone(&secret));
        // Refused: not a URL of ours, an unknown event, a store key, unknown fields.
        for (body, what) in [
            (json!({"url": "ftp://x"}), "http://"),
            (json!({"url": "http://"}), "no host"),
            (
                json!({"url": url, "events": ["memory.exploded"]}),
                "unknown event",
            ),
            (json!({"url": url, "stores": [""]}), "user id"),
            (json!({"url": url, "colour": "red"}), "unknown field"),
        ] {
            let m = refused(
                &send(&mut admin, "POST", "/v1/webhooks", Some(body)),
                400,
                "invalid_request_error",
            );
            assert!(m.contains(what), "{m}");
        }
        let (_, key) = s.store_key("alice", false);
        let mut store_key = s.client(&key);
        refused(&store_key.get("/v1/webhooks"), 403, "permission_error");
        refused(
            &send(
                &mut admin,
                "DELETE",
                "/v1/webhooks/wh_0000000000000009",
                None,
            ),
            404,
            "not_found_error",
        );
        // Before the endpoint: not delivered.
        tool(
            &mut admin,
            "alice",
            json!({"command": "create", "path": "/memories/early.md", "file_text": "x"}),
        );
        let hook = ok(&send(
            &mut admin,
            "POST",
            "/v1/webhooks",
            Some(
                json!({"url": url, "stores": ["alice"], "events": ["memory.created", "memory.deleted"]}),
            ),
        ));
        *secret.lock().unwrap() = hook["secret"].as_str().unwrap().to_owned();
        assert_eq!(hook["delivered_seq"], 1);
        assert_eq!(hook["stores"], json!(["alice"]));
        for (store, command) in [
            (
                "alice",
                json!({"command": "create", "path": "/memories/a.md", "file_text": "x"}),
            ),
            (
                "bob",
                json!({"command": "create", "path": "/memories/b.md", "file_text": "x"}),
            ),
            (
                "alice",
                json!({"command": "str_replace", "path": "/memories/a.md", "old_str": "x", "new_str": "y"}),
            ),
            (
                "alice",
                json!({"command": "delete", "path": "/memories/a.md"}),
            ),
        ] {
            tool(&mut admin, store, command);
        }
        let got = inbox.wait(2);
        let seqs: Vec<u64> = got
            .iter()
            .map(|(_, b)| b["data"]["seq"].as_u64().unwrap())
            .collect();
        assert_eq!(seqs, [2, 5]);
        assert_eq!(got[0].1["type"], "memory.created");
        assert_eq!(got[0].1["data"]["path"], "/a.md");
        assert_eq!(got[1].1["type"], "memory.deleted");
        let hook_id = hook["id"].as_str().unwrap();
        assert_eq!(
            got[0].0,
            format!("msg_{}_2", hook_id.trim_start_matches("wh_"))
        );
        // The list: no secret, the cursor past what was delivered.
        let deadline = Instant::now() + Duration::from_secs(20);
        let listed = loop {
            let listed = ok(&admin.get("/v1/webhooks"));
            if listed["data"][0]["delivered_seq"] == 5 {
                break listed;
            }
            assert!(Instant::now() < deadline, "{listed}");
            std::thread::yield_now();
        };
        assert!(listed["data"][0].get("secret").is_none());
        assert_eq!(listed["data"][0]["failures"], 0);
        let gone = ok(&send(
            &mut admin,
            "DELETE",
            &format!("/v1/webhooks/{hook_id}"),
            None,
        ));
        assert_eq!(gone, json!({"type": "webhook_deleted", "id": hook_id}));
        assert_eq!(ok(&admin.get("/v1/webhooks")), json!({"data": []}));
    });
}

/// By default deliveries reach public addresses only: an endpoint on loopback (as an attacker
/// would name the server's own admin port, or a cloud's metadata service) gets nothing, and its
/// record says why; `--webhook-allow-private` (the other tests) lets them through.
#[test]
fn a_default_server_delivers_to_no_loopback_endpoint() {
    let s = Served::over(Database::builder().fresh().unwrap());
    let mut admin = s.client(&s.admin);
    let (url, inbox) = receiver(Arc::new(Mutex::new(String::new())));
    let hook = ok(&send(
        &mut admin,
        "POST",
        "/v1/webhooks",
        Some(json!({"url": url})),
    ));
    let by_name = url.replace("127.0.0.1", "localhost");
    ok(&send(
        &mut admin,
        "POST",
        "/v1/webhooks",
        Some(json!({"url": by_name})),
    ));
    tool(
        &mut admin,
        "u",
        json!({"command": "create", "path": "/memories/a.md", "file_text": "x"}),
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    let listed = loop {
        let listed = ok(&admin.get("/v1/webhooks"));
        let data = listed["data"].as_array().unwrap().clone();
        if data.len() == 2 && data.iter().all(|h| h["failures"].as_u64() >= Some(1)) {
            break data;
        }
        assert!(Instant::now() < deadline, "{listed}");
        std::thread::sleep(Duration::from_millis(20));
    };
    for h in &listed {
        let error = h["last_error"].as_str().unwrap_or_default();
        assert!(
            error.contains("not a public address") || error.contains("no public address"),
            "{h}"
        );
        assert_eq!(h["delivered_seq"], 0, "{h}");
    }
    assert!(listed.iter().any(|h| h["id"] == hook["id"]));
    assert!(inbox.got.lock().unwrap().is_empty());
}

fn leading(s: &Served) -> bool {
    let text = s.client(&s.admin).get("/metrics").text().to_owned();
    text.lines().any(|l| l == "memkv_webhooks_leading 1")
}

#[test]
fn of_two_servers_on_one_database_one_delivers_and_the_other_takes_over() {
    library::on(library::Backend::Postgres, &|| {
        let url = library::fresh_location().unwrap();
        let a = Served::delivering_locally(Database::builder().open(&url).unwrap());
        let b = Served::delivering_locally(Database::builder().open(&url).unwrap());
        // Each server has its own keys file: b's admin key is b's.
        let secret = Arc::new(Mutex::new(String::new()));
        let (hook_url, inbox) = receiver(Arc::clone(&secret));
        let hook = ok(&send(
            &mut a.client(&a.admin),
            "POST",
            "/v1/webhooks",
            Some(json!({"url": hook_url})),
        ));
        *secret.lock().unwrap() = hook["secret"].as_str().unwrap().to_owned();
        // One of them leads.
        let deadline = Instant::now() + Duration::from_secs(20);
        while !(leading(&a) ^ leading(&b)) {
            assert!(
                Instant::now() < deadline,
                "no single deliverer: {} {}",
                leading(&a),
                leading(&b)
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        for i in 0..10 {
            let server = if i % 2 == 0 { &a } else { &b };
            let mut c = server.client(&server.admin);
            tool(
                &mut c,
                "u",
                json!({"command": "create", "path": format!("/memories/{i}.md"), "file_text": "x"}),
            );
        }
        let got = inbox.wait(10);
        let seqs: Vec<u64> = got
            .iter()
            .map(|(_, b)| b["data"]["seq"].as_u64().unwrap())
            .collect();
        assert_eq!(seqs, (1..=10).collect::<Vec<_>>(), "each once, in order");
        // The leader goes; the other takes over and delivers what comes next.
        let (gone, left) = if leading(&a) { (a, b) } else { (b, a) };
        drop(gone);
        tool(
            &mut left.client(&left.admin),
            "u",
            json!({"command": "create", "path": "/memories/late.md", "file_text": "x"}),
        );
        let got = inbox.wait(11);
        assert_eq!(got[10].1["data"]["seq"], 11, "an entry delivered twice");
        assert!(leading(&left));
    });
}
