//! Share-group APIs (KIP-932): ShareGroupHeartbeat v1, ShareGroupDescribe
//! v1, ShareFetch v1-2, ShareAcknowledge v1-2, and group configs through
//! IncrementalAlterConfigs / DescribeConfigs on the GROUP resource.
//!
//! The state lives in [`ShareService`](crate::share_service::ShareService);
//! these functions translate requests and responses and run ShareFetch's
//! long poll. Every answer waits (without blocking a thread) until the
//! share state it reports is durable (docs/DESIGN.md D22).
//!
//! Check order of ShareFetch and ShareAcknowledge, as Kafka's: feature gate
//! (UNSUPPORTED_VERSION), Read on the group (GROUP_AUTHORIZATION_FAILED),
//! null group id (INVALID_REQUEST), member id
//! missing or longer than 36 characters (INVALID_REQUEST), member neither in
//! the group nor holding a share session (UNKNOWN_MEMBER_ID; a departed
//! member may only continue or close the session it had, not open one),
//! acknowledgements in a request that opens a
//! session (INVALID_REQUEST), then the share session (SHARE_SESSION_NOT_FOUND,
//! INVALID_SHARE_SESSION_EPOCH, SHARE_SESSION_LIMIT_REACHED). Then
//! acknowledgements are applied per partition (AcknowledgeErrorCode), and
//! records are acquired from the session's partitions (none at all when
//! MaxBytes or MaxRecords is 0: such a request is answered at once, as
//! Kafka's SharePartitionManager.processShareFetch does); a partition of a
//! topic the principal may not Read is answered TOPIC_AUTHORIZATION_FAILED
//! and neither acknowledged nor acquired, the others are served. A fetch that
//! acquires nothing waits until MaxWaitMs for new data, or for records made
//! AVAILABLE again by an acknowledgement, a lock expiry or a departure.
//! Repeated entries of one topic in a request are merged (librdkafka sends
//! them).
//!
//! Version 2 (Kafka 4.2): `ShareAcquireMode` record_limit (KIP-1206)
//! acquires at most MaxRecords records, splitting batches, where
//! batch_optimized (v1's only mode) finishes the last batch; an unknown mode
//! is INVALID_REQUEST. `IsRenewAck` (KIP-1222) marks a request whose
//! acknowledgements include Renew (4): ShareFetch then acknowledges and
//! fetches nothing, and must have MaxBytes, MinBytes, MaxRecords and
//! MaxWaitMs all 0 (else INVALID_REQUEST, as Kafka). A Renew in a v1 request
//! is INVALID_REQUEST. ShareAcknowledge v2 answers the group's
//! AcquisitionLockTimeoutMs.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::share_acknowledge_response as ack_resp;
use kafka_protocol::messages::share_fetch_response::{
    AcquiredRecords, LeaderIdAndEpoch, PartitionData, ShareFetchableTopicResponse,
};
use kafka_protocol::messages::share_group_describe_response as describe;
use kafka_protocol::messages::share_group_heartbeat_response as heartbeat;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use tracing::debug;
use uuid::Uuid;

use super::RequestContext;
use crate::acl::{AUTHORIZED_OPERATIONS_OMITTED, AclOperation, Resource};
use crate::core::BrokerCore;
use crate::group::coordinator::MAX_MEMBER_ID_LENGTH;
use crate::group::{ConfigSource, HeartbeatRequest};
use crate::share::RawAcknowledgementBatch;
use crate::share_service::{
    Durable, FINAL_SHARE_SESSION_EPOCH, INITIAL_SHARE_SESSION_EPOCH, TopicIdKey,
};
use sharestream_protocol::ErrorCode;
use sharestream_protocol::share_offsets_v1::{DescribeShareGroupOffsetsV1Response, UNKNOWN_LAG};
use sharestream_protocol::share_v2::{
    ShareAcknowledgeV2Request, ShareAcknowledgeV2Response, ShareFetchV2Request,
};

/// Config resource type GROUP (Kafka's ConfigResource.Type).
pub(crate) const RESOURCE_GROUP: i8 = 32;
/// Config resource type TOPIC.
const RESOURCE_TOPIC: i8 = 2;
/// Config resource type BROKER.
const RESOURCE_BROKER: i8 = 4;
/// Config resource type BROKER_LOGGER.
const RESOURCE_BROKER_LOGGER: i8 = 8;
/// DescribeConfigs source GROUP_CONFIG.
const SOURCE_GROUP_CONFIG: i8 = 8;
/// DescribeConfigs source DEFAULT_CONFIG.
const SOURCE_DEFAULT_CONFIG: i8 = 5;
/// Per-partition byte budget when the request gives none (ShareFetch v1
/// has no PartitionMaxBytes): Kafka's `max.partition.fetch.bytes`.
const DEFAULT_PARTITION_MAX_BYTES: usize = 1 << 20;

fn s(v: impl Into<String>) -> StrBytes {
    StrBytes::from_string(v.into())
}

fn disabled(core: &BrokerCore) -> bool {
    !core.features().share_groups_enabled()
}

// ----- ShareGroupHeartbeat / ShareGroupDescribe ------------------------------

