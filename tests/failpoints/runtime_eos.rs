//! The runtime end to end on the embedded broker, exactly-once: every
//! input in the output exactly once and nothing left in the share group,
//! also with injected failures (abort mid-batch, a worker dropped between
//! send and commit, a producer fenced, a stale member epoch).

use crate::rt;

use std::sync::atomic::Ordering;
use std::time::Duration;

use rt::*;
use sharestream::client::share_consumer::config::AcquireMode;
use sharestream::runtime::{ExactlyOnceMechanism, Runtime, RuntimeConfig, RuntimeError};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exactly_once_two_workers_every_input_once() {
    let _serial = SERIAL.lock().await;
    let b = broker().await;
    let ids = setup(&b, "g1", &[("in", 2), ("out", 2)]).await;
    produce_inputs(&b, "in", 2, 300).await;
    let mut cfg = config(&b, "app1");
    cfg.num_workers = 2;
    let h = Runtime::builder(map_values_topology("g1"))
        .config(cfg)
        .start()
        .await
        .unwrap();
    // share.acquire.mode=auto: a worker per partition, whole batches.
    assert_eq!(h.config().acquire_mode, Some(AcquireMode::BatchOptimized));
    wait_committed(&h, 300).await;
    let m = h.metrics().clone();
    h.stop().await.unwrap();
    let out = committed(&b, "out").await;
    assert_exactly_once(&out, 300, |i| format!("out-v{i}"));
    // Keys, headers, timestamps and (2 partitions each side) partitions
    // come through the map_values topology.
    let r = out
        .iter()
        .find(|r| r.value.as_deref() == Some(&b"out-v7"[..]))
        .unwrap();
    assert_eq!(r.key.as_deref(), Some(&b"k7"[..]));
    assert_eq!(r.header_str("i").as_deref(), Some("7"));
    assert_group_drained(&b, "g1", ids[0], 2);
    assert_eq!(m.records_out.load(Ordering::Relaxed), 300);
    assert!(m.transactions_committed.load(Ordering::Relaxed) >= 3);
    assert_eq!(m.transactions_aborted.load(Ordering::Relaxed), 0);
    let text = m.render_prometheus();
    assert!(
        text.contains("sharestream_runtime_records_out_total 300"),
        "{text}"
    );
    b.shutdown().await;
}

/// Failpoints are process-wide: the fault tests run one at a time.
use crate::SERIAL;

#[cfg(feature = "failpoints")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abort_mid_batch_records_come_back_and_are_processed_once() {
    let _serial = SERIAL.lock().await;
    let b = broker().await;
    let ids = setup(&b, "g-abort", &[("in", 1), ("out", 1)]).await;
    produce_inputs(&b, "in", 1, 200).await;
    sharestream::failpoints::arm("runtime.abort_mid_batch", Some(3));
    let h = Runtime::builder(map_values_topology("g-abort"))
        .config(config(&b, "app-abort"))
        .start()
        .await
        .unwrap();
    wait_committed(&h, 200).await;
    let m = h.metrics().clone();
    h.stop().await.unwrap();
    sharestream::failpoints::disarm("runtime.abort_mid_batch");
    assert_eq!(m.transactions_aborted.load(Ordering::Relaxed), 3);
    // The aborted records were delivered again, so more came in than
    // the 200 inputs.
    assert!(m.records_in.load(Ordering::Relaxed) > 200);
    assert_exactly_once(&committed(&b, "out").await, 200, |i| format!("out-v{i}"));
    assert_group_drained(&b, "g-abort", ids[0], 1);
    b.shutdown().await;
}

