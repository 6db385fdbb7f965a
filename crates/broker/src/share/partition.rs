//! The share partition: one per (share group, topic-partition).
//!
//! See the [module docs](super) for the design; this file holds the state
//! machine itself.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::runs::RunMap;
use super::state::{PersistedRecordState, PersistedRun, SharePartitionState};
use super::types::{
    AcknowledgeType, AcquireMode, AcquiredRange, Acquisition, DeadLetterCause, DeadLetterRange,
    Effects, IsolationLevel, LogView, MarkerOutcome, OffsetRange, RawAcknowledgementBatch,
    RecordState, RecoveredTxn, ShareError, SharePartitionConfig, SharePartitionMetrics, StateError,
    TickOutcome, TxnAckType,
};

/// A staged acknowledgement (TX_PENDING).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Pending {
    member: Arc<str>,
    producer_id: i64,
    producer_epoch: i16,
    ack: TxnAckType,
    /// The suspended acquisition lock's deadline, kept only to count
    /// TxnPendingLockExpiredCount.
    lock_deadline_ms: i64,
    /// Whether that lock's expiry was already counted.
    lock_expiry_counted: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum SlotState {
    Available,
    Acquired {
        member: Arc<str>,
        deadline_ms: i64,
    },
    Acknowledged,
    Archived,
    TxPending(Pending),
    /// KIP-1191: waiting for its dead-letter record.
    Archiving(DeadLetterCause),
}

/// The value of one run of offsets.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Slot {
    delivery_count: u16,
    state: SlotState,
}

impl SlotState {
    /// The deadline `tick` must act on, if any.
    fn deadline(&self) -> Option<i64> {
        match self {
            SlotState::Acquired { deadline_ms, .. } => Some(*deadline_ms),
            SlotState::TxPending(p) if !p.lock_expiry_counted => Some(p.lock_deadline_ms),
            _ => None,
        }
    }

    fn record_state(&self) -> RecordState {
        match self {
            SlotState::Available => RecordState::Available,
            SlotState::Acquired { .. } => RecordState::Acquired,
            SlotState::Acknowledged => RecordState::Acknowledged,
            SlotState::Archived => RecordState::Archived,
            SlotState::TxPending(_) => RecordState::TxPending,
            SlotState::Archiving(_) => RecordState::Archiving,
        }
    }
}

const KINDS: usize = 6;

fn kind(state: RecordState) -> usize {
    match state {
        RecordState::Available => 0,
        RecordState::Acquired => 1,
        RecordState::Acknowledged => 2,
        RecordState::Archived => 3,
        RecordState::TxPending => 4,
        RecordState::Archiving => 5,
    }
}

/// Records per state, kept up to date on every change.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct StateCounts([u64; KINDS]);

impl StateCounts {
    fn moved(&mut self, from: Option<RecordState>, to: Option<RecordState>, n: u64) {
        if let Some(f) = from {
            self.0[kind(f)] -= n;
        }
        if let Some(t) = to {
            self.0[kind(t)] += n;
        }
    }

    fn get(&self, s: RecordState) -> u64 {
        self.0[kind(s)]
    }
}

/// Public view of one offset's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordInfo {
    /// The record state.
    pub state: RecordState,
    /// Deliveries so far.
    pub delivery_count: u16,
    /// The member holding it (ACQUIRED) or that staged it (TX_PENDING).
    pub member_id: Option<String>,
    /// Deadline of the acquisition lock (ACQUIRED), or of the suspended lock
    /// (TX_PENDING).
    pub lock_deadline_ms: Option<i64>,
    /// Producer id and epoch of the staging transaction (TX_PENDING).
    pub producer: Option<(i64, i16)>,
    /// The staged acknowledge type (TX_PENDING).
    pub txn_ack: Option<TxnAckType>,
    /// Why the record is a dead letter (ARCHIVING).
    pub dead_letter: Option<DeadLetterCause>,
}

impl RecordInfo {
    fn of(slot: &Slot) -> Self {
        let mut info = RecordInfo {
            state: slot.state.record_state(),
            delivery_count: slot.delivery_count,
            member_id: None,
            lock_deadline_ms: None,
            producer: None,
            txn_ack: None,
            dead_letter: None,
        };
        match &slot.state {
            SlotState::Acquired {
                member,
                deadline_ms,
            } => {
                info.member_id = Some(member.to_string());
                info.lock_deadline_ms = Some(*deadline_ms);
            }
            SlotState::TxPending(p) => {
                info.member_id = Some(p.member.to_string());
                info.lock_deadline_ms = Some(p.lock_deadline_ms);
                info.producer = Some((p.producer_id, p.producer_epoch));
                info.txn_ack = Some(p.ack);
            }
            SlotState::Archiving(cause) => info.dead_letter = Some(*cause),
            _ => {}
        }
        info
    }
}

/// One share partition: the in-flight window of a (share group,
/// topic-partition) and every record state in it.
#[derive(Debug, Clone)]
pub struct SharePartition {
    config: SharePartitionConfig,
    state_epoch: i32,
    /// SPSO: every offset below is terminal.
    start_offset: i64,
    /// SPEO: the next offset not yet in the window.
    end_offset: i64,
    /// Runs covering exactly `start_offset..end_offset`.
    runs: RunMap<Slot>,
    counts: StateCounts,
    lock_expired_total: u64,
    redeliveries_total: u64,
    txn_pending_lock_expired_total: u64,
    /// Records archived because their delivery count reached the limit
    /// (released, lock expired, member left, or aborted at the limit).
    archived_at_limit_total: u64,
    dirty: bool,
    /// No lock deadline (ACQUIRED, or uncounted TX_PENDING) is earlier:
    /// operations skip the expiry scan before it.
    deadline_floor: i64,
    /// Offsets below are gone from the log (retention).
    log_start_offset: i64,
    /// Per producer id, the highest epoch of a transaction marker applied
    /// here, and when (docs/DESIGN.md D16). A staging below it belongs to a
    /// transaction that has already ended (fenced, timed out, or completed)
    /// and is refused, so that no later marker resolves it and it is never
    /// left TX_PENDING with no transaction to resolve it.
    marker_floor: BTreeMap<i64, (i16, i64)>,
    /// ARCHIVING runs not yet handed to the dead-letter writer (KIP-1191),
    /// in the order they became ARCHIVING.
    dead_letters: Vec<DeadLetterRange>,
}

