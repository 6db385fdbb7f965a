//! Consumer groups, classic protocol: JoinGroup, SyncGroup, Heartbeat,
//! LeaveGroup; committed offsets: OffsetCommit, OffsetFetch (v8+ with
//! several groups), TxnOffsetCommit.
//!
//! Authorization as Kafka's KafkaApis checks it:
//! - JoinGroup, SyncGroup, Heartbeat, LeaveGroup: Read on the group, else
//!   GROUP_AUTHORIZATION_FAILED.
//! - OffsetCommit: Read on the group (every partition
//!   GROUP_AUTHORIZATION_FAILED), Read on each topic (its partitions
//!   TOPIC_AUTHORIZATION_FAILED); an unknown topic or partition is
//!   UNKNOWN_TOPIC_OR_PARTITION.
//! - OffsetFetch: Describe on each group (GROUP_AUTHORIZATION_FAILED),
//!   Describe on each topic (TOPIC_AUTHORIZATION_FAILED for a listed one; a
//!   fetch of all topics leaves out the topics it may not describe).
//! - TxnOffsetCommit: Write on the transactional id, Read on the group,
//!   Read on each topic.
//!
//! The coordinator's records are fsynced by the service; in disk mode the
//! calls that may write run off the reactor.

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

use super::RequestContext;
use super::txn::blocking;
use crate::acl::{AclOperation, Resource};
use crate::consumer_group::{
    CommittedOffset, JoinGroupRequest as CoordJoin, JoinGroupResponse as CoordJoinResponse,
    LeaveMember, OffsetCommitRequest as CoordCommit, PartitionOffset,
    SyncGroupRequest as CoordSync, SyncGroupResponse as CoordSyncResponse,
};
use crate::consumer_groups::wait;
use crate::core::BrokerCore;
use sharestream_protocol::ErrorCode;
use uuid::Uuid;

fn s(v: impl Into<String>) -> StrBytes {
    StrBytes::from_string(v.into())
}

fn opt(v: &Option<StrBytes>) -> Option<String> {
    v.as_ref().map(|x| x.to_string())
}

fn client_host(ctx: &RequestContext) -> String {
    format!("/{}", ctx.host)
}

fn join_response(version: i16, r: CoordJoinResponse) -> JoinGroupResponse {
    let mut resp = JoinGroupResponse::default()
        .with_error_code(r.error.0)
        .with_generation_id(r.generation_id)
        .with_leader(s(r.leader))
        .with_member_id(s(r.member_id))
        .with_members(
            r.members
                .into_iter()
                .map(|m| {
                    JoinGroupResponseMember::default()
                        .with_member_id(s(m.member_id))
                        .with_group_instance_id(if version >= 5 {
                            m.group_instance_id.map(s)
                        } else {
                            None
                        })
                        .with_metadata(m.metadata)
                })
                .collect(),
        );
    // ProtocolName is nullable from v7 only; ProtocolType exists from v7,
    // SkipAssignment from v9.
    resp.protocol_name = if version >= 7 {
        r.protocol_name.map(s)
    } else {
        Some(s(r.protocol_name.unwrap_or_default()))
    };
    if version >= 7 {
        resp.protocol_type = r.protocol_type.map(s);
    }
    if version >= 9 {
        resp.skip_assignment = r.skip_assignment;
    }
    resp
}

pub(crate) async fn join_group(
    core: &Arc<BrokerCore>,
    ctx: &RequestContext,
    req: JoinGroupRequest,
) -> JoinGroupResponse {
    let version = ctx.version();
    let group_id = req.group_id.0.to_string();
    if !ctx.allowed(core, AclOperation::Read, &Resource::group(&group_id)) {
        return join_response(
            version,
            CoordJoinResponse::error(ErrorCode::GROUP_AUTHORIZATION_FAILED, ""),
        );
    }
    let creq = CoordJoin {
        group_id,
        member_id: req.member_id.to_string(),
        group_instance_id: if version >= 5 {
            opt(&req.group_instance_id)
        } else {
            None
        },
        protocol_type: req.protocol_type.to_string(),
        protocols: req
            .protocols
            .iter()
            .map(|p| (p.name.to_string(), p.metadata.clone()))
            .collect(),
        session_timeout_ms: req.session_timeout_ms,
        rebalance_timeout_ms: if version >= 1 {
            req.rebalance_timeout_ms
        } else {
            req.session_timeout_ms
        },
        require_known_member_id: version >= 4,
        supports_skip_assignment: version >= 9,
        client_id: ctx.header.client_id.clone().unwrap_or_default(),
        client_host: client_host(ctx),
    };
    let member_id = creq.member_id.clone();
    let pending = blocking(core, move |c| c.consumer_groups().join(&creq, c.now_ms())).await;
    let r = wait(pending, || {
        CoordJoinResponse::error(ErrorCode::COORDINATOR_NOT_AVAILABLE, member_id)
    })
    .await;
    join_response(version, r)
}

