//! Consumer groups (classic protocol) over sockets: two members join,
//! sync and commit; multi-group OffsetFetch; batched LeaveGroup; committed
//! offsets surviving kill -9; authorization as KafkaApis checks it.

use crate::common;

use bytes::Bytes;
use common::RawClient;
use common::broker::TestBroker;
use common::kip::{create_topic, s};
use common::sasl::*;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::*;
use sharestream::broker::consumer_group::{ClassicGroupConfig, GroupState};
use sharestream::broker::{BrokerConfig, BrokerHandle};
use sharestream::protocol::ErrorCode;

const GROUP_ID: &str = "cg";
const TOPIC_NAME: &str = "orders";

/// A join phase of 300 ms, on the broker's clock: the tests that wait for
/// it run the broker on a manual clock and move it (no wall-clock wait).
fn quick_groups(c: &mut BrokerConfig) {
    c.consumer_groups = ClassicGroupConfig {
        initial_rebalance_delay_ms: 300,
        ..ClassicGroupConfig::default()
    };
}

/// Waits until the broker has taken `n` members into group `GROUP_ID`
/// (their JoinGroups are parked in the join phase): a wait for requests to
/// arrive, not for a timer.
async fn joined(b: &BrokerHandle, n: usize) {
    tokio::time::timeout(std::time::Duration::from_secs(10), async {
        while b
            .core()
            .consumer_groups()
            .with_coordinator(|c| c.member_ids(GROUP_ID).len())
            < n
        {
            tokio::task::yield_now().await;
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
    })
    .await
    .expect("both JoinGroups reach the coordinator");
}

fn join_req(member_id: &str) -> JoinGroupRequest {
    JoinGroupRequest::default()
        .with_group_id(GroupId(s(GROUP_ID)))
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(20_000)
        .with_member_id(s(member_id))
        .with_protocol_type(s("consumer"))
        .with_protocols(vec![
            JoinGroupRequestProtocol::default()
                .with_name(s("range"))
                .with_metadata(Bytes::from_static(b"subscription")),
        ])
}

/// JoinGroup v9 without a member id: MEMBER_ID_REQUIRED and the id.
async fn member_id(c: &mut RawClient) -> String {
    let r = c.send(&join_req(""), 9).await;
    assert_eq!(r.error_code, ErrorCode::MEMBER_ID_REQUIRED.0);
    assert!(!r.member_id.is_empty());
    r.member_id.to_string()
}

fn commit_req(member: &str, generation: i32, offset: i64) -> OffsetCommitRequest {
    OffsetCommitRequest::default()
        .with_group_id(GroupId(s(GROUP_ID)))
        .with_generation_id_or_member_epoch(generation)
        .with_member_id(s(member))
        .with_topics(vec![
            OffsetCommitRequestTopic::default()
                .with_name(TopicName(s(TOPIC_NAME)))
                .with_partitions(vec![
                    OffsetCommitRequestPartition::default()
                        .with_partition_index(0)
                        .with_committed_offset(offset)
                        .with_committed_leader_epoch(0)
                        .with_committed_metadata(Some(s("meta"))),
                    OffsetCommitRequestPartition::default()
                        .with_partition_index(7)
                        .with_committed_offset(offset),
                ]),
        ])
}

fn commit_codes(r: &OffsetCommitResponse) -> Vec<i16> {
    r.topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
        .collect()
}

/// OffsetFetch v8 of several groups: (group, error, [(partition, offset, error)]).
async fn fetch_v8(c: &mut RawClient, groups: &[&str]) -> Vec<(String, i16, Vec<(i32, i64, i16)>)> {
    let req = OffsetFetchRequest::default().with_groups(
        groups
            .iter()
            .map(|g| {
                OffsetFetchRequestGroup::default()
                    .with_group_id(GroupId(s(g)))
                    .with_topics(Some(vec![
                        OffsetFetchRequestTopics::default()
                            .with_name(TopicName(s(TOPIC_NAME)))
                            .with_partition_indexes(vec![0, 1]),
                    ]))
            })
            .collect(),
    );
    let r = c.send(&req, 8).await;
    r.groups
        .iter()
        .map(|g| {
            (
                g.group_id.0.to_string(),
                g.error_code,
                g.topics
                    .iter()
                    .flat_map(|t| {
                        t.partitions
                            .iter()
                            .map(|p| (p.partition_index, p.committed_offset, p.error_code))
                    })
                    .collect(),
            )
        })
        .collect()
}

#[tokio::test]
async fn two_members_join_sync_commit_fetch_and_leave() {
    let t = TestBroker::in_memory()
        .configure(quick_groups)
        .manual_clock()
        .topic(TOPIC_NAME, 2)
        .start()
        .await;
    let (b, mut admin) = (&t.b, RawClient::connect(t.b.local_addr()).await);

    // The coordinator for a group (key type 0) is this broker.
    let fc = admin
        .send(
            &FindCoordinatorRequest::default()
                .with_key_type(0)
                .with_coordinator_keys(vec![s(GROUP_ID)]),
            4,
        )
        .await;
    assert_eq!(fc.coordinators[0].error_code, 0);
    assert_eq!(fc.coordinators[0].node_id.0, 0);

    let mut ca = RawClient::connect(b.local_addr()).await;
    let mut cb = RawClient::connect(b.local_addr()).await;
    let a = member_id(&mut ca).await;
    let bid = member_id(&mut cb).await;
    // Both JoinGroups park until the join phase ends: 300 ms after the
    // first on the broker's clock, extended once by another 300 ms because
    // a second member arrived during the delay (Kafka's initial delay).
    let ja = ca.send_only(&join_req(&a), 9).await;
    let jb = cb.send_only(&join_req(&bid), 9).await;
    joined(b, 2).await;
    let state = || {
        b.core()
            .consumer_groups()
            .with_coordinator(|c| c.group_state(GROUP_ID))
    };
    t.advance(299);
    assert_eq!(state(), Some(GroupState::PreparingRebalance));
    t.advance(1);
    assert_eq!(state(), Some(GroupState::PreparingRebalance), "extended");
    t.advance(299);
    assert_eq!(state(), Some(GroupState::PreparingRebalance));
    t.advance(1);
    assert_eq!(state(), Some(GroupState::CompletingRebalance));
    let ra = ca.recv::<JoinGroupRequest>(9, ja).await;
    let rb = cb.recv::<JoinGroupRequest>(9, jb).await;
    assert_eq!((ra.error_code, rb.error_code), (0, 0));
    assert_eq!(ra.generation_id, 1);
    assert_eq!(rb.generation_id, 1);
    assert_eq!(ra.leader, rb.leader);
    assert_eq!(ra.protocol_name.as_deref(), Some("range"));
    let (mut leader, leader_id, mut follower, follower_id) = if ra.leader.as_str() == a {
        assert_eq!(ra.members.len(), 2);
        assert!(rb.members.is_empty());
        (ca, a.clone(), cb, bid.clone())
    } else {
        assert_eq!(rb.members.len(), 2);
        (cb, bid.clone(), ca, a.clone())
    };
    // The follower's SyncGroup parks until the leader's arrives.
    let sync = |m: &str, assignments: Vec<(&str, &'static [u8])>| {
        SyncGroupRequest::default()
            .with_group_id(GroupId(s(GROUP_ID)))
            .with_generation_id(1)
            .with_member_id(s(m))
            .with_protocol_type(Some(s("consumer")))
            .with_protocol_name(Some(s("range")))
            .with_assignments(
                assignments
                    .into_iter()
                    .map(|(m, a)| {
                        SyncGroupRequestAssignment::default()
                            .with_member_id(s(m))
                            .with_assignment(Bytes::from_static(a))
                    })
                    .collect(),
            )
    };
    let fs = follower.send_only(&sync(&follower_id, vec![]), 5).await;
    let ls = leader
        .send(
            &sync(&leader_id, vec![(&leader_id, b"p0"), (&follower_id, b"p1")]),
            5,
        )
        .await;
    assert_eq!(ls.error_code, 0);
    assert_eq!(ls.assignment, Bytes::from_static(b"p0"));
    let fsr = follower.recv::<SyncGroupRequest>(5, fs).await;
    assert_eq!(fsr.error_code, 0);
    assert_eq!(fsr.assignment, Bytes::from_static(b"p1"));
    assert_eq!(fsr.protocol_name.as_deref(), Some("range"));

    // What kafka-consumer-groups.sh sees: the group, Stable, both members
    // with their assignments; ListGroups with the v5 type filter.
    let d = admin
        .send(
            &DescribeGroupsRequest::default().with_groups(vec![GroupId(s(GROUP_ID))]),
            5,
        )
        .await;
    let g = &d.groups[0];
    assert_eq!(g.error_code, 0);
    assert_eq!(g.group_state.as_str(), "Stable");
    assert_eq!(g.protocol_type.as_str(), "consumer");
    assert_eq!(g.protocol_data.as_str(), "range");
    assert_eq!(g.members.len(), 2);
    let leader_row = g
        .members
        .iter()
        .find(|m| m.member_id.as_str() == leader_id)
        .unwrap();
    assert_eq!(leader_row.member_assignment, Bytes::from_static(b"p0"));
    assert_eq!(
        leader_row.member_metadata,
        Bytes::from_static(b"subscription")
    );
    let d = admin
        .send(
            &DescribeGroupsRequest::default().with_groups(vec![GroupId(s("nobody"))]),
            6,
        )
        .await;
    assert_eq!(d.groups[0].error_code, ErrorCode::GROUP_ID_NOT_FOUND.0);
    let d = admin
        .send(
            &DescribeGroupsRequest::default().with_groups(vec![GroupId(s("nobody"))]),
            5,
        )
        .await;
    assert_eq!(
        (d.groups[0].error_code, d.groups[0].group_state.as_str()),
        (0, "Dead")
    );
    let l = admin
        .send(
            &ListGroupsRequest::default().with_types_filter(vec![s("classic")]),
            5,
        )
        .await;
    let listed: Vec<(&str, &str, &str)> = l
        .groups
        .iter()
        .map(|g| {
            (
                g.group_id.0.as_str(),
                g.group_state.as_str(),
                g.group_type.as_str(),
            )
        })
        .collect();
    assert_eq!(listed, vec![(GROUP_ID, "Stable", "classic")]);
    let l = admin
        .send(
            &ListGroupsRequest::default().with_states_filter(vec![s("Empty")]),
            4,
        )
        .await;
    assert!(l.groups.is_empty());

    let hb = |m: &str, generation: i32| {
        HeartbeatRequest::default()
            .with_group_id(GroupId(s(GROUP_ID)))
            .with_generation_id(generation)
            .with_member_id(s(m))
    };
    assert_eq!(follower.send(&hb(&follower_id, 1), 4).await.error_code, 0);
    assert_eq!(
        follower.send(&hb(&follower_id, 0), 4).await.error_code,
        ErrorCode::ILLEGAL_GENERATION.0
    );

    // Commit: partition 7 does not exist.
    let r = leader.send(&commit_req(&leader_id, 1, 42), 8).await;
    assert_eq!(
        commit_codes(&r),
        vec![0, ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.0]
    );
    let r = leader.send(&commit_req(&leader_id, 0, 43), 8).await;
    assert_eq!(
        commit_codes(&r),
        vec![
            ErrorCode::ILLEGAL_GENERATION.0,
            ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.0
        ]
    );

    // Multi-group fetch: ours, and one that does not exist.
    let got = fetch_v8(&mut admin, &[GROUP_ID, "nobody"]).await;
    assert_eq!(
        got[0],
        (GROUP_ID.to_string(), 0, vec![(0, 42, 0), (1, -1, 0)])
    );
    assert_eq!(
        got[1],
        ("nobody".to_string(), 0, vec![(0, -1, 0), (1, -1, 0)])
    );
    // The single-group form, all topics (null).
    let r = admin
        .send(
            &OffsetFetchRequest::default()
                .with_group_id(GroupId(s(GROUP_ID)))
                .with_topics(None),
            7,
        )
        .await;
    assert_eq!(r.error_code, 0);
    assert_eq!(r.topics.len(), 1);
    assert_eq!(r.topics[0].partitions[0].committed_offset, 42);
    assert_eq!(r.topics[0].partitions[0].committed_leader_epoch, 0);
    assert_eq!(r.topics[0].partitions[0].metadata.as_deref(), Some("meta"));
    // v1: explicit topics.
    let r = admin
        .send(
            &OffsetFetchRequest::default()
                .with_group_id(GroupId(s(GROUP_ID)))
                .with_topics(Some(vec![
                    OffsetFetchRequestTopic::default()
                        .with_name(TopicName(s(TOPIC_NAME)))
                        .with_partition_indexes(vec![0]),
                ])),
            1,
        )
        .await;
    assert_eq!(r.topics[0].partitions[0].committed_offset, 42);

    // Batched leave of both members (v3+): the group empties.
    let r = admin
        .send(
            &LeaveGroupRequest::default()
                .with_group_id(GroupId(s(GROUP_ID)))
                .with_members(vec![
                    MemberIdentity::default().with_member_id(s(&leader_id)),
                    MemberIdentity::default().with_member_id(s(&follower_id)),
                    MemberIdentity::default().with_member_id(s("ghost")),
                ]),
            5,
        )
        .await;
    assert_eq!(r.error_code, 0);
    let codes: Vec<i16> = r.members.iter().map(|m| m.error_code).collect();
    assert_eq!(codes, vec![0, 0, ErrorCode::UNKNOWN_MEMBER_ID.0]);
    assert_eq!(
        follower.send(&hb(&follower_id, 1), 4).await.error_code,
        ErrorCode::UNKNOWN_MEMBER_ID.0
    );
    // An Empty group takes commits from outside (generation -1).
    let r = admin.send(&commit_req("", -1, 50), 8).await;
    assert_eq!(commit_codes(&r)[0], 0);
    t.b.shutdown().await;
}

#[tokio::test]
async fn a_parked_join_is_answered_at_shutdown() {
    let t = TestBroker::in_memory()
        .configure(|c| c.consumer_groups.initial_rebalance_delay_ms = 60_000)
        .start()
        .await;
    let (b, mut c) = (t.b, t.c);
    let id = member_id(&mut c).await;
    let cid = c.send_only(&join_req(&id), 9).await;
    let stopping = tokio::spawn(b.shutdown());
    let r = tokio::time::timeout(std::time::Duration::from_secs(10), async {
        match c.next_frame().await {
            Some(mut f) => {
                use sharestream::protocol::api::{ApiRequest, decode_response_header};
                let got =
                    decode_response_header(&mut f, <JoinGroupRequest as ApiRequest>::API_KEY, 9)
                        .unwrap();
                assert_eq!(got, cid);
                Some(
                    <JoinGroupRequest as ApiRequest>::decode_response(&mut f, 9)
                        .unwrap()
                        .error_code,
                )
            }
            None => None,
        }
    })
    .await
    .expect("shutdown must not wait for the rebalance");
    // Answered COORDINATOR_NOT_AVAILABLE, or the connection closed.
    assert!(
        r.is_none_or(|code| code == ErrorCode::COORDINATOR_NOT_AVAILABLE.0),
        "{r:?}"
    );
    tokio::time::timeout(std::time::Duration::from_secs(10), stopping)
        .await
        .expect("shutdown finishes")
        .unwrap();
}

#[tokio::test]
async fn committed_offsets_survive_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let t = TestBroker::on_disk(dir.path())
        .topic(TOPIC_NAME, 2)
        .start()
        .await;
    let (b, mut c) = (t.b, t.c);
    let r = c.send(&commit_req("", -1, 1234), 8).await;
    assert_eq!(commit_codes(&r)[0], 0);
    b.kill().await;

    let t = TestBroker::on_disk(dir.path()).start().await;
    let (b, mut c) = (t.b, t.c);
    let got = fetch_v8(&mut c, &[GROUP_ID]).await;
    assert_eq!(got[0].2[0], (0, 1234, 0));
    b.shutdown().await;
}

