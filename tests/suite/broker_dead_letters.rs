//! KIP-1191 dead-letter queues for share groups, against the embedded
//! broker over sockets: the dead-letter record Kafka writes (headers, key
//! and value with copy on or off, the partition), the delivery limit, the
//! checks that make a queue usable (topic config, prefix, auto-creation) and
//! the counted failures when it is not, the `share.version` gate, the
//! group configs, KIP-1289 abort and commit, and authorization. The kill -9
//! cases need failpoints: tests/failpoints/dead_letter_failpoints.rs.

use crate::common;

use common::broker::{Started, TestBroker};
use common::dlq::*;
use common::kip::*;
use common::sasl::{
    ADMIN, ALTER_CONFIGS, LITERAL, TOPIC, WRITE, acl, create_acls, plain, start_with,
};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::*;
use sharestream::broker::BrokerHandle;
use sharestream::broker::share::RecordState;
use sharestream::protocol::ErrorCode;
use uuid::Uuid;

const ACCEPT: i8 = 1;
const RELEASE: i8 = 2;
const REJECT: i8 = 3;
const DLQ: &str = "dlq.in";

/// A broker (tweaked by `f`) with INPUT (3 records `v0..v2` in partition
/// `p` of `partitions`), GROUP reading from the earliest offset with `DLQ`
/// as its dead-letter topic (`copy` sets copy.record.enable), DLQ created
/// with `enable` unless `None`, and "m1" holding the records.
async fn env(
    partitions: i32,
    p: i32,
    copy: bool,
    dlq_partitions: Option<(i32, Option<bool>)>,
    f: impl FnOnce(&mut sharestream::broker::BrokerConfig),
) -> (BrokerHandle, common::RawClient, Uuid) {
    let Started {
        b, mut c, topics, ..
    } = TestBroker::in_memory()
        .configure(f)
        .topic(INPUT, partitions)
        .earliest(GROUP)
        .start()
        .await;
    if let Some((n, enable)) = dlq_partitions {
        create_dlq_topic(&mut c, DLQ, n, enable).await;
    }
    let copy = if copy { "true" } else { "false" };
    let (code, msg) = set_group_configs(
        &mut c,
        GROUP,
        &[
            ("errors.deadletterqueue.topic.name", DLQ),
            ("errors.deadletterqueue.copy.record.enable", copy),
        ],
    )
    .await;
    assert_eq!(code, 0, "{msg:?}");
    produce_plain(&mut c, INPUT, p, 3).await;
    join(&mut c, "m1").await;
    let parts: Vec<i32> = (0..partitions).collect();
    assert_eq!(
        acquire(&mut c, "m1", topics[0], &parts, 0).await,
        vec![(p, 0, 2)]
    );
    (b, c, topics[0])
}

/// ShareAcknowledge of `acks` on partition `p` at share session `epoch`.
async fn ack_at(
    c: &mut common::RawClient,
    topic: Uuid,
    p: i32,
    epoch: i32,
    acks: &[(i64, i64, i8)],
) {
    let mut req = share_acknowledge_req("m1", epoch, topic, acks);
    req.topics[0].partitions[0].partition_index = p;
    let r = c.send(&req, 1).await;
    assert_eq!(r.error_code, 0);
    assert_eq!(r.responses[0].partitions[0].error_code, 0);
}

/// [`ack_at`] share session epoch 1 (the first acknowledgement).
async fn ack_on(c: &mut common::RawClient, topic: Uuid, p: i32, acks: &[(i64, i64, i8)]) {
    ack_at(c, topic, p, 1, acks).await
}

fn counts(b: &BrokerHandle) -> sharestream::broker::share_service::dead_letters::DeadLetterCounts {
    b.core()
        .shares()
        .dead_letter_counts()
        .get(GROUP)
        .copied()
        .unwrap_or_default()
}

