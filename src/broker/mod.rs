//! The embedded Kafka-compatible broker.
//!
//! Not built yet: this module is reserved for the broker of the "Embedded
//! broker" issues (durable partition logs, produce and fetch, transactions,
//! share groups and KIP-1289's transactional share acknowledgements).

pub mod share;
