//! Feature levels: ApiVersions reports them, UpdateFeatures changes them
//! online, and the APIs they gate follow.

use crate::common;

use bytes::BytesMut;
use common::RawClient;
use common::broker::TestBroker;
use kafka_protocol::messages::update_features_request::FeatureUpdateKey;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use sharestream::broker::BrokerHandle;
use sharestream::protocol::ErrorCode;
use sharestream::protocol::api::{ApiRequest, decode_response_header};
use sharestream::protocol::api_versions_v5::ApiVersionsV5Request;
use sharestream::protocol::txn_share_ack::TxnShareAcknowledgeRequest;

async fn versions(c: &mut RawClient) -> ApiVersionsResponse {
    c.send(
        &ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("t"))
            .with_client_software_version(StrBytes::from_static_str("1")),
        3,
    )
    .await
}

fn level(r: &ApiVersionsResponse, name: &str) -> Option<i16> {
    r.finalized_features
        .iter()
        .find(|f| f.name.as_str() == name)
        .map(|f| f.max_version_level)
}

fn max_version(r: &ApiVersionsResponse, key: i16) -> Option<i16> {
    r.api_keys
        .iter()
        .find(|k| k.api_key == key)
        .map(|k| k.max_version)
}

fn update(name: &str, level: i16, upgrade_type: i8) -> UpdateFeaturesRequest {
    UpdateFeaturesRequest::default().with_feature_updates(vec![
        FeatureUpdateKey::default()
            .with_feature(StrBytes::from_string(name.to_string()))
            .with_max_version_level(level)
            .with_upgrade_type(upgrade_type),
    ])
}

#[tokio::test]
async fn upgrade_and_downgrade_online() {
    let t = TestBroker::in_memory()
        .configure(|c| {
            c.share_version = 2;
            c.transaction_version = 2;
        })
        .start()
        .await;
    let (b, mut c) = (t.b, t.c);
    let before = versions(&mut c).await;
    assert_eq!(level(&before, "share.version"), Some(2));
    assert_eq!(
        max_version(&before, 95),
        None,
        "key 95 needs share.version 3"
    );

    // Key 95 while disabled: UNSUPPORTED_VERSION in the body.
    let r = c.send(&TxnShareAcknowledgeRequest::default(), 0).await;
    assert_eq!(r.error_code, ErrorCode::UNSUPPORTED_VERSION.0);

    // Unknown feature, level too high, downgrade without the flag.
    let r = c.send(&update("no.such.feature", 1, 1), 1).await;
    assert_eq!(r.error_code, ErrorCode::INVALID_UPDATE_VERSION.0);
    let r = c.send(&update("share.version", 9, 1), 1).await;
    assert_eq!(r.error_code, ErrorCode::INVALID_UPDATE_VERSION.0);
    let r = c.send(&update("share.version", 1, 1), 1).await;
    assert_eq!(r.error_code, ErrorCode::INVALID_UPDATE_VERSION.0);
    assert_eq!(level(&versions(&mut c).await, "share.version"), Some(2));

    // Upgrade: the level and the epoch move.
    let r = c.send(&update("share.version", 3, 1), 1).await;
    assert_eq!(r.error_code, 0, "{:?}", r.error_message);
    let after = versions(&mut c).await;
    assert_eq!(level(&after, "share.version"), Some(3));
    assert!(after.finalized_features_epoch > before.finalized_features_epoch);

    // transaction.version downgrade to 1 (safe downgrade): the TV2 API
    // versions are no longer offered.
    assert_eq!(max_version(&after, 26), Some(5));
    let r = c.send(&update("transaction.version", 1, 2), 1).await;
    assert_eq!(r.error_code, 0, "{:?}", r.error_message);
    let tv1 = versions(&mut c).await;
    assert_eq!(level(&tv1, "transaction.version"), Some(1));
    assert_eq!(max_version(&tv1, 26), Some(4));
    assert_eq!(max_version(&tv1, 0), Some(11));
    // validate_only changes nothing.
    let r = c
        .send(
            &update("transaction.version", 2, 1).with_validate_only(true),
            1,
        )
        .await;
    assert_eq!(r.error_code, 0);
    assert_eq!(
        level(&versions(&mut c).await, "transaction.version"),
        Some(1)
    );
    b.shutdown().await;
}

#[tokio::test]
async fn feature_levels_persist() {
    let dir = tempfile::tempdir().unwrap();
    let t = TestBroker::on_disk(dir.path()).start().await;
    let (b, mut c) = (t.b, t.c);
    let r = c.send(&update("share.version", 1, 2), 1).await;
    assert_eq!(r.error_code, 0);
    let epoch = versions(&mut c).await.finalized_features_epoch;
    drop(c);
    b.shutdown().await;
    let t = TestBroker::on_disk(dir.path()).start().await;
    let (b, mut c) = (t.b, t.c);
    let v = versions(&mut c).await;
    assert_eq!(level(&v, "share.version"), Some(1));
    assert!(v.finalized_features_epoch >= epoch, "epochs never go down");
    b.shutdown().await;
}

