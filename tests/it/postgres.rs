//! What only a networked backend has to prove: round trips per command, whatever the depth.

use memkv::Database;
use serde_json::json;

use crate::util::pg;

/// A `create` of a one-line file at `path`.
fn create(path: &str) -> serde_json::Value {
    json!({"command": "create", "path": path, "file_text": "x\n"})
}

/// Runs `input` for `u` and asserts that it succeeded.
fn succeeds(u: &memkv::MemoryStore<'_>, input: serde_json::Value) {
    let out = u.execute_json(&input).unwrap();
    assert!(!out.is_error, "{input}: {}", out.content);
}

/// Asserts that `/memories` of `u` lists every one of `files` and that the store checks clean.
fn lists_and_checks_clean(store: &Database, u: &memkv::MemoryStore<'_>, files: &[&str]) {
    let listing = u
        .execute_json(&json!({"command": "view", "path": "/memories"}))
        .unwrap();
    for f in files {
        assert!(listing.content.contains(f), "{}", listing.content);
    }
    assert_eq!(store.check().unwrap(), Vec::new());
}

/// A fresh database's URL and the schema it names (for statements about its tables).
fn url_and_schema(cluster: &pg::Cluster) -> (String, String) {
    let url = cluster.fresh_url();
    let schema = url.rsplit("search_path%3D").next().unwrap().to_owned();
    (url, schema)
}

fn count(store: &Database, f: impl FnOnce()) -> u64 {
    let before = store.storage().round_trips().unwrap();
    f();
    store.storage().round_trips().unwrap() - before
}

/// A write costs two round trips; one that changes an existing memory a third, to read the
/// version it retires (`crate::history::body`); a `view` two.
#[test]
fn a_write_costs_two_round_trips_and_a_view_two_at_any_depth() {
    let Some(cluster) = pg::cluster() else { return };
    let store = Database::builder()
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
        for (i, input) in writes.into_iter().enumerate() {
            let n = count(&store, || run(input.clone()));
            let most = if i == 0 { 2 } else { 3 };
            assert!(n <= most, "depth {depth}: {input} took {n} round trips");
        }
        for path in [file.clone(), "/memories".into(), format!("/memories{dir}")] {
            let input = json!({"command": "view", "path": path});
            let n = count(&store, || run(input.clone()));
            assert!(n <= 2, "depth {depth}: {input} took {n} round trips");
        }
        let input = json!({"command": "delete", "path": file});
        let n = count(&store, || run(input.clone()));
        assert!(n <= 3, "depth {depth}: {input} took {n} round trips");
    }
    // A refused command costs no more (its rollback included).
    let input = json!({"command": "create", "path": "/memories/x", "file_text": ""});
    u.execute_json(&input).unwrap();
    let n = count(&store, || assert!(u.execute_json(&input).unwrap().is_error));
    assert!(n <= 2, "a refused create took {n} round trips");
}

#[test]
fn a_create_whose_reads_the_memo_answers_costs_one_round_trip() {
    let Some(cluster) = pg::cluster() else { return };
    let store = Database::open(cluster.fresh_url()).unwrap();
    let u = store.user("warm").unwrap();
    // The first write of a store reads (2 round trips); later ones assume what it learnt.
    let n = count(&store, || {
        assert!(
            !u.execute_json(&create("/memories/d/f0.md"))
                .unwrap()
                .is_error
        )
    });
    assert_eq!(n, 2, "a cold create");
    for i in 1..6 {
        let input = create(&format!("/memories/d/f{i}.md"));
        let n = count(&store, || {
            assert!(!u.execute_json(&input).unwrap().is_error)
        });
        assert_eq!(n, 1, "{input}");
    }
    // A refusal reached on assumptions is checked before it is answered: still one.
    let input = create("/memories/d/f1.md");
    let n = count(&store, || assert!(u.execute_json(&input).unwrap().is_error));
    assert_eq!(n, 1, "a refused create");
}

