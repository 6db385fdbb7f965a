//! The record accumulator: per-partition queues of batches waiting to be
//! sent. A plain state machine: every method takes `now`, none does I/O.
//!
//! A record is appended to the last batch of its partition while that batch
//! stays within `batch.size` bytes (a record larger than `batch.size` gets a
//! batch of its own). A partition is *ready* when its first batch is full
//! (or another batch queues behind it), when `linger.ms` has passed since
//! that batch was opened, when a flush or close asked for everything, or
//! while a `send` waits for room in `buffer.memory` (as in Java: lingering
//! would only keep the bytes longer).
//! A partition is never ready while it has `max_in_flight` batches in flight
//! or while it is muted by a retry backoff.
//!
//! An idempotent producer's first write to a partition goes alone
//! ([`Accumulator::with_first_write_alone`]): until a batch of the current
//! producer id has been acknowledged there, at most one batch of it is in
//! flight. Apache Kafka takes *any* sequence as the first one of a producer
//! id it holds no state for. So if the first batch (sequence 0) of a
//! just-created partition is refused as not yet served (NOT_LEADER_OR_FOLLOWER)
//! while the second, sent behind it, arrives once the partition is served,
//! Kafka appends the second as the producer's first. The retried first batch
//! then meets OUT_OF_ORDER_SEQUENCE_NUMBER and can never be written. Seen on
//! Kafka 4.4 in about one run in ten of loading a new 4-partition topic
//! (docs/BENCHMARKS.md); it costs one round trip per partition per producer
//! id.
//!
//! Each batch carries the `buffer.memory` reservation of its records
//! ([`BatchMemory`]), which goes back to the producer's budget when the
//! batch is dropped.
//!
//! Retried batches go back to the *front* of their queue in sequence order,
//! keeping the sequence number they were first sent with: the idempotent
//! producer never re-sequences a batch, so the broker can recognise a
//! duplicate.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::time::Instant;

use super::memory::{BatchMemory, BufferMemory};
use crate::protocol::records::RecordHeader;

/// A topic and partition.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicPartition {
    /// Topic name.
    pub topic: String,
    /// Partition index.
    pub partition: i32,
}

impl std::fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

/// One record inside a batch, with whatever the caller needs to tell its
/// sender the outcome (`D`, e.g. a oneshot sender).
#[derive(Debug)]
pub struct QueuedRecord<D> {
    /// Create time (ms).
    pub timestamp: i64,
    /// Key.
    pub key: Option<Bytes>,
    /// Value.
    pub value: Option<Bytes>,
    /// Headers.
    pub headers: Vec<RecordHeader>,
    /// Delivery handle.
    pub delivery: D,
}

/// Approximate encoded size of a record (varint overhead included).
pub fn record_size(key: Option<&Bytes>, value: Option<&Bytes>, headers: &[RecordHeader]) -> usize {
    21 + key.map_or(0, |k| k.len())
        + value.map_or(0, |v| v.len())
        + headers
            .iter()
            .map(|h| 10 + h.key.len() + h.value.as_ref().map_or(0, |v| v.len()))
            .sum::<usize>()
}

/// A batch of records for one partition.
#[derive(Debug)]
pub struct ProducerBatch<D> {
    /// Its partition.
    pub tp: TopicPartition,
    /// The records, in send order.
    pub records: Vec<QueuedRecord<D>>,
    /// Approximate encoded size.
    pub size: usize,
    /// When the batch was opened.
    pub created: Instant,
    /// Base sequence, assigned when first sent by an idempotent producer
    /// and kept across retries.
    pub base_sequence: Option<i32>,
    /// Producer id and epoch the sequence belongs to.
    pub producer: Option<(i64, i16)>,
    /// Send attempts so far.
    pub attempts: u32,
    /// The records' reservation in `buffer.memory`, given back when the
    /// batch is dropped.
    pub memory: BatchMemory,
}

/// Batch header overhead counted against `batch.size`.
const BATCH_OVERHEAD: usize = 61;

/// The most records a new batch makes room for at once; a batch beyond
/// it grows as it fills. Java's producer, likewise, takes `batch.size`
/// bytes for a batch when it opens it. 256 entries of about 100 bytes: a
/// runtime's 128 KiB batches (D50) of small records would otherwise take
/// 100 KiB of list per open batch, per partition and worker, before any
/// record is in it.
const MAX_PRESIZED: usize = 256;

