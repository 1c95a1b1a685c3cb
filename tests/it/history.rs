//! History, ids, preconditions, listings and store records, on every backend.

use std::collections::BTreeMap;

use memkv::{
    Actor, ApiRefusal, Database, ListItem, MemoryId, Operation, Retention, VersionFilter, VersionId,
};
use serde_json::json;

use crate::util::{Fresh, each_backend, fresh};

fn run(store: &Database, user: &str, actor: &str, input: serde_json::Value) -> (String, bool) {
    let out = store
        .user(user)
        .unwrap()
        .with_actor(Some(Actor::Session(actor.into())))
        .execute_json(&input)
        .unwrap();
    (out.content, out.is_error)
}

fn ops(versions: &[memkv::Version]) -> Vec<(Operation, Option<String>)> {
    versions
        .iter()
        .map(|v| (v.operation, v.path.clone()))
        .collect()
}

fn sha(text: &str) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(text.as_bytes()).into()
}

#[test]
fn every_tool_change_is_a_version_and_ids_survive_renames() {
    each_backend(|| {
        let store = fresh().unwrap();
        let s = |input| run(&store, "u", "s1", input);
        s(json!({"command":"create","path":"/memories/d/a.md","file_text":"one\n"}));
        s(json!({"command":"create","path":"/memories/d/b.md","file_text":"two\n"}));
        s(
            json!({"command":"str_replace","path":"/memories/d/a.md","old_str":"one","new_str":"uno"}),
        );
        // A no-op edit changes nothing and records nothing.
        s(
            json!({"command":"str_replace","path":"/memories/d/b.md","old_str":"two","new_str":"two"}),
        );
        s(json!({"command":"rename","old_path":"/memories/d","new_path":"/memories/e"}));
        s(json!({"command":"delete","path":"/memories/e/b.md"}));
        let u = store.user("u").unwrap();
        let all = u.history(None).unwrap().unwrap();
        assert_eq!(
            ops(&all),
            vec![
                (Operation::Created, Some("/memories/d/a.md".into())),
                (Operation::Created, Some("/memories/d/b.md".into())),
                (Operation::Modified, Some("/memories/d/a.md".into())),
                (Operation::Modified, Some("/memories/e/a.md".into())),
                (Operation::Modified, Some("/memories/e/b.md".into())),
                (Operation::Deleted, Some("/memories/e/b.md".into())),
            ]
        );
        assert!(
            all.iter()
                .all(|v| v.actor == Some(Actor::Session("s1".into())))
        );
        let a = u.history(Some("/memories/e/a.md")).unwrap().unwrap();
        assert_eq!(a.len(), 3);
        assert!(a.iter().all(|v| v.memory == a[0].memory));
        assert_eq!(a[2].content.as_deref(), Some("uno\n"));
        assert_eq!(a[2].sha256, Some(sha("uno\n")));
        let memory = u.memory(a[0].memory, true).unwrap().unwrap();
        assert_eq!(memory.path, "/memories/e/a.md");
        assert_eq!(memory.version, a[2].id);
        assert_eq!(memory.content.as_deref(), Some("uno\n"));
        // The deleted memory's versions remain, ending in `deleted` without content.
        let b = all[1].memory;
        assert!(u.memory(b, false).unwrap().is_none());
        let filter = VersionFilter {
            memory: Some(b),
            ..Default::default()
        };
        let page = u.versions(&filter, None, 10, true).unwrap().unwrap();
        let bv = page.items;
        assert_eq!(page.next, None);
        assert_eq!(bv.len(), 3);
        let last = bv.last().unwrap();
        assert_eq!(last.operation, Operation::Deleted);
        assert_eq!(
            (last.content.clone(), last.sha256, last.size),
            (None, None, None)
        );
        assert!(store.check().unwrap().is_empty(), "{:?}", store.check());
    });
}

