//! Unit tests of the share partition, on explicit time.

use super::*;
use crate::share::types::*;
use sharestream_protocol::ErrorCode;

const LOCK: i64 = 1_000;
const LIMIT: u16 = 3;

fn cfg() -> SharePartitionConfig {
    SharePartitionConfig {
        record_lock_duration_ms: LOCK,
        delivery_count_limit: LIMIT,
        max_in_flight_records: 100,
        isolation: IsolationLevel::ReadUncommitted,
        renew_acknowledge_enabled: true,
        dead_letter_queue: false,
    }
}

fn rc_cfg() -> SharePartitionConfig {
    SharePartitionConfig {
        isolation: IsolationLevel::ReadCommitted,
        ..cfg()
    }
}

fn data(ranges: &[(i64, i64)]) -> Vec<FetchedBatch> {
    ranges
        .iter()
        .map(|&(b, l)| FetchedBatch::data(b, l))
        .collect()
}

/// Acquires from `batches` with the high watermark and LSO past them.
fn acq(
    sp: &mut SharePartition,
    member: &str,
    max: u32,
    now: i64,
    batches: &[FetchedBatch],
) -> Acquisition {
    let end = batches.last().map(|b| b.last_offset + 1).unwrap_or(0);
    sp.acquire(
        member,
        max,
        AcquireMode::BatchOptimized,
        now,
        &LogView {
            high_watermark: end,
            last_stable_offset: end,
            batches,
        },
    )
}

fn range(first: i64, last: i64, dc: u16) -> AcquiredRange {
    AcquiredRange {
        first_offset: first,
        last_offset: last,
        delivery_count: dc,
    }
}

fn ack(first: i64, last: i64, ty: AcknowledgeType) -> AcknowledgementBatch {
    AcknowledgementBatch::uniform(first, last, ty)
}

fn st(sp: &SharePartition, offset: i64) -> Option<RecordState> {
    sp.record(offset).map(|r| r.state)
}

fn dc(sp: &SharePartition, offset: i64) -> u16 {
    sp.record(offset).expect("in window").delivery_count
}

/// Structural invariants that must hold after every operation.
fn check(sp: &SharePartition) {
    assert!(sp.runs.is_canonical(), "runs not canonical");
    let mut next = sp.start_offset;
    let mut recount = StateCounts::default();
    for (f, l, s) in sp.runs.iter() {
        assert_eq!(f, next, "runs not contiguous");
        next = l + 1;
        recount.moved(None, Some(s.state.record_state()), (l - f + 1) as u64);
        if s.state == SlotState::Available {
            assert!(s.delivery_count < LIMIT.max(sp.config.delivery_count_limit));
        }
        if let SlotState::Acquired { .. } | SlotState::TxPending(_) = s.state {
            assert!(s.delivery_count >= 1);
        }
    }
    assert_eq!(next, sp.end_offset, "runs do not reach the end offset");
    assert_eq!(recount, sp.counts, "counters differ from a recount");
    if let Some(d) = sp.next_deadline() {
        assert!(sp.deadline_floor <= d, "deadline floor above a deadline");
    }
    if let Some((_, _, s)) = sp.runs.first_run() {
        assert!(
            !s.state.record_state().is_terminal(),
            "SPSO not advanced over terminal records"
        );
    }
}

// ----- acquisition -----------------------------------------------------------

#[test]
fn new_partition_is_empty_and_fetches_from_its_start_offset() {
    let sp = SharePartition::new(cfg(), 42);
    assert_eq!(sp.start_offset(), 42);
    assert_eq!(sp.end_offset(), 42);
    assert_eq!(sp.next_fetch_offset(), Some(42));
    assert_eq!(sp.run_count(), 0);
    assert_eq!(sp.metrics(), SharePartitionMetrics::default());
    check(&sp);
}

#[test]
fn default_config_matches_kafka_defaults() {
    let c = SharePartitionConfig::default();
    assert_eq!(c.record_lock_duration_ms, 30_000);
    assert_eq!(c.delivery_count_limit, 5);
    assert_eq!(c.max_in_flight_records, 2000);
    assert_eq!(c.isolation, IsolationLevel::ReadUncommitted);
}

#[test]
fn batch_optimized_acquisition_hands_out_whole_batches() {
    let mut sp = SharePartition::new(cfg(), 0);
    let a = acq(&mut sp, "m1", 3, 0, &data(&[(0, 4), (5, 9)]));
    assert_eq!(a.acquired, vec![range(0, 4, 1)]);
    assert!(a.gaps.is_empty());
    assert_eq!(sp.end_offset(), 5);
    let info = sp.record(2).unwrap();
    assert_eq!(info.state, RecordState::Acquired);
    assert_eq!(info.member_id.as_deref(), Some("m1"));
    assert_eq!(info.lock_deadline_ms, Some(LOCK));
    assert_eq!(sp.run_count(), 1);
    check(&sp);
}

#[test]
fn record_limit_acquisition_stops_mid_batch() {
    let mut sp = SharePartition::new(cfg(), 0);
    let batches = data(&[(0, 9)]);
    let log = LogView {
        high_watermark: 10,
        last_stable_offset: 10,
        batches: &batches,
    };
    let a = sp.acquire("m1", 3, AcquireMode::RecordLimit, 0, &log);
    assert_eq!(a.acquired, vec![range(0, 2, 1)]);
    assert_eq!(sp.end_offset(), 3);
    let b = sp.acquire("m2", 4, AcquireMode::RecordLimit, 0, &log);
    assert_eq!(b.acquired, vec![range(3, 6, 1)]);
    check(&sp);
}

#[test]
fn acquisition_never_goes_beyond_fetched_data_or_the_high_watermark() {
    let mut sp = SharePartition::new(cfg(), 0);
    let batches = data(&[(0, 9)]);
    let a = sp.acquire(
        "m1",
        100,
        AcquireMode::BatchOptimized,
        0,
        &LogView {
            high_watermark: 6,
            last_stable_offset: 6,
            batches: &batches,
        },
    );
    assert_eq!(a.acquired, vec![range(0, 5, 1)]);
    // Nothing fetched: nothing acquired, even below the high watermark.
    let b = sp.acquire(
        "m1",
        100,
        AcquireMode::BatchOptimized,
        0,
        &LogView {
            high_watermark: 100,
            last_stable_offset: 100,
            batches: &[],
        },
    );
    assert!(b.acquired.is_empty());
    assert_eq!(sp.end_offset(), 6);
    check(&sp);
}

#[test]
fn zero_max_records_acquires_nothing() {
    let mut sp = SharePartition::new(cfg(), 0);
    assert!(
        acq(&mut sp, "m1", 0, 0, &data(&[(0, 9)]))
            .acquired
            .is_empty()
    );
    assert_eq!(sp.end_offset(), 0);
}

#[test]
fn available_records_of_the_window_are_reacquired_before_new_ones() {
    let mut sp = SharePartition::new(cfg(), 0);
    acq(&mut sp, "m1", 10, 0, &data(&[(0, 9)]));
    sp.acknowledge("m1", &[ack(3, 4, AcknowledgeType::Release)], 1)
        .unwrap();
    assert_eq!(sp.next_fetch_offset(), Some(3));
    let a = acq(&mut sp, "m2", 10, 2, &data(&[(0, 9), (10, 14)]));
    assert_eq!(a.acquired, vec![range(3, 4, 2), range(10, 14, 1)]);
    assert_eq!(sp.record(3).unwrap().member_id.as_deref(), Some("m2"));
    assert_eq!(sp.metrics().redeliveries_total, 2);
    check(&sp);
}

#[test]
fn records_acquired_by_others_are_skipped() {
    let mut sp = SharePartition::new(cfg(), 0);
    acq(&mut sp, "m1", 10, 0, &data(&[(0, 9)]));
    let a = acq(&mut sp, "m2", 10, 0, &data(&[(0, 9)]));
    assert!(a.acquired.is_empty());
    assert_eq!(sp.record(0).unwrap().member_id.as_deref(), Some("m1"));
}

#[test]
fn in_flight_cap_limits_new_acquisitions() {
    let mut sp = SharePartition::new(
        SharePartitionConfig {
            max_in_flight_records: 10,
            ..cfg()
        },
        0,
    );
    let a = acq(&mut sp, "m1", 100, 0, &data(&[(0, 19)]));
    assert_eq!(a.acquired, vec![range(0, 9, 1)]);
    assert_eq!(sp.next_fetch_offset(), None);
    assert!(
        acq(&mut sp, "m1", 100, 0, &data(&[(10, 19)]))
            .acquired
            .is_empty()
    );
    sp.acknowledge("m1", &[ack(0, 3, AcknowledgeType::Accept)], 1)
        .unwrap();
    assert_eq!(sp.start_offset(), 4);
    assert_eq!(sp.next_fetch_offset(), Some(10));
    let b = acq(&mut sp, "m1", 100, 1, &data(&[(10, 19)]));
    assert_eq!(b.acquired, vec![range(10, 13, 1)]);
    assert_eq!(sp.metrics().in_flight_records, 10);
    check(&sp);
}

#[test]
fn in_flight_cap_still_allows_reacquiring_available_records() {
    let mut sp = SharePartition::new(
        SharePartitionConfig {
            max_in_flight_records: 5,
            ..cfg()
        },
        0,
    );
    acq(&mut sp, "m1", 100, 0, &data(&[(0, 9)]));
    sp.acknowledge("m1", &[ack(2, 2, AcknowledgeType::Release)], 0)
        .unwrap();
    assert_eq!(sp.next_fetch_offset(), Some(2));
    let a = acq(&mut sp, "m2", 100, 0, &data(&[(0, 9)]));
    assert_eq!(a.acquired, vec![range(2, 2, 2)]);
    assert_eq!(sp.end_offset(), 5);
}

