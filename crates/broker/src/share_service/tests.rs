use super::*;
use crate::group::TopicInfo;
use crate::log::{AppendOptions, LogConfig};
use crate::share::AcquireMode;
use crate::share::{AcknowledgeType, RecordState};
use bytes::Bytes;
use sharestream_protocol::records::RecordBatchView;
use sharestream_protocol::records::{BatchSpec, Record, control_batch, encode_batch};

const T0: i64 = 1_000_000;

fn tid() -> Uuid {
    Uuid::from_u128(0x1234)
}

fn lookup(name: &str) -> Option<TopicInfo> {
    (name == "t").then_some(TopicInfo {
        id: tid(),
        partitions: 1,
    })
}

fn opts() -> AppendOptions {
    AppendOptions {
        now_ms: T0,
        log_append_time: false,
        leader_epoch: 0,
    }
}

fn append(log: &Mutex<PartitionLog>, n: usize, txn: Option<(i64, i32)>) {
    let spec = match txn {
        Some((pid, seq)) => BatchSpec {
            producer_id: pid,
            producer_epoch: 0,
            base_sequence: seq,
            transactional: true,
            ..BatchSpec::default()
        },
        None => BatchSpec::default(),
    };
    let records: Vec<Record> = (0..n)
        .map(|i| Record::new(i as i32, T0, None, Some(Bytes::from(vec![b'x'; 10]))))
        .collect();
    let mut bytes = encode_batch(&spec, &records).unwrap();
    let view = RecordBatchView::split_from(&mut bytes).unwrap().unwrap();
    log.lock().append(&[view], opts()).unwrap();
}

fn new_log() -> Mutex<PartitionLog> {
    Mutex::new(PartitionLog::in_memory(LogConfig::default()))
}

fn join(m: &ShareService, member: &str, now: i64) -> HeartbeatOutcome {
    m.heartbeat(
        &HeartbeatRequest {
            group_id: "g".into(),
            member_id: member.into(),
            member_epoch: 0,
            subscribed_topic_names: Some(vec!["t".into()]),
            ..Default::default()
        },
        now,
        &lookup,
    )
    .unwrap()
}

fn manager() -> ShareService {
    manager_with(ShareGroupBrokerConfig::default())
}

fn manager_with(broker: ShareGroupBrokerConfig) -> ShareService {
    let m = ShareService::open(None, broker, T0).unwrap();
    m.alter_group_configs("g", &[("share.auto.offset.reset", Some("earliest"))], false)
        .unwrap();
    m
}

fn acquire(m: &ShareService, log: &Mutex<PartitionLog>, member: &str, now: i64) -> ShareFetchData {
    m.acquire(
        "g",
        member,
        tid(),
        0,
        log,
        500,
        AcquireMode::BatchOptimized,
        1 << 20,
        now,
    )
    .unwrap()
}

fn ack(
    m: &ShareService,
    member: &str,
    first: i64,
    last: i64,
    ty: AcknowledgeType,
    now: i64,
) -> Result<(), ErrorCode> {
    m.acknowledge(
        "g",
        member,
        tid(),
        0,
        &[RawAcknowledgementBatch::uniform(first, last, ty)],
        now,
    )
}

fn range(d: &ShareFetchData) -> Vec<(i64, i64, u16)> {
    d.acquired
        .iter()
        .map(|r| (r.first_offset, r.last_offset, r.delivery_count))
        .collect()
}

