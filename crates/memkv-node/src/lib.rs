//! The Node addon of the TypeScript package (typescript/src/database.ts loads it): memkv in a
//! Node process. A thin translator over `memkv-bindings`, itself thin over the library: every
//! method answers what `memkv serve` answers for the same request, `{ status, body }` (the JSON
//! body as text), which the package reads with the same code as an HTTP answer. Every call but
//! the CLI's is an async task on libuv's thread pool: the event loop never waits for memkv or
//! the disk.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Mutex;

use memkv_bindings::{Answer, OpenError as Refused, Opened, ops};
use napi::bindgen_prelude::*;
use napi::{Env, Task};
use napi_derive::napi;

/// What every call answers: the HTTP route's status and JSON body.
#[napi(object)]
pub struct Reply {
    pub status: u32,
    pub body: String,
}

/// What a call answers: `status` 200 with the text the model reads and whether it is an error,
/// or the route's refusal (`text` its JSON body).
#[napi(object)]
pub struct Called {
    pub status: u32,
    pub text: String,
    pub is_error: bool,
}

/// One call (a command's input, or one `tool_use` block) on the thread pool.
pub struct CallTask(Option<Opened>, String, String);

impl Task for CallTask {
    type Output = Called;
    type JsValue = Called;

    fn compute(&mut self) -> Result<Called> {
        // Taken, so that the handle is dropped here, off the event loop.
        let opened = self
            .0
            .take()
            .ok_or_else(|| Error::from_reason("memkv: a task ran twice"))?;
        let (store, body) = (&self.1, &self.2);
        let called = catch_unwind(AssertUnwindSafe(|| {
            ops::call(&opened, store, body.as_bytes())
        }))
        .unwrap_or_else(|_| Err(panicked()));
        drop(opened);
        Ok(match called {
            Ok(output) => Called {
                status: 200,
                text: output.content,
                is_error: output.is_error,
            },
            Err(refused) => Called {
                status: u32::from(refused.status),
                text: refused.body,
                is_error: false,
            },
        })
    }

    fn resolve(&mut self, _: Env, called: Called) -> Result<Called> {
        Ok(called)
    }
}

/// One operation on the thread pool.
pub struct Op(Option<Box<dyn FnOnce() -> Answer + Send>>);

impl Task for Op {
    type Output = Answer;
    type JsValue = Reply;

    fn compute(&mut self) -> Result<Answer> {
        let op = self
            .0
            .take()
            .ok_or_else(|| Error::from_reason("memkv: a task ran twice"))?;
        // napi-rs runs `compute` without catching a panic, which would abort Node.
        Ok(catch_unwind(AssertUnwindSafe(op)).unwrap_or_else(|_| panicked()))
    }

    fn resolve(&mut self, _: Env, answer: Answer) -> Result<Reply> {
        Ok(Reply {
            status: u32::from(answer.status),
            body: answer.body,
        })
    }
}

/// What a call that panicked answers (a defect of memkv's: reported, never an abort).
fn panicked() -> Answer {
    Answer::error(
        500,
        "api_error",
        "memkv failed (a panic); nothing is known to be applied",
    )
}

fn op(f: impl FnOnce() -> Answer + Send + 'static) -> AsyncTask<Op> {
    AsyncTask::new(Op(Some(Box::new(f))))
}

/// The open error: `code` is `locked` (open in another process), `not_found` or `error`.
fn open_error(e: Refused) -> Error<String> {
    let code = match e {
        Refused::Memkv(memkv_bindings::Error::Locked { .. }) => "locked",
        Refused::Memkv(memkv_bindings::Error::NotFound { .. }) => "not_found",
        _ => "error",
    };
    Error::new(code.to_owned(), e.to_string())
}

/// Opening a database on the thread pool.
pub struct Open {
    location: String,
    read_only: bool,
    shared: bool,
}

impl Task for Open {
    type Output = Opened;
    type JsValue = Database;

    fn compute(&mut self) -> Result<Opened> {
        memkv_bindings::open(&self.location, self.read_only, self.shared).map_err(|e| {
            let e = open_error(e);
            Error::new(
                Status::GenericFailure,
                format!("{}\u{0}{}", e.status, e.reason),
            )
        })
    }

    fn resolve(&mut self, _: Env, opened: Opened) -> Result<Database> {
        Ok(Database {
            opened: Mutex::new(Some(opened)),
        })
    }
}

/// An open memkv database: a redb file, `:memory:`, or a `postgres://` URL.
#[napi]
pub struct Database {
    /// `None` once closed; a task under way holds its own handle, so the file closes when the
    /// last one ends (on the thread pool).
    opened: Mutex<Option<Opened>>,
}

/// The search route's parameters.
#[napi(object)]
pub struct SearchParams {
    pub mode: Option<String>,
    pub case_insensitive: Option<bool>,
    pub path_prefix: Option<String>,
    pub context: Option<i64>,
    pub limit: Option<i64>,
}

