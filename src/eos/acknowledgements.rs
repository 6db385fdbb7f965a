//! Accumulating share-group acknowledgements and packing them into the
//! smallest `AcknowledgementBatch` ranges for the wire.
//!
//! [`Acknowledgements`] collects `(offset, type)` pairs for one share
//! partition. [`Acknowledgements::to_batches`] turns them into batches:
//!
//! - a gap in offsets always starts a new batch;
//! - a contiguous stretch is cut into segments; a segment holding a single
//!   type is one batch with one type (`AcknowledgeTypes` of length 1), a
//!   segment mixing types is one batch with one type per offset.
//!
//! The cut is chosen to minimise the encoded size, which is exactly what a
//! batch costs in TxnShareAcknowledge / ShareAcknowledge: 8 + 8 bytes of
//! offsets, the compact-array length (a varint of `n + 1`), `n` type bytes
//! and one byte of tagged fields. So a single-type batch costs 19 bytes and a
//! per-offset batch of `L` offsets `17 + L + varint_size(L + 1)`. The optimum
//! comes from a dynamic program over the runs of equal type, `O(R log R)` for
//! `R` runs (a range-minimum tree per varint size class).

use std::collections::BTreeMap;

/// The share vocabulary, defined once in the protocol crate.
pub use crate::protocol::share::{AcknowledgeType, AcknowledgementBatch, TopicIdPartition};

/// Wire cost of a batch with `n` type bytes.
fn batch_cost(n: usize) -> usize {
    AcknowledgementBatch::<AcknowledgeType>::encoded_size_for(n)
}

/// A second acknowledgement of one offset with another type.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "offset {offset} is already acknowledged as {existing:?}, cannot acknowledge it as {new:?}"
)]
pub struct ConflictingAcknowledgement {
    /// The offset.
    pub offset: i64,
    /// The type already recorded.
    pub existing: AcknowledgeType,
    /// The type asked for.
    pub new: AcknowledgeType,
}

/// Acknowledgements for one share partition, by offset.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Acknowledgements {
    by_offset: BTreeMap<i64, AcknowledgeType>,
}

impl Acknowledgements {
    /// No acknowledgements.
    pub fn empty() -> Self {
        Self::default()
    }

    /// Records `offset` as `ty`. Adding the same pair twice is harmless; a
    /// different type for a recorded offset is refused.
    pub fn add(
        &mut self,
        offset: i64,
        ty: AcknowledgeType,
    ) -> Result<(), ConflictingAcknowledgement> {
        match self.by_offset.entry(offset) {
            std::collections::btree_map::Entry::Occupied(e) if *e.get() != ty => {
                Err(ConflictingAcknowledgement {
                    offset,
                    existing: *e.get(),
                    new: ty,
                })
            }
            std::collections::btree_map::Entry::Occupied(_) => Ok(()),
            std::collections::btree_map::Entry::Vacant(e) => {
                e.insert(ty);
                Ok(())
            }
        }
    }

    /// Number of offsets.
    pub fn len(&self) -> usize {
        self.by_offset.len()
    }

    /// `true` with no offsets.
    pub fn is_empty(&self) -> bool {
        self.by_offset.is_empty()
    }

    /// The type recorded for `offset`.
    pub fn get(&self, offset: i64) -> Option<AcknowledgeType> {
        self.by_offset.get(&offset).copied()
    }

    /// All (offset, type) in offset order.
    pub fn iter(&self) -> impl Iterator<Item = (i64, AcknowledgeType)> + '_ {
        self.by_offset.iter().map(|(o, t)| (*o, *t))
    }

    /// The (offset, type) from `first` to `last` (inclusive), in offset
    /// order.
    pub fn range(
        &self,
        first: i64,
        last: i64,
    ) -> impl Iterator<Item = (i64, AcknowledgeType)> + '_ {
        // (A BTreeMap range whose start is after its end panics.)
        (first <= last)
            .then(|| self.by_offset.range(first..=last))
            .into_iter()
            .flatten()
            .map(|(o, t)| (*o, *t))
    }

    /// Packs the acknowledgements into the smallest batches (see the module
    /// documentation).
    pub fn to_batches(&self) -> Vec<AcknowledgementBatch> {
        let mut out = Vec::new();
        let mut runs: Vec<Run> = Vec::new();
        let mut prev: Option<i64> = None;
        for (offset, ty) in self.iter() {
            if prev.is_some_and(|p| p + 1 != offset) {
                pack_stretch(&runs, &mut out);
                runs.clear();
            }
            match runs.last_mut() {
                Some(r) if r.ty == ty && r.first + r.len as i64 == offset => r.len += 1,
                _ => runs.push(Run {
                    first: offset,
                    len: 1,
                    ty,
                }),
            }
            prev = Some(offset);
        }
        pack_stretch(&runs, &mut out);
        out
    }
}

