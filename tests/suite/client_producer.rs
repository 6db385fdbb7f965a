//! The client layer against the embedded broker: metadata, admin, the
//! idempotent producer, transactions v2 and KIP-1289 staging refusal.

use crate::common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use common::RawClient;
use common::broker::TestBroker;
use common::records::committed_values;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::messages::{FetchRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use sharestream::broker::BrokerHandle;
use sharestream::client::admin::{AdminClient, FeatureUpgradeType, NewTopic, RESOURCE_TYPE_TOPIC};
use sharestream::client::producer::TransactionState;
use sharestream::client::producer::partitioner::partition_for_key;
use sharestream::client::{
    ClientError, ConnectionConfig, Metadata, Producer, ProducerConfig, ProducerError,
    ProducerRecord,
};
use sharestream::eos::{
    AcknowledgeType, AcknowledgementBatch, ShareGroupMetadata, TopicIdPartition,
};
use sharestream::protocol::ErrorCode;
use sharestream::protocol::records::{Compression, RecordBatchView};

/// An admin client of `b`.
fn admin_of(b: &BrokerHandle) -> AdminClient {
    AdminClient::new(vec![b.bootstrap_servers()], ConnectionConfig::default())
}

fn producer_config(b: &BrokerHandle) -> sharestream::client::config::ProducerConfigBuilder {
    ProducerConfig::builder()
        .bootstrap_servers(b.bootstrap_servers())
        .linger(Duration::from_millis(1))
        .delivery_timeout(Duration::from_secs(10))
}

async fn fetch(b: &BrokerHandle, topic: &str, partition: i32, isolation: i8) -> PartitionData {
    let mut c = RawClient::connect(b.local_addr()).await;
    let req = FetchRequest::default()
        .with_max_wait_ms(0)
        .with_min_bytes(0)
        .with_max_bytes(10 << 20)
        .with_isolation_level(isolation)
        .with_session_epoch(-1)
        .with_topics(vec![
            FetchTopic::default()
                .with_topic(TopicName(StrBytes::from_string(topic.to_string())))
                .with_partitions(vec![
                    FetchPartition::default()
                        .with_partition(partition)
                        .with_fetch_offset(0)
                        .with_partition_max_bytes(4 << 20),
                ]),
        ]);
    let mut r = c.send(&req, 12).await;
    r.responses.remove(0).partitions.remove(0)
}

#[tokio::test]
async fn admin_metadata_and_features() {
    let b = TestBroker::in_memory().start().await.b;
    let admin = admin_of(&b);
    let id = admin
        .create_topic(NewTopic::new("orders", 3))
        .await
        .unwrap();
    assert!(!id.is_nil());
    let dup = admin
        .create_topic(NewTopic::new("orders", 3))
        .await
        .unwrap_err();
    assert!(matches!(
        dup,
        ClientError::Broker {
            code: ErrorCode::TOPIC_ALREADY_EXISTS,
            ..
        }
    ));

    let cluster = admin.describe_cluster().await.unwrap();
    assert_eq!(cluster.cluster_id, "sharestream-embedded");
    assert_eq!(cluster.brokers.len(), 1);

    let md = Metadata::new(vec![b.bootstrap_servers()], ConnectionConfig::default());
    let t = md
        .wait_for_topic("orders", Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(t.topic_id, id);
    assert_eq!(t.partition_count(), 3);
    assert!(md.leader("orders", 2).is_some());
    assert_eq!(md.cluster().brokers.len(), 1);

    let configs = admin
        .describe_configs(RESOURCE_TYPE_TOPIC, "orders")
        .await
        .unwrap();
    assert!(configs.contains_key("cleanup.policy"), "{configs:?}");

    let features = admin.describe_features().await.unwrap();
    assert_eq!(features.finalized.get("transaction.version"), Some(&2));
    assert_eq!(features.finalized.get("share.version"), Some(&3));
    // UpdateFeatures: a validate-only downgrade changes nothing, a real one
    // does, and an upgrade restores the level.
    let r = admin
        .update_features(
            &[("share.version", 2, FeatureUpgradeType::SafeDowngrade)],
            true,
        )
        .await
        .unwrap();
    assert!(r["share.version"].is_ok(), "{r:?}");
    let f = admin.describe_features().await.unwrap();
    assert_eq!(f.finalized.get("share.version"), Some(&3));
    let r = admin
        .update_features(
            &[("share.version", 2, FeatureUpgradeType::SafeDowngrade)],
            false,
        )
        .await
        .unwrap();
    assert!(r["share.version"].is_ok(), "{r:?}");
    let f = admin.describe_features().await.unwrap();
    assert_eq!(f.finalized.get("share.version"), Some(&2));
    assert!(f.finalized_epoch > features.finalized_epoch);
    admin
        .update_features(&[("share.version", 3, FeatureUpgradeType::Upgrade)], false)
        .await
        .unwrap();
    assert_eq!(
        admin
            .describe_features()
            .await
            .unwrap()
            .finalized
            .get("share.version"),
        Some(&3)
    );

    // Group configs (share.auto.offset.reset) through the broker.
    use sharestream::client::admin::AlterConfigOp;
    admin
        .incremental_alter_group_config(
            "shared",
            &[(
                "share.auto.offset.reset",
                AlterConfigOp::Set("earliest".into()),
            )],
        )
        .await
        .unwrap();
    let g = admin.describe_group_config("shared").await.unwrap();
    assert_eq!(
        g.get("share.auto.offset.reset"),
        Some(&Some("earliest".to_string())),
        "{g:?}"
    );
    let e = admin
        .incremental_alter_group_config(
            "shared",
            &[(
                "share.auto.offset.reset",
                AlterConfigOp::Set("sideways".into()),
            )],
        )
        .await
        .unwrap_err();
    assert!(
        matches!(
            e,
            ClientError::Broker {
                code: ErrorCode::INVALID_CONFIG,
                ..
            }
        ),
        "{e}"
    );

    let deleted = admin.delete_topics(&["orders"]).await.unwrap();
    assert!(deleted["orders"].is_ok());
    md.invalidate("orders");
    let e = md
        .wait_for_topic("orders", Duration::from_millis(300))
        .await
        .unwrap_err();
    assert!(
        matches!(
            e,
            ClientError::Broker {
                code: ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
                ..
            }
        ),
        "{e}"
    );
    b.shutdown().await;
}

#[tokio::test]
async fn idempotent_producer_places_keys_like_java_and_never_duplicates() {
    let b = TestBroker::in_memory().start().await.b;
    let admin = admin_of(&b);
    admin.create_topic(NewTopic::new("keyed", 3)).await.unwrap();
    let p = Producer::new(
        producer_config(&b)
            .compression(Compression::Lz4)
            .batch_size(512)
            .build()
            .unwrap(),
    )
    .await
    .unwrap();
    let (pid, epoch) = p.producer_id_and_epoch();
    assert!(pid >= 0 && epoch >= 0, "InitProducerId gave {pid}/{epoch}");
    let mut futures = Vec::new();
    for i in 0..200 {
        let key = format!("key-{}", i % 17);
        futures.push(
            p.send(ProducerRecord::new("keyed", format!("v{i}")).with_key(key))
                .await,
        );
    }
    let mut per_partition: BTreeMap<i32, Vec<i64>> = BTreeMap::new();
    for (i, f) in futures.into_iter().enumerate() {
        let md = f.await.unwrap();
        let key = format!("key-{}", i % 17);
        assert_eq!(md.partition, partition_for_key(key.as_bytes(), 3), "{key}");
        per_partition
            .entry(md.partition)
            .or_default()
            .push(md.offset);
    }
    let mut total = 0;
    for (part, offsets) in &per_partition {
        let want: Vec<i64> = (0..offsets.len() as i64).collect();
        assert_eq!(
            offsets, &want,
            "partition {part}: consecutive offsets in send order"
        );
        let data = fetch(&b, "keyed", *part, 0).await;
        let batches = RecordBatchView::parse_all(data.records.clone().unwrap_or_default()).unwrap();
        let mut next_seq = 0;
        for batch in &batches {
            assert_eq!(batch.producer_id(), pid);
            assert_eq!(
                batch.base_sequence(),
                next_seq,
                "sequences contiguous per partition"
            );
            next_seq += batch.records(1 << 20).unwrap().len() as i32;
        }
        assert!(batches.len() > 1, "batch.size=512 splits partition {part}");
        total += next_seq;
    }
    assert_eq!(total, 200, "every record exactly once");

    // Unkeyed records stick to one partition per batch.
    let a = p
        .send(ProducerRecord::new("keyed", "x"))
        .await
        .await
        .unwrap();
    let c = p
        .send(ProducerRecord::new("keyed", "y"))
        .await
        .await
        .unwrap();
    assert_eq!(a.partition, c.partition);
    // An unknown partition fails its record only.
    let e = p
        .send(ProducerRecord::new("keyed", "z").with_partition(9))
        .await
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION));
    p.close().await;
    b.shutdown().await;
}

