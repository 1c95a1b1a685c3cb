//! Other processes' commits, as the database tells of them ([`crate::Database::watch_remote`]).
//! On PostgreSQL every write transaction that changes the API keys, a store's settings or the
//! webhook endpoints says so with `NOTIFY` (delivered at its commit, never for a rollback), a
//! process that committed change-log entries says so just after (see docs/postgres.md), and a
//! watch listens on one connection of its own. An embedded database is written by one process,
//! whose commits its waiters learn of directly: nothing to watch.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// What other processes changed, as notifications said. Coalesced: a burst of commits of one
/// kind is one flag, however many there were.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Changed {
    /// The API keys ([`crate::Database::api_keys`]): added, revoked, or a use recorded.
    pub keys: bool,
    /// Some store's settings ([`crate::Database::store_settings`]).
    pub settings: bool,
    /// The webhook endpoints or their cursors ([`crate::Database::webhooks`]).
    pub webhooks: bool,
    /// The change log ([`crate::Database::changes`]): entries committed.
    pub changes: bool,
}

impl Changed {
    /// Everything may have changed: a watch says so when it (re)connects, since notifications
    /// sent while it was not listening are lost.
    pub const EVERYTHING: Changed = Changed {
        keys: true,
        settings: true,
        webhooks: true,
        changes: true,
    };

    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        *self == Changed::default()
    }

    /// Both changes at once.
    #[must_use]
    pub fn union(self, other: Changed) -> Changed {
        Changed {
            keys: self.keys || other.keys,
            settings: self.settings || other.settings,
            webhooks: self.webhooks || other.webhooks,
            changes: self.changes || other.changes,
        }
    }

    /// The words of a notification's payload: `keys`, `settings`, `webhooks`, `changes`,
    /// joined by commas.
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    pub(crate) fn payload(&self) -> String {
        let words = [
            (self.keys, "keys"),
            (self.settings, "settings"),
            (self.webhooks, "webhooks"),
            (self.changes, "changes"),
        ];
        let said: Vec<&str> = words
            .iter()
            .filter(|(on, _)| *on)
            .map(|(_, w)| *w)
            .collect();
        said.join(",")
    }

    /// What a payload says; a word this version does not know (a newer process's) may mean
    /// anything: everything.
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    pub(crate) fn parse(payload: &str) -> Changed {
        let mut changed = Changed::default();
        for word in payload.split(',') {
            match word {
                "keys" => changed.keys = true,
                "settings" => changed.settings = true,
                "webhooks" => changed.webhooks = true,
                "changes" => changed.changes = true,
                _ => return Changed::EVERYTHING,
            }
        }
        changed
    }
}

/// A watch of other processes' commits ([`crate::Database::watch_remote`]): its listener
/// stops, and closes its connection, once this is dropped (within a second; within 30 s if it
/// was asking a connection gone silent).
#[derive(Debug)]
pub struct RemoteWatch {
    pub(crate) stop: Arc<AtomicBool>,
    pub(crate) listening: Listening,
}

impl RemoteWatch {
    /// Whether the watch hears notifications now: false until its connection listens, and
    /// again while a lost one is made again (a caller relying on it should poll meanwhile).
    pub fn listening(&self) -> Listening {
        self.listening.clone()
    }
}

/// Whether a [`RemoteWatch`]'s connection listens, readable wherever it is needed.
#[derive(Debug, Clone, Default)]
pub struct Listening(pub(crate) Arc<AtomicBool>);

impl Listening {
    /// True while the watch's connection listens.
    pub fn is_listening(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }

    #[cfg(feature = "postgres")]
    pub(crate) fn set(&self, listening: bool) {
        self.0.store(listening, Ordering::Release);
    }
}

impl Drop for RemoteWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::Changed;

    #[test]
    fn a_payload_says_what_changed_and_an_unknown_word_means_everything() {
        let some = Changed {
            keys: true,
            changes: true,
            ..Changed::default()
        };
        assert_eq!(some.payload(), "keys,changes");
        assert_eq!(Changed::parse("keys,changes"), some);
        assert_eq!(
            Changed::parse(&Changed::EVERYTHING.payload()),
            Changed::EVERYTHING
        );
        assert_eq!(Changed::parse("keys,views"), Changed::EVERYTHING);
    }
}