#[test]
fn offsets_no_fetched_batch_holds_are_archived() {
    let mut sp = SharePartition::new(cfg(), 0);
    let a = acq(&mut sp, "m1", 100, 0, &data(&[(0, 2), (6, 8)]));
    assert_eq!(a.acquired, vec![range(0, 2, 1), range(6, 8, 1)]);
    assert_eq!(st(&sp, 4), Some(RecordState::Archived));
    assert_eq!(dc(&sp, 4), 0);
    // A hole before the first fetched batch, at the start: SPSO moves over it.
    let mut sp = SharePartition::new(cfg(), 0);
    let a = acq(&mut sp, "m1", 100, 0, &data(&[(5, 7)]));
    assert_eq!(a.acquired, vec![range(5, 7, 1)]);
    assert_eq!(sp.start_offset(), 5);
    check(&sp);
}

#[test]
fn read_committed_acquires_only_below_the_last_stable_offset() {
    let mut sp = SharePartition::new(rc_cfg(), 0);
    let batches = data(&[(0, 9)]);
    let a = sp.acquire(
        "m1",
        100,
        AcquireMode::BatchOptimized,
        0,
        &LogView {
            high_watermark: 10,
            last_stable_offset: 4,
            batches: &batches,
        },
    );
    assert_eq!(a.acquired, vec![range(0, 3, 1)]);
    assert_eq!(sp.end_offset(), 4);
}

#[test]
fn read_committed_aborted_and_control_batches_are_acquired_as_gaps() {
    let mut sp = SharePartition::new(rc_cfg(), 0);
    let batches = vec![
        FetchedBatch::data(0, 2),
        FetchedBatch {
            base_offset: 3,
            last_offset: 5,
            control: false,
            aborted: true,
        },
        FetchedBatch {
            base_offset: 6,
            last_offset: 6,
            control: true,
            aborted: false,
        },
        FetchedBatch::data(7, 9),
    ];
    let a = acq(&mut sp, "m1", 100, 0, &batches);
    assert_eq!(a.acquired, vec![range(0, 9, 1)]);
    assert_eq!(
        a.gaps,
        vec![OffsetRange {
            first_offset: 3,
            last_offset: 6
        }]
    );
    // The consumer acknowledges the gaps as GAP, the data as ACCEPT.
    sp.acknowledge(
        "m1",
        &[
            ack(0, 2, AcknowledgeType::Accept),
            ack(3, 6, AcknowledgeType::Gap),
            ack(7, 9, AcknowledgeType::Accept),
        ],
        1,
    )
    .unwrap();
    assert_eq!(sp.start_offset(), 10);
    assert_eq!(sp.run_count(), 0);
    check(&sp);
}

#[test]
fn read_uncommitted_delivers_aborted_data_but_control_records_are_gaps() {
    let mut sp = SharePartition::new(cfg(), 0);
    let batches = vec![
        FetchedBatch {
            base_offset: 0,
            last_offset: 2,
            control: false,
            aborted: true,
        },
        FetchedBatch {
            base_offset: 3,
            last_offset: 3,
            control: true,
            aborted: false,
        },
    ];
    let a = acq(&mut sp, "m1", 100, 0, &batches);
    assert_eq!(a.acquired, vec![range(0, 3, 1)]);
    assert_eq!(
        a.gaps,
        vec![OffsetRange {
            first_offset: 3,
            last_offset: 3
        }]
    );
}

#[test]
fn reacquired_gaps_are_reported_as_gaps_again() {
    let mut sp = SharePartition::new(rc_cfg(), 0);
    let batches = vec![FetchedBatch {
        base_offset: 0,
        last_offset: 1,
        control: true,
        aborted: false,
    }];
    acq(&mut sp, "m1", 100, 0, &batches);
    sp.tick(LOCK);
    let a = acq(&mut sp, "m2", 100, LOCK, &batches);
    assert_eq!(a.acquired, vec![range(0, 1, 2)]);
    assert_eq!(a.gaps.len(), 1);
}

// ----- acknowledgement ------------------------------------------------------------

#[test]
fn accept_acknowledges_and_moves_the_start_offset() {
    let mut sp = SharePartition::new(cfg(), 0);
    acq(&mut sp, "m1", 10, 0, &data(&[(0, 9)]));
    let e = sp
        .acknowledge("m1", &[ack(0, 4, AcknowledgeType::Accept)], 1)
        .unwrap();
    assert!(!e.records_available);
    assert_eq!(sp.start_offset(), 5);
    assert_eq!(st(&sp, 4), None);
    sp.acknowledge("m1", &[ack(7, 9, AcknowledgeType::Accept)], 1)
        .unwrap();
    assert_eq!(sp.start_offset(), 5);
    assert_eq!(st(&sp, 8), Some(RecordState::Acknowledged));
    assert_eq!(sp.metrics().acknowledged_records, 3);
    sp.acknowledge("m1", &[ack(5, 6, AcknowledgeType::Accept)], 1)
        .unwrap();
    assert_eq!(sp.start_offset(), 10);
    assert_eq!(sp.run_count(), 0);
    check(&sp);
}

#[test]
fn reject_and_gap_archive() {
    let mut sp = SharePartition::new(cfg(), 0);
    acq(&mut sp, "m1", 10, 0, &data(&[(0, 9)]));
    sp.acknowledge(
        "m1",
        &[
            ack(2, 3, AcknowledgeType::Reject),
            ack(5, 5, AcknowledgeType::Gap),
        ],
        1,
    )
    .unwrap();
    assert_eq!(st(&sp, 2), Some(RecordState::Archived));
    assert_eq!(st(&sp, 5), Some(RecordState::Archived));
    assert_eq!(st(&sp, 4), Some(RecordState::Acquired));
    assert_eq!(sp.metrics().archived_records, 3);
    check(&sp);
}

#[test]
fn release_makes_available_and_keeps_the_delivery_count() {
    let mut sp = SharePartition::new(cfg(), 0);
    acq(&mut sp, "m1", 10, 0, &data(&[(0, 9)]));
    let e = sp
        .acknowledge("m1", &[ack(0, 9, AcknowledgeType::Release)], 1)
        .unwrap();
    assert!(e.records_available);
    assert_eq!(st(&sp, 0), Some(RecordState::Available));
    assert_eq!(dc(&sp, 0), 1);
    let a = acq(&mut sp, "m2", 10, 2, &data(&[(0, 9)]));
    assert_eq!(a.acquired, vec![range(0, 9, 2)]);
    check(&sp);
}

#[test]
fn release_at_the_delivery_count_limit_archives() {
    let mut sp = SharePartition::new(cfg(), 0);
    for round in 1..=LIMIT {
        let a = acq(&mut sp, "m1", 10, 0, &data(&[(0, 0)]));
        assert_eq!(a.acquired, vec![range(0, 0, round)]);
        sp.acknowledge("m1", &[ack(0, 0, AcknowledgeType::Release)], 0)
            .unwrap();
    }
    // Third delivery reached the limit: archived, never delivered again.
    assert_eq!(sp.start_offset(), 1);
    assert!(
        acq(&mut sp, "m1", 10, 0, &data(&[(0, 0)]))
            .acquired
            .is_empty()
    );
    check(&sp);
}

#[test]
fn renew_extends_the_lock() {
    let mut sp = SharePartition::new(cfg(), 0);
    acq(&mut sp, "m1", 10, 0, &data(&[(0, 4)]));
    sp.acknowledge("m1", &[ack(0, 1, AcknowledgeType::Renew)], 900)
        .unwrap();
    assert_eq!(sp.record(0).unwrap().lock_deadline_ms, Some(900 + LOCK));
    let t = sp.tick(LOCK);
    assert_eq!(t.expired_records, 3);
    assert_eq!(st(&sp, 0), Some(RecordState::Acquired));
    assert_eq!(st(&sp, 2), Some(RecordState::Available));
    assert_eq!(dc(&sp, 0), 1, "renew is not a delivery");
    check(&sp);
}

/// KIP-1222/KIP-1240: with `share.renew.acknowledge.enable` off, a RENEW
/// fails the partition with INVALID_RECORD_STATE and, acknowledgements
/// being all or nothing, the other batches of the request change nothing.
#[test]
fn renew_is_refused_when_the_group_disables_it() {
    let mut sp = SharePartition::new(
        SharePartitionConfig {
            renew_acknowledge_enabled: false,
            ..cfg()
        },
        0,
    );
    acq(&mut sp, "m1", 10, 0, &data(&[(0, 4)]));
    let e = sp
        .acknowledge(
            "m1",
            &[
                ack(0, 1, AcknowledgeType::Accept),
                ack(2, 3, AcknowledgeType::Renew),
            ],
            900,
        )
        .unwrap_err();
    assert_eq!(e.error_code(), ErrorCode::INVALID_RECORD_STATE);
    assert_eq!(st(&sp, 0), Some(RecordState::Acquired), "nothing applied");
    assert_eq!(sp.record(2).unwrap().lock_deadline_ms, Some(LOCK));
    // Per-offset types are checked too.
    let e = sp
        .acknowledge(
            "m1",
            &[AcknowledgementBatch {
                first_offset: 0,
                last_offset: 1,
                acknowledge_types: vec![1, 4],
            }],
            900,
        )
        .unwrap_err();
    assert_eq!(e.error_code(), ErrorCode::INVALID_RECORD_STATE);
    // Other types are served as usual.
    sp.acknowledge("m1", &[ack(0, 4, AcknowledgeType::Accept)], 900)
        .unwrap();
    assert_eq!(sp.start_offset(), 5);
    check(&sp);
}

#[test]
fn per_offset_acknowledge_types_apply_offset_by_offset() {
    let mut sp = SharePartition::new(cfg(), 0);
    acq(&mut sp, "m1", 10, 0, &data(&[(0, 3)]));
    sp.acknowledge(
        "m1",
        &[AcknowledgementBatch {
            first_offset: 0,
            last_offset: 3,
            acknowledge_types: vec![1, 2, 3, 1],
        }],
        1,
    )
    .unwrap();
    assert_eq!(sp.start_offset(), 1);
    assert_eq!(st(&sp, 1), Some(RecordState::Available));
    assert_eq!(st(&sp, 2), Some(RecordState::Archived));
    assert_eq!(st(&sp, 3), Some(RecordState::Acknowledged));
    check(&sp);
}

