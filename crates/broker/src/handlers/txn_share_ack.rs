//! TxnShareAcknowledge (KIP-1289, apiKey 95): stage share acknowledgements
//! in a producer's transaction.
//!
//! Order of checks (docs/DESIGN.md D14): the feature gate (answered by the
//! dispatcher), INVALID_REQUEST for a null or empty group, transactional or
//! member id; TRANSACTIONAL_ID_AUTHORIZATION_FAILED (Write on the
//! transactional id), GROUP_AUTHORIZATION_FAILED (Read on the group),
//! TOPIC_AUTHORIZATION_FAILED (Read on every known topic of the request; a
//! top-level error, as the KIP lists it, so nothing of the request is
//! staged); the producer (TRANSACTIONAL_ID_NOT_FOUND,
//! INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED, INVALID_PRODUCER_EPOCH,
//! CONCURRENT_TRANSACTIONS while the previous transaction's markers are
//! pending); the member (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH); then each
//! partition (UNKNOWN_TOPIC_ID, UNKNOWN_TOPIC_OR_PARTITION, INVALID_REQUEST
//! for malformed batches, INVALID_RECORD_STATE for types other than ACCEPT,
//! REJECT and GAP or records the member does not hold ACQUIRED).
//!
//! Before anything is staged, every well-addressed share partition is
//! registered with the transaction coordinator as a *share participant*
//! (D3); if that fails (corner case 2) nothing is staged and the error is
//! top-level. A partition whose validation fails stages nothing; the others
//! of the request still stage (per-partition errors, D7); the client aborts
//! the whole transaction on any error. A registered participant whose
//! staging failed receives a marker that changes nothing (D10).

use std::collections::HashSet;
use std::sync::Arc;

use super::RequestContext;
use super::txn::blocking;
use crate::acl::{AclOperation, Resource};
use crate::core::BrokerCore;
use crate::share::RawAcknowledgementBatch;
use crate::txn::Participant;
use sharestream_protocol::ErrorCode;
use sharestream_protocol::txn_share_ack::{
    TxnShareAcknowledgePartitionResponse, TxnShareAcknowledgeRequest, TxnShareAcknowledgeResponse,
    TxnShareAcknowledgeTopicResponse,
};

fn top_level(code: ErrorCode) -> TxnShareAcknowledgeResponse {
    TxnShareAcknowledgeResponse {
        error_code: code.0,
        ..Default::default()
    }
}

fn non_empty(s: &Option<String>) -> Option<&str> {
    s.as_deref().filter(|s| !s.is_empty())
}

pub(crate) async fn handle(
    core: &Arc<BrokerCore>,
    ctx: &RequestContext,
    req: TxnShareAcknowledgeRequest,
) -> TxnShareAcknowledgeResponse {
    let ctx = ctx.clone();
    blocking(core, move |core| stage(core, &ctx, req)).await
}

