//! What a transaction knows of the database's state: every entry it has seen (`None`: known to
//! be absent), as changed by its own writes, and the key ranges it knows completely.

use std::collections::BTreeMap;
use std::ops::Bound;

use super::super::{Fetch, Space, Visit};
use super::sql;
use crate::error::Error;

pub(crate) type CacheKey = (u8, String, Vec<u8>);
/// `(space, user, start, end)`.
type KnownRange = (u8, String, Vec<u8>, Option<Vec<u8>>);

/// What a transaction knows about the database's state (as changed by its own writes).
#[derive(Default)]
pub(crate) struct Cache {
    pub(crate) entries: BTreeMap<CacheKey, Option<Vec<u8>>>,
    /// `(space, user, start, end)`: ranges whose every live entry is in `entries`.
    pub(crate) known: Vec<KnownRange>,
}

pub(crate) fn ck(space: Space, user: &str, key: &[u8]) -> CacheKey {
    (sql::space_number(space), user.to_owned(), key.to_vec())
}

impl Cache {
    pub(crate) fn covers(
        &self,
        space: Space,
        user: &str,
        start: &[u8],
        end: Option<&[u8]>,
    ) -> bool {
        let s = sql::space_number(space);
        self.known.iter().any(|(ks, ku, kstart, kend)| {
            *ks == s
                && ku == user
                && kstart.as_slice() <= start
                && match (kend, end) {
                    (None, _) => true,
                    (Some(_), None) => false,
                    (Some(kend), Some(end)) => end <= kend.as_slice(),
                }
        })
    }

    pub(crate) fn lookup(&self, space: Space, user: &str, key: &[u8]) -> Option<Option<Vec<u8>>> {
        if let Some(v) = self.entries.get(&ck(space, user, key)) {
            return Some(v.clone());
        }
        let mut end = key.to_vec();
        end.push(0);
        self.covers(space, user, key, Some(&end)).then_some(None)
    }

    pub(crate) fn scan(
        &self,
        space: Space,
        user: &str,
        start: &[u8],
        end: Option<&[u8]>,
        visit: Visit<'_>,
    ) -> Result<(), Error> {
        let s = sql::space_number(space);
        let lower = Bound::Included((s, user.to_owned(), start.to_vec()));
        for ((es, eu, key), value) in self.entries.range((lower, Bound::Unbounded)) {
            if *es != s || eu != user || end.is_some_and(|end| key.as_slice() >= end) {
                break;
            }
            if let Some(value) = value
                && visit(key, value)?.is_break()
            {
                break;
            }
        }
        Ok(())
    }

    /// Records the rows of a fetch (the database's state, with this transaction's writes).
    pub(crate) fn absorb(
        &mut self,
        fetches: &[Fetch],
        rows: Vec<postgres::SimpleQueryRow>,
    ) -> Result<(), Error> {
        for fetch in fetches {
            match fetch {
                Fetch::Get { space, user, key } => {
                    self.entries.insert(ck(*space, user, key), None);
                }
                Fetch::Range {
                    space,
                    user,
                    start,
                    end,
                } => {
                    self.drop_range(*space, user, start, end.as_deref());
                    self.known.push((
                        sql::space_number(*space),
                        user.clone(),
                        start.clone(),
                        end.clone(),
                    ));
                }
            }
        }
        for row in rows {
            let index: usize = row
                .get(0)
                .and_then(|i| i.parse().ok())
                .ok_or_else(|| Error::storage("a fetched row has no index"))?;
            let (space, user) = match &fetches[index] {
                Fetch::Get { space, user, .. } | Fetch::Range { space, user, .. } => (space, user),
            };
            let key = sql::unhex(row.get(1).unwrap_or_default())?;
            let value = sql::unhex(row.get(2).unwrap_or_default())?;
            self.entries.insert(ck(*space, user, &key), Some(value));
        }
        Ok(())
    }

    pub(crate) fn drop_range(
        &mut self,
        space: Space,
        user: &str,
        start: &[u8],
        end: Option<&[u8]>,
    ) {
        let s = sql::space_number(space);
        let doomed: Vec<CacheKey> = self
            .entries
            .range((s, user.to_owned(), start.to_vec())..)
            .map(|(k, _)| k)
            .take_while(|(es, eu, key)| {
                *es == s && eu == user && end.is_none_or(|end| key.as_slice() < end)
            })
            .cloned()
            .collect();
        for k in doomed {
            self.entries.remove(&k);
        }
    }
}
