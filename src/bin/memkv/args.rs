//! The command line, as clap sees it.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use memkv::{Limits, StoreBuilder};

/// A per-user, transactional store for Claude's memory tool (memory_20250818).
#[derive(Debug, Parser)]
#[command(name = "memkv", version, about, long_about = None)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Commands,
}

/// Options for every subcommand.
#[derive(Debug, Args)]
pub struct Global {
    /// The database file [default: $XDG_DATA_HOME/memkv/memkv.redb, else ~/.local/share/memkv/memkv.redb]
    #[arg(long, global = true, env = "MEMKV_DB", value_name = "PATH")]
    pub db: Option<PathBuf>,
    /// Largest file, in bytes
    #[arg(long, global = true, value_name = "BYTES", default_value_t = Limits::DEFAULT.max_file_bytes)]
    pub max_file_bytes: u64,
    /// Most files per user
    #[arg(long, global = true, value_name = "N", default_value_t = Limits::DEFAULT.max_files)]
    pub max_files: u64,
    /// Most bytes per user, over all their files
    #[arg(long, global = true, value_name = "BYTES", default_value_t = Limits::DEFAULT.max_bytes)]
    pub max_bytes: u64,
    /// Longest `view` output, in characters, before it is truncated
    #[arg(long, global = true, value_name = "CHARS", default_value_t = Limits::DEFAULT.view_max_chars)]
    pub view_max_chars: usize,
}

#[derive(Debug, Subcommand)]
pub enum Commands {
    /// Execute memory-tool commands: JSON Lines on stdin, one JSON line per input line on stdout
    ///
    /// A bare command object {"command": …} gets {"content": …, "is_error": …}; a tool_use block
    /// {"type":"tool_use","id":…,"name":"memory","input":{…}} gets a tool_result block. Each line
    /// is committed before its answer is written. Blank lines are skipped.
    Exec(ExecArgs),
    /// List users with their file counts and bytes
    Users,
    /// List a user's files: size, last modified (UTC), path
    Tree(UserArg),
    /// Print a file of a user's tree
    Cat(CatArgs),
}

#[derive(Debug, Args)]
pub struct ExecArgs {
    /// The user whose /memories the commands act on
    #[arg(long, short)]
    pub user: String,
}

#[derive(Debug, Args)]
pub struct UserArg {
    /// The user
    #[arg(long, short)]
    pub user: String,
}

#[derive(Debug, Args)]
pub struct CatArgs {
    /// The user
    #[arg(long, short)]
    pub user: String,
    /// The file, e.g. /memories/notes.md
    pub path: String,
}

impl Global {
    /// The database path: --db, $MEMKV_DB, or the default location.
    pub fn db_path(&self) -> Result<PathBuf, String> {
        if let Some(db) = &self.db {
            return Ok(db.clone());
        }
        let data = std::env::var_os("XDG_DATA_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/share")))
            .ok_or("no database given: pass --db PATH or set MEMKV_DB (HOME is not set either)")?;
        Ok(data.join("memkv").join("memkv.redb"))
    }

    /// A store builder with the limits given on the command line.
    pub fn builder(&self) -> StoreBuilder {
        memkv::Store::builder()
            .max_file_bytes(self.max_file_bytes)
            .max_files(self.max_files)
            .max_bytes(self.max_bytes)
            .view_max_chars(self.view_max_chars)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn clap_definition_is_valid() {
        Cli::command().debug_assert();
    }
}