/// A writer that has seen its store's row in `memkv_stores` locks it without making sure it
/// exists (a statement less per write). Should the row be gone all the same (a restored
/// database, say), the lock fails before anything is applied and the write runs again, making
/// the row: the write is answered as it would have been, and later writers lock the row again.
#[test]
fn a_lost_store_row_is_made_again_by_the_next_write() {
    let Some(cluster) = pg::cluster() else { return };
    let (url, schema) = url_and_schema(cluster);
    let store = Database::open(&url).unwrap();
    let u = store.user("lost").unwrap();
    let ok = |input: serde_json::Value| succeeds(&u, input);
    ok(create("/memories/f0.md"));
    assert_eq!(count(&store, || ok(create("/memories/f1.md"))), 1);
    cluster.sql(&format!("DELETE FROM {schema}.memkv_stores"));
    // The lock finds no row (round trip 1), the run without assumptions reads (2) and commits.
    assert_eq!(count(&store, || ok(create("/memories/f2.md"))), 3);
    let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let rows: i64 = client
        .query_one("SELECT count(*) FROM memkv_stores", &[])
        .unwrap()
        .get(0);
    assert_eq!(rows, 1, "the store's row was not made again");
    lists_and_checks_clean(&store, &u, &["f0.md", "f1.md", "f2.md"]);
}

/// Every statement memkv sends finds rows by key: on small tables too, where the planner
/// would rather scan (`memkv_stores`, a row per store, had every write's store locks filter all
/// of it). The server's statistics of the schema's tables, flushed when the connections end,
/// show index scans, and no sequential scan but the one that built each table's primary key
/// when the first open created the tables.
#[test]
fn writes_and_reads_scan_no_table_sequentially() {
    let Some(cluster) = pg::cluster() else { return };
    let (url, schema) = url_and_schema(cluster);
    let store = Database::open(&url).unwrap();
    for user in ["a", "b", "c"] {
        let u = store.user(user).unwrap();
        for i in 0..8 {
            let input = json!({"command": "create", "path": format!("/memories/d/f{i}.md"), "file_text": "x\n"});
            assert!(!u.execute_json(&input).unwrap().is_error);
        }
        let view = json!({"command": "view", "path": "/memories/d"});
        assert!(!u.execute_json(&view).unwrap().is_error);
    }
    let batch: Vec<_> = ["a", "b", "c"]
        .iter()
        .map(|u| {
            let path = "/memories/d/f0.md".to_owned();
            (u.to_string(), memkv::Command::Delete { path })
        })
        .collect();
    assert!(store.execute_batch(&batch).iter().all(|r| r.is_ok()));
    drop(store);
    let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let scans = |client: &mut postgres::Client| -> Vec<(String, i64, i64)> {
        client
            .query(
                "SELECT relname::text, seq_scan, coalesce(idx_scan, 0) FROM pg_stat_user_tables \
                 WHERE schemaname = $1 AND relname IN ('memkv_stores', 'memkv_entries') \
                 ORDER BY relname",
                &[&schema],
            )
            .unwrap()
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2)))
            .collect()
    };
    // The backends flush their counts as they exit, a moment after the pool's connections close.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut seen = scans(&mut client);
    while seen.iter().any(|(_, _, idx)| *idx == 0) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
        let _ = client.batch_execute("SELECT pg_stat_clear_snapshot()");
        seen = scans(&mut client);
    }
    assert_eq!(seen.len(), 2, "{seen:?}");
    for (table, seq, idx) in &seen {
        assert!(*idx > 0, "{table}: no index scan counted: {seen:?}");
        assert_eq!(*seq, 1, "{table} was scanned sequentially: {seen:?}");
    }
}

