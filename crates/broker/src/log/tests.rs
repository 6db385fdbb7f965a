//! Scenario tests for the partition log and its producer state.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use kafka_protocol::records::{
    Compression as KpCompression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

use super::*;
use sharestream_protocol::records::RecordBatchView;

fn encode(records: &[Record]) -> RecordBatchView {
    let mut out = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut out,
        records,
        &RecordEncodeOptions {
            version: 2,
            compression: KpCompression::None,
        },
    )
    .unwrap();
    let mut b = out.freeze();
    let v = RecordBatchView::split_from(&mut b).unwrap().unwrap();
    assert!(b.is_empty());
    v
}

/// A data batch of `n` records with timestamps `ts..ts+n`.
fn data(n: usize, pid: i64, epoch: i16, seq: i32, txn: bool, ts: i64) -> RecordBatchView {
    let records: Vec<Record> = (0..n)
        .map(|i| Record {
            transactional: txn,
            control: false,
            partition_leader_epoch: 0,
            producer_id: pid,
            producer_epoch: epoch,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            sequence: seq.wrapping_add(i as i32),
            timestamp: ts + i as i64,
            key: None,
            value: Some(Bytes::from(vec![b'v'; 20])),
            headers: Default::default(),
            delete_horizon: false,
        })
        .collect();
    encode(&records)
}

fn plain(n: usize, ts: i64) -> RecordBatchView {
    data(n, -1, -1, -1, false, ts)
}

fn idem(n: usize, pid: i64, epoch: i16, seq: i32) -> RecordBatchView {
    data(n, pid, epoch, seq, false, 1_000)
}

fn txn(n: usize, pid: i64, epoch: i16, seq: i32) -> RecordBatchView {
    data(n, pid, epoch, seq, true, 1_000)
}

fn marker(pid: i64, epoch: i16, commit: bool, coordinator_epoch: i32) -> RecordBatchView {
    let mut value = Vec::new();
    value.extend_from_slice(&0i16.to_be_bytes());
    value.extend_from_slice(&coordinator_epoch.to_be_bytes());
    encode(&[Record {
        transactional: true,
        control: true,
        partition_leader_epoch: 0,
        producer_id: pid,
        producer_epoch: epoch,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: -1,
        timestamp: 5_000,
        key: Some(Bytes::from(vec![0, 0, 0, commit as u8])),
        value: Some(Bytes::from(value)),
        headers: Default::default(),
        delete_horizon: false,
    }])
}

fn opts() -> AppendOptions {
    AppendOptions {
        now_ms: 77_000,
        log_append_time: false,
        leader_epoch: 3,
    }
}

fn config(segment_bytes: u64, index_interval_bytes: u64) -> LogConfig {
    LogConfig {
        segment_bytes,
        index_interval_bytes,
        ..LogConfig::default()
    }
}

fn parse(bytes: Bytes) -> Vec<RecordBatchView> {
    RecordBatchView::parse_all(bytes).unwrap()
}

fn append1(log: &mut PartitionLog, b: RecordBatchView) -> Result<AppendInfo, LogError> {
    log.append(&[b], opts())
}

/// Every batch from `from` to the log end, checked contiguous and valid.
fn read_all(log: &PartitionLog, from: i64) -> Vec<RecordBatchView> {
    let batches = parse(log.read(from, usize::MAX / 2).unwrap());
    for w in batches.windows(2) {
        assert_eq!(w[0].last_offset() + 1, w[1].base_offset());
    }
    for b in &batches {
        b.verify_crc().unwrap();
    }
    batches
}

fn active_log_file(dir: &Path, log: &PartitionLog) -> std::path::PathBuf {
    let base = *log.segment_base_offsets().last().unwrap();
    dir.join(format!("{base:020}.log"))
}

#[test]
fn append_read_round_trip_across_segment_rolls() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), config(1_000, 150)).unwrap();
    let mut expected_base = 0;
    for i in 0..30 {
        let info = append1(&mut log, plain(3, 1_000 + i)).unwrap();
        assert_eq!(info.base_offset, expected_base);
        assert_eq!(info.last_offset, expected_base + 2);
        assert_eq!(info.log_append_time, -1);
        assert!(!info.duplicate);
        expected_base += 3;
    }
    assert_eq!(log.log_end_offset(), 90);
    assert_eq!(log.high_watermark(), 90);
    assert_eq!(log.last_stable_offset(), 90);
    assert!(log.segment_count() > 3, "{}", log.segment_count());
    let batches = read_all(&log, 0);
    assert_eq!(batches.len(), 30);
    for (i, b) in batches.iter().enumerate() {
        assert_eq!(b.base_offset(), 3 * i as i64);
        assert_eq!(b.partition_leader_epoch(), 3);
        assert_eq!(b.max_timestamp(), 1_000 + i as i64 + 2);
    }
    // Segments are named by the base offset of their first batch.
    for base in log.segment_base_offsets() {
        assert_eq!(base % 3, 0);
        assert!(dir.path().join(format!("{base:020}.log")).exists());
        assert!(dir.path().join(format!("{base:020}.index")).exists());
    }
    log.close().unwrap();
    let log = PartitionLog::open(dir.path(), config(1_000, 150)).unwrap();
    assert!(log.recovery_report().clean_shutdown);
    assert_eq!(log.recovery_report().recovered_segments, 0);
    assert_eq!(read_all(&log, 0).len(), 30);
}

#[test]
fn read_from_the_middle_of_a_batch_returns_the_whole_batch() {
    let mut log = PartitionLog::in_memory(LogConfig::default());
    for _ in 0..4 {
        append1(&mut log, plain(5, 0)).unwrap();
    }
    for offset in 0..20 {
        let first = &parse(log.read(offset, 1).unwrap())[0];
        assert!(first.base_offset() <= offset && offset <= first.last_offset());
        assert_eq!(first.base_offset(), offset / 5 * 5);
    }
    assert!(log.read(20, 1000).unwrap().is_empty());
    assert_eq!(
        log.read(21, 1000).unwrap_err().error_code(),
        sharestream_protocol::ErrorCode::OFFSET_OUT_OF_RANGE
    );
    assert!(matches!(
        log.read(-1, 1000),
        Err(LogError::OffsetOutOfRange { .. })
    ));
}

