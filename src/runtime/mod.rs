//! The runtime that executes topologies: workers, transactions, batching,
//! shutdown, metrics.
//!
//! ```no_run
//! # use sharestream::topology::*;
//! # use sharestream::runtime::*;
//! # async fn run(topology: Topology) -> Result<(), RuntimeError> {
//! let handle = Runtime::builder(topology)
//!     .config(RuntimeConfig {
//!         application_id: "orders-app".into(),
//!         bootstrap_servers: vec!["127.0.0.1:9092".into()],
//!         num_workers: 4,
//!         ..RuntimeConfig::default()
//!     })
//!     .handle_signals(true)
//!     .start()
//!     .await?;
//! handle.wait().await
//! # }
//! ```
//!
//! # Workers
//!
//! A process runs `num.workers` workers. Each is a member of the topology's
//! share group (a [`ShareConsumer`] in
//! explicit acknowledgement mode, D12) with its own
//! [`Producer`] whose `transactional.id` is
//! `<application.id>-<instance>-<worker index>`. The instance is
//! `application.instance.id` when the user gives one (a stable identity,
//! so that a restarted instance fences the zombie it replaces and aborts
//! the transaction that zombie left open); otherwise a fresh identity the
//! process generates at start, so that several processes of one
//! application (scaled out by starting the same binary again) never fence
//! each other. A crashed process without a stable identity leaves its open
//! transactions to `transaction.timeout.ms` (docs/DESIGN.md D15). More
//! workers than partitions is the point of share groups: every worker gets
//! records.
//!
//! # exactly_once (KIP-1289)
//!
//! ```text
//! loop {
//!     records = consumer.poll()
//!     results = topology.process_batch(records)      // Outcome::Fail -> abort, stop
//!     begin_transaction() if none is open
//!     for each record: producer.send(outputs); consumer.acknowledge_in_transaction(ACCEPT|REJECT)
//!     if commit.interval.ms passed or max.records.per.transaction reached:
//!         acks = consumer.take_transaction_acknowledgements()
//!         producer.send_share_acknowledgements_to_transaction(acks, consumer.share_group_metadata())
//!         producer.commit_transaction()           -> consumer.transaction_outcome(Committed)
//!         on an abortable error: abort_transaction -> consumer.transaction_outcome(Aborted)
//! }
//! ```
//!
//! With `poll.during.commit=true` (off by default) the next poll and its
//! processing run while `commit_transaction` is in flight: the consumer is
//! idle then (the transaction's acknowledgements were sealed by
//! `take_transaction_acknowledgements` before), and nothing of the new
//! batch is sent or acknowledged until the commit has ended, so the new
//! batch simply belongs to the next transaction.
//!
//! A transaction's commit starts at a deadline computed from its first
//! record's arrival: `commit.interval.ms` later, less the worker's recent
//! commit duration (`commit.within.interval`, so that the transaction has
//! ended, not merely begun ending, about one interval after its first
//! record), and moved onto a grid shared by the process's workers
//! (`commit.aligned`): every worker writes to every output partition, and
//! a read_committed reader sees a partition only up to its oldest open
//! transaction, so staggered transactions would hold each other's records
//! back by up to one more interval. The poll waits at most until the
//! deadline.
//!
//! After an abort the records are processed again. Where they come from
//! depends on the broker setting `group.share.transaction.abort.record.state`
//! (D25), read at start-up: with `available` (the default, as the KIP
//! author's branch) the broker makes the staged records AVAILABLE, the
//! consumer forgets them and a fetch delivers them again (to this worker or
//! another); with `acquired` the broker puts them back to ACQUIRED for the
//! same member (D6) and the consumer hands them out again on its next poll.
//! Records not staged yet are handed back either way. Offsets acquired
//! without data (gaps) are held by the share consumer and staged with the
//! records as GAP (D5). Fatal producer errors (fenced,
//! unsupported, authorization) stop the application with
//! [`RuntimeError::Producer`]; so does [`Outcome::Fail`](crate::topology::Outcome)
//! ([`RuntimeError::Processing`]), after aborting the transaction.
//!
//! At start-up, exactly_once checks that the cluster offers TxnShareAcknowledge
//! (apiKey 95, D1/D2) and refuses to start otherwise, naming
//! `processing.guarantee=at_least_once`. A share group on another cluster
//! than the outputs (`source.bootstrap.servers`) is refused too: a
//! transaction lives on one cluster (D11).
//!
//! # at_least_once
//!
//! For brokers without KIP-1289: per poll batch the outputs are sent and
//! every delivery awaited, then the source records are acknowledged
//! (RELEASE when an output could not be delivered, so the record comes
//! back); the acknowledgements are committed with `commit_sync` every
//! `commit.interval.ms`. Nothing is lost; a crash between produce and
//! acknowledge produces duplicates.
//!
//! # Slow processing
//!
//! Under either guarantee, a poll batch whose processing outlasts half its
//! acquisition lock (a slow `map_async`, say) has its locks renewed every
//! half lock (KIP-1222, `ShareConsumer::renew`), so the broker does not
//! hand its records to another member while this one still works on them
//! (`sharestream_runtime_lock_renewals_total`). A group with
//! `share.renew.acknowledge.enable=false` refuses; the worker logs it and
//! the records come back after their lock, as before renewal existed.
//!
//! # Shutdown
//!
//! [`RuntimeHandle::shutdown`] (and SIGINT/SIGTERM with
//! [`RuntimeBuilder::handle_signals`]) makes every worker finish its
//! transaction in flight (commit), close its consumer (final
//! acknowledgements, share sessions closed, group left) and close its
//! producer. When one worker stops with an error, the others are shut
//! down and [`RuntimeHandle::wait`] returns that error.
//!
//! # Metrics
//!
//! [`RuntimeMetrics`], in Prometheus text format on `metrics.listen`,
//! including the share-group lag gauge refreshed by [`lag`] every
//! `share.group.lag.interval.ms`.
//!
//! # Fault injection
//!
//! With the `failpoints` feature: `runtime.abort_mid_batch` (a poll batch
//! stops sending halfway and its transaction aborts),
//! `runtime.abort_after_stage` (the acknowledgements are staged, then the
//! transaction fails abortably and aborts),
//! `runtime.stale_member_epoch` (acknowledgements are staged with the
//! previous member epoch, as after a racing rebalance),
//! `runtime.crash_before_commit` (the worker drops its clients between
//! sending and committing, like a killed process),
//! `runtime.ledger_floor` (measurement only: a ledger commit without its
//! intent and arbitration, the runtime bench's floor row); the pause points
//! `runtime.window_sent` and `runtime.window_staged` (see
//! [`failpoints`](crate::failpoints)) hold a worker in the kill windows of
//! the copier chaos test.

pub mod config;
mod grid;
pub mod lag;
mod ledger;
pub mod metrics;
pub mod verify;
mod worker;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub use config::{
    ExactlyOnceMechanism, LedgerCheck, ProcessingGuarantee, RuntimeConfig, RuntimeConfigError,
};
pub use metrics::{RuntimeMetrics, WorkerTime};

