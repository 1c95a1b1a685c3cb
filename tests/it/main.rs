//! Integration tests, compiled into one binary.

mod cli;
mod format;
mod golden;
mod isolation;
mod model;
mod util;
