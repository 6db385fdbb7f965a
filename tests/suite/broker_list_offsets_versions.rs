//! ListOffsets answers at every advertised version (regression: the broker
//! set LeaderEpoch, a v4+ field, at v1-v3, could not encode the response and
//! closed the connection; kcat, on librdkafka 2.0, asks v2).

use crate::common;

use common::broker::{Started, TestBroker};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

#[tokio::test]
async fn list_offsets_answers_at_every_version() {
    let Started { b, mut c, .. } = TestBroker::in_memory().topic("lo", 1).start().await;
    let topic = TopicName(StrBytes::from_static_str("lo"));
    for version in 1..=8i16 {
        for timestamp in [-1i64, -2] {
            let req = ListOffsetsRequest::default()
                .with_replica_id(BrokerId(-1))
                .with_topics(vec![
                    ListOffsetsTopic::default()
                        .with_name(topic.clone())
                        .with_partitions(vec![
                            ListOffsetsPartition::default()
                                .with_partition_index(0)
                                .with_timestamp(timestamp),
                        ]),
                ]);
            let resp = c.send(&req, version).await;
            let p = &resp.topics[0].partitions[0];
            assert_eq!(p.error_code, 0, "v{version} ts {timestamp}");
            assert_eq!(p.offset, 0, "v{version} ts {timestamp}");
            let want_epoch = if version >= 4 { 0 } else { -1 };
            assert_eq!(p.leader_epoch, want_epoch, "v{version}");
        }
    }
    b.shutdown().await;
}
