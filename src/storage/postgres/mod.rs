//! The PostgreSQL backend (cargo feature `postgres`): the same bytes as redb, in one table whose
//! primary key starts with the store (user) id, over a pool of blocking connections.
//!
//! - Reads run in `REPEATABLE READ READ ONLY` snapshots; a command's reads are announced by
//!   [`ReadTxn::prefetch`](super::ReadTxn::prefetch) and fetched in one round trip.
//! - A write transaction runs in `READ COMMITTED` after locking the rows of the stores it
//!   touches in `memkv_stores` (sorted, `FOR UPDATE`): writers of one store serialize across
//!   processes, so each sees the previous one's commit; writers of different stores run in
//!   parallel. Its writes travel with the commit. Serialization failures (40001), deadlocks
//!   (40P01) and connections lost before the commit are retried with backoff, at most
//!   [`MAX_ATTEMPTS`] times, then [`Error::Busy`]; a connection lost during the commit is
//!   [`Error::OutcomeUnknown`].
//! - `docs/postgres.md` has the DDL, and what changes on Citus, YugabyteDB and CockroachDB.

mod cache;
mod call;
mod listen;
mod memo;
mod pool;
mod session;
mod sql;
mod tls;
mod txn;
mod write_fn;

use std::cell::RefCell;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use postgres::error::SqlState;

use super::{Backend, Capabilities, Finish, WriteTxn, redact_url};
use crate::error::Error;
use crate::layout::{LAYOUT_VERSION, OLDEST_MIGRATABLE};
use memo::Memo;
use pool::Pool;
use session::Session;
pub use txn::{PgRead, PgWrite};

/// How memkv's tables are arranged in PostgreSQL (`memkv_meta.pg_schema`); a database with a
/// newer one is refused.
pub const SCHEMA_VERSION: u64 = 1;
/// Most runs of one write transaction.
pub const MAX_ATTEMPTS: u32 = 8;
/// Group-commit batches in flight at once (each on a connection of its own).
const WRITE_LANES: usize = 4;
/// Most connections one store opens.
const POOL_SIZE: usize = 32;

/// How [`PgBackend::connect`] opens the database.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Read and write; create memkv's tables if they are missing.
    Create,
    /// Read and write; memkv's tables must exist.
    Existing,
    /// Read only.
    ReadOnly,
}

/// A memkv database in PostgreSQL.
pub struct PgBackend {
    pool: Arc<Pool>,
    /// Tells other processes of change-log entries committed ([`listen::Notifier`]).
    notifier: Arc<listen::Notifier>,
    shared: Arc<Shared>,
    location: String,
    writable: bool,
}

/// What the backend's transactions share.
pub(crate) struct Shared {
    /// The URL without its password, for messages.
    pub(crate) location: String,
    /// Round trips of transactions so far (for tests and benchmarks).
    pub(crate) trips: AtomicU64,
    /// Whether the server has `MERGE` (PostgreSQL 15 and later), which stores rows with less
    /// WAL than an upsert (see `sql::put_keys`).
    pub(crate) merge: AtomicBool,
    /// Whether the server has `plan_cache_mode` (PostgreSQL 12 and later; see
    /// `sql::prepare_all`).
    pub(crate) generic: AtomicBool,
    /// What writes may assume of each store's entries (see [`memo`]).
    pub(crate) memo: Memo,
    /// Whether writes take the fast path: the memo's assumptions and the one-call commit
    /// ([`PgBackend::set_fast_path`]).
    pub(crate) fast_path: AtomicBool,
    /// The channel that write transactions notify of what they changed ([`listen`]); unset
    /// where the server has no `pg_notify`.
    pub(crate) channel: std::sync::OnceLock<String>,
}

impl Drop for PgBackend {
    fn drop(&mut self) {
        self.notifier.close();
    }
}

impl std::fmt::Debug for PgBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgBackend")
            .field("location", &self.location)
            .finish_non_exhaustive()
    }
}

/// The error for a failed connection attempt, without the password.
pub(crate) fn connect_error(location: &str, e: postgres::Error) -> Error {
    Error::storage(crate::error::DatabaseError {
        location: location.to_owned(),
        text: format!("cannot connect: {}", describe(&e)),
        sqlstate: e.code().map(|c| c.code().to_owned()),
    })
}

/// What went wrong, from the server's message when there is one.
fn describe(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{} ({})", db.message(), db.code().code()),
        // With the causes: "error performing TLS handshake" alone says too little.
        None => {
            let mut text = e.to_string();
            let mut cause = std::error::Error::source(e);
            while let Some(c) = cause {
                let said = c.to_string();
                // Some causes repeat their own cause in their text.
                if !text.contains(&said) {
                    text.push_str(": ");
                    text.push_str(&said);
                }
                cause = c.source();
            }
            text
        }
    }
}

