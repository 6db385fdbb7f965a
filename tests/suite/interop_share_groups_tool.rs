//! `kafka-share-groups.sh` (ShareGroupCommand) rows of the interop suite
//! (issue #17): every command of the tool, against the share group the
//! console share consumer left Empty after reading the 2000 records of
//! `interop-perf` (one partition). The rows run in order and each checks
//! the tool's own table: list, describe (members, state, offsets), reset
//! offsets (dry run, then execute to earliest, to an offset, to a date
//! time, to latest, each followed by what describe shows), delete offsets,
//! delete the group.

use super::{
    DELETE_GROUPS, DESCRIBE_SHARE_GROUP_OFFSETS, Output, PERF_RECORDS, Runner,
    SHARE_GROUP_DESCRIBE, SHARE_GROUP_HEARTBEAT, Scenario, T_PERF, Value, s,
};
use std::time::Duration;

/// The group of the `kafka-console-share-consumer` row.
pub(super) const GROUP: &str = "interop-console-share";

const LIST_GROUPS: i16 = 16;
const LIST_OFFSETS: i16 = 2;
const ALTER_SHARE_GROUP_OFFSETS: i16 = 91;
const DELETE_SHARE_GROUP_OFFSETS: i16 = 92;

/// `kafka-share-groups.sh --bootstrap-server b args...`
fn tool(b: &str, args: &[&str]) -> Vec<String> {
    let mut v = s(&[
        "org.apache.kafka.tools.consumer.group.ShareGroupCommand",
        "--bootstrap-server",
        b,
    ]);
    v.extend(s(args));
    v
}

/// The tool exited 0 and printed a line whose words begin with `words`.
pub(super) fn has_row(v: &Value, words: &[&str]) -> Result<(), String> {
    let text = v["text"].as_str().unwrap_or("");
    let found = text.lines().any(|l| {
        let got: Vec<&str> = l.split_whitespace().collect();
        got.len() >= words.len() && got[..words.len()] == *words
    });
    if v["exit"] == 0 && found {
        Ok(())
    } else {
        Err(format!(
            "exit {}: no line starting {words:?} in {:?}",
            v["exit"],
            text.trim()
        ))
    }
}

/// The tool exited 0 and printed a line holding `needle`, on stdout or
/// stderr (where the tool prints some verdicts).
fn has_text(v: &Value, needle: &str) -> Result<(), String> {
    let out = v["text"].as_str().unwrap_or("");
    let err = v["stderr"].as_str().unwrap_or("");
    if v["exit"] == 0 && out.lines().chain(err.lines()).any(|l| l.contains(needle)) {
        Ok(())
    } else {
        Err(format!(
            "exit {}: no {needle:?} in {:?} (stderr {:?})",
            v["exit"],
            out.trim(),
            err.trim()
        ))
    }
}

/// `--describe --offsets` shows partition 0 with a start offset above 0
/// (where the consumer's acknowledgements took it: all 2000 on our broker;
/// Kafka moves its persisted start offset lazily, e.g. 1790) and not
/// above 2000.
fn offsets_row_advanced(v: &Value) -> Result<(), String> {
    let text = v["text"].as_str().unwrap_or("");
    let found = text.lines().any(|l| {
        let w: Vec<&str> = l.split_whitespace().collect();
        w.len() >= 4
            && w[..3] == [GROUP, T_PERF, "0"]
            && w[3]
                .parse::<i64>()
                .is_ok_and(|o| o > 0 && o <= PERF_RECORDS)
    });
    if v["exit"] == 0 && found {
        Ok(())
    } else {
        Err(format!("exit {}: {:?}", v["exit"], text.trim()))
    }
}

/// What `--describe --offsets` shows for partition 0: the start offset,
/// and KIP-1226's lag (DescribeShareGroupOffsets v1): the records above it.
fn offsets_row(v: &Value, start: i64) -> Result<(), String> {
    let lag = (PERF_RECORDS - start).to_string();
    let start = start.to_string();
    has_row(v, &[GROUP, T_PERF, "0", &start, &lag])
}

