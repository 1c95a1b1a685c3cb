//! Property test: random command sequences for three users, run against memkv and against a
//! deliberately naive model (a map from path to content per user, listings recomputed from
//! scratch). After every step the outputs must be equal, and every user's files, contents and
//! totals must match the model.

use std::collections::{BTreeMap, BTreeSet};

#[allow(unused_imports)]
use crate::util::{Fresh, each_backend, fresh};
use memkv::{Database, ListItem, MemoryPath, Operation};
use proptest::prelude::*;
use serde_json::{Value, json};

const MAX_FILE: usize = 24;
const MAX_LINES: usize = 5;
const MAX_FILES: usize = 7;
const MAX_BYTES: usize = 80;
const VIEW_MAX: usize = 330;

type Files = BTreeMap<Vec<String>, String>;

fn store() -> Database {
    Database::builder()
        .max_file_bytes(MAX_FILE as u64)
        .max_lines(MAX_LINES as u64)
        .max_files(MAX_FILES as u64)
        .max_bytes(MAX_BYTES as u64)
        .view_max_chars(VIEW_MAX)
        .fresh()
        .unwrap()
}

fn canon(segs: &[String]) -> String {
    let mut s = String::from("/memories");
    for x in segs {
        s.push('/');
        s.push_str(x);
    }
    s
}

fn lines(c: &str) -> Vec<&str> {
    if c.is_empty() {
        vec![]
    } else {
        c.strip_suffix('\n').unwrap_or(c).split('\n').collect()
    }
}

fn size(n: usize) -> String {
    if n < 1024 {
        format!("{n}B")
    } else {
        format!("{:.1}K", n as f64 / 1024.0)
    }
}

fn is_dir(files: &Files, p: &[String]) -> bool {
    p.is_empty() || files.keys().any(|k| k.len() > p.len() && k.starts_with(p))
}

fn dir_bytes(files: &Files, p: &[String]) -> usize {
    files
        .iter()
        .filter(|(k, _)| k.starts_with(p))
        .map(|(_, v)| v.len())
        .sum()
}

fn file_ancestor(files: &Files, p: &[String]) -> Option<Vec<String>> {
    (1..p.len())
        .map(|n| p[..n].to_vec())
        .find(|a| files.contains_key(a))
}

struct Model {
    users: BTreeMap<String, Files>,
    history: BTreeMap<String, History>,
}

/// One user's history as the model sees it: each version's (number, memory, operation, path,
/// content), the live files' memory ids, and the next number.
#[derive(Default)]
struct History {
    versions: Vec<(u64, u64, Operation, String, Option<String>)>,
    ids: BTreeMap<Vec<String>, u64>,
    next: u64,
}

impl History {
    fn append(
        &mut self,
        memory: Option<u64>,
        op: Operation,
        path: &[String],
        content: Option<&str>,
    ) -> u64 {
        self.next += 1;
        let seq = self.next;
        let memory = memory.unwrap_or(seq);
        self.versions
            .push((seq, memory, op, canon(path), content.map(str::to_owned)));
        memory
    }
}

/// The index key of a path, whose order a directory's `delete` and `rename` record in.
fn node_key(p: &[String]) -> Vec<u8> {
    let (name, parent) = p.split_last().unwrap();
    let mut key = parent.join("\u{1}").into_bytes();
    key.push(0);
    key.extend_from_slice(name.as_bytes());
    key
}

fn e(s: String) -> (String, bool) {
    (s, true)
}
fn o(s: String) -> (String, bool) {
    (s, false)
}

impl Model {
    fn new() -> Self {
        Model {
            users: BTreeMap::new(),
            history: BTreeMap::new(),
        }
    }

