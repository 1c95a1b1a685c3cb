//! What this process last knew of each store's entries, across transactions, so that a write
//! can skip its read round trip: it assumes the entries it announces hold what the memo says
//! (and that a key the memo lacks is absent), and sends those assumptions with its writes, to be
//! checked under the store lock before anything is applied ([`super::sql::check`]). When one is
//! wrong (another process wrote the store, or the guess of an absent key was), the transaction
//! is rolled back and run again with real reads, and the store's memo is forgotten.
//!
//! The memo holds only entries that transactions read (their value after the commit), small
//! ones: the totals, the store record, the nodes of the paths written. It is a hint: nothing is
//! ever decided on it without the check.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// Values longer than this are not kept (the check sends every assumed value back).
const MAX_VALUE: usize = 1024;
/// When the memo grows past this, it is forgotten whole.
const MAX_BYTES: usize = 8 << 20;
/// Writes of a store that run without assumptions after a failed check, at least and at most
/// (doubling while checks keep failing: a store other processes write often is not assumed).
const MIN_PENALTY: u32 = 4;
const MAX_PENALTY: u32 = 1024;

/// `(space, key, value)`: an entry as a commit left it (`None`: absent).
pub(crate) type Entry = (u8, Vec<u8>, Option<Vec<u8>>);

#[derive(Default)]
pub(crate) struct Memo {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    stores: HashMap<String, StoreMemo>,
    bytes: usize,
}

#[derive(Default)]
struct StoreMemo {
    /// `(space, key)` → value (`None`: absent).
    entries: BTreeMap<(u8, Vec<u8>), Option<Vec<u8>>>,
    /// Writes left to run without assumptions.
    cold: u32,
    /// What `cold` becomes at the next failed check.
    penalty: u32,
}

/// What an entry costs the memo, roughly.
fn cost(key: &[u8], value: Option<&[u8]>) -> usize {
    64 + key.len() + value.map_or(0, <[u8]>::len)
}

impl Memo {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether a write may make assumptions about `user`'s entries: the memo knows some, and no
    /// check failed lately.
    pub(crate) fn warm(&self, user: &str) -> bool {
        self.lock()
            .stores
            .get(user)
            .is_some_and(|s| s.cold == 0 && !s.entries.is_empty())
    }

    /// Whether a transaction that locked `user` committed since the memo was last cleared:
    /// the store's row in `memkv_stores` exists then (rows are never removed).
    pub(crate) fn knows(&self, user: &str) -> bool {
        self.lock().stores.contains_key(user)
    }

    /// The value the memo has for a key (`None`: absent or unknown, which a write assumes
    /// absent).
    pub(crate) fn get(&self, user: &str, space: u8, key: &[u8]) -> Option<Vec<u8>> {
        self.lock()
            .stores
            .get(user)
            .and_then(|s| s.entries.get(&(space, key.to_vec())).cloned().flatten())
    }

    /// After a commit: `user`'s ranges `removed` are gone, entries `read` hold their given value
    /// now, and entries `written` too (kept only if the memo already had them). `assumed` says
    /// whether the transaction made assumptions (which the commit proved right).
    pub(crate) fn learn(
        &self,
        user: &str,
        removed: &[(u8, Vec<u8>, Vec<u8>)],
        read: &[Entry],
        written: &[Entry],
        assumed: bool,
    ) {
        let mut state = self.lock();
        let state = &mut *state;
        let mut delta: isize = 0;
        if !state.stores.contains_key(user) {
            // The store's own place counts too: a memo of many stores stays bounded.
            delta += cost(user.as_bytes(), None) as isize;
        }
        let store = state.stores.entry(user.to_owned()).or_default();
        if assumed {
            store.penalty /= 2;
        } else {
            store.cold = store.cold.saturating_sub(1);
        }
        for (space, start, end) in removed {
            let doomed: Vec<(u8, Vec<u8>)> = store
                .entries
                .range((*space, start.clone())..(*space, end.clone()))
                .map(|(k, _)| k.clone())
                .collect();
            for k in doomed {
                if let Some(v) = store.entries.remove(&k) {
                    delta -= cost(&k.1, v.as_deref()) as isize;
                }
            }
        }
        let mut set = |space: u8, key: &[u8], value: &Option<Vec<u8>>, only_known: bool| {
            let k = (space, key.to_vec());
            let keep = value.as_ref().is_none_or(|v| v.len() <= MAX_VALUE);
            let old = if keep && (!only_known || store.entries.contains_key(&k)) {
                delta += cost(key, value.as_deref()) as isize;
                store.entries.insert(k, value.clone())
            } else {
                store.entries.remove(&k)
            };
            if let Some(old) = old {
                delta -= cost(key, old.as_deref()) as isize;
            }
        };
        for (space, key, value) in read {
            set(*space, key, value, false);
        }
        for (space, key, value) in written {
            set(*space, key, value, true);
        }
        state.bytes = state.bytes.saturating_add_signed(delta);
        if state.bytes > MAX_BYTES {
            state.stores.clear();
            state.bytes = 0;
        }
    }

