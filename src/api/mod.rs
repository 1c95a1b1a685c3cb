//! The public face of the crate, each type's methods in one file: the [`Database`] handle
//! (`database.rs`), its [`DatabaseBuilder`] (`builder.rs`), and the [`MemoryStore`] of one user
//! id with its owned form [`OwnedMemoryStore`] (`memory_store.rs`), and [`StoreAdmin`], the store
//! records' writes recorded as made by someone (`store_admin.rs`). The methods are thin: each
//! says what it does, checks what is the caller's to get right, and hands over to the module
//! that does the work (`crate::pipeline` for writes, `crate::exec` for reads, `crate::memories`,
//! `crate::versions`, `crate::stores`, `crate::admin`, `crate::backup`).

mod builder;
mod database;
mod memory_store;
mod store_admin;

pub use crate::admin::{ExpiredFile, FileInfo, PrunedHistory, UserSummary};
pub use crate::user_id::MAX_USER_ID_BYTES;
pub use builder::DatabaseBuilder;
pub use database::Database;
pub use memory_store::{MemoryStore, OwnedMemoryStore};
pub use store_admin::StoreAdmin;
