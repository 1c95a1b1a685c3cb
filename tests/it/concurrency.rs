//! Many threads on one store: group commit keeps every caller's result exact.

use std::sync::{Arc, Barrier};

use memkv::Database;
use serde_json::json;

#[test]
fn concurrent_writers_on_a_durable_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Database::open(dir.path().join("db.redb")).unwrap());
    let threads = 16;
    let per_thread = 20;
    let start = Arc::new(Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (store, start) = (store.clone(), start.clone());
            std::thread::spawn(move || {
                start.wait();
                let user = store.user(&format!("user{}", t % 4)).unwrap();
                let mut won = 0;
                for i in 0..per_thread {
                    let out = user
                        .execute_json(&json!({"command": "create", "path": format!("/memories/t{t}/f{i}"), "file_text": format!("{t}/{i}")}))
                        .unwrap();
                    assert_eq!(out.content, format!("File created successfully at: /memories/t{t}/f{i}"));
                    // Every thread races for the same path of its user: exactly one wins.
                    let out = user
                        .execute_json(&json!({"command": "create", "path": format!("/memories/race{i}"), "file_text": format!("{t}")}))
                        .unwrap();
                    if !out.is_error {
                        won += 1;
                    } else {
                        assert_eq!(out.content, format!("Error: File /memories/race{i} already exists"));
                    }
                }
                won
            })
        })
        .collect();
    let wins: usize = handles.into_iter().map(|h| h.join().unwrap()).sum();
    // 4 users × 20 race paths, one winner each.
    assert_eq!(wins, 4 * per_thread);
    let users = store.users().unwrap();
    assert_eq!(users.len(), 4);
    for u in &users {
        assert_eq!(u.files as usize, (threads / 4) * per_thread + per_thread);
    }
    assert!(store.check().unwrap().is_empty());
    // And it is all on disk.
    drop(users);
    let store = Arc::try_unwrap(store).unwrap();
    drop(store);
    let reopened = Database::open(dir.path().join("db.redb")).unwrap();
    assert_eq!(
        reopened
            .users()
            .unwrap()
            .iter()
            .map(|u| u.files)
            .sum::<u64>(),
        (threads * per_thread + 4 * per_thread) as u64
    );
}
