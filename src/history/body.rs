//! How a version keeps its content: RCS's reverse deltas, so that history costs a write little.
//!
//! A memory's latest version keeps no content of its own: its content is the live file's
//! ([`Body::Current`]). When the memory changes, that version is *retired*: it becomes a
//! [`Delta`] against its successor's content (for a `str_replace`, the replaced text and where;
//! for a rename, nothing), or a snapshot of its full content ([`Body::Snapshot`], kept apart in
//! `Space::Snapshots`) when the memory is deleted, when [`MAX_RUN`] deltas already lead up to
//! it, or when its successor is redacted. Migrated and imported versions keep their content
//! inline ([`Body::Full`]). Reading an old version follows its deltas' `next` to the nearest
//! full content and applies them, newest first: at most [`MAX_RUN`] of them.
//!
//! Pruning removes the oldest versions first, and a delta depends only on newer ones, so pruning
//! never strands one.

use serde::{Deserialize, Serialize};

use crate::error::Error;

/// The most deltas in a row before a retired version keeps its full content: reading any
/// version costs at most this many records.
pub(crate) const MAX_RUN: u32 = 16;

/// What a version holds of its content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum Body {
    /// Nothing: a deletion, or a redacted version.
    Empty,
    /// The whole content.
    Full(String),
    /// The memory's latest version: its content is the live file's. `run` deltas lead up to it
    /// (at most; fewer once some are pruned or made full).
    Current { run: u32 },
    /// Its successor's content with one splice.
    Delta(Delta),
    /// The whole content, kept under the version's number in [`crate::storage::Space::Snapshots`].
    Snapshot,
}

/// The content of a version as a splice of its successor's (the memory's next version, `next`):
/// `successor[..at]`, then `text`, then `successor[at + removed..]` (byte offsets on character
/// boundaries).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Delta {
    pub next: u64,
    pub at: u64,
    pub removed: u64,
    pub text: String,
}

impl Delta {
    /// The delta that turns `new`, the content of version `next`, back into `old`: their common
    /// prefix and suffix are left out.
    pub fn between(next: u64, old: &str, new: &str) -> Delta {
        let (o, n) = (old.as_bytes(), new.as_bytes());
        let mut prefix = o.iter().zip(n).take_while(|(a, b)| a == b).count();
        while !(old.is_char_boundary(prefix) && new.is_char_boundary(prefix)) {
            prefix -= 1;
        }
        let room = o.len().min(n.len()) - prefix;
        let mut suffix = o
            .iter()
            .rev()
            .zip(n.iter().rev())
            .take(room)
            .take_while(|(a, b)| a == b)
            .count();
        while !(old.is_char_boundary(o.len() - suffix) && new.is_char_boundary(n.len() - suffix)) {
            suffix -= 1;
        }
        Delta {
            next,
            at: prefix as u64,
            removed: (n.len() - prefix - suffix) as u64,
            text: old[prefix..o.len() - suffix].to_owned(),
        }
    }

    /// Applies the delta to its successor's content.
    pub fn apply(&self, successor: &str) -> Result<String, Error> {
        let start = usize::try_from(self.at).ok();
        let end = start.and_then(|s| s.checked_add(usize::try_from(self.removed).ok()?));
        match (start, end) {
            (Some(start), Some(end))
                if end <= successor.len()
                    && successor.is_char_boundary(start)
                    && successor.is_char_boundary(end) =>
            {
                let mut out =
                    String::with_capacity(successor.len() - (end - start) + self.text.len());
                out.push_str(&successor[..start]);
                out.push_str(&self.text);
                out.push_str(&successor[end..]);
                Ok(out)
            }
            _ => Err(Error::Corrupt(
                "a version's delta does not fit its successor".into(),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_delta_keeps_only_what_changed() {
        let d = Delta::between(9, "one two three", "one 2 three");
        assert_eq!((d.at, d.removed, d.text.as_str()), (4, 1, "two"));
        assert_eq!(d.apply("one 2 three").unwrap(), "one two three");
        let same = Delta::between(9, "same", "same");
        assert_eq!((same.removed, same.text.as_str()), (0, ""));
        // Repeated text: prefix and suffix never overlap.
        let d = Delta::between(9, "aaa", "aaaa");
        assert_eq!(d.apply("aaaa").unwrap(), "aaa");
        // Multi-byte characters are never split.
        let d = Delta::between(9, "é", "è");
        assert_eq!((d.at, d.text.as_str()), (0, "é"));
        assert_eq!(d.apply("è").unwrap(), "é");
    }

    #[test]
    fn a_delta_that_does_not_fit_is_corruption() {
        let d = Delta {
            next: 9,
            at: 3,
            removed: 5,
            text: String::new(),
        };
        assert!(matches!(d.apply("short"), Err(Error::Corrupt(_))));
        let d = Delta {
            next: 9,
            at: 1,
            removed: 0,
            text: String::new(),
        };
        assert!(matches!(d.apply("é"), Err(Error::Corrupt(_))));
        let d = Delta {
            next: 9,
            at: u64::MAX,
            removed: u64::MAX,
            text: String::new(),
        };
        assert!(matches!(d.apply("x"), Err(Error::Corrupt(_))));
    }

    proptest! {
        #[test]
        fn a_delta_turns_the_new_content_back_into_the_old(
            old in "[aé€b\n]{0,40}",
            new in "[aé€b\n]{0,40}",
        ) {
            let d = Delta::between(9, &old, &new);
            prop_assert_eq!(d.apply(&new).unwrap(), old.clone());
            prop_assert!(d.text.len() <= old.len());
        }
    }
}
