//! ApiVersions: what this broker serves, and its feature levels.
//!
//! Only APIs with a handler are advertised, at the versions the handler
//! implements. Share-group APIs appear only with `share.version >= 1`, and
//! TxnShareAcknowledge (key 95) only with `share.version >= 3` and
//! `transaction.version >= 2` (docs/DESIGN.md D2).
//!
//! Version 5 (Kafka 4.4, KIP-1242) carries the cluster and node the client
//! meant to reach. As Kafka's broker does, a request naming one without the
//! other is INVALID_REQUEST, and one naming another cluster id or node id
//! is REBOOTSTRAP_REQUIRED (129), both with no API list; a request naming
//! neither (a bootstrap connection) is answered as v4 is. Advertising 0-5
//! lets a Java 4.4 client, which opens every connection at v5, get its
//! answer in one round trip instead of an UNSUPPORTED_VERSION and a retry.

use kafka_protocol::messages::ApiVersionsResponse;
use kafka_protocol::messages::api_versions_response::{
    ApiVersion, FinalizedFeatureKey, SupportedFeatureKey,
};
use kafka_protocol::protocol::StrBytes;

use super::RequestContext;
use crate::core::{
    BrokerCore, MAX_SHARE_VERSION, MAX_TRANSACTION_VERSION, SHARE_VERSION, TRANSACTION_VERSION,
};
use sharestream_protocol::ErrorCode;
use sharestream_protocol::api::Versions;
use sharestream_protocol::api_versions_v5::{ApiVersionsV5Request, Target};
use sharestream_protocol::txn_share_ack::TXN_SHARE_ACKNOWLEDGE_API_KEY;

/// Served APIs: (key, min, max).
const SERVED: &[(i16, i16, i16)] = &[
    (0, 3, 12), // Produce
    (1, 4, 16), // Fetch
    (2, 1, 8),  // ListOffsets (v7: MAX_TIMESTAMP; v8: EARLIEST_LOCAL = log start)
    (23, 2, 4), // OffsetForLeaderEpoch (leader_epoch.rs: one epoch, 0)
    (3, 0, 12), // Metadata
    (10, 0, 6), // FindCoordinator
    (18, 0, 5), // ApiVersions (v5: KIP-1242 cluster and node check)
    (17, 1, 1), // SaslHandshake (v0's unframed tokens are not served)
    (36, 0, 2), // SaslAuthenticate
    (29, 1, 3), // DescribeAcls
    (30, 1, 3), // CreateAcls
    (31, 1, 3), // DeleteAcls
    (19, 2, 7), // CreateTopics
    (20, 1, 6), // DeleteTopics
    (32, 1, 4), // DescribeConfigs
    (37, 0, 3), // CreatePartitions
    (44, 0, 1), // IncrementalAlterConfigs (TOPIC, BROKER, GROUP resources)
    (33, 0, 2), // AlterConfigs (TOPIC, BROKER resources)
    (21, 0, 2), // DeleteRecords
    (61, 0, 0), // DescribeProducers
    (65, 0, 0), // DescribeTransactions
    (66, 0, 2), // ListTransactions (v1 duration, v2 id pattern)
    (27, 1, 1), // WriteTxnMarkers (kafka-transactions.sh abort)
    (60, 0, 2), // DescribeCluster
    (35, 1, 4), // DescribeLogDirs (log_dirs.rs)
    (43, 0, 2), // ElectLeaders (reassignments.rs: never needed on one node)
    (45, 0, 1), // AlterPartitionReassignments
    (46, 0, 0), // ListPartitionReassignments
    (48, 0, 1), // DescribeClientQuotas (quotas.rs, client_quotas.rs)
    (49, 0, 1), // AlterClientQuotas
    (50, 0, 0), // DescribeUserScramCredentials (KIP-554)
    (51, 0, 0), // AlterUserScramCredentials
    (76, 1, 1), // ShareGroupHeartbeat
    (77, 1, 1), // ShareGroupDescribe
    (78, 1, 2), // ShareFetch (v2: acquire mode, renew)
    (79, 1, 2), // ShareAcknowledge (v2: renew)
    (90, 0, 1), // DescribeShareGroupOffsets (v1: KIP-1226 lag, share_offsets_v1.rs)
    (22, 0, 5), // InitProducerId
    (24, 0, 5), // AddPartitionsToTxn
    (25, 0, 4), // AddOffsetsToTxn
    (26, 0, 5), // EndTxn
    (57, 0, 1), // UpdateFeatures
    (95, 0, 0), // TxnShareAcknowledge (KIP-1289)
    (11, 0, 9), // JoinGroup
    (14, 0, 5), // SyncGroup
    (12, 0, 4), // Heartbeat
    (13, 0, 5), // LeaveGroup
    (8, 2, 9),  // OffsetCommit
    (9, 1, 9),  // OffsetFetch (v8+: several groups)
    (28, 0, 5), // TxnOffsetCommit
    (16, 0, 5), // ListGroups (v4 states, v5 types filter)
    (15, 0, 6), // DescribeGroups (v6: GROUP_ID_NOT_FOUND for a missing group)
    (42, 0, 2), // DeleteGroups
    (47, 0, 0), // OffsetDelete
    (91, 0, 0), // AlterShareGroupOffsets
    (92, 0, 0), // DeleteShareGroupOffsets
    (68, 0, 1), // ConsumerGroupHeartbeat (KIP-848; v1: regex)
    (69, 0, 1), // ConsumerGroupDescribe
    (88, 0, 0), // StreamsGroupHeartbeat (KIP-1071)
    (89, 0, 0), // StreamsGroupDescribe
];