fn stage(
    core: &BrokerCore,
    ctx: &RequestContext,
    req: TxnShareAcknowledgeRequest,
) -> TxnShareAcknowledgeResponse {
    let (Some(group), Some(txn_id), Some(member)) = (
        non_empty(&req.group_id),
        non_empty(&req.transactional_id),
        non_empty(&req.member_id),
    ) else {
        return top_level(ErrorCode::INVALID_REQUEST);
    };
    let (pid, epoch) = (req.producer_id, req.producer_epoch);

    // Authorization (D14): Write on the transactional id, then Read on the
    // group, then Read on the topics.
    if !ctx.allowed(
        core,
        AclOperation::Write,
        &Resource::transactional_id(txn_id),
    ) {
        return top_level(ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED);
    }
    if !ctx.allowed(core, AclOperation::Read, &Resource::group(group)) {
        return top_level(ErrorCode::GROUP_AUTHORIZATION_FAILED);
    }
    // Read on each topic: the KIP lists TOPIC_AUTHORIZATION_FAILED among the
    // top-level errors, so one refused topic refuses the whole request
    // before the producer or the member is looked at (unknown topic ids
    // are per-partition UNKNOWN_TOPIC_ID below).
    {
        let reg = core.topics().read();
        let denied = req.topics.iter().any(|t| {
            reg.get_by_id(&t.topic_id)
                .is_some_and(|m| !ctx.allowed(core, AclOperation::Read, &Resource::topic(&m.name)))
        });
        if denied {
            return top_level(ErrorCode::TOPIC_AUTHORIZATION_FAILED);
        }
    }

    // The producer.
    if let Err(code) = core
        .txn()
        .with_coordinator(|c| c.verify_txn_for_staging(txn_id, pid, epoch))
    {
        return top_level(code);
    }
    // The member, at its current epoch (D7, D13).
    if let Err(code) = core
        .shares()
        .validate_member(group, member, req.member_epoch)
    {
        let code = if code == ErrorCode::FENCED_MEMBER_EPOCH {
            // The KIP lists STALE_MEMBER_EPOCH for any epoch mismatch.
            ErrorCode::STALE_MEMBER_EPOCH
        } else {
            code
        };
        return top_level(code);
    }

    // Address every partition; collect the share participants.
    struct Target {
        topic_index: usize,
        partition_index: i32,
        error: Option<(ErrorCode, String)>,
        topic_id: uuid::Uuid,
        batches: Vec<RawAcknowledgementBatch>,
    }
    let mut targets = Vec::new();
    let mut participants = Vec::new();
    let mut seen = HashSet::new();
    {
        let reg = core.topics().read();
        for (ti, t) in req.topics.iter().enumerate() {
            let meta = reg.get_by_id(&t.topic_id);
            for p in &t.partitions {
                let error = match meta {
                    None => Some((
                        ErrorCode::UNKNOWN_TOPIC_ID,
                        format!("Unknown topic id {}", t.topic_id),
                    )),
                    Some(m) if p.partition_index < 0 || p.partition_index >= m.partitions => {
                        Some((
                            ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
                            format!("{} has no partition {}", m.name, p.partition_index),
                        ))
                    }
                    Some(_) if !seen.insert((t.topic_id, p.partition_index)) => Some((
                        ErrorCode::INVALID_REQUEST,
                        "The partition appears twice in the request".to_string(),
                    )),
                    Some(_) if p.acknowledgement_batches.is_empty() => Some((
                        ErrorCode::INVALID_REQUEST,
                        "No acknowledgement batch for the partition".to_string(),
                    )),
                    Some(_) => None,
                };
                if error.is_none()
                    && let Some(m) = meta
                {
                    participants.push(Participant::Share {
                        group_id: group.to_string(),
                        topic_id: t.topic_id,
                        topic: m.name.clone(),
                        partition: p.partition_index,
                    });
                }
                targets.push(Target {
                    topic_index: ti,
                    partition_index: p.partition_index,
                    error,
                    topic_id: t.topic_id,
                    batches: p.acknowledgement_batches.iter().map(Into::into).collect(),
                });
            }
        }
    }

    // Register the share participants (D3). Nothing is staged if this fails.
    if !participants.is_empty()
        && let Err(code) =
            core.txn_call(|c, now| c.add_share_participants(now, txn_id, pid, epoch, &participants))
    {
        return top_level(code);
    }

    // A fence or a transaction timeout may land here: the share partition
    // refuses a staging below the epoch of a marker it already applied
    // (D16), so this request then stages nothing.
    sharestream_common::failpoints::pause_blocking("broker.txn_share_ack.before_stage");

    // Stage, partition by partition.
    let now = core.now_ms();
    let mut responses: Vec<TxnShareAcknowledgeTopicResponse> = req
        .topics
        .iter()
        .map(|t| TxnShareAcknowledgeTopicResponse {
            topic_id: t.topic_id,
            partitions: Vec::new(),
        })
        .collect();
    for t in targets {
        let result = match t.error {
            Some(e) => Err(e),
            None => core
                .shares()
                .stage(
                    group,
                    member,
                    req.member_epoch,
                    t.topic_id,
                    t.partition_index,
                    pid,
                    epoch,
                    &t.batches,
                    now,
                )
                .map_err(|code| (code, staging_message(code))),
        };
        let (error_code, error_message) = match result {
            Ok(()) => (0, None),
            Err((code, msg)) => (code.0, Some(msg)),
        };
        responses[t.topic_index]
            .partitions
            .push(TxnShareAcknowledgePartitionResponse {
                partition_index: t.partition_index,
                error_code,
                error_message,
                ..Default::default()
            });
    }
    TxnShareAcknowledgeResponse {
        responses,
        ..Default::default()
    }
}

fn staging_message(code: ErrorCode) -> String {
    match code {
        ErrorCode::INVALID_RECORD_STATE => "Only ACCEPT, REJECT and GAP of records this member holds ACQUIRED can be staged in a transaction".to_string(),
        ErrorCode::PRODUCER_FENCED => "The transaction of this producer epoch already ended (fenced or timed out) before its acknowledgements could be staged".to_string(),
        ErrorCode::INVALID_REQUEST => "Malformed acknowledgement batches (first <= last, sorted, non-overlapping, one type or one per offset)".to_string(),
        other => other.to_string(),
    }
}
