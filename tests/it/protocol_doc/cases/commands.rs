//! The `memory` commands: paths, view, create, str_replace, insert, delete and rename.

use memkv::Database;
use serde_json::json;

use super::{Check, create, run};

pub(crate) fn paths(c: &Check) {
    let db = Database::in_memory().unwrap();
    let u = db.user("dana").unwrap();
    let long = format!("/memories/{}", "a".repeat(256));
    let deep = format!("/memories{}", "/d".repeat(21));
    let cases = [
        ("path_outside", "/tmp/notes.md"),
        ("path_outside", "/memoriesX/a.md"),
        ("path_outside", ""),
        ("path_dot", "/memories/../etc/passwd"),
        ("path_dot", "/memories/%2e%2E/x"),
        ("path_empty", "/memories//a.md"),
        ("path_separator", "/memories/a\\b.md"),
        ("path_separator", "/memories/a%2Fb.md"),
        ("path_control", "/memories/a\u{202e}b.md"),
        ("path_control", "/memories/a\u{2028}"),
        ("path_too_long", &long),
        ("path_too_long", &deep),
    ];
    for (id, path) in cases {
        for input in [
            json!({"command": "view", "path": path}),
            json!({"command": "create", "path": path, "file_text": "x"}),
            json!({"command": "str_replace", "path": path, "old_str": "x"}),
            json!({"command": "insert", "path": path, "insert_line": 0, "insert_text": "x"}),
            json!({"command": "delete", "path": path}),
        ] {
            c.err(&run(&u, input), id, &[("path", path)]);
        }
    }
    // rename: `old_path`, then `new_path`.
    c.err(
        &run(
            &u,
            json!({"command": "rename", "old_path": "/memories/../x", "new_path": "/x"}),
        ),
        "path_dot",
        &[("path", "/memories/../x")],
    );
    c.err(
        &run(
            &u,
            json!({"command": "rename", "old_path": "/memories/a", "new_path": "/x"}),
        ),
        "path_outside",
        &[("path", "/x")],
    );
}

pub(crate) fn view_directories(c: &Check) {
    let db = Database::in_memory().unwrap();
    let u = db.user("dana").unwrap();
    let entry = |size: &str, path: &str| c.fill("dir_entry", &[("size", size), ("path", path)]);
    let header = c.fill("dir_header", &[("dir", "/memories")]);
    c.answer(
        "view of an empty tree",
        &run(&u, json!({"command": "view", "path": "/memories"})),
        &[header.clone(), entry("0B", "/memories")].join("\n"),
        false,
    );
    create(c, &u, "/memories/profile.md", "Name: Dana\nLikes: tea\n");
    create(c, &u, "/memories/projects/memkv.md", &"x".repeat(1500));
    create(c, &u, "/memories/projects/old/2023.md", &"y".repeat(600));
    create(c, &u, "/memories/projects/node_modules/m.js", "q");
    create(c, &u, "/memories/.cache/x", "z");
    // `/memories/` is listed as `/memories`; `view_range` is ignored; hidden files count in
    // their directories' sizes (2,124 bytes in all).
    let want = [
        header,
        entry("2.1K", "/memories"),
        entry("22B", "/memories/profile.md"),
        entry("2.1K", "/memories/projects/"),
        entry("1.5K", "/memories/projects/memkv.md"),
        entry("600B", "/memories/projects/old/"),
    ]
    .join("\n");
    c.answer(
        "view of a directory",
        &run(
            &u,
            json!({"command": "view", "path": "/memories/", "view_range": [1, 2]}),
        ),
        &want,
        false,
    );
    let want = [
        c.fill("dir_header", &[("dir", "/memories/projects")]),
        entry("2.1K", "/memories/projects"),
        entry("1.5K", "/memories/projects/memkv.md"),
        entry("600B", "/memories/projects/old/"),
        entry("600B", "/memories/projects/old/2023.md"),
    ]
    .join("\n");
    c.answer(
        "view of a subdirectory",
        &run(
            &u,
            json!({"command": "view", "path": "/memories/projects/"}),
        ),
        &want,
        false,
    );

    // Cut to the budget: the header, the directory's line, the entries that fit, the note.
    let budget = 300;
    let db = Database::builder()
        .view_max_chars(budget)
        .in_memory()
        .unwrap();
    let u = db.user("dana").unwrap();
    for i in 0..30 {
        create(c, &u, &format!("/memories/f{i:02}.md"), "x");
    }
    let mut want = [
        c.fill("dir_header", &[("dir", "/memories")]),
        entry("30B", "/memories"),
    ]
    .join("\n");
    let mut used = want.chars().count();
    let mut shown = 0;
    for i in 0..30 {
        let line = entry("1B", &format!("/memories/f{i:02}.md"));
        if used + 1 + line.chars().count() > budget {
            break;
        }
        used += 1 + line.chars().count();
        want = format!("{want}\n{line}");
        shown += 1;
    }
    assert!(0 < shown && shown < 30);
    want.push_str(&c.fill(
        "dir_truncated",
        &[("shown", &shown.to_string()), ("total", "30")],
    ));
    c.answer(
        "view of a directory over the budget",
        &run(&u, json!({"command": "view", "path": "/memories"})),
        &want,
        false,
    );
}