/// Per-partition batch queues.
#[derive(Debug)]
pub struct Accumulator<D> {
    linger: Duration,
    batch_size: usize,
    max_in_flight: usize,
    queues: BTreeMap<TopicPartition, VecDeque<ProducerBatch<D>>>,
    in_flight: BTreeMap<TopicPartition, usize>,
    muted_until: BTreeMap<TopicPartition, Instant>,
    drain_all: bool,
    memory_exhausted: bool,
    memory: Option<Arc<BufferMemory>>,
    /// Whether a partition's first write goes alone (idempotence).
    first_write_alone: bool,
    /// Partitions where a batch of the current producer id was acknowledged.
    written: BTreeSet<TopicPartition>,
}

impl<D> Accumulator<D> {
    /// An empty accumulator.
    pub fn new(linger: Duration, batch_size: usize, max_in_flight: usize) -> Self {
        Self {
            linger,
            batch_size,
            max_in_flight: max_in_flight.max(1),
            queues: BTreeMap::new(),
            in_flight: BTreeMap::new(),
            muted_until: BTreeMap::new(),
            drain_all: false,
            memory_exhausted: false,
            memory: None,
            first_write_alone: false,
            written: BTreeSet::new(),
        }
    }

    /// Sends a partition's first batch alone until one is acknowledged
    /// ([`Accumulator::acknowledged`]); see the module documentation.
    pub fn with_first_write_alone(mut self) -> Self {
        self.first_write_alone = true;
        self
    }

    /// A batch of `tp` was written under the current producer id: the
    /// partition may have `max_in_flight` batches in flight from now on.
    pub fn acknowledged(&mut self, tp: &TopicPartition) {
        if self.first_write_alone && !self.written.contains(tp) {
            self.written.insert(tp.clone());
        }
    }

    /// The producer id changed: every partition's next write is a first
    /// one again.
    pub fn new_producer_id(&mut self) {
        self.written.clear();
    }

    /// How many batches of `tp` may be in flight now.
    fn in_flight_cap(&self, tp: &TopicPartition) -> usize {
        if self.first_write_alone && !self.written.contains(tp) {
            1
        } else {
            self.max_in_flight
        }
    }

    /// Batches give their records' bytes back to `memory` when dropped.
    pub fn with_memory(mut self, memory: Arc<BufferMemory>) -> Self {
        self.memory = Some(memory);
        self
    }

    /// Appends a record to the partition's last batch or a new one. `size`
    /// is the record's [`record_size`], which the caller reserved in the
    /// accumulator's memory (if any); the batch takes the reservation over.
    pub fn append(
        &mut self,
        tp: TopicPartition,
        record: QueuedRecord<D>,
        size: usize,
        now: Instant,
    ) {
        // One lookup by reference for the usual case, a record joining the
        // last batch; `entry` (which takes the key, a copy of the topic
        // name) only when a batch opens.
        if let Some(last) = self.queues.get_mut(&tp).and_then(|q| q.back_mut())
            && last.base_sequence.is_none()
            && last.size + size <= self.batch_size
        {
            last.size += size;
            last.memory.add(size);
            last.records.push(record);
            return;
        }
        let mut memory = BatchMemory::new(self.memory.clone());
        memory.add(size);
        // Room for as many records of this size as fit the batch, so that
        // the list is not copied each time it doubles (at 100 B, seven
        // times per 16 KiB batch).
        let mut records =
            Vec::with_capacity((self.batch_size / size.max(1)).clamp(1, MAX_PRESIZED));
        records.push(record);
        self.queues
            .entry(tp.clone())
            .or_default()
            .push_back(ProducerBatch {
                tp,
                records,
                size: BATCH_OVERHEAD + size,
                created: now,
                base_sequence: None,
                producer: None,
                attempts: 0,
                memory,
            });
    }

    /// Treat every batch as ready (flush, close, commit) until
    /// [`Accumulator::is_empty`].
    pub fn drain_all(&mut self, on: bool) {
        self.drain_all = on;
    }

    /// Whether a `send` is waiting for room in `buffer.memory`: then every
    /// batch is ready without lingering.
    pub fn set_memory_exhausted(&mut self, on: bool) {
        self.memory_exhausted = on;
    }

    fn is_sendable(&self, tp: &TopicPartition, now: Instant) -> bool {
        self.in_flight(tp) < self.in_flight_cap(tp)
            && self.muted_until.get(tp).is_none_or(|&t| t <= now)
    }

