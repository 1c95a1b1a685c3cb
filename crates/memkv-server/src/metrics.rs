//! `GET /metrics`: the server's counters, gauges and latency histograms, the process's own
//! (CPU seconds, resident and virtual memory, open file descriptors, threads, start time) and a
//! build-info metric, on the `prometheus` crate's registry, in the Prometheus text format.

use std::time::Duration;

use prometheus::{
    Encoder, Gauge, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec,
    Opts, Registry, TextEncoder, core::Collector,
};

/// Upper bounds of the latency buckets, in seconds.
const BUCKETS: [f64; 13] = [
    0.000_5, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
];

/// What the server counts. Route labels are the router's patterns (bounded), never raw paths.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    requests: IntCounterVec,
    latency: HistogramVec,
    commands: IntCounterVec,
    /// Requests refused because the in-flight limit was reached.
    pub overloaded: IntCounter,
    /// Requests being executed now.
    pub in_flight: IntGauge,
    /// Open connections.
    pub connections: IntGauge,
    /// Long polls of the change feed waiting for an entry.
    pub feed_waiting: IntGauge,
    /// Looks at the change log for other processes' commits (`crate::remote`).
    pub remote_looks: IntCounter,
    /// 1 while this server is the database's webhook deliverer.
    pub webhooks_leading: IntGauge,
    /// Webhook deliveries acknowledged (2xx).
    pub webhooks_delivered: IntCounter,
    /// Webhook delivery attempts that failed (timeouts, errors, non-2xx).
    pub webhooks_failed: IntCounter,
    commits: IntCounter,
    committed_commands: IntCounter,
    per_commit: Gauge,
    stores: IntGauge,
    files: IntGauge,
    bytes: IntGauge,
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

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

/// `metric` (`Err`: a name or help prometheus refuses, a bug), registered in `registry`.
fn keep<M: Collector + Clone + 'static>(registry: &Registry, metric: prometheus::Result<M>) -> M {
    let metric = metric.expect("a valid metric");
    registry
        .register(Box::new(metric.clone()))
        .expect("registered once");
    metric
}

fn gauge(registry: &Registry, name: &str, help: &str) -> IntGauge {
    keep(registry, IntGauge::new(name, help))
}

fn counter(registry: &Registry, name: &str, help: &str) -> IntCounter {
    keep(registry, IntCounter::new(name, help))
}

impl Metrics {
    /// Every metric, registered; the process collector on Linux.
    pub fn new() -> Self {
        let r = Registry::new();
        let requests = keep(
            &r,
            IntCounterVec::new(
                Opts::new(
                    "memkv_http_requests_total",
                    "HTTP requests answered, by route and status.",
                ),
                &["route", "status"],
            ),
        );
        let latency = keep(
            &r,
            HistogramVec::new(
                HistogramOpts::new(
                    "memkv_http_request_duration_seconds",
                    "Time from request to response, by route.",
                )
                .buckets(BUCKETS.to_vec()),
                &["route"],
            ),
        );
        let commands = keep(
            &r,
            IntCounterVec::new(
                Opts::new(
                    "memkv_commands_total",
                    "Memory commands received, by command.",
                ),
                &["command"],
            ),
        );
        let build = IntGaugeVec::new(
            Opts::new(
                "memkv_build_info",
                "1, labelled with the version of memkv serving and the layout version it writes.",
            ),
            &["version", "layout"],
        )
        .expect("a valid metric");
        build
            .with_label_values(&[
                env!("CARGO_PKG_VERSION"),
                &memkv::LAYOUT_VERSION.to_string(),
            ])
            .set(1);
        r.register(Box::new(build)).expect("registered once");
        #[cfg(target_os = "linux")]
        r.register(Box::new(
            prometheus::process_collector::ProcessCollector::for_self(),
        ))
        .expect("registered once");
        let per_commit = keep(
            &r,
            Gauge::new(
                "memkv_commands_per_commit",
                "Commands per commit since the start.",
            ),
        );
        Metrics {
            overloaded: counter(
                &r,
                "memkv_overloaded_total",
                "Requests refused with 503 because the in-flight limit was reached.",
            ),
            in_flight: gauge(&r, "memkv_in_flight_requests", "Requests being executed."),
            connections: gauge(&r, "memkv_open_connections", "Open HTTP connections."),
            feed_waiting: gauge(
                &r,
                "memkv_feed_waiting",
                "Long polls of the change feed waiting for an entry to commit.",
            ),
            remote_looks: counter(
                &r,
                "memkv_remote_looks_total",
                "Looks at the change log for other processes' commits, one for every waiter at once (PostgreSQL).",
            ),
            webhooks_leading: gauge(
                &r,
                "memkv_webhooks_leading",
                "1 while this server delivers the database's webhooks (one server per database does).",
            ),
            webhooks_delivered: counter(
                &r,
                "memkv_webhook_deliveries_total",
                "Webhook deliveries the endpoints acknowledged (2xx).",
            ),
            webhooks_failed: counter(
                &r,
                "memkv_webhook_failures_total",
                "Webhook delivery attempts that failed (a timeout, an error, another status); each is retried.",
            ),
            commits: counter(
                &r,
                "memkv_commits_total",
                "Write transactions committed by the write pipeline (one disk flush each).",
            ),
            committed_commands: counter(
                &r,
                "memkv_committed_commands_total",
                "Writes in those transactions that changed something (memory-tool commands and memory-stores API writes; refused ones are not counted).",
            ),
            stores: gauge(&r, "memkv_stores", "Stores holding at least one file."),
            files: gauge(&r, "memkv_files", "Files over every store."),
            bytes: gauge(&r, "memkv_bytes", "Bytes of file content over every store."),
            per_commit,
            requests,
            latency,
            commands,
            registry: r,
        }
    }

