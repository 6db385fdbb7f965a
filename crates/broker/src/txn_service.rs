//! The broker side of the transaction coordinator: runs the I/O-free
//! [`TransactionCoordinator`] and carries out its effects.
//!
//! Every call goes through [`TxnService::call`]:
//!
//! 1. the coordinator runs under its lock with the current time;
//! 2. its `Persist` records are appended to the durable transaction log
//!    (`<data>/txn/state.log`, a [`StateLog`]) *under the same lock*, so the
//!    log order is the state order, and before the client is answered;
//! 3. its `WriteMarkers` effects are delivered after the lock is released:
//!    a log participant gets a COMMIT/ABORT control batch appended to its
//!    partition log; a share participant (docs/DESIGN.md D3) is resolved in
//!    its share partition, both through [`MarkerSink`]. Each delivery is
//!    reported back with `marker_written`, which may complete the
//!    transaction (and persist that).
//!
//! A failed append leaves the in-memory coordinator ahead of its log, so the
//! coordinator is rebuilt from the log (`recover`) and the call is answered
//! COORDINATOR_NOT_AVAILABLE, which clients retry.
//!
//! The log is compacted (rewritten from the current state) once it holds
//! many more records than there are transactional ids.

use parking_lot::Mutex;

use super::log::StateLog;
use super::txn::{
    MarkerAck, MarkerRequest, Participant, TransactionCoordinator, TxnCoordinatorConfig, TxnEffect,
    TxnLogRecord, TxnOutput,
};
use sharestream_protocol::ErrorCode;

/// Where markers go: log participants get a control batch in their
/// partition log, share participants are resolved in their share partition.
pub trait MarkerSink: Send + Sync {
    /// Appends a COMMIT or ABORT control batch to `topic`-`partition`.
    fn write_log_marker(&self, topic: &str, partition: i32, marker: &MarkerRequest) -> MarkerAck;
    /// Resolves what `marker.producer_id` staged in the share partition at
    /// `marker.producer_epoch` (or the epoch before, D4). Duplicates are
    /// no-ops (D10).
    fn write_share_marker(
        &self,
        group_id: &str,
        topic_id: uuid::Uuid,
        partition: i32,
        marker: &MarkerRequest,
    ) -> MarkerAck;
}

struct Inner {
    coordinator: TransactionCoordinator,
    log: StateLog,
    /// Records appended since the last compaction.
    appended: usize,
}

/// The transaction coordinator with its durable log and marker delivery.
pub struct TxnService {
    config: TxnCoordinatorConfig,
    inner: Mutex<Inner>,
}

impl std::fmt::Debug for TxnService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TxnService").finish_non_exhaustive()
    }
}

/// Compact when the log holds this many records more than the live state.
const COMPACT_SLACK: usize = 10_000;