    /// Partitions with a batch to send now.
    pub fn ready(&self, now: Instant) -> Vec<TopicPartition> {
        self.queues
            .iter()
            .filter(|(tp, q)| {
                let Some(first) = q.front() else { return false };
                let due = self.drain_all
                    || self.memory_exhausted
                    || q.len() > 1
                    || first.size >= self.batch_size
                    || first.base_sequence.is_some()
                    || now >= first.created + self.linger;
                due && self.is_sendable(tp, now)
            })
            .map(|(tp, _)| tp.clone())
            .collect()
    }

    /// When the next partition becomes ready by time alone (linger or
    /// retry backoff expiring), if any. A partition at its in-flight cap
    /// takes no part: time alone cannot make it ready, only a completion
    /// can, and a completion wakes the sender anyway. (Counting it made the
    /// sender's deadline a past instant for as long as the partition stayed
    /// at its cap, so the sender spun: a core against a slow broker.)
    pub fn next_deadline(&self) -> Option<Instant> {
        self.queues
            .iter()
            .filter_map(|(tp, q)| {
                if self.in_flight(tp) >= self.in_flight_cap(tp) {
                    return None;
                }
                let first = q.front()?;
                let immediate = self.drain_all
                    || self.memory_exhausted
                    || q.len() > 1
                    || first.size >= self.batch_size
                    || first.base_sequence.is_some();
                let time_ready = if immediate {
                    first.created
                } else {
                    first.created + self.linger
                };
                let mute = self.muted_until.get(tp).copied();
                Some(mute.map_or(time_ready, |m| m.max(time_ready)))
            })
            .min()
    }

    /// Takes the first batch of `tp` for sending; counts it in flight.
    pub fn drain(&mut self, tp: &TopicPartition) -> Option<ProducerBatch<D>> {
        let q = self.queues.get_mut(tp)?;
        let b = q.pop_front()?;
        if q.is_empty() {
            self.queues.remove(tp);
        }
        *self.in_flight.entry(tp.clone()).or_default() += 1;
        Some(b)
    }

