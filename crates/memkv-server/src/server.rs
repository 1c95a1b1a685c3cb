//! The listener: accepts connections (at most `max_connections` at once; at the limit an idle
//! one gives way, see `conns`), serves each with hyper's HTTP/1 (headers must arrive within
//! `header_timeout`, a new connection's first byte included), and shuts down gracefully: stop
//! accepting, let every request in flight finish and be answered, then return.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::SeqCst;
use std::time::{Duration, SystemTime};

use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use memkv::Database;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use tower::ServiceExt;

use crate::conns::{Connections, Place};
use crate::keys::{KeyFile, Keys};
use crate::sched::{self, Pinning};
use crate::{AppState, Config, router, tool};

/// A bound server, not yet serving.
#[derive(Debug)]
pub struct Server {
    listener: TcpListener,
    state: Arc<AppState>,
}

impl Server {
    /// Loads the keys and binds the listening socket.
    ///
    /// # Errors
    /// The keys file cannot be imported or the keys read; the address is not loopback and no key exists; the
    /// address cannot be bound.
    pub async fn bind(store: Arc<Database>, config: Config) -> io::Result<Server> {
        let keys = Keys::load(Arc::clone(&store), config.keys.clone().map(KeyFile::new))
            .map_err(io::Error::other)?;
        check_auth(&config, &keys)?;
        let listener = TcpListener::bind(config.listen).await?;
        let max_body = tool::max_body(&store);
        let state = Arc::new(AppState {
            openapi: crate::openapi::document(config.max_blocks, max_body).to_string(),
            max_body,
            in_flight: Arc::new(Semaphore::new(config.max_in_flight)),
            embedded: {
                // Views first when both want a core (see `sched`).
                store.on_writer_thread(crate::sched::background);
                memkv::storage::Backend::capabilities(store.storage()).embedded
            },
            store,
            keys,
            metrics: Arc::default(),
            remote: crate::remote::RemoteCommits::default(),
            rates: crate::rate::RateLimits::new(config.rate_limit_key, config.rate_limit_store),
            sessions: crate::console::session::Sessions::new(config.console_idle),
            waiters: crate::polls::Waiters::new(config.max_connections),
            ready: AtomicBool::new(false),
            instance: {
                let mut bytes = [0u8; 4];
                // Without random bytes, the start time: ids still differ between restarts.
                if getrandom::fill(&mut bytes).is_err() {
                    let now = SystemTime::now()
                        .duration_since(SystemTime::UNIX_EPOCH)
                        .map_or(0, |d| d.subsec_nanos() ^ d.as_secs() as u32);
                    bytes = now.to_le_bytes();
                }
                u32::from_le_bytes(bytes)
            },
            config,
        });
        Ok(Server { listener, state })
    }

    /// The address bound (with the real port when 0 was asked for).
    ///
    /// # Errors
    /// The socket has no address (should not happen once bound).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// The shared state (keys, metrics, store), e.g. for a service mounted beside the router.
    pub fn state(&self) -> &Arc<AppState> {
        &self.state
    }

