//! KIP-1191's configs: the two group configs and the two broker settings.

use super::*;

fn set(ops: &[(&str, Option<&str>)]) -> Result<BTreeMap<String, String>, ConfigError> {
    apply_ops(&ShareGroupBrokerConfig::default(), &BTreeMap::new(), ops)
}

#[test]
fn dead_letter_group_configs_default_off_and_parse() {
    let b = ShareGroupBrokerConfig::default();
    let c = GroupConfig::defaults(&b);
    assert_eq!(c.dlq_topic_name, "");
    assert!(!c.dlq_copy_record_enable);
    let o = set(&[
        (ERRORS_DLQ_TOPIC_NAME, Some(" dlq.orders ")),
        (ERRORS_DLQ_COPY_RECORD_ENABLE, Some("TRUE")),
    ])
    .unwrap();
    let c = GroupConfig::resolve(&b, &o);
    assert_eq!(c.dlq_topic_name, "dlq.orders");
    assert!(c.dlq_copy_record_enable);
    assert_eq!(
        c.value_of(ERRORS_DLQ_COPY_RECORD_ENABLE).as_deref(),
        Some("true")
    );
}

#[test]
fn a_dead_letter_topic_name_may_not_be_internal() {
    let e = set(&[(ERRORS_DLQ_TOPIC_NAME, Some("__consumer_offsets"))]).unwrap_err();
    assert_eq!(e.code, ErrorCode::INVALID_CONFIG);
    assert!(e.message.contains(ERRORS_DLQ_TOPIC_NAME), "{}", e.message);
    let e = set(&[(ERRORS_DLQ_COPY_RECORD_ENABLE, Some("1"))]).unwrap_err();
    assert_eq!(e.code, ErrorCode::INVALID_CONFIG);
    assert!(e.message.contains(ERRORS_DLQ_COPY_RECORD_ENABLE));
    // The prefix is checked when a record is written (as Kafka does), not
    // here: a name without it is stored.
    assert!(set(&[(ERRORS_DLQ_TOPIC_NAME, Some("orders-dlq"))]).is_ok());
}

#[test]
fn broker_dead_letter_settings_have_kafkas_defaults_and_names() {
    let b = ShareGroupBrokerConfig::default();
    assert!(!b.dlq_auto_create_topics_enable);
    assert_eq!(b.dlq_topic_name_prefix, "dlq.");
    let entries = b.entries();
    assert!(entries.contains(&(ERRORS_DLQ_AUTO_CREATE_TOPICS_ENABLE, "false".to_string())));
    assert!(entries.contains(&(ERRORS_DLQ_TOPIC_NAME_PREFIX, "dlq.".to_string())));
    let b = ShareGroupBrokerConfig::default()
        .with_overrides([
            (ERRORS_DLQ_AUTO_CREATE_TOPICS_ENABLE, "true"),
            (ERRORS_DLQ_TOPIC_NAME_PREFIX, ""),
        ])
        .unwrap();
    assert!(b.dlq_auto_create_topics_enable);
    assert_eq!(b.dlq_topic_name_prefix, "");
}

#[test]
fn bad_broker_dead_letter_settings_are_named() {
    for (name, value) in [
        (ERRORS_DLQ_AUTO_CREATE_TOPICS_ENABLE, "yes"),
        (ERRORS_DLQ_TOPIC_NAME_PREFIX, "__dlq."),
        (ERRORS_DLQ_TOPIC_NAME_PREFIX, "dlq/"),
    ] {
        let e = ShareGroupBrokerConfig::default()
            .with_overrides([(name, value)])
            .unwrap_err();
        assert!(e.contains(name), "{name}={value}: {e}");
    }
}
