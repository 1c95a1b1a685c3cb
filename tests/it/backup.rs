//! Export, import, and migration from and to plain directories.

use std::path::{Path, PathBuf};

use memkv::{Conflict, Database, Error};
use proptest::prelude::*;
use serde_json::{Value, json};

use crate::util::snapshot;
#[allow(unused_imports)]
use crate::util::{Backend, Fresh, current, each_backend, fresh};

type Files = Vec<(String, String, String)>; // user, path, content

pub fn fill(store: &Database, files: &[(String, String, String)]) {
    for (user, path, content) in files {
        let out = store
            .user(user)
            .unwrap()
            .execute_json(&json!({"command": "create", "path": path, "file_text": content}))
            .unwrap();
        assert!(!out.is_error, "{path}: {}", out.content);
    }
}

type Snapshot = Vec<(String, Vec<(String, String, i64, i64)>)>;

/// Every user's files with content and times.
pub fn everything(store: &Database) -> Snapshot {
    store
        .users()
        .unwrap()
        .into_iter()
        .map(|u| {
            let h = store.user(&u.user).unwrap();
            (u.user.clone(), snapshot(&h))
        })
        .collect()
}

pub fn export_to(store: &Database, path: &Path) -> memkv::Summary {
    let file = std::fs::File::create(path).unwrap();
    store.export(&[], file, &mut |_| {}).unwrap()
}

/// The lines of the export at `path`, without the store lines' `feed_seq` (each database numbers
/// its own stores' feeds: a copy's goes on from the export's, past the import's own entries).
pub fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| {
            let mut v: Value = serde_json::from_str(l).unwrap();
            if v["type"] == "store" {
                assert!(v["feed_seq"].is_u64(), "{v}");
                v.as_object_mut().unwrap().remove("feed_seq");
            }
            v
        })
        .collect()
}

/// An export file as lines: parsed for editing, with the original text of each, so that lines
/// a test does not touch are written back byte for byte.
pub struct Export {
    raw: Vec<String>,
    pub parsed: Vec<Value>,
}

impl Export {
    pub fn read(path: &Path) -> Self {
        let raw: Vec<String> = std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect();
        let parsed = raw
            .iter()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        Export { raw, parsed }
    }

    /// The text of `lines`: unchanged lines as they were, edited ones re-serialized.
    pub fn render(&self, lines: &[Value]) -> String {
        lines
            .iter()
            .enumerate()
            .map(|(i, l)| match self.parsed.get(i) {
                Some(orig) if orig == l => format!("{}\n", self.raw[i]),
                _ => format!("{l}\n"),
            })
            .collect()
    }

    /// Recomputes checksums and the trailer's digest after a hand edit, so only the intended
    /// flaw remains.
    pub fn reseal(&self, lines: &mut [Value]) {
        use sha2::{Digest, Sha256};
        let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
        let n = lines.len();
        for l in &mut lines[1..n - 1] {
            if let Some(c) = l["content"].as_str().map(str::to_owned) {
                l["sha256"] = json!(hex(&Sha256::digest(c.as_bytes())));
            }
        }
        let body = self.render(&lines[..n - 1]);
        lines[n - 1]["sha256"] = json!(hex(&Sha256::digest(body.as_bytes())));
    }
}

pub fn sample() -> Files {
    vec![
        ("alice".into(), "/memories/a.md".into(), "alpha\n".into()),
        ("alice".into(), "/memories/dir/b.md".into(), "beta".into()),
        (
            "bob@example.com".into(),
            "/memories/a.md".into(),
            "bob's own a\n".into(),
        ),
        (
            "bob@example.com".into(),
            "/memories/caf\u{e9}/n\u{e9}e.md".into(),
            "".into(),
        ),
    ]
}

