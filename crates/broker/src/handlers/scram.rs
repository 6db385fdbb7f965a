//! DescribeUserScramCredentials (key 50, v0) and AlterUserScramCredentials
//! (key 51, v0), KIP-554: what `kafka-configs.sh --entity-type users` and
//! the admin clients use to list and set SCRAM users. The credentials and
//! their rules are [`ScramStore`](crate::security::ScramStore)'s.
//!
//! Authorization as Kafka's: Describe on the cluster for the first (else
//! the whole request is CLUSTER_AUTHORIZATION_FAILED), Alter on the
//! cluster for the second (else every user's result is).

use kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use kafka_protocol::messages::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResult,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

use super::RequestContext;
use crate::acl::{AclOperation, Resource};
use crate::core::BrokerCore;
use crate::scram_credentials::Alteration;
use sharestream_protocol::ErrorCode;

fn s(v: impl Into<String>) -> StrBytes {
    StrBytes::from_string(v.into())
}

pub(crate) fn describe(
    core: &BrokerCore,
    ctx: &RequestContext,
    req: DescribeUserScramCredentialsRequest,
) -> DescribeUserScramCredentialsResponse {
    let resp = DescribeUserScramCredentialsResponse::default();
    if !ctx.allowed(core, AclOperation::Describe, &Resource::cluster()) {
        return resp
            .with_error_code(ErrorCode::CLUSTER_AUTHORIZATION_FAILED.0)
            .with_error_message(Some(s("Not authorized to describe the cluster")));
    }
    let users: Option<Vec<String>> = req
        .users
        .map(|u| u.into_iter().map(|n| n.name.to_string()).collect());
    let results = core
        .security()
        .scram()
        .describe(users.as_deref())
        .into_iter()
        .map(|(user, r)| {
            let base = DescribeUserScramCredentialsResult::default().with_user(s(user));
            match r {
                Ok(infos) => base.with_credential_infos(
                    infos
                        .into_iter()
                        .map(|(mechanism, iterations)| {
                            CredentialInfo::default()
                                .with_mechanism(mechanism)
                                .with_iterations(iterations)
                        })
                        .collect(),
                ),
                Err((code, message)) => base
                    .with_error_code(code.0)
                    .with_error_message(Some(s(message))),
            }
        })
        .collect();
    resp.with_results(results)
}

pub(crate) fn alter(
    core: &BrokerCore,
    ctx: &RequestContext,
    req: AlterUserScramCredentialsRequest,
) -> AlterUserScramCredentialsResponse {
    let alterations: Vec<Alteration> = req
        .deletions
        .into_iter()
        .map(|d| Alteration::Delete {
            user: d.name.to_string(),
            mechanism: d.mechanism,
        })
        .chain(req.upsertions.into_iter().map(|u| Alteration::Upsert {
            user: u.name.to_string(),
            mechanism: u.mechanism,
            iterations: u.iterations,
            salt: u.salt.to_vec(),
            salted_password: u.salted_password.to_vec(),
        }))
        .collect();
    let results = if ctx.allowed(core, AclOperation::Alter, &Resource::cluster()) {
        core.security()
            .scram()
            .alter(&alterations)
            .into_iter()
            .map(|(user, r)| {
                let base = AlterUserScramCredentialsResult::default().with_user(s(user));
                match r {
                    Ok(()) => base,
                    Err((code, message)) => base
                        .with_error_code(code.0)
                        .with_error_message(Some(s(message))),
                }
            })
            .collect()
    } else {
        let mut users: Vec<String> = Vec::new();
        for a in &alterations {
            let u = match a {
                Alteration::Upsert { user, .. } | Alteration::Delete { user, .. } => user,
            };
            if !users.contains(u) {
                users.push(u.clone());
            }
        }
        users
            .into_iter()
            .map(|u| {
                AlterUserScramCredentialsResult::default()
                    .with_user(s(u))
                    .with_error_code(ErrorCode::CLUSTER_AUTHORIZATION_FAILED.0)
                    .with_error_message(Some(s("Not authorized to alter the cluster")))
            })
            .collect()
    };
    AlterUserScramCredentialsResponse::default().with_results(results)
}
