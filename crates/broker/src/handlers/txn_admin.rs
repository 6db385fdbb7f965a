//! What `kafka-transactions.sh` asks: DescribeProducers (a partition's
//! producer state), DescribeTransactions and ListTransactions (the
//! transaction coordinator's state), and WriteTxnMarkers, which `abort`
//! sends to the partition's leader to end a hanging transaction.
//!
//! Authorization, as Kafka's KafkaApis:
//! - DescribeProducers: Read on the topic, else TOPIC_AUTHORIZATION_FAILED
//!   for each of its partitions (checked before existence);
//! - DescribeTransactions: Describe on the transactional id, else
//!   TRANSACTIONAL_ID_AUTHORIZATION_FAILED; the partitions of topics the
//!   principal may not Describe are left out of the answer;
//! - ListTransactions: only the transactional ids the principal may
//!   Describe are listed (no error);
//! - WriteTxnMarkers: ClusterAction on the cluster, else every partition
//!   of the request is CLUSTER_AUTHORIZATION_FAILED.
//!
//! ListTransactions is served up to v2: v1's duration filter (KIP-994)
//! and v2's transactional id pattern (KIP-1152, a regular expression,
//! INVALID_REGULAR_EXPRESSION when it does not compile).
//!
//! WriteTxnMarkers (v1) is what Kafka's partition leader does with it: a
//! control batch appended for each partition, with the producer-epoch and
//! coordinator-epoch checks of any marker (INVALID_PRODUCER_EPOCH,
//! TRANSACTION_COORDINATOR_FENCED), UNKNOWN_TOPIC_OR_PARTITION for a
//! partition that does not exist; `__consumer_offsets` settles the
//! producer's staged offsets. The transaction coordinator is not told:
//! an open transaction there still ends by EndTxn or its timeout, whose
//! own markers then find nothing open (D10).

use std::collections::BTreeMap;

use kafka_protocol::messages::describe_producers_response::{
    PartitionResponse, ProducerState, TopicResponse,
};
use kafka_protocol::messages::describe_transactions_response::{TopicData, TransactionState};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

use super::RequestContext;
use crate::acl::{AclOperation, Resource};
use crate::consumer_group::consumer_protocol::INVALID_REGULAR_EXPRESSION;
use crate::core::BrokerCore;
use crate::txn::{MarkerRequest, TransactionVersion, TxnState};
use sharestream_protocol::ErrorCode;

fn s(v: impl Into<String>) -> StrBytes {
    StrBytes::from_string(v.into())
}

pub(crate) fn describe_producers(
    core: &BrokerCore,
    ctx: &RequestContext,
    req: DescribeProducersRequest,
) -> DescribeProducersResponse {
    let topics = req
        .topics
        .into_iter()
        .map(|t| {
            let name = t.name.0.to_string();
            let readable = ctx.allowed(core, AclOperation::Read, &Resource::topic(&name));
            let meta = core.topics().read().get(&name).cloned();
            let partitions = t
                .partition_indexes
                .iter()
                .map(|&p| {
                    let base = PartitionResponse::default().with_partition_index(p);
                    if !readable {
                        return base.with_error_code(ErrorCode::TOPIC_AUTHORIZATION_FAILED.0);
                    }
                    let Some(log) = meta.as_ref().and_then(|m| core.partition(m.id, p)) else {
                        return base
                            .with_error_code(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.0)
                            .with_error_message(Some(s(format!(
                                "Partition {p} of {name} does not exist"
                            ))));
                    };
                    let log = log.lock();
                    let state = log.producer_state();
                    base.with_active_producers(
                        state
                            .producer_ids()
                            .into_iter()
                            .filter_map(|pid| state.entry(pid))
                            .map(|e| {
                                ProducerState::default()
                                    .with_producer_id(ProducerId(e.producer_id))
                                    .with_producer_epoch(e.epoch as i32)
                                    .with_last_sequence(e.last_seq())
                                    .with_last_timestamp(e.last_timestamp)
                                    .with_coordinator_epoch(e.coordinator_epoch)
                                    .with_current_txn_start_offset(
                                        e.current_txn_first_offset.unwrap_or(-1),
                                    )
                            })
                            .collect(),
                    )
                })
                .collect();
            TopicResponse::default()
                .with_name(t.name)
                .with_partitions(partitions)
        })
        .collect();
    DescribeProducersResponse::default().with_topics(topics)
}

