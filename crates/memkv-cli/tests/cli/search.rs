//! `memkv search` as a process, on each backend: the text the model's `memory_search` reads (the
//! library's answer, byte for byte), the HTTP server's JSON, and refused searches (exit 2).

use serde_json::{Value, json};

use crate::common::{self, Db, each_backend, fails, ok};

#[test]
fn search_prints_what_memory_search_answers() {
    each_backend(|backend| {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::fresh(backend, dir.path(), "s.redb");
        let input = [
            json!({"command": "create", "path": "/memories/notes/tz.md", "file_text": "# Time\nlives in Paris\nTZ: Europe/Paris\n"}),
            json!({"command": "create", "path": "/memories/b.md", "file_text": "PARIS trip\n"}),
        ]
        .iter()
        .map(|v| format!("{v}\n"))
        .collect::<String>();
        ok(&common::run_with_input(
            common::memkv(&db).args(["exec", "-u", "alice"]),
            input.as_bytes(),
        ));
        let search = |args: &[&str]| {
            let mut all = vec!["search", "-u", "alice"];
            all.extend(args);
            common::run_with_input(common::memkv(&db).args(&all), b"")
        };
        assert_eq!(
            ok(&search(&["-F", "-i", "paris"])),
            "/memories/b.md:1: PARIS trip\n/memories/notes/tz.md:2: lives in Paris\n/memories/notes/tz.md:3: TZ: Europe/Paris\n"
        );
        assert_eq!(
            ok(&search(&[
                "-e",
                "^TZ",
                "-C",
                "1",
                "--path-prefix",
                "/memories/notes"
            ])),
            "/memories/notes/tz.md-2- lives in Paris\n/memories/notes/tz.md:3: TZ: Europe/Paris\n"
        );
        assert_eq!(ok(&search(&["Rome"])), "No memory matches \"Rome\".\n");
        // Ranked, the default: each memory after its score, with its best lines.
        let ranked = ok(&search(&["europe paris"]));
        assert!(
            ranked.starts_with("/memories/notes/tz.md (score "),
            "{ranked}"
        );
        assert!(
            ranked.ends_with(")\n/memories/b.md:1: PARIS trip\n"),
            "{ranked}"
        );
        let json: Value =
            serde_json::from_str(&ok(&search(&["-F", "Paris", "--json", "--limit", "1"]))).unwrap();
        assert_eq!(json["more"], 1);
        assert_eq!(json["data"][0]["path"], "/notes/tz.md");
        assert!(
            json["data"][0]["memory_id"]
                .as_str()
                .unwrap()
                .starts_with("mem_")
        );
        assert_eq!(
            json["data"][0]["lines"],
            json!([{"line_number": 2, "text": "lives in Paris", "is_match": true}])
        );
        // `memkv exec` answers a memory_search block as `memkv search` prints.
        let block = json!({"type": "tool_use", "id": "t1", "name": "memory_search", "input": {"query": "paris", "case_insensitive": true}});
        let answered: Value = serde_json::from_str(&ok(&common::run_with_input(
            common::memkv(&db).args(["exec", "-u", "alice"]),
            format!("{block}\n").as_bytes(),
        )))
        .unwrap();
        assert_eq!(
            answered,
            json!({"type": "tool_result", "tool_use_id": "t1", "content": ok(&search(&["-i", "paris"])).trim_end(), "is_error": false})
        );
        fails(
            &search(&["-e", "a("]),
            2,
            "search refused: the regular expression is invalid",
        );
        fails(
            &search(&["x", "--limit", "0"]),
            2,
            "search refused: the limit must be 1 to 1000, not 0",
        );
        fails(&search(&["x", "--path-prefix", "/etc"]), 2, "/etc");
        fails(&search(&["-e", "-F", "x"]), 2, "cannot be used with");
    });
}

/// A memory holding terminal escapes: `search` prints them escaped (`\u{1b}`), never raw, so a
/// stored string cannot recolour or rewrite the operator's terminal; `cat` prints the content as
/// stored, and `--json` escapes it by JSON's rules.
#[test]
fn terminal_escapes_in_a_memory_are_printed_escaped() {
    each_backend(|backend| {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::fresh(backend, dir.path(), "s.redb");
        let text = "\u{1b}[2J\u{1b}[31mwiped\rfake\u{202e}txt.exe\n";
        let input = json!({"command": "create", "path": "/memories/evil.md", "file_text": text});
        ok(&common::run_with_input(
            common::memkv(&db).args(["exec", "-u", "alice"]),
            format!("{input}\n").as_bytes(),
        ));
        let out = ok(&common::run_with_input(
            common::memkv(&db).args(["search", "-u", "alice", "-F", "wiped"]),
            b"",
        ));
        assert_eq!(
            out,
            "/memories/evil.md:1: \\u{1b}[2J\\u{1b}[31mwiped\\u{d}fake\\u{202e}txt.exe\n"
        );
        let cat = common::run_with_input(
            common::memkv(&db).args(["cat", "-u", "alice", "/memories/evil.md"]),
            b"",
        );
        assert_eq!(cat.stdout, text.as_bytes());
    });
}
