//! The consumer group protocol of KIP-848: ConsumerGroupHeartbeat (key 68,
//! v0-1) and ConsumerGroupDescribe (key 69, v0-1). The state machine is
//! [`ConsumerProtocolGroups`](crate::consumer_group::consumer_protocol).
//!
//! Authorization as Kafka's KafkaApis: Read on the group for the
//! heartbeat (GROUP_AUTHORIZATION_FAILED), Describe on every subscribed
//! topic name (TOPIC_AUTHORIZATION_FAILED), and a regular expression
//! resolves only to the topics the principal may Describe; Describe on
//! each group for describe (GROUP_AUTHORIZATION_FAILED for that group),
//! and Describe on every topic its assignments name
//! (TOPIC_AUTHORIZATION_FAILED for that group, as KAFKA-18813).

use std::collections::BTreeSet;

use kafka_protocol::messages::consumer_group_describe_response as describe;
use kafka_protocol::messages::consumer_group_heartbeat_response as heartbeat;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

use super::RequestContext;
use crate::acl::{AUTHORIZED_OPERATIONS_OMITTED, AclOperation, Resource};
use crate::consumer_group::consumer_protocol::{Assignment, ConsumerHeartbeat, GroupTiming};
use crate::consumer_groups::topics_of;
use crate::core::BrokerCore;
use sharestream_protocol::ErrorCode;

fn s(v: impl Into<String>) -> StrBytes {
    StrBytes::from_string(v.into())
}

pub(crate) fn consumer_group_heartbeat(
    core: &BrokerCore,
    ctx: &RequestContext,
    req: ConsumerGroupHeartbeatRequest,
) -> ConsumerGroupHeartbeatResponse {
    let refuse = |code: ErrorCode, msg: &str| {
        ConsumerGroupHeartbeatResponse::default()
            .with_error_code(code.0)
            .with_error_message(Some(s(msg)))
    };
    if !ctx.allowed(
        core,
        AclOperation::Read,
        &Resource::group(req.group_id.0.as_str()),
    ) {
        return refuse(
            ErrorCode::GROUP_AUTHORIZATION_FAILED,
            "Not authorized to read the group.",
        );
    }
    if let Some(names) = &req.subscribed_topic_names
        && names
            .iter()
            .any(|t| !ctx.allowed(core, AclOperation::Describe, &Resource::topic(t.0.as_str())))
    {
        return refuse(
            ErrorCode::TOPIC_AUTHORIZATION_FAILED,
            "Not authorized to describe a subscribed topic.",
        );
    }
    let topics = topics_of(&core.topics().read());
    // A regular expression resolves only to topics the principal may
    // Describe (Kafka, KAFKA-18813).
    let describable: BTreeSet<String> = topics
        .keys()
        .filter(|t| ctx.allowed(core, AclOperation::Describe, &Resource::topic(t.as_str())))
        .cloned()
        .collect();
    let hb = ConsumerHeartbeat {
        group_id: req.group_id.0.to_string(),
        member_id: req.member_id.to_string(),
        member_epoch: req.member_epoch,
        instance_id: req.instance_id.map(|x| x.to_string()),
        rack_id: req.rack_id.map(|x| x.to_string()),
        rebalance_timeout_ms: req.rebalance_timeout_ms,
        subscribed_topic_names: req
            .subscribed_topic_names
            .map(|v| v.into_iter().map(|t| t.0.to_string()).collect()),
        subscribed_topic_regex: req.subscribed_topic_regex.map(|x| x.to_string()),
        server_assignor: req.server_assignor.map(|x| x.to_string()),
        owned: req.topic_partitions.map(|v| {
            v.into_iter()
                .filter(|t| !t.partitions.is_empty())
                .map(|t| (t.topic_id, t.partitions.into_iter().collect()))
                .collect()
        }),
        describable: (describable.len() < topics.len()).then_some(describable),
        client_id: ctx.header.client_id.clone().unwrap_or_default(),
        client_host: format!("/{}", ctx.host),
        group_timing: Some(group_timing(core, req.group_id.0.as_str())),
    };
    match core
        .consumer_groups()
        .consumer_heartbeat(&hb, &topics, core.now_ms())
    {
        Err(e) => refuse(e.code, &e.message),
        Ok(o) => ConsumerGroupHeartbeatResponse::default()
            .with_member_id(Some(s(o.member_id)))
            .with_member_epoch(o.member_epoch)
            .with_heartbeat_interval_ms(o.heartbeat_interval_ms)
            .with_assignment(
                o.assignment
                    .map(|a| super::heartbeat_assignment!(heartbeat, a)),
            ),
    }
}

