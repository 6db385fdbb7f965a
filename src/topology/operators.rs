//! [`KStream`] and its operators.
//!
//! Every operator consumes the stream handle and returns the handle of its
//! output, so a stream feeds one downstream operator. To feed several, clone
//! the handle (possible when `K` and `V` are `Clone`): each downstream then
//! gets its own copy of every record, in the order the handles were used.
//!
//! The `(key, value)` operators are the Kafka Streams ones. The `_record`
//! forms ([`filter_record`](KStream::filter_record),
//! [`map_record`](KStream::map_record), [`process`](KStream::process),
//! [`to_dynamic`](KStream::to_dynamic), [`Split::branch_record`]) see the
//! whole [`Record`]: headers, timestamp and source coordinates.
//!
//! # Failures and panics
//!
//! The `try_` operators, [`process`](KStream::process) and the async
//! operators return `Result`s; an `Err` is an operator error handled by the
//! error policy (see [`error`](super::error)). A panic inside any user
//! closure (or serde) is caught with `catch_unwind` and handled as an error
//! of that node (message `panicked: ...`); the panic hook still prints it.
//! Closures are `Fn` and shared by every record: after a panic, state they
//! share through interior mutability may be half-updated.

use std::future::Future;
use std::marker::PhantomData;

use futures::FutureExt;

use super::builder::{
    BoxedRecord, NodeError, NodeId, NodeKind, Route, SharedGraph, SinkFn, SyncFn,
};
use super::error::{BoxError, ErrorKind, ErrorPolicy};
use super::record::{OutputRecord, Record, SinkRecord, SinkTimestamp};
use super::serdes::Serializer;

fn take<K: 'static, V: 'static>(b: BoxedRecord) -> Record<K, V> {
    *b.downcast::<Record<K, V>>()
        .expect("a typed stream handle only ever carries its own record type")
}

fn peek_ref<K: 'static, V: 'static>(b: &BoxedRecord) -> &Record<K, V> {
    b.downcast_ref::<Record<K, V>>()
        .expect("a typed stream handle only ever carries its own record type")
}

fn boxed<K: Send + 'static, V: Send + 'static>(r: Record<K, V>) -> BoxedRecord {
    Box::new(r)
}

fn op_err(e: impl Into<BoxError>) -> NodeError {
    match e.into().downcast::<super::error::AttemptsExhausted>() {
        Ok(a) => NodeError {
            attempts: a.attempts.max(1),
            ..NodeError::operator(a.error.to_string())
        },
        Err(e) => NodeError::operator(e.to_string()),
    }
}

fn clone_record<K, V>(b: &BoxedRecord) -> BoxedRecord
where
    K: Clone + Send + 'static,
    V: Clone + Send + 'static,
{
    boxed(peek_ref::<K, V>(b).clone())
}

/// A stream of [`Record<K, V>`]: the handle of one node of the topology.
pub struct KStream<K, V> {
    graph: SharedGraph,
    node: NodeId,
    _types: PhantomData<fn() -> (K, V)>,
}

impl<K, V> Clone for KStream<K, V>
where
    K: Clone + Send + 'static,
    V: Clone + Send + 'static,
{
    /// Another handle to the same stream; every record goes to the
    /// downstream of each handle (a copy per handle).
    fn clone(&self) -> Self {
        self.graph.lock().nodes[self.node].cloner = Some(clone_record::<K, V>);
        Self::from_parts(self.graph.clone(), self.node)
    }
}

impl<K, V> std::fmt::Debug for KStream<K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KStream").field("node", &self.node).finish()
    }
}

