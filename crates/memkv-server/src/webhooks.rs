//! Webhook deliveries: the change log's entries POSTed to each endpoint the database keeps
//! ([`memkv::Database::webhooks`]), one entry per request, in order per endpoint, signed as
//! the Standard Webhooks specification says (`webhook-id`, `webhook-timestamp`,
//! `webhook-signature: v1,<base64 HMAC-SHA256 of "id.timestamp.body">`), at least once: an
//! endpoint's cursor moves only once its endpoint answered 2xx, and is kept in the database, so
//! a restart neither loses a delivery nor replays one acknowledged. A timeout or another status
//! is retried with exponential backoff, with the same `webhook-id`.
//!
//! One deliverer per database: the server that holds the lease ([`memkv::Database::try_lease`];
//! on PostgreSQL an advisory lock, so of several servers one delivers and another takes over
//! when it goes) runs one task per endpoint.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use hmac::{KeyInit, Mac};
use memkv::{ChangeEntry, ChangeKind, Database, Error, Webhook, WebhookAttempt, WebhookFormat};
use serde_json::json;

use crate::AppState;

pub mod guard;

/// The lease's role name.
const ROLE: &str = "memkv.webhooks";
/// How often the deliverer looks at the endpoints (added, removed, by any process) and at its
/// lease.
const REFRESH: Duration = Duration::from_secs(1);
/// How long a stopping deliverer waits for an attempt under way.
const STOPPING: Duration = Duration::from_secs(2);
/// Entries read at a time.
const PAGE: usize = 100;

/// How deliveries are made.
#[derive(Debug, Clone, Copy)]
pub struct WebhookOptions {
    /// How long an endpoint has to answer.
    pub timeout: Duration,
    /// The first retry's delay; each further failure doubles it.
    pub retry_base: Duration,
    /// The longest delay between retries.
    pub retry_max: Duration,
    /// Deliveries may reach addresses that are not public (`guard`): loopback, private
    /// networks, link-local.
    pub allow_private: bool,
}

impl Default for WebhookOptions {
    fn default() -> Self {
        WebhookOptions {
            timeout: Duration::from_secs(10),
            retry_base: Duration::from_secs(1),
            retry_max: Duration::from_secs(600),
            allow_private: false,
        }
    }
}

/// The change kinds of the event types named (`memory.created`, …), or a sentence naming the
/// first unknown one.
pub fn events(names: &[String]) -> Result<Vec<ChangeKind>, String> {
    names
        .iter()
        .map(|n| {
            ChangeKind::from_event_type(n).ok_or_else(|| {
                let known: Vec<&str> = ChangeKind::all().map(ChangeKind::event_type).collect();
                format!("unknown event type {n:?} (known: {})", known.join(", "))
            })
        })
        .collect()
}

/// The format named `name`, or a sentence naming the ones there are.
pub fn format(name: &str) -> Result<WebhookFormat, String> {
    WebhookFormat::parse(name)
        .ok_or_else(|| format!("unknown webhook format {name:?} (known: memkv, hosted)"))
}

/// A new signing secret: `whsec_` and the base64 of 24 bytes from the OS's random source.
pub fn new_secret() -> std::io::Result<String> {
    let mut bytes = [0u8; 24];
    getrandom::fill(&mut bytes).map_err(|e| std::io::Error::other(e.to_string()))?;
    Ok(format!("whsec_{}", STANDARD.encode(bytes)))
}

/// The `webhook-signature` header of a delivery: `v1,` and the base64 HMAC-SHA256, keyed with
/// the secret's decoded bytes, of `id.timestamp.body`.
pub fn signature(secret: &str, id: &str, timestamp: i64, body: &[u8]) -> Option<String> {
    let key = STANDARD.decode(secret.strip_prefix("whsec_")?).ok()?;
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(&key).ok()?;
    mac.update(format!("{id}.{timestamp}.").as_bytes());
    mac.update(body);
    Some(format!(
        "v1,{}",
        STANDARD.encode(mac.finalize().into_bytes())
    ))
}

/// The `webhook-id` of endpoint `hook`'s delivery of entry `seq`: the same on every attempt.
pub fn message_id(hook: &str, seq: u64) -> String {
    format!("msg_{}_{seq}", hook.trim_start_matches("wh_"))
}

