//! Embedded broker over real sockets: ApiVersions, metadata and admin APIs,
//! bad input handling, metadata persistence.

use crate::common;

use common::RawClient;
use common::broker::TestBroker;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use sharestream::protocol::ErrorCode;

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

fn creatable(n: &str, partitions: i32) -> CreatableTopic {
    CreatableTopic::default()
        .with_name(name(n))
        .with_num_partitions(partitions)
        .with_replication_factor(-1)
}

async fn create(c: &mut RawClient, topics: Vec<CreatableTopic>) -> CreateTopicsResponse {
    c.send(&CreateTopicsRequest::default().with_topics(topics), 7)
        .await
}

async fn metadata(c: &mut RawClient, topics: Option<&[&str]>) -> MetadataResponse {
    let req = MetadataRequest::default().with_topics(topics.map(|t| {
        t.iter()
            .map(|n| MetadataRequestTopic::default().with_name(Some(name(n))))
            .collect()
    }));
    c.send(&req, 12).await
}

#[tokio::test]
async fn api_versions_lists_served_apis_and_features() {
    let t = TestBroker::in_memory().start().await;
    let (b, mut c) = (t.b, t.c);
    let resp = c
        .send(
            &ApiVersionsRequest::default()
                .with_client_software_name(StrBytes::from_static_str("test"))
                .with_client_software_version(StrBytes::from_static_str("1.0")),
            3,
        )
        .await;
    assert_eq!(resp.error_code, 0);
    let keys: Vec<i16> = resp.api_keys.iter().map(|k| k.api_key).collect();
    for k in [3, 10, 18, 19, 20, 32, 37, 60] {
        assert!(keys.contains(&k), "key {k} missing from {keys:?}");
    }
    let features: Vec<(String, i16)> = resp
        .finalized_features
        .iter()
        .map(|f| (f.name.to_string(), f.max_version_level))
        .collect();
    assert!(features.contains(&("share.version".to_string(), 3)));
    assert!(features.contains(&("transaction.version".to_string(), 2)));
    assert!(resp.finalized_features_epoch >= 0);
    for f in &resp.supported_features {
        assert!(f.min_version >= 1, "v3 must not report min version 0");
    }
    b.shutdown().await;
}

#[tokio::test]
async fn api_versions_at_unknown_version_gets_v0_unsupported_answer() {
    let t = TestBroker::in_memory().start().await;
    let (b, mut c) = (t.b, t.c);
    // Hand-build an ApiVersions v99 request header: key 18, version 99.
    // Header v2: key, version, correlation id, client id "x", no tagged fields.
    let mut frame = vec![0, 0, 0, 0, 0, 18, 0, 99, 0, 0, 0, 42, 0, 1, b'x', 0];
    let len = (frame.len() - 4) as i32;
    frame[..4].copy_from_slice(&len.to_be_bytes());
    c.write_raw(&frame).await;
    let mut f = c.next_frame().await.unwrap();
    // v0 response header: just the correlation id.
    assert_eq!(&f[..4], &42i32.to_be_bytes());
    let _ = f.split_to(4);
    let resp =
        <ApiVersionsRequest as sharestream::protocol::api::ApiRequest>::decode_response(&mut f, 0)
            .unwrap();
    assert_eq!(resp.error_code, ErrorCode::UNSUPPORTED_VERSION.0);
    assert!(
        resp.api_keys
            .iter()
            .any(|k| k.api_key == 18 && k.max_version == 5)
    );
    b.shutdown().await;
}

#[tokio::test]
async fn api_versions_refuses_bad_software_name() {
    let t = TestBroker::in_memory().start().await;
    let (b, mut c) = (t.b, t.c);
    let resp = c
        .send(
            &ApiVersionsRequest::default()
                .with_client_software_name(StrBytes::from_static_str("-bad"))
                .with_client_software_version(StrBytes::from_static_str("1")),
            3,
        )
        .await;
    assert_eq!(resp.error_code, ErrorCode::INVALID_REQUEST.0);
    b.shutdown().await;
}

