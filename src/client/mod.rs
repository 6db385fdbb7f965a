//! Kafka clients: connections, metadata, producer, share consumer, admin.
//!
//! Not built yet: reserved for the client-layer issue.
