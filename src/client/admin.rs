//! The admin client: topics, cluster description, configs of topics,
//! brokers and groups, feature levels, end offsets, DeleteRecords and
//! share-group offsets (the inputs of share-group lag).
//!
//! Requests go to the controller named by the metadata (any broker before
//! that is known). Per-item results come back as a map from the item to its
//! own `Result`, as Kafka's admin client reports them; a failure of the
//! whole request is the outer error. An API the broker does not serve fails
//! with [`ClientError::UnsupportedVersion`] before anything is written.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crate::protocol::share_offsets_v1::DescribeShareGroupOffsetsV1Request;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::update_features_request::FeatureUpdateKey;
use kafka_protocol::messages::{
    ApiVersionsRequest, CreateTopicsRequest, DeleteTopicsRequest, DescribeClusterRequest,
    DescribeConfigsRequest, DescribeShareGroupOffsetsRequest, GroupId,
    IncrementalAlterConfigsRequest, ListOffsetsRequest, TopicName, UpdateFeaturesRequest,
};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use crate::protocol::api::ApiRequest;

use super::config::ConnectionConfig;
use super::error::ClientError;
use super::metadata::{BrokerNode, Metadata};
use crate::protocol::ErrorCode;

/// DescribeConfigs / IncrementalAlterConfigs resource type of a group.
pub const RESOURCE_TYPE_GROUP: i8 = 32;
/// Resource type of a topic.
pub const RESOURCE_TYPE_TOPIC: i8 = 2;
/// Resource type of a broker (named by its node id).
pub const RESOURCE_TYPE_BROKER: i8 = 4;

/// The first resource's configs of a DescribeConfigs response, or its
/// error.
fn configs_of(
    resp: &kafka_protocol::messages::DescribeConfigsResponse,
) -> Result<BTreeMap<String, Option<String>>, ClientError> {
    let r = resp.results.first().ok_or(ClientError::Broker {
        api: "DescribeConfigs",
        code: ErrorCode::UNKNOWN_SERVER_ERROR,
        message: Some("empty response".into()),
    })?;
    resource_configs(r)
}

/// One resource's answer to DescribeConfigs: name → value, or its error.
fn resource_configs(
    r: &kafka_protocol::messages::describe_configs_response::DescribeConfigsResult,
) -> Result<BTreeMap<String, Option<String>>, ClientError> {
    ClientError::check(
        "DescribeConfigs",
        r.error_code,
        r.error_message.as_ref().map(|m| m.to_string()),
    )?;
    Ok(r.configs
        .iter()
        .map(|c| (c.name.to_string(), c.value.as_ref().map(|v| v.to_string())))
        .collect())
}

/// A topic to create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewTopic {
    /// Name.
    pub name: String,
    /// Partitions (-1 = broker default).
    pub num_partitions: i32,
    /// Replication factor (-1 = broker default).
    pub replication_factor: i16,
    /// Topic configs.
    pub configs: BTreeMap<String, String>,
}

impl NewTopic {
    /// A topic with `partitions` partitions and the default replication.
    pub fn new(name: impl Into<String>, partitions: i32) -> Self {
        Self {
            name: name.into(),
            num_partitions: partitions,
            replication_factor: -1,
            configs: BTreeMap::new(),
        }
    }
}

/// What DescribeCluster reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterDescription {
    /// Cluster id.
    pub cluster_id: String,
    /// Controller node id.
    pub controller_id: i32,
    /// Brokers.
    pub brokers: Vec<BrokerNode>,
}

/// Feature levels of the cluster (from ApiVersions).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FeatureMetadata {
    /// Finalized levels by feature name.
    pub finalized: BTreeMap<String, i16>,
    /// Supported ranges `(min, max)` by feature name.
    pub supported: BTreeMap<String, (i16, i16)>,
    /// Epoch of the finalized levels.
    pub finalized_epoch: i64,
}

/// How [`AdminClient::update_features`] may change a level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FeatureUpgradeType {
    /// Raise only.
    Upgrade = 1,
    /// Lowering allowed when no metadata is lost.
    SafeDowngrade = 2,
    /// Lowering allowed even if metadata is lost.
    UnsafeDowngrade = 3,
}

