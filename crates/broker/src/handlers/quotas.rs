//! DescribeClientQuotas (key 48, v0-1) and AlterClientQuotas (key 49,
//! v0-1): the client quotas of [`crate::client_quotas`], which holds what
//! is stored, how a request finds its quota and what is enforced.
//!
//! The describe filter is checked as Kafka checks it: entity types `user`,
//! `client-id` and `ip` (another is UNSUPPORTED_VERSION, as in Kafka 4.4),
//! each at most once, `ip` alone; match type 0 (exact) with a name, 1
//! (default) without one, 2 (any). Anything else is INVALID_REQUEST. Authorization as Kafka's: DescribeConfigs on the
//! cluster to describe, AlterConfigs on the cluster to alter (each entry
//! then answers CLUSTER_AUTHORIZATION_FAILED).

use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

use super::RequestContext;
use crate::acl::{AclOperation, Resource};
use crate::client_quotas::{Alteration, Match};
use crate::core::BrokerCore;
use sharestream_protocol::ErrorCode;

/// Why a filter is refused, if it is: the code and Kafka 4.4's message.
fn check_filter(
    components: &[describe_client_quotas_request::ComponentData],
) -> Option<(ErrorCode, String)> {
    let invalid = |m: String| Some((ErrorCode::INVALID_REQUEST, m));
    let mut seen: Vec<&str> = Vec::new();
    for c in components {
        let t = c.entity_type.as_str();
        if !matches!(t, "user" | "client-id" | "ip") {
            return Some((
                ErrorCode::UNSUPPORTED_VERSION,
                format!("Unsupported entity type {t}"),
            ));
        }
        if seen.contains(&t) {
            return invalid(format!(
                "Entity type {t} cannot appear more than once in the filter."
            ));
        }
        seen.push(t);
        match (c.match_type, &c._match) {
            (0, Some(_)) | (1, None) | (2, None) => {}
            (0, None) => {
                return invalid(format!(
                    "Entity match for {t} must not be null for an exact match"
                ));
            }
            (1 | 2, Some(_)) => {
                return invalid(format!(
                    "Entity match for {t} must be null for a default or any match"
                ));
            }
            (m, _) => return invalid(format!("Unexpected match type {m}")),
        }
    }
    if seen.contains(&"ip") && seen.len() > 1 {
        return invalid("Invalid entity filter component combination, IP filter component should not be used with user or clientId filter component.".into());
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
    if let Some((code, why)) = check_filter(&req.components) {
        return resp
            .with_error_code(code.0)
            .with_error_message(Some(StrBytes::from_string(why)));
    }
    let filter: Vec<(String, Match)> = req
        .components
        .iter()
        .map(|c| {
            let m = match (c.match_type, &c._match) {
                (0, Some(name)) => Match::Exact(name.to_string()),
                (1, _) => Match::Default,
                _ => Match::Any,
            };
            (c.entity_type.to_string(), m)
        })
        .collect();
    let entries = core
        .quotas()
        .describe(&filter, req.strict)
        .into_iter()
        .map(|(entity, quotas)| {
            describe_client_quotas_response::EntryData::default()
                .with_entity(
                    entity
                        .into_iter()
                        .map(|(t, n)| {
                            describe_client_quotas_response::EntityData::default()
                                .with_entity_type(StrBytes::from_string(t))
                                .with_entity_name(n.map(StrBytes::from_string))
                        })
                        .collect(),
                )
                .with_values(
                    quotas
                        .into_iter()
                        .map(|(k, v)| {
                            describe_client_quotas_response::ValueData::default()
                                .with_key(StrBytes::from_string(k))
                                .with_value(v)
                        })
                        .collect(),
                )
        })
        .collect();
    resp.with_entries(Some(entries))
}

/// The (user, client id) a request's quotas are looked up under: the
/// principal's name without its `User:` type, and the header's client id
/// ("" when absent), as Kafka binds them.
fn quota_identity(ctx: &RequestContext) -> (&str, &str) {
    let user = ctx
        .principal
        .strip_prefix("User:")
        .unwrap_or(&ctx.principal);
    (user, ctx.header.client_id.as_deref().unwrap_or(""))
}

/// Records `bytes` against the `key` quota of the request's user and
/// client id; when that takes it over its quota, mutes the connection for
/// the throttle time and raises the answer's `throttle_time_ms` to it
/// (`field`: `None` when the answer's version has no such field, or there
/// is no answer).
pub(crate) fn throttle(
    core: &BrokerCore,
    ctx: &RequestContext,
    session: &crate::security::Session,
    key: &str,
    bytes: u64,
    field: Option<&mut i32>,
) {
    if !core.quotas().any_set() {
        return;
    }
    let (user, client_id) = quota_identity(ctx);
    let ms = core
        .quotas()
        .record(key, user, client_id, bytes, core.now_ms());
    if ms > 0 {
        session.mute_for(ms);
        core.metrics().add("quota_throttled_responses", 1);
        tracing::debug!(
            quota = key,
            user,
            client_id,
            throttle_ms = ms,
            "client quota exceeded: throttled"
        );
    }
    if let Some(field) = field {
        *field = (*field).max(ms.min(i32::MAX as i64) as i32);
    }
}

/// A request's `controller_mutation_rate` (KIP-599): CreateTopics,
/// DeleteTopics and CreatePartitions draw on it per topic.
pub(crate) struct Mutations<'a> {
    core: &'a BrokerCore,
    user: String,
    client_id: String,
    strict: bool,
    /// Whether a quota applies (otherwise nothing is checked or taken).
    pub applies: bool,
}

