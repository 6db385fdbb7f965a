//! Interoperability suite: real Kafka clients against a broker.
//!
//! Runs Apache Kafka's Java clients and tools, confluent-kafka (Python,
//! librdkafka) and kcat as child processes against either our embedded
//! broker (started in this process) or an external broker such as a real
//! Apache Kafka started by `scripts/kafka/start.sh`. Each scenario prints a
//! result the suite asserts on; the outcome of every scenario is written to
//! `target/interop/matrix-<backend>.json`, from which
//! `scripts/interop_matrix.py` renders docs/INTEROP.md.
//!
//! It needs a JVM and the Kafka jars, so it only runs when
//! `SHARESTREAM_INTEROP_CP` is set (scripts/interop.sh sets everything up);
//! otherwise the test is ignored (`#[ignore]`): scripts/interop.sh runs it
//! with `--include-ignored`.
//!
//! Environment:
//! - `SHARESTREAM_INTEROP_CP`: Java classpath holding the check jar
//!   (interop/java) and the Kafka jars.
//! - `SHARESTREAM_INTEROP_BOOTSTRAP`: use this external broker instead of the
//!   embedded one; `SHARESTREAM_INTEROP_BACKEND` names it in the matrix.
//! - `SHARESTREAM_INTEROP_PYTHON`: a Python with confluent-kafka (optional).
//! - `SHARESTREAM_INTEROP_KCAT`: the kcat binary (optional).
//! - `SHARESTREAM_INTEROP_LOG4J`: log4j2 configuration for the JVMs.
//!
//! Verdicts: `pass`; `gap` when a scenario fails and needs an API the broker
//! does not advertise, or is a known, documented gap of the embedded broker;
//! `fail` otherwise, which fails the test; `skip` when a client is not
//! installed.

use crate::common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::RawClient;
use kafka_protocol::messages::ApiVersionsRequest;
use kafka_protocol::protocol::StrBytes;
use serde_json::{Value, json};
use sharestream::broker::{Broker, BrokerConfig, BrokerHandle};
use tokio::io::AsyncReadExt;

#[path = "interop_share_groups_tool.rs"]
mod share_groups_tool;
#[path = "interop_streams.rs"]
mod streams;

/// API keys the scenarios depend on, by Kafka name.
const INCREMENTAL_ALTER_CONFIGS: i16 = 44;
const JOIN_GROUP: i16 = 11;
const OFFSET_FETCH: i16 = 9;
const TXN_OFFSET_COMMIT: i16 = 28;
const DESCRIBE_GROUPS: i16 = 15;
const DELETE_GROUPS: i16 = 42;
const DELETE_RECORDS: i16 = 21;
const DESCRIBE_PRODUCERS: i16 = 61;
const LIST_TRANSACTIONS: i16 = 66;
const WRITE_TXN_MARKERS: i16 = 27;
const OFFSET_FOR_LEADER_EPOCH: i16 = 23;
const CONSUMER_GROUP_HEARTBEAT: i16 = 68;
const DESCRIBE_SHARE_GROUP_OFFSETS: i16 = 90;
const SHARE_GROUP_DESCRIBE: i16 = 77;

/// `kafka-consumer-groups.sh` (ConsumerGroupCommand) with `args`.
fn groups_tool(bootstrap: &str, args: &[&str]) -> Vec<String> {
    let mut v = s(&[
        "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
        "--bootstrap-server",
        bootstrap,
    ]);
    v.extend(s(args));
    v
}

/// A tool exited 0 and its last line of output starts with `prefix`.
/// `kafka-transactions.sh` with these arguments.
fn transactions_tool(bootstrap: &str, args: &[&str]) -> Vec<String> {
    let mut v = s(&[
        "org.apache.kafka.tools.TransactionsCommand",
        "--bootstrap-server",
        bootstrap,
    ]);
    v.extend(s(args));
    v
}

fn tool_last_line(v: &Value, prefix: &str) -> Result<(), String> {
    let last = v["last"].as_str().unwrap_or("");
    if v["exit"] == 0 && last.starts_with(prefix) {
        Ok(())
    } else {
        Err(format!("exit {}: last line {last:?}", v["exit"]))
    }
}

const SHARE_GROUP_HEARTBEAT: i16 = 76;
const SHARE_FETCH: i16 = 78;
const SHARE_ACKNOWLEDGE: i16 = 79;

fn api_name(key: i16) -> &'static str {
    match key {
        INCREMENTAL_ALTER_CONFIGS => "IncrementalAlterConfigs",
        DELETE_RECORDS => "DeleteRecords",
        DESCRIBE_PRODUCERS => "DescribeProducers",
        WRITE_TXN_MARKERS => "WriteTxnMarkers",
        OFFSET_FOR_LEADER_EPOCH => "OffsetForLeaderEpoch",
        LIST_TRANSACTIONS => "ListTransactions",
        JOIN_GROUP => "JoinGroup",
        OFFSET_FETCH => "OffsetFetch",
        TXN_OFFSET_COMMIT => "TxnOffsetCommit",
        DESCRIBE_GROUPS => "DescribeGroups",
        DELETE_GROUPS => "DeleteGroups",
        CONSUMER_GROUP_HEARTBEAT => "ConsumerGroupHeartbeat",
        SHARE_GROUP_HEARTBEAT => "ShareGroupHeartbeat",
        SHARE_FETCH => "ShareFetch",
        SHARE_ACKNOWLEDGE => "ShareAcknowledge",
        _ => "?",
    }
}

/// Which program runs a scenario.
#[derive(Clone, Copy, PartialEq)]
enum Runner {
    /// `java -cp $SHARESTREAM_INTEROP_CP <main class> args...`
    Java,
    /// `$SHARESTREAM_INTEROP_PYTHON interop/python/check.py args...`
    Python,
    /// `$SHARESTREAM_INTEROP_KCAT args...`
    Kcat,
}

/// How a scenario's output becomes the JSON that `verify` looks at.
#[derive(Clone, Copy)]
enum Output {
    /// The `RESULT {json}` line of our check programs.
    ResultLine,
    /// `{"lines": N, "last": "..."}` over stdout (`last`: the last line
    /// that is not blank).
    Lines,
    /// VerifiableShareConsumer's JSON events, summed.
    VerifiableShare,
    /// VerifiableProducer's or VerifiableConsumer's JSON events, summed
    /// (`streams::verifiable_summary`).
    VerifiableEvents,
    /// `Lines` plus the whole of stdout as `text` (for tools whose table
    /// is checked row by row) and of stderr as `stderr`.
    Text,
}

type Verify = fn(&Value) -> Result<(), String>;

struct Scenario {
    client: &'static str,
    feature: &'static str,
    runner: Runner,
    args: Vec<String>,
    output: Output,
    /// APIs without which the scenario cannot work: failing while one is
    /// not advertised is a gap, not a failure.
    needs: &'static [i16],
    /// A known gap of the embedded broker (reason), documented in
    /// docs/INTEROP.md.
    embedded_gap: Option<&'static str>,
    verify: Verify,
    timeout: Duration,
}

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

fn field_i64(v: &Value, k: &str) -> i64 {
    v.get(k).and_then(Value::as_i64).unwrap_or(-1)
}

fn expect_eq(v: &Value, k: &str, want: i64) -> Result<(), String> {
    let got = field_i64(v, k);
    if got == want {
        Ok(())
    } else {
        Err(format!("{k} = {got}, expected {want}"))
    }
}

fn expect_str(v: &Value, k: &str, want: &str) -> Result<(), String> {
    match v.get(k).and_then(Value::as_str) {
        Some(got) if got == want => Ok(()),
        got => Err(format!("{k} = {got:?}, expected {want:?}")),
    }
}

fn expect_true(v: &Value, k: &str) -> Result<(), String> {
    if v.get(k).and_then(Value::as_bool) == Some(true) {
        Ok(())
    } else {
        Err(format!("{k} is not true"))
    }
}

fn ok(v: &Value) -> Result<(), String> {
    if v.get("ok").and_then(Value::as_bool) == Some(true) {
        Ok(())
    } else {
        Err(v
            .get("error")
            .and_then(Value::as_str)
            .unwrap_or("no RESULT line")
            .to_string())
    }
}

fn prefix_count(v: &Value, p: &str) -> i64 {
    v.get("by_prefix")
        .and_then(|b| b.get(p))
        .and_then(Value::as_i64)
        .unwrap_or(0)
}

const CHECK: &str = "dev.sharestream.interop.Check";
const T: &str = "interop-main";
const T_SHARE_X: &str = "interop-share-explicit";
const T_SHARE_I: &str = "interop-share-implicit";
/// The topic of the acquire-mode and renew scenarios (each reads it with its
/// own share group).
const T_SHARE_ACQ: &str = "interop-share-acquire";
/// Records of the acquire-mode scenarios, produced with a long linger so
/// that they go out in a few big batches.
const ACQUIRE_RECORDS: i64 = 300;
/// `max.poll.records` of the acquire-mode scenarios.
const ACQUIRE_MAX_POLL: i64 = 7;
/// The source topic of the KIP-1191 scenario (its dead-letter topic is
/// `dlq.` + this, created by the check).
const T_SHARE_DLQ: &str = "interop-share-dlq";
const T_PERF: &str = "interop-perf";
const T_PY: &str = "interop-python";
const T_PY_SHARE: &str = "interop-python-share";
const T_PY_CLOSE: &str = "interop-python-close";
const T_KCAT: &str = "interop-kcat";
const T_EOS_OUT: &str = "interop-eos-out";
/// The topic of the hanging-transaction rows (created by TxnHang).
const T_TXN_HANG: &str = "interop-txn-hang";
const PERF_RECORDS: i64 = 2000;

