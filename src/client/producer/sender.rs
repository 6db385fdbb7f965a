//! The sender: one background task per producer that owns the
//! [`Accumulator`], places records, builds Produce requests and handles
//! their responses.
//!
//! Commands arrive in call order on an unbounded queue
//! ([`super::commands`]), so `send` never waits for the network and records
//! of one caller keep their order. The queue is bounded in bytes by
//! `buffer.memory`: `send` reserves a record's bytes before it enqueues it
//! (see [`super::memory`]), and each batch gives them back when it is
//! dropped. `send` also resolved the
//! topic's metadata, so placing a record here never waits. The loop sleeps
//! until a command, a response, or the next linger/backoff deadline.
//!
//! Requests to one broker reach its connection in the order the sender
//! built them, so batches of one partition reach the leader in sequence
//! order. The sender queues a request on the connection itself
//! ([`Connection::try_enqueue`]) when the connection is open, has a free
//! in-flight slot (`max.in.flight.requests.per.connection`) and no earlier
//! request of that broker is still waiting. Otherwise the request goes to
//! the broker's dispatcher task, which opens the connection or waits for a
//! slot, queues the requests one after the other with
//! [`Connection::enqueue`], and hands each pending response back. Either
//! way the sender awaits the responses itself, in request order per
//! broker (a [`Lane`]): a batch's completion wakes the sender directly,
//! with no task in between (D43).
//!
//! [`Connection::try_enqueue`]: crate::client::connection::Connection::try_enqueue
//! [`Connection::enqueue`]: crate::client::connection::Connection::enqueue
//!
//! Response handling per partition:
//! - success (or DUPLICATE_SEQUENCE_NUMBER, a retry of a batch already
//!   written): the records' futures get their offsets;
//! - retriable errors, per [`ClientError::is_retriable`]: the batch goes back
//!   to the front of its queue with its sequence unchanged, after the retry
//!   backoff, until `delivery.timeout.ms`; metadata-invalidating errors mark
//!   the topic stale first;
//! - OUT_OF_ORDER_SEQUENCE_NUMBER while an earlier batch of the partition
//!   is itself being retried is the expected consequence of that retry and
//!   is retried too; otherwise it fails the batch (sequence chain broken);
//! - anything else fails the batch, and is reported to the transaction
//!   manager (fatal or abortable).

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use futures::StreamExt;
use futures::stream::FuturesOrdered;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse, TopicName, TransactionalId};
use kafka_protocol::protocol::StrBytes;
use parking_lot::Mutex;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use super::accumulator::{Accumulator, ProducerBatch, QueuedRecord, TopicPartition};
use super::commands::CommandReceiver;
use super::memory::BufferMemory;
use super::partitioner::{StickyPartitioner, partition_for_key};
use super::transaction::TransactionManager;
use super::{Outcome, ProducerError, ProducerRecord, RecordMetadata};
use crate::client::backoff::Backoff;
use crate::client::broker_connection::BrokerConnection;
use crate::client::config::{Acks, ProducerConfig};
use crate::client::error::ClientError;
use crate::client::metadata::{Metadata, TopicMetadata};
use crate::protocol::ErrorCode;
use crate::protocol::records::{BatchSpec, RecordHeader, RecordView, encode_batch_of};

/// Where a record's outcome goes.
pub(crate) type Delivery = oneshot::Sender<Outcome>;

/// A record on its way to the accumulator.
pub(crate) struct Outgoing {
    pub(crate) record: ProducerRecord,
    /// Its topic's metadata, as `send` found it (partitions with leaders).
    pub(crate) topic: Arc<TopicMetadata>,
    /// Its [`record_size`](super::accumulator::record_size), reserved in
    /// `buffer.memory`.
    pub(crate) size: usize,
    pub(crate) delivery: Delivery,
}

/// What the producer asks of its sender.
pub(crate) enum Command {
    Send(Outgoing),
    /// Answered once everything enqueued before is delivered or failed.
    Flush(oneshot::Sender<()>),
    /// A new producer id/epoch: sequences restart at 0.
    SetProducer(i64, i16),
    /// Fail every batch not yet sent (transaction abort).
    FailQueued(ProducerError, oneshot::Sender<()>),
    /// A `send` began to wait for room in `buffer.memory`: send what is
    /// queued without lingering.
    MemoryWait,
    /// Send no Produce request until the receiver resolves (or its sender
    /// is dropped): the coordinator is still completing the transaction
    /// just ended (see `Producer::hold_until_transaction_complete`).
    /// Records are still taken and batched meanwhile.
    Hold(oneshot::Receiver<()>),
}

