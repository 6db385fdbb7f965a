//! Metadata: brokers, topics with their ids, partition leaders.
//!
//! `__consumer_offsets` is listed with `is_internal` true once it exists
//! (FindCoordinator for a group creates it, as Kafka's does).
//!
//! Authorization, as Kafka's: an all-topics request lists only the topics
//! the principal may Describe; a named topic it may not Describe is
//! answered TOPIC_AUTHORIZATION_FAILED whether or not it exists (by id:
//! the id is echoed, the name withheld); auto-creation needs Create on the
//! cluster or on the topic (else TOPIC_AUTHORIZATION_FAILED). Topic
//! authorized operations (v8+) and cluster authorized operations (v8-v10,
//! 0 without Describe on the cluster) are filled when asked for.

use std::collections::BTreeMap;

use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use super::RequestContext;
use crate::acl::{AclOperation, Resource};
use crate::core::BrokerCore;
use crate::topics::{TopicMeta, validate_topic_name};
use sharestream_protocol::ErrorCode;

pub(crate) fn broker_entry(core: &BrokerCore) -> MetadataResponseBroker {
    let (host, port) = core.advertised();
    MetadataResponseBroker::default()
        .with_node_id(BrokerId(core.node_id()))
        .with_host(StrBytes::from_string(host.to_string()))
        .with_port(port as i32)
}

fn topic_entry(core: &BrokerCore, t: &TopicMeta) -> MetadataResponseTopic {
    let node = BrokerId(core.node_id());
    MetadataResponseTopic::default()
        .with_name(Some(TopicName(StrBytes::from_string(t.name.clone()))))
        .with_topic_id(t.id)
        .with_is_internal(t.is_internal())
        .with_partitions(
            (0..t.partitions)
                .map(|p| {
                    MetadataResponsePartition::default()
                        .with_partition_index(p)
                        .with_leader_id(node)
                        .with_leader_epoch(0)
                        .with_replica_nodes(vec![node])
                        .with_isr_nodes(vec![node])
                })
                .collect(),
        )
}

fn error_entry(name: Option<&str>, id: Uuid, code: ErrorCode) -> MetadataResponseTopic {
    MetadataResponseTopic::default()
        .with_error_code(code.0)
        .with_name(name.map(|n| TopicName(StrBytes::from_string(n.to_string()))))
        .with_topic_id(id)
}

/// Whether the principal may have `name` created by a Metadata request:
/// Create on the cluster or on the topic.
fn may_auto_create(core: &BrokerCore, ctx: &RequestContext, name: &str) -> bool {
    ctx.allowed(core, AclOperation::Create, &Resource::cluster())
        || ctx.allowed(core, AclOperation::Create, &Resource::topic(name))
}

