//! IncrementalAlterConfigs and AlterConfigs on TOPIC and BROKER resources
//! (GROUP resources go on to the share-group handler, unchanged).
//!
//! As Kafka's controller:
//! - AlterConfigs on the topic (TOPIC_AUTHORIZATION_FAILED) or on the
//!   cluster for a broker (CLUSTER_AUTHORIZATION_FAILED), checked first;
//! - the same resource twice in one request: INVALID_REQUEST for each;
//!   the same config key twice in one resource: INVALID_REQUEST;
//! - a topic that does not exist: UNKNOWN_TOPIC_OR_PARTITION; a name or
//!   value Kafka's LogConfig refuses: INVALID_CONFIG (crate::topics);
//! - APPEND and SUBTRACT only on list configs, else INVALID_CONFIG;
//! - a broker resource names this node or "" (the cluster-wide default);
//!   only Kafka's dynamic broker configs may be set, anything else is
//!   INVALID_REQUEST ("Cannot update these configs dynamically"), and so
//!   is a value Kafka refuses for one (not INVALID_CONFIG, as for topics);
//! - AlterConfigs (the legacy API) replaces the whole set of a resource.
//!
//! Dynamic broker configs are stored (metadata.json in disk mode) and
//! reported by DescribeConfigs with their dynamic source; they do not
//! change the embedded broker's behaviour, except KIP-1191's
//! `errors.deadletterqueue.auto.create.topics.enable` and
//! `errors.deadletterqueue.topic.name.prefix`, which override the static
//! settings (this node's value, else the cluster-wide default).

use std::collections::{BTreeMap, HashMap};

use kafka_protocol::messages::incremental_alter_configs_request::AlterConfigsResource;
use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

use super::RequestContext;
use crate::acl::{AclOperation, Resource};
use crate::core::BrokerCore;
use crate::topics::{ConfigKind, TopicError, topic_config_def, validate_topic_config};
use sharestream_protocol::ErrorCode;

fn s(v: impl Into<String>) -> StrBytes {
    StrBytes::from_string(v.into())
}

pub(crate) const RESOURCE_TOPIC: i8 = 2;
pub(crate) const RESOURCE_BROKER: i8 = 4;
pub(crate) const RESOURCE_BROKER_LOGGER: i8 = 8;

const OP_SET: i8 = 0;
const OP_DELETE: i8 = 1;
const OP_APPEND: i8 = 2;
const OP_SUBTRACT: i8 = 3;

use ConfigKind::*;

