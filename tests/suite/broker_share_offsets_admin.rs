//! Share-group offset administration over sockets (issue #17): what
//! `kafka-share-groups.sh --reset-offsets / --delete-offsets / --delete`
//! send (AlterShareGroupOffsets, DeleteShareGroupOffsets, DeleteGroups),
//! with Kafka's error codes, its authorization checks, durability across a
//! killed broker, and the share-partition start offset following
//! DeleteRecords.

use crate::common;

use common::RawClient;
use common::broker::{Started, TestBroker};
use common::kip::{self, GROUP, INPUT, s};
use common::sasl::{
    self as sasl, ADMIN, DELETE, LITERAL, READ, acl, create_acls, plain, start_with,
};
use kafka_protocol::messages::alter_share_group_offsets_request as asgo;
use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use kafka_protocol::messages::delete_share_group_offsets_request as dsgo;
use kafka_protocol::messages::describe_share_group_offsets_request as describe;
use kafka_protocol::messages::*;
use sharestream::protocol::ErrorCode;
use uuid::Uuid;

fn alter_req(group: &str, topics: &[(&str, &[(i32, i64)])]) -> AlterShareGroupOffsetsRequest {
    AlterShareGroupOffsetsRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_topics(
            topics
                .iter()
                .map(|(t, ps)| {
                    asgo::AlterShareGroupOffsetsRequestTopic::default()
                        .with_topic_name(TopicName(s(t)))
                        .with_partitions(
                            ps.iter()
                                .map(|(p, o)| {
                                    asgo::AlterShareGroupOffsetsRequestPartition::default()
                                        .with_partition_index(*p)
                                        .with_start_offset(*o)
                                })
                                .collect(),
                        )
                })
                .collect(),
        )
}

/// (topic, partition, error code) of every partition answered.
fn alter_rows(r: &AlterShareGroupOffsetsResponse) -> Vec<(String, i32, i16)> {
    r.responses
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| (t.topic_name.0.to_string(), p.partition_index, p.error_code))
        })
        .collect()
}

fn delete_req(group: &str, topics: &[&str]) -> DeleteShareGroupOffsetsRequest {
    DeleteShareGroupOffsetsRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_topics(
            topics
                .iter()
                .map(|t| {
                    dsgo::DeleteShareGroupOffsetsRequestTopic::default()
                        .with_topic_name(TopicName(s(t)))
                })
                .collect(),
        )
}

fn delete_rows(r: &DeleteShareGroupOffsetsResponse) -> Vec<(String, i16)> {
    r.responses
        .iter()
        .map(|t| (t.topic_name.0.to_string(), t.error_code))
        .collect()
}

/// The start offsets (SPSO) of the group's share partitions, -1 for none.
async fn start_offsets(c: &mut RawClient, group: &str, partitions: Vec<i32>) -> Vec<i64> {
    let r = c
        .send(
            &DescribeShareGroupOffsetsRequest::default().with_groups(vec![
                describe::DescribeShareGroupOffsetsRequestGroup::default()
                    .with_group_id(GroupId(s(group)))
                    .with_topics(Some(vec![
                        describe::DescribeShareGroupOffsetsRequestTopic::default()
                            .with_topic_name(TopicName(s(INPUT)))
                            .with_partitions(partitions),
                    ])),
            ]),
            0,
        )
        .await;
    assert_eq!(r.groups[0].error_code, 0, "{r:?}");
    r.groups[0].topics[0]
        .partitions
        .iter()
        .map(|p| p.start_offset)
        .collect()
}

async fn delete_groups(c: &mut RawClient, group: &str) -> i16 {
    let r = c
        .send(
            &DeleteGroupsRequest::default().with_groups_names(vec![GroupId(s(group))]),
            2,
        )
        .await;
    r.results[0].error_code
}

async fn list_share_groups(c: &mut RawClient) -> Vec<(String, String)> {
    let r = c
        .send(
            &ListGroupsRequest::default().with_types_filter(vec![s("share")]),
            5,
        )
        .await;
    r.groups
        .iter()
        .map(|g| (g.group_id.0.to_string(), g.group_state.to_string()))
        .collect()
}

/// A broker with INPUT (2 partitions, 10 records in partition 0) and
/// GROUP at earliest.
async fn setup(b: TestBroker) -> (Started, Uuid) {
    let mut st = b.start().await;
    let input = kip::create_topic(&mut st.c, INPUT, 2).await;
    kip::produce_plain(&mut st.c, INPUT, 0, 10).await;
    kip::earliest(&mut st.c, GROUP).await;
    (st, input)
}