#[test]
fn preconditions_refuse_stale_writes_and_change_nothing() {
    each_backend(|| {
        let store = fresh().unwrap();
        let u = store
            .user("u")
            .unwrap()
            .with_actor(Some(Actor::ApiKey("key_1".into())));
        let m = u.create_memory("/memories/n.md", "v1").unwrap().unwrap();
        assert_eq!(m.sha256, sha("v1"));
        assert_eq!(
            u.create_memory("/memories/n.md", "x").unwrap(),
            Err(ApiRefusal::PathExists {
                path: "/memories/n.md".into()
            })
        );
        let stale = u
            .update_memory(m.id, Some("v2"), None, Some(sha("v0")))
            .unwrap();
        assert_eq!(
            stale,
            Err(ApiRefusal::PreconditionFailed { current: sha("v1") })
        );
        let m2 = u
            .update_memory(m.id, Some("v2"), Some("/memories/x/n.md"), Some(sha("v1")))
            .unwrap()
            .unwrap();
        assert_eq!((m2.id, m2.path.as_str()), (m.id, "/memories/x/n.md"));
        assert_ne!(m2.version, m.version);
        // Nothing changes: no version.
        let m3 = u
            .update_memory(m.id, Some("v2"), None, None)
            .unwrap()
            .unwrap();
        assert_eq!(m3.version, m2.version);
        assert_eq!(
            u.delete_memory(m.id, Some(sha("v1"))).unwrap(),
            Err(ApiRefusal::PreconditionFailed { current: sha("v2") })
        );
        assert!(u.memory(m.id, false).unwrap().is_some());
        u.delete_memory(m.id, Some(sha("v2"))).unwrap().unwrap();
        assert_eq!(
            u.delete_memory(m.id, None).unwrap(),
            Err(ApiRefusal::NotFound)
        );
        let h = u.history(None).unwrap().unwrap();
        assert_eq!(h.len(), 3);
        assert!(
            h.iter()
                .all(|v| v.actor == Some(Actor::ApiKey("key_1".into())))
        );
        // The tool sees the API's writes.
        let (out, _) = run(
            &store,
            "u",
            "s",
            json!({"command":"view","path":"/memories"}),
        );
        assert!(!out.contains("n.md"), "{out}");
    });
}

#[test]
fn listings_page_in_path_order_and_roll_up_by_depth() {
    each_backend(|| {
        let store = fresh().unwrap();
        let u = store.user("u").unwrap();
        for p in [
            "a.md", "p/x.md", "p/q/y.md", "p/q/z.md", "p/r/w.md", "pz.md",
        ] {
            u.create_memory(&format!("/memories/{p}"), p)
                .unwrap()
                .unwrap();
        }
        let names = |items: &[ListItem]| -> Vec<String> {
            items
                .iter()
                .map(|i| match i {
                    ListItem::Memory(m) => m.path.clone(),
                    ListItem::Prefix(p) => p.clone(),
                })
                .collect()
        };
        let mut seen = Vec::new();
        let mut page = None;
        for _ in 0..10 {
            let memkv::Page { items, next } = u
                .list_memories("/memories", 0, page.as_deref(), 4, false)
                .unwrap()
                .unwrap();
            seen.extend(names(&items));
            page = next;
            if page.is_none() {
                break;
            }
        }
        assert_eq!(
            seen,
            [
                "/memories/a.md",
                "/memories/p/q/y.md",
                "/memories/p/q/z.md",
                "/memories/p/r/w.md",
                "/memories/p/x.md",
                "/memories/pz.md"
            ]
        );
        let memkv::Page { items, next } = u
            .list_memories("/memories/p", 1, None, 10, true)
            .unwrap()
            .unwrap();
        assert_eq!(next, None);
        assert_eq!(
            names(&items),
            ["/memories/p/q/", "/memories/p/r/", "/memories/p/x.md"]
        );
        let ListItem::Memory(x) = &items[2] else {
            panic!()
        };
        assert_eq!(x.content.as_deref(), Some("p/x.md"));
        let memkv::Page { items, next } = u
            .list_memories("/memories/p", 1, None, 2, false)
            .unwrap()
            .unwrap();
        assert_eq!(names(&items), ["/memories/p/q/", "/memories/p/r/"]);
        let memkv::Page { items, next: _ } = u
            .list_memories("/memories/p", 1, next.as_deref(), 2, false)
            .unwrap()
            .unwrap();
        assert_eq!(names(&items), ["/memories/p/x.md"]);
        assert_eq!(
            u.list_memories("/memories/p", 0, Some("zz"), 2, false)
                .unwrap(),
            Err(ApiRefusal::InvalidPage)
        );
    });
}

