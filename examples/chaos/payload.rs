//! The records the seeder writes and the checker reads back.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

/// First sequence number of records written inside aborted transactions:
/// they are numbered apart from the committed ones, so the checker knows
/// the expected set (0..records) without any manifest.
pub const ABORTED_SEQ_BASE: u64 = 1_000_000_000;

/// One input record's value (JSON); the copier copies it unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Payload {
    /// Unique sequence number.
    pub seq: u64,
    /// The record's key (also its Kafka key, as `k<key>`).
    pub key: u32,
    /// Written inside a transaction the seeder aborted.
    pub aborted: bool,
}

impl Payload {
    /// The Kafka key of this payload.
    pub fn kafka_key(&self) -> Bytes {
        Bytes::from(format!("k{}", self.key))
    }

    /// The JSON value.
    pub fn encode(&self) -> Bytes {
        Bytes::from(serde_json::to_vec(self).expect("payload encodes"))
    }

    /// Parses a value written by [`Payload::encode`].
    pub fn decode(value: &[u8]) -> Option<Self> {
        serde_json::from_slice(value).ok()
    }

    /// The partition of a key: keys are spread round-robin, so every
    /// record of one key is in one partition, in sequence order.
    pub fn partition_of(key: u32, partitions: i32) -> i32 {
        (key % partitions as u32) as i32
    }
}
