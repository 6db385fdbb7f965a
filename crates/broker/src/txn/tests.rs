//! Tests of the transaction coordinator: every transition, every refused
//! transition, recovery, markers, and a random-interleaving property test.

use super::*;
use sharestream_protocol::ErrorCode as E;
use uuid::Uuid;

const TIMEOUT: i32 = 60_000;
const BACKOFF: i64 = 100;

fn config() -> TxnCoordinatorConfig {
    TxnCoordinatorConfig {
        marker_retry_backoff_ms: BACKOFF,
        producer_id_block_size: 10,
        ..TxnCoordinatorConfig::default()
    }
}

fn coord() -> TransactionCoordinator {
    TransactionCoordinator::new(config())
}

fn init_req(id: &str) -> InitProducerIdRequest {
    InitProducerIdRequest {
        api_version: 5,
        transactional_id: Some(id.to_string()),
        transaction_timeout_ms: TIMEOUT,
        producer_id: -1,
        producer_epoch: -1,
    }
}

fn init(c: &mut TransactionCoordinator, now: i64, id: &str) -> ProducerIdAndEpoch {
    c.init_producer_id(now, &init_req(id)).result.unwrap()
}

fn tp(t: &str, p: i32) -> (String, i32) {
    (t.to_string(), p)
}

fn share(p: i32) -> Participant {
    Participant::Share {
        group_id: "g".into(),
        topic_id: Uuid::from_u128(7),
        topic: "in".into(),
        partition: p,
    }
}

fn markers(effects: &[TxnEffect]) -> Vec<MarkerRequest> {
    effects
        .iter()
        .filter_map(|e| match e {
            TxnEffect::WriteMarkers(m) => Some(m.clone()),
            _ => None,
        })
        .collect()
}

fn snapshots(effects: &[TxnEffect]) -> Vec<TransactionMetadata> {
    effects
        .iter()
        .filter_map(|e| match e {
            TxnEffect::Persist(TxnLogRecord::Transaction(md)) => Some(md.clone()),
            _ => None,
        })
        .collect()
}

fn completed(effects: &[TxnEffect]) -> Vec<(String, bool)> {
    effects
        .iter()
        .filter_map(|e| match e {
            TxnEffect::TransactionCompleted {
                transactional_id,
                commit,
                ..
            } => Some((transactional_id.clone(), *commit)),
            _ => None,
        })
        .collect()
}

/// Acknowledges every marker of `effects`; returns the effects of the acks.
fn ack_all(c: &mut TransactionCoordinator, now: i64, effects: &[TxnEffect]) -> Vec<TxnEffect> {
    let mut out = Vec::new();
    for m in markers(effects) {
        for p in &m.participants {
            out.extend(c.marker_written(
                now,
                &m.transactional_id,
                m.producer_id,
                m.producer_epoch,
                p,
                MarkerAck::Written,
            ));
        }
    }
    out
}

fn state(c: &TransactionCoordinator, id: &str) -> TxnState {
    c.describe(id).unwrap().state
}

/// Starts a TV2 transaction on `t-0` for `id`, returns the producer.
fn ongoing_tv2(c: &mut TransactionCoordinator, now: i64, id: &str) -> ProducerIdAndEpoch {
    let p = init(c, now, id);
    let out = c.add_partitions_to_txn(now, 5, id, p.producer_id, p.producer_epoch, &[tp("t", 0)]);
    assert_eq!(out.result, Ok(()));
    p
}

// ---------------------------------------------------------------------
// InitProducerId
// ---------------------------------------------------------------------

#[test]
fn init_producer_id_without_transactional_id_gives_fresh_ids_at_epoch_0() {
    let mut c = coord();
    let req = InitProducerIdRequest {
        transactional_id: None,
        ..init_req("")
    };
    let a = c.init_producer_id(0, &req);
    let b = c.init_producer_id(0, &req);
    let (a, b) = (a.result.unwrap(), b.result.unwrap());
    assert_eq!(a.producer_epoch, 0);
    assert_eq!(b.producer_epoch, 0);
    assert!(b.producer_id > a.producer_id);
    assert!(c.transactions().next().is_none());
}

#[test]
fn init_producer_id_new_transactional_id_starts_empty_at_epoch_0_and_persists() {
    let mut c = coord();
    let out = c.init_producer_id(5, &init_req("tx"));
    assert_eq!(out.result.unwrap().producer_epoch, 0);
    // The producer-id block is persisted before the snapshot.
    assert!(matches!(
        out.effects[0],
        TxnEffect::Persist(TxnLogRecord::ProducerIdBlock { block_end: 10 })
    ));
    let snap = snapshots(&out.effects);
    assert_eq!(snap.len(), 1);
    assert_eq!(snap[0].state, TxnState::Empty);
    assert_eq!(snap[0].txn_timeout_ms, TIMEOUT);
}

#[test]
fn init_producer_id_existing_id_without_transaction_bumps_epoch() {
    let mut c = coord();
    let a = init(&mut c, 0, "tx");
    let b = init(&mut c, 1, "tx");
    assert_eq!(b.producer_id, a.producer_id);
    assert_eq!(b.producer_epoch, a.producer_epoch + 1);
    assert_eq!(state(&c, "tx"), TxnState::Empty);
}

#[test]
fn init_producer_id_refuses_timeout_above_max_or_not_positive() {
    let mut c = coord();
    for t in [900_001, 0, -5] {
        let req = InitProducerIdRequest {
            transaction_timeout_ms: t,
            ..init_req("tx")
        };
        let out = c.init_producer_id(0, &req);
        assert_eq!(out.result, Err(E::INVALID_TRANSACTION_TIMEOUT));
        assert!(out.effects.is_empty());
    }
    let ok = InitProducerIdRequest {
        transaction_timeout_ms: 900_000,
        ..init_req("tx")
    };
    assert!(c.init_producer_id(0, &ok).result.is_ok());
}

#[test]
fn init_producer_id_empty_transactional_id_is_invalid_request() {
    let mut c = coord();
    assert_eq!(
        c.init_producer_id(0, &init_req("")).result,
        Err(E::INVALID_REQUEST)
    );
}

#[test]
fn init_producer_id_epoch_exhausted_rotates_to_new_producer_id_at_epoch_0() {
    let mut c = coord();
    let a = init(&mut c, 0, "tx");
    // Walk the epoch up to the exhausted value.
    let mut last = a;
    while !is_epoch_exhausted(last.producer_epoch) {
        last = init(&mut c, 0, "tx");
    }
    assert_eq!(last.producer_epoch, i16::MAX - 1);
    assert_eq!(last.producer_id, a.producer_id);
    let rotated = init(&mut c, 0, "tx");
    assert_ne!(rotated.producer_id, a.producer_id);
    assert_eq!(rotated.producer_epoch, 0);
    assert_eq!(c.describe("tx").unwrap().prev_producer_id, a.producer_id);
}

