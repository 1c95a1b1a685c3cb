//! [`StoreAdmin`]: the memory-store records' writes (create, update, archive, delete) recorded
//! as made by someone, as [`crate::MemoryStore::with_actor`] does for memories.

use std::collections::BTreeMap;

use super::Database;
use crate::error::Error;
use crate::history::{Actor, ApiRefusal, StoreInfo};

/// The writes of memory-store records, each change recorded as made by one actor
/// ([`Database::acting_as`]).
#[derive(Clone)]
pub struct StoreAdmin<'a> {
    pub(super) db: &'a Database,
    pub(super) actor: Option<Actor>,
}

impl StoreAdmin<'_> {
    /// [`Database::create_store`], recorded as this actor's.
    ///
    /// # Errors
    /// A storage failure.
    pub fn create_store(
        &self,
        name: &str,
        description: &str,
        metadata: &BTreeMap<String, String>,
    ) -> Result<StoreInfo, Error> {
        let engine = &self.db.engine;
        crate::stores::create_store(engine, self.actor.as_ref(), name, description, metadata)
    }

    /// [`Database::update_store`], recorded as this actor's.
    ///
    /// # Errors
    /// A storage failure. Refusals: [`ApiRefusal::NotFound`], [`ApiRefusal::Archived`].
    pub fn update_store(
        &self,
        id: &str,
        name: Option<&str>,
        description: Option<&str>,
        metadata: &BTreeMap<String, Option<String>>,
    ) -> Result<Result<StoreInfo, ApiRefusal>, Error> {
        let actor = self.actor.as_ref();
        crate::stores::update_store(&self.db.engine, actor, id, name, description, metadata)
    }

    /// [`Database::archive_store`], recorded as this actor's.
    ///
    /// # Errors
    /// A storage failure. Refusal: [`ApiRefusal::NotFound`].
    pub fn archive_store(&self, id: &str) -> Result<Result<StoreInfo, ApiRefusal>, Error> {
        crate::stores::archive_store(&self.db.engine, self.actor.as_ref(), id)
    }

    /// [`Database::delete_store`], recorded as this actor's.
    ///
    /// # Errors
    /// A storage failure.
    pub fn delete_store(&self, id: &str) -> Result<bool, Error> {
        crate::stores::delete_store(&self.db.engine, self.actor.as_ref(), id)
    }
}
