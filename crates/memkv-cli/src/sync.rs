//! `memkv sync`: keeps folders and stores identical ([`memkv_sync`] does the work; this turns
//! the command line and the config file's `[sync]` table and `[[sync.folder]]` tables into its
//! [`memkv_sync::Config`]s), and `memkv sync status`.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use clap::{Args, Subcommand};
use memkv_sync::{Config, Report};

use crate::Usage;
use crate::duration::parse_duration;

type Result<T = ()> = std::result::Result<T, Box<dyn std::error::Error>>;

/// The config file's folders: the file, and its `[[sync.folder]]` tables as written.
#[derive(Debug, Clone, Copy)]
pub struct FileFolders<'a> {
    pub path: Option<&'a Path>,
    pub sync_folders: &'a [toml::Table],
}

/// The environment variable holding the API key.
const KEY_ENV: &str = "MEMKV_API_KEY";

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct SyncArgs {
    #[command(subcommand)]
    pub command: Option<SyncCommand>,
    /// The folder to keep in step with --store (without it: every [[sync.folder]] of the
    /// config file)
    pub dir: Option<PathBuf>,
    /// The server: memkv serve, or any server of the memory-stores API
    #[arg(long, value_name = "URL")]
    pub url: Option<String>,
    /// The store's id (memstore_… or a memkv user id)
    #[arg(long, value_name = "ID")]
    pub store: Option<String>,
    /// A file holding the API key (else $MEMKV_API_KEY; never an argument, which ps shows)
    #[arg(long, value_name = "FILE")]
    pub key_file: Option<PathBuf>,
    /// The sync's own state (default: under $XDG_STATE_HOME or ~/.local/state, outside the
    /// folder)
    #[arg(long, value_name = "DIR")]
    pub state: Option<PathBuf>,
    /// Reconcile once and exit (for cron and scripts)
    #[arg(long)]
    pub once: bool,
    /// This machine's name in conflict copies' names (default: the host name)
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// How long a file must be left alone before it is uploaded
    #[arg(long, value_name = "DURATION", default_value = "100ms", value_parser = parse_duration)]
    pub debounce: Duration,
    /// How often the whole folder is scanned besides the watcher
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = parse_duration)]
    pub rescan_interval: Duration,
    /// How often a server without memkv's change feed is listed
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub poll_interval: Duration,
    /// Files larger than this many bytes are not synced (reported in `memkv sync status`)
    #[arg(long, value_name = "BYTES", default_value_t = 1 << 20)]
    pub max_file_size: u64,
}

#[derive(Debug, Subcommand)]
pub enum SyncCommand {
    /// Per folder: last sync, what is pending, conflicts, files not synced, errors
    Status(StatusArgs),
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The folder (without it: every [[sync.folder]] of the config file)
    pub dir: Option<PathBuf>,
    /// Its sync's state folder, if not the default
    #[arg(long, value_name = "DIR")]
    pub state: Option<PathBuf>,
    /// With --state omitted: the server the folder syncs with (with --store, it names the
    /// default state folder)
    #[arg(long, value_name = "URL")]
    pub url: Option<String>,
    /// With --state omitted: the store the folder syncs with
    #[arg(long, value_name = "ID")]
    pub store: Option<String>,
    /// The report as JSON
    #[arg(long)]
    pub json: bool,
}

/// One folder as the command line or a `[[sync.folder]]` table gives it.
#[derive(Debug, Clone)]
struct Folder {
    dir: PathBuf,
    url: Option<String>,
    store: Option<String>,
    key_file: Option<PathBuf>,
    state: Option<PathBuf>,
}

