//! DescribeLogDirs (key 35, v1-4): where this broker keeps each partition
//! and how large it is. `kafka-log-dirs.sh --describe` and the admin
//! client's `describeLogDirs` and `describeReplicaLogDirs` ask it, and
//! cluster UIs show its sizes as the topics' sizes.
//!
//! The broker has one log directory: its data directory (`--data-dir`),
//! as an absolute path, with the total and usable bytes of its file
//! system (v4). With `--memory` there is no directory on disk: the one
//! entry is named `memory`, and its total and usable bytes are -1, the
//! schema's "unknown".
//!
//! Each partition's size is the bytes of its log segments. Its offset lag
//! is 0 and it is never a future log: the broker is the leader of every
//! partition, and no log moves between directories (AlterReplicaLogDirs is
//! not served). A requested topic or partition that does not exist is
//! left out of the answer, as Kafka leaves out the replicas a broker does
//! not hold; a request with no topic list (null) asks for every partition.
//!
//! Authorization, as Kafka: Describe on the cluster. A refused request
//! gets no directory; from v3 the top-level error code says
//! CLUSTER_AUTHORIZATION_FAILED (v1 and v2 have no such field).

use std::collections::BTreeMap;

use kafka_protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

use super::RequestContext;
use crate::acl::{AclOperation, Resource};
use crate::core::BrokerCore;
use sharestream_protocol::ErrorCode;

/// The name of the one log directory of a broker started with `--memory`.
pub(crate) const MEMORY_LOG_DIR: &str = "memory";

/// The total and usable bytes of the file system that holds `dir`, or
/// (-1, -1) when it cannot be read.
fn volume_bytes(dir: &std::path::Path) -> (i64, i64) {
    match rustix::fs::statvfs(dir) {
        Ok(s) => {
            let total = s.f_blocks.saturating_mul(s.f_frsize);
            let usable = s.f_bavail.saturating_mul(s.f_frsize);
            (
                i64::try_from(total).unwrap_or(i64::MAX),
                i64::try_from(usable).unwrap_or(i64::MAX),
            )
        }
        Err(e) => {
            tracing::warn!(dir = %dir.display(), error = %e, "cannot read the log directory's file system size");
            (-1, -1)
        }
    }
}

pub(crate) fn describe(
    core: &BrokerCore,
    ctx: &RequestContext,
    req: DescribeLogDirsRequest,
) -> DescribeLogDirsResponse {
    let resp = DescribeLogDirsResponse::default();
    if !ctx.allowed(core, AclOperation::Describe, &Resource::cluster()) {
        if ctx.version() >= 3 {
            return resp.with_error_code(ErrorCode::CLUSTER_AUTHORIZATION_FAILED.0);
        }
        return resp;
    }
    // The partitions asked for, by topic: None = all of the topic's.
    let asked: Option<BTreeMap<String, Vec<i32>>> = req.topics.map(|ts| {
        let mut m: BTreeMap<String, Vec<i32>> = BTreeMap::new();
        for t in ts {
            m.entry(t.topic.0.to_string())
                .or_default()
                .extend(t.partitions);
        }
        m
    });
    let metas: Vec<_> = {
        let registry = core.topics().read();
        match &asked {
            None => registry.iter().map(|m| (m.clone(), None)).collect(),
            Some(asked) => asked
                .iter()
                .filter_map(|(name, ps)| registry.get(name).map(|m| (m.clone(), Some(ps.clone()))))
                .collect(),
        }
    };
    let topics = metas
        .into_iter()
        .filter_map(|(meta, ps)| {
            let mut indexes: Vec<i32> = match ps {
                None => (0..meta.partitions).collect(),
                Some(ps) => ps,
            };
            indexes.sort_unstable();
            indexes.dedup();
            let partitions: Vec<DescribeLogDirsPartition> = indexes
                .into_iter()
                .filter_map(|p| {
                    let log = core.partition(meta.id, p)?;
                    let size = log.lock().size_bytes();
                    Some(
                        DescribeLogDirsPartition::default()
                            .with_partition_index(p)
                            .with_partition_size(i64::try_from(size).unwrap_or(i64::MAX))
                            .with_offset_lag(0)
                            .with_is_future_key(false),
                    )
                })
                .collect();
            (!partitions.is_empty()).then(|| {
                DescribeLogDirsTopic::default()
                    .with_name(TopicName(StrBytes::from_string(meta.name.clone())))
                    .with_partitions(partitions)
            })
        })
        .collect();
    let (name, (total, usable)) = match core.log_dir() {
        Some(dir) => {
            let abs = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
            (abs.display().to_string(), volume_bytes(&abs))
        }
        None => (MEMORY_LOG_DIR.to_string(), (-1, -1)),
    };
    let mut result = DescribeLogDirsResult::default()
        .with_log_dir(StrBytes::from_string(name))
        .with_topics(topics);
    if ctx.version() >= 4 {
        result = result.with_total_bytes(total).with_usable_bytes(usable);
    }
    resp.with_results(vec![result])
}
