//! Small helpers shared by the integration tests.

use std::io::Write as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use memkv::protocol::{self, Message};
use memkv::{Database, MemoryStore, ToolOutput};
use serde_json::{Value, json};

/// One user's session against a store, with assertions that print the command on failure.
pub struct Session {
    pub store: Database,
    /// Messages are answered by a read-only handle ([`Session::read_only`]).
    read_only: bool,
    /// What went through [`Face::run`] and [`Session::answer`], for tests/data/golden-sessions.jsonl
    /// (tests/it/golden_sessions.rs).
    recorded: Recorder,
}

impl Session {
    /// Whether this face carries whole `tool_use` blocks (and inputs that are not objects).
    pub const CARRIES_BLOCKS: bool = true;

    pub fn new(store: Database) -> Self {
        Session {
            store,
            read_only: false,
            recorded: Default::default(),
        }
    }

    /// A session whose messages are answered for a read-only caller (a read-only key's, on the
    /// other faces); `user()` still writes, to set the store up.
    pub fn read_only(store: Database) -> Self {
        let recorded = Recorder::default();
        recorded.taint();
        Session {
            store,
            read_only: true,
            recorded,
        }
    }

    /// The session's store, to set up or look at directly (which leaves the session out of
    /// the recorded golden sessions: what it did is not in its messages).
    pub fn user(&self) -> MemoryStore<'_> {
        self.recorded.taint();
        self.handle()
    }

    fn handle(&self) -> MemoryStore<'_> {
        self.store.user("tester").unwrap()
    }

    /// The answer to any message (input, block, array of blocks), as JSON.
    pub fn answer(&self, message: Value) -> Value {
        let input = message.clone();
        let message = Message::from_json(message).unwrap();
        let (response, errors) =
            protocol::answer(&self.handle().read_only(self.read_only), message);
        assert!(errors.is_empty(), "{errors:?}");
        self.recorded.step(input, protocol::to_line(&response));
        serde_json::to_value(response).unwrap()
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.recorded.save();
    }
}

impl Face for Session {
    fn run(&self, input: Value) -> ToolOutput {
        let out = self
            .handle()
            .read_only(self.read_only)
            .execute_json(&input)
            .unwrap();
        self.recorded.step(input, protocol::to_line(&out));
        out
    }
}

/// The assertions of a golden case, over any face's `run` (the library here; HTTP and MCP in
/// crates/memkv-server/tests): each prints the command on failure.
pub trait Face {
    /// One command's answer through this face.
    fn run(&self, input: Value) -> ToolOutput;

    /// `input` succeeds with exactly `want`.
    #[track_caller]
    fn ok(&self, input: Value, want: &str) {
        let out = self.run(input.clone());
        assert_eq!(out.content, want, "{input}");
        assert!(!out.is_error, "{input}");
    }

    /// `input` fails with exactly `want`.
    #[track_caller]
    fn err(&self, input: Value, want: &str) {
        let out = self.run(input.clone());
        assert_eq!(out.content, want, "{input}");
        assert!(out.is_error, "{input}");
    }

    /// Creates `path` with `text`, which must succeed.
    #[track_caller]
    fn create(&self, path: &str, text: &str) {
        self.ok(
            json!({"command": "create", "path": path, "file_text": text}),
            &format!("File created successfully at: {path}"),
        );
    }
}

/// Every file of a user with its content and times, for before/after comparisons.
pub fn snapshot(user: &MemoryStore<'_>) -> Vec<(String, String, i64, i64)> {
    user.files()
        .unwrap()
        .into_iter()
        .map(|f| {
            let content = user.read_file(&f.path.to_string()).unwrap().unwrap();
            (f.path.to_string(), content, f.created_ms, f.modified_ms)
        })
        .collect()
}

// ---- the backend factory: every suite runs on redb and on PostgreSQL ------------------------

use std::cell::Cell;

use memkv::DatabaseBuilder;

#[path = "../support/pg.rs"]
pub mod pg;

/// The backends a test runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Redb,
    Postgres,
}

thread_local! {
    static CURRENT: Cell<Backend> = const { Cell::new(Backend::Redb) };
}

/// The backend the running test body is on.
pub fn current() -> Backend {
    CURRENT.with(Cell::get)
}

/// Runs `body` on redb, then on PostgreSQL (a fresh schema each time it asks for a store); the
/// PostgreSQL half is skipped, visibly, where PostgreSQL is not installed.
pub fn each_backend(body: impl Fn()) {
    on(Backend::Redb, &body);
    if pg::cluster().is_some() {
        on(Backend::Postgres, &body);
    }
}

/// Runs `body` on `backend` (PostgreSQL: `false` when it is not installed).
pub fn on(backend: Backend, body: &dyn Fn()) -> bool {
    if backend == Backend::Postgres && pg::cluster().is_none() {
        return false;
    }
    let before = CURRENT.with(|c| c.replace(backend));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(body));
    CURRENT.with(|c| c.set(before));
    if let Err(panic) = result {
        eprintln!("(failed on {backend:?})");
        std::panic::resume_unwind(panic);
    }
    true
}

