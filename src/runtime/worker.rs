//! One worker: a share group member (explicit acknowledgement, D12) with
//! its own producer, running the exactly-once or the at-least-once loop.
//! See the module docs of [`runtime`](super) for the loops.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures::{FutureExt, StreamExt, stream::FuturesUnordered};
use tokio::sync::watch;
use tokio::time::Instant;

use super::RuntimeError;
use super::config::{LedgerCheck, ProcessingGuarantee, RuntimeConfig};
use super::grid::CommitGrid;
use super::metrics::{RuntimeMetrics, WorkerTime};
use crate::client::producer::{DeliveryFuture, Producer, ProducerError, ProducerRecord};
use crate::client::share_consumer::{
    ShareConsumer, ShareRecord, ShareRecords, TransactionAcknowledgements,
    TransactionAcknowledgementsId, TransactionOutcome,
};
use crate::eos::{AcknowledgeType, AcknowledgementBatch, ShareGroupMetadata, TopicIdPartition};
use crate::failpoints;
use crate::protocol::ErrorCode;
use crate::topology::{CompiledTopology, Outcome, OutputRecord, SourceRecord};

/// How long a poll waits when no transaction is open (bounds how late a
/// shutdown request is noticed).
const IDLE_POLL: Duration = Duration::from_millis(100);

/// How long the poll that overlaps a commit may wait for records: short,
/// so that an idle source does not hold the loop long after the commit.
const OVERLAP_POLL: Duration = Duration::from_millis(5);

/// The source records of the open transaction (or at-least-once commit
/// window) and what they produced.
#[derive(Debug)]
pub(crate) struct OpenBatch {
    /// When the batch must end (its commit start).
    deadline: Instant,
    records: u64,
    out: u64,
    rejected: u64,
    dead_lettered: u64,
    /// The earliest acquisition among its records (the ledger's
    /// arbitration must come within `exactly.once.ledger.max.batch.age.ms`
    /// of it).
    oldest_acquired: Option<Instant>,
}

impl OpenBatch {
    /// A batch whose commit starts at `deadline`.
    fn new(deadline: Instant) -> Self {
        Self {
            deadline,
            records: 0,
            out: 0,
            rejected: 0,
            dead_lettered: 0,
            oldest_acquired: None,
        }
    }

    /// Whether the batch must end now: at its deadline, or once it holds
    /// `max.records.per.transaction`.
    pub(crate) fn due(&self, now: Instant, max_records: usize) -> bool {
        self.records >= max_records as u64 || now >= self.deadline
    }

    /// How long the next poll may wait without overrunning the deadline.
    fn poll_timeout(&self, now: Instant) -> Duration {
        self.deadline
            .saturating_duration_since(now)
            .max(Duration::from_millis(1))
    }
}

/// What went wrong inside one transaction.
enum TxnFailure {
    /// Abort, the records come back, carry on.
    Abortable(ProducerError),
    /// The ledger's arbitration came later than
    /// `exactly.once.ledger.max.batch.age.ms` after the earliest
    /// acquisition of the transaction's records: abort; the records come
    /// back and are released.
    TooOld(Duration),
    /// The ledger's arbitration found an earlier committed intent for one
    /// of the transaction's records: abort; the records come back and the
    /// check ACCEPTs those already produced.
    Lost(String),
    /// Stop the application.
    Fatal(RuntimeError),
}

impl TxnFailure {
    /// A producer error of worker `index`'s transaction: fatal ones stop
    /// the application, the rest abort the transaction.
    fn from_producer(index: usize, e: ProducerError) -> Self {
        if e.is_fatal() {
            TxnFailure::Fatal(RuntimeError::Producer {
                worker: index,
                source: e,
            })
        } else {
            TxnFailure::Abortable(e)
        }
    }
}

pub(crate) struct Worker {
    pub index: usize,
    pub consumer: ShareConsumer,
    pub producer: Producer,
    pub topology: CompiledTopology,
    pub metrics: Arc<RuntimeMetrics>,
    pub config: Arc<RuntimeConfig>,
    pub shutdown: watch::Receiver<bool>,
    /// The acknowledgements staged in the open transaction.
    pub txn_id: Option<TransactionAcknowledgementsId>,
    /// When transactions start their commits (shared by the workers).
    pub grid: Arc<CommitGrid>,
    /// How the worker's clients connect (to re-create its producer).
    pub connection: crate::client::ConnectionConfig,
    /// This process's identity (its transactional ids, D15).
    pub instance: Arc<super::Instance>,
    /// When this worker's producer was last fenced (recent ones only).
    pub fences: std::collections::VecDeque<Instant>,
    /// What happens to a record that fails on its last delivery.
    pub last_delivery: Arc<LastDelivery>,
    /// The intent ledger, when exactly_once goes through it
    /// (`exactly.once.mechanism=ledger`).
    pub ledger: Option<Arc<super::ledger::Ledger>>,
    /// The acknowledgements of the transaction being committed through the
    /// ledger: sent as ordinary acknowledgements once it committed.
    pub ledger_acks: Option<TransactionAcknowledgements>,
    /// KIP-1289: the broker returns the staged records of an aborted
    /// transaction to this member (`acquired`, D25), so the consumer hands
    /// them back; otherwise they become AVAILABLE and are fetched again.
    pub aborted_records_return: bool,
}

/// The delivery-limit policy (docs/DESIGN.md D17): a record whose
/// processing fails (`Outcome::Fail`) on its last delivery is dead-lettered
/// or rejected rather than stopping the application, since after the abort
/// and the restart the broker would archive it without anyone seeing it.
#[derive(Debug)]
pub(crate) struct LastDelivery {
    /// The share group's delivery count limit.
    pub limit: u16,
    /// `delivery.limit.dead.letter.topic`.
    pub dead_letter_topic: Option<String>,
    pub metrics: Arc<RuntimeMetrics>,
}

impl LastDelivery {
    fn is_last(&self, r: &SourceRecord) -> bool {
        r.delivery_count >= 0 && r.delivery_count as u16 >= self.limit
    }

    /// The outcome that replaces `Fail` for `source` on its last delivery.
    fn apply(
        &self,
        worker: usize,
        source: &SourceRecord,
        error: crate::topology::ProcessingError,
    ) -> crate::topology::ProcessResult {
        use crate::topology::dead_letter_record;
        use crate::topology::error::{DLQ_REASON, DLQ_REASON_DELIVERY_LIMIT};
        self.metrics
            .records_failed_at_delivery_limit
            .fetch_add(1, Ordering::Relaxed);
        tracing::warn!(
            worker,
            topic = %source.topic,
            partition = source.partition,
            offset = source.offset,
            delivery_count = source.delivery_count,
            dead_letter_topic = ?self.dead_letter_topic,
            error = %error,
            "processing failed on the record's last delivery: {} instead of stopping (the broker \
             would archive it)",
            if self.dead_letter_topic.is_some() {
                "dead-lettered"
            } else {
                "rejected (set delivery.limit.dead.letter.topic to keep such records)"
            }
        );
        match &self.dead_letter_topic {
            Some(topic) => {
                let mut dlq = dead_letter_record(source, topic, &error);
                dlq.headers.push(crate::protocol::records::RecordHeader {
                    key: DLQ_REASON.to_string(),
                    value: Some(bytes::Bytes::from_static(
                        DLQ_REASON_DELIVERY_LIMIT.as_bytes(),
                    )),
                });
                crate::topology::ProcessResult {
                    outcome: Outcome::DeadLetter {
                        topic: topic.clone(),
                        error,
                    },
                    records: vec![dlq],
                }
            }
            None => crate::topology::ProcessResult {
                outcome: Outcome::Reject { error },
                records: Vec::new(),
            },
        }
    }
}

/// A worker whose producer is fenced more often than this within
/// [`FENCE_WINDOW`] stops: something else keeps taking its transactional id
/// (two running processes with one `application.instance.id`).
const MAX_FENCES: usize = 3;
const FENCE_WINDOW: Duration = Duration::from_secs(60);

/// Whether `e` means that this producer's epoch is over: fenced by a new
/// holder of its transactional id, or aborted by the transaction timeout
/// (the coordinator bumps the epoch in both cases).
pub(crate) fn is_fenced(e: &ProducerError) -> bool {
    matches!(
        e.code(),
        Some(ErrorCode::PRODUCER_FENCED) | Some(ErrorCode::INVALID_PRODUCER_EPOCH)
    )
}

/// Why a worker replaces its producer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Renewal {
    /// Fenced (a new holder of the id, the transaction timeout, a peer
    /// resolving an intent).
    Fenced,
    /// The end of the producer's transaction is unknown to it: EndTxn got
    /// no definitive answer, or the coordinator refused EndTxn as
    /// INVALID_TXN_STATE (its state of the transactional id has moved past
    /// this transaction: an abort after a commit whose answer was lost).
    /// A new producer settles it (its InitProducerId aborts the
    /// transaction if it is still open); the broker (KIP-1289) or the
    /// ledger's check decides the records' fate, as after a fence.
    OutcomeUnknown,
}

