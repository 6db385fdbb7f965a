//! Embedded broker over sockets: produce/fetch across codecs, idempotence,
//! transactions v1 and v2 (commit, abort, LSO, aborted-transaction index,
//! timeout, fencing) and crash restarts.

use crate::common;

use std::time::Duration;

use bytes::Bytes;
use common::RawClient;
use common::broker::{TestBroker, advance};
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::produce_response::PartitionProduceResponse;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use sharestream::broker::clock::{ManualClock, wall_clock_ms};
use sharestream::broker::{Broker, BrokerConfig, BrokerHandle};
use sharestream::protocol::ErrorCode;
use sharestream::protocol::records::{
    BatchSpec, Compression, Record, RecordBatchView, encode_batch,
};

const TOPIC: &str = "t";

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

async fn setup(config: BrokerConfig) -> (BrokerHandle, RawClient) {
    setup_on(TestBroker::with_config(config)).await
}

async fn setup_on(broker: TestBroker) -> (BrokerHandle, RawClient) {
    let _ = tracing_subscriber::fmt().with_test_writer().try_init();
    let s = broker.topic(TOPIC, 1).start().await;
    (s.b, s.c)
}

fn batch(spec: BatchSpec, values: &[&str]) -> Bytes {
    let records: Vec<Record> = values
        .iter()
        .enumerate()
        .map(|(i, v)| {
            Record::new(
                i as i32,
                1_700_000_000_000 + i as i64,
                None,
                Some(Bytes::from(v.to_string())),
            )
        })
        .collect();
    encode_batch(&spec, &records).unwrap()
}

fn plain(values: &[&str]) -> Bytes {
    batch(BatchSpec::default(), values)
}

fn idempotent(pid: i64, epoch: i16, seq: i32, values: &[&str]) -> Bytes {
    batch(
        BatchSpec {
            producer_id: pid,
            producer_epoch: epoch,
            base_sequence: seq,
            ..BatchSpec::default()
        },
        values,
    )
}

fn transactional(pid: i64, epoch: i16, seq: i32, values: &[&str]) -> Bytes {
    batch(
        BatchSpec {
            producer_id: pid,
            producer_epoch: epoch,
            base_sequence: seq,
            transactional: true,
            ..BatchSpec::default()
        },
        values,
    )
}

async fn produce(
    c: &mut RawClient,
    version: i16,
    txn_id: Option<&str>,
    records: Bytes,
) -> PartitionProduceResponse {
    let req = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(5000)
        .with_transactional_id(
            txn_id.map(|t| TransactionalId(StrBytes::from_string(t.to_string()))),
        )
        .with_topic_data(vec![
            TopicProduceData::default()
                .with_name(name(TOPIC))
                .with_partition_data(vec![
                    PartitionProduceData::default()
                        .with_index(0)
                        .with_records(Some(records)),
                ]),
        ]);
    let mut r = c.send(&req, version).await;
    r.responses.remove(0).partition_responses.remove(0)
}

async fn fetch(c: &mut RawClient, offset: i64, isolation: i8) -> PartitionData {
    let req = FetchRequest::default()
        .with_max_wait_ms(0)
        .with_min_bytes(0)
        .with_max_bytes(10 << 20)
        .with_isolation_level(isolation)
        .with_session_epoch(-1)
        .with_topics(vec![
            FetchTopic::default()
                .with_topic(name(TOPIC))
                .with_partitions(vec![
                    FetchPartition::default()
                        .with_partition(0)
                        .with_fetch_offset(offset)
                        .with_partition_max_bytes(1 << 20),
                ]),
        ]);
    let mut r = c.send(&req, 12).await;
    r.responses.remove(0).partitions.remove(0)
}

/// Data batches' values in a fetch response (control batches skipped).
fn values(p: &PartitionData) -> Vec<String> {
    let bytes = p.records.clone().unwrap_or_default();
    let mut out = Vec::new();
    for b in RecordBatchView::parse_all(bytes).unwrap() {
        b.verify_crc().unwrap();
        if b.is_control() {
            continue;
        }
        for r in b.records(1 << 24).unwrap() {
            out.push(String::from_utf8(r.value.unwrap().to_vec()).unwrap());
        }
    }
    out
}