fn sync_response(version: i16, r: CoordSyncResponse) -> SyncGroupResponse {
    let mut resp = SyncGroupResponse::default()
        .with_error_code(r.error.0)
        .with_assignment(r.assignment);
    if version >= 5 {
        resp.protocol_type = r.protocol_type.map(s);
        resp.protocol_name = r.protocol_name.map(s);
    }
    resp
}

pub(crate) async fn sync_group(
    core: &Arc<BrokerCore>,
    ctx: &RequestContext,
    req: SyncGroupRequest,
) -> SyncGroupResponse {
    let version = ctx.version();
    let group_id = req.group_id.0.to_string();
    if !ctx.allowed(core, AclOperation::Read, &Resource::group(&group_id)) {
        return sync_response(
            version,
            CoordSyncResponse::error(ErrorCode::GROUP_AUTHORIZATION_FAILED),
        );
    }
    let creq = CoordSync {
        group_id,
        generation_id: req.generation_id,
        member_id: req.member_id.to_string(),
        group_instance_id: opt(&req.group_instance_id),
        protocol_type: opt(&req.protocol_type),
        protocol_name: opt(&req.protocol_name),
        assignments: req
            .assignments
            .iter()
            .map(|a| (a.member_id.to_string(), a.assignment.clone()))
            .collect(),
    };
    let pending = blocking(core, move |c| c.consumer_groups().sync(&creq, c.now_ms())).await;
    let r = wait(pending, || {
        CoordSyncResponse::error(ErrorCode::COORDINATOR_NOT_AVAILABLE)
    })
    .await;
    sync_response(version, r)
}

pub(crate) fn heartbeat(
    core: &BrokerCore,
    ctx: &RequestContext,
    req: HeartbeatRequest,
) -> HeartbeatResponse {
    let group_id = req.group_id.0.to_string();
    if !ctx.allowed(core, AclOperation::Read, &Resource::group(&group_id)) {
        return HeartbeatResponse::default()
            .with_error_code(ErrorCode::GROUP_AUTHORIZATION_FAILED.0);
    }
    let code = core.consumer_groups().heartbeat(
        &group_id,
        &req.member_id,
        req.group_instance_id.as_deref(),
        req.generation_id,
        core.now_ms(),
    );
    HeartbeatResponse::default().with_error_code(code.0)
}

pub(crate) async fn leave_group(
    core: &Arc<BrokerCore>,
    ctx: &RequestContext,
    req: LeaveGroupRequest,
) -> LeaveGroupResponse {
    let version = ctx.version();
    let group_id = req.group_id.0.to_string();
    if !ctx.allowed(core, AclOperation::Read, &Resource::group(&group_id)) {
        return LeaveGroupResponse::default()
            .with_error_code(ErrorCode::GROUP_AUTHORIZATION_FAILED.0);
    }
    let members: Vec<LeaveMember> = if version >= 3 {
        req.members
            .iter()
            .map(|m| LeaveMember {
                member_id: m.member_id.to_string(),
                group_instance_id: opt(&m.group_instance_id),
            })
            .collect()
    } else {
        vec![LeaveMember {
            member_id: req.member_id.to_string(),
            group_instance_id: None,
        }]
    };
    let asked = members.clone();
    let gid = group_id.clone();
    let result = blocking(core, move |c| {
        c.consumer_groups().leave(&gid, &asked, c.now_ms())
    })
    .await;
    match result {
        Err(code) => LeaveGroupResponse::default().with_error_code(code.0),
        Ok(codes) if version < 3 => LeaveGroupResponse::default()
            .with_error_code(codes.first().copied().unwrap_or(ErrorCode::NONE).0),
        Ok(codes) => LeaveGroupResponse::default().with_members(
            members
                .into_iter()
                .zip(codes)
                .map(|(m, code)| {
                    MemberResponse::default()
                        .with_member_id(s(m.member_id))
                        .with_group_instance_id(m.group_instance_id.map(s))
                        .with_error_code(code.0)
                })
                .collect(),
        ),
    }
}

