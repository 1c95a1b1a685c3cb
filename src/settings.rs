//! Per-store settings: a store's own file and byte quotas, time-to-live, history retention and
//! secrets policy, kept in the database (`Space::Settings`, under the store's id, so that
//! deleting the store deletes them) and laid over the database's defaults (the builder's, i.e.
//! `memkv`'s flags) wherever a command of the store is checked (`Engine::settings`).
//!
//! Every handle of a database keeps the settings of every store in memory, read when it opens;
//! its own changes apply at once, and [`crate::Database::refresh_store_settings`] reads them
//! again (what `memkv serve` does when a notification says they changed,
//! [`crate::Database::watch_remote`], and every 5 s besides, so that a change made through any
//! server of a PostgreSQL database applies on all within milliseconds, told by its notifications).

use std::collections::HashMap;
use std::ops::ControlFlow;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::history::Retention;
use crate::layout;
pub use crate::limits::StoreSettings;
use crate::pipeline::Engine;
use crate::secrets::SecretPolicy;
use crate::storage::{Backend, Finish, ReadTxn, Space};
use crate::time::millis;

/// The shortest `ttl` or `history_max_age`: a second (0 would expire everything, or drop all
/// history, at the next write; `off` is how to say "none").
pub const MIN_PERIOD: Duration = Duration::from_secs(1);
/// The longest: 100 years (36,500 days), so that every value is shown back as it can be sent.
pub const MAX_PERIOD: Duration = Duration::from_secs(36_500 * 86_400);

impl StoreSettings {
    fn check(&self) -> Result<(), Error> {
        let invalid = |what: &str| Err(Error::InvalidSettings(what.to_owned()));
        if self.max_files == Some(0) {
            return invalid("max_files must be at least 1");
        }
        if self.max_bytes == Some(0) {
            return invalid("max_bytes must be at least 1");
        }
        for (name, period) in [("ttl", self.ttl), ("history_max_age", self.history_max_age)] {
            if let Some(Some(d)) = period
                && !(MIN_PERIOD..=MAX_PERIOD).contains(&d)
            {
                return Err(Error::InvalidSettings(format!(
                    "{name} must be from 1s to 36500d (100 years), or off"
                )));
            }
        }
        Ok(())
    }

    fn record(&self) -> Record {
        let ms = |d: Option<Option<Duration>>| d.map(|d| d.map(millis));
        Record {
            max_files: self.max_files,
            max_bytes: self.max_bytes,
            ttl_ms: ms(self.ttl),
            history_max_age_ms: ms(self.history_max_age),
            history_max_versions: self.history_max_versions,
            history_max_bytes: self.history_max_bytes,
            secrets: self.secrets.map(|p| match p {
                SecretPolicy::Reject => 0,
                SecretPolicy::Redact => 1,
                SecretPolicy::Off => 2,
            }),
        }
    }
}

/// What a store's commands are checked against: its own settings over the database's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EffectiveSettings {
    /// Most files in the store.
    pub max_files: u64,
    /// Most bytes in the store.
    pub max_bytes: u64,
    /// How long a file unused may live (`None`: for ever).
    pub ttl: Option<Duration>,
    /// How much history the store keeps.
    pub retention: Retention,
    /// What a write holding a secret does.
    pub secrets: SecretPolicy,
}

/// The stored record (postcard, field order as listed; `docs/design.md`).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Record {
    max_files: Option<u64>,
    max_bytes: Option<u64>,
    ttl_ms: Option<Option<i64>>,
    history_max_age_ms: Option<Option<i64>>,
    history_max_versions: Option<Option<u64>>,
    history_max_bytes: Option<Option<u64>>,
    secrets: Option<u8>,
}

impl Record {
    fn settings(&self) -> Result<StoreSettings, Error> {
        let duration = |ms: Option<Option<i64>>| {
            ms.map(|d| d.map(|ms| Duration::from_millis(u64::try_from(ms).unwrap_or(0))))
        };
        let secrets = match self.secrets {
            None => None,
            Some(0) => Some(SecretPolicy::Reject),
            Some(1) => Some(SecretPolicy::Redact),
            Some(2) => Some(SecretPolicy::Off),
            Some(n) => return Err(Error::Corrupt(format!("unknown secrets policy {n}"))),
        };
        Ok(StoreSettings {
            max_files: self.max_files,
            max_bytes: self.max_bytes,
            ttl: duration(self.ttl_ms),
            history_max_age: duration(self.history_max_age_ms),
            history_max_versions: self.history_max_versions,
            history_max_bytes: self.history_max_bytes,
            secrets,
        })
    }
}

