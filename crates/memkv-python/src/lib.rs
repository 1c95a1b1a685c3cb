//! `memkv._native`: memkv in a Python process. A thin translator over `memkv-bindings`, itself
//! thin over the library: every method answers what `memkv serve` answers for the same request,
//! as `(status, body)` (the JSON body as text), which the package (python/src/memkv) reads with
//! the same code as an HTTP answer. Every call releases the GIL while memkv works, so that
//! Python threads run (and write, sharing commits) in parallel.

use std::ffi::OsString;
use std::path::PathBuf;

use std::sync::Mutex;

use memkv_bindings::{Answer, OpenError as Refused, Opened, ops};
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

create_exception!(
    _native,
    OpenError,
    PyException,
    "The database could not be opened: args are (kind, message), kind `locked` (open in another process), `not_found`, or `error`."
);

/// An open memkv database (a redb file, `:memory:`, or a `postgres://` URL).
#[pyclass(frozen, module = "memkv._native")]
struct Database {
    /// `None` once closed.
    opened: Mutex<Option<Opened>>,
    #[pyo3(get)]
    location: String,
}

/// What a call on a closed database answers.
fn closed(location: &str) -> Answer {
    Answer::error(
        400,
        "database_closed",
        format!("{location}: the database was closed"),
    )
}

type Reply = (u16, String);

fn reply(answer: Answer) -> Reply {
    (answer.status, answer.body)
}

#[pymethods]
impl Database {
    #[new]
    #[pyo3(signature = (location, *, read_only = false, shared = false))]
    fn new(py: Python<'_>, location: String, read_only: bool, shared: bool) -> PyResult<Self> {
        let opened = py
            .detach(|| memkv_bindings::open(&location, read_only, shared))
            .map_err(|e| {
                let kind = match e {
                    Refused::Memkv(memkv_bindings::Error::Locked { .. }) => "locked",
                    Refused::Memkv(memkv_bindings::Error::NotFound { .. }) => "not_found",
                    _ => "error",
                };
                OpenError::new_err((kind, e.to_string()))
            })?;
        Ok(Database {
            opened: Mutex::new(Some(opened)),
            location,
        })
    }

    #[getter]
    fn read_only(&self) -> bool {
        self.handle().is_some_and(|o| o.read_only)
    }

    /// Lets go of the database, the GIL released (the last handle's drop flushes and joins
    /// its writer): the file is closed once no other object of the process uses it.
    fn close(&self, py: Python<'_>) {
        let opened = self.opened.lock().unwrap_or_else(|e| e.into_inner()).take();
        py.detach(move || drop(opened));
    }

    /// The tool route: `body` is a command's input object, a `tool_use` block or an array of
    /// them, as JSON.
    fn tool(&self, py: Python<'_>, store: &str, body: &[u8]) -> Reply {
        self.with(py, |o| ops::tool(o, store, body))
    }

    /// One call as the tools make it (a command's input object, or one `tool_use` block):
    /// `(200, content, is_error)`, or the route's refusal `(status, body, False)`.
    fn call(&self, py: Python<'_>, store: &str, body: &[u8]) -> (u16, String, bool) {
        let Some(opened) = self.handle() else {
            let refused = closed(&self.location);
            return (refused.status, refused.body, false);
        };
        match py.detach(move || ops::call(&opened, store, body)) {
            Ok(output) => (200, output.content, output.is_error),
            Err(refused) => (refused.status, refused.body, false),
        }
    }

    /// The search route.
    #[pyo3(signature = (store, query, *, mode = None, case_insensitive = None, path_prefix = None, context = None, limit = None))]
    #[allow(clippy::too_many_arguments)]
    fn search(
        &self,
        py: Python<'_>,
        store: &str,
        query: String,
        mode: Option<String>,
        case_insensitive: Option<bool>,
        path_prefix: Option<String>,
        context: Option<i64>,
        limit: Option<i64>,
    ) -> Reply {
        let q = ops::Search {
            query,
            mode,
            case_insensitive,
            path_prefix,
            context,
            limit,
        };
        self.with(py, |o| ops::search(o, store, &q))
    }

    /// Deletes a store, every memory and version of it.
    fn delete_store(&self, py: Python<'_>, store: &str) -> Reply {
        self.with(py, |o| ops::delete_store(o, store))
    }

    /// Every store with memories.
    fn stores(&self, py: Python<'_>) -> Reply {
        self.with(py, ops::stores)
    }

    /// An export of `stores` (every store when empty) written to `file`.
    fn export(&self, py: Python<'_>, stores: Vec<String>, file: PathBuf) -> Reply {
        self.with(py, |o| ops::export(o, &stores, &file))
    }

    /// An export file imported (`conflict`: `refuse`, `skip` or `replace`).
    #[pyo3(signature = (file, conflict = None))]
    fn import_file(&self, py: Python<'_>, file: PathBuf, conflict: Option<String>) -> Reply {
        self.with(py, |o| ops::import(o, &file, conflict.as_deref()))
    }

    /// Expired memories deleted (listed only, with `dry_run`).
    fn expire(&self, py: Python<'_>, dry_run: bool) -> Reply {
        self.with(py, |o| ops::expire(o, dry_run))
    }

    /// The versions of a memory (a model path) or of a whole store.
    #[pyo3(signature = (store, path = None))]
    fn history(&self, py: Python<'_>, store: &str, path: Option<String>) -> Reply {
        self.with(py, |o| ops::history(o, store, path.as_deref()))
    }
}

impl Database {
    fn handle(&self) -> Option<Opened> {
        self.opened
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// `op` on the database with the GIL released (the handle dropped there too), or the
    /// answer for a closed one.
    fn with(&self, py: Python<'_>, op: impl FnOnce(&Opened) -> Answer + Send) -> Reply {
        match self.handle() {
            Some(opened) => reply(py.detach(move || op(&opened))),
            None => reply(closed(&self.location)),
        }
    }
}

/// The `memkv` command line (`argv` with the program's name first); returns its exit code.
#[pyfunction]
fn cli(py: Python<'_>, argv: Vec<OsString>) -> u8 {
    py.detach(|| memkv_bindings::cli(argv))
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Database>()?;
    m.add("OpenError", m.py().get_type::<OpenError>())?;
    m.add_function(wrap_pyfunction!(cli, m)?)?;
    Ok(())
}
