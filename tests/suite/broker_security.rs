//! Broker security over sockets: SASL (PLAIN, SCRAM-SHA-256/512) on a
//! SASL_PLAINTEXT listener, ACL administration and authorization errors.

use crate::common;

use std::time::Instant;

use bytes::Bytes;
use common::RawClient;
use common::broker::TestBroker;
use common::sasl::*;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use sharestream::broker::BrokerHandle;
use sharestream::protocol::ErrorCode;
use sharestream::protocol::records::{BatchSpec, Record, encode_batch};
use sharestream::protocol::sasl::SaslMechanism;
use sharestream::protocol::txn_share_ack::TxnShareAcknowledgeRequest;

fn s(x: &str) -> StrBytes {
    StrBytes::from_string(x.to_string())
}

async fn start(acl: bool) -> BrokerHandle {
    start_with(acl, &[("alice", "alice-pw")], |_| {}).await
}

async fn metadata_ok(c: &mut RawClient) {
    let r = c
        .send(&MetadataRequest::default().with_topics(None), 12)
        .await;
    assert_eq!(r.brokers.len(), 1);
}

#[tokio::test]
async fn unauthenticated_connection_on_a_sasl_listener_gets_only_the_handshake() {
    let b = start(false).await;
    let mut c = RawClient::connect(b.local_addr()).await;
    let v = c.send(&ApiVersionsRequest::default(), 2).await;
    assert_eq!(v.error_code, 0);
    assert!(v.api_keys.iter().any(|k| k.api_key == 17));
    c.send_only(&MetadataRequest::default().with_topics(None), 12)
        .await;
    assert!(
        c.is_closed().await,
        "Metadata before authentication must close"
    );
    // Handshake done but not authenticated: still nothing else.
    let mut c = RawClient::connect(b.local_addr()).await;
    let hs = c
        .send(
            &SaslHandshakeRequest::default().with_mechanism(s("PLAIN")),
            1,
        )
        .await;
    assert_eq!(hs.error_code, 0);
    c.send_only(&MetadataRequest::default().with_topics(None), 12)
        .await;
    assert!(c.is_closed().await);
    // An unknown mechanism is refused with the list of offered ones.
    let mut c = RawClient::connect(b.local_addr()).await;
    let hs = c
        .send(
            &SaslHandshakeRequest::default().with_mechanism(s("GSSAPI")),
            1,
        )
        .await;
    assert_eq!(hs.error_code, ErrorCode::UNSUPPORTED_SASL_MECHANISM.0);
    assert!(hs.mechanisms.iter().any(|m| m.as_str() == "SCRAM-SHA-512"));
    assert!(c.is_closed().await);
    b.shutdown().await;
}

#[tokio::test]
async fn plain_and_scram_authenticate_and_wrong_passwords_are_refused_and_slowed() {
    let b = start(false).await;
    for mech in [
        SaslMechanism::Plain,
        SaslMechanism::ScramSha256,
        SaslMechanism::ScramSha512,
    ] {
        let mut c = login(&b, mech, "alice", "alice-pw").await.ok().unwrap();
        metadata_ok(&mut c).await;
        for (user, pw) in [("alice", "nope"), ("mallory", "alice-pw")] {
            let t0 = Instant::now();
            let (code, mut c) = match login(&b, mech, user, pw).await {
                Ok(_) => panic!("{mech:?} {user}/{pw} must be refused"),
                Err(e) => e,
            };
            assert_eq!(code, ErrorCode::SASL_AUTHENTICATION_FAILED, "{mech:?}");
            // The answer waits for the configured failure delay.
            assert!(t0.elapsed() >= DELAY, "{mech:?}: refusal not slowed");
            assert!(c.is_closed().await, "{mech:?}: connection must close");
        }
    }
    assert!(
        b.core()
            .metrics()
            .render_prometheus(&[])
            .contains("sasl_authentication_failures")
    );
    b.shutdown().await;
}