    /// Serves until `shutdown` completes (then, for `drain_delay`, answers `/readyz` 503 while
    /// it goes on serving, so that a balancer takes it out first), then finishes the requests in
    /// flight (at most `shutdown_grace`) and returns.
    pub async fn run(self, shutdown: impl Future<Output = ()>) {
        let Server { listener, state } = self;
        let app = router(Arc::clone(&state));
        let mut http = hyper::server::conn::http1::Builder::new();
        http.timer(TokioTimer::new())
            .header_read_timeout(state.config.header_timeout)
            .max_buf_size(64 * 1024);
        let connections = Connections::new(state.config.max_connections);
        // Listening before the keeper and the looker start: they poll only as a fallback then.
        let watching = crate::remote::watch(&state);
        let trimming = (!state.embedded).then(|| tokio::spawn(trim_changes(Arc::clone(&state))));
        let looking =
            (!state.embedded).then(|| tokio::spawn(crate::remote::run(Arc::clone(&state))));
        let delivering = tokio::spawn(crate::webhooks::run(Arc::clone(&state)));
        let keeping_keys = tokio::spawn(keep_keys(Arc::clone(&state)));
        let graceful = GracefulShutdown::new();
        state.ready.store(true, SeqCst);
        let draining = Arc::clone(&state);
        let shutdown = async move {
            shutdown.await;
            let delay = draining.config.drain_delay;
            if !delay.is_zero() {
                draining.ready.store(false, SeqCst);
                tracing::info!(
                    seconds = delay.as_secs_f64(),
                    "shutting down: /readyz answers 503; still serving until the drain delay ends"
                );
                tokio::time::sleep(delay).await;
            }
        };
        tokio::pin!(shutdown);
        loop {
            let (stream, _peer) = tokio::select! {
                () = &mut shutdown => break,
                accepted = listener.accept() => match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        // Out of file descriptors, say: wait a little rather than spin.
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                },
            };
            // A place once a connection has come: at the limit an idle one gives way to it.
            let place = tokio::select! {
                () = &mut shutdown => break,
                place = connections.admit() => place,
            };
            let _ = stream.set_nodelay(true);
            let (router, busy) = (app.clone(), place.busy());
            // Each request counts as in flight on its connection until it is answered: a
            // connection with none may be closed to admit another at the limit.
            let service = hyper::service::service_fn(move |request| {
                let request_in_flight = Place::request(&busy);
                let answer = router.clone().oneshot(request);
                async move {
                    let response = answer.await;
                    drop(request_in_flight);
                    response
                }
            });
            let connection = graceful.watch(http.serve_connection(TokioIo::new(stream), service));
            let metrics = Arc::clone(&state.metrics);
            metrics.connections.inc();
            tokio::spawn(async move {
                tokio::select! {
                    ended = connection => if let Err(e) = ended {
                        tracing::debug!(error = %e, "connection ended with an error");
                    },
                    () = place.closing() => {
                        tracing::debug!("an idle connection closed to admit a new one");
                    }
                }
                metrics.connections.dec();
                drop(place);
            });
        }
        state.ready.store(false, SeqCst);
        state.config.mcp.shutdown.cancel();
        if let Some(looking) = looking {
            looking.abort();
        }
        if let Some(trimming) = trimming {
            trimming.abort();
        }
        keeping_keys.abort();
        drop(watching);
        drop(listener);
        tracing::info!("shutting down: no new connections; finishing requests in flight");
        let grace = state.config.shutdown_grace;
        // The deliverer stops at the shutdown's cancellation (giving up its lease); a delivery
        // in flight is made again by the next deliverer (at least once).
        if tokio::time::timeout(grace, delivering).await.is_err() {
            tracing::warn!("the webhook deliverer did not stop within the grace period");
        }
        if tokio::time::timeout(grace, graceful.shutdown())
            .await
            .is_err()
        {
            tracing::warn!(
                seconds = grace.as_secs_f64(),
                "connections still open after the grace period; closing"
            );
        }
        // Requests whose clients went away may still be running: let them finish their commits.
        let permits = u32::try_from(state.config.max_in_flight).unwrap_or(u32::MAX);
        if tokio::time::timeout(grace, state.in_flight.acquire_many(permits))
            .await
            .is_err()
        {
            tracing::warn!("commands still running after the grace period");
        }
        let last = Arc::clone(&state);
        if let Ok(Err(e)) = tokio::task::spawn_blocking(move || last.keys.record_uses()).await {
            tracing::warn!(error = %e, "recording when keys were last used failed");
        }
    }
}

/// How often the times keys were last used are written to the database.
const RECORD_USES_EVERY: Duration = Duration::from_secs(30);

/// How often the keeper looks at the keys file (a `stat`) and forgets idle rate buckets: a
/// little more often than [`crate::keys::RELOAD`].
const TICK: Duration = Duration::from_millis(400);

/// Keeps the keys and every store's settings current, and records every [`RECORD_USES_EVERY`]
/// when each key was last used. Where other processes' changes are told (a watch listens, see
/// `crate::remote`) or there are none (an embedded database), the database is read again when
/// a notification says keys or settings changed, and every [`crate::remote::FALLBACK`]; the
/// keys file is looked at every [`TICK`]. Where nothing tells, both are read every [`TICK`]
/// (so that requests seldom wait for a read of the database, and what another server of the
/// database changed applies here within a second).
async fn keep_keys(state: Arc<AppState>) {
    let mut recorded = tokio::time::Instant::now();
    let mut settings_read = tokio::time::Instant::now();
    loop {
        // Told while the watch listens: a lost connection being made again is not.
        let told = state.embedded || state.remote.listening();
        state.keys.set_told(told);
        tokio::select! {
            () = tokio::time::sleep(TICK) => {}
            () = state.remote.keys_told() => {}
        }
        let keys = Arc::clone(&state);
        let record = recorded.elapsed() >= RECORD_USES_EVERY;
        if record {
            recorded = tokio::time::Instant::now();
        }
        let settings = !told
            || state.remote.settings_told()
            || settings_read.elapsed() >= crate::remote::FALLBACK;
        if settings {
            settings_read = tokio::time::Instant::now();
        }
        keys.rates.forget_idle();
        let done = tokio::task::spawn_blocking(move || {
            // Told: only when a notification said so, the file changed, or the fallback is due.
            keys.keys.refresh(!told || keys.keys.file_changed());
            if settings && let Err(e) = keys.store.refresh_store_settings() {
                tracing::warn!(error = %e, "reading the stores' settings failed; the last read stay in force");
            }
            if record {
                keys.keys.record_uses()
            } else {
                Ok(())
            }
        })
        .await;
        if let Ok(Err(e)) = done {
            tracing::warn!(error = %e, "recording when keys were last used failed");
        }
    }
}

