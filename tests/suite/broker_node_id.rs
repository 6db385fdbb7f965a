//! A broker started with another node id (`--node-id`, Kafka's node.id)
//! names it everywhere a client reads one: Metadata's broker, controller,
//! leaders and replicas, FindCoordinator, DescribeCluster. kafka-go's
//! tests expect node 1, as their Kafka is configured.

use crate::common;

use common::broker::{Started, TestBroker};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

#[tokio::test]
async fn every_answer_names_the_configured_node_id() {
    let Started { b, mut c, .. } = TestBroker::in_memory()
        .configure(|cfg| cfg.node_id = 7)
        .topic("n", 2)
        .start()
        .await;
    let m = c
        .send(
            &MetadataRequest::default().with_topics(Some(vec![
                MetadataRequestTopic::default()
                    .with_name(Some(TopicName(StrBytes::from_static_str("n")))),
            ])),
            12,
        )
        .await;
    assert_eq!(m.brokers.len(), 1);
    assert_eq!(m.brokers[0].node_id.0, 7);
    assert_eq!(m.controller_id.0, 7);
    for p in &m.topics[0].partitions {
        assert_eq!(p.leader_id.0, 7);
        assert_eq!(
            p.replica_nodes.iter().map(|n| n.0).collect::<Vec<_>>(),
            vec![7]
        );
        assert_eq!(p.isr_nodes.iter().map(|n| n.0).collect::<Vec<_>>(), vec![7]);
    }
    let f = c
        .send(
            &FindCoordinatorRequest::default()
                .with_key_type(0)
                .with_coordinator_keys(vec![StrBytes::from_static_str("g")]),
            4,
        )
        .await;
    assert_eq!(f.coordinators[0].error_code, 0);
    assert_eq!(f.coordinators[0].node_id.0, 7);
    let d = c.send(&DescribeClusterRequest::default(), 0).await;
    assert_eq!(d.controller_id.0, 7);
    assert_eq!(d.brokers[0].broker_id.0, 7);
    b.shutdown().await;
}
