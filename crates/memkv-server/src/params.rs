//! Query parameters as types: a route's parameters are one struct, both what [`Params`] parses
//! (serde) and what the OpenAPI document describes (utoipa's `IntoParams`), so the two cannot
//! differ. Values arrive as text and are checked by the struct's own methods, whose refusals
//! (400) say which parameter, what it takes and what was sent.
//!
//! As the hosted API does, unknown parameters are ignored (the SDK's `?beta=true` among them),
//! and a parameter given twice counts once, the first time, unless its field is a list
//! (`Vec<String>`: every value, in order).

use std::collections::BTreeMap;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use serde::de::value::{Error as DeError, MapDeserializer, SeqDeserializer};
use serde::de::{DeserializeOwned, Deserializer, IntoDeserializer, Visitor};
use serde::{Deserialize, forward_to_deserialize_any};
use utoipa::{IntoParams, ToSchema};

use crate::error::ApiError;

/// Items on a page when `limit` is not given, and the most with `view=full`.
pub const DEFAULT_LIMIT: usize = 20;
/// The most items a page may be asked for.
pub const MAX_LIMIT: usize = 100;

/// The query string's parameters as `T`.
#[derive(Debug)]
pub struct Params<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for Params<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        parse(parts.uri.query().unwrap_or("")).map(Params)
    }
}

/// `query` (percent-encoded, without the `?`) as `T`.
pub fn parse<T: DeserializeOwned>(query: &str) -> Result<T, ApiError> {
    let mut values: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (name, value) in form_urlencoded::parse(query.as_bytes()).into_owned() {
        values.entry(name).or_default().push(value);
    }
    let map = MapDeserializer::new(values.into_iter().map(|(name, all)| (name, Values(all))));
    T::deserialize(map).map_err(|e: DeError| ApiError::invalid(e.to_string()))
}

/// Every value a parameter was given: the first for a single value, all for a list.
struct Values(Vec<String>);

impl<'de> IntoDeserializer<'de, DeError> for Values {
    type Deserializer = Self;

    fn into_deserializer(self) -> Self {
        self
    }
}

impl<'de> Deserializer<'de> for Values {
    type Error = DeError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        visitor.visit_string(self.0.into_iter().next().unwrap_or_default())
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        visitor.visit_some(self)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        visitor.visit_seq(SeqDeserializer::new(self.0.into_iter()))
    }

    forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf unit
        unit_struct newtype_struct tuple tuple_struct map struct enum identifier ignored_any
    }
}

/// `view`: whether memories and versions include their content.
#[derive(ToSchema)]
#[serde(rename_all = "snake_case")]
#[allow(dead_code)]
pub enum View {
    Basic,
    Full,
}

/// `full` (true) or `basic` (false), `default_full` when not given.
fn full(view: Option<&str>, default_full: bool) -> Result<bool, ApiError> {
    match view {
        None => Ok(default_full),
        Some("full") => Ok(true),
        Some("basic") => Ok(false),
        Some(v) => Err(ApiError::invalid(format!(
            "view must be basic or full, not {v:?}"
        ))),
    }
}

/// `view`, `basic` when omitted.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ViewBasic {
    /// Whether memories and versions include `content` (`full`) or not (`basic`). Defaults to
    /// `basic` here. With `full`, a list page holds at most 20 items.
    #[param(value_type = Option<View>, inline)]
    view: Option<String>,
}

impl ViewBasic {
    /// Whether the answer includes content.
    pub fn full(&self) -> Result<bool, ApiError> {
        full(self.view.as_deref(), false)
    }
}

/// `view`, `full` when omitted.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ViewFull {
    /// Whether memories and versions include `content` (`full`) or not (`basic`). Defaults to
    /// `full` here.
    #[param(value_type = Option<View>, inline)]
    view: Option<String>,
}

impl ViewFull {
    /// Whether the answer includes content.
    pub fn full(&self) -> Result<bool, ApiError> {
        full(self.view.as_deref(), true)
    }
}

/// The page of a listing.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct Paging {
    /// Items per page, 1 to 100 (20 when omitted; at most 20 with `view=full`).
    #[param(value_type = Option<u32>, minimum = 1, maximum = 100)]
    limit: Option<String>,
    /// The `next_page` value of a previous answer.
    page: Option<String>,
}

