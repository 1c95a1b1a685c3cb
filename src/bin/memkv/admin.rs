//! Operator commands: `users`, `tree`, `cat`.

use std::io::{self, Write};

use memkv::Store;

use crate::args::{CatArgs, Global, UserArg};

type Result<T = ()> = std::result::Result<T, Box<dyn std::error::Error>>;

fn open(global: &Global) -> Result<Store> {
    Ok(global.builder().open_existing(global.db_path()?)?)
}

pub fn users(global: &Global) -> Result {
    let store = open(global)?;
    let mut out = io::stdout().lock();
    writeln!(out, "{:>8}  {:>12}  USER", "FILES", "BYTES")?;
    for u in store.users()? {
        writeln!(out, "{:>8}  {:>12}  {}", u.files, u.bytes, u.user)?;
    }
    Ok(())
}

pub fn tree(global: &Global, args: &UserArg) -> Result {
    let store = open(global)?;
    let user = store.user(&args.user)?;
    let mut out = io::stdout().lock();
    for f in user.files()? {
        writeln!(out, "{:>8}  {}  {}", f.size, utc(f.modified_ms), f.path)?;
    }
    Ok(())
}

pub fn cat(global: &Global, args: &CatArgs) -> Result {
    let store = open(global)?;
    let user = store.user(&args.user)?;
    match user.read_file(&args.path)? {
        Some(content) => {
            io::stdout().lock().write_all(content.as_bytes())?;
            Ok(())
        }
        None => Err(format!("{}: no such file for user {:?}", args.path, args.user).into()),
    }
}

/// `YYYY-MM-DDTHH:MM:SSZ` from milliseconds since the epoch (civil-from-days, proleptic Gregorian).
fn utc(ms: i64) -> String {
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

#[cfg(test)]
mod tests {
    #[test]
    fn utc_formats_known_instants() {
        assert_eq!(super::utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(super::utc(951_782_400_000), "2000-02-29T00:00:00Z");
        assert_eq!(super::utc(1_796_000_000_123), "2026-11-30T00:53:20Z");
    }
}