#[test]
fn read_respects_max_bytes_but_returns_at_least_one_batch() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), LogConfig::default()).unwrap();
    let size = plain(2, 0).size();
    for _ in 0..10 {
        append1(&mut log, plain(2, 0)).unwrap();
    }
    assert_eq!(parse(log.read(0, 0).unwrap()).len(), 1);
    assert_eq!(parse(log.read(0, size - 1).unwrap()).len(), 1);
    assert_eq!(parse(log.read(0, size * 2 + size / 2).unwrap()).len(), 2);
    assert_eq!(parse(log.read(4, size * 3).unwrap()).len(), 3);
    assert_eq!(log.read(0, size * 3).unwrap().len(), size * 3);
}

#[test]
fn bounded_read_stops_below_the_upper_offset() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), config(400, 100)).unwrap();
    for _ in 0..10 {
        append1(&mut log, plain(2, 0)).unwrap();
    }
    let got = parse(log.read_bounded(0, 1 << 20, 8).unwrap());
    assert_eq!(got.len(), 4);
    assert_eq!(got.last().unwrap().last_offset(), 7);
    // The upper bound beats "at least one batch".
    assert!(log.read_bounded(8, 1 << 20, 8).unwrap().is_empty());
    assert!(log.read_bounded(8, 1 << 20, 9).unwrap().is_empty());
    assert_eq!(parse(log.read_bounded(8, 0, 10).unwrap()).len(), 1);
}

#[test]
fn sparse_index_finds_every_offset_across_segments_and_reopens() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(2_000, 300);
    let mut log = PartitionLog::open(dir.path(), cfg.clone()).unwrap();
    for i in 0..60 {
        append1(&mut log, plain(1 + (i % 4), 0)).unwrap();
    }
    let leo = log.log_end_offset();
    let counts = log.index_entry_counts();
    assert!(counts.iter().sum::<usize>() >= 10, "{counts:?}");
    let check = |log: &PartitionLog| {
        for offset in 0..leo {
            let first = &parse(log.read(offset, 1).unwrap())[0];
            assert!(
                first.base_offset() <= offset && offset <= first.last_offset(),
                "offset {offset} got batch {}..{}",
                first.base_offset(),
                first.last_offset()
            );
        }
    };
    check(&log);
    log.close().unwrap();
    let log = PartitionLog::open(dir.path(), cfg.clone()).unwrap();
    assert_eq!(log.index_entry_counts(), counts);
    check(&log);
    drop(log); // unclean: the active segment is verified and re-indexed
    let log = PartitionLog::open(dir.path(), cfg).unwrap();
    assert_eq!(log.recovery_report().recovered_segments, 1);
    assert_eq!(log.recovery_report().truncated_bytes, 0);
    assert_eq!(log.index_entry_counts(), counts);
    check(&log);
}

#[test]
fn offset_for_timestamp_finds_the_first_record_reaching_it() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(1_500, 200);
    let mut log = PartitionLog::open(dir.path(), cfg.clone()).unwrap();
    // Batch i holds timestamps 10*i .. 10*i+2; batch 7 goes back in time.
    for i in 0..40i64 {
        let ts = if i == 7 { 5 } else { 10 * i };
        append1(&mut log, plain(3, ts)).unwrap();
    }
    let check = |log: &PartitionLog| {
        let found = log.offset_for_timestamp(0).unwrap().unwrap();
        assert_eq!((found.offset, found.timestamp), (0, 0));
        // Inside batch 10 (offsets 30..32, timestamps 100..102): the record.
        let found = log.offset_for_timestamp(101).unwrap().unwrap();
        assert_eq!((found.offset, found.timestamp), (31, 101));
        let found = log.offset_for_timestamp(103).unwrap().unwrap();
        assert_eq!((found.offset, found.timestamp), (33, 110));
        let found = log.offset_for_timestamp(392).unwrap().unwrap();
        assert_eq!((found.offset, found.timestamp), (39 * 3 + 2, 392));
        assert_eq!(log.offset_for_timestamp(393).unwrap(), None);
        let max = log.max_timestamp_offset().unwrap().unwrap();
        assert_eq!((max.offset, max.timestamp), (39 * 3 + 2, 392));
    };
    check(&log);
    log.close().unwrap();
    check(&PartitionLog::open(dir.path(), cfg).unwrap());
}

/// Two records of one batch, far apart in time: the lookup of the later
/// timestamp names the second record, not the batch.
fn two_timestamps(first: i64, second: i64) -> RecordBatchView {
    use sharestream_protocol::records::{BatchSpec, Record as OurRecord, encode_batch};
    let v = || Some(Bytes::from_static(b"v"));
    let mut wire = encode_batch(
        &BatchSpec::default(),
        &[
            OurRecord::new(0, first, None, v()),
            OurRecord::new(1, second, None, v()),
        ],
    )
    .unwrap();
    let b = RecordBatchView::split_from(&mut wire).unwrap().unwrap();
    assert!(wire.is_empty(), "one batch holds both records");
    b
}