/// The body of a delivery, `id` being its `webhook-id`: in memkv's format `{"type",
/// "timestamp", "data": entry}`; in the hosted API's, `{"type": "event", "id", "created_at",
/// "data": {"type", "id": store, "organization_id": "", "workspace_id": ""}}` (memkv has no
/// organisations or workspaces: both are empty).
pub fn payload(entry: &ChangeEntry, format: WebhookFormat, id: &str) -> Vec<u8> {
    let data = entry.to_json();
    let body = match (format, WebhookFormat::hosted_type(entry.change.kind)) {
        (WebhookFormat::Hosted, Some(event_type)) => json!({
            "type": "event",
            "id": id,
            "created_at": data["created_at"],
            "data": {
                "type": event_type,
                "id": entry.change.store,
                "organization_id": "",
                "workspace_id": "",
            },
        }),
        _ => json!({"type": data["type"], "timestamp": data["created_at"], "data": data}),
    };
    body.to_string().into_bytes()
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// On the blocking pool: `f` over the database.
async fn on_db<T: Send + 'static>(
    db: &Arc<Database>,
    f: impl FnOnce(&Database) -> Result<T, Error> + Send + 'static,
) -> Result<T, Error> {
    let db = Arc::clone(db);
    tokio::task::spawn_blocking(move || f(&db))
        .await
        .unwrap_or_else(|_| Err(Error::Corrupt("a webhook task panicked".into())))
}

/// Delivers until shutdown: waits for the lease, then runs a task per endpoint while it holds
/// it.
pub(crate) async fn run(state: Arc<AppState>) {
    let shutdown = state.config.mcp.shutdown.clone();
    let options = state.config.webhooks;
    let mut builder = reqwest::Client::builder()
        .timeout(options.timeout)
        .redirect(reqwest::redirect::Policy::none());
    if !options.allow_private {
        builder = builder.dns_resolver(guard::PublicOnly);
    }
    let client = match builder.build() {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "webhooks: no HTTP client; nothing will be delivered");
            return;
        }
    };
    let db = Arc::clone(&state.store);
    loop {
        let lease = on_db(&db, |db| db.try_lease(ROLE)).await;
        let mut lease = match lease {
            Ok(Some(lease)) => Some(lease),
            Ok(None) => {
                // Another server delivers; take over if it goes.
                tokio::select! {
                    () = tokio::time::sleep(REFRESH) => continue,
                    () = shutdown.cancelled() => return,
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "webhooks: cannot take the deliverer's lease");
                tokio::select! {
                    () = tokio::time::sleep(REFRESH) => continue,
                    () = shutdown.cancelled() => return,
                }
            }
        };
        // The endpoint tasks of this lease: cancelled when it is lost or at shutdown, so that
        // no delivery goes on once another server may have taken over.
        let leading = shutdown.child_token();
        state.metrics.webhooks_leading.set(1);
        tracing::info!("webhooks: this server delivers the database's webhooks");
        let mut tasks: HashMap<String, tokio::task::JoinHandle<()>> = HashMap::new();
        // Where changes are told, the endpoints are read again when one is (this process's
        // changes too) or after the fallback's time; elsewhere at every look at the lease.
        let mut told = state.remote.hooks();
        let mut read: Option<tokio::time::Instant> = None;
        loop {
            let due = !state.remote.listening()
                || read.is_none_or(|at| at.elapsed() >= crate::remote::FALLBACK)
                || told.has_changed().unwrap_or(true);
            if due {
                told.borrow_and_update();
                read = Some(tokio::time::Instant::now());
                match on_db(&db, Database::webhooks).await {
                    Ok(hooks) => {
                        tasks.retain(|id, task| {
                            let keep = hooks.iter().any(|h| &h.id == id) && !task.is_finished();
                            if !keep {
                                task.abort();
                            }
                            keep
                        });
                        for hook in hooks {
                            tasks.entry(hook.id.clone()).or_insert_with(|| {
                                let task = endpoint(
                                    Arc::clone(&state),
                                    client.clone(),
                                    hook.id,
                                    leading.clone(),
                                );
                                tokio::spawn(task)
                            });
                        }
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "webhooks: cannot read the endpoints");
                        // Tried again at the next look.
                        read = None;
                    }
                }
            }
            tokio::select! {
                () = tokio::time::sleep(REFRESH) => {}
                () = shutdown.cancelled() => break,
            }
            let mut held = lease.take();
            let still = tokio::task::spawn_blocking(move || {
                let still = held.as_mut().is_some_and(|l| l.held());
                (held, still)
            })
            .await;
            match still {
                Ok((back, true)) => lease = back,
                Ok((back, false)) => {
                    lease = back;
                    tracing::warn!("webhooks: the deliverer's lease was lost");
                    break;
                }
                Err(_) => break,
            }
        }
        // Attempts under way finish and are recorded (so the next deliverer does not make them
        // again), within `STOPPING` for all of them; what takes longer is dropped, and made
        // again (at least once).
        leading.cancel();
        let deadline = tokio::time::Instant::now() + STOPPING;
        for mut task in tasks.into_values() {
            if tokio::time::timeout_at(deadline, &mut task).await.is_err() {
                task.abort();
            }
        }
        state.metrics.webhooks_leading.set(0);
        // Given up off the async workers: a networked backend unlocks with a round trip.
        let _ = tokio::task::spawn_blocking(move || drop(lease)).await;
        if shutdown.is_cancelled() {
            return;
        }
    }
}

