//! The independent checker.
//!
//! It trusts neither the copiers nor the clients' consumer code:
//!
//! - the output is read with our own Fetch requests (v12, isolation
//!   read_committed, from offset 0, no group), dropping batches of aborted
//!   transactions by the response's aborted-transaction list and the
//!   control batches, as a read_committed consumer must;
//! - the share-group state is read *offline*, after the broker stopped, by
//!   opening the data directory's `share-state` with the broker's own
//!   [`ShareService`]: only what was persisted counts (ACQUIRED
//!   records come back AVAILABLE there, as after any restart). Against
//!   Apache Kafka (`--kafka-scripts`) it is read the same way, offline, from
//!   Kafka's own `__share_group_state` topic as Kafka's own decoder prints
//!   it ([`crate::kafka_state`]), and the start offsets it yields are
//!   checked against those Kafka's API gives (DescribeShareGroupOffsets).
//!
//! Anomalies: records lost (committed input seq never in the output),
//! duplicated (seq in the output more than once), aborted (a seq written
//! inside an aborted seeder transaction in the output; if the input itself
//! holds it as committed, the broker dropped the abort markers, and the
//! record is judged as input, which the caller reports apart), out of order per
//! key (a record of a key after a record of the same key with a larger seq,
//! in one output partition: share groups do not promise order, so this is
//! reported, never a failure), input records not in a terminal state
//! (ACKNOWLEDGED/ARCHIVED, or below the share-partition start offset),
//! TX_PENDING records left, and records ARCHIVED (delivery limit reached:
//! they are also counted as lost when absent from the output).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{FetchRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use serde::Serialize;
use sharestream::broker::clock::wall_clock_ms;
use sharestream::broker::group::ShareGroupBrokerConfig;
use sharestream::broker::share::RecordState;
use sharestream::broker::share_service::ShareService;
use sharestream::client::{Connection, ConnectionConfig};
use sharestream::protocol::records::{DEFAULT_MAX_DECOMPRESSED, RecordBatchView};
use uuid::Uuid;

use crate::payload::{ABORTED_SEQ_BASE, Payload};

/// One partition's committed data read so far.
#[derive(Debug, Default, Clone)]
struct PartitionCursor {
    next_offset: i64,
}

/// Reads a topic read_committed from offset 0, incrementally.
#[derive(Debug)]
pub struct CommittedReader {
    bootstrap: String,
    topic: String,
    cursors: Vec<PartitionCursor>,
    conn: Option<Connection>,
    /// Every committed record read: (partition, offset, value).
    pub records: Vec<(i32, i64, Bytes)>,
    /// High watermark and last stable offset per partition at the last read.
    pub ends: Vec<(i64, i64)>,
}

impl CommittedReader {
    /// A reader of `partitions` partitions of `topic`.
    pub fn new(bootstrap: &str, topic: &str, partitions: i32) -> Self {
        Self {
            bootstrap: bootstrap.to_string(),
            topic: topic.to_string(),
            cursors: vec![PartitionCursor::default(); partitions as usize],
            conn: None,
            records: Vec::new(),
            ends: vec![(0, 0); partitions as usize],
        }
    }

    async fn connection(&mut self) -> Result<&Connection, String> {
        if self.conn.as_ref().is_none_or(|c| c.is_poisoned()) {
            let config = ConnectionConfig::default()
                .with_client_id("chaos-checker")
                .with_request_timeout(Duration::from_secs(10));
            let c = Connection::connect_tcp(self.bootstrap.as_str(), &config)
                .await
                .map_err(|e| format!("checker cannot reach {}: {e}", self.bootstrap))?;
            self.conn = Some(c);
        }
        Ok(self.conn.as_ref().expect("connected"))
    }

