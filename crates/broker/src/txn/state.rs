//! Transaction states, participants, per-`transactional.id` metadata and the
//! records the coordinator persists.
//!
//! The metadata mirrors what Kafka keeps in `__transaction_state`: one full
//! snapshot per `transactional.id` is written on every durable transition,
//! so recovery keeps the last snapshot of each id. Producer ids are handed
//! out from blocks whose end is persisted before the first id of the block
//! is used, so an id is never handed out twice, even across crashes.

use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use uuid::Uuid;

/// "No producer id" as carried on the wire (`-1`).
pub const NO_PRODUCER_ID: i64 = -1;
/// "No producer epoch" as carried on the wire (`-1`).
pub const NO_PRODUCER_EPOCH: i16 = -1;

/// `true` when no further epoch may be handed to a producer: epochs
/// `i16::MAX - 1` and above are exhausted (`i16::MAX` is reserved so that the
/// coordinator can always write a fencing or final marker above the
/// producer's epoch).
pub fn is_epoch_exhausted(epoch: i16) -> bool {
    epoch >= i16::MAX - 1
}

/// Transaction protocol version a transaction runs with (KIP-890).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TransactionVersion {
    /// Classic protocol: explicit AddPartitionsToTxn, no epoch bump at EndTxn.
    V1,
    /// KIP-890 part 2: implicit registration by Produce v12+, epoch bumped by
    /// every EndTxn v5+, markers written with the bumped epoch.
    V2,
}

impl TransactionVersion {
    /// The feature level carried by WriteTxnMarkers v2 (`1` or `2`).
    pub fn feature_level(self) -> i8 {
        match self {
            TransactionVersion::V1 => 1,
            TransactionVersion::V2 => 2,
        }
    }

    /// Whether EndTxn bumps the producer epoch.
    pub fn bumps_epoch(self) -> bool {
        self == TransactionVersion::V2
    }
}

/// Transaction state of one `transactional.id`, with Kafka's names.
///
/// `Dead` (expiry of idle transactional ids) is not modelled: the embedded
/// broker never expires a transactional id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TxnState {
    /// A producer id/epoch is assigned; no transaction is open.
    Empty,
    /// A transaction is open; participants are being registered.
    Ongoing,
    /// The commit is decided and durable; markers are being written.
    PrepareCommit,
    /// The abort is decided and durable; markers are being written.
    PrepareAbort,
    /// Every participant acknowledged the commit marker.
    CompleteCommit,
    /// Every participant acknowledged the abort marker.
    CompleteAbort,
    /// InitProducerId found an ongoing transaction: its epoch is bumped and
    /// it is about to be aborted. Never persisted (it leads straight to
    /// `PrepareAbort`), as in Kafka.
    PrepareEpochFence,
}

impl TxnState {
    /// Kafka's display name (as in DescribeTransactions).
    pub fn name(self) -> &'static str {
        match self {
            TxnState::Empty => "Empty",
            TxnState::Ongoing => "Ongoing",
            TxnState::PrepareCommit => "PrepareCommit",
            TxnState::PrepareAbort => "PrepareAbort",
            TxnState::CompleteCommit => "CompleteCommit",
            TxnState::CompleteAbort => "CompleteAbort",
            TxnState::PrepareEpochFence => "PrepareEpochFence",
        }
    }

    /// The states from which this state may be entered.
    pub fn valid_previous_states(self) -> &'static [TxnState] {
        use TxnState::*;
        match self {
            Empty => &[Empty, CompleteCommit, CompleteAbort],
            Ongoing => &[Ongoing, Empty, CompleteCommit, CompleteAbort],
            PrepareCommit => &[Ongoing],
            // TV2 may abort with no partition registered (from Empty or a
            // completed transaction).
            PrepareAbort => &[
                Ongoing,
                PrepareEpochFence,
                Empty,
                CompleteCommit,
                CompleteAbort,
            ],
            CompleteCommit => &[PrepareCommit],
            CompleteAbort => &[PrepareAbort],
            PrepareEpochFence => &[Ongoing],
        }
    }

    /// Whether `self -> next` is an allowed transition.
    pub fn can_transition_to(self, next: TxnState) -> bool {
        next.valid_previous_states().contains(&self)
    }

    /// `PrepareCommit` or `PrepareAbort`: markers outstanding.
    pub fn is_prepare(self) -> bool {
        matches!(self, TxnState::PrepareCommit | TxnState::PrepareAbort)
    }

    /// `CompleteCommit` or `CompleteAbort`.
    pub fn is_complete(self) -> bool {
        matches!(self, TxnState::CompleteCommit | TxnState::CompleteAbort)
    }
}

