//! Log compaction (`cleanup.policy=compact`), as Kafka's log cleaner
//! behaves; see [`PartitionLog::clean`](super::PartitionLog::clean).
//!
//! # What one cleaning does
//!
//! 1. **The cleanable range** is the closed segments that lie wholly below
//!    the *first uncleanable offset*: the smallest of the active segment's
//!    base offset, the last stable offset (an open transaction's records
//!    are never touched) and the base offset of the first segment holding
//!    a record newer than `min.compaction.lag.ms`. The active segment is
//!    never cleaned.
//! 2. **Whether to clean**: the *dirty* part is what lies at or after the
//!    cleaner checkpoint (the end of the last cleaning, persisted in
//!    `cleaner-checkpoint`). The log is cleaned when the dirty bytes are
//!    more than `min.cleanable.dirty.ratio` of the cleanable bytes, or
//!    when the first dirty batch is older than `max.compaction.lag.ms`,
//!    or when a delete horizon written by an earlier cleaning has passed
//!    (tombstones or markers can go).
//! 3. **The offset map**: the latest offset of every key in the dirty
//!    part (records of aborted transactions and control records left out).
//! 4. **Each cleanable segment is rewritten**, batch by batch, keeping its
//!    base offset and every kept record's offset (gaps appear):
//!    - a record whose key has a later offset in the map goes;
//!    - a record without a key goes (a compacted topic refuses them on
//!      produce; these came in before the topic was compacted);
//!    - the records of aborted transactions go;
//!    - a tombstone (null value) stays until its batch's delete horizon
//!      (KIP-534: the first cleaning that keeps it writes
//!      `now + delete.retention.ms` into the batch) has passed;
//!    - a transaction marker stays while any batch of its transaction is
//!      still in the cleaned range, and after that until its own delete
//!      horizon has passed;
//!    - a batch left without records goes, unless it is the last batch of
//!      its producer, which stays as an empty batch (header only, offset
//!      range and sequence kept) so that the producer state can still be
//!      rebuilt from the log;
//!    - a batch that keeps every record and needs no horizon is copied as
//!      it is; the others are re-encoded with their codec, producer
//!      fields, base offset and last offset delta.
//! 5. **Swap**: a changed segment is replaced through
//!    `Segment::replace` (written beside, fsynced, renamed in); a segment
//!    left empty is deleted unless it is the first. Then the checkpoint
//!    moves to the end of the cleaned range.
//!
//! Everything removed is counted in [`CleanOutcome`], which the broker
//! logs and exports as metrics.

use std::collections::{HashMap, HashSet};

use bytes::Bytes;

use super::producer_state::{AbortedTxn, ProducerStateManager};
use super::segment::{BatchHeader, Segment};
use sharestream_protocol::records::{
    BatchSpec, DEFAULT_MAX_DECOMPRESSED, Record, RecordBatchView, TimestampType, encode_batch,
    encode_batch_with_delete_horizon,
};

/// The topic configs that steer compaction, with Kafka's defaults.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CleanerConfig {
    /// `delete.retention.ms`: how long tombstones and transaction markers
    /// stay after the cleaning that first kept them.
    pub delete_retention_ms: i64,
    /// `min.compaction.lag.ms`: records newer than this are not cleaned.
    pub min_compaction_lag_ms: i64,
    /// `max.compaction.lag.ms`: a dirty record older than this makes the
    /// log cleanable whatever its dirty ratio.
    pub max_compaction_lag_ms: i64,
    /// `min.cleanable.dirty.ratio`.
    pub min_cleanable_dirty_ratio: f64,
}

impl Default for CleanerConfig {
    fn default() -> Self {
        Self {
            delete_retention_ms: 86_400_000,
            min_compaction_lag_ms: 0,
            max_compaction_lag_ms: i64::MAX,
            min_cleanable_dirty_ratio: 0.5,
        }
    }
}

