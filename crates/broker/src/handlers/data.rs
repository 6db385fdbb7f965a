//! Produce, Fetch, ListOffsets and DeleteRecords.
//!
//! Produce validates each batch in place (framing, magic, CRC-32C) without
//! decoding records and hands it to the partition log, which assigns offsets
//! and enforces idempotence. Fetch reads whole batches up to the high
//! watermark (read_uncommitted) or the last stable offset (read_committed,
//! with the aborted transactions of the range) and long-polls until
//! `MinBytes` arrived or `MaxWaitMs` passed. Fetch sessions are answered
//! sessionless (SessionId 0: every response is a full response with exactly
//! the requested partitions), which Kafka's clients accept.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::fetch_response::{
    AbortedTransaction, FetchableTopicResponse, PartitionData,
};
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, PartitionProduceResponse, TopicProduceResponse,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use super::RequestContext;
use super::leader_epoch::current_epoch_error;
use crate::acl::{AclOperation, Resource};
use crate::config::StorageMode;
use crate::core::{BrokerCore, SharedLog};
use crate::log::{AppendOptions, LogError};
use crate::topics::TopicMeta;
use crate::txn::{TxnApi, error_for_version};
use sharestream_protocol::ErrorCode;
use sharestream_protocol::records::RecordBatchView;

/// Kafka's INVALID_RECORD.
const INVALID_RECORD: ErrorCode = ErrorCode(87);

/// Runs an append of `bytes` bytes: inline for in-memory logs and for
/// appends that only write to the page cache (like the reads of Fetch); on
/// the blocking pool when it may wait on the disk (an fsync per batch, or
/// a segment roll), so the reactor never waits on one. Handing every
/// append to the blocking pool cost two thread switches per produce
/// request, most of the broker's CPU per request on disk.
async fn with_log_append<T: Send + 'static>(
    core: &BrokerCore,
    log: SharedLog,
    bytes: u64,
    f: impl FnOnce(&mut crate::log::PartitionLog) -> T + Send + 'static,
) -> T {
    match core.config().storage {
        StorageMode::Memory => f(&mut log.lock()),
        StorageMode::Directory(_) => {
            {
                // Checked and appended under one lock hold.
                let mut l = log.lock();
                if !l.append_may_sync(bytes) {
                    return f(&mut l);
                }
            }
            tokio::task::spawn_blocking(move || f(&mut log.lock()))
                .await
                .expect("storage task panicked")
        }
    }
}

pub(super) fn lookup_topic(core: &BrokerCore, name: &str, id: Uuid) -> Option<TopicMeta> {
    let reg = core.topics().read();
    if !id.is_nil() {
        reg.get_by_id(&id).cloned()
    } else {
        reg.get(name).cloned()
    }
}

/// Outcome of one partition of a Produce request.
struct PartitionResult {
    error: ErrorCode,
    message: Option<String>,
    base_offset: i64,
    log_append_time: i64,
    log_start_offset: i64,
    /// The records an INVALID_RECORD names (index in the batch, why);
    /// empty: the whole batch, index 0.
    record_errors: Vec<(i32, String)>,
}

impl PartitionResult {
    fn error(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            error: code,
            message: Some(message.into()),
            base_offset: -1,
            log_append_time: -1,
            log_start_offset: -1,
            record_errors: Vec::new(),
        }
    }
}

/// A compacted topic keeps the latest record per key, so, as Kafka's log
/// validation, it refuses a record without a key: the whole produce of
/// the partition is INVALID_RECORD, naming every keyless record by its
/// index in its batch. A batch that cannot be decoded is CORRUPT_MESSAGE.
fn keyless_records(
    batches: &[RecordBatchView],
    topic: &TopicMeta,
    partition: i32,
) -> Option<PartitionResult> {
    if !topic.is_compacted() {
        return None;
    }
    let mut record_errors = Vec::new();
    for b in batches.iter().filter(|b| !b.is_control()) {
        let records = match b.records(sharestream_protocol::records::DEFAULT_MAX_DECOMPRESSED) {
            Ok(r) => r,
            Err(e) => {
                return Some(PartitionResult::error(
                    ErrorCode::CORRUPT_MESSAGE,
                    e.to_string(),
                ));
            }
        };
        for (i, r) in records.iter().enumerate() {
            if r.key.is_none() {
                let why = format!(
                    "Record {i} has no key: the compacted topic partition {}-{partition} refuses records without key.",
                    topic.name
                );
                record_errors.push((i as i32, why));
            }
        }
    }
    let first = record_errors.first()?.1.clone();
    Some(PartitionResult {
        record_errors,
        ..PartitionResult::error(INVALID_RECORD, first)
    })
}

