//! [`StreamsBuilder`]: collects sources, operators and sinks into a graph,
//! and checks at [`build`](StreamsBuilder::build) that the graph can run.
//!
//! Internally every stream handle ([`KStream`]) is the id of one node of a
//! DAG whose records are type-erased (`Box<dyn Any + Send>` holding a
//! [`Record<K, V>`](super::Record)). The typed handles guarantee that each
//! node receives the record type it was built for, so the erased closures
//! downcast without a possible failure. Nodes are only ever appended with
//! edges from older nodes, so the graph is acyclic and node ids are a
//! topological order.

use std::any::Any;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use futures::future::BoxFuture;
use parking_lot::Mutex;

use super::error::{BuildError, ErrorKind, ErrorPolicy, TopologyError};
use super::operators::KStream;
use super::processor::{Topology, TopologyInner};
use super::record::{Headers, OutputRecord, Record, SourceMeta, SourceRecord};
use super::serdes::Deserializer;

pub(crate) type NodeId = usize;
pub(crate) type BoxedRecord = Box<dyn Any + Send>;

/// An error raised inside a node, before the node's name is attached.
#[derive(Debug)]
pub(crate) struct NodeError {
    pub(crate) kind: ErrorKind,
    pub(crate) message: String,
    /// In-process attempts made by the operator (1 unless it returned
    /// [`AttemptsExhausted`](super::error::AttemptsExhausted)).
    pub(crate) attempts: u32,
}

impl NodeError {
    pub(crate) fn operator(message: impl Into<String>) -> Self {
        Self {
            kind: ErrorKind::Operator,
            message: message.into(),
            attempts: 1,
        }
    }
}

pub(crate) type SyncFn =
    Box<dyn Fn(BoxedRecord, &mut Vec<BoxedRecord>) -> Result<(), NodeError> + Send + Sync>;
pub(crate) type AsyncFn =
    Box<dyn Fn(BoxedRecord) -> BoxFuture<'static, Result<BoxedRecord, NodeError>> + Send + Sync>;
pub(crate) type PredicateFn = Box<dyn Fn(&BoxedRecord) -> Result<bool, NodeError> + Send + Sync>;
pub(crate) type SinkFn = Box<dyn Fn(BoxedRecord) -> Result<OutputRecord, NodeError> + Send + Sync>;
pub(crate) type DeserFn =
    Box<dyn Fn(&SourceRecord, Arc<SourceMeta>) -> Result<BoxedRecord, NodeError> + Send + Sync>;
pub(crate) type CloneFn = fn(&BoxedRecord) -> BoxedRecord;

pub(crate) struct Route {
    pub(crate) branch: String,
    pub(crate) predicate: PredicateFn,
    pub(crate) node: NodeId,
}

pub(crate) enum NodeKind {
    Source {
        topics: Vec<String>,
        key_format: String,
        value_format: String,
        deser: DeserFn,
    },
    /// filter, map, flat_map, peek, process...: 0..n records out.
    Transform {
        f: SyncFn,
    },
    /// foreach: a terminal that produces nothing.
    Foreach {
        f: SyncFn,
    },
    Async {
        max_in_flight: usize,
        f: AsyncFn,
    },
    Split {
        routes: Vec<Route>,
        default: Option<(String, NodeId)>,
        finished: bool,
    },
    Branch {
        branch: String,
    },
    Merge,
    Sink {
        /// `None` for a per-record topic.
        topic: Option<String>,
        key_format: String,
        value_format: String,
        f: SinkFn,
    },
}

pub(crate) struct Node {
    /// Set by `.named(...)`; otherwise a name is made at build.
    pub(crate) explicit_name: Option<String>,
    pub(crate) name: String,
    /// Operator label for names and `describe()` (`filter`, `map-values`...).
    pub(crate) op: &'static str,
    pub(crate) kind: NodeKind,
    pub(crate) parents: Vec<NodeId>,
    pub(crate) children: Vec<NodeId>,
    pub(crate) policy: Option<ErrorPolicy>,
    /// Set when the stream handle of this node was cloned (`K, V: Clone`):
    /// how to copy a record for its second and later children.
    pub(crate) cloner: Option<CloneFn>,
    /// Merged with a stream of another builder (refused at build).
    pub(crate) foreign: bool,
}

#[derive(Default)]
pub(crate) struct Graph {
    pub(crate) nodes: Vec<Node>,
}

impl Graph {
    pub(crate) fn add(&mut self, op: &'static str, kind: NodeKind, parents: &[NodeId]) -> NodeId {
        let id = self.nodes.len();
        for &p in parents {
            self.nodes[p].children.push(id);
        }
        self.nodes.push(Node {
            explicit_name: None,
            name: String::new(),
            op,
            kind,
            parents: parents.to_vec(),
            children: Vec::new(),
            policy: None,
            cloner: None,
            foreign: false,
        });
        id
    }
}

pub(crate) type SharedGraph = Arc<Mutex<Graph>>;

/// A list of topic names for [`StreamsBuilder::stream`]: a `&str`, a
/// `String`, an array, a slice or a vector of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topics(pub Vec<String>);