#[tokio::test]
async fn authorization_as_kafka_apis_checks_it() {
    let b = start_with(true, &[("alice", "pw")], quick_groups).await;
    let mut admin = plain(&b, ADMIN.0, ADMIN.1).await;
    create_topic(&mut admin, TOPIC_NAME, 2).await;
    let alice = "User:alice";
    let mut c = plain(&b, "alice", "pw").await;

    // No Read on the group.
    let r = c.send(&join_req(""), 9).await;
    assert_eq!(r.error_code, ErrorCode::GROUP_AUTHORIZATION_FAILED.0);
    let r = c.send(&commit_req("", -1, 1), 8).await;
    assert_eq!(
        commit_codes(&r),
        vec![ErrorCode::GROUP_AUTHORIZATION_FAILED.0; 2]
    );
    let got = fetch_v8(&mut c, &[GROUP_ID]).await;
    assert_eq!(got[0].1, ErrorCode::GROUP_AUTHORIZATION_FAILED.0);
    let r = c
        .send(
            &HeartbeatRequest::default()
                .with_group_id(GroupId(s(GROUP_ID)))
                .with_member_id(s("m")),
            4,
        )
        .await;
    assert_eq!(r.error_code, ErrorCode::GROUP_AUTHORIZATION_FAILED.0);

    // Read on the group, nothing on the topic.
    create_acls(&mut admin, vec![acl(GROUP, GROUP_ID, LITERAL, alice, READ)]).await;
    let r = c.send(&join_req(""), 9).await;
    assert_eq!(r.error_code, ErrorCode::MEMBER_ID_REQUIRED.0);
    let r = c.send(&commit_req("", -1, 1), 8).await;
    assert_eq!(
        commit_codes(&r),
        vec![ErrorCode::TOPIC_AUTHORIZATION_FAILED.0; 2]
    );
    // Read implies Describe: the group may be fetched; the topic not.
    let got = fetch_v8(&mut c, &[GROUP_ID]).await;
    assert_eq!(got[0].1, 0);
    assert!(
        got[0]
            .2
            .iter()
            .all(|(_, _, e)| *e == ErrorCode::TOPIC_AUTHORIZATION_FAILED.0)
    );

    // Read on the topic: the commit goes through.
    create_acls(
        &mut admin,
        vec![acl(TOPIC, TOPIC_NAME, LITERAL, alice, READ)],
    )
    .await;
    let r = c.send(&commit_req("", -1, 9), 8).await;
    assert_eq!(
        commit_codes(&r),
        vec![0, ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.0]
    );
    let got = fetch_v8(&mut c, &[GROUP_ID]).await;
    assert_eq!(got[0].2[0], (0, 9, 0));
    b.shutdown().await;
}