#[test]
fn export_format_is_documented_shape() {
    each_backend(|| {
        let dir = tempfile::tempdir().unwrap();
        let store = fresh().unwrap();
        fill(&store, &sample());
        let file = dir.path().join("x.jsonl");
        let summary = export_to(&store, &file);
        assert_eq!(
            (summary.files, summary.users, summary.bytes),
            (4, 2, 6 + 4 + 12)
        );
        let l = lines(&file);
        // Per store: its record, its files, its versions (`history_backup.rs` has the rest).
        assert_eq!(l.len(), 12);
        assert_eq!(l[0]["type"], "header");
        assert_eq!(l[0]["format"], "memkv-export");
        assert_eq!(l[0]["version"], 4);
        assert_eq!(l[0]["database"].as_str().map(str::len), Some(32));
        assert_eq!(l[0]["seq"], store.last_change().unwrap());
        assert_eq!(
            (&l[1]["type"], &l[1]["user"]),
            (&json!("store"), &json!("alice"))
        );
        assert_eq!(l[2]["type"], "file");
        assert_eq!(l[2]["user"], "alice");
        assert_eq!(l[2]["path"], "/memories/a.md");
        use sha2::{Digest, Sha256};
        let want: String = Sha256::digest(b"alpha\n")
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(l[2]["sha256"], json!(want));
        assert_eq!(l[2]["content"], "alpha\n");
        assert!(l[2]["created_ms"].as_i64().unwrap() > 0);
        assert_eq!(
            l[11],
            json!({"type": "trailer", "files": 4, "users": 2, "versions": 4, "bytes": 22, "sha256": l[11]["sha256"]})
        );
    });
}

#[test]
fn round_trip_preserves_files_contents_and_times() {
    each_backend(|| {
        let dir = tempfile::tempdir().unwrap();
        let a = fresh().unwrap();
        fill(&a, &sample());
        let file = dir.path().join("x.jsonl");
        export_to(&a, &file);
        let b = fresh().unwrap();
        let s = b.import(&file, Conflict::Refuse, &mut |_| {}).unwrap();
        assert_eq!((s.files, s.users, s.bytes), (4, 2, 22));
        assert_eq!(everything(&a), everything(&b));
        assert!(b.check().unwrap().is_empty());
        // A second export of the copy has the same file lines.
        let again = dir.path().join("y.jsonl");
        export_to(&b, &again);
        assert_eq!(lines(&file)[1..5], lines(&again)[1..5]);
    });
}

#[test]
fn thousands_of_files_across_users_round_trip() {
    // 4 × 2,500 files with MEMKV_FULL_TESTS=1, 4 × 250 by default.
    let per_user = crate::util::sample(250u64, 2_500);
    let all = 4 * per_user;
    each_backend(|| {
        let dir = tempfile::tempdir().unwrap();
        let a = fresh().unwrap();
        for u in 0..4 {
            let user = a.user(&format!("user{u}")).unwrap();
            // Bulk-load through the library, one file per command as an agent would (in
            // group-commit batches on PostgreSQL: thousands of network commits would dominate
            // the suite).
            let chunk = if current() == Backend::Postgres {
                250
            } else {
                1
            };
            let creates: Vec<(String, memkv::Command)> = (0..per_user)
                .map(|i| {
                    let input = json!({"command": "create", "path": format!("/memories/d{}/e{}/f{i}.md", i % 10, i % 7), "file_text": format!("memory {u}/{i}\n")});
                    (user.id().to_owned(), memkv::Command::from_json(&input).unwrap())
                })
                .collect();
            for batch in creates.chunks(chunk) {
                for out in a.execute_batch(batch) {
                    assert!(!out.unwrap().is_error);
                }
            }
        }
        let file = dir.path().join("big.jsonl");
        let mut seen = 0;
        let s = a
            .export(&[], std::fs::File::create(&file).unwrap(), &mut |p| {
                seen = p.done
            })
            .unwrap();
        assert_eq!((s.files, s.users, seen), (all, 4, all));
        let b = fresh().unwrap();
        assert_eq!(
            b.import(&file, Conflict::Refuse, &mut |_| {})
                .unwrap()
                .files,
            all
        );
        assert_eq!(everything(&a), everything(&b));
        assert!(b.check().unwrap().is_empty());
        // Only some users.
        let part = dir.path().join("part.jsonl");
        let s = a
            .export(
                &["user2".into()],
                std::fs::File::create(&part).unwrap(),
                &mut |_| {},
            )
            .unwrap();
        assert_eq!((s.files, s.users), (per_user, 1));
        // A user without files is not silently an empty backup.
        let err = a
            .export(
                &["user2".into(), "nobody".into()],
                std::io::sink(),
                &mut |_| {},
            )
            .unwrap_err();
        assert_eq!(err.to_string(), "no such user: \"nobody\" has no files");
    });
}

