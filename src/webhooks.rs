//! Webhook endpoints: where `memkv serve` delivers the change log's entries, and how far each
//! has got. The records live in the database (`Space::Webhooks`, under the empty user id, which
//! no store can have), so every process on a PostgreSQL database sees the same endpoints and a
//! restart resumes each from its last acknowledged entry. The deliveries themselves (HTTP,
//! signatures, the retry schedule) are the server's; this module keeps the state.

use std::ops::ControlFlow;

use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::history::change::ChangeKind;
use crate::layout;
use crate::pipeline::Engine;
use crate::storage::{Backend, Finish, ReadTxn, Space};

/// The user id the endpoints are kept under: empty, which no store can be.
const OWNER: &str = "";
/// The most endpoints a database keeps.
pub const MAX_WEBHOOKS: usize = 100;
/// The longest URL accepted.
const MAX_URL: usize = 2048;
/// The longest error kept of a failed delivery.
const MAX_ERROR: usize = 500;

/// How an endpoint's deliveries are shaped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WebhookFormat {
    /// memkv's own: `{"type", "timestamp", "data": entry}`, every kind of entry.
    #[default]
    Memkv,
    /// The hosted memory-stores API's webhook events, `{"type": "event", "id", "created_at",
    /// "data": {"type": "memory_store.created", "id", …}}`, so that an application written for
    /// them (the SDKs' `client.beta.webhooks.unwrap()`) works unchanged: only the kinds the
    /// hosted API has ([`WebhookFormat::hosted_type`]).
    Hosted,
}

impl WebhookFormat {
    /// `memkv` or `hosted`.
    pub fn as_str(self) -> &'static str {
        match self {
            WebhookFormat::Memkv => "memkv",
            WebhookFormat::Hosted => "hosted",
        }
    }

    /// The format named `name` (`memkv`, `hosted`).
    pub fn parse(name: &str) -> Option<WebhookFormat> {
        match name {
            "memkv" => Some(WebhookFormat::Memkv),
            "hosted" => Some(WebhookFormat::Hosted),
            _ => None,
        }
    }

    /// The hosted API's event type of entries of kind `kind` (`memory_store.created`,
    /// `memory_store.archived`, `memory_store.deleted`); `None` for a kind it has none of.
    pub fn hosted_type(kind: ChangeKind) -> Option<&'static str> {
        match kind {
            ChangeKind::StoreCreated => Some("memory_store.created"),
            ChangeKind::StoreArchived => Some("memory_store.archived"),
            ChangeKind::StoreDeleted => Some("memory_store.deleted"),
            _ => None,
        }
    }

    /// Whether entries of kind `kind` can be delivered in this format.
    pub fn carries(self, kind: ChangeKind) -> bool {
        self == WebhookFormat::Memkv || WebhookFormat::hosted_type(kind).is_some()
    }

    fn number(self) -> u8 {
        match self {
            WebhookFormat::Memkv => 0,
            WebhookFormat::Hosted => 1,
        }
    }

    fn of_number(n: u8) -> Result<WebhookFormat, Error> {
        match n {
            0 => Ok(WebhookFormat::Memkv),
            1 => Ok(WebhookFormat::Hosted),
            other => Err(Error::Corrupt(format!("unknown webhook format {other}"))),
        }
    }
}

/// One endpoint and how its deliveries stand.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Webhook {
    /// `wh_` and 16 lowercase hex digits.
    pub id: String,
    /// Where entries are POSTed (`http://` or `https://`).
    pub url: String,
    /// Only these stores' entries (empty: every store's).
    pub stores: Vec<String>,
    /// Only these kinds of entry (empty: every kind).
    pub events: Vec<ChangeKind>,
    /// When it was added, in ms since the epoch.
    pub created_ms: i64,
    /// The last `seq` delivered (or passed over as not wanted): the next delivery is of the
    /// first wanted entry after it. An endpoint starts at the log's end when added.
    pub delivered: u64,
    /// Failed attempts in a row at the entry after `delivered`.
    pub failures: u32,
    /// When the next attempt is due (ms since the epoch; 0: now).
    pub next_attempt_ms: i64,
    /// Why the last attempt failed.
    pub last_error: Option<String>,
    /// How its deliveries are shaped.
    pub format: WebhookFormat,
    secret: String,
}