/// Whether (and why) an error of the producer means: replace it and go on.
fn renewal(e: &ProducerError) -> Option<Renewal> {
    if is_fenced(e) {
        Some(Renewal::Fenced)
    } else if e.is_outcome_unknown()
        || (e.api() == Some("EndTxn") && e.code() == Some(ErrorCode::INVALID_TXN_STATE))
    {
        Some(Renewal::OutcomeUnknown)
    } else {
        None
    }
}

/// When a poll batch's first record arrived, for the timing of its
/// transaction: the earliest acquisition of a record fetched ahead, before
/// this poll began (by the consumer's prefetch, which does not wait at the
/// broker, typically while the previous transaction committed), else
/// `polled_at`. Timing such a record's transaction from the poll would make
/// it wait the commit it sat through on top of a whole interval. A record
/// acquired by the poll's own fetch counts from `polled_at`: its
/// `acquired_at` is when that fetch was sent, and a long poll may have
/// waited at the broker long before the record came.
pub(crate) fn first_arrival(
    records: &ShareRecords,
    poll_started: Instant,
    polled_at: Instant,
) -> Instant {
    records
        .iter()
        .map(|r| r.acquired_at)
        .filter(|a| *a < poll_started)
        .min()
        .map_or(polled_at, |a| a.min(polled_at))
}

pub(crate) fn to_source(r: &ShareRecord) -> SourceRecord {
    SourceRecord {
        topic: r.topic.clone(),
        partition: r.partition,
        offset: r.offset,
        delivery_count: r.delivery_count,
        key: r.key.clone(),
        value: r.value.clone(),
        headers: r.headers.clone(),
        timestamp: r.timestamp,
    }
}

pub(crate) fn to_producer_record(o: OutputRecord) -> ProducerRecord {
    ProducerRecord {
        topic: o.topic,
        partition: o.partition,
        key: o.key,
        value: o.value,
        headers: o.headers,
        timestamp: o.timestamp,
    }
}

impl Worker {
    pub(crate) async fn run(mut self) -> Result<(), RuntimeError> {
        let result = loop {
            let r = match self.config.processing_guarantee {
                ProcessingGuarantee::ExactlyOnce => self.run_exactly_once().await,
                ProcessingGuarantee::AtLeastOnce => self.run_at_least_once().await,
            };
            match r {
                Err(RuntimeError::Producer { worker, source })
                    if self.config.processing_guarantee == ProcessingGuarantee::ExactlyOnce
                        && renewal(&source).is_some()
                        && !self.stopping() =>
                {
                    // A zombie that came back (paused past its transaction
                    // timeout, or fenced): the coordinator already aborted
                    // its transaction. Or a transaction whose end is
                    // unknown. Go back to work with a new epoch.
                    if let Err(e) = self.recover_producer(worker, source).await {
                        break Err(e);
                    }
                }
                r => break r,
            }
        };
        match result {
            Err(RuntimeError::WorkerCrashed { .. }) => {
                // Injected crash: drop everything without a goodbye, like a
                // killed process.
                result
            }
            r => {
                let t = self.config.shutdown_timeout;
                match tokio::time::timeout(t, self.consumer.close(t)).await {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => {
                        tracing::warn!(worker = self.index, error = %e, "leaving the share group failed")
                    }
                    Err(_) => {
                        tracing::warn!(worker = self.index, "leaving the share group timed out")
                    }
                }
                self.producer.clone().close().await;
                tracing::info!(worker = self.index, "worker stopped");
                r
            }
        }
    }

    /// Replaces a fenced producer, or one whose transaction's end is
    /// unknown, by a new one with the same transactional id
    /// (InitProducerId: a new epoch; a transaction still open is aborted),
    /// after forgetting the records of that transaction (the coordinator's
    /// abort released them, D6; a commit acknowledged them). Refused, with
    /// `cause`, when the producer was fenced more than [`MAX_FENCES`] times
    /// within [`FENCE_WINDOW`].
    async fn recover_producer(
        &mut self,
        worker: usize,
        cause: ProducerError,
    ) -> Result<(), RuntimeError> {
        let now = Instant::now();
        let why = renewal(&cause).unwrap_or(Renewal::Fenced);
        let by_peer = match &self.ledger {
            Some(l) if why == Renewal::Fenced => l.fenced_by_peer(&self.transactional_id()).await,
            _ => false,
        };
        if why == Renewal::OutcomeUnknown {
            // Not a takeover of the transactional id: not counted.
            self.metrics
                .transactions_outcome_unknown
                .fetch_add(1, Ordering::Relaxed);
        } else if by_peer {
            // A worker of this application fenced us to resolve our open
            // intent (our locks had expired): not a second process with
            // our identity.
            self.metrics
                .ledger
                .fenced_by_peer
                .fetch_add(1, Ordering::Relaxed);
        } else {
            self.fences.push_back(now);
        }
        while self
            .fences
            .front()
            .is_some_and(|t| now.duration_since(*t) > FENCE_WINDOW)
        {
            self.fences.pop_front();
        }
        if self.fences.len() > MAX_FENCES {
            tracing::error!(
                worker = self.index,
                fences = self.fences.len(),
                window_s = FENCE_WINDOW.as_secs(),
                "this worker's transactional id keeps being taken over: another running \
                 process has the same application.instance.id"
            );
            return Err(RuntimeError::Producer {
                worker,
                source: cause,
            });
        }
        match why {
            Renewal::Fenced => tracing::warn!(
                worker = self.index,
                error = %cause,
                "producer fenced or its transaction timed out (this process was paused or cut \
                 off?); the coordinator aborted the transaction; re-initializing the producer and \
                 going back to work"
            ),
            Renewal::OutcomeUnknown => tracing::warn!(
                worker = self.index,
                error = %cause,
                "the transaction's end is unknown (EndTxn went unanswered: this process was \
                 paused or cut off?); re-initializing the producer, which aborts the transaction \
                 if it is still open; the broker (KIP-1289) or the ledger's check decides which \
                 of its records come back, none is produced twice"
            ),
        }
        // Under KIP-1289 the coordinator's abort released the records;
        // through the ledger this member still holds them (unless their
        // locks expired), so they are processed again.
        self.hand_back_as(if self.ledger.is_some() {
            TransactionOutcome::Aborted
        } else {
            TransactionOutcome::Abandoned
        });
        let old = self.producer.clone();
        let _ = tokio::time::timeout(self.config.shutdown_timeout, old.close()).await;
        self.producer =
            super::start_producer(&self.config, &self.connection, &self.instance, self.index)
                .await?;
        self.metrics
            .producer_recoveries
            .fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// When the commit of a transaction whose first record arrived at
    /// `first` starts (see [`CommitGrid`]).
    fn deadline(&self, first: Instant) -> Instant {
        self.grid.commit_start(first)
    }

    /// This worker's transactional id.
    fn transactional_id(&self) -> String {
        self.instance
            .transactional_id(&self.config.application_id, self.index)
    }

    fn stopping(&self) -> bool {
        *self.shutdown.borrow()
    }

    async fn poll(&mut self, timeout: Duration) -> Result<ShareRecords, RuntimeError> {
        let t0 = Instant::now();
        let records = poll_counted(&mut self.consumer, &self.metrics, self.index, timeout).await?;
        let n = records.len() as u64;
        let wt = &self.metrics.worker_time;
        WorkerTime::add(&wt.poll_ns, t0.elapsed());
        if n == 0 {
            wt.empty_polls.fetch_add(1, Ordering::Relaxed);
        } else {
            wt.polls.fetch_add(1, Ordering::Relaxed);
        }
        self.metrics.records_in.fetch_add(n, Ordering::Relaxed);
        self.metrics
            .records_in_flight
            .fetch_add(n as i64, Ordering::Relaxed);
        Ok(records)
    }

    /// Processes a poll batch; `Err` carries the first `Outcome::Fail`.
    fn process(
        &self,
        records: &ShareRecords,
    ) -> impl Future<Output = Result<Vec<crate::topology::ProcessResult>, RuntimeError>> + Send + 'static
    {
        let sources: Vec<SourceRecord> = records.iter().map(to_source).collect();
        let topology = self.topology.clone();
        let index = self.index;
        let coords: Vec<(String, i32, i64)> = records
            .iter()
            .map(|r| (r.topic.clone(), r.partition, r.offset))
            .collect();
        let last = self.last_delivery.clone();
        async move { process_batch(index, topology, sources, coords, last).await }
    }
}

impl Worker {
    /// Processes `records` (polled at `polled_at`), renewing their locks
    /// should it take long (see [`while_renewing`]).
    async fn process_renewing(
        &mut self,
        records: &ShareRecords,
        polled_at: Instant,
    ) -> Result<Vec<crate::topology::ProcessResult>, RuntimeError> {
        let processing = self.process(records);
        while_renewing(
            &mut self.consumer,
            &self.metrics,
            self.index,
            records,
            polled_at,
            processing,
        )
        .await
    }
}

/// A poll batch, the result of processing it, and when its first record
/// arrived ([`first_arrival`]: a transaction's interval runs from it).
pub(crate) type Polled = (
    ShareRecords,
    Result<Vec<crate::topology::ProcessResult>, RuntimeError>,
    Instant,
);

/// `consumer.poll`, counting in `metrics` the records it left out because
/// this worker holds them in a transaction in flight.
async fn poll_counted(
    consumer: &mut ShareConsumer,
    metrics: &RuntimeMetrics,
    index: usize,
    timeout: Duration,
) -> Result<ShareRecords, RuntimeError> {
    let held = consumer.metrics().records_redelivered_while_held_total();
    let records = consumer
        .poll(timeout)
        .await
        .map_err(|source| RuntimeError::Consumer {
            worker: index,
            source,
        })?;
    let dropped = consumer.metrics().records_redelivered_while_held_total() - held;
    if dropped > 0 {
        metrics
            .records_redelivered_while_held
            .fetch_add(dropped, Ordering::Relaxed);
    }
    Ok(records)
}

/// Polls (briefly) and processes what came, without touching the producer:
/// the part of the loop that may run while a transaction commits.
async fn poll_and_process(
    consumer: &mut ShareConsumer,
    metrics: &RuntimeMetrics,
    topology: CompiledTopology,
    index: usize,
    last: Arc<LastDelivery>,
) -> Result<Polled, RuntimeError> {
    let poll_started = Instant::now();
    let records = poll_counted(consumer, metrics, index, OVERLAP_POLL).await?;
    let polled_at = Instant::now();
    let arrived = first_arrival(&records, poll_started, polled_at);
    let n = records.len() as u64;
    metrics.records_in.fetch_add(n, Ordering::Relaxed);
    metrics
        .records_in_flight
        .fetch_add(n as i64, Ordering::Relaxed);
    if records.is_empty() {
        return Ok((records, Ok(Vec::new()), arrived));
    }
    let sources: Vec<SourceRecord> = records.iter().map(to_source).collect();
    let coords: Vec<(String, i32, i64)> = records
        .iter()
        .map(|r| (r.topic.clone(), r.partition, r.offset))
        .collect();
    let processing = process_batch(index, topology, sources, coords, last);
    let processed = while_renewing(consumer, metrics, index, &records, polled_at, processing).await;
    Ok((records, processed, arrived))
}

/// Drives `processing` (of `records`, polled at `polled_at`) to its end.
/// Should it outlast half the records' acquisition lock, renews their locks
/// (KIP-1222) every half lock, so that the broker does not hand them to
/// another member while this one still works on them. A refused renewal
/// (a group with `share.renew.acknowledge.enable=false`, a broker without
/// ShareAcknowledge v2) is logged and renewing stops for the batch; the
/// records then come back after their lock, as without renewal.
async fn while_renewing<T>(
    consumer: &mut ShareConsumer,
    metrics: &RuntimeMetrics,
    index: usize,
    records: &ShareRecords,
    polled_at: Instant,
    processing: impl Future<Output = T>,
) -> T {
    let every = match consumer.acquisition_lock_timeout_ms() {
        Some(ms) if ms >= 2 => Duration::from_millis(ms as u64 / 2),
        _ => return processing.await,
    };
    tokio::pin!(processing);
    let mut next = polled_at + every;
    let mut renewing = true;
    loop {
        tokio::select! {
            out = &mut processing => return out,
            _ = tokio::time::sleep_until(next), if renewing => {
                next += every;
                for r in records.iter() {
                    // Only a record still waiting can be renewed; the
                    // others need nothing.
                    let _ = consumer.renew(r);
                }
                match consumer.commit_sync(every).await {
                    Ok(results) => match results.values().find_map(|r| r.as_ref().err()) {
                        None => {
                            metrics
                                .lock_renewals
                                .fetch_add(records.len() as u64, Ordering::Relaxed);
                        }
                        Some(e) => {
                            tracing::warn!(worker = index, error = %e, "renewing the acquisition locks of records still in processing failed; they may be delivered to another member when their locks expire");
                            renewing = false;
                        }
                    },
                    Err(e) => {
                        tracing::warn!(worker = index, error = %e, "renewing the acquisition locks of records still in processing failed; they may be delivered to another member when their locks expire");
                        renewing = false;
                    }
                }
            }
        }
    }
}

async fn process_batch(
    index: usize,
    topology: CompiledTopology,
    sources: Vec<SourceRecord>,
    coords: Vec<(String, i32, i64)>,
    last: Arc<LastDelivery>,
) -> Result<Vec<crate::topology::ProcessResult>, RuntimeError> {
    // The records on their last delivery, kept for the delivery-limit
    // policy (rare: usually none).
    let last_ones: Vec<(usize, SourceRecord)> = sources
        .iter()
        .enumerate()
        .filter(|(_, r)| last.is_last(r))
        .map(|(i, r)| (i, r.clone()))
        .collect();
    let mut results = topology.process_batch(sources).await;
    for (i, ((topic, partition, offset), res)) in coords.into_iter().zip(&mut results).enumerate() {
        if let Outcome::Fail { error } = &res.outcome {
            if let Some((_, src)) = last_ones.iter().find(|(j, _)| *j == i) {
                *res = last.apply(index, src, error.clone());
                continue;
            }
            return Err(RuntimeError::Processing {
                worker: index,
                topic,
                partition,
                offset,
                error: error.clone(),
            });
        }
    }
    Ok(results)
}

impl Worker {
    fn count_outcome(b: &mut OpenBatch, outcome: &Outcome, outputs: usize) {
        b.records += 1;
        b.out += outputs as u64;
        match outcome {
            Outcome::Reject { .. } => b.rejected += 1,
            Outcome::DeadLetter { .. } => b.dead_lettered += 1,
            _ => {}
        }
    }

