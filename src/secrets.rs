//! The secrets guard: high-confidence detectors for credentials that must never be stored in
//! memory. Each detector matches a documented, structured format (a fixed prefix, a fixed length
//! or a checksum-like marker), so ordinary prose, Markdown, code and UUIDs do not trip it.

use std::sync::LazyLock;

use regex::{Regex, RegexSet};

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

struct Detector {
    kind: &'static str,
    pattern: Regex,
}

/// The detectors, most specific first (an Anthropic key also looks like a generic `sk-` key).
static DETECTORS: LazyLock<Vec<Detector>> = LazyLock::new(|| {
    // Secrets are ASCII: ASCII word boundaries keep the fast automata usable on any text.
    let d = |kind, pattern: &str| Detector {
        kind,
        pattern: Regex::new(&pattern.replace(r"\b", r"(?-u:\b)"))
            .expect("detector patterns are valid"),
    };
    vec![
        d(
            "private key",
            r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----(?s:.*?)(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|\z)",
        ),
        d(
            "GCP service account key",
            r#"(?s)"type"\s*:\s*"service_account".*?"private_key"\s*:\s*"[^"]*"|"private_key_id"\s*:\s*"[0-9a-f]{40}""#,
        ),
        d(
            "AWS access key",
            r"\b(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}\b",
        ),
        d(
            "AWS secret access key",
            r#"(?i)aws_?secret_?access_?key["']?\s*[:=]\s*["']?[A-Za-z0-9/+=]{40}\b"#,
        ),
        d("Google API key", r"\bAIza[0-9A-Za-z_\-]{35}\b"),
        d(
            "Anthropic API key",
            r"\bsk-ant-(?:api|admin)\d{2}-[A-Za-z0-9_\-]{80,}",
        ),
        d(
            "OpenAI API key",
            r"\bsk-(?:(?:proj|svcacct|admin)-[A-Za-z0-9_\-]{40,}|[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20})",
        ),
        d(
            "GitHub token",
            r"\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{82})\b",
        ),
        d("GitLab token", r"\bglpat-[A-Za-z0-9_\-]{20,}"),
        d(
            "Slack token",
            r"\bxox[abposr]-(?:[0-9]+-)+[A-Za-z0-9-]{10,}",
        ),
        d(
            "Slack webhook",
            r"https://hooks\.slack\.com/(?:services|workflows)/T[A-Z0-9]{6,}/[A-Z0-9]{6,}/[A-Za-z0-9]{20,}",
        ),
        d(
            "Stripe key",
            r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{20,}\b",
        ),
        d("npm token", r"\bnpm_[A-Za-z0-9]{36}\b"),
        d("PyPI token", r"\bpypi-AgEIcHlwaS5vcmc[A-Za-z0-9_\-]{50,}"),
        d(
            "SendGrid API key",
            r"\bSG\.[A-Za-z0-9_\-]{22}\.[A-Za-z0-9_\-]{43}\b",
        ),
        d(
            "JSON Web Token",
            r"\beyJ[A-Za-z0-9_\-]{10,}\.eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}",
        ),
    ]
});

/// All detectors in one automaton: one pass over clean content (the common case) answers
/// "no secret" without running each detector.
static ANY: LazyLock<RegexSet> = LazyLock::new(|| {
    RegexSet::new(DETECTORS.iter().map(|d| d.pattern.as_str()))
        .expect("detector patterns are valid")
});

/// The kind of the first secret in `content`, if any.
pub fn find(content: &str) -> Option<&'static str> {
    if !ANY.is_match(content) {
        return None;
    }
    DETECTORS
        .iter()
        .filter_map(|d| d.pattern.find(content).map(|m| (m.start(), d.kind)))
        .min_by_key(|(start, _)| *start)
        .map(|(_, kind)| kind)
}

