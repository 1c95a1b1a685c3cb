//! Operator commands: `users`, `tree`, `cat`, `init`, `stats`, `check`.

use std::io::{self, Write};

use memkv::Database;

use crate::args::{CatArgs, CheckArgs, Global, SettingsArgs, UserArg};

type Result<T = ()> = std::result::Result<T, Box<dyn std::error::Error>>;

/// Opens the database read-only: operators can look while `memkv exec` runs.
pub fn open_read_only(global: &Global) -> Result<Database> {
    Ok(global.builder().open_read_only(global.db_path()?)?)
}

/// Opens an existing database for writing.
pub fn open_for_writing(global: &Global) -> Result<Database> {
    Ok(global.builder().open_existing(global.db_path()?)?)
}

pub fn users(global: &Global) -> Result {
    let store = open_read_only(global)?;
    let mut out = io::stdout().lock();
    writeln!(out, "{:>8}  {:>12}  USER", "FILES", "BYTES")?;
    for u in store.users()? {
        writeln!(out, "{:>8}  {:>12}  {}", u.files, u.bytes, u.user)?;
    }
    Ok(())
}

pub fn tree(global: &Global, args: &UserArg) -> Result {
    let store = open_read_only(global)?;
    let user = store.user(&args.user)?;
    let files = user.files()?;
    if files.is_empty() && store.store_info(&args.user)?.is_none() {
        // Nothing printed would look like an empty store: say there is none.
        return Err(format!(
            "no user {:?} in {}: it has no files and no store record (`memkv users` lists them)",
            args.user,
            store.location()
        )
        .into());
    }
    let mut out = io::stdout().lock();
    for f in files {
        writeln!(
            out,
            "{:>8}  {}  {}",
            f.size,
            memkv::utc(f.modified_ms),
            f.path
        )?;
    }
    Ok(())
}

pub fn cat(global: &Global, args: &CatArgs) -> Result {
    let store = open_read_only(global)?;
    let user = store.user(&args.user)?;
    match user.read_file(&args.path)? {
        Some(content) => {
            io::stdout().lock().write_all(content.as_bytes())?;
            Ok(())
        }
        None => {
            let dir = memkv::MemoryPath::parse(&args.path).is_ok_and(|p| {
                p.is_root()
                    || user
                        .files()
                        .is_ok_and(|files| files.iter().any(|f| f.path.ancestors().any(|a| a == p)))
            });
            let (path, user) = (&args.path, &args.user);
            Err(if dir {
                format!(
                    "{path}: a directory of user {user:?}, not a file (list it with `memkv tree`)"
                )
            } else {
                format!("{path}: no such file for user {user:?}")
            }
            .into())
        }
    }
}

/// `memkv init`: creates the database, or checks an existing one.
pub fn init(global: &Global) -> Result {
    let path = global.db_path()?;
    global.create_db_dir()?;
    let store = global.builder().open(&path)?;
    writeln!(io::stdout().lock(), "ready: {}", store.location())?;
    Ok(())
}

pub fn stats(global: &Global) -> Result {
    let store = open_read_only(global)?;
    let mut out = io::stdout().lock();
    if global.is_url() {
        // The location, never the URL as given: it may hold a password.
        writeln!(out, "database {}", store.location())?;
    } else {
        let path = global.db_path()?;
        let size = std::fs::metadata(&path)?.len();
        writeln!(out, "database {} ({size} bytes)", path.display())?;
    }
    writeln!(
        out,
        "{:>8}  {:>12}  {:<20}  {:>8}  {:>12}  USER",
        "FILES", "BYTES", "LAST WRITE", "EXPIRED", "EXP. BYTES"
    )?;
    for u in store.users()? {
        writeln!(
            out,
            "{:>8}  {:>12}  {:<20}  {:>8}  {:>12}  {}",
            u.files,
            u.bytes,
            memkv::utc(u.last_write_ms),
            u.expired_files,
            u.expired_bytes,
            u.user
        )?;
    }
    // Every store with a record, those whose memories are all deleted included.
    writeln!(
        out,
        "{:>8}  {:>12}  {:>8}  {:>12}  {:<20}  STORE (HISTORY)",
        "VERSIONS", "BYTES", "PRUNED", "PR. BYTES", "OLDEST"
    )?;
    let mut after: Option<String> = None;
    loop {
        let (page, more) = store.list_stores(true, after.as_deref(), 1000)?;
        for s in &page {
            let h = s.history;
            let oldest = if h.versions == 0 {
                "-".to_owned()
            } else {
                memkv::utc(h.oldest_ms)
            };
            let archived = if s.archived_ms.is_some() {
                " (archived)"
            } else {
                ""
            };
            writeln!(
                out,
                "{:>8}  {:>12}  {:>8}  {:>12}  {:<20}  {}{archived}",
                h.versions, h.bytes, h.pruned_versions, h.pruned_bytes, oldest, s.id
            )?;
        }
        match page.last() {
            Some(last) if more => after = Some(last.id.clone()),
            _ => break,
        }
    }
    Ok(())
}

