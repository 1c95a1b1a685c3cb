//! [`AnyBackend`]: the backend chosen at run time from a location, behind one concrete type, so
//! that [`crate::Database`] has no type parameter for its users and a call costs one `match`.

use std::ops::ControlFlow;

use super::redb::{RedbBackend, RedbRead};
use super::{
    Backend, Capabilities, Fetch, Finish, Lease, LogBounds, ReadTxn, Space, Visit, WriteTxn,
};
use crate::error::Error;

#[cfg(feature = "postgres")]
use super::postgres::{PgBackend, PgRead};

/// Whether `location` names a PostgreSQL database (`postgres://…` or `postgresql://…`) rather
/// than a file.
pub fn is_postgres_url(location: &str) -> bool {
    location.starts_with("postgres://") || location.starts_with("postgresql://")
}

/// Any of memkv's backends. An enum rather than a trait object: the hot path pays one
/// well-predicted branch, and the transaction types stay concrete.
#[derive(Debug)]
#[non_exhaustive]
pub enum AnyBackend {
    /// An embedded redb file, or memory.
    Redb(RedbBackend),
    /// A PostgreSQL database.
    #[cfg(feature = "postgres")]
    Postgres(PgBackend),
}

impl From<RedbBackend> for AnyBackend {
    fn from(b: RedbBackend) -> Self {
        AnyBackend::Redb(b)
    }
}

#[cfg(feature = "postgres")]
impl From<PgBackend> for AnyBackend {
    fn from(b: PgBackend) -> Self {
        AnyBackend::Postgres(b)
    }
}

impl AnyBackend {
    /// Listens for other processes' commits ([`PgBackend::watch`]); `None` on an embedded
    /// backend (one process writes it) or a server that cannot notify.
    ///
    /// # Errors
    /// The listener could not be started.
    pub fn watch(
        &self,
        tell: Box<dyn Fn(super::watch::Changed) + Send>,
    ) -> Result<Option<super::watch::RemoteWatch>, Error> {
        match self {
            AnyBackend::Redb(_) => {
                drop(tell);
                Ok(None)
            }
            #[cfg(feature = "postgres")]
            AnyBackend::Postgres(b) => b.watch(tell),
        }
    }

    /// Round trips to the database server so far (`None` for an embedded backend).
    pub fn round_trips(&self) -> Option<u64> {
        match self {
            AnyBackend::Redb(_) => None,
            #[cfg(feature = "postgres")]
            AnyBackend::Postgres(b) => Some(b.round_trips()),
        }
    }
}

/// A read snapshot of an [`AnyBackend`].
pub enum AnyRead {
    /// On redb.
    Redb(RedbRead),
    /// On PostgreSQL.
    #[cfg(feature = "postgres")]
    Postgres(Box<PgRead>),
}

macro_rules! dispatch {
    ($value:expr, $b:ident => $body:expr) => {
        match $value {
            AnyRead::Redb($b) => $body,
            #[cfg(feature = "postgres")]
            AnyRead::Postgres($b) => $body,
        }
    };
}

impl ReadTxn for AnyRead {
    fn layout_version(&self) -> Result<u64, Error> {
        dispatch!(self, t => t.layout_version())
    }

    fn prefetch(&self, fetches: &[Fetch], last: bool) -> Result<(), Error> {
        dispatch!(self, t => t.prefetch(fetches, last))
    }

    fn read_ahead(&self, fetches: &[Fetch]) -> Result<(), Error> {
        dispatch!(self, t => t.read_ahead(fetches))
    }

    fn get(&self, space: Space, user: &str, key: &[u8]) -> Result<Option<Vec<u8>>, Error> {
        dispatch!(self, t => t.get(space, user, key))
    }

    fn scan(
        &self,
        space: Space,
        user: &str,
        start: &[u8],
        end: Option<&[u8]>,
        visit: Visit<'_>,
    ) -> Result<(), Error> {
        dispatch!(self, t => t.scan(space, user, start, end, visit))
    }

    fn users(
        &self,
        space: Space,
        visit: &mut dyn FnMut(&str) -> Result<ControlFlow<()>, Error>,
    ) -> Result<(), Error> {
        dispatch!(self, t => t.users(space, visit))
    }

    fn log_read(&self, after: u64, limit: usize) -> Result<Vec<(u64, Vec<u8>)>, Error> {
        dispatch!(self, t => t.log_read(after, limit))
    }

    fn log_bounds(&self) -> Result<LogBounds, Error> {
        dispatch!(self, t => t.log_bounds())
    }
}

impl Backend for AnyBackend {
    type Read<'a> = AnyRead;

    fn location(&self) -> &str {
        match self {
            AnyBackend::Redb(b) => b.location(),
            #[cfg(feature = "postgres")]
            AnyBackend::Postgres(b) => b.location(),
        }
    }

    fn begin_read(&self) -> Result<AnyRead, Error> {
        match self {
            AnyBackend::Redb(b) => b.begin_read().map(AnyRead::Redb),
            #[cfg(feature = "postgres")]
            AnyBackend::Postgres(b) => b.begin_read().map(|r| AnyRead::Postgres(Box::new(r))),
        }
    }

    fn write<R>(
        &self,
        lock: &[&str],
        f: impl FnMut(&mut dyn WriteTxn) -> Result<(R, Finish), Error>,
    ) -> Result<R, Error> {
        match self {
            AnyBackend::Redb(b) => b.write(lock, f),
            #[cfg(feature = "postgres")]
            AnyBackend::Postgres(b) => b.write(lock, f),
        }
    }

    fn write_freeing<R>(
        &self,
        lock: &[&str],
        f: impl FnMut(&mut dyn WriteTxn) -> Result<(R, Finish), Error>,
    ) -> Result<R, Error> {
        match self {
            AnyBackend::Redb(b) => b.write_freeing(lock, f),
            #[cfg(feature = "postgres")]
            AnyBackend::Postgres(b) => b.write_freeing(lock, f),
        }
    }

    fn erased(&self) -> Result<(), Error> {
        match self {
            AnyBackend::Redb(b) => b.erased(),
            #[cfg(feature = "postgres")]
            AnyBackend::Postgres(b) => b.erased(),
        }
    }

    fn capabilities(&self) -> Capabilities {
        match self {
            AnyBackend::Redb(b) => b.capabilities(),
            #[cfg(feature = "postgres")]
            AnyBackend::Postgres(b) => b.capabilities(),
        }
    }

    fn lease(&self, key: i64) -> Result<Option<Box<dyn Lease>>, Error> {
        match self {
            AnyBackend::Redb(b) => b.lease(key),
            #[cfg(feature = "postgres")]
            AnyBackend::Postgres(b) => b.lease(key),
        }
    }

    fn verify_storage(&self) -> Result<Vec<String>, Error> {
        match self {
            AnyBackend::Redb(b) => b.verify_storage(),
            #[cfg(feature = "postgres")]
            AnyBackend::Postgres(b) => b.verify_storage(),
        }
    }
}