#[test]
fn redaction_erases_and_restore_brings_back() {
    each_backend(|| {
        let store = fresh().unwrap();
        let u = store
            .user("u")
            .unwrap()
            .with_actor(Some(Actor::User("ops".into())));
        let m = u
            .create_memory("/memories/s.md", "secret")
            .unwrap()
            .unwrap();
        let m2 = u
            .update_memory(m.id, Some("public"), None, None)
            .unwrap()
            .unwrap();
        let v = u.redact(m.version).unwrap().unwrap();
        assert_eq!(
            (v.path, v.content, v.sha256, v.size),
            (None, None, None, None)
        );
        assert_eq!(v.redacted.unwrap().by, Some(Actor::User("ops".into())));
        let again = u.version(m.version, true).unwrap().unwrap();
        assert_eq!(again.content, None);
        assert!(again.redacted.is_some());
        assert!(matches!(
            u.restore(m.version).unwrap(),
            Err(ApiRefusal::NotRestorable(_))
        ));
        u.delete_memory(m.id, None).unwrap().unwrap();
        let back = u.restore(m2.version).unwrap().unwrap();
        assert_ne!(back.id, m.id, "a deleted memory comes back as a new one");
        assert_eq!(
            u.memory(back.id, true).unwrap().unwrap().content.as_deref(),
            Some("public")
        );
        assert_eq!(u.redact(VersionId(999)).unwrap(), Err(ApiRefusal::NotFound));
        assert!(store.check().unwrap().is_empty(), "{:?}", store.check());
    });
}

#[test]
fn stores_have_records_archive_and_delete() {
    each_backend(|| {
        let store = fresh().unwrap();
        let meta = BTreeMap::from([("owner".to_string(), "dana".to_string())]);
        let s = store
            .create_store("Notes", "what dana knows", &meta)
            .unwrap();
        assert!(s.id.starts_with("memstore_"));
        let (out, err) = run(
            &store,
            &s.id,
            "s",
            json!({"command":"create","path":"/memories/a.md","file_text":"x"}),
        );
        assert!(!err, "{out}");
        // A store first written by the tool has a record named after its id.
        run(
            &store,
            "tool-user",
            "s",
            json!({"command":"create","path":"/memories/b","file_text":"y"}),
        );
        let t = store.store_info("tool-user").unwrap().unwrap();
        assert_eq!((t.name.as_str(), t.history.versions), ("tool-user", 1));
        let changes = BTreeMap::from([
            ("owner".to_string(), None),
            ("team".to_string(), Some("x".to_string())),
        ]);
        let s2 = store
            .update_store(&s.id, Some("N2"), None, &changes)
            .unwrap()
            .unwrap();
        assert_eq!(s2.name, "N2");
        assert_eq!(s2.description, "what dana knows");
        assert_eq!(s2.metadata, BTreeMap::from([("team".into(), "x".into())]));
        store.archive_store(&s.id).unwrap().unwrap();
        let (out, err) = run(
            &store,
            &s.id,
            "s",
            json!({"command":"create","path":"/memories/c.md","file_text":"x"}),
        );
        assert!(err);
        assert_eq!(
            out,
            "Error: This memory store is archived and read-only; the command was not applied."
        );
        let u = store.user(&s.id).unwrap();
        assert_eq!(
            u.create_memory("/memories/c.md", "x").unwrap(),
            Err(ApiRefusal::Archived)
        );
        let (listed, more) = store.list_stores(false, None, 10).unwrap();
        assert!(!more);
        assert_eq!(
            listed.iter().map(|s| s.id.as_str()).collect::<Vec<_>>(),
            ["tool-user"]
        );
        assert_eq!(store.list_stores(true, None, 10).unwrap().0.len(), 2);
        // Deleting memories of an archived store is allowed.
        let memkv::Page { items, next: _ } = u
            .list_memories("/memories", 0, None, 10, false)
            .unwrap()
            .unwrap();
        let ListItem::Memory(a) = &items[0] else {
            panic!()
        };
        u.delete_memory(a.id, None).unwrap().unwrap();
        assert!(store.delete_store(&s.id).unwrap());
        assert!(store.store_info(&s.id).unwrap().is_none());
        assert!(!store.delete_store(&s.id).unwrap());
        assert!(store.check().unwrap().is_empty(), "{:?}", store.check());
    });
}

