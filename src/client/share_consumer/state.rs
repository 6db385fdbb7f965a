//! The consumer's acknowledgement bookkeeping, without I/O.
//!
//! [`AcknowledgementState`] knows the records the latest poll delivered and
//! what became of each: still waiting, acknowledged (the acknowledgement is
//! *pending*, to be sent on the next ShareFetch or ShareAcknowledge), or
//! taken into a transaction. It enforces Kafka's rules:
//!
//! - **implicit mode**: `acknowledge` is refused; at the next poll (or
//!   commit) every delivered record that is still waiting is ACCEPTed.
//! - **explicit mode**: a poll while a delivered record is still waiting is
//!   refused with [`ConsumerError::IllegalState`], as Java's
//!   `KafkaShareConsumer.poll` throws IllegalStateException; the state is
//!   left as it was so that the application can acknowledge and poll again.
//!   Only records of the latest poll can be acknowledged; one offset can be
//!   acknowledged once (the same type again is harmless).
//! - **gaps**: acquired offsets without a record are added as pending GAP
//!   acknowledgements by the fetch path (D5). With
//!   [`AcknowledgementState::set_gaps_in_transaction`] (the runtime's
//!   KIP-1289 path) they are *held* instead and ride in the next
//!   transaction, as the KIP author's branch allows: a poll that starts
//!   while no transaction is under way (nothing taken since the last seal)
//!   and after a poll whose records went into none sends the held gaps as
//!   ordinary acknowledgements, so gaps never wait for a transaction that
//!   does not come.
//! - **whole acquired ranges** (D39): the ranges each
//!   fetch acquired are remembered
//!   ([`AcknowledgementState::add_acquired`]). The pending
//!   acknowledgements that ride on a fetch
//!   ([`AcknowledgementState::take_pending_for_fetch`]) leave out those of
//!   a range only partly acknowledged, once: they wait one fetch for the
//!   rest of their range (records still in the consumer's buffer, handed
//!   out by the next poll), so that the broker receives the range whole.
//!   Kafka's broker keeps an acquired range as one in-flight batch; an
//!   acknowledgement that covers part of it splits it into a state per
//!   offset, which it then tracks, and persists, offset by offset. Commits
//!   and `close` send everything ([`AcknowledgementState::take_pending`]).
//!   In both modes: in implicit mode the rest of the range is accepted at
//!   the next poll; in explicit mode the application (the runtime's
//!   workers, for one) usually acknowledges it by then too, and when it
//!   does not (it set records aside, or took them into a transaction),
//!   what it did acknowledge goes one request late.
//!
//! # Transactions (KIP-1289, D6, D8)
//!
//! [`AcknowledgementState::acknowledge_in_transaction`] takes a delivered
//! record out of the consumer's own acknowledgement path: nothing is sent
//! for it by the consumer (D8: the producer stages it with
//! TxnShareAcknowledge). Such records collect in the *open* transaction set
//! until [`AcknowledgementState::take_transaction`] seals them under a
//! [`TransactionAcknowledgementsId`] and returns them as
//! [`PartitionAcknowledgements`] for the producer. The consumer keeps the
//! records themselves until [`AcknowledgementState::transaction_outcome`]:
//! on commit they are forgotten; on abort they are queued to be handed out
//! again by the next poll, unchanged (same offset, same delivery count): the
//! broker put them back to ACQUIRED for this member with a fresh lock (D6),
//! so no fetch is needed and the runtime simply processes them again.
//! Gaps sealed with a transaction go back to the held gaps on abort.
//!
//! [`AcknowledgementState::acknowledgements_for_transaction`] is the KIP
//! author's branch API: it drains the ordinary acknowledgement path
//! (records acknowledged with `acknowledge`, ACCEPT or REJECT, and the
//! gaps) into a [`ShareAcknowledgements`] for the producer, and keeps
//! nothing: what the transaction does to them is the broker's business
//! (D25).

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use uuid::Uuid;

use super::config::AcknowledgementMode;
use super::error::ConsumerError;
use super::record::ShareRecord;
use crate::eos::{
    AcknowledgeType, Acknowledgements, PartitionAcknowledgements, ShareAcknowledgements,
    TopicIdPartition,
};

/// How many acquired ranges are remembered per share partition (D39);
/// the oldest is forgotten first (its acknowledgements then go as they
/// come, as they would without the rule).
const ACQUIRED_RANGES_KEPT: usize = 16;

/// A range of offsets one fetch acquired (D39).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct AcquiredSpan {
    first: i64,
    last: i64,
    /// Its acknowledgements were left out of a fetch once already.
    held: bool,
}

/// Names one sealed set of acknowledgements taken for a transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TransactionAcknowledgementsId(pub u64);

/// How a transaction ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TransactionOutcome {
    /// EndTxn(commit) succeeded: the staged acknowledgements took effect.
    Committed,
    /// The transaction aborted at the producer's request (EndTxn abort):
    /// the records are still acquired by this member and come back in the
    /// next poll.
    Aborted,
    /// The transaction aborted and the broker no longer holds the records
    /// for this member (it answered INVALID_RECORD_STATE, for example after
    /// it restarted and lost its in-memory acquisitions, or after their
    /// acquisition lock expired, or when the producer was fenced or its
    /// transaction timed out: the coordinator imposed that abort and the
    /// broker released the records): handing them back would fail the same way
    /// on every retry, so they are forgotten. The broker delivers them
    /// again, to this member or another, once they are available.
    Abandoned,
}

/// Acknowledgements taken out of the consumer for one transaction.
#[derive(Debug, Clone)]
pub struct TransactionAcknowledgements {
    /// Give this back to `transaction_outcome` once the transaction ended.
    pub id: TransactionAcknowledgementsId,
    /// What to stage (ACCEPT, REJECT and, with gaps in transactions,
    /// GAP), per share partition.
    pub acknowledgements: PartitionAcknowledgements,
}

impl From<&TransactionAcknowledgements> for ShareAcknowledgements {
    fn from(t: &TransactionAcknowledgements) -> Self {
        ShareAcknowledgements::from(&t.acknowledgements)
    }
}

/// What became of one delivered offset. The record itself stays with the
/// application: the consumer keeps no copy of it (a record taken into a
/// transaction is cloned then, from the caller's reference).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Delivered {
    Waiting,
    Acknowledged(AcknowledgeType),
    InTransaction(AcknowledgeType),
}

/// The offsets of one share partition delivered by the latest poll.
#[derive(Debug)]
struct PartitionDelivery {
    tp: TopicIdPartition,
    /// Sorted by offset, one entry per offset.
    offsets: Vec<(i64, Delivered)>,
}

/// See the module documentation.
#[derive(Debug)]
pub struct AcknowledgementState {
    mode: AcknowledgementMode,
    /// Per share partition (a poll covers few partitions, so a vector
    /// searched by topic id and partition; no per-record key or copy).
    delivered: Vec<PartitionDelivery>,
    /// Delivered offsets still `Waiting`.
    waiting: usize,
    pending: PartitionAcknowledgements,
    /// Acknowledgements set aside, to be sent later (`set_aside`).
    set_aside: PartitionAcknowledgements,
    /// Delivered records whose acquisition locks are to be renewed
    /// (KIP-1222); they stay waiting for their final acknowledgement.
    renewals: BTreeMap<TopicIdPartition, BTreeSet<i64>>,
    open_transaction: Vec<(ShareRecord, AcknowledgeType)>,
    sealed: BTreeMap<TransactionAcknowledgementsId, Vec<ShareRecord>>,
    /// The gaps sealed with each transaction (gaps in transactions).
    sealed_gaps: BTreeMap<TransactionAcknowledgementsId, PartitionAcknowledgements>,
    next_transaction: u64,
    handed_back: VecDeque<ShareRecord>,
    /// Gaps go into the next transaction instead of the pending
    /// acknowledgements.
    gaps_in_transaction: bool,
    /// Gaps held for the next transaction.
    held_gaps: PartitionAcknowledgements,
    /// Something was taken for a transaction since the last poll began.
    transactional_since_poll: bool,
    /// The ranges fetches acquired, per share partition, oldest first,
    /// until their acknowledgements went out (D39).
    acquired: BTreeMap<TopicIdPartition, VecDeque<AcquiredSpan>>,
}