fn folders(
    args_dir: Option<&Path>,
    url: Option<&str>,
    store: Option<&str>,
    key_file: Option<&Path>,
    state: Option<&Path>,
    loaded: &FileFolders,
) -> Result<Vec<Folder>> {
    let key_file = key_file.map(expand_path);
    let key_file = key_file.as_deref();
    if let Some(dir) = args_dir {
        return Ok(vec![Folder {
            dir: expand_path(dir),
            url: url.map(str::to_owned),
            store: store.map(str::to_owned),
            key_file: key_file.map(Path::to_owned),
            state: state.map(expand_path),
        }]);
    }
    if state.is_some() && loaded.sync_folders.len() > 1 {
        return Err(Usage(
            "--state names one folder's state: give each [[sync.folder]] a state of its own"
                .to_owned(),
        )
        .into());
    }
    if loaded.sync_folders.is_empty() {
        return Err(Usage(
            "memkv sync needs a folder (memkv sync DIR --url URL --store ID), or [[sync.folder]] tables in the config file".to_owned(),
        )
        .into());
    }
    let file = loaded.path.unwrap_or(Path::new("the config file"));
    loaded
        .sync_folders
        .iter()
        .map(|t| {
            let text = |k: &str| -> Result<Option<String>> {
                match t.get(k).or_else(|| t.get(&k.replace('-', "_"))) {
                    None => Ok(None),
                    Some(toml::Value::String(s)) => Ok(Some(s.clone())),
                    Some(_) => Err(format!("{}: sync.folder's {k} must be a string", file.display()).into()),
                }
            };
            for k in t.keys() {
                if !matches!(k.replace('_', "-").as_str(), "dir" | "url" | "store" | "key-file" | "state") {
                    return Err(format!(
                        "{}: unknown key {k:?} in [[sync.folder]] (dir, url, store, key-file, state)",
                        file.display()
                    )
                    .into());
                }
            }
            let dir = text("dir")?.ok_or_else(|| format!("{}: a [[sync.folder]] has no dir", file.display()))?;
            Ok(Folder {
                dir: expand(&dir),
                url: text("url")?.or_else(|| url.map(str::to_owned)),
                store: text("store")?.or_else(|| store.map(str::to_owned)),
                key_file: text("key-file")?.map(|p| expand(&p)).or_else(|| key_file.map(Path::to_owned)),
                state: text("state")?
                    .map(|p| expand(&p))
                    .or_else(|| state.map(expand_path)),
            })
        })
        .collect()
}

/// A path given as an option or in `[sync]`, `~/` expanded as in a folder's table.
fn expand_path(path: &Path) -> PathBuf {
    path.to_str().map_or_else(|| path.to_owned(), expand)
}

/// `~/x` as the home folder's `x`.
fn expand(path: &str) -> PathBuf {
    match (path.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => PathBuf::from(home).join(rest),
        _ => PathBuf::from(path),
    }
}

fn key(key_file: Option<&Path>) -> Result<String> {
    let key = match key_file {
        Some(f) => std::fs::read_to_string(f)
            .map_err(|e| format!("{}: {e}", f.display()))?
            .trim()
            .to_owned(),
        None => std::env::var(KEY_ENV).unwrap_or_default(),
    };
    if key.is_empty() {
        return Err(Usage(format!(
            "memkv sync needs an API key: --key-file FILE or ${KEY_ENV}"
        ))
        .into());
    }
    Ok(key)
}

fn config(f: &Folder, args: &SyncArgs) -> Result<Config> {
    let url = f
        .url
        .as_deref()
        .ok_or_else(|| Usage(format!("{}: no --url", f.dir.display())))?;
    let store = f
        .store
        .as_deref()
        .ok_or_else(|| Usage(format!("{}: no --store", f.dir.display())))?;
    let dir = f
        .dir
        .canonicalize()
        .map_err(|e| format!("{}: {e}", f.dir.display()))?;
    let mut cfg = Config::new(&dir, url, store, &key(f.key_file.as_deref())?);
    if let Some(state) = &f.state {
        cfg.state = state.clone();
    }
    if let Some(name) = &args.name {
        cfg.host = name.clone();
    }
    cfg.debounce = args.debounce;
    cfg.rescan = args.rescan_interval.max(Duration::from_secs(1));
    cfg.poll = args.poll_interval.max(Duration::from_secs(1));
    cfg.max_file_bytes = args.max_file_size;
    Ok(cfg)
}