#[test]
fn acquire_then_accept_release_reject() {
    let m = manager();
    let log = new_log();
    append(&log, 3, None);
    append(&log, 2, None);
    join(&m, "a", T0);
    let d = acquire(&m, &log, "a", T0);
    assert_eq!(range(&d), vec![(0, 4, 1)]);
    assert_eq!(d.record_count, 5);
    assert_eq!(
        RecordBatchView::parse_all(d.records.clone()).unwrap().len(),
        2,
        "both batches carry acquired records"
    );
    // Nothing more to acquire while everything is locked.
    assert_eq!(acquire(&m, &log, "a", T0).record_count, 0);
    let mut woken = m.subscribe_available();
    woken.borrow_and_update();
    ack(&m, "a", 0, 1, AcknowledgeType::Accept, T0).unwrap();
    ack(&m, "a", 2, 2, AcknowledgeType::Reject, T0).unwrap();
    assert!(!woken.has_changed().unwrap(), "accept/reject free nothing");
    ack(&m, "a", 3, 4, AcknowledgeType::Release, T0).unwrap();
    assert!(
        woken.has_changed().unwrap(),
        "a release wakes parked fetches"
    );
    // Released records come back with delivery count 2; accepted and
    // rejected ones never.
    let d = acquire(&m, &log, "a", T0 + 1);
    assert_eq!(range(&d), vec![(3, 4, 2)]);
    assert_eq!(m.partition_offsets("g", tid(), 0), Some((3, 5)));
}

#[test]
fn only_the_holder_may_acknowledge() {
    let m = manager();
    let log = new_log();
    append(&log, 4, None);
    join(&m, "a", T0);
    join(&m, "b", T0);
    acquire(&m, &log, "a", T0);
    assert_eq!(
        ack(&m, "b", 0, 0, AcknowledgeType::Accept, T0),
        Err(ErrorCode::INVALID_RECORD_STATE)
    );
    assert_eq!(
        ack(&m, "a", 2, 1, AcknowledgeType::Accept, T0),
        Err(ErrorCode::INVALID_REQUEST)
    );
    ack(&m, "a", 0, 3, AcknowledgeType::Accept, T0).unwrap();
    assert_eq!(
        ack(&m, "a", 0, 0, AcknowledgeType::Accept, T0),
        Err(ErrorCode::INVALID_RECORD_STATE),
        "a second acknowledgement of the same record"
    );
}

#[test]
fn unknown_member_cannot_acquire() {
    let m = manager();
    let log = new_log();
    append(&log, 1, None);
    assert_eq!(
        m.acquire(
            "g",
            "ghost",
            tid(),
            0,
            &log,
            10,
            AcquireMode::BatchOptimized,
            1 << 20,
            T0
        ),
        Err(ErrorCode::UNKNOWN_MEMBER_ID)
    );
}

#[test]
fn lock_expiry_redelivers_and_wakes() {
    let m = manager();
    m.alter_group_configs(
        "g",
        &[("share.record.lock.duration.ms", Some("15000"))],
        false,
    )
    .unwrap();
    let log = new_log();
    append(&log, 2, None);
    join(&m, "a", T0);
    assert_eq!(range(&acquire(&m, &log, "a", T0)), vec![(0, 1, 1)]);
    let mut woken = m.subscribe_available();
    woken.borrow_and_update();
    let t = m.tick(T0 + 14_999);
    assert_eq!(t.expired_records, 0);
    assert!(!woken.has_changed().unwrap());
    let t = m.tick(T0 + 15_000);
    assert_eq!(t.expired_records, 2);
    assert!(t.records_available);
    assert!(
        woken.has_changed().unwrap(),
        "lock expiry wakes parked fetches"
    );
    // Heartbeat to stay alive past the session timeout is not needed:
    // 15 s is below the 45 s session timeout.
    assert_eq!(range(&acquire(&m, &log, "a", T0 + 15_001)), vec![(0, 1, 2)]);
    let metrics = m.partition_metrics();
    assert_eq!(metrics[0].1.lock_expired_total, 2);
    assert_eq!(metrics[0].1.redeliveries_total, 2);
    let text = m.render_prometheus();
    assert!(text.contains(&format!(
        "sharestream_share_partition_lock_expired_total{{group=\"g\",topic_id=\"{}\",partition=\"0\"}} 2",
        tid()
    )));
    assert!(text.contains("sharestream_share_partition_acquired_records{"));
}

