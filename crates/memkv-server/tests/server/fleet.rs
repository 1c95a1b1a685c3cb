//! Several servers on one PostgreSQL database: what one changes, the others learn from the
//! commit's notification, not from a poll.

use std::time::{Duration, Instant};

use memkv::Database;
use serde_json::json;

use crate::library;
use crate::served::{Served, ok, send};

/// A key revoked through server A is refused by server B within 100 ms of A's answer. On a
/// quiet machine it takes 1 to 3 ms (the notification, B's read of the keys, the request); the
/// bound is well over ten times that. B is asked in a loop, each request a round trip of its
/// own, for at most 10 s.
#[test]
fn a_key_revoked_on_one_server_is_refused_by_another_within_100_ms() {
    let Some(cluster) = library::pg::cluster() else {
        return;
    };
    let url = cluster.fresh_url();
    let a = Served::over(Database::open(&url).unwrap());
    let b = Served::over(Database::open(&url).unwrap());
    let mut admin_a = a.client(&a.admin);
    let view = br#"{"command":"view","path":"/memories"}"#;
    for round in 0..5 {
        let added = ok(&send(
            &mut admin_a,
            "POST",
            "/v1/keys",
            Some(json!({"store": "alice"})),
        ));
        let key = added["key"].as_str().unwrap().to_owned();
        let id = added["id"].as_str().unwrap().to_owned();
        let mut on_b = b.client(&key);
        let deadline = Instant::now() + Duration::from_secs(10);
        while on_b.tool("alice", view).status != 200 {
            assert!(Instant::now() < deadline, "the new key never worked on B");
            std::thread::sleep(Duration::from_millis(1));
        }
        ok(&send(
            &mut admin_a,
            "DELETE",
            &format!("/v1/keys/{id}"),
            None,
        ));
        let revoked = Instant::now();
        let deadline = revoked + Duration::from_secs(10);
        loop {
            let status = on_b.tool("alice", view).status;
            if status == 401 {
                break;
            }
            assert_eq!(status, 200, "round {round}");
            assert!(Instant::now() < deadline, "B never refused the key");
        }
        let took = revoked.elapsed();
        eprintln!("round {round}: refused by B {took:?} after A revoked the key");
        assert!(
            took < Duration::from_millis(100),
            "round {round}: B refused the key {took:?} after A revoked it"
        );
    }
}
