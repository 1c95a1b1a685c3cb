//! Time formatting without a calendar dependency, and durations as stored milliseconds.
//!
//! Kept by hand, measured against the crates of the lock file (issue 43): `time` 0.3 (a
//! dependency of tantivy) and `chrono` 0.4 (of rmcp and schemars) format 2,000,000 instants
//! spread over the years 0 to 9999 exactly as [`rfc3339_ms`] does, and parse every ordinary
//! input as [`parse_rfc3339`] does (`T`, `t` or a space; `Z`, `z` or an offset; any number of
//! fraction digits). They differ in two places, where neither can take these functions' place
//! without the code it would replace: a leap second (`…:60Z`) is the next second's first
//! millisecond in chrono and refused by `time` unless it ends a UTC day, where here it is the
//! 59th second, as before; and an instant outside the years 0 to 9999 (`utc` and
//! `rfc3339_ms` take any `i64`) is no date to `time`, none to chrono past ±262,143 years and
//! `+10000-…` before that. Speed decides nothing: all three format in 0.2 to 0.4 µs and parse
//! in under 0.15 µs.

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

/// Milliseconds since the epoch from an RFC 3339 time (`2026-11-30T13:45:00Z`,
/// `2026-11-30T13:45:00.5+01:00`); fractions below a millisecond are dropped.
pub fn parse_rfc3339(text: &str) -> Option<i64> {
    let b = text.as_bytes();
    let digits = |range: std::ops::Range<usize>| -> Option<i64> {
        let part = b.get(range)?;
        if part.is_empty() || !part.iter().all(u8::is_ascii_digit) {
            return None;
        }
        std::str::from_utf8(part).ok()?.parse().ok()
    };
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || b[13] != b':' || b[16] != b':' {
        return None;
    }
    if !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    let (year, month, day) = (digits(0..4)?, digits(5..7)?, digits(8..10)?);
    let (hour, minute, second) = (digits(11..13)?, digits(14..16)?, digits(17..19)?);
    if !(1..=12).contains(&month)
        || day < 1
        || day > days_in_month(year, month)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    let mut i = 19;
    let mut millis = 0;
    if b[i] == b'.' {
        let start = i + 1;
        i = start;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == start {
            return None;
        }
        let frac = &text[start..i.min(start + 3)];
        millis = frac.parse::<i64>().ok()? * 10_i64.pow(3 - frac.len() as u32);
    }
    let offset_minutes = match &b[i..] {
        [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), _, _, b':', _, _] => {
            let (h, m) = (digits(i + 1..i + 3)?, digits(i + 4..i + 6)?);
            if h > 23 || m > 59 {
                return None;
            }
            let minutes = h * 60 + m;
            if *sign == b'+' { minutes } else { -minutes }
        }
        _ => return None,
    };
    let days = days_from_civil(year, month, day);
    let seconds = days * 86_400 + hour * 3600 + minute * 60 + second.min(59) - offset_minutes * 60;
    Some(seconds * 1000 + millis)
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
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

    #[test]
    fn where_the_calendar_crates_differ() {
        // A leap second is the 59th second, wherever it falls.
        let at = |t| super::parse_rfc3339(t).unwrap();
        assert_eq!(at("2026-12-05T09:00:60Z"), at("2026-12-05T09:00:59Z"));
        assert_eq!(at("2026-12-31T23:59:60.5Z"), at("2026-12-31T23:59:59.5Z"));
        // Every instant has a text, outside the years 0 to 9999 too.
        assert_eq!(
            super::rfc3339_ms(253_402_300_800_000),
            "10000-01-01T00:00:00.000Z"
        );
        assert_eq!(super::utc(i64::MAX), "292278994-08-17T07:12:55Z");
        assert_eq!(super::utc(-62_167_219_200_001), "-001-12-31T23:59:59Z");
    }
}