#[test]
fn init_producer_id_fences_ongoing_transaction_concurrent_until_abort_completes() {
    let mut c = coord();
    let old = ongoing_tv2(&mut c, 0, "tx");
    let out = c.init_producer_id(10, &init_req("tx"));
    assert_eq!(out.result, Err(E::CONCURRENT_TRANSACTIONS));
    assert_eq!(state(&c, "tx"), TxnState::PrepareAbort);
    let m = markers(&out.effects);
    assert_eq!(m.len(), 1);
    assert!(!m[0].commit);
    assert_eq!(m[0].producer_epoch, old.producer_epoch + 1);
    assert_eq!(m[0].participants, vec![Participant::log("t", 0)]);
    // The persisted record is PrepareAbort (PrepareEpochFence is transient).
    assert_eq!(snapshots(&out.effects)[0].state, TxnState::PrepareAbort);
    // Retried before the markers are acknowledged: still concurrent.
    let again = c.init_producer_id(20, &init_req("tx"));
    assert_eq!(again.result, Err(E::CONCURRENT_TRANSACTIONS));
    assert!(again.effects.is_empty());
    let done = ack_all(&mut c, 30, &out.effects);
    assert_eq!(completed(&done), vec![("tx".to_string(), false)]);
    assert_eq!(state(&c, "tx"), TxnState::CompleteAbort);
    let new = init(&mut c, 40, "tx");
    assert_eq!(new.producer_id, old.producer_id);
    assert_eq!(new.producer_epoch, old.producer_epoch + 2);
    assert_eq!(c.metrics().producers_fenced, 1);
}

#[test]
fn init_producer_id_during_prepare_is_concurrent_transactions() {
    let mut c = coord();
    let p = ongoing_tv2(&mut c, 0, "tx");
    c.end_txn(1, 5, "tx", p.producer_id, p.producer_epoch, true);
    let out = c.init_producer_id(2, &init_req("tx"));
    assert_eq!(out.result, Err(E::CONCURRENT_TRANSACTIONS));
    assert_eq!(state(&c, "tx"), TxnState::PrepareCommit);
}

#[test]
fn init_producer_id_kip360_recovery_with_current_epoch_bumps_and_keeps_last_epoch() {
    let mut c = coord();
    let a = init(&mut c, 0, "tx");
    let req = InitProducerIdRequest {
        producer_id: a.producer_id,
        producer_epoch: a.producer_epoch,
        ..init_req("tx")
    };
    let b = c.init_producer_id(1, &req).result.unwrap();
    assert_eq!(b.producer_epoch, a.producer_epoch + 1);
    assert_eq!(
        c.describe("tx").unwrap().last_producer_epoch,
        a.producer_epoch
    );
    // The same request retried (its answer lost): the same epoch again.
    let again = c.init_producer_id(2, &req).result.unwrap();
    assert_eq!(again, b);
}

#[test]
fn init_producer_id_kip360_stale_epoch_or_other_id_is_fenced_by_version() {
    let mut c = coord();
    let a = init(&mut c, 0, "tx");
    init(&mut c, 0, "tx");
    init(&mut c, 0, "tx");
    let stale = InitProducerIdRequest {
        producer_id: a.producer_id,
        producer_epoch: a.producer_epoch,
        ..init_req("tx")
    };
    assert_eq!(
        c.init_producer_id(1, &stale).result,
        Err(E::PRODUCER_FENCED)
    );
    let other_id = InitProducerIdRequest {
        producer_id: a.producer_id + 100,
        producer_epoch: 0,
        api_version: 3,
        ..init_req("tx")
    };
    assert_eq!(
        c.init_producer_id(1, &other_id).result,
        Err(E::INVALID_PRODUCER_EPOCH)
    );
}

// ---------------------------------------------------------------------
// Registration
// ---------------------------------------------------------------------

#[test]
fn add_partitions_v3_starts_tv1_transaction_and_persists_participants() {
    let mut c = coord();
    let p = init(&mut c, 0, "tx");
    let out = c.add_partitions_to_txn(
        7,
        3,
        "tx",
        p.producer_id,
        p.producer_epoch,
        &[tp("a", 0), tp("b", 1)],
    );
    assert_eq!(out.result, Ok(()));
    let md = c.describe("tx").unwrap();
    assert_eq!(md.state, TxnState::Ongoing);
    assert_eq!(md.transaction_version, TransactionVersion::V1);
    assert_eq!(md.txn_start_ms, 7);
    assert_eq!(md.participants.len(), 2);
    assert_eq!(snapshots(&out.effects)[0].participants.len(), 2);
}

#[test]
fn add_partitions_v4_and_above_is_the_tv2_broker_path() {
    let mut c = coord();
    ongoing_tv2(&mut c, 0, "tx");
    assert_eq!(
        c.describe("tx").unwrap().transaction_version,
        TransactionVersion::V2
    );
}

#[test]
fn add_partitions_already_registered_answers_ok_without_persisting() {
    let mut c = coord();
    let p = ongoing_tv2(&mut c, 0, "tx");
    let out = c.add_partitions_to_txn(5, 5, "tx", p.producer_id, p.producer_epoch, &[tp("t", 0)]);
    assert_eq!(out.result, Ok(()));
    assert!(out.effects.is_empty());
    assert_eq!(c.describe("tx").unwrap().txn_start_ms, 0);
}

#[test]
fn add_partitions_unknown_transactional_id_or_producer_id_is_invalid_mapping() {
    let mut c = coord();
    let out = c.add_partitions_to_txn(0, 3, "nope", 1, 0, &[tp("t", 0)]);
    assert_eq!(out.result, Err(E::INVALID_PRODUCER_ID_MAPPING));
    let p = init(&mut c, 0, "tx");
    let out = c.add_partitions_to_txn(0, 3, "tx", p.producer_id + 1, 0, &[tp("t", 0)]);
    assert_eq!(out.result, Err(E::INVALID_PRODUCER_ID_MAPPING));
    assert_eq!(state(&c, "tx"), TxnState::Empty);
}

#[test]
fn add_partitions_wrong_epoch_is_producer_fenced_or_invalid_epoch_by_version() {
    let mut c = coord();
    let p = init(&mut c, 0, "tx");
    init(&mut c, 0, "tx");
    let v2 = c.add_partitions_to_txn(0, 2, "tx", p.producer_id, p.producer_epoch, &[tp("t", 0)]);
    assert_eq!(v2.result, Err(E::PRODUCER_FENCED));
    let v1 = c.add_partitions_to_txn(0, 1, "tx", p.producer_id, p.producer_epoch, &[tp("t", 0)]);
    assert_eq!(v1.result, Err(E::INVALID_PRODUCER_EPOCH));
    assert_eq!(state(&c, "tx"), TxnState::Empty);
}

#[test]
fn add_partitions_while_markers_pending_is_concurrent_transactions() {
    let mut c = coord();
    let p = init(&mut c, 0, "tx");
    c.add_partitions_to_txn(0, 3, "tx", p.producer_id, p.producer_epoch, &[tp("t", 0)]);
    c.end_txn(1, 3, "tx", p.producer_id, p.producer_epoch, true);
    let out = c.add_partitions_to_txn(2, 3, "tx", p.producer_id, p.producer_epoch, &[tp("u", 0)]);
    assert_eq!(out.result, Err(E::CONCURRENT_TRANSACTIONS));
    assert_eq!(state(&c, "tx"), TxnState::PrepareCommit);
}

#[test]
fn add_partitions_after_completed_transaction_starts_a_new_one() {
    let mut c = coord();
    let p = init(&mut c, 0, "tx");
    c.add_partitions_to_txn(0, 3, "tx", p.producer_id, p.producer_epoch, &[tp("t", 0)]);
    let end = c.end_txn(1, 3, "tx", p.producer_id, p.producer_epoch, true);
    ack_all(&mut c, 2, &end.effects);
    let out = c.add_partitions_to_txn(9, 3, "tx", p.producer_id, p.producer_epoch, &[tp("u", 0)]);
    assert_eq!(out.result, Ok(()));
    let md = c.describe("tx").unwrap();
    assert_eq!(md.state, TxnState::Ongoing);
    assert_eq!(md.txn_start_ms, 9);
    assert_eq!(
        md.participants.iter().cloned().collect::<Vec<_>>(),
        vec![Participant::log("u", 0)]
    );
}