pub(super) fn scenarios(b: &str) -> Vec<Scenario> {
    let t60 = Duration::from_secs(60);
    let row = |feature: &'static str,
               args: &[&str],
               needs: &'static [i16],
               verify: super::Verify| Scenario {
        client: "kafka-share-groups",
        feature,
        runner: Runner::Java,
        args: tool(b, args),
        output: Output::Text,
        needs,
        embedded_gap: None,
        verify,
        timeout: t60,
    };
    let reset = &[
        SHARE_GROUP_DESCRIBE,
        DESCRIBE_SHARE_GROUP_OFFSETS,
        LIST_OFFSETS,
        ALTER_SHARE_GROUP_OFFSETS,
    ];
    let describe_offsets = &[SHARE_GROUP_DESCRIBE, DESCRIBE_SHARE_GROUP_OFFSETS];
    let g = GROUP;
    vec![
        row("--list", &["--list"], &[LIST_GROUPS], |v| {
            has_row(v, &[GROUP])
        }),
        row(
            "--list --state",
            &["--list", "--state"],
            &[LIST_GROUPS],
            |v| has_row(v, &[GROUP, "Empty"]),
        ),
        row(
            "--describe --members (Empty group)",
            &["--describe", "--group", g, "--members"],
            &[SHARE_GROUP_DESCRIBE, SHARE_GROUP_HEARTBEAT],
            |v| {
                has_text(
                    v,
                    "Share group 'interop-console-share' has no active members.",
                )
            },
        ),
        row(
            "--describe --state",
            &["--describe", "--group", g, "--state"],
            &[SHARE_GROUP_DESCRIBE],
            |v| {
                // GROUP, COORDINATOR (ID) in two words, STATE, #MEMBERS.
                let text = v["text"].as_str().unwrap_or("");
                let ok = text.lines().any(|l| {
                    let w: Vec<&str> = l.split_whitespace().collect();
                    w.len() == 5 && w[0] == GROUP && w[3] == "Empty" && w[4] == "0"
                });
                if v["exit"] == 0 && ok {
                    Ok(())
                } else {
                    Err(format!("exit {}: {:?}", v["exit"], text.trim()))
                }
            },
        ),
        row(
            "--describe --offsets (after reading the 2000 records: start > 0)",
            &["--describe", "--group", g, "--offsets"],
            describe_offsets,
            offsets_row_advanced,
        ),
        row(
            "--reset-offsets --to-earliest --dry-run",
            &[
                "--reset-offsets",
                "--group",
                g,
                "--topic",
                T_PERF,
                "--to-earliest",
                "--dry-run",
            ],
            reset,
            |v| has_row(v, &[GROUP, T_PERF, "0", "0"]),
        ),
        row(
            "--describe --offsets after the dry run (not reset: start > 0)",
            &["--describe", "--group", g, "--offsets"],
            describe_offsets,
            offsets_row_advanced,
        ),
        row(
            "--reset-offsets --to-earliest --execute",
            &[
                "--reset-offsets",
                "--group",
                g,
                "--topic",
                T_PERF,
                "--to-earliest",
                "--execute",
            ],
            reset,
            |v| has_row(v, &[GROUP, T_PERF, "0", "0"]),
        ),
        row(
            "--describe --offsets after --to-earliest (start 0, lag 2000)",
            &["--describe", "--group", g, "--offsets"],
            describe_offsets,
            |v| offsets_row(v, 0),
        ),
        row(
            "--reset-offsets --to-offset 1500 --execute",
            &[
                "--reset-offsets",
                "--group",
                g,
                "--topic",
                &format!("{T_PERF}:0"),
                "--to-offset",
                "1500",
                "--execute",
            ],
            reset,
            |v| has_row(v, &[GROUP, T_PERF, "0", "1500"]),
        ),
        row(
            "--describe --offsets after --to-offset (start 1500, lag 500)",
            &["--describe", "--group", g, "--offsets"],
            describe_offsets,
            |v| offsets_row(v, 1500),
        ),
        row(
            "--reset-offsets --to-datetime 2020-01-01T00:00:00.000 --execute",
            &[
                "--reset-offsets",
                "--group",
                g,
                "--topic",
                T_PERF,
                "--to-datetime",
                "2020-01-01T00:00:00.000",
                "--execute",
            ],
            reset,
            |v| has_row(v, &[GROUP, T_PERF, "0", "0"]),
        ),
        row(
            "--reset-offsets --to-latest --execute",
            &[
                "--reset-offsets",
                "--group",
                g,
                "--topic",
                T_PERF,
                "--to-latest",
                "--execute",
            ],
            reset,
            |v| has_row(v, &[GROUP, T_PERF, "0", "2000"]),
        ),
        row(
            "--describe --offsets after --to-latest (start 2000, lag 0)",
            &["--describe", "--group", g, "--offsets"],
            describe_offsets,
            |v| offsets_row(v, PERF_RECORDS),
        ),
        row(
            "--delete-offsets",
            &["--delete-offsets", "--group", g, "--topic", T_PERF],
            &[DELETE_SHARE_GROUP_OFFSETS],
            |v| has_row(v, &[T_PERF, "Successful"]),
        ),
        row(
            "--describe --offsets after --delete-offsets (none)",
            &["--describe", "--group", g, "--offsets"],
            describe_offsets,
            |v| {
                has_text(
                    v,
                    "Share group 'interop-console-share' has no offset information.",
                )
            },
        ),
        row(
            "--delete-offsets again (nothing to delete)",
            &["--delete-offsets", "--group", g, "--topic", T_PERF],
            &[DELETE_SHARE_GROUP_OFFSETS],
            |v| {
                has_row(
                    v,
                    &[
                        T_PERF,
                        "Error:",
                        "There",
                        "is",
                        "no",
                        "offset",
                        "information",
                    ],
                )
            },
        ),
        row(
            "--delete",
            &["--delete", "--group", g],
            &[DELETE_GROUPS],
            |v| {
                has_text(
                    v,
                    "Deletion of requested share groups ('interop-console-share') was successful.",
                )
            },
        ),
        row(
            "--delete again (not a share group any more)",
            &["--delete", "--group", g],
            &[DELETE_GROUPS],
            |v| {
                has_text(
                    v,
                    "Group 'interop-console-share' could not be deleted due to",
                )
            },
        ),
    ]
}
