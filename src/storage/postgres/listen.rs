//! Notifications of commits on the schema's channel ([`channel`]). A write transaction that
//! changes the keys, settings or webhook endpoints (seldom) sends `pg_notify` before its
//! commit, so that it is delivered at the commit and never for a rollback. Entries of the
//! change log (nearly every write) are told after the commit instead, by the [`Notifier`]: one
//! notification for every commit made while the one before was on its way. A notifying
//! transaction holds PostgreSQL's lock of the notification queue through its commit, WAL flush
//! included, so notifying commits follow each other one flush at a time: measured with pgbench
//! (1 KiB upserts, 4 clients), 2,200 transactions a second with a `pg_notify` in each against
//! 3,400 to 6,300 without, no more than with 1 client. Told after the commit, writes keep their
//! group commit. A watch ([`watch`]) listens on one connection of its own and tells its caller
//! what arrived, coalesced.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use postgres::fallible_iterator::FallibleIterator;

use super::pool::Pool;
use crate::error::Error;
use crate::storage::watch::{Changed, Listening, RemoteWatch};

/// How long the listener waits for a notification before it looks whether it should stop.
const WAIT: Duration = Duration::from_secs(1);
/// After this long without a notification the connection is asked an empty query, so that one
/// lost without a word (a middlebox, a silent network) is found and made again.
const PING: Duration = Duration::from_secs(30);
/// The first wait before connecting again; each failure doubles it, up to [`RECONNECT_MAX`].
const RECONNECT_FIRST: Duration = Duration::from_millis(50);
const RECONNECT_MAX: Duration = Duration::from_secs(5);
/// Most notifications taken in one go before the caller is told (a burst is one call).
const BATCH: usize = 4096;
/// How long a backend dropped waits for its last commits to be told.
const CLOSING: Duration = Duration::from_secs(2);

