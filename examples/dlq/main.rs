//! An atomic dead-letter connector on sharestream.
//!
//! A user processing function handles each record. On success its output
//! is produced and the source record ACCEPTed; when it still fails after
//! bounded in-process retries, the source record goes to the dead-letter
//! topic with headers saying where it came from and why (original topic,
//! partition, offset and timestamp, delivery count, attempts (earlier
//! deliveries plus in-process retries), error kind, failing node, and the
//! message) and is REJECTed. Either way the produce and the acknowledgement are one
//! transaction (KIP-1289): a record is never both processed and
//! dead-lettered, nor lost between the two.
//!
//! Without `--bootstrap-server` it runs a demo on the embedded broker with
//! a configurable failure rate and verifies that every input is in
//! exactly one of the output and dead-letter topics.
//!
//! ```sh
//! cargo run --release --example dlq
//! cargo run --release --example dlq -- --failure-rate 0.3 --records 20000
//! ```

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use clap::Parser;
use serde::{Deserialize, Serialize};
use sharestream::broker::{Broker, BrokerConfig};
use sharestream::client::admin::{AdminClient, AlterConfigOp, NewTopic};
use sharestream::client::{ConnectionConfig, Metadata, Producer, ProducerConfig, ProducerRecord};
use sharestream::runtime::verify::read_committed;
use sharestream::runtime::{Runtime, RuntimeConfig};
use sharestream::topology::error::{
    DLQ_ATTEMPTS, DLQ_ERROR_KIND, DLQ_ERROR_MESSAGE, DLQ_ORIGINAL_OFFSET, DLQ_ORIGINAL_TOPIC,
};
use sharestream::topology::{AttemptsExhausted, ErrorPolicy, Serdes, StreamsBuilder, Topology};

#[global_allocator]
static GLOBAL: sharestream::alloc::GuardedAlloc = sharestream::alloc::GuardedAlloc::new();

/// Atomic dead-letter connector.
#[derive(Parser, Debug, Clone)]
#[command(about)]
struct Args {
    /// Cluster; without it, the embedded demo.
    #[arg(long)]
    bootstrap_server: Option<String>,
    /// Input topic.
    #[arg(long, default_value = "payments")]
    input: String,
    /// Output topic.
    #[arg(long, default_value = "payments-processed")]
    output: String,
    /// Dead-letter topic.
    #[arg(long, default_value = "payments-dlq")]
    dlq: String,
    /// Attempts per record before it is dead-lettered.
    #[arg(long, default_value_t = 3)]
    max_attempts: u32,
    /// Demo: share of records that always fail.
    #[arg(long, default_value_t = 0.1)]
    failure_rate: f64,
    /// Demo: share of records whose first attempt fails (then succeed).
    #[arg(long, default_value_t = 0.1)]
    transient_rate: f64,
    /// Demo: records to produce.
    #[arg(long, default_value_t = 10_000)]
    records: usize,
    /// Workers.
    #[arg(long, default_value_t = 4)]
    workers: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Payment {
    id: u64,
    amount_cents: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Receipt {
    id: u64,
    amount_cents: u64,
    fee_cents: u64,
}

/// The user's processing function: may fail, transiently or for good.
/// In the demo a record fails for good when `id` hashes below the failure
/// rate, and its first attempt fails when it hashes below the transient
/// rate.
async fn process_payment(p: &Payment, attempt: u32, args: &Args) -> Result<Receipt, String> {
    let h = (p.id.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 11) as f64 / (1u64 << 53) as f64;
    if h < args.failure_rate {
        return Err(format!("payment {} declined by the ledger", p.id));
    }
    let h2 = (p.id.wrapping_mul(0xC2B2_AE3D_27D4_EB4F) >> 11) as f64 / (1u64 << 53) as f64;
    if attempt == 1 && h2 < args.transient_rate {
        return Err(format!("ledger timeout for payment {}", p.id));
    }
    Ok(Receipt {
        id: p.id,
        amount_cents: p.amount_cents,
        fee_cents: p.amount_cents / 100,
    })
}

fn topology(args: &Args) -> Topology {
    let mut b = StreamsBuilder::new(format!("{}-connector", args.input));
    b.error_policy(ErrorPolicy::dead_letter(args.dlq.clone()));
    let a = args.clone();
    b.stream::<String, Payment>(args.input.clone(), Serdes::string(), Serdes::json())
        .map_async(64, move |p: Payment| {
            let a = a.clone();
            async move {
                // Bounded in-process retries with a short backoff.
                let mut last = String::new();
                for attempt in 1..=a.max_attempts {
                    match process_payment(&p, attempt, &a).await {
                        Ok(r) => return Ok(r),
                        Err(e) => last = e,
                    }
                    tokio::time::sleep(Duration::from_millis(2 << attempt)).await;
                }
                // The attempts go to their own header, __dlq.attempts.
                Err(AttemptsExhausted::new(a.max_attempts, last))
            }
        })
        .to(
            args.output.clone(),
            Serdes::string(),
            Serdes::json::<Receipt>(),
        );
    b.build().expect("valid topology")
}

#[tokio::main]
async fn main() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
                "warn,sharestream::runtime::worker=warn,sharestream::runtime=info,sharestream::client::connection=error".into()
            }),
        )
        .with_writer(std::io::stderr)
        .try_init();
    let args = Args::parse();
    if let Some(servers) = args.bootstrap_server.clone() {
        let handle = Runtime::builder(topology(&args))
            .config(RuntimeConfig {
                application_id: format!("{}-connector", args.input),
                bootstrap_servers: vec![servers],
                num_workers: args.workers,
                ..RuntimeConfig::default()
            })
            .handle_signals(true)
            .start()
            .await
            .unwrap_or_else(|e| {
                eprintln!("error: {e}");
                std::process::exit(1)
            });
        if let Err(e) = handle.wait().await {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
        return;
    }
    demo(args).await;
}