impl Paging {
    /// `limit`: 1 to 100, 20 when not given; with `view=full` a page holds at most 20.
    pub fn limit(&self, full: bool) -> Result<usize, ApiError> {
        let limit = limit_within(self.limit.as_deref(), DEFAULT_LIMIT, MAX_LIMIT)?;
        Ok(if full {
            limit.min(DEFAULT_LIMIT)
        } else {
            limit
        })
    }

    /// `page`: a `next_page` value from a previous answer (opaque; its owner checks it).
    pub fn page(&self) -> Option<&str> {
        self.page.as_deref().filter(|p| !p.is_empty())
    }
}

/// A listing's time range: what was made (a store created, a version written) within it, both
/// ends included.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct Created {
    /// Only what was made at or after this time.
    #[serde(rename = "created_at[gte]")]
    #[param(format = DateTime)]
    gte: Option<String>,
    /// Only what was made at or before this time.
    #[serde(rename = "created_at[lte]")]
    #[param(format = DateTime)]
    lte: Option<String>,
}

impl Created {
    /// The range's ends, as milliseconds since the epoch.
    pub fn range(&self) -> Result<(Option<i64>, Option<i64>), ApiError> {
        Ok((
            time("created_at[gte]", self.gte.as_deref())?,
            time("created_at[lte]", self.lte.as_deref())?,
        ))
    }
}

/// `limit`: 1 to `max`, `default` when not given.
pub fn limit_within(limit: Option<&str>, default: usize, max: usize) -> Result<usize, ApiError> {
    match limit {
        None => Ok(default),
        Some(v) => v
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=max).contains(n))
            .ok_or_else(|| {
                ApiError::invalid(format!(
                    "limit must be an integer from 1 to {max}, not {v:?}"
                ))
            }),
    }
}

/// A boolean parameter `name` (`true` or `false`).
pub fn flag(name: &str, value: Option<&str>) -> Result<Option<bool>, ApiError> {
    match value {
        None => Ok(None),
        Some("true") => Ok(Some(true)),
        Some("false") => Ok(Some(false)),
        Some(v) => Err(ApiError::invalid(format!(
            "{name} must be true or false, not {v:?}"
        ))),
    }
}

/// A time parameter `name` in RFC 3339, as milliseconds since the epoch.
pub fn time(name: &str, value: Option<&str>) -> Result<Option<i64>, ApiError> {
    value
        .map(|v| {
            memkv::parse_rfc3339(v).ok_or_else(|| {
                ApiError::invalid(format!(
                    "{name} must be a time in RFC 3339 (2026-11-30T13:45:00Z), not {v:?}"
                ))
            })
        })
        .transpose()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize, PartialEq)]
    struct Sample {
        limit: Option<String>,
        #[serde(rename = "created_at[gte]")]
        gte: Option<String>,
        #[serde(default)]
        user: Vec<String>,
    }

    #[test]
    fn parameters_are_decoded_first_one_wins_lists_keep_all_unknown_ignored() {
        let s: Sample = parse(
            "limit=5&limit=7&created_at%5Bgte%5D=2026-01-01T00:00:00Z&beta=true&user=a&user=b%2Fc",
        )
        .unwrap();
        assert_eq!(
            s,
            Sample {
                limit: Some("5".into()),
                gte: Some("2026-01-01T00:00:00Z".into()),
                user: vec!["a".into(), "b/c".into()],
            }
        );
        let s: Sample = parse("").unwrap();
        assert_eq!((s.limit, s.gte, s.user.len()), (None, None, 0));
    }

    #[test]
    fn values_are_checked_with_messages_that_name_the_parameter() {
        let p: Paging = parse("limit=0").unwrap();
        assert_eq!(
            p.limit(false).unwrap_err().message,
            "limit must be an integer from 1 to 100, not \"0\""
        );
        let p: Paging = parse("limit=100&page=").unwrap();
        assert_eq!((p.limit(false).unwrap(), p.limit(true).unwrap()), (100, 20));
        assert_eq!(p.page(), None);
        let v: ViewBasic = parse("view=everything").unwrap();
        assert_eq!(
            v.full().unwrap_err().message,
            "view must be basic or full, not \"everything\""
        );
        assert!(!parse::<ViewBasic>("").unwrap().full().unwrap());
        assert!(parse::<ViewFull>("").unwrap().full().unwrap());
        assert_eq!(
            flag("x", Some("yes")).unwrap_err().message,
            "x must be true or false, not \"yes\""
        );
        assert_eq!(
            time("t", Some("2026-11-30T13:45:00Z")).unwrap(),
            Some(1_796_046_300_000)
        );
    }
}
