//! The producer: batching, partitioning, idempotence and transactions
//! (including KIP-1289's staging of share acknowledgements).
//!
//! - [`partitioner`]: murmur2 placement of keyed records (Java-compatible),
//!   sticky placement of unkeyed ones.
//! - [`accumulator`]: per-partition batches, `linger.ms` / `batch.size`,
//!   retries at the front with their original sequence.
//! - `sender`: the background task that sends batches and handles
//!   responses.
//! - [`memory`]: `buffer.memory`, the bound on the bytes of records the
//!   producer holds, and how `send` waits for room.
//! - [`transaction`]: the transaction state machine and the fatal/abortable
//!   table.
//!
//! [`Producer::send`] enqueues and returns a [`DeliveryFuture`]; the network
//! is only touched by the background sender. `send` waits only when it
//! must, and for `max.block.ms` at most in all: for the metadata of a topic
//! it does not know yet, and for room in `buffer.memory` (see [`memory`]). With
//! `enable.idempotence` (the default) the producer gets a producer id from
//! InitProducerId and numbers each partition's batches; retries reuse the
//! numbers, so the broker drops duplicates. With `transactional.id` the
//! transactional API is available and uses transactions v2 (KIP-890):
//! Produce v12 registers partitions implicitly, EndTxn v5 returns the
//! bumped epoch used for the next transaction. Brokers that did not
//! finalize `transaction.version >= 2` are refused at `init_transactions`
//! with [`ClientError::UnsupportedVersion`] (no TV1 fallback).
//!
//! [`Producer::send_share_acknowledgements_to_transaction`] checks the
//! arguments and the leaders' support for TxnShareAcknowledge (key 95)
//! before anything is written, then sends one request per leader in the
//! background; errors are recorded and surface at
//! [`Producer::commit_transaction`].

pub mod accumulator;
mod commands;
pub mod memory;
pub mod partitioner;
pub(crate) mod sender;
pub mod transaction;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::{
    DescribeTransactionsRequest, EndTxnRequest, InitProducerIdRequest, ProducerId, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;
use parking_lot::Mutex;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use self::memory::{BufferMemory, ReserveError};
use self::sender::{Command, Outgoing, Sender};
use self::transaction::{TransactionManager, TxnState, is_fatal_code};
use super::backoff::Backoff;
use super::broker_connection::BrokerConnection;
use super::config::{ConfigError, ProducerConfig};
use super::error::ClientError;
use super::metadata::{Metadata, TopicMetadata};
use crate::eos::{
    AcknowledgementBatch, ShareAcknowledgements, ShareGroupMetadata, TopicIdPartition,
};
use crate::protocol::ErrorCode;
use crate::protocol::records::RecordHeader;
use crate::protocol::txn_share_ack::{
    TXN_SHARE_ACKNOWLEDGE_API_KEY, TxnShareAcknowledgePartition, TxnShareAcknowledgeRequest,
    TxnShareAcknowledgeTopic,
};

pub use accumulator::TopicPartition;
pub use transaction::TxnState as TransactionState;

/// A failure of the producer.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ProducerError {
    /// A request failed (network, broker error code, unsupported API).
    #[error(transparent)]
    Client(#[from] ClientError),
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The transactional API was used out of order or without a
    /// `transactional.id`.
    #[error("invalid transaction state: {0}")]
    InvalidTxnState(String),
    /// Share acknowledgements other than ACCEPT/REJECT were staged.
    #[error("invalid record state: {0}")]
    InvalidRecordState(String),
    /// The transaction failed; abort it and start a new one.
    #[error("transaction must be aborted: {0}")]
    Abortable(Box<ProducerError>),
    /// Records were not acknowledged within `delivery.timeout.ms`.
    #[error("delivery timed out for {0}")]
    DeliveryTimeout(String),
    /// `send` found no room for the record in `buffer.memory` within
    /// `max.block.ms` (what was left of it after waiting for metadata).
    /// Java's BufferExhaustedException.
    #[error(
        "no room for a record of {record_bytes} bytes in buffer.memory ({buffer_memory} bytes, \
         {available} free) within max.block.ms ({max_block_ms} ms): records are produced faster \
         than the brokers acknowledge them"
    )]
    BufferExhausted {
        /// The record's estimated size.
        record_bytes: usize,
        /// `buffer.memory`.
        buffer_memory: usize,
        /// Bytes free when `send` gave up.
        available: usize,
        /// `max.block.ms`.
        max_block_ms: u64,
    },
    /// The record alone is larger than `buffer.memory`; it fails at once.
    /// Java's RecordTooLargeException.
    #[error(
        "the record is {record_bytes} bytes, larger than the whole buffer.memory ({buffer_memory} bytes)"
    )]
    RecordTooLarge {
        /// The record's estimated size.
        record_bytes: usize,
        /// `buffer.memory`.
        buffer_memory: usize,
    },
    /// The record is larger than `max.request.size`; it fails at once, and
    /// nothing is sent. Java's RecordTooLargeException.
    #[error(
        "the record is {record_bytes} bytes when encoded, larger than max.request.size ({max_request_size} bytes); \
         raise max.request.size (and the topic's max.message.bytes) or send smaller records"
    )]
    RecordTooLargeForRequest {
        /// The record's estimated size.
        record_bytes: usize,
        /// `max.request.size`.
        max_request_size: u64,
    },
    /// The topic's metadata (with a leader for every partition) did not
    /// arrive within `max.block.ms`.
    #[error("topic {topic} not present in metadata after max.block.ms ({max_block_ms} ms): {last}")]
    MetadataTimeout {
        /// The topic.
        topic: String,
        /// `max.block.ms`.
        max_block_ms: u64,
        /// The last answer or failure (boxed: a `ProducerError` travels in
        /// every record's delivery channel, so it stays small).
        last: Box<ClientError>,
    },
    /// The producer was closed.
    #[error("producer closed")]
    Closed,
    /// EndTxn got no definitive answer: its retries ran out on network
    /// failures or retriable errors, and the request may have reached the
    /// coordinator. The transaction may have ended either way; the
    /// producer cannot go on (an abort after a commit that happened is
    /// refused as INVALID_TXN_STATE). A new producer with the same
    /// `transactional.id` settles it: its InitProducerId aborts the
    /// transaction if it is still open and leaves a completed one as it is.
    #[error(
        "the outcome of EndTxn({}) is unknown: {last}",
        if *committed { "commit" } else { "abort" }
    )]
    OutcomeUnknown {
        /// Whether the EndTxn asked for a commit.
        committed: bool,
        /// The last failure (boxed, see `MetadataTimeout`).
        last: Box<ProducerError>,
    },
}

