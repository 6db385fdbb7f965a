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
//! - [`share`]: the share partition (record states, acquisition locks,
//!   delivery counts, KIP-1289 TX_PENDING), an I/O-free state machine.
//! - [`txn`]: the transaction coordinator, an I/O-free state machine
//!   (transaction protocol v1 and v2, log and share participants).
//! - [`metrics`]: per-API request counts and latency histograms, Prometheus
//!   text.
//! - `handlers`: one handler per API.
//!
//! What is served today: ApiVersions, Metadata, CreateTopics, DeleteTopics,
//! CreatePartitions, DescribeCluster, DescribeConfigs, FindCoordinator.
//! Produce, Fetch, transactions and share groups come with the storage,
//! transaction-coordinator and share-partition layers.

pub mod config;
pub mod core;
pub mod group;
mod handlers;
pub mod log;
pub mod metrics;
pub mod server;
pub mod share;
pub mod shares;
pub mod topics;
pub mod txn;

pub use config::{BrokerConfig, FsyncPolicy, StorageMode};
pub use server::{Broker, BrokerHandle};