/// read_committed view: drop data of aborted transactions the way Kafka's
/// clients do, from the aborted-transactions list.
fn committed_values(p: &PartitionData) -> Vec<String> {
    let aborted: Vec<(i64, i64)> = p
        .aborted_transactions
        .clone()
        .unwrap_or_default()
        .iter()
        .map(|a| (a.producer_id.0, a.first_offset))
        .collect();
    let bytes = p.records.clone().unwrap_or_default();
    let mut out = Vec::new();
    let mut open_aborted: Vec<i64> = Vec::new();
    for b in RecordBatchView::parse_all(bytes).unwrap() {
        for (pid, first) in &aborted {
            if *first <= b.last_offset() && !open_aborted.contains(pid) && *pid == b.producer_id() {
                open_aborted.push(*pid);
            }
        }
        if b.is_control() {
            open_aborted.retain(|p| *p != b.producer_id());
            continue;
        }
        if b.is_transactional() && open_aborted.contains(&b.producer_id()) {
            continue;
        }
        for r in b.records(1 << 24).unwrap() {
            out.push(String::from_utf8(r.value.unwrap().to_vec()).unwrap());
        }
    }
    out
}

async fn init_pid(c: &mut RawClient, txn_id: Option<&str>, timeout_ms: i32) -> (i64, i16) {
    loop {
        let r = c
            .send(
                &InitProducerIdRequest::default()
                    .with_transactional_id(
                        txn_id.map(|t| TransactionalId(StrBytes::from_string(t.to_string()))),
                    )
                    .with_transaction_timeout_ms(timeout_ms)
                    .with_producer_id(ProducerId(-1))
                    .with_producer_epoch(-1),
                5,
            )
            .await;
        if r.error_code == ErrorCode::CONCURRENT_TRANSACTIONS.0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        }
        assert_eq!(
            r.error_code,
            0,
            "InitProducerId: {:?}",
            ErrorCode(r.error_code)
        );
        return (r.producer_id.0, r.producer_epoch);
    }
}

async fn end_txn(
    c: &mut RawClient,
    version: i16,
    txn_id: &str,
    pid: i64,
    epoch: i16,
    commit: bool,
) -> EndTxnResponse {
    c.send(
        &EndTxnRequest::default()
            .with_transactional_id(TransactionalId(StrBytes::from_string(txn_id.to_string())))
            .with_producer_id(ProducerId(pid))
            .with_producer_epoch(epoch)
            .with_committed(commit),
        version,
    )
    .await
}

#[tokio::test]
async fn produce_fetch_round_trip_every_codec() {
    let (b, mut c) = setup(BrokerConfig::in_memory()).await;
    let mut expected = Vec::new();
    for (i, codec) in [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ]
    .into_iter()
    .enumerate()
    {
        let vals: Vec<String> = (0..20)
            .map(|j| format!("{}-{i}-{j}", codec.name()))
            .collect();
        let refs: Vec<&str> = vals.iter().map(String::as_str).collect();
        let r = produce(
            &mut c,
            9,
            None,
            batch(
                BatchSpec {
                    compression: codec,
                    ..BatchSpec::default()
                },
                &refs,
            ),
        )
        .await;
        assert_eq!(r.error_code, 0);
        assert_eq!(r.base_offset, (i * 20) as i64);
        expected.extend(vals);
    }
    let p = fetch(&mut c, 0, 0).await;
    assert_eq!(p.high_watermark, 100);
    assert_eq!(values(&p), expected);
    // Fetch from the middle of a batch returns the whole batch.
    let p = fetch(&mut c, 25, 0).await;
    assert_eq!(values(&p)[0], expected[20]);
    // Out of range.
    let p = fetch(&mut c, 1000, 0).await;
    assert_eq!(p.error_code, ErrorCode::OFFSET_OUT_OF_RANGE.0);
    // Corrupt CRC is refused and nothing is stored.
    let mut bad = plain(&["x"]).to_vec();
    let last = bad.len() - 1;
    bad[last] ^= 0xff;
    let r = produce(&mut c, 9, None, Bytes::from(bad)).await;
    assert_eq!(r.error_code, ErrorCode::CORRUPT_MESSAGE.0);
    assert_eq!(fetch(&mut c, 0, 0).await.high_watermark, 100);
    b.shutdown().await;
}

