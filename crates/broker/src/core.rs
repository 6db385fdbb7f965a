//! The broker's shared state: configuration, topics, finalized features,
//! metrics, and the durable cluster metadata file.

use std::net::SocketAddr;
use std::path::PathBuf;

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use serde::{Deserialize, Serialize};
use tokio::sync::Semaphore;
use uuid::Uuid;

use super::config::{BrokerConfig, StorageMode};
use super::log::{
    AppendOptions, CleanOutcome, CleanerConfig, LogConfig, LogError, PartitionLog, StateLog,
};
use super::metrics::BrokerMetrics;
use super::topics::{TopicError, TopicMeta, TopicRegistry};
use super::txn::{MarkerAck, MarkerRequest, TxnCoordinatorConfig};
use super::txn_service::{MarkerSink, TxnService};
use sharestream_protocol::records::{RecordBatchView, control_batch};
use std::collections::BTreeMap;

/// Name of the share-group feature.
pub const SHARE_VERSION: &str = "share.version";
/// Name of the transaction-protocol feature.
pub const TRANSACTION_VERSION: &str = "transaction.version";
/// Highest `share.version` this broker supports (3 = KIP-1289).
pub const MAX_SHARE_VERSION: i16 = 3;
/// Highest `transaction.version` this broker supports.
pub const MAX_TRANSACTION_VERSION: i16 = 2;

/// Finalized feature levels and their epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Features {
    /// Finalized `share.version`.
    pub share_version: i16,
    /// Finalized `transaction.version`.
    pub transaction_version: i16,
    /// Finalized-features epoch; never goes down.
    pub epoch: i64,
}

impl Features {
    /// Whether KIP-1289 (apiKey 95) is enabled.
    pub fn txn_share_ack_enabled(&self) -> bool {
        self.share_version >= 3 && self.transaction_version >= 2
    }

    /// Whether KIP-1191 dead-letter queues may be in force
    /// (`share.version >= 2`).
    pub fn dead_letter_queues_enabled(&self) -> bool {
        self.share_version >= 2
    }

    /// Whether share groups are enabled at all.
    pub fn share_groups_enabled(&self) -> bool {
        self.share_version >= 1
    }
}

/// What `metadata.json` in the data directory holds.
#[derive(Debug, Default, Serialize, Deserialize)]
struct ClusterMetadata {
    topics: TopicRegistry,
    features: Option<Features>,
    /// Dynamic broker configs set with (Incremental)AlterConfigs: the
    /// cluster-wide defaults (resource name "") and this node's.
    #[serde(default)]
    broker_configs: DynamicBrokerConfigs,
}

/// Dynamic broker configs (IncrementalAlterConfigs / AlterConfigs on a
/// BROKER resource), as Kafka keeps them in its metadata log.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DynamicBrokerConfigs {
    /// Cluster-wide defaults (resource name "").
    pub cluster_default: BTreeMap<String, String>,
    /// This node's own (resource name = its node id).
    pub node: BTreeMap<String, String>,
}

/// The broker's shared state.
pub struct BrokerCore {
    config: BrokerConfig,
    advertised_host: String,
    advertised_port: u16,
    topics: RwLock<TopicRegistry>,
    features: RwLock<Features>,
    broker_configs: RwLock<DynamicBrokerConfigs>,
    metrics: BrokerMetrics,
    request_bytes: Semaphore,
    partitions: RwLock<HashMap<(Uuid, i32), SharedLog>>,
    appended: tokio::sync::watch::Sender<u64>,
    shares: super::share_service::ShareService,
    consumer_groups: super::consumer_groups::GroupService,
    txn: TxnService,
    security: super::security::SecurityState,
    quotas: super::client_quotas::QuotaStore,
}

/// A partition log shared between request handlers.
pub type SharedLog = Arc<Mutex<PartitionLog>>;

impl std::fmt::Debug for BrokerCore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BrokerCore")
            .field("advertised_host", &self.advertised_host)
            .field("advertised_port", &self.advertised_port)
            .finish_non_exhaustive()
    }
}

