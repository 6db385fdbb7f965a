//! Admin APIs: CreateTopics, DeleteTopics, CreatePartitions, DescribeCluster,
//! DescribeConfigs, and FindCoordinator (every coordinator is this node).
//!
//! Authorization, as Kafka's (KRaft controller for the topic APIs):
//! - CreateTopics: Create on the cluster, else Create on each topic
//!   (TOPIC_AUTHORIZATION_FAILED); the configs of a created topic are
//!   returned only with DescribeConfigs on it (else TopicConfigErrorCode
//!   TOPIC_AUTHORIZATION_FAILED, no configs, counts -1);
//! - DeleteTopics: Delete on the cluster, else Delete on each topic; a
//!   named topic the principal may not Describe is refused before its
//!   existence is looked at; a topic given by id keeps its name hidden
//!   unless the principal may Describe it;
//! - CreatePartitions: Alter on each topic;
//! - DescribeConfigs: DescribeConfigs on the topic, on the cluster for the
//!   broker and its loggers, on the group
//!   (TOPIC_/CLUSTER_/GROUP_AUTHORIZATION_FAILED);
//! - DescribeCluster: nothing; the cluster's authorized operations when
//!   asked for (0 without Describe on the cluster);
//! - FindCoordinator: a group key creates `__consumer_offsets` on first
//!   use, as Kafka's does; Describe on the group (GROUP_AUTHORIZATION_FAILED) or
//!   on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED);
//!   ClusterAction on the cluster for share-state keys, which only brokers
//!   look up (CLUSTER_AUTHORIZATION_FAILED).

use std::collections::{BTreeMap, HashMap};

use kafka_protocol::messages::create_topics_response::{
    CreatableTopicConfigs, CreatableTopicResult,
};
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult,
};
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use super::RequestContext;
use crate::acl::{AUTHORIZED_OPERATIONS_OMITTED, AclOperation, Resource};
use crate::core::BrokerCore;
use crate::topics::{TOPIC_CONFIGS, topic_config_def};
use sharestream_protocol::ErrorCode;

fn s(v: impl Into<String>) -> StrBytes {
    StrBytes::from_string(v.into())
}

/// Config resource types (Kafka's ConfigResource.Type).
const RESOURCE_TOPIC: i8 = 2;
const RESOURCE_BROKER: i8 = 4;
const RESOURCE_BROKER_LOGGER: i8 = 8;

/// Config sources (DescribeConfigs).
const SOURCE_TOPIC_CONFIG: i8 = 1;
const SOURCE_DYNAMIC_BROKER_CONFIG: i8 = 2;
const SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG: i8 = 3;
const SOURCE_STATIC_BROKER_CONFIG: i8 = 4;
const SOURCE_DEFAULT_CONFIG: i8 = 5;

/// Config types (DescribeConfigs v3+).
const TYPE_BOOLEAN: i8 = 1;
const TYPE_STRING: i8 = 2;
const TYPE_INT: i8 = 3;
const TYPE_LONG: i8 = 5;

fn topic_config_type(name: &str) -> i8 {
    topic_config_def(name).map_or(TYPE_STRING, |d| d.kind.type_code())
}

fn broker_config_type(name: &str) -> i8 {
    super::configs::DYNAMIC_BROKER_CONFIGS
        .iter()
        .find(|(n, _)| *n == name)
        .map_or(TYPE_STRING, |(_, k)| k.type_code())
}