#[test]
fn add_offsets_registers_the_groups_consumer_offsets_partition() {
    let mut c = coord();
    let p = init(&mut c, 0, "tx");
    let out = c.add_offsets_to_txn(0, 3, "tx", p.producer_id, p.producer_epoch, "hello");
    assert_eq!(out.result, Ok(()));
    // Java: "hello".hashCode() == 99162322, % 50 == 22.
    assert!(
        c.describe("tx")
            .unwrap()
            .participants
            .contains(&Participant::log(CONSUMER_OFFSETS_TOPIC, 22))
    );
    let fenced = c.add_offsets_to_txn(0, 1, "tx", p.producer_id, p.producer_epoch + 1, "g");
    assert_eq!(fenced.result, Err(E::INVALID_PRODUCER_EPOCH));
}

#[test]
fn offsets_partition_matches_java_string_hash_code() {
    assert_eq!(offsets_partition_for("hello", 50), 22);
    assert_eq!(offsets_partition_for("", 50), 0);
    // "polygenelubricants".hashCode() == Integer.MIN_VALUE -> abs is 0.
    assert_eq!(offsets_partition_for("polygenelubricants", 50), 0);
}

#[test]
fn verify_partitions_in_txn_reports_transaction_abortable_for_unregistered() {
    let mut c = coord();
    let p = ongoing_tv2(&mut c, 0, "tx");
    let r = c
        .verify_partitions_in_txn(
            "tx",
            p.producer_id,
            p.producer_epoch,
            &[tp("t", 0), tp("x", 1)],
        )
        .unwrap();
    assert_eq!(
        r,
        vec![
            (tp("t", 0), E::NONE),
            (tp("x", 1), E::TRANSACTION_ABORTABLE)
        ]
    );
    assert_eq!(
        c.verify_partitions_in_txn("tx", p.producer_id, p.producer_epoch + 1, &[tp("t", 0)]),
        Err(E::PRODUCER_FENCED)
    );
    assert_eq!(
        c.verify_partitions_in_txn("nope", 1, 0, &[tp("t", 0)]),
        Err(E::INVALID_PRODUCER_ID_MAPPING)
    );
    // Verification never changes state.
    assert_eq!(c.describe("tx").unwrap().participants.len(), 1);
}

// ---------------------------------------------------------------------
// EndTxn, TV1
// ---------------------------------------------------------------------

fn tv1_ongoing(c: &mut TransactionCoordinator) -> ProducerIdAndEpoch {
    let p = init(c, 0, "tx");
    c.add_partitions_to_txn(
        0,
        3,
        "tx",
        p.producer_id,
        p.producer_epoch,
        &[tp("a", 0), tp("b", 0)],
    );
    p
}

#[test]
fn tv1_commit_writes_markers_without_epoch_bump_and_completes_after_all_acks() {
    let mut c = coord();
    let p = tv1_ongoing(&mut c);
    let out = c.end_txn(10, 3, "tx", p.producer_id, p.producer_epoch, true);
    assert_eq!(out.result, Ok(ProducerIdAndEpoch::NONE));
    assert_eq!(snapshots(&out.effects)[0].state, TxnState::PrepareCommit);
    let m = markers(&out.effects);
    assert_eq!(m.len(), 1);
    assert!(m[0].commit);
    assert_eq!(m[0].producer_epoch, p.producer_epoch);
    assert_eq!(m[0].transaction_version, TransactionVersion::V1);
    assert_eq!(m[0].participants.len(), 2);
    // One ack: still preparing.
    let e = c.marker_written(
        11,
        "tx",
        p.producer_id,
        p.producer_epoch,
        &Participant::log("a", 0),
        MarkerAck::Written,
    );
    assert!(e.is_empty());
    assert_eq!(state(&c, "tx"), TxnState::PrepareCommit);
    let e = c.marker_written(
        12,
        "tx",
        p.producer_id,
        p.producer_epoch,
        &Participant::log("b", 0),
        MarkerAck::Written,
    );
    assert_eq!(snapshots(&e)[0].state, TxnState::CompleteCommit);
    assert_eq!(completed(&e), vec![("tx".to_string(), true)]);
    let md = c.describe("tx").unwrap();
    assert_eq!(md.state, TxnState::CompleteCommit);
    assert!(md.participants.is_empty());
    assert_eq!(md.producer_epoch, p.producer_epoch);
}

#[test]
fn tv1_abort_writes_abort_markers_and_completes() {
    let mut c = coord();
    let p = tv1_ongoing(&mut c);
    let out = c.end_txn(10, 3, "tx", p.producer_id, p.producer_epoch, false);
    assert_eq!(out.result, Ok(ProducerIdAndEpoch::NONE));
    assert!(!markers(&out.effects)[0].commit);
    ack_all(&mut c, 11, &out.effects);
    assert_eq!(state(&c, "tx"), TxnState::CompleteAbort);
}

#[test]
fn tv1_end_txn_retry_in_prepare_is_concurrent_and_after_completion_is_ok() {
    let mut c = coord();
    let p = tv1_ongoing(&mut c);
    let out = c.end_txn(10, 3, "tx", p.producer_id, p.producer_epoch, true);
    let retry = c.end_txn(11, 3, "tx", p.producer_id, p.producer_epoch, true);
    assert_eq!(retry.result, Err(E::CONCURRENT_TRANSACTIONS));
    let wrong = c.end_txn(11, 3, "tx", p.producer_id, p.producer_epoch, false);
    assert_eq!(wrong.result, Err(E::INVALID_TXN_STATE));
    ack_all(&mut c, 12, &out.effects);
    let retry = c.end_txn(13, 3, "tx", p.producer_id, p.producer_epoch, true);
    assert_eq!(retry.result, Ok(ProducerIdAndEpoch::NONE));
    assert!(retry.effects.is_empty());
    let wrong = c.end_txn(13, 3, "tx", p.producer_id, p.producer_epoch, false);
    assert_eq!(wrong.result, Err(E::INVALID_TXN_STATE));
}

#[test]
fn tv1_end_txn_refusals_empty_unknown_wrong_id_wrong_epoch() {
    let mut c = coord();
    let p = init(&mut c, 0, "tx");
    assert_eq!(
        c.end_txn(0, 3, "tx", p.producer_id, p.producer_epoch, true)
            .result,
        Err(E::INVALID_TXN_STATE)
    );
    assert_eq!(
        c.end_txn(0, 3, "tx", p.producer_id, p.producer_epoch, false)
            .result,
        Err(E::INVALID_TXN_STATE)
    );
    assert_eq!(
        c.end_txn(0, 3, "nope", 1, 0, true).result,
        Err(E::INVALID_PRODUCER_ID_MAPPING)
    );
    assert_eq!(
        c.end_txn(0, 3, "tx", p.producer_id + 1, 0, true).result,
        Err(E::INVALID_PRODUCER_ID_MAPPING)
    );
    assert_eq!(
        c.end_txn(0, 3, "tx", p.producer_id, p.producer_epoch + 1, true)
            .result,
        Err(E::PRODUCER_FENCED)
    );
    assert_eq!(
        c.end_txn(0, 1, "tx", p.producer_id, p.producer_epoch + 1, true)
            .result,
        Err(E::INVALID_PRODUCER_EPOCH)
    );
    assert_eq!(
        c.end_txn(0, 3, "", 1, 0, true).result,
        Err(E::INVALID_REQUEST)
    );
    assert_eq!(state(&c, "tx"), TxnState::Empty);
}

