//! The broker side of the consumer group coordinator: runs the I/O-free
//! [`GroupCoordinator`], persists its records and answers parked requests.
//!
//! Every call takes the coordinator's lock with the current time; the
//! records it returns are appended to `<data>/groups/offsets.log` (a
//! [`StateLog`], fsynced) under the same lock, before the caller answers,
//! so an acknowledged OffsetCommit survives kill -9. A failed append
//! rebuilds the coordinator from the log and the commit is answered
//! COORDINATOR_NOT_AVAILABLE (clients retry).
//!
//! JoinGroup and SyncGroup may be *parked* (the coordinator answers
//! [`Reply::Parked`]): the handler gets a receiver, and the answer arrives
//! when a later call or the timer (`group_tick_loop`) completes it. A
//! second parked request of the same member and kind replaces the first,
//! whose handler then answers COORDINATOR_NOT_AVAILABLE (it rediscovers
//! the coordinator and retries). At shutdown every parked request is
//! answered the same way.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::{oneshot, watch};

use super::consumer_group::consumer_protocol::{
    ConsumerProtocolConfig, ConsumerProtocolGroups, PersistedConsumerGroup,
};
use super::consumer_group::streams_protocol::{StreamsGroup, StreamsGroups};
use super::consumer_group::{
    ClassicGroupConfig, Completion, GroupCoordinator, GroupRecord, JoinGroupRequest,
    JoinGroupResponse, LeaveMember, OffsetCommitRequest, Output, Reply, SyncGroupRequest,
    SyncGroupResponse,
};
use super::core::BrokerCore;
use super::log::StateLog;
use sharestream_protocol::ErrorCode;

mod modern;
mod streams;
pub use modern::topics_of;

/// (group id, member id) of a parked request.
type Key = (String, String);

/// An answer now or a receiver for a parked one.
pub enum Pending<T> {
    /// The answer.
    Ready(T),
    /// Parked; the receiver gets the answer (an error result means the
    /// request was replaced or the broker is stopping).
    Parked(oneshot::Receiver<T>),
}

struct Inner {
    coordinator: GroupCoordinator,
    log: StateLog,
    appended: usize,
    /// Each consumer-protocol group's state as last written to the log.
    consumer_written: BTreeMap<String, PersistedConsumerGroup>,
    /// Each streams group's state as last written to the log.
    streams_written: BTreeMap<String, StreamsGroup>,
    join_waiters: HashMap<Key, oneshot::Sender<JoinGroupResponse>>,
    sync_waiters: HashMap<Key, oneshot::Sender<SyncGroupResponse>>,
    /// Committed-offset retention: (retention ms, check interval ms).
    offsets_retention: (i64, i64),
    /// When the next retention check is due (set at the first tick).
    next_offsets_check_ms: Option<i64>,
    /// Consumer-protocol groups seen without members by a retention
    /// check, and since when (the first check that saw them so).
    modern_empty_since: HashMap<String, i64>,
}

/// The consumer group coordinator with its durable log.
pub struct GroupService {
    config: ClassicGroupConfig,
    inner: Mutex<Inner>,
    /// Streams (KIP-1071) groups; locked before `modern`.
    streams: Mutex<StreamsGroups>,
    /// Consumer-protocol (KIP-848) groups; locked before `inner`.
    modern: Mutex<ConsumerProtocolGroups>,
    offsets_expired_total: std::sync::atomic::AtomicU64,
    groups_expired_total: std::sync::atomic::AtomicU64,
}

impl std::fmt::Debug for GroupService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupService").finish_non_exhaustive()
    }
}

/// Kafka's default `offsets.retention.minutes` (7 days).
pub const OFFSETS_RETENTION_MINUTES_DEFAULT: i64 = 10_080;
/// Kafka's default `offsets.retention.check.interval.ms` (10 minutes).
pub const OFFSETS_RETENTION_CHECK_INTERVAL_MS_DEFAULT: i64 = 600_000;

/// Compact when the log holds this many records more than the live state.
const COMPACT_SLACK: usize = 10_000;