fn segment() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("a".to_owned()),
        Just("b".to_owned()),
        Just("n\u{e9}".to_owned()),
        "[a-z]{1,6}"
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn export_import_export_is_identity(
        files in prop::collection::vec((0..3usize, prop::collection::vec(segment(), 1..4), "\\PC{0,40}"), 0..25)
    ) {
        for backend in crate::util::backends() {
            let _on = crate::util::using(backend);
            let a = fresh().unwrap();
            for (u, segs, content) in &files {
                // Collisions (file over directory and so on) are refused by create; fine.
                let _ = a.user(&format!("u{u}")).unwrap().execute_json(&json!({"command": "create", "path": format!("/memories/{}", segs.join("/")), "file_text": content}));
            }
            let dir = tempfile::tempdir().unwrap();
            let file = dir.path().join("x.jsonl");
            export_to(&a, &file);
            let b = fresh().unwrap();
            b.import(&file, Conflict::Refuse, &mut |_| {}).unwrap();
            prop_assert_eq!(everything(&a), everything(&b));
            let again = dir.path().join("y.jsonl");
            export_to(&b, &again);
            let (l1, l2) = (lines(&file), lines(&again));
            // Same file lines; header times (and so the digest) differ.
            prop_assert_eq!(&l1[1..l1.len() - 1], &l2[1..l2.len() - 1]);
        }
    }
}

/// Builds an export of [`sample`], lets `edit` damage it, and checks that the import is refused
/// with a message naming `line`, and that the target store is unchanged.
fn refused(edit: impl Fn(&mut Vec<Value>, &Export), line: u64, reason: &str) {
    each_backend(|| {
        let dir = tempfile::tempdir().unwrap();
        let a = fresh().unwrap();
        fill(&a, &sample());
        let file = dir.path().join("x.jsonl");
        export_to(&a, &file);
        let export = Export::read(&file);
        let mut l = export.parsed.clone();
        edit(&mut l, &export);
        std::fs::write(&file, export.render(&l)).unwrap();
        let b = fresh().unwrap();
        fill(
            &b,
            &[("carol".into(), "/memories/mine".into(), "untouched".into())],
        );
        let before = everything(&b);
        match b.import(&file, Conflict::Refuse, &mut |_| {}) {
            Err(Error::Import {
                line: got,
                reason: why,
            }) => {
                assert_eq!(got, line, "{why}");
                assert!(why.contains(reason), "{why:?} should mention {reason:?}");
            }
            other => panic!("expected a refusal naming line {line}, got {other:?}"),
        }
        assert_eq!(everything(&b), before);
    });
}