use crate::client::admin::AdminClient;
use crate::client::config::ProducerConfig;
use crate::client::share_consumer::{
    AcknowledgementMode, ConsumerError, ShareConsumer, ShareConsumerConfig,
};
use crate::client::{ClientError, ConnectionConfig, Metadata, Producer, ProducerError};
use crate::protocol::share::AcquireMode;
use crate::protocol::share_v2::SHARE_FETCH_API_KEY;
use crate::protocol::txn_share_ack::TXN_SHARE_ACKNOWLEDGE_API_KEY;
use crate::topology::{ProcessingError, Topology};
use worker::Worker;

/// Why the runtime did not start or stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RuntimeError {
    /// A setting is invalid.
    #[error(transparent)]
    Config(#[from] RuntimeConfigError),
    /// The cluster lacks something the configuration needs.
    #[error("{0}")]
    Unsupported(String),
    /// A client could not be created or reach the cluster at start-up.
    #[error("start-up failed: {0}")]
    Startup(String),
    /// A fatal producer error (fenced by a newer instance, unsupported
    /// version, authorization); the worker cannot continue.
    #[error("worker {worker}: fatal producer error: {source}{hint}", hint = fatal_hint(source))]
    Producer {
        /// The worker.
        worker: usize,
        /// The error.
        source: ProducerError,
    },
    /// The share consumer failed.
    #[error("worker {worker}: share consumer error: {source}")]
    Consumer {
        /// The worker.
        worker: usize,
        /// The error.
        source: ConsumerError,
    },
    /// A record's processing failed under `ErrorPolicy::Fail`; its
    /// transaction was aborted and the record will be delivered again.
    #[error(
        "worker {worker}: processing {topic}-{partition}@{offset} failed: {error}; the transaction was aborted and the application stopped"
    )]
    Processing {
        /// The worker.
        worker: usize,
        /// Source topic.
        topic: String,
        /// Source partition.
        partition: i32,
        /// Source offset.
        offset: i64,
        /// The error.
        error: ProcessingError,
    },
    /// A worker was dropped without ending its transaction (fault
    /// injection).
    #[error("worker {worker} crashed between send and commit (injected)")]
    WorkerCrashed {
        /// The worker.
        worker: usize,
    },
    /// A worker task panicked.
    #[error("a worker panicked: {0}")]
    Panicked(String),
    /// The metrics listener could not be bound.
    #[error("metrics.listen {addr}: {error}")]
    Metrics {
        /// The address.
        addr: SocketAddr,
        /// The error.
        error: std::io::Error,
    },
}

fn fatal_hint(e: &ProducerError) -> &'static str {
    match e.code() {
        Some(crate::protocol::ErrorCode::PRODUCER_FENCED)
        | Some(crate::protocol::ErrorCode::INVALID_PRODUCER_EPOCH) => {
            " (this worker's transactional id was taken over, or its transaction timed out: either \
             another running process has the same application.instance.id, which must be unique \
             per process, or this process was paused past transaction.timeout.ms; this one is a zombie)"
        }
        _ => "",
    }
}

/// Entry point: [`Runtime::builder`].
#[derive(Debug)]
pub struct Runtime;

impl Runtime {
    /// A builder running `topology`.
    pub fn builder(topology: Topology) -> RuntimeBuilder {
        RuntimeBuilder {
            topology,
            config: RuntimeConfig::default(),
            handle_signals: false,
        }
    }
}

/// Configures and starts a runtime.
#[derive(Debug)]
pub struct RuntimeBuilder {
    topology: Topology,
    config: RuntimeConfig,
    handle_signals: bool,
}

impl RuntimeBuilder {
    /// Replaces the configuration.
    pub fn config(mut self, config: RuntimeConfig) -> Self {
        self.config = config;
        self
    }

    /// Applies Kafka-style properties on top of the configuration.
    pub fn properties<K: AsRef<str>, V: AsRef<str>>(
        mut self,
        props: impl IntoIterator<Item = (K, V)>,
    ) -> Result<Self, RuntimeError> {
        for (k, v) in props {
            self.config.set(k.as_ref(), v.as_ref())?;
        }
        Ok(self)
    }

    /// Shuts down gracefully on SIGINT (Ctrl-C) and SIGTERM.
    pub fn handle_signals(mut self, on: bool) -> Self {
        self.handle_signals = on;
        self
    }