impl AcknowledgementState {
    /// Empty state for `mode`.
    pub fn new(mode: AcknowledgementMode) -> Self {
        Self {
            mode,
            delivered: Vec::new(),
            waiting: 0,
            pending: PartitionAcknowledgements::new(),
            set_aside: PartitionAcknowledgements::new(),
            renewals: BTreeMap::new(),
            open_transaction: Vec::new(),
            sealed: BTreeMap::new(),
            sealed_gaps: BTreeMap::new(),
            next_transaction: 1,
            handed_back: VecDeque::new(),
            gaps_in_transaction: false,
            held_gaps: PartitionAcknowledgements::new(),
            transactional_since_poll: false,
            acquired: BTreeMap::new(),
        }
    }

    /// Whether gaps ride in transactions (see the module docs). Turning it
    /// off releases the held gaps to the pending acknowledgements.
    pub fn set_gaps_in_transaction(&mut self, on: bool) {
        self.gaps_in_transaction = on;
        if !on {
            self.release_held_gaps();
        }
    }

    /// Moves the held gaps to the pending acknowledgements (sent with the
    /// next request).
    pub fn release_held_gaps(&mut self) {
        for (tp, acks) in self.held_gaps.take().into_partitions() {
            self.restore_pending(&tp, &acks);
        }
    }

    /// Gaps held for the next transaction.
    pub fn held_gaps(&self) -> usize {
        self.held_gaps.len()
    }

    /// The acknowledgement mode.
    pub fn mode(&self) -> AcknowledgementMode {
        self.mode
    }

    /// Called at the start of a poll: checks the explicit-mode rule, accepts
    /// the waiting records in implicit mode, and forgets the previous
    /// delivery.
    pub fn begin_poll(&mut self) -> Result<(), ConsumerError> {
        let waiting = self.waiting;
        if waiting > 0 && self.mode == AcknowledgementMode::Explicit {
            return Err(ConsumerError::IllegalState(format!(
                "all records must be acknowledged in explicit acknowledgement mode \
                 ({waiting} of the previous poll are not)"
            )));
        }
        self.accept_waiting();
        if self.open_transaction.is_empty() && !self.transactional_since_poll {
            // No transaction is under way, and the last poll's records went
            // into none: the gaps would wait for one that may never come.
            self.release_held_gaps();
        }
        self.transactional_since_poll = false;
        self.delivered.clear();
        self.waiting = 0;
        self.renewals.clear();
        Ok(())
    }

    /// Implicit mode: accepts every record still waiting (a commit does
    /// this, as Java's commitSync does in implicit mode).
    pub fn accept_waiting(&mut self) {
        if self.mode != AcknowledgementMode::Implicit || self.waiting == 0 {
            return;
        }
        for pd in &mut self.delivered {
            for (offset, d) in &mut pd.offsets {
                if *d == Delivered::Waiting {
                    // A waiting record has no pending acknowledgement yet.
                    let _ = self.pending.add(&pd.tp, *offset, AcknowledgeType::Accept);
                    *d = Delivered::Acknowledged(AcknowledgeType::Accept);
                }
            }
        }
        self.waiting = 0;
    }

    /// Registers the records a poll is about to return.
    pub fn deliver(&mut self, records: &[ShareRecord]) {
        // Records come grouped by partition: remember the last one found.
        let mut at: Option<usize> = None;
        for r in records {
            let i = match at {
                Some(i)
                    if self.delivered[i].tp.topic_id == r.topic_id
                        && self.delivered[i].tp.partition == r.partition =>
                {
                    i
                }
                _ => match self.position(r.topic_id, r.partition) {
                    Some(i) => i,
                    None => {
                        self.delivered.push(PartitionDelivery {
                            tp: r.topic_id_partition(),
                            offsets: Vec::new(),
                        });
                        self.delivered.len() - 1
                    }
                },
            };
            at = Some(i);
            self.delivered[i]
                .offsets
                .push((r.offset, Delivered::Waiting));
        }
        let mut waiting = 0;
        for pd in &mut self.delivered {
            if !pd.offsets.windows(2).all(|w| w[0].0 < w[1].0) {
                // A later delivery of an offset replaces the earlier one.
                pd.offsets.reverse();
                pd.offsets.sort_by_key(|(o, _)| *o);
                pd.offsets.dedup_by_key(|(o, _)| *o);
            }
            waiting += pd
                .offsets
                .iter()
                .filter(|(_, d)| *d == Delivered::Waiting)
                .count();
        }
        self.waiting = waiting;
    }

    fn position(&self, topic_id: Uuid, partition: i32) -> Option<usize> {
        self.delivered
            .iter()
            .position(|pd| pd.tp.topic_id == topic_id && pd.tp.partition == partition)
    }

    /// Drops from a poll's records every second copy of one offset, and
    /// every record already taken into the open transaction set or a sealed
    /// set whose outcome is unknown. A broker that lost its in-memory
    /// acquisitions (restart) hands the records of an aborted transaction
    /// out again while the consumer hands them back too, and may re-deliver
    /// a record of the open transaction; delivering such a record twice
    /// would make the application produce its outputs twice in one
    /// transaction (found by the copier chaos test). The transaction's
    /// acknowledgement covers the offset whichever acquisition it was.
    /// Returns how many it dropped.
    pub fn drop_redelivered(&self, records: &mut Vec<ShareRecord>) -> usize {
        if records.is_empty() {
            return 0;
        }
        let key = |r: &ShareRecord| (r.topic_id, r.partition, r.offset);
        // Every offset once: each partition's records in one run, in
        // increasing offset order (the usual case).
        let increasing = records.windows(2).all(|w| {
            (w[0].topic_id, w[0].partition) != (w[1].topic_id, w[1].partition)
                || w[0].offset < w[1].offset
        });
        // Each partition's run and its offset bounds.
        let mut bounds: Vec<((Uuid, i32), i64, i64)> = Vec::new();
        let mut unique = true;
        for w in records.chunk_by(|a, b| (a.topic_id, a.partition) == (b.topic_id, b.partition)) {
            let p = (w[0].topic_id, w[0].partition);
            let (lo, hi) = w.iter().fold((i64::MAX, i64::MIN), |(lo, hi), r| {
                (lo.min(r.offset), hi.max(r.offset))
            });
            if let Some(b) = bounds.iter_mut().find(|b| b.0 == p) {
                unique = false;
                b.1 = b.1.min(lo);
                b.2 = b.2.max(hi);
            } else {
                bounds.push((p, lo, hi));
            }
        }
        // Only the records of the open and sealed sets within this poll's
        // bounds can be delivered again here (usually none: a poll brings
        // later offsets than those already taken).
        let mut seen: std::collections::HashSet<(Uuid, i32, i64)> = self
            .open_transaction
            .iter()
            .map(|(r, _)| r)
            .chain(self.sealed.values().flatten())
            .filter(|r| {
                bounds.iter().any(|(p, lo, hi)| {
                    *p == (r.topic_id, r.partition) && (*lo..=*hi).contains(&r.offset)
                })
            })
            .map(key)
            .collect();
        if seen.is_empty() && increasing && unique {
            return 0;
        }
        let before = records.len();
        records.retain(|r| seen.insert(key(r)));
        before - records.len()
    }

    /// Records delivered by the latest poll that are still waiting.
    pub fn waiting(&self) -> usize {
        self.waiting
    }

