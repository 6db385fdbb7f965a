//! InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn: thin
//! translations between the wire and the transaction coordinator
//! (`crate::txn`), run through `BrokerCore::txn_call` so that state
//! is durable before the answer and markers are delivered.

use std::sync::Arc;

use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::*;

use super::RequestContext;
use crate::acl::{AclOperation, Resource, ResourceType};
use crate::config::StorageMode;
use crate::core::BrokerCore;
use crate::txn::{InitProducerIdRequest as CoordInit, TxnApi, error_for_version};
use sharestream_protocol::ErrorCode;

/// Runs blocking coordinator work (fsync of the transaction log, markers)
/// off the reactor when storage is durable.
pub(crate) async fn blocking<T: Send + 'static>(
    core: &Arc<BrokerCore>,
    f: impl FnOnce(&BrokerCore) -> T + Send + 'static,
) -> T {
    match core.config().storage {
        StorageMode::Memory => f(core),
        StorageMode::Directory(_) => {
            let core = core.clone();
            tokio::task::spawn_blocking(move || f(&core))
                .await
                .expect("transaction task panicked")
        }
    }
}

pub(crate) async fn init_producer_id(
    core: &Arc<BrokerCore>,
    ctx: &RequestContext,
    req: InitProducerIdRequest,
) -> InitProducerIdResponse {
    let version = ctx.version();
    let creq = CoordInit {
        api_version: version,
        transactional_id: req
            .transactional_id
            .as_ref()
            .map(|t| t.0.to_string())
            .filter(|t| !t.is_empty()),
        transaction_timeout_ms: req.transaction_timeout_ms,
        producer_id: if version >= 3 { req.producer_id.0 } else { -1 },
        producer_epoch: if version >= 3 { req.producer_epoch } else { -1 },
    };
    // Authorization: Write on the transactional id; an idempotent producer
    // needs IdempotentWrite on the cluster or Write on some topic.
    let denied = match &creq.transactional_id {
        Some(id) => (!ctx.allowed(core, AclOperation::Write, &Resource::transactional_id(id)))
            .then_some(ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
        None => (!ctx.allowed(core, AclOperation::IdempotentWrite, &Resource::cluster())
            && !core.security().authorizer().is_none_or(|a| {
                a.authorize_any(
                    &ctx.principal,
                    &ctx.host,
                    AclOperation::Write,
                    ResourceType::Topic,
                )
            }))
        .then_some(ErrorCode::CLUSTER_AUTHORIZATION_FAILED),
    };
    if let Some(code) = denied {
        return InitProducerIdResponse::default()
            .with_error_code(code.0)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1);
    }
    let res = blocking(core, move |c| {
        c.txn_call(|co, now| co.init_producer_id(now, &creq))
    })
    .await;
    match res {
        Ok(pe) => InitProducerIdResponse::default()
            .with_producer_id(ProducerId(pe.producer_id))
            .with_producer_epoch(pe.producer_epoch),
        Err(code) => InitProducerIdResponse::default()
            .with_error_code(code.0)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1),
    }
}

/// Splits requested partitions into known ones and UNKNOWN_TOPIC_OR_PARTITION.
fn known_partitions(
    core: &BrokerCore,
    topics: &[AddPartitionsToTxnTopic],
) -> Vec<((String, i32), bool)> {
    let reg = core.topics().read();
    topics
        .iter()
        .flat_map(|t| {
            let name = t.name.0.to_string();
            let count = reg.get(&name).map(|m| m.partitions).unwrap_or(0);
            t.partitions
                .iter()
                .map(move |&p| ((name.clone(), p), p >= 0 && p < count))
                .collect::<Vec<_>>()
        })
        .collect()
}

fn topic_results(results: Vec<((String, i32), ErrorCode)>) -> Vec<AddPartitionsToTxnTopicResult> {
    let mut by_topic: Vec<AddPartitionsToTxnTopicResult> = Vec::new();
    for ((topic, p), code) in results {
        let entry = AddPartitionsToTxnPartitionResult::default()
            .with_partition_index(p)
            .with_partition_error_code(code.0);
        match by_topic.iter_mut().find(|t| t.name.0.as_str() == topic) {
            Some(t) => t.results_by_partition.push(entry),
            None => by_topic.push(
                AddPartitionsToTxnTopicResult::default()
                    .with_name(TopicName(kafka_protocol::protocol::StrBytes::from_string(
                        topic,
                    )))
                    .with_results_by_partition(vec![entry]),
            ),
        }
    }
    by_topic
}