/// A transactional batch's partition must be part of its transaction:
/// Produce v12+ (transactions v2) registers it with the coordinator here;
/// older versions (transactions v1) only verify that the client added it
/// (KIP-890), answering TRANSACTION_ABORTABLE / INVALID_TXN_STATE otherwise.
async fn check_txn_partition(
    core: &Arc<BrokerCore>,
    version: i16,
    transactional_id: &str,
    batch: &RecordBatchView,
    topic: &str,
    partition: i32,
) -> Result<(), ErrorCode> {
    let (txn_id, pid, epoch) = (
        transactional_id.to_string(),
        batch.producer_id(),
        batch.producer_epoch(),
    );
    let tp = vec![(topic.to_string(), partition)];
    let res = super::txn::blocking(core, move |c| {
        if version >= 12 {
            c.txn_call(|co, now| co.add_partitions_to_txn(now, 5, &txn_id, pid, epoch, &tp))
        } else {
            c.txn()
                .with_coordinator(|co| co.verify_partitions_in_txn(&txn_id, pid, epoch, &tp))
                .and_then(|rs| match rs.first() {
                    Some((_, code)) if code.is_err() => Err(*code),
                    _ => Ok(()),
                })
        }
    })
    .await;
    res.map_err(|code| error_for_version(TxnApi::Produce, version, code))
}

async fn produce_partition(
    core: &Arc<BrokerCore>,
    version: i16,
    acks: i16,
    topic: Option<&TopicMeta>,
    partition: i32,
    records: Option<Bytes>,
    transactional_id: Option<&str>,
) -> PartitionResult {
    let Some(topic) = topic else {
        return PartitionResult::error(
            ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
            "This server does not host this topic-partition.",
        );
    };
    let Some(log) = core.partition(topic.id, partition) else {
        return PartitionResult::error(
            ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
            format!("Partition {partition} of {} does not exist.", topic.name),
        );
    };
    if topic.is_internal() {
        return PartitionResult::error(
            ErrorCode::INVALID_TOPIC_EXCEPTION,
            format!("Cannot append to internal topic {}", topic.name),
        );
    }
    // One node is every in-sync replica there is: acks=all on a topic
    // asking for more is refused before anything is written, as Kafka
    // does with too few in-sync replicas.
    let min_isr = topic.config_i64("min.insync.replicas").unwrap_or(1);
    if acks == -1 && min_isr > 1 {
        return PartitionResult::error(
            ErrorCode::NOT_ENOUGH_REPLICAS,
            format!(
                "The size of the current ISR 1 is insufficient to satisfy the min.isr requirement of {min_isr} for partition {}-{partition}",
                topic.name
            ),
        );
    }
    let records = records.unwrap_or_default();
    let batches = match RecordBatchView::parse_all(records) {
        Ok(b) if !b.is_empty() => b,
        Ok(_) => {
            return PartitionResult::error(
                INVALID_RECORD,
                "The produce request holds no record batch.",
            );
        }
        Err(e) => return PartitionResult::error(ErrorCode::CORRUPT_MESSAGE, e.to_string()),
    };
    for b in &batches {
        if let Err(e) = b.verify_crc() {
            return PartitionResult::error(ErrorCode::CORRUPT_MESSAGE, e.to_string());
        }
        if b.is_transactional() && transactional_id.is_none() {
            return PartitionResult::error(
                ErrorCode::INVALID_REQUEST,
                "Transactional records in a produce request without a transactional id.",
            );
        }
    }
    if let (Some(txn_id), Some(first)) = (transactional_id, batches.first())
        && first.is_transactional()
        && let Err(code) =
            check_txn_partition(core, version, txn_id, first, &topic.name, partition).await
    {
        return PartitionResult::error(
            code,
            format!("The partition is not part of the producer's transaction: {code}"),
        );
    }
    // Validated after the transaction check, as Kafka validates records
    // when it appends them.
    if let Some(refused) = keyless_records(&batches, topic, partition) {
        core.metrics().add(
            "produce_keyless_records_refused_total",
            refused.record_errors.len() as u64,
        );
        return refused;
    }
    let opts = AppendOptions {
        now_ms: core.now_ms(),
        log_append_time: topic.log_append_time(),
        leader_epoch: 0,
    };
    let bytes = batches.iter().map(|b| b.size() as u64).sum();
    let res = with_log_append(core, log, bytes, move |l| l.append(&batches, opts)).await;
    match res {
        Ok(info) => {
            if !info.duplicate {
                core.notify_appended();
            }
            PartitionResult {
                error: ErrorCode::NONE,
                message: None,
                base_offset: info.base_offset,
                log_append_time: info.log_append_time,
                log_start_offset: info.log_start_offset,
                record_errors: Vec::new(),
            }
        }
        Err(e) => {
            if matches!(e, LogError::Io { .. }) {
                tracing::error!(topic = %topic.name, partition, error = %e, "append failed");
            }
            PartitionResult::error(e.error_code(), e.to_string())
        }
    }
}

