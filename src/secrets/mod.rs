//! The secrets guard: high-confidence detectors for credentials that must never be stored in
//! memory. Each detector matches a documented, structured format (a fixed prefix, a fixed length
//! or a checksum-like marker), so ordinary prose, Markdown, code and UUIDs do not trip it.

mod detectors;

use std::ops::Range;
use std::sync::LazyLock;

use regex::bytes::RegexSet;

use detectors::Detector;
#[cfg(test)]
use detectors::placeholder;

/// What to do when content that is about to be written holds a secret.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum SecretPolicy {
    /// Refuse the write (the default).
    #[default]
    Reject,
    /// Replace each secret with `[REDACTED:<kind>]`, write, and say so in the result.
    Redact,
    /// No scanning.
    Off,
}

impl std::str::FromStr for SecretPolicy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "reject" => Ok(SecretPolicy::Reject),
            "redact" => Ok(SecretPolicy::Redact),
            "off" => Ok(SecretPolicy::Off),
            other => Err(format!(
                "unknown secrets policy {other:?} (reject, redact, off)"
            )),
        }
    }
}

static DETECTORS: LazyLock<Vec<Detector>> = LazyLock::new(detectors::detectors);

/// All detectors in one automaton: one pass over clean content (the common case) answers
/// "no secret" without running each detector.
static ANY: LazyLock<RegexSet> = LazyLock::new(|| {
    RegexSet::new(DETECTORS.iter().map(|d| d.pattern.as_str()))
        .expect("detector patterns are valid")
});

/// One secret in the content: its byte range and the kind that names it.
struct Found {
    range: Range<usize>,
    kind: &'static str,
}

/// Every secret in `content`, in order, without overlaps. Where two detectors' spans overlap,
/// the span becomes their union (so each secret is covered whole) and the more specific
/// (earlier) detector names it.
fn scan(content: &str) -> Vec<Found> {
    if !ANY.is_match(content.as_bytes()) {
        return Vec::new();
    }
    let mut spans: Vec<(Range<usize>, usize)> = Vec::new();
    for rank in ANY.matches(content.as_bytes()).iter() {
        let detector = &DETECTORS[rank];
        for caps in detector.pattern.captures_iter(content.as_bytes()) {
            let found = (detector.check)(&caps, content).filter(|range| {
                content.is_char_boundary(range.start) && content.is_char_boundary(range.end)
            });
            if let Some(range) = found {
                spans.push((range, rank));
            }
        }
    }
    spans.sort_by_key(|(range, rank)| (range.start, *rank));
    let mut found: Vec<(Range<usize>, usize)> = Vec::with_capacity(spans.len());
    for (range, rank) in spans {
        match found.last_mut() {
            Some((last, last_rank)) if range.start < last.end => {
                last.end = last.end.max(range.end);
                *last_rank = (*last_rank).min(rank);
            }
            _ => found.push((range, rank)),
        }
    }
    found
        .into_iter()
        .map(|(range, rank)| Found {
            range,
            kind: DETECTORS[rank].kind,
        })
        .collect()
}

/// The kind of the first secret in `content`, if any.
pub fn find(content: &str) -> Option<&'static str> {
    scan(content).first().map(|f| f.kind)
}

