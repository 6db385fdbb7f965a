//! KIP-1289 costs (`cargo bench --bench kip1289`):
//!
//! 1. The share partition's own cost of staging and of resolving a
//!    transaction (commit and abort markers) against the number of staged
//!    records and of batches. Contiguous ranges are stored as runs, so the
//!    cost must follow the batches, not the records.
//! 2. Staging latency end to end: TxnShareAcknowledge round trips against the
//!    in-memory embedded broker (stage 10 acquired records, then commit),
//!    p50/p99 over many requests.
//!
//! Bounded: well under a minute. Medians of several repetitions.

use std::time::{Duration, Instant};

use sharestream::broker::share::{
    AcquireMode, FetchedBatch, LogView, RawAcknowledgementBatch, SharePartition,
    SharePartitionConfig,
};

#[global_allocator]
static GLOBAL: sharestream::alloc::GuardedAlloc = sharestream::alloc::GuardedAlloc::new();

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// A share partition where member "m" holds `records` offsets ACQUIRED.
fn acquired(records: i64) -> SharePartition {
    let config = SharePartitionConfig {
        max_in_flight_records: u32::MAX,
        ..SharePartitionConfig::default()
    };
    let mut sp = SharePartition::new(config, 0);
    let batches = [FetchedBatch::data(0, records - 1)];
    let view = LogView {
        high_watermark: records,
        last_stable_offset: records,
        batches: &batches,
    };
    let got = sp.acquire("m", records as u32, AcquireMode::BatchOptimized, 0, &view);
    assert_eq!(
        got.acquired
            .iter()
            .map(|a| a.last_offset - a.first_offset + 1)
            .sum::<i64>(),
        records
    );
    sp
}

/// `batches` acknowledgement batches covering `records` offsets: every
/// other batch ACCEPT / REJECT so that they stay separate runs.
fn ack_batches(records: i64, batches: i64) -> Vec<RawAcknowledgementBatch> {
    let per = records / batches;
    (0..batches)
        .map(|b| RawAcknowledgementBatch {
            first_offset: b * per,
            last_offset: if b == batches - 1 {
                records - 1
            } else {
                (b + 1) * per - 1
            },
            acknowledge_types: vec![if b % 2 == 0 { 1 } else { 3 }],
        })
        .collect()
}

fn state_machine() {
    println!("## share partition: stage and resolve (median of 7)");
    println!("| staged records | batches | stage | commit | abort |");
    println!("|---|---|---|---|---|");
    let cases: &[(i64, i64)] = &[
        (100, 1),
        (10_000, 1),
        (1_000_000, 1),
        (10_000, 10),
        (10_000, 100),
        (10_000, 1_000),
        (1_000_000, 1_000),
    ];
    for &(records, batches) in cases {
        let acks = ack_batches(records, batches);
        let (mut st, mut co, mut ab) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..7 {
            let mut sp = acquired(records);
            let t = Instant::now();
            sp.stage("m", 7, 0, &acks, 1).unwrap();
            st.push(t.elapsed());
            let mut sp2 = sp.clone();
            let t = Instant::now();
            let out = sp.apply_marker(7, 1, true, 2, |_| true);
            co.push(t.elapsed());
            assert_eq!(out.resolved_records, records as u64);
            let t = Instant::now();
            let out = sp2.apply_marker(7, 1, false, 2, |_| true);
            ab.push(t.elapsed());
            assert_eq!(out.resolved_records, records as u64);
        }
        println!(
            "| {records} | {batches} | {:?} | {:?} | {:?} |",
            median(st),
            median(co),
            median(ab)
        );
    }
}

