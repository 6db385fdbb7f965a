//! Kafka clients: connections, metadata, producer, share consumer, admin.
//!
//! Built so far: the connection layer.
//!
//! - [`connection`]: [`Connection`], one pipelined connection to one broker,
//!   multiplexed by correlation id, with request timeouts, cancellation
//!   safety, poisoning on lost framing, and ApiVersions negotiation.
//! - [`broker_connection`]: [`BrokerConnection`], a lazily opened connection
//!   to one broker, replaced when poisoned, reconnects spaced by backoff;
//!   [`BrokerPool`] keeps one per broker node id.
//! - [`backoff`]: exponential backoff with jitter (reconnect and retry).
//! - [`config`]: [`ConnectionConfig`] (`client.id`, `request.timeout.ms`, ...).
//! - [`error`]: [`ClientError`] and the one retriable-or-not decision.
//! - [`share_consumer`]: [`ShareConsumer`], the share group consumer (KIP-932)
//!   with the transaction hooks of KIP-1289.
//!
//! Not built yet: metadata cache, producer, share consumer, admin client;
//! no TLS or SASL.

pub mod backoff;
pub mod broker_connection;
pub mod config;
pub mod connection;
pub mod error;
pub mod share_consumer;

#[cfg(test)]
pub(crate) mod test_peer;

pub use backoff::{Backoff, BackoffConfig, ReconnectSchedule};
pub use broker_connection::{
    BrokerConnection, BrokerPool, ConnectFuture, Connector, ConnectorFactory,
};
pub use config::ConnectionConfig;
pub use connection::Connection;
pub use error::ClientError;
pub use share_consumer::{ShareConsumer, ShareConsumerConfig};
