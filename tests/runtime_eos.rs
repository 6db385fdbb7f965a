//! The runtime end to end on the embedded broker, exactly-once: every
//! input in the output exactly once and nothing left in the share group,
//! also with injected failures (abort mid-batch, a worker dropped between
//! send and commit, a producer fenced, a stale member epoch).

#[global_allocator]
static GLOBAL: sharestream::alloc::GuardedAlloc = sharestream::alloc::GuardedAlloc::new();

#[path = "runtime_common/mod.rs"]
mod rt;

use std::sync::atomic::Ordering;
use std::time::Duration;

use rt::*;
use sharestream::runtime::{Runtime, RuntimeError};
use sharestream::topology::{Serdes, StreamsBuilder, Topology};

fn topology(group: &str) -> Topology {
    let mut b = StreamsBuilder::new(group);
    b.stream::<String, String>("in", Serdes::string(), Serdes::string())
        .map_values(|v| format!("out-{v}"))
        .to("out", Serdes::string(), Serdes::string());
    b.build().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exactly_once_two_workers_every_input_once() {
    let b = broker().await;
    let ids = setup(&b, "g1", &[("in", 2), ("out", 2)]).await;
    produce_inputs(&b, "in", 2, 300).await;
    let mut cfg = config(&b, "app1");
    cfg.num_workers = 2;
    let h = Runtime::builder(topology("g1")).config(cfg).start().await.unwrap();
    wait_committed(&h, 300).await;
    let m = h.metrics().clone();
    h.stop().await.unwrap();
    let out = committed(&b, "out").await;
    assert_exactly_once(&out, 300, |i| format!("out-v{i}"));
    // Keys, headers, timestamps and (2 partitions each side) partitions
    // come through the map_values topology.
    let r = out.iter().find(|r| r.value.as_deref() == Some(&b"out-v7"[..])).unwrap();
    assert_eq!(r.key.as_deref(), Some(&b"k7"[..]));
    assert_eq!(r.header_str("i").as_deref(), Some("7"));
    assert_group_drained(&b, "g1", ids[0], 2);
    assert_eq!(m.records_out.load(Ordering::Relaxed), 300);
    assert!(m.transactions_committed.load(Ordering::Relaxed) >= 3);
    assert_eq!(m.transactions_aborted.load(Ordering::Relaxed), 0);
    let text = m.render_prometheus();
    assert!(text.contains("sharestream_runtime_records_out_total 300"), "{text}");
    b.shutdown().await;
}
