//! The cluster metadata cache: brokers, topics (names and ids), partition
//! leaders, and the coordinators found through FindCoordinator.
//!
//! # Design
//!
//! [`Metadata`] owns the [`BrokerPool`] and a snapshot of the cluster
//! ([`Cluster`]). It starts from `bootstrap.servers`, entered in the pool
//! under negative node ids (-1, -2, ...) as Kafka's clients do; once a
//! Metadata response names the brokers, requests go to them by node id.
//!
//! The cache is refreshed on demand: when a topic is not known yet
//! ([`Metadata::wait_for_topic`]), and when a request failed with an error
//! that [`ClientError::invalidates_metadata`] says means the leader moved or
//! the topic is not where we thought (NOT_LEADER_OR_FOLLOWER,
//! UNKNOWN_TOPIC_OR_PARTITION, network failures, ...): callers then call
//! [`Metadata::invalidate`] and the next lookup refreshes. Whether an error
//! may be retried at all is decided only by [`ClientError::is_retriable`]
//! (Kafka's error table); this module never decides it by itself.
//!
//! Refreshes are serialized: concurrent callers that need a refresh wait for
//! the one in progress rather than sending their own. A refresh always asks
//! for every topic already cached plus the ones wanted now, so one response
//! replaces the whole snapshot.
//!
//! Applying a response ([`Cluster::apply`]) is a pure function of the old
//! snapshot and the response, tested without I/O.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    FindCoordinatorRequest, MetadataRequest, MetadataResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use parking_lot::RwLock;
use tokio::time::Instant;
use uuid::Uuid;

use super::backoff::{Backoff, BackoffConfig};
use super::broker_connection::{BrokerConnection, BrokerPool};
use super::config::ConnectionConfig;
use super::error::ClientError;
use crate::protocol::ErrorCode;
use crate::protocol::api::ApiRequest;

/// A broker as named by the metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerNode {
    /// Node id.
    pub node_id: i32,
    /// Host name.
    pub host: String,
    /// Port.
    pub port: i32,
    /// Rack, if configured.
    pub rack: Option<String>,
}

impl BrokerNode {
    /// `host:port`.
    pub fn address(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }
}

/// One partition of a topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionMetadata {
    /// Partition index.
    pub partition: i32,
    /// Leader node id, -1 when there is none.
    pub leader_id: i32,
    /// Leader epoch.
    pub leader_epoch: i32,
    /// The partition-level error of the last response.
    pub error: ErrorCode,
}

/// One topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicMetadata {
    /// Name.
    pub name: String,
    /// Topic id (nil when the broker does not report ids).
    pub topic_id: Uuid,
    /// The topic-level error of the last response.
    pub error: ErrorCode,
    /// Partitions, sorted by index.
    pub partitions: Vec<PartitionMetadata>,
}

impl TopicMetadata {
    /// Number of partitions.
    pub fn partition_count(&self) -> i32 {
        self.partitions.len() as i32
    }

    /// The partition with index `p`.
    pub fn partition(&self, p: i32) -> Option<&PartitionMetadata> {
        self.partitions.iter().find(|m| m.partition == p)
    }

    /// Partitions that currently have a leader.
    pub fn available_partitions(&self) -> Vec<i32> {
        self.partitions
            .iter()
            .filter(|p| p.leader_id >= 0)
            .map(|p| p.partition)
            .collect()
    }
}

/// A snapshot of what the client knows about the cluster.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Cluster {
    /// The cluster id.
    pub cluster_id: Option<String>,
    /// The controller's node id (-1 when unknown).
    pub controller_id: i32,
    /// Brokers by node id.
    pub brokers: BTreeMap<i32, BrokerNode>,
    /// Topics by name.
    pub topics: HashMap<String, Arc<TopicMetadata>>,
}