#[test]
fn timestamp_lookup_is_per_record_within_a_batch() {
    let mut log = PartitionLog::in_memory(LogConfig::default());
    append1(&mut log, two_timestamps(1234, 999_999_999_999)).unwrap();
    let hit = |ts| {
        log.offset_for_timestamp(ts)
            .unwrap()
            .map(|x| (x.offset, x.timestamp))
    };
    assert_eq!(hit(999_999_999_999), Some((1, 999_999_999_999)));
    assert_eq!(hit(1235), Some((1, 999_999_999_999)));
    assert_eq!(hit(1234), Some((0, 1234)));
    assert_eq!(hit(1_000_000_000_000), None);
    let max = log.max_timestamp_offset().unwrap().unwrap();
    assert_eq!((max.offset, max.timestamp), (1, 999_999_999_999));
    // A max timestamp earlier in the log than the last record.
    append1(&mut log, plain(2, 50)).unwrap();
    let max = log.max_timestamp_offset().unwrap().unwrap();
    assert_eq!(max.offset, 1);
    assert_eq!(
        PartitionLog::in_memory(LogConfig::default())
            .max_timestamp_offset()
            .unwrap(),
        None
    );
}

#[test]
fn delete_records_moves_the_start_durably_and_drops_whole_segments() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(600, 100);
    let mut log = PartitionLog::open(dir.path(), cfg.clone()).unwrap();
    for i in 0..20 {
        append1(&mut log, plain(3, 1_000 + i)).unwrap();
    }
    let segments_before = log.segment_count();
    assert!(segments_before > 3, "the test needs several segments");
    // Above the high watermark, and negative other than -1: out of range.
    for bad in [61, -2] {
        assert_eq!(
            log.delete_records_before(bad).unwrap_err().error_code(),
            sharestream_protocol::ErrorCode::OFFSET_OUT_OF_RANGE
        );
    }
    assert_eq!(log.log_start_offset(), 0);
    // Inside a batch: the start is exactly that offset.
    assert_eq!(log.delete_records_before(31).unwrap(), 31);
    assert!(log.segment_count() < segments_before);
    assert!(log.segment_base_offsets()[0] <= 31);
    // Lower than the start: nothing changes.
    assert_eq!(log.delete_records_before(10).unwrap(), 31);
    // Reads below the start are out of range; at it, the batch holding it.
    assert_eq!(
        log.read(30, 1 << 20).unwrap_err().error_code(),
        sharestream_protocol::ErrorCode::OFFSET_OUT_OF_RANGE
    );
    let first = read_all(&log, 31);
    assert_eq!(first[0].base_offset(), 30);
    // Timestamp lookups skip records below the start.
    let found = log.offset_for_timestamp(0).unwrap().unwrap();
    assert_eq!(found.offset, 31);
    // Survives an unclean restart.
    drop(log);
    let mut log = PartitionLog::open(dir.path(), cfg.clone()).unwrap();
    assert_eq!(log.log_start_offset(), 31);
    assert_eq!(log.log_end_offset(), 60);
    // -1 means the high watermark.
    assert_eq!(log.delete_records_before(-1).unwrap(), 60);
    log.close().unwrap();
    let log = PartitionLog::open(dir.path(), cfg).unwrap();
    assert_eq!(log.log_start_offset(), 60);
    assert!(log.read(60, 100).unwrap().is_empty());
}

#[test]
fn retention_deletes_old_and_excess_closed_segments_only() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), config(600, 100)).unwrap();
    for i in 0..20 {
        append1(&mut log, plain(3, 1_000 * i)).unwrap();
    }
    let segments = log.segment_count();
    assert!(segments > 3);
    // Nothing is old enough or too big.
    let out = log.enforce_retention(20_000, 100_000, -1).unwrap();
    assert_eq!(out.deleted_segments, 0);
    assert_eq!(log.log_start_offset(), 0);
    // Time: segments whose newest record is more than 10 s old at t=25 s.
    // Record o has timestamp 1000 * (o / 3) + o % 3; a closed segment's
    // newest record is the one before the next segment's base.
    let ts_of = |o: i64| 1_000 * (o / 3) + o % 3;
    let bases = log.segment_base_offsets();
    let expected_start = bases
        .windows(2)
        .find(|w| 25_000 - ts_of(w[1] - 1) <= 10_000)
        .map_or(*bases.last().unwrap(), |w| w[0]);
    assert!(expected_start > 0);
    let out = log.enforce_retention(25_000, 10_000, -1).unwrap();
    assert!(out.deleted_segments > 0);
    assert_eq!(log.log_start_offset(), expected_start);
    assert_eq!(out.log_start_offset, expected_start);
    assert_eq!(log.segment_base_offsets()[0], expected_start);
    let first = log.offset_for_timestamp(0).unwrap().unwrap();
    assert_eq!(
        (first.offset, first.timestamp),
        (expected_start, ts_of(expected_start))
    );
    // Size: keep at least 1 byte, i.e. only the active segment survives.
    log.enforce_retention(25_000, -1, 1).unwrap();
    assert_eq!(log.segment_count(), 1);
    assert_eq!(log.log_end_offset(), 60);
    drop(log);
    let log = PartitionLog::open(dir.path(), config(600, 100)).unwrap();
    assert_eq!(log.segment_count(), 1);
    assert_eq!(log.log_start_offset(), log.segment_base_offsets()[0]);
}

#[test]
fn torn_tail_is_cut_on_reopen_and_appends_continue() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), config(1_000, 100)).unwrap();
    for _ in 0..12 {
        append1(&mut log, plain(2, 0)).unwrap();
    }
    let active = active_log_file(dir.path(), &log);
    drop(log);
    // A crash mid-write: the first 40 bytes of the next batch.
    let partial = plain(2, 0).bytes().slice(..40);
    OpenOptions::new()
        .append(true)
        .open(&active)
        .unwrap()
        .write_all(&partial)
        .unwrap();
    let mut log = PartitionLog::open(dir.path(), config(1_000, 100)).unwrap();
    let report = log.recovery_report().clone();
    assert!(!report.clean_shutdown);
    assert_eq!(report.truncated_bytes, 40);
    assert_eq!(log.log_end_offset(), 24);
    assert_eq!(append1(&mut log, plain(2, 0)).unwrap().base_offset, 24);
    assert_eq!(read_all(&log, 0).len(), 13);
}