    /// Checks the cluster, starts every worker (producers initialized,
    /// consumers subscribed) and returns once they run.
    pub async fn start(self) -> Result<RuntimeHandle, RuntimeError> {
        let mut config = self.config;
        config.validate()?;
        if config.application_id.is_empty() {
            config.application_id = self.topology.share_group().to_string();
        }
        let instance = match &config.application_instance_id {
            Some(id) => Instance {
                id: id.clone(),
                generated: false,
            },
            None => Instance {
                id: uuid::Uuid::new_v4().simple().to_string(),
                generated: true,
            },
        };
        let guarantee = config.processing_guarantee;
        let connection = ConnectionConfig::default()
            .with_client_id(config.application_id.clone())
            .with_request_timeout(config.request_timeout)
            .with_security(config.security_settings()?);
        if config.is_cross_cluster() && guarantee == ProcessingGuarantee::AtLeastOnce {
            tracing::warn!(
                source = ?config.source_servers(),
                target = ?config.bootstrap_servers,
                "the share group and the outputs are on different clusters, under at_least_once: \
                 a crash between produce and acknowledge duplicates records \
                 (processing.guarantee=exactly_once goes through the intent ledger)"
            );
        }
        let mechanism_reason = if guarantee == ProcessingGuarantee::ExactlyOnce {
            let (m, why) = choose_mechanism(&config, &connection).await?;
            config.exactly_once_mechanism = m;
            Some(why)
        } else {
            None
        };
        tracing::info!(
            application_id = %config.application_id,
            instance = %instance.id,
            instance_id_generated = instance.generated,
            share_group = %self.topology.share_group(),
            workers = config.num_workers,
            processing_guarantee = %guarantee,
            commit_interval_ms = config.commit_interval.as_millis() as u64,
            "starting"
        );

        let metrics = Arc::new(RuntimeMetrics::default());
        if mechanism_reason.is_some() {
            *metrics.mechanism.lock() = Some(config.exactly_once_mechanism.name());
        }
        let (shutdown_tx, shutdown_rx) = watch::channel(false);
        let metrics_addr = match config.metrics_listen {
            Some(addr) => {
                let listener = metrics::bind(addr)
                    .await
                    .map_err(|error| RuntimeError::Metrics { addr, error })?;
                let local = listener.local_addr().ok();
                tokio::spawn(metrics::serve(
                    listener,
                    metrics.clone(),
                    shutdown_rx.clone(),
                ));
                local
            }
            None => None,
        };

        let topics: Vec<String> = self
            .topology
            .source_topics()
            .into_iter()
            .map(String::from)
            .collect();
        // The source topics' partition counts, read once for the two
        // start-up decisions that need them.
        let source_md = Metadata::new(config.source_servers().to_vec(), connection.clone());
        let partition_counts =
            if config.acquire_mode.is_none() || guarantee == ProcessingGuarantee::ExactlyOnce {
                source_partition_counts(&source_md, &topics).await
            } else {
                Vec::new()
            };
        let acquire_mode = match config.acquire_mode {
            Some(m) => m,
            None => auto_acquire_mode(&config, &source_md, &partition_counts).await,
        };
        // The handle's config shows the mode in effect.
        config.acquire_mode = Some(acquire_mode);
        if guarantee == ProcessingGuarantee::ExactlyOnce {
            fit_lock_budget(
                &mut config,
                &connection,
                self.topology.share_group(),
                &partition_counts,
            )
            .await;
        }
        fit_batch_size(&mut config, &connection, &self.topology.output_topics()).await?;
        let config = Arc::new(config);
        let ledger = if config.processing_guarantee == ProcessingGuarantee::ExactlyOnce
            && config.exactly_once_mechanism == ExactlyOnceMechanism::Ledger
        {
            let total: usize = partition_counts.iter().sum();
            Some(
                ledger::Ledger::open(
                    config.clone(),
                    connection.clone(),
                    self.topology.share_group(),
                    total,
                    metrics.clone(),
                    shutdown_rx.clone(),
                )
                .await?,
            )
        } else {
            None
        };
        if let Some(why) = &mechanism_reason {
            match &ledger {
                Some(l) => tracing::info!(
                    mechanism = "ledger",
                    ledger_topic = l.topic(),
                    ledger_partitions = l.partitions(),
                    fence_wait_ms = config.ledger_fence_wait().as_millis() as u64,
                    "exactly-once mechanism: ledger ({why})"
                ),
                None => tracing::info!(
                    mechanism = "kip1289",
                    "exactly-once mechanism: kip1289 ({why})"
                ),
            }
        }
        let compiled = self.topology.compile();
        if !config.lag_interval.is_zero() {
            let admin = AdminClient::new(config.source_servers().to_vec(), connection.clone());
            tokio::spawn(lag::run(
                admin,
                self.topology.share_group().to_string(),
                topics.clone(),
                config.lag_interval,
                metrics.clone(),
                shutdown_rx.clone(),
            ));
        }
        let mut workers = Vec::with_capacity(config.num_workers);
        let grid = Arc::new(grid::CommitGrid::new(
            tokio::time::Instant::now(),
            config.commit_interval,
            config.commit_within_interval,
            config.commit_aligned,
        ));
        if guarantee == ProcessingGuarantee::ExactlyOnce {
            if instance.generated {
                tracing::info!(
                    transactional_ids = %format!("{}-{}-<worker>", config.application_id, instance.id),
                    transaction_timeout_ms = config.transaction_timeout.as_millis() as u64,
                    "no application.instance.id: this process has a generated identity; a \
                     restart does not fence the transactions it leaves open, they end by \
                     transaction.timeout.ms"
                );
            } else {
                tracing::info!(
                    application_instance_id = %instance.id,
                    "application.instance.id set: this instance fences the transactions a \
                     predecessor with the same identity left open; no two running processes \
                     may share it"
                );
            }
        }
        let instance = Arc::new(instance);
        // KIP-1289: where the broker puts the records of an aborted
        // transaction (D25), and gaps ride in the transaction (D5).
        let kip1289 = guarantee == ProcessingGuarantee::ExactlyOnce && ledger.is_none();
        let aborted_records_return = kip1289 && aborted_records_return(&config, &connection).await;
        let group_limits =
            share_group_limits(&config, &connection, self.topology.share_group()).await;
        let limit = group_limits.delivery_count_limit;
        let cover = dead_letter_cover(
            &config,
            &connection,
            group_limits.dead_letter_topic.as_deref(),
        )
        .await;
        log_crash_on_last_delivery(guarantee, ledger.is_some(), &cover);
        let last_delivery = Arc::new(worker::LastDelivery {
            limit,
            dead_letter_topic: config.delivery_limit_dead_letter_topic.clone(),
            metrics: metrics.clone(),
        });
        tracing::info!(
            share_delivery_count_limit = limit,
            dead_letter_topic = ?config.delivery_limit_dead_letter_topic,
            "a record whose processing fails on its last delivery is dead-lettered (or rejected) \
             instead of stopping the application"
        );
        for index in 0..config.num_workers {
            let producer = start_producer(&config, &connection, &instance, index).await?;
            let consumer_config = ShareConsumerConfig::builder(self.topology.share_group())
                .client_id(instance.client_id(&config.application_id, index))
                .bootstrap_servers(config.source_servers().iter().cloned())
                .max_poll_records(
                    config
                        .max_poll_records
                        .min(config.max_records_per_transaction),
                )
                .acknowledgement_mode(AcknowledgementMode::Explicit)
                .acquire_mode(acquire_mode)
                .fetch_max_wait(Duration::from_millis(100))
                .request_timeout(config.request_timeout)
                .connection(connection.clone());
            let consumer_config = match instance.member_id(&config.application_id, index) {
                Some(id) => consumer_config.member_id(id),
                None => consumer_config,
            }
            .build()
            .map_err(|e| RuntimeError::Startup(e.to_string()))?;
            let mut consumer =
                ShareConsumer::new(consumer_config).map_err(|source| RuntimeError::Consumer {
                    worker: index,
                    source,
                })?;
            consumer.set_gaps_in_transaction(kip1289);
            consumer
                .subscribe(topics.iter().cloned())
                .map_err(|source| RuntimeError::Consumer {
                    worker: index,
                    source,
                })?;
            workers.push(Worker {
                index,
                consumer,
                producer,
                topology: compiled.clone(),
                metrics: metrics.clone(),
                config: config.clone(),
                shutdown: shutdown_rx.clone(),
                txn_id: None,
                grid: grid.clone(),
                connection: connection.clone(),
                instance: instance.clone(),
                fences: Default::default(),
                last_delivery: last_delivery.clone(),
                ledger: ledger.clone(),
                ledger_acks: None,
                aborted_records_return,
            });
        }

        let mut running: FuturesUnordered<JoinHandle<Result<(), RuntimeError>>> =
            workers.into_iter().map(|w| tokio::spawn(w.run())).collect();
        let stop = shutdown_tx.clone();
        let supervisor = tokio::spawn(async move {
            let mut first: Option<RuntimeError> = None;
            while let Some(joined) = running.next().await {
                let result = joined.unwrap_or_else(|e| Err(RuntimeError::Panicked(e.to_string())));
                if let Err(e) = result {
                    tracing::error!(error = %e, "worker stopped with an error; stopping the others");
                    let _ = stop.send(true);
                    first.get_or_insert(e);
                }
            }
            let _ = stop.send(true);
            match first {
                Some(e) => Err(e),
                None => Ok(()),
            }
        });

        if self.handle_signals {
            let stop = shutdown_tx.clone();
            tokio::spawn(async move {
                wait_for_signal().await;
                tracing::info!(
                    "signal received: finishing the transactions in flight and leaving the group"
                );
                let _ = stop.send(true);
            });
        }

        Ok(RuntimeHandle {
            instance,
            shutdown: shutdown_tx,
            supervisor,
            metrics,
            metrics_addr,
            config,
        })
    }
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// `share.acquire.mode=auto`: `record_limit` when this process has more
/// workers than a source topic has partitions (so workers share
/// partitions, and whole-batch acquisition would hand one worker thousands
/// of records while the others wait) and the broker has ShareFetch v2;
/// else `batch_optimized`. A topic not created yet counts as one partition;
/// a cluster that cannot be asked gives `batch_optimized` (the consumers
/// then report the connection error themselves).
async fn auto_acquire_mode(
    config: &RuntimeConfig,
    md: &Metadata,
    partition_counts: &[usize],
) -> AcquireMode {
    let v2 = match async { md.any_broker()?.connection().await }.await {
        Ok(conn) => conn
            .versions()
            .peer_range(SHARE_FETCH_API_KEY)
            .is_some_and(|v| v.max >= 2),
        Err(_) => false,
    };
    let fewest = partition_counts.iter().copied().min().unwrap_or(1);
    let mode = if v2 && config.num_workers > fewest {
        AcquireMode::RecordLimit
    } else {
        AcquireMode::BatchOptimized
    };
    tracing::info!(
        share_acquire_mode = mode.name(),
        workers = config.num_workers,
        fewest_partitions = fewest,
        share_fetch_v2 = v2,
        "share.acquire.mode=auto"
    );
    mode
}

/// exactly_once holds every record of a transaction locked (ACQUIRED)
/// until the transaction commits, and a share partition lets at most
/// `group.share.partition.max.record.locks` records be in flight (Kafka's
/// default 2000). When this process's workers could together hold more
/// than a third of what the source partitions allow, they would run out of
/// locks and wait for each other's commits (measured: 4 workers of 2000
/// records on 4 partitions ran at 63% of at_least_once). So the
/// transaction size is lowered to fit a third of the budget
/// ([`LOCK_BUDGET_SHARE`]), and the start-up log says so.
///
/// A third rather than a half: each worker also holds the poll it fetched
/// ahead (or, through the ledger, keeps its records locked until the ACCEPT
/// after the commit), and the records do not spread evenly over the
/// partitions. At 100 000 records/s on 4 partitions of 2000 locks with 4
/// workers, transactions of 1000 (a half) gave an end-to-end p99 of
/// 99-125 ms under KIP-1289 and 164-202 ms through the ledger; of 666 (a
/// third) 83-88 ms and 84 ms (D36, D48; docs/BENCHMARKS.md, sessions 11
/// and 27). The cap is the group's
/// `share.partition.max.record.locks` (KIP-1240) when set, else the
/// broker's setting (DescribeConfigs); when it cannot be read (no
/// permission, an older broker) nothing changes.
async fn fit_lock_budget(
    config: &mut RuntimeConfig,
    connection: &ConnectionConfig,
    group: &str,
    partition_counts: &[usize],
) {
    let admin = AdminClient::new(config.source_servers().to_vec(), connection.clone());
    let group_cap = admin.describe_group_config(group).await.ok().and_then(|c| {
        c.get(GROUP_RECORD_LOCKS_CONFIG)
            .and_then(|v| v.as_deref())
            .and_then(|v| v.parse::<u64>().ok())
    });
    let cap = match group_cap {
        Some(cap) => Some(cap),
        None => match admin.describe_broker_configs().await {
            Ok((_, configs)) => configs
                .get(RECORD_LOCKS_CONFIG)
                .and_then(|v| v.as_deref())
                .and_then(|v| v.parse::<u64>().ok()),
            Err(e) => {
                tracing::debug!(error = %e, "cannot read {RECORD_LOCKS_CONFIG}; max.records.per.transaction kept as configured");
                None
            }
        },
    };
    let Some(cap) = cap else { return };
    let partitions: u64 = partition_counts.iter().map(|&n| n as u64).sum();
    let share = LOCK_BUDGET_SHARE;
    if let Some(fit) = lock_budget_fit(
        config.num_workers,
        config.max_records_per_transaction,
        partitions,
        cap,
        share,
    ) {
        tracing::info!(
            max_records_per_transaction = fit,
            configured = config.max_records_per_transaction,
            workers = config.num_workers,
            source_partitions = partitions,
            record_locks_per_partition = cap,
            share_of_locks = format!("1/{share}"),
            "max.records.per.transaction lowered to fit a share of the source partitions' record \
             locks ({GROUP_RECORD_LOCKS_CONFIG} of the group, else {RECORD_LOCKS_CONFIG} of the \
             broker); raise that setting or add partitions for larger transactions"
        );
        config.max_records_per_transaction = fit;
    }
}

/// What the share group does with a record that runs out of deliveries.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ShareGroupLimits {
    /// The group's `share.delivery.count.limit`, else the broker's
    /// `group.share.delivery.count.limit`, else Kafka's default (5).
    delivery_count_limit: u16,
    /// The group's KIP-1191 dead-letter topic
    /// (`errors.deadletterqueue.topic.name`), where set and not empty.
    dead_letter_topic: Option<String>,
}

