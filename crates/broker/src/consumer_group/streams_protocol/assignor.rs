//! The target assignment of a streams group: every active task to one
//! member, balanced and sticky.
//!
//! - **Balanced**: with `n` tasks and `m` members each member gets `n / m`
//!   tasks, and `n % m` of them one more.
//! - **Sticky**: a member keeps the tasks it had in the previous target, up
//!   to its share; the rest go to the members with the fewest tasks, in
//!   member-id order, so the outcome depends on nothing but the inputs.
//!
//! Standby and warm-up tasks are not assigned (see the parent module).

use std::collections::{BTreeMap, BTreeSet};

use super::Tasks;

/// The new target of each member in `members`, given each subtopology's
/// task count and the previous target.
pub fn assign(
    members: &BTreeSet<String>,
    task_counts: &BTreeMap<String, i32>,
    previous: &BTreeMap<String, Tasks>,
) -> BTreeMap<String, Tasks> {
    let mut out: BTreeMap<String, Tasks> =
        members.iter().map(|m| (m.clone(), Tasks::new())).collect();
    if members.is_empty() {
        return out;
    }
    let all: Vec<(String, i32)> = task_counts
        .iter()
        .flat_map(|(s, n)| (0..*n).map(move |p| (s.clone(), p)))
        .collect();
    let base = all.len() / members.len();
    let mut extra = all.len() % members.len();
    let mut free: BTreeSet<(String, i32)> = all.iter().cloned().collect();
    let mut counts: BTreeMap<&String, usize> = members.iter().map(|m| (m, 0)).collect();

    // Previous owners keep up to `base`, then (while extra shares remain)
    // one more.
    for round in 0..2 {
        for m in members {
            let Some(prev) = previous.get(m) else {
                continue;
            };
            for (s, ps) in prev {
                for p in ps {
                    let c = counts[m];
                    let cap = if round == 0 { base } else { base + 1 };
                    if c >= cap || (round == 1 && (c < base || extra == 0)) {
                        break;
                    }
                    if free.remove(&(s.clone(), *p)) {
                        out.get_mut(m)
                            .expect("a member")
                            .entry(s.clone())
                            .or_default()
                            .insert(*p);
                        *counts.get_mut(m).expect("a member") += 1;
                        if round == 1 && counts[m] == base + 1 {
                            extra -= 1;
                        }
                    }
                }
            }
        }
    }
    // The rest to whoever has the fewest (first by member id).
    for (s, p) in free {
        let m = counts
            .iter()
            .filter(|(_, c)| **c < base || (**c == base && extra > 0))
            .min_by_key(|(id, c)| (**c, *id))
            .map(|(id, _)| (*id).clone())
            .expect("the shares add up to the task count");
        let c = counts.get_mut(&m).expect("a member");
        *c += 1;
        if *c == base + 1 {
            extra -= 1;
        }
        out.get_mut(&m)
            .expect("a member")
            .entry(s)
            .or_default()
            .insert(p);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members(ids: &[&str]) -> BTreeSet<String> {
        ids.iter().map(|s| s.to_string()).collect()
    }

    fn count(t: &Tasks) -> usize {
        t.values().map(BTreeSet::len).sum()
    }

    #[test]
    fn every_task_once_and_balanced() {
        let counts: BTreeMap<String, i32> = [("0".to_string(), 5), ("1".to_string(), 3)].into();
        for n in 1..=5 {
            let ids: Vec<String> = (0..n).map(|i| format!("m{i}")).collect();
            let ms: BTreeSet<String> = ids.iter().cloned().collect();
            let out = assign(&ms, &counts, &BTreeMap::new());
            let mut seen = BTreeSet::new();
            for t in out.values() {
                for (s, ps) in t {
                    for p in ps {
                        assert!(seen.insert((s.clone(), *p)), "task {s}_{p} twice");
                    }
                }
            }
            assert_eq!(seen.len(), 8);
            let sizes: Vec<usize> = out.values().map(count).collect();
            let (lo, hi) = (sizes.iter().min().unwrap(), sizes.iter().max().unwrap());
            assert!(hi - lo <= 1, "{n} members: {sizes:?}");
        }
    }

    #[test]
    fn a_new_member_takes_only_what_balance_needs() {
        let counts: BTreeMap<String, i32> = [("0".to_string(), 4)].into();
        let first = assign(&members(&["a"]), &counts, &BTreeMap::new());
        assert_eq!(count(&first["a"]), 4);
        let second = assign(&members(&["a", "b"]), &counts, &first);
        assert_eq!(count(&second["a"]), 2);
        assert_eq!(count(&second["b"]), 2);
        // a kept two of its own tasks; b got the other two.
        for (s, ps) in &second["a"] {
            assert!(ps.is_subset(&first["a"][s]));
        }
        // Nothing moves when nothing changes.
        assert_eq!(assign(&members(&["a", "b"]), &counts, &second), second);
    }

    #[test]
    fn no_members_no_assignment() {
        let counts: BTreeMap<String, i32> = [("0".to_string(), 2)].into();
        assert!(assign(&BTreeSet::new(), &counts, &BTreeMap::new()).is_empty());
    }
}
