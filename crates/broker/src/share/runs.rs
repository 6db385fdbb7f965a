//! A run-length map from offsets to values.
//!
//! The share partition keeps one value per *run* of consecutive offsets that
//! share the same state, delivery count and lock, never one per record. A
//! [`RunMap`] is a `BTreeMap` keyed by the first offset of each run; every
//! mutation splits runs only where it must and merges the neighbours it
//! touched afterwards, so the map stays canonical: no two adjacent runs hold
//! equal values. Its size is the number of distinct runs, whatever the number
//! of records.

use std::collections::BTreeMap;

/// One run: the offsets `first..=last` all hold `value`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run<V> {
    /// Last offset of the run, inclusive.
    pub last: i64,
    /// The value every offset of the run holds.
    pub value: V,
}

/// Offsets `first..=last` mapped to values by runs (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunMap<V> {
    runs: BTreeMap<i64, Run<V>>,
}

impl<V> Default for RunMap<V> {
    fn default() -> Self {
        RunMap {
            runs: BTreeMap::new(),
        }
    }
}

impl<V: Clone + PartialEq> RunMap<V> {
    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of runs held (the memory the map uses, in runs).
    pub fn run_count(&self) -> usize {
        self.runs.len()
    }

    /// Whether no offset is mapped.
    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }

    /// The first run, as `(first, last, value)`.
    pub fn first_run(&self) -> Option<(i64, i64, &V)> {
        self.runs.iter().next().map(|(f, r)| (*f, r.last, &r.value))
    }

    /// Every run in offset order, as `(first, last, value)`.
    pub fn iter(&self) -> impl Iterator<Item = (i64, i64, &V)> {
        self.runs.iter().map(|(f, r)| (*f, r.last, &r.value))
    }

    /// The runs overlapping `first..=last`, clipped to that range.
    pub fn range(&self, first: i64, last: i64) -> impl Iterator<Item = (i64, i64, &V)> {
        let start = self
            .runs
            .range(..=first)
            .next_back()
            .map(|(f, _)| *f)
            .unwrap_or(first);
        self.runs
            .range(start..)
            .take_while(move |(f, _)| **f <= last)
            .filter(move |(_, r)| r.last >= first)
            .map(move |(f, r)| ((*f).max(first), r.last.min(last), &r.value))
    }

    /// The value at `offset`, if mapped.
    pub fn get(&self, offset: i64) -> Option<&V> {
        self.runs
            .range(..=offset)
            .next_back()
            .filter(|(_, r)| r.last >= offset)
            .map(|(_, r)| &r.value)
    }

    /// Makes `offset` the first offset of a run if a run covers it.
    fn split_at(&mut self, offset: i64) {
        let Some((&f, r)) = self.runs.range(..offset).next_back() else {
            return;
        };
        if r.last < offset {
            return;
        }
        let tail = Run {
            last: r.last,
            value: r.value.clone(),
        };
        self.runs.get_mut(&f).expect("run exists").last = offset - 1;
        debug_assert!(f < offset);
        self.runs.insert(offset, tail);
    }

    /// Maps `first..=last` to `value`; the range must not overlap any run.
    pub fn insert(&mut self, first: i64, last: i64, value: V) {
        debug_assert!(first <= last);
        debug_assert!(self.range(first, last).next().is_none(), "overlap");
        self.runs.insert(first, Run { last, value });
        self.coalesce(first, last);
    }

    /// Replaces the value of every mapped offset in `first..=last` by
    /// `f(run_first, run_last, old_value)`, called once per (clipped) run.
    /// Offsets not mapped stay unmapped.
    pub fn update(&mut self, first: i64, last: i64, mut f: impl FnMut(i64, i64, &V) -> V) {
        if first > last {
            return;
        }
        self.split_at(first);
        self.split_at(last + 1);
        for (rf, run) in self.runs.range_mut(first..=last) {
            let new = f(*rf, run.last, &run.value);
            run.value = new;
        }
        self.coalesce(first, last);
    }

    /// Removes every offset below `offset`, returning the removed runs.
    pub fn remove_below(&mut self, offset: i64) -> Vec<(i64, i64, V)> {
        self.split_at(offset);
        let keep = self.runs.split_off(&offset);
        let removed = std::mem::replace(&mut self.runs, keep);
        removed
            .into_iter()
            .map(|(f, r)| (f, r.last, r.value))
            .collect()
    }

    /// Merges equal adjacent runs from the run just before `first` to the
    /// run just after `last`.
    fn coalesce(&mut self, first: i64, last: i64) {
        let from = self
            .runs
            .range(..first)
            .next_back()
            .map(|(f, _)| *f)
            .unwrap_or(first);
        let keys: Vec<i64> = self
            .runs
            .range(from..=last.saturating_add(1))
            .map(|(f, _)| *f)
            .collect();
        let mut keys = keys.into_iter();
        let Some(mut head) = keys.next() else {
            return;
        };
        for key in keys {
            let head_run = &self.runs[&head];
            let next_run = &self.runs[&key];
            if head_run.last.checked_add(1) == Some(key) && head_run.value == next_run.value {
                let next_last = next_run.last;
                self.runs.remove(&key);
                self.runs.get_mut(&head).expect("run exists").last = next_last;
            } else {
                head = key;
            }
        }
    }

    /// Whether the map is canonical: runs well-formed, disjoint, and no two
    /// adjacent runs equal. Used by tests and debug assertions.
    pub fn is_canonical(&self) -> bool {
        let mut prev: Option<(i64, &V)> = None;
        for (f, r) in &self.runs {
            if r.last < *f {
                return false;
            }
            if let Some((pl, pv)) = prev
                && (*f <= pl || (*f == pl + 1 && *pv == r.value))
            {
                return false;
            }
            prev = Some((r.last, &r.value));
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runs(m: &RunMap<u8>) -> Vec<(i64, i64, u8)> {
        m.iter().map(|(f, l, v)| (f, l, *v)).collect()
    }

    #[test]
    fn insert_merges_equal_neighbours() {
        let mut m = RunMap::new();
        m.insert(0, 4, 1u8);
        m.insert(5, 9, 1);
        m.insert(10, 10, 2);
        assert_eq!(runs(&m), vec![(0, 9, 1), (10, 10, 2)]);
        assert!(m.is_canonical());
    }

    #[test]
    fn update_splits_and_remerges() {
        let mut m = RunMap::new();
        m.insert(0, 9, 1u8);
        m.update(3, 5, |_, _, _| 2);
        assert_eq!(runs(&m), vec![(0, 2, 1), (3, 5, 2), (6, 9, 1)]);
        m.update(3, 5, |_, _, _| 1);
        assert_eq!(runs(&m), vec![(0, 9, 1)]);
        assert!(m.is_canonical());
    }

    #[test]
    fn update_sees_each_clipped_run() {
        let mut m = RunMap::new();
        m.insert(0, 3, 1u8);
        m.insert(4, 7, 2);
        let mut seen = vec![];
        m.update(2, 5, |f, l, v| {
            seen.push((f, l, *v));
            *v + 10
        });
        assert_eq!(seen, vec![(2, 3, 1), (4, 5, 2)]);
        assert_eq!(runs(&m), vec![(0, 1, 1), (2, 3, 11), (4, 5, 12), (6, 7, 2)]);
    }

    #[test]
    fn range_clips_and_get_finds() {
        let mut m = RunMap::new();
        m.insert(10, 19, 1u8);
        m.insert(20, 29, 2);
        let r: Vec<_> = m.range(15, 22).map(|(f, l, v)| (f, l, *v)).collect();
        assert_eq!(r, vec![(15, 19, 1), (20, 22, 2)]);
        assert_eq!(m.get(9), None);
        assert_eq!(m.get(19), Some(&1));
        assert_eq!(m.get(30), None);
    }

    #[test]
    fn remove_below_splits_a_run() {
        let mut m = RunMap::new();
        m.insert(0, 9, 1u8);
        m.insert(10, 12, 2);
        let removed = m.remove_below(5);
        assert_eq!(removed, vec![(0, 4, 1)]);
        assert_eq!(runs(&m), vec![(5, 9, 1), (10, 12, 2)]);
    }

    #[test]
    fn many_alternating_updates_stay_canonical() {
        let mut m = RunMap::new();
        m.insert(0, 99, 0u8);
        for i in 0..100 {
            m.update(i, i, |_, _, _| (i % 3) as u8);
            assert!(m.is_canonical());
        }
        m.update(0, 99, |_, _, _| 7);
        assert_eq!(runs(&m), vec![(0, 99, 7)]);
    }
}