#[test]
fn garbage_tail_is_cut_on_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), LogConfig::default()).unwrap();
    for _ in 0..3 {
        append1(&mut log, plain(2, 0)).unwrap();
    }
    let active = active_log_file(dir.path(), &log);
    drop(log);
    let garbage: Vec<u8> = (0..500u32).map(|i| (i * 31 % 251) as u8).collect();
    OpenOptions::new()
        .append(true)
        .open(&active)
        .unwrap()
        .write_all(&garbage)
        .unwrap();
    let log = PartitionLog::open(dir.path(), LogConfig::default()).unwrap();
    assert_eq!(log.recovery_report().truncated_bytes, 500);
    assert_eq!(log.log_end_offset(), 6);
    assert_eq!(read_all(&log, 0).len(), 3);
}

#[test]
fn crc_corruption_in_the_tail_cuts_the_corrupt_batch() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), LogConfig::default()).unwrap();
    for _ in 0..5 {
        append1(&mut log, plain(2, 0)).unwrap();
    }
    let active = active_log_file(dir.path(), &log);
    let batch_size = plain(2, 0).size() as u64;
    drop(log);
    let mut bytes = fs::read(&active).unwrap();
    let last = bytes.len() - 3; // inside the last batch's records
    bytes[last] ^= 0x5a;
    fs::write(&active, &bytes).unwrap();
    let mut log = PartitionLog::open(dir.path(), LogConfig::default()).unwrap();
    assert_eq!(log.recovery_report().truncated_bytes, batch_size);
    assert_eq!(log.log_end_offset(), 8);
    assert_eq!(append1(&mut log, plain(2, 0)).unwrap().base_offset, 8);
    assert_eq!(read_all(&log, 0).len(), 5);
}

#[test]
fn missing_index_is_rebuilt_and_corruption_in_an_old_segment_drops_later_ones() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(600, 100);
    let mut log = PartitionLog::open(dir.path(), cfg.clone()).unwrap();
    for _ in 0..20 {
        append1(&mut log, plain(2, 0)).unwrap();
    }
    let bases = log.segment_base_offsets();
    assert!(bases.len() >= 4);
    let counts = log.index_entry_counts();
    log.close().unwrap();

    fs::remove_file(dir.path().join(format!("{:020}.index", bases[1]))).unwrap();
    let log = PartitionLog::open(dir.path(), cfg.clone()).unwrap();
    assert_eq!(log.recovery_report().recovered_segments, 1);
    assert_eq!(log.index_entry_counts(), counts);
    assert_eq!(read_all(&log, 0).len(), 20);
    log.close().unwrap();

    // Corrupt the second segment and lose its index: it is cut at the bad
    // batch, and the segments after it go.
    let seg1 = dir.path().join(format!("{:020}.log", bases[1]));
    let mut bytes = fs::read(&seg1).unwrap();
    let at = bytes.len() - 2;
    bytes[at] ^= 0xff;
    fs::write(&seg1, &bytes).unwrap();
    fs::remove_file(dir.path().join(format!("{:020}.index", bases[1]))).unwrap();
    let log = PartitionLog::open(dir.path(), cfg).unwrap();
    let report = log.recovery_report();
    assert_eq!(report.deleted_segments, bases.len() - 2);
    assert_eq!(log.segment_count(), 2);
    let batches = read_all(&log, 0);
    assert_eq!(
        log.log_end_offset(),
        batches.last().unwrap().last_offset() + 1
    );
    assert!(log.log_end_offset() < bases[2]);
    for base in &bases[2..] {
        assert!(!dir.path().join(format!("{base:020}.log")).exists());
    }
}

#[test]
fn restart_without_close_keeps_every_batch_and_still_deduplicates() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(700, 100);
    let mut log = PartitionLog::open(dir.path(), cfg.clone()).unwrap();
    let mut acked = Vec::new();
    for i in 0..15 {
        acked.push(append1(&mut log, idem(2, 42, 0, 2 * i)).unwrap());
    }
    assert!(log.segment_count() > 1);
    drop(log); // crash: no close, no final snapshot
    let mut log = PartitionLog::open(dir.path(), cfg.clone()).unwrap();
    let report = log.recovery_report().clone();
    assert!(!report.clean_shutdown);
    assert!(
        report.snapshot_offset.is_some(),
        "a snapshot is taken at roll"
    );
    assert!(report.replayed_batches > 0);
    assert_eq!(log.log_end_offset(), 30);
    assert_eq!(read_all(&log, 0).len(), 15);
    // The producer retries its last batch: the original offsets come back.
    let retry = append1(&mut log, idem(2, 42, 0, 28)).unwrap();
    assert!(retry.duplicate);
    assert_eq!(
        (retry.base_offset, retry.last_offset),
        (acked[14].base_offset, acked[14].last_offset)
    );
    assert_eq!(log.log_end_offset(), 30);
    let next = append1(&mut log, idem(2, 42, 0, 30)).unwrap();
    assert_eq!(next.base_offset, 30);

    // Without any snapshot the whole log is replayed.
    drop(log);
    for entry in fs::read_dir(dir.path()).unwrap() {
        let p = entry.unwrap().path();
        if p.extension().is_some_and(|e| e == "snapshot") {
            fs::remove_file(p).unwrap();
        }
    }
    let mut log = PartitionLog::open(dir.path(), cfg).unwrap();
    assert_eq!(log.recovery_report().snapshot_offset, None);
    assert_eq!(log.recovery_report().replayed_batches, 16);
    assert!(append1(&mut log, idem(2, 42, 0, 30)).unwrap().duplicate);
}

