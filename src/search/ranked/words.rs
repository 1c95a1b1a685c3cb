//! The words of ranked search: Unicode word boundaries (UAX #29, `unicode-segmentation`), each
//! lowercased. Used for the index (as a tantivy tokenizer), for the query, and to pick a memory's
//! best lines, so all three agree on what a word is.

use tantivy::tokenizer::{Token, TokenStream, Tokenizer};
use unicode_segmentation::UnicodeSegmentation;

/// The tokenizer's name in each index.
pub(super) const TOKENIZER: &str = "memkv_words";

/// Words longer than this many bytes are left out (as tantivy's `RemoveLongFilter` leaves out
/// tokens no one searches for: a base64 blob, a long hash).
const MAX_WORD_BYTES: usize = 64;

/// The words of `text`, lowercased, in order.
pub(super) fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.unicode_words()
        .filter(|w| w.len() <= MAX_WORD_BYTES)
        .map(str::to_lowercase)
}

/// The words of `text` as they are written (not lowercased), in order: [`words`] before its
/// lowercasing.
pub(super) fn raw_words(text: &str) -> impl Iterator<Item = &str> + '_ {
    text.unicode_words().filter(|w| w.len() <= MAX_WORD_BYTES)
}

/// Whether the word `raw`, as written, is the lowercased word `lower` (one of [`words`]):
/// without an allocation when it is ASCII.
pub(super) fn same(raw: &str, lower: &str) -> bool {
    if raw.is_ascii() {
        raw.eq_ignore_ascii_case(lower) && lower.is_ascii()
    } else {
        raw.to_lowercase() == lower
    }
}

/// [`words`] as a tantivy tokenizer.
#[derive(Clone, Default)]
pub(super) struct Words;

pub(super) struct WordStream<'a> {
    words: unicode_segmentation::UnicodeWordIndices<'a>,
    token: Token,
}

impl Tokenizer for Words {
    type TokenStream<'a> = WordStream<'a>;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> WordStream<'a> {
        WordStream {
            words: text.unicode_word_indices(),
            token: Token::default(),
        }
    }
}

impl TokenStream for WordStream<'_> {
    fn advance(&mut self) -> bool {
        for (at, word) in self.words.by_ref() {
            if word.len() > MAX_WORD_BYTES {
                continue;
            }
            self.token.position = self.token.position.wrapping_add(1);
            self.token.offset_from = at;
            self.token.offset_to = at + word.len();
            self.token.text.clear();
            if word.is_ascii() {
                // Most words: lowercased in place, with no allocation of their own.
                self.token.text.push_str(word);
                self.token.text.make_ascii_lowercase();
            } else {
                self.token.text.push_str(&word.to_lowercase());
            }
            return true;
        }
        false
    }

    fn token(&self) -> &Token {
        &self.token
    }

    fn token_mut(&mut self) -> &mut Token {
        &mut self.token
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_unicode_words_lowercased() {
        let got: Vec<String> =
            words("The user's TZ: Europe/Paris, naïve café 日本語 x_y 3.5").collect();
        assert_eq!(
            got,
            [
                "the", "user's", "tz", "europe", "paris", "naïve", "café", "日", "本", "語", "x_y",
                "3.5"
            ]
        );
        let mut tokenizer = Words;
        let mut stream = tokenizer.token_stream("Straße ÉTÉ");
        let mut seen = Vec::new();
        while stream.advance() {
            seen.push(stream.token().text.clone());
        }
        assert_eq!(seen, words("Straße ÉTÉ").collect::<Vec<_>>());
        assert_eq!(words(&"a".repeat(65)).count(), 0);
        for (raw, lower) in [("Paris", "paris"), ("ÉTÉ", "été"), ("Straße", "straße")] {
            assert!(same(raw, lower) && same(lower, lower), "{raw}");
            assert_eq!(words(raw).next().as_deref(), Some(lower));
        }
        assert!(!same("Paris", "pari") && !same("K", "\u{212a}"));
        assert_eq!(
            raw_words("The TZ: x").collect::<Vec<_>>(),
            ["The", "TZ", "x"]
        );
    }
}
