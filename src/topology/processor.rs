//! Executing a built [`Topology`] one source record at a time, without I/O.
//!
//! [`CompiledTopology::process`] takes one [`SourceRecord`] and returns a
//! future of its [`ProcessResult`]: the output records to produce and the
//! [`Outcome`] for the source record. The runtime produces the records and
//! stages the acknowledgement in the same transaction.
//!
//! Inside, the record is deserialized by its topic's source and pushed
//! depth-first through the DAG: each record an operator emits is carried to
//! the end of the first downstream before the next one starts, so the
//! outputs of one source record come out in a fixed order (the order of the
//! operators' emissions and, for a cloned stream, the order in which its
//! handles were used). Only async operators make the future wait; a topology
//! without them completes on the first poll.

use std::collections::HashMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::{FutureExt, StreamExt};
use tokio::sync::Semaphore;

use super::builder::{BoxedRecord, Node, NodeError, NodeId, NodeKind};
use super::describe::TopologyDescription;
use super::error::{ErrorKind, ErrorPolicy, ProcessingError, dead_letter_record};
use super::record::{OutputRecord, SourceMeta, SourceRecord};
use crate::eos::AcknowledgeType;

pub(crate) struct TopologyInner {
    pub(crate) share_group: String,
    pub(crate) default_policy: ErrorPolicy,
    pub(crate) nodes: Vec<Node>,
    pub(crate) sources: HashMap<String, NodeId>,
}

impl TopologyInner {
    pub(crate) fn new(
        share_group: String,
        default_policy: ErrorPolicy,
        nodes: Vec<Node>,
        sources: HashMap<String, NodeId>,
    ) -> Self {
        Self {
            share_group,
            default_policy,
            nodes,
            sources,
        }
    }
}

/// A checked topology: what to consume, how to process, where to write.
/// Cheap to clone.
#[derive(Clone)]
pub struct Topology {
    pub(crate) inner: Arc<TopologyInner>,
}

impl std::fmt::Debug for Topology {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Topology")
            .field("share_group", &self.inner.share_group)
            .field("nodes", &self.inner.nodes.len())
            .finish()
    }
}

impl Topology {
    /// The share group the sources are consumed through.
    pub fn share_group(&self) -> &str {
        &self.inner.share_group
    }

    /// The topics to subscribe to, sorted.
    pub fn source_topics(&self) -> Vec<&str> {
        let mut t: Vec<&str> = self.inner.sources.keys().map(String::as_str).collect();
        t.sort_unstable();
        t
    }

    /// The topics of the static sinks and of the dead-letter policies,
    /// sorted (sinks of [`to_dynamic`](super::KStream::to_dynamic) choose
    /// theirs per record and are not listed).
    pub fn output_topics(&self) -> Vec<&str> {
        let mut t: Vec<&str> = Vec::new();
        if let ErrorPolicy::DeadLetter { topic } = &self.inner.default_policy {
            t.push(topic);
        }
        for n in &self.inner.nodes {
            if let Some(ErrorPolicy::DeadLetter { topic }) = &n.policy {
                t.push(topic);
            }
            if let NodeKind::Sink {
                topic: Some(topic), ..
            } = &n.kind
            {
                t.push(topic);
            }
        }
        t.sort_unstable();
        t.dedup();
        t
    }

    /// The error policy of nodes without their own.
    pub fn default_error_policy(&self) -> &ErrorPolicy {
        &self.inner.default_policy
    }

    /// How many source records the runtime should process at once: the
    /// largest `max_in_flight` of the async operators, 1 without any.
    pub fn max_concurrency(&self) -> usize {
        self.inner
            .nodes
            .iter()
            .filter_map(|n| match n.kind {
                NodeKind::Async { max_in_flight, .. } => Some(max_in_flight),
                _ => None,
            })
            .max()
            .unwrap_or(1)
    }

    /// The nodes and edges, printable (like Kafka Streams'
    /// `TopologyDescription`).
    pub fn describe(&self) -> TopologyDescription {
        TopologyDescription::of(&self.inner)
    }

    /// An executor of this topology with its own concurrency limits: each
    /// async operator allows `max_in_flight` calls at once per
    /// `CompiledTopology` (clones share the limits). Compile once per
    /// worker for per-worker limits, or share one for global limits.
    pub fn compile(&self) -> CompiledTopology {
        let permits = self
            .inner
            .nodes
            .iter()
            .map(|n| match n.kind {
                NodeKind::Async { max_in_flight, .. } => Some(Semaphore::new(max_in_flight)),
                _ => None,
            })
            .collect();
        CompiledTopology {
            topology: self.clone(),
            permits: Arc::new(permits),
        }
    }
}

