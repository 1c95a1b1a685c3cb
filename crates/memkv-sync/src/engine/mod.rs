//! The reconciliation: for one memory path, the file (L), the memory (R) and the last state both
//! agreed on (B, the base) decide what to do.
//!
//! | L vs R | B | what happens |
//! | --- | --- | --- |
//! | same content (or both absent) | any | agreed: B becomes it |
//! | differ | R is B | the file changed: upload it (create, update or delete, with B's hash as the precondition) |
//! | differ | L is B | the memory changed: write it to the file (or remove the file) |
//! | differ | neither | both changed: an edit beats a delete; two edits keep the memory at the name and the file as a conflict copy beside it, uploaded too |
//!
//! A 409 (the memory moved on since B) makes the path look again with the memory as it is now,
//! a few times at most; a file that changes while the sync writes it is left alone and looked at
//! again. Nothing is ever uploaded that the store already has: an upload comes back through the
//! feed as a memory equal to the file, which is "agreed".

use std::collections::BTreeMap;

mod renames;

use crate::Error;
use crate::api::{Api, ApiError, Memory};
use crate::local::{Folder, Found, Fp, LocalFile, Skip};
use crate::rules::{conflict_affixes, conflict_name, local_name, memory_path};
use crate::state::{Base, State};
use crate::status::Report;

/// Looks at one path again after a 409 at most this many times in one go.
const TRIES: usize = 4;

/// What is known of the memory at a path.
#[derive(Debug, Clone)]
pub enum Remote {
    /// Nothing new: as the base says (absent when there is none).
    AsBase,
    /// No memory at the path.
    Gone,
    /// This memory (its content fetched when needed).
    At(Memory),
}

/// The file at a path, as far as the decision needs it.
#[derive(Debug, Clone)]
struct Local {
    sha: String,
    fp: Fp,
    /// Read only when the file changed since the base.
    content: Option<String>,
}

/// How a path ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Done,
    /// The file changed while the sync worked on it: look again once it settles.
    Again,
}

/// One folder and its store.
pub struct Engine {
    pub api: Api,
    pub folder: Folder,
    pub state: State,
    /// This machine's name, in conflict copies' names.
    pub host: String,
    bases: BTreeMap<String, Base>,
    /// What a write whose answer never came (the connection cut, the server restarted) may
    /// have made the memory at a path (`None`: deleted). Seen there later, it is the sync's own
    /// write, the new base, not a change from elsewhere.
    sent: BTreeMap<String, Option<String>>,
    /// Downloads being written (memory id, content hash): a file found holding one after a
    /// crash came from the store, and is the base, not a new local file.
    fetched: BTreeMap<String, (String, String)>,
    pub report: Report,
}

impl Engine {
    pub fn new(api: Api, folder: Folder, state: State, host: String) -> Result<Engine, Error> {
        let bases = state.bases()?;
        let sent = state.sent()?;
        let fetched = state.fetched()?;
        Ok(Engine {
            api,
            folder,
            state,
            host,
            bases,
            sent,
            fetched,
            report: Report::default(),
        })
    }

    pub fn bases(&self) -> &BTreeMap<String, Base> {
        &self.bases
    }

    pub(super) fn set_base(&mut self, path: &str, base: Option<Base>) -> Result<(), Error> {
        self.state.set_base(path, base.as_ref())?;
        match base {
            Some(b) => self.bases.insert(path.to_owned(), b),
            None => self.bases.remove(path),
        };
        Ok(())
    }

    /// Answered writes ended: each path's base set (or removed) and its write sent forgotten,
    /// in one flushed commit.
    pub(super) fn settle(&mut self, bases: Vec<(&str, Option<Base>)>) -> Result<(), Error> {
        let rows: Vec<(&str, Option<&Base>)> =
            bases.iter().map(|(p, b)| (*p, b.as_ref())).collect();
        self.state.settle(&rows)?;
        for (path, base) in bases {
            self.sent.remove(path);
            self.fetched.remove(path);
            match base {
                Some(b) => self.bases.insert(path.to_owned(), b),
                None => self.bases.remove(path),
            };
        }
        Ok(())
    }

    /// Records, before a write is sent, what it will make the memory at `path`: kept on disk,
    /// so that a sync killed before the answer came knows its own write when it sees it.
    pub(super) fn send(&mut self, path: &str, sha: Option<&str>) -> Result<(), Error> {
        let sha = sha.map(str::to_owned);
        self.state.set_sent(path, Some(&sha))?;
        self.sent.insert(path.to_owned(), sha);
        Ok(())
    }

    pub(super) fn unsend(&mut self, path: &str) -> Result<(), Error> {
        if self.sent.remove(path).is_some() {
            self.state.set_sent(path, None)?;
        }
        Ok(())
    }