impl From<&str> for Topics {
    fn from(t: &str) -> Self {
        Self(vec![t.to_string()])
    }
}

impl From<String> for Topics {
    fn from(t: String) -> Self {
        Self(vec![t])
    }
}

impl From<&[&str]> for Topics {
    fn from(t: &[&str]) -> Self {
        Self(t.iter().map(|s| s.to_string()).collect())
    }
}

impl<const N: usize> From<[&str; N]> for Topics {
    fn from(t: [&str; N]) -> Self {
        Self(t.iter().map(|s| s.to_string()).collect())
    }
}

impl From<Vec<String>> for Topics {
    fn from(t: Vec<String>) -> Self {
        Self(t)
    }
}

/// Builds a [`Topology`]: the share group it consumes through, its sources,
/// operators and sinks, and the default error policy.
pub struct StreamsBuilder {
    share_group: String,
    default_policy: ErrorPolicy,
    graph: SharedGraph,
}

impl StreamsBuilder {
    /// A builder for a topology whose sources are consumed through the share
    /// group `share_group`.
    pub fn new(share_group: impl Into<String>) -> Self {
        Self {
            share_group: share_group.into(),
            default_policy: ErrorPolicy::Fail,
            graph: Arc::default(),
        }
    }

    /// The error policy of nodes without their own (default
    /// [`ErrorPolicy::Fail`]).
    pub fn error_policy(&mut self, policy: ErrorPolicy) -> &mut Self {
        self.default_policy = policy;
        self
    }

    /// A stream of the records of `topics`, keys read with `key_serde` and
    /// values with `value_serde`. `.on_error(...)` on the returned stream sets
    /// the policy for deserialization errors.
    pub fn stream<K, V>(
        &self,
        topics: impl Into<Topics>,
        key_serde: impl Deserializer<K>,
        value_serde: impl Deserializer<V>,
    ) -> KStream<K, V>
    where
        K: Send + 'static,
        V: Send + 'static,
    {
        let topics = topics.into().0;
        let key_format = key_serde.format();
        let value_format = value_serde.format();
        let deser: DeserFn = Box::new(move |src: &SourceRecord, meta: Arc<SourceMeta>| {
            let key = key_serde
                .deserialize(&src.topic, src.key.as_deref())
                .map_err(|e| NodeError {
                    kind: ErrorKind::Deserialization,
                    message: format!("key: {e}"),
                    attempts: 1,
                })?;
            let value = value_serde
                .deserialize(&src.topic, src.value.as_deref())
                .map_err(|e| NodeError {
                    kind: ErrorKind::Deserialization,
                    message: format!("value: {e}"),
                    attempts: 1,
                })?;
            let rec = Record::new(
                key,
                value,
                Headers::from(src.headers.clone()),
                src.timestamp,
                meta,
            );
            Ok(Box::new(rec) as BoxedRecord)
        });
        let id = self.graph.lock().add(
            "source",
            NodeKind::Source {
                topics,
                key_format,
                value_format,
                deser,
            },
            &[],
        );
        KStream::from_parts(self.graph.clone(), id)
    }

    /// Checks the graph and returns the topology, or every problem found.
    pub fn build(self) -> Result<Topology, BuildError> {
        let mut nodes = std::mem::take(&mut self.graph.lock().nodes);
        name_nodes(&mut nodes);
        let mut errors = Vec::new();
        let sources = validate(&self.share_group, &self.default_policy, &nodes, &mut errors);
        if !errors.is_empty() {
            return Err(BuildError { errors });
        }
        Ok(Topology {
            inner: Arc::new(TopologyInner::new(
                self.share_group,
                self.default_policy,
                nodes,
                sources,
            )),
        })
    }
}

/// Gives every node without an explicit name `<op>-<id>`; branches get
/// `<split name>-<branch>`.
fn name_nodes(nodes: &mut [Node]) {
    for id in 0..nodes.len() {
        let name = match (&nodes[id].explicit_name, &nodes[id].kind) {
            (Some(n), _) => n.clone(),
            (None, NodeKind::Branch { branch }) => {
                // The split precedes its branches, so it is named already.
                format!("{}-{branch}", nodes[nodes[id].parents[0]].name)
            }
            (None, _) => format!("{}-{id}", nodes[id].op),
        };
        nodes[id].name = name;
    }
}