fn txn_commit_req(txn: &str, pid: i64, epoch: i16, offset: i64) -> TxnOffsetCommitRequest {
    use kafka_protocol::messages::txn_offset_commit_request::{
        TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
    };
    TxnOffsetCommitRequest::default()
        .with_transactional_id(TransactionalId(s(txn)))
        .with_group_id(GroupId(s(GROUP_ID)))
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(epoch)
        .with_generation_id(-1)
        .with_topics(vec![
            TxnOffsetCommitRequestTopic::default()
                .with_name(TopicName(s(TOPIC_NAME)))
                .with_partitions(vec![
                    TxnOffsetCommitRequestPartition::default()
                        .with_partition_index(0)
                        .with_committed_offset(offset),
                ]),
        ])
}

fn txn_codes(r: &TxnOffsetCommitResponse) -> Vec<i16> {
    r.topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
        .collect()
}

/// OffsetFetch v8 with require_stable: (offset, error) of partition 0.
async fn fetch_stable(c: &mut RawClient) -> (i64, i16) {
    let req = OffsetFetchRequest::default()
        .with_require_stable(true)
        .with_groups(vec![
            OffsetFetchRequestGroup::default()
                .with_group_id(GroupId(s(GROUP_ID)))
                .with_topics(Some(vec![
                    OffsetFetchRequestTopics::default()
                        .with_name(TopicName(s(TOPIC_NAME)))
                        .with_partition_indexes(vec![0]),
                ])),
        ]);
    let r = c.send(&req, 8).await;
    let p = &r.groups[0].topics[0].partitions[0];
    (p.committed_offset, p.error_code)
}

