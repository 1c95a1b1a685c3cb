//! Hostile folders: links out of the folder, a FIFO, a 20 MB file, a binary file, names memkv
//! refuses. Nothing outside the folder is read or uploaded, each is reported (once), the rest
//! syncs; and the other way, a memory whose path the folder cannot hold.

use std::process::Command;

use super::{World, status};

fn once(world: &World, folder: &std::path::Path, state: &std::path::Path) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_memkv"))
        .arg("sync")
        .arg(folder)
        .args(["--url", &world.url(), "--store", &world.store, "--once"])
        .arg("--state")
        .arg(state)
        .env("MEMKV_API_KEY", &world.key)
        .env_remove("MEMKV_CONFIG")
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn links_fifos_large_binary_and_refused_names_are_reported_and_the_rest_syncs() {
    let world = World::new(&[]);
    let (a, sa) = world.folder("a");
    let outside = world.dir.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("secret.md"), "SECRET outside the folder").unwrap();
    std::os::unix::fs::symlink(outside.join("secret.md"), a.join("link.md")).unwrap();
    std::os::unix::fs::symlink(&outside, a.join("linkdir")).unwrap();
    let fifo = std::ffi::CString::new(a.join("pipe.md").to_str().unwrap()).unwrap();
    // SAFETY: mkfifo on a path we own.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    std::fs::write(a.join("big.md"), vec![b'x'; 20 << 20]).unwrap();
    std::fs::write(a.join("bin.md"), [0xff, 0xfe, 0x00, 0x01]).unwrap();
    std::fs::write(a.join("bad\u{1}name.md"), "a control character").unwrap();
    std::fs::write(a.join("deep%2Fname.md"), "an encoded separator").unwrap();
    std::fs::write(a.join("ok.md"), "fine\n").unwrap();
    std::fs::create_dir(a.join("sub")).unwrap();
    std::fs::write(a.join("sub/ok2.md"), "fine too\n").unwrap();

    let (ok, log) = once(&world, &a, &sa);
    assert!(ok, "{log}");
    let store = world.store_files();
    assert_eq!(
        store.keys().collect::<Vec<_>>(),
        ["/ok.md", "/sub/ok2.md"],
        "{log}"
    );
    assert!(!store.values().any(|c| c.contains("SECRET")));
    let st = status(&a, &sa);
    let skipped: Vec<(String, String)> = st["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                l["path"].as_str().unwrap().to_owned(),
                l["why"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let why = |name: &str| {
        skipped
            .iter()
            .find(|(p, _)| p == name)
            .map(|(_, w)| w.clone())
            .unwrap_or_else(|| panic!("{name} is not reported: {skipped:?}"))
    };
    assert!(why("link.md").contains("symbolic link"));
    assert!(why("linkdir").contains("symbolic link"));
    assert!(why("pipe.md").contains("not a regular file"));
    assert!(why("big.md").contains("20971520 bytes"));
    assert!(why("bin.md").contains("not UTF-8"));
    assert!(why("bad\u{1}name.md").contains("refused by the store"));
    assert!(why("deep%2Fname.md").contains("refused by the store"));
    for name in ["link.md", "pipe.md", "big.md", "bin.md", "deep%2Fname.md"] {
        let lines = log
            .lines()
            .filter(|l| l.contains("not synced") && l.contains(name))
            .count();
        assert_eq!(lines, 1, "{name} reported once:\n{log}");
    }

    // Again: nothing new is reported, nothing retried, the outside untouched.
    let (ok, log) = once(&world, &a, &sa);
    assert!(ok, "{log}");
    assert!(!log.contains("not synced"), "reported again:\n{log}");
    assert_eq!(
        std::fs::read_to_string(outside.join("secret.md")).unwrap(),
        "SECRET outside the folder"
    );

    // A file refused as it was is tried again once it changes.
    std::fs::remove_file(a.join("bin.md")).unwrap();
    std::fs::write(a.join("bin.md"), "text now\n").unwrap();
    let (ok, log) = once(&world, &a, &sa);
    assert!(ok, "{log}");
    assert_eq!(world.store_files()["/bin.md"], "text now\n");
    let st = status(&a, &sa);
    assert!(
        !st["skipped"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l["path"] == "bin.md"),
        "{st}"
    );
}

#[test]
fn a_memory_the_folder_cannot_hold_is_reported_and_links_are_not_written_through() {
    let world = World::new(&[]);
    let (a, sa) = world.folder("a");
    let outside = world.dir.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    // A link where the store has a folder: writing /notes/x.md must not go through it.
    std::os::unix::fs::symlink(&outside, a.join("notes")).unwrap();
    let api = world.api();
    api.create("/notes/x.md", "remote\n").unwrap();
    api.create("/plain.md", "plain\n").unwrap();
    let (ok, log) = once(&world, &a, &sa);
    assert!(ok || log.contains("not a folder"), "{log}");
    assert_eq!(
        std::fs::read_dir(&outside).unwrap().count(),
        0,
        "written through the link"
    );
    assert_eq!(
        std::fs::read_to_string(a.join("plain.md")).unwrap(),
        "plain\n"
    );
    // The store keeps its memory: a folder that cannot hold it deletes nothing.
    assert_eq!(world.store_files()["/notes/x.md"], "remote\n");
}

#[test]
fn a_path_the_folder_cannot_take_is_reported_and_the_rest_syncs() {
    let world = World::new(&[]);
    let (a, sa) = world.folder("a");
    // An empty folder where the store has a memory of the same name: no file can go there.
    std::fs::create_dir(a.join("x")).unwrap();
    let api = world.api();
    api.create("/x", "a memory named like the folder\n")
        .unwrap();
    api.create("/z.md", "fine\n").unwrap();
    let (ok, log) = once(&world, &a, &sa);
    assert!(ok, "{log}");
    assert_eq!(std::fs::read_to_string(a.join("z.md")).unwrap(), "fine\n");
    assert!(a.join("x").is_dir());
    let st = status(&a, &sa);
    let problems = st["problems"].as_array().unwrap();
    assert!(
        problems.iter().any(|p| p["path"] == "/x"),
        "the path is reported: {st}"
    );
    // And the store keeps it.
    assert_eq!(world.store_files().len(), 2);
}

#[test]
fn a_conflict_copy_left_by_a_stopped_sync_is_not_made_twice() {
    let world = World::new(&[]);
    let (a, sa) = world.folder("a");
    std::fs::write(a.join("x.md"), "base\n").unwrap();
    let (ok, log) = once(&world, &a, &sa);
    assert!(ok, "{log}");
    // Both sides change; a sync stopped after writing the copy and before the pull left it.
    let api = world.api();
    let m = api.find("/x.md").unwrap().unwrap();
    api.update(&m.id, Some("remote\n"), None, &m.content_sha256)
        .unwrap();
    std::fs::write(a.join("x.md"), "local\n").unwrap();
    let left = "x.sync-conflict-20261205-120000-elsewhere.md";
    std::fs::write(a.join(left), "local\n").unwrap();
    let (ok, log) = once(&world, &a, &sa);
    assert!(ok, "{log}");
    let files = super::folder_files(&a);
    assert_eq!(
        files.keys().collect::<Vec<_>>(),
        ["/x.md", &format!("/{left}")],
        "one copy: {files:?}\n{log}"
    );
    assert_eq!(files["/x.md"], "remote\n");
    assert_eq!(world.store_files(), files);
}
