//! Issue #17, deliverable 4, over sockets: DeleteRecords (broker and
//! AdminClient, durable in disk mode), ListOffsets by record timestamp and
//! MAX_TIMESTAMP, topic configs (every Kafka name, validation, behaviour:
//! max.message.bytes, min.insync.replicas, retention), AlterConfigs and
//! IncrementalAlterConfigs on topics and brokers, and `__consumer_offsets`
//! as an internal topic.

use crate::common;

use bytes::Bytes;
use common::RawClient;
use common::broker::TestBroker;
use common::kip::{self, produce_req, s};
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::*;
use sharestream::broker::BrokerHandle;
use sharestream::client::admin::{AdminClient, AlterConfigOp, RESOURCE_TYPE_TOPIC};
use sharestream::client::config::ConnectionConfig;
use sharestream::protocol::ErrorCode;
use sharestream::protocol::records::{BatchSpec, Record, encode_batch};

fn admin(b: &BrokerHandle) -> AdminClient {
    AdminClient::new(vec![b.bootstrap_servers()], ConnectionConfig::default())
}

async fn create_with(
    c: &mut RawClient,
    name: &str,
    partitions: i32,
    configs: &[(&str, &str)],
) -> CreateTopicsResponse {
    c.send(
        &CreateTopicsRequest::default().with_topics(vec![
            CreatableTopic::default()
                .with_name(TopicName(s(name)))
                .with_num_partitions(partitions)
                .with_replication_factor(-1)
                .with_configs(
                    configs
                        .iter()
                        .map(|(k, v)| {
                            CreatableTopicConfig::default()
                                .with_name(s(k))
                                .with_value(Some(s(v)))
                        })
                        .collect(),
                ),
        ]),
        7,
    )
    .await
}

/// Produces one batch of records with these timestamps; the produce error.
async fn produce_ts(c: &mut RawClient, topic: &str, timestamps: &[i64], acks: i16) -> i16 {
    let records: Vec<Record> = timestamps
        .iter()
        .enumerate()
        // Keyed: a compacted topic refuses records without a key.
        .map(|(i, ts)| {
            let key = Some(Bytes::from(format!("k{i}")));
            Record::new(i as i32, *ts, key, Some(Bytes::from(format!("v{i}"))))
        })
        .collect();
    let batch = encode_batch(&BatchSpec::default(), &records).unwrap();
    let r = c
        .send(&produce_req(topic, 0, batch, None).with_acks(acks), 9)
        .await;
    r.responses[0].partition_responses[0].error_code
}

/// ListOffsets of partition 0 at `timestamp`: (error, offset, timestamp).
pub(crate) async fn list_offset(
    c: &mut RawClient,
    topic: &str,
    timestamp: i64,
    v: i16,
) -> (i16, i64, i64) {
    let r = c
        .send(
            &ListOffsetsRequest::default()
                .with_replica_id(BrokerId(-1))
                .with_topics(vec![
                    ListOffsetsTopic::default()
                        .with_name(TopicName(s(topic)))
                        .with_partitions(vec![
                            ListOffsetsPartition::default()
                                .with_partition_index(0)
                                .with_timestamp(timestamp),
                        ]),
                ]),
            v,
        )
        .await;
    let p = &r.topics[0].partitions[0];
    (p.error_code, p.offset, p.timestamp)
}

/// A consumer's Fetch of `topic`'s (partition, offset, current leader
/// epoch) list, 1 MiB each.
fn fetch_req(
    topic: &str,
    parts: &[(i32, i64, i32)],
    max_wait_ms: i32,
    min_bytes: i32,
) -> FetchRequest {
    FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(max_wait_ms)
        .with_min_bytes(min_bytes)
        .with_max_bytes(1 << 20)
        .with_topics(vec![
            FetchTopic::default()
                .with_topic(TopicName(s(topic)))
                .with_partitions(
                    parts
                        .iter()
                        .map(|&(p, offset, epoch)| {
                            FetchPartition::default()
                                .with_partition(p)
                                .with_fetch_offset(offset)
                                .with_current_leader_epoch(epoch)
                                .with_partition_max_bytes(1 << 20)
                        })
                        .collect(),
                ),
        ])
}

/// Fetch of partition 0 from `offset`: (error, log start offset, bytes).
async fn fetch(c: &mut RawClient, topic: &str, offset: i64) -> (i16, i64, usize) {
    let r = c
        .send(&fetch_req(topic, &[(0, offset, -1)], 0, 0), 12)
        .await;
    let p = &r.responses[0].partitions[0];
    (
        p.error_code,
        p.log_start_offset,
        p.records.as_ref().map_or(0, |r| r.len()),
    )
}

async fn describe_topic(c: &mut RawClient, topic: &str) -> Vec<(String, Option<String>, i8, i8)> {
    let r = c
        .send(
            &DescribeConfigsRequest::default().with_resources(vec![
                DescribeConfigsResource::default()
                    .with_resource_type(2)
                    .with_resource_name(s(topic))
                    .with_configuration_keys(None),
            ]),
            4,
        )
        .await;
    assert_eq!(r.results[0].error_code, 0);
    r.results[0]
        .configs
        .iter()
        .map(|c| {
            (
                c.name.to_string(),
                c.value.as_ref().map(|v| v.to_string()),
                c.config_source,
                c.config_type,
            )
        })
        .collect()
}

fn value_of(rows: &[(String, Option<String>, i8, i8)], name: &str) -> (Option<String>, i8) {
    let r = rows
        .iter()
        .find(|r| r.0 == name)
        .unwrap_or_else(|| panic!("{name} not described"));
    (r.1.clone(), r.2)
}