#[tokio::test]
async fn txn_offset_commit_is_settled_by_the_transaction() {
    use common::kip::{end_txn, init_pid};
    let t = TestBroker::in_memory().topic(TOPIC_NAME, 1).start().await;
    let (b, mut c) = (t.b, t.c);

    // Transactions v1: AddOffsetsToTxn first, else the commit is refused.
    let (pid, epoch) = init_pid(&mut c, "t1", 60_000).await;
    let r = c.send(&txn_commit_req("t1", pid, epoch, 5), 3).await;
    assert_eq!(txn_codes(&r), vec![ErrorCode::INVALID_TXN_STATE.0]);
    let r = c
        .send(
            &AddOffsetsToTxnRequest::default()
                .with_transactional_id(TransactionalId(s("t1")))
                .with_producer_id(ProducerId(pid))
                .with_producer_epoch(epoch)
                .with_group_id(GroupId(s(GROUP_ID))),
            3,
        )
        .await;
    assert_eq!(r.error_code, 0);
    let r = c.send(&txn_commit_req("t1", pid, epoch, 5), 3).await;
    assert_eq!(txn_codes(&r), vec![0]);
    // Pending: require_stable sees UNSTABLE_OFFSET_COMMIT; nothing committed.
    assert_eq!(
        fetch_stable(&mut c).await,
        (-1, ErrorCode::UNSTABLE_OFFSET_COMMIT.0)
    );
    assert_eq!(fetch_v8(&mut c, &[GROUP_ID]).await[0].2[0], (0, -1, 0));
    // Abort drops them.
    let r = c
        .send(
            &EndTxnRequest::default()
                .with_transactional_id(TransactionalId(s("t1")))
                .with_producer_id(ProducerId(pid))
                .with_producer_epoch(epoch)
                .with_committed(false),
            3,
        )
        .await;
    assert_eq!(r.error_code, 0);
    let stable = async {
        loop {
            let got = fetch_stable(&mut c).await;
            if got.1 == 0 {
                return got;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    };
    assert_eq!(stable.await, (-1, 0));

    // Transactions v2: TxnOffsetCommit v5 enrolls the offsets partition.
    let (pid, epoch) = init_pid(&mut c, "t2", 60_000).await;
    let r = c.send(&txn_commit_req("t2", pid, epoch, 9), 5).await;
    assert_eq!(txn_codes(&r), vec![0]);
    assert_eq!(
        fetch_stable(&mut c).await.1,
        ErrorCode::UNSTABLE_OFFSET_COMMIT.0
    );
    let r = end_txn(&mut c, "t2", pid, epoch, true).await;
    assert_eq!(r.error_code, 0);
    let stable = async {
        loop {
            let got = fetch_stable(&mut c).await;
            if got.1 == 0 {
                return got;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    };
    assert_eq!(stable.await, (9, 0));
    // A fenced producer epoch cannot commit offsets.
    let r = c.send(&txn_commit_req("t2", pid, epoch, 10), 5).await;
    assert_ne!(txn_codes(&r), vec![0]);
    b.shutdown().await;
}