#[test]
fn hostile_or_damaged_exports_change_nothing() {
    each_backend(|| {
        refused(
            |l, _| l[3]["content"] = json!("tampered"),
            4,
            "checksum mismatch",
        );
        refused(
            |l, e| {
                // The file and its version alike (the same size), checksums resealed.
                (l[3]["content"], l[5]["content"]) = (json!("BETA"), json!("BETA"));
                e.reseal(l);
                l[11]["sha256"] = json!("00");
            },
            12,
            "digest does not match",
        );
        refused(
            |l, _| {
                l.truncate(4);
            },
            0,
            "the file ends without a trailer",
        );
        refused(
            |l, _| {
                l.swap(2, 3);
            },
            12,
            "digest does not match",
        );
        refused(
            |l, e| {
                l[2]["path"] = json!("/memories/../etc/passwd");
                e.reseal(l);
            },
            3,
            "invalid path",
        );
        refused(
            |l, e| {
                l[2]["path"] = json!("/etc/passwd");
                e.reseal(l);
            },
            3,
            "invalid path",
        );
        refused(
            |l, e| {
                l[2]["path"] = json!("/memories/x/");
                e.reseal(l);
            },
            3,
            "canonical",
        );
        refused(
            |l, e| {
                l[2]["path"] = json!("/memories");
                e.reseal(l);
            },
            3,
            "/memories itself",
        );
        refused(
            |l, e| {
                l[2]["content"] = json!("x".repeat(200_000));
                e.reseal(l);
            },
            3,
            "over the limit of 102400 bytes",
        );
        refused(
            |l, e| {
                l[3]["path"] = l[2]["path"].clone();
                e.reseal(l);
            },
            4,
            "duplicate path",
        );
        refused(
            |l, e| {
                l[3]["path"] = json!("/memories/a.md/b.md");
                e.reseal(l);
            },
            4,
            "lies below the file",
        );
        refused(
            |l, e| {
                l[2]["path"] = json!("/memories/dir");
                e.reseal(l);
            },
            4,
            "lies below the file",
        );
        refused(
            |l, e| {
                l[2]["user"] = json!("");
                e.reseal(l);
            },
            3,
            "invalid user id",
        );
        refused(
            |l, e| {
                l[2]["content"] = json!("key AKIAUJZDEGXDNCF32EPF");
                e.reseal(l);
            },
            3,
            "secret (AWS access key)",
        );
        refused(
            |l, e| {
                l[2]["extra"] = json!(1);
                e.reseal(l);
            },
            3,
            "not a valid export line",
        );
        refused(
            |l, _| {
                l[0]["version"] = json!(5);
            },
            1,
            "export format version 5",
        );
        refused(
            |l, _| {
                l[0]["format"] = json!("other");
            },
            1,
            "not a memkv export",
        );
        refused(
            |l, _| {
                l.remove(0);
            },
            1,
            "not a memkv export header",
        );
        refused(
            |l, _| {
                let t = l[11].clone();
                l.push(t);
            },
            13,
            "after the trailer",
        );
        refused(
            |l, e| {
                l[11]["files"] = json!(3);
                e.reseal(l);
            },
            12,
            "the trailer counts 3 files",
        );
        // Two users' files under one name are two files, in two partitions; but the same user twice
        // under the same name (in another Unicode spelling) is one path.
        refused(
            |l, e| {
                l[8]["path"] = json!("/memories/cafe\u{301}/ne\u{301}e.md");
                e.reseal(l);
            },
            9,
            "canonical",
        );
    });
}

#[test]
fn a_truncated_final_line_is_refused() {
    each_backend(|| {
        let dir = tempfile::tempdir().unwrap();
        let a = fresh().unwrap();
        fill(&a, &sample());
        let file = dir.path().join("x.jsonl");
        export_to(&a, &file);
        let text = std::fs::read(&file).unwrap();
        std::fs::write(&file, &text[..text.len() - 10]).unwrap();
        let b = fresh().unwrap();
        let err = b.import(&file, Conflict::Refuse, &mut |_| {}).unwrap_err();
        assert!(matches!(err, Error::Import { line: 12, .. }), "{err}");
        assert!(b.users().unwrap().is_empty());
        std::fs::write(&file, b"").unwrap();
        // A refusal of the file as a whole names no line ("line 0" would mean nothing).
        let err = b.import(&file, Conflict::Refuse, &mut |_| {}).unwrap_err();
        assert!(matches!(err, Error::Import { line: 0, .. }), "{err}");
        assert_eq!(err.to_string(), "the file is empty");
        let missing = b
            .import(&dir.path().join("missing"), Conflict::Refuse, &mut |_| {})
            .unwrap_err();
        assert!(matches!(missing, Error::Io { .. }), "{missing}");
    });
}