#[tokio::test]
async fn delete_records_moves_the_log_start_and_fetch_and_list_offsets_honour_it() {
    let dir = tempfile::tempdir().unwrap();
    let t = TestBroker::on_disk(dir.path()).start().await;
    let (b, mut c) = (t.b, t.c);
    kip::create_topic(&mut c, "ledger", 1).await;
    assert_eq!(
        create_with(&mut c, "compacted", 1, &[("cleanup.policy", "compact")])
            .await
            .topics[0]
            .error_code,
        0
    );
    for _ in 0..3 {
        assert_eq!(produce_ts(&mut c, "ledger", &[10, 20, 30], -1).await, 0);
    }
    let a = admin(&b);
    let res = a
        .delete_records(&[
            ("ledger".to_string(), 0, 4),
            ("compacted".to_string(), 0, 0),
            ("nope".to_string(), 0, 1),
        ])
        .await
        .unwrap();
    assert_eq!(*res[&("ledger".to_string(), 0)].as_ref().unwrap(), 4);
    let code = |r: &Result<i64, sharestream::client::ClientError>| match r {
        Err(sharestream::client::ClientError::Broker { code, .. }) => *code,
        other => panic!("expected a broker error, got {other:?}"),
    };
    assert_eq!(
        code(&res[&("compacted".to_string(), 0)]),
        ErrorCode::POLICY_VIOLATION
    );
    assert_eq!(
        code(&res[&("nope".to_string(), 0)]),
        ErrorCode::UNKNOWN_TOPIC_OR_PARTITION
    );
    // Above the high watermark (9): OFFSET_OUT_OF_RANGE, nothing moves.
    let res = a
        .delete_records(&[("ledger".to_string(), 0, 10)])
        .await
        .unwrap();
    assert_eq!(
        code(&res[&("ledger".to_string(), 0)]),
        ErrorCode::OFFSET_OUT_OF_RANGE
    );
    assert_eq!(list_offset(&mut c, "ledger", -2, 8).await, (0, 4, -1));
    assert_eq!(list_offset(&mut c, "ledger", -4, 8).await.1, 4);
    // The first timestamp match at or after the start: offset 4 (ts 20).
    assert_eq!(list_offset(&mut c, "ledger", 0, 8).await, (0, 4, 20));
    // Below the start: OFFSET_OUT_OF_RANGE, and, as Kafka 4.4 answers it
    // (seen against a real node), no log start in the Fetch answer (-1):
    // the client asks ListOffsets.
    let (err, start, _) = fetch(&mut c, "ledger", 3).await;
    assert_eq!(err, ErrorCode::OFFSET_OUT_OF_RANGE.0);
    assert_eq!(start, -1);
    let (err, start, bytes) = fetch(&mut c, "ledger", 4).await;
    assert_eq!((err, start), (0, 4));
    assert!(bytes > 0);
    b.shutdown().await;

    // Durable: the start survives a restart.
    let t = TestBroker::on_disk(dir.path()).start().await;
    let (b, mut c) = (t.b, t.c);
    assert_eq!(list_offset(&mut c, "ledger", -2, 8).await, (0, 4, -1));
    assert_eq!(list_offset(&mut c, "ledger", -1, 8).await.1, 9);
    // -1 deletes up to the high watermark.
    let res = admin(&b)
        .delete_records(&[("ledger".to_string(), 0, -1)])
        .await
        .unwrap();
    assert_eq!(*res[&("ledger".to_string(), 0)].as_ref().unwrap(), 9);
    assert_eq!(fetch(&mut c, "ledger", 9).await, (0, 9, 0));
    b.shutdown().await;
}

#[tokio::test]
async fn list_offsets_finds_the_record_not_the_batch_and_the_max_timestamp() {
    let t = TestBroker::in_memory().start().await;
    let (b, mut c) = (t.b, t.c);
    kip::create_topic(&mut c, "ts", 1).await;
    assert_eq!(
        produce_ts(&mut c, "ts", &[1234, 999_999_999_999], -1).await,
        0
    );
    assert_eq!(produce_ts(&mut c, "ts", &[5_000], -1).await, 0);
    for v in [1, 4, 6, 7, 8] {
        assert_eq!(
            list_offset(&mut c, "ts", 999_999_999_999, v).await,
            (0, 1, 999_999_999_999),
            "v{v}"
        );
        assert_eq!(list_offset(&mut c, "ts", 1234, v).await, (0, 0, 1234));
        assert_eq!(list_offset(&mut c, "ts", 1235, v).await.1, 1);
        // Past every timestamp: no offset.
        assert_eq!(
            list_offset(&mut c, "ts", 1_000_000_000_000, v).await,
            (0, -1, -1)
        );
    }
    // MAX_TIMESTAMP (-3) from v7: the record holding the largest timestamp,
    // not the last one; before v7 it is not a valid query.
    assert_eq!(
        list_offset(&mut c, "ts", -3, 7).await,
        (0, 1, 999_999_999_999)
    );
    assert_eq!(
        list_offset(&mut c, "ts", -3, 6).await.0,
        ErrorCode::UNSUPPORTED_VERSION.0
    );
    kip::create_topic(&mut c, "empty", 1).await;
    assert_eq!(list_offset(&mut c, "empty", -3, 7).await, (0, -1, -1));
    b.shutdown().await;
}

