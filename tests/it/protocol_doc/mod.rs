//! docs/protocol.md, held to the code.
//!
//! Every line of a ```template block of docs/protocol.md is listed in [`TEMPLATES`], with the
//! items of src/messages.rs that build it. The cases below fill each template with sample
//! values and compare it, byte for byte, with what memkv answers for the same values (through
//! the public API: `messages` is private). The tests fail when the doc has a template the table
//! lacks or the other way round, when an item of src/messages.rs is covered by no template or
//! the table names one that is gone, when a template is exercised by no case, when a limit's
//! default in the doc is not the code's, and when a filled template is not memkv's answer.

mod cases;
mod table;

use std::cell::RefCell;
use std::collections::BTreeSet;

use memkv::Limits;

use cases::{
    Check, create_errors, delete, insert, limits, line_limit, malformed_input, paths,
    read_only_and_failures, refused_messages, rename, search_answers, search_definition,
    search_refusals, secrets, str_replace, view_directories, view_files,
};
use table::TEMPLATES;

/// Templates no case of this build can reach (the other build's ranked-search answers).
fn unreachable_here() -> &'static [&'static str] {
    if cfg!(feature = "ranked") {
        &["search_ranked_unavailable"]
    } else {
        &["search_no_words", "search_hit", "search_more_memories"]
    }
}

fn read(relative: &str) -> String {
    let path = format!("{}/{relative}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The lines of the doc's ```template blocks, as written.
fn doc_templates(doc: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut inside = false;
    for line in doc.lines() {
        if inside {
            if line.trim_start().starts_with("```") {
                inside = false;
            } else {
                out.push(line.to_owned());
            }
        } else if line.trim_end() == "```template" {
            inside = true;
        }
    }
    assert!(
        !inside,
        "docs/protocol.md: a ```template block is not closed"
    );
    out
}

/// The public items of src/messages.rs (`pub` or `pub(crate)` functions, constants, statics),
/// before its unit tests.
fn message_items(source: &str) -> BTreeSet<String> {
    let mut items = BTreeSet::new();
    for line in source.lines() {
        if line.starts_with("#[cfg(test)]") {
            break;
        }
        let Some(rest) = ["pub(crate) ", "pub(super) ", "pub "]
            .iter()
            .find_map(|p| line.strip_prefix(p))
        else {
            continue;
        };
        let Some(rest) = ["fn ", "const ", "static "]
            .iter()
            .find_map(|p| rest.strip_prefix(p))
        else {
            continue;
        };
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        items.insert(name);
    }
    items
}

/// A template as written in the doc, made into the text it stands for: `\n` is a line break,
/// `\t` a tab, and every other character itself.
fn unescape(template: &str) -> String {
    let mut out = String::with_capacity(template.len());
    let mut chars = template.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, chars.peek()) {
            ('\\', Some('n')) => {
                out.push('\n');
                chars.next();
            }
            ('\\', Some('t')) => {
                out.push('\t');
                chars.next();
            }
            _ => out.push(c),
        }
    }
    out
}

/// `template` with each `{name}` replaced by its value and each `{name:>W}` by its value
/// right-aligned in `W` columns. Every placeholder needs a value and every value a placeholder.
fn fill(template: &str, values: &[(&str, &str)]) -> Result<String, String> {
    let mut out = String::new();
    let mut used = vec![false; values.len()];
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let close = open
            + rest[open..]
                .find('}')
                .ok_or_else(|| format!("an unclosed `{{` in {template:?}"))?;
        let inner = &rest[open + 1..close];
        let (name, width) = match inner.split_once(":>") {
            Some((name, width)) => {
                let width = width
                    .parse::<usize>()
                    .map_err(|_| format!("a bad width in {{{inner}}}"))?;
                (name, Some(width))
            }
            None => (inner, None),
        };
        let i = values
            .iter()
            .position(|(key, _)| *key == name)
            .ok_or_else(|| format!("no value for {{{name}}}"))?;
        used[i] = true;
        let value = values[i].1;
        match width {
            Some(width) => out.push_str(&format!("{value:>width$}")),
            None => out.push_str(value),
        }
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    if let Some(i) = used.iter().position(|u| !u) {
        return Err(format!("no placeholder {{{}}}", values[i].0));
    }
    Ok(out)
}

