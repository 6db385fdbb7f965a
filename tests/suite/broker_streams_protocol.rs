//! KIP-1071's streams rebalance protocol over sockets, on the broker's
//! manual clock: a join creates the topology's internal topics with the
//! partition counts and configs it asks for and gets every task; a second
//! member gets tasks only once the first gave them up; offsets are checked
//! against the member epoch; a streams group is listed and described as
//! one and refuses the other protocols; a silent member's session expires;
//! a leave empties the group and DeleteGroups removes it.

use crate::common;

use common::RawClient;
use common::broker::TestBroker;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use sharestream::protocol::ErrorCode;
use sharestream::protocol::streams_group::{
    StreamsGroupDescribeRequest, StreamsGroupHeartbeatRequest, StreamsGroupHeartbeatResponse,
    Subtopology, TaskIds, TopicInfo, Topology,
};

const APP: &str = "app";
const REPARTITION: &str = "app-rekey-repartition";
const CHANGELOG: &str = "app-counts-changelog";

fn s(x: &str) -> StrBytes {
    StrBytes::from_string(x.to_string())
}

fn info(name: &str, configs: &[(&str, &str)]) -> TopicInfo {
    TopicInfo {
        name: name.into(),
        partitions: 0,
        replication_factor: 0,
        topic_configs: configs
            .iter()
            .map(|(k, v)| sharestream::protocol::streams_group::KeyValue {
                key: k.to_string(),
                value: v.to_string(),
            })
            .collect(),
    }
}

/// A word count as Kafka Streams describes it: subtopology 0 reads `in`
/// and writes the repartition topic, subtopology 1 reads it into a store
/// with a changelog.
fn topology() -> Topology {
    Topology {
        epoch: 0,
        subtopologies: vec![
            Subtopology {
                subtopology_id: "0".into(),
                source_topics: vec!["in".into()],
                repartition_sink_topics: vec![REPARTITION.into()],
                ..Subtopology::default()
            },
            Subtopology {
                subtopology_id: "1".into(),
                repartition_source_topics: vec![info(
                    REPARTITION,
                    &[("cleanup.policy", "delete"), ("retention.ms", "-1")],
                )],
                state_changelog_topics: vec![info(CHANGELOG, &[("cleanup.policy", "compact")])],
                ..Subtopology::default()
            },
        ],
    }
}

fn join(member: &str) -> StreamsGroupHeartbeatRequest {
    StreamsGroupHeartbeatRequest {
        group_id: APP.into(),
        member_id: member.into(),
        member_epoch: 0,
        rebalance_timeout_ms: 30_000,
        topology: Some(topology()),
        active_tasks: Some(vec![]),
        standby_tasks: Some(vec![]),
        warmup_tasks: Some(vec![]),
        process_id: Some(format!("process-{member}")),
        ..StreamsGroupHeartbeatRequest::default()
    }
}

fn beat(member: &str, epoch: i32, owned: Option<Vec<TaskIds>>) -> StreamsGroupHeartbeatRequest {
    StreamsGroupHeartbeatRequest {
        group_id: APP.into(),
        member_id: member.into(),
        member_epoch: epoch,
        active_tasks: owned,
        ..StreamsGroupHeartbeatRequest::default()
    }
}

async fn hb(c: &mut RawClient, req: StreamsGroupHeartbeatRequest) -> StreamsGroupHeartbeatResponse {
    let who = format!("{}@{}", req.member_id, req.member_epoch);
    let r = c.send(&req, 0).await;
    assert_eq!(r.error_code, 0, "{who}: {r:?}");
    r
}

fn count(t: &Option<Vec<TaskIds>>) -> Option<usize> {
    t.as_ref()
        .map(|v| v.iter().map(|t| t.partitions.len()).sum())
}

async fn commit(c: &mut RawClient, member: &str, epoch: i32) -> i16 {
    let r = c
        .send(
            &OffsetCommitRequest::default()
                .with_group_id(GroupId(s(APP)))
                .with_generation_id_or_member_epoch(epoch)
                .with_member_id(s(member))
                .with_topics(vec![
                    OffsetCommitRequestTopic::default()
                        .with_name(TopicName(s("in")))
                        .with_partitions(vec![
                            OffsetCommitRequestPartition::default()
                                .with_partition_index(0)
                                .with_committed_offset(5),
                        ]),
                ]),
            9,
        )
        .await;
    r.topics[0].partitions[0].error_code
}