    fn on_committed(&self, b: &OpenBatch, latency: Duration) {
        let m = &self.metrics;
        m.records_out.fetch_add(b.out, Ordering::Relaxed);
        m.records_rejected.fetch_add(b.rejected, Ordering::Relaxed);
        m.records_dead_lettered
            .fetch_add(b.dead_lettered, Ordering::Relaxed);
        m.records_committed.fetch_add(b.records, Ordering::Relaxed);
        m.transactions_committed.fetch_add(1, Ordering::Relaxed);
        m.records_in_flight
            .fetch_sub(b.records as i64, Ordering::Relaxed);
        m.record_commit(latency, b.records);
    }

    fn on_aborted(&self, records: u64) {
        self.metrics
            .transactions_aborted
            .fetch_add(1, Ordering::Relaxed);
        self.metrics
            .records_in_flight
            .fetch_sub(records as i64, Ordering::Relaxed);
    }

    fn fatal_producer(&self, source: ProducerError) -> RuntimeError {
        RuntimeError::Producer {
            worker: self.index,
            source,
        }
    }

    // ---------------------------------------------------------------- EOS

    async fn run_exactly_once(&mut self) -> Result<(), RuntimeError> {
        let max = self.config.max_records_per_transaction;
        let mut open: Option<OpenBatch> = None;
        // Records polled and processed while the previous transaction
        // committed; they go into the next one.
        let mut carried: Option<Polled> = None;
        loop {
            if self.stopping() && carried.is_none() {
                // Finish the transaction in flight, then leave.
                if let Some(b) = open.take() {
                    self.end_transaction(b, false).await?;
                }
                return Ok(());
            }
            let (records, processed, arrived) = match carried.take() {
                Some(p) => p,
                None => {
                    let timeout = open
                        .as_ref()
                        .map_or(IDLE_POLL, |b| b.poll_timeout(Instant::now()));
                    self.poll_checked(timeout).await?
                }
            };
            if !records.is_empty() {
                if open.is_none() {
                    self.producer
                        .begin_transaction()
                        .map_err(|e| self.fatal_producer(e))?;
                    // The interval runs from the first record's arrival
                    // (for records fetched ahead, or a batch polled during
                    // the previous commit, that is before this transaction
                    // began; see `first_arrival`).
                    open = Some(OpenBatch::new(self.deadline(arrived)));
                }
                let b = open.as_mut().expect("opened above");
                if let Some(t) = records.iter().map(|r| r.acquired_at).min() {
                    b.oldest_acquired = Some(b.oldest_acquired.map_or(t, |o| o.min(t)));
                }
                match processed {
                    Ok(results) => {
                        let t0 = Instant::now();
                        let staged = self.stage_batch(&records, results, b).await;
                        WorkerTime::add(&self.metrics.worker_time.stage_ns, t0.elapsed());
                        if let Err(injected) = staged {
                            tracing::warn!(worker = self.index, error = %injected, "aborting the transaction");
                            let b = open.take().expect("open");
                            self.abort(b).await?;
                            continue;
                        }
                    }
                    Err(e) => {
                        // Stop: nothing of this transaction is produced or
                        // acknowledged; the records will be delivered again.
                        let mut b = open.take().expect("open");
                        b.records += records.len() as u64;
                        if let Err(abort_err) = self.abort(b).await {
                            tracing::error!(worker = self.index, error = %abort_err, "abort failed");
                        }
                        return Err(e);
                    }
                }
            }
            if open.as_ref().is_some_and(|b| b.due(Instant::now(), max)) {
                let b = open.take().expect("checked");
                // Through the ledger too (D37): the overlapped batch is
                // checked against the index before it is processed.
                let overlap = self.config.poll_during_commit && !self.stopping();
                carried = self.end_transaction(b, overlap).await?;
            }
        }
    }

