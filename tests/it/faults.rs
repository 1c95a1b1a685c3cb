//! Crash consistency on a storage backend that fails on purpose.
//!
//! The backend keeps two images: what has been written, and what was last made durable by a
//! successful `sync_data`. A fault makes the Nth write or sync fail; a "crash" reopens the
//! store from the durable image. Whatever the fault, every acknowledged command must be there
//! after the crash, no failed command may be, and every invariant must hold.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use memkv::storage::AnyBackend;
use memkv::storage::redb::RedbBackend;
use memkv::{Command, Database};
use serde_json::json;

#[derive(Debug, Default)]
struct Images {
    written: Vec<u8>,
    durable: Vec<u8>,
}

/// Fails the I/O call numbered `fail_at` (writes and syncs counted together), once.
#[derive(Debug, Clone)]
struct Faulty {
    images: Arc<Mutex<Images>>,
    calls: Arc<AtomicU64>,
    fail_at: Arc<AtomicU64>,
}

impl Faulty {
    fn new(durable: Vec<u8>) -> Self {
        Faulty {
            images: Arc::new(Mutex::new(Images {
                written: durable.clone(),
                durable,
            })),
            calls: Arc::new(AtomicU64::new(0)),
            fail_at: Arc::new(AtomicU64::new(u64::MAX)),
        }
    }

    fn arm(&self, after: u64) {
        self.fail_at
            .store(self.calls.load(Ordering::SeqCst) + after, Ordering::SeqCst);
    }

    fn tick(&self) -> io::Result<()> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst);
        if n == self.fail_at.load(Ordering::SeqCst) {
            return Err(io::Error::other("injected fault"));
        }
        Ok(())
    }

    fn durable(&self) -> Vec<u8> {
        self.images.lock().unwrap().durable.clone()
    }
}

impl redb::StorageBackend for Faulty {
    fn len(&self) -> io::Result<u64> {
        Ok(self.images.lock().unwrap().written.len() as u64)
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> io::Result<()> {
        let images = self.images.lock().unwrap();
        let start = offset as usize;
        let src = images
            .written
            .get(start..start + out.len())
            .ok_or_else(|| io::Error::other("read past the end"))?;
        out.copy_from_slice(src);
        Ok(())
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.images.lock().unwrap().written.resize(len as usize, 0);
        Ok(())
    }

    fn sync_data(&self) -> io::Result<()> {
        self.tick()?;
        let mut images = self.images.lock().unwrap();
        images.durable = images.written.clone();
        Ok(())
    }

    fn write(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.tick()?;
        let mut images = self.images.lock().unwrap();
        let end = offset as usize + data.len();
        if images.written.len() < end {
            images.written.resize(end, 0);
        }
        images.written[offset as usize..end].copy_from_slice(data);
        Ok(())
    }
}

fn open(backend: &Faulty) -> Database {
    let redb = RedbBackend::with_storage(backend.clone(), "faulty").unwrap();
    Database::builder().backend(AnyBackend::from(redb)).unwrap()
}

/// Every user's files and contents: (user, path, content).
type State = Vec<(String, String, String)>;

fn state(store: &Database) -> State {
    super::util::contents(store)
}

fn commands() -> Vec<(String, Command)> {
    let c = |u: &str, v: serde_json::Value| (u.to_owned(), Command::from_json(&v).unwrap());
    vec![
        c(
            "a",
            json!({"command": "create", "path": "/memories/x/one.md", "file_text": format!("start\n{}", "1\n".repeat(50))}),
        ),
        c(
            "b",
            json!({"command": "create", "path": "/memories/two.md", "file_text": "two"}),
        ),
        c(
            "a",
            json!({"command": "str_replace", "path": "/memories/x/one.md", "old_str": "start", "new_str": "begin"}),
        ),
        c(
            "a",
            json!({"command": "insert", "path": "/memories/x/one.md", "insert_line": 0, "insert_text": "top"}),
        ),
        c(
            "a",
            json!({"command": "rename", "old_path": "/memories/x", "new_path": "/memories/y/z"}),
        ),
        c(
            "b",
            json!({"command": "create", "path": "/memories/d/big.md", "file_text": "b".repeat(20_000)}),
        ),
        c(
            "b",
            json!({"command": "delete", "path": "/memories/two.md"}),
        ),
        c(
            "a",
            json!({"command": "create", "path": "/memories/y/w.md", "file_text": "w"}),
        ),
    ]
}

/// Runs `commands` one by one with a fault at I/O call `fault`; returns the state that the
/// acknowledged commands define (replayed on a healthy store) and the state after the crash.
fn crash_at(fault: u64) -> (State, State, bool) {
    let backend = Faulty::new(Vec::new());
    let store = open(&backend);
    backend.arm(fault);
    let mut acknowledged = Vec::new();
    let mut failed = false;
    for (user, command) in commands() {
        match store.user(&user).unwrap().execute(&command) {
            Ok(out) => {
                assert!(!out.is_error, "{}", out.content);
                acknowledged.push((user, command));
            }
            Err(_) => {
                failed = true;
                // The process "crashes" at its first storage failure.
                break;
            }
        }
    }
    drop(store);
    let recovered = Faulty::new(backend.durable());
    let after = open(&recovered);
    assert_eq!(
        after.check().unwrap(),
        Vec::<(String, String)>::new(),
        "fault at I/O call {fault}"
    );
    let want = Database::in_memory().unwrap();
    for (user, command) in &acknowledged {
        want.user(user).unwrap().execute(command).unwrap();
    }
    (state(&want), state(&after), failed)
}

#[test]
fn a_failed_write_or_flush_loses_nothing_acknowledged_and_leaves_nothing_half_done() {
    let mut faults_hit = 0;
    // Every I/O call of the whole sequence, one fault at a time.
    for fault in 0..400 {
        let (want, got, failed) = crash_at(fault);
        assert_eq!(got, want, "fault at I/O call {fault}");
        faults_hit += u64::from(failed);
        if !failed {
            break; // past the last I/O call of the sequence
        }
    }
    assert!(
        faults_hit > 20,
        "only {faults_hit} faults landed inside the sequence"
    );
}

#[test]
fn a_storage_failure_in_a_batch_sinks_nothing_else() {
    let backend = Faulty::new(Vec::new());
    let store = open(&backend);
    let batch = commands();
    // The first commit of the batch fails; the fallback runs each command alone.
    backend.arm(0);
    let results = store.execute_batch(&batch);
    // redb refuses further work after an I/O error until the database is reopened, so every
    // command reports the failure rather than claiming a success it cannot make durable.
    assert!(results.iter().all(|r| r.is_err()));
    drop(store);
    let after = open(&Faulty::new(backend.durable()));
    assert!(state(&after).is_empty());
    assert!(after.check().unwrap().is_empty());
    // And after reopening, the same batch applies whole.
    for r in after.execute_batch(&batch) {
        assert!(!r.unwrap().is_error);
    }
    assert_eq!(state(&after).len(), 3);
}
