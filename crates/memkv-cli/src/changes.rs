//! `memkv changes`: the change log, as columns or as the feed's JSON entries, once or
//! following it.

use std::io::{self, Write};
use std::time::Duration;

use memkv::{ChangeEntry, Database};

use crate::admin::open_read_only;
use crate::args::{ChangesArgs, Global};

type Result<T = ()> = std::result::Result<T, Box<dyn std::error::Error>>;

/// How long `--follow` waits between looks at a log that had nothing new.
const FOLLOW_POLL: Duration = Duration::from_millis(100);

pub fn changes(global: &Global, args: &ChangesArgs) -> Result {
    let db = open_read_only(global)?;
    let mut out = io::BufWriter::new(io::stdout().lock());
    let mut after = args.after;
    let mut left = args.limit.unwrap_or(u64::MAX);
    while left > 0 {
        let want = usize::try_from(left.min(1000)).unwrap_or(1000);
        let page = db.changes(after, want, args.user.as_deref())?;
        for entry in &page.entries {
            print(&mut out, entry, args.json)?;
        }
        left -= page.entries.len() as u64;
        let moved = page.next_after != after;
        after = page.next_after;
        if !moved {
            if !args.follow {
                break;
            }
            out.flush()?;
            wait(&db, after)?;
        }
    }
    out.flush()?;
    Ok(())
}

/// Until the log has an entry after `after` (polling: another process writes it).
fn wait(db: &Database, after: u64) -> Result {
    while db.last_change()? <= after {
        std::thread::sleep(FOLLOW_POLL);
    }
    Ok(())
}

fn print(out: &mut impl Write, entry: &ChangeEntry, json: bool) -> Result {
    if json {
        serde_json::to_writer(&mut *out, &entry.to_json())?;
        out.write_all(b"\n")?;
        return Ok(());
    }
    let c = &entry.change;
    let path = match (&c.path, &c.previous_path) {
        (Some(path), Some(previous)) => format!("{path} <- {previous}"),
        (Some(path), None) => path.clone(),
        (None, _) => c.version.map(|v| v.to_string()).unwrap_or_default(),
    };
    writeln!(
        out,
        "{:>8}  {}  {:<16}  {}  {}",
        entry.seq,
        memkv::utc(c.at_ms),
        c.kind.event_type(),
        c.store,
        path
    )?;
    Ok(())
}
