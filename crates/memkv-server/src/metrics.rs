//! `GET /metrics`: counters kept by the server, rendered in the Prometheus text format.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// Upper bounds of the latency buckets, in seconds.
const BUCKETS: [f64; 13] = [
    0.000_5, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
];

/// A latency histogram.
#[derive(Debug, Default, Clone)]
struct Histogram {
    counts: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
}

impl Histogram {
    fn observe(&mut self, secs: f64) {
        for (count, bound) in self.counts.iter_mut().zip(BUCKETS) {
            if secs <= bound {
                *count += 1;
            }
        }
        self.count += 1;
        self.sum += secs;
    }
}

/// What the server counts. Route labels are the router's patterns (bounded), never raw paths.
#[derive(Debug, Default)]
pub struct Metrics {
    requests: Mutex<BTreeMap<(&'static str, u16), u64>>,
    latency: Mutex<BTreeMap<&'static str, Histogram>>,
    commands: Mutex<BTreeMap<&'static str, u64>>,
    /// Requests refused because the in-flight limit was reached.
    pub overloaded: AtomicU64,
    /// Requests being executed now.
    pub in_flight: AtomicU64,
    /// Open connections.
    pub connections: AtomicU64,
    /// Long polls of the change feed waiting for an entry.
    pub feed_waiting: AtomicU64,
    /// Looks at the change log for other processes' commits (`crate::remote`).
    pub remote_looks: AtomicU64,
    /// 1 while this server is the database's webhook deliverer.
    pub webhooks_leading: AtomicU64,
    /// Webhook deliveries acknowledged (2xx) and failed.
    pub webhooks_delivered: AtomicU64,
    /// Webhook delivery attempts that failed (timeouts, errors, non-2xx).
    pub webhooks_failed: AtomicU64,
}

/// Totals read from the store when `/metrics` is scraped.
#[derive(Debug, Default, Clone, Copy)]
pub struct StoreTotals {
    /// Write batches committed (one flush each).
    pub commits: u64,
    /// Commands in those batches.
    pub committed_commands: u64,
    /// Stores (users) holding at least one file.
    pub stores: u64,
    /// Files, over every store.
    pub files: u64,
    /// Bytes of file content, over every store.
    pub bytes: u64,
}

impl Metrics {
    /// Counts one answered request.
    pub fn request(&self, route: &'static str, status: u16, took: Duration) {
        *lock(&self.requests).entry((route, status)).or_default() += 1;
        lock(&self.latency)
            .entry(route)
            .or_default()
            .observe(took.as_secs_f64());
    }

    /// Counts one memory command received (`create`, `view`, …; `other` for anything else).
    pub fn command(&self, command: &'static str) {
        *lock(&self.commands).entry(command).or_default() += 1;
    }

