//! API keys: who may use which stores through memkv's network faces (`memkv serve`: its routes,
//! the tool route, MCP). The records live in the database (`Space::Keys`, under the empty user
//! id, which no store can have), so every server on one PostgreSQL database checks requests
//! against the same keys, and `memkv keys` works on any database, a file or a URL.
//!
//! A key is 32 random bytes, shown once as `mkv_` and 64 hex digits; only its SHA-256 is kept.
//! A key opens every store (admin) or one store, for reading and writing or, with
//! `read_only`, for reading only; it may carry a label and an expiry, and records when it was
//! last used (as the server reports it, at most about once a minute per key).

use std::ops::ControlFlow;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::Error;
use crate::layout;
use crate::pipeline::Engine;
use crate::storage::{Backend, Finish, ReadTxn, Space};

/// The user id the keys are kept under: empty, which no store can be.
const OWNER: &str = "";
/// The most keys a database keeps.
pub const MAX_KEYS: usize = 10_000;
/// The longest label, in characters.
pub const MAX_LABEL_CHARS: usize = 200;

/// What a key opens.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum KeyScope {
    /// Every store, and the operator routes (keys, webhooks, metrics, the feed of every store).
    Admin,
    /// One store (a memkv user id).
    Store {
        /// The store.
        store: String,
        /// Reads only: the memory tool's writes are answered with the read-only error, and
        /// the API's writes refused.
        read_only: bool,
    },
}

impl KeyScope {
    /// The store it is limited to, if any.
    pub fn store(&self) -> Option<&str> {
        match self {
            KeyScope::Admin => None,
            KeyScope::Store { store, .. } => Some(store),
        }
    }

    /// Whether it may only read.
    pub fn read_only(&self) -> bool {
        matches!(
            self,
            KeyScope::Store {
                read_only: true,
                ..
            }
        )
    }
}

/// One API key, without the key itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiKey {
    /// `key_` and 12 lowercase hex digits: how lists and revocations name it, and the author
    /// recorded for the changes it makes.
    pub id: String,
    /// What it opens.
    pub scope: KeyScope,
    /// The operator's words for it (may be empty).
    pub label: String,
    /// When it was added, in ms since the epoch.
    pub created_ms: i64,
    /// When it stops working, in ms since the epoch (`None`: never).
    pub expires_ms: Option<i64>,
    /// When it was last used, as recorded (ms since the epoch).
    pub last_used_ms: Option<i64>,
    sha256: [u8; 32],
}

impl ApiKey {
    /// The SHA-256 of the key.
    pub fn sha256(&self) -> &[u8; 32] {
        &self.sha256
    }

    /// Whether it has expired at `now_ms`.
    pub fn expired_at(&self, now_ms: i64) -> bool {
        self.expires_ms.is_some_and(|at| now_ms >= at)
    }
}

/// A key to add ([`crate::Database::add_key`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewKey {
    /// What it opens.
    pub scope: KeyScope,
    /// The operator's words for it (at most [`MAX_LABEL_CHARS`], no control characters).
    pub label: String,
    /// When it stops working (ms since the epoch); must be in the future.
    pub expires_ms: Option<i64>,
}

impl NewKey {
    /// A key for `scope`, without label or expiry.
    pub fn new(scope: KeyScope) -> Self {
        NewKey {
            scope,
            label: String::new(),
            expires_ms: None,
        }
    }
}

/// A key kept elsewhere by hash (a keys file), to import as it is
/// ([`crate::Database::import_keys`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportedKey {
    /// Its id (`key_` and 12 hex digits).
    pub id: String,
    /// What it opens.
    pub scope: KeyScope,
    /// The SHA-256 of the key.
    pub sha256: [u8; 32],
    /// The operator's words for it.
    pub label: String,
    /// When it was added (ms since the epoch).
    pub created_ms: i64,
    /// When it stops working (ms since the epoch).
    pub expires_ms: Option<i64>,
}

/// A new key and id, not yet kept anywhere: `(id, key)`, `key_` and 12 hex digits, `mkv_` and
/// 64 (for a key added where the database cannot be written now: `memkv keys add` beside a
/// running server writes it to the server's keys file, which the server imports).
///
/// # Errors
/// The system gives no random bytes.
pub fn generate() -> Result<(String, String), Error> {
    let mut secret = [0u8; 32];
    random(&mut secret)?;
    let mut id = [0u8; 6];
    random(&mut id)?;
    Ok((
        format!("key_{}", hex::encode(id)),
        format!("mkv_{}", hex::encode(secret)),
    ))
}

