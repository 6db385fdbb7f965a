//! The KIP-848 consumer protocol over sockets, on the broker's manual
//! clock: two members reconcile (a partition reaches its new owner only
//! after the old one revoked it), an offset commit at a stale member epoch
//! is STALE_MEMBER_EPOCH, ListGroups and ConsumerGroupDescribe show the
//! group as a consumer group, a silent member's session expires, a leave
//! empties the group and DeleteGroups removes it.

use crate::common;

use common::RawClient;
use common::broker::TestBroker;
use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions;
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

async fn hb(
    c: &mut RawClient,
    member: &str,
    epoch: i32,
    owned: Option<Vec<i32>>,
    topic: Uuid,
) -> ConsumerGroupHeartbeatResponse {
    let mut req = ConsumerGroupHeartbeatRequest::default()
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
        req = req.with_subscribed_topic_names(Some(vec![TopicName(s("t"))]));
    }
    let r = c.send(&req, 1).await;
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
                                .with_partition_index(0)
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
    assert_eq!(
        commit(&mut c, "m1", 1).await,
        ErrorCode::STALE_MEMBER_EPOCH.0
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
