//! Export format 2: store records, memory ids and versions, exported and restored exactly, on
//! every backend and across them; version-1 exports (a committed fixture) still import.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use memkv::{
    Actor, Conflict, Database, DatabaseBuilder, Error, ListItem, Memory, Operation, Retention,
    StoreInfo, Version,
};
use serde_json::{Value, json};

use crate::backup::{Export, everything, export_to, fill, lines, sample};
use crate::util::{Backend, Fresh, each_backend, fresh, using};

/// 2026-11-30T00:00:00Z: every store of these tests reads this clock, so exports made by two
/// stores are comparable byte for byte (the header records when the export was made).
const NOW: u64 = 1_795_996_800_000;

fn fixed() -> DatabaseBuilder {
    Database::builder()
        .clock(|| UNIX_EPOCH + Duration::from_millis(NOW))
        // Eight versions per store: the histories below are pruned, and the prune travels.
        .retention(Retention::new(None, Some(8), None))
}

fn tool(store: &Database, user: &str, actor: &str, input: Value) {
    let out = store
        .user(user)
        .unwrap()
        .with_actor(Some(Actor::Session(actor.into())))
        .execute_json(&input)
        .unwrap();
    assert!(!out.is_error, "{input}: {}", out.content);
}

/// Stores with every kind of history: renames, a directory rename, deletions, a redaction by an
/// API key, a pruned start, a described and an archived store, a store with only deleted
/// memories, and one with a record but no writes yet.
fn rich(store: &Database) -> String {
    let a = |input: Value| tool(store, "alice", "s1", input);
    a(
        json!({"command": "create", "path": "/memories/notes.md", "file_text": "Prefers tabs.\nü ✓ \"q\"\n"}),
    );
    a(
        json!({"command": "str_replace", "path": "/memories/notes.md", "old_str": "tabs", "new_str": "spaces"}),
    );
    a(json!({"command": "create", "path": "/memories/p/x/todo.md", "file_text": "- one\n"}));
    a(json!({"command": "create", "path": "/memories/p/x/gone.md", "file_text": "bye"}));
    a(json!({"command": "rename", "old_path": "/memories/p", "new_path": "/memories/q"}));
    a(json!({"command": "delete", "path": "/memories/q/x/gone.md"}));
    a(
        json!({"command": "insert", "path": "/memories/q/x/todo.md", "insert_line": 1, "insert_text": "- two"}),
    );
    a(json!({"command": "create", "path": "/memories/secret.md", "file_text": "the code is 1234"}));
    a(
        json!({"command": "str_replace", "path": "/memories/secret.md", "old_str": "1234", "new_str": "(gone)"}),
    );
    let alice = store
        .user("alice")
        .unwrap()
        .with_actor(Some(Actor::ApiKey("key_0123".into())));
    let h = alice.history(Some("/memories/secret.md")).unwrap().unwrap();
    alice.redact(h[0].id).unwrap().unwrap();
    tool(
        store,
        "bob",
        "s2",
        json!({"command": "create", "path": "/memories/x", "file_text": "x"}),
    );
    tool(
        store,
        "bob",
        "s2",
        json!({"command": "delete", "path": "/memories/x"}),
    );
    let meta = BTreeMap::from([("team".to_owned(), "blue".to_owned())]);
    let made = store
        .create_store("Notes", "what dana knows", &meta)
        .unwrap();
    tool(
        store,
        &made.id,
        "s3",
        json!({"command": "create", "path": "/memories/a", "file_text": "a"}),
    );
    store.archive_store(&made.id).unwrap().unwrap();
    store.create_store("Empty", "", &BTreeMap::new()).unwrap();
    made.id
}

/// Everything a store knows of its users: records, memories with ids, every version.
type Known = Vec<(StoreInfo, Vec<Memory>, Vec<Version>)>;

fn known(store: &Database) -> Known {
    let (infos, more) = store.list_stores(true, None, 100).unwrap();
    assert!(!more);
    infos
        .into_iter()
        .map(|info| {
            let u = store.user(&info.id).unwrap();
            let page = u.list_memories("/memories", 0, None, 1000, true).unwrap();
            let memories = page
                .unwrap()
                .items
                .into_iter()
                .map(|item| match item {
                    ListItem::Memory(m) => m,
                    ListItem::Prefix(p) => panic!("{p} at depth 0"),
                })
                .collect();
            let versions = u.history(None).unwrap().unwrap();
            (info, memories, versions)
        })
        .collect()
}

fn export_bytes(store: &Database) -> Vec<u8> {
    let mut out = Vec::new();
    store.export(&[], &mut out, &mut |_| {}).unwrap();
    out
}

