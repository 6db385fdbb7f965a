//! KIP-1191's dead-letter writer: writes the records a share group gave up
//! on (ARCHIVING) to the group's dead-letter topic, then lets them become
//! ARCHIVED.
//!
//! One task per broker ([`run`]) drains the share service every
//! [`INTERVAL`]: [`DeadLetterWriter::pass`] takes the ARCHIVING runs
//! (`ShareService::take_dead_letters`), waits until the share-state journal
//! holds them as ARCHIVING, checks the group's queue, builds one record per
//! offset and appends them to the dead-letter partition's log directly (the
//! broker is the writer, as Kafka's share-partition leader is), then
//! finishes the runs. docs/DESIGN.md D24 gives the decisions; in short:
//!
//! - The record is Kafka 4.4's: six headers, `__dlq.errors.topic` (the
//!   source topic's name), `.partition`, `.offset`, `.group`,
//!   `.delivery.count` and `.message` ("Offset rejected by client." or
//!   "Offset delivery count exceeded the threshold."), UTF-8 decimal text;
//!   the source record's key and value only with
//!   `errors.deadletterqueue.copy.record.enable=true` (its headers never);
//!   the timestamp is the time of writing (CreateTime); the dead-letter
//!   partition is the source partition modulo the dead-letter topic's
//!   partition count.
//! - The queue is checked at every write, as Kafka does, since the configs
//!   are dynamic: the group names a topic not starting with `__`, the name
//!   carries `errors.deadletterqueue.topic.name.prefix`, the topic exists
//!   with `errors.deadletterqueue.group.enable=true`, or it does not and
//!   `errors.deadletterqueue.auto.create.topics.enable=true` lets the
//!   writer create it (default partition count, that topic config and
//!   `message.timestamp.type=CreateTime`). A queue that fails these checks
//!   is a permanent failure.
//! - A failed append is tried again on the next passes, up to
//!   [`MAX_ATTEMPTS`] in all. A permanent failure, or the last failed
//!   attempt, archives the records without a dead-letter record, as Kafka
//!   does (a record that cannot be dead-lettered must not hold the start
//!   offset for ever), but never silently: each is logged at error level
//!   and counted in `sharestream_share_group_dead_letter_failed_records_total`.
//! - At least once: a crash after the append and before the ARCHIVED
//!   snapshot is written brings the run back ARCHIVING, and it is written
//!   again. The headers identify a duplicate (group, topic, partition,
//!   offset).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::watch;

use crate::core::BrokerCore;
use crate::log::AppendOptions;
use crate::share::DeadLetterRange;
use crate::share_service::dead_letters::DeadLetterJob;
use sharestream_protocol::ErrorCode;
use sharestream_protocol::records::{
    BatchBuilder, BatchSpec, DEFAULT_MAX_DECOMPRESSED, RecordBatchView, RecordHeader,
};

/// How often the writer looks for ARCHIVING runs.
pub const INTERVAL: std::time::Duration = std::time::Duration::from_millis(20);
/// Attempts of one run's write before it is given up (Kafka's
/// `ShareGroupDLQStateManager` makes five).
pub const MAX_ATTEMPTS: u32 = 5;
/// The topic config that lets a topic be a dead-letter topic.
pub const GROUP_ENABLE_TOPIC_CONFIG: &str = "errors.deadletterqueue.group.enable";

/// The `__dlq.errors.*` headers, in the order Kafka writes them.
pub const HEADER_TOPIC: &str = "__dlq.errors.topic";
/// Source partition.
pub const HEADER_PARTITION: &str = "__dlq.errors.partition";
/// Source offset.
pub const HEADER_OFFSET: &str = "__dlq.errors.offset";
/// Share group.
pub const HEADER_GROUP: &str = "__dlq.errors.group";
/// Delivery count.
pub const HEADER_DELIVERY_COUNT: &str = "__dlq.errors.delivery.count";
/// Why ([`DeadLetterCause::message`]).
pub const HEADER_MESSAGE: &str = "__dlq.errors.message";

/// Why a write did not happen.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Failure {
    /// The queue is misconfigured: no retry helps until an operator acts.
    Permanent(String),
    /// The append failed; worth another attempt.
    Transient(String),
}

/// What one [`DeadLetterWriter::pass`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pass {
    /// Dead-letter records appended.
    pub written: u64,
    /// Records archived without a dead-letter record.
    pub failed: u64,
    /// Runs given back for another attempt.
    pub retried: u64,
}