pub(crate) fn query_error(location: &str, e: &postgres::Error) -> Error {
    if e.code() == Some(&SqlState::DISK_FULL) {
        return Error::DiskFull {
            location: location.to_owned(),
        };
    }
    Error::storage(crate::error::DatabaseError {
        location: location.to_owned(),
        text: describe(e),
        sqlstate: e.code().map(|c| c.code().to_owned()),
    })
}

/// Whether the transaction can be run again: the database rolled it back for the sake of
/// another transaction, or the connection was lost (before any commit was sent).
fn retryable(e: &postgres::Error) -> bool {
    match e.code() {
        Some(code) => {
            *code == SqlState::T_R_SERIALIZATION_FAILURE
                || *code == SqlState::T_R_DEADLOCK_DETECTED
                || *code == SqlState::ADMIN_SHUTDOWN
                || *code == SqlState::CRASH_SHUTDOWN
                || *code == SqlState::CANNOT_CONNECT_NOW
                // A `MERGE` inserting a key that another transaction inserted after the
                // `MERGE` looked: only a writer that locks no store (a layout migration) can
                // race another, and run again it updates the row instead.
                || *code == SqlState::UNIQUE_VIOLATION
        }
        None => true,
    }
}

/// Whether the server told us what happened (a statement failed: the transaction is rolled
/// back), as opposed to the connection breaking (anything may have happened).
fn server_answered(e: &postgres::Error) -> bool {
    e.as_db_error().is_some_and(|db| {
        let code = db.code();
        *code != SqlState::ADMIN_SHUTDOWN && *code != SqlState::CRASH_SHUTDOWN
    })
}

/// Closes the session's connection instead of returning it to the pool.
fn discard(session: &mut Session) {
    if let Some(conn) = session.conn.take() {
        conn.discard();
    }
}

/// Ends an open transaction without its queued writes; a connection that cannot is closed.
fn rollback(session: &mut Session) {
    if !session.begun {
        return;
    }
    session.forget_writes();
    session.shared.trips.fetch_add(1, Ordering::Relaxed);
    let ok = session
        .conn
        .as_mut()
        .is_some_and(|c| c.client().batch_execute("ROLLBACK").is_ok());
    if !ok {
        discard(session);
    }
}

fn backoff(attempt: u32) {
    // 2, 4, 8 … ms, capped at 200, with a jitter from the clock so that rivals spread out.
    let base = 2u64.saturating_pow(attempt).min(200);
    let jitter = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::from(d.subsec_nanos()) % (base + 1));
    std::thread::sleep(Duration::from_millis(base + jitter));
}

impl PgBackend {
    /// Turns the fast path of writes on (the default) or off: what the memo knows is assumed
    /// instead of read, and a write whose reads were all assumed commits in one call
    /// (`write_fn`). Off, the memo is forgotten and never taught again, and every write runs the
    /// baseline: reads, then plain statements. The answers are the same either way.
    pub fn set_fast_path(&self, on: bool) {
        self.shared.fast_path.store(on, Ordering::Relaxed);
        if !on {
            self.shared.memo.forget_all();
        }
    }

    /// Writes with the statements memkv uses on servers older than PostgreSQL 15 and 12,
    /// whatever this server is: `INSERT … ON CONFLICT` instead of `MERGE`, and each statement
    /// planned as the server chooses instead of once (`plan_cache_mode`). The answers are the
    /// same; for comparing the two, and for ruling either feature out. Takes effect on
    /// connections that have not written yet: call it before the first write.
    pub fn use_older_statements(&self) {
        self.shared.merge.store(false, Ordering::Relaxed);
        self.shared.generic.store(false, Ordering::Relaxed);
    }

    /// Connects to the database at `url` (`postgres://` or `postgresql://`; `sslmode` and
    /// `sslrootcert` as in libpq's URLs, see the `tls` module), checks memkv's tables and their
    /// versions, and with [`Access::Create`] creates them if they are missing.
    pub fn connect(url: &str, access: Access) -> Result<Self, Error> {
        let location = redact_url(url);
        let (url, tls) = tls::split(url);
        let config = postgres::Config::from_str(&url).map_err(|e| Error::Unsupported {
            location: location.clone(),
            reason: format!("not a valid PostgreSQL URL: {}", describe(&e)),
        })?;
        let tls = match config.get_ssl_mode() {
            postgres::config::SslMode::Disable => None,
            _ => Some(tls.connector(&location)?),
        };
        let backend = PgBackend {
            pool: Pool::new(config, tls, location.clone(), POOL_SIZE),
            notifier: Arc::default(),
            shared: Arc::new(Shared {
                location: location.clone(),
                trips: AtomicU64::new(0),
                merge: AtomicBool::new(false),
                generic: AtomicBool::new(false),
                memo: Memo::default(),
                fast_path: AtomicBool::new(true),
                channel: std::sync::OnceLock::new(),
            }),
            location,
            writable: access != Access::ReadOnly,
        };
        backend.prepare(access)?;
        Ok(backend)
    }