    /// Polls (up to `timeout`), checks what came against the ledger (when
    /// exactly-once goes through it) and processes the records to process.
    async fn poll_checked(&mut self, timeout: Duration) -> Result<Polled, RuntimeError> {
        let poll_started = Instant::now();
        let mut records = self.poll(timeout).await?;
        let polled_at = Instant::now();
        let arrived = first_arrival(&records, poll_started, polled_at);
        if self.ledger.is_some() && !records.is_empty() {
            records = self.ledger_check(records).await?;
            WorkerTime::add(
                &self.metrics.worker_time.ledger_check_ns,
                polled_at.elapsed(),
            );
        }
        let processed = if records.is_empty() {
            Ok(Vec::new())
        } else {
            let t0 = Instant::now();
            let p = self.process_renewing(&records, polled_at).await;
            WorkerTime::add(&self.metrics.worker_time.process_ns, t0.elapsed());
            p
        };
        Ok((records, processed, arrived))
    }

    /// Sends the outputs of a processed poll batch and takes its records
    /// into the transaction. An injected failure (`runtime.abort_mid_batch`)
    /// stops sending halfway and reports an abortable error.
    async fn stage_batch(
        &mut self,
        records: &ShareRecords,
        results: Vec<crate::topology::ProcessResult>,
        b: &mut OpenBatch,
    ) -> Result<(), ProducerError> {
        let inject = failpoints::hit("runtime.abort_mid_batch");
        let half = records.len() / 2;
        for (i, (rec, res)) in records.iter().zip(results).enumerate() {
            let ty = res.outcome.acknowledge_type().expect("Fail handled before");
            Self::count_outcome(b, &res.outcome, res.records.len());
            if !(inject && i >= half) {
                for out in res.records {
                    // Errors surface at commit_transaction (a failure in
                    // `send` itself, e.g. no room in buffer.memory within
                    // max.block.ms, makes the transaction abortable too).
                    drop(self.producer.send(to_producer_record(out)).await);
                }
            }
            if let Err(e) = self.consumer.acknowledge_in_transaction(rec, ty) {
                // A record of this poll can always be taken; anything else
                // is a bug worth stopping for, but the transaction is
                // simply aborted here and the record comes back.
                return Err(ProducerError::InvalidTxnState(format!(
                    "acknowledge_in_transaction failed: {e}"
                )));
            }
        }
        if inject {
            return Err(ProducerError::Abortable(Box::new(
                ProducerError::InvalidTxnState("injected failure (runtime.abort_mid_batch)".into()),
            )));
        }
        Ok(())
    }

    /// The KIP's commit: stage the accumulated acknowledgements with
    /// `send_share_acknowledgements_to_transaction`, then
    /// `commit_transaction`; on an abortable error abort (the records come
    /// back on the next poll, D6).
    ///
    /// With `overlap`, the next poll batch is fetched and processed while
    /// the commit is in flight (the share consumer is idle then: the
    /// acknowledgements of this transaction were sealed before). Nothing of
    /// that batch is sent or acknowledged before this transaction has
    /// ended: it is returned, and goes into the next transaction.
    async fn end_transaction(
        &mut self,
        b: OpenBatch,
        overlap: bool,
    ) -> Result<Option<Polled>, RuntimeError> {
        let started = Instant::now();
        if let Some(first) = b.oldest_acquired {
            WorkerTime::add(
                &self.metrics.worker_time.open_ns,
                started.saturating_duration_since(first),
            );
        }
        if let Some(ledger) = self.ledger.clone() {
            // The next batch is polled, checked against the ledger and
            // processed meanwhile (D37): a check that meets this
            // transaction's own intent waits for its marker.
            let commit = self.ledger_commit(&ledger, b.oldest_acquired);
            let commit = async move {
                let r = commit.await;
                (r, started.elapsed())
            };
            let ((result, took), polled) = if overlap {
                let next = async {
                    // Tests hold the overlapped poll here, so that it comes
                    // after a lock expiry (no-op without `failpoints`).
                    failpoints::pause("runtime.ledger_overlap_poll").await;
                    self.poll_checked(OVERLAP_POLL).await
                };
                let (c, p) = tokio::join!(commit, next);
                (c, Some(p))
            } else {
                (commit.await, None)
            };
            let result = result.map(|(id, acks)| {
                self.ledger_acks = acks;
                id
            });
            return self.after_commit(b, result, took, started, polled).await;
        }
        let commit = self.stage_and_commit();
        // The commit's own duration (not the overlapped poll's).
        let commit = async move {
            let r = commit.await;
            (r, started.elapsed())
        };
        let ((result, took), polled) = if overlap {
            let next = poll_and_process(
                &mut self.consumer,
                &self.metrics,
                self.topology.clone(),
                self.index,
                self.last_delivery.clone(),
            );
            let (c, p) = tokio::join!(commit, next);
            (c, Some(p))
        } else {
            (commit.await, None)
        };
        self.after_commit(b, result, took, started, polled).await
    }

    /// Settles a transaction's end: the consumer told, the metrics counted,
    /// an abortable failure aborted.
    async fn after_commit(
        &mut self,
        b: OpenBatch,
        result: Result<Option<TransactionAcknowledgementsId>, TxnFailure>,
        took: Duration,
        started: Instant,
        polled: Option<Result<Polled, RuntimeError>>,
    ) -> Result<Option<Polled>, RuntimeError> {
        WorkerTime::add(&self.metrics.worker_time.commit_ns, started.elapsed());
        if result.is_ok() {
            self.grid.record_commit(took);
        }
        if let Err(e) = self.end_settled(b, result, took).await {
            // The batch polled during the commit is not processed now: its
            // records are still held by this member and come back in the
            // next poll, after the worker recovered (a fence, an unknown
            // outcome) or once the application restarts.
            if let Some(Ok((records, _, _))) = polled {
                self.hand_back_polled(&records);
            }
            return Err(e);
        }
        match polled {
            None => Ok(None),
            Some(Ok(p)) if p.0.is_empty() => Ok(None),
            Some(Ok(p)) => Ok(Some(p)),
            Some(Err(e)) => Err(e),
        }
    }

    /// Records delivered by a poll and not acknowledged yet, handed back:
    /// the next poll hands them out again (they stay acquired by this
    /// member; no new delivery).
    fn hand_back_polled(&mut self, records: &ShareRecords) {
        for r in records.iter() {
            // Any type: the set is settled as aborted at once.
            let _ = self
                .consumer
                .acknowledge_in_transaction(r, AcknowledgeType::Accept);
        }
        if let Some(t) = self.consumer.take_transaction_acknowledgements() {
            let _ = self
                .consumer
                .transaction_outcome(t.id, TransactionOutcome::Aborted);
        }
    }

    /// Settles a transaction's end (see [`Self::after_commit`]).
    async fn end_settled(
        &mut self,
        b: OpenBatch,
        result: Result<Option<TransactionAcknowledgementsId>, TxnFailure>,
        took: Duration,
    ) -> Result<(), RuntimeError> {
        match result {
            Ok(id) => {
                if let Some(t) = self.ledger_acks.take() {
                    // Committed through the ledger: now the share group
                    // learns it (a lost acknowledgement is harmless: the
                    // record comes back and the check ACCEPTs it).
                    let _ = self.consumer.acknowledge_after_transaction(&t);
                } else if let Some(id) = id {
                    let _ = self
                        .consumer
                        .transaction_outcome(id, TransactionOutcome::Committed);
                }
                self.txn_id = None;
                self.on_committed(&b, took);
            }
            Err(TxnFailure::Lost(why)) => {
                self.metrics
                    .ledger
                    .arbitration_lost
                    .fetch_add(1, Ordering::Relaxed);
                tracing::info!(worker = self.index, reason = %why, "transaction lost the ledger's arbitration; aborting, the records already produced will be accepted without output");
                self.abort(b).await?;
            }
            Err(TxnFailure::TooOld(age)) => {
                tracing::warn!(
                    worker = self.index,
                    age_ms = age.as_millis() as u64,
                    max_ms = self.config.ledger_max_batch_age.as_millis() as u64,
                    "the transaction's records were acquired longer ago than \
                     exactly.once.ledger.max.batch.age.ms allows before its commit; aborting, \
                     they are released and delivered again (raise the setting if processing \
                     takes this long)"
                );
                self.abort(b).await?;
            }
            Err(TxnFailure::Abortable(e)) if e.code() == Some(ErrorCode::INVALID_RECORD_STATE) => {
                // The broker no longer holds these records for this member
                // (it restarted and lost its acquisitions, or their lock
                // expired): handing them back would fail the same way on
                // every retry. Forget them; the broker delivers them again.
                tracing::warn!(worker = self.index, error = %e, "transaction failed: records no longer acquired by this member; aborting, the broker will deliver them again");
                self.abort_with(b, TransactionOutcome::Abandoned).await?;
            }
            Err(TxnFailure::Abortable(e)) => {
                tracing::warn!(worker = self.index, error = %e, "transaction failed; aborting, the records will be processed again");
                // A staging that failed left (some of) the sealed records
                // acquired by this member, not staged: hand them back (any
                // that were staged elsewhere fail re-staging and are then
                // abandoned). After a failed EndTxn everything was staged.
                let unstaged = e.api() == Some("TxnShareAcknowledge");
                self.abort_handing_back(b, unstaged).await?;
            }
            Err(TxnFailure::Fatal(e)) => {
                let renewed = matches!(
                    &e,
                    RuntimeError::Producer { source, .. } if renewal(source).is_some()
                );
                if renewed {
                    // The coordinator aborted this transaction and
                    // released its records (D6), or its end is unknown:
                    // under KIP-1289 the broker decides, the records are
                    // forgotten. Through the ledger this member still holds
                    // them (unless their locks expired): they are processed
                    // again at once, and the check finds the transaction's
                    // intent committed (ACCEPT, no output) or aborted. Left
                    // to their locks they would come back one delivery
                    // closer to the delivery count limit.
                    self.hand_back_as(if self.ledger.is_some() {
                        TransactionOutcome::Aborted
                    } else {
                        TransactionOutcome::Abandoned
                    });
                    self.on_aborted(b.records);
                } else {
                    self.hand_back();
                }
                return Err(e);
            }
        }
        Ok(())
    }

