//! Committed-offset retention (`offsets.retention.minutes`,
//! `offsets.retention.check.interval.ms`) on the broker's manual clock:
//! standalone commits expire a retention after their commit and their
//! group goes, durably; a consumer-protocol group keeps its offsets while
//! it has members, and loses them a retention after the last left.

use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::*;
use uuid::Uuid;

use crate::common::RawClient;
use crate::common::broker::{Started, TestBroker};
use crate::common::kip::s;

const TOPIC: &str = "t";
const RETENTION_MS: i64 = 60_000;

fn retention(b: TestBroker) -> TestBroker {
    b.manual_clock().topic(TOPIC, 1).configure(|c| {
        c.offsets_retention_minutes = RETENTION_MS / 60_000;
        c.offsets_retention_check_interval_ms = 1_000;
    })
}

async fn commit(c: &mut RawClient, group: &str, member: &str, epoch: i32, offset: i64) {
    let r = c
        .send(
            &OffsetCommitRequest::default()
                .with_group_id(GroupId(s(group)))
                .with_generation_id_or_member_epoch(epoch)
                .with_member_id(s(member))
                .with_topics(vec![
                    OffsetCommitRequestTopic::default()
                        .with_name(TopicName(s(TOPIC)))
                        .with_partitions(vec![
                            OffsetCommitRequestPartition::default()
                                .with_partition_index(0)
                                .with_committed_offset(offset),
                        ]),
                ]),
            9,
        )
        .await;
    assert_eq!(r.topics[0].partitions[0].error_code, 0);
}

/// The committed offset of partition 0 (-1 = none).
async fn committed(c: &mut RawClient, group: &str) -> i64 {
    let r = c
        .send(
            &OffsetFetchRequest::default().with_groups(vec![
                OffsetFetchRequestGroup::default()
                    .with_group_id(GroupId(s(group)))
                    .with_topics(Some(vec![
                        OffsetFetchRequestTopics::default()
                            .with_name(TopicName(s(TOPIC)))
                            .with_partition_indexes(vec![0]),
                    ])),
            ]),
            8,
        )
        .await;
    r.groups[0].topics[0].partitions[0].committed_offset
}

async fn listed(c: &mut RawClient) -> Vec<String> {
    let r = c.send(&ListGroupsRequest::default(), 5).await;
    r.groups.iter().map(|g| g.group_id.0.to_string()).collect()
}

/// Moves the clock in steps of the check interval (each step runs the
/// group timers, as the broker's tick would).
fn advance(st: &Started, ms: i64) {
    let mut left = ms;
    while left > 0 {
        let step = left.min(1_000);
        st.advance(step);
        left -= step;
    }
}

#[tokio::test]
async fn standalone_offsets_expire_a_retention_after_their_commit_and_the_group_goes_durably() {
    let dir = tempfile::tempdir().unwrap();
    let st = retention(TestBroker::on_disk(dir.path())).start().await;
    let mut c = RawClient::connect(st.b.local_addr()).await;
    st.advance(0);
    commit(&mut c, "solo", "", -1, 42).await;
    advance(&st, RETENTION_MS - 1_000);
    assert_eq!(committed(&mut c, "solo").await, 42);
    assert!(listed(&mut c).await.contains(&"solo".to_string()));
    advance(&st, 1_000);
    assert_eq!(committed(&mut c, "solo").await, -1);
    assert!(!listed(&mut c).await.contains(&"solo".to_string()));
    assert_eq!(st.b.core().consumer_groups().offsets_expired_total(), 1);
    assert_eq!(st.b.core().consumer_groups().groups_expired_total(), 1);
    // The removal was journaled: a kill -9 and a restart do not bring the
    // offset back.
    st.b.kill().await;
    let st = retention(TestBroker::on_disk(dir.path())).start().await;
    let mut c = RawClient::connect(st.b.local_addr()).await;
    assert_eq!(committed(&mut c, "solo").await, -1);
    assert!(!listed(&mut c).await.contains(&"solo".to_string()));
}

async fn heartbeat(c: &mut RawClient, member: &str, epoch: i32, topic: Uuid) -> i32 {
    let mut req = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s("g")))
        .with_member_id(s(member))
        .with_member_epoch(epoch)
        .with_rebalance_timeout_ms(if epoch == 0 { 30_000 } else { -1 });
    if epoch == 0 {
        req = req.with_subscribed_topic_names(Some(vec![TopicName(s(TOPIC))]));
    } else if epoch > 0 {
        req = req.with_topic_partitions(Some(vec![
            TopicPartitions::default()
                .with_topic_id(topic)
                .with_partitions(vec![0]),
        ]));
    }
    let r = c.send(&req, 1).await;
    assert_eq!(r.error_code, 0, "{r:?}");
    r.member_epoch
}

#[tokio::test]
async fn a_consumer_group_keeps_its_offsets_while_it_has_members() {
    let st = retention(TestBroker::in_memory()).start().await;
    let mut c = RawClient::connect(st.b.local_addr()).await;
    let topic = st.topic();
    st.advance(0);
    let epoch = heartbeat(&mut c, "m", 0, topic).await;
    let epoch = heartbeat(&mut c, "m", epoch, topic).await;
    commit(&mut c, "g", "m", epoch, 7).await;
    // Twice the retention with the member heartbeating: kept.
    for _ in 0..4 {
        advance(&st, RETENTION_MS / 2);
        heartbeat(&mut c, "m", epoch, topic).await;
    }
    assert_eq!(committed(&mut c, "g").await, 7);
    assert_eq!(st.b.core().consumer_groups().offsets_expired_total(), 0);
    // The member leaves: the offsets go a retention after the first check
    // that saw the group without members, and the group with them.
    heartbeat(&mut c, "m", -1, topic).await;
    advance(&st, 1_000);
    assert_eq!(committed(&mut c, "g").await, 7);
    advance(&st, RETENTION_MS - 1_000);
    assert_eq!(committed(&mut c, "g").await, 7);
    advance(&st, 1_000);
    assert_eq!(committed(&mut c, "g").await, -1);
    assert!(!listed(&mut c).await.contains(&"g".to_string()));
}
