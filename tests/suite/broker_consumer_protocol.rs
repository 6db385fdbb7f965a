//! The KIP-848 consumer protocol over sockets, on the broker's manual
//! clock: two members reconcile (a partition reaches its new owner only
//! after the old one revoked it), an offset commit at a stale member epoch
//! is STALE_MEMBER_EPOCH (an older one only for partitions given up since,
//! KIP-1251), ListGroups and ConsumerGroupDescribe show the
//! group as a consumer group, a silent member's session expires, a leave
//! empties the group and DeleteGroups removes it.

use crate::common;

use common::RawClient;
use common::broker::TestBroker;
use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use sharestream::protocol::ErrorCode;
use uuid::Uuid;

fn s(x: &str) -> StrBytes {
    StrBytes::from_string(x.to_string())
}

/// A heartbeat of `member` in group `g`: at epoch 0 a join subscribed to
/// `t`; `owned` partitions of `topic` if given.
fn hb_req(
    member: &str,
    epoch: i32,
    owned: Option<Vec<i32>>,
    topic: Uuid,
) -> ConsumerGroupHeartbeatRequest {
    let req = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s("g")))
        .with_member_id(s(member))
        .with_member_epoch(epoch)
        .with_rebalance_timeout_ms(if epoch == 0 { 30_000 } else { -1 })
        .with_topic_partitions(owned.map(|ps| {
            vec![
                TopicPartitions::default()
                    .with_topic_id(topic)
                    .with_partitions(ps),
            ]
        }));
    if epoch == 0 {
        join_req(member, &["t"]).with_topic_partitions(req.topic_partitions)
    } else {
        req
    }
}

/// A join (epoch 0) of `member` in group `g` subscribed to `topics`.
fn join_req(member: &str, topics: &[&str]) -> ConsumerGroupHeartbeatRequest {
    ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s("g")))
        .with_member_id(s(member))
        .with_member_epoch(0)
        .with_rebalance_timeout_ms(30_000)
        .with_subscribed_topic_names(Some(topics.iter().map(|t| TopicName(s(t))).collect()))
}

async fn hb(
    c: &mut RawClient,
    member: &str,
    epoch: i32,
    owned: Option<Vec<i32>>,
    topic: Uuid,
) -> ConsumerGroupHeartbeatResponse {
    let r = c.send(&hb_req(member, epoch, owned, topic), 1).await;
    assert_eq!(r.error_code, 0, "{member}@{epoch}: {r:?}");
    r
}

fn partitions(r: &ConsumerGroupHeartbeatResponse) -> Option<Vec<i32>> {
    r.assignment.as_ref().map(|a| {
        let mut v: Vec<i32> = a
            .topic_partitions
            .iter()
            .flat_map(|t| t.partitions.iter().copied())
            .collect();
        v.sort();
        v
    })
}

async fn commit(c: &mut RawClient, member: &str, epoch: i32) -> i16 {
    commit_partition(c, member, epoch, 0).await
}

async fn commit_partition(c: &mut RawClient, member: &str, epoch: i32, partition: i32) -> i16 {
    let r = c
        .send(
            &OffsetCommitRequest::default()
                .with_group_id(GroupId(s("g")))
                .with_generation_id_or_member_epoch(epoch)
                .with_member_id(s(member))
                .with_topics(vec![
                    OffsetCommitRequestTopic::default()
                        .with_name(TopicName(s("t")))
                        .with_partitions(vec![
                            OffsetCommitRequestPartition::default()
                                .with_partition_index(partition)
                                .with_committed_offset(5),
                        ]),
                ]),
            9,
        )
        .await;
    r.topics[0].partitions[0].error_code
}

async fn listed(c: &mut RawClient) -> Vec<(String, String, String)> {
    let r = c.send(&ListGroupsRequest::default(), 5).await;
    r.groups
        .iter()
        .map(|g| {
            (
                g.group_id.0.to_string(),
                g.group_type.to_string(),
                g.group_state.to_string(),
            )
        })
        .collect()
}

