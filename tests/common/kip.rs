//! A scripted KIP-1289 scenario over raw sockets: a topic with records, a
//! share-group member holding them ACQUIRED, and a transactional producer
//! that stages their acknowledgements.
#![allow(dead_code)]

use bytes::Bytes;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::share_fetch_request as sf;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use sharestream::broker::BrokerHandle;
use sharestream::broker::share::{RecordInfo, RecordState};
use sharestream::protocol::ErrorCode;
use sharestream::protocol::records::{BatchSpec, Record, encode_batch};
use sharestream::protocol::txn_share_ack::{
    TxnShareAcknowledgePartition, TxnShareAcknowledgeRequest, TxnShareAcknowledgeResponse,
    TxnShareAcknowledgeTopic, TxnShareAcknowledgementBatch,
};
use uuid::Uuid;

use super::RawClient;

pub const GROUP: &str = "g";
pub const INPUT: &str = "in";
pub const OUTPUT: &str = "out";

pub fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

pub async fn create_topic(c: &mut RawClient, name: &str, partitions: i32) -> Uuid {
    let r = c
        .send(
            &CreateTopicsRequest::default().with_topics(vec![
                CreatableTopic::default()
                    .with_name(TopicName(s(name)))
                    .with_num_partitions(partitions)
                    .with_replication_factor(-1),
            ]),
            7,
        )
        .await;
    assert_eq!(r.topics[0].error_code, 0, "create {name}");
    r.topics[0].topic_id
}

/// Produces `n` plain records `v0..` to `topic`-`partition`.
pub async fn produce_plain(c: &mut RawClient, topic: &str, partition: i32, n: usize) {
    let records: Vec<Record> = (0..n)
        .map(|i| Record::new(i as i32, 1, None, Some(Bytes::from(format!("v{i}")))))
        .collect();
    let batch = encode_batch(&BatchSpec::default(), &records).unwrap();
    let r = c.send(&produce_req(topic, partition, batch, None), 9).await;
    assert_eq!(r.responses[0].partition_responses[0].error_code, 0);
}

pub fn produce_req(
    topic: &str,
    partition: i32,
    records: Bytes,
    txn: Option<&str>,
) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(5000)
        .with_transactional_id(txn.map(|t| TransactionalId(s(t))))
        .with_topic_data(vec![
            TopicProduceData::default()
                .with_name(TopicName(s(topic)))
                .with_partition_data(vec![
                    PartitionProduceData::default()
                        .with_index(partition)
                        .with_records(Some(records)),
                ]),
        ])
}

pub async fn earliest(c: &mut RawClient, group: &str) {
    let (code, msg) =
        super::dlq::set_group_configs(c, group, &[("share.auto.offset.reset", "earliest")]).await;
    assert_eq!(code, 0, "{msg:?}");
}

/// Joins `member` to the group subscribed to INPUT; returns its epoch.
pub async fn join(c: &mut RawClient, member: &str) -> i32 {
    let r = c
        .send(
            &ShareGroupHeartbeatRequest::default()
                .with_group_id(GroupId(s(GROUP)))
                .with_member_id(s(member))
                .with_member_epoch(0)
                .with_subscribed_topic_names(Some(vec![TopicName(s(INPUT))])),
            1,
        )
        .await;
    assert_eq!(r.error_code, 0, "join: {:?}", r.error_message);
    r.member_epoch
}

/// A heartbeat at `epoch`; returns the (possibly new) epoch.
pub async fn heartbeat(c: &mut RawClient, member: &str, epoch: i32) -> i32 {
    let r = c
        .send(
            &ShareGroupHeartbeatRequest::default()
                .with_group_id(GroupId(s(GROUP)))
                .with_member_id(s(member))
                .with_member_epoch(epoch),
            1,
        )
        .await;
    assert_eq!(r.error_code, 0, "heartbeat: {:?}", r.error_message);
    r.member_epoch
}