/// One partition registered in a transaction: it receives the marker.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Participant {
    /// A partition log: the marker is a control batch appended to it
    /// (it closes the producer's open transaction, moves the LSO and, for an
    /// abort, enters the aborted-transaction index).
    Log(String, i32),
    /// A share partition with acknowledgements staged by TxnShareAcknowledge
    /// (docs/DESIGN.md D3): the marker goes to the current leader of
    /// `topic`/`partition`, which applies it to the share partition of
    /// `group_id` and appends nothing to the log.
    Share {
        /// Share group id.
        group_id: String,
        /// Topic id of the source topic.
        topic_id: Uuid,
        /// Topic name of the source topic.
        topic: String,
        /// Partition index.
        partition: i32,
    },
}

impl Participant {
    /// A log participant.
    pub fn log(topic: impl Into<String>, partition: i32) -> Self {
        Participant::Log(topic.into(), partition)
    }

    /// `true` for a share participant.
    pub fn is_share(&self) -> bool {
        matches!(self, Participant::Share { .. })
    }

    /// Topic name and partition the marker is routed to.
    pub fn topic_partition(&self) -> (&str, i32) {
        match self {
            Participant::Log(t, p) => (t, *p),
            Participant::Share {
                topic, partition, ..
            } => (topic, *partition),
        }
    }
}

/// The last finished transaction of a transactional id, kept to answer
/// [`transaction_outcome`](super::TransactionCoordinator::transaction_outcome)
/// after the state moved on (D9).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompletedTxn {
    /// Producer id the markers were written with.
    pub producer_id: i64,
    /// Epoch the markers were written with.
    pub marker_epoch: i16,
    /// Commit (`true`) or abort.
    pub committed: bool,
}

/// Everything the coordinator knows about one `transactional.id`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TransactionMetadata {
    /// The transactional id.
    pub transactional_id: String,
    /// Current producer id.
    pub producer_id: i64,
    /// Producer id before the last transition (differs from `producer_id`
    /// only right after a rotation; used to accept TV2 retries).
    pub prev_producer_id: i64,
    /// TV2: producer id that replaces `producer_id` when the transaction in
    /// `Prepare*` completes (epoch overflow); `-1` otherwise.
    pub next_producer_id: i64,
    /// Current producer epoch (`-1` before the first InitProducerId).
    pub producer_epoch: i16,
    /// Previous epoch, to answer retried InitProducerId / EndTxn (KIP-360,
    /// KIP-890); `-1` after a fence.
    pub last_producer_epoch: i16,
    /// `transaction.timeout.ms` of the producer.
    pub txn_timeout_ms: i32,
    /// Current state.
    pub state: TxnState,
    /// Participants of the current transaction (log and share).
    pub participants: BTreeSet<Participant>,
    /// When the current transaction started (first registration), `-1` if none.
    pub txn_start_ms: i64,
    /// Last update.
    pub txn_last_update_ms: i64,
    /// Protocol version of the current (or last) transaction.
    pub transaction_version: TransactionVersion,
    /// Outcome of the last finished transaction.
    pub last_outcome: Option<CompletedTxn>,
}

/// A record of the coordinator's durable log. The broker appends each
/// [`TxnEffect::Persist`](super::TxnEffect::Persist) and replays them all in
/// [`recover`](super::TransactionCoordinator::recover).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TxnLogRecord {
    /// Producer ids below `block_end` may have been handed out.
    ProducerIdBlock {
        /// First id after the reserved block.
        block_end: i64,
    },
    /// The coordinator (re)started with this epoch; markers carry it.
    CoordinatorEpoch(i32),
    /// Full snapshot of one transactional id; the last one wins.
    Transaction(TransactionMetadata),
}

/// Format byte in front of every encoded record.
const RECORD_FORMAT_V1: u8 = 1;

/// A record that could not be decoded.
#[derive(Debug, thiserror::Error)]
pub enum TxnLogDecodeError {
    /// Empty input.
    #[error("empty transaction log record")]
    Empty,
    /// Unknown format byte.
    #[error("unknown transaction log record format {0}")]
    UnknownFormat(u8),
    /// Corrupt MessagePack body.
    #[error("corrupt transaction log record: {0}")]
    Corrupt(#[from] rmp_serde::decode::Error),
}

impl TxnLogRecord {
    /// Compact encoding: one format byte, then MessagePack (struct fields as
    /// arrays, uuids as 16 bytes).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![RECORD_FORMAT_V1];
        // Serialising plain data into a Vec cannot fail.
        rmp_serde::encode::write(&mut out, self).expect("encode txn log record");
        out
    }

    /// Inverse of [`encode`](Self::encode).
    pub fn decode(bytes: &[u8]) -> Result<Self, TxnLogDecodeError> {
        match bytes.split_first() {
            None => Err(TxnLogDecodeError::Empty),
            Some((&RECORD_FORMAT_V1, body)) => Ok(rmp_serde::from_slice(body)?),
            Some((&other, _)) => Err(TxnLogDecodeError::UnknownFormat(other)),
        }
    }
}
