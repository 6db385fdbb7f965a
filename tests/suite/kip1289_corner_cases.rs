//! KIP-1289 corner cases (numbered as in the KIP; there is no case 4), each
//! asserting the behaviour docs/DESIGN.md section 3 decides, against the
//! embedded broker over sockets. Cases that need injected faults (2, 13 and
//! the blocked-marker half of 14) are in `kip1289_failpoints.rs`.

use crate::common;

use common::RawClient;
use common::broker::{Started, TestBroker, advance};
use common::kip::*;
use kafka_protocol::messages::update_features_request::FeatureUpdateKey;
use kafka_protocol::messages::*;
use sharestream::broker::clock::ManualClock;
use sharestream::broker::group::config::AbortedRecordState;
use sharestream::broker::share::RecordState;
use sharestream::broker::txn_service::MarkerSink;
use sharestream::broker::{Broker, BrokerConfig, BrokerHandle};
use sharestream::protocol::ErrorCode;
use uuid::Uuid;

const ACCEPT: i8 = 1;
const RELEASE: i8 = 2;
const REJECT: i8 = 3;
const GAP: i8 = 0;
const N: i64 = 10;

struct Env {
    b: BrokerHandle,
    c: RawClient,
    input: Uuid,
    epoch: i32,
    /// The broker's manual clock, when it runs on one.
    clock: Option<std::sync::Arc<ManualClock>>,
}

impl Env {
    /// Moves the broker's manual clock and runs its timers.
    fn advance(&self, ms: i64) {
        advance(&self.b, self.clock.as_ref().expect("a manual clock"), ms);
    }
}

/// A broker with INPUT (`partitions` × N records), OUTPUT, and member "m1"
/// holding every input record ACQUIRED.
async fn env(config: BrokerConfig, partitions: i32) -> Env {
    env_on(TestBroker::with_config(config), partitions).await
}

/// The corner cases check D6's abort, which returns the records to their
/// member: `acquired` (D25). `env_with_abort` picks the other.
async fn env_on(broker: TestBroker, partitions: i32) -> Env {
    env_with_abort(broker, partitions, AbortedRecordState::Acquired).await
}

async fn env_with_abort(broker: TestBroker, partitions: i32, abort: AbortedRecordState) -> Env {
    let Started {
        b,
        mut c,
        topics,
        clock,
    } = broker
        .aborted_records(abort)
        .topic(INPUT, partitions)
        .topic(OUTPUT, 1)
        .earliest(GROUP)
        .start()
        .await;
    let input = topics[0];
    for p in 0..partitions {
        produce_plain(&mut c, INPUT, p, N as usize).await;
    }
    let epoch = join(&mut c, "m1").await;
    let parts: Vec<i32> = (0..partitions).collect();
    let got = acquire(&mut c, "m1", input, &parts, 0).await;
    for p in 0..partitions {
        assert!(
            got.contains(&(p, 0, N - 1)),
            "m1 must hold all of partition {p}: {got:?}"
        );
    }
    Env {
        b,
        c,
        input,
        epoch,
        clock,
    }
}

fn all(b: &BrokerHandle, input: Uuid, p: i32) -> Vec<Seen> {
    states(b, input, p, 0..=N - 1)
}

fn uniform(s: Seen) -> Vec<Seen> {
    vec![s; N as usize]
}

const TX_PENDING: Seen = Seen::State(RecordState::TxPending);
const ACQUIRED: Seen = Seen::State(RecordState::Acquired);
const AVAILABLE: Seen = Seen::State(RecordState::Available);
const TERMINAL: Seen = Seen::Terminal;

async fn stage_all(e: &mut Env, txn: &str, pid: i64, epoch: i16, ty: i8) -> TxnShareAckResp {
    let req = stage_req(
        txn,
        pid,
        epoch,
        "m1",
        e.epoch,
        e.input,
        &[(0, 0, N - 1, ty)],
    );
    stage(&mut e.c, &req).await
}

type TxnShareAckResp = sharestream::protocol::txn_share_ack::TxnShareAcknowledgeResponse;

