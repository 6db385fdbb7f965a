//! Broker metrics: per-API request counts and latency histograms, plus named
//! gauges and counters, rendered in Prometheus text format.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use hdrhistogram::Histogram;
use parking_lot::Mutex;

use sharestream_protocol::api::api_name;

/// Latency statistics of one API.
#[derive(Debug)]
pub struct ApiStats {
    /// Requests handled.
    pub count: u64,
    /// Requests whose frame or body could not be decoded.
    pub errors: u64,
    /// Handling latency in microseconds.
    pub latency_us: Histogram<u64>,
}

impl ApiStats {
    fn new() -> Self {
        Self {
            count: 0,
            errors: 0,
            // 1 µs .. 1 hour, 3 significant digits.
            latency_us: Histogram::new_with_bounds(1, 3_600_000_000, 3)
                .expect("static histogram bounds are valid"),
        }
    }
}

/// A snapshot of one API's statistics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApiSnapshot {
    /// Requests handled.
    pub count: u64,
    /// Median latency (µs).
    pub p50_us: u64,
    /// 99th percentile latency (µs).
    pub p99_us: u64,
    /// Maximum latency (µs).
    pub max_us: u64,
}

/// All broker metrics.
#[derive(Debug, Default)]
pub struct BrokerMetrics {
    apis: Mutex<BTreeMap<i16, ApiStats>>,
    counters: Mutex<BTreeMap<&'static str, u64>>,
}

/// The one entry every unknown API key is counted under. Keys come from
/// the wire: one histogram per distinct garbage key would let a client grow
/// the broker's memory by some 200 KB per frame (and render duplicate
/// `api="Unknown"` series).
const UNKNOWN_API_KEY: i16 = -1;

fn stats_key(api_key: i16) -> i16 {
    if api_name(api_key) == "Unknown" {
        UNKNOWN_API_KEY
    } else {
        api_key
    }
}

impl BrokerMetrics {
    /// Records one handled request of `api_key` that took `micros`.
    pub fn record_request(&self, api_key: i16, micros: u64) {
        let mut apis = self.apis.lock();
        let s = apis.entry(stats_key(api_key)).or_insert_with(ApiStats::new);
        s.count += 1;
        s.latency_us.saturating_record(micros.max(1));
    }

    /// Records a request that could not be decoded.
    pub fn record_error(&self, api_key: i16) {
        self.apis
            .lock()
            .entry(stats_key(api_key))
            .or_insert_with(ApiStats::new)
            .errors += 1;
    }

    /// Adds `n` to a named counter.
    pub fn add(&self, name: &'static str, n: u64) {
        *self.counters.lock().entry(name).or_default() += n;
    }

    /// Value of a named counter.
    pub fn counter(&self, name: &str) -> u64 {
        self.counters.lock().get(name).copied().unwrap_or(0)
    }

    /// Statistics of one API.
    pub fn api(&self, api_key: i16) -> Option<ApiSnapshot> {
        self.apis.lock().get(&api_key).map(|s| ApiSnapshot {
            count: s.count,
            p50_us: s.latency_us.value_at_quantile(0.5),
            p99_us: s.latency_us.value_at_quantile(0.99),
            max_us: s.latency_us.max(),
        })
    }

    /// Prometheus text exposition of everything; `extra` adds gauges
    /// computed by the caller (name, help, value).
    pub fn render_prometheus(&self, extra: &[(&str, &str, f64)]) -> String {
        let mut out = String::new();
        out.push_str("# HELP sharestream_requests_total Requests handled, by API.\n");
        out.push_str("# TYPE sharestream_requests_total counter\n");
        let apis = self.apis.lock();
        for (key, s) in apis.iter() {
            let _ = writeln!(
                out,
                "sharestream_requests_total{{api=\"{}\"}} {}",
                api_name(*key),
                s.count
            );
        }
        out.push_str("# HELP sharestream_request_errors_total Undecodable requests, by API.\n");
        out.push_str("# TYPE sharestream_request_errors_total counter\n");
        for (key, s) in apis.iter() {
            let _ = writeln!(
                out,
                "sharestream_request_errors_total{{api=\"{}\"}} {}",
                api_name(*key),
                s.errors
            );
        }
        out.push_str(
            "# HELP sharestream_request_latency_seconds Request handling latency, by API.\n",
        );
        out.push_str("# TYPE sharestream_request_latency_seconds summary\n");
        for (key, s) in apis.iter() {
            for q in [0.5, 0.99, 1.0] {
                let _ = writeln!(
                    out,
                    "sharestream_request_latency_seconds{{api=\"{}\",quantile=\"{q}\"}} {}",
                    api_name(*key),
                    s.latency_us.value_at_quantile(q) as f64 / 1e6
                );
            }
            let _ = writeln!(
                out,
                "sharestream_request_latency_seconds_count{{api=\"{}\"}} {}",
                api_name(*key),
                s.count
            );
        }
        drop(apis);
        for (name, v) in self.counters.lock().iter() {
            let _ = writeln!(out, "# TYPE sharestream_{name} counter");
            let _ = writeln!(out, "sharestream_{name} {v}");
        }
        for (name, help, v) in extra {
            let _ = writeln!(out, "# HELP sharestream_{name} {help}");
            let _ = writeln!(out, "# TYPE sharestream_{name} gauge");
            let _ = writeln!(out, "sharestream_{name} {v}");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_and_renders() {
        let m = BrokerMetrics::default();
        m.record_request(0, 100);
        m.record_request(0, 300);
        m.record_error(3);
        m.add("connections_accepted", 2);
        let s = m.api(0).unwrap();
        assert_eq!(s.count, 2);
        assert!(s.max_us >= 300 && s.p50_us >= 100);
        let text = m.render_prometheus(&[("topics", "Topics.", 4.0)]);
        assert!(text.contains("sharestream_requests_total{api=\"Produce\"} 2"));
        assert!(text.contains("sharestream_request_errors_total{api=\"Metadata\"} 1"));
        assert!(text.contains("sharestream_connections_accepted 2"));
        assert!(text.contains("sharestream_topics 4"));
    }

    #[test]
    fn unknown_api_keys_share_one_entry() {
        let m = BrokerMetrics::default();
        for key in 1000..3000 {
            m.record_error(key);
        }
        m.record_error(i16::MIN);
        let text = m.render_prometheus(&[]);
        assert_eq!(text.matches("api=\"Unknown\"").count(), 6, "{text}");
        assert!(text.contains("sharestream_request_errors_total{api=\"Unknown\"} 2001"));
        assert_eq!(m.apis.lock().len(), 1);
    }
}