// ---------------------------------------------------------------------
// EndTxn, TV2
// ---------------------------------------------------------------------

#[test]
fn tv2_commit_bumps_epoch_returns_it_and_markers_carry_it() {
    let mut c = coord();
    let p = ongoing_tv2(&mut c, 0, "tx");
    let out = c.end_txn(10, 5, "tx", p.producer_id, p.producer_epoch, true);
    let new = out.result.unwrap();
    assert_eq!(new.producer_id, p.producer_id);
    assert_eq!(new.producer_epoch, p.producer_epoch + 1);
    let m = markers(&out.effects);
    assert_eq!(m[0].producer_epoch, new.producer_epoch);
    assert_eq!(m[0].transaction_version, TransactionVersion::V2);
    ack_all(&mut c, 11, &out.effects);
    let md = c.describe("tx").unwrap();
    assert_eq!(md.state, TxnState::CompleteCommit);
    assert_eq!(md.producer_epoch, new.producer_epoch);
    // The next transaction runs with the new epoch.
    let next = c.add_partitions_to_txn(
        12,
        5,
        "tx",
        new.producer_id,
        new.producer_epoch,
        &[tp("t", 1)],
    );
    assert_eq!(next.result, Ok(()));
    let stale =
        c.add_partitions_to_txn(12, 5, "tx", p.producer_id, p.producer_epoch, &[tp("t", 1)]);
    assert_eq!(stale.result, Err(E::PRODUCER_FENCED));
}

#[test]
fn tv2_abort_bumps_epoch_and_completes() {
    let mut c = coord();
    let p = ongoing_tv2(&mut c, 0, "tx");
    let out = c.end_txn(10, 5, "tx", p.producer_id, p.producer_epoch, false);
    assert_eq!(out.result.unwrap().producer_epoch, p.producer_epoch + 1);
    assert!(!markers(&out.effects)[0].commit);
    ack_all(&mut c, 11, &out.effects);
    assert_eq!(state(&c, "tx"), TxnState::CompleteAbort);
}

#[test]
fn tv2_end_txn_retry_is_concurrent_while_preparing_then_idempotent_success() {
    let mut c = coord();
    let p = ongoing_tv2(&mut c, 0, "tx");
    let out = c.end_txn(10, 5, "tx", p.producer_id, p.producer_epoch, true);
    let new = out.result.unwrap();
    let retry = c.end_txn(11, 5, "tx", p.producer_id, p.producer_epoch, true);
    assert_eq!(retry.result, Err(E::CONCURRENT_TRANSACTIONS));
    let opposite = c.end_txn(11, 5, "tx", p.producer_id, p.producer_epoch, false);
    assert_eq!(opposite.result, Err(E::INVALID_TXN_STATE));
    ack_all(&mut c, 12, &out.effects);
    let retry = c.end_txn(13, 5, "tx", p.producer_id, p.producer_epoch, true);
    assert_eq!(retry.result, Ok(new));
    assert!(retry.effects.is_empty());
    // The retried commit must not be taken for an abort of a new one.
    let retry_abort = c.end_txn(13, 5, "tx", p.producer_id, p.producer_epoch, false);
    assert_eq!(retry_abort.result, Err(E::INVALID_TXN_STATE));
    assert_eq!(state(&c, "tx"), TxnState::CompleteCommit);
}

#[test]
fn tv2_abort_retry_after_complete_abort_is_idempotent() {
    let mut c = coord();
    let p = ongoing_tv2(&mut c, 0, "tx");
    let out = c.end_txn(10, 5, "tx", p.producer_id, p.producer_epoch, false);
    let new = out.result.unwrap();
    ack_all(&mut c, 11, &out.effects);
    let retry = c.end_txn(12, 5, "tx", p.producer_id, p.producer_epoch, false);
    assert_eq!(retry.result, Ok(new));
    assert!(retry.effects.is_empty());
    let commit = c.end_txn(12, 5, "tx", p.producer_id, p.producer_epoch, true);
    assert_eq!(commit.result, Err(E::INVALID_TXN_STATE));
}

#[test]
fn tv2_abort_with_nothing_registered_bumps_epoch_and_completes_at_once() {
    let mut c = coord();
    let p = init(&mut c, 0, "tx");
    let out = c.end_txn(5, 5, "tx", p.producer_id, p.producer_epoch, false);
    assert_eq!(out.result.unwrap().producer_epoch, p.producer_epoch + 1);
    assert!(markers(&out.effects).is_empty());
    let states: Vec<_> = snapshots(&out.effects).iter().map(|m| m.state).collect();
    assert_eq!(
        states,
        vec![TxnState::PrepareAbort, TxnState::CompleteAbort]
    );
    assert_eq!(state(&c, "tx"), TxnState::CompleteAbort);
    // Abort again at the current epoch from CompleteAbort: another bump.
    let again = c.end_txn(6, 5, "tx", p.producer_id, p.producer_epoch + 1, false);
    assert_eq!(again.result.unwrap().producer_epoch, p.producer_epoch + 2);
}

#[test]
fn tv2_commit_with_nothing_registered_is_invalid_txn_state() {
    let mut c = coord();
    let p = init(&mut c, 0, "tx");
    let out = c.end_txn(5, 5, "tx", p.producer_id, p.producer_epoch, true);
    assert_eq!(out.result, Err(E::INVALID_TXN_STATE));
    assert!(out.effects.is_empty());
}

#[test]
fn tv2_end_txn_with_stale_or_future_epoch_is_fenced() {
    let mut c = coord();
    let p = ongoing_tv2(&mut c, 0, "tx");
    for epoch in [p.producer_epoch - 1, p.producer_epoch + 1] {
        let out = c.end_txn(5, 5, "tx", p.producer_id, epoch, true);
        assert_eq!(out.result, Err(E::PRODUCER_FENCED));
    }
    assert_eq!(state(&c, "tx"), TxnState::Ongoing);
}

#[test]
fn tv2_epoch_overflow_rotates_producer_id_and_retry_on_overflow_succeeds() {
    let mut c = coord();
    let mut p = init(&mut c, 0, "tx");
    while p.producer_epoch < i16::MAX - 1 {
        p = init(&mut c, 0, "tx");
    }
    // init at MAX-1 would rotate; instead run a transaction at MAX-1.
    let old_id = p.producer_id;
    let add = c.add_partitions_to_txn(1, 5, "tx", p.producer_id, p.producer_epoch, &[tp("t", 0)]);
    assert_eq!(add.result, Ok(()));
    let out = c.end_txn(2, 5, "tx", p.producer_id, p.producer_epoch, true);
    let new = out.result.unwrap();
    assert_ne!(new.producer_id, old_id);
    assert_eq!(new.producer_epoch, 0);
    // Markers carry the reserved epoch i16::MAX with the old producer id.
    let m = markers(&out.effects);
    assert_eq!(m[0].producer_id, old_id);
    assert_eq!(m[0].producer_epoch, i16::MAX);
    // The client already holds the new id while markers are pending.
    let early = c.add_partitions_to_txn(3, 5, "tx", new.producer_id, 0, &[tp("t", 0)]);
    assert_eq!(early.result, Err(E::CONCURRENT_TRANSACTIONS));
    ack_all(&mut c, 4, &out.effects);
    let md = c.describe("tx").unwrap();
    assert_eq!((md.producer_id, md.producer_epoch), (new.producer_id, 0));
    assert_eq!(md.prev_producer_id, old_id);
    // A retry of the overflowing EndTxn with the old id is answered again.
    let retry = c.end_txn(5, 5, "tx", old_id, i16::MAX - 1, true);
    assert_eq!(retry.result, Ok(new));
}

