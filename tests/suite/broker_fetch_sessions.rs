//! Fetch sessions (KIP-227) as Kafka reads a Fetch's session id and epoch.
//! Regression: a full, sessionless Fetch that named session id -1 with
//! epoch -1 (kafka-go's every Fetch) was answered FETCH_SESSION_ID_NOT_FOUND
//! with no topics, where Kafka serves it.

use crate::common;

use common::broker::{Started, TestBroker};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use sharestream_protocol::ErrorCode;

fn fetch(session_id: i32, session_epoch: i32) -> FetchRequest {
    FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_min_bytes(0)
        .with_max_bytes(1 << 20)
        .with_session_id(session_id)
        .with_session_epoch(session_epoch)
        .with_topics(vec![
            FetchTopic::default()
                .with_topic(TopicName(StrBytes::from_static_str("fs")))
                .with_partitions(vec![
                    FetchPartition::default()
                        .with_partition(0)
                        .with_partition_max_bytes(1 << 20),
                ]),
        ])
}

#[tokio::test]
async fn full_fetches_are_served_whatever_session_they_name() {
    let Started { b, mut c, .. } = TestBroker::in_memory().topic("fs", 1).start().await;
    for version in [7i16, 11, 12] {
        // Epoch 0 opens a session (none is handed out: id 0), epoch -1
        // fetches without one; the session id they carry is closed, not
        // looked up.
        for (id, epoch) in [(0, 0), (0, -1), (-1, -1), (7, -1), (7, 0)] {
            let r = c.send(&fetch(id, epoch), version).await;
            assert_eq!(r.error_code, 0, "v{version} session {id} epoch {epoch}");
            assert_eq!(r.session_id, 0, "v{version} session {id} epoch {epoch}");
            assert_eq!(
                r.responses.len(),
                1,
                "v{version} session {id} epoch {epoch}"
            );
            let p = &r.responses[0].partitions[0];
            assert_eq!(p.error_code, 0, "v{version} session {id} epoch {epoch}");
            assert_eq!(p.high_watermark, 0, "v{version} session {id} epoch {epoch}");
        }
        // Any other epoch continues a session, and there is none.
        for (id, epoch) in [(7, 1), (0, 1), (-1, 5)] {
            let r = c.send(&fetch(id, epoch), version).await;
            assert_eq!(
                r.error_code,
                ErrorCode::FETCH_SESSION_ID_NOT_FOUND.0,
                "v{version} session {id} epoch {epoch}"
            );
            assert!(r.responses.is_empty());
        }
    }
    b.shutdown().await;
}