/// `content` with every secret replaced by `[REDACTED:<kind>]`, and the kinds replaced, in order
/// of first appearance (each once). A replacement covers the secret and nothing else: the
/// context that identified it (`aws_secret_access_key = `, a URL's user and host) stays.
pub fn redact(content: &str) -> (String, Vec<&'static str>) {
    let found = scan(content);
    if found.is_empty() {
        return (content.to_owned(), Vec::new());
    }
    let mut text = String::with_capacity(content.len());
    let mut kinds: Vec<&'static str> = Vec::new();
    let mut at = 0;
    for Found { range, kind } in found {
        text.push_str(&content[at..range.start]);
        text.push_str("[REDACTED:");
        text.push_str(kind);
        text.push(']');
        at = range.end;
        if !kinds.contains(&kind) {
            kinds.push(kind);
        }
    }
    text.push_str(&content[at..]);
    (text, kinds)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A random-looking base64 body line (not a real key).
    const LINE: &str = "MIIEowIBAAKCAQEA7bq3Xk9vQ2mZ8Lw1Rt5Yp0Hn4Ud6Sa2Jf7Kc9Ve3Gx8Bq1Ni";

    #[test]
    fn no_false_positives_on_ordinary_text() {
        let corpus = [
            "# Project notes\n\n- Uses PostgreSQL 16; migrations via sqlx.\n- Prefers `cargo nextest`.\n",
            "Request id 550e8400-e29b-41d4-a716-446655440000 failed; retry with id 6ba7b810-9dad-11d1-80b4-00c04fd430c8.",
            "The commit 3f786850e387550fdab836ed7e6dc881de23001b fixed it; sha256 e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855.",
            "fn main() { let key = std::env::var(\"API_KEY\").expect(\"set API_KEY\"); println!(\"{key}\"); }",
            "export AWS_REGION=us-east-1\nexport AWS_PROFILE=dev # keys live in ~/.aws/credentials\n",
            "The sk- prefix marks secret keys; never paste sk-... values here. Use ghp_ tokens from the vault.",
            "-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE\n-----END PUBLIC KEY-----",
            "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIU\n-----END CERTIFICATE-----",
            "A base64 blob: QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo0123456789abcdefghijklmnopqrstuvwxyz==",
            "AKIA is the prefix of AWS access key ids; ours rotate monthly.",
            "eyJ is how base64 JSON starts, e.g. eyJhbGciOiJIUzI1NiJ9 alone is just a header.",
            "Stripe test mode uses keys beginning with sk_test_; store them in the secrets manager.",
            "| col | value |\n|---|---|\n| user | dana |\n| role | admin |\n",
            "xoxb tokens are Slack bot tokens. hooks.slack.com is the webhook host.",
            "Call https://api.example.com/v1/items?page=2&limit=50 with header X-Request-Id.",
            "mongodb://localhost:27017/app and redis://127.0.0.1:6379/0 are local defaults.",
        ];
        for text in corpus {
            assert_eq!(find(text), None, "{text}");
            assert_eq!(redact(text), (text.to_owned(), vec![]), "{text}");
        }
    }

    #[test]
    fn redaction_names_each_kind_once_in_order() {
        let gh = "ghp_Q7fWm2Rk9TzXc4Lb8NvHy3Js6Dp1Ga5Ue0Io";
        let text = format!(
            "a AKIAUJZDEGXDNCF32EPF b {gh} c AKIAQ4MZ7TRW2KXHN6PB d postgres://u:Xk9#mQ2v@h/db"
        );
        let (redacted, kinds) = redact(&text);
        assert_eq!(
            kinds,
            ["AWS access key", "GitHub token", "database password"]
        );
        assert_eq!(
            redacted,
            "a [REDACTED:AWS access key] b [REDACTED:GitHub token] c [REDACTED:AWS access key] d postgres://u:[REDACTED:database password]@h/db"
        );
        assert_eq!(find(&text), Some("AWS access key"));
        assert_eq!(find(&redacted), None);
        assert_eq!("redact".parse::<SecretPolicy>(), Ok(SecretPolicy::Redact));
        assert!("nope".parse::<SecretPolicy>().is_err());
    }

    #[test]
    fn overlapping_matches_merge_and_the_specific_kind_names_them() {
        // The key inside a service-account file matches two detectors.
        let text = format!(
            "{{\"type\": \"service_account\", \"private_key\": \"-----BEGIN PRIVATE KEY-----\\n{LINE}\\n{LINE}\\n-----END PRIVATE KEY-----\\n\"}}"
        );
        assert_eq!(
            redact(&text),
            (
                "{\"type\": \"service_account\", \"private_key\": \"[REDACTED:GCP service account key]\\n\"}".to_owned(),
                vec!["GCP service account key"]
            )
        );
    }

    #[test]
    fn a_key_without_an_end_line_stops_at_its_last_line() {
        let key = format!("-----BEGIN RSA PRIVATE KEY-----\n{LINE}\n{LINE}\nAb3d");
        for after in ["\nThen run ssh-add.", "\n\nNext section", "", "\n"] {
            let text = format!("key:\n{key}{after}");
            assert_eq!(
                redact(&text).0,
                format!("key:\n[REDACTED:private key]{after}"),
                "{after:?}"
            );
        }
        // A header that is only mentioned is not a key, whatever follows it.
        let text =
            "Files start with -----BEGIN RSA PRIVATE KEY-----\nThen comes the body.\nNothing else.";
        assert_eq!(find(text), None);
    }

    #[test]
    fn placeholders_and_published_examples_are_not_secrets() {
        for text in [
            "AKIAIOSFODNN7EXAMPLE",
            "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "AKIAXXXXXXXXXXXXXXXX",
            "AKIA1234567890ABCDEF",
            "ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
            "glpat-aaaaaaaaaaaaaaaaaaaa",
            "sk_test_4eC39HqLyjWDarjtT1zdp7dc",
            "postgres://user:password@localhost/db",
            "postgres://app:${DB_PASSWORD}@db/app",
            "mysql://root:<password>@127.0.0.1/shop",
            "redis://:%REDIS_PASSWORD%@cache:6379",
        ] {
            assert_eq!(find(text), None, "{text}");
        }
        assert!(placeholder("AAAAAAAABCDEFGHIJKLMNOP"));
        assert!(!placeholder("Q7fWm2Rk9TzXc4Lb8NvHy3Js6Dp1Ga5Ue0Io"));
    }
}
