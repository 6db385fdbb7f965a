//! The copier: input topic -> output topic through a share group, one OS
//! process per copier, as a sharestream topology run by the
//! [`Runtime`](sharestream::runtime::Runtime).
//!
//! The topology is one source and one sink: every record goes unchanged
//! (key, value, headers, timestamp) to the output partition with the input
//! record's number. The runtime runs it with `processing.guarantee`
//! `exactly_once` (KIP-1289: outputs and share acknowledgements in one
//! transaction, staged with TxnShareAcknowledge before EndTxn; or the intent
//! ledger, `--mechanism ledger`, which `auto` takes on Apache Kafka and
//! across two clusters, `--source-bootstrap`) or
//! `at_least_once` (deliveries awaited, then acknowledgements committed),
//! `--workers` share-group members per process (default 1).
//!
//! Every copier process is one instance of ONE application, as users deploy
//! it: the same `application.id` (the group name), the same configuration,
//! nothing per process in any id. The runtime draws a random instance id
//! per process (D15), so the transactional ids are
//! `chaos-copier-<uuid>-<worker>`: a restarted copier does not fence its
//! killed predecessor, whose open transaction ends by the transaction
//! timeout (`--transaction-timeout-ms`, default 10 s). `--instance-id`
//! sets `application.instance.id` instead (a stable identity); the chaos
//! driver does not use it. `--metrics-listen` serves the runtime's
//! Prometheus metrics (`metrics.listen`).
//!
//! Any error that stops the runtime ends the process with exit code 3: it
//! is crash-only, and the chaos driver starts it again. SIGTERM is a
//! graceful shutdown (the transaction in flight commits).
//!
//! # Order
//!
//! Inside one poll batch a worker sends the outputs of a partition's
//! records in offset order, so a key's records leave in seq order. Across
//! deliveries nothing is promised: several copiers share a partition, and a
//! record redelivered after a kill (lock expiry, abort) comes after newer
//! ones. The checker reports out-of-order pairs and never fails on them.
//!
//! # The kill windows
//!
//! With `--window-pause-ms N` (needs the `failpoints` cargo feature, which
//! `scripts/chaos.sh` enables) the copier arms the runtime's pause points:
//! at `runtime.window_sent` (every output of the transaction handed to the
//! producer, acknowledgements not staged yet; at_least_once: every output
//! delivered, records not acknowledged) it prints `window sent` on stdout
//! and the worker sleeps N ms; at `runtime.window_staged` (exactly_once:
//! TxnShareAcknowledge answered, EndTxn not sent) it prints
//! `window staged` and sleeps N ms. The driver, when it wants a kill inside
//! a window, waits for that line from its victim and sends SIGKILL at once,
//! so the kill lands inside the pause.

use std::time::Duration;

