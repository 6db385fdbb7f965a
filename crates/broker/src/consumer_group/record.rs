//! What the group coordinator persists, and recovery from it.
//!
//! Records are JSON, one per [`StateLog`](crate::log::StateLog)
//! frame (`<data>/groups/offsets.log`). Replaying them in order through
//! [`GroupCoordinator::apply`] rebuilds the committed offsets, the pending
//! transactional offsets and each group's generation; classic membership
//! is not persisted (module docs of [`super`]). Consumer-protocol groups
//! are: [`GroupRecord::ConsumerGroup`] holds one group's whole durable
//! state (the last record of a group wins), replayed into the
//! consumer-protocol coordinator by the broker, not here; so is
//! [`GroupRecord::StreamsGroup`], a streams group's. A compaction writes
//! [`GroupCoordinator::snapshot_records`] and the last state of every
//! consumer-protocol and streams group, which replay to the same state.

use serde::{Deserialize, Serialize};

use super::consumer_protocol::PersistedConsumerGroup;
use super::coordinator::{Group, GroupCoordinator, GroupState};
use super::offsets::{PartitionOffset, PendingTxnOffsets};
use super::streams_protocol::StreamsGroup;

/// One persisted change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum GroupRecord {
    /// A group's generation after a join phase, a sync or a static
    /// member's replacement.
    Generation {
        /// Group id.
        group_id: String,
        /// Generation.
        generation_id: i32,
        /// Protocol type.
        protocol_type: Option<String>,
    },
    /// Offsets committed by OffsetCommit.
    Offsets {
        /// Group id.
        group_id: String,
        /// The offsets.
        offsets: Vec<PartitionOffset>,
    },
    /// Offsets staged by TxnOffsetCommit.
    TxnOffsets {
        /// Producer id.
        producer_id: i64,
        /// Producer epoch.
        producer_epoch: i16,
        /// Group id.
        group_id: String,
        /// The offsets.
        offsets: Vec<PartitionOffset>,
    },
    /// The marker of a transaction with staged offsets.
    TxnMarker {
        /// Producer id.
        producer_id: i64,
        /// Commit (else abort).
        commit: bool,
    },
    /// A group deleted (DeleteGroups): its generation and offsets.
    DeleteGroup {
        /// Group id.
        group_id: String,
    },
    /// Offsets removed (their topic was deleted, or OffsetDelete).
    DeleteOffsets {
        /// Group id.
        group_id: String,
        /// (topic, partition).
        partitions: Vec<(String, i32)>,
    },
    /// A consumer-protocol (KIP-848) group's durable state after a change;
    /// None: the group is gone (deleted, or emptied and removed).
    ConsumerGroup {
        /// Group id.
        group_id: String,
        /// The state.
        group: Option<Box<PersistedConsumerGroup>>,
    },
    /// A streams (KIP-1071) group's durable state after a change; None:
    /// the group is gone.
    StreamsGroup {
        /// Group id.
        group_id: String,
        /// The state.
        group: Option<Box<StreamsGroup>>,
    },
}

impl GroupRecord {
    /// Encodes the record.
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("records serialize")
    }

    /// Decodes a record.
    pub fn decode(bytes: &[u8]) -> Result<Self, serde_json::Error> {
        serde_json::from_slice(bytes)
    }
}

