//! Our share consumer renews acquisition locks (KIP-1222): a record held
//! past its lock duration stays the holder's while the holder renews it,
//! and goes to another member once it stops; a group that turned renew off
//! answers INVALID_RECORD_STATE.
//!
//! The broker runs on a manual clock: the lock durations pass when the
//! test moves it, not on the wall clock.

use std::time::{Duration, Instant};

use crate::common::broker::{Started, TestBroker};
use crate::rt;
use sharestream::broker::BrokerHandle;
use sharestream::broker::share::RecordState;
use sharestream::client::admin::AlterConfigOp;
use sharestream::client::share_consumer::{
    AcknowledgementMode, ShareConsumer, ShareConsumerConfig, ShareRecord,
};
use sharestream::eos::AcknowledgeType;

const GROUP: &str = "renew";
/// The group's lock duration (on the broker's manual clock).
const LOCK_MS: u64 = 1_500;

fn consumer(b: &BrokerHandle) -> ShareConsumer {
    let config = ShareConsumerConfig::builder(GROUP)
        .bootstrap_servers([b.bootstrap_servers()])
        .acknowledgement_mode(AcknowledgementMode::Explicit)
        .max_poll_records(100)
        .fetch_max_wait(Duration::from_millis(50))
        .build()
        .unwrap();
    let mut c = ShareConsumer::new(config).unwrap();
    c.subscribe(["in"]).unwrap();
    c
}

async fn poll_some(c: &mut ShareConsumer) -> Vec<ShareRecord> {
    for _ in 0..100 {
        let r = c.poll(Duration::from_millis(200)).await.unwrap();
        if !r.is_empty() {
            return r.into_iter().collect();
        }
    }
    panic!("no records after 100 polls");
}

/// A broker on a manual clock with topic `in` (1 partition) holding `n`
/// records, and the group at earliest with `LOCK_MS` locks and renew set
/// to `renew`.
async fn start(n: usize, renew: bool) -> Started {
    let t = TestBroker::in_memory()
        .lock_duration_ms(LOCK_MS as i32)
        .manual_clock()
        .topic("in", 1)
        .earliest(GROUP)
        .start()
        .await;
    let b = &t.b;
    rt::admin(b)
        .incremental_alter_group_config(
            GROUP,
            &[
                (
                    "share.record.lock.duration.ms",
                    AlterConfigOp::Set(LOCK_MS.to_string()),
                ),
                (
                    "share.renew.acknowledge.enable",
                    AlterConfigOp::Set(renew.to_string()),
                ),
            ],
        )
        .await
        .unwrap();
    rt::produce_inputs(b, "in", 1, n).await;
    t
}

/// Polls `other` for `for_ms` of wall-clock time (a chance to fetch, not a
/// wait for a lock), returning what it got (and releasing it).
async fn what_another_member_gets(other: &mut ShareConsumer, for_ms: u64) -> usize {
    let until = Instant::now() + Duration::from_millis(for_ms);
    let mut got = 0;
    while Instant::now() < until {
        let r: Vec<ShareRecord> = other
            .poll(Duration::from_millis(100))
            .await
            .unwrap()
            .into_iter()
            .collect();
        got += r.len();
        for rec in &r {
            other.acknowledge(rec, AcknowledgeType::Release).unwrap();
        }
    }
    got
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewed_records_stay_with_their_holder_past_the_lock_duration() {
    let t = start(20, true).await;
    let mut holder = consumer(&t.b);
    let mut other = consumer(&t.b);
    let held = poll_some(&mut holder).await;
    assert!(!held.is_empty());
    // Hold the records for three lock durations on the broker's clock,
    // renewing every half of one, while another member of the group polls.
    let mut stolen = 0;
    for _ in 0..6 {
        for r in &held {
            holder.renew(r).unwrap();
        }
        let results = holder.commit_sync(Duration::from_secs(5)).await.unwrap();
        for (tp, result) in &results {
            assert!(result.is_ok(), "renewal of {tp} failed: {result:?}");
        }
        t.advance(LOCK_MS as i64 / 2 + 1);
        stolen += what_another_member_gets(&mut other, 300).await;
    }
    assert_eq!(
        stolen, 0,
        "another member got renewed records while their holder kept them"
    );
    // The broker agrees: three lock durations later every held record is
    // still ACQUIRED in its first delivery, its lock never expired.
    let shares = t.b.core().shares();
    for r in &held {
        let i = shares
            .record_info(GROUP, t.topic(), r.partition, r.offset)
            .expect("in the window");
        assert_eq!(
            (i.state, i.delivery_count),
            (RecordState::Acquired, 1),
            "offset {}",
            r.offset
        );
    }
    let expired: u64 = shares
        .partition_metrics()
        .iter()
        .map(|(_, m)| m.lock_expired_total)
        .sum();
    assert_eq!(expired, 0, "a renewed lock expired");
    assert_eq!(holder.acquisition_lock_timeout_ms(), Some(LOCK_MS as i32));
    for r in &held {
        holder.acknowledge(r, AcknowledgeType::Accept).unwrap();
    }
    let results = holder.commit_sync(Duration::from_secs(5)).await.unwrap();
    assert!(results.values().all(|r| r.is_ok()), "{results:?}");
    holder.close(Duration::from_secs(5)).await.unwrap();
    other.close(Duration::from_secs(5)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_renewal_the_records_go_to_another_member_after_the_lock() {
    // The control of the test above: the same hold without renewing loses
    // the records to the other member.
    let t = start(20, true).await;
    let mut holder = consumer(&t.b);
    let mut other = consumer(&t.b);
    let held = poll_some(&mut holder).await;
    let mut stolen = 0;
    for _ in 0..6 {
        t.advance(LOCK_MS as i64 / 2 + 1);
        stolen += what_another_member_gets(&mut other, 300).await;
    }
    assert!(
        stolen > 0,
        "the lock did not expire: the renewal test proves nothing"
    );
    drop(held);
    other.close(Duration::from_secs(5)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_with_renew_disabled_refuses_the_renewal() {
    let t = start(5, false).await;
    let mut holder = consumer(&t.b);
    let held = poll_some(&mut holder).await;
    holder.renew(&held[0]).unwrap();
    let results = holder.commit_sync(Duration::from_secs(5)).await.unwrap();
    let errors: Vec<String> = results
        .values()
        .filter_map(|r| r.as_ref().err().map(|e| e.to_string()))
        .collect();
    assert!(
        errors.iter().any(|e| e.contains("INVALID_RECORD_STATE")),
        "expected INVALID_RECORD_STATE, got {results:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_record_waiting_for_its_acknowledgement_can_be_renewed() {
    let t = start(5, true).await;
    let mut holder = consumer(&t.b);
    let held = poll_some(&mut holder).await;
    holder
        .acknowledge(&held[0], AcknowledgeType::Accept)
        .unwrap();
    assert!(holder.renew(&held[0]).is_err());
}