/// What the runtime does with the source record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Processed: produce the outputs, acknowledge ACCEPT.
    Accept,
    /// Rejected by the error policy: nothing to produce, acknowledge REJECT.
    Reject {
        /// Why.
        error: ProcessingError,
    },
    /// Dead-lettered: produce the dead-letter record (the only output),
    /// acknowledge REJECT.
    DeadLetter {
        /// The dead-letter topic.
        topic: String,
        /// Why.
        error: ProcessingError,
    },
    /// Stop the application: abort the transaction (nothing of this batch
    /// is produced or acknowledged; the records will be delivered again).
    Fail {
        /// Why.
        error: ProcessingError,
    },
}

impl Outcome {
    /// The acknowledgement to stage; `None` for [`Outcome::Fail`].
    pub fn acknowledge_type(&self) -> Option<AcknowledgeType> {
        match self {
            Self::Accept => Some(AcknowledgeType::Accept),
            Self::Reject { .. } | Self::DeadLetter { .. } => Some(AcknowledgeType::Reject),
            Self::Fail { .. } => None,
        }
    }

    /// The error, unless accepted.
    pub fn error(&self) -> Option<&ProcessingError> {
        match self {
            Self::Accept => None,
            Self::Reject { error } | Self::DeadLetter { error, .. } | Self::Fail { error } => {
                Some(error)
            }
        }
    }
}

/// The result of processing one source record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessResult {
    /// What to acknowledge (or to stop).
    pub outcome: Outcome,
    /// The records to produce, in order: the outputs for
    /// [`Outcome::Accept`], the dead-letter record for
    /// [`Outcome::DeadLetter`], none otherwise.
    pub records: Vec<OutputRecord>,
}

/// A topology ready to process records. Cheap to clone; clones share the
/// concurrency limits of the async operators.
///
/// # How the runtime drives it
///
/// For a poll batch, the runtime keeps up to
/// [`max_concurrency`](Self::max_concurrency) source records in processing
/// at once and takes their results in batch order, which is what
/// [`process_batch`](Self::process_batch) does:
///
/// ```text
/// futures::stream::iter(batch)
///     .map(|r| topology.process(r))
///     .buffered(topology.max_concurrency())
/// ```
///
/// Each async operator additionally holds a semaphore of `max_in_flight`
/// permits, so its calls never exceed that bound however many records are
/// in processing (and across workers sharing one `CompiledTopology`).
///
/// # Ordering
///
/// - The outputs of one source record stay together, in the depth-first
///   order described in the module docs.
/// - With `buffered`, results come back in source order, so outputs are
///   produced in source-record order even when async calls finish out of
///   order. (A runtime using `buffer_unordered` gets them in completion
///   order instead.)
/// - Side effects (`peek`, `foreach`, async calls) of different records may
///   interleave when more than one record is in processing.
#[derive(Clone)]
pub struct CompiledTopology {
    topology: Topology,
    permits: Arc<Vec<Option<Semaphore>>>,
}

impl std::fmt::Debug for CompiledTopology {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompiledTopology")
            .field("topology", &self.topology)
            .finish()
    }
}

fn panic_message(payload: Box<dyn std::any::Any + Send>) -> String {
    let text = if let Some(s) = payload.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_string()
    };
    format!("panicked: {text}")
}

/// Runs `f`, turning a panic into an error of `kind`.
fn guarded<T>(kind: ErrorKind, f: impl FnOnce() -> Result<T, NodeError>) -> Result<T, NodeError> {
    match std::panic::catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(payload) => Err(NodeError {
            kind,
            message: panic_message(payload),
            attempts: 1,
        }),
    }
}

impl CompiledTopology {
    /// The topology.
    pub fn topology(&self) -> &Topology {
        &self.topology
    }

    /// See [`Topology::max_concurrency`].
    pub fn max_concurrency(&self) -> usize {
        self.topology.max_concurrency()
    }