/// `n` with thousands separators, as the doc writes its limits.
fn separated(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[test]
fn the_doc_lists_every_template_and_every_limit() {
    let doc = read("docs/protocol.md");
    let lines = doc_templates(&doc);
    let in_doc: BTreeSet<&str> = lines.iter().map(String::as_str).collect();
    let in_table: BTreeSet<&str> = TEMPLATES.iter().map(|(_, text, _)| *text).collect();
    let mut failures = Vec::new();
    for t in in_doc.difference(&in_table) {
        failures.push(format!(
            "docs/protocol.md has a template that tests/it/protocol_doc/table.rs does not know (a typo, \
             or a new template: add it to TEMPLATES with a case):\n    {t}"
        ));
    }
    for t in in_table.difference(&in_doc) {
        failures.push(format!(
            "docs/protocol.md lacks this template of tests/it/protocol_doc/table.rs's TEMPLATES (put it \
             in a ```template block, or drop it from the table):\n    {t}"
        ));
    }
    let ids: BTreeSet<&str> = TEMPLATES.iter().map(|(id, _, _)| *id).collect();
    assert_eq!(ids.len(), TEMPLATES.len(), "two templates share a name");

    // Every item of src/messages.rs builds some template, and the table names no other.
    let items = message_items(&read("src/messages.rs"));
    assert!(
        items.len() > 40,
        "src/messages.rs was not parsed: {items:?}"
    );
    let covered: BTreeSet<String> = TEMPLATES
        .iter()
        .flat_map(|(_, _, items)| items.iter().map(|s| s.to_string()))
        .collect();
    for item in items.difference(&covered) {
        failures.push(format!(
            "src/messages.rs has `{item}`, which no template of docs/protocol.md covers: add its \
             strings to the doc and to TEMPLATES here"
        ));
    }
    for item in covered.difference(&items) {
        failures.push(format!(
            "TEMPLATES names `{item}`, which src/messages.rs no longer has"
        ));
    }

    // The limits and their defaults, as the doc's tables give them.
    let d = Limits::DEFAULT;
    let limits = [
        ("max_file_bytes", separated(d.max_file_bytes)),
        ("max_lines", separated(d.max_lines)),
        ("max_files", separated(d.max_files)),
        ("max_bytes", separated(d.max_bytes)),
        ("view_max_chars", separated(d.view_max_chars as u64)),
        (
            "MAX_PATH_BYTES",
            separated(memkv::path::MAX_PATH_BYTES as u64),
        ),
        ("MAX_DEPTH", separated(memkv::path::MAX_DEPTH as u64)),
        (
            "MAX_SEGMENT_BYTES",
            separated(memkv::path::MAX_SEGMENT_BYTES as u64),
        ),
        (
            "MAX_QUERY_BYTES",
            separated(memkv::search::MAX_QUERY_BYTES as u64),
        ),
        ("MAX_LIMIT", separated(memkv::search::MAX_LIMIT as u64)),
        ("MAX_CONTEXT", separated(memkv::search::MAX_CONTEXT as u64)),
        (
            "MAX_REGEX_BYTES",
            separated(memkv::search::MAX_REGEX_BYTES as u64),
        ),
        (
            "TIME_BUDGET",
            format!("{} s", memkv::search::TIME_BUDGET.as_secs()),
        ),
    ];
    for (name, value) in limits {
        let row = format!("| `{name}` | {value} |");
        if !doc.contains(&row) {
            failures.push(format!(
                "docs/protocol.md has no table row starting `{row}` (the code's value)"
            ));
        }
    }
    assert!(failures.is_empty(), "\n{}\n", failures.join("\n\n"));
}

#[test]
fn every_template_is_memkvs_answer() {
    let c = Check {
        doc: doc_templates(&read("docs/protocol.md"))
            .into_iter()
            .collect(),
        used: RefCell::default(),
        failures: RefCell::default(),
    };
    paths(&c);
    view_directories(&c);
    view_files(&c);
    line_limit(&c);
    create_errors(&c);
    str_replace(&c);
    insert(&c);
    delete(&c);
    rename(&c);
    limits(&c);
    secrets(&c);
    malformed_input(&c);
    refused_messages(&c);
    read_only_and_failures(&c);
    search_definition(&c);
    search_answers(&c);
    search_refusals(&c);
    let mut failures = c.failures.into_inner();
    let used = c.used.into_inner();
    for (id, text, _) in TEMPLATES {
        if !used.contains(id) && !unreachable_here().contains(id) {
            failures.push(format!(
                "template `{id}` is exercised by no case of tests/it/protocol_doc/cases/:\n    {text}"
            ));
        }
    }
    assert!(failures.is_empty(), "\n{}\n", failures.join("\n\n"));
}