/// A fresh, empty database of the current backend: memory for redb, a new schema for
/// PostgreSQL.
pub fn fresh_location() -> Option<String> {
    match current() {
        Backend::Redb => None,
        Backend::Postgres => Some(pg::cluster().expect("checked by `on`").fresh_url()),
    }
}

/// `.fresh()`: the store of a test, on the current backend.
pub trait Fresh {
    fn fresh(self) -> Result<Database, memkv::Error>;
}

impl Fresh for DatabaseBuilder {
    /// On PostgreSQL the stores take turns: with and without the fast path
    /// ([`DatabaseBuilder::postgres_fast_path`]), each with this server's statements and with
    /// those of older servers ([`DatabaseBuilder::postgres_older_statements`]: no `MERGE`, no
    /// `plan_cache_mode`), so that every way of writing answers the cases of every suite, at no
    /// extra cost.
    fn fresh(self) -> Result<Database, memkv::Error> {
        static STORES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        match fresh_location() {
            None => self.in_memory(),
            Some(url) => {
                let n = STORES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                self.postgres_fast_path(n.is_multiple_of(2))
                    .postgres_older_statements((n / 2) % 2 == 1)
                    .open(url)
            }
        }
    }
}

/// `Database::in_memory()` of the current backend.
pub fn fresh() -> Result<Database, memkv::Error> {
    Database::builder().fresh()
}

/// Whether the full, heavy suite runs (`MEMKV_FULL_TESTS=1`); by default the heaviest cases
/// run a representative sample.
pub fn full_tests() -> bool {
    std::env::var_os("MEMKV_FULL_TESTS").is_some_and(|v| v == "1")
}

/// A count for a heavy case: `full` with `MEMKV_FULL_TESTS=1`, else `sample`.
pub fn sample<T>(sample: T, full: T) -> T {
    if full_tests() { full } else { sample }
}

/// The backends to run on: redb, and PostgreSQL where it is installed (for loops in proptest
/// bodies, where `prop_assert!` must return from the test function).
pub fn backends() -> Vec<Backend> {
    let mut out = vec![Backend::Redb];
    if pg::cluster().is_some() {
        out.push(Backend::Postgres);
    }
    out
}

/// Makes `backend` current until dropped.
pub struct Using(Backend);

pub fn using(backend: Backend) -> Using {
    Using(CURRENT.with(|c| c.replace(backend)))
}

impl Drop for Using {
    fn drop(&mut self) {
        CURRENT.with(|c| c.set(self.0));
    }
}

/// A commit hook that keeps what it is given, one entry per commit (for the tests that check
/// which writes reach the hooks, in the library and over the server's faces).
#[derive(Default)]
pub struct Seen(
    std::sync::Mutex<Vec<Vec<memkv::Change>>>,
    /// Every change ever seen, for [`Seen::assert_logged`].
    std::sync::Mutex<Vec<memkv::Change>>,
);

impl memkv::CommitHook for Seen {
    fn committed(&self, changes: &[memkv::Change]) {
        self.0.lock().unwrap().push(changes.to_vec());
        self.1.lock().unwrap().extend_from_slice(changes);
    }
}

impl Seen {
    /// The change log of `db` holds exactly the changes the hook saw, in the same order,
    /// numbered 1, 2, 3, … (after the export's `seq` when a restore moved the log on to it; a
    /// field a redaction scrubbed from an entry excepted: that field is then absent from the
    /// entry).
    pub fn assert_logged(&self, db: &memkv::Database) {
        let mut logged = Vec::new();
        let first = match db.changes(0, 1, None) {
            Err(memkv::Error::CursorExpired { trimmed, .. }) => trimmed,
            _ => 0,
        };
        let mut after = first;
        loop {
            let page = db.changes(after, 1000, None).unwrap();
            if page.entries.is_empty() {
                break;
            }
            after = page.next_after;
            logged.extend(page.entries);
        }
        let seen = self.1.lock().unwrap();
        assert_eq!(logged.len(), seen.len(), "{logged:#?}\n{seen:#?}");
        for (i, entry) in logged.iter().enumerate() {
            assert_eq!(entry.seq, first + i as u64 + 1);
        }
        // A store's entries are in its commit order (its versions' numbers increase).
        let mut last: std::collections::HashMap<&str, u64> = Default::default();
        for entry in &logged {
            if let Some(v) = entry.change.version {
                let before = last.insert(&entry.change.store, v.0).unwrap_or(0);
                let redaction = entry.change.kind == memkv::ChangeKind::VersionRedacted;
                assert!(
                    redaction || v.0 > before,
                    "entry {} out of commit order",
                    entry.seq
                );
            }
        }
        // Commits of concurrent batches (PostgreSQL's write lanes) reach the hooks in any
        // order: the same changes, compared in one order.
        let key = |c: &memkv::Change| {
            (
                c.store.clone(),
                c.version,
                format!("{:?}", c.kind),
                c.at_ms,
                c.memory,
            )
        };
        let mut logged: Vec<_> = logged.into_iter().map(|e| (e.seq, e.change)).collect();
        logged.sort_by_key(|(_, c)| key(c));
        let mut seen = seen.clone();
        seen.sort_by_key(key);
        for ((seq, got), change) in logged.iter().zip(seen.iter()) {
            let entry_seq = *seq;
            let mut want = change.clone();
            if got.path.is_none() && got.sha256.is_none() {
                // Scrubbed by a redaction.
                want.path = None;
                want.previous_path = None;
                want.sha256 = None;
                want.size = None;
            }
            if got.previous_path.is_none() {
                want.previous_path = None;
            }
            assert_eq!(got, &want, "entry {entry_seq}");
        }
        assert_eq!(db.last_change().unwrap(), first + seen.len() as u64);
    }