#[test]
fn clean_close_reopens_without_replay() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), LogConfig::default()).unwrap();
    append1(&mut log, idem(3, 7, 1, 0)).unwrap();
    append1(&mut log, txn(1, 8, 0, 0)).unwrap();
    let state = log.producer_state().clone();
    log.close().unwrap();
    assert!(dir.path().join(CLEAN_SHUTDOWN_FILE).exists());
    let log = PartitionLog::open(dir.path(), LogConfig::default()).unwrap();
    let report = log.recovery_report();
    assert!(report.clean_shutdown);
    assert_eq!(report.recovered_segments, 0);
    assert_eq!(report.snapshot_offset, Some(4));
    assert_eq!(report.replayed_batches, 0);
    assert_eq!(log.producer_state(), &state);
    assert_eq!(log.last_stable_offset(), 3);
    assert!(!dir.path().join(CLEAN_SHUTDOWN_FILE).exists());
}

#[test]
fn duplicates_of_the_last_five_batches_return_original_offsets() {
    let mut log = PartitionLog::in_memory(LogConfig::default());
    let mut infos = Vec::new();
    for i in 0..7 {
        infos.push(append1(&mut log, idem(3, 1, 0, 3 * i)).unwrap());
    }
    for (i, original) in infos.iter().enumerate().skip(2) {
        let dup = append1(&mut log, idem(3, 1, 0, 3 * i as i32)).unwrap();
        assert!(dup.duplicate);
        assert_eq!(dup.base_offset, original.base_offset);
        assert_eq!(dup.last_offset, original.last_offset);
    }
    assert_eq!(log.log_end_offset(), 21);
    // Older than the cache: out of order, as in Kafka.
    let err = append1(&mut log, idem(3, 1, 0, 3)).unwrap_err();
    assert_eq!(
        err.error_code(),
        sharestream_protocol::ErrorCode::OUT_OF_ORDER_SEQUENCE_NUMBER
    );
    // Same first sequence but another last sequence is not a duplicate.
    assert!(append1(&mut log, idem(2, 1, 0, 18)).is_err());
}

#[test]
fn sequence_gaps_are_out_of_order() {
    let mut log = PartitionLog::in_memory(LogConfig::default());
    append1(&mut log, idem(2, 5, 0, 0)).unwrap();
    let err = append1(&mut log, idem(2, 5, 0, 3)).unwrap_err();
    assert!(matches!(
        err,
        LogError::Producer(ProducerStateError::OutOfOrderSequence {
            first_seq: 3,
            last_seq: 1,
            ..
        })
    ));
    assert_eq!(log.log_end_offset(), 2);
    append1(&mut log, idem(2, 5, 0, 2)).unwrap();
    // An unknown producer may start anywhere (its state may have expired).
    append1(&mut log, idem(1, 6, 4, 17)).unwrap();
    // Sequences wrap from i32::MAX to 0.
    append1(&mut log, idem(1, 9, 0, i32::MAX)).unwrap();
    append1(&mut log, idem(1, 9, 0, 0)).unwrap();
}

#[test]
fn older_epochs_are_fenced_and_new_epochs_start_at_zero() {
    let mut log = PartitionLog::in_memory(LogConfig::default());
    append1(&mut log, idem(1, 3, 5, 0)).unwrap();
    append1(&mut log, idem(1, 3, 5, 1)).unwrap();
    let err = append1(&mut log, idem(1, 3, 4, 2)).unwrap_err();
    assert_eq!(
        err.error_code(),
        sharestream_protocol::ErrorCode::INVALID_PRODUCER_EPOCH
    );
    // A bumped epoch must restart the sequence.
    let err = append1(&mut log, idem(1, 3, 6, 2)).unwrap_err();
    assert_eq!(
        err.error_code(),
        sharestream_protocol::ErrorCode::OUT_OF_ORDER_SEQUENCE_NUMBER
    );
    append1(&mut log, idem(1, 3, 6, 0)).unwrap();
    assert_eq!(log.producer_state().entry(3).unwrap().epoch, 6);
    // Now epoch 5 is fenced too, even for a former duplicate.
    assert!(append1(&mut log, idem(1, 3, 5, 1)).is_err());
    assert_eq!(log.log_end_offset(), 3);
}

#[test]
fn a_rejected_append_writes_nothing() {
    let mut log = PartitionLog::in_memory(LogConfig::default());
    append1(&mut log, idem(1, 3, 0, 0)).unwrap();
    // The second batch is out of order: neither is written.
    let err = log
        .append(&[idem(1, 3, 0, 1), idem(1, 3, 0, 5)], opts())
        .unwrap_err();
    assert!(matches!(err, LogError::Producer(_)));
    assert_eq!(log.log_end_offset(), 1);
    assert_eq!(log.producer_state().entry(3).unwrap().last_seq(), 0);
    let ok = log
        .append(&[idem(1, 3, 0, 1), idem(2, 3, 0, 2)], opts())
        .unwrap();
    assert_eq!((ok.base_offset, ok.last_offset), (1, 3));
}

#[test]
fn lso_stops_at_an_open_transaction_and_moves_after_the_marker() {
    let mut log = PartitionLog::in_memory(LogConfig::default());
    append1(&mut log, plain(2, 0)).unwrap(); // 0..1
    append1(&mut log, txn(2, 10, 0, 0)).unwrap(); // 2..3 open txn of 10
    append1(&mut log, plain(1, 0)).unwrap(); // 4
    append1(&mut log, txn(1, 11, 0, 0)).unwrap(); // 5 open txn of 11
    append1(&mut log, txn(1, 10, 0, 2)).unwrap(); // 6
    assert_eq!(log.log_end_offset(), 7);
    assert_eq!(log.last_stable_offset(), 2);
    let committed = parse(
        log.read_bounded(0, 1 << 20, log.last_stable_offset())
            .unwrap(),
    );
    assert_eq!(committed.len(), 1);

    let info = log
        .append_marker(&marker(10, 0, true, 0), opts(), 0)
        .unwrap();
    assert_eq!(info.base_offset, 7);
    assert_eq!(
        info.completed_txn,
        Some(CompletedTxn {
            producer_id: 10,
            first_offset: 2,
            last_offset: 7,
            aborted: false
        })
    );
    assert_eq!(log.last_stable_offset(), 5);
    log.append_marker(&marker(11, 0, false, 0), opts(), 0)
        .unwrap();
    assert_eq!(log.last_stable_offset(), 9);
    assert_eq!(log.last_stable_offset(), log.high_watermark());
    // Markers stay in the data.
    let all = read_all(&log, 0);
    assert!(all[5].is_control() && all[6].is_control());
    // A marker for a producer with nothing open here completes nothing.
    let info = log
        .append_marker(&marker(12, 0, true, 0), opts(), 0)
        .unwrap();
    assert_eq!(info.completed_txn, None);
    assert_eq!(log.last_stable_offset(), 10);
}

