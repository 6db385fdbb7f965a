//! The streams rebalance protocol of KIP-1071: StreamsGroupHeartbeat (key
//! 88, v0) and StreamsGroupDescribe (key 89, v0). The state machine is
//! [`StreamsGroups`](crate::consumer_group::streams_protocol); the codecs
//! are ours (`sharestream_protocol::streams_group`).
//!
//! Before a heartbeat is handed to the state machine, the internal topics
//! its topology needs (repartition and changelog topics) are created with
//! the partition counts the topology gives them, as Kafka's coordinator
//! creates them: with the topology's replication factor (0: one replica,
//! this broker's only possible) and topic configs. What cannot be created
//! is reported in the heartbeat's MISSING_INTERNAL_TOPICS status.
//!
//! Authorization as Kafka's KafkaApis: Read on the group
//! (GROUP_AUTHORIZATION_FAILED) and Describe on every source topic named
//! (TOPIC_AUTHORIZATION_FAILED) for the heartbeat; creating the internal
//! topics needs Create on the cluster or on each topic, else the status
//! says so. Describe on the group for StreamsGroupDescribe.

use std::collections::BTreeMap;

use sharestream_protocol::ErrorCode;
use sharestream_protocol::streams_group as wire;

use super::RequestContext;
use crate::acl::{AUTHORIZED_OPERATIONS_OMITTED, AclOperation, Resource};
use crate::consumer_group::consumer_protocol::Topics;
use crate::consumer_group::streams_protocol::{
    self as sp, ACCEPTABLE_RECOVERY_LAG, StreamsHeartbeat, StreamsStatus, TASK_OFFSET_INTERVAL_MS,
    Tasks,
};
use crate::consumer_groups::topics_of;
use crate::core::BrokerCore;

fn topic_spec(t: wire::TopicInfo) -> sp::TopicSpec {
    sp::TopicSpec {
        name: t.name,
        partitions: t.partitions,
        replication_factor: t.replication_factor,
        configs: t
            .topic_configs
            .into_iter()
            .map(|kv| (kv.key, kv.value))
            .collect(),
    }
}

fn topology(t: wire::Topology) -> sp::Topology {
    sp::Topology {
        epoch: t.epoch,
        subtopologies: t
            .subtopologies
            .into_iter()
            .map(|s| sp::Subtopology {
                id: s.subtopology_id,
                source_topics: s.source_topics,
                source_topic_regex: s.source_topic_regex,
                changelog_topics: s
                    .state_changelog_topics
                    .into_iter()
                    .map(topic_spec)
                    .collect(),
                repartition_sink_topics: s.repartition_sink_topics,
                repartition_source_topics: s
                    .repartition_source_topics
                    .into_iter()
                    .map(topic_spec)
                    .collect(),
                copartition_groups: s
                    .copartition_groups
                    .into_iter()
                    .map(|g| sp::CopartitionGroup {
                        source_topics: g.source_topics,
                        source_topic_regex: g.source_topic_regex,
                        repartition_source_topics: g.repartition_source_topics,
                    })
                    .collect(),
            })
            .collect(),
    }
}

fn tasks_in(v: Vec<wire::TaskIds>) -> Tasks {
    let mut out = Tasks::new();
    for t in v {
        out.entry(t.subtopology_id)
            .or_default()
            .extend(t.partitions);
    }
    out.retain(|_, ps| !ps.is_empty());
    out
}

fn tasks_out(t: &Tasks) -> Vec<wire::TaskIds> {
    t.iter()
        .map(|(s, ps)| wire::TaskIds {
            subtopology_id: s.clone(),
            partitions: ps.iter().copied().collect(),
        })
        .collect()
}

fn topic_info(t: &sp::TopicSpec) -> wire::TopicInfo {
    wire::TopicInfo {
        name: t.name.clone(),
        partitions: t.partitions,
        replication_factor: t.replication_factor,
        topic_configs: t
            .configs
            .iter()
            .map(|(k, v)| wire::KeyValue {
                key: k.clone(),
                value: v.clone(),
            })
            .collect(),
    }
}

/// Creates the internal topics `topology` needs and does not find in
/// `topics`; returns why any could not be, and whether any was.
fn create_internal_topics(
    core: &BrokerCore,
    ctx: &RequestContext,
    group_id: &str,
    topology: &sp::Topology,
    topics: &Topics,
) -> (Vec<String>, bool) {
    let configured = sp::configure(topology, topics);
    let mut created = false;
    let may_create_all = ctx.allowed(core, AclOperation::Create, &Resource::cluster());
    let mut failures = Vec::new();
    for spec in configured.missing_internal {
        if !may_create_all && !ctx.allowed(core, AclOperation::Create, &Resource::topic(&spec.name))
        {
            failures.push(format!("Unauthorized to CREATE on topic {}.", spec.name));
            continue;
        }
        let replication = if spec.replication_factor <= 0 {
            1
        } else {
            spec.replication_factor
        };
        let configs: BTreeMap<String, String> = spec.configs.iter().cloned().collect();
        match core.create_topic(&spec.name, spec.partitions, replication, configs, false) {
            Ok(_) => {
                created = true;
                tracing::info!(
                    group = group_id,
                    topic = spec.name,
                    partitions = spec.partitions,
                    "created a streams group's internal topic"
                );
            }
            Err(e) if e.code == ErrorCode::TOPIC_ALREADY_EXISTS => {}
            Err(e) => {
                tracing::warn!(group = group_id, topic = spec.name, error = %e.message, "creating a streams group's internal topic failed");
                failures.push(format!("Creating {} failed: {}", spec.name, e.message));
            }
        }
    }
    (failures, created)
}

