//! The `simple` share group assignor.
//!
//! A share group assigns partitions to members, but a partition is not
//! owned: several members may fetch from one share partition, and records
//! are handed out one acquisition at a time. So the assignor has two jobs
//! that a consumer-group assignor does not have:
//!
//! - every partition of a subscribed topic is served while at least one
//!   subscribed member exists;
//! - with more members than partitions, members *share* partitions, and
//!   every member still gets work.
//!
//! The rules, per topic `T` with `n` partitions and `m` subscribed members
//! (members in member-id order, topics in name order):
//!
//! - `m <= n`: each partition goes to exactly one member; each member gets
//!   `n / m` or `n / m + 1` partitions of `T`. The `n % m` extra partitions
//!   go to the members with the fewest partitions so far over all topics, so
//!   with identical subscriptions the totals of any two members differ by at
//!   most one.
//! - `m > n`: each member gets exactly one partition of `T`; each partition
//!   has `m / n` or `m / n + 1` members.
//!
//! Within those quotas the previous assignment is kept where it can be
//! (a partition stays with the member that had it), so a membership change
//! moves as little as possible. The result is a pure function of the
//! previous assignment, the members' subscriptions and the topics, so every
//! run on the same input gives the same answer.

use std::collections::{BTreeMap, BTreeSet};

use uuid::Uuid;

/// Partitions assigned to one member: topic id to sorted partition indexes.
pub type Assignment = BTreeMap<Uuid, BTreeSet<i32>>;

/// Kafka's name for this assignor, reported by ShareGroupDescribe.
pub const SIMPLE_ASSIGNOR_NAME: &str = "simple";

/// A subscribed topic as the assignor sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AssignorTopic {
    /// Topic id.
    pub id: Uuid,
    /// Partition count.
    pub partitions: i32,
}

/// Computes the target assignment of a group.
///
/// - `subscriptions`: member id to subscribed topic names;
/// - `topics`: the subscribed topics that exist, by name;
/// - `previous`: the previous target assignment (for stickiness).
///
/// Every member of `subscriptions` appears in the result, possibly with an
/// empty assignment.
pub fn assign(
    subscriptions: &BTreeMap<String, BTreeSet<String>>,
    topics: &BTreeMap<String, AssignorTopic>,
    previous: &BTreeMap<String, Assignment>,
) -> BTreeMap<String, Assignment> {
    let mut result: BTreeMap<String, Assignment> = subscriptions
        .keys()
        .map(|m| (m.clone(), Assignment::new()))
        .collect();
    let mut load: BTreeMap<&str, usize> = subscriptions.keys().map(|m| (m.as_str(), 0)).collect();

    for (name, topic) in topics {
        if topic.partitions <= 0 {
            continue;
        }
        let members: Vec<&str> = subscriptions
            .iter()
            .filter(|(_, subs)| subs.contains(name))
            .map(|(m, _)| m.as_str())
            .collect();
        if members.is_empty() {
            continue;
        }
        let n = topic.partitions as usize;
        let prev_of = |member: &str| -> Vec<i32> {
            previous
                .get(member)
                .and_then(|a| a.get(&topic.id))
                .map(|ps| {
                    ps.iter()
                        .copied()
                        .filter(|p| (*p as usize) < n && *p >= 0)
                        .collect()
                })
                .unwrap_or_default()
        };
        let per_topic: BTreeMap<&str, Vec<i32>> = if members.len() <= n {
            exclusive(&members, n, &load, &prev_of)
        } else {
            shared(&members, n, &prev_of)
        };
        for (member, parts) in per_topic {
            if parts.is_empty() {
                continue;
            }
            *load.get_mut(member).expect("member known") += parts.len();
            result
                .get_mut(member)
                .expect("member known")
                .entry(topic.id)
                .or_default()
                .extend(parts);
        }
    }
    result
}