#[test]
fn conflicts_refuse_skip_or_replace() {
    each_backend(|| {
        let dir = tempfile::tempdir().unwrap();
        let a = fresh().unwrap();
        fill(&a, &sample());
        let file = dir.path().join("x.jsonl");
        export_to(&a, &file);
        let b = fresh().unwrap();
        fill(
            &b,
            &[
                ("alice".into(), "/memories/a.md".into(), "local".into()),
                ("alice".into(), "/memories/other".into(), "kept".into()),
            ],
        );
        let before = everything(&b);
        let err = b.import(&file, Conflict::Refuse, &mut |_| {}).unwrap_err();
        assert_eq!(
            err.to_string(),
            "line 3: /memories/a.md already exists for user \"alice\" (use --skip-existing or --replace)"
        );
        assert_eq!(everything(&b), before);

        let s = b.import(&file, Conflict::Skip, &mut |_| {}).unwrap();
        assert_eq!((s.files, s.skipped, s.replaced), (3, 1, 0));
        assert_eq!(
            b.user("alice")
                .unwrap()
                .read_file("/memories/a.md")
                .unwrap()
                .unwrap(),
            "local"
        );

        let s = b.import(&file, Conflict::Replace, &mut |_| {}).unwrap();
        assert_eq!((s.files, s.replaced), (4, 4));
        assert_eq!(
            b.user("alice")
                .unwrap()
                .read_file("/memories/a.md")
                .unwrap()
                .unwrap(),
            "alpha\n"
        );
        assert_eq!(
            b.user("alice")
                .unwrap()
                .read_file("/memories/other")
                .unwrap()
                .unwrap(),
            "kept"
        );
        assert!(b.check().unwrap().is_empty());

        // A file where the import needs a directory is never replaced.
        let c = fresh().unwrap();
        fill(
            &c,
            &[("alice".into(), "/memories/dir".into(), "a file".into())],
        );
        let err = c.import(&file, Conflict::Replace, &mut |_| {}).unwrap_err();
        assert_eq!(
            err.to_string(),
            "line 4: cannot import /memories/dir/b.md for user \"alice\": /memories/dir is a file"
        );
        assert_eq!(c.users().unwrap().len(), 1);
        // Quotas of the target store hold.
        let d = Database::builder().max_files(2).fresh().unwrap();
        fill(&d, &[("alice".into(), "/memories/z".into(), "".into())]);
        let err = d.import(&file, Conflict::Refuse, &mut |_| {}).unwrap_err();
        assert_eq!(
            err.to_string(),
            "line 4: user \"alice\": Memory quota exceeded: at most 2 files"
        );
    });
}

fn tree_of(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    fn walk(root: &Path, d: &Path, out: &mut Vec<(PathBuf, String)>) {
        for e in std::fs::read_dir(d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(root, &p, out);
            } else {
                out.push((
                    p.strip_prefix(root).unwrap().to_owned(),
                    std::fs::read_to_string(&p).unwrap(),
                ));
            }
        }
    }
    walk(dir, dir, &mut out);
    out.sort();
    out
}