async fn produce(c: &mut RawClient, topic: &str) -> i16 {
    let batch = encode_batch(
        &BatchSpec::default(),
        &[Record {
            value: Some(Bytes::from_static(b"v")),
            ..Record::default()
        }],
    )
    .unwrap();
    let req = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(5000)
        .with_topic_data(vec![
            TopicProduceData::default()
                .with_name(TopicName(s(topic)))
                .with_partition_data(vec![
                    PartitionProduceData::default()
                        .with_index(0)
                        .with_records(Some(batch)),
                ]),
        ]);
    let mut r = c.send(&req, 9).await;
    r.responses
        .remove(0)
        .partition_responses
        .remove(0)
        .error_code
}

#[tokio::test]
async fn acls_are_administered_by_super_users_and_enforced_on_produce() {
    let b = start(true).await;
    let mut admin = login(&b, SaslMechanism::ScramSha256, "admin", "admin-pw")
        .await
        .ok()
        .unwrap();
    let r = admin
        .send(
            &CreateTopicsRequest::default()
                .with_topics(vec![
                    CreatableTopic::default()
                        .with_name(TopicName(s("orders")))
                        .with_num_partitions(1)
                        .with_replication_factor(1),
                ])
                .with_timeout_ms(5000),
            5,
        )
        .await;
    assert_eq!(r.topics[0].error_code, 0);
    let mut alice = login(&b, SaslMechanism::Plain, "alice", "alice-pw")
        .await
        .ok()
        .unwrap();
    // No ACL: refused.
    assert_eq!(
        produce(&mut alice, "orders").await,
        ErrorCode::TOPIC_AUTHORIZATION_FAILED.0
    );
    // Alice cannot grant herself anything.
    let r = alice
        .send(
            &CreateAclsRequest::default().with_creations(vec![acl(
                TOPIC,
                "orders",
                LITERAL,
                "User:alice",
                WRITE,
            )]),
            3,
        )
        .await;
    assert_eq!(
        r.results[0].error_code,
        ErrorCode::CLUSTER_AUTHORIZATION_FAILED.0
    );
    // The admin grants Write on a prefix.
    create_acls(
        &mut admin,
        vec![acl(TOPIC, "ord", PREFIXED, "User:alice", WRITE)],
    )
    .await;
    assert_eq!(produce(&mut alice, "orders").await, 0);
    let d = admin
        .send(
            &DescribeAclsRequest::default()
                .with_resource_type_filter(TOPIC)
                .with_resource_name_filter(Some(s("orders")))
                .with_pattern_type_filter(2) // MATCH
                .with_principal_filter(None)
                .with_host_filter(None)
                .with_operation(1)
                .with_permission_type(1),
            3,
        )
        .await;
    assert_eq!(d.error_code, 0);
    assert_eq!(d.resources.len(), 1);
    assert_eq!(d.resources[0].resource_name.as_str(), "ord");
    // Deleting revokes.
    let del = admin
        .send(
            &DeleteAclsRequest::default().with_filters(vec![
                DeleteAclsFilter::default()
                    .with_resource_type_filter(1)
                    .with_pattern_type_filter(1)
                    .with_principal_filter(Some(s("User:alice")))
                    .with_resource_name_filter(None)
                    .with_host_filter(None)
                    .with_operation(1)
                    .with_permission_type(1),
            ]),
            3,
        )
        .await;
    assert_eq!(del.filter_results[0].matching_acls.len(), 1, "{del:?}");
    assert_eq!(
        produce(&mut alice, "orders").await,
        ErrorCode::TOPIC_AUTHORIZATION_FAILED.0
    );
    b.shutdown().await;
}