/// One endpoint's deliveries, in order, until it is removed (or the task aborted).
async fn endpoint(
    state: Arc<AppState>,
    client: reqwest::Client,
    id: String,
    shutdown: tokio_util::sync::CancellationToken,
) {
    let db = Arc::clone(&state.store);
    let options = state.config.webhooks;
    // A shutdown ends the task between attempts: an attempt under way is finished and
    // recorded (the deliverer waits for it, up to `STOPPING`).
    let pause = |d: Duration| {
        let shutdown = shutdown.clone();
        async move {
            tokio::select! {
                () = tokio::time::sleep(d) => {}
                () = shutdown.cancelled() => {}
            }
        }
    };
    loop {
        if shutdown.is_cancelled() {
            return;
        }
        let signal = db.next_commit();
        let remote = state.remote.subscribe();
        let mut hooks = state.remote.hooks();
        let wanted = id.clone();
        let hook = match on_db(&db, move |db| {
            Ok(db.webhooks()?.into_iter().find(|h| h.id == wanted))
        })
        .await
        {
            Ok(Some(hook)) => hook,
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(webhook = %id, error = %e, "webhooks: cannot read the endpoint");
                pause(REFRESH).await;
                continue;
            }
        };
        let due = hook.next_attempt_ms - now_ms();
        if due > 0 {
            pause(Duration::from_millis(due as u64)).await;
            continue;
        }
        let after = hook.delivered;
        let page = on_db(&db, move |db| db.changes(after, PAGE, None)).await;
        let entries = match page {
            Ok(page) => page.entries,
            Err(e) => {
                // A cursor behind the retention can never be delivered from again: say so.
                let attempt = failed(&hook, hook.delivered, e.to_string(), &options);
                record(&db, &hook.id, attempt).await;
                continue;
            }
        };
        if entries.is_empty() {
            // Woken by this process's commits, another's (`crate::remote`), a change of the
            // endpoints another process made (told), or to look at the endpoint's record again
            // (where changes are told, only as the fallback for one not told).
            let idle = if state.remote.listening() {
                crate::remote::FALLBACK
            } else {
                REFRESH
            };
            tokio::select! {
                _ = tokio::time::timeout(idle, signal) => {}
                () = remote.changed() => {}
                _ = hooks.changed() => {}
                () = shutdown.cancelled() => {}
            }
            continue;
        }
        deliver_page(&state, &client, &hook, &entries, &shutdown).await;
    }
}

