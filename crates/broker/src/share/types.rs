//! Value types of the share partition's API: configuration, record states,
//! acknowledgement batches, the caller's view of the log, results and errors.

use serde::{Deserialize, Serialize};
use thiserror::Error;

use sharestream_protocol::ErrorCode;
use sharestream_protocol::txn_share_ack::TxnShareAcknowledgementBatch;

/// The share vocabulary, defined once in the protocol crate.
pub use sharestream_protocol::share::{AcknowledgeType, AcquireMode, IsolationLevel};

/// Default acquisition lock duration (`group.share.record.lock.duration.ms`).
pub const DEFAULT_RECORD_LOCK_DURATION_MS: i64 = 30_000;
/// Default delivery count limit (`group.share.delivery.count.limit`).
pub const DEFAULT_DELIVERY_COUNT_LIMIT: u16 = 5;
/// Default cap on in-flight records per share partition
/// (`group.share.partition.max.record.locks`).
pub const DEFAULT_MAX_IN_FLIGHT_RECORDS: u32 = 2000;

/// Per-partition configuration, from the group's configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SharePartitionConfig {
    /// How long an acquisition lock lasts.
    pub record_lock_duration_ms: i64,
    /// Deliveries after which a record that would become AVAILABLE again is
    /// ARCHIVED instead.
    pub delivery_count_limit: u16,
    /// Cap on the in-flight window (end offset minus start offset): no new
    /// record is acquired at or beyond `start offset + cap`.
    pub max_in_flight_records: u32,
    /// Isolation level of the group.
    pub isolation: IsolationLevel,
    /// Whether RENEW acknowledgements are served (the group config
    /// `share.renew.acknowledge.enable`, KIP-1222/KIP-1240; Kafka's default
    /// is true). Off, a batch holding a RENEW fails its partition with
    /// INVALID_RECORD_STATE and changes nothing.
    pub renew_acknowledge_enabled: bool,
    /// Whether the group has a dead-letter queue in force (KIP-1191: the
    /// group config `errors.deadletterqueue.topic.name` is set and
    /// `share.version` is at least 2). On, a record that a REJECT or the
    /// delivery count limit would archive becomes ARCHIVING instead, and
    /// [`take_dead_letters`](super::SharePartition::take_dead_letters) hands
    /// it to the broker's dead-letter writer.
    pub dead_letter_queue: bool,
}

impl Default for SharePartitionConfig {
    fn default() -> Self {
        SharePartitionConfig {
            record_lock_duration_ms: DEFAULT_RECORD_LOCK_DURATION_MS,
            delivery_count_limit: DEFAULT_DELIVERY_COUNT_LIMIT,
            max_in_flight_records: DEFAULT_MAX_IN_FLIGHT_RECORDS,
            isolation: IsolationLevel::ReadUncommitted,
            renew_acknowledge_enabled: true,
            dead_letter_queue: false,
        }
    }
}

/// The state of a record in the in-flight window, with Kafka's ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum RecordState {
    /// May be acquired by a fetch.
    Available,
    /// Held by one member under an acquisition lock.
    Acquired,
    /// Processed; terminal.
    Acknowledged,
    /// Never delivered again; terminal.
    Archived,
    /// Acknowledgement staged in a producer's transaction (KIP-1289); the
    /// transaction's outcome decides.
    TxPending,
    /// On its way to the group's dead-letter topic (KIP-1191): never
    /// delivered again, but not terminal until the dead-letter record is
    /// written (or its write has failed for good), so the start offset
    /// waits for it.
    Archiving,
}

impl RecordState {
    /// Kafka's numeric id.
    pub fn id(self) -> i8 {
        match self {
            RecordState::Available => 0,
            RecordState::Acquired => 1,
            RecordState::Acknowledged => 2,
            RecordState::Archiving => 3,
            RecordState::Archived => 4,
            RecordState::TxPending => 5,
        }
    }

    /// Whether the record can never be delivered again.
    pub fn is_terminal(self) -> bool {
        matches!(self, RecordState::Acknowledged | RecordState::Archived)
    }
}

/// Why a record goes to the dead-letter queue (KIP-1191). The text of
/// [`message`](Self::message) is the `__dlq.errors.message` header Kafka
/// writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum DeadLetterCause {
    /// A member acknowledged the record with REJECT (directly, or in a
    /// committed transaction).
    Rejected,
    /// The record reached the delivery count limit.
    DeliveryCountExceeded,
}