/// Produces one transactional output record (Produce v12 registers OUTPUT).
async fn produce_output(e: &mut Env, txn: &str, pid: i64, epoch: i16, seq: i32) {
    use sharestream::protocol::records::{BatchSpec, Record, encode_batch};
    let batch = encode_batch(
        &BatchSpec {
            producer_id: pid,
            producer_epoch: epoch,
            base_sequence: seq,
            transactional: true,
            ..BatchSpec::default()
        },
        &[Record::new(
            0,
            1,
            None,
            Some(bytes::Bytes::from_static(b"out")),
        )],
    )
    .unwrap();
    let r =
        e.c.send(&produce_req(OUTPUT, 0, batch, Some(txn)), 12)
            .await;
    assert_eq!(r.responses[0].partition_responses[0].error_code, 0);
}

fn lso(b: &BrokerHandle, topic: &str) -> i64 {
    let id = b.core().topics().read().get(topic).unwrap().id;
    b.core()
        .partition(id, 0)
        .unwrap()
        .lock()
        .last_stable_offset()
}

#[tokio::test]
async fn staging_then_commit_acknowledges_and_publishes_outputs_atomically() {
    let mut e = env(BrokerConfig::in_memory(), 1).await;
    let (pid, epoch) = init_pid(&mut e.c, "t", 60_000).await;
    produce_output(&mut e, "t", pid, epoch, 0).await;
    let r = stage_all(&mut e, "t", pid, epoch, ACCEPT).await;
    assert_eq!(r.error_code, 0);
    assert_eq!(partition_errors(&r), vec![(0, 0)]);
    assert_eq!(all(&e.b, e.input, 0), uniform(TX_PENDING));
    assert_eq!(e.b.core().txn_pending_records(), N as u64);
    let metrics = sharestream::broker::metrics_http::render(e.b.core());
    assert!(
        metrics.contains(&format!("sharestream_txn_pending_records_count {N}")),
        "{metrics}"
    );
    assert!(
        metrics.contains("sharestream_transaction_share_participants_count 1"),
        "{metrics}"
    );
    assert!(metrics.contains("sharestream_txn_share_acknowledge_request_latency_ms_p99"));
    assert_eq!(lso(&e.b, OUTPUT), 0, "output invisible before the commit");
    let r = end_txn(&mut e.c, "t", pid, epoch, true).await;
    assert_eq!(r.error_code, 0);
    assert_eq!(all(&e.b, e.input, 0), uniform(TERMINAL));
    assert_eq!(lso(&e.b, OUTPUT), 2, "output and its commit marker");
    assert_eq!(e.b.core().txn_pending_records(), 0);
}

#[tokio::test]
async fn reject_in_a_transaction_archives_on_commit_and_abort_reverts_to_the_member() {
    let mut e = env(BrokerConfig::in_memory(), 1).await;
    let (pid, epoch) = init_pid(&mut e.c, "t", 60_000).await;
    let r = stage_all(&mut e, "t", pid, epoch, REJECT).await;
    assert_eq!(partition_errors(&r), vec![(0, 0)]);
    let r = end_txn(&mut e.c, "t", pid, epoch, false).await;
    assert_eq!(r.error_code, 0);
    // D6: back to ACQUIRED for the same member, delivery count unchanged.
    let i = info(&e.b, e.input, 0, 0);
    assert_eq!(
        (i.state, i.member_id.as_deref(), i.delivery_count),
        (RecordState::Acquired, Some("m1"), 1)
    );
    // Stage again with the bumped epoch and commit: REJECT archives.
    let epoch = r.producer_epoch;
    let r = stage_all(&mut e, "t", pid, epoch, REJECT).await;
    assert_eq!(partition_errors(&r), vec![(0, 0)]);
    assert_eq!(end_txn(&mut e.c, "t", pid, epoch, true).await.error_code, 0);
    assert_eq!(all(&e.b, e.input, 0), uniform(TERMINAL));
}

