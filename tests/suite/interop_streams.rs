//! Kafka Streams and Kafka's verifiable clients in the interop suite
//! (issue #17).
//!
//! - A Kafka Streams application under `exactly_once_v2`
//!   (interop/java/.../StreamsApp.java): a word count through a
//!   repartition topic into a RocksDB store with a changelog, checked with
//!   a read_committed reader: every word's committed updates are exactly
//!   1..n. Three runs: an instance killed (SIGKILL) while input keeps
//!   arriving and another taking over; two instances (a classic-protocol
//!   rebalance); and the KIP-1071 `group.protocol=streams`, which needs
//!   StreamsGroupHeartbeat. Between them, `kafka-streams-application-reset.sh`
//!   (StreamsResetter) resets the second run's application.
//! - `kafka-verifiable-producer.sh` (VerifiableProducer) and
//!   `kafka-verifiable-consumer.sh` (VerifiableConsumer) with their JSON
//!   events summed by [`verifiable_summary`].

use super::{
    CONSUMER_GROUP_HEARTBEAT, DELETE_RECORDS, DESCRIBE_GROUPS, JOIN_GROUP, OFFSET_FETCH, Output,
    Runner, Scenario, Value, expect_eq, expect_true, field_i64, json, ok, s,
};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

const STREAMS_APP: &str = "dev.sharestream.interop.StreamsApp";
const CREATE_TOPICS: i16 = 19;
const DELETE_TOPICS: i16 = 20;
const STREAMS_GROUP_DESCRIBE: i16 = 89;

/// Input records of each Streams run, and the words they count.
const STREAMS_RECORDS: i64 = 300;
const STREAMS_WORDS: i64 = 7;

/// The verifiable tools' topic (three partitions) and record count.
const T_VERIFIABLE: &str = "interop-verifiable";
const VERIFIABLE_RECORDS: i64 = 1000;

/// One Streams run with its own application id and topics.
fn streams_args(b: &str, app: &str, extra: &[&str]) -> Vec<String> {
    let mut v = s(&[
        STREAMS_APP,
        "--bootstrap",
        b,
        "--app-id",
        app,
        "--input",
        &format!("{app}-in"),
        "--output",
        &format!("{app}-out"),
        "--partitions",
        "3",
        "--records",
        &STREAMS_RECORDS.to_string(),
        "--keys",
        &STREAMS_WORDS.to_string(),
        "--timeout-ms",
        "120000",
    ]);
    v.extend(s(extra));
    v
}

/// What every Streams run must show: exact counts, no duplicate or
/// missing update, the internal topics with their configs, and the
/// repartition records purged after commit.
fn streams_verdict(v: &Value) -> Result<(), String> {
    ok(v)?;
    expect_eq(v, "words", STREAMS_WORDS)?;
    expect_eq(v, "updates", STREAMS_RECORDS)?;
    expect_eq(v, "bad_sequences", 0)?;
    expect_true(v, "repartition_topic")?;
    expect_true(v, "changelog_topic")?;
    if v["changelog_cleanup_policy"] != json!("compact") {
        return Err(format!(
            "changelog cleanup.policy {}",
            v["changelog_cleanup_policy"]
        ));
    }
    if v["windowed_changelog_cleanup_policy"] != json!("compact,delete") {
        return Err(format!(
            "windowed changelog cleanup.policy {}",
            v["windowed_changelog_cleanup_policy"]
        ));
    }
    if field_i64(v, "repartition_purged") <= 0 {
        return Err("repartition records were not purged (DeleteRecords)".into());
    }
    Ok(())
}

