//! ShareFetch's side of the service: acquisition from the partition log
//! and the wake-ups of parked (long-polling) ShareFetches.

use bytes::{Bytes, BytesMut};
use parking_lot::Mutex;
use tokio::sync::watch;
use uuid::Uuid;

use super::{Entry, Pending, ShareService, key};
use crate::log::PartitionLog;
use crate::share::{AcquireMode, AcquiredRange, FetchedBatch, IsolationLevel, LogView};
use sharestream_protocol::ErrorCode;
use sharestream_protocol::records::RecordBatchView;

/// A parked ShareFetch (counted while it lives).
#[derive(Debug)]
pub struct ParkedFetch<'a>(&'a std::sync::atomic::AtomicUsize);

impl Drop for ParkedFetch<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// What one acquisition hands to a ShareFetch response.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShareFetchData {
    /// The acquired offset ranges with their delivery counts (gaps
    /// included: the consumer acknowledges those as GAP).
    pub acquired: Vec<AcquiredRange>,
    /// Whole record batches covering the acquired offsets that carry data
    /// (control batches, and aborted ones for read_committed groups, left
    /// out). Clients skip records outside the acquired ranges.
    pub records: Bytes,
    /// Number of acquired offsets.
    pub record_count: u64,
}

impl ShareService {
    /// A receiver bumped whenever records become AVAILABLE again.
    pub fn subscribe_available(&self) -> watch::Receiver<u64> {
        self.available.subscribe()
    }

    /// Counts a ShareFetch as parked (found nothing, waiting for a wake-up
    /// or its MaxWaitMs) until the guard drops.
    pub fn park(&self) -> ParkedFetch<'_> {
        self.parked
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        ParkedFetch(&self.parked)
    }

    /// ShareFetches parked right now.
    pub fn parked_fetches(&self) -> usize {
        self.parked.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Acquires records of `topic_id`/`partition` for the member, reading
    /// the log from the share partition's next fetch offset, at most
    /// `max_bytes` (at least one batch) and `max_records` records (about,
    /// in whole batches, with [`AcquireMode::BatchOptimized`]; at most with
    /// [`AcquireMode::RecordLimit`]). Creates the share partition at first
    /// use. The member must be in the group (UNKNOWN_MEMBER_ID). The
    /// acquisition (delivery counts) must be durable before the records
    /// are handed out (D17).
    #[allow(clippy::too_many_arguments)]
    pub fn acquire_deferred(
        &self,
        group_id: &str,
        member_id: &str,
        topic_id: Uuid,
        partition: i32,
        log: &Mutex<PartitionLog>,
        max_records: u32,
        mode: AcquireMode,
        max_bytes: usize,
        now_ms: i64,
    ) -> Pending<Result<ShareFetchData, ErrorCode>> {
        if max_records == 0 {
            return Pending::new(Ok(ShareFetchData::default()), Default::default());
        }
        let mut inner = self.inner.lock();
        let mark = self.mark();
        if !inner.coordinator.is_member_alive(group_id, member_id) {
            return Pending::new(Err(ErrorCode::UNKNOWN_MEMBER_ID), Default::default());
        }
        let log = log.lock();
        let k = key(group_id, topic_id, partition);
        inner.ensure_partition(&k, &log);
        let entry = inner.partitions.get_mut(&k).expect("just ensured");
        let data = acquire_from_log(entry, member_id, &log, max_records, mode, max_bytes, now_ms);
        drop(log);
        inner.persist_if_dirty(&k);
        Pending::new(data, self.durable_since(mark))
    }

    /// [`Self::acquire_deferred`], waiting for durability.
    #[allow(clippy::too_many_arguments)]
    pub fn acquire(
        &self,
        group_id: &str,
        member_id: &str,
        topic_id: Uuid,
        partition: i32,
        log: &Mutex<PartitionLog>,
        max_records: u32,
        mode: AcquireMode,
        max_bytes: usize,
        now_ms: i64,
    ) -> Result<ShareFetchData, ErrorCode> {
        self.acquire_deferred(
            group_id,
            member_id,
            topic_id,
            partition,
            log,
            max_records,
            mode,
            max_bytes,
            now_ms,
        )
        .durable_blocking()?
    }
}

