//! KIP-1191 on the share service's side: the hand-off of ARCHIVING runs to
//! the broker's dead-letter writer ([`crate::dead_letter_writer`]), their
//! completion, and the writer's counters.
//!
//! The order that makes a dead letter survive a crash (docs/DESIGN.md D24):
//! [`ShareService::take_dead_letters`] returns the runs together with a
//! [`Durable`] covering every snapshot queued so far, so the writer appends
//! a dead-letter record only once its run is on disk as ARCHIVING; then
//! [`ShareService::finish_dead_letters`] makes the run ARCHIVED. A crash
//! between the two leaves it ARCHIVING, and the restored partition hands it
//! out again: each dead letter is written at least once.

use std::collections::BTreeMap;

use uuid::Uuid;

use super::{Durable, ShareService, partition_config};
use crate::group::SharePartitionKey;
use crate::share::DeadLetterRange;

/// The ARCHIVING runs of one share partition, taken for writing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetterJob {
    /// The share group.
    pub group_id: String,
    /// The source topic.
    pub topic_id: Uuid,
    /// The source partition.
    pub partition: i32,
    /// The runs, in offset order of their archiving.
    pub ranges: Vec<DeadLetterRange>,
}

/// Counters of the dead-letter queue, per share group.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeadLetterCounts {
    /// Dead-letter records written (Kafka's DeadLetterQueueRecordCount).
    pub records_written: u64,
    /// Produce attempts that failed and will be tried again.
    pub write_errors: u64,
    /// Records archived WITHOUT a dead-letter record, because the queue is
    /// misconfigured or the write kept failing (logged at error level).
    pub records_failed: u64,
}

impl ShareService {
    /// Whether `share.version` allows dead-letter queues (at least 2):
    /// off, no record becomes ARCHIVING, whatever the group configures.
    /// Share partitions follow at once.
    pub fn set_dead_letter_feature(&self, enabled: bool) {
        let mut inner = self.inner.lock();
        if inner.dead_letter_feature == enabled {
            return;
        }
        inner.dead_letter_feature = enabled;
        let groups: Vec<String> = inner
            .partitions
            .keys()
            .map(|k| k.group_id.clone())
            .collect();
        for g in groups {
            let config = partition_config(&inner.coordinator.group_config(&g), enabled);
            for (k, e) in inner.partitions.iter_mut() {
                if k.group_id == g {
                    e.sp.set_config(config);
                }
            }
        }
    }

    /// Takes every ARCHIVING run not yet handed out, with the durability of
    /// the snapshots that hold them ARCHIVING: the writer must wait for it
    /// before writing.
    pub fn take_dead_letters(&self) -> (Vec<DeadLetterJob>, Durable) {
        let mut inner = self.inner.lock();
        let mut jobs = Vec::new();
        for (k, e) in inner.partitions.iter_mut() {
            if !e.sp.has_dead_letters() {
                continue;
            }
            jobs.push(DeadLetterJob {
                group_id: k.group_id.clone(),
                topic_id: k.topic_id,
                partition: k.partition,
                ranges: e.sp.take_dead_letters(),
            });
        }
        let durable = match &self.journal {
            Some(j) if !jobs.is_empty() => j.durable(0, j.enqueued()),
            _ => Durable::default(),
        };
        (jobs, durable)
    }

    /// Gives runs back for a later attempt.
    pub fn return_dead_letters(&self, job: &DeadLetterJob) {
        let k = key_of(job);
        if let Some(e) = self.inner.lock().partitions.get_mut(&k) {
            e.sp.return_dead_letters(&job.ranges);
        }
    }

    /// The runs of `job` are done: written (`written` records), or given
    /// up (`failed` records, never silently: the writer logged them). Their
    /// ARCHIVING records become ARCHIVED (persisted, not awaited: a crash
    /// before it is written makes them ARCHIVING again, D24).
    pub fn finish_dead_letters(&self, job: &DeadLetterJob, written: u64, failed: u64) {
        let k = key_of(job);
        let mut inner = self.inner.lock();
        {
            let c = inner
                .dead_letter_counts
                .entry(job.group_id.clone())
                .or_default();
            c.records_written += written;
            c.records_failed += failed;
        }
        let mut available = false;
        if let Some(e) = inner.partitions.get_mut(&k) {
            for r in &job.ranges {
                available |=
                    e.sp.finish_dead_letters(r.first_offset, r.last_offset)
                        .1
                        .records_available;
            }
        }
        inner.persist_if_dirty(&k);
        drop(inner);
        if available {
            self.wake();
        }
    }

    /// Counts one failed write attempt of `group_id`.
    pub fn count_dead_letter_error(&self, group_id: &str) {
        self.inner
            .lock()
            .dead_letter_counts
            .entry(group_id.to_string())
            .or_default()
            .write_errors += 1;
    }

    /// The dead-letter counters of every group that has had a dead letter.
    pub fn dead_letter_counts(&self) -> BTreeMap<String, DeadLetterCounts> {
        self.inner.lock().dead_letter_counts.clone()
    }

    /// The counters in Prometheus text, labelled by group.
    pub fn render_dead_letter_prometheus(&self) -> String {
        use std::fmt::Write as _;
        let counts = self.dead_letter_counts();
        let mut out = String::new();
        type Series = (&'static str, &'static str, fn(&DeadLetterCounts) -> u64);
        let series: [Series; 3] = [
            (
                "share_group_dead_letter_records_total",
                "Dead-letter records written (KIP-1191).",
                |c| c.records_written,
            ),
            (
                "share_group_dead_letter_write_errors_total",
                "Dead-letter writes that failed and were retried.",
                |c| c.write_errors,
            ),
            (
                "share_group_dead_letter_failed_records_total",
                "Records archived without their dead-letter record (misconfigured queue or failed writes; logged).",
                |c| c.records_failed,
            ),
        ];
        for (name, help, get) in series {
            let _ = writeln!(out, "# HELP sharestream_{name} {help}");
            let _ = writeln!(out, "# TYPE sharestream_{name} counter");
            for (g, c) in &counts {
                let _ = writeln!(
                    out,
                    "sharestream_{name}{{group=\"{}\"}} {}",
                    g.replace('\\', "\\\\").replace('"', "\\\""),
                    get(c)
                );
            }
        }
        out
    }
}

fn key_of(job: &DeadLetterJob) -> SharePartitionKey {
    SharePartitionKey {
        group_id: job.group_id.clone(),
        topic_id: job.topic_id,
        partition: job.partition,
    }
}
