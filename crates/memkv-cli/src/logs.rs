//! Log lines on standard error, for the commands whose standard output is their answer.

/// Log lines to standard error, at `MEMKV_LOG`'s level (`default` without it).
pub fn to_stderr(default: &str) {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("MEMKV_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default)),
        )
        .init();
}
