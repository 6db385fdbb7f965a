//! One handler per API. [`dispatch`] decodes a request by key and version,
//! calls its handler and encodes the response in order.
//!
//! Authorization (with `--acl`) is made by each handler, as Kafka's
//! KafkaApis / ControllerApis make it; docs/SECURITY.md has the table of
//! every served API and its checks. ApiVersions, SaslHandshake and
//! SaslAuthenticate need no permission.

mod acls;
mod admin;
mod api_versions;
mod configs;
mod consumer_group;
mod consumer_protocol;
mod data;
mod features;
mod group_admin;
mod leader_epoch;
mod log_dirs;
mod metadata;
mod quotas;
mod reassignments;
mod scram;
mod share;
mod share_offsets_admin;
mod streams_group;
mod txn;
mod txn_admin;
mod txn_share_ack;

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::*;

use super::core::BrokerCore;
use super::server::Close;
use sharestream_protocol::ErrorCode;
use sharestream_protocol::api::{
    AnyRequest, ApiRequest, RequestHeaderInfo, api_name, decode_request, encode_response_frame,
};
use sharestream_protocol::api_versions_v5::ApiVersionsV5Request;
use sharestream_protocol::share_offsets_v1::DescribeShareGroupOffsetsV1Request;
use sharestream_protocol::share_v2::{ShareAcknowledgeV2Request, ShareFetchV2Request};
use sharestream_protocol::streams_group::{
    StreamsGroupDescribeRequest, StreamsGroupHeartbeatRequest,
};
use sharestream_protocol::txn_share_ack::{
    TxnShareAcknowledgeRequest, TxnShareAcknowledgeResponse,
};

pub(crate) use api_versions::advertised_versions;
pub(crate) use txn::blocking as blocking_pub;

/// A heartbeat response's `Assignment` from (topic id, partitions) pairs:
/// ConsumerGroupHeartbeat and ShareGroupHeartbeat have the same shape in
/// two modules of the codec (`$m`).
macro_rules! heartbeat_assignment {
    ($m:ident, $a:expr) => {
        $m::Assignment::default().with_topic_partitions(
            $a.into_iter()
                .map(|(id, ps)| {
                    $m::TopicPartitions::default()
                        .with_topic_id(id)
                        .with_partitions(ps.into_iter().collect())
                })
                .collect(),
        )
    };
}
pub(crate) use heartbeat_assignment;

/// What a handler sees of the request besides its body.
#[derive(Debug, Clone)]
pub(crate) struct RequestContext {
    pub header: RequestHeaderInfo,
    /// The connection's principal (`User:ANONYMOUS` on PLAINTEXT).
    pub principal: Arc<str>,
    /// The peer's IP.
    pub host: Arc<str>,
    /// The connection's id, unique in the process.
    pub connection_id: u64,
}

impl RequestContext {
    pub fn version(&self) -> i16 {
        self.header.api_version
    }

    /// Whether this request's principal may do `op` on `resource`.
    pub fn allowed(
        &self,
        core: &BrokerCore,
        op: crate::acl::AclOperation,
        resource: &crate::acl::Resource,
    ) -> bool {
        core.authorize(&self.principal, &self.host, op, resource)
    }

    /// Kafka's authorized-operations bit field of `resource` for this
    /// request's principal: every supported operation of its type that is
    /// allowed (all of them with ACLs off).
    pub fn authorized_operations(&self, core: &BrokerCore, resource: &crate::acl::Resource) -> i32 {
        crate::acl::operations_bitfield(
            resource
                .resource_type
                .supported_operations()
                .iter()
                .copied()
                .filter(|op| self.allowed(core, *op, resource)),
        )
    }
}

fn respond<R: ApiRequest>(
    ctx: &RequestContext,
    resp: &R::Response,
    out: &mut BytesMut,
) -> Result<(), Close> {
    encode_response_frame::<R>(resp, ctx.version(), ctx.header.correlation_id, out)
        .map_err(|e| Close::Protocol(format!("cannot encode response: {e}")))
}

