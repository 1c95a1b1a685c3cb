//! Where an import reads from: an export file, or standard input spooled to one, read line by
//! line (twice: `super::verify`, then `super::import`).

use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Read, Seek, Write};
use std::path::{Path, PathBuf};

use super::{Line, import_error, max_line_bytes};
use crate::error::Error;
use crate::limits::Limits;

/// An export file ready to be imported: read twice (verify, then apply), so it must be a file
/// that can be read again. A regular file is read in place; anything else (standard input, a
/// named pipe, a process substitution `<(…)`, a device) is first copied into an anonymous
/// temporary file (unlinked while open: nothing is left behind, even by a killed process).
///
/// Open the source before the database: a pipe may wait for its writer, and nothing should wait
/// while the database is locked. The copy reads lines of at most the longest line an import
/// accepts, so input without newlines (`/dev/zero`) is refused after a bounded read.
pub struct ImportSource {
    file: File,
    name: PathBuf,
    cap: usize,
}

impl ImportSource {
    /// Opens `path` (following links: `/dev/fd/N` works) for an import under `limits`.
    ///
    /// # Errors
    /// [`Error::Io`] naming `path` (a directory is refused); [`Error::Import`] for a line over
    /// the length cap met while copying a non-regular input.
    pub fn open(path: &Path, limits: &Limits) -> Result<Self, Error> {
        let fail = |source: io::Error| Error::Io {
            path: path.to_owned(),
            source,
        };
        let file = File::open(path).map_err(fail)?;
        let meta = file.metadata().map_err(fail)?;
        if meta.is_dir() {
            return Err(fail(io::Error::other(
                "is a directory (to import a plain directory tree, use --from-dir)",
            )));
        }
        if meta.is_file() {
            return Ok(ImportSource {
                file,
                name: path.to_owned(),
                cap: max_line_bytes(limits),
            });
        }
        Self::spool(file, path, limits)
    }

    /// Copies standard input for an import under `limits`.
    ///
    /// # Errors
    /// As [`Self::open`].
    pub fn stdin(limits: &Limits) -> Result<Self, Error> {
        Self::spool(io::stdin().lock(), Path::new("standard input"), limits)
    }

    /// Copies `input` (named `name` in errors) into an anonymous temporary file.
    ///
    /// # Errors
    /// As [`Self::open`].
    pub fn spool(input: impl Read, name: &Path, limits: &Limits) -> Result<Self, Error> {
        let cap = max_line_bytes(limits);
        let tmp_error = |source: io::Error| Error::Io {
            path: std::env::temp_dir(),
            source,
        };
        let mut spool = tempfile::tempfile().map_err(tmp_error)?;
        let mut reader = BufReader::new(input);
        let mut out = BufWriter::new(&mut spool);
        let mut line = Vec::new();
        let mut n = 0;
        while next_line(&mut reader, &mut line, cap, n + 1, name)? {
            n += 1;
            // Input that is not an export at all (`yes`, random bytes) stops at its first line
            // rather than filling the temporary directory.
            if n == 1 && !matches!(parse_line(1, &mut line.clone())?, Line::Header { .. }) {
                return Err(import_error(1, NOT_A_HEADER));
            }
            out.write_all(&line).map_err(tmp_error)?;
        }
        out.flush().map_err(tmp_error)?;
        drop(out);
        Ok(ImportSource {
            file: spool,
            name: name.to_owned(),
            cap,
        })
    }

    fn rewind(&mut self) -> Result<BufReader<&File>, Error> {
        self.file.rewind().map_err(|source| Error::Io {
            path: self.name.clone(),
            source,
        })?;
        Ok(BufReader::with_capacity(64 * 1024, &self.file))
    }
}

/// Reads the next line (with its newline) into `line`: `false` at the end. A line over `cap`
/// bytes is refused as soon as the cap is passed.
fn next_line(
    reader: &mut impl BufRead,
    line: &mut Vec<u8>,
    cap: usize,
    n: u64,
    name: &Path,
) -> Result<bool, Error> {
    line.clear();
    let limit = u64::try_from(cap).unwrap_or(u64::MAX).saturating_add(1);
    let read = reader
        .take(limit)
        .read_until(b'\n', line)
        .map_err(|source| Error::Io {
            path: name.to_owned(),
            source,
        })?;
    if read as u64 == limit && line.last() != Some(&b'\n') {
        return Err(import_error(
            n,
            format!(
                "longer than {cap} bytes, the longest line an import reads under this file-size limit"
            ),
        ));
    }
    Ok(read > 0)
}

/// Called with each line's number, raw bytes (with its newline) and parsed value.
pub(super) type LineVisit<'v> = &'v mut dyn FnMut(u64, &[u8], Line) -> Result<(), Error>;

/// The UTF-8 byte order mark some editors put at the start of a text file.
const BOM: &[u8] = b"\xef\xbb\xbf";

/// Calls `f` with each line of `source`, from its start; returns the number of lines. A UTF-8
/// byte order mark before the first line is skipped (and not part of the digest).
pub(super) fn for_each_line(source: &mut ImportSource, f: LineVisit<'_>) -> Result<u64, Error> {
    let (cap, name) = (source.cap, source.name.clone());
    let mut reader = source.rewind()?;
    let mut raw = Vec::new();
    let mut n = 0;
    while next_line(&mut reader, &mut raw, cap, n + 1, &name)? {
        n += 1;
        let line = parse_line(n, &mut raw)?;
        f(n, &raw, line)?;
    }
    Ok(n)
}

/// Parses line `n` (with its newline); a byte order mark before line 1 is removed from `raw`.
fn parse_line(n: u64, raw: &mut Vec<u8>) -> Result<Line, Error> {
    if n == 1 && raw.starts_with(BOM) {
        raw.drain(..BOM.len());
    }
    if raw.last() != Some(&b'\n') {
        return Err(import_error(n, "the last line has no newline (truncated?)"));
    }
    let text = std::str::from_utf8(raw).map_err(|_| import_error(n, "not UTF-8"))?;
    serde_json::from_str(text).map_err(|e| import_error(n, format!("not a valid export line: {e}")))
}

pub(super) const NOT_A_HEADER: &str = "the first line is not a memkv export header";