#[tokio::test]
async fn transactions_commit_abort_and_fencing() {
    let b = TestBroker::in_memory().start().await.b;
    let admin = admin_of(&b);
    admin.create_topic(NewTopic::new("tx", 1)).await.unwrap();
    let cfg = producer_config(&b)
        .transactional_id("app-1")
        .build()
        .unwrap();
    let p = Producer::new(cfg.clone()).await.unwrap();
    // Misuse is refused locally.
    assert!(matches!(
        p.begin_transaction(),
        Err(ProducerError::InvalidTxnState(_))
    ));
    assert!(
        p.send(ProducerRecord::new("tx", "early"))
            .await
            .await
            .is_err()
    );
    p.init_transactions().await.unwrap();
    let (pid, e0) = p.producer_id_and_epoch();

    p.begin_transaction().unwrap();
    let mut sends = Vec::new();
    for v in ["c1", "c2", "c3"] {
        sends.push(p.send(ProducerRecord::new("tx", v)).await);
    }
    p.commit_transaction().await.unwrap();
    for s in sends {
        s.await.unwrap();
    }
    let (pid1, e1) = p.producer_id_and_epoch();
    assert_eq!(pid1, pid);
    assert!(e1 > e0, "EndTxn v5 bumps the epoch: {e0} -> {e1}");

    p.begin_transaction().unwrap();
    p.send(ProducerRecord::new("tx", "a1")).await.await.unwrap();
    p.send(ProducerRecord::new("tx", "a2")).await.await.unwrap();
    p.abort_transaction().await.unwrap();
    assert_eq!(p.transaction_state(), TransactionState::Ready);

    p.begin_transaction().unwrap();
    p.send(ProducerRecord::new("tx", "c4")).await.await.unwrap();
    p.commit_transaction().await.unwrap();

    let data = fetch(&b, "tx", 0, 1).await;
    assert_eq!(committed_values(&data), vec!["c1", "c2", "c3", "c4"]);

    // A second producer with the same transactional.id fences the first.
    p.begin_transaction().unwrap();
    p.send(ProducerRecord::new("tx", "zombie"))
        .await
        .await
        .unwrap();
    let p2 = Producer::new(cfg).await.unwrap();
    p2.init_transactions().await.unwrap();
    let err = p.commit_transaction().await.unwrap_err();
    assert!(err.is_fatal(), "{err}");
    assert_eq!(err.code(), Some(ErrorCode::PRODUCER_FENCED), "{err}");
    assert_eq!(p.transaction_state(), TransactionState::FatalError);
    assert!(p.begin_transaction().is_err());

    p2.begin_transaction().unwrap();
    p2.send(ProducerRecord::new("tx", "c5"))
        .await
        .await
        .unwrap();
    p2.commit_transaction().await.unwrap();
    let data = fetch(&b, "tx", 0, 1).await;
    assert_eq!(committed_values(&data), vec!["c1", "c2", "c3", "c4", "c5"]);
    b.shutdown().await;
}