#[test]
fn delivery_count_limit_archives() {
    let m = manager();
    m.alter_group_configs("g", &[("share.delivery.count.limit", Some("2"))], false)
        .unwrap();
    let log = new_log();
    append(&log, 1, None);
    join(&m, "a", T0);
    assert_eq!(range(&acquire(&m, &log, "a", T0)), vec![(0, 0, 1)]);
    ack(&m, "a", 0, 0, AcknowledgeType::Release, T0).unwrap();
    assert_eq!(range(&acquire(&m, &log, "a", T0)), vec![(0, 0, 2)]);
    ack(&m, "a", 0, 0, AcknowledgeType::Release, T0).unwrap();
    assert_eq!(
        acquire(&m, &log, "a", T0).record_count,
        0,
        "archived at the limit"
    );
    assert_eq!(m.partition_offsets("g", tid(), 0), Some((1, 1)));
}

fn leave(m: &ShareService, member: &str, now: i64) {
    m.heartbeat(
        &HeartbeatRequest {
            group_id: "g".into(),
            member_id: member.into(),
            member_epoch: -1,
            ..Default::default()
        },
        now,
        &lookup,
    )
    .unwrap();
}

#[test]
fn leaving_member_without_a_session_releases_its_records() {
    let m = manager();
    let log = new_log();
    append(&log, 3, None);
    join(&m, "a", T0);
    join(&m, "b", T0);
    acquire(&m, &log, "a", T0);
    assert_eq!(acquire(&m, &log, "b", T0).record_count, 0);
    let mut woken = m.subscribe_available();
    woken.borrow_and_update();
    leave(&m, "a", T0);
    assert!(woken.has_changed().unwrap());
    assert_eq!(range(&acquire(&m, &log, "b", T0)), vec![(0, 2, 2)]);
}

/// Issue #18: a member that leaves with a share session open keeps the
/// session (and its records) until the session's final epoch, so final
/// acknowledgements racing the leave still count; what is left is
/// released when that final epoch comes.
#[test]
fn a_share_session_outlives_the_leave_until_its_final_epoch() {
    let m = manager();
    let log = new_log();
    append(&log, 3, None);
    join(&m, "a", T0);
    join(&m, "b", T0);
    m.fetch_session("g", "a", 0, &[(tid(), 0)], &[]).unwrap();
    acquire(&m, &log, "a", T0);
    leave(&m, "a", T0);
    assert_eq!(m.session_count(), 1);
    assert!(m.has_member_or_session("g", "a"));
    assert_eq!(acquire(&m, &log, "b", T0).record_count, 0, "still held");
    ack(&m, "a", 0, 1, AcknowledgeType::Accept, T0 + 1).unwrap();
    let step = m.acknowledge_session("g", "a", -1).unwrap();
    assert!(step.closed);
    m.release_session_records("g", "a", &step.partitions, T0 + 1);
    assert!(!m.has_member_or_session("g", "a"));
    assert_eq!(range(&acquire(&m, &log, "b", T0 + 2)), vec![(2, 2, 2)]);
}

/// The race librdkafka's close runs: its final ShareAcknowledge (epoch -1)
/// and its leave heartbeat arrive at once on two connections, and the leave
/// lands after the request's session step but before its acknowledgements.
/// The session, closing, is still there: the leave leaves the records to
/// the session's end, and the acknowledgements count. (Before the step kept
/// the session until its release, the leave released the records under the
/// acknowledgements, which were refused INVALID_RECORD_STATE, and every
/// processed record was delivered again.)
#[test]
fn a_leave_between_the_final_step_and_its_acknowledgements_releases_nothing_under_them() {
    let m = manager();
    let log = new_log();
    append(&log, 3, None);
    join(&m, "a", T0);
    m.fetch_session("g", "a", 0, &[(tid(), 0)], &[]).unwrap();
    acquire(&m, &log, "a", T0);
    let step = m.acknowledge_session("g", "a", -1).unwrap();
    leave(&m, "a", T0);
    ack(&m, "a", 0, 1, AcknowledgeType::Accept, T0 + 1).unwrap();
    m.release_session_records("g", "a", &step.partitions, T0 + 1);
    assert_eq!(m.session_count(), 0);
    assert!(!m.has_member_or_session("g", "a"));
    join(&m, "b", T0 + 2);
    assert_eq!(
        range(&acquire(&m, &log, "b", T0 + 2)),
        vec![(2, 2, 2)],
        "only the unacknowledged record comes back"
    );
}