async fn describe(
    c: &mut RawClient,
    groups: &[&str],
) -> sharestream::protocol::streams_group::StreamsGroupDescribeResponse {
    let req = StreamsGroupDescribeRequest {
        group_ids: groups.iter().map(|g| g.to_string()).collect(),
        include_authorized_operations: false,
    };
    c.send(&req, 0).await
}

async fn delete_group(c: &mut RawClient) -> i16 {
    let req = DeleteGroupsRequest::default().with_groups_names(vec![GroupId(s(APP))]);
    c.send(&req, 2).await.results[0].error_code
}

async fn partitions_of(c: &mut RawClient, topic: &str) -> Option<usize> {
    let r = c
        .send(
            &MetadataRequest::default().with_topics(Some(vec![
                kafka_protocol::messages::metadata_request::MetadataRequestTopic::default()
                    .with_name(Some(TopicName(s(topic)))),
            ])),
            12,
        )
        .await;
    let t = &r.topics[0];
    (t.error_code == 0).then_some(t.partitions.len())
}

#[tokio::test]
async fn kip1071_join_creates_internal_topics_and_tasks_move_only_when_given_up() {
    let st = TestBroker::in_memory()
        .manual_clock()
        .topic("in", 3)
        .start()
        .await;
    let mut c = RawClient::connect(st.b.local_addr()).await;

    // The first join: internal topics created, every task assigned.
    let r = hb(&mut c, join("a")).await;
    assert_eq!(r.member_epoch, 1);
    assert_eq!(r.status, Some(vec![]), "ready: {:?}", r.status);
    assert_eq!(count(&r.active_tasks), Some(6));
    assert_eq!(
        r.standby_tasks,
        Some(vec![]),
        "the three lists travel together"
    );
    assert_eq!(r.warmup_tasks, Some(vec![]));
    assert!(r.heartbeat_interval_ms > 0);
    assert_eq!(partitions_of(&mut c, REPARTITION).await, Some(3));
    assert_eq!(partitions_of(&mut c, CHANGELOG).await, Some(3));
    let configs = c
        .send(
            &DescribeConfigsRequest::default().with_resources(vec![
                kafka_protocol::messages::describe_configs_request::DescribeConfigsResource::default()
                    .with_resource_type(2)
                    .with_resource_name(s(CHANGELOG))
                    .with_configuration_keys(None),
            ]),
            4,
        )
        .await;
    let policy = configs.results[0]
        .configs
        .iter()
        .find(|c| c.name.as_str() == "cleanup.policy")
        .and_then(|c| c.value.as_ref().map(|v| v.to_string()));
    assert_eq!(policy.as_deref(), Some("compact"));
    let a_tasks = r.active_tasks.clone().unwrap();
    hb(&mut c, beat("a", 1, Some(a_tasks.clone()))).await;

    // b joins: nothing until a gave its share up.
    let r = hb(&mut c, join("b")).await;
    assert_eq!((r.member_epoch, count(&r.active_tasks)), (2, Some(0)));
    let r = hb(&mut c, beat("a", 1, None)).await;
    assert_eq!(r.member_epoch, 1, "revoking first");
    let kept = r.active_tasks.clone().unwrap();
    assert_eq!(count(&Some(kept.clone())), Some(3));
    let r = hb(&mut c, beat("b", 2, None)).await;
    assert_eq!(r.active_tasks, None, "not before a revoked");
    let r = hb(&mut c, beat("a", 1, Some(kept.clone()))).await;
    assert_eq!(r.member_epoch, 2);
    let r = hb(&mut c, beat("b", 2, None)).await;
    assert_eq!(count(&r.active_tasks), Some(3));
    for t in r.active_tasks.as_ref().unwrap() {
        for k in kept.iter().filter(|k| k.subtopology_id == t.subtopology_id) {
            assert!(
                t.partitions.iter().all(|p| !k.partitions.contains(p)),
                "task {}_{:?} has two owners",
                t.subtopology_id,
                t.partitions
            );
        }
    }

    // Offsets: the member's current epoch only.
    assert_eq!(commit(&mut c, "a", 2).await, 0);
    assert_eq!(
        commit(&mut c, "a", 1).await,
        ErrorCode::STALE_MEMBER_EPOCH.0
    );
    assert_eq!(commit(&mut c, "x", 2).await, ErrorCode::UNKNOWN_MEMBER_ID.0);

    // Listed and described as a streams group.
    let l = c.send(&ListGroupsRequest::default(), 5).await;
    let listed: Vec<(String, String, String, String)> = l
        .groups
        .iter()
        .map(|g| {
            (
                g.group_id.0.to_string(),
                g.protocol_type.to_string(),
                g.group_type.to_string(),
                g.group_state.to_string(),
            )
        })
        .collect();
    assert_eq!(
        listed,
        vec![(
            APP.into(),
            "streams".into(),
            "streams".into(),
            "Stable".into()
        )]
    );
    let d = describe(&mut c, &[APP, "nope"]).await;
    let g = &d.groups[0];
    assert_eq!(
        (g.error_code, g.group_state.as_str(), g.members.len()),
        (0, "Stable", 2),
        "{g:?}"
    );
    let t = g.topology.as_ref().unwrap();
    let subs = t.subtopologies.as_ref().unwrap();
    assert_eq!(subs[1].state_changelog_topics[0].partitions, 3);
    assert_eq!(subs[1].repartition_source_topics[0].name, REPARTITION);
    assert_eq!(d.groups[1].error_code, ErrorCode::GROUP_ID_NOT_FOUND.0);

    // The other protocols are refused on this group id.
    let r = c
        .send(
            &ConsumerGroupHeartbeatRequest::default()
                .with_group_id(GroupId(s(APP)))
                .with_member_id(s("c"))
                .with_member_epoch(0)
                .with_rebalance_timeout_ms(30_000)
                .with_subscribed_topic_names(Some(vec![TopicName(s("in"))])),
            1,
        )
        .await;
    assert_eq!(r.error_code, ErrorCode::GROUP_ID_NOT_FOUND.0);
    let r = c
        .send(
            &JoinGroupRequest::default()
                .with_group_id(GroupId(s(APP)))
                .with_session_timeout_ms(30_000)
                .with_rebalance_timeout_ms(30_000)
                .with_member_id(s(""))
                .with_protocol_type(s("consumer"))
                .with_protocols(vec![
                    kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol::default()
                        .with_name(s("range")),
                ]),
            9,
        )
        .await;
    assert_eq!(r.error_code, ErrorCode::INCONSISTENT_GROUP_PROTOCOL.0);
    let r = c
        .send(
            &DescribeGroupsRequest::default().with_groups(vec![GroupId(s(APP))]),
            6,
        )
        .await;
    assert_eq!(r.groups[0].error_code, ErrorCode::GROUP_ID_NOT_FOUND.0);

    // b falls silent: its session ends and a gets every task back.
    st.advance(30_000);
    let r = hb(&mut c, beat("a", 2, None)).await;
    assert_eq!(r.member_epoch, 2);
    st.advance(20_000);
    let r = hb(&mut c, beat("a", 2, None)).await;
    assert_eq!((r.member_epoch, count(&r.active_tasks)), (3, Some(6)));

    // A group with members is not deleted; after a's leave it is.
    assert_eq!(delete_group(&mut c).await, ErrorCode::NON_EMPTY_GROUP.0);
    let r = hb(&mut c, beat("a", -1, None)).await;
    assert_eq!(r.member_epoch, -1);
    assert_eq!(delete_group(&mut c).await, 0);
    let l = c.send(&ListGroupsRequest::default(), 5).await;
    assert!(l.groups.is_empty(), "{l:?}");
}

