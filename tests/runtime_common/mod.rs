//! Shared helpers of the runtime tests: an embedded broker with short
//! share-group timers, topics, inputs, waiting, and checks.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::time::Duration;

use crate::common::broker::TestBroker;
use bytes::Bytes;
use sharestream::broker::BrokerHandle;
use sharestream::broker::group::ShareGroupBrokerConfig;
use sharestream::broker::group::config::AbortedRecordState;
use sharestream::client::admin::{AdminClient, AlterConfigOp, NewTopic};
use sharestream::client::{ConnectionConfig, Metadata, Producer, ProducerConfig, ProducerRecord};
use sharestream::eos::ledger::{LedgerRecord, encode, ledger_key};
use sharestream::protocol::records::RecordHeader;
use sharestream::runtime::verify::{CommittedRecord, read_committed};
use sharestream::runtime::{RuntimeConfig, RuntimeHandle};
use uuid::Uuid;

/// A broker whose share groups time out members and locks in about a
/// second, so that a dropped worker's records come back quickly.
pub async fn broker_with(share_version: i16) -> BrokerHandle {
    broker_with_locks(
        share_version,
        ShareGroupBrokerConfig::default().partition_max_record_locks,
    )
    .await
}

/// A broker whose share partitions hold at most `record_locks` records in
/// flight (`group.share.partition.max.record.locks`).
pub async fn broker_with_locks(share_version: i16, record_locks: i32) -> BrokerHandle {
    broker_configured(share_version, |c| {
        c.partition_max_record_locks = record_locks
    })
    .await
}

/// A broker whose share groups lock acquired records for `ms`
/// (`group.share.record.lock.duration.ms`).
pub async fn broker_with_lock_ms(ms: i32) -> BrokerHandle {
    broker_configured(3, |c| c.record_lock_duration_ms = ms).await
}

/// A broker whose KIP-1289 aborts put the staged records in `state`
/// (`group.share.transaction.abort.record.state`, D25).
pub async fn broker_with_abort_state(state: AbortedRecordState) -> BrokerHandle {
    broker_configured(3, |c| c.transaction_abort_record_state = state).await
}

async fn broker_configured(
    share_version: i16,
    f: impl FnOnce(&mut ShareGroupBrokerConfig),
) -> BrokerHandle {
    crate::common::broker::init_tracing();
    let mut share_groups = ShareGroupBrokerConfig {
        session_timeout_ms: 1_500,
        min_session_timeout_ms: 1_000,
        heartbeat_interval_ms: 200,
        min_heartbeat_interval_ms: 100,
        record_lock_duration_ms: 1_500,
        min_record_lock_duration_ms: 1_000,
        ..ShareGroupBrokerConfig::default()
    };
    f(&mut share_groups);
    TestBroker::in_memory()
        .configure(|c| {
            c.share_version = share_version;
            c.share_groups = share_groups;
        })
        .start()
        .await
        .b
}

pub async fn broker() -> BrokerHandle {
    broker_with(3).await
}

pub fn admin(b: &BrokerHandle) -> AdminClient {
    AdminClient::new(vec![b.bootstrap_servers()], ConnectionConfig::default())
}

/// Creates `topics` (name, partitions) and makes `group` start at the
/// earliest offset. Returns the topic ids.
pub async fn setup(b: &BrokerHandle, group: &str, topics: &[(&str, i32)]) -> Vec<Uuid> {
    let a = admin(b);
    let mut ids = Vec::new();
    for (t, p) in topics {
        ids.push(a.create_topic(NewTopic::new(*t, *p)).await.unwrap());
    }
    a.incremental_alter_group_config(
        group,
        &[(
            "share.auto.offset.reset",
            AlterConfigOp::Set("earliest".into()),
        )],
    )
    .await
    .unwrap();
    ids
}

/// Produces `n` records `k{i}` / `v{i}` with a header `i`, round-robin
/// over `partitions`.
pub async fn produce_inputs(b: &BrokerHandle, topic: &str, partitions: i32, n: usize) {
    produce_inputs_from(b, topic, partitions, 0, n).await
}