#[tokio::test]
async fn topic_configs_are_validated_described_and_honoured() {
    let t = TestBroker::in_memory().start().await;
    let (b, mut c) = (t.b, t.c);
    let r = create_with(
        &mut c,
        "cfg",
        1,
        &[
            ("unclean.leader.election.enable", "true"),
            ("delete.retention.ms", "1000"),
            ("segment.ms", "60000"),
            ("max.message.bytes", "300"),
            ("min.insync.replicas", "2"),
            ("message.timestamp.after.max.ms", "1000"),
        ],
    )
    .await;
    assert_eq!(r.topics[0].error_code, 0, "{:?}", r.topics[0].error_message);
    for (k, v, why) in [
        ("min.insync.replicas", "0", "at least 1"),
        ("retention.ms", "-5", "at least -1"),
        ("cleanup.policy", "forever", "forever"),
        ("preallocate", "perhaps", "true or false"),
        ("made.up.config", "1", "Unknown topic config name"),
    ] {
        let r = create_with(&mut c, "bad", 1, &[(k, v)]).await;
        let t = &r.topics[0];
        assert_eq!(t.error_code, ErrorCode::INVALID_CONFIG.0, "{k}={v}");
        let msg = t.error_message.as_ref().unwrap().to_string();
        assert!(msg.contains(why), "{k}={v}: {msg}");
    }
    let rows = describe_topic(&mut c, "cfg").await;
    assert!(rows.len() >= 30, "every Kafka topic config: {}", rows.len());
    assert_eq!(
        value_of(&rows, "unclean.leader.election.enable"),
        (Some("true".into()), 1)
    );
    assert_eq!(
        value_of(&rows, "retention.ms"),
        (Some("604800000".into()), 5)
    );
    let types: Vec<(String, i8)> = rows.iter().map(|r| (r.0.clone(), r.3)).collect();
    assert!(types.contains(&("preallocate".into(), 1)));
    assert!(types.contains(&("retention.ms".into(), 5)));
    assert!(types.contains(&("cleanup.policy".into(), 7)));
    assert!(types.contains(&("min.cleanable.dirty.ratio".into(), 6)));

    // min.insync.replicas=2 on one node: acks=all is refused, acks=1 is not.
    assert_eq!(
        produce_ts(&mut c, "cfg", &[1], -1).await,
        ErrorCode::NOT_ENOUGH_REPLICAS.0
    );
    assert_eq!(produce_ts(&mut c, "cfg", &[1], 1).await, 0);
    // max.message.bytes=300: a bigger batch is MESSAGE_TOO_LARGE.
    let big: Vec<i64> = (0..40).collect();
    assert_eq!(
        produce_ts(&mut c, "cfg", &big, 1).await,
        ErrorCode::MESSAGE_TOO_LARGE.0
    );
    // Raised by IncrementalAlterConfigs: the same batch goes in at once.
    let a = admin(&b);
    a.incremental_alter_configs(
        RESOURCE_TYPE_TOPIC,
        "cfg",
        &[
            ("max.message.bytes", AlterConfigOp::Set("100000".into())),
            ("min.insync.replicas", AlterConfigOp::Delete),
            ("cleanup.policy", AlterConfigOp::Append("compact".into())),
        ],
    )
    .await
    .unwrap();
    assert_eq!(produce_ts(&mut c, "cfg", &big, -1).await, 0);
    let rows = describe_topic(&mut c, "cfg").await;
    assert_eq!(
        value_of(&rows, "max.message.bytes"),
        (Some("100000".into()), 1)
    );
    assert_eq!(
        value_of(&rows, "min.insync.replicas"),
        (Some("1".into()), 5)
    );
    assert_eq!(
        value_of(&rows, "cleanup.policy"),
        (Some("delete,compact".into()), 1)
    );
    // Refusals name the problem, and change nothing.
    let err = a
        .incremental_alter_configs(
            RESOURCE_TYPE_TOPIC,
            "cfg",
            &[
                ("retention.ms", AlterConfigOp::Set("1000".into())),
                ("segment.bytes", AlterConfigOp::Set("10".into())),
            ],
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&err, sharestream::client::ClientError::Broker { code, message: Some(m), .. }
            if *code == ErrorCode::INVALID_CONFIG && m.contains("segment.bytes")),
        "{err:?}"
    );
    let err = a
        .incremental_alter_configs(
            RESOURCE_TYPE_TOPIC,
            "cfg",
            &[("retention.ms", AlterConfigOp::Append("5".into()))],
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&err, sharestream::client::ClientError::Broker { code, .. } if *code == ErrorCode::INVALID_CONFIG),
        "{err:?}"
    );
    let err = a
        .incremental_alter_configs(
            RESOURCE_TYPE_TOPIC,
            "missing",
            &[("retention.ms", AlterConfigOp::Set("5".into()))],
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&err, sharestream::client::ClientError::Broker { code, .. } if *code == ErrorCode::UNKNOWN_TOPIC_OR_PARTITION),
        "{err:?}"
    );
    let rows = describe_topic(&mut c, "cfg").await;
    assert_eq!(value_of(&rows, "retention.ms").1, 5);

    // AlterConfigs (legacy) replaces the whole set.
    let r = c
        .send(
            &AlterConfigsRequest::default().with_resources(vec![
                kafka_protocol::messages::alter_configs_request::AlterConfigsResource::default()
                    .with_resource_type(2)
                    .with_resource_name(s("cfg"))
                    .with_configs(vec![
                        kafka_protocol::messages::alter_configs_request::AlterableConfig::default()
                            .with_name(s("retention.bytes"))
                            .with_value(Some(s("12345"))),
                    ]),
            ]),
            2,
        )
        .await;
    assert_eq!(r.responses[0].error_code, 0);
    let rows = describe_topic(&mut c, "cfg").await;
    assert_eq!(
        value_of(&rows, "retention.bytes"),
        (Some("12345".into()), 1)
    );
    assert_eq!(value_of(&rows, "max.message.bytes").1, 5);
    assert_eq!(value_of(&rows, "unclean.leader.election.enable").1, 5);
    b.shutdown().await;
}

