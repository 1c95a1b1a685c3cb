//! `memkv export`: one read snapshot, streamed as JSON Lines.

use std::io::{self, BufWriter, Write};
use std::ops::ControlFlow;

use sha2::{Digest, Sha256};

use super::{EXPORT_FORMAT, EXPORT_VERSION, Line, Progress, Summary, hex, sha256_hex};
use crate::error::Error;
use crate::exec::Expired;
use crate::storage::Backend;
use crate::store::Store;
use crate::tree::TreeRead;

/// A writer that hashes what passes through it.
struct Hashing<W> {
    inner: W,
    hasher: Sha256,
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

impl<B: Backend> Store<B> {
    /// Writes a consistent snapshot of `users` (every user when empty) to `out`, one read
    /// transaction, streamed: memory stays constant however large the store. Expired files are
    /// left out.
    pub fn export(
        &self,
        users: &[String],
        out: impl Write,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<Summary, Error> {
        let txn = self.backend.begin_read()?;
        let selected: Vec<_> = self
            .users()?
            .into_iter()
            .filter(|u| users.is_empty() || users.contains(&u.user))
            .collect();
        let total: u64 = selected.iter().map(|u| u.files).sum();
        let mut out = Hashing {
            inner: BufWriter::new(out),
            hasher: Sha256::new(),
        };
        let write_line = |out: &mut Hashing<BufWriter<_>>, line: &Line| -> Result<(), Error> {
            serde_json::to_writer(&mut *out, line).map_err(|e| Error::storage(e.to_string()))?;
            out.write_all(b"\n")
                .map_err(|e| Error::storage(format!("writing the export: {e}")))
        };
        let now = self.now_ms();
        write_line(
            &mut out,
            &Line::Header {
                format: EXPORT_FORMAT.into(),
                version: EXPORT_VERSION,
                created_ms: now,
                created: crate::time::utc(now),
                memkv_version: env!("CARGO_PKG_VERSION").into(),
            },
        )?;
        let mut summary = Summary::default();
        for user in &selected {
            let tree = TreeRead::new(&txn, &user.user);
            let expired = Expired::load(&tree, self.settings(&user.user).expiry_cutoff(now))?;
            let mut any = false;
            tree.files(&mut |path, meta| {
                if expired.contains(&path) {
                    return Ok(ControlFlow::Continue(()));
                }
                let content = tree
                    .content(&path)?
                    .ok_or_else(|| Error::Corrupt(format!("{path} has no content")))?;
                write_line(
                    &mut out,
                    &Line::File {
                        user: user.user.clone(),
                        path: path.to_string(),
                        sha256: sha256_hex(content.as_bytes()),
                        content,
                        created_ms: meta.created_ms,
                        modified_ms: meta.modified_ms,
                        accessed_ms: meta.accessed_ms,
                    },
                )?;
                any = true;
                summary.files += 1;
                summary.bytes += meta.size;
                progress(Progress {
                    phase: "exporting",
                    done: summary.files,
                    total: Some(total),
                });
                Ok(ControlFlow::Continue(()))
            })?;
            summary.users += u64::from(any);
        }
        let digest = hex(&out.hasher.clone().finalize());
        write_line(
            &mut out,
            &Line::Trailer {
                files: summary.files,
                users: summary.users,
                bytes: summary.bytes,
                sha256: digest,
            },
        )?;
        out.flush()
            .map_err(|e| Error::storage(format!("writing the export: {e}")))?;
        Ok(summary)
    }
}
