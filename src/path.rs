//! Memory paths: the one place where model input becomes a key.
//!
//! [`MemoryPath::parse`] applies PROTOCOL.md's path rules, in the order of its table, to the
//! NFC-normalized input and yields a canonical, validated path. Nothing else in memkv looks at a
//! raw path string, so no input can name anything but a location inside the caller's own
//! `/memories` tree: there is no `..`, no separator inside a segment, and no way to spell a host
//! path. This module does no I/O.

use std::fmt;

use unicode_normalization::UnicodeNormalization;
use unicode_properties::{GeneralCategory, UnicodeGeneralCategory};

/// The root of every user's tree, as the model spells it.
pub const ROOT: &str = "/memories";

/// The memory-stores API's spelling of a model path: relative to the store's root
/// (`/memories/notes.md` → `/notes.md`, the root itself → `/`; a prefix keeps its trailing `/`).
pub fn api_path(model: &str) -> String {
    match model.strip_prefix(ROOT) {
        Some("") => "/".to_owned(),
        Some(rest) if rest.starts_with('/') => rest.to_owned(),
        _ => model.to_owned(),
    }
}

/// The model's path of a memory-stores API path (`/notes.md` → `/memories/notes.md`); `None`
/// when it does not start with `/` or names the root itself. The path rules proper are
/// [`MemoryPath`]'s.
pub fn model_path(api: &str) -> Option<String> {
    (api.starts_with('/') && api != "/").then(|| format!("{ROOT}{api}"))
}

/// The model's directory of an API `path_prefix` (`/notes/` → `/memories/notes`, `/` →
/// `/memories`); `None` unless it starts and ends with `/`.
pub fn model_dir(prefix: &str) -> Option<String> {
    if !prefix.starts_with('/') || !prefix.ends_with('/') {
        return None;
    }
    Some(format!("{ROOT}{}", &prefix[..prefix.len() - 1]))
}

/// Longest accepted path, in UTF-8 bytes of its NFC form.
pub const MAX_PATH_BYTES: usize = 1024;
/// Most segments below `/memories`.
pub const MAX_DEPTH: usize = 20;
/// Longest accepted segment, in UTF-8 bytes.
pub const MAX_SEGMENT_BYTES: usize = 255;

/// Why a path was rejected, one variant per row of PROTOCOL.md's path table (in its order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PathError {
    /// Not `/memories` and not below `/memories/`.
    #[error("path must start with /memories")]
    OutsideRoot,
    /// A `.` or `..` segment, possibly percent-encoded.
    #[error("'.' and '..' segments are not allowed")]
    DotSegment,
    /// An empty segment (`//`).
    #[error("empty path segment")]
    EmptySegment,
    /// A backslash, or a percent-escape that decodes to `/` or `\`.
    #[error("'\\' and encoded separators are not allowed")]
    Separator,
    /// A control character, a Unicode format character, U+2028 or U+2029.
    #[error("control and format characters are not allowed")]
    ControlCharacter,
    /// Over [`MAX_PATH_BYTES`], [`MAX_DEPTH`] or [`MAX_SEGMENT_BYTES`].
    #[error("too long")]
    TooLong,
}

/// A validated, canonical memory path: `/memories` or `/memories/seg/seg…`.
///
/// Segments are NFC-normalized, non-empty, free of `/`, `\`, control and format characters, and
/// neither `.` nor `..` in any percent-encoded spelling. Ordering and equality are those of the
/// segment lists.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MemoryPath {
    segments: Vec<String>,
}

impl MemoryPath {
    /// The root, `/memories`.
    pub fn root() -> Self {
        MemoryPath {
            segments: Vec::new(),
        }
    }

    /// Validates `input` as the model sent it and returns its canonical form.
    ///
    /// # Errors
    /// The first rule of PROTOCOL.md's path table that the NFC form of `input` breaks.
    pub fn parse(input: &str) -> Result<Self, PathError> {
        // ASCII text is already in NFC: skip the normalizer on the common path.
        let normalized: String = if input.is_ascii() {
            input.to_owned()
        } else {
            input.nfc().collect()
        };
        let rest = normalized
            .strip_prefix(ROOT)
            .filter(|rest| rest.is_empty() || rest.starts_with('/'))
            .ok_or(PathError::OutsideRoot)?;
        // One trailing `/` is accepted and ignored.
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        let segments: Vec<&str> = if rest.is_empty() {
            Vec::new()
        } else {
            rest[1..].split('/').collect()
        };
        let decoded: Vec<Vec<u8>> = segments.iter().map(|s| percent_decode_fully(s)).collect();

        if decoded.iter().any(|d| d == b"." || d == b"..") {
            return Err(PathError::DotSegment);
        }
        if segments.iter().any(|s| s.is_empty()) {
            return Err(PathError::EmptySegment);
        }
        if segments.iter().any(|s| s.contains('\\'))
            || decoded
                .iter()
                .any(|d| d.contains(&b'/') || d.contains(&b'\\'))
        {
            return Err(PathError::Separator);
        }
        if normalized.chars().any(is_forbidden_char) {
            return Err(PathError::ControlCharacter);
        }
        // The length of the canonical path: a trailing `/` does not count.
        if ROOT.len() + rest.len() > MAX_PATH_BYTES
            || segments.len() > MAX_DEPTH
            || segments.iter().any(|s| s.len() > MAX_SEGMENT_BYTES)
        {
            return Err(PathError::TooLong);
        }
        Ok(MemoryPath {
            segments: segments.into_iter().map(str::to_owned).collect(),
        })
    }