/// The stored record (postcard, field order as listed; `docs/design.md`).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Record {
    sha256: [u8; 32],
    store: Option<String>,
    read_only: bool,
    label: String,
    created_ms: i64,
    expires_ms: Option<i64>,
    last_used_ms: Option<i64>,
    /// When it was revoked: the record stays, without effect, so that no import brings the
    /// key back (a keys file holding it, a server started with an old one).
    revoked_ms: Option<i64>,
}

impl Record {
    fn key(self, id: &[u8]) -> Result<ApiKey, Error> {
        let id = String::from_utf8(id.to_vec())
            .map_err(|_| Error::Corrupt("an API key id is not UTF-8".into()))?;
        let scope = match self.store {
            None => KeyScope::Admin,
            Some(store) => KeyScope::Store {
                store,
                read_only: self.read_only,
            },
        };
        Ok(ApiKey {
            id,
            scope,
            label: self.label,
            created_ms: self.created_ms,
            expires_ms: self.expires_ms,
            last_used_ms: self.last_used_ms,
            sha256: self.sha256,
        })
    }
}

/// The SHA-256 of a key as sent.
pub fn hash(key: &str) -> [u8; 32] {
    Sha256::digest(key.as_bytes()).into()
}

/// Whether `id` is spelled as memkv names keys: `key_` and 12 lowercase hex digits.
pub fn valid_id(id: &str) -> bool {
    id.strip_prefix("key_")
        .is_some_and(|h| h.len() == 12 && h.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
}

fn invalid(reason: impl Into<String>) -> Error {
    Error::InvalidKey(reason.into())
}

fn check(new: &NewKey, now_ms: i64) -> Result<(), Error> {
    if let Some(store) = new.scope.store() {
        crate::user_id::validate_user(store)?;
    }
    if new.label.chars().count() > MAX_LABEL_CHARS {
        return Err(invalid(format!(
            "a label is at most {MAX_LABEL_CHARS} characters"
        )));
    }
    if new.label.chars().any(char::is_control) {
        return Err(invalid("a label must not hold control characters"));
    }
    if new.expires_ms.is_some_and(|at| at <= now_ms) {
        return Err(invalid("the expiry must be in the future"));
    }
    Ok(())
}

/// Every key, `live` ones only or revoked ones too.
fn all(txn: &dyn ReadTxn, live: bool) -> Result<Vec<ApiKey>, Error> {
    let mut out = Vec::new();
    let mut failed = None;
    txn.scan(Space::Keys, OWNER, &[], None, &mut |key, value| {
        let record = layout::decode::<Record>(value, "API key");
        if live && record.as_ref().is_ok_and(|r| r.revoked_ms.is_some()) {
            return Ok(ControlFlow::Continue(()));
        }
        match record.and_then(|r| r.key(key)) {
            Ok(k) => out.push(k),
            Err(e) => {
                failed = Some(e);
                return Ok(ControlFlow::Break(()));
            }
        }
        Ok(ControlFlow::Continue(()))
    })?;
    match failed {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

fn random(bytes: &mut [u8]) -> Result<(), Error> {
    getrandom::fill(bytes).map_err(|e| Error::storage(format!("no random bytes: {e}")))
}

/// The body of [`crate::Database::add_key`].
pub(crate) fn add(db: &Engine, new: &NewKey) -> Result<(ApiKey, String), Error> {
    let now_ms = db.now_ms();
    check(new, now_ms)?;
    let (_, key) = generate()?;
    let record = Record {
        sha256: hash(&key),
        store: new.scope.store().map(str::to_owned),
        read_only: new.scope.read_only(),
        label: new.label.clone(),
        created_ms: now_ms,
        expires_ms: new.expires_ms,
        last_used_ms: None,
        revoked_ms: None,
    };
    let added = db.transact(&[OWNER], false, |txn, _| {
        let existing = all(txn, false)?;
        if all(txn, true)?.len() >= MAX_KEYS {
            return Err(invalid(format!("a database keeps at most {MAX_KEYS} keys")));
        }
        let id = loop {
            let (id, _) = generate()?;
            if !existing.iter().any(|k| k.id == id) {
                break id;
            }
        };
        txn.put(Space::Keys, OWNER, id.as_bytes(), &layout::encode(&record))?;
        Ok((record.clone().key(id.as_bytes())?, Finish::Commit))
    })?;
    db.keys_changed();
    Ok((added, key))
}

/// The body of [`crate::Database::api_keys`].
pub(crate) fn list(db: &Engine) -> Result<Vec<ApiKey>, Error> {
    all(&db.backend.begin_read()?, true)
}

/// The body of [`crate::Database::revoke_key`].
pub(crate) fn revoke(db: &Engine, id: &str) -> Result<bool, Error> {
    let now_ms = db.now_ms();
    let removed = db.transact(&[OWNER], false, |txn, _| {
        let Some(bytes) = txn.get(Space::Keys, OWNER, id.as_bytes())? else {
            return Ok((false, Finish::Abort));
        };
        let mut r: Record = layout::decode(&bytes, "API key")?;
        if r.revoked_ms.is_some() {
            return Ok((false, Finish::Abort));
        }
        r.revoked_ms = Some(now_ms);
        txn.put(Space::Keys, OWNER, id.as_bytes(), &layout::encode(&r))?;
        Ok((true, Finish::Commit))
    })?;
    if removed {
        db.keys_changed();
    }
    Ok(removed)
}

/// The body of [`crate::Database::import_keys`].
pub(crate) fn import(db: &Engine, keys: &[ImportedKey]) -> Result<usize, Error> {
    for k in keys {
        if !valid_id(&k.id) {
            return Err(invalid(format!("not a key id: {:?}", k.id)));
        }
        if let Some(store) = k.scope.store() {
            crate::user_id::validate_user(store)?;
        }
    }
    let added = db.transact(&[OWNER], false, |txn, _| {
        // Revoked ids too: an import never brings a revoked key back.
        let existing = all(txn, false)?;
        let live = all(txn, true)?.len();
        let mut added = 0;
        for k in keys {
            if existing.iter().any(|e| e.id == k.id) {
                continue;
            }
            if live + added >= MAX_KEYS {
                return Err(invalid(format!("a database keeps at most {MAX_KEYS} keys")));
            }
            let record = Record {
                sha256: k.sha256,
                store: k.scope.store().map(str::to_owned),
                read_only: k.scope.read_only(),
                label: k.label.clone(),
                created_ms: k.created_ms,
                expires_ms: k.expires_ms,
                last_used_ms: None,
                revoked_ms: None,
            };
            txn.put(
                Space::Keys,
                OWNER,
                k.id.as_bytes(),
                &layout::encode(&record),
            )?;
            added += 1;
        }
        let finish = if added > 0 {
            Finish::Commit
        } else {
            Finish::Abort
        };
        Ok((added, finish))
    })?;
    if added > 0 {
        db.keys_changed();
    }
    Ok(added)
}

/// The body of [`crate::Database::record_key_use`]: each key's last use moves forward to the
/// time given (never back); keys revoked meanwhile are passed over.
pub(crate) fn record_use(db: &Engine, uses: &[(String, i64)]) -> Result<(), Error> {
    if uses.is_empty() {
        return Ok(());
    }
    db.transact(&[OWNER], false, |txn, _| {
        // A last use is bookkeeping: no server's keys change with it.
        txn.quiet();
        let mut changed = false;
        for (id, at) in uses {
            let Some(bytes) = txn.get(Space::Keys, OWNER, id.as_bytes())? else {
                continue;
            };
            let mut r: Record = layout::decode(&bytes, "API key")?;
            if r.revoked_ms.is_some() || r.last_used_ms.is_some_and(|last| last >= *at) {
                continue;
            }
            r.last_used_ms = Some(*at);
            txn.put(Space::Keys, OWNER, id.as_bytes(), &layout::encode(&r))?;
            changed = true;
        }
        Ok((
            (),
            if changed {
                Finish::Commit
            } else {
                Finish::Abort
            },
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_hashes() {
        assert!(valid_id("key_0123456789ab"));
        for bad in [
            "key_0123456789AB",
            "key_0123456789a",
            "kex_0123456789ab",
            "",
        ] {
            assert!(!valid_id(bad), "{bad}");
        }
        assert_eq!(
            hex::encode(hash("x")),
            "2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881"
        );
    }

    #[test]
    fn new_keys_are_checked() {
        let now = 1_000;
        let store = |s: &str| {
            NewKey::new(KeyScope::Store {
                store: s.into(),
                read_only: false,
            })
        };
        assert!(check(&store("alice"), now).is_ok());
        assert!(check(&store(""), now).is_err());
        let mut k = store("alice");
        k.label = "x".repeat(MAX_LABEL_CHARS);
        assert!(check(&k, now).is_ok());
        k.label.push('x');
        assert!(check(&k, now).is_err());
        k.label = "a\nb".into();
        assert!(check(&k, now).is_err());
        k.label.clear();
        k.expires_ms = Some(now);
        assert!(check(&k, now).is_err());
        k.expires_ms = Some(now + 1);
        assert!(check(&k, now).is_ok());
    }
}