/// `m <= n`: every partition to exactly one member.
fn exclusive<'a>(
    members: &[&'a str],
    n: usize,
    load: &BTreeMap<&str, usize>,
    prev_of: &dyn Fn(&str) -> Vec<i32>,
) -> BTreeMap<&'a str, Vec<i32>> {
    let m = members.len();
    let base = n / m;
    let extras = n % m;
    let prev: BTreeMap<&str, Vec<i32>> = members.iter().map(|mm| (*mm, prev_of(mm))).collect();

    // Extras go to the least loaded members; among equals, to those that
    // held more of this topic before (fewer moves), then by member id.
    let mut order: Vec<&str> = members.to_vec();
    order.sort_by(|a, b| {
        load[a]
            .cmp(&load[b])
            .then(prev[b].len().cmp(&prev[a].len()))
            .then(a.cmp(b))
    });
    let mut quota: BTreeMap<&str, usize> = members.iter().map(|mm| (*mm, base)).collect();
    for mm in order.iter().take(extras) {
        *quota.get_mut(mm).expect("member") += 1;
    }

    let mut owner: Vec<Option<&str>> = vec![None; n];
    let mut out: BTreeMap<&str, Vec<i32>> = members.iter().map(|mm| (*mm, Vec::new())).collect();
    // Keep previous owners within quota.
    for mm in members {
        for &p in &prev[mm] {
            let slot = &mut owner[p as usize];
            if slot.is_none() && out[mm].len() < quota[mm] {
                *slot = Some(mm);
                out.get_mut(mm).expect("member").push(p);
            }
        }
    }
    // Hand out the rest in partition order to members with room, in
    // member-id order.
    let mut cursor = 0;
    for (p, slot) in owner.iter_mut().enumerate() {
        if slot.is_some() {
            continue;
        }
        while out[members[cursor]].len() >= quota[members[cursor]] {
            cursor += 1;
        }
        let mm = members[cursor];
        *slot = Some(mm);
        out.get_mut(mm).expect("member").push(p as i32);
    }
    out
}

