//! What `kafka-reassign-partitions.sh` and `kafka-leader-election.sh` ask
//! of this one-node cluster: ListPartitionReassignments (key 46, v0),
//! AlterPartitionReassignments (key 45, v0-1) and ElectLeaders (key 43,
//! v0-2). The answers are Kafka 4.4's on a one-node cluster, error for
//! error and message for message (the interop row `reassign-elect` checks
//! both brokers the same way):
//!
//! - no reassignment is ever in progress: a list is empty, whatever it
//!   names (Kafka leaves out a topic or partition that does not exist);
//! - a reassignment to the replicas a partition has (this node) succeeds
//!   and changes nothing; one naming another broker, or this one twice, or
//!   none, is INVALID_REPLICA_ASSIGNMENT; a cancel is
//!   NO_REASSIGNMENT_IN_PROGRESS; a missing topic or partition is
//!   UNKNOWN_TOPIC_OR_PARTITION;
//! - every partition's leader is its preferred replica, and its only one:
//!   a preferred or unclean election of a partition is
//!   ELECTION_NOT_NEEDED, an election of every partition (no list) has no
//!   result, a missing topic or partition is UNKNOWN_TOPIC_OR_PARTITION.
//!
//! Authorization, as Kafka's controller: Describe on the cluster to list,
//! Alter on the cluster to reassign or elect, else
//! CLUSTER_AUTHORIZATION_FAILED at the top and for every partition.

use kafka_protocol::messages::alter_partition_reassignments_response::{
    ReassignablePartitionResponse, ReassignableTopicResponse,
};
use kafka_protocol::messages::elect_leaders_response::{PartitionResult, ReplicaElectionResult};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

use super::RequestContext;
use crate::acl::{AclOperation, Resource};
use crate::core::BrokerCore;
use sharestream_protocol::ErrorCode;

fn s(v: impl Into<String>) -> StrBytes {
    StrBytes::from_string(v.into())
}

/// The number of partitions of `topic`, if it exists.
fn partitions_of(core: &BrokerCore, topic: &str) -> Option<i32> {
    core.topics().read().get(topic).map(|m| m.partitions)
}

pub(crate) fn list(
    core: &BrokerCore,
    ctx: &RequestContext,
    _req: ListPartitionReassignmentsRequest,
) -> ListPartitionReassignmentsResponse {
    let resp = ListPartitionReassignmentsResponse::default();
    if !ctx.allowed(core, AclOperation::Describe, &Resource::cluster()) {
        return resp.with_error_code(ErrorCode::CLUSTER_AUTHORIZATION_FAILED.0);
    }
    // Nothing is ever being reassigned on one node.
    resp
}

/// Why a reassignment of a partition of `topic` to `replicas` (`None`: a
/// cancel) fails, as Kafka's controller words it; `None` when it succeeds.
fn reassignment_error(
    node_id: i32,
    partitions: Option<i32>,
    topic: &str,
    partition: i32,
    replicas: Option<&[BrokerId]>,
) -> Option<(ErrorCode, Option<String>)> {
    let Some(count) = partitions else {
        return Some((
            ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
            Some(format!("Unable to find a topic named {topic}.")),
        ));
    };
    if !(0..count).contains(&partition) {
        return Some((
            ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
            Some(format!("Unable to find partition {topic}:{partition}.")),
        ));
    }
    let Some(replicas) = replicas else {
        return Some((ErrorCode::NO_REASSIGNMENT_IN_PROGRESS, None));
    };
    if replicas.is_empty() {
        return Some((
            ErrorCode::INVALID_REPLICA_ASSIGNMENT,
            Some("The manual partition assignment includes an empty replica list.".into()),
        ));
    }
    let mut sorted: Vec<i32> = replicas.iter().map(|b| b.0).collect();
    sorted.sort_unstable();
    let mut previous = None;
    for b in sorted {
        if b != node_id {
            return Some((
                ErrorCode::INVALID_REPLICA_ASSIGNMENT,
                Some(format!(
                    "The manual partition assignment includes broker {b}, but no such broker is registered."
                )),
            ));
        }
        if previous == Some(b) {
            return Some((
                ErrorCode::INVALID_REPLICA_ASSIGNMENT,
                Some(format!(
                    "The manual partition assignment includes the broker {b} more than once."
                )),
            ));
        }
        previous = Some(b);
    }
    // The replicas it has: nothing to move.
    None
}