/// An operation of [`AdminClient::incremental_alter_configs`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AlterConfigOp {
    /// Set the value.
    Set(String),
    /// Remove the override (back to the default).
    Delete,
    /// Add the comma-separated items to a list config.
    Append(String),
    /// Remove the comma-separated items from a list config.
    Subtract(String),
}

impl AlterConfigOp {
    /// Kafka's operation code and value.
    fn wire(&self) -> (i8, Option<StrBytes>) {
        match self {
            AlterConfigOp::Set(v) => (0, Some(StrBytes::from_string(v.clone()))),
            AlterConfigOp::Delete => (1, None),
            AlterConfigOp::Append(v) => (2, Some(StrBytes::from_string(v.clone()))),
            AlterConfigOp::Subtract(v) => (3, Some(StrBytes::from_string(v.clone()))),
        }
    }
}

/// A share partition's offsets as DescribeShareGroupOffsets gives them
/// (Java's `SharePartitionOffsetInfo`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SharePartitionOffsetInfo {
    /// The share-partition start offset; -1 while the group has no state
    /// for the partition.
    pub start_offset: i64,
    /// The share-partition lag (KIP-1226), where the broker gives it.
    pub lag: Option<i64>,
}

/// The admin client.
#[derive(Debug, Clone)]
pub struct AdminClient {
    metadata: Arc<Metadata>,
    timeout: Duration,
}

impl AdminClient {
    /// An admin client over TCP to `bootstrap` servers.
    pub fn new(bootstrap: Vec<String>, connection: ConnectionConfig) -> Self {
        let timeout = connection.request_timeout;
        Self {
            metadata: Arc::new(Metadata::new(bootstrap, connection)),
            timeout,
        }
    }

    /// An admin client sharing a metadata cache.
    pub fn with_metadata(metadata: Arc<Metadata>, timeout: Duration) -> Self {
        Self { metadata, timeout }
    }

    /// The metadata cache.
    pub fn metadata(&self) -> &Arc<Metadata> {
        &self.metadata
    }

    fn timeout_ms(&self) -> i32 {
        self.timeout.as_millis().min(i32::MAX as u128) as i32
    }

