//! The broker side of share groups: [`ShareService`] runs the I/O-free
//! state machines and carries out their effects, as
//! [`TxnService`](crate::txn_service::TxnService) does for transactions.
//!
//! The state machines:
//!
//! - the [`ShareGroupCoordinator`] (membership, assignment, group configs);
//! - one [`SharePartition`] per (share group, topic id, partition), created
//!   at first use with its start offset from `share.auto.offset.reset`
//!   (latest: the high watermark; earliest: the log start offset) and
//!   configured from the group's configuration at that moment.
//!
//! Their effects, one file each:
//!
//! - [`sessions`]: share sessions per (group, member): epoch 0 opens
//!   (replacing any old session), each later request must carry the next
//!   epoch, -1 closes; a session holds the set of partitions its fetches
//!   cover and outlives its member's leave until its final epoch (D18);
//! - [`persistence`]: the share-state log, written by its own thread with
//!   group commit. A call changes the state under the service's lock and
//!   queues the changed snapshots there (so the log order is the state
//!   order), then returns a [`Durable`] with its answer; the handler awaits
//!   it before answering (docs/DESIGN.md D22). No request thread writes or
//!   fsyncs, and no lock is held across a flush. After a restart, ACQUIRED
//!   records come back AVAILABLE; ACKNOWLEDGED and ARCHIVED ones are never
//!   delivered again;
//! - [`fetch`]: acquisition from the partition log for ShareFetch, and the
//!   wake-ups: a `watch` counter bumped whenever records become AVAILABLE
//!   again (acknowledgement RELEASE, lock expiry, member departure, aborted
//!   staging). A parked ShareFetch waits on it and on the log's append
//!   watch;
//! - [`metrics`]: per share partition gauges and counters.
//!
//! Each call comes in two forms: `x_deferred` returns a [`Pending`] answer
//! for the async handlers, which await its durability; `x` waits for it
//! blocking the thread, for callers already off the async threads
//! (transaction markers, KIP-1289 staging, start-up) and for tests.
//!
//! Lock order: the service's mutex, then a partition log's mutex, then the
//! journal's queue. Nothing takes them the other way round.
//!
//! Time is an input (`now_ms`, milliseconds since the Unix epoch, from the
//! broker's [`Clock`](crate::clock::Clock)), so tests drive lock and session
//! expiry with explicit times.

pub mod dead_letters;
pub mod fetch;
pub mod metrics;
mod offsets_admin;
pub mod persistence;
pub mod sessions;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use parking_lot::Mutex;
use tokio::sync::watch;
use tracing::debug;
use uuid::Uuid;

use super::group::{
    AutoOffsetReset, ConfigError, CoordinatorSnapshot, DepartureReason, DescribedGroup,
    GroupConfig, GroupConfigEntry, GroupEffects, GroupError, HeartbeatOutcome, HeartbeatRequest,
    ShareGroupBrokerConfig, ShareGroupCoordinator, SharePartitionKey, TopicLookup,
    config::AbortedRecordState,
};
use super::log::{PartitionLog, StateLog};
use super::share::{
    RawAcknowledgementBatch, SharePartition, SharePartitionConfig, SharePartitionState,
};
use persistence::{Journal, StoredRecord};
use sessions::Session;
use sharestream_protocol::ErrorCode;

pub use fetch::{ParkedFetch, ShareFetchData};
pub use offsets_admin::AdminOutcome;
pub use persistence::Durable;
pub use sessions::{
    DEFAULT_MAX_SHARE_SESSIONS, FINAL_SHARE_SESSION_EPOCH, INITIAL_SHARE_SESSION_EPOCH,
    SessionStep, TopicIdKey,
};

/// The state log is rewritten once it is this large and more than four
/// times the size of its live records.
const REWRITE_MIN_BYTES: u64 = 1 << 20;

/// What a transaction marker does to the records staged on a share
/// partition (docs/DESIGN.md D6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkerKind {
    /// Commit: ACCEPT becomes ACKNOWLEDGED, REJECT ARCHIVED.
    Commit,
    /// An abort the producer asked for (EndTxn): back to ACQUIRED for the
    /// staging member if it is still in the group, else AVAILABLE.
    Abort,
    /// An abort the coordinator imposed (fence, transaction timeout): the
    /// staging member's producer is a zombie, so the records become
    /// AVAILABLE (ARCHIVED at the delivery count limit) at once.
    ImposedAbort,
}

