//! A small connection pool: idle connections in a stack, at most `max` open, a caller waits for
//! one when all are in use, up to [`CHECKOUT_TIMEOUT`] ([`Error::Busy`] then). Broken
//! connections (lost to a server restart or a `pg_terminate_backend`) are dropped, never handed
//! out again, and replaced on demand; one idle for [`IDLE_CHECK`] or more is asked an empty
//! query before it is handed out (a server or a middlebox may have dropped it silently), and one
//! open for [`MAX_LIFETIME`] is closed when it comes back (and made again when needed).
//!
//! Kept over r2d2 on measured figures (BENCHMARKS.md, "PostgreSQL"): r2d2 0.8.10 in its place
//! wrote 7 % fewer commands per second at 1 and at 32 clients, and opening a database whose
//! server refuses connections took 2 s (its checkout wait) instead of failing at once.

use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use postgres::{Client, Config, NoTls};
use postgres_native_tls::MakeTlsConnector;

use crate::error::Error;

/// How long a connection attempt may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a caller waits for a connection when all are in use.
pub(crate) const CHECKOUT_TIMEOUT: Duration = Duration::from_secs(30);
/// A connection idle this long is checked (an empty query) before it is handed out.
pub(crate) const IDLE_CHECK: Duration = Duration::from_secs(30);
/// A connection open this long is closed when it comes back.
pub(crate) const MAX_LIFETIME: Duration = Duration::from_secs(30 * 60);

pub(crate) struct Pool {
    config: Config,
    /// `None` with `sslmode=disable`.
    tls: Option<MakeTlsConnector>,
    location: String,
    max: usize,
    state: Mutex<State>,
    freed: Condvar,
}

/// What a connection has prepared (`sql::prepare_all`), once, before its first transaction.
#[derive(Clone)]
pub(crate) struct Prepared {
    /// The call of `pg_temp.memkv_write` (`write_fn::write_function`), where the server could make it.
    pub(crate) write: Option<postgres::Statement>,
}

/// An idle connection: what is prepared on it, when it was opened and when it came back.
struct Idle {
    client: Client,
    prepared: Option<Prepared>,
    opened: Instant,
    since: Instant,
}

struct State {
    idle: Vec<Idle>,
    open: usize,
    /// Callers asleep on `freed` (`notify_one` is a system call even when no one waits).
    waiting: usize,
}