impl BrokerCore {
    /// Opens (or creates) the broker state for `config`, bound at `local_addr`.
    pub fn open(config: BrokerConfig, local_addr: SocketAddr) -> std::io::Result<Self> {
        let advertised_host =
            config
                .advertised_host
                .clone()
                .unwrap_or_else(|| match local_addr.ip() {
                    ip if ip.is_unspecified() => "127.0.0.1".to_string(),
                    ip => ip.to_string(),
                });
        let advertised_port = config.advertised_port.unwrap_or(local_addr.port());
        let mut meta = ClusterMetadata::default();
        if let StorageMode::Directory(dir) = &config.storage {
            std::fs::create_dir_all(dir)?;
            let path = dir.join("metadata.json");
            if path.exists() {
                let text = std::fs::read(&path)?;
                meta = serde_json::from_slice(&text).map_err(|e| {
                    std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        format!("{}: {e}", path.display()),
                    )
                })?;
                meta.topics.reindex();
            }
        }
        let features = meta.features.unwrap_or(Features {
            share_version: config.share_version.clamp(0, MAX_SHARE_VERSION),
            transaction_version: config.transaction_version.clamp(0, MAX_TRANSACTION_VERSION),
            epoch: 1,
        });
        let request_bytes = Semaphore::new(
            config
                .max_queued_request_bytes
                .max(config.max_frame_size)
                .min(Semaphore::MAX_PERMITS)
                .min(u32::MAX as usize),
        );
        let shares = super::share_service::ShareService::open_with(
            match &config.storage {
                StorageMode::Directory(dir) => Some(dir.join("share-state")),
                StorageMode::Memory => None,
            }
            .as_deref(),
            config.share_groups.clone(),
            config.clock.now_ms(),
            features.dead_letter_queues_enabled(),
        )?;
        let consumer_groups = super::consumer_groups::GroupService::open(
            match &config.storage {
                StorageMode::Directory(dir) => Some(dir.join("groups")),
                StorageMode::Memory => None,
            }
            .as_deref(),
            config.consumer_groups.clone(),
            config.clock.now_ms(),
        )?;
        consumer_groups.set_offsets_retention(
            config.offsets_retention_minutes.saturating_mul(60_000),
            config.offsets_retention_check_interval_ms,
        );
        let txn_config = TxnCoordinatorConfig {
            max_transaction_timeout_ms: config.transaction_max_timeout_ms,
            ..TxnCoordinatorConfig::default()
        };
        let (txn_log, replayed) = match &config.storage {
            StorageMode::Directory(dir) => {
                let txn_dir = dir.join("txn");
                std::fs::create_dir_all(&txn_dir)?;
                let (log, records, _recovery) = StateLog::open(txn_dir.join("state.log"))?;
                (log, records)
            }
            StorageMode::Memory => (StateLog::in_memory(), Vec::new()),
        };
        let (txn, recovered_markers) =
            TxnService::open(txn_config, txn_log, replayed, config.clock.now_ms())?;
        let security = super::security::SecurityState::open(
            config.security.clone(),
            match &config.storage {
                StorageMode::Directory(dir) => Some(dir.as_path()),
                StorageMode::Memory => None,
            },
        )?;
        let quotas = super::client_quotas::QuotaStore::open(match &config.storage {
            StorageMode::Directory(dir) => Some(dir.join(super::client_quotas::QUOTAS_FILE)),
            StorageMode::Memory => None,
        })?;
        let core = Self {
            security,
            quotas,
            shares,
            consumer_groups,
            txn,
            config,
            advertised_host,
            advertised_port,
            topics: RwLock::new(meta.topics),
            features: RwLock::new(features),
            broker_configs: RwLock::new(meta.broker_configs),
            metrics: BrokerMetrics::default(),
            request_bytes,
            partitions: RwLock::new(HashMap::new()),
            appended: tokio::sync::watch::channel(0).0,
        };
        let topics: Vec<TopicMeta> = core.topics.read().iter().cloned().collect();
        for t in &topics {
            core.open_partitions(t, 0)
                .map_err(|e| std::io::Error::other(format!("opening topic {}: {e}", t.name)))?;
        }
        // Transactions that were deciding when the broker stopped get their
        // markers again (duplicates are no-ops).
        core.txn.deliver(core.now_ms(), &core, recovered_markers);
        // D9: TX_PENDING share records whose transaction already ended are
        // resolved from the recovered coordinator's knowledge.
        let resolved = core.shares.resolve_recovered(
            |pid, epoch| {
                use super::share::RecoveredTxn;
                use super::txn::TxnOutcome;
                match core
                    .txn
                    .with_coordinator(|c| c.transaction_outcome(pid, epoch))
                {
                    TxnOutcome::Committed => RecoveredTxn::Committed,
                    // Unknown: the coordinator never saw it durably begin, so
                    // it cannot commit; revert.
                    TxnOutcome::Aborted | TxnOutcome::Unknown => RecoveredTxn::Aborted,
                    TxnOutcome::Ongoing => RecoveredTxn::Ongoing,
                }
            },
            core.now_ms(),
        );
        if resolved > 0 {
            tracing::info!(
                records = resolved,
                "resolved TX_PENDING share records after restart"
            );
        }
        Ok(core)
    }

    fn log_config(&self, topic: &TopicMeta) -> LogConfig {
        let max_message_bytes = topic
            .config("max.message.bytes")
            .and_then(|v| v.parse::<usize>().ok())
            .unwrap_or(self.config.message_max_bytes as usize);
        let segment_bytes = topic
            .configs
            .get("segment.bytes")
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(self.config.segment_bytes);
        // Kafka rolls a compacted topic's segment by max.compaction.lag.ms
        // too, so that the lag can be honoured (the active one is never
        // cleaned).
        let mut segment_ms = topic.config_i64("segment.ms").unwrap_or(604_800_000);
        if topic.is_compacted() {
            segment_ms = segment_ms.min(
                topic
                    .config_i64("max.compaction.lag.ms")
                    .unwrap_or(i64::MAX),
            );
        }
        LogConfig {
            segment_bytes,
            fsync: self.config.fsync,
            max_message_bytes,
            segment_ms: Some(segment_ms),
            ..LogConfig::default()
        }
        .normalized()
    }

    fn partition_dir(&self, topic: &TopicMeta, partition: i32) -> Option<PathBuf> {
        self.data_dir().map(|d| {
            d.join("logs")
                .join(format!("{}-{}", topic.name, topic.id.simple()))
                .join(partition.to_string())
        })
    }

    /// Opens (or creates) the logs of partitions `from..topic.partitions`.
    fn open_partitions(&self, topic: &TopicMeta, from: i32) -> Result<(), LogError> {
        for p in from..topic.partitions {
            let config = self.log_config(topic);
            // `__consumer_offsets` is always empty here (the group
            // coordinator keeps its own log): its partitions need no files.
            let dir = if topic.is_internal() {
                None
            } else {
                self.partition_dir(topic, p)
            };
            let log = match dir {
                Some(dir) => PartitionLog::open(&dir, config)?,
                None => PartitionLog::in_memory(config),
            };
            self.partitions
                .write()
                .insert((topic.id, p), Arc::new(Mutex::new(log)));
        }
        Ok(())
    }

    /// Listener security state: credentials and the authorizer.
    pub fn security(&self) -> &super::security::SecurityState {
        &self.security
    }

    /// The client quotas (AlterClientQuotas, DescribeClientQuotas) and
    /// the rates measured against them.
    pub fn quotas(&self) -> &super::client_quotas::QuotaStore {
        &self.quotas
    }

    /// Whether `principal` from `host` may do `op` on `resource`: always
    /// with ACLs off, else as the authorizer decides.
    pub fn authorize(
        &self,
        principal: &str,
        host: &str,
        op: super::acl::AclOperation,
        resource: &super::acl::Resource,
    ) -> bool {
        self.security
            .authorizer()
            .is_none_or(|a| a.authorize(principal, host, op, resource))
    }

    /// The log of a partition.
    pub fn partition(&self, topic_id: Uuid, partition: i32) -> Option<SharedLog> {
        self.partitions.read().get(&(topic_id, partition)).cloned()
    }

    /// All partition logs.
    pub fn all_partitions(&self) -> Vec<((Uuid, i32), SharedLog)> {
        self.partitions
            .read()
            .iter()
            .map(|(k, v)| (*k, v.clone()))
            .collect()
    }

    /// Records in the TX_PENDING state across all share partitions (the
    /// KIP-1289 health gauge, and the guard of a `share.version` downgrade).
    pub fn txn_pending_records(&self) -> u64 {
        self.shares.txn_pending_records()
    }

    /// The transaction coordinator service.
    pub fn txn(&self) -> &TxnService {
        &self.txn
    }

    /// Runs a transaction-coordinator operation (see [`TxnService::call`]).
    pub fn txn_call<T>(
        &self,
        f: impl FnOnce(&mut super::txn::TransactionCoordinator, i64) -> super::txn::TxnOutput<T>,
    ) -> Result<T, sharestream_protocol::ErrorCode> {
        self.txn.call(self.now_ms(), self, f)
    }

    /// Advances the transaction coordinator's clock.
    pub fn txn_tick(&self) {
        self.txn.tick(self.now_ms(), self);
    }

    /// Tells long-polling fetches that data was appended.
    pub fn notify_appended(&self) {
        self.appended.send_modify(|v| *v = v.wrapping_add(1));
    }

    /// A receiver woken by every append.
    pub fn subscribe_appended(&self) -> tokio::sync::watch::Receiver<u64> {
        self.appended.subscribe()
    }

    /// The configuration.
    pub fn config(&self) -> &BrokerConfig {
        &self.config
    }

    /// Advertised host and port.
    pub fn advertised(&self) -> (&str, u16) {
        (&self.advertised_host, self.advertised_port)
    }

    /// This broker's node id.
    pub fn node_id(&self) -> i32 {
        self.config.node_id
    }

    /// The topic registry.
    pub fn topics(&self) -> &RwLock<TopicRegistry> {
        &self.topics
    }

    /// Current finalized features.
    pub fn features(&self) -> Features {
        *self.features.read()
    }

    /// Replaces the finalized features (bumping the epoch) and persists them.
    pub fn set_features(
        &self,
        share_version: i16,
        transaction_version: i16,
    ) -> std::io::Result<()> {
        {
            let mut f = self.features.write();
            f.share_version = share_version;
            f.transaction_version = transaction_version;
            f.epoch += 1;
            self.shares
                .set_dead_letter_feature(f.dead_letter_queues_enabled());
        }
        self.persist_metadata()
    }

    /// Now, from the broker's one clock (milliseconds since the Unix
    /// epoch): the time input of every state machine.
    pub fn now_ms(&self) -> i64 {
        self.config.clock.now_ms()
    }

    /// The share groups: coordinator, share partitions, share sessions.
    pub fn shares(&self) -> &super::share_service::ShareService {
        &self.shares
    }

    /// The consumer groups: classic group coordinator and committed offsets.
    pub fn consumer_groups(&self) -> &super::consumer_groups::GroupService {
        &self.consumer_groups
    }

    /// Metrics.
    pub fn metrics(&self) -> &BrokerMetrics {
        &self.metrics
    }

    /// The pool of request bytes shared by all connections.
    pub fn request_bytes(&self) -> &Semaphore {
        &self.request_bytes
    }

    /// The log directory: the data directory, `None` in memory mode.
    pub fn log_dir(&self) -> Option<&std::path::Path> {
        self.data_dir().map(PathBuf::as_path)
    }

    fn data_dir(&self) -> Option<&PathBuf> {
        match &self.config.storage {
            StorageMode::Directory(d) => Some(d),
            StorageMode::Memory => None,
        }
    }

    /// Writes topics and features to `metadata.json` atomically (temp file,
    /// fsync, rename, fsync of the directory). A no-op in memory mode.
    pub fn persist_metadata(&self) -> std::io::Result<()> {
        let Some(dir) = self.data_dir() else {
            return Ok(());
        };
        let meta = ClusterMetadata {
            topics: self.topics.read().clone(),
            features: Some(self.features()),
            broker_configs: self.broker_configs.read().clone(),
        };
        let bytes = serde_json::to_vec_pretty(&meta)
            .map_err(|e| std::io::Error::other(format!("serializing metadata: {e}")))?;
        crate::log::write_atomic(&dir.join("metadata.json"), &bytes)
    }

    /// Creates a topic (or only validates, with `validate_only`) and
    /// persists the registry.
    pub fn create_topic(
        &self,
        name: &str,
        partitions: i32,
        replication_factor: i16,
        configs: BTreeMap<String, String>,
        validate_only: bool,
    ) -> Result<TopicMeta, TopicError> {
        let meta = {
            let mut reg = self.topics.write();
            if validate_only {
                reg.check_create(name, partitions, replication_factor, &configs)?;
                return Ok(TopicMeta {
                    name: name.to_string(),
                    id: uuid::Uuid::nil(),
                    partitions,
                    configs,
                });
            }
            reg.create(name, partitions, replication_factor, configs)?
        };
        if let Err(e) = self.open_partitions(&meta, 0) {
            tracing::error!(topic = name, error = %e, "creating partition logs failed");
            self.topics.write().delete(name);
            return Err(TopicError {
                code: e.error_code(),
                message: format!("creating the partition logs failed: {e}"),
            });
        }
        self.persist_or_log();
        Ok(meta)
    }

    /// Creates Kafka's internal `__consumer_offsets` topic if it does not
    /// exist yet, as Kafka does when a group coordinator is first looked
    /// up: 50 partitions, `cleanup.policy=compact`, listed in Metadata as
    /// internal. Its partitions stay empty (offsets live in the group
    /// coordinator's own log); clients may list and fetch it, not produce
    /// to it.
    pub fn ensure_offsets_topic(&self) {
        let name = super::topics::CONSUMER_OFFSETS_TOPIC;
        if self.topics.read().get(name).is_some() {
            return;
        }
        let configs: BTreeMap<String, String> = [
            ("cleanup.policy", "compact"),
            ("compression.type", "producer"),
            ("segment.bytes", "104857600"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        match self.create_topic(
            name,
            super::topics::CONSUMER_OFFSETS_PARTITIONS,
            1,
            configs,
            false,
        ) {
            Ok(_) => tracing::info!("created the internal topic {name}"),
            // Created meanwhile by another request.
            Err(e) if e.code == sharestream_protocol::ErrorCode::TOPIC_ALREADY_EXISTS => {}
            Err(e) => tracing::error!(error = %e.message, "creating {name} failed"),
        }
    }

    /// Deletes a topic and persists the registry.
    pub fn delete_topic(&self, name: &str) -> Option<TopicMeta> {
        let meta = self.topics.write().delete(name)?;
        self.persist_or_log();
        self.consumer_groups.on_topic_deleted(name);
        {
            let mut parts = self.partitions.write();
            for p in 0..meta.partitions {
                parts.remove(&(meta.id, p));
            }
        }
        if let Some(dir) = self
            .partition_dir(&meta, 0)
            .and_then(|d| d.parent().map(|p| p.to_path_buf()))
            && let Err(e) = std::fs::remove_dir_all(&dir)
        {
            tracing::warn!(dir = %dir.display(), error = %e, "removing a deleted topic's logs failed");
        }
        Some(meta)
    }

    /// Raises a topic's partition count (or only validates).
    pub fn add_partitions(
        &self,
        name: &str,
        count: i32,
        validate_only: bool,
    ) -> Result<(), TopicError> {
        {
            let mut reg = self.topics.write();
            if validate_only {
                let mut copy = reg.clone();
                copy.reindex();
                copy.add_partitions(name, count)?;
                return Ok(());
            }
            let before = reg.get(name).map(|t| t.partitions).unwrap_or(0);
            let meta = reg.add_partitions(name, count)?;
            drop(reg);
            self.open_partitions(&meta, before)
                .map_err(|e| TopicError {
                    code: e.error_code(),
                    message: format!("creating the partition logs failed: {e}"),
                })?;
        }
        self.persist_or_log();
        Ok(())
    }

    /// Replaces the explicit configs of a topic (or only validates) and
    /// applies those that change its logs (`max.message.bytes`,
    /// `segment.bytes`) to every partition at once.
    pub fn alter_topic_configs(
        &self,
        name: &str,
        configs: BTreeMap<String, String>,
        validate_only: bool,
    ) -> Result<TopicMeta, TopicError> {
        let meta = self
            .topics
            .write()
            .replace_configs(name, configs, validate_only)?;
        if !validate_only {
            let lc = self.log_config(&meta);
            for p in 0..meta.partitions {
                if let Some(log) = self.partition(meta.id, p) {
                    let mut log = log.lock();
                    log.set_limits(lc.max_message_bytes, lc.segment_bytes);
                    log.set_segment_ms(lc.segment_ms);
                }
            }
            self.persist_or_log();
        }
        Ok(meta)
    }

    /// The dynamic broker configs.
    pub fn dynamic_broker_configs(&self) -> DynamicBrokerConfigs {
        self.broker_configs.read().clone()
    }

    /// Replaces the dynamic broker configs and persists them.
    pub fn set_dynamic_broker_configs(&self, configs: DynamicBrokerConfigs) {
        *self.broker_configs.write() = configs;
        self.persist_or_log();
    }

    /// Applies `retention.ms` and `retention.bytes` to every partition of
    /// the topics whose `cleanup.policy` includes `delete` (the broker's
    /// timer calls this every `log.retention.check.interval.ms`). Returns
    /// the number of segments deleted.
    pub fn enforce_retention(&self, now_ms: i64) -> usize {
        let topics: Vec<TopicMeta> = self.topics.read().iter().cloned().collect();
        let mut deleted = 0;
        for t in topics {
            let delete_policy = t
                .config("cleanup.policy")
                .is_some_and(|p| p.split(',').any(|x| x.trim() == "delete"));
            let ms = t.config_i64("retention.ms").unwrap_or(-1);
            let bytes = t.config_i64("retention.bytes").unwrap_or(-1);
            if !delete_policy || (ms < 0 && bytes < 0) {
                continue;
            }
            for p in 0..t.partitions {
                let Some(log) = self.partition(t.id, p) else {
                    continue;
                };
                match log.lock().enforce_retention(now_ms, ms, bytes) {
                    Ok(o) if o.deleted_segments > 0 => {
                        deleted += o.deleted_segments;
                        tracing::info!(
                            topic = %t.name,
                            partition = p,
                            segments = o.deleted_segments,
                            log_start_offset = o.log_start_offset,
                            "retention deleted old segments"
                        );
                    }
                    Ok(_) => {}
                    Err(e) => {
                        tracing::error!(topic = %t.name, partition = p, error = %e, "applying retention failed")
                    }
                }
            }
        }
        deleted
    }

    /// Runs the log cleaner once over every partition of the topics whose
    /// `cleanup.policy` includes `compact` (internal topics aside): each is
    /// compacted if due at `now_ms` under its topic's configs. What was
    /// removed is logged per partition and added to the `log_cleaner_*`
    /// counters. The broker's timer calls this every
    /// `log.cleaner.backoff.ms`; tests call it at a manual clock's time.
    pub fn clean_logs(&self, now_ms: i64) -> CleanOutcome {
        let topics: Vec<TopicMeta> = self.topics.read().iter().cloned().collect();
        let mut total = CleanOutcome::default();
        for t in topics {
            if !t.is_compacted() || t.is_internal() {
                continue;
            }
            let defaults = CleanerConfig::default();
            let config = CleanerConfig {
                delete_retention_ms: t
                    .config_i64("delete.retention.ms")
                    .unwrap_or(defaults.delete_retention_ms),
                min_compaction_lag_ms: t
                    .config_i64("min.compaction.lag.ms")
                    .unwrap_or(defaults.min_compaction_lag_ms),
                max_compaction_lag_ms: t
                    .config_i64("max.compaction.lag.ms")
                    .unwrap_or(defaults.max_compaction_lag_ms),
                min_cleanable_dirty_ratio: t
                    .config("min.cleanable.dirty.ratio")
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(defaults.min_cleanable_dirty_ratio),
            };
            for p in 0..t.partitions {
                let Some(log) = self.partition(t.id, p) else {
                    continue;
                };
                let res = log.lock().clean(now_ms, config);
                match res {
                    Ok(o) if o.segments_cleaned > 0 => {
                        tracing::info!(
                            topic = %t.name,
                            partition = p,
                            segments = o.segments_cleaned,
                            segments_deleted = o.segments_deleted,
                            superseded = o.superseded_records,
                            tombstones = o.tombstones_removed,
                            aborted = o.aborted_records_removed,
                            keyless = o.keyless_records_removed,
                            markers = o.markers_removed,
                            bytes_before = o.bytes_before,
                            bytes_after = o.bytes_after,
                            "log cleaner compacted a partition"
                        );
                        let m = &self.metrics;
                        m.add(
                            "log_cleaner_segments_cleaned_total",
                            o.segments_cleaned as u64,
                        );
                        m.add("log_cleaner_superseded_records_total", o.superseded_records);
                        m.add("log_cleaner_tombstones_removed_total", o.tombstones_removed);
                        m.add(
                            "log_cleaner_aborted_records_removed_total",
                            o.aborted_records_removed,
                        );
                        m.add(
                            "log_cleaner_keyless_records_removed_total",
                            o.keyless_records_removed,
                        );
                        m.add("log_cleaner_markers_removed_total", o.markers_removed);
                        m.add(
                            "log_cleaner_bytes_reclaimed_total",
                            o.bytes_before.saturating_sub(o.bytes_after),
                        );
                        add_outcome(&mut total, &o);
                    }
                    Ok(_) => {}
                    Err(e) => {
                        self.metrics.add("log_cleaner_errors_total", 1);
                        tracing::error!(topic = %t.name, partition = p, error = %e, "log cleaning failed")
                    }
                }
            }
        }
        total
    }

    fn persist_or_log(&self) {
        if let Err(e) = self.persist_metadata() {
            tracing::error!(error = %e, "persisting cluster metadata failed");
        }
    }

    /// Flushes everything durable (called at shutdown).
    pub fn flush_all(&self) {
        if let Err(e) = self.persist_metadata() {
            tracing::error!(error = %e, "persisting metadata at shutdown failed");
        }
        for ((id, p), log) in self.all_partitions() {
            if let Err(e) = log.lock().flush() {
                tracing::error!(topic_id = %id, partition = p, error = %e, "flushing a log failed");
            }
        }
    }

    /// Runs interval flushes that are due (FsyncPolicy::Interval).
    pub fn flush_due(&self, now: std::time::Instant) {
        for ((id, p), log) in self.all_partitions() {
            // The fsync runs without the log's lock: appends to the
            // partition do not wait for it.
            let due = log.lock().take_due_flush(now);
            let failed = match due {
                Ok(None) => continue,
                Ok(Some(flush)) => match flush.run() {
                    Ok(()) => continue,
                    Err(e) => {
                        log.lock().due_flush_failed();
                        e.to_string()
                    }
                },
                Err(e) => e.to_string(),
            };
            tracing::error!(topic_id = %id, partition = p, error = %failed, "interval flush failed");
        }
    }
}

use super::share_service::MarkerKind;

impl MarkerSink for BrokerCore {
    fn write_share_marker(
        &self,
        group_id: &str,
        topic_id: uuid::Uuid,
        partition: i32,
        m: &MarkerRequest,
    ) -> MarkerAck {
        if sharestream_common::failpoints::hit("txn.share_marker") {
            return MarkerAck::Retry;
        }
        match self.shares.apply_marker(
            group_id,
            topic_id,
            partition,
            m.producer_id,
            m.producer_epoch,
            if m.commit {
                MarkerKind::Commit
            } else if m.imposed {
                MarkerKind::ImposedAbort
            } else {
                MarkerKind::Abort
            },
            self.now_ms(),
        ) {
            Ok(_) => MarkerAck::Written,
            Err(e) => {
                tracing::warn!(group_id, %topic_id, partition, error = %e, "applying a share marker failed; will retry");
                MarkerAck::Retry
            }
        }
    }

    fn write_log_marker(&self, topic: &str, partition: i32, m: &MarkerRequest) -> MarkerAck {
        match self.append_txn_marker(topic, partition, m) {
            Ok(()) => MarkerAck::Written,
            // Gone, or a newer producer epoch or coordinator epoch already
            // owns the partition: this marker can never apply (Kafka stops
            // sending it too). Anything else (storage) is retried.
            Err(
                sharestream_protocol::ErrorCode::UNKNOWN_TOPIC_OR_PARTITION
                | sharestream_protocol::ErrorCode::INVALID_PRODUCER_EPOCH
                | sharestream_protocol::ErrorCode::TRANSACTION_COORDINATOR_FENCED,
            ) => MarkerAck::PartitionGone,
            Err(_) => MarkerAck::Retry,
        }
    }
}

impl BrokerCore {
    /// Writes a transaction marker as the partition's leader does on
    /// WriteTxnMarkers: a control batch in the log, or for
    /// `__consumer_offsets` the settling of the producer's staged offsets.
    /// The error is Kafka's code for that partition.
    pub(crate) fn append_txn_marker(
        &self,
        topic: &str,
        partition: i32,
        m: &MarkerRequest,
    ) -> Result<(), sharestream_protocol::ErrorCode> {
        use sharestream_protocol::ErrorCode;
        if topic == super::txn::CONSUMER_OFFSETS_TOPIC {
            // Offsets staged by TxnOffsetCommit live in the group coordinator.
            let bumps_epoch = m.transaction_version == super::txn::TransactionVersion::V2;
            return self.consumer_groups.complete_txn(
                m.producer_id,
                m.producer_epoch,
                m.commit,
                bumps_epoch,
            );
        }
        let Some(meta) = self.topics.read().get(topic).cloned() else {
            return Err(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION);
        };
        let Some(log) = self.partition(meta.id, partition) else {
            return Err(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION);
        };
        let now = self.now_ms();
        let mut bytes = control_batch(
            m.commit,
            m.producer_id,
            m.producer_epoch,
            m.coordinator_epoch,
            now,
        );
        let view = match RecordBatchView::split_from(&mut bytes) {
            Ok(Some(v)) => v,
            other => {
                tracing::error!(?other, "built an unreadable marker batch");
                return Err(ErrorCode::UNKNOWN_SERVER_ERROR);
            }
        };
        let opts = AppendOptions {
            now_ms: now,
            log_append_time: meta.log_append_time(),
            leader_epoch: 0,
        };
        let tv = m.transaction_version.feature_level() as i16;
        let res = log.lock().append_marker(&view, opts, tv);
        match res {
            Ok(_) => {
                self.notify_appended();
                Ok(())
            }
            Err(e) => {
                tracing::warn!(topic, partition, error = %e, "writing a transaction marker failed");
                Err(e.error_code())
            }
        }
    }
}

fn add_outcome(total: &mut CleanOutcome, o: &CleanOutcome) {
    total.segments_cleaned += o.segments_cleaned;
    total.segments_deleted += o.segments_deleted;
    total.superseded_records += o.superseded_records;
    total.tombstones_removed += o.tombstones_removed;
    total.aborted_records_removed += o.aborted_records_removed;
    total.keyless_records_removed += o.keyless_records_removed;
    total.markers_removed += o.markers_removed;
    total.bytes_before += o.bytes_before;
    total.bytes_after += o.bytes_after;
}