#[tokio::test]
async fn a_rejected_record_is_written_with_kafkas_headers_key_and_value() {
    // Source partition 1 of 2, dead-letter topic of 2 partitions: the
    // record lands in partition 1 % 2.
    let (b, mut c, topic) = env(2, 1, true, Some((2, Some(true))), |_| {}).await;
    ack_on(
        &mut c,
        topic,
        1,
        &[(0, 0, ACCEPT), (1, 1, REJECT), (2, 2, ACCEPT)],
    )
    .await;
    let got = wait_for_records(&b, DLQ, 1).await;
    let (partition, r) = &got[0];
    assert_eq!(*partition, 1);
    assert_eq!(header(r, "__dlq.errors.topic").as_deref(), Some(INPUT));
    assert_eq!(header(r, "__dlq.errors.partition").as_deref(), Some("1"));
    assert_eq!(header(r, "__dlq.errors.offset").as_deref(), Some("1"));
    assert_eq!(header(r, "__dlq.errors.group").as_deref(), Some(GROUP));
    assert_eq!(
        header(r, "__dlq.errors.delivery.count").as_deref(),
        Some("1")
    );
    assert_eq!(
        header(r, "__dlq.errors.message").as_deref(),
        Some("Offset rejected by client.")
    );
    let keys: Vec<&str> = r.headers.iter().map(|h| h.key.as_str()).collect();
    assert_eq!(keys.len(), 6, "the six context headers only: {keys:?}");
    assert_eq!(r.value.as_deref(), Some(&b"v1"[..]), "copied value");
    assert_eq!(r.key, None, "the source record had no key");
    // Then ARCHIVED: the start offset moves past it.
    wait_until("SPSO past the dead letter", || {
        b.core().shares().partition_offsets(GROUP, topic, 1) == Some((3, 3))
    })
    .await;
    assert_eq!(counts(&b).records_written, 1);
    assert_eq!(counts(&b).records_failed, 0);
    let metrics = sharestream::broker::metrics_http::render(b.core());
    assert!(
        metrics.contains("sharestream_share_partition_archiving_records{group=\"g\""),
        "{metrics}"
    );
    assert!(
        metrics.contains("sharestream_share_group_dead_letter_records_total{group=\"g\"} 1"),
        "{metrics}"
    );
}

#[tokio::test]
async fn without_copy_the_dead_letter_has_headers_and_no_key_or_value() {
    let (b, mut c, topic) = env(1, 0, false, Some((1, Some(true))), |_| {}).await;
    ack_on(&mut c, topic, 0, &[(0, 2, REJECT)]).await;
    let got = wait_for_records(&b, DLQ, 3).await;
    let offsets: Vec<String> = got
        .iter()
        .map(|(_, r)| header(r, "__dlq.errors.offset").unwrap())
        .collect();
    assert_eq!(offsets, ["0", "1", "2"]);
    for (_, r) in &got {
        assert_eq!((r.key.as_ref(), r.value.as_ref()), (None, None));
    }
}

#[tokio::test]
async fn records_released_past_the_delivery_limit_are_dead_letters() {
    let (b, mut c, topic) = env(1, 0, true, Some((1, Some(true))), |_| {}).await;
    let (code, msg) =
        set_group_configs(&mut c, GROUP, &[("share.delivery.count.limit", "2")]).await;
    assert_eq!(code, 0, "{msg:?}");
    // Delivery 1 released, delivery 2 released: the limit (2) is reached.
    let r = share_acknowledge(&mut c, "m1", 1, topic, &[(0, 2, RELEASE)]).await;
    assert_eq!(r.responses[0].partitions[0].error_code, 0);
    assert_eq!(acquire(&mut c, "m1", topic, &[0], 2).await, vec![(0, 0, 2)]);
    assert!(
        records_of(&b, DLQ).is_empty(),
        "below the limit nothing is a dead letter"
    );
    let r = share_acknowledge(&mut c, "m1", 3, topic, &[(0, 2, RELEASE)]).await;
    assert_eq!(r.responses[0].partitions[0].error_code, 0);
    let got = wait_for_records(&b, DLQ, 3).await;
    for (_, r) in &got {
        assert_eq!(
            header(r, "__dlq.errors.delivery.count").as_deref(),
            Some("2")
        );
        assert_eq!(
            header(r, "__dlq.errors.message").as_deref(),
            Some("Offset delivery count exceeded the threshold.")
        );
    }
    assert_eq!(got[2].1.value.as_deref(), Some(&b"v2"[..]));
}

