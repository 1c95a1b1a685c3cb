//! The `memkv` binary: the command line of the `memkv_cli` library (src/lib.rs).

use std::process::ExitCode;

/// jemalloc for the whole binary (the library leaves the choice to its users): under `memkv
/// serve`'s load, glibc's malloc and free were 15 % of the server's CPU samples, jemalloc's about
/// 4 % (BENCHMARKS.md, "HTTP server").
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    ExitCode::from(memkv_cli::run(std::env::args_os().collect()))
}