/// The group's `streams.*` configs (its own or the broker's defaults),
/// read at every heartbeat as Kafka does.
fn timing(core: &BrokerCore, group_id: &str) -> sp::StreamsTiming {
    let c = core.shares().group_config(group_id);
    sp::StreamsTiming {
        session_timeout_ms: c.streams_session_timeout_ms,
        heartbeat_interval_ms: c.streams_heartbeat_interval_ms,
        num_standby_replicas: c.streams_num_standby_replicas,
    }
}

pub(crate) fn streams_group_heartbeat(
    core: &BrokerCore,
    ctx: &RequestContext,
    req: wire::StreamsGroupHeartbeatRequest,
) -> wire::StreamsGroupHeartbeatResponse {
    let refuse = |code: ErrorCode, msg: &str| wire::StreamsGroupHeartbeatResponse {
        error_code: code.0,
        error_message: Some(msg.to_string()),
        ..Default::default()
    };
    if !ctx.allowed(core, AclOperation::Read, &Resource::group(&req.group_id)) {
        return refuse(
            ErrorCode::GROUP_AUTHORIZATION_FAILED,
            "Not authorized to read the group.",
        );
    }
    if let Some(t) = &req.topology
        && t.subtopologies
            .iter()
            .flat_map(|s| &s.source_topics)
            .any(|name| !ctx.allowed(core, AclOperation::Describe, &Resource::topic(name)))
    {
        return refuse(
            ErrorCode::TOPIC_AUTHORIZATION_FAILED,
            "Not authorized to describe a source topic.",
        );
    }
    let hb = StreamsHeartbeat {
        group_id: req.group_id.clone(),
        member_id: req.member_id.clone(),
        member_epoch: req.member_epoch,
        endpoint_information_epoch: req.endpoint_information_epoch,
        instance_id: req.instance_id,
        rack_id: req.rack_id,
        rebalance_timeout_ms: req.rebalance_timeout_ms,
        topology: req.topology.map(topology),
        active_tasks: req.active_tasks.map(tasks_in),
        process_id: req.process_id,
        user_endpoint: req.user_endpoint.map(|e| sp::Endpoint {
            host: e.host,
            port: e.port,
        }),
        client_tags: req
            .client_tags
            .map(|v| v.into_iter().map(|kv| (kv.key, kv.value)).collect()),
        shutdown_application: req.shutdown_application,
        timing: Some(timing(core, &req.group_id)),
        client_id: ctx.header.client_id.clone().unwrap_or_default(),
        client_host: format!("/{}", ctx.host),
    };
    let groups = core.consumer_groups();
    // A request that will be refused creates no topic.
    if let Err(e) = groups.streams_precheck(&hb) {
        return refuse(e.code, &e.message);
    }
    // One snapshot of the topics, taken again only when topics were made.
    let mut topics = topics_of(&core.topics().read());
    let mut failures = Vec::new();
    if hb.member_epoch >= 0
        && let Some(t) =
            groups.with_streams_groups(|g| g.topology_for(&hb.group_id, hb.topology.as_ref()))
    {
        let created;
        (failures, created) = create_internal_topics(core, ctx, &hb.group_id, &t, &topics);
        if created {
            topics = topics_of(&core.topics().read());
        }
    }
    match groups.streams_heartbeat(&hb, &topics, core.now_ms()) {
        Err(e) => refuse(e.code, &e.message),
        Ok(o) => {
            let mut status: Vec<wire::Status> = o
                .status
                .iter()
                .map(|(code, detail)| {
                    let mut detail = detail.clone();
                    if *code == StreamsStatus::MissingInternalTopics && !failures.is_empty() {
                        detail = format!("{detail} ({})", failures.join(" "));
                    }
                    wire::Status {
                        status_code: *code as i8,
                        status_detail: detail,
                    }
                })
                .collect();
            status.sort_by_key(|s| s.status_code);
            let (active, standby) = match &o.tasks {
                Some((a, s)) => (Some(tasks_out(a)), Some(tasks_out(s))),
                None => (None, None),
            };
            wire::StreamsGroupHeartbeatResponse {
                member_id: o.member_id,
                member_epoch: o.member_epoch,
                heartbeat_interval_ms: o.heartbeat_interval_ms,
                acceptable_recovery_lag: ACCEPTABLE_RECOVERY_LAG,
                task_offset_interval_ms: TASK_OFFSET_INTERVAL_MS,
                status: Some(status),
                // The three lists travel together: a client takes an
                // assignment only when all three are present.
                warmup_tasks: active.as_ref().map(|_| Vec::new()),
                active_tasks: active,
                standby_tasks: standby,
                endpoint_information_epoch: o.endpoint_information_epoch,
                partitions_by_user_endpoint: o.partitions_by_endpoint.map(|v| {
                    v.into_iter()
                        .map(|e| wire::EndpointToPartitions {
                            user_endpoint: wire::Endpoint {
                                host: e.endpoint.host,
                                port: e.endpoint.port,
                            },
                            active_partitions: e
                                .active
                                .into_iter()
                                .map(|(topic, ps)| wire::TopicPartition {
                                    topic,
                                    partitions: ps.into_iter().collect(),
                                })
                                .collect(),
                            standby_partitions: e
                                .standby
                                .into_iter()
                                .map(|(topic, ps)| wire::TopicPartition {
                                    topic,
                                    partitions: ps.into_iter().collect(),
                                })
                                .collect(),
                        })
                        .collect()
                }),
                ..Default::default()
            }
        }
    }
}

