//! DescribeClientQuotas (key 48, v0-1): this broker has no client quotas
//! (no produce, fetch or request-rate limits are enforced, and
//! AlterClientQuotas is not served), so a valid filter matches no entity
//! and the answer is an empty list, as a Kafka cluster with no quota set
//! answers. Tools ask for it beside other things: `kafka-configs.sh
//! --entity-type users --describe` lists a user's quotas and then its
//! SCRAM credentials, and fails as a whole without this API.
//!
//! The filter is checked as Kafka checks it: entity types `user`,
//! `client-id` and `ip`, each at most once, `ip` alone; match type 0
//! (exact) with a name, 1 (default) without one, 2 (any). Anything else is
//! INVALID_REQUEST. Authorization: DescribeConfigs on the cluster.

use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

use super::RequestContext;
use crate::acl::{AclOperation, Resource};
use crate::core::BrokerCore;
use sharestream_protocol::ErrorCode;

/// Why a filter is invalid, if it is.
fn check_filter(components: &[describe_client_quotas_request::ComponentData]) -> Option<String> {
    let mut seen: Vec<&str> = Vec::new();
    for c in components {
        let t = c.entity_type.as_str();
        if !matches!(t, "user" | "client-id" | "ip") {
            return Some(format!("Custom entity type '{t}' not supported"));
        }
        if seen.contains(&t) {
            return Some(format!("Duplicate {t} filter component entity type"));
        }
        seen.push(t);
        match (c.match_type, &c._match) {
            (0, Some(_)) | (1, None) | (2, None) => {}
            (0, None) => {
                return Some(format!(
                    "Entity match for {t} must not be null for an exact match"
                ));
            }
            (1 | 2, Some(_)) => {
                return Some(format!(
                    "Entity match for {t} must be null for a default or any match"
                ));
            }
            (m, _) => return Some(format!("Unexpected match type {m}")),
        }
    }
    if seen.contains(&"ip") && seen.len() > 1 {
        return Some("Invalid entity filter component combination, IP filter component should not be used with user or clientId filter component.".into());
    }
    None
}

pub(crate) fn describe(
    core: &BrokerCore,
    ctx: &RequestContext,
    req: DescribeClientQuotasRequest,
) -> DescribeClientQuotasResponse {
    let resp = DescribeClientQuotasResponse::default();
    if !ctx.allowed(core, AclOperation::DescribeConfigs, &Resource::cluster()) {
        return resp
            .with_error_code(ErrorCode::CLUSTER_AUTHORIZATION_FAILED.0)
            .with_error_message(Some(StrBytes::from_static_str(
                "Not authorized to describe the cluster's configs",
            )));
    }
    match check_filter(&req.components) {
        Some(why) => resp
            .with_error_code(ErrorCode::INVALID_REQUEST.0)
            .with_error_message(Some(StrBytes::from_string(why))),
        None => resp.with_entries(Some(Vec::new())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use describe_client_quotas_request::ComponentData;

    fn c(t: &str, m: i8, name: Option<&str>) -> ComponentData {
        ComponentData::default()
            .with_entity_type(StrBytes::from_string(t.into()))
            .with_match_type(m)
            .with_match(name.map(|n| StrBytes::from_string(n.into())))
    }

    #[test]
    fn filters_are_checked_as_kafka_checks_them() {
        assert_eq!(check_filter(&[]), None);
        assert_eq!(
            check_filter(&[c("user", 0, Some("alice")), c("client-id", 2, None)]),
            None
        );
        assert_eq!(check_filter(&[c("ip", 1, None)]), None);
        for bad in [
            vec![c("tenant", 2, None)],
            vec![c("user", 0, None)],
            vec![c("user", 1, Some("x"))],
            vec![c("user", 2, None), c("user", 1, None)],
            vec![c("ip", 2, None), c("user", 2, None)],
            vec![c("user", 7, None)],
        ] {
            assert!(check_filter(&bad).is_some(), "{bad:?}");
        }
    }
}