/// D25 and D5 in the runtime: under both values of
/// `group.share.transaction.abort.record.state`, the records of aborted
/// transactions are processed again and end in the output exactly once
/// (`available`: fetched again; `acquired`: handed back), and the commit
/// markers of a transactionally written input (gaps, staged with the
/// records) leave nothing in flight.
#[cfg(feature = "failpoints")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aborts_under_both_abort_record_states_with_a_transactional_input() {
    use sharestream::broker::group::config::AbortedRecordState;
    let _serial = SERIAL.lock().await;
    for state in [AbortedRecordState::Available, AbortedRecordState::Acquired] {
        let b = broker_with_abort_state(state).await;
        let group = format!("g-abort-{}", state.as_str());
        let ids = setup(&b, &group, &[("in", 1), ("out", 1)]).await;
        produce_inputs_in_transactions(&b, "in", 1, 200, 20).await;
        // Two aborts before staging (records still held: handed back) and
        // two after (TX_PENDING at the broker: the abort record state
        // decides).
        sharestream::failpoints::arm("runtime.abort_mid_batch", Some(2));
        sharestream::failpoints::arm("runtime.abort_after_stage", Some(2));
        let h = Runtime::builder(map_values_topology(&group))
            .config(config(&b, &format!("app-abort-{}", state.as_str())))
            .start()
            .await
            .unwrap();
        wait_committed(&h, 200).await;
        let m = h.metrics().clone();
        h.stop().await.unwrap();
        sharestream::failpoints::disarm("runtime.abort_mid_batch");
        sharestream::failpoints::disarm("runtime.abort_after_stage");
        assert_eq!(
            m.transactions_aborted.load(Ordering::Relaxed),
            4,
            "{state:?}"
        );
        assert!(m.records_in.load(Ordering::Relaxed) > 200, "{state:?}");
        println!(
            "abort record state {}: {} records in for 200 inputs, 4 aborts",
            state.as_str(),
            m.records_in.load(Ordering::Relaxed)
        );
        assert_exactly_once(&committed(&b, "out").await, 200, |i| format!("out-v{i}"));
        assert_group_drained(&b, &group, ids[0], 1);
        b.shutdown().await;
    }
}

#[cfg(feature = "failpoints")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_member_epoch_aborts_and_the_retry_commits() {
    let _serial = SERIAL.lock().await;
    let b = broker().await;
    let ids = setup(&b, "g-stale", &[("in", 1), ("out", 1)]).await;
    produce_inputs(&b, "in", 1, 100).await;
    sharestream::failpoints::arm("runtime.stale_member_epoch", Some(2));
    let h = Runtime::builder(map_values_topology("g-stale"))
        .config(config(&b, "app-stale"))
        .start()
        .await
        .unwrap();
    wait_committed(&h, 100).await;
    let m = h.metrics().clone();
    h.stop().await.unwrap();
    sharestream::failpoints::disarm("runtime.stale_member_epoch");
    assert_eq!(m.transactions_aborted.load(Ordering::Relaxed), 2);
    assert_exactly_once(&committed(&b, "out").await, 100, |i| format!("out-v{i}"));
    assert_group_drained(&b, "g-stale", ids[0], 1);
    b.shutdown().await;
}