/// D25, the default (`group.share.transaction.abort.record.state=available`):
/// as the KIP author's branch and its ShareGroupTransactionIntegrationTest
/// have it, "aborted input must become available again" and is
/// redelivered by the next fetch, here with its staged gap.
#[tokio::test]
async fn by_default_an_aborted_transactions_records_become_available_and_are_redelivered() {
    let mut e = env_with_abort(TestBroker::in_memory(), 1, AbortedRecordState::Available).await;
    let (pid, epoch) = init_pid(&mut e.c, "t", 60_000).await;
    let req = stage_req(
        "t",
        pid,
        epoch,
        "m1",
        e.epoch,
        e.input,
        &[(0, 0, 3, ACCEPT), (0, 4, 4, GAP), (0, 5, N - 1, REJECT)],
    );
    assert_eq!(partition_errors(&stage(&mut e.c, &req).await), vec![(0, 0)]);
    assert_eq!(all(&e.b, e.input, 0), uniform(TX_PENDING));
    let r = end_txn(&mut e.c, "t", pid, epoch, false).await;
    assert_eq!(r.error_code, 0);
    // AVAILABLE, for any member, delivery count not raised by the abort.
    assert_eq!(all(&e.b, e.input, 0), uniform(AVAILABLE));
    assert_eq!(info(&e.b, e.input, 0, 0).delivery_count, 1);
    // The next fetch delivers them again (a second delivery).
    let got = acquire(&mut e.c, "m1", e.input, &[0], 1).await;
    assert_eq!(got, vec![(0, 0, N - 1)]);
    assert_eq!(info(&e.b, e.input, 0, 0).delivery_count, 2);
    // Staged again with the bumped epoch and committed: all terminal.
    let epoch = r.producer_epoch;
    let r = stage_all(&mut e, "t", pid, epoch, ACCEPT).await;
    assert_eq!(partition_errors(&r), vec![(0, 0)]);
    assert_eq!(end_txn(&mut e.c, "t", pid, epoch, true).await.error_code, 0);
    assert_eq!(all(&e.b, e.input, 0), uniform(TERMINAL));
}

/// D25: `acquired` keeps D6's rule for the staged gap too: back to the
/// member that staged it.
#[tokio::test]
async fn with_acquired_an_aborted_gap_returns_to_its_member() {
    let mut e = env(BrokerConfig::in_memory(), 1).await;
    let (pid, epoch) = init_pid(&mut e.c, "t", 60_000).await;
    let r = stage_all(&mut e, "t", pid, epoch, GAP).await;
    assert_eq!(partition_errors(&r), vec![(0, 0)]);
    assert_eq!(
        end_txn(&mut e.c, "t", pid, epoch, false).await.error_code,
        0
    );
    let i = info(&e.b, e.input, 0, 4);
    assert_eq!(
        (i.state, i.member_id.as_deref(), i.delivery_count),
        (RecordState::Acquired, Some("m1"), 1)
    );
}

#[tokio::test]
async fn corner_case_01_broker_crash_during_tx_pending_keeps_and_resolves_it() {
    let dir = tempfile::tempdir().unwrap();
    // The broker's clock is manual, and the restarted broker's goes on from
    // the same time: the timeout passes when the test says so.
    let mut e = env_on(TestBroker::on_disk(dir.path()).manual_clock(), 1).await;
    let clock = e.clock.clone().expect("a manual clock");
    // A transaction whose timeout will end it after the crash.
    let (pid, epoch) = init_pid(&mut e.c, "t", 1_000).await;
    produce_output(&mut e, "t", pid, epoch, 0).await;
    assert_eq!(
        partition_errors(&stage_all(&mut e, "t", pid, epoch, ACCEPT).await),
        vec![(0, 0)]
    );
    let input = e.input;
    e.b.kill().await;

    let Started { b, .. } = TestBroker::on_disk(dir.path())
        .configure(|c| c.clock = clock.clone())
        .start()
        .await;
    // TX_PENDING survived the crash (D9): nothing was lost or released.
    assert_eq!(all(&b, input, 0), uniform(TX_PENDING));
    advance(&b, &clock, 1_000);
    assert_eq!(all(&b, input, 0), uniform(TX_PENDING), "ended early");
    // The transaction times out; its staged records revert. The member is
    // gone after the restart, so they become AVAILABLE (delivery count kept).
    advance(&b, &clock, 1);
    assert_eq!(all(&b, input, 0), uniform(AVAILABLE));
    assert_eq!(info(&b, input, 0, 0).delivery_count, 1);
    assert_eq!(b.core().txn_pending_records(), 0);
    // And the output of the aborted transaction is not visible.
    let mut c = RawClient::connect(b.local_addr()).await;
    let _ = &mut c;
    assert_eq!(lso(&b, OUTPUT), 2);
    b.shutdown().await;
}