#[tokio::test]
async fn idempotent_retries_do_not_duplicate() {
    let (b, mut c) = setup(BrokerConfig::in_memory()).await;
    let (pid, epoch) = init_pid(&mut c, None, 60_000).await;
    assert!(pid >= 0);
    let first = produce(&mut c, 9, None, idempotent(pid, epoch, 0, &["a", "b"])).await;
    assert_eq!((first.error_code, first.base_offset), (0, 0));
    // The same batch again (a retry) gets the original offsets.
    let retry = produce(&mut c, 9, None, idempotent(pid, epoch, 0, &["a", "b"])).await;
    assert_eq!((retry.error_code, retry.base_offset), (0, 0));
    let next = produce(&mut c, 9, None, idempotent(pid, epoch, 2, &["c"])).await;
    assert_eq!((next.error_code, next.base_offset), (0, 2));
    // A sequence gap is refused.
    let gap = produce(&mut c, 9, None, idempotent(pid, epoch, 10, &["z"])).await;
    assert_eq!(gap.error_code, ErrorCode::OUT_OF_ORDER_SEQUENCE_NUMBER.0);
    assert_eq!(values(&fetch(&mut c, 0, 0).await), vec!["a", "b", "c"]);
    b.shutdown().await;
}

#[tokio::test]
async fn tv2_commit_and_abort_with_read_committed() {
    let (b, mut c) = setup(BrokerConfig::in_memory()).await;
    let (pid, epoch) = init_pid(&mut c, Some("txn-a"), 60_000).await;

    // Transaction 1: produce (v12 registers the partition implicitly).
    let r = produce(
        &mut c,
        12,
        Some("txn-a"),
        transactional(pid, epoch, 0, &["t1-a", "t1-b"]),
    )
    .await;
    assert_eq!(r.error_code, 0, "{:?}", ErrorCode(r.error_code));
    // Open transaction: read_committed sees nothing, the LSO stops at it.
    let rc = fetch(&mut c, 0, 1).await;
    assert_eq!(rc.last_stable_offset, 0);
    assert!(values(&rc).is_empty());
    assert_eq!(values(&fetch(&mut c, 0, 0).await), vec!["t1-a", "t1-b"]);
    // Commit: EndTxn v5 bumps the epoch.
    let e = end_txn(&mut c, 5, "txn-a", pid, epoch, true).await;
    assert_eq!(e.error_code, 0);
    assert_eq!(e.producer_id.0, pid);
    assert_eq!(e.producer_epoch, epoch + 1);
    let rc = fetch(&mut c, 0, 1).await;
    assert_eq!(
        rc.last_stable_offset, 3,
        "two records and the commit marker"
    );
    assert_eq!(committed_values(&rc), vec!["t1-a", "t1-b"]);

    // Transaction 2, aborted.
    let epoch = e.producer_epoch;
    let r = produce(
        &mut c,
        12,
        Some("txn-a"),
        transactional(pid, epoch, 0, &["t2-a"]),
    )
    .await;
    assert_eq!(r.error_code, 0, "{:?}", ErrorCode(r.error_code));
    let e = end_txn(&mut c, 5, "txn-a", pid, epoch, false).await;
    assert_eq!(e.error_code, 0);
    let rc = fetch(&mut c, 0, 1).await;
    assert_eq!(rc.last_stable_offset, 5);
    let aborted = rc.aborted_transactions.clone().unwrap();
    assert_eq!(aborted.len(), 1);
    assert_eq!(
        (aborted[0].producer_id.0, aborted[0].first_offset),
        (pid, 3)
    );
    assert_eq!(committed_values(&rc), vec!["t1-a", "t1-b"]);
    // The old epoch is fenced now.
    let r = produce(
        &mut c,
        12,
        Some("txn-a"),
        transactional(pid, epoch, 1, &["late"]),
    )
    .await;
    assert_ne!(r.error_code, 0);
    b.shutdown().await;
}