/// Marker floors older than this are forgotten once there are more than
/// [`MARKER_FLOOR_KEEP`]: a staging request is answered within the request
/// timeout, far sooner.
const MARKER_FLOOR_TTL_MS: i64 = 15 * 60 * 1000;
const MARKER_FLOOR_KEEP: usize = 1024;

/// A validated acknowledgement segment: one type over `first..=last`.
type Segment = (i64, i64, AcknowledgeType);

/// Kafka's validation of acknowledgement batches: first <= last, offsets not
/// negative, batches sorted and non-overlapping, AcknowledgeTypes of length 1
/// or the range length, known types. Returns maximal single-type segments.
pub(crate) fn validate_batches(
    batches: &[RawAcknowledgementBatch],
) -> Result<Vec<Segment>, ShareError> {
    let mut out: Vec<Segment> = Vec::new();
    let mut prev_last: Option<i64> = None;
    for b in batches {
        if b.first_offset < 0 || b.first_offset > b.last_offset {
            return Err(ShareError::InvalidRequest(format!(
                "batch {}..={} is not a range",
                b.first_offset, b.last_offset
            )));
        }
        if let Some(p) = prev_last
            && b.first_offset <= p
        {
            return Err(ShareError::InvalidRequest(format!(
                "batch {}..={} is out of order or overlaps the previous batch ending at {p}",
                b.first_offset, b.last_offset
            )));
        }
        prev_last = Some(b.last_offset);
        let len = b.last_offset - b.first_offset + 1;
        let types = &b.acknowledge_types;
        if types.len() != 1 && i64::try_from(types.len()).ok() != Some(len) {
            return Err(ShareError::InvalidRequest(format!(
                "batch {}..={} has {} acknowledge types, expected 1 or {len}",
                b.first_offset,
                b.last_offset,
                types.len()
            )));
        }
        let mut push = |first: i64, last: i64, ty: AcknowledgeType| match out.last_mut() {
            Some(seg) if seg.1 + 1 == first && seg.2 == ty => seg.1 = last,
            _ => out.push((first, last, ty)),
        };
        for (i, &t) in types.iter().enumerate() {
            let ty = AcknowledgeType::from_code(t).ok_or_else(|| {
                ShareError::InvalidRequest(format!(
                    "unknown acknowledge type {t} in batch {}..={}",
                    b.first_offset, b.last_offset
                ))
            })?;
            if types.len() == 1 {
                push(b.first_offset, b.last_offset, ty);
            } else {
                let o = b.first_offset + i as i64;
                push(o, o, ty);
            }
        }
    }
    Ok(out)
}