/// Per-partition codes of a commit: the broker's own checks (topic
/// authorization, existence), then the coordinator's.
struct CommitPlan {
    /// (topic, partition, code) in request order; `None` = for the
    /// coordinator.
    rows: Vec<(String, i32, Option<ErrorCode>)>,
    /// The offsets to hand to the coordinator, in the order of the `None`
    /// rows.
    offsets: Vec<PartitionOffset>,
    /// The ids of their topics.
    topic_ids: BTreeMap<String, Uuid>,
}

fn plan_commit<'a>(
    core: &BrokerCore,
    ctx: &RequestContext,
    now_ms: i64,
    topics: impl Iterator<Item = (String, Vec<(i32, i64, i32, Option<String>)>)> + 'a,
) -> CommitPlan {
    let mut plan = CommitPlan {
        rows: Vec::new(),
        offsets: Vec::new(),
        topic_ids: BTreeMap::new(),
    };
    let registry = core.topics().read();
    for (topic, partitions) in topics {
        let authorized = ctx.allowed(core, AclOperation::Read, &Resource::topic(&topic));
        let known = registry.get(&topic);
        let count = known.map(|t| t.partitions);
        if let Some(t) = known {
            plan.topic_ids.insert(topic.clone(), t.id);
        }
        for (partition, offset, leader_epoch, metadata) in partitions {
            let code = if !authorized {
                Some(ErrorCode::TOPIC_AUTHORIZATION_FAILED)
            } else if count.is_none_or(|n| partition < 0 || partition >= n) {
                Some(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION)
            } else {
                plan.offsets.push(PartitionOffset {
                    topic: topic.clone(),
                    partition,
                    offset: CommittedOffset {
                        offset,
                        leader_epoch,
                        metadata: metadata.unwrap_or_default(),
                        commit_timestamp_ms: now_ms,
                    },
                });
                None
            };
            plan.rows.push((topic.clone(), partition, code));
        }
    }
    plan
}

/// Merges the coordinator's answer into the plan: (topic, partition, code)
/// in request order.
fn resolve_commit(
    plan: CommitPlan,
    result: Result<Vec<ErrorCode>, ErrorCode>,
) -> Vec<(String, i32, ErrorCode)> {
    let mut codes = match result {
        Ok(codes) => codes.into_iter(),
        Err(code) => vec![code; plan.offsets.len()].into_iter(),
    };
    plan.rows
        .into_iter()
        .map(|(t, p, c)| {
            let code = c.unwrap_or_else(|| codes.next().unwrap_or(ErrorCode::UNKNOWN_SERVER_ERROR));
            (t, p, code)
        })
        .collect()
}

/// Groups rows by topic, keeping the request's order.
fn by_topic(rows: Vec<(String, i32, ErrorCode)>) -> Vec<(String, Vec<(i32, ErrorCode)>)> {
    let mut out: Vec<(String, Vec<(i32, ErrorCode)>)> = Vec::new();
    for (t, p, c) in rows {
        match out.last_mut() {
            Some((last, ps)) if *last == t => ps.push((p, c)),
            _ => out.push((t, vec![(p, c)])),
        }
    }
    out
}

