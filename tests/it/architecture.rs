//! The library's shape, checked over its source: every write goes through the pipeline, each
//! public type's methods live in `src/api/`, no two modules import each other (directly or
//! round a loop), at the level of the top modules and of their files, and the top modules import
//! down the layer list of lib.rs, which docs/design.md draws.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The library's `src`.
fn library() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every `.rs` file under `root`, with its module path (`["pipeline", "batch"]`; a `mod.rs` is its
/// folder's module), the text without comments and without its `#[cfg(test)]` module.
fn sources(root: &Path) -> Vec<(PathBuf, Vec<String>, String)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_owned()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path.strip_prefix(root).unwrap().with_extension("");
                let mut module: Vec<String> = rel
                    .iter()
                    .map(|s| s.to_string_lossy().into_owned())
                    .collect();
                if module
                    .last()
                    .is_some_and(|m| m == "mod" || m == "lib" || m == "main")
                {
                    module.pop();
                }
                let text = std::fs::read_to_string(&path).unwrap();
                let text = text.split("#[cfg(test)]\nmod tests").next().unwrap();
                let code: String = text
                    .lines()
                    .map(|l| l.split("//").next().unwrap())
                    .collect::<Vec<_>>()
                    .join("\n");
                out.push((path, module, code));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn only_the_pipeline_writes_to_the_backend() {
    // Every write transaction is opened by `pipeline::transact`, so no write can skip the
    // commit hooks: no other module of the library calls the backend's write methods.
    let offenders: Vec<_> = sources(&library())
        .into_iter()
        .filter(|(_, module, _)| {
            !matches!(
                module.first().map(String::as_str),
                Some("storage" | "pipeline")
            )
        })
        .filter(|(_, _, code)| {
            code.contains("backend.write(") || code.contains("backend.write_freeing(")
        })
        .map(|(path, _, _)| path)
        .collect();
    assert!(
        offenders.is_empty(),
        "writes outside the pipeline: {offenders:?}"
    );
}

#[test]
fn the_public_types_have_their_methods_in_one_place() {
    let mut found: BTreeMap<&str, BTreeSet<PathBuf>> = BTreeMap::new();
    for (path, _, code) in sources(&library()) {
        for ty in [
            "Database",
            "DatabaseBuilder",
            "MemoryStore",
            "OwnedMemoryStore",
        ] {
            let inherent = code
                .lines()
                .any(|l| l == format!("impl {ty} {{") || l == format!("impl {ty}<'_> {{"));
            if inherent {
                found.entry(ty).or_default().insert(path.clone());
            }
        }
    }
    for (ty, files) in &found {
        assert_eq!(files.len(), 1, "`impl {ty}` in {files:?}");
        let file = files.iter().next().unwrap();
        assert!(
            file.parent().unwrap().ends_with("src/api"),
            "`impl {ty}` outside src/api: {file:?}"
        );
    }
    assert_eq!(found.len(), 4, "{found:?}");
}

#[test]
fn these_types_have_their_methods_beside_them() {
    // Types defined outside `src/api/` whose methods were once split between two files: each
    // type's inherent methods are in the file that defines it.
    for (ty, home) in [
        ("Actor", "src/history/actor.rs"),
        ("SearchResults", "src/search/results.rs"),
    ] {
        let files: BTreeSet<PathBuf> = sources(&library())
            .into_iter()
            .filter(|(_, _, code)| code.lines().any(|l| l == format!("impl {ty} {{")))
            .map(|(path, _, _)| path)
            .collect();
        let home = Path::new(env!("CARGO_MANIFEST_DIR")).join(home);
        assert_eq!(files, BTreeSet::from([home]), "`impl {ty}`");
    }
}

/// The modules (their first `depth` path segments) each module under `root` imports: every
/// `crate::…` and `super::…` path in its code.
fn imports(root: &Path, depth: usize) -> BTreeMap<String, BTreeSet<String>> {
    let sources = sources(root);
    let key = |segments: &[String]| segments[..segments.len().min(depth)].join("::");
    let known: BTreeSet<String> = sources
        .iter()
        .filter(|(_, m, _)| !m.is_empty())
        .map(|(_, m, _)| key(m))
        .collect();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (_, module, code) in &sources {
        if module.is_empty() {
            continue; // lib.rs declares and re-exports every module
        }
        let me = key(module);
        // `super` of `a/b.rs` (module `a::b`) and of `a/b/mod.rs` (also `a::b`) is `a`.
        let parent = module[..module.len() - 1].to_vec();
        for (prefix, base) in [("crate::", Vec::new()), ("super::", parent)] {
            for (i, _) in code.match_indices(prefix) {
                if i > 0 {
                    let before = code.as_bytes()[i - 1];
                    if before.is_ascii_alphanumeric() || before == b'_' || before == b':' {
                        continue;
                    }
                }
                for path in named(&code[i + prefix.len()..]) {
                    let segments = [base.clone(), path].concat();
                    // The longest known module the path names.
                    let target = (1..=segments.len())
                        .rev()
                        .map(|n| key(&segments[..n]))
                        .find(|k| known.contains(k));
                    if let Some(target) = target
                        && target != me
                        && !me.starts_with(&format!("{target}::"))
                    {
                        edges.entry(me.clone()).or_default().insert(target);
                    }
                }
            }
        }
    }
    edges
}

/// The paths that the text after a `crate::` names: `a::b::C` one, a group `{a::b, c::{d, e}}`
/// one for each item (`a::b`, `c`).
fn named(rest: &str) -> Vec<Vec<String>> {
    if let Some(group) = rest.strip_prefix('{') {
        let mut out = Vec::new();
        let (mut depth, mut start) = (0, 0);
        for (i, c) in group.char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth > 0 => depth -= 1,
                '}' | ',' if depth == 0 => {
                    out.extend(named(group[start..i].trim_start()));
                    if c == '}' {
                        break;
                    }
                    start = i + 1;
                }
                _ => {}
            }
        }
        return out;
    }
    let mut segments = Vec::new();
    for segment in rest.split("::") {
        let name: String = segment
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if name.is_empty() {
            break;
        }
        segments.push(name.clone());
        if name.len() != segment.len() {
            break;
        }
    }
    vec![segments]
}