#[test]
fn malformed_acknowledgement_batches_are_invalid_request() {
    let mut sp = SharePartition::new(cfg(), 0);
    acq(&mut sp, "m1", 10, 0, &data(&[(0, 9)]));
    let before = sp.snapshot();
    let bad: Vec<Vec<AcknowledgementBatch>> = vec![
        vec![ack(5, 4, AcknowledgeType::Accept)],
        vec![ack(-1, 0, AcknowledgeType::Accept)],
        vec![
            ack(5, 6, AcknowledgeType::Accept),
            ack(0, 1, AcknowledgeType::Accept),
        ],
        vec![
            ack(0, 3, AcknowledgeType::Accept),
            ack(3, 4, AcknowledgeType::Accept),
        ],
        vec![AcknowledgementBatch {
            first_offset: 0,
            last_offset: 3,
            acknowledge_types: vec![1, 1],
        }],
        vec![AcknowledgementBatch {
            first_offset: 0,
            last_offset: 0,
            acknowledge_types: vec![],
        }],
        vec![AcknowledgementBatch {
            first_offset: 0,
            last_offset: 0,
            acknowledge_types: vec![5],
        }],
        vec![AcknowledgementBatch {
            first_offset: 0,
            last_offset: 1,
            acknowledge_types: vec![1, -1],
        }],
    ];
    for batches in bad {
        let err = sp.acknowledge("m1", &batches, 1).unwrap_err();
        assert_eq!(err.error_code(), ErrorCode::INVALID_REQUEST, "{batches:?}");
    }
    assert_eq!(sp.snapshot(), before);
}

#[test]
fn only_the_member_holding_a_record_may_acknowledge_it() {
    let mut sp = SharePartition::new(cfg(), 0);
    acq(&mut sp, "m1", 10, 0, &data(&[(0, 4)]));
    let err = sp
        .acknowledge("m2", &[ack(0, 0, AcknowledgeType::Accept)], 1)
        .unwrap_err();
    assert_eq!(err.error_code(), ErrorCode::INVALID_RECORD_STATE);
    assert_eq!(st(&sp, 0), Some(RecordState::Acquired));
}

#[test]
fn acknowledging_records_not_acquired_is_invalid_record_state() {
    let mut sp = SharePartition::new(cfg(), 0);
    acq(&mut sp, "m1", 10, 0, &data(&[(0, 4)]));
    sp.acknowledge("m1", &[ack(0, 0, AcknowledgeType::Accept)], 1)
        .unwrap();
    sp.acknowledge("m1", &[ack(2, 2, AcknowledgeType::Accept)], 1)
        .unwrap();
    sp.acknowledge("m1", &[ack(3, 3, AcknowledgeType::Release)], 1)
        .unwrap();
    for (f, l) in [(0, 0), (2, 2), (3, 3), (4, 5), (9, 9)] {
        let err = sp
            .acknowledge("m1", &[ack(f, l, AcknowledgeType::Accept)], 1)
            .unwrap_err();
        assert_eq!(
            err.error_code(),
            ErrorCode::INVALID_RECORD_STATE,
            "{f}..={l}"
        );
    }
    check(&sp);
}

#[test]
fn acknowledgement_is_all_or_nothing_for_a_partition() {
    let mut sp = SharePartition::new(cfg(), 0);
    acq(&mut sp, "m1", 10, 0, &data(&[(0, 4)]));
    acq(&mut sp, "m2", 10, 0, &data(&[(5, 9)]));
    let before = sp.snapshot();
    let err = sp
        .acknowledge(
            "m1",
            &[
                ack(0, 4, AcknowledgeType::Accept),
                ack(5, 5, AcknowledgeType::Accept),
            ],
            1,
        )
        .unwrap_err();
    assert_eq!(err.error_code(), ErrorCode::INVALID_RECORD_STATE);
    assert_eq!(sp.snapshot(), before);
}

#[test]
fn acknowledgement_after_the_lock_deadline_is_refused() {
    let mut sp = SharePartition::new(cfg(), 0);
    acq(&mut sp, "m1", 10, 0, &data(&[(0, 4)]));
    // No tick ran, but the deadline has passed.
    let err = sp
        .acknowledge("m1", &[ack(0, 4, AcknowledgeType::Accept)], LOCK)
        .unwrap_err();
    assert_eq!(err.error_code(), ErrorCode::INVALID_RECORD_STATE);
    assert_eq!(st(&sp, 0), Some(RecordState::Available));
    assert!(
        sp.acknowledge("m1", &[ack(0, 4, AcknowledgeType::Accept)], LOCK - 1)
            .is_err(),
        "time does not go back"
    );
}

// ----- locks and members ------------------------------------------------------------

#[test]
fn lock_expiry_makes_records_available_and_they_are_redelivered() {
    let mut sp = SharePartition::new(cfg(), 0);
    acq(&mut sp, "m1", 10, 0, &data(&[(0, 4)]));
    let t = sp.tick(LOCK - 1);
    assert_eq!(t.expired_records, 0);
    assert!(!t.records_available);
    assert_eq!(t.next_deadline_ms, Some(LOCK));
    let t = sp.tick(LOCK);
    assert_eq!(t.expired_records, 5);
    assert!(t.records_available);
    assert_eq!(t.next_deadline_ms, None);
    assert_eq!(sp.metrics().lock_expired_total, 5);
    let a = acq(&mut sp, "m2", 10, LOCK, &data(&[(0, 4)]));
    assert_eq!(a.acquired, vec![range(0, 4, 2)]);
    assert_eq!(sp.record(0).unwrap().lock_deadline_ms, Some(2 * LOCK));
    check(&sp);
}

#[test]
fn lock_expiry_at_the_delivery_count_limit_archives() {
    let mut sp = SharePartition::new(cfg(), 0);
    let mut now = 0;
    for round in 1..=LIMIT {
        let a = acq(&mut sp, "m1", 10, now, &data(&[(0, 1)]));
        assert_eq!(a.acquired, vec![range(0, 1, round)]);
        now += LOCK;
        let t = sp.tick(now);
        assert_eq!(t.records_available, round < LIMIT);
    }
    assert_eq!(sp.start_offset(), 2);
    assert_eq!(sp.metrics().in_flight_records, 0);
    check(&sp);
}

#[test]
fn tick_reports_the_earliest_deadline() {
    let mut sp = SharePartition::new(cfg(), 0);
    acq(&mut sp, "m1", 10, 0, &data(&[(0, 1)]));
    acq(&mut sp, "m1", 10, 300, &data(&[(2, 3)]));
    assert_eq!(sp.tick(10).next_deadline_ms, Some(LOCK));
    assert_eq!(sp.tick(LOCK).next_deadline_ms, Some(LOCK + 300));
    assert_eq!(sp.tick(LOCK + 300).next_deadline_ms, None);
}

#[test]
fn release_member_frees_only_that_members_records() {
    let mut sp = SharePartition::new(cfg(), 0);
    acq(&mut sp, "m1", 10, 0, &data(&[(0, 4)]));
    acq(&mut sp, "m2", 10, 0, &data(&[(5, 9)]));
    let e = sp.release_member("m1", 1);
    assert!(e.records_available);
    assert_eq!(st(&sp, 0), Some(RecordState::Available));
    assert_eq!(dc(&sp, 0), 1);
    assert_eq!(st(&sp, 5), Some(RecordState::Acquired));
    assert!(!sp.release_member("m3", 1).records_available);
    check(&sp);
}

// ----- transactions (KIP-1289) ------------------------------------------------------

const PID: i64 = 7;
const EPOCH: i16 = 3;

fn staged(
    sp: &mut SharePartition,
    member: &str,
    first: i64,
    last: i64,
    ty: AcknowledgeType,
    now: i64,
) {
    sp.stage(member, PID, EPOCH, &[ack(first, last, ty)], now)
        .unwrap();
}

fn alive(_: &str) -> bool {
    true
}

fn gone(_: &str) -> bool {
    false
}

#[test]
fn staging_makes_records_tx_pending_with_their_transaction() {
    let mut sp = SharePartition::new(cfg(), 0);
    acq(&mut sp, "m1", 10, 0, &data(&[(0, 4)]));
    staged(&mut sp, "m1", 0, 2, AcknowledgeType::Accept, 10);
    let info = sp.record(1).unwrap();
    assert_eq!(info.state, RecordState::TxPending);
    assert_eq!(info.producer, Some((PID, EPOCH)));
    assert_eq!(info.txn_ack, Some(TxnAckType::Accept));
    assert_eq!(info.member_id.as_deref(), Some("m1"));
    assert_eq!(info.delivery_count, 1);
    assert_eq!(sp.txn_pending_records(), 3);
    assert_eq!(sp.metrics().txn_pending_records, 3);
    assert_eq!(sp.pending_transactions(), vec![(PID, EPOCH)]);
    check(&sp);
}

#[test]
fn corner_case_10_invalid_ack_type_in_a_transaction() {
    let mut sp = SharePartition::new(cfg(), 0);
    acq(&mut sp, "m1", 10, 0, &data(&[(0, 4)]));
    for ty in [AcknowledgeType::Release, AcknowledgeType::Renew] {
        let err = sp.stage("m1", PID, EPOCH, &[ack(0, 0, ty)], 1).unwrap_err();
        assert_eq!(err.error_code(), ErrorCode::INVALID_RECORD_STATE, "{ty:?}");
    }
    // A mixed per-offset batch is refused as a whole.
    let err = sp
        .stage(
            "m1",
            PID,
            EPOCH,
            &[AcknowledgementBatch {
                first_offset: 0,
                last_offset: 1,
                acknowledge_types: vec![1, 2],
            }],
            1,
        )
        .unwrap_err();
    assert_eq!(err.error_code(), ErrorCode::INVALID_RECORD_STATE);
    assert_eq!(sp.txn_pending_records(), 0);
}