impl TxnService {
    /// Opens the coordinator from `log` (replaying it) and returns the markers
    /// that recovery must re-send.
    pub fn open(
        config: TxnCoordinatorConfig,
        mut log: StateLog,
        replayed: Vec<bytes::Bytes>,
        now_ms: i64,
    ) -> std::io::Result<(Self, Vec<MarkerRequest>)> {
        let mut records = Vec::with_capacity(replayed.len());
        for r in &replayed {
            match TxnLogRecord::decode(r) {
                Ok(rec) => records.push(rec),
                Err(e) => {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        format!("transaction log record: {e}"),
                    ));
                }
            }
        }
        let (coordinator, effects) =
            TransactionCoordinator::recover(config.clone(), records, now_ms);
        let mut markers = Vec::new();
        for e in effects {
            match e {
                TxnEffect::Persist(rec) => log.append(&rec.encode())?,
                TxnEffect::WriteMarkers(m) => markers.push(m),
                TxnEffect::TransactionCompleted { .. } => {}
            }
        }
        let appended = replayed.len();
        Ok((
            Self {
                config,
                inner: Mutex::new(Inner {
                    coordinator,
                    log,
                    appended,
                }),
            },
            markers,
        ))
    }

    /// Read access to the coordinator (metrics, describe, outcomes).
    pub fn with_coordinator<T>(&self, f: impl FnOnce(&TransactionCoordinator) -> T) -> T {
        f(&self.inner.lock().coordinator)
    }

    /// Runs `f` on the coordinator, persists its records, delivers its
    /// markers through `logs`, and returns its answer.
    pub fn call<T>(
        &self,
        now_ms: i64,
        sink: &dyn MarkerSink,
        f: impl FnOnce(&mut TransactionCoordinator, i64) -> TxnOutput<T>,
    ) -> Result<T, ErrorCode> {
        let (result, markers) = {
            let mut inner = self.inner.lock();
            let out = f(&mut inner.coordinator, now_ms);
            match self.persist_locked(&mut inner, out.effects, now_ms) {
                Ok(markers) => (out.result, markers),
                Err(()) => return Err(ErrorCode::COORDINATOR_NOT_AVAILABLE),
            }
        };
        self.deliver(now_ms, sink, markers);
        result
    }

    /// Advances time (transaction timeouts, marker retries).
    pub fn tick(&self, now_ms: i64, sink: &dyn MarkerSink) {
        let markers = {
            let mut inner = self.inner.lock();
            let effects = inner.coordinator.tick(now_ms);
            self.persist_locked(&mut inner, effects, now_ms)
                .unwrap_or_default()
        };
        self.deliver(now_ms, sink, markers);
    }

    /// Delivers markers (e.g. those recovery asked to re-send).
    pub fn deliver(&self, now_ms: i64, sink: &dyn MarkerSink, mut markers: Vec<MarkerRequest>) {
        while let Some(m) = markers.pop() {
            for p in &m.participants {
                let ack = match p {
                    Participant::Log(topic, partition) => {
                        sink.write_log_marker(topic, *partition, &m)
                    }
                    Participant::Share {
                        group_id,
                        topic_id,
                        partition,
                        ..
                    } => sink.write_share_marker(group_id, *topic_id, *partition, &m),
                };
                let mut inner = self.inner.lock();
                let effects = inner.coordinator.marker_written(
                    now_ms,
                    &m.transactional_id,
                    m.producer_id,
                    m.producer_epoch,
                    p,
                    ack,
                );
                if let Ok(more) = self.persist_locked(&mut inner, effects, now_ms) {
                    markers.extend(more);
                }
            }
        }
    }

    /// Appends the `Persist` effects; returns the markers to deliver. On an
    /// append failure the coordinator is rebuilt from the log.
    fn persist_locked(
        &self,
        inner: &mut Inner,
        effects: Vec<TxnEffect>,
        now_ms: i64,
    ) -> Result<Vec<MarkerRequest>, ()> {
        let mut markers = Vec::new();
        for e in effects {
            match e {
                TxnEffect::Persist(rec) => {
                    let res = if sharestream_common::failpoints::hit("txn.persist") {
                        Err(std::io::Error::other("failpoint txn.persist"))
                    } else {
                        inner.log.append(&rec.encode())
                    };
                    if let Err(err) = res {
                        tracing::error!(error = %err, "appending to the transaction log failed; rebuilding the coordinator from it");
                        self.rebuild_locked(inner, now_ms);
                        return Err(());
                    }
                    inner.appended += 1;
                }
                TxnEffect::WriteMarkers(m) => markers.push(m),
                TxnEffect::TransactionCompleted { .. } => {}
            }
        }
        if inner.appended > COMPACT_SLACK + inner.coordinator.transactions().count() * 2 {
            self.compact_locked(inner);
        }
        Ok(markers)
    }

    fn rebuild_locked(&self, inner: &mut Inner, now_ms: i64) {
        match inner.log.replay() {
            Ok(records) => {
                let decoded: Vec<TxnLogRecord> = records
                    .iter()
                    .filter_map(|r| TxnLogRecord::decode(r).ok())
                    .collect();
                let (c, _effects) =
                    TransactionCoordinator::recover(self.config.clone(), decoded, now_ms);
                inner.coordinator = c;
            }
            Err(e) => tracing::error!(error = %e, "replaying the transaction log failed"),
        }
    }

    /// Rewrites the log as the current state: one record per transactional
    /// id plus the producer-id block and coordinator epoch.
    fn compact_locked(&self, inner: &mut Inner) {
        let mut records: Vec<Vec<u8>> = Vec::new();
        records
            .push(TxnLogRecord::CoordinatorEpoch(inner.coordinator.coordinator_epoch()).encode());
        records.push(
            TxnLogRecord::ProducerIdBlock {
                block_end: inner.coordinator.producer_id_block_end(),
            }
            .encode(),
        );
        for md in inner.coordinator.transactions() {
            records.push(TxnLogRecord::Transaction(md.clone()).encode());
        }
        match inner.log.rewrite(&records) {
            Ok(()) => inner.appended = records.len(),
            Err(e) => tracing::warn!(error = %e, "compacting the transaction log failed"),
        }
    }
}
