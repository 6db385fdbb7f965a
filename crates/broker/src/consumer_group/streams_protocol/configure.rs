//! A streams group's topology against the cluster's topics: how many tasks
//! each subtopology has, which internal topics must exist and with how many
//! partitions, and what keeps the group from being assigned tasks (the
//! heartbeat's status codes). Pure: the topics are an input.
//!
//! The rules are KIP-1071's, as Kafka's coordinator applies them:
//! - a subtopology has as many tasks as the largest partition count among
//!   its source topics (named or matched by a regular expression) and its
//!   repartition source topics;
//! - a repartition topic without a fixed partition count gets the largest
//!   task count of the subtopologies that write to it (computed until
//!   nothing changes, since one repartition topic may feed another);
//! - the topics of a copartition group must have one partition count: a
//!   repartition topic in it takes the count of the group's other source
//!   topics, and two source topics that disagree are INCORRECTLY_PARTITIONED;
//! - a changelog topic has as many partitions as its subtopology has tasks;
//! - an internal topic that exists with another partition count is
//!   INCORRECTLY_PARTITIONED (it is never re-created).
//!
//! Tasks are assigned only when no source topic is missing, every internal
//! topic exists and every partition count agrees.

use std::collections::{BTreeMap, BTreeSet};

use super::{StreamsStatus, Subtopology, TopicSpec, Topology};
use crate::consumer_group::consumer_protocol::Topics;

/// The outcome of [`configure`].
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Configured {
    /// Task count of each subtopology (by id), when the topology is ready;
    /// empty otherwise.
    pub tasks: BTreeMap<String, i32>,
    /// Internal topics that do not exist, with the partition count they
    /// must be created with.
    pub missing_internal: Vec<TopicSpec>,
    /// Why tasks cannot be assigned (empty when ready).
    pub status: Vec<(StreamsStatus, String)>,
    /// The source and repartition source topics each subtopology reads, as
    /// resolved now (for the endpoint information of interactive queries).
    pub inputs: BTreeMap<String, Vec<String>>,
}

impl Configured {
    /// Whether tasks can be assigned.
    pub fn ready(&self) -> bool {
        self.status.is_empty()
    }
}

/// A source pattern, matched against whole topic names.
pub(super) fn compile_checked(regex: &str) -> Result<regex::Regex, regex::Error> {
    regex::Regex::new(&format!("^(?:{regex})$"))
}

fn compile(regex: &str) -> Option<regex::Regex> {
    compile_checked(regex).ok()
}

/// The external source topics of `s` as they resolve against `topics`, and
/// the names or patterns that resolve to nothing.
fn resolve_sources(s: &Subtopology, topics: &Topics) -> (Vec<String>, Vec<String>) {
    let mut found = Vec::new();
    let mut missing = Vec::new();
    for t in &s.source_topics {
        if topics.contains_key(t) {
            found.push(t.clone());
        } else {
            missing.push(t.clone());
        }
    }
    for r in &s.source_topic_regex {
        let matched: Vec<String> = compile(r)
            .map(|re| topics.keys().filter(|t| re.is_match(t)).cloned().collect())
            .unwrap_or_default();
        if matched.is_empty() {
            missing.push(r.clone());
        }
        for t in matched {
            if !found.contains(&t) {
                found.push(t);
            }
        }
    }
    (found, missing)
}