/// A session opened again (epoch 0) while a final-epoch request was
/// closing the old one is not ended by that request's release.
#[test]
fn a_closing_release_does_not_end_a_session_opened_since() {
    let m = manager();
    join(&m, "a", T0);
    m.fetch_session("g", "a", 0, &[(tid(), 0)], &[]).unwrap();
    let step = m.fetch_session("g", "a", -1, &[], &[]).unwrap();
    m.fetch_session("g", "a", 0, &[(tid(), 0)], &[]).unwrap();
    m.release_session_records("g", "a", &step.partitions, T0);
    assert_eq!(m.session_count(), 1);
    m.fetch_session("g", "a", 1, &[], &[]).unwrap();
}

/// A departed member's session that never sends its final epoch is dropped
/// one acquisition lock duration after the departure, releasing what is
/// left (which by then the lock has freed anyway).
#[test]
fn an_orphaned_share_session_ends_after_one_lock_duration() {
    let m = manager();
    let log = new_log();
    append(&log, 1, None);
    join(&m, "a", T0);
    m.fetch_session("g", "a", 0, &[(tid(), 0)], &[]).unwrap();
    acquire(&m, &log, "a", T0 + 10_000);
    leave(&m, "a", T0 + 10_000);
    m.tick(T0 + 39_999);
    assert_eq!(m.session_count(), 1);
    m.tick(T0 + 40_000);
    assert_eq!(m.session_count(), 0);
    assert!(!m.has_member_or_session("g", "a"));
    join(&m, "b", T0 + 40_001);
    assert_eq!(range(&acquire(&m, &log, "b", T0 + 40_001)), vec![(0, 0, 2)]);
}

/// A departed member's session ends with the connection it was last used
/// on; a live member's session survives its connection (D18).
#[test]
fn a_closed_connection_ends_only_orphaned_sessions() {
    let m = manager();
    let log = new_log();
    append(&log, 2, None);
    join(&m, "a", T0);
    join(&m, "b", T0);
    m.fetch_session("g", "a", 0, &[(tid(), 0)], &[]).unwrap();
    m.session_used_on("g", "a", 7);
    m.fetch_session("g", "b", 0, &[(tid(), 0)], &[]).unwrap();
    m.session_used_on("g", "b", 8);
    acquire(&m, &log, "a", T0);
    m.connection_closed(7, T0);
    assert_eq!(m.session_count(), 2, "a is still a member");
    leave(&m, "a", T0);
    m.connection_closed(8, T0);
    assert_eq!(m.session_count(), 2, "b is alive; a's session is elsewhere");
    m.connection_closed(7, T0 + 1);
    assert_eq!(m.session_count(), 1);
    assert_eq!(range(&acquire(&m, &log, "b", T0 + 2)), vec![(0, 1, 2)]);
}

/// `group.share.max.share.sessions` caps the broker's share sessions.
#[test]
fn the_broker_setting_caps_share_sessions() {
    let broker = ShareGroupBrokerConfig::default()
        .with_overrides([
            ("group.share.max.size", "1"),
            ("group.share.max.share.sessions", "1"),
        ])
        .unwrap();
    let m = ShareService::open(None, broker, T0).unwrap();
    m.fetch_session("g", "a", 0, &[(tid(), 0)], &[]).unwrap();
    assert_eq!(
        m.fetch_session("g", "b", 0, &[(tid(), 0)], &[]),
        Err(ErrorCode::SHARE_SESSION_LIMIT_REACHED)
    );
}

