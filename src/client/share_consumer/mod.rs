//! The share consumer (KIP-932), with the hooks KIP-1289 transactions need.
//!
//! # Start-up and membership
//!
//! A background task owns the group membership ([`membership::Membership`]):
//! it finds the coordinator (FindCoordinator, key type 0 GROUP), joins with
//! ShareGroupHeartbeat at epoch 0 under a member id the client generated (a
//! UUID string), heartbeats every HeartbeatIntervalMs, and takes the
//! assignment (by topic id). After every answer it publishes a
//! [`MemberView`] (the [`ShareGroupMetadata`] snapshot and the assignment)
//! through a `tokio::sync::watch` channel, so
//! [`ShareConsumer::share_group_metadata`] is a cheap read that is safe at
//! any time, also from another task while a poll runs
//! ([`ShareConsumer::metadata_handle`]).
//!
//! # Poll
//!
//! [`ShareConsumer::poll`] first applies the acknowledgement rules of
//! [`state`] (implicit mode accepts the previous poll's records; explicit
//! mode refuses to poll while some are not acknowledged), then hands out
//! records of aborted transactions (see below), then fetches: the topic ids
//! of the assignment are resolved to names and leaders
//! ([`lookup::ClusterLookup`]: the consumer's own [`BootstrapLookup`], or
//! the shared [`Metadata`](crate::client::Metadata) cache with
//! [`ShareConsumer::with_metadata`]), and one ShareFetch goes to every leader at
//! once, each in its own share session ([`state::ShareSession`]: epoch 0
//! opens, then it increments; -1 closes). A request lists the partitions
//! new to the session and those carrying acknowledgements, and forgets the
//! ones no longer assigned. Pending acknowledgements ride on the fetch when
//! the session epoch is non-zero; acknowledgements for partitions the fetch
//! does not cover go in a ShareAcknowledge to that leader first; those of
//! an acquired range only partly acknowledged wait one request for the
//! rest of it, so that the broker gets the range whole (D39, [`state`]).
//! Acquired
//! offsets without data are acknowledged as GAP automatically (D5). A poll
//! waits until records arrive or its timeout passes; each fetch asks for at
//! most `max.poll.records` minus what the poll already holds, and records
//! beyond `max.poll.records` wait in a buffer for the next poll. A fetch
//! asks for at most `max.partition.fetch.bytes` per partition (within
//! `fetch.max.bytes`): ShareFetch has no per-partition limit, and Kafka's
//! broker works through every batch of the bytes asked for (D38).
//!
//! A poll that returns a full `max.poll.records` starts the next poll's
//! fetch before it returns (a *prefetch*, one spawned task): it carries the
//! acknowledgements pending at that moment and runs while the application
//! works on the records, so a consumer with a backlog does not wait a round
//! trip per poll. The next poll takes its records first; the
//! acknowledgements of the records just returned ride on the fetch after
//! it. Prefetched records are acquired, and their locks run, from then on.
//! A poll that is not full starts nothing, and `close` releases prefetched
//! records that were never handed out (they are still acquired by the
//! session it closes). See D21 in docs/DESIGN.md.
//!
//! # Acknowledgement commits
//!
//! [`ShareConsumer::commit_sync`] sends the pending acknowledgements with
//! ShareAcknowledge and returns one result per share partition;
//! [`ShareConsumer::commit_async`] does the same in a spawned task and
//! returns a handle to await. As in Kafka, the results of every
//! acknowledgement sent (by commits and piggy-backed on fetches) are also
//! given to the acknowledgement commit callback, which runs on the caller's
//! task during `poll`, `commit_sync` and `close`. Results of
//! acknowledgements sent before a callback was set are not kept (a consumer
//! without a callback does no bookkeeping per acknowledged offset).
//!
//! # Transactions (KIP-1289)
//!
//! In explicit mode, [`ShareConsumer::acknowledge_in_transaction`] takes a
//! record out of the consumer's own acknowledgement path (D8: the producer
//! stages it, the consumer never sends it), and
//! [`ShareConsumer::take_transaction_acknowledgements`] seals those
//! acknowledgements for the producer's TxnShareAcknowledge. When the
//! transaction ends, [`ShareConsumer::transaction_outcome`] tells the
//! consumer: after a commit it forgets the records; after an abort on a
//! broker that puts them back to ACQUIRED for this member
//! (`group.share.transaction.abort.record.state=acquired`, D6/D25) the next
//! poll hands them out again, as the KIP's pseudo code promises; where the
//! broker makes them AVAILABLE (the default) report
//! [`TransactionOutcome::Abandoned`] and a fetch brings them back. `close`
//! leaves records whose transaction is undecided alone: the transaction
//! decides them. With [`ShareConsumer::set_gaps_in_transaction`] the
//! offsets acquired without data are sealed into the transaction as GAP
//! (D5).
//!
//! The KIP author's branch API is here too:
//! [`ShareConsumer::acknowledgements_for_transaction`] takes what
//! [`ShareConsumer::acknowledge`] recorded (and the gaps) as
//! [`ShareAcknowledgements`] for the producer, keeping nothing.
//!
//! # Close
//!
//! [`ShareConsumer::close`] accepts the waiting records in implicit mode,
//! sends the final acknowledgements with ShareAcknowledge at epoch -1
//! (closing every share session; the broker releases records still
//! acquired), then leaves the group (heartbeat at epoch -1).
//!
//! # Versions and acquire modes
//!
//! ShareFetch and ShareAcknowledge go at version 2 where the broker has it
//! (Kafka 4.2+, our broker), else version 1. `share.acquire.mode`
//! `record_limit` (KIP-1206) asks the broker to acquire at most
//! `max.poll.records` records per fetch; it needs version 2, and a broker
//! without it fails the poll with an error naming the setting.
//!
//! # Not done
//!
//! No `wakeup` (drop the poll future instead; acknowledgements taken into a
//! request that is dropped are lost, and their records come back after the
//! acquisition lock expires), no rack awareness, no client telemetry.
//!
//! # Renewing locks
//!
//! [`ShareConsumer::renew`] (or RENEW given to `acknowledge`) keeps a
//! record that takes long to process: the renewal goes out with the next
//! commit and restarts its acquisition lock (KIP-1222, ShareAcknowledge
//! version 2). Renewed records still need their final acknowledgement
//! before the next poll in explicit mode.

pub mod config;
pub mod error;
pub mod lookup;
pub mod membership;
pub mod metrics;
pub mod record;
pub mod state;

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::time::Duration;

use kafka_protocol::messages::share_acknowledge_request::{
    AcknowledgePartition, AcknowledgeTopic, AcknowledgementBatch as AckReqBatch,
};
use kafka_protocol::messages::share_fetch_request::{
    AcknowledgementBatch as FetchAckBatch, FetchPartition, FetchTopic, ForgottenTopic,
};
use kafka_protocol::messages::{GroupId, ShareAcknowledgeRequest, ShareFetchRequest};

use crate::protocol::share::AcquireMode;
use crate::protocol::share_v2::{ShareAcknowledgeV2Request, ShareFetchV2Request};
use kafka_protocol::protocol::StrBytes;
use parking_lot::Mutex;
use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use uuid::Uuid;

pub use config::{
    AcknowledgementMode, ConfigError, ShareConsumerConfig, ShareConsumerConfigBuilder,
};
pub use error::ConsumerError;
pub use lookup::{BootstrapLookup, BrokerAddress, ClusterLookup, ClusterView};
pub use membership::{Assignment, MemberState};
pub use metrics::ShareConsumerMetrics;
pub use record::{ShareRecord, ShareRecords};
pub use state::{TransactionAcknowledgements, TransactionAcknowledgementsId, TransactionOutcome};

use crate::client::backoff::BackoffConfig;
use crate::client::broker_connection::BrokerPool;
use crate::client::error::ClientError;
use crate::eos::{
    AcknowledgeType, Acknowledgements, PartitionAcknowledgements, ShareAcknowledgements,
    ShareGroupMetadata, TopicIdPartition,
};
use crate::protocol::ErrorCode;
use crate::protocol::records::DEFAULT_MAX_DECOMPRESSED;
use membership::{HeartbeatOutcome, Membership};
use record::{AcquiredRange, decode_partition};
use state::{AcknowledgementState, ShareSession};