pub(crate) fn create_topics(
    core: &BrokerCore,
    ctx: &RequestContext,
    req: CreateTopicsRequest,
    quota: &super::quotas::Mutations<'_>,
) -> CreateTopicsResponse {
    let version = ctx.version();
    let mut seen: HashMap<String, usize> = HashMap::new();
    for t in &req.topics {
        *seen.entry(t.name.0.to_string()).or_default() += 1;
    }
    let mut results = Vec::with_capacity(req.topics.len());
    let cluster_create = ctx.allowed(core, AclOperation::Create, &Resource::cluster());
    for t in req.topics {
        let name = t.name.0.to_string();
        let mut result = CreatableTopicResult::default().with_name(t.name.clone());
        if seen.get(&name).copied().unwrap_or(0) > 1 {
            results.push(
                result
                    .with_error_code(ErrorCode::INVALID_REQUEST.0)
                    .with_error_message(Some(s(format!(
                        "Create topics request from client contains multiple entries for topic {name}"
                    )))),
            );
            continue;
        }
        if !cluster_create && !ctx.allowed(core, AclOperation::Create, &Resource::topic(&name)) {
            results.push(
                result
                    .with_error_code(ErrorCode::TOPIC_AUTHORIZATION_FAILED.0)
                    .with_error_message(Some(s(format!("Not authorized to create topic {name}")))),
            );
            continue;
        }
        let configs_visible =
            ctx.allowed(core, AclOperation::DescribeConfigs, &Resource::topic(&name));
        let partitions = if !t.assignments.is_empty() {
            if t.num_partitions != -1 || t.replication_factor != -1 {
                results.push(result.with_error_code(ErrorCode::INVALID_REQUEST.0).with_error_message(
                    Some(s("Both numPartitions or replicationFactor and replicasAssignments were set. Both cannot be used at the same time.")),
                ));
                continue;
            }
            let bad = t
                .assignments
                .iter()
                .any(|a| a.broker_ids.len() != 1 || a.broker_ids[0].0 != core.node_id());
            if bad {
                results.push(
                    result
                        .with_error_code(39) // INVALID_REPLICA_ASSIGNMENT
                        .with_error_message(Some(s(format!(
                            "Replica assignment must name only broker {}",
                            core.node_id()
                        )))),
                );
                continue;
            }
            t.assignments.len() as i32
        } else if t.num_partitions == -1 {
            core.config().default_partitions
        } else {
            t.num_partitions
        };
        let mut configs = BTreeMap::new();
        let mut config_error = None;
        for c in &t.configs {
            match &c.value {
                Some(v) => {
                    configs.insert(c.name.to_string(), v.to_string());
                }
                None => {
                    config_error = Some(format!(
                        "Null value not supported for topic configs: {}",
                        c.name
                    ))
                }
            }
        }
        if let Some(msg) = config_error {
            results.push(
                result
                    .with_error_code(ErrorCode::INVALID_CONFIG.0)
                    .with_error_message(Some(s(msg))),
            );
            continue;
        }
        // Under a controller_mutation_rate a topic is checked first, so
        // that only one that would be created draws on the quota (as in
        // Kafka, where the quota comes after the checks).
        if quota.applies && !req.validate_only {
            let checked = core
                .create_topic(
                    &name,
                    partitions,
                    t.replication_factor,
                    configs.clone(),
                    true,
                )
                .map_err(|e| (e.code, e.message))
                .and_then(|_| quota.admit(partitions));
            if let Err((code, message)) = checked {
                results.push(
                    result
                        .with_error_code(code.0)
                        .with_error_message(Some(s(message))),
                );
                continue;
            }
        }
        match core.create_topic(
            &name,
            partitions,
            t.replication_factor,
            configs,
            req.validate_only,
        ) {
            Ok(meta) => {
                result = result.with_topic_id(if req.validate_only {
                    Uuid::nil()
                } else {
                    meta.id
                });
                if !configs_visible {
                    // Created, but its configuration is not shown.
                    if version >= 5 {
                        result = result
                            .with_topic_config_error_code(ErrorCode::TOPIC_AUTHORIZATION_FAILED.0);
                    }
                    results.push(result);
                    continue;
                }
                result = result
                    .with_num_partitions(meta.partitions)
                    .with_replication_factor(1);
                if version >= 5 {
                    result = result.with_configs(Some(
                        TOPIC_CONFIGS
                            .iter()
                            .map(|d| {
                                let k = &d.name;
                                let explicit = meta.configs.contains_key(*k);
                                CreatableTopicConfigs::default()
                                    .with_name(s(*k))
                                    .with_value(meta.config(k).map(s))
                                    .with_config_source(if explicit {
                                        SOURCE_TOPIC_CONFIG
                                    } else {
                                        SOURCE_DEFAULT_CONFIG
                                    })
                            })
                            .collect(),
                    ));
                }
                results.push(result);
            }
            Err(e) => results.push(
                result
                    .with_error_code(e.code.0)
                    .with_error_message(Some(s(e.message))),
            ),
        }
    }
    CreateTopicsResponse::default().with_topics(results)
}

