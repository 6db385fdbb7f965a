//! Scenario tests of log compaction ([`PartitionLog::clean`]).

use bytes::Bytes;

use super::*;
use sharestream_protocol::records::{
    BatchSpec, DEFAULT_MAX_DECOMPRESSED, Record, RecordBatchView, control_batch, encode_batch,
};

/// A batch of `(key, value)` records; `None` value = tombstone.
fn keyed(pid: i64, seq: i32, txn: bool, kvs: &[(&str, Option<&str>)]) -> RecordBatchView {
    let records: Vec<Record> = kvs
        .iter()
        .enumerate()
        .map(|(i, (k, v))| {
            Record::new(
                i as i32,
                1_000 + i as i64,
                Some(Bytes::from(k.to_string())),
                v.map(|v| Bytes::from(v.to_string())),
            )
        })
        .collect();
    let spec = BatchSpec {
        producer_id: pid,
        producer_epoch: if pid >= 0 { 0 } else { -1 },
        base_sequence: seq,
        transactional: txn,
        ..BatchSpec::default()
    };
    let mut b = encode_batch(&spec, &records).unwrap();
    RecordBatchView::split_from(&mut b).unwrap().unwrap()
}

fn marker(pid: i64, commit: bool) -> RecordBatchView {
    let mut b = control_batch(commit, pid, 0, 0, 5_000);
    RecordBatchView::split_from(&mut b).unwrap().unwrap()
}

fn at(now_ms: i64) -> AppendOptions {
    AppendOptions {
        now_ms,
        log_append_time: false,
        leader_epoch: 0,
    }
}

fn log() -> PartitionLog {
    let mut l = PartitionLog::in_memory(LogConfig::default());
    l.set_segment_ms(Some(10));
    l
}

/// Appends at `now` (a roll happens when `now` is 10 ms past the active
/// segment's first append).
fn put(l: &mut PartitionLog, now: i64, b: RecordBatchView) -> AppendInfo {
    l.append(std::slice::from_ref(&b), at(now)).unwrap()
}

/// Every (offset, key, value) a reader from offset 0 sees, markers left out.
fn contents(l: &PartitionLog) -> Vec<(i64, String, Option<String>)> {
    let bytes = l.read(l.log_start_offset(), usize::MAX >> 1).unwrap();
    let mut out = Vec::new();
    for v in RecordBatchView::parse_all(bytes).unwrap() {
        if v.is_control() {
            continue;
        }
        for r in v.records(DEFAULT_MAX_DECOMPRESSED).unwrap() {
            let s = |b: Option<Bytes>| b.map(|b| String::from_utf8(b.to_vec()).unwrap());
            out.push((r.offset(v.base_offset()), s(r.key).unwrap(), s(r.value)));
        }
    }
    out
}

fn eager(delete_retention_ms: i64) -> CleanerConfig {
    CleanerConfig {
        delete_retention_ms,
        min_cleanable_dirty_ratio: 0.0,
        ..CleanerConfig::default()
    }
}

fn e(o: i64, k: &str, v: Option<&str>) -> (i64, String, Option<String>) {
    (o, k.to_string(), v.map(str::to_string))
}

#[test]
fn latest_value_per_key_stays_at_its_offset_and_the_active_segment_is_untouched() {
    let mut l = log();
    put(
        &mut l,
        0,
        keyed(
            -1,
            -1,
            false,
            &[("a", Some("a1")), ("b", Some("b1")), ("c", Some("c1"))],
        ),
    );
    put(
        &mut l,
        10,
        keyed(-1, -1, false, &[("a", Some("a2")), ("b", None)]),
    );
    put(&mut l, 20, keyed(-1, -1, false, &[("a", Some("a3"))]));
    assert_eq!(l.segment_count(), 3);
    let o = l.clean(30, eager(100)).unwrap();
    assert_eq!(o.superseded_records, 2, "{o:?}");
    assert_eq!(o.records_removed(), 2);
    // a2 stays: the map covers only the cleaned (closed) segments.
    assert_eq!(
        contents(&l),
        vec![
            e(2, "c", Some("c1")),
            e(3, "a", Some("a2")),
            e(4, "b", None),
            e(5, "a", Some("a3"))
        ]
    );
    assert_eq!(l.first_dirty_offset(), 5);
    assert_eq!(l.log_end_offset(), 6);
    // Fetching inside a gap returns the next batch that holds records.
    let v = RecordBatchView::parse_all(l.read(0, 1 << 20).unwrap()).unwrap();
    assert_eq!(v[0].base_offset(), 0);
    assert_eq!(v[0].records(DEFAULT_MAX_DECOMPRESSED).unwrap().len(), 1);
    // Nothing dirty: a second pass does nothing.
    assert_eq!(l.clean(40, eager(100)).unwrap(), CleanOutcome::default());
}

