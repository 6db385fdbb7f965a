//! AlterShareGroupOffsets (key 91, v0) and DeleteShareGroupOffsets (key
//! 92, v0): what `kafka-share-groups.sh --reset-offsets --execute` and
//! `--delete-offsets` send. The state changes are
//! [`ShareService`](crate::share_service::ShareService)'s (its
//! `offsets_admin` module has Kafka's rules); these functions check
//! authorization and topics, and translate.
//!
//! Order of checks, as Kafka's KafkaApis: the share feature
//! (UNSUPPORTED_VERSION, top level), the group (Read for Alter, Delete for
//! Delete; GROUP_AUTHORIZATION_FAILED, top level), then per topic Read on
//! the topic (TOPIC_AUTHORIZATION_FAILED) and its existence
//! (UNKNOWN_TOPIC_OR_PARTITION); a partition beyond the topic's count is
//! UNKNOWN_TOPIC_OR_PARTITION. The group's own refusal (INVALID_GROUP_ID,
//! GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP) is a top-level error with no
//! topics, as Kafka answers it. The answer waits until the change is in
//! the share-state journal (KAFKA_STORAGE_ERROR otherwise).

use kafka_protocol::messages::alter_share_group_offsets_response as alter;
use kafka_protocol::messages::delete_share_group_offsets_response as delete;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use super::RequestContext;
use crate::acl::{AclOperation, Resource};
use crate::core::BrokerCore;
use crate::group::GroupError;
use crate::share_service::AdminOutcome;
use crate::share_service::Pending;
use sharestream_protocol::ErrorCode;

fn s(v: impl Into<String>) -> StrBytes {
    StrBytes::from_string(v.into())
}