#[test]
fn session_expiry_of_a_member_releases_records() {
    let m = manager();
    let log = new_log();
    append(&log, 1, None);
    join(&m, "a", T0);
    // A timed-out member is presumed dead: its open session does not keep
    // its records (D18).
    m.fetch_session("g", "a", 0, &[(tid(), 0)], &[]).unwrap();
    acquire(&m, &log, "a", T0);
    let t = m.tick(T0 + 45_001);
    assert_eq!(t.expired_members, 1);
    assert!(t.records_available);
    join(&m, "b", T0 + 45_002);
    assert_eq!(range(&acquire(&m, &log, "b", T0 + 45_002)), vec![(0, 0, 2)]);
    assert_eq!(m.session_count(), 0);
}

#[test]
fn share_session_epoch_rules() {
    let m = manager();
    let p0 = (tid(), 0);
    let p1 = (tid(), 1);
    assert_eq!(
        m.fetch_session("g", "a", 1, &[], &[]),
        Err(ErrorCode::SHARE_SESSION_NOT_FOUND)
    );
    assert_eq!(
        m.fetch_session("g", "a", -1, &[], &[]),
        Err(ErrorCode::SHARE_SESSION_NOT_FOUND)
    );
    let s = m.fetch_session("g", "a", 0, &[p0, p0], &[]).unwrap();
    assert_eq!(s.partitions, vec![p0]);
    assert_eq!(
        m.fetch_session("g", "a", 2, &[], &[]),
        Err(ErrorCode::INVALID_SHARE_SESSION_EPOCH)
    );
    let s = m.fetch_session("g", "a", 1, &[p1], &[]).unwrap();
    assert_eq!(s.partitions, vec![p0, p1], "incremental: added");
    let s = m.fetch_session("g", "a", 2, &[], &[p0]).unwrap();
    assert_eq!(s.partitions, vec![p1], "incremental: forgotten");
    assert_eq!(
        m.acknowledge_session("g", "a", 0),
        Err(ErrorCode::INVALID_SHARE_SESSION_EPOCH)
    );
    m.acknowledge_session("g", "a", 3).unwrap();
    assert_eq!(
        m.fetch_session("g", "a", 3, &[], &[]),
        Err(ErrorCode::INVALID_SHARE_SESSION_EPOCH),
        "the acknowledgement used epoch 3"
    );
    // Epoch 0 again replaces the session.
    let s = m.fetch_session("g", "a", 0, &[p0], &[]).unwrap();
    assert_eq!(s.partitions, vec![p0]);
    let s = m.fetch_session("g", "a", -1, &[], &[]).unwrap();
    assert!(s.closed);
    assert_eq!(s.partitions, vec![p0]);
    // Closing: no further step until the closing request's release ends it.
    assert_eq!(
        m.fetch_session("g", "a", 1, &[], &[]),
        Err(ErrorCode::SHARE_SESSION_NOT_FOUND)
    );
    assert_eq!(
        m.acknowledge_session("g", "a", -1),
        Err(ErrorCode::SHARE_SESSION_NOT_FOUND)
    );
    m.release_session_records("g", "a", &s.partitions, T0);
    assert_eq!(m.session_count(), 0);
    m.set_max_sessions(1);
    m.fetch_session("g", "a", 0, &[p0], &[]).unwrap();
    assert_eq!(
        m.fetch_session("g", "b", 0, &[p0], &[]),
        Err(ErrorCode::SHARE_SESSION_LIMIT_REACHED)
    );
}