    /// The delivered offset of `topic_id`/`partition`; `describe` names the
    /// partition in the error when it was not delivered.
    fn slot(
        &mut self,
        topic_id: Uuid,
        partition: i32,
        offset: i64,
        describe: impl FnOnce() -> String,
    ) -> Result<(usize, usize), ConsumerError> {
        self.position(topic_id, partition)
            .and_then(|i| {
                self.delivered[i]
                    .offsets
                    .binary_search_by_key(&offset, |(o, _)| *o)
                    .ok()
                    .map(|j| (i, j))
            })
            .ok_or_else(|| {
                ConsumerError::IllegalState(format!(
                    "offset {offset} of {} was not delivered by the latest poll",
                    describe()
                ))
            })
    }

    /// Acknowledges a delivered record (explicit mode only).
    pub fn acknowledge(
        &mut self,
        tp: &TopicIdPartition,
        offset: i64,
        ty: AcknowledgeType,
    ) -> Result<(), ConsumerError> {
        self.acknowledge_at(tp.topic_id, tp.partition, offset, ty, false, || {
            tp.to_string()
        })
    }

    /// [`Self::acknowledge`] for a record of the latest poll, without
    /// building its [`TopicIdPartition`].
    pub fn acknowledge_record(
        &mut self,
        record: &ShareRecord,
        ty: AcknowledgeType,
    ) -> Result<(), ConsumerError> {
        self.acknowledge_record_at(record, ty, false)
    }

    /// Acknowledges a record of the latest poll as `ty` (ACCEPT, REJECT or
    /// RELEASE), but sets the acknowledgement aside instead of sending it:
    /// [`Self::take_set_aside`] takes what was set aside, and
    /// [`Self::acknowledge_set_aside`] sends it later (at-least-once: once
    /// the record's outputs are written). The record counts as acknowledged
    /// for the next poll. Keeps no copy of the record.
    pub fn set_aside(
        &mut self,
        record: &ShareRecord,
        ty: AcknowledgeType,
    ) -> Result<(), ConsumerError> {
        self.acknowledge_record_at(record, ty, true)
    }

    fn acknowledge_record_at(
        &mut self,
        record: &ShareRecord,
        ty: AcknowledgeType,
        set_aside: bool,
    ) -> Result<(), ConsumerError> {
        self.acknowledge_at(
            record.topic_id,
            record.partition,
            record.offset,
            ty,
            set_aside,
            || record.topic_id_partition().to_string(),
        )
    }

    /// Takes the acknowledgements set aside since the last call.
    pub fn take_set_aside(&mut self) -> PartitionAcknowledgements {
        self.set_aside.take()
    }

    /// Sends acknowledgements taken with [`Self::take_set_aside`] (or out
    /// of a transaction) with the next request. Returns how many.
    pub fn acknowledge_set_aside(&mut self, acks: &PartitionAcknowledgements) -> usize {
        let mut n = 0;
        for (tp, a) in acks.partitions() {
            n += a.len();
            self.restore_pending(tp, a);
        }
        n
    }

    fn acknowledge_at(
        &mut self,
        topic_id: Uuid,
        partition: i32,
        offset: i64,
        ty: AcknowledgeType,
        set_aside: bool,
        describe: impl FnOnce() -> String,
    ) -> Result<(), ConsumerError> {
        if self.mode == AcknowledgementMode::Implicit {
            return Err(ConsumerError::IllegalState(
                "acknowledge is not allowed in implicit acknowledgement mode \
                 (share.acknowledgement.mode=implicit)"
                    .into(),
            ));
        }
        if ty == AcknowledgeType::Renew {
            let (i, _) = self.slot(topic_id, partition, offset, describe)?;
            let tp = self.delivered[i].tp.clone();
            return self.renew(&tp, offset);
        }
        if ty == AcknowledgeType::Gap {
            return Err(ConsumerError::InvalidArgument(format!(
                "{ty:?} cannot be given to a delivered record"
            )));
        }
        let (i, j) = self.slot(topic_id, partition, offset, describe)?;
        let pd = &mut self.delivered[i];
        match pd.offsets[j].1 {
            Delivered::Waiting => {}
            Delivered::Acknowledged(t) if t == ty => return Ok(()),
            Delivered::Acknowledged(t) => {
                return Err(ConsumerError::IllegalState(format!(
                    "offset {offset} of {} is already acknowledged as {t:?}",
                    pd.tp
                )));
            }
            Delivered::InTransaction(_) => {
                return Err(ConsumerError::IllegalState(format!(
                    "offset {offset} of {} is acknowledged in a transaction",
                    pd.tp
                )));
            }
        }
        let to = if set_aside {
            &mut self.set_aside
        } else {
            &mut self.pending
        };
        to.add(&pd.tp, offset, ty)
            .map_err(|e| ConsumerError::IllegalState(e.to_string()))?;
        pd.offsets[j].1 = Delivered::Acknowledged(ty);
        self.waiting -= 1;
        if !self.renewals.is_empty() {
            let tp = pd.tp.clone();
            self.forget_renewal(&tp, offset);
        }
        Ok(())
    }

    /// Asks for the acquisition lock of a delivered record to be renewed
    /// (KIP-1222, explicit mode): the record stays waiting for its final
    /// acknowledgement, and the renewal goes out with the next commit.
    pub fn renew(&mut self, tp: &TopicIdPartition, offset: i64) -> Result<(), ConsumerError> {
        if self.mode == AcknowledgementMode::Implicit {
            return Err(ConsumerError::IllegalState(
                "renew is not allowed in implicit acknowledgement mode \
                 (share.acknowledgement.mode=implicit)"
                    .into(),
            ));
        }
        let (i, j) = self.slot(tp.topic_id, tp.partition, offset, || tp.to_string())?;
        match self.delivered[i].offsets[j].1 {
            Delivered::Waiting => {}
            other => {
                return Err(ConsumerError::IllegalState(format!(
                    "offset {offset} of {tp} is already acknowledged ({other:?}); \
                     only a record waiting for its acknowledgement can be renewed"
                )));
            }
        }
        self.renewals.entry(tp.clone()).or_default().insert(offset);
        Ok(())
    }

    fn forget_renewal(&mut self, tp: &TopicIdPartition, offset: i64) {
        if let Some(offsets) = self.renewals.get_mut(tp) {
            offsets.remove(&offset);
            if offsets.is_empty() {
                self.renewals.remove(tp);
            }
        }
    }

    /// `true` if renewals are waiting to be sent.
    pub fn has_renewals(&self) -> bool {
        !self.renewals.is_empty()
    }

    /// Takes every pending renewal for sending, as RENEW acknowledgements.
    pub fn take_renewals(&mut self) -> PartitionAcknowledgements {
        let mut out = PartitionAcknowledgements::new();
        for (tp, offsets) in std::mem::take(&mut self.renewals) {
            for o in offsets {
                let _ = out.add(&tp, o, AcknowledgeType::Renew);
            }
        }
        out
    }

    /// Takes a delivered record out of the consumer's acknowledgement path
    /// into the open transaction set (explicit mode, ACCEPT or REJECT). The
    /// set keeps a clone of `record`, to hand it out again if the
    /// transaction aborts.
    pub fn acknowledge_in_transaction(
        &mut self,
        record: &ShareRecord,
        ty: AcknowledgeType,
    ) -> Result<(), ConsumerError> {
        if self.mode != AcknowledgementMode::Explicit {
            return Err(ConsumerError::IllegalState(
                "transactional acknowledgement needs share.acknowledgement.mode=explicit (D12)"
                    .into(),
            ));
        }
        // A delivered record is a record: GAP (which KIP-1289 also stages)
        // marks offsets that hold none, so it is no choice for one here.
        if !matches!(ty, AcknowledgeType::Accept | AcknowledgeType::Reject) {
            return Err(ConsumerError::InvalidArgument(format!(
                "only ACCEPT and REJECT can be staged in a transaction for a delivered record, not {ty:?}"
            )));
        }
        let offset = record.offset;
        let (i, j) = self.slot(record.topic_id, record.partition, offset, || {
            record.topic_id_partition().to_string()
        })?;
        let pd = &mut self.delivered[i];
        match pd.offsets[j].1 {
            Delivered::Waiting => {}
            Delivered::InTransaction(t) if t == ty => return Ok(()),
            other => {
                return Err(ConsumerError::IllegalState(format!(
                    "offset {offset} of {} is already acknowledged ({other:?})",
                    pd.tp
                )));
            }
        }
        pd.offsets[j].1 = Delivered::InTransaction(ty);
        self.waiting -= 1;
        self.transactional_since_poll = true;
        let tp = pd.tp.clone();
        self.open_transaction.push((record.clone(), ty));
        self.forget_renewal(&tp, offset);
        Ok(())
    }