    /// Reads everything committed since the previous call (up to each
    /// partition's last stable offset).
    pub async fn read_more(&mut self) -> Result<(), String> {
        for p in 0..self.cursors.len() {
            loop {
                let from = self.cursors[p].next_offset;
                let req = FetchRequest::default()
                    .with_max_wait_ms(0)
                    .with_min_bytes(0)
                    .with_max_bytes(8 << 20)
                    .with_isolation_level(1)
                    .with_session_epoch(-1)
                    .with_topics(vec![
                        FetchTopic::default()
                            .with_topic(TopicName(StrBytes::from_string(self.topic.clone())))
                            .with_partitions(vec![
                                FetchPartition::default()
                                    .with_partition(p as i32)
                                    .with_fetch_offset(from)
                                    .with_partition_max_bytes(4 << 20),
                            ]),
                    ]);
                let conn = self.connection().await?;
                let resp = match conn.send_with_version(&req, 12).await {
                    Ok(r) => r,
                    Err(e) => {
                        self.conn = None;
                        return Err(format!("fetch {}-{p}: {e}", self.topic));
                    }
                };
                let data = resp
                    .responses
                    .first()
                    .and_then(|t| t.partitions.first())
                    .ok_or_else(|| format!("fetch {}-{p}: empty response", self.topic))?;
                if data.error_code != 0 {
                    return Err(format!(
                        "fetch {}-{p}: {}",
                        self.topic,
                        sharestream::protocol::ErrorCode(data.error_code)
                    ));
                }
                let lso = data.last_stable_offset;
                self.ends[p] = (data.high_watermark, lso);
                let mut aborted: Vec<(i64, i64)> = data
                    .aborted_transactions
                    .clone()
                    .unwrap_or_default()
                    .iter()
                    .map(|a| (a.producer_id.0, a.first_offset))
                    .collect();
                let mut skipping: Vec<i64> = Vec::new();
                let batches = RecordBatchView::parse_all(data.records.clone().unwrap_or_default())
                    .map_err(|e| format!("fetch {}-{p}: bad batch: {e}", self.topic))?;
                let mut advanced = false;
                for b in batches {
                    if b.base_offset() >= lso || b.last_offset() < from {
                        if b.base_offset() >= lso {
                            break;
                        }
                        continue;
                    }
                    aborted.retain(|&(pid, first)| {
                        if pid == b.producer_id() && first <= b.last_offset() {
                            skipping.push(pid);
                            false
                        } else {
                            true
                        }
                    });
                    let pid = b.producer_id();
                    let next = b.last_offset() + 1;
                    if b.is_control() {
                        skipping.retain(|&x| x != pid);
                    } else if !(b.is_transactional() && skipping.contains(&pid)) {
                        let base = b.base_offset();
                        for r in b
                            .records(DEFAULT_MAX_DECOMPRESSED)
                            .map_err(|e| format!("fetch {}-{p}: bad records: {e}", self.topic))?
                        {
                            let off = base + i64::from(r.offset_delta);
                            if off >= from {
                                self.records.push((
                                    p as i32,
                                    off,
                                    r.value.clone().unwrap_or_default(),
                                ));
                            }
                        }
                    }
                    self.cursors[p].next_offset = next;
                    advanced = true;
                }
                if !advanced || self.cursors[p].next_offset >= lso {
                    break;
                }
            }
        }
        Ok(())
    }
}

/// The share state of one input partition, read offline.
#[derive(Debug, Default, Clone, Serialize)]
pub struct ShareStateReport {
    /// Input offsets (below the log end) not ACKNOWLEDGED/ARCHIVED and not
    /// below the share-partition start offset.
    pub non_terminal: u64,
    /// Records still TX_PENDING.
    pub tx_pending: u64,
    /// Records ARCHIVED: on our broker every such offset (delivery limit,
    /// or never-deliverable offsets such as control records and aborted
    /// data); on Apache Kafka the committed input records only, so each one
    /// reached its delivery count limit.
    pub archived: u64,
    /// Share partitions found for the group and topic.
    pub share_partitions: usize,
    /// Read through the API (Apache Kafka): committed input records at or
    /// after the share-partition start offset. Kafka moves that offset
    /// lazily, so they may well be terminal: `non_terminal` is what the
    /// persisted state says of them.
    pub committed_after_start: u64,
    /// Read through the API (Apache Kafka): offsets from the share-partition
    /// start offset to the log end that hold no committed record (aborted
    /// transactions' records, markers). Kafka archives those only when a
    /// fetch covers them, so after the last fetch they can hold the start
    /// offset back; they are not counted as non-terminal.
    pub uncommitted_after_start: u64,
    /// Apache Kafka: a few non-terminal committed records as (partition,
    /// offset, persisted delivery state or -1 for none, delivery count).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub non_terminal_sample: Vec<(i32, i64, i8, i16)>,
    /// Apache Kafka: the start offsets replayed from `__share_group_state`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub persisted_start_offsets: Vec<i64>,
    /// Apache Kafka: the start offsets its API gave.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub api_start_offsets: Vec<i64>,
}

