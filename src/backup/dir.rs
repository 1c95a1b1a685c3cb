//! Plain directory trees: `memkv import --from-dir` and `memkv export --to-dir`.

use std::collections::BTreeSet;
use std::fs::{self, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::{Conflict, Entry, Progress, Skipped, Summary, io_error};
use crate::error::Error;
use crate::layout::FileMeta;
use crate::path::MemoryPath;
use crate::storage::{Backend, Finish};
use crate::store::{Store, validate_user};

impl<B: Backend> Store<B> {
    /// Imports a plain directory tree (such as the SDK handler's `memories/` folder) as `user`'s
    /// `/memories`, in one transaction. Symbolic links, special files, files that are not UTF-8
    /// and names the path rules reject are skipped and reported (or, with `strict`, refuse the
    /// whole import). Links are never followed: nothing outside `dir` is read.
    pub fn import_dir(
        &self,
        dir: &Path,
        user: &str,
        strict: bool,
        conflict: Conflict,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<(Summary, Vec<Skipped>), Error> {
        validate_user(user)?;
        let meta = fs::metadata(dir).map_err(io_error(dir))?;
        if !meta.is_dir() {
            return Err(Error::Io {
                path: dir.to_owned(),
                source: io::Error::other("not a directory"),
            });
        }
        let mut entries = Vec::new();
        let mut skipped = Vec::new();
        let now = self.now_ms();
        walk_dir(dir, Path::new(""), user, now, &mut entries, &mut skipped)?;
        // Names that differ only in Unicode normalization are one memory path.
        let mut seen = BTreeSet::new();
        entries.retain(|(rel, e): &(PathBuf, Entry)| {
            let fresh = seen.insert(e.path.clone());
            if !fresh {
                skipped.push(Skipped {
                    path: rel.clone(),
                    reason: format!(
                        "its name is the same memory path as another file ({})",
                        e.path
                    ),
                });
            }
            fresh
        });
        if strict && let Some(first) = skipped.first() {
            return Err(Error::Io {
                path: dir.join(&first.path),
                source: io::Error::other(format!(
                    "{} (--strict refuses the whole import)",
                    first.reason
                )),
            });
        }
        let total = entries.len() as u64;
        let summary = self.backend.write(|txn| {
            let mut summary = Summary::default();
            for (i, (rel, entry)) in entries.iter().enumerate() {
                self.apply(txn, entry, conflict, &mut summary)
                    .map_err(|reason| Error::Io {
                        path: dir.join(rel),
                        source: io::Error::other(reason),
                    })?;
                progress(Progress {
                    phase: "importing",
                    done: i as u64 + 1,
                    total: Some(total),
                });
            }
            summary.users = u64::from(summary.files > 0);
            Ok((summary, Finish::Commit))
        })?;
        Ok((summary, skipped))
    }

    /// Writes `user`'s live files under `dir` as plain files (created if missing). Refuses to
    /// write through a symbolic link or over an existing file, so nothing outside `dir` changes.
    pub fn export_dir(
        &self,
        user: &str,
        dir: &Path,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<Summary, Error> {
        let handle = self.user(user)?;
        if let Ok(meta) = fs::symlink_metadata(dir)
            && !meta.is_dir()
        {
            return Err(Error::Io {
                path: dir.to_owned(),
                source: io::Error::other("not a directory (symbolic links are not followed)"),
            });
        }
        fs::create_dir_all(dir).map_err(io_error(dir))?;
        let files = handle.files()?;
        let total = files.len() as u64;
        let mut summary = Summary::default();
        for f in files {
            let content = handle
                .read_file(&f.path.to_string())?
                .ok_or_else(|| Error::Corrupt(format!("{} vanished during the export", f.path)))?;
            let mut target = dir.to_owned();
            let (name, parents) = f
                .path
                .segments()
                .split_last()
                .expect("files are below the root");
            for segment in parents {
                target.push(segment);
                match fs::symlink_metadata(&target) {
                    Ok(meta) if meta.is_dir() => {}
                    Ok(_) => {
                        return Err(Error::Io {
                            path: target,
                            source: io::Error::other(
                                "exists and is not a directory (symbolic links are not followed)",
                            ),
                        });
                    }
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {
                        fs::create_dir(&target).map_err(io_error(&target))?
                    }
                    Err(e) => {
                        return Err(Error::Io {
                            path: target,
                            source: e,
                        });
                    }
                }
            }
            target.push(name);
            let mut out = OpenOptions::new()
                .write(true)
                .create_new(true)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&target)
                .map_err(io_error(&target))?;
            out.write_all(content.as_bytes())
                .map_err(io_error(&target))?;
            let mtime = UNIX_EPOCH + Duration::from_millis(f.modified_ms.max(0) as u64);
            out.set_modified(mtime).map_err(io_error(&target))?;
            summary.files += 1;
            summary.bytes += f.size;
            progress(Progress {
                phase: "exporting",
                done: summary.files,
                total: Some(total),
            });
        }
        summary.users = u64::from(summary.files > 0);
        Ok(summary)
    }
}

fn walk_dir(
    root: &Path,
    rel: &Path,
    user: &str,
    now: i64,
    entries: &mut Vec<(PathBuf, Entry)>,
    skipped: &mut Vec<Skipped>,
) -> Result<(), Error> {
    let dir = root.join(rel);
    let mut children: Vec<_> = fs::read_dir(&dir)
        .map_err(io_error(&dir))?
        .collect::<Result<_, _>>()
        .map_err(io_error(&dir))?;
    children.sort_by_key(|c| c.file_name());
    for child in children {
        let rel_child = rel.join(child.file_name());
        let skip = |reason: &str| Skipped {
            path: rel_child.clone(),
            reason: reason.to_owned(),
        };
        // Never follows a link: the type is that of the entry itself.
        let meta = fs::symlink_metadata(child.path()).map_err(io_error(&child.path()))?;
        if meta.file_type().is_symlink() {
            skipped.push(skip("symbolic link (not followed)"));
            continue;
        }
        let Some(name) = child.file_name().to_str().map(str::to_owned) else {
            skipped.push(skip("the name is not UTF-8"));
            continue;
        };
        if meta.is_dir() {
            walk_dir(root, &rel_child, user, now, entries, skipped)?;
            continue;
        }
        if !meta.is_file() {
            skipped.push(skip("special file"));
            continue;
        }
        let _ = name;
        let segments: Vec<String> = rel_child
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        let raw = format!("/memories/{}", segments.join("/"));
        let path = match MemoryPath::parse(&raw) {
            Ok(path) => path,
            Err(e) => {
                skipped.push(skip(&format!("not a valid memory path ({e})")));
                continue;
            }
        };
        let mut file = match OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(child.path())
        {
            Ok(file) => file,
            Err(e) => {
                skipped.push(skip(&format!("cannot be read ({e})")));
                continue;
            }
        };
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)
            .map_err(io_error(&child.path()))?;
        let Ok(content) = String::from_utf8(bytes) else {
            skipped.push(skip("the content is not UTF-8"));
            continue;
        };
        let ms = |t: io::Result<SystemTime>| {
            t.ok()
                .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
                .map_or(now, |d| d.as_millis() as i64)
        };
        let modified_ms = ms(meta.modified());
        let created_ms = ms(meta.created()).min(modified_ms);
        entries.push((
            rel_child.clone(),
            Entry {
                user: user.to_owned(),
                path,
                meta: FileMeta::times(created_ms, modified_ms, now),
                content,
            },
        ));
    }
    Ok(())
}