    /// Checks (or creates) memkv's tables.
    fn prepare(&self, access: Access) -> Result<(), Error> {
        let mut conn = self.pool.get()?;
        let client = conn.client();
        let exists = sql::last_rows(
            client
                .simple_query("SELECT to_regclass('memkv_meta') IS NOT NULL")
                .map_err(|e| query_error(&self.location, &e))?,
        )
        .first()
        .and_then(|r| r.get(0).map(|v| v == "t"))
        .unwrap_or(false);
        if !exists {
            if access != Access::Create {
                return Err(Error::NotMemkv {
                    location: self.location.clone(),
                    reason: "memkv's tables do not exist here (`memkv init` creates them)".into(),
                });
            }
            let ddl = format!(
                "BEGIN;\nSELECT pg_advisory_xact_lock(7236294851093548853);\n{}\n{}\n\
                 INSERT INTO memkv_meta VALUES ('layout_version', {LAYOUT_VERSION}), \
                 ('pg_schema', {SCHEMA_VERSION}) ON CONFLICT DO NOTHING;\nCOMMIT;",
                sql::SCHEMA,
                sql::CHANGES_SCHEMA
            );
            if let Err(e) = client.batch_execute(&ddl) {
                let _ = client.batch_execute("ROLLBACK");
                if e.code() == Some(&SqlState::INSUFFICIENT_PRIVILEGE) {
                    return Err(Error::storage(crate::error::DatabaseError {
                        location: self.location.clone(),
                        text: format!(
                            "cannot create memkv's tables: the role may not create tables here ({}); \
                             run `memkv init` once as a role that may, or grant CREATE on the schema",
                            describe(&e)
                        ),
                        sqlstate: e.code().map(|c| c.code().to_owned()),
                    }));
                }
                return Err(query_error(&self.location, &e));
            }
        }
        if access != Access::ReadOnly {
            // A database made before the change log (layout 6) gets its table; the layout's
            // migration follows.
            let ddl = format!(
                "BEGIN;\nSELECT pg_advisory_xact_lock(7236294851093548853);\n{}\nCOMMIT;",
                sql::CHANGES_SCHEMA
            );
            let missing = sql::last_rows(
                client
                    .simple_query(
                        "SELECT to_regclass('memkv_changes') IS NULL \
                         OR to_regclass('memkv_changes_pending') IS NULL",
                    )
                    .map_err(|e| query_error(&self.location, &e))?,
            )
            .first()
            .and_then(|r| r.get(0).map(|v| v == "t"))
            .unwrap_or(false);
            if missing && let Err(e) = client.batch_execute(&ddl) {
                let _ = client.batch_execute("ROLLBACK");
                return Err(query_error(&self.location, &e));
            }
        }
        let version = sql::last_rows(
            client
                .simple_query("SELECT current_setting('server_version_num')")
                .map_err(|e| query_error(&self.location, &e))?,
        )
        .first()
        .and_then(|r| r.get(0).and_then(|v| v.parse::<u64>().ok()))
        .unwrap_or(0);
        self.shared
            .merge
            .store(version >= 150_000, Ordering::Relaxed);
        self.shared
            .generic
            .store(version >= 120_000, Ordering::Relaxed);
        // The schema's channel, where the server can notify (a server that cannot, or will
        // not say, leaves the others to their fallback polls).
        let notifies = client
            .simple_query(
                "SELECT coalesce(current_schema(), 'public'), \
                 to_regprocedure('pg_notify(text,text)') IS NOT NULL",
            )
            .map(sql::last_rows)
            .unwrap_or_default();
        if let Some(row) = notifies.first()
            && row.get(1) == Some("t")
            && let Some(schema) = row.get(0)
        {
            let _ = self.shared.channel.set(listen::channel(schema));
        }
        let rows = sql::last_rows(
            client
                .simple_query("SELECT name, value FROM memkv_meta")
                .map_err(|e| query_error(&self.location, &e))?,
        );
        let value = |name: &str| {
            rows.iter()
                .find(|r| r.get(0) == Some(name))
                .and_then(|r| r.get(1))
                .and_then(|v| v.parse::<u64>().ok())
        };
        let schema = value("pg_schema").unwrap_or(0);
        if schema != SCHEMA_VERSION {
            return Err(Error::NotMemkv {
                location: self.location.clone(),
                reason: format!(
                    "its memkv tables are in PostgreSQL schema version {schema}, this memkv knows {SCHEMA_VERSION}"
                ),
            });
        }
        let layout = value("layout_version").unwrap_or(0);
        if !(OLDEST_MIGRATABLE..=LAYOUT_VERSION).contains(&layout) {
            return Err(Error::UnsupportedFormat {
                location: self.location.clone(),
                found: layout,
                supported: LAYOUT_VERSION,
            });
        }
        if access == Access::ReadOnly && layout < LAYOUT_VERSION {
            return Err(Error::NeedsMigration {
                location: self.location.clone(),
                found: layout,
                supported: LAYOUT_VERSION,
            });
        }
        Ok(())
    }

