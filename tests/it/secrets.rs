//! The secrets guard on every write path, and measured on both sides: a corpus of ordinary
//! notes (tests/data/secrets/benign) with no false positive, and realistic keys of every
//! supported kind (generated from tests/data/secrets/keys.txt), each caught and each redacted
//! exactly.

use std::ops::Range;
use std::path::Path;

#[allow(unused_imports)]
use crate::util::{Fresh, each_backend, fresh};
use memkv::{Database, SecretPolicy};
use serde_json::json;

/// A random-looking (not real) access key id: AWS's own documented example is allowed.
const KEY: &str = "AKIAUJZDEGXDNCF32EPF";

fn run(store: &Database, input: serde_json::Value) -> (String, bool) {
    let out = store.user("u").unwrap().execute_json(&input).unwrap();
    (out.content, out.is_error)
}

#[test]
fn reject_is_the_default_on_every_write() {
    each_backend(|| {
        let store = fresh().unwrap();
        let refused = "Error: The content appears to contain a secret (AWS access key). Secrets must not be stored in memory; remove it and try again.".to_owned();
        assert_eq!(
            run(
                &store,
                json!({"command": "create", "path": "/memories/a", "file_text": format!("id {KEY}")})
            ),
            (refused.clone(), true)
        );
        assert!(
            !run(
                &store,
                json!({"command": "create", "path": "/memories/a", "file_text": "line one\n"})
            )
            .1
        );
        assert_eq!(
            run(
                &store,
                json!({"command": "str_replace", "path": "/memories/a", "old_str": "one", "new_str": KEY})
            ),
            (refused.clone(), true)
        );
        assert_eq!(
            run(&store, json!({"command": "insert", "path": "/memories/a", "insert_line": 1, "insert_text": format!("token ghp_{}", "A1b2".repeat(9))})),
            ("Error: The content appears to contain a secret (GitHub token). Secrets must not be stored in memory; remove it and try again.".to_owned(), true)
        );
        assert_eq!(
            store
                .user("u")
                .unwrap()
                .read_file("/memories/a")
                .unwrap()
                .unwrap(),
            "line one\n"
        );
    });
}

#[test]
fn redact_replaces_and_reports() {
    each_backend(|| {
        let store = Database::builder()
            .secrets(SecretPolicy::Redact)
            .fresh()
            .unwrap();
        assert_eq!(
            run(&store, json!({"command": "create", "path": "/memories/a", "file_text": format!("aws {KEY}\nnext\n")})),
            ("File created successfully at: /memories/a\nNote: the content appeared to contain secrets (AWS access key); each was replaced with [REDACTED:<kind>] before saving.".to_owned(), false)
        );
        assert_eq!(
            store
                .user("u")
                .unwrap()
                .read_file("/memories/a")
                .unwrap()
                .unwrap(),
            "aws [REDACTED:AWS access key]\nnext\n"
        );
        let jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U";
        assert_eq!(
            run(&store, json!({"command": "str_replace", "path": "/memories/a", "old_str": "next", "new_str": format!("jwt {jwt}")})),
            ("The memory file has been edited. Here is the snippet showing the change (with line numbers):\n     1\taws [REDACTED:AWS access key]\n     2\tjwt [REDACTED:JSON Web Token]\nNote: the content appeared to contain secrets (JSON Web Token); each was replaced with [REDACTED:<kind>] before saving.".to_owned(), false)
        );
        // Clean edits carry no note.
        assert_eq!(
            run(
                &store,
                json!({"command": "insert", "path": "/memories/a", "insert_line": 0, "insert_text": "top"})
            ),
            ("The file /memories/a has been edited.".to_owned(), false)
        );
    });
}

#[test]
fn off_stores_as_given() {
    each_backend(|| {
        let store = Database::builder()
            .secrets(SecretPolicy::Off)
            .fresh()
            .unwrap();
        assert_eq!(
            run(
                &store,
                json!({"command": "create", "path": "/memories/a", "file_text": KEY})
            ),
            (
                "File created successfully at: /memories/a".to_owned(),
                false
            )
        );
        assert_eq!(
            store
                .user("u")
                .unwrap()
                .read_file("/memories/a")
                .unwrap()
                .unwrap(),
            KEY
        );
    });
}