    /// Seals the transaction's acknowledgements (synchronously, so that a
    /// poll may run while the returned future commits) and returns the
    /// future that stages them and commits; it uses only the producer.
    fn stage_and_commit(
        &mut self,
    ) -> impl Future<Output = Result<Option<TransactionAcknowledgementsId>, TxnFailure>> + use<>
    {
        let taken = self.consumer.take_transaction_acknowledgements();
        if let Some(t) = &taken {
            self.txn_id = Some(t.id);
        }
        let id = self.txn_id;
        let index = self.index;
        let producer = self.producer.clone();
        let mut group = self.consumer.share_group_metadata();
        if taken.is_some() && failpoints::hit("runtime.stale_member_epoch") {
            group = ShareGroupMetadata::new(
                group.group_id(),
                group.member_id(),
                group.member_epoch() - 1,
            );
        }
        let classify = move |e: ProducerError| TxnFailure::from_producer(index, e);
        let metrics = self.metrics.clone();
        async move {
            // Kill windows for the chaos test (no-ops without `failpoints`):
            // outputs sent, acknowledgements not staged; then staged, not
            // committed.
            failpoints::pause("runtime.window_sent").await;
            let t0 = Instant::now();
            if let Some(t) = taken {
                // Sent, not awaited: the commit waits for the answer
                // (beside the outputs' flush).
                stage(producer.clone(), t.acknowledgements.to_batches(), group)
                    .await
                    .map_err(classify)?;
                failpoints::pause("runtime.window_staged").await;
                if failpoints::hit("runtime.abort_after_stage") {
                    // Staged, then an abortable failure (as from a send
                    // whose error surfaces at the commit): the abort
                    // settles records that the broker holds TX_PENDING.
                    return Err(classify(ProducerError::Abortable(Box::new(
                        ProducerError::InvalidTxnState(
                            "injected failure (runtime.abort_after_stage)".into(),
                        ),
                    ))));
                }
            }
            end_txn_timed(&producer, &metrics, index, t0).await?;
            Ok(id)
        }
    }

    /// Aborts the open transaction; its records come back on the next poll:
    /// handed back by the consumer where this member still holds them
    /// (records never staged; staged ones under the ledger, or on a broker
    /// that returns them, `acquired`), else fetched again (staged ones on a
    /// broker that makes them AVAILABLE, D25).
    async fn abort(&mut self, b: OpenBatch) -> Result<(), RuntimeError> {
        self.abort_handing_back(b, false).await
    }

    /// [`Self::abort`]; `unstaged`: the sealed set may not have been staged
    /// (its staging failed), so this member may still hold it.
    async fn abort_handing_back(
        &mut self,
        b: OpenBatch,
        unstaged: bool,
    ) -> Result<(), RuntimeError> {
        let staged = if unstaged || self.ledger.is_some() || self.aborted_records_return {
            TransactionOutcome::Aborted
        } else {
            TransactionOutcome::Abandoned
        };
        let r = self.producer.abort_transaction().await;
        self.settle(TransactionOutcome::Aborted, staged);
        self.on_aborted(b.records);
        r.map_err(|e| self.fatal_producer(e))
    }

    /// Aborts the open transaction and reports `outcome` (Aborted or
    /// Abandoned) for its records to the consumer.
    async fn abort_with(
        &mut self,
        b: OpenBatch,
        outcome: TransactionOutcome,
    ) -> Result<(), RuntimeError> {
        let r = self.producer.abort_transaction().await;
        self.hand_back_as(outcome);
        self.on_aborted(b.records);
        r.map_err(|e| self.fatal_producer(e))
    }

    /// Tells the consumer that the open transaction did not commit.
    fn hand_back(&mut self) {
        self.hand_back_as(TransactionOutcome::Aborted)
    }

    fn hand_back_as(&mut self, outcome: TransactionOutcome) {
        self.settle(outcome, outcome);
    }

    /// Reports `unstaged` for the records not sealed yet and `staged` for
    /// the sealed set of the open transaction.
    fn settle(&mut self, unstaged: TransactionOutcome, staged: TransactionOutcome) {
        self.ledger_acks = None;
        if let Some(t) = self.consumer.take_transaction_acknowledgements() {
            let _ = self.consumer.transaction_outcome(t.id, unstaged);
        }
        if let Some(id) = self.txn_id.take() {
            let _ = self.consumer.transaction_outcome(id, staged);
        }
    }

    // ---------------------------------------------------------------- ALOS

    /// At-least-once, pipelined: a poll batch's outputs are sent, and its
    /// records' acknowledgements are set aside in the consumer as one set
    /// (`set_aside`) without waiting for the deliveries; the loop polls
    /// on. Once every delivery of a set is known, the set's
    /// acknowledgements go out with the next ShareFetch: ACCEPT (REJECT for
    /// what the error policy rejected), or RELEASE for a record an output
    /// of which failed, so that it comes back. Every `commit.interval.ms` or
    /// `max.records.per.transaction` records the loop waits for the sets
    /// still in flight and commits the acknowledgements (`commit_sync`).
    /// No record is acknowledged before all its outputs are written. While
    /// sets are in flight a poll takes only what is ready, and otherwise
    /// the loop waits for the next set's deliveries (D47).
    async fn run_at_least_once(&mut self) -> Result<(), RuntimeError> {
        let interval = self.config.commit_interval;
        let max = self.config.max_records_per_transaction;
        let mut open: Option<OpenBatch> = None;
        let mut in_flight: FuturesUnordered<SentSetFuture> = FuturesUnordered::new();
        loop {
            while let Some(Some(done)) = in_flight.next().now_or_never() {
                // Every set in flight belongs to the open window: its end
                // waits for them all.
                let b = open.as_mut().expect("a set in flight has its window");
                self.settle_sent(done, b).await?;
            }
            let stopping = self.stopping();
            if stopping || open.as_ref().is_some_and(|b| b.due(Instant::now(), max)) {
                if let Some(mut b) = open.take() {
                    let started = Instant::now();
                    while let Some(done) = in_flight.next().await {
                        self.settle_sent(done, &mut b).await?;
                    }
                    match self.consumer.commit_sync(self.config.request_timeout).await {
                        Ok(results) => {
                            for (tp, r) in results.iter() {
                                if let Err(e) = r {
                                    tracing::warn!(worker = self.index, partition = ?tp, error = %e, "acknowledgement commit failed; the records will be delivered again");
                                }
                            }
                        }
                        Err(e) => {
                            tracing::warn!(worker = self.index, error = %e, "acknowledgement commit failed; the records will be delivered again")
                        }
                    }
                    self.on_committed(&b, started.elapsed());
                }
                if stopping {
                    return Ok(());
                }
            }
            let records = if in_flight.is_empty() {
                self.poll(IDLE_POLL.min(interval)).await?
            } else {
                // Sets in flight hold acknowledgements about to be sent. A
                // poll that waited for records now could wait on those very
                // records: at the share partition's record-lock cap the
                // leader acquires nothing more until they are acknowledged,
                // and they ride on the next fetch, after that poll. So take
                // only what is ready, and otherwise wait for the deliveries
                // (D47).
                let records = self.poll(Duration::ZERO).await?;
                if records.is_empty() {
                    if let Some(done) = in_flight.next().await {
                        let b = open.as_mut().expect("a set in flight has its window");
                        self.settle_sent(done, b).await?;
                    }
                    continue;
                }
                records
            };
            if records.is_empty() {
                continue;
            }
            let polled_at = Instant::now();
            let results = self.process_renewing(&records, polled_at).await?;
            let b = open.get_or_insert_with(|| OpenBatch::new(Instant::now() + interval));
            let mut deliveries: Vec<(usize, DeliveryFuture)> = Vec::new();
            for (i, (rec, res)) in records.iter().zip(results).enumerate() {
                let ty = res.outcome.acknowledge_type().expect("Fail handled before");
                Self::count_outcome(b, &res.outcome, res.records.len());
                for out in res.records {
                    let d = self.producer.send(to_producer_record(out)).await;
                    // A released record comes back whatever its outputs do.
                    if ty != AcknowledgeType::Release {
                        deliveries.push((i, d));
                    }
                }
                let taken = if ty == AcknowledgeType::Release {
                    // RELEASE waits for nothing.
                    b.records = b.records.saturating_sub(1);
                    self.metrics
                        .records_in_flight
                        .fetch_sub(1, Ordering::Relaxed);
                    self.consumer.acknowledge(rec, ty)
                } else {
                    self.consumer.set_aside(rec, ty)
                };
                taken.map_err(|source| RuntimeError::Consumer {
                    worker: self.index,
                    source,
                })?;
            }
            let acks = self.consumer.take_set_aside();
            if acks.is_empty() {
                continue;
            }
            let worker = self.index;
            let limit = self.last_delivery.limit;
            in_flight.push(Box::pin(async move {
                let mut failed = std::collections::BTreeSet::new();
                let mut failed_outputs = 0;
                let mut at_limit = 0;
                let mut fatal = None;
                for (i, d) in deliveries {
                    if let Err(e) = d.await {
                        failed_outputs += 1;
                        let r = &records.as_slice()[i];
                        if !failed.insert((r.topic_id_partition(), r.offset)) {
                            // Another output of the same record: logged.
                        } else if r.delivery_count >= 0 && r.delivery_count as u16 >= limit {
                            at_limit += 1;
                            tracing::error!(worker, topic = %r.topic, partition = r.partition, offset = r.offset, delivery_count = r.delivery_count, error = %e, "output not delivered on the record's last delivery; releasing it, and the broker will archive it unprocessed");
                        } else {
                            tracing::warn!(worker, topic = %r.topic, partition = r.partition, offset = r.offset, error = %e, "output not delivered; releasing the source record (it comes back)");
                        }
                        if e.is_fatal() && fatal.is_none() {
                            fatal = Some(e);
                        }
                    }
                }
                SentSet {
                    acks,
                    failed,
                    failed_outputs,
                    at_limit,
                    fatal,
                }
            }));
        }
    }

