//! Exact search (`MemoryStore::search`, `memory_search`), on both backends: against a simple
//! model (each line on its own), against ripgrep over the same tree written to a directory, and
//! the model-facing answers byte for byte.

use std::collections::BTreeMap;
use std::process::Command as Process;
use std::time::Duration;

use memkv::{Database, Error, SearchMode, SearchRequest, SearchResults};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use regex::RegexBuilder;
use serde_json::{Value, json};

use crate::util::{Clock, Fresh, backends, each_backend, using};

fn create(db: &Database, user: &str, path: &str, text: &str) {
    let input = json!({"command": "create", "path": path, "file_text": text});
    let out = db.user(user).unwrap().execute_json(&input).unwrap();
    assert!(!out.is_error, "{}", out.content);
}

fn search(db: &Database, user: &str, request: &SearchRequest) -> SearchResults {
    db.user(user).unwrap().search(request).unwrap()
}

/// (path, line number, line) of every matching line.
fn matches(results: &SearchResults) -> Vec<(String, u64, String)> {
    results
        .hits
        .iter()
        .flat_map(|h| {
            h.lines
                .iter()
                .filter(|l| l.is_match)
                .map(|l| (h.path.clone(), l.line_number, l.text.clone()))
        })
        .collect()
}

/// The model: each file's lines (split at `\n`, a final one ending the last line), matched one
/// at a time.
fn model(files: &BTreeMap<String, String>, request: &SearchRequest) -> Vec<(String, u64, String)> {
    let pattern = match request.mode {
        SearchMode::Regex => request.query.clone(),
        _ => regex::escape(&request.query),
    };
    let re = RegexBuilder::new(&pattern)
        .case_insensitive(request.case_insensitive)
        .build()
        .unwrap();
    let mut out = Vec::new();
    for (path, text) in files {
        let body = text.strip_suffix('\n').unwrap_or(text);
        if text.is_empty() {
            continue;
        }
        for (i, line) in body.split('\n').enumerate() {
            if re.is_match(line) {
                out.push((path.clone(), i as u64 + 1, line.to_owned()));
            }
        }
    }
    out
}

/// The store's files in its path order (segment by segment), as `files()` lists them.
fn files_of(db: &Database, user: &str) -> Vec<(String, String)> {
    let store = db.user(user).unwrap();
    store
        .files()
        .unwrap()
        .into_iter()
        .map(|f| {
            let path = f.path.to_string();
            let text = store.read_file(&path).unwrap().unwrap();
            (path, text)
        })
        .collect()
}

const WORDS: &[&str] = &[
    "alpha",
    "Alpha",
    "ALPHA",
    "beta",
    "Straße",
    "STRASSE",
    "café",
    "CAFÉ",
    "x",
    "a.b",
    "a b",
    "42",
    "1999",
    "#",
    "  ",
    "\t",
    "\r",
    "日本語",
    "🦀",
    "foo(bar)",
    "naïve",
    "Paris",
    "paris",
];

fn content() -> impl Strategy<Value = String> {
    prop::collection::vec(
        (
            prop::collection::vec(prop::sample::select(WORDS), 0..5),
            any::<bool>(),
        ),
        0..8,
    )
    .prop_map(|lines| {
        lines
            .into_iter()
            .map(|(words, end)| words.join(if end { " " } else { "" }))
            .collect::<Vec<_>>()
            .join("\n")
    })
    .prop_flat_map(|body| prop::sample::select(vec!["", "\n"]).prop_map(move |e| body.clone() + e))
}

