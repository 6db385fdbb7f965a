//! The broker's share-group state: [`SharePartitionManager`].
//!
//! It owns the two I/O-free state machines and does their I/O:
//!
//! - the [`ShareGroupCoordinator`] (membership, assignment, group configs);
//! - one [`SharePartition`] per (share group, topic id, partition), created
//!   at first use with its start offset from `share.auto.offset.reset`
//!   (latest: the high watermark; earliest: the log start offset) and
//!   configured from the group's configuration at that moment;
//! - share sessions per (group, member): epoch 0 opens (replacing any old
//!   session), each later request must carry the next epoch, -1 closes;
//!   a session holds the set of partitions its fetches cover;
//! - persistence: one [`StateLog`] (`share-state/share.log` in the data
//!   directory) of MessagePack records, each either the coordinator's
//!   snapshot or one share partition's snapshot; the last record of a key
//!   wins at replay, and the log is rewritten to the live records when it
//!   grows. A share partition's snapshot is appended (fsynced) whenever
//!   [`SharePartition::take_dirty`] says it changed, before the request that
//!   changed it is answered. After a restart, ACQUIRED records come back
//!   AVAILABLE; ACKNOWLEDGED and ARCHIVED ones are never delivered again;
//! - wake-ups: a `watch` counter bumped whenever records become AVAILABLE
//!   again (acknowledgement RELEASE, lock expiry, member departure, aborted
//!   staging). A parked ShareFetch waits on it and on the log's append
//!   watch.
//!
//! Lock order: the manager's mutex, then a partition log's mutex. Nothing
//! takes them the other way round.
//!
//! Time is an input (`now_ms`, milliseconds since the Unix epoch in the
//! broker), so tests drive lock and session expiry with explicit times.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use bytes::{Bytes, BytesMut};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use uuid::Uuid;

use super::group::{
    AutoOffsetReset, ConfigError, CoordinatorSnapshot, DepartureReason, DescribedGroup,
    GroupConfig, GroupConfigEntry, GroupEffects, GroupError, HeartbeatOutcome, HeartbeatRequest,
    ShareGroupBrokerConfig, ShareGroupCoordinator, SharePartitionKey, TopicLookup,
};
use super::log::{PartitionLog, StateLog};
use super::share::{
    AcknowledgementBatch, AcquireMode, AcquiredRange, FetchedBatch, IsolationLevel, LogView,
    SharePartition, SharePartitionConfig, SharePartitionMetrics, SharePartitionState,
};
use sharestream_protocol::ErrorCode;
use sharestream_protocol::records::RecordBatchView;

/// Kafka's default cap on share sessions per broker
/// (`group.share.max.share.sessions`).
pub const DEFAULT_MAX_SHARE_SESSIONS: usize = 2000;

/// The state log is rewritten once it is this large and more than four
/// times the size of its live records.
const REWRITE_MIN_BYTES: u64 = 1 << 20;

/// Share session epoch that opens a session.
pub const INITIAL_SHARE_SESSION_EPOCH: i32 = 0;
/// Share session epoch that closes a session.
pub const FINAL_SHARE_SESSION_EPOCH: i32 = -1;

/// A topic-partition by id.
pub type TopicIdPartition = (Uuid, i32);

/// A parked ShareFetch (counted while it lives).
#[derive(Debug)]
pub struct ParkedFetch<'a>(&'a std::sync::atomic::AtomicUsize);

impl Drop for ParkedFetch<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

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

/// What one acquisition hands to a ShareFetch response.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShareFetchData {
    /// The acquired offset ranges with their delivery counts (gaps
    /// included: the consumer acknowledges those as GAP).
    pub acquired: Vec<AcquiredRange>,
    /// Whole record batches covering the acquired offsets that carry data
    /// (control batches, and aborted ones for read_committed groups, left
    /// out). Clients skip records outside the acquired ranges.
    pub records: Bytes,
    /// Number of acquired offsets.
    pub record_count: u64,
}

/// The result of opening, continuing or closing a share session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionStep {
    /// The partitions the session covers after the request (for a closed
    /// session: the ones it covered).
    pub partitions: Vec<TopicIdPartition>,
    /// Whether the request closed the session (epoch -1).
    pub closed: bool,
}