pub(crate) fn delete_topics(
    core: &BrokerCore,
    ctx: &RequestContext,
    req: DeleteTopicsRequest,
    quota: &super::quotas::Mutations<'_>,
) -> DeleteTopicsResponse {
    let mut targets: Vec<(Option<String>, Uuid)> = Vec::new();
    if ctx.version() >= 6 {
        for t in req.topics {
            targets.push((t.name.map(|n| n.0.to_string()), t.topic_id));
        }
    } else {
        for n in req.topic_names {
            targets.push((Some(n.0.to_string()), Uuid::nil()));
        }
    }
    let cluster_delete = ctx.allowed(core, AclOperation::Delete, &Resource::cluster());
    let may = |op: AclOperation, name: &str| {
        cluster_delete || ctx.allowed(core, op, &Resource::topic(name))
    };
    let denied = |entry: DeletableTopicResult| {
        entry
            .with_error_code(ErrorCode::TOPIC_AUTHORIZATION_FAILED.0)
            .with_error_message(Some(s("Not authorized to delete the topic")))
    };
    let responses = targets
        .into_iter()
        .map(|(name, id)| {
            let by_name = name.is_some();
            let name = match name {
                Some(n) => Some(n),
                None => core.topics().read().get_by_id(&id).map(|t| t.name.clone()),
            };
            let entry = DeletableTopicResult::default()
                .with_name(name.clone().map(|n| TopicName(s(n))))
                .with_topic_id(id);
            match name {
                None => entry.with_error_code(ErrorCode::UNKNOWN_TOPIC_ID.0),
                // By name: refused before its existence is looked at.
                Some(n) if by_name && !may(AclOperation::Describe, &n) => denied(entry),
                Some(n) if by_name && core.topics().read().get(&n).is_none() => {
                    entry.with_error_code(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.0)
                }
                Some(n) if !may(AclOperation::Delete, &n) => {
                    if by_name || may(AclOperation::Describe, &n) {
                        denied(entry)
                    } else {
                        // By id, not describable: the name stays hidden.
                        denied(entry.with_name(None))
                    }
                }
                Some(n) => {
                    let partitions = core.topics().read().get(&n).map(|t| t.partitions);
                    let Some(partitions) = partitions else {
                        return entry.with_error_code(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.0);
                    };
                    if let Err((code, message)) = quota.admit(partitions) {
                        return entry
                            .with_error_code(code.0)
                            .with_error_message(Some(s(message)));
                    }
                    match core.delete_topic(&n) {
                        Some(meta) => entry.with_topic_id(meta.id),
                        None => entry.with_error_code(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.0),
                    }
                }
            }
        })
        .collect();
    DeleteTopicsResponse::default().with_responses(responses)
}

pub(crate) fn create_partitions(
    core: &BrokerCore,
    ctx: &RequestContext,
    req: CreatePartitionsRequest,
    quota: &super::quotas::Mutations<'_>,
) -> CreatePartitionsResponse {
    let results = req
        .topics
        .into_iter()
        .map(|t| {
            let name = t.name.0.to_string();
            let r = kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult::default()
                .with_name(t.name.clone());
            if !ctx.allowed(core, AclOperation::Alter, &Resource::topic(&name)) {
                return r
                    .with_error_code(ErrorCode::TOPIC_AUTHORIZATION_FAILED.0)
                    .with_error_message(Some(s(format!("Not authorized to alter topic {name}"))));
            }
            if quota.applies && !req.validate_only {
                // Checked first: only partitions that would be added draw
                // on the controller_mutation_rate.
                let before = core.topics().read().get(&name).map_or(0, |m| m.partitions);
                let checked = core
                    .add_partitions(&name, t.count, true)
                    .map_err(|e| (e.code, e.message))
                    .and_then(|()| quota.admit(t.count - before));
                if let Err((code, message)) = checked {
                    return r.with_error_code(code.0).with_error_message(Some(s(message)));
                }
            }
            match core.add_partitions(&name, t.count, req.validate_only) {
                Ok(()) => r,
                Err(e) => r.with_error_code(e.code.0).with_error_message(Some(s(e.message))),
            }
        })
        .collect();
    CreatePartitionsResponse::default().with_results(results)
}