/// The interop rows of this module, in order.
pub(super) fn scenarios(b: &str) -> Vec<Scenario> {
    let streams_timeout = Duration::from_secs(150);
    let t60 = Duration::from_secs(60);
    let verifiable_consumer = |group: &str, extra: &[&str]| {
        let mut v = s(&[
            "org.apache.kafka.tools.VerifiableConsumer",
            "--bootstrap-server",
            b,
            "--topic",
            T_VERIFIABLE,
            "--group-id",
            group,
            "--max-messages",
            &VERIFIABLE_RECORDS.to_string(),
            "--reset-policy",
            "earliest",
        ]);
        v.extend(s(extra));
        v
    };
    vec![
        Scenario {
            client: "kafka-streams",
            feature: "exactly_once_v2 count (repartition, RocksDB + changelog): instance killed mid-stream, another takes over",
            runner: Runner::Java,
            args: streams_args(b, "interop-streams-crash", &["--crash"]),
            output: Output::ResultLine,
            needs: &[JOIN_GROUP, OFFSET_FETCH, CREATE_TOPICS, DELETE_RECORDS],
            embedded_gap: None,
            verify: |v| {
                streams_verdict(v)?;
                expect_true(v, "killed_child")?;
                if field_i64(v, "restored_records") <= 0 {
                    return Err("the new instance restored nothing from the changelog".into());
                }
                Ok(())
            },
            timeout: streams_timeout,
        },
        Scenario {
            client: "kafka-streams",
            feature: "exactly_once_v2 count: a second instance joins half-way (classic protocol rebalance)",
            runner: Runner::Java,
            args: streams_args(b, "interop-streams-scale", &["--instances", "2"]),
            output: Output::ResultLine,
            needs: &[JOIN_GROUP, OFFSET_FETCH, CREATE_TOPICS, DELETE_RECORDS],
            embedded_gap: None,
            verify: streams_verdict,
            timeout: streams_timeout,
        },
        Scenario {
            client: "kafka-streams-application-reset",
            feature: "reset the application of the previous row: input offsets to earliest, internal topics deleted",
            runner: Runner::Java,
            args: s(&[
                "org.apache.kafka.tools.StreamsResetter",
                "--bootstrap-server",
                b,
                "--application-id",
                "interop-streams-scale",
                "--input-topics",
                "interop-streams-scale-in",
            ]),
            output: Output::Text,
            needs: &[DESCRIBE_GROUPS, DELETE_TOPICS],
            embedded_gap: None,
            verify: |v| {
                let text = v["text"].as_str().unwrap_or("");
                let deleted = text.lines().any(|l| {
                    l.starts_with("Deleting inferred internal topics")
                        && [
                            "interop-streams-scale-rekey-repartition",
                            "interop-streams-scale-counts-changelog",
                            "interop-streams-scale-windowed-changelog",
                        ]
                        .iter()
                        .all(|t| l.contains(t))
                });
                if v["exit"] == 0 && deleted && v["last"] == json!("Done.") {
                    Ok(())
                } else {
                    Err(format!("exit {}: {:?}", v["exit"], text.trim()))
                }
            },
            timeout: t60,
        },
        Scenario {
            client: "kafka-streams",
            feature: "exactly_once_v2 count with group.protocol=streams (KIP-1071)",
            runner: Runner::Java,
            args: streams_args(
                b,
                "interop-streams-kip1071",
                &["--streams-props", "group.protocol=streams"],
            ),
            output: Output::ResultLine,
            needs: &[CREATE_TOPICS, DELETE_RECORDS],
            embedded_gap: None,
            verify: streams_verdict,
            timeout: streams_timeout,
        },
        Scenario {
            client: "kafka-streams-groups",
            feature: "describe the previous row's streams group: its state after the application left",
            runner: Runner::Java,
            args: s(&[
                "org.apache.kafka.tools.streams.StreamsGroupCommand",
                "--bootstrap-server",
                b,
                "--describe",
                "--group",
                "interop-streams-kip1071",
                "--state",
            ]),
            output: Output::Text,
            needs: &[STREAMS_GROUP_DESCRIBE],
            embedded_gap: None,
            verify: |v| {
                let text = v["text"].as_str().unwrap_or("");
                // GROUP, COORDINATOR (ID), [ASSIGNOR,] STATE, #MEMBERS.
                let row = text
                    .lines()
                    .find(|l| l.starts_with("interop-streams-kip1071 "));
                match row {
                    Some(l)
                        if v["exit"] == 0
                            && l.contains(" Empty ")
                            && l.trim_end().ends_with(" 0") =>
                    {
                        Ok(())
                    }
                    _ => Err(format!("exit {}: {:?}", v["exit"], text.trim())),
                }
            },
            timeout: t60,
        },
        Scenario {
            client: "kafka-streams",
            feature: "exactly_once_v2 count with group.protocol=streams: a second instance joins half-way (KIP-1071 tasks move between members)",
            runner: Runner::Java,
            args: streams_args(
                b,
                "interop-streams-kip1071-scale",
                &[
                    "--instances",
                    "2",
                    "--streams-props",
                    "group.protocol=streams",
                ],
            ),
            output: Output::ResultLine,
            needs: &[CREATE_TOPICS, DELETE_RECORDS],
            embedded_gap: None,
            verify: streams_verdict,
            timeout: streams_timeout,
        },
        Scenario {
            client: "kafka-configs",
            feature: "streams group config streams.num.standby.replicas=1 (setup of the next row)",
            runner: Runner::Java,
            args: s(&[
                "org.apache.kafka.tools.ConfigCommand",
                "--bootstrap-server",
                b,
                "--alter",
                "--entity-type",
                "groups",
                "--entity-name",
                "interop-streams-kip1071-standby",
                "--add-config",
                "streams.num.standby.replicas=1",
            ]),
            output: Output::Text,
            needs: &[],
            embedded_gap: None,
            verify: |v| {
                let text = v["text"].as_str().unwrap_or("");
                if v["exit"] == 0 && text.contains("Completed updating config") {
                    Ok(())
                } else {
                    Err(format!("exit {}: {:?}", v["exit"], text.trim()))
                }
            },
            timeout: t60,
        },
        Scenario {
            client: "kafka-streams",
            feature: "exactly_once_v2 count with group.protocol=streams, two instances, one standby per stateful task (streams.num.standby.replicas=1)",
            runner: Runner::Java,
            args: streams_args(
                b,
                "interop-streams-kip1071-standby",
                &[
                    "--instances",
                    "2",
                    "--streams-props",
                    "group.protocol=streams",
                    "--wait-standby",
                    "3",
                ],
            ),
            output: Output::ResultLine,
            needs: &[CREATE_TOPICS, DELETE_RECORDS],
            embedded_gap: None,
            verify: |v| {
                streams_verdict(v)?;
                // Three stateful tasks (the count's subtopology, three
                // partitions), each with its standby on the other
                // instance; the stateless tasks have none.
                let standby: i64 = v["standby_tasks_per_instance"]
                    .as_array()
                    .map_or(0, |a| a.iter().filter_map(|x| x.as_i64()).sum());
                if standby != 3 {
                    return Err(format!(
                        "standby tasks per instance {}, active {}",
                        v["standby_tasks_per_instance"], v["active_tasks_per_instance"]
                    ));
                }
                Ok(())
            },
            timeout: streams_timeout,
        },
        Scenario {
            client: "java-admin",
            feature: "create topic with 3 partitions (setup)",
            runner: Runner::Java,
            args: s(&[
                super::CHECK,
                "admin",
                "--topic",
                T_VERIFIABLE,
                "--partitions",
                "3",
                "--bootstrap",
                b,
            ]),
            output: Output::ResultLine,
            needs: &[],
            embedded_gap: None,
            verify: ok,
            timeout: t60,
        },
        Scenario {
            client: "VerifiableProducer",
            feature: "1000 records, acks=all, 10 repeating keys",
            runner: Runner::Java,
            args: s(&[
                "org.apache.kafka.tools.VerifiableProducer",
                "--bootstrap-server",
                b,
                "--topic",
                T_VERIFIABLE,
                "--max-messages",
                &VERIFIABLE_RECORDS.to_string(),
                "--acks",
                "-1",
                "--repeating-keys",
                "10",
            ]),
            output: Output::VerifiableEvents,
            needs: &[],
            embedded_gap: None,
            verify: |v| {
                expect_eq(v, "sent", VERIFIABLE_RECORDS)?;
                expect_eq(v, "acked", VERIFIABLE_RECORDS)?;
                expect_eq(v, "send_success", VERIFIABLE_RECORDS)?;
                expect_eq(v, "distinct_offsets", VERIFIABLE_RECORDS)?;
                expect_eq(v, "send_errors", 0)?;
                expect_eq(v, "partitions", 3)?;
                expect_true(v, "shutdown_complete")
            },
            timeout: t60,
        },
        Scenario {
            client: "VerifiableConsumer",
            feature: "classic group, cooperative-sticky: reads and commits all 1000",
            runner: Runner::Java,
            args: verifiable_consumer(
                "interop-verifiable-classic",
                &[
                    "--group-protocol",
                    "classic",
                    "--assignment-strategy",
                    "org.apache.kafka.clients.consumer.CooperativeStickyAssignor",
                ],
            ),
            output: Output::VerifiableEvents,
            needs: &[JOIN_GROUP, OFFSET_FETCH],
            embedded_gap: None,
            verify: verifiable_consumer_verdict,
            timeout: t60,
        },
        Scenario {
            client: "VerifiableConsumer",
            feature: "group.protocol=consumer (KIP-848): reads and commits all 1000",
            runner: Runner::Java,
            args: verifiable_consumer(
                "interop-verifiable-kip848",
                &["--group-protocol", "consumer"],
            ),
            output: Output::VerifiableEvents,
            needs: &[CONSUMER_GROUP_HEARTBEAT, OFFSET_FETCH],
            embedded_gap: None,
            verify: verifiable_consumer_verdict,
            timeout: t60,
        },
    ]
}

