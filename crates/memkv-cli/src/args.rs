//! The command line, as clap sees it.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use memkv::{ChangeRetention, DatabaseBuilder, Limits, Retention, SecretPolicy};

/// A per-user, transactional store for Claude's memory tool (memory_20250818).
#[derive(Debug, Parser)]
#[command(name = "memkv", version, about, long_about = None)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Commands,
}

/// Options for every subcommand. Each also comes from the environment (`MEMKV_` and its name:
/// `MEMKV_MAX_FILES`) and from the config file (`--config`), in that order after the command
/// line (`crate::config`).
#[derive(Debug, Args)]
pub struct Global {
    /// A TOML file of option values: the global options at the top, `serve`'s under [serve]; the
    /// command line and the environment win over it (`memkv config show` prints the result)
    #[arg(long, global = true, env = "MEMKV_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// The database: a redb file, or a PostgreSQL URL (postgres://user@host/db) [default: $XDG_DATA_HOME/memkv/memkv.redb, else ~/.local/share/memkv/memkv.redb]
    #[arg(
        long,
        global = true,
        help_heading = "Store options",
        env = "MEMKV_DB",
        value_name = "PATH|URL"
    )]
    pub db: Option<PathBuf>,
    /// A keys file for `memkv serve` to import (keys of earlier versions, or added by `memkv keys`
    /// while the server held the database) [default: the database path + .keys]
    #[arg(
        long,
        global = true,
        help_heading = "Store options",
        env = "MEMKV_KEYS",
        value_name = "FILE"
    )]
    pub keys: Option<PathBuf>,
    /// Largest file, in bytes
    #[arg(long, global = true, help_heading = "Store options", value_name = "BYTES", default_value_t = Limits::DEFAULT.max_file_bytes)]
    pub max_file_bytes: u64,
    /// Most files per user
    #[arg(long, global = true, help_heading = "Store options", value_name = "N", default_value_t = Limits::DEFAULT.max_files)]
    pub max_files: u64,
    /// Most bytes per user, over all their files
    #[arg(long, global = true, help_heading = "Store options", value_name = "BYTES", default_value_t = Limits::DEFAULT.max_bytes)]
    pub max_bytes: u64,
    /// Longest `view` output, in characters, before it is truncated
    #[arg(long, global = true, help_heading = "Store options", value_name = "CHARS", default_value_t = Limits::DEFAULT.view_max_chars)]
    pub view_max_chars: usize,
    /// Let read-only commands (users, tree, cat, stats, history, check, export) open the
    /// database while this process writes to it; costs a second disk flush per commit
    #[arg(long, global = true, help_heading = "Store options")]
    pub shared: bool,
    /// What to do with secrets (API keys, private keys, tokens) in content being written
    #[arg(long, global = true, help_heading = "Store options", value_name = "POLICY", default_value = "reject", value_parser = ["reject", "redact", "off"])]
    pub secrets: String,
    /// Expire files unused for this long, e.g. 30d, 12h, or `off` (default: never)
    #[arg(long, global = true, help_heading = "Store options", value_name = "DURATION|off", value_parser = parse_bound(parse_duration))]
    pub ttl: Option<Bound<Duration>>,
    /// Per-user time-to-live, overriding --ttl: NAME=DURATION, or NAME=off to exempt a user
    #[arg(long, global = true, help_heading = "Store options", value_name = "NAME=DURATION", value_parser = parse_user_ttl)]
    pub user_ttl: Vec<(String, Option<Duration>)>,
    /// How stale a recorded access time may get before a read refreshes it (at most a tenth of the ttl: a file expires between ttl and ttl + this after its last use)
    #[arg(long, global = true, help_heading = "Store options", value_name = "DURATION", default_value = "1h", value_parser = parse_duration)]
    pub access_granularity: Duration,
    /// Prune versions older than this, e.g. 30d, or `off` [default: 30d]
    #[arg(long, global = true, help_heading = "History options", value_name = "DURATION|off", value_parser = parse_bound(parse_duration))]
    pub history_max_age: Option<Bound<Duration>>,
    /// Keep at most this many versions per store, or `off` [default: 100000]
    #[arg(long, global = true, help_heading = "History options", value_name = "N|off", value_parser = parse_bound(parse_count))]
    pub history_max_versions: Option<Bound<u64>>,
    /// Keep at most this many bytes of versions (paths and contents) per store, or `off` [default: 268435456]
    #[arg(long, global = true, help_heading = "History options", value_name = "BYTES|off", value_parser = parse_bound(parse_count))]
    pub history_max_bytes: Option<Bound<u64>>,
    /// Bytes of the disk kept in reserve beside a redb file (DB.reserve) so that deletes,
    /// renames, expire, prune and redact still commit on a full disk, or `off` [default: 1.25 ×
    /// --max-bytes + 8 MiB, enough to delete the largest store]
    #[arg(long, global = true, help_heading = "Store options", value_name = "BYTES|off", value_parser = parse_bound(parse_count))]
    pub disk_reserve: Option<Bound<u64>>,
    /// Remove change-log entries older than this, e.g. 30d, or `off` [default: 30d]
    #[arg(long, global = true, help_heading = "Change log options", value_name = "DURATION|off", value_parser = parse_bound(parse_duration))]
    pub changes_max_age: Option<Bound<Duration>>,
    /// Keep at most this many change-log entries, or `off` [default: 1000000]
    #[arg(long, global = true, help_heading = "Change log options", value_name = "N|off", value_parser = parse_bound(parse_count))]
    pub changes_max_entries: Option<Bound<u64>>,
    /// Keep no history: record no versions (memory ids are still kept)
    #[arg(long, global = true, help_heading = "History options", conflicts_with_all = ["history_max_age", "history_max_versions", "history_max_bytes"])]
    pub no_history: bool,
}