#[tokio::test]
async fn kip1071_missing_sources_and_invalid_requests() {
    let st = TestBroker::in_memory().start().await;
    let mut c = RawClient::connect(st.b.local_addr()).await;

    // No source topic: the member joins, gets no task and is told why;
    // nothing internal is created for a topology that cannot run.
    let r = hb(&mut c, join("a")).await;
    assert_eq!(count(&r.active_tasks), Some(0));
    let status = r.status.unwrap();
    assert_eq!(
        status[0].status_code, 1,
        "MISSING_SOURCE_TOPICS: {status:?}"
    );
    assert!(status[0].status_detail.contains("in"));
    assert_eq!(partitions_of(&mut c, CHANGELOG).await, None);

    // A join without a topology; an unknown member.
    let mut r = join("b");
    r.topology = None;
    let r = c.send(&r, 0).await;
    assert_eq!(r.error_code, ErrorCode::INVALID_REQUEST.0);
    let r = c.send(&beat("zz", 3, None), 0).await;
    assert_eq!(r.error_code, ErrorCode::UNKNOWN_MEMBER_ID.0);
    // The same topology epoch with another topology.
    let mut r = join("b");
    r.topology.as_mut().unwrap().subtopologies[0]
        .source_topics
        .push("other".into());
    let r = c.send(&r, 0).await;
    assert_eq!(r.error_code, ErrorCode::STREAMS_INVALID_TOPOLOGY_EPOCH.0);
}

