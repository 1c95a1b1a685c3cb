//! `memkv export --url` and `memkv import --url`: backups through a running server, while it
//! holds the database.

use super::proc::{Served, add_key, memkv, temp_db};

#[test]
fn export_and_import_through_a_running_server() {
    let (dir, db) = temp_db();
    let admin = add_key(&db, &["--admin"]);
    let alice = add_key(&db, &["--store", "alice"]);
    let mut server = Served::start(&db, &[]);
    let url = format!("http://{}", server.addr);
    let mut c = super::client::Client::with_key(server.addr, &admin);
    for (store, path) in [("alice", "a.md"), ("alice", "b.md"), ("bob", "c.md")] {
        let body =
            format!(r#"{{"command":"create","path":"/memories/{path}","file_text":"{path}\n"}}"#);
        assert_eq!(c.tool(store, body.as_bytes()).status, 200);
    }
    // Every store, with the admin key; verified whole before it replaces the target.
    let all = dir.path().join("all.jsonl");
    let out = memkv(&db)
        .args(["export", "--url", &url, "--api-key", &admin, "-o"])
        .arg(&all)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let copy = dir.path().join("copy.redb");
    let out = memkv(&copy).arg("import").arg(&all).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let out = memkv(&copy).arg("check").output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "ok: every invariant holds\n"
    );
    let out = memkv(&copy).arg("users").output().unwrap();
    let users = String::from_utf8(out.stdout).unwrap();
    assert!(users.contains("alice") && users.contains("bob"), "{users}");
    // One store, with its own key; never another's, never every store's.
    let mine = dir.path().join("alice.jsonl");
    let out = memkv(&db)
        .args([
            "export",
            "--url",
            &url,
            "--api-key",
            &alice,
            "--user",
            "alice",
            "-o",
        ])
        .arg(&mine)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = std::fs::read_to_string(&mine).unwrap();
    assert!(text.contains("/memories/a.md") && !text.contains("/memories/c.md"));
    for args in [&["--user", "bob"][..], &[]] {
        let refused = dir.path().join("refused.jsonl");
        let out = memkv(&db)
            .args(["export", "--url", &url, "--api-key", &alice])
            .args(args)
            .arg("-o")
            .arg(&refused)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert!(!refused.exists());
    }
    // Import through the server: refused whole while the memories exist, applied with --replace.
    let out = memkv(&db)
        .args(["import", "--url", &url, "--api-key", &admin])
        .arg(&mine)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("already exists"),
        "{out:?}"
    );
    let out = memkv(&db)
        .args(["import", "--url", &url, "--api-key", &admin, "--replace"])
        .arg(&mine)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("imported 2 files"),
        "{out:?}"
    );
    assert!(server.stop_with(libc::SIGTERM).success());
    let out = memkv(&db).arg("check").output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "ok: every invariant holds\n"
    );
}