fn queries() -> impl Strategy<Value = (String, SearchMode, bool)> {
    let literal = prop::sample::select(WORDS)
        .prop_map(|w| (w.to_owned(), SearchMode::Literal))
        .boxed();
    let regex = prop::sample::select(vec![
        r"\bal\w*",
        "^#",
        "[0-9]{2,}",
        "^$",
        r"\s$",
        "a.b",
        "^[A-Z]",
        "é|ß",
        r"(?i)paris\b",
        "x*",
        r"a\sb",
    ])
    .prop_map(|r| (r.to_owned(), SearchMode::Regex))
    .boxed();
    (prop_oneof![literal, regex], any::<bool>()).prop_map(|((q, m), ci)| (q, m, ci))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(crate::util::sample(24, 200)))]

    #[test]
    fn matches_are_each_line_matched_alone(
        contents in prop::collection::vec(content(), 1..6),
        searches in prop::collection::vec(queries(), 1..6),
    ) {
        for backend in backends() {
            let _on = using(backend);
            let db = Database::builder().fresh().unwrap();
            let mut files = BTreeMap::new();
            for (i, text) in contents.iter().enumerate() {
                let path = format!("/memories/d{}/f{i}.md", i % 2);
                create(&db, "u", &path, text);
                files.insert(path, text.clone());
            }
            for (query, mode, ci) in &searches {
                let request = SearchRequest::new(query.clone(), *mode)
                    .case_insensitive(*ci)
                    .limit(1000);
                let found = search(&db, "u", &request);
                prop_assert_eq!(matches(&found), model(&files, &request), "{:?}", request);
                prop_assert_eq!(found.more, 0);
            }
        }
    }
}

#[test]
fn prefix_limit_context_and_what_is_left_out() {
    each_backend(|| {
        let db = Database::builder().fresh().unwrap();
        create(
            &db,
            "u",
            "/memories/notes/tz.md",
            "# Timezone\nlives in Paris\nTZ: Europe/Paris\n",
        );
        create(&db, "u", "/memories/notes2.md", "Paris again\n");
        create(
            &db,
            "u",
            "/memories/notes/deep/x.md",
            "1\n2\n3 Paris\n4\n5\n6\n7 Paris\n",
        );
        create(&db, "other", "/memories/secret.md", "Paris is elsewhere\n");
        let all = search(&db, "u", &SearchRequest::new("Paris", SearchMode::Literal));
        let paths: Vec<&str> = all.hits.iter().map(|h| h.path.as_str()).collect();
        // Path order, segment by segment; another store's memory never appears.
        assert_eq!(
            paths,
            [
                "/memories/notes/deep/x.md",
                "/memories/notes/tz.md",
                "/memories/notes2.md"
            ]
        );
        assert_eq!(all.matching_lines(), 5);
        // A prefix is whole segments: /memories/notes is not /memories/notes2.md.
        let under = search(
            &db,
            "u",
            &SearchRequest::new("Paris", SearchMode::Literal).path_prefix("/memories/notes"),
        );
        assert_eq!(under.matching_lines(), 4);
        let file = search(
            &db,
            "u",
            &SearchRequest::new("Paris", SearchMode::Literal).path_prefix("/memories/notes2.md"),
        );
        assert_eq!(
            matches(&file),
            [("/memories/notes2.md".into(), 1, "Paris again".into())]
        );
        let capped = search(
            &db,
            "u",
            &SearchRequest::new("Paris", SearchMode::Literal).limit(2),
        );
        assert_eq!(capped.matching_lines(), 2);
        assert_eq!(capped.more, 3);
        let context = search(
            &db,
            "u",
            &SearchRequest::new("Paris", SearchMode::Literal)
                .path_prefix("/memories/notes/deep")
                .context(1),
        );
        let shown: Vec<(u64, bool)> = context.hits[0]
            .lines
            .iter()
            .map(|l| (l.line_number, l.is_match))
            .collect();
        assert_eq!(
            shown,
            [(2, false), (3, true), (4, false), (6, false), (7, true)]
        );
        let listed = db
            .user("u")
            .unwrap()
            .list_memories("/memories", 0, None, 100, false)
            .unwrap()
            .unwrap();
        let id = listed.items.iter().find_map(|item| match item {
            memkv::ListItem::Memory(m) if m.path == "/memories/notes2.md" => Some(m.id),
            _ => None,
        });
        assert_eq!(Some(file.hits[0].memory_id), id);
    });
}

