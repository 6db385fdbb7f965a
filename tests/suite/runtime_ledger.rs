//! exactly_once through the intent ledger (docs/EXACTLY-ONCE.md): on a
//! broker without KIP-1289, across two clusters, the check that accepts
//! records a committed intent covers without output, and the fence of an
//! open intent. Checked with a read_committed read of the outputs and the
//! broker's share state, not the runtime's word.

use crate::common::broker::TestBroker;
use crate::rt;

use std::sync::atomic::Ordering;
use std::time::Duration;

use rt::*;
use sharestream::broker::BrokerHandle;
use sharestream::client::ProducerRecord;
use sharestream::client::admin::NewTopic;
use sharestream::runtime::{ExactlyOnceMechanism, Runtime, RuntimeError};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exactly_once_without_kip_1289_goes_through_the_ledger() {
    // share.version 2: share groups, no TxnShareAcknowledge (as Kafka 4.2-4.4).
    let b = broker_with(2).await;
    let ids = setup(&b, "g-led", &[("in", 2), ("out", 2)]).await;
    produce_inputs(&b, "in", 2, 300).await;

    // Forcing KIP-1289 is refused, naming the way out.
    let mut forced = config(&b, "app-led");
    forced.exactly_once_mechanism = ExactlyOnceMechanism::Kip1289;
    let err = Runtime::builder(map_values_topology("g-led"))
        .config(forced)
        .start()
        .await
        .unwrap_err();
    assert!(matches!(err, RuntimeError::Unsupported(_)), "{err}");
    assert!(
        err.to_string().contains("exactly.once.mechanism=ledger"),
        "{err}"
    );

    let mut cfg = config(&b, "app-led");
    cfg.num_workers = 3;
    let h = Runtime::builder(map_values_topology("g-led"))
        .config(cfg)
        .start()
        .await
        .unwrap();
    assert_eq!(
        h.config().exactly_once_mechanism,
        ExactlyOnceMechanism::Ledger,
        "auto picks the ledger without KIP-1289"
    );
    wait_committed(&h, 300).await;
    let m = h.metrics().clone();
    h.stop().await.unwrap();
    let out = committed(&b, "out").await;
    assert_exactly_once(&out, 300, |i| format!("out-v{i}"));
    assert_group_drained(&b, "g-led", ids[0], 2);
    assert!(m.ledger.intents.load(Ordering::Relaxed) > 0);
    let ledger = committed(&b, "app-led-eos-ledger").await;
    assert_eq!(
        ledger.len() as u64,
        m.ledger.intents.load(Ordering::Relaxed),
        "every intent of a committed transaction is in the ledger"
    );
    let page = m.render_prometheus();
    assert!(
        page.contains("sharestream_runtime_exactly_once_mechanism{mechanism=\"ledger\"} 1"),
        "{page}"
    );
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exactly_once_across_two_clusters_through_the_ledger() {
    let source = broker_with(2).await;
    let target = broker().await;
    let ids = setup(&source, "g-x", &[("in", 2)]).await;
    admin(&target)
        .create_topic(NewTopic::new("out", 2))
        .await
        .unwrap();
    produce_inputs(&source, "in", 2, 200).await;
    let mut cfg = config(&target, "app-x");
    cfg.source_bootstrap_servers = Some(vec![source.bootstrap_servers()]);
    cfg.num_workers = 2;
    let h = Runtime::builder(map_values_topology("g-x"))
        .config(cfg)
        .start()
        .await
        .unwrap();
    assert_eq!(
        h.config().exactly_once_mechanism,
        ExactlyOnceMechanism::Ledger,
        "two clusters: the ledger, even though the target has KIP-1289"
    );
    wait_committed(&h, 200).await;
    h.stop().await.unwrap();
    assert_exactly_once(&committed(&target, "out").await, 200, |i| {
        format!("out-v{i}")
    });
    assert_group_drained(&source, "g-x", ids[0], 2);
    source.shutdown().await;
    target.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_a_committed_intent_covers_are_accepted_without_output() {
    // As after a crash between the commit and the ACCEPT: the outputs of
    // offsets 0..=9 exist (a committed intent says so), the records are
    // still in the share group.
    let b = broker_with(2).await;
    let ids = setup(&b, "g-done", &[("in", 1), ("out", 1)]).await;
    create_ledger(&b, "app-done-eos-ledger").await;
    produce_inputs(&b, "in", 1, 30).await;
    let earlier = txn_producer(&b, "app-done-earlier-0").await;
    earlier.begin_transaction().unwrap();
    send_intent(
        &earlier,
        "app-done-eos-ledger",
        ids[0],
        0,
        (0, 9),
        "app-done-earlier-0",
    )
    .await;
    earlier.commit_transaction().await.unwrap();
    earlier.close().await;

    let h = Runtime::builder(map_values_topology("g-done"))
        .config(config(&b, "app-done"))
        .start()
        .await
        .unwrap();
    let m = h.metrics().clone();
    wait_until(30, "30 records settled", || {
        m.records_committed.load(Ordering::Relaxed)
            + m.ledger.skipped_committed.load(Ordering::Relaxed)
            >= 30
    })
    .await;
    h.stop().await.unwrap();
    assert_eq!(m.ledger.skipped_committed.load(Ordering::Relaxed), 10);
    let out = committed(&b, "out").await;
    assert_exactly_once(&out, 20, |i| format!("out-v{}", i + 10));
    assert_group_drained(&b, "g-done", ids[0], 1);
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_intent_is_waited_for_then_its_writer_fenced() {
    // A zombie wrote an intent for offsets 0..=19 and never ended its
    // transaction. The runtime must not process them before that intent
    // is resolved: it waits, fences the zombie's transactional id (its
    // transaction aborts), then processes them once.
    let b = broker_with(2).await;
    let ids = setup(&b, "g-open", &[("in", 1), ("out", 1)]).await;
    create_ledger(&b, "app-open-eos-ledger").await;
    produce_inputs(&b, "in", 1, 40).await;
    let zombie = txn_producer(&b, "app-open-zombie-0").await;
    zombie.begin_transaction().unwrap();
    send_intent(
        &zombie,
        "app-open-eos-ledger",
        ids[0],
        0,
        (0, 19),
        "app-open-zombie-0",
    )
    .await;
    // Its output, in the same transaction: must never become visible.
    zombie
        .send(ProducerRecord::new("out", "zombie-output").with_partition(0))
        .await
        .await
        .unwrap();

    let mut cfg = config(&b, "app-open");
    cfg.ledger_fence_wait = Some(Duration::from_millis(300));
    let h = Runtime::builder(map_values_topology("g-open"))
        .config(cfg)
        .start()
        .await
        .unwrap();
    wait_committed(&h, 40).await;
    let m = h.metrics().clone();
    h.stop().await.unwrap();
    assert_eq!(m.ledger.fences.load(Ordering::Relaxed), 1);
    // The zombie is fenced: its commit fails.
    assert!(zombie.commit_transaction().await.is_err());
    zombie.close().await;
    let out = committed(&b, "out").await;
    assert_exactly_once(&out, 40, |i| format!("out-v{i}"));
    assert_group_drained(&b, "g-open", ids[0], 1);
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ledger_topic_that_could_lose_intents_is_refused() {
    let b = broker_with(2).await;
    setup(&b, "g-bad", &[("in", 1), ("out", 1)]).await;
    let mut t = NewTopic::new("app-bad-eos-ledger", 1);
    t.configs.insert("cleanup.policy".into(), "compact".into());
    admin(&b).create_topic(t).await.unwrap();
    let err = Runtime::builder(map_values_topology("g-bad"))
        .config(config(&b, "app-bad"))
        .start()
        .await
        .unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("cleanup.policy=compact"), "{msg}");
    assert!(msg.contains("exactly.once.ledger.topic"), "{msg}");
    b.shutdown().await;
}

/// The ledger is trimmed (DeleteRecords) once its intents' records are
/// terminal at the source and the grace has passed; processing goes on
/// exactly once across the trim, and a new process replays only what is
/// left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ledger_is_trimmed_once_its_records_are_terminal() {
    let b = broker_with(2).await;
    let ids = setup(&b, "g-trim", &[("in", 2), ("out", 2)]).await;
    produce_inputs(&b, "in", 2, 200).await;
    let trimming = |b: &BrokerHandle| {
        let mut cfg = config(b, "app-trim");
        cfg.num_workers = 2;
        cfg.ledger_partitions = Some(2);
        cfg.ledger_trim_interval = Some(Duration::from_millis(200));
        cfg.ledger_max_batch_age = Duration::from_secs(3);
        cfg.ledger_trim_margin = Duration::from_millis(200);
        cfg
    };
    let h = Runtime::builder(map_values_topology("g-trim"))
        .config(trimming(&b))
        .start()
        .await
        .unwrap();
    wait_committed(&h, 200).await;
    let m = h.metrics().clone();
    wait_until(30, "a trim of the ledger", || {
        m.ledger.trims.load(Ordering::Relaxed) > 0
    })
    .await;
    // The broker's word, not the runtime's: the ledger's log start.
    let ledger = "app-trim-eos-ledger";
    let starts = admin(&b)
        .list_start_offsets(&[(ledger.into(), 0), (ledger.into(), 1)])
        .await
        .unwrap();
    let start: i64 = starts.values().map(|r| *r.as_ref().unwrap()).sum();
    assert!(start > 0, "the ledger's log start moved: {starts:?}");
    assert!(
        m.ledger.log_start.load(Ordering::Relaxed) <= start,
        "the metric never claims more than the broker holds"
    );
    // More input after the trim, then a second process of the app.
    produce_inputs(&b, "in", 2, 200).await;
    let h2 = Runtime::builder(map_values_topology("g-trim"))
        .config(trimming(&b))
        .start()
        .await
        .unwrap();
    wait_until_async(30, "400 outputs", || async {
        committed(&b, "out").await.len() >= 400
    })
    .await;
    h.stop().await.unwrap();
    h2.stop().await.unwrap();
    let out = committed(&b, "out").await;
    // produce_inputs numbers each run from 0: every value twice, once per run.
    let counts = value_counts(&out);
    assert_eq!(counts.len(), 200, "{counts:?}");
    assert!(counts.values().all(|&n| n == 2), "{counts:?}");
    assert_eq!(out.len(), 400);
    assert_group_drained(&b, "g-trim", ids[0], 2);
    b.shutdown().await;
}

/// A batch whose decision comes later than
/// `exactly.once.ledger.max.batch.age.ms` after its acquisition is not
/// committed: it is released and processed again, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_older_than_the_age_limit_is_released_not_committed() {
    use sharestream::topology::{Serdes, StreamsBuilder};
    let b = broker_with(2).await;
    let ids = setup(&b, "g-old", &[("in", 1), ("out", 1)]).await;
    produce_inputs(&b, "in", 1, 20).await;
    let sb = StreamsBuilder::new("g-old");
    sb.stream::<String, String>("in", Serdes::string(), Serdes::string())
        .map_record_async(
            4,
            |r: sharestream::topology::Record<String, String>| async move {
                // The first delivery of v3 takes longer than the age limit.
                if r.value == "v3" && r.source().delivery_count == 1 {
                    tokio::time::sleep(Duration::from_millis(2500)).await;
                }
                let v = format!("out-{}", r.value);
                Ok::<_, std::convert::Infallible>(r.with_value(v))
            },
        )
        .to("out", Serdes::string(), Serdes::string());
    let mut cfg = config(&b, "app-old");
    cfg.ledger_max_batch_age = Duration::from_millis(1500);
    let h = Runtime::builder(sb.build().unwrap())
        .config(cfg)
        .start()
        .await
        .unwrap();
    wait_committed(&h, 20).await;
    let m = h.metrics().clone();
    h.stop().await.unwrap();
    assert!(
        m.ledger.too_old.load(Ordering::Relaxed) > 0,
        "the slow batch was refused"
    );
    let out = committed(&b, "out").await;
    assert_exactly_once(&out, 20, |i| format!("out-v{i}"));
    assert_group_drained(&b, "g-old", ids[0], 1);
    b.shutdown().await;
}

/// A source and a target broker, group `g-{name}` reading `in` on the
/// source, application `app-{name}` (its config adjusted by `tweak`)
/// writing to the target, with ten inputs processed.
async fn two_clusters_ten_committed(
    name: &str,
    tweak: impl FnOnce(&mut sharestream::runtime::RuntimeConfig),
) -> (
    BrokerHandle,
    BrokerHandle,
    Vec<uuid::Uuid>,
    sharestream::runtime::RuntimeHandle,
) {
    let group = format!("g-{name}");
    let source = broker_with(2).await;
    let target = broker().await;
    let ids = setup(&source, &group, &[("in", 1)]).await;
    admin(&target)
        .create_topic(NewTopic::new("out", 1))
        .await
        .unwrap();
    produce_inputs(&source, "in", 1, 10).await;
    let mut cfg = config(&target, &format!("app-{name}"));
    cfg.source_bootstrap_servers = Some(vec![source.bootstrap_servers()]);
    cfg.request_timeout = Duration::from_millis(500);
    tweak(&mut cfg);
    let h = Runtime::builder(map_values_topology(&group))
        .config(cfg)
        .start()
        .await
        .unwrap();
    wait_committed(&h, 10).await;
    (source, target, ids, h)
}

/// While the target cluster cannot be read, a worker releases what it
/// polled and polls no more until the ledger answers again: each
/// acquisition counts towards the source's delivery limit (Kafka's default
/// is 5), and polling on at once would spend a record's deliveries in
/// seconds and have it archived unprocessed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_target_that_cannot_be_read_spends_no_deliveries() {
    let (source, target, ids, h) = two_clusters_ten_committed("down", |_| {}).await;
    // The target goes away; ten more records arrive at the source.
    target.shutdown().await;
    produce_inputs(&source, "in", 1, 10).await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    let shares = source.core().shares();
    // Nothing archived at the delivery limit: the start offset stays at
    // the first of the ten new records.
    let (start, _) = shares.partition_offsets("g-down", ids[0], 0).unwrap();
    assert_eq!(start, 10, "records archived unprocessed");
    let runs = shares.record_runs("g-down", ids[0], 0);
    let max_delivery = runs
        .iter()
        .map(|(_, _, info)| info.delivery_count)
        .max()
        .unwrap_or(0);
    // At most a few polls in 4 s (backing off from 100 ms), not one per
    // poll loop turn.
    assert!(
        (1..=5).contains(&max_delivery),
        "delivery count {max_delivery} after 4 s without a target"
    );
    // Held while their 1.5 s lock lasted, then released.
    assert!(
        h.metrics()
            .ledger
            .unreadable_released
            .load(Ordering::Relaxed)
            >= 10
    );
    h.stop().await.unwrap();
    source.shutdown().await;
}