struct Completion {
    batches: Vec<ProducerBatch<Delivery>>,
    result: Result<Option<ProduceResponse>, ClientError>,
}

/// A partition's answer: error code, base offset, log append time, message.
type PartitionOutcome = (i16, i64, i64, Option<String>);

struct Job {
    req: ProduceRequest,
    acks: Acks,
    batches: Vec<ProducerBatch<Delivery>>,
}

/// A request on its way: resolves when its response (or its failure) is in.
type CompletionFuture = std::pin::Pin<Box<dyn std::future::Future<Output = Completion> + Send>>;

/// The requests of one broker, from the sender's side.
struct Lane {
    node: i32,
    /// The dispatcher task, started the first time a request has to wait.
    dispatcher: Option<mpsc::UnboundedSender<Job>>,
    /// Requests given to the dispatcher whose pending response has not come
    /// back yet. While any has not, later requests go the same way: they
    /// must not reach the wire before it.
    backlog: usize,
    /// Requests on the wire (or failed before it), in the order they were
    /// queued.
    pending: FuturesOrdered<CompletionFuture>,
}

pub(crate) struct Sender {
    config: ProducerConfig,
    metadata: Arc<Metadata>,
    txn: Arc<Mutex<TransactionManager>>,
    acc: Accumulator<Delivery>,
    memory: Arc<BufferMemory>,
    partitioner: StickyPartitioner,
    next_sequence: HashMap<TopicPartition, i32>,
    /// Base sequences of the batches in flight, per partition.
    in_flight_sequences: HashMap<TopicPartition, std::collections::BTreeSet<i32>>,
    /// Batches in flight whose sequence moved down after an earlier batch
    /// of their partition failed without being written: (partition, the
    /// base sequence they were sent with) -> the one to retry with.
    renumbered: HashMap<(TopicPartition, i32), i32>,
    producer: (i64, i16),
    /// One per broker the sender has sent to.
    lanes: Vec<Lane>,
    /// Where the next look for a completion starts: lanes take turns.
    next_lane: usize,
    /// Pending responses from the dispatchers, with their broker.
    queued_tx: mpsc::UnboundedSender<(i32, CompletionFuture)>,
    queued_rx: mpsc::UnboundedReceiver<(i32, CompletionFuture)>,
    flushes: Vec<oneshot::Sender<()>>,
    backoff: Backoff,
    /// Set by [`Command::Hold`]: no batch is sent until it resolves.
    hold: Option<oneshot::Receiver<()>>,
    /// The clocks as read once for the burst of commands being handled
    /// (monotonic, and wall-clock milliseconds for record timestamps):
    /// a burst takes microseconds, and reading both clocks per record was
    /// a visible part of the sender's cost at 100 B.
    burst_clock: Option<(Instant, i64)>,
}

/// Commands handled in one pass of the sender's loop at most.
const COMMAND_BURST: usize = 256;

impl Sender {
    pub(crate) fn new(
        config: ProducerConfig,
        metadata: Arc<Metadata>,
        txn: Arc<Mutex<TransactionManager>>,
        memory: Arc<BufferMemory>,
    ) -> Self {
        let (queued_tx, queued_rx) = mpsc::unbounded_channel();
        let max_in_flight = if config.enable_idempotence {
            config.max_in_flight_per_partition
        } else {
            config.connection.max_in_flight_requests
        };
        Self {
            acc: {
                let acc = Accumulator::new(config.linger, config.batch_size, max_in_flight)
                    .with_memory(memory.clone());
                if config.enable_idempotence {
                    acc.with_first_write_alone()
                } else {
                    acc
                }
            },
            memory,
            backoff: Backoff::new(config.retry_backoff),
            config,
            metadata,
            txn,
            partitioner: StickyPartitioner::new(),
            next_sequence: HashMap::new(),
            in_flight_sequences: HashMap::new(),
            renumbered: HashMap::new(),
            producer: (-1, -1),
            lanes: Vec::new(),
            next_lane: 0,
            queued_tx,
            queued_rx,
            flushes: Vec::new(),
            hold: None,
            burst_clock: None,
        }
    }

