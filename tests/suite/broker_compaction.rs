//! Log compaction in the embedded broker (`cleanup.policy=compact`): the
//! latest value per key survives at its offset, Fetch, ListOffsets and
//! share groups work across the gaps, tombstones go after
//! `delete.retention.ms`, aborted transactions' records go and open ones
//! stay, keyless records are refused on produce, and the cleaner runs on
//! its own timer. The broker runs on a manual clock with its cleaner timer
//! off; each test cleans at a chosen time with `BrokerCore::clean_logs`.

use bytes::Bytes;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::*;
use sharestream::protocol::records::{
    BatchSpec, DEFAULT_MAX_DECOMPRESSED, Record, RecordBatchView, encode_batch,
};

use crate::common::RawClient;
use crate::common::broker::{Started, TestBroker};
use crate::common::dlq::{set_configs, wait_until};
use crate::common::kip::{
    GROUP, INPUT, acquire, end_txn, init_pid, join, produce_req, s, share_acknowledge,
};

/// `segment.ms` of the test topic: advancing the clock by this much makes
/// the next produce roll a segment.
const ROLL_MS: i64 = 1_000;

async fn compacted_broker(extra: &[(&str, &str)]) -> Started {
    let st = TestBroker::in_memory()
        .manual_clock()
        .configure(|c| c.log_cleaner_backoff_ms = 0)
        .topic(INPUT, 1)
        .earliest(GROUP)
        .start()
        .await;
    let mut c = RawClient::connect(st.b.local_addr()).await;
    let roll = ROLL_MS.to_string();
    let mut configs = vec![
        ("cleanup.policy", "compact"),
        ("segment.ms", roll.as_str()),
        ("min.cleanable.dirty.ratio", "0.0"),
    ];
    configs.extend_from_slice(extra);
    let (code, msg) = set_configs(&mut c, 2, INPUT, &configs).await;
    assert_eq!(code, 0, "{msg:?}");
    st
}

fn batch(kvs: &[(Option<&str>, Option<&str>)], producer: Option<(i64, i16, i32)>) -> Bytes {
    let records: Vec<Record> = kvs
        .iter()
        .enumerate()
        .map(|(i, (k, v))| {
            Record::new(
                i as i32,
                1_000,
                k.map(|k| Bytes::from(k.to_string())),
                v.map(|v| Bytes::from(v.to_string())),
            )
        })
        .collect();
    let spec = match producer {
        Some((pid, epoch, seq)) => BatchSpec {
            producer_id: pid,
            producer_epoch: epoch,
            base_sequence: seq,
            transactional: true,
            ..BatchSpec::default()
        },
        None => BatchSpec::default(),
    };
    encode_batch(&spec, &records).unwrap()
}

/// Produces one record per batch; returns the base offset.
async fn put(c: &mut RawClient, key: &str, value: Option<&str>) -> i64 {
    let r = c
        .send(
            &produce_req(INPUT, 0, batch(&[(Some(key), value)], None), None),
            9,
        )
        .await;
    let p = &r.responses[0].partition_responses[0];
    assert_eq!(p.error_code, 0, "{:?}", p.error_message);
    p.base_offset
}

/// Every (offset, key, value) a Fetch from offset 0 returns, batch by
/// batch up to the high watermark (markers left out).
async fn fetch_all(c: &mut RawClient, isolation: i8) -> Vec<(i64, String, Option<String>)> {
    let mut out = Vec::new();
    let mut offset = 0;
    loop {
        let r = c
            .send(
                &FetchRequest::default()
                    .with_max_wait_ms(0)
                    .with_min_bytes(0)
                    .with_max_bytes(1 << 20)
                    .with_isolation_level(isolation)
                    .with_session_epoch(-1)
                    .with_topics(vec![
                        FetchTopic::default()
                            .with_topic(TopicName(s(INPUT)))
                            .with_partitions(vec![
                                FetchPartition::default()
                                    .with_partition(0)
                                    .with_fetch_offset(offset)
                                    .with_partition_max_bytes(1 << 20),
                            ]),
                    ]),
                12,
            )
            .await;
        let p = &r.responses[0].partitions[0];
        assert_eq!(p.error_code, 0);
        let bytes = p.records.clone().unwrap_or_default();
        if bytes.is_empty() {
            return out;
        }
        for v in RecordBatchView::parse_all(bytes).unwrap() {
            offset = v.last_offset() + 1;
            if v.is_control() {
                continue;
            }
            for r in v.records(DEFAULT_MAX_DECOMPRESSED).unwrap() {
                let str = |b: Option<Bytes>| b.map(|b| String::from_utf8(b.to_vec()).unwrap());
                out.push((r.offset(v.base_offset()), str(r.key).unwrap(), str(r.value)));
            }
        }
    }
}

