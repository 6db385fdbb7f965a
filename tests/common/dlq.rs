//! KIP-1191 helpers: group and topic configs of a dead-letter queue, and
//! the records of a dead-letter topic read straight from its logs.
#![allow(dead_code)]

use std::time::Duration;

use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::*;
use sharestream::broker::BrokerHandle;
use sharestream::protocol::records::{DEFAULT_MAX_DECOMPRESSED, Record, RecordBatchView};

use super::RawClient;
use super::kip::s;

/// IncrementalAlterConfigs SET of `configs` on GROUP resource `group`;
/// returns (error code, message).
pub async fn set_group_configs(
    c: &mut RawClient,
    group: &str,
    configs: &[(&str, &str)],
) -> (i16, Option<String>) {
    set_configs(c, 32, group, configs).await
}

/// IncrementalAlterConfigs SET of `configs` on the resource of
/// `resource_type` (32 GROUP, 4 BROKER, 2 TOPIC) named `name`; returns
/// (error code, message).
pub async fn set_configs(
    c: &mut RawClient,
    resource_type: i8,
    name: &str,
    configs: &[(&str, &str)],
) -> (i16, Option<String>) {
    let r = c
        .send(
            &IncrementalAlterConfigsRequest::default().with_resources(vec![
                AlterConfigsResource::default()
                    .with_resource_type(resource_type)
                    .with_resource_name(s(name))
                    .with_configs(
                        configs
                            .iter()
                            .map(|(n, v)| {
                                AlterableConfig::default()
                                    .with_name(s(n))
                                    .with_config_operation(0)
                                    .with_value(Some(s(v)))
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

/// Creates `name` with `partitions`, `errors.deadletterqueue.group.enable`
/// set to `enable` (left out when `None`).
pub async fn create_dlq_topic(
    c: &mut RawClient,
    name: &str,
    partitions: i32,
    enable: Option<bool>,
) {
    let configs = enable
        .map(|e| {
            vec![
                CreatableTopicConfig::default()
                    .with_name(s("errors.deadletterqueue.group.enable"))
                    .with_value(Some(s(if e { "true" } else { "false" }))),
            ]
        })
        .unwrap_or_default();
    let r = c
        .send(
            &CreateTopicsRequest::default().with_topics(vec![
                CreatableTopic::default()
                    .with_name(TopicName(s(name)))
                    .with_num_partitions(partitions)
                    .with_replication_factor(-1)
                    .with_configs(configs),
            ]),
            7,
        )
        .await;
    assert_eq!(r.topics[0].error_code, 0, "create {name}");
}

/// Every record of every partition of `topic`, as (partition, record), in
/// partition then offset order; empty if the topic does not exist.
pub fn records_of(b: &BrokerHandle, topic: &str) -> Vec<(i32, Record)> {
    let core = b.core();
    let Some(meta) = core.topics().read().get(topic).cloned() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for p in 0..meta.partitions {
        let Some(log) = core.partition(meta.id, p) else {
            continue;
        };
        let log = log.lock();
        let mut next = log.log_start_offset();
        while next < log.log_end_offset() {
            let bytes = log.read(next, 1 << 20).expect("read the dead-letter log");
            let batches = RecordBatchView::parse_all(bytes).expect("batches");
            if batches.is_empty() {
                break;
            }
            for batch in batches {
                for r in batch.records(DEFAULT_MAX_DECOMPRESSED).expect("records") {
                    out.push((p, r));
                }
                next = batch.last_offset() + 1;
            }
        }
    }
    out
}

/// The text of header `name` of `r`.
pub fn header(r: &Record, name: &str) -> Option<String> {
    r.headers
        .iter()
        .find(|h| h.key == name)
        .and_then(|h| h.value.as_ref())
        .map(|v| String::from_utf8_lossy(v).into_owned())
}

/// Waits (real time, up to 10 s) until `topic` holds `n` records; returns
/// them. Panics with what it holds otherwise.
pub async fn wait_for_records(b: &BrokerHandle, topic: &str, n: usize) -> Vec<(i32, Record)> {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let got = records_of(b, topic);
        if got.len() >= n {
            assert_eq!(got.len(), n, "more dead letters than expected: {got:?}");
            return got;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{topic} holds {} records, {n} expected",
            got.len()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until `f` holds (real time, up to 10 s).
pub async fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !f() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting: {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
