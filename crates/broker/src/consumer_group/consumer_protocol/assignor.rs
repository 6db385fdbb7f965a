//! The server-side assignors of the consumer protocol (KIP-848):
//! `uniform` (Kafka's default) and `range`.
//!
//! Both take each member's subscribed topics (already resolved to topic
//! ids and partition counts) and return a target assignment per member.
//! Both are deterministic (members and partitions are visited in sorted
//! order), so a broker restart or a repeated computation gives the same
//! answer.
//!
//! - `uniform`: every subscribed partition goes to one subscriber, counts
//!   as even as the subscriptions allow, and sticky: a partition stays
//!   with the member that had it in the previous target while that member
//!   is still subscribed and not above its share.
//! - `range`: per topic, its subscribers in member-id order get contiguous
//!   ranges of partitions, the first `partitions % subscribers` one more.

use std::collections::{BTreeMap, BTreeSet};

use uuid::Uuid;

/// Partitions per topic id.
pub type Assignment = BTreeMap<Uuid, BTreeSet<i32>>;

/// Kafka's name of the default assignor.
pub const UNIFORM: &str = "uniform";
/// Kafka's name of the range assignor.
pub const RANGE: &str = "range";
/// The assignors this broker runs, the default first.
pub const ASSIGNORS: &[&str] = &[UNIFORM, RANGE];

/// What an assignor sees: each member's subscribed topics as (topic id,
/// partition count), and the previous target.
pub struct AssignorInput<'a> {
    /// member id -> subscribed topics.
    pub subscriptions: &'a BTreeMap<String, BTreeMap<Uuid, i32>>,
    /// member id -> previous target assignment.
    pub previous: &'a BTreeMap<String, Assignment>,
}

/// Runs the named assignor (`uniform` for an unknown name, which the
/// coordinator has refused before).
pub fn assign(name: &str, input: &AssignorInput<'_>) -> BTreeMap<String, Assignment> {
    match name {
        RANGE => range(input),
        _ => uniform(input),
    }
}

fn range(input: &AssignorInput<'_>) -> BTreeMap<String, Assignment> {
    let mut out: BTreeMap<String, Assignment> = input
        .subscriptions
        .keys()
        .map(|m| (m.clone(), Assignment::new()))
        .collect();
    // topic -> (partitions, subscribers in member-id order)
    let mut topics: BTreeMap<Uuid, (i32, Vec<&String>)> = BTreeMap::new();
    for (member, subs) in input.subscriptions {
        for (&topic, &partitions) in subs {
            topics
                .entry(topic)
                .or_insert((partitions, Vec::new()))
                .1
                .push(member);
        }
    }
    for (topic, (partitions, members)) in topics {
        let n = members.len() as i32;
        let (per, extra) = (partitions / n, partitions % n);
        let mut next = 0;
        for (i, m) in members.into_iter().enumerate() {
            let count = per + i32::from((i as i32) < extra);
            if count > 0 {
                out.get_mut(m)
                    .expect("every member has an entry")
                    .insert(topic, (next..next + count).collect());
            }
            next += count;
        }
    }
    out
}

