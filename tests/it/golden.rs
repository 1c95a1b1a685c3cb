//! Golden tests: every string and rule of docs/protocol.md, byte for byte.
//!
//! Every case goes through `util::Session`. Here that is the library; crates/memkv-server's
//! tests compile this same file with a `Session` that sends each message to a real server over
//! loopback HTTP, so both faces are held to one table of cases.

use memkv::{Database, MemoryStore};
use serde_json::{Value, json};

use super::util::{
    Backend, Face, Fresh, Session, current, each_backend, fresh, fresh_location, snapshot,
};

fn s() -> Session {
    Session::new(fresh().unwrap())
}

#[test]
fn paths_table_in_order() {
    each_backend(|| {
        let s = s();
        let cases = [
            ("", "Error: Path must start with /memories, got: "),
            (
                "/memoriesX/a",
                "Error: Path must start with /memories, got: /memoriesX/a",
            ),
            (
                "memories/a",
                "Error: Path must start with /memories, got: memories/a",
            ),
            (
                "/memories/../etc/passwd",
                "Error: Invalid path /memories/../etc/passwd: '.' and '..' segments are not allowed",
            ),
            (
                "/memories/%2e%2E/x",
                "Error: Invalid path /memories/%2e%2E/x: '.' and '..' segments are not allowed",
            ),
            (
                "/memories/%252e",
                "Error: Invalid path /memories/%252e: '.' and '..' segments are not allowed",
            ),
            (
                "/memories/./a",
                "Error: Invalid path /memories/./a: '.' and '..' segments are not allowed",
            ),
            (
                "/memories//a",
                "Error: Invalid path /memories//a: empty path segment",
            ),
            (
                "/memories/a\\b",
                "Error: Invalid path /memories/a\\b: '\\' and encoded separators are not allowed",
            ),
            (
                "/memories/a%2fb",
                "Error: Invalid path /memories/a%2fb: '\\' and encoded separators are not allowed",
            ),
            (
                "/memories/a%5Cb",
                "Error: Invalid path /memories/a%5Cb: '\\' and encoded separators are not allowed",
            ),
            (
                "/memories/a\u{200b}b",
                "Error: Invalid path /memories/a\u{200b}b: control and format characters are not allowed",
            ),
            (
                "/memories/a\u{2028}",
                "Error: Invalid path /memories/a\u{2028}: control and format characters are not allowed",
            ),
            (
                "/memories/a\u{85}",
                "Error: Invalid path /memories/a\u{85}: control and format characters are not allowed",
            ),
        ];
        for (path, want) in cases {
            s.err(json!({"command": "view", "path": path}), want);
            s.err(
                json!({"command": "create", "path": path, "file_text": "x"}),
                want,
            );
            s.err(json!({"command": "delete", "path": path}), want);
        }
        let long = format!("/memories/{}", "a".repeat(256));
        s.err(
            json!({"command": "view", "path": long}),
            &format!("Error: Invalid path {long}: too long"),
        );
        let deep = format!("/memories{}", "/d".repeat(21));
        s.err(
            json!({"command": "create", "path": deep, "file_text": ""}),
            &format!("Error: Invalid path {deep}: too long"),
        );
        let bytes = format!("/memories/{}", vec!["b".repeat(250); 5].join("/"));
        s.err(
            json!({"command": "view", "path": bytes}),
            &format!("Error: Invalid path {bytes}: too long"),
        );
    });
}

#[test]
fn path_spellings_name_one_file() {
    each_backend(|| {
        let s = s();
        s.ok(
            json!({"command": "create", "path": "/memories/caf\u{e9}.md", "file_text": "x"}),
            "File created successfully at: /memories/caf\u{e9}.md",
        );
        // Decomposed spelling of the same name: already exists, quoted as sent.
        s.err(
            json!({"command": "create", "path": "/memories/cafe\u{301}.md", "file_text": "y"}),
            "Error: File /memories/cafe\u{301}.md already exists",
        );
        s.ok(
            json!({"command": "create", "path": "/memories/100%.md/", "file_text": ""}),
            "File created successfully at: /memories/100%.md/",
        );
        s.ok(
            json!({"command": "view", "path": "/memories/100%.md"}),
            "Here's the content of /memories/100%.md with line numbers:",
        );
        s.ok(
            json!({"command": "create", "path": "/memories/Case", "file_text": "A"}),
            "File created successfully at: /memories/Case",
        );
        s.ok(
            json!({"command": "create", "path": "/memories/case", "file_text": "a"}),
            "File created successfully at: /memories/case",
        );
    });
}

