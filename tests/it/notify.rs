//! Notifications of commits on PostgreSQL ([`memkv::Database::watch_remote`]): what another
//! process's write changed arrives (also from one that writes and goes at once), a burst arrives
//! coalesced, and a lost listener connects again and says that everything may have changed.

use std::sync::mpsc::{Receiver, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use memkv::storage::watch::Changed;
use memkv::{Database, KeyScope, NewKey, StoreSettings};
use serde_json::json;

use crate::util::pg;

/// Generous: a notification arrives within milliseconds on a quiet machine.
const PATIENCE: Duration = Duration::from_secs(10);

fn create(db: &Database, store: &str, path: &str) {
    let command =
        memkv::Command::from_json(&json!({"command": "create", "path": path, "file_text": "x"}))
            .unwrap();
    let out = db.user(store).unwrap().execute(&command).unwrap();
    assert!(!out.is_error, "{}", out.content);
}

/// The next call's `Changed` for which `wanted` holds, within [`PATIENCE`].
fn next(calls: &Receiver<Changed>, wanted: impl Fn(&Changed) -> bool) -> Changed {
    let until = Instant::now() + PATIENCE;
    loop {
        let left = until.saturating_duration_since(Instant::now());
        let changed = calls.recv_timeout(left).expect("told within the patience");
        if wanted(&changed) {
            return changed;
        }
    }
}

#[test]
fn another_handles_commits_are_told_by_kind_and_a_lost_listener_says_everything() {
    let Some(cluster) = pg::cluster() else { return };
    let url = cluster.fresh_url();
    let (watcher, writer) = (Database::open(&url).unwrap(), Database::open(&url).unwrap());
    let (tx, calls) = channel();
    let watch = watcher
        .watch_remote(move |changed| {
            let _ = tx.send(changed);
        })
        .unwrap()
        .expect("PostgreSQL notifies");
    // Connected: whatever came before could not be heard.
    assert_eq!(next(&calls, |_| true), Changed::EVERYTHING);

    writer.add_key(&NewKey::new(KeyScope::Admin)).unwrap();
    assert!(next(&calls, |c| c.keys).keys);
    let settings = StoreSettings {
        max_files: Some(5),
        ..StoreSettings::default()
    };
    writer.update_store_settings("u", &settings, &[]).unwrap();
    next(&calls, |c| c.settings);
    create(&writer, "u", "/memories/a.md");
    next(&calls, |c| c.changes);

    // The listener's connection is lost: it connects again and says everything.
    let mut admin = postgres::Client::connect(&cluster.admin_url(), postgres::NoTls).unwrap();
    let channel = format!("memkv.{}", url.rsplit("search_path%3D").next().unwrap());
    let ended = admin
        .query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query = $1",
            &[&format!("LISTEN \"{channel}\"")],
        )
        .unwrap();
    assert_eq!(ended.len(), 1, "one listener");
    next(&calls, |c| *c == Changed::EVERYTHING);
    create(&writer, "u", "/memories/b.md");
    next(&calls, |c| c.changes);
    drop(writer);

    // Entries are told after their commit: a handle that writes and goes is heard all the same.
    let brief = Database::open(&url).unwrap();
    create(&brief, "v", "/memories/c.md");
    drop(brief);
    next(&calls, |c| c.changes);
    drop(watch);
}

/// Commits made while the watcher is busy arrive as one call (or a few), not one per commit.
#[test]
fn a_burst_of_commits_is_told_in_a_few_calls() {
    let Some(cluster) = pg::cluster() else { return };
    let url = cluster.fresh_url();
    let (watcher, writer) = (Database::open(&url).unwrap(), Database::open(&url).unwrap());
    let gate = Arc::new(Mutex::new(()));
    let held = Arc::clone(&gate);
    let (tx, calls) = channel();
    let _watch = watcher
        .watch_remote(move |changed| {
            drop(held.lock());
            let _ = tx.send(changed);
        })
        .unwrap()
        .expect("PostgreSQL notifies");
    assert_eq!(next(&calls, |_| true), Changed::EVERYTHING);
    const COMMITS: usize = 300;
    let closed = gate.lock().unwrap();
    for i in 0..COMMITS {
        create(&writer, "u", &format!("/memories/{i}.md"));
    }
    drop(closed);
    // Every commit told; then nothing more comes.
    let mut told = 0;
    while let Ok(changed) = calls.recv_timeout(Duration::from_secs(1)) {
        assert!(changed.changes, "{changed:?}");
        told += 1;
    }
    assert!(
        (1..=5).contains(&told),
        "{COMMITS} commits told in {told} calls"
    );
}