    /// The exposition text.
    pub fn render(&self, totals: &StoreTotals) -> String {
        let mut text = String::from(
            "# HELP memkv_http_requests_total HTTP requests answered, by route and status.\n# TYPE memkv_http_requests_total counter\n",
        );
        for ((route, status), n) in lock(&self.requests).iter() {
            let _ = writeln!(
                text,
                "memkv_http_requests_total{{route=\"{route}\",status=\"{status}\"}} {n}"
            );
        }
        let _ = writeln!(
            text,
            "# HELP memkv_http_request_duration_seconds Time from request to response, by route.\n# TYPE memkv_http_request_duration_seconds histogram"
        );
        for (route, h) in lock(&self.latency).iter() {
            for (bound, n) in BUCKETS.iter().zip(h.counts) {
                let _ = writeln!(
                    text,
                    "memkv_http_request_duration_seconds_bucket{{route=\"{route}\",le=\"{bound}\"}} {n}"
                );
            }
            let _ = writeln!(
                text,
                "memkv_http_request_duration_seconds_bucket{{route=\"{route}\",le=\"+Inf\"}} {}\nmemkv_http_request_duration_seconds_sum{{route=\"{route}\"}} {}\nmemkv_http_request_duration_seconds_count{{route=\"{route}\"}} {}",
                h.count, h.sum, h.count
            );
        }
        let _ = writeln!(
            text,
            "# HELP memkv_commands_total Memory commands received, by command.\n# TYPE memkv_commands_total counter"
        );
        for (command, n) in lock(&self.commands).iter() {
            let _ = writeln!(text, "memkv_commands_total{{command=\"{command}\"}} {n}");
        }
        let per_commit = if totals.commits == 0 {
            0.0
        } else {
            totals.committed_commands as f64 / totals.commits as f64
        };
        for (name, kind, help, value) in [
            (
                "memkv_overloaded_total",
                "counter",
                "Requests refused with 503 because the in-flight limit was reached.",
                self.overloaded.load(Relaxed).to_string(),
            ),
            (
                "memkv_in_flight_requests",
                "gauge",
                "Requests being executed.",
                self.in_flight.load(Relaxed).to_string(),
            ),
            (
                "memkv_open_connections",
                "gauge",
                "Open HTTP connections.",
                self.connections.load(Relaxed).to_string(),
            ),
            (
                "memkv_feed_waiting",
                "gauge",
                "Long polls of the change feed waiting for an entry to commit.",
                self.feed_waiting.load(Relaxed).to_string(),
            ),
            (
                "memkv_remote_looks_total",
                "counter",
                "Looks at the change log for other processes' commits, one for every waiter at once (PostgreSQL).",
                self.remote_looks.load(Relaxed).to_string(),
            ),
            (
                "memkv_webhooks_leading",
                "gauge",
                "1 while this server delivers the database's webhooks (one server per database does).",
                self.webhooks_leading.load(Relaxed).to_string(),
            ),
            (
                "memkv_webhook_deliveries_total",
                "counter",
                "Webhook deliveries the endpoints acknowledged (2xx).",
                self.webhooks_delivered.load(Relaxed).to_string(),
            ),
            (
                "memkv_webhook_failures_total",
                "counter",
                "Webhook delivery attempts that failed (a timeout, an error, another status); each is retried.",
                self.webhooks_failed.load(Relaxed).to_string(),
            ),
            (
                "memkv_commits_total",
                "counter",
                "Write transactions committed by the write pipeline (one disk flush each).",
                totals.commits.to_string(),
            ),
            (
                "memkv_committed_commands_total",
                "counter",
                "Writes in those transactions that changed something (memory-tool commands and memory-stores API writes; refused ones are not counted).",
                totals.committed_commands.to_string(),
            ),
            (
                "memkv_commands_per_commit",
                "gauge",
                "Commands per commit since the start.",
                per_commit.to_string(),
            ),
            (
                "memkv_stores",
                "gauge",
                "Stores holding at least one file.",
                totals.stores.to_string(),
            ),
            (
                "memkv_files",
                "gauge",
                "Files over every store.",
                totals.files.to_string(),
            ),
            (
                "memkv_bytes",
                "gauge",
                "Bytes of file content over every store.",
                totals.bytes.to_string(),
            ),
        ] {
            let _ = writeln!(
                text,
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}"
            );
        }
        text
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_and_histograms() {
        let m = Metrics::default();
        m.request("/healthz", 200, Duration::from_micros(300));
        m.request("/healthz", 200, Duration::from_millis(3));
        m.command("view");
        let text = m.render(&StoreTotals {
            commits: 2,
            committed_commands: 6,
            stores: 1,
            files: 4,
            bytes: 10,
        });
        for line in [
            "memkv_http_requests_total{route=\"/healthz\",status=\"200\"} 2",
            "memkv_http_request_duration_seconds_bucket{route=\"/healthz\",le=\"0.0005\"} 1",
            "memkv_http_request_duration_seconds_bucket{route=\"/healthz\",le=\"0.005\"} 2",
            "memkv_http_request_duration_seconds_bucket{route=\"/healthz\",le=\"+Inf\"} 2",
            "memkv_http_request_duration_seconds_count{route=\"/healthz\"} 2",
            "memkv_commands_total{command=\"view\"} 1",
            "memkv_commands_per_commit 3",
            "memkv_files 4",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
        }
    }
}