pub(crate) async fn share_group_heartbeat(
    core: &BrokerCore,
    ctx: &RequestContext,
    req: ShareGroupHeartbeatRequest,
) -> ShareGroupHeartbeatResponse {
    let resp = ShareGroupHeartbeatResponse::default();
    if disabled(core) {
        return resp.with_error_code(ErrorCode::UNSUPPORTED_VERSION.0);
    }
    if !ctx.allowed(
        core,
        AclOperation::Read,
        &Resource::group(req.group_id.0.as_str()),
    ) {
        return resp.with_error_code(ErrorCode::GROUP_AUTHORIZATION_FAILED.0);
    }
    if let Some(topics) = &req.subscribed_topic_names
        && topics
            .iter()
            .any(|t| !ctx.allowed(core, AclOperation::Describe, &Resource::topic(t.0.as_str())))
    {
        return resp.with_error_code(ErrorCode::TOPIC_AUTHORIZATION_FAILED.0);
    }
    let hb = HeartbeatRequest {
        group_id: req.group_id.0.to_string(),
        member_id: req.member_id.to_string(),
        member_epoch: req.member_epoch,
        rack_id: req.rack_id.map(|r| r.to_string()),
        subscribed_topic_names: req
            .subscribed_topic_names
            .map(|v| v.into_iter().map(|t| t.0.to_string()).collect()),
        client_id: ctx.header.client_id.clone().unwrap_or_default(),
        client_host: String::new(),
    };
    let pending = {
        let topics = core.topics().read();
        core.shares()
            .heartbeat_deferred(&hb, core.now_ms(), &*topics)
    };
    let (out, durable) = pending.split();
    if let Err(code) = durable.wait().await {
        return resp.with_error_code(code.0);
    }
    debug!(
        connection = ctx.connection_id,
        group = %hb.group_id,
        member = %hb.member_id,
        member_epoch = hb.member_epoch,
        outcome = ?out.as_ref().map(|o| o.member_epoch).map_err(|e| e.code),
        "ShareGroupHeartbeat"
    );
    match out {
        Ok(o) => resp
            .with_member_id(Some(s(o.member_id)))
            .with_member_epoch(o.member_epoch)
            .with_heartbeat_interval_ms(o.heartbeat_interval_ms)
            .with_assignment(
                o.assignment
                    .map(|a| super::heartbeat_assignment!(heartbeat, a)),
            ),
        Err(e) => resp
            .with_error_code(e.code.0)
            .with_error_message(Some(s(e.message))),
    }
}

pub(crate) fn share_group_describe(
    core: &BrokerCore,
    ctx: &RequestContext,
    req: ShareGroupDescribeRequest,
) -> ShareGroupDescribeResponse {
    if disabled(core) {
        return ShareGroupDescribeResponse::default().with_groups(
            req.group_ids
                .into_iter()
                .map(|g| {
                    describe::DescribedGroup::default()
                        .with_group_id(g)
                        .with_error_code(ErrorCode::UNSUPPORTED_VERSION.0)
                })
                .collect(),
        );
    }
    // Describe on each group, as Kafka's: a group the principal may not
    // Describe is answered GROUP_AUTHORIZATION_FAILED without being looked
    // up; a described group whose members subscribe to or are assigned a
    // topic the principal may not Describe is answered
    // TOPIC_AUTHORIZATION_FAILED without its members.
    let may_describe_group =
        |g: &str| ctx.allowed(core, AclOperation::Describe, &Resource::group(g));
    let allowed: Vec<String> = req
        .group_ids
        .iter()
        .map(|g| g.0.to_string())
        .filter(|g| may_describe_group(g))
        .collect();
    let mut described: HashMap<String, describe::DescribedGroup> = HashMap::new();
    for g in core.shares().describe(&allowed) {
        let base = describe::DescribedGroup::default()
            .with_group_id(GroupId(s(g.group_id.clone())))
            .with_authorized_operations(AUTHORIZED_OPERATIONS_OMITTED);
        if let Some(e) = g.error {
            described.insert(
                g.group_id.clone(),
                base.with_error_code(e.code.0)
                    .with_error_message(Some(s(e.message))),
            );
            continue;
        }
        let topic_denied = g.members.iter().any(|m| {
            m.subscribed_topic_names
                .iter()
                .map(String::as_str)
                .chain(m.assignment.iter().map(|t| t.topic_name.as_str()))
                .any(|t| !ctx.allowed(core, AclOperation::Describe, &Resource::topic(t)))
        });
        if topic_denied {
            described.insert(
                g.group_id.clone(),
                base.with_error_code(ErrorCode::TOPIC_AUTHORIZATION_FAILED.0)
                    .with_error_message(Some(s(
                        "The group's members use topics this principal may not describe.",
                    ))),
            );
            continue;
        }
        let ops = if req.include_authorized_operations {
            ctx.authorized_operations(core, &Resource::group(&g.group_id))
        } else {
            AUTHORIZED_OPERATIONS_OMITTED
        };
        let group = base
            .with_authorized_operations(ops)
            .with_group_state(s(g.state.as_str()))
            .with_group_epoch(g.group_epoch)
            .with_assignment_epoch(g.assignment_epoch)
            .with_assignor_name(s(g.assignor_name))
            .with_members(
                g.members
                    .into_iter()
                    .map(|m| {
                        describe::Member::default()
                            .with_member_id(s(m.member_id))
                            .with_rack_id(m.rack_id.map(s))
                            .with_member_epoch(m.member_epoch)
                            .with_client_id(s(m.client_id))
                            .with_client_host(s(m.client_host))
                            .with_subscribed_topic_names(
                                m.subscribed_topic_names
                                    .into_iter()
                                    .map(|n| TopicName(s(n)))
                                    .collect(),
                            )
                            .with_assignment(
                                describe::Assignment::default().with_topic_partitions(
                                    m.assignment
                                        .into_iter()
                                        .map(|t| {
                                            describe::TopicPartitions::default()
                                                .with_topic_id(t.topic_id)
                                                .with_topic_name(TopicName(s(t.topic_name)))
                                                .with_partitions(t.partitions)
                                        })
                                        .collect(),
                                ),
                            )
                    })
                    .collect(),
            );
        described.insert(g.group_id, group);
    }
    let groups = req
        .group_ids
        .into_iter()
        .map(|g| match described.get(g.0.as_str()).cloned() {
            Some(d) => d,
            None => describe::DescribedGroup::default()
                .with_group_id(g)
                .with_error_code(ErrorCode::GROUP_AUTHORIZATION_FAILED.0)
                .with_error_message(Some(s("Not authorized to describe the group."))),
        })
        .collect();
    ShareGroupDescribeResponse::default().with_groups(groups)
}

// ----- common checks -----------------------------------------------------------