/// What the membership task publishes after each heartbeat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberView {
    /// The member identity snapshot.
    pub metadata: ShareGroupMetadata,
    /// The assignment.
    pub assignment: Assignment,
    /// The membership state.
    pub state: MemberState,
    /// Why the membership failed, if it did.
    pub fatal: Option<String>,
}

/// The result of committing the acknowledgements of one share partition.
#[derive(Debug, Clone)]
pub struct AcknowledgementCommit {
    /// The share partition.
    pub partition: TopicIdPartition,
    /// The offsets acknowledged, gaps included.
    pub offsets: Vec<i64>,
    /// `None` on success.
    pub error: Option<ConsumerError>,
}

/// Per-partition outcome of a commit.
pub type CommitResults = BTreeMap<TopicIdPartition, Result<(), ConsumerError>>;

/// The acknowledgement commit callback (Kafka's
/// `AcknowledgementCommitCallback`).
pub type AcknowledgementCommitCallback = Box<dyn FnMut(&AcknowledgementCommit) + Send>;

/// A cheap, cloneable reader of the member identity, for other tasks (the
/// producer staging acknowledgements) while the consumer polls.
#[derive(Debug, Clone)]
pub struct ShareGroupMetadataHandle {
    view: watch::Receiver<MemberView>,
    inner: Arc<Inner>,
}

impl ShareGroupMetadataHandle {
    /// The current snapshot (counted in `share-group-metadata-fetch-rate`).
    pub fn share_group_metadata(&self) -> ShareGroupMetadata {
        self.inner.metrics.on_metadata_fetch(Instant::now());
        self.view.borrow().metadata.clone()
    }
}

type SessionCell = Arc<tokio::sync::Mutex<LeaderSession>>;

#[derive(Debug, Default)]
struct LeaderSession {
    session: ShareSession,
    partitions: BTreeSet<TopicIdPartition>,
}

/// State shared with the membership task and async commits.
struct Inner {
    group_id: String,
    member_id: String,
    membership: Mutex<Membership>,
    wake: Notify,
    view: watch::Sender<MemberView>,
    lookup: Arc<dyn ClusterLookup>,
    pool: Arc<BrokerPool>,
    metrics: ShareConsumerMetrics,
    /// Results for the acknowledgement commit callback, kept only while
    /// one is set (`wants_results`), so that a consumer without a callback
    /// does not list every acknowledged offset again.
    completed: Mutex<Vec<AcknowledgementCommit>>,
    wants_results: AtomicBool,
    lock_timeout_ms: AtomicI32,
    request_timeout: Duration,
    acquire_mode: AcquireMode,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inner")
            .field("group_id", &self.group_id)
            .field("member_id", &self.member_id)
            .finish()
    }
}

impl Inner {
    /// Keeps `results` for the acknowledgement commit callback, if one is
    /// set.
    fn record_results(&self, results: &[AcknowledgementCommit]) {
        if self.wants_results.load(Ordering::Relaxed) {
            self.completed.lock().extend(results.iter().cloned());
        }
    }

    fn publish(&self) {
        let m = self.membership.lock();
        let view = MemberView {
            metadata: m.metadata(),
            assignment: m.assignment().clone(),
            state: m.state(),
            fatal: m.fatal().map(str::to_string),
        };
        drop(m);
        self.view.send_if_modified(|v| {
            if *v == view {
                false
            } else {
                *v = view;
                true
            }
        });
    }
}

/// `share.acquire.mode=record_limit` needs ShareFetch v2 (Kafka 4.2+); a
/// broker without it is refused with a message naming the setting rather
/// than silently handed whole batches.
fn record_limit_unsupported(
    conn: &crate::client::connection::Connection,
    mode: AcquireMode,
) -> Option<ClientError> {
    if mode == AcquireMode::BatchOptimized {
        return None;
    }
    match conn.versions().version_for_type::<ShareFetchV2Request>() {
        Ok(v) if v >= 2 => None,
        Ok(v) => Some(ClientError::UnsupportedVersion {
            api_key: 78,
            api_name: "ShareFetch",
            detail: format!(
                "share.acquire.mode=record_limit needs ShareFetch version 2 (Kafka 4.2 or later), \
                 this broker speaks version {v}; set share.acquire.mode=batch_optimized"
            ),
        }),
        Err(_) => None,
    }
}

async fn membership_task(inner: Arc<Inner>) {
    let mut coordinator: Option<BrokerAddress> = None;
    loop {
        let now = Instant::now();
        let (req, next) = {
            let mut m = inner.membership.lock();
            (m.poll_heartbeat(now), m.next_heartbeat_at())
        };
        let Some(req) = req else {
            let notified = inner.wake.notified();
            match next {
                Some(at) => {
                    tokio::select! {
                        _ = tokio::time::sleep_until(at) => {}
                        _ = notified => {}
                    }
                }
                None => notified.await,
            }
            continue;
        };
        let result = async {
            if coordinator.is_none() {
                coordinator = Some(inner.lookup.find_coordinator(&inner.group_id).await?);
            }
            let c = coordinator.clone().expect("set above");
            inner.pool.broker(c.node_id, &c.address).send(&req).await
        }
        .await;
        let outcome = {
            let mut m = inner.membership.lock();
            match &result {
                Ok(resp) => m.on_response(Instant::now(), resp),
                Err(e) => m.on_failure(Instant::now(), e.is_retriable(), &e.to_string()),
            }
        };
        match outcome {
            HeartbeatOutcome::FindCoordinator => coordinator = None,
            HeartbeatOutcome::Fatal(reason) => {
                tracing::error!(group = %inner.group_id, %reason, "share group membership failed")
            }
            HeartbeatOutcome::Ok => {}
        }
        inner.publish();
    }
}

/// A share group consumer. See the module documentation.
pub struct ShareConsumer {
    config: ShareConsumerConfig,
    inner: Arc<Inner>,
    view: watch::Receiver<MemberView>,
    acks: AcknowledgementState,
    sessions: HashMap<i32, SessionCell>,
    /// Shared with each fetch round's leader jobs (no copy per poll).
    cluster: Arc<ClusterView>,
    buffered: VecDeque<ShareRecord>,
    /// The fetch a full poll started for the next one (see [`Self::poll`]).
    prefetch: Option<JoinHandle<Vec<LeaderFetchResult>>>,
    callback: Option<AcknowledgementCommitCallback>,
    task: JoinHandle<()>,
    closed: bool,
}

impl std::fmt::Debug for ShareConsumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShareConsumer")
            .field("group_id", &self.inner.group_id)
            .field("member_id", &self.inner.member_id)
            .field("closed", &self.closed)
            .finish()
    }
}

impl Drop for ShareConsumer {
    fn drop(&mut self) {
        self.task.abort();
        if let Some(p) = self.prefetch.take() {
            p.abort();
        }
    }
}

impl ShareConsumer {
    /// A consumer reaching brokers over TCP from `bootstrap.servers`. Must
    /// be called inside a tokio runtime (it spawns the membership task).
    pub fn new(config: ShareConsumerConfig) -> Result<Self, ConsumerError> {
        let pool = Arc::new(BrokerPool::tcp(config.connection_config()));
        let lookup = Arc::new(BootstrapLookup::new(
            pool.clone(),
            config.bootstrap_servers.clone(),
        ));
        Self::with_parts(config, pool, lookup)
    }

    /// A consumer whose coordinator and leader lookups go through the
    /// shared metadata cache `metadata` (e.g. the one of a
    /// [`Producer`](crate::client::Producer), so both see the same
    /// cluster); fetches use the consumer's own connections. Must be called
    /// inside a tokio runtime.
    pub fn with_metadata(
        config: ShareConsumerConfig,
        metadata: Arc<crate::client::metadata::Metadata>,
    ) -> Result<Self, ConsumerError> {
        let pool = Arc::new(BrokerPool::tcp(config.connection_config()));
        Self::with_parts(config, pool, metadata)
    }

