//! `memkv serve --pin-workers`: each async worker on a CPU of its own, the same answers.

use std::collections::BTreeSet;

use super::client::Client;
use super::proc::{Served, temp_db};
use super::{data, exec, over_http};

/// `Cpus_allowed_list` of each of `pid`'s threads named `name`.
fn cpus_of_threads(pid: u32, name: &str) -> Vec<String> {
    let mut out = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let dir = task.unwrap().path();
        let Ok(comm) = std::fs::read_to_string(dir.join("comm")) else {
            continue; // the thread has just ended
        };
        if comm.trim_end() != name {
            continue;
        }
        out.push(allowed_list(&dir.join("status")));
    }
    out.sort();
    out
}

/// The `Cpus_allowed_list` (`0-1`, say) of a thread's `status` file.
fn allowed_list(status: &std::path::Path) -> String {
    std::fs::read_to_string(status)
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap()
        .trim()
        .to_owned()
}

/// This test's `Cpus_allowed_list`.
fn my_list() -> String {
    allowed_list("/proc/thread-self/status".as_ref())
}

/// The CPUs this test may run on, as `/proc` lists them one by one (`0`, `1`, …).
fn my_cpus() -> BTreeSet<String> {
    let list = my_list();
    let mut cpus = BTreeSet::new();
    for part in list.split(',') {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        for c in a.parse::<usize>().unwrap()..=b.parse::<usize>().unwrap() {
            cpus.insert(c.to_string());
        }
    }
    cpus
}

#[test]
fn pinned_workers_each_have_a_cpu_and_answer_as_exec_does() {
    let (_dir, db) = temp_db();
    let server = Served::start(&db, &["--no-auth", "--pin-workers"]);
    let mut client = Client::new(server.addr);
    let agent = data("benches/data/agent-session.jsonl");
    let http = over_http(&mut client, "agent", &agent);

    // `/metrics` runs on tokio's blocking pool: a thread started by a pinned worker, which
    // must not stay on that worker's CPU.
    assert_eq!(client.get("/metrics").status, 200);

    // One worker per CPU the server may use (it inherits this test's), each pinned to its own;
    // the writer and the blocking pool's threads (also named memkv-serve) run on every CPU.
    let mine = my_cpus();
    let runtime = cpus_of_threads(server.pid(), "memkv-serve");
    let (pinned, free): (Vec<String>, Vec<String>) =
        runtime.iter().cloned().partition(|c| mine.contains(c));
    assert_eq!(
        pinned.iter().cloned().collect::<BTreeSet<_>>(),
        mine,
        "{runtime:?}"
    );
    assert_eq!(pinned.len(), mine.len(), "{runtime:?}");
    let writer = cpus_of_threads(server.pid(), "memkv-writer");
    assert_eq!(writer.len(), 1);
    if mine.len() > 1 {
        assert!(!free.is_empty(), "no blocking-pool thread: {runtime:?}");
        for cpus in free.iter().chain(&writer) {
            assert_eq!(*cpus, my_list(), "pinned: {runtime:?} {writer:?}");
        }
    }
    assert!(
        server.log().contains("async workers pinned, one per CPU"),
        "{}",
        server.log()
    );
    drop(server);

    let (_dir2, db2) = temp_db();
    assert_eq!(http, exec(&db2, "agent", agent.as_bytes()));
}