    /// Runs `input` and appends the versions its success records.
    fn run_recorded(&mut self, user: &str, input: &Value) -> (String, bool) {
        let before = self.users.get(user).cloned().unwrap_or_default();
        let (out, err) = self.run(user, input);
        if err {
            return (out, err);
        }
        let after = self.users[user].clone();
        let h = self.history.entry(user.to_owned()).or_default();
        let seg = |field: &str| {
            MemoryPath::parse(input[field].as_str().unwrap())
                .unwrap()
                .segments()
                .to_vec()
        };
        match input["command"].as_str().unwrap() {
            "create" => {
                let p = seg("path");
                let id = h.append(None, Operation::Created, &p, Some(&after[&p]));
                h.ids.insert(p, id);
            }
            "str_replace" | "insert" => {
                let p = seg("path");
                if before[&p] != after[&p] {
                    let id = h.ids[&p];
                    h.append(Some(id), Operation::Modified, &p, Some(&after[&p]));
                }
            }
            "delete" => {
                let mut gone: Vec<&Vec<String>> =
                    before.keys().filter(|k| !after.contains_key(*k)).collect();
                gone.sort_by_key(|k| node_key(k));
                for k in gone {
                    let id = h.ids.remove(k).unwrap();
                    h.append(Some(id), Operation::Deleted, k, None);
                }
            }
            "rename" => {
                let (p, np) = (seg("old_path"), seg("new_path"));
                let mut moved: Vec<&Vec<String>> =
                    before.keys().filter(|k| k.starts_with(&p)).collect();
                moved.sort_by_key(|k| node_key(k));
                for k in moved {
                    let nk: Vec<String> = np.iter().chain(&k[p.len()..]).cloned().collect();
                    let id = h.ids.remove(k).unwrap();
                    h.append(Some(id), Operation::Modified, &nk, Some(&before[k]));
                    h.ids.insert(nk, id);
                }
            }
            _ => {}
        }
        (out, err)
    }

    fn limits(&self, user: &str, raw: &str, content: &str, old: Option<&str>) -> Option<String> {
        let files = &self.users[user];
        if content.len() > MAX_FILE {
            return Some(format!(
                "Error: File {raw} would be {} bytes, over the limit of {MAX_FILE} bytes",
                content.len()
            ));
        }
        if lines(content).len() > MAX_LINES {
            return Some(format!(
                "Error: File {raw} would have more than {MAX_LINES} lines"
            ));
        }
        if old.is_none() && files.len() + 1 > MAX_FILES {
            return Some(format!(
                "Error: Memory quota exceeded: at most {MAX_FILES} files"
            ));
        }
        let total: usize = files.values().map(String::len).sum::<usize>() - old.map_or(0, str::len)
            + content.len();
        if total > MAX_BYTES {
            return Some(format!(
                "Error: Memory quota exceeded: at most {MAX_BYTES} bytes in total"
            ));
        }
        None
    }