/// The scenarios, in order (later ones read what earlier ones wrote).
/// An `eos-copy` run: every input copied once, nothing left for a second
/// consumer of the group, and the offsets committed.
fn verify_eos_copy(v: &Value) -> Result<(), String> {
    ok(v)?;
    expect_eq(v, "copied", 110)?;
    expect_eq(v, "after_commit", 0)?;
    if v["committed_partitions"].as_i64().unwrap_or(0) < 1 {
        return Err(format!(
            "committed_partitions = {}",
            v["committed_partitions"]
        ));
    }
    Ok(())
}

fn scenarios(bootstrap: &str) -> Vec<Scenario> {
    let b = bootstrap;
    let j = |extra: &[&str]| -> Vec<String> {
        let mut v = s(&[CHECK]);
        v.extend(s(extra));
        v.extend(s(&["--bootstrap", b]));
        v
    };
    // kafka-configs.sh: Kafka's ConfigCommand against the backend.
    let configs = |extra: &[&str]| -> Vec<String> {
        let mut v = s(&[
            "org.apache.kafka.tools.ConfigCommand",
            "--bootstrap-server",
            b,
        ]);
        v.extend(s(extra));
        v
    };
    let t60 = Duration::from_secs(60);
    let extra_topics = [
        T_SHARE_X,
        T_SHARE_I,
        T_SHARE_ACQ,
        T_SHARE_DLQ,
        T_PERF,
        T_PY,
        T_PY_SHARE,
        T_PY_CLOSE,
        T_KCAT,
        T_EOS_OUT,
    ];
    let mut out = vec![Scenario {
        client: "java-admin",
        feature: "create topics, describe cluster/topics/configs",
        runner: Runner::Java,
        args: j(&["admin", "--topic", T, "--partitions", "3"]),
        output: Output::ResultLine,
        needs: &[],
        embedded_gap: None,
        verify: |v| {
            ok(v)?;
            expect_eq(v, "nodes", 1)?;
            expect_eq(v, "partitions", 3)?;
            expect_true(v, "topic_id_set")?;
            expect_true(v, "topics_listed")?;
            if field_i64(v, "controller") < 0 {
                return Err("no controller".into());
            }
            Ok(())
        },
        timeout: t60,
    }];
    for topic in extra_topics {
        out.push(Scenario {
            client: "java-admin",
            feature: "create topic (setup)",
            runner: Runner::Java,
            args: j(&["admin", "--topic", topic, "--partitions", "1"]),
            output: Output::ResultLine,
            needs: &[],
            embedded_gap: None,
            verify: ok,
            timeout: t60,
        });
    }
    out.extend([
        Scenario {
            client: "java-producer",
            feature: "idempotent produce (acks=all)",
            runner: Runner::Java,
            args: j(&["produce-idempotent", "--topic", T, "--count", "100"]),
            output: Output::ResultLine,
            needs: &[],
            embedded_gap: None,
            verify: |v| {
                ok(v)?;
                expect_eq(v, "acked", 100)?;
                expect_true(v, "offsets_increasing")
            },
            timeout: t60,
        },
        Scenario {
            client: "java-producer",
            feature: "transaction commit",
            runner: Runner::Java,
            args: j(&[
                "produce-txn",
                "--topic",
                T,
                "--count",
                "10",
                "--txn-id",
                "interop-txn",
                "--prefix",
                "committed",
            ]),
            output: Output::ResultLine,
            needs: &[],
            embedded_gap: None,
            verify: |v| {
                ok(v)?;
                expect_eq(v, "sent", 10)
            },
            timeout: t60,
        },
        Scenario {
            client: "java-producer",
            feature: "transaction abort",
            runner: Runner::Java,
            args: j(&[
                "produce-txn",
                "--topic",
                T,
                "--count",
                "10",
                "--txn-id",
                "interop-txn",
                "--abort",
                "--prefix",
                "aborted",
            ]),
            output: Output::ResultLine,
            needs: &[],
            embedded_gap: None,
            verify: |v| {
                ok(v)?;
                expect_eq(v, "sent", 10)
            },
            timeout: t60,
        },
        Scenario {
            client: "java-consumer",
            feature: "read_committed (assign mode)",
            runner: Runner::Java,
            args: j(&["consume", "--topic", T, "--expect", "110"]),
            output: Output::ResultLine,
            needs: &[],
            embedded_gap: None,
            verify: |v| {
                ok(v)?;
                expect_eq(v, "received", 110)?;
                if prefix_count(v, "aborted") != 0 {
                    return Err("aborted records were delivered".into());
                }
                if prefix_count(v, "committed") != 10 || prefix_count(v, "idem") != 100 {
                    return Err(format!("by_prefix = {}", v["by_prefix"]));
                }
                Ok(())
            },
            timeout: t60,
        },
        Scenario {
            client: "java-consumer",
            feature: "read_uncommitted (assign mode)",
            runner: Runner::Java,
            args: j(&[
                "consume",
                "--topic",
                T,
                "--expect",
                "120",
                "--isolation",
                "read_uncommitted",
            ]),
            output: Output::ResultLine,
            needs: &[],
            embedded_gap: None,
            verify: |v| {
                ok(v)?;
                expect_eq(v, "received", 120)?;
                if prefix_count(v, "aborted") != 10 {
                    return Err(format!("by_prefix = {}", v["by_prefix"]));
                }
                Ok(())
            },
            timeout: t60,
        },
        Scenario {
            client: "java-consumer",
            feature: "subscribe (consumer group)",
            runner: Runner::Java,
            args: j(&[
                "consume",
                "--topic",
                T,
                "--expect",
                "110",
                "--group",
                "interop-cg",
                "--timeout-ms",
                "15000",
            ]),
            output: Output::ResultLine,
            needs: &[JOIN_GROUP, OFFSET_FETCH],
            embedded_gap: None,
            verify: |v| {
                ok(v)?;
                expect_eq(v, "received", 110)
            },
            timeout: t60,
        },
        Scenario {
            client: "java-producer",
            feature: "sendOffsetsToTransaction (consume-transform-produce, consumer group)",
            runner: Runner::Java,
            args: j(&[
                "eos-copy",
                "--topic",
                T,
                "--out",
                T_EOS_OUT,
                "--group",
                "interop-eos",
                "--expect",
                "110",
                "--timeout-ms",
                "30000",
            ]),
            output: Output::ResultLine,
            needs: &[JOIN_GROUP, OFFSET_FETCH, TXN_OFFSET_COMMIT],
            embedded_gap: None,
            verify: verify_eos_copy,
            timeout: t60,
        },
        Scenario {
            client: "java-producer",
            feature: "sendOffsetsToTransaction into a group.protocol=consumer (KIP-848) group",
            runner: Runner::Java,
            args: j(&[
                "eos-copy",
                "--topic",
                T,
                "--out",
                T_EOS_OUT,
                "--group",
                "interop-eos-kip848",
                "--txn-id",
                "interop-eos-kip848",
                "--props",
                "group.protocol=consumer",
                "--expect",
                "110",
                "--timeout-ms",
                "30000",
            ]),
            output: Output::ResultLine,
            needs: &[CONSUMER_GROUP_HEARTBEAT, OFFSET_FETCH, TXN_OFFSET_COMMIT],
            embedded_gap: None,
            verify: verify_eos_copy,
            timeout: t60,
        },
        Scenario {
            client: "java-consumer",
            feature: "subscribe with group.protocol=consumer (KIP-848): two members, then one leaves",
            runner: Runner::Java,
            args: j(&[
                "consume-pair",
                "--topic",
                T,
                "--expect",
                "110",
                "--group",
                "interop-cg-kip848",
                "--props",
                "group.protocol=consumer",
                "--timeout-ms",
                "40000",
            ]),
            output: Output::ResultLine,
            needs: &[CONSUMER_GROUP_HEARTBEAT, OFFSET_FETCH],
            embedded_gap: None,
            verify: |v| {
                ok(v)?;
                expect_true(v, "paired")?;
                if v["overlap"] != json!(false) {
                    return Err("a partition was assigned to both members at once".into());
                }
                expect_eq(v, "after_leave_partitions", 3)?;
                expect_eq(v, "distinct", 110)
            },
            timeout: Duration::from_secs(90),
        },
        Scenario {
            client: "java-consumer",
            feature: "group.protocol=consumer static member (group.instance.id) restarts: same partitions, the other member untouched",
            runner: Runner::Java,
            args: vec![
                "dev.sharestream.interop.StaticRestart".into(),
                "--bootstrap".into(),
                b.into(),
                "--topic".into(),
                T.into(),
                "--group".into(),
                "interop-cg-static".into(),
                "--timeout-ms".into(),
                "60000".into(),
            ],
            output: Output::ResultLine,
            needs: &[CONSUMER_GROUP_HEARTBEAT],
            embedded_gap: None,
            verify: |v| {
                ok(v)?;
                expect_true(v, "paired")?;
                expect_true(v, "same_partitions")?;
                expect_true(v, "a_kept_after")?;
                expect_true(v, "b_unchanged")?;
                expect_eq(v, "b_callbacks_after_pairing", 0)
            },
            timeout: Duration::from_secs(90),
        },
        Scenario {
            client: "java-consumer",
            feature: "an empty group changes protocol: classic, then group.protocol=consumer, then classic again, resuming from the committed offsets",
            runner: Runner::Java,
            args: vec![
                "dev.sharestream.interop.ProtocolSwitch".into(),
                "--bootstrap".into(),
                b.into(),
                "--topic".into(),
                "interop-protocol-switch".into(),
                "--group".into(),
                "interop-cg-switch".into(),
                "--timeout-ms".into(),
                "80000".into(),
            ],
            output: Output::ResultLine,
            needs: &[CONSUMER_GROUP_HEARTBEAT, JOIN_GROUP],
            embedded_gap: None,
            verify: |v| {
                ok(v)?;
                expect_eq(v, "classic", 10)?;
                expect_eq(v, "consumer", 10)?;
                expect_true(v, "consumer_new_only")?;
                expect_eq(v, "classic_again", 0)
            },
            timeout: Duration::from_secs(100),
        },
        Scenario {
            client: "kafka-consumer-groups",
            feature: "--list --type shows the KIP-848 group as Consumer",
            runner: Runner::Java,
            args: groups_tool(b, &["--list", "--type"]),
            output: Output::Text,
            needs: &[CONSUMER_GROUP_HEARTBEAT],
            embedded_gap: None,
            verify: |v| share_groups_tool::has_row(v, &["interop-cg-kip848", "Consumer"]),
            timeout: t60,
        },
        Scenario {
            client: "kafka-consumer-groups",
            feature: "--describe --state of the KIP-848 group (uniform, Empty)",
            runner: Runner::Java,
            args: groups_tool(b, &["--describe", "--group", "interop-cg-kip848", "--state"]),
            output: Output::Text,
            needs: &[CONSUMER_GROUP_HEARTBEAT],
            embedded_gap: None,
            verify: |v| {
                // GROUP, COORDINATOR (ID) in two words, ASSIGNMENT-STRATEGY,
                // STATE, #MEMBERS.
                let text = v["text"].as_str().unwrap_or("");
                let ok = text.lines().any(|l| {
                    let w: Vec<&str> = l.split_whitespace().collect();
                    w.len() == 6 && w[0] == "interop-cg-kip848" && w[3..] == ["uniform", "Empty", "0"]
                });
                if v["exit"] == 0 && ok {
                    Ok(())
                } else {
                    Err(format!("exit {}: {:?}", v["exit"], text.trim()))
                }
            },
            timeout: t60,
        },
        Scenario {
            client: "kafka-consumer-groups",
            feature: "--describe a group with committed offsets",
            runner: Runner::Java,
            // The group of the sendOffsetsToTransaction row.
            args: groups_tool(b, &["--describe", "--group", "interop-eos"]),
            output: Output::Lines,
            needs: &[DESCRIBE_GROUPS, OFFSET_FETCH],
            embedded_gap: None,
            verify: |v| tool_last_line(v, "interop-eos "),
            timeout: t60,
        },
        Scenario {
            client: "kafka-consumer-groups",
            feature: "--reset-offsets --to-earliest --execute",
            runner: Runner::Java,
            args: groups_tool(
                b,
                &[
                    "--reset-offsets",
                    "--group",
                    "interop-cg",
                    "--topic",
                    T,
                    "--to-earliest",
                    "--execute",
                ],
            ),
            output: Output::Lines,
            needs: &[DESCRIBE_GROUPS, OFFSET_FETCH],
            embedded_gap: None,
            verify: |v| tool_last_line(v, "interop-cg "),
            timeout: t60,
        },
        Scenario {
            client: "kafka-consumer-groups",
            feature: "--delete an Empty group",
            runner: Runner::Java,
            args: groups_tool(b, &["--delete", "--group", "interop-cg"]),
            output: Output::Lines,
            needs: &[DELETE_GROUPS],
            embedded_gap: None,
            verify: |v| tool_last_line(v, "Deletion of requested consumer groups"),
            timeout: t60,
        },
    ]);
    for (mode, topic) in [("explicit", T_SHARE_X), ("implicit", T_SHARE_I)] {
        out.push(Scenario {
            client: "java-share-consumer",
            feature: if mode == "explicit" {
                "explicit acks (ACCEPT, RELEASE + redelivery), commitSync"
            } else {
                "implicit acks, commitSync"
            },
            runner: Runner::Java,
            args: j(&[
                "share-consume",
                "--topic",
                topic,
                "--group",
                &format!("interop-share-{mode}"),
                "--mode",
                mode,
                "--produce",
                "50",
                "--expect",
                "50",
            ]),
            output: Output::ResultLine,
            needs: &[SHARE_GROUP_HEARTBEAT, SHARE_FETCH, SHARE_ACKNOWLEDGE],
            embedded_gap: None,
            verify: |v| {
                ok(v)?;
                expect_eq(v, "received", 50)?;
                expect_eq(v, "distinct", 50)?;
                expect_eq(v, "commit_errors", 0)?;
                if v["mode"] == "explicit" {
                    expect_true(v, "redelivered_with_count_2")?;
                }
                Ok(())
            },
            timeout: t60,
        });
    }
    // KIP-1206 acquire modes (ShareFetch v2): 300 records, produced in big
    // batches by the first scenario, read by two share groups with
    // max.poll.records=7. record_limit must never hand out more than 7
    // records at once; batch_optimized acquires whole batches, so the
    // client's polls exceed 7 (on Apache Kafka too).
    let acquire_n = ACQUIRE_RECORDS.to_string();
    let max_poll = ACQUIRE_MAX_POLL.to_string();
    for acquire_mode in ["record_limit", "batch_optimized"] {
        let verify: Verify = if acquire_mode == "record_limit" {
            |v| {
                ok(v)?;
                expect_eq(v, "received", ACQUIRE_RECORDS)?;
                expect_eq(v, "distinct", ACQUIRE_RECORDS)?;
                expect_eq(v, "commit_errors", 0)?;
                let most = field_i64(v, "max_poll_batch");
                if !(1..=ACQUIRE_MAX_POLL).contains(&most) {
                    return Err(format!(
                        "max_poll_batch = {most}, record_limit allows {ACQUIRE_MAX_POLL}"
                    ));
                }
                Ok(())
            }
        } else {
            |v| {
                ok(v)?;
                expect_eq(v, "received", ACQUIRE_RECORDS)?;
                expect_eq(v, "distinct", ACQUIRE_RECORDS)?;
                expect_eq(v, "commit_errors", 0)?;
                let most = field_i64(v, "max_poll_batch");
                if most <= ACQUIRE_MAX_POLL {
                    return Err(format!(
                        "max_poll_batch = {most}: batch_optimized should hand out whole batches"
                    ));
                }
                Ok(())
            }
        };
        let group = format!("interop-share-{acquire_mode}");
        let mut args = vec![
            "share-consume",
            "--topic",
            T_SHARE_ACQ,
            "--group",
            &group,
            "--mode",
            "implicit",
            "--acquire-mode",
            acquire_mode,
            "--max-poll-records",
            &max_poll,
            "--expect",
            &acquire_n,
        ];
        if acquire_mode == "record_limit" {
            // The first of the three produces the records, in big batches.
            args.extend([
                "--produce",
                &acquire_n,
                "--produce-linger-ms",
                "200",
                "--warmup-ms",
                "1000",
            ]);
        }
        out.push(Scenario {
            client: "java-share-consumer",
            feature: if acquire_mode == "record_limit" {
                "share.acquire.mode=record_limit, max.poll.records=7 (ShareFetch v2)"
            } else {
                "share.acquire.mode=batch_optimized, max.poll.records=7 (ShareFetch v2)"
            },
            runner: Runner::Java,
            args: j(&args),
            output: Output::ResultLine,
            needs: &[SHARE_GROUP_HEARTBEAT, SHARE_FETCH, SHARE_ACKNOWLEDGE],
            embedded_gap: None,
            verify,
            timeout: t60,
        });
    }
    // KIP-1191: every record REJECTed by a KafkaShareConsumer lands in the
    // group's dead-letter topic with the __dlq.errors.* headers and, with
    // copy on, its key and value. Kafka needs share.version >= 2 (4.4
    // finalizes 2 by default; the check raises it where it is lower) and
    // the topic config errors.deadletterqueue.group.enable=true on a topic
    // named with the prefix dlq. (both set up by the check).
    out.push(Scenario {
        client: "java-share-consumer",
        feature: "KIP-1191 dead-letter queue: REJECT, then read the DLQ topic (copy on)",
        runner: Runner::Java,
        args: j(&[
            "share-dlq",
            "--topic",
            T_SHARE_DLQ,
            "--group",
            "interop-share-dlq",
            "--dlq",
            "dlq.interop-share-dlq",
            "--produce",
            "5",
        ]),
        output: Output::ResultLine,
        needs: &[SHARE_GROUP_HEARTBEAT, SHARE_FETCH, SHARE_ACKNOWLEDGE],
        embedded_gap: None,
        verify: |v| {
            ok(v)?;
            expect_eq(v, "rejected", 5)?;
            expect_eq(v, "dlq_records", 5)?;
            expect_eq(v, "headers_ok", 5)?;
            expect_eq(v, "copied", 5)
        },
        timeout: t60,
    });
    // KIP-554: SCRAM users through the admin client (what
    // kafka-configs.sh --entity-type users does).
    out.push(Scenario {
        client: "java-admin",
        feature: "SCRAM users: describe, create, refuse, delete (KIP-554)",
        runner: Runner::Java,
        args: j(&["scram-users", "--user", "interop-scram-user"]),
        output: Output::ResultLine,
        needs: &[],
        embedded_gap: None,
        verify: |v| {
            ok(v)?;
            expect_str(v, "describe_missing", "ResourceNotFoundException")?;
            expect_str(v, "credentials", "SCRAM_SHA_256:8192")?;
            expect_str(v, "too_many_iterations", "UnacceptableCredentialException")?;
            expect_str(v, "describe_deleted", "ResourceNotFoundException")?;
            expect_str(v, "delete_missing", "ResourceNotFoundException")
        },
        timeout: t60,
    });
    // KIP-546: client quotas through the admin client (what
    // kafka-configs.sh --entity-type clients/users does), then the quota at
    // work: a producer and a consumer with the quota's client id move
    // 130 KiB at 10 KiB/s (ten seconds of the quota are let through at
    // once, as Kafka measures rates over ten seconds) and are throttled.
    out.push(Scenario {
        client: "java-admin",
        feature: "client quotas: alter, describe, refuse, throttle a producer and a consumer (KIP-546)",
        runner: Runner::Java,
        args: j(&[
            "client-quotas",
            "--topic",
            "interop-client-quotas",
            "--client-id",
            "interop-quota-client",
        ]),
        output: Output::ResultLine,
        needs: &[],
        embedded_gap: None,
        verify: |v| {
            ok(v)?;
            expect_eq(v, "describe_before", 0)?;
            expect_str(v, "altered", "ok")?;
            expect_str(v, "unknown_key", "InvalidRequestException")?;
            expect_str(v, "fractional_long", "InvalidRequestException")?;
            expect_str(v, "empty_entity", "InvalidRequestException")?;
            expect_eq(v, "quota_producer", 10240)?;
            expect_eq(v, "quota_consumer", 10240)?;
            expect_eq(v, "default_user_consumer", 1048576)?;
            expect_true(v, "default_user_name_null")?;
            expect_eq(v, "entities_ours", 2)?;
            expect_eq(v, "produced", 130)?;
            expect_true(v, "produce_throttled")?;
            expect_true(v, "fetch_throttled")?;
            expect_eq(v, "consumed", 130)?;
            expect_eq(v, "describe_after", 0)
        },
        timeout: t60,
    });
    // KIP-599: a controller_mutation_rate of 1 (a bucket of 11
    // partitions): topics of 10, 5 and 1 partitions in one CreateTopics,
    // the third refused.
    out.push(Scenario {
        client: "java-admin",
        feature: "controller_mutation_rate: CreateTopics refused past the bucket (KIP-599)",
        runner: Runner::Java,
        args: j(&[
            "mutation-quota",
            "--topic-prefix",
            "interop-mutation-quota",
            "--client-id",
            "interop-mutation-client",
        ]),
        output: Output::ResultLine,
        needs: &[],
        embedded_gap: None,
        verify: |v| {
            ok(v)?;
            expect_str(v, "altered", "none")?;
            let created = v["created"].to_string();
            if created != r#"["ok","ok","ThrottlingQuotaExceededException"]"# {
                return Err(format!("created: {created}"));
            }
            let throttle = field_i64(v, "refusal_throttle_ms");
            if !(1..=4_000).contains(&throttle) {
                return Err(format!("refusal_throttle_ms: {throttle}"));
            }
            expect_str(v, "removed", "none")?;
            expect_str(v, "deleted", "none")
        },
        timeout: t60,
    });
    // DescribeLogDirs: kafka-log-dirs.sh and the topic sizes of cluster UIs.
    out.push(Scenario {
        client: "java-admin",
        feature: "log directories: partition sizes, replica log dirs (DescribeLogDirs)",
        runner: Runner::Java,
        args: j(&["log-dirs", "--topic", "interop-log-dirs"]),
        output: Output::ResultLine,
        needs: &[],
        embedded_gap: None,
        verify: |v| {
            ok(v)?;
            expect_eq(v, "log_dirs", 1)?;
            expect_str(v, "errors", "")?;
            expect_true(v, "partition0_has_data")?;
            expect_eq(v, "partition1_size", 0)?;
            expect_eq(v, "offset_lag", 0)?;
            expect_true(v, "current_log")?;
            // Apache Kafka and our broker on disk know the volume's sizes;
            // our broker in memory (as here) has none to give.
            match v.get("volumes").and_then(Value::as_str) {
                Some("consistent" | "unknown") => {}
                other => return Err(format!("volumes: {other:?}")),
            }
            expect_true(v, "replica_dir_known")?;
            expect_eq(v, "replica_offset_lag", 0)?;
            expect_true(v, "replica_future_dir_absent")
        },
        timeout: t60,
    });
    // kafka-reassign-partitions.sh and kafka-leader-election.sh on one node.
    out.push(Scenario {
        client: "java-admin",
        feature: "partition reassignments and leader elections on one node",
        runner: Runner::Java,
        args: j(&["reassign-elect", "--topic", "interop-reassign-elect"]),
        output: Output::ResultLine,
        needs: &[],
        embedded_gap: None,
        // Apache Kafka 4.4's answers, class and message (the topic and the
        // broker ids written T, SELF and OTHER).
        verify: |v| {
            ok(v)?;
            const INVALID: &str =
                "InvalidReplicaAssignmentException: The manual partition assignment includes";
            expect_eq(v, "list_all", 0)?;
            expect_eq(v, "list_one", 0)?;
            expect_str(v, "list_missing", "none")?;
            expect_str(v, "list_beyond", "none")?;
            expect_str(v, "reassign_same", "none")?;
            expect_str(
                v,
                "reassign_unknown_broker",
                &format!("{INVALID} broker OTHER, but no such broker is registered."),
            )?;
            expect_str(
                v,
                "reassign_two_replicas",
                &format!("{INVALID} broker OTHER, but no such broker is registered."),
            )?;
            expect_str(
                v,
                "reassign_duplicate",
                &format!("{INVALID} the broker SELF more than once."),
            )?;
            expect_str(
                v,
                "cancel",
                "NoReassignmentInProgressException: No partition reassignment is in progress.",
            )?;
            expect_str(
                v,
                "reassign_missing",
                "UnknownTopicOrPartitionException: Unable to find a topic named T-missing.",
            )?;
            expect_str(
                v,
                "reassign_beyond",
                "UnknownTopicOrPartitionException: Unable to find partition T:7.",
            )?;
            expect_eq(v, "list_after", 0)?;
            const NOT_NEEDED: &str =
                "ElectionNotNeededException: Leader election not needed for topic partition.";
            expect_str(v, "elect_preferred", NOT_NEEDED)?;
            expect_str(v, "elect_unclean", NOT_NEEDED)?;
            expect_str(
                v,
                "elect_missing",
                "UnknownTopicOrPartitionException: No such topic as T-missing",
            )?;
            expect_str(
                v,
                "elect_beyond",
                "UnknownTopicOrPartitionException: No such partition as T-7",
            )?;
            expect_eq(v, "elect_all_results", 0)
        },
        timeout: t60,
    });
    // KIP-320: a consumer checks a position that carries a leader epoch
    // before it fetches from it.
    out.push(Scenario {
        client: "java-consumer",
        feature: "position checked against its leader epoch (OffsetForLeaderEpoch)",
        runner: Runner::Java,
        args: j(&["leader-epoch", "--topic", "interop-leader-epoch"]),
        output: Output::ResultLine,
        needs: &[OFFSET_FOR_LEADER_EPOCH],
        embedded_gap: None,
        verify: |v| {
            ok(v)?;
            expect_str(v, "valid_seek", "offset 4")?;
            // Without the check these would be OffsetOutOfRangeException
            // and "offset 0" (reset to the earliest).
            expect_str(
                v,
                "past_end_no_reset",
                "LogTruncationException divergent 10@0",
            )?;
            expect_str(v, "past_end_reset_earliest", "position 10")?;
            expect_str(v, "committed_resume", "offset 6")
        },
        timeout: t60,
    });
    // KIP-848's group configs of a consumer group.
    out.push(Scenario {
        client: "java-admin",
        feature: "consumer group configs: set, describe, refuse out of range, delete",
        runner: Runner::Java,
        args: j(&["group-configs", "--group", "interop-group-configs"]),
        output: Output::ResultLine,
        needs: &[],
        embedded_gap: None,
        verify: |v| {
            ok(v)?;
            expect_str(v, "heartbeat", "15000")?;
            expect_str(v, "heartbeat_source", "DYNAMIC_GROUP_CONFIG")?;
            expect_str(v, "session", "60000")?;
            expect_str(v, "out_of_range", "InvalidConfigurationException")?;
            expect_str(v, "heartbeat_after_delete", "5000")
        },
        timeout: t60,
    });
    // KIP-1222: the first record is acknowledged RENEW (IsRenewAck), comes
    // back in a later poll still at delivery count 1, and is ACCEPTed; the
    // same 300 records, a third share group.
    out.push(Scenario {
        client: "java-share-consumer",
        feature: "RENEW acknowledgement, then ACCEPT (ShareAcknowledge v2)",
        runner: Runner::Java,
        args: j(&[
            "share-consume",
            "--topic",
            T_SHARE_ACQ,
            "--group",
            "interop-share-renew",
            "--mode",
            "explicit",
            "--renew-first",
            "--expect",
            &acquire_n,
        ]),
        output: Output::ResultLine,
        needs: &[SHARE_GROUP_HEARTBEAT, SHARE_FETCH, SHARE_ACKNOWLEDGE],
        embedded_gap: None,
        verify: |v| {
            ok(v)?;
            expect_eq(v, "received", ACQUIRE_RECORDS)?;
            expect_eq(v, "distinct", ACQUIRE_RECORDS)?;
            expect_eq(v, "commit_errors", 0)?;
            expect_true(v, "renew_returned")?;
            expect_eq(v, "renew_returned_delivery_count", 1)
        },
        timeout: t60,
    });
    // The renew gate (KIP-1240's share.renew.acknowledge.enable, default
    // true in Kafka's code): off for a fourth group, a RENEW fails its
    // partition with INVALID_RECORD_STATE.
    out.push(Scenario {
        client: "kafka-configs",
        feature: "alter group config share.renew.acknowledge.enable=false",
        runner: Runner::Java,
        args: configs(&[
            "--alter",
            "--entity-type",
            "groups",
            "--entity-name",
            "interop-share-renew-off",
            "--add-config",
            "share.renew.acknowledge.enable=false",
        ]),
        output: Output::Lines,
        needs: &[INCREMENTAL_ALTER_CONFIGS],
        embedded_gap: None,
        verify: |v| {
            if v["exit"] == 0 {
                Ok(())
            } else {
                Err(format!("exit {}: {}", v["exit"], v["last"]))
            }
        },
        timeout: t60,
    });
    let all_but_renewed = (ACQUIRE_RECORDS - 1).to_string();
    out.push(Scenario {
        client: "java-share-consumer",
        feature: "RENEW with share.renew.acknowledge.enable=false: INVALID_RECORD_STATE",
        runner: Runner::Java,
        args: j(&[
            "share-consume",
            "--topic",
            T_SHARE_ACQ,
            "--group",
            "interop-share-renew-off",
            "--mode",
            "explicit",
            "--renew-first",
            "--expect",
            &all_but_renewed,
        ]),
        output: Output::ResultLine,
        needs: &[SHARE_GROUP_HEARTBEAT, SHARE_FETCH, SHARE_ACKNOWLEDGE],
        embedded_gap: None,
        verify: |v| {
            ok(v)?;
            if field_i64(v, "commit_errors") < 1 {
                return Err("the RENEW was not refused".into());
            }
            let e = v["commit_error"].as_str().unwrap_or("");
            if !e.contains("InvalidRecordState") {
                return Err(format!("refused with {e:?}, not INVALID_RECORD_STATE"));
            }
            Ok(())
        },
        timeout: t60,
    });
    let perf_n = PERF_RECORDS.to_string();
    // kafka-delete-records reads its offsets from a file; offset 0 keeps
    // every record for the rows that read this topic later.
    let delete_json = std::env::temp_dir().join(format!(
        "sharestream-interop-delete-{}-{}.json",
        std::process::id(),
        b.replace([':', '.'], "_")
    ));
    std::fs::write(
        &delete_json,
        format!(
            r#"{{"version":1,"partitions":[{{"topic":"{T_PERF}","partition":0,"offset":0}}]}}"#
        ),
    )
    .expect("writing the delete-records offsets file");
    let delete_json = delete_json.to_string_lossy().into_owned();
    out.extend([
        Scenario {
            client: "kafka-producer-perf-test",
            feature: "2000 records, acks=all",
            runner: Runner::Java,
            args: vec![
                "org.apache.kafka.tools.ProducerPerformance".into(),
                "--topic".into(),
                T_PERF.into(),
                "--num-records".into(),
                perf_n.clone(),
                "--record-size".into(),
                "100".into(),
                "--throughput".into(),
                "-1".into(),
                "--producer-props".into(),
                format!("bootstrap.servers={b}"),
                "acks=all".into(),
            ],
            output: Output::Lines,
            needs: &[],
            embedded_gap: None,
            verify: |v| {
                let last = v["last"].as_str().unwrap_or("");
                if last.starts_with(&format!("{PERF_RECORDS} records sent")) {
                    Ok(())
                } else {
                    Err(format!("summary line: {last:?}"))
                }
            },
            timeout: t60,
        },
        Scenario {
            client: "kafka-console-consumer",
            feature: "--partition 0 --offset earliest (no group)",
            runner: Runner::Java,
            args: vec![
                "org.apache.kafka.tools.consumer.ConsoleConsumer".into(),
                "--bootstrap-server".into(),
                b.into(),
                "--topic".into(),
                T_PERF.into(),
                "--partition".into(),
                "0".into(),
                "--offset".into(),
                "earliest".into(),
                "--max-messages".into(),
                perf_n.clone(),
                "--timeout-ms".into(),
                "20000".into(),
            ],
            output: Output::Lines,
            needs: &[],
            embedded_gap: None,
            verify: |v| expect_eq(v, "lines", PERF_RECORDS),
            timeout: t60,
        },
        Scenario {
            client: "kafka-configs",
            feature: "alter group config share.auto.offset.reset",
            runner: Runner::Java,
            args: configs(&["--alter", "--entity-type", "groups", "--entity-name", "interop-console-share", "--add-config", "share.auto.offset.reset=earliest"]),
            output: Output::Lines,
            needs: &[INCREMENTAL_ALTER_CONFIGS],
            embedded_gap: None,
            verify: |v| {
                if v["exit"] == 0 {
                    Ok(())
                } else {
                    Err(format!("exit {}: {}", v["exit"], v["last"]))
                }
            },
            timeout: t60,
        },
        Scenario {
            client: "kafka-configs",
            feature: "alter topic configs retention.ms, max.message.bytes",
            runner: Runner::Java,
            args: configs(&["--alter", "--entity-type", "topics", "--entity-name", T_PERF, "--add-config", "retention.ms=86400000,max.message.bytes=2000000"]),
            output: Output::Lines,
            needs: &[INCREMENTAL_ALTER_CONFIGS],
            embedded_gap: None,
            verify: |v| tool_last_line(v, "Completed updating config for topic"),
            timeout: t60,
        },
        // Client quotas with the tool (KIP-546's AlterClientQuotas and
        // DescribeClientQuotas): set on a client id, described, deleted.
        Scenario {
            client: "kafka-configs",
            feature: "alter client quotas producer_byte_rate, consumer_byte_rate",
            runner: Runner::Java,
            args: configs(&["--alter", "--entity-type", "clients", "--entity-name", "interop-tool-quota", "--add-config", "producer_byte_rate=1048576,consumer_byte_rate=2097152"]),
            output: Output::Lines,
            needs: &[],
            embedded_gap: None,
            verify: |v| tool_last_line(v, "Completed updating config for client interop-tool-quota."),
            timeout: t60,
        },
        Scenario {
            client: "kafka-configs",
            feature: "describe client quotas (after the alter above)",
            runner: Runner::Java,
            args: configs(&["--describe", "--entity-type", "clients", "--entity-name", "interop-tool-quota"]),
            output: Output::Lines,
            needs: &[],
            embedded_gap: None,
            verify: |v| {
                tool_last_line(v, "Quota configs for client-id 'interop-tool-quota' are ")?;
                let last = v["last"].as_str().unwrap_or("");
                for want in ["consumer_byte_rate=2097152.0", "producer_byte_rate=1048576.0"] {
                    if !last.contains(want) {
                        return Err(format!("{want} missing from {last:?}"));
                    }
                }
                Ok(())
            },
            timeout: t60,
        },
        Scenario {
            client: "kafka-configs",
            feature: "delete client quotas (after the alter above)",
            runner: Runner::Java,
            args: configs(&["--alter", "--entity-type", "clients", "--entity-name", "interop-tool-quota", "--delete-config", "producer_byte_rate,consumer_byte_rate"]),
            output: Output::Lines,
            needs: &[],
            embedded_gap: None,
            verify: |v| tool_last_line(v, "Completed updating config for client interop-tool-quota."),
            timeout: t60,
        },
        // KIP-612: a connection rate on one address (no scenario connects
        // from 127.0.0.2), described, deleted.
        Scenario {
            client: "kafka-configs",
            feature: "alter ip quota connection_creation_rate",
            runner: Runner::Java,
            args: configs(&[
                "--alter",
                "--entity-type",
                "ips",
                "--entity-name",
                "127.0.0.2",
                "--add-config",
                "connection_creation_rate=10",
            ]),
            output: Output::Lines,
            needs: &[],
            embedded_gap: None,
            verify: |v| tool_last_line(v, "Completed updating config for ip 127.0.0.2."),
            timeout: t60,
        },
        Scenario {
            client: "kafka-configs",
            feature: "describe ip quotas (after the alter above)",
            runner: Runner::Java,
            args: configs(&["--describe", "--entity-type", "ips", "--entity-name", "127.0.0.2"]),
            output: Output::Lines,
            needs: &[],
            embedded_gap: None,
            verify: |v| {
                tool_last_line(
                    v,
                    "Quota configs for ip '127.0.0.2' are connection_creation_rate=10.0",
                )
            },
            timeout: t60,
        },
        Scenario {
            client: "kafka-configs",
            feature: "delete ip quotas (after the alter above)",
            runner: Runner::Java,
            args: configs(&[
                "--alter",
                "--entity-type",
                "ips",
                "--entity-name",
                "127.0.0.2",
                "--delete-config",
                "connection_creation_rate",
            ]),
            output: Output::Lines,
            needs: &[],
            embedded_gap: None,
            verify: |v| tool_last_line(v, "Completed updating config for ip 127.0.0.2."),
            timeout: t60,
        },
        Scenario {
            client: "kafka-delete-records",
            feature: "--offset-json-file (partition 0, offset 0)",
            runner: Runner::Java,
            args: vec![
                "org.apache.kafka.tools.DeleteRecordsCommand".into(),
                "--bootstrap-server".into(),
                b.into(),
                "--offset-json-file".into(),
                delete_json.clone(),
            ],
            output: Output::Lines,
            needs: &[DELETE_RECORDS],
            embedded_gap: None,
            verify: |v| tool_last_line(v, "partition: interop-perf-0\tlow_watermark: 0"),
            timeout: t60,
        },
        Scenario {
            client: "kafka-transactions",
            feature: "list",
            runner: Runner::Java,
            args: vec![
                "org.apache.kafka.tools.TransactionsCommand".into(),
                "--bootstrap-server".into(),
                b.into(),
                "list".into(),
            ],
            output: Output::Lines,
            needs: &[LIST_TRANSACTIONS],
            embedded_gap: None,
            verify: |v| {
                if v["exit"] == 0 && v["lines"].as_u64().unwrap_or(0) >= 1 {
                    Ok(())
                } else {
                    Err(format!("exit {}: {}", v["exit"], v["last"]))
                }
            },
            timeout: t60,
        },
        Scenario {
            client: "kafka-transactions",
            feature: "describe-producers (partition 0)",
            runner: Runner::Java,
            args: vec![
                "org.apache.kafka.tools.TransactionsCommand".into(),
                "--bootstrap-server".into(),
                b.into(),
                "describe-producers".into(),
                "--topic".into(),
                T_PERF.into(),
                "--partition".into(),
                "0".into(),
            ],
            output: Output::Lines,
            needs: &[DESCRIBE_PRODUCERS],
            embedded_gap: None,
            verify: |v| {
                if v["exit"] == 0 {
                    Ok(())
                } else {
                    Err(format!("exit {}: {}", v["exit"], v["last"]))
                }
            },
            timeout: t60,
        },
        // A hanging transaction (issue #17): a Java producer halted in the
        // middle of a transaction; find-hanging, abort (WriteTxnMarkers to
        // the partition leader) and describe-producers on it.
        Scenario {
            client: "java-producer",
            feature: "transaction left open: producer halted without commit or abort",
            runner: Runner::Java,
            args: vec![
                "dev.sharestream.interop.TxnHang".into(),
                "--bootstrap".into(),
                b.into(),
                "--topic".into(),
                T_TXN_HANG.into(),
                "--transactional-id".into(),
                "interop-txn-hang".into(),
            ],
            output: Output::ResultLine,
            needs: &[],
            embedded_gap: None,
            verify: |v| {
                ok(v)?;
                expect_eq(v, "start_offset", 0)
            },
            timeout: t60,
        },
        Scenario {
            client: "kafka-transactions",
            feature: "find-hanging --max-transaction-timeout 0: the open transaction is its coordinator's, so not hanging",
            runner: Runner::Java,
            args: transactions_tool(
                b,
                &["find-hanging", "--topic", T_TXN_HANG, "--max-transaction-timeout", "0"],
            ),
            output: Output::Text,
            needs: &[DESCRIBE_PRODUCERS, LIST_TRANSACTIONS],
            embedded_gap: None,
            verify: |v| {
                let text = v["text"].as_str().unwrap_or("");
                let header = text.lines().any(|l| l.starts_with("Topic"));
                let rows = text.lines().filter(|l| l.starts_with(T_TXN_HANG)).count();
                if v["exit"] == 0 && header && rows == 0 {
                    Ok(())
                } else {
                    Err(format!("exit {}: {:?} {:?}", v["exit"], text.trim(), v["stderr"]))
                }
            },
            timeout: t60,
        },
        Scenario {
            client: "kafka-transactions",
            feature: "abort --start-offset of the open transaction (WriteTxnMarkers to the partition leader)",
            runner: Runner::Java,
            args: transactions_tool(
                b,
                &["abort", "--topic", T_TXN_HANG, "--partition", "0", "--start-offset", "0"],
            ),
            output: Output::Text,
            needs: &[DESCRIBE_PRODUCERS, WRITE_TXN_MARKERS],
            embedded_gap: None,
            verify: |v| {
                if v["exit"] == 0 {
                    Ok(())
                } else {
                    Err(format!("exit {}: {} {:?}", v["exit"], v["last"], v["stderr"]))
                }
            },
            timeout: t60,
        },
        Scenario {
            client: "kafka-transactions",
            feature: "describe-producers after abort: no open transaction left",
            runner: Runner::Java,
            args: transactions_tool(
                b,
                &["describe-producers", "--topic", T_TXN_HANG, "--partition", "0"],
            ),
            output: Output::Text,
            needs: &[DESCRIBE_PRODUCERS, WRITE_TXN_MARKERS],
            embedded_gap: None,
            verify: |v| {
                // ProducerId ProducerEpoch LatestCoordinatorEpoch
                // LastSequence LastTimestamp CurrentTransactionStartOffset
                let text = v["text"].as_str().unwrap_or("");
                let open: Vec<&str> = text
                    .lines()
                    .skip(1)
                    .filter_map(|l| l.split_whitespace().last())
                    .collect();
                if v["exit"] == 0 && !open.is_empty() && open.iter().all(|o| *o == "None" || *o == "-1") {
                    Ok(())
                } else {
                    Err(format!("exit {}: {:?}", v["exit"], text.trim()))
                }
            },
            timeout: t60,
        },
        Scenario {
            client: "kafka-console-share-consumer",
            feature: "share group read of 2000 records",
            runner: Runner::Java,
            args: vec![
                "org.apache.kafka.tools.consumer.ConsoleShareConsumer".into(),
                "--bootstrap-server".into(),
                b.into(),
                "--topic".into(),
                T_PERF.into(),
                "--group".into(),
                "interop-console-share".into(),
                "--max-messages".into(),
                perf_n.clone(),
                "--timeout-ms".into(),
                "20000".into(),
            ],
            output: Output::Lines,
            // Reading from the start needs the group config set above.
            needs: &[
                SHARE_GROUP_HEARTBEAT,
                SHARE_FETCH,
                SHARE_ACKNOWLEDGE,
                INCREMENTAL_ALTER_CONFIGS,
            ],
            embedded_gap: None,
            verify: |v| expect_eq(v, "lines", PERF_RECORDS),
            timeout: t60,
        },
        Scenario {
            client: "VerifiableShareConsumer",
            feature: "earliest reset, sync acks, 2000 records",
            runner: Runner::Java,
            args: vec![
                "org.apache.kafka.tools.VerifiableShareConsumer".into(),
                "--bootstrap-server".into(),
                b.into(),
                "--topic".into(),
                T_PERF.into(),
                "--group-id".into(),
                "interop-verifiable-share".into(),
                "--max-messages".into(),
                perf_n,
                "--acknowledgement-mode".into(),
                "sync".into(),
                "--offset-reset-strategy".into(),
                "earliest".into(),
            ],
            output: Output::VerifiableShare,
            needs: &[
                SHARE_GROUP_HEARTBEAT,
                SHARE_FETCH,
                SHARE_ACKNOWLEDGE,
                INCREMENTAL_ALTER_CONFIGS,
            ],
            embedded_gap: None,
            verify: |v| {
                expect_eq(v, "consumed", PERF_RECORDS)?;
                expect_eq(v, "acknowledged", PERF_RECORDS)?;
                expect_true(v, "shutdown_complete")
            },
            timeout: t60,
        },
    ]);
    // kafka-share-groups.sh --describe --offsets: the share group that read
    // all 2000 records of the perf topic; KIP-1226's LAG column (Kafka 4.3+
    // asks DescribeShareGroupOffsets v1) is 0.
    out.push(Scenario {
        client: "kafka-share-groups",
        feature: "--describe --offsets: start offset and lag (KIP-1226)",
        runner: Runner::Java,
        args: vec![
            "org.apache.kafka.tools.consumer.group.ShareGroupCommand".into(),
            "--bootstrap-server".into(),
            b.into(),
            "--describe".into(),
            "--group".into(),
            "interop-console-share".into(),
            "--offsets".into(),
        ],
        output: Output::Lines,
        needs: &[SHARE_GROUP_DESCRIBE, DESCRIBE_SHARE_GROUP_OFFSETS],
        embedded_gap: None,
        verify: |v| {
            let last = v["last"].as_str().unwrap_or("");
            let cols: Vec<&str> = last.split_whitespace().collect();
            if v["exit"] != 0 || cols.first() != Some(&"interop-console-share") {
                return Err(format!("exit {}: {last:?}", v["exit"]));
            }
            match cols.last() {
                Some(&"0") => Ok(()),
                other => Err(format!("lag column {other:?}, expected 0: {last:?}")),
            }
        },
        timeout: t60,
    });
    let p = |extra: &[&str]| -> Vec<String> {
        let mut v = s(extra);
        v.extend(s(&["--bootstrap", b]));
        v
    };
    out.extend([
        Scenario {
            client: "confluent-kafka-python",
            feature: "transaction commit",
            runner: Runner::Python,
            args: p(&[
                "produce-txn",
                "--topic",
                T_PY,
                "--txn-id",
                "py-txn",
                "--count",
                "10",
            ]),
            output: Output::ResultLine,
            needs: &[],
            embedded_gap: None,
            verify: |v| {
                ok(v)?;
                expect_eq(v, "delivery_errors", 0)
            },
            timeout: t60,
        },
        Scenario {
            client: "confluent-kafka-python",
            feature: "transaction abort",
            runner: Runner::Python,
            args: p(&[
                "produce-txn",
                "--topic",
                T_PY,
                "--txn-id",
                "py-txn",
                "--count",
                "10",
                "--abort",
                "--prefix",
                "aborted",
            ]),
            output: Output::ResultLine,
            needs: &[],
            embedded_gap: None,
            verify: |v| {
                ok(v)?;
                expect_eq(v, "delivery_errors", 0)
            },
            timeout: t60,
        },
        Scenario {
            client: "confluent-kafka-python",
            feature: "read_committed (assign mode)",
            runner: Runner::Python,
            args: p(&["consume", "--topic", T_PY, "--expect", "10"]),
            output: Output::ResultLine,
            needs: &[],
            embedded_gap: None,
            verify: |v| {
                ok(v)?;
                expect_eq(v, "received", 10)?;
                if prefix_count(v, "aborted") != 0 {
                    return Err("aborted records were delivered".into());
                }
                Ok(())
            },
            timeout: t60,
        },
        Scenario {
            client: "confluent-kafka-python",
            feature: "subscribe (consumer group), commit, resume",
            runner: Runner::Python,
            args: p(&[
                "subscribe",
                "--topic",
                T_PY,
                "--group",
                "interop-py-cg",
                "--expect",
                "10",
            ]),
            output: Output::ResultLine,
            needs: &[JOIN_GROUP, OFFSET_FETCH],
            embedded_gap: None,
            verify: |v| {
                ok(v)?;
                expect_eq(v, "received", 10)?;
                expect_eq(v, "after_commit", 0)
            },
            timeout: t60,
        },
        Scenario {
            client: "confluent-kafka-python",
            feature: "ShareConsumer (implicit acks)",
            runner: Runner::Python,
            args: p(&[
                "share-consume",
                "--topic",
                T_PY_SHARE,
                "--group",
                "interop-py-share",
                "--produce",
                "30",
            ]),
            output: Output::ResultLine,
            needs: &[SHARE_GROUP_HEARTBEAT, SHARE_FETCH, SHARE_ACKNOWLEDGE],
            embedded_gap: None,
            verify: |v| {
                ok(v)?;
                expect_eq(v, "distinct", 30)
            },
            timeout: t60,
        },
        // Issue #18, found with librdkafka: close() sends the leave and the
        // final acknowledgements at once; the acknowledged records must not
        // come back to the next member (D18).
        Scenario {
            client: "confluent-kafka-python",
            feature: "ShareConsumer close with pending explicit acks: nothing redelivered",
            runner: Runner::Python,
            args: p(&[
                "share-close-pending",
                "--topic",
                T_PY_CLOSE,
                "--group",
                "interop-py-close",
                "--produce",
                "20",
            ]),
            output: Output::ResultLine,
            needs: &[SHARE_GROUP_HEARTBEAT, SHARE_FETCH, SHARE_ACKNOWLEDGE],
            embedded_gap: None,
            verify: |v| {
                ok(v)?;
                expect_eq(v, "received", 20)?;
                expect_eq(v, "after_close", 0)
            },
            timeout: t60,
        },
        Scenario {
            client: "kcat",
            feature: "produce 20 records (-P)",
            runner: Runner::Kcat,
            args: s(&["-b", b, "-P", "-t", T_KCAT]),
            output: Output::Lines,
            needs: &[],
            embedded_gap: None,
            verify: |v| {
                if v["exit"] == 0 {
                    Ok(())
                } else {
                    Err(format!("exit {}", v["exit"]))
                }
            },
            timeout: t60,
        },
        Scenario {
            client: "kcat",
            feature: "consume from beginning (-C -e)",
            runner: Runner::Kcat,
            args: s(&["-b", b, "-C", "-t", T_KCAT, "-o", "beginning", "-e", "-q"]),
            output: Output::Lines,
            needs: &[],
            embedded_gap: None,
            verify: |v| expect_eq(v, "lines", 20),
            timeout: t60,
        },
        Scenario {
            client: "kcat",
            feature: "consumer group (-G), from the beginning",
            runner: Runner::Kcat,
            args: s(&[
                "-b",
                b,
                "-G",
                "interop-kcat-g",
                T_KCAT,
                "-o",
                "beginning",
                "-e",
                "-q",
            ]),
            output: Output::Lines,
            needs: &[JOIN_GROUP, OFFSET_FETCH],
            embedded_gap: None,
            verify: |v| expect_eq(v, "lines", 20),
            timeout: t60,
        },
        Scenario {
            client: "kcat",
            feature: "consumer group (-G) again: resumes at its committed offsets",
            runner: Runner::Kcat,
            args: s(&["-b", b, "-G", "interop-kcat-g", T_KCAT, "-e", "-q"]),
            output: Output::Lines,
            needs: &[JOIN_GROUP, OFFSET_FETCH],
            embedded_gap: None,
            verify: |v| expect_eq(v, "lines", 0),
            timeout: t60,
        },
    ]);
    out.extend(consumer_perf_scenarios(b));
    out.extend(streams::scenarios(b));
    // Last: they reset, then delete, the console share consumer's group.
    out.extend(share_groups_tool::scenarios(b));
    out
}