    pub(crate) async fn run(mut self, mut commands: CommandReceiver<Command>) {
        let mut open = true;
        loop {
            self.acc.set_memory_exhausted(self.memory.waiting() > 0);
            let held = self.hold.is_some();
            if !held {
                self.dispatch_ready();
            }
            if self.acc.is_empty() {
                self.acc.drain_all(false);
                for f in self.flushes.drain(..) {
                    let _ = f.send(());
                }
                if !open {
                    return;
                }
            }
            // While held, no deadline: nothing may be sent before the hold
            // ends, and its end wakes the loop.
            let deadline = if held { None } else { self.acc.next_deadline() };
            tokio::select! {
                cmd = commands.recv(), if open => match cmd {
                    Some(c) => {
                        self.burst_clock = None;
                        self.handle_command(c);
                        // Take what else is queued before looking for ready
                        // batches: one pass of the loop per burst, not per
                        // record (bounded, so completions and deadlines
                        // are still served between bursts).
                        for _ in 0..COMMAND_BURST {
                            match commands.try_recv() {
                                Some(c) => self.handle_command(c),
                                // Empty, or the handles are gone: the next
                                // `recv` tells.
                                None => break,
                            }
                        }
                    }
                    None => { open = false; self.acc.drain_all(true); }
                },
                Some((node, pending)) = self.queued_rx.recv() => {
                    let lane = self.lane(node);
                    lane.backlog -= 1;
                    lane.pending.push_back(pending);
                }
                done = std::future::poll_fn(|cx| next_completion(&mut self.lanes, &mut self.next_lane, cx)) => {
                    self.handle_completion(done);
                }
                _ = hold_ended(&mut self.hold), if held => self.hold = None,
                _ = sleep_until_opt(deadline) => {}
            }
        }
    }

    fn handle_command(&mut self, cmd: Command) {
        match cmd {
            Command::Send(out) => self.enqueue(out),
            Command::Flush(done) => {
                self.acc.drain_all(true);
                self.flushes.push(done);
            }
            Command::SetProducer(id, epoch) => {
                if id != self.producer.0 {
                    self.acc.new_producer_id();
                }
                self.producer = (id, epoch);
                self.next_sequence.clear();
                self.renumbered.clear();
            }
            Command::FailQueued(err, done) => {
                for b in self.acc.take_queued() {
                    fail_batch(b, &err);
                }
                self.acc.drain_all(true);
                self.flushes.push(done);
            }
            // The loop reads `memory.waiting()` before it looks for ready
            // batches; this only woke it.
            Command::MemoryWait => {}
            Command::Hold(until) => self.hold = Some(until),
        }
    }

    /// Places a record (its partition was checked against `topic` by
    /// `send`) and appends it.
    fn enqueue(&mut self, out: Outgoing) {
        let Outgoing {
            record: r,
            topic,
            size,
            delivery,
        } = out;
        let n = topic.partition_count();
        let partition = match r.partition {
            Some(p) => p,
            None => match (&r.key, self.config.partitioner_ignore_keys) {
                (Some(k), false) => partition_for_key(k, n),
                _ => self.partitioner.partition_with(
                    &r.topic,
                    n,
                    size,
                    self.config.batch_size,
                    || (topic.available_partitions(), rand::random()),
                ),
            },
        };
        let (now, now_ms) = *self
            .burst_clock
            .get_or_insert_with(|| (Instant::now(), now_ms()));
        let timestamp = r.timestamp.unwrap_or(now_ms);
        self.acc.append(
            TopicPartition {
                topic: r.topic,
                partition,
            },
            QueuedRecord {
                timestamp,
                key: r.key,
                value: r.value,
                headers: r.headers,
                delivery,
            },
            size,
            now,
        );
    }