/// Kafka's dynamic broker configs (DynamicBrokerConfig) this broker
/// accepts, with their kinds; all may be set per broker or cluster-wide.
pub(crate) const DYNAMIC_BROKER_CONFIGS: &[(&str, ConfigKind)] = &[
    ("background.threads", Int(1, i32::MAX as i64)),
    ("compression.gzip.level", Int(-1, 9)),
    ("compression.lz4.level", Int(1, 17)),
    (
        "compression.type",
        OneOf(&["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"]),
    ),
    ("compression.zstd.level", Int(-131072, 22)),
    // KIP-1191, honoured: the dead-letter writer reads them at every write.
    (crate::group::ERRORS_DLQ_AUTO_CREATE_TOPICS_ENABLE, Boolean),
    (crate::group::ERRORS_DLQ_TOPIC_NAME_PREFIX, Text),
    ("follower.replication.throttled.rate", Long(0, i64::MAX)),
    ("leader.replication.throttled.rate", Long(0, i64::MAX)),
    ("log.cleaner.backoff.ms", Long(0, i64::MAX)),
    ("log.cleaner.dedupe.buffer.size", Long(i64::MIN, i64::MAX)),
    ("log.cleaner.delete.retention.ms", Long(0, i64::MAX)),
    (
        "log.cleaner.io.buffer.load.factor",
        Double(f64::MIN, f64::MAX),
    ),
    ("log.cleaner.io.buffer.size", Int(0, i32::MAX as i64)),
    (
        "log.cleaner.io.max.bytes.per.second",
        Double(f64::MIN, f64::MAX),
    ),
    ("log.cleaner.max.compaction.lag.ms", Long(1, i64::MAX)),
    ("log.cleaner.min.cleanable.ratio", Double(0.0, 1.0)),
    ("log.cleaner.min.compaction.lag.ms", Long(0, i64::MAX)),
    ("log.cleaner.threads", Int(0, i32::MAX as i64)),
    ("log.cleanup.policy", ListOf(&["compact", "delete"])),
    ("log.flush.interval.messages", Long(1, i64::MAX)),
    ("log.flush.interval.ms", Long(i64::MIN, i64::MAX)),
    ("log.index.interval.bytes", Int(0, i32::MAX as i64)),
    ("log.index.size.max.bytes", Int(4, i32::MAX as i64)),
    ("log.local.retention.bytes", Long(-2, i64::MAX)),
    ("log.local.retention.ms", Long(-2, i64::MAX)),
    ("log.message.timestamp.after.max.ms", Long(0, i64::MAX)),
    ("log.message.timestamp.before.max.ms", Long(0, i64::MAX)),
    (
        "log.message.timestamp.type",
        OneOf(&["CreateTime", "LogAppendTime"]),
    ),
    ("log.preallocate", Boolean),
    ("log.retention.bytes", Long(i64::MIN, i64::MAX)),
    ("log.retention.ms", Long(i64::MIN, i64::MAX)),
    ("log.roll.jitter.ms", Long(i64::MIN, i64::MAX)),
    ("log.roll.ms", Long(i64::MIN, i64::MAX)),
    ("log.segment.bytes", Int(1024 * 1024, i32::MAX as i64)),
    ("log.segment.delete.delay.ms", Long(0, i64::MAX)),
    ("max.connection.creation.rate", Int(0, i32::MAX as i64)),
    ("max.connections", Int(0, i32::MAX as i64)),
    ("max.connections.per.ip", Int(0, i32::MAX as i64)),
    ("message.max.bytes", Int(0, i32::MAX as i64)),
    ("min.insync.replicas", Int(1, i32::MAX as i64)),
    ("num.io.threads", Int(1, i32::MAX as i64)),
    ("num.network.threads", Int(1, i32::MAX as i64)),
    ("num.recovery.threads.per.data.dir", Int(1, i32::MAX as i64)),
    (
        "num.replica.fetchers",
        Int(i32::MIN as i64, i32::MAX as i64),
    ),
    ("producer.id.expiration.ms", Int(1, i32::MAX as i64)),
    // kafka-reassign-partitions.sh --verify deletes it with the two
    // replication throttles.
    (
        "replica.alter.log.dirs.io.max.bytes.per.second",
        Long(0, i64::MAX),
    ),
    // The listener's SASL and TLS settings Kafka reconfigures at run time
    // (checked against Kafka 4.4 with kafka-configs.sh; librdkafka's
    // 0081_admin sets sasl.kerberos.min.time.before.relogin). Stored and
    // described here; our listener reads its security settings at start.
    ("sasl.enabled.mechanisms", Text),
    ("sasl.kerberos.kinit.cmd", Text),
    (
        "sasl.kerberos.min.time.before.relogin",
        Long(i64::MIN, i64::MAX),
    ),
    ("sasl.kerberos.principal.to.local.rules", Text),
    ("sasl.kerberos.service.name", Text),
    (
        "sasl.kerberos.ticket.renew.jitter",
        Double(f64::MIN, f64::MAX),
    ),
    (
        "sasl.kerberos.ticket.renew.window.factor",
        Double(f64::MIN, f64::MAX),
    ),
    ("sasl.login.refresh.buffer.seconds", Int(0, 3600)),
    ("sasl.login.refresh.min.period.seconds", Int(0, 900)),
    ("sasl.login.refresh.window.factor", Double(0.5, 1.0)),
    ("sasl.login.refresh.window.jitter", Double(0.0, 0.25)),
    ("sasl.mechanism.inter.broker.protocol", Text),
    ("ssl.client.auth", OneOf(&["required", "requested", "none"])),
    ("ssl.protocol", Text),
    ("transaction.partition.verification.enable", Boolean),
    ("unclean.leader.election.enable", Boolean),
];

