//! What a store enforces: PROTOCOL.md's limits, expiry, and the secrets policy.

use std::collections::{BTreeMap, HashMap};
use std::sync::RwLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::history::append::Recorder;
use crate::history::change::Changes;
use crate::history::{Actor, Retention};
use crate::secrets::SecretPolicy;
use crate::time::millis;

/// Why a write was refused before anything changed: a limit or the secrets policy. Rendered by
/// `crate::messages`: [`crate::messages::refusal`] for the model,
/// [`crate::messages::refusal_reason`] for an operator (an import).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The file would be `size` bytes, over `limit`.
    FileTooLarge { size: u64, limit: u64 },
    /// The file would have more than `limit` lines.
    TooManyLines { limit: u64 },
    /// The user would have more than `limit` files.
    QuotaFiles { limit: u64 },
    /// The user would have more than `limit` bytes.
    QuotaBytes { limit: u64 },
    /// The content holds a secret of this kind.
    Secret { kind: &'static str },
}

/// Limits checked inside every write transaction. `Default` gives PROTOCOL.md's defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Limits {
    /// Largest file, in UTF-8 bytes. Default = 102,400.
    pub max_file_bytes: u64,
    /// Most lines in a file. Default = 999,999.
    pub max_lines: u64,
    /// Most files per user. Default = 10,000.
    pub max_files: u64,
    /// Most bytes per user, summed over their files. Default = 64 MiB (67,108,864).
    pub max_bytes: u64,
    /// Longest `view` output, in Unicode scalar values, before it is truncated. Default = 16,000.
    pub view_max_chars: usize,
}

impl Limits {
    /// PROTOCOL.md's defaults.
    pub const DEFAULT: Limits = Limits {
        max_file_bytes: 102_400,
        max_lines: 999_999,
        max_files: 10_000,
        max_bytes: 64 * 1024 * 1024,
        view_max_chars: 16_000,
    };
}

impl Default for Limits {
    fn default() -> Self {
        Limits::DEFAULT
    }
}

/// When unused files expire. Off unless a time-to-live is set.
///
/// A file is *used* when it is created, written or viewed. Reads record their time coarsely:
/// only when the stored time is older than `granularity` (at most a tenth of the store's `ttl`:
/// a 1-minute `ttl` records reads 6 s stale), so most reads stay read-only. A file therefore
/// expires between `ttl` and `ttl + granularity` after its last use, never earlier (but for
/// reads made while a longer `ttl` applied, which were recorded at its coarser granularity).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Expiry {
    /// Time-to-live for every user without an override. Default = none (files never expire).
    pub ttl: Option<Duration>,
    /// Per-user overrides: `Some(ttl)`, or `None` to exempt that user.
    pub per_user: BTreeMap<String, Option<Duration>>,
    /// How stale a recorded access time may get before a read refreshes it (at most a tenth of
    /// the `ttl` that applies). Default = 1 hour.
    pub granularity: Duration,
}

impl Default for Expiry {
    fn default() -> Self {
        Expiry {
            ttl: None,
            per_user: BTreeMap::new(),
            granularity: Duration::from_secs(3600),
        }
    }
}

impl Expiry {
    /// The time-to-live that applies to `user`.
    pub fn ttl_for(&self, user: &str) -> Option<Duration> {
        match self.per_user.get(user) {
            Some(over) => *over,
            None => self.ttl,
        }
    }
}

/// Everything a command is checked against, resolved for one user.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Settings {
    pub limits: Limits,
    pub secrets: SecretPolicy,
    /// Time-to-live in ms, if files of this user expire.
    pub ttl_ms: Option<i64>,
    pub granularity_ms: i64,
    /// How much history the store keeps.
    pub retention: Retention,
}

impl Settings {
    /// What a write at `now_ms` by `actor` records its changes with, noting them in `changes`.
    pub fn recorder<'c>(
        &self,
        now_ms: i64,
        actor: Option<&Actor>,
        changes: &'c Changes,
    ) -> Recorder<'c> {
        Recorder {
            actor: actor.cloned(),
            now_ms,
            retention: self.retention,
            changes,
        }
    }

    /// Files last used at or before this instant are expired (and invisible) at `now_ms`.
    pub fn expiry_cutoff(&self, now_ms: i64) -> Option<i64> {
        self.ttl_ms.map(|ttl| {
            now_ms
                .saturating_sub(ttl)
                .saturating_sub(self.granularity_ms)
        })
    }
}