/// The request-level checks shared by ShareFetch and ShareAcknowledge,
/// Read on the group (GROUP_AUTHORIZATION_FAILED) right after the feature
/// gate, as Kafka's.
fn check_request(
    core: &BrokerCore,
    ctx: &RequestContext,
    group_id: Option<&GroupId>,
    member_id: Option<&StrBytes>,
) -> Result<(String, String), (ErrorCode, &'static str)> {
    if disabled(core) {
        return Err((
            ErrorCode::UNSUPPORTED_VERSION,
            "Share groups are not enabled.",
        ));
    }
    let group_name = group_id.map(|g| g.0.as_str()).unwrap_or("");
    if !ctx.allowed(core, AclOperation::Read, &Resource::group(group_name)) {
        return Err((
            ErrorCode::GROUP_AUTHORIZATION_FAILED,
            "Not authorized to read the group.",
        ));
    }
    let Some(group) = group_id else {
        return Err((ErrorCode::INVALID_REQUEST, "GroupId can't be null."));
    };
    let member = match member_id {
        Some(m) if !m.trim().is_empty() && m.chars().count() <= MAX_MEMBER_ID_LENGTH => m,
        _ => return Err((ErrorCode::INVALID_REQUEST, "Invalid MemberId.")),
    };
    let (group, member) = (group.0.to_string(), member.to_string());
    if !core.shares().has_member_or_session(&group, &member) {
        return Err((
            ErrorCode::UNKNOWN_MEMBER_ID,
            "The member is not in the share group.",
        ));
    }
    Ok((group, member))
}

/// Merges repeated (topic, partition) entries in request order; batches of
/// merged entries are sorted by first offset.
fn merge_entries(
    entries: impl Iterator<Item = (Uuid, i32, Option<i32>, Vec<RawAcknowledgementBatch>)>,
) -> Vec<(TopicIdKey, Option<i32>, Vec<RawAcknowledgementBatch>)> {
    let mut out: Vec<(TopicIdKey, Option<i32>, Vec<RawAcknowledgementBatch>)> = Vec::new();
    let mut index: HashMap<TopicIdKey, usize> = HashMap::new();
    for (topic, partition, max_bytes, batches) in entries {
        let tp = (topic, partition);
        match index.get(&tp) {
            Some(&i) => {
                let e = &mut out[i];
                if max_bytes.is_some() {
                    e.1 = max_bytes;
                }
                e.2.extend(batches);
                e.2.sort_by_key(|b| b.first_offset);
            }
            None => {
                index.insert(tp, out.len());
                out.push((tp, max_bytes, batches));
            }
        }
    }
    out
}

/// Why a topic-partition cannot be served, if it cannot.
fn partition_error(core: &BrokerCore, topic_id: Uuid, partition: i32) -> Option<ErrorCode> {
    let topics = core.topics().read();
    let Some(t) = topics.iter().find(|t| t.id == topic_id) else {
        return Some(ErrorCode::UNKNOWN_TOPIC_ID);
    };
    (partition < 0 || partition >= t.partitions).then_some(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION)
}

fn acknowledge_one(
    core: &BrokerCore,
    group: &str,
    member: &str,
    (topic_id, partition): TopicIdKey,
    batches: &[RawAcknowledgementBatch],
    now: i64,
    waits: &mut Waits,
) -> ErrorCode {
    if let Some(e) = partition_error(core, topic_id, partition) {
        return e;
    }
    let (out, durable) = core
        .shares()
        .acknowledge_deferred(group, member, topic_id, partition, batches, now)
        .split();
    if !durable.is_ready() {
        waits.acks.push(((topic_id, partition), durable));
    }
    match out {
        Ok(()) => ErrorCode::NONE,
        Err(e) => e,
    }
}

/// What an answer waits for before it goes out: the journal writes of its
/// acknowledgements and acquisitions (per partition, so that a failed
/// write is reported where it happened) and of the rest of the request.
#[derive(Debug, Default)]
struct Waits {
    acks: Vec<(TopicIdKey, Durable)>,
    acquisitions: Vec<(TopicIdKey, Durable)>,
    rest: Durable,
}

impl Waits {
    /// Waits for every write; returns the partitions whose
    /// acknowledgements, and those whose acquisitions, were not written.
    async fn settle(self) -> (Vec<TopicIdKey>, Vec<TopicIdKey>) {
        let mut failed_acks = Vec::new();
        for (tp, d) in self.acks {
            if d.wait().await.is_err() {
                failed_acks.push(tp);
            }
        }
        let mut failed_acquisitions = Vec::new();
        for (tp, d) in self.acquisitions {
            if d.wait().await.is_err() {
                failed_acquisitions.push(tp);
            }
        }
        if self.rest.wait().await.is_err() {
            tracing::warn!("share state: a session's release was not written");
        }
        (failed_acks, failed_acquisitions)
    }
}

// ----- ShareFetch ----------------------------------------------------------------

/// Response rows in first-seen order.
#[derive(Default)]
struct Rows {
    rows: Vec<(TopicIdKey, PartitionData)>,
    index: HashMap<TopicIdKey, usize>,
}

impl Rows {
    fn get(&mut self, tp: TopicIdKey, leader: i32) -> &mut PartitionData {
        let i = *self.index.entry(tp).or_insert_with(|| {
            self.rows.push((
                tp,
                PartitionData::default()
                    .with_partition_index(tp.1)
                    .with_current_leader(
                        LeaderIdAndEpoch::default()
                            .with_leader_id(leader)
                            .with_leader_epoch(0),
                    ),
            ));
            self.rows.len() - 1
        });
        &mut self.rows[i].1
    }

    fn into_topics(self) -> Vec<ShareFetchableTopicResponse> {
        let mut topics: Vec<ShareFetchableTopicResponse> = Vec::new();
        for ((topic_id, _), pd) in self.rows {
            match topics.iter_mut().find(|t| t.topic_id == topic_id) {
                Some(t) => t.partitions.push(pd),
                None => topics.push(
                    ShareFetchableTopicResponse::default()
                        .with_topic_id(topic_id)
                        .with_partitions(vec![pd]),
                ),
            }
        }
        topics
    }
}