/// The channel of the schema's database: `memkv.` and the schema, or a hash of it when that
/// would pass PostgreSQL's 63 bytes for a name.
pub(crate) fn channel(schema: &str) -> String {
    let name = format!("memkv.{schema}");
    if name.len() <= 63 {
        return name;
    }
    // FNV-1a: the same in every process, whatever its build.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in schema.bytes() {
        hash = (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    format!("memkv.{hash:016x}")
}

/// The statement that notifies `channel` of `changed`.
pub(crate) fn notify(channel: &str, changed: Changed) -> String {
    format!(
        "SELECT pg_notify('{}', '{}');\n",
        channel.replace('\'', "''"),
        changed.payload()
    )
}

/// Tells the channel of change-log entries committed, after their commits, on a thread of its
/// own (started with the first), coalesced: commits made while a notification is on its way
/// are told by the next one, one for all of them.
#[derive(Default)]
pub(crate) struct Notifier {
    state: Mutex<Telling>,
    wake: Condvar,
}

#[derive(Default)]
struct Telling {
    /// Commits not yet told.
    wanted: bool,
    started: bool,
    /// The backend is going: the thread tells what is wanted, then ends.
    closed: bool,
    /// The thread has ended.
    ended: bool,
}

impl Notifier {
    /// After a commit that queued change-log entries.
    pub(crate) fn committed(self: &Arc<Self>, pool: &Arc<Pool>, channel: &str) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if state.wanted || state.closed {
            return;
        }
        state.wanted = true;
        if !state.started {
            let (me, pool, channel) = (Arc::clone(self), Arc::clone(pool), channel.to_owned());
            let spawned = std::thread::Builder::new()
                .name("memkv-pg-notify".into())
                .spawn(move || me.run(&pool, &channel));
            // No thread to be had: the others' fallback polls see the entries.
            state.started = spawned.is_ok();
            state.wanted = spawned.is_ok();
        }
        drop(state);
        self.wake.notify_one();
    }

    /// Ends the thread (the backend is dropped), once it has told the commits not yet told
    /// (a process that writes and exits is heard), waiting at most [`CLOSING`] for it.
    pub(crate) fn close(&self) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.closed = true;
        self.wake.notify_all();
        let until = Instant::now() + CLOSING;
        while state.started && !state.ended {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            state = self
                .wake
                .wait_timeout(state, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    fn run(&self, pool: &Arc<Pool>, channel: &str) {
        let statement = notify(
            channel,
            Changed {
                changes: true,
                ..Changed::default()
            },
        );
        loop {
            let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            while !state.wanted && !state.closed {
                state = self
                    .wake
                    .wait(state)
                    .unwrap_or_else(PoisonError::into_inner);
            }
            if !state.wanted {
                state.ended = true;
                drop(state);
                self.wake.notify_all();
                return;
            }
            // Commits from now on are told by the next notification.
            state.wanted = false;
            drop(state);
            // A failure is not tried again: the others' fallback polls see the entries.
            if let Ok(mut conn) = pool.get()
                && conn.client().simple_query(&statement).is_err()
            {
                conn.discard();
            }
        }
    }
}

/// Starts listening on `channel` on a connection of its own; `tell` is called on the
/// listener's thread with what arrived (once per burst), and with [`Changed::EVERYTHING`] each
/// time it has connected (what was sent before could not be heard).
pub(crate) fn watch(
    pool: Arc<Pool>,
    channel: String,
    tell: Box<dyn Fn(Changed) + Send>,
) -> Result<RemoteWatch, Error> {
    let stop = Arc::new(AtomicBool::new(false));
    let stopping = Arc::clone(&stop);
    let listening = Listening::default();
    let flag = listening.clone();
    std::thread::Builder::new()
        .name("memkv-pg-listen".into())
        .spawn(move || run(&pool, &channel, &*tell, &stopping, &flag))
        .map_err(|e| Error::storage(format!("cannot start the listener's thread: {e}")))?;
    Ok(RemoteWatch { stop, listening })
}

fn run(pool: &Pool, channel: &str, tell: &dyn Fn(Changed), stop: &AtomicBool, heard: &Listening) {
    let mut delay = RECONNECT_FIRST;
    while !stop.load(Ordering::Acquire) {
        let listening = pool.open_long_lived().and_then(|mut client| {
            let quoted = channel.replace('"', "\"\"");
            client
                .batch_execute(&format!("LISTEN \"{quoted}\""))
                .map_err(|e| super::query_error(pool.location(), &e))?;
            Ok(client)
        });
        match listening {
            Ok(mut client) => {
                heard.set(true);
                tell(Changed::EVERYTHING);
                // Until the connection is lost (then made again, and everything told) or the
                // watch is dropped.
                let since = Instant::now();
                listen(&mut client, tell, stop);
                heard.set(false);
                super::pool::close([client]);
                // One lost at once again and again is not made again at once each time.
                if since.elapsed() >= RECONNECT_MAX {
                    delay = RECONNECT_FIRST;
                } else {
                    pause(delay, stop);
                    delay = (delay * 2).min(RECONNECT_MAX);
                }
            }
            Err(_) => {
                pause(delay, stop);
                delay = (delay * 2).min(RECONNECT_MAX);
            }
        }
    }
}

/// Tells `tell` what arrives until the connection is lost or `stop` is set.
fn listen(client: &mut postgres::Client, tell: &dyn Fn(Changed), stop: &AtomicBool) {
    let mut heard = Instant::now();
    while !stop.load(Ordering::Acquire) {
        let Some(changed) = take(client) else {
            return;
        };
        if !changed.is_empty() {
            heard = Instant::now();
            tell(changed);
        }
        if client.is_closed() {
            return;
        }
        if heard.elapsed() >= PING {
            if client.simple_query("").is_err() {
                return;
            }
            heard = Instant::now();
        }
    }
}

/// What the next notification says (waiting for it up to [`WAIT`]: nothing then), with
/// whatever else has arrived meanwhile; `None` once the connection is lost.
fn take(client: &mut postgres::Client) -> Option<Changed> {
    let mut notes = client.notifications();
    let mut changed = match notes.timeout_iter(WAIT).next() {
        Ok(Some(n)) => Changed::parse(n.payload()),
        Ok(None) => return Some(Changed::default()),
        Err(_) => return None,
    };
    let mut more = notes.iter();
    for _ in 1..BATCH {
        match more.next() {
            Ok(Some(n)) => changed = changed.union(Changed::parse(n.payload())),
            Ok(None) => break,
            Err(_) => return None,
        }
    }
    Some(changed)
}

/// Sleeps for `d`, or less once `stop` is set.
fn pause(d: Duration, stop: &AtomicBool) {
    let until = Instant::now() + d;
    while !stop.load(Ordering::Acquire) {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return;
        }
        std::thread::sleep(left.min(Duration::from_millis(100)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_channel_is_a_name_postgresql_keeps_whole() {
        assert_eq!(channel("public"), "memkv.public");
        let long = "s".repeat(63);
        let named = channel(&long);
        assert!(named.len() <= 63 && named.starts_with("memkv."), "{named}");
        assert_ne!(named, channel(&"t".repeat(63)));
    }
}
