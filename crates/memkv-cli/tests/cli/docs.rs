//! What an install needs besides the binary: shell completions and manual pages generated from
//! the clap definitions, the systemd unit of docs/deployment.md, and the user unit and launchd
//! agent of docs/sync.md.

use std::path::Path;
use std::process::{Command, Output, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_memkv");

fn run(args: &[&str]) -> Output {
    let out = Command::new(BIN)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{args:?}: {out:?}");
    out
}

/// bash completes commands and flags from the script; zsh's and fish's name the same commands
/// and flags (neither shell is installed here to run them).
#[test]
fn completion_scripts_complete_commands_and_flags() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("memkv.bash");
    std::fs::write(&script, run(&["completions", "bash"]).stdout).unwrap();
    let complete = |words: &[&str], cur: &str, prev: &str| {
        let line = format!(
            "source {}; COMP_WORDS=({}); COMP_CWORD={}; _memkv memkv {cur} {prev}; echo \"${{COMPREPLY[@]}}\"",
            script.display(),
            words.join(" "),
            words.len() - 1
        );
        let out = Command::new("bash").arg("-c").arg(line).output().unwrap();
        assert!(out.status.success() && out.stderr.is_empty(), "{out:?}");
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    };
    assert_eq!(complete(&["memkv", "ke"], "ke", "memkv"), "keys");
    assert_eq!(
        complete(&["memkv", "keys", "add", "--re"], "--re", "add"),
        "--read-only"
    );
    let words = complete(&["memkv", "s"], "s", "memkv");
    for command in ["search", "serve", "stats"] {
        assert!(words.split(' ').any(|w| w == command), "{words}");
    }
    for shell in ["zsh", "fish", "elvish", "powershell"] {
        let text = String::from_utf8(run(&["completions", shell]).stdout).unwrap();
        assert!(
            text.contains("keys") && text.contains("read-only"),
            "{shell}"
        );
    }
    let out = Command::new(BIN)
        .args(["completions", "tcsh"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// One page per command, each of which groff formats without a warning; memkv(1) on stdout.
#[test]
fn manual_pages_are_written_and_format_cleanly() {
    let page = String::from_utf8(run(&["man"]).stdout).unwrap();
    assert!(
        page.starts_with(".ie") && page.contains(".TH memkv 1"),
        "{page}"
    );
    assert!(page.contains("keys") && page.contains("serve"));
    let dir = tempfile::tempdir().unwrap();
    let out = run(&["man", "--out-dir", dir.path().to_str().unwrap()]);
    let mut pages: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    pages.sort();
    for wanted in [
        "memkv.1",
        "memkv-serve.1",
        "memkv-keys-add.1",
        "memkv-completions.1",
    ] {
        assert!(pages.iter().any(|p| p == wanted), "{pages:?}");
    }
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains(&format!("wrote {} manual pages", pages.len()))
    );
    for page in &pages {
        let out = Command::new("groff")
            .args(["-k", "-man", "-Tutf8", "-ww", "-z"])
            .arg(dir.path().join(page))
            .output()
            .expect("groff (Debian's groff-base) formats the pages");
        assert!(
            out.status.success() && out.stderr.is_empty(),
            "{page}: {out:?}"
        );
    }
    let add = std::fs::read_to_string(dir.path().join("memkv-keys-add.1")).unwrap();
    assert!(
        add.contains("read\\-only") && add.contains("expires"),
        "{add}"
    );
}

/// The unit in docs/deployment.md, with ExecStart pointed at this build, passes
/// `systemd-analyze verify` without a word of complaint.
#[test]
fn the_systemd_unit_of_the_deployment_guide_verifies() {
    let guide = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/deployment.md"),
    )
    .unwrap();
    let start = guide
        .find("<!-- memkv.service -->\n```ini\n")
        .expect("the unit is marked in the guide");
    let unit = &guide[start..];
    let unit = &unit[unit.find("```ini\n").unwrap() + 7..];
    let unit = &unit[..unit.find("```").unwrap()];
    assert!(
        unit.contains("ExecStart=/usr/local/bin/memkv serve"),
        "{unit}"
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("memkv.service");
    std::fs::write(&file, unit.replace("/usr/local/bin/memkv", BIN)).unwrap();
    let out = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(&file)
        .output()
        .expect("systemd-analyze (Debian's systemd) is installed by tools/install-postgres.sh");
    assert!(
        out.status.success() && out.stdout.is_empty() && out.stderr.is_empty(),
        "{out:?}"
    );
    // And it does complain about a unit it would not run.
    std::fs::write(
        &file,
        unit.replace("Restart=on-failure", "Restart=sometimes")
            .replace("/usr/local/bin/memkv", BIN),
    )
    .unwrap();
    let out = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(!out.stderr.is_empty(), "{out:?}");
}

/// docs/sync/memkv-sync.service, the user unit of docs/sync.md, passes `systemd-analyze --user
/// verify` with its `%h` a home whose ~/.cargo/bin/memkv is this build (and fails without it:
/// the check does look at ExecStart); the guide shows the file as it is.
#[test]
fn the_sync_user_unit_verifies() {
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs");
    let unit = std::fs::read_to_string(docs.join("sync/memkv-sync.service")).unwrap();
    let guide = std::fs::read_to_string(docs.join("sync.md")).unwrap();
    assert!(
        guide.contains(&format!("```ini\n{unit}```")),
        "docs/sync.md shows docs/sync/memkv-sync.service as it is"
    );
    assert!(
        unit.contains("\nExecStart=%h/.cargo/bin/memkv --config %h/.config/memkv/sync.toml sync\n"),
        "{unit}"
    );
    assert!(
        !unit.contains("MEMKV_API_KEY") && !unit.contains("mkv_"),
        "{unit}"
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("memkv-sync.service");
    let home = dir.path().join("home");
    let runtime = dir.path().join("run");
    std::fs::create_dir_all(home.join(".cargo/bin")).unwrap();
    std::fs::create_dir(&runtime).unwrap();
    let verify = |text: &str| {
        std::fs::write(&file, text).unwrap();
        // A user manager's paths: %h is $HOME, and it needs a runtime folder of its own.
        Command::new("systemd-analyze")
            .args(["--user", "verify", "--man=no"])
            .arg(&file)
            .env("HOME", &home)
            .env("XDG_RUNTIME_DIR", &runtime)
            .output()
            .expect("systemd-analyze (Debian's systemd) is installed by tools/install-postgres.sh")
    };
    let out = verify(&unit);
    assert!(
        !out.status.success()
            && String::from_utf8_lossy(&out.stderr).contains(".cargo/bin/memkv is not executable"),
        "{out:?}"
    );
    std::os::unix::fs::symlink(BIN, home.join(".cargo/bin/memkv")).unwrap();
    let out = verify(&unit);
    assert!(
        out.status.success() && out.stdout.is_empty() && out.stderr.is_empty(),
        "{out:?}"
    );
    let out = verify(&unit.replace("Restart=on-failure", "Restart=sometimes"));
    assert!(!out.stderr.is_empty(), "{out:?}");
}

/// docs/sync/dev.memkv.sync.plist, the launchd agent of docs/sync.md, is a property list (read
/// by python3's plistlib) that runs what the systemd unit runs, at login, again after a failure.
#[test]
fn the_sync_launchd_agent_parses_and_runs_what_the_unit_runs() {
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs");
    let path = docs.join("sync/dev.memkv.sync.plist");
    let text = std::fs::read_to_string(&path).unwrap();
    let guide = std::fs::read_to_string(docs.join("sync.md")).unwrap();
    assert!(
        guide.contains(&format!("```xml\n{text}```")),
        "docs/sync.md shows docs/sync/dev.memkv.sync.plist as it is"
    );
    let out = Command::new("python3")
        .args([
            "-c",
            "import json, plistlib, sys; print(json.dumps(plistlib.load(open(sys.argv[1], 'rb'))))",
        ])
        .arg(&path)
        .output()
        .expect("python3");
    assert!(out.status.success(), "{out:?}");
    let plist: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(plist["Label"], "dev.memkv.sync");
    assert_eq!(
        plist["ProgramArguments"],
        serde_json::json!([
            "/Users/USERNAME/.cargo/bin/memkv",
            "--config",
            "/Users/USERNAME/.config/memkv/sync.toml",
            "sync"
        ])
    );
    assert_eq!(plist["RunAtLoad"], true);
    assert_eq!(
        plist["KeepAlive"],
        serde_json::json!({"SuccessfulExit": false})
    );
    // The same command as the systemd unit's, the home folder spelled as launchd needs it.
    let unit = std::fs::read_to_string(docs.join("sync/memkv-sync.service")).unwrap();
    let exec = unit
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .unwrap()
        .replace("%h", "/Users/USERNAME");
    let args: Vec<&str> = plist["ProgramArguments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(exec, args.join(" "));
}