pub(crate) async fn offset_commit(
    core: &Arc<BrokerCore>,
    ctx: &RequestContext,
    req: OffsetCommitRequest,
) -> OffsetCommitResponse {
    let version = ctx.version();
    let group_id = req.group_id.0.to_string();
    let now = core.now_ms();
    let topics = req.topics.iter().map(|t| {
        (
            t.name.0.to_string(),
            t.partitions
                .iter()
                .map(|p| {
                    (
                        p.partition_index,
                        p.committed_offset,
                        if version >= 6 {
                            p.committed_leader_epoch
                        } else {
                            -1
                        },
                        opt(&p.committed_metadata),
                    )
                })
                .collect(),
        )
    });
    let rows = if !ctx.allowed(core, AclOperation::Read, &Resource::group(&group_id)) {
        req.topics
            .iter()
            .flat_map(|t| {
                t.partitions.iter().map(|p| {
                    (
                        t.name.0.to_string(),
                        p.partition_index,
                        ErrorCode::GROUP_AUTHORIZATION_FAILED,
                    )
                })
            })
            .collect()
    } else {
        let plan = plan_commit(core, ctx, now, topics);
        let creq = CoordCommit {
            group_id,
            generation_id: req.generation_id_or_member_epoch,
            member_id: req.member_id.to_string(),
            group_instance_id: if version >= 7 {
                opt(&req.group_instance_id)
            } else {
                None
            },
            api_version: version,
            offsets: plan.offsets.clone(),
            topic_ids: plan.topic_ids.clone(),
        };
        let result = if creq.offsets.is_empty() && creq.group_id.is_empty() {
            Err(ErrorCode::INVALID_GROUP_ID)
        } else {
            blocking(core, move |c| {
                c.consumer_groups().commit_offsets(&creq, now)
            })
            .await
        };
        resolve_commit(plan, result)
    };
    OffsetCommitResponse::default().with_topics(
        by_topic(rows)
            .into_iter()
            .map(|(t, ps)| {
                OffsetCommitResponseTopic::default()
                    .with_name(TopicName(s(t)))
                    .with_partitions(
                        ps.into_iter()
                            .map(|(p, c)| {
                                OffsetCommitResponsePartition::default()
                                    .with_partition_index(p)
                                    .with_error_code(c.0)
                            })
                            .collect(),
                    )
            })
            .collect(),
    )
}

pub(crate) async fn txn_offset_commit(
    core: &Arc<BrokerCore>,
    ctx: &RequestContext,
    req: TxnOffsetCommitRequest,
) -> TxnOffsetCommitResponse {
    let version = ctx.version();
    let group_id = req.group_id.0.to_string();
    let txn_id = req.transactional_id.0.to_string();
    let (pid, epoch) = (req.producer_id.0, req.producer_epoch);
    let now = core.now_ms();
    let all = |code: ErrorCode| -> Vec<(String, i32, ErrorCode)> {
        req.topics
            .iter()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .map(move |p| (t.name.0.to_string(), p.partition_index, code))
            })
            .collect()
    };
    let rows = if !ctx.allowed(
        core,
        AclOperation::Write,
        &Resource::transactional_id(&txn_id),
    ) {
        all(ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    } else if !ctx.allowed(core, AclOperation::Read, &Resource::group(&group_id)) {
        all(ErrorCode::GROUP_AUTHORIZATION_FAILED)
    } else {
        let topics = req.topics.iter().map(|t| {
            (
                t.name.0.to_string(),
                t.partitions
                    .iter()
                    .map(|p| {
                        (
                            p.partition_index,
                            p.committed_offset,
                            if version >= 2 {
                                p.committed_leader_epoch
                            } else {
                                -1
                            },
                            opt(&p.committed_metadata),
                        )
                    })
                    .collect(),
            )
        });
        let plan = plan_commit(core, ctx, now, topics);
        let creq = CoordCommit {
            group_id: group_id.clone(),
            generation_id: if version >= 3 { req.generation_id } else { -1 },
            member_id: if version >= 3 {
                req.member_id.to_string()
            } else {
                String::new()
            },
            group_instance_id: if version >= 3 {
                opt(&req.group_instance_id)
            } else {
                None
            },
            api_version: version,
            offsets: plan.offsets.clone(),
            topic_ids: plan.topic_ids.clone(),
        };
        let result = blocking(core, move |c| {
            // The producer must be in a transaction that holds the group's
            // offsets partition: registered by AddOffsetsToTxn (v0-4), or
            // registered here (v5+, transactions v2).
            let checked = check_txn_for_offsets(c, version, &txn_id, pid, epoch, &group_id);
            match checked {
                Err(code) => Err(txn_offset_error(version, code)),
                Ok(()) => c
                    .consumer_groups()
                    .commit_txn_offsets(pid, epoch, &creq, now),
            }
        })
        .await;
        resolve_commit(plan, result)
    };
    TxnOffsetCommitResponse::default().with_topics(
        by_topic(rows)
            .into_iter()
            .map(|(t, ps)| {
                TxnOffsetCommitResponseTopic::default()
                    .with_name(TopicName(s(t)))
                    .with_partitions(
                        ps.into_iter()
                            .map(|(p, c)| {
                                TxnOffsetCommitResponsePartition::default()
                                    .with_partition_index(p)
                                    .with_error_code(c.0)
                            })
                            .collect(),
                    )
            })
            .collect(),
    )
}

