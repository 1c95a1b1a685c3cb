//! Rate limits: requests per second and a burst, for each API key and for each store, each
//! off unless configured (`serve --rate-limit-key 50:100 --rate-limit-store 20`). A request over a
//! limit is answered 429 `rate_limit_error` with `Retry-After` (whole seconds until the next
//! request would pass) and `x-should-retry: true`; nothing is done for it.
//!
//! The key's limit is checked when a request is authenticated (`auth::identify`: every route,
//! MCP included; keyless serving counts as one key); the store's where a route names its store
//! (the tool route and the memory-stores API). Buckets are GCRA cells of `governor`, one per
//! key or store seen, forgotten once full again (`RateLimits::forget_idle`, every 400 ms with
//! the keys), so memory follows the keys and stores active in the last seconds.

use std::num::NonZeroU32;
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota};

use crate::error::ApiError;

/// A limit: so many requests per second, and up to `burst` at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    /// Requests per second, sustained.
    pub per_second: NonZeroU32,
    /// Requests at once, after a quiet time.
    pub burst: NonZeroU32,
}

impl std::str::FromStr for Rate {
    type Err = String;

    /// `RPS` or `RPS:BURST` (the burst defaults to the rate).
    fn from_str(text: &str) -> Result<Rate, String> {
        let number = |t: &str| {
            t.parse::<NonZeroU32>()
                .map_err(|_| format!("{text:?}: expected RPS or RPS:BURST, whole numbers above 0"))
        };
        let (rate, burst) = match text.split_once(':') {
            Some((r, b)) => (number(r)?, number(b)?),
            None => (number(text)?, number(text)?),
        };
        Ok(Rate {
            per_second: rate,
            burst,
        })
    }
}

impl std::fmt::Display for Rate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.per_second, self.burst)
    }
}

/// The buckets of every key and store.
pub struct RateLimits {
    keys: Option<DefaultKeyedRateLimiter<String>>,
    stores: Option<DefaultKeyedRateLimiter<String>>,
    clock: DefaultClock,
}

impl std::fmt::Debug for RateLimits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimits")
            .field("keys", &self.keys.as_ref().map(|l| l.len()))
            .field("stores", &self.stores.as_ref().map(|l| l.len()))
            .finish()
    }
}

fn limiter(rate: Option<Rate>) -> Option<DefaultKeyedRateLimiter<String>> {
    rate.map(|r| {
        DefaultKeyedRateLimiter::keyed(Quota::per_second(r.per_second).allow_burst(r.burst))
    })
}

impl RateLimits {
    /// Limits per key and per store (`None`: no limit).
    pub fn new(per_key: Option<Rate>, per_store: Option<Rate>) -> Self {
        RateLimits {
            keys: limiter(per_key),
            stores: limiter(per_store),
            clock: DefaultClock::default(),
        }
    }

    /// Counts a request of key `id`: 429 when the key is over its limit.
    pub fn key(&self, id: &str) -> Result<(), ApiError> {
        self.check(self.keys.as_ref(), id, "this API key")
    }

    /// Counts a request to store `id`: 429 when the store is over its limit.
    pub fn store(&self, id: &str) -> Result<(), ApiError> {
        self.check(self.stores.as_ref(), id, "this memory store")
    }

    fn check(
        &self,
        limiter: Option<&DefaultKeyedRateLimiter<String>>,
        id: &str,
        what: &str,
    ) -> Result<(), ApiError> {
        let Some(limiter) = limiter else {
            return Ok(());
        };
        let key = id.to_owned();
        limiter.check_key(&key).map_err(|not_until| {
            let wait = not_until.wait_time_from(self.clock.now());
            ApiError::rate_limited(
                format!(
                    "{what} is over its rate limit; retry in {} ms",
                    wait.as_millis().max(1)
                ),
                seconds_up(wait),
            )
        })
    }

    /// Forgets the buckets that are full again (keys and stores idle for a while).
    pub fn forget_idle(&self) {
        for limiter in [&self.keys, &self.stores].into_iter().flatten() {
            limiter.retain_recent();
            limiter.shrink_to_fit();
        }
    }
}

/// Whole seconds, rounded up, at least 1 (`Retry-After` has no fractions).
fn seconds_up(d: Duration) -> u64 {
    d.as_millis().div_ceil(1000).max(1) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_parse() {
        let r: Rate = "50:100".parse().unwrap();
        assert_eq!((r.per_second.get(), r.burst.get()), (50, 100));
        let r: Rate = "7".parse().unwrap();
        assert_eq!((r.per_second.get(), r.burst.get()), (7, 7));
        assert_eq!(r.to_string(), "7:7");
        for bad in ["0", "x", "1:0", ":3", "2:", "-1"] {
            assert!(bad.parse::<Rate>().is_err(), "{bad}");
        }
    }

    #[test]
    fn a_burst_passes_then_the_rate_holds_per_key() {
        let limits = RateLimits::new(Some("1:3".parse().unwrap()), None);
        for _ in 0..3 {
            limits.key("a").unwrap();
        }
        let refused = limits.key("a").unwrap_err();
        assert_eq!(refused.status.as_u16(), 429);
        assert_eq!(refused.retry_after, Some(1));
        // Another key has a bucket of its own; stores are not limited.
        limits.key("b").unwrap();
        for _ in 0..100 {
            limits.store("s").unwrap();
        }
        assert_eq!(seconds_up(Duration::from_millis(1001)), 2);
        assert_eq!(seconds_up(Duration::ZERO), 1);
    }
}