#[tokio::test]
async fn kip848_two_members_reconcile_commit_expire_and_leave() {
    let st = TestBroker::in_memory()
        .manual_clock()
        .topic("t", 4)
        .start()
        .await;
    let topic = st.topic();
    let mut c = RawClient::connect(st.b.local_addr()).await;

    let r = hb(&mut c, "m1", 0, None, topic).await;
    assert_eq!(
        (r.member_epoch, partitions(&r)),
        (1, Some(vec![0, 1, 2, 3]))
    );
    assert!(r.heartbeat_interval_ms > 0);
    hb(&mut c, "m1", 1, Some(vec![0, 1, 2, 3]), topic).await;

    let r = hb(&mut c, "m2", 0, None, topic).await;
    assert_eq!(
        (r.member_epoch, partitions(&r)),
        (2, Some(vec![])),
        "m1 holds them all"
    );
    let r = hb(&mut c, "m1", 1, None, topic).await;
    assert_eq!(r.member_epoch, 1, "revoking first");
    let kept = partitions(&r).unwrap();
    assert_eq!(kept.len(), 2);
    let r = hb(&mut c, "m2", 2, Some(vec![]), topic).await;
    assert_eq!(partitions(&r), None, "not before m1 has revoked");
    assert_eq!(commit(&mut c, "m1", 1).await, 0, "epoch 1 is still m1's");

    let r = hb(&mut c, "m1", 1, Some(kept.clone()), topic).await;
    assert_eq!(r.member_epoch, 2);
    // KIP-1251 (Kafka 4.3+): epoch 1 still commits what m1 held since
    // then, and is stale for what it gave up.
    let given = (0..4).find(|p| !kept.contains(p)).unwrap();
    assert_eq!(commit_partition(&mut c, "m1", 1, kept[0]).await, 0);
    assert_eq!(
        commit_partition(&mut c, "m1", 1, given).await,
        ErrorCode::STALE_MEMBER_EPOCH.0
    );
    assert_eq!(
        commit(&mut c, "m1", 3).await,
        ErrorCode::STALE_MEMBER_EPOCH.0,
        "newer than m1's"
    );
    assert_eq!(commit(&mut c, "m1", 2).await, 0);
    assert_eq!(
        commit(&mut c, "zz", 2).await,
        ErrorCode::UNKNOWN_MEMBER_ID.0
    );
    let r = hb(&mut c, "m2", 2, None, topic).await;
    let got = partitions(&r).unwrap();
    assert_eq!(got.len(), 2);
    assert!(got.iter().all(|p| !kept.contains(p)));
    hb(&mut c, "m2", 2, Some(got), topic).await;

    assert_eq!(
        listed(&mut c).await,
        vec![("g".into(), "consumer".into(), "Stable".into())]
    );
    let d = c
        .send(
            &ConsumerGroupDescribeRequest::default().with_group_ids(vec![GroupId(s("g"))]),
            1,
        )
        .await;
    let g = &d.groups[0];
    assert_eq!(g.error_code, 0, "{g:?}");
    assert_eq!(
        (
            g.group_state.as_str(),
            g.group_epoch,
            g.assignor_name.as_str()
        ),
        ("Stable", 2, "uniform")
    );
    assert_eq!(g.members.len(), 2);
    assert_eq!(
        g.members[0].assignment.topic_partitions[0]
            .topic_name
            .0
            .as_str(),
        "t"
    );

    let d = c
        .send(
            &DescribeGroupsRequest::default().with_groups(vec![GroupId(s("g"))]),
            5,
        )
        .await;
    let g = &d.groups[0];
    assert_eq!(
        (
            g.error_code,
            g.group_state.as_str(),
            g.protocol_type.as_str(),
            g.members.len()
        ),
        (0, "Stable", "consumer", 2)
    );

    // m2 goes silent; m1 keeps its session.
    st.advance(40_000);
    hb(&mut c, "m1", 2, None, topic).await;
    st.advance(6_000);
    let r = hb(&mut c, "m1", 2, None, topic).await;
    assert_eq!(
        (r.member_epoch, partitions(&r)),
        (3, Some(vec![0, 1, 2, 3]))
    );
    let r = c
        .send(
            &ConsumerGroupHeartbeatRequest::default()
                .with_group_id(GroupId(s("g")))
                .with_member_id(s("m2"))
                .with_member_epoch(2),
            1,
        )
        .await;
    assert_eq!(r.error_code, ErrorCode::UNKNOWN_MEMBER_ID.0, "expired");

    let r = hb(&mut c, "m1", -1, None, topic).await;
    assert_eq!(r.member_epoch, -1);
    assert_eq!(
        listed(&mut c).await,
        vec![("g".into(), "consumer".into(), "Empty".into())]
    );
    let r = c
        .send(
            &DeleteGroupsRequest::default().with_groups_names(vec![GroupId(s("g"))]),
            2,
        )
        .await;
    assert_eq!(r.results[0].error_code, 0);
    assert!(listed(&mut c).await.is_empty());
}