    /// Processes one source record: its output records and outcome, with
    /// the error policy applied. The future owns what it needs (`'static`)
    /// and can be spawned.
    pub fn process(
        &self,
        record: SourceRecord,
    ) -> impl Future<Output = ProcessResult> + Send + 'static {
        let this = self.clone();
        async move { this.run(record).await }
    }

    /// Processes a batch with up to [`max_concurrency`](Self::max_concurrency)
    /// records at once; results in batch order.
    pub async fn process_batch(&self, records: Vec<SourceRecord>) -> Vec<ProcessResult> {
        futures::stream::iter(records)
            .map(|r| self.process(r))
            .buffered(self.max_concurrency())
            .collect()
            .await
    }

    fn nodes(&self) -> &[Node] {
        &self.topology.inner.nodes
    }

    /// Pushes `emitted` (in order) for every child of `node` onto the
    /// depth-first work stack, so that the first record's first child is
    /// popped first.
    fn forward(
        &self,
        node: NodeId,
        emitted: &mut Vec<BoxedRecord>,
        stack: &mut Vec<(NodeId, BoxedRecord)>,
    ) {
        let n = &self.nodes()[node];
        let Some((&first, rest)) = n.children.split_first() else {
            emitted.clear();
            return;
        };
        while let Some(rec) = emitted.pop() {
            if !rest.is_empty() {
                let cloner = n
                    .cloner
                    .expect("a node with several children had its handle cloned");
                for &c in rest.iter().rev() {
                    stack.push((c, cloner(&rec)));
                }
            }
            stack.push((first, rec));
        }
    }

    async fn run(&self, src: SourceRecord) -> ProcessResult {
        let inner = &*self.topology.inner;
        let Some(&source) = inner.sources.get(&src.topic) else {
            return ProcessResult {
                outcome: Outcome::Fail {
                    error: ProcessingError {
                        kind: ErrorKind::UnknownTopic,
                        node: "topology".into(),
                        message: format!(
                            "topic '{}' is not a source topic of this topology",
                            src.topic
                        ),
                        attempts: 1,
                    },
                },
                records: Vec::new(),
            };
        };
        let meta = Arc::new(SourceMeta {
            topic: src.topic.clone(),
            partition: src.partition,
            offset: src.offset,
            delivery_count: src.delivery_count,
            timestamp: src.timestamp,
        });
        let NodeKind::Source { deser, .. } = &inner.nodes[source].kind else {
            unreachable!("the source map points at source nodes");
        };
        let first = match guarded(ErrorKind::Deserialization, || deser(&src, meta)) {
            Ok(r) => r,
            Err(e) => return self.on_error(source, e, &src),
        };

        let mut stack: Vec<(NodeId, BoxedRecord)> = Vec::new();
        let mut scratch: Vec<BoxedRecord> = vec![first];
        let mut outputs: Vec<OutputRecord> = Vec::new();
        self.forward(source, &mut scratch, &mut stack);

        while let Some((id, rec)) = stack.pop() {
            let result = match &inner.nodes[id].kind {
                NodeKind::Transform { f } | NodeKind::Foreach { f } => {
                    guarded(ErrorKind::Operator, || f(rec, &mut scratch))
                        .map(|()| self.forward(id, &mut scratch, &mut stack))
                }
                NodeKind::Async { f, .. } => {
                    let semaphore = self.permits[id]
                        .as_ref()
                        .expect("every async node has a semaphore");
                    let permit = semaphore
                        .acquire()
                        .await
                        .expect("the semaphore is never closed");
                    let result = match guarded(ErrorKind::Operator, || Ok(f(rec))) {
                        Ok(fut) => match AssertUnwindSafe(fut).catch_unwind().await {
                            Ok(r) => r,
                            Err(payload) => Err(NodeError::operator(panic_message(payload))),
                        },
                        Err(e) => Err(e),
                    };
                    drop(permit);
                    result.map(|r| {
                        scratch.push(r);
                        self.forward(id, &mut scratch, &mut stack)
                    })
                }
                NodeKind::Split {
                    routes, default, ..
                } => {
                    let chosen = guarded(ErrorKind::Operator, || {
                        for route in routes {
                            if (route.predicate)(&rec)? {
                                return Ok(Some(route.node));
                            }
                        }
                        Ok(default.as_ref().map(|(_, node)| *node))
                    });
                    chosen.map(|target| {
                        if let Some(t) = target {
                            stack.push((t, rec));
                        }
                    })
                }
                NodeKind::Branch { .. } | NodeKind::Merge => {
                    scratch.push(rec);
                    self.forward(id, &mut scratch, &mut stack);
                    Ok(())
                }
                NodeKind::Sink { f, .. } => {
                    guarded(ErrorKind::Operator, || f(rec)).map(|o| outputs.push(o))
                }
                NodeKind::Source { .. } => unreachable!("sources have no parents"),
            };
            if let Err(e) = result {
                return self.on_error(id, e, &src);
            }
        }
        ProcessResult {
            outcome: Outcome::Accept,
            records: outputs,
        }
    }

    fn on_error(&self, node: NodeId, e: NodeError, src: &SourceRecord) -> ProcessResult {
        let inner = &*self.topology.inner;
        let n = &inner.nodes[node];
        let error = ProcessingError {
            kind: e.kind,
            node: n.name.clone(),
            message: e.message,
            attempts: e.attempts,
        };
        match n.policy.as_ref().unwrap_or(&inner.default_policy) {
            ErrorPolicy::Fail => ProcessResult {
                outcome: Outcome::Fail { error },
                records: Vec::new(),
            },
            ErrorPolicy::Reject => ProcessResult {
                outcome: Outcome::Reject { error },
                records: Vec::new(),
            },
            ErrorPolicy::DeadLetter { topic } => ProcessResult {
                records: vec![dead_letter_record(src, topic, &error)],
                outcome: Outcome::DeadLetter {
                    topic: topic.clone(),
                    error,
                },
            },
        }
    }
}
