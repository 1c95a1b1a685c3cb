//! Faults on PostgreSQL: connections killed mid-command and a server restart under load. Every
//! command is answered with its result or a clean error, nothing is half-applied, and the same
//! `Database` carries on. Its own test binary: the restart must not hit other tests' connections.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use memkv::{Database, Error};
use serde_json::json;

#[path = "support/pg.rs"]
mod pg;

/// Runs inserts into a log and creates of files from 4 threads while `fault` runs (once 40
/// commands are done; it returns how many of memkv's connections it ended); then checks that
/// the fault hit memkv's connections, that commands went on after it, that every answered
/// command is in the data exactly once, refused ones are absent, and the invariants hold.
fn under_load(fault: impl FnOnce(&pg::Cluster) -> usize + Send) {
    // One fault at a time: a restart would hit the other test's connections.
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _serial = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let Some(cluster) = pg::cluster() else { return };
    let store = Arc::new(Database::open(cluster.fresh_url()).unwrap());
    let u = store.user("load").unwrap();
    u.execute_json(&json!({"command": "create", "path": "/memories/log.md", "file_text": ""}))
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicUsize::new(0));
    let (mut hits, mut before, mut after) = (0, 0, 0);
    let outcomes = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..4)
            .map(|t| {
                let (store, stop, done) =
                    (Arc::clone(&store), Arc::clone(&stop), Arc::clone(&done));
                scope.spawn(move || {
                    let u = store.user("load").unwrap();
                    let mut out = Vec::new();
                    for i in 0..400 {
                        if stop.load(Ordering::Relaxed) && i > 40 {
                            break;
                        }
                        let line = format!("t{t}-{i}");
                        let input = if i % 2 == 0 {
                            json!({"command": "insert", "path": "/memories/log.md", "insert_line": 0, "insert_text": line})
                        } else {
                            json!({"command": "create", "path": format!("/memories/t{t}/{line}.md"), "file_text": line})
                        };
                        out.push((line, input["command"].clone(), u.execute_json(&input)));
                        done.fetch_add(1, Ordering::SeqCst);
                    }
                    out
                })
            })
            .collect();
        // The fault hits a running load, and the load goes on after it (events, not time).
        let until = |n: usize| {
            let deadline = Instant::now() + Duration::from_secs(60);
            while done.load(Ordering::SeqCst) < n {
                assert!(
                    Instant::now() < deadline,
                    "the load stalled at {n} commands"
                );
                std::thread::sleep(Duration::from_millis(5));
            }
        };
        until(40);
        before = done.load(Ordering::SeqCst);
        hits = fault(cluster);
        let at_fault = done.load(Ordering::SeqCst);
        until(at_fault + 40);
        after = done.load(Ordering::SeqCst) - at_fault;
        stop.store(true, Ordering::Relaxed);
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap())
            .collect::<Vec<_>>()
    });
    let log = u.read_file("/memories/log.md").unwrap().unwrap();
    let (mut ok, mut failed, mut unknown) = (0, 0, 0);
    for (line, command, result) in &outcomes {
        let present = if command == "insert" {
            log.lines().filter(|l| l == line).count()
        } else {
            let path = format!("/memories/{}/{line}.md", &line[..line.find('-').unwrap()]);
            usize::from(u.read_file(&path).unwrap().is_some())
        };
        match result {
            Ok(out) => {
                assert!(!out.is_error, "{line}: {}", out.content);
                assert_eq!(
                    present, 1,
                    "{line} was answered but is stored {present} times"
                );
                ok += 1;
            }
            Err(Error::OutcomeUnknown { .. }) => {
                assert!(present <= 1, "{line} stored {present} times");
                unknown += 1;
            }
            Err(e @ (Error::Busy { .. } | Error::Storage(_))) => {
                assert!(!e.to_string().contains("password"), "{e}");
                assert_eq!(present, 0, "{line} failed ({e}) but is stored");
                failed += 1;
            }
            Err(e) => panic!("{line}: unexpected error {e}"),
        }
    }
    eprintln!(
        "{hits} connections ended; {before} commands before, {after} after; {ok} applied, {failed} refused cleanly, {unknown} of unknown outcome"
    );
    assert!(hits > 0, "the fault ended none of memkv's connections");
    assert!(before >= 40 && after >= 40, "{before} {after}");
    assert!(ok > 0);
    assert!(store.check().unwrap().is_empty());
    // The same store works on, without a restart of its own.
    let after = json!({"command": "create", "path": "/memories/after.md", "file_text": "x"});
    assert!(!u.execute_json(&after).unwrap().is_error);
}

#[test]
fn connections_killed_mid_command() {
    under_load(|cluster| {
        let mut ended = 0;
        for _ in 0..10 {
            ended += cluster
                .rows(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                     WHERE application_name = 'memkv' AND pid <> pg_backend_pid()",
                )
                .iter()
                .filter(|row| row[0] == "t")
                .count();
            std::thread::sleep(Duration::from_millis(40));
        }
        ended
    });
}

#[test]
fn the_server_restarts_under_load() {
    under_load(|cluster| {
        // Every connection memkv has open ends with the server.
        let open = cluster
            .rows("SELECT count(*) FROM pg_stat_activity WHERE application_name = 'memkv'")[0][0]
            .parse()
            .unwrap();
        cluster.restart();
        open
    });
}