#[test]
fn staging_malformed_batches_is_invalid_request() {
    let mut sp = SharePartition::new(cfg(), 0);
    acq(&mut sp, "m1", 10, 0, &data(&[(0, 4)]));
    let err = sp
        .stage(
            "m1",
            PID,
            EPOCH,
            &[
                ack(2, 3, AcknowledgeType::Accept),
                ack(0, 1, AcknowledgeType::Accept),
            ],
            1,
        )
        .unwrap_err();
    assert_eq!(err.error_code(), ErrorCode::INVALID_REQUEST);
    let err = sp
        .stage(
            "m1",
            PID,
            EPOCH,
            &[AcknowledgementBatch {
                first_offset: 0,
                last_offset: 0,
                acknowledge_types: vec![9],
            }],
            1,
        )
        .unwrap_err();
    assert_eq!(err.error_code(), ErrorCode::INVALID_REQUEST);
}

#[test]
fn only_acquired_records_of_the_member_can_be_staged() {
    let mut sp = SharePartition::new(cfg(), 0);
    acq(&mut sp, "m1", 10, 0, &data(&[(0, 4)]));
    acq(&mut sp, "m2", 10, 0, &data(&[(5, 9)]));
    sp.acknowledge("m1", &[ack(0, 0, AcknowledgeType::Accept)], 0)
        .unwrap();
    sp.acknowledge("m1", &[ack(1, 1, AcknowledgeType::Release)], 0)
        .unwrap();
    // Another member's, terminal, AVAILABLE, beyond the window.
    for (f, l) in [(5, 5), (0, 0), (1, 1), (10, 10)] {
        let err = sp
            .stage("m1", PID, EPOCH, &[ack(f, l, AcknowledgeType::Accept)], 1)
            .unwrap_err();
        assert_eq!(err.error_code(), ErrorCode::INVALID_RECORD_STATE, "{f}");
    }
    // Expired lock: not acquired any more.
    let err = sp
        .stage(
            "m1",
            PID,
            EPOCH,
            &[ack(2, 2, AcknowledgeType::Accept)],
            LOCK,
        )
        .unwrap_err();
    assert_eq!(err.error_code(), ErrorCode::INVALID_RECORD_STATE);
    assert_eq!(sp.txn_pending_records(), 0);
}

#[test]
fn staging_is_all_or_nothing() {
    let mut sp = SharePartition::new(cfg(), 0);
    acq(&mut sp, "m1", 10, 0, &data(&[(0, 4)]));
    acq(&mut sp, "m2", 10, 0, &data(&[(5, 9)]));
    let before = sp.snapshot();
    let err = sp
        .stage(
            "m1",
            PID,
            EPOCH,
            &[
                ack(0, 4, AcknowledgeType::Accept),
                ack(5, 5, AcknowledgeType::Accept),
            ],
            1,
        )
        .unwrap_err();
    assert_eq!(err.error_code(), ErrorCode::INVALID_RECORD_STATE);
    assert_eq!(sp.snapshot(), before);
}

#[test]
fn tx_pending_refuses_non_transactional_acknowledge_release_and_renew() {
    // D8
    let mut sp = SharePartition::new(cfg(), 0);
    acq(&mut sp, "m1", 10, 0, &data(&[(0, 4)]));
    staged(&mut sp, "m1", 0, 4, AcknowledgeType::Accept, 1);
    for ty in [
        AcknowledgeType::Accept,
        AcknowledgeType::Release,
        AcknowledgeType::Reject,
        AcknowledgeType::Gap,
        AcknowledgeType::Renew,
    ] {
        let err = sp.acknowledge("m1", &[ack(2, 2, ty)], 2).unwrap_err();
        assert_eq!(err.error_code(), ErrorCode::INVALID_RECORD_STATE, "{ty:?}");
    }
    assert_eq!(sp.txn_pending_records(), 5);
}

#[test]
fn tx_pending_is_never_reacquired_nor_released_by_a_leaving_member() {
    let mut sp = SharePartition::new(cfg(), 0);
    acq(&mut sp, "m1", 10, 0, &data(&[(0, 4)]));
    staged(&mut sp, "m1", 0, 4, AcknowledgeType::Accept, 1);
    assert!(!sp.release_member("m1", 2).records_available);
    sp.tick(10 * LOCK);
    let a = acq(&mut sp, "m2", 10, 10 * LOCK, &data(&[(0, 4)]));
    assert!(a.acquired.is_empty());
    assert_eq!(sp.txn_pending_records(), 5);
    assert_eq!(sp.next_fetch_offset(), Some(5));
    check(&sp);
}

#[test]
fn commit_turns_accept_into_acknowledged_and_reject_into_archived() {
    let mut sp = SharePartition::new(cfg(), 0);
    acq(&mut sp, "m1", 10, 0, &data(&[(0, 4)]));
    sp.stage(
        "m1",
        PID,
        EPOCH,
        &[AcknowledgementBatch {
            first_offset: 0,
            last_offset: 4,
            acknowledge_types: vec![1, 3, 1, 1, 3],
        }],
        1,
    )
    .unwrap();
    sp.tick(2);
    let out = sp.apply_marker(PID, EPOCH, true, 2, alive);
    assert_eq!(out.resolved_records, 5);
    assert!(!out.records_available);
    assert_eq!(sp.start_offset(), 5);
    assert_eq!(sp.txn_pending_records(), 0);
    check(&sp);
}

#[test]
fn commit_resolves_only_the_staged_subset() {
    let mut sp = SharePartition::new(cfg(), 0);
    acq(&mut sp, "m1", 10, 0, &data(&[(0, 9)]));
    staged(&mut sp, "m1", 2, 4, AcknowledgeType::Accept, 1);
    sp.stage("m1", 99, 0, &[ack(6, 6, AcknowledgeType::Reject)], 1)
        .unwrap();
    let out = sp.apply_marker(PID, EPOCH, true, 2, alive);
    assert_eq!(out.resolved_records, 3);
    assert_eq!(st(&sp, 1), Some(RecordState::Acquired));
    assert_eq!(st(&sp, 3), Some(RecordState::Acknowledged));
    assert_eq!(st(&sp, 5), Some(RecordState::Acquired));
    assert_eq!(st(&sp, 6), Some(RecordState::TxPending));
    assert_eq!(sp.record(6).unwrap().producer, Some((99, 0)));
    check(&sp);
}

#[test]
fn abort_returns_records_to_the_same_member_with_a_fresh_lock() {
    let mut sp = SharePartition::new(cfg(), 0);
    acq(&mut sp, "m1", 10, 0, &data(&[(0, 4)]));
    staged(&mut sp, "m1", 0, 4, AcknowledgeType::Accept, 100);
    let out = sp.apply_marker(PID, EPOCH, false, 500, |m| m == "m1");
    assert_eq!(out.resolved_records, 5);
    assert!(!out.records_available);
    let info = sp.record(0).unwrap();
    assert_eq!(info.state, RecordState::Acquired);
    assert_eq!(info.member_id.as_deref(), Some("m1"));
    assert_eq!(info.lock_deadline_ms, Some(500 + LOCK));
    assert_eq!(info.delivery_count, 1, "abort is not a delivery");
    // The member processes them again, this time committed.
    staged(&mut sp, "m1", 0, 4, AcknowledgeType::Accept, 600);
    sp.apply_marker(PID, EPOCH + 1, true, 700, alive);
    assert_eq!(sp.start_offset(), 5);
    check(&sp);
}

#[test]
fn abort_with_the_member_gone_makes_records_available_or_archived_at_the_limit() {
    let mut sp = SharePartition::new(cfg(), 0);
    acq(&mut sp, "m1", 10, 0, &data(&[(0, 4)]));
    staged(&mut sp, "m1", 0, 4, AcknowledgeType::Accept, 1);
    let out = sp.apply_marker(PID, EPOCH, false, 2, gone);
    assert!(out.records_available);
    assert_eq!(st(&sp, 0), Some(RecordState::Available));
    assert_eq!(dc(&sp, 0), 1);

    // At the delivery limit: archived.
    let mut sp = SharePartition::new(cfg(), 0);
    let mut now = 0;
    for _ in 1..LIMIT {
        acq(&mut sp, "m1", 10, now, &data(&[(0, 0)]));
        now += LOCK;
        sp.tick(now);
    }
    let a = acq(&mut sp, "m1", 10, now, &data(&[(0, 0)]));
    assert_eq!(a.acquired, vec![range(0, 0, LIMIT)]);
    staged(&mut sp, "m1", 0, 0, AcknowledgeType::Accept, now);
    let out = sp.apply_marker(PID, EPOCH, false, now, gone);
    assert!(!out.records_available);
    assert_eq!(sp.start_offset(), 1);
    check(&sp);
}

#[test]
fn marker_for_another_producer_or_a_stale_epoch_leaves_tx_pending_alone() {
    let mut sp = SharePartition::new(cfg(), 0);
    acq(&mut sp, "m1", 10, 0, &data(&[(0, 4)]));
    staged(&mut sp, "m1", 0, 4, AcknowledgeType::Accept, 1);
    assert_eq!(
        sp.apply_marker(PID + 1, EPOCH, true, 2, alive)
            .resolved_records,
        0
    );
    assert_eq!(
        sp.apply_marker(PID, EPOCH - 1, true, 2, alive)
            .resolved_records,
        0
    );
    assert_eq!(
        sp.apply_marker(PID, EPOCH + 2, false, 2, alive)
            .resolved_records,
        0
    );
    assert_eq!(sp.txn_pending_records(), 5);
}

#[test]
fn marker_resolves_records_staged_at_its_epoch_or_the_one_before() {
    // D4: TV2 bumps the epoch at EndTxn; the marker carries the bumped epoch.
    let mut sp = SharePartition::new(cfg(), 0);
    acq(&mut sp, "m1", 10, 0, &data(&[(0, 4)]));
    staged(&mut sp, "m1", 0, 4, AcknowledgeType::Accept, 1);
    let out = sp.apply_marker(PID, EPOCH + 1, true, 2, alive);
    assert_eq!(out.resolved_records, 5);
    assert_eq!(sp.start_offset(), 5);
}

