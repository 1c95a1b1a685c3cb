//! `memkv`: the command-line front end. It translates arguments into library calls and prints
//! what they return; every rule lives in the `memkv` crate.
//!
//! A library as well as the binary (src/main.rs): [`run`] is the whole command line, so that the
//! Python extension and the Node addon carry the same `memkv` command without a second build of
//! it (their packages' `memkv` entry points call it).

/// Writes a line to standard error, ignoring failure: a closed stderr must never make the
/// process panic (as `eprintln!` would).
macro_rules! note {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

mod admin;
mod args;
mod backup;
mod changes;
mod config;
mod docs;
mod duration;
mod exec;
mod history;
mod logbuf;
mod logs;
mod mcp;
mod remote;
mod search;
mod serve;
mod sync;
mod text;

use std::io;

use clap::FromArgMatches;

use args::{Cli, Commands, ConfigCommand};
pub use history::version_json;

/// Exit codes: 0 success; 1 a runtime failure (database, I/O); 2 bad usage (clap's, and
/// [`Usage`]); 141 (128 + SIGPIPE, what a shell reports for a process killed by a closed pipe)
/// when the reader of standard output went away, as in `memkv export | head`: quietly, but
/// never 0, because the output is incomplete.
const EXIT_FAILURE: u8 = 1;
const EXIT_USAGE: u8 = 2;
const EXIT_BROKEN_PIPE: u8 = 141;

/// A command line that clap accepts but that makes no sense (exit 2, like clap's own errors).
#[derive(Debug)]
pub struct Usage(pub String);

impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Usage {}

/// Whether `e` is, or was caused by, writing to a pipe whose reader has gone.
fn is_broken_pipe(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(e);
    while let Some(e) = cause {
        if let Some(io) = e.downcast_ref::<io::Error>()
            && io.kind() == io::ErrorKind::BrokenPipe
        {
            return true;
        }
        if let Some(memkv::Error::Output(io)) = e.downcast_ref::<memkv::Error>()
            && io.kind() == io::ErrorKind::BrokenPipe
        {
            return true;
        }
        cause = e.source();
    }
    false
}

/// Runs the command line `args` (the program's name first, as `std::env::args_os` gives it) and
/// returns the process's exit code (see the `EXIT_` constants). Parse errors, `--help` and `--version` exit the process
/// (clap's behaviour), so call it from a process that is the `memkv` command.
pub fn run(args: Vec<std::ffi::OsString>) -> u8 {
    quiet_storage_panics();
    let (command, loaded) = match config::command(&args) {
        Ok(c) => c,
        Err(e) => {
            note!("memkv: {e}");
            return EXIT_USAGE;
        }
    };
    let matches = command.clone().get_matches_from(&args);
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    let result = match &cli.command {
        Commands::Exec(a) => exec::run(&cli.global, a),
        Commands::Users => admin::users(&cli.global),
        Commands::Tree(a) => admin::tree(&cli.global, a),
        Commands::Cat(a) => admin::cat(&cli.global, a),
        Commands::Stats => admin::stats(&cli.global),
        Commands::History(a) => history::history(&cli.global, a),
        Commands::Restore(a) => history::restore(&cli.global, a),
        Commands::Redact(a) => history::redact(&cli.global, a),
        Commands::Check(args) => admin::check(&cli.global, args),
        Commands::Init => admin::init(&cli.global),
        Commands::Export(a) => backup::export(&cli.global, a),
        Commands::Import(a) => backup::import(&cli.global, a),
        Commands::Expire(a) => backup::expire(&cli.global, a),
        Commands::Prune => backup::prune(&cli.global),
        Commands::Compact => backup::compact(&cli.global),
        Commands::Changes(a) => changes::changes(&cli.global, a),
        Commands::Search(a) => search::search(&cli.global, a),
        Commands::Mcp(a) => mcp::run(&cli.global, a),
        Commands::Serve(a) => serve::serve(&cli.global, a),
        Commands::Sync(a) => sync::run(
            a,
            &sync::FileFolders {
                path: loaded.path.as_deref(),
                sync_folders: &loaded.sync_folders,
            },
        ),
        Commands::Keys(k) => serve::keys(&cli.global, k),
        Commands::Webhooks(w) => changes::webhooks(&cli.global, w),
        Commands::Settings(a) => admin::settings(&cli.global, a, &matches),
        Commands::Config(ConfigCommand::Show) => {
            use std::io::Write as _;
            let mut out = io::stdout().lock();
            out.write_all(config::show(&command, &matches, &loaded).as_bytes())
                .and_then(|()| out.flush())
                .map_err(Into::into)
        }
        Commands::Completions { shell } => docs::completions(*shell),
        Commands::Man { out_dir } => docs::man(out_dir.as_deref()),
    };
    // What is left in standard output's buffer: a binary flushes it as it exits, a process
    // that called `run` from an extension or addon does not.
    let result = result.and_then(|()| {
        use std::io::Write as _;
        io::stdout().flush().map_err(Into::into)
    });
    match result {
        Ok(()) => 0,
        Err(e) if is_broken_pipe(e.as_ref()) => EXIT_BROKEN_PIPE,
        Err(e) => {
            note!("memkv: {}", text::safe_lines(&e.to_string()));
            if matches!(e.downcast_ref(), Some(memkv::Error::Locked { .. })) {
                note!(
                    "hint: one process may write at a time; read-only commands (users, tree, cat, stats, history, check, export) can run beside a writer started with --shared"
                );
            }
            if matches!(e.downcast_ref(), Some(memkv::Error::NotFound { .. })) {
                note!(
                    "hint: `memkv init` creates a database; so do exec, import, serve, mcp, keys add and webhooks add"
                );
            }
            if e.downcast_ref::<Usage>().is_some() {
                EXIT_USAGE
            } else {
                EXIT_FAILURE
            }
        }
    }
}

/// redb panics on some damaged pages instead of returning an error; the library catches those
/// panics and reports the damage as an error, which is printed like any other. Only the default
/// hook's "thread 'main' panicked at …" for them is left out here; every other panic is reported
/// as usual.
fn quiet_storage_panics() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let in_redb = info
            .location()
            .is_some_and(|l| l.file().replace('\\', "/").contains("/redb-"));
        if !in_redb {
            default(info);
        }
    }));
}