#[test]
fn read_committed_turns_aborted_and_control_batches_into_gaps() {
    let m = manager();
    m.alter_group_configs(
        "g",
        &[("share.isolation.level", Some("read_committed"))],
        false,
    )
    .unwrap();
    let log = new_log();
    append(&log, 2, None); // 0..=1
    append(&log, 3, Some((7, 0))); // 2..=4, aborted
    {
        let mut b = control_batch(false, 7, 0, 0, T0); // 5
        let view = RecordBatchView::split_from(&mut b).unwrap().unwrap();
        log.lock().append_marker(&view, opts(), 1).unwrap();
    }
    append(&log, 1, Some((8, 0))); // 6, open transaction: above the LSO
    join(&m, "a", T0);
    let d = acquire(&m, &log, "a", T0);
    assert_eq!(range(&d), vec![(0, 5, 1)], "stops at the LSO (6)");
    let batches = RecordBatchView::parse_all(d.records.clone()).unwrap();
    assert_eq!(batches.len(), 1, "only the committed data batch is sent");
    assert_eq!(batches[0].base_offset(), 0);
    ack(&m, "a", 0, 1, AcknowledgeType::Accept, T0).unwrap();
    ack(&m, "a", 2, 5, AcknowledgeType::Gap, T0).unwrap();
    assert_eq!(m.partition_offsets("g", tid(), 0), Some((6, 6)));
}

#[test]
fn read_uncommitted_delivers_aborted_data_but_not_markers() {
    let m = manager();
    let log = new_log();
    append(&log, 3, Some((7, 0))); // 0..=2
    {
        let mut b = control_batch(false, 7, 0, 0, T0); // 3
        let view = RecordBatchView::split_from(&mut b).unwrap().unwrap();
        log.lock().append_marker(&view, opts(), 1).unwrap();
    }
    join(&m, "a", T0);
    let d = acquire(&m, &log, "a", T0);
    assert_eq!(range(&d), vec![(0, 3, 1)]);
    let batches = RecordBatchView::parse_all(d.records.clone()).unwrap();
    assert_eq!(batches.len(), 1);
    assert!(!batches[0].is_control());
}

#[test]
fn latest_starts_at_the_log_end() {
    let m = ShareService::open(None, ShareGroupBrokerConfig::default(), T0).unwrap();
    let log = new_log();
    append(&log, 3, None);
    join(&m, "a", T0);
    assert_eq!(acquire(&m, &log, "a", T0).record_count, 0);
    append(&log, 1, None);
    assert_eq!(range(&acquire(&m, &log, "a", T0)), vec![(3, 3, 1)]);
}

#[test]
fn staged_acknowledgements_resolve_by_marker() {
    staged_acknowledgements_resolve_by_marker_with(AbortedRecordState::Acquired);
    staged_acknowledgements_resolve_by_marker_with(AbortedRecordState::Available);
}

/// D25: an abort the producer asked for returns the records to their
/// member (`acquired`) or makes them AVAILABLE (`available`, the default).
fn staged_acknowledgements_resolve_by_marker_with(abort: AbortedRecordState) {
    let m = manager_with(ShareGroupBrokerConfig {
        transaction_abort_record_state: abort,
        ..ShareGroupBrokerConfig::default()
    });
    let log = new_log();
    append(&log, 4, None);
    let epoch = join(&m, "a", T0).member_epoch;
    acquire(&m, &log, "a", T0);
    let batches = [RawAcknowledgementBatch::uniform(
        0,
        1,
        AcknowledgeType::Accept,
    )];
    assert_eq!(
        m.stage("g", "a", epoch + 1, tid(), 0, 9, 0, &batches, T0),
        Err(ErrorCode::FENCED_MEMBER_EPOCH)
    );
    m.stage("g", "a", epoch, tid(), 0, 9, 0, &batches, T0)
        .unwrap();
    let later = [RawAcknowledgementBatch::uniform(
        2,
        3,
        AcknowledgeType::Accept,
    )];
    m.stage("g", "a", epoch, tid(), 0, 10, 0, &later, T0)
        .unwrap();
    assert_eq!(m.txn_pending_records(), 4);
    assert_eq!(
        m.apply_marker("g", tid(), 0, 9, 1, MarkerKind::Commit, T0)
            .unwrap(),
        2
    );
    assert_eq!(
        m.apply_marker("g", tid(), 0, 10, 1, MarkerKind::Abort, T0)
            .unwrap(),
        2
    );
    assert_eq!(m.txn_pending_records(), 0);
    if abort == AbortedRecordState::Acquired {
        // The aborted ones are ACQUIRED by "a" again and can be acknowledged.
        ack(&m, "a", 2, 3, AcknowledgeType::Accept, T0).unwrap();
    } else {
        // AVAILABLE: "a" no longer holds them; the next fetch delivers them.
        assert!(ack(&m, "a", 2, 3, AcknowledgeType::Accept, T0).is_err());
        let again = acquire(&m, &log, "a", T0);
        assert_eq!(range(&again), vec![(2, 3, 2)], "a second delivery");
        ack(&m, "a", 2, 3, AcknowledgeType::Accept, T0).unwrap();
    }
    assert_eq!(m.partition_offsets("g", tid(), 0), Some((4, 4)));
}

