//! KIP-1191 in the share partition: the ARCHIVING state and the hand-off to
//! the dead-letter writer, on explicit time.

use super::*;
use crate::share::types::*;

const LOCK: i64 = 1_000;
const LIMIT: u16 = 3;
const M: &str = "m1";

fn cfg(dlq: bool) -> SharePartitionConfig {
    SharePartitionConfig {
        record_lock_duration_ms: LOCK,
        delivery_count_limit: LIMIT,
        max_in_flight_records: 100,
        isolation: IsolationLevel::ReadUncommitted,
        renew_acknowledge_enabled: true,
        dead_letter_queue: dlq,
    }
}

/// Acquires offsets `0..n` (one batch) at `now` for `member`.
fn acquire_all(sp: &mut SharePartition, member: &str, n: i64, now: i64) -> Acquisition {
    let batches = [FetchedBatch::data(0, n - 1)];
    sp.acquire(
        member,
        1000,
        AcquireMode::BatchOptimized,
        now,
        &LogView {
            high_watermark: n,
            last_stable_offset: n,
            batches: &batches,
        },
    )
}

fn state(sp: &SharePartition, offset: i64) -> Option<RecordState> {
    sp.record(offset).map(|r| r.state)
}

fn ack(sp: &mut SharePartition, first: i64, last: i64, ty: AcknowledgeType, now: i64) {
    sp.acknowledge(M, &[AcknowledgementBatch::uniform(first, last, ty)], now)
        .expect("acknowledge");
}

#[test]
fn archiving_has_kafkas_id_and_is_not_terminal() {
    assert_eq!(RecordState::Archiving.id(), 3);
    assert!(!RecordState::Archiving.is_terminal());
}

#[test]
fn a_reject_with_a_dead_letter_queue_archives_through_archiving() {
    let mut sp = SharePartition::new(cfg(true), 0);
    acquire_all(&mut sp, M, 5, 0);
    ack(&mut sp, 1, 2, AcknowledgeType::Reject, 10);
    ack(&mut sp, 0, 0, AcknowledgeType::Accept, 10);
    assert_eq!(state(&sp, 1), Some(RecordState::Archiving));
    assert_eq!(
        sp.record(2).unwrap().dead_letter,
        Some(DeadLetterCause::Rejected)
    );
    // ARCHIVING holds the start offset: offset 0 is done, 1 is not.
    assert_eq!(sp.start_offset(), 1);
    assert_eq!(sp.metrics().archiving_records, 2);
    let taken = sp.take_dead_letters();
    assert_eq!(
        taken,
        vec![DeadLetterRange {
            first_offset: 1,
            last_offset: 2,
            delivery_count: 1,
            cause: DeadLetterCause::Rejected,
        }]
    );
    // Taken once only.
    assert!(sp.take_dead_letters().is_empty());
    // A member cannot acknowledge an ARCHIVING record again.
    let again = sp.acknowledge(
        M,
        &[AcknowledgementBatch::uniform(1, 1, AcknowledgeType::Accept)],
        20,
    );
    assert_eq!(
        again.unwrap_err().error_code(),
        sharestream_protocol::ErrorCode::INVALID_RECORD_STATE
    );
    let (archived, _) = sp.finish_dead_letters(1, 2);
    assert_eq!(archived, 2);
    assert_eq!(
        state(&sp, 1),
        None,
        "below the start offset: terminal and forgotten"
    );
    assert_eq!(sp.start_offset(), 3);
    assert_eq!(sp.metrics().archiving_records, 0);
}

#[test]
fn without_a_dead_letter_queue_a_reject_archives_at_once() {
    let mut sp = SharePartition::new(cfg(false), 0);
    acquire_all(&mut sp, M, 3, 0);
    ack(&mut sp, 0, 1, AcknowledgeType::Reject, 10);
    assert_eq!(sp.start_offset(), 2);
    assert!(sp.take_dead_letters().is_empty());
}

#[test]
fn a_gap_is_never_a_dead_letter() {
    let mut sp = SharePartition::new(cfg(true), 0);
    acquire_all(&mut sp, M, 3, 0);
    ack(&mut sp, 0, 2, AcknowledgeType::Gap, 10);
    assert_eq!(sp.start_offset(), 3);
    assert!(sp.take_dead_letters().is_empty());
}