/// A full heartbeat (what Java sends after a failed one, e.g. once the
/// coordinator is back): rebalance timeout, subscription and owned
/// partitions.
async fn full_hb(
    c: &mut RawClient,
    member: &str,
    epoch: i32,
    owned: Vec<i32>,
    topic: Uuid,
) -> ConsumerGroupHeartbeatResponse {
    let full = join_req(member, &["t"])
        .with_member_epoch(epoch)
        .with_topic_partitions(hb_req(member, epoch, Some(owned), topic).topic_partitions);
    c.send(&full, 1).await
}

/// D29a: the group's membership is journaled; after kill -9 and a restart
/// from the same data directory, members heartbeat with their epoch and
/// keep their partitions (nothing revoked, no new group epoch), and a
/// member that was revoking at the crash still has to finish revoking
/// before the partition moves.
#[tokio::test]
async fn kip848_membership_survives_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let st = TestBroker::on_disk(dir.path())
        .manual_clock()
        .topic("t", 4)
        .start()
        .await;
    let topic = st.topic();
    let mut c = RawClient::connect(st.b.local_addr()).await;
    hb(&mut c, "m1", 0, None, topic).await;
    hb(&mut c, "m1", 1, Some(vec![0, 1, 2, 3]), topic).await;
    hb(&mut c, "m2", 0, None, topic).await;
    let kept = partitions(&hb(&mut c, "m1", 1, None, topic).await).unwrap();
    hb(&mut c, "m1", 1, Some(kept.clone()), topic).await;
    let got = partitions(&hb(&mut c, "m2", 2, None, topic).await).unwrap();
    hb(&mut c, "m2", 2, Some(got.clone()), topic).await;
    assert_eq!(commit(&mut c, "m1", 2).await, 0);
    st.b.kill().await;

    let st = TestBroker::on_disk(dir.path()).manual_clock().start().await;
    let mut c = RawClient::connect(st.b.local_addr()).await;
    assert_eq!(
        listed(&mut c).await,
        vec![("g".into(), "consumer".into(), "Stable".into())]
    );
    // A plain heartbeat at the old epoch: nothing changes.
    let r = hb(&mut c, "m1", 2, Some(kept.clone()), topic).await;
    assert_eq!((r.member_epoch, partitions(&r)), (2, None));
    // A full one is answered with the same assignment.
    let r = full_hb(&mut c, "m2", 2, got.clone(), topic).await;
    assert_eq!(r.error_code, 0, "{r:?}");
    assert_eq!((r.member_epoch, partitions(&r)), (2, Some(got.clone())));
    let r = full_hb(&mut c, "m1", 2, kept.clone(), topic).await;
    assert_eq!((r.member_epoch, partitions(&r)), (2, Some(kept.clone())));
    assert_eq!(commit(&mut c, "m1", 2).await, 0, "epoch 2 is still m1's");
    let d = c
        .send(
            &ConsumerGroupDescribeRequest::default().with_group_ids(vec![GroupId(s("g"))]),
            1,
        )
        .await;
    assert_eq!(
        (d.groups[0].group_state.as_str(), d.groups[0].group_epoch),
        ("Stable", 2),
        "no rebalance"
    );

    // m2 leaves; m1 gets everything at epoch 3; m3 joins (epoch 4) and m1
    // is told to revoke; the broker dies before m1 reports it.
    hb(&mut c, "m2", -1, None, topic).await;
    let r = hb(&mut c, "m1", 2, None, topic).await;
    assert_eq!(
        (r.member_epoch, partitions(&r)),
        (3, Some(vec![0, 1, 2, 3]))
    );
    hb(&mut c, "m1", 3, Some(vec![0, 1, 2, 3]), topic).await;
    hb(&mut c, "m3", 0, None, topic).await;
    let kept = partitions(&hb(&mut c, "m1", 3, None, topic).await).unwrap();
    assert_eq!(kept.len(), 2);
    st.b.kill().await;

    let st = TestBroker::on_disk(dir.path()).manual_clock().start().await;
    let mut c = RawClient::connect(st.b.local_addr()).await;
    let r = hb(&mut c, "m3", 4, None, topic).await;
    assert_eq!(partitions(&r), None, "m1 has not revoked yet");
    let r = hb(&mut c, "m1", 3, Some(kept.clone()), topic).await;
    assert_eq!(r.member_epoch, 4, "revoked: at the target epoch");
    let r = hb(&mut c, "m3", 4, None, topic).await;
    let moved = partitions(&r).unwrap();
    assert_eq!(moved.len(), 2);
    assert!(moved.iter().all(|p| !kept.contains(p)));
    // A restored member that stays silent still expires.
    st.advance(46_000);
    let r = c.send(&hb_req("m1", 4, None, topic), 1).await;
    assert_eq!(r.error_code, ErrorCode::UNKNOWN_MEMBER_ID.0);
    st.b.shutdown().await;
}