/// The group config naming the share group's dead-letter topic (KIP-1191).
const GROUP_DEAD_LETTER_TOPIC_CONFIG: &str = "errors.deadletterqueue.topic.name";

/// Reads [`ShareGroupLimits`] from the runtime's `share.delivery.count.limit`
/// where set, the group's configs and the broker's (the broker's only when
/// neither of the others sets the limit).
async fn share_group_limits(
    config: &RuntimeConfig,
    connection: &ConnectionConfig,
    group: &str,
) -> ShareGroupLimits {
    const KAFKA_DEFAULT: u16 = 5;
    let admin = AdminClient::new(config.source_servers().to_vec(), connection.clone());
    let parse = |v: Option<&Option<String>>| {
        v.and_then(|v| v.as_deref())
            .and_then(|v| v.parse::<u16>().ok())
            .filter(|n| *n >= 1)
    };
    let group_config = admin.describe_group_config(group).await.ok();
    let dead_letter_topic = group_config
        .as_ref()
        .and_then(|c| c.get(GROUP_DEAD_LETTER_TOPIC_CONFIG))
        .and_then(|v| v.as_deref())
        .filter(|v| !v.is_empty())
        .map(str::to_string);
    // `share.delivery.count.limit` set on the runtime wins; then the
    // group's config, then the broker's.
    if let Some(n) = config.delivery_count_limit.or_else(|| {
        group_config
            .as_ref()
            .and_then(|c| parse(c.get("share.delivery.count.limit")))
    }) {
        return ShareGroupLimits {
            delivery_count_limit: n,
            dead_letter_topic,
        };
    }
    let delivery_count_limit = match admin.describe_broker_configs().await {
        Ok((_, c)) => parse(c.get("group.share.delivery.count.limit")).unwrap_or(KAFKA_DEFAULT),
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the share group's delivery count limit; assuming Kafka's default {KAFKA_DEFAULT} (set share.delivery.count.limit to say)");
            KAFKA_DEFAULT
        }
    };
    ShareGroupLimits {
        delivery_count_limit,
        dead_letter_topic,
    }
}

