//! The embedded Kafka-compatible broker.
//!
//! `Broker::start(config)` binds a listener and serves Kafka's protocol to
//! any client (ours, Apache Kafka's Java clients, librdkafka). One node
//! (id 0) is leader of every partition and every coordinator.
//!
//! - [`server`]: listener, connections, in-order pipelined request handling,
//!   connection and request-bytes caps, graceful shutdown.
//! - [`core`]: shared state (config, topics, finalized features, metrics)
//!   and the durable `metadata.json`.
//! - [`topics`]: the topic registry with Kafka's validation rules.
//! - [`log`]: partition logs (segments, sparse index, recovery, fsync
//!   policy), producer state (idempotence, LSO, aborted transactions) and the
//!   generic durable `StateLog`.
//! - [`group`]: the share group coordinator (membership, heartbeats,
//!   assignment, group configs), an I/O-free state machine.
//! - [`consumer_group`]: the consumer group coordinator (classic protocol,
//!   committed and transactional offsets), an I/O-free state machine;
//!   [`consumer_groups`] runs it (durable log, parked JoinGroup/SyncGroup,
//!   timer).
//! - [`share`]: the share partition (record states, acquisition locks,
//!   delivery counts, KIP-1289 TX_PENDING), an I/O-free state machine.
//! - [`txn`]: the transaction coordinator, an I/O-free state machine
//!   (transaction protocol v1 and v2, log and share participants).
//! - [`txn_service`]: runs the transaction coordinator: durable log,
//!   marker delivery to log and share participants.
//! - [`share_service`]: runs the share group coordinator and the share
//!   partitions and carries out their effects: share sessions, the durable
//!   share state (`share-state/share.log`, written by its own thread with
//!   group commit), the wake-ups of long-polling ShareFetches, metrics;
//!   driven by a 100 ms timer (session and lock expiry).
//! - [`clock`]: the broker's one clock (system, tokio's, or manual).
//! - [`metrics`]: per-API request counts and latency histograms, Prometheus
//!   text.
//! - [`metrics_http`]: `GET /metrics` in Prometheus text format
//!   (`--metrics-listen`).
//! - `handlers`: one handler per API.
//!
//! What is served: `sharestream apis` (or an ApiVersions request) lists
//! every API and version. In short: ApiVersions, Metadata, CreateTopics,
//! DeleteTopics, CreatePartitions, DescribeCluster, DescribeConfigs,
//! IncrementalAlterConfigs, FindCoordinator, Produce (idempotence;
//! transactions v1 with verification and v2 with implicit partition
//! registration), Fetch (read_committed with the LSO and aborted
//! transactions; long-poll), ListOffsets, OffsetForLeaderEpoch, InitProducerId,
//! AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, UpdateFeatures; share
//! groups with `share.version >= 1` (ShareGroupHeartbeat, ShareGroupDescribe,
//! ShareFetch and ShareAcknowledge v1-2 with share sessions, long-poll,
//! `record_limit` acquisition and renew, DescribeShareGroupOffsets); KIP-1289
//! TxnShareAcknowledge (apiKey 95) at `share.version >= 3`; the ACL APIs.
//! Listeners speak PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL.
//! Consumer groups with the classic protocol (JoinGroup, SyncGroup,
//! Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch, TxnOffsetCommit,
//! ListGroups, DescribeGroups, DeleteGroups, OffsetDelete) and with the
//! KIP-848 consumer protocol (ConsumerGroupHeartbeat, ConsumerGroupDescribe).
//! [`security`]: SASL listeners (PLAIN, SCRAM, and OAUTHBEARER with
//! unsecured tokens when asked for, [`oauthbearer`]) and the [`acl`]
//! authorizer (CreateAcls, DescribeAcls, DeleteAcls); see docs/SECURITY.md.
#![deny(missing_docs)]

pub mod acl;
pub mod client_quotas;
pub mod clock;
pub mod config;
pub mod consumer_group;
pub mod consumer_groups;
pub mod core;
pub mod dead_letter_writer;
pub mod group;
mod handlers;
pub mod log;
pub mod metrics;
pub mod metrics_http;
pub mod oauthbearer;
pub mod scram_credentials;
pub mod security;
pub mod server;
pub mod share;
pub mod share_service;
pub mod topics;
pub mod txn;
pub mod txn_service;

pub use config::{BrokerConfig, FsyncPolicy, StorageMode};
pub use server::{Broker, BrokerHandle};

// The unit tests decode hostile bytes: guard them like the binary.
#[cfg(test)]
#[global_allocator]
static GLOBAL: sharestream_protocol::alloc::GuardedAlloc =
    sharestream_protocol::alloc::GuardedAlloc::new();