/// A warm write inserts the keys it makes new (a new file's contents, access entry, memory
/// entry and version) without looking for them first. Should one be there all the same (a
/// damaged database: a stray version under the number the store hands out next), the insert
/// fails before anything is applied, and the write runs again with real reads, replacing the
/// stray row: answered as it would have been, and the store checks clean.
#[test]
fn a_key_made_new_that_is_there_all_the_same_is_replaced_not_a_failure() {
    let Some(cluster) = pg::cluster() else { return };
    let url = cluster.fresh_url();
    let store = Database::open(&url).unwrap();
    let u = store.user("stray").unwrap();
    let ok = |input: serde_json::Value| succeeds(&u, input);
    ok(create("/memories/f0.md"));
    assert_eq!(count(&store, || ok(create("/memories/f1.md"))), 1);
    // A stray version (space 8) under the next number (versions are keyed by their number,
    // big-endian, and the store hands them out in order).
    let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let last: Vec<u8> = client
        .query_one(
            "SELECT key FROM memkv_entries WHERE store = 'stray' AND space = 8 \
             ORDER BY key DESC LIMIT 1",
            &[],
        )
        .unwrap()
        .get(0);
    let next = u64::from_be_bytes(last.try_into().unwrap()) + 1;
    client
        .execute(
            "INSERT INTO memkv_entries (store, space, key, value) \
             VALUES ('stray', 8, $1, '\\xdeadbeef')",
            &[&next.to_be_bytes().as_slice()],
        )
        .unwrap();
    assert!(
        !matches!(store.check(), Ok(problems) if problems.is_empty()),
        "the stray version went unnoticed"
    );
    // The insert fails (round trip 1); the run without assumptions reads (2) and commits (3).
    assert_eq!(count(&store, || ok(create("/memories/f2.md"))), 3);
    lists_and_checks_clean(&store, &u, &["f0.md", "f1.md", "f2.md"]);
    // The store is written without assumptions for a few writes (as after any failed check),
    // then warm again.
    for i in 3..8 {
        ok(create(&format!("/memories/f{i}.md")));
    }
    assert_eq!(count(&store, || ok(create("/memories/f8.md"))), 1);
}

/// Two `Database` handles on one database stand for two processes: each one's memo goes stale
/// whenever the other writes, and no answer may ever follow from a stale memo. Each case warms a
/// fresh `Database` with a write of its own, lets the other change what that write read, and
/// asserts that the next answer took the assumptions' path (3 round trips: the failed check, then a
/// run with real reads) and is the one real reads give.
#[test]
fn a_stale_memo_never_decides_an_answer() {
    let Some(cluster) = pg::cluster() else { return };
    let url = cluster.fresh_url();
    let open = || Database::builder().max_files(4).open(&url).unwrap();
    let b = open();
    let run = |store: &Database, input: serde_json::Value| {
        let u = store.user("shared").unwrap();
        let mut out = None;
        let n = count(store, || out = Some(u.execute_json(&input).unwrap()));
        let out = out.unwrap();
        (n, out.is_error, out.content)
    };
    let ok = |store: &Database, input: serde_json::Value| {
        let (_, failed, said) = run(store, input.clone());
        assert!(!failed, "{input}: {said}");
    };
    let create = |path: &str| json!({"command": "create", "path": path, "file_text": "one\n"});
    let edit = |old: &str, new: &str| json!({"command": "str_replace", "path": "/memories/f2.md", "old_str": old, "new_str": new});
    ok(&b, create("/memories/f2.md"));

    // A's memo has f1's node; B deletes f1: A's create of f1 succeeds, not refused.
    let a = open();
    ok(&a, create("/memories/f1.md"));
    ok(&b, json!({"command": "delete", "path": "/memories/f1.md"}));
    let (n, refused, said) = run(&a, create("/memories/f1.md"));
    assert!(!refused, "{said}");
    assert_eq!(n, 3, "the create of f1 did not run on assumptions");

    // A assumes g absent (its memo lacks it); B creates it: A is refused.
    let a = open();
    ok(&a, create("/memories/f3.md"));
    ok(&b, create("/memories/g.md"));
    let (n, refused, said) = run(&a, create("/memories/g.md"));
    assert!(refused && said.contains("already exists"), "{said}");
    assert_eq!(n, 3, "the create of g did not run on assumptions");

    // Four files (f1, f2, f3, g) under a quota of 4. A's memo knows 3 (before B's h, after
    // B's delete of f3): A's create of a fifth is refused by the quota all the same.
    ok(&b, json!({"command": "delete", "path": "/memories/f3.md"}));
    let a = open();
    ok(&a, edit("one", "two"));
    ok(&b, create("/memories/h.md"));
    let (n, refused, said) = run(&a, create("/memories/i.md"));
    assert!(refused, "a fifth file under a quota of 4: {said}");
    assert_eq!(n, 3, "the create of i did not run on assumptions");

    // B's edit is what A's next edit sees.
    let a = open();
    ok(&a, edit("two", "three"));
    ok(&b, edit("three", "four"));
    let (n, failed, said) = run(&a, edit("four", "five"));
    assert!(!failed, "{said}");
    // The failed check, then the reads, the version the edit retires, and the commit.
    assert_eq!(n, 4, "the edit did not run on assumptions");
    let (_, _, content) = run(&b, json!({"command": "view", "path": "/memories/f2.md"}));
    assert!(content.contains("five"), "{content}");
    assert_eq!(a.check().unwrap(), Vec::new());
}

