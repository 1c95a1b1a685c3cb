//! The per-process limits of PROTOCOL.md, with its defaults.

/// Limits checked inside every write transaction. `Default` gives PROTOCOL.md's defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Limits {
    /// Largest file, in UTF-8 bytes. Default = 102,400.
    pub max_file_bytes: u64,
    /// Most lines in a file. Default = 999,999.
    pub max_lines: u64,
    /// Most files per user. Default = 10,000.
    pub max_files: u64,
    /// Most bytes per user, summed over their files. Default = 64 MiB (67,108,864).
    pub max_bytes: u64,
    /// Longest `view` output, in Unicode scalar values, before it is truncated. Default = 16,000.
    pub view_max_chars: usize,
}

impl Limits {
    /// PROTOCOL.md's defaults.
    pub const DEFAULT: Limits = Limits {
        max_file_bytes: 102_400,
        max_lines: 999_999,
        max_files: 10_000,
        max_bytes: 64 * 1024 * 1024,
        view_max_chars: 16_000,
    };
}

impl Default for Limits {
    fn default() -> Self {
        Limits::DEFAULT
    }
}