#[test]
fn view_directory_listing() {
    each_backend(|| {
        let s = s();
        s.ok(
            json!({"command": "view", "path": "/memories"}),
            "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items and node_modules:\n0B\t/memories",
        );
        s.create("/memories/b.md", &"x".repeat(1536));
        s.create("/memories/a/notes.txt", "hello");
        s.create("/memories/a/deep/x/y.md", &"y".repeat(2000));
        s.create("/memories/a/.secret", "hidden");
        s.create("/memories/.git/config", "hidden too");
        s.create("/memories/node_modules/pkg/index.js", "skip");
        s.create("/memories/a/node_modules/m", "skip");
        s.create("/memories/A", "upper");
        let header = "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items and node_modules:";
        // Sizes of directories include hidden files (du); siblings sorted by byte order.
        let total = 1536 + 5 + 2000 + 6 + 10 + 4 + 4 + 5;
        assert_eq!(total, 3570);
        s.ok(
            json!({"command": "view", "path": "/memories/", "view_range": [5, 1]}),
            &format!(
                "{header}\n3.5K\t/memories\n5B\t/memories/A\n2.0K\t/memories/a/\n2.0K\t/memories/a/deep/\n5B\t/memories/a/notes.txt\n1.5K\t/memories/b.md"
            ),
        );
        s.ok(
            json!({"command": "view", "path": "/memories/a"}),
            "Here're the files and directories up to 2 levels deep in /memories/a, excluding hidden items and node_modules:\n2.0K\t/memories/a\n2.0K\t/memories/a/deep/\n2.0K\t/memories/a/deep/x/\n5B\t/memories/a/notes.txt",
        );
        // A hidden directory can still be viewed by name.
        s.ok(
            json!({"command": "view", "path": "/memories/.git"}),
            "Here're the files and directories up to 2 levels deep in /memories/.git, excluding hidden items and node_modules:\n10B\t/memories/.git\n10B\t/memories/.git/config",
        );
    });
}

#[test]
fn view_missing_paths() {
    each_backend(|| {
        let s = s();
        s.create("/memories/f.md", "x");
        s.err(
            json!({"command": "view", "path": "/memories/nope"}),
            "The path /memories/nope does not exist. Please provide a valid path.",
        );
        s.err(
            json!({"command": "view", "path": "/memories/f.md/x"}),
            "The path /memories/f.md/x does not exist. Please provide a valid path.",
        );
    });
}

#[test]
fn view_file_lines_and_ranges() {
    each_backend(|| {
        let s = s();
        s.create("/memories/f.md", "one\ntwo\r\nthree\nfour\n");
        let h = "Here's the content of /memories/f.md with line numbers:";
        s.ok(
            json!({"command": "view", "path": "/memories/f.md"}),
            &format!("{h}\n     1\tone\n     2\ttwo\r\n     3\tthree\n     4\tfour"),
        );
        s.ok(
            json!({"command": "view", "path": "/memories/f.md", "view_range": [2, 3]}),
            &format!("{h}\n     2\ttwo\r\n     3\tthree"),
        );
        s.ok(
            json!({"command": "view", "path": "/memories/f.md", "view_range": [3, -1]}),
            &format!("{h}\n     3\tthree\n     4\tfour"),
        );
        s.ok(
            json!({"command": "view", "path": "/memories/f.md", "view_range": [4, 99]}),
            &format!("{h}\n     4\tfour"),
        );
        s.ok(
            json!({"command": "view", "path": "/memories/f.md", "view_range": null}),
            &format!("{h}\n     1\tone\n     2\ttwo\r\n     3\tthree\n     4\tfour"),
        );
        let bad = "Error: Invalid `view_range` parameter. It should be [start_line, end_line] with 1 <= start_line <= 4 and end_line >= start_line or -1";
        for range in [
            json!([0, 2]),
            json!([5, -1]),
            json!([3, 2]),
            json!([1]),
            json!("1-2"),
            json!([1, 2.5]),
            json!([1, -2]),
        ] {
            s.err(
                json!({"command": "view", "path": "/memories/f.md", "view_range": range}),
                bad,
            );
        }
        // No final newline: the last line is still a line; no phantom line after a final newline.
        s.create("/memories/g.md", "a\nb");
        s.ok(
            json!({"command": "view", "path": "/memories/g.md"}),
            "Here's the content of /memories/g.md with line numbers:\n     1\ta\n     2\tb",
        );
        s.create("/memories/empty.md", "");
        let he = "Here's the content of /memories/empty.md with line numbers:";
        s.ok(json!({"command": "view", "path": "/memories/empty.md"}), he);
        s.ok(
            json!({"command": "view", "path": "/memories/empty.md", "view_range": [1, -1]}),
            he,
        );
        s.err(
            json!({"command": "view", "path": "/memories/empty.md", "view_range": [0, -1]}),
            "Error: Invalid `view_range` parameter. It should be [start_line, end_line] with 1 <= start_line <= 0 and end_line >= start_line or -1",
        );
        s.create("/memories/blank.md", "\n");
        s.ok(
            json!({"command": "view", "path": "/memories/blank.md"}),
            "Here's the content of /memories/blank.md with line numbers:\n     1\t",
        );
        // The header quotes the path as sent.
        s.ok(
            json!({"command": "view", "path": "/memories/g.md/"}),
            "Here's the content of /memories/g.md/ with line numbers:\n     1\ta\n     2\tb",
        );
    });
}

