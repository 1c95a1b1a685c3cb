//! Holds only the `compare` bench (benches/compare.rs); see BENCHMARKS.md.
