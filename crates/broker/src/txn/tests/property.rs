//! Seeded random interleavings of producers, marker acknowledgements, time
//! and crashes, checking the coordinator's invariants after every step:
//!
//! - every persisted state change is an allowed transition;
//! - a producer's epoch never goes down, and a new producer id is fresh and
//!   starts at epoch 0;
//! - a transaction completes only after every participant of its Prepare
//!   state got a marker (with the transaction's producer id, epoch and
//!   decision) and acknowledged it;
//! - producer ids are never shared between transactional ids.

use super::super::*;
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed};
use std::collections::{BTreeMap, BTreeSet};
use uuid::Uuid;

const IDS: [&str; 2] = ["tx-a", "tx-b"];

#[derive(Clone, Debug)]
enum Op {
    Init {
        id: usize,
        v3: bool,
    },
    AddLog {
        id: usize,
        partition: i32,
        tv2: bool,
        stale: bool,
    },
    AddShare {
        id: usize,
        partition: i32,
    },
    End {
        id: usize,
        commit: bool,
        tv2: bool,
        stale: bool,
    },
    Advance {
        ms: i64,
    },
    Ack {
        pick: usize,
        kind: u8,
    },
    Crash,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => (0..2usize, any::<bool>()).prop_map(|(id, v3)| Op::Init { id, v3 }),
        3 => (0..2usize, 0..3i32, any::<bool>(), prop::bool::weighted(0.1))
            .prop_map(|(id, partition, tv2, stale)| Op::AddLog { id, partition, tv2, stale }),
        2 => (0..2usize, 0..2i32).prop_map(|(id, partition)| Op::AddShare { id, partition }),
        3 => (0..2usize, any::<bool>(), any::<bool>(), prop::bool::weighted(0.1))
            .prop_map(|(id, commit, tv2, stale)| Op::End { id, commit, tv2, stale }),
        2 => (1..800i64).prop_map(|ms| Op::Advance { ms }),
        5 => (any::<usize>(), 0..10u8).prop_map(|(pick, kind)| Op::Ack { pick, kind }),
        1 => Just(Op::Crash),
    ]
}

/// What the test remembers about one transactional id.
#[derive(Default)]
struct Track {
    /// The producer as the client knows it.
    client: Option<ProducerIdAndEpoch>,
    /// Last persisted snapshot.
    last: Option<TransactionMetadata>,
    /// Producer ids this transactional id ever had.
    ids: BTreeSet<i64>,
    /// Participants of the transaction in Prepare, with (pid, epoch, commit).
    preparing: Option<(i64, i16, bool, BTreeSet<Participant>)>,
    /// Participants that got a marker for the preparing transaction.
    marked: BTreeSet<Participant>,
    /// Participants that acknowledged it.
    acked: BTreeSet<Participant>,
}

struct Harness {
    c: TransactionCoordinator,
    now: i64,
    log: Vec<TxnLogRecord>,
    tracks: BTreeMap<String, Track>,
    outstanding: Vec<(String, i64, i16, Participant)>,
}

fn config() -> TxnCoordinatorConfig {
    TxnCoordinatorConfig {
        marker_retry_backoff_ms: 50,
        producer_id_block_size: 3,
        ..TxnCoordinatorConfig::default()
    }
}

impl Harness {
    fn new() -> Self {
        Harness {
            c: TransactionCoordinator::new(config()),
            now: 0,
            log: Vec::new(),
            tracks: IDS
                .iter()
                .map(|i| (i.to_string(), Track::default()))
                .collect(),
            outstanding: Vec::new(),
        }
    }