/// `kafka-consumer-perf-test` (ConsumerPerformance) in a consumer group,
/// with each group protocol, reading the 2000 records of `T_PERF`.
fn consumer_perf_scenarios(b: &str) -> Vec<Scenario> {
    let run = |group: &str, protocol: &str| -> Vec<String> {
        let mut v = s(&[
            "org.apache.kafka.tools.ConsumerPerformance",
            "--bootstrap-server",
            b,
            "--topic",
            T_PERF,
            "--group",
            group,
            "--num-records",
            &PERF_RECORDS.to_string(),
            "--timeout",
            "30000",
        ]);
        v.extend(s(&[
            "--command-property",
            &format!("group.protocol={protocol}"),
        ]));
        v
    };
    // The tool exits 0 even when it gives up early: the data line
    // ("start, end, MB, MB.sec, nMsg, ...") must count every record.
    let all_consumed: Verify = |v| {
        let last = v["last"].as_str().unwrap_or("");
        let n = last.split(',').nth(4).map(str::trim).unwrap_or("");
        if v["exit"] == 0 && n == PERF_RECORDS.to_string() {
            Ok(())
        } else {
            Err(format!("exit {}: last line {last:?}", v["exit"]))
        }
    };
    let t60 = Duration::from_secs(60);
    vec![
        Scenario {
            client: "kafka-consumer-perf-test",
            feature: "2000 records in a consumer group (group.protocol=classic)",
            runner: Runner::Java,
            args: run("interop-perf-classic", "classic"),
            output: Output::Lines,
            needs: &[JOIN_GROUP, OFFSET_FETCH],
            embedded_gap: None,
            verify: all_consumed,
            timeout: t60,
        },
        Scenario {
            client: "kafka-consumer-perf-test",
            feature: "2000 records in a consumer group (group.protocol=consumer)",
            runner: Runner::Java,
            args: run("interop-perf-consumer", "consumer"),
            output: Output::Lines,
            needs: &[CONSUMER_GROUP_HEARTBEAT],
            embedded_gap: None,
            verify: all_consumed,
            timeout: t60,
        },
    ]
}