#[test]
fn lock_expiry_at_the_delivery_limit_makes_a_dead_letter() {
    let mut sp = SharePartition::new(cfg(true), 0);
    let mut now = 0;
    for delivery in 1..=LIMIT {
        let a = acquire_all(&mut sp, M, 2, now);
        assert_eq!(a.acquired[0].delivery_count, delivery);
        now += LOCK; // the lock expires unacknowledged
        sp.tick(now);
    }
    assert_eq!(state(&sp, 0), Some(RecordState::Archiving));
    assert_eq!(sp.metrics().archived_at_limit_total, 2);
    assert_eq!(
        sp.take_dead_letters(),
        vec![DeadLetterRange {
            first_offset: 0,
            last_offset: 1,
            delivery_count: LIMIT,
            cause: DeadLetterCause::DeliveryCountExceeded,
        }]
    );
    // Never delivered again while ARCHIVING.
    let a = acquire_all(&mut sp, M, 2, now);
    assert!(a.acquired.is_empty(), "{a:?}");
    sp.finish_dead_letters(0, 1);
    assert_eq!(sp.start_offset(), 2);
}

#[test]
fn release_at_the_limit_and_a_departing_member_make_dead_letters() {
    let mut sp = SharePartition::new(cfg(true), 0);
    let mut now = 0;
    for _ in 1..LIMIT {
        acquire_all(&mut sp, M, 2, now);
        ack(&mut sp, 0, 1, AcknowledgeType::Release, now + 1);
        now += 10;
    }
    assert!(
        sp.take_dead_letters().is_empty(),
        "below the limit: AVAILABLE"
    );
    acquire_all(&mut sp, M, 2, now);
    // Offset 0 released at the limit, offset 1 lost with its member.
    ack(&mut sp, 0, 0, AcknowledgeType::Release, now + 1);
    sp.release_member(M, now + 2);
    let taken = sp.take_dead_letters();
    assert_eq!(
        taken,
        vec![DeadLetterRange {
            first_offset: 0,
            last_offset: 1,
            delivery_count: LIMIT,
            cause: DeadLetterCause::DeliveryCountExceeded,
        }],
        "adjacent runs of one cause merge"
    );
}

#[test]
fn a_transactional_reject_is_a_dead_letter_only_when_its_transaction_commits() {
    let mut sp = SharePartition::new(cfg(true), 0);
    acquire_all(&mut sp, M, 4, 0);
    let reject = [AcknowledgementBatch::uniform(0, 1, AcknowledgeType::Reject)];
    sp.stage(M, 7, 0, &reject, 10).unwrap();
    assert_eq!(state(&sp, 0), Some(RecordState::TxPending));
    assert!(sp.take_dead_letters().is_empty(), "staged: not yet");
    // Abort: the records come back to the member, nothing is dead-lettered.
    let out = sp.apply_marker(7, 0, false, 20, |_| true);
    assert_eq!(out.resolved_records, 2);
    assert_eq!(state(&sp, 0), Some(RecordState::Acquired));
    assert!(sp.take_dead_letters().is_empty(), "aborted: never");
    // Staged again in the next transaction, and committed.
    sp.stage(M, 7, 1, &reject, 30).unwrap();
    sp.apply_marker(7, 1, true, 40, |_| true);
    assert_eq!(state(&sp, 0), Some(RecordState::Archiving));
    assert_eq!(
        sp.take_dead_letters(),
        vec![DeadLetterRange {
            first_offset: 0,
            last_offset: 1,
            delivery_count: 1,
            cause: DeadLetterCause::Rejected,
        }]
    );
    // A transactional ACCEPT never is.
    let accept = [AcknowledgementBatch::uniform(2, 3, AcknowledgeType::Accept)];
    sp.stage(M, 7, 2, &accept, 50).unwrap();
    sp.apply_marker(7, 2, true, 60, |_| true);
    assert!(sp.take_dead_letters().is_empty());
}

#[test]
fn archiving_survives_a_snapshot_and_is_handed_out_again_after_restore() {
    let mut sp = SharePartition::new(cfg(true), 0);
    acquire_all(&mut sp, M, 3, 0);
    ack(&mut sp, 1, 1, AcknowledgeType::Reject, 10);
    // The writer took the run, and the broker died before finishing it.
    assert_eq!(sp.take_dead_letters().len(), 1);
    let bytes = sp.snapshot().to_bytes().unwrap();
    let state = SharePartitionState::from_bytes(&bytes).unwrap();
    assert!(state.runs.iter().any(|r| r.state
        == PersistedRecordState::Archiving {
            cause: DeadLetterCause::Rejected
        }));
    let mut back = SharePartition::restore(cfg(true), state, 1_000).unwrap();
    assert_eq!(back.record(1).unwrap().state, RecordState::Archiving);
    assert_eq!(
        back.take_dead_letters(),
        vec![DeadLetterRange {
            first_offset: 1,
            last_offset: 1,
            delivery_count: 1,
            cause: DeadLetterCause::Rejected,
        }]
    );
    back.finish_dead_letters(1, 1);
    assert_eq!(back.record(1).unwrap().state, RecordState::Archived);
}