pub(crate) fn describe_transactions(
    core: &BrokerCore,
    ctx: &RequestContext,
    req: DescribeTransactionsRequest,
) -> DescribeTransactionsResponse {
    let states = req
        .transactional_ids
        .into_iter()
        .map(|id| {
            let name = id.0.to_string();
            let base = TransactionState::default().with_transactional_id(id);
            if !ctx.allowed(
                core,
                AclOperation::Describe,
                &Resource::transactional_id(&name),
            ) {
                return base
                    .with_error_code(ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED.0)
                    .with_producer_id(ProducerId(-1))
                    .with_producer_epoch(-1)
                    .with_transaction_start_time_ms(-1);
            }
            let found = core.txn().with_coordinator(|c| c.describe(&name).cloned());
            let Some(m) = found else {
                return base
                    .with_error_code(ErrorCode::TRANSACTIONAL_ID_NOT_FOUND.0)
                    .with_producer_id(ProducerId(-1))
                    .with_producer_epoch(-1)
                    .with_transaction_start_time_ms(-1);
            };
            let mut by_topic: BTreeMap<String, Vec<i32>> = BTreeMap::new();
            for p in &m.participants {
                let (topic, partition) = p.topic_partition();
                by_topic
                    .entry(topic.to_string())
                    .or_default()
                    .push(partition);
            }
            let topics = by_topic
                .into_iter()
                .filter(|(t, _)| ctx.allowed(core, AclOperation::Describe, &Resource::topic(t)))
                .map(|(t, mut ps)| {
                    ps.sort_unstable();
                    ps.dedup();
                    TopicData::default()
                        .with_topic(TopicName(s(t)))
                        .with_partitions(ps)
                })
                .collect();
            base.with_transaction_state(s(m.state.name()))
                .with_transaction_timeout_ms(m.txn_timeout_ms)
                .with_transaction_start_time_ms(m.txn_start_ms)
                .with_producer_id(ProducerId(m.producer_id))
                .with_producer_epoch(m.producer_epoch)
                .with_topics(topics)
        })
        .collect();
    DescribeTransactionsResponse::default().with_transaction_states(states)
}

/// Kafka's names of the states a ListTransactions filter may name.
const STATE_NAMES: &[(&str, TxnState)] = &[
    ("Empty", TxnState::Empty),
    ("Ongoing", TxnState::Ongoing),
    ("PrepareCommit", TxnState::PrepareCommit),
    ("PrepareAbort", TxnState::PrepareAbort),
    ("CompleteCommit", TxnState::CompleteCommit),
    ("CompleteAbort", TxnState::CompleteAbort),
    ("PrepareEpochFence", TxnState::PrepareEpochFence),
    // Kafka's Dead (an expired id): never reached here.
    ("Dead", TxnState::PrepareEpochFence),
];