/// A directory's `rename` and `delete` retire the latest version of each memory below it with
/// the reads of all of them in one round trip: three in all, whatever the number of files.
#[test]
fn a_directory_rename_or_delete_costs_three_round_trips_at_any_size() {
    let Some(cluster) = pg::cluster() else { return };
    let store = Database::open(cluster.fresh_url()).unwrap();
    let u = store.user("dir").unwrap();
    let run = |input: serde_json::Value| {
        let out = u.execute_json(&input).unwrap();
        assert!(!out.is_error, "{input}: {}", out.content);
    };
    for files in [2, 25] {
        for i in 0..files {
            run(
                json!({"command": "create", "path": format!("/memories/d/s/f{i}.md"), "file_text": "x"}),
            );
        }
        let input =
            json!({"command": "rename", "old_path": "/memories/d", "new_path": "/memories/e"});
        let n = count(&store, || run(input.clone()));
        assert!(n <= 3, "{files} files: {input} took {n} round trips");
        let input = json!({"command": "delete", "path": "/memories/e"});
        let n = count(&store, || run(input.clone()));
        assert!(n <= 3, "{files} files: {input} took {n} round trips");
    }
    assert!(store.check().unwrap().is_empty());
}

/// A write whose reads the memo answered is one call of `pg_temp.memkv_write`, with binary
/// parameters (the server reads no hex of the values); a server where the connection cannot make
/// a temporary function (here: a role without `TEMP` on its database) gets the same statements
/// as text. Both answer alike, in one round trip, and hold the same data.
#[test]
fn a_warm_write_is_one_call_and_text_where_no_temporary_function_can_be_made() {
    let Some(cluster) = pg::cluster() else { return };
    let db = format!("memkv_onecall_{}", std::process::id());
    cluster.sql(&format!("CREATE DATABASE {db}"));
    cluster.sql(&format!(
        "REVOKE TEMP ON DATABASE {db} FROM PUBLIC;
         CREATE ROLE {db}_yes LOGIN; CREATE ROLE {db}_no LOGIN;
         GRANT TEMP, CREATE ON DATABASE {db} TO {db}_yes;
         GRANT CREATE ON DATABASE {db} TO {db}_no;"
    ));
    let admin = |query: &str| -> Vec<String> {
        let url = format!("postgres://postgres@127.0.0.1:{}/{db}", cluster.port);
        let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        client
            .query(query, &[])
            .unwrap()
            .iter()
            .map(|r| r.get::<_, Option<String>>(0).unwrap_or_default())
            .collect()
    };
    let mut answers = Vec::new();
    for (role, one_call) in [(format!("{db}_yes"), true), (format!("{db}_no"), false)] {
        // A schema of the role's own (first on its default search path).
        admin(&format!("CREATE SCHEMA AUTHORIZATION {role}"));
        let url = format!("postgres://{role}@127.0.0.1:{}/{db}", cluster.port);
        let store = Database::open(&url).unwrap();
        let u = store.user("u").unwrap();
        let run = |input: serde_json::Value| u.execute_json(&input).unwrap().content;
        let mut seen = Vec::new();
        seen.push(run(
            json!({"command": "create", "path": "/memories/a.md", "file_text": "one\n"}),
        ));
        for i in 0..3 {
            let input = json!({"command": "create", "path": format!("/memories/d/f{i}.md"),
                "file_text": "x'\\é\n"});
            let n = count(&store, || seen.push(run(input.clone())));
            assert_eq!(n, 1, "{role}: a warm create");
        }
        // The write function, made in the session's temporary schema where the role may (the
        // last statement of a pooled connection says nothing since the change log's
        // announcement, sent after commit on a pooled connection, may be it).
        let made = admin(&format!(
            "SELECT n.nspname::text FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
             WHERE p.proname = 'memkv_write' AND n.nspname LIKE 'pg_temp%'
               AND p.proowner = (SELECT oid FROM pg_roles WHERE rolname = '{role}')"
        ));
        assert_eq!(!made.is_empty(), one_call, "{role}: {made:?}");
        seen.push(run(
            json!({"command": "create", "path": "/memories/d/f1.md", "file_text": "y"}),
        ));
        seen.push(run(
            json!({"command": "str_replace", "path": "/memories/a.md",
            "old_str": "one", "new_str": "two"}),
        ));
        seen.push(run(json!({"command": "view", "path": "/memories/d/f2.md"})));
        seen.push(run(json!({"command": "view", "path": "/memories"})));
        let made = admin(&format!(
            "SELECT p.proname::text FROM pg_proc p JOIN pg_roles r ON r.oid = p.proowner \
             WHERE p.proname = 'memkv_write' AND r.rolname = '{role}'"
        ));
        assert_eq!(!made.is_empty(), one_call, "{role}: {made:?}");
        assert_eq!(store.check().unwrap(), Vec::new(), "{role}");
        answers.push(seen);
    }
    assert_eq!(answers[0], answers[1]);
    assert!(answers[0][6].contains("x'\\é"), "{:?}", answers[0][6]);
}