#[test]
fn corner_case_05_duplicate_markers_are_no_ops() {
    let mut sp = SharePartition::new(cfg(), 0);
    acq(&mut sp, "m1", 10, 0, &data(&[(0, 4)]));
    staged(&mut sp, "m1", 0, 2, AcknowledgeType::Accept, 1);
    assert_eq!(
        sp.apply_marker(PID, EPOCH + 1, true, 2, alive)
            .resolved_records,
        3
    );
    let before = sp.snapshot();
    assert_eq!(
        sp.apply_marker(PID, EPOCH + 1, true, 3, alive)
            .resolved_records,
        0
    );
    assert_eq!(
        sp.apply_marker(PID, EPOCH + 1, false, 3, alive)
            .resolved_records,
        0
    );
    assert_eq!(sp.snapshot(), before);
    // A marker for a producer that staged nothing here.
    assert_eq!(
        sp.apply_marker(12345, 0, true, 3, alive).resolved_records,
        0
    );
    assert_eq!(sp.snapshot(), before);
}

#[test]
fn corner_case_06_lock_expiry_while_tx_pending() {
    let mut sp = SharePartition::new(cfg(), 0);
    acq(&mut sp, "m1", 10, 0, &data(&[(0, 4)]));
    staged(&mut sp, "m1", 0, 2, AcknowledgeType::Accept, 1);
    assert_eq!(sp.tick(1).next_deadline_ms, Some(LOCK));
    let t = sp.tick(LOCK);
    // 3, 4 expire for real; 0..=2 only count.
    assert_eq!(t.expired_records, 2);
    assert_eq!(t.txn_pending_lock_expired, 3);
    assert_eq!(st(&sp, 0), Some(RecordState::TxPending));
    // Counted once, however often time passes.
    let t = sp.tick(5 * LOCK);
    assert_eq!(t.txn_pending_lock_expired, 0);
    assert_eq!(t.next_deadline_ms, None);
    let m = sp.metrics();
    assert_eq!(m.txn_pending_lock_expired_total, 3);
    assert_eq!(m.lock_expired_total, 2);
    // Not redelivered.
    let a = acq(&mut sp, "m2", 10, 5 * LOCK, &data(&[(0, 4)]));
    assert_eq!(a.acquired, vec![range(3, 4, 2)]);
    // The transaction still decides.
    sp.apply_marker(PID, EPOCH, true, 5 * LOCK, alive);
    assert_eq!(sp.start_offset(), 3);
    check(&sp);
}

#[test]
fn corner_case_07_transaction_timeout_abort_reverts_staged_records() {
    let mut sp = SharePartition::new(cfg(), 0);
    acq(&mut sp, "m1", 10, 0, &data(&[(0, 4)]));
    staged(&mut sp, "m1", 0, 4, AcknowledgeType::Accept, 1);
    // The coordinator aborts on timeout (with the bumped epoch); the member
    // left meanwhile.
    let out = sp.apply_marker(PID, EPOCH + 1, false, 60_000, gone);
    assert!(out.records_available);
    assert_eq!(sp.next_fetch_offset(), Some(0));
    let a = acq(&mut sp, "m2", 10, 60_000, &data(&[(0, 4)]));
    assert_eq!(a.acquired, vec![range(0, 4, 2)]);
}

#[test]
fn corner_case_11_partial_failure_abort_reverts_what_was_staged() {
    // One partition staged, another failed: the client aborts and the staged
    // one reverts.
    let mut staged_p = SharePartition::new(cfg(), 0);
    let mut failed_p = SharePartition::new(cfg(), 0);
    acq(&mut staged_p, "m1", 10, 0, &data(&[(0, 4)]));
    acq(&mut failed_p, "m1", 10, 0, &data(&[(0, 4)]));
    staged(&mut staged_p, "m1", 0, 4, AcknowledgeType::Accept, 1);
    assert!(
        failed_p
            .stage("m1", PID, EPOCH, &[ack(0, 4, AcknowledgeType::Release)], 1)
            .is_err()
    );
    staged_p.apply_marker(PID, EPOCH + 1, false, 2, alive);
    failed_p.apply_marker(PID, EPOCH + 1, false, 2, alive);
    for sp in [&staged_p, &failed_p] {
        assert_eq!(st(sp, 0), Some(RecordState::Acquired));
        assert_eq!(sp.txn_pending_records(), 0);
    }
}

#[test]
fn corner_case_14_older_epoch_reverts_and_newer_cannot_stage_its_records() {
    let mut sp = SharePartition::new(cfg(), 0);
    acq(&mut sp, "m1", 10, 0, &data(&[(0, 4)]));
    staged(&mut sp, "m1", 0, 2, AcknowledgeType::Accept, 1);
    // A newer epoch of the same producer tries to stage the pending records.
    let err = sp
        .stage(
            "m1",
            PID,
            EPOCH + 2,
            &[ack(0, 4, AcknowledgeType::Accept)],
            2,
        )
        .unwrap_err();
    assert_eq!(err.error_code(), ErrorCode::INVALID_RECORD_STATE);
    // Fencing aborts the old transaction; the abort marker carries the bumped
    // epoch.
    let out = sp.apply_marker(PID, EPOCH + 1, false, 3, alive);
    assert_eq!(out.resolved_records, 3);
    assert_eq!(sp.marker_floor(PID), Some(EPOCH + 1));
    // The fenced epoch can no longer stage (D16), the newer one can.
    let err = sp
        .stage("m1", PID, EPOCH, &[ack(0, 4, AcknowledgeType::Accept)], 4)
        .unwrap_err();
    assert_eq!(err.error_code(), ErrorCode::PRODUCER_FENCED);
    assert_eq!(sp.txn_pending_records(), 0);
    sp.stage(
        "m1",
        PID,
        EPOCH + 2,
        &[ack(0, 4, AcknowledgeType::Accept)],
        4,
    )
    .unwrap();
    assert_eq!(sp.txn_pending_records(), 5);
}

#[test]
fn a_late_copy_of_an_applied_marker_does_not_resolve_the_next_transaction() {
    // Found by tests/models/model_kip1289.rs: the coordinator re-sends a marker
    // whose first delivery was slow; the copy lands after the producer's
    // next transaction staged at exactly the marker's epoch (TV2).
    let mut sp = SharePartition::new(cfg(), 0);
    acq(&mut sp, "m1", 10, 0, &data(&[(0, 9)]));
    staged(&mut sp, "m1", 0, 4, AcknowledgeType::Accept, 1);
    assert_eq!(
        sp.apply_marker(PID, EPOCH + 1, true, 2, alive)
            .resolved_records,
        5
    );
    sp.stage(
        "m1",
        PID,
        EPOCH + 1,
        &[ack(5, 9, AcknowledgeType::Accept)],
        3,
    )
    .unwrap();
    for commit in [true, false] {
        let out = sp.apply_marker(PID, EPOCH + 1, commit, 4, alive);
        assert_eq!(out.resolved_records, 0, "late copy, commit={commit}");
    }
    assert_eq!(sp.txn_pending_records(), 5);
    // The transaction's own marker resolves it.
    assert_eq!(
        sp.apply_marker(PID, EPOCH + 2, true, 5, alive)
            .resolved_records,
        5
    );
    check(&sp);
}

#[test]
fn a_staging_below_an_applied_marker_is_refused_and_the_next_epoch_stages() {
    let mut sp = SharePartition::new(cfg(), 0);
    acq(&mut sp, "m1", 10, 0, &data(&[(0, 9)]));
    // A fence's abort marker reaches the partition before the fenced
    // epoch's staging (the race of D16): nothing is staged, nothing stuck.
    sp.apply_marker(PID, EPOCH + 1, false, 1, alive);
    let err = sp
        .stage("m1", PID, EPOCH, &[ack(0, 4, AcknowledgeType::Accept)], 2)
        .unwrap_err();
    assert_eq!(err.error_code(), ErrorCode::PRODUCER_FENCED);
    assert_eq!(st(&sp, 0), Some(RecordState::Acquired));
    // TV2: a commit at EPOCH + 1 ends the transaction staged at EPOCH; the
    // producer's next transaction runs at EPOCH + 1 and may stage.
    sp.stage(
        "m1",
        PID,
        EPOCH + 1,
        &[ack(0, 4, AcknowledgeType::Accept)],
        3,
    )
    .unwrap();
    assert_eq!(
        sp.apply_marker(PID, EPOCH + 2, true, 4, alive)
            .resolved_records,
        5
    );
    assert_eq!(sp.txn_pending_records(), 0);
    sp.stage(
        "m1",
        PID,
        EPOCH + 2,
        &[ack(5, 9, AcknowledgeType::Accept)],
        5,
    )
    .unwrap();
    // Another producer id is not affected by this one's floor.
    assert_eq!(sp.marker_floor(PID + 1), None);
    check(&sp);
}

#[test]
fn downgrade_guard_sees_pending_records() {
    let mut sp = SharePartition::new(cfg(), 0);
    acq(&mut sp, "m1", 10, 0, &data(&[(0, 4)]));
    assert_eq!(sp.txn_pending_records(), 0);
    staged(&mut sp, "m1", 1, 1, AcknowledgeType::Reject, 1);
    assert_eq!(sp.txn_pending_records(), 1);
    sp.apply_marker(PID, EPOCH, true, 2, alive);
    assert_eq!(sp.txn_pending_records(), 0);
}

// ----- log start offset ----------------------------------------------------------

#[test]
fn log_start_moving_past_records_archives_available_and_acquired_ones() {
    let mut sp = SharePartition::new(cfg(), 0);
    acq(&mut sp, "m1", 10, 0, &data(&[(0, 9)]));
    sp.acknowledge("m1", &[ack(0, 4, AcknowledgeType::Release)], 1)
        .unwrap();
    sp.advance_log_start(3, 1);
    assert_eq!(sp.start_offset(), 3);
    sp.advance_log_start(7, 1);
    assert_eq!(sp.start_offset(), 7);
    let err = sp
        .acknowledge("m1", &[ack(5, 6, AcknowledgeType::Accept)], 1)
        .unwrap_err();
    assert_eq!(err.error_code(), ErrorCode::INVALID_RECORD_STATE);
    // Moving back is ignored.
    sp.advance_log_start(2, 1);
    assert_eq!(sp.start_offset(), 7);
    check(&sp);
}