/// Where the broker puts a record that runs out of deliveries with nobody
/// having decided anything (its holders crashed or paused past the lock
/// each time): KIP-1191 writes it to the group's dead-letter topic only
/// if the topic exists (or the broker creates it) and has
/// `errors.deadletterqueue.group.enable=true`; otherwise it is archived.
#[derive(Debug, Clone, PartialEq, Eq)]
enum DeadLetterCover {
    /// No `errors.deadletterqueue.topic.name` on the group.
    None,
    /// The topic exists and takes the group's dead letters.
    Ready(String),
    /// The topic does not exist; the broker creates it on first use.
    AutoCreated(String),
    /// The topic does not exist and the broker will not create it.
    Missing(String),
    /// The topic exists without `errors.deadletterqueue.group.enable=true`.
    NotEnabled(String),
    /// The topic's configs could not be read.
    Unknown(String, String),
}

/// The topic config a KIP-1191 dead-letter topic must have.
const TOPIC_DEAD_LETTER_ENABLE_CONFIG: &str = "errors.deadletterqueue.group.enable";
/// The broker config that lets the broker create a missing dead-letter topic.
const BROKER_DEAD_LETTER_AUTO_CREATE_CONFIG: &str =
    "errors.deadletterqueue.auto.create.topics.enable";

/// Sets the workers' `batch.size` (D50): the one set, or
/// [`config::DEFAULT_BATCH_SIZE`], within the smallest `max.message.bytes`
/// of the topology's output topics on the target cluster (Kafka refuses a
/// larger batch with MESSAGE_TOO_LARGE, and the producer does not split
/// batches). A topic whose configs cannot be read (absent, to be created
/// on first use, or no permission) counts as the broker's default of
/// about 1 MiB, above the default batch size.
async fn fit_batch_size(
    config: &mut RuntimeConfig,
    connection: &ConnectionConfig,
    outputs: &[&str],
) -> Result<(), RuntimeError> {
    let admin = AdminClient::new(config.bootstrap_servers.clone(), connection.clone());
    // One request for all the output topics (a mirror may have many); a
    // topic whose limit cannot be read counts as Kafka's default.
    let smallest: Option<(u64, String)> = admin
        .describe_topics_config(outputs, "max.message.bytes")
        .await
        .unwrap_or_default()
        .into_iter()
        .filter_map(|(topic, value)| {
            let limit = value.ok().flatten()?.trim().parse::<u64>().ok()?;
            Some((limit, topic))
        })
        .min();
    let chosen = choose_batch_size(config.batch_size, smallest.as_ref())?;
    if config.batch_size.is_none() && chosen < config::DEFAULT_BATCH_SIZE {
        tracing::info!(
            batch_size = chosen,
            topic = smallest.as_ref().map_or("", |(_, t)| t.as_str()),
            "batch.size lowered from its default to the output topic's max.message.bytes"
        );
    }
    config.batch_size = Some(chosen);
    Ok(())
}

/// The decision of [`fit_batch_size`]: the `batch.size` set, or the
/// default, against the smallest `max.message.bytes` of the outputs (and
/// its topic), if known.
fn choose_batch_size(
    set: Option<u64>,
    smallest: Option<&(u64, String)>,
) -> Result<u64, RuntimeError> {
    match (set, smallest) {
        (Some(b), Some((limit, topic))) if b > *limit => {
            Err(RuntimeError::Config(RuntimeConfigError::new(
                "batch.size",
                format!(
                    "invalid configuration batch.size: {b} bytes is more than the \
                     max.message.bytes of output topic {topic} ({limit}), which would refuse \
                     such a batch; set batch.size to {limit} or less, or raise the topic's \
                     max.message.bytes"
                ),
            )))
        }
        (Some(b), _) => Ok(b),
        (None, Some((limit, _))) => Ok(config::DEFAULT_BATCH_SIZE.min(*limit).max(1)),
        (None, None) => Ok(config::DEFAULT_BATCH_SIZE),
    }
}

/// Reads what [`DeadLetterCover`] holds for the group's dead-letter topic.
async fn dead_letter_cover(
    config: &RuntimeConfig,
    connection: &ConnectionConfig,
    topic: Option<&str>,
) -> DeadLetterCover {
    let Some(topic) = topic else {
        return DeadLetterCover::None;
    };
    let admin = AdminClient::new(config.source_servers().to_vec(), connection.clone());
    let topic_configs = admin
        .describe_configs(crate::client::admin::RESOURCE_TYPE_TOPIC, topic)
        .await;
    let auto_create = if is_unknown_topic(&topic_configs) {
        admin.describe_broker_configs().await.ok().map(|(_, c)| {
            c.get(BROKER_DEAD_LETTER_AUTO_CREATE_CONFIG)
                .and_then(|v| v.as_deref())
                == Some("true")
        })
    } else {
        None
    };
    classify_dead_letter_cover(topic, topic_configs, auto_create)
}

/// Whether a DescribeConfigs of a topic found no such topic.
fn is_unknown_topic<T>(r: &Result<T, ClientError>) -> bool {
    matches!(
        r,
        Err(ClientError::Broker {
            code: crate::protocol::ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
            ..
        })
    )
}

/// The decision of [`dead_letter_cover`], apart from its requests.
fn classify_dead_letter_cover(
    topic: &str,
    topic_configs: Result<std::collections::BTreeMap<String, Option<String>>, ClientError>,
    auto_create: Option<bool>,
) -> DeadLetterCover {
    let t = topic.to_string();
    match topic_configs {
        Ok(c) => {
            if c.get(TOPIC_DEAD_LETTER_ENABLE_CONFIG)
                .and_then(|v| v.as_deref())
                == Some("true")
            {
                DeadLetterCover::Ready(t)
            } else {
                DeadLetterCover::NotEnabled(t)
            }
        }
        Err(_) if is_unknown_topic(&topic_configs) => match auto_create {
            Some(true) => DeadLetterCover::AutoCreated(t),
            Some(false) => DeadLetterCover::Missing(t),
            None => DeadLetterCover::Unknown(
                t,
                format!(
                    "it does not exist and {BROKER_DEAD_LETTER_AUTO_CREATE_CONFIG} could not be read"
                ),
            ),
        },
        Err(e) => DeadLetterCover::Unknown(t, e.to_string()),
    }
}