fn percentile(sorted: &[Duration], q: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

/// TxnShareAcknowledge and EndTxn round trips against the in-memory broker.
async fn end_to_end() {
    use bytes::Bytes;
    use kafka_protocol::messages::create_topics_request::CreatableTopic;
    use kafka_protocol::messages::incremental_alter_configs_request::{
        AlterConfigsResource, AlterableConfig,
    };
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    use kafka_protocol::messages::share_fetch_request as sf;
    use kafka_protocol::messages::*;
    use kafka_protocol::protocol::StrBytes;
    use sharestream::broker::{Broker, BrokerConfig};
    use sharestream::client::{Connection, ConnectionConfig};
    use sharestream::protocol::records::{BatchSpec, Record, encode_batch};
    use sharestream::protocol::txn_share_ack::*;

    let s = |v: &str| StrBytes::from_string(v.to_string());
    let b = Broker::start(BrokerConfig::in_memory()).await.unwrap();
    let c = Connection::connect_tcp(b.local_addr(), &ConnectionConfig::default())
        .await
        .unwrap();
    let created = c
        .send(&CreateTopicsRequest::default().with_topics(vec![
            CreatableTopic::default()
                .with_name(TopicName(s("in")))
                .with_num_partitions(1)
                .with_replication_factor(-1),
        ]))
        .await
        .unwrap();
    let topic = created.topics[0].topic_id;
    const ROUNDS: usize = 1_000;
    const PER: usize = 10;
    for chunk in 0..ROUNDS {
        let records: Vec<Record> = (0..PER as i32)
            .map(|i| Record::new(i, 1, None, Some(Bytes::from(format!("v{chunk}-{i}")))))
            .collect();
        let batch = encode_batch(&BatchSpec::default(), &records).unwrap();
        c.send(
            &ProduceRequest::default()
                .with_acks(-1)
                .with_timeout_ms(5000)
                .with_topic_data(vec![
                    TopicProduceData::default()
                        .with_name(TopicName(s("in")))
                        .with_partition_data(vec![
                            PartitionProduceData::default()
                                .with_index(0)
                                .with_records(Some(batch)),
                        ]),
                ]),
        )
        .await
        .unwrap();
    }
    c.send(
        &IncrementalAlterConfigsRequest::default().with_resources(vec![
            AlterConfigsResource::default()
                .with_resource_type(32)
                .with_resource_name(s("g"))
                .with_configs(vec![
                    AlterableConfig::default()
                        .with_name(s("share.auto.offset.reset"))
                        .with_config_operation(0)
                        .with_value(Some(s("earliest"))),
                ]),
        ]),
    )
    .await
    .unwrap();
    let hb = c
        .send(
            &ShareGroupHeartbeatRequest::default()
                .with_group_id(GroupId(s("g")))
                .with_member_id(s("m"))
                .with_member_epoch(0)
                .with_subscribed_topic_names(Some(vec![TopicName(s("in"))])),
        )
        .await
        .unwrap();
    let member_epoch = hb.member_epoch;
    let init = c
        .send(
            &InitProducerIdRequest::default()
                .with_transactional_id(Some(TransactionalId(s("t"))))
                .with_transaction_timeout_ms(60_000)
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1),
        )
        .await
        .unwrap();
    let (pid, mut epoch) = (init.producer_id.0, init.producer_epoch);
    let (mut stage_lat, mut commit_lat) = (Vec::new(), Vec::new());
    for session_epoch in 0..ROUNDS as i32 {
        let f = c
            .send(
                &ShareFetchRequest::default()
                    .with_group_id(Some(GroupId(s("g"))))
                    .with_member_id(Some(s("m")))
                    .with_share_session_epoch(session_epoch)
                    .with_max_wait_ms(100)
                    .with_min_bytes(1)
                    .with_max_bytes(1 << 20)
                    .with_max_records(PER as i32)
                    .with_batch_size(PER as i32)
                    .with_topics(vec![
                        sf::FetchTopic::default()
                            .with_topic_id(topic)
                            .with_partitions(vec![
                                sf::FetchPartition::default().with_partition_index(0),
                            ]),
                    ]),
            )
            .await
            .unwrap();
        let ranges: Vec<(i64, i64)> = f
            .responses
            .iter()
            .flat_map(|t| t.partitions.iter())
            .flat_map(|p| {
                p.acquired_records
                    .iter()
                    .map(|a| (a.first_offset, a.last_offset))
            })
            .collect();
        if ranges.is_empty() {
            break;
        }
        let req = TxnShareAcknowledgeRequest {
            transactional_id: Some("t".into()),
            group_id: Some("g".into()),
            producer_id: pid,
            producer_epoch: epoch,
            member_id: Some("m".into()),
            member_epoch,
            topics: vec![TxnShareAcknowledgeTopic {
                topic_id: topic,
                partitions: vec![TxnShareAcknowledgePartition {
                    partition_index: 0,
                    acknowledgement_batches: ranges
                        .iter()
                        .map(
                            |&(first_offset, last_offset)| TxnShareAcknowledgementBatch {
                                first_offset,
                                last_offset,
                                acknowledge_types: vec![1],
                            },
                        )
                        .collect(),
                }],
            }],
        };
        let t = Instant::now();
        let r = c.send(&req).await.unwrap();
        stage_lat.push(t.elapsed());
        assert_eq!(r.error_code, 0);
        let t = Instant::now();
        let e = c
            .send(
                &EndTxnRequest::default()
                    .with_transactional_id(TransactionalId(s("t")))
                    .with_producer_id(ProducerId(pid))
                    .with_producer_epoch(epoch)
                    .with_committed(true),
            )
            .await
            .unwrap();
        commit_lat.push(t.elapsed());
        assert_eq!(e.error_code, 0);
        epoch = e.producer_epoch;
    }
    stage_lat.sort();
    commit_lat.sort();
    println!();
    println!(
        "## end to end, in-memory broker, {} rounds of {PER} records",
        stage_lat.len()
    );
    println!("| request | p50 | p99 | max |");
    println!("|---|---|---|---|");
    for (name, v) in [
        ("TxnShareAcknowledge", &stage_lat),
        ("EndTxn (commit, markers included)", &commit_lat),
    ] {
        println!(
            "| {name} | {:?} | {:?} | {:?} |",
            percentile(v, 0.5),
            percentile(v, 0.99),
            v[v.len() - 1]
        );
    }
    b.shutdown().await;
}

fn main() {
    state_machine();
    tokio::runtime::Runtime::new()
        .expect("tokio runtime")
        .block_on(end_to_end());
}
