//! The copier: input topic -> output topic through a share group, one OS
//! process per copier.
//!
//! `exactly_once` is KIP-1289's loop on the clients directly: poll
//! (explicit acknowledgement mode), begin a transaction, send every output
//! to the input record's partition, take each record into the transaction
//! (`acknowledge_in_transaction(ACCEPT)`), stage the sealed
//! acknowledgements with `send_share_acknowledgements_to_transaction`,
//! commit, and tell the consumer the outcome. An abortable error aborts and
//! the records come back with the next poll.
//!
//! `at_least_once`: an idempotent producer, wait for every output's
//! delivery, then ACCEPT each record and `commit_sync`. A kill between the
//! two duplicates the batch (reported, allowed).
//!
//! Any other error ends the process with exit code 3: it is crash-only, and
//! the chaos driver starts it again.
//!
//! # The kill windows
//!
//! With `--window-pause-ms N` the copier prints `window sent` to stdout
//! (and flushes) once every output of the transaction is handed to the
//! producer, then sleeps N ms; and `window staged` once the
//! acknowledgements are staged (exactly_once only), then sleeps N ms. The
//! commit starts after the pause. The driver, when it wants a kill inside a
//! window, waits for that line from its victim and sends SIGKILL at once,
//! so the kill lands inside the pause: after the outputs were sent (or the
//! acknowledgements staged), before EndTxn (or the acknowledgement commit).

use std::io::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use sharestream::client::share_consumer::{AcknowledgementMode, TransactionOutcome};
use sharestream::client::{
    Producer, ProducerConfig, ProducerRecord, ShareConsumer, ShareConsumerConfig,
};
use sharestream::eos::AcknowledgeType;

/// Delivery guarantee of the copier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Guarantee {
    /// KIP-1289 transactions.
    ExactlyOnce,
    /// Send, wait for delivery, then acknowledge.
    AtLeastOnce,
}

impl Guarantee {
    /// The command-line spelling.
    pub fn name(self) -> &'static str {
        match self {
            Guarantee::ExactlyOnce => "exactly_once",
            Guarantee::AtLeastOnce => "at_least_once",
        }
    }
}

/// Copier settings.
#[derive(Debug, Clone, clap::Args)]
pub struct CopyArgs {
    /// Bootstrap server.
    #[arg(long, default_value = "127.0.0.1:9092")]
    pub bootstrap: String,
    /// Input topic.
    #[arg(long, default_value = "chaos-in")]
    pub input: String,
    /// Output topic.
    #[arg(long, default_value = "chaos-out")]
    pub output: String,
    /// Share group.
    #[arg(long, default_value = "chaos-copier")]
    pub group: String,
    /// Copier slot: the transactional id is `chaos-copier-<id>`, so a
    /// restarted copier fences its killed predecessor.
    #[arg(long, default_value_t = 0)]
    pub id: u32,
    /// Delivery guarantee.
    #[arg(long, value_enum, default_value = "exactly-once")]
    pub guarantee: Guarantee,
    /// Pause in each kill window (see the module docs); 0 = no pause, no
    /// window lines.
    #[arg(long, default_value_t = 0)]
    pub window_pause_ms: u64,
    /// max.poll.records (records per transaction at most).
    #[arg(long, default_value_t = 500)]
    pub max_poll_records: usize,
}

fn fail(what: &str, e: impl std::fmt::Display) -> ! {
    eprintln!("copier: {what}: {e}");
    std::process::exit(3);
}

async fn window(name: &str, pause_ms: u64) {
    if pause_ms == 0 {
        return;
    }
    {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "window {name}");
        let _ = out.flush();
    }
    tokio::time::sleep(Duration::from_millis(pause_ms)).await;
}

/// A step that must not hang: the copier gives up (exit 3) after `secs`.
async fn bounded<T>(what: &str, secs: u64, f: impl std::future::Future<Output = T>) -> T {
    match tokio::time::timeout(Duration::from_secs(secs), f).await {
        Ok(v) => v,
        Err(_) => fail(what, format!("no answer within {secs} s")),
    }
}