#[test]
fn aborted_transaction_index_answers_overlaps() {
    let mut log = PartitionLog::in_memory(LogConfig::default());
    append1(&mut log, txn(2, 1, 0, 0)).unwrap(); // 0..1
    append1(&mut log, txn(2, 2, 0, 0)).unwrap(); // 2..3
    log.append_marker(&marker(1, 0, false, 0), opts(), 0)
        .unwrap(); // 4 abort pid 1 [0, 4]
    append1(&mut log, txn(1, 3, 0, 0)).unwrap(); // 5
    log.append_marker(&marker(2, 0, true, 0), opts(), 0)
        .unwrap(); // 6 commit pid 2
    log.append_marker(&marker(3, 0, false, 0), opts(), 0)
        .unwrap(); // 7 abort pid 3 [5, 7]
    append1(&mut log, txn(1, 1, 0, 2)).unwrap(); // 8 pid 1 again
    log.append_marker(&marker(1, 0, false, 0), opts(), 0)
        .unwrap(); // 9 abort pid 1 [8, 9]
    let a = |pid, first, last| AbortedTxn {
        producer_id: pid,
        first_offset: first,
        last_offset: last,
    };
    assert_eq!(
        log.aborted_transactions(0, 10),
        vec![a(1, 0, 4), a(3, 5, 7), a(1, 8, 9)]
    );
    assert_eq!(log.aborted_transactions(0, 5), vec![a(1, 0, 4)]);
    assert_eq!(log.aborted_transactions(5, 6), vec![a(3, 5, 7)]);
    assert_eq!(log.aborted_transactions(4, 5), vec![a(1, 0, 4)]);
    assert_eq!(log.aborted_transactions(8, 10), vec![a(1, 8, 9)]);
    assert!(log.aborted_transactions(10, 10).is_empty());
}

#[test]
fn transactional_state_and_aborted_index_survive_an_unclean_restart() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(500, 100);
    let mut log = PartitionLog::open(dir.path(), cfg.clone()).unwrap();
    append1(&mut log, txn(2, 1, 0, 0)).unwrap(); // 0..1
    log.append_marker(&marker(1, 0, false, 0), opts(), 0)
        .unwrap(); // 2
    for i in 0..6 {
        append1(&mut log, idem(2, 9, 0, 2 * i)).unwrap(); // 3..14, rolls
    }
    append1(&mut log, txn(1, 2, 0, 0)).unwrap(); // 15 open
    append1(&mut log, plain(1, 0)).unwrap(); // 16
    assert!(log.segment_count() > 1);
    let state = log.producer_state().clone();
    drop(log);
    let mut log = PartitionLog::open(dir.path(), cfg).unwrap();
    assert_eq!(log.producer_state(), &state);
    assert_eq!(log.last_stable_offset(), 15);
    assert_eq!(
        log.aborted_transactions(0, 15),
        vec![AbortedTxn {
            producer_id: 1,
            first_offset: 0,
            last_offset: 2
        }]
    );
    log.append_marker(&marker(2, 0, true, 0), opts(), 0)
        .unwrap();
    assert_eq!(log.last_stable_offset(), 18);
}

#[test]
fn non_transactional_batch_inside_a_transaction_is_invalid_txn_state() {
    let mut log = PartitionLog::in_memory(LogConfig::default());
    append1(&mut log, txn(1, 4, 0, 0)).unwrap();
    let err = append1(&mut log, idem(1, 4, 0, 1)).unwrap_err();
    assert_eq!(
        err.error_code(),
        sharestream_protocol::ErrorCode::INVALID_TXN_STATE
    );
    assert_eq!(log.log_end_offset(), 1);
}

#[test]
fn marker_epoch_and_coordinator_epoch_checks() {
    let mut log = PartitionLog::in_memory(LogConfig::default());
    append1(&mut log, txn(1, 4, 3, 0)).unwrap();
    // Legacy: a marker from an older epoch is fenced.
    let err = log
        .append_marker(&marker(4, 2, true, 0), opts(), 1)
        .unwrap_err();
    assert_eq!(
        err.error_code(),
        sharestream_protocol::ErrorCode::INVALID_PRODUCER_EPOCH
    );
    // TV2: the marker must carry the bumped epoch.
    assert!(
        log.append_marker(&marker(4, 3, true, 0), opts(), 2)
            .is_err()
    );
    log.append_marker(&marker(4, 4, true, 5), opts(), 2)
        .unwrap();
    assert_eq!(log.last_stable_offset(), 2);
    // A retried TV2 marker at the same epoch after the end is accepted.
    log.append_marker(&marker(4, 4, true, 5), opts(), 2)
        .unwrap();
    // An older coordinator is fenced.
    let err = log
        .append_marker(&marker(4, 5, false, 4), opts(), 2)
        .unwrap_err();
    assert_eq!(
        err.error_code(),
        sharestream_protocol::ErrorCode::TRANSACTION_COORDINATOR_FENCED
    );
    // The next transaction at the bumped epoch starts at sequence 0.
    append1(&mut log, txn(1, 4, 4, 0)).unwrap();
}

