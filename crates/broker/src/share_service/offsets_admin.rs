//! Share-group offset administration: AlterShareGroupOffsets,
//! DeleteShareGroupOffsets and DeleteGroups of a share group (what
//! `kafka-share-groups.sh --reset-offsets / --delete-offsets / --delete`
//! send), and the move of share-partition start offsets when DeleteRecords
//! moves a log start offset.
//!
//! Kafka's rules, from its group coordinator and share coordinator:
//!
//! - the group must have no members (NON_EMPTY_GROUP). Altering offsets
//!   creates a group that does not exist; deleting needs one
//!   (GROUP_ID_NOT_FOUND);
//! - altering a partition's offset re-initializes its share state: the
//!   share-partition start offset (SPSO) becomes the given offset and the
//!   in-flight window is emptied (delivery counts start again). The offset
//!   is not checked against the log: one below the log start offset moves
//!   up to it at the next fetch, one beyond the end waits for the log;
//! - deleting a topic's offsets removes the share state of every partition
//!   of the group on that topic; the next fetch starts from
//!   `share.auto.offset.reset`. A topic the group has no state for is
//!   UNKNOWN_TOPIC_OR_PARTITION ("There is no offset information to
//!   delete.").
//!
//! Ours beyond Kafka (docs/DESIGN.md D26): a share partition with records
//! staged in an open transaction (TX_PENDING, KIP-1289) is neither reset
//! nor deleted (CONCURRENT_TRANSACTIONS, retriable): the transaction's
//! marker must find the records it staged, or its commit would publish
//! output whose input is delivered again. An offset of -1 resets the
//! partition to `share.auto.offset.reset` (as Kafka's share partition reads
//! a start offset of -1), one below -1 is INVALID_REQUEST.
//!
//! Every change is written to the share-state journal before the answer
//! (the [`Pending`] the handlers await): a reset as the partition's new
//! snapshot, a deletion as a `PartitionDeleted` record.

use uuid::Uuid;

use super::persistence::StoredRecord;
use super::{Entry, Inner, Pending, ShareService, key, partition_config};
use crate::group::{GroupError, SharePartitionKey};
use crate::share::SharePartition;
use sharestream_protocol::ErrorCode;

/// The outcome of one partition (AlterShareGroupOffsets) or one topic
/// (DeleteShareGroupOffsets): `Err` carries Kafka's code and a message.
pub type AdminOutcome = Result<(), GroupError>;

fn refused(code: ErrorCode, message: impl Into<String>) -> GroupError {
    GroupError {
        code,
        message: message.into(),
    }
}

fn staged(topic_id: Uuid, partition: i32) -> GroupError {
    refused(
        ErrorCode::CONCURRENT_TRANSACTIONS,
        format!(
            "Share partition {topic_id}:{partition} has records staged in an open transaction \
             (TX_PENDING); retry once the transaction has ended."
        ),
    )
}

impl Inner {
    /// Removes a share partition and journals its deletion.
    fn delete_partition(&mut self, k: &SharePartitionKey) {
        if self.partitions.remove(k).is_none() {
            return;
        }
        self.append(&StoredRecord::PartitionDeleted {
            group_id: k.group_id.clone(),
            topic_id: k.topic_id,
            partition: k.partition,
        });
    }

    /// The keys of the group's share partitions (of one topic, if given).
    fn group_keys(&self, group_id: &str, topic_id: Option<Uuid>) -> Vec<SharePartitionKey> {
        let from = key(group_id, topic_id.unwrap_or(Uuid::nil()), i32::MIN);
        self.partitions
            .range(from..)
            .map(|(k, _)| k)
            .take_while(|k| k.group_id == group_id && topic_id.is_none_or(|t| k.topic_id == t))
            .cloned()
            .collect()
    }

    fn has_staged(&self, k: &SharePartitionKey) -> bool {
        self.partitions
            .get(k)
            .is_some_and(|e| e.sp.txn_pending_records() > 0)
    }
}