/// The writer and its retry counts (not persisted: a restart starts the
/// count again).
#[derive(Debug, Default)]
pub struct DeadLetterWriter {
    attempts: HashMap<(String, uuid::Uuid, i32, i64), u32>,
}

impl DeadLetterWriter {
    /// A writer with no attempts counted.
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes every ARCHIVING run of the broker, writes it, and finishes it
    /// (or gives it back for a later attempt). Blocking: call it off the
    /// async threads.
    pub fn pass(&mut self, core: &BrokerCore) -> Pass {
        let mut out = Pass::default();
        let (jobs, durable) = core.shares().take_dead_letters();
        if jobs.is_empty() {
            return out;
        }
        if durable.wait_blocking().is_err() {
            // ARCHIVING is not on disk: writing now could leave a dead
            // letter that a crash forgets was written, or worse, one
            // written for a record the restart finds ACQUIRED. Try later.
            tracing::error!(
                "share state: ARCHIVING records were not persisted; their dead-letter records wait"
            );
            for job in &jobs {
                core.shares().return_dead_letters(job);
            }
            out.retried += jobs.len() as u64;
            return out;
        }
        for job in jobs {
            let records: u64 = job
                .ranges
                .iter()
                .map(|r| (r.last_offset - r.first_offset + 1) as u64)
                .sum();
            let attempt_key = (
                job.group_id.clone(),
                job.topic_id,
                job.partition,
                job.ranges.first().map_or(-1, |r| r.first_offset),
            );
            if sharestream_common::failpoints::hit("dead_letters.hold") {
                // Tests: the writer has not got to this run yet.
                core.shares().return_dead_letters(&job);
                out.retried += 1;
                continue;
            }
            match write_job(core, &job) {
                Ok(()) if sharestream_common::failpoints::hit("dead_letters.after_append") => {
                    // Tests: the crash window of D24. The records are
                    // appended and the run is neither finished nor handed
                    // back: it stays ARCHIVING until a restart.
                    out.written += records;
                }
                Ok(()) => {
                    self.attempts.remove(&attempt_key);
                    core.shares().finish_dead_letters(&job, records, 0);
                    out.written += records;
                }
                Err(Failure::Transient(why)) => {
                    core.shares().count_dead_letter_error(&job.group_id);
                    let n = self.attempts.entry(attempt_key.clone()).or_insert(0);
                    *n += 1;
                    if *n < MAX_ATTEMPTS {
                        tracing::warn!(
                            group = %job.group_id, topic_id = %job.topic_id, partition = job.partition,
                            attempt = *n, error = %why,
                            "dead-letter write failed; it will be tried again"
                        );
                        core.shares().return_dead_letters(&job);
                        out.retried += 1;
                    } else {
                        self.attempts.remove(&attempt_key);
                        give_up(core, &job, records, &why);
                        out.failed += records;
                    }
                }
                Err(Failure::Permanent(why)) => {
                    give_up(core, &job, records, &why);
                    out.failed += records;
                }
            }
        }
        out
    }
}

/// Archives the job's records without dead-letter records: logged and
/// counted, never silent.
fn give_up(core: &BrokerCore, job: &DeadLetterJob, records: u64, why: &str) {
    for r in &job.ranges {
        tracing::error!(
            group = %job.group_id, topic_id = %job.topic_id, partition = job.partition,
            first_offset = r.first_offset, last_offset = r.last_offset,
            cause = r.cause.message(), error = %why,
            "records archived WITHOUT their dead-letter records \
             (counted in sharestream_share_group_dead_letter_failed_records_total)"
        );
    }
    core.shares().finish_dead_letters(job, 0, records);
}

/// The broker's two dead-letter settings in force: this node's dynamic
/// value, else the cluster-wide dynamic default, else the static setting
/// (as Kafka resolves a dynamic broker config).
fn broker_settings(core: &BrokerCore) -> (bool, String) {
    use crate::group::{ERRORS_DLQ_AUTO_CREATE_TOPICS_ENABLE, ERRORS_DLQ_TOPIC_NAME_PREFIX};
    let fixed = core.shares().broker_config();
    let dynamic = core.dynamic_broker_configs();
    let pick = |name: &str| {
        dynamic
            .node
            .get(name)
            .or_else(|| dynamic.cluster_default.get(name))
            .map(|v| v.trim().to_string())
    };
    let auto_create = pick(ERRORS_DLQ_AUTO_CREATE_TOPICS_ENABLE)
        .map_or(fixed.dlq_auto_create_topics_enable, |v| {
            v.eq_ignore_ascii_case("true")
        });
    let prefix = pick(ERRORS_DLQ_TOPIC_NAME_PREFIX).unwrap_or(fixed.dlq_topic_name_prefix);
    (auto_create, prefix)
}