/// What one cleaning of a partition did (all zero when it did nothing).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CleanOutcome {
    /// Segments rewritten.
    pub segments_cleaned: usize,
    /// Segments left empty and deleted.
    pub segments_deleted: usize,
    /// Records removed because a later record has the same key.
    pub superseded_records: u64,
    /// Tombstones removed after their delete horizon.
    pub tombstones_removed: u64,
    /// Records of aborted transactions removed.
    pub aborted_records_removed: u64,
    /// Records without a key removed.
    pub keyless_records_removed: u64,
    /// Transaction markers removed after their delete horizon.
    pub markers_removed: u64,
    /// Bytes of the cleaned segments before and after.
    pub bytes_before: u64,
    /// See `bytes_before`.
    pub bytes_after: u64,
}

impl CleanOutcome {
    /// Every record removed (markers included).
    pub fn records_removed(&self) -> u64 {
        self.superseded_records
            + self.tombstones_removed
            + self.aborted_records_removed
            + self.keyless_records_removed
            + self.markers_removed
    }
}

/// The cleaner's state of one partition, persisted in its checkpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CleanerCheckpoint {
    /// Offsets below this were cleaned (the first dirty offset).
    pub(crate) first_dirty: i64,
    /// The earliest delete horizon of a kept tombstone or marker (-1 =
    /// none): once it passes, cleaning can remove something.
    pub(crate) next_horizon: i64,
}

impl CleanerCheckpoint {
    pub(crate) const EMPTY: Self = Self {
        first_dirty: 0,
        next_horizon: -1,
    };

    pub(crate) fn encode(&self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&self.first_dirty.to_be_bytes());
        b[8..].copy_from_slice(&self.next_horizon.to_be_bytes());
        b
    }

    pub(crate) fn decode(b: &[u8]) -> Option<Self> {
        (b.len() == 16).then(|| Self {
            first_dirty: i64::from_be_bytes(b[..8].try_into().expect("8 bytes")),
            next_horizon: i64::from_be_bytes(b[8..].try_into().expect("8 bytes")),
        })
    }
}

/// What the log hands the cleaner.
pub(crate) struct CleanInput<'a> {
    pub(crate) now_ms: i64,
    pub(crate) config: CleanerConfig,
    pub(crate) log_start: i64,
    pub(crate) last_stable_offset: i64,
    pub(crate) checkpoint: CleanerCheckpoint,
    pub(crate) producers: &'a ProducerStateManager,
}

/// The outcome and the checkpoint to persist, if the log was cleaned.
pub(crate) struct Cleaned {
    pub(crate) outcome: CleanOutcome,
    pub(crate) checkpoint: CleanerCheckpoint,
}

/// Iterates the batches of a segment.
fn batches(seg: &Segment) -> std::io::Result<Vec<RecordBatchView>> {
    let mut out = Vec::new();
    let mut pos = 0;
    let size = seg.size();
    while pos < size {
        let Some(h) = seg.read_header(pos)? else {
            break;
        };
        let mut bytes = seg.read_bytes(pos, h.size)?;
        match RecordBatchView::split_from(&mut bytes) {
            Ok(Some(v)) => out.push(v),
            _ => break,
        }
        pos += h.size;
    }
    Ok(out)
}

fn is_aborted(v: &RecordBatchView, aborted: &[AbortedTxn]) -> bool {
    v.is_transactional()
        && !v.is_control()
        && aborted.iter().any(|a| {
            a.producer_id == v.producer_id()
                && a.first_offset <= v.base_offset()
                && v.base_offset() < a.last_offset
        })
}

fn spec_of(v: &RecordBatchView) -> BatchSpec {
    BatchSpec {
        base_offset: v.base_offset(),
        partition_leader_epoch: v.partition_leader_epoch(),
        producer_id: v.producer_id(),
        producer_epoch: v.producer_epoch(),
        base_sequence: v.base_sequence(),
        transactional: v.is_transactional(),
        control: v.is_control(),
        timestamp_type: if v.is_log_append_time() {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        },
        compression: v.compression(),
        last_offset_delta: Some(v.last_offset_delta()),
    }
}

/// Whether `v` is the last data batch of its producer in the log.
fn last_of_producer(v: &RecordBatchView, producers: &ProducerStateManager) -> bool {
    v.has_producer_id()
        && producers
            .entry(v.producer_id())
            .and_then(|e| e.batches.back())
            .is_some_and(|m| m.last_offset == v.last_offset())
}

