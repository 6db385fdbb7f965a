//! KIP-1289 end to end with our clients against the embedded broker: the
//! KIP's pseudo-code loop (share consumer + transactional producer) commits
//! outputs and acknowledgements atomically, abort hands the records back,
//! fencing is fatal, a stale member epoch is abortable, share.version < 3 is
//! refused before anything reaches the wire; and two share consumers split
//! one partition.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use common::RawClient;
use common::broker::{Started, TestBroker};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::messages::{FetchRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use sharestream::broker::group::config::AbortedRecordState;
use sharestream::broker::share::RecordState;
use sharestream::broker::{BrokerConfig, BrokerHandle};
use sharestream::client::ProducerRecord;
use sharestream::client::admin::AdminClient;
use sharestream::client::producer::TransactionState;
use sharestream::client::share_consumer::{
    AcknowledgementMode, ShareConsumer, ShareConsumerConfig, ShareRecord, TransactionOutcome,
};
use sharestream::client::{ClientError, ConnectionConfig, Producer, ProducerConfig, ProducerError};
use sharestream::eos::AcknowledgeType;
use sharestream::protocol::ErrorCode;
use uuid::Uuid;

const POLL: Duration = Duration::from_millis(200);

struct Env {
    broker: BrokerHandle,
    admin: AdminClient,
    input_id: Uuid,
}

/// A broker with topics `in` and `out` (one partition each), `n` records
/// `v0..` in `in`, and `share.auto.offset.reset=earliest` on `group`.
async fn setup(config: BrokerConfig, n: usize, group: &str) -> Env {
    let _ = tracing_subscriber::fmt().with_test_writer().try_init();
    let Started {
        b: broker, topics, ..
    } = TestBroker::with_config(config)
        .topic("in", 1)
        .topic("out", 1)
        .earliest(group)
        .start()
        .await;
    let input_id = topics[0];
    let admin = AdminClient::new(
        vec![broker.bootstrap_servers()],
        ConnectionConfig::default(),
    );
    // Small batches: the broker acquires whole batches, so consumers
    // sharing the partition get to split it.
    let p = Producer::new(producer_config(&broker).batch_size(256).build().unwrap())
        .await
        .unwrap();
    let mut sends = Vec::new();
    for i in 0..n {
        sends.push(p.send(ProducerRecord::new("in", format!("v{i}"))).await);
    }
    for s in sends {
        s.await.unwrap();
    }
    p.close().await;
    Env {
        broker,
        admin,
        input_id,
    }
}

fn producer_config(b: &BrokerHandle) -> sharestream::client::config::ProducerConfigBuilder {
    ProducerConfig::builder()
        .bootstrap_servers(b.bootstrap_servers())
        .linger(Duration::from_millis(1))
        .delivery_timeout(Duration::from_secs(10))
}

async fn txn_producer(b: &BrokerHandle, id: &str) -> Producer {
    let p = Producer::new(producer_config(b).transactional_id(id).build().unwrap())
        .await
        .unwrap();
    p.init_transactions().await.unwrap();
    p
}

fn consumer_config(b: &BrokerHandle, group: &str, max_poll: usize) -> ShareConsumerConfig {
    ShareConsumerConfig::builder(group)
        .bootstrap_servers([b.bootstrap_servers()])
        .acknowledgement_mode(AcknowledgementMode::Explicit)
        .max_poll_records(max_poll)
        .fetch_max_wait(Duration::from_millis(50))
        .build()
        .unwrap()
}

fn consumer(b: &BrokerHandle, group: &str, max_poll: usize) -> ShareConsumer {
    let mut c = ShareConsumer::new(consumer_config(b, group, max_poll)).unwrap();
    c.subscribe(["in"]).unwrap();
    c
}

/// Polls until a non-empty batch arrives (bounded).
async fn poll_some(c: &mut ShareConsumer) -> Vec<ShareRecord> {
    for _ in 0..100 {
        let r = c.poll(POLL).await.unwrap();
        if !r.is_empty() {
            return r.into_iter().collect();
        }
    }
    panic!("no records after 100 polls");
}

fn value(r: &ShareRecord) -> String {
    String::from_utf8(r.value.clone().unwrap().to_vec()).unwrap()
}

async fn fetch(b: &BrokerHandle, topic: &str) -> PartitionData {
    let mut c = RawClient::connect(b.local_addr()).await;
    let req = FetchRequest::default()
        .with_max_wait_ms(0)
        .with_min_bytes(0)
        .with_max_bytes(10 << 20)
        .with_isolation_level(1)
        .with_session_epoch(-1)
        .with_topics(vec![
            FetchTopic::default()
                .with_topic(TopicName(StrBytes::from_string(topic.to_string())))
                .with_partitions(vec![
                    FetchPartition::default()
                        .with_partition(0)
                        .with_fetch_offset(0)
                        .with_partition_max_bytes(8 << 20),
                ]),
        ]);
    let mut r = c.send(&req, 12).await;
    r.responses.remove(0).partitions.remove(0)
}

/// The values a read_committed consumer returns from partition 0 of
/// `topic`.
async fn committed_values(b: &BrokerHandle, topic: &str) -> Vec<String> {
    let p = fetch(b, topic).await;
    assert_eq!(p.error_code, 0);
    common::records::committed_values(&p)
}

/// The states of the share partition `in`-0 of `group`, one per offset.
fn share_states(env: &Env, group: &str) -> BTreeMap<i64, RecordState> {
    let mut out = BTreeMap::new();
    for (first, last, info) in env
        .broker
        .core()
        .shares()
        .record_runs(group, env.input_id, 0)
    {
        for o in first..=last {
            out.insert(o, info.state);
        }
    }
    out
}

/// Every offset below `n` is ACKNOWLEDGED (or already behind the start
/// offset, which only moves over acknowledged or archived records).
fn assert_all_acknowledged(env: &Env, group: &str, n: i64) {
    let (spso, _) = env
        .broker
        .core()
        .shares()
        .partition_offsets(group, env.input_id, 0)
        .expect("share partition exists");
    let states = share_states(env, group);
    for o in spso..n {
        assert_eq!(
            states.get(&o),
            Some(&RecordState::Acknowledged),
            "offset {o} (SPSO {spso}): {states:?}"
        );
    }
}

/// One turn of the KIP's loop: poll, produce one output per input, stage
/// the acknowledgements, commit. Returns the input values processed.
async fn process_once(c: &mut ShareConsumer, p: &Producer) -> Vec<String> {
    let records = poll_some(c).await;
    p.begin_transaction().unwrap();
    let mut seen = Vec::new();
    for r in &records {
        let v = value(r);
        drop(p.send(ProducerRecord::new("out", format!("out-{v}"))).await);
        c.acknowledge_in_transaction(r, AcknowledgeType::Accept)
            .unwrap();
        seen.push(v);
    }
    let acks = c.take_transaction_acknowledgements().expect("acks taken");
    p.send_share_acknowledgements_to_transaction(
        acks.acknowledgements.to_batches(),
        &c.share_group_metadata(),
    )
    .await
    .unwrap();
    p.commit_transaction().await.unwrap();
    assert_eq!(
        c.transaction_outcome(acks.id, TransactionOutcome::Committed)
            .unwrap(),
        records.len()
    );
    seen
}

#[tokio::test]
async fn kip_loop_commits_outputs_and_acknowledgements_atomically() {
    const N: usize = 50;
    let env = setup(BrokerConfig::in_memory(), N, "g-loop").await;
    let p = txn_producer(&env.broker, "loop-1").await;
    // The consumer shares the producer's metadata cache.
    let mut c = ShareConsumer::with_metadata(
        consumer_config(&env.broker, "g-loop", 7),
        p.metadata().clone(),
    )
    .unwrap();
    c.subscribe(["in"]).unwrap();
    let mut seen = Vec::new();
    while seen.len() < N {
        seen.extend(process_once(&mut c, &p).await);
    }
    let want: Vec<String> = (0..N).map(|i| format!("v{i}")).collect();
    let mut got = seen.clone();
    got.sort();
    let mut want_sorted = want.clone();
    want_sorted.sort();
    assert_eq!(got, want_sorted, "every input processed exactly once");

    let out = committed_values(&env.broker, "out").await;
    let mut out_sorted = out.clone();
    out_sorted.sort();
    let mut expect: Vec<String> = want.iter().map(|v| format!("out-{v}")).collect();
    expect.sort();
    assert_eq!(out_sorted, expect, "outputs committed exactly once");
    assert_all_acknowledged(&env, "g-loop", N as i64);
    // Nothing left to deliver.
    let r = c.poll(Duration::from_millis(100)).await.unwrap();
    assert!(r.is_empty(), "{r:?}");
    assert_eq!(
        env.broker.core().metrics().api(95).map(|a| a.count > 0),
        Some(true)
    );
    c.close(Duration::from_secs(5)).await.unwrap();
    p.close().await;
    drop(env.admin);
    env.broker.shutdown().await;
}

/// `group.share.transaction.abort.record.state=acquired` (D6, D25): the
/// broker keeps aborted records for their member, and the consumer hands
/// them back without a fetch.
#[tokio::test]
async fn abort_hands_the_same_records_back_then_commit_takes_them() {
    const N: usize = 10;
    let mut config = BrokerConfig::in_memory();
    config.share_groups.transaction_abort_record_state = AbortedRecordState::Acquired;
    let env = setup(config, N, "g-abort").await;
    let mut c = consumer(&env.broker, "g-abort", N);
    let p = txn_producer(&env.broker, "abort-1").await;
    let mut done = 0;
    while done < N {
        let batch = poll_some(&mut c).await;
        p.begin_transaction().unwrap();
        for r in &batch {
            drop(
                p.send(ProducerRecord::new("out", format!("aborted-{}", value(r))))
                    .await,
            );
            c.acknowledge_in_transaction(r, AcknowledgeType::Accept)
                .unwrap();
        }
        let acks = c.take_transaction_acknowledgements().unwrap();
        p.send_share_acknowledgements_to_transaction(
            acks.acknowledgements.to_batches(),
            &c.share_group_metadata(),
        )
        .await
        .unwrap();
        // The staging request goes out in the background; once the broker
        // answered, the staged records are TX_PENDING.
        let pending = |env: &Env| {
            let states = share_states(env, "g-abort");
            batch
                .iter()
                .all(|r| states.get(&r.offset) == Some(&RecordState::TxPending))
        };
        for _ in 0..500 {
            if pending(&env) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert!(pending(&env), "{:?}", share_states(&env, "g-abort"));
        p.abort_transaction().await.unwrap();
        assert_eq!(
            c.transaction_outcome(acks.id, TransactionOutcome::Aborted)
                .unwrap(),
            batch.len()
        );
        let states = share_states(&env, "g-abort");
        for r in &batch {
            assert_eq!(states.get(&r.offset), Some(&RecordState::Acquired));
        }
        // The next poll hands back exactly those records.
        let again = poll_some(&mut c).await;
        let key = |rs: &[ShareRecord]| -> Vec<(i64, String)> {
            rs.iter().map(|r| (r.offset, value(r))).collect()
        };
        assert_eq!(key(&again), key(&batch));
        // Commit them this time.
        p.begin_transaction().unwrap();
        for r in &again {
            drop(
                p.send(ProducerRecord::new("out", format!("out-{}", value(r))))
                    .await,
            );
            c.acknowledge_in_transaction(r, AcknowledgeType::Accept)
                .unwrap();
        }
        let acks = c.take_transaction_acknowledgements().unwrap();
        p.send_share_acknowledgements_to_transaction(
            acks.acknowledgements.to_batches(),
            &c.share_group_metadata(),
        )
        .await
        .unwrap();
        p.commit_transaction().await.unwrap();
        c.transaction_outcome(acks.id, TransactionOutcome::Committed)
            .unwrap();
        done += again.len();
    }
    let mut out = committed_values(&env.broker, "out").await;
    out.sort();
    let mut expect: Vec<String> = (0..N).map(|i| format!("out-v{i}")).collect();
    expect.sort();
    assert_eq!(out, expect, "aborted outputs are invisible");
    assert_all_acknowledged(&env, "g-abort", N as i64);
    c.close(Duration::from_secs(5)).await.unwrap();
    p.close().await;
    env.broker.shutdown().await;
}

/// Writes `n` records `t0..` to `in` in one transaction: offsets
/// `first..first + n`, then its commit marker, which share consumers
/// acquire without data and acknowledge as a gap.
async fn produce_in_a_transaction(b: &BrokerHandle, n: usize) {
    let p = txn_producer(b, "input-writer").await;
    p.begin_transaction().unwrap();
    for i in 0..n {
        drop(p.send(ProducerRecord::new("in", format!("t{i}"))).await);
    }
    p.commit_transaction().await.unwrap();
    p.close().await;
}

/// The KIP author's branch API, with its integration test's loop
/// (ShareGroupTransactionIntegrationTest): one record per poll,
/// `acknowledge` then `acknowledgements_for_transaction` into the producer
/// with the group metadata; the first transaction aborts and its input
/// "must become available again": with the default
/// `group.share.transaction.abort.record.state=available` (D25) the next
/// polls fetch it again, without anything the consumer does. The input was
/// written in a transaction, so its commit marker is a gap.
#[tokio::test]
async fn branch_api_aborted_input_becomes_available_again_and_is_redelivered() {
    const N: usize = 6;
    let env = setup(BrokerConfig::in_memory(), 0, "g-branch").await;
    produce_in_a_transaction(&env.broker, N).await;
    let mut c = consumer(&env.broker, "g-branch", 1);
    c.set_gaps_in_transaction(true);
    let p = txn_producer(&env.broker, "branch-1").await;
    let mut committed = BTreeSet::new();
    let mut aborted: Option<String> = None;
    let mut redelivered = false;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while committed.len() < N && tokio::time::Instant::now() < deadline {
        for r in c.poll(POLL).await.unwrap() {
            let v = value(&r);
            p.begin_transaction().unwrap();
            drop(p.send(ProducerRecord::new("out", v.clone())).await);
            c.acknowledge(&r, AcknowledgeType::Accept).unwrap();
            let acks = c.acknowledgements_for_transaction().unwrap();
            assert_eq!(acks.count(AcknowledgeType::Accept), 1);
            p.send_share_acknowledgements_to_transaction(acks.clone(), &c.share_group_metadata())
                .await
                .unwrap();
            if aborted.is_none() {
                aborted = Some(v);
                p.abort_transaction().await.unwrap();
            } else {
                p.commit_transaction().await.unwrap();
                assert!(
                    committed.insert(v.clone()),
                    "committed input redelivered: {v}"
                );
                redelivered |= aborted.as_ref() == Some(&v);
            }
        }
    }
    assert_eq!(committed.len(), N, "{committed:?}");
    assert!(redelivered, "Aborted input must become available again");
    let out: BTreeSet<String> = committed_values(&env.broker, "out")
        .await
        .into_iter()
        .collect();
    assert_eq!(
        out, committed,
        "only committed transactions' outputs are visible"
    );
    // The input's commit marker, fetched by a poll without records, is
    // acknowledged as a gap at the next poll: nothing stays in flight.
    let spso = || {
        env.broker
            .core()
            .shares()
            .partition_offsets("g-branch", env.input_id, 0)
            .unwrap()
            .0
    };
    for _ in 0..50 {
        if spso() > N as i64 {
            break;
        }
        let r = c.poll(POLL).await.unwrap();
        assert!(r.is_empty(), "nothing more to deliver");
    }
    assert_eq!(spso(), N as i64 + 1, "{:?}", share_states(&env, "g-branch"));
    c.close(Duration::from_secs(5)).await.unwrap();
    p.close().await;
    env.broker.shutdown().await;
}

/// D5 on the client: with gaps in transactions (the runtime's KIP-1289
/// path), the offsets acquired without data are staged with the records
/// of the transaction (TX_PENDING until the commit) instead of being
/// acknowledged on their own.
#[tokio::test]
async fn gaps_ride_in_the_transaction_with_the_records() {
    const N: usize = 5;
    let env = setup(BrokerConfig::in_memory(), 0, "g-gaps").await;
    produce_in_a_transaction(&env.broker, N).await;
    let mut c = consumer(&env.broker, "g-gaps", 10);
    c.set_gaps_in_transaction(true);
    let p = txn_producer(&env.broker, "gaps-1").await;
    let mut records = Vec::new();
    while records.len() < N {
        records.extend(poll_some(&mut c).await);
        for r in &records {
            let _ = c.acknowledge_in_transaction(r, AcknowledgeType::Accept);
        }
    }
    p.begin_transaction().unwrap();
    let acks = c.take_transaction_acknowledgements().unwrap();
    let staged = sharestream::eos::ShareAcknowledgements::from(&acks);
    assert_eq!(staged.count(AcknowledgeType::Accept), N);
    assert_eq!(staged.count(AcknowledgeType::Gap), 1, "the commit marker");
    p.send_share_acknowledgements_to_transaction(staged, &c.share_group_metadata())
        .await
        .unwrap();
    let marker = N as i64;
    for _ in 0..500 {
        if share_states(&env, "g-gaps").get(&marker) == Some(&RecordState::TxPending) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(
        share_states(&env, "g-gaps").get(&marker),
        Some(&RecordState::TxPending),
        "the gap waits for the transaction"
    );
    p.commit_transaction().await.unwrap();
    c.transaction_outcome(acks.id, TransactionOutcome::Committed)
        .unwrap();
    let (spso, _) = env
        .broker
        .core()
        .shares()
        .partition_offsets("g-gaps", env.input_id, 0)
        .unwrap();
    assert_eq!(spso, marker + 1, "records acknowledged, gap archived");
    c.close(Duration::from_secs(5)).await.unwrap();
    p.close().await;
    env.broker.shutdown().await;
}

#[tokio::test]
async fn fenced_producer_fails_fatally_at_commit() {
    let env = setup(BrokerConfig::in_memory(), 5, "g-fence").await;
    let mut c = consumer(&env.broker, "g-fence", 5);
    let p = txn_producer(&env.broker, "fence-1").await;
    let batch = poll_some(&mut c).await;
    p.begin_transaction().unwrap();
    for r in &batch {
        drop(p.send(ProducerRecord::new("out", value(r))).await);
        c.acknowledge_in_transaction(r, AcknowledgeType::Accept)
            .unwrap();
    }
    let acks = c.take_transaction_acknowledgements().unwrap();
    p.send_share_acknowledgements_to_transaction(
        acks.acknowledgements.to_batches(),
        &c.share_group_metadata(),
    )
    .await
    .unwrap();
    // A new incarnation with the same transactional.id.
    let p2 = txn_producer(&env.broker, "fence-1").await;
    let e = p.commit_transaction().await.unwrap_err();
    assert!(e.is_fatal(), "{e}");
    assert_eq!(e.code(), Some(ErrorCode::PRODUCER_FENCED), "{e}");
    assert_eq!(p.transaction_state(), TransactionState::FatalError);
    // The fenced transaction was aborted by the new incarnation's
    // InitProducerId: nothing of it is visible. An abort the coordinator
    // imposed releases the records at the broker (docs/DESIGN.md D6), so
    // this consumer no longer holds them: it forgets them, and the broker
    // delivers them again.
    assert!(committed_values(&env.broker, "out").await.is_empty());
    c.transaction_outcome(acks.id, TransactionOutcome::Abandoned)
        .unwrap();
    let again = poll_some(&mut c).await;
    assert_eq!(
        again.iter().map(|r| r.offset).collect::<Vec<_>>(),
        batch.iter().map(|r| r.offset).collect::<Vec<_>>()
    );
    p2.begin_transaction().unwrap();
    for r in &again {
        c.acknowledge_in_transaction(r, AcknowledgeType::Accept)
            .unwrap();
    }
    let acks = c.take_transaction_acknowledgements().unwrap();
    p2.send_share_acknowledgements_to_transaction(
        acks.acknowledgements.to_batches(),
        &c.share_group_metadata(),
    )
    .await
    .unwrap();
    p2.commit_transaction().await.unwrap();
    assert_all_acknowledged(&env, "g-fence", 5);
    env.broker.shutdown().await;
}

#[tokio::test]
async fn stale_member_epoch_is_abortable_at_commit() {
    // Short heartbeats, so the first member learns the new epoch quickly.
    let mut config = BrokerConfig::in_memory();
    config.share_groups.min_heartbeat_interval_ms = 50;
    config.share_groups.heartbeat_interval_ms = 50;
    let env = setup(config, 5, "g-stale").await;
    let mut c = consumer(&env.broker, "g-stale", 5);
    let p = txn_producer(&env.broker, "stale-1").await;
    let batch = poll_some(&mut c).await;
    let old = c.share_group_metadata();
    // A second member joins: the group epoch moves, and the first member
    // takes the new epoch at its next heartbeat.
    let mut c2 = consumer(&env.broker, "g-stale", 5);
    let _ = c2.poll(Duration::from_millis(50)).await.unwrap();
    let mut moved = false;
    for _ in 0..100 {
        if c.share_group_metadata().member_epoch() > old.member_epoch() {
            moved = true;
            break;
        }
        tokio::time::timeout(Duration::from_millis(100), c.membership_changed())
            .await
            .ok();
    }
    assert!(
        moved,
        "member epoch never moved past {}",
        old.member_epoch()
    );

    p.begin_transaction().unwrap();
    for r in &batch {
        drop(p.send(ProducerRecord::new("out", value(r))).await);
        c.acknowledge_in_transaction(r, AcknowledgeType::Accept)
            .unwrap();
    }
    let acks = c.take_transaction_acknowledgements().unwrap();
    // Staging with the old snapshot is accepted locally; the broker's
    // answer surfaces at commit.
    p.send_share_acknowledgements_to_transaction(acks.acknowledgements.to_batches(), &old)
        .await
        .unwrap();
    let e = p.commit_transaction().await.unwrap_err();
    assert!(e.is_abortable(), "{e}");
    assert!(!e.is_fatal(), "{e}");
    assert_eq!(e.code(), Some(ErrorCode::STALE_MEMBER_EPOCH), "{e}");
    assert!(e.to_string().contains("STALE_MEMBER_EPOCH"), "{e}");
    assert_eq!(p.transaction_state(), TransactionState::AbortableError);
    p.abort_transaction().await.unwrap();
    c.transaction_outcome(acks.id, TransactionOutcome::Aborted)
        .unwrap();
    assert!(committed_values(&env.broker, "out").await.is_empty());

    // With the current snapshot the same records commit.
    let again = poll_some(&mut c).await;
    assert_eq!(again.len(), batch.len());
    p.begin_transaction().unwrap();
    for r in &again {
        c.acknowledge_in_transaction(r, AcknowledgeType::Accept)
            .unwrap();
    }
    let acks = c.take_transaction_acknowledgements().unwrap();
    p.send_share_acknowledgements_to_transaction(
        acks.acknowledgements.to_batches(),
        &c.share_group_metadata(),
    )
    .await
    .unwrap();
    p.commit_transaction().await.unwrap();
    assert_all_acknowledged(&env, "g-stale", 5);
    env.broker.shutdown().await;
}

#[tokio::test]
async fn share_version_2_is_refused_before_the_wire() {
    let env = setup(
        BrokerConfig {
            share_version: 2,
            ..BrokerConfig::in_memory()
        },
        3,
        "g-old",
    )
    .await;
    let mut c = consumer(&env.broker, "g-old", 3);
    let p = txn_producer(&env.broker, "old-1").await;
    let batch = poll_some(&mut c).await;
    p.begin_transaction().unwrap();
    for r in &batch {
        c.acknowledge_in_transaction(r, AcknowledgeType::Accept)
            .unwrap();
    }
    let acks = c.take_transaction_acknowledgements().unwrap();
    let e = p
        .send_share_acknowledgements_to_transaction(
            acks.acknowledgements.to_batches(),
            &c.share_group_metadata(),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(
            e,
            ProducerError::Client(ClientError::UnsupportedVersion { api_key: 95, .. })
        ),
        "{e}"
    );
    assert!(e.is_fatal());
    assert!(
        env.broker.core().metrics().api(95).is_none(),
        "no TxnShareAcknowledge reached the broker"
    );
    env.broker.shutdown().await;
}

#[tokio::test]
async fn two_consumers_share_one_partition() {
    const N: usize = 200;
    let env = setup(BrokerConfig::in_memory(), N, "g-two").await;
    let mut a = consumer(&env.broker, "g-two", 10);
    let mut b = consumer(&env.broker, "g-two", 10);
    // Both members hold the partition before anyone fetches.
    for c in [&mut a, &mut b] {
        let mut assigned = !c.assignment().is_empty();
        for _ in 0..100 {
            if assigned {
                break;
            }
            let _ = tokio::time::timeout(Duration::from_millis(100), c.membership_changed()).await;
            assigned = !c.assignment().is_empty();
        }
        assert!(assigned, "no assignment");
    }
    let mut got_a: Vec<i64> = Vec::new();
    let mut got_b: Vec<i64> = Vec::new();
    for _ in 0..400 {
        if got_a.len() + got_b.len() >= N {
            break;
        }
        for (c, got) in [(&mut a, &mut got_a), (&mut b, &mut got_b)] {
            let records = c.poll(Duration::from_millis(30)).await.unwrap();
            for r in &records {
                c.acknowledge(r, AcknowledgeType::Accept).unwrap();
                got.push(r.offset);
            }
        }
    }
    a.commit_sync(Duration::from_secs(5)).await.unwrap();
    b.commit_sync(Duration::from_secs(5)).await.unwrap();
    assert!(!got_a.is_empty(), "consumer a got nothing");
    assert!(!got_b.is_empty(), "consumer b got nothing");
    let all: BTreeSet<i64> = got_a.iter().chain(&got_b).copied().collect();
    assert_eq!(all.len(), got_a.len() + got_b.len(), "no duplicates");
    assert_eq!(
        all,
        (0..N as i64).collect::<BTreeSet<_>>(),
        "union covers all"
    );
    assert_all_acknowledged(&env, "g-two", N as i64);
    a.close(Duration::from_secs(5)).await.unwrap();
    b.close(Duration::from_secs(5)).await.unwrap();
    env.broker.shutdown().await;
}