/// A worker dies between staging and commit, like a killed process; its
/// transaction stays open, its staged records TX_PENDING. How the next
/// process takes over depends on its identity (docs/DESIGN.md D15):
/// - with the same `application.instance.id`, its InitProducerId fences the
///   dead one's transaction at once (an imposed abort, which releases the
///   records), well before the transaction timeout;
/// - without one, it has a transactional id of its own, and the dead
///   transaction ends by `transaction.timeout.ms`.
#[cfg(feature = "failpoints")]
async fn crash_between_stage_and_commit_then_restart(instance: Option<&str>) {
    let _serial = SERIAL.lock().await;
    let b = broker().await;
    let group = format!("g-crash-{}", instance.unwrap_or("none"));
    let ids = setup(&b, &group, &[("in", 1), ("out", 1)]).await;
    produce_inputs(&b, "in", 1, 150).await;
    let config = RuntimeConfig {
        application_instance_id: instance.map(String::from),
        // With an identity, the takeover must not wait for the timeout.
        transaction_timeout: Duration::from_secs(if instance.is_some() { 120 } else { 3 }),
        ..config(&b, "app-crash")
    };
    sharestream::failpoints::arm("runtime.crash_before_commit", Some(1));
    let h = Runtime::builder(map_values_topology(&group))
        .config(config.clone())
        .start()
        .await
        .unwrap();
    let dead_txn = h.transactional_id(0);
    let err = h.wait().await.unwrap_err();
    sharestream::failpoints::disarm("runtime.crash_before_commit");
    assert!(
        matches!(err, RuntimeError::WorkerCrashed { worker: 0 }),
        "{err}"
    );
    // Its outputs are in an open transaction: nothing visible yet.
    assert!(committed(&b, "out").await.is_empty());
    assert!(b.core().txn_pending_records() > 0);
    let txn =
        |b: &sharestream::broker::BrokerHandle| b.core().txn().with_coordinator(|c| c.metrics());
    let before = txn(&b);
    let h = Runtime::builder(map_values_topology(&group))
        .config(config)
        .start()
        .await
        .unwrap();
    assert_eq!(h.transactional_id(0) == dead_txn, instance.is_some());
    wait_output(&b, "out", 150).await;
    h.stop().await.unwrap();
    let after = txn(&b);
    if instance.is_some() {
        assert_eq!(after.producers_fenced, before.producers_fenced + 1);
        assert_eq!(after.transactions_timed_out, before.transactions_timed_out);
    } else {
        assert_eq!(after.producers_fenced, before.producers_fenced);
        assert_eq!(
            after.transactions_timed_out,
            before.transactions_timed_out + 1
        );
    }
    assert_exactly_once(&committed(&b, "out").await, 150, |i| format!("out-v{i}"));
    assert_group_drained(&b, &group, ids[0], 1);
    b.shutdown().await;
}

#[cfg(feature = "failpoints")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_instance_with_the_same_identity_fences_its_zombie_at_once() {
    crash_between_stage_and_commit_then_restart(Some("pod-0")).await;
}

#[cfg(feature = "failpoints")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_process_without_identity_recovers_by_transaction_timeout() {
    crash_between_stage_and_commit_then_restart(None).await;
}

