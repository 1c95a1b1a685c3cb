//! Two folders ("two machines"), a `memkv sync` on each, one server, and scripted agents writing
//! in both at once: afterwards both folders equal the store byte for byte, no write is lost, no
//! file was seen half-written, and nothing was uploaded twice.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::{Rng, SyncProc, World, agent_write, folder_files, status, wait_for};

/// What an agent leaves: for each path it wrote, its last content there (None once it deleted
/// or moved the file away).
pub type Last = BTreeMap<String, Option<String>>;

/// An agent: `ops` random creates, edits, renames and deletes of its own files, and edits of
/// the shared files both agents edit.
pub fn agent(root: PathBuf, name: &'static str, seed: u64, ops: usize) -> Last {
    let mut rng = Rng::new(seed);
    let mut mine: Vec<String> = Vec::new();
    let mut last = Last::new();
    for i in 0..ops {
        let content = format!(
            "{name} op {i} {}\nEND\n",
            "x".repeat(rng.below(200) as usize)
        );
        let choice = rng.below(10);
        let path = match choice {
            0..=3 => {
                let p = if rng.below(2) == 0 {
                    format!("/{name}-{i}.md")
                } else {
                    format!("/d{}/{name}-{i}.md", rng.below(3))
                };
                mine.push(p.clone());
                Some(p)
            }
            4 | 5 if !mine.is_empty() => Some(mine[rng.below(mine.len() as u64) as usize].clone()),
            6 if !mine.is_empty() => {
                let k = rng.below(mine.len() as u64) as usize;
                let from = mine.remove(k);
                let to = format!("/moved/{name}-{i}.md");
                std::fs::create_dir_all(root.join("moved")).unwrap();
                std::fs::rename(root.join(&from[1..]), root.join(&to[1..])).unwrap();
                let carried = last.insert(from, None).flatten();
                last.insert(to.clone(), carried);
                mine.push(to);
                None
            }
            7 if !mine.is_empty() => {
                let k = rng.below(mine.len() as u64) as usize;
                let gone = mine.remove(k);
                std::fs::remove_file(root.join(&gone[1..])).unwrap();
                last.insert(gone, None);
                None
            }
            _ => Some(format!("/shared-{}.md", rng.below(3))),
        };
        if let Some(p) = path {
            agent_write(&root.join(&p[1..]), &content);
            last.insert(p, Some(content));
        }
        std::thread::sleep(Duration::from_millis(rng.below(40)));
    }
    last
}

/// Reads every file of the folders until stopped: any content that is not whole (the agents
/// write whole files, ending in `END`) is recorded.
pub fn observer(folders: Vec<PathBuf>, stop: Arc<AtomicBool>, torn: Arc<Mutex<Vec<String>>>) {
    while !stop.load(Ordering::SeqCst) {
        for f in &folders {
            for (path, content) in folder_files(f) {
                if !content.is_empty() && !content.ends_with("END\n") {
                    torn.lock()
                        .unwrap()
                        .push(format!("{}{path}: {content:?}", f.display()));
                }
            }
        }
    }
}

/// Two agents, one in each folder, and an observer reading both while they write.
pub struct Agents {
    agents: Vec<std::thread::JoinHandle<Last>>,
    stop: Arc<AtomicBool>,
    torn: Arc<Mutex<Vec<String>>>,
    observer: std::thread::JoinHandle<()>,
}

impl Agents {
    /// `alpha` in `a` and `beta` in `b`, `ops` operations each from the seeds.
    pub fn start(a: &Path, b: &Path, seeds: [u64; 2], ops: usize) -> Agents {
        let stop = Arc::new(AtomicBool::new(false));
        let torn = Arc::new(Mutex::new(Vec::new()));
        let observer = {
            let (f, s, t) = (
                vec![a.to_owned(), b.to_owned()],
                Arc::clone(&stop),
                Arc::clone(&torn),
            );
            std::thread::spawn(move || observer(f, s, t))
        };
        let agents = [(a, "alpha", seeds[0]), (b, "beta", seeds[1])]
            .into_iter()
            .map(|(root, name, seed)| {
                let root = root.to_owned();
                std::thread::spawn(move || agent(root, name, seed, ops))
            })
            .collect();
        Agents {
            agents,
            stop,
            torn,
            observer,
        }
    }