#[tokio::test]
async fn transactional_apis_check_the_transactional_id_then_the_group() {
    let b = start(true).await;
    let mut admin = login(&b, SaslMechanism::Plain, "admin", "admin-pw")
        .await
        .ok()
        .unwrap();
    let mut alice = login(&b, SaslMechanism::ScramSha512, "alice", "alice-pw")
        .await
        .ok()
        .unwrap();
    let init = InitProducerIdRequest::default()
        .with_transactional_id(Some(TransactionalId(s("tx-1"))))
        .with_transaction_timeout_ms(60_000);
    let r = alice.send(&init, 4).await;
    assert_eq!(
        r.error_code,
        ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED.0
    );
    let tsa = TxnShareAcknowledgeRequest {
        transactional_id: Some("tx-1".into()),
        group_id: Some("g".into()),
        producer_id: 1,
        producer_epoch: 0,
        member_id: Some("m".into()),
        member_epoch: 1,
        topics: Vec::new(),
    };
    // D14: transactional id first ...
    let r = alice.send(&tsa, 0).await;
    assert_eq!(
        r.error_code,
        ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED.0
    );
    let r = alice
        .send(
            &EndTxnRequest::default().with_transactional_id(TransactionalId(s("tx-1"))),
            3,
        )
        .await;
    assert_eq!(
        r.error_code,
        ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED.0
    );
    // ... then the group.
    create_acls(
        &mut admin,
        vec![acl(TXN_ID, "tx-", PREFIXED, "User:alice", WRITE)],
    )
    .await;
    let r = alice.send(&tsa, 0).await;
    assert_eq!(r.error_code, ErrorCode::GROUP_AUTHORIZATION_FAILED.0);
    let r = alice.send(&init, 4).await;
    assert_eq!(r.error_code, 0);
    // With Read on the group the request gets past authorization (to the
    // producer checks).
    create_acls(
        &mut admin,
        vec![acl(GROUP, "g", LITERAL, "User:alice", READ)],
    )
    .await;
    let r = alice.send(&tsa, 0).await;
    assert_ne!(r.error_code, ErrorCode::GROUP_AUTHORIZATION_FAILED.0);
    assert_ne!(
        r.error_code,
        ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED.0
    );
    // Share APIs need Read on the group too.
    let r = alice
        .send(
            &ShareGroupHeartbeatRequest::default()
                .with_group_id(GroupId(s("other")))
                .with_member_id(s("m1"))
                .with_subscribed_topic_names(Some(vec![])),
            1,
        )
        .await;
    assert_eq!(r.error_code, ErrorCode::GROUP_AUTHORIZATION_FAILED.0);
    b.shutdown().await;
}

fn upsertion(
    user: &str,
    m: SaslMechanism,
    code: i8,
    iterations: i32,
    pw: &str,
) -> alter_user_scram_credentials_request::ScramCredentialUpsertion {
    let salt = b"pepper-salt".to_vec();
    alter_user_scram_credentials_request::ScramCredentialUpsertion::default()
        .with_name(s(user))
        .with_mechanism(code)
        .with_iterations(iterations)
        .with_salted_password(Bytes::from(
            sharestream::protocol::sasl::ScramCredential::salt_password(
                m,
                pw,
                &salt,
                iterations as u32,
            ),
        ))
        .with_salt(Bytes::from(salt))
}

async fn describe_scram(
    c: &mut RawClient,
    users: Option<&[&str]>,
) -> DescribeUserScramCredentialsResponse {
    c.send(
        &DescribeUserScramCredentialsRequest::default().with_users(users.map(|u| {
            u.iter()
                .map(|n| {
                    describe_user_scram_credentials_request::UserName::default().with_name(s(n))
                })
                .collect()
        })),
        0,
    )
    .await
}