/// [`produce_inputs`] of inputs `from..from + n`.
pub async fn produce_inputs_from(
    b: &BrokerHandle,
    topic: &str,
    partitions: i32,
    from: usize,
    n: usize,
) {
    let p = Producer::new(
        ProducerConfig::builder()
            .bootstrap_servers(b.bootstrap_servers())
            .linger(Duration::from_millis(2))
            .build()
            .unwrap(),
    )
    .await
    .unwrap();
    let mut futures = Vec::new();
    for i in from..from + n {
        futures.push(p.send(input_record(topic, partitions, i)).await);
    }
    for f in futures {
        f.await.unwrap();
    }
    p.close().await;
}

fn input_record(topic: &str, partitions: i32, i: usize) -> ProducerRecord {
    let mut r = ProducerRecord::new(topic, format!("v{i}"))
        .with_key(format!("k{i}"))
        .with_partition(i as i32 % partitions);
    r.headers = vec![RecordHeader::new("i", Some(Bytes::from(i.to_string())))];
    r.timestamp = Some(1_700_000_000_000 + i as i64);
    r
}

/// [`produce_inputs`] in transactions of `per_txn` records: every
/// transaction leaves a commit marker in each partition it wrote, which
/// share consumers acquire without data (a gap).
pub async fn produce_inputs_in_transactions(
    b: &BrokerHandle,
    topic: &str,
    partitions: i32,
    n: usize,
    per_txn: usize,
) {
    let p = Producer::new(
        ProducerConfig::builder()
            .bootstrap_servers(b.bootstrap_servers())
            .linger(Duration::from_millis(2))
            .transactional_id("inputs")
            .build()
            .unwrap(),
    )
    .await
    .unwrap();
    p.init_transactions().await.unwrap();
    for chunk in (0..n).collect::<Vec<_>>().chunks(per_txn) {
        p.begin_transaction().unwrap();
        for &i in chunk {
            drop(p.send(input_record(topic, partitions, i)).await);
        }
        p.commit_transaction().await.unwrap();
    }
    p.close().await;
}

pub fn config(b: &BrokerHandle, app: &str) -> RuntimeConfig {
    RuntimeConfig {
        application_id: app.into(),
        bootstrap_servers: vec![b.bootstrap_servers()],
        commit_interval: Duration::from_millis(50),
        max_records_per_transaction: 100,
        max_poll_records: 50,
        transaction_timeout: Duration::from_secs(10),
        shutdown_timeout: Duration::from_secs(5),
        request_timeout: Duration::from_secs(5),
        ..RuntimeConfig::default()
    }
}

