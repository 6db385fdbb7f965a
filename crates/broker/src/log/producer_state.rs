//! Per-partition producer state: idempotence, epoch fencing, open
//! transactions, the last stable offset and the aborted-transaction index.
//!
//! Pure logic, no I/O: [`ProducerStateManager::prepare_append`] checks the
//! batches of one append against the committed state and returns either a
//! staged [`ProducerUpdate`] (applied with [`ProducerStateManager::apply`]
//! once the bytes are in the log) or the metadata of the batch it
//! duplicates. Markers go through [`ProducerStateManager::prepare_marker`]
//! and [`ProducerStateManager::apply_marker`] the same way. Recovery replays
//! batch headers with [`ProducerStateManager::replay_batch`] and
//! [`ProducerStateManager::replay_marker`], which validate nothing (the log
//! is the truth).
//!
//! The rules are Kafka's:
//! - de-duplication against the last [`PRODUCER_BATCH_CACHE`] batches of a
//!   producer at the batch's epoch, by exact (first sequence, last sequence);
//!   a duplicate is answered NONE with the original offsets;
//! - an older epoch than the producer's current one is INVALID_PRODUCER_EPOCH
//!   (Kafka answers produce requests with it since 2.7; PRODUCER_FENCED is the
//!   transaction coordinator's answer, not the log's);
//! - a new (higher) epoch must start at sequence 0 unless the producer is
//!   unknown here; at the same epoch the sequence must follow the last one
//!   (wrapping from `i32::MAX` to 0), else OUT_OF_ORDER_SEQUENCE_NUMBER.
//!   Like current Kafka, DUPLICATE_SEQUENCE_NUMBER is never produced: an old
//!   sequence outside the cache is out of order;
//! - a non-transactional batch from a producer with an open transaction is
//!   INVALID_TXN_STATE;
//! - markers: the epoch may not be older than the producer's (transaction
//!   version 2: must be newer, except a retried marker at the same epoch
//!   after the transaction ended); an older coordinator epoch is
//!   TRANSACTION_COORDINATOR_FENCED. A marker changing the epoch clears the
//!   sequence cache, so the next transaction starts at sequence 0.
//!
//! The last stable offset is the first offset of the earliest open
//! transaction ([`ProducerStateManager::first_unstable_offset`]); aborted
//! transactions are kept as (producer id, first offset, marker offset).
//!
//! Producer expiry (`producer.id.expiration.ms`) is not implemented: entries
//! live as long as the partition.

use std::collections::{BTreeMap, HashMap, VecDeque};

use bytes::Bytes;

use super::control::{ControlType, EndTxnMarker};
use sharestream_protocol::ErrorCode;
use sharestream_protocol::records::RecordBatchView;
use sharestream_protocol::records::batch::{NO_PRODUCER_EPOCH, NO_SEQUENCE};
use sharestream_protocol::wire::Reader;

/// How many recent batches per producer are kept for de-duplication (the
/// Java producer's `max.in.flight.requests.per.connection` limit with
/// idempotence).
pub const PRODUCER_BATCH_CACHE: usize = 5;

/// Offsets and sequences of one appended batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchMetadata {
    /// First sequence of the batch.
    pub first_seq: i32,
    /// Last sequence of the batch.
    pub last_seq: i32,
    /// Offset assigned to the first record.
    pub first_offset: i64,
    /// Offset of the last record.
    pub last_offset: i64,
    /// The batch's max timestamp as stored.
    pub timestamp: i64,
}

/// What the partition knows about one producer id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerEntry {
    /// The producer id.
    pub producer_id: i64,
    /// Current producer epoch (-1 when unknown).
    pub epoch: i16,
    /// Coordinator epoch of the last marker (-1 when none).
    pub coordinator_epoch: i32,
    /// The most recent batches at `epoch`, oldest first.
    pub batches: VecDeque<BatchMetadata>,
    /// First offset of this producer's open transaction here, if any.
    pub current_txn_first_offset: Option<i64>,
    /// Timestamp of the last batch or marker.
    pub last_timestamp: i64,
}

