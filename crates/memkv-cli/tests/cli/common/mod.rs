//! Helpers shared by the CLI's process tests (`commands`, `ops`, `history`, `postgres`),
//! and their backend factory: a test whose behaviour does not depend on the backend runs its
//! body on a redb file and then on a fresh PostgreSQL schema ([`each_backend`], [`Db`]).

#![allow(dead_code)]

use std::ffi::{OsStr, OsString};
use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};

#[path = "../../../../../tests/support/pg.rs"]
pub mod pg;

/// The `memkv` binary on database `db` (a redb path or a `postgres://` URL), with `MEMKV_DB`
/// cleared.
pub fn memkv(db: impl AsRef<OsStr>) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_memkv"));
    c.arg("--db").arg(db).env_remove("MEMKV_DB");
    c
}

/// Runs `command` with `input` on its standard input, capturing both outputs. The input is
/// written from a thread of its own, so a process that answers while it reads cannot fill its
/// output pipe and stall both sides.
pub fn run_with_input(command: &mut Command, input: &[u8]) -> Output {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    let writer = std::thread::spawn(move || match stdin.write_all(&input) {
        // A process that fails at start (a locked database, say) may exit before reading it.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        other => other.unwrap(),
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    out
}

/// Kills its child when dropped: a failed assertion never leaves a process behind.
pub struct Reaper(pub Child);

impl Drop for Reaper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `memkv exec -u USER` on `db`, its standard input and output piped, standard error dropped.
pub fn exec_piped(db: impl AsRef<OsStr>, user: &str) -> Reaper {
    Reaper(
        memkv(db)
            .args(["exec", "-u", user])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    )
}

/// A process's standard error, as text.
pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The standard output of a process that must have succeeded.
#[track_caller]
pub fn ok(out: &Output) -> String {
    assert!(out.status.success(), "{}", stderr(out));
    String::from_utf8(out.stdout.clone()).unwrap()
}

/// The process failed with exit code `code` and a message containing `message`.
#[track_caller]
pub fn fails(out: &Output, code: i32, message: &str) {
    assert_eq!(out.status.code(), Some(code), "{}", stderr(out));
    assert!(
        stderr(out).contains(message),
        "{:?} lacks {message:?}",
        stderr(out)
    );
}

// ---- the backend factory ---------------------------------------------------------------------

/// The backends a process test runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Redb,
    Postgres,
}

/// Runs `body` on redb, then on PostgreSQL from the binary's shared cluster; the PostgreSQL
/// half is skipped, visibly, where PostgreSQL is not installed (and required where
/// `MEMKV_REQUIRE_POSTGRES` is set).
pub fn each_backend(body: impl Fn(Backend)) {
    for backend in [Backend::Redb, Backend::Postgres] {
        if backend == Backend::Postgres && pg::cluster().is_none() {
            return;
        }
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| body(backend)));
        if let Err(panic) = result {
            eprintln!("(failed on {backend:?})");
            std::panic::resume_unwind(panic);
        }
    }
}

/// A fresh, empty database for a process's `--db`: a redb file (not yet created) or the URL
/// of a new schema no other test sees.
#[derive(Debug, Clone)]
pub struct Db {
    pub backend: Backend,
    location: OsString,
}

impl Db {
    /// A new database of `backend`; on redb the file `dir/name`.
    pub fn fresh(backend: Backend, dir: &Path, name: &str) -> Db {
        let location = match backend {
            Backend::Redb => dir.join(name).into_os_string(),
            // `sslmode=disable`: the cluster has no TLS, and with the default `prefer` each
            // process would load the system's root certificates for nothing (about 0.1 s a
            // process on 2 busy cores, most of these suites' time on PostgreSQL). `prefer` is
            // covered by the library suites, and with TLS by `tests/pg_tls.rs`.
            Backend::Postgres => format!(
                "{}&sslmode=disable",
                pg::cluster()
                    .expect("each_backend runs PostgreSQL halves only with a cluster")
                    .fresh_url()
            )
            .into(),
        };
        Db { backend, location }
    }

    /// The redb file, `None` on PostgreSQL.
    pub fn file(&self) -> Option<&Path> {
        (self.backend == Backend::Redb).then(|| Path::new(&self.location))
    }

    /// The location as text (for messages and `bash -c` arguments).
    pub fn as_str(&self) -> &str {
        self.location.to_str().unwrap()
    }
}

impl AsRef<OsStr> for Db {
    fn as_ref(&self) -> &OsStr {
        &self.location
    }
}
