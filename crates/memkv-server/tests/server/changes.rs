//! The change feed over a real socket, on redb and on PostgreSQL: a store's entries and every
//! store's, the keys' scoping, cursors and pages, the long poll (answered when an entry commits,
//! or empty when the wait runs out), a refused write that adds no entry, and the expired cursor;
//! and its webhooks (`webhooks`). One test binary: each costs a link of the server.

mod webhooks;

use std::time::{Duration, Instant};

use memkv::{ChangeRetention, Database};
use serde_json::{Value, json};

use crate::library::{Fresh, each_backend};
use crate::served::{Served, ok, refused, send};
use crate::{client, library};

pub(crate) fn create(c: &mut client::Client, store: &str, path: &str) {
    let body = json!({"command": "create", "path": path, "file_text": "x"}).to_string();
    let reply = c.tool(store, body.as_bytes());
    assert_eq!(reply.json()["is_error"], false, "{}", reply.text());
}

/// Until `n` long polls wait (each made its first read and found nothing), at most 20 s (the
/// polls wait 30 s; on a machine busy with other suites their threads may take seconds to
/// start). Each look at `/metrics` counts every store, so the looks are 10 ms apart.
pub(crate) fn wait_for_polls(admin: &mut client::Client, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !admin
        .get("/metrics")
        .text()
        .contains(&format!("memkv_feed_waiting {n}\n"))
    {
        assert!(Instant::now() < deadline, "{n} polls never waited");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn types(page: &Value) -> Vec<(u64, String, String)> {
    page["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["seq"].as_u64().unwrap(),
                e["type"].as_str().unwrap().to_owned(),
                e["memory_store_id"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
fn the_feed_pages_the_log_and_keys_see_their_own_store() {
    each_backend(|| {
        let s = Served::new();
        let mut admin = s.client(&s.admin);
        let store = ok(&send(
            &mut admin,
            "POST",
            "/v1/memory_stores",
            Some(json!({"name": "n"})),
        ));
        let id = store["id"].as_str().unwrap().to_owned();
        create(&mut admin, &id, "/memories/a.md");
        create(&mut admin, "other", "/memories/b.md");
        // A refused write (a path taken) adds nothing.
        let taken = send(
            &mut admin,
            "POST",
            &format!("/v1/memory_stores/{id}/memories"),
            Some(json!({"path": "/a.md", "content": "again"})),
        );
        assert_eq!(taken.status, 409);
        let all = ok(&admin.get("/v1/changes"));
        assert_eq!(
            types(&all),
            [
                (1, "store.created".to_owned(), id.clone()),
                (2, "memory.created".to_owned(), id.clone()),
                (3, "memory.created".to_owned(), "other".to_owned()),
            ]
        );
        assert_eq!(all["next_after"], 3);
        assert_eq!(all["data"][1]["path"], "/a.md");
        assert_eq!(all["data"][1]["created_by"]["type"], "api_actor");
        // A store's own changes (created, archived) are recorded as the key's too.
        let admin_id = all["data"][1]["created_by"]["api_key_id"].clone();
        assert_eq!(all["data"][0]["created_by"]["api_key_id"], admin_id);
        // Pages, from a cursor.
        let page = ok(&admin.get("/v1/changes?after=1&limit=1"));
        assert_eq!(types(&page), [(2, "memory.created".to_owned(), id.clone())]);
        assert_eq!(page["next_after"], 2);
        let end = ok(&admin.get("/v1/changes?after=3"));
        let database = s.db.identity().unwrap().unwrap();
        assert_eq!(
            end,
            json!({"data": [], "next_after": 3, "database": database})
        );
        // A store key: its store's feed; another store's is 404, every store's 403.
        let (own_key, key) = s.store_key(&id, false);
        let mut own = s.client(&key);
        // Numbered in the store's own feed: 1 and 2 (the log's 1 and 2), its cursor on its own
        // entries; the other store's write (the log's 3) shows nowhere in it.
        let mine = ok(&own.get(&format!("/v1/memory_stores/{id}/changes")));
        assert_eq!(
            types(&mine),
            [
                (1, "store.created".to_owned(), id.clone()),
                (2, "memory.created".to_owned(), id.clone()),
            ]
        );
        assert_eq!(mine["next_after"], 2);
        create(&mut admin, "other", "/memories/c.md");
        let still = ok(&own.get(&format!("/v1/memory_stores/{id}/changes?after=2")));
        assert_eq!((types(&still).len(), &still["next_after"]), (0, &json!(2)));
        refused(
            &own.get("/v1/memory_stores/other/changes"),
            404,
            "not_found_error",
        );
        refused(&own.get("/v1/changes"), 403, "permission_error");
        ok(&send(
            &mut own,
            "POST",
            &format!("/v1/memory_stores/{id}/archive"),
            None,
        ));
        let archived = ok(&own.get(&format!("/v1/memory_stores/{id}/changes?after=2")));
        assert_eq!(archived["data"][0]["seq"], 3);
        assert_eq!(archived["data"][0]["type"], "store.archived");
        assert_eq!(archived["data"][0]["created_by"]["type"], "api_actor");
        assert_eq!(archived["data"][0]["created_by"]["api_key_id"], own_key.id);
        let mut anonymous = client::Client::new(s.addr);
        refused(&anonymous.get("/v1/changes"), 401, "authentication_error");
        // Bad parameters.
        for bad in [
            "after=-1",
            "after=x",
            "limit=0",
            "limit=1001",
            "wait=61",
            "wait=nan",
        ] {
            refused(
                &admin.get(&format!("/v1/changes?{bad}")),
                400,
                "invalid_request_error",
            );
        }
    });
}

#[test]
fn a_long_poll_answers_when_an_entry_commits_or_when_the_wait_runs_out() {
    each_backend(|| {
        let s = Served::new();
        let mut admin = s.client(&s.admin);
        create(&mut admin, "u", "/memories/first.md");
        // Nothing after seq 1 for 0.3 s: an empty page, after the wait.
        let started = Instant::now();
        let empty = ok(&admin.get("/v1/memory_stores/u/changes?after=1&wait=0.3"));
        assert!(started.elapsed() >= Duration::from_millis(300));
        let database = s.db.identity().unwrap().unwrap();
        assert_eq!(
            empty,
            json!({"data": [], "next_after": 1, "database": database})
        );
        // A poll waiting up to 30 s is answered once the write commits.
        let addr = s.addr;
        let key = s.admin.clone();
        let poll = std::thread::spawn(move || {
            let mut c = client::Client::with_key(addr, &key);
            let reply = c.get("/v1/memory_stores/u/changes?after=1&wait=30");
            (reply, Instant::now())
        });
        // Once the poll is waiting (it has made its first read and found nothing)...
        wait_for_polls(&mut admin, 1);
        create(&mut admin, "u", "/memories/second.md");
        let committed = Instant::now();
        let (reply, answered) = poll.join().unwrap();
        let page = ok(&reply);
        assert_eq!(
            types(&page),
            [(2, "memory.created".to_owned(), "u".to_owned())]
        );
        // Woken by the commit, not by the end of its 30 s: a few milliseconds on a quiet
        // machine; the bound leaves room for a loaded one (the CI runs three suites at once on
        // two cores, and this binary runs the golden cases beside this test: 1.07 s seen).
        let late = answered.saturating_duration_since(committed);
        assert!(
            late < Duration::from_secs(5),
            "answered {late:?} after the commit"
        );
    });
}

/// A key revoked while its long poll waits gets 401 when the poll wakes, not the entries that
/// committed after the revocation.
#[test]
fn a_long_poll_of_a_key_revoked_meanwhile_is_refused() {
    let s = Served::new();
    let mut admin = s.client(&s.admin);
    create(&mut admin, "u", "/memories/first.md");
    let (record, key) = s.store_key("u", false);
    let addr = s.addr;
    let poll = std::thread::spawn(move || {
        let mut c = client::Client::with_key(addr, &key);
        c.get("/v1/memory_stores/u/changes?after=1&wait=30")
    });
    wait_for_polls(&mut admin, 1);
    assert!(s.db.revoke_key(&record.id).unwrap());
    create(&mut admin, "u", "/memories/second.md");
    refused(&poll.join().unwrap(), 401, "authentication_error");
}

#[test]
fn an_expired_cursor_is_gone() {
    each_backend(|| {
        let db = Database::builder()
            .change_retention(ChangeRetention {
                max_age: None,
                max_entries: Some(2),
            })
            .fresh()
            .unwrap();
        let s = Served::over(db);
        let mut admin = s.client(&s.admin);
        // Beyond the bound and the slack a writer trims within (64 entries).
        for i in 0..70 {
            create(&mut admin, "u", &format!("/memories/{i}.md"));
        }
        // What `serve` does from time to time on PostgreSQL, whose writers do not trim (on
        // redb the writes above did).
        s.db.trim_changes().unwrap();
        let kept = ok(&send(&mut admin, "GET", "/v1/changes?after=68", None));
        assert_eq!(types(&kept).len(), 2);
        let message = refused(
            &admin.get("/v1/changes?after=0"),
            410,
            "invalid_request_error",
        );
        assert!(message.contains("cursor expired"), "{message}");
        refused(
            &admin.get("/v1/memory_stores/u/changes?after=10"),
            410,
            "invalid_request_error",
        );
        // A cursor past the end (another database's, or from before a restore) is gone too,
        // on both feeds, rather than an empty page that would skip what comes before it.
        for feed in ["/v1/changes", "/v1/memory_stores/u/changes"] {
            let message = refused(
                &admin.get(&format!("{feed}?after=71&wait=30")),
                410,
                "invalid_request_error",
            );
            assert!(message.contains("cursor ahead"), "{message}");
            assert!(message.contains("ends at seq 70"), "{message}");
        }
        ok(&send(&mut admin, "GET", "/v1/changes?after=70", None));
    });
}

/// On PostgreSQL another process's commit wakes every waiting long poll, found by one looker
/// for all of them when the commit's notification arrives: while nothing commits the looker
/// does not look (but for its fallback, every 5 s), and one commit costs a look or two, not
/// one per poll.
#[test]
fn another_process_commit_wakes_every_long_poll_with_one_look_for_all() {
    let Some(cluster) = library::pg::cluster() else {
        return;
    };
    let url = cluster.fresh_url();
    let s = Served::over(Database::open(&url).unwrap());
    let other = Database::open(&url).unwrap();
    let mut admin = s.client(&s.admin);
    create(&mut admin, "u", "/memories/first.md");
    const POLLS: usize = 12;
    let polls: Vec<_> = (0..POLLS)
        .map(|_| {
            let (addr, key) = (s.addr, s.admin.clone());
            std::thread::spawn(move || {
                let mut c = client::Client::with_key(addr, &key);
                let reply = c.get("/v1/memory_stores/u/changes?after=1&wait=30");
                (reply, Instant::now())
            })
        })
        .collect();
    let looks = |admin: &mut client::Client| -> u64 {
        let reply = admin.get("/metrics");
        reply
            .text()
            .lines()
            .find_map(|l| l.strip_prefix("memkv_remote_looks_total "))
            .and_then(|v| v.trim().parse().ok())
            .expect("the metric is exported")
    };
    wait_for_polls(&mut admin, POLLS);
    // All of them wait for a second in which nothing commits: at most a look late from their
    // start, one for the setup's own notification arriving late, and the fallback's (the
    // polling looker of before looked about 20 times).
    let before = looks(&mut admin);
    std::thread::sleep(Duration::from_secs(1));
    let during = looks(&mut admin) - before;
    assert!(
        during <= 3,
        "{during} looks in an idle second for {POLLS} polls"
    );
    let before = looks(&mut admin);
    // Another process commits: every poll answers with its entry, well before its 30 s.
    let store = other.user("u").unwrap();
    store
        .execute(
            &memkv::Command::from_json(
                &json!({"command": "create", "path": "/memories/second.md", "file_text": "x"}),
            )
            .unwrap(),
        )
        .unwrap();
    let committed = Instant::now();
    for poll in polls {
        let (reply, answered) = poll.join().unwrap();
        let page = ok(&reply);
        assert_eq!(
            types(&page),
            [(2, "memory.created".to_owned(), "u".to_owned())]
        );
        // Woken by the commit, not by the end of the 30 s wait (nor by the 5 s fallback): its
        // notification reaches the looker within milliseconds, and the bound leaves room for a
        // machine busy with the other suites (a browser, builds).
        let late = answered.saturating_duration_since(committed);
        assert!(
            late < Duration::from_secs(4),
            "answered {late:?} after the commit"
        );
    }
    // One look for all the polls (two if the notification came during one), not one each.
    let after = looks(&mut admin) - before;
    assert!((1..=3).contains(&after), "{after} looks for one commit");
}