impl GroupService {
    /// Opens the coordinator from `<dir>/offsets.log` (or in memory);
    /// restored consumer-protocol members' sessions start at `now_ms`.
    pub fn open(
        dir: Option<&Path>,
        config: ClassicGroupConfig,
        now_ms: i64,
    ) -> std::io::Result<Self> {
        let (log, replayed) = match dir {
            Some(dir) => {
                std::fs::create_dir_all(dir)?;
                let (log, records, _recovery) = StateLog::open(dir.join("offsets.log"))?;
                (log, records)
            }
            None => (StateLog::in_memory(), Vec::new()),
        };
        let mut records = Vec::with_capacity(replayed.len());
        for r in &replayed {
            records.push(GroupRecord::decode(r).map_err(|e| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("group coordinator log record: {e}"),
                )
            })?);
        }
        // The last record of each consumer-protocol group is its state.
        let mut consumer_written = BTreeMap::new();
        let mut streams_written = BTreeMap::new();
        for r in &records {
            match r {
                GroupRecord::ConsumerGroup { group_id, group } => {
                    match group {
                        Some(g) => consumer_written.insert(group_id.clone(), (**g).clone()),
                        None => consumer_written.remove(group_id),
                    };
                }
                GroupRecord::StreamsGroup { group_id, group } => {
                    match group {
                        Some(g) => streams_written.insert(group_id.clone(), (**g).clone()),
                        None => streams_written.remove(group_id),
                    };
                }
                _ => {}
            }
        }
        let mut streams = StreamsGroups::default();
        for (id, g) in &streams_written {
            streams.restore(id, Some(g.clone()), now_ms);
        }
        let mut modern = ConsumerProtocolGroups::new(ConsumerProtocolConfig::default());
        for (id, g) in &consumer_written {
            modern.restore(id, Some(g.clone()), now_ms);
        }
        let coordinator = GroupCoordinator::recover(config.clone(), records);
        Ok(Self {
            config,
            inner: Mutex::new(Inner {
                coordinator,
                log,
                appended: replayed.len(),
                consumer_written,
                streams_written,
                join_waiters: HashMap::new(),
                sync_waiters: HashMap::new(),
                offsets_retention: (
                    OFFSETS_RETENTION_MINUTES_DEFAULT * 60_000,
                    OFFSETS_RETENTION_CHECK_INTERVAL_MS_DEFAULT,
                ),
                next_offsets_check_ms: None,
                modern_empty_since: HashMap::new(),
            }),
            streams: Mutex::new(streams),
            modern: Mutex::new(modern),
            offsets_expired_total: Default::default(),
            groups_expired_total: Default::default(),
        })
    }

    /// Read access to the coordinator (OffsetFetch, listing, tests).
    pub fn with_coordinator<T>(&self, f: impl FnOnce(&GroupCoordinator) -> T) -> T {
        f(&self.inner.lock().coordinator)
    }

    /// JoinGroup.
    pub fn join(&self, req: &JoinGroupRequest, now_ms: i64) -> Pending<JoinGroupResponse> {
        if let Err(code) = self
            .release_empty_streams_group(
                &req.group_id,
                ErrorCode::INCONSISTENT_GROUP_PROTOCOL,
                now_ms,
            )
            .and_then(|()| self.downgrade_empty_consumer_group(&req.group_id, now_ms))
        {
            return Pending::Ready(JoinGroupResponse::error(code, ""));
        }
        let mut inner = self.inner.lock();
        let out = inner.coordinator.join(req, now_ms);
        let pending = match &out.result {
            Reply::Now(r) => Pending::Ready(r.clone()),
            Reply::Parked { member_id } => {
                let (tx, rx) = oneshot::channel();
                inner
                    .join_waiters
                    .insert((req.group_id.clone(), member_id.clone()), tx);
                Pending::Parked(rx)
            }
        };
        let _ = self.finish(&mut inner, out);
        pending
    }

    /// SyncGroup.
    pub fn sync(&self, req: &SyncGroupRequest, now_ms: i64) -> Pending<SyncGroupResponse> {
        let mut inner = self.inner.lock();
        let out = inner.coordinator.sync(req, now_ms);
        let pending = match &out.result {
            Reply::Now(r) => Pending::Ready(r.clone()),
            Reply::Parked { member_id } => {
                let (tx, rx) = oneshot::channel();
                inner
                    .sync_waiters
                    .insert((req.group_id.clone(), member_id.clone()), tx);
                Pending::Parked(rx)
            }
        };
        let _ = self.finish(&mut inner, out);
        pending
    }

    /// Heartbeat.
    pub fn heartbeat(
        &self,
        group_id: &str,
        member_id: &str,
        group_instance_id: Option<&str>,
        generation_id: i32,
        now_ms: i64,
    ) -> ErrorCode {
        self.inner.lock().coordinator.heartbeat(
            group_id,
            member_id,
            group_instance_id,
            generation_id,
            now_ms,
        )
    }

    /// LeaveGroup.
    pub fn leave(
        &self,
        group_id: &str,
        members: &[LeaveMember],
        now_ms: i64,
    ) -> Result<Vec<ErrorCode>, ErrorCode> {
        let mut inner = self.inner.lock();
        let out = inner.coordinator.leave(group_id, members, now_ms);
        let result = out.result.clone();
        let _ = self.finish(&mut inner, out);
        result
    }

    /// OffsetCommit: durable before it returns `Ok`.
    pub fn commit_offsets(
        &self,
        req: &OffsetCommitRequest,
        now_ms: i64,
    ) -> Result<Vec<ErrorCode>, ErrorCode> {
        let streams = self.streams.lock();
        let modern = self.modern.lock();
        let req = &Self::check_commit(&streams, &modern, req, false)?;
        let mut inner = self.inner.lock();
        let out = inner.coordinator.commit_offsets(req, now_ms);
        let result = out.result.clone();
        self.finish(&mut inner, out)?;
        result
    }

    /// TxnOffsetCommit (after the transaction checks): durable before it
    /// returns `Ok`.
    pub fn commit_txn_offsets(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        req: &OffsetCommitRequest,
        now_ms: i64,
    ) -> Result<Vec<ErrorCode>, ErrorCode> {
        let streams = self.streams.lock();
        let modern = self.modern.lock();
        let req = &Self::check_commit(&streams, &modern, req, true)?;
        let mut inner = self.inner.lock();
        let out = inner
            .coordinator
            .commit_txn_offsets(producer_id, producer_epoch, req, now_ms);
        let result = out.result.clone();
        self.finish(&mut inner, out)?;
        result
    }

    /// A transaction marker for `__consumer_offsets`: commits or drops the
    /// producer's staged offsets. `Err` when the record could not be
    /// persisted (the marker is retried).
    pub fn complete_txn(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        bumps_epoch: bool,
    ) -> Result<(), ErrorCode> {
        let mut inner = self.inner.lock();
        let Some(record) =
            inner
                .coordinator
                .complete_txn(producer_id, producer_epoch, commit, bumps_epoch)
        else {
            return Ok(());
        };
        let out = Output {
            result: (),
            completions: Vec::new(),
            records: vec![record],
        };
        self.finish(&mut inner, out)
    }

    /// DeleteGroups of one group.
    pub fn delete_group(&self, group_id: &str, now_ms: i64) -> ErrorCode {
        // A streams or consumer-protocol group: its offsets go with it.
        let was_modern = match self
            .delete_streams_group(group_id, now_ms)
            .or_else(|| self.delete_consumer_group(group_id, now_ms))
        {
            Some(ErrorCode::NONE) => true,
            Some(code) => return code,
            None => false,
        };
        let mut inner = self.inner.lock();
        match inner.coordinator.delete_group(group_id) {
            Err(ErrorCode::GROUP_ID_NOT_FOUND) if was_modern => ErrorCode::NONE,
            Err(code) => code,
            Ok(record) => {
                let out = Output {
                    result: (),
                    completions: Vec::new(),
                    records: vec![record],
                };
                self.finish(&mut inner, out)
                    .err()
                    .unwrap_or(ErrorCode::NONE)
            }
        }
    }

    /// OffsetDelete: one code per partition or a top-level error.
    pub fn delete_offsets(
        &self,
        group_id: &str,
        partitions: &[(String, i32)],
    ) -> Result<Vec<ErrorCode>, ErrorCode> {
        let mut inner = self.inner.lock();
        let (codes, record) = inner.coordinator.delete_offsets(group_id, partitions)?;
        let out = Output {
            result: (),
            completions: Vec::new(),
            records: record.into_iter().collect(),
        };
        self.finish(&mut inner, out)?;
        Ok(codes)
    }

    /// Forgets the offsets of a deleted topic.
    pub fn on_topic_deleted(&self, topic: &str) {
        let mut inner = self.inner.lock();
        let records = inner.coordinator.on_topic_deleted(topic);
        let out = Output {
            result: (),
            completions: Vec::new(),
            records,
        };
        let _ = self.finish(&mut inner, out);
    }

    /// Whether a timer is due at `now_ms`.
    pub fn is_due(&self, now_ms: i64) -> bool {
        self.streams_is_due(now_ms)
            || self.consumer_is_due(now_ms)
            || self
                .inner
                .lock()
                .coordinator
                .next_deadline_ms()
                .is_some_and(|d| d <= now_ms)
    }

    /// Runs the coordinator's timers (both protocols).
    pub fn tick(&self, now_ms: i64) {
        self.streams_tick(now_ms);
        self.consumer_tick(now_ms);
        self.expire_offsets_if_due(now_ms);
        let mut inner = self.inner.lock();
        if inner
            .coordinator
            .next_deadline_ms()
            .is_none_or(|d| d > now_ms)
        {
            return;
        }
        let out = inner.coordinator.tick(now_ms);
        let _ = self.finish(&mut inner, out);
    }

    /// Sets `offsets.retention.minutes` (as milliseconds) and
    /// `offsets.retention.check.interval.ms`; the next check is due one
    /// interval after the next tick.
    pub fn set_offsets_retention(&self, retention_ms: i64, check_interval_ms: i64) {
        let mut inner = self.inner.lock();
        inner.offsets_retention = (retention_ms, check_interval_ms.max(1));
        inner.next_offsets_check_ms = None;
    }

    /// Runs committed-offset retention when its interval has passed (the
    /// first tick only schedules it).
    fn expire_offsets_if_due(&self, now_ms: i64) {
        {
            let mut inner = self.inner.lock();
            let interval = inner.offsets_retention.1;
            match inner.next_offsets_check_ms {
                None => {
                    inner.next_offsets_check_ms = Some(now_ms.saturating_add(interval));
                    return;
                }
                Some(due) if due > now_ms => return,
                Some(_) => inner.next_offsets_check_ms = Some(now_ms.saturating_add(interval)),
            }
        }
        self.expire_offsets(now_ms);
    }

    /// One pass of committed-offset retention at `now_ms` (see
    /// `GroupCoordinator::expire_offsets`): the removals are journaled
    /// like every offset change (so they survive a restart), logged and
    /// counted; a consumer-protocol group deleted here goes from both
    /// sides. Returns what was removed.
    pub fn expire_offsets(&self, now_ms: i64) -> crate::consumer_group::OffsetExpiry {
        let mut streams = self.streams.lock();
        let mut modern = self.modern.lock();
        let mut inner = self.inner.lock();
        let retention_ms = inner.offsets_retention.0;
        let presence = modern.member_presence();
        inner
            .modern_empty_since
            .retain(|g, _| presence.iter().any(|(id, members)| id == g && !members));
        for (g, members) in &presence {
            if !members {
                inner.modern_empty_since.entry(g.clone()).or_insert(now_ms);
            }
        }
        let Inner {
            coordinator,
            modern_empty_since,
            ..
        } = &mut *inner;
        let expiry = coordinator.expire_offsets(now_ms, retention_ms, |g| {
            if modern.has_members(g) || streams.has_members(g) {
                Some(i64::MAX)
            } else {
                modern_empty_since.get(g).copied()
            }
        });
        if expiry.records.is_empty() {
            return expiry;
        }
        let out = Output {
            result: (),
            records: expiry.records.clone(),
            completions: Vec::new(),
        };
        if self.finish(&mut inner, out).is_err() {
            // Rebuilt from the log: the next check tries again.
            return crate::consumer_group::OffsetExpiry::default();
        }
        drop(inner);
        // A consumer-protocol group that went is journaled gone too.
        for g in &expiry.deleted_groups {
            if modern.contains(g) && modern.delete_group(g).is_ok() {
                let _ = self.persist_consumer_group(&mut modern, g, now_ms);
            }
            if streams.contains(g) && streams.delete_group(g).is_ok() {
                let _ = self.persist_streams_group(&mut streams, g, now_ms);
            }
        }
        drop(modern);
        drop(streams);
        self.offsets_expired_total.fetch_add(
            expiry.expired.len() as u64,
            std::sync::atomic::Ordering::Relaxed,
        );
        self.groups_expired_total.fetch_add(
            expiry.deleted_groups.len() as u64,
            std::sync::atomic::Ordering::Relaxed,
        );
        tracing::info!(
            offsets = expiry.expired.len(),
            groups_deleted = ?expiry.deleted_groups,
            retention_ms,
            "removed expired committed offsets"
        );
        expiry
    }

    /// Committed offsets removed by retention since start.
    pub fn offsets_expired_total(&self) -> u64 {
        self.offsets_expired_total
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Groups deleted by offset retention since start.
    pub fn groups_expired_total(&self) -> u64 {
        self.groups_expired_total
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Answers every parked request with COORDINATOR_NOT_AVAILABLE.
    pub fn release_all(&self) {
        let mut inner = self.inner.lock();
        let completions = inner
            .coordinator
            .release_all(ErrorCode::COORDINATOR_NOT_AVAILABLE);
        Self::complete(&mut inner, completions);
        inner.join_waiters.clear();
        inner.sync_waiters.clear();
    }

    /// Persists the records, then delivers the completions. `Err` when the
    /// append failed (the coordinator was rebuilt from the log).
    fn finish<T>(&self, inner: &mut Inner, out: Output<T>) -> Result<(), ErrorCode> {
        let mut result = Ok(());
        for r in &out.records {
            if let Err(e) = Self::append(inner, r) {
                tracing::error!(error = %e, "appending to the group coordinator log failed; rebuilding the coordinator from it");
                self.rebuild(inner);
                result = Err(ErrorCode::COORDINATOR_NOT_AVAILABLE);
                break;
            }
        }
        Self::complete(inner, out.completions);
        Self::maybe_compact(inner);
        result
    }

    /// Appends one record (fsynced).
    fn append(inner: &mut Inner, record: &GroupRecord) -> std::io::Result<()> {
        if sharestream_common::failpoints::hit("groups.persist") {
            return Err(std::io::Error::other("failpoint groups.persist"));
        }
        inner.log.append(&record.encode())?;
        inner.appended += 1;
        Ok(())
    }

    /// Rewrites the log as the live state once it holds enough dead records.
    fn maybe_compact(inner: &mut Inner) {
        let live = inner.coordinator.live_record_count()
            + inner.consumer_written.len()
            + inner.streams_written.len();
        if inner.appended > COMPACT_SLACK + live * 2 {
            let consumer =
                inner
                    .consumer_written
                    .iter()
                    .map(|(id, g)| GroupRecord::ConsumerGroup {
                        group_id: id.clone(),
                        group: Some(Box::new(g.clone())),
                    });
            let streams = inner
                .streams_written
                .iter()
                .map(|(id, g)| GroupRecord::StreamsGroup {
                    group_id: id.clone(),
                    group: Some(Box::new(g.clone())),
                });
            let records: Vec<Vec<u8>> = inner
                .coordinator
                .snapshot_records()
                .into_iter()
                .chain(consumer)
                .chain(streams)
                .map(|r| r.encode())
                .collect();
            match inner.log.rewrite(&records) {
                Ok(()) => inner.appended = records.len(),
                Err(e) => tracing::warn!(error = %e, "compacting the group coordinator log failed"),
            }
        }
    }

    /// Journals a consumer-protocol group's state if it changed since it
    /// was last written, under the consumer-protocol lock held by the
    /// caller. When the append fails the group goes back to what was last
    /// written (its sessions restarting at `now_ms`) and the caller answers
    /// COORDINATOR_NOT_AVAILABLE.
    fn persist_consumer_group(
        &self,
        modern: &mut ConsumerProtocolGroups,
        group_id: &str,
        now_ms: i64,
    ) -> Result<(), ErrorCode> {
        let state = modern.snapshot(group_id);
        let mut inner = self.inner.lock();
        if inner.consumer_written.get(group_id) == state.as_ref() {
            return Ok(());
        }
        let record = GroupRecord::ConsumerGroup {
            group_id: group_id.to_string(),
            group: state.clone().map(Box::new),
        };
        if let Err(e) = Self::append(&mut inner, &record) {
            tracing::error!(error = %e, group_id, "journaling a consumer group failed; it goes back to its last written state");
            modern.restore(
                group_id,
                inner.consumer_written.get(group_id).cloned(),
                now_ms,
            );
            return Err(ErrorCode::COORDINATOR_NOT_AVAILABLE);
        }
        match state {
            Some(s) => inner.consumer_written.insert(group_id.to_string(), s),
            None => inner.consumer_written.remove(group_id),
        };
        Self::maybe_compact(&mut inner);
        Ok(())
    }

    /// Journals a streams group's state if it changed since it was last
    /// written, under the streams lock held by the caller; on a failed
    /// append the group goes back to what was last written and the caller
    /// answers COORDINATOR_NOT_AVAILABLE (as for consumer-protocol groups).
    fn persist_streams_group(
        &self,
        streams: &mut StreamsGroups,
        group_id: &str,
        now_ms: i64,
    ) -> Result<(), ErrorCode> {
        let state = streams.snapshot(group_id);
        let mut inner = self.inner.lock();
        if inner.streams_written.get(group_id) == state.as_ref() {
            return Ok(());
        }
        let record = GroupRecord::StreamsGroup {
            group_id: group_id.to_string(),
            group: state.clone().map(Box::new),
        };
        if let Err(e) = Self::append(&mut inner, &record) {
            tracing::error!(error = %e, group_id, "journaling a streams group failed; it goes back to its last written state");
            streams.restore(
                group_id,
                inner.streams_written.get(group_id).cloned(),
                now_ms,
            );
            return Err(ErrorCode::COORDINATOR_NOT_AVAILABLE);
        }
        match state {
            Some(s) => inner.streams_written.insert(group_id.to_string(), s),
            None => inner.streams_written.remove(group_id),
        };
        Self::maybe_compact(&mut inner);
        Ok(())
    }

    fn complete(inner: &mut Inner, completions: Vec<Completion>) {
        for c in completions {
            match c {
                Completion::Join {
                    group_id,
                    member_id,
                    response,
                } => {
                    if let Some(tx) = inner.join_waiters.remove(&(group_id, member_id)) {
                        let _ = tx.send(response);
                    }
                }
                Completion::Sync {
                    group_id,
                    member_id,
                    response,
                } => {
                    if let Some(tx) = inner.sync_waiters.remove(&(group_id, member_id)) {
                        let _ = tx.send(response);
                    }
                }
            }
        }
    }

    /// After a failed append: the durable state is the log's. Membership is
    /// kept (it is not persisted anyway); offsets and generations are
    /// replayed.
    fn rebuild(&self, inner: &mut Inner) {
        match inner.log.replay() {
            Ok(records) => {
                let decoded = records.iter().filter_map(|r| GroupRecord::decode(r).ok());
                let fresh = GroupCoordinator::recover(self.config.clone(), decoded);
                inner.coordinator.replace_durable_state(fresh);
            }
            Err(e) => tracing::error!(error = %e, "replaying the group coordinator log failed"),
        }
    }
}

/// Drives the group coordinator's timers (sessions, join and sync
/// deadlines) every 50 ms; at shutdown answers every parked request.
pub(crate) async fn group_tick_loop(core: Arc<BrokerCore>, mut shutdown: watch::Receiver<bool>) {
    let mut tick = tokio::time::interval(std::time::Duration::from_millis(50));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {
                // Ending a join phase persists the generation: off the
                // reactor in disk mode.
                if core.consumer_groups().is_due(core.now_ms()) {
                    super::handlers::blocking_pub(&core, |c| {
                        c.consumer_groups().tick(c.now_ms())
                    })
                    .await;
                }
            }
            _ = shutdown.changed() => {
                core.consumer_groups().release_all();
                return;
            }
        }
    }
}

/// Awaits a parked answer; a dropped sender (replaced request, shutdown)
/// becomes `lost`.
pub(crate) async fn wait<T>(pending: Pending<T>, lost: impl FnOnce() -> T) -> T {
    match pending {
        Pending::Ready(r) => r,
        Pending::Parked(rx) => rx.await.unwrap_or_else(|_| lost()),
    }
}
