//! [`PartitionLog`]: the log of one topic-partition.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Instant;

use bytes::{Bytes, BytesMut};

use super::cleaner::{self, CleanInput, CleanOutcome, CleanerCheckpoint, CleanerConfig};
use super::control::parse_end_txn_marker;
use super::producer_state::{
    AbortedTxn, AppendCheck, BatchInfo, CompletedTxn, MarkerInfo, ProducerStateManager,
};
use super::segment::{BatchHeader, Segment};
use super::state_log::write_atomic;
use super::store::sync_dir;
use super::{FsyncPolicy, LogConfig, LogError};
use sharestream_protocol::records::RecordBatchView;
use sharestream_protocol::records::batch::{
    set_base_offset, set_log_append_time, set_partition_leader_epoch,
};

/// Written by [`PartitionLog::close`]; its presence at open means every
/// segment and the producer snapshot at the log end are complete.
pub const CLEAN_SHUTDOWN_FILE: &str = ".clean_shutdown";

/// The log start offset set by DeleteRecords (or retention), when it lies
/// above the first segment's base offset: 8 bytes, big-endian, replaced
/// atomically.
pub const LOG_START_OFFSET_FILE: &str = "log-start-offset";

/// The log cleaner's checkpoint: the first dirty offset and the next
/// delete horizon, 16 bytes, replaced atomically.
pub const CLEANER_CHECKPOINT_FILE: &str = "cleaner-checkpoint";

/// The recovery point: the base offset of the first segment that may not
/// be durable yet (8 bytes, big-endian, replaced atomically). Segments
/// below it were flushed; an unclean open verifies the segments from it
/// on. Absent: only the active segment (rolled segments were flushed at
/// roll before this file existed).
pub const RECOVERY_POINT_FILE: &str = "recovery-point";

/// Producer-state snapshots kept in the directory.
const SNAPSHOTS_KEPT: usize = 2;

/// An fsync of segment files handed out of the log, to run without its
/// lock: what an interval flush owes ([`PartitionLog::take_due_flush`]),
/// or a rolled segment's flush on its own thread.
#[derive(Debug)]
pub struct DueFlush {
    files: Vec<fs::File>,
}

impl DueFlush {
    /// fsyncs the segment's log and index: what was written when the
    /// flush was taken, and whatever was appended since.
    pub fn run(self) -> io::Result<()> {
        for f in &self.files {
            f.sync_data()?;
        }
        Ok(())
    }
}

/// The flush of a rolled segment, running on a thread of its own so that
/// the append that rolled does not wait for it.
#[derive(Debug)]
struct RolledFlush {
    /// The base offset of the segment that became active at the roll:
    /// the recovery point once the flush is done.
    next_base: i64,
    handle: std::thread::JoinHandle<io::Result<()>>,
}

fn read_recovery_point(dir: &Path) -> Result<Option<i64>, LogError> {
    match fs::read(dir.join(RECOVERY_POINT_FILE)) {
        Ok(b) if b.len() == 8 => Ok(Some(i64::from_be_bytes(b.try_into().expect("8 bytes")))),
        Ok(_) => {
            // Unreadable: verify from the first segment on.
            tracing::warn!(dir = %dir.display(), "ignoring an unreadable recovery point (every segment is verified)");
            Ok(Some(i64::MIN))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_err("reading the recovery point")(e)),
    }
}

fn write_recovery_point(dir: &Path, offset: i64) -> io::Result<()> {
    write_atomic(&dir.join(RECOVERY_POINT_FILE), &offset.to_be_bytes())
}

fn snapshot_file_name(offset: i64) -> String {
    format!("{offset:020}.snapshot")
}

fn io_err(context: &'static str) -> impl FnOnce(io::Error) -> LogError {
    move |source| LogError::Io { context, source }
}

/// How the broker appends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendOptions {
    /// Wall-clock time in milliseconds (LogAppendTime, marker timestamps).
    pub now_ms: i64,
    /// The topic uses `message.timestamp.type=LogAppendTime`: batches get
    /// `now_ms` as max timestamp and the attribute bit (CRC recomputed).
    pub log_append_time: bool,
    /// partitionLeaderEpoch written into each batch.
    pub leader_epoch: i32,
}

/// Result of an append, for the Produce / WriteTxnMarkers response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendInfo {
    /// Offset of the first record appended (the original one for a
    /// duplicate).
    pub base_offset: i64,
    /// Offset of the last record appended.
    pub last_offset: i64,
    /// The LogAppendTime given to the batches, or -1 for CreateTime topics
    /// (Produce's default).
    pub log_append_time: i64,
    /// The log start offset after the append.
    pub log_start_offset: i64,
    /// The batch was a retry of one already in the log; nothing was
    /// written. Kafka answers NONE with the original offsets.
    pub duplicate: bool,
    /// For a marker: the transaction it ended (None for an empty one).
    pub completed_txn: Option<CompletedTxn>,
}

/// Timestamp lookup result (ListOffsets).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimestampOffset {
    /// The timestamp of the record found.
    pub timestamp: i64,
    /// Its offset.
    pub offset: i64,
}

/// What [`PartitionLog::enforce_retention`] removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RetentionOutcome {
    /// Segments deleted.
    pub deleted_segments: usize,
    /// The log start offset afterwards.
    pub log_start_offset: i64,
}