/// What [`ShareService::tick`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ManagerTick {
    /// Members removed because their session timed out.
    pub expired_members: usize,
    /// Records whose acquisition lock expired.
    pub expired_records: u64,
    /// Whether records became AVAILABLE (parked fetches were woken).
    pub records_available: bool,
}

/// An answer that may be given once the state changes behind it are
/// durable.
#[derive(Debug)]
#[must_use = "an answer may go out only once its state is durable"]
pub struct Pending<T> {
    value: T,
    durable: Durable,
}

impl<T> Pending<T> {
    fn new(value: T, durable: Durable) -> Self {
        Self { value, durable }
    }

    /// The answer once durable (awaits the journal; KAFKA_STORAGE_ERROR if
    /// writing failed).
    pub async fn durable(self) -> Result<T, ErrorCode> {
        self.durable.wait().await.map(|()| self.value)
    }

    /// The answer once durable, blocking the thread.
    pub fn durable_blocking(self) -> Result<T, ErrorCode> {
        self.durable.wait_blocking().map(|()| self.value)
    }

    /// The answer and its durability, apart (to wait once for several).
    pub fn split(self) -> (T, Durable) {
        (self.value, self.durable)
    }

    /// The answer without waiting: for effects nobody is answered about
    /// (timers, closed connections); the records are written anyway.
    pub fn forget(self) -> T {
        self.value
    }
}

#[derive(Debug)]
struct Entry {
    sp: SharePartition,
    /// No lock deadline is earlier (ticks skip the partition before it).
    next_deadline_ms: Option<i64>,
}

#[derive(Debug)]
struct Inner {
    coordinator: ShareGroupCoordinator,
    partitions: BTreeMap<SharePartitionKey, Entry>,
    sessions: HashMap<(String, String), Session>,
    journal: Option<std::sync::Arc<Journal>>,
    /// The last coordinator snapshot queued to the journal.
    persisted_coordinator: CoordinatorSnapshot,
    max_sessions: usize,
    rewrite_min_bytes: u64,
    /// `share.version >= 2`: dead-letter queues may be in force (KIP-1191).
    dead_letter_feature: bool,
    /// The dead-letter writer's counters, per group.
    dead_letter_counts: BTreeMap<String, dead_letters::DeadLetterCounts>,
}

/// The broker's share groups: coordinator, share partitions, sessions,
/// persistence and wake-ups. See the module docs.
#[derive(Debug)]
pub struct ShareService {
    inner: Mutex<Inner>,
    journal: Option<std::sync::Arc<Journal>>,
    available: watch::Sender<u64>,
    /// ShareFetches waiting (see [`ShareService::park`]).
    parked: std::sync::atomic::AtomicUsize,
}

/// The share-partition settings of a group's config; `dead_letter_feature`
/// is whether `share.version` allows dead-letter queues.
fn partition_config(c: &GroupConfig, dead_letter_feature: bool) -> SharePartitionConfig {
    SharePartitionConfig {
        record_lock_duration_ms: i64::from(c.record_lock_duration_ms),
        delivery_count_limit: u16::try_from(c.delivery_count_limit.max(1)).unwrap_or(u16::MAX),
        max_in_flight_records: u32::try_from(c.partition_max_record_locks.max(1)).unwrap_or(1),
        isolation: c.isolation_level,
        renew_acknowledge_enabled: c.renew_acknowledge_enabled,
        dead_letter_queue: dead_letter_feature && !c.dlq_topic_name.is_empty(),
    }
}

fn key(group_id: &str, topic_id: Uuid, partition: i32) -> SharePartitionKey {
    SharePartitionKey {
        group_id: group_id.to_string(),
        topic_id,
        partition,
    }
}

/// A call's place in the journal: what was queued before it started.
struct Mark(u64);

impl ShareService {
    /// Opens the share state: in `dir` (created if needed) when given,
    /// else in memory. Replays the persisted coordinator and share
    /// partitions; restored partitions take the group's current config.
    pub fn open(
        dir: Option<&Path>,
        broker: ShareGroupBrokerConfig,
        now_ms: i64,
    ) -> std::io::Result<Self> {
        Self::open_with(dir, broker, now_ms, false)
    }