    /// Records acknowledged in the open transaction set.
    pub fn open_transaction_len(&self) -> usize {
        self.open_transaction.len()
    }

    /// Seals the open transaction set; `None` if it is empty.
    pub fn take_transaction(&mut self) -> Option<TransactionAcknowledgements> {
        if self.open_transaction.is_empty() {
            return None;
        }
        let id = TransactionAcknowledgementsId(self.next_transaction);
        self.next_transaction += 1;
        let mut acks = PartitionAcknowledgements::new();
        let mut records = Vec::with_capacity(self.open_transaction.len());
        for (record, ty) in self.open_transaction.drain(..) {
            // Each offset was taken once (checked on entry).
            let _ = acks.add(&record.topic_id_partition(), record.offset, ty);
            records.push(record);
        }
        let gaps = self.held_gaps.take();
        for (tp, g) in gaps.partitions() {
            for (offset, ty) in g.iter() {
                // A gap offset holds no record, so no record shares it.
                let _ = acks.add(tp, offset, ty);
            }
        }
        if !gaps.is_empty() {
            self.sealed_gaps.insert(id, gaps);
        }
        self.sealed.insert(id, records);
        Some(TransactionAcknowledgements {
            id,
            acknowledgements: acks,
        })
    }

    /// Resolves a sealed set; returns how many records it held.
    pub fn transaction_outcome(
        &mut self,
        id: TransactionAcknowledgementsId,
        outcome: TransactionOutcome,
    ) -> Result<usize, ConsumerError> {
        let records = self.sealed.remove(&id).ok_or_else(|| {
            ConsumerError::InvalidArgument(format!("unknown transaction acknowledgements {id:?}"))
        })?;
        let n = records.len();
        let gaps = self.sealed_gaps.remove(&id);
        match outcome {
            TransactionOutcome::Aborted => {
                self.handed_back.extend(records);
                // Still acquired by this member: into the next transaction.
                for (tp, g) in gaps.iter().flat_map(|g| g.partitions()) {
                    for (offset, ty) in g.iter() {
                        let _ = self.held_gaps.add(tp, offset, ty);
                    }
                }
            }
            TransactionOutcome::Committed | TransactionOutcome::Abandoned => {}
        }
        Ok(n)
    }

    /// A sealed set whose transaction committed without carrying the
    /// acknowledgements (the intent ledger): they become ordinary pending
    /// acknowledgements, sent with the next request. Returns how many.
    pub fn acknowledge_after_transaction(
        &mut self,
        taken: &TransactionAcknowledgements,
    ) -> Result<usize, ConsumerError> {
        self.sealed.remove(&taken.id).ok_or_else(|| {
            ConsumerError::InvalidArgument(format!(
                "unknown transaction acknowledgements {:?}",
                taken.id
            ))
        })?;
        self.sealed_gaps.remove(&taken.id);
        // Each offset was sealed once, so nothing is pending for it.
        Ok(self.acknowledge_set_aside(&taken.acknowledgements))
    }

    /// Sealed sets whose outcome is not known yet.
    pub fn transactions_in_doubt(&self) -> usize {
        self.sealed.len()
    }

    /// Records of aborted transactions waiting to be handed out again.
    pub fn handed_back_len(&self) -> usize {
        self.handed_back.len()
    }

    /// Up to `max` records of aborted transactions, oldest first.
    pub fn take_handed_back(&mut self, max: usize) -> Vec<ShareRecord> {
        let n = max.min(self.handed_back.len());
        self.handed_back.drain(..n).collect()
    }

    /// Adds acquired-without-data offsets as pending GAP acknowledgements
    /// (held for the next transaction with gaps in transactions).
    pub fn add_gaps(&mut self, tp: &TopicIdPartition, offsets: &[i64]) {
        let to = if self.gaps_in_transaction {
            &mut self.held_gaps
        } else {
            &mut self.pending
        };
        for &o in offsets {
            // An offset is acquired once per fetch; a conflict cannot happen
            // unless the broker repeats it, and then GAP stands.
            let _ = to.add(tp, o, AcknowledgeType::Gap);
        }
    }

    /// The KIP author's branch API (`acknowledgementsForTransaction`):
    /// drains the ordinary acknowledgement path, every pending
    /// acknowledgement (records acknowledged with `acknowledge`, ACCEPT or
    /// REJECT) and every gap, pending or held, into a
    /// [`ShareAcknowledgements`] for the producer's transaction. Records not
    /// acknowledged yet stay waiting. A pending RELEASE cannot be staged:
    /// the call fails naming it and drains nothing. Explicit mode only
    /// (D12), and not mixed with an open `acknowledge_in_transaction` set.
    /// The consumer keeps nothing of them: after an abort the broker
    /// decides where they go (D25).
    pub fn acknowledgements_for_transaction(
        &mut self,
    ) -> Result<ShareAcknowledgements, ConsumerError> {
        if self.mode != AcknowledgementMode::Explicit {
            return Err(ConsumerError::IllegalState(
                "transactional acknowledgement needs share.acknowledgement.mode=explicit (D12)"
                    .into(),
            ));
        }
        if !self.open_transaction.is_empty() {
            return Err(ConsumerError::IllegalState(format!(
                "{} records were taken with acknowledge_in_transaction: seal them with \
                 take_transaction_acknowledgements instead",
                self.open_transaction.len()
            )));
        }
        for (tp, acks) in self.pending.partitions() {
            if let Some((offset, ty)) = acks.iter().find(|(_, t)| !t.is_transactional()) {
                return Err(ConsumerError::IllegalState(format!(
                    "offset {offset} of {tp} is acknowledged as {ty:?}, which cannot be staged \
                     in a transaction (only ACCEPT, REJECT and GAP); nothing was taken"
                )));
            }
        }
        self.transactional_since_poll = true;
        let mut taken = self.pending.take();
        for (tp, g) in self.held_gaps.take().into_partitions() {
            for (offset, ty) in g.iter() {
                let _ = taken.add(&tp, offset, ty);
            }
        }
        Ok(ShareAcknowledgements::from(&taken))
    }

    /// `true` if acknowledgements are waiting to be sent.
    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Takes every pending acknowledgement for sending.
    pub fn take_pending(&mut self) -> PartitionAcknowledgements {
        self.pending.take()
    }

    /// Remembers the ranges (first, last offset, inclusive) a fetch
    /// acquired of `tp`, records and gaps alike (D39).
    pub fn add_acquired(&mut self, tp: &TopicIdPartition, ranges: &[(i64, i64)]) {
        if ranges.is_empty() {
            return;
        }
        let spans = self.acquired.entry(tp.clone()).or_default();
        for &(first, last) in ranges {
            if first > last {
                continue;
            }
            // A range acquired again (redelivery) replaces what overlaps it.
            spans.retain(|s| s.last < first || s.first > last);
            spans.push_back(AcquiredSpan {
                first,
                last,
                held: false,
            });
        }
        while spans.len() > ACQUIRED_RANGES_KEPT {
            spans.pop_front();
        }
    }

    /// The acquired range (first, last offset, inclusive) of `tp` that
    /// holds `offset`, if it is remembered.
    pub fn acquired_span_of(&self, tp: &TopicIdPartition, offset: i64) -> Option<(i64, i64)> {
        self.acquired
            .get(tp)?
            .iter()
            .find(|s| s.first <= offset && offset <= s.last)
            .map(|s| (s.first, s.last))
    }