    /// Acknowledges a set whose deliveries are all known: RELEASE where an
    /// output failed, what the topology said otherwise.
    async fn settle_sent(&mut self, done: SentSet, b: &mut OpenBatch) -> Result<(), RuntimeError> {
        let SentSet {
            mut acks,
            failed,
            failed_outputs,
            at_limit,
            fatal,
        } = done;
        self.metrics
            .records_released_at_delivery_limit
            .fetch_add(at_limit, Ordering::Relaxed);
        if !failed.is_empty() {
            let mut rebuilt = crate::eos::PartitionAcknowledgements::new();
            for (tp, a) in acks.partitions() {
                for (offset, ty) in a.iter() {
                    let ty = if failed.contains(&(tp.clone(), offset)) {
                        AcknowledgeType::Release
                    } else {
                        ty
                    };
                    // Each offset once, as set aside.
                    let _ = rebuilt.add(tp, offset, ty);
                }
            }
            acks = rebuilt;
            let n = failed.len() as u64;
            b.records = b.records.saturating_sub(n);
            b.out = b.out.saturating_sub(failed_outputs);
            self.metrics
                .records_in_flight
                .fetch_sub(n as i64, Ordering::Relaxed);
        }
        failpoints::pause("runtime.window_sent").await;
        self.consumer.acknowledge_set_aside(&acks);
        match fatal {
            Some(e) => Err(self.fatal_producer(e)),
            None => Ok(()),
        }
    }
}

/// A poll batch's records set aside by the at-least-once loop, once every
/// delivery of its outputs is known.
struct SentSet {
    /// The set's acknowledgements, set aside in the consumer.
    acks: crate::eos::PartitionAcknowledgements,
    /// Records an output of which was not delivered.
    failed: std::collections::BTreeSet<(TopicIdPartition, i64)>,
    /// How many outputs were not delivered.
    failed_outputs: u64,
    /// Failed records on their last delivery (the broker archives them).
    at_limit: u64,
    fatal: Option<ProducerError>,
}

type SentSetFuture = Pin<Box<dyn Future<Output = SentSet> + Send>>;

// ------------------------------------------------------------ the ledger

impl Worker {
    /// Step 2 of the ledger protocol (docs/EXACTLY-ONCE.md 3.2): reads the
    /// ledger partitions' end offsets after the acquisition, lets the index
    /// catch up to them, and looks at the intents before them. A record a
    /// committed intent covers is ACCEPTed without output; an open intent
    /// is resolved (waited for, or its writer fenced) and looked at again.
    /// Returns the records to process. When the target cluster cannot be
    /// read, the worker holds the records and tries again while three
    /// quarters of their acquisition lock last, so that an outage shorter
    /// than that spends no delivery; then it releases them (they come
    /// back) rather than process them unchecked.
    async fn ledger_check(&mut self, records: ShareRecords) -> Result<ShareRecords, RuntimeError> {
        let ledger = self.ledger.clone().expect("ledger mode");
        let sources: std::collections::BTreeSet<_> =
            records.iter().map(|r| (r.topic_id, r.partition)).collect();
        let parts: std::collections::BTreeSet<i32> = sources
            .into_iter()
            .map(|s| ledger.partition_of(s))
            .collect();
        let hold_until = records.iter().map(|r| r.acquired_at).min().map(|t| {
            let lock = self
                .consumer
                .acquisition_lock_timeout_ms()
                .filter(|ms| *ms > 0)
                .map_or(Duration::ZERO, |ms| Duration::from_millis(ms as u64));
            t + (lock * 3 / 4).min(self.config.ledger_max_batch_age)
        });
        let mut failed_before = false;
        loop {
            match self.ledger_look(&ledger, &records, &parts).await {
                Err(e @ RuntimeError::Unsupported(_)) => return Err(e),
                Err(e) => {
                    let held = hold_until.is_some_and(|t| Instant::now() < t);
                    if held {
                        if !failed_before {
                            tracing::warn!(worker = self.index, error = %e, records = records.len(), "cannot check the records against the exactly-once ledger; holding them while their lock lasts");
                        }
                        failed_before = true;
                        let until = hold_until.expect("held");
                        if self.wait_for_ledger(&ledger, &parts, Some(until)).await {
                            continue;
                        }
                    }
                    if self.stopping() {
                        self.settle_unprocessed(records.as_slice(), AcknowledgeType::Release)?;
                        return Ok(ShareRecords::default());
                    }
                    tracing::warn!(worker = self.index, error = %e, records = records.len(), "cannot check the records against the exactly-once ledger; releasing them (they come back), and polling no more until the target cluster answers");
                    let n =
                        self.settle_unprocessed(records.as_slice(), AcknowledgeType::Release)?;
                    self.metrics
                        .ledger
                        .unreadable_released
                        .fetch_add(n, Ordering::Relaxed);
                    self.wait_for_ledger(&ledger, &parts, None).await;
                    return Ok(ShareRecords::default());
                }
                Ok((keep, done)) => {
                    if failed_before {
                        self.metrics
                            .ledger
                            .unreadable_held
                            .fetch_add(1, Ordering::Relaxed);
                    }
                    return self.ledger_settle_look(keep, done);
                }
            }
        }
    }

    /// One look at the ledger for `records` (step 2): the records to
    /// process, and those a committed intent covers.
    async fn ledger_look(
        &mut self,
        ledger: &super::ledger::Ledger,
        records: &ShareRecords,
        parts: &std::collections::BTreeSet<i32>,
    ) -> Result<(Vec<ShareRecord>, Vec<ShareRecord>), RuntimeError> {
        let me = self.transactional_id();
        let timeout = self.config.request_timeout;
        let fresh = match self.config.ledger_check {
            LedgerCheck::Index => ledger.fresh_positions(parts),
            LedgerCheck::CaughtUp => None,
        };
        async {
            // The look is bounded at a fixed offset per ledger partition
            // (so that resolving open intents cannot chase new ones): the
            // index's position (`exactly.once.ledger.check=index`), or the
            // end offset read after the acquisition, once the index has
            // caught up to it.
            let ends = match fresh {
                Some(positions) => positions,
                None => {
                    let ends = ledger
                        .end_offsets(parts)
                        .await
                        .map_err(|e| RuntimeError::Startup(format!("ledger end offsets: {e}")))?;
                    for (p, e) in &ends {
                        ledger.catch_up(*p, *e, timeout).await?;
                    }
                    ends
                }
            };
            let mut keep = Vec::with_capacity(records.len());
            let mut done = Vec::new();
            // Each run of consecutive offsets of one source partition is
            // looked at whole first: no intent covering any of it (the
            // common case) frees every record of the run at once. Otherwise
            // each record of the run is settled on its own.
            let runs = records.as_slice().chunk_by(|a, b| {
                (a.topic_id, a.partition) == (b.topic_id, b.partition) && b.offset == a.offset + 1
            });
            for run in runs {
                let source = (run[0].topic_id, run[0].partition);
                let p = ledger.partition_of(source);
                let end = ends.get(&p).copied().unwrap_or(0);
                let (first, last) = (run[0].offset, run[run.len() - 1].offset);
                if run.len() > 1
                    && matches!(
                        ledger.look(source, first, last, end),
                        crate::eos::ledger::Look::Free
                    )
                {
                    keep.extend_from_slice(run);
                    continue;
                }
                for r in run {
                    match ledger.settle(source, r.offset, r.offset, end, &me).await? {
                        None => keep.push(r.clone()),
                        Some(_) => done.push(r.clone()),
                    }
                }
            }
            Ok::<_, RuntimeError>((keep, done))
        }
        .await
    }

