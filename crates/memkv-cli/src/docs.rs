//! `memkv completions` and `memkv man`: generated from the clap definitions, so they always
//! list the flags this build has.

use std::io::{self, Write};
use std::path::Path;

use clap::CommandFactory;

use crate::args::Cli;

type Result<T = ()> = std::result::Result<T, Box<dyn std::error::Error>>;

pub fn completions(shell: clap_complete::Shell) -> Result {
    let mut command = crate::config::with_env(Cli::command());
    // Into a buffer first: clap_complete panics on a failed write (a closed pipe), and a
    // closed pipe is an exit code here.
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut command, "memkv", &mut script);
    let mut out = io::stdout().lock();
    out.write_all(&script)?;
    out.flush()?;
    Ok(())
}

pub fn man(out_dir: Option<&Path>) -> Result {
    let command = crate::config::with_env(Cli::command());
    match out_dir {
        None => {
            let mut page = Vec::new();
            clap_mangen::Man::new(command).render(&mut page)?;
            let mut out = io::stdout().lock();
            out.write_all(&page)?;
            out.flush()?;
        }
        Some(dir) => {
            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            clap_mangen::generate_to(command, dir)
                .map_err(|e| format!("{}: {e}", dir.display()))?;
            let mut pages: Vec<_> = std::fs::read_dir(dir)?
                .filter_map(|e| e.ok().map(|e| e.file_name()))
                .collect();
            pages.sort();
            eprintln!(
                "memkv: wrote {} manual pages to {}",
                pages.len(),
                dir.display()
            );
        }
    }
    Ok(())
}