#[tokio::test]
async fn a_queue_that_fails_kafkas_checks_archives_counted_and_writes_nothing() {
    // The topic exists without errors.deadletterqueue.group.enable.
    let (b, mut c, topic) = env(1, 0, false, Some((1, None)), |_| {}).await;
    ack_on(&mut c, topic, 0, &[(0, 0, REJECT)]).await;
    wait_until("the failure is counted", || counts(&b).records_failed == 1).await;
    assert_eq!(info(&b, topic, 0, 1).state, RecordState::Acquired);
    assert!(
        b.core().shares().record_info(GROUP, topic, 0, 0).is_none(),
        "archived: the start offset moved past it"
    );
    assert!(records_of(&b, DLQ).is_empty());
    // A name without the prefix: refused at write time, as Kafka does.
    let (code, _) = set_group_configs(
        &mut c,
        GROUP,
        &[("errors.deadletterqueue.topic.name", "errors.in")],
    )
    .await;
    assert_eq!(code, 0);
    create_dlq_topic(&mut c, "errors.in", 1, Some(true)).await;
    ack_at(&mut c, topic, 0, 2, &[(1, 1, REJECT)]).await;
    wait_until("the prefix failure is counted", || {
        counts(&b).records_failed == 2
    })
    .await;
    assert!(records_of(&b, "errors.in").is_empty());
    // A topic that does not exist, auto-creation off.
    let (code, _) = set_group_configs(
        &mut c,
        GROUP,
        &[("errors.deadletterqueue.topic.name", "dlq.none")],
    )
    .await;
    assert_eq!(code, 0);
    ack_at(&mut c, topic, 0, 3, &[(2, 2, REJECT)]).await;
    wait_until("the missing-topic failure is counted", || {
        counts(&b).records_failed == 3
    })
    .await;
    assert!(b.core().topics().read().get("dlq.none").is_none());
    assert_eq!(counts(&b).records_written, 0);
}

#[tokio::test]
async fn auto_creation_makes_the_topic_a_dead_letter_topic() {
    let (b, mut c, topic) = env(1, 0, true, None, |c| {
        c.share_groups.dlq_auto_create_topics_enable = true;
        c.default_partitions = 3;
    })
    .await;
    ack_on(&mut c, topic, 0, &[(0, 0, REJECT), (1, 2, ACCEPT)]).await;
    let got = wait_for_records(&b, DLQ, 1).await;
    assert_eq!(got[0].0, 0, "partition 0 % 3");
    let meta = b.core().topics().read().get(DLQ).cloned().unwrap();
    assert_eq!(meta.partitions, 3);
    assert_eq!(
        meta.configs
            .get("errors.deadletterqueue.group.enable")
            .map(String::as_str),
        Some("true")
    );
    assert_eq!(
        meta.configs
            .get("message.timestamp.type")
            .map(String::as_str),
        Some("CreateTime")
    );
}

#[tokio::test]
async fn below_share_version_2_a_reject_archives_without_a_dead_letter() {
    let (b, mut c, topic) = env(1, 0, true, Some((1, Some(true))), |c| c.share_version = 1).await;
    ack_on(&mut c, topic, 0, &[(0, 0, REJECT)]).await;
    assert!(b.core().shares().record_info(GROUP, topic, 0, 0).is_none());
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert!(records_of(&b, DLQ).is_empty());
    assert_eq!(counts(&b), Default::default());
}