    /// What a successful look decided: records too old for it are released,
    /// those a committed intent covers ACCEPTed, the rest returned.
    fn ledger_settle_look(
        &mut self,
        keep: Vec<ShareRecord>,
        done: Vec<ShareRecord>,
    ) -> Result<ShareRecords, RuntimeError> {
        // Processing stands on this look only if it came within the
        // batch age limit of the acquisition (checked after the
        // look; docs/EXACTLY-ONCE.md, "Trimming the ledger").
        let max_age = self.config.ledger_max_batch_age;
        let (keep, too_old): (Vec<ShareRecord>, Vec<ShareRecord>) = keep
            .into_iter()
            .partition(|r| r.acquired_at.elapsed() <= max_age);
        if !too_old.is_empty() {
            tracing::warn!(
                worker = self.index,
                records = too_old.len(),
                max_ms = max_age.as_millis() as u64,
                "records acquired longer ago than exactly.once.ledger.max.batch.age.ms \
                 before their check; releasing them (they are delivered again)"
            );
            let n = self.settle_unprocessed(&too_old, AcknowledgeType::Release)?;
            self.metrics.ledger.too_old.fetch_add(n, Ordering::Relaxed);
        }
        if !done.is_empty() {
            tracing::debug!(
                worker = self.index,
                records = done.len(),
                "records already produced by a committed transaction: accepted without output"
            );
        }
        let n = self.settle_unprocessed(&done, AcknowledgeType::Accept)?;
        self.metrics
            .ledger
            .skipped_committed
            .fetch_add(n, Ordering::Relaxed);
        Ok(ShareRecords::new(keep))
    }

    /// Waits (backing off up to 5 s) until the ledger's end offsets can be
    /// read again, `until` passes, or shutdown; returns whether the ledger
    /// answered. Each acquisition counts towards the share group's delivery
    /// limit (Kafka's default is 5), so polling again at once while the
    /// target cluster is down would spend a record's deliveries in a few
    /// seconds and have the source archive it unprocessed.
    async fn wait_for_ledger(
        &mut self,
        ledger: &super::ledger::Ledger,
        parts: &std::collections::BTreeSet<i32>,
        until: Option<Instant>,
    ) -> bool {
        let t0 = Instant::now();
        let mut delay = Duration::from_millis(100);
        while !self.stopping() {
            let mut sleep = delay;
            if let Some(u) = until {
                let left = u.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return false;
                }
                sleep = sleep.min(left);
            }
            tokio::select! {
                _ = tokio::time::sleep(sleep) => {}
                _ = self.shutdown.changed() => return false,
            }
            let answered = match until {
                Some(u) => tokio::time::timeout_at(u, ledger.end_offsets(parts))
                    .await
                    .is_ok_and(|r| r.is_ok()),
                None => ledger.end_offsets(parts).await.is_ok(),
            };
            if answered {
                tracing::info!(
                    worker = self.index,
                    waited_ms = t0.elapsed().as_millis() as u64,
                    "the exactly-once ledger can be read again"
                );
                return true;
            }
            delay = (delay * 2).min(Duration::from_secs(5));
        }
        false
    }

    /// Acknowledges records the worker will not process (ACCEPT: their
    /// outputs exist; RELEASE: they come back) and takes them out of the
    /// in-flight count. Returns how many.
    fn settle_unprocessed(
        &mut self,
        records: &[ShareRecord],
        ty: AcknowledgeType,
    ) -> Result<u64, RuntimeError> {
        for r in records {
            self.consumer
                .acknowledge(r, ty)
                .map_err(|source| RuntimeError::Consumer {
                    worker: self.index,
                    source,
                })?;
        }
        let n = records.len() as u64;
        self.metrics
            .records_in_flight
            .fetch_sub(n as i64, Ordering::Relaxed);
        if ty == AcknowledgeType::Release {
            let limit = self.last_delivery.limit;
            let last: Vec<&ShareRecord> = records
                .iter()
                .filter(|r| r.delivery_count >= 0 && r.delivery_count as u16 >= limit)
                .collect();
            if !last.is_empty() {
                self.metrics
                    .records_released_at_delivery_limit
                    .fetch_add(last.len() as u64, Ordering::Relaxed);
                for r in last {
                    tracing::warn!(
                        worker = self.index,
                        topic = %r.topic,
                        partition = r.partition,
                        offset = r.offset,
                        delivery_count = r.delivery_count,
                        limit,
                        "a record released on its last delivery: the broker archives it, \
                         it gets no output (raise share.delivery.count.limit if this recurs)"
                    );
                }
            }
        }
        Ok(n)
    }

    /// Steps 3 to 5 of the ledger protocol: one intent per source partition
    /// in the open transaction, acknowledged; the index caught up past
    /// them; every earlier intent covering the records aborted (an open
    /// one resolved first); then the commit. Seals the transaction's
    /// acknowledgements at once and returns the future that does the rest;
    /// it uses the producer and the ledger only, so that the next batch
    /// may be polled meanwhile. It yields the sealed acknowledgements,
    /// which [`Self::after_commit`] sends once the commit succeeded.
    fn ledger_commit(
        &mut self,
        ledger: &Arc<super::ledger::Ledger>,
        oldest_acquired: Option<Instant>,
    ) -> impl Future<Output = Result<LedgerCommitted, TxnFailure>> + use<> {
        use crate::eos::ledger::{LedgerRecord, encode, ledger_key, ranges_of};
        let taken = self.consumer.take_transaction_acknowledgements();
        if let Some(t) = &taken {
            self.txn_id = Some(t.id);
        }
        let id = self.txn_id;
        let index = self.index;
        let me = self.transactional_id();
        let group = self.consumer.share_group_metadata().group_id().to_string();
        let producer = self.producer.clone();
        let metrics = self.metrics.clone();
        let ledger = ledger.clone();
        let request_timeout = self.config.request_timeout;
        let max_batch_age = self.config.ledger_max_batch_age;
        async move {
            let classify = move |e: ProducerError| TxnFailure::from_producer(index, e);
            let ledger_failure = |e: RuntimeError| match e {
                RuntimeError::Unsupported(_) => TxnFailure::Fatal(e),
                other => TxnFailure::Abortable(ProducerError::InvalidTxnState(format!(
                    "exactly-once ledger: {other}"
                ))),
            };
            failpoints::pause("runtime.window_sent").await;
            let t0 = Instant::now();
            let mut acks = None;
            // Measurement only (the bench's floor row): a transaction of
            // outputs with no intent and no arbitration, which is not
            // exactly-once, to price Kafka's transactions apart from the
            // ledger's own work.
            if taken.is_some() && failpoints::hit("runtime.ledger_floor") {
                acks = taken;
            } else if let Some(t) = taken {
                let mut sent = Vec::new();
                for (tp, acks) in t.acknowledgements.partitions() {
                    let source = (tp.topic_id, tp.partition);
                    let ranges = ranges_of(acks.iter().map(|(o, _)| o));
                    let value = encode(&LedgerRecord::Intent {
                        group: group.clone(),
                        topic: tp.topic.clone(),
                        ranges: ranges.clone(),
                        transactional_id: me.clone(),
                        ledger_partitions: ledger.partitions(),
                    });
                    let m = &metrics.ledger;
                    m.intents.fetch_add(1, Ordering::Relaxed);
                    m.intent_bytes
                        .fetch_add(value.len() as u64, Ordering::Relaxed);
                    let delivery = producer
                        .send(ProducerRecord {
                            topic: ledger.topic().to_string(),
                            partition: Some(ledger.partition_of(source)),
                            key: Some(ledger_key(source)),
                            value: Some(value),
                            headers: Vec::new(),
                            timestamp: None,
                        })
                        .await;
                    sent.push((source, ranges, delivery));
                }
                let arbitration = async {
                    let mut placed = Vec::with_capacity(sent.len());
                    for (source, ranges, delivery) in sent {
                        let md = delivery.await.map_err(classify)?;
                        placed.push((source, ranges, md.offset));
                    }
                    failpoints::pause("runtime.window_staged").await;
                    // Arbitration: every intent before ours that covers one
                    // of our records must have aborted (this transactional
                    // id's own earlier ones included: a record can come
                    // back to this worker while its transaction commits).
                    for (source, ranges, at) in &placed {
                        let p = ledger.partition_of(*source);
                        ledger
                            .catch_up(p, at + 1, request_timeout)
                            .await
                            .map_err(ledger_failure)?;
                        for &(first, last) in ranges {
                            let settled = ledger
                                .settle(*source, first, last, *at, &me)
                                .await
                                .map_err(ledger_failure)?;
                            if let Some(o) = settled {
                                return Err(TxnFailure::Lost(format!(
                                    "the intent at {}-{p}@{o} committed records of {}-{} in \
                                     {first}..={last} first",
                                    ledger.topic(),
                                    source.0,
                                    source.1
                                )));
                            }
                        }
                    }
                    Ok(())
                };
                // The flush sends the intents at once (not after linger.ms),
                // and the outputs' flush, which EndTxn would wait for after
                // the arbitration, runs beside it. Nothing is committed
                // before the arbitration has decided: the order of the
                // steps is kept.
                let (arbitrated, ()) = tokio::join!(arbitration, producer.flush());
                arbitrated?;
                // The decision to commit stands only if it came within the
                // batch age limit (after the look, so that the look itself
                // was in time): past it, an intent this look needed may
                // have been trimmed (docs/EXACTLY-ONCE.md, "Trimming the
                // ledger").
                if let Some(age) = oldest_acquired.map(|t| t.elapsed())
                    && age > max_batch_age
                {
                    let records = t.acknowledgements.len() as u64;
                    metrics.ledger.too_old.fetch_add(records, Ordering::Relaxed);
                    return Err(TxnFailure::TooOld(age));
                }
                acks = Some(t);
            }
            end_txn_timed(&producer, &metrics, index, t0).await?;
            Ok((id, acks))
        }
    }
}