    /// [`Self::open`] with dead-letter queues allowed or not
    /// (`share.version >= 2`) from the start, so that restored records at
    /// the delivery count limit go to the queue when it is in force.
    pub fn open_with(
        dir: Option<&Path>,
        broker: ShareGroupBrokerConfig,
        now_ms: i64,
        dead_letter_feature: bool,
    ) -> std::io::Result<Self> {
        let mut coordinator_snapshot = CoordinatorSnapshot::default();
        let mut states: BTreeMap<SharePartitionKey, SharePartitionState> = BTreeMap::new();
        let journal = match dir {
            None => None,
            Some(dir) => {
                std::fs::create_dir_all(dir)?;
                let path: PathBuf = dir.join("share.log");
                let (log, records, _recovery) = StateLog::open(&path)?;
                for r in records {
                    match rmp_serde::from_slice::<StoredRecord>(&r) {
                        Ok(StoredRecord::Coordinator(s)) => coordinator_snapshot = s,
                        Ok(StoredRecord::Partition {
                            group_id,
                            topic_id,
                            partition,
                            state,
                        }) => {
                            states.insert(key(&group_id, topic_id, partition), state);
                        }
                        Ok(StoredRecord::PartitionDeleted {
                            group_id,
                            topic_id,
                            partition,
                        }) => {
                            states.remove(&key(&group_id, topic_id, partition));
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, "share state: skipping an unreadable record")
                        }
                    }
                }
                Some(std::sync::Arc::new(Journal::start(log)?))
            }
        };
        let max_sessions = usize::try_from(broker.max_share_sessions.max(1)).unwrap_or(1);
        let coordinator = ShareGroupCoordinator::restore(broker, coordinator_snapshot.clone());
        let mut partitions = BTreeMap::new();
        for (k, state) in states {
            // Restored ARCHIVING runs are handed to the writer whatever the
            // feature level.
            let config =
                partition_config(&coordinator.group_config(&k.group_id), dead_letter_feature);
            match SharePartition::restore(config, state, now_ms) {
                Ok(mut sp) => {
                    sp.take_dirty();
                    partitions.insert(
                        k,
                        Entry {
                            sp,
                            // The first tick computes the real deadline.
                            next_deadline_ms: Some(now_ms),
                        },
                    );
                }
                Err(e) => tracing::error!(
                    group = %k.group_id, topic_id = %k.topic_id, partition = k.partition,
                    error = %e, "share state: cannot restore a share partition"
                ),
            }
        }
        Ok(Self {
            inner: Mutex::new(Inner {
                coordinator,
                partitions,
                sessions: HashMap::new(),
                journal: journal.clone(),
                persisted_coordinator: coordinator_snapshot,
                max_sessions,
                rewrite_min_bytes: REWRITE_MIN_BYTES,
                dead_letter_feature,
                dead_letter_counts: BTreeMap::new(),
            }),
            journal,
            available: watch::channel(0).0,
            parked: std::sync::atomic::AtomicUsize::new(0),
        })
    }

    /// Notes what the journal holds before a call (under the lock).
    fn mark(&self) -> Mark {
        Mark(self.journal.as_ref().map_or(0, |j| j.enqueued()))
    }

    /// The wait for everything a call queued after `mark` (taken under the
    /// same lock), and everything queued before it.
    fn durable_since(&self, mark: Mark) -> Durable {
        match &self.journal {
            None => Durable::default(),
            Some(j) => j.durable(mark.0, j.enqueued()),
        }
    }

    fn wake(&self) {
        self.available.send_modify(|v| *v = v.wrapping_add(1));
    }

    /// Sets the cap on share sessions (SHARE_SESSION_LIMIT_REACHED beyond).
    pub fn set_max_sessions(&self, max: usize) {
        self.inner.lock().max_sessions = max;
    }

    /// Batches the share-state journal has written (one fsync each); 0 in
    /// memory.
    pub fn journal_batches(&self) -> u64 {
        self.journal.as_ref().map_or(0, |j| j.batches())
    }

    /// Size of the share-state log after its last written batch.
    pub fn journal_bytes(&self) -> u64 {
        self.journal.as_ref().map_or(0, |j| j.size_bytes())
    }

    // ----- groups -----------------------------------------------------------

    /// ShareGroupHeartbeat: runs the coordinator and applies its effects
    /// (departed members release their records and lose their sessions).
    pub fn heartbeat_deferred(
        &self,
        req: &HeartbeatRequest,
        now_ms: i64,
        topics: &dyn TopicLookup,
    ) -> Pending<Result<HeartbeatOutcome, GroupError>> {
        let mut inner = self.inner.lock();
        let mark = self.mark();
        let out = inner.coordinator.heartbeat(req, now_ms, topics);
        let mut available = false;
        if let Ok(o) = &out {
            available = inner.apply_effects(&o.effects, now_ms);
            inner.persist_coordinator();
        }
        let durable = self.durable_since(mark);
        drop(inner);
        if available {
            self.wake();
        }
        Pending::new(out, durable)
    }

    /// [`Self::heartbeat_deferred`], waiting for durability.
    pub fn heartbeat(
        &self,
        req: &HeartbeatRequest,
        now_ms: i64,
        topics: &dyn TopicLookup,
    ) -> Result<HeartbeatOutcome, GroupError> {
        let (out, durable) = self.heartbeat_deferred(req, now_ms, topics).split();
        // A heartbeat has no storage error code; the coordinator's state
        // is repaired by its next snapshot.
        if durable.wait_blocking().is_err() {
            tracing::warn!("share state: a heartbeat's coordinator snapshot was not written");
        }
        out
    }

    /// Share groups and their states (ListGroups).
    pub fn list_groups(&self) -> Vec<(String, crate::group::ShareGroupState)> {
        self.inner.lock().coordinator.list_groups()
    }

    /// ShareGroupDescribe.
    pub fn describe(&self, group_ids: &[String]) -> Vec<DescribedGroup> {
        self.inner.lock().coordinator.describe(group_ids)
    }

    /// The effective configuration of a group.
    pub fn group_config(&self, group_id: &str) -> GroupConfig {
        self.inner.lock().coordinator.group_config(group_id)
    }

    /// The broker-level share group settings.
    pub fn broker_config(&self) -> ShareGroupBrokerConfig {
        self.inner.lock().coordinator.broker_config().clone()
    }

    /// IncrementalAlterConfigs on a GROUP resource; persisted. Existing
    /// share partitions of the group follow the new values.
    pub fn alter_group_configs(
        &self,
        group_id: &str,
        ops: &[(&str, Option<&str>)],
        validate_only: bool,
    ) -> Result<(), ConfigError> {
        let durable = {
            let mut inner = self.inner.lock();
            let mark = self.mark();
            inner
                .coordinator
                .alter_configs(group_id, ops, validate_only)?;
            if !validate_only {
                let config = partition_config(
                    &inner.coordinator.group_config(group_id),
                    inner.dead_letter_feature,
                );
                for (k, e) in inner.partitions.iter_mut() {
                    if k.group_id == group_id {
                        e.sp.set_config(config);
                    }
                }
            }
            inner.persist_coordinator();
            self.durable_since(mark)
        };
        if durable.wait_blocking().is_err() {
            tracing::warn!(
                group_id,
                "share state: a group config change was not written"
            );
        }
        Ok(())
    }

    /// DescribeConfigs on a GROUP resource.
    pub fn describe_group_config(&self, group_id: &str) -> Vec<GroupConfigEntry> {
        self.inner.lock().coordinator.describe_config(group_id)
    }

    /// Whether the member is in the group now.
    pub fn is_member_alive(&self, group_id: &str, member_id: &str) -> bool {
        self.inner
            .lock()
            .coordinator
            .is_member_alive(group_id, member_id)
    }

    /// The coordinator's member check (member id and epoch).
    pub fn validate_member(
        &self,
        group_id: &str,
        member_id: &str,
        member_epoch: i32,
    ) -> Result<(), ErrorCode> {
        self.inner
            .lock()
            .coordinator
            .validate_member(group_id, member_id, member_epoch)
    }

    // ----- records ----------------------------------------------------------

    /// ShareAcknowledge / piggy-backed acknowledgements for one partition.
    /// Errors: INVALID_REQUEST for malformed batches, INVALID_RECORD_STATE
    /// when an offset is not ACQUIRED by this member (or the share
    /// partition does not exist), KAFKA_STORAGE_ERROR (when awaited) if
    /// persisting fails.
    pub fn acknowledge_deferred(
        &self,
        group_id: &str,
        member_id: &str,
        topic_id: Uuid,
        partition: i32,
        batches: &[RawAcknowledgementBatch],
        now_ms: i64,
    ) -> Pending<Result<(), ErrorCode>> {
        let mut inner = self.inner.lock();
        let mark = self.mark();
        let k = key(group_id, topic_id, partition);
        let Some(entry) = inner.partitions.get_mut(&k) else {
            return Pending::new(Err(ErrorCode::INVALID_RECORD_STATE), Durable::default());
        };
        let effects = match entry.sp.acknowledge(member_id, batches, now_ms) {
            Ok(e) => e,
            Err(e) => {
                debug!(
                    group = group_id,
                    member = member_id,
                    %topic_id,
                    partition,
                    error = %e,
                    "acknowledgement refused"
                );
                return Pending::new(Err(e.error_code()), Durable::default());
            }
        };
        inner.persist_if_dirty(&k);
        let durable = self.durable_since(mark);
        drop(inner);
        if effects.records_available {
            self.wake();
        }
        Pending::new(Ok(()), durable)
    }

    /// [`Self::acknowledge_deferred`], waiting for durability.
    pub fn acknowledge(
        &self,
        group_id: &str,
        member_id: &str,
        topic_id: Uuid,
        partition: i32,
        batches: &[RawAcknowledgementBatch],
        now_ms: i64,
    ) -> Result<(), ErrorCode> {
        self.acknowledge_deferred(group_id, member_id, topic_id, partition, batches, now_ms)
            .durable_blocking()?
    }

    /// TxnShareAcknowledge (KIP-1289): stages ACCEPT/REJECT for the
    /// transaction of (`producer_id`, `producer_epoch`). Validates the
    /// member and its epoch first (UNKNOWN_MEMBER_ID, STALE/FENCED_MEMBER_EPOCH).
    /// Waits for durability (its caller runs off the async threads).
    #[allow(clippy::too_many_arguments)]
    pub fn stage(
        &self,
        group_id: &str,
        member_id: &str,
        member_epoch: i32,
        topic_id: Uuid,
        partition: i32,
        producer_id: i64,
        producer_epoch: i16,
        batches: &[RawAcknowledgementBatch],
        now_ms: i64,
    ) -> Result<(), ErrorCode> {
        let durable = {
            let mut inner = self.inner.lock();
            let mark = self.mark();
            inner
                .coordinator
                .validate_member(group_id, member_id, member_epoch)?;
            let k = key(group_id, topic_id, partition);
            let entry = inner
                .partitions
                .get_mut(&k)
                .ok_or(ErrorCode::INVALID_RECORD_STATE)?;
            let effects = entry
                .sp
                .stage(member_id, producer_id, producer_epoch, batches, now_ms)
                .map_err(|e| e.error_code())?;
            inner.persist_if_dirty(&k);
            let durable = self.durable_since(mark);
            drop(inner);
            if effects.records_available {
                self.wake();
            }
            durable
        };
        durable.wait_blocking()
    }

    /// A transaction marker for a share participant: resolves what
    /// (`producer_id`, `producer_epoch` or the epoch before) staged on that
    /// share partition. Returns the number of records resolved (0 for an
    /// unknown share partition or a duplicate marker), once durable.
    #[allow(clippy::too_many_arguments)]
    pub fn apply_marker(
        &self,
        group_id: &str,
        topic_id: Uuid,
        partition: i32,
        producer_id: i64,
        producer_epoch: i16,
        kind: MarkerKind,
        now_ms: i64,
    ) -> std::io::Result<u64> {
        let commit = kind == MarkerKind::Commit;
        let imposed = kind == MarkerKind::ImposedAbort;
        let mut inner = self.inner.lock();
        let mark = self.mark();
        let k = key(group_id, topic_id, partition);
        let Inner {
            coordinator,
            partitions,
            ..
        } = &mut *inner;
        let Some(entry) = partitions.get_mut(&k) else {
            return Ok(0);
        };
        // D25: an abort the producer asked for returns the records to
        // their member only under `acquired`; by default they become
        // AVAILABLE, as after an imposed abort.
        let keep_for_member = kind == MarkerKind::Abort
            && coordinator.broker_config().transaction_abort_record_state
                == AbortedRecordState::Acquired;
        let out = entry
            .sp
            .apply_marker(producer_id, producer_epoch, commit, now_ms, |m| {
                // An imposed abort (fence, timeout): the staging member's
                // producer is a zombie, so its records are released.
                !imposed && keep_for_member && coordinator.is_member_alive(group_id, m)
            });
        if keep_for_member {
            // Aborted staging comes back ACQUIRED with a fresh lock.
            let deadline = now_ms + entry.sp.config().record_lock_duration_ms;
            entry.next_deadline_ms =
                Some(entry.next_deadline_ms.map_or(deadline, |d| d.min(deadline)));
        }
        inner.persist_if_dirty(&k);
        let durable = self.durable_since(mark);
        drop(inner);
        if out.records_available {
            self.wake();
        }
        durable
            .wait_blocking()
            .map_err(|_| std::io::Error::other("persisting share-partition state failed"))?;
        Ok(out.resolved_records)
    }

    /// A share session closed: it ends (if a final-epoch step left it
    /// closing), and the member's ACQUIRED records on the session's
    /// partitions become AVAILABLE again (as Kafka does when a session
    /// ends), its TX_PENDING ones stay. Both happen under one lock, after
    /// the closing request's acknowledgements.
    pub fn release_session_records_deferred(
        &self,
        group_id: &str,
        member_id: &str,
        partitions: &[TopicIdKey],
        now_ms: i64,
    ) -> Pending<()> {
        let mut inner = self.inner.lock();
        let mark = self.mark();
        inner.end_closing_session(group_id, member_id);
        let available = if inner.coordinator.is_member_alive(group_id, member_id) {
            let mut available = false;
            for &(topic_id, partition) in partitions {
                let k = key(group_id, topic_id, partition);
                if let Some(e) = inner.partitions.get_mut(&k) {
                    available |= e.sp.release_member(member_id, now_ms).records_available;
                    inner.persist_if_dirty(&k);
                }
            }
            available
        } else {
            // The member left while the session was open: what it still
            // holds anywhere in the group is released now.
            inner.release_member_everywhere(group_id, member_id, now_ms)
        };
        let durable = self.durable_since(mark);
        drop(inner);
        if available {
            self.wake();
        }
        Pending::new((), durable)
    }

    /// [`Self::release_session_records_deferred`], waiting for durability
    /// (a failure is logged: the records are released in memory anyway).
    pub fn release_session_records(
        &self,
        group_id: &str,
        member_id: &str,
        partitions: &[TopicIdKey],
        now_ms: i64,
    ) {
        if self
            .release_session_records_deferred(group_id, member_id, partitions, now_ms)
            .durable_blocking()
            .is_err()
        {
            tracing::warn!(
                group_id,
                member_id,
                "share state: a session's release was not written"
            );
        }
    }

    /// docs/DESIGN.md D9: after a restart, resolves the TX_PENDING records
    /// whose transaction outcome the recovered transaction coordinator
    /// knows (committed: apply; aborted: revert, the staging member being
    /// gone after a restart; still ongoing: left for the marker or the
    /// timeout). Returns the number of records resolved, once durable.
    pub fn resolve_recovered(
        &self,
        outcome: impl Fn(i64, i16) -> crate::share::RecoveredTxn,
        now_ms: i64,
    ) -> u64 {
        let mut inner = self.inner.lock();
        let mark = self.mark();
        let keys: Vec<SharePartitionKey> = inner
            .partitions
            .iter()
            .filter(|(_, e)| e.sp.txn_pending_records() > 0)
            .map(|(k, _)| k.clone())
            .collect();
        let (mut resolved, mut available) = (0u64, false);
        for k in keys {
            let Inner {
                coordinator,
                partitions,
                ..
            } = &mut *inner;
            let Some(entry) = partitions.get_mut(&k) else {
                continue;
            };
            let keep_for_member = coordinator.broker_config().transaction_abort_record_state
                == AbortedRecordState::Acquired;
            let out = entry.sp.resolve_recovered(&outcome, now_ms, |m| {
                keep_for_member && coordinator.is_member_alive(&k.group_id, m)
            });
            resolved += out.resolved_records;
            available |= out.records_available;
            inner.persist_if_dirty(&k);
        }
        let durable = self.durable_since(mark);
        drop(inner);
        if available {
            self.wake();
        }
        if durable.wait_blocking().is_err() {
            tracing::error!("share state: resolving recovered TX_PENDING records was not written");
        }
        resolved
    }

    /// Session expiry and lock expiry at `now_ms`: departed members release
    /// their records, expired locks free theirs; parked fetches are woken
    /// when records became AVAILABLE. The changes are queued to the journal
    /// and not waited for (nobody is answered about them; a ShareFetch that
    /// acquires the freed records waits for its own, later, records).
    pub fn tick(&self, now_ms: i64) -> ManagerTick {
        let mut inner = self.inner.lock();
        let mut out = ManagerTick::default();
        let effects = inner.coordinator.tick(now_ms);
        out.expired_members = effects.departed.len();
        out.records_available |= inner.apply_effects(&effects, now_ms);
        out.records_available |= inner.end_orphaned_sessions(now_ms);
        if !effects.is_empty() {
            inner.persist_coordinator();
        }
        let mut changed = Vec::new();
        for (k, e) in inner.partitions.iter_mut() {
            if e.next_deadline_ms.is_none_or(|d| d > now_ms) {
                continue;
            }
            let t = e.sp.tick(now_ms);
            e.next_deadline_ms = t.next_deadline_ms;
            out.expired_records += t.expired_records;
            out.records_available |= t.records_available;
            changed.push(k.clone());
        }
        for k in changed {
            inner.persist_if_dirty(&k);
        }
        drop(inner);
        if out.records_available {
            self.wake();
        }
        out
    }

    /// The state of one record of a share partition (for tests, tools and
    /// the exactly-once checker).
    pub fn record_info(
        &self,
        group_id: &str,
        topic_id: Uuid,
        partition: i32,
        offset: i64,
    ) -> Option<crate::share::RecordInfo> {
        self.inner
            .lock()
            .partitions
            .get(&key(group_id, topic_id, partition))
            .and_then(|e| e.sp.record(offset))
    }

    /// Every run of states of a share partition's in-flight window, as
    /// `(first offset, last offset, state)`.
    pub fn record_runs(
        &self,
        group_id: &str,
        topic_id: Uuid,
        partition: i32,
    ) -> Vec<(i64, i64, crate::share::RecordInfo)> {
        self.inner
            .lock()
            .partitions
            .get(&key(group_id, topic_id, partition))
            .map(|e| e.sp.runs().collect())
            .unwrap_or_default()
    }

    /// KIP-1226's delivery-complete count: the records of the in-flight
    /// window at or above the share-partition start offset that are in a
    /// terminal state (ACKNOWLEDGED or ARCHIVED); `None` for a share
    /// partition that does not exist.
    pub fn delivery_complete_count(
        &self,
        group_id: &str,
        topic_id: Uuid,
        partition: i32,
    ) -> Option<i64> {
        let inner = self.inner.lock();
        let e = inner.partitions.get(&key(group_id, topic_id, partition))?;
        let start = e.sp.start_offset();
        Some(
            e.sp.runs()
                .filter(|(_, _, info)| {
                    matches!(
                        info.state,
                        crate::share::RecordState::Acknowledged
                            | crate::share::RecordState::Archived
                    )
                })
                .map(|(f, l, _)| (l - f.max(start) + 1).max(0))
                .sum(),
        )
    }

    /// The share partition's start offset (SPSO) and end offset, if it
    /// exists.
    pub fn partition_offsets(
        &self,
        group_id: &str,
        topic_id: Uuid,
        partition: i32,
    ) -> Option<(i64, i64)> {
        self.inner
            .lock()
            .partitions
            .get(&key(group_id, topic_id, partition))
            .map(|e| (e.sp.start_offset(), e.sp.end_offset()))
    }

    /// The start offset (SPSO) of every share partition of `group_id`, as
    /// `(topic id, partition, start offset)` in key order
    /// (DescribeShareGroupOffsets).
    pub fn group_start_offsets(&self, group_id: &str) -> Vec<(Uuid, i32, i64)> {
        let inner = self.inner.lock();
        let from = key(group_id, Uuid::nil(), i32::MIN);
        inner
            .partitions
            .range(from..)
            .take_while(|(k, _)| k.group_id == group_id)
            .map(|(k, e)| (k.topic_id, k.partition, e.sp.start_offset()))
            .collect()
    }
}