impl<K, V> KStream<K, V>
where
    K: Send + 'static,
    V: Send + 'static,
{
    pub(crate) fn from_parts(graph: SharedGraph, node: NodeId) -> Self {
        Self {
            graph,
            node,
            _types: PhantomData,
        }
    }

    fn then<K2, V2>(&self, op: &'static str, kind: NodeKind) -> KStream<K2, V2>
    where
        K2: Send + 'static,
        V2: Send + 'static,
    {
        let id = self.graph.lock().add(op, kind, &[self.node]);
        KStream::from_parts(self.graph.clone(), id)
    }

    fn transform<K2, V2>(
        self,
        op: &'static str,
        f: impl Fn(BoxedRecord, &mut Vec<BoxedRecord>) -> Result<(), NodeError> + Send + Sync + 'static,
    ) -> KStream<K2, V2>
    where
        K2: Send + 'static,
        V2: Send + 'static,
    {
        let f: SyncFn = Box::new(f);
        self.then(op, NodeKind::Transform { f })
    }

    /// Names the node behind this handle (shown by `describe()` and in the
    /// `__dlq.error.node` header). Names must be unique.
    pub fn named(self, name: impl Into<String>) -> Self {
        self.graph.lock().nodes[self.node].explicit_name = Some(name.into());
        self
    }

    /// The error policy for errors of the node behind this handle (for a
    /// source: deserialization errors), instead of the topology's.
    pub fn on_error(self, policy: ErrorPolicy) -> Self {
        self.graph.lock().nodes[self.node].policy = Some(policy);
        self
    }

    /// Keeps the records for which `predicate` is true.
    pub fn filter<F>(self, predicate: F) -> KStream<K, V>
    where
        F: Fn(&K, &V) -> bool + Send + Sync + 'static,
    {
        self.transform("filter", move |b, out| {
            let r = peek_ref::<K, V>(&b);
            if predicate(&r.key, &r.value) {
                out.push(b);
            }
            Ok(())
        })
    }

    /// Drops the records for which `predicate` is true.
    pub fn filter_not<F>(self, predicate: F) -> KStream<K, V>
    where
        F: Fn(&K, &V) -> bool + Send + Sync + 'static,
    {
        self.transform("filter-not", move |b, out| {
            let r = peek_ref::<K, V>(&b);
            if !predicate(&r.key, &r.value) {
                out.push(b);
            }
            Ok(())
        })
    }

    /// Keeps the records for which `predicate` (over the whole record) is
    /// true.
    pub fn filter_record<F>(self, predicate: F) -> KStream<K, V>
    where
        F: Fn(&Record<K, V>) -> bool + Send + Sync + 'static,
    {
        self.transform("filter", move |b, out| {
            if predicate(peek_ref::<K, V>(&b)) {
                out.push(b);
            }
            Ok(())
        })
    }

    /// Keeps the records for which `predicate` returns `Ok(true)`; an `Err`
    /// is an operator error.
    pub fn try_filter<F, E>(self, predicate: F) -> KStream<K, V>
    where
        F: Fn(&K, &V) -> Result<bool, E> + Send + Sync + 'static,
        E: Into<BoxError>,
    {
        self.transform("filter", move |b, out| {
            let r = peek_ref::<K, V>(&b);
            if predicate(&r.key, &r.value).map_err(op_err)? {
                out.push(b);
            }
            Ok(())
        })
    }

    /// Replaces key and value.
    pub fn map<K2, V2, F>(self, f: F) -> KStream<K2, V2>
    where
        K2: Send + 'static,
        V2: Send + 'static,
        F: Fn(K, V) -> (K2, V2) + Send + Sync + 'static,
    {
        self.transform("map", move |b, out| {
            let (k, v, shell) = take::<K, V>(b).into_parts();
            let (k2, v2) = f(k, v);
            out.push(boxed(shell.with_key_value(k2, v2)));
            Ok(())
        })
    }

    /// Replaces key and value; an `Err` is an operator error.
    pub fn try_map<K2, V2, F, E>(self, f: F) -> KStream<K2, V2>
    where
        K2: Send + 'static,
        V2: Send + 'static,
        F: Fn(K, V) -> Result<(K2, V2), E> + Send + Sync + 'static,
        E: Into<BoxError>,
    {
        self.transform("map", move |b, out| {
            let (k, v, shell) = take::<K, V>(b).into_parts();
            let (k2, v2) = f(k, v).map_err(op_err)?;
            out.push(boxed(shell.with_key_value(k2, v2)));
            Ok(())
        })
    }

    /// Replaces the value.
    pub fn map_values<V2, F>(self, f: F) -> KStream<K, V2>
    where
        V2: Send + 'static,
        F: Fn(V) -> V2 + Send + Sync + 'static,
    {
        self.transform("map-values", move |b, out| {
            let (k, v, shell) = take::<K, V>(b).into_parts();
            out.push(boxed(shell.with_key_value(k, f(v))));
            Ok(())
        })
    }

    /// Replaces the value; an `Err` is an operator error.
    pub fn try_map_values<V2, F, E>(self, f: F) -> KStream<K, V2>
    where
        V2: Send + 'static,
        F: Fn(V) -> Result<V2, E> + Send + Sync + 'static,
        E: Into<BoxError>,
    {
        self.transform("map-values", move |b, out| {
            let (k, v, shell) = take::<K, V>(b).into_parts();
            let v2 = f(v).map_err(op_err)?;
            out.push(boxed(shell.with_key_value(k, v2)));
            Ok(())
        })
    }

    /// Replaces the whole record (key, value, headers, timestamp).
    pub fn map_record<K2, V2, F>(self, f: F) -> KStream<K2, V2>
    where
        K2: Send + 'static,
        V2: Send + 'static,
        F: Fn(Record<K, V>) -> Record<K2, V2> + Send + Sync + 'static,
    {
        self.transform("map-record", move |b, out| {
            out.push(boxed(f(take::<K, V>(b))));
            Ok(())
        })
    }

    /// Zero or more records per record; each output keeps the input's
    /// headers and timestamp.
    pub fn flat_map<K2, V2, I, F>(self, f: F) -> KStream<K2, V2>
    where
        K2: Send + 'static,
        V2: Send + 'static,
        I: IntoIterator<Item = (K2, V2)>,
        F: Fn(K, V) -> I + Send + Sync + 'static,
    {
        self.transform("flat-map", move |b, out| {
            let (k, v, shell) = take::<K, V>(b).into_parts();
            for (k2, v2) in f(k, v) {
                out.push(boxed(shell.derive(k2, v2)));
            }
            Ok(())
        })
    }

    /// Zero or more values per record, each with the input's key.
    pub fn flat_map_values<V2, I, F>(self, f: F) -> KStream<K, V2>
    where
        K: Clone,
        V2: Send + 'static,
        I: IntoIterator<Item = V2>,
        F: Fn(V) -> I + Send + Sync + 'static,
    {
        self.transform("flat-map-values", move |b, out| {
            let (k, v, shell) = take::<K, V>(b).into_parts();
            for v2 in f(v) {
                out.push(boxed(shell.derive(k.clone(), v2)));
            }
            Ok(())
        })
    }

    /// The general operator: zero or more output records made from the whole
    /// record (derive them with [`Record::with_key_value`] or
    /// [`Record::derive`]); an `Err` is an operator error.
    pub fn process<K2, V2, F, E>(self, f: F) -> KStream<K2, V2>
    where
        K2: Send + 'static,
        V2: Send + 'static,
        F: Fn(Record<K, V>) -> Result<Vec<Record<K2, V2>>, E> + Send + Sync + 'static,
        E: Into<BoxError>,
    {
        self.transform("process", move |b, out| {
            let outs = f(take::<K, V>(b)).map_err(op_err)?;
            out.extend(outs.into_iter().map(boxed));
            Ok(())
        })
    }

    /// Replaces the key, computed from key and value.
    pub fn select_key<K2, F>(self, f: F) -> KStream<K2, V>
    where
        K2: Send + 'static,
        F: Fn(&K, &V) -> K2 + Send + Sync + 'static,
    {
        self.transform("select-key", move |b, out| {
            let r = take::<K, V>(b);
            let k2 = f(&r.key, &r.value);
            out.push(boxed(r.with_key(k2)));
            Ok(())
        })
    }

    /// Calls `f` on every record and passes it on unchanged.
    pub fn peek<F>(self, f: F) -> KStream<K, V>
    where
        F: Fn(&K, &V) + Send + Sync + 'static,
    {
        self.transform("peek", move |b, out| {
            let r = peek_ref::<K, V>(&b);
            f(&r.key, &r.value);
            out.push(b);
            Ok(())
        })
    }

    /// Calls `f` on every record: a terminal operation that produces
    /// nothing. Its side effects are not part of the transaction: a record
    /// that is processed again (after a failure or a crash) calls it again.
    pub fn foreach<F>(self, f: F) -> SinkHandle
    where
        F: Fn(K, V) + Send + Sync + 'static,
    {
        let f: SyncFn = Box::new(move |b, _out| {
            let r = take::<K, V>(b);
            f(r.key, r.value);
            Ok(())
        });
        let id = self
            .graph
            .lock()
            .add("foreach", NodeKind::Foreach { f }, &[self.node]);
        SinkHandle {
            graph: self.graph,
            node: id,
        }
    }

    /// Replaces the value by the output of an async call, with at most
    /// `max_in_flight` calls of this operator running at once (per
    /// [`CompiledTopology`](super::CompiledTopology)). See the module docs of
    /// [`topology`](super) for how the runtime drives it.
    pub fn map_async<V2, F, Fut, E>(self, max_in_flight: usize, f: F) -> KStream<K, V2>
    where
        V2: Send + 'static,
        F: Fn(V) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<V2, E>> + Send + 'static,
        E: Into<BoxError>,
    {
        let f = move |b: BoxedRecord| {
            let (k, v, shell) = take::<K, V>(b).into_parts();
            let fut = f(v);
            async move {
                let v2 = fut.await.map_err(op_err)?;
                Ok(boxed(shell.with_key_value(k, v2)))
            }
            .boxed()
        };
        self.then(
            "map-async",
            NodeKind::Async {
                max_in_flight,
                f: Box::new(f),
            },
        )
    }

    /// Replaces the whole record by the output of an async call, with at
    /// most `max_in_flight` calls of this operator running at once.
    pub fn map_record_async<K2, V2, F, Fut, E>(self, max_in_flight: usize, f: F) -> KStream<K2, V2>
    where
        K2: Send + 'static,
        V2: Send + 'static,
        F: Fn(Record<K, V>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Record<K2, V2>, E>> + Send + 'static,
        E: Into<BoxError>,
    {
        let f = move |b: BoxedRecord| {
            let fut = f(take::<K, V>(b));
            async move { fut.await.map(boxed).map_err(op_err) }.boxed()
        };
        self.then(
            "map-async",
            NodeKind::Async {
                max_in_flight,
                f: Box::new(f),
            },
        )
    }

    /// Routes every record to the first branch whose predicate is true, or
    /// to the default branch. Name branches with [`Split::branch`], end with
    /// [`Split::default_branch`] or [`Split::no_default_branch`].
    pub fn split(self) -> Split<K, V> {
        let id = self.graph.lock().add(
            "split",
            NodeKind::Split {
                routes: Vec::new(),
                default: None,
                finished: false,
            },
            &[self.node],
        );
        Split {
            graph: self.graph,
            node: id,
            branches: Vec::new(),
            _types: PhantomData,
        }
    }

    /// The records of both streams, each processed as it comes.
    pub fn merge(self, other: KStream<K, V>) -> KStream<K, V> {
        let same = std::sync::Arc::ptr_eq(&self.graph, &other.graph);
        let mut g = self.graph.lock();
        let parents: Vec<NodeId> = if same {
            vec![self.node, other.node]
        } else {
            vec![self.node]
        };
        let id = g.add("merge", NodeKind::Merge, &parents);
        g.nodes[id].foreign = !same;
        drop(g);
        KStream::from_parts(self.graph.clone(), id)
    }

    /// Writes every record to `topic`, with its key, headers and timestamp;
    /// the producer picks the partition.
    pub fn to(
        self,
        topic: impl Into<String>,
        key_serde: impl Serializer<K>,
        value_serde: impl Serializer<V>,
    ) -> SinkHandle {
        let topic = topic.into();
        let key_format = key_serde.format();
        let value_format = value_serde.format();
        let t = topic.clone();
        let f: SinkFn = Box::new(move |b| {
            let r = take::<K, V>(b);
            let key = key_serde.serialize(&t, &r.key).map_err(ser_err("key"))?;
            let value = value_serde
                .serialize(&t, &r.value)
                .map_err(ser_err("value"))?;
            Ok(OutputRecord {
                topic: t.clone(),
                key,
                value,
                headers: r.headers.into_vec(),
                partition: None,
                timestamp: Some(r.timestamp),
            })
        });
        self.sink(Some(topic), key_format, value_format, f)
    }

    /// Writes every record where `choose` says: topic, and optionally
    /// partition, timestamp, headers and a null key ([`SinkRecord`]).
    pub fn to_dynamic<F>(
        self,
        key_serde: impl Serializer<K>,
        value_serde: impl Serializer<V>,
        choose: F,
    ) -> SinkHandle
    where
        F: Fn(&Record<K, V>) -> SinkRecord + Send + Sync + 'static,
    {
        let key_format = key_serde.format();
        let value_format = value_serde.format();
        let f: SinkFn = Box::new(move |b| {
            let r = take::<K, V>(b);
            let choice = choose(&r);
            if !super::builder::is_valid_topic_name(&choice.topic) {
                return Err(NodeError::operator(format!(
                    "invalid topic name '{}' chosen for the record",
                    choice.topic
                )));
            }
            let key = if choice.null_key {
                None
            } else {
                key_serde
                    .serialize(&choice.topic, &r.key)
                    .map_err(ser_err("key"))?
            };
            let value = value_serde
                .serialize(&choice.topic, &r.value)
                .map_err(ser_err("value"))?;
            let mut headers = choice.replace_headers.unwrap_or(r.headers).into_vec();
            headers.extend(choice.add_headers);
            let timestamp = match choice.timestamp {
                SinkTimestamp::Record => Some(r.timestamp),
                SinkTimestamp::Producer => None,
                SinkTimestamp::Set(t) => Some(t),
            };
            Ok(OutputRecord {
                topic: choice.topic,
                key,
                value,
                headers,
                partition: choice.partition,
                timestamp,
            })
        });
        self.sink(None, key_format, value_format, f)
    }

    fn sink(
        self,
        topic: Option<String>,
        key_format: String,
        value_format: String,
        f: SinkFn,
    ) -> SinkHandle {
        let id = self.graph.lock().add(
            "sink",
            NodeKind::Sink {
                topic,
                key_format,
                value_format,
                f,
            },
            &[self.node],
        );
        SinkHandle {
            graph: self.graph,
            node: id,
        }
    }
}

fn ser_err(part: &'static str) -> impl Fn(super::serdes::SerdeError) -> NodeError {
    move |e| NodeError {
        kind: ErrorKind::Serialization,
        message: format!("{part}: {e}"),
        attempts: 1,
    }
}

/// The end of a stream: a sink or a `foreach`. Name it or give it its own
/// error policy (for serialization errors and errors of the `to_dynamic`
/// closure).
pub struct SinkHandle {
    graph: SharedGraph,
    node: NodeId,
}

impl std::fmt::Debug for SinkHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SinkHandle")
            .field("node", &self.node)
            .finish()
    }
}