/// KIP-554 as `kafka-configs.sh --entity-type users` uses it: a super user
/// creates a SCRAM user, who can then log in with that mechanism (and not
/// with PLAIN, which keeps the configured passwords); the credential is
/// described with its iterations, survives a restart, and once deleted
/// the login fails. Another user is refused with the cluster's
/// authorization error.
#[tokio::test]
async fn scram_users_are_created_described_and_deleted_through_the_admin_api() {
    let dir = tempfile::tempdir().unwrap();
    let start = || {
        TestBroker::on_disk(dir.path())
            .sasl(true, &[("alice", "alice-pw")])
            .start()
    };
    let b = start().await.b;
    let mut admin = login(&b, SaslMechanism::ScramSha256, ADMIN.0, ADMIN.1)
        .await
        .ok()
        .unwrap();
    let r = describe_scram(&mut admin, Some(&["carol"])).await;
    assert_eq!(r.error_code, 0);
    assert_eq!(r.results[0].error_code, ErrorCode::RESOURCE_NOT_FOUND.0);
    assert!(
        login(&b, SaslMechanism::ScramSha256, "carol", "carol-pw")
            .await
            .is_err(),
        "carol does not exist yet"
    );
    let r = admin
        .send(
            &AlterUserScramCredentialsRequest::default().with_upsertions(vec![
                upsertion("carol", SaslMechanism::ScramSha256, 1, 8192, "carol-pw"),
                upsertion("dave", SaslMechanism::ScramSha256, 1, 4095, "dave-pw"),
            ]),
            0,
        )
        .await;
    let codes: Vec<(String, i16)> = r
        .results
        .iter()
        .map(|x| (x.user.to_string(), x.error_code))
        .collect();
    assert_eq!(
        codes,
        vec![
            ("carol".into(), 0),
            ("dave".into(), ErrorCode::UNACCEPTABLE_CREDENTIAL.0)
        ]
    );
    let mut carol = login(&b, SaslMechanism::ScramSha256, "carol", "carol-pw")
        .await
        .ok()
        .unwrap();
    metadata_ok(&mut carol).await;
    assert!(
        login(&b, SaslMechanism::ScramSha256, "carol", "wrong")
            .await
            .is_err()
    );
    assert!(
        login(&b, SaslMechanism::ScramSha512, "carol", "carol-pw")
            .await
            .is_err()
    );
    assert!(
        login(&b, SaslMechanism::Plain, "carol", "carol-pw")
            .await
            .is_err()
    );

    // carol is no super user: the cluster's authorization error.
    let r = describe_scram(&mut carol, None).await;
    assert_eq!(r.error_code, ErrorCode::CLUSTER_AUTHORIZATION_FAILED.0);
    let r = carol
        .send(
            &AlterUserScramCredentialsRequest::default().with_upsertions(vec![upsertion(
                "carol",
                SaslMechanism::ScramSha512,
                2,
                4096,
                "x",
            )]),
            0,
        )
        .await;
    assert_eq!(
        r.results[0].error_code,
        ErrorCode::CLUSTER_AUTHORIZATION_FAILED.0
    );

    let r = describe_scram(&mut admin, None).await;
    let listed: Vec<(String, Vec<(i8, i32)>)> = r
        .results
        .iter()
        .map(|x| {
            (
                x.user.to_string(),
                x.credential_infos
                    .iter()
                    .map(|i| (i.mechanism, i.iterations))
                    .collect(),
            )
        })
        .collect();
    assert!(
        listed.contains(&("carol".into(), vec![(1, 8192)])),
        "{listed:?}"
    );
    assert!(listed.iter().any(|(u, _)| u == "alice"), "{listed:?}");
    b.shutdown().await;

    // A restart keeps carol; then deleting her credential ends her logins.
    let b = start().await.b;
    let mut admin = login(&b, SaslMechanism::ScramSha256, ADMIN.0, ADMIN.1)
        .await
        .ok()
        .unwrap();
    assert!(
        login(&b, SaslMechanism::ScramSha256, "carol", "carol-pw")
            .await
            .is_ok()
    );
    let r = admin
        .send(
            &AlterUserScramCredentialsRequest::default().with_deletions(vec![
                alter_user_scram_credentials_request::ScramCredentialDeletion::default()
                    .with_name(s("carol"))
                    .with_mechanism(1),
            ]),
            0,
        )
        .await;
    assert_eq!(r.results[0].error_code, 0, "{r:?}");
    assert!(
        login(&b, SaslMechanism::ScramSha256, "carol", "carol-pw")
            .await
            .is_err()
    );
    b.shutdown().await;
}

/// SaslHandshake v1 naming OAUTHBEARER.
async fn handshake(c: &mut RawClient) -> SaslHandshakeResponse {
    c.send(
        &SaslHandshakeRequest::default().with_mechanism(s("OAUTHBEARER")),
        1,
    )
    .await
}

