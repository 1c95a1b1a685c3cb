//! One store's tantivy index: a document per memory (its path and content as words, its id as
//! a fast field), in memory, kept current from the change log.
//!
//! It is built from one snapshot of the store, after reading the log's last `seq`; every entry
//! of the store after that `seq` is applied before the next search (a memory created, changed
//! or moved is read again and replaced, a deleted one removed). Applying an entry that the
//! snapshot already held changes nothing, so no change is ever missed, and the index holds what
//! the store held at some moment no earlier than the search began. When the log no longer holds
//! the entries after its `seq` (retention trimmed them), or too many memories changed to read
//! one at a time, the index is built again.

use std::collections::{HashMap, HashSet};
use std::ops::ControlFlow;

use tantivy::collector::TopDocs;
use tantivy::query::{BooleanQuery, Occur, Query, TermQuery};
use tantivy::schema::{
    FAST, Field, INDEXED, IndexRecordOption, Schema, TextFieldIndexing, TextOptions,
};
use tantivy::{Index, IndexReader, IndexWriter, ReloadPolicy, TantivyDocument, Term};

use super::words::{TOKENIZER, Words};
use crate::changes::ChangeEntry;
use crate::error::Error;
use crate::history::MemoryId;
use crate::history::change::ChangeKind;
use crate::pipeline::Scope;
use crate::storage::Backend;
use crate::tree::TreeRead;

/// More memories changed than this since the last search, and more than half of those indexed:
/// the index is built again rather than each of them read alone and replaced.
const REBUILD_AFTER: usize = 256;

/// The indexing arena of the writer that applies changes (tantivy's minimum: one thread).
const WRITER_ARENA: usize = 15_000_000;

/// A build's indexing threads at most, and each one's arena. Two threads of 30 MB build a store
/// at the hosted limits (2,000 memories, 100 MB) in 2.6 s where one of 15 MB took 7.3 s, as
/// fewer, larger segments leave less to merge (docs/perf-log.md, "Ranked search at the hosted
/// limits").
const BUILD_THREADS: usize = 2;
const BUILD_ARENA: usize = 30_000_000;

/// Entries read from the log per page while catching up.
const PAGE: usize = 1000;

#[derive(Clone, Copy)]
struct Fields {
    memory: Field,
    path: Field,
    content: Field,
}

/// A store's index (see the module).
pub(super) struct StoreIndex {
    index: Index,
    reader: IndexReader,
    fields: Fields,
    /// Every entry of the store's feed up to this number is applied.
    seq: u64,
    /// Each indexed memory's path (`/memories/…`).
    paths: HashMap<u64, String>,
    /// Bytes of memory the index takes (its segments, as tantivy counts them, and the paths):
    /// what the cache's bound counts.
    pub(super) bytes: u64,
}

fn engine_error(e: impl std::fmt::Display) -> Error {
    Error::Storage(format!("the search index failed: {e}").into())
}

fn schema() -> (Schema, Fields) {
    let mut builder = Schema::builder();
    let text = TextOptions::default().set_indexing_options(
        TextFieldIndexing::default()
            .set_tokenizer(TOKENIZER)
            .set_index_option(IndexRecordOption::WithFreqs),
    );
    let memory = builder.add_u64_field("memory", INDEXED | FAST);
    let path = builder.add_text_field("path", text.clone());
    let content = builder.add_text_field("content", text);
    (
        builder.build(),
        Fields {
            memory,
            path,
            content,
        },
    )
}

/// The text indexed for a path: its segments below `/memories`, with each `.` a word break, so
/// that `/memories/billing/plan.md` is found by `billing`, `plan` and `md` (Unicode word
/// boundaries keep `plan.md` one word, as they keep `e.g`).
fn path_words(path: &str) -> String {
    path.strip_prefix(crate::path::ROOT)
        .unwrap_or(path)
        .replace('.', " ")
}

impl StoreIndex {
    fn empty(seq: u64) -> Result<StoreIndex, Error> {
        let (schema, fields) = schema();
        let index = Index::create_in_ram(schema);
        index.tokenizers().register(TOKENIZER, Words);
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()
            .map_err(engine_error)?;
        Ok(StoreIndex {
            index,
            reader,
            fields,
            seq,
            paths: HashMap::new(),
            bytes: 0,
        })
    }

    /// The writer of a build: an indexing thread per core, up to [`BUILD_THREADS`], each with
    /// [`BUILD_ARENA`] (memory held only while the index is built).
    fn build_writer(&self) -> Result<IndexWriter<TantivyDocument>, Error> {
        let threads = std::thread::available_parallelism()
            .map_or(1, usize::from)
            .min(BUILD_THREADS);
        self.index
            .writer_with_num_threads(threads, BUILD_ARENA * threads)
            .map_err(engine_error)
    }

    fn writer(&self) -> Result<IndexWriter<TantivyDocument>, Error> {
        self.index
            .writer_with_num_threads(1, WRITER_ARENA)
            .map_err(engine_error)
    }

    /// The index of `scope`'s store as it is now.
    pub(super) fn build(scope: Scope<'_>) -> Result<StoreIndex, Error> {
        // The store's feed's end before the snapshot: whatever commits after it is applied again
        // later.
        let seq = crate::admin::store_last_change(scope.engine, scope.user)?;
        let mut built = StoreIndex::empty(seq)?;
        let txn = scope.engine.backend.begin_read()?;
        let tree = TreeRead::new(&txn, scope.user);
        let expired = scope.engine.expired(scope.user, &tree)?;
        let mut writer = built.build_writer()?;
        let mut failed = None;
        tree.files_with_contents(&mut |path, meta| {
            if expired.contains(&path) {
                return Ok(ControlFlow::Continue(()));
            }
            let content = tree
                .content(&path)?
                .ok_or_else(|| Error::Corrupt(format!("{path} has no content")))?;
            if let Err(e) = built.add(&mut writer, meta.memory, &path.to_string(), &content) {
                failed = Some(e);
                return Ok(ControlFlow::Break(()));
            }
            Ok(ControlFlow::Continue(()))
        })?;
        if let Some(e) = failed {
            return Err(e);
        }
        built.commit(writer)?;
        Ok(built)
    }