impl ShareService {
    /// Whether `group_id` is a share group here.
    pub fn is_share_group(&self, group_id: &str) -> bool {
        self.inner.lock().coordinator.group_exists(group_id)
    }

    /// AlterShareGroupOffsets: sets the start offset of each
    /// `(topic id, partition, offset)` (the caller has checked that the
    /// partitions exist). `Err` is the group's refusal (INVALID_GROUP_ID,
    /// NON_EMPTY_GROUP); otherwise one outcome per entry, in order.
    pub fn alter_offsets_deferred(
        &self,
        group_id: &str,
        offsets: &[(Uuid, i32, i64)],
    ) -> Pending<Result<Vec<AdminOutcome>, GroupError>> {
        let mut inner = self.inner.lock();
        let mark = self.mark();
        if let Err(e) = inner.coordinator.ensure_empty_group(group_id) {
            return Pending::new(Err(e), Default::default());
        }
        let config = partition_config(
            &inner.coordinator.group_config(group_id),
            inner.dead_letter_feature,
        );
        let mut out = Vec::with_capacity(offsets.len());
        for &(topic_id, partition, offset) in offsets {
            let k = key(group_id, topic_id, partition);
            if offset < -1 {
                out.push(Err(refused(
                    ErrorCode::INVALID_REQUEST,
                    format!("The start offset {offset} is negative."),
                )));
            } else if inner.has_staged(&k) {
                out.push(Err(staged(topic_id, partition)));
            } else if offset == -1 {
                inner.delete_partition(&k);
                out.push(Ok(()));
            } else {
                let mut sp = SharePartition::new(config, offset);
                sp.take_dirty();
                inner.partitions.insert(
                    k.clone(),
                    Entry {
                        sp,
                        next_deadline_ms: None,
                    },
                );
                inner.persist_partition(&k);
                out.push(Ok(()));
            }
        }
        // A group created here must survive a restart.
        inner.persist_coordinator();
        let durable = self.durable_since(mark);
        drop(inner);
        Pending::new(Ok(out), durable)
    }

    /// DeleteShareGroupOffsets: removes the group's share state on each
    /// topic. `Err` is the group's refusal (INVALID_GROUP_ID,
    /// GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP); otherwise one outcome per
    /// topic, in order.
    pub fn delete_offsets_deferred(
        &self,
        group_id: &str,
        topic_ids: &[Uuid],
    ) -> Pending<Result<Vec<AdminOutcome>, GroupError>> {
        let mut inner = self.inner.lock();
        let mark = self.mark();
        if let Err(e) = inner.coordinator.check_empty_group(group_id) {
            return Pending::new(Err(e), Default::default());
        }
        let mut out = Vec::with_capacity(topic_ids.len());
        for &topic_id in topic_ids {
            let keys = inner.group_keys(group_id, Some(topic_id));
            if keys.is_empty() {
                out.push(Err(refused(
                    ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
                    "There is no offset information to delete.",
                )));
            } else if let Some(k) = keys.iter().find(|k| inner.has_staged(k)) {
                out.push(Err(staged(k.topic_id, k.partition)));
            } else {
                for k in &keys {
                    inner.delete_partition(k);
                }
                out.push(Ok(()));
            }
        }
        let durable = self.durable_since(mark);
        drop(inner);
        Pending::new(Ok(out), durable)
    }