impl Webhook {
    /// The endpoint's signing secret (`whsec_` and base64), for the deliverer's signatures.
    /// Shown to the operator once, when the endpoint is added.
    pub fn signing_secret(&self) -> &str {
        &self.secret
    }

    /// Whether the endpoint wants entries of `store` and of kind `kind` (and its format can
    /// carry them).
    pub fn wants(&self, store: &str, kind: ChangeKind) -> bool {
        (self.stores.is_empty() || self.stores.iter().any(|s| s == store))
            && (self.events.is_empty() || self.events.contains(&kind))
            && self.format.carries(kind)
    }
}

/// The stored record (postcard, field order as listed; `docs/design.md`). `format` came last,
/// after the others: a record written before it ([`RecordV1`]) reads as memkv's format, and a
/// build before it reads this one's first fields and ignores the last.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Record {
    url: String,
    secret: String,
    stores: Vec<String>,
    events: Vec<u8>,
    created_ms: i64,
    delivered: u64,
    failures: u32,
    next_attempt_ms: i64,
    last_error: Option<String>,
    format: u8,
}

/// [`Record`] as written before endpoints had a format.
#[derive(Debug, Clone, Deserialize)]
struct RecordV1 {
    url: String,
    secret: String,
    stores: Vec<String>,
    events: Vec<u8>,
    created_ms: i64,
    delivered: u64,
    failures: u32,
    next_attempt_ms: i64,
    last_error: Option<String>,
}

impl Record {
    fn decode(bytes: &[u8]) -> Result<Record, Error> {
        if let Ok(record) = postcard::from_bytes::<Record>(bytes) {
            return Ok(record);
        }
        let v1: RecordV1 = layout::decode(bytes, "webhook")?;
        Ok(Record {
            url: v1.url,
            secret: v1.secret,
            stores: v1.stores,
            events: v1.events,
            created_ms: v1.created_ms,
            delivered: v1.delivered,
            failures: v1.failures,
            next_attempt_ms: v1.next_attempt_ms,
            last_error: v1.last_error,
            format: WebhookFormat::Memkv.number(),
        })
    }

    fn webhook(self, id: &[u8]) -> Result<Webhook, Error> {
        let id = String::from_utf8(id.to_vec())
            .map_err(|_| Error::Corrupt("a webhook id is not UTF-8".into()))?;
        let events = self
            .events
            .iter()
            .map(|n| {
                ChangeKind::all()
                    .find(|k| k.number() == *n)
                    .ok_or_else(|| Error::Corrupt(format!("unknown webhook event {n}")))
            })
            .collect::<Result<_, _>>()?;
        Ok(Webhook {
            id,
            url: self.url,
            stores: self.stores,
            events,
            created_ms: self.created_ms,
            delivered: self.delivered,
            failures: self.failures,
            next_attempt_ms: self.next_attempt_ms,
            last_error: self.last_error,
            format: WebhookFormat::of_number(self.format)?,
            secret: self.secret,
        })
    }
}

/// A webhook request memkv refuses.
fn invalid(reason: impl Into<String>) -> Error {
    Error::InvalidWebhook(reason.into())
}

