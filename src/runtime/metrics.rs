//! [`RuntimeMetrics`]: counters, gauges and histograms of the runtime,
//! rendered in Prometheus text format and served on `metrics.listen`.
//!
//! Counters: records in (delivered by the share consumer, redeliveries
//! included), records out (produced by committed transactions or flushed
//! at-least-once batches), rejected, dead-lettered; transactions committed
//! and aborted. Histograms: commit latency (from the first staged record's
//! commit call to the end of EndTxn, microseconds) and batch size (source
//! records per transaction). Gauge: records in flight, the records this
//! process holds acquired and has not committed yet.
//!
//! Gauge `sharestream_share_group_lag{topic,partition}`: the share-group
//! lag of each source partition, the distance from the share-partition
//! start offset (SPSO, DescribeShareGroupOffsets) to the last stable
//! offset (ListOffsets read_committed), refreshed every
//! `share.group.lag.interval.ms` by [`lag`](super::lag). Approximate: the
//! two answers are not taken at one instant, and records between SPSO and
//! the end that are already acknowledged (but not yet below the SPSO)
//! count as lag. Absent when the cluster does not serve
//! DescribeShareGroupOffsets or the refresh is off.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use hdrhistogram::Histogram;
use parking_lot::Mutex;
use tokio::net::TcpListener;
use tokio::sync::watch;

/// The runtime's metrics; shared by the workers (atomics, two locked
/// histograms).
#[derive(Debug)]
pub struct RuntimeMetrics {
    /// Source records delivered to the workers.
    pub records_in: AtomicU64,
    /// Output records produced (counted when their transaction committed,
    /// or when their at-least-once batch was flushed).
    pub records_out: AtomicU64,
    /// Source records acknowledged REJECT without a dead-letter record.
    pub records_rejected: AtomicU64,
    /// Source records dead-lettered (REJECT plus a dead-letter record).
    pub records_dead_lettered: AtomicU64,
    /// Source records whose processing completed (committed).
    pub records_committed: AtomicU64,
    /// Transactions (or at-least-once commits) committed.
    pub transactions_committed: AtomicU64,
    /// Transactions aborted.
    pub transactions_aborted: AtomicU64,
    /// Producers re-created after being fenced or timed out (a paused
    /// process that came back, docs/DESIGN.md D15).
    pub producer_recoveries: AtomicU64,
    /// Of those, the re-creations after a transaction whose end was
    /// unknown (EndTxn unanswered, or refused as INVALID_TXN_STATE).
    pub transactions_outcome_unknown: AtomicU64,
    /// Acquisition locks renewed (KIP-1222) for records whose processing
    /// outlasted half their lock.
    pub lock_renewals: AtomicU64,
    /// Source records whose processing failed on their last delivery
    /// (delivery count at `share.delivery.count.limit`) and that were
    /// dead-lettered or rejected instead of stopping the application.
    pub records_failed_at_delivery_limit: AtomicU64,
    /// Source records RELEASEd on their last delivery: at_least_once,
    /// because an output of theirs could not be written; through the
    /// exactly-once ledger, because they could not be checked in time.
    /// The broker archives them (they are also logged).
    pub records_released_at_delivery_limit: AtomicU64,
    /// Records the broker delivered again to the worker that still held
    /// them in a transaction in flight (their lock had expired): left out
    /// of its poll, since that transaction's acknowledgement covers them.
    pub records_redelivered_while_held: AtomicU64,
    /// Records delivered and not yet committed or aborted.
    pub records_in_flight: AtomicI64,
    /// The exactly-once ledger's figures (all zero under the other
    /// mechanisms).
    pub ledger: LedgerMetrics,
    /// The exactly-once mechanism in use (`kip1289`, `ledger`), once chosen.
    pub mechanism: Mutex<Option<&'static str>>,
    /// Where the workers' time goes, summed over workers (nanoseconds).
    pub worker_time: WorkerTime,
    /// Share-group lag per source topic-partition; `None` until known (or
    /// when the cluster cannot tell).
    share_group_lag: Mutex<Option<BTreeMap<(String, i32), i64>>>,
    commit_latency_us: Mutex<Histogram<u64>>,
    batch_size: Mutex<Histogram<u64>>,
}