// ---------------------------------------------------------------------
// Timeout
// ---------------------------------------------------------------------

#[test]
fn tick_before_timeout_changes_nothing() {
    let mut c = coord();
    ongoing_tv2(&mut c, 0, "tx");
    assert!(c.tick(TIMEOUT as i64).is_empty());
    assert_eq!(state(&c, "tx"), TxnState::Ongoing);
    assert_eq!(c.next_deadline_ms(), Some(TIMEOUT as i64 + 1));
}

#[test]
fn timeout_aborts_with_epoch_bump_and_fences_the_producer_tv2() {
    let mut c = coord();
    let p = ongoing_tv2(&mut c, 0, "tx");
    let out = c.tick(TIMEOUT as i64 + 1);
    let m = markers(&out);
    assert_eq!(m.len(), 1);
    assert!(!m[0].commit);
    assert_eq!(m[0].producer_epoch, p.producer_epoch + 1);
    assert_eq!(state(&c, "tx"), TxnState::PrepareAbort);
    assert_eq!(c.metrics().transactions_timed_out, 1);
    ack_all(&mut c, TIMEOUT as i64 + 2, &out);
    assert_eq!(state(&c, "tx"), TxnState::CompleteAbort);
    // The producer's late commit or abort is fenced, not taken for a retry.
    for commit in [true, false] {
        let late = c.end_txn(
            TIMEOUT as i64 + 3,
            5,
            "tx",
            p.producer_id,
            p.producer_epoch,
            commit,
        );
        assert_eq!(late.result, Err(E::PRODUCER_FENCED));
    }
}

#[test]
fn timeout_aborts_tv1_transaction_and_old_epoch_is_fenced() {
    let mut c = coord();
    let p = tv1_ongoing(&mut c);
    let out = c.tick(TIMEOUT as i64 + 1);
    assert_eq!(markers(&out)[0].producer_epoch, p.producer_epoch + 1);
    ack_all(&mut c, TIMEOUT as i64 + 2, &out);
    let late = c.end_txn(
        TIMEOUT as i64 + 3,
        1,
        "tx",
        p.producer_id,
        p.producer_epoch,
        true,
    );
    assert_eq!(late.result, Err(E::INVALID_PRODUCER_EPOCH));
}

// ---------------------------------------------------------------------
// Markers
// ---------------------------------------------------------------------

#[test]
fn corner_case_13_markers_resent_after_backoff_until_acknowledged() {
    let mut c = coord();
    let p = tv1_ongoing(&mut c);
    let out = c.end_txn(0, 3, "tx", p.producer_id, p.producer_epoch, true);
    c.marker_written(
        1,
        "tx",
        p.producer_id,
        p.producer_epoch,
        &Participant::log("a", 0),
        MarkerAck::Written,
    );
    assert!(c.tick(BACKOFF - 1).is_empty());
    assert_eq!(c.next_deadline_ms(), Some(BACKOFF));
    for round in 1..=3 {
        let resent = c.tick(BACKOFF * round);
        let m = markers(&resent);
        assert_eq!(m.len(), 1, "round {round}");
        assert_eq!(m[0].participants, vec![Participant::log("b", 0)]);
        assert_eq!(m[0].producer_epoch, markers(&out.effects)[0].producer_epoch);
    }
    assert_eq!(c.metrics().marker_retries, 3);
    assert_eq!(c.metrics().markers_pending, 1);
    let done = c.marker_written(
        1000,
        "tx",
        p.producer_id,
        p.producer_epoch,
        &Participant::log("b", 0),
        MarkerAck::Written,
    );
    assert_eq!(completed(&done).len(), 1);
    assert!(c.tick(10_000).is_empty());
    assert_eq!(c.metrics().markers_pending, 0);
}

#[test]
fn marker_retry_ack_reschedules_after_backoff() {
    let mut c = coord();
    let p = tv1_ongoing(&mut c);
    c.end_txn(0, 3, "tx", p.producer_id, p.producer_epoch, true);
    let e = c.marker_written(
        50,
        "tx",
        p.producer_id,
        p.producer_epoch,
        &Participant::log("a", 0),
        MarkerAck::Retry,
    );
    assert!(e.is_empty());
    // "b" is due at BACKOFF, "a" only at 50 + BACKOFF.
    let m = markers(&c.tick(BACKOFF));
    assert_eq!(m[0].participants, vec![Participant::log("b", 0)]);
    let m = markers(&c.tick(50 + BACKOFF));
    assert_eq!(m[0].participants, vec![Participant::log("a", 0)]);
    assert_eq!(
        MarkerAck::from_error(E::NOT_LEADER_OR_FOLLOWER),
        MarkerAck::Retry
    );
    assert_eq!(MarkerAck::from_error(E::NONE), MarkerAck::Written);
}

#[test]
fn duplicate_and_stale_marker_acks_are_no_ops() {
    let mut c = coord();
    let p = tv1_ongoing(&mut c);
    let out = c.end_txn(0, 3, "tx", p.producer_id, p.producer_epoch, true);
    let a = Participant::log("a", 0);
    c.marker_written(
        1,
        "tx",
        p.producer_id,
        p.producer_epoch,
        &a,
        MarkerAck::Written,
    );
    // Duplicate for a: nothing.
    assert!(
        c.marker_written(
            2,
            "tx",
            p.producer_id,
            p.producer_epoch,
            &a,
            MarkerAck::Written
        )
        .is_empty()
    );
    // Wrong epoch, wrong id, unknown participant, unknown transaction: nothing.
    let b = Participant::log("b", 0);
    assert!(
        c.marker_written(
            2,
            "tx",
            p.producer_id,
            p.producer_epoch + 1,
            &b,
            MarkerAck::Written
        )
        .is_empty()
    );
    assert!(
        c.marker_written(
            2,
            "tx",
            p.producer_id + 1,
            p.producer_epoch,
            &b,
            MarkerAck::Written
        )
        .is_empty()
    );
    assert!(
        c.marker_written(
            2,
            "tx",
            p.producer_id,
            p.producer_epoch,
            &Participant::log("z", 0),
            MarkerAck::Written
        )
        .is_empty()
    );
    assert!(
        c.marker_written(
            2,
            "other",
            p.producer_id,
            p.producer_epoch,
            &b,
            MarkerAck::Written
        )
        .is_empty()
    );
    assert_eq!(state(&c, "tx"), TxnState::PrepareCommit);
    let done = ack_all(&mut c, 3, &out.effects);
    assert_eq!(completed(&done).len(), 1);
    // Acks after completion: nothing.
    assert!(ack_all(&mut c, 4, &out.effects).is_empty());
    assert_eq!(c.metrics().transactions_committed, 1);
}

