//! KIP-1289 corner cases that need injected faults (the `failpoints`
//! feature, enabled by the test command). Failpoints are process-wide, so
//! these tests run one at a time and live in their own test binary.
#![cfg(feature = "failpoints")]

use crate::common;

use std::time::Duration;

use common::RawClient;
use common::broker::{Started, TestBroker, advance};
use common::kip::*;
use sharestream::broker::clock::{ManualClock, wall_clock_ms};
use sharestream::broker::share::RecordState;
use sharestream::broker::{Broker, BrokerConfig, BrokerHandle};
use sharestream::failpoints;
use sharestream::protocol::ErrorCode;
use uuid::Uuid;

use crate::SERIAL;

const ACCEPT: i8 = 1;
const N: i64 = 10;

/// Disarms every failpoint when a test ends, even by panic.
struct Disarm;
impl Drop for Disarm {
    fn drop(&mut self) {
        failpoints::disarm("txn.persist");
        failpoints::disarm("txn.share_marker");
        failpoints::disarm("share.persist");
        failpoints::disarm("share.journal.before_write");
    }
}

async fn env(config: BrokerConfig) -> (BrokerHandle, RawClient, Uuid, i32) {
    let Started {
        b, mut c, topics, ..
    } = TestBroker::with_config(config)
        .topic(INPUT, 1)
        .earliest(GROUP)
        .start()
        .await;
    let input = topics[0];
    produce_plain(&mut c, INPUT, 0, N as usize).await;
    let epoch = join(&mut c, "m1").await;
    assert_eq!(
        acquire(&mut c, "m1", input, &[0], 0).await,
        vec![(0, 0, N - 1)]
    );
    (b, c, input, epoch)
}

fn all(b: &BrokerHandle, input: Uuid) -> Vec<Seen> {
    states(b, input, 0, 0..=N - 1)
}

fn uniform(s: Seen) -> Vec<Seen> {
    vec![s; N as usize]
}

async fn wait_for(b: &BrokerHandle, input: Uuid, want: Seen) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while all(b, input) != uniform(want) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "still {:?}, wanted {want:?}",
            all(b, input)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn corner_case_02_coordinator_registration_fails_and_nothing_is_staged() {
    let _serial = SERIAL.lock().await;
    let _disarm = Disarm;
    let (b, mut c, input, epoch) = env(BrokerConfig::in_memory()).await;
    let (pid, pe) = init_pid(&mut c, "t", 60_000).await;
    let req = stage_req("t", pid, pe, "m1", epoch, input, &[(0, 0, N - 1, ACCEPT)]);
    // Registering the share participant cannot be made durable.
    failpoints::arm("txn.persist", Some(1));
    let r = stage(&mut c, &req).await;
    assert_eq!(r.error_code, ErrorCode::COORDINATOR_NOT_AVAILABLE.0);
    assert!(ErrorCode(r.error_code).is_retriable());
    assert_eq!(all(&b, input), uniform(Seen::State(RecordState::Acquired)));
    // The client retries: it stages now.
    let r = stage(&mut c, &req).await;
    assert_eq!(partition_errors(&r), vec![(0, 0)]);
    assert_eq!(end_txn(&mut c, "t", pid, pe, true).await.error_code, 0);
    assert_eq!(all(&b, input), uniform(Seen::Terminal));
    b.shutdown().await;
}

