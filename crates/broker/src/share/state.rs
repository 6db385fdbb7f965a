//! The persisted form of a share partition (the share-group state).
//!
//! Upstream Kafka persists only AVAILABLE, ACKNOWLEDGED and ARCHIVED. We also
//! persist ACQUIRED (restored as AVAILABLE, since the locks died with the
//! broker) and, beyond the KIP, TX_PENDING with the producer id, producer
//! epoch, staged acknowledge type and staging member (D9), so that a restart
//! or a leader change loses no staged acknowledgement.
//!
//! The state is a list of runs, so its size is proportional to the number of
//! distinct runs of state, like the share partition's memory. Encoded with
//! MessagePack (`rmp-serde`).

use serde::{Deserialize, Serialize};

use super::types::{DeadLetterCause, StateError, TxnAckType};

/// Persisted state of one share partition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SharePartitionState {
    /// Incremented each time the partition is restored (leader change,
    /// restart), as Kafka's state epoch.
    pub state_epoch: i32,
    /// The share-partition start offset (SPSO).
    pub start_offset: i64,
    /// The end of the in-flight window: next offset not yet acquired.
    pub end_offset: i64,
    /// Runs covering `start_offset..end_offset` in order, without holes.
    pub runs: Vec<PersistedRun>,
}

/// A run of offsets with one persisted state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PersistedRun {
    /// First offset, inclusive.
    pub first_offset: i64,
    /// Last offset, inclusive.
    pub last_offset: i64,
    /// Delivery count of every record of the run.
    pub delivery_count: u16,
    /// State of every record of the run.
    pub state: PersistedRecordState,
}

/// A persisted record state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum PersistedRecordState {
    /// AVAILABLE.
    Available,
    /// ACQUIRED when persisted; AVAILABLE (or ARCHIVED at the delivery
    /// limit) once restored.
    Acquired,
    /// ACKNOWLEDGED.
    Acknowledged,
    /// ARCHIVED.
    Archived,
    /// TX_PENDING (D9).
    TxPending {
        /// Member that staged the acknowledgement.
        member_id: String,
        /// Producer id of the staging transaction.
        producer_id: i64,
        /// Producer epoch of the staging request.
        producer_epoch: i16,
        /// The staged acknowledge type.
        ack: TxnAckType,
    },
    // Last, so that states written before it decode unchanged.
    /// ARCHIVING (KIP-1191): the dead-letter record may not be written yet;
    /// restored as ARCHIVING and handed to the dead-letter writer again.
    Archiving {
        /// Why (the `__dlq.errors.message` header).
        cause: DeadLetterCause,
    },
}

impl SharePartitionState {
    /// Encodes the state (MessagePack).
    pub fn to_bytes(&self) -> Result<Vec<u8>, StateError> {
        rmp_serde::to_vec_named(self).map_err(|e| StateError::Encode(e.to_string()))
    }

    /// Decodes a state written by [`to_bytes`](Self::to_bytes).
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, StateError> {
        rmp_serde::from_slice(bytes).map_err(|e| StateError::Decode(e.to_string()))
    }

    /// Checks that the runs cover `start_offset..end_offset` in order
    /// without holes or overlaps.
    pub fn validate(&self) -> Result<(), StateError> {
        if self.start_offset < 0 || self.end_offset < self.start_offset {
            return Err(StateError::Invalid(format!(
                "start offset {} and end offset {}",
                self.start_offset, self.end_offset
            )));
        }
        let mut next = self.start_offset;
        for run in &self.runs {
            if run.first_offset != next || run.last_offset < run.first_offset {
                return Err(StateError::Invalid(format!(
                    "run {}..={} where offset {next} was expected",
                    run.first_offset, run.last_offset
                )));
            }
            next = run.last_offset + 1;
        }
        if next != self.end_offset {
            return Err(StateError::Invalid(format!(
                "runs end at {next}, the window at {}",
                self.end_offset
            )));
        }
        Ok(())
    }
}