#[tokio::test]
async fn corner_case_03_producer_fenced_mid_stage_stages_nothing() {
    let mut e = env(BrokerConfig::in_memory(), 1).await;
    let (pid, old) = init_pid(&mut e.c, "t", 60_000).await;
    let (pid2, new) = init_pid(&mut e.c, "t", 60_000).await;
    assert_eq!(pid2, pid);
    let r = stage_all(&mut e, "t", pid, old, ACCEPT).await;
    assert_eq!(r.error_code, ErrorCode::PRODUCER_FENCED.0);
    let r = stage_all(&mut e, "t", pid, new + 1, ACCEPT).await;
    assert_eq!(r.error_code, ErrorCode::INVALID_PRODUCER_EPOCH.0);
    let r = stage_all(&mut e, "t", pid + 1000, new, ACCEPT).await;
    assert_eq!(r.error_code, ErrorCode::INVALID_PRODUCER_ID_MAPPING.0);
    let r = stage_all(&mut e, "nope", pid, new, ACCEPT).await;
    assert_eq!(r.error_code, ErrorCode::TRANSACTIONAL_ID_NOT_FOUND.0);
    assert_eq!(all(&e.b, e.input, 0), uniform(ACQUIRED));
}

fn marker(
    producer_id: i64,
    producer_epoch: i16,
    commit: bool,
    imposed: bool,
) -> sharestream::broker::txn::MarkerRequest {
    sharestream::broker::txn::MarkerRequest {
        transactional_id: "t".into(),
        producer_id,
        producer_epoch,
        coordinator_epoch: 0,
        commit,
        participants: Vec::new(),
        transaction_version: sharestream::broker::txn::TransactionVersion::V2,
        imposed,
    }
}

#[tokio::test]
async fn corner_case_05_duplicate_marker_delivery_is_a_no_op() {
    let mut e = env(BrokerConfig::in_memory(), 1).await;
    let (pid, epoch) = init_pid(&mut e.c, "t", 60_000).await;
    assert_eq!(
        partition_errors(&stage_all(&mut e, "t", pid, epoch, ACCEPT).await),
        vec![(0, 0)]
    );
    let r = end_txn(&mut e.c, "t", pid, epoch, true).await;
    assert_eq!(r.error_code, 0);
    assert_eq!(all(&e.b, e.input, 0), uniform(TERMINAL));
    // The same marker again, and a contradicting one, change nothing (D10).
    let core = e.b.core();
    for (commit, imposed) in [(true, false), (false, false), (false, true)] {
        let ack = core.write_share_marker(
            GROUP,
            e.input,
            0,
            &marker(pid, r.producer_epoch, commit, imposed),
        );
        assert_eq!(ack, sharestream::broker::txn::MarkerAck::Written);
    }
    // A marker for a producer that staged nothing is a no-op too.
    core.write_share_marker(GROUP, e.input, 0, &marker(9999, 0, false, false));
    assert_eq!(all(&e.b, e.input, 0), uniform(TERMINAL));
}

