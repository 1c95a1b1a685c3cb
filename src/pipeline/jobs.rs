//! The two kinds of [`Job`]: a memory-tool command, and a write of the memory-stores API over a
//! store's tree.

use std::sync::Arc;

use super::{Job, Ran};
use crate::blocks::ToolOutput;
use crate::command::Command;
use crate::error::Error;
use crate::exec;
use crate::history::{Actor, ApiRefusal};
use crate::limits::Settings;
use crate::storage::{Fetch, Space, WriteTxn};
use crate::tree::{self, Tree};

/// A memory-tool write command; answers a [`ToolOutput`].
pub(crate) struct ToolJob {
    pub user: Arc<str>,
    pub command: Command,
    pub actor: Option<Actor>,
}

impl Job for ToolJob {
    fn user(&self) -> &str {
        &self.user
    }

    fn actor(&self) -> Option<&Actor> {
        self.actor.as_ref()
    }

    fn frees_space(&self) -> bool {
        self.command.frees_space()
    }

    fn fetches(&self, settings: &Settings, now_ms: i64, out: &mut Vec<Fetch>) {
        out.extend(exec::write_fetches(
            &self.user,
            settings,
            &self.command,
            now_ms,
        ));
    }

    fn run(
        &mut self,
        tree: &mut Tree<'_, dyn WriteTxn + '_>,
        settings: &Settings,
        now_ms: i64,
    ) -> Result<Ran, Error> {
        let output: ToolOutput = exec::write(tree, settings, &self.command, now_ms)?;
        Ok(Ran {
            // A `view` in a batch changes nothing either (it records no access time there).
            refused: output.is_error || self.command.is_read_only(),
            answer: Box::new(output),
        })
    }
}

/// What a [`TreeJob`] runs: a write over the store's tree, refused (changing nothing) or done.
pub(crate) type TreeWrite<R> = dyn FnMut(&mut Tree<'_, dyn WriteTxn + '_>, &Settings) -> Result<Result<R, ApiRefusal>, Error>
    + Send;

/// A write of the memory-stores API; answers `Result<R, ApiRefusal>`.
pub(crate) struct TreeJob<R> {
    pub user: Arc<str>,
    pub actor: Option<Actor>,
    pub frees_space: bool,
    pub write: Box<TreeWrite<R>>,
}

impl<R: Send + 'static> Job for TreeJob<R> {
    fn user(&self) -> &str {
        &self.user
    }

    fn actor(&self) -> Option<&Actor> {
        self.actor.as_ref()
    }

    fn frees_space(&self) -> bool {
        self.frees_space
    }

    fn fetches(&self, settings: &Settings, now_ms: i64, out: &mut Vec<Fetch>) {
        // Its reads follow from ids, not paths: the store's record and totals, which every write
        // reads, and what the sweep reads.
        for space in [Space::Totals, Space::Store] {
            out.push(Fetch::Get {
                space,
                user: self.user.to_string(),
                key: Vec::new(),
            });
        }
        out.push(crate::changes::feed::fetch(&self.user));
        out.extend(tree::unused_fetch(
            &self.user,
            settings.expiry_cutoff(now_ms),
        ));
    }

    fn run(
        &mut self,
        tree: &mut Tree<'_, dyn WriteTxn + '_>,
        settings: &Settings,
        _now_ms: i64,
    ) -> Result<Ran, Error> {
        let result = (self.write)(tree, settings)?;
        Ok(Ran {
            refused: result.is_err(),
            answer: Box::new(result),
        })
    }
}
