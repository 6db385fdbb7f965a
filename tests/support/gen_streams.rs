//! Generated values for KIP-1071's StreamsGroupHeartbeat and
//! StreamsGroupDescribe (our own codecs, `sharestream::protocol::streams_group`:
//! kafka-protocol 0.18 has neither), for tests/suite/protocol_roundtrip.rs
//! and tests/suite/jvm_bytes.rs.

use super::entropy::Entropy as G;
use sharestream::protocol::streams_group as sg;

fn s(g: &mut G) -> String {
    g.string().to_string()
}
fn kv(g: &mut G) -> sg::KeyValue {
    sg::KeyValue {
        key: s(g),
        value: s(g),
    }
}
fn topic_info(g: &mut G) -> sg::TopicInfo {
    sg::TopicInfo {
        name: s(g),
        partitions: g.i32(),
        replication_factor: g.i16(),
        topic_configs: g.vec(kv),
    }
}
fn endpoint(g: &mut G) -> sg::Endpoint {
    sg::Endpoint {
        host: s(g),
        port: g.u16(),
    }
}
fn task_ids(g: &mut G) -> sg::TaskIds {
    sg::TaskIds {
        subtopology_id: s(g),
        partitions: g.vec(|g| g.i32()),
    }
}
fn task_offset(g: &mut G) -> sg::TaskOffset {
    sg::TaskOffset {
        subtopology_id: s(g),
        partition: g.i32(),
        offset: g.i64(),
    }
}
fn opt_s(g: &mut G) -> Option<String> {
    g.opt(s)
}

pub fn heartbeat_request(g: &mut G) -> sg::StreamsGroupHeartbeatRequest {
    sg::StreamsGroupHeartbeatRequest {
        group_id: s(g),
        member_id: s(g),
        member_epoch: g.i32(),
        endpoint_information_epoch: g.i32(),
        instance_id: opt_s(g),
        rack_id: opt_s(g),
        rebalance_timeout_ms: g.i32(),
        topology: g.opt(|g| sg::Topology {
            epoch: g.i32(),
            subtopologies: g.vec(|g| sg::Subtopology {
                subtopology_id: s(g),
                source_topics: g.vec(s),
                source_topic_regex: g.vec(s),
                state_changelog_topics: g.vec(topic_info),
                repartition_sink_topics: g.vec(s),
                repartition_source_topics: g.vec(topic_info),
                copartition_groups: g.vec(|g| sg::CopartitionGroup {
                    source_topics: g.vec(|g| g.i16()),
                    source_topic_regex: g.vec(|g| g.i16()),
                    repartition_source_topics: g.vec(|g| g.i16()),
                }),
            }),
        }),
        active_tasks: g.opt(|g| g.vec(task_ids)),
        standby_tasks: g.opt(|g| g.vec(task_ids)),
        warmup_tasks: g.opt(|g| g.vec(task_ids)),
        process_id: opt_s(g),
        user_endpoint: g.opt(endpoint),
        client_tags: g.opt(|g| g.vec(kv)),
        task_offsets: g.opt(|g| g.vec(task_offset)),
        task_end_offsets: g.opt(|g| g.vec(task_offset)),
        shutdown_application: g.bool(),
    }
}

pub fn heartbeat_response(g: &mut G) -> sg::StreamsGroupHeartbeatResponse {
    let tp = |g: &mut G| sg::TopicPartition {
        topic: s(g),
        partitions: g.vec(|g| g.i32()),
    };
    sg::StreamsGroupHeartbeatResponse {
        throttle_time_ms: g.i32(),
        error_code: g.i16(),
        error_message: opt_s(g),
        member_id: s(g),
        member_epoch: g.i32(),
        heartbeat_interval_ms: g.i32(),
        acceptable_recovery_lag: g.i32(),
        task_offset_interval_ms: g.i32(),
        status: g.opt(|g| {
            g.vec(|g| sg::Status {
                status_code: g.i8(),
                status_detail: s(g),
            })
        }),
        active_tasks: g.opt(|g| g.vec(task_ids)),
        standby_tasks: g.opt(|g| g.vec(task_ids)),
        warmup_tasks: g.opt(|g| g.vec(task_ids)),
        endpoint_information_epoch: g.i32(),
        partitions_by_user_endpoint: g.opt(|g| {
            g.vec(|g| sg::EndpointToPartitions {
                user_endpoint: endpoint(g),
                active_partitions: g.vec(tp),
                standby_partitions: g.vec(tp),
            })
        }),
    }
}

pub fn describe_request(g: &mut G) -> sg::StreamsGroupDescribeRequest {
    sg::StreamsGroupDescribeRequest {
        group_ids: g.vec(s),
        include_authorized_operations: g.bool(),
    }
}

pub fn describe_response(g: &mut G) -> sg::StreamsGroupDescribeResponse {
    let assignment = |g: &mut G| sg::Assignment {
        active_tasks: g.vec(task_ids),
        standby_tasks: g.vec(task_ids),
        warmup_tasks: g.vec(task_ids),
    };
    sg::StreamsGroupDescribeResponse {
        throttle_time_ms: g.i32(),
        groups: g.vec(|g| sg::DescribedGroup {
            error_code: g.i16(),
            error_message: opt_s(g),
            group_id: s(g),
            group_state: s(g),
            group_epoch: g.i32(),
            assignment_epoch: g.i32(),
            topology: g.opt(|g| sg::DescribeTopology {
                epoch: g.i32(),
                subtopologies: g.opt(|g| {
                    g.vec(|g| sg::DescribeSubtopology {
                        subtopology_id: s(g),
                        source_topics: g.vec(s),
                        repartition_sink_topics: g.vec(s),
                        state_changelog_topics: g.vec(topic_info),
                        repartition_source_topics: g.vec(topic_info),
                    })
                }),
            }),
            members: g.vec(|g| sg::Member {
                member_id: s(g),
                member_epoch: g.i32(),
                instance_id: opt_s(g),
                rack_id: opt_s(g),
                client_id: s(g),
                client_host: s(g),
                topology_epoch: g.i32(),
                process_id: s(g),
                user_endpoint: g.opt(endpoint),
                client_tags: g.vec(kv),
                task_offsets: g.vec(task_offset),
                task_end_offsets: g.vec(task_offset),
                assignment: assignment(g),
                target_assignment: assignment(g),
                is_classic: g.bool(),
            }),
            authorized_operations: g.i32(),
        }),
    }
}
