//! The share-group lag refresher: every `share.group.lag.interval.ms` it
//! asks the group coordinator for the share-partition start offsets
//! (DescribeShareGroupOffsets, KIP-932) and the partition leaders for the
//! last stable offsets (ListOffsets read_committed), and sets
//! [`RuntimeMetrics::set_share_group_lag`]. It runs in its own task with
//! its own admin client, so the workers never wait for it.
//!
//! Where the broker gives the share-partition lag (DescribeShareGroupOffsets
//! v1, KIP-1226: Kafka 4.3+ and our broker), the gauge takes the broker's
//! figure, which also leaves out the records above the start offset that are
//! already acknowledged or archived; ListOffsets is then not asked. Else,
//! lag of a partition = max(0, LSO - SPSO). A partition the group has no
//! state for yet (SPSO -1: nothing was fetched) counts from the log start,
//! which is 0 on the embedded broker and otherwise an over-estimate by the
//! records before the log start or before the reset point.
//!
//! A cluster that does not serve DescribeShareGroupOffsets (Kafka before
//! 4.0, or a broker with share groups off) is logged once and the gauge
//! stays absent; other failures (group not created yet, a leader moving)
//! are logged at debug level and retried at the next interval.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::metrics::RuntimeMetrics;
use crate::client::ClientError;
use crate::client::admin::{AdminClient, SharePartitionOffsetInfo};

/// Lag per topic-partition from start offsets and end offsets; partitions
/// missing from either answer (or answered with an error) are left out.
pub fn compute_lag(
    start_offsets: &BTreeMap<(String, i32), Result<i64, ClientError>>,
    end_offsets: &BTreeMap<(String, i32), Result<i64, ClientError>>,
) -> BTreeMap<(String, i32), i64> {
    end_offsets
        .iter()
        .filter_map(|(tp, end)| {
            let end = *end.as_ref().ok()?;
            let start = *start_offsets.get(tp)?.as_ref().ok()?;
            Some((tp.clone(), (end - start.max(0)).max(0)))
        })
        .collect()
}

/// The broker's lag for every partition, if it gave one for each of them
/// (a partition answered with an error is left out).
pub fn broker_lag(
    infos: &BTreeMap<(String, i32), Result<SharePartitionOffsetInfo, ClientError>>,
) -> Option<BTreeMap<(String, i32), i64>> {
    let mut out = BTreeMap::new();
    for (tp, r) in infos {
        if let Ok(i) = r {
            out.insert(tp.clone(), i.lag?);
        }
    }
    Some(out)
}

/// One refresh: the lag of every partition of `topics`.
pub async fn refresh(
    admin: &AdminClient,
    group_id: &str,
    topics: &[String],
) -> Result<BTreeMap<(String, i32), i64>, ClientError> {
    let refs: Vec<&str> = topics.iter().map(String::as_str).collect();
    admin.metadata().refresh(&refs).await?;
    let mut partitions = Vec::new();
    let mut asked = Vec::new();
    for t in topics {
        let Some(m) = admin.metadata().topic(t) else {
            continue;
        };
        let ps: Vec<i32> = m.partitions.iter().map(|p| p.partition).collect();
        partitions.extend(ps.iter().map(|p| (t.clone(), *p)));
        asked.push((t.clone(), ps));
    }
    let infos = admin
        .describe_share_group_offsets_with_lag(group_id, Some(&asked))
        .await?;
    if let Some(lag) = broker_lag(&infos) {
        return Ok(lag);
    }
    let starts = infos
        .into_iter()
        .map(|(tp, r)| (tp, r.map(|i| i.start_offset)))
        .collect();
    let ends = admin.list_end_offsets(&partitions, true).await?;
    Ok(compute_lag(&starts, &ends))
}

/// Refreshes the lag gauge every `interval` until `shutdown`.
pub(crate) async fn run(
    admin: AdminClient,
    group_id: String,
    topics: Vec<String>,
    interval: Duration,
    metrics: Arc<RuntimeMetrics>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = shutdown.changed() => return,
        }
        if *shutdown.borrow() {
            return;
        }
        match refresh(&admin, &group_id, &topics).await {
            Ok(lag) => metrics.set_share_group_lag(Some(lag)),
            Err(e @ ClientError::UnsupportedVersion { .. }) => {
                tracing::info!(
                    group = %group_id,
                    error = %e,
                    "the cluster does not serve DescribeShareGroupOffsets: \
                     sharestream_share_group_lag is not exported"
                );
                metrics.set_share_group_lag(None);
                return;
            }
            Err(e) => {
                tracing::debug!(group = %group_id, error = %e, "share-group lag refresh failed; retrying");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lag_is_end_minus_start_clamped_and_skips_unknown() {
        let tp = |p: i32| ("in".to_string(), p);
        let starts = BTreeMap::from([
            (tp(0), Ok(10)),
            (tp(1), Ok(-1)),
            (tp(2), Ok(50)),
            (
                tp(3),
                Err(ClientError::check("DescribeShareGroupOffsets", 3, None).unwrap_err()),
            ),
        ]);
        let ends = BTreeMap::from([
            (tp(0), Ok(25)),
            (tp(1), Ok(7)),
            (tp(2), Ok(40)),
            (tp(3), Ok(9)),
            (tp(4), Ok(9)),
        ]);
        let lag = compute_lag(&starts, &ends);
        assert_eq!(lag, BTreeMap::from([(tp(0), 15), (tp(1), 7), (tp(2), 0)]));
    }

    #[test]
    fn the_brokers_lag_is_taken_only_when_every_partition_has_one() {
        let tp = |p: i32| ("in".to_string(), p);
        let info = |lag| {
            Ok(SharePartitionOffsetInfo {
                start_offset: 3,
                lag,
            })
        };
        let mut infos = BTreeMap::from([(tp(0), info(Some(4))), (tp(1), info(Some(0)))]);
        infos.insert(
            tp(2),
            Err(ClientError::check("DescribeShareGroupOffsets", 3, None).unwrap_err()),
        );
        assert_eq!(
            broker_lag(&infos),
            Some(BTreeMap::from([(tp(0), 4), (tp(1), 0)]))
        );
        infos.insert(tp(3), info(None));
        assert_eq!(broker_lag(&infos), None, "a version-0 broker: compute it");
    }
}