fn store(policy: SecretPolicy) -> Database {
    Database::builder()
        .secrets(policy)
        .max_file_bytes(1 << 20)
        .fresh()
        .unwrap()
}

/// Writes `text` under `policy`: the tool's answer, and what was stored (if anything).
fn write(store: &Database, text: &str) -> (String, bool, Option<String>) {
    let user = store.user("u").unwrap();
    let _ = user.execute_json(&json!({"command": "delete", "path": "/memories/t"}));
    let out = user
        .execute_json(&json!({"command": "create", "path": "/memories/t", "file_text": text}))
        .unwrap();
    (
        out.content,
        out.is_error,
        user.read_file("/memories/t").unwrap(),
    )
}

#[track_caller]
fn assert_benign(reject: &Database, redact: &Database, text: &str) {
    let created = "File created successfully at: /memories/t".to_owned();
    let want = (created, false, Some(text.to_owned()));
    assert_eq!(write(reject, text), want, "reject mode refused:\n{text}");
    assert_eq!(write(redact, text), want, "redact mode changed:\n{text}");
}

#[track_caller]
fn assert_caught(
    reject: &Database,
    redact: &Database,
    kind: &str,
    text: &str,
    secrets: &[Range<usize>],
) {
    let refused = format!(
        "Error: The content appears to contain a secret ({kind}). Secrets must not be stored in memory; remove it and try again."
    );
    assert_eq!(write(reject, text), (refused, true, None), "{text}");
    let mut want = String::new();
    let mut at = 0;
    for range in secrets {
        want.push_str(&text[at..range.start]);
        want.push_str(&format!("[REDACTED:{kind}]"));
        at = range.end;
    }
    want.push_str(&text[at..]);
    let noted = format!(
        "File created successfully at: /memories/t\nNote: the content appeared to contain secrets ({kind}); each was replaced with [REDACTED:<kind>] before saving."
    );
    assert_eq!(
        write(redact, text),
        (noted, false, Some(want.clone())),
        "{text}"
    );
    // What redaction leaves holds no secret.
    assert_eq!(write(reject, &want).2.as_deref(), Some(want.as_str()));
}

fn data() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/secrets"))
}

#[test]
fn benign_corpus_has_no_false_positive() {
    each_backend(|| {
        let (reject, redact) = (store(SecretPolicy::Reject), store(SecretPolicy::Redact));
        let mut files: Vec<_> = std::fs::read_dir(data().join("benign"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        assert!(files.len() >= 5, "{files:?}");
        let mut samples = 0;
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            // The whole note, and each line on its own (a short note is the common write).
            assert_benign(&reject, &redact, &text);
            for line in text.lines().filter(|l| !l.trim().is_empty()) {
                assert_benign(&reject, &redact, line);
                samples += 1;
            }
        }
        assert!(samples >= 250, "{samples} lines");
    });
}

/// SplitMix64: a small deterministic generator, so failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn pick(&mut self, alphabet: &str, n: usize) -> String {
        let a = alphabet.as_bytes();
        (0..n)
            .map(|_| a[(self.next() % a.len() as u64) as usize] as char)
            .collect()
    }
}