/// A worker whose transactional id is taken over once (or whose
/// transaction timed out) goes back to work with a new producer epoch, by
/// itself; one whose id keeps being taken over (a second running process
/// with the same `application.instance.id`) stops with an error that says
/// so. Every input is processed exactly once throughout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_worker_recovers_and_a_repeatedly_fenced_one_stops_with_a_clear_error() {
    let _serial = SERIAL.lock().await;
    let b = broker().await;
    let ids = setup(&b, "g-fence", &[("in", 1), ("out", 1)]).await;
    produce_inputs(&b, "in", 1, 100).await;
    let config = RuntimeConfig {
        application_instance_id: Some("i1".into()),
        ..config(&b, "app-fence")
    };
    let h = Runtime::builder(map_values_topology("g-fence"))
        .config(config.clone())
        .start()
        .await
        .unwrap();
    wait_committed(&h, 100).await;
    assert_eq!(h.transactional_id(0), "app-fence-i1-0");
    let m = h.metrics().clone();
    let usurp = || async {
        let p = sharestream::client::Producer::new(
            sharestream::client::ProducerConfig::builder()
                .bootstrap_servers(b.bootstrap_servers())
                .transactional_id(h.transactional_id(0))
                .build()
                .unwrap(),
        )
        .await
        .unwrap();
        p.init_transactions().await.unwrap();
        p
    };
    // Taken over once: the worker recovers and finishes the new input.
    let _u1 = usurp().await;
    produce_inputs(&b, "in", 1, 100).await;
    wait_committed(&h, 200).await;
    assert_eq!(m.producer_recoveries.load(Ordering::Relaxed), 1);
    // Taken over again and again: after three recoveries within a minute
    // the worker stops, naming the setting.
    let mut batches = 2;
    let err = loop {
        let _u = usurp().await;
        produce_inputs(&b, "in", 1, 100).await;
        batches += 1;
        let stopped = tokio::time::timeout(Duration::from_secs(20), async {
            loop {
                if h.is_stopping() {
                    return;
                }
                if m.records_committed.load(Ordering::Relaxed) >= 100 * batches {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await;
        assert!(stopped.is_ok(), "neither recovered nor stopped");
        if h.is_stopping() {
            break tokio::time::timeout(Duration::from_secs(30), h.wait())
                .await
                .expect("the worker stops")
                .unwrap_err();
        }
        assert!(batches < 10, "never stopped");
    };
    assert!(
        matches!(err, RuntimeError::Producer { worker: 0, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("application.instance.id"), "{err}");
    assert_eq!(m.producer_recoveries.load(Ordering::Relaxed), 3);
    // A new instance finishes the work: every batch repeats v0..v99, each
    // input exactly once.
    let h = Runtime::builder(map_values_topology("g-fence"))
        .config(config)
        .start()
        .await
        .unwrap();
    wait_output(&b, "out", 100 * batches as usize).await;
    h.stop().await.unwrap();
    let out = committed(&b, "out").await;
    assert_eq!(out.len(), 100 * batches as usize);
    let counts = value_counts(&out);
    assert!(
        counts.values().all(|c| *c == batches as usize),
        "{counts:?}"
    );
    assert_eq!(counts.len(), 100);
    assert_group_drained(&b, "g-fence", ids[0], 1);
    b.shutdown().await;
}

/// The overlapped loop (`poll.during.commit=true`: the next batch is polled
/// and processed while EndTxn is in flight) keeps exactly-once, also when
/// transactions abort and their records come back.
#[cfg(feature = "failpoints")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn polling_during_commit_keeps_exactly_once_with_aborts() {
    let _serial = SERIAL.lock().await;
    let b = broker().await;
    let ids = setup(&b, "g-overlap", &[("in", 2), ("out", 2)]).await;
    produce_inputs(&b, "in", 2, 400).await;
    sharestream::failpoints::arm("runtime.abort_mid_batch", Some(2));
    let mut cfg = config(&b, "app-overlap");
    cfg.num_workers = 2;
    cfg.poll_during_commit = true;
    cfg.max_records_per_transaction = 50;
    let h = Runtime::builder(map_values_topology("g-overlap"))
        .config(cfg)
        .start()
        .await
        .unwrap();
    wait_committed(&h, 400).await;
    let m = h.metrics().clone();
    h.stop().await.unwrap();
    sharestream::failpoints::disarm("runtime.abort_mid_batch");
    assert_eq!(m.transactions_aborted.load(Ordering::Relaxed), 2);
    assert!(m.transactions_committed.load(Ordering::Relaxed) >= 8);
    assert_exactly_once(&committed(&b, "out").await, 400, |i| format!("out-v{i}"));
    assert_group_drained(&b, "g-overlap", ids[0], 2);
    b.shutdown().await;
}

/// More workers than partitions: `share.acquire.mode=auto` resolves to
/// record_limit (ShareFetch v2), and every input is still in the output
/// exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_beyond_the_partitions_use_record_limit_exactly_once() {
    let _serial = SERIAL.lock().await;
    let b = broker().await;
    let ids = setup(&b, "g7", &[("in", 1), ("out", 1)]).await;
    produce_inputs(&b, "in", 1, 400).await;
    let mut cfg = config(&b, "app7");
    cfg.num_workers = 3;
    cfg.max_poll_records = 10;
    let h = Runtime::builder(map_values_topology("g7"))
        .config(cfg)
        .start()
        .await
        .unwrap();
    assert_eq!(h.config().acquire_mode, Some(AcquireMode::RecordLimit));
    wait_committed(&h, 400).await;
    h.stop().await.unwrap();
    let out = committed(&b, "out").await;
    assert_exactly_once(&out, 400, |i| format!("out-v{i}"));
    assert_group_drained(&b, "g7", ids[0], 1);
    b.shutdown().await;
}

/// exactly_once keeps a transaction's records locked until it commits; a
/// process whose workers could hold more than a third of the source
/// partitions' record locks gets smaller transactions
/// (read from the broker's group.share.partition.max.record.locks), and
/// stays exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transactions_shrink_to_fit_the_partitions_record_locks() {
    let _serial = SERIAL.lock().await;
    // 100 locks on 1 partition, a third of them for 2 workers: 16 each.
    let m = shrunk_to_fit("8", ExactlyOnceMechanism::Auto, 16).await;
    // 300 records in transactions of at most 16.
    assert!(m.transactions_committed.load(Ordering::Relaxed) >= 19);

    // Kafka's default cap (2000) leaves the configured size alone.
    let b = broker().await;
    setup(&b, "g9", &[("in", 2), ("out", 2)]).await;
    let mut cfg = config(&b, "app9");
    cfg.num_workers = 2;
    let h = Runtime::builder(map_values_topology("g9"))
        .config(cfg)
        .start()
        .await
        .unwrap();
    assert_eq!(h.config().max_records_per_transaction, 100);
    h.stop().await.unwrap();
    b.shutdown().await;

    // Through the ledger: the same third.
    shrunk_to_fit("10", ExactlyOnceMechanism::Ledger, 16).await;
}

/// 2 workers asking for transactions of 1000 on a broker of 100 record
/// locks and one source partition (group `g{tag}`, application
/// `app{tag}`): the size they get is `expected`, and 300 records come out
/// exactly once. Returns the runtime's metrics.
async fn shrunk_to_fit(
    tag: &str,
    mechanism: ExactlyOnceMechanism,
    expected: usize,
) -> std::sync::Arc<sharestream::runtime::RuntimeMetrics> {
    let group = format!("g{tag}");
    let b = broker_with_locks(3, 100).await;
    let ids = setup(&b, &group, &[("in", 1), ("out", 1)]).await;
    produce_inputs(&b, "in", 1, 300).await;
    let mut cfg = config(&b, &format!("app{tag}"));
    cfg.num_workers = 2;
    cfg.max_records_per_transaction = 1000;
    cfg.exactly_once_mechanism = mechanism;
    let h = Runtime::builder(map_values_topology(&group))
        .config(cfg)
        .start()
        .await
        .unwrap();
    assert_eq!(h.config().max_records_per_transaction, expected);
    wait_committed(&h, 300).await;
    let m = h.metrics().clone();
    h.stop().await.unwrap();
    let out = committed(&b, "out").await;
    assert_exactly_once(&out, 300, |i| format!("out-v{i}"));
    assert_group_drained(&b, &group, ids[0], 1);
    b.shutdown().await;
    m
}

/// A worker held in one of the commit windows (as a paused process would
/// be; SIGSTOP of whole processes is in the chaos test) past a deadline
/// the broker enforces, then let go. Nothing is lost or duplicated and the
/// worker goes back to work by itself.
#[cfg(feature = "failpoints")]
async fn paused_in_window(
    point: &'static str,
    pause: Duration,
    transaction_timeout: Duration,
) -> u64 {
    use std::sync::Arc;
    let _serial = SERIAL.lock().await;
    let b = broker().await;
    let group = format!("g-pause-{}", point.replace('.', "-"));
    let ids = setup(&b, &group, &[("in", 1), ("out", 1)]).await;
    produce_inputs(&b, "in", 1, 300).await;
    // Only the first transaction to reach the point is held.
    sharestream::failpoints::arm_pause(
        point,
        pause,
        Some(Arc::new(|name: &str| sharestream::failpoints::disarm(name))),
    );
    let h = Runtime::builder(map_values_topology(&group))
        .config(RuntimeConfig {
            num_workers: 2,
            transaction_timeout,
            ..config(&b, "app-pause")
        })
        .start()
        .await
        .unwrap();
    wait_output(&b, "out", 300).await;
    // The held worker comes back and keeps working: more input, all done.
    tokio::time::sleep(pause).await;
    produce_inputs(&b, "in", 1, 300).await;
    wait_output(&b, "out", 600).await;
    let m = h.metrics().clone();
    h.stop().await.unwrap();
    sharestream::failpoints::disarm(point);
    let out = committed(&b, "out").await;
    assert_eq!(out.len(), 600, "no duplicate");
    let counts = value_counts(&out);
    assert_eq!(counts.len(), 300);
    assert!(counts.values().all(|c| *c == 2), "{counts:?}");
    assert_group_drained(&b, &group, ids[0], 1);
    b.shutdown().await;
    m.producer_recoveries.load(Ordering::Relaxed)
}

/// Held after sending, before staging, past the acquisition lock (1.5 s):
/// the records go to the other worker; the held one's staging is refused
/// and its transaction aborts.
#[cfg(feature = "failpoints")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_held_after_send_past_its_locks_loses_and_duplicates_nothing() {
    let recoveries = paused_in_window(
        "runtime.window_sent",
        Duration::from_secs(3),
        Duration::from_secs(10),
    )
    .await;
    assert_eq!(recoveries, 0, "no transaction timed out");
}

/// Held after staging, before EndTxn, past the transaction timeout (2 s):
/// the coordinator aborts the transaction and releases its records to the
/// other worker; the held one's commit is refused, and it re-creates its
/// producer and goes back to work.
#[cfg(feature = "failpoints")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_held_after_stage_past_the_transaction_timeout_recovers_by_itself() {
    let recoveries = paused_in_window(
        "runtime.window_staged",
        Duration::from_secs(4),
        Duration::from_secs(2),
    )
    .await;
    assert_eq!(recoveries, 1, "the held worker re-created its producer");
}