#[tokio::test]
async fn corner_case_06_lock_expiry_while_tx_pending_does_not_redeliver() {
    let broker = TestBroker::in_memory()
        .lock_duration_ms(1_000)
        .manual_clock();
    let mut e = env_on(broker, 1).await;
    let (pid, epoch) = init_pid(&mut e.c, "t", 60_000).await;
    assert_eq!(
        partition_errors(&stage_all(&mut e, "t", pid, epoch, ACCEPT).await),
        vec![(0, 0)]
    );
    // The locks' deadline passes (the broker's clock, no real wait).
    e.advance(1_600);
    // Another member finds nothing to acquire: TX_PENDING is never redelivered.
    let mut c2 = RawClient::connect(e.b.local_addr()).await;
    join(&mut c2, "m2").await;
    let got = acquire(&mut c2, "m2", e.input, &[0], 0).await;
    assert!(got.is_empty(), "redelivered while pending: {got:?}");
    assert_eq!(all(&e.b, e.input, 0), uniform(TX_PENDING));
    // The would-be expiries are counted (TxnPendingLockExpiredCount).
    assert_eq!(
        e.b.core().shares().txn_pending_lock_expired_total(),
        N as u64
    );
    let metrics = sharestream::broker::metrics_http::render(e.b.core());
    assert!(
        metrics.contains(&format!("sharestream_txn_pending_lock_expired_count {N}")),
        "{metrics}"
    );
    assert_eq!(end_txn(&mut e.c, "t", pid, epoch, true).await.error_code, 0);
    assert_eq!(all(&e.b, e.input, 0), uniform(TERMINAL));
}

#[tokio::test]
async fn corner_case_07_transaction_timeout_while_tx_pending_reverts() {
    let mut e = env_on(TestBroker::in_memory().manual_clock(), 1).await;
    let (pid, epoch) = init_pid(&mut e.c, "t", 300).await;
    assert_eq!(
        partition_errors(&stage_all(&mut e, "t", pid, epoch, ACCEPT).await),
        vec![(0, 0)]
    );
    e.advance(300);
    assert_eq!(all(&e.b, e.input, 0), uniform(TX_PENDING), "aborted early");
    // One millisecond past its timeout: its staged records revert.
    e.advance(1);
    assert_eq!(all(&e.b, e.input, 0), uniform(AVAILABLE));
    // The coordinator imposed this abort: the staging member's producer
    // expired, so the records are released at once (D6), with their
    // delivery count unchanged.
    let i = info(&e.b, e.input, 0, 0);
    assert_eq!(i.member_id, None);
    assert_eq!(i.delivery_count, 1);
    // The timed-out producer is fenced.
    let r = end_txn(&mut e.c, "t", pid, epoch, true).await;
    assert_ne!(r.error_code, 0);
}

#[tokio::test]
async fn corner_case_08_stale_member_epoch_and_unknown_member_stage_nothing() {
    let mut e = env(BrokerConfig::in_memory(), 1).await;
    let (pid, epoch) = init_pid(&mut e.c, "t", 60_000).await;
    // Another member joins: the group epoch moves; m1 catches up by heartbeat.
    let mut c2 = RawClient::connect(e.b.local_addr()).await;
    join(&mut c2, "m2").await;
    let old_epoch = e.epoch;
    let new_epoch = heartbeat(&mut e.c, "m1", old_epoch).await;
    assert!(new_epoch > old_epoch);
    let req = stage_req(
        "t",
        pid,
        epoch,
        "m1",
        old_epoch,
        e.input,
        &[(0, 0, N - 1, ACCEPT)],
    );
    assert_eq!(
        stage(&mut e.c, &req).await.error_code,
        ErrorCode::STALE_MEMBER_EPOCH.0
    );
    let req = stage_req(
        "t",
        pid,
        epoch,
        "ghost",
        new_epoch,
        e.input,
        &[(0, 0, N - 1, ACCEPT)],
    );
    assert_eq!(
        stage(&mut e.c, &req).await.error_code,
        ErrorCode::UNKNOWN_MEMBER_ID.0
    );
    assert_eq!(all(&e.b, e.input, 0), uniform(ACQUIRED));
    // With the current epoch it stages.
    let req = stage_req(
        "t",
        pid,
        epoch,
        "m1",
        new_epoch,
        e.input,
        &[(0, 0, N - 1, ACCEPT)],
    );
    assert_eq!(partition_errors(&stage(&mut e.c, &req).await), vec![(0, 0)]);
}

fn update(level: i16, upgrade_type: i8) -> UpdateFeaturesRequest {
    UpdateFeaturesRequest::default().with_feature_updates(vec![
        FeatureUpdateKey::default()
            .with_feature(s("share.version"))
            .with_max_version_level(level)
            .with_upgrade_type(upgrade_type),
    ])
}

