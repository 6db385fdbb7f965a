//! The target assignment of a streams group: every active task to one
//! member, balanced and sticky.
//!
//! - **Balanced**: each subtopology's `n` tasks are spread over the `m`
//!   members, `n / m` each and one more for the `n % m` least loaded so
//!   far; the totals stay within one of each other.
//! - **Sticky**: a member keeps the tasks it had in the previous target, up
//!   to its share; the rest go to the members with the fewest tasks, in
//!   member-id order, so the outcome depends on nothing but the inputs.
//!
//! [`assign_standby`] then gives each active task of a stateful
//! subtopology (one with a changelog) up to
//! `streams.num.standby.replicas` standby copies, each on a member of
//! another process than the active copy's and than the other standbys',
//! to the members with the fewest standbys first (a previous holder of
//! that standby first). A standby that no process can take is left out,
//! as Kafka's assignors do. Warm-up tasks are not assigned.

use std::collections::{BTreeMap, BTreeSet};

use super::Tasks;

/// The new target of each member in `members`, given each subtopology's
/// task count and the previous target.
///
/// Each subtopology is spread on its own, so that every member gets its
/// share of each (the tasks of a stateful subtopology do not all land on
/// one member): `n / m` tasks each, and the `n % m` remaining ones to the
/// members with the fewest tasks so far (then by id), which keeps the
/// totals within one of each other. A member keeps the tasks it had, up
/// to its share.
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
    let mut load: BTreeMap<&String, usize> = members.iter().map(|m| (m, 0)).collect();
    for (s, n) in task_counts {
        let n = usize::try_from(*n).unwrap_or(0);
        let base = n / members.len();
        let mut by_load: Vec<&String> = members.iter().collect();
        by_load.sort_by_key(|m| (load[m], *m));
        let one_more: BTreeSet<&String> = by_load.into_iter().take(n % members.len()).collect();
        let share = |m: &String| base + usize::from(one_more.contains(m));
        let mut free: BTreeSet<i32> = (0..i32::try_from(n).unwrap_or(0)).collect();
        let mut taken: BTreeMap<&String, BTreeSet<i32>> =
            members.iter().map(|m| (m, BTreeSet::new())).collect();
        // Previous owners keep theirs, up to their share.
        for m in members {
            let Some(ps) = previous.get(m).and_then(|t| t.get(s)) else {
                continue;
            };
            for p in ps {
                if taken[m].len() >= share(m) {
                    break;
                }
                if free.remove(p) {
                    taken.get_mut(m).expect("a member").insert(*p);
                }
            }
        }
        // The rest to members below their share, the fewest first.
        for p in free {
            let m = members
                .iter()
                .filter(|m| taken[m].len() < share(m))
                .min_by_key(|m| (taken[*m].len(), load[*m], *m))
                .expect("the shares add up to the task count");
            taken.get_mut(m).expect("a member").insert(p);
        }
        for (m, ps) in taken {
            *load.get_mut(m).expect("a member") += ps.len();
            if !ps.is_empty() {
                out.get_mut(m).expect("a member").insert(s.clone(), ps);
            }
        }
    }
    out
}

/// The standby tasks of each member: `replicas` per active task of a
/// `stateful` subtopology in `active`, on members of processes
/// (`processes`: member -> process id) other than the active owner's. A
/// stateless task has nothing to keep warm, so it gets no standby.
pub fn assign_standby(
    processes: &BTreeMap<String, String>,
    active: &BTreeMap<String, Tasks>,
    stateful: &BTreeSet<String>,
    replicas: i32,
    previous: &BTreeMap<String, Tasks>,
) -> BTreeMap<String, Tasks> {
    let mut out: BTreeMap<String, Tasks> = processes
        .keys()
        .map(|m| (m.clone(), Tasks::new()))
        .collect();
    if replicas <= 0 {
        return out;
    }
    let mut load: BTreeMap<&String, usize> = processes.keys().map(|m| (m, 0)).collect();
    for (owner, tasks) in active {
        let Some(owner_process) = processes.get(owner) else {
            continue;
        };
        for (s, ps) in tasks.iter().filter(|(s, _)| stateful.contains(*s)) {
            for p in ps {
                let mut used = vec![owner_process.clone()];
                for _ in 0..replicas {
                    let had = |m: &String| {
                        previous
                            .get(m)
                            .is_some_and(|t| t.get(s).is_some_and(|q| q.contains(p)))
                    };
                    let pick = processes
                        .iter()
                        .filter(|(_, proc)| !used.contains(proc))
                        .min_by_key(|(m, _)| (!had(m), load[m], (*m).clone()))
                        .map(|(m, proc)| (m.clone(), proc.clone()));
                    let Some((m, proc)) = pick else {
                        break;
                    };
                    used.push(proc);
                    *load.get_mut(&m).expect("a member") += 1;
                    out.get_mut(&m)
                        .expect("a member")
                        .entry(s.clone())
                        .or_default()
                        .insert(*p);
                }
            }
        }
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
    fn standbys_go_to_other_processes_and_are_balanced() {
        let counts: BTreeMap<String, i32> = [("0".to_string(), 4)].into();
        let ids = members(&["a", "b", "c"]);
        let active = assign(&ids, &counts, &BTreeMap::new());
        // a and b are threads of one process; c is another.
        let processes: BTreeMap<String, String> = [
            ("a".to_string(), "p1".to_string()),
            ("b".to_string(), "p1".to_string()),
            ("c".to_string(), "p2".to_string()),
        ]
        .into();
        let stateful: BTreeSet<String> = ["0".to_string()].into();
        let standby = assign_standby(&processes, &active, &stateful, 1, &BTreeMap::new());
        for (m, tasks) in &standby {
            for (s, ps) in tasks {
                for p in ps {
                    let owner = active
                        .iter()
                        .find(|(_, t)| t.get(s).is_some_and(|q| q.contains(p)))
                        .map(|(o, _)| o)
                        .unwrap();
                    assert_ne!(processes[m], processes[owner], "task {s}_{p}");
                }
            }
        }
        assert_eq!(
            standby.values().map(count).sum::<usize>(),
            4,
            "one standby each"
        );
        // Two replicas need three processes: only one fits.
        let two = assign_standby(&processes, &active, &stateful, 2, &BTreeMap::new());
        assert_eq!(two.values().map(count).sum::<usize>(), 4);
        assert!(
            assign_standby(&processes, &active, &stateful, 0, &BTreeMap::new())
                .values()
                .all(|t| t.is_empty())
        );
        assert!(
            assign_standby(&processes, &active, &BTreeSet::new(), 1, &BTreeMap::new())
                .values()
                .all(|t| t.is_empty()),
            "a stateless task gets no standby"
        );
    }

    #[test]
    fn no_members_no_assignment() {
        let counts: BTreeMap<String, i32> = [("0".to_string(), 2)].into();
        assert!(assign(&BTreeSet::new(), &counts, &BTreeMap::new()).is_empty());
    }
}