#[tokio::test]
async fn create_describe_and_delete_topics() {
    let t = TestBroker::in_memory().start().await;
    let (b, mut c) = (t.b, t.c);
    let resp = create(
        &mut c,
        vec![
            creatable("orders", 3),
            creatable("bad name", 1),
            creatable("zero", 0),
            creatable("dup", 1),
            creatable("dup", 1),
        ],
    )
    .await;
    let code = |n: &str| {
        resp.topics
            .iter()
            .find(|t| t.name.0.as_str() == n)
            .unwrap()
            .error_code
    };
    assert_eq!(code("orders"), 0);
    assert_eq!(code("bad name"), ErrorCode::INVALID_TOPIC_EXCEPTION.0);
    assert_eq!(code("zero"), ErrorCode::INVALID_PARTITIONS.0);
    assert_eq!(code("dup"), ErrorCode::INVALID_REQUEST.0);
    let orders = resp
        .topics
        .iter()
        .find(|t| t.name.0.as_str() == "orders")
        .unwrap();
    assert!(!orders.topic_id.is_nil());
    assert_eq!(orders.num_partitions, 3);

    // Already exists.
    let again = create(&mut c, vec![creatable("orders", 3)]).await;
    assert_eq!(
        again.topics[0].error_code,
        ErrorCode::TOPIC_ALREADY_EXISTS.0
    );

    // validate_only creates nothing.
    let v = c
        .send(
            &CreateTopicsRequest::default()
                .with_topics(vec![creatable("dry", 2)])
                .with_validate_only(true),
            7,
        )
        .await;
    assert_eq!(v.topics[0].error_code, 0);
    let md = metadata(&mut c, Some(&["dry"])).await;
    assert_eq!(
        md.topics[0].error_code,
        ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.0
    );

    // Metadata: ids, leaders, controller among brokers.
    let md = metadata(&mut c, Some(&["orders"])).await;
    assert_eq!(md.topics[0].error_code, 0);
    assert_eq!(md.topics[0].topic_id, orders.topic_id);
    assert_eq!(md.topics[0].partitions.len(), 3);
    assert!(md.brokers.iter().any(|br| br.node_id == md.controller_id));
    assert_eq!(md.error_code, 0);
    for p in &md.topics[0].partitions {
        assert_eq!(p.leader_id.0, 0);
    }

    // CreatePartitions.
    let cp = c
        .send(
            &CreatePartitionsRequest::default().with_topics(vec![
                create_partitions_request::CreatePartitionsTopic::default()
                    .with_name(name("orders"))
                    .with_count(5),
                create_partitions_request::CreatePartitionsTopic::default()
                    .with_name(name("orders2"))
                    .with_count(5),
            ]),
            3,
        )
        .await;
    assert_eq!(cp.results[0].error_code, 0);
    assert_eq!(
        cp.results[1].error_code,
        ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.0
    );
    let md = metadata(&mut c, Some(&["orders"])).await;
    assert_eq!(md.topics[0].partitions.len(), 5);

    // Delete by id (v6) and by name (v5).
    let del = c
        .send(
            &DeleteTopicsRequest::default().with_topics(vec![
                DeleteTopicState::default().with_topic_id(orders.topic_id),
            ]),
            6,
        )
        .await;
    assert_eq!(del.responses[0].error_code, 0);
    let del = c
        .send(
            &DeleteTopicsRequest::default().with_topic_names(vec![name("orders")]),
            5,
        )
        .await;
    assert_eq!(
        del.responses[0].error_code,
        ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.0
    );
    b.shutdown().await;
}

#[tokio::test]
async fn auto_creation_is_off_by_default_and_configurable() {
    let t = TestBroker::in_memory().start().await;
    let (b, mut c) = (t.b, t.c);
    let md = metadata(&mut c, Some(&["auto"])).await;
    assert_eq!(
        md.topics[0].error_code,
        ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.0
    );
    b.shutdown().await;

    let t = TestBroker::in_memory()
        .configure(|c| {
            c.auto_create_topics = true;
            c.default_partitions = 2;
        })
        .start()
        .await;
    let (b, mut c) = (t.b, t.c);
    let md = metadata(&mut c, Some(&["auto"])).await;
    assert_eq!(md.topics[0].error_code, 0);
    assert_eq!(md.topics[0].partitions.len(), 2);
    // A request that forbids it is honoured.
    let req = MetadataRequest::default()
        .with_topics(Some(vec![
            MetadataRequestTopic::default().with_name(Some(name("nope"))),
        ]))
        .with_allow_auto_topic_creation(false);
    let md = c.send(&req, 12).await;
    assert_eq!(
        md.topics[0].error_code,
        ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.0
    );
    b.shutdown().await;
}

