//! Exhaustive model check (stateright) of the broker's KIP-1289 path:
//! transactional share acknowledgements crossing a producer fence.
//!
//! This file does not use `sharestream`: it is a small, pure model of the
//! protocol, so that it compiles and runs in seconds. Each action below is
//! one atomic step; the checker explores every interleaving within the
//! bounds.
//!
//! # What is modelled
//!
//! * **Transaction coordinator** (`src/broker/txn/coordinator.rs`) for one
//!   transactional id with one producer id: the producer `epoch`, the
//!   `TxnState` (Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit,
//!   CompleteAbort), whether the one share partition is registered as a
//!   share participant, and the marker it waits on (`PendingMarkers`).
//!   - `InitProducerId` (`init_producer_id`, producer B): Ongoing -> fence
//!     (`fence_and_abort`: epoch + 1, PrepareAbort, abort marker at the new
//!     epoch) and CONCURRENT_TRANSACTIONS (B retries); Prepare* ->
//!     CONCURRENT_TRANSACTIONS (the action waits); Empty/Complete* -> epoch
//!     + 1, Empty, and B holds that epoch.
//!   - Produce and the TxnShareAcknowledge checks run `check_producer`: another
//!     epoch is PRODUCER_FENCED (the producer is dead), Prepare* is
//!     CONCURRENT_TRANSACTIONS (it waits). Produce registers the output
//!     partition (TV2 implicit AddPartitionsToTxn) and so opens the
//!     transaction (Ongoing).
//!   - `EndTxn` v5+ (`end_txn_v2` -> `begin_completion`): needs the current
//!     epoch and Ongoing, else PRODUCER_FENCED; Prepare*, epoch + 1 (the TV2
//!     bump), the marker at the NEW epoch; the producer goes on with it.
//!   - The transaction timeout (`tick` -> `fence_and_abort`): any time while
//!     Ongoing, like a fence.
//!   - A transaction with the share participant waits in Prepare* until the
//!     share partition's marker is acknowledged (`marker_written` ->
//!     `complete`); without it, it completes at once (`start_markers`).
//! * **Share partition** (`src/broker/share/partition.rs`) with 1 or 2
//!   records: Available, Acquired(member), TxPending{epoch, member},
//!   Acknowledged, Archived, and a delivery count. `Acquire` (ShareFetch)
//!   takes an Available record (count + 1), or lets an idle producer's
//!   member process again a record it still holds (an aborted staging comes
//!   back Acquired); `LockExpires` makes an Acquired
//!   record Available again (Archived at the delivery limit); TxPending
//!   records never expire (D6). `stage` turns a record Acquired by the
//!   member into TxPending at the producer's epoch. `apply_marker(M, commit)`
//!   resolves the TxPending records staged at M or M - 1 (D4): commit ->
//!   Acknowledged, abort -> Acquired by the staging member again.
//! * **Output log**, simplified: each transaction's output records are
//!   decided with the transaction (committed iff the coordinator decides
//!   commit, aborted on an abort or a fence). The output partition's own
//!   marker is not modelled as a message: its producer state
//!   (`src/broker/log/producer_state.rs` `prepare_marker`) already refuses
//!   a TV2 marker at an epoch <= the producer's while a transaction is
//!   open, so a late copy cannot resolve the next transaction there.
//! * **Two producers of the one transactional id.** A (the zombie) holds
//!   epoch 0 at the start; B (the restarted instance) calls InitProducerId
//!   whenever it likes, retrying on CONCURRENT_TRANSACTIONS. Each runs up
//!   to `a_txns`/`b_txns` transactions: Acquire a record, Produce its
//!   output, then TxnShareAcknowledge as the handler
//!   (`src/broker/handlers/txn_share_ack.rs` `stage`) runs it, in THREE
//!   atomic steps: `Verify` (`verify_txn_for_staging`, read-only), `Register`
//!   (`add_share_participants`: re-verifies, registers the share
//!   participant) and `Stage` (`SharePartition::stage` via `Shares::stage`:
//!   no look at the coordinator), then `EndTxn(commit)`. A stage error that
//!   is not a fence (INVALID_RECORD_STATE, the lock expired) makes the
//!   client abort (`EndTxn(abort)`); a fence kills the producer.
//! * **Marker delivery** (`src/broker/txn_service.rs` `deliver`/`tick`): the
//!   marker to the share partition is a message (`DeliverMarker`) whose
//!   acknowledgement to the coordinator is another (`DeliverAck`), so any
//!   step may run between applying a marker and completing the
//!   transaction, and a marker may be delivered arbitrarily late. A lost
//!   marker or a lost acknowledgement is a delay plus a re-send by the
//!   coordinator (`Resend`, bounded by `resends`), so a marker may be
//!   delivered twice. With `late_duplicates` a copy still in flight when
//!   the transaction completes stays in flight and may land any time later
//!   (the tick's re-send racing the first delivery: both run outside the
//!   coordinator lock); without it, copies are dropped at completion (only
//!   duplicates while the transaction is still Prepare*).
//!
//! The in-flight request of A crossing the fence is just an interleaving:
//! `Verify`, `Register` (A), `InitProducerId` (B, the fence), the abort
//! marker delivered, then `Stage` (A).
//!
//! # Variants (`Variant`)
//!
//! * `Broken`: today's handler: stage with no ordering against the fence.
//! * `Fixed { fence_floor, stage_check, ignore_stale_markers }`:
//!   - (a) `fence_floor`: the share partition remembers, per producer id,
//!     the highest marker epoch it applied and refuses to stage below it
//!     (the fix in progress in `partition.rs`, D16: `marker_floor`; it
//!     answers PRODUCER_FENCED; nothing staged, A is dead).
//!   - (b) `stage_check`: stage re-checks with the coordinator that the
//!     transaction at that epoch is still Ongoing with the share participant:
//!     `Racy` = as a separate step before the stage (a read of the
//!     coordinator, then the stage), `Atomic` = in the same step as the stage
//!     (the stage runs under the coordinator's ordering, e.g. under its lock).
//!   - (c) `ignore_stale_markers` (not in the fix, found by this model): the
//!     share partition ignores a marker whose epoch is not above the
//!     floor. TV2 marker epochs of a producer id strictly increase, so such
//!     a marker is a copy of one already applied. It is the share-partition
//!     counterpart of the log's TV2 rule in `prepare_marker`, and like it
//!     holds for TV2 markers only (a TV1 EndTxn marker is at the staged
//!     epoch and the next transaction reuses that epoch).
//!
//! # Properties
//!
//! * `always` "no loss": an Acknowledged record has a committed output.
//! * `always` "no duplicate": at most one committed output per record.
//! * `always` "no stuck record": quiescent => no TxPending record, where
//!   quiescent = no transaction Ongoing or Prepare*, no marker or
//!   acknowledgement in flight, and no producer in the middle of a
//!   transaction (each is not started, idle or dead). A TxPending record in
//!   such a state can never be resolved: it was staged at an epoch `s` whose
//!   transaction ended (so the epoch is now >= s + 1) and every later marker
//!   is at an epoch >= s + 2, which D4 does not match.
//! * `sometimes` "acknowledged": sanity, the model can commit a record.
//!
//! # Bounds
//!
//! `Bounds`: 1 or 2 records, `a_txns`/`b_txns` transactions per producer,
//! `timeouts` transaction timeouts, `resends` marker re-sends, a delivery
//! limit of 2: `FENCE` (1 record, one transaction each, 1 timeout, 1
//! re-send: about 1,500 states), `FENCE_BY_B` (no timeout), `WIDE` (2
//! records, 2 transactions for A: about 25,000 states) and `WIDE_LATE`
//! (the same with late duplicates: about 40,000). Every run is exhaustive
//! (a Broken run may stop once every property has a discovery) and takes
//! under half a second in debug mode; finding the shortest counterexample
//! (a binary search on the depth) under two. Each run prints its state
//! count and time. The ignored test `wider_bounds` (3 transactions for A,
//! 2 for B, 2 timeouts, 2 re-sends, delivery limit 3: up to 1.7 million
//! states, about 50 s in debug mode) re-checks the passing fixes.
//!
//! # Findings (see the tests)
//!
//! * `Broken` is stuck: A's Stage lands after the fence's abort marker was
//!   applied (on the shortest path, even before the coordinator got the
//!   marker's acknowledgement); the record stays TxPending at the old epoch
//!   forever (`regression_sequence_stage_after_fence`).
//! * `Broken` and every fix without (c) lose and duplicate records once a
//!   marker can be delivered after its transaction completed: a late copy
//!   of the commit marker at M resolves the records the NEXT transaction
//!   staged at M (D4 matches M and M - 1, and TV2 stages the next
//!   transaction at exactly M); a late abort copy sends them back to
//!   Acquired while the transaction commits
//!   (`regression_sequence_late_duplicate_marker`). In the broker such a
//!   late copy comes from `TxnService::tick` re-sending a marker whose
//!   first delivery is slower than `marker_retry_backoff_ms`: both
//!   deliveries run outside the coordinator lock, and the first one may
//!   complete the transaction before the second lands.
//! * (a) alone, (b) `Atomic` alone, and (a)+(b) pass every property when
//!   no marker lands after its transaction completed; (b) `Racy` alone is
//!   as broken as today (it moves the window, the stage can still land after
//!   the fence); (a)+(c) and (a)+(b)+(c) pass with late duplicates too.
//! * `imposed_abort_releases` (an imposed abort releases the records to
//!   Available, the change in progress in `Shares::apply_marker`) changes
//!   none of these results.