fn check(url: &str, secret: &str, stores: &[String]) -> Result<(), Error> {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
        .ok_or_else(|| {
            invalid(format!(
                "the URL must start with http:// or https://: {url:?}"
            ))
        })?;
    if rest.is_empty() || rest.starts_with('/') {
        return Err(invalid(format!("the URL names no host: {url:?}")));
    }
    if url.len() > MAX_URL || url.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err(invalid(
            "the URL must be at most 2048 characters, with no spaces or control characters",
        ));
    }
    let key = secret
        .strip_prefix("whsec_")
        .filter(|k| !k.is_empty() && k.len() <= 200)
        .filter(|k| {
            k.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"+/=".contains(&b))
        });
    if key.is_none() {
        return Err(invalid("the signing secret must be whsec_ and base64"));
    }
    for store in stores {
        crate::user_id::validate_user(store)?;
    }
    Ok(())
}

fn all(txn: &dyn ReadTxn) -> Result<Vec<Webhook>, Error> {
    let mut out = Vec::new();
    let mut failed = None;
    txn.scan(Space::Webhooks, OWNER, &[], None, &mut |key, value| {
        match Record::decode(value).and_then(|r| r.webhook(key)) {
            Ok(w) => out.push(w),
            Err(e) => {
                failed = Some(e);
                return Ok(ControlFlow::Break(()));
            }
        }
        Ok(ControlFlow::Continue(()))
    })?;
    match failed {
        Some(e) => Err(e),
        None => {
            // Ids are random (never one a removed endpoint had): in the order they were added.
            out.sort_by(|a, b| (a.created_ms, &a.id).cmp(&(b.created_ms, &b.id)));
            Ok(out)
        }
    }
}

/// A new endpoint's id, `wh_` and 16 hex digits: random, so that no id of a removed endpoint
/// (which a receiver or a log may still name) is ever given again.
fn new_id(existing: &[Webhook]) -> Result<String, Error> {
    for _ in 0..8 {
        let n = getrandom::u64().map_err(|e| Error::storage(format!("no random bytes: {e}")))?;
        let id = format!("wh_{n:016x}");
        if !existing.iter().any(|w| w.id == id) {
            return Ok(id);
        }
    }
    Err(Error::storage("no new webhook id after 8 random draws"))
}

/// The body of [`crate::Database::add_webhook`].
pub(crate) fn add(
    db: &Engine,
    url: &str,
    secret: &str,
    stores: &[String],
    events: &[ChangeKind],
    format: WebhookFormat,
) -> Result<Webhook, Error> {
    check(url, secret, stores)?;
    if let Some(kind) = events.iter().find(|k| !format.carries(**k)) {
        return Err(invalid(format!(
            "the hosted format has no {} event (it carries memory_store.created, memory_store.archived and memory_store.deleted: store.created, store.archived and store.deleted)",
            kind.event_type()
        )));
    }
    let now_ms = db.now_ms();
    db.transact(&[OWNER], false, |txn, _| {
        let existing = all(txn)?;
        if existing.len() >= MAX_WEBHOOKS {
            return Err(invalid(format!(
                "a database keeps at most {MAX_WEBHOOKS} webhook endpoints"
            )));
        }
        let id = new_id(&existing)?;
        txn.log_settle()?;
        let mut stores = stores.to_vec();
        stores.sort();
        stores.dedup();
        let mut numbers: Vec<u8> = events.iter().map(|k| k.number()).collect();
        numbers.sort_unstable();
        numbers.dedup();
        let record = Record {
            url: url.to_owned(),
            secret: secret.to_owned(),
            stores,
            events: numbers,
            created_ms: now_ms,
            // From the log's end: an endpoint gets what commits after it was added.
            delivered: txn.log_bounds()?.last,
            failures: 0,
            next_attempt_ms: 0,
            last_error: None,
            format: format.number(),
        };
        txn.put(
            Space::Webhooks,
            OWNER,
            id.as_bytes(),
            &layout::encode(&record),
        )?;
        Ok((record.webhook(id.as_bytes())?, Finish::Commit))
    })
}

