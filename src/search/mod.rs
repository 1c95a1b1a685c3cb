//! Search over a store's current memories: exact (a regular expression or a literal, line by
//! line, as ripgrep matches: `grep`) and ranked (BM25 on tantivy, kept current from the change
//! log: `ranked`, with the `ranked` feature).
//!
//! A search reads one snapshot of the store, so it never sees a half-applied write; expired
//! memories are left out, as `view` leaves them out. It records no use of what it reads (a
//! `view` does): searching does not keep a memory from expiring.
//!
//! Every face answers from here: the library ([`crate::MemoryStore::search`]), the CLI
//! (`memkv search`), REST and MCP (`memory_search`: [`tool`], its strings in `messages`).

mod grep;
mod params;
#[cfg(feature = "ranked")]
pub(crate) mod ranked;
pub(crate) mod results;
pub mod tool;

use std::time::Duration;

use crate::error::Error;
use crate::messages;
use crate::path::MemoryPath;
use crate::pipeline::Scope;

pub(crate) use grep::Matcher;
pub use params::{SearchParams, context_message, limit_message};
pub use results::{SearchHit, SearchLine, SearchResults};

/// The longest query, in bytes.
pub const MAX_QUERY_BYTES: usize = 1_000;

/// The most matching lines a search answers (the largest `limit`).
pub const MAX_LIMIT: usize = 1_000;

/// The most lines of context around a match.
pub const MAX_CONTEXT: usize = 10;

/// The largest compiled regular expression, in bytes (the `regex` crate's size limit): a
/// pattern such as `\w{1000}{1000}` is refused rather than built.
pub const MAX_REGEX_BYTES: usize = 1 << 20;

/// How long a search may read before it stops and says what it did not search. The regex
/// engine runs in linear time, so this bounds the time of any pattern over any store.
pub const TIME_BUDGET: Duration = Duration::from_secs(2);

/// How a query matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum SearchMode {
    /// The memories most about the query's words, best first (BM25 over path and content,
    /// Unicode words lowercased), each with its best lines. Needs the `ranked` feature (on by
    /// default).
    #[default]
    Ranked,
    /// A regular expression in the `regex` crate's syntax (ripgrep's), matched line by line.
    Regex,
    /// A literal string, matched line by line (`grep -F`).
    Literal,
}

impl std::str::FromStr for SearchMode {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        match s {
            "ranked" => Ok(SearchMode::Ranked),
            "regex" => Ok(SearchMode::Regex),
            "literal" => Ok(SearchMode::Literal),
            other => Err(Error::InvalidSearch(messages::search_mode(other))),
        }
    }
}

/// A search of one store.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SearchRequest {
    /// What to look for.
    pub query: String,
    /// How it matches.
    pub mode: SearchMode,
    /// Matches letters of either case (Unicode simple case folding, as `rg -i`); ranked
    /// search always does.
    pub case_insensitive: bool,
    /// Only the memories at or below this path (`/memories/…`, whole segments).
    pub path_prefix: Option<String>,
    /// Lines of context before and after each match (at most [`MAX_CONTEXT`]).
    pub context: usize,
    /// The most matching lines (ranked: memories) to answer (1 to [`MAX_LIMIT`]).
    pub limit: usize,
    /// How long an exact search may read before it stops and counts the memories it did not
    /// search (at most, and by default, [`TIME_BUDGET`]).
    pub time_budget: Duration,
}

impl SearchRequest {
    /// A search for `query` in `mode`, case-sensitive, over the whole store, no context, at
    /// most [`SearchRequest::default_limit`] results.
    pub fn new(query: impl Into<String>, mode: SearchMode) -> Self {
        SearchRequest {
            query: query.into(),
            mode,
            case_insensitive: false,
            path_prefix: None,
            context: 0,
            limit: Self::default_limit(mode),
            time_budget: TIME_BUDGET,
        }
    }

    /// The limit when none is given: 10 memories for ranked search, 50 lines for exact.
    pub fn default_limit(mode: SearchMode) -> usize {
        match mode {
            SearchMode::Ranked => 10,
            _ => 50,
        }
    }

    /// Case-insensitive or not.
    #[must_use]
    pub fn case_insensitive(mut self, yes: bool) -> Self {
        self.case_insensitive = yes;
        self
    }

    /// Only below `prefix` (`/memories/…`).
    #[must_use]
    pub fn path_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.path_prefix = Some(prefix.into());
        self
    }

    /// Lines of context around each match.
    #[must_use]
    pub fn context(mut self, lines: usize) -> Self {
        self.context = lines;
        self
    }

    /// The most matching lines to answer.
    #[must_use]
    pub fn limit(mut self, limit: usize) -> Self {
        self.limit = limit;
        self
    }

    /// The request's own checks, before anything is read.
    fn check(&self) -> Result<(), Error> {
        let refuse = |why: String| Err(Error::InvalidSearch(why));
        if self.query.is_empty() {
            return refuse(messages::search_query_empty());
        }
        if self.query.len() > MAX_QUERY_BYTES {
            return refuse(messages::search_query_too_long(
                self.query.len(),
                MAX_QUERY_BYTES,
            ));
        }
        if self.query.contains('\n') {
            return refuse(messages::search_query_line_break());
        }
        if self.limit == 0 || self.limit > MAX_LIMIT {
            return refuse(messages::search_limit(self.limit, MAX_LIMIT));
        }
        if self.time_budget > TIME_BUDGET {
            return refuse(messages::search_time_budget(TIME_BUDGET.as_secs()));
        }
        if self.context > MAX_CONTEXT {
            return refuse(messages::search_context(self.context, MAX_CONTEXT));
        }
        Ok(())
    }
}

/// The ranked-search indexes of a database (none without the `ranked` feature).
#[cfg(feature = "ranked")]
pub(crate) type Indexes = ranked::Indexes;
/// The ranked-search indexes of a database (none without the `ranked` feature).
#[cfg(not(feature = "ranked"))]
#[derive(Debug, Default)]
pub(crate) struct Indexes;

#[cfg(not(feature = "ranked"))]
impl Indexes {
    /// How many indexes were built: none, without ranked search.
    pub(crate) fn builds(&self) -> u64 {
        0
    }
}

/// The body of [`crate::MemoryStore::search`].
pub(crate) fn search(
    scope: Scope<'_>,
    indexes: &Indexes,
    request: &SearchRequest,
) -> Result<SearchResults, Error> {
    request.check()?;
    let prefix = match &request.path_prefix {
        None => MemoryPath::root(),
        Some(p) => MemoryPath::parse(p).map_err(|reason| Error::InvalidPath {
            path: p.clone(),
            reason,
        })?,
    };
    match request.mode {
        #[cfg(feature = "ranked")]
        SearchMode::Ranked => ranked::run(scope, indexes, &prefix, request),
        #[cfg(not(feature = "ranked"))]
        SearchMode::Ranked => {
            let _ = indexes;
            Err(Error::InvalidSearch(messages::search_ranked_unavailable()))
        }
        SearchMode::Regex | SearchMode::Literal => {
            let matcher = Matcher::new(request)?;
            grep::run(scope, &matcher, &prefix, request)
        }
    }
}