const B64: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// One generator of keys.txt: `name` or `name:count`.
fn generate(rng: &mut Rng, spec: &str) -> String {
    let (name, n) = spec.split_once(':').unwrap_or((spec, "0"));
    let n: usize = n.parse().unwrap();
    let upper = "ABCDEFGHIJKLMNOPQRSTUVWXYZ";
    let lower = "abcdefghijklmnopqrstuvwxyz";
    let digits = "0123456789";
    match name {
        "hex" => rng.pick("0123456789abcdef", n),
        "HEX" => rng.pick("0123456789ABCDEF", n),
        "alnum" => rng.pick(&format!("{upper}{lower}{digits}"), n),
        "alpha" => rng.pick(&format!("{upper}{lower}"), n),
        "lower" => rng.pick(lower, n),
        "digits" => format!("{}{}", rng.pick("123456789", 1), rng.pick(digits, n - 1)),
        "upnum" => rng.pick(&format!("{upper}{digits}"), n),
        "B32" => rng.pick("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", n),
        "b64" => rng.pick(B64, n),
        "url" => rng.pick(&format!("{upper}{lower}{digits}-_"), n),
        "pw" => rng.pick(&format!("{upper}{lower}{digits}!#%^&*()_+-=.~"), n),
        // Base64 lines of a key body, 64 characters each, and a shorter last line, joined by
        // real line breaks (`pem`) or by JSON's `\n` (`pemj`).
        "pem" | "pemj" => {
            let mut lines: Vec<String> = (0..n).map(|_| rng.pick(B64, 64)).collect();
            let last = 4 + (rng.next() % 56) as usize;
            lines.push(format!("{}==", rng.pick(B64, last)));
            lines.join(if name == "pem" { "\n" } else { "\\n" })
        }
        // A Discord bot token begins with the bot's 18-digit id in base64.
        "discord" => {
            let id = generate(rng, "digits:18");
            let mut out = String::new();
            for chunk in id.as_bytes().chunks(3) {
                let v = chunk.iter().fold(0u32, |acc, &b| (acc << 8) | u32::from(b));
                for i in (0..4).rev() {
                    out.push(B64.as_bytes()[((v >> (6 * i)) & 63) as usize] as char);
                }
            }
            out
        }
        other => panic!("unknown generator {other}"),
    }
}

/// Expands a template: the text, and the ranges marked with « ».
fn expand(rng: &mut Rng, template: &str) -> (String, Vec<Range<usize>>) {
    let mut text = String::new();
    let mut secrets = Vec::new();
    let mut rest = template;
    while let Some(c) = rest.chars().next() {
        rest = &rest[c.len_utf8()..];
        match c {
            '«' => secrets.push(text.len()..0),
            '»' => secrets.last_mut().unwrap().end = text.len(),
            '{' if rest.starts_with("nl}") => {
                text.push('\n');
                rest = &rest[3..];
            }
            '{' if rest.starts_with(|c: char| c.is_ascii_alphabetic()) => {
                let end = rest.find('}').unwrap();
                text.push_str(&generate(rng, &rest[..end]));
                rest = &rest[end + 1..];
            }
            c => text.push(c),
        }
    }
    (text, secrets)
}

#[test]
fn every_supported_kind_is_caught_and_redacted_exactly() {
    each_backend(|| {
        let (reject, redact) = (store(SecretPolicy::Reject), store(SecretPolicy::Redact));
        let templates = std::fs::read_to_string(data().join("keys.txt")).unwrap();
        let mut kinds = Vec::new();
        let mut keys = 0;
        for (n, line) in templates.lines().enumerate() {
            if line.starts_with('#') || line.trim().is_empty() {
                continue;
            }
            let (kind, template) = line.split_once(" | ").unwrap();
            for seed in 0..12 {
                let mut rng = Rng(seed * 1_000 + n as u64);
                let (text, secrets) = expand(&mut rng, template);
                assert!(!secrets.is_empty(), "{line}");
                assert_caught(&reject, &redact, kind, &text, &secrets);
                keys += secrets.len();
            }
            if !kinds.contains(&kind) {
                kinds.push(kind);
            }
        }
        // Every format the guard promises (issue 7 lists the newer ones) has realistic samples.
        for kind in [
            "private key",
            "GCP service account key",
            "AWS access key",
            "AWS secret access key",
            "Azure storage account key",
            "Google API key",
            "Google OAuth client secret",
            "Anthropic API key",
            "OpenAI API key",
            "Hugging Face token",
            "GitHub token",
            "GitLab token",
            "Slack token",
            "Slack app token",
            "Slack webhook",
            "Stripe key",
            "Stripe webhook secret",
            "npm token",
            "PyPI token",
            "SendGrid API key",
            "Twilio API key",
            "Twilio auth token",
            "Telegram bot token",
            "DigitalOcean token",
            "Shopify token",
            "Databricks token",
            "Mailgun API key",
            "Discord bot token",
            "Discord webhook",
            "database password",
            "JSON Web Token",
        ] {
            assert!(kinds.contains(&kind), "no sample of {kind}");
        }
        assert!(keys >= 800, "{keys} keys");
    });
}

