//! Keys: added and revoked while the server runs, either header, the wrong store, no key.

use std::time::{Duration, Instant};

use super::client::Client;
use super::proc::{Served, add_key, memkv, temp_db};

const VIEW: &[u8] = br#"{"command":"view","path":"/memories"}"#;

#[test]
fn keys_are_checked_and_take_effect_without_a_restart() {
    let (_dir, db) = temp_db();
    let mut server = Served::start(&db, &[]);
    let mut anyone = Client::new(server.addr);
    // No key exists and no --no-auth: every request but /healthz is refused, saying how to add
    // a key; the server said so at start.
    let r = anyone.tool("alice", VIEW);
    assert_eq!(
        (r.status, r.error_type().as_str()),
        (401, "authentication_error")
    );
    assert!(r.message().contains("memkv keys add --store NAME"), "{r:?}");
    assert_eq!(anyone.get("/healthz").status, 200);
    assert_eq!(anyone.get("/metrics").status, 401);
    assert_eq!(
        Client::with_key(server.addr, "mkv_0000")
            .tool("alice", VIEW)
            .status,
        401
    );
    assert!(
        server
            .log_with(|l| l.contains("no API key exists"))
            .contains("WARN"),
        "{}",
        server.log()
    );

    let alice_key = add_key(&db, &["--store", "alice"]);
    // The first key works at once, without a restart; a request without it is still refused.
    let r = anyone.tool("alice", VIEW);
    assert_eq!(
        (r.status, r.error_type().as_str()),
        (401, "authentication_error")
    );
    let r = Client::with_key(server.addr, "mkv_0000").tool("alice", VIEW);
    assert_eq!(
        (r.status, r.error_type().as_str()),
        (401, "authentication_error")
    );

    let mut alice = Client::with_key(server.addr, &alice_key);
    assert_eq!(alice.tool("alice", VIEW).status, 200);
    let r = alice.tool("bob", VIEW);
    assert_eq!(
        (r.status, r.error_type().as_str()),
        (404, "not_found_error")
    );
    // Authorization: Bearer works the same.
    let mut bearer = Client::new(server.addr);
    bearer
        .headers
        .push(("authorization".into(), format!("Bearer {alice_key}")));
    assert_eq!(bearer.tool("alice", VIEW).status, 200);
    assert_eq!(bearer.tool("bob", VIEW).status, 404);
    // A store key is not an operator key.
    let r = alice.get("/metrics");
    assert_eq!(
        (r.status, r.error_type().as_str()),
        (403, "permission_error")
    );

    let admin_key = add_key(&db, &["--admin"]);
    let mut admin = Client::with_key(server.addr, &admin_key);
    assert_eq!(admin.tool("bob", VIEW).status, 200);
    assert_eq!(admin.get("/metrics").status, 200);

    // `keys list` names both, never the keys; revoking alice's takes effect within seconds.
    let out = memkv(&db).args(["keys", "list"]).output().unwrap();
    let list = String::from_utf8(out.stdout).unwrap();
    assert_eq!(list.lines().count(), 3, "{list}");
    assert!(
        list.contains("store \"alice\"") && list.contains("admin"),
        "{list}"
    );
    assert!(!list.contains(&alice_key[4..]) && !list.contains(&admin_key[4..]));
    let file = std::fs::read_to_string(db.with_extension("redb.keys")).unwrap();
    assert!(!file.contains(&alice_key[4..]) && !file.contains(&admin_key[4..]));
    let alice_id = list
        .lines()
        .find(|l| l.contains("alice"))
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .to_owned();
    let out = memkv(&db)
        .args(["keys", "revoke", &alice_id])
        .output()
        .unwrap();
    assert!(out.status.success());
    let out = memkv(&db)
        .args(["keys", "revoke", &alice_id])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let r = alice.tool("alice", VIEW);
        if r.status == 401 {
            break;
        }
        assert_eq!(r.status, 200);
        assert!(Instant::now() < deadline, "the revoked key still works");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(admin.tool("alice", VIEW).status, 200);
    // Keys and contents never reach the log: all of it, once the server has written it out
    // and exited (lines are written in batches), down to the revoked key's 401.
    let status = server.stop_with(libc::SIGTERM);
    assert!(status.success(), "exit {status}");
    let log = server.log();
    assert!(log.contains("status=401"), "{log}");
    assert!(!log.contains(&admin_key[4..]) && !log.contains(&alice_key[4..]));
}

