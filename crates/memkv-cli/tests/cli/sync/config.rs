//! Several folders from one config file, and a feed cursor the server no longer has.

use std::process::Command;
use std::time::Duration;

use super::{World, folder_files};

fn memkv_sync(
    world: &World,
    args: &[&str],
    config: Option<&std::path::Path>,
) -> (bool, String, String) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_memkv"));
    c.arg("sync").args(args).env("MEMKV_API_KEY", &world.key);
    match config {
        Some(f) => c.env("MEMKV_CONFIG", f),
        None => c.env_remove("MEMKV_CONFIG"),
    };
    let out = c.output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn several_folders_from_the_config_file_each_with_its_own_store() {
    let world = World::new(&[]);
    let other = super::http(
        "POST",
        &format!("{}/v1/memory_stores", world.url()),
        &world.key,
        Some(r#"{"name":"other"}"#),
    );
    let other: serde_json::Value = serde_json::from_str(&other).unwrap();
    let other = other["id"].as_str().unwrap();
    let (a, sa) = world.folder("a");
    let (b, sb) = world.folder("b");
    std::fs::write(a.join("in-a.md"), "a\n").unwrap();
    std::fs::write(b.join("in-b.md"), "b\n").unwrap();
    let config = world.dir.path().join("memkv.toml");
    std::fs::write(
        &config,
        format!(
            "[sync]\nurl = \"{}\"\ndebounce = \"50ms\"\n\n[[sync.folder]]\ndir = \"{}\"\nstore = \"{}\"\nstate = \"{}\"\n\n[[sync.folder]]\ndir = \"{}\"\nstore = \"{other}\"\nstate = \"{}\"\n",
            world.url(),
            a.display(),
            world.store,
            sa.display(),
            b.display(),
            sb.display()
        ),
    )
    .unwrap();
    let (ok, out, err) = memkv_sync(&world, &["--once"], Some(&config));
    assert!(ok, "{err}");
    assert_eq!(out.lines().count(), 2, "a line a folder: {out}");
    assert_eq!(world.store_files().keys().collect::<Vec<_>>(), ["/in-a.md"]);
    let api = memkv_sync::api::Api::new(&world.url(), other, &world.key, Duration::from_secs(10))
        .unwrap();
    let in_other: Vec<String> = api
        .list(false)
        .unwrap()
        .into_iter()
        .map(|m| m.path)
        .collect();
    assert_eq!(in_other, ["/in-b.md"]);
    // `status` without a folder reports every folder of the file.
    let (ok, out, err) = memkv_sync(&world, &["status"], Some(&config));
    assert!(ok, "{err}");
    assert!(
        out.contains(&a.display().to_string()) && out.contains(&b.display().to_string()),
        "{out}"
    );
    assert!(out.contains("last sync  20"), "{out}");
    // A folder of the file without a store is a usage error naming it.
    std::fs::write(
        &config,
        format!("[[sync.folder]]\ndir = \"{}\"\n", a.display()),
    )
    .unwrap();
    let (ok, _, err) = memkv_sync(&world, &["--once", "--url", &world.url()], Some(&config));
    assert!(!ok);
    assert!(err.contains("no --store"), "{err}");
    // Without a folder and without the file: what to give.
    let (ok, _, err) = memkv_sync(&world, &["--once"], None);
    assert!(!ok);
    assert!(err.contains("needs a folder"), "{err}");
}

#[test]
fn a_cursor_the_log_no_longer_has_starts_a_full_reconciliation() {
    let world = World::new(&[]);
    let (a, sa) = world.folder("a");
    let args = |s: &std::path::Path| {
        vec![
            a.to_str().unwrap().to_owned(),
            "--url".into(),
            world.url(),
            "--store".into(),
            world.store.clone(),
            "--state".into(),
            s.to_str().unwrap().to_owned(),
            "--once".into(),
        ]
    };
    let api = world.api();
    api.create("/first.md", "1\n").unwrap();
    let first: Vec<String> = args(&sa);
    let (ok, _, err) = memkv_sync(
        &world,
        &first.iter().map(String::as_str).collect::<Vec<_>>(),
        None,
    );
    assert!(ok, "{err}");
    for i in 0..20 {
        api.create(&format!("/n{i}.md"), &format!("{i}\n")).unwrap();
    }
    // The cursor as a sync would hold it after the server was restored from an older backup:
    // past the log's end (the server answers 410).
    {
        let folder = a.canonicalize().unwrap();
        let state =
            memkv_sync::state::State::open(&sa, &folder, &world.url(), &world.store).unwrap();
        let mut cursor = state
            .cursor()
            .unwrap()
            .expect("the first sync kept a cursor");
        cursor.after += 1_000_000;
        state.set_cursor(Some(&cursor)).unwrap();
    }
    let (ok, _, err) = memkv_sync(
        &world,
        &first.iter().map(String::as_str).collect::<Vec<_>>(),
        None,
    );
    assert!(ok, "{err}");
    assert!(err.contains("cursor is gone"), "{err}");
    assert_eq!(folder_files(&a), world.store_files());
    assert_eq!(folder_files(&a).len(), 21);
}