#[tokio::test]
async fn group_configs_are_validated_and_described_as_kafka_does() {
    let Started { b: _b, mut c, .. } = TestBroker::in_memory().start().await;
    let (code, msg) = set_group_configs(
        &mut c,
        GROUP,
        &[("errors.deadletterqueue.topic.name", "__dlq")],
    )
    .await;
    assert_eq!(code, ErrorCode::INVALID_CONFIG.0);
    assert!(msg.unwrap().contains("errors.deadletterqueue.topic.name"));
    let (code, msg) = set_group_configs(
        &mut c,
        GROUP,
        &[("errors.deadletterqueue.copy.record.enable", "yes")],
    )
    .await;
    assert_eq!(code, ErrorCode::INVALID_CONFIG.0);
    assert!(
        msg.unwrap()
            .contains("errors.deadletterqueue.copy.record.enable")
    );
    let (code, _) = set_group_configs(
        &mut c,
        GROUP,
        &[("errors.deadletterqueue.topic.name", "dlq.x")],
    )
    .await;
    assert_eq!(code, 0);
    let d = c
        .send(
            &DescribeConfigsRequest::default().with_resources(vec![
                DescribeConfigsResource::default()
                    .with_resource_type(32)
                    .with_resource_name(s(GROUP))
                    .with_configuration_keys(None),
            ]),
            4,
        )
        .await;
    let get = |n: &str| {
        d.results[0]
            .configs
            .iter()
            .find(|x| x.name.as_str() == n)
            .and_then(|x| x.value.as_ref().map(|v| v.to_string()))
    };
    assert_eq!(
        get("errors.deadletterqueue.topic.name").as_deref(),
        Some("dlq.x")
    );
    assert_eq!(
        get("errors.deadletterqueue.copy.record.enable").as_deref(),
        Some("false")
    );
    // The broker settings, under their Kafka names.
    let d = c
        .send(
            &DescribeConfigsRequest::default().with_resources(vec![
                DescribeConfigsResource::default()
                    .with_resource_type(4)
                    .with_resource_name(s("0"))
                    .with_configuration_keys(Some(vec![
                        s("errors.deadletterqueue.topic.name.prefix"),
                        s("errors.deadletterqueue.auto.create.topics.enable"),
                    ])),
            ]),
            4,
        )
        .await;
    let values: Vec<(String, Option<String>)> = d.results[0]
        .configs
        .iter()
        .map(|x| (x.name.to_string(), x.value.as_ref().map(|v| v.to_string())))
        .collect();
    assert!(
        values.contains(&(
            "errors.deadletterqueue.topic.name.prefix".into(),
            Some("dlq.".into())
        )),
        "{values:?}"
    );
    assert!(
        values.contains(&(
            "errors.deadletterqueue.auto.create.topics.enable".into(),
            Some("false".into())
        )),
        "{values:?}"
    );
}

/// KIP-1289: a REJECT staged in a transaction is a dead letter only once
/// the transaction commits; an abort brings the records back.
#[tokio::test]
async fn a_transactional_reject_reaches_the_queue_on_commit_and_not_on_abort() {
    // The abort returns the records to m1 (`acquired`, D25), which stages
    // them again at once.
    let (b, mut c, topic) = env(1, 0, true, Some((1, Some(true))), |c| {
        c.share_groups.transaction_abort_record_state =
            sharestream::broker::group::config::AbortedRecordState::Acquired;
    })
    .await;
    let epoch = heartbeat(&mut c, "m1", 1).await;
    let (pid, pe) = init_pid(&mut c, "t1", 60_000).await;
    let req = stage_req("t1", pid, pe, "m1", epoch, topic, &[(0, 0, 2, REJECT)]);
    assert_eq!(partition_errors(&stage(&mut c, &req).await), vec![(0, 0)]);
    assert_eq!(info(&b, topic, 0, 0).state, RecordState::TxPending);
    let r = end_txn(&mut c, "t1", pid, pe, false).await;
    assert_eq!(r.error_code, 0);
    wait_until("aborted: back to ACQUIRED", || {
        b.core()
            .shares()
            .record_info(GROUP, topic, 0, 0)
            .map(|i| i.state)
            == Some(RecordState::Acquired)
    })
    .await;
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert!(
        records_of(&b, DLQ).is_empty(),
        "an aborted REJECT is no dead letter"
    );
    // TV2: the next transaction runs at the next epoch.
    let pe = pe + 1;
    let req = stage_req(
        "t1",
        pid,
        pe,
        "m1",
        epoch,
        topic,
        &[(0, 1, 1, REJECT), (0, 0, 0, ACCEPT)],
    );
    let req = {
        // Offsets 0 ACCEPT, 1 REJECT (batches in offset order).
        let mut r = req;
        r.topics[0].partitions[0]
            .acknowledgement_batches
            .sort_by_key(|b| b.first_offset);
        r
    };
    assert_eq!(partition_errors(&stage(&mut c, &req).await), vec![(0, 0)]);
    let r = end_txn(&mut c, "t1", pid, pe, true).await;
    assert_eq!(r.error_code, 0);
    let got = wait_for_records(&b, DLQ, 1).await;
    assert_eq!(
        header(&got[0].1, "__dlq.errors.offset").as_deref(),
        Some("1")
    );
    assert_eq!(got[0].1.value.as_deref(), Some(&b"v1"[..]));
}