/// A retention bound as given: a value, or `off` (unbounded).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bound<T>(pub Option<T>);

/// `off`, or what `parse` accepts.
fn parse_bound<T: Clone + Send + Sync + 'static>(
    parse: fn(&str) -> Result<T, String>,
) -> impl Fn(&str) -> Result<Bound<T>, String> + Clone + Send + Sync + 'static {
    move |text| match text {
        "off" => Ok(Bound(None)),
        _ => parse(text).map(|v| Bound(Some(v))),
    }
}

fn parse_count(text: &str) -> Result<u64, String> {
    text.parse()
        .map_err(|_| format!("{text:?} is not a whole number (or `off`)"))
}

pub use crate::duration::parse_duration;

fn parse_user_ttl(text: &str) -> Result<(String, Option<Duration>), String> {
    let (user, ttl) = text
        .rsplit_once('=')
        .ok_or_else(|| format!("{text:?}: expected NAME=DURATION or NAME=off"))?;
    let ttl = match ttl {
        "off" => None,
        d => Some(parse_duration(d)?),
    };
    if user.is_empty() {
        return Err(format!("{text:?}: the user name is empty"));
    }
    Ok((user.to_owned(), ttl))
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
    /// Per-user files, bytes, last write and expired files pending; each store's history
    /// (versions kept, their bytes, versions and bytes pruned); the database size
    Stats,
    /// The versions of a user's memory at PATH, or of all their memories, oldest first
    History(HistoryArgs),
    /// Make an old version's content current again, as a new version
    Restore(VersionArgs),
    /// Erase a version's content, path, hash and size for good (when and by whom is kept)
    Redact(VersionArgs),
    /// Write a consistent backup (JSON Lines) of all or some users, or one user's tree as plain files
    Export(ExportArgs),
    /// Restore a backup in one transaction (all or nothing), or import a plain directory tree
    Import(ImportArgs),
    /// Delete expired files and list them (needs --ttl or --user-ttl)
    Expire(ExpireArgs),
    /// Apply the history retention (--history-max-*) to every store and the change log's
    /// (--changes-max-*) now, freeing the space of what they no longer keep
    Prune,
    /// Rewrite the redb file with only its live data (no other process may have it open): what
    /// redactions, deleted stores, expiry and pruning freed is then gone from the file, which
    /// shrinks to its data (on PostgreSQL: VACUUM FULL does this)
    Compact,
    /// The change log: every committed change, oldest first, numbered across the database
    ///
    /// Columns: seq, time (UTC), type, store, path (<- the previous path of a move). With
    /// --follow, waits for new changes and prints them as they commit (on a redb file, beside
    /// a writer started with --shared, or on PostgreSQL).
    Changes(ChangesArgs),
    /// Search a user's memories: ranked by the query's words (BM25), or the lines that contain
    /// a literal (--fixed-strings) or match a regular expression (--regex, ripgrep's syntax)
    ///
    /// Prints what the model's `memory_search` tool reads: each memory found as
    /// `/memories/path (score S)` (ranked), each line as `/memories/path:N: line` (context lines
    /// as `path-N- line`).
    Search(SearchArgs),
    /// Create the database (a redb file, or memkv's tables in PostgreSQL) if it does not exist
    Init,
    /// Verify the database against memkv's invariants
    Check(CheckArgs),
    /// Serve the memory tool over MCP on stdin/stdout (Claude Desktop, Claude Code, ...)
    ///
    /// Two tools, `memory` and `memory_search`, acting on --user's /memories. The database is
    /// opened by this process, or, with --url and --api-key, calls are forwarded to a running
    /// `memkv serve` (a database has one owner). Standard output carries the protocol; logs go to standard error.
    Mcp(McpArgs),
    /// Serve the memory tool over HTTP: POST /v1/memory_stores/{store}/tool (docs/server.md)
    Serve(ServeArgs),
    /// Keep a folder of memory files and a store identical, both ways, continuously: the same
    /// memory on every machine (docs/sync.md)
    Sync(crate::sync::SyncArgs),
    /// API keys for `memkv serve`: add, list, revoke (a running server sees changes at once)
    #[command(subcommand)]
    Keys(KeysCommand),
    /// Webhook endpoints that `memkv serve` delivers the change log to: add, list, remove
    #[command(subcommand)]
    Webhooks(WebhooksCommand),
    /// A store's own settings: its quotas, time-to-live, history retention and secrets policy
    ///
    /// Without options, prints them. The store options given with it (--max-files, --max-bytes,
    /// --ttl, --history-max-age, --history-max-versions, --history-max-bytes, --secrets) become
    /// the store's own, kept in the database (every server of it applies them within a
    /// second); --reset NAME puts one back to the database's default (the flags or config every
    /// process starts with).
    Settings(SettingsArgs),
    /// The configuration in force: every option, its value and where it came from
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Print the shell completion script for SHELL (bash, zsh, fish, elvish, powershell)
    ///
    /// bash: `memkv completions bash > ~/.local/share/bash-completion/completions/memkv`;
    /// zsh: into a directory on $fpath as `_memkv`; fish: `~/.config/fish/completions/memkv.fish`.
    Completions {
        /// The shell
        shell: clap_complete::Shell,
    },
    /// Print the manual page memkv(1), or write one page per command into a directory
    Man {
        /// Write memkv.1 and memkv-COMMAND.1 for every command into this directory
        #[arg(long, value_name = "DIR")]
        out_dir: Option<PathBuf>,
    },
}