    /// A consumer over a given broker pool and cluster lookup (tests, or the
    /// shared metadata cache).
    pub fn with_parts(
        config: ShareConsumerConfig,
        pool: Arc<BrokerPool>,
        lookup: Arc<dyn ClusterLookup>,
    ) -> Result<Self, ConsumerError> {
        config
            .validate()
            .map_err(|e| ConsumerError::InvalidArgument(e.to_string()))?;
        let retry = BackoffConfig::retry().initial;
        let membership = match &config.member_id {
            Some(id) => Membership::with_member_id(config.group_id.clone(), id.clone(), retry),
            None => Membership::new(config.group_id.clone(), retry),
        };
        let member_id = membership.metadata().member_id().to_string();
        let first = MemberView {
            metadata: membership.metadata(),
            assignment: Assignment::new(),
            state: membership.state(),
            fatal: None,
        };
        let (tx, rx) = watch::channel(first);
        let inner = Arc::new(Inner {
            group_id: config.group_id.clone(),
            member_id,
            membership: Mutex::new(membership),
            wake: Notify::new(),
            view: tx,
            lookup,
            pool,
            metrics: ShareConsumerMetrics::default(),
            completed: Mutex::new(Vec::new()),
            wants_results: AtomicBool::new(false),
            lock_timeout_ms: AtomicI32::new(-1),
            request_timeout: config.request_timeout,
            acquire_mode: config.acquire_mode,
        });
        let task = tokio::spawn(membership_task(inner.clone()));
        Ok(Self {
            acks: AcknowledgementState::new(config.acknowledgement_mode),
            config,
            inner,
            view: rx,
            sessions: HashMap::new(),
            cluster: Arc::new(ClusterView::default()),
            buffered: VecDeque::new(),
            prefetch: None,
            callback: None,
            task,
            closed: false,
        })
    }

    fn ensure_open(&self) -> Result<(), ConsumerError> {
        if self.closed {
            Err(ConsumerError::Closed)
        } else {
            Ok(())
        }
    }

    /// Subscribes to `topics`, replacing the subscription; an empty list
    /// unsubscribes.
    pub fn subscribe<S: Into<String>>(
        &mut self,
        topics: impl IntoIterator<Item = S>,
    ) -> Result<(), ConsumerError> {
        self.ensure_open()?;
        self.inner
            .membership
            .lock()
            .subscribe(topics.into_iter().map(Into::into), Instant::now());
        self.inner.publish();
        self.inner.wake.notify_one();
        Ok(())
    }

    /// Leaves the group (the background task sends the epoch -1 heartbeat).
    pub fn unsubscribe(&mut self) -> Result<(), ConsumerError> {
        self.ensure_open()?;
        self.inner.membership.lock().unsubscribe(Instant::now());
        self.inner.publish();
        self.inner.wake.notify_one();
        Ok(())
    }

    /// The subscribed topics.
    pub fn subscription(&self) -> BTreeSet<String> {
        self.inner.membership.lock().subscription().clone()
    }

    /// The current assignment (by topic id).
    pub fn assignment(&self) -> Assignment {
        self.view.borrow().assignment.clone()
    }

    /// The member identity snapshot; cheap, never blocks on a poll.
    pub fn share_group_metadata(&self) -> ShareGroupMetadata {
        self.inner.metrics.on_metadata_fetch(Instant::now());
        self.view.borrow().metadata.clone()
    }

    /// A handle that reads [`Self::share_group_metadata`] from another task.
    pub fn metadata_handle(&self) -> ShareGroupMetadataHandle {
        ShareGroupMetadataHandle {
            view: self.view.clone(),
            inner: self.inner.clone(),
        }
    }

    /// Waits until the membership view changes (e.g. the first assignment).
    pub async fn membership_changed(&mut self) -> MemberView {
        let _ = self.view.changed().await;
        self.view.borrow().clone()
    }

    /// The metrics.
    pub fn metrics(&self) -> &ShareConsumerMetrics {
        &self.inner.metrics
    }

    /// AcquisitionLockTimeoutMs of the latest ShareFetch answer, `None`
    /// before the first.
    pub fn acquisition_lock_timeout_ms(&self) -> Option<i32> {
        let v = self.inner.lock_timeout_ms.load(Ordering::Relaxed);
        (v >= 0).then_some(v)
    }

    /// Sets the acknowledgement commit callback.
    pub fn set_acknowledgement_commit_callback(
        &mut self,
        callback: impl FnMut(&AcknowledgementCommit) + Send + 'static,
    ) {
        self.callback = Some(Box::new(callback));
        self.inner.wants_results.store(true, Ordering::Relaxed);
    }

    fn fire_callbacks(&mut self) {
        if self.callback.is_none() {
            return;
        }
        let done = std::mem::take(&mut *self.inner.completed.lock());
        if let Some(cb) = self.callback.as_mut() {
            for c in &done {
                cb(c);
            }
        }
    }

    fn check_membership(&self) -> Result<(), ConsumerError> {
        match &self.view.borrow().fatal {
            Some(reason) => Err(ConsumerError::Membership(reason.clone())),
            None => Ok(()),
        }
    }

    /// Asks the broker to renew the acquisition lock of a record of the
    /// latest poll (KIP-1222; explicit mode; the same as
    /// `acknowledge(record, AcknowledgeType::Renew)`). The record stays
    /// this consumer's, waiting for its final acknowledgement; the renewal
    /// goes out with the next `commit_sync` or `commit_async`, in a
    /// ShareAcknowledge of its own (version 2, `IsRenewAck`), and the
    /// lock lasts [`Self::acquisition_lock_timeout_ms`] from then. A broker
    /// whose group has `share.renew.acknowledge.enable=false` answers
    /// INVALID_RECORD_STATE for the partition.
    pub fn renew(&mut self, record: &ShareRecord) -> Result<(), ConsumerError> {
        self.ensure_open()?;
        self.acks.renew(&record.topic_id_partition(), record.offset)
    }

    /// Acknowledges a record of the latest poll (explicit mode). RENEW
    /// extends the record's lock instead (see [`Self::renew`]).
    pub fn acknowledge(
        &mut self,
        record: &ShareRecord,
        ty: AcknowledgeType,
    ) -> Result<(), ConsumerError> {
        self.ensure_open()?;
        self.acks.acknowledge_record(record, ty)
    }

    /// Acknowledges a record of the latest poll by topic, partition and
    /// offset (explicit mode).
    pub fn acknowledge_offset(
        &mut self,
        topic: &str,
        partition: i32,
        offset: i64,
        ty: AcknowledgeType,
    ) -> Result<(), ConsumerError> {
        self.ensure_open()?;
        let tp = self.partition_by_name(topic, partition)?;
        self.acks.acknowledge(&tp, offset, ty)
    }

    fn partition_by_name(
        &self,
        topic: &str,
        partition: i32,
    ) -> Result<TopicIdPartition, ConsumerError> {
        self.cluster
            .topics
            .iter()
            .find(|(_, t)| t.name == topic)
            .map(|(id, _)| TopicIdPartition {
                topic_id: *id,
                topic: topic.to_string(),
                partition,
            })
            .ok_or_else(|| {
                ConsumerError::IllegalState(format!(
                    "{topic}-{partition} was not delivered by the latest poll"
                ))
            })
    }

    /// Acknowledges a record of the latest poll (explicit mode) without
    /// sending the acknowledgement yet: it is set aside until
    /// [`Self::take_set_aside`] and [`Self::acknowledge_set_aside`] (for
    /// at-least-once, once the record's outputs are written). The record
    /// counts as acknowledged for the next poll; the consumer keeps no
    /// copy of it. Records set aside and never sent come back after their
    /// acquisition lock.
    pub fn set_aside(
        &mut self,
        record: &ShareRecord,
        ty: AcknowledgeType,
    ) -> Result<(), ConsumerError> {
        self.ensure_open()?;
        self.acks.set_aside(record, ty)
    }

    /// Takes the acknowledgements set aside since the last call.
    pub fn take_set_aside(&mut self) -> PartitionAcknowledgements {
        self.acks.take_set_aside()
    }

