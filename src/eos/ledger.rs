//! The intent ledger's records and its index, without I/O
//! (docs/EXACTLY-ONCE.md, section 3 and 5).
//!
//! A ledger transaction on the target cluster carries, besides its outputs,
//! one [`LedgerRecord::Intent`] per source partition it consumed from. The
//! first intent of a record, in ledger order, whose transaction did not
//! abort owns it. [`LedgerPartitionIndex`] is what a worker knows of one
//! ledger partition: it is fed the partition's batches in offset order,
//! read_uncommitted with the control batches (COMMIT and ABORT markers)
//! kept, and answers "which intents cover source offset `o` before ledger
//! offset `e`, and how did their transactions end?".
//!
//! Everything here is pure: the runtime (`src/runtime/ledger.rs`) fetches,
//! feeds and waits.

use std::collections::{BTreeMap, HashMap};

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::protocol::records::{ControlType, RecordBatchView};

/// The version of the ledger records we write and read.
pub const LEDGER_RECORD_VERSION: u8 = 1;

/// The most bytes a ledger batch may inflate to when decoded.
const MAX_DECOMPRESSED: usize = 64 << 20;

/// A source partition, by topic id (a topic deleted and created again has a
/// new id, so the intents of the old one never cover the new one's offsets).
pub type SourcePartition = (Uuid, i32);

/// What a ledger record says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum LedgerRecord {
    /// A transaction's claim on source records.
    Intent {
        /// The share group.
        group: String,
        /// The source topic's name (for people reading the ledger).
        topic: String,
        /// The source offsets, as inclusive `(first, last)` ranges.
        ranges: Vec<(i64, i64)>,
        /// The writer's transactional id (the one to fence).
        transactional_id: String,
        /// The ledger's partition count when written; a reader whose
        /// topic has another count stops (routing would differ).
        ledger_partitions: i32,
    },
    /// "`fencer` fenced `target` to resolve its open intent": the fenced
    /// worker does not take the fence for a second live process with its
    /// identity.
    Fence {
        /// The fencing worker's transactional id.
        fencer: String,
        /// The fenced transactional id.
        target: String,
    },
}

#[derive(Serialize, Deserialize)]
struct Envelope {
    v: u8,
    r: LedgerRecord,
}

/// The key of a ledger record: the source topic id (16 bytes) and the
/// partition (4 bytes, big endian).
pub fn ledger_key(source: SourcePartition) -> Bytes {
    let mut k = Vec::with_capacity(20);
    k.extend_from_slice(source.0.as_bytes());
    k.extend_from_slice(&source.1.to_be_bytes());
    Bytes::from(k)
}

fn parse_key(key: &[u8]) -> Option<SourcePartition> {
    if key.len() != 20 {
        return None;
    }
    let id = Uuid::from_slice(&key[..16]).ok()?;
    let p = i32::from_be_bytes(key[16..20].try_into().ok()?);
    Some((id, p))
}

/// Encodes a ledger record's value (msgpack, versioned).
pub fn encode(record: &LedgerRecord) -> Bytes {
    let env = Envelope {
        v: LEDGER_RECORD_VERSION,
        r: record.clone(),
    };
    Bytes::from(rmp_serde::to_vec(&env).expect("a ledger record always serializes"))
}

/// Decodes a ledger record's value.
pub fn decode(value: &[u8]) -> Result<LedgerRecord, LedgerError> {
    let env: Envelope = rmp_serde::from_slice(value)
        .map_err(|e| LedgerError::Malformed(format!("undecodable ledger record: {e}")))?;
    if env.v != LEDGER_RECORD_VERSION {
        return Err(LedgerError::Malformed(format!(
            "ledger record version {} (this build reads {LEDGER_RECORD_VERSION}): a newer \
             sharestream wrote the ledger",
            env.v
        )));
    }
    Ok(env.r)
}