use bytes::Bytes;
use sharestream::runtime::{ProcessingGuarantee, Runtime, RuntimeConfig};
use sharestream::topology::{Serdes, SinkRecord, StreamsBuilder, Topology};

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

    fn processing(self) -> ProcessingGuarantee {
        match self {
            Guarantee::ExactlyOnce => ProcessingGuarantee::ExactlyOnce,
            Guarantee::AtLeastOnce => ProcessingGuarantee::AtLeastOnce,
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
    /// `application.instance.id` (a stable identity); default unset: the
    /// runtime draws a random one per process.
    #[arg(long)]
    pub instance_id: Option<String>,
    /// `metrics.listen`: serve the runtime's metrics at http://ADDR/metrics.
    #[arg(long)]
    pub metrics_listen: Option<std::net::SocketAddr>,
    /// `transaction.timeout.ms`.
    #[arg(long, default_value_t = 10_000)]
    pub transaction_timeout_ms: u64,
    /// `exactly.once.ledger.trim.interval.ms` (0: never trim).
    #[arg(long, default_value_t = 60_000)]
    pub ledger_trim_interval_ms: u64,
    /// `exactly.once.ledger.max.batch.age.ms`.
    #[arg(long, default_value_t = 300_000)]
    pub ledger_max_batch_age_ms: u64,
    /// `exactly.once.ledger.trim.margin.ms`.
    #[arg(long, default_value_t = 60_000)]
    pub ledger_trim_margin_ms: u64,
    /// Delivery guarantee.
    #[arg(long, value_enum, default_value = "exactly-once")]
    pub guarantee: Guarantee,
    /// Pause in each kill window (see the module docs); 0 = no pause, no
    /// window lines.
    #[arg(long, default_value_t = 0)]
    pub window_pause_ms: u64,
    /// EndTxn(commit)s of this process that go without an answer, half
    /// applied with the answer lost, half never arrived (the runtime must
    /// go on with a new producer, D45); 0 = none.
    #[arg(long, default_value_t = 0)]
    pub unanswered_commits: u64,
    /// max.poll.records.
    #[arg(long, default_value_t = 500)]
    pub max_poll_records: usize,
    /// commit.interval.ms.
    #[arg(long, default_value_t = 100)]
    pub commit_interval_ms: u64,
    /// Workers (share-group members) in this process.
    #[arg(long, default_value_t = 1)]
    pub workers: usize,
    /// `exactly.once.mechanism`: auto, kip1289 or ledger.
    #[arg(long, default_value = "auto")]
    pub mechanism: String,
    /// `source.bootstrap.servers`: the input's cluster, when it is not
    /// `--bootstrap` (the output's).
    #[arg(long)]
    pub source_bootstrap: Option<String>,
}

fn fail(what: &str, e: impl std::fmt::Display) -> ! {
    eprintln!("copier: {what}: {e}");
    std::process::exit(3);
}

/// The copy topology: same key, value, headers, timestamp, partition.
fn topology(a: &CopyArgs) -> Topology {
    let b = StreamsBuilder::new(a.group.clone());
    let output = a.output.clone();
    b.stream::<Option<Bytes>, Option<Bytes>>(
        a.input.clone(),
        Serdes::optional(Serdes::bytes()),
        Serdes::optional(Serdes::bytes()),
    )
    .to_dynamic(
        Serdes::optional(Serdes::bytes()),
        Serdes::optional(Serdes::bytes()),
        move |r| {
            let mut sink = SinkRecord::topic(output.clone()).partition(r.source().partition);
            if r.key.is_none() {
                sink = sink.null_key();
            }
            sink
        },
    );
    b.build().unwrap_or_else(|e| fail("topology", e))
}

/// Arms the producer's unanswered-EndTxn points for `n` commits; false
/// when the build lacks them.
fn arm_unanswered_commits(n: u64) -> bool {
    #[cfg(feature = "failpoints")]
    {
        let lost = n / 2;
        sharestream::failpoints::arm("producer.end_txn_answer_lost", Some(n - lost));
        if lost > 0 {
            sharestream::failpoints::arm("producer.end_txn_request_lost", Some(lost));
        }
        true
    }
    #[cfg(not(feature = "failpoints"))]
    {
        let _ = n;
        false
    }
}

/// Arms the runtime's pause points; false when the build lacks them.
fn arm_windows(pause_ms: u64) -> bool {
    #[cfg(feature = "failpoints")]
    {
        use std::io::Write as _;
        use std::sync::Arc;
        let hook: sharestream::failpoints::PauseHook = Arc::new(|name: &str| {
            let line = match name {
                "runtime.window_staged" => "window staged",
                _ => "window sent",
            };
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{line}");
            let _ = out.flush();
        });
        for name in ["runtime.window_sent", "runtime.window_staged"] {
            sharestream::failpoints::arm_pause(
                name,
                Duration::from_millis(pause_ms),
                Some(hook.clone()),
            );
        }
        true
    }
    #[cfg(not(feature = "failpoints"))]
    {
        let _ = pause_ms;
        false
    }
}

/// Runs the copier until SIGTERM (then the runtime finishes the
/// transaction in flight and closes) or a fatal error (exit 3).
pub async fn run(a: CopyArgs) {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "warn,sharestream::client::connection=error".into()),
        )
        .with_writer(std::io::stderr)
        .try_init();
    if a.window_pause_ms > 0 && !arm_windows(a.window_pause_ms) {
        eprintln!(
            "copier {}: built without the `failpoints` feature: no kill windows (kills land at random moments)",
            std::process::id()
        );
    }
    if a.unanswered_commits > 0 && !arm_unanswered_commits(a.unanswered_commits) {
        eprintln!(
            "copier {}: built without the `failpoints` feature: no unanswered commits",
            std::process::id()
        );
    }
    let mechanism = sharestream::runtime::ExactlyOnceMechanism::parse(&a.mechanism)
        .unwrap_or_else(|| fail("--mechanism", "expected auto, kip1289 or ledger"));
    let config = RuntimeConfig {
        exactly_once_mechanism: mechanism,
        source_bootstrap_servers: a.source_bootstrap.clone().map(|s| vec![s]),
        application_id: a.group.clone(),
        application_instance_id: a.instance_id.clone(),
        metrics_listen: a.metrics_listen,
        bootstrap_servers: vec![a.bootstrap.clone()],
        num_workers: a.workers,
        processing_guarantee: a.guarantee.processing(),
        commit_interval: Duration::from_millis(a.commit_interval_ms),
        max_poll_records: a.max_poll_records,
        transaction_timeout: Duration::from_millis(a.transaction_timeout_ms),
        ledger_trim_interval: (a.ledger_trim_interval_ms > 0)
            .then(|| Duration::from_millis(a.ledger_trim_interval_ms)),
        ledger_max_batch_age: Duration::from_millis(a.ledger_max_batch_age_ms),
        ledger_trim_margin: Duration::from_millis(a.ledger_trim_margin_ms),
        linger: Duration::from_millis(2),
        request_timeout: Duration::from_secs(10),
        shutdown_timeout: Duration::from_secs(20),
        ..RuntimeConfig::default()
    };
    let handle = match tokio::time::timeout(
        Duration::from_secs(60),
        Runtime::builder(topology(&a))
            .config(config)
            .handle_signals(true)
            .start(),
    )
    .await
    {
        Ok(Ok(h)) => h,
        Ok(Err(e)) => fail("start", e),
        Err(_) => fail("start", "not started within 60 s"),
    };
    let pid = std::process::id();
    eprintln!(
        "copier {pid}: started ({}, mechanism {}, transactional id {:?})",
        a.guarantee.name(),
        handle.config().exactly_once_mechanism,
        handle.transactional_id(0)
    );
    let metrics = handle.metrics().clone();
    let result = handle.wait().await;
    let copied = metrics
        .records_committed
        .load(std::sync::atomic::Ordering::Relaxed);
    match result {
        Ok(()) => eprintln!("copier {pid}: stopped after {copied} records"),
        Err(e) => fail("runtime", e),
    }
}
