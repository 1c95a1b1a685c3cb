//! What only a networked backend has to prove: round trips per command, whatever the depth.

use memkv::Store;
use serde_json::json;

use crate::util::pg;

fn count(store: &Store, f: impl FnOnce()) -> u64 {
    let before = store.storage().round_trips().unwrap();
    f();
    store.storage().round_trips().unwrap() - before
}

#[test]
fn a_write_costs_two_round_trips_and_a_view_two_at_any_depth() {
    let Some(cluster) = pg::cluster() else { return };
    let store = Store::builder()
        .ttl(std::time::Duration::from_secs(86_400))
        .open(cluster.fresh_url())
        .unwrap();
    let u = store.user("deep").unwrap();
    for depth in [1usize, 3, 8] {
        let dir: String = (0..depth - 1).map(|i| format!("/d{i}")).collect();
        let file = format!("/memories{dir}/f.md");
        let run = |input: serde_json::Value| {
            let out = u.execute_json(&input).unwrap();
            assert!(!out.is_error, "{input}: {}", out.content);
        };
        let writes = [
            json!({"command": "create", "path": file, "file_text": "a\nb\n"}),
            json!({"command": "str_replace", "path": file, "old_str": "a", "new_str": "c"}),
            json!({"command": "insert", "path": file, "insert_line": 1, "insert_text": "x"}),
            json!({"command": "rename", "old_path": file, "new_path": format!("{file}.2")}),
            json!({"command": "rename", "old_path": format!("{file}.2"), "new_path": file}),
        ];
        for input in writes {
            let n = count(&store, || run(input.clone()));
            assert!(n <= 2, "depth {depth}: {input} took {n} round trips");
        }
        for path in [file.clone(), "/memories".into(), format!("/memories{dir}")] {
            let input = json!({"command": "view", "path": path});
            let n = count(&store, || run(input.clone()));
            assert!(n <= 2, "depth {depth}: {input} took {n} round trips");
        }
        let input = json!({"command": "delete", "path": file});
        let n = count(&store, || run(input.clone()));
        assert!(n <= 2, "depth {depth}: {input} took {n} round trips");
    }
    // A refused command costs no more (its rollback included).
    let input = json!({"command": "create", "path": "/memories/x", "file_text": ""});
    u.execute_json(&input).unwrap();
    let n = count(&store, || assert!(u.execute_json(&input).unwrap().is_error));
    assert!(n <= 2, "a refused create took {n} round trips");
}