/// An export's lines but for what only says where and when it was taken: the header's
/// change-log position (each database numbers its own changes; an import is one of them) and
/// the trailer's digest, which covers the header.
fn comparable(export: &[u8]) -> Vec<Value> {
    let text = std::str::from_utf8(export).unwrap();
    let mut lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let n = lines.len();
    // Where the log stands, and which database it is: each copy's own.
    lines[0].as_object_mut().unwrap().remove("seq");
    lines[0].as_object_mut().unwrap().remove("database");
    // And where each store's feed stands: each database numbers its own.
    for line in &mut lines {
        if line["type"] == "store" {
            line.as_object_mut().unwrap().remove("feed_seq");
        }
    }
    lines[n - 1].as_object_mut().unwrap().remove("sha256");
    lines
}

#[test]
fn stores_ids_and_versions_round_trip_byte_for_byte() {
    each_backend(|| {
        let a = fixed().fresh().unwrap();
        let archived = rich(&a);
        let first = export_bytes(&a);
        let text = String::from_utf8(first.clone()).unwrap();
        let l: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let kinds: Vec<&str> = l.iter().map(|l| l["type"].as_str().unwrap()).collect();
        // alice: 3 files, 8 versions kept; bob: only versions; then (in the order of their
        // random ids) the made store with 1 file and 1 version, and the empty one.
        let mut want = vec!["header", "store", "file", "file", "file"];
        want.extend(["version"; 8]);
        want.extend(["store", "version", "version"]);
        assert_eq!(kinds[..16], want, "{kinds:?}");
        let mut rest = kinds[16..].to_vec();
        rest.sort();
        assert_eq!(rest, ["file", "store", "store", "trailer", "version"]);
        let alice = &l[1];
        // Its feed: every change-log entry of alice's the log holds, numbered in its own feed.
        let alice_feed = a.user("alice").unwrap().last_change().unwrap();
        assert!(alice_feed >= 10, "{alice_feed}");
        assert_eq!(
            alice,
            &json!({"type": "store", "user": "alice", "name": "alice", "description": "",
                "metadata": {}, "created_ms": NOW, "updated_ms": NOW, "archived_ms": null,
                "next_seq": 11, "pruned_versions": 2, "pruned_bytes": alice["pruned_bytes"],
                "feed_seq": alice_feed})
        );
        let notes = l
            .iter()
            .find(|l| l["path"] == "/memories/notes.md" && l["type"] == "file");
        let notes = notes.unwrap();
        assert_eq!(
            (&notes["memory"], &notes["version"]),
            (
                &json!("mem_0000000000000001"),
                &json!("memver_0000000000000002")
            )
        );
        let redacted = l.iter().find(|l| !l["redacted"].is_null()).unwrap();
        assert_eq!(
            redacted,
            &json!({"type": "version", "user": "alice", "id": "memver_0000000000000009",
                "memory": "mem_0000000000000009", "operation": "created", "created_ms": NOW,
                "actor": {"type": "session", "id": "s1"}, "path": null, "content": null,
                "size": null, "sha256": null,
                "redacted": {"at_ms": NOW, "by": {"type": "api_key", "id": "key_0123"}}})
        );
        let deleted = l
            .iter()
            .find(|l| l["operation"] == "deleted" && l["user"] == "bob");
        assert_eq!(deleted.unwrap()["path"], "/memories/x");
        let made = l
            .iter()
            .find(|l| l["type"] == "store" && l["user"] == archived.as_str());
        let made = made.unwrap();
        assert_eq!(
            (&made["name"], &made["description"]),
            (&json!("Notes"), &json!("what dana knows"))
        );
        assert_eq!(
            (&made["metadata"], &made["archived_ms"]),
            (&json!({"team": "blue"}), &json!(NOW))
        );
        let trailer = l.last().unwrap();
        assert_eq!(
            (&trailer["files"], &trailer["users"], &trailer["versions"]),
            (&json!(4), &json!(4), &json!(11))
        );

        // Restored exactly: records, ids, versions, the sequence; nothing recorded by the import.
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("x.jsonl");
        std::fs::write(&file, &first).unwrap();
        let b = fixed().fresh().unwrap();
        let s = b.import(&file, Conflict::Refuse, &mut |_| {}).unwrap();
        assert_eq!((s.files, s.users, s.versions, s.merged), (4, 4, 11, 0));
        assert_eq!(known(&b), known(&a));
        assert_eq!(everything(&b), everything(&a));
        assert!(b.check().unwrap().is_empty(), "{:?}", b.check());
        assert_eq!(comparable(&export_bytes(&b)), comparable(&first));
        // Each store carries on from where it was: the next id, the archive.
        for s in [&a, &b] {
            let m = s
                .user("alice")
                .unwrap()
                .create_memory("/memories/new", "n")
                .unwrap()
                .unwrap();
            assert_eq!(m.id.to_string(), "mem_000000000000000b");
            assert!(matches!(
                s.user(&archived)
                    .unwrap()
                    .create_memory("/memories/b", "b")
                    .unwrap(),
                Err(memkv::ApiRefusal::Archived)
            ));
        }
        assert_eq!(known(&b), known(&a));
    });
}

