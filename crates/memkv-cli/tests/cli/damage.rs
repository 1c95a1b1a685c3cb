//! Damaged database files: random page corruptions of a real database (seeded, each on a fresh
//! copy; 100 with `MEMKV_FULL_TESTS=1`, the first 30 by default). Every command, run as a process, must answer with an error or with the result
//! it gives on the undamaged file, within a time bound: never a panic (exit 101), a signal, or
//! a hang. Where a command does return something else without an error, `memkv check` must flag
//! the damage.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::memkv;

const PAGE: u64 = 4096;
/// Corruptions with `MEMKV_FULL_TESTS=1`, and by default.
const CORRUPTIONS: u64 = 100;
const SAMPLE: u64 = 30;
const TIME_BOUND: Duration = Duration::from_secs(30);

/// splitmix64: a small, seeded, reproducible generator.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// What a process did: its exit code (`None` if a signal ended it), stdout and stderr.
#[derive(Debug)]
struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Runs `memkv --db DB ARGS` with `input` on stdin, killing it past the time bound.
fn run(db: &Path, args: &[&str], input: &str) -> Run {
    let mut child = memkv(db)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_owned();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(input.as_bytes());
    });
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = out.read_to_end(&mut s);
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = err.read_to_end(&mut s);
        s
    });
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > TIME_BOUND {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "memkv {args:?} on {} hung (killed after {TIME_BOUND:?})",
                db.display()
            );
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    writer.join().unwrap();
    Run {
        code: status.code(),
        stdout: String::from_utf8_lossy(&reader.join().unwrap()).into_owned(),
        stderr: String::from_utf8_lossy(&err_reader.join().unwrap()).into_owned(),
    }
}

/// The database every corruption starts from: the recorded session plus several users with
/// nested files of varied sizes (a few hundred KiB over many B-tree pages).
fn build(db: &Path) {
    let session = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/session.jsonl"
    ))
    .unwrap();
    let r = run(db, &["exec", "--user", "dana"], &session);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let mut rng = Rng(7);
    for u in 0..6 {
        let mut lines = String::new();
        for f in 0..40 {
            let size = 50 + rng.below(4000) as usize;
            let text: String = (0..size)
                .map(|i| {
                    if i % 61 == 60 {
                        '\n'
                    } else {
                        (b'a' + (i % 26) as u8) as char
                    }
                })
                .collect();
            let path = format!("/memories/d{}/e{}/f{f}.md", f % 4, f % 3);
            lines.push_str(
                &json!({"command": "create", "path": path, "file_text": text}).to_string(),
            );
            lines.push('\n');
        }
        let r = run(db, &["exec", "--user", &format!("user{u}")], &lines);
        assert_eq!(r.code, Some(0), "{}", r.stderr);
    }
}

/// The exec session run on every copy: reads, then every kind of write.
fn exec_input() -> String {
    [
        json!({"command": "view", "path": "/memories"}),
        json!({"command": "view", "path": "/memories/d1/e1/f4.md"}),
        json!({"command": "create", "path": "/memories/new.md", "file_text": "new\n"}),
        json!({"command": "str_replace", "path": "/memories/d0/e0/f0.md", "old_str": "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefgh", "new_str": "X"}),
        json!({"command": "insert", "path": "/memories/d2/e2/f2.md", "insert_line": 1, "insert_text": "inserted\n"}),
        json!({"command": "delete", "path": "/memories/d3/e0/f3.md"}),
        json!({"command": "rename", "old_path": "/memories/d1", "new_path": "/memories/moved"}),
        json!({"command": "view", "path": "/memories"}),
    ]
    .iter()
    .map(|v| v.to_string() + "\n")
    .collect()
}

/// The commands tried on each copy, read-only ones first.
fn commands() -> Vec<(&'static str, Vec<&'static str>)> {
    vec![
        ("users", vec!["users"]),
        ("stats", vec!["stats"]),
        ("tree", vec!["tree", "--user", "user3"]),
        (
            "cat",
            vec!["cat", "--user", "user1", "/memories/d1/e1/f1.md"],
        ),
        ("export", vec!["export"]),
        ("check", vec!["check"]),
        ("exec", vec!["exec", "--user", "user2"]),
    ]
}