fn fetch_error(code: ErrorCode, message: &str) -> ShareFetchResponse {
    ShareFetchResponse::default()
        .with_error_code(code.0)
        .with_error_message(Some(s(message)))
}

/// Rotates the first partition of each fetch so that one partition cannot
/// take every record of MaxRecords.
static ROTATION: AtomicUsize = AtomicUsize::new(0);

/// Per-topic authorization of ShareFetch and ShareAcknowledge, as Kafka's:
/// a partition of a topic the principal may not Read is answered
/// TOPIC_AUTHORIZATION_FAILED (in ErrorCode, or AcknowledgeErrorCode for
/// piggybacked acknowledgements); nothing is acquired or acknowledged on
/// it, while the other partitions of the request are served. Decided once
/// per request; unknown topic ids are not refused here (they get
/// UNKNOWN_TOPIC_ID).
struct TopicReads<'a> {
    core: &'a BrokerCore,
    ctx: &'a RequestContext,
    decided: HashMap<Uuid, bool>,
}

impl<'a> TopicReads<'a> {
    fn new(core: &'a BrokerCore, ctx: &'a RequestContext) -> Self {
        Self {
            core,
            ctx,
            decided: HashMap::new(),
        }
    }

    fn denied(&mut self, topic_id: Uuid) -> bool {
        let (core, ctx) = (self.core, self.ctx);
        *self.decided.entry(topic_id).or_insert_with(|| {
            core.topics()
                .read()
                .get_by_id(&topic_id)
                .is_some_and(|m| !ctx.allowed(core, AclOperation::Read, &Resource::topic(&m.name)))
        })
    }
}

pub(crate) async fn share_fetch(
    core: &Arc<BrokerCore>,
    ctx: &RequestContext,
    full: ShareFetchV2Request,
) -> ShareFetchResponse {
    let mut waits = Waits::default();
    let summary = request_summary!("ShareFetch", full.request);
    let mut resp = share_fetch_unsettled(core, ctx, full, &mut waits).await;
    let (failed_acks, failed_acquisitions) = waits.settle().await;
    for t in &mut resp.responses {
        for p in &mut t.partitions {
            let tp = (t.topic_id, p.partition_index);
            if failed_acks.contains(&tp) {
                p.acknowledge_error_code = ErrorCode::KAFKA_STORAGE_ERROR.0;
            }
            if failed_acquisitions.contains(&tp) {
                // Not handed out: the records come back when their locks
                // expire.
                p.error_code = ErrorCode::KAFKA_STORAGE_ERROR.0;
                p.records = None;
                p.acquired_records.clear();
            }
        }
    }
    if let Some(summary) = summary {
        let partitions = resp.responses.iter().flat_map(|t| t.partitions.iter());
        summary.log(
            ctx.connection_id,
            resp.error_code,
            partitions.clone().map(|p| p.acknowledge_error_code),
            partitions
                .flat_map(|p| p.acquired_records.iter())
                .map(|r| r.last_offset - r.first_offset + 1)
                .sum(),
        );
    }
    resp
}

/// What a share request's debug line says about the request, taken before
/// the request is consumed; built only when debug events are on.
struct RequestSummary {
    api: &'static str,
    group: String,
    member: String,
    session_epoch: i32,
    /// Offsets the request acknowledges (any type), summed over its batches.
    acknowledged: i64,
}

/// The [`RequestSummary`] of a ShareFetch or ShareAcknowledge request (the
/// same fields under two types), or None when debug events are off.
macro_rules! request_summary {
    ($api:literal, $req:expr) => {
        tracing::enabled!(tracing::Level::DEBUG).then(|| {
            let r = &$req;
            RequestSummary {
                api: $api,
                group: r.group_id.as_ref().map_or("", |g| g.0.as_str()).to_owned(),
                member: r.member_id.as_ref().map_or("", |m| m.as_str()).to_owned(),
                session_epoch: r.share_session_epoch,
                acknowledged: r
                    .topics
                    .iter()
                    .flat_map(|t| t.partitions.iter())
                    .flat_map(|p| p.acknowledgement_batches.iter())
                    .map(|b| b.last_offset - b.first_offset + 1)
                    .sum(),
            }
        })
    };
}
use request_summary;

impl RequestSummary {
    /// The request's debug line, with its answer: the top-level error, the
    /// partitions' acknowledgement errors (non-zero ones are listed) and the
    /// offsets acquired.
    fn log(
        &self,
        connection: u64,
        error: i16,
        acknowledge_errors: impl Iterator<Item = i16>,
        acquired: i64,
    ) {
        debug!(
            connection,
            group = self.group,
            member = self.member,
            session_epoch = self.session_epoch,
            acknowledged = self.acknowledged,
            error,
            acknowledge_errors = ?acknowledge_errors.filter(|c| *c != 0).collect::<Vec<_>>(),
            acquired,
            "{}",
            self.api
        );
    }
}