/// What [`SharePartitionManager::tick`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ManagerTick {
    /// Members removed because their session timed out.
    pub expired_members: usize,
    /// Records whose acquisition lock expired.
    pub expired_records: u64,
    /// Whether records became AVAILABLE (parked fetches were woken).
    pub records_available: bool,
}

#[derive(Debug, Serialize, Deserialize)]
enum StoredRecord {
    Coordinator(CoordinatorSnapshot),
    Partition {
        group_id: String,
        topic_id: Uuid,
        partition: i32,
        state: SharePartitionState,
    },
}

#[derive(Debug)]
struct Entry {
    sp: SharePartition,
    /// No lock deadline is earlier (ticks skip the partition before it).
    next_deadline_ms: Option<i64>,
}

#[derive(Debug)]
struct Session {
    next_epoch: i32,
    partitions: Vec<TopicIdPartition>,
    /// Set when the member left the group (heartbeat epoch -1) while this
    /// session was open: the session outlives the departure, as Kafka's
    /// does, so that the member's final acknowledgements still count
    /// (issue #18: librdkafka sends the leave heartbeat and the final
    /// ShareAcknowledge at once). Past this time (one acquisition lock
    /// after the departure, when every lock it held has expired anyway)
    /// the session is dropped.
    orphaned_until_ms: Option<i64>,
    /// The connection the session was last used on (0: none known). When
    /// it closes, an orphaned session ends with it, as Kafka's does.
    connection_id: u64,
}

#[derive(Debug)]
struct Inner {
    coordinator: ShareGroupCoordinator,
    partitions: BTreeMap<SharePartitionKey, Entry>,
    sessions: HashMap<(String, String), Session>,
    store: Option<StateLog>,
    persisted_coordinator: CoordinatorSnapshot,
    max_sessions: usize,
    rewrite_min_bytes: u64,
}

/// The broker's share groups: coordinator, share partitions, sessions,
/// persistence and wake-ups. See the module docs.
#[derive(Debug)]
pub struct SharePartitionManager {
    inner: Mutex<Inner>,
    available: watch::Sender<u64>,
    /// ShareFetches waiting (see [`SharePartitionManager::park`]).
    parked: std::sync::atomic::AtomicUsize,
}

fn partition_config(c: &GroupConfig) -> SharePartitionConfig {
    SharePartitionConfig {
        record_lock_duration_ms: i64::from(c.record_lock_duration_ms),
        delivery_count_limit: u16::try_from(c.delivery_count_limit.max(1)).unwrap_or(u16::MAX),
        max_in_flight_records: u32::try_from(c.partition_max_record_locks.max(1)).unwrap_or(1),
        isolation: c.isolation_level,
        renew_acknowledge_enabled: c.renew_acknowledge_enabled,
    }
}

/// Milliseconds since the Unix epoch: the clock the broker gives the share
/// state machines.
pub fn unix_now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

fn next_epoch(e: i32) -> i32 {
    if e == i32::MAX { 1 } else { e + 1 }
}

fn key(group_id: &str, topic_id: Uuid, partition: i32) -> SharePartitionKey {
    SharePartitionKey {
        group_id: group_id.to_string(),
        topic_id,
        partition,
    }
}

