//! The runtime with other topologies and guarantees on the embedded
//! broker: at-least-once (and its use against a broker without KIP-1289),
//! the atomic dead-letter path, a topology using every kind of operator,
//! a failing record under ErrorPolicy::Fail, refused settings and
//! topologies.

use crate::rt;

use std::sync::atomic::Ordering;
use std::time::Duration;

use rt::*;
use sharestream::runtime::{ProcessingGuarantee, Runtime, RuntimeConfig, RuntimeError};
use sharestream::topology::error::DLQ_ORIGINAL_OFFSET;
use sharestream::topology::{ErrorPolicy, Serdes, SinkRecord, StreamsBuilder, TopologyError};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kip_1289_is_refused_without_it_and_at_least_once_loses_nothing() {
    // share.version 2: share groups, but no TxnShareAcknowledge.
    let b = broker_with(2).await;
    let ids = setup(&b, "g-old", &[("in", 2), ("out", 2)]).await;
    produce_inputs(&b, "in", 2, 200).await;
    let mut forced = config(&b, "app-old");
    forced.exactly_once_mechanism = sharestream::runtime::ExactlyOnceMechanism::Kip1289;
    let err = Runtime::builder(map_values_topology("g-old"))
        .config(forced)
        .start()
        .await
        .unwrap_err();
    assert!(matches!(err, RuntimeError::Unsupported(_)), "{err}");
    assert!(
        err.to_string()
            .contains("processing.guarantee=at_least_once"),
        "{err}"
    );

    let mut cfg = config(&b, "app-old");
    cfg.processing_guarantee = ProcessingGuarantee::AtLeastOnce;
    cfg.num_workers = 3;
    let h = Runtime::builder(map_values_topology("g-old"))
        .config(cfg)
        .start()
        .await
        .unwrap();
    wait_committed(&h, 200).await;
    h.stop().await.unwrap();
    let out = committed(&b, "out").await;
    let counts = value_counts(&out);
    for i in 0..200 {
        assert!(counts.contains_key(&format!("out-v{i}")), "lost v{i}");
    }
    assert_group_drained(&b, "g-old", ids[0], 2);
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_letter_path_is_atomic_each_input_in_exactly_one_topic() {
    let b = broker().await;
    let ids = setup(&b, "g-dlq", &[("in", 1), ("out", 1), ("dlq", 1)]).await;
    produce_inputs(&b, "in", 1, 120).await;
    let mut sb = StreamsBuilder::new("g-dlq");
    sb.error_policy(ErrorPolicy::dead_letter("dlq"));
    sb.stream::<String, String>("in", Serdes::string(), Serdes::string())
        .try_map_values(|v| {
            let i: u32 = v[1..].parse().unwrap();
            if i.is_multiple_of(3) {
                Err(format!("{v} is a multiple of three"))
            } else {
                Ok(format!("out-{v}"))
            }
        })
        .to("out", Serdes::string(), Serdes::string());
    let h = Runtime::builder(sb.build().unwrap())
        .config(config(&b, "app-dlq"))
        .start()
        .await
        .unwrap();
    wait_committed(&h, 120).await;
    let m = h.metrics().clone();
    h.stop().await.unwrap();
    assert_eq!(m.records_dead_lettered.load(Ordering::Relaxed), 40);
    let out = committed(&b, "out").await;
    let dlq = committed(&b, "dlq").await;
    assert_eq!(out.len() + dlq.len(), 120);
    assert_eq!(dlq.len(), 40);
    for r in &dlq {
        let v = String::from_utf8(r.value.clone().unwrap().to_vec()).unwrap();
        let i: i64 = v[1..].parse().unwrap();
        assert_eq!(i % 3, 0);
        assert_eq!(r.header_str(DLQ_ORIGINAL_OFFSET), Some(i.to_string()));
    }
    assert_exactly_once(&out, 80, |k| {
        let i = (k / 2) * 3 + 1 + k % 2;
        format!("out-v{i}")
    });
    assert_group_drained(&b, "g-dlq", ids[0], 1);
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_operator_through_the_runtime() {
    let b = broker().await;
    setup(
        &b,
        "g-ops",
        &[("in", 1), ("in2", 1), ("even", 1), ("odd", 1), ("dyn", 3)],
    )
    .await;
    produce_inputs(&b, "in", 1, 40).await;
    produce_inputs(&b, "in2", 1, 10).await;
    let sb = StreamsBuilder::new("g-ops");
    let a = sb.stream::<String, String>("in", Serdes::string(), Serdes::string());
    let c = sb.stream::<String, String>("in2", Serdes::string(), Serdes::string());
    let n = |v: &String| v[1..].parse::<u64>().unwrap();
    let mut branches = a
        .filter(move |_, v| n(v) < 30)
        .filter_not(|_, v| v == "v29")
        .merge(c.map_values(|v| format!("v{}", 100 + v[1..].parse::<u64>().unwrap())))
        .peek(|_, _| {})
        .select_key(|_, v| v.clone())
        .map(|k, v| (k, v.to_uppercase()))
        .flat_map_values(|v| vec![v.clone(), format!("{v}-copy")])
        .map_async(
            4,
            |v: String| async move { Ok::<_, String>(v.to_lowercase()) },
        )
        .split()
        .branch("even", move |_, v| {
            v.trim_end_matches("-copy")[1..].parse::<u64>().unwrap() % 2 == 0
        })
        .default_branch("odd");
    branches
        .take("even")
        .unwrap()
        .to("even", Serdes::string(), Serdes::string());
    branches
        .take("odd")
        .unwrap()
        .to_dynamic(Serdes::string(), Serdes::string(), |r| {
            if r.value.ends_with("-copy") {
                SinkRecord::topic("dyn").partition(2).header("copy", "yes")
            } else {
                SinkRecord::topic("odd")
            }
        });
    let h = Runtime::builder(sb.build().unwrap())
        .config(config(&b, "app-ops"))
        .start()
        .await
        .unwrap();
    wait_committed(&h, 50).await;
    h.stop().await.unwrap();
    // in: v0..v28 pass (29 values); in2: v100..v109 (10). Each twice.
    let even = committed(&b, "even").await;
    let odd = committed(&b, "odd").await;
    let dynamic = committed(&b, "dyn").await;
    let evens = (0..29).filter(|i| i % 2 == 0).count() + 5;
    let odds = 39 - evens;
    assert_eq!(even.len(), evens * 2);
    assert_eq!(odd.len(), odds);
    assert_eq!(dynamic.len(), odds);
    assert!(
        dynamic
            .iter()
            .all(|r| r.partition == 2 && r.header_str("copy").as_deref() == Some("yes"))
    );
    // select_key: the key is the value before upper/lower-casing.
    let r = odd
        .iter()
        .find(|r| r.value.as_deref() == Some(&b"v7"[..]))
        .unwrap();
    assert_eq!(r.key.as_deref(), Some(&b"v7"[..]));
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_record_aborts_and_stops_with_its_coordinates() {
    let b = broker().await;
    setup(&b, "g-fail", &[("in", 1), ("out", 1)]).await;
    produce_inputs(&b, "in", 1, 30).await;
    let sb = StreamsBuilder::new("g-fail");
    sb.stream::<String, String>("in", Serdes::string(), Serdes::string())
        .try_map_values(|v| if v == "v13" { Err("bad record") } else { Ok(v) })
        .to("out", Serdes::string(), Serdes::string());
    let mut cfg = config(&b, "app-fail");
    cfg.max_poll_records = 100;
    cfg.max_records_per_transaction = 100;
    let h = Runtime::builder(sb.build().unwrap())
        .config(cfg)
        .start()
        .await
        .unwrap();
    let err = h.wait().await.unwrap_err();
    assert!(
        matches!(err, RuntimeError::Processing { offset: 13, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("in-0@13"), "{err}");
    assert!(err.to_string().contains("bad record"), "{err}");
    // v13's transaction was aborted: v13 is not in the output.
    let out = committed(&b, "out").await;
    assert!(!value_counts(&out).contains_key("v13"));
    b.shutdown().await;
}

/// The delivery-limit policy (docs/DESIGN.md D17): a record that fails
/// under ErrorPolicy::Fail stops the application while it has deliveries
/// left; on its last delivery (the group's `share.delivery.count.limit`,
/// read from the broker) it is dead-lettered with `__dlq.reason` instead,
/// so that the broker does not archive it unseen, and counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_failing_on_its_last_delivery_is_dead_lettered_not_archived_unseen() {
    use sharestream::client::admin::AlterConfigOp;
    use sharestream::topology::error::{DLQ_REASON, DLQ_REASON_DELIVERY_LIMIT};
    let b = broker().await;
    setup(&b, "g-limit", &[("in", 1), ("out", 1), ("dlq", 1)]).await;
    admin(&b)
        .incremental_alter_group_config(
            "g-limit",
            &[("share.delivery.count.limit", AlterConfigOp::Set("2".into()))],
        )
        .await
        .unwrap();
    produce_inputs(&b, "in", 1, 30).await;
    let topology = || {
        let sb = StreamsBuilder::new("g-limit");
        sb.stream::<String, String>("in", Serdes::string(), Serdes::string())
            .try_map_values(|v| if v == "v13" { Err("bad record") } else { Ok(v) })
            .to("out", Serdes::string(), Serdes::string());
        sb.build().unwrap()
    };
    let mut cfg = config(&b, "app-limit");
    cfg.max_poll_records = 100;
    cfg.max_records_per_transaction = 100;
    cfg.delivery_limit_dead_letter_topic = Some("dlq".into());
    // First delivery: the failure stops the application, as under Fail.
    let h = Runtime::builder(topology())
        .config(cfg.clone())
        .start()
        .await
        .unwrap();
    let err = h.wait().await.unwrap_err();
    assert!(
        matches!(err, RuntimeError::Processing { offset: 13, .. }),
        "{err}"
    );
    // Second and last delivery: dead-lettered, the rest processed.
    let h = Runtime::builder(topology())
        .config(cfg)
        .start()
        .await
        .unwrap();
    wait_output(&b, "out", 29).await;
    wait_output(&b, "dlq", 1).await;
    let m = h.metrics().clone();
    h.stop().await.unwrap();
    assert_eq!(
        m.records_failed_at_delivery_limit.load(Ordering::Relaxed),
        1
    );
    let out = committed(&b, "out").await;
    assert_eq!(out.len(), 29);
    assert!(!value_counts(&out).contains_key("v13"));
    let dlq = committed(&b, "dlq").await;
    assert_eq!(dlq.len(), 1);
    let header = |k: &str| {
        dlq[0]
            .headers
            .iter()
            .find(|h| h.key == k)
            .and_then(|h| h.value.clone())
            .map(|v| String::from_utf8(v.to_vec()).unwrap())
    };
    assert_eq!(
        header(DLQ_REASON).as_deref(),
        Some(DLQ_REASON_DELIVERY_LIMIT)
    );
    assert_eq!(header(DLQ_ORIGINAL_OFFSET).as_deref(), Some("13"));
    assert_eq!(
        b.core()
            .shares()
            .partition_metrics()
            .iter()
            .map(|(_, m)| m.archived_at_limit_total)
            .sum::<u64>(),
        0,
        "the broker archived nothing at the limit"
    );
    b.shutdown().await;
}

#[test]
fn refused_topologies_and_settings_say_what_to_fix() {
    let sb = StreamsBuilder::new("g");
    let _unused = sb.stream::<String, String>("in", Serdes::string(), Serdes::string());
    let err = sb.build().unwrap_err();
    assert!(err.errors.contains(&TopologyError::NoSink), "{err}");
    assert!(err.to_string().contains(".to("), "{err}");
    let err = StreamsBuilder::new("g").build().unwrap_err();
    assert!(err.errors.contains(&TopologyError::NoSource), "{err}");

    let err = RuntimeConfig::from_properties([
        ("bootstrap.servers", "a:9092"),
        ("source.bootstrap.servers", "b:9092"),
        ("processing.guarantee", "exactly_once"),
        ("exactly.once.mechanism", "kip1289"),
    ])
    .unwrap_err();
    assert_eq!(err.setting, "exactly.once.mechanism");
    assert!(err.to_string().contains("D11"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn share_group_lag_gauge_counts_unprocessed_records_and_drops_to_zero() {
    let b = broker().await;
    setup(&b, "g-lag", &[("in", 2), ("out", 2)]).await;
    produce_inputs(&b, "in", 2, 40).await;
    // Processing waits for the gate: the records stay unacknowledged.
    let (gate_tx, gate_rx) = tokio::sync::watch::channel(false);
    let builder = StreamsBuilder::new("g-lag");
    builder
        .stream::<String, String>("in", Serdes::string(), Serdes::string())
        .map_async(64, move |v: String| {
            let mut gate = gate_rx.clone();
            async move {
                let _ = gate.wait_for(|open| *open).await;
                Ok::<_, std::convert::Infallible>(format!("out-{v}"))
            }
        })
        .to("out", Serdes::string(), Serdes::string());
    let mut cfg = config(&b, "app-lag");
    cfg.lag_interval = std::time::Duration::from_millis(50);
    cfg.metrics_listen = Some("127.0.0.1:0".parse().unwrap());
    let h = Runtime::builder(builder.build().unwrap())
        .config(cfg)
        .start()
        .await
        .unwrap();
    let m = h.metrics().clone();
    wait_until(20, "lag of the unprocessed records", || {
        m.share_group_lag().is_some_and(|l| l.len() == 2) && m.share_group_lag_total() == Some(40)
    })
    .await;
    assert_eq!(m.records_committed.load(Ordering::Relaxed), 0);
    let text = scrape(h.metrics_addr().unwrap()).await;
    assert!(
        text.contains("sharestream_share_group_lag{topic=\"in\",partition=\"0\"} 20"),
        "{text}"
    );
    gate_tx.send(true).unwrap();
    wait_committed(&h, 40).await;
    wait_until(20, "lag back to 0", || m.share_group_lag_total() == Some(0)).await;
    h.stop().await.unwrap();
    assert_exactly_once(&committed(&b, "out").await, 40, |i| format!("out-v{i}"));
    b.shutdown().await;
}

async fn scrape(addr: std::net::SocketAddr) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    out
}

/// A slow async map (each record takes twice the 1.5 s acquisition lock):
/// the worker renews its records' locks while they are in processing, so
/// the broker hands none of them to the other worker meanwhile. Every input
/// arrives once, no transaction aborts, and the broker counts no lock
/// expiry and no redelivery.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_in_a_slow_map_keep_their_locks_by_renewal() {
    use sharestream::client::admin::AlterConfigOp;
    let b = broker().await;
    setup(&b, "g-slow", &[("in", 1), ("out", 1)]).await;
    admin(&b)
        .incremental_alter_group_config(
            "g-slow",
            &[(
                "share.record.lock.duration.ms",
                AlterConfigOp::Set("1500".into()),
            )],
        )
        .await
        .unwrap();
    produce_inputs(&b, "in", 1, 20).await;
    let sb = StreamsBuilder::new("g-slow");
    sb.stream::<String, String>("in", Serdes::string(), Serdes::string())
        .map_async(64, |v: String| async move {
            tokio::time::sleep(std::time::Duration::from_millis(3_000)).await;
            Ok::<_, std::convert::Infallible>(v)
        })
        .to("out", Serdes::string(), Serdes::string());
    let mut cfg = config(&b, "app-slow");
    cfg.num_workers = 2;
    cfg.max_poll_records = 20;
    cfg.max_records_per_transaction = 20;
    let h = Runtime::builder(sb.build().unwrap())
        .config(cfg)
        .start()
        .await
        .unwrap();
    wait_output(&b, "out", 20).await;
    let m = h.metrics().clone();
    h.stop().await.unwrap();
    assert_exactly_once(&committed(&b, "out").await, 20, |i| format!("v{i}"));
    assert!(
        m.lock_renewals.load(Ordering::Relaxed) > 0,
        "processing outlasted the lock, yet nothing was renewed"
    );
    assert_eq!(m.transactions_aborted.load(Ordering::Relaxed), 0);
    let (expired, redelivered) = b
        .core()
        .shares()
        .partition_metrics()
        .iter()
        .fold((0, 0), |(e, r), (_, m)| {
            (e + m.lock_expired_total, r + m.redeliveries_total)
        });
    assert_eq!(
        (expired, redelivered),
        (0, 0),
        "locks expired or records were delivered again"
    );
    b.shutdown().await;
}

/// at_least_once does not wait for records while its own acknowledgements
/// are about to go out (D47). With the share partition's record-lock cap
/// at one poll's worth, the leader acquires nothing more until the
/// previous poll's records are acknowledged, and under at_least_once
/// their acknowledgements wait for the outputs' deliveries. A poll that
/// waited for records meanwhile waited out its whole timeout (100 ms) on
/// every poll batch. On the paused clock the 900 records after the first
/// poll batch must be acknowledged in far less than 9 such waits.
#[tokio::test(start_paused = true)]
async fn at_least_once_does_not_wait_on_its_own_record_locks() {
    let b = broker_with_locks(3, 100).await;
    let ids = setup(&b, "g-alo-locks", &[("in", 1), ("out", 1)]).await;
    produce_inputs(&b, "in", 1, 1_000).await;
    let sb = StreamsBuilder::new("g-alo-locks");
    sb.stream::<String, String>("in", Serdes::string(), Serdes::string())
        .to("out", Serdes::string(), Serdes::string());
    let mut cfg = config(&b, "app-alo-locks");
    cfg.processing_guarantee = ProcessingGuarantee::AtLeastOnce;
    cfg.num_workers = 1;
    cfg.max_poll_records = 100;
    // No window ends while the records flow: their acknowledgements go out
    // on the fetches only.
    cfg.commit_interval = Duration::from_secs(60);
    cfg.max_records_per_transaction = 1_000_000;
    let h = Runtime::builder(sb.build().unwrap())
        .config(cfg)
        .start()
        .await
        .unwrap();
    let shares = b.core().shares();
    let tid = ids[0];
    let acked = |n: i64| {
        move || {
            shares
                .partition_offsets("g-alo-locks", tid, 0)
                .is_some_and(|(start, _)| start >= n)
        }
    };
    wait_until(30, "the first poll batch acknowledged", acked(100)).await;
    let t0 = tokio::time::Instant::now();
    wait_until(30, "every record acknowledged", acked(1_000)).await;
    let took = t0.elapsed();
    h.stop().await.unwrap();
    assert!(
        took < Duration::from_millis(450),
        "900 records took {took:?} of the paused clock: the loop waited on its own locks"
    );
    let counts = value_counts(&committed(&b, "out").await);
    assert_eq!(counts.len(), 1_000, "every input forwarded");
    b.shutdown().await;
}

/// at_least_once acknowledges a record only once every output of it is
/// written: an output the producer cannot deliver (larger than
/// `max.request.size`) RELEASEs its source record, which comes back, while
/// the other records of the same poll are ACCEPTed; on its last delivery
/// the broker archives it, and the runtime counts that.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_least_once_releases_a_record_whose_output_failed() {
    let b = broker().await;
    let ids = setup(&b, "g-alo-fail", &[("in", 1), ("out", 1)]).await;
    produce_inputs(&b, "in", 1, 10).await;
    let sb = StreamsBuilder::new("g-alo-fail");
    sb.stream::<String, String>("in", Serdes::string(), Serdes::string())
        .map_values(|v| {
            if v == "v5" {
                "x".repeat(2 << 20)
            } else {
                format!("out-{v}")
            }
        })
        .to("out", Serdes::string(), Serdes::string());
    let mut cfg = config(&b, "app-alo-fail");
    cfg.processing_guarantee = ProcessingGuarantee::AtLeastOnce;
    let h = Runtime::builder(sb.build().unwrap())
        .config(cfg)
        .start()
        .await
        .unwrap();
    // Offset 5 comes back until the delivery limit (5 here), then the
    // broker archives it; the runtime counts and logs that.
    let shares = b.core().shares();
    let m = h.metrics().clone();
    wait_until(30, "every record terminal", || {
        m.records_committed.load(Ordering::Relaxed) >= 9
            && shares
                .partition_offsets("g-alo-fail", ids[0], 0)
                .is_some_and(|(start, _)| start == 10)
    })
    .await;
    h.stop().await.unwrap();
    assert_eq!(
        m.records_in.load(Ordering::Relaxed),
        9 + 5,
        "offset 5 delivered 5 times"
    );
    assert_eq!(
        m.records_released_at_delivery_limit.load(Ordering::Relaxed),
        1
    );
    let counts = value_counts(&committed(&b, "out").await);
    for i in (0..10).filter(|i| *i != 5) {
        assert!(
            counts.contains_key(&format!("out-v{i}")),
            "lost v{i}: {counts:?}"
        );
    }
    assert_eq!(counts.len(), 9, "{counts:?}");
    b.shutdown().await;
}

/// The workers' `batch.size` (D50): 128 KiB by default, lowered to an
/// output topic's smaller `max.message.bytes` (a larger batch would be
/// refused); a value set above it is refused at start-up with the setting
/// named; outputs flow with the lowered size.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_describe_configs_reads_a_config_of_several_topics() {
    use sharestream::client::ConnectionConfig;
    use sharestream::client::admin::{AdminClient, AlterConfigOp, RESOURCE_TYPE_TOPIC};
    let b = broker().await;
    setup(&b, "g-dc", &[("dc-a", 1), ("dc-b", 1)]).await;
    let admin = AdminClient::new(vec![b.bootstrap_servers()], ConnectionConfig::default());
    admin
        .incremental_alter_configs(
            RESOURCE_TYPE_TOPIC,
            "dc-a",
            &[("max.message.bytes", AlterConfigOp::Set("30000".into()))],
        )
        .await
        .unwrap();
    let got = admin
        .describe_topics_config(&["dc-a", "dc-b", "dc-missing"], "max.message.bytes")
        .await
        .unwrap();
    assert_eq!(got.len(), 3, "{got:?}");
    assert_eq!(got["dc-a"].as_ref().unwrap().as_deref(), Some("30000"));
    let other: u64 = got["dc-b"]
        .as_ref()
        .unwrap()
        .as_deref()
        .unwrap()
        .parse()
        .unwrap();
    assert!(other > 30000, "the default of the other topic: {other}");
    assert!(got["dc-missing"].is_err(), "{got:?}");
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_size_fits_the_output_topics_max_message_bytes() {
    use sharestream::client::ConnectionConfig;
    use sharestream::client::admin::{AdminClient, AlterConfigOp, RESOURCE_TYPE_TOPIC};
    let b = broker().await;
    setup(&b, "g-bs", &[("in", 1), ("out", 1)]).await;
    // Without a smaller limit, the default.
    let h = Runtime::builder(map_values_topology("g-bs"))
        .config(config(&b, "app-bs"))
        .start()
        .await
        .unwrap();
    assert_eq!(
        h.config().batch_size,
        Some(sharestream::runtime::config::DEFAULT_BATCH_SIZE)
    );
    h.stop().await.unwrap();
    AdminClient::new(vec![b.bootstrap_servers()], ConnectionConfig::default())
        .incremental_alter_configs(
            RESOURCE_TYPE_TOPIC,
            "out",
            &[("max.message.bytes", AlterConfigOp::Set("20000".into()))],
        )
        .await
        .unwrap();
    let mut set = config(&b, "app-bs");
    set.batch_size = Some(65536);
    let err = Runtime::builder(map_values_topology("g-bs"))
        .config(set)
        .start()
        .await
        .unwrap_err();
    assert!(matches!(err, RuntimeError::Config(_)), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains("batch.size") && msg.contains("out") && msg.contains("20000"),
        "{msg}"
    );
    produce_inputs(&b, "in", 1, 300).await;
    let h = Runtime::builder(map_values_topology("g-bs"))
        .config(config(&b, "app-bs"))
        .start()
        .await
        .unwrap();
    assert_eq!(h.config().batch_size, Some(20000));
    wait_committed(&h, 300).await;
    h.stop().await.unwrap();
    let counts = value_counts(&committed(&b, "out").await);
    assert_eq!(
        counts.len(),
        300,
        "every output written within the topic's limit"
    );
    b.shutdown().await;
}