#[test]
fn a_run_returned_after_a_failed_attempt_is_handed_out_again() {
    let mut sp = SharePartition::new(cfg(true), 0);
    acquire_all(&mut sp, M, 3, 0);
    ack(&mut sp, 0, 2, AcknowledgeType::Reject, 10);
    let taken = sp.take_dead_letters();
    sp.return_dead_letters(&taken);
    assert_eq!(sp.take_dead_letters(), taken);
    // Part of it finished meanwhile: only the rest comes back.
    sp.finish_dead_letters(0, 0);
    sp.return_dead_letters(&taken);
    let again = sp.take_dead_letters();
    assert_eq!(again.len(), 1);
    assert_eq!((again[0].first_offset, again[0].last_offset), (1, 2));
}

#[test]
fn states_written_before_archiving_existed_still_decode() {
    // The persisted record state as it was before ARCHIVING was added.
    #[derive(serde::Serialize)]
    #[allow(dead_code)]
    enum OldRecordState {
        Available,
        Acquired,
        Acknowledged,
        Archived,
        TxPending {
            member_id: String,
            producer_id: i64,
            producer_epoch: i16,
            ack: TxnAckType,
        },
    }
    #[derive(serde::Serialize)]
    struct OldRun {
        first_offset: i64,
        last_offset: i64,
        delivery_count: u16,
        state: OldRecordState,
    }
    #[derive(serde::Serialize)]
    struct OldState {
        state_epoch: i32,
        start_offset: i64,
        end_offset: i64,
        runs: Vec<OldRun>,
    }
    let old = OldState {
        state_epoch: 2,
        start_offset: 0,
        end_offset: 3,
        runs: vec![
            OldRun {
                first_offset: 0,
                last_offset: 0,
                delivery_count: 1,
                state: OldRecordState::Archived,
            },
            OldRun {
                first_offset: 1,
                last_offset: 2,
                delivery_count: 1,
                state: OldRecordState::TxPending {
                    member_id: "m".into(),
                    producer_id: 7,
                    producer_epoch: 1,
                    ack: TxnAckType::Reject,
                },
            },
        ],
    };
    let bytes = rmp_serde::to_vec_named(&old).unwrap();
    let back = SharePartitionState::from_bytes(&bytes).unwrap();
    assert_eq!(back.runs[0].state, PersistedRecordState::Archived);
    assert_eq!(
        back.runs[1].state,
        PersistedRecordState::TxPending {
            member_id: "m".into(),
            producer_id: 7,
            producer_epoch: 1,
            ack: TxnAckType::Reject,
        }
    );
}

#[test]
fn a_record_restored_at_the_delivery_limit_is_a_dead_letter() {
    // ACQUIRED at its last delivery when the broker died: its lock died
    // with it, and it may not be delivered again.
    let mut sp = SharePartition::new(cfg(true), 0);
    let mut now = 0;
    for _ in 1..LIMIT {
        acquire_all(&mut sp, M, 1, now);
        now += LOCK;
        sp.tick(now);
    }
    acquire_all(&mut sp, M, 1, now);
    assert_eq!(sp.record(0).unwrap().delivery_count, LIMIT);
    let state = sp.snapshot();
    let mut back = SharePartition::restore(cfg(true), state.clone(), now + 1).unwrap();
    assert_eq!(
        back.take_dead_letters(),
        vec![DeadLetterRange {
            first_offset: 0,
            last_offset: 0,
            delivery_count: LIMIT,
            cause: DeadLetterCause::DeliveryCountExceeded,
        }]
    );
    // Without a queue it is archived at once.
    let back = SharePartition::restore(cfg(false), state, now + 1).unwrap();
    assert_eq!(back.start_offset(), 1);
}

#[test]
fn a_gap_committed_in_a_transaction_is_archived_without_a_dead_letter() {
    let mut sp = SharePartition::new(cfg(true), 0);
    acquire_all(&mut sp, M, 3, 0);
    let staged = [
        AcknowledgementBatch::uniform(0, 0, AcknowledgeType::Gap),
        AcknowledgementBatch::uniform(1, 1, AcknowledgeType::Reject),
        AcknowledgementBatch::uniform(2, 2, AcknowledgeType::Gap),
    ];
    sp.stage(M, 9, 0, &staged, 10).unwrap();
    assert_eq!(sp.record(0).unwrap().txn_ack, Some(TxnAckType::Gap));
    sp.apply_marker(9, 0, true, 20, |_| true);
    assert_eq!(state(&sp, 0), None, "the gap at 0 is ARCHIVED and passed");
    assert_eq!(state(&sp, 1), Some(RecordState::Archiving));
    assert_eq!(state(&sp, 2), Some(RecordState::Archived));
    let taken = sp.take_dead_letters();
    assert_eq!(taken.len(), 1);
    assert_eq!((taken[0].first_offset, taken[0].last_offset), (1, 1));
}