/// On tokio's paused clock: the broker's retention timer (a tokio
/// interval) fires as the test's own sleeps advance the clock, without
/// wall-clock waiting.
#[tokio::test(start_paused = true)]
async fn retention_bytes_deletes_old_segments_on_the_broker_timer() {
    let t = TestBroker::in_memory()
        .configure(|c| {
            c.segment_bytes = 400;
            c.retention_check_interval_ms = 50;
        })
        .start()
        .await;
    let (b, mut c) = (t.b, t.c);
    assert_eq!(
        create_with(&mut c, "ret", 1, &[("retention.bytes", "1000")])
            .await
            .topics[0]
            .error_code,
        0
    );
    for i in 0..30 {
        assert_eq!(produce_ts(&mut c, "ret", &[i, i + 1, i + 2], -1).await, 0);
    }
    // At most 20 check intervals of the paused clock.
    let mut start = 0;
    for _ in 0..20 {
        let (err, s, _) = list_offset(&mut c, "ret", -2, 8).await;
        assert_eq!(err, 0);
        start = s;
        if start > 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(start > 0, "retention never deleted a segment");
    assert!(start < 90);
    assert_eq!(fetch(&mut c, "ret", start).await.0, 0);
    assert_eq!(
        fetch(&mut c, "ret", start - 1).await.0,
        ErrorCode::OFFSET_OUT_OF_RANGE.0
    );
    assert_eq!(list_offset(&mut c, "ret", -1, 8).await.1, 90);
    b.shutdown().await;
}

async fn alter_broker(
    c: &mut RawClient,
    name: &str,
    configs: &[(&str, i8, Option<&str>)],
) -> (i16, Option<String>) {
    let r = c
        .send(
            &IncrementalAlterConfigsRequest::default().with_resources(vec![
                AlterConfigsResource::default()
                    .with_resource_type(4)
                    .with_resource_name(s(name))
                    .with_configs(
                        configs
                            .iter()
                            .map(|(k, op, v)| {
                                AlterableConfig::default()
                                    .with_name(s(k))
                                    .with_config_operation(*op)
                                    .with_value(v.map(s))
                            })
                            .collect(),
                    ),
            ]),
            1,
        )
        .await;
    (
        r.responses[0].error_code,
        r.responses[0].error_message.as_ref().map(|m| m.to_string()),
    )
}

#[tokio::test]
async fn dynamic_broker_configs_are_accepted_reported_and_persisted() {
    let dir = tempfile::tempdir().unwrap();
    let t = TestBroker::on_disk(dir.path()).start().await;
    let (b, mut c) = (t.b, t.c);
    assert_eq!(
        alter_broker(&mut c, "0", &[("log.retention.ms", 0, Some("3600000"))])
            .await
            .0,
        0
    );
    assert_eq!(
        alter_broker(&mut c, "", &[("log.cleaner.threads", 0, Some("2"))])
            .await
            .0,
        0
    );
    let (code, msg) = alter_broker(&mut c, "0", &[("broker.id", 0, Some("7"))]).await;
    assert_eq!(code, ErrorCode::INVALID_REQUEST.0);
    assert!(msg.unwrap().contains("dynamically"));
    // A value Kafka refuses for a broker resource: INVALID_REQUEST there.
    let (code, _) = alter_broker(&mut c, "0", &[("num.io.threads", 0, Some("0"))]).await;
    assert_eq!(code, ErrorCode::INVALID_REQUEST.0);
    let (code, _) = alter_broker(&mut c, "5", &[("num.io.threads", 0, Some("4"))]).await;
    assert_eq!(code, ErrorCode::INVALID_REQUEST.0);
    b.shutdown().await;

    let b = TestBroker::on_disk(dir.path()).start().await.b;
    let (id, configs) = admin(&b).describe_broker_configs().await.unwrap();
    assert_eq!(id, 0);
    assert_eq!(configs["log.retention.ms"].as_deref(), Some("3600000"));
    assert_eq!(configs["log.cleaner.threads"].as_deref(), Some("2"));
    assert!(configs.contains_key("broker.id"));
    let mut c = RawClient::connect(b.local_addr()).await;
    let r = c
        .send(
            &DescribeConfigsRequest::default().with_resources(vec![
                DescribeConfigsResource::default()
                    .with_resource_type(4)
                    .with_resource_name(s("0"))
                    .with_configuration_keys(Some(vec![
                        s("log.retention.ms"),
                        s("log.cleaner.threads"),
                    ])),
            ]),
            4,
        )
        .await;
    let sources: Vec<(String, i8)> = r.results[0]
        .configs
        .iter()
        .map(|c| (c.name.to_string(), c.config_source))
        .collect();
    assert_eq!(
        sources,
        vec![
            ("log.cleaner.threads".to_string(), 3),
            ("log.retention.ms".to_string(), 2)
        ]
    );
    // DELETE removes the node override.
    assert_eq!(
        alter_broker(&mut c, "0", &[("log.retention.ms", 1, None)])
            .await
            .0,
        0
    );
    let (_, configs) = admin(&b).describe_broker_configs().await.unwrap();
    assert!(!configs.contains_key("log.retention.ms"));
    b.shutdown().await;
}

/// Kafka reconfigures its listeners' SASL and TLS settings at run time
/// (librdkafka's admin test sets sasl.kerberos.min.time.before.relogin on a
/// broker and expects success, as Kafka 4.4 answers); their values are
/// still checked.
#[tokio::test]
async fn listener_security_settings_are_dynamic_broker_configs() {
    let t = TestBroker::in_memory().start().await;
    let (b, mut c) = (t.b, t.c);
    for (name, value) in [
        ("sasl.kerberos.min.time.before.relogin", "58000"),
        ("sasl.enabled.mechanisms", "PLAIN,SCRAM-SHA-256"),
        ("sasl.login.refresh.window.factor", "0.8"),
        ("ssl.client.auth", "none"),
    ] {
        let (code, msg) = alter_broker(&mut c, "0", &[(name, 0, Some(value))]).await;
        assert_eq!(code, 0, "{name}={value}: {msg:?}");
    }
    let (code, _) = alter_broker(
        &mut c,
        "0",
        &[("sasl.login.refresh.window.factor", 0, Some("0.2"))],
    )
    .await;
    assert_eq!(
        code,
        ErrorCode::INVALID_REQUEST.0,
        "Kafka's range is [0.5, 1.0]"
    );
    // Per broker only, as Kafka 4.4: not as the cluster-wide default.
    let (code, msg) = alter_broker(
        &mut c,
        "",
        &[
            ("log.cleaner.threads", 0, Some("2")),
            ("ssl.client.auth", 0, Some("none")),
            ("sasl.kerberos.service.name", 0, Some("kafka")),
        ],
    )
    .await;
    assert_eq!(code, ErrorCode::INVALID_REQUEST.0);
    assert_eq!(
        msg.as_deref(),
        Some(
            "Cannot update these configs at default cluster level, broker id must be specified: \
             [sasl.kerberos.service.name, ssl.client.auth]"
        )
    );
    let (_, configs) = admin(&b).describe_broker_configs().await.unwrap();
    assert_eq!(
        configs["sasl.kerberos.min.time.before.relogin"].as_deref(),
        Some("58000")
    );
    // The refused request changed nothing, the rest of it included.
    assert!(!configs.contains_key("log.cleaner.threads"));
    b.shutdown().await;
}

async fn all(c: &mut RawClient) -> MetadataResponse {
    c.send(&MetadataRequest::default().with_topics(None), 12)
        .await
}

#[tokio::test]
async fn consumer_offsets_is_an_internal_topic_clients_can_list_and_read() {
    let t = TestBroker::in_memory().start().await;
    let (b, mut c) = (t.b, t.c);
    assert!(
        all(&mut c)
            .await
            .topics
            .iter()
            .all(|t| t.name.as_ref().unwrap().as_str() != "__consumer_offsets"),
        "created on first use, as Kafka does"
    );
    let r = c
        .send(
            &FindCoordinatorRequest::default()
                .with_key_type(0)
                .with_coordinator_keys(vec![s("some-group")]),
            4,
        )
        .await;
    assert_eq!(r.coordinators[0].error_code, 0);
    let md = all(&mut c).await;
    let t = md
        .topics
        .iter()
        .find(|t| t.name.as_ref().unwrap().as_str() == "__consumer_offsets")
        .expect("listed once a group coordinator was looked up");
    assert!(t.is_internal);
    assert_eq!(t.error_code, 0);
    assert!(!t.topic_id.is_nil());
    assert_eq!(t.partitions.len(), 50);
    // A client that then reads it gets an empty, valid partition.
    assert_eq!(
        list_offset(&mut c, "__consumer_offsets", -1, 8).await,
        (0, 0, -1)
    );
    assert_eq!(fetch(&mut c, "__consumer_offsets", 0).await, (0, 0, 0));
    // Clients may not write to it, nor delete its records.
    assert_eq!(
        produce_ts(&mut c, "__consumer_offsets", &[1], -1).await,
        ErrorCode::INVALID_TOPIC_EXCEPTION.0
    );
    let res = admin(&b)
        .delete_records(&[("__consumer_offsets".to_string(), 0, 0)])
        .await
        .unwrap();
    assert!(matches!(
        &res[&("__consumer_offsets".to_string(), 0)],
        Err(sharestream::client::ClientError::Broker { code, .. })
            if *code == ErrorCode::INVALID_TOPIC_EXCEPTION
    ));
    // Its configs are Kafka's for the offsets topic.
    let rows = describe_topic(&mut c, "__consumer_offsets").await;
    assert_eq!(
        value_of(&rows, "cleanup.policy"),
        (Some("compact".into()), 1)
    );
    // Named user topics are not internal.
    kip::create_topic(&mut c, "user", 1).await;
    let md = all(&mut c).await;
    let user = md
        .topics
        .iter()
        .find(|t| t.name.as_ref().unwrap().as_str() == "user")
        .unwrap();
    assert!(!user.is_internal);
    b.shutdown().await;
}

async fn describe_txn(c: &mut RawClient, ids: &[&str]) -> DescribeTransactionsResponse {
    c.send(
        &DescribeTransactionsRequest::default()
            .with_transactional_ids(ids.iter().map(|i| TransactionalId(s(i))).collect()),
        0,
    )
    .await
}

async fn list_txns(
    c: &mut RawClient,
    states: &[&str],
    pids: &[i64],
    duration: i64,
) -> ListTransactionsResponse {
    c.send(
        &ListTransactionsRequest::default()
            .with_state_filters(states.iter().map(|x| s(x)).collect())
            .with_producer_id_filters(pids.iter().map(|p| ProducerId(*p)).collect())
            .with_duration_filter(duration),
        1,
    )
    .await
}

async fn describe_producers(
    c: &mut RawClient,
    topic: &str,
) -> kafka_protocol::messages::describe_producers_response::PartitionResponse {
    let r = c
        .send(
            &DescribeProducersRequest::default().with_topics(vec![
                kafka_protocol::messages::describe_producers_request::TopicRequest::default()
                    .with_name(TopicName(s(topic)))
                    .with_partition_indexes(vec![0]),
            ]),
            0,
        )
        .await;
    r.topics[0].partitions[0].clone()
}

#[tokio::test]
async fn transactions_and_producers_are_described_and_listed() {
    let t = TestBroker::in_memory().start().await;
    let (b, mut c) = (t.b, t.c);
    kip::create_topic(&mut c, "out", 1).await;
    kip::produce_plain(&mut c, "out", 0, 2).await;
    let (pid, epoch) = kip::init_pid(&mut c, "tx-a", 60_000).await;
    let records: Vec<Record> = (0..3)
        .map(|i| Record::new(i, 7, None, Some(Bytes::from_static(b"t"))))
        .collect();
    let batch = encode_batch(
        &BatchSpec {
            producer_id: pid,
            producer_epoch: epoch,
            base_sequence: 0,
            transactional: true,
            ..BatchSpec::default()
        },
        &records,
    )
    .unwrap();
    // Produce v12 registers the partition in the transaction (TV2).
    let r = c
        .send(&produce_req("out", 0, batch, Some("tx-a")), 12)
        .await;
    assert_eq!(r.responses[0].partition_responses[0].error_code, 0);

    let p = describe_producers(&mut c, "out").await;
    assert_eq!(p.error_code, 0);
    assert_eq!(p.active_producers.len(), 1, "plain producers have no id");
    let st = &p.active_producers[0];
    assert_eq!(st.producer_id.0, pid);
    assert_eq!(st.producer_epoch, epoch as i32);
    assert_eq!(st.last_sequence, 2);
    assert_eq!(st.current_txn_start_offset, 2);
    assert_eq!(st.last_timestamp, 7);
    let missing = {
        let r = c
            .send(
                &DescribeProducersRequest::default().with_topics(vec![
                    kafka_protocol::messages::describe_producers_request::TopicRequest::default()
                        .with_name(TopicName(s("out")))
                        .with_partition_indexes(vec![3]),
                ]),
                0,
            )
            .await;
        r.topics[0].partitions[0].error_code
    };
    assert_eq!(missing, ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.0);

    let d = describe_txn(&mut c, &["tx-a", "tx-none"]).await;
    let a = &d.transaction_states[0];
    assert_eq!(a.error_code, 0);
    assert_eq!(a.transaction_state.as_str(), "Ongoing");
    assert_eq!(a.producer_id.0, pid);
    assert_eq!(a.producer_epoch, epoch);
    assert_eq!(a.transaction_timeout_ms, 60_000);
    assert!(a.transaction_start_time_ms > 0);
    assert_eq!(a.topics.len(), 1);
    assert_eq!(a.topics[0].topic.as_str(), "out");
    assert_eq!(a.topics[0].partitions, vec![0]);
    assert_eq!(
        d.transaction_states[1].error_code,
        ErrorCode::TRANSACTIONAL_ID_NOT_FOUND.0
    );

    let ids = |r: &ListTransactionsResponse| -> Vec<(String, i64, String)> {
        r.transaction_states
            .iter()
            .map(|t| {
                (
                    t.transactional_id.to_string(),
                    t.producer_id.0,
                    t.transaction_state.to_string(),
                )
            })
            .collect()
    };
    let all = list_txns(&mut c, &[], &[], -1).await;
    assert_eq!(all.error_code, 0);
    assert_eq!(ids(&all), vec![("tx-a".into(), pid, "Ongoing".into())]);
    let r = list_txns(&mut c, &["Ongoing", "Bogus"], &[], -1).await;
    assert_eq!(ids(&r).len(), 1);
    assert_eq!(
        r.unknown_state_filters
            .iter()
            .map(|x| x.to_string())
            .collect::<Vec<_>>(),
        vec!["Bogus".to_string()]
    );
    assert!(ids(&list_txns(&mut c, &["CompleteCommit"], &[], -1).await).is_empty());
    assert!(ids(&list_txns(&mut c, &[], &[pid + 1], -1).await).is_empty());
    assert_eq!(ids(&list_txns(&mut c, &[], &[pid], 0).await).len(), 1);
    assert!(ids(&list_txns(&mut c, &[], &[], 3_600_000).await).is_empty());

    // Timestamp lookups: read_committed does not see the open transaction's
    // records (offsets 2-4, timestamp 7), read_uncommitted does.
    let lookup = |isolation: i8| {
        ListOffsetsRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_isolation_level(isolation)
            .with_topics(vec![
                ListOffsetsTopic::default()
                    .with_name(TopicName(s("out")))
                    .with_partitions(vec![
                        ListOffsetsPartition::default()
                            .with_partition_index(0)
                            .with_timestamp(5),
                    ]),
            ])
    };
    let r = c.send(&lookup(1), 8).await;
    assert_eq!(r.topics[0].partitions[0].offset, -1);
    let r = c.send(&lookup(0), 8).await;
    assert_eq!(r.topics[0].partitions[0].offset, 2);
    assert_eq!(r.topics[0].partitions[0].timestamp, 7);

    assert_eq!(
        kip::end_txn(&mut c, "tx-a", pid, epoch, true)
            .await
            .error_code,
        0
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let d = describe_txn(&mut c, &["tx-a"]).await;
        let st = d.transaction_states[0].transaction_state.to_string();
        if st == "CompleteCommit" {
            assert!(d.transaction_states[0].topics.is_empty());
            break;
        }
        assert!(std::time::Instant::now() < deadline, "stuck in {st}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let p = describe_producers(&mut c, "out").await;
    assert_eq!(p.active_producers[0].current_txn_start_offset, -1);
    assert_eq!(
        ids(&list_txns(&mut c, &["CompleteCommit"], &[], -1).await).len(),
        1
    );
    b.shutdown().await;
}

async fn log_dirs(
    c: &mut RawClient,
    topics: Option<Vec<(&str, Vec<i32>)>>,
    version: i16,
) -> DescribeLogDirsResponse {
    use kafka_protocol::messages::describe_log_dirs_request::DescribableLogDirTopic;
    c.send(
        &DescribeLogDirsRequest::default().with_topics(topics.map(|ts| {
            ts.into_iter()
                .map(|(t, ps)| {
                    DescribableLogDirTopic::default()
                        .with_topic(TopicName(s(t)))
                        .with_partitions(ps)
                })
                .collect()
        })),
        version,
    )
    .await
}

/// (topic, partition, size) of every partition in the answer's one directory.
fn sizes(r: &DescribeLogDirsResponse) -> Vec<(String, i32, i64)> {
    assert_eq!(r.results.len(), 1, "one log directory");
    let mut v: Vec<(String, i32, i64)> = r.results[0]
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| {
                assert_eq!((p.offset_lag, p.is_future_key), (0, false));
                (t.name.0.to_string(), p.partition_index, p.partition_size)
            })
        })
        .collect();
    v.sort();
    v
}

