//! The Node addon of the TypeScript package (typescript/src/database.ts loads it): memkv in a
//! Node process. A thin translator over `memkv-bindings`, itself thin over the library: every
//! method answers what `memkv serve` answers for the same request, `{ status, body }` (the JSON
//! body as text), which the package reads with the same code as an HTTP answer. Every call but
//! the CLI's is an async task on libuv's thread pool: the event loop never waits for memkv or
//! the disk.

use memkv_bindings::{Answer, Opened, ops};
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
pub struct CallTask(Opened, String, String);

impl Task for CallTask {
    type Output = Called;
    type JsValue = Called;

    fn compute(&mut self) -> Result<Called> {
        Ok(match ops::call(&self.0, &self.1, self.2.as_bytes()) {
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
        Ok(op())
    }

    fn resolve(&mut self, _: Env, answer: Answer) -> Result<Reply> {
        Ok(Reply {
            status: u32::from(answer.status),
            body: answer.body,
        })
    }
}

fn op(f: impl FnOnce() -> Answer + Send + 'static) -> AsyncTask<Op> {
    AsyncTask::new(Op(Some(Box::new(f))))
}

/// The open error: `code` is `locked` (open in another process), `not_found` or `error`.
fn open_error(e: memkv_bindings::Error) -> Error<String> {
    let code = match e {
        memkv_bindings::Error::Locked { .. } => "locked",
        memkv_bindings::Error::NotFound { .. } => "not_found",
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
            opened: Some(opened),
        })
    }
}

/// An open memkv database: a redb file, `:memory:`, or a `postgres://` URL.
#[napi]
pub struct Database {
    /// `None` once closed; a task under way holds its own handle, so the file closes when the
    /// last one ends.
    opened: Option<Opened>,
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
                opened: Some(opened),
            })
            .map_err(open_error)
    }

    #[napi(getter)]
    pub fn read_only(&self) -> bool {
        self.opened.as_ref().is_some_and(|o| o.read_only)
    }

    /// Lets go of the database (the file closes once no other object of the process uses it).
    #[napi]
    pub fn close(&mut self) {
        self.opened = None;
    }

    fn opened(&self) -> Result<Opened> {
        self.opened
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
        Ok(AsyncTask::new(CallTask(self.opened()?, store, body)))
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