    /// CreateTopics: each topic's id, or its own error.
    pub async fn create_topics(
        &self,
        topics: Vec<NewTopic>,
    ) -> Result<BTreeMap<String, Result<Uuid, ClientError>>, ClientError> {
        let req = CreateTopicsRequest::default()
            .with_timeout_ms(self.timeout_ms())
            .with_topics(
                topics
                    .iter()
                    .map(|t| {
                        CreatableTopic::default()
                            .with_name(TopicName(StrBytes::from_string(t.name.clone())))
                            .with_num_partitions(t.num_partitions)
                            .with_replication_factor(t.replication_factor)
                            .with_configs(
                                t.configs
                                    .iter()
                                    .map(|(k, v)| {
                                        CreatableTopicConfig::default()
                                            .with_name(StrBytes::from_string(k.clone()))
                                            .with_value(Some(StrBytes::from_string(v.clone())))
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            );
        let resp = self.metadata.controller().await?.send(&req).await?;
        Ok(resp
            .topics
            .iter()
            .map(|t| {
                let r = ClientError::check(
                    "CreateTopics",
                    t.error_code,
                    t.error_message.as_ref().map(|m| m.to_string()),
                )
                .map(|()| t.topic_id);
                (t.name.0.to_string(), r)
            })
            .collect())
    }

    /// Creates one topic; its id.
    pub async fn create_topic(&self, topic: NewTopic) -> Result<Uuid, ClientError> {
        let name = topic.name.clone();
        self.create_topics(vec![topic])
            .await?
            .remove(&name)
            .unwrap_or(Err(ClientError::Broker {
                api: "CreateTopics",
                code: ErrorCode::UNKNOWN_SERVER_ERROR,
                message: Some(format!("no result for {name}")),
            }))
    }

    /// DeleteTopics by name: each topic's own result.
    pub async fn delete_topics(
        &self,
        names: &[&str],
    ) -> Result<BTreeMap<String, Result<(), ClientError>>, ClientError> {
        use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
        let req = DeleteTopicsRequest::default()
            .with_timeout_ms(self.timeout_ms())
            .with_topic_names(
                names
                    .iter()
                    .map(|n| TopicName(StrBytes::from_string(n.to_string())))
                    .collect(),
            )
            .with_topics(
                names
                    .iter()
                    .map(|n| {
                        DeleteTopicState::default()
                            .with_name(Some(TopicName(StrBytes::from_string(n.to_string()))))
                    })
                    .collect(),
            );
        let resp = self.metadata.controller().await?.send(&req).await?;
        for n in names {
            self.metadata.invalidate(n);
        }
        Ok(resp
            .responses
            .iter()
            .map(|r| {
                (
                    r.name.as_ref().map(|n| n.0.to_string()).unwrap_or_default(),
                    ClientError::check(
                        "DeleteTopics",
                        r.error_code,
                        r.error_message.as_ref().map(|m| m.to_string()),
                    ),
                )
            })
            .collect())
    }

    /// DescribeCluster.
    pub async fn describe_cluster(&self) -> Result<ClusterDescription, ClientError> {
        let resp = self
            .metadata
            .send_any(&DescribeClusterRequest::default())
            .await?;
        ClientError::check(
            "DescribeCluster",
            resp.error_code,
            resp.error_message.as_ref().map(|m| m.to_string()),
        )?;
        Ok(ClusterDescription {
            cluster_id: resp.cluster_id.to_string(),
            controller_id: resp.controller_id.0,
            brokers: resp
                .brokers
                .iter()
                .map(|b| BrokerNode {
                    node_id: b.broker_id.0,
                    host: b.host.to_string(),
                    port: b.port,
                    rack: b.rack.as_ref().map(|r| r.to_string()),
                })
                .collect(),
        })
    }

    /// DescribeConfigs of any resource: name → value.
    pub async fn describe_configs(
        &self,
        resource_type: i8,
        name: &str,
    ) -> Result<BTreeMap<String, Option<String>>, ClientError> {
        let req = DescribeConfigsRequest::default().with_resources(vec![
            DescribeConfigsResource::default()
                .with_resource_type(resource_type)
                .with_resource_name(StrBytes::from_string(name.to_string()))
                .with_configuration_keys(None),
        ]);
        let resp = self.metadata.controller().await?.send(&req).await?;
        configs_of(&resp)
    }

    /// One config of several topics, in one DescribeConfigs request: each
    /// topic's value of `key` (`None` where the topic does not have it),
    /// or the error the broker gave for that topic (e.g. no such topic,
    /// no permission). An error of the request itself is returned as is;
    /// no topic, no request.
    pub async fn describe_topics_config(
        &self,
        topics: &[&str],
        key: &str,
    ) -> Result<BTreeMap<String, Result<Option<String>, ClientError>>, ClientError> {
        if topics.is_empty() {
            return Ok(BTreeMap::new());
        }
        let resources = topics
            .iter()
            .map(|t| {
                DescribeConfigsResource::default()
                    .with_resource_type(RESOURCE_TYPE_TOPIC)
                    .with_resource_name(StrBytes::from_string(t.to_string()))
                    .with_configuration_keys(Some(vec![StrBytes::from_string(key.to_string())]))
            })
            .collect();
        let req = DescribeConfigsRequest::default().with_resources(resources);
        let resp = self.metadata.controller().await?.send(&req).await?;
        Ok(resp
            .results
            .iter()
            .map(|r| {
                let value = resource_configs(r).map(|mut c| c.remove(key).flatten());
                (r.resource_name.to_string(), value)
            })
            .collect())
    }

    /// The configs of one broker of the cluster (any): its node id and
    /// name → value. Asked of that broker itself, as Kafka answers a
    /// broker resource only on the broker it names.
    pub async fn describe_broker_configs(
        &self,
    ) -> Result<(i32, BTreeMap<String, Option<String>>), ClientError> {
        self.metadata.refresh(&[]).await?;
        let broker = self.metadata.any_broker()?;
        let id = broker.node_id();
        let req = DescribeConfigsRequest::default().with_resources(vec![
            DescribeConfigsResource::default()
                .with_resource_type(RESOURCE_TYPE_BROKER)
                .with_resource_name(StrBytes::from_string(id.to_string()))
                .with_configuration_keys(None),
        ]);
        let resp = broker.send(&req).await?;
        Ok((id, configs_of(&resp)?))
    }

    /// A group's configs (e.g. `share.auto.offset.reset`).
    pub async fn describe_group_config(
        &self,
        group_id: &str,
    ) -> Result<BTreeMap<String, Option<String>>, ClientError> {
        self.describe_configs(RESOURCE_TYPE_GROUP, group_id).await
    }

    /// IncrementalAlterConfigs of a group's configs.
    pub async fn incremental_alter_group_config(
        &self,
        group_id: &str,
        ops: &[(&str, AlterConfigOp)],
    ) -> Result<(), ClientError> {
        self.incremental_alter_configs(RESOURCE_TYPE_GROUP, group_id, ops)
            .await
    }

    /// IncrementalAlterConfigs of one resource: a topic
    /// ([`RESOURCE_TYPE_TOPIC`]), a broker ([`RESOURCE_TYPE_BROKER`], named
    /// by its node id, or "" for the cluster-wide default) or a group
    /// ([`RESOURCE_TYPE_GROUP`]). The broker applies all operations or
    /// none; its refusal (INVALID_CONFIG, an authorization error...) is the
    /// error.
    pub async fn incremental_alter_configs(
        &self,
        resource_type: i8,
        name: &str,
        ops: &[(&str, AlterConfigOp)],
    ) -> Result<(), ClientError> {
        let req = IncrementalAlterConfigsRequest::default().with_resources(vec![
            AlterConfigsResource::default()
                .with_resource_type(resource_type)
                .with_resource_name(StrBytes::from_string(name.to_string()))
                .with_configs(
                    ops.iter()
                        .map(|(k, op)| {
                            let (code, value) = op.wire();
                            AlterableConfig::default()
                                .with_name(StrBytes::from_string(k.to_string()))
                                .with_config_operation(code)
                                .with_value(value)
                        })
                        .collect(),
                ),
        ]);
        let resp = self.metadata.controller().await?.send(&req).await?;
        for r in &resp.responses {
            ClientError::check(
                "IncrementalAlterConfigs",
                r.error_code,
                r.error_message.as_ref().map(|m| m.to_string()),
            )?;
        }
        Ok(())
    }

    /// DescribeShareGroupOffsets (KIP-932): the share-partition start offset
    /// (SPSO) of each partition of `group_id`, asked of the group
    /// coordinator. `topics` `None` asks for every partition the group has
    /// state for. A partition the group has no state for yet answers -1.
    /// A broker without the API fails with
    /// [`ClientError::UnsupportedVersion`]. With the lag:
    /// [`Self::describe_share_group_offsets_with_lag`].
    pub async fn describe_share_group_offsets(
        &self,
        group_id: &str,
        topics: Option<&[(String, Vec<i32>)]>,
    ) -> Result<BTreeMap<(String, i32), Result<i64, ClientError>>, ClientError> {
        Ok(self
            .describe_share_group_offsets_with_lag(group_id, topics)
            .await?
            .into_iter()
            .map(|(k, r)| (k, r.map(|i| i.start_offset)))
            .collect())
    }

    /// [`Self::describe_share_group_offsets`] with each partition's
    /// share-partition lag where the broker gives it
    /// (DescribeShareGroupOffsets v1, KIP-1226: Kafka 4.3+ and our broker;
    /// Java's `SharePartitionOffsetInfo.lag()`): the records from the start
    /// offset to the high watermark not yet delivered for good. `lag` is
    /// `None` from a broker with version 0 only, or where the broker does
    /// not know it (-1 on the wire).
    pub async fn describe_share_group_offsets_with_lag(
        &self,
        group_id: &str,
        topics: Option<&[(String, Vec<i32>)]>,
    ) -> Result<BTreeMap<(String, i32), Result<SharePartitionOffsetInfo, ClientError>>, ClientError>
    {
        use kafka_protocol::messages::describe_share_group_offsets_request as req_mod;
        let group = req_mod::DescribeShareGroupOffsetsRequestGroup::default()
            .with_group_id(GroupId(StrBytes::from_string(group_id.to_string())))
            .with_topics(topics.map(|ts| {
                ts.iter()
                    .map(|(name, parts)| {
                        req_mod::DescribeShareGroupOffsetsRequestTopic::default()
                            .with_topic_name(TopicName(StrBytes::from_string(name.clone())))
                            .with_partitions(parts.clone())
                    })
                    .collect()
            }));
        let req = DescribeShareGroupOffsetsV1Request {
            request: DescribeShareGroupOffsetsRequest::default().with_groups(vec![group]),
        };
        let conn = self
            .metadata
            .find_coordinator(0, group_id, self.timeout)
            .await?;
        let answer = conn.send(&req).await?;
        let resp = &answer.response;
        let mut out = BTreeMap::new();
        let mut index = 0;
        for g in &resp.groups {
            ClientError::check(
                "DescribeShareGroupOffsets",
                g.error_code,
                g.error_message.as_ref().map(|m| m.to_string()),
            )?;
            for t in &g.topics {
                for p in &t.partitions {
                    let r = ClientError::check(
                        "DescribeShareGroupOffsets",
                        p.error_code,
                        p.error_message.as_ref().map(|m| m.to_string()),
                    )
                    .map(|()| SharePartitionOffsetInfo {
                        start_offset: p.start_offset,
                        lag: Some(answer.lag(index)).filter(|l| *l >= 0),
                    });
                    index += 1;
                    out.insert((t.topic_name.0.to_string(), p.partition_index), r);
                }
            }
        }
        Ok(out)
    }

    /// ListOffsets LATEST of each partition, asked of its leader: the high
    /// watermark, or with `read_committed` the last stable offset.
    pub async fn list_end_offsets(
        &self,
        partitions: &[(String, i32)],
        read_committed: bool,
    ) -> Result<BTreeMap<(String, i32), Result<i64, ClientError>>, ClientError> {
        self.list_offsets_at(partitions, -1, read_committed).await
    }

    /// ListOffsets EARLIEST of each partition, asked of its leader: the log
    /// start offset (below it, records were deleted).
    pub async fn list_start_offsets(
        &self,
        partitions: &[(String, i32)],
    ) -> Result<BTreeMap<(String, i32), Result<i64, ClientError>>, ClientError> {
        self.list_offsets_at(partitions, -2, false).await
    }

    /// ListOffsets at a special timestamp (-1 latest, -2 earliest).
    async fn list_offsets_at(
        &self,
        partitions: &[(String, i32)],
        timestamp: i64,
        read_committed: bool,
    ) -> Result<BTreeMap<(String, i32), Result<i64, ClientError>>, ClientError> {
        use kafka_protocol::messages::BrokerId;
        use kafka_protocol::messages::list_offsets_request::{
            ListOffsetsPartition, ListOffsetsTopic,
        };
        let mut topics: Vec<&str> = partitions.iter().map(|(t, _)| t.as_str()).collect();
        topics.sort_unstable();
        topics.dedup();
        if topics.iter().any(|t| self.metadata.topic(t).is_none()) {
            self.metadata.refresh(&topics).await?;
        }
        // Group by leader: node id -> topic -> partitions.
        let mut by_leader: BTreeMap<i32, BTreeMap<&str, Vec<i32>>> = BTreeMap::new();
        let mut out = BTreeMap::new();
        for (t, p) in partitions {
            let leader = self
                .metadata
                .topic(t)
                .and_then(|m| m.partition(*p).map(|pm| pm.leader_id));
            match leader {
                Some(l) if l >= 0 => by_leader
                    .entry(l)
                    .or_default()
                    .entry(t)
                    .or_default()
                    .push(*p),
                _ => {
                    self.metadata.invalidate(t);
                    out.insert(
                        (t.clone(), *p),
                        Err(ClientError::check(
                            "ListOffsets",
                            ErrorCode::LEADER_NOT_AVAILABLE.0,
                            None,
                        )
                        .unwrap_err()),
                    );
                }
            }
        }
        for (leader, topics) in by_leader {
            let Some(conn) = self.metadata.broker(leader) else {
                continue;
            };
            let req = ListOffsetsRequest::default()
                .with_replica_id(BrokerId(-1))
                .with_isolation_level(i8::from(read_committed))
                .with_topics(
                    topics
                        .into_iter()
                        .map(|(t, ps)| {
                            ListOffsetsTopic::default()
                                .with_name(TopicName(StrBytes::from_string(t.to_string())))
                                .with_partitions(
                                    ps.into_iter()
                                        .map(|p| {
                                            ListOffsetsPartition::default()
                                                .with_partition_index(p)
                                                .with_timestamp(timestamp)
                                        })
                                        .collect(),
                                )
                        })
                        .collect(),
                );
            let resp = conn.send(&req).await?;
            for t in &resp.topics {
                for p in &t.partitions {
                    let r =
                        ClientError::check("ListOffsets", p.error_code, None).map(|()| p.offset);
                    out.insert((t.name.0.to_string(), p.partition_index), r);
                }
            }
        }
        Ok(out)
    }

    /// DeleteRecords (KIP-107): deletes the records of each partition below
    /// the given offset (-1 = its high watermark), asked of each leader.
    /// Each partition's result is its new low watermark (log start offset)
    /// or its own error: OFFSET_OUT_OF_RANGE above the high watermark,
    /// TOPIC_AUTHORIZATION_FAILED without Delete on the topic,
    /// POLICY_VIOLATION on a compacted topic. A broker without the API
    /// fails with [`ClientError::UnsupportedVersion`].
    pub async fn delete_records(
        &self,
        before: &[(String, i32, i64)],
    ) -> Result<BTreeMap<(String, i32), Result<i64, ClientError>>, ClientError> {
        use kafka_protocol::messages::DeleteRecordsRequest;
        use kafka_protocol::messages::delete_records_request::{
            DeleteRecordsPartition, DeleteRecordsTopic,
        };
        let mut topics: Vec<&str> = before.iter().map(|(t, _, _)| t.as_str()).collect();
        topics.sort_unstable();
        topics.dedup();
        if topics.iter().any(|t| self.metadata.topic(t).is_none()) {
            self.metadata.refresh(&topics).await?;
        }
        // Leader -> topic -> (partition, offset).
        type ByLeader<'a> = BTreeMap<i32, BTreeMap<&'a str, Vec<(i32, i64)>>>;
        let mut by_leader: ByLeader = BTreeMap::new();
        let mut out = BTreeMap::new();
        for (t, p, offset) in before {
            let leader = self
                .metadata
                .topic(t)
                .and_then(|m| m.partition(*p).map(|pm| pm.leader_id));
            match leader {
                Some(l) if l >= 0 => by_leader
                    .entry(l)
                    .or_default()
                    .entry(t)
                    .or_default()
                    .push((*p, *offset)),
                _ => {
                    self.metadata.invalidate(t);
                    let code = if self.metadata.topic(t).is_none() {
                        ErrorCode::UNKNOWN_TOPIC_OR_PARTITION
                    } else {
                        ErrorCode::LEADER_NOT_AVAILABLE
                    };
                    out.insert(
                        (t.clone(), *p),
                        Err(ClientError::Broker {
                            api: "DeleteRecords",
                            code,
                            message: None,
                        }),
                    );
                }
            }
        }
        for (leader, topics) in by_leader {
            let Some(conn) = self.metadata.broker(leader) else {
                continue;
            };
            let req = DeleteRecordsRequest::default()
                .with_timeout_ms(self.timeout_ms())
                .with_topics(
                    topics
                        .into_iter()
                        .map(|(t, ps)| {
                            DeleteRecordsTopic::default()
                                .with_name(TopicName(StrBytes::from_string(t.to_string())))
                                .with_partitions(
                                    ps.into_iter()
                                        .map(|(p, o)| {
                                            DeleteRecordsPartition::default()
                                                .with_partition_index(p)
                                                .with_offset(o)
                                        })
                                        .collect(),
                                )
                        })
                        .collect(),
                );
            let resp = conn.send(&req).await?;
            for t in &resp.topics {
                for p in &t.partitions {
                    let r = ClientError::check("DeleteRecords", p.error_code, None)
                        .map(|()| p.low_watermark);
                    out.insert((t.name.0.to_string(), p.partition_index), r);
                }
            }
        }
        Ok(out)
    }

    /// The cluster's feature levels, from an ApiVersions exchange.
    pub async fn describe_features(&self) -> Result<FeatureMetadata, ClientError> {
        let req = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("sharestream"))
            .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")));
        let resp = self.metadata.send_any(&req).await?;
        ClientError::check("ApiVersions", resp.error_code, None)?;
        Ok(FeatureMetadata {
            finalized: resp
                .finalized_features
                .iter()
                .map(|f| (f.name.to_string(), f.max_version_level))
                .collect(),
            supported: resp
                .supported_features
                .iter()
                .map(|f| (f.name.to_string(), (f.min_version, f.max_version)))
                .collect(),
            finalized_epoch: resp.finalized_features_epoch,
        })
    }

    /// UpdateFeatures (key 57): each feature's own result.
    pub async fn update_features(
        &self,
        updates: &[(&str, i16, FeatureUpgradeType)],
        validate_only: bool,
    ) -> Result<BTreeMap<String, Result<(), ClientError>>, ClientError> {
        // v0 says "allowDowngrade", v1+ says "upgradeType" and knows
        // validateOnly: fill in what the negotiated version has.
        let conn = self.metadata.controller().await?.connection().await?;
        let version = conn
            .versions()
            .version_for(UpdateFeaturesRequest::API_KEY)?;
        let req = UpdateFeaturesRequest::default()
            .with_timeout_ms(self.timeout_ms())
            .with_validate_only(validate_only && version >= 1)
            .with_feature_updates(
                updates
                    .iter()
                    .map(|(name, level, kind)| {
                        let key = FeatureUpdateKey::default()
                            .with_feature(StrBytes::from_string(name.to_string()))
                            .with_max_version_level(*level);
                        if version >= 1 {
                            key.with_upgrade_type(*kind as i8)
                        } else {
                            key.with_allow_downgrade(*kind != FeatureUpgradeType::Upgrade)
                        }
                    })
                    .collect(),
            );
        if validate_only && version < 1 {
            return Err(ClientError::UnsupportedVersion {
                api_key: UpdateFeaturesRequest::API_KEY,
                api_name: "UpdateFeatures",
                detail: "validateOnly needs UpdateFeatures v1".into(),
            });
        }
        let resp = conn.send_with_version(&req, version).await?;
        ClientError::check(
            "UpdateFeatures",
            resp.error_code,
            resp.error_message.as_ref().map(|m| m.to_string()),
        )?;
        Ok(resp
            .results
            .iter()
            .map(|r| {
                (
                    r.feature.to_string(),
                    ClientError::check(
                        "UpdateFeatures",
                        r.error_code,
                        r.error_message.as_ref().map(|m| m.to_string()),
                    ),
                )
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::broker_connection::{BrokerPool, Connector, ConnectorFactory};
    use crate::client::connection::Connection;
    use crate::client::test_peer::{ScriptedPeer, all_apis_except};
    use crate::protocol::api::AnyRequest;
    use kafka_protocol::messages::describe_configs_response::{
        DescribeConfigsResourceResult, DescribeConfigsResult,
    };
    use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
    use kafka_protocol::messages::{
        DescribeConfigsResponse, IncrementalAlterConfigsResponse, MetadataRequest,
        MetadataResponse, RequestKind,
    };
    use parking_lot::Mutex;

    /// A broker that keeps group configs in a map.
    async fn serve(io: tokio::io::DuplexStream, store: Arc<Mutex<BTreeMap<String, String>>>) {
        let mut peer = ScriptedPeer::new(io);
        peer.handshake(&all_apis_except(&[])).await;
        while let Some(req) = peer.recv_or_eof().await {
            let (v, cid) = (req.header.api_version, req.header.correlation_id);
            let AnyRequest::Kafka(k) = req.request else {
                panic!("unexpected request")
            };
            match *k {
                RequestKind::Metadata(_) => {
                    peer.respond::<MetadataRequest>(&MetadataResponse::default(), v, cid)
                        .await
                }
                RequestKind::DescribeConfigs(r) => {
                    let res = &r.resources[0];
                    assert_eq!(res.resource_type, RESOURCE_TYPE_GROUP);
                    let configs = store
                        .lock()
                        .iter()
                        .map(|(k, v)| {
                            DescribeConfigsResourceResult::default()
                                .with_name(StrBytes::from_string(k.clone()))
                                .with_value(Some(StrBytes::from_string(v.clone())))
                        })
                        .collect();
                    let resp = DescribeConfigsResponse::default().with_results(vec![
                        DescribeConfigsResult::default()
                            .with_resource_type(res.resource_type)
                            .with_resource_name(res.resource_name.clone())
                            .with_configs(configs),
                    ]);
                    peer.respond::<DescribeConfigsRequest>(&resp, v, cid).await;
                }
                RequestKind::IncrementalAlterConfigs(r) => {
                    let res = &r.resources[0];
                    assert_eq!(res.resource_type, RESOURCE_TYPE_GROUP);
                    let mut code = 0;
                    for c in &res.configs {
                        match (c.config_operation, &c.value) {
                            (0, Some(v)) if c.name.as_str() == "share.auto.offset.reset" => {
                                if v.as_str() == "earliest" || v.as_str() == "latest" {
                                    store.lock().insert(c.name.to_string(), v.to_string());
                                } else {
                                    code = ErrorCode::INVALID_CONFIG.0;
                                }
                            }
                            (1, _) => {
                                store.lock().remove(c.name.as_str());
                            }
                            _ => code = ErrorCode::INVALID_CONFIG.0,
                        }
                    }
                    let resp = IncrementalAlterConfigsResponse::default().with_responses(vec![
                        AlterConfigsResourceResponse::default()
                            .with_error_code(code)
                            .with_resource_type(res.resource_type)
                            .with_resource_name(res.resource_name.clone()),
                    ]);
                    peer.respond::<IncrementalAlterConfigsRequest>(&resp, v, cid)
                        .await;
                }
                other => panic!("unexpected {other:?}"),
            }
        }
    }

    #[tokio::test]
    async fn group_configs_round_trip() {
        let store = Arc::new(Mutex::new(BTreeMap::new()));
        let s = store.clone();
        let factory: ConnectorFactory = Arc::new(move |_, _| {
            let s = s.clone();
            let c: Connector = Arc::new(move |config: &ConnectionConfig| {
                let s = s.clone();
                let config = config.clone();
                Box::pin(async move {
                    let (client, server) = tokio::io::duplex(1 << 16);
                    tokio::spawn(serve(server, s));
                    Connection::new(client, &config).await
                })
            });
            c
        });
        let pool = BrokerPool::with_connector_factory(ConnectionConfig::default(), factory);
        let admin = AdminClient::with_metadata(
            Arc::new(Metadata::with_pool(vec!["scripted:1".into()], pool)),
            Duration::from_secs(5),
        );
        admin
            .incremental_alter_group_config(
                "g",
                &[(
                    "share.auto.offset.reset",
                    AlterConfigOp::Set("earliest".into()),
                )],
            )
            .await
            .unwrap();
        let got = admin.describe_group_config("g").await.unwrap();
        assert_eq!(
            got.get("share.auto.offset.reset"),
            Some(&Some("earliest".to_string()))
        );
        let e = admin
            .incremental_alter_group_config(
                "g",
                &[("share.auto.offset.reset", AlterConfigOp::Set("x".into()))],
            )
            .await
            .unwrap_err();
        assert!(
            matches!(
                e,
                ClientError::Broker {
                    code: ErrorCode::INVALID_CONFIG,
                    ..
                }
            ),
            "{e}"
        );
        admin
            .incremental_alter_group_config(
                "g",
                &[("share.auto.offset.reset", AlterConfigOp::Delete)],
            )
            .await
            .unwrap();
        assert!(admin.describe_group_config("g").await.unwrap().is_empty());
    }
}