// Issue 7, defect 2: each case below failed before the fix.

/// A note that mentions a PEM header (no key after it) and, further on, a service-account
/// fragment and the `"private_key"` field by name.
const MENTIONS: &str = "Our deploy key file starts with -----BEGIN OPENSSH PRIVATE KEY----- as usual.\n\
Rotate it every quarter; the runbook is in the wiki.\n\
A GCP key file looks like {\"type\": \"service_account\", \"project_id\": \"demo\"}.\n\
Never paste its \"private_key\": \"<redacted>\" field here.\n\
The rest of this note must survive.\n";

#[test]
fn issue_7_redaction_covers_the_secret_and_nothing_else() {
    each_backend(|| {
        let redact = store(SecretPolicy::Redact);
        assert_eq!(
            write(&redact, MENTIONS),
            (
                "File created successfully at: /memories/t".to_owned(),
                false,
                Some(MENTIONS.to_owned())
            )
        );
        // A real key among the mentions: only the key goes.
        let key = format!(
            "-----BEGIN RSA PRIVATE KEY-----\n{}\n{}\nQx7=\n-----END RSA PRIVATE KEY-----",
            "MIIEowIBAAKCAQEA7bq3Xk9vQ2mZ8Lw1Rt5Yp0Hn4Ud6Sa2Jf7Kc9Ve3Gx8Bq1Ni",
            "Lm4Pz7Wc2Ev9Ty6Ro3Hb8Dk1Fj5Sa0Gu4Iq7Xn2Ml9Vw6Ky3Ch8Bt1Zp5Ee0Ra"
        );
        let text = format!("{MENTIONS}{key}\nAfter the key.\n");
        assert_eq!(
            write(&redact, &text).2.unwrap(),
            format!("{MENTIONS}[REDACTED:private key]\nAfter the key.\n")
        );
    });
}

#[test]
fn issue_7_reject_mode_accepts_notes_that_mention_secrets_and_aws_example_keys() {
    each_backend(|| {
        let reject = store(SecretPolicy::Reject);
        for text in [
            MENTIONS,
            "AWS documents AKIAIOSFODNN7EXAMPLE as its example access key id.",
            "[default]\naws_access_key_id = AKIAIOSFODNN7EXAMPLE\naws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n",
        ] {
            assert_eq!(write(&reject, text).2.as_deref(), Some(text));
        }
    });
}

#[test]
fn issue_7_aws_secret_keys_ending_in_slash_or_plus_and_the_json_form_are_caught() {
    each_backend(|| {
        let (reject, redact) = (store(SecretPolicy::Reject), store(SecretPolicy::Redact));
        let kind = "AWS secret access key";
        for (before, secret, after) in [
            (
                "aws_secret_access_key = ",
                "Zq8Lr3Xv7Kd2Mw9Pt4Yb6Hn1Jc5Fs0Ga8Ue3Io7/",
                "\n",
            ),
            (
                "AWS_SECRET_ACCESS_KEY=",
                "Zq8Lr3Xv7Kd2Mw9Pt4Yb6Hn1Jc5Fs0Ga8Ue3Io7+",
                "",
            ),
            (
                r#"{"SecretAccessKey": ""#,
                "Zq8Lr3Xv7Kd2Mw9Pt4Yb6Hn1Jc5Fs0Ga8Ue3Io7Q",
                r#""}"#,
            ),
        ] {
            let text = format!("{before}{secret}{after}");
            let range = before.len()..before.len() + secret.len();
            assert_caught(&reject, &redact, kind, &text, &[range]);
        }
    });
}
