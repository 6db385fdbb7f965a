#![doc = include_str!("../README.md")]
#![deny(missing_docs)]

pub mod client;
pub mod eos;
pub mod runtime;
pub mod topology;

/// The Kafka wire protocol, sans I/O (the `sharestream-protocol` crate).
pub use sharestream_protocol as protocol;

/// The guard allocator for processes that decode untrusted Kafka frames
/// (`sharestream_protocol::alloc`).
pub use sharestream_protocol::alloc;

/// The embedded Kafka-compatible broker (the `sharestream-broker` crate),
/// behind the default feature `embedded-broker`.
#[cfg(feature = "embedded-broker")]
pub use sharestream_broker as broker;

/// Fault-injection points for tests (`sharestream_common::failpoints`);
/// inert unless the `failpoints` feature is on.
pub use sharestream_common::failpoints;

/// The `/metrics` endpoint shared with the broker.
pub use sharestream_common::metrics_http;

// The unit tests decode hostile bytes too: guard them like the binary.
#[cfg(test)]
#[global_allocator]
static GLOBAL: alloc::GuardedAlloc = alloc::GuardedAlloc::new();