pub(crate) fn handle(
    core: &BrokerCore,
    ctx: &RequestContext,
    req: MetadataRequest,
) -> MetadataResponse {
    let version = ctx.version();
    // v0: an empty list means all topics; v1+: null means all.
    let wanted = match req.topics {
        None => None,
        Some(t) if t.is_empty() && version == 0 => None,
        Some(t) => Some(t),
    };
    let allow_auto_create = if version >= 4 {
        req.allow_auto_topic_creation
    } else {
        true
    };
    let may_describe =
        |name: &str| ctx.allowed(core, AclOperation::Describe, &Resource::topic(name));
    // Entries that carry a topic the principal may Describe (they get the
    // topic's authorized operations when asked for).
    let mut topics: Vec<(MetadataResponseTopic, bool)> = Vec::new();
    match wanted {
        None => {
            // All topics: those the principal may not Describe are left out.
            let reg = core.topics().read();
            topics.extend(
                reg.iter()
                    .filter(|t| may_describe(&t.name))
                    .map(|t| (topic_entry(core, t), true)),
            );
        }
        Some(list) => {
            for t in list {
                // A topic id with no (or an empty) name asks by id.
                let name = t.name.filter(|n| t.topic_id.is_nil() || !n.0.is_empty());
                match name {
                    Some(name) => {
                        let name = name.0.to_string();
                        // Checked before existence, so that the answer does
                        // not tell whether the topic exists.
                        if !may_describe(&name) {
                            topics.push((
                                error_entry(
                                    Some(&name),
                                    Uuid::nil(),
                                    ErrorCode::TOPIC_AUTHORIZATION_FAILED,
                                ),
                                false,
                            ));
                            continue;
                        }
                        let existing = core.topics().read().get(&name).cloned();
                        match existing {
                            Some(meta) => topics.push((topic_entry(core, &meta), true)),
                            None => {
                                let auto_create =
                                    allow_auto_create && core.config().auto_create_topics;
                                if auto_create && !may_auto_create(core, ctx, &name) {
                                    topics.push((
                                        error_entry(
                                            Some(&name),
                                            Uuid::nil(),
                                            ErrorCode::TOPIC_AUTHORIZATION_FAILED,
                                        ),
                                        false,
                                    ));
                                    continue;
                                }
                                if let Err(e) = validate_topic_name(&name) {
                                    topics.push((
                                        error_entry(Some(&name), Uuid::nil(), e.code),
                                        true,
                                    ));
                                    continue;
                                }
                                let entry = if auto_create
                                    && name == crate::topics::CONSUMER_OFFSETS_TOPIC
                                {
                                    // Created as the internal topic, as Kafka's
                                    // auto-creation does for this name.
                                    core.ensure_offsets_topic();
                                    match core.topics().read().get(&name) {
                                        Some(meta) => topic_entry(core, meta),
                                        None => error_entry(
                                            Some(&name),
                                            Uuid::nil(),
                                            ErrorCode::LEADER_NOT_AVAILABLE,
                                        ),
                                    }
                                } else if auto_create {
                                    match core.create_topic(
                                        &name,
                                        core.config().default_partitions,
                                        -1,
                                        BTreeMap::new(),
                                        false,
                                    ) {
                                        // Kafka answers LEADER_NOT_AVAILABLE while a
                                        // new topic settles; ours is ready at once.
                                        Ok(meta) => topic_entry(core, &meta),
                                        Err(e) => error_entry(Some(&name), Uuid::nil(), e.code),
                                    }
                                } else {
                                    error_entry(
                                        Some(&name),
                                        Uuid::nil(),
                                        ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
                                    )
                                };
                                topics.push((entry, true));
                            }
                        }
                    }
                    // Before v12 topic names are not nullable and Kafka
                    // refuses lookups by id ("Topic name can not be null for
                    // version N"): answer INVALID_REQUEST with an empty name,
                    // which the client can still decode.
                    None if version < 12 => topics.push((
                        error_entry(Some(""), t.topic_id, ErrorCode::INVALID_REQUEST),
                        false,
                    )),
                    None => {
                        let found = core.topics().read().get_by_id(&t.topic_id).cloned();
                        match found {
                            // Topic ids are not secret: an existing one the
                            // principal may not Describe is answered
                            // TOPIC_AUTHORIZATION_FAILED without its name.
                            Some(meta) if !may_describe(&meta.name) => topics.push((
                                error_entry(
                                    None,
                                    t.topic_id,
                                    ErrorCode::TOPIC_AUTHORIZATION_FAILED,
                                ),
                                false,
                            )),
                            Some(meta) => topics.push((topic_entry(core, &meta), true)),
                            None => topics.push((
                                error_entry(None, t.topic_id, ErrorCode::UNKNOWN_TOPIC_ID),
                                false,
                            )),
                        }
                    }
                }
            }
        }
    }
    let with_topic_ops = version >= 8 && req.include_topic_authorized_operations;
    let topics = topics
        .into_iter()
        .map(
            |(entry, described)| match (&entry.name, with_topic_ops && described) {
                (Some(name), true) => {
                    let ops = ctx.authorized_operations(core, &Resource::topic(name.0.as_str()));
                    entry.with_topic_authorized_operations(ops)
                }
                _ => entry,
            },
        )
        .collect();
    let mut resp = MetadataResponse::default()
        .with_brokers(vec![broker_entry(core)])
        .with_cluster_id(Some(StrBytes::from_string(
            core.config().cluster_id.clone(),
        )))
        .with_controller_id(BrokerId(core.node_id()))
        .with_topics(topics);
    // The cluster's authorized operations exist in v8-v10 only.
    if (8..=10).contains(&version) && req.include_cluster_authorized_operations {
        let cluster = Resource::cluster();
        resp = resp.with_cluster_authorized_operations(
            if ctx.allowed(core, AclOperation::Describe, &cluster) {
                ctx.authorized_operations(core, &cluster)
            } else {
                0
            },
        );
    }
    resp
}