/// Through the ledger, with `poll.during.commit=true`, the loop polls,
/// checks and processes the next batch while a transaction commits (D37). Here the commit is held after its
/// intent was written (2 s), and the overlapped poll until the records'
/// locks (1 s) have expired: the broker hands the records of the
/// committing transaction to the same worker again. The consumer leaves
/// them out of the poll (the transaction's acknowledgement covers them
/// whichever acquisition it meets) and counts them; the commit goes
/// through and ACCEPTs them. Every input is in the output once, nothing is
/// fenced, and later transactions go on. (Were they delivered, the check
/// would find the worker's own open intent and wait for its marker; the
/// model checks that path, `regression_sequence_overlapped_check_waits_for_own_intent`.)
#[cfg(feature = "failpoints")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_back_during_their_own_ledger_commit_are_committed_once() {
    use std::sync::Arc;
    let _serial = SERIAL.lock().await;
    let b = broker_with_lock_ms(1_000).await;
    let ids = setup(&b, "g-overlap-ledger", &[("in", 1), ("out", 1)]).await;
    create_ledger(&b, "app-overlap-ledger-eos-ledger").await;
    produce_inputs(&b, "in", 1, 20).await;
    let once = || Some(Arc::new(|name: &str| sharestream::failpoints::disarm(name)) as _);
    sharestream::failpoints::arm_pause("runtime.window_staged", Duration::from_secs(2), once());
    sharestream::failpoints::arm_pause(
        "runtime.ledger_overlap_poll",
        Duration::from_millis(1_500),
        once(),
    );
    let mut cfg = config(&b, "app-overlap-ledger");
    cfg.exactly_once_mechanism = sharestream::runtime::ExactlyOnceMechanism::Ledger;
    cfg.poll_during_commit = true;
    let h = Runtime::builder(map_values_topology("g-overlap-ledger"))
        .config(cfg)
        .start()
        .await
        .unwrap();
    let m = h.metrics().clone();
    wait_until(30, "the first 20 records committed", || {
        m.records_committed.load(Ordering::Relaxed) >= 20
    })
    .await;
    assert_eq!(
        m.records_redelivered_while_held.load(Ordering::Relaxed),
        20,
        "the overlapped poll met the records of the committing transaction"
    );
    produce_inputs_from(&b, "in", 1, 20, 20).await;
    wait_output(&b, "out", 40).await;
    h.stop().await.unwrap();
    sharestream::failpoints::disarm("runtime.window_staged");
    sharestream::failpoints::disarm("runtime.ledger_overlap_poll");
    assert_eq!(
        m.records_in.load(Ordering::Relaxed),
        40,
        "each input processed once"
    );
    assert_eq!(m.ledger.fences.load(Ordering::Relaxed), 0, "no self-fence");
    assert_eq!(m.producer_recoveries.load(Ordering::Relaxed), 0);
    assert_exactly_once(&committed(&b, "out").await, 40, |i| format!("out-v{i}"));
    assert_group_drained(&b, "g-overlap-ledger", ids[0], 1);
    b.shutdown().await;
}