/// Advertised API keys, asked with ApiVersions v3.
async fn advertised_apis(bootstrap: &str) -> BTreeSet<i16> {
    let addr = tokio::net::lookup_host(bootstrap)
        .await
        .expect("resolve bootstrap")
        .next()
        .expect("an address");
    let mut c = RawClient::connect(addr).await;
    let req = ApiVersionsRequest::default()
        .with_client_software_name(StrBytes::from_static_str("sharestream-interop"))
        .with_client_software_version(StrBytes::from_static_str("1"));
    let resp = c.send(&req, 3).await;
    resp.api_keys.iter().map(|k| k.api_key).collect()
}

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Runs one scenario; returns its JSON (never panics on client failure).
async fn run(sc: &Scenario, log: &Path) -> Value {
    let cp = std::env::var("SHARESTREAM_INTEROP_CP").unwrap_or_default();
    let mut cmd = match sc.runner {
        Runner::Java => {
            let mut c = tokio::process::Command::new(
                std::env::var("SHARESTREAM_INTEROP_JAVA").unwrap_or_else(|_| "java".into()),
            );
            c.args([
                "-Xms32m",
                "-Xmx256m",
                "-XX:+UseSerialGC",
                "-XX:TieredStopAtLevel=1",
            ]);
            if let Ok(l) = std::env::var("SHARESTREAM_INTEROP_LOG4J") {
                c.arg(format!("-Dlog4j2.configurationFile={l}"));
            }
            c.arg("-cp").arg(&cp);
            c
        }
        Runner::Python => {
            let mut c = tokio::process::Command::new(
                std::env::var("SHARESTREAM_INTEROP_PYTHON").expect("checked by caller"),
            );
            c.arg(repo_root().join("interop/python/check.py"));
            c
        }
        Runner::Kcat => tokio::process::Command::new(
            std::env::var("SHARESTREAM_INTEROP_KCAT").expect("checked by caller"),
        ),
    };
    cmd.args(&sc.args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(
            std::fs::File::create(log).expect("create scenario log"),
        ))
        .kill_on_drop(true);
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return json!({"ok": false, "error": format!("spawn: {e}"), "exit": -1}),
    };
    let mut stdin = child.stdin.take().expect("piped stdin");
    if sc.runner == Runner::Kcat && sc.args.iter().any(|a| a == "-P") {
        use tokio::io::AsyncWriteExt;
        let lines: String = (0..20).map(|i| format!("kcat-{i}\n")).collect();
        let _ = stdin.write_all(lines.as_bytes()).await;
    }
    drop(stdin);
    let mut stdout = child.stdout.take().expect("piped stdout");
    let mut text = String::new();
    let waited = tokio::time::timeout(sc.timeout, async {
        let _ = stdout.read_to_string(&mut text).await;
        child.wait().await
    })
    .await;
    let exit = match waited {
        Ok(Ok(status)) => status.code().unwrap_or(-1),
        Ok(Err(e)) => return json!({"ok": false, "error": format!("wait: {e}"), "exit": -1}),
        Err(_) => {
            let _ = child.kill().await;
            return json!({"ok": false, "error": format!("timed out after {:?}", sc.timeout),
                          "exit": -1, "lines": text.lines().count()});
        }
    };
    let mut v = match sc.output {
        Output::ResultLine => text
            .lines()
            .rev()
            .find_map(|l| l.strip_prefix("RESULT "))
            .and_then(|l| serde_json::from_str(l).ok())
            .unwrap_or_else(|| json!({"ok": false, "error": "no RESULT line"})),
        Output::Lines => json!({
            "lines": text.lines().count(),
            // The last line with text (tools end with a blank line).
            "last": text.lines().rfind(|l| !l.trim().is_empty()).unwrap_or(""),
        }),
        Output::Text => json!({
            "lines": text.lines().count(),
            "last": text.lines().rfind(|l| !l.trim().is_empty()).unwrap_or(""),
            "text": text,
            // Tools print some verdicts to stderr (the scenario's log).
            "stderr": std::fs::read_to_string(log).unwrap_or_default(),
        }),
        Output::VerifiableShare => {
            let (mut consumed, mut acked, mut done) = (0i64, 0i64, false);
            for l in text.lines() {
                let Ok(e) = serde_json::from_str::<Value>(l) else {
                    continue;
                };
                match e["name"].as_str() {
                    Some("records_consumed") => consumed += field_i64(&e, "count").max(0),
                    Some("offsets_acknowledged") => acked += field_i64(&e, "count").max(0),
                    Some("shutdown_complete") => done = true,
                    _ => {}
                }
            }
            json!({"consumed": consumed, "acknowledged": acked, "shutdown_complete": done})
        }
        Output::VerifiableEvents => streams::verifiable_summary(&text),
    };
    v["exit"] = json!(exit);
    v
}