impl Inner {
    /// Departed members release their records and lose their sessions,
    /// except a member that left (heartbeat epoch -1) with a share session
    /// open: that session outlives the leave until its final epoch (which
    /// applies the acknowledgements it carries, then releases the rest) or
    /// for one acquisition lock duration, as Kafka's session outlives the
    /// leave (D18, issue #18). A member that timed out is presumed dead (no
    /// final acknowledgement will come), and one that rejoined under its
    /// own id dropped its records client-side: theirs are released at once.
    /// Returns whether records became AVAILABLE.
    fn apply_effects(&mut self, effects: &GroupEffects, now_ms: i64) -> bool {
        let mut available = false;
        for d in &effects.departed {
            let k = (d.group_id.clone(), d.member_id.clone());
            if d.reason == DepartureReason::Left {
                let lock_ms = self
                    .coordinator
                    .group_config(&d.group_id)
                    .record_lock_duration_ms;
                if let Some(s) = self.sessions.get_mut(&k) {
                    s.orphaned_until_ms
                        .get_or_insert(now_ms.saturating_add(i64::from(lock_ms)));
                    continue;
                }
            }
            self.sessions.remove(&k);
            available |= self.release_member_everywhere(&d.group_id, &d.member_id, now_ms);
        }
        available
    }