pub(crate) fn describe_cluster(
    core: &BrokerCore,
    ctx: &RequestContext,
    req: DescribeClusterRequest,
) -> DescribeClusterResponse {
    // Endpoint type 1 = brokers, 2 = controllers (v1+).
    if ctx.version() >= 1 && req.endpoint_type != 1 {
        return DescribeClusterResponse::default()
            .with_error_code(ErrorCode::MISMATCHED_ENDPOINT_TYPE.0)
            .with_error_message(Some(s("The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER")))
            .with_endpoint_type(1)
            .with_cluster_id(s(core.config().cluster_id.clone()));
    }
    let (host, port) = core.advertised();
    let cluster = Resource::cluster();
    let authorized_operations = if !req.include_cluster_authorized_operations {
        AUTHORIZED_OPERATIONS_OMITTED
    } else if ctx.allowed(core, AclOperation::Describe, &cluster) {
        ctx.authorized_operations(core, &cluster)
    } else {
        0
    };
    DescribeClusterResponse::default()
        .with_cluster_authorized_operations(authorized_operations)
        .with_endpoint_type(1)
        .with_cluster_id(s(core.config().cluster_id.clone()))
        .with_controller_id(BrokerId(core.node_id()))
        .with_brokers(vec![
            DescribeClusterBroker::default()
                .with_broker_id(BrokerId(core.node_id()))
                .with_host(s(host))
                .with_port(port as i32),
        ])
}

fn broker_configs(core: &BrokerCore) -> Vec<(&'static str, String, i8)> {
    let c = core.config();
    vec![
        (
            "auto.create.topics.enable",
            c.auto_create_topics.to_string(),
            TYPE_BOOLEAN,
        ),
        ("num.partitions", c.default_partitions.to_string(), TYPE_INT),
        (
            "message.max.bytes",
            c.message_max_bytes.to_string(),
            TYPE_INT,
        ),
        (
            "socket.request.max.bytes",
            c.max_frame_size.to_string(),
            TYPE_INT,
        ),
        (
            "transaction.max.timeout.ms",
            c.transaction_max_timeout_ms.to_string(),
            TYPE_INT,
        ),
        ("log.segment.bytes", c.segment_bytes.to_string(), TYPE_INT),
        (
            "log.retention.check.interval.ms",
            c.retention_check_interval_ms.to_string(),
            TYPE_LONG,
        ),
        ("broker.id", c.node_id.to_string(), TYPE_INT),
    ]
    .into_iter()
    .chain(
        core.shares()
            .broker_config()
            .entries()
            .into_iter()
            .map(|(k, v)| {
                let ty = if v.parse::<i64>().is_ok() {
                    TYPE_INT
                } else if v == "true" || v == "false" {
                    TYPE_BOOLEAN
                } else {
                    TYPE_STRING
                };
                (k, v, ty)
            }),
    )
    .collect()
}

