//! A search as the faces take it from their callers (the HTTP search route's query, the
//! in-process bindings' arguments), typed, and the checks that turn it into a [`SearchRequest`]:
//! one place for the ranges and for the API's spelling of `path_prefix`.

use super::{MAX_CONTEXT, MAX_LIMIT, SearchMode, SearchRequest};
use crate::error::Error;
use crate::path::{model_dir, model_path};

/// The search route's parameters, typed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SearchParams {
    /// `q`: what to find.
    pub query: String,
    /// `ranked` (the default), `literal` or `regex`.
    pub mode: Option<String>,
    /// Letters of either case (literal and regex; ranked always folds case).
    pub case_insensitive: Option<bool>,
    /// Only this memory (`/notes.md`) or the memories below this folder (`/notes/`), as the
    /// memory-stores API spells paths.
    pub path_prefix: Option<String>,
    /// Lines before and after each line shown: 0 to [`MAX_CONTEXT`].
    pub context: Option<i64>,
    /// The most memories (ranked) or lines (literal, regex): 1 to [`MAX_LIMIT`].
    pub limit: Option<i64>,
}

impl SearchParams {
    /// The request these parameters ask for.
    ///
    /// # Errors
    /// Why not, in words for the caller (a face answers it as a bad request): an unknown mode,
    /// a limit or context out of range, a `path_prefix` that does not start with `/`. The query
    /// itself is checked when the search runs.
    pub fn request(&self) -> Result<SearchRequest, String> {
        let mode = match self.mode.as_deref() {
            None => SearchMode::Ranked,
            Some(m) => m.parse().map_err(|e: Error| e.to_string())?,
        };
        let limit = match self.limit {
            None => SearchRequest::default_limit(mode),
            Some(n) => usize::try_from(n)
                .ok()
                .filter(|n| (1..=MAX_LIMIT).contains(n))
                .ok_or_else(|| limit_message(&n))?,
        };
        let mut request = SearchRequest::new(self.query.clone(), mode)
            .case_insensitive(self.case_insensitive.unwrap_or(false))
            .limit(limit);
        if let Some(n) = self.context {
            request.context = usize::try_from(n)
                .ok()
                .filter(|n| *n <= MAX_CONTEXT)
                .ok_or_else(|| context_message(&n))?;
        }
        if let Some(prefix) = self.path_prefix.as_deref() {
            let model = if prefix.ends_with('/') {
                model_dir(prefix)
            } else {
                model_path(prefix)
            };
            request.path_prefix = Some(
                model.ok_or_else(|| format!("path_prefix must start with /, not {prefix:?}"))?,
            );
        }
        Ok(request)
    }
}

/// Why a `limit` (`given` as the caller wrote it) is refused.
pub fn limit_message(given: &dyn std::fmt::Debug) -> String {
    format!("limit must be an integer from 1 to {MAX_LIMIT}, not {given:?}")
}

/// Why a `context` (`given` as the caller wrote it) is refused.
pub fn context_message(given: &dyn std::fmt::Debug) -> String {
    format!("context must be an integer from 0 to {MAX_CONTEXT}, not {given:?}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(query: &str) -> SearchParams {
        SearchParams {
            query: query.into(),
            ..SearchParams::default()
        }
    }

    #[test]
    fn defaults_ranges_and_the_apis_paths() {
        let r = params("tabs").request().unwrap();
        assert_eq!((r.mode, r.limit, r.context), (SearchMode::Ranked, 10, 0));
        let mut p = params("tabs");
        p.mode = Some("literal".into());
        p.path_prefix = Some("/notes/".into());
        p.context = Some(10);
        p.limit = Some(MAX_LIMIT as i64);
        let r = p.request().unwrap();
        assert_eq!(r.path_prefix.as_deref(), Some("/memories/notes"));
        assert_eq!((r.limit, r.context), (MAX_LIMIT, 10));
        p.path_prefix = Some("/a.md".into());
        assert_eq!(
            p.request().unwrap().path_prefix.as_deref(),
            Some("/memories/a.md")
        );
        for (field, value, want) in [
            ("limit", 0, "limit must be an integer from 1 to 1000, not 0"),
            (
                "limit",
                1001,
                "limit must be an integer from 1 to 1000, not 1001",
            ),
            (
                "context",
                -1,
                "context must be an integer from 0 to 10, not -1",
            ),
            (
                "context",
                11,
                "context must be an integer from 0 to 10, not 11",
            ),
        ] {
            let mut p = params("x");
            if field == "limit" {
                p.limit = Some(value);
            } else {
                p.context = Some(value);
            }
            assert_eq!(p.request().unwrap_err(), want);
        }
        let mut p = params("x");
        p.path_prefix = Some("notes/".into());
        assert_eq!(
            p.request().unwrap_err(),
            "path_prefix must start with /, not \"notes/\""
        );
        p.path_prefix = None;
        p.mode = Some("fuzzy".into());
        assert!(p.request().is_err());
    }
}