impl ProducerError {
    /// Fatal: the producer cannot continue (fenced, unsupported version,
    /// authorization failure). Decided by [`transaction::is_fatal_code`].
    pub fn is_fatal(&self) -> bool {
        match self {
            ProducerError::Client(ClientError::UnsupportedVersion { .. }) => true,
            // TLS and SASL failures, authorization codes: no retry helps.
            ProducerError::Client(e) if e.is_security_failure() => true,
            ProducerError::Client(ClientError::Broker { code, .. }) => is_fatal_code(*code),
            ProducerError::OutcomeUnknown { .. } => true,
            ProducerError::Abortable(_) => false,
            _ => false,
        }
    }

    /// EndTxn got no definitive answer ([`ProducerError::OutcomeUnknown`]).
    pub fn is_outcome_unknown(&self) -> bool {
        matches!(self, ProducerError::OutcomeUnknown { .. })
    }

    /// Abortable: the current transaction must be aborted, the producer
    /// stays usable.
    pub fn is_abortable(&self) -> bool {
        matches!(self, ProducerError::Abortable(_))
    }

    /// The broker API whose answer this error is, if any (e.g.
    /// `"TxnShareAcknowledge"` for a staging that failed).
    pub fn api(&self) -> Option<&'static str> {
        match self {
            ProducerError::Client(ClientError::Broker { api, .. }) => Some(api),
            ProducerError::Abortable(inner) => inner.api(),
            _ => None,
        }
    }

    /// The broker error code inside, if any.
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            ProducerError::Client(ClientError::Broker { code, .. }) => Some(*code),
            ProducerError::MetadataTimeout { last, .. } => match **last {
                ClientError::Broker { code, .. } => Some(code),
                _ => None,
            },
            ProducerError::Abortable(inner) => inner.code(),
            _ => None,
        }
    }
}

/// A record to send.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProducerRecord {
    /// Topic name.
    pub topic: String,
    /// Explicit partition; `None` lets the partitioner choose.
    pub partition: Option<i32>,
    /// Key.
    pub key: Option<Bytes>,
    /// Value.
    pub value: Option<Bytes>,
    /// Headers.
    pub headers: Vec<RecordHeader>,
    /// Create time in ms; `None` = now.
    pub timestamp: Option<i64>,
}

impl ProducerRecord {
    /// A record with a value only.
    pub fn new(topic: impl Into<String>, value: impl Into<Bytes>) -> Self {
        Self {
            topic: topic.into(),
            value: Some(value.into()),
            ..Self::default()
        }
    }

    /// Sets the key.
    pub fn with_key(mut self, key: impl Into<Bytes>) -> Self {
        self.key = Some(key.into());
        self
    }

    /// Sets the partition.
    pub fn with_partition(mut self, p: i32) -> Self {
        self.partition = Some(p);
        self
    }
}

/// Where a record was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordMetadata {
    /// Topic (shared by the records of one batch).
    pub topic: Arc<str>,
    /// Partition.
    pub partition: i32,
    /// Offset (-1 with `acks=0`).
    pub offset: i64,
    /// The record's timestamp (the broker's with LogAppendTime).
    pub timestamp: i64,
}

/// A record's outcome as its delivery channel carries it. The error is
/// boxed: one channel per record lives until the application awaits it,
/// and a `ProducerError` is several times larger than a pointer.
pub(crate) type Outcome = Result<RecordMetadata, Box<ProducerError>>;

/// Resolves when the record is acknowledged or failed.
#[derive(Debug)]
pub struct DeliveryFuture {
    // Two words: applications hold one per record in flight.
    inner: Result<oneshot::Receiver<Outcome>, Option<Box<ProducerError>>>,
}

impl DeliveryFuture {
    fn failed(e: ProducerError) -> Self {
        Self {
            inner: Err(Some(Box::new(e))),
        }
    }
}

impl Future for DeliveryFuture {
    type Output = Result<RecordMetadata, ProducerError>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match &mut self.inner {
            Ok(rx) => Pin::new(rx).poll(cx).map(|r| match r {
                Ok(Ok(md)) => Ok(md),
                Ok(Err(e)) => Err(*e),
                Err(_) => Err(ProducerError::Closed),
            }),
            Err(e) => Poll::Ready(Err(e.take().map_or(ProducerError::Closed, |e| *e))),
        }
    }
}