    fn run(&mut self, user: &str, input: &Value) -> (String, bool) {
        self.users.entry(user.to_owned()).or_default();
        let cmd = input["command"].as_str().unwrap();
        let parse = |field: &str| -> Result<(String, Vec<String>), String> {
            let raw = input[field].as_str().unwrap().to_owned();
            match MemoryPath::parse(&raw) {
                Ok(p) => Ok((raw, p.segments().to_vec())),
                Err(_) => Err(raw),
            }
        };
        let path = if cmd == "rename" {
            parse("old_path")
        } else {
            parse("path")
        };
        let (raw, p) = match path {
            Ok(x) => x,
            // Invalid paths: the path module's own tests pin the messages; here, just an error.
            Err(_) => return (String::new(), true),
        };
        let files = self.users.get_mut(user).unwrap();
        match cmd {
            "view" => {
                if let Some(c) = files.get(&p) {
                    let ls = lines(c);
                    let n = ls.len();
                    let (start, end) = match input.get("view_range") {
                        Some(Value::Array(r)) => {
                            let (s, en) = (r[0].as_i64().unwrap(), r[1].as_i64().unwrap());
                            if s < 1 || (n > 0 && s > n as i64) || (en != -1 && en < s) {
                                return e(format!(
                                    "Error: Invalid `view_range` parameter. It should be [start_line, end_line] with 1 <= start_line <= {n} and end_line >= start_line or -1"
                                ));
                            }
                            (s as usize, if en == -1 { n } else { (en as usize).min(n) })
                        }
                        _ => (1, n),
                    };
                    let mut out = format!("Here's the content of {raw} with line numbers:");
                    for i in start..=end {
                        out.push_str(&format!("\n{i:>6}\t{}", ls[i - 1]));
                    }
                    assert!(
                        out.chars().count() <= VIEW_MAX,
                        "model files stay under the view budget"
                    );
                    o(out)
                } else if is_dir(files, &p) {
                    let hidden = |s: &String| s.starts_with('.') || s == "node_modules";
                    let mut entries = BTreeSet::new();
                    for k in files
                        .keys()
                        .filter(|k| k.len() > p.len() && k.starts_with(&p))
                    {
                        for depth in 1..=2.min(k.len() - p.len()) {
                            if hidden(&k[p.len() + depth - 1]) {
                                break;
                            }
                            entries.insert(k[p.len()..p.len() + depth].to_vec());
                        }
                    }
                    let d = canon(&p);
                    let mut out = format!(
                        "Here're the files and directories up to 2 levels deep in {d}, excluding hidden items and node_modules:\n{}\t{d}",
                        size(dir_bytes(files, &p))
                    );
                    let total = entries.len();
                    for (shown, rel) in entries.iter().enumerate() {
                        let full: Vec<String> = p.iter().chain(rel).cloned().collect();
                        let line = if files.contains_key(&full) {
                            format!("{}\t{}", size(files[&full].len()), canon(&full))
                        } else {
                            format!("{}\t{}/", size(dir_bytes(files, &full)), canon(&full))
                        };
                        if out.chars().count() + 1 + line.chars().count() > VIEW_MAX {
                            out.push_str(&format!("\n[Output truncated: {shown} of {total} entries shown. View a subdirectory to see the rest.]"));
                            return o(out);
                        }
                        out.push('\n');
                        out.push_str(&line);
                    }
                    o(out)
                } else {
                    e(format!(
                        "The path {raw} does not exist. Please provide a valid path."
                    ))
                }
            }
            "create" => {
                let text = input["file_text"].as_str().unwrap();
                if files.contains_key(&p) || is_dir(files, &p) {
                    return e(format!("Error: File {raw} already exists"));
                }
                if let Some(a) = file_ancestor(files, &p) {
                    return e(format!(
                        "Error: Cannot create {raw}: {} is a file",
                        canon(&a)
                    ));
                }
                if let Some(m) = self.limits(user, &raw, text, None) {
                    return e(m);
                }
                self.users.get_mut(user).unwrap().insert(p, text.to_owned());
                o(format!("File created successfully at: {raw}"))
            }
            "str_replace" => {
                let Some(c) = files.get(&p).cloned() else {
                    return e(format!(
                        "Error: The path {raw} does not exist. Please provide a valid path."
                    ));
                };
                let old = input["old_str"].as_str().unwrap();
                let new = input.get("new_str").and_then(Value::as_str).unwrap_or("");
                if old.is_empty() {
                    return e("Error: old_str must not be empty".into());
                }
                let at: Vec<usize> = c.match_indices(old).map(|(i, _)| i).collect();
                if at.is_empty() {
                    return e(format!(
                        "No replacement was performed, old_str `{old}` did not appear verbatim in {raw}."
                    ));
                }
                let line_of = |i: usize| 1 + c[..i].matches('\n').count();
                if at.len() > 1 {
                    let ls: BTreeSet<usize> = at.iter().map(|&i| line_of(i)).collect();
                    let ls: Vec<String> = ls.iter().map(ToString::to_string).collect();
                    return e(format!(
                        "No replacement was performed. Multiple occurrences of old_str `{old}` in lines: {}. Please ensure it is unique",
                        ls.join(", ")
                    ));
                }
                let nc = c.replacen(old, new, 1);
                if let Some(m) = self.limits(user, &raw, &nc, Some(&c)) {
                    return e(m);
                }
                let first = line_of(at[0]);
                let last = first + new.strip_suffix('\n').unwrap_or(new).matches('\n').count();
                let nl = lines(&nc);
                let snippet: Vec<String> = (first.saturating_sub(2).max(1)
                    ..=(last + 2).min(nl.len()))
                    .map(|i| format!("{i:>6}\t{}", nl[i - 1]))
                    .collect();
                self.users.get_mut(user).unwrap().insert(p, nc.clone());
                o(format!(
                    "The memory file has been edited. Here is the snippet showing the change (with line numbers):\n{}",
                    snippet.join("\n")
                ))
            }
            "insert" => {
                let Some(c) = files.get(&p).cloned() else {
                    return e(format!("Error: The path {raw} does not exist"));
                };
                let at = input["insert_line"].as_i64().unwrap();
                let mut ls: Vec<String> = lines(&c).into_iter().map(str::to_owned).collect();
                let n = ls.len();
                if at < 0 || at as usize > n {
                    return e(format!(
                        "Error: Invalid `insert_line` parameter: {at}. It should be within the range of lines of the file: [0, {n}]"
                    ));
                }
                let text = input["insert_text"].as_str().unwrap();
                let text = text.strip_suffix('\n').unwrap_or(text);
                for (i, l) in text.split('\n').enumerate() {
                    ls.insert(at as usize + i, l.to_owned());
                }
                let mut nc = ls.join("\n");
                if c.is_empty() || c.ends_with('\n') {
                    nc.push('\n');
                }
                if let Some(m) = self.limits(user, &raw, &nc, Some(&c)) {
                    return e(m);
                }
                self.users.get_mut(user).unwrap().insert(p, nc);
                o(format!("The file {raw} has been edited."))
            }
            "delete" => {
                if p.is_empty() {
                    return e("Error: Cannot delete the /memories directory itself".into());
                }
                if !files.contains_key(&p) && !is_dir(files, &p) {
                    return e(format!("Error: The path {raw} does not exist"));
                }
                files.retain(|k, _| !k.starts_with(&p));
                o(format!("Successfully deleted {raw}"))
            }
            "rename" => {
                let (new_raw, np) = match parse("new_path") {
                    Ok(x) => x,
                    Err(_) => return (String::new(), true),
                };
                if p.is_empty() {
                    return e("Error: Cannot rename the /memories directory itself".into());
                }
                if !files.contains_key(&p) && !is_dir(files, &p) {
                    return e(format!("Error: The path {raw} does not exist"));
                }
                if files.contains_key(&np) || is_dir(files, &np) {
                    return e(format!("Error: The destination {new_raw} already exists"));
                }
                if np.len() > p.len() && np.starts_with(&p) {
                    return e(format!("Error: Cannot move {raw} into itself"));
                }
                if let Some(a) = file_ancestor(files, &np) {
                    return e(format!(
                        "Error: Cannot create {new_raw}: {} is a file",
                        canon(&a)
                    ));
                }
                let moved: Vec<(Vec<String>, String)> = files
                    .iter()
                    .filter(|(k, _)| k.starts_with(&p))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                files.retain(|k, _| !k.starts_with(&p));
                for (k, v) in moved {
                    let nk: Vec<String> = np.iter().chain(&k[p.len()..]).cloned().collect();
                    files.insert(nk, v);
                }
                o(format!("Successfully renamed {raw} to {new_raw}"))
            }
            _ => unreachable!(),
        }
    }
}