    /// Releases the member's ACQUIRED records on every share partition of
    /// the group (TX_PENDING ones stay, D8). Returns whether records became
    /// AVAILABLE.
    fn release_member_everywhere(&mut self, group_id: &str, member_id: &str, now_ms: i64) -> bool {
        let mut available = false;
        let mut dirty = Vec::new();
        for (k, e) in self.partitions.iter_mut() {
            if k.group_id != group_id {
                continue;
            }
            available |= e.sp.release_member(member_id, now_ms).records_available;
            dirty.push(k.clone());
        }
        for k in dirty {
            self.persist_if_dirty(&k);
        }
        available
    }

    fn ensure_partition(&mut self, k: &SharePartitionKey, log: &PartitionLog) {
        if self.partitions.contains_key(k) {
            return;
        }
        let config = self.coordinator.group_config(&k.group_id);
        let start = match config.auto_offset_reset {
            AutoOffsetReset::Latest => log.high_watermark(),
            AutoOffsetReset::Earliest => log.log_start_offset(),
        };
        let mut sp =
            SharePartition::new(partition_config(&config, self.dead_letter_feature), start);
        // Persist the start offset chosen now, so "latest" keeps its
        // meaning across a restart.
        sp.take_dirty();
        self.partitions.insert(
            k.clone(),
            Entry {
                sp,
                next_deadline_ms: None,
            },
        );
        self.persist_partition(k);
    }