#[tokio::test]
async fn log_dirs_give_each_partitions_size_in_the_data_directory() {
    let dir = tempfile::tempdir().unwrap();
    let t = TestBroker::on_disk(dir.path()).start().await;
    let mut c = t.c;
    kip::create_topic(&mut c, "sized", 2).await;
    kip::create_topic(&mut c, "other", 1).await;
    kip::produce_plain(&mut c, "sized", 0, 10).await;

    // Every partition (no topic list), v4: the directory and its volume.
    let all = log_dirs(&mut c, None, 4).await;
    assert_eq!(all.error_code, 0);
    let d = &all.results[0];
    assert_eq!(d.error_code, 0);
    assert_eq!(
        d.log_dir.as_str(),
        std::path::absolute(dir.path())
            .unwrap()
            .display()
            .to_string()
    );
    assert!(
        d.total_bytes > 0 && d.usable_bytes >= 0 && d.usable_bytes <= d.total_bytes,
        "{d:?}"
    );
    let s_all = sizes(&all);
    let of = |v: &[(String, i32, i64)], t: &str, p: i32| {
        v.iter().find(|(n, q, _)| n == t && *q == p).map(|x| x.2)
    };
    assert!(of(&s_all, "sized", 0).unwrap() > 0, "{s_all:?}");
    assert_eq!(of(&s_all, "sized", 1), Some(0));
    assert_eq!(of(&s_all, "other", 0), Some(0));

    // A list: only what exists of it, each partition once.
    let some = log_dirs(
        &mut c,
        Some(vec![("sized", vec![0, 0, 7]), ("missing", vec![0])]),
        2,
    )
    .await;
    assert_eq!(
        sizes(&some),
        vec![("sized".to_string(), 0, of(&s_all, "sized", 0).unwrap())]
    );
    // Below v4 the volume's sizes are not carried.
    assert_eq!(
        (some.results[0].total_bytes, some.results[0].usable_bytes),
        (-1, -1)
    );

    // More records, a larger size.
    kip::produce_plain(&mut c, "sized", 0, 10).await;
    let later = log_dirs(&mut c, Some(vec![("sized", vec![0])]), 1).await;
    assert!(sizes(&later)[0].2 > of(&s_all, "sized", 0).unwrap());
}

