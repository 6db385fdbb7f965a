//! [`ShareAcknowledgements`]: the acknowledgements a share consumer hands
//! to the producer's transaction, as the KIP-1289 author's branch names
//! them (`ShareConsumer.acknowledgementsForTransaction()` returns one,
//! `Producer.sendShareAcknowledgementsToTransaction(ShareAcknowledgements,
//! ShareGroupMetadata)` takes it).
//!
//! It is a value: per share partition, the acknowledgement batches to stage
//! (ACCEPT, REJECT and GAP). Partitions without batches are dropped. A map
//! of batches converts into one, so the producer's call also takes the
//! KIP text's `Map<TopicIdPartition, List<AcknowledgementBatch>>`.

use std::collections::BTreeMap;

use super::acknowledgements::{
    AcknowledgeType, AcknowledgementBatch, PartitionAcknowledgements, TopicIdPartition,
};

/// Share acknowledgements taken for a transaction. See the module docs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShareAcknowledgements {
    batches: BTreeMap<TopicIdPartition, Vec<AcknowledgementBatch>>,
}

impl ShareAcknowledgements {
    /// No acknowledgements.
    pub fn empty() -> Self {
        Self::default()
    }

    /// `batches` per share partition; partitions without batches are left
    /// out.
    pub fn new(batches: BTreeMap<TopicIdPartition, Vec<AcknowledgementBatch>>) -> Self {
        Self {
            batches: batches.into_iter().filter(|(_, b)| !b.is_empty()).collect(),
        }
    }

    /// `true` when there is nothing to stage.
    pub fn is_empty(&self) -> bool {
        self.batches.is_empty()
    }

    /// The batches per share partition.
    pub fn acknowledgements(&self) -> &BTreeMap<TopicIdPartition, Vec<AcknowledgementBatch>> {
        &self.batches
    }

    /// The batches per share partition, by value.
    pub fn into_acknowledgements(self) -> BTreeMap<TopicIdPartition, Vec<AcknowledgementBatch>> {
        self.batches
    }

    /// How many offsets carry `ty`.
    pub fn count(&self, ty: AcknowledgeType) -> usize {
        self.batches
            .values()
            .flatten()
            .flat_map(|b| b.expand())
            .filter(|(_, t)| *t == ty)
            .count()
    }
}

impl From<BTreeMap<TopicIdPartition, Vec<AcknowledgementBatch>>> for ShareAcknowledgements {
    fn from(batches: BTreeMap<TopicIdPartition, Vec<AcknowledgementBatch>>) -> Self {
        Self::new(batches)
    }
}

impl From<&PartitionAcknowledgements> for ShareAcknowledgements {
    fn from(acks: &PartitionAcknowledgements) -> Self {
        Self::new(acks.to_batches())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use uuid::Uuid;

    fn tp(p: i32) -> TopicIdPartition {
        TopicIdPartition {
            topic_id: Uuid::from_u128(7),
            topic: "in".into(),
            partition: p,
        }
    }

    #[test]
    fn packs_per_partition_and_leaves_empty_partitions_out() {
        let mut acks = PartitionAcknowledgements::new();
        acks.add(&tp(0), 10, AcknowledgeType::Accept).unwrap();
        acks.add(&tp(0), 11, AcknowledgeType::Gap).unwrap();
        acks.add(&tp(0), 12, AcknowledgeType::Accept).unwrap();
        acks.add(&tp(1), 3, AcknowledgeType::Reject).unwrap();
        let s = ShareAcknowledgements::from(&acks);
        assert!(!s.is_empty());
        assert_eq!(s.acknowledgements().len(), 2);
        assert_eq!(s.count(AcknowledgeType::Accept), 2);
        assert_eq!(s.count(AcknowledgeType::Gap), 1);
        assert_eq!(s.count(AcknowledgeType::Reject), 1);
        let mut m = BTreeMap::new();
        m.insert(tp(2), Vec::new());
        let e = ShareAcknowledgements::from(m);
        assert!(e.is_empty(), "a partition without batches is left out");
        assert_eq!(e, ShareAcknowledgements::empty());
    }
}
