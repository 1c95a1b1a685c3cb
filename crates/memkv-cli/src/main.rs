//! `memkv`: the command-line front end. It translates arguments into library calls and prints
//! what they return; every rule lives in the `memkv` crate.

mod admin;
mod args;
mod backup;
mod exec;

use std::process::ExitCode;

use clap::Parser;

use args::{Cli, Commands};

/// Exit codes: 0 success, 1 a runtime failure (database, I/O), 2 bad usage (from clap).
const EXIT_FAILURE: u8 = 1;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        Commands::Exec(a) => exec::run(&cli.global, a),
        Commands::Users => admin::users(&cli.global),
        Commands::Tree(a) => admin::tree(&cli.global, a),
        Commands::Cat(a) => admin::cat(&cli.global, a),
        Commands::Stats => admin::stats(&cli.global),
        Commands::Check => admin::check(&cli.global),
        Commands::Export(a) => backup::export(&cli.global, a),
        Commands::Import(a) => backup::import(&cli.global, a),
        Commands::Expire(a) => backup::expire(&cli.global, a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("memkv: {e}");
            if matches!(e.downcast_ref(), Some(memkv::Error::Locked { .. })) {
                eprintln!(
                    "hint: one process may write at a time; read-only commands (users, tree, cat, stats, check, export) can run beside a writer started with --shared"
                );
            }
            ExitCode::from(EXIT_FAILURE)
        }
    }
}