impl GroupCoordinator {
    /// Applies one record to the state (recovery, and the calls that
    /// produce records).
    pub fn apply(&mut self, record: &GroupRecord) {
        match record {
            GroupRecord::Generation {
                group_id,
                generation_id,
                protocol_type,
            } => {
                let g = self
                    .groups
                    .entry(group_id.clone())
                    .or_insert_with(|| Group::new(0));
                g.generation_id = g.generation_id.max(*generation_id);
                if g.state == GroupState::Empty {
                    g.protocol_type = protocol_type.clone();
                }
            }
            GroupRecord::Offsets { group_id, offsets } => {
                // A group that only ever had commits (generation -1) exists,
                // Empty, as in Kafka.
                self.groups
                    .entry(group_id.clone())
                    .or_insert_with(|| Group::new(0));
                let o = self.offsets.entry(group_id.clone()).or_default();
                for p in offsets {
                    o.insert((p.topic.clone(), p.partition), p.offset.clone());
                }
            }
            GroupRecord::TxnOffsets {
                producer_id,
                producer_epoch,
                group_id,
                offsets,
            } => {
                let pending = self.pending_txn.entry(*producer_id).or_default();
                pending.producer_epoch = *producer_epoch;
                let o = pending.groups.entry(group_id.clone()).or_default();
                for p in offsets {
                    o.insert((p.topic.clone(), p.partition), p.offset.clone());
                }
            }
            GroupRecord::TxnMarker {
                producer_id,
                commit,
            } => {
                if let Some(pending) = self.pending_txn.remove(producer_id)
                    && *commit
                {
                    for (group_id, offsets) in pending.groups {
                        let o = self.offsets.entry(group_id).or_default();
                        o.extend(offsets);
                    }
                }
            }
            GroupRecord::DeleteGroup { group_id } => {
                if self
                    .groups
                    .get(group_id)
                    .is_none_or(|g| g.members.is_empty())
                {
                    self.groups.remove(group_id);
                }
                self.offsets.remove(group_id);
            }
            GroupRecord::DeleteOffsets {
                group_id,
                partitions,
            } => {
                if let Some(o) = self.offsets.get_mut(group_id) {
                    for (t, p) in partitions {
                        o.remove(&(t.clone(), *p));
                    }
                }
            }
            // The consumer-protocol coordinator's, replayed by the broker.
            GroupRecord::ConsumerGroup { .. } | GroupRecord::StreamsGroup { .. } => {}
        }
    }

    /// Rebuilds a coordinator from its records.
    pub fn recover(
        config: super::ClassicGroupConfig,
        records: impl IntoIterator<Item = GroupRecord>,
    ) -> Self {
        let mut c = Self::new(config);
        for r in records {
            c.apply(&r);
        }
        c
    }

    /// The current durable state as records (compaction).
    pub fn snapshot_records(&self) -> Vec<GroupRecord> {
        let mut out = Vec::new();
        for (id, g) in &self.groups {
            out.push(GroupRecord::Generation {
                group_id: id.clone(),
                generation_id: g.generation_id,
                protocol_type: g.protocol_type.clone(),
            });
        }
        for (id, offsets) in &self.offsets {
            out.push(GroupRecord::Offsets {
                group_id: id.clone(),
                offsets: offsets
                    .iter()
                    .map(|((t, p), o)| PartitionOffset {
                        topic: t.clone(),
                        partition: *p,
                        offset: o.clone(),
                    })
                    .collect(),
            });
        }
        for (
            pid,
            PendingTxnOffsets {
                producer_epoch,
                groups,
            },
        ) in &self.pending_txn
        {
            for (group_id, offsets) in groups {
                out.push(GroupRecord::TxnOffsets {
                    producer_id: *pid,
                    producer_epoch: *producer_epoch,
                    group_id: group_id.clone(),
                    offsets: offsets
                        .iter()
                        .map(|((t, p), o)| PartitionOffset {
                            topic: t.clone(),
                            partition: *p,
                            offset: o.clone(),
                        })
                        .collect(),
                });
            }
        }
        out
    }

    /// Takes the durable part (offsets, pending transactional offsets,
    /// generations) from `fresh`, a coordinator recovered from the log,
    /// keeping the in-memory membership (after a failed append).
    pub fn replace_durable_state(&mut self, fresh: GroupCoordinator) {
        self.offsets = fresh.offsets;
        self.pending_txn = fresh.pending_txn;
        self.groups
            .retain(|id, g| !g.members.is_empty() || fresh.groups.contains_key(id));
        for (id, g) in fresh.groups {
            self.groups.entry(id).or_insert(g);
        }
    }

    /// How many records a snapshot would hold.
    pub fn live_record_count(&self) -> usize {
        self.groups.len() + self.offsets.len() + self.pending_txn.len()
    }
}
