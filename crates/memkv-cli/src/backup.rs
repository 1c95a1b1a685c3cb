//! `export`, `import` and `expire`: long operations, with progress on a terminal.

use std::fs::{self, File};
use std::io::{self, IsTerminal, Write};

use indicatif::{ProgressBar, ProgressStyle};
use memkv::{Conflict, Progress, Summary};

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
    if s.skipped > 0 {
        line.push_str(&format!("; skipped {} existing", s.skipped));
    }
    if s.replaced > 0 {
        line.push_str(&format!("; replaced {}", s.replaced));
    }
    line
}

pub fn export(global: &Global, args: &ExportArgs) -> Result {
    let store = open_read_only(global)?;
    let bar = Bar::new();
    let summary = if let Some(dir) = &args.to_dir {
        let [user] = args.user.as_slice() else {
            return Err("--to-dir exports one user's tree: give exactly one --user".into());
        };
        store.export_dir(user, dir, &mut |p| bar.update(p))?
    } else if let Some(path) = &args.output {
        // Write beside the target and rename when complete: a failed export leaves no half file.
        let tmp = path.with_extension("memkv-export-partial");
        let result = File::create(&tmp)
            .map_err(|e| format!("{}: {e}", tmp.display()).into())
            .and_then(|f| {
                let s = store.export(&args.user, &f, &mut |p| bar.update(p))?;
                f.sync_all()?;
                Ok::<_, Box<dyn std::error::Error>>(s)
            });
        match result {
            Ok(s) => {
                fs::rename(&tmp, path)?;
                s
            }
            Err(e) => {
                let _ = fs::remove_file(&tmp);
                return Err(e);
            }
        }
    } else {
        store.export(&args.user, io::stdout().lock(), &mut |p| bar.update(p))?
    };
    bar.finish();
    eprintln!("{}", summary_line("exported", &summary));
    Ok(())
}

pub fn import(global: &Global, args: &ImportArgs) -> Result {
    let conflict = if args.replace {
        Conflict::Replace
    } else if args.skip_existing {
        Conflict::Skip
    } else {
        Conflict::Refuse
    };
    let path = global.db_path()?;
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        fs::create_dir_all(parent)?;
    }
    let store = global.builder().open(&path)?;
    let bar = Bar::new();
    let summary = match (&args.file, &args.from_dir) {
        (Some(file), _) if file.as_os_str() == "-" => {
            // The import reads its input twice (verify, then apply): keep stdin in a file.
            let spool = Spool::from_stdin()?;
            store.import(&spool.0, conflict, &mut |p| bar.update(p))?
        }
        (Some(file), _) => store.import(file, conflict, &mut |p| bar.update(p))?,
        (None, Some(dir)) => {
            let user = args.user.as_deref().expect("clap requires --user");
            let (summary, skipped) =
                store.import_dir(dir, user, args.strict, conflict, &mut |p| bar.update(p))?;
            bar.finish();
            let mut err = io::stderr().lock();
            for s in &skipped {
                writeln!(err, "skipped {}: {}", s.path.display(), s.reason)?;
            }
            summary
        }
        (None, None) => unreachable!("clap requires a source"),
    };
    bar.finish();
    eprintln!("{}", summary_line("imported", &summary));
    Ok(())
}

/// Standard input copied to a private temporary file, removed when dropped.
struct Spool(std::path::PathBuf);

impl Spool {
    fn from_stdin() -> Result<Self> {
        use std::os::unix::fs::OpenOptionsExt;
        let path = std::env::temp_dir().join(format!(
            "memkv-import-{}-{}.jsonl",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos())
        ));
        let mut file = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        let spool = Spool(path);
        io::copy(&mut io::stdin().lock(), &mut file)?;
        Ok(spool)
    }
}

impl Drop for Spool {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.0);
    }
}

pub fn expire(global: &Global, args: &ExpireArgs) -> Result {
    let store = open_for_writing(global)?;
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
    let bytes: u64 = expired.iter().map(|f| f.size).sum();
    let verb = if args.dry_run {
        "would delete"
    } else {
        "deleted"
    };
    eprintln!("{verb} {} expired files, {bytes} bytes", expired.len());
    Ok(())
}