    /// Builds a path from segments that are already valid (taken from a stored key).
    ///
    /// The result is re-validated as a whole, so a corrupt key cannot smuggle in a bad path.
    pub fn from_segments<I, S>(segments: I) -> Result<Self, PathError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut text = String::from(ROOT);
        for s in segments {
            text.push('/');
            text.push_str(s.as_ref());
        }
        let path = Self::parse(&text)?;
        // `parse` strips one trailing `/`, which an empty last segment would become.
        if path.to_string() != text {
            return Err(PathError::EmptySegment);
        }
        Ok(path)
    }

    /// Whether this is `/memories` itself.
    pub fn is_root(&self) -> bool {
        self.segments.is_empty()
    }

    /// The segments below `/memories`.
    pub fn segments(&self) -> &[String] {
        &self.segments
    }

    /// The last segment; `None` for the root.
    pub fn name(&self) -> Option<&str> {
        self.segments.last().map(String::as_str)
    }

    /// The parent directory; `None` for the root.
    pub fn parent(&self) -> Option<MemoryPath> {
        let (_, init) = self.segments.split_last()?;
        Some(MemoryPath {
            segments: init.to_vec(),
        })
    }

    /// Every proper ancestor, from `/memories` down to the parent.
    pub fn ancestors(&self) -> impl Iterator<Item = MemoryPath> + '_ {
        (0..self.segments.len()).map(|n| MemoryPath {
            segments: self.segments[..n].to_vec(),
        })
    }

    /// The child named `name` (which must be a valid segment).
    pub fn join(&self, name: &str) -> Result<MemoryPath, PathError> {
        Self::from_segments(self.segments.iter().map(String::as_str).chain([name]))
    }

    /// The child named `name`, a name read back from the index (valid unless the file is
    /// damaged, which `memkv check` reports). Cheaper than [`Self::join`], which validates; used
    /// on hot read paths.
    pub(crate) fn child(&self, name: &str) -> MemoryPath {
        let mut segments = Vec::with_capacity(self.segments.len() + 1);
        segments.extend_from_slice(&self.segments);
        segments.push(name.to_owned());
        MemoryPath { segments }
    }

    /// Whether `self` lies strictly below `other`.
    pub fn is_strictly_inside(&self, other: &MemoryPath) -> bool {
        self.segments.len() > other.segments.len() && self.segments.starts_with(&other.segments)
    }

    /// `self` with its prefix `from` replaced by `to`; `None` if `self` is not `from` or below it.
    /// The result is validated, so a move that would make a path too long is refused.
    pub fn rebase(
        &self,
        from: &MemoryPath,
        to: &MemoryPath,
    ) -> Option<Result<MemoryPath, PathError>> {
        let rest = self.segments.strip_prefix(from.segments.as_slice())?;
        Some(Self::from_segments(to.segments.iter().chain(rest)))
    }
}

impl fmt::Display for MemoryPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(ROOT)?;
        for s in &self.segments {
            f.write_str("/")?;
            f.write_str(s)?;
        }
        Ok(())
    }
}

impl fmt::Debug for MemoryPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MemoryPath({self})")
    }
}

/// C0, DEL, C1, category Cf (zero-width, bidi controls, BOM …), and the line/paragraph separators.
/// Refused in paths and in user ids alike.
pub fn is_forbidden_char(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_control();
    }
    c.is_control()
        || c == '\u{2028}'
        || c == '\u{2029}'
        || c.general_category() == GeneralCategory::Format
}

/// Decodes `%XX` escapes until none is left, so `%252e` is `.` too. Invalid escapes stay literal.
fn percent_decode_fully(segment: &str) -> Vec<u8> {
    let mut current = segment.as_bytes().to_vec();
    // Each round shrinks the input or stops, so this ends; the bound is a second guard.
    for _ in 0..segment.len() {
        let next = percent_decode_once(&current);
        if next == current {
            break;
        }
        current = next;
    }
    current
}