fn dynamic_broker_kind(name: &str) -> Option<ConfigKind> {
    DYNAMIC_BROKER_CONFIGS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, k)| *k)
}

/// Whether a dynamic broker config may be set only for one broker, not as
/// the cluster-wide default: the listener's security settings. Kafka 4.4
/// refuses every SASL and TLS config of [`DYNAMIC_BROKER_CONFIGS`] at the
/// default level (checked with kafka-configs.sh --entity-default).
fn per_broker_only(name: &str) -> bool {
    name.starts_with("sasl.") || name.starts_with("ssl.")
}

/// Checks a dynamic broker config value with the same rules as a topic
/// config of that kind. Every refusal is INVALID_REQUEST, as Kafka 4.4
/// answers for a broker resource (checked with kafka-configs.sh:
/// `num.io.threads=0`, `log.preallocate=maybe`, a negative throttle),
/// where a topic's invalid value is INVALID_CONFIG.
fn validate_broker_config(name: &str, value: &str) -> Result<(), TopicError> {
    let Some(kind) = dynamic_broker_kind(name) else {
        return Err(TopicError {
            code: ErrorCode::INVALID_REQUEST,
            message: format!("Cannot update these configs dynamically: Set({name})"),
        });
    };
    let as_request = |e: TopicError| TopicError {
        code: ErrorCode::INVALID_REQUEST,
        message: e.message,
    };
    crate::topics::validate_value(name, value, kind).map_err(as_request)?;
    if name == crate::group::ERRORS_DLQ_TOPIC_NAME_PREFIX {
        // The same rule as the static setting.
        crate::group::ShareGroupBrokerConfig::default()
            .with_overrides([(name, value)])
            .map_err(|m| TopicError {
                code: ErrorCode::INVALID_REQUEST,
                message: m,
            })?;
    }
    Ok(())
}

fn is_list(kind: ConfigKind) -> bool {
    matches!(kind, ListOf(_) | ThrottledReplicas)
}

/// One config change, as both APIs carry it.
struct Change {
    name: String,
    op: i8,
    value: Option<String>,
}

type Outcome = Result<(), (ErrorCode, String)>;

/// Applies `changes` to `current` (a resource's explicit configs);
/// `kind_of` names the kind of a known key.
fn apply_changes(
    current: &mut BTreeMap<String, String>,
    changes: &[Change],
    kind_of: impl Fn(&str) -> Option<ConfigKind>,
    unknown: impl Fn(&str) -> (ErrorCode, String),
) -> Outcome {
    let mut seen = HashMap::new();
    for c in changes {
        if seen.insert(c.name.as_str(), ()).is_some() {
            return Err((
                ErrorCode::INVALID_REQUEST,
                format!("Error due to duplicate config keys: {}", c.name),
            ));
        }
    }
    for c in changes {
        let Some(kind) = kind_of(&c.name) else {
            return Err(unknown(&c.name));
        };
        match c.op {
            OP_SET => match &c.value {
                Some(v) => {
                    current.insert(c.name.clone(), v.clone());
                }
                None => {
                    return Err((
                        ErrorCode::INVALID_REQUEST,
                        format!("Null value not supported for SET of {}", c.name),
                    ));
                }
            },
            OP_DELETE => {
                current.remove(&c.name);
            }
            OP_APPEND | OP_SUBTRACT => {
                if !is_list(kind) {
                    let verb = if c.op == OP_APPEND {
                        "append"
                    } else {
                        "subtract"
                    };
                    return Err((
                        ErrorCode::INVALID_CONFIG,
                        format!(
                            "Config value {verb} is not allowed for config key: {}",
                            c.name
                        ),
                    ));
                }
                let given: Vec<String> = c
                    .value
                    .as_deref()
                    .unwrap_or("")
                    .split(',')
                    .map(|x| x.trim().to_string())
                    .filter(|x| !x.is_empty())
                    .collect();
                let mut items: Vec<String> = current
                    .get(&c.name)
                    .cloned()
                    .or_else(|| topic_config_def(&c.name).map(|d| d.default.to_string()))
                    .unwrap_or_default()
                    .split(',')
                    .map(|x| x.trim().to_string())
                    .filter(|x| !x.is_empty())
                    .collect();
                if c.op == OP_APPEND {
                    for g in given {
                        if !items.contains(&g) {
                            items.push(g);
                        }
                    }
                } else {
                    items.retain(|x| !given.contains(x));
                }
                current.insert(c.name.clone(), items.join(","));
            }
            op => {
                return Err((
                    ErrorCode::INVALID_REQUEST,
                    format!("Unknown config operation {op} for {}", c.name),
                ));
            }
        }
    }
    Ok(())
}

