//! Apache Kafka's persisted share state, read without any client of ours.
//!
//! Against Kafka the checker cannot open the share state with our broker's
//! code. Kafka keeps it in the internal topic `__share_group_state`: for
//! each share partition a full snapshot now and then (key type 0) and, in
//! between, updates that carry only the state batches that changed (key type
//! 1). After the node stopped, `scripts/kafka/dump-share-state.sh` prints
//! every such record as Kafka's own decoder sees it (DumpLogSegments with
//! its share-group-state decoder); this module replays them in log order and
//! says, for each committed input record, whether Kafka holds it as
//! terminal:
//!
//! - below the share-partition start offset: terminal;
//! - in a state batch ACKNOWLEDGED (2): terminal;
//! - in a state batch ARCHIVED (4): terminal, and for a committed record that
//!   means its delivery count limit was reached (or a release on its last
//!   delivery): counted apart;
//! - AVAILABLE (0), or in no batch at all: not terminal. Acquisitions are
//!   not persisted, so a record a member still held reads as available too.
//!
//! The replay: a snapshot replaces the partition's state; an update moves the
//! start offset when it carries one (-1: unchanged), drops the batches below
//! it, and lays its batches over the older ones (the newer state of an
//! offset wins); a record without a value (a tombstone) deletes the state.

use std::collections::{BTreeMap, HashSet};

use base64::Engine;
use bytes::Bytes;
use serde::Deserialize;
use uuid::Uuid;

/// The persisted state of one share partition after the replay.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PersistedPartition {
    /// The share-partition start offset (-1: never set).
    pub start_offset: i64,
    /// Disjoint state batches: first offset -> (last offset, delivery state,
    /// delivery count).
    pub batches: BTreeMap<i64, (i64, i8, i16)>,
}

/// Delivery states as Kafka persists them.
const ACKNOWLEDGED: i8 = 2;
const ARCHIVED: i8 = 4;

impl PersistedPartition {
    /// The persisted delivery state of `offset`, if a batch covers it.
    fn state_of(&self, offset: i64) -> Option<(i8, i16)> {
        let (_, &(last, state, count)) = self.batches.range(..=offset).next_back()?;
        (offset <= last).then_some((state, count))
    }

    /// Drops the batches (and parts of batches) below the start offset.
    fn prune(&mut self) {
        let start = self.start_offset;
        let below: Vec<i64> = self.batches.range(..start).map(|(&f, _)| f).collect();
        for first in below {
            let (last, state, count) = self.batches.remove(&first).expect("listed");
            if last >= start {
                self.batches.insert(start, (last, state, count));
            }
        }
    }

    /// Lays `[first, last]` with `state` over the batches already there.
    fn overlay(&mut self, first: i64, last: i64, state: i8, count: i16) {
        if last < first {
            return;
        }
        // Batches that overlap [first, last]: the one starting before it
        // (if it reaches in) and every one starting inside it.
        let mut touched: Vec<i64> = self
            .batches
            .range(..first)
            .next_back()
            .filter(|(_, (l, _, _))| *l >= first)
            .map(|(&f, _)| f)
            .into_iter()
            .collect();
        touched.extend(self.batches.range(first..=last).map(|(&f, _)| f));
        for f in touched {
            let (l, s, c) = self.batches.remove(&f).expect("listed");
            if f < first {
                self.batches.insert(f, (first - 1, s, c));
            }
            if l > last {
                self.batches.insert(last + 1, (l, s, c));
            }
        }
        self.batches.insert(first, (last, state, count));
    }
}