#[test]
fn view_truncates_files_at_the_budget() {
    each_backend(|| {
        let s = s();
        // 2,000 lines of 10 characters: "     1\t" + 10 = 17 chars per line, plus "\n".
        let content: String = (0..2000).map(|i| format!("{i:0>10}\n")).collect();
        s.create("/memories/big.md", &content);
        let out = s.run(json!({"command": "view", "path": "/memories/big.md"}));
        assert!(!out.is_error);
        let header = "Here's the content of /memories/big.md with line numbers:";
        let fit = (16_000 - header.chars().count()) / 18;
        let body: String = (1..=fit)
            .map(|n| format!("\n{n:>6}\t{:0>10}", n - 1))
            .collect();
        let want = format!(
            "{header}{body}\n[Output truncated: showing lines 1-{fit} of 2000. Use view_range to see other lines.]"
        );
        assert_eq!(out.content, want);
        // With a range, {first} is the range's start and {total} the file's line count.
        let out =
            s.run(json!({"command": "view", "path": "/memories/big.md", "view_range": [1001, -1]}));
        let last = 1000 + fit;
        assert!(out.content.ends_with(&format!("\n[Output truncated: showing lines 1001-{last} of 2000. Use view_range to see other lines.]")), "{}", &out.content[out.content.len() - 120..]);
        // A view that fits exactly is not truncated.
        let out =
            s.run(json!({"command": "view", "path": "/memories/big.md", "view_range": [1, fit]}));
        assert_eq!(out.content, format!("{header}{body}"));
    });
}

#[test]
fn view_cuts_a_single_overlong_line() {
    each_backend(|| {
        let s = Session::new(Database::builder().view_max_chars(100).fresh().unwrap());
        s.create("/memories/long.md", &"z".repeat(500));
        let header = "Here's the content of /memories/long.md with line numbers:";
        let room = 100 - header.chars().count() - 1;
        let line: String = format!("     1\t{}", "z".repeat(500))
            .chars()
            .take(room)
            .collect();
        s.ok(
            json!({"command": "view", "path": "/memories/long.md"}),
            &format!("{header}\n{line}\n[Output truncated: showing lines 1-1 of 1. Use view_range to see other lines.]"),
        );
    });
}

#[test]
fn view_truncates_directory_listings() {
    each_backend(|| {
        let s = Session::new(Database::builder().view_max_chars(300).fresh().unwrap());
        for i in 0..30 {
            s.create(&format!("/memories/f{i:02}.md"), "x");
        }
        let out = s.run(json!({"command": "view", "path": "/memories"}));
        let header = "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items and node_modules:\n30B\t/memories";
        // Each entry line is "1B\t/memories/fNN.md" = 19 chars, plus "\n".
        let fit = (300 - header.chars().count()) / 20;
        let body: String = (0..fit)
            .map(|i| format!("\n1B\t/memories/f{i:02}.md"))
            .collect();
        assert_eq!(
            out.content,
            format!(
                "{header}{body}\n[Output truncated: {fit} of 30 entries shown. View a subdirectory to see the rest.]"
            )
        );
        assert!(!out.is_error);
    });
}

#[test]
fn view_reports_files_over_the_line_limit() {
    each_backend(|| {
        // A file written under a larger limit and read under a smaller one.
        let dir = tempfile::tempdir().unwrap();
        let db = fresh_location().unwrap_or_else(|| dir.path().join("db").display().to_string());
        {
            let s = Session::new(Database::open(&db).unwrap());
            s.create("/memories/many.md", &"l\n".repeat(20));
        }
        let s = Session::new(Database::builder().max_lines(10).open(&db).unwrap());
        s.err(
            json!({"command": "view", "path": "/memories/many.md"}),
            "File /memories/many.md exceeds maximum line limit of 10 lines.",
        );
        s.err(
            json!({"command": "create", "path": "/memories/x", "file_text": "a\n".repeat(11)}),
            "Error: File /memories/x would have more than 10 lines",
        );
    });
}

#[test]
fn create_rules_in_order() {
    each_backend(|| {
        let s = s();
        s.ok(
            json!({"command": "create", "path": "/memories/a/b/c.md", "file_text": "hi"}),
            "File created successfully at: /memories/a/b/c.md",
        );
        s.err(
            json!({"command": "create", "path": "/memories/a/b/c.md", "file_text": "x"}),
            "Error: File /memories/a/b/c.md already exists",
        );
        s.err(
            json!({"command": "create", "path": "/memories/a/b", "file_text": "x"}),
            "Error: File /memories/a/b already exists",
        );
        s.err(
            json!({"command": "create", "path": "/memories/", "file_text": "x"}),
            "Error: File /memories/ already exists",
        );
        s.err(
            json!({"command": "create", "path": "/memories", "file_text": "x"}),
            "Error: File /memories already exists",
        );
        s.err(
            json!({"command": "create", "path": "/memories/a/b/c.md/d/e", "file_text": "x"}),
            "Error: Cannot create /memories/a/b/c.md/d/e: /memories/a/b/c.md is a file",
        );
        // The parent is named in canonical form, the path as sent.
        s.create("/memories/caf\u{e9}", "x");
        s.err(
            json!({"command": "create", "path": "/memories/cafe\u{301}/x/", "file_text": "x"}),
            "Error: Cannot create /memories/cafe\u{301}/x/: /memories/caf\u{e9} is a file",
        );
        // Existence is checked before the limits.
        let big = "x".repeat(200_000);
        s.err(
            json!({"command": "create", "path": "/memories/a/b/c.md", "file_text": big}),
            "Error: File /memories/a/b/c.md already exists",
        );
    });
}