impl Default for RuntimeMetrics {
    fn default() -> Self {
        Self {
            records_in: AtomicU64::new(0),
            records_out: AtomicU64::new(0),
            records_rejected: AtomicU64::new(0),
            records_dead_lettered: AtomicU64::new(0),
            records_committed: AtomicU64::new(0),
            transactions_committed: AtomicU64::new(0),
            transactions_aborted: AtomicU64::new(0),
            producer_recoveries: AtomicU64::new(0),
            transactions_outcome_unknown: AtomicU64::new(0),
            lock_renewals: AtomicU64::new(0),
            records_failed_at_delivery_limit: AtomicU64::new(0),
            records_released_at_delivery_limit: AtomicU64::new(0),
            records_redelivered_while_held: AtomicU64::new(0),
            records_in_flight: AtomicI64::new(0),
            ledger: LedgerMetrics::default(),
            mechanism: Mutex::new(None),
            worker_time: WorkerTime::default(),
            share_group_lag: Mutex::new(None),
            commit_latency_us: Mutex::new(Histogram::new_with_bounds(1, 600_000_000, 3).unwrap()),
            batch_size: Mutex::new(Histogram::new_with_bounds(1, 10_000_000, 3).unwrap()),
        }
    }
}

/// The intent ledger's counters and gauges (docs/EXACTLY-ONCE.md 5.5).
#[derive(Debug, Default)]
pub struct LedgerMetrics {
    /// Intent records written.
    pub intents: AtomicU64,
    /// Their value bytes.
    pub intent_bytes: AtomicU64,
    /// Transactional ids fenced to resolve an open intent.
    pub fences: AtomicU64,
    /// Open intents that ended while waited for (no fence needed).
    pub fence_waits: AtomicU64,
    /// Source records ACCEPTed without output because a committed intent
    /// covers them (their outputs exist).
    pub skipped_committed: AtomicU64,
    /// Transactions aborted at arbitration (an earlier committed intent
    /// covers one of their records).
    pub arbitration_lost: AtomicU64,
    /// Fences of this process's workers announced by a peer's notice (not
    /// counted towards the duplicate-identity limit).
    pub fenced_by_peer: AtomicU64,
    /// Sum over ledger partitions of (high watermark - index position) at
    /// the last fetch.
    pub index_lag: AtomicI64,
    /// Intents held by the index (open and committed).
    pub index_entries: AtomicI64,
    /// DeleteRecords on the ledger by this process's trimmer that moved a
    /// partition's log start.
    pub trims: AtomicU64,
    /// Sum over ledger partitions of the log start offset after this
    /// process's last trim of each (records deleted from the ledger).
    pub log_start: AtomicI64,
    /// Source records released, not processed or committed, because their
    /// decision came later than `exactly.once.ledger.max.batch.age.ms`
    /// after their acquisition (they are delivered again).
    pub too_old: AtomicU64,
    /// Source records released unprocessed because the ledger could not be
    /// read while their acquisition lock lasted (they are delivered again,
    /// one delivery spent).
    pub unreadable_released: AtomicU64,
    /// Ledger checks that failed and succeeded on a later try while the
    /// worker held the records (an outage shorter than the lock: no
    /// delivery spent).
    pub unreadable_held: AtomicU64,
}