/// Opens a share session for `member` and acquires what is available on
/// the given partitions of INPUT; returns the acquired (first, last) ranges.
pub async fn acquire(
    c: &mut RawClient,
    member: &str,
    topic: Uuid,
    partitions: &[i32],
    session_epoch: i32,
) -> Vec<(i32, i64, i64)> {
    let req = share_fetch_req(member, topic, partitions, session_epoch);
    let r = c.send(&req, 1).await;
    assert_eq!(r.error_code, 0, "share fetch");
    r.responses
        .iter()
        .flat_map(|t| t.partitions.iter())
        .flat_map(|p| {
            p.acquired_records
                .iter()
                .map(move |a| (p.partition_index, a.first_offset, a.last_offset))
        })
        .collect()
}

/// A ShareFetch (v1) of `member` in GROUP for the given partitions of
/// `topic`: up to 1 MiB and 500 records, waiting at most 50 ms.
pub fn share_fetch_req(
    member: &str,
    topic: Uuid,
    partitions: &[i32],
    session_epoch: i32,
) -> ShareFetchRequest {
    ShareFetchRequest::default()
        .with_group_id(Some(GroupId(s(GROUP))))
        .with_member_id(Some(s(member)))
        .with_share_session_epoch(session_epoch)
        .with_max_wait_ms(50)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_max_records(500)
        .with_batch_size(500)
        .with_topics(vec![
            sf::FetchTopic::default()
                .with_topic_id(topic)
                .with_partitions(
                    partitions
                        .iter()
                        .map(|p| sf::FetchPartition::default().with_partition_index(*p))
                        .collect(),
                ),
        ])
}

pub async fn init_pid(c: &mut RawClient, txn: &str, timeout_ms: i32) -> (i64, i16) {
    loop {
        let r = c
            .send(
                &InitProducerIdRequest::default()
                    .with_transactional_id(Some(TransactionalId(s(txn))))
                    .with_transaction_timeout_ms(timeout_ms)
                    .with_producer_id(ProducerId(-1))
                    .with_producer_epoch(-1),
                5,
            )
            .await;
        if r.error_code == ErrorCode::CONCURRENT_TRANSACTIONS.0 {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            continue;
        }
        assert_eq!(
            r.error_code,
            0,
            "InitProducerId {:?}",
            ErrorCode(r.error_code)
        );
        return (r.producer_id.0, r.producer_epoch);
    }
}

pub async fn end_txn(
    c: &mut RawClient,
    txn: &str,
    pid: i64,
    epoch: i16,
    commit: bool,
) -> EndTxnResponse {
    c.send(
        &EndTxnRequest::default()
            .with_transactional_id(TransactionalId(s(txn)))
            .with_producer_id(ProducerId(pid))
            .with_producer_epoch(epoch)
            .with_committed(commit),
        5,
    )
    .await
}

/// One partition's staging: (partition, first, last, type).
pub type Stage = (i32, i64, i64, i8);

#[allow(clippy::too_many_arguments)]
pub fn stage_req(
    txn: &str,
    pid: i64,
    epoch: i16,
    member: &str,
    member_epoch: i32,
    topic: Uuid,
    stages: &[Stage],
) -> TxnShareAcknowledgeRequest {
    let mut partitions: Vec<TxnShareAcknowledgePartition> = Vec::new();
    for &(p, first, last, ty) in stages {
        let batch = TxnShareAcknowledgementBatch {
            first_offset: first,
            last_offset: last,
            acknowledge_types: vec![ty],
        };
        match partitions.iter_mut().find(|x| x.partition_index == p) {
            Some(x) => x.acknowledgement_batches.push(batch),
            None => partitions.push(TxnShareAcknowledgePartition {
                partition_index: p,
                acknowledgement_batches: vec![batch],
            }),
        }
    }
    TxnShareAcknowledgeRequest {
        transactional_id: Some(txn.to_string()),
        group_id: Some(GROUP.to_string()),
        producer_id: pid,
        producer_epoch: epoch,
        member_id: Some(member.to_string()),
        member_epoch,
        topics: vec![TxnShareAcknowledgeTopic {
            topic_id: topic,
            partitions,
        }],
    }
}

