//! Ranked search: BM25 over each memory's path and content, on tantivy, one in-memory index per
//! store (`index`), with the words of `words`.
//!
//! A search first brings its store's index up to the change log's end (building it on the
//! store's first ranked search in this process), so it never trails a commit that finished
//! before the search began. Every result is then checked in one read snapshot of the store: a
//! memory that is no longer at its path with its id (deleted, moved, another store's), or that
//! has expired, is left out, even if a commit came between the index's catch-up and the check.
//! The lines shown are read from that snapshot.
//!
//! The indexes live in the [`crate::Database`] that searched, at most [`MAX_STORES`] stores and
//! [`MAX_BYTES`] of index memory (each index's segments and paths), the least recently searched
//! dropped first; nothing is
//! written to disk, so there is no index file to damage, migrate or verify: a process builds
//! each store's index again on its first ranked search.

mod index;
mod words;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use index::StoreIndex;

use super::grep::with_context;
use super::{SearchHit, SearchRequest, SearchResults};
use crate::error::Error;
use crate::history::MemoryId;
use crate::layout::Node;
use crate::path::MemoryPath;
use crate::pipeline::Scope;
use crate::storage::Backend;
use crate::tree::TreeRead;

/// The most stores whose index one database keeps.
pub const MAX_STORES: usize = 16;

/// The most memory, in bytes, the kept indexes may take together (their segments, as tantivy
/// counts them, and their paths; the one being searched is kept whatever its size).
pub const MAX_BYTES: u64 = 256 << 20;

/// The most lines shown of each memory found: those holding the most of the query's words.
pub const BEST_LINES: usize = 3;

/// A store's index, built on first use.
#[derive(Default)]
struct Entry {
    index: Mutex<Option<StoreIndex>>,
    bytes: AtomicU64,
}

/// The entries by store, and the stores in the order of their last searches (most recent
/// last).
type Kept = (HashMap<String, Arc<Entry>>, Vec<String>);

/// The ranked-search indexes of one database (see the module).
#[derive(Default)]
pub(crate) struct Indexes {
    stores: Mutex<Kept>,
    /// Held while an index is built: one build at a time, so that the builds' working memory
    /// (two threads of 30 MB) is bounded however many stores are searched at once.
    building: Mutex<()>,
    /// Indexes built so far (for tests: an index applied in place builds none).
    builds: AtomicU64,
}

impl std::fmt::Debug for Indexes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Indexes").finish_non_exhaustive()
    }
}

impl Indexes {
    /// How many indexes were built so far.
    pub(crate) fn builds(&self) -> u64 {
        self.builds.load(Ordering::Relaxed)
    }

    /// The entry of `store`, made if missing, marked as the most recently searched; drops the
    /// least recently searched entries beyond the bounds.
    fn entry(&self, store: &str) -> Arc<Entry> {
        let mut guard = self.stores.lock().unwrap_or_else(PoisonError::into_inner);
        let (stores, order) = &mut *guard;
        let entry = Arc::clone(stores.entry(store.to_owned()).or_default());
        order.retain(|s| s != store);
        order.push(store.to_owned());
        loop {
            let total: u64 = stores
                .values()
                .map(|e| e.bytes.load(Ordering::Relaxed))
                .sum();
            if order.len() <= 1 || (order.len() <= MAX_STORES && total <= MAX_BYTES) {
                break;
            }
            let oldest = order.remove(0);
            stores.remove(&oldest);
        }
        entry
    }
}

/// The query's words, each once, in order.
fn query_words(query: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for w in words::words(query) {
        if !out.contains(&w) {
            out.push(w);
        }
    }
    out
}