fn acks(
    topic_id: uuid::Uuid,
    ty: AcknowledgeType,
) -> BTreeMap<TopicIdPartition, Vec<AcknowledgementBatch>> {
    BTreeMap::from([(
        TopicIdPartition {
            topic_id,
            topic: "in".into(),
            partition: 0,
        },
        vec![AcknowledgementBatch {
            first_offset: 0,
            last_offset: 4,
            acknowledge_types: vec![ty],
        }],
    )])
}

#[tokio::test]
async fn staging_share_acks_checks_before_sending() {
    // share.version 2: the broker does not offer TxnShareAcknowledge (key 95).
    let b = TestBroker::in_memory()
        .configure(|c| c.share_version = 2)
        .start()
        .await
        .b;
    let admin = admin_of(&b);
    let topic_id = admin.create_topic(NewTopic::new("in", 1)).await.unwrap();
    let group = ShareGroupMetadata::new("g", "m-1", 1);
    let p = Producer::new(
        producer_config(&b)
            .transactional_id("stager")
            .build()
            .unwrap(),
    )
    .await
    .unwrap();
    p.init_transactions().await.unwrap();
    let e = p
        .send_share_acknowledgements_to_transaction(acks(topic_id, AcknowledgeType::Accept), &group)
        .await
        .unwrap_err();
    assert!(
        matches!(e, ProducerError::InvalidTxnState(_)),
        "no transaction open: {e}"
    );

    p.begin_transaction().unwrap();
    let e = p
        .send_share_acknowledgements_to_transaction(
            acks(topic_id, AcknowledgeType::Release),
            &group,
        )
        .await
        .unwrap_err();
    assert!(matches!(e, ProducerError::InvalidRecordState(_)), "{e}");

    let e = p
        .send_share_acknowledgements_to_transaction(acks(topic_id, AcknowledgeType::Accept), &group)
        .await
        .unwrap_err();
    assert!(
        matches!(
            e,
            ProducerError::Client(ClientError::UnsupportedVersion { api_key: 95, .. })
        ),
        "{e}"
    );
    assert!(e.is_fatal());
    assert!(
        b.core().metrics().api(95).is_none(),
        "no TxnShareAcknowledge reached the broker"
    );
    assert_eq!(p.transaction_state(), TransactionState::FatalError);
    assert_eq!(p.metrics().get("share-ack-txn-send-total"), Some(0.0));
    let _ = Arc::new(Bytes::new());
    b.shutdown().await;
}