#[tokio::test]
async fn corner_case_09_mixed_versions_rolling_upgrade() {
    let mut e = env(
        BrokerConfig {
            share_version: 2,
            ..BrokerConfig::in_memory()
        },
        1,
    )
    .await;
    let (pid, epoch) = init_pid(&mut e.c, "t", 60_000).await;
    // Feature off: not advertised, and answered UNSUPPORTED_VERSION.
    let v =
        e.c.send(
            &ApiVersionsRequest::default()
                .with_client_software_name(s("t"))
                .with_client_software_version(s("1")),
            3,
        )
        .await;
    assert!(!v.api_keys.iter().any(|k| k.api_key == 95));
    let r = stage_all(&mut e, "t", pid, epoch, ACCEPT).await;
    assert_eq!(r.error_code, ErrorCode::UNSUPPORTED_VERSION.0);
    assert_eq!(all(&e.b, e.input, 0), uniform(ACQUIRED));
    // Online upgrade; the same request now stages.
    assert_eq!(e.c.send(&update(3, 1), 1).await.error_code, 0);
    let r = stage_all(&mut e, "t", pid, epoch, ACCEPT).await;
    assert_eq!(partition_errors(&r), vec![(0, 0)]);
    // A downgrade is refused while records are TX_PENDING...
    let d = e.c.send(&update(2, 2), 1).await;
    assert_eq!(d.error_code, ErrorCode::INVALID_UPDATE_VERSION.0);
    // ...and allowed once the transaction resolved them.
    assert_eq!(end_txn(&mut e.c, "t", pid, epoch, true).await.error_code, 0);
    assert_eq!(e.c.send(&update(2, 2), 1).await.error_code, 0);
}

#[tokio::test]
async fn corner_case_10_invalid_ack_type_in_a_transaction() {
    let mut e = env(BrokerConfig::in_memory(), 1).await;
    let (pid, epoch) = init_pid(&mut e.c, "t", 60_000).await;
    // A gap is valid in a transaction (the KIP author's branch; D5).
    for ty in [RELEASE, 4] {
        let r = stage_all(&mut e, "t", pid, epoch, ty).await;
        assert_eq!(r.error_code, 0);
        assert_eq!(
            partition_errors(&r),
            vec![(0, ErrorCode::INVALID_RECORD_STATE.0)],
            "type {ty}"
        );
    }
    // An unknown type code, and malformed batches: INVALID_REQUEST.
    let r = stage_all(&mut e, "t", pid, epoch, 9).await;
    assert_eq!(
        partition_errors(&r),
        vec![(0, ErrorCode::INVALID_REQUEST.0)]
    );
    let req = stage_req(
        "t",
        pid,
        epoch,
        "m1",
        e.epoch,
        e.input,
        &[(0, 5, 2, ACCEPT)],
    );
    assert_eq!(
        partition_errors(&stage(&mut e.c, &req).await),
        vec![(0, ErrorCode::INVALID_REQUEST.0)]
    );
    assert_eq!(all(&e.b, e.input, 0), uniform(ACQUIRED));
}

#[tokio::test]
async fn corner_case_11_partial_multi_partition_failure_then_abort_reverts_all() {
    let mut e = env(BrokerConfig::in_memory(), 2).await;
    let (pid, epoch) = init_pid(&mut e.c, "t", 60_000).await;
    // Partition 0 stages; partition 1 names records m1 does not hold.
    let req = stage_req(
        "t",
        pid,
        epoch,
        "m1",
        e.epoch,
        e.input,
        &[(0, 0, N - 1, ACCEPT), (1, N + 5, N + 6, ACCEPT)],
    );
    let r = stage(&mut e.c, &req).await;
    assert_eq!(
        partition_errors(&r),
        vec![(0, 0), (1, ErrorCode::INVALID_RECORD_STATE.0)]
    );
    assert_eq!(all(&e.b, e.input, 0), uniform(TX_PENDING));
    assert_eq!(all(&e.b, e.input, 1), uniform(ACQUIRED));
    // The client aborts the whole transaction: everything staged reverts.
    assert_eq!(
        end_txn(&mut e.c, "t", pid, epoch, false).await.error_code,
        0
    );
    assert_eq!(all(&e.b, e.input, 0), uniform(ACQUIRED));
    // Unknown topic id and partition.
    let req = stage_req(
        "t",
        pid,
        epoch + 1,
        "m1",
        e.epoch,
        Uuid::new_v4(),
        &[(0, 0, 1, ACCEPT)],
    );
    assert_eq!(
        partition_errors(&stage(&mut e.c, &req).await),
        vec![(0, ErrorCode::UNKNOWN_TOPIC_ID.0)]
    );
    let req = stage_req(
        "t",
        pid,
        epoch + 1,
        "m1",
        e.epoch,
        e.input,
        &[(7, 0, 1, ACCEPT)],
    );
    assert_eq!(
        partition_errors(&stage(&mut e.c, &req).await),
        vec![(7, ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.0)]
    );
}

