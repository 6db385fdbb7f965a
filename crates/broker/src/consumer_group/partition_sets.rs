//! Set arithmetic on assignments keyed by topic or subtopology: the
//! consumer protocol's partitions by topic id and the streams protocol's
//! tasks by subtopology id are both a map to sets of partition numbers.
//! Results never hold an empty set, so equal assignments compare equal.

use std::collections::{BTreeMap, BTreeSet};

/// Sets of partitions (or task numbers) by key.
pub type PartitionSets<K> = BTreeMap<K, BTreeSet<i32>>;

/// How many partitions in all.
pub fn count<K>(a: &PartitionSets<K>) -> usize {
    a.values().map(BTreeSet::len).sum()
}

/// What `a` holds and `b` does not.
pub fn minus<K: Ord + Clone>(a: &PartitionSets<K>, b: &PartitionSets<K>) -> PartitionSets<K> {
    let mut out = PartitionSets::new();
    for (k, ps) in a {
        let rest: BTreeSet<i32> = match b.get(k) {
            Some(q) => ps.difference(q).copied().collect(),
            None => ps.clone(),
        };
        if !rest.is_empty() {
            out.insert(k.clone(), rest);
        }
    }
    out
}

/// What both hold.
pub fn intersect<K: Ord + Clone>(a: &PartitionSets<K>, b: &PartitionSets<K>) -> PartitionSets<K> {
    let mut out = PartitionSets::new();
    for (k, ps) in a {
        if let Some(q) = b.get(k) {
            let both: BTreeSet<i32> = ps.intersection(q).copied().collect();
            if !both.is_empty() {
                out.insert(k.clone(), both);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn differences_and_intersections_drop_empty_sets() {
        let a: PartitionSets<&str> = [("x", [0, 1].into()), ("y", [2].into())].into();
        let b: PartitionSets<&str> = [("x", [1].into()), ("y", [2].into())].into();
        assert_eq!(minus(&a, &b), [("x", [0].into())].into());
        assert_eq!(
            intersect(&a, &b),
            [("x", [1].into()), ("y", [2].into())].into()
        );
        assert_eq!(count(&a), 3);
        assert!(minus(&b, &a).is_empty());
    }
}