pub(crate) fn view_files(c: &Check) {
    let db = Database::in_memory().unwrap();
    let u = db.user("dana").unwrap();
    create(c, &u, "/memories/profile.md", "Name: Dana\nLikes: tea\n");
    let header = c.fill("file_header", &[("path", "/memories/profile.md")]);
    c.answer(
        "view of a file",
        &run(
            &u,
            json!({"command": "view", "path": "/memories/profile.md"}),
        ),
        &[
            header.clone(),
            c.line(1, "Name: Dana"),
            c.line(2, "Likes: tea"),
        ]
        .join("\n"),
        false,
    );
    c.answer(
        "view of a file with a view_range",
        &run(
            &u,
            json!({"command": "view", "path": "/memories/profile.md", "view_range": [2, -1]}),
        ),
        &[header, c.line(2, "Likes: tea")].join("\n"),
        false,
    );
    create(c, &u, "/memories/empty.md", "");
    c.ok(
        &run(
            &u,
            json!({"command": "view", "path": "/memories/empty.md/"}),
        ),
        "file_header",
        &[("path", "/memories/empty.md/")],
    );
    for path in ["/memories/nope.md", "/memories/profile.md/x"] {
        c.err(
            &run(&u, json!({"command": "view", "path": path})),
            "not_found_please",
            &[("path", path)],
        );
    }
    for range in [json!([0, 2]), json!([3, -1]), json!([2, 1]), json!("1-2")] {
        c.err(
            &run(
                &u,
                json!({"command": "view", "path": "/memories/profile.md", "view_range": range}),
            ),
            "view_range",
            &[("n_lines", "2")],
        );
    }

    // Cut to the budget: the header, the whole lines that fit, the note.
    let budget = 100;
    let db = Database::builder()
        .view_max_chars(budget)
        .in_memory()
        .unwrap();
    let u = db.user("dana").unwrap();
    let lines: Vec<String> = (1..=10).map(|i| format!("entry {i}")).collect();
    create(c, &u, "/memories/log.md", &lines.join("\n"));
    let mut want = c.fill("file_header", &[("path", "/memories/log.md")]);
    let mut used = want.chars().count();
    let mut last = 0;
    for (i, text) in lines.iter().enumerate() {
        let line = c.line(i + 1, text);
        if used + 1 + line.chars().count() > budget {
            break;
        }
        used += 1 + line.chars().count();
        want = format!("{want}\n{line}");
        last = i + 1;
    }
    assert!(0 < last && last < 10);
    want.push_str(&c.fill(
        "file_truncated",
        &[("first", "1"), ("last", &last.to_string()), ("total", "10")],
    ));
    c.answer(
        "view of a file over the budget",
        &run(&u, json!({"command": "view", "path": "/memories/log.md"})),
        &want,
        false,
    );
}

