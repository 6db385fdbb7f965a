//! Metadata: brokers, topics with their ids, partition leaders.

use std::collections::BTreeMap;

use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use super::RequestContext;
use crate::broker::core::BrokerCore;
use crate::broker::topics::{TopicMeta, validate_topic_name};
use crate::protocol::ErrorCode;

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
        .with_is_internal(false)
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
    let mut topics = Vec::new();
    match wanted {
        None => {
            let reg = core.topics().read();
            topics.extend(reg.iter().map(|t| topic_entry(core, t)));
        }
        Some(list) => {
            for t in list {
                match t.name {
                    Some(name) => {
                        let name = name.0.to_string();
                        let existing = core.topics().read().get(&name).cloned();
                        match existing {
                            Some(meta) => topics.push(topic_entry(core, &meta)),
                            None => {
                                if let Err(e) = validate_topic_name(&name) {
                                    topics.push(error_entry(Some(&name), Uuid::nil(), e.code));
                                    continue;
                                }
                                if allow_auto_create && core.config().auto_create_topics {
                                    match core.create_topic(
                                        &name,
                                        core.config().default_partitions,
                                        -1,
                                        BTreeMap::new(),
                                        false,
                                    ) {
                                        // Kafka answers LEADER_NOT_AVAILABLE while a
                                        // new topic settles; ours is ready at once.
                                        Ok(meta) => topics.push(topic_entry(core, &meta)),
                                        Err(e) => topics.push(error_entry(
                                            Some(&name),
                                            Uuid::nil(),
                                            e.code,
                                        )),
                                    }
                                } else {
                                    topics.push(error_entry(
                                        Some(&name),
                                        Uuid::nil(),
                                        ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
                                    ));
                                }
                            }
                        }
                    }
                    None => {
                        let found = core.topics().read().get_by_id(&t.topic_id).cloned();
                        match found {
                            Some(meta) => topics.push(topic_entry(core, &meta)),
                            None => topics.push(error_entry(
                                None,
                                t.topic_id,
                                ErrorCode::UNKNOWN_TOPIC_ID,
                            )),
                        }
                    }
                }
            }
        }
    }
    MetadataResponse::default()
        .with_brokers(vec![broker_entry(core)])
        .with_cluster_id(Some(StrBytes::from_string(
            core.config().cluster_id.clone(),
        )))
        .with_controller_id(BrokerId(core.node_id()))
        .with_topics(topics)
}