#[test]
fn limits_in_table_order() {
    each_backend(|| {
        let store = Database::builder()
            .max_file_bytes(10)
            .max_lines(3)
            .max_files(2)
            .max_bytes(15)
            .fresh()
            .unwrap();
        let s = Session::new(store);
        s.err(
            json!({"command": "create", "path": "/memories/a", "file_text": "a\nb\nc\nd\ne\nf"}),
            "Error: File /memories/a would be 11 bytes, over the limit of 10 bytes",
        );
        s.err(
            json!({"command": "create", "path": "/memories/a", "file_text": "a\nb\nc\nd"}),
            "Error: File /memories/a would have more than 3 lines",
        );
        s.create("/memories/a", "0123456789");
        s.err(
            json!({"command": "create", "path": "/memories/b", "file_text": "123456"}),
            "Error: Memory quota exceeded: at most 15 bytes in total",
        );
        s.create("/memories/b", "12345");
        s.err(
            json!({"command": "create", "path": "/memories/c", "file_text": ""}),
            "Error: Memory quota exceeded: at most 2 files",
        );
        // Edits are checked the same way, after the edit.
        s.err(
            json!({"command": "str_replace", "path": "/memories/b", "old_str": "5", "new_str": "5678"}),
            "Error: Memory quota exceeded: at most 15 bytes in total",
        );
        s.err(
            json!({"command": "insert", "path": "/memories/a", "insert_line": 0, "insert_text": "x"}),
            "Error: File /memories/a would be 12 bytes, over the limit of 10 bytes",
        );
        s.err(
            json!({"command": "str_replace", "path": "/memories/b", "old_str": "2", "new_str": "\n\n\n"}),
            "Error: File /memories/b would have more than 3 lines",
        );
        // After deleting, room again; totals follow deletes.
        s.ok(
            json!({"command": "delete", "path": "/memories/a"}),
            "Successfully deleted /memories/a",
        );
        s.create("/memories/c", "0123456789");
    });
}

#[test]
fn default_limits_and_messages() {
    each_backend(|| {
        let s = s();
        let big = "x".repeat(102_401);
        s.err(
            json!({"command": "create", "path": "/memories/big", "file_text": big}),
            "Error: File /memories/big would be 102401 bytes, over the limit of 102400 bytes",
        );
        s.create("/memories/max", &"x".repeat(102_400));
        let store = Database::builder()
            .max_file_bytes(u64::MAX)
            .fresh()
            .unwrap();
        let s = Session::new(store);
        s.err(
            json!({"command": "create", "path": "/memories/lines", "file_text": "\n".repeat(1_000_000)}),
            "Error: File /memories/lines would have more than 999,999 lines",
        );
        let store = Database::builder().max_files(u64::MAX).fresh().unwrap();
        let s = Session::new(store);
        let chunk = "y".repeat(102_400);
        for i in 0..655 {
            s.create(&format!("/memories/f{i}"), &chunk);
        }
        s.err(
            json!({"command": "create", "path": "/memories/last", "file_text": chunk}),
            "Error: Memory quota exceeded: at most 67108864 bytes in total",
        );
        let store = Database::builder().max_bytes(u64::MAX).fresh().unwrap();
        let s = Session::new(store);
        // Filling 10,000 files is the library's business; the refusal goes through the session.
        let creates: Vec<(String, memkv::Command)> = (0..10_000)
            .map(|i| {
                let input =
                    json!({"command": "create", "path": format!("/memories/{i}"), "file_text": ""});
                (
                    s.user().id().to_owned(),
                    memkv::Command::from_json(&input).unwrap(),
                )
            })
            .collect();
        // One command per transaction on redb; on PostgreSQL in group-commit batches (ten
        // thousand network commits would dominate the suite), which must count the same.
        let chunk = if current() == Backend::Postgres {
            250
        } else {
            1
        };
        for batch in creates.chunks(chunk) {
            for out in s.store.execute_batch(batch) {
                assert!(!out.unwrap().is_error);
            }
        }
        s.err(
            json!({"command": "create", "path": "/memories/one-more", "file_text": ""}),
            "Error: Memory quota exceeded: at most 10000 files",
        );
    });
}

