//! Ranked search (BM25 on tantivy, kept current from the change log), on both backends: the same
//! top memories as tantivy's own BM25 over the same memories after writes of every kind, nothing
//! deleted, moved away, expired or of another store ever returned, the index rebuilt when the
//! log was trimmed past it, and the model-facing answers byte for byte.

use std::collections::BTreeMap;
use std::time::Duration;

use memkv::{ChangeRetention, Database, SearchMode, SearchRequest, SearchResults};
use serde_json::json;
use tantivy::collector::TopDocs;
use tantivy::query::QueryParser;
use tantivy::schema::{STORED, Schema, TEXT, Value as _};
use tantivy::{Index, TantivyDocument, doc};

use crate::util::{Clock, Fresh, each_backend};

fn run(db: &Database, user: &str, input: serde_json::Value) {
    let out = db.user(user).unwrap().execute_json(&input).unwrap();
    assert!(!out.is_error, "{input}: {}", out.content);
}

fn create(db: &Database, user: &str, path: &str, text: &str) {
    run(
        db,
        user,
        json!({"command": "create", "path": path, "file_text": text}),
    );
}

fn ranked(db: &Database, user: &str, query: &str, limit: usize) -> SearchResults {
    db.user(user)
        .unwrap()
        .search(&SearchRequest::new(query, SearchMode::Ranked).limit(limit))
        .unwrap()
}

fn paths(results: &SearchResults) -> Vec<String> {
    results.hits.iter().map(|h| h.path.clone()).collect()
}