/// Starts the embedded broker unless an external one is named.
async fn backend() -> (String, String, Option<BrokerHandle>) {
    if let Ok(b) = std::env::var("SHARESTREAM_INTEROP_BOOTSTRAP") {
        let name =
            std::env::var("SHARESTREAM_INTEROP_BACKEND").unwrap_or_else(|_| "external".into());
        return (name, b, None);
    }
    let config = BrokerConfig {
        auto_create_topics: true,
        ..BrokerConfig::in_memory()
    };
    let handle = Broker::start(config).await.expect("start embedded broker");
    (
        "sharestream-embedded".into(),
        handle.bootstrap_servers(),
        Some(handle),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Apache Kafka's jars and clients (SHARESTREAM_INTEROP_CP): run scripts/interop.sh"]
async fn real_clients_against_broker() {
    assert!(
        std::env::var("SHARESTREAM_INTEROP_CP").is_ok(),
        "SHARESTREAM_INTEROP_CP is not set: run scripts/interop.sh, which fetches Apache Kafka \
         and builds the check programs"
    );
    let out_dir = repo_root().join("target/interop");
    std::fs::create_dir_all(out_dir.join("logs")).unwrap();
    if std::env::var("RUST_LOG").is_ok() {
        let file = std::fs::File::create(out_dir.join("embedded-broker.log")).unwrap();
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::sync::Mutex::new(file))
            .with_ansi(false)
            .try_init();
    }
    let (name, bootstrap, handle) = backend().await;
    let embedded = handle.is_some();
    let apis = advertised_apis(&bootstrap).await;
    let python = std::env::var("SHARESTREAM_INTEROP_PYTHON").ok();
    let kcat = std::env::var("SHARESTREAM_INTEROP_KCAT").ok();
    let only = std::env::var("SHARESTREAM_INTEROP_ONLY").ok();
    let mut rows = Vec::new();
    let mut failures = Vec::new();
    for (i, sc) in scenarios(&bootstrap).into_iter().enumerate() {
        // SHARESTREAM_INTEROP_ONLY: `|`-separated parts of the clients or
        // features to run.
        if let Some(o) = &only
            && !o
                .split('|')
                .any(|part| sc.client.contains(part) || sc.feature.contains(part))
        {
            continue;
        }
        let missing_tool = match sc.runner {
            Runner::Python if python.is_none() => {
                Some("SHARESTREAM_INTEROP_PYTHON not set (confluent-kafka not installed)")
            }
            Runner::Kcat if kcat.is_none() => Some("kcat not installed"),
            _ => None,
        };
        let started = Instant::now();
        let (status, detail, result) = if let Some(why) = missing_tool {
            ("skip", why.to_string(), Value::Null)
        } else {
            let log = out_dir.join(format!("logs/{name}-{i:02}-{}.log", sc.client));
            let v = run(&sc, &log).await;
            match (sc.verify)(&v) {
                Ok(()) => ("pass", String::new(), v),
                Err(e) => {
                    let missing: Vec<String> = sc
                        .needs
                        .iter()
                        .filter(|k| !apis.contains(k))
                        .map(|k| format!("{} (key {k})", api_name(*k)))
                        .collect();
                    if !missing.is_empty() {
                        let why = format!("broker does not serve {}", missing.join(", "));
                        ("gap", format!("{why}; client saw: {e}"), v)
                    } else if let (true, Some(why)) = (embedded, sc.embedded_gap) {
                        ("gap", format!("{why}; client saw: {e}"), v)
                    } else {
                        failures.push(format!("{} / {}: {e}", sc.client, sc.feature));
                        ("fail", e, v)
                    }
                }
            }
        };
        let secs = started.elapsed().as_secs_f64();
        println!(
            "interop [{name}] {status:4} {} / {} ({secs:.1}s) {detail}",
            sc.client, sc.feature
        );
        rows.push(json!({
            "client": sc.client,
            "feature": sc.feature,
            "status": status,
            "detail": detail,
            "seconds": (secs * 10.0).round() / 10.0,
            "result": result,
        }));
    }
    if let Some(h) = handle {
        h.shutdown().await;
    }
    let matrix = json!({
        "backend": name,
        "advertised_api_keys": apis,
        "rows": rows,
    });
    if only.is_none() {
        std::fs::write(
            out_dir.join(format!("matrix-{name}.json")),
            serde_json::to_string_pretty(&matrix).unwrap(),
        )
        .unwrap();
    }
    assert!(
        failures.is_empty(),
        "interop failures against {name}:\n{}",
        failures.join("\n")
    );
}
