//! The consumer's own minimal cluster lookup: the group coordinator
//! (FindCoordinator, key type 0 GROUP) and, for the assigned topic ids,
//! topic names and partition leaders (Metadata for all topics, filtered by
//! id; share consumers never auto-create topics).
//!
//! It sits behind the [`ClusterLookup`] trait, which the shared metadata
//! cache ([`Metadata`]) also implements:
//! [`ShareConsumer::with_metadata`](super::ShareConsumer::with_metadata)
//! builds a consumer over a cache shared with a producer or admin client.

use std::collections::HashMap;
use std::sync::Arc;

use futures::future::BoxFuture;
use kafka_protocol::messages::MetadataRequest;
use uuid::Uuid;

use crate::client::broker_connection::{BrokerConnection, BrokerPool};
use crate::client::error::ClientError;
use crate::client::metadata::{Cluster, Metadata, TopicMetadata, find_coordinator_on};

/// A broker's node id and `host:port`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BrokerAddress {
    /// Node id.
    pub node_id: i32,
    /// `host:port`.
    pub address: String,
}

/// Topics by id, and the brokers they live on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterView {
    /// Known topics by id: names and partition leaders, as the metadata
    /// cache holds them.
    pub topics: HashMap<Uuid, Arc<TopicMetadata>>,
    /// Brokers by node id.
    pub brokers: HashMap<i32, String>,
}

impl ClusterView {
    /// The leader of `partition` of `topic_id`, if it is a known broker.
    pub fn leader(&self, topic_id: Uuid, partition: i32) -> Option<BrokerAddress> {
        let node_id = self.topics.get(&topic_id)?.partition(partition)?.leader_id;
        let address = self.brokers.get(&node_id)?.clone();
        Some(BrokerAddress { node_id, address })
    }
}

/// Coordinator and leader lookup, swappable for the shared metadata cache.
pub trait ClusterLookup: Send + Sync {
    /// The coordinator of share group `group_id`.
    fn find_coordinator<'a>(
        &'a self,
        group_id: &'a str,
    ) -> BoxFuture<'a, Result<BrokerAddress, ClientError>>;
    /// Names and leaders of `topic_ids` (unknown ids are left out).
    fn describe_topics<'a>(
        &'a self,
        topic_ids: &'a [Uuid],
    ) -> BoxFuture<'a, Result<ClusterView, ClientError>>;
}

/// [`ClusterLookup`] asking the brokers it knows, bootstrap servers first
/// time (under node ids -1, -2, ... in the pool, as Kafka's clients do).
pub struct BootstrapLookup {
    pool: Arc<BrokerPool>,
    bootstrap: Vec<String>,
    known: parking_lot::Mutex<HashMap<i32, String>>,
}

impl std::fmt::Debug for BootstrapLookup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BootstrapLookup")
            .field("bootstrap", &self.bootstrap)
            .finish()
    }
}

impl BootstrapLookup {
    /// A lookup through `pool`, starting from `bootstrap` addresses.
    pub fn new(pool: Arc<BrokerPool>, bootstrap: Vec<String>) -> Self {
        Self {
            pool,
            bootstrap,
            known: parking_lot::Mutex::new(HashMap::new()),
        }
    }

    fn candidates(&self) -> Vec<Arc<BrokerConnection>> {
        let mut known: Vec<(i32, String)> = self
            .known
            .lock()
            .iter()
            .map(|(k, v)| (*k, v.clone()))
            .collect();
        known.sort();
        let mut out: Vec<Arc<BrokerConnection>> = known
            .iter()
            .map(|(id, a)| self.pool.broker(*id, a))
            .collect();
        for (i, a) in self.bootstrap.iter().enumerate() {
            out.push(self.pool.broker(-(i as i32) - 1, a));
        }
        out
    }

    async fn any_broker<T, F>(&self, mut f: F) -> Result<T, ClientError>
    where
        F: for<'c> FnMut(Arc<BrokerConnection>) -> BoxFuture<'static, Result<T, ClientError>>,
    {
        let mut last = ClientError::Poisoned("no bootstrap servers".into());
        for b in self.candidates() {
            match f(b).await {
                Ok(v) => return Ok(v),
                Err(e) if e.is_retriable() => last = e,
                Err(e) => return Err(e),
            }
        }
        Err(last)
    }
}

impl ClusterLookup for BootstrapLookup {
    fn find_coordinator<'a>(
        &'a self,
        group_id: &'a str,
    ) -> BoxFuture<'a, Result<BrokerAddress, ClientError>> {
        Box::pin(async move {
            let group = group_id.to_string();
            self.any_broker(move |b| {
                let group = group.clone();
                Box::pin(async move {
                    let (node_id, address) = find_coordinator_on(&b, 0, &group).await?;
                    Ok(BrokerAddress { node_id, address })
                })
            })
            .await
        })
    }

    fn describe_topics<'a>(
        &'a self,
        topic_ids: &'a [Uuid],
    ) -> BoxFuture<'a, Result<ClusterView, ClientError>> {
        Box::pin(async move {
            let resp = self
                .any_broker(|b| {
                    Box::pin(async move {
                        let req = MetadataRequest::default()
                            .with_topics(None)
                            .with_allow_auto_topic_creation(false);
                        b.send(&req).await
                    })
                })
                .await?;
            let cluster = Cluster::default().apply(&resp, None);
            let (view, _) = view_of(&cluster, topic_ids);
            *self.known.lock() = view.brokers.clone();
            Ok(view)
        })
    }
}

/// The view of `topic_ids` in a [`Cluster`] snapshot; `None` when one of
/// them is unknown or has a partition without a leader.
fn view_of(cluster: &Cluster, topic_ids: &[Uuid]) -> (ClusterView, bool) {
    let mut view = ClusterView {
        brokers: cluster
            .brokers
            .iter()
            .map(|(id, b)| (*id, b.address()))
            .collect(),
        ..ClusterView::default()
    };
    let mut complete = true;
    for id in topic_ids {
        match cluster.topic_by_id(*id) {
            Some(t) if t.error.is_ok() => {
                complete &= t.partitions.iter().all(|p| p.leader_id >= 0);
                view.topics.insert(*id, t.clone());
            }
            _ => complete = false,
        }
    }
    (view, complete)
}

/// The shared metadata cache as the consumer's lookup: the coordinator
/// through [`Metadata::find_coordinator`] (retried within the request
/// timeout of the cache's connections), topics from the cache, refreshed
/// (all topics) when an assigned id is unknown or leaderless.
impl ClusterLookup for Metadata {
    fn find_coordinator<'a>(
        &'a self,
        group_id: &'a str,
    ) -> BoxFuture<'a, Result<BrokerAddress, ClientError>> {
        Box::pin(async move {
            let timeout = self
                .any_broker()
                .map(|b| b.config().request_timeout)
                .unwrap_or(std::time::Duration::from_secs(30));
            let b = Metadata::find_coordinator(self, 0, group_id, timeout).await?;
            Ok(BrokerAddress {
                node_id: b.node_id(),
                address: b.address().to_string(),
            })
        })
    }

    fn describe_topics<'a>(
        &'a self,
        topic_ids: &'a [Uuid],
    ) -> BoxFuture<'a, Result<ClusterView, ClientError>> {
        Box::pin(async move {
            let (view, complete) = view_of(&self.cluster(), topic_ids);
            if complete {
                return Ok(view);
            }
            self.refresh_all().await?;
            Ok(view_of(&self.cluster(), topic_ids).0)
        })
    }
}