#[test]
fn an_export_crosses_backends_byte_for_byte() {
    if !crate::util::on(Backend::Postgres, &|| {}) {
        return; // skipped, visibly, by util without PostgreSQL
    }
    let a = fixed().in_memory().unwrap();
    rich(&a);
    let first = export_bytes(&a);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("x.jsonl");
    std::fs::write(&file, &first).unwrap();
    let pg = {
        let _on = using(Backend::Postgres);
        fixed().fresh().unwrap()
    };
    pg.import(&file, Conflict::Refuse, &mut |_| {}).unwrap();
    let from_pg = export_bytes(&pg);
    assert_eq!(comparable(&from_pg), comparable(&first));
    assert!(pg.check().unwrap().is_empty());
    std::fs::write(&file, &from_pg).unwrap();
    let c = fixed().in_memory().unwrap();
    c.import(&file, Conflict::Refuse, &mut |_| {}).unwrap();
    assert_eq!(comparable(&export_bytes(&c)), comparable(&first));
    assert_eq!(known(&c), known(&a));
}

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/export-v1.jsonl")
}

#[test]
fn a_version_1_export_still_imports_as_new_memories_by_the_operator() {
    each_backend(|| {
        let store = fresh().unwrap();
        let s = store
            .import(&fixture(), Conflict::Refuse, &mut |_| {})
            .unwrap();
        assert_eq!((s.files, s.users, s.bytes, s.versions), (3, 2, 52, 0));
        let alice = store.user("alice").unwrap();
        assert_eq!(
            alice.read_file("/memories/notes.md").unwrap().unwrap(),
            "Prefers spaces.\nü ✓ \"quoted\"\n"
        );
        let h = alice.history(None).unwrap().unwrap();
        assert_eq!(h.len(), 2);
        for v in &h {
            assert_eq!(v.operation, Operation::Created);
            assert_eq!(v.actor, Some(Actor::operator()));
        }
        assert_eq!(h[0].path.as_deref(), Some("/memories/notes.md"));
        let bob = store.user("bob@example.com").unwrap();
        assert_eq!(bob.history(None).unwrap().unwrap().len(), 1);
        assert!(store.check().unwrap().is_empty());
        // Its file times are kept, as before.
        let files = alice.files().unwrap();
        assert_eq!(
            (files[0].created_ms, files[0].modified_ms),
            (1796046532814, 1796046532830)
        );
    });
}

#[test]
fn an_existing_store_gets_the_files_as_new_versions_and_keeps_its_history() {
    each_backend(|| {
        let dir = tempfile::tempdir().unwrap();
        let a = fixed().fresh().unwrap();
        fill(&a, &sample());
        let file = dir.path().join("x.jsonl");
        export_to(&a, &file);
        let b = fixed().fresh().unwrap();
        tool(
            &b,
            "alice",
            "mine",
            json!({"command": "create", "path": "/memories/other", "file_text": "kept"}),
        );
        let s = b.import(&file, Conflict::Refuse, &mut |_| {}).unwrap();
        assert_eq!((s.files, s.versions, s.merged), (4, 2, 1));
        // alice existed: her files are new versions by the operator after her own.
        let h = b.user("alice").unwrap().history(None).unwrap().unwrap();
        let who: Vec<_> = h.iter().map(|v| v.actor.clone().unwrap()).collect();
        let op = Actor::operator();
        assert_eq!(who, [Actor::Session("mine".into()), op.clone(), op]);
        // bob did not: restored as he was.
        let of = |s: &Database| {
            s.user("bob@example.com")
                .unwrap()
                .history(None)
                .unwrap()
                .unwrap()
        };
        assert_eq!(of(&b), of(&a));
        assert!(b.check().unwrap().is_empty());
        // An archived store is read-only for imports too, whatever the policy.
        let c = fixed().fresh().unwrap();
        tool(
            &c,
            "alice",
            "mine",
            json!({"command": "create", "path": "/memories/z", "file_text": "z"}),
        );
        c.archive_store("alice").unwrap().unwrap();
        let before = known(&c);
        let err = c.import(&file, Conflict::Replace, &mut |_| {}).unwrap_err();
        assert_eq!(
            err.to_string(),
            "line 3: cannot import /memories/a.md for user \"alice\": the memory store is archived and read-only"
        );
        assert_eq!(known(&c), before);
    });
}