/// How often a server on a database whose writers do not trim the change log (PostgreSQL)
/// applies its retention.
const TRIM_EVERY: Duration = Duration::from_secs(10);

/// Applies the change log's retention every [`TRIM_EVERY`] (an embedded database's writers do
/// it as they write). Several servers on one database may: trimming is idempotent.
async fn trim_changes(state: Arc<AppState>) {
    loop {
        tokio::time::sleep(TRIM_EVERY).await;
        let db = Arc::clone(&state.store);
        match tokio::task::spawn_blocking(move || db.trim_changes()).await {
            Ok(Ok(0)) | Err(_) => {}
            Ok(Ok(n)) => tracing::info!(entries = n, "change log trimmed"),
            Ok(Err(e)) => tracing::warn!(error = %e, "trimming the change log failed"),
        }
    }
}

/// Refuses what cannot be served safely and says at start how requests will be authenticated:
/// `--no-auth` only on loopback and with no key; no key at all off loopback is refused too (a
/// server that would refuse every request); no key on loopback starts, refusing every request
/// (401) until one is added.
fn check_auth(config: &Config, keys: &Keys) -> io::Result<()> {
    let refuse = |why: String| Err(io::Error::new(io::ErrorKind::PermissionDenied, why));
    let loopback = config.listen.ip().is_loopback();
    if config.no_auth {
        if !loopback {
            return refuse(format!(
                "--no-auth is allowed only on a loopback address (127.0.0.1, ::1), not {}; add a key with `memkv keys add` instead",
                config.listen
            ));
        }
        if !keys.is_empty() {
            return refuse(format!(
                "--no-auth, but the database holds {} API key(s): drop --no-auth to require them, or revoke them first",
                keys.len()
            ));
        }
        tracing::warn!(
            listen = %config.listen,
            "--no-auth: serving WITHOUT API keys; any local process can read and write every store"
        );
        return Ok(());
    }
    if keys.is_empty() {
        if !loopback {
            return refuse(format!(
                "refusing to listen on {} without an API key: add one with `memkv keys add --admin` (or `--store NAME`), or listen on 127.0.0.1",
                config.listen
            ));
        }
        tracing::warn!(
            "no API key exists: every request but /healthz is refused (401) until one is added with `memkv keys add --store NAME` (or --admin); `serve --no-auth` serves keyless on loopback"
        );
    }
    Ok(())
}

/// Runs a server on its own tokio runtime until SIGTERM or SIGINT: binds, calls `on_listening`
/// with the bound address, serves, shuts down gracefully. For `memkv serve`.
///
/// # Errors
/// As [`Server::bind`], or the runtime or signal handlers cannot be set up.
pub fn run(
    store: Arc<Database>,
    config: Config,
    on_listening: impl FnOnce(SocketAddr),
) -> io::Result<()> {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder
        .enable_all()
        .max_blocking_threads(config.max_in_flight + 16)
        .thread_name("memkv-serve");
    if config.pin_workers {
        match Pinning::new(sched::allowed_cpus()) {
            Some(pinning) => {
                tracing::info!(
                    workers = pinning.threads(),
                    "async workers pinned, one per CPU"
                );
                let pinning = Arc::new(pinning);
                let every = Arc::clone(&pinning);
                // Every runtime thread starts free (a blocking-pool thread started by a pinned
                // worker would inherit its CPU); only the async workers park, and are pinned.
                builder
                    .worker_threads(pinning.threads())
                    .on_thread_start(move || every.free_current())
                    .on_thread_park(move || pinning.place_current());
            }
            None => tracing::warn!("--pin-workers: cannot pin threads here; workers left free"),
        }
    }
    let runtime = builder.build()?;
    runtime.block_on(async {
        let server = Server::bind(store, config).await?;
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        let mut int = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?;
        on_listening(server.local_addr()?);
        server
            .run(async move {
                tokio::select! {
                    _ = term.recv() => tracing::info!("SIGTERM received"),
                    _ = int.recv() => tracing::info!("SIGINT received"),
                }
            })
            .await;
        Ok::<_, io::Error>(())
    })?;
    runtime.shutdown_timeout(Duration::from_secs(5));
    Ok(())
}