#[derive(Debug, Subcommand)]
pub enum WebhooksCommand {
    /// Register an endpoint; its signing secret (whsec_…) is printed once, alone on the last line
    Add {
        /// Where each entry is POSTed (http:// or https://)
        #[arg(long, value_name = "URL")]
        url: String,
        /// Only this store's changes (repeatable; default: every store's)
        #[arg(long, value_name = "NAME")]
        store: Vec<String>,
        /// Only this type of change, e.g. memory.created (repeatable; default: every type)
        #[arg(long, value_name = "TYPE")]
        event: Vec<String>,
        /// How deliveries are shaped: memkv (every type of change) or hosted (the hosted
        /// memory-stores API's memory_store.* events, for applications written against them)
        #[arg(long, value_name = "FORMAT", default_value = "memkv")]
        format: String,
    },
    /// List endpoints: id, the seq deliveries go on after, failures in a row, next attempt, URL;
    /// then the stores and events each gets, and its last error
    List,
    /// Remove an endpoint by its id (wh_…)
    Remove {
        /// The endpoint's id, as `webhooks list` shows it
        id: String,
    },
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Each API key's rate limit: requests per second, and the burst allowed after a quiet time
    /// (RPS or RPS:BURST); more are answered 429 with Retry-After [default: none]
    #[arg(long, value_name = "RPS[:BURST]")]
    pub rate_limit_key: Option<memkv_server::rate::Rate>,
    /// Each store's rate limit, over every key that uses it (RPS or RPS:BURST) [default: none]
    #[arg(long, value_name = "RPS[:BURST]")]
    pub rate_limit_store: Option<memkv_server::rate::Rate>,
    /// How log lines are written to standard error: text, or one JSON object per line
    #[arg(long, value_name = "FORMAT", default_value = "text", value_parser = ["text", "json"])]
    pub log_format: String,
    /// The address to listen on (port 0: a free port; the line `listening on http://ADDR` tells which)
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:7437")]
    pub listen: std::net::SocketAddr,
    /// Requests executed at once; more are answered 503 with Retry-After
    #[arg(long, value_name = "N", default_value_t = 128)]
    pub max_in_flight: usize,
    /// Open connections at once; more wait to be accepted
    #[arg(long, value_name = "N", default_value_t = 1024)]
    pub max_connections: usize,
    /// Most tool_use blocks in one request
    #[arg(long, value_name = "N", default_value_t = 64)]
    pub max_blocks: usize,
    /// Time a client has to send a request's headers
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub header_timeout: Duration,
    /// Time a client has to send a request's body
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_duration)]
    pub body_timeout: Duration,
    /// Largest export `POST /v1/import` takes (it is spooled to a temporary file before it is
    /// verified); a larger one is answered 413
    #[arg(long, value_name = "BYTES", default_value_t = memkv_server::DEFAULT_MAX_IMPORT_BYTES)]
    pub max_import_bytes: u64,
    /// On SIGTERM/SIGINT, how long to wait for requests in flight
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_duration)]
    pub shutdown_grace: Duration,
    /// On SIGTERM/SIGINT, how long to go on serving first, with /readyz answering 503, so that
    /// a load balancer's health checks take this server out before it stops accepting
    #[arg(long, value_name = "DURATION", default_value = "0s", value_parser = parse_duration)]
    pub drain_delay: Duration,
    /// How long a web console session (/console) lasts without a request; a session ends after
    /// 8 hours (or this, if longer) in any case
    #[arg(long, value_name = "DURATION", default_value = "1h", value_parser = parse_duration)]
    pub console_idle: Duration,
    /// A `Host` the MCP endpoint (/mcp) answers: NAME or NAME:PORT, repeatable, `*` for any
    /// [default: localhost, 127.0.0.1, ::1]
    #[arg(long, value_name = "HOST")]
    pub mcp_allow_host: Vec<String>,
    /// A browser `Origin` the MCP endpoint accepts: SCHEME://HOST:PORT (`:*` any port),
    /// repeatable [default: http and https on localhost, 127.0.0.1, [::1], any port]
    #[arg(long, value_name = "ORIGIN")]
    pub mcp_allow_origin: Vec<String>,
    /// One async worker per CPU, each pinned to its own (Linux): lower `view` latency under
    /// load on a machine given to memkv, less throughput; not for shared hosts (docs/server.md)
    #[arg(long)]
    pub pin_workers: bool,
    /// Serve without API keys: any local process may use every store. Only on a loopback
    /// address and while no key exists (a warning is logged); without it, a server with no key
    /// refuses every request but /healthz
    #[arg(long)]
    pub no_auth: bool,
    /// How long a webhook endpoint has to answer a delivery
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub webhook_timeout: Duration,
    /// The first retry's delay after a failed webhook delivery; each further failure doubles it
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_duration)]
    pub webhook_retry_base: Duration,
    /// The longest delay between retries of a webhook delivery
    #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = parse_duration)]
    pub webhook_retry_max: Duration,
    /// Let webhook deliveries reach addresses that are not public (loopback, private networks,
    /// link-local such as a cloud's metadata service); by default a delivery to one fails
    #[arg(long)]
    pub webhook_allow_private: bool,
}

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Print every global option and every option of `serve`: its value (a database URL's
    /// password masked) and where it came from (command line, environment, config file, default)
    Show,
}