#[test]
fn log_start_beyond_the_window_moves_start_and_end() {
    let mut sp = SharePartition::new(cfg(), 0);
    acq(&mut sp, "m1", 10, 0, &data(&[(0, 4)]));
    sp.advance_log_start(100, 1);
    assert_eq!((sp.start_offset(), sp.end_offset()), (100, 100));
    let a = acq(&mut sp, "m1", 10, 1, &data(&[(100, 101)]));
    assert_eq!(a.acquired, vec![range(100, 101, 1)]);
    check(&sp);
}

#[test]
fn tx_pending_below_the_log_start_waits_and_an_abort_archives_it() {
    let mut sp = SharePartition::new(cfg(), 0);
    acq(&mut sp, "m1", 10, 0, &data(&[(0, 9)]));
    staged(&mut sp, "m1", 0, 4, AcknowledgeType::Accept, 1);
    sp.advance_log_start(10, 2);
    assert_eq!(sp.start_offset(), 0);
    assert_eq!(sp.txn_pending_records(), 5);
    let out = sp.apply_marker(PID, EPOCH, false, 3, alive);
    assert_eq!(out.resolved_records, 5);
    assert!(!out.records_available);
    assert_eq!(sp.start_offset(), 10);
    check(&sp);
}

// ----- persistence ----------------------------------------------------------------

/// A partition holding every state: 0 ACKNOWLEDGED is at the start so the
/// window starts at 1 with AVAILABLE (dc 1), ACQUIRED, ARCHIVED, TX_PENDING,
/// ACKNOWLEDGED.
fn every_state() -> SharePartition {
    let mut sp = SharePartition::new(cfg(), 0);
    acq(&mut sp, "m1", 10, 0, &data(&[(0, 9)]));
    sp.acknowledge(
        "m1",
        &[
            ack(0, 0, AcknowledgeType::Accept),
            ack(1, 2, AcknowledgeType::Release),
            ack(5, 5, AcknowledgeType::Reject),
            ack(9, 9, AcknowledgeType::Accept),
        ],
        1,
    )
    .unwrap();
    sp.stage("m1", PID, EPOCH, &[ack(6, 7, AcknowledgeType::Reject)], 1)
        .unwrap();
    sp.stage("m1", PID + 1, 0, &[ack(8, 8, AcknowledgeType::Accept)], 1)
        .unwrap();
    sp
}

#[test]
fn snapshot_restore_in_every_state() {
    let sp = every_state();
    check(&sp);
    let bytes = sp.snapshot().to_bytes().unwrap();
    let state = SharePartitionState::from_bytes(&bytes).unwrap();
    assert_eq!(state, sp.snapshot());
    let r = SharePartition::restore(cfg(), state, 5_000).unwrap();
    check(&r);
    assert_eq!(r.state_epoch(), sp.state_epoch() + 1);
    assert_eq!(r.start_offset(), 1);
    assert_eq!(r.end_offset(), 10);
    // AVAILABLE keeps its delivery count.
    assert_eq!(st(&r, 1), Some(RecordState::Available));
    assert_eq!(dc(&r, 1), 1);
    // ACQUIRED becomes AVAILABLE.
    assert_eq!(st(&r, 3), Some(RecordState::Available));
    assert_eq!(dc(&r, 3), 1);
    // Terminal records stay terminal.
    assert_eq!(st(&r, 5), Some(RecordState::Archived));
    assert_eq!(st(&r, 9), Some(RecordState::Acknowledged));
    // TX_PENDING kept with its transaction.
    let p = r.record(6).unwrap();
    assert_eq!(p.state, RecordState::TxPending);
    assert_eq!(p.producer, Some((PID, EPOCH)));
    assert_eq!(p.txn_ack, Some(TxnAckType::Reject));
    assert_eq!(p.member_id.as_deref(), Some("m1"));
    assert_eq!(r.txn_pending_records(), 3);
    assert_eq!(r.pending_transactions(), vec![(PID, EPOCH), (PID + 1, 0)]);
}

#[test]
fn restored_terminal_records_are_never_delivered_again() {
    let sp = every_state();
    let mut r = SharePartition::restore(cfg(), sp.snapshot(), 5_000).unwrap();
    let a = acq(&mut r, "m2", 100, 5_000, &data(&[(0, 9)]));
    assert_eq!(a.acquired, vec![range(1, 4, 2)]);
    let acquired: Vec<i64> = (0..10)
        .filter(|&o| st(&r, o) == Some(RecordState::Acquired))
        .collect();
    assert_eq!(acquired, vec![1, 2, 3, 4]);
}

#[test]
fn restore_archives_acquired_records_at_the_delivery_limit() {
    let mut sp = SharePartition::new(cfg(), 0);
    let mut now = 0;
    for _ in 0..LIMIT {
        acq(&mut sp, "m1", 10, now, &data(&[(0, 1)]));
        if dc(&sp, 0) < LIMIT {
            now += LOCK;
            sp.tick(now);
        }
    }
    assert_eq!(st(&sp, 0), Some(RecordState::Acquired));
    let r = SharePartition::restore(cfg(), sp.snapshot(), now).unwrap();
    assert_eq!(r.start_offset(), 2);
    check(&r);
}

#[test]
fn corner_case_01_crash_during_tx_pending_is_resolved_from_the_recovered_outcome() {
    let sp = every_state();
    let mut r = SharePartition::restore(cfg(), sp.snapshot(), 5_000).unwrap();
    // PID committed, PID + 1 still ongoing.
    let out = r.resolve_recovered(
        |pid, _| {
            if pid == PID {
                RecoveredTxn::Committed
            } else {
                RecoveredTxn::Ongoing
            }
        },
        5_000,
        alive,
    );
    assert_eq!(out.resolved_records, 2);
    assert_eq!(st(&r, 6), Some(RecordState::Archived));
    assert_eq!(st(&r, 8), Some(RecordState::TxPending));
    // The ongoing one is aborted later; the member did not survive the crash.
    let out = r.resolve_recovered(|_, _| RecoveredTxn::Aborted, 6_000, gone);
    assert_eq!(out.resolved_records, 1);
    assert!(out.records_available);
    assert_eq!(st(&r, 8), Some(RecordState::Available));
    check(&r);
}

#[test]
fn corner_case_12_pending_state_moves_with_leadership_and_the_marker_resolves_it() {
    let mut old_leader = SharePartition::new(cfg(), 0);
    acq(&mut old_leader, "m1", 10, 0, &data(&[(0, 4)]));
    staged(&mut old_leader, "m1", 0, 4, AcknowledgeType::Accept, 1);
    let moved = old_leader.snapshot().to_bytes().unwrap();
    let mut new_leader =
        SharePartition::restore(cfg(), SharePartitionState::from_bytes(&moved).unwrap(), 10)
            .unwrap();
    assert_eq!(new_leader.txn_pending_records(), 5);
    let out = new_leader.apply_marker(PID, EPOCH + 1, true, 20, alive);
    assert_eq!(out.resolved_records, 5);
    assert_eq!(new_leader.start_offset(), 5);
}

#[test]
fn corner_case_13_markers_lost_then_recovery_resolves_an_abort() {
    let mut sp = SharePartition::new(cfg(), 0);
    acq(&mut sp, "m1", 10, 0, &data(&[(0, 4)]));
    staged(&mut sp, "m1", 0, 4, AcknowledgeType::Accept, 1);
    let mut r = SharePartition::restore(cfg(), sp.snapshot(), 10).unwrap();
    let out = r.resolve_recovered(|_, _| RecoveredTxn::Aborted, 10, |m| m == "m1");
    assert_eq!(out.resolved_records, 5);
    assert_eq!(st(&r, 0), Some(RecordState::Acquired));
    assert_eq!(r.record(0).unwrap().lock_deadline_ms, Some(10 + LOCK));
}

#[test]
fn restore_rejects_inconsistent_state() {
    let mut state = every_state().snapshot();
    state.runs.remove(1);
    assert!(matches!(
        SharePartition::restore(cfg(), state, 0),
        Err(StateError::Invalid(_))
    ));
    let mut state = every_state().snapshot();
    state.end_offset += 1;
    assert!(SharePartition::restore(cfg(), state, 0).is_err());
    assert!(matches!(
        SharePartitionState::from_bytes(b"\x01\x02garbage"),
        Err(StateError::Decode(_))
    ));
}

#[test]
fn state_changes_mark_the_partition_dirty() {
    let mut sp = SharePartition::new(cfg(), 0);
    assert!(!sp.take_dirty());
    acq(&mut sp, "m1", 10, 0, &data(&[(0, 4)]));
    assert!(sp.take_dirty());
    assert!(!sp.take_dirty());
    assert!(
        sp.acknowledge("m2", &[ack(0, 0, AcknowledgeType::Accept)], 1)
            .is_err()
    );
    assert!(!sp.take_dirty(), "a refused request changes nothing");
    sp.acknowledge("m1", &[ack(0, 0, AcknowledgeType::Accept)], 1)
        .unwrap();
    assert!(sp.take_dirty());
}

// ----- memory ---------------------------------------------------------------------

#[test]
fn memory_is_proportional_to_runs_not_records() {
    let mut sp = SharePartition::new(
        SharePartitionConfig {
            max_in_flight_records: 10_000_000,
            ..cfg()
        },
        0,
    );
    acq(
        &mut sp,
        "m1",
        5_000_000,
        0,
        &data(&[(0, 999_999), (1_000_000, 4_999_999)]),
    );
    assert_eq!(sp.run_count(), 1);
    assert_eq!(sp.metrics().acquired_records, 5_000_000);
    sp.acknowledge("m1", &[ack(10, 19, AcknowledgeType::Renew)], 1)
        .unwrap();
    assert_eq!(sp.run_count(), 3, "a renewed lock differs from the others");
    sp.acknowledge(
        "m1",
        &[AcknowledgementBatch {
            first_offset: 0,
            last_offset: 9,
            acknowledge_types: vec![1, 3, 1, 3, 1, 3, 1, 3, 1, 3],
        }],
        2,
    )
    .unwrap();
    assert_eq!(sp.run_count(), 2);
    sp.acknowledge("m1", &[ack(10, 4_999_999, AcknowledgeType::Accept)], 2)
        .unwrap();
    assert_eq!(sp.run_count(), 0);
    assert_eq!(sp.start_offset(), 5_000_000);
    check(&sp);
}