    /// Sends acknowledgements taken with [`Self::take_set_aside`], with the
    /// next ShareFetch or commit. Returns how many.
    pub fn acknowledge_set_aside(&mut self, acks: &PartitionAcknowledgements) -> usize {
        self.acks.acknowledge_set_aside(acks)
    }

    /// Takes a record of the latest poll out of the consumer's own
    /// acknowledgement path, to be staged in a transaction (explicit mode;
    /// ACCEPT or REJECT). It counts as acknowledged for the next poll.
    pub fn acknowledge_in_transaction(
        &mut self,
        record: &ShareRecord,
        ty: AcknowledgeType,
    ) -> Result<(), ConsumerError> {
        self.ensure_open()?;
        self.acks.acknowledge_in_transaction(record, ty)
    }

    /// Seals the acknowledgements taken by `acknowledge_in_transaction`
    /// since the last call (with the held gaps, see
    /// [`Self::set_gaps_in_transaction`]), for the producer to stage;
    /// `None` if no record was taken. Report the transaction's end with
    /// [`Self::transaction_outcome`].
    pub fn take_transaction_acknowledgements(&mut self) -> Option<TransactionAcknowledgements> {
        self.acks.take_transaction()
    }

    /// The KIP author's branch API (`acknowledgementsForTransaction`):
    /// takes what was acknowledged with [`Self::acknowledge`] since the last
    /// commit (ACCEPT, REJECT) and the offsets acquired without data (GAP)
    /// out of the consumer's own acknowledgement path, for
    /// [`Producer::send_share_acknowledgements_to_transaction`](crate::client::Producer::send_share_acknowledgements_to_transaction)
    /// together with [`Self::share_group_metadata`]. Records not
    /// acknowledged yet stay waiting. A pending RELEASE fails the call
    /// ([`ConsumerError::IllegalState`] naming the offset) and nothing is
    /// taken. Explicit mode only (D12). The gaps it passes through are
    /// those not sent yet; for every gap to ride in a transaction (none
    /// going out with a full poll's prefetch), turn on
    /// [`Self::set_gaps_in_transaction`] before polling.
    ///
    /// Fire and forget, as on the branch: the consumer keeps nothing of
    /// them. If the transaction aborts, the broker makes the records
    /// AVAILABLE and the next polls fetch them again (the default of
    /// `group.share.transaction.abort.record.state`, D25); a broker set to
    /// `acquired` keeps them for this member until their lock expires. To
    /// have aborted records handed back without a fetch, use
    /// [`Self::acknowledge_in_transaction`],
    /// [`Self::take_transaction_acknowledgements`] and
    /// [`Self::transaction_outcome`] instead.
    pub fn acknowledgements_for_transaction(
        &mut self,
    ) -> Result<ShareAcknowledgements, ConsumerError> {
        self.ensure_open()?;
        self.acks.acknowledgements_for_transaction()
    }

    /// Offsets acquired without data (gaps: control records, records of
    /// aborted transactions under read_committed) ride in the next
    /// transaction sealed by [`Self::take_transaction_acknowledgements`]
    /// instead of going out as ordinary acknowledgements (the KIP author's
    /// branch stages GAP; D5). A poll that begins while no record was taken
    /// into a transaction since the last seal sends the held gaps as
    /// ordinary acknowledgements, and so does `close`. Off by default.
    pub fn set_gaps_in_transaction(&mut self, on: bool) {
        self.acks.set_gaps_in_transaction(on);
    }

    /// Tells the consumer how the transaction holding `id` ended: on abort
    /// its records are handed out again by the next poll; on commit, or on
    /// an abort the broker answered INVALID_RECORD_STATE for
    /// ([`TransactionOutcome::Abandoned`]), they are forgotten. Returns the
    /// number of records concerned.
    pub fn transaction_outcome(
        &mut self,
        id: TransactionAcknowledgementsId,
        outcome: TransactionOutcome,
    ) -> Result<usize, ConsumerError> {
        self.acks.transaction_outcome(id, outcome)
    }

    /// The transaction holding `taken` committed without carrying its
    /// acknowledgements (exactly-once through the intent ledger, where the
    /// transaction is on another cluster or the broker has no KIP-1289):
    /// they are sent now as ordinary acknowledgements, with the next
    /// ShareFetch or commit. Returns how many.
    pub fn acknowledge_after_transaction(
        &mut self,
        taken: &TransactionAcknowledgements,
    ) -> Result<usize, ConsumerError> {
        self.acks.acknowledge_after_transaction(taken)
    }

    /// Returns the next records, waiting up to `timeout` for some.
    pub async fn poll(&mut self, timeout: Duration) -> Result<ShareRecords, ConsumerError> {
        self.ensure_open()?;
        self.fire_callbacks();
        self.check_membership()?;
        self.acks.begin_poll()?;
        let deadline = Instant::now() + timeout;
        let max = self.config.max_poll_records;
        // First, so that a failed prefetch loses no record taken below.
        let prefetched = self.finish_prefetch().await?;
        let mut out = self.acks.take_handed_back(max);
        while out.len() < max {
            match self.buffered.pop_front() {
                Some(r) => out.push(r),
                None => break,
            }
        }
        for r in prefetched {
            if out.len() < max {
                out.push(r);
            } else {
                self.buffered.push_back(r);
            }
        }
        loop {
            if out.len() >= max {
                break;
            }
            let assignment = self.view.borrow().assignment.clone();
            let now = Instant::now();
            let wait = if out.is_empty() {
                deadline
                    .saturating_duration_since(now)
                    .min(self.config.fetch_max_wait)
            } else {
                Duration::ZERO
            };
            let fetched = self.fetch_round(&assignment, max - out.len(), wait).await?;
            let did_fetch = fetched.is_some();
            for r in fetched.unwrap_or_default() {
                if out.len() < max {
                    out.push(r);
                } else {
                    self.buffered.push_back(r);
                }
            }
            if !out.is_empty() || Instant::now() >= deadline {
                break;
            }
            if !did_fetch {
                // Nothing to fetch from yet: wait for an assignment.
                tokio::select! {
                    _ = self.view.changed() => {}
                    _ = tokio::time::sleep_until(deadline) => {}
                }
                self.check_membership()?;
            }
        }
        let full = out.len() >= max;
        self.end_at_an_acquired_range(&mut out);
        if full {
            // A full poll: the partitions likely hold more. The next poll's
            // fetch starts now, carrying the pending acknowledgements, and
            // runs while the application works on these records (its
            // records are acquired from now on, so their locks start
            // earlier; a poll that is not full starts nothing).
            let started = self.start_prefetch().await.unwrap_or_else(|e| {
                // The records of this poll are here; the next poll's own
                // fetch meets the error again if it lasts.
                tracing::debug!(error = %e, "no prefetch");
                false
            });
            if !started && self.acks.has_pending() {
                // The buffer holds the next poll: the acknowledgements go
                // now, those of a range only partly handed out excepted
                // (D39, D49).
                self.flush_acknowledgements_of(false, true).await;
            }
        }
        let dropped = self.acks.drop_redelivered(&mut out);
        if dropped > 0 {
            tracing::debug!(
                records = dropped,
                "records delivered again while still held in a transaction's acknowledgements \
                 (their lock expired): left out of the poll, the transaction's acknowledgement \
                 covers them"
            );
            self.inner.metrics.on_redelivered_while_held(dropped);
        }
        self.acks.deliver(&out);
        self.inner.metrics.on_records_polled(out.len());
        self.fire_callbacks();
        Ok(ShareRecords::new(out))
    }

