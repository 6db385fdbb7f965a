//! Committed offsets of consumer groups.
//!
//! OffsetCommit is checked as Kafka checks a classic group's commit:
//! - a group that does not exist accepts a commit with generation -1 (a
//!   consumer using `assign()`, or the admin client) and comes into being
//!   Empty; with a generation it is refused: GROUP_ID_NOT_FOUND from v9,
//!   ILLEGAL_GENERATION before;
//! - an Empty group accepts generation -1 commits;
//! - otherwise the member must exist (UNKNOWN_MEMBER_ID; FENCED_INSTANCE_ID
//!   for a replaced static member) at the current generation
//!   (ILLEGAL_GENERATION: a fenced generation cannot commit), and not while
//!   the group waits for its assignment (REBALANCE_IN_PROGRESS);
//! - metadata longer than `offset.metadata.max.bytes` fails its partition
//!   with OFFSET_METADATA_TOO_LARGE.
//!
//! TxnOffsetCommit offsets wait, per producer id, until the transaction's
//! marker commits them (then they overwrite the committed ones) or aborts
//! them. OffsetFetch with `require_stable` answers UNSTABLE_OFFSET_COMMIT
//! for a partition with such pending offsets.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::coordinator::{Effects, Group, GroupCoordinator, GroupState, Output};
use super::record::GroupRecord;
use sharestream_protocol::ErrorCode;

/// One committed offset.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommittedOffset {
    /// The next offset to consume.
    pub offset: i64,
    /// CommittedLeaderEpoch (-1 = unknown).
    pub leader_epoch: i32,
    /// CommittedMetadata.
    pub metadata: String,
    /// When it was committed.
    pub commit_timestamp_ms: i64,
}

/// One partition of a commit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionOffset {
    /// Topic name.
    pub topic: String,
    /// Partition index.
    pub partition: i32,
    /// The offset.
    pub offset: CommittedOffset,
}

/// The fields of an OffsetCommit (or TxnOffsetCommit) request that the
/// coordinator checks. Partitions that the broker already refused (unknown
/// topic, authorization) are left out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OffsetCommitRequest {
    /// GroupId.
    pub group_id: String,
    /// GenerationIdOrMemberEpoch (-1 = not a group member).
    pub generation_id: i32,
    /// MemberId ("" = none).
    pub member_id: String,
    /// GroupInstanceId.
    pub group_instance_id: Option<String>,
    /// Request version (GROUP_ID_NOT_FOUND from v9).
    pub api_version: i16,
    /// The offsets.
    pub offsets: Vec<PartitionOffset>,
    /// The ids of the offsets' topics (for the consumer protocol's check
    /// of an older member epoch; a topic missing here is held by no one).
    pub topic_ids: BTreeMap<String, Uuid>,
}

/// Transactional offsets of one producer id, by group.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PendingTxnOffsets {
    /// Producer epoch of the last TxnOffsetCommit.
    pub producer_epoch: i16,
    /// group -> (topic, partition) -> offset.
    pub groups: BTreeMap<String, BTreeMap<(String, i32), CommittedOffset>>,
}

/// Producer ids whose marker floor is remembered (the lowest ids are
/// forgotten first; producer ids only grow).
const MAX_MARKER_FLOORS: usize = 4096;

impl GroupCoordinator {
    /// Kafka's `validateOffsetCommit` for a classic group.
    fn validate_commit(
        group: &Group,
        req: &OffsetCommitRequest,
        transactional: bool,
    ) -> Result<(), ErrorCode> {
        if req.generation_id < 0 && group.state == GroupState::Empty {
            return Ok(());
        }
        if req.generation_id >= 0 || !req.member_id.is_empty() || req.group_instance_id.is_some() {
            if let Some(i) = &req.group_instance_id {
                match group.static_members.get(i) {
                    None => return Err(ErrorCode::UNKNOWN_MEMBER_ID),
                    Some(id) if *id != req.member_id => return Err(ErrorCode::FENCED_INSTANCE_ID),
                    Some(_) => {}
                }
            }
            if !group.members.contains_key(&req.member_id) {
                return Err(ErrorCode::UNKNOWN_MEMBER_ID);
            }
            if req.generation_id != group.generation_id {
                return Err(ErrorCode::ILLEGAL_GENERATION);
            }
        } else if !transactional && group.state != GroupState::Empty {
            return Err(ErrorCode::UNKNOWN_MEMBER_ID);
        }
        if !transactional && group.state == GroupState::CompletingRebalance {
            return Err(ErrorCode::REBALANCE_IN_PROGRESS);
        }
        Ok(())
    }