#[test]
fn metrics_follow_the_states() {
    let sp = every_state();
    let m = sp.metrics();
    assert_eq!(m.in_flight_records, 9);
    assert_eq!(m.available_records, 2);
    assert_eq!(m.acquired_records, 2);
    assert_eq!(m.archived_records, 1);
    assert_eq!(m.acknowledged_records, 1);
    assert_eq!(m.txn_pending_records, 3);
}

// ----- seeded property test over random operation sequences ------------------------

mod random_ops {
    use super::*;
    use proptest::prelude::*;
    use proptest::test_runner::{Config, RngSeed};
    use std::collections::BTreeMap;

    const MEMBERS: [&str; 3] = ["m0", "m1", "m2"];
    const LOG_END: i64 = 80;

    #[derive(Debug, Clone)]
    enum Op {
        Acquire {
            member: usize,
            max: u32,
            record_limit: bool,
            lso_back: i64,
        },
        /// Raw batches relative to the start offset: may be malformed or not
        /// held by the member.
        AckRaw {
            member: usize,
            batches: Vec<(i64, i64, Vec<i8>)>,
        },
        /// Acknowledges the first `runs` runs the member holds.
        AckOwned {
            member: usize,
            runs: usize,
            ty: i8,
        },
        StageRaw {
            member: usize,
            pid: usize,
            batches: Vec<(i64, i64, Vec<i8>)>,
        },
        StageOwned {
            member: usize,
            pid: usize,
            runs: usize,
            reject: bool,
        },
        Marker {
            pid: usize,
            epoch_delta: i16,
            commit: bool,
            alive: bool,
        },
        /// Acknowledges (or stages) a run the member does not hold ACQUIRED:
        /// must be refused.
        AckNotHeld {
            member: usize,
            which: usize,
            ty: i8,
            stage: bool,
        },
        ReleaseMember {
            member: usize,
        },
        /// Retention moves the log start offset to start + delta.
        LogStart {
            delta: i64,
        },
        Tick,
        Restore,
        Recover {
            commit: bool,
        },
    }

    fn raw_batches() -> impl Strategy<Value = Vec<(i64, i64, Vec<i8>)>> {
        prop::collection::vec(
            (
                -2i64..20,
                -1i64..6,
                prop_oneof![
                    (0i8..=4).prop_map(|t| vec![t]),
                    prop::collection::vec(-1i8..=5, 0..7),
                ],
            ),
            0..4,
        )
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0..3usize, 0..12u32, any::<bool>(), 0..5i64).prop_map(|(member, max, record_limit, lso_back)| Op::Acquire { member, max, record_limit, lso_back }),
            2 => (0..3usize, raw_batches()).prop_map(|(member, batches)| Op::AckRaw { member, batches }),
            4 => (0..3usize, 1..4usize, 0i8..=4).prop_map(|(member, runs, ty)| Op::AckOwned { member, runs, ty }),
            1 => (0..3usize, 0..2usize, raw_batches()).prop_map(|(member, pid, batches)| Op::StageRaw { member, pid, batches }),
            3 => (0..3usize, 0..2usize, 1..3usize, any::<bool>()).prop_map(|(member, pid, runs, reject)| Op::StageOwned { member, pid, runs, reject }),
            3 => (0..2usize, -1i16..3, any::<bool>(), any::<bool>()).prop_map(|(pid, epoch_delta, commit, alive)| Op::Marker { pid, epoch_delta, commit, alive }),
            2 => (0..3usize, 0..4usize, 0i8..=4, any::<bool>()).prop_map(|(member, which, ty, stage)| Op::AckNotHeld { member, which, ty, stage }),
            1 => (0..3usize).prop_map(|member| Op::ReleaseMember { member }),
            1 => (0i64..6).prop_map(|delta| Op::LogStart { delta }),
            2 => Just(Op::Tick),
            1 => Just(Op::Restore),
            1 => any::<bool>().prop_map(|commit| Op::Recover { commit }),
        ]
    }

    /// A log of batches up to LOG_END with holes, control and aborted batches.
    fn log_batches() -> impl Strategy<Value = Vec<FetchedBatch>> {
        prop::collection::vec((1i64..6, 0i64..3, 0u8..10), 40).prop_map(|specs| {
            let mut out = Vec::new();
            let mut next = 0;
            for (len, hole, kind) in specs {
                next += if hole == 2 { 2 } else { 0 };
                if next >= LOG_END {
                    break;
                }
                let last = (next + len - 1).min(LOG_END - 1);
                out.push(FetchedBatch {
                    base_offset: next,
                    last_offset: last,
                    control: kind == 0,
                    aborted: kind == 1,
                });
                next = last + 1;
            }
            out
        })
    }

    fn to_batches(start: i64, raw: &[(i64, i64, Vec<i8>)]) -> Vec<AcknowledgementBatch> {
        raw.iter()
            .map(|(rel, len, types)| AcknowledgementBatch {
                first_offset: start + rel,
                last_offset: start + rel + len,
                acknowledge_types: types.clone(),
            })
            .collect()
    }

    fn held_runs(sp: &SharePartition, member: &str, n: usize) -> Vec<(i64, i64)> {
        sp.runs()
            .filter(|(_, _, i)| {
                i.state == RecordState::Acquired && i.member_id.as_deref() == Some(member)
            })
            .map(|(f, l, _)| (f, l))
            .take(n)
            .collect()
    }

    fn per_offset(sp: &SharePartition) -> BTreeMap<i64, RecordInfo> {
        let mut m = BTreeMap::new();
        for (f, l, info) in sp.runs() {
            for o in f..=l {
                m.insert(o, info.clone());
            }
        }
        m
    }

    fn same_pending(a: &RecordInfo, b: &RecordInfo) -> bool {
        a.state == b.state
            && a.producer == b.producer
            && a.txn_ack == b.txn_ack
            && a.member_id == b.member_id
            && a.delivery_count == b.delivery_count
    }

    fn run(config: SharePartitionConfig, log: Vec<FetchedBatch>, ops: Vec<(Op, i64)>) {
        let pids = [(100i64, 4i16), (200i64, 9i16)];
        let mut sp = SharePartition::new(config, 0);
        let mut now = 0i64;
        let mut boundaries = 1usize;
        let mut log_start = 0i64;
        for (op, dt) in ops {
            now += dt;
            let before = per_offset(&sp);
            let (b_start, b_end) = (sp.start_offset(), sp.end_offset());
            // What time alone would do: the reference for refused requests.
            let mut time_only = sp.clone();
            time_only.tick(now);
            let mut refused = false;
            let mut acquired: Option<Acquisition> = None;
            let may_resolve = matches!(op, Op::Marker { .. } | Op::Recover { .. });
            match &op {
                Op::Acquire {
                    member,
                    max,
                    record_limit,
                    lso_back,
                } => {
                    let from = sp.next_fetch_offset().unwrap_or(sp.end_offset());
                    let batches: Vec<FetchedBatch> = log
                        .iter()
                        .copied()
                        .filter(|b| b.last_offset >= from)
                        .collect();
                    let mode = if *record_limit {
                        AcquireMode::RecordLimit
                    } else {
                        AcquireMode::BatchOptimized
                    };
                    let a = sp.acquire(
                        MEMBERS[*member],
                        *max,
                        mode,
                        now,
                        &LogView {
                            high_watermark: LOG_END,
                            last_stable_offset: LOG_END - lso_back,
                            batches: &batches,
                        },
                    );
                    boundaries += 2 * (a.acquired.len() + 1);
                    for r in &a.acquired {
                        assert!(r.first_offset >= log_start);
                    }
                    acquired = Some(a);
                }
                Op::AckRaw { member, batches } => {
                    let b = to_batches(b_start, batches);
                    if let Ok(segs) = validate_batches(&b) {
                        boundaries += 2 * segs.len();
                    }
                    refused = sp.acknowledge(MEMBERS[*member], &b, now).is_err();
                }
                Op::AckOwned { member, runs, ty } => {
                    let b: Vec<_> = held_runs(&time_only, MEMBERS[*member], *runs)
                        .into_iter()
                        .map(|(f, l)| AcknowledgementBatch {
                            first_offset: f,
                            last_offset: l,
                            acknowledge_types: vec![*ty],
                        })
                        .collect();
                    boundaries += 2 * b.len();
                    let r = sp.acknowledge(MEMBERS[*member], &b, now);
                    assert!(r.is_ok(), "acknowledging held records failed: {r:?}");
                }
                Op::StageRaw {
                    member,
                    pid,
                    batches,
                } => {
                    let b = to_batches(b_start, batches);
                    if let Ok(segs) = validate_batches(&b) {
                        boundaries += 2 * segs.len();
                    }
                    let (p, e) = pids[*pid];
                    refused = sp.stage(MEMBERS[*member], p, e, &b, now).is_err();
                }
                Op::StageOwned {
                    member,
                    pid,
                    runs,
                    reject,
                } => {
                    let ty = if *reject {
                        AcknowledgeType::Reject
                    } else {
                        AcknowledgeType::Accept
                    };
                    let b: Vec<_> = held_runs(&time_only, MEMBERS[*member], *runs)
                        .into_iter()
                        .map(|(f, l)| AcknowledgementBatch::uniform(f, l, ty))
                        .collect();
                    boundaries += 2 * b.len();
                    let (p, e) = pids[*pid];
                    let fenced = sp.marker_floor(p).is_some_and(|f| e < f);
                    let r = sp.stage(MEMBERS[*member], p, e, &b, now);
                    if fenced {
                        // D16: a marker above this epoch was applied.
                        assert!(
                            matches!(r, Err(ShareError::ProducerFenced(_))),
                            "a staging below the marker floor was not refused: {r:?}"
                        );
                        refused = true;
                    } else {
                        assert!(r.is_ok(), "staging held records failed: {r:?}");
                    }
                }
                Op::Marker {
                    pid,
                    epoch_delta,
                    commit,
                    alive,
                } => {
                    let (p, e) = pids[*pid];
                    let alive = *alive;
                    sp.apply_marker(p, e + epoch_delta, *commit, now, |_| alive);
                }
                Op::AckNotHeld {
                    member,
                    which,
                    ty,
                    stage,
                } => {
                    let m = MEMBERS[*member];
                    let target = time_only
                        .runs()
                        .filter(|(_, _, i)| {
                            !(i.state == RecordState::Acquired && i.member_id.as_deref() == Some(m))
                        })
                        .nth(*which);
                    if let Some((f, l, _)) = target {
                        let b = [AcknowledgementBatch {
                            first_offset: f,
                            last_offset: l,
                            acknowledge_types: vec![*ty],
                        }];
                        let r = if *stage {
                            sp.stage(m, pids[0].0, pids[0].1, &b, now)
                        } else {
                            sp.acknowledge(m, &b, now)
                        };
                        assert!(r.is_err(), "{op:?} on a run not held was accepted");
                        refused = true;
                    }
                }
                Op::ReleaseMember { member } => {
                    sp.release_member(MEMBERS[*member], now);
                }
                Op::LogStart { delta } => {
                    let ls = b_start + delta;
                    log_start = log_start.max(ls);
                    boundaries += 2;
                    sp.advance_log_start(ls, now);
                }
                Op::Tick => {
                    let t = sp.tick(now);
                    if let Some(d) = t.next_deadline_ms {
                        assert!(d > now);
                    }
                }
                Op::Restore => {
                    let bytes = sp.snapshot().to_bytes().unwrap();
                    let state = SharePartitionState::from_bytes(&bytes).unwrap();
                    sp = SharePartition::restore(config, state, now).unwrap();
                    sp.advance_log_start(log_start, now);
                    // Counters restart with the broker; keep comparing states.
                }
                Op::Recover { commit } => {
                    let c = *commit;
                    sp.resolve_recovered(
                        |pid, _| {
                            if pid == 100 {
                                if c {
                                    RecoveredTxn::Committed
                                } else {
                                    RecoveredTxn::Aborted
                                }
                            } else {
                                RecoveredTxn::Ongoing
                            }
                        },
                        now,
                        |m| m == "m0",
                    );
                }
            }
            check(&sp);
            let after = per_offset(&sp);
            for (o, i) in after.range(..log_start) {
                assert!(
                    !matches!(i.state, RecordState::Available | RecordState::Acquired),
                    "offset {o} below the log start {log_start} is {:?}",
                    i.state
                );
            }
            assert!(sp.start_offset() >= b_start, "SPSO moved back");
            assert!(sp.end_offset() >= b_end, "SPEO moved back");
            if refused {
                assert_eq!(
                    after,
                    per_offset(&time_only),
                    "refused request changed state"
                );
            }
            for (o, was) in &before {
                let now_info = after.get(o);
                if was.state.is_terminal() {
                    assert!(
                        now_info.is_none() || now_info.map(|i| i.state) == Some(was.state),
                        "terminal offset {o} changed: {was:?} -> {now_info:?}"
                    );
                }
                if was.state == RecordState::TxPending && !may_resolve {
                    let i = now_info.expect("TX_PENDING cannot be passed by the SPSO");
                    assert!(same_pending(was, i), "TX_PENDING {o} changed by {op:?}");
                }
            }
            if let Some(a) = acquired {
                // Acquisition expires due locks first: compare with that.
                let before = per_offset(&time_only);
                let b_start = time_only.start_offset();
                for r in &a.acquired {
                    for o in r.first_offset..=r.last_offset {
                        match before.get(&o) {
                            Some(was) => {
                                assert_eq!(was.state, RecordState::Available, "offset {o}");
                                assert_eq!(r.delivery_count, was.delivery_count + 1);
                            }
                            None => {
                                assert!(o >= b_end, "offset {o} below the window re-acquired");
                                assert_eq!(r.delivery_count, 1);
                                assert!(
                                    o < b_start + i64::from(config.max_in_flight_records),
                                    "offset {o} beyond the in-flight cap"
                                );
                                assert!(
                                    log.iter().any(|b| b.base_offset <= o && o <= b.last_offset),
                                    "offset {o} was not fetched"
                                );
                            }
                        }
                    }
                }
                // Every gap offset was acquired, and is a control batch or
                // (read_committed) an aborted one.
                for g in &a.gaps {
                    for o in g.first_offset..=g.last_offset {
                        assert!(
                            a.acquired
                                .iter()
                                .any(|r| r.first_offset <= o && o <= r.last_offset)
                        );
                        assert!(log.iter().any(|b| b.base_offset <= o
                            && o <= b.last_offset
                            && (b.control
                                || (b.aborted
                                    && config.isolation == IsolationLevel::ReadCommitted))));
                    }
                }
            }
            assert!(
                sp.run_count() <= boundaries,
                "{} runs after {boundaries} boundaries",
                sp.run_count()
            );
        }
    }

    proptest! {
        #![proptest_config(Config {
            cases: 300,
            rng_seed: RngSeed::Fixed(0x1289_0932),
            ..Config::default()
        })]

        #[test]
        fn random_operation_sequences_keep_the_invariants(
            read_committed in any::<bool>(),
            cap in 5u32..40,
            log in log_batches(),
            ops in prop::collection::vec((op(), 0i64..700), 1..60),
        ) {
            let config = SharePartitionConfig {
                record_lock_duration_ms: LOCK,
                delivery_count_limit: LIMIT,
                max_in_flight_records: cap,
                isolation: if read_committed {
                    IsolationLevel::ReadCommitted
                } else {
                    IsolationLevel::ReadUncommitted
                },
                renew_acknowledge_enabled: true,
                dead_letter_queue: false,
            };
            run(config, log, ops);
        }
    }
}