impl SharePartitionManager {
    /// Opens the share state: in `dir` (created if needed) when given,
    /// else in memory. Replays the persisted coordinator and share
    /// partitions; restored partitions take the group's current config.
    pub fn open(
        dir: Option<&Path>,
        broker: ShareGroupBrokerConfig,
        now_ms: i64,
    ) -> std::io::Result<Self> {
        let mut coordinator_snapshot = CoordinatorSnapshot::default();
        let mut states: BTreeMap<SharePartitionKey, SharePartitionState> = BTreeMap::new();
        let store = match dir {
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
                        Err(e) => {
                            tracing::warn!(error = %e, "share state: skipping an unreadable record")
                        }
                    }
                }
                Some(log)
            }
        };
        let max_sessions = usize::try_from(broker.max_share_sessions.max(1)).unwrap_or(1);
        let coordinator = ShareGroupCoordinator::restore(broker, coordinator_snapshot.clone());
        let mut partitions = BTreeMap::new();
        for (k, state) in states {
            let config = partition_config(&coordinator.group_config(&k.group_id));
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
                store,
                persisted_coordinator: coordinator_snapshot,
                max_sessions,
                rewrite_min_bytes: REWRITE_MIN_BYTES,
            }),
            available: watch::channel(0).0,
            parked: std::sync::atomic::AtomicUsize::new(0),
        })
    }

    /// A receiver bumped whenever records become AVAILABLE again.
    pub fn subscribe_available(&self) -> watch::Receiver<u64> {
        self.available.subscribe()
    }

    fn wake(&self) {
        self.available.send_modify(|v| *v = v.wrapping_add(1));
    }

    /// Counts a ShareFetch as parked (found nothing, waiting for a wake-up
    /// or its MaxWaitMs) until the guard drops.
    pub fn park(&self) -> ParkedFetch<'_> {
        self.parked
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        ParkedFetch(&self.parked)
    }

    /// ShareFetches parked right now.
    pub fn parked_fetches(&self) -> usize {
        self.parked.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Sets the cap on share sessions (SHARE_SESSION_LIMIT_REACHED beyond).
    pub fn set_max_sessions(&self, max: usize) {
        self.inner.lock().max_sessions = max;
    }

    // ----- groups -----------------------------------------------------------

    /// ShareGroupHeartbeat: runs the coordinator and applies its effects
    /// (departed members release their records and lose their sessions).
    pub fn heartbeat(
        &self,
        req: &HeartbeatRequest,
        now_ms: i64,
        topics: &dyn TopicLookup,
    ) -> Result<HeartbeatOutcome, GroupError> {
        let mut inner = self.inner.lock();
        let out = inner.coordinator.heartbeat(req, now_ms, topics);
        if let Ok(o) = &out {
            let available = inner.apply_effects(&o.effects, now_ms);
            inner.persist_coordinator();
            drop(inner);
            if available {
                self.wake();
            }
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

    /// IncrementalAlterConfigs on a GROUP resource; persisted. Share
    /// partitions already created keep the config they were created with
    /// (lock duration, delivery count limit, isolation) until the broker
    /// restarts; new ones take the new values.
    pub fn alter_group_configs(
        &self,
        group_id: &str,
        ops: &[(&str, Option<&str>)],
        validate_only: bool,
    ) -> Result<(), ConfigError> {
        let mut inner = self.inner.lock();
        inner
            .coordinator
            .alter_configs(group_id, ops, validate_only)?;
        if !validate_only {
            // Existing share partitions of the group follow the new values.
            let config = partition_config(&inner.coordinator.group_config(group_id));
            for (k, e) in inner.partitions.iter_mut() {
                if k.group_id == group_id {
                    e.sp.set_config(config);
                }
            }
        }
        inner.persist_coordinator();
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

    /// Whether ShareFetch and ShareAcknowledge may go on for this member:
    /// it is in the group, or it has a share session still open. Kafka
    /// ties acknowledgements to the share session, which outlives a leave
    /// until its final epoch (docs/DESIGN.md, "Share sessions and
    /// departures").
    pub fn has_member_or_session(&self, group_id: &str, member_id: &str) -> bool {
        let inner = self.inner.lock();
        inner.coordinator.is_member_alive(group_id, member_id)
            || inner
                .sessions
                .contains_key(&(group_id.to_string(), member_id.to_string()))
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

    // ----- sessions ---------------------------------------------------------

    /// ShareFetch's session step. Epoch 0 opens a session covering `add`
    /// (replacing the member's old one); a positive epoch must be the
    /// session's next one (INVALID_SHARE_SESSION_EPOCH), on an existing
    /// session (SHARE_SESSION_NOT_FOUND), and adds `add` and removes
    /// `forget`; -1 closes the session.
    pub fn fetch_session(
        &self,
        group_id: &str,
        member_id: &str,
        epoch: i32,
        add: &[TopicIdPartition],
        forget: &[TopicIdPartition],
    ) -> Result<SessionStep, ErrorCode> {
        let mut inner = self.inner.lock();
        let k = (group_id.to_string(), member_id.to_string());
        match epoch {
            INITIAL_SHARE_SESSION_EPOCH => {
                if !inner.sessions.contains_key(&k) && inner.sessions.len() >= inner.max_sessions {
                    return Err(ErrorCode::SHARE_SESSION_LIMIT_REACHED);
                }
                let mut partitions = Vec::new();
                for tp in add {
                    if !partitions.contains(tp) {
                        partitions.push(*tp);
                    }
                }
                inner.sessions.insert(
                    k,
                    Session {
                        next_epoch: 1,
                        partitions: partitions.clone(),
                        orphaned_until_ms: None,
                        connection_id: 0,
                    },
                );
                Ok(SessionStep {
                    partitions,
                    closed: false,
                })
            }
            FINAL_SHARE_SESSION_EPOCH => match inner.sessions.remove(&k) {
                Some(s) => Ok(SessionStep {
                    partitions: s.partitions,
                    closed: true,
                }),
                None => Err(ErrorCode::SHARE_SESSION_NOT_FOUND),
            },
            e if e > 0 => {
                let s = inner
                    .sessions
                    .get_mut(&k)
                    .ok_or(ErrorCode::SHARE_SESSION_NOT_FOUND)?;
                if s.next_epoch != e {
                    return Err(ErrorCode::INVALID_SHARE_SESSION_EPOCH);
                }
                s.next_epoch = next_epoch(e);
                for tp in add {
                    if !s.partitions.contains(tp) {
                        s.partitions.push(*tp);
                    }
                }
                s.partitions.retain(|tp| !forget.contains(tp));
                Ok(SessionStep {
                    partitions: s.partitions.clone(),
                    closed: false,
                })
            }
            _ => Err(ErrorCode::INVALID_SHARE_SESSION_EPOCH),
        }
    }

    /// ShareAcknowledge's session step: epoch 0 is refused
    /// (INVALID_SHARE_SESSION_EPOCH: acknowledging cannot open a session),
    /// a positive epoch must be the next one, -1 closes.
    pub fn acknowledge_session(
        &self,
        group_id: &str,
        member_id: &str,
        epoch: i32,
    ) -> Result<SessionStep, ErrorCode> {
        if epoch == INITIAL_SHARE_SESSION_EPOCH {
            return Err(ErrorCode::INVALID_SHARE_SESSION_EPOCH);
        }
        self.fetch_session(group_id, member_id, epoch, &[], &[])
    }

    /// Records that the member's share session was just used on
    /// `connection_id` (after a successful session step).
    pub fn session_used_on(&self, group_id: &str, member_id: &str, connection_id: u64) {
        let mut inner = self.inner.lock();
        if let Some(s) = inner
            .sessions
            .get_mut(&(group_id.to_string(), member_id.to_string()))
        {
            s.connection_id = connection_id;
        }
    }

    /// A client connection closed: share sessions of departed members last
    /// used on it end, releasing what those members still hold (Kafka ends
    /// every session of a closed connection; ours keep a live member's
    /// session across reconnections, D18).
    pub fn connection_closed(&self, connection_id: u64, now_ms: i64) {
        let mut inner = self.inner.lock();
        let ended: Vec<(String, String)> = inner
            .sessions
            .iter()
            .filter(|(_, s)| s.connection_id == connection_id && s.orphaned_until_ms.is_some())
            .map(|(k, _)| k.clone())
            .collect();
        let mut available = false;
        for (group_id, member_id) in ended {
            inner
                .sessions
                .remove(&(group_id.clone(), member_id.clone()));
            available |= inner.release_member_everywhere(&group_id, &member_id, now_ms);
        }
        drop(inner);
        if available {
            self.wake();
        }
    }

    /// Number of open share sessions.
    pub fn session_count(&self) -> usize {
        self.inner.lock().sessions.len()
    }

    // ----- records ----------------------------------------------------------

    /// Acquires records of `topic_id`/`partition` for the member, reading
    /// the log from the share partition's next fetch offset, at most
    /// `max_bytes` (at least one batch) and `max_records` records (about,
    /// in whole batches, with [`AcquireMode::BatchOptimized`]; at most with
    /// [`AcquireMode::RecordLimit`]). Creates the share partition at first use. The
    /// member must be in the group (UNKNOWN_MEMBER_ID).
    #[allow(clippy::too_many_arguments)]
    pub fn acquire(
        &self,
        group_id: &str,
        member_id: &str,
        topic_id: Uuid,
        partition: i32,
        log: &Mutex<PartitionLog>,
        max_records: u32,
        mode: AcquireMode,
        max_bytes: usize,
        now_ms: i64,
    ) -> Result<ShareFetchData, ErrorCode> {
        if max_records == 0 {
            return Ok(ShareFetchData::default());
        }
        let mut inner = self.inner.lock();
        if !inner.coordinator.is_member_alive(group_id, member_id) {
            return Err(ErrorCode::UNKNOWN_MEMBER_ID);
        }
        let log = log.lock();
        let k = key(group_id, topic_id, partition);
        inner.ensure_partition(&k, &log);
        let entry = inner.partitions.get_mut(&k).expect("just ensured");
        let data = acquire_from_log(entry, member_id, &log, max_records, mode, max_bytes, now_ms)?;
        drop(log);
        inner.persist_if_dirty(&k);
        Ok(data)
    }

    /// ShareAcknowledge / piggy-backed acknowledgements for one partition.
    /// Errors: INVALID_REQUEST for malformed batches, INVALID_RECORD_STATE
    /// when an offset is not ACQUIRED by this member (or the share
    /// partition does not exist), KAFKA_STORAGE_ERROR if persisting fails.
    pub fn acknowledge(
        &self,
        group_id: &str,
        member_id: &str,
        topic_id: Uuid,
        partition: i32,
        batches: &[AcknowledgementBatch],
        now_ms: i64,
    ) -> Result<(), ErrorCode> {
        let mut inner = self.inner.lock();
        let k = key(group_id, topic_id, partition);
        let entry = inner
            .partitions
            .get_mut(&k)
            .ok_or(ErrorCode::INVALID_RECORD_STATE)?;
        let effects = entry
            .sp
            .acknowledge(member_id, batches, now_ms)
            .map_err(|e| e.error_code())?;
        // A RENEW may move the earliest deadline later; never earlier than
        // what is tracked, so the tracked value stays a lower bound.
        let persisted = inner.persist_if_dirty(&k);
        drop(inner);
        if effects.records_available {
            self.wake();
        }
        if persisted {
            Ok(())
        } else {
            Err(ErrorCode::KAFKA_STORAGE_ERROR)
        }
    }

    /// TxnShareAcknowledge (KIP-1289): stages ACCEPT/REJECT for the
    /// transaction of (`producer_id`, `producer_epoch`). Validates the
    /// member and its epoch first (UNKNOWN_MEMBER_ID, STALE/FENCED_MEMBER_EPOCH).
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
        batches: &[AcknowledgementBatch],
        now_ms: i64,
    ) -> Result<(), ErrorCode> {
        let mut inner = self.inner.lock();
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
        let persisted = inner.persist_if_dirty(&k);
        drop(inner);
        if effects.records_available {
            self.wake();
        }
        if persisted {
            Ok(())
        } else {
            Err(ErrorCode::KAFKA_STORAGE_ERROR)
        }
    }

    /// A transaction marker for a share participant: resolves what
    /// (`producer_id`, `producer_epoch` or the epoch before) staged on that
    /// share partition. Returns the number of records resolved (0 for an
    /// unknown share partition or a duplicate marker).
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
        let k = key(group_id, topic_id, partition);
        let Inner {
            coordinator,
            partitions,
            ..
        } = &mut *inner;
        let Some(entry) = partitions.get_mut(&k) else {
            return Ok(0);
        };
        let out = entry
            .sp
            .apply_marker(producer_id, producer_epoch, commit, now_ms, |m| {
                // An imposed abort (fence, timeout): the staging member's
                // producer is a zombie, so its records are released.
                !imposed && coordinator.is_member_alive(group_id, m)
            });
        if kind == MarkerKind::Abort {
            // Aborted staging comes back ACQUIRED with a fresh lock.
            let deadline = now_ms + entry.sp.config().record_lock_duration_ms;
            entry.next_deadline_ms =
                Some(entry.next_deadline_ms.map_or(deadline, |d| d.min(deadline)));
        }
        let persisted = inner.persist_if_dirty(&k);
        drop(inner);
        if out.records_available {
            self.wake();
        }
        if !persisted {
            return Err(std::io::Error::other(
                "persisting share-partition state failed",
            ));
        }
        Ok(out.resolved_records)
    }

    /// A share session closed: the member's ACQUIRED records on the
    /// session's partitions become AVAILABLE again (as Kafka does when a
    /// session ends), its TX_PENDING ones stay.
    pub fn release_session_records(
        &self,
        group_id: &str,
        member_id: &str,
        partitions: &[TopicIdPartition],
        now_ms: i64,
    ) {
        let mut inner = self.inner.lock();
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
        drop(inner);
        if available {
            self.wake();
        }
    }

    /// docs/DESIGN.md D9: after a restart, resolves the TX_PENDING records
    /// whose transaction outcome the recovered transaction coordinator
    /// knows (committed: apply; aborted: revert, the staging member being
    /// gone after a restart; still ongoing: left for the marker or the
    /// timeout). Returns the number of records resolved.
    pub fn resolve_recovered(
        &self,
        outcome: impl Fn(i64, i16) -> crate::share::RecoveredTxn,
        now_ms: i64,
    ) -> u64 {
        let mut inner = self.inner.lock();
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
            let out = entry.sp.resolve_recovered(&outcome, now_ms, |m| {
                coordinator.is_member_alive(&k.group_id, m)
            });
            resolved += out.resolved_records;
            available |= out.records_available;
            inner.persist_if_dirty(&k);
        }
        drop(inner);
        if available {
            self.wake();
        }
        resolved
    }

    /// Locks that would have expired while their records were TX_PENDING
    /// (KIP-1289 TxnPendingLockExpiredCount), all share partitions.
    pub fn txn_pending_lock_expired_total(&self) -> u64 {
        self.inner
            .lock()
            .partitions
            .values()
            .map(|e| e.sp.metrics().txn_pending_lock_expired_total)
            .sum()
    }

    /// Records TX_PENDING on every share partition (a `share.version`
    /// downgrade below 3 is refused while this is not 0).
    pub fn txn_pending_records(&self) -> u64 {
        self.inner
            .lock()
            .partitions
            .values()
            .map(|e| e.sp.txn_pending_records())
            .sum()
    }

    /// Session expiry and lock expiry at `now_ms`: departed members release
    /// their records, expired locks free theirs; parked fetches are woken
    /// when records became AVAILABLE.
    pub fn tick(&self, now_ms: i64) -> ManagerTick {
        let mut inner = self.inner.lock();
        let mut out = ManagerTick::default();
        let effects = inner.coordinator.tick(now_ms);
        out.expired_members = effects.departed.len();
        out.records_available |= inner.apply_effects(&effects, now_ms);
        let orphans: Vec<(String, String)> = inner
            .sessions
            .iter()
            .filter(|(_, s)| s.orphaned_until_ms.is_some_and(|t| t <= now_ms))
            .map(|(k, _)| k.clone())
            .collect();
        for (group_id, member_id) in orphans {
            inner
                .sessions
                .remove(&(group_id.clone(), member_id.clone()));
            out.records_available |= inner.release_member_everywhere(&group_id, &member_id, now_ms);
        }
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

    /// Gauges and counters of every share partition.
    pub fn partition_metrics(&self) -> Vec<(SharePartitionKey, SharePartitionMetrics)> {
        self.inner
            .lock()
            .partitions
            .iter()
            .map(|(k, e)| (k.clone(), e.sp.metrics()))
            .collect()
    }

    /// Total runs held by every share partition (memory, in runs).
    pub fn run_count(&self) -> usize {
        self.inner
            .lock()
            .partitions
            .values()
            .map(|e| e.sp.run_count())
            .sum()
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

    /// Per share partition metrics in Prometheus text format: in-flight,
    /// acquired, acknowledged and archived records (gauges), lock expiries
    /// and redeliveries (counters), labelled by group, topic id and
    /// partition.
    pub fn render_prometheus(&self) -> String {
        let rows = self.partition_metrics();
        let mut out = String::new();
        type Series = (
            &'static str,
            &'static str,
            &'static str,
            fn(&SharePartitionMetrics) -> u64,
        );
        let series: [Series; 7] = [
            (
                "share_partition_in_flight_records",
                "gauge",
                "Records in the in-flight window.",
                |m| m.in_flight_records,
            ),
            (
                "share_partition_acquired_records",
                "gauge",
                "Records ACQUIRED.",
                |m| m.acquired_records,
            ),
            (
                "share_partition_acknowledged_records",
                "gauge",
                "Records ACKNOWLEDGED in the window.",
                |m| m.acknowledged_records,
            ),
            (
                "share_partition_archived_records",
                "gauge",
                "Records ARCHIVED in the window.",
                |m| m.archived_records,
            ),
            (
                "share_partition_lock_expired_total",
                "counter",
                "Acquisition locks that expired.",
                |m| m.lock_expired_total,
            ),
            (
                "share_partition_redeliveries_total",
                "counter",
                "Records acquired again after a first delivery.",
                |m| m.redeliveries_total,
            ),
            (
                "share_partition_archived_at_delivery_limit_total",
                "counter",
                "Records archived because their delivery count reached the limit (not delivered again).",
                |m| m.archived_at_limit_total,
            ),
        ];
        for (name, ty, help, get) in series {
            let _ = writeln!(out, "# HELP sharestream_{name} {help}");
            let _ = writeln!(out, "# TYPE sharestream_{name} {ty}");
            for (k, m) in &rows {
                let _ = writeln!(
                    out,
                    "sharestream_{name}{{group=\"{}\",topic_id=\"{}\",partition=\"{}\"}} {}",
                    k.group_id.replace('\\', "\\\\").replace('"', "\\\""),
                    k.topic_id,
                    k.partition,
                    get(m)
                );
            }
        }
        out
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
        let mut sp = SharePartition::new(partition_config(&config), start);
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

    /// Persists the partition if it changed; false if writing failed.
    fn persist_if_dirty(&mut self, k: &SharePartitionKey) -> bool {
        let dirty = self
            .partitions
            .get_mut(k)
            .is_some_and(|e| e.sp.take_dirty());
        if dirty {
            self.persist_partition(k)
        } else {
            true
        }
    }

    fn persist_partition(&mut self, k: &SharePartitionKey) -> bool {
        if self.store.is_none() {
            return true;
        }
        let Some(e) = self.partitions.get(k) else {
            return true;
        };
        let rec = StoredRecord::Partition {
            group_id: k.group_id.clone(),
            topic_id: k.topic_id,
            partition: k.partition,
            state: e.sp.snapshot(),
        };
        self.append(&rec)
    }

    fn persist_coordinator(&mut self) {
        if self.store.is_none() {
            return;
        }
        let snap = self.coordinator.snapshot();
        if snap == self.persisted_coordinator {
            return;
        }
        if self.append(&StoredRecord::Coordinator(snap.clone())) {
            self.persisted_coordinator = snap;
        }
    }

    fn append(&mut self, rec: &StoredRecord) -> bool {
        let bytes = match rmp_serde::to_vec_named(rec) {
            Ok(b) => b,
            Err(e) => {
                tracing::error!(error = %e, "share state: cannot encode a record");
                return false;
            }
        };
        let Some(store) = self.store.as_mut() else {
            return true;
        };
        if let Err(e) = store.append(&bytes) {
            tracing::error!(error = %e, "share state: append failed");
            return false;
        }
        if store.size_bytes() > self.rewrite_min_bytes {
            self.maybe_rewrite();
        }
        true
    }

    /// Compacts the state log to the live records when it is more than
    /// four times their size.
    fn maybe_rewrite(&mut self) {
        let mut live: Vec<Vec<u8>> = Vec::with_capacity(self.partitions.len() + 1);
        if let Ok(b) = rmp_serde::to_vec_named(&StoredRecord::Coordinator(
            self.persisted_coordinator.clone(),
        )) {
            live.push(b);
        }
        for (k, e) in &self.partitions {
            let rec = StoredRecord::Partition {
                group_id: k.group_id.clone(),
                topic_id: k.topic_id,
                partition: k.partition,
                state: e.sp.snapshot(),
            };
            if let Ok(b) = rmp_serde::to_vec_named(&rec) {
                live.push(b);
            }
        }
        let live_bytes: u64 = live.iter().map(|b| b.len() as u64 + 8).sum();
        let Some(store) = self.store.as_mut() else {
            return;
        };
        if store.size_bytes() <= live_bytes.saturating_mul(4) {
            return;
        }
        if let Err(e) = store.rewrite(&live) {
            tracing::error!(error = %e, "share state: rewrite failed");
        }
    }
}

/// Reads the log from the partition's next fetch offset and acquires.
fn acquire_from_log(
    entry: &mut Entry,
    member_id: &str,
    log: &PartitionLog,
    max_records: u32,
    mode: AcquireMode,
    max_bytes: usize,
    now_ms: i64,
) -> Result<ShareFetchData, ErrorCode> {
    let sp = &mut entry.sp;
    let log_start = log.log_start_offset();
    if sp.start_offset() < log_start {
        sp.advance_log_start(log_start, now_ms);
    }
    let Some(from) = sp.next_fetch_offset() else {
        return Ok(ShareFetchData::default());
    };
    let hw = log.high_watermark();
    let lso = log.last_stable_offset();
    let read_committed = sp.config().isolation == IsolationLevel::ReadCommitted;
    let bound = if read_committed { lso } else { hw };
    let from = from.max(log_start);
    if from >= bound {
        return Ok(ShareFetchData::default());
    }
    let bytes = log
        .read_bounded(from, max_bytes.max(1), bound)
        .map_err(|e| e.error_code())?;
    let views =
        RecordBatchView::parse_all(bytes.clone()).map_err(|_| ErrorCode::CORRUPT_MESSAGE)?;
    let aborted = match views.last() {
        Some(last) if read_committed => log.aborted_transactions(from, last.last_offset() + 1),
        _ => Vec::new(),
    };
    let fetched: Vec<FetchedBatch> = views
        .iter()
        .map(|v| FetchedBatch {
            base_offset: v.base_offset(),
            last_offset: v.last_offset(),
            control: v.is_control(),
            aborted: v.is_transactional()
                && !v.is_control()
                && aborted.iter().any(|a| {
                    a.producer_id == v.producer_id()
                        && a.first_offset <= v.base_offset()
                        && v.base_offset() < a.last_offset
                }),
        })
        .collect();
    let acquisition = sp.acquire(
        member_id,
        max_records,
        mode,
        now_ms,
        &LogView {
            high_watermark: hw,
            last_stable_offset: lso,
            batches: &fetched,
        },
    );
    if !acquisition.acquired.is_empty() {
        let deadline = now_ms + sp.config().record_lock_duration_ms;
        entry.next_deadline_ms = Some(entry.next_deadline_ms.map_or(deadline, |d| d.min(deadline)));
    }
    // Whole batches covering acquired offsets, data batches only.
    let mut pos = 0usize;
    let mut ranges: Vec<(usize, usize)> = Vec::new();
    for (v, fb) in views.iter().zip(&fetched) {
        let start = pos;
        pos += v.size();
        let gap = fb.control || (read_committed && fb.aborted);
        let overlaps = acquisition
            .acquired
            .iter()
            .any(|r| r.first_offset <= fb.last_offset && fb.base_offset <= r.last_offset);
        if overlaps && !gap {
            match ranges.last_mut() {
                Some(r) if r.1 == start => r.1 = pos,
                _ => ranges.push((start, pos)),
            }
        }
    }
    let records = match ranges.as_slice() {
        [] => Bytes::new(),
        [(a, b)] => bytes.slice(*a..*b),
        many => {
            let mut out = BytesMut::with_capacity(many.iter().map(|(a, b)| b - a).sum());
            for (a, b) in many {
                out.extend_from_slice(&bytes[*a..*b]);
            }
            out.freeze()
        }
    };
    Ok(ShareFetchData {
        record_count: acquisition.record_count(),
        acquired: acquisition.acquired,
        records,
    })
}

#[cfg(test)]
#[path = "shares_tests.rs"]
mod tests;