#[test]
fn tombstones_go_only_after_delete_retention_from_the_cleaning_that_kept_them() {
    let mut l = log();
    put(
        &mut l,
        0,
        keyed(-1, -1, false, &[("a", Some("a1")), ("b", Some("b1"))]),
    );
    put(&mut l, 10, keyed(-1, -1, false, &[("a", None)]));
    put(&mut l, 20, keyed(-1, -1, false, &[("z", Some("z"))]));
    let o = l.clean(1_000, eager(500)).unwrap();
    assert_eq!((o.superseded_records, o.tombstones_removed), (1, 0));
    assert_eq!(contents(&l)[..2], [e(1, "b", Some("b1")), e(2, "a", None)]);
    // Before the horizon (1000 + 500) the tombstone stays.
    assert_eq!(l.clean(1_499, eager(500)).unwrap(), CleanOutcome::default());
    assert!(contents(&l).contains(&e(2, "a", None)));
    let o = l.clean(1_500, eager(500)).unwrap();
    assert_eq!(o.tombstones_removed, 1, "{o:?}");
    assert_eq!(
        contents(&l),
        vec![e(1, "b", Some("b1")), e(3, "z", Some("z"))]
    );
}

#[test]
fn aborted_records_go_markers_wait_for_their_horizon_and_open_transactions_are_untouched() {
    let mut l = log();
    // pid 1 aborts a transaction, then commits one; pid 3 stays open.
    put(&mut l, 0, keyed(1, 0, true, &[("a", Some("aborted"))]));
    l.append_marker(&marker(1, false), at(0), 1).unwrap();
    put(&mut l, 0, keyed(1, 1, true, &[("b", Some("committed"))]));
    l.append_marker(&marker(1, true), at(0), 1).unwrap();
    put(&mut l, 10, keyed(-1, -1, false, &[("c", Some("c1"))]));
    put(&mut l, 10, keyed(3, 0, true, &[("c", Some("open"))]));
    put(&mut l, 20, keyed(-1, -1, false, &[("c", Some("c2"))]));
    assert_eq!(l.segment_count(), 3);
    assert_eq!(l.last_stable_offset(), 5);
    let o = l.clean(100, eager(50)).unwrap();
    // Only the first segment is below the LSO: the open transaction's
    // segment is not cleaned, so c1 is not superseded yet.
    assert_eq!(o.aborted_records_removed, 1, "{o:?}");
    assert_eq!(o.segments_cleaned, 1);
    assert_eq!(
        contents(&l),
        vec![
            e(2, "b", Some("committed")),
            e(4, "c", Some("c1")),
            e(5, "c", Some("open")),
            e(6, "c", Some("c2"))
        ]
    );
    // Both markers stay until their horizon (100 + 50); then the ABORT,
    // whose data is gone, goes; the COMMIT stays with its data.
    assert_eq!(l.clean(149, eager(50)).unwrap(), CleanOutcome::default());
    let o = l.clean(150, eager(50)).unwrap();
    assert_eq!(o.markers_removed, 1, "{o:?}");
    let bytes = l.read(0, 1 << 20).unwrap();
    let markers: Vec<i64> = RecordBatchView::parse_all(bytes)
        .unwrap()
        .iter()
        .filter(|v| v.is_control())
        .map(|v| v.base_offset())
        .collect();
    assert_eq!(markers, vec![3]);
    assert_eq!(
        l.last_stable_offset(),
        5,
        "the open transaction still bounds the LSO"
    );
}