/// Cleans `segments` (the last one is active and never touched); see the
/// module docs. `None` when nothing was due.
pub(crate) fn clean(
    segments: &mut Vec<Segment>,
    input: &CleanInput<'_>,
) -> std::io::Result<Option<Cleaned>> {
    let n = segments.len();
    if n < 2 {
        return Ok(None);
    }
    let now = input.now_ms;
    let cfg = input.config;
    let mut uncleanable = segments[n - 1].base_offset.min(input.last_stable_offset);
    if cfg.min_compaction_lag_ms > 0 {
        let newest_allowed = now.saturating_sub(cfg.min_compaction_lag_ms);
        if let Some(seg) = segments[..n - 1]
            .iter()
            .find(|s| s.max_timestamp > newest_allowed)
        {
            uncleanable = uncleanable.min(seg.base_offset);
        }
    }
    // Closed segments wholly below the first uncleanable offset.
    let k = (0..n - 1)
        .take_while(|&i| segments[i + 1].base_offset <= uncleanable)
        .count();
    if k == 0 {
        return Ok(None);
    }
    let range_end = segments[k].base_offset;
    let first_dirty = input.checkpoint.first_dirty.max(input.log_start);
    let total: u64 = segments[..k].iter().map(|s| s.size()).sum();
    let dirty_from = segments[..k]
        .iter()
        .position(|s| s.next_offset > first_dirty && s.size() > 0);
    let dirty: u64 = dirty_from.map_or(0, |i| segments[i..k].iter().map(|s| s.size()).sum());
    let ratio_due =
        total > 0 && dirty > 0 && dirty as f64 / total as f64 > cfg.min_cleanable_dirty_ratio;
    let lag_due = cfg.max_compaction_lag_ms < i64::MAX
        && match dirty_from {
            Some(i) => segments[i].read_header(0)?.is_some_and(|h| {
                h.max_timestamp >= 0
                    && now.saturating_sub(h.max_timestamp) > cfg.max_compaction_lag_ms
            }),
            None => false,
        };
    let horizon_due = input.checkpoint.next_horizon >= 0 && input.checkpoint.next_horizon <= now;
    if !(ratio_due || lag_due || horizon_due) {
        return Ok(None);
    }

    let aborted = input
        .producers
        .aborted_transactions(input.log_start, range_end);
    // The offset map: the latest offset of each key in the dirty part.
    let mut map: HashMap<Bytes, i64> = HashMap::new();
    if let Some(from) = dirty_from {
        for seg in &segments[from..k] {
            for v in batches(seg)? {
                if v.is_control() || v.last_offset() < first_dirty || is_aborted(&v, &aborted) {
                    continue;
                }
                let Ok(records) = v.records(DEFAULT_MAX_DECOMPRESSED) else {
                    continue;
                };
                for r in records {
                    let offset = r.offset(v.base_offset());
                    if let Some(key) = r.key {
                        map.insert(key, offset);
                    }
                }
            }
        }
    }

    let mut out = CleanOutcome::default();
    let mut next_horizon: Option<i64> = None;
    let mut note_horizon = |h: i64| next_horizon = Some(next_horizon.map_or(h, |x: i64| x.min(h)));
    let new_horizon = now.saturating_add(cfg.delete_retention_ms);
    // Producers with a data batch of their current transaction seen in
    // this pass (a marker stays while its transaction has data).
    let mut txn_data_seen: HashSet<i64> = HashSet::new();
    let mut emptied = Vec::new();
    for (i, seg) in segments[..k].iter_mut().enumerate() {
        let mut buf: Vec<u8> = Vec::with_capacity(seg.size() as usize);
        let mut headers: Vec<BatchHeader> = Vec::new();
        let mut changed = false;
        let mut push = |bytes: &[u8], v: &RecordBatchView, max_ts: i64| {
            headers.push(BatchHeader {
                base_offset: v.base_offset(),
                last_offset: v.last_offset(),
                size: bytes.len() as u64,
                max_timestamp: max_ts,
            });
            buf.extend_from_slice(bytes);
        };
        for v in batches(seg)? {
            if v.is_control() {
                let had_data = txn_data_seen.remove(&v.producer_id());
                match v.delete_horizon_ms() {
                    Some(h) if !had_data && h <= now => {
                        out.markers_removed += 1;
                        changed = true;
                    }
                    Some(h) => {
                        note_horizon(h);
                        push(v.bytes(), &v, v.max_timestamp());
                    }
                    None => match v.records(DEFAULT_MAX_DECOMPRESSED) {
                        Ok(records) => {
                            let b = encode_batch_with_delete_horizon(
                                &spec_of(&v),
                                &records,
                                new_horizon,
                            )
                            .map_err(std::io::Error::other)?;
                            note_horizon(new_horizon);
                            let max_ts = max_timestamp(&records, &v);
                            push(&b, &v, max_ts);
                            changed = true;
                        }
                        Err(_) => push(v.bytes(), &v, v.max_timestamp()),
                    },
                }
                continue;
            }
            if v.is_transactional() {
                txn_data_seen.insert(v.producer_id());
            }
            let Ok(records) = v.records(DEFAULT_MAX_DECOMPRESSED) else {
                // Passed its CRC at append but does not decode: kept.
                tracing::warn!(
                    offset = v.base_offset(),
                    "log cleaner kept an undecodable batch"
                );
                push(v.bytes(), &v, v.max_timestamp());
                continue;
            };
            let aborted_batch = is_aborted(&v, &aborted);
            let horizon_passed = v.delete_horizon_ms().is_some_and(|h| h <= now);
            let total_records = records.len();
            let mut kept: Vec<Record> = Vec::with_capacity(records.len());
            for r in records {
                let offset = r.offset(v.base_offset());
                if aborted_batch {
                    out.aborted_records_removed += 1;
                } else if r.key.is_none() {
                    out.keyless_records_removed += 1;
                } else if map
                    .get(r.key.as_ref().expect("keyed"))
                    .is_some_and(|&latest| latest > offset)
                {
                    out.superseded_records += 1;
                } else if r.value.is_none() && horizon_passed {
                    out.tombstones_removed += 1;
                } else {
                    kept.push(r);
                }
            }
            let has_tombstone = kept.iter().any(|r| r.value.is_none());
            let needs_horizon = has_tombstone && v.delete_horizon_ms().is_none();
            if kept.len() == total_records && !needs_horizon {
                if let Some(h) = v.delete_horizon_ms().filter(|_| has_tombstone) {
                    note_horizon(h);
                }
                push(v.bytes(), &v, v.max_timestamp());
                continue;
            }
            changed = true;
            if kept.is_empty() {
                if last_of_producer(&v, input.producers) {
                    let b = encode_batch(&spec_of(&v), &[]).map_err(std::io::Error::other)?;
                    push(&b, &v, -1);
                }
                continue;
            }
            let spec = spec_of(&v);
            let max_ts = max_timestamp(&kept, &v);
            let b = if has_tombstone {
                let h = v.delete_horizon_ms().unwrap_or(new_horizon);
                note_horizon(h);
                encode_batch_with_delete_horizon(&spec, &kept, h)
            } else {
                encode_batch(&spec, &kept)
            }
            .map_err(std::io::Error::other)?;
            push(&b, &v, max_ts);
        }
        if !changed {
            continue;
        }
        out.bytes_before += seg.size();
        seg.replace(buf, &headers)?;
        out.bytes_after += seg.size();
        out.segments_cleaned += 1;
        if seg.size() == 0 && i > 0 {
            emptied.push(i);
        }
    }
    for i in emptied.into_iter().rev() {
        segments.remove(i).delete()?;
        out.segments_deleted += 1;
    }
    Ok(Some(Cleaned {
        outcome: out,
        checkpoint: CleanerCheckpoint {
            first_dirty: range_end,
            next_horizon: next_horizon.unwrap_or(-1),
        },
    }))
}

/// The max timestamp of a rewritten batch: the batch's own for
/// LogAppendTime (every record decodes to it), else its records' largest.
fn max_timestamp(records: &[Record], v: &RecordBatchView) -> i64 {
    if v.is_log_append_time() {
        return v.max_timestamp();
    }
    records.iter().map(|r| r.timestamp).max().unwrap_or(-1)
}