pub(crate) fn streams_group_describe(
    core: &BrokerCore,
    ctx: &RequestContext,
    req: wire::StreamsGroupDescribeRequest,
) -> wire::StreamsGroupDescribeResponse {
    let groups = req
        .group_ids
        .into_iter()
        .map(|group_id| {
            let resource = Resource::group(&group_id);
            let base = wire::DescribedGroup {
                group_id: group_id.clone(),
                authorized_operations: AUTHORIZED_OPERATIONS_OMITTED,
                ..Default::default()
            };
            if !ctx.allowed(core, AclOperation::Describe, &resource) {
                return wire::DescribedGroup {
                    error_code: ErrorCode::GROUP_AUTHORIZATION_FAILED.0,
                    ..base
                };
            }
            let Some(d) = core.consumer_groups().streams_describe(&group_id) else {
                return wire::DescribedGroup {
                    error_code: ErrorCode::GROUP_ID_NOT_FOUND.0,
                    error_message: Some(format!("Group {group_id} not found.")),
                    group_state: "Dead".into(),
                    ..base
                };
            };
            let topology = d.topology.map(|t| wire::DescribeTopology {
                epoch: t.epoch,
                subtopologies: Some(
                    t.subtopologies
                        .iter()
                        .map(|s| {
                            // An internal topic's partitions as it exists.
                            let with_count = |x: &sp::TopicSpec| {
                                let mut info = topic_info(x);
                                if let Some(t) = core.topics().read().get(&x.name) {
                                    info.partitions = t.partitions;
                                }
                                info
                            };
                            wire::DescribeSubtopology {
                                subtopology_id: s.id.clone(),
                                source_topics: s.source_topics.clone(),
                                repartition_sink_topics: s.repartition_sink_topics.clone(),
                                state_changelog_topics: s
                                    .changelog_topics
                                    .iter()
                                    .map(with_count)
                                    .collect(),
                                repartition_source_topics: s
                                    .repartition_source_topics
                                    .iter()
                                    .map(with_count)
                                    .collect(),
                            }
                        })
                        .collect(),
                ),
            });
            let assignment = |active: &Tasks, standby: &Tasks| wire::Assignment {
                active_tasks: tasks_out(active),
                standby_tasks: tasks_out(standby),
                warmup_tasks: Vec::new(),
            };
            let members = d
                .members
                .iter()
                .map(|m| wire::Member {
                    member_id: m.member_id.clone(),
                    member_epoch: m.member_epoch,
                    instance_id: m.instance_id.clone(),
                    rack_id: m.rack_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    topology_epoch: m.topology_epoch,
                    process_id: m.process_id.clone(),
                    user_endpoint: m.user_endpoint.as_ref().map(|e| wire::Endpoint {
                        host: e.host.clone(),
                        port: e.port,
                    }),
                    client_tags: m
                        .client_tags
                        .iter()
                        .map(|(k, v)| wire::KeyValue {
                            key: k.clone(),
                            value: v.clone(),
                        })
                        .collect(),
                    task_offsets: Vec::new(),
                    task_end_offsets: Vec::new(),
                    assignment: assignment(&m.assignment, &m.standby),
                    target_assignment: assignment(&m.target_assignment, &m.target_standby),
                    is_classic: false,
                })
                .collect();
            let authorized_operations = if req.include_authorized_operations {
                ctx.authorized_operations(core, &resource)
            } else {
                AUTHORIZED_OPERATIONS_OMITTED
            };
            wire::DescribedGroup {
                group_state: d.state.as_str().to_string(),
                group_epoch: d.group_epoch,
                assignment_epoch: d.assignment_epoch,
                topology,
                members,
                authorized_operations,
                ..base
            }
        })
        .collect();
    wire::StreamsGroupDescribeResponse {
        throttle_time_ms: 0,
        groups,
    }
}