/// Reads the log from the partition's next fetch offset and acquires.
fn acquire_from_log(
    entry: &mut Entry,
    member_id: &str,
    log: &PartitionLog,
    max_records: u32,
    mode: AcquireMode,
    max_bytes: usize,
    now_ms: i64,
) -> Result<ShareFetchData, ErrorCode> {
    let sp = &mut entry.sp;
    let log_start = log.log_start_offset();
    if sp.start_offset() < log_start {
        sp.advance_log_start(log_start, now_ms);
    }
    let Some(from) = sp.next_fetch_offset() else {
        return Ok(ShareFetchData::default());
    };
    let hw = log.high_watermark();
    let lso = log.last_stable_offset();
    let read_committed = sp.config().isolation == IsolationLevel::ReadCommitted;
    let bound = if read_committed { lso } else { hw };
    let from = from.max(log_start);
    if from >= bound {
        return Ok(ShareFetchData::default());
    }
    let bytes = log
        .read_bounded(from, max_bytes.max(1), bound)
        .map_err(|e| e.error_code())?;
    let views =
        RecordBatchView::parse_all(bytes.clone()).map_err(|_| ErrorCode::CORRUPT_MESSAGE)?;
    let aborted = match views.last() {
        Some(last) if read_committed => log.aborted_transactions(from, last.last_offset() + 1),
        _ => Vec::new(),
    };
    let fetched: Vec<FetchedBatch> = views
        .iter()
        .map(|v| FetchedBatch {
            base_offset: v.base_offset(),
            last_offset: v.last_offset(),
            control: v.is_control(),
            aborted: v.is_transactional()
                && !v.is_control()
                && aborted.iter().any(|a| {
                    a.producer_id == v.producer_id()
                        && a.first_offset <= v.base_offset()
                        && v.base_offset() < a.last_offset
                }),
        })
        .collect();
    // Offsets between the fetched batches (and before the first) are
    // absent from the log: compacted away. Records released there must
    // not hold the partition.
    let mut cursor = from;
    for fb in &fetched {
        if fb.base_offset > cursor {
            sp.archive_absent(cursor, fb.base_offset - 1);
        }
        cursor = cursor.max(fb.last_offset + 1);
    }
    if fetched.is_empty() {
        // No whole batch below the bound (which is a batch boundary): the
        // rest of the range is absent.
        sp.archive_absent(from, bound - 1);
    }
    let acquisition = sp.acquire(
        member_id,
        max_records,
        mode,
        now_ms,
        &LogView {
            high_watermark: hw,
            last_stable_offset: lso,
            batches: &fetched,
        },
    );
    if !acquisition.acquired.is_empty() {
        let deadline = now_ms + sp.config().record_lock_duration_ms;
        entry.next_deadline_ms = Some(entry.next_deadline_ms.map_or(deadline, |d| d.min(deadline)));
    }
    // Whole batches covering acquired offsets, data batches only.
    let mut pos = 0usize;
    let mut ranges: Vec<(usize, usize)> = Vec::new();
    for (v, fb) in views.iter().zip(&fetched) {
        let start = pos;
        pos += v.size();
        let gap = fb.control || (read_committed && fb.aborted);
        let overlaps = acquisition
            .acquired
            .iter()
            .any(|r| r.first_offset <= fb.last_offset && fb.base_offset <= r.last_offset);
        if overlaps && !gap {
            match ranges.last_mut() {
                Some(r) if r.1 == start => r.1 = pos,
                _ => ranges.push((start, pos)),
            }
        }
    }
    let records = match ranges.as_slice() {
        [] => Bytes::new(),
        [(a, b)] => bytes.slice(*a..*b),
        many => {
            let mut out = BytesMut::with_capacity(many.iter().map(|(a, b)| b - a).sum());
            for (a, b) in many {
                out.extend_from_slice(&bytes[*a..*b]);
            }
            out.freeze()
        }
    };
    Ok(ShareFetchData {
        record_count: acquisition.record_count(),
        acquired: acquisition.acquired,
        records,
    })
}
