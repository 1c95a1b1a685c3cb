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
//!
//! It stays within [`MAX_BYTES`] by forgetting the entries no transaction touched lately
//! (generations of learning: an entry survives if it was learned in the current generation or
//! the one before). A forgotten key leaves its hash behind: a write that needs it reads it
//! rather than assume it absent, so forgetting never turns into a failed check. That is why
//! the memo forgets by age, entry by entry: a store whose memo is emptied relearns only what its
//! next writes read, then assumes absent the directories it has not relearned, fails its check
//! and runs without assumptions for a while; in a busy process, every few seconds
//! (docs/perf-log.md, PostgreSQL). Only if what is left (the recent entries and the hashes)
//! still fills three quarters of [`MAX_BYTES`] are all stores forgotten whole.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// Values longer than this are not kept (the check sends every assumed value back).
const MAX_VALUE: usize = 1024;
/// What the memo may hold; past it, the entries not touched lately are forgotten.
const MAX_BYTES: usize = 8 << 20;
/// Bytes learned in one generation.
const GENERATION: usize = MAX_BYTES / 4;
/// What a forgotten key's hash costs.
const FORGOTTEN_COST: usize = 16;
/// Writes of a store that run without assumptions after a failed check, at least and at most
/// (doubling while checks keep failing: a store other processes write often is not assumed).
const MIN_PENALTY: u32 = 4;
const MAX_PENALTY: u32 = 1024;

/// `(space, key, value)`: an entry as a commit left it (`None`: absent).
pub(crate) type Entry<'a> = (u8, &'a [u8], Option<&'a [u8]>);

#[derive(Default)]
pub(crate) struct Memo {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    stores: HashMap<String, StoreMemo>,
    bytes: usize,
    /// The generation being learned, and the bytes learned in it so far.
    generation: u32,
    learned: usize,
}

/// An entry's value (`None`: absent) and the generation that last learned it.
struct Known {
    value: Option<Vec<u8>>,
    generation: u32,
}

/// One store's entries: a hash map per space, so that a lookup costs one hash of the key, not a
/// walk of a tree of every entry of the store with a comparison of keys at each step (the
/// memo of a busy store holds thousands: a node per file written). Removing a range (a
/// directory's `delete` or `rename`) visits the store's entries of that space instead: rarer.
#[derive(Default)]
struct StoreMemo {
    /// `(space, key → entry)`.
    spaces: Vec<(u8, HashMap<Vec<u8>, Known>)>,
    /// Hashes of the keys forgotten to stay small ([`key_hash`]): not assumed absent.
    forgotten: HashSet<u64>,
    /// Writes left to run without assumptions.
    cold: u32,
    /// What `cold` becomes at the next failed check.
    penalty: u32,
}

/// The hash a forgotten key leaves (the same in every run; a collision only costs a read).
fn key_hash(space: u8, key: &[u8]) -> u64 {
    BuildHasherDefault::<DefaultHasher>::default().hash_one((space, key))
}

impl StoreMemo {
    fn space(&self, space: u8) -> Option<&HashMap<Vec<u8>, Known>> {
        self.spaces
            .iter()
            .find(|(s, _)| *s == space)
            .map(|(_, m)| m)
    }

    fn space_mut(&mut self, space: u8) -> &mut HashMap<Vec<u8>, Known> {
        let i = match self.spaces.iter().position(|(s, _)| *s == space) {
            Some(i) => i,
            None => {
                self.spaces.push((space, HashMap::new()));
                self.spaces.len() - 1
            }
        };
        &mut self.spaces[i].1
    }

    fn warm(&self) -> bool {
        self.cold == 0 && self.spaces.iter().any(|(_, m)| !m.is_empty())
    }

    /// What the memo may assume of a key: its value (`None`: absent), or nothing (`Err`) when
    /// the key was forgotten.
    fn assumption(&self, space: u8, key: &[u8]) -> Result<Option<Vec<u8>>, ()> {
        match self.space(space).and_then(|m| m.get(key)) {
            Some(known) => Ok(known.value.clone()),
            None if self.forgotten.is_empty()
                || !self.forgotten.contains(&key_hash(space, key)) =>
            {
                Ok(None)
            }
            None => Err(()),
        }
    }

    /// What the entries and forgotten keys cost the memo.
    fn cost(&self) -> usize {
        let entries: usize = self
            .spaces
            .iter()
            .flat_map(|(_, m)| m.iter())
            .map(|(k, v)| cost(k, v.value.as_deref()))
            .sum();
        entries + self.forgotten.len() * FORGOTTEN_COST
    }
}

