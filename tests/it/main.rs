//! Integration tests, compiled into one binary.

mod architecture;
mod backup;
mod backup_history;
mod changes;
mod concurrency;
mod crash;
mod erasure;
mod expiry;
mod faults;
mod format;
mod golden;
mod hardening;
mod history;
mod hooks;
mod isolation;
mod keys;
mod lines;
mod model;
mod notify;
mod postgres;
mod protocol_doc;
mod search;
mod search_ranked;
mod secrets;
mod settings;
mod util;