/// What becomes of a record whose holders all crash (or pause past the
/// lock) until its last delivery (docs/EXACTLY-ONCE.md section 7, D46). The
/// runtime cannot act after its own crash, so it says at start-up which
/// case holds, and how to fix a dead-letter topic the broker would not
/// write to. `Err`: a misconfiguration (logged as a warning).
fn crash_on_last_delivery(
    guarantee: ProcessingGuarantee,
    ledger: bool,
    cover: &DeadLetterCover,
) -> Result<String, String> {
    let archived = "a record whose holders crash until its last delivery is archived by the \
                    broker without output";
    let ledger_note = if guarantee == ProcessingGuarantee::ExactlyOnce && ledger {
        "; through the intent ledger that topic can also receive a record whose transaction \
         committed but whose ACCEPT was lost on that delivery (its output exists: check the \
         ledger before replaying the dead-letter topic)"
    } else {
        ""
    };
    match cover {
        DeadLetterCover::None => Ok(format!(
            "{archived}; set the share group's config {GROUP_DEAD_LETTER_TOPIC_CONFIG} \
             (KIP-1191, Apache Kafka 4.3+) to keep such records in a dead-letter topic"
        )),
        DeadLetterCover::Ready(t) => Ok(format!(
            "a record whose holders crash until its last delivery goes to the share group's \
             dead-letter topic {t} (KIP-1191, the group config {GROUP_DEAD_LETTER_TOPIC_CONFIG}){ledger_note}"
        )),
        DeadLetterCover::AutoCreated(t) => Ok(format!(
            "a record whose holders crash until its last delivery goes to the share group's \
             dead-letter topic {t}, which the broker creates on first use \
             ({BROKER_DEAD_LETTER_AUTO_CREATE_CONFIG}=true){ledger_note}"
        )),
        DeadLetterCover::Missing(t) => Err(format!(
            "{archived}: the share group's dead-letter topic {t} ({GROUP_DEAD_LETTER_TOPIC_CONFIG}) \
             does not exist and the broker does not create it \
             ({BROKER_DEAD_LETTER_AUTO_CREATE_CONFIG}=false); create {t} with \
             {TOPIC_DEAD_LETTER_ENABLE_CONFIG}=true"
        )),
        DeadLetterCover::NotEnabled(t) => Err(format!(
            "{archived}: the share group's dead-letter topic {t} lacks the topic config \
             {TOPIC_DEAD_LETTER_ENABLE_CONFIG}=true, without which the broker writes nothing \
             to it; set it (kafka-configs.sh --alter --entity-type topics --entity-name {t} \
             --add-config {TOPIC_DEAD_LETTER_ENABLE_CONFIG}=true)"
        )),
        DeadLetterCover::Unknown(t, e) => Err(format!(
            "cannot tell whether a record whose holders crash until its last delivery reaches \
             the share group's dead-letter topic {t} ({e}); it needs the topic config \
             {TOPIC_DEAD_LETTER_ENABLE_CONFIG}=true"
        )),
    }
}

fn log_crash_on_last_delivery(
    guarantee: ProcessingGuarantee,
    ledger: bool,
    cover: &DeadLetterCover,
) {
    match crash_on_last_delivery(guarantee, ledger, cover) {
        Ok(m) => tracing::info!("{m}"),
        Err(m) => tracing::warn!("{m}"),
    }
}

/// The broker setting saying where aborted records go (D25).
const ABORT_RECORD_STATE_CONFIG: &str = "group.share.transaction.abort.record.state";

/// Whether the broker returns the records of a transaction the producer
/// aborted to the member that staged them (`acquired`, D6/D25), so that the
/// consumer hands them back; else (`available`, the default, and any broker
/// without the setting, such as the KIP author's branch) the broker makes
/// them AVAILABLE and they are fetched again.
async fn aborted_records_return(config: &RuntimeConfig, connection: &ConnectionConfig) -> bool {
    let admin = AdminClient::new(config.source_servers().to_vec(), connection.clone());
    let state = match admin.describe_broker_configs().await {
        Ok((_, c)) => c.get(ABORT_RECORD_STATE_CONFIG).cloned().flatten(),
        Err(e) => {
            tracing::warn!(error = %e, "cannot read {ABORT_RECORD_STATE_CONFIG}; assuming aborted records become available");
            None
        }
    };
    let acquired = state.as_deref() == Some("acquired");
    tracing::info!(
        setting = ABORT_RECORD_STATE_CONFIG,
        value = state.as_deref().unwrap_or("(not set: available)"),
        "records of an aborted transaction are {}",
        if acquired {
            "handed back by the consumer (the broker keeps them acquired for it)"
        } else {
            "fetched again (the broker makes them available)"
        }
    );
    acquired
}

/// Each source topic's partition count; a topic not created yet (or a
/// cluster that cannot be asked) counts as one partition.
async fn source_partition_counts(md: &Metadata, topics: &[String]) -> Vec<usize> {
    let refs: Vec<&str> = topics.iter().map(String::as_str).collect();
    let _ = md.refresh(&refs).await;
    topics
        .iter()
        .map(|t| md.topic(t).map_or(1, |m| m.partitions.len().max(1)))
        .collect()
}

/// The broker setting that caps in-flight records per share partition.
const RECORD_LOCKS_CONFIG: &str = "group.share.partition.max.record.locks";
/// Its per-group override (KIP-1240).
const GROUP_RECORD_LOCKS_CONFIG: &str = "share.partition.max.record.locks";

/// The share of the source partitions' record locks that a process's open
/// transactions may take, under either mechanism (see [`fit_lock_budget`]).
/// A third: each worker also holds the poll it fetched ahead, and records
/// do not spread evenly over partitions; with half, transactions under
/// KIP-1289 met the cap of a busy partition and waited for their deadline
/// (D48).
const LOCK_BUDGET_SHARE: u64 = 3;

/// The transaction size that keeps `workers` transactions within
/// `1/share` of `partitions` x `cap` record locks, when `max_records` does
/// not already (`None`: keep it). Never below 1.
fn lock_budget_fit(
    workers: usize,
    max_records: usize,
    partitions: u64,
    cap: u64,
    share: u64,
) -> Option<usize> {
    let workers = workers.max(1) as u64;
    let budget = partitions.saturating_mul(cap) / share.max(1);
    let per_worker = (budget / workers).max(1);
    (max_records as u64 > per_worker).then_some(per_worker as usize)
}