impl Cluster {
    /// The snapshot after a Metadata response for `requested` topics (`None`
    /// = all topics): brokers and controller are replaced; each topic in the
    /// response replaces its entry; a requested topic answered with
    /// UNKNOWN_TOPIC_OR_PARTITION is removed; topics not in the response are
    /// kept when only some were requested and dropped when all were.
    pub fn apply(&self, resp: &MetadataResponse, requested: Option<&BTreeSet<String>>) -> Cluster {
        let brokers = resp
            .brokers
            .iter()
            .map(|b| {
                (
                    b.node_id.0,
                    BrokerNode {
                        node_id: b.node_id.0,
                        host: b.host.to_string(),
                        port: b.port,
                        rack: b.rack.as_ref().map(|r| r.to_string()),
                    },
                )
            })
            .collect();
        let mut topics = if requested.is_some() {
            self.topics.clone()
        } else {
            HashMap::new()
        };
        for t in &resp.topics {
            let Some(name) = t.name.as_ref().map(|n| n.0.to_string()) else {
                continue;
            };
            let error = ErrorCode(t.error_code);
            if error == ErrorCode::UNKNOWN_TOPIC_OR_PARTITION {
                topics.remove(&name);
                continue;
            }
            let mut partitions: Vec<PartitionMetadata> = t
                .partitions
                .iter()
                .map(|p| PartitionMetadata {
                    partition: p.partition_index,
                    leader_id: p.leader_id.0,
                    leader_epoch: p.leader_epoch,
                    error: ErrorCode(p.error_code),
                })
                .collect();
            partitions.sort_by_key(|p| p.partition);
            topics.insert(
                name.clone(),
                Arc::new(TopicMetadata {
                    name,
                    topic_id: t.topic_id,
                    error,
                    partitions,
                }),
            );
        }
        Cluster {
            cluster_id: resp.cluster_id.as_ref().map(|c| c.to_string()),
            controller_id: resp.controller_id.0,
            brokers,
            topics,
        }
    }

    /// The topic named by `id`.
    pub fn topic_by_id(&self, id: Uuid) -> Option<&Arc<TopicMetadata>> {
        self.topics.values().find(|t| t.topic_id == id)
    }
}

/// The metadata cache and the connections it routes with.
pub struct Metadata {
    pool: BrokerPool,
    bootstrap: Vec<String>,
    cluster: RwLock<Cluster>,
    stale: parking_lot::Mutex<BTreeSet<String>>,
    refresh_lock: tokio::sync::Mutex<()>,
    retry_backoff: BackoffConfig,
    next_node: AtomicUsize,
    /// Counts the snapshots installed: a caller that kept a topic's
    /// metadata knows it is still current while this has not moved.
    generation: AtomicU64,
}

impl std::fmt::Debug for Metadata {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metadata")
            .field("bootstrap", &self.bootstrap)
            .field("cluster", &*self.cluster.read())
            .finish()
    }
}

impl Metadata {
    /// A cache reaching the cluster over TCP through `bootstrap` servers.
    pub fn new(bootstrap: Vec<String>, connection: ConnectionConfig) -> Self {
        Self::with_pool(bootstrap, BrokerPool::tcp(connection))
    }

    /// A cache using `pool` (e.g. one with scripted connectors in tests).
    pub fn with_pool(bootstrap: Vec<String>, pool: BrokerPool) -> Self {
        Self {
            pool,
            bootstrap,
            cluster: RwLock::new(Cluster {
                controller_id: -1,
                ..Cluster::default()
            }),
            stale: parking_lot::Mutex::new(BTreeSet::new()),
            refresh_lock: tokio::sync::Mutex::new(()),
            retry_backoff: BackoffConfig::retry(),
            next_node: AtomicUsize::new(0),
            generation: AtomicU64::new(0),
        }
    }

    /// Sets the spacing of refresh retries (`retry.backoff.ms`).
    pub fn with_retry_backoff(mut self, b: BackoffConfig) -> Self {
        self.retry_backoff = b;
        self
    }

    /// The connection pool.
    pub fn pool(&self) -> &BrokerPool {
        &self.pool
    }

    /// A copy of the current snapshot.
    pub fn cluster(&self) -> Cluster {
        self.cluster.read().clone()
    }

