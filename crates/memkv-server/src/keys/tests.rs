//! The keys' tests: added, checked and revoked in the database, a change made here seen during
//! a reload, expiry, and the keys file.

use super::*;
use memkv::NewKey;
use std::fs;
use std::os::unix::fs::MetadataExt;

fn store(s: &str) -> Scope {
    Scope::Store {
        store: s.into(),
        read_only: false,
    }
}

#[test]
fn keys_are_added_checked_and_revoked_in_the_database() {
    let db = Arc::new(Database::in_memory().unwrap());
    let keys = Keys::load(Arc::clone(&db), None).unwrap();
    assert!(keys.is_empty());
    // No key: nothing is allowed, with or without a key sent.
    assert_eq!(keys.check(None), Access::NoKeys);
    assert_eq!(keys.check(Some("mkv_nope")), Access::NoKeys);

    let (admin, admin_key) = db.add_key(&NewKey::new(Scope::Admin)).unwrap();
    let (alice, alice_key) = db.add_key(&NewKey::new(store("alice"))).unwrap();
    assert!(admin_key.starts_with("mkv_") && admin_key.len() == 68);
    assert!(memkv::keys::valid_id(&admin.id));
    assert_ne!(admin.id, alice.id);
    // A change this process made is seen at once.
    assert_eq!(keys.check(Some(&admin_key)), Access::Key(Scope::Admin));
    assert_eq!(
        keys.identify(Some(&alice_key)).1.as_deref(),
        Some(alice.id.as_str())
    );
    assert_eq!(keys.identify(Some("mkv_nope")), (Access::Unknown, None));
    assert_eq!(keys.check(None), Access::Missing);
    // Uses are recorded when asked.
    keys.record_uses().unwrap();
    let listed = db.api_keys().unwrap();
    assert!(
        listed.iter().all(|k| k.last_used_ms.is_some()),
        "{listed:?}"
    );

    assert!(db.revoke_key(&alice.id).unwrap());
    assert!(!db.revoke_key(&alice.id).unwrap());
    assert_eq!(keys.check(Some(&alice_key)), Access::Unknown);
    assert!(db.revoke_key(&admin.id).unwrap());
    assert_eq!(keys.check(Some(&admin_key)), Access::NoKeys);
}

/// A key this process added works at its next request even while a reload that read the
/// keys before the change is under way (the request waits for it and reads them again).
#[test]
fn a_change_made_here_is_seen_even_during_a_reload() {
    let db = Arc::new(Database::in_memory().unwrap());
    let keys = Arc::new(Keys::load(Arc::clone(&db), None).unwrap());
    db.add_key(&NewKey::new(Scope::Admin)).unwrap();
    assert_eq!(keys.check(None), Access::Missing);
    // A reload under way: its lock held by another thread for a moment.
    let (release, held) = std::sync::mpsc::channel::<()>();
    let (taken, wait_taken) = std::sync::mpsc::channel::<()>();
    let holder = {
        let keys = Arc::clone(&keys);
        std::thread::spawn(move || {
            let _one = keys.reloading.lock().unwrap();
            taken.send(()).unwrap();
            held.recv().unwrap();
        })
    };
    wait_taken.recv().unwrap();
    let (_, key) = db.add_key(&NewKey::new(store("alice"))).unwrap();
    let asking = {
        let keys = Arc::clone(&keys);
        std::thread::spawn(move || keys.check(Some(&key)))
    };
    release.send(()).unwrap();
    holder.join().unwrap();
    assert_eq!(asking.join().unwrap(), Access::Key(store("alice")));
}

#[test]
fn an_expired_key_is_refused() {
    let db = Arc::new(Database::in_memory().unwrap());
    let keys = Keys::load(Arc::clone(&db), None).unwrap();
    let mut new = NewKey::new(store("alice"));
    new.expires_ms = Some(now_ms() + 300);
    let (_, key) = db.add_key(&new).unwrap();
    assert_eq!(keys.check(Some(&key)), Access::Key(store("alice")));
    let deadline = Instant::now() + Duration::from_secs(5);
    while keys.check(Some(&key)) != Access::Expired {
        assert!(Instant::now() < deadline, "the key never expired");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn the_keys_file_is_imported_and_renamed() {
    let dir = tempfile::tempdir().unwrap();
    let file = KeyFile::beside(&dir.path().join("db.redb"));
    assert_eq!(file.path(), dir.path().join("db.redb.keys"));
    let mut ro = NewKey::new(Scope::Store {
        store: "bob".into(),
        read_only: true,
    });
    ro.label = "auditor".into();
    let (admin, admin_key) = file.add(&NewKey::new(Scope::Admin)).unwrap();
    let (_, bob_key) = file.add(&ro).unwrap();
    // Only hashes are kept, and the file is private.
    let text = fs::read_to_string(file.path()).unwrap();
    assert!(!text.contains(&admin_key) && !text.contains(&bob_key[4..]));
    let mode = fs::metadata(file.path()).unwrap().mode() & 0o777;
    assert_eq!(mode, 0o600);

    let db = Arc::new(Database::in_memory().unwrap());
    let keys = Keys::load(Arc::clone(&db), Some(file.clone())).unwrap();
    assert!(!file.path().exists() && file.imported_path().exists());
    assert_eq!(keys.check(Some(&admin_key)), Access::Key(Scope::Admin));
    assert_eq!(keys.check(Some(&bob_key)), Access::Key(ro.scope.clone()));
    let listed = db.api_keys().unwrap();
    assert_eq!(listed.len(), 2);
    assert!(listed.iter().any(|k| k.label == "auditor"));

    // A key written to the file while the server runs works at once; a revocation
    // written there is applied at once too.
    let (_, carol_key) = file.add(&NewKey::new(store("carol"))).unwrap();
    assert_eq!(keys.check(Some(&carol_key)), Access::Key(store("carol")));
    file.revoke(&admin.id).unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while keys.check(Some(&admin_key)) != Access::Unknown {
        assert!(Instant::now() < deadline, "revocation not seen");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(db.api_keys().unwrap().len(), 2);
}

#[test]
fn a_corrupt_file_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let file = KeyFile::new(dir.path().join("k"));
    fs::write(file.path(), "not json\n").unwrap();
    let db = Arc::new(Database::in_memory().unwrap());
    assert!(Keys::load(Arc::clone(&db), Some(file.clone())).is_err());
    assert!(file.path().exists());
    assert!(db.api_keys().unwrap().is_empty());
}