fn read(txn: &dyn ReadTxn, store: &str) -> Result<StoreSettings, Error> {
    match txn.get(Space::Settings, store, &[])? {
        None => Ok(StoreSettings::default()),
        Some(bytes) => layout::decode::<Record>(&bytes, "store settings")?.settings(),
    }
}

/// Every store's settings in the database.
fn read_all(txn: &dyn ReadTxn) -> Result<HashMap<String, StoreSettings>, Error> {
    let mut stores = Vec::new();
    txn.users(Space::Settings, &mut |u| {
        stores.push(u.to_owned());
        Ok(ControlFlow::Continue(()))
    })?;
    let mut out = HashMap::new();
    for store in stores {
        let settings = read(txn, &store)?;
        if !settings.is_default() {
            out.insert(store, settings);
        }
    }
    Ok(out)
}

/// Reads every store's settings into the engine's cache (at open, and on refresh).
pub(crate) fn refresh(db: &Engine) -> Result<(), Error> {
    let since = db.store_settings.changes();
    let all = read_all(&db.backend.begin_read()?)?;
    db.store_settings.replace(all, since);
    Ok(())
}

/// The body of [`crate::Database::store_settings`].
pub(crate) fn get(db: &Engine, store: &str) -> Result<StoreSettings, Error> {
    crate::user_id::validate_user(store)?;
    read(&db.backend.begin_read()?, store)
}

/// The body of [`crate::Database::update_store_settings`]: the fields `change` sets are set
/// (merged over the store's settings), and `reset` fields go back to the default.
pub(crate) fn update(
    db: &Engine,
    store: &str,
    change: &StoreSettings,
    reset: &[&str],
) -> Result<StoreSettings, Error> {
    crate::user_id::validate_user(store)?;
    change.check()?;
    for name in reset {
        if !FIELDS.contains(name) {
            return Err(Error::InvalidSettings(format!("no setting {name:?}")));
        }
    }
    let updated = db.transact(&[store], false, |txn, _| {
        let mut settings = read(txn, store)?.merged(change);
        for name in reset {
            clear(&mut settings, name);
        }
        if settings.is_default() {
            txn.remove(Space::Settings, store, &[])?;
        } else {
            txn.put(
                Space::Settings,
                store,
                &[],
                &layout::encode(&settings.record()),
            )?;
        }
        Ok((settings, Finish::Commit))
    })?;
    db.store_settings.set(store, updated);
    Ok(updated)
}

/// The names of the settings, as the API and the CLI spell them.
pub const FIELDS: [&str; 7] = [
    "max_files",
    "max_bytes",
    "ttl",
    "history_max_age",
    "history_max_versions",
    "history_max_bytes",
    "secrets",
];

fn clear(s: &mut StoreSettings, name: &str) {
    match name {
        "max_files" => s.max_files = None,
        "max_bytes" => s.max_bytes = None,
        "ttl" => s.ttl = None,
        "history_max_age" => s.history_max_age = None,
        "history_max_versions" => s.history_max_versions = None,
        "history_max_bytes" => s.history_max_bytes = None,
        "secrets" => s.secrets = None,
        _ => {}
    }
}

/// The body of [`crate::Database::effective_settings`].
pub(crate) fn effective(db: &Engine, store: &str) -> Result<EffectiveSettings, Error> {
    crate::user_id::validate_user(store)?;
    let s = db.settings(store);
    Ok(EffectiveSettings {
        max_files: s.limits.max_files,
        max_bytes: s.limits.max_bytes,
        ttl: s
            .ttl_ms
            .map(|ms| Duration::from_millis(u64::try_from(ms).unwrap_or(0))),
        retention: s.retention,
        secrets: s.secrets,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_merge() {
        let s = StoreSettings {
            max_files: Some(5),
            max_bytes: None,
            ttl: Some(None),
            history_max_age: Some(Some(Duration::from_secs(60))),
            history_max_versions: Some(None),
            history_max_bytes: Some(Some(10)),
            secrets: Some(SecretPolicy::Redact),
        };
        let bytes = layout::encode(&s.record());
        let back = layout::decode::<Record>(&bytes, "x")
            .unwrap()
            .settings()
            .unwrap();
        assert_eq!(back, s);
        let merged = s.merged(&StoreSettings {
            max_files: Some(7),
            secrets: Some(SecretPolicy::Off),
            ..StoreSettings::default()
        });
        assert_eq!(merged.max_files, Some(7));
        assert_eq!(merged.secrets, Some(SecretPolicy::Off));
        assert_eq!(merged.ttl, Some(None));
        assert!(StoreSettings::default().is_default());
        let mut cleared = merged;
        for f in FIELDS {
            clear(&mut cleared, f);
        }
        assert!(cleared.is_default());
    }
}