#[tokio::test]
async fn describe_configs_and_cluster() {
    let t = TestBroker::in_memory().start().await;
    let (b, mut c) = (t.b, t.c);
    let resp = create(
        &mut c,
        vec![creatable("cfg", 1).with_configs(vec![
            CreatableTopicConfig::default()
                .with_name(StrBytes::from_static_str("retention.ms"))
                .with_value(Some(StrBytes::from_static_str("1000"))),
        ])],
    )
    .await;
    assert_eq!(resp.topics[0].error_code, 0);
    let d = c
        .send(
            &DescribeConfigsRequest::default().with_resources(vec![
                DescribeConfigsResource::default()
                    .with_resource_type(2)
                    .with_resource_name(StrBytes::from_static_str("cfg"))
                    .with_configuration_keys(None),
                DescribeConfigsResource::default()
                    .with_resource_type(2)
                    .with_resource_name(StrBytes::from_static_str("missing")),
                DescribeConfigsResource::default()
                    .with_resource_type(4)
                    .with_resource_name(StrBytes::from_static_str("0"))
                    .with_configuration_keys(None),
            ]),
            4,
        )
        .await;
    let retention = d.results[0]
        .configs
        .iter()
        .find(|c| c.name.as_str() == "retention.ms")
        .unwrap();
    assert_eq!(retention.value.as_deref(), Some("1000"));
    assert_eq!(retention.config_source, 1);
    assert_eq!(
        d.results[1].error_code,
        ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.0
    );
    assert!(
        d.results[2]
            .configs
            .iter()
            .any(|c| c.name.as_str() == "message.max.bytes")
    );

    let cl = c
        .send(&DescribeClusterRequest::default().with_endpoint_type(1), 1)
        .await;
    assert_eq!(cl.error_code, 0);
    assert_eq!(cl.brokers.len(), 1);
    assert_eq!(cl.controller_id, cl.brokers[0].broker_id);
    b.shutdown().await;
}

#[tokio::test]
async fn find_coordinator_single_and_batched() {
    let t = TestBroker::in_memory().start().await;
    let (b, mut c) = (t.b, t.c);
    let single = c
        .send(
            &FindCoordinatorRequest::default()
                .with_key(StrBytes::from_static_str("txn-1"))
                .with_key_type(1),
            2,
        )
        .await;
    assert_eq!(single.error_code, 0);
    assert_eq!(single.port as u16, b.local_addr().port());
    let id = uuid::Uuid::new_v4();
    let batched = c
        .send(
            &FindCoordinatorRequest::default()
                .with_key_type(2)
                .with_coordinator_keys(vec![
                    StrBytes::from_string(format!("grp:with:colons:{id}:0")),
                    StrBytes::from_static_str("broken"),
                ]),
            6,
        )
        .await;
    assert_eq!(batched.coordinators[0].error_code, 0);
    assert_eq!(
        batched.coordinators[1].error_code,
        ErrorCode::INVALID_REQUEST.0
    );
    b.shutdown().await;
}

#[tokio::test]
async fn malformed_input_closes_only_that_connection() {
    let t = TestBroker::in_memory().start().await;
    let (b, mut good) = (t.b, t.c);
    create(&mut good, vec![creatable("keep", 1)]).await;

    // Negative length prefix.
    let mut bad = RawClient::connect(b.local_addr()).await;
    bad.write_raw(&(-1i32).to_be_bytes()).await;
    assert!(bad.is_closed().await);

    // Oversized length prefix.
    let mut bad = RawClient::connect(b.local_addr()).await;
    bad.write_raw(&i32::MAX.to_be_bytes()).await;
    assert!(bad.is_closed().await);

    // Unknown API key.
    let mut bad = RawClient::connect(b.local_addr()).await;
    bad.write_raw(&[0, 0, 0, 10, 0x7f, 0x00, 0, 0, 0, 0, 0, 1, 0, 0])
        .await;
    assert!(bad.is_closed().await);

    // Known key, garbage body (Metadata v12 with a truncated topic array).
    let mut bad = RawClient::connect(b.local_addr()).await;
    bad.write_raw(&[0, 0, 0, 13, 0, 3, 0, 12, 0, 0, 0, 1, 0, 0, 0, 0x05, 0xff])
        .await;
    assert!(bad.is_closed().await);

    // The good connection and the data are unaffected.
    let md = metadata(&mut good, Some(&["keep"])).await;
    assert_eq!(md.topics[0].error_code, 0);
    b.shutdown().await;
}