/// What opening the log found and did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// The previous run ended with [`PartitionLog::close`].
    pub clean_shutdown: bool,
    /// Segments scanned with CRC verification.
    pub recovered_segments: usize,
    /// Bytes cut off (torn or corrupt tails).
    pub truncated_bytes: u64,
    /// Segments deleted because they followed a corrupt point.
    pub deleted_segments: usize,
    /// Offset of the producer snapshot loaded, if any.
    pub snapshot_offset: Option<i64>,
    /// Batches replayed into the producer state after the snapshot.
    pub replayed_batches: usize,
}

/// The log of one topic-partition. See the module docs of
/// [`crate::log`].
#[derive(Debug)]
pub struct PartitionLog {
    dir: Option<PathBuf>,
    config: LogConfig,
    /// Sorted by base offset; the last one is active. Never empty.
    segments: Vec<Segment>,
    producers: ProducerStateManager,
    unflushed: bool,
    last_flush: Option<Instant>,
    snapshot_offsets: Vec<i64>,
    recovery: RecoveryReport,
    /// First offset a reader may see: the first segment's base offset, or
    /// above it after DeleteRecords (KIP-107). Never above the log end.
    log_start: i64,
    /// The log cleaner's progress (compacted topics).
    cleaner: CleanerCheckpoint,
    /// Broker time of the first append to the active segment since it
    /// was created or the log opened (`segment.ms` rolls).
    active_since_ms: Option<i64>,
    /// The recovery point as last written ([`RECOVERY_POINT_FILE`]).
    recovery_point: Option<i64>,
    /// The flush of the last rolled segment, while it runs (at most one).
    rolled_flush: Option<RolledFlush>,
}

impl Drop for PartitionLog {
    /// Waits for the flush of a rolled segment: a log dropped and opened
    /// again (a restart in tests, a deleted topic's directory) never races
    /// with it.
    fn drop(&mut self) {
        if let Err(e) = self.finish_rolled_flush() {
            tracing::warn!(error = %e, "flushing a rolled segment failed");
        }
    }
}

impl PartitionLog {
    /// A log that lives in memory only (`--memory` mode).
    pub fn in_memory(config: LogConfig) -> Self {
        let config = config.normalized();
        let seg = Segment::create(None, 0, config.index_interval_bytes)
            .expect("memory segments do no I/O");
        PartitionLog {
            dir: None,
            config,
            segments: vec![seg],
            producers: ProducerStateManager::new(),
            unflushed: false,
            last_flush: None,
            snapshot_offsets: Vec::new(),
            recovery: RecoveryReport {
                clean_shutdown: true,
                ..Default::default()
            },
            log_start: 0,
            cleaner: CleanerCheckpoint::EMPTY,
            active_since_ms: None,
            recovery_point: None,
            rolled_flush: None,
        }
    }

