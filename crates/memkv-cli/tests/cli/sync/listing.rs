//! A server of the memory-stores API without memkv's change feed (here `memkv serve` behind a
//! proxy that answers 404 to the feed): the syncs list the store at their interval instead.

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::converge::status_ready;
use super::{SyncProc, World, agent_write, folder_files, status, wait_for};

#[test]
fn without_the_feed_the_syncs_follow_by_listing() {
    let world = World::new(&[]);
    world.proxy.hide_feed.store(true, Ordering::SeqCst);
    let (a, sa) = world.folder("a");
    let (b, sb) = world.folder("b");
    let args = ["--poll-interval", "1s"];
    let pa = SyncProc::start(&world, &a, &sa, "alpha", &args);
    let pb = SyncProc::start(&world, &b, &sb, "beta", &args);
    assert!(wait_for(Duration::from_secs(30), || status_ready(&a, &sa)
        && status_ready(&b, &sb)));
    assert_eq!(status(&a, &sa)["following"], "listing", "{}", pa.log());
    // A create, an edit, a rename and a delete made in A reach B (a listing a second).
    agent_write(&a.join("one.md"), "one\n");
    agent_write(&a.join("two.md"), "two\n");
    let (ra, rb) = (a.clone(), b.clone());
    let same = move |want: &[(&str, &str)]| {
        let want: std::collections::BTreeMap<String, String> = want
            .iter()
            .map(|(p, c)| (p.to_string(), c.to_string()))
            .collect();
        let (ra, rb) = (ra.clone(), rb.clone());
        move || folder_files(&rb) == want && folder_files(&ra) == want
    };
    assert!(
        wait_for(
            Duration::from_secs(30),
            same(&[("/one.md", "one\n"), ("/two.md", "two\n")])
        ),
        "{}\n{}",
        pa.log(),
        pb.log()
    );
    agent_write(&a.join("one.md"), "one, edited\n");
    std::fs::rename(a.join("two.md"), a.join("three.md")).unwrap();
    assert!(
        wait_for(
            Duration::from_secs(30),
            same(&[("/one.md", "one, edited\n"), ("/three.md", "two\n")])
        ),
        "{}\n{}",
        pa.log(),
        pb.log()
    );
    std::fs::remove_file(b.join("one.md")).unwrap();
    assert!(
        wait_for(Duration::from_secs(30), same(&[("/three.md", "two\n")])),
        "{}\n{}",
        pa.log(),
        pb.log()
    );
    assert_eq!(world.store_files().len(), 1);
}
