//! Time formatting without a calendar dependency, and durations as stored milliseconds.

use std::time::Duration;

/// Milliseconds of a duration, saturating.
pub(crate) fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// `YYYY-MM-DDTHH:MM:SSZ` from milliseconds since the epoch (civil-from-days, proleptic Gregorian).
pub fn utc(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ` (RFC 3339 in UTC, with milliseconds: the memory-stores API's
/// times) from milliseconds since the epoch.
pub fn rfc3339_ms(ms: i64) -> String {
    let seconds = utc(ms);
    let base = seconds.strip_suffix('Z').unwrap_or(&seconds);
    format!("{base}.{:03}Z", ms.rem_euclid(1000))
}

#[cfg(test)]
mod tests {
    #[test]
    fn utc_formats_known_instants() {
        assert_eq!(super::utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(super::utc(951_782_400_000), "2000-02-29T00:00:00Z");
        assert_eq!(super::utc(1_796_000_000_123), "2026-11-30T00:53:20Z");
        assert_eq!(super::utc(-1), "1969-12-31T23:59:59Z");
    }
}