/// Waits until `done()` or panics after `secs`.
pub async fn wait_until(secs: u64, what: &str, mut done: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    while !done() {
        if tokio::time::Instant::now() > deadline {
            panic!("timed out waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until the runtime committed `n` source records.
pub async fn wait_committed(h: &RuntimeHandle, n: u64) {
    let m = h.metrics().clone();
    wait_until(30, &format!("{n} committed records"), || {
        m.records_committed
            .load(std::sync::atomic::Ordering::Relaxed)
            >= n
    })
    .await;
}

pub async fn committed(b: &BrokerHandle, topic: &str) -> Vec<CommittedRecord> {
    let md = Metadata::new(vec![b.bootstrap_servers()], ConnectionConfig::default());
    read_committed(&md, topic).await.unwrap()
}

/// Counts of each value in `records`.
pub fn value_counts(records: &[CommittedRecord]) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for r in records {
        let v = String::from_utf8(r.value.clone().unwrap().to_vec()).unwrap();
        *m.entry(v).or_insert(0) += 1;
    }
    m
}

/// Asserts that `records` hold `expected(i)` for every `i < n`, each once.
pub fn assert_exactly_once(
    records: &[CommittedRecord],
    n: usize,
    expected: impl Fn(usize) -> String,
) {
    let counts = value_counts(records);
    let dupes: Vec<_> = counts.iter().filter(|(_, c)| **c > 1).collect();
    assert!(dupes.is_empty(), "duplicates: {dupes:?}");
    let missing: Vec<String> = (0..n)
        .map(&expected)
        .filter(|v| !counts.contains_key(v))
        .collect();
    assert!(
        missing.is_empty(),
        "missing {} records, e.g. {:?}",
        missing.len(),
        &missing[..missing.len().min(5)]
    );
    assert_eq!(records.len(), n, "unexpected extra records");
}

/// The share group has nothing left on `topic_id`: no record available,
/// acquired or pending, and the start offset reached the log end.
pub fn assert_group_drained(b: &BrokerHandle, group: &str, topic_id: Uuid, partitions: i32) {
    if let Err(e) = group_drained(b, group, topic_id, partitions) {
        panic!("{e}");
    }
}

/// Whether every record of the group's share partitions is terminal
/// (ACKNOWLEDGED or ARCHIVED) up to the log end; else what is not.
pub fn group_drained(
    b: &BrokerHandle,
    group: &str,
    topic_id: Uuid,
    partitions: i32,
) -> Result<(), String> {
    for p in 0..partitions {
        let runs = b.core().shares().record_runs(group, topic_id, p);
        let (start, end) = b
            .core()
            .shares()
            .partition_offsets(group, topic_id, p)
            .unwrap_or((0, 0));
        let log_end = b
            .core()
            .partition(topic_id, p)
            .map(|l| l.lock().log_end_offset())
            .unwrap();
        let open: Vec<_> = runs
            .iter()
            .filter(|(_, _, info)| {
                let s = format!("{:?}", info.state);
                !(s.contains("Acknowledged") || s.contains("Archived"))
            })
            .collect();
        if !(open.is_empty() && start.max(end) >= log_end) {
            return Err(format!(
                "partition {p}: start {start} end {end} log end {log_end}, open runs {open:?}"
            ));
        }
    }
    Ok(())
}

/// The topology of most runtime tests: `in` (UTF-8 key and value) through
/// `map_values(v -> "out-" + v)` to `out`, in share group `group`.
pub fn map_values_topology(group: &str) -> sharestream::topology::Topology {
    use sharestream::topology::{Serdes, StreamsBuilder};
    let b = StreamsBuilder::new(group);
    b.stream::<String, String>("in", Serdes::string(), Serdes::string())
        .map_values(|v| format!("out-{v}"))
        .to("out", Serdes::string(), Serdes::string());
    b.build().unwrap()
}

/// Waits until `topic` holds at least `n` committed records (30 s at most).
pub async fn wait_output(b: &sharestream::broker::BrokerHandle, topic: &str, n: usize) {
    wait_output_for(b, topic, n, Duration::from_secs(30)).await
}

/// Waits until `topic` holds at least `n` committed records, `limit` at most.
pub async fn wait_output_for(
    b: &sharestream::broker::BrokerHandle,
    topic: &str,
    n: usize,
    limit: Duration,
) {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        let have = committed(b, topic).await.len();
        if have >= n {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {n} outputs in {topic} (have {have})"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until `done().await` or panics after `secs`.
pub async fn wait_until_async<F, Fut>(secs: u64, what: &str, mut done: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    while !done().await {
        if tokio::time::Instant::now() > deadline {
            panic!("timed out waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

// ------------------------------------------------------------ the ledger

/// A transactional producer with its own id on `b`.
pub async fn txn_producer(b: &BrokerHandle, id: &str) -> Producer {
    let p = Producer::new(
        ProducerConfig::builder()
            .bootstrap_servers(b.bootstrap_servers())
            .transactional_id(id)
            .transaction_timeout(Duration::from_secs(60))
            .build()
            .unwrap(),
    )
    .await
    .unwrap();
    p.init_transactions().await.unwrap();
    p
}

/// Creates a one-partition ledger topic with the configs the runtime
/// requires (nothing deleted by time or size).
pub async fn create_ledger(b: &BrokerHandle, name: &str) {
    let mut t = NewTopic::new(name, 1);
    t.configs.insert("retention.ms".into(), "-1".into());
    t.configs.insert("retention.bytes".into(), "-1".into());
    admin(b).create_topic(t).await.unwrap();
}

/// Sends an intent of `tx` for offsets `first..=last` of `in`-`partition`
/// into ledger partition 0 of a one-partition ledger, in `p`'s open
/// transaction.
pub async fn send_intent(
    p: &Producer,
    ledger: &str,
    topic_id: Uuid,
    partition: i32,
    (first, last): (i64, i64),
    tx: &str,
) {
    let value = encode(&LedgerRecord::Intent {
        group: "g".into(),
        topic: "in".into(),
        ranges: vec![(first, last)],
        transactional_id: tx.into(),
        ledger_partitions: 1,
    });
    let r = ProducerRecord {
        topic: ledger.into(),
        partition: Some(0),
        key: Some(ledger_key((topic_id, partition))),
        value: Some(value),
        headers: Vec::new(),
        timestamp: None,
    };
    p.send(r).await.await.unwrap();
}
