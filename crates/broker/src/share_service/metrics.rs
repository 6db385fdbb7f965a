//! Metrics of the share partitions: gauges and counters per share
//! partition, in Prometheus text for `GET /metrics`, and the KIP-1289
//! TX_PENDING totals.

use std::fmt::Write as _;

use super::ShareService;
use crate::group::SharePartitionKey;
use crate::share::SharePartitionMetrics;

impl ShareService {
    /// Gauges and counters of every share partition.
    pub fn partition_metrics(&self) -> Vec<(SharePartitionKey, SharePartitionMetrics)> {
        self.inner
            .lock()
            .partitions
            .iter()
            .map(|(k, e)| (k.clone(), e.sp.metrics()))
            .collect()
    }

    /// Total runs held by every share partition (memory, in runs).
    pub fn run_count(&self) -> usize {
        self.inner
            .lock()
            .partitions
            .values()
            .map(|e| e.sp.run_count())
            .sum()
    }

    /// Locks that would have expired while their records were TX_PENDING
    /// (KIP-1289 TxnPendingLockExpiredCount), all share partitions.
    pub fn txn_pending_lock_expired_total(&self) -> u64 {
        self.inner
            .lock()
            .partitions
            .values()
            .map(|e| e.sp.metrics().txn_pending_lock_expired_total)
            .sum()
    }

    /// Records TX_PENDING on every share partition (a `share.version`
    /// downgrade below 3 is refused while this is not 0).
    pub fn txn_pending_records(&self) -> u64 {
        self.inner
            .lock()
            .partitions
            .values()
            .map(|e| e.sp.txn_pending_records())
            .sum()
    }

    /// Per share partition metrics in Prometheus text format: in-flight,
    /// acquired, acknowledged and archived records (gauges), lock expiries
    /// and redeliveries (counters), labelled by group, topic id and
    /// partition.
    pub fn render_prometheus(&self) -> String {
        let rows = self.partition_metrics();
        let mut out = String::new();
        type Series = (
            &'static str,
            &'static str,
            &'static str,
            fn(&SharePartitionMetrics) -> u64,
        );
        let series: [Series; 8] = [
            (
                "share_partition_in_flight_records",
                "gauge",
                "Records in the in-flight window.",
                |m| m.in_flight_records,
            ),
            (
                "share_partition_acquired_records",
                "gauge",
                "Records ACQUIRED.",
                |m| m.acquired_records,
            ),
            (
                "share_partition_acknowledged_records",
                "gauge",
                "Records ACKNOWLEDGED in the window.",
                |m| m.acknowledged_records,
            ),
            (
                "share_partition_archived_records",
                "gauge",
                "Records ARCHIVED in the window.",
                |m| m.archived_records,
            ),
            (
                "share_partition_archiving_records",
                "gauge",
                "Records ARCHIVING: waiting for their dead-letter record (KIP-1191).",
                |m| m.archiving_records,
            ),
            (
                "share_partition_lock_expired_total",
                "counter",
                "Acquisition locks that expired.",
                |m| m.lock_expired_total,
            ),
            (
                "share_partition_redeliveries_total",
                "counter",
                "Records acquired again after a first delivery.",
                |m| m.redeliveries_total,
            ),
            (
                "share_partition_archived_at_delivery_limit_total",
                "counter",
                "Records archived because their delivery count reached the limit (not delivered again).",
                |m| m.archived_at_limit_total,
            ),
        ];
        for (name, ty, help, get) in series {
            let _ = writeln!(out, "# HELP sharestream_{name} {help}");
            let _ = writeln!(out, "# TYPE sharestream_{name} {ty}");
            for (k, m) in &rows {
                let _ = writeln!(
                    out,
                    "sharestream_{name}{{group=\"{}\",topic_id=\"{}\",partition=\"{}\"}} {}",
                    k.group_id.replace('\\', "\\\\").replace('"', "\\\""),
                    k.topic_id,
                    k.partition,
                    get(m)
                );
            }
        }
        out
    }
}