/// Decodes, handles and answers one request.
pub(crate) async fn dispatch(
    core: &Arc<BrokerCore>,
    session: &crate::security::Session,
    header: &RequestHeaderInfo,
    mut body: Bytes,
    out: &mut BytesMut,
) -> Result<(), Close> {
    let ctx = RequestContext {
        header: header.clone(),
        principal: session.principal().clone(),
        host: session.host().clone(),
        connection_id: session.connection_id(),
    };
    let (key, version) = (header.api_key, header.api_version);

    // ApiVersions at a version we cannot parse: answer v0 with
    // UNSUPPORTED_VERSION and our ranges so the client can retry.
    if key == ApiVersionsV5Request::API_KEY && !ApiVersionsV5Request::versions().contains(version) {
        let resp = api_versions::unsupported_version_response(core);
        return sharestream_protocol::api::encode_response_frame::<ApiVersionsV5Request>(
            &resp,
            0,
            header.correlation_id,
            out,
        )
        .map_err(|e| Close::Protocol(format!("cannot encode response: {e}")));
    }

    let advertised = advertised_versions(core, key);
    let in_codec =
        sharestream_protocol::api::codec_versions(key).is_some_and(|v| v.contains(version));
    let gated_off = api_versions::is_gated_off(core, key);
    let served = advertised.is_some_and(|v| v.contains(version));
    let answerable = served || (gated_off && in_codec);
    if !answerable {
        return Err(Close::Protocol(format!(
            "{} v{version} (key {key}) is not supported by this broker",
            api_name(key)
        )));
    }

    let request_size = body.len() as u64;
    let request = decode_request(key, version, &mut body)
        .map_err(|e| Close::Protocol(format!("undecodable request: {e}")))?;

    match request {
        AnyRequest::Kafka(kind) => match *kind {
            RequestKind::Produce(r) => {
                // acks=0 has no answer, but its bytes count all the same.
                let mut resp = data::produce(core, &ctx, r).await;
                quotas::throttle(
                    core,
                    &ctx,
                    session,
                    crate::client_quotas::PRODUCER_BYTE_RATE,
                    request_size,
                    resp.as_mut()
                        .filter(|_| version >= 1)
                        .map(|r| &mut r.throttle_time_ms),
                );
                match resp {
                    Some(resp) => respond::<ProduceRequest>(&ctx, &resp, out),
                    None => Ok(()),
                }
            }
            RequestKind::Fetch(mut r) => {
                let quota = core.quotas().any_set();
                if quota && version >= 3 {
                    quotas::cap_fetch_bytes(core, &ctx, &mut r.max_bytes, true);
                }
                let mut resp = data::fetch(core, &ctx, r).await;
                if quota {
                    use kafka_protocol::protocol::Encodable;
                    let size = resp.compute_size(version).unwrap_or(0) as u64;
                    quotas::throttle(
                        core,
                        &ctx,
                        session,
                        crate::client_quotas::CONSUMER_BYTE_RATE,
                        size,
                        (version >= 1).then_some(&mut resp.throttle_time_ms),
                    );
                }
                respond::<FetchRequest>(&ctx, &resp, out)
            }
            RequestKind::ListOffsets(r) => {
                let resp = data::list_offsets(core, &ctx, r);
                respond::<ListOffsetsRequest>(&ctx, &resp, out)
            }
            RequestKind::InitProducerId(r) => {
                let resp = txn::init_producer_id(core, &ctx, r).await;
                respond::<InitProducerIdRequest>(&ctx, &resp, out)
            }
            RequestKind::AddPartitionsToTxn(r) => {
                let resp = txn::add_partitions_to_txn(core, &ctx, r).await;
                respond::<AddPartitionsToTxnRequest>(&ctx, &resp, out)
            }
            RequestKind::AddOffsetsToTxn(r) => {
                let resp = txn::add_offsets_to_txn(core, &ctx, r).await;
                respond::<AddOffsetsToTxnRequest>(&ctx, &resp, out)
            }
            RequestKind::EndTxn(r) => {
                let resp = txn::end_txn(core, &ctx, r).await;
                respond::<EndTxnRequest>(&ctx, &resp, out)
            }
            RequestKind::UpdateFeatures(r) => {
                let resp = features::update_features(core, &ctx, r);
                respond::<UpdateFeaturesRequest>(&ctx, &resp, out)
            }
            RequestKind::Metadata(r) => {
                let resp = metadata::handle(core, &ctx, r);
                respond::<MetadataRequest>(&ctx, &resp, out)
            }
            // KIP-599: the versions answering THROTTLING_QUOTA_EXCEEDED
            // per topic are strict about controller_mutation_rate.
            RequestKind::CreateTopics(r) => {
                let quota = quotas::Mutations::new(core, &ctx, version >= 6);
                let mut resp = admin::create_topics(core, &ctx, r, &quota);
                resp.throttle_time_ms = resp.throttle_time_ms.max(quota.throttle(session));
                respond::<CreateTopicsRequest>(&ctx, &resp, out)
            }
            RequestKind::DeleteTopics(r) => {
                let quota = quotas::Mutations::new(core, &ctx, version >= 5);
                let mut resp = admin::delete_topics(core, &ctx, r, &quota);
                resp.throttle_time_ms = resp.throttle_time_ms.max(quota.throttle(session));
                respond::<DeleteTopicsRequest>(&ctx, &resp, out)
            }
            RequestKind::CreatePartitions(r) => {
                let quota = quotas::Mutations::new(core, &ctx, version >= 3);
                let mut resp = admin::create_partitions(core, &ctx, r, &quota);
                resp.throttle_time_ms = resp.throttle_time_ms.max(quota.throttle(session));
                respond::<CreatePartitionsRequest>(&ctx, &resp, out)
            }
            RequestKind::DescribeCluster(r) => {
                let resp = admin::describe_cluster(core, &ctx, r);
                respond::<DescribeClusterRequest>(&ctx, &resp, out)
            }
            RequestKind::DescribeConfigs(r) => {
                let resp = admin::describe_configs(core, &ctx, r);
                respond::<DescribeConfigsRequest>(&ctx, &resp, out)
            }
            RequestKind::FindCoordinator(r) => {
                let resp = admin::find_coordinator(core, &ctx, r);
                respond::<FindCoordinatorRequest>(&ctx, &resp, out)
            }
            RequestKind::IncrementalAlterConfigs(r) => {
                // A group config change waits for the share-state journal:
                // off the async threads in disk mode (topic and broker
                // configs are persisted there too).
                let c = ctx.clone();
                let resp = txn::blocking(core, move |core| {
                    configs::incremental_alter_configs(core, &c, r)
                })
                .await;
                respond::<IncrementalAlterConfigsRequest>(&ctx, &resp, out)
            }
            RequestKind::AlterConfigs(r) => {
                let resp = configs::alter_configs(core, &ctx, r);
                respond::<AlterConfigsRequest>(&ctx, &resp, out)
            }
            RequestKind::DescribeProducers(r) => {
                let resp = txn_admin::describe_producers(core, &ctx, r);
                respond::<DescribeProducersRequest>(&ctx, &resp, out)
            }
            RequestKind::DescribeTransactions(r) => {
                let resp = txn_admin::describe_transactions(core, &ctx, r);
                respond::<DescribeTransactionsRequest>(&ctx, &resp, out)
            }
            RequestKind::WriteTxnMarkers(r) => {
                // Appends (fsync in disk mode): off the async threads.
                let c = ctx.clone();
                let resp =
                    txn::blocking(core, move |core| txn_admin::write_txn_markers(core, &c, r))
                        .await;
                respond::<WriteTxnMarkersRequest>(&ctx, &resp, out)
            }
            RequestKind::ListTransactions(r) => {
                let resp = txn_admin::list_transactions(core, &ctx, r);
                respond::<ListTransactionsRequest>(&ctx, &resp, out)
            }
            RequestKind::ListPartitionReassignments(r) => {
                let resp = reassignments::list(core, &ctx, r);
                respond::<ListPartitionReassignmentsRequest>(&ctx, &resp, out)
            }
            RequestKind::AlterPartitionReassignments(r) => {
                let resp = reassignments::alter(core, &ctx, r);
                respond::<AlterPartitionReassignmentsRequest>(&ctx, &resp, out)
            }
            RequestKind::ElectLeaders(r) => {
                let resp = reassignments::elect(core, &ctx, r);
                respond::<ElectLeadersRequest>(&ctx, &resp, out)
            }
            RequestKind::OffsetForLeaderEpoch(r) => {
                let resp = leader_epoch::offsets_for_leader_epoch(core, &ctx, r);
                respond::<OffsetForLeaderEpochRequest>(&ctx, &resp, out)
            }
            RequestKind::DescribeLogDirs(r) => {
                let resp = log_dirs::describe(core, &ctx, r);
                respond::<DescribeLogDirsRequest>(&ctx, &resp, out)
            }
            RequestKind::DescribeClientQuotas(r) => {
                let resp = quotas::describe(core, &ctx, r);
                respond::<DescribeClientQuotasRequest>(&ctx, &resp, out)
            }
            RequestKind::AlterClientQuotas(r) => {
                // Stored (fsync in disk mode) before the answer: off the
                // async threads.
                let c = ctx.clone();
                let resp = txn::blocking(core, move |core| quotas::alter(core, &c, r)).await;
                respond::<AlterClientQuotasRequest>(&ctx, &resp, out)
            }
            RequestKind::DescribeUserScramCredentials(r) => {
                let resp = scram::describe(core, &ctx, r);
                respond::<DescribeUserScramCredentialsRequest>(&ctx, &resp, out)
            }
            RequestKind::AlterUserScramCredentials(r) => {
                // Writes the credentials file (disk mode): off the async threads.
                let c = ctx.clone();
                let resp = txn::blocking(core, move |core| scram::alter(core, &c, r)).await;
                respond::<AlterUserScramCredentialsRequest>(&ctx, &resp, out)
            }
            RequestKind::DeleteRecords(r) => {
                let resp = data::delete_records(core, &ctx, r).await;
                respond::<DeleteRecordsRequest>(&ctx, &resp, out)
            }
            RequestKind::ShareGroupHeartbeat(r) => {
                let resp = share::share_group_heartbeat(core, &ctx, r).await;
                respond::<ShareGroupHeartbeatRequest>(&ctx, &resp, out)
            }
            RequestKind::ShareGroupDescribe(r) => {
                let resp = share::share_group_describe(core, &ctx, r);
                respond::<ShareGroupDescribeRequest>(&ctx, &resp, out)
            }
            RequestKind::JoinGroup(r) => {
                let resp = consumer_group::join_group(core, &ctx, r).await;
                respond::<JoinGroupRequest>(&ctx, &resp, out)
            }
            RequestKind::SyncGroup(r) => {
                let resp = consumer_group::sync_group(core, &ctx, r).await;
                respond::<SyncGroupRequest>(&ctx, &resp, out)
            }
            RequestKind::Heartbeat(r) => {
                let resp = consumer_group::heartbeat(core, &ctx, r);
                respond::<HeartbeatRequest>(&ctx, &resp, out)
            }
            RequestKind::LeaveGroup(r) => {
                let resp = consumer_group::leave_group(core, &ctx, r).await;
                respond::<LeaveGroupRequest>(&ctx, &resp, out)
            }
            RequestKind::OffsetCommit(r) => {
                let resp = consumer_group::offset_commit(core, &ctx, r).await;
                respond::<OffsetCommitRequest>(&ctx, &resp, out)
            }
            RequestKind::OffsetFetch(r) => {
                let resp = consumer_group::offset_fetch(core, &ctx, r);
                respond::<OffsetFetchRequest>(&ctx, &resp, out)
            }
            RequestKind::TxnOffsetCommit(r) => {
                let resp = consumer_group::txn_offset_commit(core, &ctx, r).await;
                respond::<TxnOffsetCommitRequest>(&ctx, &resp, out)
            }
            RequestKind::ListGroups(r) => {
                let resp = group_admin::list_groups(core, &ctx, r);
                respond::<ListGroupsRequest>(&ctx, &resp, out)
            }
            RequestKind::DescribeGroups(r) => {
                let resp = group_admin::describe_groups(core, &ctx, r);
                respond::<DescribeGroupsRequest>(&ctx, &resp, out)
            }
            RequestKind::DeleteGroups(r) => {
                let resp = group_admin::delete_groups(core, &ctx, r).await;
                respond::<DeleteGroupsRequest>(&ctx, &resp, out)
            }
            RequestKind::OffsetDelete(r) => {
                let resp = group_admin::offset_delete(core, &ctx, r).await;
                respond::<OffsetDeleteRequest>(&ctx, &resp, out)
            }
            RequestKind::CreateAcls(r) => {
                let resp = acls::create_acls(core, &ctx, r);
                respond::<CreateAclsRequest>(&ctx, &resp, out)
            }
            RequestKind::DescribeAcls(r) => {
                let resp = acls::describe_acls(core, &ctx, r);
                respond::<DescribeAclsRequest>(&ctx, &resp, out)
            }
            RequestKind::DeleteAcls(r) => {
                let resp = acls::delete_acls(core, &ctx, r);
                respond::<DeleteAclsRequest>(&ctx, &resp, out)
            }
            RequestKind::ConsumerGroupHeartbeat(r) => {
                // A change of the group is journaled (fsync): off the
                // async threads in disk mode.
                let c = ctx.clone();
                let resp = txn::blocking(core, move |core| {
                    consumer_protocol::consumer_group_heartbeat(core, &c, r)
                })
                .await;
                respond::<ConsumerGroupHeartbeatRequest>(&ctx, &resp, out)
            }
            RequestKind::ConsumerGroupDescribe(r) => {
                let resp = consumer_protocol::consumer_group_describe(core, &ctx, r);
                respond::<ConsumerGroupDescribeRequest>(&ctx, &resp, out)
            }
            RequestKind::AlterShareGroupOffsets(r) => {
                let resp = share_offsets_admin::alter_share_group_offsets(core, &ctx, r).await;
                respond::<AlterShareGroupOffsetsRequest>(&ctx, &resp, out)
            }
            RequestKind::DeleteShareGroupOffsets(r) => {
                let resp = share_offsets_admin::delete_share_group_offsets(core, &ctx, r).await;
                respond::<DeleteShareGroupOffsetsRequest>(&ctx, &resp, out)
            }
            RequestKind::DescribeShareGroupOffsets(r) => {
                let resp = share::describe_share_group_offsets(core, &ctx, r);
                respond::<DescribeShareGroupOffsetsV1Request>(&ctx, &resp, out)
            }
            _ => Err(Close::Protocol(format!(
                "no handler for {} (key {key})",
                api_name(key)
            ))),
        },
        AnyRequest::ApiVersions(r) => {
            let resp = api_versions::handle(core, &ctx, r);
            respond::<ApiVersionsV5Request>(&ctx, &resp, out)
        }
        AnyRequest::ShareFetch(mut r) => {
            let quota = core.quotas().any_set();
            if quota {
                quotas::cap_fetch_bytes(core, &ctx, &mut r.request.max_bytes, false);
            }
            let mut resp = share::share_fetch(core, &ctx, r).await;
            if quota {
                // The answer goes out with its records (they are
                // acquired), and the mute pays for them.
                let size = quotas::share_fetch_bytes(&resp);
                quotas::throttle(
                    core,
                    &ctx,
                    session,
                    crate::client_quotas::CONSUMER_BYTE_RATE,
                    size,
                    Some(&mut resp.throttle_time_ms),
                );
            }
            respond::<ShareFetchV2Request>(&ctx, &resp, out)
        }
        AnyRequest::ShareAcknowledge(r) => {
            let resp = share::share_acknowledge(core, &ctx, r).await;
            respond::<ShareAcknowledgeV2Request>(&ctx, &resp, out)
        }
        AnyRequest::StreamsGroupHeartbeat(r) => {
            let resp = streams_group::streams_group_heartbeat(core, &ctx, r);
            respond::<StreamsGroupHeartbeatRequest>(&ctx, &resp, out)
        }
        AnyRequest::StreamsGroupDescribe(r) => {
            let resp = streams_group::streams_group_describe(core, &ctx, r);
            respond::<StreamsGroupDescribeRequest>(&ctx, &resp, out)
        }
        AnyRequest::TxnShareAcknowledge(r) => {
            let resp = if api_versions::is_gated_off(core, key) {
                // Feature off (share.version < 3 or transaction.version < 2):
                // UNSUPPORTED_VERSION in the body, as Kafka answers a gated API.
                TxnShareAcknowledgeResponse {
                    error_code: ErrorCode::UNSUPPORTED_VERSION.0,
                    ..Default::default()
                }
            } else {
                txn_share_ack::handle(core, &ctx, r).await
            };
            respond::<TxnShareAcknowledgeRequest>(&ctx, &resp, out)
        }
    }
}
