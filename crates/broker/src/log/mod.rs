//! Storage: per-partition logs, producer state and small durable state.
//!
//! # Partition logs
//!
//! A [`PartitionLog`] is a directory of segments named by base offset
//! (`00000000000000000000.log` + `.index`), plus producer-state snapshots
//! (`<offset>.snapshot`). Batches are stored exactly as produced, with the
//! base offset and partition leader epoch patched in the header (neither is
//! covered by the CRC) and, for LogAppendTime topics, the max timestamp set
//! and the CRC recomputed. Records are never decoded; the only record ever
//! read is the single control record of a transaction marker.
//!
//! The log rolls to a new segment when the active one would exceed
//! [`LogConfig::segment_bytes`]. Each segment has a sparse index (an entry
//! every [`LogConfig::index_interval_bytes`]) whose entries also carry the
//! running max timestamp, so the same index serves offset and timestamp
//! lookups (see `segment.rs`).
//!
//! Reads return whole batches starting with the one that contains the fetch
//! offset, at least one whole batch even when it exceeds `max_bytes`, and
//! can be bounded by an upper offset (LSO or high watermark).
//!
//! # Durability and recovery
//!
//! [`FsyncPolicy`] decides when appended data is fsynced: after every append
//! (the default, so an acknowledged write survives a machine crash), on
//! [`PartitionLog::flush_if_due`] calls driven by the broker's timer (whose
//! fsync can run without the log's lock, [`PartitionLog::take_due_flush`]), or
//! never (the OS decides; a process crash loses nothing, a machine crash
//! may). Rolled segments are always flushed, and a producer snapshot is
//! written at the roll. Under an fsync per batch the roll flushes the old
//! segment before it goes on; otherwise a thread of its own does, and the
//! recovery point ([`RECOVERY_POINT_FILE`]) names the first segment not
//! known durable until it is done, so the append that rolls does not wait
//! for a segment's dirty pages. [`PartitionLog::close`] flushes, snapshots
//! the producer state at the log end and leaves a clean-shutdown marker.
//!
//! Opening after an unclean shutdown verifies the active segment, and
//! every segment from the recovery point on, batch by
//! batch (framing, magic, CRC-32C, increasing offsets), cuts the log at the
//! first bad batch (a torn write or corruption) and rebuilds its index. Any
//! segment whose index is missing or inconsistent is verified the same way;
//! if a segment before the active one has to be cut, the segments after it
//! are deleted so offsets stay contiguous. Then the producer state is
//! loaded from the newest snapshot at or below the recovered log end and
//! the batches after it are replayed from their headers, so every batch
//! still in the log is known to de-duplication: a retried batch is never
//! appended twice, and the LSO and aborted-transaction index come back as
//! they were.
//!
//! # Log start offset, DeleteRecords and retention
//!
//! The log start offset is the first offset a reader may see. DeleteRecords
//! ([`PartitionLog::delete_records_before`]) raises it to any offset up to
//! the high watermark, even inside a batch, and writes it to
//! `log-start-offset` (atomic replace) before answering; segments wholly
//! below it are deleted. Fetch below it is OFFSET_OUT_OF_RANGE, ListOffsets
//! EARLIEST returns it, timestamp lookups skip records below it.
//! [`PartitionLog::enforce_retention`] applies `retention.ms` and
//! `retention.bytes` to closed segments (the broker's timer calls it);
//! the active segment is never deleted by retention.
//!
//! The log also rolls when the active segment's first append is
//! `segment.ms` old (checked at the next append).
//!
//! # Compaction
//!
//! [`PartitionLog::clean`] compacts the closed segments of a
//! `cleanup.policy=compact` topic as Kafka's log cleaner does: the latest
//! record of each key stays at its offset, tombstones and transaction
//! markers go after `delete.retention.ms`, aborted transactions' records
//! go, nothing at or beyond the last stable offset or the active segment
//! is touched; cleaned segments are swapped in crash-safely. See
//! [`cleaner`].
//!
//! Not implemented: producer-id expiry.
//!
//! # Producer state
//!
//! [`ProducerStateManager`] holds per-producer epochs, the last five batches
//! for de-duplication, open transactions (the LSO) and aborted transactions
//! (for read_committed Fetch); see [`producer_state`].
//!
//! # Small durable state
//!
//! [`StateLog`] (CRC-framed append-only records with atomic rewrite) and
//! [`write_atomic`] serve topic metadata, the transaction coordinator and
//! share-partition state; see [`state_log`].
//!
//! All I/O is blocking `std::fs` with explicit positions and no internal
//! threads: the broker calls in from `spawn_blocking` or a dedicated task.