/// `m > n`: every member gets exactly one partition; partitions are shared.
fn shared<'a>(
    members: &[&'a str],
    n: usize,
    prev_of: &dyn Fn(&str) -> Vec<i32>,
) -> BTreeMap<&'a str, Vec<i32>> {
    let floor = members.len() / n;
    let mut count = vec![0usize; n];
    let mut out: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    let mut rest = Vec::new();
    // Keep a previous partition while it has fewer than `floor` members.
    for mm in members {
        match prev_of(mm).into_iter().find(|p| count[*p as usize] < floor) {
            Some(p) => {
                count[p as usize] += 1;
                out.insert(mm, vec![p]);
            }
            None => rest.push(*mm),
        }
    }
    // The others go to the partition with the fewest members (lowest index
    // among equals), preferring one they held before when it is among the
    // least shared.
    for mm in rest {
        let min = *count.iter().min().expect("n > 0");
        let p = prev_of(mm)
            .into_iter()
            .find(|p| count[*p as usize] == min)
            .unwrap_or_else(|| count.iter().position(|c| *c == min).expect("min exists") as i32);
        count[p as usize] += 1;
        out.insert(mm, vec![p]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn topic(i: u8, partitions: i32) -> (String, AssignorTopic) {
        (
            format!("t{i}"),
            AssignorTopic {
                id: Uuid::from_bytes([i + 1; 16]),
                partitions,
            },
        )
    }

    fn subs_all(
        members: usize,
        topics: &BTreeMap<String, AssignorTopic>,
    ) -> BTreeMap<String, BTreeSet<String>> {
        (0..members)
            .map(|i| (format!("m{i:02}"), topics.keys().cloned().collect()))
            .collect()
    }

    fn total(a: &Assignment) -> usize {
        a.values().map(BTreeSet::len).sum()
    }

    #[test]
    fn one_member_gets_every_partition() {
        let topics: BTreeMap<_, _> = [topic(0, 3), topic(1, 2)].into();
        let out = assign(&subs_all(1, &topics), &topics, &BTreeMap::new());
        assert_eq!(total(&out["m00"]), 5);
    }

    #[test]
    fn more_members_than_partitions_share_the_partition() {
        let topics: BTreeMap<_, _> = [topic(0, 1)].into();
        let out = assign(&subs_all(3, &topics), &topics, &BTreeMap::new());
        for a in out.values() {
            assert_eq!(a[&topics["t0"].id], BTreeSet::from([0]));
        }
    }

    #[test]
    fn five_members_on_two_partitions_split_three_and_two() {
        let topics: BTreeMap<_, _> = [topic(0, 2)].into();
        let out = assign(&subs_all(5, &topics), &topics, &BTreeMap::new());
        let mut per_partition = [0; 2];
        for a in out.values() {
            assert_eq!(total(a), 1);
            for p in &a[&topics["t0"].id] {
                per_partition[*p as usize] += 1;
            }
        }
        per_partition.sort();
        assert_eq!(per_partition, [2, 3]);
    }

    #[test]
    fn members_only_get_topics_they_subscribe_to() {
        let topics: BTreeMap<_, _> = [topic(0, 2), topic(1, 2)].into();
        let subs = BTreeMap::from([
            ("a".to_string(), BTreeSet::from(["t0".to_string()])),
            ("b".to_string(), BTreeSet::from(["t1".to_string()])),
        ]);
        let out = assign(&subs, &topics, &BTreeMap::new());
        assert_eq!(out["a"].keys().collect::<Vec<_>>(), vec![&topics["t0"].id]);
        assert_eq!(out["b"].keys().collect::<Vec<_>>(), vec![&topics["t1"].id]);
        assert_eq!(total(&out["a"]), 2);
    }

    #[test]
    fn a_joining_member_takes_partitions_without_reshuffling_the_rest() {
        let topics: BTreeMap<_, _> = [topic(0, 6)].into();
        let before = assign(&subs_all(2, &topics), &topics, &BTreeMap::new());
        let after = assign(&subs_all(3, &topics), &topics, &before);
        let id = topics["t0"].id;
        for m in ["m00", "m01"] {
            assert!(
                after[m][&id].is_subset(&before[m][&id]),
                "{m} kept a subset"
            );
            assert_eq!(after[m][&id].len(), 2);
        }
        assert_eq!(after["m02"][&id].len(), 2);
    }

    fn arb_input() -> impl Strategy<
        Value = (
            BTreeMap<String, BTreeSet<String>>,
            BTreeMap<String, AssignorTopic>,
        ),
    > {
        (
            proptest::collection::vec(0i32..8, 0..4),
            1usize..10,
            proptest::collection::vec(proptest::collection::btree_set(0u8..4, 0..4), 10),
        )
            .prop_map(|(parts, members, subs)| {
                let topics: BTreeMap<_, _> = parts
                    .iter()
                    .enumerate()
                    .map(|(i, p)| topic(i as u8, *p))
                    .collect();
                let subs = (0..members)
                    .map(|i| {
                        (
                            format!("m{i:02}"),
                            subs[i].iter().map(|t| format!("t{t}")).collect(),
                        )
                    })
                    .collect();
                (subs, topics)
            })
    }

    proptest! {
        #[test]
        fn every_subscribed_partition_is_served_and_only_by_subscribers((subs, topics) in arb_input()) {
            let out = assign(&subs, &topics, &BTreeMap::new());
            prop_assert_eq!(out.len(), subs.len());
            for (name, t) in &topics {
                let subscribers: Vec<_> = subs.iter().filter(|(_, s)| s.contains(name)).map(|(m, _)| m).collect();
                let mut served = vec![0usize; t.partitions.max(0) as usize];
                for (m, a) in &out {
                    if let Some(ps) = a.get(&t.id) {
                        prop_assert!(subs[m].contains(name), "{} got unsubscribed {}", m, name);
                        for p in ps {
                            prop_assert!(*p >= 0 && *p < t.partitions);
                            served[*p as usize] += 1;
                        }
                    }
                }
                if !subscribers.is_empty() {
                    prop_assert!(served.iter().all(|c| *c >= 1), "unserved partition of {}", name);
                    let n = served.len();
                    let m = subscribers.len();
                    if m <= n {
                        prop_assert!(served.iter().all(|c| *c == 1), "exclusive when m <= n");
                        let counts: Vec<usize> = subscribers.iter().map(|s| out[*s].get(&t.id).map_or(0, BTreeSet::len)).collect();
                        prop_assert!(counts.iter().max().unwrap() - counts.iter().min().unwrap() <= 1);
                    } else if n > 0 {
                        for s in &subscribers {
                            prop_assert_eq!(out[*s].get(&t.id).map_or(0, BTreeSet::len), 1);
                        }
                        prop_assert!(served.iter().max().unwrap() - served.iter().min().unwrap() <= 1);
                    }
                } else {
                    prop_assert!(served.iter().all(|c| *c == 0));
                }
            }
        }

        #[test]
        fn identical_subscriptions_balance_totals_within_one(parts in proptest::collection::vec(1i32..8, 1..4), members in 1usize..10) {
            let topics: BTreeMap<_, _> = parts.iter().enumerate().map(|(i, p)| topic(i as u8, *p)).collect();
            let out = assign(&subs_all(members, &topics), &topics, &BTreeMap::new());
            let totals: Vec<usize> = out.values().map(total).collect();
            prop_assert!(totals.iter().max().unwrap() - totals.iter().min().unwrap() <= 1, "{:?}", totals);
        }

        #[test]
        fn assignment_is_deterministic_and_stable_when_nothing_changes((subs, topics) in arb_input()) {
            let first = assign(&subs, &topics, &BTreeMap::new());
            prop_assert_eq!(&first, &assign(&subs, &topics, &BTreeMap::new()));
            prop_assert_eq!(&first, &assign(&subs, &topics, &first));
        }

        #[test]
        fn reassignment_after_membership_change_keeps_coverage((subs, topics) in arb_input(), drop in 0usize..10) {
            let first = assign(&subs, &topics, &BTreeMap::new());
            let mut fewer = subs.clone();
            if let Some(k) = fewer.keys().nth(drop % fewer.len().max(1)).cloned() { fewer.remove(&k); }
            let second = assign(&fewer, &topics, &first);
            for (name, t) in &topics {
                if fewer.values().any(|s| s.contains(name)) {
                    for p in 0..t.partitions {
                        prop_assert!(second.values().any(|a| a.get(&t.id).is_some_and(|ps| ps.contains(&p))));
                    }
                }
            }
        }
    }
}