/// The line limit, with thousands separators: a file written under a larger limit, viewed and
/// written under a smaller one.
pub(crate) fn line_limit(c: &Check) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memkv.redb");
    {
        let db = Database::open(&path).unwrap();
        create(
            c,
            &db.user("dana").unwrap(),
            "/memories/many.md",
            &"l\n".repeat(1001),
        );
    }
    let db = Database::builder().max_lines(1000).open(&path).unwrap();
    let u = db.user("dana").unwrap();
    c.err(
        &run(&u, json!({"command": "view", "path": "/memories/many.md"})),
        "view_too_many_lines",
        &[("path", "/memories/many.md"), ("max_lines", "1,000")],
    );
    c.err(
        &run(
            &u,
            json!({"command": "create", "path": "/memories/more.md", "file_text": "l\n".repeat(1001)}),
        ),
        "too_many_lines",
        &[("path", "/memories/more.md"), ("max_lines", "1,000")],
    );
}

pub(crate) fn create_errors(c: &Check) {
    let db = Database::in_memory().unwrap();
    let u = db.user("dana").unwrap();
    create(c, &u, "/memories/profile.md", "x");
    for path in ["/memories/profile.md", "/memories", "/memories/"] {
        c.err(
            &run(
                &u,
                json!({"command": "create", "path": path, "file_text": "y"}),
            ),
            "already_exists",
            &[("path", path)],
        );
    }
    create(c, &u, "/memories/caf\u{e9}", "x");
    for (path, parent) in [
        ("/memories/profile.md/x", "/memories/profile.md"),
        ("/memories/cafe\u{301}/x/", "/memories/caf\u{e9}"),
    ] {
        c.err(
            &run(
                &u,
                json!({"command": "create", "path": path, "file_text": "y"}),
            ),
            "parent_is_file",
            &[("path", path), ("parent", parent)],
        );
    }
}

pub(crate) fn str_replace(c: &Check) {
    let db = Database::in_memory().unwrap();
    let u = db.user("dana").unwrap();
    create(c, &u, "/memories/profile.md", "Name: Dana\nLikes: tea\n");
    create(c, &u, "/memories/d/x.md", "");
    for path in ["/memories/nope.md", "/memories/d"] {
        c.err(
            &run(
                &u,
                json!({"command": "str_replace", "path": path, "old_str": "a", "new_str": "b"}),
            ),
            "str_replace_not_found",
            &[("path", path)],
        );
    }
    c.err(
        &run(
            &u,
            json!({"command": "str_replace", "path": "/memories/profile.md", "old_str": ""}),
        ),
        "empty_old_str",
        &[],
    );
    c.err(
        &run(
            &u,
            json!({"command": "str_replace", "path": "/memories/profile.md", "old_str": "coffee", "new_str": "x"}),
        ),
        "no_match",
        &[("old_str", "coffee"), ("path", "/memories/profile.md")],
    );
    create(
        c,
        &u,
        "/memories/tea.md",
        "tea\ngreen tea\nblack tea, more tea\n",
    );
    c.err(
        &run(
            &u,
            json!({"command": "str_replace", "path": "/memories/tea.md", "old_str": "tea", "new_str": "x"}),
        ),
        "multiple_matches",
        &[("old_str", "tea"), ("lines", "1, 2, 3")],
    );
    create(c, &u, "/memories/many.md", &"a\n".repeat(1100));
    let listed: Vec<String> = (1..=100).map(|n| n.to_string()).collect();
    c.err(
        &run(
            &u,
            json!({"command": "str_replace", "path": "/memories/many.md", "old_str": "a"}),
        ),
        "multiple_matches_more",
        &[
            ("old_str", "a"),
            ("lines", &listed.join(", ")),
            ("more", "1,000"),
        ],
    );
    let snippet = [c.line(1, "Name: Dana"), c.line(2, "Likes: coffee")].join("\n");
    c.ok(
        &run(
            &u,
            json!({"command": "str_replace", "path": "/memories/profile.md", "old_str": "tea", "new_str": "coffee"}),
        ),
        "edited",
        &[("snippet", &snippet)],
    );
}

