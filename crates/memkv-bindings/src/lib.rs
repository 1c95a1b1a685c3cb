//! What memkv's in-process bindings share: the Python extension (`crates/memkv-python`) and the
//! Node addon (`crates/memkv-node`) are thin translators over this crate, which is itself thin
//! over the `memkv` library.
//!
//! - [`open`]: a database opened once per process. Two objects of one program that name the
//!   same file (a memory tool and a search tool, say) share one handle, as they must: redb lets
//!   one process at a time write a file, and a second open in the same process would be refused
//!   like one from another process.
//! - [`Answer`]: every operation answers what `memkv serve` answers for the same request, a status
//!   and a JSON body (memkv's Anthropic-style error envelope when refused), so that a package
//!   reads an in-process answer and an HTTP one with the same code and a program written for one
//!   runs on the other unchanged.
//! - [`ops`]: the operations: the tool route (the memory tool and `memory_search` blocks), the
//!   search route, a store's deletion, and the operator's calls around them (stores, export and
//!   import, expiry, history).
//! - [`cli`]: the `memkv` command, which the packages' entry points run.

mod answer;
mod open;
pub mod ops;

pub use answer::Answer;
pub use memkv::Error;
pub use memkv_cli::run as cli;
pub use open::{OpenError, Opened, Shared, open};