#[test]
fn retention_prunes_oldest_first_and_can_keep_nothing() {
    each_backend(|| {
        let store = Database::builder()
            .retention(Retention::new(None, Some(3), None))
            .fresh()
            .unwrap();
        let u = store.user("u").unwrap();
        let m = u.create_memory("/memories/a", "0").unwrap().unwrap();
        for i in 1..6 {
            u.update_memory(m.id, Some(&i.to_string()), None, None)
                .unwrap()
                .unwrap();
        }
        let h = u.history(None).unwrap().unwrap();
        let kept: Vec<_> = h.iter().map(|v| v.content.clone().unwrap()).collect();
        assert_eq!(kept, ["3", "4", "5"]);
        let info = store.store_info("u").unwrap().unwrap();
        assert_eq!(
            (info.history.versions, info.history.pruned_versions),
            (3, 3)
        );

        let none = Database::builder()
            .retention(Retention::NONE)
            .fresh()
            .unwrap();
        let u = none.user("u").unwrap();
        let m = u.create_memory("/memories/a", "0").unwrap().unwrap();
        assert_eq!(m.id, MemoryId(1));
        assert!(u.history(None).unwrap().unwrap().is_empty());
        assert!(none.check().unwrap().is_empty(), "{:?}", none.check());
    });
}

/// Older versions are kept as deltas against newer ones (`docs/design.md`, "History"): every
/// version reads back whole through long runs of edits, rewrites, a rename, a redaction in the
/// middle of a run, pruning and a deletion; `check` stays clean.
#[test]
fn every_version_reads_back_through_deltas_redactions_and_pruning() {
    each_backend(|| {
        let store = Database::builder()
            .retention(Retention::new(None, Some(60), None))
            .fresh()
            .unwrap();
        let u = store.user("u").unwrap();
        let s = |input| run(&store, "u", "s1", input);
        let path = "/memories/notes/é.md";
        let mut want = vec!["∅ start\n".to_owned()];
        s(json!({"command":"create","path":path,"file_text":want[0]}));
        for i in 0..45 {
            let (out, err) = match i % 3 {
                0 => s(
                    json!({"command":"insert","path":path,"insert_line":1,"insert_text":format!("line {i} ✓")}),
                ),
                1 => s(
                    json!({"command":"str_replace","path":path,"old_str":"start","new_str":format!("start {i}")}),
                ),
                _ => {
                    let id = u.history(Some(path)).unwrap().unwrap()[0].memory;
                    let text = format!("rewritten {i}: start\n");
                    u.update_memory(id, Some(&text), None, None)
                        .unwrap()
                        .unwrap();
                    (String::new(), false)
                }
            };
            assert!(!err, "{out}");
            want.push(u.read_file(path).unwrap().unwrap());
        }
        s(json!({"command":"rename","old_path":"/memories/notes","new_path":"/memories/kept"}));
        let kept_path = "/memories/kept/é.md";
        want.push(want.last().unwrap().clone());
        let contents = |u: &memkv::MemoryStore<'_>| -> Vec<Option<String>> {
            let at = u.read_file(kept_path).unwrap();
            let id = match at {
                Some(_) => u.history(Some(kept_path)).unwrap().unwrap()[0].memory,
                None => MemoryId(1),
            };
            let filter = VersionFilter {
                memory: Some(id),
                ..Default::default()
            };
            let page = u.versions(&filter, None, 1000, true).unwrap().unwrap();
            page.items.into_iter().map(|v| v.content).collect()
        };
        let all: Vec<String> = contents(&u).into_iter().map(Option::unwrap).collect();
        assert_eq!(all, want);
        // Redact one version in the middle of a run of deltas: the one before it still reads.
        let history = u.history(Some(kept_path)).unwrap().unwrap();
        let middle = history[30].id;
        u.redact(middle).unwrap().unwrap();
        let mut expected: Vec<Option<String>> = want.iter().cloned().map(Some).collect();
        expected[30] = None;
        assert_eq!(contents(&u), expected);
        assert!(store.check().unwrap().is_empty(), "{:?}", store.check());
        // More edits prune the oldest (60 kept); the rest still read back.
        for i in 0..20 {
            s(
                json!({"command":"str_replace","path":kept_path,"old_str":"\n","new_str":format!(" {i}\n")}),
            );
            expected.push(u.read_file(kept_path).unwrap());
        }
        let now = contents(&u);
        assert_eq!(now.len(), 60);
        assert_eq!(now, expected[expected.len() - 60..]);
        assert!(store.check().unwrap().is_empty(), "{:?}", store.check());
        drop(u);
        // A deletion keeps the last content.
        let (out, err) = s(json!({"command":"delete","path":kept_path}));
        assert!(!err, "{out}");
        let u = store.user("u").unwrap();
        let last = contents(&u);
        assert_eq!(last[last.len() - 2], expected.last().unwrap().clone());
        assert_eq!(last.last().unwrap(), &None);
        assert!(store.check().unwrap().is_empty(), "{:?}", store.check());
    });
}