/// Runs the copier until SIGTERM (then it finishes the transaction in
/// progress and closes) or a fatal error (exit 3).
pub async fn run(a: CopyArgs) {
    let stop = Arc::new(AtomicBool::new(false));
    {
        let stop = stop.clone();
        tokio::spawn(async move {
            use tokio::signal::unix::{SignalKind, signal};
            let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
            term.recv().await;
            stop.store(true, Ordering::SeqCst);
        });
    }
    let consumer_config = ShareConsumerConfig::builder(a.group.clone())
        .client_id(format!("chaos-copier-{}", a.id))
        .bootstrap_servers([a.bootstrap.clone()])
        .acknowledgement_mode(AcknowledgementMode::Explicit)
        .max_poll_records(a.max_poll_records)
        .request_timeout(Duration::from_secs(10))
        .build()
        .unwrap_or_else(|e| fail("consumer config", e));
    let mut consumer = ShareConsumer::new(consumer_config).unwrap_or_else(|e| fail("consumer", e));
    consumer
        .subscribe([a.input.clone()])
        .unwrap_or_else(|e| fail("subscribe", e));
    let mut builder = ProducerConfig::builder()
        .bootstrap_servers(&a.bootstrap)
        .client_id(format!("chaos-copier-{}", a.id))
        .linger(Duration::from_millis(2))
        .request_timeout(Duration::from_secs(10))
        .delivery_timeout(Duration::from_secs(20));
    if a.guarantee == Guarantee::ExactlyOnce {
        builder = builder
            .transactional_id(format!("chaos-copier-{}", a.id))
            .transaction_timeout(Duration::from_secs(20));
    }
    let producer_config = builder
        .build()
        .unwrap_or_else(|e| fail("producer config", e));
    let producer = bounded("producer", 30, Producer::new(producer_config))
        .await
        .unwrap_or_else(|e| fail("producer", e));
    if a.guarantee == Guarantee::ExactlyOnce {
        bounded("init_transactions", 60, producer.init_transactions())
            .await
            .unwrap_or_else(|e| fail("init_transactions", e));
    }
    eprintln!("copier {}: started ({})", a.id, a.guarantee.name());
    let mut copied = 0u64;
    while !stop.load(Ordering::SeqCst) {
        let records = bounded("poll", 60, consumer.poll(Duration::from_millis(500)))
            .await
            .unwrap_or_else(|e| fail("poll", e));
        if records.is_empty() {
            continue;
        }
        let outputs = |r: &sharestream::client::share_consumer::ShareRecord| ProducerRecord {
            topic: a.output.clone(),
            partition: Some(r.partition),
            key: r.key.clone(),
            value: r.value.clone(),
            headers: Vec::new(),
            timestamp: None,
        };
        match a.guarantee {
            Guarantee::ExactlyOnce => {
                producer
                    .begin_transaction()
                    .unwrap_or_else(|e| fail("begin_transaction", e));
                for r in records.iter() {
                    drop(producer.send(outputs(r)));
                    consumer
                        .acknowledge_in_transaction(r, AcknowledgeType::Accept)
                        .unwrap_or_else(|e| fail("acknowledge_in_transaction", e));
                }
                window("sent", a.window_pause_ms).await;
                let acks = consumer
                    .take_transaction_acknowledgements()
                    .unwrap_or_else(|| fail("take_transaction_acknowledgements", "nothing taken"));
                let metadata = consumer.share_group_metadata();
                let staged = bounded(
                    "send_share_acknowledgements_to_transaction",
                    30,
                    producer.send_share_acknowledgements_to_transaction(
                        acks.acknowledgements.to_batches(),
                        &metadata,
                    ),
                )
                .await;
                if let Err(e) = &staged
                    && e.is_fatal()
                {
                    fail("send_share_acknowledgements_to_transaction", e);
                }
                window("staged", a.window_pause_ms).await;
                let committed = match staged {
                    Ok(()) => {
                        bounded("commit_transaction", 60, producer.commit_transaction()).await
                    }
                    Err(e) => Err(e),
                };
                match committed {
                    Ok(()) => {
                        consumer
                            .transaction_outcome(acks.id, TransactionOutcome::Committed)
                            .unwrap_or_else(|e| fail("transaction_outcome", e));
                        copied += records.len() as u64;
                    }
                    Err(e) if !e.is_fatal() => {
                        eprintln!("copier {}: aborting: {e}", a.id);
                        bounded("abort_transaction", 60, producer.abort_transaction())
                            .await
                            .unwrap_or_else(|e| fail("abort_transaction", e));
                        consumer
                            .transaction_outcome(acks.id, TransactionOutcome::Aborted)
                            .unwrap_or_else(|e| fail("transaction_outcome", e));
                    }
                    Err(e) => fail("commit_transaction", e),
                }
            }
            Guarantee::AtLeastOnce => {
                let deliveries: Vec<_> =
                    records.iter().map(|r| producer.send(outputs(r))).collect();
                for d in deliveries {
                    bounded("delivery", 60, d)
                        .await
                        .unwrap_or_else(|e| fail("delivery", e));
                }
                window("sent", a.window_pause_ms).await;
                for r in records.iter() {
                    consumer
                        .acknowledge(r, AcknowledgeType::Accept)
                        .unwrap_or_else(|e| fail("acknowledge", e));
                }
                let results = bounded(
                    "commit_sync",
                    60,
                    consumer.commit_sync(Duration::from_secs(30)),
                )
                .await
                .unwrap_or_else(|e| fail("commit_sync", e));
                if let Some((tp, Err(e))) = results.iter().find(|(_, r)| r.is_err()) {
                    // The records come back after their lock expires: more
                    // duplicates, no loss.
                    eprintln!("copier {}: acknowledgement of {tp} failed: {e}", a.id);
                }
                copied += records.len() as u64;
            }
        }
    }
    eprintln!("copier {}: stopping after {copied} records", a.id);
    let _ = bounded("close", 30, consumer.close(Duration::from_secs(10))).await;
    bounded("producer close", 30, producer.close()).await;
}