/// With the default abort record state (`available`, D25) an aborted
/// REJECT becomes AVAILABLE, and is no dead letter either.
#[tokio::test]
async fn an_aborted_transactional_reject_is_available_again_and_no_dead_letter() {
    let (b, mut c, topic) = env(1, 0, true, Some((1, Some(true))), |_| {}).await;
    let epoch = heartbeat(&mut c, "m1", 1).await;
    let (pid, pe) = init_pid(&mut c, "t1", 60_000).await;
    let req = stage_req("t1", pid, pe, "m1", epoch, topic, &[(0, 0, 2, REJECT)]);
    assert_eq!(partition_errors(&stage(&mut c, &req).await), vec![(0, 0)]);
    assert_eq!(end_txn(&mut c, "t1", pid, pe, false).await.error_code, 0);
    wait_until("aborted: AVAILABLE", || {
        (0..=2).all(|o| {
            b.core()
                .shares()
                .record_info(GROUP, topic, 0, o)
                .map(|i| i.state)
                == Some(RecordState::Available)
        })
    })
    .await;
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert!(
        records_of(&b, DLQ).is_empty(),
        "an aborted REJECT is no dead letter"
    );
}

/// Naming a dead-letter topic needs Write on it (D24), besides
/// AlterConfigs on the group.
#[tokio::test]
async fn naming_a_dead_letter_topic_needs_write_on_it() {
    let b = start_with(true, &[("alice", "pw")], |c| {
        c.security.sasl_mechanisms = vec![sharestream::protocol::sasl::SaslMechanism::Plain];
    })
    .await;
    let mut admin = plain(&b, ADMIN.0, ADMIN.1).await;
    create_acls(
        &mut admin,
        vec![acl(GROUP_RES, GROUP, LITERAL, "User:alice", ALTER_CONFIGS)],
    )
    .await;
    let mut alice = plain(&b, "alice", "pw").await;
    let (code, msg) = set_group_configs(
        &mut alice,
        GROUP,
        &[("errors.deadletterqueue.topic.name", DLQ)],
    )
    .await;
    assert_eq!(code, ErrorCode::TOPIC_AUTHORIZATION_FAILED.0, "{msg:?}");
    assert!(
        b.core()
            .shares()
            .group_config(GROUP)
            .dlq_topic_name
            .is_empty()
    );
    // Other group configs need no topic permission.
    let (code, _) = set_group_configs(
        &mut alice,
        GROUP,
        &[("share.auto.offset.reset", "earliest")],
    )
    .await;
    assert_eq!(code, 0);
    create_acls(
        &mut admin,
        vec![acl(TOPIC, DLQ, LITERAL, "User:alice", WRITE)],
    )
    .await;
    let (code, msg) = set_group_configs(
        &mut alice,
        GROUP,
        &[("errors.deadletterqueue.topic.name", DLQ)],
    )
    .await;
    assert_eq!(code, 0, "{msg:?}");
    assert_eq!(b.core().shares().group_config(GROUP).dlq_topic_name, DLQ);
    b.shutdown().await;
}

/// ACL resource type GROUP.
const GROUP_RES: i8 = 3;