#[tokio::test]
async fn pipelined_requests_are_answered_in_order() {
    let t = TestBroker::in_memory().start().await;
    let (b, mut c) = (t.b, t.c);
    let mut ids = Vec::new();
    for _ in 0..50 {
        ids.push(c.send_only(&MetadataRequest::default(), 12).await);
    }
    for id in ids {
        let r: MetadataResponse = c.recv::<MetadataRequest>(12, id).await;
        assert_eq!(r.brokers.len(), 1);
    }
    b.shutdown().await;
}

#[tokio::test]
async fn topics_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let t = TestBroker::on_disk(dir.path()).start().await;
    let (b, mut c) = (t.b, t.c);
    let id = create(&mut c, vec![creatable("durable", 4)]).await.topics[0].topic_id;
    drop(c);
    b.shutdown().await;

    let t = TestBroker::on_disk(dir.path()).start().await;
    let (b, mut c) = (t.b, t.c);
    let md = metadata(&mut c, Some(&["durable"])).await;
    assert_eq!(md.topics[0].error_code, 0);
    assert_eq!(md.topics[0].topic_id, id);
    assert_eq!(md.topics[0].partitions.len(), 4);
    b.shutdown().await;
}

#[tokio::test]
async fn metrics_endpoint_serves_prometheus_text() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let t = TestBroker::in_memory()
        .configure(|c| c.metrics_listen = Some("127.0.0.1:0".parse().unwrap()))
        .start()
        .await;
    let (b, mut c) = (t.b, t.c);
    metadata(&mut c, None).await;
    let mut s = tokio::net::TcpStream::connect(b.metrics_addr().unwrap())
        .await
        .unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).await.unwrap();
    assert!(body.starts_with("HTTP/1.1 200 OK"), "{body}");
    assert!(
        body.contains("sharestream_requests_total{api=\"Metadata\"} 1"),
        "{body}"
    );
    assert!(
        body.contains("sharestream_request_latency_seconds{api=\"Metadata\",quantile=\"0.99\"}")
    );
    assert!(body.contains("sharestream_txn_pending_records_count 0"));
    assert!(body.contains("sharestream_transaction_partitions_count 0"));
    b.shutdown().await;
}

#[tokio::test]
async fn metadata_by_topic_id_before_v12_is_refused_with_a_decodable_name() {
    let t = TestBroker::in_memory().start().await;
    let (b, mut c) = (t.b, t.c);
    let id = create(&mut c, vec![creatable("by-id", 1)]).await.topics[0].topic_id;
    let by_id = |v: uuid::Uuid| {
        MetadataRequest::default().with_topics(Some(vec![
            MetadataRequestTopic::default()
                .with_name(None)
                .with_topic_id(v),
        ]))
    };
    // v12+: lookups by id are served; an unknown id has no name.
    let md: MetadataResponse = c.send(&by_id(id), 12).await;
    assert_eq!(md.topics[0].error_code, 0);
    assert_eq!(md.topics[0].name.as_ref().unwrap().0.as_str(), "by-id");
    let unknown: MetadataResponse = c.send(&by_id(uuid::Uuid::from_u128(7)), 12).await;
    assert_eq!(unknown.topics[0].error_code, ErrorCode::UNKNOWN_TOPIC_ID.0);
    assert!(unknown.topics[0].name.is_none());
    // v10 and v11 have a topic id field but names are not nullable there:
    // INVALID_REQUEST with an empty name, never a null one.
    for v in [10, 11] {
        let md: MetadataResponse = c.send(&by_id(id), v).await;
        assert_eq!(md.topics[0].error_code, ErrorCode::INVALID_REQUEST.0);
        assert_eq!(md.topics[0].name.as_ref().unwrap().0.as_str(), "");
    }
    b.shutdown().await;
}
