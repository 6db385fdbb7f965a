//! The consumer protocol (KIP-848) on [`GroupService`]: heartbeats,
//! describe, timers, and the member-epoch check of offset commits into
//! such groups. The state machine is
//! [`ConsumerProtocolGroups`](crate::consumer_group::consumer_protocol);
//! its state is journaled in the classic coordinator's log whenever it
//! changes (D29a), and its committed offsets are the classic
//! coordinator's, in the same durable log.
//!
//! Lock order: the consumer-protocol groups, then the classic coordinator
//! (an offset commit checks the member epoch and commits under both, so a
//! heartbeat cannot fence the member in between).

use super::GroupService;
use crate::consumer_group::OffsetCommitRequest;
use crate::consumer_group::consumer_protocol::{
    ConsumerHeartbeat, ConsumerHeartbeatOk, ConsumerProtocolGroups, DescribedConsumerGroup,
    HeartbeatError, MemberCommit, Topics,
};
use crate::consumer_group::streams_protocol::{StreamsGroups, StreamsMemberCheck};
use crate::topics::TopicRegistry;
use sharestream_protocol::ErrorCode;
use uuid::Uuid;

/// The topics a subscription may name or match: every topic, internal
/// ones included. Kafka 4.4 assigns `__consumer_offsets` to a member whose
/// regex matches it (franz-go's `Test848RegexBrokerResolves` asserts it);
/// keeping internal topics out of a `.*` is the client's choice.
pub fn topics_of(registry: &TopicRegistry) -> Topics {
    registry
        .iter()
        .map(|t| (t.name.clone(), (t.id, t.partitions)))
        .collect()
}

/// How an offset commit into a group is checked.
pub(super) enum CommitCheck {
    /// Not a consumer-protocol group: the classic rules.
    Classic,
    /// A consumer-protocol group whose member check passed: commit with
    /// the classic coordinator's group checks bypassed.
    Passed,
}

impl GroupService {
    /// ConsumerGroupHeartbeat. A group id used by a classic group with
    /// members is GROUP_ID_NOT_FOUND (no online migration here, D29d); an
    /// empty classic group is taken over, its offsets kept.
    pub fn consumer_heartbeat(
        &self,
        req: &ConsumerHeartbeat,
        topics: &Topics,
        now_ms: i64,
    ) -> Result<ConsumerHeartbeatOk, HeartbeatError> {
        if self.is_streams_group(&req.group_id) {
            return Err(HeartbeatError {
                code: ErrorCode::GROUP_ID_NOT_FOUND,
                message: format!("Group {} is not a consumer group.", req.group_id),
            });
        }
        let mut modern = self.modern.lock();
        if !modern.contains(&req.group_id) {
            let classic_members = self.with_coordinator(|c| c.member_ids(&req.group_id).len());
            if classic_members > 0 {
                return Err(HeartbeatError {
                    code: ErrorCode::GROUP_ID_NOT_FOUND,
                    message: format!("Group {} is not a consumer group.", req.group_id),
                });
            }
        }
        let result = modern.heartbeat(req, topics, now_ms);
        if let Err(code) = self.persist_consumer_group(&mut modern, &req.group_id, now_ms) {
            return Err(HeartbeatError {
                code,
                message: "The group's state could not be persisted.".into(),
            });
        }
        result
    }

    /// ConsumerGroupDescribe of one group.
    pub fn consumer_describe(&self, group_id: &str) -> Option<DescribedConsumerGroup> {
        self.modern.lock().describe(group_id)
    }

    /// Read access to the consumer-protocol groups.
    pub fn with_consumer_groups<T>(&self, f: impl FnOnce(&ConsumerProtocolGroups) -> T) -> T {
        f(&self.modern.lock())
    }

    /// Session and revocation timeouts of consumer-protocol members (run
    /// by [`GroupService::tick`]).
    pub(super) fn consumer_tick(&self, now_ms: i64) -> Vec<(String, String)> {
        let mut modern = self.modern.lock();
        if modern.next_deadline_ms().is_none_or(|d| d > now_ms) {
            return Vec::new();
        }
        let removed = modern.tick(now_ms);
        let groups: std::collections::BTreeSet<&String> = removed.iter().map(|(g, _)| g).collect();
        for g in groups {
            let _ = self.persist_consumer_group(&mut modern, g, now_ms);
        }
        removed
    }