pub(crate) fn is_valid_topic_name(t: &str) -> bool {
    !t.is_empty()
        && t.len() <= 249
        && t != "."
        && t != ".."
        && t.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// Returns the topic -> source node map; pushes every problem to `errors`.
fn validate(
    share_group: &str,
    default_policy: &ErrorPolicy,
    nodes: &[Node],
    errors: &mut Vec<TopologyError>,
) -> HashMap<String, NodeId> {
    if share_group.is_empty() {
        errors.push(TopologyError::EmptyShareGroup);
    }
    let mut sources: HashMap<String, NodeId> = HashMap::new();
    let has_source = nodes
        .iter()
        .any(|n| matches!(n.kind, NodeKind::Source { .. }));
    if !has_source {
        errors.push(TopologyError::NoSource);
    }
    let has_sink = nodes
        .iter()
        .any(|n| matches!(n.kind, NodeKind::Sink { .. } | NodeKind::Foreach { .. }));
    if has_source && !has_sink {
        errors.push(TopologyError::NoSink);
    }

    let mut seen_names = HashSet::new();
    for n in nodes {
        if !seen_names.insert(n.name.as_str()) {
            errors.push(TopologyError::DuplicateNodeName {
                name: n.name.clone(),
            });
        }
    }

    let mut dlq_topics: BTreeMap<&str, ()> = BTreeMap::new();
    if let ErrorPolicy::DeadLetter { topic } = default_policy {
        dlq_topics.insert(topic, ());
    }

    for (id, n) in nodes.iter().enumerate() {
        if let Some(ErrorPolicy::DeadLetter { topic }) = &n.policy {
            dlq_topics.insert(topic, ());
        }
        if n.foreign {
            errors.push(TopologyError::ForeignStream {
                node: n.name.clone(),
            });
        }
        let terminal = matches!(n.kind, NodeKind::Sink { .. } | NodeKind::Foreach { .. });
        match &n.kind {
            NodeKind::Source { topics, .. } => {
                if topics.is_empty() {
                    errors.push(TopologyError::SourceWithoutTopic {
                        source_name: n.name.clone(),
                    });
                }
                for t in topics {
                    if !is_valid_topic_name(t) {
                        errors.push(TopologyError::InvalidTopicName {
                            topic: t.clone(),
                            context: format!("source '{}'", n.name),
                        });
                    }
                    if let Some(&first) = sources.get(t) {
                        errors.push(TopologyError::TopicSubscribedTwice {
                            topic: t.clone(),
                            first: nodes[first].name.clone(),
                            second: n.name.clone(),
                        });
                    } else {
                        sources.insert(t.clone(), id);
                    }
                }
                if has_sink && n.children.is_empty() {
                    errors.push(TopologyError::SourceWithoutSink {
                        source_name: n.name.clone(),
                        topics: topics.join(", "),
                    });
                }
            }
            NodeKind::Split {
                routes,
                default,
                finished,
            } => {
                if !finished {
                    errors.push(TopologyError::UnfinishedSplit {
                        split: n.name.clone(),
                    });
                }
                if routes.is_empty() {
                    errors.push(TopologyError::SplitWithoutBranches {
                        split: n.name.clone(),
                    });
                }
                let mut names = HashSet::new();
                let all = routes
                    .iter()
                    .map(|r| r.branch.as_str())
                    .chain(default.iter().map(|(b, _)| b.as_str()));
                for b in all {
                    if !names.insert(b) {
                        errors.push(TopologyError::DuplicateBranchName {
                            branch: b.to_string(),
                            split: n.name.clone(),
                        });
                    }
                }
            }
            NodeKind::Branch { branch } if has_sink && n.children.is_empty() => {
                errors.push(TopologyError::BranchWithoutRoute {
                    branch: branch.clone(),
                    split: nodes[n.parents[0]].name.clone(),
                });
            }
            NodeKind::Async { max_in_flight, .. } if *max_in_flight == 0 => {
                errors.push(TopologyError::ZeroConcurrency {
                    node: n.name.clone(),
                });
            }
            NodeKind::Sink { topic: Some(t), .. } if !is_valid_topic_name(t) => {
                errors.push(TopologyError::InvalidTopicName {
                    topic: t.clone(),
                    context: format!("sink '{}'", n.name),
                });
            }
            _ => {}
        }
        let checked_above = matches!(
            n.kind,
            NodeKind::Source { .. } | NodeKind::Branch { .. } | NodeKind::Split { .. }
        );
        if has_sink && !terminal && !checked_above && n.children.is_empty() {
            errors.push(TopologyError::DanglingOperator {
                node: n.name.clone(),
            });
        }
    }

    for t in dlq_topics.keys() {
        if !is_valid_topic_name(t) {
            errors.push(TopologyError::InvalidTopicName {
                topic: t.to_string(),
                context: "dead-letter error policy".into(),
            });
        } else if sources.contains_key(*t) {
            errors.push(TopologyError::DeadLetterIsSource {
                topic: t.to_string(),
            });
        }
    }

    // A topic both written by a static sink and read by a source must use
    // the same wire formats on both ends.
    for n in nodes {
        let NodeKind::Sink {
            topic: Some(topic),
            key_format,
            value_format,
            ..
        } = &n.kind
        else {
            continue;
        };
        let Some(&src) = sources.get(topic) else {
            continue;
        };
        let NodeKind::Source {
            key_format: rk,
            value_format: rv,
            ..
        } = &nodes[src].kind
        else {
            continue;
        };
        for (part, written, read) in [("key", key_format, rk), ("value", value_format, rv)] {
            if written != read {
                errors.push(TopologyError::SerdeMismatch {
                    topic: topic.clone(),
                    part,
                    sink: n.name.clone(),
                    written: written.clone(),
                    source_name: nodes[src].name.clone(),
                    read: read.clone(),
                });
            }
        }
    }
    sources
}