/// Inside the transaction of a restore that moved the change log on to `seq`: every endpoint
/// behind it goes on from there (the entries it had not delivered were the copy's before the
/// restore, which the restore replaced).
pub(crate) fn move_on(txn: &mut dyn crate::storage::WriteTxn, seq: u64) -> Result<(), Error> {
    let mut moved = Vec::new();
    txn.scan(Space::Webhooks, OWNER, &[], None, &mut |key, value| {
        let mut r = Record::decode(value)?;
        if r.delivered < seq {
            r.delivered = seq;
            r.failures = 0;
            r.next_attempt_ms = 0;
            moved.push((key.to_vec(), r));
        }
        Ok(ControlFlow::Continue(()))
    })?;
    for (key, r) in moved {
        txn.put(Space::Webhooks, OWNER, &key, &layout::encode(&r))?;
    }
    Ok(())
}

/// The body of [`crate::Database::webhooks`].
pub(crate) fn list(db: &Engine) -> Result<Vec<Webhook>, Error> {
    all(&db.backend.begin_read()?)
}

/// The body of [`crate::Database::remove_webhook`].
pub(crate) fn remove(db: &Engine, id: &str) -> Result<bool, Error> {
    db.transact(&[OWNER], false, |txn, _| {
        let present = txn.get(Space::Webhooks, OWNER, id.as_bytes())?.is_some();
        if present {
            txn.remove(Space::Webhooks, OWNER, id.as_bytes())?;
            Ok((true, Finish::Commit))
        } else {
            Ok((false, Finish::Abort))
        }
    })
}

/// What a delivery attempt came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attempt {
    /// Every entry up to `seq` is delivered or not wanted.
    Delivered {
        /// The last entry done with.
        seq: u64,
    },
    /// The entry after `passed` (every one up to which is done with) failed; try again at
    /// `retry_ms`.
    Failed {
        /// The last entry done with (entries passed over before the failing one).
        passed: u64,
        /// Why, for `webhooks list` (cut to 500 characters).
        error: String,
        /// When to try again, ms since the epoch.
        retry_ms: i64,
    },
}

/// The body of [`crate::Database::record_webhook_attempt`]: `false` when the endpoint is gone.
pub(crate) fn record(db: &Engine, id: &str, attempt: &Attempt) -> Result<bool, Error> {
    db.transact(&[OWNER], false, |txn, _| {
        // A cursor moving on is the deliverer's bookkeeping: no other server waits for it.
        txn.quiet();
        let Some(bytes) = txn.get(Space::Webhooks, OWNER, id.as_bytes())? else {
            return Ok((false, Finish::Abort));
        };
        let mut r = Record::decode(&bytes)?;
        match attempt {
            Attempt::Delivered { seq } => {
                r.delivered = r.delivered.max(*seq);
                r.failures = 0;
                r.next_attempt_ms = 0;
                r.last_error = None;
            }
            Attempt::Failed {
                passed,
                error,
                retry_ms,
            } => {
                if *passed > r.delivered {
                    r.delivered = *passed;
                    r.failures = 0;
                }
                r.failures = r.failures.saturating_add(1);
                r.next_attempt_ms = *retry_ms;
                r.last_error = Some(error.chars().take(MAX_ERROR).collect());
            }
        }
        txn.put(Space::Webhooks, OWNER, id.as_bytes(), &layout::encode(&r))?;
        Ok((true, Finish::Commit))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_and_secrets_are_checked() {
        let s = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        assert!(check("http://127.0.0.1:9/x", s, &[]).is_ok());
        assert!(check("https://example.com", s, &["alice".into()]).is_ok());
        for bad in [
            "ftp://x",
            "http://",
            "http:///x",
            "http://a b",
            "example.com",
        ] {
            assert!(check(bad, s, &[]).is_err(), "{bad}");
        }
        assert!(check("http://x", "secret", &[]).is_err());
        assert!(check("http://x", "whsec_", &[]).is_err());
        assert!(check("http://x", s, &[String::new()]).is_err());
    }
}