    /// DeleteGroups of a share group: an existing group without members
    /// (GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP) loses its share state and its
    /// membership record; its configs stay (as in Kafka, where they live
    /// in the cluster metadata). CONCURRENT_TRANSACTIONS while records are
    /// staged in an open transaction (D26).
    pub fn delete_group_deferred(&self, group_id: &str) -> Pending<Result<(), GroupError>> {
        let mut inner = self.inner.lock();
        let mark = self.mark();
        if let Err(e) = inner.coordinator.check_empty_group(group_id) {
            return Pending::new(Err(e), Default::default());
        }
        let keys = inner.group_keys(group_id, None);
        if let Some(k) = keys.iter().find(|k| inner.has_staged(k)) {
            let e = staged(k.topic_id, k.partition);
            return Pending::new(Err(e), Default::default());
        }
        for k in &keys {
            inner.delete_partition(k);
        }
        inner.sessions.retain(|(g, _), _| g.as_str() != group_id);
        let deleted = inner.coordinator.delete_group(group_id);
        inner.persist_coordinator();
        let durable = self.durable_since(mark);
        drop(inner);
        Pending::new(deleted, durable)
    }

    /// DeleteRecords moved the log start offset of `topic_id`/`partition`
    /// to `log_start_offset`: every share group's share partition there
    /// moves its start offset up to it now (records below that were
    /// AVAILABLE or ACQUIRED become ARCHIVED, TX_PENDING ones stay for
    /// their transaction), rather than at its next fetch, so that
    /// DescribeShareGroupOffsets and the lag agree with the log at once,
    /// as in Kafka. Returns how many share partitions moved.
    pub fn log_start_moved_deferred(
        &self,
        topic_id: Uuid,
        partition: i32,
        log_start_offset: i64,
        now_ms: i64,
    ) -> Pending<usize> {
        let mut inner = self.inner.lock();
        let mark = self.mark();
        let keys: Vec<SharePartitionKey> = inner
            .partitions
            .iter()
            .filter(|(k, e)| {
                k.topic_id == topic_id
                    && k.partition == partition
                    && e.sp.start_offset() < log_start_offset
            })
            .map(|(k, _)| k.clone())
            .collect();
        let mut available = false;
        for k in &keys {
            if let Some(e) = inner.partitions.get_mut(k) {
                available |=
                    e.sp.advance_log_start(log_start_offset, now_ms)
                        .records_available;
            }
            inner.persist_if_dirty(k);
        }
        let durable = self.durable_since(mark);
        drop(inner);
        if available {
            self.wake();
        }
        Pending::new(keys.len(), durable)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::{HeartbeatRequest, ShareGroupBrokerConfig, TopicInfo};
    use crate::log::{AppendOptions, LogConfig, PartitionLog};
    use crate::share::{AcknowledgeType, AcknowledgementBatch, AcquireMode, RecordState};
    use bytes::Bytes;
    use parking_lot::Mutex;
    use sharestream_protocol::records::{BatchSpec, Record, RecordBatchView, encode_batch};

    const T: Uuid = Uuid::from_u128(0x51);

    fn topics(name: &str) -> Option<TopicInfo> {
        (name == "t").then_some(TopicInfo {
            id: T,
            partitions: 2,
        })
    }

    fn service(dir: Option<&std::path::Path>) -> ShareService {
        let s = ShareService::open(dir, ShareGroupBrokerConfig::default(), 0).unwrap();
        s.alter_group_configs("g", &[("share.auto.offset.reset", Some("earliest"))], false)
            .unwrap();
        s
    }

    fn log_with(n: usize) -> Mutex<PartitionLog> {
        let mut log = PartitionLog::in_memory(LogConfig::default());
        let records: Vec<Record> = (0..n)
            .map(|i| Record::new(i as i32, 1, None, Some(Bytes::from(format!("v{i}")))))
            .collect();
        let mut bytes = encode_batch(&BatchSpec::default(), &records).unwrap();
        let view = RecordBatchView::split_from(&mut bytes).unwrap().unwrap();
        log.append(
            &[view],
            AppendOptions {
                now_ms: 1,
                log_append_time: false,
                leader_epoch: 0,
            },
        )
        .unwrap();
        Mutex::new(log)
    }

    fn hb(s: &ShareService, member: &str, epoch: i32) {
        let req = HeartbeatRequest {
            group_id: "g".into(),
            member_id: member.into(),
            member_epoch: epoch,
            subscribed_topic_names: (epoch == 0).then(|| vec!["t".into()]),
            ..Default::default()
        };
        s.heartbeat(&req, 1, &topics).unwrap();
    }

    fn acquire(s: &ShareService, member: &str, log: &Mutex<PartitionLog>) -> u64 {
        s.acquire(
            "g",
            member,
            T,
            0,
            log,
            500,
            AcquireMode::BatchOptimized,
            1 << 20,
            2,
        )
        .unwrap()
        .record_count
    }

    fn spso(s: &ShareService) -> Option<i64> {
        s.partition_offsets("g", T, 0).map(|(start, _)| start)
    }

    #[test]
    fn reset_needs_an_empty_group_and_restarts_the_window() {
        let s = service(None);
        let log = log_with(10);
        hb(&s, "m1", 0);
        assert_eq!(acquire(&s, "m1", &log), 10);
        let e = s
            .alter_offsets_deferred("g", &[(T, 0, 4)])
            .forget()
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::NON_EMPTY_GROUP);
        assert_eq!(spso(&s), Some(0), "refused: nothing changed");
        hb(&s, "m1", -1);
        let out = s
            .alter_offsets_deferred("g", &[(T, 0, 4), (T, 1, -2)])
            .durable_blocking()
            .unwrap()
            .unwrap();
        assert!(out[0].is_ok());
        assert_eq!(
            out[1].as_ref().unwrap_err().code,
            ErrorCode::INVALID_REQUEST
        );
        assert_eq!(s.partition_offsets("g", T, 0), Some((4, 4)));
        assert!(s.record_info("g", T, 0, 5).is_none(), "the window is empty");
        hb(&s, "m2", 0);
        assert_eq!(acquire(&s, "m2", &log), 6, "offsets 4..=9, delivered anew");
        let r = s.record_info("g", T, 0, 4).unwrap();
        assert_eq!((r.state, r.delivery_count), (RecordState::Acquired, 1));
    }