    fn skip(&mut self, rel: &str, skip: Skip, fp: Option<Fp>) -> Result<(), Error> {
        let known = self.state.skip_of(rel)?;
        if known.as_ref().map(|(s, f)| (s, *f)) != Some((&skip, fp)) {
            tracing::warn!(file = rel, "not synced: {skip}");
            self.state.set_skipped(rel, Some((&skip, fp)))?;
        }
        Ok(())
    }

    /// The file at `rel`: `Ok(None)` absent, `Err(())` left out (recorded).
    fn local(
        &mut self,
        rel: &str,
        base: Option<&Base>,
    ) -> Result<Result<Option<Local>, Outcome>, Error> {
        // Unchanged since the base (same fingerprint): its content is the base's.
        if let Some(b) = base
            && let Some(fp) = b.fp
            && self.folder.stat(rel) == Ok(Some(fp))
        {
            return Ok(Ok(Some(Local {
                sha: b.sha.clone(),
                fp,
                content: None,
            })));
        }
        match self.folder.read(rel).map_err(Error::Io)? {
            Found::Absent => {
                self.clear_skip(rel)?;
                Ok(Ok(None))
            }
            Found::File(LocalFile { content, sha, fp }) => {
                if let Some((Skip::Refused(_), Some(at))) = self.state.skip_of(rel)?
                    && at == fp
                {
                    // Refused by the store as it is: not again until it changes.
                    return Ok(Err(Outcome::Done));
                }
                self.clear_skip(rel)?;
                Ok(Ok(Some(Local {
                    sha,
                    fp,
                    content: Some(content),
                })))
            }
            Found::Skipped(skip, fp) => {
                self.skip(rel, skip, fp)?;
                Ok(Err(Outcome::Done))
            }
            // Written while it was read: looked at again once it settles.
            Found::Changing => Ok(Err(Outcome::Again)),
        }
    }

    fn clear_skip(&mut self, rel: &str) -> Result<(), Error> {
        if self.state.skip_of(rel)?.is_some() {
            self.state.set_skipped(rel, None)?;
        }
        Ok(())
    }

    /// Brings memory path `path` and its file into agreement, given what is known of the memory.
    ///
    /// # Errors
    /// The server is unavailable or refuses the key, or the folder or the state fail: the path
    /// is looked at again later.
    pub fn reconcile(&mut self, path: &str, remote: Remote) -> Result<Outcome, Error> {
        let rel = match local_name(path) {
            Ok(rel) => rel,
            Err(why) => {
                self.report.problem(path, &why);
                return Ok(Outcome::Done);
            }
        };
        if self.folder.rules.ignored(&rel, false) {
            return Ok(Outcome::Done);
        }
        let mut remote = remote;
        for _ in 0..TRIES {
            match self.step(path, &rel, &remote) {
                Err(Error::Api(ApiError::Conflict(_))) => {
                    remote = self.look(path)?;
                }
                // The folder refuses this path (permissions, a name too long, a folder in the
                // way): its problem, reported, and the rest goes on; it is looked at again when
                // the file changes or at the next full reconciliation.
                Err(Error::Io(e)) => {
                    self.report.problem(path, &e.to_string());
                    return Ok(Outcome::Done);
                }
                other => return other,
            }
        }
        Err(Error::Api(ApiError::Conflict(format!(
            "{path}: the memory kept changing while the sync wrote it"
        ))))
    }

    /// What is at `path`, which a listing did not show: a paged listing is no snapshot (a
    /// memory renamed while it is read can be missed), so nothing is taken as gone before the
    /// memory of the base is asked for.
    pub fn confirm_absent(&mut self, path: &str) -> Result<Remote, Error> {
        match self.bases.get(path) {
            Some(b) => Ok(match self.api.get(&b.id)? {
                Some(m) if m.path == path => Remote::At(m),
                _ => Remote::Gone,
            }),
            None => Ok(Remote::Gone),
        }
    }

    /// The memory at `path` now.
    fn look(&mut self, path: &str) -> Result<Remote, Error> {
        if let Some(b) = self.bases.get(path) {
            match self.api.get(&b.id)? {
                Some(m) if m.path == path => return Ok(Remote::At(m)),
                _ => {}
            }
        }
        Ok(match self.api.find(path)? {
            Some(m) => Remote::At(m),
            None => Remote::Gone,
        })
    }