impl SinkHandle {
    /// Names the sink.
    pub fn named(self, name: impl Into<String>) -> Self {
        self.graph.lock().nodes[self.node].explicit_name = Some(name.into());
        self
    }

    /// The error policy of the sink.
    pub fn on_error(self, policy: ErrorPolicy) -> Self {
        self.graph.lock().nodes[self.node].policy = Some(policy);
        self
    }
}

/// A split being defined: branches are tried in the order they are added;
/// a record goes to the first whose predicate is true (Kafka Streams'
/// `BranchedKStream`).
pub struct Split<K, V> {
    graph: SharedGraph,
    node: NodeId,
    branches: Vec<(String, NodeId)>,
    _types: PhantomData<fn() -> (K, V)>,
}

impl<K, V> Split<K, V>
where
    K: Send + 'static,
    V: Send + 'static,
{
    /// Names the split node (branch nodes are named `<split>-<branch>`).
    pub fn named(self, name: impl Into<String>) -> Self {
        self.graph.lock().nodes[self.node].explicit_name = Some(name.into());
        self
    }

    /// The error policy for errors (panics) of the predicates.
    pub fn on_error(self, policy: ErrorPolicy) -> Self {
        self.graph.lock().nodes[self.node].policy = Some(policy);
        self
    }

    /// A branch for the records with `predicate(key, value)` true (and no
    /// earlier branch's).
    pub fn branch<F>(self, name: impl Into<String>, predicate: F) -> Self
    where
        F: Fn(&K, &V) -> bool + Send + Sync + 'static,
    {
        self.branch_record(name, move |r: &Record<K, V>| predicate(&r.key, &r.value))
    }

    /// A branch for the records with `predicate(record)` true (and no
    /// earlier branch's).
    pub fn branch_record<F>(mut self, name: impl Into<String>, predicate: F) -> Self
    where
        F: Fn(&Record<K, V>) -> bool + Send + Sync + 'static,
    {
        let name = name.into();
        let mut g = self.graph.lock();
        let id = g.add(
            "branch",
            NodeKind::Branch {
                branch: name.clone(),
            },
            &[self.node],
        );
        if let NodeKind::Split { routes, .. } = &mut g.nodes[self.node].kind {
            routes.push(Route {
                branch: name.clone(),
                predicate: Box::new(move |b| Ok(predicate(peek_ref::<K, V>(b)))),
                node: id,
            });
        }
        drop(g);
        self.branches.push((name, id));
        self
    }

    /// Ends the split: records that match no branch go to the branch `name`.
    pub fn default_branch(mut self, name: impl Into<String>) -> Branches<K, V> {
        let name = name.into();
        let mut g = self.graph.lock();
        let id = g.add(
            "branch",
            NodeKind::Branch {
                branch: name.clone(),
            },
            &[self.node],
        );
        if let NodeKind::Split {
            default, finished, ..
        } = &mut g.nodes[self.node].kind
        {
            *default = Some((name.clone(), id));
            *finished = true;
        }
        drop(g);
        self.branches.push((name, id));
        self.finish()
    }

    /// Ends the split: records that match no branch are dropped.
    pub fn no_default_branch(self) -> Branches<K, V> {
        if let NodeKind::Split { finished, .. } = &mut self.graph.lock().nodes[self.node].kind {
            *finished = true;
        }
        self.finish()
    }

    fn finish(self) -> Branches<K, V> {
        let streams = self
            .branches
            .into_iter()
            .map(|(name, id)| (name, KStream::from_parts(self.graph.clone(), id)))
            .collect();
        Branches { streams }
    }
}

/// The streams of the branches of a split, by branch name. Every branch
/// must be given a downstream (the build refuses a branch without one).
pub struct Branches<K, V> {
    streams: std::collections::BTreeMap<String, KStream<K, V>>,
}

impl<K, V> std::fmt::Debug for Branches<K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.streams.keys()).finish()
    }
}

impl<K, V> Branches<K, V> {
    /// Takes the stream of branch `name`.
    pub fn take(&mut self, name: &str) -> Option<KStream<K, V>> {
        self.streams.remove(name)
    }

    /// The names of the branches not taken yet, sorted.
    pub fn names(&self) -> Vec<&str> {
        self.streams.keys().map(String::as_str).collect()
    }

    /// All streams by branch name.
    pub fn into_map(self) -> std::collections::BTreeMap<String, KStream<K, V>> {
        self.streams
    }
}