/// Produce. `None` for acks=0, which gets no response.
pub(crate) async fn produce(
    core: &Arc<BrokerCore>,
    ctx: &RequestContext,
    req: ProduceRequest,
) -> Option<ProduceResponse> {
    let version = ctx.version();
    let acks = req.acks;
    let txn_id = req.transactional_id.as_ref().map(|t| t.0.to_string());
    // A transactional produce needs Write on the transactional id; without
    // it every partition is answered TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
    let txn_denied = txn_id
        .as_deref()
        .is_some_and(|id| !ctx.allowed(core, AclOperation::Write, &Resource::transactional_id(id)));
    let mut responses = Vec::with_capacity(req.topic_data.len());
    for t in req.topic_data {
        let topic = lookup_topic(
            core,
            t.name.0.as_str(),
            if version >= 13 {
                t.topic_id
            } else {
                Uuid::nil()
            },
        );
        let topic_denied = !ctx.allowed(
            core,
            AclOperation::Write,
            &Resource::topic(
                topic
                    .as_ref()
                    .map_or(t.name.0.as_str(), |m| m.name.as_str()),
            ),
        );
        let mut parts = Vec::with_capacity(t.partition_data.len());
        for p in t.partition_data {
            let r = if txn_denied {
                PartitionResult::error(
                    ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                    "Not authorized to write with this transactional id".to_string(),
                )
            } else if topic_denied {
                PartitionResult::error(
                    ErrorCode::TOPIC_AUTHORIZATION_FAILED,
                    "Not authorized to write to the topic".to_string(),
                )
            } else if !matches!(acks, -1..=1) {
                PartitionResult::error(
                    ErrorCode::INVALID_REQUIRED_ACKS,
                    format!("Invalid required acks {acks}; use -1, 0 or 1."),
                )
            } else {
                produce_partition(
                    core,
                    version,
                    acks,
                    topic.as_ref(),
                    p.index,
                    p.records,
                    txn_id.as_deref(),
                )
                .await
            };
            let mut resp = PartitionProduceResponse::default()
                .with_index(p.index)
                .with_error_code(r.error.0)
                .with_base_offset(r.base_offset)
                .with_log_append_time_ms(r.log_append_time)
                .with_log_start_offset(r.log_start_offset);
            if version >= 8 && r.error.is_err() {
                resp = resp.with_error_message(r.message.map(StrBytes::from_string));
                if !r.record_errors.is_empty() {
                    resp = resp.with_record_errors(
                        r.record_errors
                            .into_iter()
                            .map(|(i, why)| {
                                BatchIndexAndErrorMessage::default()
                                    .with_batch_index(i)
                                    .with_batch_index_error_message(Some(StrBytes::from_string(
                                        why,
                                    )))
                            })
                            .collect(),
                    );
                } else if r.error == INVALID_RECORD || r.error == ErrorCode::CORRUPT_MESSAGE {
                    resp = resp.with_record_errors(vec![BatchIndexAndErrorMessage::default()]);
                }
            }
            parts.push(resp);
        }
        responses.push(
            TopicProduceResponse::default()
                .with_name(t.name)
                .with_topic_id(t.topic_id)
                .with_partition_responses(parts),
        );
    }
    if acks == 0 {
        return None;
    }
    Some(ProduceResponse::default().with_responses(responses))
}