/// The last step of both commits: EndTxn(commit), with the kill window
/// before it (chaos tests) and the time since `t0` (staging, or the
/// ledger's intents and arbitration) and of EndTxn counted apart.
async fn end_txn_timed(
    producer: &Producer,
    metrics: &RuntimeMetrics,
    index: usize,
    t0: Instant,
) -> Result<(), TxnFailure> {
    if failpoints::hit("runtime.crash_before_commit") {
        return Err(TxnFailure::Fatal(RuntimeError::WorkerCrashed {
            worker: index,
        }));
    }
    let t1 = Instant::now();
    let wt = &metrics.worker_time;
    WorkerTime::add(&wt.commit_stage_ns, t1 - t0);
    producer
        .commit_transaction()
        .await
        .map_err(|e| TxnFailure::from_producer(index, e))?;
    WorkerTime::add(&wt.commit_end_ns, t1.elapsed());
    Ok(())
}

/// What a commit through the ledger yields: the sealed set's id, and its
/// acknowledgements, to send now that the transaction committed.
type LedgerCommitted = (
    Option<TransactionAcknowledgementsId>,
    Option<TransactionAcknowledgements>,
);

type BoxedProducerCall = Pin<Box<dyn Future<Output = Result<(), ProducerError>> + Send>>;

// `send_share_acknowledgements_to_transaction`'s future is Send, but inside
// a spawned task the compiler cannot prove it for every lifetime (the
// higher-ranked lifetime limitation of rustc, rust-lang/rust#64552);
// boxing it as `dyn Future + Send` over owned arguments settles it.
fn stage(
    producer: Producer,
    acknowledgements: std::collections::BTreeMap<TopicIdPartition, Vec<AcknowledgementBatch>>,
    group: ShareGroupMetadata,
) -> BoxedProducerCall {
    Box::pin(async move {
        producer
            .send_share_acknowledgements_to_transaction(acknowledgements, &group)
            .await
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn broker_error(api: &'static str, code: ErrorCode) -> ProducerError {
        ProducerError::Client(crate::client::ClientError::Broker {
            api,
            code,
            message: None,
        })
    }

    /// Which producer errors replace the producer (and why) rather than
    /// stop the application.
    #[test]
    fn renewal_of_a_fenced_or_undecided_producer() {
        assert_eq!(
            renewal(&broker_error("EndTxn", ErrorCode::PRODUCER_FENCED)),
            Some(Renewal::Fenced)
        );
        assert_eq!(
            renewal(&broker_error("Produce", ErrorCode::INVALID_PRODUCER_EPOCH)),
            Some(Renewal::Fenced)
        );
        // An abort after a commit whose answer was lost.
        assert_eq!(
            renewal(&broker_error("EndTxn", ErrorCode::INVALID_TXN_STATE)),
            Some(Renewal::OutcomeUnknown)
        );
        let unanswered = ProducerError::OutcomeUnknown {
            committed: true,
            last: Box::new(ProducerError::Client(crate::client::ClientError::Timeout {
                api: "EndTxn",
                correlation_id: 3,
            })),
        };
        assert_eq!(renewal(&unanswered), Some(Renewal::OutcomeUnknown));
        // Elsewhere INVALID_TXN_STATE is not about the transaction's end.
        assert_eq!(
            renewal(&broker_error(
                "TxnShareAcknowledge",
                ErrorCode::INVALID_TXN_STATE
            )),
            None
        );
        assert_eq!(
            renewal(&broker_error(
                "EndTxn",
                ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            )),
            None
        );
    }

    fn source(delivery_count: i16) -> SourceRecord {
        SourceRecord {
            topic: "in".into(),
            partition: 0,
            offset: 7,
            delivery_count,
            key: None,
            value: Some(bytes::Bytes::from_static(b"x")),
            headers: Vec::new(),
            timestamp: 1,
        }
    }

    fn failure() -> crate::topology::ProcessingError {
        crate::topology::ProcessingError {
            kind: crate::topology::ErrorKind::Operator,
            node: "map".into(),
            message: "bad".into(),
            attempts: 1,
        }
    }

    #[test]
    fn the_delivery_limit_policy_dead_letters_or_rejects_on_the_last_delivery() {
        use crate::topology::error::{DLQ_REASON, DLQ_REASON_DELIVERY_LIMIT};
        let metrics = Arc::new(RuntimeMetrics::default());
        let dlq = LastDelivery {
            limit: 3,
            dead_letter_topic: Some("dlq".into()),
            metrics: metrics.clone(),
        };
        assert!(!dlq.is_last(&source(2)));
        assert!(dlq.is_last(&source(3)));
        assert!(dlq.is_last(&source(4)), "a lower limit set after delivery");
        let r = dlq.apply(0, &source(3), failure());
        assert!(matches!(&r.outcome, Outcome::DeadLetter { topic, .. } if topic == "dlq"));
        assert_eq!(r.outcome.acknowledge_type(), Some(AcknowledgeType::Reject));
        assert_eq!(r.records.len(), 1);
        let reason = r.records[0].headers.iter().find(|h| h.key == DLQ_REASON);
        assert_eq!(
            reason.and_then(|h| h.value.as_deref()),
            Some(DLQ_REASON_DELIVERY_LIMIT.as_bytes())
        );
        let reject = LastDelivery {
            limit: 3,
            dead_letter_topic: None,
            metrics: metrics.clone(),
        };
        let r = reject.apply(0, &source(3), failure());
        assert!(matches!(r.outcome, Outcome::Reject { .. }));
        assert!(r.records.is_empty());
        assert_eq!(
            metrics
                .records_failed_at_delivery_limit
                .load(Ordering::Relaxed),
            2
        );
    }

    fn share_record(offset: i64, acquired_at: Instant) -> ShareRecord {
        ShareRecord {
            topic: "in".into(),
            topic_id: uuid::Uuid::nil(),
            partition: 0,
            offset,
            delivery_count: 1,
            key: None,
            value: None,
            headers: Vec::new(),
            timestamp: 0,
            timestamp_type: crate::protocol::records::TimestampType::CreateTime,
            acquired_at,
        }
    }

    #[test]
    fn a_transaction_is_timed_from_its_records_fetched_ahead() {
        let t = Instant::now();
        // Fetched ahead (acquired before this poll began): from the
        // earliest acquisition.
        let ahead = ShareRecords::new(vec![
            share_record(1, t + 5 * MS),
            share_record(2, t + 2 * MS),
        ]);
        assert_eq!(first_arrival(&ahead, t + 10 * MS, t + 30 * MS), t + 2 * MS);
        // Acquired by the poll's own fetch, sent when the poll began: the
        // fetch may have waited at the broker, so from the poll's end.
        let own = ShareRecords::new(vec![share_record(3, t + 10 * MS)]);
        assert_eq!(first_arrival(&own, t + 10 * MS, t + 30 * MS), t + 30 * MS);
        let both = ShareRecords::new(vec![
            share_record(3, t + 10 * MS),
            share_record(4, t + 4 * MS),
        ]);
        assert_eq!(first_arrival(&both, t + 10 * MS, t + 30 * MS), t + 4 * MS);
        assert_eq!(
            first_arrival(&ShareRecords::default(), t, t + 30 * MS),
            t + 30 * MS
        );
        // On the commit grid (points every 100 ms from t): a record fetched
        // ahead just after the point at 100 ms, polled after a commit that
        // overran the next point (200 ms), commits at that point (at once),
        // not a whole period later.
        let grid = CommitGrid::new(t, 100 * MS, false, true);
        let late = ShareRecords::new(vec![share_record(5, t + 101 * MS)]);
        let arrived = first_arrival(&late, t + 205 * MS, t + 206 * MS);
        assert_eq!(grid.commit_start(arrived), t + 200 * MS);
        assert_eq!(
            grid.commit_start(t + 206 * MS),
            t + 300 * MS,
            "timed from the poll"
        );
    }

    #[test]
    fn open_batch_is_due_at_its_deadline_or_when_full() {
        let t = Instant::now();
        let mut b = OpenBatch::new(t + 50 * MS);
        assert!(!b.due(t, 10));
        assert_eq!(b.poll_timeout(t), 50 * MS);
        assert!(b.due(t + 50 * MS, 10));
        b.records = 10;
        assert!(b.due(t, 10));
        assert_eq!(b.poll_timeout(t + 60 * MS), MS);
    }
}