    /// Round trips that transactions have made so far (each a statement batch sent and its
    /// answer awaited); schema checks at connection are not counted.
    pub fn round_trips(&self) -> u64 {
        self.shared.trips.load(Ordering::Relaxed)
    }

    /// Listens for what write transactions of every process commit (this one's too), on a
    /// connection of its own, until the watch is dropped: `tell` is called on the listener's
    /// thread with what arrived (once per burst, however many commits), and with
    /// [`Changed::EVERYTHING`](crate::storage::watch::Changed::EVERYTHING) each time it has
    /// connected. A lost connection is made again with backoff (50 ms, doubling, up to 5 s).
    /// `None` where the server cannot notify.
    ///
    /// # Errors
    /// No thread could be started.
    pub fn watch(
        &self,
        tell: Box<dyn Fn(crate::storage::watch::Changed) + Send>,
    ) -> Result<Option<crate::storage::watch::RemoteWatch>, Error> {
        let Some(channel) = self.shared.channel.get() else {
            return Ok(None);
        };
        listen::watch(Arc::clone(&self.pool), channel.clone(), tell).map(Some)
    }

    /// A connection, retried (with backoff) while the server is unreachable or restarting.
    fn conn(&self) -> Result<pool::Conn, Error> {
        let mut attempt = 0;
        loop {
            match self.pool.get() {
                Ok(conn) => return Ok(conn),
                Err(e) if attempt + 1 >= MAX_ATTEMPTS => return Err(e),
                Err(_) => {
                    backoff(attempt + 3);
                    attempt += 1;
                }
            }
        }
    }
}

/// The advisory lock of role `key` in the connection's schema (databases in different schemas
/// of one PostgreSQL database lease apart).
fn lease_key(key: i64) -> String {
    format!("({key}::bigint # hashtextextended(current_schema(), 0))")
}

/// A session-level advisory lock on a connection of its own ([`Backend::lease`]): held while
/// the connection lives, given up (the connection closed) when dropped.
struct PgLease {
    conn: Option<pool::Conn>,
}

impl crate::storage::Lease for PgLease {
    fn held(&mut self) -> bool {
        self.conn
            .as_mut()
            .is_some_and(|c| c.client().simple_query("SELECT 1").is_ok())
    }
}

impl Drop for PgLease {
    fn drop(&mut self) {
        // Closing the connection ends its session and so its lock: no query here, which could
        // run on an async runtime's thread, and no connection back in the pool with the lock
        // still held. (The pool closes it on a thread of its own.)
        if let Some(conn) = self.conn.take() {
            conn.discard();
        }
    }
}

impl Backend for PgBackend {
    type Read<'a> = PgRead;