#[test]
fn deleted_and_expired_memories_are_never_found() {
    each_backend(|| {
        let clock = Clock::new();
        let db = clock
            .builder()
            .ttl(Duration::from_secs(86_400))
            .fresh()
            .unwrap();
        create(&db, "u", "/memories/old.md", "needle\n");
        create(&db, "u", "/memories/gone.md", "needle\n");
        let store = db.user("u").unwrap();
        let del = store
            .execute_json(&json!({"command": "delete", "path": "/memories/gone.md"}))
            .unwrap();
        assert!(!del.is_error);
        let request = SearchRequest::new("needle", SearchMode::Literal);
        assert_eq!(search(&db, "u", &request).matching_lines(), 1);
        clock.advance(2 * 86_400_000);
        // Expired but not yet swept: hidden, as `view` hides it.
        assert!(search(&db, "u", &request).hits.is_empty());
    });
}

#[test]
fn refused_searches_name_the_reason() {
    each_backend(|| {
        let db = Database::builder().fresh().unwrap();
        let store = db.user("u").unwrap();
        let refused = |r: SearchRequest| match store.search(&r) {
            Err(Error::InvalidSearch(why)) => why,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            refused(SearchRequest::new("", SearchMode::Literal)),
            "the query is empty"
        );
        assert_eq!(
            refused(SearchRequest::new("x".repeat(1001), SearchMode::Literal)),
            "the query is 1001 bytes; the most is 1000"
        );
        assert_eq!(
            refused(SearchRequest::new("a\nb", SearchMode::Literal)),
            "the query holds a line break; matches are within one line"
        );
        assert_eq!(
            refused(SearchRequest::new("a", SearchMode::Literal).limit(0)),
            "the limit must be 1 to 1000, not 0"
        );
        assert_eq!(
            refused(SearchRequest::new("a", SearchMode::Literal).context(11)),
            "the context must be 0 to 10 lines, not 11"
        );
        assert!(
            refused(SearchRequest::new("(", SearchMode::Regex))
                .starts_with("the regular expression is invalid: regex parse error:")
        );
        assert!(matches!(
            store.search(&SearchRequest::new("a", SearchMode::Literal).path_prefix("/etc")),
            Err(Error::InvalidPath { .. })
        ));
    });
}