use std::time::Instant;

use stateright::{Checker, HasDiscoveries, Model, Path, Property};

// ---------------------------------------------------------------------------
// Configuration
// ---------------------------------------------------------------------------

/// Fix (b): how the stage step looks at the coordinator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum StageCheck {
    /// Not at all (today).
    None,
    /// A read of the coordinator as its own step, then the stage.
    Racy,
    /// The check and the stage in one step (under the coordinator's order).
    Atomic,
}

/// Which broker code the model runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Variant {
    /// Today's code.
    Broken,
    /// The fix, with each part switchable.
    Fixed {
        /// (a) refuse a stage below the highest marker epoch applied.
        fence_floor: bool,
        /// (b) the stage re-checks the coordinator.
        stage_check: StageCheck,
        /// (c) ignore a marker at an epoch <= the highest applied.
        ignore_stale_markers: bool,
    },
}

impl Variant {
    const FLOOR_AND_CHECK: Variant = Variant::Fixed {
        fence_floor: true,
        stage_check: StageCheck::Atomic,
        ignore_stale_markers: false,
    };

    fn fence_floor(self) -> bool {
        matches!(
            self,
            Variant::Fixed {
                fence_floor: true,
                ..
            }
        )
    }

    fn stage_check(self) -> StageCheck {
        match self {
            Variant::Broken => StageCheck::None,
            Variant::Fixed { stage_check, .. } => stage_check,
        }
    }

    fn ignore_stale_markers(self) -> bool {
        matches!(
            self,
            Variant::Fixed {
                ignore_stale_markers: true,
                ..
            }
        )
    }

    /// Whether the share partition keeps the marker floor at all.
    fn tracks_floor(self) -> bool {
        self.fence_floor() || self.ignore_stale_markers()
    }
}

/// The bounds of one checker run.
#[derive(Clone, Copy, Debug)]
struct Bounds {
    records: usize,
    a_txns: u8,
    b_txns: u8,
    timeouts: u8,
    resends: u8,
    delivery_limit: u8,
    /// Whether a marker copy still in flight when its transaction completes
    /// may land later (else it is dropped at completion).
    late_duplicates: bool,
}

impl Bounds {
    /// The fence race: one record, one transaction each, one re-send.
    const FENCE: Bounds = Bounds {
        records: 1,
        a_txns: 1,
        b_txns: 1,
        timeouts: 1,
        resends: 1,
        delivery_limit: 2,
        late_duplicates: false,
    };

    /// The fence race with B's InitProducerId as the only fence.
    const FENCE_BY_B: Bounds = Bounds {
        timeouts: 0,
        ..Bounds::FENCE
    };

    /// Two records, two transactions for A (so that one transaction's marker
    /// can meet the next one's staging), one for B.
    const WIDE: Bounds = Bounds {
        records: 2,
        a_txns: 2,
        b_txns: 1,
        timeouts: 1,
        resends: 1,
        delivery_limit: 2,
        late_duplicates: false,
    };

    const WIDE_LATE: Bounds = Bounds {
        late_duplicates: true,
        ..Bounds::WIDE
    };
}

#[derive(Clone, Copy, Debug)]
struct Kip1289 {
    variant: Variant,
    bounds: Bounds,
    /// An imposed abort (fence, timeout) releases the staged records to
    /// Available (Archived at the delivery limit) instead of handing them
    /// back to the staging member: the change in progress in
    /// `Shares::apply_marker` (`MarkerKind::ImposedAbort`).
    imposed_abort_releases: bool,
}

impl Kip1289 {
    /// Imposed aborts hand the records back to the member (as `apply_marker`
    /// does with a live member).
    fn new(variant: Variant, bounds: Bounds) -> Self {
        Kip1289 {
            variant,
            bounds,
            imposed_abort_releases: false,
        }
    }

    fn releasing_on_imposed_abort(self) -> Self {
        Kip1289 {
            imposed_abort_releases: true,
            ..self
        }
    }
}

