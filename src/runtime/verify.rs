//! A read_committed reader of whole topics, for verification: the mirror
//! and dead-letter examples, the tests and the benchmarks use it to check
//! that every input arrived exactly once.
//!
//! It fetches every partition from offset 0 up to its last stable offset
//! with Fetch v12 at isolation level READ_COMMITTED and drops the records
//! of aborted transactions (from the response's aborted-transaction list:
//! a producer's batches from the listed first offset on, until that
//! producer's next control batch), as a Kafka consumer would.

use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{FetchRequest, TopicName};
use kafka_protocol::protocol::StrBytes;

use crate::client::{ClientError, Metadata};
use crate::protocol::records::{RecordBatchView, RecordHeader};

/// One committed record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommittedRecord {
    /// Partition.
    pub partition: i32,
    /// Offset.
    pub offset: i64,
    /// Key.
    pub key: Option<Bytes>,
    /// Value.
    pub value: Option<Bytes>,
    /// Headers.
    pub headers: Vec<RecordHeader>,
    /// Timestamp (ms).
    pub timestamp: i64,
}

impl CommittedRecord {
    /// The last value of header `key`, as text.
    pub fn header_str(&self, key: &str) -> Option<String> {
        self.headers
            .iter()
            .rev()
            .find(|h| h.key == key)
            .and_then(|h| h.value.as_ref())
            .map(|v| String::from_utf8_lossy(v).into_owned())
    }
}

/// Every committed record of `topic`, partition by partition.
pub async fn read_committed(
    metadata: &Metadata,
    topic: &str,
) -> Result<Vec<CommittedRecord>, ClientError> {
    let mut reader = CommittedReader::new(metadata, topic).await?;
    reader.poll().await
}

/// An incremental read_committed reader of one topic: each
/// [`poll`](Self::poll) returns the records that became stable since the
/// previous one.
#[derive(Debug)]
pub struct CommittedReader<'a> {
    metadata: &'a Metadata,
    topic: String,
    partitions: Vec<PartitionCursor>,
}

#[derive(Debug, Default)]
struct PartitionCursor {
    offset: i64,
    skipping: Vec<i64>,
}

impl<'a> CommittedReader<'a> {
    /// A reader from offset 0 of every partition of `topic`.
    pub async fn new(metadata: &'a Metadata, topic: &str) -> Result<Self, ClientError> {
        let t = metadata
            .wait_for_topic(topic, Duration::from_secs(10))
            .await?;
        Ok(Self {
            metadata,
            topic: topic.to_string(),
            partitions: (0..t.partition_count())
                .map(|_| PartitionCursor::default())
                .collect(),
        })
    }

    /// The records committed since the last poll (up to each partition's
    /// last stable offset).
    pub async fn poll(&mut self) -> Result<Vec<CommittedRecord>, ClientError> {
        let mut out = Vec::new();
        for (p, cursor) in self.partitions.iter_mut().enumerate() {
            read_partition(self.metadata, &self.topic, p as i32, cursor, &mut out).await?;
        }
        Ok(out)
    }
}

async fn read_partition(
    metadata: &Metadata,
    topic: &str,
    partition: i32,
    cursor: &mut PartitionCursor,
    out: &mut Vec<CommittedRecord>,
) -> Result<(), ClientError> {
    let PartitionCursor { offset, skipping } = cursor;
    loop {
        let offset_now = *offset;
        let leader = metadata
            .leader(topic, partition)
            .ok_or_else(|| ClientError::Poisoned(format!("no leader for {topic}-{partition}")))?;
        let req = FetchRequest::default()
            .with_max_wait_ms(0)
            .with_min_bytes(0)
            .with_max_bytes(8 << 20)
            .with_isolation_level(1)
            .with_session_epoch(-1)
            .with_topics(vec![
                FetchTopic::default()
                    .with_topic(TopicName(StrBytes::from_string(topic.to_string())))
                    .with_partitions(vec![
                        FetchPartition::default()
                            .with_partition(partition)
                            .with_fetch_offset(offset_now)
                            .with_partition_max_bytes(4 << 20),
                    ]),
            ]);
        let mut resp = leader
            .connection()
            .await?
            .send_with_version(&req, 12)
            .await?;
        let Some(mut t) = resp.responses.pop() else {
            return Ok(());
        };
        let Some(p) = t.partitions.pop() else {
            return Ok(());
        };
        ClientError::check("Fetch", p.error_code, None)?;
        let lso = p.last_stable_offset;
        let mut aborted: Vec<(i64, i64)> = p
            .aborted_transactions
            .unwrap_or_default()
            .iter()
            .map(|a| (a.producer_id.0, a.first_offset))
            .collect();
        let batches = RecordBatchView::parse_all(p.records.unwrap_or_default())
            .map_err(|e| ClientError::Poisoned(format!("bad fetch data: {e}")))?;
        let mut progressed = false;
        for b in batches {
            if b.base_offset() >= lso {
                break;
            }
            progressed = true;
            *offset = b.last_offset() + 1;
            aborted.retain(|&(pid, first)| {
                let starts = pid == b.producer_id() && first <= b.base_offset();
                if starts {
                    skipping.push(pid);
                }
                !starts
            });
            if b.is_control() {
                skipping.retain(|&x| x != b.producer_id());
                continue;
            }
            if b.is_transactional() && skipping.contains(&b.producer_id()) {
                continue;
            }
            let base = b.base_offset();
            let records = b
                .records(64 << 20)
                .map_err(|e| ClientError::Poisoned(format!("bad fetch data: {e}")))?;
            for r in records {
                out.push(CommittedRecord {
                    partition,
                    offset: r.offset(base),
                    key: r.key,
                    value: r.value,
                    headers: r.headers,
                    timestamp: r.timestamp,
                });
            }
        }
        if !progressed || *offset >= lso {
            return Ok(());
        }
    }
}