    /// Queues the partition's snapshot if it changed.
    fn persist_if_dirty(&mut self, k: &SharePartitionKey) {
        let dirty = self
            .partitions
            .get_mut(k)
            .is_some_and(|e| e.sp.take_dirty());
        if dirty {
            self.persist_partition(k);
        }
    }

    fn partition_record(k: &SharePartitionKey, e: &Entry) -> StoredRecord {
        StoredRecord::Partition {
            group_id: k.group_id.clone(),
            topic_id: k.topic_id,
            partition: k.partition,
            state: e.sp.snapshot(),
        }
    }

    fn persist_partition(&mut self, k: &SharePartitionKey) {
        if self.journal.is_none() {
            return;
        }
        let Some(e) = self.partitions.get(k) else {
            return;
        };
        let rec = Self::partition_record(k, e);
        self.append(&rec);
    }

    fn persist_coordinator(&mut self) {
        if self.journal.is_none() {
            return;
        }
        let snap = self.coordinator.snapshot();
        if snap == self.persisted_coordinator {
            return;
        }
        self.append(&StoredRecord::Coordinator(snap.clone()));
        self.persisted_coordinator = snap;
    }

    fn append(&mut self, rec: &StoredRecord) {
        let Some(journal) = self.journal.clone() else {
            return;
        };
        let Some(bytes) = rec.encode() else {
            return;
        };
        journal.append(bytes);
        if journal.size_bytes() > self.rewrite_min_bytes && !journal.rewrite_queued() {
            self.queue_rewrite(&journal);
        }
    }

    /// Queues a compaction of the state log to the live records (carried
    /// out if the log is more than four times their size).
    fn queue_rewrite(&self, journal: &Journal) {
        let mut live: Vec<Vec<u8>> = Vec::with_capacity(self.partitions.len() + 1);
        if let Some(b) = StoredRecord::Coordinator(self.persisted_coordinator.clone()).encode() {
            live.push(b);
        }
        for (k, e) in &self.partitions {
            if let Some(b) = Self::partition_record(k, e).encode() {
                live.push(b);
            }
        }
        journal.rewrite(live);
    }
}

#[cfg(test)]
mod tests;