#[tokio::test]
async fn tv1_requires_add_partitions_before_produce() {
    let (b, mut c) = setup(BrokerConfig::in_memory()).await;
    let (pid, epoch) = init_pid(&mut c, Some("txn-v1"), 60_000).await;
    // Produce v9 (TV1) without AddPartitionsToTxn: refused.
    let r = produce(
        &mut c,
        9,
        Some("txn-v1"),
        transactional(pid, epoch, 0, &["x"]),
    )
    .await;
    assert_eq!(r.error_code, ErrorCode::INVALID_TXN_STATE.0);
    let add = c
        .send(
            &AddPartitionsToTxnRequest::default()
                .with_v3_and_below_transactional_id(TransactionalId(StrBytes::from_static_str(
                    "txn-v1",
                )))
                .with_v3_and_below_producer_id(ProducerId(pid))
                .with_v3_and_below_producer_epoch(epoch)
                .with_v3_and_below_topics(vec![
                    AddPartitionsToTxnTopic::default()
                        .with_name(name(TOPIC))
                        .with_partitions(vec![0]),
                ]),
            3,
        )
        .await;
    assert_eq!(
        add.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code,
        0
    );
    let r = produce(
        &mut c,
        9,
        Some("txn-v1"),
        transactional(pid, epoch, 0, &["x"]),
    )
    .await;
    assert_eq!(r.error_code, 0);
    let e = end_txn(&mut c, 3, "txn-v1", pid, epoch, true).await;
    assert_eq!(e.error_code, 0);
    // TV1 does not bump the epoch.
    assert_eq!(e.producer_epoch, -1);
    assert_eq!(committed_values(&fetch(&mut c, 0, 1).await), vec!["x"]);
    // Unknown partitions: UNKNOWN_TOPIC_OR_PARTITION.
    let add = c
        .send(
            &AddPartitionsToTxnRequest::default()
                .with_v3_and_below_transactional_id(TransactionalId(StrBytes::from_static_str(
                    "txn-v1",
                )))
                .with_v3_and_below_producer_id(ProducerId(pid))
                .with_v3_and_below_producer_epoch(epoch)
                .with_v3_and_below_topics(vec![
                    AddPartitionsToTxnTopic::default()
                        .with_name(name("nope"))
                        .with_partitions(vec![0]),
                ]),
            3,
        )
        .await;
    assert_eq!(
        add.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code,
        ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.0
    );
    b.shutdown().await;
}

#[tokio::test]
async fn transaction_timeout_aborts() {
    // On a manual clock: the timeout passes when the test says so.
    let clock = ManualClock::new(wall_clock_ms());
    let (b, mut c) = setup_on(TestBroker::in_memory().configure(|c| c.clock = clock.clone())).await;
    let (pid, epoch) = init_pid(&mut c, Some("txn-slow"), 200).await;
    let r = produce(
        &mut c,
        12,
        Some("txn-slow"),
        transactional(pid, epoch, 0, &["never"]),
    )
    .await;
    assert_eq!(r.error_code, 0);
    assert_eq!(fetch(&mut c, 0, 1).await.last_stable_offset, 0);
    // Not at its timeout...
    advance(&b, &clock, 200);
    assert_eq!(fetch(&mut c, 0, 1).await.last_stable_offset, 0);
    // ...but the first millisecond past it, the coordinator's timer aborts.
    advance(&b, &clock, 1);
    let rc = fetch(&mut c, 0, 1).await;
    assert_eq!(rc.last_stable_offset, 2);
    assert!(committed_values(&rc).is_empty());
    assert_eq!(rc.aborted_transactions.unwrap().len(), 1);
    // The producer was fenced by the abort.
    let e = end_txn(&mut c, 5, "txn-slow", pid, epoch, true).await;
    assert_ne!(e.error_code, 0);
    b.shutdown().await;
}

