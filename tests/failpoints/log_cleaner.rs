//! A kill at any point of a cleaning leaves the old segment or the
//! cleaned one, never a mix: the cleaner writes the new segment beside
//! the old, then swaps it in by renames. Failpoints stop a cleaning
//! before the swap and in its middle; dropping the log without closing
//! it is the kill; reopening must read either the old records or the
//! cleaned ones, and a later cleaning finishes the job.

use bytes::Bytes;
use sharestream::broker::log::{AppendOptions, CleanerConfig, LogConfig, PartitionLog};
use sharestream::failpoints;
use sharestream::protocol::records::{
    BatchSpec, DEFAULT_MAX_DECOMPRESSED, Record, RecordBatchView, encode_batch,
};

use crate::SERIAL;

fn put(l: &mut PartitionLog, now_ms: i64, key: &str, value: &str) {
    let mut b = encode_batch(
        &BatchSpec::default(),
        &[Record::new(
            0,
            now_ms,
            Some(Bytes::from(key.to_string())),
            Some(Bytes::from(value.to_string())),
        )],
    )
    .unwrap();
    let v = RecordBatchView::split_from(&mut b).unwrap().unwrap();
    let opts = AppendOptions {
        now_ms,
        log_append_time: false,
        leader_epoch: 0,
    };
    l.append(&[v], opts).unwrap();
}

fn contents(l: &PartitionLog) -> Vec<(i64, String)> {
    let bytes = l.read(0, 1 << 20).unwrap();
    let mut out = Vec::new();
    for v in RecordBatchView::parse_all(bytes).unwrap() {
        for r in v.records(DEFAULT_MAX_DECOMPRESSED).unwrap() {
            out.push((
                r.offset(v.base_offset()),
                String::from_utf8(r.value.unwrap().to_vec()).unwrap(),
            ));
        }
    }
    out
}

fn config() -> LogConfig {
    LogConfig {
        segment_ms: Some(10),
        ..LogConfig::default()
    }
}

const EAGER: CleanerConfig = CleanerConfig {
    delete_retention_ms: 0,
    min_compaction_lag_ms: 0,
    max_compaction_lag_ms: i64::MAX,
    min_cleanable_dirty_ratio: 0.0,
};

#[tokio::test]
async fn a_kill_at_any_point_of_a_cleaning_leaves_the_old_or_the_cleaned_segment() {
    let _serial = SERIAL.lock().await;
    for point in ["log.clean.before_swap", "log.clean.mid_swap"] {
        let dir = tempfile::tempdir().unwrap();
        let mut l = PartitionLog::open(dir.path(), config()).unwrap();
        put(&mut l, 0, "a", "a1");
        put(&mut l, 0, "b", "b1");
        put(&mut l, 0, "a", "a2");
        put(&mut l, 10, "z", "z1");
        let old = contents(&l);
        let cleaned = vec![
            (1, "b1".to_string()),
            (2, "a2".to_string()),
            (3, "z1".to_string()),
        ];
        failpoints::arm(point, Some(1));
        let err = l
            .clean(100, EAGER)
            .expect_err("the failpoint stops the cleaning");
        failpoints::disarm(point);
        assert!(err.to_string().contains(point), "{err}");
        // The kill: no close, no clean-shutdown marker.
        drop(l);
        let mut l = PartitionLog::open(dir.path(), config()).unwrap();
        let seen = contents(&l);
        assert!(seen == old || seen == cleaned, "{point}: {seen:?}");
        let leftovers: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|f| f.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".tmp"))
            .collect();
        assert!(leftovers.is_empty(), "{point}: {leftovers:?}");
        // Appends continue, and the next cleaning finishes the job.
        put(&mut l, 20, "y", "y1");
        l.clean(200, EAGER).unwrap();
        let mut want = cleaned.clone();
        want.push((4, "y1".to_string()));
        assert_eq!(contents(&l), want, "{point}");
    }
}