/// More callers at once than a store opens connections (32): those left over wait for one
/// that another caller gives back, and every caller is answered. (A connection given back
/// wakes a waiting caller only when one waits: a wake-up lost here would leave a caller asleep
/// for good, and this test waiting for it in vain.)
#[test]
fn callers_beyond_the_pool_wait_for_a_connection_given_back() {
    use std::sync::{Arc, mpsc};
    use std::time::Duration;
    let Some(cluster) = pg::cluster() else { return };
    let store = Arc::new(Database::builder().open(cluster.fresh_url()).unwrap());
    let callers = 64;
    let (answered, answers) = mpsc::channel();
    for t in 0..callers {
        let (store, answered) = (Arc::clone(&store), answered.clone());
        std::thread::spawn(move || {
            let u = store.user(&format!("pool-{t}")).unwrap();
            succeeds(&u, create("/memories/a.md"));
            for _ in 0..30 {
                succeeds(&u, json!({"command": "view", "path": "/memories"}));
            }
            answered.send(t).unwrap();
        });
    }
    for _ in 0..callers {
        answers
            .recv_timeout(Duration::from_secs(60))
            .expect("every caller is answered");
    }
}

#[test]
fn a_server_refusal_keeps_its_sqlstate() {
    let Some(cluster) = pg::cluster() else { return };
    let admin = cluster.admin_url();
    let missing = format!(
        "{}/memkv_no_such_database",
        admin.strip_suffix("/postgres").unwrap()
    );
    let e = Database::open(&missing).unwrap_err();
    assert_eq!(e.sqlstate(), Some("3D000"), "{e}");
    assert!(e.to_string().contains("memkv_no_such_database"), "{e}");
    let memkv::Error::Storage(source) = &e else {
        panic!("{e:?}")
    };
    let db = source.downcast_ref::<memkv::DatabaseError>().unwrap();
    assert_eq!(db.sqlstate.as_deref(), Some("3D000"));
    // Not a server's answer: no SQLSTATE.
    let not_a_server = memkv::Error::NotFound {
        location: "x".into(),
    };
    assert_eq!(not_a_server.sqlstate(), None);
}