pub(crate) fn describe_configs(
    core: &BrokerCore,
    ctx: &RequestContext,
    req: DescribeConfigsRequest,
) -> DescribeConfigsResponse {
    let with_types = ctx.version() >= 3;
    let results = req
        .resources
        .into_iter()
        .map(|r| {
            let name = r.resource_name.to_string();
            let keys: Option<Vec<String>> = r
                .configuration_keys
                .map(|k| k.into_iter().map(|x| x.to_string()).collect());
            let wanted = |k: &str| keys.as_ref().is_none_or(|ks| ks.iter().any(|x| x == k));
            let base = DescribeConfigsResult::default()
                .with_resource_type(r.resource_type)
                .with_resource_name(r.resource_name.clone());
            let entry = |k: &str, v: Option<String>, source: i8, ty: i8| {
                let mut e = DescribeConfigsResourceResult::default()
                    .with_name(s(k))
                    .with_value(v.map(s))
                    .with_config_source(source)
                    .with_read_only(source == SOURCE_STATIC_BROKER_CONFIG);
                if with_types {
                    e = e.with_config_type(ty);
                }
                e
            };
            let (resource, refusal) = match r.resource_type {
                RESOURCE_TOPIC => (
                    Some(Resource::topic(&name)),
                    ErrorCode::TOPIC_AUTHORIZATION_FAILED,
                ),
                RESOURCE_BROKER | RESOURCE_BROKER_LOGGER => (
                    Some(Resource::cluster()),
                    ErrorCode::CLUSTER_AUTHORIZATION_FAILED,
                ),
                super::share::RESOURCE_GROUP => (
                    Some(Resource::group(&name)),
                    ErrorCode::GROUP_AUTHORIZATION_FAILED,
                ),
                _ => (None, ErrorCode::NONE),
            };
            if let Some(resource) = resource
                && !ctx.allowed(core, AclOperation::DescribeConfigs, &resource)
            {
                return base
                    .with_error_code(refusal.0)
                    .with_error_message(Some(s("Not authorized to describe the configs")));
            }
            match r.resource_type {
                RESOURCE_TOPIC => match core.topics().read().get(&name) {
                    None => base
                        .with_error_code(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.0)
                        .with_error_message(Some(s(format!("Topic {name} does not exist")))),
                    Some(meta) => base.with_configs(
                        TOPIC_CONFIGS
                            .iter()
                            .map(|d| d.name)
                            .filter(|k| wanted(k))
                            .map(|k| {
                                let source = if meta.configs.contains_key(k) {
                                    SOURCE_TOPIC_CONFIG
                                } else {
                                    SOURCE_DEFAULT_CONFIG
                                };
                                entry(
                                    k,
                                    meta.config(k).map(str::to_string),
                                    source,
                                    topic_config_type(k),
                                )
                            })
                            .collect(),
                    ),
                },
                RESOURCE_BROKER => {
                    if !name.is_empty() && name != core.node_id().to_string() {
                        base.with_error_code(ErrorCode::INVALID_REQUEST.0)
                            .with_error_message(Some(s(format!(
                                "Unexpected broker id, expected {} but received {name}",
                                core.node_id()
                            ))))
                    } else {
                        // Static settings, overlaid by the dynamic ones: the
                        // cluster-wide defaults, then this node's own (not
                        // for the resource "", the cluster default).
                        let dynamic = core.dynamic_broker_configs();
                        let mut rows: BTreeMap<String, (String, i8, i8)> = BTreeMap::new();
                        {
                            for (k, v, ty) in broker_configs(core) {
                                rows.insert(k.to_string(), (v, SOURCE_STATIC_BROKER_CONFIG, ty));
                            }
                        }
                        for (k, v) in &dynamic.cluster_default {
                            rows.insert(
                                k.clone(),
                                (
                                    v.clone(),
                                    SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG,
                                    broker_config_type(k),
                                ),
                            );
                        }
                        if !name.is_empty() {
                            for (k, v) in &dynamic.node {
                                rows.insert(
                                    k.clone(),
                                    (
                                        v.clone(),
                                        SOURCE_DYNAMIC_BROKER_CONFIG,
                                        broker_config_type(k),
                                    ),
                                );
                            }
                        }
                        base.with_configs(
                            rows.into_iter()
                                .filter(|(k, _)| wanted(k))
                                .map(|(k, (v, source, ty))| entry(&k, Some(v), source, ty))
                                .collect(),
                        )
                    }
                }
                super::share::RESOURCE_GROUP => base.with_configs(
                    super::share::describe_group_configs(core, &name)
                        .into_iter()
                        .filter(|(k, _, _, _)| wanted(k))
                        .map(|(k, v, source, is_int)| {
                            entry(
                                k,
                                Some(v),
                                source,
                                if is_int { TYPE_INT } else { TYPE_STRING },
                            )
                        })
                        .collect(),
                ),
                other => base
                    .with_error_code(ErrorCode::INVALID_REQUEST.0)
                    .with_error_message(Some(s(format!(
                        "Unsupported resource type {other} for DescribeConfigs"
                    )))),
            }
        })
        .collect();
    DescribeConfigsResponse::default().with_results(results)
}

/// Coordinator key types.
const KEY_TYPE_GROUP: i8 = 0;
const KEY_TYPE_TRANSACTION: i8 = 1;
const KEY_TYPE_SHARE: i8 = 2;

/// Authorization of one coordinator key, checked before the key itself.
fn coordinator_denied(
    core: &BrokerCore,
    ctx: &RequestContext,
    key: &str,
    key_type: i8,
) -> Option<(ErrorCode, String)> {
    let (op, resource, code) = match key_type {
        KEY_TYPE_GROUP => (
            AclOperation::Describe,
            Resource::group(key),
            ErrorCode::GROUP_AUTHORIZATION_FAILED,
        ),
        KEY_TYPE_TRANSACTION => (
            AclOperation::Describe,
            Resource::transactional_id(key),
            ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        ),
        KEY_TYPE_SHARE => (
            AclOperation::ClusterAction,
            Resource::cluster(),
            ErrorCode::CLUSTER_AUTHORIZATION_FAILED,
        ),
        _ => return None,
    };
    (!ctx.allowed(core, op, &resource)).then(|| {
        (
            code,
            format!("Not authorized to find the coordinator of {key}"),
        )
    })
}