#[test]
fn control_batches_from_clients_and_oversized_batches_are_refused() {
    let mut log = PartitionLog::in_memory(LogConfig {
        max_message_bytes: 200,
        ..LogConfig::default()
    });
    let err = append1(&mut log, marker(1, 0, true, 0)).unwrap_err();
    assert!(matches!(err, LogError::InvalidRecord(_)));
    let err = append1(&mut log, plain(10, 0)).unwrap_err();
    assert_eq!(
        err.error_code(),
        sharestream_protocol::ErrorCode::MESSAGE_TOO_LARGE
    );
    assert!(log.append_marker(&plain(1, 0), opts(), 0).is_err());
    assert_eq!(log.log_end_offset(), 0);
}

#[test]
fn log_append_time_rewrites_the_timestamp_and_crc() {
    let mut log = PartitionLog::in_memory(LogConfig::default());
    let info = log
        .append(
            &[plain(2, 10)],
            AppendOptions {
                log_append_time: true,
                ..opts()
            },
        )
        .unwrap();
    assert_eq!(info.log_append_time, 77_000);
    let b = &read_all(&log, 0)[0];
    assert!(b.is_log_append_time());
    assert_eq!(b.max_timestamp(), 77_000);
}

#[test]
fn in_memory_log_rolls_and_reads() {
    let mut log = PartitionLog::in_memory(config(300, 50));
    for _ in 0..20 {
        append1(&mut log, plain(1, 0)).unwrap();
    }
    assert!(log.segment_count() > 5);
    assert_eq!(read_all(&log, 0).len(), 20);
    assert_eq!(parse(log.read(13, 1).unwrap())[0].base_offset(), 13);
    assert!(log.dir().is_none());
    log.close().unwrap();
}

#[test]
fn interval_fsync_is_driven_by_flush_if_due() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = LogConfig {
        fsync: FsyncPolicy::Interval(Duration::from_secs(10)),
        ..LogConfig::default()
    };
    let mut log = PartitionLog::open(dir.path(), cfg).unwrap();
    let t0 = Instant::now();
    assert!(!log.flush_if_due(t0).unwrap(), "nothing to flush");
    assert_eq!(log.next_flush_due(t0), None);
    append1(&mut log, plain(1, 0)).unwrap();
    assert!(log.has_unflushed_data());
    assert!(log.flush_if_due(t0).unwrap());
    append1(&mut log, plain(1, 0)).unwrap();
    assert_eq!(log.next_flush_due(t0), Some(t0 + Duration::from_secs(10)));
    assert!(!log.flush_if_due(t0 + Duration::from_secs(5)).unwrap());
    assert!(log.has_unflushed_data());
    assert!(log.flush_if_due(t0 + Duration::from_secs(10)).unwrap());
    assert!(!log.has_unflushed_data());

    let mut never = PartitionLog::in_memory(LogConfig {
        fsync: FsyncPolicy::Never,
        ..LogConfig::default()
    });
    append1(&mut never, plain(1, 0)).unwrap();
    assert!(!never.flush_if_due(t0).unwrap());
    assert!(never.has_unflushed_data());
    never.flush().unwrap();
    assert!(!never.has_unflushed_data());

    let mut every = PartitionLog::in_memory(LogConfig::default());
    append1(&mut every, plain(1, 0)).unwrap();
    assert!(!every.has_unflushed_data());
}

#[test]
fn producer_snapshot_round_trips_and_rejects_corruption() {
    let mut log = PartitionLog::in_memory(LogConfig::default());
    append1(&mut log, idem(2, 1, 0, 0)).unwrap();
    append1(&mut log, txn(2, 2, 3, 0)).unwrap();
    log.append_marker(&marker(2, 3, false, 1), opts(), 0)
        .unwrap();
    append1(&mut log, txn(1, 5, 0, 0)).unwrap();
    let state = log.producer_state();
    let bytes = state.encode_snapshot(log.log_end_offset());
    let (offset, decoded) = ProducerStateManager::decode_snapshot(&bytes).unwrap();
    assert_eq!(offset, 6);
    assert_eq!(&decoded, state);
    assert_eq!(decoded.first_unstable_offset(), Some(5));
    let mut bad = bytes.clone();
    let last = bad.len() - 1;
    bad[last] ^= 1;
    assert!(ProducerStateManager::decode_snapshot(&bad).is_err());
    assert!(ProducerStateManager::decode_snapshot(&bytes[..bytes.len() - 4]).is_err());
}

#[test]
fn marker_parsing_reads_type_and_coordinator_epoch() {
    let m = parse_end_txn_marker(&marker(1, 0, true, 17)).unwrap();
    assert_eq!(m.control_type, ControlType::Commit);
    assert_eq!(m.coordinator_epoch, 17);
    let m = parse_end_txn_marker(&marker(1, 0, false, 2)).unwrap();
    assert_eq!(m.control_type, ControlType::Abort);
    assert!(parse_end_txn_marker(&plain(1, 0)).is_err());
}

/// The produce path runs appends inline unless they may wait on the disk:
/// an fsync per batch, or a segment roll (which flushes and syncs).
#[test]
fn append_may_sync_only_for_every_batch_fsync_or_a_roll() {
    let dir = tempfile::tempdir().unwrap();
    let never = LogConfig {
        fsync: FsyncPolicy::Never,
        ..config(1_000, 150)
    };
    let mut log = PartitionLog::open(dir.path().join("never"), never.clone()).unwrap();
    let b = plain(3, 1_000);
    let size = b.size() as u64;
    // An empty active segment takes any batch without rolling.
    assert!(!log.append_may_sync(10_000));
    append1(&mut log, b).unwrap();
    assert!(!log.append_may_sync(size));
    assert!(log.append_may_sync(1_000));
    let every = LogConfig {
        fsync: FsyncPolicy::EveryBatch,
        ..config(1_000, 150)
    };
    let log = PartitionLog::open(dir.path().join("every"), every).unwrap();
    assert!(log.append_may_sync(size));
    let mut mem = PartitionLog::in_memory(never);
    append1(&mut mem, plain(3, 1_000)).unwrap();
    assert!(!mem.append_may_sync(1_000));
}