/// Keyless serving only when asked for at start, on loopback, with no key, and said in the log.
#[test]
fn no_auth_is_explicit_loopback_only_and_keyless_only() {
    let (_dir, db) = temp_db();
    let mut server = Served::start(&db, &["--no-auth"]);
    let mut anyone = Client::new(server.addr);
    assert_eq!(anyone.tool("alice", VIEW).status, 200);
    // Not when the request names another host (a browser tricked by DNS rebinding).
    let r = anyone
        .send(
            "POST",
            "/v1/memory_stores/alice/tool",
            &[
                ("content-type", "application/json"),
                ("host", "evil.example"),
            ],
            VIEW,
        )
        .unwrap();
    assert_eq!(
        (r.status, r.error_type().as_str()),
        (403, "permission_error")
    );
    assert!(server.stop_with(libc::SIGTERM).success());
    let log = server.log();
    assert!(
        log.lines()
            .any(|l| l.contains("WARN") && l.contains("WITHOUT API keys")),
        "{log}"
    );

    for (args, wanted) in [
        (
            &["--listen", "0.0.0.0:0", "--no-auth"][..],
            "--no-auth is allowed only on a loopback address",
        ),
        (
            &["--listen", "127.0.0.1:0", "--no-auth"][..],
            "holds 1 API key(s)",
        ),
    ] {
        if wanted.contains("API key(s)") {
            add_key(&db, &["--admin"]);
        }
        let out = memkv(&db).arg("serve").args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert!(out.stdout.is_empty());
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(err.contains(wanted), "{err}");
    }
}

/// Revoking the last key, or moving the keys file away, never widens access.
#[test]
fn revoking_the_last_key_refuses_everyone() {
    let (_dir, db) = temp_db();
    let alice_key = add_key(&db, &["--store", "alice"]);
    let mut server = Served::start(&db, &[]);
    let mut alice = Client::with_key(server.addr, &alice_key);
    assert_eq!(alice.tool("alice", VIEW).status, 200);
    let out = memkv(&db).args(["keys", "list"]).output().unwrap();
    let list = String::from_utf8(out.stdout).unwrap();
    let id = list
        .lines()
        .nth(1)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap();
    assert!(
        memkv(&db)
            .args(["keys", "revoke", id])
            .status()
            .unwrap()
            .success()
    );
    let mut anyone = Client::new(server.addr);
    // The revoked key works until the server's next look at the file, within a second.
    let deadline = Instant::now() + Duration::from_secs(10);
    let r = loop {
        let r = alice.tool("alice", VIEW);
        if r.status != 200 {
            break r;
        }
        assert!(Instant::now() < deadline, "the revoked key still works");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(r.status, 401, "{r:?}");
    assert!(r.message().contains("no API key exists"), "{r:?}");
    for store in ["alice", "bob"] {
        let r = anyone.tool(store, VIEW);
        assert_eq!(r.status, 401, "{r:?}");
    }
    // A new key, then the file moved away: refused again, with or without a key.
    let admin_key = add_key(&db, &["--admin"]);
    let mut admin = Client::with_key(server.addr, &admin_key);
    assert_eq!(admin.tool("alice", VIEW).status, 200);
    let keys = db.with_extension("redb.keys");
    std::fs::rename(&keys, keys.with_extension("moved")).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while admin.tool("alice", VIEW).status == 200 {
        assert!(Instant::now() < deadline, "the moved keys still work");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(admin.tool("alice", VIEW).status, 401);
    assert_eq!(anyone.tool("alice", VIEW).status, 401);
    assert_eq!(anyone.get("/healthz").status, 200);
    assert!(server.stop_with(libc::SIGTERM).success());
}

#[test]
fn a_non_loopback_address_needs_a_key() {
    let (_dir, db) = temp_db();
    let out = memkv(&db)
        .args(["serve", "--listen", "0.0.0.0:0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("refusing to listen on 0.0.0.0:0 without an API key"),
        "{err}"
    );
}

#[test]
fn keys_add_refuses_an_id_exec_refuses() {
    let (_dir, db) = temp_db();
    let out = memkv(&db)
        .args(["keys", "add", "--store", ""])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let out = memkv(&db).args(["keys", "add"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(!db.with_extension("redb.keys").exists());
}
