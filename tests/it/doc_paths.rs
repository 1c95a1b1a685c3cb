//! Every file the documentation names exists: the repository paths in backquotes (`src/…`,
//! `crates/…`, `tools/…`, `docs/…`, …) and the relative links of README.md and docs/*.md.

use std::path::{Path, PathBuf};

/// The repository's root.
fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// README.md and every Markdown file under docs/, except docs/perf-log.md: a dated log of what
/// was measured at each commit, which names the files of that commit (`src/group.rs` before it
/// became the pipeline, say) and is not rewritten when they move.
fn documents() -> Vec<PathBuf> {
    let mut out = vec![root().join("README.md")];
    let mut stack = vec![root().join("docs")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "md")
                && !path.ends_with("docs/perf-log.md")
            {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// The repository paths a backquoted span names: it starts at one of the repository's top
/// folders and ends in a file name with an extension or in `/` (so that `tools/call`, an MCP
/// method, is not one); a line (`:12`) is dropped and one `{a,b}` group expanded.
fn paths_in(span: &str) -> Vec<String> {
    const TOP: [&str; 9] = [
        "src/",
        "crates/",
        "tools/",
        "docs/",
        "tests/",
        "benches/",
        "examples/",
        "python/",
        "typescript/",
    ];
    let allowed = |c: char| c.is_ascii_alphanumeric() || "_-./{},".contains(c);
    let span = span.split(':').next().unwrap();
    if !TOP.iter().any(|t| span.starts_with(t)) || !span.chars().all(allowed) {
        return Vec::new();
    }
    let last = span.rsplit('/').next().unwrap();
    if !span.ends_with('/') && !last.contains('.') {
        return Vec::new();
    }
    match (span.find('{'), span.find('}')) {
        (Some(open), Some(close)) if open < close => span[open + 1..close]
            .split(',')
            .map(|alt| format!("{}{alt}{}", &span[..open], &span[close + 1..]))
            .collect(),
        _ => vec![span.to_owned()],
    }
}

#[test]
fn every_path_the_docs_name_exists() {
    let mut missing = Vec::new();
    let mut seen = 0;
    for doc in documents() {
        let text = std::fs::read_to_string(&doc).unwrap();
        let name = doc.strip_prefix(root()).unwrap().display().to_string();
        let mut fenced = false;
        for line in text.lines() {
            if line.trim_start().starts_with("```") {
                fenced = !fenced;
            }
            if fenced {
                continue;
            }
            for span in line.split('`').skip(1).step_by(2) {
                for path in paths_in(span) {
                    seen += 1;
                    if !root().join(&path).exists() {
                        missing.push(format!("{name}: `{path}`"));
                    }
                }
            }
            // Relative links, `[text](path)`, from the document's folder.
            for (i, _) in line.match_indices("](") {
                let target = line[i + 2..].split([')', '#', ' ']).next().unwrap();
                if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                    continue;
                }
                seen += 1;
                if !doc.parent().unwrap().join(target).exists() {
                    missing.push(format!("{name}: ({target})"));
                }
            }
        }
    }
    assert!(missing.is_empty(), "named but absent: {missing:#?}");
    assert!(seen > 100, "the scan found {seen} paths");
}

#[test]
fn the_scan_reads_paths_as_meant() {
    assert_eq!(paths_in("src/lib.rs:12"), ["src/lib.rs"]);
    assert_eq!(
        paths_in("crates/memkv-server/src/keys/"),
        ["crates/memkv-server/src/keys/"]
    );
    assert_eq!(
        paths_in("src/storage/postgres/{sql,txn}.rs"),
        ["src/storage/postgres/sql.rs", "src/storage/postgres/txn.rs"]
    );
    assert!(paths_in("tools/call").is_empty());
    assert!(paths_in("memkv serve").is_empty());
    assert!(paths_in("src/*.rs").is_empty());
}
