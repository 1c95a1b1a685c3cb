//! The console's sessions: an API key, given once at sign-in, exchanged for a random session id
//! that the browser keeps in an HttpOnly, SameSite=Strict cookie. The server keeps the key
//! (in memory, never logged) and checks it again on every request, so a key revoked or expired
//! after sign-in ends its sessions at once.
//!
//! Sessions live in the memory of the server that made them: behind a balancer, the console's
//! requests must reach the same server (a sticky cookie; docs/deployment.md). At most
//! [`MAX_SESSIONS`] exist; a new one past that ends the oldest.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use base64::Engine as _;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// How long a session lasts after sign-in.
pub const LIFETIME: Duration = Duration::from_secs(8 * 3600);
/// How long a session lasts without a request, unless the server is told otherwise.
pub const IDLE: Duration = Duration::from_secs(3600);
/// The most sessions kept at once.
pub const MAX_SESSIONS: usize = 10_000;
/// The most sessions of one key: a new one past that ends the key's oldest (so that no key
/// holder can push everyone else's sessions out).
pub const MAX_PER_KEY: usize = 100;

/// The session cookie's name (over TLS, `__Host-` prefixed: only set by this host, over HTTPS,
/// for every path).
pub fn cookie_name(secure: bool) -> &'static str {
    if secure {
        "__Host-memkv_console"
    } else {
        "memkv_console"
    }
}

/// A signed-in browser.
#[derive(Clone)]
pub struct Session {
    /// The API key it signed in with (empty under `--no-auth`).
    pub key: String,
    /// The token every state-changing form carries.
    pub csrf: String,
    started: Instant,
    seen: Instant,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session").finish_non_exhaustive()
    }
}

impl Session {
    /// Whether `token` is this session's CSRF token (compared in constant time).
    pub fn csrf_matches(&self, token: &str) -> bool {
        !token.is_empty() && bool::from(self.csrf.as_bytes().ct_eq(token.as_bytes()))
    }
}

/// Every session of this server, by the SHA-256 of its id (the id itself is kept only by the
/// browser).
#[derive(Debug)]
pub struct Sessions {
    map: Mutex<HashMap<[u8; 32], Session>>,
    idle: Duration,
    lifetime: Duration,
}

impl Default for Sessions {
    fn default() -> Self {
        Sessions::new(IDLE)
    }
}

fn digest(id: &str) -> [u8; 32] {
    Sha256::digest(id.as_bytes()).into()
}

/// 32 random bytes, base64url.
fn token() -> Option<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).ok()?;
    Some(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes))
}

impl Sessions {
    /// No sessions yet; each ends after `idle` without a request, and after [`LIFETIME`] (or
    /// `idle`, if longer) in any case.
    pub fn new(idle: Duration) -> Self {
        Sessions {
            map: Mutex::default(),
            idle,
            lifetime: LIFETIME.max(idle),
        }
    }

    /// How long a session lasts at most, for the cookie's `Max-Age`.
    pub fn lifetime(&self) -> Duration {
        self.lifetime
    }

    /// Starts a session for `key`; returns its id (for the cookie), `None` when the system
    /// cannot give random bytes.
    pub fn start(&self, key: String) -> Option<String> {
        let id = token()?;
        let csrf = token()?;
        let now = Instant::now();
        let mut map = self.map.lock().expect("no panics under the lock");
        let mine: Vec<([u8; 32], Instant)> = map
            .iter()
            .filter(|(_, s)| s.key == key)
            .map(|(d, s)| (*d, s.started))
            .collect();
        if mine.len() >= MAX_PER_KEY
            && let Some((oldest, _)) = mine.iter().min_by_key(|(_, started)| *started)
        {
            map.remove(oldest);
        }
        if map.len() >= MAX_SESSIONS {
            map.retain(|_, s| self.live(s, now));
            if map.len() >= MAX_SESSIONS
                && let Some(oldest) = map.iter().min_by_key(|(_, s)| s.started).map(|(k, _)| *k)
            {
                map.remove(&oldest);
            }
        }
        map.insert(
            digest(&id),
            Session {
                key,
                csrf,
                started: now,
                seen: now,
            },
        );
        Some(id)
    }

    /// The live session `id`, its idle time restarted; an expired one is removed.
    pub fn get(&self, id: &str) -> Option<Session> {
        let now = Instant::now();
        let mut map = self.map.lock().expect("no panics under the lock");
        let d = digest(id);
        let session = map.get_mut(&d)?;
        if !self.live(session, now) {
            map.remove(&d);
            return None;
        }
        session.seen = now;
        Some(session.clone())
    }

    /// Ends the session `id` (sign-out).
    pub fn end(&self, id: &str) {
        self.map
            .lock()
            .expect("no panics under the lock")
            .remove(&digest(id));
    }

    /// How many sessions are kept.
    pub fn len(&self) -> usize {
        self.map.lock().expect("no panics under the lock").len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn live(&self, s: &Session, now: Instant) -> bool {
        now.duration_since(s.started) < self.lifetime && now.duration_since(s.seen) < self.idle
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_is_found_by_its_id_only_until_it_ends() {
        let sessions = Sessions::default();
        let id = sessions.start("mkv_k".into()).unwrap();
        let s = sessions.get(&id).unwrap();
        assert_eq!(s.key, "mkv_k");
        assert!(s.csrf_matches(&s.csrf.clone()));
        assert!(!s.csrf_matches(""));
        assert!(!s.csrf_matches("x"));
        assert!(sessions.get("other").is_none());
        sessions.end(&id);
        assert!(sessions.get(&id).is_none());
        assert!(sessions.is_empty());
    }

    #[test]
    fn one_key_keeps_at_most_its_share() {
        let sessions = Sessions::default();
        let other = sessions.start("admin".into()).unwrap();
        let first = sessions.start("k".into()).unwrap();
        sessions
            .map
            .lock()
            .unwrap()
            .get_mut(&digest(&first))
            .unwrap()
            .started -= Duration::from_secs(1);
        for _ in 0..MAX_PER_KEY {
            sessions.start("k".into()).unwrap();
        }
        assert_eq!(sessions.len(), MAX_PER_KEY + 1);
        assert!(sessions.get(&first).is_none(), "the key's oldest ended");
        assert!(sessions.get(&other).is_some(), "another key's stays");
    }

    #[test]
    fn an_idle_session_ends() {
        let sessions = Sessions::new(Duration::from_secs(60));
        let id = sessions.start("k".into()).unwrap();
        assert!(sessions.get(&id).is_some());
        sessions
            .map
            .lock()
            .unwrap()
            .values_mut()
            .for_each(|s| s.seen -= Duration::from_secs(61));
        assert!(sessions.get(&id).is_none());
        assert!(
            sessions.is_empty(),
            "an expired session is removed when found"
        );
        assert_eq!(sessions.lifetime(), LIFETIME);
        assert_eq!(Sessions::new(LIFETIME * 2).lifetime(), LIFETIME * 2);
    }

    #[test]
    fn the_oldest_session_makes_room() {
        let sessions = Sessions::default();
        let first = sessions.start("a".into()).unwrap();
        {
            let mut map = sessions.map.lock().unwrap();
            let template = map.values().next().unwrap().clone();
            for i in 0..MAX_SESSIONS - 1 {
                map.insert(digest(&format!("filler{i}")), template.clone());
            }
            // The first session is the oldest of all.
            map.get_mut(&digest(&first)).unwrap().started -= Duration::from_secs(1);
        }
        sessions.start("b".into()).unwrap();
        assert_eq!(sessions.len(), MAX_SESSIONS);
        assert!(sessions.get(&first).is_none());
    }
}