fn segment() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => Just("a".to_owned()),
        4 => Just("b".to_owned()),
        2 => Just("c.md".to_owned()),
        1 => Just(".h".to_owned()),
        1 => Just("node_modules".to_owned()),
        1 => Just("\u{e9}".to_owned()),
        1 => Just("e\u{301}".to_owned()),
    ]
}

fn path() -> impl Strategy<Value = String> {
    prop_oneof![
        12 => (prop::collection::vec(segment(), 0..4), any::<bool>()).prop_map(|(segs, slash)| {
            let mut s = String::from("/memories");
            for x in segs {
                s.push('/');
                s.push_str(&x);
            }
            if slash {
                s.push('/');
            }
            s
        }),
        1 => Just("/memories/../a".to_owned()),
        1 => Just("/etc/passwd".to_owned()),
    ]
}

fn text() -> impl Strategy<Value = String> {
    "[ab\n]{0,10}"
}

fn command() -> impl Strategy<Value = Value> {
    prop_oneof![
        3 => (path(), prop::option::of((-1i64..5, -1i64..5))).prop_map(|(p, r)| match r {
            Some((s, e)) => json!({"command": "view", "path": p, "view_range": [s, e]}),
            None => json!({"command": "view", "path": p}),
        }),
        4 => (path(), text()).prop_map(|(p, t)| json!({"command": "create", "path": p, "file_text": t})),
        2 => (path(), "[ab\n]{0,2}", prop::option::of(text())).prop_map(|(p, o, n)| match n {
            Some(n) => json!({"command": "str_replace", "path": p, "old_str": o, "new_str": n}),
            None => json!({"command": "str_replace", "path": p, "old_str": o}),
        }),
        2 => (path(), -1i64..5, text()).prop_map(|(p, l, t)| json!({"command": "insert", "path": p, "insert_line": l, "insert_text": t})),
        1 => path().prop_map(|p| json!({"command": "delete", "path": p})),
        2 => (path(), path()).prop_map(|(a, b)| json!({"command": "rename", "old_path": a, "new_path": b})),
    ]
}

const USERS: [&str; 3] = ["alice", "bob@example.com", "."];