/// A small deterministic generator (xorshift), so the corpus is the same on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    /// A word of a Zipf-like vocabulary: low numbers far more often.
    fn word(&mut self) -> String {
        let r = (self.next() % 1000) as f64 / 1000.0;
        format!("w{}", (r * r * r * 300.0) as u64)
    }
    fn text(&mut self) -> String {
        let lines = 1 + self.next() % 8;
        (0..lines)
            .map(|_| {
                let n = 1 + self.next() % 12;
                (0..n).map(|_| self.word()).collect::<Vec<_>>().join(" ")
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// tantivy's own BM25 over `files` (path and content, its default tokenizer, every word of the
/// query OR-ed): the top `n` paths.
fn reference(files: &BTreeMap<String, String>, query: &str, n: usize) -> Vec<String> {
    let mut schema = Schema::builder();
    let path = schema.add_text_field("path", TEXT | STORED);
    let content = schema.add_text_field("content", TEXT);
    let index = Index::create_in_ram(schema.build());
    let mut writer = index.writer_with_num_threads(1, 15_000_000).unwrap();
    for (p, c) in files {
        writer
            .add_document(doc!(path => p.as_str(), content => c.as_str()))
            .unwrap();
    }
    writer.commit().unwrap();
    let reader = index.reader().unwrap();
    let searcher = reader.searcher();
    let query = QueryParser::for_index(&index, vec![path, content])
        .parse_query(query)
        .unwrap();
    searcher
        .search(&query, &TopDocs::with_limit(n).order_by_score())
        .unwrap()
        .into_iter()
        .map(|(_, address)| {
            let d: TantivyDocument = searcher.doc(address).unwrap();
            d.get_first(path).unwrap().as_str().unwrap().to_owned()
        })
        .collect()
}

#[test]
fn the_top_ten_agree_with_tantivys_bm25_after_writes_of_every_kind() {
    each_backend(|| {
        let db = Database::builder().fresh().unwrap();
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let mut files = BTreeMap::new();
        let count = crate::util::sample(150, 400);
        for i in 0..count {
            let path = format!("/memories/d{}/n{i}.md", i % 7);
            let text = rng.text();
            create(&db, "u", &path, &text);
            files.insert(path, text);
        }
        // A first search builds the index; the writes after it reach it through the log.
        assert!(!ranked(&db, "u", "w1", 10).hits.is_empty());
        for i in 0..count / 3 {
            let path = format!("/memories/d{}/n{i}.md", i % 7);
            match i % 3 {
                0 => {
                    let text = rng.text();
                    run(
                        &db,
                        "u",
                        json!({"command": "create", "path": format!("/memories/new{i}.md"), "file_text": text}),
                    );
                    files.insert(format!("/memories/new{i}.md"), text);
                }
                1 => {
                    run(&db, "u", json!({"command": "delete", "path": path}));
                    files.remove(&path);
                }
                _ => {
                    let to = format!("/memories/moved/n{i}.md");
                    run(
                        &db,
                        "u",
                        json!({"command": "rename", "old_path": path, "new_path": to}),
                    );
                    let text = files.remove(&path).unwrap();
                    let extra = rng.text();
                    run(
                        &db,
                        "u",
                        json!({"command": "insert", "path": to, "insert_line": 0, "insert_text": format!("{extra}\n")}),
                    );
                    files.insert(to, format!("{extra}\n{text}"));
                }
            }
        }
        let queries = [
            "w0 w1", "w5", "w12 w40", "w3 w7 w9", "w100", "w2 w250", "w20", "w8 w1 w0",
        ];
        let mut agreed = 0;
        for q in queries {
            let ours = paths(&ranked(&db, "u", q, 10));
            let theirs = reference(&files, q, 10);
            assert!(ours.iter().all(|p| files.contains_key(p)), "{q}: {ours:?}");
            agreed += ours.iter().filter(|p| theirs.contains(p)).count();
        }
        let mean = agreed as f64 / queries.len() as f64;
        assert!(mean >= 8.0, "{mean} of the top 10 agree on average");
    });
}

#[test]
fn deleted_moved_expired_and_other_stores_memories_never_appear() {
    each_backend(|| {
        let clock = Clock::new();
        let db = clock
            .builder()
            .ttl(Duration::from_secs(86_400))
            .fresh()
            .unwrap();
        create(&db, "u", "/memories/keep.md", "pelican notes\n");
        create(&db, "u", "/memories/gone.md", "pelican pelican\n");
        create(
            &db,
            "other",
            "/memories/theirs.md",
            "pelican pelican pelican\n",
        );
        assert_eq!(
            paths(&ranked(&db, "u", "pelican", 10)),
            ["/memories/gone.md", "/memories/keep.md"]
        );
        run(
            &db,
            "u",
            json!({"command": "delete", "path": "/memories/gone.md"}),
        );
        run(
            &db,
            "u",
            json!({"command": "rename", "old_path": "/memories/keep.md", "new_path": "/memories/kept.md"}),
        );
        let found = ranked(&db, "u", "pelican", 10);
        assert_eq!(paths(&found), ["/memories/kept.md"]);
        assert_eq!(found.hits[0].lines[0].text, "pelican notes");
        // The path is searched too.
        assert_eq!(paths(&ranked(&db, "u", "kept", 10)), ["/memories/kept.md"]);
        assert!(ranked(&db, "u", "kept", 10).hits[0].lines.is_empty());
        // Expired, not yet swept: hidden at once.
        clock.advance(2 * 86_400_000);
        assert!(ranked(&db, "u", "pelican", 10).hits.is_empty());
        assert!(ranked(&db, "other", "pelican", 10).hits.is_empty());
    });
}

#[test]
fn a_log_trimmed_past_the_index_rebuilds_it() {
    each_backend(|| {
        let db = Database::builder()
            .change_retention(ChangeRetention {
                max_entries: Some(5),
                ..ChangeRetention::default()
            })
            .fresh()
            .unwrap();
        create(&db, "u", "/memories/a.md", "heron\n");
        assert_eq!(paths(&ranked(&db, "u", "heron", 10)), ["/memories/a.md"]);
        for i in 0..200 {
            create(&db, "u", &format!("/memories/f{i}.md"), "filler\n");
        }
        run(
            &db,
            "u",
            json!({"command": "delete", "path": "/memories/a.md"}),
        );
        create(&db, "u", "/memories/b.md", "heron heron\n");
        db.trim_changes().unwrap();
        assert_eq!(paths(&ranked(&db, "u", "heron", 10)), ["/memories/b.md"]);
        let page = ranked(&db, "u", "filler", 3);
        assert_eq!(page.hits.len(), 3);
        assert_eq!(page.more, 197);
    });
}

/// The model-facing answers of a ranked `memory_search`, byte for byte. The scores are BM25's
/// (k1 = 1.2, b = 0.75, Lucene's idf) worked by hand: for "paris europe", tz.md holds `paris`
/// twice and `europe` once in 7 words, trips.md `paris` once in 6 (the mean is 6.5 words, both
/// memories hold `paris`, one `europe`): 0.18232 × 1.34588 + 0.69315 × 0.96949 = 0.92, and
/// 0.18232 × 1.03249 = 0.19.
#[test]
fn ranked_answers_byte_for_byte() {
    each_backend(|| {
        let db = Database::builder().fresh().unwrap();
        create(
            &db,
            "u",
            "/memories/tz.md",
            "# Time\nlives in Paris\nTZ: Europe/Paris\n",
        );
        create(
            &db,
            "u",
            "/memories/trips.md",
            "Rome in May\nParis in June\n",
        );
        let store = db.user("u").unwrap();
        let answer = |input: serde_json::Value| store.answer_search(&input).unwrap().content;
        assert_eq!(
            answer(json!({"query": "paris europe"})),
            "/memories/tz.md (score 0.92)\n/memories/tz.md:2: lives in Paris\n/memories/tz.md:3: TZ: Europe/Paris\n/memories/trips.md (score 0.19)\n/memories/trips.md:2: Paris in June"
        );
        assert_eq!(
            answer(json!({"query": "paris", "limit": 1})),
            "/memories/tz.md (score 0.25)\n/memories/tz.md:2: lives in Paris\n/memories/tz.md:3: TZ: Europe/Paris\n[and 1 more matching memories: narrow the search with path_prefix or more words]"
        );
        assert_eq!(
            answer(json!({"query": "london"})),
            "No memory matches \"london\"."
        );
        assert_eq!(
            answer(json!({"query": "…"})),
            "Error: the query has no words to rank by; search it with mode literal or regex"
        );
    });
}

/// A redacted version is never found, by either kind of search: only current content is
/// searched, and a live memory's current version cannot be redacted.
#[test]
fn a_redacted_version_is_never_found() {
    each_backend(|| {
        let db = Database::builder().fresh().unwrap();
        create(&db, "u", "/memories/a.md", "the heron code is 1234\n");
        // The index holds the first version before it changes.
        assert_eq!(paths(&ranked(&db, "u", "heron", 10)), ["/memories/a.md"]);
        run(
            &db,
            "u",
            json!({"command": "str_replace", "path": "/memories/a.md", "old_str": "the heron code is 1234", "new_str": "nothing to see"}),
        );
        let store = db.user("u").unwrap();
        let versions = store.history(Some("/memories/a.md")).unwrap().unwrap();
        let first = versions.iter().map(|v| v.id).min().unwrap();
        assert!(store.redact(first).unwrap().is_ok());
        for mode in [SearchMode::Ranked, SearchMode::Literal] {
            let found = store.search(&SearchRequest::new("heron", mode)).unwrap();
            assert!(found.hits.is_empty(), "{mode:?}: {found:?}");
        }
        assert_eq!(paths(&ranked(&db, "u", "nothing", 10)), ["/memories/a.md"]);
    });
}

/// More than 256 memories changed since the last search, but fewer than half of those indexed:
/// the index applies each change in place (no rebuild), and finds exactly what the store holds;
/// `more` counts the matches past the page.
#[test]
fn many_changes_are_applied_in_place_and_counted_exactly() {
    each_backend(|| {
        let db = Database::builder().fresh().unwrap();
        for i in 0..700 {
            create(
                &db,
                "u",
                &format!("/memories/n{i}.md"),
                "an ordinary note\n",
            );
        }
        assert_eq!(ranked(&db, "u", "ordinary", 10).more, 690);
        assert_eq!(db.ranked_index_builds(), 1);
        for i in 0..300 {
            run(
                &db,
                "u",
                json!({"command": "str_replace", "path": format!("/memories/n{i}.md"), "old_str": "ordinary", "new_str": "zebra"}),
            );
        }
        run(
            &db,
            "u",
            json!({"command": "delete", "path": "/memories/n699.md"}),
        );
        let zebra = ranked(&db, "u", "zebra", 1000);
        assert_eq!(
            db.ranked_index_builds(),
            1,
            "applied in place, not built again"
        );
        assert_eq!(zebra.hits.len(), 300);
        assert_eq!(zebra.more, 0);
        let ordinary = ranked(&db, "u", "ordinary", 10);
        assert_eq!((ordinary.hits.len(), ordinary.more), (10, 389));
        assert!(paths(&ordinary).iter().all(|p| {
            let n: usize = p["/memories/n".len()..p.len() - 3].parse().unwrap();
            (300..699).contains(&n)
        }));
        // More than half of the store changed: built again.
        for i in 300..699 {
            run(
                &db,
                "u",
                json!({"command": "delete", "path": format!("/memories/n{i}.md")}),
            );
        }
        assert!(ranked(&db, "u", "ordinary", 10).hits.is_empty());
        assert_eq!(db.ranked_index_builds(), 2);
    });
}