#[derive(Debug, Args)]
pub struct SettingsArgs {
    /// The store (memkv user id)
    #[arg(long, short)]
    pub user: String,
    /// Put this setting back to the database's default (max_files, max_bytes, ttl,
    /// history_max_age, history_max_versions, history_max_bytes, secrets); repeatable
    #[arg(long, value_name = "NAME", value_parser = clap::builder::PossibleValuesParser::new(memkv::SETTINGS))]
    pub reset: Vec<String>,
    /// Print them as JSON, as GET /v1/memory_stores/{store}/settings answers
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// Add a random key; it is printed once, alone on the last line (only its hash is kept)
    #[command(group(clap::ArgGroup::new("scope").required(true).args(["store", "admin"])))]
    Add {
        /// A key for this store (memkv user id) only
        #[arg(long, value_name = "NAME")]
        store: Option<String>,
        /// A key for every store and the operator routes (/metrics, /v1/keys, /v1/webhooks)
        #[arg(long)]
        admin: bool,
        /// With --store: the key may read the store but not change it
        #[arg(long, requires = "store")]
        read_only: bool,
        /// Words to remember the key by (shown by `keys list`)
        #[arg(long, value_name = "TEXT", default_value = "")]
        label: String,
        /// The key stops working after this long, e.g. 30d, 12h
        #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
        expires: Option<Duration>,
    },
    /// List keys: id, scope, label, creation, expiry and last use (never the keys)
    List {
        /// One JSON object per key, as GET /v1/keys answers them
        #[arg(long)]
        json: bool,
        /// List them through a running `memkv serve` at this URL (its GET /v1/keys), e.g. while
        /// it holds a redb file
        #[arg(long, value_name = "URL", requires = "api_key")]
        url: Option<String>,
        /// An admin key of that server, with --url
        #[arg(
            long,
            value_name = "KEY",
            env = "MEMKV_API_KEY",
            hide_env_values = true
        )]
        api_key: Option<String>,
    },
    /// Revoke a key by its id (key_…)
    Revoke {
        /// The key's id, as `keys list` shows it
        id: String,
    },
}

