//! A page-level check of a database file, for `memkv check`: redb's own integrity check (the
//! checksum of every page of the committed trees) run over a copy-on-write view of the file, so
//! that the repair it may attempt stays in memory and the file is never written.
//!
//! memkv's record checks (`crate::check`) find what memkv can see: records that do not decode,
//! totals that do not add up, content that no longer matches its SHA-256. A damaged page can
//! also hold values that decode and agree but are wrong (a flipped bit in a time); only the page
//! checksums catch those.
//!
//! The view reads the file as it is: with a `--shared` writer committing meanwhile, the check
//! can see a half-written commit and report damage that a second run does not find.

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Mutex;

use redb::{Database, StorageBackend};

use super::health::Health;
use crate::error::Error;

const BLOCK: u64 = 4096;

/// The file, read-only, with every write kept in memory (block by block).
#[derive(Debug)]
struct CopyOnWrite {
    file: File,
    state: Mutex<Blocks>,
}

#[derive(Debug)]
struct Blocks {
    len: u64,
    /// The file's bytes from here on were cut off (by a shrink) and read as zeros.
    zero_from: u64,
    written: HashMap<u64, Vec<u8>>,
}

impl CopyOnWrite {
    fn open(path: &Path) -> io::Result<Self> {
        let file = File::open(path)?;
        let len = file.metadata()?.len();
        Ok(CopyOnWrite {
            file,
            state: Mutex::new(Blocks {
                len,
                zero_from: len,
                written: HashMap::new(),
            }),
        })
    }

    /// Block `n` as the file (or memory) holds it; zeros past the end.
    fn block(&self, blocks: &Blocks, n: u64) -> io::Result<Vec<u8>> {
        if let Some(b) = blocks.written.get(&n) {
            return Ok(b.clone());
        }
        let mut b = vec![0u8; BLOCK as usize];
        let start = n * BLOCK;
        if start < blocks.zero_from {
            let n = (blocks.zero_from - start).min(BLOCK) as usize;
            self.file.read_exact_at(&mut b[..n], start)?;
        }
        Ok(b)
    }
}

impl StorageBackend for CopyOnWrite {
    fn len(&self) -> io::Result<u64> {
        Ok(self.lock().len)
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> io::Result<()> {
        let blocks = self.lock();
        if offset + out.len() as u64 > blocks.len {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "read past the end",
            ));
        }
        let mut done = 0;
        while done < out.len() {
            let at = offset + done as u64;
            let (n, within) = (at / BLOCK, (at % BLOCK) as usize);
            let take = (BLOCK as usize - within).min(out.len() - done);
            let b = self.block(&blocks, n)?;
            out[done..done + take].copy_from_slice(&b[within..within + take]);
            done += take;
        }
        Ok(())
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        let mut blocks = self.lock();
        if len < blocks.len {
            // What is cut off reads as zeros if the storage grows again.
            blocks.zero_from = blocks.zero_from.min(len);
            blocks.written.retain(|&n, _| n * BLOCK < len);
            if let Some(b) = blocks.written.get_mut(&(len / BLOCK)) {
                b[(len % BLOCK) as usize..].fill(0);
            }
        }
        blocks.len = len;
        Ok(())
    }

    fn sync_data(&self) -> io::Result<()> {
        Ok(())
    }

    fn write(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        let mut blocks = self.lock();
        let mut done = 0;
        while done < data.len() {
            let at = offset + done as u64;
            let (n, within) = (at / BLOCK, (at % BLOCK) as usize);
            let take = (BLOCK as usize - within).min(data.len() - done);
            let mut b = self.block(&blocks, n)?;
            b[within..within + take].copy_from_slice(&data[done..done + take]);
            blocks.written.insert(n, b);
            done += take;
        }
        blocks.len = blocks.len.max(offset + data.len() as u64);
        Ok(())
    }
}

impl CopyOnWrite {
    fn lock(&self) -> std::sync::MutexGuard<'_, Blocks> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Runs redb's integrity check on the file at `path` without writing to it; the problems found.
pub(super) fn pages(path: &Path) -> Result<Vec<String>, Error> {
    let view = CopyOnWrite::open(path).map_err(|e| Error::Io {
        path: path.to_owned(),
        source: e,
    })?;
    let health = Health::new(&path.display().to_string());
    let damaged = |what: String| Ok(vec![format!("redb's page check: {what}")]);
    let db = health.guard(|| {
        Database::builder()
            .create_with_backend(view)
            .map_err(|e| health.fail(e))
    });
    let mut db = match db {
        Ok(db) => db,
        Err(Error::Corrupt(e)) => return damaged(e),
        Err(e) => return damaged(format!("the file does not open: {e}")),
    };
    let verdict = health.guard(|| db.check_integrity().map_err(|e| health.fail(e)));
    super::health::quietly(|| drop(db));
    match verdict {
        Ok(true) => Ok(Vec::new()),
        Ok(false) => damaged(
            "pages of the last commit do not match their checksums: the file was damaged".into(),
        ),
        Err(e) => damaged(e.to_string()),
    }
}
