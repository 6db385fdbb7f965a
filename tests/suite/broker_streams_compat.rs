//! Broker behaviour found with Kafka Streams 4.4 and Kafka 4.4's tools
//! (issue #17, the Streams rows of docs/INTEROP.md):
//! - a changelog is a compacted topic, and a compacted topic only takes
//!   records with a key, as Kafka's log validation: a produce holding a
//!   keyless record is INVALID_RECORD, with every keyless record named by
//!   its index in the batch, and nothing of the batch is appended;
//! - Kafka 4.4's topic config `max.decompressed.message.bytes` is known,
//!   with its bounds (1 to 2147483639) and default.

use crate::common;

use bytes::Bytes;
use common::RawClient;
use common::broker::TestBroker;
use common::kip::{produce_req, s};
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::produce_response::PartitionProduceResponse;
use kafka_protocol::messages::*;
use sharestream::protocol::ErrorCode;
use sharestream::protocol::records::{BatchSpec, Compression, Record, encode_batch};

/// Kafka's INVALID_RECORD.
const INVALID_RECORD: i16 = 87;

async fn create(c: &mut RawClient, name: &str, cleanup_policy: Option<&str>) {
    let configs: Vec<(&str, &str)> = cleanup_policy
        .map(|p| vec![("cleanup.policy", p)])
        .unwrap_or_default();
    assert_eq!(create_with(c, name, &configs).await, 0, "create {name}");
}

/// CreateTopics of one partition with these configs: the topic's error.
async fn create_with(c: &mut RawClient, name: &str, configs: &[(&str, &str)]) -> i16 {
    let configs = configs
        .iter()
        .map(|(k, v)| {
            CreatableTopicConfig::default()
                .with_name(s(k))
                .with_value(Some(s(v)))
        })
        .collect();
    let r = c
        .send(
            &CreateTopicsRequest::default().with_topics(vec![
                CreatableTopic::default()
                    .with_name(TopicName(s(name)))
                    .with_num_partitions(1)
                    .with_replication_factor(-1)
                    .with_configs(configs),
            ]),
            7,
        )
        .await;
    r.topics[0].error_code
}

/// Produces one batch (`None` keys are null keys) to partition 0.
async fn produce(
    c: &mut RawClient,
    topic: &str,
    keys: &[Option<&str>],
    compression: Compression,
) -> PartitionProduceResponse {
    let records: Vec<Record> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| {
            Record::new(
                i as i32,
                1_000,
                k.map(|k| Bytes::from(k.to_string())),
                Some(Bytes::from(format!("v{i}"))),
            )
        })
        .collect();
    let spec = BatchSpec {
        compression,
        ..BatchSpec::default()
    };
    let batch = encode_batch(&spec, &records).unwrap();
    let r = c.send(&produce_req(topic, 0, batch, None), 9).await;
    r.responses[0].partition_responses[0].clone()
}

#[tokio::test]
async fn a_compacted_topic_refuses_records_without_a_key() {
    let t = TestBroker::in_memory().start().await;
    let mut c = t.c;
    create(&mut c, "changelog", Some("compact")).await;
    create(&mut c, "windowed-changelog", Some("compact,delete")).await;
    create(&mut c, "plain", None).await;

    for (topic, compression) in [
        ("changelog", Compression::None),
        ("windowed-changelog", Compression::Gzip),
    ] {
        let r = produce(
            &mut c,
            topic,
            &[Some("a"), None, Some("b"), None],
            compression,
        )
        .await;
        assert_eq!(r.error_code, INVALID_RECORD, "{topic}");
        assert_eq!(r.base_offset, -1, "{topic}");
        let indexes: Vec<i32> = r.record_errors.iter().map(|e| e.batch_index).collect();
        assert_eq!(
            indexes,
            [1, 3],
            "{topic}: every keyless record, by its index"
        );
        assert!(
            r.record_errors
                .iter()
                .all(|e| e.batch_index_error_message.is_some()),
            "{topic}"
        );
        assert!(r.error_message.is_some(), "{topic}");
        // Nothing of the refused batch was appended: the next batch, all
        // with keys, starts at offset 0.
        let ok = produce(&mut c, topic, &[Some("a"), Some("b")], compression).await;
        assert_eq!((ok.error_code, ok.base_offset), (0, 0), "{topic}");
    }

    // A topic with cleanup.policy=delete (the default) takes null keys.
    let r = produce(&mut c, "plain", &[None, None], Compression::None).await;
    assert_eq!((r.error_code, r.base_offset), (0, 0));
    assert!(r.record_errors.is_empty());
    t.b.shutdown().await;
}

#[tokio::test]
async fn max_decompressed_message_bytes_is_a_topic_config_with_kafkas_bounds() {
    const NAME: &str = "max.decompressed.message.bytes";
    let t = TestBroker::in_memory().start().await;
    let mut c = t.c;
    for (topic, value, code) in [
        ("mdm-one", "1", 0),
        ("mdm-max", "2147483639", 0),
        ("mdm-zero", "0", ErrorCode::INVALID_CONFIG.0),
        ("mdm-above", "2147483640", ErrorCode::INVALID_CONFIG.0),
        ("mdm-text", "abc", ErrorCode::INVALID_CONFIG.0),
    ] {
        assert_eq!(
            create_with(&mut c, topic, &[(NAME, value)]).await,
            code,
            "{value}"
        );
    }
    create(&mut c, "mdm-default", None).await;
    let r = c
        .send(
            &DescribeConfigsRequest::default().with_resources(vec![
                DescribeConfigsResource::default()
                    .with_resource_type(2)
                    .with_resource_name(s("mdm-default"))
                    .with_configuration_keys(None),
                DescribeConfigsResource::default()
                    .with_resource_type(2)
                    .with_resource_name(s("mdm-one"))
                    .with_configuration_keys(None),
            ]),
            4,
        )
        .await;
    let value = |i: usize| {
        r.results[i]
            .configs
            .iter()
            .find(|e| e.name.as_str() == NAME)
            .and_then(|e| e.value.as_ref().map(|v| v.to_string()))
    };
    assert_eq!(value(0).as_deref(), Some("2147483639"));
    assert_eq!(value(1).as_deref(), Some("1"));
    t.b.shutdown().await;
}