/// Through the ledger, a record the worker cannot check in time is
/// RELEASEd; on its last delivery the broker then archives it without
/// output. That loss is the one the delivery count limit allows, and it is
/// not silent: the runtime counts each such release and logs it. (The
/// runtime is told a limit of 1, below what a broker accepts, so that the
/// first delivery is the last one.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_released_on_its_last_delivery_is_counted() {
    let (source, target, _, h) =
        two_clusters_ten_committed("last", |c| c.delivery_count_limit = Some(1)).await;
    let m = h.metrics().clone();
    assert_eq!(
        m.records_released_at_delivery_limit.load(Ordering::Relaxed),
        0
    );
    // The target goes away; ten more records arrive, are held while their
    // lock lasts, then released.
    target.shutdown().await;
    produce_inputs(&source, "in", 1, 10).await;
    wait_until(30, "the ten records released", || {
        m.ledger.unreadable_released.load(Ordering::Relaxed) >= 10
    })
    .await;
    assert_eq!(
        m.records_released_at_delivery_limit.load(Ordering::Relaxed),
        10
    );
    h.stop().await.unwrap();
    source.shutdown().await;
}

/// A target outage shorter than the records' acquisition lock spends no
/// delivery: the worker holds the records it could not check and checks
/// them again when the ledger answers, instead of releasing them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_target_outage_spends_no_delivery() {
    let source = broker_with_lock_ms(15_000).await;
    let dir = tempfile::tempdir().unwrap();
    let target = TestBroker::on_disk(dir.path()).start().await.b;
    let addr = target.local_addr();
    let ids = setup(&source, "g-blip", &[("in", 1)]).await;
    admin(&target)
        .create_topic(NewTopic::new("out", 1))
        .await
        .unwrap();
    produce_inputs(&source, "in", 1, 10).await;
    let mut cfg = config(&target, "app-blip");
    cfg.source_bootstrap_servers = Some(vec![source.bootstrap_servers()]);
    cfg.request_timeout = Duration::from_millis(500);
    let h = Runtime::builder(map_values_topology("g-blip"))
        .config(cfg)
        .start()
        .await
        .unwrap();
    wait_committed(&h, 10).await;
    let m = h.metrics().clone();
    // The target goes away; ten more records arrive and are acquired.
    target.shutdown().await;
    produce_inputs(&source, "in", 1, 10).await;
    let shares = source.core().shares();
    wait_until(10, "the new records acquired", || {
        shares
            .record_runs("g-blip", ids[0], 0)
            .iter()
            .any(|(_, last, info)| *last >= 19 && info.delivery_count == 1)
    })
    .await;
    // Longer than a ledger check's request timeout (500 ms): it failed.
    tokio::time::sleep(Duration::from_secs(2)).await;
    // Back on the same address and data, well within the 15 s lock.
    let target = TestBroker::on_disk(dir.path())
        .configure(|c| c.listen = addr)
        .start()
        .await
        .b;
    wait_committed(&h, 20).await;
    assert_eq!(m.ledger.unreadable_released.load(Ordering::Relaxed), 0);
    assert!(m.ledger.unreadable_held.load(Ordering::Relaxed) >= 1);
    // Every record once (the two rounds of inputs carry the same ten
    // values), and none delivered twice at the source.
    let counts = value_counts(&committed(&target, "out").await);
    assert_eq!(counts.len(), 10, "{counts:?}");
    assert!(counts.values().all(|&n| n == 2), "{counts:?}");
    let runs = shares.record_runs("g-blip", ids[0], 0);
    assert!(
        runs.iter().all(|(_, _, info)| info.delivery_count <= 1),
        "{runs:?}"
    );
    h.stop().await.unwrap();
    target.shutdown().await;
    source.shutdown().await;
}

