//! ListGroups (classic and share groups, with the v4 state and v5 type
//! filters), DescribeGroups, DeleteGroups (classic and share groups; a
//! share group must be empty, its share state goes with it) and
//! OffsetDelete (classic groups).
//!
//! Authorization as Kafka's KafkaApis: ListGroups lists every group with
//! Describe on the cluster, else only the groups the principal may
//! Describe; DescribeGroups answers GROUP_AUTHORIZATION_FAILED for a group
//! it may not Describe, DeleteGroups for a group it may not Delete;
//! OffsetDelete needs Delete on the group (top-level) and Read on each
//! topic (per partition).

use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

use super::RequestContext;
use crate::acl::{AUTHORIZED_OPERATIONS_OMITTED, AclOperation, Resource};
use crate::core::BrokerCore;
use sharestream_protocol::ErrorCode;

fn s(v: impl Into<String>) -> StrBytes {
    StrBytes::from_string(v.into())
}

pub(crate) fn list_groups(
    core: &BrokerCore,
    ctx: &RequestContext,
    req: ListGroupsRequest,
) -> ListGroupsResponse {
    let version = ctx.version();
    let all = ctx.allowed(core, AclOperation::Describe, &Resource::cluster());
    // (id, protocol type, state, type)
    let consumer = core
        .consumer_groups()
        .with_consumer_groups(|c| c.list_groups());
    let streams = core
        .consumer_groups()
        .with_streams_groups(|c| c.list_groups());
    let mut groups: Vec<(String, String, String, &'static str)> = core
        .consumer_groups()
        .with_coordinator(|c| c.list_groups())
        .into_iter()
        // A consumer-protocol or streams group's offsets are kept by the
        // classic coordinator: list the group once, as what it is.
        .filter(|(id, ..)| {
            !consumer.iter().any(|(c, _)| c == id) && !streams.iter().any(|(c, _)| c == id)
        })
        .map(|(id, state, protocol_type)| {
            (id, protocol_type, state.as_str().to_string(), "classic")
        })
        .collect();
    groups.extend(consumer.into_iter().map(|(id, state)| {
        (
            id,
            "consumer".to_string(),
            state.as_str().to_string(),
            "consumer",
        )
    }));
    groups.extend(streams.into_iter().map(|(id, state)| {
        (
            id,
            "streams".to_string(),
            state.as_str().to_string(),
            "streams",
        )
    }));
    groups.extend(
        core.shares()
            .list_groups()
            .into_iter()
            .map(|(id, state)| (id, "share".to_string(), state.as_str().to_string(), "share")),
    );
    let states: Vec<String> = if version >= 4 {
        req.states_filter.iter().map(|x| x.to_lowercase()).collect()
    } else {
        Vec::new()
    };
    let types: Vec<String> = if version >= 5 {
        req.types_filter.iter().map(|x| x.to_lowercase()).collect()
    } else {
        Vec::new()
    };
    let listed = groups
        .into_iter()
        .filter(|(id, ..)| all || ctx.allowed(core, AclOperation::Describe, &Resource::group(id)))
        .filter(|(_, _, state, _)| states.is_empty() || states.contains(&state.to_lowercase()))
        .filter(|(.., ty)| types.is_empty() || types.iter().any(|t| t == ty))
        .map(|(id, protocol_type, state, ty)| {
            let mut g = ListedGroup::default()
                .with_group_id(GroupId(s(id)))
                .with_protocol_type(s(protocol_type));
            if version >= 4 {
                g.group_state = s(state);
            }
            if version >= 5 {
                g.group_type = s(ty);
            }
            g
        })
        .collect();
    ListGroupsResponse::default().with_groups(listed)
}

pub(crate) fn describe_groups(
    core: &BrokerCore,
    ctx: &RequestContext,
    req: DescribeGroupsRequest,
) -> DescribeGroupsResponse {
    let version = ctx.version();
    let groups = req
        .groups
        .iter()
        .map(|id| {
            let group_id = id.0.to_string();
            let resource = Resource::group(&group_id);
            if !ctx.allowed(core, AclOperation::Describe, &resource) {
                return DescribedGroup::default()
                    .with_group_id(id.clone())
                    .with_error_code(ErrorCode::GROUP_AUTHORIZATION_FAILED.0)
                    .with_authorized_operations(AUTHORIZED_OPERATIONS_OMITTED);
            }
            if core.consumer_groups().is_streams_group(&group_id) {
                // Kafka describes a streams group only through
                // StreamsGroupDescribe.
                return DescribedGroup::default()
                    .with_group_id(id.clone())
                    .with_group_state(s("Dead"))
                    .with_error_code(ErrorCode::GROUP_ID_NOT_FOUND.0)
                    .with_error_message(Some(s(format!(
                        "Group {group_id} is not a classic group."
                    ))))
                    .with_authorized_operations(AUTHORIZED_OPERATIONS_OMITTED);
            }
            let d = match core.consumer_groups().consumer_describe(&group_id) {
                Some(d) => as_described_group(d),
                None => core
                    .consumer_groups()
                    .with_coordinator(|c| c.describe(&group_id)),
            };
            if version >= 6 && d.state == "Dead" {
                // v6 (KIP-1043): a group that does not exist is an error.
                return DescribedGroup::default()
                    .with_group_id(id.clone())
                    .with_group_state(s("Dead"))
                    .with_error_code(ErrorCode::GROUP_ID_NOT_FOUND.0)
                    .with_error_message(Some(s(format!("Group {group_id} not found."))))
                    .with_authorized_operations(AUTHORIZED_OPERATIONS_OMITTED);
            }
            let mut g = DescribedGroup::default()
                .with_group_id(id.clone())
                .with_group_state(s(d.state))
                .with_protocol_type(s(d.protocol_type))
                .with_protocol_data(s(d.protocol))
                .with_members(
                    d.members
                        .into_iter()
                        .map(|m| {
                            let mut dm = DescribedGroupMember::default()
                                .with_member_id(s(m.member_id))
                                .with_client_id(s(m.client_id))
                                .with_client_host(s(m.client_host))
                                .with_member_metadata(m.metadata)
                                .with_member_assignment(m.assignment);
                            if version >= 4 {
                                dm.group_instance_id = m.group_instance_id.map(s);
                            }
                            dm
                        })
                        .collect(),
                );
            if version >= 3 {
                g.authorized_operations = if req.include_authorized_operations {
                    ctx.authorized_operations(core, &resource)
                } else {
                    AUTHORIZED_OPERATIONS_OMITTED
                };
            }
            g
        })
        .collect();
    DescribeGroupsResponse::default().with_groups(groups)
}

/// DescribeGroups of a consumer-protocol (KIP-848) group: its state, the
/// protocol type `consumer`, its assignor and its members. Their metadata
/// and assignment bytes are left empty (Kafka fills them in the classic
/// consumer protocol's encoding; ConsumerGroupDescribe carries the
/// assignment).
fn as_described_group(
    d: crate::consumer_group::consumer_protocol::DescribedConsumerGroup,
) -> crate::consumer_group::DescribedGroup {
    crate::consumer_group::DescribedGroup {
        state: d.state.as_str(),
        protocol_type: "consumer".to_string(),
        protocol: d.assignor_name,
        members: d
            .members
            .into_iter()
            .map(|m| crate::consumer_group::DescribedMember {
                member_id: m.member_id,
                group_instance_id: m.instance_id,
                client_id: m.client_id,
                client_host: m.client_host,
                metadata: Default::default(),
                assignment: Default::default(),
            })
            .collect(),
    }
}

pub(crate) async fn delete_groups(
    core: &std::sync::Arc<BrokerCore>,
    ctx: &RequestContext,
    req: DeleteGroupsRequest,
) -> DeleteGroupsResponse {
    let mut results = Vec::with_capacity(req.groups_names.len());
    for id in req.groups_names {
        let group_id = id.0.to_string();
        let code = if !ctx.allowed(core, AclOperation::Delete, &Resource::group(&group_id)) {
            ErrorCode::GROUP_AUTHORIZATION_FAILED
        } else if core.shares().is_share_group(&group_id) {
            // As Kafka: a share group first, then the other types.
            super::share_offsets_admin::delete_share_group(core, &group_id).await
        } else {
            super::txn::blocking(core, move |c| {
                c.consumer_groups().delete_group(&group_id, c.now_ms())
            })
            .await
        };
        results.push(
            DeletableGroupResult::default()
                .with_group_id(id)
                .with_error_code(code.0),
        );
    }
    DeleteGroupsResponse::default().with_results(results)
}

pub(crate) async fn offset_delete(
    core: &std::sync::Arc<BrokerCore>,
    ctx: &RequestContext,
    req: OffsetDeleteRequest,
) -> OffsetDeleteResponse {
    let group_id = req.group_id.0.to_string();
    if !ctx.allowed(core, AclOperation::Delete, &Resource::group(&group_id)) {
        return OffsetDeleteResponse::default()
            .with_error_code(ErrorCode::GROUP_AUTHORIZATION_FAILED.0);
    }
    // (topic, partition, the broker's own refusal)
    let mut rows: Vec<(String, i32, Option<ErrorCode>)> = Vec::new();
    {
        let registry = core.topics().read();
        for t in &req.topics {
            let name = t.name.0.to_string();
            let authorized = ctx.allowed(core, AclOperation::Read, &Resource::topic(&name));
            let count = registry.get(&name).map(|m| m.partitions);
            for p in &t.partitions {
                let i = p.partition_index;
                let code = if !authorized {
                    Some(ErrorCode::TOPIC_AUTHORIZATION_FAILED)
                } else if count.is_none_or(|n| i < 0 || i >= n) {
                    Some(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION)
                } else {
                    None
                };
                rows.push((name.clone(), i, code));
            }
        }
    }
    let asked: Vec<(String, i32)> = rows
        .iter()
        .filter(|(_, _, c)| c.is_none())
        .map(|(t, p, _)| (t.clone(), *p))
        .collect();
    let gid = group_id.clone();
    let result = super::txn::blocking(core, move |c| {
        c.consumer_groups().delete_offsets(&gid, &asked)
    })
    .await;
    let mut codes = match result {
        Err(code) => return OffsetDeleteResponse::default().with_error_code(code.0),
        Ok(codes) => codes.into_iter(),
    };
    let mut topics: Vec<OffsetDeleteResponseTopic> = Vec::new();
    for (t, p, c) in rows {
        let code = c.unwrap_or_else(|| codes.next().unwrap_or(ErrorCode::UNKNOWN_SERVER_ERROR));
        let part = OffsetDeleteResponsePartition::default()
            .with_partition_index(p)
            .with_error_code(code.0);
        match topics.last_mut() {
            Some(last) if last.name.0.as_str() == t => last.partitions.push(part),
            _ => topics.push(
                OffsetDeleteResponseTopic::default()
                    .with_name(TopicName(s(t)))
                    .with_partitions(vec![part]),
            ),
        }
    }
    OffsetDeleteResponse::default().with_topics(topics)
}