/// The workers' time by phase of their loop, nanoseconds summed over
/// workers (`sharestream_runtime_worker_seconds_total{phase}`): what a
/// profile of the loop needs without a profiler.
#[derive(Debug, Default)]
pub struct WorkerTime {
    /// In `poll` on the loop's path (waiting for ShareFetch answers, or for
    /// records when the source is idle).
    pub poll_ns: AtomicU64,
    /// Processing poll batches through the topology on the loop's path.
    pub process_ns: AtomicU64,
    /// Handing a processed batch's outputs to the producer and taking its
    /// records into the transaction.
    pub stage_ns: AtomicU64,
    /// Ending transactions: TxnShareAcknowledge, the produce flush, EndTxn
    /// (overlapped with the next poll under `poll.during.commit`).
    pub commit_ns: AtomicU64,
    /// Checking polled records against the exactly-once ledger (its end
    /// offsets read, the index caught up, the intents looked at).
    pub ledger_check_ns: AtomicU64,
    /// Part of `commit_ns`: staging the acknowledgements (TxnShareAcknowledge)
    /// or, through the ledger, writing the intents and arbitrating.
    pub commit_stage_ns: AtomicU64,
    /// Part of `commit_ns`: the produce flush and EndTxn (or, under
    /// at_least_once, the deliveries and the acknowledgement commit).
    pub commit_end_ns: AtomicU64,
    /// Not a phase (it overlaps the others): from a transaction's first
    /// record's acquisition to its commit start, summed over transactions.
    pub open_ns: AtomicU64,
    /// Polls that returned no record.
    pub empty_polls: AtomicU64,
    /// Polls that returned records.
    pub polls: AtomicU64,
}

impl WorkerTime {
    /// Adds `d` to a phase counter.
    pub fn add(c: &AtomicU64, d: Duration) {
        c.fetch_add(d.as_nanos() as u64, Ordering::Relaxed);
    }