/// ShareFetch up to the durability of what it did, which `waits` collects.
async fn share_fetch_unsettled(
    core: &Arc<BrokerCore>,
    ctx: &RequestContext,
    full: ShareFetchV2Request,
    waits: &mut Waits,
) -> ShareFetchResponse {
    let (group, member) = match check_request(
        core,
        ctx,
        full.request.group_id.as_ref(),
        full.request.member_id.as_ref(),
    ) {
        Ok(x) => x,
        Err((code, msg)) => return fetch_error(code, msg),
    };
    let Some(mode) = full.acquire_mode() else {
        return fetch_error(ErrorCode::INVALID_REQUEST, "Unknown ShareAcquireMode.");
    };
    let renew_only = full.is_renew_ack;
    let req = full.request;
    if renew_only
        && (req.max_bytes != 0
            || req.min_bytes != 0
            || req.max_records != 0
            || req.max_wait_ms != 0)
    {
        return fetch_error(
            ErrorCode::INVALID_REQUEST,
            "A renew acknowledgement request must have MaxBytes, MinBytes, MaxRecords and MaxWaitMs 0.",
        );
    }
    if ctx.version() < 2
        && has_renew(req.topics.iter().flat_map(|t| {
            t.partitions.iter().flat_map(|p| {
                p.acknowledgement_batches
                    .iter()
                    .map(|b| &b.acknowledge_types)
            })
        }))
    {
        return fetch_error(
            ErrorCode::INVALID_REQUEST,
            "Renew acknowledgements need ShareFetch version 2.",
        );
    }
    let mut reads = TopicReads::new(core, ctx);
    let epoch = req.share_session_epoch;
    let has_acks = req.topics.iter().any(|t| {
        t.partitions
            .iter()
            .any(|p| !p.acknowledgement_batches.is_empty())
    });
    if epoch == INITIAL_SHARE_SESSION_EPOCH && has_acks {
        return fetch_error(
            ErrorCode::INVALID_REQUEST,
            "Acknowledgements are not allowed in a request that opens a share session.",
        );
    }
    let entries = merge_entries(req.topics.iter().flat_map(|t| {
        t.partitions.iter().map(move |p| {
            (
                t.topic_id,
                p.partition_index,
                // PartitionMaxBytes exists in v0 only; v1 decodes it as 0.
                (p.partition_max_bytes > 0).then_some(p.partition_max_bytes),
                p.acknowledgement_batches
                    .iter()
                    .map(|b| RawAcknowledgementBatch {
                        first_offset: b.first_offset,
                        last_offset: b.last_offset,
                        acknowledge_types: b.acknowledge_types.clone(),
                    })
                    .collect(),
            )
        })
    }));
    let add: Vec<TopicIdKey> = entries.iter().map(|e| e.0).collect();
    let forget: Vec<TopicIdKey> = req
        .forgotten_topics_data
        .iter()
        .flat_map(|t| t.partitions.iter().map(move |p| (t.topic_id, *p)))
        .collect();
    let mgr = core.shares();
    if epoch == INITIAL_SHARE_SESSION_EPOCH && !mgr.is_member_alive(&group, &member) {
        // A departed member's session may finish, not start again.
        return fetch_error(
            ErrorCode::UNKNOWN_MEMBER_ID,
            "The member is not in the share group.",
        );
    }
    let step = match mgr.fetch_session(&group, &member, epoch, &add, &forget) {
        Ok(s) => s,
        Err(code) => return fetch_error(code, "Share session error."),
    };
    mgr.session_used_on(&group, &member, ctx.connection_id);
    let leader = core.node_id();
    let mut rows = Rows::default();
    let now = core.now_ms();
    for (tp, _, batches) in &entries {
        if batches.is_empty() {
            continue;
        }
        let code = if reads.denied(tp.0) {
            ErrorCode::TOPIC_AUTHORIZATION_FAILED
        } else {
            acknowledge_one(core, &group, &member, *tp, batches, now, waits)
        };
        rows.get(*tp, leader).acknowledge_error_code = code.0;
    }
    let lock_ms = mgr.group_config(&group).record_lock_duration_ms;
    // A member that left while its session was open still has its
    // acknowledgements applied (above); it acquires nothing new.
    let departed = !mgr.is_member_alive(&group, &member);
    // Kafka's SharePartitionManager.processShareFetch: a request with no
    // partitions, MaxRecords 0 or MaxBytes 0 asks for no data; it is
    // answered at once (MinBytes and MaxWaitMs do not apply), after its
    // acknowledgements were applied and its session epoch advanced.
    let wants_nothing = req.max_bytes == 0 || req.max_records == 0;
    if step.closed || renew_only || departed || wants_nothing {
        if step.closed {
            let (_, d) = mgr
                .release_session_records_deferred(&group, &member, &step.partitions, now)
                .split();
            waits.rest = d;
        }
        return ShareFetchResponse::default()
            .with_acquisition_lock_timeout_ms(lock_ms)
            .with_responses(rows.into_topics());
    }

    let partition_max: HashMap<TopicIdKey, usize> = entries
        .iter()
        .filter_map(|(tp, mb, _)| mb.map(|m| (*tp, m.max(0) as usize)))
        .collect();
    // Negative values (which no client sends) count as no limit.
    let max_records = if req.max_records > 0 {
        req.max_records as u32
    } else {
        u32::MAX
    };
    let max_bytes = if req.max_bytes > 0 {
        req.max_bytes as usize
    } else {
        usize::MAX
    };
    let wait = Duration::from_millis(req.max_wait_ms.max(0) as u64);
    let deadline = tokio::time::Instant::now() + wait;
    let mut appended = core.subscribe_appended();
    let mut available = mgr.subscribe_available();
    let n = step.partitions.len();
    let start = if n > 0 {
        ROTATION.fetch_add(1, Ordering::Relaxed) % n
    } else {
        0
    };
    loop {
        appended.borrow_and_update();
        available.borrow_and_update();
        let now = core.now_ms();
        let mut records_left = max_records;
        let mut bytes_left = max_bytes;
        let mut something = false;
        for i in 0..n {
            let tp @ (topic_id, partition) = step.partitions[(start + i) % n];
            if reads.denied(topic_id) {
                rows.get(tp, leader).error_code = ErrorCode::TOPIC_AUTHORIZATION_FAILED.0;
                something = true;
                continue;
            }
            if let Some(code) = partition_error(core, topic_id, partition) {
                rows.get(tp, leader).error_code = code.0;
                something = true;
                continue;
            }
            let Some(log) = core.partition(topic_id, partition) else {
                rows.get(tp, leader).error_code = ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.0;
                something = true;
                continue;
            };
            if records_left == 0 || bytes_left == 0 {
                continue;
            }
            let budget = partition_max
                .get(&tp)
                .copied()
                .unwrap_or(DEFAULT_PARTITION_MAX_BYTES)
                .min(bytes_left);
            let (acquired, durable) = mgr
                .acquire_deferred(
                    &group,
                    &member,
                    topic_id,
                    partition,
                    &log,
                    records_left,
                    mode,
                    budget,
                    now,
                )
                .split();
            if !durable.is_ready() {
                waits.acquisitions.push((tp, durable));
            }
            match acquired {
                Ok(data) if data.record_count > 0 => {
                    records_left = records_left.saturating_sub(data.record_count as u32);
                    bytes_left = bytes_left.saturating_sub(data.records.len());
                    let row = rows.get(tp, leader);
                    row.records = Some(data.records);
                    row.acquired_records = data
                        .acquired
                        .iter()
                        .map(|r| {
                            AcquiredRecords::default()
                                .with_first_offset(r.first_offset)
                                .with_last_offset(r.last_offset)
                                .with_delivery_count(r.delivery_count as i16)
                        })
                        .collect();
                    something = true;
                }
                Ok(_) => {}
                Err(ErrorCode::UNKNOWN_MEMBER_ID) => {
                    return fetch_error(
                        ErrorCode::UNKNOWN_MEMBER_ID,
                        "The member is not in the share group.",
                    );
                }
                Err(code) => {
                    rows.get(tp, leader).error_code = code.0;
                    something = true;
                }
            }
        }
        let done =
            something || n == 0 || req.min_bytes <= 0 || tokio::time::Instant::now() >= deadline;
        if done {
            return ShareFetchResponse::default()
                .with_acquisition_lock_timeout_ms(lock_ms)
                .with_responses(rows.into_topics());
        }
        let _parked = mgr.park();
        tokio::select! {
            r = appended.changed() => if r.is_err() { break; },
            r = available.changed() => if r.is_err() { break; },
            _ = tokio::time::sleep_until(deadline) => {}
        }
    }
    ShareFetchResponse::default()
        .with_acquisition_lock_timeout_ms(lock_ms)
        .with_responses(rows.into_topics())
}