    /// Takes the pending acknowledgements that are to ride on a fetch
    /// (D39): all but those of an acquired range that is only partly
    /// acknowledged and was not left out before, which stay pending for
    /// the next request. A range whose acknowledgements all go is
    /// forgotten.
    pub fn take_pending_for_fetch(&mut self) -> PartitionAcknowledgements {
        let pending = self.pending.take();
        let mut out = PartitionAcknowledgements::new();
        for (tp, acks) in pending.into_partitions() {
            let mut keep: Vec<(i64, i64)> = Vec::new();
            if let Some(spans) = self.acquired.get_mut(&tp) {
                spans.retain_mut(|s| {
                    let acked = acks.range(s.first, s.last).count() as i64;
                    if acked == 0 {
                        return true;
                    }
                    if acked > s.last - s.first || s.held {
                        return false;
                    }
                    s.held = true;
                    keep.push((s.first, s.last));
                    true
                });
                if spans.is_empty() {
                    self.acquired.remove(&tp);
                }
            }
            if keep.is_empty() {
                out.insert(tp, acks);
                continue;
            }
            let mut going = Acknowledgements::empty();
            for (o, t) in acks.iter() {
                if keep.iter().any(|&(f, l)| f <= o && o <= l) {
                    let _ = self.pending.add(&tp, o, t);
                } else {
                    let _ = going.add(o, t);
                }
            }
            if !going.is_empty() {
                out.insert(tp, going);
            }
        }
        out
    }

    /// Puts acknowledgements back that could not be sent (no leader, no
    /// session yet).
    pub fn restore_pending(&mut self, tp: &TopicIdPartition, acks: &crate::eos::Acknowledgements) {
        for (o, t) in acks.iter() {
            let _ = self.pending.add(tp, o, t);
        }
    }
}

/// The client side of one share session with one broker.
///
/// Epoch 0 opens the session (no acknowledgements may ride on it); each
/// successful request moves the epoch on (wrapping from `i32::MAX` to 1, as
/// Kafka's does); -1 closes it. A session error (SHARE_SESSION_NOT_FOUND,
/// INVALID_SHARE_SESSION_EPOCH) or a lost connection starts over at 0.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShareSession {
    epoch: i32,
}

impl ShareSession {
    /// The epoch the next request carries.
    pub fn epoch(&self) -> i32 {
        self.epoch
    }
    /// Whether acknowledgements may be sent in this session now.
    pub fn can_acknowledge(&self) -> bool {
        self.epoch > 0
    }
    /// A request at the current epoch succeeded.
    pub fn on_success(&mut self) {
        self.epoch = if self.epoch == i32::MAX || self.epoch < 0 {
            1
        } else {
            self.epoch + 1
        };
    }
    /// The session is gone on the broker: the next request opens a new one.
    pub fn reset(&mut self) {
        self.epoch = 0;
    }
    /// The epoch that closes the session.
    pub const CLOSE_EPOCH: i32 = -1;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::records::TimestampType;
    use uuid::Uuid;

    fn tp(p: i32) -> TopicIdPartition {
        TopicIdPartition {
            topic_id: Uuid::from_u128(1),
            topic: "in".into(),
            partition: p,
        }
    }

    /// One acquisition instant for every test record, so that records
    /// compare equal by content.
    fn acquired_at() -> tokio::time::Instant {
        static AT: std::sync::OnceLock<tokio::time::Instant> = std::sync::OnceLock::new();
        *AT.get_or_init(tokio::time::Instant::now)
    }

    fn rec(p: i32, offset: i64) -> ShareRecord {
        ShareRecord {
            topic: "in".into(),
            topic_id: Uuid::from_u128(1),
            partition: p,
            offset,
            delivery_count: 1,
            key: None,
            value: Some(bytes::Bytes::from(format!("v{offset}"))),
            headers: vec![],
            timestamp: 0,
            timestamp_type: TimestampType::CreateTime,
            acquired_at: acquired_at(),
        }
    }

    fn pending(st: &mut AcknowledgementState) -> Vec<(i32, i64, AcknowledgeType)> {
        let p = st.take_pending();
        p.partitions()
            .flat_map(|(tp, a)| a.iter().map(move |(o, t)| (tp.partition, o, t)))
            .collect()
    }

    #[test]
    fn implicit_mode_accepts_previous_poll_at_next_poll() {
        let mut st = AcknowledgementState::new(AcknowledgementMode::Implicit);
        st.deliver(&[rec(0, 5), rec(0, 6), rec(1, 0)]);
        assert!(matches!(
            st.acknowledge(&tp(0), 5, AcknowledgeType::Accept),
            Err(ConsumerError::IllegalState(_))
        ));
        assert!(!st.has_pending(), "nothing before the next poll");
        st.begin_poll().unwrap();
        assert_eq!(
            pending(&mut st),
            [
                (0, 5, AcknowledgeType::Accept),
                (0, 6, AcknowledgeType::Accept),
                (1, 0, AcknowledgeType::Accept)
            ]
        );
        st.begin_poll().unwrap();
        assert!(!st.has_pending(), "accepted once only");
    }

    fn offsets_of(acks: &PartitionAcknowledgements) -> Vec<(i32, i64)> {
        acks.partitions()
            .flat_map(|(tp, a)| a.iter().map(|(o, _)| (tp.partition, o)).collect::<Vec<_>>())
            .collect()
    }

    /// D39: a fetch carries an acquired range's acknowledgements whole;
    /// those of a range partly handed out wait for the rest, once.
    #[test]
    fn acknowledgements_of_a_partly_delivered_range_wait_one_fetch_for_the_rest() {
        let mut st = AcknowledgementState::new(AcknowledgementMode::Implicit);
        st.add_acquired(&tp(0), &[(0, 9)]);
        st.add_acquired(&tp(1), &[(0, 1)]);
        // Poll 1 hands out 0..=5 of partition 0 and all of partition 1.
        st.deliver(
            &(0..6)
                .map(|o| rec(0, o))
                .chain([rec(1, 0), rec(1, 1)])
                .collect::<Vec<_>>(),
        );
        st.begin_poll().unwrap();
        let sent = st.take_pending_for_fetch();
        assert_eq!(
            offsets_of(&sent),
            [(1, 0), (1, 1)],
            "partition 1's range is whole"
        );
        assert!(st.has_pending(), "0..=5 of partition 0 wait");
        // Poll 2 hands out the rest of the range and the start of the next.
        st.add_acquired(&tp(0), &[(10, 19)]);
        st.deliver(&(6..13).map(|o| rec(0, o)).collect::<Vec<_>>());
        st.begin_poll().unwrap();
        let sent = st.take_pending_for_fetch();
        assert_eq!(
            offsets_of(&sent),
            (0..10).map(|o| (0, o)).collect::<Vec<_>>()
        );
        // 10..=12 wait; they were left out once, so the next fetch takes
        // them even though 13..=19 never came.
        let sent = st.take_pending_for_fetch();
        assert_eq!(offsets_of(&sent), [(0, 10), (0, 11), (0, 12)]);
        assert!(!st.has_pending());
        // A commit takes what waits.
        st.add_acquired(&tp(0), &[(20, 29)]);
        st.deliver(&[rec(0, 20)]);
        st.begin_poll().unwrap();
        assert!(st.take_pending_for_fetch().is_empty());
        assert_eq!(offsets_of(&st.take_pending()), [(0, 20)]);
    }

