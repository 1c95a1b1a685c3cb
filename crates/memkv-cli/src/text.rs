//! Text for the operator's terminal. Every control or format character in what memkv prints as
//! its own text (tables, rows, search results, messages) is escaped, as fd does with file names,
//! so that no stored string (an actor, a receiver's error, a line of a memory) can move the
//! cursor, change colours or forge a line: ESC prints as `\u{1b}`. What is raw by design is left
//! alone: `cat` and `export` print content as stored, `--json` escapes by JSON's rules.

use std::borrow::Cow;

/// `s` for one line of output: a tab stays, every other control or format character (line
/// breaks included) is escaped.
pub fn safe(s: &str) -> Cow<'_, str> {
    escape(s, |c| c == '\t')
}

/// `s` for several lines of output: tabs and line feeds stay, every other control or format
/// character (a carriage return included) is escaped.
pub fn safe_lines(s: &str) -> Cow<'_, str> {
    escape(s, |c| c == '\t' || c == '\n')
}

fn escape(s: &str, keep: impl Fn(char) -> bool) -> Cow<'_, str> {
    let escaped = |c: char| memkv::path::is_forbidden_char(c) && !keep(c);
    if !s.chars().any(escaped) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if escaped(c) {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_and_format_characters_are_escaped_and_the_rest_kept() {
        assert_eq!(safe("plain ü ✓\tx"), "plain ü ✓\tx");
        assert!(matches!(safe("plain"), Cow::Borrowed(_)));
        assert_eq!(
            safe("a\u{1b}[31mred\nfake row\r\u{7f}\u{9b}\u{202e}"),
            "a\\u{1b}[31mred\\u{a}fake row\\u{d}\\u{7f}\\u{9b}\\u{202e}"
        );
        assert_eq!(safe_lines("one\ntwo\r\n\u{1b}"), "one\ntwo\\u{d}\n\\u{1b}");
    }
}