pub fn run(args: &SyncArgs, loaded: &FileFolders) -> Result {
    if let Some(SyncCommand::Status(s)) = &args.command {
        return status(s, args, loaded);
    }
    let list = folders(
        args.dir.as_deref(),
        args.url.as_deref(),
        args.store.as_deref(),
        args.key_file.as_deref(),
        args.state.as_deref(),
        loaded,
    )?;
    let configs = list
        .iter()
        .map(|f| config(f, args))
        .collect::<Result<Vec<_>>>()?;
    crate::logs::to_stderr("info");
    if args.once {
        let mut failed = 0;
        for cfg in configs {
            let folder = cfg.folder.clone();
            match memkv_sync::once(cfg) {
                Ok(r) => println!("{}", summary(&r)),
                Err(e) => {
                    note!("memkv sync: {}: {e}", folder.display());
                    failed += 1;
                }
            }
        }
        return if failed == 0 {
            Ok(())
        } else {
            Err(format!("{failed} folder(s) failed").into())
        };
    }
    // The process runs until it is stopped (a signal ends it; the state is safe at every step).
    let stop = Box::leak(Box::new(AtomicBool::new(false)));
    let stop: &'static AtomicBool = stop;
    let syncs = configs
        .into_iter()
        .map(memkv_sync::Sync::open)
        .collect::<std::result::Result<Vec<_>, _>>()?;
    let handles: Vec<_> = syncs
        .into_iter()
        .map(|s| std::thread::spawn(move || s.run(stop)))
        .collect();
    for h in handles {
        match h.join() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(e.into()),
            Err(_) => return Err("a folder's sync panicked".into()),
        }
    }
    Ok(())
}

fn summary(r: &Report) -> String {
    format!(
        "{}: in step with {} at {} ({} uploaded, {} downloaded, {} conflicts, {} files not synced)",
        r.folder.display(),
        r.store,
        r.url,
        r.uploads,
        r.downloads,
        r.conflicts.len(),
        r.skipped.len()
    )
}

fn status(s: &StatusArgs, args: &SyncArgs, loaded: &FileFolders) -> Result {
    let url = s.url.as_deref().or(args.url.as_deref());
    let store = s.store.as_deref().or(args.store.as_deref());
    let list = folders(
        s.dir.as_deref(),
        url,
        store,
        None,
        s.state.as_deref(),
        loaded,
    )?;
    let mut out = String::new();
    let mut reports = Vec::new();
    for f in &list {
        let state = match &f.state {
            Some(st) => st.clone(),
            None => {
                let (Some(url), Some(store)) = (&f.url, &f.store) else {
                    return Err(Usage(format!(
                        "{}: give --state, or --url and --store",
                        f.dir.display()
                    ))
                    .into());
                };
                let dir = f
                    .dir
                    .canonicalize()
                    .map_err(|e| format!("{}: {e}", f.dir.display()))?;
                memkv_sync::default_state_dir(&dir, url, store)
            }
        };
        let mut r = Report::load(&state)?;
        if r.running && !alive(r.pid) {
            r.running = false;
        }
        out.push_str(&crate::text::safe_lines(&describe(&r)));
        reports.push(r);
    }
    if s.json {
        println!("{}", serde_json::to_string_pretty(&reports)?);
    } else {
        print!("{out}");
    }
    Ok(())
}

fn describe(r: &Report) -> String {
    let mut s = format!("{}\n", r.folder.display());
    s.push_str(&format!("  store      {} at {}\n", r.store, r.url));
    let state = match (r.running, r.online) {
        (false, _) => "not running".to_owned(),
        (true, true) => format!("running (pid {}), following the {}", r.pid, r.following),
        (true, false) => format!("running (pid {}), the server is unreachable", r.pid),
    };
    s.push_str(&format!("  state      {state}\n"));
    s.push_str(&format!(
        "  last sync  {}\n",
        r.last_sync.as_deref().unwrap_or("never")
    ));
    s.push_str(&format!("  pending    {}\n", r.pending));
    s.push_str(&format!("  conflicts  {}\n", r.conflicts.len()));
    for c in &r.conflicts {
        s.push_str(&format!("    {} {} -> {}\n", c.at, c.path, c.copy));
    }
    s.push_str(&format!(
        "  not synced {}\n",
        r.skipped.len() + r.problems.len()
    ));
    for l in r.skipped.iter().chain(&r.problems) {
        s.push_str(&format!("    {}: {}\n", l.path, l.why));
    }
    s.push_str(&format!("  errors     {}\n", r.errors.len()));
    for e in r.errors.iter().rev().take(5) {
        s.push_str(&format!("    {} {}\n", e.at, e.what));
    }
    s
}

/// Whether process `pid` still runs.
fn alive(pid: u32) -> bool {
    #[cfg(unix)]
    {
        Path::new(&format!("/proc/{pid}")).exists() || {
            // SAFETY: signal 0 only checks that the process exists.
            unsafe { libc::kill(pid as i32, 0) == 0 }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = pid;
        true
    }
}