/// The ledger partition of a source partition: Kafka's murmur2 of the key,
/// made positive, modulo the ledger's partition count.
pub fn ledger_partition(source: SourcePartition, partitions: i32) -> i32 {
    let h = crate::client::producer::partitioner::murmur2(&ledger_key(source));
    (h & 0x7fff_ffff) % partitions.max(1)
}

/// The ledger partition where fence notices for `transactional_id` go.
pub fn notice_partition(transactional_id: &str, partitions: i32) -> i32 {
    let h = crate::client::producer::partitioner::murmur2(transactional_id.as_bytes());
    (h & 0x7fff_ffff) % partitions.max(1)
}

/// Packs sorted offsets into inclusive ranges.
pub fn ranges_of(offsets: impl IntoIterator<Item = i64>) -> Vec<(i64, i64)> {
    let mut out: Vec<(i64, i64)> = Vec::new();
    for o in offsets {
        match out.last_mut() {
            Some((_, last)) if *last + 1 == o => *last = o,
            Some((_, last)) if *last >= o => {}
            _ => out.push((o, o)),
        }
    }
    out
}

/// Why the ledger cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LedgerError {
    /// A record that is not ours, or of a newer format.
    #[error("{0}")]
    Malformed(String),
    /// The ledger topic's partition count changed under the application.
    #[error(
        "the ledger was written with {written} partitions and has {now}: its partition count \
         must never change (routing depends on it); restore it or use a new \
         exactly.once.ledger.topic once every source record is terminal"
    )]
    PartitionCountChanged {
        /// Written in the intent.
        written: i32,
        /// The topic's count now.
        now: i32,
    },
}

/// How an intent's transaction ended, as far as the index has read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntentStatus {
    /// No marker read yet.
    Open,
    /// Its COMMIT marker was read.
    Committed,
    /// Its ABORT marker was read.
    Aborted,
}

/// One intent in the index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IntentEntry {
    /// The writer's transactional id.
    pub transactional_id: String,
    /// The writer's producer id (from the batch header): its markers end
    /// the intent.
    pub producer_id: i64,
    /// The share group that consumed the records (whose share-partition
    /// start offset says when the intent can be trimmed).
    pub group: String,
    /// The source topic's name.
    pub topic: String,
    /// The outcome so far.
    pub status: IntentStatus,
    /// The source partition.
    pub source: SourcePartition,
    /// The source offsets.
    pub ranges: Vec<(i64, i64)>,
}

/// What the index says of source records before a ledger offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Look {
    /// No intent, or only aborted ones: the records are free to process.
    Free,
    /// A committed intent at this ledger offset covers one of them: its
    /// outputs exist.
    Committed(i64),
    /// An intent at this ledger offset is still open: resolve it (wait, or
    /// fence its transactional id) and look again.
    Open {
        /// Ledger offset of the intent.
        offset: i64,
        /// Its transactional id.
        transactional_id: String,
        /// Its producer id.
        producer_id: i64,
    },
}

/// The index of one ledger partition.
#[derive(Debug, Default)]
pub struct LedgerPartitionIndex {
    /// The next ledger offset to read.
    position: i64,
    /// Live intents (open or committed) by ledger offset; aborted ones are
    /// dropped.
    intents: BTreeMap<i64, IntentEntry>,
    /// Open intents by producer id.
    open: HashMap<i64, Vec<i64>>,
    /// Per source partition: `(first offset, ledger offset) -> last offset`.
    by_source: HashMap<SourcePartition, BTreeMap<(i64, i64), i64>>,
    /// Per source partition, the longest range (bounds a look's scan).
    max_span: HashMap<SourcePartition, i64>,
    /// Fence notices read: `(fenced transactional id, ledger offset)`.
    notices: Vec<(String, i64)>,
    /// The partition count the intents were written for, once one is read.
    written_partitions: Option<i32>,
}

impl LedgerPartitionIndex {
    /// An index that starts reading at `position` (the log start offset).
    pub fn new(position: i64) -> Self {
        Self {
            position,
            ..Self::default()
        }
    }