impl Pool {
    pub(crate) fn new(
        mut config: Config,
        tls: Option<MakeTlsConnector>,
        location: String,
        max: usize,
    ) -> Arc<Pool> {
        config.connect_timeout(CONNECT_TIMEOUT);
        config.keepalives(true);
        config.application_name("memkv");
        Arc::new(Pool {
            config,
            tls,
            location,
            max,
            state: Mutex::new(State {
                idle: Vec::new(),
                open: 0,
                waiting: 0,
            }),
            freed: Condvar::new(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A connection: an idle one, a new one, or the next one freed within [`CHECKOUT_TIMEOUT`].
    pub(crate) fn get(self: &Arc<Self>) -> Result<Conn, Error> {
        let deadline = Instant::now() + CHECKOUT_TIMEOUT;
        let mut state = self.lock();
        loop {
            while let Some(mut idle) = state.idle.pop() {
                if idle.client.is_closed() {
                    state.open -= 1;
                    close([idle.client]);
                    continue;
                }
                if idle.since.elapsed() >= IDLE_CHECK {
                    // Checked outside the lock: a round trip.
                    drop(state);
                    let alive = idle.client.simple_query("").is_ok();
                    if alive {
                        return Ok(self.handed(idle.client, idle.prepared, idle.opened));
                    }
                    self.release(|state| state.open -= 1);
                    close([idle.client]);
                    state = self.lock();
                    continue;
                }
                return Ok(self.handed(idle.client, idle.prepared, idle.opened));
            }
            if state.open < self.max {
                state.open += 1;
                drop(state);
                return match self.connect() {
                    Ok(client) => Ok(self.handed(client, None, Instant::now())),
                    Err(e) => {
                        self.release(|state| state.open -= 1);
                        Err(e)
                    }
                };
            }
            let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                return Err(Error::Busy {
                    location: self.location.clone(),
                    attempts: 0,
                });
            };
            state.waiting += 1;
            state = self
                .freed
                .wait_timeout(state, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
            state.waiting -= 1;
        }
    }

    fn handed(
        self: &Arc<Self>,
        client: Client,
        prepared: Option<Prepared>,
        opened: Instant,
    ) -> Conn {
        Conn {
            pool: Arc::clone(self),
            client: Some(client),
            prepared,
            opened,
        }
    }

    /// A connection of its own that waits for long (the notifications' listener): TCP
    /// keepalives from 30 s of silence, and sent data unacknowledged for 30 s ends it, so that
    /// a peer gone silent is found within about a minute rather than TCP's quarter of an hour.
    pub(crate) fn open_long_lived(&self) -> Result<Client, Error> {
        let mut config = self.config.clone();
        config
            .keepalives_idle(Duration::from_secs(30))
            .keepalives_interval(Duration::from_secs(5))
            .keepalives_retries(3)
            .tcp_user_timeout(Duration::from_secs(30));
        let result = match &self.tls {
            None => config.connect(NoTls),
            Some(tls) => config.connect(tls.clone()),
        };
        result.map_err(|e| super::connect_error(&self.location, e))
    }

    /// The URL without its password, for messages.
    pub(crate) fn location(&self) -> &str {
        &self.location
    }

    fn connect(&self) -> Result<Client, Error> {
        let result = match &self.tls {
            None => self.config.connect(NoTls),
            Some(tls) => self.config.connect(tls.clone()),
        };
        result.map_err(|e| super::connect_error(&self.location, e))
    }

    fn put(&self, client: Client, prepared: Option<Prepared>, opened: Instant, broken: bool) {
        let mut closing = None;
        self.release(|state| {
            if broken || client.is_closed() || opened.elapsed() >= MAX_LIFETIME {
                state.open -= 1;
                closing = Some(client);
            } else {
                state.idle.push(Idle {
                    client,
                    prepared,
                    opened,
                    since: Instant::now(),
                });
            }
        });
        close(closing);
    }

    /// Applies `change` (a connection returned, or a place freed), then wakes a caller waiting
    /// for one, if any.
    fn release(&self, change: impl FnOnce(&mut State)) {
        let mut state = self.lock();
        change(&mut state);
        let waiting = state.waiting > 0;
        drop(state);
        if waiting {
            self.freed.notify_one();
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        let state = self.state.get_mut().unwrap_or_else(PoisonError::into_inner);
        close(state.idle.drain(..).map(|idle| idle.client));
    }
}

/// Closes connections on a thread of their own, and waits for it. A `postgres::Client` runs
/// its own runtime to close, which panics on a thread inside another async runtime (an async
/// server dropping its store at shutdown, say); a plain thread has none.
pub(crate) fn close(clients: impl IntoIterator<Item = Client>) {
    let clients: Vec<Client> = clients.into_iter().collect();
    if clients.is_empty() {
        return;
    }
    let handed = Arc::new(Mutex::new(Some(clients)));
    let theirs = Arc::clone(&handed);
    let closer = std::thread::Builder::new()
        .name("memkv-pg-close".into())
        .spawn(move || drop(theirs.lock().map(|mut c| c.take())));
    match closer {
        // A panic there is the client's own; the connections are gone either way.
        Ok(thread) => drop(thread.join()),
        // No thread to be had (at a process limit): never close them here; their sockets
        // close with the process.
        Err(_) => std::mem::forget(handed.lock().ok().and_then(|mut c| c.take())),
    }
}

/// A connection taken from the pool; goes back when dropped, unless marked broken.
pub(crate) struct Conn {
    pool: Arc<Pool>,
    client: Option<Client>,
    /// What is prepared on this connection (`None`: nothing yet).
    pub(crate) prepared: Option<Prepared>,
    opened: Instant,
}

impl Conn {
    pub(crate) fn client(&mut self) -> &mut Client {
        self.client.as_mut().expect("present until dropped")
    }

    /// Closes the connection instead of returning it (its state is unknown).
    pub(crate) fn discard(mut self) {
        if let Some(client) = self.client.take() {
            self.pool
                .put(client, self.prepared.take(), self.opened, true);
        }
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        if let Some(client) = self.client.take() {
            self.pool
                .put(client, self.prepared.take(), self.opened, false);
        }
    }
}
