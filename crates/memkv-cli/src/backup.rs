//! `export`, `import` and `expire`: long operations, with progress on a terminal.

use std::fs;
use std::io::{self, IsTerminal, Write};

use indicatif::{ProgressBar, ProgressStyle};
use memkv::{Conflict, ExportFile, ImportSource, Progress, Summary};

use crate::Usage;
use crate::admin::{open_for_writing, open_read_only};
use crate::args::{ExpireArgs, ExportArgs, Global, ImportArgs};

type Result<T = ()> = std::result::Result<T, Box<dyn std::error::Error>>;

/// A progress bar on stderr when it is a terminal; nothing otherwise.
struct Bar(Option<ProgressBar>);

impl Bar {
    fn new() -> Self {
        Bar(io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new(0);
            bar.set_style(
                ProgressStyle::with_template(
                    "{msg:>10} [{bar:40}] {pos}/{len} files, {elapsed} elapsed, eta {eta}",
                )
                .expect("the template is valid")
                .progress_chars("=> "),
            );
            bar
        }))
    }

    fn update(&self, p: Progress) {
        if let Some(bar) = &self.0 {
            if bar.message() != p.phase {
                bar.set_message(p.phase);
                bar.set_position(0);
            }
            bar.set_length(p.total.unwrap_or(p.done));
            bar.set_position(p.done);
        }
    }

    fn finish(&self) {
        if let Some(bar) = &self.0 {
            bar.finish_and_clear();
        }
    }
}

fn summary_line(verb: &str, s: &Summary) -> String {
    let mut line = format!(
        "{verb} {} files of {} users, {} bytes",
        s.files, s.users, s.bytes
    );
    if s.versions > 0 {
        line.push_str(&format!(", {} versions", s.versions));
    }
    if s.skipped > 0 {
        line.push_str(&format!("; skipped {} existing", s.skipped));
    }
    if s.replaced > 0 {
        line.push_str(&format!("; replaced {}", s.replaced));
    }
    if s.merged > 0 {
        line.push_str(&format!(
            "; merged into {} existing stores as new versions (the export's ids and history of them not imported)",
            s.merged
        ));
    }
    line
}

pub fn export(global: &Global, args: &ExportArgs) -> Result {
    if let (Some(url), Some(key)) = (&args.url, &args.api_key) {
        return crate::remote::export(url, key, args);
    }
    if args.to_dir.is_some() && args.user.len() != 1 {
        return Err(
            Usage("--to-dir exports one user's tree: give exactly one --user".into()).into(),
        );
    }
    // On PostgreSQL the export first numbers the change log's entries committed since the
    // last look, so that its header's `seq` covers its snapshot: a writable open.
    let store = if global.is_url() {
        crate::admin::open_for_writing(global)?
    } else {
        open_read_only(global)?
    };
    let bar = Bar::new();
    let summary = if let Some(dir) = &args.to_dir {
        store.export_dir(&args.user[0], dir, &mut |p| bar.update(p))?
    } else if let Some(path) = &args.output {
        // A private temporary file beside the target, renamed over it once complete: a failed
        // export leaves no half file, and never overwrites the database itself.
        let db = (!global.is_url()).then(|| global.db_path()).transpose()?;
        let mut file = ExportFile::create(path, db.as_deref())?;
        let summary = match args.since {
            Some(since) => {
                store.export_since(since, &args.user, &mut file, &mut |p| bar.update(p))?
            }
            None => store.export(&args.user, &mut file, &mut |p| bar.update(p))?,
        };
        file.finish()?;
        summary
    } else {
        let out = io::stdout().lock();
        match args.since {
            Some(since) => store.export_since(since, &args.user, out, &mut |p| bar.update(p))?,
            None => store.export(&args.user, out, &mut |p| bar.update(p))?,
        }
    };
    bar.finish();
    note!("{}", summary_line("exported", &summary));
    Ok(())
}

