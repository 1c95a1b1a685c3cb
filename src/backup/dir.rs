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
use crate::pipeline::{Engine, Scope};
use crate::storage::Finish;
use crate::user_id::validate_user;

/// The body of [`crate::Database::import_dir`].
pub(crate) fn import_dir(
    db: &Engine,
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
    let now = db.now_ms();
    let max = db.limits.max_file_bytes;
    let walk = Walk {
        root: dir,
        user,
        now,
        max,
    };
    walk.dir(Path::new(""), &mut entries, &mut skipped)?;
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
            path: dir.to_owned(),
            source: io::Error::other(format!("{first} (--strict refuses the whole import)")),
        });
    }
    let total = entries.len() as u64;
    let mut fetches = Vec::new();
    crate::tree::index_fetches(user, &mut fetches);
    let summary = db.transact(&[user], false, |txn, changes| {
        txn.prefetch(&fetches, false)?;
        let mut summary = Summary::default();
        for (i, (rel, entry)) in entries.iter().enumerate() {
            super::import::apply(db, txn, changes, entry, conflict, &mut summary).map_err(
                |reason| Error::Io {
                    path: dir.join(rel),
                    source: io::Error::other(reason),
                },
            )?;
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

/// The body of [`crate::Database::export_dir`].
pub(crate) fn export_dir(
    db: &Engine,
    user: &str,
    dir: &Path,
    progress: &mut dyn FnMut(Progress),
) -> Result<Summary, Error> {
    validate_user(user)?;
    let scope = Scope {
        engine: db,
        user,
        actor: None,
    };
    if !crate::admin::users(db)?.iter().any(|u| u.user == user) {
        return Err(Error::UnknownUser {
            user: user.to_owned(),
        });
    }
    let refuse = |why: &str| Error::Io {
        path: dir.to_owned(),
        source: io::Error::other(why.to_owned()),
    };
    let mut written = Written::default();
    match fs::symlink_metadata(dir) {
        Ok(meta) if meta.file_type().is_symlink() => {
            return Err(refuse("is a symbolic link (not followed)"));
        }
        Ok(meta) if !meta.is_dir() => return Err(refuse("exists and is not a directory")),
        Ok(_) => {
            if fs::read_dir(dir).map_err(io_error(dir))?.next().is_some() {
                return Err(refuse(
                    "is not empty (export into a new or an empty directory)",
                ));
            }
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            fs::create_dir_all(dir).map_err(io_error(dir))?;
            written.dirs.push(dir.to_owned());
        }
        Err(e) => return Err(io_error(dir)(e)),
    }
    let result = write_tree(scope, dir, &mut written, progress);
    if result.is_err() {
        written.remove();
    }
    result
}

/// What an export to a directory created, to remove it again after an error.
#[derive(Default)]
struct Written {
    dirs: Vec<PathBuf>,
    files: Vec<PathBuf>,
}

impl Written {
    fn remove(&self) {
        for f in self.files.iter().rev() {
            let _ = fs::remove_file(f);
        }
        for d in self.dirs.iter().rev() {
            let _ = fs::remove_dir(d);
        }
    }
}

fn write_tree(
    scope: Scope<'_>,
    dir: &Path,
    written: &mut Written,
    progress: &mut dyn FnMut(Progress),
) -> Result<Summary, Error> {
    let files = crate::admin::files(scope)?;
    let total = files.len() as u64;
    let mut summary = Summary::default();
    for f in files {
        let content = crate::admin::read_file(scope, &f.path.to_string())?
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
                    fs::create_dir(&target).map_err(io_error(&target))?;
                    written.dirs.push(target.clone());
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
        written.files.push(target.clone());
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

/// A walk of a directory tree for [`crate::Database::import_dir`].
struct Walk<'a> {
    root: &'a Path,
    user: &'a str,
    now: i64,
    /// The file-size limit: larger files are skipped unread.
    max: u64,
}

impl Walk<'_> {
    fn dir(
        &self,
        rel: &Path,
        entries: &mut Vec<(PathBuf, Entry)>,
        skipped: &mut Vec<Skipped>,
    ) -> Result<(), Error> {
        let dir = self.root.join(rel);
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
            if child.file_name().to_str().is_none() {
                skipped.push(skip("the name is not UTF-8"));
                continue;
            }
            if meta.is_dir() {
                self.dir(&rel_child, entries, skipped)?;
                continue;
            }
            if !meta.is_file() {
                skipped.push(skip("special file"));
                continue;
            }
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
            let too_large = || {
                skip(&format!(
                    "larger than the file-size limit ({} bytes)",
                    self.max
                ))
            };
            if meta.len() > self.max {
                skipped.push(too_large());
                continue;
            }
            let file = match OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
                .open(child.path())
            {
                Ok(file) => file,
                Err(e) => {
                    skipped.push(skip(&format!("cannot be read ({e})")));
                    continue;
                }
            };
            // Checked again on the open file: the entry may have been swapped meanwhile.
            if !file.metadata().is_ok_and(|m| m.is_file()) {
                skipped.push(skip("special file"));
                continue;
            }
            // The file may have grown since its size was read: never read past the limit.
            let mut bytes = Vec::new();
            file.take(self.max.saturating_add(1))
                .read_to_end(&mut bytes)
                .map_err(io_error(&child.path()))?;
            if bytes.len() as u64 > self.max {
                skipped.push(too_large());
                continue;
            }
            let Ok(content) = String::from_utf8(bytes) else {
                skipped.push(skip("the content is not UTF-8"));
                continue;
            };
            // Times from the future would make a file immune to expiry: they count as now.
            let ms = |t: io::Result<SystemTime>| {
                t.ok()
                    .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
                    .map_or(self.now, |d| {
                        i64::try_from(d.as_millis())
                            .unwrap_or(i64::MAX)
                            .min(self.now)
                    })
            };
            let modified_ms = ms(meta.modified());
            let created_ms = ms(meta.created()).min(modified_ms);
            entries.push((
                rel_child.clone(),
                Entry {
                    user: self.user.to_owned(),
                    path,
                    meta: FileMeta::times(created_ms, modified_ms, self.now),
                    content,
                },
            ));
        }
        Ok(())
    }
}