struct FetchPlan {
    topic_name: TopicName,
    topic_id: Uuid,
    /// (partition, fetch offset, max bytes, the client's current leader
    /// epoch: -1 for none).
    partitions: Vec<(i32, i64, i32, i32)>,
}

fn fetch_once(
    core: &BrokerCore,
    plan: &[FetchPlan],
    read_committed: bool,
    max_bytes: usize,
) -> (Vec<FetchableTopicResponse>, usize, bool) {
    let mut total = 0usize;
    // A partition that exists but could not be read (an offset out of
    // range, a leader epoch not ours): Kafka answers such a fetch at once.
    let mut read_error = false;
    let mut topics = Vec::with_capacity(plan.len());
    for t in plan {
        let meta = lookup_topic(core, t.topic_name.0.as_str(), t.topic_id);
        let mut parts = Vec::with_capacity(t.partitions.len());
        for &(partition, fetch_offset, partition_max_bytes, current_epoch) in &t.partitions {
            let base = PartitionData::default().with_partition_index(partition);
            let missing = if t.topic_id.is_nil() {
                ErrorCode::UNKNOWN_TOPIC_OR_PARTITION
            } else {
                ErrorCode::UNKNOWN_TOPIC_ID
            };
            let Some(log) = meta.as_ref().and_then(|m| core.partition(m.id, partition)) else {
                parts.push(base.with_error_code(missing.0).with_high_watermark(-1));
                continue;
            };
            // A client whose leader epoch is not this broker's (0): fenced
            // or unknown, as Kafka answers it, with nothing read.
            if let Some(e) = current_epoch_error(current_epoch) {
                read_error = true;
                parts.push(unreadable(base, e));
                continue;
            }
            let log = log.lock();
            let hw = log.high_watermark();
            let lso = log.last_stable_offset();
            let upper = if read_committed { lso } else { hw };
            // The response's MaxBytes bounds every partition, the first too
            // (as in Kafka), but the first always gets at least one batch.
            let budget = (partition_max_bytes.max(0) as usize).min(max_bytes.saturating_sub(total));
            let data = if budget == 0 && total > 0 {
                Ok(Bytes::new())
            } else {
                log.read_bounded(fetch_offset, budget.max(1), upper)
            };
            let pd = base
                .clone()
                .with_high_watermark(hw)
                .with_last_stable_offset(lso)
                .with_log_start_offset(log.log_start_offset());
            match data {
                Ok(bytes) => {
                    let aborted = if read_committed && !bytes.is_empty() {
                        let last = last_offset_of(&bytes).unwrap_or(upper);
                        Some(
                            log.aborted_transactions(fetch_offset, last + 1)
                                .into_iter()
                                .map(|a| {
                                    AbortedTransaction::default()
                                        .with_producer_id(ProducerId(a.producer_id))
                                        .with_first_offset(a.first_offset)
                                })
                                .collect(),
                        )
                    } else if read_committed {
                        Some(Vec::new())
                    } else {
                        None
                    };
                    total += bytes.len();
                    parts.push(
                        pd.with_records(Some(bytes))
                            .with_aborted_transactions(aborted),
                    );
                }
                // An offset out of range, above all.
                Err(e) => {
                    read_error = true;
                    parts.push(unreadable(base, e.error_code()));
                }
            }
        }
        topics.push(
            FetchableTopicResponse::default()
                .with_topic(t.topic_name.clone())
                .with_topic_id(t.topic_id)
                .with_partitions(parts),
        );
    }
    (topics, total, read_error)
}