#[tokio::test]
async fn corner_case_13_markers_that_do_not_arrive_are_retried_until_acknowledged() {
    let _serial = SERIAL.lock().await;
    let _disarm = Disarm;
    // The broker's clock is manual: the marker's retries come when the
    // test moves it, not after a real second each.
    let clock = ManualClock::new(wall_clock_ms());
    let mut config = BrokerConfig::in_memory();
    config.clock = clock.clone();
    let (b, mut c, input, epoch) = env(config).await;
    let (pid, pe) = init_pid(&mut c, "t", 60_000).await;
    let req = stage_req("t", pid, pe, "m1", epoch, input, &[(0, 0, N - 1, ACCEPT)]);
    assert_eq!(partition_errors(&stage(&mut c, &req).await), vec![(0, 0)]);
    failpoints::arm("txn.share_marker", None);
    // The commit is decided; its marker does not reach the share partition,
    // neither at first nor at its retry one backoff (1 s) later.
    assert_eq!(end_txn(&mut c, "t", pid, pe, true).await.error_code, 0);
    assert_eq!(all(&b, input), uniform(Seen::State(RecordState::TxPending)));
    advance(&b, &clock, 1_000);
    assert_eq!(all(&b, input), uniform(Seen::State(RecordState::TxPending)));
    // Meanwhile the transactional id cannot start anew.
    let r = c
        .send(
            &kafka_protocol::messages::InitProducerIdRequest::default()
                .with_transactional_id(Some(kafka_protocol::messages::TransactionalId(s("t"))))
                .with_transaction_timeout_ms(60_000)
                .with_producer_id(kafka_protocol::messages::ProducerId(-1))
                .with_producer_epoch(-1),
            5,
        )
        .await;
    assert_eq!(r.error_code, ErrorCode::CONCURRENT_TRANSACTIONS.0);
    // Delivery recovers: the coordinator's next retry resolves the records.
    failpoints::disarm("txn.share_marker");
    advance(&b, &clock, 1_000);
    wait_for(&b, input, Seen::Terminal).await;
    b.shutdown().await;
}

#[tokio::test]
async fn corner_case_13_pending_markers_are_resent_after_a_broker_restart() {
    let _serial = SERIAL.lock().await;
    let _disarm = Disarm;
    let dir = tempfile::tempdir().unwrap();
    let (b, mut c, input, epoch) = env(BrokerConfig::with_data_dir(dir.path())).await;
    let (pid, pe) = init_pid(&mut c, "t", 60_000).await;
    let req = stage_req("t", pid, pe, "m1", epoch, input, &[(0, 0, N - 1, ACCEPT)]);
    assert_eq!(partition_errors(&stage(&mut c, &req).await), vec![(0, 0)]);
    failpoints::arm("txn.share_marker", None);
    assert_eq!(end_txn(&mut c, "t", pid, pe, true).await.error_code, 0);
    drop(c);
    b.kill().await;
    failpoints::disarm("txn.share_marker");
    // Recovery finds the transaction in PrepareCommit and sends its markers.
    let b = Broker::start(BrokerConfig::with_data_dir(dir.path()))
        .await
        .unwrap();
    wait_for(&b, input, Seen::Terminal).await;
    assert_eq!(b.core().txn_pending_records(), 0);
    b.shutdown().await;
}

#[tokio::test]
async fn corner_case_14_the_newer_epoch_cannot_stage_records_still_pending_for_the_older() {
    let _serial = SERIAL.lock().await;
    let _disarm = Disarm;
    let (b, mut c, input, epoch) = env(BrokerConfig::in_memory()).await;
    let (pid, older) = init_pid(&mut c, "t", 60_000).await;
    let req = stage_req(
        "t",
        pid,
        older,
        "m1",
        epoch,
        input,
        &[(0, 0, N - 1, ACCEPT)],
    );
    assert_eq!(partition_errors(&stage(&mut c, &req).await), vec![(0, 0)]);
    // The fencing abort's marker is held back: the records stay TX_PENDING
    // for the older epoch, and the newer instance must wait.
    failpoints::arm("txn.share_marker", None);
    let r = c
        .send(
            &kafka_protocol::messages::InitProducerIdRequest::default()
                .with_transactional_id(Some(kafka_protocol::messages::TransactionalId(s("t"))))
                .with_transaction_timeout_ms(60_000)
                .with_producer_id(kafka_protocol::messages::ProducerId(-1))
                .with_producer_epoch(-1),
            5,
        )
        .await;
    assert_eq!(r.error_code, ErrorCode::CONCURRENT_TRANSACTIONS.0);
    assert_eq!(all(&b, input), uniform(Seen::State(RecordState::TxPending)));
    // Once the abort lands (imposed by the fence: the records are released,
    // docs/DESIGN.md D6), the newer epoch gets in; the member acquires them
    // again and the newer epoch stages them.
    failpoints::disarm("txn.share_marker");
    wait_for(&b, input, Seen::State(RecordState::Available)).await;
    let (_, newer) = init_pid(&mut c, "t", 60_000).await;
    assert!(newer > older);
    let mut c2 = RawClient::connect(b.local_addr()).await;
    assert_eq!(
        acquire(&mut c2, "m1", input, &[0], 0).await,
        vec![(0, 0, N - 1)]
    );
    let req = stage_req(
        "t",
        pid,
        newer,
        "m1",
        epoch,
        input,
        &[(0, 0, N - 1, ACCEPT)],
    );
    assert_eq!(partition_errors(&stage(&mut c, &req).await), vec![(0, 0)]);
    assert_eq!(end_txn(&mut c, "t", pid, newer, true).await.error_code, 0);
    assert_eq!(all(&b, input), uniform(Seen::Terminal));
    b.shutdown().await;
}