    /// Opens (creating if needed) the log in `dir` and recovers it: after an
    /// unclean shutdown the active segment is CRC-verified and a torn or
    /// corrupt tail cut; any segment with a missing or inconsistent index
    /// is verified and its index rebuilt; the producer state is loaded from
    /// the newest usable snapshot and the batches after it are replayed.
    pub fn open(dir: impl AsRef<Path>, config: LogConfig) -> Result<Self, LogError> {
        let config = config.normalized();
        let dir = dir.as_ref().to_path_buf();
        fs::create_dir_all(&dir).map_err(io_err("creating the partition directory"))?;
        let marker = dir.join(CLEAN_SHUTDOWN_FILE);
        let clean = marker.exists();
        let mut bases = Vec::new();
        let mut snapshots = Vec::new();
        for entry in fs::read_dir(&dir).map_err(io_err("listing the partition directory"))? {
            let entry = entry.map_err(io_err("listing the partition directory"))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if let Some(stem) = name.strip_suffix(".log") {
                if let Ok(base) = stem.parse::<i64>() {
                    bases.push(base);
                }
            } else if let Some(stem) = name.strip_suffix(".snapshot") {
                if let Ok(off) = stem.parse::<i64>() {
                    snapshots.push(off);
                }
            } else if name.ends_with(".tmp") {
                let _ = fs::remove_file(entry.path());
            }
        }
        bases.sort_unstable();
        let recovery_point = read_recovery_point(&dir)?;
        let interval = config.index_interval_bytes;
        let mut report = RecoveryReport {
            clean_shutdown: clean,
            ..Default::default()
        };
        let mut segments = Vec::new();
        let mut needs = Vec::new();
        if bases.is_empty() {
            segments.push(
                Segment::create(Some(&dir), 0, interval).map_err(io_err("creating a segment"))?,
            );
            needs.push(false);
        } else {
            let last = bases.len() - 1;
            for (i, base) in bases.iter().enumerate() {
                let (seg, broken) =
                    Segment::open(&dir, *base, interval).map_err(io_err("opening a segment"))?;
                segments.push(seg);
                let maybe_torn = i == last || recovery_point.is_some_and(|rp| *base >= rp);
                needs.push(broken || (!clean && maybe_torn));
            }
        }
        let mut i = 0;
        while i < segments.len() {
            if needs[i] {
                let cut = segments[i]
                    .recover()
                    .map_err(io_err("recovering a segment"))?;
                report.recovered_segments += 1;
                if cut > 0 {
                    tracing::warn!(
                        dir = %dir.display(),
                        segment = segments[i].base_offset,
                        cut,
                        "cut a torn or corrupt log tail"
                    );
                    report.truncated_bytes += cut;
                    for later in segments.drain(i + 1..) {
                        later.delete().map_err(io_err("deleting a segment"))?;
                        report.deleted_segments += 1;
                    }
                    needs.truncate(i + 1);
                }
            }
            i += 1;
        }
        let mut log = PartitionLog {
            dir: Some(dir.clone()),
            config,
            segments,
            producers: ProducerStateManager::new(),
            unflushed: false,
            last_flush: None,
            snapshot_offsets: Vec::new(),
            recovery: RecoveryReport::default(),
            log_start: 0,
            cleaner: CleanerCheckpoint::EMPTY,
            active_since_ms: None,
            recovery_point,
            rolled_flush: None,
        };
        // Every segment before the active one is verified now; make them
        // durable before the recovery point says so.
        let active_base = log.active().base_offset;
        if let Some(rp) = log.recovery_point
            && rp < active_base
        {
            let n = log.segments.len();
            for seg in log.segments[..n - 1].iter().filter(|s| s.base_offset >= rp) {
                seg.flush()
                    .map_err(io_err("flushing a recovered segment"))?;
            }
            write_recovery_point(&dir, active_base)
                .map_err(io_err("writing the recovery point"))?;
            log.recovery_point = Some(active_base);
        }
        match fs::read(dir.join(CLEANER_CHECKPOINT_FILE)) {
            Ok(b) => match CleanerCheckpoint::decode(&b) {
                Some(c) => log.cleaner = c,
                None => {
                    tracing::warn!(dir = %dir.display(), "ignoring an unreadable cleaner checkpoint (the whole log counts as dirty)")
                }
            },
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_err("reading the cleaner checkpoint")(e)),
        }
        log.log_start = log.segments[0].base_offset;
        match fs::read(dir.join(LOG_START_OFFSET_FILE)) {
            Ok(b) if b.len() == 8 => {
                let saved = i64::from_be_bytes(b.try_into().expect("8 bytes"));
                // Not beyond the recovered log end (a cut tail lost data).
                log.log_start = saved.min(log.log_end_offset()).max(log.log_start);
            }
            Ok(_) => {
                tracing::warn!(dir = %dir.display(), "ignoring an unreadable log start offset file")
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_err("reading the log start offset")(e)),
        }
        log.load_producer_state(snapshots, &mut report)?;
        if clean {
            fs::remove_file(&marker).map_err(io_err("removing the clean-shutdown marker"))?;
        }
        sync_dir(&dir).map_err(io_err("syncing the partition directory"))?;
        log.recovery = report;
        Ok(log)
    }

    fn load_producer_state(
        &mut self,
        mut snapshots: Vec<i64>,
        report: &mut RecoveryReport,
    ) -> Result<(), LogError> {
        let dir = self.dir.clone().expect("file log");
        let leo = self.log_end_offset();
        snapshots.sort_unstable_by(|a, b| b.cmp(a));
        let mut loaded: Option<(i64, ProducerStateManager)> = None;
        let mut kept = Vec::new();
        for off in snapshots {
            let path = dir.join(snapshot_file_name(off));
            if off > leo || loaded.is_some() && kept.len() >= SNAPSHOTS_KEPT {
                // Beyond the recovered log end (its data was lost) or old.
                let _ = fs::remove_file(&path);
                continue;
            }
            if loaded.is_none() {
                let decoded = fs::read(&path)
                    .map_err(|e| e.to_string())
                    .and_then(|b| ProducerStateManager::decode_snapshot(&b));
                match decoded {
                    Ok((o, state)) if o == off => loaded = Some((off, state)),
                    Ok(_) | Err(_) => {
                        tracing::warn!(path = %path.display(), "ignoring an unreadable producer snapshot");
                        let _ = fs::remove_file(&path);
                        continue;
                    }
                }
            }
            kept.push(off);
        }
        kept.reverse();
        self.snapshot_offsets = kept;
        let from = match loaded {
            Some((off, state)) => {
                self.producers = state;
                report.snapshot_offset = Some(off);
                off
            }
            None => self.segments[0].base_offset,
        };
        report.replayed_batches = self.replay_producer_state(from)?;
        Ok(())
    }

    /// Replays batch headers at or after `from` into the producer state.
    fn replay_producer_state(&mut self, from: i64) -> Result<usize, LogError> {
        let mut count = 0;
        for seg in &self.segments {
            if seg.next_offset <= from {
                continue;
            }
            let mut pos = if seg.base_offset >= from {
                0
            } else {
                match seg
                    .find_position(from)
                    .map_err(io_err("reading a segment"))?
                {
                    Some(p) => p,
                    None => continue,
                }
            };
            let size = seg.size();
            while pos < size {
                let Some(h) = seg.read_header(pos).map_err(io_err("reading a segment"))? else {
                    break;
                };
                if h.base_offset >= from {
                    let mut bytes = seg
                        .read_bytes(pos, h.size)
                        .map_err(io_err("reading a segment"))?;
                    if let Ok(Some(view)) = RecordBatchView::split_from(&mut bytes) {
                        if view.is_control() {
                            match parse_end_txn_marker(&view) {
                                Ok(marker) => self.producers.replay_marker(&MarkerInfo {
                                    producer_id: view.producer_id(),
                                    producer_epoch: view.producer_epoch(),
                                    offset: view.base_offset(),
                                    timestamp: view.max_timestamp(),
                                    marker,
                                }),
                                Err(e) => tracing::warn!(
                                    offset = view.base_offset(),
                                    error = %e,
                                    "skipping an unreadable control batch"
                                ),
                            }
                        } else {
                            self.producers.replay_batch(&BatchInfo::from_view(&view));
                        }
                        count += 1;
                    }
                }
                pos += h.size;
            }
        }
        Ok(count)
    }

    /// What opening the log found and did.
    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.recovery
    }

    /// The configuration.
    pub fn config(&self) -> &LogConfig {
        &self.config
    }

    /// The partition directory (None in memory).
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// First offset in the log a reader may see (raised by
    /// [`Self::delete_records_before`] and [`Self::enforce_retention`]).
    pub fn log_start_offset(&self) -> i64 {
        self.log_start
    }

    /// DeleteRecords (KIP-107): raises the log start offset to `offset`
    /// (-1 = the high watermark) and deletes the segments wholly below it
    /// (never the active one). The new start is made durable before this
    /// returns. OFFSET_OUT_OF_RANGE for an offset above the high watermark
    /// or negative; an offset at or below the current start changes
    /// nothing. Returns the log start offset (the low watermark).
    pub fn delete_records_before(&mut self, offset: i64) -> Result<i64, LogError> {
        let hw = self.high_watermark();
        let offset = if offset == -1 { hw } else { offset };
        if offset < 0 || offset > hw {
            return Err(LogError::OffsetOutOfRange {
                offset,
                log_start_offset: self.log_start,
                log_end_offset: hw,
            });
        }
        if offset > self.log_start {
            self.set_log_start(offset)?;
            self.delete_segments_below_start()?;
        }
        Ok(self.log_start)
    }

    fn set_log_start(&mut self, offset: i64) -> Result<(), LogError> {
        if let Some(dir) = &self.dir {
            write_atomic(&dir.join(LOG_START_OFFSET_FILE), &offset.to_be_bytes())
                .map_err(io_err("writing the log start offset"))?;
        }
        self.log_start = offset;
        Ok(())
    }

    /// Deletes the closed segments whose every offset is below the log
    /// start offset.
    fn delete_segments_below_start(&mut self) -> Result<usize, LogError> {
        let mut deleted = 0;
        while self.segments.len() > 1 && self.segments[1].base_offset <= self.log_start {
            self.segments
                .remove(0)
                .delete()
                .map_err(io_err("deleting a segment"))?;
            deleted += 1;
        }
        if deleted > 0
            && let Some(dir) = &self.dir
        {
            sync_dir(dir).map_err(io_err("syncing the partition directory"))?;
        }
        Ok(deleted)
    }

    /// Time and size retention (`retention.ms`, `retention.bytes`; -1 =
    /// unlimited), as Kafka's log cleaner thread applies it with
    /// `cleanup.policy=delete`: deletes the oldest closed segments whose
    /// largest timestamp is more than `retention_ms` before `now_ms`, and
    /// the oldest closed segments while the log without them still holds
    /// at least `retention_bytes`. The active segment is never deleted (it
    /// goes once it has rolled), and the log start offset moves to the
    /// first remaining segment.
    pub fn enforce_retention(
        &mut self,
        now_ms: i64,
        retention_ms: i64,
        retention_bytes: i64,
    ) -> Result<RetentionOutcome, LogError> {
        let mut cut = 0;
        let mut size = self.size_bytes();
        while cut + 1 < self.segments.len() {
            let seg = &self.segments[cut];
            // A segment emptied by compaction holds nothing to keep.
            let expired = retention_ms >= 0
                && (seg.size() == 0
                    || seg.max_timestamp >= 0
                        && now_ms.saturating_sub(seg.max_timestamp) > retention_ms);
            let over =
                retention_bytes >= 0 && size.saturating_sub(seg.size()) >= retention_bytes as u64;
            if !(expired || over) {
                break;
            }
            size -= seg.size();
            cut += 1;
        }
        let mut outcome = RetentionOutcome {
            deleted_segments: 0,
            log_start_offset: self.log_start,
        };
        if cut == 0 {
            return Ok(outcome);
        }
        let new_start = self.segments[cut].base_offset;
        if new_start > self.log_start {
            self.set_log_start(new_start)?;
        }
        outcome.deleted_segments = self.delete_segments_below_start()?;
        outcome.log_start_offset = self.log_start;
        Ok(outcome)
    }

    /// Changes the settings a topic config alteration touches
    /// (`max.message.bytes`, `segment.bytes`); they apply from the next
    /// append.
    pub fn set_limits(&mut self, max_message_bytes: usize, segment_bytes: u64) {
        self.config.max_message_bytes = max_message_bytes;
        self.config.segment_bytes = segment_bytes;
        self.config = self.config.clone().normalized();
    }

    /// Sets `segment.ms` (None = no time-based roll): the active segment
    /// rolls at the first append that comes that long after the first
    /// append it holds (Kafka measures from the first batch's timestamp;
    /// here the broker's clock at that append, so a manual clock drives
    /// it).
    pub fn set_segment_ms(&mut self, segment_ms: Option<i64>) {
        self.config.segment_ms = segment_ms;
    }

    /// Compacts the closed segments (`cleanup.policy=compact`) if due at
    /// `now_ms` under `config`; see [`super::cleaner`]. Rewritten segments
    /// are swapped in crash-safely, then the cleaner checkpoint is
    /// written. Returns what was removed (all zero when nothing was due).
    pub fn clean(&mut self, now_ms: i64, config: CleanerConfig) -> Result<CleanOutcome, LogError> {
        let input = CleanInput {
            now_ms,
            config,
            log_start: self.log_start,
            last_stable_offset: self.last_stable_offset(),
            checkpoint: self.cleaner,
            producers: &self.producers,
        };
        let Some(done) =
            cleaner::clean(&mut self.segments, &input).map_err(io_err("cleaning the log"))?
        else {
            return Ok(CleanOutcome::default());
        };
        if let Some(dir) = &self.dir {
            if done.outcome.segments_cleaned > 0 {
                sync_dir(dir).map_err(io_err("syncing the partition directory"))?;
            }
            write_atomic(
                &dir.join(CLEANER_CHECKPOINT_FILE),
                &done.checkpoint.encode(),
            )
            .map_err(io_err("writing the cleaner checkpoint"))?;
        }
        self.cleaner = done.checkpoint;
        Ok(done.outcome)
    }

    /// The first offset the cleaner has not cleaned yet.
    pub fn first_dirty_offset(&self) -> i64 {
        self.cleaner.first_dirty.max(self.log_start)
    }

    /// Offset the next record will get (log end offset).
    pub fn log_end_offset(&self) -> i64 {
        self.active().next_offset
    }

    /// High watermark: on a single node, the log end offset (every append
    /// is fully replicated once written).
    pub fn high_watermark(&self) -> i64 {
        self.log_end_offset()
    }

    /// Last stable offset: the first offset of the earliest open
    /// transaction, else the high watermark.
    pub fn last_stable_offset(&self) -> i64 {
        let hw = self.high_watermark();
        self.producers
            .first_unstable_offset()
            .map_or(hw, |first| first.min(hw))
    }

    /// Aborted transactions overlapping `[fetch_offset, upper)`, for a
    /// read_committed Fetch returning data from `fetch_offset` below
    /// `upper` (usually the LSO).
    pub fn aborted_transactions(&self, fetch_offset: i64, upper: i64) -> Vec<AbortedTxn> {
        self.producers.aborted_transactions(fetch_offset, upper)
    }

    /// The producer state (read-only).
    pub fn producer_state(&self) -> &ProducerStateManager {
        &self.producers
    }

    /// Number of segments.
    pub fn segment_count(&self) -> usize {
        self.segments.len()
    }

    /// Base offsets of the segments, oldest first.
    pub fn segment_base_offsets(&self) -> Vec<i64> {
        self.segments.iter().map(|s| s.base_offset).collect()
    }

    /// Index entries per segment, oldest first.
    pub fn index_entry_counts(&self) -> Vec<usize> {
        self.segments.iter().map(|s| s.index_entries()).collect()
    }

    /// Total bytes of batches stored.
    pub fn size_bytes(&self) -> u64 {
        self.segments.iter().map(|s| s.size()).sum()
    }

    fn active(&self) -> &Segment {
        self.segments
            .last()
            .expect("a log has at least one segment")
    }

    fn active_mut(&mut self) -> &mut Segment {
        self.segments
            .last_mut()
            .expect("a log has at least one segment")
    }

    /// Appends client batches (already split and validated, CRC included,
    /// by the produce path). Offsets are assigned from the log end offset;
    /// idempotent and transactional batches are checked against the
    /// producer state first. A retried duplicate writes nothing and returns
    /// the original offsets with `duplicate` set; any error writes nothing.
    pub fn append(
        &mut self,
        batches: &[RecordBatchView],
        opts: AppendOptions,
    ) -> Result<AppendInfo, LogError> {
        if batches.is_empty() {
            return Err(LogError::InvalidRecord("no record batch to append".into()));
        }
        for b in batches {
            if b.is_control() {
                return Err(LogError::InvalidRecord(
                    "control batches are written by the transaction coordinator only".into(),
                ));
            }
            self.check_size(b)?;
        }
        let mut next = self.log_end_offset();
        let mut infos = Vec::with_capacity(batches.len());
        for b in batches {
            let mut info = BatchInfo::from_view(b);
            info.base_offset = next;
            info.last_offset = next + b.last_offset_delta() as i64;
            if opts.log_append_time {
                info.max_timestamp = opts.now_ms;
            }
            next = info.last_offset + 1;
            infos.push(info);
        }
        let update = match self.producers.prepare_append(&infos)? {
            AppendCheck::Duplicate(meta) => {
                return Ok(AppendInfo {
                    base_offset: meta.first_offset,
                    last_offset: meta.last_offset,
                    log_append_time: if opts.log_append_time {
                        meta.timestamp
                    } else {
                        -1
                    },
                    log_start_offset: self.log_start_offset(),
                    duplicate: true,
                    completed_txn: None,
                });
            }
            AppendCheck::Append(update) => update,
        };
        let (base, last) = self.write(batches, &infos, opts)?;
        self.producers.apply(update);
        self.after_write()?;
        Ok(AppendInfo {
            base_offset: base,
            last_offset: last,
            log_append_time: if opts.log_append_time {
                opts.now_ms
            } else {
                -1
            },
            log_start_offset: self.log_start_offset(),
            duplicate: false,
            completed_txn: None,
        })
    }

    /// Appends a transaction marker (a COMMIT or ABORT control batch built
    /// by the caller) for WriteTxnMarkers. `transaction_version` is the
    /// request's (2 requires the marker epoch to be newer than the
    /// producer's). Ends the producer's open transaction here, moving the
    /// LSO, and records an abort in the aborted-transaction index.
    pub fn append_marker(
        &mut self,
        batch: &RecordBatchView,
        opts: AppendOptions,
        transaction_version: i16,
    ) -> Result<AppendInfo, LogError> {
        let marker = parse_end_txn_marker(batch).map_err(LogError::InvalidRecord)?;
        if batch.producer_id() < 0 {
            return Err(LogError::InvalidRecord(
                "marker without a producer id".into(),
            ));
        }
        self.check_size(batch)?;
        let offset = self.log_end_offset();
        let mut info = BatchInfo::from_view(batch);
        info.base_offset = offset;
        info.last_offset = offset + batch.last_offset_delta() as i64;
        if opts.log_append_time {
            info.max_timestamp = opts.now_ms;
        }
        let m = MarkerInfo {
            producer_id: batch.producer_id(),
            producer_epoch: batch.producer_epoch(),
            offset,
            timestamp: info.max_timestamp,
            marker,
        };
        let update = self.producers.prepare_marker(&m, transaction_version)?;
        let completed = update.completed;
        let (base, last) = self.write(std::slice::from_ref(batch), &[info], opts)?;
        self.producers.apply_marker(update);
        self.after_write()?;
        Ok(AppendInfo {
            base_offset: base,
            last_offset: last,
            log_append_time: if opts.log_append_time {
                opts.now_ms
            } else {
                -1
            },
            log_start_offset: self.log_start_offset(),
            duplicate: false,
            completed_txn: completed,
        })
    }

    fn check_size(&self, b: &RecordBatchView) -> Result<(), LogError> {
        if b.size() > self.config.max_message_bytes {
            return Err(LogError::MessageTooLarge {
                size: b.size(),
                max: self.config.max_message_bytes,
            });
        }
        Ok(())
    }

    /// Lays the batches out with their offsets, rolls if needed, writes.
    fn write(
        &mut self,
        batches: &[RecordBatchView],
        infos: &[BatchInfo],
        opts: AppendOptions,
    ) -> Result<(i64, i64), LogError> {
        let total: usize = batches.iter().map(|b| b.size()).sum();
        let mut buf = Vec::with_capacity(total);
        let mut headers = Vec::with_capacity(batches.len());
        for (b, info) in batches.iter().zip(infos) {
            let start = buf.len();
            buf.extend_from_slice(b.bytes());
            let slice = &mut buf[start..];
            set_base_offset(slice, info.base_offset);
            set_partition_leader_epoch(slice, opts.leader_epoch);
            if opts.log_append_time {
                set_log_append_time(slice, opts.now_ms);
            }
            headers.push(BatchHeader {
                base_offset: info.base_offset,
                last_offset: info.last_offset,
                size: b.size() as u64,
                max_timestamp: info.max_timestamp,
            });
        }
        let active_size = self.active().size();
        let time_due = match (self.config.segment_ms, self.active_since_ms) {
            (Some(ms), Some(since)) => opts.now_ms.saturating_sub(since) >= ms,
            _ => false,
        };
        if active_size > 0 && (active_size + total as u64 > self.config.segment_bytes || time_due) {
            self.roll()?;
            self.active_since_ms = None;
        }
        if self.active_since_ms.is_none() {
            self.active_since_ms = Some(opts.now_ms);
        }
        self.active_mut()
            .append(buf, &headers)
            .map_err(io_err("appending to a segment"))?;
        self.unflushed = true;
        let first = infos.first().expect("at least one batch").base_offset;
        let last = infos.last().expect("at least one batch").last_offset;
        Ok((first, last))
    }

    /// Whether appending `bytes` more bytes of batches may wait on the disk
    /// beyond a page-cache write: every batch is fsynced
    /// (`FsyncPolicy::EveryBatch`), or the append rolls the segment (which
    /// flushes the old one, syncs the directory and writes a producer
    /// snapshot). The produce path runs appends that cannot inline and
    /// hands the others to the blocking pool.
    pub fn append_may_sync(&self, bytes: u64) -> bool {
        if self.dir.is_none() {
            return false;
        }
        let active_size = self.active().size();
        self.config.fsync == FsyncPolicy::EveryBatch
            || (active_size > 0 && active_size + bytes > self.config.segment_bytes)
    }

    fn after_write(&mut self) -> Result<(), LogError> {
        if self.config.fsync == FsyncPolicy::EveryBatch {
            self.flush()?;
        }
        Ok(())
    }

    /// Starts a new segment at the log end offset, and takes a producer
    /// snapshot at its base offset. The old active segment is flushed
    /// whatever the fsync policy: at once under
    /// [`FsyncPolicy::EveryBatch`], otherwise on a thread of its own, as
    /// Kafka's log does, so that the append that rolls does not wait for
    /// up to a whole segment of dirty pages to reach the disk (about half
    /// a second per GiB here). Until that flush is done the recovery point
    /// stays at the old segment, so an unclean open verifies it too. At
    /// most one such flush runs: the next roll waits for the last.
    fn roll(&mut self) -> Result<(), LogError> {
        let leo = self.log_end_offset();
        // The rolled segment's flush, when it runs in the background.
        let mut rolled = None;
        if let Some(dir) = self.dir.clone() {
            if self.config.fsync == FsyncPolicy::EveryBatch {
                self.active()
                    .flush()
                    .map_err(io_err("flushing a rolled segment"))?;
            } else {
                self.finish_rolled_flush()?;
                let old_base = self.active().base_offset;
                if self.recovery_point != Some(old_base) {
                    write_recovery_point(&dir, old_base)
                        .map_err(io_err("writing the recovery point"))?;
                    self.recovery_point = Some(old_base);
                }
                let files = self
                    .active()
                    .file_handles()
                    .map_err(io_err("opening a rolled segment for its flush"))?;
                rolled = Some((dir, DueFlush { files }));
            }
        }
        let seg = Segment::create(self.dir.as_deref(), leo, self.config.index_interval_bytes)
            .map_err(io_err("creating a segment"))?;
        self.segments.push(seg);
        if let Some(dir) = &self.dir {
            sync_dir(dir).map_err(io_err("syncing the partition directory"))?;
            self.write_snapshot(leo)?;
        }
        if let Some((dir, flush)) = rolled {
            let handle = std::thread::Builder::new()
                .name("segment-flush".into())
                .spawn(move || {
                    flush.run()?;
                    write_recovery_point(&dir, leo)
                })
                .map_err(io_err("starting the flush of a rolled segment"))?;
            self.rolled_flush = Some(RolledFlush {
                next_base: leo,
                handle,
            });
        }
        Ok(())
    }

    /// Waits for the flush of the last rolled segment, if one runs, and
    /// moves the recovery point past it.
    fn finish_rolled_flush(&mut self) -> Result<(), LogError> {
        let Some(f) = self.rolled_flush.take() else {
            return Ok(());
        };
        match f.handle.join() {
            Ok(Ok(())) => {
                self.recovery_point = Some(f.next_base);
                Ok(())
            }
            Ok(Err(e)) => Err(io_err("flushing a rolled segment")(e)),
            Err(_) => Err(io_err("flushing a rolled segment")(io::Error::other(
                "the flush thread panicked",
            ))),
        }
    }

    fn write_snapshot(&mut self, offset: i64) -> Result<(), LogError> {
        let Some(dir) = self.dir.clone() else {
            return Ok(());
        };
        let bytes = self.producers.encode_snapshot(offset);
        write_atomic(&dir.join(snapshot_file_name(offset)), &bytes)
            .map_err(io_err("writing a producer snapshot"))?;
        self.snapshot_offsets.retain(|o| *o != offset);
        self.snapshot_offsets.push(offset);
        while self.snapshot_offsets.len() > SNAPSHOTS_KEPT {
            let old = self.snapshot_offsets.remove(0);
            let _ = fs::remove_file(dir.join(snapshot_file_name(old)));
        }
        Ok(())
    }

    /// Flushes, then snapshots the producer state at the log end offset, so
    /// the next unclean open replays only what follows.
    pub fn snapshot_producer_state(&mut self) -> Result<(), LogError> {
        self.flush()?;
        let leo = self.log_end_offset();
        self.write_snapshot(leo)
    }

    /// Makes every appended batch durable (fsync of the active segment,
    /// after the flush of the last rolled segment, if it still runs).
    pub fn flush(&mut self) -> Result<(), LogError> {
        self.finish_rolled_flush()?;
        if self.unflushed {
            self.active()
                .flush()
                .map_err(io_err("flushing the active segment"))?;
            self.unflushed = false;
        }
        Ok(())
    }

    /// For [`FsyncPolicy::Interval`]: flushes if there is unflushed data
    /// and the interval has passed since the last flush done here (the
    /// first call with unflushed data flushes). Returns whether it
    /// flushed. Other policies never flush here.
    pub fn flush_if_due(&mut self, now: Instant) -> Result<bool, LogError> {
        let Some(due) = self.take_due_flush(now)? else {
            return Ok(false);
        };
        if let Err(e) = due.run() {
            self.due_flush_failed();
            return Err(io_err("flushing the active segment")(e));
        }
        Ok(true)
    }

    /// [`Self::flush_if_due`] in two steps, so that the fsync runs without
    /// the log's lock and appends go on meanwhile: if a flush is due, the
    /// log counts its data as flushed and hands over the fsync to run. If
    /// that fails, the caller reports it with [`Self::due_flush_failed`].
    pub fn take_due_flush(&mut self, now: Instant) -> Result<Option<DueFlush>, LogError> {
        let FsyncPolicy::Interval(interval) = self.config.fsync else {
            return Ok(None);
        };
        if !self.unflushed {
            return Ok(None);
        }
        let due = self
            .last_flush
            .is_none_or(|t| now.saturating_duration_since(t) >= interval);
        if !due {
            return Ok(None);
        }
        let files = self
            .active()
            .file_handles()
            .map_err(io_err("opening the active segment for its flush"))?;
        self.unflushed = false;
        self.last_flush = Some(now);
        Ok(Some(DueFlush { files }))
    }

    /// The fsync of a [`DueFlush`] failed: the data counts as unflushed
    /// again, so the next due flush tries again.
    pub fn due_flush_failed(&mut self) {
        self.unflushed = true;
    }

    /// When [`Self::flush_if_due`] should next be called to flush (None if
    /// nothing is waiting or the policy is not an interval).
    pub fn next_flush_due(&self, now: Instant) -> Option<Instant> {
        match self.config.fsync {
            FsyncPolicy::Interval(interval) if self.unflushed => {
                Some(self.last_flush.map_or(now, |t| t + interval))
            }
            _ => None,
        }
    }

    /// Whether appended data awaits a flush.
    pub fn has_unflushed_data(&self) -> bool {
        self.unflushed
    }

    /// Clean shutdown: flush, snapshot the producer state at the log end
    /// and leave the clean-shutdown marker, so the next open verifies
    /// nothing. Dropping a log without closing it is an unclean shutdown.
    pub fn close(mut self) -> Result<(), LogError> {
        let Some(dir) = self.dir.clone() else {
            return Ok(());
        };
        self.snapshot_producer_state()?;
        for seg in &self.segments {
            seg.flush().map_err(io_err("flushing a segment"))?;
        }
        write_atomic(&dir.join(CLEAN_SHUTDOWN_FILE), b"")
            .map_err(io_err("writing the clean-shutdown marker"))?;
        Ok(())
    }

    /// Reads whole batches starting with the one containing `from_offset`
    /// (a fetch offset inside a batch gets the whole batch; clients skip),
    /// up to `max_bytes`, but at least one whole batch. Empty at the log
    /// end; OFFSET_OUT_OF_RANGE outside `[log start, log end]`.
    pub fn read(&self, from_offset: i64, max_bytes: usize) -> Result<Bytes, LogError> {
        self.read_bounded(from_offset, max_bytes, self.log_end_offset())
    }

    /// Like [`Self::read`] but returns only batches that end below
    /// `upper_offset` (e.g. the LSO for read_committed, or the high
    /// watermark).
    pub fn read_bounded(
        &self,
        from_offset: i64,
        max_bytes: usize,
        upper_offset: i64,
    ) -> Result<Bytes, LogError> {
        let start = self.log_start_offset();
        let end = self.log_end_offset();
        if from_offset < start || from_offset > end {
            return Err(LogError::OffsetOutOfRange {
                offset: from_offset,
                log_start_offset: start,
                log_end_offset: end,
            });
        }
        let upper = upper_offset.min(end);
        if from_offset >= upper {
            return Ok(Bytes::new());
        }
        let idx = self
            .segments
            .partition_point(|s| s.base_offset <= from_offset)
            .saturating_sub(1);
        let mut remaining = max_bytes as u64;
        let mut chunks: Vec<Bytes> = Vec::new();
        for seg in &self.segments[idx..] {
            if seg.base_offset >= upper {
                break;
            }
            let Some(pos) = seg
                .find_position(from_offset)
                .map_err(io_err("reading a segment"))?
            else {
                continue;
            };
            let (bytes, reached_end) = seg
                .read_batches(pos, remaining, upper, chunks.is_empty())
                .map_err(io_err("reading a segment"))?;
            remaining = remaining.saturating_sub(bytes.len() as u64);
            if !bytes.is_empty() {
                chunks.push(bytes);
            }
            if !reached_end || remaining == 0 {
                break;
            }
        }
        Ok(match chunks.len() {
            0 => Bytes::new(),
            1 => chunks.pop().expect("one chunk"),
            _ => {
                let mut out = BytesMut::with_capacity(chunks.iter().map(|c| c.len()).sum());
                for c in chunks {
                    out.extend_from_slice(&c);
                }
                out.freeze()
            }
        })
    }

    /// ListOffsets by timestamp: the first record at or after the log
    /// start offset whose timestamp is at least `timestamp` (its offset and
    /// timestamp), or None. The index and the batch headers find the first
    /// batch that can hold one; only that batch is decoded.
    pub fn offset_for_timestamp(
        &self,
        timestamp: i64,
    ) -> Result<Option<TimestampOffset>, LogError> {
        self.find_record(timestamp, |ts| ts >= timestamp)
    }

    /// ListOffsets MAX_TIMESTAMP (-3, KIP-734): the first record (at or
    /// after the log start offset) holding the largest timestamp of the
    /// log, or None for an empty log.
    pub fn max_timestamp_offset(&self) -> Result<Option<TimestampOffset>, LogError> {
        let max = self
            .segments
            .iter()
            .filter(|s| s.next_offset > self.log_start)
            .map(|s| s.max_timestamp)
            .max();
        match max {
            Some(max) if max >= 0 => self.find_record(max, |ts| ts == max),
            _ => Ok(None),
        }
    }

    /// The first record at or after the log start offset in a batch whose
    /// max timestamp is at least `at_least`, with `wanted(timestamp)`.
    fn find_record(
        &self,
        at_least: i64,
        wanted: impl Fn(i64) -> bool,
    ) -> Result<Option<TimestampOffset>, LogError> {
        let start = self.log_start;
        for seg in &self.segments {
            if seg.next_offset <= start {
                continue;
            }
            let mut pos = 0;
            while let Some((p, h)) = seg
                .next_batch_with_timestamp(at_least, pos)
                .map_err(io_err("reading a segment"))?
            {
                pos = p + h.size;
                if h.last_offset < start {
                    continue;
                }
                let mut bytes = seg
                    .read_bytes(p, h.size)
                    .map_err(io_err("reading a segment"))?;
                let records = RecordBatchView::split_from(&mut bytes)
                    .ok()
                    .flatten()
                    .and_then(|v| {
                        v.records(sharestream_protocol::records::DEFAULT_MAX_DECOMPRESSED)
                            .ok()
                            .map(|rs| (v.base_offset(), rs))
                    });
                match records {
                    Some((base, records)) => {
                        if let Some(r) = records
                            .iter()
                            .find(|r| r.offset(base) >= start && wanted(r.timestamp))
                        {
                            return Ok(Some(TimestampOffset {
                                timestamp: r.timestamp,
                                offset: r.offset(base),
                            }));
                        }
                    }
                    // An undecodable batch (it passed the CRC at append):
                    // answered at batch granularity.
                    None if wanted(h.max_timestamp) => {
                        return Ok(Some(TimestampOffset {
                            timestamp: h.max_timestamp,
                            offset: h.base_offset.max(start),
                        }));
                    }
                    None => {}
                }
            }
        }
        Ok(None)
    }
}