impl ProducerEntry {
    fn new(producer_id: i64) -> Self {
        ProducerEntry {
            producer_id,
            epoch: NO_PRODUCER_EPOCH,
            coordinator_epoch: -1,
            batches: VecDeque::new(),
            current_txn_first_offset: None,
            last_timestamp: -1,
        }
    }

    /// The last sequence appended at the current epoch (-1 when none).
    pub fn last_seq(&self) -> i32 {
        self.batches.back().map_or(NO_SEQUENCE, |b| b.last_seq)
    }

    fn maybe_update_epoch(&mut self, epoch: i16) {
        if self.epoch != epoch {
            self.batches.clear();
            self.epoch = epoch;
        }
    }

    fn add_batch(&mut self, b: &BatchInfo) {
        self.maybe_update_epoch(b.producer_epoch);
        self.batches.push_back(BatchMetadata {
            first_seq: b.base_sequence,
            last_seq: b.last_sequence,
            first_offset: b.base_offset,
            last_offset: b.last_offset,
            timestamp: b.max_timestamp,
        });
        while self.batches.len() > PRODUCER_BATCH_CACHE {
            self.batches.pop_front();
        }
        self.last_timestamp = b.max_timestamp;
    }

    fn find_duplicate(&self, b: &BatchInfo) -> Option<BatchMetadata> {
        if self.epoch != b.producer_epoch {
            return None;
        }
        self.batches
            .iter()
            .find(|m| m.first_seq == b.base_sequence && m.last_seq == b.last_sequence)
            .copied()
    }
}

/// The producer-relevant header fields of a data batch, with the offsets
/// the log assigned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchInfo {
    /// producerId (-1: not idempotent, no checks).
    pub producer_id: i64,
    /// producerEpoch.
    pub producer_epoch: i16,
    /// baseSequence.
    pub base_sequence: i32,
    /// Last sequence of the batch.
    pub last_sequence: i32,
    /// Assigned first offset.
    pub base_offset: i64,
    /// Assigned last offset.
    pub last_offset: i64,
    /// Stored max timestamp.
    pub max_timestamp: i64,
    /// Transactional attribute.
    pub transactional: bool,
}

impl BatchInfo {
    /// From a batch view whose base offset and max timestamp are final.
    pub fn from_view(view: &RecordBatchView) -> Self {
        BatchInfo {
            producer_id: view.producer_id(),
            producer_epoch: view.producer_epoch(),
            base_sequence: view.base_sequence(),
            last_sequence: view.last_sequence(),
            base_offset: view.base_offset(),
            last_offset: view.last_offset(),
            max_timestamp: view.max_timestamp(),
            transactional: view.is_transactional(),
        }
    }
}

/// A transaction marker about to be (or being replayed as) appended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MarkerInfo {
    /// producerId of the control batch.
    pub producer_id: i64,
    /// producerEpoch of the control batch.
    pub producer_epoch: i16,
    /// Offset of the marker.
    pub offset: i64,
    /// Timestamp of the marker batch.
    pub timestamp: i64,
    /// Commit or abort, and the coordinator epoch.
    pub marker: EndTxnMarker,
}

/// One aborted transaction, as Fetch reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AbortedTxn {
    /// The producer id.
    pub producer_id: i64,
    /// First offset of the transaction in this partition.
    pub first_offset: i64,
    /// Offset of the ABORT marker.
    pub last_offset: i64,
}

/// A transaction a marker completed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompletedTxn {
    /// The producer id.
    pub producer_id: i64,
    /// First offset of the transaction.
    pub first_offset: i64,
    /// Offset of the marker.
    pub last_offset: i64,
    /// ABORT (true) or COMMIT.
    pub aborted: bool,
}