    /// What each agent left, once both are done.
    pub fn wait(&mut self) -> Vec<Last> {
        self.agents.drain(..).map(|h| h.join().unwrap()).collect()
    }

    /// The observer stopped: what it saw half-written.
    pub fn stop(self) -> Vec<String> {
        self.stop.store(true, Ordering::SeqCst);
        self.observer.join().unwrap();
        self.torn.lock().unwrap().clone()
    }
}

/// Both folders and the store equal, and both syncs with nothing pending.
pub fn in_step(world: &World, folders: &[(&Path, &Path)]) -> bool {
    let store = world.store_files();
    folders.iter().all(|(f, s)| {
        s.join("status.json").exists() && folder_files(f) == store && {
            let st = status(f, s);
            st["pending"] == 0 && st["online"] == true
        }
    })
}

/// Every write no agent itself replaced is a file, a conflict copy or a version; each agent's
/// own files (not the shared ones) are exactly as it left them.
pub fn check_nothing_lost(world: &World, folder: &Path, lasts: &[Last], logs: &str) {
    let files = folder_files(folder);
    let present: BTreeSet<&String> = files.values().collect();
    let versions = world.versions();
    let kept: BTreeSet<&String> = versions.iter().filter_map(|v| v.2.as_ref()).collect();
    for last in lasts {
        for (path, content) in last {
            if let Some(c) = content {
                assert!(
                    present.contains(c) || kept.contains(c),
                    "{path}: the write {c:?} is lost; the syncs said of it:\n{}",
                    about(logs, path)
                );
            }
        }
        for (path, content) in last.iter().filter(|(p, _)| !p.starts_with("/shared")) {
            assert_eq!(
                files.get(path),
                content.as_ref(),
                "{path}; the syncs said of it:\n{}",
                about(logs, path)
            );
        }
    }
}

/// The log lines that name `path`.
fn about(logs: &str, path: &str) -> String {
    logs.lines()
        .filter(|l| l.contains(path) || l.contains(&path[1..]))
        .collect::<Vec<_>>()
        .join("\n")
}

pub fn check_no_double_uploads(world: &World) {
    check_no_double_uploads_in(world, &world.store);
}

pub fn check_no_double_uploads_in(world: &World, store: &str) {
    // A version that repeats the one before it (same path, same content) is an upload of what
    // the store already had: a ping-pong.
    let versions = world.versions_of(store);
    type PathAndContent<'a> = (&'a Option<String>, &'a Option<String>);
    let mut by_memory: BTreeMap<&str, Vec<PathAndContent>> = BTreeMap::new();
    for (id, path, content) in &versions {
        by_memory.entry(id).or_default().push((path, content));
    }
    for (id, list) in by_memory {
        for pair in list.windows(2) {
            assert!(
                pair[0] != pair[1] || pair[0].1.is_none(),
                "memory {id} has two versions in a row with the same path and content: {:?}",
                pair[0]
            );
        }
    }
}

#[test]
fn agents_in_two_folders_converge_without_losing_a_write() {
    converge(World::new(&[]));
}

#[test]
fn agents_in_two_folders_converge_on_postgres() {
    let Some(cluster) = crate::common::pg::cluster() else {
        return;
    };
    converge(World::on(Some(cluster.fresh_url()), &[]));
}