    /// The next ledger offset to read: every record below it has been
    /// applied.
    pub fn position(&self) -> i64 {
        self.position
    }

    /// Intents held (open and committed).
    pub fn len(&self) -> usize {
        self.intents.len()
    }

    /// `true` with no intent held.
    pub fn is_empty(&self) -> bool {
        self.intents.is_empty()
    }

    /// Applies one fetched batch of the ledger partition. Batches below
    /// the position (a fetch repeats the batch that holds the fetch
    /// offset) are skipped. `partitions` is the ledger topic's partition
    /// count now.
    pub fn apply(&mut self, batch: &RecordBatchView, partitions: i32) -> Result<(), LedgerError> {
        if batch.last_offset() < self.position {
            return Ok(());
        }
        if batch.is_control() {
            let status = match batch.control_type() {
                Some(ControlType::Commit) => Some(IntentStatus::Committed),
                Some(ControlType::Abort) => Some(IntentStatus::Aborted),
                _ => None,
            };
            if let Some(status) = status {
                self.resolve(batch.producer_id(), status);
            }
            self.position = batch.last_offset() + 1;
            return Ok(());
        }
        let records = batch
            .records(MAX_DECOMPRESSED)
            .map_err(|e| LedgerError::Malformed(format!("undecodable ledger batch: {e}")))?;
        let base = batch.base_offset();
        for r in records {
            let offset = r.offset(base);
            if offset < self.position {
                continue;
            }
            let (Some(key), Some(value)) = (r.key.as_deref(), r.value.as_deref()) else {
                return Err(LedgerError::Malformed(format!(
                    "ledger record at offset {offset} has no key or value: is another \
                     application writing to the ledger topic?"
                )));
            };
            let source = parse_key(key).ok_or_else(|| {
                LedgerError::Malformed(format!(
                    "ledger record at offset {offset} has a {}-byte key (20 expected)",
                    key.len()
                ))
            })?;
            match decode(value)? {
                LedgerRecord::Intent {
                    group,
                    topic,
                    ranges,
                    transactional_id,
                    ledger_partitions,
                } => {
                    if ledger_partitions != partitions {
                        return Err(LedgerError::PartitionCountChanged {
                            written: ledger_partitions,
                            now: partitions,
                        });
                    }
                    self.written_partitions = Some(ledger_partitions);
                    if !batch.is_transactional() {
                        // Nothing resolves a non-transactional intent; it
                        // cannot be ours.
                        return Err(LedgerError::Malformed(format!(
                            "intent at ledger offset {offset} outside a transaction"
                        )));
                    }
                    self.add_intent(
                        offset,
                        IntentEntry {
                            transactional_id,
                            producer_id: batch.producer_id(),
                            group,
                            topic,
                            status: IntentStatus::Open,
                            source,
                            ranges,
                        },
                    );
                }
                LedgerRecord::Fence { target, .. } => self.notices.push((target, offset)),
            }
        }
        self.position = batch.last_offset() + 1;
        Ok(())
    }

    fn add_intent(&mut self, offset: i64, e: IntentEntry) {
        let spans = self.by_source.entry(e.source).or_default();
        let span = self.max_span.entry(e.source).or_insert(0);
        for &(first, last) in &e.ranges {
            spans.insert((first, offset), last);
            *span = (*span).max(last - first);
        }
        self.open.entry(e.producer_id).or_default().push(offset);
        self.intents.insert(offset, e);
    }

    /// A marker of `producer_id`: its open intents in this partition end.
    fn resolve(&mut self, producer_id: i64, status: IntentStatus) {
        let Some(offsets) = self.open.remove(&producer_id) else {
            return;
        };
        for o in offsets {
            if status == IntentStatus::Aborted {
                if let Some(e) = self.intents.remove(&o)
                    && let Some(spans) = self.by_source.get_mut(&e.source)
                {
                    for &(first, _) in &e.ranges {
                        spans.remove(&(first, o));
                    }
                }
            } else if let Some(e) = self.intents.get_mut(&o) {
                e.status = status;
            }
        }
    }

