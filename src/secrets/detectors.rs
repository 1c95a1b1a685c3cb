//! The detectors: each a documented, structured credential format (a fixed prefix, a fixed
//! length, a checksum-like marker, or a fixed context such as `AccountKey=`), and a check that
//! turns a match into the exact span of the secret, or drops it (a placeholder, a vendor's
//! published example, a header with no key after it).

use std::ops::Range;

use regex::bytes::{Captures, Regex};

/// One credential format.
pub(super) struct Detector {
    /// The name the model and the operator read: `[REDACTED:<kind>]`.
    pub kind: &'static str,
    /// The match; the capture group `s`, when present, is the secret itself and the rest is
    /// context that must stay in the text.
    pub pattern: Regex,
    /// The span of the secret in this match, or `None` when the match is not a secret.
    pub check: fn(&Captures<'_>, &str) -> Option<Range<usize>>,
}

// Secrets are ASCII: every pattern is compiled without Unicode (`(?-u)`, over the content's
// bytes), so the automata stay small on any text, and ASCII classes and word boundaries are
// what the formats mean anyway. Every secret span starts and ends next to ASCII characters,
// hence on character boundaries. A secret that may end in a non-word character (`/`, `+`, `-`, `=`) cannot end at `\b`: its end is the
// next character outside its alphabet (consumed by the match, outside the `s` group).
const END_TOKEN: &str = r"(?:[^A-Za-z0-9_\-]|\z)";
const END_BASE64: &str = r"(?:[^A-Za-z0-9+/=]|\z)";
/// A line break, raw or escaped inside a JSON string.
const NL: &str = r"(?:\r?\n|(?:\\r)?\\n)";

fn pem() -> String {
    let label = r"(?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?";
    format!(
        // Header; optional armour headers (`Proc-Type: …`, `Version: …`) and a blank line; body
        // lines of base64; optionally the END line.
        r"-----BEGIN {label}-----[ \t]*{NL}?(?:[A-Za-z][A-Za-z-]*: [^\r\n\\]*{NL})*(?:[ \t]*{NL})?(?P<body>(?:[A-Za-z0-9+/=]+[ \t]*{NL})*[A-Za-z0-9+/=]*)(?P<end>(?:[ \t]*{NL})?-----END {label}-----)?"
    )
}

/// The detectors, most specific first: where two matches overlap, the earlier detector names
/// the merged span.
pub(super) fn detectors() -> Vec<Detector> {
    let d = |kind, pattern: &str, check| Detector {
        kind,
        pattern: Regex::new(&format!("(?-u){pattern}")).expect("detector patterns are valid"),
        check,
    };
    let plain: fn(&Captures<'_>, &str) -> Option<Range<usize>> = plain;
    vec![
        d(
            "GCP service account key",
            &format!(r#""private_key"[ \t]*:[ \t]*"(?P<s>{})"#, pem()),
            pem_key,
        ),
        d("private key", &pem(), pem_key),
        d(
            "AWS access key",
            r"\b(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}\b",
            plain,
        ),
        d(
            "AWS secret access key",
            &format!(
                r#"(?i:secret[_-]?access[_-]?key|aws[_-]?secret(?:[_-]?key)?)["']?[ \t]*(?:[:=]|=>)[ \t]*["']?(?P<s>[A-Za-z0-9/+]{{40}}){END_BASE64}"#
            ),
            plain,
        ),
        d(
            "Azure storage account key",
            &format!(
                r#"(?i:AccountKey|(?:storage|account)[_-]?(?:account[_-]?)?(?:access[_-]?)?key)["']?[ \t]*[:=][ \t]*["']?(?P<s>[A-Za-z0-9+/]{{86}}==){END_BASE64}"#
            ),
            azure_key,
        ),
        d(
            "Azure storage account key",
            &format!(
                r"(?:\A|[^A-Za-z0-9+/=])(?P<s>[A-Za-z0-9+/]{{76}}\+ASt[A-Za-z0-9+/]{{5}}[AQgw]==){END_BASE64}"
            ),
            azure_key,
        ),
        d(
            "Google API key",
            &format!(r"\b(?P<s>AIza[0-9A-Za-z_\-]{{35}}){END_TOKEN}"),
            plain,
        ),
        d(
            "Google OAuth client secret",
            &format!(r"\b(?P<s>GOCSPX-[0-9A-Za-z_\-]{{28}}){END_TOKEN}"),
            plain,
        ),
        d(
            "Anthropic API key",
            &format!(r"\b(?P<s>sk-ant-(?:api|admin)\d{{2}}-[A-Za-z0-9_\-]{{80,120}}){END_TOKEN}"),
            plain,
        ),
        d(
            "OpenAI API key",
            &format!(
                r"\b(?P<s>sk-(?:(?:proj|svcacct|admin)-[A-Za-z0-9_\-]{{40,}}|[A-Za-z0-9]{{20}}T3BlbkFJ[A-Za-z0-9]{{20}})){END_TOKEN}"
            ),
            plain,
        ),
        d(
            "Hugging Face token",
            r"\b(?:hf|api_org)_[A-Za-z0-9]{34}\b",
            plain,
        ),
        d(
            "GitHub token",
            r"\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{82})\b",
            plain,
        ),
        d(
            "GitLab token",
            &format!(
                r"\b(?P<s>(?:(?:glpat|glrt|gldt|glptt|glcbt|glft|glimt|glagent|gloas|glsoat|glffct)-[A-Za-z0-9_\-]{{20,}}(?:\.[0-9a-z]{{9}})?|GR1348941[A-Za-z0-9_\-]{{20,}})){END_TOKEN}"
            ),
            plain,
        ),
        d(
            "Slack token",
            r"\bxox[abposr]-(?:[0-9]+-)+[A-Za-z0-9-]{10,}",
            plain,
        ),
        d(
            "Slack app token",
            r"\bxapp-\d-[A-Z0-9]+-\d+-[A-Za-z0-9]{20,}\b",
            plain,
        ),
        d(
            "Slack webhook",
            r"https://hooks\.slack\.com/(?:services|workflows|triggers)/T[A-Z0-9]{6,}/[A-Z0-9]{6,}/[A-Za-z0-9]{20,}",
            plain,
        ),
        d(
            "Stripe key",
            r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{20,}\b",
            stripe_key,
        ),
        d(
            "Stripe webhook secret",
            r"\bwhsec_[A-Za-z0-9]{24,}\b",
            plain,
        ),
        d("npm token", r"\bnpm_[A-Za-z0-9]{36}\b", plain),
        d(
            "PyPI token",
            &format!(r"\b(?P<s>pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_\-]{{50,}}){END_TOKEN}"),
            plain,
        ),
        d(
            "SendGrid API key",
            &format!(r"\b(?P<s>SG\.[A-Za-z0-9_\-]{{22}}\.[A-Za-z0-9_\-]{{43}}){END_TOKEN}"),
            plain,
        ),
        d("Twilio API key", r"\bSK[0-9a-f]{32}\b", plain),
        d(
            "Twilio auth token",
            r#"(?i:twilio)[A-Za-z0-9_.-]{0,30}?(?i:auth[_-]?token|secret)["']?[ \t]*[:=][ \t]*["']?(?P<s>[0-9a-fA-F]{32})\b"#,
            plain,
        ),
        d(
            "Telegram bot token",
            // A bot id is often glued to a word (`/bot123456789:AA…` in API URLs).
            &format!(r"(?:\A|[^0-9])(?P<s>[0-9]{{8,10}}:AA[A-Za-z0-9_\-]{{33}}){END_TOKEN}"),
            plain,
        ),
        d("DigitalOcean token", r"\bdo[opr]_v1_[a-f0-9]{64}\b", plain),
        d(
            "Shopify token",
            r"\bshp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}\b",
            plain,
        ),
        d(
            "Databricks token",
            r"\bdapi[a-f0-9]{32}(?:-[0-9])?\b",
            plain,
        ),
        d(
            "Mailgun API key",
            r"\b(?:key-[a-f0-9]{32}|[a-f0-9]{32}-[a-f0-9]{8}-[a-f0-9]{8})\b",
            plain,
        ),
        d(
            "Discord bot token",
            &format!(
                r"\b(?P<s>(?P<id>[MNO][A-Za-z0-9]{{22,25}})\.[A-Za-z0-9_\-]{{6}}\.[A-Za-z0-9_\-]{{27,38}}){END_TOKEN}"
            ),
            discord_token,
        ),
        d(
            "Discord webhook",
            &format!(
                r"https://(?:(?:ptb|canary)\.)?discord(?:app)?\.com/api/webhooks/[0-9]{{17,20}}/(?P<s>[A-Za-z0-9_\-]{{60,68}}){END_TOKEN}"
            ),
            plain,
        ),
        d(
            "database password",
            r"\b(?i:postgres(?:ql)?|mysql|mariadb|mongodb(?:\+srv)?|rediss?|amqps?|mssql|sqlserver|cockroachdb|clickhouse|oracle)(?:\+[a-z0-9]+)?://[^\s:/@]*:(?P<s>[^\s/@]+)@",
            database_password,
        ),
        d(
            "JSON Web Token",
            r"\beyJ[A-Za-z0-9_\-]{10,}\.eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}",
            plain,
        ),
    ]
}

/// The secret's span: the `s` group, or the whole match.
fn span(caps: &Captures<'_>) -> Range<usize> {
    caps.name("s")
        .unwrap_or_else(|| caps.get(0).expect("group 0 always matches"))
        .range()
}

/// The match is the secret unless it is a placeholder.
fn plain(caps: &Captures<'_>, content: &str) -> Option<Range<usize>> {
    let range = span(caps);
    (!placeholder(content.get(range.clone())?)).then_some(range)
}

/// Documentation placeholders and vendors' published examples (`AKIAIOSFODNN7EXAMPLE`,
/// `ghp_xxxxxxxx…`, `AKIA1234567890ABCDEF`): an `EXAMPLE` marker, a long run of one
/// character, a counting sequence, or too few distinct characters for a random key.
pub(super) fn placeholder(secret: &str) -> bool {
    if secret.contains("EXAMPLE") || secret.contains("example") {
        return true;
    }
    if ["0123456789", "1234567890", "abcdefghij", "ABCDEFGHIJ"]
        .iter()
        .any(|run| secret.contains(run))
    {
        return true;
    }
    let bytes = secret.as_bytes();
    let mut longest = 0;
    let mut current = 0;
    let mut seen = [false; 256];
    for (i, &b) in bytes.iter().enumerate() {
        current = if i > 0 && bytes[i - 1] == b {
            current + 1
        } else {
            1
        };
        longest = longest.max(current);
        seen[b as usize] = true;
    }
    let distinct = seen.iter().filter(|&&s| s).count();
    longest >= 8 || (bytes.len() >= 16 && distinct < 8)
}

/// A private-key block: a body of real length (at least 64 base64 characters, or 16 before an
/// END line). Without an END line the span stops at the last whole body line, so text that
/// goes on after the key on the same line stays.
fn pem_key(caps: &Captures<'_>, content: &str) -> Option<Range<usize>> {
    let body = caps.name("body").expect("the PEM pattern has a body group");
    let count = |text: &str| {
        text.replace("\\r", "")
            .replace("\\n", "")
            .bytes()
            .filter(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='))
            .count()
    };
    let base64 = count(content.get(body.range())?);
    let mut range = span(caps);
    if caps.name("end").is_some() {
        return (base64 >= 16).then_some(range);
    }
    if base64 < 64 {
        return None;
    }
    // Without an END line the body's last "line" may be the first word of ordinary text on
    // the next line (`…\nThen run ssh-add`): it is not the key's.
    let next = content.get(range.end..)?.chars().next();
    if next.is_some_and(|c| !matches!(c, '\n' | '\r' | '\\' | '"')) {
        let body = content.get(body.start()..range.end)?;
        let tail = body
            .rfind('\n')
            .map(|i| i + 1)
            .max(body.rfind("\\n").map(|i| i + 2))
            .unwrap_or(0);
        if count(&body[..tail]) >= 64 {
            range.end -= body.len() - tail;
        }
    }
    // The line break after the last line is not part of the secret.
    loop {
        let kept = content.get(range.clone())?;
        let trimmed = kept
            .trim_end_matches(['\n', '\r', ' ', '\t'])
            .trim_end_matches("\\n")
            .trim_end_matches("\\r");
        if trimmed.len() == kept.len() {
            break;
        }
        range.end = range.start + trimmed.len();
    }
    Some(range)
}

/// A Stripe key, except the test key Stripe publishes in its own documentation.
fn stripe_key(caps: &Captures<'_>, content: &str) -> Option<Range<usize>> {
    plain(caps, content).filter(|r| &content[r.clone()] != "sk_test_4eC39HqLyjWDarjtT1zdp7dc")
}

/// An Azure storage key, except the Azurite emulator's well-known development key.
fn azure_key(caps: &Captures<'_>, content: &str) -> Option<Range<usize>> {
    const AZURITE: &str =
        "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";
    plain(caps, content).filter(|r| &content[r.clone()] != AZURITE)
}

/// A Discord bot token starts with the bot's numeric id in base64: the first segment must
/// decode to ASCII digits, which sets it apart from dotted identifiers.
fn discord_token(caps: &Captures<'_>, content: &str) -> Option<Range<usize>> {
    let id = caps
        .name("id")
        .expect("the Discord pattern has an id group");
    let bytes = id.as_bytes();
    let value = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        _ => 0,
    };
    // Every whole group of four characters decodes to three bytes.
    let digits = bytes.chunks_exact(4).all(|q| {
        let n = q
            .iter()
            .fold(0u32, |acc, &c| (acc << 6) | u32::from(value(c)));
        [n >> 16, n >> 8, n]
            .iter()
            .all(|&b| ((b & 0xff) as u8).is_ascii_digit())
    });
    if digits { plain(caps, content) } else { None }
}

/// A database URL's password, unless it is a placeholder (`password`, `<password>`,
/// `${DB_PASSWORD}`, `****`) or a local default (`postgres:postgres@`).
fn database_password(caps: &Captures<'_>, content: &str) -> Option<Range<usize>> {
    let s = caps
        .name("s")
        .expect("the URL pattern has a password group");
    let p = content.get(s.range())?;
    let lower = p.to_ascii_lowercase();
    let words = [
        "password",
        "passwd",
        "pass",
        "pwd",
        "pw",
        "secret",
        "changeme",
        "change_me",
        "mypassword",
        "yourpassword",
        "your_password",
        "your-password",
        "postgres",
        "mysql",
        "redis",
        "root",
        "admin",
        "guest",
        "test",
        "user",
        "example",
    ];
    let wrapped = |open: &str, close: &str| {
        p.len() > open.len() + close.len() && p.starts_with(open) && p.ends_with(close)
    };
    let variable = |name: &str| {
        name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
    };
    let templated = wrapped("<", ">")
        || wrapped("[", "]")
        || wrapped("{", "}")
        || wrapped("${", "}")
        || wrapped("%(", ")s")
        || wrapped("%", "%")
        || p.strip_prefix('$').is_some_and(variable)
        || p.bytes().all(|b| matches!(b, b'x' | b'X' | b'*' | b'.'));
    if templated || words.contains(&lower.as_str()) || placeholder(p) {
        None
    } else {
        Some(s.range())
    }
}
