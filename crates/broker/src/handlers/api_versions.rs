//! ApiVersions: what this broker serves, and its feature levels.
//!
//! Only APIs with a handler are advertised, at the versions the handler
//! implements. Share-group APIs appear only with `share.version >= 1`, and
//! TxnShareAcknowledge (key 95) only with `share.version >= 3` and
//! `transaction.version >= 2` (docs/DESIGN.md D2).

use kafka_protocol::messages::api_versions_response::{
    ApiVersion, FinalizedFeatureKey, SupportedFeatureKey,
};
use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse};
use kafka_protocol::protocol::StrBytes;

use super::RequestContext;
use crate::core::{
    BrokerCore, MAX_SHARE_VERSION, MAX_TRANSACTION_VERSION, SHARE_VERSION, TRANSACTION_VERSION,
};
use sharestream_protocol::ErrorCode;
use sharestream_protocol::api::Versions;
use sharestream_protocol::txn_share_ack::TXN_SHARE_ACKNOWLEDGE_API_KEY;

/// Served APIs: (key, min, max).
const SERVED: &[(i16, i16, i16)] = &[
    (0, 3, 12), // Produce
    (1, 4, 16), // Fetch
    (2, 1, 6),  // ListOffsets
    (3, 0, 12), // Metadata
    (10, 0, 6), // FindCoordinator
    (18, 0, 4), // ApiVersions
    (17, 1, 1), // SaslHandshake (v0's unframed tokens are not served)
    (36, 0, 2), // SaslAuthenticate
    (29, 1, 3), // DescribeAcls
    (30, 1, 3), // CreateAcls
    (31, 1, 3), // DeleteAcls
    (19, 2, 7), // CreateTopics
    (20, 1, 6), // DeleteTopics
    (32, 1, 4), // DescribeConfigs
    (37, 0, 3), // CreatePartitions
    (44, 0, 1), // IncrementalAlterConfigs (GROUP resources)
    (60, 0, 2), // DescribeCluster
    (76, 1, 1), // ShareGroupHeartbeat
    (77, 1, 1), // ShareGroupDescribe
    (78, 1, 2), // ShareFetch (v2: acquire mode, renew)
    (79, 1, 2), // ShareAcknowledge (v2: renew)
    (90, 0, 0), // DescribeShareGroupOffsets (v1 adds Lag; the codec has v0)
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
];

/// Share-group APIs, advertised with `share.version >= 1`.
const SHARE_APIS: &[i16] = &[76, 77, 78, 79, 90];

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

pub(crate) fn handle(
    core: &BrokerCore,
    ctx: &RequestContext,
    req: ApiVersionsRequest,
) -> ApiVersionsResponse {
    let version = ctx.version();
    if version >= 3
        && !(valid_software_field(&req.client_software_name)
            && valid_software_field(&req.client_software_version))
    {
        return ApiVersionsResponse::default().with_error_code(ErrorCode::INVALID_REQUEST.0);
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