/// The broker's own refusal of a partition or topic: code and message.
type Refusal = (ErrorCode, &'static str);

const TOPIC_DENIED: &str = "Topic authorization failed.";
const UNKNOWN_TOPIC: &str = "This server does not host this topic-partition.";

/// The checks before any topic is looked at: the share feature
/// (UNSUPPORTED_VERSION), then `op` on the group
/// (GROUP_AUTHORIZATION_FAILED).
fn group_gate(
    core: &BrokerCore,
    ctx: &RequestContext,
    group_id: &str,
    op: AclOperation,
) -> Result<(), (ErrorCode, String)> {
    if !core.features().share_groups_enabled() {
        return Err((
            ErrorCode::UNSUPPORTED_VERSION,
            "Share groups are not enabled.".into(),
        ));
    }
    if !ctx.allowed(core, op, &Resource::group(group_id)) {
        return Err((
            ErrorCode::GROUP_AUTHORIZATION_FAILED,
            format!("Not authorized to {op:?} the group."),
        ));
    }
    Ok(())
}

/// A topic's refusal before the share service is asked: Read on the topic
/// (TOPIC_AUTHORIZATION_FAILED), then its existence
/// (UNKNOWN_TOPIC_OR_PARTITION).
fn topic_refusal(
    core: &BrokerCore,
    ctx: &RequestContext,
    name: &str,
    exists: bool,
) -> Option<Refusal> {
    if !ctx.allowed(core, AclOperation::Read, &Resource::topic(name)) {
        Some((ErrorCode::TOPIC_AUTHORIZATION_FAILED, TOPIC_DENIED))
    } else if !exists {
        Some((ErrorCode::UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC))
    } else {
        None
    }
}

/// Waits until the share service's change is in the journal, then gives
/// its per-entry outcomes, or the top-level error to answer with (the
/// group's refusal, or KAFKA_STORAGE_ERROR).
async fn durable_outcomes(
    pending: Pending<Result<Vec<AdminOutcome>, GroupError>>,
) -> Result<std::vec::IntoIter<AdminOutcome>, (ErrorCode, String)> {
    let (out, durable) = pending.split();
    if let Err(code) = durable.wait().await {
        return Err((code, "The share state could not be written.".into()));
    }
    out.map(Vec::into_iter)
        .map_err(|GroupError { code, message }| (code, message))
}

/// The error of one entry: the broker's own refusal, else the share
/// service's outcome (taken in order, one per entry it was asked about).
fn outcome(
    refusal: Option<Refusal>,
    outcomes: &mut impl Iterator<Item = Result<(), GroupError>>,
) -> Option<(ErrorCode, String)> {
    match refusal {
        Some((code, msg)) => Some((code, msg.to_string())),
        None => match outcomes.next() {
            Some(Ok(())) => None,
            Some(Err(e)) => Some((e.code, e.message)),
            None => Some((ErrorCode::UNKNOWN_SERVER_ERROR, "missing outcome".into())),
        },
    }
}

pub(crate) async fn alter_share_group_offsets(
    core: &BrokerCore,
    ctx: &RequestContext,
    req: AlterShareGroupOffsetsRequest,
) -> AlterShareGroupOffsetsResponse {
    let top = |code: ErrorCode, message: String| {
        AlterShareGroupOffsetsResponse::default()
            .with_error_code(code.0)
            .with_error_message(Some(s(message)))
    };
    let group_id = req.group_id.0.to_string();
    if let Err((code, message)) = group_gate(core, ctx, &group_id, AclOperation::Read) {
        return top(code, message);
    }
    // Per topic: (name, id, [(partition, the broker's refusal)]).
    type Row = (TopicName, Uuid, Vec<(i32, Option<Refusal>)>);
    let mut rows: Vec<Row> = Vec::with_capacity(req.topics.len());
    let mut asked: Vec<(Uuid, i32, i64)> = Vec::new();
    {
        let reg = core.topics().read();
        for t in req.topics {
            let name = t.topic_name.0.to_string();
            let meta = reg.get(&name);
            let id = meta.map_or(Uuid::nil(), |m| m.id);
            let topic_error = topic_refusal(core, ctx, &name, meta.is_some());
            let count = meta.map_or(0, |m| m.partitions);
            let parts = t
                .partitions
                .iter()
                .map(|p| {
                    let i = p.partition_index;
                    let error = topic_error.or_else(|| {
                        (i < 0 || i >= count)
                            .then_some((ErrorCode::UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC))
                    });
                    if error.is_none() {
                        asked.push((id, i, p.start_offset));
                    }
                    (i, error)
                })
                .collect();
            rows.push((t.topic_name, id, parts));
        }
    }
    let mut outcomes =
        match durable_outcomes(core.shares().alter_offsets_deferred(&group_id, &asked)).await {
            Ok(o) => o,
            Err((code, message)) => return top(code, message),
        };
    let responses = rows
        .into_iter()
        .map(|(name, id, parts)| {
            alter::AlterShareGroupOffsetsResponseTopic::default()
                .with_topic_name(name)
                .with_topic_id(id)
                .with_partitions(
                    parts
                        .into_iter()
                        .map(|(i, refusal)| {
                            let p = alter::AlterShareGroupOffsetsResponsePartition::default()
                                .with_partition_index(i);
                            let error = outcome(refusal, &mut outcomes);
                            match error {
                                None => p,
                                Some((code, msg)) => {
                                    p.with_error_code(code.0).with_error_message(Some(s(msg)))
                                }
                            }
                        })
                        .collect(),
                )
        })
        .collect();
    AlterShareGroupOffsetsResponse::default().with_responses(responses)
}

pub(crate) async fn delete_share_group_offsets(
    core: &BrokerCore,
    ctx: &RequestContext,
    req: DeleteShareGroupOffsetsRequest,
) -> DeleteShareGroupOffsetsResponse {
    let top = |code: ErrorCode, message: String| {
        DeleteShareGroupOffsetsResponse::default()
            .with_error_code(code.0)
            .with_error_message(Some(s(message)))
    };
    let group_id = req.group_id.0.to_string();
    if let Err((code, message)) = group_gate(core, ctx, &group_id, AclOperation::Delete) {
        return top(code, message);
    }
    // Per topic: (name, id, the broker's refusal).
    let mut rows: Vec<(TopicName, Uuid, Option<Refusal>)> = Vec::new();
    let mut asked: Vec<Uuid> = Vec::new();
    {
        let reg = core.topics().read();
        for t in req.topics {
            let name = t.topic_name.0.to_string();
            let meta = reg.get(&name);
            let id = meta.map_or(Uuid::nil(), |m| m.id);
            let refusal = topic_refusal(core, ctx, &name, meta.is_some());
            if refusal.is_none() {
                asked.push(id);
            }
            rows.push((t.topic_name, id, refusal));
        }
    }
    let mut outcomes =
        match durable_outcomes(core.shares().delete_offsets_deferred(&group_id, &asked)).await {
            Ok(o) => o,
            Err((code, message)) => return top(code, message),
        };
    let responses = rows
        .into_iter()
        .map(|(name, id, refusal)| {
            let t = delete::DeleteShareGroupOffsetsResponseTopic::default()
                .with_topic_name(name)
                .with_topic_id(id);
            let error = outcome(refusal, &mut outcomes);
            match error {
                None => t,
                Some((code, msg)) => t.with_error_code(code.0).with_error_message(Some(s(msg))),
            }
        })
        .collect();
    DeleteShareGroupOffsetsResponse::default().with_responses(responses)
}

/// DeleteGroups of a share group (the caller has checked Delete on the
/// group): NONE, GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, or
/// KAFKA_STORAGE_ERROR if the deletion could not be written.
pub(crate) async fn delete_share_group(core: &BrokerCore, group_id: &str) -> ErrorCode {
    let (out, durable) = core.shares().delete_group_deferred(group_id).split();
    if let Err(code) = durable.wait().await {
        return code;
    }
    match out {
        Ok(()) => ErrorCode::NONE,
        Err(e) => e.code,
    }
}