    /// D39 in explicit mode too: acknowledgements of a partly
    /// acknowledged range wait one fetch, then go whatever the application
    /// did with the rest (set it aside, took it into a transaction).
    #[test]
    fn explicit_mode_holds_a_partly_acknowledged_range_once() {
        let mut st = AcknowledgementState::new(AcknowledgementMode::Explicit);
        st.add_acquired(&tp(0), &[(0, 9)]);
        st.deliver(&(0..4).map(|o| rec(0, o)).collect::<Vec<_>>());
        st.acknowledge(&tp(0), 0, AcknowledgeType::Accept).unwrap();
        st.acknowledge(&tp(0), 1, AcknowledgeType::Accept).unwrap();
        st.acknowledge(&tp(0), 2, AcknowledgeType::Release).unwrap();
        st.acknowledge(&tp(0), 3, AcknowledgeType::Accept).unwrap();
        st.begin_poll().unwrap();
        assert!(st.take_pending_for_fetch().is_empty(), "0..=3 wait once");
        // The rest of the range: accepted, so the whole range goes.
        st.deliver(&(4..10).map(|o| rec(0, o)).collect::<Vec<_>>());
        for o in 4..10 {
            st.acknowledge(&tp(0), o, AcknowledgeType::Accept).unwrap();
        }
        st.begin_poll().unwrap();
        assert_eq!(
            offsets_of(&st.take_pending_for_fetch()),
            (0..10).map(|o| (0, o)).collect::<Vec<_>>()
        );
        // A range whose rest the application keeps: what it did
        // acknowledge goes with the second fetch.
        st.add_acquired(&tp(0), &[(10, 19)]);
        st.deliver(&[rec(0, 10), rec(0, 11)]);
        st.acknowledge(&tp(0), 10, AcknowledgeType::Accept).unwrap();
        st.acknowledge(&tp(0), 11, AcknowledgeType::Accept).unwrap();
        st.begin_poll().unwrap();
        assert!(st.take_pending_for_fetch().is_empty());
        assert_eq!(offsets_of(&st.take_pending_for_fetch()), [(0, 10), (0, 11)]);
        // A commit takes everything at once.
        st.add_acquired(&tp(0), &[(20, 29)]);
        st.deliver(&[rec(0, 20)]);
        st.acknowledge(&tp(0), 20, AcknowledgeType::Accept).unwrap();
        st.begin_poll().unwrap();
        assert_eq!(offsets_of(&st.take_pending()), [(0, 20)]);
    }

    #[test]
    fn explicit_mode_refuses_poll_until_everything_is_acknowledged() {
        let mut st = AcknowledgementState::new(AcknowledgementMode::Explicit);
        st.deliver(&[rec(0, 5), rec(0, 6)]);
        st.acknowledge(&tp(0), 5, AcknowledgeType::Release).unwrap();
        let err = st.begin_poll().unwrap_err();
        assert!(matches!(err, ConsumerError::IllegalState(_)), "{err}");
        assert_eq!(st.waiting(), 1, "a refused poll changes nothing");
        // Same type again is harmless, another type is refused.
        st.acknowledge(&tp(0), 5, AcknowledgeType::Release).unwrap();
        assert!(st.acknowledge(&tp(0), 5, AcknowledgeType::Accept).is_err());
        // Offsets not delivered, and GAP, are refused.
        assert!(st.acknowledge(&tp(0), 7, AcknowledgeType::Accept).is_err());
        assert!(st.acknowledge(&tp(0), 6, AcknowledgeType::Gap).is_err());
        st.acknowledge(&tp(0), 6, AcknowledgeType::Reject).unwrap();
        st.begin_poll().unwrap();
        assert_eq!(
            pending(&mut st),
            [
                (0, 5, AcknowledgeType::Release),
                (0, 6, AcknowledgeType::Reject)
            ]
        );
        // Records of an earlier poll can no longer be acknowledged.
        assert!(st.acknowledge(&tp(0), 5, AcknowledgeType::Accept).is_err());
    }

    #[test]
    fn records_of_interleaved_partitions_are_tracked_per_offset() {
        // Handed-back and fetched records may mix partitions and offsets.
        let mut st = AcknowledgementState::new(AcknowledgementMode::Explicit);
        st.deliver(&[rec(1, 5), rec(0, 2), rec(1, 3), rec(0, 1), rec(1, 5)]);
        assert_eq!(st.waiting(), 4, "offset 5 of partition 1 counts once");
        st.acknowledge_record(&rec(1, 3), AcknowledgeType::Accept)
            .unwrap();
        assert_eq!(st.waiting(), 3);
        let err = st.begin_poll().unwrap_err().to_string();
        assert!(err.contains("3 of the previous poll"), "{err}");
        assert!(
            st.acknowledge_record(&rec(0, 3), AcknowledgeType::Accept)
                .is_err(),
            "offset 3 of partition 0 was not delivered"
        );
        for (p, o) in [(0, 1), (0, 2), (1, 5)] {
            st.acknowledge_record(&rec(p, o), AcknowledgeType::Reject)
                .unwrap();
        }
        assert_eq!(st.waiting(), 0);
        st.begin_poll().unwrap();
        assert_eq!(
            pending(&mut st),
            [
                (0, 1, AcknowledgeType::Reject),
                (0, 2, AcknowledgeType::Reject),
                (1, 3, AcknowledgeType::Accept),
                (1, 5, AcknowledgeType::Reject)
            ]
        );
    }

    #[test]
    fn a_poll_with_a_repeated_offset_keeps_one_copy() {
        let st = AcknowledgementState::new(AcknowledgementMode::Explicit);
        let mut polled = vec![rec(0, 1), rec(1, 1), rec(0, 2), rec(0, 1)];
        st.drop_redelivered(&mut polled);
        let kept: Vec<(i32, i64)> = polled.iter().map(|r| (r.partition, r.offset)).collect();
        assert_eq!(kept, [(0, 1), (1, 1), (0, 2)]);
        let mut in_order = vec![rec(0, 1), rec(0, 2), rec(1, 1)];
        st.drop_redelivered(&mut in_order);
        assert_eq!(in_order.len(), 3, "nothing repeated, nothing dropped");
    }

    #[test]
    fn a_renewed_record_stays_waiting_and_its_renewal_goes_with_the_final_ack() {
        let mut st = AcknowledgementState::new(AcknowledgementMode::Explicit);
        st.deliver(&[rec(0, 5), rec(0, 6)]);
        st.acknowledge(&tp(0), 5, AcknowledgeType::Renew).unwrap();
        st.renew(&tp(0), 6).unwrap();
        assert!(!st.has_pending(), "a renewal is no final acknowledgement");
        assert_eq!(st.waiting(), 2, "renewed records still wait");
        let r = st.take_renewals();
        let renewed: Vec<_> = r
            .partitions()
            .flat_map(|(tp, a)| a.iter().map(move |(o, t)| (tp.partition, o, t)))
            .collect();
        assert_eq!(
            renewed,
            [
                (0, 5, AcknowledgeType::Renew),
                (0, 6, AcknowledgeType::Renew)
            ]
        );
        assert!(!st.has_renewals(), "taken once");
        // Renewed again, then accepted before the commit: the renewal is moot.
        st.renew(&tp(0), 5).unwrap();
        st.acknowledge(&tp(0), 5, AcknowledgeType::Accept).unwrap();
        assert!(!st.has_renewals());
        // An acknowledged record cannot be renewed.
        assert!(st.renew(&tp(0), 5).is_err());
        // Implicit mode has no renewals.
        let mut imp = AcknowledgementState::new(AcknowledgementMode::Implicit);
        imp.deliver(&[rec(0, 1)]);
        assert!(imp.renew(&tp(0), 1).is_err());
    }

    #[test]
    fn gaps_are_pending_gap_acknowledgements() {
        let mut st = AcknowledgementState::new(AcknowledgementMode::Explicit);
        st.add_gaps(&tp(0), &[3, 4, 9]);
        assert_eq!(
            pending(&mut st),
            [
                (0, 3, AcknowledgeType::Gap),
                (0, 4, AcknowledgeType::Gap),
                (0, 9, AcknowledgeType::Gap)
            ]
        );
    }