/// An unsecured JWS (`"alg":"none"`) for `sub`, expiring at `exp` (s).
fn unsecured_token(sub: &str, exp: i64) -> String {
    use base64::Engine as _;
    let enc = |s: String| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
    format!(
        "{}.{}.",
        enc(r#"{"alg":"none"}"#.to_string()),
        enc(format!(r#"{{"sub":"{sub}","exp":{exp}}}"#))
    )
}

/// OAUTHBEARER with unsecured tokens (`--sasl-oauthbearer-unsecured`),
/// as Kafka's default validator: a valid token logs in as its `sub`; an
/// expired one gets the RFC 7628 error as a challenge, and the client's
/// %x01 then fails the login with that error; an authorization id other
/// than the token's principal fails; without the setting the mechanism
/// is not offered.
#[tokio::test]
async fn oauthbearer_with_unsecured_tokens_logs_in_as_the_tokens_subject() {
    use sharestream::protocol::oauthbearer::ClientInitialResponse;
    let b = start_with(true, &[], |c| c.security.oauthbearer_unsecured = true).await;
    let now_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let auth =
        |bytes: Vec<u8>| SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(bytes));
    let first = |authz: Option<&str>, token: String| {
        ClientInitialResponse {
            authorization_id: authz.map(str::to_string),
            token,
            extensions: vec![("traceId".into(), "1".into())],
        }
        .encode()
    };

    // A valid token: logged in as User:alice, whom ACLs then govern.
    let mut c = RawClient::connect(b.local_addr()).await;
    let hs = handshake(&mut c).await;
    assert_eq!(hs.error_code, 0);
    assert!(hs.mechanisms.iter().any(|m| m.as_str() == "OAUTHBEARER"));
    let r = c
        .send(
            &auth(first(Some("alice"), unsecured_token("alice", now_s + 3600))),
            2,
        )
        .await;
    assert_eq!((r.error_code, r.auth_bytes.len()), (0, 0));
    metadata_ok(&mut c).await;
    let mut admin = plain(&b, ADMIN.0, ADMIN.1).await;
    let created = admin
        .send(
            &CreateTopicsRequest::default().with_topics(vec![
                CreatableTopic::default()
                    .with_name(TopicName(s("oauth")))
                    .with_num_partitions(1)
                    .with_replication_factor(1),
            ]),
            5,
        )
        .await;
    assert_eq!(created.topics[0].error_code, 0);
    assert_eq!(
        produce(&mut c, "oauth").await,
        ErrorCode::TOPIC_AUTHORIZATION_FAILED.0
    );
    create_acls(
        &mut admin,
        vec![acl(TOPIC, "oauth", LITERAL, "User:alice", WRITE)],
    )
    .await;
    assert_eq!(produce(&mut c, "oauth").await, 0);

    // An expired token: the error as a challenge, then the failure.
    let mut c = RawClient::connect(b.local_addr()).await;
    assert_eq!(handshake(&mut c).await.error_code, 0);
    let r = c
        .send(&auth(first(None, unsecured_token("alice", now_s - 60))), 2)
        .await;
    assert_eq!(r.error_code, 0);
    assert_eq!(r.auth_bytes.as_ref(), br#"{"status":"invalid_token"}"#);
    let r = c.send(&auth(vec![0x01]), 2).await;
    assert_eq!(r.error_code, ErrorCode::SASL_AUTHENTICATION_FAILED.0);
    assert!(r.error_message.unwrap().contains("invalid_token"));

    // Another authorization id than the token's principal.
    let mut c = RawClient::connect(b.local_addr()).await;
    assert_eq!(handshake(&mut c).await.error_code, 0);
    let r = c
        .send(
            &auth(first(Some("admin"), unsecured_token("alice", now_s + 60))),
            2,
        )
        .await;
    assert_eq!(r.error_code, ErrorCode::SASL_AUTHENTICATION_FAILED.0);
    b.shutdown().await;

    // Off (the default): not offered.
    let plain_only = start(false).await;
    let mut c = RawClient::connect(plain_only.local_addr()).await;
    let hs = handshake(&mut c).await;
    assert_eq!(hs.error_code, ErrorCode::UNSUPPORTED_SASL_MECHANISM.0);
    assert!(hs.mechanisms.iter().all(|m| m.as_str() != "OAUTHBEARER"));
    plain_only.shutdown().await;
}
