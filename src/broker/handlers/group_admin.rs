//! ListGroups (classic and share groups, with the v4 state and v5 type
//! filters) and DescribeGroups (classic groups).
//!
//! Authorization as Kafka's KafkaApis: ListGroups lists every group with
//! Describe on the cluster, else only the groups the principal may
//! Describe; DescribeGroups answers GROUP_AUTHORIZATION_FAILED for a group
//! it may not Describe.

use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

use super::RequestContext;
use crate::broker::acl::{AUTHORIZED_OPERATIONS_OMITTED, AclOperation, Resource};
use crate::broker::core::BrokerCore;
use crate::protocol::ErrorCode;

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
    let mut groups: Vec<(String, String, String, &'static str)> = core
        .consumer_groups()
        .with_coordinator(|c| c.list_groups())
        .into_iter()
        .map(|(id, state, protocol_type)| {
            (id, protocol_type, state.as_str().to_string(), "classic")
        })
        .collect();
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
            let d = core
                .consumer_groups()
                .with_coordinator(|c| c.describe(&group_id));
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