impl DeadLetterCause {
    /// The `__dlq.errors.message` header's value, as Kafka 4.4 writes it.
    pub fn message(self) -> &'static str {
        match self {
            DeadLetterCause::Rejected => "Offset rejected by client.",
            DeadLetterCause::DeliveryCountExceeded => {
                "Offset delivery count exceeded the threshold."
            }
        }
    }
}

/// A run of ARCHIVING offsets handed to the dead-letter writer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeadLetterRange {
    /// First offset, inclusive.
    pub first_offset: i64,
    /// Last offset, inclusive.
    pub last_offset: i64,
    /// Delivery count of every record of the run (the
    /// `__dlq.errors.delivery.count` header).
    pub delivery_count: u16,
    /// Why they are dead letters.
    pub cause: DeadLetterCause,
}

/// The acknowledge types a transaction may stage (KIP-1289 and the KIP
/// author's branch: ACCEPT, REJECT and GAP).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TxnAckType {
    /// Commit makes the record ACKNOWLEDGED.
    Accept,
    /// Commit makes the record ARCHIVED.
    Reject,
    /// A gap (an offset acquired without data) staged in the transaction:
    /// commit makes it ARCHIVED like a REJECT, but never a dead letter
    /// (KIP-1191: there is no record to write). Last, so that states
    /// written before it decode unchanged.
    Gap,
}

/// One acknowledgement batch as carried on the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcknowledgementBatch {
    /// First offset, inclusive.
    pub first_offset: i64,
    /// Last offset, inclusive.
    pub last_offset: i64,
    /// One type for the whole range, or one per offset.
    pub acknowledge_types: Vec<i8>,
}

impl AcknowledgementBatch {
    /// A batch with one type for all of `first..=last`.
    pub fn uniform(first_offset: i64, last_offset: i64, ty: AcknowledgeType) -> Self {
        AcknowledgementBatch {
            first_offset,
            last_offset,
            acknowledge_types: vec![ty.code()],
        }
    }
}

impl From<&TxnShareAcknowledgementBatch> for AcknowledgementBatch {
    fn from(b: &TxnShareAcknowledgementBatch) -> Self {
        AcknowledgementBatch {
            first_offset: b.first_offset,
            last_offset: b.last_offset,
            acknowledge_types: b.acknowledge_types.clone(),
        }
    }
}

/// One record batch that the caller read from the log for this fetch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchedBatch {
    /// Base offset of the batch.
    pub base_offset: i64,
    /// Last offset of the batch (base offset + last offset delta).
    pub last_offset: i64,
    /// A control batch (transaction marker): never delivered as data.
    pub control: bool,
    /// Part of an aborted transaction. Only read_committed groups treat this
    /// as a gap; read_uncommitted groups deliver such records.
    pub aborted: bool,
}

impl FetchedBatch {
    /// An ordinary data batch.
    pub fn data(base_offset: i64, last_offset: i64) -> Self {
        FetchedBatch {
            base_offset,
            last_offset,
            control: false,
            aborted: false,
        }
    }
}

/// What the caller knows of the log for one acquisition.
///
/// `batches` are the batches read from [`next_fetch_offset`] onwards, in
/// offset order (the first may start before that offset). Offsets at or
/// beyond the window end that no batch covers, but that lie before a fetched
/// batch, are taken to be absent from the log (compacted or deleted): the
/// share partition archives them when it moves its end past them.
///
/// [`next_fetch_offset`]: super::SharePartition::next_fetch_offset
#[derive(Debug, Clone, Copy)]
pub struct LogView<'a> {
    /// High watermark: the bound for read_uncommitted groups.
    pub high_watermark: i64,
    /// Last stable offset: the bound for read_committed groups.
    pub last_stable_offset: i64,
    /// The fetched batches.
    pub batches: &'a [FetchedBatch],
}

/// A contiguous range of acquired offsets with one delivery count, as in
/// ShareFetch's AcquiredRecords.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AcquiredRange {
    /// First offset, inclusive.
    pub first_offset: i64,
    /// Last offset, inclusive.
    pub last_offset: i64,
    /// The delivery count including this delivery.
    pub delivery_count: u16,
}

/// An inclusive range of offsets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffsetRange {
    /// First offset, inclusive.
    pub first_offset: i64,
    /// Last offset, inclusive.
    pub last_offset: i64,
}

