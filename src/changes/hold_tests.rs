//! A restore moving the log on holds its numbering until it commits (`WriteTxn::log_hold`), on
//! PostgreSQL, where readers number what writers queue: an entry another process commits while
//! the restore runs is numbered after the restore's `seq`, never below it (where the restore's
//! commit would delete it).

use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::storage::Finish;
use crate::{Command, Database};

#[path = "../../tests/support/pg.rs"]
mod pg;

fn create(db: &Database, store: &str, path: &str) {
    let command =
        Command::from_json(&json!({"command": "create", "path": path, "file_text": "x"})).unwrap();
    let out = db.user(store).unwrap().execute(&command).unwrap();
    assert!(!out.is_error, "{}", out.content);
}

#[test]
fn an_entry_committed_during_a_restore_is_numbered_after_it() {
    let Some(cluster) = pg::cluster() else {
        return;
    };
    let url = cluster.fresh_url();
    let db = Database::open(&url).unwrap();
    let other = Database::open(&url).unwrap();
    create(&db, "u", "/memories/before.md");
    let to = db.last_change().unwrap() + 100;

    // The restore's transaction moves the log on to `to`, then waits for the go.
    let (started_tx, started) = mpsc::channel();
    let (go, go_rx) = mpsc::channel::<()>();
    let restore = {
        let engine = std::sync::Arc::clone(&db.engine);
        std::thread::spawn(move || {
            engine.transact(&[], false, |txn, _| {
                assert!(super::skip(txn, to)?);
                let _ = started_tx.send(());
                let _ = go_rx.recv_timeout(Duration::from_secs(60));
                Ok(((), Finish::Commit))
            })
        })
    };
    started
        .recv_timeout(Duration::from_secs(60))
        .expect("the restore started");

    // Another process commits meanwhile (its entry queued, not numbered), and a reader of its
    // own asks for the log, which numbers what is queued.
    create(&other, "v", "/memories/during.md");
    let reader = std::thread::spawn(move || other.changes(to, 1000, None));

    // The reader waits for the restore's lock (before `log_hold`, it numbered the entry below
    // `to` at once, and the restore's commit then deleted it).
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let waiting = cluster.rows(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' \
             AND application_name = 'memkv'",
        );
        if waiting[0][0] != "0" || reader.is_finished() || Instant::now() >= deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let reader_waited = !reader.is_finished();
    go.send(()).unwrap();
    restore.join().unwrap().unwrap();
    let seen = reader.join().unwrap();

    let page = db.changes(to, 1000, None).unwrap();
    let during: Vec<u64> = page
        .entries
        .iter()
        .filter(|e| e.change.store == "v")
        .map(|e| e.seq)
        .collect();
    assert_eq!(
        during.len(),
        1,
        "the entry committed during the restore: {during:?}"
    );
    assert!(
        during[0] > to,
        "numbered {} at or below the restore's {to}",
        during[0]
    );
    assert!(
        reader_waited,
        "the reader numbered while the restore held the log"
    );
    let seen = seen.expect("the reader read after the restore");
    assert!(seen.entries.iter().any(|e| e.change.store == "v"));
}