    /// A full poll ends where an acquired range ends (D49): when its last
    /// record's range goes on beyond it, the records of that range go back
    /// to the buffer, to lead the next poll, unless the range began the
    /// poll (a range longer than `max.poll.records` is cut, as it must
    /// be). Whatever the application then acknowledges at once (a commit
    /// after a poll, a transaction of whole polls) covers whole ranges,
    /// which Kafka's broker keeps as one in-flight batch each; a range
    /// acknowledged in part it tracks offset by offset, and writes one
    /// share-state batch per offset.
    fn end_at_an_acquired_range(&mut self, out: &mut Vec<ShareRecord>) {
        let Some(last) = out.last() else { return };
        let tp = TopicIdPartition {
            topic_id: last.topic_id,
            topic: last.topic.clone(),
            partition: last.partition,
        };
        let Some((first, end)) = self.acks.acquired_span_of(&tp, last.offset) else {
            return;
        };
        let goes_on = self
            .buffered
            .iter()
            .any(|r| r.topic_id == tp.topic_id && r.partition == tp.partition && r.offset <= end);
        if !goes_on {
            return;
        }
        let in_span = |r: &ShareRecord| {
            r.topic_id == tp.topic_id
                && r.partition == tp.partition
                && first <= r.offset
                && r.offset <= end
        };
        let Some(start) = out.iter().position(in_span) else {
            return;
        };
        if start == 0 {
            return;
        }
        for r in out.drain(start..).rev() {
            self.buffered.push_front(r);
        }
    }

    async fn refresh_cluster(&mut self, ids: &[Uuid]) -> Result<(), ConsumerError> {
        match self.inner.lookup.describe_topics(ids).await {
            Ok(view) => {
                self.cluster = Arc::new(view);
                Ok(())
            }
            Err(e) if e.is_retriable() => {
                tracing::debug!(error = %e, "metadata lookup failed; retrying at the next fetch");
                Ok(())
            }
            Err(e) => Err(e.into()),
        }
    }

    fn leader_of(&self, tp: &TopicIdPartition) -> Option<BrokerAddress> {
        self.cluster.leader(tp.topic_id, tp.partition)
    }

    fn session(&mut self, node_id: i32) -> SessionCell {
        self.sessions.entry(node_id).or_default().clone()
    }

    /// Pending acknowledgements grouped by leader; those without a known
    /// leader are kept pending. For a fetch (`for_fetch`), the
    /// acknowledgements of a partly acknowledged acquired range wait once
    /// for the rest of it (D39); otherwise every one is taken.
    fn pending_by_leader(&mut self, for_fetch: bool) -> AcksByLeader {
        let pending = if for_fetch {
            self.acks.take_pending_for_fetch()
        } else {
            self.acks.take_pending()
        };
        let mut out: BTreeMap<i32, (BrokerAddress, Vec<_>)> = BTreeMap::new();
        for (tp, a) in pending.into_partitions() {
            match self.leader_of(&tp) {
                Some(b) => out
                    .entry(b.node_id)
                    .or_insert_with(|| (b.clone(), Vec::new()))
                    .1
                    .push((tp, a)),
                None => self.acks.restore_pending(&tp, &a),
            }
        }
        out
    }

    /// The pending renewals (KIP-1222) by leader. A renewal whose partition
    /// has no known leader is dropped: the lock it would extend is held by
    /// a leader this consumer cannot reach now, and the record comes back
    /// to the group when the lock expires (the result says so).
    fn renewals_by_leader(&mut self) -> (AcksByLeader, Vec<AcknowledgementCommit>) {
        let renewals = self.acks.take_renewals();
        let mut out: BTreeMap<i32, (BrokerAddress, Vec<_>)> = BTreeMap::new();
        let mut unsent = Vec::new();
        for (tp, a) in renewals.partitions() {
            match self.leader_of(tp) {
                Some(b) => out
                    .entry(b.node_id)
                    .or_insert_with(|| (b.clone(), Vec::new()))
                    .1
                    .push((tp.clone(), a.clone())),
                None => unsent.extend(commits_for(&[(tp.clone(), a.clone())], |tp| {
                    Some(ConsumerError::Acknowledgement {
                        partition: tp.clone(),
                        code: ErrorCode::NOT_LEADER_OR_FOLLOWER,
                    })
                })),
            }
        }
        (out, unsent)
    }

    /// One ShareFetch to every leader; `None` when there was nothing to
    /// fetch from.
    async fn fetch_round(
        &mut self,
        assignment: &Assignment,
        max_records: usize,
        max_wait: Duration,
    ) -> Result<Option<Vec<ShareRecord>>, ConsumerError> {
        let Some(jobs) = self
            .prepare_round(assignment, max_records, max_wait)
            .await?
        else {
            return Ok(None);
        };
        let results = futures::future::join_all(jobs.into_iter().map(LeaderFetch::run)).await;
        self.apply_round(results).map(Some)
    }

    /// Starts the next poll's fetch now, in the background (see
    /// [`Self::poll`]): it carries the pending acknowledgements and asks
    /// for what the buffer lacks of `max.poll.records`. Returns `false` when
    /// there is nothing to fetch from.
    async fn start_prefetch(&mut self) -> Result<bool, ConsumerError> {
        let max = self.config.max_poll_records;
        if self.prefetch.is_some() || self.buffered.len() >= max {
            return Ok(false);
        }
        let assignment = self.view.borrow().assignment.clone();
        let want = max - self.buffered.len();
        let Some(jobs) = self
            .prepare_round(&assignment, want, Duration::ZERO)
            .await?
        else {
            return Ok(false);
        };
        self.prefetch = Some(tokio::spawn(futures::future::join_all(
            jobs.into_iter().map(LeaderFetch::run),
        )));
        Ok(true)
    }

    /// Waits for the fetch started by the previous poll, if any, and takes
    /// its outcome in (records, gaps, acknowledgements to send again).
    /// The handle stays in place until the fetch ended, so a poll dropped
    /// while it waits leaves it to the next one.
    async fn finish_prefetch(&mut self) -> Result<Vec<ShareRecord>, ConsumerError> {
        let Some(handle) = self.prefetch.as_mut() else {
            return Ok(Vec::new());
        };
        let joined = handle.await;
        self.prefetch = None;
        match joined {
            Ok(results) => self.apply_round(results),
            // Cancelled or panicked: nothing came of it; its records, if
            // any were acquired, come back when their locks expire or the
            // session closes.
            Err(_) => Ok(Vec::new()),
        }
    }

    /// The per-leader jobs of one fetch round; `None` when there is nothing
    /// to fetch from.
    async fn prepare_round(
        &mut self,
        assignment: &Assignment,
        max_records: usize,
        max_wait: Duration,
    ) -> Result<Option<Vec<LeaderFetch>>, ConsumerError> {
        let ids: Vec<Uuid> = assignment.keys().copied().collect();
        let missing = assignment
            .iter()
            .any(|(id, ps)| ps.iter().any(|p| self.cluster.leader(*id, *p).is_none()));
        if missing {
            self.refresh_cluster(&ids).await?;
        }
        let mut wanted: BTreeMap<i32, (BrokerAddress, BTreeSet<TopicIdPartition>)> =
            BTreeMap::new();
        for (id, ps) in assignment {
            let Some(topic) = self.cluster.topics.get(id) else {
                continue;
            };
            for p in ps {
                if let Some(b) = self.cluster.leader(*id, *p) {
                    wanted
                        .entry(b.node_id)
                        .or_insert_with(|| (b, BTreeSet::new()))
                        .1
                        .insert(TopicIdPartition {
                            topic_id: *id,
                            topic: topic.name.clone(),
                            partition: *p,
                        });
                }
            }
        }
        let mut acks = self.pending_by_leader(true);
        // Leaders whose session still holds partitions no longer wanted.
        let mut leaders: BTreeSet<i32> = wanted.keys().chain(acks.keys()).copied().collect();
        for (node, cell) in &self.sessions {
            if let Ok(s) = cell.try_lock()
                && !s.partitions.is_empty()
                && !wanted.contains_key(node)
                && let Some(addr) = self.cluster.brokers.get(node)
            {
                leaders.insert(*node);
                wanted.insert(
                    *node,
                    (
                        BrokerAddress {
                            node_id: *node,
                            address: addr.clone(),
                        },
                        BTreeSet::new(),
                    ),
                );
            }
        }
        if leaders.is_empty() {
            // Nothing to send: the acknowledgements taken stay pending.
            return Ok(None);
        }
        let mut jobs = Vec::new();
        for node in leaders {
            let (addr, parts) = match wanted.remove(&node) {
                Some(w) => w,
                None => (acks[&node].0.clone(), BTreeSet::new()),
            };
            let leader_acks = acks.remove(&node).map(|a| a.1).unwrap_or_default();
            let job = LeaderFetch {
                inner: self.inner.clone(),
                session: self.session(node),
                broker: addr,
                partitions: parts,
                acks: leader_acks,
                max_records,
                max_wait,
                max_partition_fetch_bytes: self.config.max_partition_fetch_bytes,
                fetch_min_bytes: self.config.fetch_min_bytes,
                fetch_max_bytes: self.config.fetch_max_bytes,
                cluster: self.cluster.clone(),
            };
            jobs.push(job);
        }
        Ok(Some(jobs))
    }