#[tokio::test]
async fn transactions_v1_brokers_are_refused_and_unknown_topics_time_out() {
    let b = TestBroker::in_memory()
        .configure(|c| c.transaction_version = 1)
        .start()
        .await
        .b;
    let admin = admin_of(&b);
    admin.create_topic(NewTopic::new("t", 1)).await.unwrap();
    // Kafka-named properties work the same as the builder.
    let cfg = ProducerConfig::from_properties([
        ("bootstrap.servers", b.bootstrap_servers().as_str()),
        ("transactional.id", "old"),
        ("linger.ms", "0"),
        ("max.block.ms", "200"),
    ])
    .unwrap();
    let p = Producer::new(cfg).await.unwrap();
    let e = p.init_transactions().await.unwrap_err();
    assert!(
        matches!(
            e,
            ProducerError::Client(ClientError::UnsupportedVersion { .. })
        ),
        "{e}"
    );
    assert!(e.to_string().contains("transaction.version=1"), "{e}");

    let idem = Producer::new(
        producer_config(&b)
            .max_block(Duration::from_millis(200))
            .build()
            .unwrap(),
    )
    .await
    .unwrap();
    let e = idem
        .send(ProducerRecord::new("missing", "x"))
        .await
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION), "{e}");
    // The producer keeps working for known topics.
    idem.send(ProducerRecord::new("t", "y"))
        .await
        .await
        .unwrap();
    b.shutdown().await;
}

