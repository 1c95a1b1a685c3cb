//! `memory_search`: its definition, its answers and its refusals.

use std::time::Duration;

use memkv::{Database, SearchMode, SearchRequest};
use serde_json::{Value, json};

use super::{Check, create};

/// A `memory_search` input, the template it is answered with, and the template's values.
type Case<'a> = (Value, &'a str, Vec<(&'a str, &'a str)>);

pub(crate) fn search_definition(c: &Check) {
    c.same(
        "SEARCH_TOOL_DESCRIPTION",
        memkv::SEARCH_TOOL_DESCRIPTION,
        &c.fill("search_description", &[]),
    );
    let schema = memkv::search_tool_schema();
    for field in [
        "query",
        "mode",
        "case_insensitive",
        "path_prefix",
        "context",
        "limit",
    ] {
        let id = format!("schema_{field}");
        let description = schema["properties"][field]["description"]
            .as_str()
            .unwrap_or_else(|| panic!("no description of `{field}`"));
        c.same(&id, description, &c.fill(&id, &[]));
    }
}

pub(crate) fn search_answers(c: &Check) {
    let db = Database::in_memory().unwrap();
    let u = db.user("dana").unwrap();
    let tz = "/memories/notes/tz.md";
    let trips = "/memories/trips.md";
    create(
        c,
        &u,
        tz,
        "# Timezone\nThe user lives in Paris.\nTimezone: Europe/Paris\n",
    );
    create(c, &u, trips, "Rome in May\nParis in June\n");
    let search = |input: Value| u.answer_search(&input).unwrap();
    let found = |path: &str, n: u64, line: &str| {
        c.fill(
            "search_match",
            &[("path", path), ("n", &n.to_string()), ("line", line)],
        )
    };
    let context = |path: &str, n: u64, line: &str| {
        c.fill(
            "search_context_line",
            &[("path", path), ("n", &n.to_string()), ("line", line)],
        )
    };
    // The lines, each with its line break, without the last.
    let answer = |parts: &[String]| {
        let mut text = parts.concat();
        assert_eq!(text.pop(), Some('\n'));
        text
    };
    c.answer(
        "memory_search literal",
        &search(json!({"query": "Paris", "mode": "literal"})),
        &answer(&[
            found(tz, 2, "The user lives in Paris."),
            found(tz, 3, "Timezone: Europe/Paris"),
            found(trips, 2, "Paris in June"),
        ]),
        false,
    );
    c.answer(
        "memory_search regex with context",
        &search(json!({"query": "Par.s", "mode": "regex", "context": 1})),
        &answer(&[
            context(tz, 1, "# Timezone"),
            found(tz, 2, "The user lives in Paris."),
            found(tz, 3, "Timezone: Europe/Paris"),
            c.fill("search_gap", &[]),
            context(trips, 1, "Rome in May"),
            found(trips, 2, "Paris in June"),
        ]),
        false,
    );
    c.answer(
        "memory_search over its limit",
        &search(json!({"query": "paris", "mode": "literal", "case_insensitive": true, "limit": 1})),
        &(answer(&[found(tz, 2, "The user lives in Paris.")])
            + &c.fill("search_more", &[("n", "2")])),
        false,
    );
    c.ok(
        &search(json!({"query": "Berlin \"Mitte\"", "mode": "literal"})),
        "search_no_match",
        &[("quoted_query", r#""Berlin \"Mitte\"""#)],
    );
    // The time budget ran out before the first memory.
    let mut request = SearchRequest::new("Paris", SearchMode::Literal);
    request.time_budget = Duration::ZERO;
    c.answer(
        "memory_search out of time",
        &u.search_output(&request).unwrap(),
        &(c.fill("search_no_match", &[("quoted_query", "\"Paris\"")])
            + &c.fill("search_stopped", &[("seconds", "0"), ("n", "2")])),
        false,
    );
    // A long line is cut at 500 characters.
    create(c, &u, "/memories/long.md", &"z".repeat(600));
    c.answer(
        "memory_search of a long line",
        &search(json!({"query": "z", "mode": "literal", "path_prefix": "/memories/long.md"})),
        &answer(&[c.fill(
            "search_cut_line",
            &[
                ("path", "/memories/long.md"),
                ("n", "1"),
                ("line_start", &"z".repeat(500)),
            ],
        )]),
        false,
    );

    if cfg!(feature = "ranked") {
        // One memory of one word: idf ln(1 + 0.5 / 1.5) = 0.29.
        let db = Database::in_memory().unwrap();
        let u = db.user("dana").unwrap();
        create(c, &u, "/memories/x", "hi");
        let hit =
            |path: &str, score: &str| c.fill("search_hit", &[("path", path), ("score", score)]);
        c.answer(
            "memory_search ranked",
            &u.answer_search(&json!({"query": "hi"})).unwrap(),
            &answer(&[hit("/memories/x", "0.29"), found("/memories/x", 1, "hi")]),
            false,
        );
        // A shorter memory ranks first.
        create(c, &u, "/memories/y", "hi there, hi");
        c.answer(
            "memory_search ranked over its limit",
            &u.answer_search(&json!({"query": "hi", "limit": 1}))
                .unwrap(),
            &(answer(&[hit("/memories/x", "0.23"), found("/memories/x", 1, "hi")])
                + &c.fill("search_more_memories", &[("n", "1")])),
            false,
        );
    }
}

pub(crate) fn search_refusals(c: &Check) {
    let db = Database::in_memory().unwrap();
    let u = db.user("dana").unwrap();
    create(c, &u, "/memories/a.md", "hello");
    let search = |input: Value| u.answer_search(&input).unwrap();
    let unclosed = String::from("(");
    let regex_error = regex::Regex::new(&unclosed).unwrap_err().to_string();
    let long = "q".repeat(1001);
    let cases: Vec<Case> = vec![
        (json!("hello"), "search_not_an_object", vec![]),
        (
            json!({"query": "x", "glob": "*.md"}),
            "search_unknown_parameter",
            vec![("name", "glob")],
        ),
        (json!({"mode": "regex"}), "search_missing_query", vec![]),
        (json!({"query": 7}), "search_query_type", vec![]),
        (json!({"query": "x", "mode": 7}), "search_mode_type", vec![]),
        (
            json!({"query": "x", "case_insensitive": "yes"}),
            "search_case_insensitive_type",
            vec![],
        ),
        (
            json!({"query": "x", "path_prefix": ["/memories"]}),
            "search_path_prefix_type",
            vec![],
        ),
        (
            json!({"query": "x", "context": -1}),
            "search_count_type",
            vec![("field", "context")],
        ),
        (
            json!({"query": "x", "limit": "5"}),
            "search_count_type",
            vec![("field", "limit")],
        ),
        (
            json!({"query": "x", "mode": "fuzzy"}),
            "search_input_mode",
            vec![("mode_json", "\"fuzzy\"")],
        ),
        (json!({"query": ""}), "search_query_empty", vec![]),
        (
            json!({"query": long, "mode": "literal"}),
            "search_query_too_long",
            vec![("len", "1001"), ("max", "1000")],
        ),
        (
            json!({"query": "a\nb", "mode": "literal"}),
            "search_query_line_break",
            vec![],
        ),
        (
            json!({"query": "x", "mode": "literal", "limit": 0}),
            "search_limit",
            vec![("max", "1000"), ("limit", "0")],
        ),
        (
            json!({"query": "x", "mode": "literal", "limit": 1001}),
            "search_limit",
            vec![("max", "1000"), ("limit", "1001")],
        ),
        (
            json!({"query": "x", "mode": "literal", "context": 11}),
            "search_context",
            vec![("max", "10"), ("context", "11")],
        ),
        (
            json!({"query": r"\w{1000}\w{1000}\w{1000}", "mode": "regex"}),
            "search_regex_too_large",
            vec![("max_bytes", "1048576")],
        ),
        (
            json!({"query": unclosed, "mode": "regex"}),
            "search_regex_invalid",
            vec![("error", &regex_error)],
        ),
        (
            json!({"query": "x", "mode": "literal", "path_prefix": "/tmp"}),
            "path_outside",
            vec![("path", "/tmp")],
        ),
        (
            json!({"query": "x", "mode": "literal", "path_prefix": "/memories/../x"}),
            "path_dot",
            vec![("path", "/memories/../x")],
        ),
    ];
    for (input, id, values) in cases {
        c.err(&search(input), id, &values);
    }
    if cfg!(feature = "ranked") {
        c.err(&search(json!({"query": "!!! ..."})), "search_no_words", &[]);
    } else {
        c.err(
            &search(json!({"query": "hello"})),
            "search_ranked_unavailable",
            &[],
        );
    }
    // Only through the library's own search calls.
    let mut request = SearchRequest::new("hello", SearchMode::Literal);
    request.time_budget = Duration::from_secs(3);
    c.err(
        &u.search_output(&request).unwrap(),
        "search_time_budget",
        &[("max_seconds", "2")],
    );
    match "fuzzy".parse::<SearchMode>() {
        Err(memkv::Error::InvalidSearch(reason)) => c.same(
            "search_mode",
            &reason,
            &c.fill("search_mode", &[("quoted_mode", "\"fuzzy\"")]),
        ),
        other => panic!("{other:?}"),
    }
}