#[napi]
impl Database {
    /// Opens `location` now, on the caller's thread (for a factory that must answer at once).
    #[napi(factory)]
    pub fn open_sync(location: String, read_only: bool, shared: bool) -> Result<Database, String> {
        memkv_bindings::open(&location, read_only, shared)
            .map(|opened| Database {
                opened: Mutex::new(Some(opened)),
            })
            .map_err(open_error)
    }

    #[napi(getter)]
    pub fn read_only(&self) -> bool {
        self.lock().as_ref().is_some_and(|o| o.read_only)
    }

    /// Lets go of the database, also while calls are under way (each holds its own handle): the
    /// file closes once no other object of the process uses it. The last handle's drop (a flush,
    /// its writer joined) runs on the thread pool.
    #[napi(ts_return_type = "Promise<Reply>")]
    pub fn close(&self) -> AsyncTask<Op> {
        let opened = self.lock().take();
        op(move || {
            drop(opened);
            Answer::ok("{}".to_owned())
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Opened>> {
        self.opened.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn opened(&self) -> Result<Opened> {
        self.lock()
            .clone()
            .ok_or_else(|| Error::from_reason("memkv: the database was closed"))
    }

    /// The tool route: `body` is a command's input object, a `tool_use` block or an array of
    /// them, as JSON.
    #[napi(ts_return_type = "Promise<Reply>")]
    pub fn tool(&self, store: String, body: String) -> Result<AsyncTask<Op>> {
        let opened = self.opened()?;
        Ok(op(move || ops::tool(&opened, &store, body.as_bytes())))
    }

    /// One call as the tools make it: the text the model reads, without the JSON around it.
    #[napi(ts_return_type = "Promise<Called>")]
    pub fn call(&self, store: String, body: String) -> Result<AsyncTask<CallTask>> {
        Ok(AsyncTask::new(CallTask(Some(self.opened()?), store, body)))
    }

    /// The search route.
    #[napi(ts_return_type = "Promise<Reply>")]
    pub fn search(
        &self,
        store: String,
        query: String,
        params: SearchParams,
    ) -> Result<AsyncTask<Op>> {
        let opened = self.opened()?;
        let q = ops::Search {
            query,
            mode: params.mode,
            case_insensitive: params.case_insensitive,
            path_prefix: params.path_prefix,
            context: params.context,
            limit: params.limit,
        };
        Ok(op(move || ops::search(&opened, &store, &q)))
    }

    /// Deletes a store, every memory and version of it.
    #[napi(ts_return_type = "Promise<Reply>")]
    pub fn delete_store(&self, store: String) -> Result<AsyncTask<Op>> {
        let opened = self.opened()?;
        Ok(op(move || ops::delete_store(&opened, &store)))
    }

    /// Every store with memories.
    #[napi(ts_return_type = "Promise<Reply>")]
    pub fn stores(&self) -> Result<AsyncTask<Op>> {
        let opened = self.opened()?;
        Ok(op(move || ops::stores(&opened)))
    }

    /// An export of `stores` (every store when empty) written to `file`.
    #[napi(ts_return_type = "Promise<Reply>")]
    pub fn export(&self, stores: Vec<String>, file: String) -> Result<AsyncTask<Op>> {
        let opened = self.opened()?;
        Ok(op(move || ops::export(&opened, &stores, file.as_ref())))
    }

    /// An export file imported (`conflict`: `refuse`, `skip` or `replace`).
    #[napi(ts_return_type = "Promise<Reply>")]
    pub fn import_file(&self, file: String, conflict: Option<String>) -> Result<AsyncTask<Op>> {
        let opened = self.opened()?;
        Ok(op(move || {
            ops::import(&opened, file.as_ref(), conflict.as_deref())
        }))
    }

    /// Expired memories deleted (listed only, with `dryRun`).
    #[napi(ts_return_type = "Promise<Reply>")]
    pub fn expire(&self, dry_run: bool) -> Result<AsyncTask<Op>> {
        let opened = self.opened()?;
        Ok(op(move || ops::expire(&opened, dry_run)))
    }

    /// The versions of a memory (a model path) or of a whole store.
    #[napi(ts_return_type = "Promise<Reply>")]
    pub fn history(&self, store: String, path: Option<String>) -> Result<AsyncTask<Op>> {
        let opened = self.opened()?;
        Ok(op(move || ops::history(&opened, &store, path.as_deref())))
    }
}

/// Opens `location` on the thread pool. A failure's message is `CODE\0MESSAGE` (`CODE`:
/// `locked`, `not_found` or `error`).
#[napi(ts_return_type = "Promise<Database>")]
pub fn open(location: String, read_only: bool, shared: bool) -> AsyncTask<Open> {
    AsyncTask::new(Open {
        location,
        read_only,
        shared,
    })
}

/// The `memkv` command line (`argv` with the program's name first); returns its exit code.
/// It runs on the caller's thread: the package's `memkv` command is a process of its own.
#[napi]
pub fn cli(argv: Vec<String>) -> u32 {
    u32::from(memkv_bindings::cli(
        argv.into_iter().map(Into::into).collect(),
    ))
}