/// The producer must be in a transaction that holds the group's offsets
/// partition: registered by AddOffsetsToTxn (v0-4, checked here as
/// AddPartitionsToTxn's verification checks it), or registered here (v5+,
/// transactions v2, KIP-890).
fn check_txn_for_offsets(
    c: &BrokerCore,
    version: i16,
    txn_id: &str,
    pid: i64,
    epoch: i16,
    group_id: &str,
) -> Result<(), ErrorCode> {
    use crate::txn::{
        CONSUMER_OFFSETS_TOPIC, Participant, TransactionVersion, TxnApi, TxnCoordinatorConfig,
        TxnOutput, error_for_version, offsets_partition_for,
    };
    // The broker runs its coordinator with the default partition count.
    let partition = offsets_partition_for(
        group_id,
        TxnCoordinatorConfig::default().offsets_topic_partitions,
    );
    if version >= 5 {
        let participant = Participant::log(CONSUMER_OFFSETS_TOPIC, partition);
        c.txn_call(|co, now| {
            let out = co.add_participants(
                now,
                txn_id,
                pid,
                epoch,
                &[participant],
                TransactionVersion::V2,
            );
            TxnOutput {
                result: out
                    .result
                    .map_err(|e| error_for_version(TxnApi::TxnOffsetCommit, version, e)),
                effects: out.effects,
            }
        })
    } else {
        let verified = c.txn().with_coordinator(|co| {
            co.verify_partitions_in_txn(
                txn_id,
                pid,
                epoch,
                &[(CONSUMER_OFFSETS_TOPIC.to_string(), partition)],
            )
        })?;
        match verified.first().map(|(_, code)| *code) {
            Some(ErrorCode::NONE) => Ok(()),
            Some(code) => Err(code),
            None => Err(ErrorCode::UNKNOWN_SERVER_ERROR),
        }
    }
}

/// TRANSACTION_ABORTABLE exists for TxnOffsetCommit v4+ only
/// (/work/shared/BROKER-COMPAT.md); older clients get INVALID_TXN_STATE.
fn txn_offset_error(version: i16, code: ErrorCode) -> ErrorCode {
    if code == ErrorCode::TRANSACTION_ABORTABLE && version < 4 {
        ErrorCode::INVALID_TXN_STATE
    } else {
        code
    }
}

/// One group's answer to OffsetFetch: a group-level error or the
/// partitions.
type FetchedGroup =
    Result<Vec<(String, Vec<(i32, i64, i32, Option<String>, ErrorCode)>)>, ErrorCode>;

fn fetch_group(
    core: &BrokerCore,
    ctx: &RequestContext,
    group_id: &str,
    topics: Option<Vec<(String, Vec<i32>)>>,
    require_stable: bool,
) -> FetchedGroup {
    if !ctx.allowed(core, AclOperation::Describe, &Resource::group(group_id)) {
        return Err(ErrorCode::GROUP_AUTHORIZATION_FAILED);
    }
    if group_id.is_empty() {
        return Err(ErrorCode::INVALID_GROUP_ID);
    }
    let may_describe = |t: &str| ctx.allowed(core, AclOperation::Describe, &Resource::topic(t));
    core.consumer_groups().with_coordinator(|c| {
        let row = |t: &str, p: i32| {
            if require_stable && c.has_pending_offset(group_id, t, p) {
                return (
                    p,
                    -1,
                    -1,
                    Some(String::new()),
                    ErrorCode::UNSTABLE_OFFSET_COMMIT,
                );
            }
            match c.committed(group_id, t, p) {
                Some(o) => (
                    p,
                    o.offset,
                    o.leader_epoch,
                    Some(o.metadata.clone()),
                    ErrorCode::NONE,
                ),
                None => (p, -1, -1, Some(String::new()), ErrorCode::NONE),
            }
        };
        Ok(match topics {
            Some(topics) => topics
                .into_iter()
                .map(|(t, ps)| {
                    let rows = if may_describe(&t) {
                        ps.into_iter().map(|p| row(&t, p)).collect()
                    } else {
                        ps.into_iter()
                            .map(|p| {
                                (
                                    p,
                                    -1,
                                    -1,
                                    Some(String::new()),
                                    ErrorCode::TOPIC_AUTHORIZATION_FAILED,
                                )
                            })
                            .collect()
                    };
                    (t, rows)
                })
                .collect(),
            None => {
                let mut grouped: BTreeMap<String, Vec<i32>> = BTreeMap::new();
                for (t, p, _) in c.committed_all(group_id) {
                    if may_describe(&t) {
                        grouped.entry(t).or_default().push(p);
                    }
                }
                grouped
                    .into_iter()
                    .map(|(t, ps)| {
                        let rows = ps.into_iter().map(|p| row(&t, p)).collect();
                        (t, rows)
                    })
                    .collect()
            }
        })
    })
}