    fn dispatch_ready(&mut self) {
        let now = Instant::now();
        let ready = self.acc.ready(now);
        if ready.is_empty() {
            return;
        }
        let mut by_leader: HashMap<i32, (Arc<BrokerConnection>, Vec<ProducerBatch<Delivery>>)> =
            HashMap::new();
        for tp in ready {
            let leader = if self.metadata.is_stale(&tp.topic) {
                None
            } else {
                self.metadata.leader(&tp.topic, tp.partition)
            };
            let Some(leader) = leader else {
                // Stale or leaderless: refresh in the background, retry the
                // batch after the backoff.
                self.metadata.invalidate(&tp.topic);
                let m = self.metadata.clone();
                let topic = tp.topic.clone();
                tokio::spawn(async move {
                    let _ = m.refresh(&[topic.as_str()]).await;
                });
                if let Some(b) = self.acc.drain(&tp) {
                    if now >= b.created + self.config.delivery_timeout {
                        self.acc.complete(&b.tp);
                        let err = ProducerError::DeliveryTimeout(b.tp.to_string());
                        self.txn.lock().record_error(err.clone());
                        fail_batch(b, &err);
                    } else {
                        let at = now + self.backoff.next_delay();
                        self.acc.reenqueue(b, at);
                    }
                }
                continue;
            };
            let Some(mut batch) = self.acc.drain(&tp) else {
                continue;
            };
            if self.config.enable_idempotence && batch.base_sequence.is_none() {
                let seq = self.next_sequence.entry(tp.clone()).or_insert(0);
                batch.base_sequence = Some(*seq);
                batch.producer = Some(self.producer);
                *seq = seq.wrapping_add(batch.records.len() as i32) & i32::MAX;
            }
            batch.attempts += 1;
            if let Some(seq) = batch.base_sequence {
                self.in_flight_sequences
                    .entry(tp.clone())
                    .or_default()
                    .insert(seq);
            }
            by_leader
                .entry(leader.node_id())
                .or_insert_with(|| (leader.clone(), Vec::new()))
                .1
                .push(batch);
        }
        for (node, (conn, batches)) in by_leader {
            let req = match self.build_request(&batches) {
                Ok(r) => r,
                Err(e) => {
                    for b in batches {
                        self.acc.complete(&b.tp);
                        fail_batch(b, &e);
                    }
                    continue;
                }
            };
            let job = Job {
                req,
                acks: self.config.acks,
                batches,
            };
            self.submit(node, conn, job);
        }
    }

    /// The lane of broker `node`, created on first use.
    fn lane(&mut self, node: i32) -> &mut Lane {
        let i = match self.lanes.iter().position(|l| l.node == node) {
            Some(i) => i,
            None => {
                self.lanes.push(Lane {
                    node,
                    dispatcher: None,
                    backlog: 0,
                    pending: FuturesOrdered::new(),
                });
                self.lanes.len() - 1
            }
        };
        &mut self.lanes[i]
    }

    /// Puts `job` on the wire to broker `node`: here if that need not wait
    /// and nothing of the broker is ahead of it, else through the broker's
    /// dispatcher.
    fn submit(&mut self, node: i32, conn: Arc<BrokerConnection>, job: Job) {
        let queued_tx = self.queued_tx.clone();
        let lane = self.lane(node);
        if lane.backlog == 0
            && job.acks != Acks::None
            && let Some(c) = conn.current()
        {
            match c.try_enqueue(&job.req) {
                Ok(Some(response)) => {
                    let batches = job.batches;
                    lane.pending.push_back(Box::pin(async move {
                        Completion {
                            batches,
                            result: response.await.map(Some),
                        }
                    }));
                    return;
                }
                Ok(None) => {}
                Err(e) => {
                    lane.pending
                        .push_back(Box::pin(std::future::ready(Completion {
                            batches: job.batches,
                            result: Err(e),
                        })));
                    return;
                }
            }
        }
        let tx = match &lane.dispatcher {
            Some(tx) if !tx.is_closed() => tx.clone(),
            _ => {
                let tx = spawn_dispatcher(node, conn, queued_tx);
                lane.dispatcher = Some(tx.clone());
                tx
            }
        };
        match tx.send(job) {
            Ok(()) => lane.backlog += 1,
            Err(mpsc::error::SendError(job)) => {
                lane.dispatcher = None;
                lane.pending
                    .push_back(Box::pin(std::future::ready(Completion {
                        batches: job.batches,
                        result: Err(ClientError::Closed),
                    })));
            }
        }
    }