fn coordinator_error(key: &str, key_type: i8) -> Option<(ErrorCode, String)> {
    match key_type {
        KEY_TYPE_GROUP | KEY_TYPE_TRANSACTION => {
            if key.is_empty() {
                Some((ErrorCode::INVALID_REQUEST, "Empty key".to_string()))
            } else {
                None
            }
        }
        KEY_TYPE_SHARE => {
            // "group:topicId:partition", split from the right (the group id
            // may itself contain ':').
            let mut parts = key.rsplitn(3, ':');
            let partition = parts.next();
            let topic_id = parts.next();
            let group = parts.next();
            let ok = match (group, topic_id, partition) {
                (Some(g), Some(t), Some(p)) => {
                    !g.is_empty()
                        && (Uuid::parse_str(t).is_ok() || base64_uuid(t))
                        && p.parse::<i32>().is_ok_and(|p| p >= 0)
                }
                _ => false,
            };
            if ok {
                None
            } else {
                Some((
                    ErrorCode::INVALID_REQUEST,
                    format!("Invalid share coordinator key {key}"),
                ))
            }
        }
        other => Some((
            ErrorCode::INVALID_REQUEST,
            format!("Invalid coordinator key type {other}"),
        )),
    }
}

/// Kafka prints topic ids in URL-safe base64 (22 chars).
fn base64_uuid(t: &str) -> bool {
    t.len() == 22
        && t.bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_')
}

pub(crate) fn find_coordinator(
    core: &BrokerCore,
    ctx: &RequestContext,
    req: FindCoordinatorRequest,
) -> FindCoordinatorResponse {
    let (host, port) = core.advertised();
    let (host, port) = (s(host), port as i32);
    if ctx.version() >= 4 {
        let coordinators = req
            .coordinator_keys
            .into_iter()
            .map(|k| {
                let c = Coordinator::default().with_key(k.clone());
                let error = coordinator_denied(core, ctx, &k, req.key_type)
                    .or_else(|| coordinator_error(&k, req.key_type));
                match error {
                    Some((code, msg)) => c
                        .with_error_code(code.0)
                        .with_error_message(Some(s(msg)))
                        .with_node_id(BrokerId(-1))
                        .with_host(s(""))
                        .with_port(-1),
                    None => {
                        if req.key_type == KEY_TYPE_GROUP {
                            core.ensure_offsets_topic();
                        }
                        c.with_node_id(BrokerId(core.node_id()))
                            .with_host(host.clone())
                            .with_port(port)
                    }
                }
            })
            .collect();
        FindCoordinatorResponse::default().with_coordinators(coordinators)
    } else {
        let key_type = if ctx.version() >= 1 { req.key_type } else { 0 };
        let error = coordinator_denied(core, ctx, &req.key, key_type)
            .or_else(|| coordinator_error(&req.key, key_type));
        match error {
            Some((code, msg)) => FindCoordinatorResponse::default()
                .with_error_code(code.0)
                .with_error_message(Some(s(msg)))
                .with_node_id(BrokerId(-1))
                .with_host(s(""))
                .with_port(-1),
            None => {
                if key_type == KEY_TYPE_GROUP {
                    core.ensure_offsets_topic();
                }
                FindCoordinatorResponse::default()
                    .with_node_id(BrokerId(core.node_id()))
                    .with_host(host)
                    .with_port(port)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn share_keys_split_from_the_right() {
        let id = Uuid::new_v4();
        assert!(coordinator_error(&format!("my:group:{id}:3"), KEY_TYPE_SHARE).is_none());
        assert!(coordinator_error("g:notanid:3", KEY_TYPE_SHARE).is_some());
        assert!(coordinator_error(&format!("g:{id}:x"), KEY_TYPE_SHARE).is_some());
        assert!(coordinator_error("g", 9).is_some());
    }
}