#[derive(Debug, Clone, Copy)]
struct Run {
    first: i64,
    len: usize,
    ty: AcknowledgeType,
}

/// Smallest index range `[lo, hi)` of the varint class with `bytes` bytes.
fn varint_class(bytes: usize) -> (u64, u64) {
    let lo = if bytes == 1 {
        1
    } else {
        1u64 << (7 * (bytes - 1))
    };
    let hi = 1u64 << (7 * bytes);
    (lo, hi)
}

/// A range-minimum tree over (value, index) pairs.
struct MinTree {
    n: usize,
    t: Vec<(usize, usize)>,
}

impl MinTree {
    fn new(n: usize) -> Self {
        Self {
            n,
            t: vec![(usize::MAX, usize::MAX); 2 * n.max(1)],
        }
    }
    fn set(&mut self, i: usize, v: (usize, usize)) {
        let mut p = i + self.n;
        self.t[p] = v;
        while p > 1 {
            p /= 2;
            self.t[p] = self.t[2 * p].min(self.t[2 * p + 1]);
        }
    }
    /// Minimum over `[l, r)`.
    fn min(&self, l: usize, r: usize) -> (usize, usize) {
        let (mut l, mut r) = (l + self.n, r + self.n);
        let mut best = (usize::MAX, usize::MAX);
        while l < r {
            if l & 1 == 1 {
                best = best.min(self.t[l]);
                l += 1;
            }
            if r & 1 == 1 {
                r -= 1;
                best = best.min(self.t[r]);
            }
            l /= 2;
            r /= 2;
        }
        best
    }
}

/// Packs one contiguous stretch (runs of equal type, back to back) into
/// batches of minimal total encoded size.
fn pack_stretch(runs: &[Run], out: &mut Vec<AcknowledgementBatch>) {
    let r = runs.len();
    if r == 0 {
        return;
    }
    // prefix[k] = offsets in runs[..k].
    let mut prefix = vec![0usize; r + 1];
    for (k, run) in runs.iter().enumerate() {
        prefix[k + 1] = prefix[k] + run.len;
    }
    // dp[i] = least cost covering runs[..i]; from[i] = start run of the
    // last segment. The tree holds dp[j] - prefix[j] + BIAS: the difference
    // can be negative (long single-type runs cost 19 bytes for many offsets)
    // and BIAS keeps it in usize.
    const BIAS: usize = 1 << 40;
    let mut dp = vec![0usize; r + 1];
    let mut from = vec![0usize; r + 1];
    let mut tree = MinTree::new(r + 1);
    tree.set(0, (BIAS, 0));
    for i in 1..=r {
        // The last run alone, one type.
        let mut best = dp[i - 1] + batch_cost(1);
        let mut best_from = i - 1;
        // A per-offset segment runs[j..i] with j <= i - 2, by varint class
        // of L + 1 where L = prefix[i] - prefix[j].
        if i >= 2 {
            for bytes in 1..=5usize {
                let (lo, hi) = varint_class(bytes);
                // Need lo <= prefix[i] - prefix[j] + 1 < hi.
                let p_i = prefix[i] as u64;
                // prefix[j] <= p_i + 1 - lo  and  prefix[j] > p_i + 1 - hi.
                if p_i + 1 < lo {
                    continue;
                }
                let max_pj = p_i + 1 - lo;
                let min_pj_excl = (p_i + 1).checked_sub(hi);
                let j_hi = prefix[..=i - 2].partition_point(|&p| (p as u64) <= max_pj);
                let j_lo = match min_pj_excl {
                    Some(m) => prefix[..=i - 2].partition_point(|&p| (p as u64) <= m),
                    None => 0,
                };
                if j_lo >= j_hi {
                    continue;
                }
                let (v, j) = tree.min(j_lo, j_hi);
                if v == usize::MAX {
                    continue;
                }
                // v = dp[j] - prefix[j] + BIAS
                let cost = v + prefix[i] + 17 + bytes - BIAS;
                if cost < best {
                    best = cost;
                    best_from = j;
                }
            }
        }
        dp[i] = best;
        from[i] = best_from;
        tree.set(i, (dp[i] + BIAS - prefix[i], i));
    }
    // Rebuild the segments, last to first.
    let mut segments = Vec::new();
    let mut i = r;
    while i > 0 {
        let j = from[i];
        segments.push((j, i));
        i = j;
    }
    for (j, i) in segments.into_iter().rev() {
        let first = runs[j].first;
        let last = runs[i - 1].first + runs[i - 1].len as i64 - 1;
        let acknowledge_types = if i - j == 1 {
            vec![runs[j].ty]
        } else {
            runs[j..i]
                .iter()
                .flat_map(|run| std::iter::repeat_n(run.ty, run.len))
                .collect()
        };
        out.push(AcknowledgementBatch {
            first_offset: first,
            last_offset: last,
            acknowledge_types,
        });
    }
}