    /// What the intents before ledger offset `before` say of the source
    /// offsets `first..=last` of `source`: committed wins over open (a
    /// committed intent means the outputs exist, whatever else is pending).
    pub fn look(&self, source: SourcePartition, first: i64, last: i64, before: i64) -> Look {
        let Some(spans) = self.by_source.get(&source) else {
            return Look::Free;
        };
        let span = self.max_span.get(&source).copied().unwrap_or(0);
        let lo = first.saturating_sub(span);
        let mut open: Option<Look> = None;
        for (&(s_first, ledger_offset), &s_last) in spans.range((lo, i64::MIN)..=(last, i64::MAX)) {
            if ledger_offset >= before || s_last < first || s_first > last {
                continue;
            }
            let Some(e) = self.intents.get(&ledger_offset) else {
                continue;
            };
            match e.status {
                IntentStatus::Committed => return Look::Committed(ledger_offset),
                IntentStatus::Open => {
                    if open.is_none() {
                        open = Some(Look::Open {
                            offset: ledger_offset,
                            transactional_id: e.transactional_id.clone(),
                            producer_id: e.producer_id,
                        })
                    }
                }
                IntentStatus::Aborted => {}
            }
        }
        open.unwrap_or(Look::Free)
    }

    /// The status of the intent at `offset`: `None` once aborted (dropped)
    /// or never read.
    pub fn status(&self, offset: i64) -> Option<IntentStatus> {
        self.intents.get(&offset).map(|e| e.status)
    }

    /// The lowest ledger offset the ledger must keep (docs/EXACTLY-ONCE.md,
    /// "Trimming the ledger"): the first intent, in ledger order, that is
    /// still open, or committed with a source offset at or above its share
    /// group's share-partition start offset (SPSO). `spso(group, topic,
    /// partition)` is that offset, `None` when unknown (the intent is then
    /// kept). Below the returned offset every intent read is aborted, or
    /// committed for records that are all terminal at the source; with no
    /// such intent it is the index position (everything read).
    pub fn trim_point(&self, spso: impl Fn(&str, &str, i32) -> Option<i64>) -> i64 {
        for (&offset, e) in &self.intents {
            let done = e.status == IntentStatus::Committed
                && spso(&e.group, &e.topic, e.source.1)
                    .is_some_and(|start| e.ranges.iter().all(|&(_, last)| last < start));
            if !done {
                return offset;
            }
        }
        self.position
    }

    /// Forgets everything below ledger offset `before` (deleted from the
    /// ledger by a trim): intents, their source spans and fence notices.
    /// The position moves up to `before` if it was below.
    pub fn prune(&mut self, before: i64) {
        let kept = self.intents.split_off(&before);
        let gone = std::mem::replace(&mut self.intents, kept);
        for (offset, e) in gone {
            if let Some(spans) = self.by_source.get_mut(&e.source) {
                for &(first, _) in &e.ranges {
                    spans.remove(&(first, offset));
                }
                if spans.is_empty() {
                    self.by_source.remove(&e.source);
                    self.max_span.remove(&e.source);
                }
            }
            if let Some(open) = self.open.get_mut(&e.producer_id) {
                open.retain(|&o| o != offset);
                if open.is_empty() {
                    self.open.remove(&e.producer_id);
                }
            }
        }
        self.notices.retain(|&(_, o)| o >= before);
        self.position = self.position.max(before);
    }

    /// Whether a fence notice for `transactional_id` at or after ledger
    /// offset `since` was read; consumes it.
    pub fn take_notice(&mut self, transactional_id: &str, since: i64) -> bool {
        match self
            .notices
            .iter()
            .position(|(t, o)| t == transactional_id && *o >= since)
        {
            Some(i) => {
                self.notices.swap_remove(i);
                true
            }
            None => false,
        }
    }
}