    fn absorb(&mut self, effects: Vec<TxnEffect>) -> Result<(), TestCaseError> {
        for e in effects {
            match e {
                TxnEffect::Persist(r) => {
                    if let TxnLogRecord::Transaction(md) = &r {
                        self.check_snapshot(md)?;
                    }
                    self.log.push(r);
                }
                TxnEffect::WriteMarkers(m) => {
                    let t = self.tracks.get_mut(&m.transactional_id).unwrap();
                    let (pid, epoch, commit, parts) =
                        t.preparing.clone().expect("markers only while preparing");
                    prop_assert_eq!(
                        (m.producer_id, m.producer_epoch, m.commit),
                        (pid, epoch, commit)
                    );
                    prop_assert_eq!(m.coordinator_epoch, self.c.coordinator_epoch());
                    for p in m.participants {
                        prop_assert!(parts.contains(&p), "marker to a non-participant");
                        t.marked.insert(p.clone());
                        self.outstanding.push((
                            m.transactional_id.clone(),
                            m.producer_id,
                            m.producer_epoch,
                            p,
                        ));
                    }
                }
                TxnEffect::TransactionCompleted {
                    transactional_id,
                    producer_id,
                    producer_epoch,
                    commit,
                } => {
                    let t = self.tracks.get_mut(&transactional_id).unwrap();
                    // The Complete snapshot came first and cleared `preparing`;
                    // `completed_check` holds what was verified there.
                    let last = t.last.as_ref().unwrap();
                    prop_assert_eq!(
                        last.last_outcome.unwrap(),
                        CompletedTxn {
                            producer_id,
                            marker_epoch: producer_epoch,
                            committed: commit,
                        }
                    );
                }
            }
        }
        Ok(())
    }

    fn check_snapshot(&mut self, md: &TransactionMetadata) -> Result<(), TestCaseError> {
        // Producer ids are never shared between transactional ids.
        for (other, t) in &self.tracks {
            if other != &md.transactional_id {
                prop_assert!(!t.ids.contains(&md.producer_id), "producer id shared");
            }
        }
        let t = self.tracks.get_mut(&md.transactional_id).unwrap();
        if let Some(prev) = &t.last {
            prop_assert!(
                prev.state.can_transition_to(md.state),
                "illegal transition {:?} -> {:?}",
                prev.state,
                md.state
            );
            if md.producer_id == prev.producer_id {
                prop_assert!(md.producer_epoch >= prev.producer_epoch, "epoch went down");
            } else {
                prop_assert!(!t.ids.contains(&md.producer_id), "producer id reused");
                prop_assert_eq!(md.producer_epoch, 0);
                prop_assert!(md.producer_id > prev.producer_id);
            }
        }
        t.ids.insert(md.producer_id);
        if md.state.is_prepare() {
            let fresh = (
                md.producer_id,
                md.producer_epoch,
                md.state == TxnState::PrepareCommit,
            );
            if t.preparing.as_ref().map(|p| (p.0, p.1, p.2)) != Some(fresh) {
                t.marked.clear();
                t.acked.clear();
            }
            t.preparing = Some((fresh.0, fresh.1, fresh.2, md.participants.clone()));
        }
        if md.state.is_complete() && t.last.as_ref().is_some_and(|l| l.state.is_prepare()) {
            let (_, _, commit, parts) = t.preparing.take().expect("prepare before complete");
            prop_assert_eq!(commit, md.state == TxnState::CompleteCommit);
            prop_assert!(
                parts.is_subset(&t.marked),
                "completed without a marker to every participant"
            );
            prop_assert!(
                parts.is_subset(&t.acked),
                "completed without every acknowledgement"
            );
        }
        t.last = Some(md.clone());
        Ok(())
    }

    fn producer(&self, id: &str, stale: bool) -> (i64, i16) {
        let p = self.tracks[id].client.unwrap_or(ProducerIdAndEpoch::NONE);
        if stale {
            (p.producer_id, p.producer_epoch.saturating_sub(1))
        } else {
            (p.producer_id, p.producer_epoch)
        }
    }