    /// Takes the outcome of one fetch round in.
    fn apply_round(
        &mut self,
        results: Vec<LeaderFetchResult>,
    ) -> Result<Vec<ShareRecord>, ConsumerError> {
        let mut records = Vec::new();
        let mut refresh = false;
        let mut fatal = None;
        for r in results {
            for (tp, a) in r.unsent {
                self.acks.restore_pending(&tp, &a);
            }
            for (tp, ranges) in r.acquired {
                self.acks.add_acquired(&tp, &ranges);
            }
            for (tp, gaps) in r.gaps {
                self.acks.add_gaps(&tp, &gaps);
            }
            refresh |= r.refresh_metadata;
            records.extend(r.records);
            if let Some(e) = r.fatal {
                fatal = Some(e);
            }
        }
        if refresh {
            Arc::make_mut(&mut self.cluster).topics.clear();
        }
        if let Some(e) = fatal {
            return Err(e);
        }
        Ok(records)
    }

    /// Sends every pending acknowledgement with ShareAcknowledge (closing
    /// the sessions when `close`); results go to the completed list.
    async fn flush_acknowledgements(&mut self, close: bool) -> Vec<AcknowledgementCommit> {
        self.flush_acknowledgements_of(close, false).await
    }

    /// [`Self::flush_acknowledgements`]; `as_a_fetch` holds back those of
    /// a range only partly acknowledged, once, as a fetch would (D39).
    async fn flush_acknowledgements_of(
        &mut self,
        close: bool,
        as_a_fetch: bool,
    ) -> Vec<AcknowledgementCommit> {
        let by_leader = self.pending_by_leader(as_a_fetch);
        let mut leaders: BTreeMap<i32, (BrokerAddress, Vec<(TopicIdPartition, Acknowledgements)>)> =
            by_leader;
        if close {
            for node in self.sessions.keys() {
                if let Some(addr) = self.cluster.brokers.get(node) {
                    leaders.entry(*node).or_insert_with(|| {
                        (
                            BrokerAddress {
                                node_id: *node,
                                address: addr.clone(),
                            },
                            Vec::new(),
                        )
                    });
                }
            }
        }
        let mut jobs = Vec::new();
        for (node, (addr, acks)) in leaders {
            let inner = self.inner.clone();
            let session = self.session(node);
            jobs.push(acknowledge_leader(inner, session, addr, acks, close));
        }
        let mut results: Vec<AcknowledgementCommit> = futures::future::join_all(jobs)
            .await
            .into_iter()
            .flatten()
            .collect();
        // Renewals after the final acknowledgements, in requests of their
        // own (IsRenewAck); at close there is nothing left to hold.
        let (renewals, unsent) = self.renewals_by_leader();
        if !close && !renewals.is_empty() {
            let jobs = renewals.into_iter().map(|(node, (addr, acks))| {
                acknowledge_leader(self.inner.clone(), self.session(node), addr, acks, false)
            });
            results.extend(futures::future::join_all(jobs).await.into_iter().flatten());
        }
        if !close && !unsent.is_empty() {
            self.inner.record_results(&unsent);
            results.extend(unsent);
        }
        // Acknowledgements that could not be sent stay pending (no leader).
        results
    }

    /// Commits the pending acknowledgements (in implicit mode, first accepts
    /// the records of the latest poll) and returns one result per share
    /// partition. Bounded by `timeout`.
    pub async fn commit_sync(&mut self, timeout: Duration) -> Result<CommitResults, ConsumerError> {
        self.ensure_open()?;
        self.fire_callbacks();
        self.acks.accept_waiting();
        let results = tokio::time::timeout(timeout, self.flush_acknowledgements(false))
            .await
            .map_err(|_| ConsumerError::Timeout("commit_sync".into()))?;
        self.fire_callbacks();
        Ok(fold_results(&results))
    }

    /// Starts committing the pending acknowledgements in the background and
    /// returns a handle that resolves to the per-partition results. The
    /// callback also sees them (at the next poll, commit or close).
    pub fn commit_async(&mut self) -> Result<JoinHandle<CommitResults>, ConsumerError> {
        self.ensure_open()?;
        self.acks.accept_waiting();
        let by_leader = self.pending_by_leader(false);
        let mut jobs = Vec::new();
        for (node, (addr, acks)) in by_leader {
            jobs.push(acknowledge_leader(
                self.inner.clone(),
                self.session(node),
                addr,
                acks,
                false,
            ));
        }
        let (renewals, unsent) = self.renewals_by_leader();
        self.inner.record_results(&unsent);
        let renew_jobs: Vec<_> = renewals
            .into_iter()
            .map(|(node, (addr, acks))| {
                acknowledge_leader(self.inner.clone(), self.session(node), addr, acks, false)
            })
            .collect();
        Ok(tokio::spawn(async move {
            let mut results: Vec<AcknowledgementCommit> = futures::future::join_all(jobs)
                .await
                .into_iter()
                .flatten()
                .collect();
            results.extend(
                futures::future::join_all(renew_jobs)
                    .await
                    .into_iter()
                    .flatten(),
            );
            results.extend(unsent);
            fold_results(&results)
        }))
    }

    /// Closes the consumer: final acknowledgements, share sessions closed
    /// (epoch -1), group left (epoch -1 heartbeat), all within `timeout`.
    pub async fn close(&mut self, timeout: Duration) -> Result<(), ConsumerError> {
        if self.closed {
            return Ok(());
        }
        self.fire_callbacks();
        self.acks.accept_waiting();
        let deadline = Instant::now() + timeout;
        // A fetch started for a next poll that will not come: take in its
        // gaps and unsent acknowledgements; its records were never handed
        // out, and closing the session releases them.
        if let Ok(Err(e)) = tokio::time::timeout_at(deadline, self.finish_prefetch()).await {
            tracing::debug!(error = %e, "the prefetch before close failed");
        }
        // Gaps held for a transaction that will not come go out now.
        self.acks.release_held_gaps();
        let flushed = tokio::time::timeout_at(deadline, self.flush_acknowledgements(true)).await;
        self.inner.membership.lock().unsubscribe(Instant::now());
        self.inner.publish();
        self.inner.wake.notify_one();
        let mut view = self.view.clone();
        let left = tokio::time::timeout_at(deadline, async {
            loop {
                if matches!(
                    view.borrow().state,
                    MemberState::Left | MemberState::Unsubscribed | MemberState::Failed
                ) {
                    return;
                }
                if view.changed().await.is_err() {
                    return;
                }
            }
        })
        .await;
        self.task.abort();
        self.closed = true;
        self.fire_callbacks();
        if flushed.is_err() || left.is_err() {
            return Err(ConsumerError::Timeout("close".into()));
        }
        Ok(())
    }
}

fn fold_results(results: &[AcknowledgementCommit]) -> CommitResults {
    let mut out = CommitResults::new();
    for c in results {
        let entry = out.entry(c.partition.clone()).or_insert(Ok(()));
        if let (Ok(()), Some(e)) = (&*entry, &c.error) {
            *entry = Err(e.clone());
        }
    }
    out
}

fn ack_error(
    tp: &TopicIdPartition,
    code: i16,
    fallback: Option<&ConsumerError>,
) -> Option<ConsumerError> {
    if code != 0 {
        Some(ConsumerError::Acknowledgement {
            partition: tp.clone(),
            code: ErrorCode(code),
        })
    } else {
        fallback.cloned()
    }
}