/// A streams group's membership, tasks and topology survive kill -9: the
/// members keep heartbeating at their epochs and keep their tasks, a
/// revocation in flight completes after the restart, and a restored
/// member that stays silent still expires.
#[tokio::test]
async fn kip1071_membership_survives_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let st = TestBroker::on_disk(dir.path())
        .manual_clock()
        .topic("in", 3)
        .start()
        .await;
    let mut c = RawClient::connect(st.b.local_addr()).await;
    let all = hb(&mut c, join("a")).await.active_tasks.unwrap();
    hb(&mut c, beat("a", 1, Some(all.clone()))).await;
    // b joins and a is told to give half up; the broker dies before a
    // reports it.
    hb(&mut c, join("b")).await;
    let kept = hb(&mut c, beat("a", 1, None)).await.active_tasks.unwrap();
    assert_eq!(count(&Some(kept.clone())), Some(3));
    st.b.kill().await;

    let st = TestBroker::on_disk(dir.path()).manual_clock().start().await;
    let mut c = RawClient::connect(st.b.local_addr()).await;
    let d = describe(&mut c, &[APP]).await;
    let g = &d.groups[0];
    assert_eq!(
        (
            g.error_code,
            g.group_state.as_str(),
            g.group_epoch,
            g.members.len()
        ),
        (0, "Reconciling", 2, 2),
        "{g:?}"
    );
    let r = hb(&mut c, beat("b", 2, None)).await;
    assert_eq!(r.active_tasks, None, "a has not revoked yet");
    let r = hb(&mut c, beat("a", 1, Some(kept.clone()))).await;
    assert_eq!(r.member_epoch, 2, "revoked: at the target epoch");
    let r = hb(&mut c, beat("b", 2, None)).await;
    assert_eq!(count(&r.active_tasks), Some(3));
    assert_eq!(commit(&mut c, "a", 2).await, 0, "epoch 2 is a's");
    // The changelog created before the restart is still the group's.
    assert_eq!(partitions_of(&mut c, CHANGELOG).await, Some(3));
    // a goes silent: its session, restarted at the restoration, ends.
    st.advance(30_000);
    hb(&mut c, beat("b", 2, None)).await;
    st.advance(16_000);
    let r = c.send(&beat("a", 2, None), 0).await;
    assert_eq!(r.error_code, ErrorCode::UNKNOWN_MEMBER_ID.0);
    let r = hb(&mut c, beat("b", 2, None)).await;
    assert_eq!((r.member_epoch, count(&r.active_tasks)), (3, Some(6)));
    st.b.shutdown().await;
}

fn set_group_config(name: &str, value: &str) -> IncrementalAlterConfigsRequest {
    use kafka_protocol::messages::incremental_alter_configs_request::{
        AlterConfigsResource, AlterableConfig,
    };
    IncrementalAlterConfigsRequest::default().with_resources(vec![
        AlterConfigsResource::default()
            .with_resource_type(32)
            .with_resource_name(s(APP))
            .with_configs(vec![
                AlterableConfig::default()
                    .with_name(s(name))
                    .with_config_operation(0)
                    .with_value(Some(s(value))),
            ]),
    ])
}

