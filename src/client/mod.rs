//! Kafka clients: connections, metadata, producer, share consumer, admin.
//!
//! Built so far:
//!
//! - [`connection`]: [`Connection`], one pipelined connection to one broker,
//!   multiplexed by correlation id, with request timeouts, cancellation
//!   safety, poisoning on lost framing, and ApiVersions negotiation.
//! - [`broker_connection`]: [`BrokerConnection`], a lazily opened connection
//!   to one broker, replaced when poisoned, reconnects spaced by backoff;
//!   [`BrokerPool`] keeps one per broker node id.
//! - [`backoff`]: exponential backoff with jitter (reconnect and retry).
//! - [`config`]: [`ConnectionConfig`], and [`ClientConfig`]: settings under
//!   Kafka's names (`bootstrap.servers`, `linger.ms`, `transactional.id`,
//!   ...) validated from properties, with typed views and builders
//!   ([`ProducerConfig`]).
//! - [`error`]: [`ClientError`], the one retriable-or-not decision and the
//!   one stale-metadata decision.
//! - [`metadata`]: [`Metadata`], the cluster cache (brokers, topic ids,
//!   leaders, coordinators), refreshed on stale-metadata errors.
//! - [`producer`]: [`Producer`]: batching, murmur2 partitioner,
//!   compression, acks, idempotence, transactions v2 and KIP-1289's
//!   `send_share_acknowledgements_to_transaction`.
//! - [`admin`]: [`AdminClient`]: topics, cluster, group configs, features.
//! - [`share_consumer`]: [`ShareConsumer`], the share group consumer (KIP-932)
//!   with the transaction hooks of KIP-1289; its lookups go through its own
//!   bootstrap lookup or, with [`ShareConsumer::with_metadata`], the shared
//!   [`Metadata`] cache.
//!
//! End to end against the embedded broker (`tests/suite/client_kip1289.rs`): the
//! KIP-1289 loop (poll, produce, `acknowledge_in_transaction`,
//! `send_share_acknowledgements_to_transaction`, commit) is atomic; abort,
//! fencing, a stale member epoch and `share.version < 3` behave as the KIP
//! says.
//!
//! - [`security`]: `security.protocol`, TLS through rustls and SASL
//!   (PLAIN, SCRAM-SHA-256/512, KIP-368 re-authentication), applied by
//!   [`Connection::connect_tcp`] for every client.

pub mod admin;
pub mod backoff;
pub mod broker_connection;
pub mod config;
pub mod connection;
pub mod error;
pub mod metadata;
pub mod producer;
pub mod security;
pub mod share_consumer;

#[cfg(test)]
pub(crate) mod test_peer;

pub use admin::AdminClient;
pub use backoff::{Backoff, BackoffConfig, ReconnectSchedule};
pub use broker_connection::{
    BrokerConnection, BrokerPool, ConnectFuture, Connector, ConnectorFactory,
};
pub use config::{Acks, ClientConfig, ConfigError, ConnectionConfig, ProducerConfig};
pub use connection::Connection;
pub use error::ClientError;
pub use metadata::{Cluster, Metadata};
pub use producer::{Producer, ProducerError, ProducerRecord, RecordMetadata};
pub use share_consumer::{ShareConsumer, ShareConsumerConfig};