/// Acknowledgements for several share partitions.
#[derive(Debug, Clone, Default)]
pub struct PartitionAcknowledgements {
    by_partition: BTreeMap<TopicIdPartition, Acknowledgements>,
}

impl PartitionAcknowledgements {
    /// None.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records `offset` of `tp` as `ty`.
    pub fn add(
        &mut self,
        tp: &TopicIdPartition,
        offset: i64,
        ty: AcknowledgeType,
    ) -> Result<(), ConflictingAcknowledgement> {
        if let Some(a) = self.by_partition.get_mut(tp) {
            return a.add(offset, ty);
        }
        let mut a = Acknowledgements::empty();
        a.add(offset, ty)?;
        self.by_partition.insert(tp.clone(), a);
        Ok(())
    }

    /// Offsets recorded, all partitions together.
    pub fn len(&self) -> usize {
        self.by_partition.values().map(Acknowledgements::len).sum()
    }

    /// `true` with nothing recorded.
    pub fn is_empty(&self) -> bool {
        self.by_partition.values().all(Acknowledgements::is_empty)
    }

    /// Per-partition accumulators.
    pub fn partitions(&self) -> impl Iterator<Item = (&TopicIdPartition, &Acknowledgements)> {
        self.by_partition.iter()
    }

    /// The per-partition accumulators, by value.
    pub fn into_partitions(self) -> impl Iterator<Item = (TopicIdPartition, Acknowledgements)> {
        self.by_partition.into_iter()
    }

    /// Batches per partition, the form `send_share_acknowledgements_to_transaction` takes.
    pub fn to_batches(&self) -> BTreeMap<TopicIdPartition, Vec<AcknowledgementBatch>> {
        self.by_partition
            .iter()
            .filter(|(_, a)| !a.is_empty())
            .map(|(tp, a)| (tp.clone(), a.to_batches()))
            .collect()
    }

    /// Adds every acknowledgement of `acks` to `tp`'s; an offset already
    /// recorded with another type keeps its first.
    pub fn insert(&mut self, tp: TopicIdPartition, acks: Acknowledgements) {
        match self.by_partition.entry(tp) {
            std::collections::btree_map::Entry::Vacant(e) => {
                e.insert(acks);
            }
            std::collections::btree_map::Entry::Occupied(mut e) => {
                for (o, t) in acks.iter() {
                    let _ = e.get_mut().add(o, t);
                }
            }
        }
    }