#[tokio::test]
async fn zombie_producer_is_fenced_and_its_transaction_aborted() {
    let (b, mut c) = setup(BrokerConfig::in_memory()).await;
    let (pid, old_epoch) = init_pid(&mut c, Some("txn-z"), 60_000).await;
    let r = produce(
        &mut c,
        12,
        Some("txn-z"),
        transactional(pid, old_epoch, 0, &["zombie"]),
    )
    .await;
    assert_eq!(r.error_code, 0);
    // A new instance with the same transactional id.
    let (pid2, new_epoch) = init_pid(&mut c, Some("txn-z"), 60_000).await;
    assert_eq!(pid2, pid);
    assert!(new_epoch > old_epoch);
    // The old transaction was aborted.
    let rc = fetch(&mut c, 0, 1).await;
    assert_eq!(rc.last_stable_offset, 2);
    assert!(committed_values(&rc).is_empty());
    // The zombie can neither produce nor commit.
    let r = produce(
        &mut c,
        12,
        Some("txn-z"),
        transactional(pid, old_epoch, 1, &["late"]),
    )
    .await;
    assert_ne!(r.error_code, 0);
    let e = end_txn(&mut c, 5, "txn-z", pid, old_epoch, true).await;
    assert_eq!(e.error_code, ErrorCode::PRODUCER_FENCED.0);
    b.shutdown().await;
}

#[tokio::test]
async fn killed_broker_keeps_acknowledged_writes_and_transactions() {
    let dir = tempfile::tempdir().unwrap();
    let (b, mut c) = setup(BrokerConfig::with_data_dir(dir.path())).await;
    let (pid, epoch) = init_pid(&mut c, None, 60_000).await;
    for i in 0..20 {
        let r = produce(
            &mut c,
            9,
            None,
            idempotent(pid, epoch, i, &[&format!("v{i}")]),
        )
        .await;
        assert_eq!(r.error_code, 0);
    }
    let (tpid, tepoch) = init_pid(&mut c, Some("durable-txn"), 60_000).await;
    let r = produce(
        &mut c,
        12,
        Some("durable-txn"),
        transactional(tpid, tepoch, 0, &["committed"]),
    )
    .await;
    assert_eq!(r.error_code, 0);
    assert_eq!(
        end_txn(&mut c, 5, "durable-txn", tpid, tepoch, true)
            .await
            .error_code,
        0
    );
    drop(c);
    b.kill().await;

    let b = Broker::start(BrokerConfig::with_data_dir(dir.path()))
        .await
        .unwrap();
    let mut c = RawClient::connect(b.local_addr()).await;
    let p = fetch(&mut c, 0, 1).await;
    let mut expected: Vec<String> = (0..20).map(|i| format!("v{i}")).collect();
    expected.push("committed".into());
    assert_eq!(committed_values(&p), expected);
    // A retry of the last idempotent batch is still recognised.
    let retry = produce(&mut c, 9, None, idempotent(pid, epoch, 19, &["v19"])).await;
    assert_eq!((retry.error_code, retry.base_offset), (0, 19));
    // The transactional id continues with a higher epoch; ids are not reused.
    let (tpid2, tepoch2) = init_pid(&mut c, Some("durable-txn"), 60_000).await;
    assert_eq!(tpid2, tpid);
    assert!(tepoch2 > tepoch + 1);
    let (fresh, _) = init_pid(&mut c, None, 60_000).await;
    assert!(fresh != pid && fresh != tpid);
    b.shutdown().await;
}

#[tokio::test]
async fn shutdown_does_not_wait_for_a_parked_fetch() {
    let (b, mut c) = setup(BrokerConfig::in_memory()).await;
    let req = FetchRequest::default()
        .with_max_wait_ms(i32::MAX)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_session_epoch(-1)
        .with_topics(vec![
            FetchTopic::default()
                .with_topic(name(TOPIC))
                .with_partitions(vec![
                    FetchPartition::default()
                        .with_partition(0)
                        .with_fetch_offset(0)
                        .with_partition_max_bytes(1 << 20),
                ]),
        ]);
    c.send_only(&req, 12).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    tokio::time::timeout(Duration::from_secs(10), b.shutdown())
        .await
        .expect("shutdown must not wait for a parked long-poll fetch");
    assert!(c.is_closed().await);
}