/// A partition that exists but could not be read, as Kafka answers it: the
/// error, no watermarks and no log start (-1), no records; the client asks
/// ListOffsets (or its metadata) where to go on.
fn unreadable(base: PartitionData, error: ErrorCode) -> PartitionData {
    base.with_error_code(error.0)
        .with_high_watermark(-1)
        .with_last_stable_offset(-1)
        .with_log_start_offset(-1)
        .with_records(Some(Bytes::new()))
}

/// The last offset of the last batch in a fetch's data.
fn last_offset_of(bytes: &Bytes) -> Option<i64> {
    let mut b = bytes.clone();
    let mut last = None;
    while let Ok(Some(v)) = RecordBatchView::split_from(&mut b) {
        last = Some(v.last_offset());
    }
    last
}

pub(crate) async fn fetch(
    core: &Arc<BrokerCore>,
    ctx: &RequestContext,
    req: FetchRequest,
) -> FetchResponse {
    let version = ctx.version();
    // Fetch sessions (KIP-227), as Kafka reads them: an epoch of 0
    // (INITIAL) or -1 (FINAL) asks for a full fetch whatever the session
    // id (a session it names is closed; kafka-go sends id -1 with epoch
    // -1); any other epoch continues a session. This broker never hands
    // one out (it answers session id 0, as Kafka does when its cache is
    // full), so a continued session is always unknown.
    if version >= 7 && !matches!(req.session_epoch, 0 | -1) {
        return FetchResponse::default()
            .with_error_code(ErrorCode::FETCH_SESSION_ID_NOT_FOUND.0)
            .with_session_id(0);
    }
    let read_committed = version >= 4 && req.isolation_level == 1;
    let max_bytes = if version >= 3 && req.max_bytes > 0 {
        req.max_bytes as usize
    } else {
        usize::MAX
    };
    let plan: Vec<FetchPlan> = req
        .topics
        .iter()
        .map(|t| FetchPlan {
            topic_name: t.topic.clone(),
            topic_id: if version >= 13 {
                t.topic_id
            } else {
                Uuid::nil()
            },
            partitions: t
                .partitions
                .iter()
                .map(|p| {
                    // CurrentLeaderEpoch exists from v9 on.
                    let epoch = if version >= 9 {
                        p.current_leader_epoch
                    } else {
                        -1
                    };
                    (p.partition, p.fetch_offset, p.partition_max_bytes, epoch)
                })
                .collect(),
        })
        .collect();
    // Partitions of topics the principal may not Read are answered
    // TOPIC_AUTHORIZATION_FAILED and not read.
    let mut denied: Vec<FetchableTopicResponse> = Vec::new();
    let plan: Vec<FetchPlan> = plan
        .into_iter()
        .filter(|t| {
            let name = lookup_topic(core, t.topic_name.0.as_str(), t.topic_id)
                .map_or_else(|| t.topic_name.0.to_string(), |m| m.name.clone());
            if ctx.allowed(core, AclOperation::Read, &Resource::topic(name)) {
                return true;
            }
            denied.push(
                FetchableTopicResponse::default()
                    .with_topic(t.topic_name.clone())
                    .with_topic_id(t.topic_id)
                    .with_partitions(
                        t.partitions
                            .iter()
                            .map(|&(p, _, _, _)| {
                                PartitionData::default()
                                    .with_partition_index(p)
                                    .with_error_code(ErrorCode::TOPIC_AUTHORIZATION_FAILED.0)
                                    .with_high_watermark(-1)
                            })
                            .collect(),
                    ),
            );
            false
        })
        .collect();
    let deadline =
        tokio::time::Instant::now() + Duration::from_millis(req.max_wait_ms.max(0) as u64);
    let min_bytes = req.min_bytes.max(0) as usize;
    let mut appended = core.subscribe_appended();
    loop {
        appended.borrow_and_update();
        let (mut topics, total, read_error) = fetch_once(core, &plan, read_committed, max_bytes);
        topics.extend(denied.iter().cloned());
        let waiting_is_pointless = total >= min_bytes.max(1)
            || min_bytes == 0
            || read_error
            || tokio::time::Instant::now() >= deadline
            || topics
                .iter()
                .all(|t| t.partitions.iter().all(|p| p.error_code != 0));
        if waiting_is_pointless {
            return FetchResponse::default()
                .with_responses(topics)
                .with_session_id(0);
        }
        tokio::select! {
            r = appended.changed() => if r.is_err() {
                return FetchResponse::default().with_responses(topics).with_session_id(0);
            },
            _ = tokio::time::sleep_until(deadline) => {}
        }
    }
}