/// A loop in `edges`, if there is one.
fn a_cycle(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        done: &mut BTreeSet<String>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|p| p == node) {
            let mut cycle = path[i..].to_vec();
            cycle.push(node.to_owned());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_owned());
        for next in edges.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, edges, done, path) {
                return Some(cycle);
            }
        }
        path.pop();
        done.insert(node.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    edges
        .keys()
        .find_map(|start| visit(start, edges, &mut done, &mut Vec::new()))
}

#[test]
fn no_two_modules_import_each_other() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates");
    let mut roots = vec![(library(), 3)];
    for entry in std::fs::read_dir(crates).unwrap() {
        roots.push((entry.unwrap().path().join("src"), 2));
    }
    for (root, deepest) in &roots {
        for depth in 1..=*deepest {
            let edges = imports(root, depth);
            if let Some(cycle) = a_cycle(&edges) {
                panic!("an import loop in {root:?}: {}", cycle.join(" -> "));
            }
        }
    }
    // The scan sees the imports: the public face uses the pipeline.
    let library = imports(&library(), 1);
    assert!(library.len() > 10, "{library:?}");
    assert!(library["api"].contains("pipeline"), "{library:?}");
}

/// The library's top modules, as lib.rs declares them.
fn top_modules() -> BTreeSet<String> {
    let lib = std::fs::read_to_string(library().join("lib.rs")).unwrap();
    lib.lines()
        .filter_map(|l| {
            l.strip_prefix("pub mod ")
                .or_else(|| l.strip_prefix("mod "))
        })
        .filter_map(|l| l.strip_suffix(';'))
        .map(str::to_owned)
        .collect()
}

