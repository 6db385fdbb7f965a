//! The broker's shared state: configuration, topics, finalized features,
//! metrics, and the durable cluster metadata file.

use std::net::SocketAddr;
use std::path::PathBuf;

use parking_lot::RwLock;
use serde::{Deserialize, Serialize};
use tokio::sync::Semaphore;

use super::config::{BrokerConfig, StorageMode};
use super::metrics::BrokerMetrics;
use super::topics::{TopicError, TopicMeta, TopicRegistry};
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
}

/// The broker's shared state.
pub struct BrokerCore {
    config: BrokerConfig,
    advertised_host: String,
    advertised_port: u16,
    topics: RwLock<TopicRegistry>,
    features: RwLock<Features>,
    metrics: BrokerMetrics,
    request_bytes: Semaphore,
}

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
        Ok(Self {
            config,
            advertised_host,
            advertised_port,
            topics: RwLock::new(meta.topics),
            features: RwLock::new(features),
            metrics: BrokerMetrics::default(),
            request_bytes,
        })
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
        }
        self.persist_metadata()
    }

    /// Metrics.
    pub fn metrics(&self) -> &BrokerMetrics {
        &self.metrics
    }

    /// The pool of request bytes shared by all connections.
    pub fn request_bytes(&self) -> &Semaphore {
        &self.request_bytes
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
        };
        let bytes = serde_json::to_vec_pretty(&meta)
            .map_err(|e| std::io::Error::other(format!("serializing metadata: {e}")))?;
        write_atomic(&dir.join("metadata.json"), &bytes)
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
        self.persist_or_log();
        Ok(meta)
    }

    /// Deletes a topic and persists the registry.
    pub fn delete_topic(&self, name: &str) -> Option<TopicMeta> {
        let meta = self.topics.write().delete(name)?;
        self.persist_or_log();
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
            reg.add_partitions(name, count)?;
        }
        self.persist_or_log();
        Ok(())
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
    }
}

/// Replaces `path` with `bytes` atomically and durably.
pub fn write_atomic(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let tmp = path.with_extension("tmp");
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)?;
    if let Some(Ok(d)) = path.parent().map(std::fs::File::open) {
        let _ = d.sync_all();
    }
    Ok(())
}