    #[test]
    fn reset_of_a_new_group_creates_it_and_minus_one_means_auto_reset() {
        let s = service(None);
        let out = s
            .alter_offsets_deferred("fresh", &[(T, 0, 7)])
            .forget()
            .unwrap();
        assert!(out[0].is_ok());
        assert!(s.is_share_group("fresh"));
        assert_eq!(s.partition_offsets("fresh", T, 0), Some((7, 7)));
        let out = s
            .alter_offsets_deferred("fresh", &[(T, 0, -1)])
            .forget()
            .unwrap();
        assert!(out[0].is_ok());
        assert_eq!(s.partition_offsets("fresh", T, 0), None);
    }

    #[test]
    fn delete_offsets_and_delete_group() {
        let s = service(None);
        let log = log_with(5);
        hb(&s, "m1", 0);
        assert_eq!(acquire(&s, "m1", &log), 5);
        let other = Uuid::from_u128(0x99);
        let e = s.delete_offsets_deferred("g", &[T]).forget().unwrap_err();
        assert_eq!(e.code, ErrorCode::NON_EMPTY_GROUP);
        assert_eq!(
            s.delete_group_deferred("g").forget().unwrap_err().code,
            ErrorCode::NON_EMPTY_GROUP
        );
        hb(&s, "m1", -1);
        let out = s
            .delete_offsets_deferred("g", &[T, other])
            .forget()
            .unwrap();
        assert!(out[0].is_ok());
        assert_eq!(
            out[1].as_ref().unwrap_err().code,
            ErrorCode::UNKNOWN_TOPIC_OR_PARTITION
        );
        assert_eq!(s.partition_offsets("g", T, 0), None);
        let e = s
            .delete_offsets_deferred("nope", &[T])
            .forget()
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::GROUP_ID_NOT_FOUND);
        s.delete_group_deferred("g").forget().unwrap();
        assert!(!s.is_share_group("g"));
        assert_eq!(
            s.delete_group_deferred("g").forget().unwrap_err().code,
            ErrorCode::GROUP_ID_NOT_FOUND
        );
    }

    #[test]
    fn staged_records_block_reset_and_delete() {
        let s = service(None);
        let log = log_with(3);
        hb(&s, "m1", 0);
        assert_eq!(acquire(&s, "m1", &log), 3);
        let epoch = s.describe(&["g".to_string()])[0].members[0].member_epoch;
        s.stage(
            "g",
            "m1",
            epoch,
            T,
            0,
            7,
            0,
            &[AcknowledgementBatch::uniform(0, 2, AcknowledgeType::Accept)],
            2,
        )
        .unwrap();
        hb(&s, "m1", -1);
        let out = s
            .alter_offsets_deferred("g", &[(T, 0, 0)])
            .forget()
            .unwrap();
        assert_eq!(
            out[0].as_ref().unwrap_err().code,
            ErrorCode::CONCURRENT_TRANSACTIONS
        );
        let out = s.delete_offsets_deferred("g", &[T]).forget().unwrap();
        assert_eq!(
            out[0].as_ref().unwrap_err().code,
            ErrorCode::CONCURRENT_TRANSACTIONS
        );
        assert_eq!(
            s.delete_group_deferred("g").forget().unwrap_err().code,
            ErrorCode::CONCURRENT_TRANSACTIONS
        );
        assert_eq!(
            s.record_info("g", T, 0, 1).unwrap().state,
            RecordState::TxPending
        );
    }

    #[test]
    fn resets_and_deletions_survive_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        {
            let s = service(Some(dir.path()));
            let log = log_with(5);
            hb(&s, "m1", 0);
            assert_eq!(acquire(&s, "m1", &log), 5);
            hb(&s, "m1", -1);
            s.alter_offsets_deferred("g", &[(T, 0, 3)])
                .durable_blocking()
                .unwrap()
                .unwrap();
            s.alter_offsets_deferred("h", &[(T, 0, 2), (T, 1, 1)])
                .durable_blocking()
                .unwrap()
                .unwrap();
            s.delete_offsets_deferred("h", &[T])
                .durable_blocking()
                .unwrap()
                .unwrap();
        }
        let s = ShareService::open(Some(dir.path()), ShareGroupBrokerConfig::default(), 0).unwrap();
        assert_eq!(s.partition_offsets("g", T, 0), Some((3, 3)));
        assert_eq!(
            s.partition_offsets("h", T, 0),
            None,
            "deleted stays deleted"
        );
        assert_eq!(s.partition_offsets("h", T, 1), None);
        assert!(s.is_share_group("h"), "the group created by the reset");
    }

    #[test]
    fn delete_records_moves_the_share_partition_start_offset() {
        let s = service(None);
        let log = log_with(10);
        hb(&s, "m1", 0);
        assert_eq!(acquire(&s, "m1", &log), 10);
        s.acknowledge(
            "g",
            "m1",
            T,
            0,
            &[AcknowledgementBatch::uniform(0, 1, AcknowledgeType::Accept)],
            2,
        )
        .unwrap();
        s.acknowledge(
            "g",
            "m1",
            T,
            0,
            &[AcknowledgementBatch::uniform(
                2,
                5,
                AcknowledgeType::Release,
            )],
            2,
        )
        .unwrap();
        assert_eq!(spso(&s), Some(2));
        log.lock().delete_records_before(6).unwrap();
        let moved = s.log_start_moved_deferred(T, 0, 6, 3).forget();
        assert_eq!(moved, 1);
        assert_eq!(spso(&s), Some(6), "2..=5 are gone from the log");
        assert_eq!(
            s.log_start_moved_deferred(T, 0, 6, 3).forget(),
            0,
            "idempotent"
        );
        assert_eq!(
            s.record_info("g", T, 0, 6).unwrap().state,
            RecordState::Acquired,
            "records above the log start are untouched"
        );
    }
}