    /// Before a classic JoinGroup: an empty consumer-protocol group of that
    /// id is removed (journaled), so that the classic protocol takes the
    /// group over with its offsets, as Kafka converts an empty consumer
    /// group whatever `group.consumer.migration.policy` says. A group with
    /// members is INCONSISTENT_GROUP_PROTOCOL: classic members inside a
    /// consumer-protocol group are not served here (docs/DESIGN.md D29d).
    pub(super) fn downgrade_empty_consumer_group(
        &self,
        group_id: &str,
        now_ms: i64,
    ) -> Result<(), ErrorCode> {
        let mut modern = self.modern.lock();
        if !modern.contains(group_id) {
            return Ok(());
        }
        match modern.delete_group(group_id) {
            Ok(()) => self.persist_consumer_group(&mut modern, group_id, now_ms),
            Err(_) => Err(ErrorCode::INCONSISTENT_GROUP_PROTOCOL),
        }
    }

    /// Whether a consumer-protocol timer is due.
    pub(super) fn consumer_is_due(&self, now_ms: i64) -> bool {
        self.modern
            .lock()
            .next_deadline_ms()
            .is_some_and(|d| d <= now_ms)
    }

    /// DeleteGroups of a consumer-protocol group (None: not one).
    pub(super) fn delete_consumer_group(&self, group_id: &str, now_ms: i64) -> Option<ErrorCode> {
        let mut modern = self.modern.lock();
        if !modern.contains(group_id) {
            return None;
        }
        if let Err(code) = modern.delete_group(group_id) {
            return Some(code);
        }
        Some(
            self.persist_consumer_group(&mut modern, group_id, now_ms)
                .err()
                .unwrap_or(ErrorCode::NONE),
        )
    }

    /// The member-epoch check of a commit (see [`CommitCheck`]), under the
    /// consumer-protocol lock held by the caller.
    pub(super) fn check_consumer_commit(
        modern: &ConsumerProtocolGroups,
        req: &OffsetCommitRequest,
        transactional: bool,
    ) -> Result<CommitCheck, ErrorCode> {
        if !modern.contains(&req.group_id) {
            return Ok(CommitCheck::Classic);
        }
        // A topic without a known id is held by no member: an older epoch
        // then fails, as for a partition the member does not hold.
        let partitions: Vec<(Uuid, i32)> = req
            .offsets
            .iter()
            .map(|o| {
                let id = req.topic_ids.get(&o.topic).copied().unwrap_or(Uuid::nil());
                (id, o.partition)
            })
            .collect();
        modern.validate_commit(
            &req.group_id,
            &MemberCommit {
                member_id: &req.member_id,
                member_epoch: req.generation_id,
                instance_id: req.group_instance_id.as_deref(),
                transactional,
                api_version: req.api_version,
                partitions: &partitions,
            },
        )?;
        Ok(CommitCheck::Passed)
    }
}

impl GroupService {
    /// The member check of a commit into a streams or consumer-protocol
    /// group, under both locks held by the caller; the request the classic
    /// coordinator then commits.
    pub(super) fn check_commit(
        streams: &StreamsGroups,
        modern: &ConsumerProtocolGroups,
        req: &OffsetCommitRequest,
        transactional: bool,
    ) -> Result<OffsetCommitRequest, ErrorCode> {
        if streams.contains(&req.group_id) {
            streams.validate_commit(
                &req.group_id,
                &StreamsMemberCheck {
                    member_id: &req.member_id,
                    member_epoch: req.generation_id,
                },
            )?;
            return Ok(as_unchecked(req));
        }
        Ok(
            match Self::check_consumer_commit(modern, req, transactional)? {
                CommitCheck::Classic => req.clone(),
                CommitCheck::Passed => as_unchecked(req),
            },
        )
    }
}

/// The request the classic coordinator sees once the consumer-protocol
/// check passed: no member, no generation (its own group checks then
/// accept it, as an admin commit).
pub(super) fn as_unchecked(req: &OffsetCommitRequest) -> OffsetCommitRequest {
    OffsetCommitRequest {
        generation_id: -1,
        member_id: String::new(),
        group_instance_id: None,
        ..req.clone()
    }
}