#[tokio::test]
async fn reset_offsets_needs_an_empty_group_and_redelivers_from_the_new_start() {
    let (Started { b: _b, mut c, .. }, input) = setup(TestBroker::in_memory()).await;
    let v = c
        .send(
            &ApiVersionsRequest::default()
                .with_client_software_name(s("test"))
                .with_client_software_version(s("1.0")),
            3,
        )
        .await;
    for key in [91, 92] {
        let e = v
            .api_keys
            .iter()
            .find(|x| x.api_key == key)
            .expect("advertised");
        assert_eq!((e.min_version, e.max_version), (0, 0), "key {key}");
    }

    kip::join(&mut c, "m1").await;
    let got = kip::acquire(&mut c, "m1", input, &[0], 0).await;
    assert_eq!(got, vec![(0, 0, 9)]);
    let r = c.send(&alter_req(GROUP, &[(INPUT, &[(0, 4)])]), 0).await;
    assert_eq!(r.error_code, ErrorCode::NON_EMPTY_GROUP.0, "{r:?}");
    assert!(
        r.responses.is_empty(),
        "a top-level error carries no topics"
    );
    assert_eq!(start_offsets(&mut c, GROUP, vec![0]).await, vec![0]);

    kip::heartbeat(&mut c, "m1", -1).await;
    let r = c
        .send(
            &alter_req(
                GROUP,
                &[(INPUT, &[(0, 4), (1, 0), (2, 0)]), ("nope", &[(0, 0)])],
            ),
            0,
        )
        .await;
    assert_eq!(r.error_code, 0, "{r:?}");
    assert_eq!(
        alter_rows(&r),
        vec![
            (INPUT.into(), 0, 0),
            (INPUT.into(), 1, 0),
            (INPUT.into(), 2, ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.0),
            ("nope".into(), 0, ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.0),
        ]
    );
    assert_eq!(r.responses[0].topic_id, input);
    assert_eq!(r.responses[1].topic_id, Uuid::nil());
    assert_eq!(start_offsets(&mut c, GROUP, vec![0, 1]).await, vec![4, 0]);

    // A new member gets 4..=9 again, as first deliveries.
    kip::join(&mut c, "m2").await;
    let got = kip::acquire(&mut c, "m2", input, &[0], 0).await;
    assert_eq!(got, vec![(0, 4, 9)]);
    assert_eq!(kip::info(&_b, input, 0, 4).delivery_count, 1);

    // A group nobody has used yet is created by the reset (Kafka 4.4).
    let r = c.send(&alter_req("fresh", &[(INPUT, &[(0, 7)])]), 0).await;
    assert_eq!(
        (r.error_code, alter_rows(&r)),
        (0, vec![(INPUT.into(), 0, 0)])
    );
    assert!(
        list_share_groups(&mut c)
            .await
            .contains(&("fresh".into(), "Empty".into()))
    );
    assert_eq!(start_offsets(&mut c, "fresh", vec![0]).await, vec![7]);
}

#[tokio::test]
async fn delete_offsets_and_delete_group_of_a_share_group() {
    let (Started { b: _b, mut c, .. }, input) = setup(TestBroker::in_memory()).await;
    kip::join(&mut c, "m1").await;
    assert_eq!(
        kip::acquire(&mut c, "m1", input, &[0], 0).await,
        vec![(0, 0, 9)]
    );

    let r = c.send(&delete_req(GROUP, &[INPUT]), 0).await;
    assert_eq!(r.error_code, ErrorCode::NON_EMPTY_GROUP.0, "{r:?}");
    assert_eq!(
        delete_groups(&mut c, GROUP).await,
        ErrorCode::NON_EMPTY_GROUP.0
    );
    let r = c.send(&delete_req("nope", &[INPUT]), 0).await;
    assert_eq!(r.error_code, ErrorCode::GROUP_ID_NOT_FOUND.0);

    kip::heartbeat(&mut c, "m1", -1).await;
    let r = c.send(&delete_req(GROUP, &[INPUT, "nope"]), 0).await;
    assert_eq!(r.error_code, 0, "{r:?}");
    assert_eq!(
        delete_rows(&r),
        vec![
            (INPUT.into(), 0),
            ("nope".into(), ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.0)
        ]
    );
    assert_eq!(r.responses[0].topic_id, input);
    assert_eq!(start_offsets(&mut c, GROUP, vec![0]).await, vec![-1]);
    // Nothing left to delete on that topic.
    let r = c.send(&delete_req(GROUP, &[INPUT]), 0).await;
    assert_eq!(
        delete_rows(&r),
        vec![(INPUT.into(), ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.0)]
    );

    // Deleted offsets: the next member starts from share.auto.offset.reset
    // (earliest), so everything is delivered again.
    kip::join(&mut c, "m2").await;
    assert_eq!(
        kip::acquire(&mut c, "m2", input, &[0], 0).await,
        vec![(0, 0, 9)]
    );
    kip::heartbeat(&mut c, "m2", -1).await;

    assert_eq!(delete_groups(&mut c, GROUP).await, 0);
    assert!(list_share_groups(&mut c).await.is_empty());
    assert_eq!(
        delete_groups(&mut c, GROUP).await,
        ErrorCode::GROUP_ID_NOT_FOUND.0
    );
}