#[derive(Debug, Args)]
pub struct McpArgs {
    /// The user whose /memories the tool acts on (with --url: the store on the server)
    #[arg(long, short)]
    pub user: String,
    /// Forward every call to the memkv server at URL (e.g. http://127.0.0.1:7437) instead of
    /// opening the database
    #[arg(long, env = "MEMKV_URL", value_name = "URL", requires = "api_key")]
    pub url: Option<String>,
    /// The server key, with --url (a key for the store, or an admin key)
    #[arg(
        long,
        env = "MEMKV_API_KEY",
        value_name = "KEY",
        hide_env_values = true
    )]
    pub api_key: Option<String>,
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// Only these users (repeatable; default: everyone)
    #[arg(long, short)]
    pub user: Vec<String>,
    /// Write to FILE instead of stdout (replaced only once the export is complete)
    #[arg(long, short, value_name = "FILE", conflicts_with = "to_dir")]
    pub output: Option<PathBuf>,
    /// Write one user's files as plain files under DIR (needs exactly one --user)
    #[arg(long, value_name = "DIR")]
    pub to_dir: Option<PathBuf>,
    /// An incremental export: the stores changed after this seq of the change log (the `seq`
    /// in the header of the export it follows); import it after that one
    #[arg(long, value_name = "SEQ", conflicts_with_all = ["to_dir", "user"])]
    pub since: Option<u64>,
    /// Export from a running `memkv serve` at this URL instead of opening the database: one
    /// consistent snapshot while its writes go on (with --api-key: a store key and one --user,
    /// or an admin key)
    #[arg(
        long,
        value_name = "URL",
        requires = "api_key",
        conflicts_with = "to_dir"
    )]
    pub url: Option<String>,
    /// The server key, with --url
    #[arg(
        long,
        value_name = "KEY",
        env = "MEMKV_API_KEY",
        hide_env_values = true
    )]
    pub api_key: Option<String>,
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("source").required(true).args(["file", "from_dir"])))]
pub struct ImportArgs {
    /// An export file written by `memkv export`, or - for standard input
    pub file: Option<PathBuf>,
    /// Import a plain directory tree (e.g. the SDK handler's memories/ folder) as --user's /memories
    #[arg(long, value_name = "DIR", requires = "user")]
    pub from_dir: Option<PathBuf>,
    /// Only these users of the file (repeatable; default: everyone); with --from-dir, the one
    /// user whose /memories the tree becomes
    #[arg(long, short)]
    pub user: Vec<String>,
    /// With --from-dir: refuse the whole import if any file would be skipped
    #[arg(long, requires = "from_dir")]
    pub strict: bool,
    /// Keep files that already exist and import the rest
    #[arg(long, conflicts_with = "replace")]
    pub skip_existing: bool,
    /// Overwrite files that already exist
    #[arg(long)]
    pub replace: bool,
    /// Send the export to a running `memkv serve` at this URL (an admin key) instead of opening
    /// the database; it applies it all or nothing
    #[arg(
        long,
        value_name = "URL",
        requires = "api_key",
        conflicts_with = "from_dir"
    )]
    pub url: Option<String>,
    /// The server's admin key, with --url
    #[arg(
        long,
        value_name = "KEY",
        env = "MEMKV_API_KEY",
        hide_env_values = true
    )]
    pub api_key: Option<String>,
}