/// The group's `consumer.session.timeout.ms` and
/// `consumer.heartbeat.interval.ms` (its own or the broker's defaults),
/// read at every heartbeat as Kafka does.
fn group_timing(core: &BrokerCore, group_id: &str) -> GroupTiming {
    let c = core.shares().group_config(group_id);
    GroupTiming {
        session_timeout_ms: c.consumer_session_timeout_ms,
        heartbeat_interval_ms: c.consumer_heartbeat_interval_ms,
    }
}

fn described_assignment(core: &BrokerCore, a: &Assignment) -> describe::Assignment {
    let reg = core.topics().read();
    describe::Assignment::default().with_topic_partitions(
        a.iter()
            .map(|(id, ps)| {
                describe::TopicPartitions::default()
                    .with_topic_id(*id)
                    .with_topic_name(TopicName(s(reg
                        .get_by_id(id)
                        .map_or_else(String::new, |m| m.name.clone()))))
                    .with_partitions(ps.iter().copied().collect())
            })
            .collect(),
    )
}

pub(crate) fn consumer_group_describe(
    core: &BrokerCore,
    ctx: &RequestContext,
    req: ConsumerGroupDescribeRequest,
) -> ConsumerGroupDescribeResponse {
    let groups = req
        .group_ids
        .into_iter()
        .map(|id| {
            let group_id = id.0.to_string();
            let resource = Resource::group(&group_id);
            let base = describe::DescribedGroup::default()
                .with_group_id(id)
                .with_authorized_operations(AUTHORIZED_OPERATIONS_OMITTED);
            if !ctx.allowed(core, AclOperation::Describe, &resource) {
                return base.with_error_code(ErrorCode::GROUP_AUTHORIZATION_FAILED.0);
            }
            let Some(d) = core.consumer_groups().consumer_describe(&group_id) else {
                return base
                    .with_error_code(ErrorCode::GROUP_ID_NOT_FOUND.0)
                    .with_error_message(Some(s(format!(
                        "Group {group_id} is not a consumer group."
                    ))))
                    .with_group_state(s("Dead"));
            };
            // Kafka (KAFKA-18813): a group whose assignments name a topic
            // the caller may not Describe is not shown.
            let hidden = {
                let reg = core.topics().read();
                d.members
                    .iter()
                    .flat_map(|m| m.assignment.keys().chain(m.target_assignment.keys()))
                    .filter_map(|id| reg.get_by_id(id).map(|t| t.name.clone()))
                    .any(|t| !ctx.allowed(core, AclOperation::Describe, &Resource::topic(t)))
            };
            if hidden {
                return base
                    .with_error_code(ErrorCode::TOPIC_AUTHORIZATION_FAILED.0)
                    .with_error_message(Some(s(
                        "The group's assignments name topics the client may not describe.",
                    )));
            }
            let members = d
                .members
                .iter()
                .map(|m| {
                    describe::Member::default()
                        .with_member_id(s(m.member_id.clone()))
                        .with_instance_id(m.instance_id.clone().map(s))
                        .with_rack_id(m.rack_id.clone().map(s))
                        .with_member_epoch(m.member_epoch)
                        .with_client_id(s(m.client_id.clone()))
                        .with_client_host(s(m.client_host.clone()))
                        .with_subscribed_topic_names(
                            m.subscribed_topic_names
                                .iter()
                                .map(|t| TopicName(s(t.clone())))
                                .collect(),
                        )
                        .with_subscribed_topic_regex(m.subscribed_topic_regex.clone().map(s))
                        .with_assignment(described_assignment(core, &m.assignment))
                        .with_target_assignment(described_assignment(core, &m.target_assignment))
                        // 1: a member of the consumer protocol (v1's MemberType).
                        .with_member_type(1)
                })
                .collect();
            let ops = if req.include_authorized_operations {
                ctx.authorized_operations(core, &resource)
            } else {
                AUTHORIZED_OPERATIONS_OMITTED
            };
            base.with_group_state(s(d.state.as_str()))
                .with_group_epoch(d.group_epoch)
                .with_assignment_epoch(d.assignment_epoch)
                .with_assignor_name(s(d.assignor_name))
                .with_members(members)
                .with_authorized_operations(ops)
        })
        .collect();
    ConsumerGroupDescribeResponse::default().with_groups(groups)
}