async fn static_hb(
    c: &mut RawClient,
    member: &str,
    epoch: i32,
    owned: Option<Vec<i32>>,
    topic: Uuid,
) -> ConsumerGroupHeartbeatResponse {
    let req = hb_req(member, epoch, owned, topic).with_instance_id(Some(s("instance-a")));
    c.send(&req, 1).await
}

/// Static members of the consumer protocol over sockets, on the manual
/// clock: -2 keeps the partitions, a restarted process (new member id,
/// same instance id) gets them back with no rebalance, a second live one
/// is UNRELEASED_INSTANCE_ID, and the slot goes at session timeout.
#[tokio::test]
async fn kip848_static_member_restart_keeps_its_partitions() {
    let st = TestBroker::in_memory()
        .manual_clock()
        .topic("t", 4)
        .start()
        .await;
    let topic = st.topic();
    let mut c = RawClient::connect(st.b.local_addr()).await;
    let r = static_hb(&mut c, "a1", 0, None, topic).await;
    assert_eq!(r.error_code, 0, "{r:?}");
    static_hb(&mut c, "a1", 1, Some(vec![0, 1, 2, 3]), topic).await;
    hb(&mut c, "b1", 0, None, topic).await;
    let kept = partitions(&static_hb(&mut c, "a1", 1, None, topic).await).unwrap();
    static_hb(&mut c, "a1", 1, Some(kept.clone()), topic).await;
    let got = partitions(&hb(&mut c, "b1", 2, None, topic).await).unwrap();
    hb(&mut c, "b1", 2, Some(got), topic).await;

    let r = static_hb(&mut c, "a2", 0, None, topic).await;
    assert_eq!(r.error_code, ErrorCode::UNRELEASED_INSTANCE_ID.0);
    let r = static_hb(&mut c, "a1", -2, None, topic).await;
    assert_eq!((r.error_code, r.member_epoch), (0, -2));
    st.advance(20_000);
    hb(&mut c, "b1", 2, None, topic).await;
    let r = static_hb(&mut c, "a2", 0, None, topic).await;
    assert_eq!(r.error_code, 0, "{r:?}");
    assert_eq!((r.member_epoch, partitions(&r)), (2, Some(kept.clone())));
    let r = static_hb(&mut c, "a1", 2, None, topic).await;
    assert_eq!(r.error_code, ErrorCode::FENCED_INSTANCE_ID.0);

    // Gone for good: the session ends 45 s after a2's last heartbeat.
    static_hb(&mut c, "a2", -2, None, topic).await;
    st.advance(30_000);
    hb(&mut c, "b1", 2, None, topic).await;
    st.advance(15_000);
    let r = hb(&mut c, "b1", 2, None, topic).await;
    assert_eq!(
        (r.member_epoch, partitions(&r)),
        (3, Some(vec![0, 1, 2, 3]))
    );
}