/// When a trim point may be acted on (docs/EXACTLY-ONCE.md, "Trimming the
/// ledger"). A point seen at time `t` is a prefix whose records were all
/// terminal at `t`; a worker may still hold one of them, acquired before
/// `t`, until its decision, which comes at most
/// `exactly.once.ledger.max.batch.age.ms` after the acquisition (else it
/// abandons the batch). So a point is due only `grace` after it was seen.
/// Time is an input (milliseconds of a monotonic clock).
#[derive(Debug, Default)]
pub struct TrimSchedule {
    /// Points seen, oldest first, each with when it was seen.
    seen: std::collections::VecDeque<(u64, i64)>,
}

impl TrimSchedule {
    /// Notes the trim point computed at `now_ms`.
    pub fn observe(&mut self, now_ms: u64, point: i64) {
        if self.seen.back().is_none_or(|&(_, p)| point > p) {
            self.seen.push_back((now_ms, point));
        }
    }

    /// The highest point seen at least `grace_ms` before `now_ms`, if any;
    /// points up to it are forgotten.
    pub fn due(&mut self, now_ms: u64, grace_ms: u64) -> Option<i64> {
        let mut due = None;
        while let Some(&(at, point)) = self.seen.front() {
            if now_ms.saturating_sub(at) < grace_ms {
                break;
            }
            due = Some(point);
            self.seen.pop_front();
        }
        due
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::records::{BatchSpec, Record, control_batch, encode_batch};

    const TID: Uuid = Uuid::from_u128(7);

    fn intent(tx: &str, ranges: Vec<(i64, i64)>) -> LedgerRecord {
        LedgerRecord::Intent {
            group: "g".into(),
            topic: "in".into(),
            ranges,
            transactional_id: tx.into(),
            ledger_partitions: 1,
        }
    }

    fn view(bytes: Bytes, base: i64) -> RecordBatchView {
        // The log stamps the base offset; so does this helper.
        let mut v = bytes.to_vec();
        v[..8].copy_from_slice(&base.to_be_bytes());
        RecordBatchView::parse_all(Bytes::from(v))
            .unwrap()
            .remove(0)
    }

    fn data_batch(
        base: i64,
        pid: i64,
        records: &[(SourcePartition, LedgerRecord)],
    ) -> RecordBatchView {
        let spec = BatchSpec {
            producer_id: pid,
            producer_epoch: 0,
            base_sequence: 0,
            transactional: true,
            ..BatchSpec::default()
        };
        let recs: Vec<Record> = records
            .iter()
            .enumerate()
            .map(|(i, (src, r))| Record::new(i as i32, 0, Some(ledger_key(*src)), Some(encode(r))))
            .collect();
        view(encode_batch(&spec, &recs).unwrap(), base)
    }

    fn marker(offset: i64, pid: i64, commit: bool) -> RecordBatchView {
        view(control_batch(commit, pid, 0, 0, 0), offset)
    }

    #[test]
    fn records_round_trip_and_refuse_other_versions() {
        let r = intent("app-x-0", vec![(3, 9)]);
        assert_eq!(decode(&encode(&r)).unwrap(), r);
        let bad = rmp_serde::to_vec(&Envelope { v: 99, r }).unwrap();
        assert!(matches!(decode(&bad), Err(LedgerError::Malformed(m)) if m.contains("version 99")));
        assert!(decode(b"\x01junk").is_err());
    }

    #[test]
    fn ranges_pack_consecutive_offsets() {
        assert_eq!(ranges_of([1, 2, 3, 5, 7, 8]), vec![(1, 3), (5, 5), (7, 8)]);
        assert_eq!(ranges_of([]), Vec::<(i64, i64)>::new());
    }

    #[test]
    fn routing_is_stable_and_in_range() {
        for p in 0..50 {
            let l = ledger_partition((TID, p), 12);
            assert!((0..12).contains(&l));
            assert_eq!(l, ledger_partition((TID, p), 12));
        }
        assert_eq!(ledger_partition((TID, 3), 1), 0);
    }

    #[test]
    fn markers_resolve_intents_and_looks_honour_the_bound() {
        let src = (TID, 0);
        let mut ix = LedgerPartitionIndex::new(0);
        // A (pid 1) claims 0..=4 at ledger offset 0; B (pid 2) claims
        // 3..=6 at offset 1.
        ix.apply(&data_batch(0, 1, &[(src, intent("a", vec![(0, 4)]))]), 1)
            .unwrap();
        ix.apply(&data_batch(1, 2, &[(src, intent("b", vec![(3, 6)]))]), 1)
            .unwrap();
        assert_eq!(ix.position(), 2);
        // Before offset 1 only A is seen, open.
        assert!(
            matches!(ix.look(src, 3, 3, 1), Look::Open { offset: 0, ref transactional_id, producer_id: 1 } if transactional_id == "a")
        );
        // Nothing covers 5..=6 before offset 1.
        assert_eq!(ix.look(src, 5, 6, 1), Look::Free);
        // Another source partition is free.
        assert_eq!(ix.look((TID, 1), 0, 9, 10), Look::Free);
        // A aborts: B, still open, is what covers 3 now.
        ix.apply(&marker(2, 1, false), 1).unwrap();
        assert_eq!(ix.look(src, 0, 2, 10), Look::Free);
        assert!(matches!(
            ix.look(src, 3, 3, 10),
            Look::Open { offset: 1, .. }
        ));
        // B commits.
        ix.apply(&marker(3, 2, true), 1).unwrap();
        assert_eq!(ix.look(src, 6, 6, 10), Look::Committed(1));
        assert_eq!(
            ix.look(src, 6, 6, 1),
            Look::Free,
            "only intents before the bound"
        );
        assert_eq!(ix.status(1), Some(IntentStatus::Committed));
        assert_eq!(ix.status(0), None);
        assert_eq!(ix.position(), 4);
        // A repeated batch (fetch from inside it) changes nothing.
        ix.apply(&data_batch(1, 2, &[(src, intent("b", vec![(3, 6)]))]), 1)
            .unwrap();
        assert_eq!(ix.len(), 1);
    }

    #[test]
    fn committed_wins_over_open() {
        let src = (TID, 0);
        let mut ix = LedgerPartitionIndex::new(0);
        ix.apply(&data_batch(0, 1, &[(src, intent("a", vec![(0, 0)]))]), 1)
            .unwrap();
        ix.apply(&marker(1, 1, true), 1).unwrap();
        ix.apply(&data_batch(2, 2, &[(src, intent("b", vec![(0, 0)]))]), 1)
            .unwrap();
        assert_eq!(ix.look(src, 0, 0, 10), Look::Committed(0));
    }

    #[test]
    fn long_ranges_are_found_from_inside() {
        let src = (TID, 0);
        let mut ix = LedgerPartitionIndex::new(0);
        ix.apply(
            &data_batch(0, 1, &[(src, intent("a", vec![(100, 10_000)]))]),
            1,
        )
        .unwrap();
        ix.apply(
            &data_batch(1, 2, &[(src, intent("b", vec![(20_000, 20_000)]))]),
            1,
        )
        .unwrap();
        assert!(matches!(
            ix.look(src, 5_000, 5_000, 10),
            Look::Open { offset: 0, .. }
        ));
        assert_eq!(ix.look(src, 10_001, 19_999, 10), Look::Free);
    }

    #[test]
    fn a_changed_partition_count_and_foreign_records_stop_the_reader() {
        let src = (TID, 0);
        let mut ix = LedgerPartitionIndex::new(0);
        let err = ix
            .apply(&data_batch(0, 1, &[(src, intent("a", vec![(0, 0)]))]), 3)
            .unwrap_err();
        assert_eq!(
            err,
            LedgerError::PartitionCountChanged { written: 1, now: 3 }
        );
        let foreign = encode_batch(
            &BatchSpec::default(),
            &[Record::new(
                0,
                0,
                Some(Bytes::from_static(b"k")),
                Some(Bytes::from_static(b"v")),
            )],
        )
        .unwrap();
        let b = view(foreign, 0);
        assert!(matches!(ix.apply(&b, 1), Err(LedgerError::Malformed(_))));
    }

    #[test]
    fn fence_notices_are_consumed_once() {
        let src = (TID, 0);
        let mut ix = LedgerPartitionIndex::new(0);
        let n = LedgerRecord::Fence {
            fencer: "w1".into(),
            target: "w0".into(),
        };
        ix.apply(&data_batch(0, 5, &[(src, n)]), 1).unwrap();
        assert!(!ix.take_notice("w0", 1));
        assert!(ix.take_notice("w0", 0));
        assert!(!ix.take_notice("w0", 0));
    }

    #[test]
    fn the_trim_point_stops_at_the_first_intent_still_needed() {
        let src = (TID, 0);
        let other = (TID, 1);
        let mut ix = LedgerPartitionIndex::new(0);
        // 0: pid 1 claims 0..=4 of partition 0; 1: pid 2 claims 5..=9;
        // 2: pid 3 claims 0..=2 of partition 1; 3: pid 1 commits;
        // 4: pid 2 aborts.
        ix.apply(&data_batch(0, 1, &[(src, intent("a", vec![(0, 4)]))]), 1)
            .unwrap();
        ix.apply(&data_batch(1, 2, &[(src, intent("b", vec![(5, 9)]))]), 1)
            .unwrap();
        ix.apply(&data_batch(2, 3, &[(other, intent("c", vec![(0, 2)]))]), 1)
            .unwrap();
        ix.apply(&marker(3, 1, true), 1).unwrap();
        ix.apply(&marker(4, 2, false), 1).unwrap();
        let spso = |start0: i64, start1: Option<i64>| {
            move |g: &str, t: &str, p: i32| {
                assert_eq!((g, t), ("g", "in"));
                if p == 0 { Some(start0) } else { start1 }
            }
        };
        // The committed intent covers 0..=4: kept while the SPSO is at or
        // below 4.
        assert_eq!(ix.trim_point(spso(4, Some(9))), 0);
        // Past it: the aborted one (dropped) is no obstacle, the open one
        // at 2 is.
        assert_eq!(ix.trim_point(spso(5, Some(9))), 2);
        // It commits; an unknown SPSO keeps it.
        ix.apply(&marker(5, 3, true), 1).unwrap();
        assert_eq!(ix.trim_point(spso(5, None)), 2);
        assert_eq!(ix.trim_point(spso(5, Some(2))), 2);
        // All terminal: everything read may go.
        assert_eq!(ix.trim_point(spso(5, Some(3))), 6);
        // Pruning forgets what was below.
        ix.prune(2);
        assert_eq!(ix.len(), 1);
        assert_eq!(ix.look(src, 0, 4, 10), Look::Free);
        assert_eq!(ix.look(other, 1, 1, 10), Look::Committed(2));
        ix.prune(6);
        assert!(ix.is_empty());
        assert_eq!(ix.position(), 6);
        // A pruned open intent's later marker is harmless.
        let mut ix = LedgerPartitionIndex::new(0);
        ix.apply(&data_batch(0, 7, &[(src, intent("d", vec![(0, 0)]))]), 1)
            .unwrap();
        ix.prune(1);
        ix.apply(&marker(1, 7, true), 1).unwrap();
        assert!(ix.is_empty());
    }

    #[test]
    fn a_trim_point_is_due_a_grace_after_it_was_seen() {
        let mut s = TrimSchedule::default();
        assert_eq!(s.due(0, 100), None);
        s.observe(0, 10);
        s.observe(50, 10); // not higher: ignored
        s.observe(60, 30);
        assert_eq!(s.due(99, 100), None);
        assert_eq!(s.due(100, 100), Some(10));
        assert_eq!(s.due(100, 100), None, "taken once");
        s.observe(150, 40);
        // Both 30 (seen at 60) and 40 (at 150) are due by 250: the higher.
        assert_eq!(s.due(250, 100), Some(40));
    }
}