#[derive(Deserialize)]
struct Key {
    #[serde(rename = "type")]
    kind: String,
    data: KeyData,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct KeyData {
    group_id: String,
    topic_id: String,
    partition: i32,
}

#[derive(Deserialize)]
struct Value {
    data: ValueData,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ValueData {
    start_offset: i64,
    #[serde(default)]
    state_batches: Vec<StateBatch>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct StateBatch {
    first_offset: i64,
    last_offset: i64,
    delivery_state: i8,
    delivery_count: i16,
}

/// Kafka's text form of a topic id (URL-safe base64, no padding).
pub fn kafka_topic_id(id: Uuid) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(id.as_bytes())
}

/// Replays the dump of `__share_group_state` (the output of
/// `dump-share-state.sh`) for `group` and `topic_id`: partition -> state.
/// Records of other groups and topics are skipped; a line of this group that
/// cannot be read is an error (the checker must not guess).
pub fn replay(
    dump: &str,
    group: &str,
    topic_id: Uuid,
) -> Result<BTreeMap<i32, PersistedPartition>, String> {
    let topic = kafka_topic_id(topic_id);
    let mut parts: BTreeMap<i32, PersistedPartition> = BTreeMap::new();
    for line in dump.lines() {
        let Some(k) = line.find(" key: ") else {
            continue;
        };
        if !line.starts_with("| offset:") {
            continue;
        }
        let rest = &line[k + " key: ".len()..];
        let (key_text, value_text) = match rest.find(" payload: ") {
            Some(v) => (&rest[..v], rest[v + " payload: ".len()..].trim()),
            None => (rest.trim(), ""),
        };
        let key: Key = serde_json::from_str(key_text)
            .map_err(|e| format!("share state dump: a key I cannot read ({e}): {line}"))?;
        if key.data.group_id != group || key.data.topic_id != topic {
            continue;
        }
        let p = key.data.partition;
        if value_text.is_empty() || value_text == "null" || value_text == "<NULL>" {
            parts.remove(&p);
            continue;
        }
        let value: Value = serde_json::from_str(value_text)
            .map_err(|e| format!("share state dump: a value I cannot read ({e}): {line}"))?;
        let s = match key.kind.as_str() {
            // A snapshot replaces what was known of the partition.
            "0" => parts
                .entry(p)
                .insert_entry(PersistedPartition {
                    start_offset: value.data.start_offset,
                    batches: BTreeMap::new(),
                })
                .into_mut(),
            // An update moves the start offset unless it is -1.
            "1" => {
                let s = parts.entry(p).or_insert(PersistedPartition {
                    start_offset: -1,
                    batches: BTreeMap::new(),
                });
                if value.data.start_offset >= 0 {
                    s.start_offset = value.data.start_offset;
                }
                s
            }
            other => {
                return Err(format!(
                    "share state dump: unknown record type {other}: {line}"
                ));
            }
        };
        for b in value.data.state_batches {
            s.overlay(
                b.first_offset,
                b.last_offset,
                b.delivery_state,
                b.delivery_count,
            );
        }
        s.prune();
    }
    Ok(parts)
}

/// What the persisted state says of the committed input records.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PersistedVerdict {
    /// Committed records neither below the start offset nor ACKNOWLEDGED
    /// nor ARCHIVED.
    pub non_terminal: u64,
    /// Committed records ARCHIVED (their delivery count limit reached).
    pub archived_committed: u64,
    /// A few (partition, offset, delivery state or -1, delivery count) of
    /// the non-terminal ones, for the report.
    pub non_terminal_sample: Vec<(i32, i64, i8, i16)>,
    /// The replayed start offset of each input partition (-1: no state).
    pub start_offsets: Vec<i64>,
}

/// Judges every committed input record (`committed`: partition, offset,
/// value) against the replayed state of `partitions` input partitions.
pub fn judge(
    parts: &BTreeMap<i32, PersistedPartition>,
    committed: &[(i32, i64, Bytes)],
    partitions: usize,
) -> PersistedVerdict {
    let mut v = PersistedVerdict {
        start_offsets: (0..partitions as i32)
            .map(|p| parts.get(&p).map_or(-1, |s| s.start_offset))
            .collect(),
        ..PersistedVerdict::default()
    };
    let mut seen = HashSet::with_capacity(committed.len());
    for (p, o, _) in committed {
        if !seen.insert((*p, *o)) {
            continue;
        }
        let state = parts.get(p).and_then(|s| {
            if *o < s.start_offset {
                Some((ACKNOWLEDGED, 0))
            } else {
                s.state_of(*o)
            }
        });
        match state {
            Some((ACKNOWLEDGED, _)) => {}
            Some((ARCHIVED, _)) => v.archived_committed += 1,
            other => {
                v.non_terminal += 1;
                if v.non_terminal_sample.len() < 10 {
                    let (s, c) = other.unwrap_or((-1, 0));
                    v.non_terminal_sample.push((*p, *o, s, c));
                }
            }
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOPIC: Uuid = Uuid::from_bytes([7; 16]);

    fn line(kind: u8, partition: i32, value: &str) -> String {
        format!(
            "| offset: 0 CreateTime: 1 keySize: 36 valueSize: 40 sequence: 0 headerKeys: [] \
             key: {{\"type\":\"{kind}\",\"data\":{{\"groupId\":\"g\",\"topicId\":\"{}\",\"partition\":{partition}}}}} \
             payload: {value}",
            kafka_topic_id(TOPIC)
        )
    }

    fn batch(first: i64, last: i64, state: i8, count: i16) -> String {
        format!(
            "{{\"firstOffset\":{first},\"lastOffset\":{last},\"deliveryState\":{state},\"deliveryCount\":{count}}}"
        )
    }

    fn value(start: i64, batches: &[String]) -> String {
        format!(
            "{{\"version\":\"0\",\"data\":{{\"snapshotEpoch\":0,\"leaderEpoch\":0,\"startOffset\":{start},\
             \"deliveryCompleteCount\":1,\"stateBatches\":[{}]}}}}",
            batches.join(",")
        )
    }

    fn committed(p: i32, offsets: std::ops::Range<i64>) -> Vec<(i32, i64, Bytes)> {
        offsets.map(|o| (p, o, Bytes::new())).collect()
    }

    /// The first records of one share partition's state as Apache Kafka
    /// 4.4.0's DumpLogSegments printed them after a chaos run: the initial
    /// snapshot (no start offset yet), then updates archiving the seeder's
    /// aborted transactions' markers.
    #[test]
    fn kafka_4_4_output_is_read() {
        let dump = include_str!("kafka-4.4-share-state.txt");
        let topic = Uuid::parse_str("d252a82e-9981-4cc1-b99d-596432c01bcf").unwrap();
        let parts = replay(dump, "chaos-copier", topic).unwrap();
        let s = &parts[&0];
        assert_eq!(s.start_offset, 0);
        for o in [250, 501, 752, 1003, 1254] {
            assert_eq!(s.state_of(o), Some((ARCHIVED, 1)), "offset {o}");
        }
        assert_eq!(s.state_of(0), None);
        // Offset 0 is in no batch yet at this point of the log: not terminal.
        let v = judge(&parts, &committed(0, 0..1), 1);
        assert_eq!(v.non_terminal, 1);
        assert!(replay(dump, "other-group", topic).unwrap().is_empty());
    }

    #[test]
    fn the_topic_id_is_written_as_kafka_writes_it() {
        // Kafka prints Uuid 4c47025a-b362-4932-9868-7981880b06b5 so.
        let id = Uuid::parse_str("4c47025a-b362-4932-9868-7981880b06b5").unwrap();
        assert_eq!(kafka_topic_id(id), "TEcCWrNiSTKYaHmBiAsGtQ");
    }

    #[test]
    fn updates_lay_their_batches_over_the_snapshot_and_move_the_start() {
        let dump = [
            line(0, 0, &value(-1, &[])),
            line(1, 0, &value(0, &[batch(0, 9, 2, 1)])),
            // Offsets 10..=19 acknowledged, then 14 archived on its fifth delivery.
            line(1, 0, &value(-1, &[batch(10, 19, 2, 1)])),
            line(1, 0, &value(-1, &[batch(14, 14, 4, 5)])),
            // The start moves past the first batch; 20..=24 come back available.
            line(1, 0, &value(10, &[batch(20, 24, 0, 1)])),
            "some other line the tool prints".to_string(),
        ]
        .join("\n");
        let parts = replay(&dump, "g", TOPIC).unwrap();
        let s = &parts[&0];
        assert_eq!(s.start_offset, 10);
        assert_eq!(s.state_of(13), Some((2, 1)));
        assert_eq!(s.state_of(14), Some((4, 5)));
        assert_eq!(s.state_of(15), Some((2, 1)));
        assert_eq!(s.state_of(22), Some((0, 1)));
        assert_eq!(s.state_of(25), None);
        assert!(s.batches.keys().all(|&f| f >= 10), "{:?}", s.batches);

        let v = judge(&parts, &committed(0, 0..30), 1);
        assert_eq!(v.archived_committed, 1);
        // 20..=24 available, 25..=29 never in a batch.
        assert_eq!(v.non_terminal, 10);
        assert_eq!(v.non_terminal_sample[0], (0, 20, 0, 1));
        assert_eq!(v.start_offsets, vec![10]);
    }

    #[test]
    fn a_snapshot_replaces_and_a_tombstone_deletes() {
        let dump = [
            line(1, 0, &value(0, &[batch(0, 4, 0, 1)])),
            line(0, 0, &value(5, &[batch(5, 9, 2, 1)])),
            line(0, 1, &value(3, &[])),
            line(1, 1, "null"),
        ]
        .join("\n");
        let parts = replay(&dump, "g", TOPIC).unwrap();
        assert_eq!(parts[&0].start_offset, 5);
        assert_eq!(parts[&0].batches.len(), 1);
        assert!(!parts.contains_key(&1));
        let mut all = committed(0, 0..10);
        all.extend(committed(1, 0..2));
        let v = judge(&parts, &all, 2);
        assert_eq!(v.non_terminal, 2, "partition 1 has no state left");
        assert_eq!(v.start_offsets, vec![5, -1]);
    }

    #[test]
    fn other_groups_and_topics_are_skipped_and_garbage_is_an_error() {
        let other = line(0, 0, &value(100, &[])).replace("\"groupId\":\"g\"", "\"groupId\":\"h\"");
        let parts = replay(&other, "g", TOPIC).unwrap();
        assert!(parts.is_empty());
        let broken = line(1, 0, "{\"data\":{}}");
        assert!(replay(&broken, "g", TOPIC).is_err());
    }
}