impl<'a> Mutations<'a> {
    /// `strict` for the versions whose answers carry
    /// THROTTLING_QUOTA_EXCEEDED per topic.
    pub fn new(core: &'a BrokerCore, ctx: &RequestContext, strict: bool) -> Self {
        let (user, client_id) = quota_identity(ctx);
        let (user, client_id) = (user.to_string(), client_id.to_string());
        let applies = core.quotas().any_set()
            && core
                .quotas()
                .resolve(
                    crate::client_quotas::CONTROLLER_MUTATION_RATE,
                    &user,
                    &client_id,
                )
                .is_some();
        Self {
            core,
            user,
            client_id,
            strict,
            applies,
        }
    }

    /// Admits `partitions` mutations, or Kafka's refusal.
    pub fn admit(&self, partitions: i32) -> Result<(), (ErrorCode, String)> {
        if !self.applies {
            return Ok(());
        }
        self.core
            .quotas()
            .mutate(
                &self.user,
                &self.client_id,
                partitions.max(0) as f64,
                self.strict,
                self.core.now_ms(),
            )
            .map_err(|throttle_ms| {
                self.core.metrics().add("quota_refused_mutations", 1);
                tracing::debug!(user = %self.user, client_id = %self.client_id, throttle_ms, "controller_mutation_rate exceeded: topic refused");
                (
                    ErrorCode::THROTTLING_QUOTA_EXCEEDED,
                    "The throttling quota has been exceeded.".to_string(),
                )
            })
    }

    /// The answer's throttle time; mutes the connection for it.
    pub fn throttle(&self, session: &crate::security::Session) -> i32 {
        if !self.applies {
            return 0;
        }
        let ms = self.core.quotas().mutation_throttle_ms(
            &self.user,
            &self.client_id,
            self.core.now_ms(),
        );
        if ms > 0 {
            session.mute_for(ms);
            self.core.metrics().add("quota_throttled_responses", 1);
        }
        ms.min(i32::MAX as i64) as i32
    }
}

/// Caps an answer's `max_bytes` at ten seconds of the request's
/// `consumer_byte_rate`, if it has one (Kafka's cap: a larger answer would
/// be throttled whatever came before it). A `max_bytes` of 0 or less is
/// capped only when it means "no limit" (`zero_unlimited`: Fetch); a
/// ShareFetch's 0 asks for no records and stays.
pub(crate) fn cap_fetch_bytes(
    core: &BrokerCore,
    ctx: &RequestContext,
    max_bytes: &mut i32,
    zero_unlimited: bool,
) {
    if *max_bytes <= 0 && !zero_unlimited {
        return;
    }
    let (user, client_id) = quota_identity(ctx);
    if let Some(cap) =
        core.quotas()
            .window_bytes(crate::client_quotas::CONSUMER_BYTE_RATE, user, client_id)
    {
        let cap = cap.clamp(1, i32::MAX as u64) as i32;
        if *max_bytes <= 0 || *max_bytes > cap {
            *max_bytes = cap;
        }
    }
}

/// The bytes of a ShareFetch answer's records (what its size is made of;
/// its version 2 has no size computation in the codec).
pub(crate) fn share_fetch_bytes(resp: &ShareFetchResponse) -> u64 {
    resp.responses
        .iter()
        .flat_map(|t| t.partitions.iter())
        .map(|p| p.records.as_ref().map_or(0, |r| r.len() as u64))
        .sum()
}

pub(crate) fn alter(
    core: &BrokerCore,
    ctx: &RequestContext,
    req: AlterClientQuotasRequest,
) -> AlterClientQuotasResponse {
    let echo = |e: &alter_client_quotas_request::EntryData| -> Vec<alter_client_quotas_response::EntityData> {
        e.entity
            .iter()
            .map(|c| {
                alter_client_quotas_response::EntityData::default()
                    .with_entity_type(c.entity_type.clone())
                    .with_entity_name(c.entity_name.clone())
            })
            .collect()
    };
    let results: Vec<Result<(), (ErrorCode, String)>> =
        if !ctx.allowed(core, AclOperation::AlterConfigs, &Resource::cluster()) {
            vec![
                Err((
                    ErrorCode::CLUSTER_AUTHORIZATION_FAILED,
                    "Not authorized to alter the cluster's configs".into()
                ));
                req.entries.len()
            ]
        } else {
            let alterations: Vec<Alteration> = req
                .entries
                .iter()
                .map(|e| Alteration {
                    entity: e
                        .entity
                        .iter()
                        .map(|c| {
                            (
                                c.entity_type.to_string(),
                                c.entity_name.as_ref().map(|n| n.to_string()),
                            )
                        })
                        .collect(),
                    ops: e
                        .ops
                        .iter()
                        .map(|o| (o.key.to_string(), (!o.remove).then_some(o.value)))
                        .collect(),
                })
                .collect();
            core.quotas().alter(&alterations, req.validate_only)
        };
    let entries = req
        .entries
        .iter()
        .zip(results)
        .map(|(e, r)| {
            let out = alter_client_quotas_response::EntryData::default().with_entity(echo(e));
            match r {
                Ok(()) => out.with_error_message(None),
                Err((code, msg)) => out
                    .with_error_code(code.0)
                    .with_error_message(Some(StrBytes::from_string(msg))),
            }
        })
        .collect();
    AlterClientQuotasResponse::default().with_entries(entries)
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
            check_filter(&[c("tenant", 2, None)]).map(|r| r.0),
            Some(ErrorCode::UNSUPPORTED_VERSION)
        );
        assert_eq!(
            check_filter(&[c("user", 2, None), c("user", 1, None)]),
            Some((
                ErrorCode::INVALID_REQUEST,
                "Entity type user cannot appear more than once in the filter.".into()
            ))
        );
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