    /// The phases as (name, seconds).
    pub fn seconds(&self) -> [(&'static str, f64); 5] {
        let s = |c: &AtomicU64| c.load(Ordering::Relaxed) as f64 / 1e9;
        [
            ("poll", s(&self.poll_ns)),
            ("ledger_check", s(&self.ledger_check_ns)),
            ("process", s(&self.process_ns)),
            ("stage", s(&self.stage_ns)),
            ("commit", s(&self.commit_ns)),
        ]
    }

    /// The parts of the commit phase and the transactions' open time, as
    /// (name, seconds): not phases of the loop, so not in [`Self::seconds`].
    pub fn commit_parts(&self) -> [(&'static str, f64); 3] {
        let s = |c: &AtomicU64| c.load(Ordering::Relaxed) as f64 / 1e9;
        [
            ("open", s(&self.open_ns)),
            ("commit_stage", s(&self.commit_stage_ns)),
            ("commit_end", s(&self.commit_end_ns)),
        ]
    }
}

/// The upper bounds of the Prometheus buckets of the commit latency
/// histogram, in seconds.
const LATENCY_BUCKETS: [f64; 12] = [
    0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0,
];
/// The upper bounds of the batch size buckets, in records.
const BATCH_BUCKETS: [f64; 10] = [
    1.0, 5.0, 10.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 5000.0, 10000.0,
];

impl RuntimeMetrics {
    /// Records one commit that took `latency` for `records` source records.
    pub fn record_commit(&self, latency: Duration, records: u64) {
        let us = (latency.as_micros() as u64).clamp(1, 600_000_000);
        let _ = self.commit_latency_us.lock().record(us);
        if records > 0 {
            let _ = self.batch_size.lock().record(records.min(10_000_000));
        }
    }

    /// A quantile (0..=1) of the commit latency.
    pub fn commit_latency_quantile(&self, q: f64) -> Duration {
        Duration::from_micros(self.commit_latency_us.lock().value_at_quantile(q))
    }

    /// The mean batch size (source records per commit).
    pub fn mean_batch_size(&self) -> f64 {
        self.batch_size.lock().mean()
    }

    /// Replaces the share-group lag (`None`: unknown, the gauge is absent).
    pub fn set_share_group_lag(&self, lag: Option<BTreeMap<(String, i32), i64>>) {
        *self.share_group_lag.lock() = lag;
    }

    /// The share-group lag per topic-partition, if known.
    pub fn share_group_lag(&self) -> Option<BTreeMap<(String, i32), i64>> {
        self.share_group_lag.lock().clone()
    }

    /// The share-group lag summed over the source partitions, if known.
    pub fn share_group_lag_total(&self) -> Option<i64> {
        self.share_group_lag
            .lock()
            .as_ref()
            .map(|m| m.values().sum())
    }

    /// A counter by field, for tests and summaries.
    pub fn get(&self, c: &AtomicU64) -> u64 {
        c.load(Ordering::Relaxed)
    }

    /// Prometheus text exposition (version 0.0.4).
    pub fn render_prometheus(&self) -> String {
        let mut out = String::new();
        let counters: [(&str, &str, &AtomicU64); 13] = [
            (
                "sharestream_runtime_records_in_total",
                "Source records delivered to the workers.",
                &self.records_in,
            ),
            (
                "sharestream_runtime_records_out_total",
                "Output records produced (committed).",
                &self.records_out,
            ),
            (
                "sharestream_runtime_records_rejected_total",
                "Source records rejected without a dead-letter record.",
                &self.records_rejected,
            ),
            (
                "sharestream_runtime_records_dead_lettered_total",
                "Source records sent to a dead-letter topic.",
                &self.records_dead_lettered,
            ),
            (
                "sharestream_runtime_records_committed_total",
                "Source records whose processing was committed.",
                &self.records_committed,
            ),
            (
                "sharestream_runtime_transactions_committed_total",
                "Transactions (or at-least-once commits) committed.",
                &self.transactions_committed,
            ),
            (
                "sharestream_runtime_transactions_aborted_total",
                "Transactions aborted.",
                &self.transactions_aborted,
            ),
            (
                "sharestream_runtime_records_failed_at_delivery_limit_total",
                "Source records that failed on their last delivery and were dead-lettered or rejected.",
                &self.records_failed_at_delivery_limit,
            ),
            (
                "sharestream_runtime_records_released_at_delivery_limit_total",
                "Source records released on their last delivery (at_least_once: an output failed; exactly_once through the ledger: not checked in time); the broker archives them.",
                &self.records_released_at_delivery_limit,
            ),
            (
                "sharestream_runtime_producer_recoveries_total",
                "Producers re-created after being fenced or after their transaction timed out.",
                &self.producer_recoveries,
            ),
            (
                "sharestream_runtime_transactions_outcome_unknown_total",
                "Producers re-created because the end of their transaction was unknown (EndTxn unanswered or refused as INVALID_TXN_STATE).",
                &self.transactions_outcome_unknown,
            ),
            (
                "sharestream_runtime_lock_renewals_total",
                "Acquisition locks renewed for records whose processing outlasted half their lock.",
                &self.lock_renewals,
            ),
            (
                "sharestream_runtime_records_redelivered_while_held_total",
                "Records delivered again to the worker that held them in a transaction in flight (lock expired); left out, that transaction acknowledges them.",
                &self.records_redelivered_while_held,
            ),
        ];
        let ledger: [(&str, &str, &AtomicU64); 11] = [
            (
                "sharestream_runtime_ledger_intents_total",
                "Intent records written to the exactly-once ledger.",
                &self.ledger.intents,
            ),
            (
                "sharestream_runtime_ledger_intent_bytes_total",
                "Bytes of intent record values written.",
                &self.ledger.intent_bytes,
            ),
            (
                "sharestream_runtime_ledger_fences_total",
                "Transactional ids fenced to resolve an open intent.",
                &self.ledger.fences,
            ),
            (
                "sharestream_runtime_ledger_fence_waits_total",
                "Open intents that ended while waited for, without a fence.",
                &self.ledger.fence_waits,
            ),
            (
                "sharestream_runtime_ledger_skipped_committed_total",
                "Source records accepted without output: a committed intent covers them.",
                &self.ledger.skipped_committed,
            ),
            (
                "sharestream_runtime_ledger_arbitration_lost_total",
                "Transactions aborted because an earlier committed intent covers their records.",
                &self.ledger.arbitration_lost,
            ),
            (
                "sharestream_runtime_ledger_fenced_by_peer_total",
                "Fences of this process's producers announced by a peer resolving an open intent.",
                &self.ledger.fenced_by_peer,
            ),
            (
                "sharestream_runtime_ledger_trims_total",
                "DeleteRecords by this process that moved a ledger partition's log start.",
                &self.ledger.trims,
            ),
            (
                "sharestream_runtime_ledger_too_old_total",
                "Source records released because their decision came after exactly.once.ledger.max.batch.age.ms.",
                &self.ledger.too_old,
            ),
            (
                "sharestream_runtime_ledger_unreadable_released_total",
                "Source records released unprocessed because the ledger could not be read while their lock lasted.",
                &self.ledger.unreadable_released,
            ),
            (
                "sharestream_runtime_ledger_unreadable_held_total",
                "Ledger checks that failed, then succeeded while the worker held the records.",
                &self.ledger.unreadable_held,
            ),
        ];
        for (name, help, c) in counters.into_iter().chain(ledger) {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {}",
                c.load(Ordering::Relaxed)
            );
        }
        let in_flight = self.records_in_flight.load(Ordering::Relaxed).max(0);
        let _ = writeln!(
            out,
            "# HELP sharestream_runtime_records_in_flight Records acquired by this process and not yet committed.\n# TYPE sharestream_runtime_records_in_flight gauge\nsharestream_runtime_records_in_flight {in_flight}"
        );
        let _ = writeln!(
            out,
            "# HELP sharestream_runtime_worker_seconds_total Time of the workers by phase of their loop, summed over workers.\n# TYPE sharestream_runtime_worker_seconds_total counter"
        );
        for (phase, secs) in self.worker_time.seconds() {
            let _ = writeln!(
                out,
                "sharestream_runtime_worker_seconds_total{{phase=\"{phase}\"}} {secs}"
            );
        }
        if let Some(m) = *self.mechanism.lock() {
            let _ = writeln!(
                out,
                "# HELP sharestream_runtime_exactly_once_mechanism The exactly-once mechanism in use.\n# TYPE sharestream_runtime_exactly_once_mechanism gauge\nsharestream_runtime_exactly_once_mechanism{{mechanism=\"{m}\"}} 1"
            );
            if m == "ledger" {
                let lag = self.ledger.index_lag.load(Ordering::Relaxed);
                let entries = self.ledger.index_entries.load(Ordering::Relaxed);
                let start = self.ledger.log_start.load(Ordering::Relaxed);
                let _ = writeln!(
                    out,
                    "# HELP sharestream_runtime_ledger_index_lag_records Ledger records not yet read by this process's index.\n# TYPE sharestream_runtime_ledger_index_lag_records gauge\nsharestream_runtime_ledger_index_lag_records {lag}\n# HELP sharestream_runtime_ledger_index_entries Intents held by this process's ledger index.\n# TYPE sharestream_runtime_ledger_index_entries gauge\nsharestream_runtime_ledger_index_entries {entries}\n# HELP sharestream_runtime_ledger_log_start_offsets Sum over ledger partitions of the log start offset after this process's last trim.\n# TYPE sharestream_runtime_ledger_log_start_offsets gauge\nsharestream_runtime_ledger_log_start_offsets {start}"
                );
            }
        }
        if let Some(lag) = self.share_group_lag.lock().as_ref() {
            let _ = writeln!(
                out,
                "# HELP sharestream_share_group_lag Records of the source partition from the share-partition start offset to the last stable offset.\n# TYPE sharestream_share_group_lag gauge"
            );
            for ((topic, partition), v) in lag {
                let topic = topic.replace('\\', "\\\\").replace('"', "\\\"");
                let _ = writeln!(
                    out,
                    "sharestream_share_group_lag{{topic=\"{topic}\",partition=\"{partition}\"}} {v}"
                );
            }
        }
        histogram(
            &mut out,
            "sharestream_runtime_commit_latency_seconds",
            "Time to commit a transaction (stage acknowledgements, flush, EndTxn).",
            &self.commit_latency_us.lock(),
            &LATENCY_BUCKETS,
            1e-6,
        );
        histogram(
            &mut out,
            "sharestream_runtime_batch_size_records",
            "Source records per committed transaction.",
            &self.batch_size.lock(),
            &BATCH_BUCKETS,
            1.0,
        );
        out
    }
}

fn histogram(
    out: &mut String,
    name: &str,
    help: &str,
    h: &Histogram<u64>,
    buckets: &[f64],
    scale: f64,
) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
    for le in buckets {
        let limit = (le / scale) as u64;
        let count: u64 = h
            .iter_recorded()
            .filter(|v| v.value_iterated_to() <= limit)
            .map(|v| v.count_at_value())
            .sum();
        let _ = writeln!(out, "{name}_bucket{{le=\"{le}\"}} {count}");
    }
    let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {}", h.len());
    let sum: f64 = h
        .iter_recorded()
        .map(|v| v.value_iterated_to() as f64 * v.count_at_value() as f64)
        .sum::<f64>()
        * scale;
    let _ = writeln!(out, "{name}_sum {sum}\n{name}_count {}", h.len());
}