/// docs/DESIGN.md D16, found in issue #15: a fence (InitProducerId of a
/// restarted instance with the same transactional id) lands between the
/// TxnShareAcknowledge handler's producer check and its staging. Before the
/// fix the records were staged at the fenced epoch after the fence's abort
/// marker had gone out: they stayed TX_PENDING with no transaction left to
/// resolve them, and the new holder could never stage them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fence_between_the_producer_check_and_the_stage_stages_nothing() {
    use std::sync::{Arc, Mutex, mpsc};
    const POINT: &str = "broker.txn_share_ack.before_stage";
    let _serial = SERIAL.lock().await;
    let _disarm = Disarm;
    // A broker with a data directory runs the handler on a blocking thread
    // (an in-memory one runs it inline on a runtime worker, which the held
    // hook below would block, starving the tasks queued on that worker).
    let dir = tempfile::tempdir().unwrap();
    let (b, mut c, input, epoch) = env(BrokerConfig::with_data_dir(dir.path())).await;
    let (pid, older) = init_pid(&mut c, "t", 60_000).await;

    // The handler stops at the point and waits for the test.
    let (reached_tx, reached_rx) = mpsc::channel::<()>();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let reached_tx = Mutex::new(reached_tx);
    let go_rx = Mutex::new(go_rx);
    failpoints::arm_pause(
        POINT,
        Duration::ZERO,
        Some(Arc::new(move |_: &str| {
            let _ = reached_tx.lock().unwrap().send(());
            let _ = go_rx.lock().unwrap().recv_timeout(Duration::from_secs(30));
        })),
    );
    let mut zombie = RawClient::connect(b.local_addr()).await;
    let req = stage_req(
        "t",
        pid,
        older,
        "m1",
        epoch,
        input,
        &[(0, 0, N - 1, ACCEPT)],
    );
    let staging = tokio::spawn(async move { stage(&mut zombie, &req).await });
    tokio::task::spawn_blocking(move || reached_rx.recv_timeout(Duration::from_secs(20)))
        .await
        .unwrap()
        .expect("the handler reached the pause point");
    failpoints::disarm(POINT);

    // The new holder fences the zombie: its transaction (Ongoing, the share
    // participant registered) is aborted and the abort marker applied while
    // nothing is staged yet.
    let (_, newer) = init_pid(&mut c, "t", 60_000).await;
    assert!(newer > older);
    go_tx.send(()).unwrap();
    let r = staging.await.unwrap();
    assert_eq!(
        partition_errors(&r),
        vec![(0, ErrorCode::PRODUCER_FENCED.0)],
        "a staging below the fence's marker must be refused"
    );
    assert_eq!(b.core().txn_pending_records(), 0);
    assert_eq!(all(&b, input), uniform(Seen::State(RecordState::Acquired)));

    // The new holder stages and commits the same records.
    let req = stage_req(
        "t",
        pid,
        newer,
        "m1",
        epoch,
        input,
        &[(0, 0, N - 1, ACCEPT)],
    );
    assert_eq!(partition_errors(&stage(&mut c, &req).await), vec![(0, 0)]);
    assert_eq!(end_txn(&mut c, "t", pid, newer, true).await.error_code, 0);
    wait_for(&b, input, Seen::Terminal).await;
    b.shutdown().await;
}