#[tokio::test]
async fn corner_case_12_share_state_moves_with_a_restart_and_the_marker_still_resolves_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut e = env(BrokerConfig::with_data_dir(dir.path()), 1).await;
    let (pid, epoch) = init_pid(&mut e.c, "t", 60_000).await;
    assert_eq!(
        partition_errors(&stage_all(&mut e, "t", pid, epoch, ACCEPT).await),
        vec![(0, 0)]
    );
    let input = e.input;
    e.b.kill().await;
    // "Leadership" of the share state moves to the restarted broker, which
    // loads it from the data directory; the same producer commits there.
    let b = Broker::start(BrokerConfig::with_data_dir(dir.path()))
        .await
        .unwrap();
    assert_eq!(all(&b, input, 0), uniform(TX_PENDING));
    let mut c = RawClient::connect(b.local_addr()).await;
    assert_eq!(end_txn(&mut c, "t", pid, epoch, true).await.error_code, 0);
    assert_eq!(all(&b, input, 0), uniform(TERMINAL));
    b.shutdown().await;
}

#[tokio::test]
async fn corner_case_14_concurrent_transactions_from_one_transactional_id() {
    let mut e = env(BrokerConfig::in_memory(), 1).await;
    let (pid, older) = init_pid(&mut e.c, "t", 60_000).await;
    assert_eq!(
        partition_errors(&stage_all(&mut e, "t", pid, older, ACCEPT).await),
        vec![(0, 0)]
    );
    // A second instance: fences the first, whose staged records are
    // released (an imposed abort, D6).
    let (_, newer) = init_pid(&mut e.c, "t", 60_000).await;
    assert!(newer > older);
    assert_eq!(all(&e.b, e.input, 0), uniform(AVAILABLE));
    // The older epoch can neither stage nor commit.
    assert_eq!(
        stage_all(&mut e, "t", pid, older, ACCEPT).await.error_code,
        ErrorCode::PRODUCER_FENCED.0
    );
    assert_eq!(
        end_txn(&mut e.c, "t", pid, older, true).await.error_code,
        ErrorCode::PRODUCER_FENCED.0
    );
    // The newer one takes them over and commits.
    let mut c2 = RawClient::connect(e.b.local_addr()).await;
    assert_eq!(
        acquire(&mut c2, "m1", e.input, &[0], 0).await,
        vec![(0, 0, N - 1)]
    );
    assert_eq!(
        partition_errors(&stage_all(&mut e, "t", pid, newer, ACCEPT).await),
        vec![(0, 0)]
    );
    assert_eq!(end_txn(&mut e.c, "t", pid, newer, true).await.error_code, 0);
    assert_eq!(all(&e.b, e.input, 0), uniform(TERMINAL));
}