    /// Empties the accumulator, returning what it held.
    pub fn take(&mut self) -> Self {
        std::mem::take(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use AcknowledgeType::*;
    use proptest::prelude::*;

    fn acks(pairs: &[(i64, AcknowledgeType)]) -> Acknowledgements {
        let mut a = Acknowledgements::empty();
        for &(o, t) in pairs {
            a.add(o, t).unwrap();
        }
        a
    }

    #[test]
    fn uniform_range_is_one_single_type_batch() {
        let a = acks(&(10..=500).map(|o| (o, Accept)).collect::<Vec<_>>());
        assert_eq!(
            a.to_batches(),
            vec![AcknowledgementBatch {
                first_offset: 10,
                last_offset: 500,
                acknowledge_types: vec![Accept]
            }]
        );
    }

    #[test]
    fn gap_starts_a_new_batch() {
        let a = acks(&[(1, Accept), (2, Accept), (5, Accept)]);
        let b = a.to_batches();
        assert_eq!(b.len(), 2);
        assert_eq!((b[0].first_offset, b[0].last_offset), (1, 2));
        assert_eq!((b[1].first_offset, b[1].last_offset), (5, 5));
    }

    #[test]
    fn short_mixed_stretch_becomes_per_offset_batch() {
        let a = acks(&[(0, Accept), (1, Reject), (2, Accept)]);
        assert_eq!(
            a.to_batches(),
            vec![AcknowledgementBatch {
                first_offset: 0,
                last_offset: 2,
                acknowledge_types: vec![Accept, Reject, Accept]
            }]
        );
    }

    #[test]
    fn long_uniform_runs_are_split_out() {
        // 100 accepts, one reject, 100 accepts: three single-type batches
        // (57 bytes) beat one per-offset batch (17 + 201 + 2 = 220 bytes).
        let mut pairs: Vec<_> = (0..100).map(|o| (o, Accept)).collect();
        pairs.push((100, Reject));
        pairs.extend((101..201).map(|o| (o, Accept)));
        let b = acks(&pairs).to_batches();
        assert_eq!(b.len(), 3);
        assert!(b.iter().all(|x| x.acknowledge_types.len() == 1));
    }

    #[test]
    fn conflicting_type_is_refused_same_type_is_idempotent() {
        let mut a = Acknowledgements::empty();
        a.add(3, Accept).unwrap();
        a.add(3, Accept).unwrap();
        assert_eq!(
            a.add(3, Reject),
            Err(ConflictingAcknowledgement {
                offset: 3,
                existing: Accept,
                new: Reject
            })
        );
    }

    #[test]
    fn wire_form_uses_codes() {
        let b = acks(&[(0, Accept), (1, Reject)]).to_batches();
        assert_eq!(b[0].to_wire().acknowledge_types, vec![1, 3]);
    }

    /// Exhaustive minimum over all segmentations (small inputs only).
    fn brute_force_cost(runs: &[Run]) -> usize {
        let r = runs.len();
        let mut dp = vec![usize::MAX; r + 1];
        dp[0] = 0;
        for i in 1..=r {
            for j in 0..i {
                let len: usize = runs[j..i].iter().map(|x| x.len).sum();
                let cost = if i - j == 1 {
                    batch_cost(1)
                } else {
                    batch_cost(len)
                };
                dp[i] = dp[i].min(dp[j] + cost);
            }
        }
        dp[r]
    }

    fn ack_type() -> impl Strategy<Value = AcknowledgeType> {
        prop_oneof![Just(Accept), Just(Reject), Just(Release), Just(Gap)]
    }

    proptest! {
        #[test]
        fn batches_expand_to_exactly_the_input(
            pairs in proptest::collection::btree_map(0i64..400, ack_type(), 0..300)
        ) {
            let mut a = Acknowledgements::empty();
            for (&o, &t) in &pairs { a.add(o, t).unwrap(); }
            let batches = a.to_batches();
            let expanded: Vec<(i64, AcknowledgeType)> =
                batches.iter().flat_map(|b| b.expand().collect::<Vec<_>>()).collect();
            let input: Vec<(i64, AcknowledgeType)> = pairs.into_iter().collect();
            prop_assert_eq!(expanded, input);
            // Sorted, non-overlapping, valid type-array lengths.
            for w in batches.windows(2) {
                prop_assert!(w[0].last_offset < w[1].first_offset);
            }
            for b in &batches {
                let n = b.acknowledge_types.len() as i64;
                prop_assert!(n == 1 || n == b.last_offset - b.first_offset + 1);
                // A per-offset batch never has a single type throughout.
                if n > 1 {
                    prop_assert!(b.acknowledge_types.iter().any(|t| *t != b.acknowledge_types[0]));
                }
            }
        }

        #[test]
        fn batches_are_minimal(
            // Contiguous stretch of runs with random lengths and types.
            runs in proptest::collection::vec((1usize..60, ack_type()), 1..14)
        ) {
            let mut a = Acknowledgements::empty();
            let mut o = 0i64;
            let mut prev: Option<AcknowledgeType> = None;
            let mut rs = Vec::new();
            for (len, ty) in runs {
                // Merge equal neighbours as the packer does.
                if prev == Some(ty) {
                    let last: &mut Run = rs.last_mut().unwrap();
                    last.len += len;
                } else {
                    rs.push(Run { first: o, len, ty });
                }
                for _ in 0..len { a.add(o, ty).unwrap(); o += 1; }
                prev = Some(ty);
            }
            let got: usize = a.to_batches().iter().map(|b| b.encoded_size()).sum();
            prop_assert_eq!(got, brute_force_cost(&rs));
        }
    }
}