fn converge(world: World) {
    let (a, sa) = world.folder("a");
    let (b, sb) = world.folder("b");
    // Something on each side before the syncs start: the first sync is a union.
    agent_write(&a.join("before-a.md"), "from a\nEND\n");
    agent_write(&b.join("before-b.md"), "from b\nEND\n");
    agent_write(&a.join("both.md"), "a's\nEND\n");
    agent_write(&b.join("both.md"), "b's\nEND\n");
    let _pa = SyncProc::start(&world, &a, &sa, "alpha", &[]);
    let _pb = SyncProc::start(&world, &b, &sb, "beta", &[]);
    let pairs = [(a.as_path(), sa.as_path()), (b.as_path(), sb.as_path())];
    assert!(
        wait_for(Duration::from_secs(60), || in_step(&world, &pairs)),
        "the first sync did not converge:\n{}\n{}",
        _pa.log(),
        _pb.log()
    );
    let files = folder_files(&a);
    assert_eq!(files["/before-a.md"], "from a\nEND\n");
    assert_eq!(files["/before-b.md"], "from b\nEND\n");
    let both: BTreeSet<&String> = files
        .iter()
        .filter(|(p, _)| p.starts_with("/both"))
        .map(|(_, c)| c)
        .collect();
    assert_eq!(
        both,
        BTreeSet::from([&"a's\nEND\n".to_owned(), &"b's\nEND\n".to_owned()]),
        "a union: one at the name, the other as a conflict copy: {files:?}"
    );

    let mut writing = Agents::start(&a, &b, [1, 2], 60);
    let lasts = writing.wait();
    let converged = wait_for(Duration::from_secs(60), || in_step(&world, &pairs));
    let torn = writing.stop();
    assert!(converged, "did not converge:\n{}", explain(&world, &pairs));
    assert_eq!(torn, Vec::<String>::new(), "files seen half-written");

    check_nothing_lost(&world, &a, &lasts, &(_pa.log() + &_pb.log()));
    check_no_double_uploads(&world);
}

#[test]
fn a_file_written_slowly_is_uploaded_once_whole() {
    let world = World::new(&[]);
    let (a, sa) = world.folder("a");
    let sync = SyncProc::start(&world, &a, &sa, "alpha", &["--debounce", "2s"]);
    assert!(wait_for(Duration::from_secs(30), || status_ready(&a, &sa)));
    // Five chunks 100 ms apart, without a rename: each pause is a twentieth of the debounce.
    let path = a.join("slow.md");
    let mut f = std::fs::File::create(&path).unwrap();
    for i in 0..5 {
        use std::io::Write as _;
        writeln!(f, "chunk {i}").unwrap();
        f.flush().unwrap();
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(f);
    let whole = "chunk 0\nchunk 1\nchunk 2\nchunk 3\nchunk 4\n";
    assert!(
        wait_for(Duration::from_secs(30), || world
            .store_files()
            .get("/slow.md")
            .map(String::as_str)
            == Some(whole)),
        "{}",
        sync.log()
    );
    let versions = world.versions();
    assert_eq!(
        versions.len(),
        1,
        "one version, the whole file: {versions:?}"
    );
}

/// What differs between the folders and the store, and the syncs' reports.
pub fn explain(world: &World, folders: &[(&Path, &Path)]) -> String {
    let store = world.store_files();
    let mut out = String::new();
    for (f, s) in folders {
        let files = folder_files(f);
        for (p, c) in &files {
            if store.get(p) != Some(c) {
                out.push_str(&format!(
                    "{}: {p} differs from the store ({:?})\n",
                    f.display(),
                    store.get(p).map(|s| s.len())
                ));
            }
        }
        for p in store.keys() {
            if !files.contains_key(p) {
                out.push_str(&format!("{}: {p} missing\n", f.display()));
            }
        }
        out.push_str(&format!("{}\n", status(f, s)));
    }
    out
}

/// The sync has reported at least once (it is running and has made its first pass).
pub fn status_ready(folder: &Path, state: &Path) -> bool {
    state.join("status.json").exists() && status(folder, state)["last_sync"].is_string()
}

#[test]
fn a_folder_removed_and_made_again_is_watched_again() {
    // What the SDKs' "clear all memory" does: the folder removed whole, then made again.
    let world = World::new(&[]);
    let (a, sa) = world.folder("a");
    agent_write(&a.join("old.md"), "old\n");
    // Scans far apart: only the watcher can see what comes next in time.
    let sync = SyncProc::start(&world, &a, &sa, "alpha", &["--rescan-interval", "10m"]);
    assert!(wait_for(Duration::from_secs(30), || world
        .store_files()
        .contains_key("/old.md")));
    std::fs::remove_dir_all(&a).unwrap();
    assert!(
        wait_for(Duration::from_secs(30), || world.store_files().is_empty()),
        "{}",
        sync.log()
    );
    std::fs::create_dir(&a).unwrap();
    agent_write(&a.join("new.md"), "new\n");
    assert!(
        wait_for(Duration::from_secs(30), || world
            .store_files()
            .get("/new.md")
            .map(String::as_str)
            == Some("new\n")),
        "{}",
        sync.log()
    );
    assert!(status_ready(&a, &sa));
}