#[tokio::test]
async fn log_dirs_of_a_broker_in_memory_name_no_volume() {
    let t = TestBroker::in_memory().start().await;
    let mut c = t.c;
    kip::create_topic(&mut c, "mem", 1).await;
    kip::produce_plain(&mut c, "mem", 0, 3).await;
    let r = log_dirs(&mut c, Some(vec![("mem", vec![0])]), 4).await;
    assert_eq!(r.results[0].log_dir.as_str(), "memory");
    assert_eq!(
        (r.results[0].total_bytes, r.results[0].usable_bytes),
        (-1, -1)
    );
    assert!(sizes(&r)[0].2 > 0);
}

#[tokio::test]
async fn elections_and_reassignments_on_one_node_change_nothing() {
    use kafka_protocol::messages::alter_partition_reassignments_request::{
        ReassignablePartition, ReassignableTopic,
    };
    use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
    let t = TestBroker::in_memory().start().await;
    let (b, mut c) = (t.b, t.c);
    kip::create_topic(&mut c, "ra", 2).await;
    let node = b.core().node_id();
    let elect = |ty: i8, parts: Option<Vec<i32>>| {
        ElectLeadersRequest::default()
            .with_election_type(ty)
            .with_topic_partitions(parts.map(|ps| {
                vec![
                    TopicPartitions::default()
                        .with_topic(TopicName(s("ra")))
                        .with_partitions(ps),
                ]
            }))
    };
    // Every partition: none needs an election, so no result.
    let all = c.send(&elect(0, None), 2).await;
    assert_eq!((all.error_code, all.replica_election_results.len()), (0, 0));
    // Named, v0 (no top-level error code) to v2.
    for v in 0..=2 {
        let r = c.send(&elect(0, Some(vec![0, 1, 5])), v).await;
        let codes: Vec<i16> = r.replica_election_results[0]
            .partition_result
            .iter()
            .map(|p| p.error_code)
            .collect();
        let (nn, unknown) = (
            ErrorCode::ELECTION_NOT_NEEDED.0,
            ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.0,
        );
        assert_eq!(codes, vec![nn, nn, unknown], "v{v}");
    }
    // An election type that does not exist.
    let bad = c.send(&elect(5, Some(vec![0])), 2).await;
    assert_eq!(bad.error_code, ErrorCode::INVALID_REQUEST.0);

    let reassign = |flag: bool, replicas: Option<Vec<i32>>| {
        AlterPartitionReassignmentsRequest::default()
            .with_allow_replication_factor_change(flag)
            .with_topics(vec![
                ReassignableTopic::default()
                    .with_name(TopicName(s("ra")))
                    .with_partitions(vec![
                        ReassignablePartition::default()
                            .with_partition_index(1)
                            .with_replicas(replicas.map(|r| r.into_iter().map(BrokerId).collect())),
                    ]),
            ])
    };
    // v1 echoes the flag; v0 has none (it reads as true).
    let r1 = c.send(&reassign(false, Some(vec![node])), 1).await;
    assert!(!r1.allow_replication_factor_change);
    assert_eq!(r1.responses[0].partitions[0].error_code, 0);
    let r0 = c.send(&reassign(true, Some(vec![])), 0).await;
    assert!(r0.allow_replication_factor_change);
    assert_eq!(
        r0.responses[0].partitions[0].error_code,
        ErrorCode::INVALID_REPLICA_ASSIGNMENT.0
    );
    let cancel = c.send(&reassign(true, None), 1).await;
    assert_eq!(
        cancel.responses[0].partitions[0].error_code,
        ErrorCode::NO_REASSIGNMENT_IN_PROGRESS.0
    );
    // Nothing is listed, whatever is asked.
    let listed = c
        .send(&ListPartitionReassignmentsRequest::default(), 0)
        .await;
    assert_eq!((listed.error_code, listed.topics.len()), (0, 0));
    // The topic is as it was.
    assert_eq!(b.core().topics().read().get("ra").unwrap().partitions, 2);
}