/// A store's own settings; `None` in a field: the database's default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoreSettings {
    /// Most files in the store.
    pub max_files: Option<u64>,
    /// Most bytes in the store, summed over its files.
    pub max_bytes: Option<u64>,
    /// How long a file unused may live (`Some(None)`: it never expires).
    pub ttl: Option<Option<Duration>>,
    /// How long versions are kept (`Some(None)`: without limit).
    pub history_max_age: Option<Option<Duration>>,
    /// How many versions are kept (`Some(None)`: without limit).
    pub history_max_versions: Option<Option<u64>>,
    /// How many bytes of versions are kept (`Some(None)`: without limit).
    pub history_max_bytes: Option<Option<u64>>,
    /// What a write holding a secret does.
    pub secrets: Option<SecretPolicy>,
}

impl StoreSettings {
    /// Whether every field is the default.
    pub fn is_default(&self) -> bool {
        *self == StoreSettings::default()
    }

    /// `self` with every field `other` sets taken from `other`.
    pub fn merged(mut self, other: &StoreSettings) -> StoreSettings {
        macro_rules! take {
            ($($f:ident),*) => {$(if other.$f.is_some() { self.$f = other.$f; })*};
        }
        take!(
            max_files,
            max_bytes,
            ttl,
            history_max_age,
            history_max_versions,
            history_max_bytes,
            secrets
        );
        self
    }

    pub(crate) fn apply(&self, s: &mut Settings) {
        if let Some(n) = self.max_files {
            s.limits.max_files = n;
        }
        if let Some(n) = self.max_bytes {
            s.limits.max_bytes = n;
        }
        if let Some(ttl) = self.ttl {
            s.ttl_ms = ttl.map(millis);
        }
        if let Some(age) = self.history_max_age {
            s.retention.max_age = age;
        }
        if let Some(n) = self.history_max_versions {
            s.retention.max_versions = n;
        }
        if let Some(n) = self.history_max_bytes {
            s.retention.max_bytes = n;
        }
        if let Some(p) = self.secrets {
            s.secrets = p;
        }
    }
}

/// Every store's settings, as last read or written by this process.
#[derive(Debug, Default)]
pub(crate) struct SettingsCache {
    /// Whether any store has settings: when none has, a command looks at nothing else.
    any: AtomicBool,
    stores: RwLock<HashMap<String, StoreSettings>>,
    /// Bumped by every change this process makes: a read of all the settings taken before a
    /// change must not replace what the change set.
    changes: std::sync::atomic::AtomicU64,
}

impl SettingsCache {
    /// Lays `store`'s settings over `settings`.
    pub(crate) fn apply(&self, store: &str, settings: &mut Settings) {
        if !self.any.load(Ordering::Acquire) {
            return;
        }
        if let Some(own) = self
            .stores
            .read()
            .expect("no panics under the lock")
            .get(store)
        {
            own.apply(settings);
        }
    }

    /// Every store with settings of its own, by id.
    pub(crate) fn all(&self) -> Vec<(String, StoreSettings)> {
        let mut all: Vec<_> = self
            .stores
            .read()
            .expect("no panics under the lock")
            .iter()
            .map(|(k, v)| (k.clone(), *v))
            .collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all
    }

    /// The count of this process's changes, to hand to [`Self::replace`] with a read begun
    /// after it.
    pub(crate) fn changes(&self) -> u64 {
        self.changes.load(Ordering::Acquire)
    }

    /// Replaces every store's settings with `all`, read after [`Self::changes`] gave `since`;
    /// nothing if this process changed some meanwhile (the next read brings those too).
    pub(crate) fn replace(&self, all: HashMap<String, StoreSettings>, since: u64) {
        let mut stores = self.stores.write().expect("no panics under the lock");
        if self.changes.load(Ordering::Acquire) != since {
            return;
        }
        self.any.store(!all.is_empty(), Ordering::Release);
        *stores = all;
    }

    /// Forgets a deleted store's settings.
    pub(crate) fn forget(&self, store: &str) {
        self.set(store, StoreSettings::default());
    }

    pub(crate) fn set(&self, store: &str, settings: StoreSettings) {
        let mut stores = self.stores.write().expect("no panics under the lock");
        self.changes.fetch_add(1, Ordering::AcqRel);
        if settings.is_default() {
            stores.remove(store);
        } else {
            stores.insert(store.to_owned(), settings);
        }
        self.any.store(!stores.is_empty(), Ordering::Release);
    }
}