    /// A drained batch is no longer in flight (answered or failed).
    pub fn complete(&mut self, tp: &TopicPartition) {
        if let Some(n) = self.in_flight.get_mut(tp) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.in_flight.remove(tp);
            }
        }
    }

    /// Puts a batch back for a retry, at the front of its queue in sequence
    /// order, and mutes the partition until `retry_at`.
    pub fn reenqueue(&mut self, batch: ProducerBatch<D>, retry_at: Instant) {
        let tp = batch.tp.clone();
        self.complete(&tp);
        self.muted_until.insert(tp.clone(), retry_at);
        let q = self.queues.entry(tp).or_default();
        let pos = q
            .iter()
            .position(|b| match (b.base_sequence, batch.base_sequence) {
                (Some(s), Some(mine)) => s > mine,
                (None, _) => true,
                (Some(_), None) => false,
            })
            .unwrap_or(q.len());
        q.insert(pos, batch);
    }

    /// Moves the queued batches of `tp` with a base sequence above `after`
    /// down by `count` (an earlier batch failed without being written).
    pub fn lower_sequences(&mut self, tp: &TopicPartition, after: i32, count: i32) {
        for b in self.queues.get_mut(tp).into_iter().flatten() {
            if let Some(s) = b.base_sequence.as_mut()
                && *s > after
            {
                *s -= count;
            }
        }
    }

    /// Whether `tp` has a batch with a sequence below `seq` waiting for a
    /// retry.
    pub fn has_earlier_retry(&self, tp: &TopicPartition, seq: i32) -> bool {
        self.queues
            .get(tp)
            .is_some_and(|q| q.iter().any(|b| b.base_sequence.is_some_and(|s| s < seq)))
    }

    /// Batches in flight for `tp`.
    pub fn in_flight(&self, tp: &TopicPartition) -> usize {
        self.in_flight.get(tp).copied().unwrap_or(0)
    }

    /// Nothing queued and nothing in flight.
    pub fn is_empty(&self) -> bool {
        self.queues.is_empty() && self.in_flight.is_empty()
    }

    /// Removes every queued (not in-flight) batch, e.g. on abort.
    pub fn take_queued(&mut self) -> Vec<ProducerBatch<D>> {
        let queues = std::mem::take(&mut self.queues);
        self.muted_until.clear();
        queues.into_values().flatten().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(n: usize) -> QueuedRecord<u32> {
        QueuedRecord {
            timestamp: 0,
            key: None,
            value: Some(Bytes::from(vec![0u8; n])),
            headers: vec![],
            delivery: 0,
        }
    }

    fn tp(p: i32) -> TopicPartition {
        TopicPartition {
            topic: "t".into(),
            partition: p,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn linger_and_batch_size_decide_readiness() {
        let t0 = Instant::now();
        let mut acc = Accumulator::new(Duration::from_millis(10), 400, 5);
        acc.append(tp(0), rec(100), 100 + 21, t0);
        assert!(acc.ready(t0).is_empty(), "waits for linger");
        assert_eq!(acc.next_deadline(), Some(t0 + Duration::from_millis(10)));
        assert_eq!(acc.ready(t0 + Duration::from_millis(10)), vec![tp(0)]);
        // Filling past batch.size opens a second batch: ready at once.
        acc.append(tp(0), rec(100), 100 + 21, t0);
        acc.append(tp(0), rec(100), 100 + 21, t0);
        assert_eq!(acc.ready(t0), vec![tp(0)]);
        let b = acc.drain(&tp(0)).unwrap();
        assert_eq!(b.records.len(), 2);
        acc.drain_all(true);
        assert_eq!(acc.ready(t0), vec![tp(0)]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_send_waiting_for_memory_ends_lingering() {
        let t0 = Instant::now();
        let mut acc = Accumulator::new(Duration::from_secs(10), 400, 5);
        acc.append(tp(0), rec(100), 100 + 21, t0);
        assert!(acc.ready(t0).is_empty());
        acc.set_memory_exhausted(true);
        assert_eq!(acc.ready(t0), vec![tp(0)]);
        assert_eq!(acc.next_deadline(), Some(t0));
        acc.set_memory_exhausted(false);
        assert!(acc.ready(t0).is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn batches_give_their_bytes_back_when_dropped() {
        let t0 = Instant::now();
        let memory = Arc::new(BufferMemory::new(1000));
        let mut acc = Accumulator::new(Duration::ZERO, 200, 5).with_memory(memory.clone());
        for _ in 0..3 {
            // What `send` does before handing the record over.
            memory.reserve(121, Duration::ZERO).await.unwrap();
            acc.append(tp(0), rec(100), 121, t0);
        }
        assert_eq!(memory.available(), 1000 - 363);
        let first = acc.drain(&tp(0)).unwrap();
        assert_eq!(first.memory.bytes(), 121);
        drop(first);
        assert_eq!(memory.available(), 1000 - 242);
        // A retry keeps its reservation; queued batches taken on abort
        // give theirs back when dropped.
        let second = acc.drain(&tp(0)).unwrap();
        acc.reenqueue(second, t0);
        assert_eq!(memory.available(), 1000 - 242);
        drop(acc.take_queued());
        assert_eq!(memory.available(), 1000);
    }

    #[tokio::test(start_paused = true)]
    async fn a_partition_at_its_in_flight_cap_sets_no_deadline() {
        let t0 = Instant::now();
        let mut acc = Accumulator::new(Duration::from_millis(5), 200, 2);
        for _ in 0..4 {
            acc.append(tp(0), rec(150), 150 + 21, t0);
        }
        acc.drain(&tp(0)).unwrap();
        acc.drain(&tp(0)).unwrap();
        // Two in flight (the cap), two full batches queued: not ready, and
        // no deadline (a past one would make the sender spin).
        assert!(acc.ready(t0 + Duration::from_secs(1)).is_empty());
        assert_eq!(acc.next_deadline(), None);
        // Another partition still sets its own deadline.
        acc.append(tp(1), rec(10), 10 + 21, t0);
        assert_eq!(acc.next_deadline(), Some(t0 + Duration::from_millis(5)));
        // A completion makes room: the full batch is due at once.
        acc.complete(&tp(0));
        assert_eq!(acc.next_deadline(), Some(t0));
        assert!(acc.ready(t0).contains(&tp(0)));
    }

    /// An idempotent producer's first write to a partition goes alone:
    /// Kafka takes any sequence as a producer's first, so a second batch
    /// overtaking a refused first one would be written out of order.
    #[tokio::test(start_paused = true)]
    async fn a_first_write_goes_alone_until_acknowledged() {
        let t0 = Instant::now();
        let mut acc = Accumulator::new(Duration::ZERO, 200, 5).with_first_write_alone();
        for _ in 0..4 {
            acc.append(tp(0), rec(150), 150 + 21, t0);
        }
        let first = acc.drain(&tp(0)).unwrap();
        assert!(
            acc.ready(t0).is_empty(),
            "the first batch is alone in flight"
        );
        assert_eq!(acc.next_deadline(), None, "and the sender does not spin");
        // Refused (retriable): back in front, still alone.
        acc.reenqueue(first, t0);
        acc.drain(&tp(0)).unwrap();
        assert!(acc.ready(t0).is_empty());
        // Written: the partition may now fill its in-flight cap.
        acc.complete(&tp(0));
        acc.acknowledged(&tp(0));
        for _ in 0..3 {
            assert_eq!(acc.ready(t0), vec![tp(0)]);
            acc.drain(&tp(0)).unwrap();
        }
        // A new producer id starts over; other partitions were never held.
        acc.new_producer_id();
        acc.append(tp(0), rec(150), 150 + 21, t0);
        assert!(acc.ready(t0).is_empty(), "3 in flight under the old id");
        let mut plain = Accumulator::new(Duration::ZERO, 200, 5);
        for _ in 0..2 {
            plain.append(tp(1), rec(150), 150 + 21, t0);
        }
        plain.drain(&tp(1)).unwrap();
        assert_eq!(plain.ready(t0), vec![tp(1)], "without idempotence: no hold");
    }

    /// Issue #20: a partition muted by a retry backoff, with full batches
    /// queued, must not set a past deadline either (the sender would spin
    /// until the backoff ends); its deadline is the end of the backoff.
    #[tokio::test(start_paused = true)]
    async fn a_muted_partition_sets_the_end_of_its_backoff_as_deadline() {
        let t0 = Instant::now();
        let mut acc = Accumulator::new(Duration::from_millis(5), 200, 5);
        for _ in 0..3 {
            acc.append(tp(0), rec(150), 150 + 21, t0);
        }
        let mut b = acc.drain(&tp(0)).unwrap();
        b.base_sequence = Some(0);
        let retry_at = t0 + Duration::from_millis(100);
        acc.reenqueue(b, retry_at);
        // Well below its in-flight cap, a retry and a full batch queued:
        // due by size, held back by the mute.
        let during = t0 + Duration::from_millis(50);
        assert!(acc.ready(during).is_empty());
        assert_eq!(acc.next_deadline(), Some(retry_at));
        // A second partition's linger still comes first.
        acc.append(tp(1), rec(10), 10 + 21, t0);
        assert_eq!(acc.next_deadline(), Some(t0 + Duration::from_millis(5)));
        // When the backoff ends the retry goes first.
        let ready = acc.ready(retry_at);
        assert!(ready.contains(&tp(0)));
        assert_eq!(acc.drain(&tp(0)).unwrap().base_sequence, Some(0));
    }

    #[tokio::test(start_paused = true)]
    async fn retries_keep_their_sequence_and_go_first() {
        let t0 = Instant::now();
        let mut acc = Accumulator::new(Duration::ZERO, 200, 2);
        for _ in 0..3 {
            acc.append(tp(0), rec(150), 150 + 21, t0);
        }
        let mut b1 = acc.drain(&tp(0)).unwrap();
        b1.base_sequence = Some(0);
        let mut b2 = acc.drain(&tp(0)).unwrap();
        b2.base_sequence = Some(1);
        assert!(acc.ready(t0).is_empty(), "max in flight reached");
        // Both fail; the later one comes back first.
        let later = t0 + Duration::from_millis(100);
        acc.reenqueue(b2, later);
        acc.reenqueue(b1, later);
        assert!(acc.ready(t0).is_empty(), "muted by the retry backoff");
        assert!(acc.has_earlier_retry(&tp(0), 1));
        assert!(!acc.has_earlier_retry(&tp(0), 0));
        let first = acc.drain(&tp(0)).unwrap();
        assert_eq!(first.base_sequence, Some(0));
        let second = acc.drain(&tp(0)).unwrap();
        assert_eq!(second.base_sequence, Some(1));
        let third = acc.drain(&tp(0));
        assert!(third.is_some_and(|b| b.base_sequence.is_none()));
    }
}