/// Serves `GET /metrics` from `listener` until `shutdown` turns true (the
/// shared [`crate::metrics_http`] endpoint over
/// [`RuntimeMetrics::render_prometheus`]).
pub async fn serve(
    listener: TcpListener,
    metrics: std::sync::Arc<RuntimeMetrics>,
    shutdown: watch::Receiver<bool>,
) {
    let render = move || metrics.render_prometheus();
    crate::metrics_http::serve(listener, std::sync::Arc::new(render), shutdown).await
}

/// Binds `addr` for [`serve`].
pub async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    crate::metrics_http::bind(addr).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prometheus_text_has_counters_and_histograms() {
        let m = RuntimeMetrics::default();
        m.records_in.fetch_add(3, Ordering::Relaxed);
        m.transactions_committed.fetch_add(1, Ordering::Relaxed);
        m.record_commit(Duration::from_millis(3), 3);
        let text = m.render_prometheus();
        assert!(
            text.contains("sharestream_runtime_records_in_total 3"),
            "{text}"
        );
        assert!(text.contains("sharestream_runtime_transactions_committed_total 1"));
        assert!(
            text.contains("sharestream_runtime_commit_latency_seconds_bucket{le=\"0.002\"} 0"),
            "{text}"
        );
        assert!(
            text.contains("sharestream_runtime_commit_latency_seconds_bucket{le=\"0.005\"} 1"),
            "{text}"
        );
        assert!(text.contains("sharestream_runtime_batch_size_records_count 1"));
        assert!(text.contains("# TYPE sharestream_runtime_records_in_flight gauge"));
        assert!(!text.contains("sharestream_share_group_lag"), "{text}");
    }

    #[test]
    fn share_group_lag_gauge_per_partition_once_known() {
        let m = RuntimeMetrics::default();
        assert_eq!(m.share_group_lag_total(), None);
        m.set_share_group_lag(Some(BTreeMap::from([
            (("in".to_string(), 0), 5),
            (("in".to_string(), 1), 0),
        ])));
        assert_eq!(m.share_group_lag_total(), Some(5));
        let text = m.render_prometheus();
        assert!(
            text.contains("# TYPE sharestream_share_group_lag gauge"),
            "{text}"
        );
        assert!(
            text.contains("sharestream_share_group_lag{topic=\"in\",partition=\"0\"} 5"),
            "{text}"
        );
        assert!(text.contains("sharestream_share_group_lag{topic=\"in\",partition=\"1\"} 0"));
    }
}
