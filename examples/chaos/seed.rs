//! The seeder: `records` committed records with sequence numbers
//! `0..records`, written in transactions of `txn_size`; after every
//! `abort_every` committed transactions one more transaction of `txn_size`
//! records (sequence numbers from [`ABORTED_SEQ_BASE`]) is aborted. Those
//! must never reach the output.

use std::time::Duration;

use serde::Serialize;
use sharestream::client::{Producer, ProducerConfig, ProducerRecord};

use crate::payload::{ABORTED_SEQ_BASE, Payload};

/// What the seeder wrote.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct SeedReport {
    /// Committed records (sequence numbers `0..committed`).
    pub committed: u64,
    /// Records written inside aborted transactions.
    pub aborted: u64,
    /// Transactions committed.
    pub committed_transactions: u64,
    /// Transactions aborted.
    pub aborted_transactions: u64,
}

/// Seeder settings.
#[derive(Debug, Clone)]
pub struct SeedArgs {
    /// Bootstrap server.
    pub bootstrap: String,
    /// Input topic.
    pub topic: String,
    /// Its partition count.
    pub partitions: i32,
    /// Committed records to write.
    pub records: u64,
    /// Distinct keys.
    pub keys: u32,
    /// Records per transaction.
    pub txn_size: u64,
    /// One aborted transaction after this many committed ones (0 = none).
    pub abort_every: u64,
}

fn record(topic: &str, p: Payload, partitions: i32) -> ProducerRecord {
    ProducerRecord::new(topic, p.encode())
        .with_key(p.kafka_key())
        .with_partition(Payload::partition_of(p.key, partitions))
}

/// The seeder's transactional id.
pub const TRANSACTIONAL_ID: &str = "chaos-seeder";

async fn new_producer(a: &SeedArgs) -> Result<Producer, String> {
    let config = ProducerConfig::builder()
        .bootstrap_servers(&a.bootstrap)
        .client_id("chaos-seeder")
        .transactional_id(TRANSACTIONAL_ID)
        .linger(Duration::from_millis(5))
        .batch_size(64 * 1024)
        .request_timeout(Duration::from_secs(10))
        .delivery_timeout(Duration::from_secs(20))
        .build()
        .map_err(|e| format!("seeder config: {e}"))?;
    let producer = bounded(Producer::new(config))
        .await?
        .map_err(|e| format!("seeder producer: {e}"))?;
    bounded(producer.init_transactions())
        .await?
        .map_err(|e| format!("seeder init_transactions: {e}"))?;
    Ok(producer)
}

async fn bounded<T>(f: impl std::future::Future<Output = T>) -> Result<T, String> {
    tokio::time::timeout(Duration::from_secs(30), f)
        .await
        .map_err(|_| "no answer within 30 s".to_string())
}

/// One transaction of `payloads`; committed or aborted as asked.
async fn transaction(
    producer: &Producer,
    a: &SeedArgs,
    payloads: &[Payload],
    commit: bool,
) -> Result<(), String> {
    producer.begin_transaction().map_err(|e| e.to_string())?;
    let mut deliveries = Vec::with_capacity(payloads.len());
    for p in payloads {
        deliveries.push(producer.send(record(&a.topic, *p, a.partitions)).await);
    }
    if commit {
        bounded(producer.commit_transaction())
            .await?
            .map_err(|e| format!("commit: {e}"))?;
        for d in deliveries {
            bounded(d).await?.map_err(|e| format!("delivery: {e}"))?;
        }
    } else {
        // Make sure the records are in the log before aborting, so the
        // abort really hides written data.
        bounded(producer.flush()).await?;
        bounded(producer.abort_transaction())
            .await?
            .map_err(|e| format!("abort: {e}"))?;
    }
    Ok(())
}

/// Whether the committed input holds `p` (after a failed commit, the
/// transaction may have committed anyway).
async fn committed(a: &SeedArgs, p: &Payload) -> Result<bool, String> {
    let mut reader = crate::check::CommittedReader::new(&a.bootstrap, &a.topic, a.partitions);
    reader.read_more().await?;
    let part = Payload::partition_of(p.key, a.partitions);
    Ok(reader
        .records
        .iter()
        .any(|(q, _, v)| *q == part && Payload::decode(v).is_some_and(|x| x.seq == p.seq)))
}

/// Writes the input, spread evenly over `pace` (zero = as fast as it
/// can). Survives broker restarts: after a failure it starts a new
/// producer (InitProducerId ends the open transaction), checks with a
/// read_committed read whether the failed transaction committed anyway,
/// and writes it again only if it did not; an interrupted aborted
/// transaction is not retried.
pub async fn seed(a: &SeedArgs, pace: Duration) -> Result<SeedReport, String> {
    let started = tokio::time::Instant::now();
    let transactions = a.records.div_ceil(a.txn_size).max(1);
    let mut producer = new_producer(a).await?;
    let mut report = SeedReport::default();
    let mut seq = 0u64;
    let mut aborted_seq = ABORTED_SEQ_BASE;
    let mut failures = 0u32;
    while seq < a.records {
        let due =
            started + pace.mul_f64(report.committed_transactions as f64 / transactions as f64);
        tokio::time::sleep_until(due).await;
        let end = (seq + a.txn_size).min(a.records);
        let payloads: Vec<Payload> = (seq..end)
            .map(|s| Payload {
                seq: s,
                key: (s % u64::from(a.keys)) as u32,
                aborted: false,
            })
            .collect();
        if let Err(e) = transaction(&producer, a, &payloads, true).await {
            failures += 1;
            eprintln!("seeder: transaction at seq {seq} failed ({e}); recovering");
            if failures > 50 {
                return Err(format!("seeder: giving up after {failures} failures: {e}"));
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
            match new_producer(a).await {
                Ok(p) => producer = p,
                Err(e) => {
                    eprintln!("seeder: {e}");
                    continue;
                }
            }
            match committed(a, &payloads[0]).await {
                Ok(true) => eprintln!("seeder: it committed after all"),
                Ok(false) => continue,
                Err(e) => {
                    eprintln!("seeder: {e}");
                    continue;
                }
            }
        }
        report.committed += end - seq;
        report.committed_transactions += 1;
        seq = end;
        if a.abort_every > 0 && report.committed_transactions % a.abort_every == 0 {
            let payloads: Vec<Payload> = (0..a.txn_size)
                .map(|i| {
                    aborted_seq += 1;
                    Payload {
                        seq: aborted_seq - 1,
                        key: (i % u64::from(a.keys)) as u32,
                        aborted: true,
                    }
                })
                .collect();
            match transaction(&producer, a, &payloads, false).await {
                Ok(()) => {
                    report.aborted += a.txn_size;
                    report.aborted_transactions += 1;
                }
                Err(e) => {
                    eprintln!("seeder: aborted transaction interrupted ({e}); recovering");
                    if let Ok(p) = new_producer(a).await {
                        producer = p;
                    }
                }
            }
        }
    }
    producer.close().await;
    Ok(report)
}
