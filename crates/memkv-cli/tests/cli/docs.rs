//! What an install needs besides the binary: shell completions and manual pages generated from
//! the clap definitions, and the systemd unit of docs/deployment.md.

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