    fn check_group_for_commit(
        &mut self,
        req: &OffsetCommitRequest,
        transactional: bool,
        now_ms: i64,
    ) -> Result<(), ErrorCode> {
        if req.group_id.is_empty() {
            return Err(ErrorCode::INVALID_GROUP_ID);
        }
        match self.groups.get(&req.group_id) {
            Some(group) => Self::validate_commit(group, req, transactional),
            None if req.generation_id < 0 => {
                self.groups.insert(req.group_id.clone(), Group::new(now_ms));
                Ok(())
            }
            None if transactional => Err(ErrorCode::ILLEGAL_GENERATION),
            None if req.api_version >= 9 => Err(ErrorCode::GROUP_ID_NOT_FOUND),
            None => Err(ErrorCode::ILLEGAL_GENERATION),
        }
    }

    /// The per-partition codes of a commit whose group checks passed:
    /// oversize metadata fails its partition.
    fn partition_codes(&self, req: &OffsetCommitRequest) -> Vec<ErrorCode> {
        req.offsets
            .iter()
            .map(|p| {
                if p.offset.metadata.len() > self.config.offset_metadata_max_bytes {
                    ErrorCode::OFFSET_METADATA_TOO_LARGE
                } else {
                    ErrorCode::NONE
                }
            })
            .collect()
    }

    /// OffsetCommit: a top-level refusal (applied to every partition by the
    /// caller) or one code per partition, in request order. The accepted
    /// offsets are in `records` (persist before answering).
    pub fn commit_offsets(
        &mut self,
        req: &OffsetCommitRequest,
        now_ms: i64,
    ) -> Output<Result<Vec<ErrorCode>, ErrorCode>> {
        let mut fx = Effects::default();
        if let Err(code) = self.check_group_for_commit(req, false, now_ms) {
            return fx.into_output(Err(code));
        }
        let codes = self.partition_codes(req);
        let accepted: Vec<PartitionOffset> = req
            .offsets
            .iter()
            .zip(&codes)
            .filter(|(_, c)| c.is_ok())
            .map(|(p, _)| p.clone())
            .collect();
        if !accepted.is_empty() {
            let record = GroupRecord::Offsets {
                group_id: req.group_id.clone(),
                offsets: accepted,
            };
            self.apply(&record);
            fx.records.push(record);
        }
        fx.into_output(Ok(codes))
    }

    /// TxnOffsetCommit, after the broker checked the producer against the
    /// transaction coordinator: the offsets wait for the marker.
    pub fn commit_txn_offsets(
        &mut self,
        producer_id: i64,
        producer_epoch: i16,
        req: &OffsetCommitRequest,
        now_ms: i64,
    ) -> Output<Result<Vec<ErrorCode>, ErrorCode>> {
        let mut fx = Effects::default();
        if let Err(code) = self.check_group_for_commit(req, true, now_ms) {
            return fx.into_output(Err(code));
        }
        let codes = self.partition_codes(req);
        let accepted: Vec<PartitionOffset> = req
            .offsets
            .iter()
            .zip(&codes)
            .filter(|(_, c)| c.is_ok())
            .map(|(p, _)| p.clone())
            .collect();
        if !accepted.is_empty() {
            let record = GroupRecord::TxnOffsets {
                producer_id,
                producer_epoch,
                group_id: req.group_id.clone(),
                offsets: accepted,
            };
            self.apply(&record);
            fx.records.push(record);
        }
        fx.into_output(Ok(codes))
    }

    /// A transaction marker reached the offsets: commit or drop what
    /// `producer_id` staged. Returns the record to persist, if anything
    /// was pending.
    ///
    /// Under transactions v2 (`bumps_epoch`) every transaction of a
    /// producer id ends with a marker at a strictly higher epoch, so a
    /// marker at or below the highest one applied (the *marker floor*, as
    /// D16 keeps it for share partitions) is a late copy and settles
    /// nothing: applied, it would settle the next transaction's offsets.
    /// Under v1 consecutive transactions share an epoch and there is no
    /// floor. The floor lives in memory: after a restart recovery re-sends
    /// the markers of undecided transactions only.
    pub fn complete_txn(
        &mut self,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        bumps_epoch: bool,
    ) -> Option<GroupRecord> {
        if bumps_epoch {
            match self.marker_floor.get(&producer_id) {
                Some(floor) if producer_epoch <= *floor => return None,
                _ => {
                    if self.marker_floor.len() >= MAX_MARKER_FLOORS
                        && !self.marker_floor.contains_key(&producer_id)
                        && let Some(oldest) = self.marker_floor.keys().next().copied()
                    {
                        self.marker_floor.remove(&oldest);
                    }
                    self.marker_floor.insert(producer_id, producer_epoch);
                }
            }
        }
        if !self.pending_txn.contains_key(&producer_id) {
            return None;
        }
        let record = GroupRecord::TxnMarker {
            producer_id,
            commit,
        };
        self.apply(&record);
        Some(record)
    }

    /// Whether `producer_id` has transactional offsets waiting.
    pub fn has_pending_txn(&self, producer_id: i64) -> bool {
        self.pending_txn.contains_key(&producer_id)
    }

    /// The committed offset of one partition.
    pub fn committed(
        &self,
        group_id: &str,
        topic: &str,
        partition: i32,
    ) -> Option<&CommittedOffset> {
        self.offsets
            .get(group_id)
            .and_then(|o| o.get(&(topic.to_string(), partition)))
    }

