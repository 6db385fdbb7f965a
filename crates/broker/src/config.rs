//! Broker configuration.

use std::net::SocketAddr;
use std::path::PathBuf;

/// Where partition data and broker state live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StorageMode {
    /// Nothing survives the process.
    Memory,
    /// A data directory.
    Directory(PathBuf),
}

pub use super::log::FsyncPolicy;

/// Configuration of an embedded broker.
#[derive(Debug, Clone)]
pub struct BrokerConfig {
    /// Address to listen on; port 0 picks a free port.
    pub listen: SocketAddr,
    /// Host advertised to clients (defaults to the bound IP).
    pub advertised_host: Option<String>,
    /// Port advertised to clients (defaults to the bound port).
    pub advertised_port: Option<u16>,
    /// This broker's node id.
    pub node_id: i32,
    /// The cluster id reported in Metadata and DescribeCluster.
    pub cluster_id: String,
    /// Storage.
    pub storage: StorageMode,
    /// Flush policy of partition logs.
    pub fsync: FsyncPolicy,
    /// Maximum concurrent client connections.
    pub max_connections: usize,
    /// Maximum bytes of requests held by the broker at once, all connections
    /// together (Kafka's `queued.max.request.bytes`).
    pub max_queued_request_bytes: usize,
    /// Maximum size of one request frame (`socket.request.max.bytes`).
    pub max_frame_size: usize,
    /// Create unknown topics on Metadata requests that allow it
    /// (`auto.create.topics.enable`; off by default).
    pub auto_create_topics: bool,
    /// Partitions of auto-created topics (`num.partitions`).
    pub default_partitions: i32,
    /// Largest record batch accepted (`message.max.bytes`).
    pub message_max_bytes: i32,
    /// Finalized `share.version` at start (3 enables KIP-1289).
    pub share_version: i16,
    /// Finalized `transaction.version` at start (2 = transactions v2).
    pub transaction_version: i16,
    /// Largest `transaction.timeout.ms` a producer may ask for.
    pub transaction_max_timeout_ms: i32,
    /// Segment size of partition logs (`log.segment.bytes`).
    pub segment_bytes: u64,
    /// How often `retention.ms` / `retention.bytes` are applied
    /// (`log.retention.check.interval.ms`, Kafka's default 300000).
    pub retention_check_interval_ms: u64,
    /// How often the log cleaner looks for compacted partitions to clean
    /// (`log.cleaner.backoff.ms`, Kafka's default 15000); 0 = no timer
    /// (tests call `BrokerCore::clean_logs`).
    pub log_cleaner_backoff_ms: u64,
    /// How long committed offsets of an Empty (or member-less) group are
    /// kept (`offsets.retention.minutes`, Kafka's default 10080).
    pub offsets_retention_minutes: i64,
    /// How often committed-offset retention runs
    /// (`offsets.retention.check.interval.ms`, Kafka's default 600000).
    pub offsets_retention_check_interval_ms: i64,
    /// Where to serve `GET /metrics` (Prometheus text); `None` = off.
    pub metrics_listen: Option<SocketAddr>,
    /// Share group settings (`group.share.*`): defaults and bounds of the
    /// group configs, in-flight record cap, group size.
    pub share_groups: crate::group::ShareGroupBrokerConfig,
    /// Listener security: SASL, users, super users, ACLs.
    pub security: crate::security::SecurityConfig,
    /// Consumer group settings (`group.*`): session timeout bounds, initial
    /// rebalance delay, group size, offset metadata size.
    pub consumer_groups: crate::consumer_group::ClassicGroupConfig,
    /// The broker's clock: the time input of every state machine (lock,
    /// session and transaction deadlines). Tests put a
    /// [`TokioClock`](crate::clock::TokioClock) or a
    /// [`ManualClock`](crate::clock::ManualClock) here.
    pub clock: crate::clock::SharedClock,
}

impl Default for BrokerConfig {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:0".parse().expect("valid literal address"),
            advertised_host: None,
            advertised_port: None,
            node_id: 0,
            cluster_id: "sharestream-embedded".to_string(),
            storage: StorageMode::Memory,
            fsync: FsyncPolicy::Never,
            max_connections: 1024,
            max_queued_request_bytes: 512 * 1024 * 1024,
            max_frame_size: sharestream_protocol::frame::DEFAULT_MAX_FRAME_SIZE,
            auto_create_topics: false,
            default_partitions: 1,
            message_max_bytes: 1_048_588,
            share_version: 3,
            transaction_version: 2,
            transaction_max_timeout_ms: 900_000,
            segment_bytes: 1 << 30,
            retention_check_interval_ms: 300_000,
            log_cleaner_backoff_ms: 15_000,
            offsets_retention_minutes: 10_080,
            offsets_retention_check_interval_ms: 600_000,
            metrics_listen: None,
            share_groups: crate::group::ShareGroupBrokerConfig::default(),
            security: crate::security::SecurityConfig::default(),
            consumer_groups: crate::consumer_group::ClassicGroupConfig::default(),
            clock: crate::clock::system(),
        }
    }
}

impl BrokerConfig {
    /// An in-memory broker on a free loopback port: what tests and demos use.
    pub fn in_memory() -> Self {
        Self::default()
    }

    /// A durable broker storing its data in `dir`.
    pub fn with_data_dir(dir: impl Into<PathBuf>) -> Self {
        Self {
            storage: StorageMode::Directory(dir.into()),
            fsync: FsyncPolicy::EveryBatch,
            ..Self::default()
        }
    }
}