/// `content` with every secret replaced by `[REDACTED:<kind>]`, and the kinds replaced, in order
/// of first appearance (each once). Detectors run most specific first, so a secret is named by
/// the most specific detector that matches it.
pub fn redact(content: &str) -> (String, Vec<&'static str>) {
    if !ANY.is_match(content) {
        return (content.to_owned(), Vec::new());
    }
    let mut text = content.to_owned();
    let mut found: Vec<(usize, &'static str)> = Vec::new();
    for d in DETECTORS.iter() {
        if let Some(m) = d.pattern.find(&text) {
            found.push((m.start(), d.kind));
            text = d
                .pattern
                .replace_all(&text, format!("[REDACTED:{}]", d.kind).as_str())
                .into_owned();
        }
    }
    found.sort_by_key(|(start, _)| *start);
    let mut kinds: Vec<&'static str> = Vec::new();
    for (_, kind) in found {
        if !kinds.contains(&kind) {
            kinds.push(kind);
        }
    }
    (text, kinds)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Synthetic secrets in each format (none of them is a real credential).
    pub(crate) fn samples() -> Vec<(&'static str, String)> {
        let a40 = "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8s9T0";
        vec![
            ("private key", "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7bq\n-----END RSA PRIVATE KEY-----".to_owned()),
            ("private key", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n".to_owned()),
            ("private key", "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBg\n-----END PRIVATE KEY-----".to_owned()),
            ("GCP service account key", r#"{"type": "service_account", "project_id": "p", "private_key": "-----BEGIN"}"#.to_owned()),
            ("AWS access key", "aws_access_key_id = AKIAIOSFODNN7EXAMPLE".to_owned()),
            ("AWS secret access key", format!("aws_secret_access_key = {a40}")),
            ("Google API key", "key=AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q".to_owned()),
            ("Anthropic API key", format!("sk-ant-api03-{}", "x".repeat(93))),
            ("OpenAI API key", format!("OPENAI_API_KEY=sk-proj-{}", "Ab3".repeat(20))),
            ("OpenAI API key", "sk-abcdefghij0123456789T3BlbkFJabcdefghij0123456789".to_owned()),
            ("GitHub token", format!("token: ghp_{}", "A1b2".repeat(9))),
            ("GitHub token", format!("github_pat_{}", "a".repeat(82))),
            ("GitLab token", "glpat-xXyYzZ0123456789abcd".to_owned()),
            ("Slack token", "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx".to_owned()),
            ("Slack webhook", "https://hooks.slack.com/services/T0123ABCD/B0123ABCD/abcdefghijklmnopqrstuvwx".to_owned()),
            ("Stripe key", format!("sk_live_{}", "4eC39HqLyjWDarjtT1zdp7dc")),
            ("npm token", format!("//registry.npmjs.org/:_authToken=npm_{}", "a1B2".repeat(9))),
            ("PyPI token", format!("pypi-AgEIcHlwaS5vcmc{}", "C".repeat(60))),
            ("SendGrid API key", format!("SG.{}.{}", "a".repeat(22), "b".repeat(43))),
            ("JSON Web Token", "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U".to_owned()),
        ]
    }

    #[test]
    fn every_detector_finds_its_format() {
        for (kind, text) in samples() {
            assert_eq!(find(&text), Some(kind), "{text}");
            let (redacted, kinds) = redact(&text);
            assert_eq!(kinds, [kind], "{text}");
            assert!(
                redacted.contains(&format!("[REDACTED:{kind}]")),
                "{redacted}"
            );
            assert_eq!(find(&redacted), None, "{redacted}");
        }
    }

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
        let text = format!(
            "a AKIAIOSFODNN7EXAMPLE b ghp_{} c AKIAIOSFODNN7EXAMPLF",
            "A1b2".repeat(9)
        );
        let (redacted, kinds) = redact(&text);
        assert_eq!(kinds, ["AWS access key", "GitHub token"]);
        assert_eq!(
            redacted,
            "a [REDACTED:AWS access key] b [REDACTED:GitHub token] c [REDACTED:AWS access key]"
        );
        assert_eq!("redact".parse::<SecretPolicy>(), Ok(SecretPolicy::Redact));
        assert!("nope".parse::<SecretPolicy>().is_err());
    }
}