pub fn import(global: &Global, args: &ImportArgs) -> Result {
    if let (Some(url), Some(key)) = (&args.url, &args.api_key) {
        return crate::remote::import(url, key, args);
    }
    let conflict = if args.replace {
        Conflict::Replace
    } else if args.skip_existing {
        Conflict::Skip
    } else {
        Conflict::Refuse
    };
    let dir_user = match (&args.from_dir, args.user.as_slice()) {
        (Some(_), [user]) => Some(user.as_str()),
        (Some(_), _) => {
            return Err(Usage(
                "--from-dir imports one user's tree: give exactly one --user".into(),
            )
            .into());
        }
        (None, _) => None,
    };
    // The limits and policies of the command line, on an empty store: for the line cap, and
    // for a dry run when the database does not exist yet.
    let scratch = global.builder().in_memory()?;
    // Read a pipe, a process substitution or standard input to its end before the database is
    // opened: nothing waits on a writer while the database is locked.
    let mut source = match &args.file {
        Some(file) if file.as_os_str() == "-" => Some(ImportSource::stdin(scratch.limits())?),
        Some(file) => Some(ImportSource::open(file, scratch.limits())?),
        None => None,
    };
    let path = global.db_path()?;
    let missing = if global.is_url() {
        // No memkv tables in the schema yet (a read-only open never creates them).
        matches!(
            global.builder().open_read_only(&path),
            Err(memkv::Error::NotMemkv { .. })
        )
    } else {
        fs::symlink_metadata(&path).is_err_and(|e| e.kind() == io::ErrorKind::NotFound)
    };
    if missing {
        // A refused import must not leave a new database behind (a file and its folders, or
        // memkv's tables): check it all against an empty store first.
        match (&mut source, &args.from_dir, dir_user) {
            (Some(source), _, _) => {
                scratch.verify_import(source, &args.user, &mut |_| {})?;
            }
            (None, Some(dir), Some(user)) => {
                scratch.import_dir(dir, user, args.strict, conflict, &mut |_| {})?;
            }
            _ => unreachable!("clap requires a source"),
        }
        if let Some(parent) = path
            .parent()
            .filter(|p| !global.is_url() && !p.as_os_str().is_empty())
        {
            fs::create_dir_all(parent)
                .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
        }
    }
    drop(scratch);
    let store = global.builder().open(&path)?;
    let bar = Bar::new();
    let summary = match (&mut source, &args.from_dir, dir_user) {
        (Some(source), _, _) => {
            store.import_from(source, &args.user, conflict, &mut |p| bar.update(p))?
        }
        (None, Some(dir), Some(user)) => {
            let (summary, skipped) =
                store.import_dir(dir, user, args.strict, conflict, &mut |p| bar.update(p))?;
            bar.finish();
            for s in &skipped {
                note!("skipped {s}");
            }
            summary
        }
        _ => unreachable!("clap requires a source"),
    };
    bar.finish();
    note!("{}", summary_line("imported", &summary));
    Ok(())
}

pub fn expire(global: &Global, args: &ExpireArgs) -> Result {
    // A dry run changes nothing, not even the format of an older database.
    let store = if args.dry_run {
        open_read_only(global)?
    } else {
        open_for_writing(global)?
    };
    let no_ttl = global.ttl.is_none_or(|b| b.0.is_none())
        && global.user_ttl.iter().all(|(_, ttl)| ttl.is_none())
        && store
            .stores_with_settings()
            .iter()
            .all(|(_, s)| s.ttl.is_none_or(|t| t.is_none()));
    if no_ttl {
        return Err(Usage(
            "nothing can expire without a time-to-live: give --ttl DURATION or --user-ttl NAME=DURATION, or a store its own (memkv settings --user NAME --ttl DURATION)".into(),
        )
        .into());
    }
    let expired = store.expire(args.dry_run)?;
    let mut out = io::stdout().lock();
    for f in &expired {
        writeln!(
            out,
            "{:>8}  {}  {}  {}",
            f.size,
            memkv::utc(f.last_used_ms),
            f.user,
            f.path
        )?;
    }
    out.flush()?;
    let bytes: u64 = expired.iter().map(|f| f.size).sum();
    let verb = if args.dry_run {
        "would delete"
    } else {
        "deleted"
    };
    note!("{verb} {} expired files, {bytes} bytes", expired.len());
    Ok(())
}

pub fn compact(global: &Global) -> Result {
    if global.is_url() {
        return Err(Box::new(Usage(
            "compact rewrites a redb file; on PostgreSQL, VACUUM FULL memkv_entries, memkv_changes (as their owner) does the same".into(),
        )));
    }
    let path = global.db_path()?;
    let done = memkv::storage::redb::RedbBackend::compact(&path)?;
    note!(
        "compacted {}: {} bytes, from {}",
        path.display(),
        done.after,
        done.before
    );
    Ok(())
}

pub fn prune(global: &Global) -> Result {
    let store = open_for_writing(global)?;
    let pruned = store.prune_history()?;
    let entries = store.trim_changes()?;
    let mut out = io::stdout().lock();
    for p in &pruned {
        writeln!(out, "{:>8}  {:>10}  {}", p.versions, p.bytes, p.user)?;
    }
    out.flush()?;
    let versions: u64 = pruned.iter().map(|p| p.versions).sum();
    let bytes: u64 = pruned.iter().map(|p| p.bytes).sum();
    note!(
        "pruned {versions} versions, {bytes} bytes, from {} stores; {entries} change-log entries",
        pruned.len()
    );
    Ok(())
}