pub(crate) fn list_transactions(
    core: &BrokerCore,
    ctx: &RequestContext,
    req: ListTransactionsRequest,
) -> ListTransactionsResponse {
    use kafka_protocol::messages::list_transactions_response::TransactionState as Listed;
    let mut unknown = Vec::new();
    let mut wanted_states = Vec::new();
    for f in &req.state_filters {
        match STATE_NAMES.iter().find(|(n, _)| *n == f.as_str()) {
            Some((n, st)) if *n != "Dead" => wanted_states.push(*st),
            Some(_) => {}
            None => unknown.push(f.clone()),
        }
    }
    let pids: Vec<i64> = req.producer_id_filters.iter().map(|p| p.0).collect();
    let duration = if ctx.version() >= 1 {
        req.duration_filter
    } else {
        -1
    };
    // v2 (KIP-1152): a regular expression the whole transactional id must
    // match; null or empty is no filter.
    let pattern = match req
        .transactional_id_pattern
        .as_deref()
        .filter(|p| !p.is_empty())
    {
        Some(p) if ctx.version() >= 2 => match regex::Regex::new(&format!("^(?:{p})$")) {
            Ok(re) => Some(re),
            Err(e) => {
                tracing::debug!(pattern = p, error = %e, "ListTransactions: invalid pattern");
                return ListTransactionsResponse::default()
                    .with_error_code(INVALID_REGULAR_EXPRESSION.0)
                    .with_unknown_state_filters(unknown);
            }
        },
        _ => None,
    };
    let now = core.now_ms();
    // An unknown state name filters everything out when it is the only one.
    let only_unknown = !req.state_filters.is_empty() && wanted_states.is_empty();
    let listed: Vec<Listed> = if only_unknown {
        Vec::new()
    } else {
        core.txn()
            .with_coordinator(|c| {
                c.transactions()
                    .filter(|m| wanted_states.is_empty() || wanted_states.contains(&m.state))
                    .filter(|m| pids.is_empty() || pids.contains(&m.producer_id))
                    .filter(|m| {
                        pattern
                            .as_ref()
                            .is_none_or(|re| re.is_match(&m.transactional_id))
                    })
                    .filter(|m| {
                        duration < 0
                            || (m.txn_start_ms >= 0
                                && now.saturating_sub(m.txn_start_ms) >= duration)
                    })
                    .map(|m| {
                        (
                            m.transactional_id.clone(),
                            m.producer_id,
                            m.state.name().to_string(),
                        )
                    })
                    .collect::<Vec<_>>()
            })
            .into_iter()
            .filter(|(id, _, _)| {
                ctx.allowed(
                    core,
                    AclOperation::Describe,
                    &Resource::transactional_id(id),
                )
            })
            .map(|(id, pid, state)| {
                Listed::default()
                    .with_transactional_id(TransactionalId(s(id)))
                    .with_producer_id(ProducerId(pid))
                    .with_transaction_state(s(state))
            })
            .collect()
    };
    ListTransactionsResponse::default()
        .with_unknown_state_filters(unknown)
        .with_transaction_states(listed)
}

pub(crate) fn write_txn_markers(
    core: &BrokerCore,
    ctx: &RequestContext,
    req: WriteTxnMarkersRequest,
) -> WriteTxnMarkersResponse {
    use kafka_protocol::messages::write_txn_markers_response::{
        WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
    };
    let authorized = ctx.allowed(core, AclOperation::ClusterAction, &Resource::cluster());
    let markers = req
        .markers
        .into_iter()
        .map(|m| {
            let marker = MarkerRequest {
                transactional_id: String::new(),
                producer_id: m.producer_id.0,
                producer_epoch: m.producer_epoch,
                coordinator_epoch: m.coordinator_epoch,
                commit: m.transaction_result,
                participants: Vec::new(),
                // v1 carries no transaction version: Kafka reads it as 0,
                // the classic rules (a marker's epoch may equal the
                // producer's).
                transaction_version: TransactionVersion::V1,
                imposed: false,
            };
            let topics = m
                .topics
                .into_iter()
                .map(|t| {
                    let name = t.name.0.to_string();
                    let partitions = t
                        .partition_indexes
                        .iter()
                        .map(|&p| {
                            let code = if !authorized {
                                ErrorCode::CLUSTER_AUTHORIZATION_FAILED
                            } else {
                                core.append_txn_marker(&name, p, &marker)
                                    .err()
                                    .unwrap_or(ErrorCode::NONE)
                            };
                            WritableTxnMarkerPartitionResult::default()
                                .with_partition_index(p)
                                .with_error_code(code.0)
                        })
                        .collect();
                    WritableTxnMarkerTopicResult::default()
                        .with_name(t.name)
                        .with_partitions(partitions)
                })
                .collect();
            WritableTxnMarkerResult::default()
                .with_producer_id(m.producer_id)
                .with_topics(topics)
        })
        .collect();
    WriteTxnMarkersResponse::default().with_markers(markers)
}