#[test]
fn marker_to_deleted_partition_counts_as_done() {
    let mut c = coord();
    let p = tv1_ongoing(&mut c);
    let out = c.end_txn(0, 3, "tx", p.producer_id, p.producer_epoch, false);
    let m = &markers(&out.effects)[0];
    c.marker_written(
        1,
        "tx",
        m.producer_id,
        m.producer_epoch,
        &Participant::log("a", 0),
        MarkerAck::PartitionGone,
    );
    let e = c.marker_written(
        1,
        "tx",
        m.producer_id,
        m.producer_epoch,
        &Participant::log("b", 0),
        MarkerAck::Written,
    );
    assert_eq!(completed(&e), vec![("tx".to_string(), false)]);
}

// ---------------------------------------------------------------------
// Share participants (D3, D4, D9, corner cases 2, 3, 7, 14)
// ---------------------------------------------------------------------

#[test]
fn share_participants_receive_commit_markers_through_the_same_path() {
    let mut c = coord();
    let p = init(&mut c, 0, "tx");
    let reg = c.add_share_participants(
        1,
        "tx",
        p.producer_id,
        p.producer_epoch,
        &[share(0), share(1)],
    );
    assert_eq!(reg.result, Ok(()));
    let md = c.describe("tx").unwrap();
    assert_eq!(md.state, TxnState::Ongoing);
    assert_eq!(md.transaction_version, TransactionVersion::V2);
    c.add_partitions_to_txn(2, 5, "tx", p.producer_id, p.producer_epoch, &[tp("out", 0)]);
    let m = c.metrics();
    assert_eq!(m.transaction_partitions_count, 3);
    assert_eq!(m.share_participants_count, 2);
    let out = c.end_txn(3, 5, "tx", p.producer_id, p.producer_epoch, true);
    let mk = &markers(&out.effects)[0];
    assert!(mk.commit);
    assert_eq!(mk.producer_epoch, p.producer_epoch + 1);
    assert!(mk.participants.contains(&share(0)));
    assert!(mk.participants.contains(&share(1)));
    assert!(mk.participants.contains(&Participant::log("out", 0)));
    assert_eq!(c.metrics().markers_pending, 3);
    ack_all(&mut c, 4, &out.effects);
    assert_eq!(state(&c, "tx"), TxnState::CompleteCommit);
    assert_eq!(c.metrics().transaction_partitions_count, 0);
}

#[test]
fn share_participants_receive_abort_markers_on_timeout() {
    let mut c = coord();
    let p = init(&mut c, 0, "tx");
    c.add_share_participants(0, "tx", p.producer_id, p.producer_epoch, &[share(0)]);
    let out = c.tick(TIMEOUT as i64 + 1);
    let m = &markers(&out)[0];
    assert!(!m.commit);
    assert_eq!(m.participants, vec![share(0)]);
    // D4: the marker epoch is the staged epoch + 1.
    assert_eq!(m.producer_epoch, p.producer_epoch + 1);
    assert_eq!(share(0).topic_partition(), ("in", 0));
}

#[test]
fn add_share_participants_refuses_log_participants() {
    let mut c = coord();
    let p = init(&mut c, 0, "tx");
    let out = c.add_share_participants(
        0,
        "tx",
        p.producer_id,
        p.producer_epoch,
        &[Participant::log("t", 0)],
    );
    assert_eq!(out.result, Err(E::INVALID_REQUEST));
    assert_eq!(state(&c, "tx"), TxnState::Empty);
}

#[test]
fn verify_txn_for_staging_refusals() {
    let mut c = coord();
    assert_eq!(
        c.verify_txn_for_staging("nope", 1, 0),
        Err(E::TRANSACTIONAL_ID_NOT_FOUND)
    );
    assert_eq!(c.verify_txn_for_staging("", 1, 0), Err(E::INVALID_REQUEST));
    let p = init(&mut c, 0, "tx");
    let p2 = init(&mut c, 0, "tx");
    assert_eq!(
        c.verify_txn_for_staging("tx", p2.producer_id, p2.producer_epoch),
        Ok(())
    );
    assert_eq!(
        c.verify_txn_for_staging("tx", p.producer_id + 1, p2.producer_epoch),
        Err(E::INVALID_PRODUCER_ID_MAPPING)
    );
    assert_eq!(
        c.verify_txn_for_staging("tx", p.producer_id, p.producer_epoch),
        Err(E::PRODUCER_FENCED)
    );
    assert_eq!(
        c.verify_txn_for_staging("tx", p.producer_id, p2.producer_epoch + 1),
        Err(E::INVALID_PRODUCER_EPOCH)
    );
    // Ongoing and completed transactions accept staging; Prepare* is retriable.
    c.add_share_participants(0, "tx", p2.producer_id, p2.producer_epoch, &[share(0)]);
    assert_eq!(
        c.verify_txn_for_staging("tx", p2.producer_id, p2.producer_epoch),
        Ok(())
    );
    // A share transaction cannot end with TV1 (EndTxn below v5).
    let tv1 = c.end_txn(1, 3, "tx", p2.producer_id, p2.producer_epoch, true);
    assert_eq!(tv1.result, Err(E::INVALID_TXN_STATE));
    assert!(tv1.effects.is_empty());
    let end = c.end_txn(1, 5, "tx", p2.producer_id, p2.producer_epoch, true);
    let next = end.result.unwrap();
    assert_eq!(next.producer_epoch, p2.producer_epoch + 1);
    assert_eq!(
        c.verify_txn_for_staging("tx", next.producer_id, next.producer_epoch),
        Err(E::CONCURRENT_TRANSACTIONS)
    );
    let refused =
        c.add_share_participants(1, "tx", next.producer_id, next.producer_epoch, &[share(1)]);
    assert_eq!(refused.result, Err(E::CONCURRENT_TRANSACTIONS));
    assert!(refused.effects.is_empty());
    ack_all(&mut c, 2, &end.effects);
    assert_eq!(
        c.verify_txn_for_staging("tx", next.producer_id, next.producer_epoch),
        Ok(())
    );
}

#[test]
fn corner_case_14_concurrent_transactions_from_one_transactional_id_with_different_epochs() {
    let mut c = coord();
    // Producer A stages acknowledgements at epoch e.
    let a = init(&mut c, 0, "tx");
    c.add_share_participants(1, "tx", a.producer_id, a.producer_epoch, &[share(0)]);
    // Producer B starts with the same transactional.id: A is fenced, its
    // transaction aborted with epoch e + 1.
    let b_try = c.init_producer_id(2, &init_req("tx"));
    assert_eq!(b_try.result, Err(E::CONCURRENT_TRANSACTIONS));
    let abort = markers(&b_try.effects);
    assert_eq!(abort[0].participants, vec![share(0)]);
    assert_eq!(abort[0].producer_epoch, a.producer_epoch + 1);
    assert!(!abort[0].commit);
    // A can no longer stage or commit.
    assert_eq!(
        c.verify_txn_for_staging("tx", a.producer_id, a.producer_epoch),
        Err(E::PRODUCER_FENCED)
    );
    assert_eq!(
        c.end_txn(3, 5, "tx", a.producer_id, a.producer_epoch, true)
            .result,
        Err(E::PRODUCER_FENCED)
    );
    // B cannot stage before it has an epoch, nor while the abort is pending.
    assert_eq!(
        c.init_producer_id(3, &init_req("tx")).result,
        Err(E::CONCURRENT_TRANSACTIONS)
    );
    assert_eq!(
        c.transaction_outcome(a.producer_id, a.producer_epoch),
        TxnOutcome::Aborted
    );
    ack_all(&mut c, 4, &b_try.effects);
    let b = init(&mut c, 5, "tx");
    assert_eq!(b.producer_epoch, a.producer_epoch + 2);
    assert_eq!(
        c.add_share_participants(6, "tx", b.producer_id, b.producer_epoch, &[share(0)])
            .result,
        Ok(())
    );
    assert_eq!(
        c.add_share_participants(6, "tx", a.producer_id, a.producer_epoch, &[share(1)])
            .result,
        Err(E::PRODUCER_FENCED)
    );
    // A's staged records stay aborted; B's are ongoing.
    assert_eq!(
        c.transaction_outcome(a.producer_id, a.producer_epoch),
        TxnOutcome::Aborted
    );
    assert_eq!(
        c.transaction_outcome(b.producer_id, b.producer_epoch),
        TxnOutcome::Ongoing
    );
}