/// One transaction's partitions: add (or verify) them, per-partition results.
async fn add_partitions_one(
    core: &Arc<BrokerCore>,
    version: i16,
    txn_id: String,
    producer_id: i64,
    producer_epoch: i16,
    topics: Vec<AddPartitionsToTxnTopic>,
    verify_only: bool,
) -> Result<Vec<((String, i32), ErrorCode)>, ErrorCode> {
    let parts = known_partitions(core, &topics);
    if parts.iter().any(|(_, known)| !known) {
        // Kafka refuses the whole request: unknown partitions get
        // UNKNOWN_TOPIC_OR_PARTITION, the others OPERATION_NOT_ATTEMPTED.
        return Ok(parts
            .into_iter()
            .map(|(tp, known)| {
                let code = if known {
                    ErrorCode::OPERATION_NOT_ATTEMPTED
                } else {
                    ErrorCode::UNKNOWN_TOPIC_OR_PARTITION
                };
                (tp, code)
            })
            .collect());
    }
    let list: Vec<(String, i32)> = parts.into_iter().map(|(tp, _)| tp).collect();
    blocking(core, move |c| {
        if verify_only {
            c.txn()
                .with_coordinator(|co| {
                    co.verify_partitions_in_txn(&txn_id, producer_id, producer_epoch, &list)
                })
                .map(|rs| {
                    rs.into_iter()
                        .map(|(tp, code)| {
                            (
                                tp,
                                error_for_version(TxnApi::AddPartitionsToTxn, version, code),
                            )
                        })
                        .collect()
                })
        } else {
            let l2 = list.clone();
            c.txn_call(move |co, now| {
                co.add_partitions_to_txn(now, version, &txn_id, producer_id, producer_epoch, &l2)
            })
            .map(|()| list.into_iter().map(|tp| (tp, ErrorCode::NONE)).collect())
        }
    })
    .await
}

pub(crate) async fn add_partitions_to_txn(
    core: &Arc<BrokerCore>,
    ctx: &RequestContext,
    req: AddPartitionsToTxnRequest,
) -> AddPartitionsToTxnResponse {
    let version = ctx.version();
    if version <= 3 {
        let topics = req.v3_and_below_topics.clone();
        let all: Vec<(String, i32)> = known_partitions(core, &topics)
            .into_iter()
            .map(|(tp, _)| tp)
            .collect();
        let denied = txn_topics_denied(
            core,
            ctx,
            req.v3_and_below_transactional_id.0.as_str(),
            &topics,
        );
        let outcome = match denied {
            Some(r) => Ok(r),
            None => {
                add_partitions_one(
                    core,
                    version,
                    req.v3_and_below_transactional_id.0.to_string(),
                    req.v3_and_below_producer_id.0,
                    req.v3_and_below_producer_epoch,
                    topics,
                    false,
                )
                .await
            }
        };
        let results = match outcome {
            Ok(r) => r,
            // A top-level failure is reported on every partition.
            Err(code) => all.into_iter().map(|tp| (tp, code)).collect(),
        };
        return AddPartitionsToTxnResponse::default()
            .with_results_by_topic_v3_and_below(topic_results(results));
    }
    let mut out = Vec::with_capacity(req.transactions.len());
    for t in req.transactions {
        let id = t.transactional_id.clone();
        let all: Vec<(String, i32)> = known_partitions(core, &t.topics)
            .into_iter()
            .map(|(tp, _)| tp)
            .collect();
        let denied = txn_topics_denied(core, ctx, t.transactional_id.0.as_str(), &t.topics);
        let outcome = match denied {
            Some(r) => Ok(r),
            None => {
                add_partitions_one(
                    core,
                    version,
                    t.transactional_id.0.to_string(),
                    t.producer_id.0,
                    t.producer_epoch,
                    t.topics,
                    t.verify_only,
                )
                .await
            }
        };
        let results = match outcome {
            Ok(r) => r,
            Err(code) => all.into_iter().map(|tp| (tp, code)).collect(),
        };
        out.push(
            AddPartitionsToTxnResult::default()
                .with_transactional_id(id)
                .with_topic_results(topic_results(results)),
        );
    }
    AddPartitionsToTxnResponse::default().with_results_by_transaction(out)
}

