//! Share-fetch throughput of the broker's share path, without sockets:
//! `ShareService::acquire` (log read, acquisition, response bytes)
//! followed by an immediate ACCEPT of everything acquired, by one and by
//! eight members taking turns on one partition, for 100 B and 1 KiB
//! records. Also reports the memory held per in-flight record (analytic:
//! runs x run-node size), with 2000 records in flight as 1 run and in the
//! worst case of alternating states.
//!
//! Run: `cargo bench --bench share_fetch`.

#[global_allocator]
static GLOBAL: sharestream::alloc::GuardedAlloc = sharestream::alloc::GuardedAlloc::new();

use std::time::Instant;

use bytes::Bytes;
use parking_lot::Mutex;
use sharestream::broker::group::{HeartbeatRequest, ShareGroupBrokerConfig, TopicInfo};
use sharestream::broker::log::{AppendOptions, LogConfig, PartitionLog};
use sharestream::broker::share::{AcknowledgeType, AcquireMode, RawAcknowledgementBatch};
use sharestream::broker::share_service::ShareService;
use sharestream::protocol::records::{BatchSpec, Record, RecordBatchView, encode_batch};
use uuid::Uuid;

const TOPIC: Uuid = Uuid::from_u128(7);

fn fill(records: usize, size: usize, per_batch: usize) -> Mutex<PartitionLog> {
    let mut log = PartitionLog::in_memory(LogConfig::default());
    let value = Bytes::from(vec![b'x'; size]);
    let mut left = records;
    while left > 0 {
        let n = left.min(per_batch);
        let recs: Vec<Record> = (0..n)
            .map(|i| Record::new(i as i32, 1, None, Some(value.clone())))
            .collect();
        let mut b = encode_batch(&BatchSpec::default(), &recs).unwrap();
        let v = RecordBatchView::split_from(&mut b).unwrap().unwrap();
        log.append(
            &[v],
            AppendOptions {
                now_ms: 1,
                log_append_time: false,
                leader_epoch: 0,
            },
        )
        .unwrap();
        left -= n;
    }
    Mutex::new(log)
}

fn run(members: usize, records: usize, size: usize) -> f64 {
    let log = fill(records, size, 100);
    let m = ShareService::open(None, ShareGroupBrokerConfig::default(), 0).unwrap();
    m.alter_group_configs("g", &[("share.auto.offset.reset", Some("earliest"))], false)
        .unwrap();
    let lookup = |n: &str| {
        (n == "t").then_some(TopicInfo {
            id: TOPIC,
            partitions: 1,
        })
    };
    let ids: Vec<String> = (0..members).map(|i| format!("member-{i}")).collect();
    for id in &ids {
        m.heartbeat(
            &HeartbeatRequest {
                group_id: "g".into(),
                member_id: id.clone(),
                member_epoch: 0,
                subscribed_topic_names: Some(vec!["t".into()]),
                ..Default::default()
            },
            0,
            &lookup,
        )
        .unwrap();
    }
    let started = Instant::now();
    let mut done = 0u64;
    let mut turn = 0usize;
    let mut now = 1i64;
    while done < records as u64 {
        let id = &ids[turn % members];
        turn += 1;
        let d = m
            .acquire(
                "g",
                id,
                TOPIC,
                0,
                &log,
                500,
                AcquireMode::BatchOptimized,
                1 << 20,
                now,
            )
            .unwrap();
        for r in &d.acquired {
            m.acknowledge(
                "g",
                id,
                TOPIC,
                0,
                &[RawAcknowledgementBatch::uniform(
                    r.first_offset,
                    r.last_offset,
                    AcknowledgeType::Accept,
                )],
                now,
            )
            .unwrap();
        }
        done += d.record_count;
        now += 1;
    }
    done as f64 / started.elapsed().as_secs_f64()
}

fn main() {
    const RECORDS: usize = 200_000;
    println!(
        "share fetch + immediate ACCEPT, {RECORDS} records, max 500 per fetch, 100 records per batch"
    );
    for size in [100usize, 1024] {
        for members in [1usize, 8] {
            let best = (0..3)
                .map(|_| run(members, RECORDS, size))
                .fold(0.0, f64::max);
            println!(
                "  {size:>5} B records, {members} member(s): {best:>12.0} records/s (best of 3)"
            );
        }
    }
    // Memory per in-flight record: a run is one BTreeMap entry (key i64 +
    // Run { last: i64, value: Slot }); the node overhead of a B-tree is
    // about a third on top.
    // Estimated from the private types: key 8 B + Run { last 8 B, Slot ~56 B }
    // (the TX_PENDING variant, with an Arc<str> member, is the largest).
    let run_bytes = 72;
    let log = fill(2000, 10, 1);
    let m = ShareService::open(None, ShareGroupBrokerConfig::default(), 0).unwrap();
    m.alter_group_configs("g", &[("share.auto.offset.reset", Some("earliest"))], false)
        .unwrap();
    let lookup = |n: &str| {
        (n == "t").then_some(TopicInfo {
            id: TOPIC,
            partitions: 1,
        })
    };
    m.heartbeat(
        &HeartbeatRequest {
            group_id: "g".into(),
            member_id: "a".into(),
            member_epoch: 0,
            subscribed_topic_names: Some(vec!["t".into()]),
            ..Default::default()
        },
        0,
        &lookup,
    )
    .unwrap();
    let d = m
        .acquire(
            "g",
            "a",
            TOPIC,
            0,
            &log,
            2000,
            AcquireMode::BatchOptimized,
            64 << 20,
            1,
        )
        .unwrap();
    let runs_one = m.run_count();
    // Worst case: every other record released (alternating AVAILABLE /
    // ACQUIRED), the first one kept ACQUIRED so the window stays.
    for o in (1..d.record_count as i64).step_by(2) {
        m.acknowledge(
            "g",
            "a",
            TOPIC,
            0,
            &[RawAcknowledgementBatch::uniform(
                o,
                o,
                AcknowledgeType::Release,
            )],
            1,
        )
        .unwrap();
    }
    let runs_alt = m.run_count();
    let inflight = d.record_count as f64;
    println!(
        "memory per in-flight record ({} in flight): one acquisition = {} run(s) = {:.3} B/record; \
         alternating states = {} runs = {:.1} B/record (at ~{} B per run incl. B-tree overhead)",
        d.record_count,
        runs_one,
        runs_one as f64 * run_bytes as f64 * 1.33 / inflight,
        runs_alt,
        runs_alt as f64 * run_bytes as f64 * 1.33 / inflight,
        (run_bytes as f64 * 1.33) as u64
    );
}