/// A validation failure; nothing of the append may be written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProducerStateError {
    /// OUT_OF_ORDER_SEQUENCE_NUMBER.
    #[error(
        "out of order sequence for producer {producer_id} epoch {epoch}: \
         got {first_seq}, last appended {last_seq}"
    )]
    OutOfOrderSequence {
        /// The producer.
        producer_id: i64,
        /// The batch's epoch.
        epoch: i16,
        /// The batch's first sequence.
        first_seq: i32,
        /// The last sequence appended (-1 when none at this epoch).
        last_seq: i32,
    },
    /// INVALID_PRODUCER_EPOCH: the batch or marker comes from an older epoch.
    #[error("producer {producer_id} epoch {epoch} is fenced by epoch {current_epoch}")]
    InvalidProducerEpoch {
        /// The producer.
        producer_id: i64,
        /// The epoch sent.
        epoch: i16,
        /// The current epoch here.
        current_epoch: i16,
    },
    /// INVALID_TXN_STATE.
    #[error("invalid transaction state for producer {producer_id}: {reason}")]
    InvalidTxnState {
        /// The producer.
        producer_id: i64,
        /// What was wrong.
        reason: &'static str,
    },
    /// TRANSACTION_COORDINATOR_FENCED: a marker from an older coordinator.
    #[error(
        "marker for producer {producer_id} from coordinator epoch {coordinator_epoch}, \
         current {current}"
    )]
    CoordinatorFenced {
        /// The producer.
        producer_id: i64,
        /// The marker's coordinator epoch.
        coordinator_epoch: i32,
        /// The last coordinator epoch seen.
        current: i32,
    },
}

impl ProducerStateError {
    /// The Kafka error code for the produce / WriteTxnMarkers response.
    pub fn error_code(&self) -> ErrorCode {
        match self {
            ProducerStateError::OutOfOrderSequence { .. } => {
                ErrorCode::OUT_OF_ORDER_SEQUENCE_NUMBER
            }
            ProducerStateError::InvalidProducerEpoch { .. } => ErrorCode::INVALID_PRODUCER_EPOCH,
            ProducerStateError::InvalidTxnState { .. } => ErrorCode::INVALID_TXN_STATE,
            ProducerStateError::CoordinatorFenced { .. } => {
                ErrorCode::TRANSACTION_COORDINATOR_FENCED
            }
        }
    }
}

/// Producer entries changed by an append, to apply once it is written.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProducerUpdate {
    entries: HashMap<i64, ProducerEntry>,
    started: Vec<(i64, i64)>,
}

/// Outcome of checking an append.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AppendCheck {
    /// Write the batches, then apply the update.
    Append(ProducerUpdate),
    /// A retry of a batch already in the log: write nothing, answer with
    /// these original offsets.
    Duplicate(BatchMetadata),
}

/// Producer entry change made by a marker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MarkerUpdate {
    entry: ProducerEntry,
    /// The transaction the marker ends (None for an empty transaction).
    pub completed: Option<CompletedTxn>,
}

fn in_sequence(last_seq: i32, next_seq: i32) -> bool {
    next_seq as i64 == last_seq as i64 + 1 || (next_seq == 0 && last_seq == i32::MAX)
}

/// Producer state of one partition. See the module docs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProducerStateManager {
    producers: HashMap<i64, ProducerEntry>,
    /// Open transactions by first offset.
    ongoing: BTreeMap<i64, i64>,
    /// Aborted transactions in marker order.
    aborted: Vec<AbortedTxn>,
}

impl ProducerStateManager {
    /// Empty state.
    pub fn new() -> Self {
        Self::default()
    }

    /// The entry of a producer, if known.
    pub fn entry(&self, producer_id: i64) -> Option<&ProducerEntry> {
        self.producers.get(&producer_id)
    }

    /// Every producer id known here, ascending (DescribeProducers).
    pub fn producer_ids(&self) -> Vec<i64> {
        let mut ids: Vec<i64> = self.producers.keys().copied().collect();
        ids.sort_unstable();
        ids
    }

    /// Number of producers known.
    pub fn producer_count(&self) -> usize {
        self.producers.len()
    }