/// Alters one TOPIC or BROKER resource. `incremental` false replaces the
/// whole set (AlterConfigs).
fn alter_resource(
    core: &BrokerCore,
    resource_type: i8,
    name: &str,
    changes: &[Change],
    incremental: bool,
    validate_only: bool,
) -> Outcome {
    let err = |e: TopicError| (e.code, e.message);
    match resource_type {
        RESOURCE_TOPIC => {
            let Some(meta) = core.topics().read().get(name).cloned() else {
                return Err((
                    ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
                    format!("Topic {name} does not exist"),
                ));
            };
            let mut configs = if incremental {
                meta.configs.clone()
            } else {
                BTreeMap::new()
            };
            apply_changes(
                &mut configs,
                changes,
                |k| topic_config_def(k).map(|d| d.kind),
                |k| {
                    (
                        ErrorCode::INVALID_CONFIG,
                        format!("Unknown topic config name: {k}"),
                    )
                },
            )?;
            for (k, v) in &configs {
                validate_topic_config(k, v).map_err(err)?;
            }
            core.alter_topic_configs(name, configs, validate_only)
                .map(|_| ())
                .map_err(err)
        }
        RESOURCE_BROKER => {
            let cluster_wide = name.is_empty();
            if !cluster_wide && name != core.node_id().to_string() {
                return Err((
                    ErrorCode::INVALID_REQUEST,
                    if name.parse::<i32>().is_err() {
                        format!("Illegal non-integral BROKER resource type name {name}")
                    } else {
                        format!(
                            "Unexpected broker id, expected {} but received {name}",
                            core.node_id()
                        )
                    },
                ));
            }
            let mut all = core.dynamic_broker_configs();
            let target = if cluster_wide {
                &mut all.cluster_default
            } else {
                &mut all.node
            };
            let mut configs = if incremental {
                target.clone()
            } else {
                BTreeMap::new()
            };
            apply_changes(&mut configs, changes, dynamic_broker_kind, |k| {
                (
                    ErrorCode::INVALID_REQUEST,
                    format!("Cannot update these configs dynamically: Set({k})"),
                )
            })?;
            for (k, v) in &configs {
                validate_broker_config(k, v).map_err(err)?;
            }
            if cluster_wide {
                let per_broker: Vec<&str> = configs
                    .keys()
                    .map(String::as_str)
                    .filter(|k| per_broker_only(k))
                    .collect();
                if !per_broker.is_empty() {
                    return Err((
                        ErrorCode::INVALID_REQUEST,
                        format!(
                            "Cannot update these configs at default cluster level, broker id must be specified: [{}]",
                            per_broker.join(", ")
                        ),
                    ));
                }
            }
            if !validate_only {
                *target = configs;
                core.set_dynamic_broker_configs(all);
            }
            Ok(())
        }
        RESOURCE_BROKER_LOGGER => Err((
            ErrorCode::INVALID_REQUEST,
            "This broker has no configurable loggers".to_string(),
        )),
        other => Err((
            ErrorCode::INVALID_REQUEST,
            format!("Unsupported resource type {other}"),
        )),
    }
}