/// ListOffsets special timestamps.
const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
const MAX_TIMESTAMP: i64 = -3;
const EARLIEST_LOCAL: i64 = -4;

pub(crate) fn list_offsets(
    core: &BrokerCore,
    ctx: &RequestContext,
    req: ListOffsetsRequest,
) -> ListOffsetsResponse {
    let read_committed = ctx.version() >= 2 && req.isolation_level == 1;
    let topics = req
        .topics
        .into_iter()
        .map(|t| {
            // Describe on the topic, else every partition is answered
            // TOPIC_AUTHORIZATION_FAILED (checked before existence).
            if !ctx.allowed(
                core,
                AclOperation::Describe,
                &Resource::topic(t.name.0.as_str()),
            ) {
                let partitions = t
                    .partitions
                    .iter()
                    .map(|p| {
                        ListOffsetsPartitionResponse::default()
                            .with_partition_index(p.partition_index)
                            .with_error_code(ErrorCode::TOPIC_AUTHORIZATION_FAILED.0)
                    })
                    .collect();
                return ListOffsetsTopicResponse::default()
                    .with_name(t.name)
                    .with_partitions(partitions);
            }
            let meta = lookup_topic(core, t.name.0.as_str(), Uuid::nil());
            let partitions = t
                .partitions
                .into_iter()
                .map(|p| {
                    let base = ListOffsetsPartitionResponse::default()
                        .with_partition_index(p.partition_index);
                    let Some(log) = meta
                        .as_ref()
                        .and_then(|m| core.partition(m.id, p.partition_index))
                    else {
                        return base.with_error_code(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.0);
                    };
                    // CurrentLeaderEpoch exists from v4 on.
                    if ctx.version() >= 4
                        && let Some(e) = current_epoch_error(p.current_leader_epoch)
                    {
                        return base.with_error_code(e.0);
                    }
                    let log = log.lock();
                    // A timestamp lookup answers only offsets a consumer of
                    // this isolation level may read: below the LSO for
                    // read_committed (as Kafka filters them).
                    let readable = |x: crate::log::TimestampOffset| {
                        if read_committed && x.offset >= log.last_stable_offset() {
                            (-1, -1)
                        } else {
                            (x.offset, x.timestamp)
                        }
                    };
                    let (offset, timestamp) = match p.timestamp {
                        LATEST => (
                            if read_committed {
                                log.last_stable_offset()
                            } else {
                                log.high_watermark()
                            },
                            -1,
                        ),
                        EARLIEST | EARLIEST_LOCAL => (log.log_start_offset(), -1),
                        // KIP-734 (v7+): the record with the largest timestamp.
                        MAX_TIMESTAMP if ctx.version() >= 7 => match log.max_timestamp_offset() {
                            Ok(Some(x)) => readable(x),
                            Ok(None) => (-1, -1),
                            Err(e) => return base.with_error_code(e.error_code().0),
                        },
                        MAX_TIMESTAMP => {
                            return base.with_error_code(ErrorCode::UNSUPPORTED_VERSION.0);
                        }
                        ts if ts >= 0 => match log.offset_for_timestamp(ts) {
                            Ok(Some(x)) => readable(x),
                            Ok(None) => (-1, -1),
                            Err(e) => return base.with_error_code(e.error_code().0),
                        },
                        _ => return base.with_error_code(ErrorCode::INVALID_REQUEST.0),
                    };
                    let found = base.with_offset(offset).with_timestamp(timestamp);
                    // LeaderEpoch exists from v4 on; setting it (even to 0)
                    // at v1-v3 makes the response unencodable, which closed
                    // kcat's connection (librdkafka 2.0 asks ListOffsets v2).
                    if ctx.version() >= 4 {
                        found.with_leader_epoch(0)
                    } else {
                        found
                    }
                })
                .collect();
            ListOffsetsTopicResponse::default()
                .with_name(t.name)
                .with_partitions(partitions)
        })
        .collect();
    ListOffsetsResponse::default().with_topics(topics)
}

