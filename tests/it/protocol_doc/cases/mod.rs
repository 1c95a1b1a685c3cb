//! The cases of `every_template_is_memkvs_answer`: each fills templates of the doc and
//! compares them with memkv's answers.

mod commands;
mod limits;
mod search;

use std::cell::RefCell;
use std::collections::BTreeSet;

use memkv::{MemoryStore, ToolOutput};
use serde_json::{Value, json};

use super::table::TEMPLATES;
use super::{fill, unescape};

pub(super) use commands::{
    create_errors, delete, insert, line_limit, paths, rename, str_replace, view_directories,
    view_files,
};
pub(super) use limits::{
    limits, malformed_input, read_only_and_failures, refused_messages, secrets,
};
pub(super) use search::{search_answers, search_definition, search_refusals};

/// The doc's templates, filled, against memkv's answers.
pub(super) struct Check {
    /// The template lines of docs/protocol.md, as written.
    pub(super) doc: BTreeSet<String>,
    pub(super) used: RefCell<BTreeSet<&'static str>>,
    pub(super) failures: RefCell<Vec<String>>,
}

impl Check {
    /// The template `id` of the doc, filled with `values`.
    #[track_caller]
    fn fill(&self, id: &str, values: &[(&str, &str)]) -> String {
        let (id, text, _) = TEMPLATES
            .iter()
            .find(|(name, _, _)| *name == id)
            .unwrap_or_else(|| panic!("no template named `{id}` in TEMPLATES"));
        if self.used.borrow_mut().insert(id) && !self.doc.contains(*text) {
            self.failures.borrow_mut().push(format!(
                "template `{id}` is not in a ```template block of docs/protocol.md:\n    {text}"
            ));
        }
        fill(&unescape(text), values).unwrap_or_else(|e| panic!("template `{id}`: {e}"))
    }

    /// `got` is `want`.
    fn same(&self, what: &str, got: &str, want: &str) {
        if got != want {
            self.failures.borrow_mut().push(format!(
                "{what}:\n    memkv answers   {got:?}\n    the doc says    {want:?}"
            ));
        }
    }

    /// `out` is `want`, and an error when `is_error`.
    fn answer(&self, what: &str, out: &ToolOutput, want: &str, is_error: bool) {
        self.same(what, &out.content, want);
        if out.is_error != is_error {
            self.failures.borrow_mut().push(format!(
                "{what}: is_error is {}, not {is_error}",
                out.is_error
            ));
        }
    }

    /// `out` is the error of template `id` filled with `values`.
    #[track_caller]
    fn err(&self, out: &ToolOutput, id: &str, values: &[(&str, &str)]) {
        let want = self.fill(id, values);
        self.answer(&format!("{id} {values:?}"), out, &want, true);
    }

    /// `out` is the success of template `id` filled with `values`.
    #[track_caller]
    fn ok(&self, out: &ToolOutput, id: &str, values: &[(&str, &str)]) {
        let want = self.fill(id, values);
        self.answer(&format!("{id} {values:?}"), out, &want, false);
    }

    /// A numbered line of `view` and of a snippet.
    fn line(&self, n: usize, line: &str) -> String {
        self.fill("numbered_line", &[("n", &n.to_string()), ("line", line)])
    }
}

fn run(user: &MemoryStore<'_>, input: Value) -> ToolOutput {
    user.execute_json(&input).unwrap()
}

/// Creates `path` with `text`, which must succeed with the `created` template.
fn create(c: &Check, user: &MemoryStore<'_>, path: &str, text: &str) {
    let out = run(
        user,
        json!({"command": "create", "path": path, "file_text": text}),
    );
    c.ok(&out, "created", &[("path", path)]);
}