fn e(o: i64, k: &str, v: Option<&str>) -> (i64, String, Option<String>) {
    (o, k.to_string(), v.map(str::to_string))
}

async fn list_offset(c: &mut RawClient, timestamp: i64) -> i64 {
    let (error, offset, _) = crate::broker_records_admin::list_offset(c, INPUT, timestamp, 7).await;
    assert_eq!(error, 0);
    offset
}

/// a1 b1 c1 | a2 (b deleted) | d: the first two segments are closed.
async fn three_segments(st: &Started, c: &mut RawClient) {
    put(c, "a", Some("a1")).await;
    put(c, "b", Some("b1")).await;
    put(c, "c", Some("c1")).await;
    st.advance(ROLL_MS);
    put(c, "a", Some("a2")).await;
    put(c, "b", None).await;
    st.advance(ROLL_MS);
    put(c, "d", Some("d1")).await;
}

#[tokio::test]
async fn compaction_keeps_the_latest_value_per_key_and_fetch_crosses_the_gaps() {
    let st = compacted_broker(&[]).await;
    let mut c = RawClient::connect(st.b.local_addr()).await;
    three_segments(&st, &mut c).await;
    let before = fetch_all(&mut c, 0).await;
    assert_eq!(before.len(), 6);
    let o = st.b.core().clean_logs(st.b.core().now_ms());
    assert_eq!(o.superseded_records, 2, "{o:?}");
    assert_eq!(
        st.b.core()
            .metrics()
            .counter("log_cleaner_superseded_records_total"),
        2
    );
    let after = fetch_all(&mut c, 0).await;
    assert_eq!(
        after,
        vec![
            e(2, "c", Some("c1")),
            e(3, "a", Some("a2")),
            e(4, "b", None),
            e(5, "d", Some("d1"))
        ]
    );
    // Read-committed readers see the same; EARLIEST and LATEST are unchanged,
    // a timestamp lookup lands on the first record that is still there.
    assert_eq!(fetch_all(&mut c, 1).await, after);
    assert_eq!(list_offset(&mut c, -2).await, 0);
    assert_eq!(list_offset(&mut c, -1).await, 6);
    assert_eq!(list_offset(&mut c, 0).await, 2);
}

#[tokio::test]
async fn keyless_records_are_refused_on_a_compacted_topic() {
    let st = compacted_broker(&[]).await;
    let mut c = RawClient::connect(st.b.local_addr()).await;
    let r = c
        .send(
            &produce_req(
                INPUT,
                0,
                batch(&[(Some("k"), Some("v")), (None, Some("no key"))], None),
                None,
            ),
            9,
        )
        .await;
    let p = &r.responses[0].partition_responses[0];
    assert_eq!(p.error_code, 87, "INVALID_RECORD");
    assert_eq!(p.record_errors.len(), 1);
    assert_eq!(p.record_errors[0].batch_index, 1);
    assert!(p.error_message.as_ref().unwrap().contains("without key"));
    assert!(fetch_all(&mut c, 0).await.is_empty(), "nothing was written");
}

#[tokio::test]
async fn tombstones_are_removed_delete_retention_ms_after_the_cleaning_that_kept_them() {
    let st = compacted_broker(&[("delete.retention.ms", "60000")]).await;
    let mut c = RawClient::connect(st.b.local_addr()).await;
    three_segments(&st, &mut c).await;
    let core = st.b.core();
    assert_eq!(core.clean_logs(core.now_ms()).tombstones_removed, 0);
    st.advance(59_999);
    assert_eq!(core.clean_logs(core.now_ms()).tombstones_removed, 0);
    assert!(fetch_all(&mut c, 0).await.contains(&e(4, "b", None)));
    st.advance(1);
    assert_eq!(core.clean_logs(core.now_ms()).tombstones_removed, 1);
    assert_eq!(
        fetch_all(&mut c, 0).await,
        vec![
            e(2, "c", Some("c1")),
            e(3, "a", Some("a2")),
            e(5, "d", Some("d1"))
        ]
    );
    assert_eq!(
        core.metrics()
            .counter("log_cleaner_tombstones_removed_total"),
        1
    );
}