/// A v5 request as a Java 4.4 client sends it on a connection to a known
/// broker: software fields, then the cluster and node it expects.
fn java_v5(cluster_id: Option<&str>, node_id: i32) -> ApiVersionsV5Request {
    ApiVersionsV5Request {
        request: ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("apache-kafka-java"))
            .with_client_software_version(StrBytes::from_static_str("4.4.0")),
        cluster_id: cluster_id.map(str::to_string),
        node_id,
    }
}

fn api_versions_count(b: &BrokerHandle) -> u64 {
    b.core().metrics().api(18).map_or(0, |s| s.count)
}

/// KIP-1242: ApiVersions v5 is answered at v5, in one round trip, whether
/// it names this broker or nothing (a bootstrap connection).
#[tokio::test]
async fn api_versions_v5_is_answered_in_one_round_trip() {
    let b = TestBroker::in_memory().start().await.b;
    let cluster = b.core().config().cluster_id.clone();
    let node = b.core().node_id();
    assert_eq!(node, 0);
    for (i, req) in [java_v5(None, -1), java_v5(Some(&cluster), node)]
        .into_iter()
        .enumerate()
    {
        let mut c = RawClient::connect(b.local_addr()).await;
        let resp = c.send(&req, 5).await;
        assert_eq!(resp.error_code, 0, "{req:?}");
        let av = resp.api_keys.iter().find(|k| k.api_key == 18).unwrap();
        assert_eq!((av.min_version, av.max_version), (0, 5));
        // v4 and above report features with a min level of 0.
        assert!(resp.supported_features.iter().all(|f| f.min_version == 0));
        // The connection is ready: the next request is Metadata, not a
        // second ApiVersions.
        let md = c
            .send(&MetadataRequest::default().with_topics(Some(vec![])), 12)
            .await;
        assert_eq!(md.cluster_id.as_deref(), Some(cluster.as_str()));
        assert_eq!(api_versions_count(&b), i as u64 + 1);
    }
}

/// KIP-1242: a v5 request naming another cluster or node gets
/// REBOOTSTRAP_REQUIRED (129) and no API list; one naming a node without a
/// cluster (or the reverse) gets INVALID_REQUEST.
#[tokio::test]
async fn api_versions_v5_target_mismatch() {
    let t = TestBroker::in_memory().start().await;
    let (b, mut c) = (t.b, t.c);
    let cluster = b.core().config().cluster_id.clone();
    for req in [
        java_v5(Some(&cluster), 1),
        java_v5(Some("other-cluster"), 0),
    ] {
        let resp = c.send(&req, 5).await;
        assert_eq!(ErrorCode(resp.error_code), ErrorCode::REBOOTSTRAP_REQUIRED);
        assert!(resp.api_keys.is_empty());
    }
    for req in [java_v5(Some(&cluster), -1), java_v5(None, 0)] {
        let resp = c.send(&req, 5).await;
        assert_eq!(ErrorCode(resp.error_code), ErrorCode::INVALID_REQUEST);
        assert!(resp.api_keys.is_empty());
    }
    // Below v5 the fields do not exist: the same request at v4 is answered.
    let resp = c.send(&java_v5(Some("other-cluster"), 9).request, 4).await;
    assert_eq!(resp.error_code, 0);
}

/// A version above 5 still gets the v0 UNSUPPORTED_VERSION answer, which
/// now names 5 as the version to retry with.
#[tokio::test]
async fn api_versions_above_v5_names_v5_for_the_retry() {
    let t = TestBroker::in_memory().start().await;
    let (_b, mut c) = (t.b, t.c);
    let mut body = BytesMut::new();
    // Header v2: key, version 6, correlation id, null client id, no tags;
    // then an empty body.
    body.extend_from_slice(&18i16.to_be_bytes());
    body.extend_from_slice(&6i16.to_be_bytes());
    body.extend_from_slice(&7i32.to_be_bytes());
    body.extend_from_slice(&(-1i16).to_be_bytes());
    body.extend_from_slice(&[0]);
    let mut frame = (body.len() as i32).to_be_bytes().to_vec();
    frame.extend_from_slice(&body);
    c.write_raw(&frame).await;
    let mut resp = c.next_frame().await.expect("an answer");
    let cid = decode_response_header(&mut resp, 18, 0).unwrap();
    assert_eq!(cid, 7);
    let resp = ApiVersionsV5Request::decode_response(&mut resp, 0).unwrap();
    assert_eq!(ErrorCode(resp.error_code), ErrorCode::UNSUPPORTED_VERSION);
    let av = resp.api_keys.iter().find(|k| k.api_key == 18).unwrap();
    assert_eq!(av.max_version, 5);
}

/// Our own client still opens a connection with ApiVersions v3, once, and
/// negotiates every API against the broker's 0-5 range for ApiVersions.
#[tokio::test]
async fn our_client_negotiates_in_one_api_versions() {
    use sharestream::client::{Connection, ConnectionConfig};
    let b = TestBroker::in_memory().start().await.b;
    let conn = Connection::connect_tcp(b.local_addr(), &ConnectionConfig::default())
        .await
        .unwrap();
    assert_eq!(api_versions_count(&b), 1);
    let v = conn.versions();
    assert_eq!(v.peer_range(18).map(|r| (r.min, r.max)), Some((0, 5)));
    assert_eq!(v.version_for(18).unwrap(), 5);
    assert_eq!(v.version_for(3).unwrap(), 12);
}