    fn add(
        &mut self,
        writer: &mut IndexWriter<TantivyDocument>,
        memory: u64,
        path: &str,
        content: &str,
    ) -> Result<(), Error> {
        let mut doc = TantivyDocument::default();
        doc.add_u64(self.fields.memory, memory);
        doc.add_text(self.fields.path, path_words(path));
        doc.add_text(self.fields.content, content);
        writer.add_document(doc).map_err(engine_error)?;
        self.paths.insert(memory, path.to_owned());
        Ok(())
    }

    fn remove(&mut self, writer: &mut IndexWriter<TantivyDocument>, memory: u64) {
        writer.delete_term(Term::from_field_u64(self.fields.memory, memory));
        self.paths.remove(&memory);
    }

    fn commit(&mut self, mut writer: IndexWriter<TantivyDocument>) -> Result<(), Error> {
        writer.commit().map_err(engine_error)?;
        writer.wait_merging_threads().map_err(engine_error)?;
        self.reader.reload().map_err(engine_error)?;
        let segments = self
            .reader
            .searcher()
            .space_usage()
            .map_or(0, |u| u.total().get_bytes());
        // Each path: its bytes, the map's entry and its key.
        let paths: u64 = self.paths.values().map(|p| p.len() as u64 + 48).sum();
        self.bytes = segments + paths;
        Ok(())
    }

    /// Applies every entry of the store's after [`Self::seq`]; `Ok(false)` when the index must
    /// be built again instead (the log was trimmed past it, or too much changed).
    pub(super) fn catch_up(&mut self, scope: Scope<'_>) -> Result<bool, Error> {
        let mut upserts: HashSet<u64> = HashSet::new();
        let mut removals: HashSet<u64> = HashSet::new();
        let mut after = self.seq;
        loop {
            let page = match crate::admin::changes(scope.engine, after, PAGE, Some(scope.user)) {
                Ok(page) => page,
                Err(Error::CursorExpired { .. } | Error::CursorAhead { .. }) => return Ok(false),
                Err(e) => return Err(e),
            };
            for ChangeEntry { change, .. } in &page.entries {
                match (change.kind, change.memory) {
                    (ChangeKind::StoreDeleted, _) => return Ok(false),
                    (ChangeKind::MemoryDeleted, Some(MemoryId(m))) => {
                        upserts.remove(&m);
                        removals.insert(m);
                    }
                    (
                        ChangeKind::MemoryCreated
                        | ChangeKind::MemoryModified
                        | ChangeKind::MemoryRenamed,
                        Some(MemoryId(m)),
                    ) => {
                        removals.remove(&m);
                        upserts.insert(m);
                    }
                    // A redaction erases a version that no memory holds now; a store's own
                    // record is not searched.
                    _ => {}
                }
            }
            let changed = upserts.len() + removals.len();
            if changed > REBUILD_AFTER && changed > self.paths.len() / 2 {
                return Ok(false);
            }
            let moved = page.next_after != after;
            after = page.next_after;
            if !moved {
                break;
            }
        }
        if upserts.is_empty() && removals.is_empty() {
            self.seq = after;
            return Ok(true);
        }
        let mut writer = self.writer()?;
        for m in removals {
            self.remove(&mut writer, m);
        }
        for m in upserts {
            self.remove(&mut writer, m);
            // As it is now (it may have changed again since the entry: that entry comes next).
            if let Some(memory) = crate::memories::memory(scope, MemoryId(m), true)?
                && let Some(content) = memory.content
            {
                self.add(&mut writer, m, &memory.path, &content)?;
            }
        }
        self.commit(writer)?;
        self.seq = after;
        Ok(true)
    }

    /// The memories that hold any of `words`, best first: `(score, memory, path)`. BM25 over the
    /// path and the content (tantivy's: k1 = 1.2, b = 0.75, Lucene's idf), each word once.
    pub(super) fn search(&self, words: &[String]) -> Result<Vec<(f32, u64, String)>, Error> {
        let searcher = self.reader.searcher();
        let docs = searcher.num_docs();
        if docs == 0 || words.is_empty() {
            return Ok(Vec::new());
        }
        let mut clauses: Vec<(Occur, Box<dyn Query>)> = Vec::new();
        for word in words {
            for field in [self.fields.path, self.fields.content] {
                clauses.push((
                    Occur::Should,
                    Box::new(TermQuery::new(
                        Term::from_field_text(field, word),
                        IndexRecordOption::WithFreqs,
                    )),
                ));
            }
        }
        let query = BooleanQuery::new(clauses);
        let limit = usize::try_from(docs).unwrap_or(usize::MAX).max(1);
        let top = searcher
            .search(&query, &TopDocs::with_limit(limit).order_by_score())
            .map_err(engine_error)?;
        let mut out = Vec::with_capacity(top.len());
        for (score, address) in top {
            let column = searcher
                .segment_reader(address.segment_ord)
                .fast_fields()
                .u64("memory")
                .map_err(engine_error)?;
            let Some(memory) = column.first(address.doc_id) else {
                continue;
            };
            if let Some(path) = self.paths.get(&memory) {
                out.push((score, memory, path.clone()));
            }
        }
        Ok(out)
    }
}