#[test]
fn from_dir_skips_what_it_must_and_reads_nothing_outside() {
    each_backend(|| {
        use std::os::unix::fs::symlink;
        let tmp = tempfile::tempdir().unwrap();
        let outside = tmp.path().join("outside.txt");
        std::fs::write(&outside, "SECRET OUTSIDE").unwrap();
        let src = tmp.path().join("memories");
        std::fs::create_dir_all(src.join("projects/x")).unwrap();
        std::fs::write(src.join("notes.md"), "# notes\n").unwrap();
        std::fs::write(src.join("projects/x/plan.md"), "plan").unwrap();
        std::fs::write(src.join("binary.bin"), [0xff, 0xfe, 0x00]).unwrap();
        std::fs::write(src.join("back\\slash.md"), "bad name").unwrap();
        symlink(&outside, src.join("link.md")).unwrap();
        symlink(tmp.path(), src.join("linkdir")).unwrap();
        let fifo = src.join("pipe");
        assert!(
            std::process::Command::new("mkfifo")
                .arg(&fifo)
                .status()
                .unwrap()
                .success()
        );
        {
            use std::os::unix::ffi::OsStrExt;
            let bad = std::ffi::OsStr::from_bytes(b"bad\xffname.md");
            std::fs::write(src.join(bad), "x").unwrap();
        }

        let store = fresh().unwrap();
        let (s, skipped) = store
            .import_dir(&src, "dana", false, Conflict::Refuse, &mut |_| {})
            .unwrap();
        assert_eq!((s.files, s.bytes), (2, 12));
        let mut reasons: Vec<(String, String)> = skipped
            .iter()
            .map(|s| (s.path.to_string_lossy().into_owned(), s.reason.clone()))
            .collect();
        reasons.sort();
        assert_eq!(reasons.len(), 6, "{reasons:?}");
        assert!(
            reasons
                .iter()
                .any(|(p, r)| p == "link.md" && r.contains("symbolic link"))
        );
        assert!(
            reasons
                .iter()
                .any(|(p, r)| p == "linkdir" && r.contains("symbolic link"))
        );
        assert!(
            reasons
                .iter()
                .any(|(p, r)| p == "pipe" && r.contains("special file"))
        );
        assert!(
            reasons
                .iter()
                .any(|(p, r)| p == "binary.bin" && r.contains("not UTF-8"))
        );
        assert!(
            reasons
                .iter()
                .any(|(p, r)| p == "back\\slash.md" && r.contains("not a valid memory path"))
        );
        assert!(reasons.iter().any(|(_, r)| r.contains("name is not UTF-8")));
        let dana = store.user("dana").unwrap();
        assert_eq!(
            dana.read_file("/memories/projects/x/plan.md")
                .unwrap()
                .unwrap(),
            "plan"
        );
        for f in dana.files().unwrap() {
            assert_ne!(
                dana.read_file(&f.path.to_string()).unwrap().unwrap(),
                "SECRET OUTSIDE"
            );
        }
        // --strict refuses the whole import.
        let strict = fresh().unwrap();
        assert!(
            strict
                .import_dir(&src, "dana", true, Conflict::Refuse, &mut |_| {})
                .is_err()
        );
        assert!(strict.users().unwrap().is_empty());
        // And back out to plain files.
        let out = tmp.path().join("out");
        let s = store.export_dir("dana", &out, &mut |_| {}).unwrap();
        assert_eq!(s.files, 2);
        assert_eq!(
            tree_of(&out),
            [
                (PathBuf::from("notes.md"), "# notes\n".into()),
                (PathBuf::from("projects/x/plan.md"), "plan".into())
            ]
        );
    });
}

#[test]
fn to_dir_refuses_symlinks_and_existing_files() {
    each_backend(|| {
        use std::os::unix::fs::symlink;
        let tmp = tempfile::tempdir().unwrap();
        let store = fresh().unwrap();
        fill(
            &store,
            &[("u".into(), "/memories/d/f.md".into(), "x".into())],
        );
        // A directory that is not empty is refused (nothing merges into it), whatever it holds: a
        // symlink where a directory must go, or as the file itself.
        let target = tmp.path().join("target");
        std::fs::create_dir(&target).unwrap();
        let out = tmp.path().join("out");
        std::fs::create_dir(&out).unwrap();
        symlink(&target, out.join("d")).unwrap();
        let err = store.export_dir("u", &out, &mut |_| {}).unwrap_err();
        assert!(err.to_string().contains("is not empty"), "{err}");
        assert_eq!(std::fs::read_dir(&target).unwrap().count(), 0);
        let out2 = tmp.path().join("out2");
        std::fs::create_dir_all(out2.join("d")).unwrap();
        symlink(tmp.path().join("elsewhere"), out2.join("d/f.md")).unwrap();
        assert!(store.export_dir("u", &out2, &mut |_| {}).is_err());
        assert!(!tmp.path().join("elsewhere").exists());
        let out2b = tmp.path().join("out2b");
        std::fs::create_dir_all(out2b.join("other")).unwrap();
        let err = store.export_dir("u", &out2b, &mut |_| {}).unwrap_err();
        assert!(err.to_string().contains("is not empty"), "{err}");
        assert_eq!(tree_of(&out2b), vec![]);
        // A regular file is not blamed on symbolic links.
        let file = tmp.path().join("file");
        std::fs::write(&file, "x").unwrap();
        let err = store.export_dir("u", &file, &mut |_| {}).unwrap_err();
        assert!(
            err.to_string().ends_with("exists and is not a directory"),
            "{err}"
        );
        // DIR itself a symlink.
        let out3 = tmp.path().join("out3");
        symlink(&target, &out3).unwrap();
        let err = store.export_dir("u", &out3, &mut |_| {}).unwrap_err();
        assert!(err.to_string().contains("symbolic link"), "{err}");
        assert_eq!(std::fs::read_dir(&target).unwrap().count(), 0);
        // A user without files: refused, nothing created.
        let out4 = tmp.path().join("out4");
        let err = store.export_dir("nobody", &out4, &mut |_| {}).unwrap_err();
        assert_eq!(err.to_string(), "no such user: \"nobody\" has no files");
        assert!(!out4.exists());
    });
}