    fn step(&mut self, op: Op) -> Result<(), TestCaseError> {
        match op {
            Op::Init { id, v3 } => {
                let id = IDS[id];
                let (pid, epoch) = self.producer(id, false);
                let req = InitProducerIdRequest {
                    api_version: if v3 { 3 } else { 5 },
                    transactional_id: Some(id.to_string()),
                    transaction_timeout_ms: 2_000,
                    producer_id: if v3 { pid } else { -1 },
                    producer_epoch: if v3 { epoch } else { -1 },
                };
                let out = self.c.init_producer_id(self.now, &req);
                if let Ok(p) = out.result {
                    self.tracks.get_mut(id).unwrap().client = Some(p);
                }
                self.absorb(out.effects)?;
            }
            Op::AddLog {
                id,
                partition,
                tv2,
                stale,
            } => {
                let id = IDS[id];
                let (pid, epoch) = self.producer(id, stale);
                let v = if tv2 { 5 } else { 3 };
                let out = self.c.add_partitions_to_txn(
                    self.now,
                    v,
                    id,
                    pid,
                    epoch,
                    &[("t".into(), partition)],
                );
                if stale && epoch >= 0 {
                    prop_assert!(out.result.is_err(), "stale epoch accepted");
                }
                self.absorb(out.effects)?;
            }
            Op::AddShare { id, partition } => {
                let id = IDS[id];
                let (pid, epoch) = self.producer(id, false);
                let part = Participant::Share {
                    group_id: "g".into(),
                    topic_id: Uuid::from_u128(1),
                    topic: "in".into(),
                    partition,
                };
                let out = self
                    .c
                    .add_share_participants(self.now, id, pid, epoch, &[part]);
                self.absorb(out.effects)?;
            }
            Op::End {
                id,
                commit,
                tv2,
                stale,
            } => {
                let id = IDS[id];
                let (pid, epoch) = self.producer(id, stale);
                let v = if tv2 { 5 } else { 3 };
                let out = self.c.end_txn(self.now, v, id, pid, epoch, commit);
                if let Ok(p) = out.result
                    && tv2
                {
                    // TV2 answers a bumped epoch or a new producer id, never the old one.
                    prop_assert!(p.producer_id != pid || p.producer_epoch > epoch);
                    self.tracks.get_mut(id).unwrap().client = Some(p);
                }
                self.absorb(out.effects)?;
            }
            Op::Advance { ms } => {
                self.now += ms;
                let effects = self.c.tick(self.now);
                self.absorb(effects)?;
            }
            Op::Ack { pick, kind } => {
                if self.outstanding.is_empty() {
                    return Ok(());
                }
                let i = pick % self.outstanding.len();
                let (id, pid, epoch, part) = self.outstanding.swap_remove(i);
                let ack = match kind {
                    0..=6 => MarkerAck::Written,
                    7 | 8 => MarkerAck::Retry,
                    _ => MarkerAck::PartitionGone,
                };
                let t = self.tracks.get_mut(&id).unwrap();
                let current = t
                    .preparing
                    .as_ref()
                    .is_some_and(|p| p.0 == pid && p.1 == epoch);
                if ack != MarkerAck::Retry && current {
                    t.acked.insert(part.clone());
                }
                let effects = self.c.marker_written(self.now, &id, pid, epoch, &part, ack);
                self.absorb(effects)?;
            }
            Op::Crash => {
                let (c, effects) =
                    TransactionCoordinator::recover(config(), self.log.clone(), self.now);
                self.c = c;
                // Acks are not durable: recovery sends every marker again.
                for t in self.tracks.values_mut() {
                    t.marked.clear();
                    t.acked.clear();
                }
                self.outstanding.clear();
                self.absorb(effects)?;
                for id in IDS {
                    prop_assert_eq!(self.c.describe(id), self.tracks[id].last.as_ref());
                }
            }
        }
        // Gauges agree with the model.
        let m = self.c.metrics();
        let open = self
            .c
            .transactions()
            .filter(|md| md.state == TxnState::Ongoing || md.state.is_prepare())
            .count();
        prop_assert_eq!(m.ongoing_transactions, open);
        Ok(())
    }
}

proptest! {
    #![proptest_config(Config {
        cases: 200,
        rng_seed: RngSeed::Fixed(0x5eed_1289),
        failure_persistence: None,
        ..Config::default()
    })]

    #[test]
    fn random_interleavings_keep_coordinator_invariants(ops in prop::collection::vec(op(), 1..120)) {
        let mut h = Harness::new();
        for op in ops {
            h.step(op)?;
        }
        // Drain: acknowledge everything, advancing time so retries flow,
        // until no transaction is left preparing.
        for _ in 0..200 {
            while !h.outstanding.is_empty() {
                h.step(Op::Ack { pick: 0, kind: 0 })?;
            }
            if h.c.transactions().all(|md| !md.state.is_prepare()) {
                break;
            }
            h.step(Op::Advance { ms: 100 })?;
        }
        for md in h.c.transactions() {
            prop_assert!(!md.state.is_prepare(), "markers never completed for {}", md.transactional_id);
        }
        prop_assert_eq!(h.c.metrics().markers_pending, 0);
    }
}
