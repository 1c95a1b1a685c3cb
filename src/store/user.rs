//! One user's `/memories`: [`UserHandle`] (a borrow of the [`Store`]) and [`OwnedUserHandle`]
//! (an `Arc` of it, for async callers), and the commands they run.

use std::ops::ControlFlow;
use std::sync::Arc;

use serde_json::Value;

use super::{FileInfo, Store};
use crate::blocks::ToolOutput;
use crate::command::Command;
use crate::error::Error;
use crate::exec::{self, Expired};
use crate::history::Actor;
use crate::layout::Node;
use crate::path::MemoryPath;
use crate::pipeline::jobs::ToolJob;
use crate::storage::{Backend, ReadTxn};
use crate::tree::TreeRead;

/// One user's `/memories`. Cheap to create; borrow of the [`Store`].
#[derive(Debug, Clone)]
pub struct UserHandle<'s> {
    pub(crate) store: &'s Store,
    pub(crate) id: Arc<str>,
    /// Who the changes made through this handle are recorded as made by.
    pub(crate) actor: Option<Actor>,
}

/// One user's `/memories`, owning a share of the store: `'static`, `Send` and cheap to clone,
/// for async tasks and worker threads. [`Self::handle`] gives the borrowed [`UserHandle`] with
/// every command method.
#[derive(Debug)]
pub struct OwnedUserHandle {
    pub(super) store: Arc<Store>,
    pub(super) id: Arc<str>,
    pub(super) actor: Option<Actor>,
}

impl Clone for OwnedUserHandle {
    fn clone(&self) -> Self {
        OwnedUserHandle {
            store: Arc::clone(&self.store),
            id: Arc::clone(&self.id),
            actor: self.actor.clone(),
        }
    }
}

impl OwnedUserHandle {
    /// The user id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The store.
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// The handle to run commands with.
    pub fn handle(&self) -> UserHandle<'_> {
        UserHandle {
            store: &self.store,
            id: Arc::clone(&self.id),
            actor: self.actor.clone(),
        }
    }

    /// This handle, recording its changes as made by `actor`.
    pub fn with_actor(mut self, actor: Option<Actor>) -> Self {
        self.actor = actor;
        self
    }

    /// [`UserHandle::execute`] for async callers: a `view` runs in place (a read snapshot,
    /// which never waits for a lock or a flush, on an embedded store); a write joins the same
    /// group commit as blocking callers, and the future resolves once it is durable. The
    /// batch is led by a blocking caller in it or by one of the store's writer threads, so the
    /// awaiting task never blocks its executor on a write. No async runtime is needed.
    ///
    /// On a backend with round trips (PostgreSQL) a `view` blocks for them: run it where
    /// blocking is allowed.
    pub async fn execute_async(&self, command: Command) -> Result<ToolOutput, Error> {
        if command.is_read_only() {
            return self.handle().execute(&command);
        }
        let job = ToolJob {
            user: Arc::clone(&self.id),
            command,
            actor: self.actor.clone(),
        };
        self.store.submit_async(Box::new(job)).await
    }
}

impl UserHandle<'_> {
    /// The user id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// This handle, recording its changes (versions) as made by `actor`.
    pub fn with_actor(mut self, actor: Option<Actor>) -> Self {
        self.actor = actor;
        self
    }

    /// Who this handle's changes are recorded as made by.
    pub fn actor(&self) -> Option<&Actor> {
        self.actor.as_ref()
    }

    /// Runs one command in its own transaction.
    ///
    /// Whatever the model got wrong comes back as a [`ToolOutput`] with `is_error: true`, and
    /// nothing is changed. `Err` means the storage failed; nothing was changed then either.
    ///
    /// Safe to call from many threads at once: reads run in parallel, and writes from
    /// concurrent callers are committed together, one disk flush for the lot (group commit).
    /// Each caller gets the result it would have had alone; it returns once that is durable.
    pub fn execute(&self, command: &Command) -> Result<ToolOutput, Error> {
        if let Command::View { path, view_range } = command {
            let (store, now) = (self.store, self.store.now_ms());
            let settings = store.settings(&self.id);
            let used = store.used_after(&self.id, settings.expiry_cutoff(now));
            let view = (path.as_str(), *view_range);
            let (output, stale) =
                exec::read(&store.backend, &self.id, &settings, view, now, &used)?;
            if let Some(path) = stale {
                store.note_access(&self.id, &path, now);
            }
            return Ok(output);
        }
        self.store.submit(Box::new(ToolJob {
            user: Arc::clone(&self.id),
            command: command.clone(),
            actor: self.actor.clone(),
        }))
    }

    /// Parses and runs the `input` object of a `tool_use` block.
    pub fn execute_json(&self, input: &Value) -> Result<ToolOutput, Error> {
        match Command::from_json(input) {
            Ok(command) => self.execute(&command),
            Err(e) => Ok(ToolOutput {
                content: e.message(),
                is_error: true,
            }),
        }
    }

    /// The user's live file count and bytes.
    pub fn totals(&self) -> Result<(u64, u64), Error> {
        let files = self.files()?;
        Ok((files.len() as u64, files.iter().map(|f| f.size).sum()))
    }

    /// Every live file of the user, in path order (for operators; the model uses `view`).
    pub fn files(&self) -> Result<Vec<FileInfo>, Error> {
        let txn = self.store.backend.begin_read()?;
        let tree = TreeRead::new(&txn, &self.id);
        let expired = self.expired(&tree)?;
        // A view noted but not yet written is a use all the same.
        let noted = self.store.access.noted(&self.id);
        let mut out = Vec::new();
        tree.files(&mut |path, meta| {
            if !expired.contains(&path) {
                let accessed_ms = noted
                    .get(&path)
                    .map_or(meta.accessed_ms, |&t| t.max(meta.accessed_ms));
                out.push(FileInfo {
                    path,
                    size: meta.size,
                    sha256: crate::layout::hex(&meta.sha256),
                    created_ms: meta.created_ms,
                    modified_ms: meta.modified_ms,
                    accessed_ms,
                });
            }
            Ok(ControlFlow::Continue(()))
        })?;
        Ok(out)
    }

    /// The content of the live file at `path` (for operators), `None` if there is no such file.
    ///
    /// # Errors
    /// [`Error::InvalidPath`] if `path` breaks the path rules.
    pub fn read_file(&self, path: &str) -> Result<Option<String>, Error> {
        let parsed = MemoryPath::parse(path).map_err(|reason| Error::InvalidPath {
            path: path.to_owned(),
            reason,
        })?;
        let txn = self.store.backend.begin_read()?;
        let tree = TreeRead::new(&txn, &self.id);
        match tree.node(&parsed)? {
            Some(Node::File(_)) if !self.expired(&tree)?.contains(&parsed) => tree.content(&parsed),
            _ => Ok(None),
        }
    }

    pub(crate) fn expired<T: ReadTxn + ?Sized>(
        &self,
        tree: &TreeRead<'_, T>,
    ) -> Result<Expired, Error> {
        let cutoff = self
            .store
            .settings(&self.id)
            .expiry_cutoff(self.store.now_ms());
        Ok(Expired::load(tree, cutoff)?.except(&self.store.used_after(&self.id, cutoff)))
    }
}
