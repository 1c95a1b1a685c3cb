//! `memkv exec`: the JSON Lines loop.

use std::io::{self, BufRead, Write};

use crate::args::{ExecArgs, Global};

pub fn run(global: &Global, args: &ExecArgs) -> Result<(), Box<dyn std::error::Error>> {
    let path = global.db_path()?;
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
    }
    let store = global.builder().open(&path)?;
    let user = store.user(&args.user)?;
    let stdin = io::stdin().lock();
    let mut stdout = io::stdout().lock();
    let mut failures = 0u64;
    for line in stdin.lines() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let (answer, error) = user.respond_line(&line);
        if let Some(e) = error {
            failures += 1;
            eprintln!("memkv: {e}");
        }
        writeln!(stdout, "{answer}")?;
        stdout.flush()?;
    }
    if failures > 0 {
        return Err(format!("{failures} command(s) failed in storage and were not applied").into());
    }
    Ok(())
}