/// 2000 records rejected at once are all written, one dead letter per
/// offset, none twice, and the start offset then passes them. Prints how
/// long the writer took (the figure in the D24 report):
/// `cargo test --test suite --features failpoints broker_dead_letters::a_large -- --nocapture`.
#[tokio::test]
async fn a_large_reject_is_written_once_per_offset() {
    const N: i64 = 2000;
    let Started {
        b, mut c, topics, ..
    } = TestBroker::in_memory()
        .topic(INPUT, 1)
        .earliest(GROUP)
        .start()
        .await;
    let topic = topics[0];
    create_dlq_topic(&mut c, DLQ, 1, Some(true)).await;
    let (code, _) = set_group_configs(
        &mut c,
        GROUP,
        &[
            ("errors.deadletterqueue.topic.name", DLQ),
            ("errors.deadletterqueue.copy.record.enable", "true"),
        ],
    )
    .await;
    assert_eq!(code, 0);
    produce_plain(&mut c, INPUT, 0, N as usize).await;
    join(&mut c, "m1").await;
    let mut held = 0;
    let mut epoch = 0;
    while held < N {
        for (_, f, l) in acquire(&mut c, "m1", topic, &[0], epoch).await {
            held += l - f + 1;
        }
        epoch += 1;
    }
    assert_eq!(held, N);
    let started = std::time::Instant::now();
    let r = share_acknowledge(&mut c, "m1", epoch, topic, &[(0, N - 1, REJECT)]).await;
    assert_eq!(r.responses[0].partitions[0].error_code, 0);
    let got = wait_for_records(&b, DLQ, N as usize).await;
    wait_until("SPSO past the dead letters", || {
        b.core()
            .shares()
            .partition_offsets(GROUP, topic, 0)
            .map(|o| o.0)
            == Some(N)
    })
    .await;
    let took = started.elapsed();
    let mut offsets: Vec<i64> = got
        .iter()
        .map(|(_, r)| header(r, "__dlq.errors.offset").unwrap().parse().unwrap())
        .collect();
    offsets.sort_unstable();
    offsets.dedup();
    assert_eq!(offsets.len() as i64, N, "one dead letter per offset");
    assert_eq!(counts(&b).records_written, N as u64);
    println!(
        "dead-letter writer: {N} records (copy on, in memory) written and archived in {:.1} ms",
        took.as_secs_f64() * 1000.0
    );
}

/// IncrementalAlterConfigs SET on the cluster-wide BROKER resource ("").
async fn set_broker_default(c: &mut common::RawClient, name: &str, value: &str) -> i16 {
    set_configs(c, 4, "", &[(name, value)]).await.0
}

/// The two broker settings are dynamic, as in Kafka: a cluster-wide
/// default set with IncrementalAlterConfigs takes effect at the next write.
#[tokio::test]
async fn the_broker_settings_are_dynamic() {
    // No topic, auto-creation off: the first reject is a counted failure.
    let (b, mut c, topic) = env(1, 0, false, None, |_| {}).await;
    ack_at(&mut c, topic, 0, 1, &[(0, 0, REJECT)]).await;
    wait_until("the failure is counted", || counts(&b).records_failed == 1).await;
    // Auto-creation turned on for the cluster: the next one creates it.
    let code = set_broker_default(
        &mut c,
        "errors.deadletterqueue.auto.create.topics.enable",
        "true",
    )
    .await;
    assert_eq!(code, 0);
    ack_at(&mut c, topic, 0, 2, &[(1, 1, REJECT)]).await;
    let got = wait_for_records(&b, DLQ, 1).await;
    assert_eq!(
        header(&got[0].1, "__dlq.errors.offset").as_deref(),
        Some("1")
    );
    // A prefix the topic does not have: refused at the next write.
    let code =
        set_broker_default(&mut c, "errors.deadletterqueue.topic.name.prefix", "dead.").await;
    assert_eq!(code, 0);
    ack_at(&mut c, topic, 0, 3, &[(2, 2, REJECT)]).await;
    wait_until("the prefix failure is counted", || {
        counts(&b).records_failed == 2
    })
    .await;
    assert_eq!(records_of(&b, DLQ).len(), 1);
    // The prefix rule of the static setting applies to the dynamic one
    // (Kafka 4.4 accepts "__x" here and finds out at the first write); a
    // broker resource's refusal is INVALID_REQUEST, as Kafka 4.4 answers.
    let code = set_broker_default(&mut c, "errors.deadletterqueue.topic.name.prefix", "__x").await;
    assert_eq!(code, ErrorCode::INVALID_REQUEST.0);
    let code = set_broker_default(
        &mut c,
        "errors.deadletterqueue.auto.create.topics.enable",
        "maybe",
    )
    .await;
    assert_eq!(code, ErrorCode::INVALID_REQUEST.0);
}