/// The index tails every ledger partition with one long-polling Fetch per
/// leader broker (docs/DESIGN.md D51): on one broker, a 4-partition
/// ledger costs one Fetch per long poll (250 ms) while idle, where a Fetch
/// per partition cost four; and the index still serves exactly-once.
/// The count is the broker's, over a wall-clock window: a slow machine
/// sends fewer, never more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_index_reads_every_ledger_partition_in_one_fetch() {
    let b = broker_with(2).await;
    let ids = setup(&b, "g-tail", &[("in", 4), ("out", 4)]).await;
    produce_inputs(&b, "in", 4, 200).await;
    let mut cfg = config(&b, "app-tail");
    cfg.num_workers = 2;
    cfg.ledger_partitions = Some(4);
    cfg.ledger_trim_interval = None;
    let h = Runtime::builder(map_values_topology("g-tail"))
        .config(cfg)
        .start()
        .await
        .unwrap();
    assert_eq!(
        h.config().exactly_once_mechanism,
        ExactlyOnceMechanism::Ledger
    );
    wait_committed(&h, 200).await;
    // Idle: no input, so only the index's long polls reach the broker as
    // Fetch requests (the workers use ShareFetch).
    const FETCH: i16 = 1;
    let fetches = || b.core().metrics().api(FETCH).map_or(0, |s| s.count);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = fetches();
    let window = Duration::from_secs(3);
    tokio::time::sleep(window).await;
    let idle = fetches() - before;
    let long_polls = (window.as_millis() / 250) as u64;
    assert!(
        idle <= long_polls + 2,
        "{idle} Fetch requests in {window:?} of idle index: more than one per long poll ({long_polls})"
    );
    assert!(idle > 0, "the index stopped tailing the ledger");
    h.stop().await.unwrap();
    assert_exactly_once(&committed(&b, "out").await, 200, |i| format!("out-v{i}"));
    assert_group_drained(&b, "g-tail", ids[0], 4);
    b.shutdown().await;
}