/// Share-group APIs, advertised with `share.version >= 1`.
const SHARE_APIS: &[i16] = &[76, 77, 78, 79, 90, 91, 92];

/// Whether `key` is an API that exists here but is switched off by a
/// feature level (it is then answered UNSUPPORTED_VERSION, not dropped).
pub(crate) fn is_gated_off(core: &BrokerCore, key: i16) -> bool {
    (key == TXN_SHARE_ACKNOWLEDGE_API_KEY || SHARE_APIS.contains(&key))
        && advertised_versions(core, key).is_none()
}

/// The versions of `key` this broker advertises now, `None` if not served.
pub(crate) fn advertised_versions(core: &BrokerCore, key: i16) -> Option<Versions> {
    let f = core.features();
    if SHARE_APIS.contains(&key) && !f.share_groups_enabled() {
        return None;
    }
    if key == TXN_SHARE_ACKNOWLEDGE_API_KEY && !f.txn_share_ack_enabled() {
        return None;
    }
    // Without transaction.version 2 the TV2 versions are not offered
    // (clients then run transactions v1).
    let tv2_cap = |max: i16| -> i16 {
        if f.transaction_version >= 2 {
            return max;
        }
        match key {
            0 => max.min(11),
            26 => max.min(4),
            _ => max,
        }
    };
    SERVED
        .iter()
        .find(|(k, _, _)| *k == key)
        .map(|&(_, min, max)| Versions {
            min,
            max: tv2_cap(max),
        })
}

fn api_keys(core: &BrokerCore) -> Vec<ApiVersion> {
    let mut keys: Vec<i16> = SERVED.iter().map(|(k, _, _)| *k).collect();
    keys.sort_unstable();
    keys.into_iter()
        .filter_map(|k| {
            advertised_versions(core, k).map(|v| {
                ApiVersion::default()
                    .with_api_key(k)
                    .with_min_version(v.min)
                    .with_max_version(v.max)
            })
        })
        .collect()
}

/// The v0 answer to an ApiVersions request at a version we cannot parse.
pub(crate) fn unsupported_version_response(core: &BrokerCore) -> ApiVersionsResponse {
    ApiVersionsResponse::default()
        .with_error_code(ErrorCode::UNSUPPORTED_VERSION.0)
        .with_api_keys(api_keys(core))
}

/// Kafka's rule for ClientSoftwareName/Version: alphanumerics, '-' and '.',
/// starting and ending with an alphanumeric.
fn valid_software_field(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || *c == b'-' || *c == b'.')
}

/// The error of a request Kafka would refuse, `None` for one to answer:
/// INVALID_REQUEST for bad software fields (v3+) or a half-named target
/// (v5), REBOOTSTRAP_REQUIRED for a target that is not this broker.
fn refusal(core: &BrokerCore, version: i16, req: &ApiVersionsV5Request) -> Option<ErrorCode> {
    let r = &req.request;
    if version >= 3
        && !(valid_software_field(&r.client_software_name)
            && valid_software_field(&r.client_software_version))
    {
        return Some(ErrorCode::INVALID_REQUEST);
    }
    match req.target() {
        Target::Unnamed => None,
        Target::HalfNamed => Some(ErrorCode::INVALID_REQUEST),
        Target::Named {
            cluster_id,
            node_id,
        } => (cluster_id != core.config().cluster_id || node_id != core.node_id())
            .then_some(ErrorCode::REBOOTSTRAP_REQUIRED),
    }
}