/// `exactly.once.ledger.check=index` (the default): the check after a poll
/// looks at the index as it stands. Here the index lags (its tail waits 2 s
/// before applying each fetch) while a committed transaction of another
/// writer covers offsets 0..=9 of the input: the check cannot see it, the
/// worker processes the records, and its arbitration (which catches up)
/// finds the earlier committed intent, aborts and ACCEPTs those records
/// without output. Every input is in the output once: the ten from the
/// earlier transaction, the ten others from the runtime.
#[cfg(feature = "failpoints")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_intent_the_index_has_not_read_loses_the_arbitration() {
    use sharestream::client::ProducerRecord;
    let _serial = SERIAL.lock().await;
    // Locks long enough to outlast the slowed catch-up, so that the test
    // sees one ACCEPT per record.
    let b = broker_with_lock_ms(30_000).await;
    let ids = setup(&b, "g-lag", &[("in", 1), ("out", 1)]).await;
    create_ledger(&b, "app-lag-eos-ledger").await;
    let mut cfg = config(&b, "app-lag");
    cfg.exactly_once_mechanism = sharestream::runtime::ExactlyOnceMechanism::Ledger;
    // The arbitration's catch-up takes a few of the slowed tail's rounds.
    cfg.request_timeout = Duration::from_secs(30);
    let h = Runtime::builder(map_values_topology("g-lag"))
        .config(cfg)
        .start()
        .await
        .unwrap();
    const POINT: &str = "runtime.ledger.tail_apply";
    sharestream::failpoints::arm_pause(POINT, Duration::from_secs(2), None);
    // Another writer's committed transaction: the outputs of offsets 0..=9
    // and its intent.
    let earlier = txn_producer(&b, "app-lag-earlier-0").await;
    earlier.begin_transaction().unwrap();
    send_intent(
        &earlier,
        "app-lag-eos-ledger",
        ids[0],
        0,
        (0, 9),
        "app-lag-earlier-0",
    )
    .await;
    for i in 0..10 {
        earlier
            .send(ProducerRecord::new("out", format!("out-v{i}")).with_partition(0))
            .await
            .await
            .unwrap();
    }
    earlier.commit_transaction().await.unwrap();
    earlier.close().await;
    produce_inputs(&b, "in", 1, 20).await;
    let m = h.metrics().clone();
    wait_until(60, "20 records settled", || {
        m.records_committed.load(Ordering::Relaxed)
            + m.ledger.skipped_committed.load(Ordering::Relaxed)
            >= 20
    })
    .await;
    sharestream::failpoints::disarm(POINT);
    h.stop().await.unwrap();
    assert!(
        m.ledger.arbitration_lost.load(Ordering::Relaxed) >= 1,
        "the check saw the intent: the index did not lag"
    );
    assert_eq!(m.ledger.skipped_committed.load(Ordering::Relaxed), 10);
    assert_exactly_once(&committed(&b, "out").await, 20, |i| format!("out-v{i}"));
    assert_group_drained(&b, "g-lag", ids[0], 1);
    b.shutdown().await;
}