#[test]
fn state_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let log = new_log();
    append(&log, 6, None);
    {
        let m = ShareService::open(Some(dir.path()), Default::default(), T0).unwrap();
        m.alter_group_configs("g", &[("share.auto.offset.reset", Some("earliest"))], false)
            .unwrap();
        join(&m, "a", T0);
        assert_eq!(range(&acquire(&m, &log, "a", T0)), vec![(0, 5, 1)]);
        ack(&m, "a", 0, 1, AcknowledgeType::Accept, T0).unwrap();
        ack(&m, "a", 2, 2, AcknowledgeType::Reject, T0).unwrap();
        // 3..=5 stay ACQUIRED; the manager is dropped without any shutdown.
    }
    let m = ShareService::open(Some(dir.path()), Default::default(), T0 + 10).unwrap();
    assert_eq!(
        m.group_config("g").auto_offset_reset,
        AutoOffsetReset::Earliest,
        "group configs persist"
    );
    join(&m, "b", T0 + 10);
    assert_eq!(
        range(&acquire(&m, &log, "b", T0 + 10)),
        vec![(3, 5, 2)],
        "ACQUIRED comes back AVAILABLE; ACKNOWLEDGED and ARCHIVED never"
    );
    let metrics = m.partition_metrics();
    assert_eq!(metrics[0].1.acquired_records, 3);
    let _ = RecordState::Acquired;
}

#[test]
fn the_state_log_is_compacted() {
    let dir = tempfile::tempdir().unwrap();
    let log = new_log();
    for _ in 0..50 {
        append(&log, 1, None);
    }
    let m = ShareService::open(Some(dir.path()), Default::default(), T0).unwrap();
    m.alter_group_configs("g", &[("share.auto.offset.reset", Some("earliest"))], false)
        .unwrap();
    m.inner.lock().rewrite_min_bytes = 4096;
    join(&m, "a", T0);
    // Many small state changes: acquire and release one record over and
    // over (each persisted).
    for i in 0..300i64 {
        m.acquire(
            "g",
            "a",
            tid(),
            0,
            &log,
            1,
            AcquireMode::BatchOptimized,
            1 << 20,
            T0 + i,
        )
        .unwrap();
        let off = m.partition_offsets("g", tid(), 0).unwrap().0;
        let _ = ack(&m, "a", off, off, AcknowledgeType::Release, T0 + i);
        if m.journal_bytes() > 3 * 4096 {
            panic!("state log not compacted");
        }
    }
    drop(m);
    let m = ShareService::open(Some(dir.path()), Default::default(), T0).unwrap();
    assert!(m.partition_offsets("g", tid(), 0).is_some());
}