/// What an entry costs the memo, roughly.
fn cost(key: &[u8], value: Option<&[u8]>) -> usize {
    64 + key.len() + value.map_or(0, <[u8]>::len)
}

impl Memo {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether a transaction that locked `user` committed since the memo was last cleared:
    /// the store's row in `memkv_stores` exists then (rows are never removed).
    pub(crate) fn knows(&self, user: &str) -> bool {
        self.lock().stores.contains_key(user)
    }

    /// The values the memo has for `(user, space, key)` each (`None`: absent or never seen,
    /// which a write assumes absent), under one lock; `None` unless every store is warm (the
    /// memo knows some of its entries, and no check failed lately) and no key was forgotten.
    pub(crate) fn answer(&self, keys: &[(&str, u8, &[u8])]) -> Option<Vec<Option<Vec<u8>>>> {
        let state = self.lock();
        keys.iter()
            .map(|(user, space, key)| {
                let store = state.stores.get(*user).filter(|s| s.warm())?;
                store.assumption(*space, key).ok()
            })
            .collect()
    }

    /// After a commit: `user`'s ranges `removed` are gone, entries `read` hold their given value
    /// now, and entries `written` too (kept only if the memo already had them). `assumed` says
    /// whether the transaction made assumptions (which the commit proved right).
    pub(crate) fn learn(
        &self,
        user: &str,
        removed: &[(u8, &[u8], &[u8])],
        read: &[Entry<'_>],
        written: &[Entry<'_>],
        assumed: bool,
    ) {
        let mut state = self.lock();
        let state = &mut *state;
        let generation = state.generation;
        let mut added = 0;
        let mut freed = 0;
        if !state.stores.contains_key(user) {
            // The store's own place counts too: a memo of many stores stays bounded.
            added += cost(user.as_bytes(), None);
        }
        let store = state.stores.entry(user.to_owned()).or_default();
        if assumed {
            store.penalty /= 2;
        } else {
            store.cold = store.cold.saturating_sub(1);
        }
        for (space, start, end) in removed {
            store.space_mut(*space).retain(|k, v| {
                let doomed = *start <= k.as_slice() && k.as_slice() < *end;
                if doomed {
                    freed += cost(k, v.value.as_deref());
                }
                !doomed
            });
        }
        let mut set = |space: u8, key: &[u8], value: Option<&[u8]>, only_known: bool| {
            let keep = value.is_none_or(|v| v.len() <= MAX_VALUE);
            if !only_known && !store.forgotten.is_empty() {
                // Read again: known, no longer forgotten.
                if store.forgotten.remove(&key_hash(space, key)) {
                    freed += FORGOTTEN_COST;
                }
            }
            let map = store.space_mut(space);
            // One lookup; a key known already is updated in place (no new key, and its value's
            // buffer reused): most keys a write learns are ones it assumed.
            let unlearn = match map.get_mut(key) {
                Some(known) => {
                    freed += cost(key, known.value.as_deref());
                    if keep {
                        added += cost(key, value);
                        match (&mut known.value, value) {
                            (Some(old), Some(new)) => {
                                old.clear();
                                old.extend_from_slice(new);
                            }
                            (slot, new) => *slot = new.map(<[u8]>::to_vec),
                        }
                        known.generation = generation;
                    }
                    !keep
                }
                None => {
                    if keep && !only_known {
                        added += cost(key, value);
                        let entry = Known {
                            value: value.map(<[u8]>::to_vec),
                            generation,
                        };
                        map.insert(key.to_vec(), entry);
                    }
                    false
                }
            };
            if unlearn {
                map.remove(key);
            }
        };
        for (space, key, value) in read {
            set(*space, key, *value, false);
        }
        for (space, key, value) in written {
            set(*space, key, *value, true);
        }
        state.bytes = (state.bytes + added).saturating_sub(freed);
        state.learned += added;
        if state.learned > GENERATION {
            state.generation = state.generation.wrapping_add(1);
            state.learned = 0;
        }
        if state.bytes > MAX_BYTES {
            state.forget_old();
        }
    }

    /// Forgets every store (the fast path was turned off).
    pub(crate) fn forget_all(&self) {
        let mut state = self.lock();
        state.stores.clear();
        state.bytes = 0;
    }

    /// A check of `user`'s entries failed: forget them, and assume nothing for a while.
    pub(crate) fn stale(&self, user: &str) {
        let mut state = self.lock();
        let state = &mut *state;
        if let Some(store) = state.stores.get_mut(user) {
            state.bytes = state.bytes.saturating_sub(store.cost());
            store.spaces.clear();
            store.forgotten.clear();
            store.penalty = (store.penalty * 2).clamp(MIN_PENALTY, MAX_PENALTY);
            store.cold = store.penalty;
        }
    }
}

impl State {
    /// Forgets the entries learned neither in this generation nor the one before, leaving
    /// their hashes; if that is not enough (every entry is that recent, or forgotten keys
    /// fill the memo), forgets every store whole.
    fn forget_old(&mut self) {
        let current = self.generation;
        let mut freed = 0;
        for store in self.stores.values_mut() {
            let forgotten = &mut store.forgotten;
            for (space, map) in &mut store.spaces {
                map.retain(|k, v| {
                    let recent = current.wrapping_sub(v.generation) <= 1;
                    if !recent {
                        freed += cost(k, v.value.as_deref());
                        if forgotten.insert(key_hash(*space, k)) {
                            freed = freed.saturating_sub(FORGOTTEN_COST);
                        }
                    }
                    recent
                });
            }
        }
        self.bytes = self.bytes.saturating_sub(freed);
        if self.bytes > MAX_BYTES / 4 * 3 {
            self.stores.clear();
            self.bytes = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry<'a>(space: u8, key: &'a [u8], value: Option<&'a [u8]>) -> Entry<'a> {
        (space, key, value)
    }

    fn has(memo: &Memo, user: &str, space: u8, key: &[u8]) -> bool {
        memo.lock().stores[user]
            .space(space)
            .is_some_and(|m| m.contains_key(key))
    }

    impl Memo {
        fn warm(&self, user: &str) -> bool {
            self.lock().stores.get(user).is_some_and(StoreMemo::warm)
        }

        fn get(&self, user: &str, space: u8, key: &[u8]) -> Option<Vec<u8>> {
            self.answer(&[(user, space, key)])
                .and_then(|mut v| v.pop())
                .flatten()
        }
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
        assert!(!has(&memo, "u", 6, b"id"));
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
        assert!(!has(&memo, "u", 4, b"big"));
        memo.learn("u", &[(3, b"d\0", b"d\x01")], &[], &[], false);
        assert_eq!(memo.get("u", 3, b"d\0a"), None);
        assert_eq!(memo.get("u", 3, b"d\0b"), None);
        assert_eq!(memo.get("u", 3, b"e"), Some(b"3".to_vec()));
        // A value that grew past the limit leaves the memo rather than stay stale.
        memo.learn("u", &[], &[], &[entry(3, b"e", Some(&big))], false);
        assert!(!has(&memo, "u", 3, b"e"));
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
    fn forgets_what_was_not_touched_lately_and_never_assumes_it_absent() {
        let memo = Memo::default();
        memo.learn("u", &[], &[entry(3, b"old", Some(b"node"))], &[], false);
        let value = vec![1u8; MAX_VALUE];
        let mut i = 0u32;
        // Every write touches the totals; each adds a node of its own.
        while has(&memo, "u", 3, b"old") {
            let key = i.to_be_bytes();
            let read = [entry(2, b"", Some(b"totals")), entry(3, &key, Some(&value))];
            memo.learn("u", &[], &read, &[], true);
            i += 1;
            assert!(i < 4 * (MAX_BYTES / MAX_VALUE) as u32, "never forgotten");
        }
        assert!(memo.lock().bytes <= MAX_BYTES);
        // The totals, touched by every write, stay; so do the latest nodes.
        assert_eq!(memo.get("u", 2, b""), Some(b"totals".to_vec()));
        assert!(has(&memo, "u", 3, &(i - 1).to_be_bytes()));
        // A forgotten key is not assumed absent: a write that needs it reads it. A key never
        // seen still is.
        assert_eq!(memo.answer(&[("u", 3, b"old")]), None);
        assert_eq!(memo.answer(&[("u", 3, b"new")]), Some(vec![None]));
        // Read again, it is known again.
        memo.learn("u", &[], &[entry(3, b"old", Some(b"node"))], &[], false);
        assert_eq!(
            memo.answer(&[("u", 3, b"old")]),
            Some(vec![Some(b"node".to_vec())])
        );
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
        let total: usize = memo
            .lock()
            .stores
            .values()
            .flat_map(|s| &s.spaces)
            .map(|(_, m)| m.len())
            .sum();
        assert!(total < MAX_BYTES / MAX_VALUE, "{total} entries kept");
    }
}