#[test]
fn an_idempotent_producer_keeps_its_last_batch_and_deduplicates_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = LogConfig {
        segment_ms: Some(10),
        ..LogConfig::default()
    };
    let mut l = PartitionLog::open(dir.path(), cfg.clone()).unwrap();
    put(&mut l, 0, keyed(7, 0, false, &[("a", Some("from-7"))]));
    put(&mut l, 10, keyed(-1, -1, false, &[("a", Some("newer"))]));
    put(&mut l, 20, keyed(-1, -1, false, &[("z", Some("z"))]));
    let o = l.clean(30, eager(0)).unwrap();
    assert_eq!(o.superseded_records, 1);
    // The producer's batch is kept empty, offset range and sequence intact.
    let v = RecordBatchView::parse_all(l.read(0, 1 << 20).unwrap()).unwrap();
    assert_eq!(
        (v[0].producer_id(), v[0].base_offset(), v[0].records_count()),
        (7, 0, 0)
    );
    // A restart that must rebuild the producer state from the log alone.
    drop(l);
    for f in std::fs::read_dir(dir.path()).unwrap() {
        let p = f.unwrap().path();
        if p.extension().is_some_and(|x| x == "snapshot") {
            std::fs::remove_file(p).unwrap();
        }
    }
    let mut l = PartitionLog::open(dir.path(), cfg).unwrap();
    assert_eq!(
        contents(&l),
        vec![e(1, "a", Some("newer")), e(2, "z", Some("z"))]
    );
    let retry = l
        .append(&[keyed(7, 0, false, &[("a", Some("from-7"))])], at(40))
        .unwrap();
    assert!(retry.duplicate);
    assert_eq!(retry.base_offset, 0);
}

#[test]
fn a_cleaned_log_reopens_with_its_gaps_and_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = LogConfig {
        segment_ms: Some(10),
        ..LogConfig::default()
    };
    let mut l = PartitionLog::open(dir.path(), cfg.clone()).unwrap();
    put(
        &mut l,
        0,
        keyed(-1, -1, false, &[("a", Some("1")), ("b", Some("1"))]),
    );
    put(
        &mut l,
        10,
        keyed(-1, -1, false, &[("a", Some("2")), ("b", Some("2"))]),
    );
    put(&mut l, 20, keyed(-1, -1, false, &[("c", Some("1"))]));
    let o = l.clean(30, eager(0)).unwrap();
    assert_eq!((o.segments_cleaned, o.segments_deleted), (1, 0));
    let before = contents(&l);
    assert_eq!(before[0], e(2, "a", Some("2")));
    drop(l);
    let l = PartitionLog::open(dir.path(), cfg).unwrap();
    assert_eq!(contents(&l), before);
    assert_eq!(l.first_dirty_offset(), 4);
    assert_eq!(l.log_start_offset(), 0);
    assert_eq!(
        l.offset_for_timestamp(0).unwrap().map(|t| t.offset),
        Some(2),
        "a timestamp lookup skips the gap"
    );
}

#[test]
fn dirty_ratio_and_compaction_lags_decide_when_a_log_is_cleaned() {
    let mut l = log();
    put(&mut l, 0, keyed(-1, -1, false, &[("a", Some("1"))]));
    put(&mut l, 10, keyed(-1, -1, false, &[("a", Some("2"))]));
    put(&mut l, 20, keyed(-1, -1, false, &[("z", Some("z"))]));
    // Everything is dirty (ratio 1.0), which is not above 1.0.
    let strict = CleanerConfig {
        min_cleanable_dirty_ratio: 1.0,
        ..CleanerConfig::default()
    };
    assert_eq!(l.clean(30, strict).unwrap(), CleanOutcome::default());
    // min.compaction.lag.ms keeps segments with newer records out.
    let lagged = CleanerConfig {
        min_compaction_lag_ms: 1_000_000,
        min_cleanable_dirty_ratio: 0.0,
        ..CleanerConfig::default()
    };
    assert_eq!(l.clean(30, lagged).unwrap(), CleanOutcome::default());
    // max.compaction.lag.ms makes it due whatever the ratio (records of
    // timestamp 1000 are older than 500 ms at 2000).
    let due = CleanerConfig {
        max_compaction_lag_ms: 500,
        ..strict
    };
    assert_eq!(l.clean(2_000, due).unwrap().superseded_records, 1);
}

#[test]
fn keyless_records_from_before_compaction_are_removed_and_counted() {
    let mut l = log();
    let mut b = encode_batch(
        &BatchSpec::default(),
        &[Record::new(0, 1, None, Some(Bytes::from_static(b"x")))],
    )
    .unwrap();
    let v = RecordBatchView::split_from(&mut b).unwrap().unwrap();
    put(&mut l, 0, v);
    put(&mut l, 0, keyed(-1, -1, false, &[("a", Some("1"))]));
    put(&mut l, 10, keyed(-1, -1, false, &[("z", Some("z"))]));
    let o = l.clean(20, eager(0)).unwrap();
    assert_eq!(o.keyless_records_removed, 1);
    assert_eq!(
        contents(&l),
        vec![e(1, "a", Some("1")), e(2, "z", Some("z"))]
    );
}