/// Makes a [`rich`] export, lets `edit` damage it (then reseals the checksums unless told not
/// to), and checks that the import is refused naming `line` and that nothing changed.
fn refused(edit: impl Fn(&mut Vec<Value>), reseal: bool, line: u64, reason: &str) {
    let dir = tempfile::tempdir().unwrap();
    let a = fixed().fresh().unwrap();
    rich(&a);
    let file = dir.path().join("x.jsonl");
    std::fs::write(&file, export_bytes(&a)).unwrap();
    let export = Export::read(&file);
    let mut l = export.parsed.clone();
    edit(&mut l);
    if reseal {
        export.reseal(&mut l);
    }
    std::fs::write(&file, export.render(&l)).unwrap();
    let b = fixed().fresh().unwrap();
    tool(
        &b,
        "carol",
        "c",
        json!({"command": "create", "path": "/memories/mine", "file_text": "untouched"}),
    );
    let before = known(&b);
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
    assert_eq!(known(&b), before);
}

#[test]
fn damaged_history_lines_change_nothing() {
    each_backend(|| {
        // Lines (index + 1): 1 header, 2 alice's store, 3-5 her files (notes, todo, secret),
        // 6-13 her versions memver_3 to memver_a (7: memver_4, created; 8: memver_5, the
        // rename's first; 12: memver_9, redacted), 14 bob's store, ..., 21 the trailer.
        let v = |l: &mut Vec<Value>, i: usize, field: &str, value: Value| l[i][field] = value;
        refused(
            |l| v(l, 6, "content", json!("tampered")),
            false,
            7,
            "checksum mismatch",
        );
        refused(|l| v(l, 6, "size", json!(1)), true, 7, "checksum mismatch");
        refused(|l| l.swap(6, 7), true, 8, "out of order");
        refused(
            |l| v(l, 12, "id", json!("memver_00000000000000ff")),
            true,
            13,
            "out of order",
        );
        refused(
            |l| v(l, 6, "id", json!("mem_0000000000000005")),
            true,
            7,
            "is not a memkv id",
        );
        refused(
            |l| v(l, 6, "operation", json!("renamed")),
            true,
            7,
            "unknown operation",
        );
        refused(
            |l| v(l, 7, "operation", json!("created")),
            true,
            8,
            "its created version",
        );
        refused(
            |l| v(l, 11, "content", json!("back")),
            true,
            12,
            "redacted, yet it has",
        );
        refused(
            |l| v(l, 11, "created_ms", json!(-1)),
            true,
            12,
            "created_ms -1 is out of range",
        );
        refused(
            |l| v(l, 6, "path", json!("/memories/../x")),
            true,
            7,
            "invalid or non-canonical",
        );
        refused(
            |l| v(l, 6, "actor", json!({"type": "robot", "id": "r"})),
            true,
            7,
            "not a valid export line",
        );
        // Unknown fields are refused on the new lines as on the old.
        refused(|l| v(l, 6, "extra", json!(1)), true, 7, "unknown field");
        refused(|l| v(l, 1, "extra", json!(1)), true, 2, "unknown field");
        refused(
            |l| {
                v(
                    l,
                    11,
                    "redacted",
                    json!({"at_ms": 1, "by": null, "why": "x"}),
                )
            },
            true,
            12,
            "unknown field",
        );
        refused(
            |l| v(l, 1, "next_seq", json!(5)),
            true,
            4,
            "do not fit its store",
        );
        // What the memory-stores API refuses, an import refuses too: nothing that could reach
        // an operator's terminal as an escape sequence.
        refused(
            |l| v(l, 1, "name", json!("evil\u{1b}[2J")),
            true,
            2,
            "name must not contain control characters",
        );
        refused(
            |l| v(l, 1, "description", json!("bell\u{7}")),
            true,
            2,
            "description must not contain control characters",
        );
        refused(
            |l| v(l, 1, "metadata", json!({"k": "\u{1b}]0;title\u{7}"})),
            true,
            2,
            "metadata values must not contain control characters",
        );
        refused(
            |l| v(l, 1, "metadata", json!({"k\u{8}": "v"})),
            true,
            2,
            "metadata keys must not contain control characters",
        );
        refused(
            |l| {
                v(
                    l,
                    6,
                    "actor",
                    json!({"type": "session", "id": "mcp:\u{1b}[31m"}),
                )
            },
            true,
            7,
            "an actor's id must not contain control characters",
        );
        // At the end of the ids, a store could never be written again.
        refused(
            |l| v(l, 1, "next_seq", json!(u64::MAX)),
            true,
            2,
            "next_seq 18446744073709551615 is beyond 2^53",
        );
        refused(
            |l| v(l, 1, "archived_ms", json!(i64::MAX)),
            true,
            2,
            "archived_ms",
        );
        refused(
            |l| v(l, 3, "memory", json!("mem_0000000000000001")),
            true,
            4,
            "is another file too",
        );
        refused(
            |l| {
                l[2].as_object_mut().unwrap().remove("version");
            },
            true,
            3,
            "needs its memory and version ids",
        );
        refused(
            |l| {
                let s = l.remove(1);
                l.insert(3, s);
            },
            true,
            2,
            "outside the lines of its store",
        );
        refused(
            |l| {
                let s = l[1].clone();
                l.insert(14, s);
            },
            true,
            15,
            "a second store line",
        );
        refused(
            |l| {
                let t = l.len() - 1;
                v(l, t, "versions", json!(3));
            },
            true,
            21,
            "the trailer counts 3 versions",
        );
        refused(
            |l| {
                let t = l.len() - 1;
                l[t].as_object_mut().unwrap().remove("versions");
            },
            true,
            21,
            "the trailer counts no versions",
        );
        refused(
            |l| {
                v(l, 0, "version", json!(1));
                l[0].as_object_mut().unwrap().remove("seq");
                l[0].as_object_mut().unwrap().remove("database");
            },
            false,
            2,
            "a store line in a version-1 export",
        );
        refused(
            |l| v(l, 0, "version", json!(2)),
            false,
            1,
            "a change-log position in a version-2 export",
        );
        refused(
            |l| v(l, 0, "version", json!(3)),
            false,
            1,
            "a database identity in a version-3 export",
        );
        refused(
            |l| v(l, 0, "database", json!("../etc")),
            false,
            1,
            "is not an identity (32 hex digits)",
        );
    });
}

