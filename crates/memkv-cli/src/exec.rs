//! `memkv exec`: the JSON Lines loop. Every line gets exactly one answer line, whatever it
//! holds (not JSON, not UTF-8, too long), and the stream goes on.

use std::io::{self, BufReader, Write};

use memkv::Actor;
use memkv::lines::{self, Line};
use memkv::protocol::{self, InvalidMessage};

use crate::args::{ExecArgs, Global};

pub fn run(global: &Global, args: &ExecArgs) -> Result<(), Box<dyn std::error::Error>> {
    let path = global.db_path()?;
    global.create_db_dir()?;
    let store = global.builder().open(&path)?;
    // Every version written is recorded as made by this session.
    let session = args
        .session
        .clone()
        .unwrap_or_else(|| format!("exec:{}", std::process::id()));
    let user = store
        .user(&args.user)?
        .with_actor(Some(Actor::Session(session)));
    let cap = protocol::max_message_bytes(store.limits());
    let mut stdin = BufReader::with_capacity(64 * 1024, io::stdin().lock());
    let mut stdout = io::stdout().lock();
    let mut line = Vec::new();
    let mut failures = 0u64;
    loop {
        let answer = match lines::read_line(&mut stdin, &mut line, cap)? {
            Line::End => break,
            Line::TooLong(_) => protocol::to_line(&InvalidMessage::TooLong { limit: cap }.output()),
            Line::Complete if line.trim_ascii().is_empty() => continue,
            Line::Complete => {
                let (answer, errors) = protocol::answer_line(&user, &line);
                for e in errors {
                    failures += 1;
                    note!("memkv: {}", crate::text::safe_lines(&e.to_string()));
                }
                answer
            }
        };
        writeln!(stdout, "{answer}")?;
        stdout.flush()?;
    }
    if failures > 0 {
        return Err(format!("{failures} command(s) failed in storage and were not applied").into());
    }
    Ok(())
}