/// The group configs `streams.num.standby.replicas`,
/// `streams.heartbeat.interval.ms` and `streams.session.timeout.ms`: set
/// through IncrementalAlterConfigs within Kafka's bounds, applied at the
/// next heartbeat.
#[tokio::test]
async fn kip1071_group_configs_give_standby_tasks_and_timing() {
    let st = TestBroker::in_memory()
        .manual_clock()
        .topic("in", 2)
        .start()
        .await;
    let mut c = RawClient::connect(st.b.local_addr()).await;
    for (name, value) in [
        ("streams.num.standby.replicas", "1"),
        ("streams.heartbeat.interval.ms", "7000"),
        ("streams.session.timeout.ms", "50000"),
    ] {
        let r = c.send(&set_group_config(name, value), 1).await;
        assert_eq!(r.responses[0].error_code, 0, "{name}: {r:?}");
    }
    for (name, value) in [
        ("streams.num.standby.replicas", "3"),
        ("streams.session.timeout.ms", "40000"),
    ] {
        let r = c.send(&set_group_config(name, value), 1).await;
        assert_eq!(
            r.responses[0].error_code,
            ErrorCode::INVALID_CONFIG.0,
            "{name}={value}: {r:?}"
        );
        let msg = r.responses[0].error_message.as_deref().unwrap_or("");
        assert!(msg.contains(name), "{msg}");
    }

    let a = hb(&mut c, join("a")).await;
    assert_eq!(a.heartbeat_interval_ms, 7000);
    assert_eq!(count(&a.active_tasks), Some(4));
    hb(&mut c, beat("a", 1, a.active_tasks.clone())).await;
    let b = hb(&mut c, join("b")).await;
    let b_standby = b.standby_tasks.clone().unwrap();
    // Two partitions: each member gets one task of each subtopology; only
    // subtopology 1 keeps state, so one standby each.
    assert_eq!(
        count(&Some(b_standby)),
        Some(1),
        "b backs up a's stateful task"
    );
    let a = hb(&mut c, beat("a", 1, None)).await;
    let kept = a.active_tasks.clone().unwrap();
    let a = hb(&mut c, beat("a", 1, Some(kept))).await;
    assert_eq!(a.member_epoch, 2);
    assert_eq!(
        count(&a.standby_tasks),
        Some(1),
        "a backs up b's stateful task"
    );
    let d = describe(&mut c, &[APP]).await;
    let members = &d.groups[0].members;
    assert!(
        members.iter().all(|m| m
            .target_assignment
            .standby_tasks
            .iter()
            .map(|t| t.partitions.len())
            .sum::<usize>()
            == 1),
        "{members:?}"
    );

    // The session: 50 s.
    st.advance(49_000);
    hb(&mut c, beat("a", 2, None)).await;
    st.advance(2_000);
    let r = c.send(&beat("b", 2, None), 0).await;
    assert_eq!(
        r.error_code,
        ErrorCode::UNKNOWN_MEMBER_ID.0,
        "b's session ended"
    );
}

/// A heartbeat the group refuses creates no internal topic: an invalid
/// topology, another topology at the group's epoch, a group id that is a
/// consumer group.
#[tokio::test]
async fn kip1071_a_refused_heartbeat_creates_no_topic() {
    let st = TestBroker::in_memory().topic("in", 3).start().await;
    let mut c = RawClient::connect(st.b.local_addr()).await;

    let mut r = join("a");
    r.topology.as_mut().unwrap().subtopologies[0].subtopology_id = "1".into();
    let r = c.send(&r, 0).await;
    assert_eq!(r.error_code, ErrorCode::STREAMS_INVALID_TOPOLOGY.0);
    assert_eq!(partitions_of(&mut c, CHANGELOG).await, None);

    // A consumer group holds the id.
    let r = c
        .send(
            &ConsumerGroupHeartbeatRequest::default()
                .with_group_id(GroupId(s(APP)))
                .with_member_id(s("c"))
                .with_member_epoch(0)
                .with_rebalance_timeout_ms(30_000)
                .with_subscribed_topic_names(Some(vec![TopicName(s("in"))])),
            1,
        )
        .await;
    assert_eq!(r.error_code, 0);
    let r = c.send(&join("a"), 0).await;
    assert_eq!(r.error_code, ErrorCode::GROUP_ID_NOT_FOUND.0);
    assert_eq!(partitions_of(&mut c, CHANGELOG).await, None);
    assert_eq!(partitions_of(&mut c, REPARTITION).await, None);
}