/// The result of an acquisition.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Acquisition {
    /// Every acquired offset, gaps included.
    pub acquired: Vec<AcquiredRange>,
    /// The acquired offsets that carry no data: control batches, and for
    /// read_committed groups batches of aborted transactions. The broker
    /// leaves those batches out of the response; the consumer sees acquired
    /// offsets without records and acknowledges them as GAP.
    pub gaps: Vec<OffsetRange>,
}

impl Acquisition {
    /// Number of acquired offsets.
    pub fn record_count(&self) -> u64 {
        self.acquired
            .iter()
            .map(|r| (r.last_offset - r.first_offset + 1) as u64)
            .sum()
    }
}

/// What a state change means for the rest of the broker.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Effects {
    /// Records became AVAILABLE, or the in-flight window made room under
    /// its cap: long-polling fetches should be woken.
    pub records_available: bool,
}

/// The result of [`tick`](super::SharePartition::tick).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TickOutcome {
    /// Records became AVAILABLE, or the in-flight window made room under
    /// its cap: wake long-polling fetches.
    pub records_available: bool,
    /// Records whose acquisition lock expired in this tick.
    pub expired_records: u64,
    /// Records whose suspended lock (TX_PENDING) passed its deadline in this
    /// tick, each counted once.
    pub txn_pending_lock_expired: u64,
    /// The next instant at which `tick` has work, if any.
    pub next_deadline_ms: Option<i64>,
}

/// The result of a transaction marker.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MarkerOutcome {
    /// Records became AVAILABLE, or the in-flight window made room under
    /// its cap: wake long-polling fetches.
    pub records_available: bool,
    /// TX_PENDING records the marker resolved (0 for a duplicate marker or a
    /// producer with nothing staged).
    pub resolved_records: u64,
}

/// The outcome of a transaction as recovered by the transaction coordinator
/// after a restart (D9).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecoveredTxn {
    /// Committed: apply the staged acknowledgements.
    Committed,
    /// Aborted: revert them.
    Aborted,
    /// Still ongoing: wait for the marker or the transaction timeout.
    Ongoing,
}

/// Gauges and counters of one share partition.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SharePartitionMetrics {
    /// Records in the in-flight window (end offset minus start offset).
    pub in_flight_records: u64,
    /// AVAILABLE records in the window.
    pub available_records: u64,
    /// ACQUIRED records.
    pub acquired_records: u64,
    /// ACKNOWLEDGED records still in the window.
    pub acknowledged_records: u64,
    /// ARCHIVED records still in the window.
    pub archived_records: u64,
    /// TxnPendingRecordsCount: records in TX_PENDING.
    pub txn_pending_records: u64,
    /// Acquisition locks that expired (records), since creation.
    pub lock_expired_total: u64,
    /// Acquisitions of records delivered before (records), since creation.
    pub redeliveries_total: u64,
    /// TxnPendingLockExpiredCount: TX_PENDING records whose lock would have
    /// expired, each counted once per staging, since creation.
    pub txn_pending_lock_expired_total: u64,
    /// Records archived because their delivery count reached
    /// `share.delivery.count.limit` (never delivered again), since creation.
    pub archived_at_limit_total: u64,
    /// ARCHIVING records (waiting for their dead-letter record).
    pub archiving_records: u64,
}

/// A refused operation; nothing was changed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum ShareError {
    /// Malformed acknowledgement batches (INVALID_REQUEST).
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// A record is not in a state that allows the operation
    /// (INVALID_RECORD_STATE).
    #[error("invalid record state: {0}")]
    InvalidRecordState(String),
    /// A staging at an epoch that a transaction marker already ended
    /// (PRODUCER_FENCED).
    #[error("producer fenced: {0}")]
    ProducerFenced(String),
}

impl ShareError {
    /// The Kafka error code for the partition's response.
    pub fn error_code(&self) -> ErrorCode {
        match self {
            ShareError::InvalidRequest(_) => ErrorCode::INVALID_REQUEST,
            ShareError::InvalidRecordState(_) => ErrorCode::INVALID_RECORD_STATE,
            ShareError::ProducerFenced(_) => ErrorCode::PRODUCER_FENCED,
        }
    }
}

/// Persisted state that cannot be read or restored.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum StateError {
    /// The bytes do not decode.
    #[error("share-partition state does not decode: {0}")]
    Decode(String),
    /// The state could not be encoded.
    #[error("share-partition state does not encode: {0}")]
    Encode(String),
    /// The state decodes but is inconsistent.
    #[error("inconsistent share-partition state: {0}")]
    Invalid(String),
}