    fn build_request(
        &self,
        batches: &[ProducerBatch<Delivery>],
    ) -> Result<ProduceRequest, ProducerError> {
        let transactional_id = self
            .txn
            .lock()
            .transactional_id()
            .map(|t| TransactionalId(StrBytes::from_string(t.to_string())));
        let mut topics: Vec<TopicProduceData> = Vec::new();
        for b in batches {
            let (pid, epoch) = b.producer.unwrap_or((-1, -1));
            let spec = BatchSpec {
                producer_id: pid,
                producer_epoch: epoch,
                base_sequence: b.base_sequence.unwrap_or(-1),
                transactional: transactional_id.is_some(),
                compression: self.config.compression,
                ..BatchSpec::default()
            };
            let records: Vec<Placed<'_>> = b
                .records
                .iter()
                .enumerate()
                .map(|(i, r)| Placed(i as i32, r))
                .collect();
            let bytes: Bytes = encode_batch_of(&spec, &records)
                .map_err(|e| ProducerError::Client(ClientError::Protocol(e)))?;
            let topic_id = self
                .metadata
                .topic(&b.tp.topic)
                .map(|t| t.topic_id)
                .unwrap_or_default();
            let pd = PartitionProduceData::default()
                .with_index(b.tp.partition)
                .with_records(Some(bytes));
            match topics.iter_mut().find(|t| t.name.0.as_str() == b.tp.topic) {
                Some(t) => t.partition_data.push(pd),
                None => topics.push(
                    TopicProduceData::default()
                        .with_name(TopicName(StrBytes::from_string(b.tp.topic.clone())))
                        .with_topic_id(topic_id)
                        .with_partition_data(vec![pd]),
                ),
            }
        }
        Ok(ProduceRequest::default()
            .with_transactional_id(transactional_id)
            .with_acks(self.config.acks.wire())
            .with_timeout_ms(self.config.connection.request_timeout.as_millis() as i32)
            .with_topic_data(topics))
    }

    fn handle_completion(&mut self, mut done: Completion) {
        let now = Instant::now();
        // Batches whose sequence moved while they were in flight (see
        // `close_sequence_gap`).
        let mut moved = std::collections::HashSet::new();
        for b in &mut done.batches {
            let Some(seq) = b.base_sequence else { continue };
            if let Some(set) = self.in_flight_sequences.get_mut(&b.tp) {
                set.remove(&seq);
            }
            if self.renumbered.is_empty() {
                continue;
            }
            if let Some(new) = self.renumbered.remove(&(b.tp.clone(), seq)) {
                b.base_sequence = Some(new);
                moved.insert((b.tp.clone(), new));
            }
        }
        match done.result {
            Err(e) => {
                for b in done.batches {
                    self.metadata.invalidate(&b.tp.topic);
                    let err = ProducerError::Client(e.clone());
                    self.retry_or_fail(b, e.is_retriable(), err, now);
                }
            }
            Ok(None) => {
                for b in done.batches {
                    self.acc.complete(&b.tp);
                    succeed_batch(b, -1, -1);
                }
            }
            Ok(Some(resp)) => {
                let mut results: HashMap<(String, i32), PartitionOutcome> = HashMap::new();
                for t in &resp.responses {
                    let name = if t.name.0.is_empty() {
                        self.metadata
                            .cluster()
                            .topic_by_id(t.topic_id)
                            .map(|m| m.name.clone())
                            .unwrap_or_default()
                    } else {
                        t.name.0.to_string()
                    };
                    for p in &t.partition_responses {
                        results.insert(
                            (name.clone(), p.index),
                            (
                                p.error_code,
                                p.base_offset,
                                p.log_append_time_ms,
                                p.error_message.as_ref().map(|m| m.to_string()),
                            ),
                        );
                    }
                }
                for b in done.batches {
                    let key = (b.tp.topic.clone(), b.tp.partition);
                    let outcome = results.remove(&key).unwrap_or((
                        ErrorCode::UNKNOWN_SERVER_ERROR.0,
                        -1,
                        -1,
                        None,
                    ));
                    let moved = !moved.is_empty()
                        && b.base_sequence
                            .is_some_and(|s| moved.contains(&(b.tp.clone(), s)));
                    self.handle_partition(b, outcome, moved, now);
                }
            }
        }
    }