/// Configures `topology` against `topics` (see the module docs).
pub fn configure(topology: &Topology, topics: &Topics) -> Configured {
    let mut out = Configured::default();
    let partitions_of = |t: &str| topics.get(t).map(|(_, n)| *n);

    // External sources.
    let mut sources: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    let mut missing_sources = BTreeSet::new();
    for s in &topology.subtopologies {
        let (found, missing) = resolve_sources(s, topics);
        missing_sources.extend(missing);
        sources.insert(s.id.as_str(), found);
    }
    if !missing_sources.is_empty() {
        let names: Vec<String> = missing_sources.into_iter().collect();
        out.status.push((
            StreamsStatus::MissingSourceTopics,
            format!("Source topics {} are missing.", names.join(", ")),
        ));
        return out;
    }

    // Repartition topics: a fixed count, or the largest task count of
    // their writers, to a fixed point.
    let mut repartition: BTreeMap<String, Option<i32>> = BTreeMap::new();
    for s in &topology.subtopologies {
        for t in &s.repartition_source_topics {
            let fixed = (t.partitions > 0).then_some(t.partitions);
            repartition.insert(t.name.clone(), fixed);
        }
    }
    let task_count =
        |s: &Subtopology, repartition: &BTreeMap<String, Option<i32>>| -> Option<i32> {
            let mut n = 0;
            for t in &sources[s.id.as_str()] {
                n = n.max(partitions_of(t)?);
            }
            for t in &s.repartition_source_topics {
                n = n.max((*repartition.get(&t.name)?)?);
            }
            Some(n)
        };
    for _ in 0..=topology.subtopologies.len() {
        let mut changed = false;
        for s in &topology.subtopologies {
            let Some(n) = task_count(s, &repartition) else {
                continue;
            };
            for sink in &s.repartition_sink_topics {
                if let Some(slot) = repartition.get_mut(sink) {
                    let fixed = topology
                        .subtopologies
                        .iter()
                        .flat_map(|x| &x.repartition_source_topics)
                        .any(|t| t.name == *sink && t.partitions > 0);
                    if !fixed && slot.is_none_or(|c| c < n) {
                        *slot = Some(n);
                        changed = true;
                    }
                }
            }
        }
        if !changed {
            break;
        }
    }

    // Copartition groups.
    let mut incorrect = BTreeSet::new();
    for s in &topology.subtopologies {
        for g in &s.copartition_groups {
            let mut external: Vec<(String, i32)> = Vec::new();
            for &i in &g.source_topics {
                if let Some(t) = s.source_topics.get(i as usize)
                    && let Some(n) = partitions_of(t)
                {
                    external.push((t.clone(), n));
                }
            }
            for &i in &g.source_topic_regex {
                if let Some(r) = s.source_topic_regex.get(i as usize)
                    && let Some(re) = compile(r)
                {
                    for (t, (_, n)) in topics.iter().filter(|(t, _)| re.is_match(t)) {
                        external.push((t.clone(), *n));
                    }
                }
            }
            let internal: Vec<&TopicSpec> = g
                .repartition_source_topics
                .iter()
                .filter_map(|&i| s.repartition_source_topics.get(i as usize))
                .collect();
            let wanted = if let Some((_, n)) = external.first() {
                if external.iter().any(|(_, m)| m != n) {
                    incorrect.extend(external.iter().map(|(t, _)| t.clone()));
                    continue;
                }
                Some(*n)
            } else {
                internal
                    .iter()
                    .filter_map(|t| repartition.get(&t.name).copied().flatten())
                    .max()
            };
            if let Some(n) = wanted {
                for t in internal {
                    if t.partitions > 0 && t.partitions != n {
                        incorrect.insert(t.name.clone());
                    } else {
                        repartition.insert(t.name.clone(), Some(n));
                    }
                }
            }
        }
    }

    // Task counts, changelogs, and the internal topics' existence.
    let mut wanted_internal: Vec<TopicSpec> = Vec::new();
    for s in &topology.subtopologies {
        let Some(n) = task_count(s, &repartition) else {
            // A repartition topic fed by nothing that could be counted.
            incorrect.extend(
                s.repartition_source_topics
                    .iter()
                    .filter(|t| repartition.get(&t.name).copied().flatten().is_none())
                    .map(|t| t.name.clone()),
            );
            continue;
        };
        out.tasks.insert(s.id.clone(), n);
        let mut inputs = sources[s.id.as_str()].clone();
        inputs.extend(s.repartition_source_topics.iter().map(|t| t.name.clone()));
        out.inputs.insert(s.id.clone(), inputs);
        for t in &s.repartition_source_topics {
            let mut spec = t.clone();
            spec.partitions = repartition[&t.name].unwrap_or(n);
            wanted_internal.push(spec);
        }
        for t in &s.changelog_topics {
            let mut spec = t.clone();
            spec.partitions = n;
            wanted_internal.push(spec);
        }
    }
    let mut seen = BTreeSet::new();
    for spec in wanted_internal {
        if !seen.insert(spec.name.clone()) {
            continue;
        }
        match partitions_of(&spec.name) {
            None => out.missing_internal.push(spec),
            Some(n) if n != spec.partitions => {
                incorrect.insert(spec.name.clone());
            }
            Some(_) => {}
        }
    }
    if !incorrect.is_empty() {
        let names: Vec<String> = incorrect.into_iter().collect();
        out.status.push((
            StreamsStatus::IncorrectlyPartitionedTopics,
            format!("Topics {} are incorrectly partitioned.", names.join(", ")),
        ));
    }
    if !out.missing_internal.is_empty() {
        let names: Vec<&str> = out
            .missing_internal
            .iter()
            .map(|t| t.name.as_str())
            .collect();
        out.status.push((
            StreamsStatus::MissingInternalTopics,
            format!("Internal topics are missing: {}", names.join(", ")),
        ));
    }
    if !out.ready() {
        out.tasks.clear();
    }
    out
}