#[test]
fn str_replace_messages() {
    each_backend(|| {
        let s = s();
        s.create(
            "/memories/f.md",
            "alpha\nbeta\ngamma beta\ndelta\nepsilon\nzeta\neta\n",
        );
        s.create("/memories/d/x", "");
        s.err(
            json!({"command": "str_replace", "path": "/memories/nope", "old_str": "a"}),
            "Error: The path /memories/nope does not exist. Please provide a valid path.",
        );
        s.err(
            json!({"command": "str_replace", "path": "/memories/d", "old_str": "a"}),
            "Error: The path /memories/d does not exist. Please provide a valid path.",
        );
        s.err(
            json!({"command": "str_replace", "path": "/memories/f.md", "old_str": ""}),
            "Error: old_str must not be empty",
        );
        s.err(
            json!({"command": "str_replace", "path": "/memories/f.md", "old_str": "omega", "new_str": "x"}),
            "No replacement was performed, old_str `omega` did not appear verbatim in /memories/f.md.",
        );
        s.err(
            json!({"command": "str_replace", "path": "/memories/f.md", "old_str": "beta", "new_str": "x"}),
            "No replacement was performed. Multiple occurrences of old_str `beta` in lines: 2, 3. Please ensure it is unique",
        );
        // Distinct lines: two matches on one line are listed once.
        s.create("/memories/g.md", "aa aa\nb\naa");
        s.err(
            json!({"command": "str_replace", "path": "/memories/g.md", "old_str": "aa"}),
            "No replacement was performed. Multiple occurrences of old_str `aa` in lines: 1, 3. Please ensure it is unique",
        );
        // Non-overlapping: "aaa" holds one match of "aa" at a time... twice only if disjoint.
        s.create("/memories/h.md", "aaa");
        s.ok(
            json!({"command": "str_replace", "path": "/memories/h.md", "old_str": "aa", "new_str": "b"}),
            "The memory file has been edited. Here is the snippet showing the change (with line numbers):\n     1\tba",
        );
        // Snippet: two lines before the first changed line, two after the last inserted line.
        s.ok(
            json!({"command": "str_replace", "path": "/memories/f.md", "old_str": "delta\n", "new_str": "DELTA\nDELTA2\n"}),
            "The memory file has been edited. Here is the snippet showing the change (with line numbers):\n     2\tbeta\n     3\tgamma beta\n     4\tDELTA\n     5\tDELTA2\n     6\tepsilon\n     7\tzeta",
        );
        // Literal replacement, no $ expansion; omitted new_str deletes.
        s.ok(
            json!({"command": "str_replace", "path": "/memories/f.md", "old_str": "alpha", "new_str": "$1 \\0"}),
            "The memory file has been edited. Here is the snippet showing the change (with line numbers):\n     1\t$1 \\0\n     2\tbeta\n     3\tgamma beta",
        );
        s.ok(
            json!({"command": "str_replace", "path": "/memories/f.md", "old_str": "\neta\n"}),
            "The memory file has been edited. Here is the snippet showing the change (with line numbers):\n     5\tDELTA2\n     6\tepsilon\n     7\tzeta",
        );
        s.ok(
            json!({"command": "view", "path": "/memories/f.md", "view_range": [6, -1]}),
            "Here's the content of /memories/f.md with line numbers:\n     6\tepsilon\n     7\tzeta",
        );
        assert_eq!(
            s.user().read_file("/memories/f.md").unwrap().unwrap(),
            "$1 \\0\nbeta\ngamma beta\nDELTA\nDELTA2\nepsilon\nzeta"
        );
    });
}

#[test]
fn insert_messages_and_line_endings() {
    each_backend(|| {
        let s = s();
        s.create("/memories/f.md", "a\nb\n");
        s.create("/memories/d/x", "");
        s.err(json!({"command": "insert", "path": "/memories/nope", "insert_line": 0, "insert_text": "x"}), "Error: The path /memories/nope does not exist");
        s.err(
            json!({"command": "insert", "path": "/memories/d", "insert_line": 0, "insert_text": "x"}),
            "Error: The path /memories/d does not exist",
        );
        for bad in [-1, 3, 99] {
            s.err(
                json!({"command": "insert", "path": "/memories/f.md", "insert_line": bad, "insert_text": "x"}),
                &format!("Error: Invalid `insert_line` parameter: {bad}. It should be within the range of lines of the file: [0, 2]"),
            );
        }
        s.ok(json!({"command": "insert", "path": "/memories/f.md", "insert_line": 0, "insert_text": "top\n"}), "The file /memories/f.md has been edited.");
        s.ok(json!({"command": "insert", "path": "/memories/f.md", "insert_line": 3, "insert_text": "end1\nend2"}), "The file /memories/f.md has been edited.");
        s.ok(json!({"command": "insert", "path": "/memories/f.md", "insert_line": 1, "insert_text": "mid"}), "The file /memories/f.md has been edited.");
        assert_eq!(
            s.user().read_file("/memories/f.md").unwrap().unwrap(),
            "top\nmid\na\nb\nend1\nend2\n"
        );
        // No final newline before: none after. Empty file: one after.
        s.create("/memories/g.md", "a");
        s.ok(json!({"command": "insert", "path": "/memories/g.md", "insert_line": 1, "insert_text": "b\n"}), "The file /memories/g.md has been edited.");
        assert_eq!(
            s.user().read_file("/memories/g.md").unwrap().unwrap(),
            "a\nb"
        );
        s.create("/memories/e.md", "");
        s.ok(json!({"command": "insert", "path": "/memories/e.md", "insert_line": 0, "insert_text": "x"}), "The file /memories/e.md has been edited.");
        assert_eq!(
            s.user().read_file("/memories/e.md").unwrap().unwrap(),
            "x\n"
        );
    });
}