/// The model-facing answers of `memory_search`, byte for byte (docs/search.md).
#[test]
fn memory_search_answers_byte_for_byte() {
    each_backend(|| {
        let db = Database::builder().fresh().unwrap();
        create(
            &db,
            "u",
            "/memories/a.md",
            "one\ntwo needle\nthree\nfour\nfive needle\n",
        );
        create(&db, "u", "/memories/b.md", "needle\n");
        let store = db.user("u").unwrap();
        let answer = |input: Value| {
            let out = store.answer_search(&input).unwrap();
            (out.content, out.is_error)
        };
        assert_eq!(
            answer(json!({"query": "needle", "mode": "literal"})),
            (
                "/memories/a.md:2: two needle\n/memories/a.md:5: five needle\n/memories/b.md:1: needle"
                    .into(),
                false
            )
        );
        assert_eq!(
            answer(json!({"query": "needle", "mode": "literal", "context": 1, "path_prefix": "/memories/a.md"})),
            (
                "/memories/a.md-1- one\n/memories/a.md:2: two needle\n/memories/a.md-3- three\n/memories/a.md-4- four\n/memories/a.md:5: five needle"
                    .into(),
                false
            )
        );
        assert_eq!(
            answer(json!({"query": "NEEDLE", "mode": "literal", "case_insensitive": true, "limit": 1})),
            (
                "/memories/a.md:2: two needle\n[and 2 more matching lines: narrow the search with path_prefix or a longer query]"
                    .into(),
                false
            )
        );
        assert_eq!(
            answer(
                json!({"query": "o", "mode": "literal", "context": 1, "limit": 1, "path_prefix": "/memories/a.md"})
            )
            .0,
            "/memories/a.md:1: one\n/memories/a.md-2- two needle\n[and 2 more matching lines: narrow the search with path_prefix or a longer query]"
        );
        assert_eq!(
            answer(json!({"query": "five", "mode": "literal", "context": 1})).0,
            "/memories/a.md-4- four\n/memories/a.md:5: five needle"
        );
        assert_eq!(
            answer(json!({"query": "needle", "mode": "literal", "context": 2, "limit": 1000})).0,
            "/memories/a.md-1- one\n/memories/a.md:2: two needle\n/memories/a.md-3- three\n/memories/a.md-4- four\n/memories/a.md:5: five needle\n--\n/memories/b.md:1: needle"
        );
        assert_eq!(
            answer(json!({"query": "nee+dle$", "mode": "regex", "path_prefix": "/memories/b.md"})),
            ("/memories/b.md:1: needle".into(), false)
        );
        assert_eq!(
            answer(json!({"query": "haystack"})),
            ("No memory matches \"haystack\".".into(), false)
        );
        assert_eq!(
            answer(json!({"query": 3})),
            ("Error: `query` must be a string".into(), true)
        );
        assert_eq!(
            answer(json!({"query": "a", "mode": "fuzzy"})),
            (
                "Error: `mode` must be ranked, literal or regex, not \"fuzzy\"".into(),
                true
            )
        );
        assert_eq!(
            answer(json!({"query": "a", "glob": "*.md"})),
            ("Error: unknown parameter `glob`".into(), true)
        );
        assert_eq!(
            answer(json!({"query": "a", "path_prefix": "/tmp"})),
            (
                "Error: Path must start with /memories, got: /tmp".into(),
                true
            )
        );
        assert_eq!(
            answer(json!({"query": "(", "mode": "regex"})),
            (
                "Error: the regular expression is invalid: regex parse error:\n    (\n    ^\nerror: unclosed group"
                    .into(),
                true
            )
        );
    });
}

/// An exact search stops when its time budget runs out and counts what it did not search; the
/// tool's answer says so. (A zero budget runs out before the first memory.)
#[test]
fn a_search_out_of_time_counts_what_it_did_not_search() {
    each_backend(|| {
        let db = Database::builder().fresh().unwrap();
        for i in 0..5 {
            create(&db, "u", &format!("/memories/{i}.md"), "needle\n");
        }
        let mut request = SearchRequest::new("needle", SearchMode::Literal);
        request.time_budget = std::time::Duration::ZERO;
        let out = search(&db, "u", &request);
        assert_eq!((out.hits.len(), out.unsearched), (0, 5));
        request.time_budget = std::time::Duration::from_millis(0);
        let said = db.user("u").unwrap().search_output(&request).unwrap();
        assert_eq!(
            said.content,
            "No memory matches \"needle\".\n[The search stopped after 0 s: 5 memories were not searched.]"
        );
        request.time_budget = std::time::Duration::from_secs(3);
        assert!(matches!(
            db.user("u").unwrap().search(&request),
            Err(Error::InvalidSearch(m)) if m == "the time budget must be at most 2 s"
        ));
    });
}

/// Long answers stop at `view`'s character limit and count the rest.
#[test]
fn answers_are_capped_like_view() {
    let db = Database::builder().view_max_chars(100).fresh().unwrap();
    let text: String = (0..30).map(|i| format!("needle {i}\n")).collect();
    create(&db, "u", "/memories/a.md", &text);
    let out = db
        .user("u")
        .unwrap()
        .answer_search(&json!({"query": "needle", "mode": "literal", "limit": 1000}))
        .unwrap();
    let (shown, tail) = out.content.split_once("\n[").unwrap();
    assert!(shown.chars().count() <= 100, "{shown}");
    let lines = shown.lines().count();
    assert_eq!(
        tail,
        format!(
            "and {} more matching lines: narrow the search with path_prefix or a longer query]",
            30 - lines
        )
    );
}