/// Producer metrics (KIP-1289's share-ack-txn-send-rate and
/// share-ack-txn-send-error-rate, as rates per second since creation, and
/// their totals; Java's buffer-total-bytes, buffer-available-bytes and
/// buffer-exhausted-total).
#[derive(Debug)]
pub struct ProducerMetrics {
    created: std::time::Instant,
    share_ack_txn_sends: AtomicU64,
    share_ack_txn_send_errors: AtomicU64,
    memory: Arc<BufferMemory>,
}

impl ProducerMetrics {
    fn new(memory: Arc<BufferMemory>) -> Self {
        Self {
            created: std::time::Instant::now(),
            share_ack_txn_sends: AtomicU64::new(0),
            share_ack_txn_send_errors: AtomicU64::new(0),
            memory,
        }
    }

    /// A metric by Kafka name: `share-ack-txn-send-rate`,
    /// `share-ack-txn-send-error-rate`, `share-ack-txn-send-total`,
    /// `share-ack-txn-send-error-total`, `buffer-total-bytes`,
    /// `buffer-available-bytes` (`buffer.memory` not held by records),
    /// `buffer-exhausted-total` (sends failed for want of room).
    pub fn get(&self, name: &str) -> Option<f64> {
        let secs = self.created.elapsed().as_secs_f64().max(1e-3);
        let sends = self.share_ack_txn_sends.load(Ordering::Relaxed) as f64;
        let errors = self.share_ack_txn_send_errors.load(Ordering::Relaxed) as f64;
        Some(match name {
            "share-ack-txn-send-rate" => sends / secs,
            "share-ack-txn-send-error-rate" => errors / secs,
            "share-ack-txn-send-total" => sends,
            "share-ack-txn-send-error-total" => errors,
            "buffer-total-bytes" => self.memory.total() as f64,
            "buffer-available-bytes" => self.memory.available() as f64,
            "buffer-exhausted-total" => self.memory.exhausted_total() as f64,
            _ => return None,
        })
    }
}

struct Inner {
    config: ProducerConfig,
    metadata: Arc<Metadata>,
    commands: commands::CommandSender<Command>,
    txn: Arc<Mutex<TransactionManager>>,
    staging: Mutex<Vec<JoinHandle<()>>>,
    coordinator: tokio::sync::Mutex<Option<Arc<BrokerConnection>>>,
    metrics: ProducerMetrics,
    memory: Arc<BufferMemory>,
    /// Whether the coordinator answers DescribeTransactions for our id
    /// (cleared for good at the first refusal).
    completion_probe: AtomicBool,
    /// Whether the first probe after EndTxn goes at once: true until a
    /// first probe finds the transaction still `Prepare*` (Apache Kafka,
    /// which answers EndTxn before its markers), then it waits
    /// [`FIRST_PROBE_DELAY`]. A coordinator that completes before it
    /// answers (ours) keeps the immediate probe, so its producers never
    /// wait the delay.
    first_probe_at_once: AtomicBool,
    /// The topic `send` last looked up, with the metadata generation it
    /// was read at: most applications send to one topic at a time, and the
    /// cache's lookup (a hash of the name under a shared read lock) was a
    /// visible part of `send` at small records.
    last_topic: Mutex<Option<(u64, Arc<TopicMetadata>)>>,
}

impl Inner {
    /// The cached metadata of `name`, as [`Metadata::topic`] gives it.
    fn topic(&self, name: &str) -> Option<Arc<TopicMetadata>> {
        let generation = self.metadata.generation();
        if let Some((g, t)) = &*self.last_topic.lock()
            && *g == generation
            && t.name == name
        {
            return Some(t.clone());
        }
        let t = self.metadata.topic(name)?;
        *self.last_topic.lock() = Some((generation, t.clone()));
        Some(t)
    }
}

/// A Kafka producer. Cheap to clone (shared handle).
#[derive(Clone)]
pub struct Producer {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Producer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Producer")
            .field("transactional_id", &self.inner.config.transactional_id)
            .finish()
    }
}

const COORDINATOR_TYPE_TRANSACTION: i8 = 1;

/// The longest the next transaction's Produce requests are held while the
/// coordinator completes the last one: Kafka's own limit for retrying a
/// partition's addition to a transaction on the broker
/// (`add.partitions.to.txn.retry.backoff.max.ms`, 100 ms). Past it, the
/// requests go out and the broker and the sender's retries take over.
pub const COMPLETION_WAIT_MAX: Duration = Duration::from_millis(100);

/// How long after EndTxn's answer the producer first asks whether the
/// coordinator has completed the transaction (its markers take about a
/// millisecond on Kafka 4.4); see `hold_until_transaction_complete`.
pub const FIRST_PROBE_DELAY: Duration = Duration::from_millis(1);

/// Acknowledgements bound for one leader.
type StagedAcks = Vec<(TopicIdPartition, Vec<AcknowledgementBatch>)>;

impl Producer {
    /// Starts a producer over TCP. An idempotent, non-transactional producer
    /// gets its producer id here; a transactional one in
    /// [`Producer::init_transactions`].
    pub async fn new(config: ProducerConfig) -> Result<Self, ProducerError> {
        let metadata = Arc::new(
            Metadata::new(config.bootstrap_servers.clone(), config.connection.clone())
                .with_retry_backoff(config.retry_backoff),
        );
        Self::with_metadata(config, metadata).await
    }