#[test]
fn version_contents_meet_the_secrets_policy() {
    each_backend(|| {
        let dir = tempfile::tempdir().unwrap();
        let a = fixed().secrets(memkv::SecretPolicy::Off).fresh().unwrap();
        tool(
            &a,
            "u",
            "s",
            json!({"command": "create", "path": "/memories/k", "file_text": "AKIAUJZDEGXDNCF32EPF"}),
        );
        tool(
            &a,
            "u",
            "s",
            json!({"command": "create", "path": "/memories/k2", "file_text": "clean"}),
        );
        tool(
            &a,
            "u",
            "s",
            json!({"command": "delete", "path": "/memories/k"}),
        );
        let file = dir.path().join("x.jsonl");
        std::fs::write(&file, export_bytes(&a)).unwrap();
        // Only a version holds the key: refused under the default policy, naming it.
        let err = fixed()
            .fresh()
            .unwrap()
            .import(&file, Conflict::Refuse, &mut |_| {})
            .unwrap_err();
        assert!(
            matches!(&err, Error::Import { line: 4, reason } if reason.contains("memver_0000000000000001") && reason.contains("AWS access key")),
            "{err}"
        );
        // Redacted under the redact policy, its hash and size with it.
        let b = fixed()
            .secrets(memkv::SecretPolicy::Redact)
            .fresh()
            .unwrap();
        b.import(&file, Conflict::Refuse, &mut |_| {}).unwrap();
        let v = b.user("u").unwrap().history(None).unwrap().unwrap();
        assert_eq!(v[0].content.as_deref(), Some("[REDACTED:AWS access key]"));
        assert_eq!(v[0].size, Some(25));
        assert!(b.check().unwrap().is_empty());
    });
}

#[test]
fn import_times_are_bounded() {
    each_backend(|| {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64;
        let cases: [(usize, &str, i64); 5] = [
            (2, "accessed_ms", i64::MAX),
            (2, "modified_ms", now + 2 * 86_400_000),
            (2, "created_ms", -1),
            (1, "updated_ms", now + 2 * 86_400_000),
            (3, "created_ms", -1),
        ];
        let dir = tempfile::tempdir().unwrap();
        let a = fresh().unwrap();
        fill(&a, &[("u".into(), "/memories/t".into(), "t".into())]);
        let file = dir.path().join("t.jsonl");
        export_to(&a, &file);
        let export = Export::read(&file);
        for (i, field, ms) in cases {
            let mut l = export.parsed.clone();
            l[i][field] = json!(ms);
            export.reseal(&mut l);
            std::fs::write(&file, export.render(&l)).unwrap();
            let b = fresh().unwrap();
            let err = b.import(&file, Conflict::Refuse, &mut |_| {}).unwrap_err();
            assert!(
                matches!(&err, Error::Import { line, reason } if *line == i as u64 + 1 && reason.contains(field) && reason.contains("out of range")),
                "{err}"
            );
            assert!(b.users().unwrap().is_empty());
        }
        // Old times and a little clock skew are fine.
        let mut l = export.parsed.clone();
        for (field, ms) in [
            ("created_ms", 0),
            ("modified_ms", 1),
            ("accessed_ms", now + 3_600_000),
        ] {
            l[2][field] = json!(ms);
        }
        export.reseal(&mut l);
        std::fs::write(&file, export.render(&l)).unwrap();
        fresh()
            .unwrap()
            .import(&file, Conflict::Refuse, &mut |_| {})
            .unwrap();
        assert_eq!(lines(&file).len(), 5);
    });
}