    /// How many snapshots were installed so far. Read it before
    /// [`Metadata::topic`]: while it has not moved, the answer has not
    /// either (the producer keeps the last topic it sent to on that basis).
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Installs a new snapshot.
    fn install(&self, next: Cluster) {
        let mut cluster = self.cluster.write();
        *cluster = next;
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// The cached topic, if any (no refresh).
    pub fn topic(&self, name: &str) -> Option<Arc<TopicMetadata>> {
        self.cluster.read().topics.get(name).cloned()
    }

    /// Marks `topic` stale: the next [`Metadata::wait_for_topic`] refreshes
    /// it. Call after an error for which
    /// [`ClientError::invalidates_metadata`] holds.
    pub fn invalidate(&self, topic: &str) {
        self.stale.lock().insert(topic.to_string());
    }

    /// Whether `topic` was marked stale and not refreshed since.
    pub fn is_stale(&self, topic: &str) -> bool {
        self.stale.lock().contains(topic)
    }

    /// The connection to broker `node_id`, if the metadata names it.
    pub fn broker(&self, node_id: i32) -> Option<Arc<BrokerConnection>> {
        let addr = self.cluster.read().brokers.get(&node_id)?.address();
        Some(self.pool.broker(node_id, &addr))
    }

    /// The leader of `topic`/`partition` in the cached metadata.
    pub fn leader(&self, topic: &str, partition: i32) -> Option<Arc<BrokerConnection>> {
        let leader = self.topic(topic)?.partition(partition)?.leader_id;
        if leader < 0 {
            return None;
        }
        self.broker(leader)
    }

    /// Some broker to send a cluster-wide request to: the known brokers in
    /// turn, or the bootstrap servers before any metadata arrived.
    pub fn any_broker(&self) -> Result<Arc<BrokerConnection>, ClientError> {
        let n = self.next_node.fetch_add(1, Ordering::Relaxed);
        let known: Vec<BrokerNode> = self.cluster.read().brokers.values().cloned().collect();
        if !known.is_empty() {
            let b = &known[n % known.len()];
            return Ok(self.pool.broker(b.node_id, &b.address()));
        }
        if self.bootstrap.is_empty() {
            return Err(ClientError::Poisoned(
                "no bootstrap.servers configured".into(),
            ));
        }
        let i = n % self.bootstrap.len();
        Ok(self.pool.broker(-(i as i32) - 1, &self.bootstrap[i]))
    }

    /// The controller (for admin requests), or any broker when unknown.
    pub async fn controller(&self) -> Result<Arc<BrokerConnection>, ClientError> {
        if self.cluster.read().brokers.is_empty() {
            self.refresh(&[]).await?;
        }
        let id = self.cluster.read().controller_id;
        match self.broker(id) {
            Some(b) => Ok(b),
            None => self.any_broker(),
        }
    }

    /// Sends `req` to some broker, trying each known (or bootstrap) broker
    /// once on a network failure.
    pub async fn send_any<R: ApiRequest>(&self, req: &R) -> Result<R::Response, ClientError> {
        let tries = self
            .bootstrap
            .len()
            .max(self.cluster.read().brokers.len())
            .max(1);
        let mut last = None;
        for _ in 0..tries {
            let b = self.any_broker()?;
            match b.send(req).await {
                Ok(r) => return Ok(r),
                Err(e) if e.is_retriable() => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or(ClientError::Closed))
    }

    /// Fetches metadata for `topics` (plus every topic already cached) and
    /// replaces the snapshot. An empty `topics` with an empty cache asks for
    /// brokers only.
    pub async fn refresh(&self, topics: &[&str]) -> Result<(), ClientError> {
        let _guard = self.refresh_lock.lock().await;
        let mut wanted: BTreeSet<String> = self.cluster.read().topics.keys().cloned().collect();
        wanted.extend(topics.iter().map(|t| t.to_string()));
        let req = MetadataRequest::default()
            .with_topics(Some(
                wanted
                    .iter()
                    .map(|t| {
                        MetadataRequestTopic::default()
                            .with_name(Some(TopicName(StrBytes::from_string(t.clone()))))
                    })
                    .collect(),
            ))
            .with_allow_auto_topic_creation(false);
        let resp = self.send_any(&req).await?;
        ClientError::check("Metadata", resp.error_code, None)?;
        let next = self.cluster.read().apply(&resp, Some(&wanted));
        {
            let mut stale = self.stale.lock();
            for t in &wanted {
                stale.remove(t);
            }
        }
        let ids: BTreeSet<i32> = next.brokers.keys().copied().collect();
        self.install(next);
        // Forget brokers that left, but keep the bootstrap entries.
        self.pool.retain(|id| id < 0 || ids.contains(&id));
        Ok(())
    }

    /// Refreshes the metadata of every topic of the cluster (Metadata with
    /// a null topic list, no auto-creation): the way to learn topics known
    /// only by id (a share group's assignment).
    pub async fn refresh_all(&self) -> Result<(), ClientError> {
        let _guard = self.refresh_lock.lock().await;
        let req = MetadataRequest::default()
            .with_topics(None)
            .with_allow_auto_topic_creation(false);
        let resp = self.send_any(&req).await?;
        ClientError::check("Metadata", resp.error_code, None)?;
        let next = self.cluster.read().apply(&resp, None);
        self.stale.lock().clear();
        let ids: BTreeSet<i32> = next.brokers.keys().copied().collect();
        self.install(next);
        self.pool.retain(|id| id < 0 || ids.contains(&id));
        Ok(())
    }

    /// The metadata of `topic` with a leader for every partition, refreshing
    /// as needed until `timeout`. Retriable topic errors (unknown topic,
    /// leader not available) are retried with backoff; others are returned.
    pub async fn wait_for_topic(
        &self,
        topic: &str,
        timeout: Duration,
    ) -> Result<Arc<TopicMetadata>, ClientError> {
        let deadline = Instant::now() + timeout;
        let mut backoff = Backoff::new(self.retry_backoff);
        loop {
            let stale = self.stale.lock().contains(topic);
            if !stale && let Some(t) = self.topic(topic) {
                if t.error.is_err() && !t.error.is_retriable() {
                    return Err(ClientError::Broker {
                        api: "Metadata",
                        code: t.error,
                        message: Some(format!("topic {topic}")),
                    });
                }
                if t.error.is_ok()
                    && !t.partitions.is_empty()
                    && t.partitions.iter().all(|p| p.leader_id >= 0)
                {
                    return Ok(t);
                }
            }
            let last = match self.refresh(&[topic]).await {
                Ok(()) => match self.topic(topic) {
                    Some(t)
                        if t.error.is_ok()
                            && !t.partitions.is_empty()
                            && t.partitions.iter().all(|p| p.leader_id >= 0) =>
                    {
                        return Ok(t);
                    }
                    Some(t) if t.error.is_err() && !t.error.is_retriable() => {
                        return Err(ClientError::Broker {
                            api: "Metadata",
                            code: t.error,
                            message: Some(format!("topic {topic}")),
                        });
                    }
                    Some(t) if t.error.is_err() => ClientError::Broker {
                        api: "Metadata",
                        code: t.error,
                        message: Some(format!("topic {topic}")),
                    },
                    Some(_) => ClientError::Broker {
                        api: "Metadata",
                        code: ErrorCode::LEADER_NOT_AVAILABLE,
                        message: Some(format!("topic {topic}")),
                    },
                    None => ClientError::Broker {
                        api: "Metadata",
                        code: ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
                        message: Some(format!("topic {topic}")),
                    },
                },
                Err(e) if e.is_retriable() => e,
                Err(e) => return Err(e),
            };
            let wait = backoff.next_delay();
            if Instant::now() + wait >= deadline {
                return Err(last);
            }
            tokio::time::sleep(wait).await;
        }
    }

    /// Finds the coordinator for `key` (`key_type` 0 = group, 1 =
    /// transaction, 2 = share group) with FindCoordinator, retrying
    /// COORDINATOR_NOT_AVAILABLE / COORDINATOR_LOAD_IN_PROGRESS until
    /// `timeout`.
    pub async fn find_coordinator(
        &self,
        key_type: i8,
        key: &str,
        timeout: Duration,
    ) -> Result<Arc<BrokerConnection>, ClientError> {
        let deadline = Instant::now() + timeout;
        let mut backoff = Backoff::new(self.retry_backoff);
        loop {
            let result = match self.any_broker() {
                Ok(b) => find_coordinator_on(&b, key_type, key)
                    .await
                    .map(|(node, address)| self.pool.broker(node, &address)),
                Err(e) => Err(e),
            };
            match result {
                Ok(b) => return Ok(b),
                Err(e) if e.is_retriable() && Instant::now() < deadline => {
                    let wait = backoff.next_delay();
                    if Instant::now() + wait >= deadline {
                        return Err(e);
                    }
                    tokio::time::sleep(wait).await;
                }
                Err(e) => return Err(e),
            }
        }
    }
}

/// One FindCoordinator exchange with `broker`, the client's only one (the
/// metadata cache and the share consumer's own lookup both use it):
/// `key_type` 0 = group (share groups too), 1 = transaction, 2 = share
/// state. Versions 4 and later carry the key in `coordinatorKeys` and the
/// answer in `coordinators`, older ones at the top level. Returns the
/// coordinator's node id and `host:port`; an error code in the answer is
/// returned as [`ClientError::check`] judges it.
pub(crate) async fn find_coordinator_on(
    broker: &BrokerConnection,
    key_type: i8,
    key: &str,
) -> Result<(i32, String), ClientError> {
    let conn = broker.connection().await?;
    let version = conn
        .versions()
        .version_for(FindCoordinatorRequest::API_KEY)?;
    let key = StrBytes::from_string(key.to_string());
    let req = FindCoordinatorRequest::default().with_key_type(key_type);
    let req = if version >= 4 {
        req.with_coordinator_keys(vec![key])
    } else {
        req.with_key(key)
    };
    let resp = conn.send_with_version(&req, version).await?;
    let (code, msg, node, host, port) = if version >= 4 {
        let c = resp.coordinators.first().ok_or_else(|| {
            ClientError::Poisoned("FindCoordinator answered no coordinator".into())
        })?;
        (
            c.error_code,
            c.error_message.clone(),
            c.node_id.0,
            c.host.clone(),
            c.port,
        )
    } else {
        (
            resp.error_code,
            resp.error_message.clone(),
            resp.node_id.0,
            resp.host.clone(),
            resp.port,
        )
    };
    ClientError::check("FindCoordinator", code, msg.map(|m| m.to_string()))?;
    Ok((node, format!("{}:{}", host.as_str(), port)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::metadata_response::{
        MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
    };
    use kafka_protocol::messages::{BrokerId, FindCoordinatorResponse};

    fn topic(name: &str, code: i16, leaders: &[i32]) -> MetadataResponseTopic {
        MetadataResponseTopic::default()
            .with_name(Some(TopicName(StrBytes::from_string(name.into()))))
            .with_error_code(code)
            .with_topic_id(Uuid::from_u128(name.as_bytes()[0] as u128))
            .with_partitions(
                leaders
                    .iter()
                    .enumerate()
                    .map(|(i, &l)| {
                        MetadataResponsePartition::default()
                            .with_partition_index(i as i32)
                            .with_leader_id(BrokerId(l))
                            .with_leader_epoch(3)
                    })
                    .collect(),
            )
    }

    fn resp(topics: Vec<MetadataResponseTopic>) -> MetadataResponse {
        MetadataResponse::default()
            .with_brokers(vec![
                MetadataResponseBroker::default()
                    .with_node_id(BrokerId(1))
                    .with_host(StrBytes::from_static_str("h1"))
                    .with_port(9092),
            ])
            .with_controller_id(BrokerId(1))
            .with_topics(topics)
    }

    #[test]
    fn apply_replaces_brokers_and_requested_topics() {
        let c0 = Cluster::default();
        let wanted: BTreeSet<String> = ["a".to_string(), "b".to_string()].into();
        let c1 = c0.apply(
            &resp(vec![topic("a", 0, &[1, 1]), topic("b", 0, &[1])]),
            Some(&wanted),
        );
        assert_eq!(c1.brokers[&1].address(), "h1:9092");
        assert_eq!(c1.topics["a"].partition_count(), 2);
        assert_eq!(c1.topics["a"].partition(1).unwrap().leader_epoch, 3);
        assert_eq!(
            c1.topic_by_id(Uuid::from_u128(b'a' as u128)).unwrap().name,
            "a"
        );
        // b deleted: the refresh answers UNKNOWN_TOPIC_OR_PARTITION.
        let only_b: BTreeSet<String> = ["b".to_string()].into();
        let c2 = c1.apply(&resp(vec![topic("b", 3, &[])]), Some(&only_b));
        assert!(
            c2.topics.contains_key("a"),
            "topics not asked about are kept"
        );
        assert!(!c2.topics.contains_key("b"));
        // A leaderless partition is kept with leader -1.
        let c3 = c2.apply(&resp(vec![topic("a", 0, &[1, -1])]), Some(&only_b));
        assert_eq!(c3.topics["a"].available_partitions(), vec![0]);
        // An all-topics response drops topics it does not list.
        let c4 = c3.apply(&resp(vec![topic("c", 0, &[1])]), None);
        assert_eq!(c4.topics.keys().collect::<Vec<_>>(), vec!["c"]);
    }

    #[test]
    fn stale_metadata_errors_come_from_one_table() {
        for code in [6i16, 3, 5, 74, 100] {
            let e = ClientError::check("Produce", code, None).unwrap_err();
            assert!(e.invalidates_metadata(), "{e}");
        }
        for code in [29i16, 90, 45, 10] {
            assert!(
                !ClientError::check("Produce", code, None)
                    .unwrap_err()
                    .invalidates_metadata()
            );
        }
        assert!(ClientError::Poisoned("eof".into()).invalidates_metadata());
    }

    /// One `find_coordinator_on` against a scripted broker offering
    /// FindCoordinator up to `max_version`, which answers with `answer`.
    async fn find_on(
        max_version: i16,
        answer: impl Fn(&FindCoordinatorRequest, i16) -> FindCoordinatorResponse + Send + Sync + 'static,
    ) -> Result<(i32, String), ClientError> {
        use crate::client::broker_connection::Connector;
        use crate::client::connection::Connection;
        use crate::client::test_peer::{ScriptedPeer, all_apis_except};
        use crate::protocol::api::AnyRequest;
        use kafka_protocol::messages::RequestKind;

        let answer = Arc::new(answer);
        let connector: Connector = Arc::new(move |config: &ConnectionConfig| {
            let (answer, config) = (answer.clone(), config.clone());
            Box::pin(async move {
                let (client, server) = tokio::io::duplex(1 << 16);
                tokio::spawn(async move {
                    let key = FindCoordinatorRequest::API_KEY;
                    let mut apis = all_apis_except(&[key]);
                    apis.push((key, 0, max_version));
                    let mut peer = ScriptedPeer::new(server);
                    peer.handshake(&apis).await;
                    let req = peer.recv().await;
                    let (v, cid) = (req.header.api_version, req.header.correlation_id);
                    let AnyRequest::Kafka(k) = req.request else {
                        panic!("unexpected request")
                    };
                    let RequestKind::FindCoordinator(r) = *k else {
                        panic!("expected FindCoordinator")
                    };
                    peer.respond::<FindCoordinatorRequest>(&answer(&r, v), v, cid)
                        .await;
                });
                Connection::new(client, &config).await
            })
        });
        let b = BrokerConnection::with_connector(
            0,
            "scripted:1",
            ConnectionConfig::default(),
            connector,
        );
        find_coordinator_on(&b, 0, "g").await
    }

    #[tokio::test]
    async fn find_coordinator_reads_both_shapes_of_the_answer() {
        use kafka_protocol::messages::find_coordinator_response::Coordinator;
        // v4 and later: the key in coordinatorKeys, the answer in coordinators.
        let got = find_on(4, |r, v| {
            assert_eq!(v, 4);
            assert_eq!(r.coordinator_keys, [StrBytes::from_static_str("g")]);
            FindCoordinatorResponse::default().with_coordinators(vec![
                Coordinator::default()
                    .with_key(StrBytes::from_static_str("g"))
                    .with_node_id(BrokerId(7))
                    .with_host(StrBytes::from_static_str("h"))
                    .with_port(9092),
            ])
        })
        .await;
        assert_eq!(got.unwrap(), (7, "h:9092".to_string()));
        // Before v4: the key and the answer at the top level.
        let got = find_on(3, |r, v| {
            assert_eq!(v, 3);
            assert_eq!(r.key.as_str(), "g");
            FindCoordinatorResponse::default()
                .with_node_id(BrokerId(5))
                .with_host(StrBytes::from_static_str("old"))
                .with_port(9093)
        })
        .await;
        assert_eq!(got.unwrap(), (5, "old:9093".to_string()));
        // An error in the answer is returned with its code.
        let got = find_on(4, |_, _| {
            FindCoordinatorResponse::default().with_coordinators(vec![
                Coordinator::default()
                    .with_key(StrBytes::from_static_str("g"))
                    .with_error_code(ErrorCode::COORDINATOR_NOT_AVAILABLE.0),
            ])
        })
        .await;
        assert!(
            matches!(
                got,
                Err(ClientError::Broker { code, .. }) if code == ErrorCode::COORDINATOR_NOT_AVAILABLE
            ),
            "{got:?}"
        );
        // A v4 answer without a coordinator is not read as node 0.
        let got = find_on(4, |_, _| FindCoordinatorResponse::default()).await;
        assert!(matches!(got, Err(ClientError::Poisoned(_))), "{got:?}");
    }
}