pub fn check(global: &Global, args: &CheckArgs) -> Result {
    if args.accept_journal_loss {
        let path = global.db_path()?;
        if memkv::storage::is_postgres_url(&path.to_string_lossy()) {
            return Err(
                "--accept-journal-loss is for a redb file; PostgreSQL keeps no journal".into(),
            );
        }
        let loss = memkv::storage::redb::RedbBackend::accept_journal_loss(&path)?;
        match (&loss.damaged_at, &loss.kept_as) {
            (Some(offset), Some(kept)) => eprintln!(
                "the journal was damaged at byte {offset}: {} intact commit(s) before it replayed, every commit from there on given up; the journal is kept as {}",
                loss.replayed,
                kept.display()
            ),
            _ => eprintln!(
                "the journal was not damaged: {} commit(s) replayed, nothing given up",
                loss.replayed
            ),
        }
    }
    let store = open_read_only(global)?;
    let problems = store.check()?;
    let mut out = io::stdout().lock();
    for (user, problem) in &problems {
        if user.is_empty() {
            writeln!(out, "{}", crate::text::safe(problem))?; // the file itself
        } else {
            writeln!(out, "{user}: {}", crate::text::safe(problem))?;
        }
    }
    if problems.is_empty() {
        writeln!(out, "ok: every invariant holds")?;
        Ok(())
    } else {
        Err(format!("{} problem(s) found", problems.len()).into())
    }
}

/// `memkv settings`: prints a store's settings; the store options given on the command line
/// (not by the environment or a default) become the store's own, `--reset` ones go back to the
/// defaults.
pub fn settings(global: &Global, args: &SettingsArgs, matches: &clap::ArgMatches) -> Result {
    let given = |id: &str| {
        matches
            .subcommand_matches("settings")
            .and_then(|m| m.value_source(id))
            == Some(clap::parser::ValueSource::CommandLine)
    };
    let mut change = memkv::StoreSettings::default();
    if given("max_files") {
        change.max_files = Some(global.max_files);
    }
    if given("max_bytes") {
        change.max_bytes = Some(global.max_bytes);
    }
    if given("ttl") {
        change.ttl = global.ttl.map(|b| b.0);
    }
    if given("history_max_age") {
        change.history_max_age = global.history_max_age.map(|b| b.0);
    }
    if given("history_max_versions") {
        change.history_max_versions = global.history_max_versions.map(|b| b.0);
    }
    if given("history_max_bytes") {
        change.history_max_bytes = global.history_max_bytes.map(|b| b.0);
    }
    if given("secrets") {
        change.secrets = Some(global.secrets.parse().expect("clap checked the value"));
    }
    let reset: Vec<&str> = args.reset.iter().map(String::as_str).collect();
    let changing = !change.is_default() || !reset.is_empty();
    let store = if changing {
        open_for_writing(global)?
    } else {
        open_read_only(global)?
    };
    let own = if changing {
        store.update_store_settings(&args.user, &change, &reset)?
    } else {
        store.store_settings(&args.user)?
    };
    let effective = store.effective_settings(&args.user)?;
    let json = memkv_server::settings_json(&args.user, &own, &effective);
    let mut out = io::stdout().lock();
    if args.json {
        writeln!(out, "{json}")?;
        return Ok(());
    }
    for name in memkv::SETTINGS {
        let value = &json["effective"][name];
        let text = value
            .as_str()
            .map_or_else(|| value.to_string(), str::to_owned);
        let whose = if json["own"].get(name).is_some() {
            "the store's own"
        } else {
            "default"
        };
        writeln!(out, "{name:<22}  {text:<12}  {whose}")?;
    }
    Ok(())
}