/// Found by `fuzz/fuzz_targets/import.rs`: a file line naming an older version of its memory
/// as current, while a newer version of it follows (here the older one is redacted, so no
/// content check stands in the way). Imported, `check` then found the store inconsistent; it
/// is refused at the newer version's line.
#[test]
fn a_version_newer_than_its_files_current_one_is_refused() {
    let lines = [
        r#"{"type":"header","format":"memkv-export","version":2,"created_ms":1796047470875,"created":"2026-11-30T14:04:30Z","memkv_version":"0.1.0"}"#,
        r#"{"type":"store","user":"dana","name":"dana","description":"","metadata":{},"created_ms":1796047201737,"updated_ms":1796047201737,"archived_ms":null,"next_seq":5,"pruned_versions":0,"pruned_bytes":0}"#,
        r#"{"type":"file","user":"dana","path":"/memories/notes.md","memory":"mem_0000000000000001","version":"memver_0000000000000001","content":"Prefers spaces.\n","created_ms":1796047201737,"modified_ms":1796047201750,"accessed_ms":1796047201750,"sha256":"e7b8837fc1044c5dce286acc7b9288a45f24b710c24ac84d7439539ee2733691"}"#,
        r#"{"type":"version","user":"dana","id":"memver_0000000000000001","memory":"mem_0000000000000001","operation":"created","created_ms":1796047201737,"actor":{"type":"session","id":"s1"},"path":null,"content":null,"size":null,"sha256":null,"redacted":{"at_ms":1796047201778,"by":{"type":"user","id":"ops"}}}"#,
        r#"{"type":"version","user":"dana","id":"memver_0000000000000002","memory":"mem_0000000000000001","operation":"modified","created_ms":1796047201750,"actor":{"type":"session","id":"s1"},"path":"/memories/notes.md","content":"Prefers spaces.\n","size":16,"sha256":"e7b8837fc1044c5dce286acc7b9288a45f24b710c24ac84d7439539ee2733691","redacted":null}"#,
        r#"{"type":"trailer","files":1,"users":1,"versions":2,"bytes":16,"sha256":""}"#,
    ];
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("x.jsonl");
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    let export = Export::read(&file);
    let mut l = export.parsed.clone();
    export.reseal(&mut l);
    std::fs::write(&file, export.render(&l)).unwrap();
    each_backend(|| {
        let b = fixed().fresh().unwrap();
        match b.import(&file, Conflict::Refuse, &mut |_| {}) {
            Err(Error::Import { line, reason }) => {
                assert_eq!(line, 5, "{reason}");
                assert!(
                    reason.contains("newer than memver_0000000000000001"),
                    "{reason}"
                );
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
        assert!(b.users().unwrap().is_empty());
    });
}

/// Incremental exports (`export --since`): a full export, then two incrementals, each covering
/// what the change log holds after the previous one's `seq`, imported in order into an empty
/// database, rebuild the source exactly (stores replaced, created and deleted; memories
/// edited, moved, deleted, redacted; a store archived); an incremental out of order (a gap, an
/// overlap, no base) is refused and changes nothing.
#[test]
fn a_full_export_and_its_incrementals_rebuild_the_source() {
    each_backend(|| {
        let dir = tempfile::tempdir().unwrap();
        let save = |name: &str, bytes: &[u8]| {
            let path = dir.path().join(name);
            std::fs::write(&path, bytes).unwrap();
            path
        };
        let since = |db: &Database, after: u64| {
            let mut out = Vec::new();
            db.export_since(after, &[], &mut out, &mut |_| {}).unwrap();
            out
        };
        let seq_of = |bytes: &[u8]| -> u64 {
            let header: Value =
                serde_json::from_str(std::str::from_utf8(bytes).unwrap().lines().next().unwrap())
                    .unwrap();
            header["seq"].as_u64().unwrap()
        };
        let a = fixed().fresh().unwrap();
        let create = |user: &str, path: &str, text: &str| {
            tool(
                &a,
                user,
                "s",
                json!({"command": "create", "path": path, "file_text": text}),
            );
        };
        create("alice", "/memories/notes.md", "one\n");
        create("alice", "/memories/p/todo.md", "- a\n");
        create("bob", "/memories/x.md", "x");
        create("untouched", "/memories/keep.md", "k");
        let full = export_bytes(&a);
        let seq0 = seq_of(&full);
        assert_eq!(seq0, a.last_change().unwrap());
        // First range: edits, a directory rename, a new store, a store deleted, a redaction.
        tool(
            &a,
            "alice",
            "s",
            json!({"command": "str_replace", "path": "/memories/notes.md", "old_str": "one", "new_str": "two"}),
        );
        tool(
            &a,
            "alice",
            "s",
            json!({"command": "rename", "old_path": "/memories/p", "new_path": "/memories/q"}),
        );
        create("carol", "/memories/c.md", "c");
        assert!(a.delete_store("bob").unwrap());
        let alice = a.user("alice").unwrap();
        let first = alice.history(Some("/memories/notes.md")).unwrap().unwrap()[0].id;
        alice.redact(first).unwrap().unwrap();
        let inc1 = since(&a, seq0);
        let seq1 = seq_of(&inc1);
        assert!(seq1 > seq0);
        let lines1: Vec<Value> = std::str::from_utf8(&inc1)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines1[0]["base_seq"], seq0);
        assert!(
            lines1
                .iter()
                .any(|l| l == &json!({"type": "store_deleted", "user": "bob"}))
        );
        assert!(
            !lines1.iter().any(|l| l["user"] == "untouched"),
            "an untouched store"
        );
        // Second range: a deletion, a new store through the API, an archive.
        tool(
            &a,
            "alice",
            "s",
            json!({"command": "delete", "path": "/memories/q"}),
        );
        let made = a.create_store("Made", "", &Default::default()).unwrap();
        a.archive_store(&made.id).unwrap().unwrap();
        let inc2 = since(&a, seq1);
        let (full, inc1, inc2) = (
            save("full", &full),
            save("inc1", &inc1),
            save("inc2", &inc2),
        );

        let b = fixed().fresh().unwrap();
        for file in [&full, &inc1, &inc2] {
            b.import(file, Conflict::Refuse, &mut |_| {}).unwrap();
        }
        assert_eq!(comparable(&export_bytes(&b)), comparable(&export_bytes(&a)));
        assert_eq!(known(&b), known(&a));
        assert!(b.check().unwrap().is_empty(), "{:?}", b.check());

        // Out of order: refused, naming what is wrong, and nothing changes.
        let c = fixed().fresh().unwrap();
        let refused = |db: &Database, file: &Path, why: &str| {
            let before = everything(db);
            match db.import(file, Conflict::Refuse, &mut |_| {}) {
                Err(Error::Import { reason, .. }) => assert!(reason.contains(why), "{reason}"),
                other => panic!("{other:?}"),
            }
            assert_eq!(everything(db), before);
        };
        refused(&c, &inc1, "not restored from an export");
        // Of some stores only: an incremental export is refused, and imported so, too.
        let mut sink = Vec::new();
        assert!(matches!(
            a.export_since(seq0, &["alice".to_owned()], &mut sink, &mut |_| {}),
            Err(Error::Unsupported { .. })
        ));
        let mut from = memkv::ImportSource::open(&inc1, c.limits()).unwrap();
        let partial = c.import_from(
            &mut from,
            &["alice".to_owned()],
            Conflict::Refuse,
            &mut |_| {},
        );
        assert!(
            matches!(&partial, Err(Error::Import { reason, .. }) if reason.contains("without --user")),
            "{partial:?}"
        );
        c.import(&full, Conflict::Refuse, &mut |_| {}).unwrap();
        refused(&c, &inc2, "a gap");
        c.import(&inc1, Conflict::Refuse, &mut |_| {}).unwrap();
        refused(&c, &inc1, "an overlap");
        c.import(&inc2, Conflict::Refuse, &mut |_| {}).unwrap();
        assert_eq!(comparable(&export_bytes(&c)), comparable(&export_bytes(&a)));
        // Past the log's end, or behind its retention: refused.
        let end = a.last_change().unwrap();
        let mut sink = Vec::new();
        assert!(matches!(
            a.export_since(end + 1, &[], &mut sink, &mut |_| {}),
            Err(Error::InvalidSince { .. })
        ));
    });
}

/// A restore numbers its change log on from the export's `seq`, so that no cursor of the
/// exported database's followers means a different change in the copy (one below it expires,
/// one past the copy's end is refused); and an incremental export of another database, whose
/// `base_seq` happens to match, is refused: every export names the database it was taken from.
#[test]
fn a_restore_never_reuses_a_seq_and_refuses_another_databases_incremental() {
    each_backend(|| {
        let dir = tempfile::tempdir().unwrap();
        let header = |bytes: &[u8]| -> Value {
            serde_json::from_str(std::str::from_utf8(bytes).unwrap().lines().next().unwrap())
                .unwrap()
        };
        let write = |db: &Database, path: &str| {
            tool(
                db,
                "alice",
                "s",
                json!({"command": "create", "path": path, "file_text": "x"}),
            );
        };
        // Two databases with the same number of changes: their exports stand at the same seq.
        let (a, other) = (fixed().fresh().unwrap(), fixed().fresh().unwrap());
        for db in [&a, &other] {
            for i in 0..5 {
                write(db, &format!("/memories/{i}.md"));
            }
        }
        let full = export_bytes(&a);
        let seq = header(&full)["seq"].as_u64().unwrap();
        let other_full = export_bytes(&other);
        assert_eq!(header(&other_full)["seq"].as_u64(), Some(seq));
        let (id, other_id) = (
            header(&full)["database"].clone(),
            header(&other_full)["database"].clone(),
        );
        assert_eq!(id.as_str().map(str::len), Some(32), "{id}");
        assert_ne!(id, other_id);
        assert_eq!(header(&export_bytes(&a))["database"], id, "stable");

        let path = dir.path().join("full");
        std::fs::write(&path, &full).unwrap();
        let b = fixed().fresh().unwrap();
        let hook = b
            .add_webhook(
                "https://example.com/h",
                "whsec_c2VjcmV0",
                &[],
                &[],
                Default::default(),
            )
            .unwrap();
        tool(
            &b,
            "zed",
            "s",
            json!({"command": "create", "path": "/memories/own.md", "file_text": "z"}),
        );
        b.import(&path, Conflict::Refuse, &mut |_| {}).unwrap();
        // Numbered after every seq `a` gave out; the cursors below it expired, and the webhook
        // endpoint goes on from the restore (its cursor named entries the restore removed).
        assert_eq!(hook.delivered, 0);
        assert_eq!(b.webhooks().unwrap()[0].delivered, seq);
        let last = b.last_change().unwrap();
        assert!(last > seq, "{last} after {seq}");
        let page = b.changes(seq, 1000, None).unwrap();
        assert!(!page.entries.is_empty());
        assert!(page.entries.iter().all(|e| e.seq > seq));
        assert!(matches!(
            b.changes(seq - 1, 10, None),
            Err(Error::CursorExpired { trimmed, .. }) if trimmed == seq
        ));
        match b.changes(last + 1, 10, Some("alice")) {
            Err(e @ Error::CursorAhead { .. }) => {
                assert!(
                    e.to_string().contains("start again from a full export"),
                    "{e}"
                )
            }
            other => panic!("{other:?}"),
        }
        // A store's own feed goes on from the export's too: alice's numbers in `a` are never given
        // again in the copy, and a follower of alice's feed in `a` is told, not misled.
        let (in_a, in_b) = (a.user("alice").unwrap(), b.user("alice").unwrap());
        let a_feed = in_a.last_change().unwrap();
        assert!(in_b.last_change().unwrap() > a_feed);
        let restored = in_b.changes(a_feed, 10).unwrap();
        assert!(restored.entries.iter().all(|e| e.seq > a_feed));
        assert!(matches!(
            in_b.changes(a_feed - 1, 10),
            Err(Error::CursorExpired { trimmed, .. }) if trimmed == a_feed
        ));
        // The copy is a database of its own, and its feed says so.
        assert_ne!(header(&export_bytes(&b))["database"], id);
        assert_eq!(
            Some(
                header(&export_bytes(&b))["database"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            ),
            b.identity().unwrap()
        );

        // `other`'s incremental export starts after the same seq, and is refused.
        write(&other, "/memories/later.md");
        let mut inc = Vec::new();
        other.export_since(seq, &[], &mut inc, &mut |_| {}).unwrap();
        assert_eq!(header(&inc)["base_seq"].as_u64(), Some(seq));
        let inc_path = dir.path().join("inc");
        std::fs::write(&inc_path, &inc).unwrap();
        let c = fixed().fresh().unwrap();
        c.import(&path, Conflict::Refuse, &mut |_| {}).unwrap();
        let before = everything(&c);
        match c.import(&inc_path, Conflict::Refuse, &mut |_| {}) {
            Err(Error::Import { reason, .. }) => {
                assert!(reason.contains("taken from database"), "{reason}");
                assert!(reason.contains(other_id.as_str().unwrap()), "{reason}");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(everything(&c), before);
        // `a`'s own incremental applies.
        write(&a, "/memories/later.md");
        let mut inc = Vec::new();
        a.export_since(seq, &[], &mut inc, &mut |_| {}).unwrap();
        std::fs::write(&inc_path, &inc).unwrap();
        c.import(&inc_path, Conflict::Refuse, &mut |_| {}).unwrap();
    });
}