pub mod cleaner;
pub mod control;
mod partition;
pub mod producer_state;
mod segment;
pub mod state_log;
mod store;

#[cfg(test)]
mod cleaner_tests;
#[cfg(test)]
mod tests;

use std::io;
use std::time::Duration;

pub use cleaner::{CleanOutcome, CleanerConfig};
pub use control::{ControlType, EndTxnMarker, parse_end_txn_marker};
pub use partition::{
    AppendInfo, AppendOptions, CLEAN_SHUTDOWN_FILE, CLEANER_CHECKPOINT_FILE, DueFlush,
    LOG_START_OFFSET_FILE, PartitionLog, RECOVERY_POINT_FILE, RecoveryReport, RetentionOutcome,
    TimestampOffset,
};
pub use producer_state::{
    AbortedTxn, BatchMetadata, CompletedTxn, ProducerEntry, ProducerStateError,
    ProducerStateManager,
};
pub use state_log::{StateLog, StateLogRecovery, write_atomic};

use sharestream_protocol::ErrorCode;

/// Kafka's INVALID_RECORD (87), not yet named in [`ErrorCode`].
const INVALID_RECORD: ErrorCode = ErrorCode(87);

/// When appended data is fsynced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FsyncPolicy {
    /// After every append, before it is acknowledged.
    #[default]
    EveryBatch,
    /// When [`PartitionLog::flush_if_due`] finds the interval elapsed.
    Interval(Duration),
    /// Only on [`PartitionLog::flush`], roll and close.
    Never,
}

/// Per-partition log settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogConfig {
    /// Roll to a new segment when the active one would grow past this
    /// (`segment.bytes`; at most `i32::MAX`, as positions are 32-bit).
    pub segment_bytes: u64,
    /// Bytes between sparse index entries (`index.interval.bytes`).
    pub index_interval_bytes: u64,
    /// When to fsync.
    pub fsync: FsyncPolicy,
    /// Largest batch accepted (`max.message.bytes`).
    pub max_message_bytes: usize,
    /// Roll the active segment this long after its first append
    /// (`segment.ms`, for compacted topics at most
    /// `max.compaction.lag.ms`); None = size only.
    pub segment_ms: Option<i64>,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            segment_bytes: 1 << 30,
            index_interval_bytes: 4096,
            fsync: FsyncPolicy::EveryBatch,
            max_message_bytes: 1_048_588,
            segment_ms: None,
        }
    }
}

impl LogConfig {
    /// The config with `segment_bytes` clamped to what 32-bit positions can
    /// address.
    pub fn normalized(mut self) -> Self {
        self.segment_bytes = self.segment_bytes.clamp(1, i32::MAX as u64);
        self.index_interval_bytes = self.index_interval_bytes.max(1);
        self
    }
}

/// A log operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LogError {
    /// The file system failed; the partition should be taken offline.
    #[error("storage I/O error while {context}: {source}")]
    Io {
        /// What the log was doing.
        context: &'static str,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// A fetch or lookup offset outside `[log start, log end]`.
    #[error("offset {offset} is outside [{log_start_offset}, {log_end_offset}]")]
    OffsetOutOfRange {
        /// The offset asked for.
        offset: i64,
        /// Log start offset.
        log_start_offset: i64,
        /// Log end offset.
        log_end_offset: i64,
    },
    /// A batch above `max.message.bytes`.
    #[error("batch of {size} bytes exceeds max.message.bytes {max}")]
    MessageTooLarge {
        /// Batch size.
        size: usize,
        /// The limit.
        max: usize,
    },
    /// A batch the log refuses (control batch from a client, bad marker).
    #[error("invalid record: {0}")]
    InvalidRecord(String),
    /// Idempotence or transaction checks failed.
    #[error(transparent)]
    Producer(#[from] ProducerStateError),
}

impl LogError {
    /// The Kafka error code to answer with.
    pub fn error_code(&self) -> ErrorCode {
        match self {
            LogError::Io { .. } => ErrorCode::KAFKA_STORAGE_ERROR,
            LogError::OffsetOutOfRange { .. } => ErrorCode::OFFSET_OUT_OF_RANGE,
            LogError::MessageTooLarge { .. } => ErrorCode::MESSAGE_TOO_LARGE,
            LogError::InvalidRecord(_) => INVALID_RECORD,
            LogError::Producer(e) => e.error_code(),
        }
    }
}