async fn demo(args: Args) {
    println!(
        "sharestream dead-letter demo: embedded broker, {} records, {:.0}% failing for good, {:.0}% failing once, {} attempts",
        args.records,
        args.failure_rate * 100.0,
        args.transient_rate * 100.0,
        args.max_attempts
    );
    // Exactly-once keeps records acquired until their transaction commits,
    // so the in-flight cap per share partition bounds throughput (about N
    // records per commit interval): use Kafka's maximum, not its default
    // of 2000 (docs/BENCHMARKS.md, Runtime section 1).
    let mut broker_config = BrokerConfig::in_memory();
    broker_config.share_groups.partition_max_record_locks = 10_000;
    broker_config.share_groups.max_partition_max_record_locks = 10_000;
    let broker = Broker::start(broker_config).await.expect("embedded broker");
    let servers = broker.bootstrap_servers();
    let admin = AdminClient::new(vec![servers.clone()], ConnectionConfig::default());
    for t in [&args.input, &args.output, &args.dlq] {
        admin
            .create_topic(NewTopic::new(t.clone(), 4))
            .await
            .expect("create topic");
    }
    let group = format!("{}-connector", args.input);
    admin
        .incremental_alter_group_config(
            &group,
            &[(
                "share.auto.offset.reset",
                AlterConfigOp::Set("earliest".into()),
            )],
        )
        .await
        .expect("group config");
    let producer = Producer::new(
        ProducerConfig::builder()
            .bootstrap_servers(&servers)
            .build()
            .expect("producer config"),
    )
    .await
    .expect("producer");
    let mut pending = Vec::new();
    for id in 0..args.records as u64 {
        let p = Payment {
            id,
            amount_cents: 100 + id % 10_000,
        };
        pending.push(
            producer
                .send(
                    ProducerRecord::new(args.input.clone(), serde_json::to_vec(&p).unwrap())
                        .with_key(format!("account-{}", id % 101)),
                )
                .await,
        );
    }
    for f in pending {
        f.await.expect("produce");
    }
    producer.close().await;

    let started = Instant::now();
    let handle = Runtime::builder(topology(&args))
        .config(RuntimeConfig {
            application_id: group.clone(),
            bootstrap_servers: vec![servers.clone()],
            num_workers: args.workers,
            ..RuntimeConfig::default()
        })
        .handle_signals(true)
        .start()
        .await
        .unwrap_or_else(|e| {
            eprintln!("error: {e}");
            std::process::exit(1)
        });
    let m = handle.metrics().clone();
    while m.records_committed.load(Ordering::Relaxed) < args.records as u64 && !handle.is_stopping()
    {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let elapsed = started.elapsed();
    if let Err(e) = handle.stop().await {
        eprintln!("error: {e}");
        std::process::exit(1);
    }

    let md = Metadata::new(vec![servers.clone()], ConnectionConfig::default());
    let out = read_committed(&md, &args.output)
        .await
        .expect("read output");
    let dlq = read_committed(&md, &args.dlq).await.expect("read dlq");
    let mut seen: BTreeMap<u64, Vec<&str>> = BTreeMap::new();
    for r in &out {
        let receipt: Receipt =
            serde_json::from_slice(r.value.as_deref().unwrap_or_default()).expect("receipt");
        seen.entry(receipt.id).or_default().push("output");
    }
    let mut headers_ok = true;
    for r in &dlq {
        let p: Payment =
            serde_json::from_slice(r.value.as_deref().unwrap_or_default()).expect("payment");
        seen.entry(p.id).or_default().push("dlq");
        headers_ok &= r.header_str(DLQ_ORIGINAL_TOPIC).as_deref() == Some(args.input.as_str())
            && r.header_str(DLQ_ORIGINAL_OFFSET).is_some()
            && r.header_str(DLQ_ERROR_KIND).as_deref() == Some("operator")
            && r.header_str(DLQ_ERROR_MESSAGE).is_some_and(|m| !m.is_empty())
            // In-process attempts plus earlier deliveries (if any).
            && r.header_str(DLQ_ATTEMPTS)
                .and_then(|a| a.parse::<u32>().ok())
                .is_some_and(|a| a >= args.max_attempts);
    }
    let once = seen.values().filter(|v| v.len() == 1).count();
    let missing = args.records - seen.len();
    let twice = seen.values().filter(|v| v.len() > 1).count();
    let ok = once == args.records && missing == 0 && twice == 0 && headers_ok;
    if let Some(r) = dlq.first() {
        println!("  a dead-letter record's headers:");
        for h in &r.headers {
            let v = h
                .value
                .as_ref()
                .map(|v| String::from_utf8_lossy(v).into_owned());
            println!("    {:<28} {}", h.key, v.unwrap_or_else(|| "null".into()));
        }
    }
    println!();
    println!("  processed            {} -> '{}'", out.len(), args.output);
    println!("  dead-lettered        {} -> '{}'", dlq.len(), args.dlq);
    println!(
        "  time                 {:.2} s ({:.0} records/s), {} transactions, {} aborted",
        elapsed.as_secs_f64(),
        args.records as f64 / elapsed.as_secs_f64(),
        m.transactions_committed.load(Ordering::Relaxed),
        m.transactions_aborted.load(Ordering::Relaxed)
    );
    println!(
        "  verification         {}",
        if ok {
            "OK: every input is in exactly one of output and dead-letter topic".to_string()
        } else {
            format!("FAILED: {missing} missing, {twice} in both or twice, headers ok: {headers_ok}")
        }
    );
    broker.shutdown().await;
    if !ok {
        std::process::exit(1);
    }
}