#[test]
fn delete_messages() {
    each_backend(|| {
        let s = s();
        s.create("/memories/d/e/f", "1");
        s.create("/memories/d/g", "2");
        s.create("/memories/keep", "3");
        s.err(
            json!({"command": "delete", "path": "/memories"}),
            "Error: Cannot delete the /memories directory itself",
        );
        s.err(
            json!({"command": "delete", "path": "/memories/"}),
            "Error: Cannot delete the /memories directory itself",
        );
        s.err(
            json!({"command": "delete", "path": "/memories/nope"}),
            "Error: The path /memories/nope does not exist",
        );
        s.ok(
            json!({"command": "delete", "path": "/memories/d/"}),
            "Successfully deleted /memories/d/",
        );
        s.err(
            json!({"command": "view", "path": "/memories/d/e/f"}),
            "The path /memories/d/e/f does not exist. Please provide a valid path.",
        );
        s.ok(
            json!({"command": "view", "path": "/memories"}),
            "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items and node_modules:\n1B\t/memories\n1B\t/memories/keep",
        );
        // Deleting the last file of a directory removes the directory (directories are implicit).
        s.create("/memories/x/only", "1");
        s.ok(
            json!({"command": "delete", "path": "/memories/x/only"}),
            "Successfully deleted /memories/x/only",
        );
        s.err(
            json!({"command": "view", "path": "/memories/x"}),
            "The path /memories/x does not exist. Please provide a valid path.",
        );
    });
}

#[test]
fn rename_rules_in_order() {
    each_backend(|| {
        let s = s();
        s.create("/memories/a/f", "1");
        s.create("/memories/a/sub/g", "22");
        s.create("/memories/file", "333");
        s.err(
            json!({"command": "rename", "old_path": "/memories/../x", "new_path": "/x"}),
            "Error: Invalid path /memories/../x: '.' and '..' segments are not allowed",
        );
        s.err(
            json!({"command": "rename", "old_path": "/memories/a", "new_path": "/x"}),
            "Error: Path must start with /memories, got: /x",
        );
        s.err(
            json!({"command": "rename", "old_path": "/memories/", "new_path": "/memories/b"}),
            "Error: Cannot rename the /memories directory itself",
        );
        s.err(
            json!({"command": "rename", "old_path": "/memories/nope", "new_path": "/memories/b"}),
            "Error: The path /memories/nope does not exist",
        );
        s.err(
            json!({"command": "rename", "old_path": "/memories/a", "new_path": "/memories/file"}),
            "Error: The destination /memories/file already exists",
        );
        s.err(
            json!({"command": "rename", "old_path": "/memories/file", "new_path": "/memories"}),
            "Error: The destination /memories already exists",
        );
        s.err(
            json!({"command": "rename", "old_path": "/memories/a", "new_path": "/memories/a"}),
            "Error: The destination /memories/a already exists",
        );
        s.err(
            json!({"command": "rename", "old_path": "/memories/a", "new_path": "/memories/a/sub2"}),
            "Error: Cannot move /memories/a into itself",
        );
        s.err(
            json!({"command": "rename", "old_path": "/memories/a", "new_path": "/memories/file/x"}),
            "Error: Cannot create /memories/file/x: /memories/file is a file",
        );
        // A failed rename creates no parent directories.
        s.err(json!({"command": "rename", "old_path": "/memories/nope", "new_path": "/memories/new/dir/x"}), "Error: The path /memories/nope does not exist");
        s.err(
            json!({"command": "view", "path": "/memories/new"}),
            "The path /memories/new does not exist. Please provide a valid path.",
        );
        // Whole directories move, with sizes following.
        s.ok(
            json!({"command": "rename", "old_path": "/memories/a", "new_path": "/memories/z/moved"}),
            "Successfully renamed /memories/a to /memories/z/moved",
        );
        s.ok(
            json!({"command": "view", "path": "/memories"}),
            "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items and node_modules:\n6B\t/memories\n3B\t/memories/file\n3B\t/memories/z/\n3B\t/memories/z/moved/",
        );
        assert_eq!(
            s.user()
                .read_file("/memories/z/moved/sub/g")
                .unwrap()
                .unwrap(),
            "22"
        );
        s.ok(json!({"command": "rename", "old_path": "/memories/file", "new_path": "/memories/z/moved/sub/h"}), "Successfully renamed /memories/file to /memories/z/moved/sub/h");
        s.ok(
            json!({"command": "view", "path": "/memories/z/moved"}),
            "Here're the files and directories up to 2 levels deep in /memories/z/moved, excluding hidden items and node_modules:\n6B\t/memories/z/moved\n1B\t/memories/z/moved/f\n5B\t/memories/z/moved/sub/\n2B\t/memories/z/moved/sub/g\n3B\t/memories/z/moved/sub/h",
        );
    });
}