/// Chooses how exactly_once is carried out (docs/EXACTLY-ONCE.md 5.2):
/// `kip1289` where the share group and the outputs are on one cluster that
/// offers TxnShareAcknowledge (apiKey 95), else the intent ledger; a forced
/// `kip1289` that the clusters cannot do is refused, naming the setting.
/// Returns the mechanism and why.
async fn choose_mechanism(
    config: &RuntimeConfig,
    connection: &ConnectionConfig,
) -> Result<(ExactlyOnceMechanism, String), RuntimeError> {
    let md = Metadata::new(config.bootstrap_servers.clone(), connection.clone());
    let conn = async { md.any_broker()?.connection().await }
        .await
        .map_err(|e: ClientError| {
            RuntimeError::Startup(format!(
                "cannot reach bootstrap.servers {:?}: {e}",
                config.bootstrap_servers
            ))
        })?;
    let has_kip1289 = conn
        .versions()
        .peer_range(TXN_SHARE_ACKNOWLEDGE_API_KEY)
        .is_some();
    let cross = if config.is_cross_cluster() {
        let target = AdminClient::new(config.bootstrap_servers.clone(), connection.clone());
        let source = AdminClient::new(config.source_servers().to_vec(), connection.clone());
        // One cluster: the same id and the same brokers (two embedded
        // brokers, or clusters cloned from one image, may share an id).
        let endpoints = |c: &crate::client::admin::ClusterDescription| {
            let mut e: Vec<(i32, String, i32)> = c
                .brokers
                .iter()
                .map(|b| (b.node_id, b.host.clone(), b.port))
                .collect();
            e.sort();
            e
        };
        match (
            target.describe_cluster().await,
            source.describe_cluster().await,
        ) {
            (Ok(t), Ok(s)) => t.cluster_id != s.cluster_id || endpoints(&t) != endpoints(&s),
            _ => true,
        }
    } else {
        false
    };
    let why_not_kip1289 = if cross {
        Some(format!(
            "the share group's cluster {:?} is not the outputs' cluster {:?}, and a transaction \
             lives on one cluster",
            config.source_servers(),
            config.bootstrap_servers
        ))
    } else if !has_kip1289 {
        Some(format!(
            "{:?} does not offer TxnShareAcknowledge (apiKey {TXN_SHARE_ACKNOWLEDGE_API_KEY}, \
             KIP-1289: share.version >= 3 and transaction.version >= 2)",
            config.bootstrap_servers
        ))
    } else {
        None
    };
    match (config.exactly_once_mechanism, why_not_kip1289) {
        (ExactlyOnceMechanism::Kip1289, Some(why)) => Err(RuntimeError::Unsupported(format!(
            "exactly.once.mechanism=kip1289 is impossible here: {why}; set \
             exactly.once.mechanism=ledger (or auto), which works on any Kafka with share \
             groups and across clusters, or processing.guarantee=at_least_once"
        ))),
        (ExactlyOnceMechanism::Kip1289, None) => Ok((
            ExactlyOnceMechanism::Kip1289,
            "exactly.once.mechanism=kip1289".into(),
        )),
        (ExactlyOnceMechanism::Ledger, _) => Ok((
            ExactlyOnceMechanism::Ledger,
            "exactly.once.mechanism=ledger".into(),
        )),
        (ExactlyOnceMechanism::Auto, Some(why)) => Ok((ExactlyOnceMechanism::Ledger, why)),
        (ExactlyOnceMechanism::Auto, None) => Ok((
            ExactlyOnceMechanism::Kip1289,
            "the cluster offers TxnShareAcknowledge (KIP-1289)".into(),
        )),
    }
}

/// This process's identity among the application's processes (D15).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Instance {
    /// `application.instance.id`, or a generated one.
    pub(crate) id: String,
    /// Whether `id` was generated at start (no stable identity).
    pub(crate) generated: bool,
}

impl Instance {
    /// `<application.id>-<instance>-<worker>`.
    pub(crate) fn transactional_id(&self, application_id: &str, worker: usize) -> String {
        format!("{application_id}-{}-{worker}", self.id)
    }

    /// The client id of a worker's clients.
    pub(crate) fn client_id(&self, application_id: &str, worker: usize) -> String {
        self.transactional_id(application_id, worker)
    }

    /// The share-group member id of a worker: with a stable identity, a
    /// UUID derived from the transactional id, so that a restarted instance
    /// rejoins as its predecessor's members (the broker releases what they
    /// held at once); without one, `None` (a fresh UUID per consumer).
    pub(crate) fn member_id(&self, application_id: &str, worker: usize) -> Option<String> {
        use sha2::Digest;
        if self.generated {
            return None;
        }
        let digest = sha2::Sha256::digest(self.transactional_id(application_id, worker).as_bytes());
        let mut bytes = [0u8; 16];
        bytes.copy_from_slice(&digest[..16]);
        Some(
            uuid::Builder::from_custom_bytes(bytes)
                .into_uuid()
                .to_string(),
        )
    }
}

async fn start_producer(
    config: &RuntimeConfig,
    connection: &ConnectionConfig,
    instance: &Instance,
    index: usize,
) -> Result<Producer, RuntimeError> {
    let mut b = ProducerConfig::builder()
        .bootstrap_servers(config.bootstrap_servers.join(","))
        .client_id(instance.client_id(&config.application_id, index))
        .linger(config.linger)
        .request_timeout(config.request_timeout)
        .transaction_timeout(config.transaction_timeout);
    if let Some(bytes) = config.buffer_memory {
        b = b.buffer_memory(bytes);
    }
    if let Some(bytes) = config.batch_size {
        b = b.batch_size(bytes as usize);
    }
    if let Some(t) = config.max_block {
        b = b.max_block(t);
    }
    if config.processing_guarantee == ProcessingGuarantee::ExactlyOnce {
        b = b.transactional_id(instance.transactional_id(&config.application_id, index));
    }
    b = b.security(connection.security.clone());
    let pc = b
        .build()
        .map_err(|e| RuntimeError::Startup(format!("producer settings: {e}")))?;
    let producer = Producer::new(pc)
        .await
        .map_err(|source| RuntimeError::Producer {
            worker: index,
            source,
        })?;
    if config.processing_guarantee == ProcessingGuarantee::ExactlyOnce {
        producer
            .init_transactions()
            .await
            .map_err(|source| RuntimeError::Producer {
                worker: index,
                source,
            })?;
    }
    Ok(producer)
}

/// A running runtime.
#[derive(Debug)]
pub struct RuntimeHandle {
    instance: Arc<Instance>,
    shutdown: watch::Sender<bool>,
    supervisor: JoinHandle<Result<(), RuntimeError>>,
    metrics: Arc<RuntimeMetrics>,
    metrics_addr: Option<SocketAddr>,
    config: Arc<RuntimeConfig>,
}

impl RuntimeHandle {
    /// This process's instance identity: `application.instance.id`, or the
    /// one generated at start (D15).
    pub fn instance_id(&self) -> &str {
        &self.instance.id
    }

    /// The transactional id of worker `worker` (exactly_once).
    pub fn transactional_id(&self, worker: usize) -> String {
        self.instance
            .transactional_id(&self.config.application_id, worker)
    }

    /// Asks every worker to finish its transaction in flight and leave.
    pub fn shutdown(&self) {
        let _ = self.shutdown.send(true);
    }

    /// Whether a shutdown was asked for (or a worker failed).
    pub fn is_stopping(&self) -> bool {
        *self.shutdown.borrow()
    }

    /// Waits until every worker stopped; the first worker error, if any.
    pub async fn wait(self) -> Result<(), RuntimeError> {
        self.supervisor
            .await
            .unwrap_or_else(|e| Err(RuntimeError::Panicked(e.to_string())))
    }

    /// [`shutdown`](Self::shutdown) then [`wait`](Self::wait).
    pub async fn stop(self) -> Result<(), RuntimeError> {
        self.shutdown();
        self.wait().await
    }

    /// The metrics.
    pub fn metrics(&self) -> &Arc<RuntimeMetrics> {
        &self.metrics
    }