/// EndTxn(commit) without an answer, twice, under each mechanism: once
/// applied with its answer lost, once never arrived (as a process paused in
/// the call past its retry budget, or cut off from the coordinator, sees
/// it). The worker cannot tell; it re-initializes its producer (which
/// aborts the transaction if it is still open) and goes back to work. The
/// broker (KIP-1289) or the ledger's check (on delivery again) decides
/// which records come back: every input is in the output exactly once, and
/// the application never stops.
#[cfg(feature = "failpoints")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_without_an_answer_reinitializes_and_keeps_exactly_once() {
    use sharestream::runtime::ExactlyOnceMechanism;
    let _serial = SERIAL.lock().await;
    let mut run = 0;
    for (mechanism, overlap) in [
        (ExactlyOnceMechanism::Kip1289, false),
        (ExactlyOnceMechanism::Ledger, false),
        (ExactlyOnceMechanism::Ledger, true),
    ] {
        for point in [
            "producer.end_txn_answer_lost",
            "producer.end_txn_request_lost",
        ] {
            run += 1;
            let (group, app) = (format!("g-unknown-{run}"), format!("app-unknown-{run}"));
            let b = broker_with_lock_ms(1_000).await;
            let ids = setup(&b, &group, &[("in", 1), ("out", 1)]).await;
            if mechanism == ExactlyOnceMechanism::Ledger {
                create_ledger(&b, &format!("{app}-eos-ledger")).await;
            }
            produce_inputs(&b, "in", 1, 100).await;
            sharestream::failpoints::arm(point, Some(2));
            let mut cfg = config(&b, &app);
            cfg.exactly_once_mechanism = mechanism;
            cfg.poll_during_commit = overlap;
            cfg.max_records_per_transaction = 20;
            let h = Runtime::builder(map_values_topology(&group))
                .config(cfg)
                .start()
                .await
                .unwrap();
            let m = h.metrics().clone();
            wait_output(&b, "out", 100).await;
            // The records of a transaction whose end was unknown are
            // settled by the broker or come back after their locks.
            wait_until(30, "the share group drained", || {
                group_drained(&b, &group, ids[0], 1).is_ok()
            })
            .await;
            let what = format!("{mechanism:?} (poll.during.commit={overlap}) {point}");
            assert!(!h.is_stopping(), "{what}: the application stopped");
            h.stop().await.unwrap();
            sharestream::failpoints::disarm(point);
            assert_eq!(
                m.transactions_outcome_unknown.load(Ordering::Relaxed),
                2,
                "{what}"
            );
            assert_eq!(m.producer_recoveries.load(Ordering::Relaxed), 2, "{what}");
            assert_exactly_once(&committed(&b, "out").await, 100, |i| format!("out-v{i}"));
            assert_group_drained(&b, &group, ids[0], 1);
            b.shutdown().await;
        }
    }
}