pub(crate) fn handle(
    core: &BrokerCore,
    ctx: &RequestContext,
    req: ApiVersionsV5Request,
) -> ApiVersionsResponse {
    let version = ctx.version();
    if let Some(code) = refusal(core, version, &req) {
        return ApiVersionsResponse::default().with_error_code(code.0);
    }
    let f = core.features();
    // Old Java clients fail the handshake on a supported feature with
    // min version 0 (request v0-v3): report min 1 there.
    let min_level = if version <= 3 { 1 } else { 0 };
    let supported = vec![
        SupportedFeatureKey::default()
            .with_name(StrBytes::from_static_str(SHARE_VERSION))
            .with_min_version(min_level)
            .with_max_version(MAX_SHARE_VERSION),
        SupportedFeatureKey::default()
            .with_name(StrBytes::from_static_str(TRANSACTION_VERSION))
            .with_min_version(min_level)
            .with_max_version(MAX_TRANSACTION_VERSION),
    ];
    let mut finalized = Vec::new();
    for (name, level) in [
        (SHARE_VERSION, f.share_version),
        (TRANSACTION_VERSION, f.transaction_version),
    ] {
        if level > 0 {
            finalized.push(
                FinalizedFeatureKey::default()
                    .with_name(StrBytes::from_static_str(name))
                    .with_min_version_level(level)
                    .with_max_version_level(level),
            );
        }
    }
    let mut resp = ApiVersionsResponse::default().with_api_keys(api_keys(core));
    if version >= 3 {
        resp = resp
            .with_supported_features(supported)
            .with_finalized_features(finalized)
            .with_finalized_features_epoch(f.epoch);
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::BrokerConfig;
    use kafka_protocol::messages::ApiVersionsRequest;
    use sharestream_protocol::api::RequestHeaderInfo;
    use std::sync::Arc;

    fn core() -> BrokerCore {
        BrokerCore::open(BrokerConfig::in_memory(), "127.0.0.1:9092".parse().unwrap()).unwrap()
    }

    fn ctx(version: i16) -> RequestContext {
        RequestContext {
            header: RequestHeaderInfo {
                api_key: 18,
                api_version: version,
                correlation_id: 1,
                client_id: None,
            },
            principal: Arc::from("User:ANONYMOUS"),
            host: Arc::from("127.0.0.1"),
            connection_id: 1,
        }
    }

    fn v5(cluster_id: Option<&str>, node_id: i32) -> ApiVersionsV5Request {
        ApiVersionsV5Request {
            request: ApiVersionsRequest::default()
                .with_client_software_name(StrBytes::from_static_str("apache-kafka-java"))
                .with_client_software_version(StrBytes::from_static_str("4.4.0")),
            cluster_id: cluster_id.map(str::to_string),
            node_id,
        }
    }

    #[test]
    fn v5_is_advertised() {
        let core = core();
        let resp = handle(&core, &ctx(5), v5(None, -1));
        let av = resp.api_keys.iter().find(|k| k.api_key == 18).unwrap();
        assert_eq!((av.min_version, av.max_version), (0, 5));
        // The v0 refusal of a version above 5 names 5 too.
        let refusal = unsupported_version_response(&core);
        let av = refusal.api_keys.iter().find(|k| k.api_key == 18).unwrap();
        assert_eq!(av.max_version, 5);
    }

    #[test]
    fn v5_naming_this_broker_is_answered_like_v4() {
        let core = core();
        let cluster = core.config().cluster_id.clone();
        let named = handle(&core, &ctx(5), v5(Some(&cluster), core.node_id()));
        let unnamed = handle(&core, &ctx(5), v5(None, -1));
        let v4 = handle(&core, &ctx(4), v5(None, -1));
        assert_eq!(named.error_code, 0);
        assert!(!named.api_keys.is_empty());
        assert_eq!(named, unnamed);
        assert_eq!(named, v4);
    }

    #[test]
    fn v5_naming_another_cluster_or_node_is_rebootstrap_required() {
        let core = core();
        let cluster = core.config().cluster_id.clone();
        let node = core.node_id();
        for (c, n) in [
            (cluster.as_str(), node + 1),
            ("another-cluster", node),
            (&cluster.to_uppercase(), node),
            ("", node),
            (cluster.as_str(), -2),
        ] {
            let resp = handle(&core, &ctx(5), v5(Some(c), n));
            assert_eq!(resp.error_code, 129, "{c:?}/{n}");
            assert_eq!(ErrorCode(resp.error_code), ErrorCode::REBOOTSTRAP_REQUIRED);
            assert!(resp.api_keys.is_empty());
        }
    }

    #[test]
    fn v5_naming_half_a_target_is_invalid_request() {
        let core = core();
        let cluster = core.config().cluster_id.clone();
        for req in [v5(Some(&cluster), -1), v5(None, core.node_id())] {
            let resp = handle(&core, &ctx(5), req);
            assert_eq!(resp.error_code, ErrorCode::INVALID_REQUEST.0);
            assert!(resp.api_keys.is_empty());
        }
        // Bad software fields are refused first, whatever the target.
        let mut bad = v5(Some("another-cluster"), 3);
        bad.request.client_software_name = StrBytes::from_static_str("-bad");
        let resp = handle(&core, &ctx(5), bad);
        assert_eq!(resp.error_code, ErrorCode::INVALID_REQUEST.0);
    }

    #[test]
    fn software_field_rule() {
        for ok in ["apache-kafka-java", "4.2.0", "a", "librdkafka", "x.y-z1"] {
            assert!(valid_software_field(ok), "{ok}");
        }
        for bad in ["", "-a", "a-", "a b", ".", "a_b"] {
            assert!(!valid_software_field(bad), "{bad}");
        }
    }
}