pub(crate) fn offset_fetch(
    core: &BrokerCore,
    ctx: &RequestContext,
    req: OffsetFetchRequest,
) -> OffsetFetchResponse {
    let version = ctx.version();
    let require_stable = version >= 7 && req.require_stable;
    if version >= 8 {
        let groups = req
            .groups
            .iter()
            .map(|g| {
                let group_id = g.group_id.0.to_string();
                let topics = g.topics.as_ref().map(|ts| {
                    ts.iter()
                        .map(|t| (t.name.0.to_string(), t.partition_indexes.clone()))
                        .collect()
                });
                // v9+ (KIP-848): a member of a consumer-protocol group
                // fetches at its current epoch.
                let member_check = match (&g.member_id, version >= 9) {
                    (Some(m), true) if !m.is_empty() => core
                        .consumer_groups()
                        .validate_member_fetch(&group_id, m, g.member_epoch),
                    _ => Ok(()),
                };
                let fetched = member_check
                    .and_then(|()| fetch_group(core, ctx, &group_id, topics, require_stable));
                match fetched {
                    Err(code) => OffsetFetchResponseGroup::default()
                        .with_group_id(g.group_id.clone())
                        .with_error_code(code.0),
                    Ok(topics) => OffsetFetchResponseGroup::default()
                        .with_group_id(g.group_id.clone())
                        .with_topics(
                            topics
                                .into_iter()
                                .map(|(t, ps)| {
                                    OffsetFetchResponseTopics::default()
                                        .with_name(TopicName(s(t)))
                                        .with_partitions(
                                            ps.into_iter()
                                                .map(|(p, o, e, m, c)| {
                                                    OffsetFetchResponsePartitions::default()
                                                        .with_partition_index(p)
                                                        .with_committed_offset(o)
                                                        .with_committed_leader_epoch(e)
                                                        .with_metadata(m.map(s))
                                                        .with_error_code(c.0)
                                                })
                                                .collect(),
                                        )
                                })
                                .collect(),
                        ),
                }
            })
            .collect();
        return OffsetFetchResponse::default().with_groups(groups);
    }
    let group_id = req.group_id.0.to_string();
    let asked: Option<Vec<(String, Vec<i32>)>> = req.topics.as_ref().map(|ts| {
        ts.iter()
            .map(|t| (t.name.0.to_string(), t.partition_indexes.clone()))
            .collect()
    });
    let result = fetch_group(core, ctx, &group_id, asked.clone(), require_stable);
    let (top, topics) = match result {
        Ok(topics) => (ErrorCode::NONE, topics),
        // Before v2 errors are per partition only.
        Err(code) => (
            code,
            asked
                .unwrap_or_default()
                .into_iter()
                .map(|(t, ps)| {
                    let rows = ps
                        .into_iter()
                        .map(|p| (p, -1, -1, Some(String::new()), code))
                        .collect();
                    (t, rows)
                })
                .collect(),
        ),
    };
    let mut resp = OffsetFetchResponse::default().with_topics(
        topics
            .into_iter()
            .map(|(t, ps)| {
                OffsetFetchResponseTopic::default()
                    .with_name(TopicName(s(t)))
                    .with_partitions(
                        ps.into_iter()
                            .map(|(p, o, e, m, c)| {
                                OffsetFetchResponsePartition::default()
                                    .with_partition_index(p)
                                    .with_committed_offset(o)
                                    .with_committed_leader_epoch(if version >= 5 { e } else { -1 })
                                    .with_metadata(m.map(s))
                                    .with_error_code(c.0)
                            })
                            .collect(),
                    )
            })
            .collect(),
    );
    if version >= 2 {
        resp.error_code = top.0;
    }
    resp
}