pub(crate) fn alter(
    core: &BrokerCore,
    ctx: &RequestContext,
    req: AlterPartitionReassignmentsRequest,
) -> AlterPartitionReassignmentsResponse {
    let allowed = ctx.allowed(core, AclOperation::Alter, &Resource::cluster());
    let mut resp = AlterPartitionReassignmentsResponse::default();
    if ctx.version() >= 1 {
        resp = resp.with_allow_replication_factor_change(req.allow_replication_factor_change);
    }
    if !allowed {
        resp = resp.with_error_code(ErrorCode::CLUSTER_AUTHORIZATION_FAILED.0);
    }
    let node_id = core.node_id();
    let responses = req
        .topics
        .into_iter()
        .map(|t| {
            let topic = t.name.0.to_string();
            let partitions = partitions_of(core, &topic);
            let results = t
                .partitions
                .into_iter()
                .map(|p| {
                    let error = if allowed {
                        reassignment_error(
                            node_id,
                            partitions,
                            &topic,
                            p.partition_index,
                            p.replicas.as_deref(),
                        )
                    } else {
                        Some((ErrorCode::CLUSTER_AUTHORIZATION_FAILED, None))
                    };
                    let (code, message) = error.unwrap_or((ErrorCode(0), None));
                    ReassignablePartitionResponse::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(code.0)
                        .with_error_message(message.map(s))
                })
                .collect();
            ReassignableTopicResponse::default()
                .with_name(t.name)
                .with_partitions(results)
        })
        .collect();
    resp.with_responses(responses)
}

pub(crate) fn elect(
    core: &BrokerCore,
    ctx: &RequestContext,
    req: ElectLeadersRequest,
) -> ElectLeadersResponse {
    let allowed = ctx.allowed(core, AclOperation::Alter, &Resource::cluster());
    let top = if !allowed {
        ErrorCode::CLUSTER_AUTHORIZATION_FAILED
    } else if ctx.version() >= 1 && !(0..=1).contains(&req.election_type) {
        ErrorCode::INVALID_REQUEST
    } else {
        ErrorCode(0)
    };
    let mut resp = ElectLeadersResponse::default();
    if ctx.version() >= 1 {
        resp = resp.with_error_code(top.0);
    }
    // No list: every partition, none of which needs an election, so no
    // result (as Kafka answers).
    let Some(asked) = req.topic_partitions else {
        return resp;
    };
    let results = asked
        .into_iter()
        .map(|t| {
            let topic = t.topic.0.to_string();
            let partitions = partitions_of(core, &topic);
            let results = t
                .partitions
                .into_iter()
                .map(|p| {
                    let (code, message) = if top != ErrorCode(0) {
                        (top, None)
                    } else {
                        match partitions {
                            None => (
                                ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
                                Some(format!("No such topic as {topic}")),
                            ),
                            Some(n) if !(0..n).contains(&p) => (
                                ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
                                Some(format!("No such partition as {topic}-{p}")),
                            ),
                            Some(_) => (ErrorCode::ELECTION_NOT_NEEDED, None),
                        }
                    };
                    PartitionResult::default()
                        .with_partition_id(p)
                        .with_error_code(code.0)
                        .with_error_message(message.map(s))
                })
                .collect();
            ReplicaElectionResult::default()
                .with_topic(t.topic)
                .with_partition_result(results)
        })
        .collect();
    resp.with_replica_election_results(results)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(v: &[i32]) -> Vec<BrokerId> {
        v.iter().map(|&b| BrokerId(b)).collect()
    }

    #[test]
    fn reassignments_are_judged_as_kafkas_controller_judges_them_on_one_node() {
        let judge = |partitions, partition, replicas: Option<&[i32]>| {
            let r = replicas.map(ids);
            reassignment_error(1, partitions, "t", partition, r.as_deref())
                .map(|(c, m)| (c, m.unwrap_or_default()))
        };
        assert_eq!(judge(Some(2), 0, Some(&[1])), None);
        assert_eq!(
            judge(Some(2), 0, Some(&[1001])),
            Some((
                ErrorCode::INVALID_REPLICA_ASSIGNMENT,
                "The manual partition assignment includes broker 1001, but no such broker is registered."
                    .into()
            ))
        );
        assert_eq!(
            judge(Some(2), 0, Some(&[1, 1])),
            Some((
                ErrorCode::INVALID_REPLICA_ASSIGNMENT,
                "The manual partition assignment includes the broker 1 more than once.".into()
            ))
        );
        assert_eq!(
            judge(Some(2), 0, Some(&[])).unwrap().0,
            ErrorCode::INVALID_REPLICA_ASSIGNMENT
        );
        assert_eq!(
            judge(Some(2), 1, None),
            Some((ErrorCode::NO_REASSIGNMENT_IN_PROGRESS, String::new()))
        );
        assert_eq!(
            judge(None, 0, Some(&[1])),
            Some((
                ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
                "Unable to find a topic named t.".into()
            ))
        );
        assert_eq!(
            judge(Some(2), 2, Some(&[1])).unwrap().0,
            ErrorCode::UNKNOWN_TOPIC_OR_PARTITION
        );
    }
}
