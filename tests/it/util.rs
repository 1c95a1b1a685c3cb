//! Small helpers shared by the integration tests.

use memkv::{Store, ToolOutput, UserHandle};
use serde_json::{Value, json};

/// One user's session against a store, with assertions that print the command on failure.
pub struct Session {
    pub store: Store,
}

impl Session {
    pub fn new(store: Store) -> Self {
        Session { store }
    }

    pub fn user(&self) -> UserHandle<'_> {
        self.store.user("tester").unwrap()
    }

    pub fn run(&self, input: Value) -> ToolOutput {
        self.user().execute_json(&input).unwrap()
    }

    #[track_caller]
    pub fn ok(&self, input: Value, want: &str) {
        let out = self.run(input.clone());
        assert_eq!(out.content, want, "{input}");
        assert!(!out.is_error, "{input}");
    }

    #[track_caller]
    pub fn err(&self, input: Value, want: &str) {
        let out = self.run(input.clone());
        assert_eq!(out.content, want, "{input}");
        assert!(out.is_error, "{input}");
    }

    #[track_caller]
    pub fn create(&self, path: &str, text: &str) {
        self.ok(
            json!({"command": "create", "path": path, "file_text": text}),
            &format!("File created successfully at: {path}"),
        );
    }
}

/// Every file of a user with its content and times, for before/after comparisons.
pub fn snapshot(user: &UserHandle<'_>) -> Vec<(String, String, i64, i64)> {
    user.files()
        .unwrap()
        .into_iter()
        .map(|f| {
            let content = user.read_file(&f.path.to_string()).unwrap().unwrap();
            (f.path.to_string(), content, f.created_ms, f.modified_ms)
        })
        .collect()
}