    /// Every committed offset of a group (OffsetFetch with all topics).
    pub fn committed_all(&self, group_id: &str) -> Vec<(String, i32, CommittedOffset)> {
        self.offsets
            .get(group_id)
            .map(|o| {
                o.iter()
                    .map(|((t, p), c)| (t.clone(), *p, c.clone()))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Whether a transaction has offsets pending for this partition
    /// (OffsetFetch `require_stable`).
    pub fn has_pending_offset(&self, group_id: &str, topic: &str, partition: i32) -> bool {
        let key = (topic.to_string(), partition);
        self.pending_txn
            .values()
            .any(|p| p.groups.get(group_id).is_some_and(|o| o.contains_key(&key)))
    }

    /// Drops the offsets of a deleted topic; returns the records.
    pub fn on_topic_deleted(&mut self, topic: &str) -> Vec<GroupRecord> {
        let mut records = Vec::new();
        for (group_id, offsets) in &self.offsets {
            let gone: Vec<i32> = offsets
                .keys()
                .filter(|(t, _)| t == topic)
                .map(|(_, p)| *p)
                .collect();
            if !gone.is_empty() {
                records.push(GroupRecord::DeleteOffsets {
                    group_id: group_id.clone(),
                    partitions: gone.into_iter().map(|p| (topic.to_string(), p)).collect(),
                });
            }
        }
        for r in &records {
            self.apply(r);
        }
        records
    }
}

/// What one pass of committed-offset retention removed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OffsetExpiry {
    /// The records to persist (already applied to the state).
    pub records: Vec<GroupRecord>,
    /// (group, topic, partition) of every offset removed.
    pub expired: Vec<(String, String, i32)>,
    /// Groups deleted: Empty, without members and without offsets.
    pub deleted_groups: Vec<String>,
}

impl GroupCoordinator {
    /// Committed-offset retention (`offsets.retention.minutes`), as
    /// Kafka's group coordinator applies it every
    /// `offsets.retention.check.interval.ms`: an offset expires
    /// `retention_ms` after its group became Empty (a group that has had
    /// members: `protocol_type` set), or after its commit for a group that
    /// never had members (standalone commits); the later of the two counts,
    /// so that offsets committed after the group emptied (or whose group's
    /// empty time was lost in a restart) still get their full retention.
    /// `consumer_protocol(group)` tells about the consumer-protocol groups,
    /// which this coordinator does not run: `None` for a group it does not
    /// know, `Some(i64::MAX)` for one with members, `Some(t)` for one
    /// without members since `t`. Groups with members keep their offsets;
    /// an offset with a pending transactional commit stays. A group left
    /// Empty without members and without offsets is deleted, as Kafka does.
    pub fn expire_offsets(
        &mut self,
        now_ms: i64,
        retention_ms: i64,
        consumer_protocol: impl Fn(&str) -> Option<i64>,
    ) -> OffsetExpiry {
        let mut out = OffsetExpiry::default();
        let ids: Vec<String> = self
            .offsets
            .keys()
            .chain(self.groups.keys())
            .cloned()
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        for group_id in ids {
            let modern = consumer_protocol(&group_id);
            if modern == Some(i64::MAX) {
                continue;
            }
            let classic_empty_since = match self.groups.get(&group_id) {
                Some(g)
                    if g.state != GroupState::Empty
                        || !g.members.is_empty()
                        || !g.pending_members.is_empty() =>
                {
                    continue;
                }
                Some(g) if g.protocol_type.is_some() => g.state_since_ms,
                _ => i64::MIN,
            };
            let empty_since = classic_empty_since.max(modern.unwrap_or(i64::MIN));
            let expired: Vec<(String, i32)> = self
                .offsets
                .get(&group_id)
                .into_iter()
                .flatten()
                .filter(|((t, p), o)| {
                    now_ms.saturating_sub(empty_since.max(o.commit_timestamp_ms)) >= retention_ms
                        && !self.has_pending_offset(&group_id, t, *p)
                })
                .map(|(k, _)| k.clone())
                .collect();
            if !expired.is_empty() {
                let record = GroupRecord::DeleteOffsets {
                    group_id: group_id.clone(),
                    partitions: expired.clone(),
                };
                self.apply(&record);
                out.records.push(record);
                out.expired
                    .extend(expired.into_iter().map(|(t, p)| (group_id.clone(), t, p)));
            }
            if self.offsets.get(&group_id).is_none_or(|o| o.is_empty()) {
                let pending_txn = self
                    .pending_txn
                    .values()
                    .any(|p| p.groups.contains_key(&group_id));
                if !pending_txn {
                    let record = GroupRecord::DeleteGroup {
                        group_id: group_id.clone(),
                    };
                    self.apply(&record);
                    out.records.push(record);
                    out.deleted_groups.push(group_id);
                }
            }
        }
        out
    }
}