pub async fn stage(
    c: &mut RawClient,
    req: &TxnShareAcknowledgeRequest,
) -> TxnShareAcknowledgeResponse {
    c.send(req, 0).await
}

/// Per-partition error codes of a staging response, in request order.
pub fn partition_errors(r: &TxnShareAcknowledgeResponse) -> Vec<(i32, i16)> {
    r.responses
        .iter()
        .flat_map(|t| t.partitions.iter())
        .map(|p| (p.partition_index, p.error_code))
        .collect()
}

pub fn info(b: &BrokerHandle, topic: Uuid, partition: i32, offset: i64) -> RecordInfo {
    b.core()
        .shares()
        .record_info(GROUP, topic, partition, offset)
        .unwrap_or_else(|| panic!("offset {offset} is not in the in-flight window"))
}

/// A record's state as far as the broker still knows it: below the share
/// partition's start offset every record is terminal (ACKNOWLEDGED or
/// ARCHIVED; which one is no longer kept, as in Kafka).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    /// In the window, in this state.
    State(RecordState),
    /// Below the start offset: terminal.
    Terminal,
}

pub fn seen(b: &BrokerHandle, topic: Uuid, partition: i32, offset: i64) -> Seen {
    let shares = b.core().shares();
    match shares.record_info(GROUP, topic, partition, offset) {
        Some(i) if matches!(i.state, RecordState::Acknowledged | RecordState::Archived) => {
            Seen::Terminal
        }
        Some(i) => Seen::State(i.state),
        None => {
            let (start, _) = shares
                .partition_offsets(GROUP, topic, partition)
                .expect("share partition exists");
            assert!(
                offset < start,
                "offset {offset} unknown to the share partition"
            );
            Seen::Terminal
        }
    }
}

pub fn states(
    b: &BrokerHandle,
    topic: Uuid,
    partition: i32,
    offsets: std::ops::RangeInclusive<i64>,
) -> Vec<Seen> {
    offsets.map(|o| seen(b, topic, partition, o)).collect()
}

/// ShareAcknowledge v1 of `acks` (first, last, type) on partition 0 of
/// `topic` for `member` of GROUP at share session `epoch`.
pub async fn share_acknowledge(
    c: &mut RawClient,
    member: &str,
    epoch: i32,
    topic: Uuid,
    acks: &[(i64, i64, i8)],
) -> ShareAcknowledgeResponse {
    c.send(&share_acknowledge_req(member, epoch, topic, acks), 1)
        .await
}

/// The request of [`share_acknowledge`] (version 1).
pub fn share_acknowledge_req(
    member: &str,
    epoch: i32,
    topic: Uuid,
    acks: &[(i64, i64, i8)],
) -> ShareAcknowledgeRequest {
    use kafka_protocol::messages::share_acknowledge_request as sa;
    ShareAcknowledgeRequest::default()
        .with_group_id(Some(GroupId(s(GROUP))))
        .with_member_id(Some(s(member)))
        .with_share_session_epoch(epoch)
        .with_topics(vec![
            sa::AcknowledgeTopic::default()
                .with_topic_id(topic)
                .with_partitions(vec![
                    sa::AcknowledgePartition::default()
                        .with_partition_index(0)
                        .with_acknowledgement_batches(
                            acks.iter()
                                .map(|&(f, l, t)| {
                                    sa::AcknowledgementBatch::default()
                                        .with_first_offset(f)
                                        .with_last_offset(l)
                                        .with_acknowledge_types(vec![t])
                                })
                                .collect(),
                        ),
                ]),
        ])
}