#[test]
fn rename_that_would_make_a_path_too_long_is_refused() {
    each_backend(|| {
        let s = s();
        let deep = format!("/memories/a{}", "/d".repeat(18));
        s.create(&format!("{deep}/f"), "x");
        let before = snapshot(&s.user());
        let want = format!(
            "Error: Invalid path /memories/x/y/a{}/f: too long",
            "/d".repeat(18)
        );
        s.err(
            json!({"command": "rename", "old_path": "/memories/a", "new_path": "/memories/x/y/a"}),
            &want,
        );
        assert_eq!(snapshot(&s.user()), before);
    });
}

#[test]
fn malformed_input() {
    each_backend(|| {
        let s = s();
        s.err(json!({"path": "/memories"}), "Error: Unknown command: null");
        s.err(
            json!({"command": "list"}),
            "Error: Unknown command: \"list\"",
        );
        s.err(
            json!({"command": ["view"]}),
            "Error: Unknown command: [\"view\"]",
        );
        s.err(
            json!({"command": "view"}),
            "Error: Missing required parameter `path` for command `view`",
        );
        s.err(
            json!({"command": "view", "path": 3}),
            "Error: Invalid parameter `path` for command `view`: expected string",
        );
        s.err(
            json!({"command": "create", "path": "/memories/a"}),
            "Error: Missing required parameter `file_text` for command `create`",
        );
        s.err(
            json!({"command": "create", "path": "/memories/a", "file_text": ["x"]}),
            "Error: Invalid parameter `file_text` for command `create`: expected string",
        );
        s.err(
            json!({"command": "str_replace", "path": "/memories/a"}),
            "Error: Missing required parameter `old_str` for command `str_replace`",
        );
        s.err(
            json!({"command": "str_replace", "path": "/memories/a", "old_str": "x", "new_str": false}),
            "Error: Invalid parameter `new_str` for command `str_replace`: expected string",
        );
        s.err(
            json!({"command": "insert", "path": "/memories/a", "insert_text": "x"}),
            "Error: Missing required parameter `insert_line` for command `insert`",
        );
        s.err(
            json!({"command": "insert", "path": "/memories/a", "insert_line": "2", "insert_text": "x"}),
            "Error: Invalid parameter `insert_line` for command `insert`: expected integer",
        );
        s.err(
            json!({"command": "insert", "path": "/memories/a", "insert_line": 2}),
            "Error: Missing required parameter `insert_text` for command `insert`",
        );
        s.err(
            json!({"command": "delete", "path": null}),
            "Error: Missing required parameter `path` for command `delete`",
        );
        s.err(
            json!({"command": "rename", "new_path": "/memories/b"}),
            "Error: Missing required parameter `old_path` for command `rename`",
        );
        s.err(
            json!({"command": "rename", "old_path": "/memories/a", "new_path": 1}),
            "Error: Invalid parameter `new_path` for command `rename`: expected string",
        );
        // Malformed input is reported before the path is looked at.
        s.err(
            json!({"command": "create", "path": "/etc/passwd"}),
            "Error: Missing required parameter `file_text` for command `create`",
        );
        // Unknown extra fields are ignored.
        s.ok(
            json!({"command": "create", "path": "/memories/a", "file_text": "", "mode": 420}),
            "File created successfully at: /memories/a",
        );
    });
}

#[test]
fn tool_use_blocks_pass_through() {
    if !Session::CARRIES_BLOCKS {
        return;
    }
    each_backend(|| {
        let s = s();
        let view = json!({"type": "tool_use", "id": "toolu_01", "name": "memory", "input": {"command": "view", "path": "/memories"}});
        let viewed = json!({"type": "tool_result", "tool_use_id": "toolu_01", "is_error": false,
                   "content": "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items and node_modules:\n0B\t/memories"});
        assert_eq!(s.answer(view.clone()), viewed);
        let bash = json!({"type": "tool_use", "id": "t2", "name": "bash", "input": {}});
        let unknown = json!({"type": "tool_result", "tool_use_id": "t2", "is_error": true, "content": "Error: Unknown tool: \"bash\""});
        assert_eq!(s.answer(bash.clone()), unknown);
        // All the calls of one turn, answered in order.
        assert_eq!(s.answer(json!([view, bash])), json!([viewed, unknown]));
        let create = json!({"type": "tool_use", "id": "c", "name": "memory",
                            "input": {"command": "create", "path": "/memories/a", "file_text": "x"}});
        let created = json!({"type": "tool_result", "tool_use_id": "c", "is_error": false,
                             "content": "File created successfully at: /memories/a"});
        let again = json!({"type": "tool_result", "tool_use_id": "c", "is_error": true,
                           "content": "Error: File /memories/a already exists"});
        assert_eq!(s.answer(json!([create, create])), json!([created, again]));
        // A bare input that is not an object is the model's mistake, not a refused message.
        assert_eq!(
            s.answer(json!("view")),
            json!({"content": "Error: Unknown command: null", "is_error": true})
        );
    });
}