/// The share state of `group` on Apache Kafka.
///
/// Two readings that do not involve any client of ours beyond the admin
/// call: the share-partition start offset of each input partition through
/// Kafka's API (DescribeShareGroupOffsets, `api_starts`, read while the node
/// runs), and, after the node stopped, the persisted state itself
/// (`persisted`: the replay of `__share_group_state`, see
/// [`crate::kafka_state`]), which says record by record which committed
/// input record is terminal. The two start offsets must agree: if they do
/// not, the checker misreads Kafka, and the run fails.
pub fn kafka_share_state(
    api_starts: &[i64],
    persisted: &crate::kafka_state::PersistedVerdict,
    log_ends: &[i64],
    committed: &[(i32, i64, Bytes)],
) -> ShareStateReport {
    let mut r = ShareStateReport {
        non_terminal: persisted.non_terminal,
        archived: persisted.archived_committed,
        non_terminal_sample: persisted.non_terminal_sample.clone(),
        persisted_start_offsets: persisted.start_offsets.clone(),
        api_start_offsets: api_starts.to_vec(),
        ..ShareStateReport::default()
    };
    for (p, &end) in log_ends.iter().enumerate() {
        let start = api_starts.get(p).copied().unwrap_or(-1);
        if start >= 0 {
            r.share_partitions += 1;
        }
        let start = start.max(0);
        let at_or_after = committed
            .iter()
            .filter(|(cp, o, _)| *cp == p as i32 && *o >= start)
            .count() as u64;
        r.committed_after_start += at_or_after;
        r.uncommitted_after_start += ((end - start).max(0) as u64).saturating_sub(at_or_after);
    }
    r
}

/// The share-partition start offset of each of `partitions` input
/// partitions of `group`, through Kafka's API (-1: none).
pub async fn api_start_offsets(
    bootstrap: &str,
    group: &str,
    partitions: usize,
) -> Result<Vec<i64>, String> {
    use sharestream::client::ConnectionConfig;
    use sharestream::client::admin::AdminClient;
    let admin = AdminClient::new(vec![bootstrap.to_string()], ConnectionConfig::default());
    let parts: Vec<i32> = (0..partitions as i32).collect();
    let offsets = admin
        .describe_share_group_offsets(group, Some(&[("chaos-in".to_string(), parts)]))
        .await
        .map_err(|e| format!("DescribeShareGroupOffsets: {e}"))?;
    Ok((0..partitions as i32)
        .map(|p| match offsets.get(&("chaos-in".to_string(), p)) {
            Some(Ok(start)) => *start,
            _ => -1,
        })
        .collect())
}

/// Reads the persisted share state of `group` over the input partitions
/// (`log_ends[p]` = the input's log end offset) from `data_dir`.
pub fn offline_share_state(
    data_dir: &Path,
    group: &str,
    topic_id: Uuid,
    log_ends: &[i64],
) -> Result<ShareStateReport, String> {
    let mgr = ShareService::open(
        Some(&data_dir.join("share-state")),
        ShareGroupBrokerConfig::default(),
        wall_clock_ms(),
    )
    .map_err(|e| format!("cannot open the share state in {}: {e}", data_dir.display()))?;
    let mut r = ShareStateReport::default();
    for (p, &end) in log_ends.iter().enumerate() {
        let p = p as i32;
        let Some((start, window_end)) = mgr.partition_offsets(group, topic_id, p) else {
            r.non_terminal += end.max(0) as u64;
            continue;
        };
        r.share_partitions += 1;
        // Offsets never acquired at all.
        if window_end < end {
            r.non_terminal += (end - window_end.max(start)) as u64;
        }
        for (first, last, info) in mgr.record_runs(group, topic_id, p) {
            let first = first.max(start);
            let last = last.min(end - 1);
            if last < first {
                continue;
            }
            let n = (last - first + 1) as u64;
            match info.state {
                RecordState::Acknowledged => {}
                RecordState::Archived => r.archived += n,
                RecordState::TxPending => {
                    r.tx_pending += n;
                    r.non_terminal += n;
                }
                // ARCHIVING (KIP-1191) waits for its dead-letter record: not
                // terminal yet (the chaos runs configure no queue).
                RecordState::Available | RecordState::Acquired | RecordState::Archiving => {
                    r.non_terminal += n
                }
            }
        }
    }
    Ok(r)
}

/// The anomalies found in the output.
#[derive(Debug, Default, Clone, Serialize)]
pub struct OutputReport {
    /// Committed records read from the output.
    pub output_records: u64,
    /// Distinct input seqs in the output.
    pub distinct: u64,
    /// Committed input records absent from the output.
    pub lost: u64,
    /// Extra copies of input records (copies beyond the first).
    pub duplicated: u64,
    /// Records of aborted seeder transactions in the output, except those
    /// the broker let into the committed input (`aborted_in_input`).
    pub aborted_seen: u64,
    /// Records the seeder wrote in transactions it aborted, which the
    /// input nevertheless holds as committed (the broker did not write the
    /// abort markers). For the copiers they are input like any other:
    /// they are expected in the output exactly once.
    pub aborted_in_input: u64,
    /// Output values that are not a seeder payload.
    pub unparsable: u64,
    /// Records after a larger seq of the same key (share groups do not
    /// promise order: reported only).
    pub out_of_order_per_key: u64,
    /// A few lost seqs, for the logs.
    pub lost_sample: Vec<u64>,
    /// A few duplicated seqs, for the logs.
    pub duplicated_sample: Vec<u64>,
}