#[tokio::test]
async fn resets_and_deletions_survive_a_killed_broker() {
    let dir = tempfile::tempdir().unwrap();
    let (Started { b, mut c, .. }, input) = setup(TestBroker::on_disk(dir.path())).await;
    kip::join(&mut c, "m1").await;
    assert_eq!(
        kip::acquire(&mut c, "m1", input, &[0, 1], 0).await,
        vec![(0, 0, 9)]
    );
    kip::heartbeat(&mut c, "m1", -1).await;
    let r = c.send(&alter_req(GROUP, &[(INPUT, &[(0, 6)])]), 0).await;
    assert_eq!(alter_rows(&r), vec![(INPUT.into(), 0, 0)]);
    let r = c.send(&alter_req("h", &[(INPUT, &[(0, 2)])]), 0).await;
    assert_eq!(alter_rows(&r), vec![(INPUT.into(), 0, 0)]);
    let r = c.send(&delete_req("h", &[INPUT]), 0).await;
    assert_eq!(delete_rows(&r), vec![(INPUT.into(), 0)]);
    drop(c);
    b.kill().await;

    let Started { b: _b, mut c, .. } = TestBroker::on_disk(dir.path()).start().await;
    assert_eq!(start_offsets(&mut c, GROUP, vec![0]).await, vec![6]);
    assert_eq!(start_offsets(&mut c, "h", vec![0]).await, vec![-1]);
    kip::join(&mut c, "m2").await;
    assert_eq!(
        kip::acquire(&mut c, "m2", input, &[0], 0).await,
        vec![(0, 6, 9)]
    );
}

#[tokio::test]
async fn delete_records_moves_the_share_partition_start_offset() {
    let (Started { b: _b, mut c, .. }, input) = setup(TestBroker::in_memory()).await;
    kip::join(&mut c, "m1").await;
    assert_eq!(
        kip::acquire(&mut c, "m1", input, &[0], 0).await,
        vec![(0, 0, 9)]
    );
    let a = kip::share_acknowledge(&mut c, "m1", 1, input, &[(0, 2, 2)]).await;
    assert_eq!(a.error_code, 0, "{a:?}");
    assert_eq!(start_offsets(&mut c, GROUP, vec![0]).await, vec![0]);
    let r = c
        .send(
            &DeleteRecordsRequest::default()
                .with_topics(vec![
                    DeleteRecordsTopic::default()
                        .with_name(TopicName(s(INPUT)))
                        .with_partitions(vec![
                            DeleteRecordsPartition::default()
                                .with_partition_index(0)
                                .with_offset(5),
                        ]),
                ])
                .with_timeout_ms(1000),
            2,
        )
        .await;
    assert_eq!(r.topics[0].partitions[0].error_code, 0, "{r:?}");
    assert_eq!(r.topics[0].partitions[0].low_watermark, 5);
    // At once, with no fetch in between: 0..=2 (released) and 3..=4
    // (still acquired) are gone from the log.
    assert_eq!(start_offsets(&mut c, GROUP, vec![0]).await, vec![5]);
}

#[tokio::test]
async fn authorization_as_kafka_apis_checks_it() {
    let b = start_with(true, &[("bob", "pw")], |c| c.auto_create_topics = true).await;
    let mut admin = plain(&b, ADMIN.0, ADMIN.1).await;
    kip::create_topic(&mut admin, INPUT, 1).await;
    kip::produce_plain(&mut admin, INPUT, 0, 3).await;
    kip::earliest(&mut admin, GROUP).await;
    let mut bob = plain(&b, "bob", "pw").await;
    let bob_p = "User:bob";

    // Alter: Read on the group, then Read on each topic.
    let r = bob.send(&alter_req(GROUP, &[(INPUT, &[(0, 1)])]), 0).await;
    assert_eq!(r.error_code, ErrorCode::GROUP_AUTHORIZATION_FAILED.0);
    create_acls(
        &mut admin,
        vec![acl(sasl::GROUP, GROUP, LITERAL, bob_p, READ)],
    )
    .await;
    let r = bob.send(&alter_req(GROUP, &[(INPUT, &[(0, 1)])]), 0).await;
    assert_eq!(r.error_code, 0, "{r:?}");
    assert_eq!(
        alter_rows(&r),
        vec![(INPUT.into(), 0, ErrorCode::TOPIC_AUTHORIZATION_FAILED.0)]
    );
    create_acls(
        &mut admin,
        vec![acl(sasl::TOPIC, INPUT, LITERAL, bob_p, READ)],
    )
    .await;
    let r = bob.send(&alter_req(GROUP, &[(INPUT, &[(0, 1)])]), 0).await;
    assert_eq!(alter_rows(&r), vec![(INPUT.into(), 0, 0)]);

    // Delete offsets: Delete on the group (Read is not enough).
    let r = bob.send(&delete_req(GROUP, &[INPUT]), 0).await;
    assert_eq!(r.error_code, ErrorCode::GROUP_AUTHORIZATION_FAILED.0);
    create_acls(
        &mut admin,
        vec![acl(sasl::GROUP, GROUP, LITERAL, bob_p, DELETE)],
    )
    .await;
    let r = bob.send(&delete_req(GROUP, &[INPUT]), 0).await;
    assert_eq!(delete_rows(&r), vec![(INPUT.into(), 0)]);
    b.shutdown().await;
}