/// Every invariant holds, and every user's files, contents, sizes and totals are the model's.
fn same_as_model(store: &Database, model: &Model, after: &str) -> Result<(), TestCaseError> {
    let problems = store.check().unwrap();
    prop_assert!(problems.is_empty(), "after {}: {:?}", after, problems);
    for user in USERS {
        let handle = store.user(user).unwrap();
        let mut files = Vec::new();
        for f in handle.files().unwrap() {
            let content = handle.read_file(&f.path.to_string()).unwrap().unwrap();
            prop_assert_eq!(f.size as usize, content.len());
            files.push((f.path.to_string(), content));
        }
        let empty = Files::new();
        let mine = model.users.get(user).unwrap_or(&empty);
        let want: Vec<(String, String)> = mine.iter().map(|(k, v)| (canon(k), v.clone())).collect();
        prop_assert_eq!(&files, &want, "user {} after {}", user, after);
        let bytes: usize = mine.values().map(String::len).sum();
        prop_assert_eq!(handle.totals().unwrap(), (mine.len() as u64, bytes as u64));
        // Each memory's history is the sequence of changes the model made, numbered alike.
        let none = History::default();
        let h = model.history.get(user).unwrap_or(&none);
        let got: Vec<(u64, u64, Operation, String, Option<String>)> = handle
            .history(None)
            .unwrap()
            .unwrap()
            .into_iter()
            .map(|v| (v.id.0, v.memory.0, v.operation, v.path.unwrap(), v.content))
            .collect();
        prop_assert_eq!(&got, &h.versions, "history of {} after {}", user, after);
        let page = handle
            .list_memories("/memories", 0, None, 100, false)
            .unwrap()
            .unwrap();
        prop_assert!(page.next.is_none());
        let ids: BTreeMap<String, (u64, u64)> = page
            .items
            .into_iter()
            .map(|item| match item {
                ListItem::Memory(m) => (m.path, (m.id.0, m.version.0)),
                ListItem::Prefix(p) => panic!("a depth-0 listing rolled up {p}"),
            })
            .collect();
        let want: BTreeMap<String, (u64, u64)> = h
            .ids
            .iter()
            .map(|(p, id)| {
                let last = h.versions.iter().rev().find(|v| v.1 == *id).unwrap().0;
                (canon(p), (*id, last))
            })
            .collect();
        prop_assert_eq!(ids, want, "ids of {} after {}", user, after);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: crate::util::sample(16, 48), ..ProptestConfig::default() })]

    #[test]
    fn memkv_matches_the_model(steps in prop::collection::vec((0..USERS.len(), command()), 1..60)) {
        for backend in crate::util::backends() {
            let _on = crate::util::using(backend);
            let store = store();
            let mut model = Model::new();
            for (u, input) in steps.clone() {
                let user = USERS[u];
                let got = store.user(user).unwrap().execute_json(&input).unwrap();
                let (want, want_err) = model.run_recorded(user, &input);
                prop_assert_eq!(got.is_error, want_err, "{} {}: {}", user, input, got.content);
                if !want.is_empty() || !want_err {
                    prop_assert_eq!(&got.content, &want, "{} {}", user, input);
                }
                same_as_model(&store, &model, &format!("{user} {input}"))?;
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: crate::util::sample(12, 32), ..ProptestConfig::default() })]

    /// The same commands in random batches of one transaction each (group commit): every
    /// command's output is what it would be alone, in order, and failures leave no trace.
    #[test]
    fn batches_match_the_model(steps in prop::collection::vec((0..USERS.len(), command(), prop::bool::weighted(0.25)), 1..60)) {
        for backend in crate::util::backends() {
            let _on = crate::util::using(backend);
            let store = store();
            let mut model = Model::new();
            let mut batch: Vec<(String, Value)> = Vec::new();
            let n = steps.len();
            for (i, (u, input, cut)) in steps.clone().into_iter().enumerate() {
                batch.push((USERS[u].to_owned(), input));
                if !(cut || i + 1 == n) {
                    continue;
                }
                let parsed: Vec<(String, memkv::Command)> = batch
                    .iter()
                    .map(|(u, input)| (u.clone(), memkv::Command::from_json(input).unwrap()))
                    .collect();
                let results = store.execute_batch(&parsed);
                prop_assert_eq!(results.len(), batch.len());
                for ((user, input), got) in batch.drain(..).zip(results) {
                    let got = got.unwrap();
                    let (want, want_err) = model.run_recorded(&user, &input);
                    prop_assert_eq!(got.is_error, want_err, "{} {}: {}", user, input, got.content);
                    if !want.is_empty() || !want_err {
                        prop_assert_eq!(&got.content, &want, "{} {}", user, input);
                    }
                }
                same_as_model(&store, &model, "a batch")?;
            }
        }
    }
}