fn never_fsync(segment_bytes: u64) -> LogConfig {
    LogConfig {
        fsync: FsyncPolicy::Never,
        ..config(segment_bytes, 100)
    }
}

fn recovery_point(dir: &Path) -> Option<i64> {
    fs::read(dir.join(RECOVERY_POINT_FILE))
        .ok()
        .map(|b| i64::from_be_bytes(b.try_into().unwrap()))
}

/// Without an fsync per batch, a rolled segment is flushed on a thread of
/// its own. The recovery point stays at it until that flush is done, and
/// moves past it after; `flush` waits for it.
#[test]
fn a_rolled_segment_is_flushed_in_the_background_behind_the_recovery_point() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), never_fsync(1_000)).unwrap();
    assert_eq!(recovery_point(dir.path()), None, "nothing rolled yet");
    while log.segment_base_offsets().len() < 2 {
        append1(&mut log, plain(2, 0)).unwrap();
    }
    let second = log.segment_base_offsets()[1];
    // At the roll the first segment is not known durable yet; its flush may
    // be done by now, and then the point is past it.
    let rp = recovery_point(dir.path()).expect("written at the first roll");
    assert!(rp == 0 || rp == second, "recovery point {rp}");
    log.flush().unwrap();
    assert_eq!(recovery_point(dir.path()), Some(second));
    while log.segment_base_offsets().len() < 4 {
        append1(&mut log, plain(2, 0)).unwrap();
    }
    log.flush().unwrap();
    let bases = log.segment_base_offsets();
    assert_eq!(recovery_point(dir.path()), Some(bases[3]));
    // Dropped without close: an unclean open verifies the active segment
    // only, every rolled one being behind the recovery point.
    let end = log.log_end_offset();
    drop(log);
    let log = PartitionLog::open(dir.path(), never_fsync(1_000)).unwrap();
    assert_eq!(log.recovery_report().recovered_segments, 1);
    assert_eq!(log.log_end_offset(), end);
}

/// A crash before the flush of a rolled segment finished: the recovery
/// point still names it, so the unclean open verifies it and what follows,
/// and cuts a torn tail there (the later segments go, as offsets must stay
/// contiguous). Then the point moves to the active segment.
#[test]
fn an_unclean_open_verifies_every_segment_from_the_recovery_point() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), never_fsync(1_000)).unwrap();
    while log.segment_base_offsets().len() < 3 {
        append1(&mut log, plain(2, 0)).unwrap();
    }
    log.flush().unwrap();
    let bases = log.segment_base_offsets();
    drop(log);
    // As if the flush of the second segment had not happened: the point
    // goes back to it, and a page of its last batch never reached the disk
    // (zeros where its last bytes were; the length and index still agree,
    // so only the CRC tells).
    write_atomic(
        &dir.path().join(RECOVERY_POINT_FILE),
        &bases[1].to_be_bytes(),
    )
    .unwrap();
    let second = dir.path().join(format!("{:020}.log", bases[1]));
    let len = fs::metadata(&second).unwrap().len();
    {
        use std::os::unix::fs::FileExt;
        let f = OpenOptions::new().write(true).open(&second).unwrap();
        f.write_all_at(&[0u8; 10], len - 10).unwrap();
    }
    let mut log = PartitionLog::open(dir.path(), never_fsync(1_000)).unwrap();
    let report = log.recovery_report().clone();
    assert!(!report.clean_shutdown);
    assert_eq!(
        report.recovered_segments, 1,
        "the second, cut: the third deleted"
    );
    assert!(report.truncated_bytes > 0);
    assert_eq!(report.deleted_segments, 1);
    assert_eq!(log.segment_base_offsets(), bases[..2].to_vec());
    assert_eq!(recovery_point(dir.path()), Some(bases[1]));
    // The log goes on from its recovered end.
    let end = log.log_end_offset();
    assert!(end < bases[2]);
    assert_eq!(append1(&mut log, plain(2, 0)).unwrap().base_offset, end);
    assert_eq!(read_all(&log, 0).last().unwrap().last_offset(), end + 1);
}

/// An interval flush taken out of the log: the log counts its data as
/// flushed and takes appends while the fsync runs elsewhere; a failed
/// fsync makes the data unflushed and the flush due again.
#[test]
fn an_interval_flush_runs_outside_the_log_and_a_failure_makes_it_due_again() {
    let dir = tempfile::tempdir().unwrap();
    let interval = Duration::from_secs(10);
    let cfg = LogConfig {
        fsync: FsyncPolicy::Interval(interval),
        ..LogConfig::default()
    };
    let mut log = PartitionLog::open(dir.path(), cfg).unwrap();
    let t0 = Instant::now();
    assert!(log.take_due_flush(t0).unwrap().is_none(), "nothing written");
    append1(&mut log, plain(1, 0)).unwrap();
    let due = log.take_due_flush(t0).unwrap().expect("due");
    assert!(!log.has_unflushed_data());
    assert!(log.take_due_flush(t0).unwrap().is_none(), "taken once");
    // Appends go on while the fsync runs.
    append1(&mut log, plain(1, 0)).unwrap();
    due.run().unwrap();
    assert!(log.has_unflushed_data(), "the later append is still owed");
    assert!(log.take_due_flush(t0 + interval / 2).unwrap().is_none());
    let due = log.take_due_flush(t0 + interval).unwrap().expect("due");
    drop(due);
    log.due_flush_failed();
    assert!(log.has_unflushed_data());
    assert_eq!(log.next_flush_due(t0 + interval), Some(t0 + 2 * interval));
}