/// Delivers the wanted entries of `entries` in order, recording each acknowledgement; stops at
/// the first failure (recorded with its retry time).
async fn deliver_page(
    state: &AppState,
    client: &reqwest::Client,
    hook: &Webhook,
    entries: &[ChangeEntry],
    stop: &tokio_util::sync::CancellationToken,
) {
    let (db, options) = (&state.store, &state.config.webhooks);
    let mut passed = hook.delivered;
    let mut recorded = hook.delivered;
    for entry in entries {
        if stop.is_cancelled() {
            break;
        }
        if !hook.wants(&entry.change.store, entry.change.kind) {
            passed = entry.seq;
            continue;
        }
        match post(client, hook, entry, options.allow_private).await {
            Ok(()) => {
                state.metrics.webhooks_delivered.inc();
                passed = entry.seq;
                if !record(db, &hook.id, WebhookAttempt::Delivered { seq: passed }).await {
                    return;
                }
                recorded = passed;
            }
            Err(error) => {
                state.metrics.webhooks_failed.inc();
                tracing::info!(webhook = %hook.id, seq = entry.seq, %error, "webhook delivery failed");
                record(db, &hook.id, failed(hook, passed, error, options)).await;
                return;
            }
        }
    }
    if passed > recorded {
        record(db, &hook.id, WebhookAttempt::Delivered { seq: passed }).await;
    }
}

/// A failed attempt, with the retry time of the endpoint's next failure in a row.
fn failed(hook: &Webhook, passed: u64, error: String, options: &WebhookOptions) -> WebhookAttempt {
    let failures = if passed > hook.delivered {
        1
    } else {
        hook.failures.saturating_add(1)
    };
    let delay = options
        .retry_base
        .saturating_mul(1u32 << (failures - 1).min(20))
        .min(options.retry_max);
    WebhookAttempt::Failed {
        passed,
        error,
        retry_ms: now_ms() + delay.as_millis() as i64,
    }
}

/// Records `attempt`; `false` when the endpoint is gone (or the record failed).
async fn record(db: &Arc<Database>, id: &str, attempt: WebhookAttempt) -> bool {
    let id = id.to_owned();
    match on_db(db, move |db| db.record_webhook_attempt(&id, &attempt)).await {
        Ok(present) => present,
        Err(e) => {
            tracing::warn!(error = %e, "webhooks: cannot record a delivery");
            false
        }
    }
}

/// One attempt at delivering `entry` to `hook`.
async fn post(
    client: &reqwest::Client,
    hook: &Webhook,
    entry: &ChangeEntry,
    allow_private: bool,
) -> Result<(), String> {
    let id = message_id(&hook.id, entry.seq);
    let body = payload(entry, hook.format, &id);
    let timestamp = now_ms() / 1000;
    let signature = signature(hook.signing_secret(), &id, timestamp, &body)
        .ok_or_else(|| "the endpoint's signing secret is not whsec_ and base64".to_owned())?;
    if !allow_private
        && let Some(refused) = reqwest::Url::parse(&hook.url)
            .ok()
            .as_ref()
            .and_then(guard::refused_literal)
    {
        return Err(refused);
    }
    let response = client
        .post(&hook.url)
        .header("content-type", "application/json")
        .header("webhook-id", &id)
        .header("webhook-timestamp", timestamp.to_string())
        .header("webhook-signature", signature)
        .header("user-agent", concat!("memkv/", env!("CARGO_PKG_VERSION")))
        .body(body)
        .send()
        .await
        .map_err(|e| {
            if e.is_timeout() {
                "the endpoint did not answer in time".to_owned()
            } else {
                // The cause is what says why (refused by `guard`, connection refused, …).
                let mut cause: &dyn std::error::Error = &e;
                while let Some(inner) = cause.source() {
                    cause = inner;
                }
                let cause = cause.to_string();
                format!("the request failed: {}: {cause}", e.without_url())
            }
        })?;
    let status = response.status();
    if status.is_success() {
        Ok(())
    } else {
        Err(format!("the endpoint answered {status}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_follow_the_standard_webhooks_example() {
        // The specification's example: secret, id, timestamp, body and signature.
        let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        let body = br#"{"test": 2432232314}"#;
        assert_eq!(
            signature(secret, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body).as_deref(),
            Some("v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
        );
        assert_eq!(signature("nope", "id", 1, b""), None);
        let s = new_secret().unwrap();
        assert!(s.starts_with("whsec_") && STANDARD.decode(&s[6..]).unwrap().len() == 24);
        assert_eq!(
            message_id("wh_00000000000000ff", 7),
            "msg_00000000000000ff_7"
        );
    }
}