/// Runs a ranked search over the memories at or below `prefix`.
pub(super) fn run(
    scope: Scope<'_>,
    indexes: &Indexes,
    prefix: &MemoryPath,
    request: &SearchRequest,
) -> Result<SearchResults, Error> {
    let words = query_words(&request.query);
    if words.is_empty() {
        return Err(Error::InvalidSearch(crate::messages::search_no_words()));
    }
    let entry = indexes.entry(scope.user);
    let ranked = {
        let mut slot = entry.index.lock().unwrap_or_else(PoisonError::into_inner);
        let current = match slot.as_mut() {
            Some(index) => index.catch_up(scope)?,
            None => false,
        };
        if !current {
            // A failed build leaves no index: the next search builds again.
            *slot = None;
            let _one = indexes
                .building
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            *slot = Some(StoreIndex::build(scope)?);
            indexes.builds.fetch_add(1, Ordering::Relaxed);
        }
        let index = slot.as_ref().expect("built above");
        entry.bytes.store(index.bytes, Ordering::Relaxed);
        index.search(&words)?
    };
    let txn = scope.engine.backend.begin_read()?;
    let tree = TreeRead::new(&txn, scope.user);
    let expired = scope.engine.expired(scope.user, &tree)?;
    let mut results = SearchResults::default();
    // Past the page, with nothing to leave out by path (no prefix, nothing expired), the rest
    // of the index's matches are counted as they are, each not read again (a memory deleted by
    // a commit since the index caught up may be among them).
    let whole_store = prefix.is_root() && expired.is_empty();
    let mut ranked = ranked.into_iter();
    for (score, memory, path) in ranked.by_ref() {
        if whole_store && results.hits.len() >= request.limit {
            results.more += 1;
            break;
        }
        let Ok(path) = MemoryPath::parse(&path) else {
            continue;
        };
        if !(path == *prefix || path.is_strictly_inside(prefix)) || expired.contains(&path) {
            continue;
        }
        // Still this memory, at this path, now.
        match tree.node(&path)? {
            Some(Node::File(meta)) if meta.memory == memory => {}
            _ => continue,
        }
        if results.hits.len() >= request.limit {
            results.more += 1;
            continue;
        }
        let Some(text) = tree.content(&path)? else {
            continue;
        };
        let best = best_lines(&text, &words);
        results.hits.push(SearchHit {
            path: path.to_string(),
            memory_id: MemoryId(memory),
            score: Some(score),
            lines: with_context(&text, &best, request.context),
        });
    }
    results.more += ranked.len() as u64;
    Ok(results)
}

/// The byte ranges of the [`BEST_LINES`] lines of `text` holding the most of `words` (the
/// earlier line first on a tie), in line order; none when only the path matched.
fn best_lines(text: &str, words: &[String]) -> Vec<(usize, usize)> {
    let mut scored: Vec<(usize, (usize, usize))> = Vec::new();
    let mut start = 0;
    for line in text.split_inclusive('\n') {
        let body = line.strip_suffix('\n').unwrap_or(line);
        let held = {
            let mut seen: Vec<&String> = Vec::new();
            for w in words::raw_words(body) {
                if let Some(q) = words.iter().find(|q| words::same(w, q))
                    && !seen.contains(&q)
                {
                    seen.push(q);
                }
            }
            seen.len()
        };
        if held > 0 {
            scored.push((held, (start, start + body.len())));
        }
        start += line.len();
    }
    scored.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.0.cmp(&b.1.0)));
    scored.truncate(BEST_LINES);
    let mut best: Vec<(usize, usize)> = scored.into_iter().map(|(_, range)| range).collect();
    best.sort_unstable();
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_least_recently_searched_stores_are_dropped_beyond_the_bounds() {
        let indexes = Indexes::default();
        for i in 0..MAX_STORES + 3 {
            indexes.entry(&format!("s{i}"));
        }
        indexes.entry("s3"); // searched again: kept
        let kept = |i: usize| {
            indexes
                .stores
                .lock()
                .unwrap()
                .0
                .contains_key(&format!("s{i}"))
        };
        assert!(!kept(0) && !kept(1) && !kept(2) && kept(3) && kept(MAX_STORES + 2));
        assert_eq!(indexes.stores.lock().unwrap().0.len(), MAX_STORES);
        // Over the byte bound, only the store being searched is kept.
        indexes
            .entry("s4")
            .bytes
            .store(MAX_BYTES + 1, Ordering::Relaxed);
        indexes.entry("big");
        let guard = indexes.stores.lock().unwrap();
        assert_eq!(guard.1, ["big"]);
    }

    #[test]
    fn the_best_lines_hold_the_most_query_words() {
        let words = query_words("Paris timezone PARIS");
        assert_eq!(words, ["paris", "timezone"]);
        let text = "one\nParis\ntimezone of Paris\nnothing\nparis paris\nTimezone\n";
        let best: Vec<&str> = best_lines(text, &words)
            .iter()
            .map(|&(s, e)| &text[s..e])
            .collect();
        assert_eq!(best, ["Paris", "timezone of Paris", "paris paris"]);
        assert!(best_lines("no match here", &words).is_empty());
    }
}