#[test]
fn a_failed_export_to_dir_removes_what_it_wrote() {
    each_backend(|| {
        let tmp = tempfile::tempdir().unwrap();
        let store = fresh().unwrap();
        // Deep enough that the second file's host path passes PATH_MAX (4,096 bytes), while the
        // first one's does not: the export fails half-way.
        let mut base = tmp.path().to_owned();
        for i in 0..16 {
            base.push(format!("{i:0200}"));
        }
        std::fs::create_dir_all(&base).unwrap();
        let long = vec!["n".repeat(250); 4].join("/");
        fill(
            &store,
            &[
                ("u".into(), "/memories/a/ok.md".into(), "x".into()),
                ("u".into(), format!("/memories/b/{long}"), "y".into()),
            ],
        );
        let out = base.join("out");
        let err = store.export_dir("u", &out, &mut |_| {}).unwrap_err();
        assert!(err.to_string().contains("File name too long"), "{err}");
        assert!(!out.exists(), "left behind: {:?}", tree_of(&out));
        // Into an existing empty directory: it stays, empty.
        std::fs::create_dir(&out).unwrap();
        store.export_dir("u", &out, &mut |_| {}).unwrap_err();
        assert_eq!(std::fs::read_dir(&out).unwrap().count(), 0);
    });
}

#[test]
fn skip_existing_still_refuses_a_file_directory_clash() {
    each_backend(|| {
        let dir = tempfile::tempdir().unwrap();
        let a = fresh().unwrap();
        fill(
            &a,
            &[
                ("u".into(), "/memories/x".into(), "a file".into()),
                (
                    "u".into(),
                    "/memories/same".into(),
                    "from the backup".into(),
                ),
            ],
        );
        let file = dir.path().join("x.jsonl");
        export_to(&a, &file);
        // The target has a directory where the backup has the file /memories/x.
        let b = fresh().unwrap();
        fill(
            &b,
            &[
                ("u".into(), "/memories/x/inside".into(), "in the way".into()),
                ("u".into(), "/memories/same".into(), "kept".into()),
            ],
        );
        let before = everything(&b);
        for conflict in [Conflict::Skip, Conflict::Replace] {
            let err = b.import(&file, conflict, &mut |_| {}).unwrap_err();
            assert!(
                err.to_string().contains("/memories/x is a directory"),
                "{conflict:?}: {err}"
            );
            assert_eq!(everything(&b), before);
        }
    });
}

#[test]
fn a_byte_order_mark_before_the_header_is_skipped() {
    each_backend(|| {
        let dir = tempfile::tempdir().unwrap();
        let a = fresh().unwrap();
        fill(&a, &sample());
        let file = dir.path().join("x.jsonl");
        export_to(&a, &file);
        let mut text = b"\xef\xbb\xbf".to_vec();
        text.extend(std::fs::read(&file).unwrap());
        std::fs::write(&file, &text).unwrap();
        let b = fresh().unwrap();
        b.import(&file, Conflict::Refuse, &mut |_| {}).unwrap();
        assert_eq!(everything(&a), everything(&b));
        // Elsewhere it is not JSON, and said so with its line.
        let lines: Vec<&[u8]> = text[3..].split_inclusive(|&b| b == b'\n').collect();
        let mut bad = lines[0].to_vec();
        bad.extend(b"\xef\xbb\xbf");
        bad.extend(lines[1..].concat());
        std::fs::write(&file, &bad).unwrap();
        let err = fresh()
            .unwrap()
            .import(&file, Conflict::Refuse, &mut |_| {})
            .unwrap_err();
        assert!(matches!(err, Error::Import { line: 2, .. }), "{err}");
    });
}