/// The AlterConfigs authorization of a resource: `None` if allowed.
fn denied(
    core: &BrokerCore,
    ctx: &RequestContext,
    resource_type: i8,
    name: &str,
) -> Option<ErrorCode> {
    let (resource, refusal) = match resource_type {
        RESOURCE_TOPIC => (Resource::topic(name), ErrorCode::TOPIC_AUTHORIZATION_FAILED),
        RESOURCE_BROKER | RESOURCE_BROKER_LOGGER => {
            (Resource::cluster(), ErrorCode::CLUSTER_AUTHORIZATION_FAILED)
        }
        super::share::RESOURCE_GROUP => {
            (Resource::group(name), ErrorCode::GROUP_AUTHORIZATION_FAILED)
        }
        _ => return None,
    };
    (!ctx.allowed(core, AclOperation::AlterConfigs, &resource)).then_some(refusal)
}

/// Resources named more than once in one request.
fn duplicates<'a>(keys: impl Iterator<Item = (i8, &'a str)>) -> HashMap<(i8, String), usize> {
    let mut seen: HashMap<(i8, String), usize> = HashMap::new();
    for (t, n) in keys {
        *seen.entry((t, n.to_string())).or_default() += 1;
    }
    seen.retain(|_, c| *c > 1);
    seen
}

pub(crate) fn incremental_alter_configs(
    core: &BrokerCore,
    ctx: &RequestContext,
    req: IncrementalAlterConfigsRequest,
) -> IncrementalAlterConfigsResponse {
    let dups = duplicates(
        req.resources
            .iter()
            .map(|r| (r.resource_type, r.resource_name.as_str())),
    );
    let validate_only = req.validate_only;
    let responses = req
        .resources
        .into_iter()
        .map(|r| {
            let base = AlterConfigsResourceResponse::default()
                .with_resource_type(r.resource_type)
                .with_resource_name(r.resource_name.clone());
            let name = r.resource_name.to_string();
            if dups.contains_key(&(r.resource_type, name.clone())) {
                return base
                    .with_error_code(ErrorCode::INVALID_REQUEST.0)
                    .with_error_message(Some(s("Duplicate resource.")));
            }
            if !matches!(
                r.resource_type,
                RESOURCE_TOPIC | RESOURCE_BROKER | RESOURCE_BROKER_LOGGER
            ) {
                // GROUP (and anything else): the share-group handler.
                let one = IncrementalAlterConfigsRequest::default()
                    .with_validate_only(validate_only)
                    .with_resources(vec![r]);
                return super::share::incremental_alter_configs(core, ctx, one)
                    .responses
                    .pop()
                    .unwrap_or(base);
            }
            if let Some(code) = denied(core, ctx, r.resource_type, &name) {
                return base
                    .with_error_code(code.0)
                    .with_error_message(Some(s("Not authorized to alter the configs")));
            }
            let changes: Vec<Change> = changes_of(&r);
            match alter_resource(core, r.resource_type, &name, &changes, true, validate_only) {
                Ok(()) => base,
                Err((code, msg)) => base
                    .with_error_code(code.0)
                    .with_error_message(Some(s(msg))),
            }
        })
        .collect();
    IncrementalAlterConfigsResponse::default().with_responses(responses)
}

fn changes_of(r: &AlterConfigsResource) -> Vec<Change> {
    r.configs
        .iter()
        .map(|c| Change {
            name: c.name.to_string(),
            op: c.config_operation,
            value: c.value.as_ref().map(|v| v.to_string()),
        })
        .collect()
}