#[test]
fn each_backend_declares_what_it_is() {
    use memkv::storage::{Backend, Capabilities};
    let embedded = Database::builder().in_memory().unwrap();
    assert_eq!(embedded.storage().capabilities(), Capabilities::EMBEDDED);
    let Some(cluster) = pg::cluster() else { return };
    let served = Database::open(cluster.fresh_url()).unwrap();
    let caps = served.storage().capabilities();
    assert!(
        !caps.embedded && caps.prefetch && caps.write_lanes > 1,
        "{caps:?}"
    );
}

/// The fast path off (`DatabaseBuilder::postgres_fast_path(false)`): every write reads what it
/// needs and commits in plain statements, a round trip or more dearer, with the same answers
/// and the same stored result as with it on.
#[test]
fn without_the_fast_path_writes_cost_more_and_answer_the_same() {
    let Some(cluster) = pg::cluster() else { return };
    let fast = Database::open(cluster.fresh_url()).unwrap();
    let slow = Database::builder()
        .postgres_fast_path(false)
        .open(cluster.fresh_url())
        .unwrap();
    let inputs = [
        create("/memories/d/a.md"),
        create("/memories/d/b.md"),
        create("/memories/d/a.md"),
        json!({"command": "str_replace", "path": "/memories/d/a.md", "old_str": "x", "new_str": "y"}),
        json!({"command": "insert", "path": "/memories/d/b.md", "insert_line": 1, "insert_text": "z\n"}),
        json!({"command": "rename", "old_path": "/memories/d", "new_path": "/memories/e"}),
        json!({"command": "view", "path": "/memories"}),
        json!({"command": "delete", "path": "/memories/e/b.md"}),
    ];
    let mut trips = (0, 0);
    for input in &inputs {
        let answer = |store: &Database, trips: &mut u64| {
            let u = store.user("same").unwrap();
            let mut out = None;
            *trips += count(store, || out = Some(u.execute_json(input).unwrap()));
            out.unwrap()
        };
        let a = answer(&fast, &mut trips.0);
        let b = answer(&slow, &mut trips.1);
        assert_eq!(a, b, "{input}");
    }
    let files = |store: &Database| {
        let u = store.user("same").unwrap();
        u.files()
            .unwrap()
            .into_iter()
            .map(|f| {
                (
                    f.path.to_string(),
                    u.read_file(&f.path.to_string()).unwrap(),
                )
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(files(&fast), files(&slow));
    assert!(
        trips.1 > trips.0,
        "fast {} vs baseline {}",
        trips.0,
        trips.1
    );
    assert!(slow.check().unwrap().is_empty() && fast.check().unwrap().is_empty());
    // Turned off later, a warm store stops assuming: a create costs more than the one call.
    let u = fast.user("same").unwrap();
    let warm = count(&fast, || {
        assert!(!u.execute_json(&create("/memories/w1.md")).unwrap().is_error)
    });
    assert_eq!(warm, 1);
    let memkv::storage::AnyBackend::Postgres(pg) = fast.storage() else {
        panic!("a PostgreSQL store")
    };
    pg.set_fast_path(false);
    let cold = count(&fast, || {
        assert!(!u.execute_json(&create("/memories/w2.md")).unwrap().is_error)
    });
    assert!(cold > 1, "{cold}");
}

#[test]
fn a_role_is_leased_to_one_database_handle_at_a_time_per_schema() {
    let Some(cluster) = pg::cluster() else { return };
    let url = cluster.fresh_url();
    let (a, b) = (Database::open(&url).unwrap(), Database::open(&url).unwrap());
    let held = a
        .try_lease("role")
        .unwrap()
        .expect("a free role is granted");
    assert!(b.try_lease("role").unwrap().is_none(), "granted twice");
    // Another role, another schema: their own.
    assert!(b.try_lease("other role").unwrap().is_some());
    let elsewhere = Database::open(cluster.fresh_url()).unwrap();
    assert!(elsewhere.try_lease("role").unwrap().is_some());
    // Given up when dropped: the other handle takes it.
    drop(held);
    assert!(b.try_lease("role").unwrap().is_some());
}
