//! Durations as the options take them.

use std::time::Duration;

/// `90s`, `15m`, `12h`, `30d`, `2w`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    // humantime: 90s, 15m, 1h30m, "1h 30m", 30d, 2w, 1y (365.25 days), 500ms.
    humantime::parse_duration(text)
        .map_err(|e| format!("{text:?} is not a duration like 90s, 15m, 1h30m, 30d or 2w: {e}"))
}
