//! Where a record goes when its partition is not given.
//!
//! - **Keyed** records: `toPositive(murmur2(key)) % numPartitions`, the same
//!   placement as Java's default partitioner, so a Rust and a Java producer
//!   put a key in the same partition. [`murmur2`] is Kafka's variant of
//!   MurmurHash2 (seed `0x9747b28c`, little-endian 4-byte blocks) and
//!   [`to_positive`] masks the sign bit (not `abs`).
//! - **Unkeyed** records: *sticky*, like Java's built-in uniform sticky
//!   partitioner: all records go to one partition until about `batch.size`
//!   bytes were placed there, then another partition with a leader is chosen
//!   at random (a different one when there is more than one). Batches fill up
//!   instead of many small batches being spread across every partition.
//!
//! [`StickyPartitioner`] is a plain struct: the random choice comes from a
//! caller-supplied number, so tests are deterministic.

use std::collections::HashMap;

/// Kafka's murmur2 hash of `data` (Java `Utils.murmur2`).
pub fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let len = data.len();
    let mut h: u32 = SEED ^ (len as u32);
    let mut blocks = data.chunks_exact(4);
    for b in &mut blocks {
        let mut k = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let tail = blocks.remainder();
    if tail.len() >= 3 {
        h ^= u32::from(tail[2]) << 16;
    }
    if tail.len() >= 2 {
        h ^= u32::from(tail[1]) << 8;
    }
    if !tail.is_empty() {
        h ^= u32::from(tail[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// Java's `Utils.toPositive`: clears the sign bit.
pub fn to_positive(n: i32) -> i32 {
    n & 0x7fff_ffff
}

/// The partition of a keyed record among `num_partitions`.
pub fn partition_for_key(key: &[u8], num_partitions: i32) -> i32 {
    debug_assert!(num_partitions > 0);
    to_positive(murmur2(key)) % num_partitions
}

/// Sticky placement of unkeyed records, per topic.
#[derive(Debug, Default)]
pub struct StickyPartitioner {
    current: HashMap<String, (i32, usize)>,
}

impl StickyPartitioner {
    /// A partitioner with no partition chosen yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The partition for an unkeyed record of `size` bytes. `available` are
    /// the partitions with a leader (all `0..num_partitions` when empty);
    /// `random` picks among them when a new partition is chosen. After
    /// `batch_size` bytes the partition changes.
    pub fn partition(
        &mut self,
        topic: &str,
        num_partitions: i32,
        available: &[i32],
        size: usize,
        batch_size: usize,
        random: u32,
    ) -> i32 {
        self.partition_with(topic, num_partitions, size, batch_size, || {
            (available.to_vec(), random)
        })
    }

    /// [`Self::partition`], with the partitions that have a leader and the
    /// random number asked for only when a new partition is chosen, that
    /// is once per `batch_size` bytes. Called for every unkeyed record, it
    /// allocates nothing while the partition sticks.
    pub fn partition_with(
        &mut self,
        topic: &str,
        num_partitions: i32,
        size: usize,
        batch_size: usize,
        choice: impl FnOnce() -> (Vec<i32>, u32),
    ) -> i32 {
        let prev = match self.current.get_mut(topic) {
            Some((p, bytes)) if *p < num_partitions && *bytes < batch_size.max(1) => {
                *bytes += size;
                return *p;
            }
            Some((p, _)) => Some(*p),
            None => None,
        };
        let (available, random) = choice();
        let p = choose(num_partitions, &available, prev, random);
        match self.current.get_mut(topic) {
            Some(e) => *e = (p, size),
            None => {
                self.current.insert(topic.to_string(), (p, size));
            }
        }
        p
    }
}

/// A new partition for a topic: the candidates are `available`, or all
/// `0..num_partitions` when it is empty; among those other than `prev`
/// (all of them if none differs), the one `random` picks.
fn choose(num_partitions: i32, available: &[i32], prev: Option<i32>, random: u32) -> i32 {
    let n = if available.is_empty() {
        usize::try_from(num_partitions).unwrap_or(0)
    } else {
        available.len()
    };
    let at = |i: usize| {
        if available.is_empty() {
            i as i32
        } else {
            available[i]
        }
    };
    let others = n - (0..n).filter(|&i| Some(at(i)) == prev).count();
    if others == 0 {
        return at(random as usize % n);
    }
    (0..n)
        .map(at)
        .filter(|&c| Some(c) != prev)
        .nth(random as usize % others)
        .expect("fewer candidates than counted")
}

#[cfg(test)]
mod tests {
    use super::*;

    // Expected values derived from the algorithm with a small independent
    // reimplementation in Python (32-bit wrapping arithmetic):
    //   h = (0x9747b28c ^ len) & M32; per 4-byte LE block k: k*=m; k^=k>>24;
    //   k*=m; h*=m; h^=k; tail: h ^= b2<<16, b1<<8, b0; h*=m;
    //   h^=h>>13; h*=m; h^=h>>15; result as signed i32.
    #[test]
    fn murmur2_matches_java_vectors() {
        let cases: &[(&[u8], i32)] = &[
            (b"21", -973932308),
            (b"foobar", -790332482),
            (b"a-little-bit-long-string", -985981536),
            (b"a-little-bit-longer-string", -1486304829),
            (
                b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
                -58897971,
            ),
            (b"abc", 479470107),
            (b"", 275646681),
        ];
        for (data, want) in cases {
            assert_eq!(murmur2(data), *want, "{:?}", String::from_utf8_lossy(data));
        }
    }

    #[test]
    fn keyed_placement_masks_the_sign_bit() {
        assert_eq!(partition_for_key(b"foobar", 12), 6);
        assert_eq!(partition_for_key(b"a-little-bit-longer-string", 12), 11);
        assert_eq!(partition_for_key(b"abc", 12), 3);
        assert_eq!(partition_for_key(b"key-1", 3), 0);
        assert_eq!(to_positive(i32::MIN), 0);
        assert_eq!(to_positive(-1), i32::MAX);
    }

    /// The choice as it was first written, with the candidate lists built.
    fn choose_by_lists(
        num_partitions: i32,
        available: &[i32],
        prev: Option<i32>,
        random: u32,
    ) -> i32 {
        let choices: Vec<i32> = if available.is_empty() {
            (0..num_partitions).collect()
        } else {
            available.to_vec()
        };
        let others: Vec<i32> = choices
            .iter()
            .copied()
            .filter(|&c| Some(c) != prev)
            .collect();
        let pool = if others.is_empty() { &choices } else { &others };
        pool[(random as usize) % pool.len()]
    }

    #[test]
    fn the_choice_without_lists_is_the_choice_with_them() {
        let availables: &[&[i32]] = &[&[], &[0], &[2], &[1, 2], &[0, 3, 1], &[3, 2, 1, 0]];
        for n in 1..=5 {
            for available in availables {
                if available.iter().any(|&a| a >= n) {
                    continue;
                }
                for prev in std::iter::once(None).chain((0..6).map(Some)) {
                    for random in 0..24 {
                        assert_eq!(
                            choose(n, available, prev, random),
                            choose_by_lists(n, available, prev, random),
                            "n {n}, available {available:?}, prev {prev:?}, random {random}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn unkeyed_records_stick_until_batch_size_then_move() {
        let mut p = StickyPartitioner::new();
        let first = p.partition("t", 4, &[], 100, 250, 7);
        assert_eq!(first, 3);
        assert_eq!(p.partition("t", 4, &[], 100, 250, 0), first);
        assert_eq!(p.partition("t", 4, &[], 100, 250, 0), first);
        // 300 bytes >= 250: a different partition now.
        let next = p.partition("t", 4, &[], 100, 250, 0);
        assert_ne!(next, first);
        // Only partitions with a leader are chosen.
        let mut p = StickyPartitioner::new();
        for r in 0..20 {
            let got = p.partition("u", 4, &[1, 2], 1000, 10, r);
            assert!(got == 1 || got == 2);
        }
    }
}