/// A fetch that found the in-flight window full waits for room: a commit
/// marker or an acknowledgement that moves the start of a full window
/// must wake it, even though no record became AVAILABLE.
#[test]
fn room_made_under_the_in_flight_cap_wakes_fetches() {
    let capped = || {
        SharePartition::new(
            SharePartitionConfig {
                max_in_flight_records: 5,
                ..cfg()
            },
            0,
        )
    };
    // Full window, the first two records committed in a transaction.
    let mut sp = capped();
    acq(&mut sp, "m1", 100, 0, &data(&[(0, 9)]));
    assert_eq!(sp.next_fetch_offset(), None);
    staged(&mut sp, "m1", 0, 1, AcknowledgeType::Accept, 1);
    let out = sp.apply_marker(PID, EPOCH, true, 2, alive);
    assert!(out.records_available);
    assert_eq!(sp.next_fetch_offset(), Some(5));
    // The same with a plain acknowledgement.
    let mut sp = capped();
    acq(&mut sp, "m1", 100, 0, &data(&[(0, 9)]));
    let e = sp
        .acknowledge("m1", &[ack(0, 0, AcknowledgeType::Accept)], 1)
        .unwrap();
    assert!(e.records_available);
    // Acknowledging from the middle does not move the start: no room, no wake.
    let mut sp = capped();
    acq(&mut sp, "m1", 100, 0, &data(&[(0, 9)]));
    let e = sp
        .acknowledge("m1", &[ack(3, 3, AcknowledgeType::Accept)], 1)
        .unwrap();
    assert!(!e.records_available);
    // A window below the cap wakes nobody when its start moves.
    let mut sp = SharePartition::new(cfg(), 0);
    acq(&mut sp, "m1", 100, 0, &data(&[(0, 9)]));
    let e = sp
        .acknowledge("m1", &[ack(0, 0, AcknowledgeType::Accept)], 1)
        .unwrap();
    assert!(!e.records_available);
    check(&sp);
}

#[test]
fn records_archived_at_the_delivery_limit_are_counted() {
    let mut sp = SharePartition::new(cfg(), 0);
    for round in 0..LIMIT {
        let t = 10 * i64::from(round);
        acq(&mut sp, "m1", 10, t, &data(&[(0, 3)]));
        // Offsets 0-1 are released each time; 2-3 accepted at once.
        let types = if round == 0 {
            vec![
                ack(0, 1, AcknowledgeType::Release),
                ack(2, 3, AcknowledgeType::Accept),
            ]
        } else {
            vec![ack(0, 1, AcknowledgeType::Release)]
        };
        sp.acknowledge("m1", &types, t + 1).unwrap();
    }
    // The last release reached the limit: archived, counted, not again.
    assert_eq!(sp.metrics().archived_at_limit_total, 2);
    assert_eq!(sp.start_offset(), 4);
    // Rejected records are archived too, but not at the limit.
    acq(&mut sp, "m1", 10, 100, &data(&[(0, 5)]));
    sp.acknowledge("m1", &[ack(4, 5, AcknowledgeType::Reject)], 101)
        .unwrap();
    assert_eq!(sp.metrics().archived_at_limit_total, 2);
    check(&sp);
}

#[test]
fn a_gap_rides_in_the_transaction_and_is_archived_on_commit() {
    let mut sp = SharePartition::new(cfg(), 0);
    acq(&mut sp, "m1", 10, 0, &data(&[(0, 4)]));
    sp.stage(
        "m1",
        PID,
        EPOCH,
        &[
            ack(0, 1, AcknowledgeType::Accept),
            ack(2, 2, AcknowledgeType::Gap),
            ack(3, 4, AcknowledgeType::Accept),
        ],
        1,
    )
    .unwrap();
    assert_eq!(sp.txn_pending_records(), 5);
    assert_eq!(sp.record(2).unwrap().txn_ack, Some(TxnAckType::Gap));
    // Abort: the gap comes back with the rest.
    sp.apply_marker(PID, EPOCH + 1, false, 2, alive);
    assert_eq!(st(&sp, 2), Some(RecordState::Acquired));
    sp.stage("m1", PID, EPOCH + 1, &[ack(2, 2, AcknowledgeType::Gap)], 3)
        .unwrap();
    sp.apply_marker(PID, EPOCH + 2, true, 4, alive);
    assert_eq!(sp.metrics().archived_records, 1);
    check(&sp);
}