// ----- ShareAcknowledge ------------------------------------------------------------

pub(crate) async fn share_acknowledge(
    core: &BrokerCore,
    ctx: &RequestContext,
    full: ShareAcknowledgeV2Request,
) -> ShareAcknowledgeV2Response {
    let summary = request_summary!("ShareAcknowledge", full.request);
    let resp = share_acknowledge_unlogged(core, ctx, full).await;
    if let Some(summary) = summary {
        let r = &resp.response;
        let partitions = r.responses.iter().flat_map(|t| t.partitions.iter());
        summary.log(
            ctx.connection_id,
            r.error_code,
            partitions.map(|p| p.error_code),
            0,
        );
    }
    resp
}

async fn share_acknowledge_unlogged(
    core: &BrokerCore,
    ctx: &RequestContext,
    full: ShareAcknowledgeV2Request,
) -> ShareAcknowledgeV2Response {
    let req = full.request;
    let wrap = |response: ShareAcknowledgeResponse, lock_ms: i32| ShareAcknowledgeV2Response {
        response,
        acquisition_lock_timeout_ms: lock_ms,
    };
    let error = |code: ErrorCode, msg: &str| {
        wrap(
            ShareAcknowledgeResponse::default()
                .with_error_code(code.0)
                .with_error_message(Some(s(msg))),
            0,
        )
    };
    let (group, member) =
        match check_request(core, ctx, req.group_id.as_ref(), req.member_id.as_ref()) {
            Ok(x) => x,
            Err((code, msg)) => return error(code, msg),
        };
    if ctx.version() < 2
        && has_renew(req.topics.iter().flat_map(|t| {
            t.partitions.iter().flat_map(|p| {
                p.acknowledgement_batches
                    .iter()
                    .map(|b| &b.acknowledge_types)
            })
        }))
    {
        return error(
            ErrorCode::INVALID_REQUEST,
            "Renew acknowledgements need ShareAcknowledge version 2.",
        );
    }
    let mut reads = TopicReads::new(core, ctx);
    let mgr = core.shares();
    let step = match mgr.acknowledge_session(&group, &member, req.share_session_epoch) {
        Ok(s) => s,
        Err(code) => return error(code, "Share session error."),
    };
    mgr.session_used_on(&group, &member, ctx.connection_id);
    let entries = merge_entries(req.topics.iter().flat_map(|t| {
        t.partitions.iter().map(move |p| {
            (
                t.topic_id,
                p.partition_index,
                None,
                p.acknowledgement_batches
                    .iter()
                    .map(|b| RawAcknowledgementBatch {
                        first_offset: b.first_offset,
                        last_offset: b.last_offset,
                        acknowledge_types: b.acknowledge_types.clone(),
                    })
                    .collect(),
            )
        })
    }));
    let now = core.now_ms();
    let leader = core.node_id();
    let mut waits = Waits::default();
    let mut topics: Vec<ack_resp::ShareAcknowledgeTopicResponse> = Vec::new();
    for (tp @ (topic_id, partition), _, batches) in &entries {
        let code = if reads.denied(*topic_id) {
            ErrorCode::TOPIC_AUTHORIZATION_FAILED
        } else {
            acknowledge_one(core, &group, &member, *tp, batches, now, &mut waits)
        };
        let pd = ack_resp::PartitionData::default()
            .with_partition_index(*partition)
            .with_error_code(code.0)
            .with_current_leader(
                ack_resp::LeaderIdAndEpoch::default()
                    .with_leader_id(leader)
                    .with_leader_epoch(0),
            );
        match topics.iter_mut().find(|t| t.topic_id == *topic_id) {
            Some(t) => t.partitions.push(pd),
            None => topics.push(
                ack_resp::ShareAcknowledgeTopicResponse::default()
                    .with_topic_id(*topic_id)
                    .with_partitions(vec![pd]),
            ),
        }
    }
    if step.closed && req.share_session_epoch == FINAL_SHARE_SESSION_EPOCH {
        let (_, d) = mgr
            .release_session_records_deferred(&group, &member, &step.partitions, now)
            .split();
        waits.rest = d;
    }
    let lock_ms = mgr.group_config(&group).record_lock_duration_ms;
    let (failed_acks, _) = waits.settle().await;
    for t in &mut topics {
        for p in &mut t.partitions {
            if failed_acks.contains(&(t.topic_id, p.partition_index)) {
                p.error_code = ErrorCode::KAFKA_STORAGE_ERROR.0;
            }
        }
    }
    wrap(
        ShareAcknowledgeResponse::default().with_responses(topics),
        lock_ms,
    )
}

