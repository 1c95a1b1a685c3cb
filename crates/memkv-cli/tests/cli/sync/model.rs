//! The sync against a model, with proptest: two folders and the store written in random order
//! (files created, edited, renamed and deleted on either side, memories written through the API
//! by a third writer), each folder reconciled (`memkv_sync::once`, in this process, against a
//! real `memkv serve`) at random points. Afterwards, whatever the order:
//!
//! - both folders equal the store, byte for byte;
//! - every write that reached a sync before its writer replaced it is a file, a conflict copy or
//!   a version in the store's history (nothing is lost);
//! - no memory has two versions in a row with the same path and content (nothing was uploaded
//!   twice).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::TestRunner;

use super::converge::check_no_double_uploads_in;
use super::{World, folder_files};

#[derive(Debug, Clone)]
enum Op {
    /// Side (0: A, 1: B) writes file k.
    Write(usize, usize),
    Delete(usize, usize),
    /// Side renames file k to file j.
    Rename(usize, usize, usize),
    /// The third writer writes memory k through the API.
    Remote(usize),
    /// Side's sync runs once.
    Sync(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..2usize, 0..4usize).prop_map(|(s, k)| Op::Write(s, k)),
        1 => (0..2usize, 0..4usize).prop_map(|(s, k)| Op::Delete(s, k)),
        1 => (0..2usize, 0..4usize, 0..4usize).prop_map(|(s, k, j)| Op::Rename(s, k, j)),
        1 => (0..4usize).prop_map(Op::Remote),
        3 => (0..2usize).prop_map(Op::Sync),
    ]
}

fn name(k: usize) -> String {
    format!("f{k}.md")
}

struct Case<'w> {
    world: &'w World,
    store: String,
    folders: [PathBuf; 2],
    states: [PathBuf; 2],
    /// Per side: writes not yet seen by that side's sync (path → content).
    unsynced: [BTreeMap<String, String>; 2],
    /// Writes that must be found at the end.
    must: BTreeSet<String>,
    counter: usize,
}

impl<'w> Case<'w> {
    fn new(world: &'w World, n: usize) -> Case<'w> {
        let created = super::http(
            "POST",
            &format!("{}/v1/memory_stores", world.url()),
            &world.key,
            Some(r#"{"name":"model"}"#),
        );
        let store = serde_json::from_str::<serde_json::Value>(&created).unwrap()["id"]
            .as_str()
            .unwrap()
            .to_owned();
        let dir = world.dir.path().join(format!("model-{n}"));
        let folders = [dir.join("a"), dir.join("b")];
        for f in &folders {
            std::fs::create_dir_all(f).unwrap();
        }
        Case {
            world,
            store,
            states: [dir.join("state-a"), dir.join("state-b")],
            folders,
            unsynced: [BTreeMap::new(), BTreeMap::new()],
            must: BTreeSet::new(),
            counter: 0,
        }
    }

    fn api(&self) -> memkv_sync::api::Api {
        memkv_sync::api::Api::new(
            &self.world.url(),
            &self.store,
            &self.world.key,
            Duration::from_secs(30),
        )
        .unwrap()
    }

    fn sync(&mut self, side: usize) {
        let mut cfg = memkv_sync::Config::new(
            &self.folders[side],
            &self.world.url(),
            &self.store,
            &self.world.key,
        );
        cfg.state = self.states[side].clone();
        cfg.host = ["alpha", "beta"][side].to_owned();
        memkv_sync::once(cfg).unwrap();
        let seen = std::mem::take(&mut self.unsynced[side]);
        self.must.extend(seen.into_values());
    }

    fn apply(&mut self, op: &Op) {
        self.counter += 1;
        let content = format!("write {} {op:?}\n", self.counter);
        match *op {
            Op::Write(s, k) => {
                std::fs::write(self.folders[s].join(name(k)), &content).unwrap();
                self.unsynced[s].insert(name(k), content);
            }
            Op::Delete(s, k) => {
                if std::fs::remove_file(self.folders[s].join(name(k))).is_ok() {
                    self.unsynced[s].remove(&name(k));
                }
            }
            Op::Rename(s, k, j) => {
                let (from, to) = (self.folders[s].join(name(k)), self.folders[s].join(name(j)));
                if k != j && from.exists() && !to.exists() {
                    std::fs::rename(&from, &to).unwrap();
                    if let Some(c) = self.unsynced[s].remove(&name(k)) {
                        self.unsynced[s].insert(name(j), c);
                    }
                }
            }
            Op::Remote(k) => {
                let api = self.api();
                let path = format!("/{}", name(k));
                let done = match api.find(&path).unwrap() {
                    Some(m) => api
                        .update(&m.id, Some(&content), None, &m.content_sha256)
                        .is_ok(),
                    None => api.create(&path, &content).is_ok(),
                };
                if done {
                    self.must.insert(content);
                }
            }
            Op::Sync(s) => self.sync(s),
        }
    }

    fn check(&mut self) -> Result<(), TestCaseError> {
        // Quiescence: each side syncs until both equal the store (at most 4 rounds).
        let mut store = BTreeMap::new();
        for _ in 0..4 {
            self.sync(0);
            self.sync(1);
            store = self
                .api()
                .list(true)
                .unwrap()
                .into_iter()
                .map(|m| (m.path, m.content.unwrap_or_default()))
                .collect();
            if folder_files(&self.folders[0]) == store && folder_files(&self.folders[1]) == store {
                break;
            }
        }
        prop_assert_eq!(&folder_files(&self.folders[0]), &store);
        prop_assert_eq!(&folder_files(&self.folders[1]), &store);
        let versions = self.world.versions_of(&self.store);
        let present: BTreeSet<&String> = store
            .values()
            .chain(versions.iter().filter_map(|v| v.2.as_ref()))
            .collect();
        for c in &self.must {
            prop_assert!(present.contains(c), "lost: {:?}", c);
        }
        Ok(())
    }
}

fn cases() -> u32 {
    if std::env::var_os("MEMKV_FULL_TESTS").is_some() {
        256
    } else {
        16
    }
}

/// One server for every case (a store each), stopped when the test ends.
#[test]
fn any_order_of_writes_and_syncs_converges_without_loss() {
    let world = World::new(&[]);
    let mut runner = TestRunner::new(ProptestConfig {
        cases: cases(),
        ..ProptestConfig::default()
    });
    let n = std::sync::atomic::AtomicUsize::new(0);
    let result = runner.run(&prop::collection::vec(op(), 1..30), |ops| {
        let mut case = Case::new(&world, n.fetch_add(1, std::sync::atomic::Ordering::SeqCst));
        for op in &ops {
            case.apply(op);
        }
        case.check()?;
        check_no_double_uploads_in(case.world, &case.store);
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}