    fn step(&mut self, path: &str, rel: &str, remote: &Remote) -> Result<Outcome, Error> {
        let mut base = self.bases.get(path).cloned();
        let known = !matches!(remote, Remote::AsBase);
        let remote: Option<Memory> = match remote {
            Remote::AsBase => base.as_ref().map(|b| Memory {
                id: b.id.clone(),
                path: path.to_owned(),
                content_sha256: b.sha.clone(),
                content: None,
            }),
            Remote::Gone => None,
            Remote::At(m) => Some(m.clone()),
        };
        if known
            && let Some(sent) = self.sent.get(path)
            && sent.as_deref() == remote.as_ref().map(|r| r.content_sha256.as_str())
        {
            // The sync's own write, whose answer was lost: the base.
            self.unsend(path)?;
            base = remote.as_ref().map(|r| Base {
                id: r.id.clone(),
                sha: r.content_sha256.clone(),
                fp: None,
            });
            self.set_base(path, base.clone())?;
        } else if known && self.sent.contains_key(path) {
            // The memory is known now and is not what that write would have made: the write
            // never landed (or was overtaken), and its record must not claim a later change.
            self.unsend(path)?;
        }
        let local = match self.local(rel, base.as_ref())? {
            Ok(l) => l,
            Err(outcome) => return Ok(outcome),
        };
        if let Some((id, sha)) = self.fetched.get(path).cloned() {
            // A download was being written when the sync stopped: a file holding it came from
            // the store (its base), whatever the base recorded before.
            let landed = local.as_ref().filter(|l| l.sha == sha).map(|l| Base {
                id,
                sha,
                fp: Some(l.fp),
            });
            if landed.is_some() {
                base = landed.clone();
            }
            self.settle(vec![(path, base.clone())])?;
        }
        let l_sha = local.as_ref().map(|l| l.sha.as_str());
        let r_sha = remote.as_ref().map(|r| r.content_sha256.as_str());
        let b_sha = base.as_ref().map(|b| b.sha.as_str());
        if l_sha == r_sha {
            let agreed = match (&local, &remote) {
                (Some(l), Some(r)) => Some(Base {
                    id: r.id.clone(),
                    sha: l.sha.clone(),
                    fp: Some(l.fp),
                }),
                _ => None,
            };
            if base != agreed {
                self.set_base(path, agreed)?;
            }
            return Ok(Outcome::Done);
        }
        if r_sha == b_sha {
            return self.push(path, rel, local, remote);
        }
        if l_sha == b_sha {
            return self.pull(path, rel, local.map(|l| l.fp), remote);
        }
        // Both changed since they last agreed.
        match (local, remote) {
            (None, remote) => self.pull(path, rel, None, remote),
            (local, None) => self.push(path, rel, local, None),
            (Some(local), Some(remote)) => self.conflict(path, rel, local, remote),
        }
    }

    /// Uploads the file (or its absence) over `remote`.
    fn push(
        &mut self,
        path: &str,
        rel: &str,
        local: Option<Local>,
        remote: Option<Memory>,
    ) -> Result<Outcome, Error> {
        if let Some(l) = &local {
            self.send(path, Some(&l.sha))?;
        }
        let result = match (&local, &remote) {
            (None, None) => return Ok(Outcome::Done),
            (None, Some(r)) => {
                // The memory is deleted only where it still is, as it was: a memory moved
                // elsewhere meanwhile is not this file's to delete.
                match self.api.get(&r.id)? {
                    Some(m) if m.path == path && m.content_sha256 != r.content_sha256 => {
                        return Err(ApiError::Conflict(format!("{path} changed")).into());
                    }
                    Some(m) if m.path == path => {
                        self.send(path, None)?;
                        self.api.delete(&r.id, &r.content_sha256)?;
                        self.report.uploaded(path, "deleted");
                    }
                    _ => {}
                }
                self.settle(vec![(path, None)])?;
                return Ok(Outcome::Done);
            }
            (Some(l), None) => self.api.create(path, self.content(rel, l)?),
            (Some(l), Some(r)) => {
                self.api
                    .update(&r.id, Some(self.content(rel, l)?), None, &r.content_sha256)
            }
        };
        let l = local.expect("an upload has a file");
        if matches!(&result, Err(e) if !matches!(e, ApiError::Unavailable(_))) {
            self.unsend(path)?;
        }
        match result {
            Ok(m) => {
                self.report.uploaded(
                    path,
                    if remote.is_some() {
                        "updated"
                    } else {
                        "created"
                    },
                );
                let base = Base {
                    id: m.id,
                    sha: m.content_sha256,
                    fp: Some(l.fp),
                };
                self.settle(vec![(path, Some(base))])?;
                Ok(Outcome::Done)
            }
            Err(ApiError::Refused { status, message }) => {
                self.skip(
                    rel,
                    Skip::Refused(format!("{status}: {message}")),
                    Some(l.fp),
                )?;
                Ok(Outcome::Done)
            }
            Err(e) => Err(e.into()),
        }
    }