fn classic_join(member_id: &str) -> JoinGroupRequest {
    use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
    JoinGroupRequest::default()
        .with_group_id(GroupId(s("g")))
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(20_000)
        .with_member_id(s(member_id))
        .with_protocol_type(s("consumer"))
        .with_protocols(vec![
            JoinGroupRequestProtocol::default()
                .with_name(s("range"))
                .with_metadata(bytes::Bytes::from_static(b"subscription")),
        ])
}

async fn committed(c: &mut RawClient) -> i64 {
    use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
    let r = c
        .send(
            &OffsetFetchRequest::default()
                .with_group_id(GroupId(s("g")))
                .with_topics(Some(vec![
                    OffsetFetchRequestTopic::default()
                        .with_name(TopicName(s("t")))
                        .with_partition_indexes(vec![0]),
                ])),
            7,
        )
        .await;
    r.topics[0].partitions[0].committed_offset
}

/// D29d, as Kafka: a classic JoinGroup takes over an empty
/// consumer-protocol group (its offsets kept) and a consumer-protocol
/// heartbeat an empty classic one; a JoinGroup into a consumer-protocol
/// group with members is refused (INCONSISTENT_GROUP_PROTOCOL), since
/// classic members inside it are not served here, and a consumer-protocol
/// join into a classic group with members is GROUP_ID_NOT_FOUND.
#[tokio::test]
async fn kip848_an_empty_group_changes_protocol_with_its_offsets() {
    let st = TestBroker::in_memory()
        .manual_clock()
        .topic("t", 4)
        .start()
        .await;
    let topic = st.topic();
    let mut c = RawClient::connect(st.b.local_addr()).await;
    hb(&mut c, "m1", 0, None, topic).await;
    assert_eq!(commit(&mut c, "m1", 1).await, 0);
    let r = c.send(&classic_join(""), 9).await;
    assert_eq!(r.error_code, ErrorCode::INCONSISTENT_GROUP_PROTOCOL.0);
    hb(&mut c, "m1", -1, None, topic).await;

    // Empty: the classic protocol takes it over.
    let r = c.send(&classic_join(""), 9).await;
    assert_eq!(r.error_code, ErrorCode::MEMBER_ID_REQUIRED.0);
    let member = r.member_id.to_string();
    assert!(
        !listed(&mut c)
            .await
            .iter()
            .any(|(g, t, _)| g == "g" && t == "consumer"),
        "no longer a consumer-protocol group"
    );
    assert_eq!(committed(&mut c).await, 5);
    // The classic member joins (the initial delay runs on the manual clock)
    // and is then in a classic group with members.
    let joined = {
        let mut c2 = RawClient::connect(st.b.local_addr()).await;
        let req = classic_join(&member);
        tokio::spawn(async move { c2.send(&req, 9).await })
    };
    for _ in 0..50 {
        if joined.is_finished() {
            break;
        }
        st.advance(1_000);
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let r = joined.await.unwrap();
    assert_eq!(r.error_code, 0, "{r:?}");
    let r = c.send(&join_req("m2", &["t"]), 1).await;
    assert_eq!(r.error_code, ErrorCode::GROUP_ID_NOT_FOUND.0);
    // The classic member leaves: the consumer protocol takes it back.
    let r = c
        .send(
            &LeaveGroupRequest::default()
                .with_group_id(GroupId(s("g")))
                .with_member_id(s(&member)),
            0,
        )
        .await;
    assert_eq!(r.error_code, 0);
    let r = hb(&mut c, "m2", 0, None, topic).await;
    assert_eq!(partitions(&r), Some(vec![0, 1, 2, 3]));
    assert_eq!(committed(&mut c).await, 5);
}

async fn describe(c: &mut RawClient) -> i16 {
    let req = ConsumerGroupDescribeRequest::default().with_group_ids(vec![GroupId(s("g"))]);
    c.send(&req, 1).await.groups[0].error_code
}

/// KAFKA-18813 as Kafka 4.x does it: a regex subscription resolves only to
/// topics the member's principal may Describe, and ConsumerGroupDescribe
/// hides a group whose assignments name a topic the caller may not
/// Describe (TOPIC_AUTHORIZATION_FAILED for that group).
#[tokio::test]
async fn kip848_regex_and_describe_respect_topic_describe_acls() {
    use common::sasl::{DESCRIBE, GROUP, LITERAL, READ, TOPIC, acl, create_acls, plain};
    let st = TestBroker::in_memory()
        .sasl(true, &[("alice", "pw")])
        .topic("t1", 2)
        .topic("t2", 2)
        .start()
        .await;
    let mut admin = st.c;
    create_acls(
        &mut admin,
        vec![
            acl(GROUP, "g", LITERAL, "User:alice", READ),
            acl(TOPIC, "t1", LITERAL, "User:alice", DESCRIBE),
        ],
    )
    .await;
    let mut alice = plain(&st.b, "alice", "pw").await;
    let req = join_req("a1", &[])
        .with_subscribed_topic_names(None)
        .with_subscribed_topic_regex(Some(s("t.*")));
    let r = alice.send(&req, 1).await;
    assert_eq!(r.error_code, 0, "{r:?}");
    let ids: Vec<Uuid> = r
        .assignment
        .unwrap()
        .topic_partitions
        .iter()
        .map(|t| t.topic_id)
        .collect();
    let t1 = st.b.core().topics().read().get("t1").unwrap().id;
    assert_eq!(ids, vec![t1], "t2 may not be described: not assigned");
    assert_eq!(describe(&mut alice).await, 0);
    // Another member, subscribed to t2 by name, gets t2: alice may no
    // longer see the group.
    let r = admin.send(&join_req("b1", &["t2"]), 1).await;
    assert_eq!(r.error_code, 0, "{r:?}");
    assert_eq!(
        describe(&mut alice).await,
        ErrorCode::TOPIC_AUTHORIZATION_FAILED.0
    );
    assert_eq!(describe(&mut admin).await, 0);
}

/// As Kafka 4.4 does: a regex that matches `__consumer_offsets` resolves to
/// it, so the member is assigned its partitions (empty here, D23), beside
/// the regular topic it also matches. franz-go's `Test848RegexBrokerResolves`
/// asserts this against a real broker.
#[tokio::test]
async fn kip848_a_regex_resolves_to_the_internal_offsets_topic_too() {
    let mut st = TestBroker::in_memory().topic("orders", 1).start().await;
    st.b.core().ensure_offsets_topic();
    let req = join_req("a1", &[])
        .with_subscribed_topic_names(None)
        .with_subscribed_topic_regex(Some(s("orders|__consumer_offsets")));
    let r = st.c.send(&req, 1).await;
    assert_eq!(r.error_code, 0, "{r:?}");
    let assigned: std::collections::BTreeMap<Uuid, usize> = r
        .assignment
        .unwrap()
        .topic_partitions
        .iter()
        .map(|t| (t.topic_id, t.partitions.len()))
        .collect();
    let topics = st.b.core().topics().read();
    let orders = topics.get("orders").unwrap().id;
    let offsets = topics.get("__consumer_offsets").unwrap().id;
    assert_eq!(assigned.get(&orders), Some(&1), "{assigned:?}");
    assert_eq!(assigned.get(&offsets), Some(&50), "{assigned:?}");
}

/// The group configs `consumer.heartbeat.interval.ms` and
/// `consumer.session.timeout.ms`, set with IncrementalAlterConfigs as
/// kafka-configs.sh and librdkafka's 0081_admin do, are what the group's
/// heartbeats answer and how long a silent member stays; DescribeConfigs
/// shows them as the group's own.
#[tokio::test]
async fn kip848_group_configs_set_the_interval_and_the_session() {
    let st = TestBroker::in_memory()
        .manual_clock()
        .topic("t", 2)
        .start()
        .await;
    let topic = st.topic();
    let mut c = RawClient::connect(st.b.local_addr()).await;
    let r = hb(&mut c, "m1", 0, None, topic).await;
    assert_eq!(r.heartbeat_interval_ms, 5_000, "the broker's default");
    let set = |name: &str, value: &str| {
        IncrementalAlterConfigsRequest::default().with_resources(vec![
            AlterConfigsResource::default()
                .with_resource_type(32)
                .with_resource_name(s("g"))
                .with_configs(vec![
                    AlterableConfig::default()
                        .with_name(s(name))
                        .with_config_operation(0)
                        .with_value(Some(s(value))),
                ]),
        ])
    };
    for (name, value) in [
        ("consumer.heartbeat.interval.ms", "15000"),
        ("consumer.session.timeout.ms", "60000"),
    ] {
        let r = c.send(&set(name, value), 1).await;
        assert_eq!(r.responses[0].error_code, 0, "{r:?}");
    }
    let r = c
        .send(&set("consumer.session.timeout.ms", "40000"), 1)
        .await;
    assert_eq!(
        (
            r.responses[0].error_code,
            r.responses[0]
                .error_message
                .as_deref()
                .map(|m| m.to_string())
        ),
        (
            ErrorCode::INVALID_CONFIG.0,
            Some(
                "consumer.session.timeout.ms must be in the range 45000 to 60000 inclusive.".into()
            )
        )
    );
    let r = hb(&mut c, "m1", 1, Some(vec![0, 1]), topic).await;
    assert_eq!(r.heartbeat_interval_ms, 15_000);
    // Silent past the broker's 45 s, within the group's 60 s: still in.
    st.advance(50_000);
    let r = hb(&mut c, "m1", 1, None, topic).await;
    assert_eq!(r.member_epoch, 1);
    st.advance(60_000);
    let r = c.send(&hb_req("m1", 1, None, topic), 1).await;
    assert_eq!(r.error_code, ErrorCode::UNKNOWN_MEMBER_ID.0, "{r:?}");

    let d = c
        .send(
            &DescribeConfigsRequest::default().with_resources(vec![
                describe_configs_request::DescribeConfigsResource::default()
                    .with_resource_type(32)
                    .with_resource_name(s("g"))
                    .with_configuration_keys(Some(vec![
                        s("consumer.heartbeat.interval.ms"),
                        s("consumer.session.timeout.ms"),
                    ])),
            ]),
            4,
        )
        .await;
    let rows: Vec<(String, String, i8)> = d.results[0]
        .configs
        .iter()
        .map(|e| {
            (
                e.name.to_string(),
                e.value.as_deref().unwrap_or("").to_string(),
                e.config_source,
            )
        })
        .collect();
    assert_eq!(
        rows,
        vec![
            ("consumer.heartbeat.interval.ms".into(), "15000".into(), 8),
            ("consumer.session.timeout.ms".into(), "60000".into(), 8),
        ]
    );
}
