//! Exactly-once plumbing: accumulation of share acknowledgements and their
//! staging in the producer's transaction (KIP-1289).
//!
//! - [`acknowledgements`]: the `(offset, type)` accumulator per share
//!   partition and its packing into minimal `AcknowledgementBatch` ranges.
//! - [`metadata`]: [`ShareGroupMetadata`], the member identity a transaction
//!   stages acknowledgements under.
//!
//! - [`share_acknowledgements`]: [`ShareAcknowledgements`], what the
//!   share consumer hands to the producer's transaction (the KIP author's
//!   branch API).
//!
//! - [`ledger`]: the intent ledger's records and index (exactly-once
//!   without KIP-1289, docs/EXACTLY-ONCE.md).

pub mod acknowledgements;
pub mod ledger;
pub mod metadata;
pub mod share_acknowledgements;

pub use acknowledgements::{
    AcknowledgeType, AcknowledgementBatch, Acknowledgements, PartitionAcknowledgements,
    TopicIdPartition,
};
pub use metadata::ShareGroupMetadata;
pub use share_acknowledgements::ShareAcknowledgements;
