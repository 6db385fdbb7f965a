//! SASL_PLAINTEXT brokers with ACLs for security tests: start one, log in
//! over raw sockets, grant ACLs as the super user.
#![allow(dead_code)]

use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use sharestream::broker::{BrokerConfig, BrokerHandle};
use sharestream::protocol::ErrorCode;
use sharestream::protocol::sasl::{SaslMechanism, ScramClient, plain_client_message};

use super::RawClient;
use super::broker::TestBroker;

/// The failure delay the test brokers are configured with.
pub const DELAY: Duration = Duration::from_millis(200);

/// The super user's name and password.
pub const ADMIN: (&str, &str) = ("admin", "admin-pw");

/// Resource types, pattern types, operations (protocol codes).
pub const TOPIC: i8 = 2;
pub const GROUP: i8 = 3;
pub const CLUSTER: i8 = 4;
pub const TXN_ID: i8 = 5;
pub const LITERAL: i8 = 3;
pub const PREFIXED: i8 = 4;
pub const ALL: i8 = 2;
pub const READ: i8 = 3;
pub const WRITE: i8 = 4;
pub const CREATE: i8 = 5;
pub const DELETE: i8 = 6;
pub const ALTER: i8 = 7;
pub const DESCRIBE: i8 = 8;
pub const CLUSTER_ACTION: i8 = 9;
pub const DESCRIBE_CONFIGS: i8 = 10;
pub const ALTER_CONFIGS: i8 = 11;
pub const IDEMPOTENT_WRITE: i8 = 12;
pub const DENY: i8 = 2;
pub const ALLOW: i8 = 3;

fn s(x: &str) -> StrBytes {
    StrBytes::from_string(x.to_string())
}

/// A SASL_PLAINTEXT broker (in memory) with `admin` as super user and the
/// given extra users; `acl` turns the authorizer on. Shorthand for
/// [`TestBroker::sasl`].
pub async fn start_with(
    acl: bool,
    users: &[(&str, &str)],
    tweak: impl FnOnce(&mut BrokerConfig),
) -> BrokerHandle {
    TestBroker::in_memory()
        .sasl(acl, users)
        .configure(tweak)
        .start()
        .await
        .b
}

/// Authenticates a new connection; `Err` carries the SaslAuthenticate error.
pub async fn login(
    b: &BrokerHandle,
    mech: SaslMechanism,
    user: &str,
    pw: &str,
) -> Result<RawClient, (ErrorCode, RawClient)> {
    let mut c = RawClient::connect(b.local_addr()).await;
    let hs = c
        .send(
            &SaslHandshakeRequest::default().with_mechanism(s(mech.name())),
            1,
        )
        .await;
    assert_eq!(hs.error_code, 0);
    let auth =
        |bytes: Vec<u8>| SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(bytes));
    match mech {
        SaslMechanism::Plain => {
            let r = c.send(&auth(plain_client_message(user, pw)), 2).await;
            if r.error_code != 0 {
                return Err((ErrorCode(r.error_code), c));
            }
        }
        _ => {
            let (mut sc, first) = ScramClient::start(mech, user, pw);
            let r = c.send(&auth(first), 2).await;
            assert_eq!(r.error_code, 0);
            let fin = sc.client_final(&r.auth_bytes).unwrap();
            let r = c.send(&auth(fin), 2).await;
            if r.error_code != 0 {
                return Err((ErrorCode(r.error_code), c));
            }
            sc.verify_server_final(&r.auth_bytes).unwrap();
        }
    }
    Ok(c)
}

/// Logs in with PLAIN, which must succeed.
pub async fn plain(b: &BrokerHandle, user: &str, pw: &str) -> RawClient {
    match login(b, SaslMechanism::Plain, user, pw).await {
        Ok(c) => c,
        Err((code, _)) => panic!("login {user}: {code:?}"),
    }
}

/// An Allow binding for `principal` on a resource pattern, from any host.
pub fn acl(rt: i8, name: &str, pattern: i8, principal: &str, op: i8) -> AclCreation {
    AclCreation::default()
        .with_resource_type(rt)
        .with_resource_name(s(name))
        .with_resource_pattern_type(pattern)
        .with_principal(s(principal))
        .with_host(s("*"))
        .with_operation(op)
        .with_permission_type(ALLOW)
}

/// The same binding as a Deny.
pub fn deny(rt: i8, name: &str, pattern: i8, principal: &str, op: i8) -> AclCreation {
    acl(rt, name, pattern, principal, op).with_permission_type(DENY)
}

/// Creates bindings (as a principal allowed to), asserting success.
pub async fn create_acls(c: &mut RawClient, acls: Vec<AclCreation>) {
    let r = c
        .send(&CreateAclsRequest::default().with_creations(acls), 3)
        .await;
    assert!(r.results.iter().all(|x| x.error_code == 0), "{r:?}");
}