    #[test]
    fn gaps_ride_in_the_transaction_and_come_back_held_on_abort() {
        let mut st = AcknowledgementState::new(AcknowledgementMode::Explicit);
        st.set_gaps_in_transaction(true);
        st.deliver(&[rec(0, 1), rec(0, 3)]);
        st.add_gaps(&tp(0), &[2, 4]);
        assert!(!st.has_pending(), "held, not pending");
        assert_eq!(st.held_gaps(), 2);
        for o in [1, 3] {
            st.acknowledge_in_transaction(&rec(0, o), AcknowledgeType::Accept)
                .unwrap();
        }
        let txn = st.take_transaction().unwrap();
        let staged: Vec<_> = txn
            .acknowledgements
            .partitions()
            .flat_map(|(_, a)| a.iter().collect::<Vec<_>>())
            .collect();
        assert_eq!(
            staged,
            [
                (1, AcknowledgeType::Accept),
                (2, AcknowledgeType::Gap),
                (3, AcknowledgeType::Accept),
                (4, AcknowledgeType::Gap)
            ]
        );
        assert_eq!(st.held_gaps(), 0);
        st.transaction_outcome(txn.id, TransactionOutcome::Aborted)
            .unwrap();
        assert_eq!(st.held_gaps(), 2, "still ours after the abort: held again");
        assert_eq!(st.take_handed_back(10), [rec(0, 1), rec(0, 3)]);
        // Sealed again with the handed-back records and committed: gone.
        st.begin_poll().unwrap();
        st.deliver(&[rec(0, 1), rec(0, 3)]);
        assert_eq!(st.held_gaps(), 2, "a transaction is under way");
        for o in [1, 3] {
            st.acknowledge_in_transaction(&rec(0, o), AcknowledgeType::Accept)
                .unwrap();
        }
        let txn = st.take_transaction().unwrap();
        assert_eq!(txn.acknowledgements.len(), 4);
        st.transaction_outcome(txn.id, TransactionOutcome::Committed)
            .unwrap();
        assert_eq!(st.held_gaps(), 0);
        assert!(!st.has_pending());
    }

    #[test]
    fn held_gaps_go_out_when_no_transaction_takes_them() {
        let mut st = AcknowledgementState::new(AcknowledgementMode::Explicit);
        st.set_gaps_in_transaction(true);
        // A poll that delivered only gaps: the next poll sends them.
        st.add_gaps(&tp(0), &[7]);
        assert!(st.take_transaction().is_none(), "gaps alone seal nothing");
        st.begin_poll().unwrap();
        assert_eq!(pending(&mut st), [(0, 7, AcknowledgeType::Gap)]);
        // An abandoned transaction forgets its gaps (the broker has them).
        st.deliver(&[rec(0, 8)]);
        st.add_gaps(&tp(0), &[9]);
        st.acknowledge_in_transaction(&rec(0, 8), AcknowledgeType::Accept)
            .unwrap();
        let txn = st.take_transaction().unwrap();
        st.transaction_outcome(txn.id, TransactionOutcome::Abandoned)
            .unwrap();
        assert_eq!(st.held_gaps(), 0);
        // Switched off: held gaps become pending.
        st.add_gaps(&tp(1), &[3]);
        st.set_gaps_in_transaction(false);
        assert_eq!(pending(&mut st), [(1, 3, AcknowledgeType::Gap)]);
    }

    #[test]
    fn acknowledgements_for_transaction_drains_the_ordinary_path() {
        // As the branch's ShareFetchTest: ACCEPT and REJECT acknowledged,
        // the gap between them passed through, unacknowledged records left
        // waiting; a RELEASE refuses the call and nothing is drained.
        let mut st = AcknowledgementState::new(AcknowledgementMode::Explicit);
        st.deliver(&[rec(0, 10), rec(0, 12), rec(0, 13)]);
        st.add_gaps(&tp(0), &[11]);
        st.acknowledge(&tp(0), 10, AcknowledgeType::Accept).unwrap();
        st.acknowledge(&tp(0), 12, AcknowledgeType::Reject).unwrap();
        let taken = st.acknowledgements_for_transaction().unwrap();
        let batches = &taken.acknowledgements()[&tp(0)];
        let expanded: Vec<_> = batches.iter().flat_map(|b| b.expand()).collect();
        assert_eq!(
            expanded,
            [
                (10, AcknowledgeType::Accept),
                (11, AcknowledgeType::Gap),
                (12, AcknowledgeType::Reject)
            ]
        );
        assert!(!st.has_pending(), "drained");
        assert_eq!(st.waiting(), 1, "offset 13 still waits");
        assert!(
            st.acknowledgements_for_transaction().unwrap().is_empty(),
            "taken once"
        );
        st.acknowledge(&tp(0), 13, AcknowledgeType::Release)
            .unwrap();
        let err = st
            .acknowledgements_for_transaction()
            .unwrap_err()
            .to_string();
        assert!(err.contains("Release") && err.contains("13"), "{err}");
        assert!(st.has_pending(), "a refused call drains nothing");
        // Implicit mode cannot.
        let mut imp = AcknowledgementState::new(AcknowledgementMode::Implicit);
        assert!(imp.acknowledgements_for_transaction().is_err());
    }

    #[test]
    fn transactional_acknowledgements_leave_the_consumer_path_and_come_back_on_abort() {
        let mut st = AcknowledgementState::new(AcknowledgementMode::Explicit);
        st.deliver(&[rec(0, 1), rec(0, 2), rec(0, 3)]);
        st.acknowledge_in_transaction(&rec(0, 1), AcknowledgeType::Accept)
            .unwrap();
        st.acknowledge_in_transaction(&rec(0, 2), AcknowledgeType::Reject)
            .unwrap();
        // D5: other types are not transactional.
        assert!(matches!(
            st.acknowledge_in_transaction(&rec(0, 3), AcknowledgeType::Release),
            Err(ConsumerError::InvalidArgument(_))
        ));
        // A record in a transaction cannot also be acknowledged normally (D8).
        assert!(st.acknowledge(&tp(0), 1, AcknowledgeType::Accept).is_err());
        st.acknowledge(&tp(0), 3, AcknowledgeType::Accept).unwrap();
        let txn = st.take_transaction().unwrap();
        assert!(st.take_transaction().is_none(), "sealed once");
        let staged: Vec<_> = txn
            .acknowledgements
            .partitions()
            .next()
            .unwrap()
            .1
            .iter()
            .collect();
        assert_eq!(
            staged,
            [(1, AcknowledgeType::Accept), (2, AcknowledgeType::Reject)]
        );
        st.begin_poll().unwrap();
        assert_eq!(
            pending(&mut st),
            [(0, 3, AcknowledgeType::Accept)],
            "the consumer sends only its own acknowledgement"
        );
        assert_eq!(st.transactions_in_doubt(), 1);
        assert_eq!(
            st.transaction_outcome(txn.id, TransactionOutcome::Aborted)
                .unwrap(),
            2
        );
        let back = st.take_handed_back(10);
        assert_eq!(
            back,
            [rec(0, 1), rec(0, 2)],
            "same records, same delivery count"
        );
        assert!(
            st.transaction_outcome(txn.id, TransactionOutcome::Aborted)
                .is_err()
        );
    }

    #[test]
    fn records_of_the_transactions_are_not_delivered_twice() {
        let mut st = AcknowledgementState::new(AcknowledgementMode::Explicit);
        st.deliver(&[rec(0, 1), rec(0, 2)]);
        st.acknowledge_in_transaction(&rec(0, 1), AcknowledgeType::Accept)
            .unwrap();
        st.acknowledge_in_transaction(&rec(0, 2), AcknowledgeType::Accept)
            .unwrap();
        let txn = st.take_transaction().unwrap();
        st.begin_poll().unwrap();
        // Staged, outcome unknown: a re-delivery of 1 is dropped.
        let mut polled = vec![rec(0, 1), rec(0, 3)];
        assert_eq!(st.drop_redelivered(&mut polled), 1);
        assert_eq!(polled, [rec(0, 3)]);
        st.transaction_outcome(txn.id, TransactionOutcome::Aborted)
            .unwrap();
        // Handed back and fetched again after a broker restart: once each.
        let mut polled = st.take_handed_back(10);
        polled.extend([rec(0, 1), rec(0, 2), rec(0, 4)]);
        assert_eq!(st.drop_redelivered(&mut polled), 2);
        assert_eq!(polled, [rec(0, 1), rec(0, 2), rec(0, 4)]);
        st.deliver(&polled);
        st.acknowledge_in_transaction(&rec(0, 4), AcknowledgeType::Accept)
            .unwrap();
        st.acknowledge(&tp(0), 1, AcknowledgeType::Accept).unwrap();
        st.acknowledge(&tp(0), 2, AcknowledgeType::Accept).unwrap();
        st.begin_poll().unwrap();
        // In the open transaction: dropped too.
        let mut polled = vec![rec(0, 4), rec(0, 5)];
        st.drop_redelivered(&mut polled);
        assert_eq!(polled, [rec(0, 5)]);
    }