fn commits_for(
    acks: &[(TopicIdPartition, Acknowledgements)],
    error_of: impl Fn(&TopicIdPartition) -> Option<ConsumerError>,
) -> Vec<AcknowledgementCommit> {
    acks.iter()
        .map(|(tp, a)| AcknowledgementCommit {
            partition: tp.clone(),
            offsets: a.iter().map(|(o, _)| o).collect(),
            error: error_of(tp),
        })
        .collect()
}

/// Sends the acknowledgements for one leader with ShareAcknowledge; with
/// `close`, at epoch -1 (closing the session) even when there are none.
async fn acknowledge_leader(
    inner: Arc<Inner>,
    session: SessionCell,
    broker: BrokerAddress,
    acks: Vec<(TopicIdPartition, Acknowledgements)>,
    close: bool,
) -> Vec<AcknowledgementCommit> {
    let mut s = session.lock().await;
    if !s.session.can_acknowledge() {
        if close && acks.is_empty() {
            return Vec::new();
        }
        let out = commits_for(&acks, |tp| {
            Some(ConsumerError::Acknowledgement {
                partition: tp.clone(),
                code: ErrorCode::SHARE_SESSION_NOT_FOUND,
            })
        });
        inner.record_results(&out);
        return out;
    }
    if acks.is_empty() && !close {
        return Vec::new();
    }
    let epoch = if close {
        ShareSession::CLOSE_EPOCH
    } else {
        s.session.epoch()
    };
    let mut topics: BTreeMap<Uuid, Vec<AcknowledgePartition>> = BTreeMap::new();
    let mut count = 0;
    for (tp, a) in &acks {
        count += a.len();
        topics.entry(tp.topic_id).or_default().push(
            AcknowledgePartition::default()
                .with_partition_index(tp.partition)
                .with_acknowledgement_batches(
                    a.to_batches()
                        .into_iter()
                        .map(|b| {
                            AckReqBatch::default()
                                .with_first_offset(b.first_offset)
                                .with_last_offset(b.last_offset)
                                .with_acknowledge_types(
                                    b.acknowledge_types.iter().map(|t| t.code()).collect(),
                                )
                        })
                        .collect(),
                ),
        );
    }
    let req = ShareAcknowledgeRequest::default()
        .with_group_id(Some(GroupId(StrBytes::from_string(inner.group_id.clone()))))
        .with_member_id(Some(StrBytes::from_string(inner.member_id.clone())))
        .with_share_session_epoch(epoch)
        .with_topics(
            topics
                .into_iter()
                .map(|(id, ps)| {
                    AcknowledgeTopic::default()
                        .with_topic_id(id)
                        .with_partitions(ps)
                })
                .collect(),
        );
    // KIP-1222: a request that carries RENEW says so (version 2 only; the
    // codec refuses it at version 1 with an error naming the field).
    let is_renew_ack = acks
        .iter()
        .any(|(_, a)| a.iter().any(|(_, t)| t == AcknowledgeType::Renew));
    let req = ShareAcknowledgeV2Request {
        request: req,
        is_renew_ack,
    };
    let conn = inner.pool.broker(broker.node_id, &broker.address);
    let sent = conn.send(&req).await.map(|r| {
        if r.acquisition_lock_timeout_ms > 0 {
            inner
                .lock_timeout_ms
                .store(r.acquisition_lock_timeout_ms, Ordering::Relaxed);
        }
        r.response
    });
    let out = match sent {
        Ok(resp) if resp.error_code == 0 => {
            if close {
                s.session.reset();
                s.partitions.clear();
            } else {
                s.session.on_success();
            }
            inner.metrics.on_acknowledgements_sent(count);
            let mut codes = HashMap::new();
            for t in &resp.responses {
                for p in &t.partitions {
                    codes.insert((t.topic_id, p.partition_index), p.error_code);
                }
            }
            commits_for(&acks, |tp| {
                ack_error(
                    tp,
                    codes
                        .get(&(tp.topic_id, tp.partition))
                        .copied()
                        .unwrap_or(0),
                    None,
                )
            })
        }
        Ok(resp) => {
            s.session.reset();
            s.partitions.clear();
            let e = ConsumerError::Client(ClientError::Broker {
                api: "ShareAcknowledge",
                code: ErrorCode(resp.error_code),
                message: resp.error_message.map(|m| m.to_string()),
            });
            commits_for(&acks, |_| Some(e.clone()))
        }
        Err(e) => {
            s.session.reset();
            s.partitions.clear();
            let e = ConsumerError::Client(e);
            commits_for(&acks, |_| Some(e.clone()))
        }
    };
    inner.record_results(&out);
    out
}

/// ShareFetch's MaxBytes for a request to one leader that fetches from
/// `partitions` share partitions: `fetch.max.bytes`, but no more than
/// `max.partition.fetch.bytes` for each of them (D38).
///
/// ShareFetch v1 dropped the per-partition limit (PartitionMaxBytes) that
/// Fetch has; a broker divides MaxBytes evenly among the partitions it
/// reads. Kafka's broker reads that many bytes of log for each fetch and
/// walks every batch header in them (to find the last batch) before it
/// acquires records, so a MaxBytes far beyond what `max.poll.records`
/// records take costs it work per fetch in proportion to the backlog.
/// Bounding the total by `max.partition.fetch.bytes` per partition keeps
/// the limit that setting names, as a Fetch does. A request with no
/// partition to fetch (acknowledgements or forgotten partitions only) is
/// bounded as if it had one.
fn share_fetch_max_bytes(
    fetch_max_bytes: i32,
    max_partition_fetch_bytes: i32,
    partitions: usize,
) -> i32 {
    let per_partition = i64::from(max_partition_fetch_bytes.max(0));
    let partitions = i64::try_from(partitions.max(1)).unwrap_or(i64::MAX);
    let bound = per_partition.saturating_mul(partitions);
    i64::from(fetch_max_bytes)
        .min(bound)
        .try_into()
        .unwrap_or(fetch_max_bytes)
}

/// Acknowledgements to send, by leader node id.
type AcksByLeader = BTreeMap<i32, (BrokerAddress, Vec<(TopicIdPartition, Acknowledgements)>)>;

/// One leader's part of a fetch round.
struct LeaderFetch {
    inner: Arc<Inner>,
    session: SessionCell,
    broker: BrokerAddress,
    partitions: BTreeSet<TopicIdPartition>,
    acks: Vec<(TopicIdPartition, Acknowledgements)>,
    max_records: usize,
    max_wait: Duration,
    max_partition_fetch_bytes: i32,
    fetch_min_bytes: i32,
    fetch_max_bytes: i32,
    cluster: Arc<ClusterView>,
}

#[derive(Default)]
struct LeaderFetchResult {
    records: Vec<ShareRecord>,
    /// The ranges acquired, per partition (first, last offset).
    acquired: Vec<(TopicIdPartition, Vec<(i64, i64)>)>,
    gaps: Vec<(TopicIdPartition, Vec<i64>)>,
    unsent: Vec<(TopicIdPartition, Acknowledgements)>,
    refresh_metadata: bool,
    fatal: Option<ConsumerError>,
}

impl LeaderFetch {
    async fn run(mut self) -> LeaderFetchResult {
        let mut out = LeaderFetchResult::default();
        let acks = std::mem::take(&mut self.acks);
        let mut s = self.session.lock().await;
        if !s.session.can_acknowledge() {
            // Acknowledgements ride only on a session already open.
            out.unsent = acks;
            if self.partitions.is_empty() {
                return out;
            }
            s.partitions.clear();
            return self.fetch(s, Vec::new(), out).await;
        }
        // Acknowledgements for partitions this fetch does not cover go first,
        // in a ShareAcknowledge on the same session.
        let (ride, apart): (Vec<_>, Vec<_>) = acks
            .into_iter()
            .partition(|(tp, _)| self.partitions.contains(tp));
        if !apart.is_empty() {
            drop(s);
            acknowledge_leader(
                self.inner.clone(),
                self.session.clone(),
                self.broker.clone(),
                apart,
                false,
            )
            .await;
            s = self.session.lock().await;
            if !s.session.can_acknowledge() {
                out.unsent = ride;
                s.partitions.clear();
                return self.fetch(s, Vec::new(), out).await;
            }
        }
        if self.partitions.is_empty() && s.partitions.is_empty() && ride.is_empty() {
            return out;
        }
        self.fetch(s, ride, out).await
    }