/// The sequence numbers of aborted seeder records that a read_committed
/// read of the input returned as committed.
pub fn aborted_in_input(input: &[(i32, i64, Bytes)]) -> BTreeSet<u64> {
    input
        .iter()
        .filter_map(|(_, _, v)| Payload::decode(v))
        .filter(|pl| pl.aborted || pl.seq >= ABORTED_SEQ_BASE)
        .map(|pl| pl.seq)
        .collect()
}

/// Counts the anomalies of the output records against `0..expected` and
/// `aborted_in_input` (see [`aborted_in_input`]).
pub fn analyse(
    records: &[(i32, i64, Bytes)],
    expected: u64,
    aborted_in_input: &BTreeSet<u64>,
) -> OutputReport {
    let mut r = OutputReport {
        output_records: records.len() as u64,
        aborted_in_input: aborted_in_input.len() as u64,
        ..OutputReport::default()
    };
    let mut seen: HashMap<u64, u32> = HashMap::with_capacity(expected as usize);
    let mut by_partition: BTreeMap<i32, Vec<(i64, Payload)>> = BTreeMap::new();
    for (p, off, v) in records {
        match Payload::decode(v) {
            Some(pl) => by_partition.entry(*p).or_default().push((*off, pl)),
            None => r.unparsable += 1,
        }
    }
    for recs in by_partition.values_mut() {
        recs.sort_by_key(|(o, _)| *o);
        let mut max_seq: HashMap<u32, u64> = HashMap::new();
        for (_, pl) in recs.iter() {
            if (pl.aborted || pl.seq >= ABORTED_SEQ_BASE) && !aborted_in_input.contains(&pl.seq) {
                r.aborted_seen += 1;
                continue;
            }
            let c = seen.entry(pl.seq).or_insert(0);
            *c += 1;
            if *c > 1 {
                r.duplicated += 1;
                if r.duplicated_sample.len() < 10 {
                    r.duplicated_sample.push(pl.seq);
                }
            }
            let m = max_seq.entry(pl.key).or_insert(0);
            if pl.seq < *m {
                r.out_of_order_per_key += 1;
            } else {
                *m = pl.seq;
            }
        }
    }
    r.distinct = seen.keys().filter(|&&s| s < expected).count() as u64;
    for s in (0..expected).chain(aborted_in_input.iter().copied()) {
        if !seen.contains_key(&s) {
            r.lost += 1;
            if r.lost_sample.len() < 10 {
                r.lost_sample.push(s);
            }
        }
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(p: i32, off: i64, seq: u64, aborted: bool) -> (i32, i64, Bytes) {
        let pl = Payload {
            seq,
            key: (seq % 7) as u32,
            aborted,
        };
        (p, off, pl.encode())
    }

    #[test]
    fn an_aborted_record_in_the_output_is_an_anomaly() {
        let out = vec![
            rec(0, 0, 0, false),
            rec(0, 1, 1, false),
            rec(0, 2, ABORTED_SEQ_BASE, true),
        ];
        let r = analyse(&out, 2, &BTreeSet::new());
        assert_eq!((r.aborted_seen, r.lost, r.duplicated), (1, 0, 0));
    }

    #[test]
    fn aborted_records_the_input_holds_as_committed_are_judged_as_input() {
        let input = vec![
            rec(0, 0, 0, false),
            rec(0, 1, ABORTED_SEQ_BASE, true),
            rec(0, 2, ABORTED_SEQ_BASE + 1, true),
            rec(0, 3, 1, false),
        ];
        let visible = aborted_in_input(&input);
        assert_eq!(
            visible.iter().copied().collect::<Vec<_>>(),
            vec![ABORTED_SEQ_BASE, ABORTED_SEQ_BASE + 1]
        );
        // Copied once each: no anomaly.
        let r = analyse(&input, 2, &visible);
        assert_eq!((r.aborted_seen, r.lost, r.duplicated), (0, 0, 0));
        assert_eq!(r.aborted_in_input, 2);
        // Missing from the output: lost; copied twice: duplicated.
        let out = vec![
            rec(0, 0, 0, false),
            rec(0, 1, 1, false),
            rec(0, 2, ABORTED_SEQ_BASE, true),
            rec(0, 3, ABORTED_SEQ_BASE, true),
        ];
        let r = analyse(&out, 2, &visible);
        assert_eq!((r.aborted_seen, r.lost, r.duplicated), (0, 1, 1));
        assert_eq!(r.lost_sample, vec![ABORTED_SEQ_BASE + 1]);
        // Another aborted record, not in the input: an anomaly still.
        let out = vec![
            rec(0, 0, 0, false),
            rec(0, 1, 1, false),
            rec(0, 2, ABORTED_SEQ_BASE + 5, true),
        ];
        let r = analyse(&out, 2, &visible);
        assert_eq!(r.aborted_seen, 1);
    }
}