/// Regression: under load, a later Produce request could reach the wire
/// before an earlier one with batches of the same partition (the dispatcher
/// polled whole `send` futures concurrently, and a freed in-flight slot went
/// to whichever was polled first), and the broker refused it with
/// OUT_OF_ORDER_SEQUENCE_NUMBER. Many small batches over four partitions of
/// one leader, more Produce requests ready than the connection has
/// in-flight slots, on a multi-threaded runtime: every delivery succeeds and
/// each partition's log holds its records in send order with contiguous
/// sequences. (With one partition and as many connection slots as batches
/// in flight per partition, no request ever waits for a slot and the race
/// cannot happen.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotent_producer_keeps_sequence_order_with_many_batches_in_flight() {
    const N: usize = 50_000;
    const PARTITIONS: usize = 4;
    let b = TestBroker::in_memory().start().await.b;
    let admin = admin_of(&b);
    admin
        .create_topic(NewTopic::new("ordered", PARTITIONS as i32))
        .await
        .unwrap();
    let mut config = producer_config(&b)
        .linger(Duration::from_micros(100))
        .batch_size(256)
        .delivery_timeout(Duration::from_secs(60))
        .build()
        .unwrap();
    // Five batches in flight per partition but two requests per connection:
    // Produce requests queue for in-flight slots, as with many partitions on
    // one leader.
    assert_eq!(config.max_in_flight_per_partition, 5);
    config.connection.max_in_flight_requests = 2;
    let p = Producer::new(config).await.unwrap();
    let (pid, _) = p.producer_id_and_epoch();
    let mut futures = Vec::new();
    for i in 0..N {
        futures.push(
            p.send(
                ProducerRecord::new("ordered", format!("{i}"))
                    .with_partition((i % PARTITIONS) as i32),
            )
            .await,
        );
    }
    for (i, f) in futures.into_iter().enumerate() {
        match f.await {
            Ok(md) => assert_eq!(md.offset, (i / PARTITIONS) as i64, "record {i}"),
            Err(e) => panic!("delivery of record {i}: {e:?}"),
        }
    }
    p.close().await;

    let mut c = RawClient::connect(b.local_addr()).await;
    let mut batches = 0;
    for partition in 0..PARTITIONS {
        let mut offset = 0i64;
        let mut next_seq = 0i32;
        let mut values = Vec::with_capacity(N / PARTITIONS);
        while values.len() < N / PARTITIONS {
            let req = FetchRequest::default()
                .with_max_wait_ms(0)
                .with_min_bytes(0)
                .with_max_bytes(4 << 20)
                .with_session_epoch(-1)
                .with_topics(vec![
                    FetchTopic::default()
                        .with_topic(TopicName(StrBytes::from_static_str("ordered")))
                        .with_partitions(vec![
                            FetchPartition::default()
                                .with_partition(partition as i32)
                                .with_fetch_offset(offset)
                                .with_partition_max_bytes(1 << 20),
                        ]),
                ]);
            let mut r = c.send(&req, 12).await;
            let data = r.responses.remove(0).partitions.remove(0);
            let fetched = RecordBatchView::parse_all(data.records.unwrap_or_default()).unwrap();
            assert!(
                !fetched.is_empty(),
                "partition {partition} ends at {offset}"
            );
            for batch in &fetched {
                assert_eq!(batch.producer_id(), pid);
                assert_eq!(batch.base_offset(), offset);
                assert_eq!(
                    batch.base_sequence(),
                    next_seq,
                    "partition {partition}, batch at offset {offset}"
                );
                let records = batch.records(1 << 20).unwrap();
                for r in &records {
                    values.push(String::from_utf8(r.value.clone().unwrap().to_vec()).unwrap());
                }
                next_seq += records.len() as i32;
                offset += records.len() as i64;
                batches += 1;
            }
        }
        let want: Vec<String> = (0..N)
            .skip(partition)
            .step_by(PARTITIONS)
            .map(|i| i.to_string())
            .collect();
        assert!(values == want, "partition {partition}: out of send order");
    }
    assert!(batches > 400, "only {batches} batches: too few in flight");
    b.shutdown().await;
}

/// `buffer.memory` far below what is sent, with a linger that would hold
/// batches for a minute: `send` waits for room again and again, and
/// waiting sends the queued batches at once (no linger), so everything is
/// delivered, in order per partition, and every byte comes back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_buffer_memory_bounds_the_producer_without_stalling_it() {
    let b = TestBroker::in_memory().start().await.b;
    let admin = admin_of(&b);
    admin
        .create_topic(NewTopic::new("bounded", 2))
        .await
        .unwrap();
    let p = Producer::new(
        producer_config(&b)
            .linger(Duration::from_secs(60))
            .buffer_memory(2_000)
            .build()
            .unwrap(),
    )
    .await
    .unwrap();
    const N: usize = 2_000;
    let mut futures = Vec::with_capacity(N);
    for i in 0..N {
        let f = p
            .send(ProducerRecord::new("bounded", format!("{i:0>100}")).with_partition(i as i32 % 2))
            .await;
        // 121 bytes each: at most 16 held at any time.
        assert!(p.buffer_memory().available() <= 2_000);
        futures.push(f);
    }
    // The last few records linger (nobody waits for room any more).
    p.flush().await;
    for (i, f) in futures.into_iter().enumerate() {
        let md = f.await.unwrap_or_else(|e| panic!("record {i}: {e}"));
        assert_eq!(md.offset, (i / 2) as i64, "record {i}");
    }
    assert_eq!(p.buffer_memory().available(), 2_000);
    assert_eq!(p.metrics().get("buffer-exhausted-total"), Some(0.0));
    p.close().await;
    b.shutdown().await;
}