    /// First offset of the earliest open transaction (bounds the LSO).
    pub fn first_unstable_offset(&self) -> Option<i64> {
        self.ongoing.keys().next().copied()
    }

    /// Open transactions as (first offset, producer id), oldest first.
    pub fn ongoing_transactions(&self) -> impl Iterator<Item = (i64, i64)> + '_ {
        self.ongoing.iter().map(|(o, p)| (*o, *p))
    }

    /// Aborted transactions overlapping `[fetch_offset, upper)`: marker at
    /// or after `fetch_offset` and first offset before `upper`. The answer
    /// for a read_committed Fetch whose data ends before `upper`.
    pub fn aborted_transactions(&self, fetch_offset: i64, upper: i64) -> Vec<AbortedTxn> {
        let start = self
            .aborted
            .partition_point(|a| a.last_offset < fetch_offset);
        self.aborted[start..]
            .iter()
            .filter(|a| a.first_offset < upper)
            .copied()
            .collect()
    }

    /// Checks the batches of one append (offsets already assigned) against
    /// the committed state. Nothing changes until [`Self::apply`].
    pub fn prepare_append(&self, batches: &[BatchInfo]) -> Result<AppendCheck, ProducerStateError> {
        let mut update = ProducerUpdate::default();
        for b in batches {
            if b.producer_id < 0 {
                continue;
            }
            let current = self.producers.get(&b.producer_id);
            if let Some(dup) = current.and_then(|c| c.find_duplicate(b)) {
                return Ok(AppendCheck::Duplicate(dup));
            }
            let current_epoch = current.map_or(NO_PRODUCER_EPOCH, |c| c.epoch);
            let entry = update.entries.entry(b.producer_id).or_insert_with(|| {
                current
                    .cloned()
                    .unwrap_or_else(|| ProducerEntry::new(b.producer_id))
            });
            if b.producer_epoch < entry.epoch {
                return Err(ProducerStateError::InvalidProducerEpoch {
                    producer_id: b.producer_id,
                    epoch: b.producer_epoch,
                    current_epoch: entry.epoch,
                });
            }
            let out_of_order = || ProducerStateError::OutOfOrderSequence {
                producer_id: b.producer_id,
                epoch: b.producer_epoch,
                first_seq: b.base_sequence,
                last_seq: if b.producer_epoch == entry.epoch {
                    entry.last_seq()
                } else {
                    NO_SEQUENCE
                },
            };
            if b.producer_epoch != entry.epoch {
                if b.base_sequence != 0 && entry.epoch != NO_PRODUCER_EPOCH {
                    return Err(out_of_order());
                }
            } else if !(current_epoch == NO_PRODUCER_EPOCH
                || in_sequence(entry.last_seq(), b.base_sequence))
            {
                return Err(out_of_order());
            }
            entry.add_batch(b);
            match (entry.current_txn_first_offset, b.transactional) {
                (Some(_), false) => {
                    return Err(ProducerStateError::InvalidTxnState {
                        producer_id: b.producer_id,
                        reason: "non-transactional batch while a transaction is open",
                    });
                }
                (None, true) => {
                    entry.current_txn_first_offset = Some(b.base_offset);
                    update.started.push((b.base_offset, b.producer_id));
                }
                _ => {}
            }
        }
        Ok(AppendCheck::Append(update))
    }

    /// Applies a staged update after its batches were written.
    pub fn apply(&mut self, update: ProducerUpdate) {
        self.producers.extend(update.entries);
        for (first, pid) in update.started {
            self.ongoing.insert(first, pid);
        }
    }

    /// Checks a transaction marker. `transaction_version` is the one the
    /// WriteTxnMarkers request carries (0/1 legacy, 2 with epoch bumps).
    pub fn prepare_marker(
        &self,
        m: &MarkerInfo,
        transaction_version: i16,
    ) -> Result<MarkerUpdate, ProducerStateError> {
        let entry = self
            .producers
            .get(&m.producer_id)
            .cloned()
            .unwrap_or_else(|| ProducerEntry::new(m.producer_id));
        let invalid_epoch = if transaction_version >= 2 {
            m.producer_epoch <= entry.epoch
        } else {
            m.producer_epoch < entry.epoch
        };
        let retried_v2_marker = transaction_version >= 2
            && m.producer_epoch == entry.epoch
            && entry.current_txn_first_offset.is_none();
        if invalid_epoch && !retried_v2_marker {
            return Err(ProducerStateError::InvalidProducerEpoch {
                producer_id: m.producer_id,
                epoch: m.producer_epoch,
                current_epoch: entry.epoch,
            });
        }
        if entry.coordinator_epoch > m.marker.coordinator_epoch {
            return Err(ProducerStateError::CoordinatorFenced {
                producer_id: m.producer_id,
                coordinator_epoch: m.marker.coordinator_epoch,
                current: entry.coordinator_epoch,
            });
        }
        Ok(Self::marker_update(entry, m))
    }

    fn marker_update(mut entry: ProducerEntry, m: &MarkerInfo) -> MarkerUpdate {
        let completed = entry.current_txn_first_offset.map(|first| CompletedTxn {
            producer_id: m.producer_id,
            first_offset: first,
            last_offset: m.offset,
            aborted: m.marker.control_type == ControlType::Abort,
        });
        entry.maybe_update_epoch(m.producer_epoch);
        entry.coordinator_epoch = m.marker.coordinator_epoch;
        entry.current_txn_first_offset = None;
        entry.last_timestamp = m.timestamp;
        MarkerUpdate { entry, completed }
    }

    /// Applies a marker after it was written.
    pub fn apply_marker(&mut self, update: MarkerUpdate) {
        if let Some(c) = update.completed {
            self.ongoing.remove(&c.first_offset);
            if c.aborted {
                self.aborted.push(AbortedTxn {
                    producer_id: c.producer_id,
                    first_offset: c.first_offset,
                    last_offset: c.last_offset,
                });
            }
        }
        self.producers
            .insert(update.entry.producer_id, update.entry);
    }

    /// Recovery: applies a data batch found in the log, without checks.
    pub fn replay_batch(&mut self, b: &BatchInfo) {
        if b.producer_id < 0 {
            return;
        }
        let entry = self
            .producers
            .entry(b.producer_id)
            .or_insert_with(|| ProducerEntry::new(b.producer_id));
        entry.add_batch(b);
        if b.transactional && entry.current_txn_first_offset.is_none() {
            entry.current_txn_first_offset = Some(b.base_offset);
            self.ongoing.insert(b.base_offset, b.producer_id);
        }
    }

    /// Recovery: applies a marker found in the log, without checks.
    pub fn replay_marker(&mut self, m: &MarkerInfo) {
        let entry = self
            .producers
            .get(&m.producer_id)
            .cloned()
            .unwrap_or_else(|| ProducerEntry::new(m.producer_id));
        let update = Self::marker_update(entry, m);
        self.apply_marker(update);
    }

    /// Serializes the state (as of log offset `offset`) for a snapshot file:
    /// `"SSPS" | version u16 | crc32c(body) u32 | body`.
    pub fn encode_snapshot(&self, offset: i64) -> Vec<u8> {
        let mut body = Vec::new();
        body.extend_from_slice(&offset.to_be_bytes());
        let mut pids: Vec<&i64> = self.producers.keys().collect();
        pids.sort();
        body.extend_from_slice(&(pids.len() as u32).to_be_bytes());
        for pid in pids {
            let e = &self.producers[pid];
            body.extend_from_slice(&e.producer_id.to_be_bytes());
            body.extend_from_slice(&e.epoch.to_be_bytes());
            body.extend_from_slice(&e.coordinator_epoch.to_be_bytes());
            body.extend_from_slice(&e.last_timestamp.to_be_bytes());
            body.extend_from_slice(&e.current_txn_first_offset.unwrap_or(-1).to_be_bytes());
            body.push(e.batches.len() as u8);
            for b in &e.batches {
                body.extend_from_slice(&b.first_seq.to_be_bytes());
                body.extend_from_slice(&b.last_seq.to_be_bytes());
                body.extend_from_slice(&b.first_offset.to_be_bytes());
                body.extend_from_slice(&b.last_offset.to_be_bytes());
                body.extend_from_slice(&b.timestamp.to_be_bytes());
            }
        }
        body.extend_from_slice(&(self.aborted.len() as u32).to_be_bytes());
        for a in &self.aborted {
            body.extend_from_slice(&a.producer_id.to_be_bytes());
            body.extend_from_slice(&a.first_offset.to_be_bytes());
            body.extend_from_slice(&a.last_offset.to_be_bytes());
        }
        let mut out = Vec::with_capacity(body.len() + 10);
        out.extend_from_slice(SNAPSHOT_MAGIC);
        out.extend_from_slice(&SNAPSHOT_VERSION.to_be_bytes());
        out.extend_from_slice(&crc32c::crc32c(&body).to_be_bytes());
        out.extend_from_slice(&body);
        out
    }

    /// Reads a snapshot written by [`Self::encode_snapshot`]; returns the
    /// offset it was taken at and the state.
    pub fn decode_snapshot(bytes: &[u8]) -> Result<(i64, Self), String> {
        if bytes.len() < 10 || &bytes[0..4] != SNAPSHOT_MAGIC {
            return Err("not a producer state snapshot".into());
        }
        let version = u16::from_be_bytes([bytes[4], bytes[5]]);
        if version != SNAPSHOT_VERSION {
            return Err(format!("unknown snapshot version {version}"));
        }
        let crc = u32::from_be_bytes([bytes[6], bytes[7], bytes[8], bytes[9]]);
        let body = &bytes[10..];
        if crc32c::crc32c(body) != crc {
            return Err("snapshot CRC mismatch".into());
        }
        let e = |err: sharestream_protocol::ProtocolError| err.to_string();
        let mut r = Reader::new(Bytes::copy_from_slice(body));
        let offset = r.i64("snapshot offset").map_err(e)?;
        let mut state = ProducerStateManager::new();
        let n = r.u32("producer count").map_err(e)?;
        for _ in 0..n {
            let mut entry = ProducerEntry::new(r.i64("producer id").map_err(e)?);
            entry.epoch = r.i16("epoch").map_err(e)?;
            entry.coordinator_epoch = r.i32("coordinator epoch").map_err(e)?;
            entry.last_timestamp = r.i64("last timestamp").map_err(e)?;
            let txn = r.i64("txn first offset").map_err(e)?;
            entry.current_txn_first_offset = (txn >= 0).then_some(txn);
            let nb = r.i8("batch count").map_err(e)? as u8;
            for _ in 0..nb {
                entry.batches.push_back(BatchMetadata {
                    first_seq: r.i32("first seq").map_err(e)?,
                    last_seq: r.i32("last seq").map_err(e)?,
                    first_offset: r.i64("first offset").map_err(e)?,
                    last_offset: r.i64("last offset").map_err(e)?,
                    timestamp: r.i64("timestamp").map_err(e)?,
                });
            }
            if let Some(first) = entry.current_txn_first_offset {
                state.ongoing.insert(first, entry.producer_id);
            }
            state.producers.insert(entry.producer_id, entry);
        }
        let m = r.u32("aborted count").map_err(e)?;
        for _ in 0..m {
            state.aborted.push(AbortedTxn {
                producer_id: r.i64("aborted producer id").map_err(e)?,
                first_offset: r.i64("aborted first offset").map_err(e)?,
                last_offset: r.i64("aborted last offset").map_err(e)?,
            });
        }
        if r.remaining() != 0 {
            return Err("trailing bytes in snapshot".into());
        }
        Ok((offset, state))
    }
}

const SNAPSHOT_MAGIC: &[u8; 4] = b"SSPS";
const SNAPSHOT_VERSION: u16 = 1;
