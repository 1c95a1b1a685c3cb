//! What a caller may hold of the server's connections by waiting: long polls of the change
//! feed, and sign-ins whose body is still arriving.
//!
//! A request in flight keeps its connection open (`conns` closes only idle ones to admit
//! others), so without bounds one key's long polls, or anyone's slowly sent sign-in forms, could
//! hold every connection. So:
//!
//! - at most a quarter of `--max-connections` long polls wait at once, at most
//!   [`PER_STORE`] on one store's feed and [`PER_KEY`] for one key; a poll beyond a bound is
//!   answered at once, 429 with `Retry-After` (it never waits);
//! - at most an eighth of `--max-connections` sign-ins (the one form read before any key is
//!   known) are read at once, each within [`SIGNIN_BODY_TIMEOUT`] and [`SIGNIN_MAX_BODY`]; one
//!   beyond is answered 503 at once, before its body is read.
//!
//! Everything else keeps at least five eighths of the connections.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Long polls one key may have waiting at once (an admin key following many stores follows
/// the all-stores feed, one poll).
pub const PER_KEY: usize = 16;
/// Long polls of one store's feed (or of the all-stores feed) waiting at once.
pub const PER_STORE: usize = 64;
/// How long a sign-in's body may take to arrive.
pub const SIGNIN_BODY_TIMEOUT: Duration = Duration::from_secs(5);
/// The largest sign-in body (a key and the form's names are far below it).
pub const SIGNIN_MAX_BODY: usize = 4096;

/// The bounds, for one server.
#[derive(Debug)]
pub struct Waiters {
    total: usize,
    counts: Mutex<Counts>,
    signins: Arc<Semaphore>,
}

#[derive(Debug, Default)]
struct Counts {
    all: usize,
    by_key: HashMap<String, usize>,
    by_store: HashMap<String, usize>,
}

/// Why a long poll may not wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Full {
    /// Its key has [`PER_KEY`] polls waiting.
    Key,
    /// Its store's feed has [`PER_STORE`] polls waiting.
    Store,
    /// The server has as many polls waiting as it lets wait.
    Server,
}

impl Full {
    /// What a caller is told.
    pub fn message(self) -> String {
        match self {
            Full::Key => format!(
                "this key has {PER_KEY} long polls of the change feed waiting already; wait for one to be answered"
            ),
            Full::Store => format!(
                "this feed has {PER_STORE} long polls waiting already; try again in a moment"
            ),
            Full::Server => {
                "the server has as many long polls waiting as it lets wait; try again in a moment"
                    .into()
            }
        }
    }
}

/// A waiting long poll's place; given back when dropped.
#[derive(Debug)]
pub struct Waiting<'a> {
    waiters: &'a Waiters,
    key: String,
    store: String,
}

impl Waiters {
    /// The bounds for a server of `max_connections`.
    pub fn new(max_connections: usize) -> Self {
        Waiters {
            total: (max_connections / 4).max(1),
            counts: Mutex::default(),
            signins: Arc::new(Semaphore::new((max_connections / 8).max(1))),
        }
    }

    /// A place for a long poll of `store`'s feed (`""`: every store's) by `key` (`""`: no key),
    /// or why there is none.
    pub fn wait(&self, key: &str, store: &str) -> Result<Waiting<'_>, Full> {
        let mut counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        if counts.all >= self.total {
            return Err(Full::Server);
        }
        if counts.by_store.get(store).copied().unwrap_or(0) >= PER_STORE {
            return Err(Full::Store);
        }
        if counts.by_key.get(key).copied().unwrap_or(0) >= PER_KEY {
            return Err(Full::Key);
        }
        counts.all += 1;
        *counts.by_store.entry(store.to_owned()).or_default() += 1;
        *counts.by_key.entry(key.to_owned()).or_default() += 1;
        Ok(Waiting {
            waiters: self,
            key: key.to_owned(),
            store: store.to_owned(),
        })
    }

    /// A place to read a sign-in's body, if one is free.
    pub fn signin(&self) -> Option<OwnedSemaphorePermit> {
        Arc::clone(&self.signins).try_acquire_owned().ok()
    }
}

fn release(map: &mut HashMap<String, usize>, name: &str) {
    if let Some(n) = map.get_mut(name) {
        *n -= 1;
        if *n == 0 {
            map.remove(name);
        }
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let mut counts = self
            .waiters
            .counts
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        counts.all -= 1;
        release(&mut counts.by_store, &self.store);
        release(&mut counts.by_key, &self.key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn polls_are_bounded_per_key_per_store_and_in_all() {
        let w = Waiters::new(512); // 128 in all
        let mine: Vec<_> = (0..PER_KEY).map(|_| w.wait("k1", "s").unwrap()).collect();
        assert_eq!(w.wait("k1", "other").unwrap_err(), Full::Key);
        let theirs: Vec<_> = (2..PER_STORE / PER_KEY + 1)
            .flat_map(|k| (0..PER_KEY).map(move |_| k))
            .map(|k| w.wait(&format!("k{k}"), "s").unwrap())
            .collect();
        assert_eq!(mine.len() + theirs.len(), PER_STORE);
        assert_eq!(w.wait("k9", "s").unwrap_err(), Full::Store);
        let elsewhere: Vec<_> = (0..128 - PER_STORE)
            .map(|i| w.wait(&format!("e{i}"), &format!("t{}", i % 3)).unwrap())
            .collect();
        assert_eq!(w.wait("e", "u").unwrap_err(), Full::Server);
        drop(elsewhere);
        drop(mine);
        // Given back: the key, the store and the server have room again.
        assert!(w.wait("k1", "s").is_ok());
        assert!(w.counts.lock().unwrap().by_key.len() <= PER_STORE / PER_KEY + 1);
    }

    #[test]
    fn sign_ins_are_bounded() {
        let w = Waiters::new(16);
        let a = w.signin().unwrap();
        let b = w.signin().unwrap();
        assert!(w.signin().is_none());
        drop(a);
        assert!(w.signin().is_some());
        drop(b);
    }
}