impl SharePartition {
    /// A share partition whose window starts (empty) at `start_offset`, which
    /// the broker chose from `share.auto.offset.reset` (earliest: the log
    /// start offset; latest: the high watermark) or from an administrative
    /// reset.
    pub fn new(config: SharePartitionConfig, start_offset: i64) -> Self {
        SharePartition {
            config,
            state_epoch: 0,
            start_offset,
            end_offset: start_offset,
            runs: RunMap::new(),
            counts: StateCounts::default(),
            lock_expired_total: 0,
            redeliveries_total: 0,
            txn_pending_lock_expired_total: 0,
            archived_at_limit_total: 0,
            dirty: false,
            deadline_floor: i64::MAX,
            log_start_offset: 0,
            marker_floor: BTreeMap::new(),
            dead_letters: Vec::new(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &SharePartitionConfig {
        &self.config
    }

    /// Applies a changed group configuration. Every setting is read when it
    /// is used, so the new values govern the next acquisition, lock and
    /// delivery-count decision; locks already running keep their deadline.
    pub fn set_config(&mut self, config: SharePartitionConfig) {
        self.config = config;
    }

    /// The share-partition start offset (SPSO).
    pub fn start_offset(&self) -> i64 {
        self.start_offset
    }

    /// The end of the in-flight window (SPEO): the next offset not yet
    /// acquired.
    pub fn end_offset(&self) -> i64 {
        self.end_offset
    }

    /// The state epoch (raised by every restore).
    pub fn state_epoch(&self) -> i32 {
        self.state_epoch
    }

    /// Number of runs held: the memory of the partition, in runs.
    pub fn run_count(&self) -> usize {
        self.runs.run_count()
    }

    /// Records currently TX_PENDING (TxnPendingRecordsCount). A downgrade of
    /// `share.version` below 3 is refused while this is not 0 on any share
    /// partition (D2).
    pub fn txn_pending_records(&self) -> u64 {
        self.counts.get(RecordState::TxPending)
    }

    /// KIP-1191: the ARCHIVING runs that became ARCHIVING since the last
    /// call (or were restored so), for the broker's dead-letter writer. The
    /// broker must persist the snapshot that holds them as ARCHIVING before
    /// it writes their dead-letter records, then call
    /// [`finish_dead_letters`](Self::finish_dead_letters) (or
    /// [`return_dead_letters`](Self::return_dead_letters) to try again
    /// later).
    pub fn take_dead_letters(&mut self) -> Vec<DeadLetterRange> {
        std::mem::take(&mut self.dead_letters)
    }

    /// Whether ARCHIVING runs wait to be taken.
    pub fn has_dead_letters(&self) -> bool {
        !self.dead_letters.is_empty()
    }

    /// Puts runs taken by [`take_dead_letters`](Self::take_dead_letters)
    /// back, for a later attempt; runs no longer ARCHIVING are dropped.
    pub fn return_dead_letters(&mut self, ranges: &[DeadLetterRange]) {
        for r in ranges {
            for (f, l) in self.archiving_runs(r.first_offset, r.last_offset) {
                Self::note_dead_letter(&mut self.dead_letters, f, l, r.delivery_count, r.cause);
            }
        }
    }

    /// The dead-letter records of `first..=last` were written, or their
    /// write failed for good (counted and logged by the writer): those
    /// ARCHIVING records become ARCHIVED and the start offset may move past
    /// them. Other states in the range are left alone. Returns the number
    /// of records archived.
    pub fn finish_dead_letters(&mut self, first: i64, last: i64) -> (u64, Effects) {
        let mut archived = 0u64;
        for (f, l) in self.archiving_runs(first, last) {
            self.rewrite(f, l, |_, _, old| Slot {
                delivery_count: old.delivery_count,
                state: SlotState::Archived,
            });
            archived += (l - f + 1) as u64;
            self.dirty = true;
        }
        let effects = Effects {
            records_available: self.advance_start(),
        };
        (archived, effects)
    }

    /// The ARCHIVING runs within `first..=last` (clipped to the window).
    fn archiving_runs(&self, first: i64, last: i64) -> Vec<(i64, i64)> {
        let (first, last) = (first.max(self.start_offset), last.min(self.end_offset - 1));
        if first > last {
            return Vec::new();
        }
        self.runs
            .range(first, last)
            .filter(|(_, _, s)| matches!(s.state, SlotState::Archiving(_)))
            .map(|(f, l, _)| (f, l))
            .collect()
    }

    /// Whether the state changed since the last call (the broker persists a
    /// [`snapshot`](Self::snapshot) when it did). Resets the flag.
    pub fn take_dirty(&mut self) -> bool {
        std::mem::take(&mut self.dirty)
    }

    /// The state of `offset`; `None` below the start offset (terminal,
    /// forgotten) and at or beyond the end offset (not yet acquired).
    pub fn record(&self, offset: i64) -> Option<RecordInfo> {
        self.runs.get(offset).map(RecordInfo::of)
    }

    /// Every run of the window, as `(first, last, info)`.
    pub fn runs(&self) -> impl Iterator<Item = (i64, i64, RecordInfo)> + '_ {
        self.runs.iter().map(|(f, l, s)| (f, l, RecordInfo::of(s)))
    }

    /// Where the next fetch should read the log from: the first AVAILABLE
    /// offset of the window, else the end offset if the in-flight cap leaves
    /// room, else `None` (nothing can be acquired now).
    pub fn next_fetch_offset(&self) -> Option<i64> {
        if let Some((f, _, _)) = self
            .runs
            .iter()
            .find(|(_, _, s)| s.state == SlotState::Available)
        {
            return Some(f);
        }
        let in_flight = (self.end_offset - self.start_offset) as u64;
        (in_flight < u64::from(self.config.max_in_flight_records)).then_some(self.end_offset)
    }

    /// Gauges and counters.
    pub fn metrics(&self) -> SharePartitionMetrics {
        SharePartitionMetrics {
            in_flight_records: (self.end_offset - self.start_offset) as u64,
            available_records: self.counts.get(RecordState::Available),
            acquired_records: self.counts.get(RecordState::Acquired),
            acknowledged_records: self.counts.get(RecordState::Acknowledged),
            archived_records: self.counts.get(RecordState::Archived),
            txn_pending_records: self.counts.get(RecordState::TxPending),
            lock_expired_total: self.lock_expired_total,
            redeliveries_total: self.redeliveries_total,
            txn_pending_lock_expired_total: self.txn_pending_lock_expired_total,
            archived_at_limit_total: self.archived_at_limit_total,
            archiving_records: self.counts.get(RecordState::Archiving),
        }
    }

    // ----- internal helpers -------------------------------------------------

    fn lock_deadline(&self, now_ms: i64) -> i64 {
        now_ms.saturating_add(self.config.record_lock_duration_ms)
    }

    /// AVAILABLE, or at the delivery count limit ARCHIVED (ARCHIVING with
    /// a dead-letter queue, `dlq`).
    fn released(limit: u16, dlq: bool, delivery_count: u16) -> SlotState {
        if delivery_count >= limit {
            Self::dead(dlq, DeadLetterCause::DeliveryCountExceeded)
        } else {
            SlotState::Available
        }
    }

    /// What a record that will never be delivered again becomes: ARCHIVED,
    /// or ARCHIVING for `cause` when the group has a dead-letter queue.
    fn dead(dlq: bool, cause: DeadLetterCause) -> SlotState {
        if dlq {
            SlotState::Archiving(cause)
        } else {
            SlotState::Archived
        }
    }

    /// [`released`](Self::released) for the run `first..=last`, adding the
    /// records archived at the delivery count limit to `at_limit`.
    fn released_counting(
        limit: u16,
        dlq: bool,
        delivery_count: u16,
        first: i64,
        last: i64,
        at_limit: &std::cell::Cell<u64>,
    ) -> SlotState {
        let state = Self::released(limit, dlq, delivery_count);
        if state != SlotState::Available {
            at_limit.set(at_limit.get() + (last - first + 1) as u64);
            tracing::warn!(
                first_offset = first,
                last_offset = last,
                delivery_count,
                delivery_count_limit = limit,
                "share records archived at the delivery count limit: they will not be delivered again \
                 (counted in sharestream_share_partition_archived_at_delivery_limit_total)"
            );
        }
        state
    }

    /// Releases the acquired runs `runs` (their lock expired, or their
    /// member left): AVAILABLE again, or archived (dead-lettered) at the
    /// delivery count limit. Returns whether a record became available.
    fn release_runs(&mut self, runs: &[(i64, i64)]) -> bool {
        let limit = self.config.delivery_count_limit;
        let dlq = self.config.dead_letter_queue;
        let mut available = false;
        for &(f, l) in runs {
            let at_limit = std::cell::Cell::new(0u64);
            self.rewrite(f, l, |rf, rl, old| {
                let state =
                    Self::released_counting(limit, dlq, old.delivery_count, rf, rl, &at_limit);
                available |= state == SlotState::Available;
                Slot {
                    delivery_count: old.delivery_count,
                    state,
                }
            });
            self.archived_at_limit_total += at_limit.get();
            self.dirty = true;
        }
        available
    }

    /// Rewrites every run in `first..=last` and keeps the counts right.
    fn rewrite(&mut self, first: i64, last: i64, mut f: impl FnMut(i64, i64, &Slot) -> Slot) {
        let counts = &mut self.counts;
        let floor = &mut self.deadline_floor;
        let dead_letters = &mut self.dead_letters;
        self.runs.update(first, last, |rf, rl, old| {
            let new = f(rf, rl, old);
            if let SlotState::Archiving(cause) = new.state
                && !matches!(old.state, SlotState::Archiving(_))
            {
                Self::note_dead_letter(dead_letters, rf, rl, new.delivery_count, cause);
            }
            if let Some(d) = new.state.deadline() {
                *floor = (*floor).min(d);
            }
            counts.moved(
                Some(old.state.record_state()),
                Some(new.state.record_state()),
                (rl - rf + 1) as u64,
            );
            new
        });
    }

    /// Adds a run that just became ARCHIVING to the writer's queue, merged
    /// with the previous one when they touch and agree.
    fn note_dead_letter(
        queue: &mut Vec<DeadLetterRange>,
        first: i64,
        last: i64,
        delivery_count: u16,
        cause: DeadLetterCause,
    ) {
        match queue.last_mut() {
            Some(p)
                if p.last_offset + 1 == first
                    && p.delivery_count == delivery_count
                    && p.cause == cause =>
            {
                p.last_offset = last
            }
            _ => queue.push(DeadLetterRange {
                first_offset: first,
                last_offset: last,
                delivery_count,
                cause,
            }),
        }
    }

    fn insert(&mut self, first: i64, last: i64, slot: Slot) {
        if let SlotState::Archiving(cause) = slot.state {
            Self::note_dead_letter(
                &mut self.dead_letters,
                first,
                last,
                slot.delivery_count,
                cause,
            );
        }
        if let Some(d) = slot.state.deadline() {
            self.deadline_floor = self.deadline_floor.min(d);
        }
        self.counts.moved(
            None,
            Some(slot.state.record_state()),
            (last - first + 1) as u64,
        );
        self.runs.insert(first, last, slot);
    }

    /// Moves the start offset over terminal records and forgets them.
    /// Moves the start offset past the terminal records at the front of
    /// the window. Returns whether that made room under the in-flight cap
    /// (the window was full and is no longer): a fetch waiting for room
    /// must then be woken, as when records become AVAILABLE.
    fn advance_start(&mut self) -> bool {
        let was_full = self.window_full();
        while let Some((f, l, s)) = self.runs.first_run() {
            debug_assert_eq!(f, self.start_offset);
            if !s.state.record_state().is_terminal() {
                break;
            }
            for (rf, rl, slot) in self.runs.remove_below(l + 1) {
                self.counts
                    .moved(Some(slot.state.record_state()), None, (rl - rf + 1) as u64);
            }
            self.start_offset = l + 1;
            self.dirty = true;
        }
        if self.runs.is_empty() && self.start_offset != self.end_offset {
            self.start_offset = self.end_offset;
            self.dirty = true;
        }
        was_full && !self.window_full()
    }

    /// Whether the window holds as many records as the in-flight cap
    /// allows (no new record can be acquired until the start moves).
    fn window_full(&self) -> bool {
        (self.end_offset - self.start_offset) as u64 >= u64::from(self.config.max_in_flight_records)
    }

    /// Checks that every offset of `first..=last` is ACQUIRED by `member`.
    fn check_acquired_by(&self, member: &str, first: i64, last: i64) -> Result<(), ShareError> {
        if first < self.start_offset || last >= self.end_offset {
            return Err(ShareError::InvalidRecordState(format!(
                "offsets {first}..={last} are not all in flight (window {}..{})",
                self.start_offset, self.end_offset
            )));
        }
        for (f, l, s) in self.runs.range(first, last) {
            match &s.state {
                SlotState::Acquired { member: m, .. } if &**m == member => {}
                SlotState::Acquired { .. } => {
                    return Err(ShareError::InvalidRecordState(format!(
                        "offsets {f}..={l} are acquired by another member"
                    )));
                }
                SlotState::TxPending(_) => {
                    return Err(ShareError::InvalidRecordState(format!(
                        "offsets {f}..={l} are TX_PENDING: their transaction decides"
                    )));
                }
                other => {
                    return Err(ShareError::InvalidRecordState(format!(
                        "offsets {f}..={l} are {:?}, not acquired",
                        other.record_state()
                    )));
                }
            }
        }
        Ok(())
    }

    /// Expires acquisition locks due at `now_ms` and counts suspended locks
    /// of TX_PENDING records that passed their deadline.
    fn expire(&mut self, now_ms: i64) -> TickOutcome {
        let mut out = TickOutcome::default();
        if now_ms < self.deadline_floor {
            return out;
        }
        let mut acquired = Vec::new();
        let mut pending = Vec::new();
        for (f, l, s) in self.runs.iter() {
            match &s.state {
                SlotState::Acquired { deadline_ms, .. } if *deadline_ms <= now_ms => {
                    acquired.push((f, l))
                }
                SlotState::TxPending(p)
                    if !p.lock_expiry_counted && p.lock_deadline_ms <= now_ms =>
                {
                    pending.push((f, l))
                }
                _ => {}
            }
        }
        out.expired_records += acquired
            .iter()
            .map(|(f, l)| (l - f + 1) as u64)
            .sum::<u64>();
        out.records_available |= self.release_runs(&acquired);
        for (f, l) in pending {
            self.rewrite(f, l, |_, _, old| {
                let mut new = old.clone();
                if let SlotState::TxPending(p) = &mut new.state {
                    p.lock_expiry_counted = true;
                }
                new
            });
            out.txn_pending_lock_expired += (l - f + 1) as u64;
        }
        self.lock_expired_total += out.expired_records;
        self.txn_pending_lock_expired_total += out.txn_pending_lock_expired;
        out.records_available |= self.advance_start();
        self.deadline_floor = self.next_deadline().unwrap_or(i64::MAX);
        out
    }

    fn next_deadline(&self) -> Option<i64> {
        self.runs
            .iter()
            .filter_map(|(_, _, s)| s.state.deadline())
            .min()
    }

    // ----- operations -------------------------------------------------------

    /// Expires the acquisition locks due at `now_ms`: ACQUIRED records become
    /// AVAILABLE (ARCHIVED at the delivery count limit). TX_PENDING records
    /// are never freed by their lock (D6); a suspended lock that passes its
    /// deadline is counted once in TxnPendingLockExpiredCount.
    pub fn tick(&mut self, now_ms: i64) -> TickOutcome {
        let mut out = self.expire(now_ms);
        out.next_deadline_ms = self.next_deadline();
        out
    }

    /// Acquires records for `member_id`.
    ///
    /// Only offsets of `log.batches`, below the high watermark
    /// (read_uncommitted) or the last stable offset (read_committed), are
    /// acquired; AVAILABLE records of the window come first (offset order),
    /// then new records from the end offset, as long as the window stays
    /// below `max_in_flight_records`. `max_records` bounds the count as
    /// `mode` says. Each acquired record's delivery count rises by one and it
    /// gets a lock until `now_ms + record lock duration`. Locks due at
    /// `now_ms` are expired first.
    ///
    /// Gaps: offsets of control batches, and for read_committed groups of
    /// aborted transactions, are acquired like others (they count in
    /// `max_records` and the cap, their delivery count rises) and are listed
    /// in [`Acquisition::gaps`]: the broker sends no data for them and the
    /// consumer acknowledges them as GAP. Offsets skipped over because no
    /// fetched batch holds them become ARCHIVED with delivery count 0.
    pub fn acquire(
        &mut self,
        member_id: &str,
        max_records: u32,
        mode: AcquireMode,
        now_ms: i64,
        log: &LogView<'_>,
    ) -> Acquisition {
        self.expire(now_ms);
        let member: Arc<str> = Arc::from(member_id);
        let deadline_ms = self.lock_deadline(now_ms);
        let bound = match self.config.isolation {
            IsolationLevel::ReadUncommitted => log.high_watermark,
            IsolationLevel::ReadCommitted => log.last_stable_offset,
        };
        let max = u64::from(max_records);
        let limit_mode = mode == AcquireMode::RecordLimit;
        let mut taken = 0u64;
        let mut got: Vec<AcquiredRange> = Vec::new();
        let acquired_slot = |delivery_count: u16| Slot {
            delivery_count,
            state: SlotState::Acquired {
                member: member.clone(),
                deadline_ms,
            },
        };

        'batches: for b in log.batches {
            if taken >= max {
                break;
            }
            if b.last_offset < b.base_offset {
                continue;
            }
            let lo = b.base_offset.max(self.start_offset);
            let hi = b.last_offset.min(bound - 1);
            if lo > hi {
                if b.base_offset >= bound {
                    break;
                }
                continue;
            }
            // AVAILABLE records inside the window.
            let win_hi = hi.min(self.end_offset - 1);
            if lo <= win_hi {
                let available: Vec<(i64, i64)> = self
                    .runs
                    .range(lo, win_hi)
                    .filter(|(_, _, s)| s.state == SlotState::Available)
                    .map(|(f, l, _)| (f, l))
                    .collect();
                for (f, mut l) in available {
                    if limit_mode {
                        let room = max - taken;
                        if room == 0 {
                            break 'batches;
                        }
                        l = l.min(f.saturating_add(room as i64 - 1));
                    }
                    let mut redelivered = 0u64;
                    self.rewrite(f, l, |rf, rl, old| {
                        let dc = old.delivery_count.saturating_add(1);
                        if dc > 1 {
                            redelivered += (rl - rf + 1) as u64;
                        }
                        got.push(AcquiredRange {
                            first_offset: rf,
                            last_offset: rl,
                            delivery_count: dc,
                        });
                        acquired_slot(dc)
                    });
                    self.redeliveries_total += redelivered;
                    taken += (l - f + 1) as u64;
                }
                if limit_mode && taken >= max {
                    break;
                }
            }
            // New records from the end offset.
            if hi >= self.end_offset {
                let start = lo.max(self.end_offset);
                let cap_last = self
                    .start_offset
                    .saturating_add(i64::from(self.config.max_in_flight_records))
                    - 1;
                let mut stop = hi.min(cap_last);
                if limit_mode {
                    stop = stop.min(start.saturating_add((max - taken) as i64 - 1));
                }
                if stop < start {
                    break;
                }
                if start > self.end_offset {
                    // Offsets no fetched batch holds: absent from the log.
                    self.insert(
                        self.end_offset,
                        start - 1,
                        Slot {
                            delivery_count: 0,
                            state: SlotState::Archived,
                        },
                    );
                }
                self.insert(start, stop, acquired_slot(1));
                got.push(AcquiredRange {
                    first_offset: start,
                    last_offset: stop,
                    delivery_count: 1,
                });
                self.end_offset = stop + 1;
                taken += (stop - start + 1) as u64;
                if stop < hi {
                    break;
                }
            }
        }
        if !got.is_empty() {
            self.dirty = true;
        }
        // The acquiring fetch itself is being served; room it makes is
        // taken by it or seen by the next fetch.
        let _ = self.advance_start();

        // Merge adjacent ranges of equal delivery count.
        let mut acquired: Vec<AcquiredRange> = Vec::with_capacity(got.len());
        for r in got {
            match acquired.last_mut() {
                Some(p)
                    if p.last_offset + 1 == r.first_offset
                        && p.delivery_count == r.delivery_count =>
                {
                    p.last_offset = r.last_offset
                }
                _ => acquired.push(r),
            }
        }
        let read_committed = self.config.isolation == IsolationLevel::ReadCommitted;
        let mut gaps: Vec<OffsetRange> = Vec::new();
        for b in log.batches {
            if !(b.control || (read_committed && b.aborted)) {
                continue;
            }
            for r in &acquired {
                let f = r.first_offset.max(b.base_offset);
                let l = r.last_offset.min(b.last_offset);
                if f <= l {
                    gaps.push(OffsetRange {
                        first_offset: f,
                        last_offset: l,
                    });
                }
            }
        }
        gaps.sort_by_key(|g| g.first_offset);
        let mut merged: Vec<OffsetRange> = Vec::with_capacity(gaps.len());
        for g in gaps {
            match merged.last_mut() {
                Some(p) if p.last_offset + 1 >= g.first_offset => {
                    p.last_offset = p.last_offset.max(g.last_offset)
                }
                _ => merged.push(g),
            }
        }
        Acquisition {
            acquired,
            gaps: merged,
        }
    }

    /// ShareAcknowledge (and acknowledgements piggy-backed on ShareFetch).
    ///
    /// The batches are validated as Kafka does (INVALID_REQUEST when
    /// malformed); every offset must be ACQUIRED by `member_id`
    /// (INVALID_RECORD_STATE otherwise, TX_PENDING included: D8). All or
    /// nothing: a refused request changes nothing. Then GAP and REJECT make
    /// records ARCHIVED, ACCEPT ACKNOWLEDGED, RELEASE AVAILABLE with the
    /// delivery count kept (ARCHIVED at the limit), RENEW extends the lock to
    /// `now_ms + record lock duration`. Locks due at `now_ms` are expired
    /// first.
    pub fn acknowledge(
        &mut self,
        member_id: &str,
        batches: &[RawAcknowledgementBatch],
        now_ms: i64,
    ) -> Result<Effects, ShareError> {
        let mut effects = Effects {
            records_available: self.expire(now_ms).records_available,
        };
        let segments = validate_batches(batches)?;
        if !self.config.renew_acknowledge_enabled
            && segments.iter().any(|s| s.2 == AcknowledgeType::Renew)
        {
            return Err(ShareError::InvalidRecordState(
                "renew acknowledgements are disabled for the share group \
                 (share.renew.acknowledge.enable=false)"
                    .to_string(),
            ));
        }
        for &(f, l, _) in &segments {
            self.check_acquired_by(member_id, f, l)?;
        }
        let limit = self.config.delivery_count_limit;
        let dlq = self.config.dead_letter_queue;
        let deadline_ms = self.lock_deadline(now_ms);
        for (f, l, ty) in segments {
            let mut available = false;
            let at_limit = std::cell::Cell::new(0u64);
            self.rewrite(f, l, |rf, rl, old| {
                let state = match ty {
                    AcknowledgeType::Accept => SlotState::Acknowledged,
                    // A gap has no record to dead-letter.
                    AcknowledgeType::Gap => SlotState::Archived,
                    AcknowledgeType::Reject => Self::dead(dlq, DeadLetterCause::Rejected),
                    AcknowledgeType::Release => {
                        Self::released_counting(limit, dlq, old.delivery_count, rf, rl, &at_limit)
                    }
                    AcknowledgeType::Renew => match &old.state {
                        SlotState::Acquired { member, .. } => SlotState::Acquired {
                            member: member.clone(),
                            deadline_ms,
                        },
                        other => other.clone(),
                    },
                };
                available |= state == SlotState::Available;
                Slot {
                    delivery_count: old.delivery_count,
                    state,
                }
            });
            self.archived_at_limit_total += at_limit.get();
            effects.records_available |= available;
        }
        self.dirty = true;
        effects.records_available |= self.advance_start();
        Ok(effects)
    }

    /// A member left the group or its session expired: its ACQUIRED records
    /// become AVAILABLE (ARCHIVED at the delivery count limit). Its
    /// TX_PENDING records stay as they are: the transaction decides (D8).
    pub fn release_member(&mut self, member_id: &str, now_ms: i64) -> Effects {
        let mut effects = Effects {
            records_available: self.expire(now_ms).records_available,
        };
        let held: Vec<(i64, i64)> = self
            .runs
            .iter()
            .filter(|(_, _, s)| matches!(&s.state, SlotState::Acquired { member, .. } if &**member == member_id))
            .map(|(f, l, _)| (f, l))
            .collect();
        effects.records_available |= self.release_runs(&held);
        effects.records_available |= self.advance_start();
        effects
    }

    /// TxnShareAcknowledge: stages acknowledgements in the transaction of
    /// (`producer_id`, `producer_epoch`) (KIP-1289).
    ///
    /// Malformed batches: INVALID_REQUEST. Types other than ACCEPT, REJECT
    /// and GAP: INVALID_RECORD_STATE (D5). Every offset must be ACQUIRED by
    /// `member_id`, else INVALID_RECORD_STATE (a TX_PENDING offset included:
    /// D7, corner case 14). All or nothing. Staged records become TX_PENDING
    /// remembering the member, producer id, epoch and type; their acquisition
    /// lock is suspended and the delivery count unchanged.
    pub fn stage(
        &mut self,
        member_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        batches: &[RawAcknowledgementBatch],
        now_ms: i64,
    ) -> Result<Effects, ShareError> {
        let effects = Effects {
            records_available: self.expire(now_ms).records_available,
        };
        let segments = validate_batches(batches)?;
        if let Some(&(floor, _)) = self.marker_floor.get(&producer_id)
            && producer_epoch < floor
        {
            // D16: a marker at `floor` already ended this producer's
            // transaction at `producer_epoch` (a fence or a timeout that
            // landed between the handler's producer check and this stage).
            return Err(ShareError::ProducerFenced(format!(
                "producer {producer_id} epoch {producer_epoch} is older than the epoch {floor} \
                 of a transaction marker this share partition already applied"
            )));
        }
        let mut staged = Vec::with_capacity(segments.len());
        for &(f, l, ty) in &segments {
            let ack = match ty {
                AcknowledgeType::Accept => TxnAckType::Accept,
                AcknowledgeType::Reject => TxnAckType::Reject,
                // A gap (an offset acquired without data) carries nothing to
                // make atomic, but a client may put it in the transaction
                // (the KIP author's branch allows it, D5): on commit it is
                // archived, as a REJECT is (but never dead-lettered, D24); on
                // abort it goes where the other records go (D25).
                AcknowledgeType::Gap => TxnAckType::Gap,
                other => {
                    return Err(ShareError::InvalidRecordState(format!(
                        "acknowledge type {other:?} for offsets {f}..={l} cannot be staged in a \
                         transaction: only ACCEPT, REJECT and GAP"
                    )));
                }
            };
            staged.push((f, l, ack));
        }
        for &(f, l, _) in &staged {
            self.check_acquired_by(member_id, f, l)?;
        }
        for (f, l, ack) in staged {
            self.rewrite(f, l, |_, _, old| {
                let (member, lock_deadline_ms) = match &old.state {
                    SlotState::Acquired {
                        member,
                        deadline_ms,
                    } => (member.clone(), *deadline_ms),
                    // Checked ACQUIRED above; leave anything else as it is.
                    _ => return old.clone(),
                };
                Slot {
                    delivery_count: old.delivery_count,
                    state: SlotState::TxPending(Pending {
                        member,
                        producer_id,
                        producer_epoch,
                        ack,
                        lock_deadline_ms,
                        lock_expiry_counted: false,
                    }),
                }
            });
        }
        self.dirty = true;
        Ok(effects)
    }

    /// Resolves the TX_PENDING runs chosen by `selected`.
    fn resolve(
        &mut self,
        selected: impl Fn(&Pending) -> bool,
        commit: bool,
        now_ms: i64,
        member_alive: &dyn Fn(&str) -> bool,
    ) -> MarkerOutcome {
        let ranges: Vec<(i64, i64)> = self
            .runs
            .iter()
            .filter(|(_, _, s)| matches!(&s.state, SlotState::TxPending(p) if selected(p)))
            .map(|(f, l, _)| (f, l))
            .collect();
        let limit = self.config.delivery_count_limit;
        let dlq = self.config.dead_letter_queue;
        let deadline_ms = self.lock_deadline(now_ms);
        let mut out = MarkerOutcome::default();
        for (f, l) in ranges {
            let mut available = false;
            let at_limit = std::cell::Cell::new(0u64);
            self.rewrite(f, l, |rf, rl, old| {
                let SlotState::TxPending(p) = &old.state else {
                    return old.clone();
                };
                let state = match (commit, p.ack) {
                    (true, TxnAckType::Accept) => SlotState::Acknowledged,
                    // KIP-1191 with KIP-1289: a staged REJECT reaches the
                    // dead-letter queue only here, when its transaction
                    // commits; an abort (below) brings it back.
                    (true, TxnAckType::Reject) => Self::dead(dlq, DeadLetterCause::Rejected),
                    (true, TxnAckType::Gap) => SlotState::Archived,
                    (false, _) if member_alive(&p.member) => SlotState::Acquired {
                        member: p.member.clone(),
                        deadline_ms,
                    },
                    (false, _) => {
                        Self::released_counting(limit, dlq, old.delivery_count, rf, rl, &at_limit)
                    }
                };
                available |= state == SlotState::Available;
                Slot {
                    delivery_count: old.delivery_count,
                    state,
                }
            });
            self.archived_at_limit_total += at_limit.get();
            out.records_available |= available;
            out.resolved_records += (l - f + 1) as u64;
            self.dirty = true;
        }
        // An abort must not make records deliverable that the log lost.
        self.archive_below_log_start();
        out.records_available |= self.advance_start();
        out
    }

    /// Archives AVAILABLE and ACQUIRED records below the log start offset.
    fn archive_below_log_start(&mut self) {
        let last = self.log_start_offset.min(self.end_offset) - 1;
        if last < self.start_offset {
            return;
        }
        let ranges: Vec<(i64, i64)> = self
            .runs
            .range(self.start_offset, last)
            .filter(|(_, _, s)| {
                matches!(s.state, SlotState::Available | SlotState::Acquired { .. })
            })
            .map(|(f, l, _)| (f, l))
            .collect();
        for (f, l) in ranges {
            self.rewrite(f, l, |_, _, old| Slot {
                delivery_count: old.delivery_count,
                state: SlotState::Archived,
            });
            self.dirty = true;
        }
    }

    /// The log start offset moved to `log_start_offset` (retention,
    /// DeleteRecords). Records below it can no longer be delivered:
    /// AVAILABLE and ACQUIRED ones become ARCHIVED (an acknowledgement of
    /// them then gets INVALID_RECORD_STATE). TX_PENDING ones stay for their
    /// transaction to decide; an abort archives them instead of making them
    /// deliverable. A window entirely below moves up to the log start
    /// offset. The log start offset is not persisted: the broker calls this
    /// again after a restore.
    pub fn advance_log_start(&mut self, log_start_offset: i64, now_ms: i64) -> Effects {
        let mut effects = Effects {
            records_available: self.expire(now_ms).records_available,
        };
        if log_start_offset <= self.log_start_offset {
            return effects;
        }
        self.log_start_offset = log_start_offset;
        self.archive_below_log_start();
        if self.end_offset < log_start_offset {
            self.insert(
                self.end_offset,
                log_start_offset - 1,
                Slot {
                    delivery_count: 0,
                    state: SlotState::Archived,
                },
            );
            self.end_offset = log_start_offset;
            self.dirty = true;
        }
        effects.records_available |= self.advance_start();
        effects
    }

    /// Offsets `first..=last` are absent from the log (removed by
    /// compaction: a fetch found no batch holding them). AVAILABLE records
    /// there can never be delivered again and become ARCHIVED, so that the
    /// start offset moves past the gap instead of waiting on it; ACQUIRED
    /// and TX_PENDING ones stay with their holder (an acknowledgement or
    /// the lock's expiry brings them back, and the next fetch archives
    /// them). Returns how many records were archived.
    pub fn archive_absent(&mut self, first: i64, last: i64) -> u64 {
        let first = first.max(self.start_offset);
        let last = last.min(self.end_offset - 1);
        if last < first {
            return 0;
        }
        let ranges: Vec<(i64, i64)> = self
            .runs
            .range(first, last)
            .filter(|(_, _, s)| s.state == SlotState::Available)
            .map(|(f, l, _)| (f, l))
            .collect();
        let mut archived = 0;
        for (f, l) in ranges {
            self.rewrite(f, l, |_, _, old| Slot {
                delivery_count: old.delivery_count,
                state: SlotState::Archived,
            });
            archived += (l - f + 1) as u64;
            self.dirty = true;
        }
        if archived > 0 {
            let _ = self.advance_start();
        }
        archived
    }

    /// A transaction marker for `producer_id` at `producer_epoch` reached the
    /// share partition (D3). It resolves the records staged by that producer
    /// at that epoch or the one before (D4: the TV2 epoch bump). Commit:
    /// ACCEPT becomes ACKNOWLEDGED, REJECT ARCHIVED. Abort: back to ACQUIRED
    /// for the staging member with a fresh lock if `member_alive` says it is
    /// still in the group, else AVAILABLE (ARCHIVED at the delivery count
    /// limit); the delivery count is not raised (D6). Records staged by other
    /// producers or other epochs are untouched; a duplicate marker resolves
    /// nothing (D10).
    pub fn apply_marker(
        &mut self,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        now_ms: i64,
        member_alive: impl Fn(&str) -> bool,
    ) -> MarkerOutcome {
        let expired = self.expire(now_ms);
        if self.is_stale_marker(producer_id, producer_epoch) {
            // D10/D16: a late copy of a marker this partition already
            // applied (a re-send that crossed the first delivery). Under TV2
            // every transaction of a producer ends with a marker of its own,
            // higher epoch, so a marker at or below the floor resolves
            // nothing: applied, it could end the producer's *next*
            // transaction, staged at exactly that epoch.
            return MarkerOutcome {
                records_available: expired.records_available,
                ..MarkerOutcome::default()
            };
        }
        self.raise_marker_floor(producer_id, producer_epoch, now_ms);
        let epoch = i32::from(producer_epoch);
        let mut out = self.resolve(
            |p| {
                p.producer_id == producer_id
                    && (i32::from(p.producer_epoch) == epoch
                        || i32::from(p.producer_epoch) == epoch - 1)
            },
            commit,
            now_ms,
            &member_alive,
        );
        out.records_available |= expired.records_available;
        out
    }

    /// Whether a marker at `producer_epoch` is at or below the highest
    /// marker epoch already applied for `producer_id` (TV2: a duplicate).
    fn is_stale_marker(&self, producer_id: i64, producer_epoch: i16) -> bool {
        self.marker_floor
            .get(&producer_id)
            .is_some_and(|&(floor, _)| producer_epoch <= floor)
    }

    /// Remembers that a marker of `producer_id` at `producer_epoch` was
    /// applied (D16).
    fn raise_marker_floor(&mut self, producer_id: i64, producer_epoch: i16, now_ms: i64) {
        let e = self
            .marker_floor
            .entry(producer_id)
            .or_insert((producer_epoch, now_ms));
        *e = (e.0.max(producer_epoch), now_ms);
        if self.marker_floor.len() > MARKER_FLOOR_KEEP {
            self.marker_floor
                .retain(|_, (_, at)| now_ms.saturating_sub(*at) < MARKER_FLOOR_TTL_MS);
        }
    }

    /// The highest marker epoch applied for `producer_id`, if remembered.
    pub fn marker_floor(&self, producer_id: i64) -> Option<i16> {
        self.marker_floor.get(&producer_id).map(|&(e, _)| e)
    }

    /// The distinct (producer id, producer epoch) pairs with records staged.
    pub fn pending_transactions(&self) -> Vec<(i64, i16)> {
        let set: BTreeSet<(i64, i16)> = self
            .runs
            .iter()
            .filter_map(|(_, _, s)| match &s.state {
                SlotState::TxPending(p) => Some((p.producer_id, p.producer_epoch)),
                _ => None,
            })
            .collect();
        set.into_iter().collect()
    }

    /// After a restore, resolves TX_PENDING records from the transaction
    /// outcomes the transaction coordinator recovered (D9): `outcome` is
    /// asked once per staging (producer id, producer epoch); committed ones
    /// are applied, aborted ones reverted (as [`apply_marker`]), ongoing ones
    /// wait for their marker.
    ///
    /// [`apply_marker`]: Self::apply_marker
    pub fn resolve_recovered(
        &mut self,
        outcome: impl Fn(i64, i16) -> RecoveredTxn,
        now_ms: i64,
        member_alive: impl Fn(&str) -> bool,
    ) -> MarkerOutcome {
        let mut total = MarkerOutcome::default();
        for (pid, epoch) in self.pending_transactions() {
            let commit = match outcome(pid, epoch) {
                RecoveredTxn::Committed => true,
                RecoveredTxn::Aborted => false,
                RecoveredTxn::Ongoing => continue,
            };
            let out = self.resolve(
                |p| p.producer_id == pid && p.producer_epoch == epoch,
                commit,
                now_ms,
                &member_alive,
            );
            total.records_available |= out.records_available;
            total.resolved_records += out.resolved_records;
        }
        total
    }

    /// The persisted form of the whole partition. Its size is proportional
    /// to the number of runs (adjacent runs that differ only in lock
    /// deadline or holder merge).
    pub fn snapshot(&self) -> SharePartitionState {
        let mut runs: Vec<PersistedRun> = Vec::with_capacity(self.runs.run_count());
        for (f, l, s) in self.runs.iter() {
            let state = match &s.state {
                SlotState::Available => PersistedRecordState::Available,
                SlotState::Acquired { .. } => PersistedRecordState::Acquired,
                SlotState::Acknowledged => PersistedRecordState::Acknowledged,
                SlotState::Archived => PersistedRecordState::Archived,
                SlotState::TxPending(p) => PersistedRecordState::TxPending {
                    member_id: p.member.to_string(),
                    producer_id: p.producer_id,
                    producer_epoch: p.producer_epoch,
                    ack: p.ack,
                },
                SlotState::Archiving(cause) => PersistedRecordState::Archiving { cause: *cause },
            };
            match runs.last_mut() {
                Some(prev)
                    if prev.last_offset + 1 == f
                        && prev.delivery_count == s.delivery_count
                        && prev.state == state =>
                {
                    prev.last_offset = l
                }
                _ => runs.push(PersistedRun {
                    first_offset: f,
                    last_offset: l,
                    delivery_count: s.delivery_count,
                    state,
                }),
            }
        }
        SharePartitionState {
            state_epoch: self.state_epoch,
            start_offset: self.start_offset,
            end_offset: self.end_offset,
            runs,
        }
    }

    /// Rebuilds a share partition from persisted state after a restart or a
    /// leader change. ACQUIRED records become AVAILABLE (ARCHIVED at the
    /// delivery count limit, as an expired lock would): their locks died with
    /// the old leader. TX_PENDING records stay TX_PENDING with a fresh
    /// suspended lock; [`resolve_recovered`] or a marker resolves them.
    /// ACKNOWLEDGED and ARCHIVED records are never delivered again. The state
    /// epoch is raised by one.
    ///
    /// [`resolve_recovered`]: Self::resolve_recovered
    pub fn restore(
        config: SharePartitionConfig,
        state: SharePartitionState,
        now_ms: i64,
    ) -> Result<Self, StateError> {
        state.validate()?;
        let mut sp = SharePartition::new(config, state.start_offset);
        sp.state_epoch = state.state_epoch.saturating_add(1);
        sp.end_offset = state.end_offset;
        let limit = config.delivery_count_limit;
        let dlq = config.dead_letter_queue;
        let lock_deadline_ms = sp.lock_deadline(now_ms);
        for run in state.runs {
            let dc = run.delivery_count;
            let slot_state = match run.state {
                PersistedRecordState::Available | PersistedRecordState::Acquired => {
                    Self::released(limit, dlq, dc)
                }
                // Its dead-letter record may not have been written: it is
                // handed to the writer again (at least once, D24).
                PersistedRecordState::Archiving { cause } => SlotState::Archiving(cause),
                PersistedRecordState::Acknowledged => SlotState::Acknowledged,
                PersistedRecordState::Archived => SlotState::Archived,
                PersistedRecordState::TxPending {
                    member_id,
                    producer_id,
                    producer_epoch,
                    ack,
                } => SlotState::TxPending(Pending {
                    member: Arc::from(member_id),
                    producer_id,
                    producer_epoch,
                    ack,
                    lock_deadline_ms,
                    lock_expiry_counted: false,
                }),
            };
            sp.insert(
                run.first_offset,
                run.last_offset,
                Slot {
                    delivery_count: dc,
                    state: slot_state,
                },
            );
        }
        let _ = sp.advance_start();
        sp.dirty = true;
        Ok(sp)
    }
}

#[cfg(test)]
#[path = "partition_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "dead_letter_tests.rs"]
mod dead_letter_tests;