    fn handle_partition(
        &mut self,
        b: ProducerBatch<Delivery>,
        (code, base_offset, log_append_ms, message): PartitionOutcome,
        moved: bool,
        now: Instant,
    ) {
        let code = ErrorCode(code);
        if code.is_ok() || code == ErrorCode::DUPLICATE_SEQUENCE_NUMBER {
            self.backoff.reset();
            self.acc.complete(&b.tp);
            self.acc.acknowledged(&b.tp);
            succeed_batch(b, base_offset, log_append_ms);
            return;
        }
        let err = ClientError::Broker {
            api: "Produce",
            code,
            message,
        };
        if err.invalidates_metadata() {
            self.metadata.invalidate(&b.tp.topic);
        }
        let retriable = if code == ErrorCode::OUT_OF_ORDER_SEQUENCE_NUMBER {
            // `moved`: sent before an earlier batch failed unwritten, so the
            // broker waits for the sequence that batch had; it is retried
            // under its new one. Otherwise:
            moved ||
            // Safe to retry only when a batch with an earlier sequence of the
            // same partition is itself still in flight or queued for retry:
            // the broker refused this one because that one is missing.
            b.base_sequence.is_some_and(|s| {
                self.acc.has_earlier_retry(&b.tp, s)
                    || self
                        .in_flight_sequences
                        .get(&b.tp)
                        .is_some_and(|set| set.range(..s).next().is_some())
            })
        } else {
            err.is_retriable()
        };
        self.retry_or_fail(b, retriable, ProducerError::Client(err), now);
    }

    fn retry_or_fail(
        &mut self,
        b: ProducerBatch<Delivery>,
        retriable: bool,
        err: ProducerError,
        now: Instant,
    ) {
        let expired = now >= b.created + self.config.delivery_timeout;
        if retriable && !expired && b.attempts <= self.config.retries {
            let at = now + self.backoff.next_delay();
            self.acc.reenqueue(b, at);
            return;
        }
        self.acc.complete(&b.tp);
        let err = if retriable && expired {
            ProducerError::DeliveryTimeout(b.tp.to_string())
        } else {
            err
        };
        if let Some(s) = b.base_sequence
            && b.producer == Some(self.producer)
            && matches!(&err, ProducerError::Client(ClientError::Broker { code, .. })
                if *code != ErrorCode::OUT_OF_ORDER_SEQUENCE_NUMBER)
        {
            self.close_sequence_gap(&b.tp, s, b.records.len() as i32);
        }
        self.txn.lock().record_error(err.clone());
        fail_batch(b, &err);
    }
}

impl Sender {
    /// The batch of `tp` at base sequence `failed` (`count` records) failed
    /// with an answer from the broker, so it was not written: the broker
    /// still expects `failed`. Every later batch of the partition moves
    /// down by `count` (as Java's producer adjusts its sequences after a
    /// failed batch), so that one refused record (MESSAGE_TOO_LARGE,
    /// INVALID_RECORD, ...) does not break the partition's chain for good:
    /// the queued ones now, the ones in flight when the broker refuses them
    /// with OUT_OF_ORDER_SEQUENCE_NUMBER.
    fn close_sequence_gap(&mut self, tp: &TopicPartition, failed: i32, count: i32) {
        if let Some(next) = self.next_sequence.get_mut(tp)
            && *next > failed
        {
            *next -= count;
        }
        self.acc.lower_sequences(tp, failed, count);
        for &sent in self.in_flight_sequences.get(tp).into_iter().flatten() {
            let key = (tp.clone(), sent);
            let now = self.renumbered.get(&key).copied().unwrap_or(sent);
            if now > failed {
                self.renumbered.insert(key, now - count);
            }
        }
    }
}

/// Starts the dispatcher of broker `node`: it takes the jobs that could not
/// be queued on the connection at once, one after the other, and sends each
/// one's pending response back to the sender, in job order.
fn spawn_dispatcher(
    node: i32,
    conn: Arc<BrokerConnection>,
    queued: mpsc::UnboundedSender<(i32, CompletionFuture)>,
) -> mpsc::UnboundedSender<Job> {
    let (tx, mut rx) = mpsc::unbounded_channel::<Job>();
    tokio::spawn(async move {
        while let Some(job) = rx.recv().await {
            let pending = enqueue_job(&conn, job).await;
            if queued.send((node, pending)).is_err() {
                break;
            }
        }
    });
    tx
}