async fn write_abort_marker(
    c: &mut RawClient,
    topic: &str,
    pid: i64,
    epoch: i16,
    coordinator_epoch: i32,
) -> i16 {
    use kafka_protocol::messages::write_txn_markers_request::{
        WritableTxnMarker, WritableTxnMarkerTopic,
    };
    let r = c
        .send(
            &WriteTxnMarkersRequest::default().with_markers(vec![
                WritableTxnMarker::default()
                    .with_producer_id(ProducerId(pid))
                    .with_producer_epoch(epoch)
                    .with_transaction_result(false)
                    .with_coordinator_epoch(coordinator_epoch)
                    .with_topics(vec![
                        WritableTxnMarkerTopic::default()
                            .with_name(name(topic))
                            .with_partition_indexes(vec![0]),
                    ]),
            ]),
            1,
        )
        .await;
    r.markers[0].topics[0].partitions[0].error_code
}

async fn list_txns(c: &mut RawClient, pattern: Option<&str>) -> (i16, Vec<String>) {
    let r = c
        .send(
            &ListTransactionsRequest::default()
                .with_duration_filter(-1)
                .with_transactional_id_pattern(pattern.map(|p| StrBytes::from_string(p.into()))),
            2,
        )
        .await;
    (
        r.error_code,
        r.transaction_states
            .iter()
            .map(|t| t.transactional_id.0.to_string())
            .collect(),
    )
}

/// `kafka-transactions.sh abort` as the partition leader serves it: the
/// tool reads the open transaction's producer id, epoch and coordinator
/// epoch with DescribeProducers and sends WriteTxnMarkers (abort); the
/// partition's LSO moves past it, read_committed drops its records, and
/// the markers' epoch checks and unknown partitions give Kafka's codes.
/// ListTransactions v2 filters by a transactional id pattern (KIP-1152).
#[tokio::test]
async fn write_txn_markers_aborts_an_open_transaction_on_the_leader() {
    let (b, mut c) = setup(BrokerConfig::in_memory()).await;
    init_pid(&mut c, Some("txn-hang"), 600_000).await;
    // Again: epoch 1, so that a marker one below is a valid epoch.
    let (pid, epoch) = init_pid(&mut c, Some("txn-hang"), 600_000).await;
    assert!(epoch >= 1);
    let r = produce(
        &mut c,
        12,
        Some("txn-hang"),
        transactional(pid, epoch, 0, &["open-a", "open-b"]),
    )
    .await;
    assert_eq!(r.error_code, 0);
    assert_eq!(fetch(&mut c, 0, 1).await.last_stable_offset, 0);

    assert_eq!(
        list_txns(&mut c, Some("txn-.*")).await,
        (0, vec!["txn-hang".into()])
    );
    assert_eq!(
        list_txns(&mut c, Some("txn")).await,
        (0, vec![]),
        "whole id"
    );
    assert_eq!(
        list_txns(&mut c, Some("")).await.1.len(),
        1,
        "empty: no filter"
    );
    assert_eq!(
        list_txns(&mut c, Some("(")).await.0,
        128,
        "INVALID_REGULAR_EXPRESSION"
    );

    let p = c
        .send(
            &DescribeProducersRequest::default().with_topics(vec![
                kafka_protocol::messages::describe_producers_request::TopicRequest::default()
                    .with_name(name(TOPIC))
                    .with_partition_indexes(vec![0]),
            ]),
            0,
        )
        .await
        .topics[0]
        .partitions[0]
        .clone();
    let st = p
        .active_producers
        .iter()
        .find(|s| s.producer_id.0 == pid)
        .unwrap();
    assert_eq!(st.current_txn_start_offset, 0);
    let (epoch, coord) = (st.producer_epoch as i16, st.coordinator_epoch);

    assert_eq!(
        write_abort_marker(&mut c, "nope", pid, epoch, coord).await,
        ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.0
    );
    assert_eq!(
        write_abort_marker(&mut c, TOPIC, pid, epoch - 1, coord).await,
        ErrorCode::INVALID_PRODUCER_EPOCH.0,
        "a marker below the producer's epoch"
    );
    assert_eq!(
        fetch(&mut c, 0, 1).await.last_stable_offset,
        0,
        "still open"
    );
    assert_eq!(
        write_abort_marker(&mut c, TOPIC, pid, epoch, coord).await,
        0
    );
    let rc = fetch(&mut c, 0, 1).await;
    assert_eq!(rc.last_stable_offset, 3, "two records and the abort marker");
    assert!(committed_values(&rc).is_empty());
    b.shutdown().await;
}