/// DeleteRecords (KIP-107): raises each partition's log start offset.
///
/// As Kafka's KafkaApis: Delete on the topic, else every partition of it
/// is TOPIC_AUTHORIZATION_FAILED; then an unknown topic or partition is
/// UNKNOWN_TOPIC_OR_PARTITION; an internal topic is
/// INVALID_TOPIC_EXCEPTION; a topic whose `cleanup.policy` lacks
/// `delete` is POLICY_VIOLATION; an offset above the high watermark (or
/// negative other than -1, the high watermark) is OFFSET_OUT_OF_RANGE.
/// The low watermark answered is the new log start offset, made durable
/// first in disk mode.
pub(crate) async fn delete_records(
    core: &Arc<BrokerCore>,
    ctx: &RequestContext,
    req: DeleteRecordsRequest,
) -> DeleteRecordsResponse {
    let mut topics = Vec::with_capacity(req.topics.len());
    for t in req.topics {
        let name = t.name.0.to_string();
        let denied = !ctx.allowed(core, AclOperation::Delete, &Resource::topic(&name));
        let meta = lookup_topic(core, &name, Uuid::nil());
        let mut parts = Vec::with_capacity(t.partitions.len());
        for p in t.partitions {
            let result = DeleteRecordsPartitionResult::default()
                .with_partition_index(p.partition_index)
                .with_low_watermark(-1);
            let outcome = if denied {
                Err(ErrorCode::TOPIC_AUTHORIZATION_FAILED)
            } else {
                match meta
                    .as_ref()
                    .and_then(|m| core.partition(m.id, p.partition_index).map(|l| (m, l)))
                {
                    None => Err(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION),
                    Some((m, _)) if m.is_internal() => Err(ErrorCode::INVALID_TOPIC_EXCEPTION),
                    Some((m, _))
                        if !m
                            .config("cleanup.policy")
                            .is_some_and(|c| c.split(',').any(|x| x.trim() == "delete")) =>
                    {
                        Err(ErrorCode::POLICY_VIOLATION)
                    }
                    Some((m, log)) => {
                        let offset = p.offset;
                        let run = move || log.lock().delete_records_before(offset);
                        let res = match core.config().storage {
                            StorageMode::Memory => run(),
                            StorageMode::Directory(_) => tokio::task::spawn_blocking(run)
                                .await
                                .expect("storage task panicked"),
                        };
                        let res = res.map_err(|e| {
                            if matches!(e, LogError::Io { .. }) {
                                tracing::error!(topic = %name, partition = p.partition_index, error = %e, "DeleteRecords failed");
                            }
                            e.error_code()
                        });
                        if let Ok(low) = res {
                            share_start_follows(core, m.id, p.partition_index, low).await;
                        }
                        res
                    }
                }
            };
            parts.push(match outcome {
                Ok(low) => result.with_low_watermark(low),
                Err(code) => result.with_error_code(code.0),
            });
        }
        topics.push(
            DeleteRecordsTopicResult::default()
                .with_name(t.name)
                .with_partitions(parts),
        );
    }
    DeleteRecordsResponse::default().with_topics(topics)
}

/// The share partitions of every group on the partition move their start
/// offset up to the new log start offset now, as Kafka's do, so that
/// DescribeShareGroupOffsets and the lag agree with the log at once. The
/// records are deleted whatever happens here: a failed journal write is
/// logged, and the next snapshot of those share partitions repairs it.
async fn share_start_follows(core: &BrokerCore, topic_id: Uuid, partition: i32, log_start: i64) {
    let (_, durable) = core
        .shares()
        .log_start_moved_deferred(topic_id, partition, log_start, core.now_ms())
        .split();
    if durable.wait().await.is_err() {
        tracing::warn!(%topic_id, partition, "share state: a start offset moved by DeleteRecords was not written");
    }
}