/// The next completion of any lane, in request order within each lane; the
/// lanes take turns being looked at first.
fn next_completion(
    lanes: &mut [Lane],
    next: &mut usize,
    cx: &mut std::task::Context<'_>,
) -> std::task::Poll<Completion> {
    let n = lanes.len();
    for k in 0..n {
        let i = (*next + k) % n;
        if let std::task::Poll::Ready(Some(done)) = lanes[i].pending.poll_next_unpin(cx) {
            *next = (i + 1) % n;
            return std::task::Poll::Ready(done);
        }
    }
    std::task::Poll::Pending
}

/// Hands a job's request to the broker's connection and returns the future
/// of its completion.
///
/// The request is queued for the writer (in-flight slot, correlation id,
/// frame) before this returns, and the dispatcher awaits it before taking the
/// next job: the Produce requests of a broker hit the wire in job order, so
/// the batches of a partition reach the leader in sequence order. Only the
/// responses are awaited concurrently. (Polling whole `send` futures
/// concurrently let a later request grab a freed in-flight slot first, and
/// the broker refused the earlier batch with OUT_OF_ORDER_SEQUENCE_NUMBER.)
async fn enqueue_job(conn: &BrokerConnection, job: Job) -> CompletionFuture {
    let Job { req, acks, batches } = job;
    let failed = |batches, e| -> CompletionFuture {
        Box::pin(std::future::ready(Completion {
            batches,
            result: Err(e),
        }))
    };
    let c = match conn.connection().await {
        Ok(c) => c,
        Err(e) => return failed(batches, e),
    };
    if acks == Acks::None {
        match c.enqueue_no_response(&req).await {
            Ok(written) => Box::pin(async move {
                Completion {
                    batches,
                    result: written.await.map(|()| None),
                }
            }),
            Err(e) => failed(batches, e),
        }
    } else {
        match c.enqueue(&req).await {
            Ok(response) => Box::pin(async move {
                Completion {
                    batches,
                    result: response.await.map(Some),
                }
            }),
            Err(e) => failed(batches, e),
        }
    }
}

/// The batch's bytes go back to `buffer.memory` before any delivery future
/// resolves: whoever sees a record delivered also sees its room freed.
fn succeed_batch(b: ProducerBatch<Delivery>, base_offset: i64, log_append_ms: i64) {
    let ProducerBatch {
        tp,
        records,
        memory,
        ..
    } = b;
    drop(memory);
    // One shared name per batch, not a copy per record.
    let topic: Arc<str> = tp.topic.into();
    for (i, r) in records.into_iter().enumerate() {
        let _ = r.delivery.send(Ok(RecordMetadata {
            topic: topic.clone(),
            partition: tp.partition,
            offset: if base_offset >= 0 {
                base_offset + i as i64
            } else {
                -1
            },
            timestamp: if log_append_ms >= 0 {
                log_append_ms
            } else {
                r.timestamp
            },
        }));
    }
}

/// Memory first, as in [`succeed_batch`].
fn fail_batch(b: ProducerBatch<Delivery>, err: &ProducerError) {
    let ProducerBatch {
        records, memory, ..
    } = b;
    drop(memory);
    for r in records {
        let _ = r.delivery.send(Err(Box::new(err.clone())));
    }
}

/// A queued record at its offset delta in the batch being encoded: the
/// encoder reads it in place.
struct Placed<'a>(i32, &'a QueuedRecord<Delivery>);

impl RecordView for Placed<'_> {
    fn offset_delta(&self) -> i32 {
        self.0
    }
    fn timestamp(&self) -> i64 {
        self.1.timestamp
    }
    fn key(&self) -> Option<&[u8]> {
        self.1.key.as_deref()
    }
    fn value(&self) -> Option<&[u8]> {
        self.1.value.as_deref()
    }
    fn headers(&self) -> &[RecordHeader] {
        &self.1.headers
    }
}

/// Resolves when the hold's sender answers or is dropped.
async fn hold_ended(hold: &mut Option<oneshot::Receiver<()>>) {
    if let Some(h) = hold {
        let _ = h.await;
    }
}

async fn sleep_until_opt(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => futures::future::pending().await,
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