#[tokio::test]
async fn aborted_transactions_are_removed_and_an_open_transaction_is_untouched() {
    let st = compacted_broker(&[]).await;
    let mut c = RawClient::connect(st.b.local_addr()).await;
    let core = st.b.core().clone();
    let id = st.topic();
    let log = core.partition(id, 0).unwrap();
    // An aborted transaction, then a committed one, in the first segment.
    let (pid, epoch) = init_pid(&mut c, "t1", 60_000).await;
    let txn = |k: &str, v: &str, e: i16| batch(&[(Some(k), Some(v))], Some((pid, e, 0)));
    let r = c
        .send(
            &produce_req(INPUT, 0, txn("a", "aborted", epoch), Some("t1")),
            12,
        )
        .await;
    assert_eq!(r.responses[0].partition_responses[0].error_code, 0);
    let end = end_txn(&mut c, "t1", pid, epoch, false).await;
    assert_eq!(end.error_code, 0);
    wait_until("the ABORT marker", || log.lock().last_stable_offset() == 2).await;
    put(&mut c, "b", Some("b1")).await;
    st.advance(ROLL_MS);
    // An open transaction in the second segment.
    let (pid2, epoch2) = init_pid(&mut c, "t2", 60_000).await;
    let open = batch(&[(Some("b"), Some("open"))], Some((pid2, epoch2, 0)));
    let r = c.send(&produce_req(INPUT, 0, open, Some("t2")), 12).await;
    assert_eq!(r.responses[0].partition_responses[0].error_code, 0);
    st.advance(ROLL_MS);
    put(&mut c, "b", Some("b2")).await;
    let o = core.clean_logs(core.now_ms());
    assert_eq!(o.aborted_records_removed, 1, "{o:?}");
    // The open transaction's segment is beyond the LSO: b1 is not
    // superseded by anything the cleaner may look at yet.
    assert_eq!(o.superseded_records, 0);
    assert_eq!(
        fetch_all(&mut c, 0).await,
        vec![
            e(2, "b", Some("b1")),
            e(3, "b", Some("open")),
            e(4, "b", Some("b2"))
        ]
    );
    assert_eq!(log.lock().last_stable_offset(), 3);
}

#[tokio::test]
async fn a_share_group_reads_a_compacted_topic_and_skips_what_was_compacted_away() {
    let st = compacted_broker(&[]).await;
    let mut c = RawClient::connect(st.b.local_addr()).await;
    let topic = st.topic();
    three_segments(&st, &mut c).await;
    let epoch = join(&mut c, "m1").await;
    assert!(epoch > 0);
    // The member takes everything, then releases it.
    let got = acquire(&mut c, "m1", topic, &[0], 0).await;
    assert_eq!(got, vec![(0, 0, 5)]);
    let r = share_acknowledge(&mut c, "m1", 1, topic, &[(0, 5, 2)]).await;
    assert_eq!(r.error_code, 0);
    let core = st.b.core();
    assert_eq!(core.clean_logs(core.now_ms()).superseded_records, 2);
    // Offsets 0 and 1 were compacted away: they are never handed out
    // again, and the group does not stall on them.
    let again = acquire(&mut c, "m1", topic, &[0], 2).await;
    assert_eq!(again, vec![(0, 2, 5)]);
    // They are terminal: the share partition's start offset moved past them.
    let (start, _) = core
        .shares()
        .partition_offsets(GROUP, topic, 0)
        .expect("the share partition exists");
    assert_eq!(start, 2);
}

#[tokio::test]
async fn the_cleaner_runs_on_its_timer() {
    let st = TestBroker::in_memory()
        .configure(|c| c.log_cleaner_backoff_ms = 20)
        .topic(INPUT, 1)
        .start()
        .await;
    let mut c = RawClient::connect(st.b.local_addr()).await;
    let (code, msg) = set_configs(
        &mut c,
        2,
        INPUT,
        &[
            ("cleanup.policy", "compact"),
            ("segment.ms", "1"),
            ("min.cleanable.dirty.ratio", "0.0"),
        ],
    )
    .await;
    assert_eq!(code, 0, "{msg:?}");
    // segment.ms=1 on the system clock: a short sleep between produces rolls.
    put(&mut c, "a", Some("1")).await;
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    put(&mut c, "a", Some("2")).await;
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    put(&mut c, "z", Some("z")).await;
    let core = st.b.core().clone();
    wait_until("the cleaner's timer cleaned the log", || {
        core.metrics()
            .counter("log_cleaner_superseded_records_total")
            == 1
    })
    .await;
}