    fn content<'a>(&self, rel: &str, l: &'a Local) -> Result<&'a str, Error> {
        l.content.as_deref().ok_or_else(|| {
            Error::Io(std::io::Error::other(format!(
                "{rel}: changed while the sync read it"
            )))
        })
    }

    /// Writes `remote` to the file (or removes it), if the file is still as `local`.
    fn pull(
        &mut self,
        path: &str,
        rel: &str,
        local: Option<Fp>,
        remote: Option<Memory>,
    ) -> Result<Outcome, Error> {
        let Some(remote) = remote else {
            let Some(fp) = local else {
                return Ok(Outcome::Done);
            };
            if !self.folder.remove(rel, fp).map_err(Error::Io)? {
                return Ok(Outcome::Again);
            }
            self.report.downloaded(path, "deleted");
            self.set_base(path, None)?;
            return Ok(Outcome::Done);
        };
        let remote = match remote.content {
            Some(_) => remote,
            None => match self.api.get(&remote.id)? {
                Some(m) if m.path == path => m,
                // Gone or moved since: the feed says where; here there is nothing.
                _ => return self.pull(path, rel, local, None),
            },
        };
        if let Some(fp) = local
            && self.folder.stat(rel) == Ok(Some(fp))
            && self
                .bases
                .get(path)
                .is_some_and(|b| b.sha == remote.content_sha256 && b.fp == Some(fp))
        {
            // The memory as fetched is what the file already holds (an entry of the feed older
            // than the memory): nothing to write.
            return Ok(Outcome::Done);
        }
        let content = remote.content.as_deref().unwrap_or_default();
        let memory = (remote.id.clone(), remote.content_sha256.clone());
        self.state.set_fetched(path, Some(&memory))?;
        self.fetched.insert(path.to_owned(), memory);
        match self.folder.write(rel, content, local).map_err(Error::Io)? {
            None => {
                self.fetched.remove(path);
                self.state.set_fetched(path, None)?;
                Ok(Outcome::Again)
            }
            Some(fp) => {
                self.report.downloaded(path, "written");
                let base = Base {
                    id: remote.id.clone(),
                    sha: remote.content_sha256.clone(),
                    fp: Some(fp),
                };
                self.settle(vec![(path, Some(base))])?;
                Ok(Outcome::Done)
            }
        }
    }

    /// Both changed: the memory keeps the name, the file goes beside it as a conflict copy
    /// (uploaded too).
    fn conflict(
        &mut self,
        path: &str,
        rel: &str,
        local: Local,
        remote: Memory,
    ) -> Result<Outcome, Error> {
        let content = self.content(rel, &local)?.to_owned();
        let (copy, copy_fp) = match self.copy_of(rel, &local.sha) {
            // A copy of this content is already there (a sync stopped between the copy and
            // the pull): the same copy, not a second.
            Some(found) => found,
            None => {
                let when = crate::status::stamp();
                let mut copy = conflict_name(rel, &when, &self.host);
                let mut n = 1;
                while self.folder.stat(&copy) != Ok(None)
                    || self.bases.contains_key(&memory_path(&copy))
                {
                    n += 1;
                    copy = conflict_name(rel, &format!("{when}-{n}"), &self.host);
                }
                let Some(fp) = self
                    .folder
                    .write(&copy, &content, None)
                    .map_err(Error::Io)?
                else {
                    return Ok(Outcome::Again);
                };
                (copy, fp)
            }
        };
        tracing::warn!(
            file = rel,
            copy = copy.as_str(),
            "both sides changed: kept the local version as a conflict copy"
        );
        self.report.conflict(path, &memory_path(&copy));
        match self.pull(path, rel, Some(local.fp), Some(remote))? {
            Outcome::Done => {}
            // Changed again meanwhile: the copy stays, the name is looked at again.
            Outcome::Again => return Ok(Outcome::Again),
        }
        if self.bases.contains_key(&memory_path(&copy)) {
            return Ok(Outcome::Done);
        }
        let copy_local = Local {
            sha: local.sha,
            fp: copy_fp,
            content: Some(content),
        };
        self.push(&memory_path(&copy), &copy, Some(copy_local), None)
    }

    /// A conflict copy of `rel` in its folder holding content `sha`, if there is one.
    fn copy_of(&self, rel: &str, sha: &str) -> Option<(String, Fp)> {
        let (start, end) = conflict_affixes(rel);
        self.folder
            .siblings(rel)
            .into_iter()
            .filter(|n| n.starts_with(&start) && n.ends_with(&end))
            .find_map(|n| match self.folder.read(&n) {
                Ok(Found::File(f)) if f.sha == sha => Some((n, f.fp)),
                _ => None,
            })
    }
}