/// Where ripgrep is installed (`MEMKV_REQUIRE_RIPGREP=1` makes it required, as CI does): the
/// same matches as `rg --hidden --no-ignore` over the same tree written to a directory.
#[test]
fn the_same_matches_as_ripgrep() {
    let rg = Process::new("rg").arg("--version").output();
    if rg.is_err() {
        assert!(
            std::env::var_os("MEMKV_REQUIRE_RIPGREP").is_none(),
            "MEMKV_REQUIRE_RIPGREP is set but rg is not installed"
        );
        eprintln!("ripgrep is not installed: the comparison is skipped");
        return;
    }
    let db = Database::builder().fresh().unwrap();
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let names = [
        "notes",
        "Café",
        "日本",
        "a b",
        "x-y",
        "résumé.md",
        "z.txt",
        ".hidden",
    ];
    for i in 0..40 {
        let text = content().new_tree(&mut runner).unwrap().current();
        let dir = names[i % names.len()];
        let path = format!("/memories/{dir}/{}{i}.md", names[(i / 3) % names.len()]);
        create(&db, "u", &path, &text);
    }
    let tree = tempfile::tempdir().unwrap();
    for (path, text) in files_of(&db, "u") {
        let file = tree.path().join(path.trim_start_matches('/'));
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, text).unwrap();
    }
    let cases: Vec<(&str, SearchMode, bool)> = vec![
        ("alpha", SearchMode::Literal, false),
        ("alpha", SearchMode::Literal, true),
        ("straße", SearchMode::Literal, true),
        ("café", SearchMode::Literal, true),
        ("a.b", SearchMode::Literal, false),
        ("foo(bar)", SearchMode::Literal, false),
        (r"\bal\w*", SearchMode::Regex, false),
        ("^#", SearchMode::Regex, false),
        ("[0-9]{2,}", SearchMode::Regex, false),
        ("^$", SearchMode::Regex, false),
        (r"\s$", SearchMode::Regex, false),
        (r"a\sb", SearchMode::Regex, false),
        ("日本語|🦀", SearchMode::Regex, false),
        ("^[A-Z]", SearchMode::Regex, true),
    ];
    for (query, mode, ci) in cases {
        let request = SearchRequest::new(query, mode)
            .case_insensitive(ci)
            .limit(1000);
        let mut ours = matches(&search(&db, "u", &request));
        ours.sort();
        let mut rg = Process::new("rg");
        rg.args(["--json", "--hidden", "--no-ignore", "--no-config"]);
        if ci {
            rg.arg("-i");
        }
        if mode == SearchMode::Literal {
            rg.arg("-F");
        }
        rg.args(["-e", query, "memories"]).current_dir(tree.path());
        let out = rg.output().unwrap();
        assert!(out.status.code().unwrap() <= 1, "{out:?}");
        let mut theirs = Vec::new();
        for line in String::from_utf8(out.stdout).unwrap().lines() {
            let v: Value = serde_json::from_str(line).unwrap();
            if v["type"] != "match" {
                continue;
            }
            let data = &v["data"];
            let text = data["lines"]["text"].as_str().unwrap();
            theirs.push((
                format!("/{}", data["path"]["text"].as_str().unwrap()),
                data["line_number"].as_u64().unwrap(),
                text.strip_suffix('\n').unwrap_or(text).to_owned(),
            ));
        }
        theirs.sort();
        assert!(
            !theirs.is_empty() || query == "foo(bar)",
            "{query}: no match at all"
        );
        assert_eq!(ours, theirs, "{query} ({mode:?}, case-insensitive {ci})");
    }
}
