//! The Kafka wire protocol, free of I/O.
//!
//! - [`frame`]: 4-byte length-prefixed framing, "need more bytes" apart from
//!   "malformed", hostile prefixes refused before any allocation.
//! - [`api`]: request and response headers, the [`api::ApiRequest`] trait over
//!   every request type, and decoding by key and version for the broker.
//!   Message structs of existing APIs come from the `kafka-protocol` crate.
//! - [`txn_share_ack`]: KIP-1289's TxnShareAcknowledge (apiKey 95), our own.
//! - [`streams_group`]: KIP-1071's StreamsGroupHeartbeat (apiKey 88) and
//!   StreamsGroupDescribe (apiKey 89) v0, which kafka-protocol 0.18 lacks.
//! - [`share_v2`]: ShareFetch and ShareAcknowledge v2 (KIP-1206/1222), which
//!   kafka-protocol 0.18 lacks, as its v1 structs plus the added fields.
//! - [`api_versions_v5`]: ApiVersions v5 (KIP-1242: the cluster and node
//!   the client expects), which kafka-protocol 0.18 lacks, as its v4 struct
//!   plus the added fields.
//! - [`share`]: the share-group vocabulary (acknowledge types, acquire
//!   mode, isolation level), defined once for broker, client and eos.
//! - [`config`]: [`ConfigError`], a refused setting, for client and broker.
//! - [`versions`]: version negotiation from ApiVersions.
//! - [`error_code`]: Kafka's error codes with names and retriable flags.
//! - [`records`]: magic v2 record batches.
//! - [`wire`]: hand-written primitives (varints, compact strings, tagged fields).
//! - [`error`]: [`ProtocolError`], which always names the API and version.
#![deny(missing_docs)]

pub mod alloc;

pub mod api;
pub mod api_versions_v5;
pub mod config;
pub mod error;
pub mod error_code;
pub mod frame;
pub mod oauthbearer;
pub mod records;
pub mod sasl;
pub mod share;
pub mod share_offsets_v1;
pub mod share_v2;
pub mod streams_group;
pub mod txn_share_ack;
pub mod versions;
pub mod wire;

pub use config::ConfigError;
pub use error::ProtocolError;
pub use error_code::ErrorCode;

// The unit tests decode hostile bytes: guard them like the binaries.
#[cfg(test)]
#[global_allocator]
static GLOBAL: alloc::GuardedAlloc = alloc::GuardedAlloc::new();
