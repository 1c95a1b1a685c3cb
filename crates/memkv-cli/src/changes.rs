//! `memkv changes`: the change log, as columns or as the feed's JSON entries, once or
//! following it; `memkv webhooks`: the endpoints `memkv serve` delivers it to.

use std::io::{self, Write};
use std::time::Duration;

use memkv::{ChangeEntry, Database};

use crate::Usage;
use crate::admin::{open_for_writing, open_read_only};
use crate::args::{ChangesArgs, Global, WebhooksCommand};

type Result<T = ()> = std::result::Result<T, Box<dyn std::error::Error>>;

/// How long `--follow` waits between looks at a log that had nothing new.
const FOLLOW_POLL: Duration = Duration::from_millis(100);

pub fn changes(global: &Global, args: &ChangesArgs) -> Result {
    // On PostgreSQL a reader numbers the entries committed since the last look (writers do
    // not wait for it), which needs a writable open; a redb file is only looked at, beside
    // its writer.
    let db = if global.is_url() {
        open_for_writing(global)?
    } else {
        open_read_only(global)?
    };
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
    let row = format!(
        "{:>8}  {}  {:<16}  {}  {}",
        entry.seq,
        memkv::utc(c.at_ms),
        c.kind.event_type(),
        c.store,
        path
    );
    writeln!(out, "{}", crate::text::safe(&row))?;
    Ok(())
}

/// Which stores and events an endpoint gets, in words.
fn scope(hook: &memkv::Webhook) -> String {
    let stores = if hook.stores.is_empty() {
        "every store".to_owned()
    } else {
        format!("stores {}", hook.stores.join(", "))
    };
    let events = if hook.events.is_empty() {
        "every event".to_owned()
    } else {
        let names: Vec<&str> = hook.events.iter().map(|k| k.event_type()).collect();
        format!("events {}", names.join(", "))
    };
    let format = match hook.format {
        memkv::WebhookFormat::Memkv => "",
        memkv::WebhookFormat::Hosted => ", in the hosted API's format",
    };
    format!("{stores}, {events}{format}")
}

pub fn webhooks(global: &Global, command: &WebhooksCommand) -> Result {
    let mut out = io::stdout().lock();
    match command {
        WebhooksCommand::Add {
            url,
            store,
            event,
            format,
        } => {
            let kinds = memkv_server::webhooks::events(event).map_err(Usage)?;
            let format = memkv_server::webhooks::format(format).map_err(Usage)?;
            global.create_db_dir()?;
            let db = global.builder().open(global.db_path()?)?;
            let secret = memkv_server::webhooks::new_secret()?;
            let hook = db.add_webhook(url, &secret, store, &kinds, format)?;
            writeln!(
                out,
                "added {} for {}, from seq {} on; `memkv serve` delivers to {}. Its signing secret is shown only now:",
                hook.id,
                scope(&hook),
                hook.delivered + 1,
                hook.url
            )?;
            writeln!(out, "{secret}")?;
        }
        WebhooksCommand::List => {
            let db = open_read_only(global)?;
            // AFTER SEQ: deliveries go on after this entry of the change log (an endpoint added
            // starts at the log's end; it is not a count of deliveries).
            writeln!(
                out,
                "{:<19}  {:>9}  {:>8}  {:<20}  URL",
                "ID", "AFTER SEQ", "FAILURES", "NEXT ATTEMPT"
            )?;
            for h in db.webhooks()? {
                let next = if h.next_attempt_ms > 0 {
                    memkv::utc(h.next_attempt_ms)
                } else {
                    "-".to_owned()
                };
                let row = format!(
                    "{:<19}  {:>9}  {:>8}  {:<20}  {}",
                    h.id, h.delivered, h.failures, next, h.url
                );
                writeln!(out, "{}", crate::text::safe(&row))?;
                writeln!(out, "{:<19}  {}", "", scope(&h))?;
                if let Some(error) = &h.last_error {
                    let error = crate::text::safe(error);
                    writeln!(out, "{:<19}  last error: {error}", "")?;
                }
            }
        }
        WebhooksCommand::Remove { id } => {
            let db = open_for_writing(global)?;
            if !db.remove_webhook(id)? {
                return Err(format!("no webhook {id:?} in {}", db.location()).into());
            }
            writeln!(out, "removed {id}")?;
        }
    }
    Ok(())
}
