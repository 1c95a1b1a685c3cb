//! Integration tests, compiled into one binary.

mod cli;
mod golden;
mod isolation;
mod model;
mod util;