/// VerifiableConsumer read every record once and committed the end of
/// every partition.
fn verifiable_consumer_verdict(v: &Value) -> Result<(), String> {
    expect_eq(v, "consumed", VERIFIABLE_RECORDS)?;
    expect_eq(v, "committed_total", VERIFIABLE_RECORDS)?;
    expect_eq(v, "commit_failures", 0)?;
    expect_eq(v, "partitions", 3)?;
    expect_true(v, "shutdown_complete")
}

/// Sums the JSON events of VerifiableProducer and VerifiableConsumer (one
/// object a line; other lines ignored).
///
/// Producer: `sent` and `acked` from `tool_data`, `send_success` and
/// `send_errors` counted, `distinct_offsets` among the successes.
/// Consumer: `consumed` (sum of `records_consumed`), `committed_total` (the
/// sum over partitions of the last successfully committed offset),
/// `commit_failures`. Both: `partitions` seen, `shutdown_complete`.
pub(super) fn verifiable_summary(text: &str) -> Value {
    let mut sent = -1;
    let mut acked = -1;
    let (mut success, mut errors, mut consumed, mut commit_failures) = (0i64, 0i64, 0i64, 0i64);
    let mut offsets = BTreeSet::new();
    let mut committed: BTreeMap<(String, i64), i64> = BTreeMap::new();
    let mut partitions = BTreeSet::new();
    let mut done = false;
    for line in text.lines() {
        let Ok(e) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let partition = |p: &Value| {
            (
                p["topic"].as_str().unwrap_or("").to_string(),
                field_i64(p, "partition"),
            )
        };
        match e["name"].as_str() {
            Some("tool_data") => {
                sent = field_i64(&e, "sent");
                acked = field_i64(&e, "acked");
            }
            Some("producer_send_success") => {
                success += 1;
                offsets.insert((partition(&e), field_i64(&e, "offset")));
                partitions.insert(partition(&e));
            }
            Some("producer_send_error") => errors += 1,
            Some("records_consumed") => {
                consumed += field_i64(&e, "count").max(0);
                for p in e["partitions"].as_array().into_iter().flatten() {
                    partitions.insert(partition(p));
                }
            }
            Some("offsets_committed") => {
                if e["success"] != json!(true) {
                    commit_failures += 1;
                    continue;
                }
                for p in e["offsets"].as_array().into_iter().flatten() {
                    let at = committed.entry(partition(p)).or_insert(0);
                    *at = (*at).max(field_i64(p, "offset"));
                }
            }
            Some("shutdown_complete") => done = true,
            _ => {}
        }
    }
    json!({
        "sent": sent,
        "acked": acked,
        "send_success": success,
        "send_errors": errors,
        "distinct_offsets": offsets.len(),
        "consumed": consumed,
        "committed_total": committed.values().sum::<i64>(),
        "commit_failures": commit_failures,
        "partitions": partitions.len(),
        "shutdown_complete": done,
    })
}