    /// Starts a producer over an existing metadata cache (shared pool).
    pub async fn with_metadata(
        config: ProducerConfig,
        metadata: Arc<Metadata>,
    ) -> Result<Self, ProducerError> {
        let txn = Arc::new(Mutex::new(TransactionManager::new(
            config.transactional_id.clone(),
        )));
        let (tx, rx) = commands::command_queue();
        let memory = Arc::new(BufferMemory::new(config.buffer_memory));
        let sender = Sender::new(
            config.clone(),
            metadata.clone(),
            txn.clone(),
            memory.clone(),
        );
        tokio::spawn(sender.run(rx));
        let p = Producer {
            inner: Arc::new(Inner {
                config,
                metadata,
                commands: tx,
                txn,
                staging: Mutex::new(Vec::new()),
                coordinator: tokio::sync::Mutex::new(None),
                metrics: ProducerMetrics::new(memory.clone()),
                memory,
                completion_probe: AtomicBool::new(true),
                first_probe_at_once: AtomicBool::new(true),
                last_topic: Mutex::new(None),
            }),
        };
        if p.inner.config.enable_idempotence && p.inner.config.transactional_id.is_none() {
            let req = InitProducerIdRequest::default()
                .with_transactional_id(None)
                .with_transaction_timeout_ms(-1)
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1);
            // Retriable answers (COORDINATOR_LOAD_IN_PROGRESS from a broker
            // that just started, network failures) are retried within
            // max.block.ms; anything else (authentication, authorization)
            // fails at once.
            let deadline = tokio::time::Instant::now() + p.inner.config.max_block;
            let mut backoff = crate::client::Backoff::new(p.inner.config.retry_backoff);
            let resp = loop {
                let res = match p.inner.metadata.send_any(&req).await {
                    Ok(resp) => {
                        ClientError::check("InitProducerId", resp.error_code, None).map(|()| resp)
                    }
                    Err(e) => Err(e),
                };
                match res {
                    Ok(resp) => break resp,
                    Err(e) => {
                        let delay = backoff.next_delay();
                        if !e.is_retriable() || tokio::time::Instant::now() + delay >= deadline {
                            return Err(e.into());
                        }
                        tokio::time::sleep(delay).await;
                    }
                }
            };
            p.set_producer(resp.producer_id.0, resp.producer_epoch);
        }
        Ok(p)
    }

    fn set_producer(&self, id: i64, epoch: i16) {
        self.inner.txn.lock().set_producer(id, epoch);
        let _ = self.inner.commands.send(Command::SetProducer(id, epoch));
    }

    /// The metadata cache.
    pub fn metadata(&self) -> &Arc<Metadata> {
        &self.inner.metadata
    }

    /// Metrics.
    pub fn metrics(&self) -> &ProducerMetrics {
        &self.inner.metrics
    }

    /// The producer id and epoch in use.
    pub fn producer_id_and_epoch(&self) -> (i64, i16) {
        self.inner.txn.lock().producer_id_and_epoch()
    }

    /// The transaction state.
    pub fn transaction_state(&self) -> TxnState {
        self.inner.txn.lock().state()
    }

    /// Hands a record to the producer; the returned future resolves with
    /// its offset once the broker acknowledged it. In a transactional
    /// producer a transaction must be open.
    ///
    /// Returns at once in the usual case. It waits, up to `max.block.ms`
    /// in all, only while the topic's metadata is unknown and while
    /// `buffer.memory` has no room for the record (records held by the
    /// producer, queued or in flight, give their bytes back when their
    /// batch completes). Failures found here come out of the returned
    /// future, as Java's `send` returns a failed future:
    /// [`ProducerError::MetadataTimeout`],
    /// [`ProducerError::BufferExhausted`], [`ProducerError::RecordTooLarge`]
    /// (at once, without waiting), [`ProducerError::Closed`] after
    /// [`Producer::close`]. In a transaction they also make the transaction
    /// abortable: the record is not in it.
    pub async fn send(&self, record: ProducerRecord) -> DeliveryFuture {
        if let Err(e) = self.inner.txn.lock().check_send() {
            return DeliveryFuture::failed(e);
        }
        match self.place(record).await {
            Ok(rx) => DeliveryFuture { inner: Ok(rx) },
            Err(e) => {
                if !matches!(e, ProducerError::Closed | ProducerError::InvalidTxnState(_)) {
                    self.inner.txn.lock().record_error(e.clone());
                }
                DeliveryFuture::failed(e)
            }
        }
    }

    /// `send` after the state check: metadata, partition check, memory,
    /// then the command to the sender.
    async fn place(&self, r: ProducerRecord) -> Result<oneshot::Receiver<Outcome>, ProducerError> {
        let inner = &*self.inner;
        let max_block = inner.config.max_block;
        let size = accumulator::record_size(r.key.as_ref(), r.value.as_ref(), &r.headers);
        if size as u64 > inner.config.max_request_size {
            return Err(ProducerError::RecordTooLargeForRequest {
                record_bytes: size,
                max_request_size: inner.config.max_request_size,
            });
        }
        if size > inner.memory.total() {
            return Err(ProducerError::RecordTooLarge {
                record_bytes: size,
                buffer_memory: inner.memory.total(),
            });
        }
        // Only a wait reads the clock.
        let mut waited_since = None;
        let topic = match inner.topic(&r.topic) {
            Some(t) if t.error.is_ok() && !t.partitions.is_empty() => t,
            _ => {
                waited_since = Some(Instant::now());
                match inner.metadata.wait_for_topic(&r.topic, max_block).await {
                    Ok(t) => t,
                    // A retriable error is the last answer before the time ran out.
                    Err(last) if last.is_retriable() => {
                        return Err(ProducerError::MetadataTimeout {
                            topic: r.topic,
                            max_block_ms: max_block.as_millis() as u64,
                            last: Box::new(last),
                        });
                    }
                    Err(e) => return Err(e.into()),
                }
            }
        };
        if let Some(p) = r.partition {
            let n = topic.partition_count();
            if p < 0 || p >= n {
                return Err(ProducerError::Client(ClientError::Broker {
                    api: "Produce",
                    code: ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
                    message: Some(format!("partition {p} of {} (has {n})", r.topic)),
                }));
            }
        }
        let budget = waited_since.map_or(max_block, |t| max_block.saturating_sub(t.elapsed()));
        let wake = || {
            let _ = inner.commands.send(Command::MemoryWait);
        };
        match inner.memory.reserve_or(size, budget, wake).await {
            Ok(false) => {}
            Ok(true) => waited_since = waited_since.or(Some(Instant::now())),
            Err(ReserveError::TooLarge) => {
                return Err(ProducerError::RecordTooLarge {
                    record_bytes: size,
                    buffer_memory: inner.memory.total(),
                });
            }
            Err(ReserveError::Exhausted) => {
                return Err(ProducerError::BufferExhausted {
                    record_bytes: size,
                    buffer_memory: inner.memory.total(),
                    available: inner.memory.available(),
                    max_block_ms: max_block.as_millis() as u64,
                });
            }
            Err(ReserveError::Closed) => return Err(ProducerError::Closed),
        }
        if waited_since.is_some()
            && let Err(e) = inner.txn.lock().check_send()
        {
            // The transaction moved on (commit or abort began) while this
            // send waited: the record is not part of it.
            inner.memory.release(size);
            return Err(e);
        }
        let (tx, rx) = oneshot::channel();
        let out = Outgoing {
            record: r,
            topic,
            size,
            delivery: tx,
        };
        if inner.commands.send(Command::Send(out)).is_err() {
            inner.memory.release(size);
            return Err(ProducerError::Closed);
        }
        Ok(rx)
    }

    /// Sends everything enqueued so far and waits until each record is
    /// acknowledged or failed.
    pub async fn flush(&self) {
        let (tx, rx) = oneshot::channel();
        if self.inner.commands.send(Command::Flush(tx)).is_ok() {
            let _ = rx.await;
        }
    }

    /// Flushes and stops the background sender. Sends waiting for room in
    /// `buffer.memory` fail with [`ProducerError::Closed`], as do later
    /// sends on clones of this handle.
    pub async fn close(self) {
        self.inner.memory.close();
        self.flush().await;
        for h in self.inner.staging.lock().drain(..) {
            h.abort();
        }
    }

    async fn coordinator(&self, refresh: bool) -> Result<Arc<BrokerConnection>, ProducerError> {
        let mut c = self.inner.coordinator.lock().await;
        if refresh || c.is_none() {
            let id = self
                .inner
                .config
                .transactional_id
                .clone()
                .unwrap_or_default();
            let b = self
                .inner
                .metadata
                .find_coordinator(
                    COORDINATOR_TYPE_TRANSACTION,
                    &id,
                    self.inner.config.max_block,
                )
                .await?;
            *c = Some(b);
        }
        Ok(c.clone().expect("set above"))
    }

    /// Sends `make()` to the transaction coordinator, retrying
    /// CONCURRENT_TRANSACTIONS, COORDINATOR_LOAD_IN_PROGRESS and network
    /// failures with backoff, and rediscovering the coordinator on
    /// NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE, until
    /// `transaction.timeout.ms`.
    ///
    /// `attempt` returns an owned future (not an async closure borrowing
    /// its captures), so that the futures of `init_transactions`,
    /// `commit_transaction` and `abort_transaction` are `Send` for every
    /// lifetime and can run in spawned tasks.
    async fn coordinator_call<T, Fut>(
        &self,
        api: &'static str,
        mut attempt: impl FnMut(Arc<BrokerConnection>) -> Fut,
    ) -> Result<T, ProducerError>
    where
        Fut: Future<Output = Result<T, ClientError>>,
    {
        let deadline = Instant::now() + self.inner.config.transaction_timeout;
        let mut backoff = Backoff::new(self.inner.config.retry_backoff);
        let mut refresh = false;
        // A request that failed without an answer (timeout, lost
        // connection) may have been applied; it is sent once more even
        // past the deadline, so that a process paused in the middle of the
        // call (its deadline passed while it was stopped) asks the
        // coordinator before it gives up.
        let mut asked_again = false;
        loop {
            let coord = self.coordinator(refresh).await?;
            match attempt(coord).await {
                Ok(t) => return Ok(t),
                Err(e) if retry_at_coordinator(&e) => {
                    if Instant::now() >= deadline {
                        if asked_again || !e.is_unanswered() {
                            return Err(e.into());
                        }
                        asked_again = true;
                    }
                    refresh = e.invalidates_metadata();
                    tracing::debug!(api, error = %e, "retrying transaction coordinator request");
                    tokio::time::sleep(backoff.next_delay()).await;
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// InitProducerId with the `transactional.id`: fences older producers
    /// with the same id and completes their open transaction.
    pub async fn init_transactions(&self) -> Result<(), ProducerError> {
        self.inner.txn.lock().begin_init()?;
        let coord = self.coordinator(false).await?;
        let conn = coord.connection().await?;
        let tv = conn
            .versions()
            .finalized_feature("transaction.version")
            .unwrap_or(0);
        if tv < 2 {
            return Err(ClientError::UnsupportedVersion {
                api_key: 26,
                api_name: "EndTxn",
                detail: format!(
                    "the broker finalized transaction.version={tv}; this client needs transactions v2"
                ),
            }
            .into());
        }
        let tid = self
            .inner
            .config
            .transactional_id
            .clone()
            .unwrap_or_default();
        let timeout_ms = self.inner.config.transaction_timeout.as_millis() as i32;
        let resp = self
            .coordinator_call("InitProducerId", |c: Arc<BrokerConnection>| {
                let tid = tid.clone();
                async move {
                    let req = InitProducerIdRequest::default()
                        .with_transactional_id(Some(TransactionalId(StrBytes::from_string(
                            tid.clone(),
                        ))))
                        .with_transaction_timeout_ms(timeout_ms)
                        .with_producer_id(ProducerId(-1))
                        .with_producer_epoch(-1);
                    let r = c.send(&req).await?;
                    ClientError::check("InitProducerId", r.error_code, None)?;
                    Ok(r)
                }
            })
            .await;
        match resp {
            Ok(r) => {
                self.set_producer(r.producer_id.0, r.producer_epoch);
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// Opens a transaction (no request is sent).
    pub fn begin_transaction(&self) -> Result<(), ProducerError> {
        self.inner.txn.lock().begin()
    }

    /// Stages share acknowledgements in the open transaction (KIP-1289).
    ///
    /// Takes a [`ShareAcknowledgements`] (from
    /// `ShareConsumer::acknowledgements_for_transaction`, the KIP author's
    /// branch API) or, as the KIP text has it, a map of batches per share
    /// partition (it converts).
    ///
    /// Checks first, before any byte is written: a transaction is open on a
    /// transactional producer; every type is ACCEPT, REJECT or GAP (else
    /// [`ProducerError::InvalidRecordState`]); each partition's leader
    /// supports TxnShareAcknowledge (else the fatal
    /// [`ClientError::UnsupportedVersion`]). Then one request per leader is
    /// sent in the background; this returns once they are enqueued. Their
    /// errors surface at [`Producer::commit_transaction`].
    pub async fn send_share_acknowledgements_to_transaction(
        &self,
        acknowledgements: impl Into<ShareAcknowledgements>,
        group_metadata: &ShareGroupMetadata,
    ) -> Result<(), ProducerError> {
        let acknowledgements = acknowledgements.into().into_acknowledgements();
        {
            let t = self.inner.txn.lock();
            if t.transactional_id().is_none() {
                return Err(ProducerError::InvalidTxnState(
                    "send_share_acknowledgements_to_transaction needs a transactional.id".into(),
                ));
            }
            if t.state() != TxnState::InTransaction {
                return Err(ProducerError::InvalidTxnState(format!(
                    "send_share_acknowledgements_to_transaction called in state {:?}",
                    t.state()
                )));
            }
        }
        for (tp, batches) in &acknowledgements {
            for b in batches {
                if let Some(bad) = b.acknowledge_types.iter().find(|t| !t.is_transactional()) {
                    return Err(ProducerError::InvalidRecordState(format!(
                        "{tp}: acknowledge type {bad:?} at offsets {}..={} cannot be staged in a transaction (only ACCEPT, REJECT and GAP)",
                        b.first_offset, b.last_offset
                    )));
                }
            }
        }
        // Group by current leader.
        let mut by_leader: BTreeMap<i32, (Arc<BrokerConnection>, StagedAcks)> = BTreeMap::new();
        for (tp, batches) in acknowledgements {
            if batches.is_empty() {
                continue;
            }
            self.inner
                .metadata
                .wait_for_topic(&tp.topic, self.inner.config.max_block)
                .await?;
            let leader = self
                .inner
                .metadata
                .leader(&tp.topic, tp.partition)
                .ok_or_else(|| ClientError::Broker {
                    api: "TxnShareAcknowledge",
                    code: ErrorCode::LEADER_NOT_AVAILABLE,
                    message: Some(tp.to_string()),
                })?;
            by_leader
                .entry(leader.node_id())
                .or_insert_with(|| (leader, Vec::new()))
                .1
                .push((tp, batches));
        }
        for (conn, _) in by_leader.values() {
            let c = conn.connection().await?;
            if let Err(e) = c.versions().version_for(TXN_SHARE_ACKNOWLEDGE_API_KEY) {
                let err = ProducerError::Client(e.into());
                self.inner.txn.lock().record_error(err.clone());
                return Err(err);
            }
        }
        let (pid, epoch) = {
            let mut t = self.inner.txn.lock();
            t.check_send()?;
            t.producer_id_and_epoch()
        };
        for (_, (conn, parts)) in by_leader {
            let mut topics: Vec<TxnShareAcknowledgeTopic> = Vec::new();
            for (tp, batches) in parts {
                let p = TxnShareAcknowledgePartition {
                    partition_index: tp.partition,
                    acknowledgement_batches: batches.iter().map(|b| b.to_wire()).collect(),
                };
                match topics.iter_mut().find(|t| t.topic_id == tp.topic_id) {
                    Some(t) => t.partitions.push(p),
                    None => topics.push(TxnShareAcknowledgeTopic {
                        topic_id: tp.topic_id,
                        partitions: vec![p],
                    }),
                }
            }
            let req = TxnShareAcknowledgeRequest {
                transactional_id: self.inner.config.transactional_id.clone(),
                group_id: Some(group_metadata.group_id().to_string()),
                producer_id: pid,
                producer_epoch: epoch,
                member_id: Some(group_metadata.member_id().to_string()),
                member_epoch: group_metadata.member_epoch(),
                topics,
            };
            let inner = self.inner.clone();
            let handle = tokio::spawn(async move {
                inner
                    .metrics
                    .share_ack_txn_sends
                    .fetch_add(1, Ordering::Relaxed);
                let outcome = match conn.send(&req).await {
                    Err(e) => Some(ProducerError::Client(e)),
                    Ok(resp) => {
                        let top = ClientError::check("TxnShareAcknowledge", resp.error_code, None);
                        let part = resp
                            .responses
                            .iter()
                            .flat_map(|t| t.partitions.iter().map(move |p| (t.topic_id, p)))
                            .find(|(_, p)| p.error_code != 0)
                            .map(|(id, p)| ClientError::Broker {
                                api: "TxnShareAcknowledge",
                                code: ErrorCode(p.error_code),
                                message: Some(format!(
                                    "topic id {id} partition {}{}",
                                    p.partition_index,
                                    p.error_message
                                        .as_ref()
                                        .map(|m| format!(": {m}"))
                                        .unwrap_or_default()
                                )),
                            });
                        top.err().or(part).map(ProducerError::Client)
                    }
                };
                if let Some(e) = outcome {
                    inner
                        .metrics
                        .share_ack_txn_send_errors
                        .fetch_add(1, Ordering::Relaxed);
                    if e.invalidates_metadata_hint() {
                        for t in &req.topics {
                            if let Some(m) = inner.metadata.cluster().topic_by_id(t.topic_id) {
                                inner.metadata.invalidate(&m.name);
                            }
                        }
                    }
                    inner.txn.lock().record_error(e);
                }
            });
            self.inner.staging.lock().push(handle);
        }
        Ok(())
    }

    async fn wait_outstanding(&self) {
        self.flush().await;
        let handles: Vec<JoinHandle<()>> = self.inner.staging.lock().drain(..).collect();
        for h in handles {
            let _ = h.await;
        }
    }

    /// Commits: waits for every outstanding send and staging request, fails
    /// with their first error (abortable or fatal), then sends EndTxn v5
    /// (commit) and adopts the bumped epoch it returns.
    pub async fn commit_transaction(&self) -> Result<(), ProducerError> {
        self.inner.txn.lock().begin_commit()?;
        self.wait_outstanding().await;
        if let Some(e) = self.inner.txn.lock().commit_blocked() {
            return Err(e);
        }
        self.end_transaction(true).await
    }

    /// Aborts: unsent records fail, in-flight ones and staging requests are
    /// awaited, then EndTxn v5 (abort).
    pub async fn abort_transaction(&self) -> Result<(), ProducerError> {
        self.inner.txn.lock().begin_abort()?;
        let (tx, rx) = oneshot::channel();
        let aborted = ProducerError::Abortable(Box::new(ProducerError::InvalidTxnState(
            "the transaction was aborted".into(),
        )));
        if self
            .inner
            .commands
            .send(Command::FailQueued(aborted, tx))
            .is_ok()
        {
            let _ = rx.await;
        }
        self.wait_outstanding().await;
        self.end_transaction(false).await
    }

    async fn end_transaction(&self, committed: bool) -> Result<(), ProducerError> {
        let (has_work, (pid, epoch)) = {
            let t = self.inner.txn.lock();
            (t.has_work(), t.producer_id_and_epoch())
        };
        if !has_work {
            self.inner.txn.lock().set_producer(pid, epoch);
            return Ok(());
        }
        let tid = self
            .inner
            .config
            .transactional_id
            .clone()
            .unwrap_or_default();
        // Fault tests (no-ops without `failpoints`): EndTxn(commit) never
        // reaches the coordinator, or its answer is lost, and the retries
        // run out either way.
        let unanswered = || {
            Err(ProducerError::Client(ClientError::Timeout {
                api: "EndTxn",
                correlation_id: -1,
            }))
        };
        let request_lost = committed && crate::failpoints::hit("producer.end_txn_request_lost");
        let result = if request_lost {
            unanswered()
        } else {
            self.coordinator_call("EndTxn", |c: Arc<BrokerConnection>| {
                let tid = tid.clone();
                async move {
                    let req = EndTxnRequest::default()
                        .with_transactional_id(TransactionalId(StrBytes::from_string(tid.clone())))
                        .with_producer_id(ProducerId(pid))
                        .with_producer_epoch(epoch)
                        .with_committed(committed);
                    let r = c.connection().await?.send_with_version(&req, 5).await?;
                    ClientError::check("EndTxn", r.error_code, None)?;
                    Ok(r)
                }
            })
            .await
        };
        let result = match result {
            Ok(_) if committed && crate::failpoints::hit("producer.end_txn_answer_lost") => {
                unanswered()
            }
            r => r,
        };
        match result {
            Ok(r) => {
                let (id, ep) = if r.producer_id.0 >= 0 {
                    (r.producer_id.0, r.producer_epoch)
                } else {
                    (pid, epoch)
                };
                self.set_producer(id, ep);
                self.hold_until_transaction_complete(tid);
                Ok(())
            }
            Err(e) => {
                let e = match e {
                    ProducerError::Client(ClientError::Broker {
                        code: ErrorCode::INVALID_PRODUCER_EPOCH,
                        api,
                        message,
                    }) => ProducerError::Client(ClientError::Broker {
                        api,
                        code: ErrorCode::PRODUCER_FENCED,
                        message,
                    }),
                    // Retries ran out: whether an attempt reached the
                    // coordinator is unknown.
                    ProducerError::Client(c) if retry_at_coordinator(&c) => {
                        ProducerError::OutcomeUnknown {
                            committed,
                            last: Box::new(ProducerError::Client(c)),
                        }
                    }
                    e => e,
                };
                self.inner.txn.lock().end_failed(e.clone());
                Err(e)
            }
        }
    }

    /// Holds the next transaction's Produce requests until the coordinator
    /// has completed the transaction just ended.
    ///
    /// EndTxn is answered once the outcome is durable, before the markers
    /// are written (`PrepareCommit`/`PrepareAbort`). A Produce of the next
    /// transaction that reaches Kafka in that window is not refused: the
    /// partition leader retries adding the partition to the transaction
    /// after `add.partitions.to.txn.retry.backoff.ms` (20 ms). A producer
    /// that sends its next batch at once therefore pays 20 ms on most
    /// transactions, for markers that take about a millisecond.
    ///
    /// So, after EndTxn, the sender holds its Produce requests (records
    /// are still taken and batched) while a task asks the coordinator for
    /// the transaction's state with DescribeTransactions: at once until a
    /// first probe has found the transaction still `Prepare*`, after
    /// [`FIRST_PROBE_DELAY`] from then on; again after each answer that is
    /// still `Prepare*` (pauses of 1, 2, 4 and then 8 ms), and never past
    /// [`COMPLETION_WAIT_MAX`]. (On Apache Kafka a probe sent at once is
    /// answered `Prepare*` nearly every time, since EndTxn is answered
    /// before the markers are written: that made 2.1 probes per
    /// transaction on Kafka 4.4, each a request its network threads pay
    /// for; docs/BENCHMARKS.md, session 25.)
    /// Any other state,
    /// an error or the limit ends the hold; a refusal (authorization, no
    /// such API) also turns the probe off for this producer. The hold only
    /// delays sending, so nothing here bears on what is written.
    fn hold_until_transaction_complete(&self, transactional_id: String) {
        if !self.inner.completion_probe.load(Ordering::Relaxed) {
            return;
        }
        let (done, until) = oneshot::channel::<()>();
        if self.inner.commands.send(Command::Hold(until)).is_err() {
            return;
        }
        let weak = Arc::downgrade(&self.inner);
        tokio::spawn(async move {
            let started = Instant::now();
            let mut attempt = 0u32;
            let at_once = weak
                .upgrade()
                .is_some_and(|i| i.first_probe_at_once.load(Ordering::Relaxed));
            if !at_once {
                tokio::time::sleep(FIRST_PROBE_DELAY).await;
            }
            loop {
                let Some(inner) = weak.upgrade() else { break };
                let p = Producer { inner };
                // A coordinator that does not answer in time ends the hold
                // too (the probe's own request may wait much longer).
                let left = COMPLETION_WAIT_MAX.saturating_sub(started.elapsed());
                let state =
                    tokio::time::timeout(left, p.coordinator_transaction_state(&transactional_id))
                        .await
                        .unwrap_or(Err(false));
                match state {
                    Ok(state) if state == "PrepareCommit" || state == "PrepareAbort" => {
                        if attempt == 0 && at_once {
                            p.inner.first_probe_at_once.store(false, Ordering::Relaxed);
                        }
                    }
                    Ok(_) => break,
                    Err(refused) => {
                        if refused {
                            p.inner.completion_probe.store(false, Ordering::Relaxed);
                        }
                        break;
                    }
                }
                drop(p);
                let pause = Duration::from_millis(1 << attempt.min(3));
                attempt += 1;
                if started.elapsed() + pause >= COMPLETION_WAIT_MAX {
                    break;
                }
                tokio::time::sleep(pause).await;
            }
            let _ = done.send(());
        });
    }

    /// The coordinator's name for the state of `transactional_id`'s
    /// transaction. `Err(true)`: the coordinator refuses to say (the probe
    /// should stop); `Err(false)`: no answer this time.
    async fn coordinator_transaction_state(&self, transactional_id: &str) -> Result<String, bool> {
        let coord = self.coordinator(false).await.map_err(|_| false)?;
        let conn = coord.connection().await.map_err(|_| false)?;
        let req =
            DescribeTransactionsRequest::default().with_transactional_ids(vec![TransactionalId(
                StrBytes::from_string(transactional_id.to_string()),
            )]);
        let resp = match conn.send(&req).await {
            Ok(r) => r,
            Err(ClientError::UnsupportedVersion { .. }) => return Err(true),
            Err(_) => return Err(false),
        };
        let Some(s) = resp.transaction_states.into_iter().next() else {
            return Err(false);
        };
        match ErrorCode(s.error_code) {
            ErrorCode::NONE => Ok(s.transaction_state.to_string()),
            ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED => Err(true),
            _ => Err(false),
        }
    }

    /// The `buffer.memory` budget: its total and the bytes free now.
    pub fn buffer_memory(&self) -> &BufferMemory {
        &self.inner.memory
    }

    /// The configuration.
    pub fn config(&self) -> &ProducerConfig {
        &self.inner.config
    }
}

/// Whether a coordinator request is retried: the retriable errors of the
/// error table, plus CONCURRENT_TRANSACTIONS, which Kafka does not flag
/// retriable but its producer retries (the previous transaction is still
/// completing).
fn retry_at_coordinator(e: &ClientError) -> bool {
    e.is_retriable()
        || matches!(
            e,
            ClientError::Broker {
                code: ErrorCode::CONCURRENT_TRANSACTIONS,
                ..
            }
        )
}

impl ProducerError {
    fn invalidates_metadata_hint(&self) -> bool {
        match self {
            ProducerError::Client(c) => c.invalidates_metadata(),
            _ => false,
        }
    }
}