    /// Where `GET /metrics` is served, if `metrics.listen` is set.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_addr
    }

    /// The configuration in effect (`share.acquire.mode=auto` resolved).
    pub fn config(&self) -> &RuntimeConfig {
        &self.config
    }
}

#[cfg(test)]
mod tests {
    use super::{LOCK_BUDGET_SHARE, lock_budget_fit};

    #[test]
    fn batch_size_is_the_default_or_the_setting_within_the_outputs_limit() {
        use super::choose_batch_size;
        use crate::runtime::config::DEFAULT_BATCH_SIZE as D;
        let big = (1_048_588, "out".to_string());
        let small = (20_000, "narrow".to_string());
        assert_eq!(choose_batch_size(None, None).unwrap(), D);
        assert_eq!(choose_batch_size(None, Some(&big)).unwrap(), D);
        assert_eq!(choose_batch_size(None, Some(&small)).unwrap(), 20_000);
        assert_eq!(
            choose_batch_size(Some(16_384), Some(&small)).unwrap(),
            16_384
        );
        assert_eq!(
            choose_batch_size(Some(20_000), Some(&small)).unwrap(),
            20_000
        );
        assert_eq!(choose_batch_size(Some(1 << 20), None).unwrap(), 1 << 20);
        let e = choose_batch_size(Some(20_001), Some(&small))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("batch.size") && e.contains("narrow") && e.contains("20000"),
            "{e}"
        );
    }

    #[test]
    fn start_up_says_where_a_crash_on_the_last_delivery_leaves_the_record() {
        use super::{DeadLetterCover as C, ProcessingGuarantee as G, crash_on_last_delivery};
        // No KIP-1191 dead-letter topic: archived, and the message names
        // the group config that would keep the record.
        for (g, ledger) in [
            (G::AtLeastOnce, false),
            (G::ExactlyOnce, false),
            (G::ExactlyOnce, true),
        ] {
            let m = crash_on_last_delivery(g, ledger, &C::None).unwrap();
            assert!(m.contains("archived by the broker without output"), "{m}");
            assert!(m.contains("errors.deadletterqueue.topic.name"), "{m}");
        }
        // A topic that takes them: named; through the ledger the message
        // also says that a committed record whose ACCEPT was lost may be
        // there (its output exists).
        let ready = C::Ready("dlq.app".into());
        let m = crash_on_last_delivery(G::ExactlyOnce, false, &ready).unwrap();
        assert!(m.contains("dead-letter topic dlq.app"), "{m}");
        assert!(!m.contains("ACCEPT was lost"), "{m}");
        let m = crash_on_last_delivery(G::ExactlyOnce, true, &ready).unwrap();
        assert!(m.contains("ACCEPT was lost"), "{m}");
        let m = crash_on_last_delivery(G::AtLeastOnce, true, &C::AutoCreated("dlq.app".into()))
            .unwrap();
        assert!(m.contains("creates on first use"), "{m}");
        // Topics the broker would not write to: warnings that name the
        // setting and the fix.
        let e = crash_on_last_delivery(G::ExactlyOnce, true, &C::Missing("dlq.app".into()))
            .unwrap_err();
        assert!(e.contains("does not exist"), "{e}");
        assert!(
            e.contains("errors.deadletterqueue.auto.create.topics.enable=false"),
            "{e}"
        );
        assert!(
            e.contains("errors.deadletterqueue.group.enable=true"),
            "{e}"
        );
        let e = crash_on_last_delivery(G::ExactlyOnce, true, &C::NotEnabled("dlq.app".into()))
            .unwrap_err();
        assert!(
            e.contains(
                "--entity-name dlq.app --add-config errors.deadletterqueue.group.enable=true"
            ),
            "{e}"
        );
    }

    #[test]
    fn a_dead_letter_topic_counts_only_when_the_broker_would_write_to_it() {
        use super::{ClientError, DeadLetterCover as C, classify_dead_letter_cover as classify};
        use crate::protocol::ErrorCode;
        let configs = |v: Option<&str>| {
            Ok(std::collections::BTreeMap::from([(
                "errors.deadletterqueue.group.enable".to_string(),
                v.map(str::to_string),
            )]))
        };
        let unknown = || {
            Err(ClientError::Broker {
                api: "DescribeConfigs",
                code: ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
                message: None,
            })
        };
        assert_eq!(
            classify("d", configs(Some("true")), None),
            C::Ready("d".into())
        );
        assert_eq!(
            classify("d", configs(Some("false")), None),
            C::NotEnabled("d".into())
        );
        assert_eq!(
            classify("d", configs(None), None),
            C::NotEnabled("d".into())
        );
        assert_eq!(
            classify("d", unknown(), Some(true)),
            C::AutoCreated("d".into())
        );
        assert_eq!(
            classify("d", unknown(), Some(false)),
            C::Missing("d".into())
        );
        assert!(matches!(classify("d", unknown(), None), C::Unknown(..)));
        let denied = Err(ClientError::Broker {
            api: "DescribeConfigs",
            code: ErrorCode::TOPIC_AUTHORIZATION_FAILED,
            message: None,
        });
        assert!(matches!(classify("d", denied, Some(true)), C::Unknown(..)));
    }

    #[test]
    fn member_ids_are_stable_only_with_an_instance_identity() {
        let stable = super::Instance {
            id: "pod-0".into(),
            generated: false,
        };
        let a = stable.member_id("app", 0).unwrap();
        assert_eq!(
            Some(a.clone()),
            stable.member_id("app", 0),
            "same on restart"
        );
        assert_ne!(Some(a.clone()), stable.member_id("app", 1), "per worker");
        assert!(uuid::Uuid::parse_str(&a).is_ok(), "{a}");
        let generated = super::Instance {
            id: "f00".into(),
            generated: true,
        };
        assert_eq!(generated.member_id("app", 0), None);
    }

    #[test]
    fn transactions_are_sized_to_a_share_of_the_record_locks() {
        let share = LOCK_BUDGET_SHARE;
        assert_eq!(share, 3);
        // 4 workers of 1000 on 4 partitions of 2000 locks: a third, 666.
        assert_eq!(lock_budget_fit(4, 1000, 4, 2000, share), Some(666));
        assert_eq!(lock_budget_fit(4, 2000, 4, 2000, share), Some(666));
        // 32 workers sharing one partition: 666 locks / 32.
        assert_eq!(lock_budget_fit(32, 1000, 1, 2000, share), Some(20));
        // Already small enough, or a large cap: kept.
        assert_eq!(lock_budget_fit(32, 20, 1, 2000, share), None);
        assert_eq!(lock_budget_fit(4, 1000, 1, 20_000, share), None);
        assert_eq!(lock_budget_fit(4, 1000, 4, 4000, share), None);
        // Never below one record, whatever the numbers.
        assert_eq!(lock_budget_fit(5000, 1000, 1, 100, share), Some(1));
        assert_eq!(lock_budget_fit(0, 1000, 0, 0, share), Some(1));
        assert_eq!(lock_budget_fit(1, 1000, 1, 1, 0), Some(1));
    }
}