/// The items of lib.rs's `# Layout` list, top first, each as the top modules it names in
/// backquotes (a module's first mention places it).
fn documented_layers() -> Vec<BTreeSet<String>> {
    let lib = std::fs::read_to_string(library().join("lib.rs")).unwrap();
    let modules = top_modules();
    let mut items: Vec<String> = Vec::new();
    let mut lines = lib.lines().filter_map(|l| l.strip_prefix("//!"));
    lines.by_ref().find(|l| l.trim() == "# Layout").unwrap();
    for line in lines {
        if let Some(first) = line.strip_prefix(" - ") {
            items.push(first.to_owned());
        } else if let (Some(more), Some(item)) = (line.strip_prefix("   "), items.last_mut()) {
            item.push(' ');
            item.push_str(more);
        } else if !items.is_empty() {
            break;
        }
    }
    let mut placed = BTreeSet::new();
    items
        .iter()
        .map(|item| {
            item.split('`')
                .skip(1)
                .step_by(2)
                .filter(|name| modules.contains(*name) && placed.insert(name.to_string()))
                .map(str::to_owned)
                .collect()
        })
        .collect()
}

#[test]
fn imports_flow_down_the_documented_layers() {
    let layers = documented_layers();
    let layer: BTreeMap<&str, usize> = layers
        .iter()
        .enumerate()
        .flat_map(|(i, names)| names.iter().map(move |n| (n.as_str(), i)))
        .collect();
    let unplaced: Vec<_> = top_modules()
        .into_iter()
        .filter(|m| !layer.contains_key(m.as_str()))
        .collect();
    let mut upward = Vec::new();
    for (from, targets) in imports(&library(), 1) {
        for to in targets {
            if let (Some(above), Some(below)) = (layer.get(to.as_str()), layer.get(from.as_str()))
                && above < below
            {
                upward.push(format!("{from} -> {to}"));
            }
        }
    }
    assert!(
        unplaced.is_empty() && upward.is_empty(),
        "modules not in lib.rs's layout: {unplaced:?}; imports of a module listed above the \
         importer: {upward:?}"
    );
    assert!(layers.len() > 5 && layer["api"] == 0, "{layers:?}");
}

#[test]
fn the_design_diagram_has_the_documented_layers() {
    // docs/design.md draws lib.rs's list: a group of files between two `|` for each item, each
    // file (`name.rs`, `name/`, `name/mod.rs`) in the left column, at the line's first indent.
    let design =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/design.md"))
            .unwrap();
    let modules = top_modules();
    let diagram = design
        .split("Inside the library, imports flow downward")
        .nth(1)
        .and_then(|s| s.split("```").nth(1))
        .unwrap();
    let mut groups: Vec<BTreeSet<String>> = vec![BTreeSet::new()];
    for line in diagram.lines() {
        if line.trim() == "|" {
            groups.push(BTreeSet::new());
        } else if line.starts_with(' ') && !line.starts_with("  ") {
            let left: String = line.chars().take(35).collect();
            for file in left.split([' ', ',']) {
                let name = file.split(['/', '.']).next().unwrap();
                if modules.contains(name) {
                    groups.last_mut().unwrap().insert(name.to_owned());
                }
            }
        }
    }
    assert_eq!(groups, documented_layers());
}

#[test]
#[allow(deprecated)]
fn the_old_names_still_compile() {
    let db: memkv::Store = memkv::StoreBuilder::default().in_memory().unwrap();
    let db = std::sync::Arc::new(db);
    let owned: memkv::OwnedUserHandle = db.owned_user("u").unwrap();
    assert!(std::sync::Arc::ptr_eq(owned.store(), &db));
    let user: memkv::UserHandle<'_> = owned.handle();
    let view = serde_json::json!({"command": "view", "path": "/memories"});
    assert!(!user.execute_json(&view).unwrap().is_error);
}