/// Whether any acknowledge-type array holds Renew (4), which only version 2
/// of ShareFetch and ShareAcknowledge may carry.
fn has_renew<'a>(types: impl Iterator<Item = &'a Vec<i8>>) -> bool {
    use crate::share::AcknowledgeType;
    types.flatten().any(|t| *t == AcknowledgeType::Renew.code())
}

// ----- group configs -------------------------------------------------------------------

/// Config operations of IncrementalAlterConfigs.
const OP_SET: i8 = 0;
const OP_DELETE: i8 = 1;

pub(crate) fn incremental_alter_configs(
    core: &BrokerCore,
    ctx: &RequestContext,
    req: IncrementalAlterConfigsRequest,
) -> IncrementalAlterConfigsResponse {
    let responses = req
        .resources
        .into_iter()
        .map(|r| {
            let base = AlterConfigsResourceResponse::default()
                .with_resource_type(r.resource_type)
                .with_resource_name(r.resource_name.clone());
            // AlterConfigs on the resource, checked before the resource
            // type is known to be served here (as Kafka's).
            let name = r.resource_name.as_str();
            let (resource, refusal) = match r.resource_type {
                RESOURCE_GROUP => (Some(Resource::group(name)), ErrorCode::GROUP_AUTHORIZATION_FAILED),
                RESOURCE_TOPIC => (Some(Resource::topic(name)), ErrorCode::TOPIC_AUTHORIZATION_FAILED),
                RESOURCE_BROKER | RESOURCE_BROKER_LOGGER => {
                    (Some(Resource::cluster()), ErrorCode::CLUSTER_AUTHORIZATION_FAILED)
                }
                _ => (None, ErrorCode::NONE),
            };
            if let Some(resource) = resource
                && !ctx.allowed(core, AclOperation::AlterConfigs, &resource)
            {
                return base
                    .with_error_code(refusal.0)
                    .with_error_message(Some(s("Not authorized to alter the configs")));
            }
            if r.resource_type != RESOURCE_GROUP {
                return base
                    .with_error_code(ErrorCode::INVALID_REQUEST.0)
                    .with_error_message(Some(s(format!(
                        "Unsupported resource type {} for IncrementalAlterConfigs",
                        r.resource_type
                    ))));
            }
            let mut ops: Vec<(String, Option<String>)> = Vec::new();
            for c in &r.configs {
                let name = c.name.to_string();
                match c.config_operation {
                    OP_SET => match &c.value {
                        Some(v) => ops.push((name, Some(v.to_string()))),
                        None => {
                            return base
                                .with_error_code(ErrorCode::INVALID_REQUEST.0)
                                .with_error_message(Some(s(format!(
                                    "Null value not supported for SET of {name}"
                                ))));
                        }
                    },
                    OP_DELETE => ops.push((name, None)),
                    op => {
                        return base
                            .with_error_code(ErrorCode::INVALID_CONFIG.0)
                            .with_error_message(Some(s(format!(
                                "Operation {op} on {name} is not supported: group configs are not lists"
                            ))));
                    }
                }
            }
            // D24: naming a dead-letter topic lets the broker write to it on
            // the group's behalf, so the principal must be allowed to Write
            // to that topic itself.
            if let Some(topic) = ops.iter().find_map(|(n, v)| {
                (n == crate::group::ERRORS_DLQ_TOPIC_NAME)
                    .then_some(v.as_deref())
                    .flatten()
                    .map(str::trim)
                    .filter(|t| !t.is_empty())
            }) && !ctx.allowed(core, AclOperation::Write, &Resource::topic(topic))
            {
                return base
                    .with_error_code(ErrorCode::TOPIC_AUTHORIZATION_FAILED.0)
                    .with_error_message(Some(s(format!(
                        "Not authorized to write to {topic}, named by {}",
                        crate::group::ERRORS_DLQ_TOPIC_NAME
                    ))));
            }
            let borrowed: Vec<(&str, Option<&str>)> =
                ops.iter().map(|(n, v)| (n.as_str(), v.as_deref())).collect();
            match core
                .shares()
                .alter_group_configs(&r.resource_name, &borrowed, req.validate_only)
            {
                Ok(()) => base,
                Err(e) => base
                    .with_error_code(e.code.0)
                    .with_error_message(Some(s(e.message))),
            }
        })
        .collect();
    IncrementalAlterConfigsResponse::default().with_responses(responses)
}

/// DescribeConfigs rows of a GROUP resource: (name, value, source, is_int).
pub(crate) fn describe_group_configs(
    core: &BrokerCore,
    group_id: &str,
) -> Vec<(&'static str, String, i8, bool)> {
    core.shares()
        .describe_group_config(group_id)
        .into_iter()
        .map(|e| {
            let source = match e.source {
                ConfigSource::Group => SOURCE_GROUP_CONFIG,
                ConfigSource::Default => SOURCE_DEFAULT_CONFIG,
            };
            let is_int = e.value.parse::<i64>().is_ok();
            (e.name, e.value, source, is_int)
        })
        .collect()
}