pub(crate) fn alter_configs(
    core: &BrokerCore,
    ctx: &RequestContext,
    req: AlterConfigsRequest,
) -> AlterConfigsResponse {
    use kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse as Resp;
    let dups = duplicates(
        req.resources
            .iter()
            .map(|r| (r.resource_type, r.resource_name.as_str())),
    );
    let responses = req
        .resources
        .into_iter()
        .map(|r| {
            let base = Resp::default()
                .with_resource_type(r.resource_type)
                .with_resource_name(r.resource_name.clone());
            let name = r.resource_name.to_string();
            if dups.contains_key(&(r.resource_type, name.clone())) {
                return base
                    .with_error_code(ErrorCode::INVALID_REQUEST.0)
                    .with_error_message(Some(s("Duplicate resource.")));
            }
            if let Some(code) = denied(core, ctx, r.resource_type, &name) {
                return base
                    .with_error_code(code.0)
                    .with_error_message(Some(s("Not authorized to alter the configs")));
            }
            // AlterConfigs replaces the set: every entry is a SET (a null
            // value is refused as Kafka refuses it).
            let changes: Vec<Change> = r
                .configs
                .iter()
                .map(|c| Change {
                    name: c.name.to_string(),
                    op: OP_SET,
                    value: c.value.as_ref().map(|v| v.to_string()),
                })
                .collect();
            match alter_resource(
                core,
                r.resource_type,
                &name,
                &changes,
                false,
                req.validate_only,
            ) {
                Ok(()) => base,
                Err((code, msg)) => base
                    .with_error_code(code.0)
                    .with_error_message(Some(s(msg))),
            }
        })
        .collect();
    AlterConfigsResponse::default().with_responses(responses)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(name: &str, v: &str) -> Change {
        Change {
            name: name.into(),
            op: OP_SET,
            value: Some(v.into()),
        }
    }

    fn topic_kind(k: &str) -> Option<ConfigKind> {
        topic_config_def(k).map(|d| d.kind)
    }

    fn unknown(k: &str) -> (ErrorCode, String) {
        (ErrorCode::INVALID_CONFIG, k.to_string())
    }

    #[test]
    fn append_and_subtract_only_on_lists() {
        let mut c = BTreeMap::new();
        let append = Change {
            name: "cleanup.policy".into(),
            op: OP_APPEND,
            value: Some("compact".into()),
        };
        apply_changes(&mut c, &[append], topic_kind, unknown).unwrap();
        assert_eq!(c["cleanup.policy"], "delete,compact");
        let subtract = Change {
            name: "cleanup.policy".into(),
            op: OP_SUBTRACT,
            value: Some("delete".into()),
        };
        apply_changes(&mut c, &[subtract], topic_kind, unknown).unwrap();
        assert_eq!(c["cleanup.policy"], "compact");
        let bad = Change {
            name: "retention.ms".into(),
            op: OP_APPEND,
            value: Some("5".into()),
        };
        let e = apply_changes(&mut c, &[bad], topic_kind, unknown).unwrap_err();
        assert_eq!(e.0, ErrorCode::INVALID_CONFIG);
        assert!(e.1.contains("append"), "{}", e.1);
    }

    #[test]
    fn duplicate_keys_and_unknown_ops_are_invalid_requests() {
        let mut c = BTreeMap::new();
        let e = apply_changes(
            &mut c,
            &[set("retention.ms", "1"), set("retention.ms", "2")],
            topic_kind,
            unknown,
        )
        .unwrap_err();
        assert_eq!(e.0, ErrorCode::INVALID_REQUEST);
        let odd = Change {
            name: "retention.ms".into(),
            op: 9,
            value: None,
        };
        assert_eq!(
            apply_changes(&mut c, &[odd], topic_kind, unknown)
                .unwrap_err()
                .0,
            ErrorCode::INVALID_REQUEST
        );
        assert!(c.is_empty());
    }

    #[test]
    fn broker_configs_must_be_dynamic_and_well_typed() {
        assert!(validate_broker_config("log.retention.ms", "1000").is_ok());
        assert_eq!(
            validate_broker_config("broker.id", "3").unwrap_err().code,
            ErrorCode::INVALID_REQUEST
        );
        let e = validate_broker_config("num.io.threads", "0").unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (
                ErrorCode::INVALID_REQUEST,
                "Invalid value 0 for configuration num.io.threads: Value must be at least 1"
            )
        );
        assert_eq!(
            validate_broker_config("log.preallocate", "maybe")
                .unwrap_err()
                .code,
            ErrorCode::INVALID_REQUEST
        );
        assert!(
            validate_broker_config("replica.alter.log.dirs.io.max.bytes.per.second", "0").is_ok()
        );
        assert_eq!(
            validate_broker_config("replica.alter.log.dirs.io.max.bytes.per.second", "-1")
                .unwrap_err()
                .code,
            ErrorCode::INVALID_REQUEST
        );
    }
}