/// docs/DESIGN.md D22: an acknowledgement whose share-state record could
/// not be written is answered KAFKA_STORAGE_ERROR (the journal thread
/// reports the failed batch to every request with a record in it); the
/// next write carries the whole share partition again, so nothing stays
/// lost after a restart.
#[tokio::test]
async fn a_share_state_write_that_fails_is_answered_as_a_storage_error() {
    let _serial = SERIAL.lock().await;
    let _disarm = Disarm;
    let dir = tempfile::tempdir().unwrap();
    let (b, mut c, input, _epoch) = env(BrokerConfig::with_data_dir(dir.path())).await;
    failpoints::arm("share.persist", Some(1));
    let r = share_acknowledge(&mut c, "m1", 1, input, &[(0, 4, ACCEPT)]).await;
    assert_eq!(
        r.responses[0].partitions[0].error_code,
        ErrorCode::KAFKA_STORAGE_ERROR.0
    );
    let r = share_acknowledge(&mut c, "m1", 2, input, &[(5, N - 1, ACCEPT)]).await;
    assert_eq!(r.responses[0].partitions[0].error_code, 0);
    drop(c);
    b.kill().await;
    let b = Broker::start(BrokerConfig::with_data_dir(dir.path()))
        .await
        .unwrap();
    assert_eq!(all(&b, input), uniform(Seen::Terminal));
    b.shutdown().await;
}

/// D22: a ShareAcknowledge whose share-state record is being written holds
/// nothing the rest of the share path needs: while the journal is stopped
/// before its write, another connection's ShareGroupDescribe is answered;
/// the acknowledgement is answered only once the journal has written it.
#[tokio::test]
async fn an_acknowledgement_waiting_for_the_disk_holds_no_lock() {
    use kafka_protocol::messages::{GroupId, ShareGroupDescribeRequest};
    use std::sync::mpsc;
    use std::sync::{Arc, Mutex};
    const POINT: &str = "share.journal.before_write";
    let _serial = SERIAL.lock().await;
    let _disarm = Disarm;
    let dir = tempfile::tempdir().unwrap();
    let (b, c, input, _epoch) = env(BrokerConfig::with_data_dir(dir.path())).await;
    let (reached_tx, reached_rx) = mpsc::channel::<()>();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let reached_tx = Mutex::new(reached_tx);
    let go_rx = Mutex::new(go_rx);
    failpoints::arm_pause(
        POINT,
        Duration::ZERO,
        Some(Arc::new(move |_: &str| {
            let _ = reached_tx.lock().unwrap().send(());
            let _ = go_rx.lock().unwrap().recv_timeout(Duration::from_secs(30));
        })),
    );
    let mut c = c;
    let cid = c
        .send_only(
            &share_acknowledge_req("m1", 1, input, &[(0, N - 1, ACCEPT)]),
            1,
        )
        .await;
    tokio::task::spawn_blocking(move || reached_rx.recv_timeout(Duration::from_secs(20)))
        .await
        .unwrap()
        .expect("the journal reached its write");
    failpoints::disarm(POINT);
    // The journal is stopped with the acknowledgement's record: the share
    // service still answers.
    let mut other = RawClient::connect(b.local_addr()).await;
    let d = tokio::time::timeout(
        Duration::from_secs(10),
        other.send(
            &ShareGroupDescribeRequest::default().with_group_ids(vec![GroupId(s(GROUP))]),
            1,
        ),
    )
    .await
    .expect("ShareGroupDescribe waited for the disk");
    assert_eq!(d.groups[0].error_code, 0);
    assert_eq!(d.groups[0].members.len(), 1);
    // The acknowledgement is applied in memory, not yet answered.
    assert_eq!(all(&b, input), uniform(Seen::Terminal));
    assert!(
        tokio::time::timeout(Duration::from_millis(300), c.next_frame())
            .await
            .is_err(),
        "answered before its record was written"
    );
    go_tx.send(()).unwrap();
    let r = c
        .recv::<kafka_protocol::messages::ShareAcknowledgeRequest>(1, cid)
        .await;
    assert_eq!(r.responses[0].partitions[0].error_code, 0);
    b.shutdown().await;
}