#[test]
fn changed_group_configs_reach_existing_share_partitions() {
    let m = manager();
    let log = new_log();
    append(&log, 4, None);
    join(&m, "m1", T0);
    // The share partition exists with the default 30 s lock.
    acquire(&m, &log, "m1", T0);
    let before = m.record_info("g", tid(), 0, 0).unwrap();
    assert_eq!(before.lock_deadline_ms, Some(T0 + 30_000));
    m.acknowledge(
        "g",
        "m1",
        tid(),
        0,
        &[crate::share::RawAcknowledgementBatch {
            first_offset: 0,
            last_offset: 3,
            acknowledge_types: vec![AcknowledgeType::Release as i8],
        }],
        T0,
    )
    .unwrap();
    m.alter_group_configs(
        "g",
        &[("share.record.lock.duration.ms", Some("15000"))],
        false,
    )
    .unwrap();
    acquire(&m, &log, "m1", T0 + 1);
    let after = m.record_info("g", tid(), 0, 0).unwrap();
    assert_eq!(after.state, RecordState::Acquired);
    assert_eq!(after.lock_deadline_ms, Some(T0 + 1 + 15_000));
}

#[tokio::test]
async fn an_acknowledgement_is_on_disk_when_its_answer_may_go_out() {
    let dir = tempfile::tempdir().unwrap();
    let log = new_log();
    append(&log, 4, None);
    let m = ShareService::open(Some(dir.path()), Default::default(), T0).unwrap();
    m.alter_group_configs("g", &[("share.auto.offset.reset", Some("earliest"))], false)
        .unwrap();
    join(&m, "a", T0);
    let (data, durable) = m
        .acquire_deferred(
            "g",
            "a",
            tid(),
            0,
            &log,
            500,
            AcquireMode::BatchOptimized,
            1 << 20,
            T0,
        )
        .split();
    durable.wait().await.unwrap();
    assert_eq!(range(&data.unwrap()), vec![(0, 3, 1)]);
    m.acknowledge_deferred(
        "g",
        "a",
        tid(),
        0,
        &[RawAcknowledgementBatch::uniform(
            0,
            1,
            AcknowledgeType::Accept,
        )],
        T0,
    )
    .durable()
    .await
    .unwrap()
    .unwrap();
    // A copy of the log taken now (the service still running) already
    // holds the acknowledgement.
    let copy = tempfile::tempdir().unwrap();
    std::fs::copy(dir.path().join("share.log"), copy.path().join("share.log")).unwrap();
    let restored = ShareService::open(Some(copy.path()), Default::default(), T0).unwrap();
    assert_eq!(restored.partition_offsets("g", tid(), 0), Some((2, 4)));
    assert!(m.journal_batches() >= 1);
}

#[test]
fn concurrent_acknowledgements_are_all_durable() {
    // 8 members acknowledge one record at a time on 8 share partitions,
    // from 8 threads, through the one journal: every acknowledgement
    // survives a restart. (That queued records share a flush is
    // persistence::tests' business.)
    let dir = tempfile::tempdir().unwrap();
    let logs: Vec<Mutex<PartitionLog>> = (0..8).map(|_| new_log()).collect();
    for l in &logs {
        append(l, 20, None);
    }
    let m = ShareService::open(Some(dir.path()), Default::default(), T0).unwrap();
    m.alter_group_configs("g", &[("share.auto.offset.reset", Some("earliest"))], false)
        .unwrap();
    for i in 0..8 {
        join(&m, &format!("m{i}"), T0);
    }
    for (p, l) in logs.iter().enumerate() {
        m.acquire(
            "g",
            &format!("m{p}"),
            tid(),
            p as i32,
            l,
            20,
            AcquireMode::BatchOptimized,
            1 << 20,
            T0,
        )
        .unwrap();
    }
    std::thread::scope(|s| {
        for p in 0..8 {
            let m = &m;
            s.spawn(move || {
                for off in 0..20 {
                    m.acknowledge(
                        "g",
                        &format!("m{p}"),
                        tid(),
                        p,
                        &[RawAcknowledgementBatch::uniform(
                            off,
                            off,
                            AcknowledgeType::Accept,
                        )],
                        T0,
                    )
                    .unwrap();
                }
            });
        }
    });
    drop(m);
    let m = ShareService::open(Some(dir.path()), Default::default(), T0).unwrap();
    for p in 0..8 {
        assert_eq!(
            m.partition_offsets("g", tid(), p),
            Some((20, 20)),
            "partition {p}"
        );
    }
}