#[test]
fn import_of_chosen_users_leaves_the_others_alone() {
    each_backend(|| {
        let dir = tempfile::tempdir().unwrap();
        let a = fresh().unwrap();
        fill(&a, &sample());
        let file = dir.path().join("x.jsonl");
        export_to(&a, &file);
        let b = fresh().unwrap();
        fill(
            &b,
            &[(
                "bob@example.com".into(),
                "/memories/a.md".into(),
                "bob's newer a".into(),
            )],
        );
        let before_bob = everything(&b);
        let mut source = memkv::ImportSource::open(&file, b.limits()).unwrap();
        let s = b
            .import_from(
                &mut source,
                &["alice".into()],
                Conflict::Replace,
                &mut |_| {},
            )
            .unwrap();
        assert_eq!((s.files, s.users, s.replaced), (2, 1, 0));
        let after = everything(&b);
        assert_eq!(after.len(), 2);
        assert_eq!(after[0], everything(&a)[0]);
        assert_eq!(after[1], before_bob[0]);
        // A user the file does not hold: refused, nothing changes.
        let err = b
            .import_from(
                &mut source,
                &["alice".into(), "carol".into()],
                Conflict::Replace,
                &mut |_| {},
            )
            .unwrap_err();
        assert_eq!(err.to_string(), "the file holds no files of user \"carol\"");
        assert_eq!(everything(&b), after);
    });
}

#[test]
fn from_dir_skips_a_file_over_the_limit_unread_and_escapes_names() {
    each_backend(|| {
        let tmp = tempfile::tempdir().unwrap();
        let src = tmp.path().join("memories");
        std::fs::create_dir(&src).unwrap();
        std::fs::write(src.join("small.md"), "small").unwrap();
        // Sparse: 256 MiB of nothing, skipped on its size alone.
        let big = std::fs::File::create(src.join("big.md")).unwrap();
        big.set_len(256 << 20).unwrap();
        // A name that would drive a terminal: escape, carriage return, line feed, bidi override.
        let evil = "evil\u{1b}[2J\r\nx\u{202e}.md";
        std::fs::write(src.join(evil), "x").unwrap();
        // A modification time in the future is taken as now.
        let future = std::fs::File::create(src.join("future.md")).unwrap();
        future
            .set_modified(std::time::SystemTime::now() + std::time::Duration::from_secs(1 << 30))
            .unwrap();
        drop(future);

        let store = fresh().unwrap();
        let (s, skipped) = store
            .import_dir(&src, "dana", false, Conflict::Refuse, &mut |_| {})
            .unwrap();
        assert_eq!(s.files, 2);
        let shown: Vec<String> = skipped.iter().map(ToString::to_string).collect();
        assert_eq!(shown.len(), 2, "{shown:?}");
        assert!(
            shown.contains(&format!(
                "big.md: larger than the file-size limit ({} bytes)",
                store.limits().max_file_bytes
            )),
            "{shown:?}"
        );
        let evil_shown = shown.iter().find(|s| s.starts_with("evil")).unwrap();
        assert!(
            evil_shown.starts_with(r"evil\u{1b}[2J\u{d}\u{a}x\u{202e}.md: "),
            "{evil_shown}"
        );
        assert!(!evil_shown.chars().any(char::is_control));
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64;
        let dana = store.user("dana").unwrap();
        let future = dana
            .files()
            .unwrap()
            .into_iter()
            .find(|f| f.path.to_string() == "/memories/future.md")
            .unwrap();
        assert!(future.modified_ms <= now, "{}", future.modified_ms);
        // --strict refuses it, naming the file (escaped).
        let strict = fresh().unwrap();
        let err = strict
            .import_dir(&src, "dana", true, Conflict::Refuse, &mut |_| {})
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("big.md: larger than the file-size limit"),
            "{err}"
        );
        assert!(strict.users().unwrap().is_empty());
    });
}