    /// A check of `user`'s entries failed: forget them, and assume nothing for a while.
    pub(crate) fn stale(&self, user: &str) {
        let mut state = self.lock();
        let state = &mut *state;
        if let Some(store) = state.stores.get_mut(user) {
            let freed: usize = store
                .entries
                .iter()
                .map(|(k, v)| cost(&k.1, v.as_deref()))
                .sum();
            state.bytes = state.bytes.saturating_sub(freed);
            store.entries.clear();
            store.penalty = (store.penalty * 2).clamp(MIN_PENALTY, MAX_PENALTY);
            store.cold = store.penalty;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(space: u8, key: &[u8], value: Option<&[u8]>) -> Entry {
        (space, key.to_vec(), value.map(<[u8]>::to_vec))
    }

    #[test]
    fn learns_what_was_read_and_updates_only_known_writes() {
        let memo = Memo::default();
        assert!(!memo.warm("u") && !memo.knows("u"));
        let read = [entry(2, b"", Some(b"t1")), entry(3, b"a", None)];
        let written = [entry(3, b"a", Some(b"n")), entry(6, b"id", Some(b"x"))];
        memo.learn("u", &[], &read, &[], false);
        memo.learn("u", &[], &[], &written, false);
        assert!(memo.warm("u") && memo.knows("u") && !memo.knows("v"));
        assert_eq!(memo.get("u", 2, b""), Some(b"t1".to_vec()));
        // A write updates a key the memo had, and does not add one it never read.
        assert_eq!(memo.get("u", 3, b"a"), Some(b"n".to_vec()));
        assert!(
            !memo.lock().stores["u"]
                .entries
                .contains_key(&(6, b"id".to_vec()))
        );
        assert!(!memo.warm("v"));
    }

    #[test]
    fn forgets_removed_ranges_and_large_values() {
        let memo = Memo::default();
        let big = vec![7u8; MAX_VALUE + 1];
        let read = [
            entry(3, b"d\0a", Some(b"1")),
            entry(3, b"d\0b", Some(b"2")),
            entry(3, b"e", Some(b"3")),
            entry(4, b"big", Some(&big)),
        ];
        memo.learn("u", &[], &read, &[], false);
        assert_eq!(memo.get("u", 4, b"big"), None);
        assert!(
            !memo.lock().stores["u"]
                .entries
                .contains_key(&(4, b"big".to_vec()))
        );
        memo.learn(
            "u",
            &[(3, b"d\0".to_vec(), b"d\x01".to_vec())],
            &[],
            &[],
            false,
        );
        assert_eq!(memo.get("u", 3, b"d\0a"), None);
        assert_eq!(memo.get("u", 3, b"d\0b"), None);
        assert_eq!(memo.get("u", 3, b"e"), Some(b"3".to_vec()));
        // A value that grew past the limit leaves the memo rather than stay stale.
        memo.learn("u", &[], &[], &[entry(3, b"e", Some(&big))], false);
        assert!(
            !memo.lock().stores["u"]
                .entries
                .contains_key(&(3, b"e".to_vec()))
        );
    }

    #[test]
    fn a_failed_check_cools_the_store_for_longer_each_time() {
        let memo = Memo::default();
        let read = [entry(2, b"", Some(b"t"))];
        memo.learn("u", &[], &read, &[], false);
        assert!(memo.warm("u"));
        let cold_writes = |memo: &Memo| {
            let mut n = 0;
            while !memo.warm("u") {
                memo.learn("u", &[], &read, &[], false);
                n += 1;
            }
            n
        };
        memo.stale("u");
        assert_eq!(memo.get("u", 2, b""), None, "forgotten");
        assert_eq!(cold_writes(&memo), MIN_PENALTY);
        memo.stale("u");
        assert_eq!(cold_writes(&memo), 2 * MIN_PENALTY);
        // Assumptions that hold shorten the next cooling.
        memo.learn("u", &[], &read, &[], true);
        memo.learn("u", &[], &read, &[], true);
        memo.stale("u");
        assert_eq!(cold_writes(&memo), MIN_PENALTY);
    }

    #[test]
    fn many_stores_stay_within_its_bytes() {
        let memo = Memo::default();
        for i in 0..(MAX_BYTES / 64) {
            memo.learn(&format!("user-{i}"), &[], &[], &[], false);
            assert!(memo.lock().bytes <= MAX_BYTES + 128);
        }
        assert!(memo.lock().stores.len() < MAX_BYTES / 64);
    }

    #[test]
    fn stays_within_its_bytes() {
        let memo = Memo::default();
        let value = vec![1u8; MAX_VALUE];
        let mut i = 0u32;
        while i < 2 * (MAX_BYTES / MAX_VALUE) as u32 {
            memo.learn(
                "u",
                &[],
                &[entry(3, &i.to_be_bytes(), Some(&value))],
                &[],
                false,
            );
            assert!(memo.lock().bytes <= MAX_BYTES + MAX_VALUE + 64 + 4);
            i += 1;
        }
        let total: usize = memo.lock().stores.values().map(|s| s.entries.len()).sum();
        assert!(total < MAX_BYTES / MAX_VALUE, "{total} entries kept");
    }
}