#[tokio::test]
async fn offsets_for_leader_epoch_answer_from_the_one_epoch_of_each_log() {
    use kafka_protocol::messages::offset_for_leader_epoch_request::{
        OffsetForLeaderPartition, OffsetForLeaderTopic,
    };
    let t = TestBroker::in_memory().start().await;
    let (b, mut c) = (t.b, t.c);
    kip::create_topic(&mut c, "ep", 2).await;
    kip::produce_plain(&mut c, "ep", 0, 7).await;
    admin(&b)
        .delete_records(&[("ep".to_string(), 0, 3)])
        .await
        .unwrap();
    let ask = |topic: &str, parts: &[(i32, i32, i32)]| {
        OffsetForLeaderEpochRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_topics(vec![
                OffsetForLeaderTopic::default()
                    .with_topic(TopicName(s(topic)))
                    .with_partitions(
                        parts
                            .iter()
                            .map(|&(p, current, epoch)| {
                                OffsetForLeaderPartition::default()
                                    .with_partition(p)
                                    .with_current_leader_epoch(current)
                                    .with_leader_epoch(epoch)
                            })
                            .collect(),
                    ),
            ])
    };
    let answers = |r: &OffsetForLeaderEpochResponse| -> Vec<(i32, i16, i32, i64)> {
        r.topics[0]
            .partitions
            .iter()
            .map(|p| (p.partition, p.error_code, p.leader_epoch, p.end_offset))
            .collect()
    };
    let (fenced, unknown_epoch, unknown) = (
        ErrorCode::FENCED_LEADER_EPOCH.0,
        ErrorCode::UNKNOWN_LEADER_EPOCH.0,
        ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.0,
    );
    for v in 2..=4 {
        let r = c
            .send(
                &ask(
                    "ep",
                    &[
                        (0, 0, 0),   // the current epoch: the log end
                        (1, -1, 0),  // an empty partition, no check
                        (0, 0, 4),   // an epoch the log never had
                        (0, -1, -1), // undefined
                        (0, 0, -5),  // older than any: the log start
                        (0, -3, 0),  // the client's leader is older
                        (0, 2, 0),   // the client knows a newer leader
                        (9, 0, 0),   // no such partition
                    ],
                ),
                v,
            )
            .await;
        assert_eq!(
            answers(&r),
            vec![
                (0, 0, 0, 7),
                (1, 0, 0, 0),
                (0, 0, -1, -1),
                (0, 0, -1, -1),
                (0, 0, -5, 3),
                (0, fenced, -1, -1),
                (0, unknown_epoch, -1, -1),
                (9, unknown, -1, -1),
            ],
            "v{v}"
        );
    }
    let none = c.send(&ask("nope", &[(0, 0, 0)]), 4).await;
    assert_eq!(answers(&none), vec![(0, unknown, -1, -1)]);

    // Fetch (v9+) and ListOffsets (v4+) check the client's leader epoch
    // the same way; -1 and 0 read.
    let fetch_at = |epoch: i32| fetch_req("ep", &[(0, 3, epoch)], 0, 0);
    for (epoch, code) in [(-1, 0), (0, 0), (-2, fenced), (1, unknown_epoch)] {
        let r = c.send(&fetch_at(epoch), 12).await;
        let p = &r.responses[0].partitions[0];
        assert_eq!(p.error_code, code, "fetch, epoch {epoch}");
        assert_eq!(p.records.as_ref().is_some_and(|r| !r.is_empty()), code == 0);
    }
    // v8 has no epoch field: any value set is not sent.
    let r = c.send(&fetch_at(-1), 8).await;
    assert_eq!(r.responses[0].partitions[0].error_code, 0);
    let list_at = |epoch: i32| {
        ListOffsetsRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_topics(vec![
                ListOffsetsTopic::default()
                    .with_name(TopicName(s("ep")))
                    .with_partitions(vec![
                        ListOffsetsPartition::default()
                            .with_partition_index(0)
                            .with_current_leader_epoch(epoch)
                            .with_timestamp(-1),
                    ]),
            ])
    };
    for (epoch, code) in [(-1, 0), (0, 0), (-2, fenced), (1, unknown_epoch)] {
        let r = c.send(&list_at(epoch), 8).await;
        let p = &r.topics[0].partitions[0];
        assert_eq!(p.error_code, code, "list offsets, epoch {epoch}");
        if code == 0 {
            assert_eq!(p.offset, 7);
        }
    }
    // Versions 0 and 1 are gone, as in Kafka 4.0.
    let versions = c.send(&ApiVersionsRequest::default(), 2).await;
    let key = versions.api_keys.iter().find(|k| k.api_key == 23).unwrap();
    assert_eq!((key.min_version, key.max_version), (2, 4));
    b.shutdown().await;
}