#[test]
fn transaction_outcome_follows_the_transaction_of_the_staged_epoch() {
    let mut c = coord();
    assert_eq!(c.transaction_outcome(42, 0), TxnOutcome::Unknown);
    let p = init(&mut c, 0, "tx");
    assert_eq!(
        c.transaction_outcome(p.producer_id, p.producer_epoch),
        TxnOutcome::Unknown
    );
    c.add_share_participants(0, "tx", p.producer_id, p.producer_epoch, &[share(0)]);
    assert_eq!(
        c.transaction_outcome(p.producer_id, p.producer_epoch),
        TxnOutcome::Ongoing
    );
    let out = c.end_txn(1, 5, "tx", p.producer_id, p.producer_epoch, true);
    let n = out.result.unwrap();
    // Decided: the share partition may apply it before the marker arrives.
    assert_eq!(
        c.transaction_outcome(p.producer_id, p.producer_epoch),
        TxnOutcome::Committed
    );
    ack_all(&mut c, 2, &out.effects);
    assert_eq!(
        c.transaction_outcome(p.producer_id, p.producer_epoch),
        TxnOutcome::Committed
    );
    // Next transaction at the bumped epoch, aborted.
    c.add_share_participants(3, "tx", n.producer_id, n.producer_epoch, &[share(0)]);
    assert_eq!(
        c.transaction_outcome(n.producer_id, n.producer_epoch),
        TxnOutcome::Ongoing
    );
    let out = c.end_txn(4, 5, "tx", n.producer_id, n.producer_epoch, false);
    assert_eq!(
        c.transaction_outcome(n.producer_id, n.producer_epoch),
        TxnOutcome::Aborted
    );
    ack_all(&mut c, 5, &out.effects);
    assert_eq!(
        c.transaction_outcome(n.producer_id, n.producer_epoch),
        TxnOutcome::Aborted
    );
    assert_eq!(
        c.transaction_outcome(n.producer_id + 99, n.producer_epoch),
        TxnOutcome::Unknown
    );
    // The outcome survives an InitProducerId that empties the state.
    init(&mut c, 6, "tx");
    assert_eq!(
        c.transaction_outcome(n.producer_id, n.producer_epoch),
        TxnOutcome::Aborted
    );
}

// ---------------------------------------------------------------------
// Persistence and recovery (D9)
// ---------------------------------------------------------------------

/// Collects the persisted records of a sequence of effect lists.
fn log_of(all: &[&[TxnEffect]]) -> Vec<TxnLogRecord> {
    all.iter()
        .flat_map(|effects| effects.iter())
        .filter_map(|e| match e {
            TxnEffect::Persist(r) => Some(r.clone()),
            _ => None,
        })
        .collect()
}

/// Round-trips records through the compact encoding, as a log would.
fn through_bytes(records: Vec<TxnLogRecord>) -> Vec<TxnLogRecord> {
    records
        .iter()
        .map(|r| TxnLogRecord::decode(&r.encode()).unwrap())
        .collect()
}

#[test]
fn log_record_encoding_round_trips_and_rejects_garbage() {
    let mut c = coord();
    let p = init(&mut c, 0, "tx");
    let out = c.add_share_participants(0, "tx", p.producer_id, p.producer_epoch, &[share(3)]);
    for r in log_of(&[&out.effects]) {
        let bytes = r.encode();
        assert_eq!(bytes[0], 1);
        assert_eq!(TxnLogRecord::decode(&bytes).unwrap(), r);
    }
    assert!(matches!(
        TxnLogRecord::decode(&[]),
        Err(TxnLogDecodeError::Empty)
    ));
    assert!(matches!(
        TxnLogRecord::decode(&[9, 0]),
        Err(TxnLogDecodeError::UnknownFormat(9))
    ));
    assert!(matches!(
        TxnLogRecord::decode(&[1, 0xc1]),
        Err(TxnLogDecodeError::Corrupt(_))
    ));
}

#[test]
fn recovery_of_empty_and_complete_states_and_coordinator_epoch_rises() {
    let mut c = coord();
    let e1 = c.init_producer_id(0, &init_req("empty"));
    let p = init(&mut c, 0, "done");
    let e2 = c.add_partitions_to_txn(0, 3, "done", p.producer_id, p.producer_epoch, &[tp("t", 0)]);
    let e3 = c.end_txn(0, 3, "done", p.producer_id, p.producer_epoch, true);
    let e4 = ack_all(&mut c, 0, &e3.effects);
    let e0 = c.init_producer_id(0, &init_req("done")); // bump after commit
    let log = log_of(&[&e1.effects, &e2.effects, &e3.effects, &e4, &e0.effects]);
    let log = through_bytes(log);
    let (r, effects) = TransactionCoordinator::recover(config(), log.clone(), 100);
    assert_eq!(r.coordinator_epoch(), 0);
    assert_eq!(
        effects,
        vec![TxnEffect::Persist(TxnLogRecord::CoordinatorEpoch(0))]
    );
    assert_eq!(r.describe("empty"), c.describe("empty"));
    assert_eq!(r.describe("done"), c.describe("done"));
    let mut log2 = log;
    log2.extend(log_of(&[&effects]));
    let (r2, _) = TransactionCoordinator::recover(config(), log2, 200);
    assert_eq!(r2.coordinator_epoch(), 1);
}

#[test]
fn recovery_keeps_producer_ids_unique() {
    let mut c = coord();
    let mut effects = Vec::new();
    let mut ids = std::collections::BTreeSet::new();
    let req = InitProducerIdRequest {
        transactional_id: None,
        ..init_req("")
    };
    for _ in 0..15 {
        let out = c.init_producer_id(0, &req);
        ids.insert(out.result.unwrap().producer_id);
        effects.extend(out.effects);
    }
    let (mut r, _) = TransactionCoordinator::recover(config(), log_of(&[&effects]), 0);
    for _ in 0..15 {
        let id = r.init_producer_id(0, &req).result.unwrap().producer_id;
        assert!(ids.insert(id), "producer id {id} reused after recovery");
    }
}