fn uniform(input: &AssignorInput<'_>) -> BTreeMap<String, Assignment> {
    let members: Vec<&String> = input.subscriptions.keys().collect();
    let mut out: BTreeMap<String, Assignment> = members
        .iter()
        .map(|m| ((*m).clone(), Assignment::new()))
        .collect();
    if members.is_empty() {
        return out;
    }
    let eligible = |m: &str, t: &Uuid, p: i32| -> bool {
        input.subscriptions[m].get(t).is_some_and(|&n| p < n)
    };
    let all: BTreeSet<(Uuid, i32)> = input
        .subscriptions
        .values()
        .flat_map(|s| s.iter().flat_map(|(t, n)| (0..*n).map(move |p| (*t, p))))
        .collect();
    let ceiling = all.len().div_ceil(members.len());
    let mut count: BTreeMap<&str, usize> = members.iter().map(|m| (m.as_str(), 0)).collect();
    let mut taken: BTreeSet<(Uuid, i32)> = BTreeSet::new();
    // Stickiness: keep what the previous target gave, up to the ceiling.
    for m in &members {
        let Some(prev) = input.previous.get(*m) else {
            continue;
        };
        for (t, ps) in prev {
            for &p in ps {
                let c = count[m.as_str()];
                if c < ceiling && eligible(m, t, p) && taken.insert((*t, p)) {
                    out.get_mut(*m).unwrap().entry(*t).or_default().insert(p);
                    *count.get_mut(m.as_str()).unwrap() += 1;
                }
            }
        }
    }
    // The rest to the least loaded subscriber (ties: member id order).
    for (t, p) in all {
        if taken.contains(&(t, p)) {
            continue;
        }
        let best = members
            .iter()
            .filter(|m| eligible(m, &t, p))
            .min_by_key(|m| (count[m.as_str()], m.as_str()));
        if let Some(m) = best {
            out.get_mut(*m).unwrap().entry(t).or_default().insert(p);
            *count.get_mut(m.as_str()).unwrap() += 1;
        }
    }
    // Even out heterogeneous subscriptions: move a partition from a member
    // with two or more above another eligible one.
    loop {
        let mut moved = false;
        for from in &members {
            for to in &members {
                if count[from.as_str()] < count[to.as_str()] + 2 {
                    continue;
                }
                let candidate = out[*from]
                    .iter()
                    .flat_map(|(t, ps)| ps.iter().map(move |p| (*t, *p)))
                    .find(|(t, p)| eligible(to, t, *p));
                if let Some((t, p)) = candidate {
                    let src = out.get_mut(*from).unwrap();
                    src.get_mut(&t).unwrap().remove(&p);
                    if src[&t].is_empty() {
                        src.remove(&t);
                    }
                    out.get_mut(*to).unwrap().entry(t).or_default().insert(p);
                    *count.get_mut(from.as_str()).unwrap() -= 1;
                    *count.get_mut(to.as_str()).unwrap() += 1;
                    moved = true;
                }
            }
        }
        if !moved {
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: Uuid = Uuid::from_u128(1);
    const B: Uuid = Uuid::from_u128(2);

    fn subs(v: &[(&str, &[(Uuid, i32)])]) -> BTreeMap<String, BTreeMap<Uuid, i32>> {
        v.iter()
            .map(|(m, ts)| (m.to_string(), ts.iter().copied().collect()))
            .collect()
    }

    fn parts(a: &Assignment) -> Vec<(Uuid, i32)> {
        a.iter()
            .flat_map(|(t, ps)| ps.iter().map(move |p| (*t, *p)))
            .collect()
    }

    #[test]
    fn range_gives_contiguous_ranges_per_topic() {
        let s = subs(&[("m1", &[(A, 5), (B, 2)]), ("m2", &[(A, 5)])]);
        let out = range(&AssignorInput {
            subscriptions: &s,
            previous: &BTreeMap::new(),
        });
        assert_eq!(
            parts(&out["m1"]),
            vec![(A, 0), (A, 1), (A, 2), (B, 0), (B, 1)]
        );
        assert_eq!(parts(&out["m2"]), vec![(A, 3), (A, 4)]);
    }

    #[test]
    fn uniform_is_balanced_complete_and_sticky() {
        let s = subs(&[("m1", &[(A, 6)]), ("m2", &[(A, 6)])]);
        let first = uniform(&AssignorInput {
            subscriptions: &s,
            previous: &BTreeMap::new(),
        });
        assert_eq!(parts(&first["m1"]).len(), 3);
        assert_eq!(parts(&first["m2"]).len(), 3);
        // A third member: each old member keeps 2 of its 3.
        let s3 = subs(&[("m1", &[(A, 6)]), ("m2", &[(A, 6)]), ("m3", &[(A, 6)])]);
        let second = uniform(&AssignorInput {
            subscriptions: &s3,
            previous: &first,
        });
        for m in ["m1", "m2", "m3"] {
            assert_eq!(parts(&second[m]).len(), 2, "{m}");
        }
        for m in ["m1", "m2"] {
            let kept = parts(&second[m])
                .iter()
                .filter(|p| parts(&first[m]).contains(p))
                .count();
            assert_eq!(kept, 2, "{m} keeps what it had");
        }
        let mut all: Vec<_> = second.values().flat_map(parts).collect();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), 6, "every partition once");
    }

    #[test]
    fn uniform_with_heterogeneous_subscriptions() {
        // m1 alone reads B; A is shared.
        let s = subs(&[("m1", &[(A, 4), (B, 4)]), ("m2", &[(A, 4)])]);
        let out = uniform(&AssignorInput {
            subscriptions: &s,
            previous: &BTreeMap::new(),
        });
        let m2 = parts(&out["m2"]);
        assert!(m2.iter().all(|(t, _)| *t == A));
        assert_eq!(m2.len(), 4, "m2 takes A so that m1 can take B");
        assert_eq!(parts(&out["m1"]).len(), 4);
    }
}
