//! The `memkv` binary, run as a process: every process test of the CLI in one test binary, so
//! the suite links once. A module per area:
//!
//! - `commands`: exec and the operator commands, on each backend;
//! - `ops`: export, import, expire, cat and how the process ends, as a careless operator and an
//!   attacker would try them;
//! - `history`: versions, restore and retention through the CLI;
//! - `damage`: a damaged database file, page by page;
//! - `journal`: the redb journal after a killed writer;
//! - `disk_full`: a full disk, on real tmpfs mounts (root only);
//! - `postgres`: several processes on one PostgreSQL;
//! - `serve`: `memkv serve` on free loopback ports, over real sockets;
//! - `docs`: shell completions, manual pages and the systemd unit of docs/deployment.md.

mod changes;
mod commands;
mod common;
mod config;
mod damage;
mod disk_full;
mod docs;
mod history;
mod journal;
mod ops;
mod postgres;
mod search;
mod serve;
mod sync;