#[test]
fn recovery_of_ongoing_transaction_keeps_its_timeout() {
    let mut c = coord();
    let e1 = c.init_producer_id(0, &init_req("tx"));
    let p = e1.result.unwrap();
    let e2 = c.add_share_participants(10, "tx", p.producer_id, p.producer_epoch, &[share(0)]);
    let (mut r, effects) =
        TransactionCoordinator::recover(config(), log_of(&[&e1.effects, &e2.effects]), 500);
    assert!(markers(&effects).is_empty());
    assert_eq!(state(&r, "tx"), TxnState::Ongoing);
    assert_eq!(
        r.transaction_outcome(p.producer_id, p.producer_epoch),
        TxnOutcome::Ongoing
    );
    assert!(r.tick(10 + TIMEOUT as i64).is_empty());
    let out = r.tick(11 + TIMEOUT as i64);
    let m = markers(&out);
    assert_eq!(m[0].participants, vec![share(0)]);
    assert_eq!(m[0].coordinator_epoch, 0);
    assert!(!m[0].commit);
}

#[test]
fn recovery_in_prepare_commit_re_emits_markers_to_every_participant() {
    let mut c = coord();
    let p = init(&mut c, 0, "tx");
    let mut effects = Vec::new();
    effects.extend(c.init_producer_id(0, &init_req("tx")).effects);
    let p = ProducerIdAndEpoch {
        producer_epoch: p.producer_epoch + 1,
        ..p
    };
    effects.extend(
        c.add_share_participants(1, "tx", p.producer_id, p.producer_epoch, &[share(0)])
            .effects,
    );
    effects.extend(
        c.add_partitions_to_txn(1, 5, "tx", p.producer_id, p.producer_epoch, &[tp("o", 0)])
            .effects,
    );
    let end = c.end_txn(2, 5, "tx", p.producer_id, p.producer_epoch, true);
    effects.extend(end.effects.clone());
    // One marker acknowledged before the crash: it is sent again anyway.
    c.marker_written(
        3,
        "tx",
        p.producer_id,
        p.producer_epoch + 1,
        &share(0),
        MarkerAck::Written,
    );
    let mut log = vec![TxnLogRecord::CoordinatorEpoch(4)];
    log.extend(log_of(&[&effects]));
    let (mut r, out) = TransactionCoordinator::recover(config(), log, 1_000);
    assert_eq!(r.coordinator_epoch(), 5);
    let m = markers(&out);
    assert_eq!(m.len(), 1);
    assert!(m[0].commit);
    assert_eq!(m[0].coordinator_epoch, 5);
    assert_eq!(m[0].producer_epoch, p.producer_epoch + 1);
    assert_eq!(m[0].participants.len(), 2);
    assert_eq!(
        r.transaction_outcome(p.producer_id, p.producer_epoch),
        TxnOutcome::Committed
    );
    // Unacknowledged after recovery: resent after the backoff.
    assert_eq!(markers(&r.tick(1_000 + BACKOFF)).len(), 1);
    ack_all(&mut r, 1_200, &out);
    assert_eq!(state(&r, "tx"), TxnState::CompleteCommit);
    // A retried EndTxn is answered idempotently by the recovered coordinator.
    let retry = r.end_txn(1_300, 5, "tx", p.producer_id, p.producer_epoch, true);
    assert_eq!(retry.result, end.result);
}

#[test]
fn recovery_in_prepare_abort_from_fencing_re_emits_abort_markers() {
    let mut c = coord();
    let e1 = c.init_producer_id(0, &init_req("tx"));
    let p = e1.result.unwrap();
    let e2 = c.add_partitions_to_txn(0, 3, "tx", p.producer_id, p.producer_epoch, &[tp("t", 0)]);
    let e3 = c.init_producer_id(1, &init_req("tx"));
    let (mut r, out) = TransactionCoordinator::recover(
        config(),
        log_of(&[&e1.effects, &e2.effects, &e3.effects]),
        2,
    );
    let m = markers(&out);
    assert!(!m[0].commit);
    assert_eq!(m[0].producer_epoch, p.producer_epoch + 1);
    assert_eq!(
        r.init_producer_id(3, &init_req("tx")).result,
        Err(E::CONCURRENT_TRANSACTIONS)
    );
    ack_all(&mut r, 4, &out);
    assert_eq!(init(&mut r, 5, "tx").producer_epoch, p.producer_epoch + 2);
}

// ---------------------------------------------------------------------
// Errors by version, metrics
// ---------------------------------------------------------------------

#[test]
fn error_for_version_translates_kip_588_and_kip_890_codes() {
    use TxnApi::*;
    let f = E::PRODUCER_FENCED;
    assert_eq!(
        error_for_version(InitProducerId, 3, f),
        E::INVALID_PRODUCER_EPOCH
    );
    assert_eq!(error_for_version(InitProducerId, 4, f), f);
    for api in [AddPartitionsToTxn, AddOffsetsToTxn, EndTxn] {
        assert_eq!(error_for_version(api, 1, f), E::INVALID_PRODUCER_EPOCH);
        assert_eq!(error_for_version(api, 2, f), f);
    }
    let a = E::TRANSACTION_ABORTABLE;
    assert_eq!(error_for_version(Produce, 10, a), E::INVALID_TXN_STATE);
    assert_eq!(error_for_version(Produce, 11, a), a);
    assert_eq!(
        error_for_version(TxnOffsetCommit, 3, a),
        E::INVALID_TXN_STATE
    );
    assert_eq!(error_for_version(TxnOffsetCommit, 4, a), a);
    assert_eq!(
        error_for_version(AddPartitionsToTxn, 4, a),
        E::INVALID_TXN_STATE
    );
    assert_eq!(error_for_version(AddPartitionsToTxn, 5, a), a);
    assert_eq!(
        error_for_version(EndTxn, 0, E::CONCURRENT_TRANSACTIONS),
        E::CONCURRENT_TRANSACTIONS
    );
}

#[test]
fn metrics_count_open_transactions_participants_and_pending_markers() {
    let mut c = coord();
    ongoing_tv2(&mut c, 0, "a");
    let p = ongoing_tv2(&mut c, 0, "b");
    c.add_share_participants(0, "b", p.producer_id, p.producer_epoch, &[share(0)]);
    init(&mut c, 0, "idle");
    let m = c.metrics();
    assert_eq!(m.ongoing_transactions, 2);
    assert_eq!(m.transaction_partitions_count, 3);
    assert_eq!(m.share_participants_count, 1);
    assert_eq!(m.markers_pending, 0);
    let out = c.end_txn(1, 5, "b", p.producer_id, p.producer_epoch, false);
    assert_eq!(c.metrics().markers_pending, 2);
    assert_eq!(c.metrics().ongoing_transactions, 2);
    ack_all(&mut c, 2, &out.effects);
    let m = c.metrics();
    assert_eq!(m.ongoing_transactions, 1);
    assert_eq!(m.markers_pending, 0);
    assert_eq!(m.transactions_aborted, 1);
}

#[test]
fn state_transition_table_matches_kafka() {
    use TxnState::*;
    assert!(Ongoing.can_transition_to(PrepareEpochFence));
    assert!(PrepareEpochFence.can_transition_to(PrepareAbort));
    assert!(!PrepareEpochFence.can_transition_to(PrepareCommit));
    assert!(!Empty.can_transition_to(PrepareCommit));
    assert!(Empty.can_transition_to(PrepareAbort));
    assert!(!PrepareCommit.can_transition_to(CompleteAbort));
    assert!(!PrepareCommit.can_transition_to(Ongoing));
    assert!(!CompleteCommit.can_transition_to(CompleteCommit));
    assert_eq!(PrepareEpochFence.name(), "PrepareEpochFence");
}

mod property;