    proptest::proptest! {
        /// `drop_redelivered` keeps exactly what the plain definition
        /// keeps: the first copy of each offset not in the open or a sealed
        /// transaction set, in order (its shortcuts change nothing).
        #[test]
        fn dropping_redeliveries_matches_its_definition(
            staged in proptest::collection::vec((0i32..2, 0i64..12), 0..8),
            open in proptest::collection::vec((0i32..2, 0i64..12), 0..8),
            polled in proptest::collection::vec((0i32..2, 0i64..12), 0..12),
            sorted in proptest::bool::ANY,
        ) {
            let mut st = AcknowledgementState::new(AcknowledgementMode::Explicit);
            let uniq = |v: &[(i32, i64)]| {
                let mut v = v.to_vec();
                v.sort();
                v.dedup();
                v
            };
            let staged = uniq(&staged);
            let open: Vec<(i32, i64)> =
                uniq(&open).into_iter().filter(|x| !staged.contains(x)).collect();
            let staged_recs: Vec<ShareRecord> = staged.iter().map(|&(p, o)| rec(p, o)).collect();
            st.deliver(&staged_recs);
            for r in &staged_recs {
                st.acknowledge_in_transaction(r, AcknowledgeType::Accept).unwrap();
            }
            let _sealed = st.take_transaction();
            st.begin_poll().unwrap();
            let open_recs: Vec<ShareRecord> = open.iter().map(|&(p, o)| rec(p, o)).collect();
            st.deliver(&open_recs);
            for r in &open_recs {
                st.acknowledge_in_transaction(r, AcknowledgeType::Accept).unwrap();
            }
            let mut polled = polled;
            if sorted {
                polled.sort();
            }
            let mut seen: std::collections::HashSet<(i32, i64)> =
                staged.iter().chain(&open).copied().collect();
            let expected: Vec<(i32, i64)> =
                polled.iter().copied().filter(|x| seen.insert(*x)).collect();
            let mut records: Vec<ShareRecord> = polled.iter().map(|&(p, o)| rec(p, o)).collect();
            let dropped = st.drop_redelivered(&mut records);
            let kept: Vec<(i32, i64)> = records.iter().map(|r| (r.partition, r.offset)).collect();
            proptest::prop_assert_eq!(&kept, &expected);
            proptest::prop_assert_eq!(dropped, polled.len() - expected.len());
        }
    }

    #[test]
    fn abandoned_transaction_records_are_not_handed_back() {
        let mut st = AcknowledgementState::new(AcknowledgementMode::Explicit);
        st.deliver(&[rec(0, 1), rec(0, 2)]);
        for o in [1, 2] {
            st.acknowledge_in_transaction(&rec(0, o), AcknowledgeType::Accept)
                .unwrap();
        }
        let txn = st.take_transaction().unwrap();
        assert_eq!(st.transactions_in_doubt(), 1);
        assert_eq!(
            st.transaction_outcome(txn.id, TransactionOutcome::Abandoned)
                .unwrap(),
            2
        );
        assert_eq!(st.transactions_in_doubt(), 0);
        assert_eq!(st.handed_back_len(), 0);
        // A later fetch of the same offsets delivers them normally.
        st.begin_poll().unwrap();
        let mut polled = vec![rec(0, 1), rec(0, 2)];
        st.drop_redelivered(&mut polled);
        assert_eq!(polled, [rec(0, 1), rec(0, 2)]);
    }

    #[test]
    fn a_transaction_committed_elsewhere_sends_its_acknowledgements_after() {
        // The intent ledger: the transaction carried no acknowledgement;
        // once it committed they become ordinary pending ones.
        let mut st = AcknowledgementState::new(AcknowledgementMode::Explicit);
        st.deliver(&[rec(0, 1), rec(0, 2)]);
        st.acknowledge_in_transaction(&rec(0, 1), AcknowledgeType::Accept)
            .unwrap();
        st.acknowledge_in_transaction(&rec(0, 2), AcknowledgeType::Reject)
            .unwrap();
        let txn = st.take_transaction().unwrap();
        assert!(!st.has_pending(), "nothing before the commit");
        assert_eq!(st.acknowledge_after_transaction(&txn).unwrap(), 2);
        assert_eq!(st.transactions_in_doubt(), 0);
        assert_eq!(st.handed_back_len(), 0);
        let pending = st.take_pending();
        let (_, acks) = pending.partitions().next().unwrap();
        assert_eq!(
            acks.iter().collect::<Vec<_>>(),
            [(1, AcknowledgeType::Accept), (2, AcknowledgeType::Reject)]
        );
        // Once only.
        assert!(st.acknowledge_after_transaction(&txn).is_err());
    }

    #[test]
    fn acknowledgements_set_aside_go_out_only_when_asked() {
        // at_least_once: acknowledged now, sent once the outputs are
        // written; the next poll may begin meanwhile.
        let mut st = AcknowledgementState::new(AcknowledgementMode::Explicit);
        st.deliver(&[rec(0, 1), rec(0, 2)]);
        st.set_aside(&rec(0, 1), AcknowledgeType::Accept).unwrap();
        st.set_aside(&rec(0, 2), AcknowledgeType::Reject).unwrap();
        assert!(
            st.set_aside(&rec(0, 2), AcknowledgeType::Accept).is_err(),
            "one acknowledgement per offset"
        );
        let set = st.take_set_aside();
        assert!(!st.has_pending(), "nothing sent before the outputs are");
        st.begin_poll().expect("set aside counts as acknowledged");
        assert!(st.take_set_aside().is_empty());
        assert_eq!(st.acknowledge_set_aside(&set), 2);
        let pending = st.take_pending();
        let (_, acks) = pending.partitions().next().unwrap();
        assert_eq!(
            acks.iter().collect::<Vec<_>>(),
            [(1, AcknowledgeType::Accept), (2, AcknowledgeType::Reject)]
        );
    }

    #[test]
    fn committed_transaction_is_forgotten() {
        let mut st = AcknowledgementState::new(AcknowledgementMode::Explicit);
        st.deliver(&[rec(0, 1)]);
        st.acknowledge_in_transaction(&rec(0, 1), AcknowledgeType::Accept)
            .unwrap();
        let txn = st.take_transaction().unwrap();
        st.begin_poll().unwrap();
        assert_eq!(
            st.transaction_outcome(txn.id, TransactionOutcome::Committed)
                .unwrap(),
            1
        );
        assert_eq!(st.handed_back_len(), 0);
        assert!(!st.has_pending());
    }

    #[test]
    fn implicit_mode_cannot_be_transactional() {
        let mut st = AcknowledgementState::new(AcknowledgementMode::Implicit);
        st.deliver(&[rec(0, 1)]);
        assert!(
            st.acknowledge_in_transaction(&rec(0, 1), AcknowledgeType::Accept)
                .is_err()
        );
    }

    #[test]
    fn session_epochs_open_increment_wrap_and_reset() {
        let mut s = ShareSession::default();
        assert_eq!(s.epoch(), 0);
        assert!(
            !s.can_acknowledge(),
            "no acknowledgements on the opening fetch"
        );
        s.on_success();
        assert_eq!(s.epoch(), 1);
        assert!(s.can_acknowledge());
        s.on_success();
        assert_eq!(s.epoch(), 2);
        s.reset();
        assert_eq!(s.epoch(), 0);
        let mut w = ShareSession { epoch: i32::MAX };
        w.on_success();
        assert_eq!(w.epoch(), 1);
    }
}