/// The dead-letter topic of `group_id` after Kafka's checks, created when
/// missing and allowed: its name, id, partition count and whether it uses
/// LogAppendTime.
fn resolve_queue(
    core: &BrokerCore,
    group_id: &str,
    topic: &str,
) -> Result<crate::topics::TopicMeta, Failure> {
    if topic.is_empty() {
        return Err(Failure::Permanent(format!(
            "share group {group_id} has no dead-letter topic (errors.deadletterqueue.topic.name is empty)"
        )));
    }
    if topic.starts_with("__") {
        return Err(Failure::Permanent(format!(
            "the dead-letter topic {topic} of share group {group_id} starts with '__' \
             (errors.deadletterqueue.topic.name)"
        )));
    }
    let (auto_create, prefix) = broker_settings(core);
    if !prefix.is_empty() && !topic.starts_with(prefix.as_str()) {
        return Err(Failure::Permanent(format!(
            "the dead-letter topic {topic} of share group {group_id} does not start with \
             errors.deadletterqueue.topic.name.prefix={prefix}"
        )));
    }
    if let Some(meta) = core.topics().read().get(topic).cloned() {
        let enabled = meta
            .configs
            .get(GROUP_ENABLE_TOPIC_CONFIG)
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
        if !enabled {
            return Err(Failure::Permanent(format!(
                "topic {topic}, the dead-letter topic of share group {group_id}, does not have \
                 {GROUP_ENABLE_TOPIC_CONFIG}=true"
            )));
        }
        return Ok(meta);
    }
    if !auto_create {
        return Err(Failure::Permanent(format!(
            "the dead-letter topic {topic} of share group {group_id} does not exist and \
             errors.deadletterqueue.auto.create.topics.enable is false"
        )));
    }
    let configs: BTreeMap<String, String> = [
        (GROUP_ENABLE_TOPIC_CONFIG, "true"),
        ("message.timestamp.type", "CreateTime"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    match core.create_topic(topic, core.config().default_partitions, 1, configs, false) {
        Ok(meta) => {
            tracing::info!(
                topic,
                group = group_id,
                partitions = meta.partitions,
                "created the dead-letter topic (errors.deadletterqueue.auto.create.topics.enable)"
            );
            Ok(meta)
        }
        Err(e) if e.code == ErrorCode::TOPIC_ALREADY_EXISTS => core
            .topics()
            .read()
            .get(topic)
            .cloned()
            .ok_or_else(|| Failure::Transient(format!("topic {topic} vanished"))),
        Err(e) => Err(Failure::Transient(format!(
            "creating the dead-letter topic {topic} failed: {}",
            e.message
        ))),
    }
}

/// The key and value of every source record of `ranges` the log still
/// holds (absent ones, e.g. removed by retention, get none).
fn source_records(
    core: &BrokerCore,
    job: &DeadLetterJob,
) -> HashMap<i64, (Option<Bytes>, Option<Bytes>)> {
    let mut out = HashMap::new();
    let Some(log) = core.partition(job.topic_id, job.partition) else {
        return out;
    };
    let log = log.lock();
    for r in &job.ranges {
        let mut next = r.first_offset.max(log.log_start_offset());
        while next <= r.last_offset {
            let Ok(bytes) = log.read(next, 1 << 20) else {
                break;
            };
            let Ok(batches) = RecordBatchView::parse_all(bytes) else {
                break;
            };
            let mut progressed = false;
            for b in batches {
                if b.last_offset() < next {
                    continue;
                }
                progressed = true;
                let base = b.base_offset();
                if !b.is_control()
                    && let Ok(recs) = b.records(DEFAULT_MAX_DECOMPRESSED)
                {
                    for rec in recs {
                        let o = rec.offset(base);
                        if o >= r.first_offset && o <= r.last_offset {
                            out.insert(o, (rec.key, rec.value));
                        }
                    }
                }
                next = b.last_offset() + 1;
                if next > r.last_offset {
                    break;
                }
            }
            if !progressed {
                break;
            }
        }
    }
    out
}

/// The dead-letter record of `offset`: Kafka's six headers.
fn headers(
    source_topic: &str,
    job: &DeadLetterJob,
    range: &DeadLetterRange,
    offset: i64,
) -> Vec<RecordHeader> {
    let text = |s: String| Some(Bytes::from(s));
    vec![
        RecordHeader::new(HEADER_TOPIC, text(source_topic.to_string())),
        RecordHeader::new(HEADER_PARTITION, text(job.partition.to_string())),
        RecordHeader::new(HEADER_OFFSET, text(offset.to_string())),
        RecordHeader::new(HEADER_GROUP, text(job.group_id.clone())),
        RecordHeader::new(
            HEADER_DELIVERY_COUNT,
            text(range.delivery_count.to_string()),
        ),
        RecordHeader::new(HEADER_MESSAGE, text(range.cause.message().to_string())),
    ]
}

/// Writes the dead-letter records of one job.
fn write_job(core: &BrokerCore, job: &DeadLetterJob) -> Result<(), Failure> {
    let config = core.shares().group_config(&job.group_id);
    let queue = resolve_queue(core, &job.group_id, &config.dlq_topic_name)?;
    let source_topic = core
        .topics()
        .read()
        .get_by_id(&job.topic_id)
        .map(|t| t.name.clone())
        // Kafka writes the topic id when the name is unknown (deleted).
        .unwrap_or_else(|| job.topic_id.to_string());
    let partition = job.partition.rem_euclid(queue.partitions.max(1));
    let log = core
        .partition(queue.id, partition)
        .ok_or_else(|| Failure::Transient(format!("no log for {}-{partition}", queue.name)))?;
    let copies = if config.dlq_copy_record_enable {
        source_records(core, job)
    } else {
        HashMap::new()
    };
    let now = core.now_ms();
    let max_bytes = log.lock().config().max_message_bytes;
    let mut batch = BatchBuilder::new(BatchSpec::default());
    let mut size = 0usize;
    let flush = |batch: &mut BatchBuilder| -> Result<(), Failure> {
        if batch.is_empty() {
            return Ok(());
        }
        let bytes = batch
            .build()
            .map_err(|e| Failure::Permanent(format!("encoding the dead-letter batch: {e}")))?;
        let view = RecordBatchView::parse_all(bytes)
            .ok()
            .and_then(|mut v| v.pop())
            .ok_or_else(|| Failure::Permanent("the dead-letter batch does not parse".into()))?;
        let opts = AppendOptions {
            now_ms: now,
            log_append_time: queue.log_append_time(),
            leader_epoch: 0,
        };
        log.lock()
            .append(&[view], opts)
            .map_err(|e| match e.error_code() {
                ErrorCode::MESSAGE_TOO_LARGE | ErrorCode::RECORD_LIST_TOO_LARGE => {
                    Failure::Permanent(format!("appending to {}-{partition}: {e}", queue.name))
                }
                _ => Failure::Transient(format!("appending to {}-{partition}: {e}", queue.name)),
            })?;
        core.notify_appended();
        *batch = BatchBuilder::new(BatchSpec::default());
        Ok(())
    };
    for r in &job.ranges {
        for offset in r.first_offset..=r.last_offset {
            let (key, value) = copies.get(&offset).cloned().unwrap_or((None, None));
            let hs = headers(&source_topic, job, r, offset);
            // A generous estimate of the record's encoded size.
            let est = 64
                + key.as_ref().map_or(0, |k| k.len())
                + value.as_ref().map_or(0, |v| v.len())
                + hs.iter()
                    .map(|h| h.key.len() + h.value.as_ref().map_or(0, |v| v.len()) + 10)
                    .sum::<usize>();
            if !batch.is_empty() && size + est + 61 > max_bytes {
                flush(&mut batch)?;
                size = 0;
            }
            batch.append(now, key, value, hs);
            size += est;
        }
    }
    flush(&mut batch)
}

/// The writer's task: a pass every [`INTERVAL`] until shutdown.
pub async fn run(core: Arc<BrokerCore>, mut shutdown: watch::Receiver<bool>) {
    let writer = Arc::new(parking_lot::Mutex::new(DeadLetterWriter::new()));
    let mut tick = tokio::time::interval(INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {
                let core = core.clone();
                let writer = writer.clone();
                let _ = tokio::task::spawn_blocking(move || writer.lock().pass(&core)).await;
            }
            _ = shutdown.changed() => break,
        }
    }
}