fn percent_decode_once(input: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(input.len());
    let mut i = 0;
    while i < input.len() {
        if input[i] == b'%'
            && i + 2 < input.len()
            && let (Some(h), Some(l)) = (hex(input[i + 1]), hex(input[i + 2]))
        {
            out.push((h << 4) | l);
            i += 3;
            continue;
        }
        out.push(input[i]);
        i += 1;
    }
    out
}

fn hex(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn err(p: &str) -> PathError {
        MemoryPath::parse(p).unwrap_err()
    }

    #[test]
    fn accepts_root_spellings() {
        assert!(MemoryPath::parse("/memories").unwrap().is_root());
        assert!(MemoryPath::parse("/memories/").unwrap().is_root());
    }

    #[test]
    fn canonical_form_drops_one_trailing_slash() {
        let p = MemoryPath::parse("/memories/a/b.md/").unwrap();
        assert_eq!(p.to_string(), "/memories/a/b.md");
        assert_eq!(p.segments(), ["a", "b.md"]);
        assert_eq!(err("/memories/a//"), PathError::EmptySegment);
        assert_eq!(err("/memories//"), PathError::EmptySegment);
    }

    #[test]
    fn rejects_outside_root() {
        for p in [
            "",
            "memories",
            "/memoriesX/a",
            "/memorie",
            "a/b",
            "/tmp/x",
            "//memories",
        ] {
            assert_eq!(err(p), PathError::OutsideRoot, "{p:?}");
        }
    }

    #[test]
    fn rejects_dot_segments_in_every_spelling() {
        for p in [
            "/memories/.",
            "/memories/..",
            "/memories/a/../b",
            "/memories/%2e",
            "/memories/%2E%2e",
            "/memories/.%2E/x",
            "/memories/%252e%252E",
            "/memories/%25252e",
        ] {
            assert_eq!(err(p), PathError::DotSegment, "{p:?}");
        }
        // Dots inside a name are fine.
        assert!(MemoryPath::parse("/memories/.hidden").is_ok());
        assert!(MemoryPath::parse("/memories/a..b").is_ok());
        assert!(MemoryPath::parse("/memories/...").is_ok());
    }

    #[test]
    fn rejects_separators() {
        for p in [
            "/memories/a\\b",
            "/memories/%2f",
            "/memories/a%2Fb",
            "/memories/%5c",
            "/memories/%255C",
        ] {
            assert_eq!(err(p), PathError::Separator, "{p:?}");
        }
    }

    #[test]
    fn rejects_control_and_format_characters() {
        for c in [
            '\0', '\n', '\u{7f}', '\u{85}', '\u{9f}', '\u{200b}', '\u{202e}', '\u{feff}',
            '\u{2028}', '\u{2029}',
        ] {
            assert_eq!(
                err(&format!("/memories/a{c}b")),
                PathError::ControlCharacter,
                "{c:?}"
            );
        }
    }

    #[test]
    fn rejects_long_paths() {
        let seg = "a".repeat(255);
        assert!(MemoryPath::parse(&format!("/memories/{seg}")).is_ok());
        assert_eq!(err(&format!("/memories/{seg}a")), PathError::TooLong);
        let deep20 = "/x".repeat(20);
        assert!(MemoryPath::parse(&format!("/memories{deep20}")).is_ok());
        assert_eq!(err(&format!("/memories{deep20}/x")), PathError::TooLong);
        let long = format!("/memories/{}", vec!["b".repeat(200); 6].join("/"));
        assert!(long.len() > MAX_PATH_BYTES);
        assert_eq!(err(&long), PathError::TooLong);
        // The limit applies to the canonical path: a trailing `/` does not count toward it.
        let base = format!("/memories/{}/", vec!["d".repeat(200); 4].join("/"));
        let exact = format!("{base}{}", "e".repeat(MAX_PATH_BYTES - base.len()));
        assert_eq!(exact.len(), MAX_PATH_BYTES);
        assert_eq!(MemoryPath::parse(&exact).unwrap().to_string(), exact);
        assert_eq!(
            MemoryPath::parse(&format!("{exact}/")).unwrap().to_string(),
            exact
        );
        assert_eq!(err(&format!("{exact}f/")), PathError::TooLong);
    }

    #[test]
    fn rules_apply_in_table_order() {
        // Both a dot segment and an empty segment: the dot rule comes first.
        assert_eq!(err("/memories//.."), PathError::DotSegment);
        // Empty segment before backslash, backslash before control characters.
        assert_eq!(err("/memories//a\\b"), PathError::EmptySegment);
        assert_eq!(err("/memories/a\\b/\u{0}"), PathError::Separator);
        let long_ctrl = format!("/memories/{}\u{1}", "a".repeat(300));
        assert_eq!(err(&long_ctrl), PathError::ControlCharacter);
    }

    #[test]
    fn percent_is_literal_otherwise() {
        let p = MemoryPath::parse("/memories/100%.md").unwrap();
        assert_eq!(p.name(), Some("100%.md"));
        assert_eq!(
            MemoryPath::parse("/memories/%41").unwrap().name(),
            Some("%41")
        );
        assert!(MemoryPath::parse("/memories/%").is_ok());
        assert!(MemoryPath::parse("/memories/a%2").is_ok());
    }

    #[test]
    fn composed_and_decomposed_are_one_path() {
        let composed = MemoryPath::parse("/memories/caf\u{e9}.md").unwrap();
        let decomposed = MemoryPath::parse("/memories/cafe\u{301}.md").unwrap();
        assert_eq!(composed, decomposed);
        assert_eq!(decomposed.to_string(), "/memories/caf\u{e9}.md");
    }

    #[test]
    fn case_is_significant() {
        assert_ne!(
            MemoryPath::parse("/memories/A").unwrap(),
            MemoryPath::parse("/memories/a").unwrap()
        );
    }

    #[test]
    fn structure_helpers() {
        let p = MemoryPath::parse("/memories/a/b/c").unwrap();
        assert_eq!(p.parent().unwrap().to_string(), "/memories/a/b");
        let anc: Vec<String> = p.ancestors().map(|a| a.to_string()).collect();
        assert_eq!(anc, ["/memories", "/memories/a", "/memories/a/b"]);
        let a = MemoryPath::parse("/memories/a").unwrap();
        assert!(p.is_strictly_inside(&a));
        assert!(!a.is_strictly_inside(&a));
        assert!(
            !MemoryPath::parse("/memories/ab")
                .unwrap()
                .is_strictly_inside(&a)
        );
        let x = MemoryPath::parse("/memories/x").unwrap();
        assert_eq!(
            p.rebase(&a, &x).unwrap().unwrap().to_string(),
            "/memories/x/b/c"
        );
        assert!(x.rebase(&a, &p).is_none());
        assert_eq!(
            MemoryPath::from_segments(["a", ""]),
            Err(PathError::EmptySegment)
        );
        assert_eq!(
            MemoryPath::from_segments(["a", ".."]),
            Err(PathError::DotSegment)
        );
    }

    fn segment() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-zA-Z0-9_.%-]{1,12}",
            "[\\PC]{1,6}",
            Just("..".to_owned()),
            Just("%2e".to_owned()),
            Just("a\\b".to_owned()),
            Just("e\u{301}".to_owned()),
        ]
    }

    fn raw_path() -> impl Strategy<Value = String> {
        (
            prop_oneof![
                Just("/memories"),
                Just("/memories/"),
                Just("/memoriesx"),
                Just("")
            ],
            prop::collection::vec(segment(), 0..6),
            any::<bool>(),
        )
            .prop_map(|(prefix, segs, slash)| {
                let mut p = prefix.to_owned();
                for s in segs {
                    if !p.ends_with('/') {
                        p.push('/');
                    }
                    p.push_str(&s);
                }
                if slash {
                    p.push('/');
                }
                p
            })
    }

    proptest! {
        #[test]
        fn accepted_paths_stay_inside_and_round_trip(raw in raw_path()) {
            if let Ok(p) = MemoryPath::parse(&raw) {
                let text = p.to_string();
                prop_assert!(text == ROOT || text.starts_with("/memories/"));
                for s in p.segments() {
                    prop_assert!(!s.is_empty());
                    prop_assert!(s != "." && s != "..");
                    prop_assert!(!s.contains('/') && !s.contains('\\'));
                    let d = percent_decode_fully(s);
                    prop_assert!(d != b"." && d != b"..");
                }
                // The canonical form parses to itself.
                prop_assert_eq!(MemoryPath::parse(&text).unwrap(), p.clone());
                prop_assert_eq!(MemoryPath::from_segments(p.segments()).unwrap(), p);
            }
        }

        #[test]
        fn nfc_and_nfd_spellings_agree(raw in raw_path()) {
            use unicode_normalization::UnicodeNormalization;
            let nfd: String = raw.nfd().collect();
            prop_assert_eq!(MemoryPath::parse(&raw), MemoryPath::parse(&nfd));
        }

        #[test]
        fn parse_never_panics(raw in "\\PC{0,40}") {
            let _ = MemoryPath::parse(&raw);
        }
    }
}