#[derive(Debug, Args)]
pub struct ChangesArgs {
    /// Only this store's changes
    #[arg(long, short)]
    pub user: Option<String>,
    /// Start after this seq (0: from the start of the log)
    #[arg(long, value_name = "SEQ", default_value_t = 0)]
    pub after: u64,
    /// Print at most this many entries (default: every one; with --follow: no end)
    #[arg(long, value_name = "N")]
    pub limit: Option<u64>,
    /// Keep waiting for new changes and print each as it commits (until interrupted)
    #[arg(long)]
    pub follow: bool,
    /// One JSON object per line (the feed's entries) instead of columns
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("mode").args(["regex", "fixed_strings"])))]
pub struct SearchArgs {
    /// The user
    #[arg(long, short, required_unless_present = "tool_definition")]
    pub user: Option<String>,
    /// What to find
    #[arg(required_unless_present = "tool_definition")]
    pub query: Option<String>,
    /// Print the `memory_search` tool's definition (name, description, input_schema) as JSON,
    /// as the SDK adapters and MCP offer it, and search nothing
    #[arg(long, exclusive = true)]
    pub tool_definition: bool,
    /// The query is a regular expression (ripgrep's syntax)
    #[arg(long, short = 'e')]
    pub regex: bool,
    /// The query is a literal string
    #[arg(long, short = 'F')]
    pub fixed_strings: bool,
    /// With --regex or --fixed-strings: match letters of either case (ranked search always does)
    #[arg(long, short = 'i')]
    pub ignore_case: bool,
    /// Only the file, or the files below the directory, at this path (/memories/...)
    #[arg(long, value_name = "PATH")]
    pub path_prefix: Option<String>,
    /// Lines of context before and after each match
    #[arg(long, short = 'C', value_name = "N", default_value_t = 0)]
    pub context: usize,
    /// The most memories (ranked; default 10) or matching lines (default 50) to show
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
    /// JSON (as the HTTP server answers) instead of text
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ExpireArgs {
    /// List what would be deleted, delete nothing
    #[arg(long)]
    pub dry_run: bool,
}

#[derive(Debug, Args)]
pub struct ExecArgs {
    /// The user whose /memories the commands act on
    #[arg(long, short)]
    pub user: String,
    /// The session the versions written are recorded as made by [default: exec:<process id>]
    #[arg(long, value_name = "NAME", value_parser = parse_session)]
    pub session: Option<String>,
}

/// A session name: 1 to 64 characters, no whitespace or control characters.
fn parse_session(text: &str) -> Result<String, String> {
    if text.is_empty() || text.chars().count() > 64 {
        return Err("a session name has 1 to 64 characters".into());
    }
    if text.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("a session name has no whitespace or control characters".into());
    }
    Ok(text.to_owned())
}