    async fn fetch(
        &self,
        mut s: tokio::sync::MutexGuard<'_, LeaderSession>,
        acks: Vec<(TopicIdPartition, Acknowledgements)>,
        mut out: LeaderFetchResult,
    ) -> LeaderFetchResult {
        let epoch = s.session.epoch();
        let ack_map: BTreeMap<&TopicIdPartition, &Acknowledgements> =
            acks.iter().map(|(t, a)| (t, a)).collect();
        // New partitions and partitions carrying acknowledgements.
        let mut listed: BTreeMap<Uuid, Vec<FetchPartition>> = BTreeMap::new();
        for tp in &self.partitions {
            let carry = ack_map.get(tp);
            if s.partitions.contains(tp) && carry.is_none() {
                continue;
            }
            let batches = carry
                .map(|a| {
                    a.to_batches()
                        .into_iter()
                        .map(|b| {
                            FetchAckBatch::default()
                                .with_first_offset(b.first_offset)
                                .with_last_offset(b.last_offset)
                                .with_acknowledge_types(
                                    b.acknowledge_types.iter().map(|t| t.code()).collect(),
                                )
                        })
                        .collect()
                })
                .unwrap_or_default();
            listed.entry(tp.topic_id).or_default().push(
                FetchPartition::default()
                    .with_partition_index(tp.partition)
                    .with_partition_max_bytes(self.max_partition_fetch_bytes)
                    .with_acknowledgement_batches(batches),
            );
        }
        let mut forgotten: BTreeMap<Uuid, Vec<i32>> = BTreeMap::new();
        if epoch > 0 {
            for tp in s.partitions.difference(&self.partitions) {
                forgotten.entry(tp.topic_id).or_default().push(tp.partition);
            }
        }
        let req = ShareFetchRequest::default()
            .with_group_id(Some(GroupId(StrBytes::from_string(
                self.inner.group_id.clone(),
            ))))
            .with_member_id(Some(StrBytes::from_string(self.inner.member_id.clone())))
            .with_share_session_epoch(epoch)
            .with_max_wait_ms(self.max_wait.as_millis().min(i32::MAX as u128) as i32)
            .with_min_bytes(self.fetch_min_bytes)
            .with_max_bytes(share_fetch_max_bytes(
                self.fetch_max_bytes,
                self.max_partition_fetch_bytes,
                self.partitions.len(),
            ))
            .with_max_records(self.max_records.min(i32::MAX as usize) as i32)
            .with_batch_size(self.max_records.min(i32::MAX as usize) as i32)
            .with_topics(
                listed
                    .into_iter()
                    .map(|(id, ps)| FetchTopic::default().with_topic_id(id).with_partitions(ps))
                    .collect(),
            )
            .with_forgotten_topics_data(
                forgotten
                    .into_iter()
                    .map(|(id, ps)| {
                        ForgottenTopic::default()
                            .with_topic_id(id)
                            .with_partitions(ps)
                    })
                    .collect(),
            );
        let req = ShareFetchV2Request {
            request: req,
            share_acquire_mode: self.inner.acquire_mode.as_i8(),
            is_renew_ack: false,
        };
        let ack_count: usize = acks.iter().map(|(_, a)| a.len()).sum();
        let conn = self
            .inner
            .pool
            .broker(self.broker.node_id, &self.broker.address);
        let timeout = self.inner.request_timeout + self.max_wait;
        let sent_at = Instant::now();
        let result = match conn.connection().await {
            Ok(c) => match record_limit_unsupported(&c, self.inner.acquire_mode) {
                Some(e) => Err(e),
                None => c.send_with_timeout(&req, timeout).await,
            },
            Err(e) => Err(e),
        };
        let resp = match result {
            Ok(r) if r.error_code == 0 => r,
            Ok(r) => {
                let code = ErrorCode(r.error_code);
                s.session.reset();
                s.partitions.clear();
                let e = ConsumerError::Client(ClientError::Broker {
                    api: "ShareFetch",
                    code,
                    message: r.error_message.map(|m| m.to_string()),
                });
                self.report(&acks, |_| Some(e.clone()));
                if code == ErrorCode::UNKNOWN_MEMBER_ID || code == ErrorCode::FENCED_MEMBER_EPOCH {
                    // The group no longer knows this member (its session
                    // expired while the process was paused or cut off): its
                    // records were released. Rejoin, as the heartbeat does.
                    self.inner.membership.lock().member_lost(Instant::now());
                    self.inner.publish();
                    self.inner.wake.notify_one();
                } else if !(code.is_retriable()
                    || code == ErrorCode::SHARE_SESSION_NOT_FOUND
                    || code == ErrorCode::INVALID_SHARE_SESSION_EPOCH)
                {
                    out.fatal = Some(e);
                }
                return out;
            }
            Err(e) => {
                s.session.reset();
                s.partitions.clear();
                let retriable = e.is_retriable();
                let e = ConsumerError::Client(e);
                self.report(&acks, |_| Some(e.clone()));
                if !retriable {
                    out.fatal = Some(e);
                }
                return out;
            }
        };
        s.session.on_success();
        s.partitions = self.partitions.clone();
        if resp.acquisition_lock_timeout_ms > 0 {
            self.inner
                .lock_timeout_ms
                .store(resp.acquisition_lock_timeout_ms, Ordering::Relaxed);
        }
        self.inner.metrics.on_acknowledgements_sent(ack_count);
        let mut ack_codes = HashMap::new();
        for t in resp.responses {
            let Some(info) = self.cluster.topics.get(&t.topic_id) else {
                continue;
            };
            for p in t.partitions {
                let tp = TopicIdPartition {
                    topic_id: t.topic_id,
                    topic: info.name.clone(),
                    partition: p.partition_index,
                };
                ack_codes.insert(tp.clone(), p.acknowledge_error_code);
                let code = ErrorCode(p.error_code);
                if code.is_err() {
                    if matches!(
                        code,
                        ErrorCode::NOT_LEADER_OR_FOLLOWER
                            | ErrorCode::UNKNOWN_TOPIC_OR_PARTITION
                            | ErrorCode::UNKNOWN_TOPIC_ID
                            | ErrorCode::FENCED_LEADER_EPOCH
                            | ErrorCode::UNKNOWN_LEADER_EPOCH
                    ) {
                        out.refresh_metadata = true;
                    }
                    tracing::debug!(partition = %tp, %code, "ShareFetch partition error");
                    continue;
                }
                let ranges: Vec<AcquiredRange> = p
                    .acquired_records
                    .iter()
                    .map(|a| AcquiredRange {
                        first_offset: a.first_offset,
                        last_offset: a.last_offset,
                        delivery_count: a.delivery_count,
                    })
                    .collect();
                match decode_partition(&tp, p.records, &ranges, DEFAULT_MAX_DECOMPRESSED, sent_at) {
                    Ok(d) => {
                        if !ranges.is_empty() {
                            out.acquired.push((
                                tp.clone(),
                                ranges
                                    .iter()
                                    .map(|r| (r.first_offset, r.last_offset))
                                    .collect(),
                            ));
                        }
                        if !d.gaps.is_empty() {
                            out.gaps.push((tp.clone(), d.gaps));
                        }
                        out.records.extend(d.records);
                    }
                    Err(e) => {
                        // Undecodable data: the acquired records come back
                        // when their locks expire.
                        tracing::warn!(partition = %tp, error = %e, "undecodable ShareFetch data");
                    }
                }
            }
        }
        self.report(&acks, |tp| {
            ack_error(tp, ack_codes.get(tp).copied().unwrap_or(0), None)
        });
        out
    }

    fn report(
        &self,
        acks: &[(TopicIdPartition, Acknowledgements)],
        error_of: impl Fn(&TopicIdPartition) -> Option<ConsumerError>,
    ) {
        if acks.is_empty() || !self.inner.wants_results.load(Ordering::Relaxed) {
            return;
        }
        let done = commits_for(acks, error_of);
        self.inner.completed.lock().extend(done);
    }
}

#[cfg(test)]
mod tests;