#[test]
fn errors_never_change_stored_data() {
    each_backend(|| {
        let s = s();
        s.create("/memories/a/f.md", "one\ntwo\n");
        s.create("/memories/b", "x");
        let before = snapshot(&s.user());
        let failing: Vec<Value> = vec![
            json!({"command": "create", "path": "/memories/a/f.md", "file_text": "x"}),
            json!({"command": "create", "path": "/memories/b/c", "file_text": "x"}),
            json!({"command": "create", "path": "/memories/n", "file_text": "x".repeat(200_000)}),
            json!({"command": "str_replace", "path": "/memories/a/f.md", "old_str": "o", "new_str": "x"}),
            json!({"command": "str_replace", "path": "/memories/a/f.md", "old_str": "one", "new_str": "x".repeat(200_000)}),
            json!({"command": "insert", "path": "/memories/a/f.md", "insert_line": 9, "insert_text": "x"}),
            json!({"command": "delete", "path": "/memories"}),
            json!({"command": "rename", "old_path": "/memories/a", "new_path": "/memories/b/a"}),
            json!({"command": "rename", "old_path": "/memories/a", "new_path": "/memories/a/x"}),
            json!({"command": "rename", "old_path": "/memories/a", "new_path": "/memories/b"}),
            json!({"command": "view", "path": "/memories/a/f.md", "view_range": [7, 9]}),
        ];
        for input in failing {
            let out = s.run(input.clone());
            assert!(out.is_error, "{input}: {}", out.content);
            assert_eq!(snapshot(&s.user()), before, "{input}");
        }
    });
}

/// A read-only caller (a read-only key's session) gets memkv's read-only error for every write,
/// in every face, and nothing changes; `view` still answers. (memkv's own string, not
/// PROTOCOL.md's: design.md, "Where memkv differs".)
#[test]
fn a_read_only_session_applies_no_write() {
    each_backend(|| {
        let s = Session::read_only(fresh().unwrap());
        let setup = s.user();
        for (path, text) in [
            ("/memories/a/f.md", "one\ntwo\n"),
            ("/memories/b.md", "x\n"),
        ] {
            let out = setup
                .execute_json(&json!({"command": "create", "path": path, "file_text": text}))
                .unwrap();
            assert!(!out.is_error, "{}", out.content);
        }
        let before = snapshot(&s.user());
        let writes: Vec<(&str, Value)> = vec![
            (
                "create",
                json!({"command": "create", "path": "/memories/n.md", "file_text": "x"}),
            ),
            (
                "create",
                json!({"command": "create", "path": "/memories/a/f.md", "file_text": "x"}),
            ),
            (
                "str_replace",
                json!({"command": "str_replace", "path": "/memories/a/f.md", "old_str": "one", "new_str": "1"}),
            ),
            (
                "insert",
                json!({"command": "insert", "path": "/memories/a/f.md", "insert_line": 0, "insert_text": "zero"}),
            ),
            (
                "delete",
                json!({"command": "delete", "path": "/memories/a"}),
            ),
            (
                "rename",
                json!({"command": "rename", "old_path": "/memories/b.md", "new_path": "/memories/c.md"}),
            ),
        ];
        for (command, input) in writes {
            let out = s.run(input.clone());
            assert_eq!(
                (out.content.as_str(), out.is_error),
                (
                    format!("Error: This memory store is read-only for this session; the {command} command was not applied.").as_str(),
                    true
                ),
                "{input}"
            );
            assert_eq!(snapshot(&s.user()), before, "{input}");
        }
        let view = s.run(json!({"command": "view", "path": "/memories/a/f.md"}));
        assert_eq!(
            (view.content.as_str(), view.is_error),
            (
                "Here's the content of /memories/a/f.md with line numbers:\n     1\tone\n     2\ttwo",
                false
            )
        );
    });
}

/// The user's handle and totals agree with what `view` shows.
#[test]
fn totals_follow_every_write() {
    each_backend(|| {
        let s = s();
        s.create("/memories/a/x", "12345");
        s.create("/memories/a/y", "1");
        let u: MemoryStore<'_> = s.user();
        assert_eq!(u.totals().unwrap(), (2, 6));
        s.ok(json!({"command": "str_replace", "path": "/memories/a/x", "old_str": "345", "new_str": ""}), "The memory file has been edited. Here is the snippet showing the change (with line numbers):\n     1\t12");
        assert_eq!(u.totals().unwrap(), (2, 3));
        s.ok(
            json!({"command": "delete", "path": "/memories/a"}),
            "Successfully deleted /memories/a",
        );
        assert_eq!(u.totals().unwrap(), (0, 0));
        assert!(s.store.users().unwrap().is_empty());
    });
}