#[derive(Debug, Args)]
pub struct HistoryArgs {
    /// The user (memory store)
    #[arg(long, short)]
    pub user: String,
    /// A memory, e.g. /memories/notes.md (default: every version of the store, deleted
    /// memories' included)
    pub path: Option<String>,
    /// One JSON object per line instead of columns
    #[arg(long)]
    pub json: bool,
    /// With --json: each version's content too (`null` for a deletion or once redacted)
    #[arg(long, requires = "json")]
    pub content: bool,
}

#[derive(Debug, Args)]
pub struct VersionArgs {
    /// The user (memory store)
    #[arg(long, short)]
    pub user: String,
    /// The version's id, as `memkv history` shows it (memver_…)
    pub version: String,
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// A redb database whose journal (DB.journal) is damaged before commits that were
    /// acknowledged, which every open refuses: replay the intact records before the damage,
    /// keep the journal as DB.journal.damaged, and give up the commits from the damage on
    #[arg(long)]
    pub accept_journal_loss: bool,
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
    /// Whether the database is a PostgreSQL URL (no file to create, size or guard).
    pub fn is_url(&self) -> bool {
        self.db
            .as_ref()
            .and_then(|d| d.to_str())
            .is_some_and(memkv::storage::is_postgres_url)
    }

    /// Creates the directory of a database file if it is missing (nothing for a URL).
    pub fn create_db_dir(&self) -> Result<(), String> {
        if self.is_url() {
            return Ok(());
        }
        let path = self.db_path()?;
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            // Only its owner may list or enter a directory of memories, whatever the umask.
            let mut dir = std::fs::DirBuilder::new();
            dir.recursive(true);
            #[cfg(unix)]
            std::os::unix::fs::DirBuilderExt::mode(&mut dir, 0o700);
            dir.create(parent)
                .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
        }
        Ok(())
    }

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

    /// The keys file (keys by hash for a running server to import, and the keys of earlier
    /// versions): --keys, $MEMKV_KEYS, or the database path + `.keys`; none for a PostgreSQL
    /// URL without --keys (no path is ever derived from a URL, which may hold a password).
    pub fn keys_path(&self) -> Result<Option<PathBuf>, String> {
        if let Some(keys) = &self.keys {
            return Ok(Some(keys.clone()));
        }
        if self.is_url() {
            return Ok(None);
        }
        let mut name = self.db_path()?.into_os_string();
        name.push(".keys");
        Ok(Some(PathBuf::from(name)))
    }

    /// A store builder with the limits and policies given on the command line.
    pub fn builder(&self) -> DatabaseBuilder {
        let secrets: SecretPolicy = self.secrets.parse().expect("clap checked the value");
        let mut b = memkv::Database::builder()
            .max_file_bytes(self.max_file_bytes)
            .max_files(self.max_files)
            .max_bytes(self.max_bytes)
            .view_max_chars(self.view_max_chars)
            .secrets(secrets)
            .shared(self.shared)
            .access_granularity(self.access_granularity);
        if let Some(Bound(reserve)) = self.disk_reserve {
            b = b.disk_reserve(reserve.unwrap_or(0));
        }
        if let Some(Bound(Some(ttl))) = self.ttl {
            b = b.ttl(ttl);
        }
        for (user, ttl) in &self.user_ttl {
            b = b.user_ttl(user.clone(), *ttl);
        }
        b.retention(self.retention())
            .change_retention(self.change_retention())
    }

    /// The change log's retention given on the command line (each bound defaults to
    /// [`ChangeRetention::DEFAULT`]'s).
    pub fn change_retention(&self) -> ChangeRetention {
        let d = ChangeRetention::DEFAULT;
        ChangeRetention {
            max_age: self.changes_max_age.map_or(d.max_age, |b| b.0),
            max_entries: self.changes_max_entries.map_or(d.max_entries, |b| b.0),
        }
    }

    /// The history retention given on the command line (each bound defaults to
    /// [`Retention::DEFAULT`]'s).
    pub fn retention(&self) -> Retention {
        if self.no_history {
            return Retention::NONE;
        }
        let d = Retention::DEFAULT;
        Retention::new(
            self.history_max_age.map_or(d.max_age, |b| b.0),
            self.history_max_versions.map_or(d.max_versions, |b| b.0),
            self.history_max_bytes.map_or(d.max_bytes, |b| b.0),
        )
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

    #[test]
    fn durations() {
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("30d"), Ok(Duration::from_secs(30 * 86_400)));
        assert_eq!(parse_duration("2w"), Ok(Duration::from_secs(14 * 86_400)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("1h 30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("1y"), Ok(Duration::from_secs(31_557_600)));
        assert!(parse_duration("d").is_err());
        assert!(parse_duration("1 fortnight").is_err());
        assert!(parse_duration("-1s").is_err());
        assert!(parse_duration("99999999999999999999w").is_err());
        assert_eq!(parse_user_ttl("a=b=off"), Ok(("a=b".into(), None)));
        assert_eq!(
            parse_user_ttl("x@y=1h"),
            Ok(("x@y".into(), Some(Duration::from_secs(3600))))
        );
        assert!(parse_user_ttl("nobody").is_err());
        assert!(parse_user_ttl("=off").is_err());
        assert!(parse_user_ttl("=1h").is_err());
    }

    #[test]
    fn retention_flags() {
        let parse = |args: &[&str]| {
            Cli::try_parse_from([&["memkv"], args, &["stats"]].concat())
                .map(|c| c.global.retention())
        };
        assert_eq!(parse(&[]).unwrap(), Retention::DEFAULT);
        assert_eq!(parse(&["--no-history"]).unwrap(), Retention::NONE);
        assert_eq!(
            parse(&["--history-max-age", "off", "--history-max-versions", "7"]).unwrap(),
            Retention::new(None, Some(7), Retention::DEFAULT.max_bytes)
        );
        assert_eq!(
            parse(&["--history-max-age", "2d", "--history-max-bytes", "off"]).unwrap(),
            Retention::new(
                Some(Duration::from_secs(2 * 86_400)),
                Retention::DEFAULT.max_versions,
                None
            )
        );
        assert!(parse(&["--history-max-versions", "many"]).is_err());
        assert!(parse(&["--no-history", "--history-max-age", "1d"]).is_err());
        assert!(parse_session("a b").is_err());
        assert!(parse_session("").is_err());
        assert_eq!(parse_session("agent-7").unwrap(), "agent-7");
    }
}
