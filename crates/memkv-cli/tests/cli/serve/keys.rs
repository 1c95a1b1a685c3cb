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

    // Beside the running server, `keys add` wrote the keys file, which the server imported
    // and renamed; only hashes were ever written there.
    assert!(!db.with_extension("redb.keys").exists());
    let file = std::fs::read_to_string(db.with_extension("redb.keys.imported")).unwrap();
    assert!(!file.contains(&alice_key[4..]) && !file.contains(&admin_key[4..]));
    // The server lists both (never the keys); `keys list` cannot open the file it holds, and
    // says where to look instead.
    let listed = admin.get("/v1/keys");
    assert_eq!(listed.status, 200);
    let list = listed.json();
    let data = list["data"].as_array().unwrap();
    assert_eq!(data.len(), 2, "{list}");
    assert!(
        !list.to_string().contains(&alice_key[4..]) && !list.to_string().contains(&admin_key[4..])
    );
    let alice_id = data.iter().find(|k| k["store"] == "alice").unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let out = memkv(&db).args(["keys", "list"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("GET /v1/keys"), "{err}");
    // Through the server, it does.
    let url = format!("http://{}", server.addr);
    let out = memkv(&db)
        .args(["keys", "list", "--url", &url, "--api-key", &admin_key])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let table = String::from_utf8(out.stdout).unwrap();
    assert_eq!(table.lines().count(), 3, "{table}");
    assert!(table.starts_with("ID "), "{table}");
    assert!(
        table.contains(&alice_id) && table.contains("store \"alice\""),
        "{table}"
    );
    assert!(!table.contains(&alice_key[4..]) && !table.contains(&admin_key[4..]));
    let out = memkv(&db)
        .args([
            "keys",
            "list",
            "--json",
            "--url",
            &url,
            "--api-key",
            &alice_key,
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("403"),
        "{out:?}"
    );
    // Revoking alice's (through the keys file) takes effect within a second.
    let out = memkv(&db)
        .args(["keys", "revoke", &alice_id])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
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
    // With the server stopped, `keys` opens the database itself: alice's key is gone.
    let out = memkv(&db)
        .args(["keys", "revoke", &alice_id])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let out = memkv(&db).args(["keys", "list"]).output().unwrap();
    let list = String::from_utf8(out.stdout).unwrap();
    assert_eq!(list.lines().count(), 2, "{list}");
    assert!(list.contains("admin") && !list.contains("alice"), "{list}");
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
    // Once a key exists (here added through the keyless server itself), nothing is served
    // keyless any more.
    let added = anyone
        .send(
            "POST",
            "/v1/keys",
            &[("content-type", "application/json")],
            br#"{"store":"alice"}"#,
        )
        .unwrap();
    assert_eq!(added.status, 200);
    let r = anyone.tool("alice", VIEW);
    assert_eq!(
        (r.status, r.error_type().as_str()),
        (401, "authentication_error")
    );
    assert!(r.message().contains("--no-auth"), "{r:?}");
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
            "holds 2 API key(s)",
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

/// Revoking the last key never widens access.
#[test]
fn revoking_the_last_key_refuses_everyone() {
    let (_dir, db) = temp_db();
    let alice_key = add_key(&db, &["--store", "alice"]);
    let out = memkv(&db)
        .args(["keys", "list", "--json"])
        .output()
        .unwrap();
    let listed: serde_json::Value =
        serde_json::from_slice(out.stdout.split(|b| *b == b'\n').next().unwrap()).unwrap();
    let id = listed["id"].as_str().unwrap().to_owned();
    assert_eq!(listed["store"], "alice");
    let mut server = Served::start(&db, &[]);
    let mut alice = Client::with_key(server.addr, &alice_key);
    assert_eq!(alice.tool("alice", VIEW).status, 200);
    assert!(
        memkv(&db)
            .args(["keys", "revoke", &id])
            .status()
            .unwrap()
            .success()
    );
    let mut anyone = Client::new(server.addr);
    // The revoked key works until the server's next look, within a second.
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
    assert_eq!(anyone.get("/healthz").status, 200);
    assert!(server.stop_with(libc::SIGTERM).success());
}

/// A read-only key reads its store and changes nothing; an expired key is refused.
#[test]
fn read_only_and_expiring_keys() {
    let (_dir, db) = temp_db();
    let writer = add_key(&db, &["--store", "alice"]);
    let reader = add_key(
        &db,
        &["--store", "alice", "--read-only", "--label", "auditor"],
    );
    let mut server = Served::start(&db, &[]);
    let mut w = Client::with_key(server.addr, &writer);
    let mut r = Client::with_key(server.addr, &reader);
    let create = br#"{"command":"create","path":"/memories/a.md","file_text":"hi"}"#;
    assert_eq!(w.tool("alice", create).json()["is_error"], false);
    let answer = r.tool("alice", br#"{"command":"delete","path":"/memories/a.md"}"#);
    assert_eq!(
        answer.json(),
        serde_json::json!({"content": "Error: This memory store is read-only for this session; the delete command was not applied.", "is_error": true})
    );
    let view = r.tool("alice", br#"{"command":"view","path":"/memories/a.md"}"#);
    assert_eq!(view.json()["is_error"], false, "{view:?}");
    // A key that expires in two seconds, added beside the running server.
    let short = add_key(&db, &["--store", "alice", "--expires", "2s"]);
    let mut s = Client::with_key(server.addr, &short);
    assert_eq!(s.tool("alice", VIEW).status, 200);
    let deadline = Instant::now() + Duration::from_secs(10);
    let refused = loop {
        let answer = s.tool("alice", VIEW);
        if answer.status != 200 {
            break answer;
        }
        assert!(Instant::now() < deadline, "the key never expired");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(refused.status, 401);
    assert!(refused.message().contains("expired"), "{refused:?}");
    assert!(server.stop_with(libc::SIGTERM).success());
    // Once the server is gone: the keys as `keys list` shows them, last use recorded at
    // shutdown.
    let out = memkv(&db).args(["keys", "list"]).output().unwrap();
    let list = String::from_utf8(out.stdout).unwrap();
    let line = list.lines().find(|l| l.contains("auditor")).unwrap();
    assert!(
        line.contains("read-only") && !line.contains(" - "),
        "{list}"
    );
    assert!(list.contains("(expired)"), "{list}");
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

/// `--log-format json`: every line the server logs is one JSON object with a timestamp, a
/// level and a message; a request's line carries its fields, never the key.
#[test]
fn json_logs_are_one_object_per_line() {
    let (_dir, db) = temp_db();
    let key = add_key(&db, &["--store", "alice"]);
    let mut server = Served::start(&db, &["--log-format", "json"]);
    let mut alice = Client::with_key(server.addr, &key);
    assert_eq!(alice.tool("alice", VIEW).status, 200);
    assert!(server.stop_with(libc::SIGTERM).success());
    let log = server.log();
    let lines: Vec<serde_json::Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert!(lines.len() >= 3, "{log}");
    for line in &lines {
        assert!(
            line["timestamp"].is_string() && line["level"].is_string(),
            "{line}"
        );
        assert!(line["message"].is_string(), "{line}");
    }
    let request = lines
        .iter()
        .find(|l| l["message"] == "request")
        .unwrap_or_else(|| panic!("{log}"));
    assert_eq!(request["status"], 200);
    assert_eq!(request["store"], "alice");
    assert!(!log.contains(&key[4..]));
}

/// `--drain-delay`: after SIGTERM the server answers `/readyz` 503 but goes on serving for the
/// delay (a balancer takes it out meanwhile), then stops as usual and exits 0.
#[test]
fn a_drain_delay_serves_on_while_readyz_says_no() {
    let (_dir, db) = temp_db();
    let mut server = Served::start(&db, &["--no-auth", "--drain-delay", "3s"]);
    let mut c = Client::new(server.addr);
    assert_eq!(c.get("/readyz").status, 200);
    let asked = Instant::now();
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(libc::pid_t::try_from(server.pid()).unwrap(), libc::SIGTERM) };
    let deadline = Instant::now() + Duration::from_secs(2);
    while c.get("/readyz").status != 503 {
        assert!(Instant::now() < deadline, "/readyz never said 503");
        std::thread::sleep(Duration::from_millis(20));
    }
    // Still serving, on new connections too.
    assert_eq!(c.tool("alice", VIEW).status, 200);
    assert_eq!(Client::new(server.addr).tool("alice", VIEW).status, 200);
    assert!(server.stop_with(libc::SIGTERM).success());
    assert!(
        asked.elapsed() >= Duration::from_secs(3),
        "{:?}",
        asked.elapsed()
    );
    assert!(
        server
            .log()
            .contains("still serving until the drain delay ends")
    );
}

#[test]
fn a_keys_file_another_user_could_have_written_is_refused_and_said_so() {
    use sha2::Digest;
    use std::os::unix::fs::PermissionsExt;
    let (_dir, db) = temp_db();
    add_key(&db, &["--admin"]);
    let server = Served::start(&db, &[]);
    // Someone plants DB.keys, writable by everyone, with an admin key of their own.
    let key = format!("mkv_{}", "ab".repeat(32));
    let sha: String = sha2::Sha256::digest(key.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let planted = db.with_extension("redb.keys");
    let line = serde_json::json!({
        "id": "key_0000000000ff", "store": null, "sha256": sha, "created": "2026-12-05T00:00:00Z"
    });
    std::fs::write(&planted, format!("{line}\n")).unwrap();
    std::fs::set_permissions(&planted, std::fs::Permissions::from_mode(0o666)).unwrap();
    let log = server.log_with(|l| l.contains("refusing the keys file"));
    assert!(
        log.contains("its mode 666 lets group or others write it"),
        "{log}"
    );
    let r = Client::with_key(server.addr, &key).get("/v1/keys");
    assert_eq!(r.status, 401, "{r:?}");
    assert!(planted.exists(), "a refused file is left where it is");
    // Its owner mends the mode: then it is imported.
    std::fs::set_permissions(&planted, std::fs::Permissions::from_mode(0o600)).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while Client::with_key(server.addr, &key).get("/v1/keys").status != 200 {
        assert!(
            Instant::now() < deadline,
            "never imported: {}",
            server.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!planted.exists());
}