/// The runtime bench's floor row (`runtime.ledger_floor`) prices what it
/// says: transactions of outputs with no intent in the ledger. The outputs
/// still commit once each when nothing fails, and the ledger stays empty.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bench_floor_commits_outputs_without_intents() {
    let _serial = SERIAL.lock().await;
    let b = broker_with(2).await;
    let ids = setup(&b, "g-floor", &[("in", 2), ("out", 2)]).await;
    produce_inputs(&b, "in", 2, 200).await;
    let mut cfg = config(&b, "app-floor");
    cfg.num_workers = 2;
    cfg.exactly_once_mechanism = ExactlyOnceMechanism::Ledger;
    sharestream::failpoints::arm("runtime.ledger_floor", None);
    let h = Runtime::builder(map_values_topology("g-floor"))
        .config(cfg)
        .start()
        .await
        .unwrap();
    wait_committed(&h, 200).await;
    let m = h.metrics().clone();
    h.stop().await.unwrap();
    sharestream::failpoints::disarm("runtime.ledger_floor");
    let out = committed(&b, "out").await;
    assert_exactly_once(&out, 200, |i| format!("out-v{i}"));
    assert_group_drained(&b, "g-floor", ids[0], 2);
    assert_eq!(m.ledger.intents.load(Ordering::Relaxed), 0);
    assert!(committed(&b, "app-floor-eos-ledger").await.is_empty());
    b.shutdown().await;
}
