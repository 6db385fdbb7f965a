//! [`TopologyDescription`]: the nodes and edges of a topology, printable
//! (in the spirit of Kafka Streams' `TopologyDescription`).

use std::fmt;

use super::builder::NodeKind;
use super::error::ErrorPolicy;
use super::processor::TopologyInner;

/// One node of a [`TopologyDescription`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeDescription {
    /// Unique node name.
    pub name: String,
    /// `Source`, `Processor`, `Split`, `Branch`, `Merge` or `Sink`.
    pub kind: &'static str,
    /// Operator and settings, e.g. `topics: [orders], key: string, value: json`.
    pub detail: String,
    /// The node's own error policy, if it has one.
    pub error_policy: Option<ErrorPolicy>,
    /// Names of the upstream nodes.
    pub predecessors: Vec<String>,
    /// Names of the downstream nodes.
    pub successors: Vec<String>,
}

/// The nodes of a topology in creation (topological) order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopologyDescription {
    /// The share group.
    pub share_group: String,
    /// The policy of nodes without their own.
    pub default_error_policy: ErrorPolicy,
    /// The nodes.
    pub nodes: Vec<NodeDescription>,
}

fn policy_text(p: &ErrorPolicy) -> String {
    match p {
        ErrorPolicy::Fail => "fail".into(),
        ErrorPolicy::Reject => "reject".into(),
        ErrorPolicy::DeadLetter { topic } => format!("dead-letter to {topic}"),
    }
}

impl TopologyDescription {
    pub(crate) fn of(inner: &TopologyInner) -> Self {
        let names = |ids: &[usize]| -> Vec<String> {
            ids.iter().map(|&i| inner.nodes[i].name.clone()).collect()
        };
        let nodes = inner
            .nodes
            .iter()
            .map(|n| {
                let (kind, detail) = match &n.kind {
                    NodeKind::Source {
                        topics,
                        key_format,
                        value_format,
                        ..
                    } => (
                        "Source",
                        format!(
                            "topics: [{}], key: {key_format}, value: {value_format}",
                            topics.join(", ")
                        ),
                    ),
                    NodeKind::Transform { .. } | NodeKind::Foreach { .. } => {
                        ("Processor", n.op.to_string())
                    }
                    NodeKind::Async { max_in_flight, .. } => (
                        "Processor",
                        format!("{}, max in flight: {max_in_flight}", n.op),
                    ),
                    NodeKind::Split {
                        routes, default, ..
                    } => {
                        let branches: Vec<&str> =
                            routes.iter().map(|r| r.branch.as_str()).collect();
                        let default = match default {
                            Some((d, _)) => d.as_str(),
                            None => "(drop)",
                        };
                        (
                            "Split",
                            format!("branches: [{}], default: {default}", branches.join(", ")),
                        )
                    }
                    NodeKind::Branch { branch } => ("Branch", format!("branch: {branch}")),
                    NodeKind::Merge => ("Merge", "merge".into()),
                    NodeKind::Sink {
                        topic,
                        key_format,
                        value_format,
                        ..
                    } => (
                        "Sink",
                        format!(
                            "topic: {}, key: {key_format}, value: {value_format}",
                            topic.as_deref().unwrap_or("(chosen per record)")
                        ),
                    ),
                };
                NodeDescription {
                    name: n.name.clone(),
                    kind,
                    detail,
                    error_policy: n.policy.clone(),
                    predecessors: names(&n.parents),
                    successors: names(&n.children),
                }
            })
            .collect();
        Self {
            share_group: inner.share_group.clone(),
            default_error_policy: inner.default_policy.clone(),
            nodes,
        }
    }
}

impl fmt::Display for TopologyDescription {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "Topology (share group: {}, error policy: {})",
            self.share_group,
            policy_text(&self.default_error_policy)
        )?;
        for n in &self.nodes {
            write!(f, "  {}: {} ({})", n.kind, n.name, n.detail)?;
            if let Some(p) = &n.error_policy {
                write!(f, " [on error: {}]", policy_text(p))?;
            }
            writeln!(f)?;
            for s in &n.successors {
                writeln!(f, "    --> {s}")?;
            }
            for p in &n.predecessors {
                writeln!(f, "    <-- {p}")?;
            }
        }
        Ok(())
    }
}