    fn location(&self) -> &str {
        &self.location
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            embedded: false,
            prefetch: true,
            write_lanes: WRITE_LANES,
        }
    }

    fn lease(&self, key: i64) -> Result<Option<Box<dyn crate::storage::Lease>>, Error> {
        let mut conn = self.conn()?;
        let rows = conn
            .client()
            .simple_query(&format!("SELECT pg_try_advisory_lock({})", lease_key(key)))
            .map_err(|e| query_error(&self.location, &e))?;
        let held = sql::last_rows(rows)
            .first()
            .and_then(|r| r.get(0).map(|v| v == "t"))
            .unwrap_or(false);
        Ok(held.then(|| Box::new(PgLease { conn: Some(conn) }) as Box<_>))
    }

    fn begin_read(&self) -> Result<PgRead, Error> {
        let conn = self.conn()?;
        Ok(PgRead {
            session: RefCell::new(Session::new(
                conn,
                "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY;\n".into(),
                true,
                &self.shared,
                Vec::new(),
            )),
        })
    }

    fn write<R>(
        &self,
        lock: &[&str],
        mut f: impl FnMut(&mut dyn WriteTxn) -> Result<(R, Finish), Error>,
    ) -> Result<R, Error> {
        if !self.writable {
            return Err(Error::ReadOnly);
        }
        let mut users: Vec<&str> = lock.to_vec();
        users.sort_unstable();
        users.dedup();
        let begin = "BEGIN ISOLATION LEVEL READ COMMITTED;\n";
        let locked: Vec<String> = users.iter().map(|u| (*u).to_owned()).collect();
        // The first run may assume what the memo knows (on the fast path); a run after a failed
        // check does not.
        let mut assume = self.shared.fast_path.load(Ordering::Relaxed);
        let mut attempt = 0;
        // After a failed check: its connection, and whether a failed transaction is open on it
        // that the next message ends (saving a round trip of its own).
        let mut carried: Option<(pool::Conn, bool)> = None;
        loop {
            attempt += 1;
            let opening_rolls_back = carried.as_ref().is_some_and(|(_, open)| *open);
            // A first run skips making sure of the stores' rows when this process has seen them;
            // if one is gone, the lock fails as a stale assumption and the next run does not.
            let known = assume && users.iter().all(|u| self.shared.memo.knows(u));
            let mut prologue = String::from(begin);
            sql::lock(&mut prologue, &users, known);
            let (conn, opening) = match carried.take() {
                Some((conn, true)) => (conn, format!("ROLLBACK;\n{prologue}")),
                Some((conn, false)) => (conn, prologue.clone()),
                None => (self.conn()?, prologue.clone()),
            };
            let mut txn = PgWrite {
                session: RefCell::new(Session::new(
                    conn,
                    opening,
                    false,
                    &self.shared,
                    locked.clone(),
                )),
            };
            let session = txn.session.get_mut();
            session.may_assume = assume;
            session.one_call = known && !opening_rolls_back;
            // A carried connection is in a failed transaction until its `ROLLBACK` is sent.
            session.begun = opening_rolls_back;
            let outcome = f(&mut txn);
            let mut session = txn.session.into_inner();
            session.may_assume = false;
            if !session.unchecked.is_empty() && session.failure.is_none() {
                match &outcome {
                    Ok((_, Finish::Commit)) => {}
                    // A refusal or an error reached on assumptions is only an answer if they
                    // hold: check them (and end the transaction) in one round trip.
                    _ => {
                        session.forget_writes();
                        if session.run("", "ROLLBACK;").is_ok() {
                            session.begun = false;
                        }
                    }
                }
            }
            let mut committing = false;
            let err = match outcome {
                Ok((value, Finish::Commit)) if session.failure.is_none() => {
                    committing = true;
                    match session.run("", "COMMIT;") {
                        Ok(_) => {
                            if self.shared.fast_path.load(Ordering::Relaxed) {
                                session.teach_memo();
                            }
                            if session.changed.changes
                                && let Some(channel) = self.shared.channel.get()
                            {
                                self.notifier.committed(&self.pool, channel);
                            }
                            return Ok(value);
                        }
                        Err(e) => e,
                    }
                }
                Ok((value, Finish::Abort)) if session.failure.is_none() => {
                    rollback(&mut session);
                    return Ok(value);
                }
                Ok(_) => Error::storage("the transaction failed"),
                Err(e) => e,
            };
            let Some(failure) = session.failure.take() else {
                // The command itself failed, not the database: roll back and report.
                rollback(&mut session);
                return Err(err);
            };
            if session.stale && attempt < MAX_ATTEMPTS {
                // What was assumed did not hold (the check failed before anything was applied):
                // forget it, and run again with real reads, on the same connection (the next
                // message rolls the failed transaction back first).
                for user in &locked {
                    self.shared.memo.stale(user);
                }
                assume = false;
                session.forget_writes();
                carried = session.conn.take().map(|c| (c, session.begun));
                continue;
            }
            if !server_answered(&failure) {
                discard(&mut session);
                if committing {
                    // The connection broke with the commit on its way: it may have happened.
                    return Err(Error::OutcomeUnknown {
                        location: self.location.clone(),
                        reason: "the connection was lost during the commit".into(),
                    });
                }
            } else {
                rollback(&mut session);
            }
            if !retryable(&failure) {
                return Err(err);
            }
            if attempt >= MAX_ATTEMPTS {
                return Err(Error::Busy {
                    location: self.location.clone(),
                    attempts: attempt,
                });
            }
            backoff(attempt);
        }
    }
}