// ---------------------------------------------------------------------------
// State
// ---------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Who {
    A,
    B,
}

impl Who {
    fn index(self) -> usize {
        match self {
            Who::A => 0,
            Who::B => 1,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum TxnState {
    Empty,
    Ongoing,
    PrepareCommit,
    PrepareAbort,
    CompleteCommit,
    CompleteAbort,
}

impl TxnState {
    fn is_prepare(self) -> bool {
        matches!(self, TxnState::PrepareCommit | TxnState::PrepareAbort)
    }

    fn is_open(self) -> bool {
        self == TxnState::Ongoing || self.is_prepare()
    }
}

/// What a marker does (`MarkerRequest::commit` and `imposed`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Kind {
    Commit,
    /// EndTxn(abort).
    Abort,
    /// A fence or a timeout.
    ImposedAbort,
}

/// A transaction marker (one producer id, so only its epoch and kind).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Marker {
    epoch: i16,
    kind: Kind,
}

const fn marker(epoch: i16, kind: Kind) -> Marker {
    Marker { epoch, kind }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Coordinator {
    epoch: i16,
    state: TxnState,
    /// The share partition is a participant of the open transaction.
    share_registered: bool,
    /// The marker whose acknowledgement by the share partition completes
    /// the transaction.
    pending: Option<Marker>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum RecState {
    Available,
    Acquired(Who),
    TxPending { epoch: i16, member: Who },
    Acknowledged,
    Archived,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Record {
    state: RecState,
    deliveries: u8,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum OutStatus {
    Pending,
    Committed,
    Aborted,
}

/// An output record produced in the transaction at `epoch`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Output {
    record: u8,
    epoch: i16,
    by: Who,
    status: OutStatus,
}

/// Where a producer is in its program.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Phase {
    /// Before its InitProducerId succeeded (B only).
    NotStarted,
    /// Holds an epoch, no transaction of its own open.
    Idle,
    /// Its consumer holds the record (ShareFetch).
    Acquired(u8),
    /// The output is in the log: the transaction is open.
    Produced(u8),
    /// TxnShareAcknowledge step 1 passed.
    Verified(u8),
    /// Step 2 passed: the share participant is registered.
    Registered(u8),
    /// (b) `Racy`: the coordinator re-check passed, the stage comes next.
    Checked(u8),
    /// Step 3 passed: EndTxn(commit) comes next.
    Staged(u8),
    /// A step failed with a non-fatal error: EndTxn(abort) comes next.
    MustAbort,
    /// Fenced (PRODUCER_FENCED): does nothing any more.
    Dead,
}

impl Phase {
    fn mid_transaction(self) -> bool {
        !matches!(self, Phase::NotStarted | Phase::Idle | Phase::Dead)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Producer {
    epoch: i16,
    phase: Phase,
    txns_left: u8,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct State {
    coord: Coordinator,
    /// Markers on their way to the share partition (sorted: a bag).
    to_partition: Vec<Marker>,
    /// Acknowledgements on their way to the coordinator (sorted).
    to_coordinator: Vec<Marker>,
    records: Vec<Record>,
    /// Highest marker epoch applied by the share partition (fixes a, c).
    marker_floor: Option<i16>,
    /// Sorted.
    outputs: Vec<Output>,
    producers: [Producer; 2],
    timeouts_used: u8,
    resends_used: u8,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Action {
    /// ShareFetch: `Who`'s member acquires the record.
    Acquire(Who, u8),
    /// Produce the output of the acquired record (registers the output
    /// partition, opens the transaction).
    Produce(Who),
    /// TxnShareAcknowledge step 1: `verify_txn_for_staging`.
    Verify(Who),
    /// Step 2: `add_share_participants`.
    Register(Who),
    /// (b) `Racy` only: the coordinator re-check as its own step.
    CheckTxn(Who),
    /// Step 3: `Shares::stage` / `SharePartition::stage`.
    Stage(Who),
    /// EndTxn v5+.
    EndTxn(Who, bool),
    /// B's InitProducerId (fences an Ongoing transaction).
    InitProducerId,
    /// `transaction.timeout.ms` passed.
    Timeout,
    /// The coordinator sends the pending marker again (lost or slow
    /// delivery or acknowledgement).
    Resend,
    /// A marker reaches the share partition (`apply_marker`).
    DeliverMarker(Marker),
    /// Its acknowledgement reaches the coordinator (`marker_written`).
    DeliverAck(Marker),
    /// The acquisition lock of the record expires.
    LockExpires(u8),
}

/// What `check_producer` answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Check {
    Ok,
    Fenced,
    Concurrent,
}

impl State {
    fn producer(&self, who: Who) -> &Producer {
        &self.producers[who.index()]
    }

    fn producer_mut(&mut self, who: Who) -> &mut Producer {
        &mut self.producers[who.index()]
    }

    /// `check_producer`: another epoch first, then pending markers.
    fn check_producer(&self, epoch: i16) -> Check {
        if self.coord.epoch != epoch {
            Check::Fenced
        } else if self.coord.state.is_prepare() {
            Check::Concurrent
        } else {
            Check::Ok
        }
    }

    /// (b): the transaction at `epoch` is still open with the share
    /// participant.
    fn txn_still_ongoing(&self, epoch: i16) -> bool {
        self.coord.epoch == epoch
            && self.coord.state == TxnState::Ongoing
            && self.coord.share_registered
    }

    /// `begin_completion` / `fence_and_abort`: decide the open transaction,
    /// bump the epoch once, send its marker.
    fn decide(&mut self, kind: Kind, m: &Kip1289) {
        debug_assert_eq!(self.coord.state, TxnState::Ongoing);
        let commit = kind == Kind::Commit;
        let e = self.coord.epoch;
        for o in self.outputs.iter_mut() {
            if o.epoch == e && o.status == OutStatus::Pending {
                o.status = if commit {
                    OutStatus::Committed
                } else {
                    OutStatus::Aborted
                };
            }
        }
        self.outputs.sort();
        self.coord.epoch = e + 1;
        self.coord.state = if commit {
            TxnState::PrepareCommit
        } else {
            TxnState::PrepareAbort
        };
        if self.coord.share_registered {
            let marker = marker(e + 1, kind);
            self.coord.pending = Some(marker);
            push_sorted(&mut self.to_partition, marker);
        } else {
            self.complete(m);
        }
    }

    /// `complete`: Prepare* -> Complete*.
    fn complete(&mut self, m: &Kip1289) {
        self.coord.state = match self.coord.state {
            TxnState::PrepareCommit => TxnState::CompleteCommit,
            TxnState::PrepareAbort => TxnState::CompleteAbort,
            other => unreachable!("complete in {other:?}"),
        };
        self.coord.share_registered = false;
        if let Some(done) = self.coord.pending.take()
            && !m.bounds.late_duplicates
        {
            self.to_partition.retain(|x| *x != done);
        }
        // Acknowledgements of a completed transaction are ignored
        // (`marker_written` finds no pending entry): drop them.
        self.to_coordinator.clear();
    }

    /// `SharePartition::apply_marker`.
    fn apply_marker(&mut self, marker: Marker, m: &Kip1289) {
        if m.variant.ignore_stale_markers() && self.marker_floor.is_some_and(|f| marker.epoch <= f)
        {
            return;
        }
        if m.variant.tracks_floor() {
            self.marker_floor = Some(
                self.marker_floor
                    .map_or(marker.epoch, |f| f.max(marker.epoch)),
            );
        }
        for r in self.records.iter_mut() {
            if let RecState::TxPending { epoch, member } = r.state
                && (epoch == marker.epoch || epoch + 1 == marker.epoch)
            {
                r.state = match marker.kind {
                    Kind::Commit => RecState::Acknowledged,
                    Kind::ImposedAbort if m.imposed_abort_releases => {
                        if r.deliveries >= m.bounds.delivery_limit {
                            RecState::Archived
                        } else {
                            RecState::Available
                        }
                    }
                    Kind::Abort | Kind::ImposedAbort => RecState::Acquired(member),
                };
            }
        }
    }

    fn quiescent(&self) -> bool {
        !self.coord.state.is_open()
            && self.to_partition.is_empty()
            && self.to_coordinator.is_empty()
            && self.producers.iter().all(|p| !p.phase.mid_transaction())
    }

    fn committed_outputs(&self, record: usize) -> usize {
        self.outputs
            .iter()
            .filter(|o| usize::from(o.record) == record && o.status == OutStatus::Committed)
            .count()
    }
}

fn push_sorted(v: &mut Vec<Marker>, m: Marker) {
    let at = v.partition_point(|x| *x <= m);
    v.insert(at, m);
}

fn remove_one(v: &mut Vec<Marker>, m: Marker) -> bool {
    match v.iter().position(|x| *x == m) {
        Some(i) => {
            v.remove(i);
            true
        }
        None => false,
    }
}

fn distinct(v: &[Marker]) -> impl Iterator<Item = Marker> + '_ {
    v.iter()
        .enumerate()
        .filter(|(i, m)| *i == 0 || v[i - 1] != **m)
        .map(|(_, m)| *m)
}

// ---------------------------------------------------------------------------
// The model
// ---------------------------------------------------------------------------

impl Model for Kip1289 {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        vec![State {
            // A's InitProducerId already ran: epoch 0, Empty.
            coord: Coordinator {
                epoch: 0,
                state: TxnState::Empty,
                share_registered: false,
                pending: None,
            },
            to_partition: Vec::new(),
            to_coordinator: Vec::new(),
            records: vec![
                Record {
                    state: RecState::Available,
                    deliveries: 0,
                };
                self.bounds.records
            ],
            marker_floor: None,
            outputs: Vec::new(),
            producers: [
                Producer {
                    epoch: 0,
                    phase: Phase::Idle,
                    txns_left: self.bounds.a_txns,
                },
                Producer {
                    epoch: -1,
                    phase: Phase::NotStarted,
                    txns_left: self.bounds.b_txns,
                },
            ],
            timeouts_used: 0,
            resends_used: 0,
        }]
    }

    fn actions(&self, s: &State, actions: &mut Vec<Action>) {
        for who in [Who::A, Who::B] {
            let p = s.producer(who);
            // A call that would answer CONCURRENT_TRANSACTIONS waits.
            let may_call = s.check_producer(p.epoch) != Check::Concurrent;
            match p.phase {
                Phase::NotStarted => {
                    if !s.coord.state.is_prepare() {
                        actions.push(Action::InitProducerId);
                    }
                }
                Phase::Idle => {
                    if p.txns_left > 0 {
                        for (i, r) in s.records.iter().enumerate() {
                            // A fresh delivery, or a record its member still
                            // holds (an aborted staging came back ACQUIRED):
                            // the next transaction may process it again.
                            let fresh = r.state == RecState::Available
                                && r.deliveries < self.bounds.delivery_limit;
                            if fresh || r.state == RecState::Acquired(who) {
                                actions.push(Action::Acquire(who, i as u8));
                            }
                        }
                    }
                }
                Phase::Acquired(_) if may_call => actions.push(Action::Produce(who)),
                Phase::Produced(_) if may_call => actions.push(Action::Verify(who)),
                Phase::Verified(_) if may_call => actions.push(Action::Register(who)),
                Phase::Registered(_) => {
                    if self.variant.stage_check() == StageCheck::Racy {
                        actions.push(Action::CheckTxn(who));
                    } else {
                        actions.push(Action::Stage(who));
                    }
                }
                Phase::Checked(_) => actions.push(Action::Stage(who)),
                Phase::Staged(_) => actions.push(Action::EndTxn(who, true)),
                Phase::MustAbort => actions.push(Action::EndTxn(who, false)),
                Phase::Acquired(_) | Phase::Produced(_) | Phase::Verified(_) | Phase::Dead => {}
            }
        }
        if s.coord.state == TxnState::Ongoing && s.timeouts_used < self.bounds.timeouts {
            actions.push(Action::Timeout);
        }
        if s.coord.pending.is_some() && s.resends_used < self.bounds.resends {
            actions.push(Action::Resend);
        }
        actions.extend(distinct(&s.to_partition).map(Action::DeliverMarker));
        actions.extend(distinct(&s.to_coordinator).map(Action::DeliverAck));
        for (i, r) in s.records.iter().enumerate() {
            if matches!(r.state, RecState::Acquired(_)) {
                actions.push(Action::LockExpires(i as u8));
            }
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut s = last.clone();
        match action {
            Action::Acquire(who, i) => {
                let r = &mut s.records[usize::from(i)];
                if r.state == RecState::Available {
                    r.state = RecState::Acquired(who);
                    r.deliveries += 1;
                }
                s.producer_mut(who).phase = Phase::Acquired(i);
            }
            Action::Produce(who) => {
                let p = *s.producer(who);
                let Phase::Acquired(i) = p.phase else {
                    unreachable!()
                };
                match s.check_producer(p.epoch) {
                    Check::Ok => {
                        if s.coord.state != TxnState::Ongoing {
                            s.coord.state = TxnState::Ongoing;
                            s.coord.share_registered = false;
                        }
                        s.outputs.push(Output {
                            record: i,
                            epoch: p.epoch,
                            by: who,
                            status: OutStatus::Pending,
                        });
                        s.outputs.sort();
                        s.producer_mut(who).phase = Phase::Produced(i);
                    }
                    Check::Fenced => s.producer_mut(who).phase = Phase::Dead,
                    Check::Concurrent => return None,
                }
            }
            Action::Verify(who) | Action::Register(who) => {
                let p = *s.producer(who);
                match s.check_producer(p.epoch) {
                    Check::Ok => {
                        s.producer_mut(who).phase = match (action, p.phase) {
                            (Action::Verify(_), Phase::Produced(i)) => Phase::Verified(i),
                            (Action::Register(_), Phase::Verified(i)) => {
                                s.coord.share_registered = true;
                                Phase::Registered(i)
                            }
                            other => unreachable!("{other:?}"),
                        };
                    }
                    Check::Fenced => s.producer_mut(who).phase = Phase::Dead,
                    Check::Concurrent => return None,
                }
            }
            Action::CheckTxn(who) => {
                let p = *s.producer(who);
                let Phase::Registered(i) = p.phase else {
                    unreachable!()
                };
                s.producer_mut(who).phase = if s.txn_still_ongoing(p.epoch) {
                    Phase::Checked(i)
                } else {
                    Phase::Dead
                };
            }
            Action::Stage(who) => {
                let p = *s.producer(who);
                let (Phase::Registered(i) | Phase::Checked(i)) = p.phase else {
                    unreachable!()
                };
                let fenced = (self.variant.stage_check() == StageCheck::Atomic
                    && !s.txn_still_ongoing(p.epoch))
                    || (self.variant.fence_floor() && s.marker_floor.is_some_and(|f| p.epoch < f));
                let r = &mut s.records[usize::from(i)];
                let next = if fenced {
                    // PRODUCER_FENCED: nothing staged.
                    Phase::Dead
                } else if r.state == RecState::Acquired(who) {
                    r.state = RecState::TxPending {
                        epoch: p.epoch,
                        member: who,
                    };
                    Phase::Staged(i)
                } else {
                    // INVALID_RECORD_STATE: the client aborts.
                    Phase::MustAbort
                };
                s.producer_mut(who).phase = next;
            }
            Action::EndTxn(who, commit) => {
                let p = *s.producer(who);
                if s.coord.epoch == p.epoch && s.coord.state == TxnState::Ongoing {
                    s.decide(if commit { Kind::Commit } else { Kind::Abort }, self);
                    let p = s.producer_mut(who);
                    p.epoch += 1;
                    p.phase = Phase::Idle;
                    p.txns_left -= 1;
                } else {
                    s.producer_mut(who).phase = Phase::Dead;
                }
            }
            Action::InitProducerId => match s.coord.state {
                TxnState::Ongoing => s.decide(Kind::ImposedAbort, self),
                TxnState::PrepareCommit | TxnState::PrepareAbort => return None,
                TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort => {
                    s.coord.epoch += 1;
                    s.coord.state = TxnState::Empty;
                    s.coord.share_registered = false;
                    let epoch = s.coord.epoch;
                    let b = s.producer_mut(Who::B);
                    b.epoch = epoch;
                    b.phase = Phase::Idle;
                }
            },
            Action::Timeout => {
                s.timeouts_used += 1;
                s.decide(Kind::ImposedAbort, self);
            }
            Action::Resend => {
                s.resends_used += 1;
                let m = s.coord.pending.expect("enabled only while pending");
                push_sorted(&mut s.to_partition, m);
            }
            Action::DeliverMarker(marker) => {
                assert!(remove_one(&mut s.to_partition, marker));
                s.apply_marker(marker, self);
                if s.coord.pending == Some(marker) {
                    push_sorted(&mut s.to_coordinator, marker);
                }
            }
            Action::DeliverAck(marker) => {
                assert!(remove_one(&mut s.to_coordinator, marker));
                if s.coord.pending == Some(marker) {
                    s.complete(self);
                }
            }
            Action::LockExpires(i) => {
                let limit = self.bounds.delivery_limit;
                let r = &mut s.records[usize::from(i)];
                r.state = if r.deliveries >= limit {
                    RecState::Archived
                } else {
                    RecState::Available
                };
            }
        }
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(NO_LOSS, |_, s: &State| {
                s.records
                    .iter()
                    .enumerate()
                    .all(|(i, r)| r.state != RecState::Acknowledged || s.committed_outputs(i) > 0)
            }),
            Property::always(NO_DUPLICATE, |_, s: &State| {
                (0..s.records.len()).all(|i| s.committed_outputs(i) <= 1)
            }),
            Property::always(NO_STUCK, |_, s: &State| {
                !s.quiescent()
                    || s.records
                        .iter()
                        .all(|r| !matches!(r.state, RecState::TxPending { .. }))
            }),
            Property::sometimes(ACKNOWLEDGED, |_, s: &State| {
                s.records.iter().any(|r| r.state == RecState::Acknowledged)
            }),
        ]
    }
}

const NO_LOSS: &str = "no loss: an acknowledged record has a committed output";
const NO_DUPLICATE: &str = "no duplicate: at most one committed output per record";
const NO_STUCK: &str = "no stuck record: quiescent => no TX_PENDING";
const ACKNOWLEDGED: &str = "sometimes a record is acknowledged";
const SAFETY: [&str; 3] = [NO_LOSS, NO_DUPLICATE, NO_STUCK];

// ---------------------------------------------------------------------------
// Running the checker
// ---------------------------------------------------------------------------

/// The outcome of one exhaustive run.
struct Run {
    model: Kip1289,
    violated: Vec<(&'static str, Path<State, Action>)>,
    acknowledged_reachable: bool,
}

impl Run {
    fn violated(&self, name: &str) -> Option<&Path<State, Action>> {
        self.violated
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, p)| p)
    }

    fn holds(&self, name: &str) -> bool {
        self.violated(name).is_none()
    }

    fn print_counterexamples(&self) {
        for (name, path) in &self.violated {
            println!(
                "  counterexample for \"{name}\" ({} steps):",
                step_count(path)
            );
            print_path(path);
        }
    }

    fn assert_all_hold(&self) {
        assert!(
            self.violated.is_empty(),
            "{:?}: expected every property to hold, violated: {:?}",
            self.model.variant,
            self.violated.iter().map(|(n, _)| *n).collect::<Vec<_>>()
        );
        assert!(
            self.acknowledged_reachable,
            "the model never acknowledges a record: vacuous"
        );
    }
}

/// Explores every state reachable within the bounds (BFS), then finds a
/// shortest counterexample for each violated property.
fn check(variant: Variant, bounds: Bounds) -> Run {
    check_model(Kip1289::new(variant, bounds))
}

fn check_model(model: Kip1289) -> Run {
    let Kip1289 {
        variant,
        bounds,
        imposed_abort_releases,
    } = model;
    let start = Instant::now();
    let checker = model.checker().spawn_bfs().join();
    let elapsed = start.elapsed();
    assert!(checker.is_done());
    let discovered: Vec<&'static str> = SAFETY
        .into_iter()
        .filter(|name| checker.discovery(name).is_some())
        .collect();
    let acknowledged_reachable = checker.discovery(ACKNOWLEDGED).is_some();
    // The checker stops once every property has a discovery; otherwise it
    // visited every reachable state.
    let exhaustive = discovered.len() < SAFETY.len() || !acknowledged_reachable;
    println!(
        "{variant:?} {bounds:?}{}: {} unique states ({} generated, max depth {}) in {elapsed:.2?}{}",
        if imposed_abort_releases {
            " imposed aborts release"
        } else {
            ""
        },
        checker.unique_state_count(),
        checker.state_count(),
        checker.max_depth(),
        if exhaustive {
            ", exhaustive"
        } else {
            ", stopped: every property has a discovery"
        },
    );
    for name in SAFETY {
        println!(
            "  {:<9} {name}",
            if discovered.contains(&name) {
                "VIOLATED"
            } else {
                "holds"
            }
        );
    }
    let start = Instant::now();
    let violated: Vec<_> = discovered
        .into_iter()
        .map(|name| {
            let upper = checker.max_depth() + 1;
            (name, shortest_counterexample(model, name, upper))
        })
        .collect();
    if !violated.is_empty() {
        println!(
            "  shortest counterexamples found in {:.2?}",
            start.elapsed()
        );
    }
    let run = Run {
        model,
        violated,
        acknowledged_reachable,
    };
    run.print_counterexamples();
    run
}

/// The checker records the last violating state it visits, not the first,
/// so its path need not be a shortest one. A binary search on the depth
/// bound finds one: at the smallest bound with a discovery, every discovery
/// is at the deepest level. `upper` is a bound with a discovery.
fn shortest_counterexample(
    model: Kip1289,
    name: &'static str,
    upper: usize,
) -> Path<State, Action> {
    let within = |depth: usize| {
        model
            .checker()
            .finish_when(HasDiscoveries::AnyOf([name].into()))
            .target_max_depth(depth)
            .spawn_bfs()
            .join()
            .discovery(name)
    };
    // No discovery below depth 1 (the initial state); one within `upper`.
    let (mut lo, mut hi) = (1, upper);
    let mut best = within(hi).expect("a counterexample within the explored depth");
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        match within(mid) {
            Some(path) => {
                hi = mid;
                best = path;
            }
            None => lo = mid,
        }
    }
    best
}

fn summary(s: &State) -> String {
    format!(
        "coordinator {:?}@{}{}, records {:?}, floor {:?}, in flight {:?}, outputs {:?}",
        s.coord.state,
        s.coord.epoch,
        if s.coord.share_registered {
            "+share"
        } else {
            ""
        },
        s.records.iter().map(|r| r.state).collect::<Vec<_>>(),
        s.marker_floor,
        s.to_partition,
        s.outputs
            .iter()
            .map(|o| format!("r{}@{}:{:?}", o.record, o.epoch, o.status))
            .collect::<Vec<_>>(),
    )
}

fn print_path(path: &Path<State, Action>) {
    let steps = path.clone().into_vec();
    for pair in steps.windows(2) {
        let (_, Some(action)) = &pair[0] else {
            unreachable!("every state but the last has its action")
        };
        println!("    - {action:?}");
        println!("        => {}", summary(&pair[1].0));
    }
}

fn step_count(path: &Path<State, Action>) -> usize {
    path.clone().into_actions().len()
}

// ---------------------------------------------------------------------------
// Deterministic replay
// ---------------------------------------------------------------------------

/// Runs `steps` from the initial state, each of which must be enabled.
fn replay(model: &Kip1289, steps: &[Action]) -> State {
    let mut s = model.init_states().remove(0);
    for (n, &a) in steps.iter().enumerate() {
        let mut enabled = Vec::new();
        model.actions(&s, &mut enabled);
        assert!(
            enabled.contains(&a),
            "{:?}: step {n} {a:?} not enabled in {s:?} (enabled: {enabled:?})",
            model.variant
        );
        s = model
            .next_state(&s, a)
            .expect("an enabled action changes the state");
    }
    s
}

fn holds_in(model: &Kip1289, name: &str, s: &State) -> bool {
    let props = model.properties();
    let p = props
        .iter()
        .find(|p| p.name == name)
        .expect("known property");
    (p.condition)(model, s)
}

fn last_stage(actions: &[Action]) -> usize {
    actions
        .iter()
        .rposition(|a| matches!(a, Action::Stage(_)))
        .expect("a stage step")
}

/// InitProducerId fences only an Ongoing transaction, and the counterexample
/// paths call it once for that (and at most once more to start B).
fn is_fence(a: &Action) -> bool {
    matches!(a, Action::InitProducerId | Action::Timeout)
}

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

/// Today's code: the checker finds the stuck record (the stage after the
/// fence), and, once a marker may land after its transaction completed,
/// a loss and a duplicate.
#[test]
fn broken_variant_fails() {
    let run = check(Variant::Broken, Bounds::FENCE);
    let path = run
        .violated(NO_STUCK)
        .expect("Broken must leave a record TX_PENDING with no transaction");
    let last = path.last_state();
    assert!(last.quiescent());
    assert!(
        last.records
            .iter()
            .any(|r| matches!(r.state, RecState::TxPending { .. }))
    );
    // The stage that left the record TX_PENDING landed after a fence.
    let actions = path.clone().into_actions();
    let stage = last_stage(&actions);
    assert!(
        actions[..stage].iter().any(is_fence),
        "the stage comes after a fence: {actions:?}"
    );
    // Without late markers, the fence race loses nothing: the late entry is
    // never resolved (every later marker is at an epoch >= staged + 2).
    assert!(run.holds(NO_LOSS));
    assert!(run.holds(NO_DUPLICATE));

    // The same with B's InitProducerId as the only fence.
    let by_b = check(Variant::Broken, Bounds::FENCE_BY_B);
    let actions = by_b
        .violated(NO_STUCK)
        .expect("B's fence leaves the record stuck too")
        .clone()
        .into_actions();
    let stage = last_stage(&actions);
    assert!(actions[..stage].contains(&Action::InitProducerId));
    assert!(!actions.contains(&Action::Timeout));

    let wide = check(Variant::Broken, Bounds::WIDE);
    assert!(!wide.holds(NO_STUCK));
    assert!(wide.holds(NO_LOSS) && wide.holds(NO_DUPLICATE));

    let late = check(Variant::Broken, Bounds::WIDE_LATE);
    for name in SAFETY {
        assert!(
            !late.holds(name),
            "Broken with late markers must violate {name}"
        );
    }
}

/// (a) + (b, atomic), the fix being implemented: every property holds as
/// long as no marker lands after its transaction completed.
#[test]
fn fixed_floor_and_atomic_check_pass() {
    check(Variant::FLOOR_AND_CHECK, Bounds::FENCE).assert_all_hold();
    check(Variant::FLOOR_AND_CHECK, Bounds::WIDE).assert_all_hold();
}

/// (a) alone (what `partition.rs` has now, D16) is enough for the fence
/// race: a stage that lands after the abort marker is refused, one that
/// lands before it is resolved by it.
#[test]
fn fixed_floor_only_passes() {
    let v = Variant::Fixed {
        fence_floor: true,
        stage_check: StageCheck::None,
        ignore_stale_markers: false,
    };
    check(v, Bounds::FENCE).assert_all_hold();
    check(v, Bounds::WIDE).assert_all_hold();
}

/// (b) alone. Atomic with the coordinator (the stage runs in the
/// coordinator's order, so a fence is either before it, and the stage is
/// refused, or after it, and its abort marker resolves the staged record):
/// passes. Racy (check, then stage, as two steps): the fence can still land
/// between them, so it fails exactly like today: the check only moves the
/// window. (b) does not have to be atomic with the marker's delivery: the
/// marker is queued by the fence itself, so any stage ordered before the
/// fence is older than the marker's delivery.
#[test]
fn fixed_stage_check_only() {
    let atomic = Variant::Fixed {
        fence_floor: false,
        stage_check: StageCheck::Atomic,
        ignore_stale_markers: false,
    };
    check(atomic, Bounds::FENCE).assert_all_hold();
    check(atomic, Bounds::WIDE).assert_all_hold();

    let racy = Variant::Fixed {
        fence_floor: false,
        stage_check: StageCheck::Racy,
        ignore_stale_markers: false,
    };
    let run = check(racy, Bounds::FENCE);
    let path = run
        .violated(NO_STUCK)
        .expect("a non-atomic re-check still lets the stage land after the fence");
    let actions = path.clone().into_actions();
    let stage = last_stage(&actions);
    let checked = actions[..stage]
        .iter()
        .rposition(|a| matches!(a, Action::CheckTxn(_)))
        .expect("a check step before the stage");
    assert!(
        actions[checked..stage].iter().any(is_fence),
        "the fence lands between the check and the stage: {actions:?}"
    );
}

/// Markers that land after their transaction completed (a re-send racing
/// the first delivery) break (a) + (b): a late copy of the commit marker at
/// M resolves what the next transaction staged at M (D4 matches M and
/// M - 1). This documents the remaining hole.
#[test]
fn fixed_floor_and_check_fail_with_late_duplicate_markers() {
    let run = check(Variant::FLOOR_AND_CHECK, Bounds::WIDE_LATE);
    assert!(run.holds(NO_STUCK));
    let loss = run
        .violated(NO_LOSS)
        .expect("a late commit copy loses a record");
    assert!(
        loss.clone()
            .into_actions()
            .iter()
            .any(|a| matches!(a, Action::Resend)),
        "the loss needs a duplicate marker"
    );
    assert!(!run.holds(NO_DUPLICATE));
}

/// (c): ignoring markers at or below the floor closes that hole; with (a)
/// it passes everything, late duplicates included; with (a) + (b) too.
#[test]
fn fixed_with_stale_marker_filter_passes_with_late_duplicates() {
    for stage_check in [StageCheck::None, StageCheck::Atomic] {
        let v = Variant::Fixed {
            fence_floor: true,
            stage_check,
            ignore_stale_markers: true,
        };
        check(v, Bounds::FENCE).assert_all_hold();
        check(v, Bounds::WIDE_LATE).assert_all_hold();
    }
    // (c) without (a) is not enough: the stage after the fence is stuck.
    let only_c = Variant::Fixed {
        fence_floor: false,
        stage_check: StageCheck::None,
        ignore_stale_markers: true,
    };
    let run = check(only_c, Bounds::WIDE_LATE);
    assert!(!run.holds(NO_STUCK));
    assert!(run.holds(NO_LOSS) && run.holds(NO_DUPLICATE));
}

/// The change in progress in `Shares::apply_marker`: an imposed abort
/// (fence, timeout) releases the staged records to Available instead of
/// handing them back to the zombie's member. It changes none of the
/// results above.
#[test]
fn imposed_abort_release_changes_no_result() {
    let model = |v| Kip1289::new(v, Bounds::WIDE).releasing_on_imposed_abort();
    let broken = check_model(model(Variant::Broken));
    assert!(!broken.holds(NO_STUCK));
    assert!(broken.holds(NO_LOSS) && broken.holds(NO_DUPLICATE));
    check_model(model(Variant::FLOOR_AND_CHECK)).assert_all_hold();
    check_model(model(Variant::Fixed {
        fence_floor: true,
        stage_check: StageCheck::None,
        ignore_stale_markers: false,
    }))
    .assert_all_hold();
    let late =
        Kip1289::new(Variant::FLOOR_AND_CHECK, Bounds::WIDE_LATE).releasing_on_imposed_abort();
    let run = check_model(late);
    assert!(!run.holds(NO_LOSS) && !run.holds(NO_DUPLICATE));
    let fixed_c = Kip1289::new(
        Variant::Fixed {
            fence_floor: true,
            stage_check: StageCheck::None,
            ignore_stale_markers: true,
        },
        Bounds::WIDE_LATE,
    )
    .releasing_on_imposed_abort();
    check_model(fixed_c).assert_all_hold();
}

/// A's TxnShareAcknowledge crosses B's fence: steps 1 and 2 before the
/// fence, step 3 after its abort marker was applied.
const STAGE_AFTER_FENCE: [Action; 8] = [
    Action::Acquire(Who::A, 0),
    Action::Produce(Who::A),
    Action::Verify(Who::A),   // step 1: epoch 0 is current
    Action::Register(Who::A), // step 2: share participant registered
    Action::InitProducerId,   // B: fence, epoch 1, PrepareAbort, abort@1
    Action::DeliverMarker(marker(1, Kind::ImposedAbort)), // resolves nothing yet
    Action::DeliverAck(marker(1, Kind::ImposedAbort)), // CompleteAbort
    Action::Stage(Who::A),    // step 3, at epoch 0
];

#[test]
fn regression_sequence_stage_after_fence() {
    let finish = [
        Action::EndTxn(Who::A, true), // PRODUCER_FENCED: A is dead
        Action::InitProducerId,       // B: epoch 2
    ];
    let steps: Vec<Action> = STAGE_AFTER_FENCE.iter().chain(&finish).copied().collect();

    // Broken: record 0 is TX_PENDING at epoch 0 and no marker will ever
    // resolve it (markers from now on are at epochs >= 3).
    let broken = Kip1289::new(Variant::Broken, Bounds::FENCE);
    let s = replay(&broken, &steps);
    assert_eq!(
        s.records[0].state,
        RecState::TxPending {
            epoch: 0,
            member: Who::A
        }
    );
    assert_eq!(s.coord.epoch, 2);
    assert_eq!(s.producer(Who::A).phase, Phase::Dead);
    assert!(s.quiescent());
    assert!(!holds_in(&broken, NO_STUCK, &s));
    // B cannot take the record.
    let mut enabled = Vec::new();
    broken.actions(&s, &mut enabled);
    assert!(!enabled.contains(&Action::Acquire(Who::B, 0)));

    // Fixed, each of (a), (b) atomic, and both: the stage is refused
    // (PRODUCER_FENCED, A dead), nothing is staged, the record's lock
    // expires and B delivers it exactly once.
    for variant in [
        Variant::FLOOR_AND_CHECK,
        Variant::Fixed {
            fence_floor: true,
            stage_check: StageCheck::None,
            ignore_stale_markers: false,
        },
        Variant::Fixed {
            fence_floor: false,
            stage_check: StageCheck::Atomic,
            ignore_stale_markers: false,
        },
    ] {
        let fixed = Kip1289::new(variant, Bounds::FENCE);
        let s = replay(&fixed, &STAGE_AFTER_FENCE);
        assert_eq!(
            s.records[0].state,
            RecState::Acquired(Who::A),
            "{variant:?}"
        );
        assert_eq!(s.producer(Who::A).phase, Phase::Dead, "{variant:?}");
        let b_runs = [
            Action::InitProducerId, // epoch 2
            Action::LockExpires(0),
            Action::Acquire(Who::B, 0),
            Action::Produce(Who::B),
            Action::Verify(Who::B),
            Action::Register(Who::B),
            Action::Stage(Who::B),
            Action::EndTxn(Who::B, true), // commit@3
            Action::DeliverMarker(marker(3, Kind::Commit)),
            Action::DeliverAck(marker(3, Kind::Commit)),
        ];
        let steps: Vec<Action> = STAGE_AFTER_FENCE.iter().chain(&b_runs).copied().collect();
        let s = replay(&fixed, &steps);
        assert_eq!(s.records[0].state, RecState::Acknowledged, "{variant:?}");
        assert_eq!(s.committed_outputs(0), 1, "{variant:?}");
        assert!(s.quiescent());
        for name in SAFETY {
            assert!(holds_in(&fixed, name, &s), "{variant:?}: {name}");
        }
    }
}

/// The loss found with late duplicate markers, on (a) + (b) and on today's
/// code: A's first transaction commits (marker commit@1, sent twice); its
/// second transaction runs at epoch 1 and stages record 1 at epoch 1; the
/// late copy of commit@1 lands and D4 (epoch 1 == M) resolves record 1 as
/// ACKNOWLEDGED; B's fence then aborts the second transaction, and its
/// output of record 1 with it.
#[test]
fn regression_sequence_late_duplicate_marker() {
    let commit1 = marker(1, Kind::Commit);
    let steps = [
        Action::Acquire(Who::A, 0),
        Action::Produce(Who::A),
        Action::Verify(Who::A),
        Action::Register(Who::A),
        Action::Stage(Who::A),
        Action::EndTxn(Who::A, true), // epoch 1, PrepareCommit, commit@1
        Action::Resend,               // a second copy of commit@1
        Action::DeliverMarker(commit1),
        Action::DeliverAck(commit1), // CompleteCommit: record 0 acknowledged
        Action::Acquire(Who::A, 1),
        Action::Produce(Who::A), // transaction at epoch 1
        Action::Verify(Who::A),
        Action::Register(Who::A),
        Action::Stage(Who::A),          // record 1 TX_PENDING at epoch 1
        Action::DeliverMarker(commit1), // the late copy
        Action::InitProducerId,         // B fences: abort@2
    ];
    for variant in [Variant::Broken, Variant::FLOOR_AND_CHECK] {
        let model = Kip1289::new(variant, Bounds::WIDE_LATE);
        let s = replay(&model, &steps);
        assert_eq!(s.records[1].state, RecState::Acknowledged, "{variant:?}");
        assert_eq!(s.committed_outputs(1), 0, "{variant:?}");
        assert!(!holds_in(&model, NO_LOSS, &s), "{variant:?}");
    }
    // (c) ignores the late copy (epoch 1 <= floor 1): record 1 stays
    // TX_PENDING for the fence's abort marker, which gives it back.
    let model = Kip1289::new(
        Variant::Fixed {
            fence_floor: true,
            stage_check: StageCheck::Atomic,
            ignore_stale_markers: true,
        },
        Bounds::WIDE_LATE,
    );
    let s = replay(&model, &steps);
    assert_eq!(
        s.records[1].state,
        RecState::TxPending {
            epoch: 1,
            member: Who::A
        }
    );
    let abort2 = marker(2, Kind::ImposedAbort);
    let s = replay(
        &model,
        &[
            &steps[..],
            &[Action::DeliverMarker(abort2), Action::DeliverAck(abort2)],
        ]
        .concat(),
    );
    assert_eq!(s.records[1].state, RecState::Acquired(Who::A));
    for name in SAFETY {
        assert!(holds_in(&model, name, &s), "{name}");
    }
}

/// Wider bounds (two transactions each, two timeouts, two re-sends), for a
/// manual run: `cargo test --release --test model_kip1289 -- --ignored
/// --nocapture`.
#[test]
#[ignore = "wider bounds: about 50 s in debug mode"]
fn wider_bounds() {
    let wider = Bounds {
        records: 2,
        a_txns: 3,
        b_txns: 2,
        timeouts: 2,
        resends: 2,
        delivery_limit: 3,
        late_duplicates: false,
    };
    let late = Bounds {
        late_duplicates: true,
        ..wider
    };
    for variant in [
        Variant::FLOOR_AND_CHECK,
        Variant::Fixed {
            fence_floor: true,
            stage_check: StageCheck::None,
            ignore_stale_markers: false,
        },
        Variant::Fixed {
            fence_floor: false,
            stage_check: StageCheck::Atomic,
            ignore_stale_markers: false,
        },
    ] {
        check(variant, wider).assert_all_hold();
    }
    for stage_check in [StageCheck::None, StageCheck::Atomic] {
        let v = Variant::Fixed {
            fence_floor: true,
            stage_check,
            ignore_stale_markers: true,
        };
        check(v, late).assert_all_hold();
    }
}