    /// Counts one answered request.
    pub fn request(&self, route: &'static str, status: u16, took: Duration) {
        self.requests
            .with_label_values(&[route, &status.to_string()])
            .inc();
        self.latency
            .with_label_values(&[route])
            .observe(took.as_secs_f64());
    }

    /// Counts one memory command received (`create`, `view`, …; `other` for anything else).
    pub fn command(&self, command: &'static str) {
        self.commands.with_label_values(&[command]).inc();
    }

    /// The exposition text, with the store's totals as of now.
    pub fn render(&self, totals: &StoreTotals) -> String {
        // The database counts commits itself: the counters move on to its figures.
        for (c, now) in [
            (&self.commits, totals.commits),
            (&self.committed_commands, totals.committed_commands),
        ] {
            c.inc_by(now.saturating_sub(c.get()));
        }
        self.per_commit.set(if totals.commits == 0 {
            0.0
        } else {
            totals.committed_commands as f64 / totals.commits as f64
        });
        let gauge = |g: &IntGauge, v: u64| g.set(i64::try_from(v).unwrap_or(i64::MAX));
        gauge(&self.stores, totals.stores);
        gauge(&self.files, totals.files);
        gauge(&self.bytes, totals.bytes);
        let mut out = Vec::new();
        TextEncoder::new()
            .encode(&self.registry.gather(), &mut out)
            .expect("the text format writes into memory");
        String::from_utf8(out).expect("the text format is UTF-8")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_histograms_process_and_build_info() {
        let m = Metrics::new();
        m.request("/healthz", 200, Duration::from_micros(300));
        m.request("/healthz", 200, Duration::from_millis(3));
        m.command("view");
        m.in_flight.inc();
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
            "memkv_commits_total 2",
            "memkv_files 4",
            "memkv_in_flight_requests 1",
            "# TYPE memkv_http_requests_total counter",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
        }
        let build = format!(
            "memkv_build_info{{layout=\"{}\",version=\"{}\"}} 1",
            memkv::LAYOUT_VERSION,
            env!("CARGO_PKG_VERSION")
        );
        assert!(text.lines().any(|l| l == build), "{build} in\n{text}");
        #[cfg(target_os = "linux")]
        for name in [
            "process_cpu_seconds_total",
            "process_resident_memory_bytes",
            "process_open_fds",
            "process_start_time_seconds",
            "process_threads",
        ] {
            assert!(
                text.lines().any(|l| l.starts_with(&format!("{name} "))),
                "{name} in\n{text}"
            );
        }
        // The store's counters move on, never back.
        let text = m.render(&StoreTotals {
            commits: 5,
            ..StoreTotals::default()
        });
        assert!(text.lines().any(|l| l == "memkv_commits_total 5"), "{text}");
    }
}
