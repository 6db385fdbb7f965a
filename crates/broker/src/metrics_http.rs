//! The broker's metrics in Prometheus text format at `GET /metrics`
//! (`--metrics-listen`), served by the shared [`sharestream_common::metrics_http`]
//! endpoint.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::watch;

use super::core::BrokerCore;

/// Renders every metric of the broker: per-API request metrics plus gauges
/// of topics, transactions and share groups.
pub fn render(core: &BrokerCore) -> String {
    let t = core.txn().with_coordinator(|c| c.metrics());
    let partitions = core.all_partitions().len();
    let topics = core.topics().read().len();
    let gauges: Vec<(&str, &str, f64)> = vec![
        ("topics", "Topics.", topics as f64),
        ("partitions", "Partitions.", partitions as f64),
        (
            "consumer_group_offsets_expired_total",
            "Committed offsets removed by offsets.retention.minutes.",
            core.consumer_groups().offsets_expired_total() as f64,
        ),
        (
            "consumer_groups_expired_total",
            "Groups deleted by offset retention (Empty, no offsets left).",
            core.consumer_groups().groups_expired_total() as f64,
        ),
        (
            "transaction_partitions_count",
            "TransactionPartitionsCount: participants (log and share) of open transactions.",
            t.transaction_partitions_count as f64,
        ),
        (
            "transaction_share_participants_count",
            "Share participants of open transactions.",
            t.share_participants_count as f64,
        ),
        (
            "transactions_ongoing",
            "Open transactions.",
            t.ongoing_transactions as f64,
        ),
        (
            "transaction_markers_pending",
            "Markers not yet acknowledged.",
            t.markers_pending as f64,
        ),
        (
            "transactions_committed_total",
            "Committed transactions.",
            t.transactions_committed as f64,
        ),
        (
            "transactions_aborted_total",
            "Aborted transactions.",
            t.transactions_aborted as f64,
        ),
        (
            "transactions_timed_out_total",
            "Transactions aborted by their timeout.",
            t.transactions_timed_out as f64,
        ),
        (
            "producers_fenced_total",
            "Producers fenced with an open transaction.",
            t.producers_fenced as f64,
        ),
        (
            "txn_pending_records_count",
            "TxnPendingRecordsCount: share records staged in open transactions (KIP-1289).",
            core.txn_pending_records() as f64,
        ),
        (
            "txn_pending_lock_expired_count",
            "TxnPendingLockExpiredCount: acquisition locks that would have expired while their records were TX_PENDING (KIP-1289).",
            core.shares().txn_pending_lock_expired_total() as f64,
        ),
    ];
    let mut gauges = gauges;
    // TxnShareAcknowledgeRequestLatencyMs (KIP-1289): p50, p99, max.
    let staging = core
        .metrics()
        .api(sharestream_protocol::txn_share_ack::TXN_SHARE_ACKNOWLEDGE_API_KEY);
    let (p50, p99, max) = staging
        .map(|a| (a.p50_us, a.p99_us, a.max_us))
        .unwrap_or_default();
    gauges.push((
        "txn_share_acknowledge_request_latency_ms_p50",
        "TxnShareAcknowledgeRequestLatencyMs, median.",
        p50 as f64 / 1000.0,
    ));
    gauges.push((
        "txn_share_acknowledge_request_latency_ms_p99",
        "TxnShareAcknowledgeRequestLatencyMs, 99th percentile.",
        p99 as f64 / 1000.0,
    ));
    gauges.push((
        "txn_share_acknowledge_request_latency_ms_max",
        "TxnShareAcknowledgeRequestLatencyMs, maximum.",
        max as f64 / 1000.0,
    ));
    let mut out = core.metrics().render_prometheus(&gauges);
    out.push_str(&core.shares().render_prometheus());
    out.push_str(&core.shares().render_dead_letter_prometheus());
    out
}

/// Serves `GET /metrics` on `listener` until shutdown (the shared
/// [`sharestream_common::metrics_http`] endpoint over [`render`]).
pub async fn serve(listener: TcpListener, core: Arc<BrokerCore>, shutdown: watch::Receiver<bool>) {
    sharestream_common::metrics_http::serve(listener, Arc::new(move || render(&core)), shutdown)
        .await
}

/// Binds the metrics listener.
pub async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    sharestream_common::metrics_http::bind(addr).await
}