    /// The commits seen since the last call, each with its changes (never empty).
    pub fn take_commits(&self) -> Vec<Vec<memkv::Change>> {
        let commits = std::mem::take(&mut *self.0.lock().unwrap());
        assert!(commits.iter().all(|c| !c.is_empty()), "an empty commit");
        commits
    }

    /// The changes seen since the last call, in order, as (kind, store, path, previous path).
    pub fn take(&self) -> Vec<(memkv::ChangeKind, String, Option<String>, Option<String>)> {
        self.take_commits()
            .into_iter()
            .flatten()
            .map(|c| (c.kind, c.store, c.path, c.previous_path))
            .collect()
    }
}

/// A clock a test moves: the databases built from [`Clock::builder`] read it.
pub struct Clock(std::sync::Arc<std::sync::atomic::AtomicU64>);

impl Clock {
    pub fn new() -> Self {
        Clock(std::sync::Arc::new(std::sync::atomic::AtomicU64::new(
            1_800_000_000_000,
        )))
    }
    pub fn advance(&self, ms: u64) {
        self.0.fetch_add(ms, std::sync::atomic::Ordering::SeqCst);
    }
    pub fn builder(&self) -> DatabaseBuilder {
        let t = self.0.clone();
        Database::builder().clock(move || {
            std::time::UNIX_EPOCH
                + std::time::Duration::from_millis(t.load(std::sync::atomic::Ordering::SeqCst))
        })
    }
    pub fn now(&self) -> i64 {
        self.0.load(std::sync::atomic::Ordering::SeqCst) as i64
    }
}

/// Every user's files and contents, (user, path, content), in order: what a crash test
/// compares.
pub fn contents(store: &Database) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    for u in store.users().unwrap() {
        let h = store.user(&u.user).unwrap();
        for f in h.files().unwrap() {
            let c = h.read_file(&f.path.to_string()).unwrap().unwrap();
            out.push((u.user.clone(), f.path.to_string(), c));
        }
    }
    out
}

/// The golden table's sessions as data (tests/it/golden_sessions.rs): where
/// tools/golden-sessions.sh has them written.
const RECORD_TO: &str = "MEMKV_GOLDEN_RECORD";
/// The largest session kept (the file is committed).
pub const MAX_SESSION_BYTES: usize = 256 * 1024;
pub const GOLDEN_SESSIONS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/data/golden-sessions.jsonl"
);

/// A session's steps, kept only when [`RECORD_TO`] is set.
#[derive(Default)]
pub struct Recorder {
    steps: Mutex<Vec<(Value, String)>>,
    tainted: AtomicBool,
}

impl Recorder {
    pub fn step(&self, input: Value, answer: String) {
        if std::env::var_os(RECORD_TO).is_some() {
            self.steps.lock().unwrap().push((input, answer));
        }
    }

    /// The session did something its messages do not say.
    pub fn taint(&self) {
        self.tainted.store(true, Ordering::Relaxed);
    }

    /// Appends the session to the file [`RECORD_TO`] names, if it qualifies.
    pub fn save(&self) {
        let Some(path) = std::env::var_os(RECORD_TO) else {
            return;
        };
        let steps = std::mem::take(&mut *self.steps.lock().unwrap());
        if self.tainted.load(Ordering::Relaxed) || steps.is_empty() || replay(&steps).is_err() {
            return;
        }
        let line = json!({"steps": steps.iter().map(|(input, answer)| json!({
            "input": input,
            "answer": answer,
        })).collect::<Vec<_>>()})
        .to_string();
        // Sessions that fill a store to its quota (tens of megabytes) are left to golden.rs.
        if line.len() > MAX_SESSION_BYTES {
            return;
        }
        static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
        let _one = ONE_AT_A_TIME.lock().unwrap();
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .unwrap();
        writeln!(file, "{line}").unwrap();
    }
}

/// `steps` on a fresh in-memory database: the first step whose answer differs, if any.
pub fn replay(steps: &[(Value, String)]) -> Result<(), String> {
    let db = Database::in_memory().unwrap();
    let user = db.user("tester").unwrap();
    for (n, (input, want)) in steps.iter().enumerate() {
        let got = match Message::from_json(input.clone()) {
            Ok(message) => protocol::to_line(&protocol::answer(&user, message).0),
            Err(e) => format!("refused: {e}"),
        };
        if &got != want {
            return Err(format!("step {n}: {input}\nwant {want}\ngot  {got}"));
        }
    }
    Ok(())
}