/// What must match between the damaged and the undamaged file: export's file lines (its header
/// and trailer carry the time of the export), stats without the line of the file size.
fn comparable(name: &str, stdout: &str) -> String {
    match name {
        "export" => stdout
            .lines()
            .filter(|l| l.starts_with(r#"{"type":"file""#))
            .collect::<Vec<_>>()
            .join("\n"),
        "stats" => stdout
            .lines()
            .filter(|l| !l.starts_with("database "))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => stdout.to_owned(),
    }
}

fn corrupt(db: &Path, seed: u64) -> String {
    let mut bytes = std::fs::read(db).unwrap();
    let pages = bytes.len() as u64 / PAGE;
    let mut rng = Rng(seed);
    let page = rng.below(pages);
    let start = (page * PAGE) as usize;
    let how = match rng.below(4) {
        0 => {
            let n = 1 + rng.below(8) as usize;
            for _ in 0..n {
                let at = start + rng.below(PAGE) as usize;
                bytes[at] ^= 1 << rng.below(8);
            }
            format!("{n} bit flips")
        }
        1 => {
            let len = 1 + rng.below(64) as usize;
            let at = start + rng.below(PAGE - len as u64) as usize;
            for b in &mut bytes[at..at + len] {
                *b = rng.next() as u8;
            }
            format!("{len} random bytes at +{}", at - start)
        }
        2 => {
            for b in &mut bytes[start..start + PAGE as usize] {
                *b = rng.next() as u8;
            }
            "random page".into()
        }
        _ => {
            bytes[start..start + PAGE as usize].fill(0);
            "zeroed page".into()
        }
    };
    std::fs::write(db, bytes).unwrap();
    format!("page {page} of {pages}: {how}")
}

#[test]
fn random_page_corruptions_never_crash_or_hang_a_command() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("base.redb");
    build(&base);
    // To reproduce a failure by hand: keep a copy of the undamaged file.
    if let Some(keep) = std::env::var_os("MEMKV_DAMAGE_KEEP_BASE") {
        std::fs::copy(&base, keep).unwrap();
    }
    // The answers on the undamaged file (each on a fresh copy, as below).
    let pristine: Vec<String> = commands()
        .iter()
        .map(|(name, args)| {
            let copy = dir.path().join("pristine.redb");
            std::fs::copy(&base, &copy).unwrap();
            let r = run(&copy, args, &exec_input());
            assert_eq!(r.code, Some(0), "{name}: {}", r.stderr);
            comparable(name, &r.stdout)
        })
        .collect();

    let full = std::env::var_os("MEMKV_FULL_TESTS").is_some_and(|v| v == "1");
    let corruptions = if full { CORRUPTIONS } else { SAMPLE };
    let (mut same, mut refused, mut flagged) = (0, 0, 0);
    for seed in 0..corruptions {
        let copy: PathBuf = dir.path().join(format!("copy-{seed}.redb"));
        std::fs::copy(&base, &copy).unwrap();
        let what = corrupt(&copy, seed);
        let mut check_failed = None;
        let mut differing = Vec::new();
        for ((name, args), want) in commands().iter().zip(&pristine) {
            let before = (*name == "check").then(|| std::fs::read(&copy).unwrap());
            let r = run(&copy, args, &exec_input());
            if let Some(before) = before {
                // The check, repairs included, never writes to the file.
                assert!(
                    std::fs::read(&copy).unwrap() == before,
                    "seed {seed}: check wrote"
                );
            }
            let context = format!(
                "seed {seed} ({what}), memkv {args:?}: exit {:?}, stderr {:?}, stdout {:?}…",
                r.code,
                r.stderr,
                r.stdout.chars().take(300).collect::<String>()
            );
            assert!(r.code.is_some(), "killed by a signal: {context}");
            assert_ne!(r.code, Some(101), "panicked: {context}");
            assert!(!r.stderr.contains("panicked"), "panicked: {context}");
            if *name == "check" {
                check_failed = Some(r.code != Some(0));
            }
            if r.code != Some(0) {
                // An error: it must say something, on stderr, in memkv's own words.
                assert!(r.stderr.starts_with("memkv: "), "{context}");
                refused += 1;
                continue;
            }
            if *name == "exec" {
                // Every line answered, each a tool result.
                let answers: Vec<Value> = r
                    .stdout
                    .lines()
                    .map(|l| serde_json::from_str(l).unwrap())
                    .collect();
                assert_eq!(answers.len(), 8, "{context}");
            }
            if comparable(name, &r.stdout) == *want {
                same += 1;
            } else {
                differing.push(context);
            }
        }
        // A command that answered differently without an error read damaged data that looked
        // valid: `check`, which verifies everything, must have flagged it.
        if !differing.is_empty() {
            assert_eq!(
                check_failed,
                Some(true),
                "undetected damage: {}",
                differing.join("\n")
            );
            flagged += differing.len();
        }
        std::fs::remove_file(&copy).unwrap();
    }
    eprintln!(
        "{corruptions} corruptions: {same} answers as on the undamaged file, {refused} errors, \
         {flagged} different answers on files that `check` flagged"
    );
}
