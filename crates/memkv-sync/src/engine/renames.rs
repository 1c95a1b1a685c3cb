//! Renames kept as renames: a file moved in the folder moves its memory (which keeps its id and
//! history), and a memory moved in the store moves its file, when nothing else changed.

use std::collections::{BTreeMap, BTreeSet};

use super::Engine;
use crate::Error;
use crate::api::{ApiError, Memory};
use crate::local::{Found, Fp};
use crate::rules::local_name;
use crate::state::Base;

impl Engine {
    /// Moves memory `from` to `to` after the file moved, if the memory is still as the base
    /// says; `false` when it is not (the two paths are then looked at one by one).
    pub fn rename_remote(&mut self, from: &str, to: &str, fp: Fp) -> Result<bool, Error> {
        let Some(base) = self.bases.get(from).cloned() else {
            return Ok(false);
        };
        self.send(from, None)?;
        self.send(to, Some(&base.sha))?;
        let result = self.api.update(&base.id, None, Some(to), &base.sha);
        if matches!(&result, Err(e) if !matches!(e, ApiError::Unavailable(_))) {
            self.unsend(from)?;
            self.unsend(to)?;
        }
        match result {
            Ok(m) => {
                self.report.uploaded(to, &format!("renamed from {from}"));
                let base = Base {
                    id: m.id,
                    sha: m.content_sha256,
                    fp: Some(fp),
                };
                self.settle(vec![(from, None), (to, Some(base))])?;
                Ok(true)
            }
            Err(ApiError::Conflict(_) | ApiError::NotFound(_) | ApiError::Refused { .. }) => {
                Ok(false)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Moves file `from` to `to` after the memory moved (the feed said so), if the file is
    /// still as the base says and `to` is free; `false` when not.
    pub fn rename_local(&mut self, from: &str, to: &Memory) -> Result<bool, Error> {
        let (Some(base), Ok(rel_from), Ok(rel_to)) = (
            self.bases.get(from).cloned(),
            local_name(from),
            local_name(&to.path),
        ) else {
            return Ok(false);
        };
        if base.id != to.id
            || base.sha != to.content_sha256
            || self.folder.rules.ignored(&rel_to, false)
            || self.bases.contains_key(&to.path)
        {
            return Ok(false);
        }
        let Some(fp) = base.fp else {
            return Ok(false);
        };
        if !self
            .folder
            .rename(&rel_from, &rel_to, fp)
            .map_err(Error::Io)?
        {
            return Ok(false);
        }
        self.report
            .downloaded(&to.path, &format!("renamed from {from}"));
        self.set_base(from, None)?;
        self.set_base(&to.path, Some(base))?;
        Ok(true)
    }

    /// Files that vanished while a file of the same content appeared at a path the store does
    /// not have: renames, uploaded as renames (the memory keeps its id and history).
    /// `candidates` are the local paths to look at; what is left is returned.
    pub fn local_renames(
        &mut self,
        candidates: BTreeSet<String>,
    ) -> Result<BTreeSet<String>, Error> {
        let mut vanished: BTreeMap<String, String> = BTreeMap::new(); // sha → path
        let mut appeared: Vec<(String, String, Fp)> = Vec::new(); // path, sha, fp
        for path in &candidates {
            let Ok(rel) = local_name(path) else { continue };
            let base = self.bases.get(path);
            match (base, self.folder.stat(&rel)) {
                (Some(b), Ok(None)) => {
                    vanished.insert(b.sha.clone(), path.clone());
                }
                (None, Ok(Some(_))) => {
                    if let Ok(Found::File(f)) = self.folder.read(&rel) {
                        appeared.push((path.clone(), f.sha, f.fp));
                    }
                }
                _ => {}
            }
        }
        let mut left = candidates;
        for (to, sha, fp) in appeared {
            if let Some(from) = vanished.remove(&sha)
                && self.rename_remote(&from, &to, fp)?
            {
                left.remove(&from);
                left.remove(&to);
            }
        }
        Ok(left)
    }
}