/// As Kafka's broker: a fetch in which a partition could not be read (here
/// an offset out of range) is answered at once, not after `max_wait_ms`,
/// though another partition has nothing yet; an unknown partition does not
/// end the wait.
#[tokio::test]
async fn a_fetch_with_a_partition_read_error_is_answered_without_waiting() {
    let t = TestBroker::in_memory().start().await;
    let (b, mut c) = (t.b, t.c);
    kip::create_topic(&mut c, "fe", 2).await;
    kip::produce_plain(&mut c, "fe", 1, 2).await;
    // A wait far beyond the test's own bound below.
    let req = |parts: &[(i32, i64, i32)]| fetch_req("fe", parts, 120_000, 1);
    // Partition 0 is empty (at its end), partition 1 is asked past its end.
    let r = tokio::time::timeout(
        std::time::Duration::from_secs(60),
        c.send(&req(&[(0, 0, -1), (1, 9, -1)]), 12),
    )
    .await
    .expect("the fetch waited for max_wait_ms despite a read error");
    let codes: Vec<i16> = r.responses[0]
        .partitions
        .iter()
        .map(|p| p.error_code)
        .collect();
    assert_eq!(codes, vec![0, ErrorCode::OFFSET_OUT_OF_RANGE.0]);
    // An unknown partition beside an empty one: the fetch waits, and a
    // record produced meanwhile to the empty one answers it.
    let mut producer = RawClient::connect(b.local_addr()).await;
    let waiting = tokio::spawn(async move { c.send(&req(&[(0, 0, -1), (9, 0, -1)]), 12).await });
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    kip::produce_plain(&mut producer, "fe", 0, 1).await;
    let r = tokio::time::timeout(std::time::Duration::from_secs(60), waiting)
        .await
        .expect("the fetch did not end when data arrived")
        .unwrap();
    let p0 = &r.responses[0].partitions[0];
    assert_eq!(p0.error_code, 0);
    assert!(
        p0.records.as_ref().is_some_and(|r| !r.is_empty()),
        "an unknown partition ended the wait before the record came"
    );
    b.shutdown().await;
}