pub(crate) fn insert(c: &Check) {
    let db = Database::in_memory().unwrap();
    let u = db.user("dana").unwrap();
    create(c, &u, "/memories/profile.md", "Name: Dana\nLikes: tea\n");
    create(c, &u, "/memories/d/x.md", "");
    for path in ["/memories/nope.md", "/memories/d"] {
        c.err(
            &run(
                &u,
                json!({"command": "insert", "path": path, "insert_line": 0, "insert_text": "x"}),
            ),
            "not_found",
            &[("path", path)],
        );
    }
    for line in [-1, 3, 99] {
        c.err(
            &run(
                &u,
                json!({"command": "insert", "path": "/memories/profile.md", "insert_line": line, "insert_text": "x"}),
            ),
            "invalid_insert_line",
            &[("insert_line", &line.to_string()), ("n_lines", "2")],
        );
    }
    c.ok(
        &run(
            &u,
            json!({"command": "insert", "path": "/memories/profile.md", "insert_line": 2, "insert_text": "Lives: Paris\n"}),
        ),
        "inserted",
        &[("path", "/memories/profile.md")],
    );
}

pub(crate) fn delete(c: &Check) {
    let db = Database::in_memory().unwrap();
    let u = db.user("dana").unwrap();
    create(c, &u, "/memories/projects/a.md", "x");
    for path in ["/memories", "/memories/"] {
        c.err(
            &run(&u, json!({"command": "delete", "path": path})),
            "cannot_delete_root",
            &[],
        );
    }
    c.err(
        &run(&u, json!({"command": "delete", "path": "/memories/nope"})),
        "not_found",
        &[("path", "/memories/nope")],
    );
    c.ok(
        &run(
            &u,
            json!({"command": "delete", "path": "/memories/projects/"}),
        ),
        "deleted",
        &[("path", "/memories/projects/")],
    );
}

pub(crate) fn rename(c: &Check) {
    let db = Database::in_memory().unwrap();
    let u = db.user("dana").unwrap();
    create(c, &u, "/memories/a/f", "1");
    create(c, &u, "/memories/a/sub/g", "22");
    create(c, &u, "/memories/file", "333");
    let rename = |old: &str, new: &str| {
        run(
            &u,
            json!({"command": "rename", "old_path": old, "new_path": new}),
        )
    };
    c.err(
        &rename("/memories/", "/memories/b"),
        "cannot_rename_root",
        &[],
    );
    c.err(
        &rename("/memories/nope", "/memories/b"),
        "rename_not_found",
        &[("old_path", "/memories/nope")],
    );
    for new in ["/memories/file", "/memories", "/memories/a"] {
        c.err(
            &rename("/memories/a", new),
            "destination_exists",
            &[("new_path", new)],
        );
    }
    c.err(
        &rename("/memories/a", "/memories/a/b"),
        "move_into_itself",
        &[("old_path", "/memories/a")],
    );
    c.err(
        &rename("/memories/a", "/memories/file/x"),
        "rename_parent_is_file",
        &[
            ("new_path", "/memories/file/x"),
            ("parent", "/memories/file"),
        ],
    );
    // A path below the moved directory would be too deep at its new place.
    let deep = format!("/memories/deep{}", "/d".repeat(18));
    create(c, &u, &format!("{deep}/f"), "x");
    let moved = format!("/memories/x/y/deep{}/f", "/d".repeat(18));
    c.err(
        &rename("/memories/deep", "/memories/x/y/deep"),
        "path_too_long",
        &[("path", &moved)],
    );
    c.ok(
        &rename("/memories/a", "/memories/z/moved"),
        "renamed",
        &[
            ("old_path", "/memories/a"),
            ("new_path", "/memories/z/moved"),
        ],
    );
}