/// DescribeShareGroupOffsets (KIP-932, key 90, v0): the share-partition
/// start offset (SPSO) of each partition the group reads, from the share
/// partition state. A partition the group has no state for yet answers
/// start offset -1 (not initialized); topics left null mean every
/// partition with state. Describe on the group is required
/// (GROUP_AUTHORIZATION_FAILED for the group), Describe on each topic
/// (TOPIC_AUTHORIZATION_FAILED for its partitions). Version 1 (KIP-1226)
/// also carries each partition's share-partition lag, as Kafka computes it:
/// the high watermark, minus the start offset, minus the records at or
/// above the start offset already delivered for good (ACKNOWLEDGED or
/// ARCHIVED); -1 where the start offset is not known or the partition
/// failed.
pub(crate) fn describe_share_group_offsets(
    core: &BrokerCore,
    ctx: &RequestContext,
    req: DescribeShareGroupOffsetsRequest,
) -> DescribeShareGroupOffsetsV1Response {
    let response = describe_share_group_start_offsets(core, ctx, req);
    let mut lags = Vec::new();
    for g in &response.groups {
        for t in &g.topics {
            for p in &t.partitions {
                let lag = if p.error_code != 0 || p.start_offset < 0 {
                    UNKNOWN_LAG
                } else {
                    let end = core
                        .partition(t.topic_id, p.partition_index)
                        .map(|l| l.lock().high_watermark());
                    let done = core.shares().delivery_complete_count(
                        &g.group_id,
                        t.topic_id,
                        p.partition_index,
                    );
                    match (end, done) {
                        (Some(end), Some(done)) => (end - p.start_offset - done).max(0),
                        (Some(end), None) => (end - p.start_offset).max(0),
                        _ => UNKNOWN_LAG,
                    }
                };
                lags.push(lag);
            }
        }
    }
    DescribeShareGroupOffsetsV1Response { response, lags }
}

fn describe_share_group_start_offsets(
    core: &BrokerCore,
    ctx: &RequestContext,
    req: DescribeShareGroupOffsetsRequest,
) -> DescribeShareGroupOffsetsResponse {
    use kafka_protocol::messages::describe_share_group_offsets_response as dsgo;
    let group_error = |g: GroupId, code: ErrorCode, msg: &str| {
        dsgo::DescribeShareGroupOffsetsResponseGroup::default()
            .with_group_id(g)
            .with_error_code(code.0)
            .with_error_message(Some(s(msg)))
    };
    let mut groups = Vec::with_capacity(req.groups.len());
    for g in req.groups {
        let group_id = g.group_id.0.to_string();
        if disabled(core) {
            groups.push(group_error(
                g.group_id,
                ErrorCode::UNSUPPORTED_VERSION,
                "Share groups are not enabled.",
            ));
            continue;
        }
        if !ctx.allowed(core, AclOperation::Describe, &Resource::group(&group_id)) {
            groups.push(group_error(
                g.group_id,
                ErrorCode::GROUP_AUTHORIZATION_FAILED,
                "Not authorized to describe the group.",
            ));
            continue;
        }
        let state = core.shares().group_start_offsets(&group_id);
        let known = core
            .shares()
            .describe(std::slice::from_ref(&group_id))
            .first()
            .is_some_and(|d| d.error.is_none());
        if !known && state.is_empty() {
            groups.push(group_error(
                g.group_id,
                ErrorCode::GROUP_ID_NOT_FOUND,
                "The group does not exist.",
            ));
            continue;
        }
        let reg = core.topics().read();
        // (name, id, [(partition, start offset or error)])
        type Row = (String, Uuid, Vec<(i32, Result<i64, ErrorCode>)>);
        let rows: Vec<Row> = match g.topics {
            None => {
                let mut rows: Vec<Row> = Vec::new();
                for (id, partition, spso) in state {
                    let Some(m) = reg.get_by_id(&id) else {
                        continue;
                    };
                    match rows.last_mut() {
                        Some(r) if r.1 == id => r.2.push((partition, Ok(spso))),
                        _ => rows.push((m.name.clone(), id, vec![(partition, Ok(spso))])),
                    }
                }
                rows
            }
            Some(topics) => topics
                .into_iter()
                .map(|t| {
                    let name = t.topic_name.0.to_string();
                    let meta = reg.get(&name);
                    let id = meta.map_or(Uuid::nil(), |m| m.id);
                    let parts = t
                        .partitions
                        .into_iter()
                        .map(|p| {
                            let r = match meta {
                                None => Err(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION),
                                Some(m) if p < 0 || p >= m.partitions => {
                                    Err(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION)
                                }
                                Some(_) => Ok(state
                                    .iter()
                                    .find(|(i, q, _)| *i == id && *q == p)
                                    .map_or(-1, |(_, _, o)| *o)),
                            };
                            (p, r)
                        })
                        .collect();
                    (name, id, parts)
                })
                .collect(),
        };
        drop(reg);
        let topics = rows
            .into_iter()
            .map(|(name, id, parts)| {
                let topic_allowed =
                    ctx.allowed(core, AclOperation::Describe, &Resource::topic(&name));
                dsgo::DescribeShareGroupOffsetsResponseTopic::default()
                    .with_topic_name(TopicName(s(name)))
                    .with_topic_id(id)
                    .with_partitions(
                        parts
                            .into_iter()
                            .map(|(p, r)| {
                                let base =
                                    dsgo::DescribeShareGroupOffsetsResponsePartition::default()
                                        .with_partition_index(p)
                                        .with_leader_epoch(-1);
                                let r = if topic_allowed {
                                    r
                                } else {
                                    Err(ErrorCode::TOPIC_AUTHORIZATION_FAILED)
                                };
                                match r {
                                    Ok(o) => base.with_start_offset(o),
                                    Err(e) => base.with_start_offset(-1).with_error_code(e.0),
                                }
                            })
                            .collect(),
                    )
            })
            .collect();
        groups.push(
            dsgo::DescribeShareGroupOffsetsResponseGroup::default()
                .with_group_id(g.group_id)
                .with_topics(topics),
        );
    }
    DescribeShareGroupOffsetsResponse::default().with_groups(groups)
}
