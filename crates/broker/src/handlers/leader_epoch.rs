//! OffsetForLeaderEpoch (key 23, v2-4): where a leader epoch ends in a
//! partition's log. Consumers ask it to check, after they seek to a
//! position that carries an epoch (a committed offset, a `seek` with
//! `OffsetAndMetadata`), or after a leader change, that their position
//! is still in the log (KIP-320's truncation check). Kafka's Java
//! consumer, librdkafka and franz-go all do; without this API they skip
//! the check.
//!
//! This broker is the only replica and leader of every partition, in
//! epoch 0 for its whole life: Metadata, Fetch, ListOffsets and every
//! stored batch say 0. So its epoch history is one entry, epoch 0 from
//! the log's start. The answers follow Kafka's epoch cache over that
//! history:
//! - epoch 0, the current one: (0, the log end offset);
//! - -1 (undefined), or an epoch above 0, which this log never had:
//!   (-1, -1), the schema's "unknown";
//! - any other epoch below 0: (that epoch, the log start offset), as
//!   Kafka answers an epoch older than any it holds.
//!
//! A request's `current_leader_epoch` (-1: no check) is checked first:
//! below 0 is FENCED_LEADER_EPOCH (the client's leader is older), above 0
//! UNKNOWN_LEADER_EPOCH (the client knows a newer one). A topic or
//! partition that does not exist is UNKNOWN_TOPIC_OR_PARTITION.
//!
//! Authorization, as Kafka: ClusterAction on the cluster (followers)
//! allows every topic; otherwise Describe on each topic, else
//! TOPIC_AUTHORIZATION_FAILED for each of its partitions.
//!
//! Versions 0 and 1 are not served: Kafka 4.0 removed them (KIP-896).

use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::*;

use super::RequestContext;
use super::data::lookup_topic;
use crate::acl::{AclOperation, Resource};
use crate::core::BrokerCore;
use sharestream_protocol::ErrorCode;

/// The leader epoch of every partition of this broker.
const EPOCH: i32 = 0;

/// Kafka's "no epoch" and "no offset".
const UNDEFINED_EPOCH: i32 = -1;
const UNDEFINED_OFFSET: i64 = -1;

/// Where `requested` ends in a log whose one epoch (0) spans
/// `log_start..log_end`: (epoch, end offset).
pub(crate) fn end_of_epoch(requested: i32, log_start: i64, log_end: i64) -> (i32, i64) {
    match requested {
        UNDEFINED_EPOCH => (UNDEFINED_EPOCH, UNDEFINED_OFFSET),
        EPOCH => (EPOCH, log_end),
        // Older than the oldest epoch held: the start of the first one.
        e if e < EPOCH => (e, log_start),
        // Newer than any epoch this log had.
        _ => (UNDEFINED_EPOCH, UNDEFINED_OFFSET),
    }
}

/// The error for a request's `current_leader_epoch` (OffsetForLeaderEpoch,
/// Fetch v9+, ListOffsets v4+), if any.
pub(super) fn current_epoch_error(current: i32) -> Option<ErrorCode> {
    match current {
        -1 => None,
        e if e < EPOCH => Some(ErrorCode::FENCED_LEADER_EPOCH),
        e if e > EPOCH => Some(ErrorCode::UNKNOWN_LEADER_EPOCH),
        _ => None,
    }
}

pub(crate) fn offsets_for_leader_epoch(
    core: &BrokerCore,
    ctx: &RequestContext,
    req: OffsetForLeaderEpochRequest,
) -> OffsetForLeaderEpochResponse {
    let cluster_action = ctx.allowed(core, AclOperation::ClusterAction, &Resource::cluster());
    let topics = req
        .topics
        .into_iter()
        .map(|t| {
            let name = t.topic.0.as_str();
            let allowed =
                cluster_action || ctx.allowed(core, AclOperation::Describe, &Resource::topic(name));
            let meta = if allowed {
                lookup_topic(core, name, uuid::Uuid::nil())
            } else {
                None
            };
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let base = EpochEndOffset::default()
                        .with_partition(p.partition)
                        .with_leader_epoch(UNDEFINED_EPOCH)
                        .with_end_offset(UNDEFINED_OFFSET);
                    if !allowed {
                        return base.with_error_code(ErrorCode::TOPIC_AUTHORIZATION_FAILED.0);
                    }
                    let Some(log) = meta
                        .as_ref()
                        .and_then(|m| core.partition(m.id, p.partition))
                    else {
                        return base.with_error_code(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.0);
                    };
                    if let Some(e) = current_epoch_error(p.current_leader_epoch) {
                        return base.with_error_code(e.0);
                    }
                    let (start, end) = {
                        let log = log.lock();
                        (log.log_start_offset(), log.log_end_offset())
                    };
                    let (epoch, offset) = end_of_epoch(p.leader_epoch, start, end);
                    base.with_leader_epoch(epoch).with_end_offset(offset)
                })
                .collect();
            OffsetForLeaderTopicResult::default()
                .with_topic(t.topic)
                .with_partitions(partitions)
        })
        .collect();
    OffsetForLeaderEpochResponse::default().with_topics(topics)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_one_epoch_ends_at_the_log_end_and_others_are_unknown_or_older() {
        assert_eq!(end_of_epoch(0, 5, 42), (0, 42));
        assert_eq!(end_of_epoch(-1, 5, 42), (-1, -1));
        assert_eq!(end_of_epoch(1, 5, 42), (-1, -1));
        assert_eq!(end_of_epoch(i32::MAX, 5, 42), (-1, -1));
        assert_eq!(end_of_epoch(-3, 5, 42), (-3, 5));
    }

    #[test]
    fn the_current_epoch_is_checked_against_zero() {
        assert_eq!(current_epoch_error(-1), None);
        assert_eq!(current_epoch_error(0), None);
        assert_eq!(
            current_epoch_error(-2),
            Some(ErrorCode::FENCED_LEADER_EPOCH)
        );
        assert_eq!(
            current_epoch_error(3),
            Some(ErrorCode::UNKNOWN_LEADER_EPOCH)
        );
    }
}