#[tokio::test]
async fn non_transactional_acks_and_releases_of_tx_pending_records_are_refused() {
    // D8: while TX_PENDING, ShareAcknowledge gets INVALID_RECORD_STATE.
    use kafka_protocol::messages::share_acknowledge_request as sa;
    let mut e = env(BrokerConfig::in_memory(), 1).await;
    let (pid, epoch) = init_pid(&mut e.c, "t", 60_000).await;
    assert_eq!(
        partition_errors(&stage_all(&mut e, "t", pid, epoch, ACCEPT).await),
        vec![(0, 0)]
    );
    for (session_epoch, ty) in [(1, ACCEPT), (2, RELEASE)] {
        let r =
            e.c.send(
                &ShareAcknowledgeRequest::default()
                    .with_group_id(Some(GroupId(s(GROUP))))
                    .with_member_id(Some(s("m1")))
                    .with_share_session_epoch(session_epoch)
                    .with_topics(vec![
                        sa::AcknowledgeTopic::default()
                            .with_topic_id(e.input)
                            .with_partitions(vec![
                                sa::AcknowledgePartition::default()
                                    .with_partition_index(0)
                                    .with_acknowledgement_batches(vec![
                                        sa::AcknowledgementBatch::default()
                                            .with_first_offset(0)
                                            .with_last_offset(N - 1)
                                            .with_acknowledge_types(vec![ty]),
                                    ]),
                            ]),
                    ]),
                1,
            )
            .await;
        assert_eq!(r.error_code, 0, "{:?}", ErrorCode(r.error_code));
        let code = r.responses[0].partitions[0].error_code;
        assert_eq!(code, ErrorCode::INVALID_RECORD_STATE.0, "type {ty}");
    }
    // A member leaving does not release them either: the transaction decides.
    let r =
        e.c.send(
            &ShareGroupHeartbeatRequest::default()
                .with_group_id(GroupId(s(GROUP)))
                .with_member_id(s("m1"))
                .with_member_epoch(-1),
            1,
        )
        .await;
    assert_eq!(r.error_code, 0);
    assert_eq!(all(&e.b, e.input, 0), uniform(TX_PENDING));
    // Abort with the member gone: AVAILABLE (D6).
    assert_eq!(
        end_txn(&mut e.c, "t", pid, epoch, false).await.error_code,
        0
    );
    assert_eq!(all(&e.b, e.input, 0), uniform(AVAILABLE));
}

#[tokio::test]
async fn invalid_requests_answer_invalid_request() {
    let mut e = env(BrokerConfig::in_memory(), 1).await;
    let (pid, epoch) = init_pid(&mut e.c, "t", 60_000).await;
    let mut req = stage_req(
        "t",
        pid,
        epoch,
        "m1",
        e.epoch,
        e.input,
        &[(0, 0, N - 1, ACCEPT)],
    );
    req.group_id = None;
    assert_eq!(
        stage(&mut e.c, &req).await.error_code,
        ErrorCode::INVALID_REQUEST.0
    );
    let mut req = stage_req(
        "t",
        pid,
        epoch,
        "m1",
        e.epoch,
        e.input,
        &[(0, 0, N - 1, ACCEPT)],
    );
    req.transactional_id = None;
    assert_eq!(
        stage(&mut e.c, &req).await.error_code,
        ErrorCode::INVALID_REQUEST.0
    );
    let mut req = stage_req(
        "t",
        pid,
        epoch,
        "m1",
        e.epoch,
        e.input,
        &[(0, 0, N - 1, ACCEPT)],
    );
    req.member_id = Some(String::new());
    assert_eq!(
        stage(&mut e.c, &req).await.error_code,
        ErrorCode::INVALID_REQUEST.0
    );
    assert_eq!(all(&e.b, e.input, 0), uniform(ACQUIRED));
}

#[tokio::test]
async fn a_gap_is_valid_inside_a_transaction() {
    // The KIP author's branch: "Only ACCEPT (1), REJECT (3) and the gap
    // marker (0) are valid inside a transaction" (docs/DESIGN.md D5).
    let mut e = env(BrokerConfig::in_memory(), 1).await;
    let (pid, epoch) = init_pid(&mut e.c, "t", 60_000).await;
    let r = stage_all(&mut e, "t", pid, epoch, GAP).await;
    assert_eq!(partition_errors(&r), vec![(0, 0)]);
    assert_eq!(all(&e.b, e.input, 0), uniform(TX_PENDING));
    assert_eq!(end_txn(&mut e.c, "t", pid, epoch, true).await.error_code, 0);
    assert_eq!(all(&e.b, e.input, 0), uniform(TERMINAL));
}