/// Authorization of AddPartitionsToTxn for one transaction: without Write
/// on the transactional id every partition is answered
/// TRANSACTIONAL_ID_AUTHORIZATION_FAILED; without Write on a topic its
/// partitions are TOPIC_AUTHORIZATION_FAILED and the others
/// OPERATION_NOT_ATTEMPTED (as Kafka). `None` = all authorized.
fn txn_topics_denied(
    core: &BrokerCore,
    ctx: &RequestContext,
    txn_id: &str,
    topics: &[AddPartitionsToTxnTopic],
) -> Option<Vec<((String, i32), ErrorCode)>> {
    let all = topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(move |p| (t.name.0.to_string(), *p)));
    if !ctx.allowed(
        core,
        AclOperation::Write,
        &Resource::transactional_id(txn_id),
    ) {
        return Some(
            all.map(|tp| (tp, ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
                .collect(),
        );
    }
    let denied: Vec<String> = topics
        .iter()
        .map(|t| t.name.0.to_string())
        .filter(|n| !ctx.allowed(core, AclOperation::Write, &Resource::topic(n)))
        .collect();
    if denied.is_empty() {
        return None;
    }
    Some(
        all.map(|(t, p)| {
            let code = if denied.contains(&t) {
                ErrorCode::TOPIC_AUTHORIZATION_FAILED
            } else {
                ErrorCode::OPERATION_NOT_ATTEMPTED
            };
            ((t, p), code)
        })
        .collect(),
    )
}

pub(crate) async fn add_offsets_to_txn(
    core: &Arc<BrokerCore>,
    ctx: &RequestContext,
    req: AddOffsetsToTxnRequest,
) -> AddOffsetsToTxnResponse {
    let version = ctx.version();
    let txn_id = req.transactional_id.0.to_string();
    let group = req.group_id.0.to_string();
    let (pid, epoch) = (req.producer_id.0, req.producer_epoch);
    if !ctx.allowed(
        core,
        AclOperation::Write,
        &Resource::transactional_id(&txn_id),
    ) {
        return AddOffsetsToTxnResponse::default()
            .with_error_code(ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED.0);
    }
    if !ctx.allowed(core, AclOperation::Read, &Resource::group(&group)) {
        return AddOffsetsToTxnResponse::default()
            .with_error_code(ErrorCode::GROUP_AUTHORIZATION_FAILED.0);
    }
    let res = blocking(core, move |c| {
        c.txn_call(|co, now| co.add_offsets_to_txn(now, version, &txn_id, pid, epoch, &group))
    })
    .await;
    AddOffsetsToTxnResponse::default().with_error_code(res.err().unwrap_or(ErrorCode::NONE).0)
}

pub(crate) async fn end_txn(
    core: &Arc<BrokerCore>,
    ctx: &RequestContext,
    req: EndTxnRequest,
) -> EndTxnResponse {
    let version = ctx.version();
    let txn_id = req.transactional_id.0.to_string();
    let (pid, epoch, commit) = (req.producer_id.0, req.producer_epoch, req.committed);
    if !ctx.allowed(
        core,
        AclOperation::Write,
        &Resource::transactional_id(&txn_id),
    ) {
        return EndTxnResponse::default()
            .with_error_code(ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED.0)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1);
    }
    let res = blocking(core, move |c| {
        c.txn_call(|co, now| co.end_txn(now, version, &txn_id, pid, epoch, commit))
    })
    .await;
    match res {
        Ok(pe) => EndTxnResponse::default()
            .with_producer_id(ProducerId(pe.producer_id))
            .with_producer_epoch(pe.producer_epoch),
        Err(code) => EndTxnResponse::default()
            .with_error_code(code.0)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1),
    }
}
