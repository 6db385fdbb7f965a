//! [`RuntimeConfig`]: the runtime's settings, typed or from Kafka-style
//! properties (`application.id`, `processing.guarantee`, ...), with errors
//! that name the setting.

use std::net::SocketAddr;
use std::time::Duration;

/// `processing.guarantee`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ProcessingGuarantee {
    /// `exactly_once`: outputs and share acknowledgements commit in one
    /// transaction (KIP-1289; the broker must offer TxnShareAcknowledge).
    #[default]
    ExactlyOnce,
    /// `at_least_once`: outputs are produced and flushed, then the source
    /// records are acknowledged. Works with any broker that has share
    /// groups; a crash between the two produces duplicates.
    AtLeastOnce,
}

impl ProcessingGuarantee {
    /// From the property value (`exactly_once`, `exactly_once_v2`,
    /// `at_least_once`).
    pub fn parse(value: &str) -> Option<Self> {
        match value.trim().to_ascii_lowercase().as_str() {
            "exactly_once" | "exactly_once_v2" => Some(Self::ExactlyOnce),
            "at_least_once" => Some(Self::AtLeastOnce),
            _ => None,
        }
    }

    /// The property value.
    pub fn name(self) -> &'static str {
        match self {
            Self::ExactlyOnce => "exactly_once",
            Self::AtLeastOnce => "at_least_once",
        }
    }
}

impl std::fmt::Display for ProcessingGuarantee {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// `exactly.once.mechanism`: how exactly_once is carried out
/// (docs/EXACTLY-ONCE.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ExactlyOnceMechanism {
    /// `auto` (the default): `kip1289` when the share group and the
    /// outputs are on one cluster and it offers TxnShareAcknowledge
    /// (apiKey 95), else `ledger`. The choice and its reason are logged at
    /// start-up.
    #[default]
    Auto,
    /// `kip1289`: the acknowledgements ride in the producer's transaction
    /// (TxnShareAcknowledge). Needs a broker with KIP-1289 (today our
    /// embedded broker) and one cluster.
    Kip1289,
    /// `ledger`: an intent record per source partition in each transaction
    /// on the target cluster, arbitrated in ledger order; the share
    /// acknowledgements follow the commit. Works on any Kafka with share
    /// groups (4.2+), and across two clusters.
    Ledger,
}

impl ExactlyOnceMechanism {
    /// From the property value.
    pub fn parse(value: &str) -> Option<Self> {
        match value.trim().to_ascii_lowercase().as_str() {
            "auto" => Some(Self::Auto),
            "kip1289" => Some(Self::Kip1289),
            "ledger" => Some(Self::Ledger),
            _ => None,
        }
    }

    /// The property value.
    pub fn name(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Kip1289 => "kip1289",
            Self::Ledger => "ledger",
        }
    }
}

impl std::fmt::Display for ExactlyOnceMechanism {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// `exactly.once.ledger.check`: how the check after each poll (step 2 of
/// the ledger protocol, docs/EXACTLY-ONCE.md 3.2) reads the ledger. Either
/// is safe: the pre-commit arbitration, which always catches up, decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum LedgerCheck {
    /// `index` (the default): the records are looked up in the index as it
    /// stands, with no request to the target cluster. A record committed by
    /// a transaction the index has not read yet (written a few milliseconds
    /// earlier) is processed, and the arbitration then finds that intent,
    /// aborts and ACCEPTs it. While the index's tail is not answering, the
    /// check reads the end offsets as `caught_up` does, so that an outage
    /// holds the records instead of spending their deliveries.
    #[default]
    Index,
    /// `caught_up`: the end offsets of the ledger partitions are read
    /// after the acquisition (ListOffsets) and the index catches up to them
    /// before the look. Costs a round trip per poll; no transaction is lost
    /// to an intent the index had not read.
    CaughtUp,
}

impl LedgerCheck {
    /// From the property value.
    pub fn parse(value: &str) -> Option<Self> {
        match value.trim().to_ascii_lowercase().as_str() {
            "index" => Some(Self::Index),
            "caught_up" => Some(Self::CaughtUp),
            _ => None,
        }
    }

    /// The property value.
    pub fn name(self) -> &'static str {
        match self {
            Self::Index => "index",
            Self::CaughtUp => "caught_up",
        }
    }
}

/// Settings of a [`Runtime`](super::Runtime).
#[derive(Debug, Clone, PartialEq)]
pub struct RuntimeConfig {
    /// `application.id`: prefix of the transactional ids and client ids.
    /// Every process of one application has the same one. Empty: the
    /// topology's share group.
    pub application_id: String,
    /// `application.instance.id`: a stable identity of this process among
    /// the application's processes (a StatefulSet pod name, a host name),
    /// in the spirit of `group.instance.id`. The transactional ids are
    /// `<application.id>-<application.instance.id>-<worker index>`, so a
    /// restarted instance fences the transactions its predecessor left
    /// open at once. Two running processes must never share one. `None`
    /// (the default): each process generates a fresh identity at start, so
    /// processes never fence each other, and the transactions a crashed
    /// process left open end by `transaction.timeout.ms`
    /// (docs/DESIGN.md D15).
    pub application_instance_id: Option<String>,
    /// `bootstrap.servers` of the cluster the outputs go to (and the share
    /// group lives on, unless `source.bootstrap.servers` says otherwise).
    pub bootstrap_servers: Vec<String>,
    /// `source.bootstrap.servers`: the cluster of the share group when it
    /// is not the output cluster. Refused under exactly_once (D11).
    pub source_bootstrap_servers: Option<Vec<String>>,
    /// `num.workers` (default 1): workers in this process, each a share
    /// group member with its own producer.
    pub num_workers: usize,
    /// `processing.guarantee` (default exactly_once).
    pub processing_guarantee: ProcessingGuarantee,
    /// `commit.interval.ms` (default 100 ms): a transaction (or an
    /// at-least-once acknowledgement commit) ends at the latest this long
    /// after its first record.
    pub commit_interval: Duration,
    /// `max.records.per.transaction` (default 1000): a transaction ends
    /// once it holds this many source records. Under exactly_once the
    /// runtime lowers it at start-up when this process's workers could
    /// otherwise hold more than a third of the source partitions' record
    /// locks (the broker's `group.share.partition.max.record.locks`, read
    /// with DescribeConfigs; a transaction's records stay locked until it
    /// commits), and logs it; the handle's config shows the value used.
    pub max_records_per_transaction: usize,
    /// `max.poll.records` (default 500).
    pub max_poll_records: usize,
    /// `share.acquire.mode` of the workers' share consumers: `auto` (the
    /// default, `None` here), `batch_optimized` or `record_limit`.
    /// `record_limit` (ShareFetch v2: Kafka 4.2+ and the embedded broker)
    /// makes the broker hand each poll at most `max.poll.records` records
    /// even out of large producer batches, so that workers beyond the
    /// partition count share the records evenly; `batch_optimized`
    /// (Kafka's default) hands out whole batches, which is cheaper when
    /// every worker has partitions of its own. `auto` picks `record_limit`
    /// when `num.workers` exceeds the partitions of a source topic and the
    /// broker has ShareFetch v2, else `batch_optimized` (logged at start).
    /// See docs/BENCHMARKS.md (Runtime, parallelism).
    pub acquire_mode: Option<crate::client::share_consumer::config::AcquireMode>,
    /// `transaction.timeout.ms` (default 10 s, as Kafka Streams under
    /// exactly-once): the longest a transaction may stay open before the
    /// coordinator aborts it. It bounds how long the records staged by a
    /// crashed process without `application.instance.id` stay TX_PENDING
    /// (docs/DESIGN.md D15). It must exceed `commit.interval.ms` by far.
    pub transaction_timeout: Duration,
    /// `linger.ms` of the producers (default 1 ms).
    pub linger: Duration,
    /// `metrics.listen`: where `GET /metrics` is served (Prometheus text);
    /// `None` = off.
    pub metrics_listen: Option<SocketAddr>,
    /// `shutdown.timeout.ms` (default 30 s): how long a graceful shutdown
    /// may take to end the transaction in flight and leave the group.
    pub shutdown_timeout: Duration,
    /// `request.timeout.ms` of the clients (default 30 s).
    pub request_timeout: Duration,
    /// The clients' `security.protocol`, `ssl.*` and `sasl.*` settings
    /// (the same for every cluster the runtime talks to).
    pub security: crate::client::security::SecurityProperties,
    /// `share.group.lag.interval.ms` (default 5 s; 0 = off): how often the
    /// share-group lag gauge is refreshed (DescribeShareGroupOffsets and
    /// ListOffsets, off the workers' path).
    pub lag_interval: Duration,
    /// `poll.during.commit` (default false): under exactly_once, poll and
    /// process the next batch while a transaction commits (its records go
    /// into the next transaction); through KIP-1289 and, since D37,
    /// through the intent ledger (the next batch is checked against the
    /// index meanwhile). Off (the default): the loop waits for the commit,
    /// as the KIP's pseudo code does; on 2 cores the overlap was slower at
    /// 100 B under both mechanisms, faster through the ledger at 1 KiB,
    /// and no different on Apache Kafka (docs/BENCHMARKS.md, Runtime
    /// section 1 and "Session 12").
    pub poll_during_commit: bool,
    /// `commit.within.interval` (default true): under exactly_once, commits
    /// start every `commit.interval.ms` less the expected commit duration
    /// (the slow end of the process's recent commits, at most half the
    /// interval), so that a record fetched just after one commit started
    /// is visible about `commit.interval.ms` later rather than one commit
    /// later still (src/runtime/grid.rs). Off: commits start every
    /// `commit.interval.ms` (kept for comparisons).
    pub commit_within_interval: bool,
    /// `commit.aligned` (default true): under exactly_once, the workers of
    /// a process start their commits on one shared grid of points rather
    /// than each one period after its own first record. Transactions of
    /// several workers that write to the same output partition then end
    /// together, so the partition's last stable offset is not held back by
    /// another worker's longer-open transaction (read_committed readers
    /// see records up to one interval sooner). Off: per-worker periods.
    pub commit_aligned: bool,
    /// `share.delivery.count.limit`: the share group's delivery count
    /// limit, as the broker applies it. `None` (the default): read at
    /// start-up from the group's config, else the broker's
    /// `group.share.delivery.count.limit`, else Kafka's default 5. A
    /// record on its last delivery whose processing fails under
    /// `ErrorPolicy::Fail` does not stop the application (the broker would
    /// then archive it unseen): it is dead-lettered to
    /// `delivery.limit.dead.letter.topic`, or rejected, with a log line
    /// and `sharestream_runtime_records_failed_at_delivery_limit_total`.
    pub delivery_count_limit: Option<u16>,
    /// `delivery.limit.dead.letter.topic`: where such a record goes (with
    /// the dead-letter headers and `__dlq.reason: delivery-count-limit`).
    /// `None` (the default): it is rejected.
    pub delivery_limit_dead_letter_topic: Option<String>,
    /// `buffer.memory` of the workers' producers (bytes; `None`: the
    /// producer's default, 32 MiB as in Java): outputs waiting to be sent.
    pub buffer_memory: Option<u64>,
    /// `batch.size` of the workers' producers (bytes; `None`:
    /// [`DEFAULT_BATCH_SIZE`], or less where an output topic's
    /// `max.message.bytes` is smaller): the most bytes of one output
    /// partition per batch. Start-up refuses a value above an output
    /// topic's `max.message.bytes`.
    pub batch_size: Option<u64>,
    /// `max.block.ms` of the workers' producers (`None`: the producer's
    /// default, 60 s): how long a send waits for room in `buffer.memory`
    /// (and for metadata) before it fails; under exactly_once the failure
    /// aborts the transaction.
    pub max_block: Option<Duration>,
    /// `exactly.once.mechanism` (default `auto`): see
    /// [`ExactlyOnceMechanism`]. The handle's config shows the one in use.
    pub exactly_once_mechanism: ExactlyOnceMechanism,
    /// `exactly.once.ledger.topic`: the ledger topic on the target cluster.
    /// `None` (the default): `<application.id>-eos-ledger`.
    pub ledger_topic: Option<String>,
    /// `exactly.once.ledger.partitions`: its partition count when the
    /// runtime creates it. `None` (the default): the source partitions'
    /// total, at least 1 and at most 50. It must never change afterwards.
    pub ledger_partitions: Option<i32>,
    /// `exactly.once.ledger.replication.factor`: when the runtime creates
    /// it. `None` (the default): 3, or the cluster's broker count if lower.
    pub ledger_replication_factor: Option<i16>,
    /// `exactly.once.ledger.fence.wait.ms`: how long a worker waits for an
    /// open intent of another transaction to end before it fences that
    /// transactional id. `None` (the default): twice `commit.interval.ms`.
    pub ledger_fence_wait: Option<Duration>,
    /// `exactly.once.ledger.trim.interval.ms` (default 60000; 0 never
    /// trims): how often a process looks for a prefix of each ledger
    /// partition that is no longer needed and deletes it (DeleteRecords on
    /// the target cluster; docs/EXACTLY-ONCE.md, "Trimming the ledger").
    pub ledger_trim_interval: Option<Duration>,
    /// `exactly.once.ledger.max.batch.age.ms` (default 300000): the
    /// longest a worker may take from acquiring records to deciding on
    /// them against the ledger (the check after the poll, and the
    /// arbitration before the commit); a batch that took longer is
    /// released (the records come back). The ledger keeps every intent
    /// this long (plus `exactly.once.ledger.trim.margin.ms`) after its
    /// records became terminal.
    pub ledger_max_batch_age: Duration,
    /// `exactly.once.ledger.trim.margin.ms` (default 60000): added to the
    /// batch age limit before a trim point is acted on, for clocks that run
    /// at different rates and for a deposed share-partition leader still
    /// serving for a moment.
    pub ledger_trim_margin: Duration,
    /// `exactly.once.ledger.check` (default `index`): see [`LedgerCheck`].
    pub ledger_check: LedgerCheck,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        Self {
            application_id: String::new(),
            application_instance_id: None,
            bootstrap_servers: vec!["127.0.0.1:9092".into()],
            source_bootstrap_servers: None,
            num_workers: 1,
            processing_guarantee: ProcessingGuarantee::ExactlyOnce,
            commit_interval: Duration::from_millis(100),
            max_records_per_transaction: 1000,
            max_poll_records: 500,
            acquire_mode: None,
            transaction_timeout: DEFAULT_TRANSACTION_TIMEOUT,
            linger: Duration::from_millis(1),
            metrics_listen: None,
            shutdown_timeout: Duration::from_secs(30),
            request_timeout: Duration::from_secs(30),
            security: Default::default(),
            lag_interval: Duration::from_secs(5),
            poll_during_commit: false,
            commit_within_interval: true,
            commit_aligned: true,
            delivery_count_limit: None,
            delivery_limit_dead_letter_topic: None,
            buffer_memory: None,
            batch_size: None,
            max_block: None,
            exactly_once_mechanism: ExactlyOnceMechanism::Auto,
            ledger_topic: None,
            ledger_partitions: None,
            ledger_replication_factor: None,
            ledger_fence_wait: None,
            ledger_trim_interval: Some(Duration::from_secs(60)),
            ledger_max_batch_age: Duration::from_secs(300),
            ledger_trim_margin: Duration::from_secs(60),
            ledger_check: LedgerCheck::Index,
        }
    }
}

/// The default `transaction.timeout.ms` (docs/DESIGN.md D15).
pub const DEFAULT_TRANSACTION_TIMEOUT: Duration = Duration::from_secs(10);

/// The workers' producers' `batch.size` when none is set: 128 KiB, eight
/// times the producer's (and Java's) 16 KiB. A worker's outputs of one
/// poll mostly go to one partition, so each Produce request carries one
/// batch, and a broker's cost is largely per request: on one Apache Kafka
/// 4.4 node at 1 KiB, 128 KiB batches gave at_least_once 29-93 % and the
/// intent ledger 31-105 % more records per second than 16 KiB ones
/// (docs/DESIGN.md D50). Lowered at start-up to the output topics' smallest
/// `max.message.bytes`, which a batch must not exceed.
pub const DEFAULT_BATCH_SIZE: u64 = 128 * 1024;

/// A refused setting: the clients' [`ConfigError`](crate::protocol::ConfigError)
/// (defined once in the protocol crate), its message
/// `invalid configuration <setting>: <what is wrong and what to do>`.
pub type RuntimeConfigError = crate::protocol::ConfigError;

fn err(setting: &str, message: impl Into<String>) -> RuntimeConfigError {
    RuntimeConfigError::new(
        setting,
        format!("invalid configuration {setting}: {}", message.into()),
    )
}

fn hosts(v: &str) -> Vec<String> {
    v.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect()
}

fn boolean(setting: &str, v: &str) -> Result<bool, RuntimeConfigError> {
    match v.trim() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(err(setting, format!("{v:?}: expected true or false"))),
    }
}

fn positive(setting: &str, v: &str) -> Result<u64, RuntimeConfigError> {
    match v.trim().parse::<u64>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(err(setting, format!("{v:?} is not a positive integer"))),
    }
}

impl RuntimeConfig {
    /// The settings from Kafka-style properties; unknown names and bad
    /// values are refused with an error naming the setting.
    pub fn from_properties<K: AsRef<str>, V: AsRef<str>>(
        props: impl IntoIterator<Item = (K, V)>,
    ) -> Result<Self, RuntimeConfigError> {
        let mut c = Self::default();
        for (k, v) in props {
            c.set(k.as_ref(), v.as_ref())?;
        }
        c.validate()?;
        Ok(c)
    }

    /// Sets one property.
    pub fn set(&mut self, name: &str, value: &str) -> Result<&mut Self, RuntimeConfigError> {
        match name {
            "application.id" => self.application_id = value.trim().to_string(),
            "application.instance.id" => {
                let v = value.trim();
                self.application_instance_id = (!v.is_empty()).then(|| v.to_string());
            }
            "bootstrap.servers" => self.bootstrap_servers = hosts(value),
            "source.bootstrap.servers" => {
                let h = hosts(value);
                self.source_bootstrap_servers = (!h.is_empty()).then_some(h);
            }
            "num.workers" => self.num_workers = positive(name, value)? as usize,
            "processing.guarantee" => {
                self.processing_guarantee = ProcessingGuarantee::parse(value).ok_or_else(|| {
                    err(
                        name,
                        format!("{value:?}: expected exactly_once or at_least_once"),
                    )
                })?
            }
            "commit.interval.ms" => {
                self.commit_interval = Duration::from_millis(positive(name, value)?)
            }
            "max.records.per.transaction" => {
                self.max_records_per_transaction = positive(name, value)? as usize
            }
            "max.poll.records" => self.max_poll_records = positive(name, value)? as usize,
            "share.acquire.mode" => {
                use crate::client::share_consumer::config::AcquireMode;
                self.acquire_mode = match value.trim().to_ascii_lowercase().as_str() {
                    "auto" => None,
                    "batch_optimized" => Some(AcquireMode::BatchOptimized),
                    "record_limit" => Some(AcquireMode::RecordLimit),
                    _ => {
                        return Err(err(
                            name,
                            format!("{value:?}: expected auto, batch_optimized or record_limit"),
                        ));
                    }
                }
            }
            "transaction.timeout.ms" => {
                self.transaction_timeout = Duration::from_millis(positive(name, value)?)
            }
            "linger.ms" => {
                let ms = value
                    .trim()
                    .parse::<u64>()
                    .map_err(|_| err(name, format!("{value:?} is not a number of ms")))?;
                self.linger = Duration::from_millis(ms)
            }
            "metrics.listen" => {
                self.metrics_listen = if value.trim().is_empty() {
                    None
                } else {
                    Some(value.trim().parse().map_err(|_| {
                        err(name, format!("{value:?} is not a host:port socket address"))
                    })?)
                }
            }
            "shutdown.timeout.ms" => {
                self.shutdown_timeout = Duration::from_millis(positive(name, value)?)
            }
            "request.timeout.ms" => {
                self.request_timeout = Duration::from_millis(positive(name, value)?)
            }
            "share.group.lag.interval.ms" => {
                let ms = value
                    .trim()
                    .parse::<u64>()
                    .map_err(|_| err(name, format!("{value:?} is not a number of ms")))?;
                self.lag_interval = Duration::from_millis(ms)
            }
            "poll.during.commit" => {
                self.poll_during_commit = match value.trim() {
                    "true" => true,
                    "false" => false,
                    _ => return Err(err(name, format!("{value:?}: expected true or false"))),
                }
            }
            "commit.within.interval" => self.commit_within_interval = boolean(name, value)?,
            "commit.aligned" => self.commit_aligned = boolean(name, value)?,
            "share.delivery.count.limit" => {
                let n = positive(name, value)?;
                if !(2..=10).contains(&n) {
                    return Err(err(
                        name,
                        format!("{value:?}: Kafka allows 2 to 10 deliveries"),
                    ));
                }
                self.delivery_count_limit = Some(n as u16);
            }
            "delivery.limit.dead.letter.topic" => {
                let v = value.trim();
                self.delivery_limit_dead_letter_topic = (!v.is_empty()).then(|| v.to_string());
            }
            "buffer.memory" => self.buffer_memory = Some(positive(name, value)?),
            "batch.size" => {
                let n = positive(name, value)?;
                if n > i32::MAX as u64 {
                    return Err(err(name, format!("{value:?}: at most {}", i32::MAX)));
                }
                self.batch_size = Some(n);
            }
            "max.block.ms" => self.max_block = Some(Duration::from_millis(positive(name, value)?)),
            "exactly.once.mechanism" => {
                self.exactly_once_mechanism =
                    ExactlyOnceMechanism::parse(value).ok_or_else(|| {
                        err(name, format!("{value:?}: expected auto, kip1289 or ledger"))
                    })?
            }
            "exactly.once.ledger.topic" => {
                let v = value.trim();
                self.ledger_topic = (!v.is_empty()).then(|| v.to_string());
            }
            "exactly.once.ledger.partitions" => {
                let n = positive(name, value)?;
                if n > 10_000 {
                    return Err(err(name, format!("{value:?}: at most 10000")));
                }
                self.ledger_partitions = Some(n as i32);
            }
            "exactly.once.ledger.replication.factor" => {
                let n = positive(name, value)?;
                if n > i16::MAX as u64 {
                    return Err(err(name, format!("{value:?} is too large")));
                }
                self.ledger_replication_factor = Some(n as i16);
            }
            "exactly.once.ledger.fence.wait.ms" => {
                self.ledger_fence_wait = Some(Duration::from_millis(positive(name, value)?))
            }
            "exactly.once.ledger.trim.interval.ms" => {
                let ms = value.trim().parse::<u64>().map_err(|_| {
                    err(
                        name,
                        format!("{value:?}: expected milliseconds (0: never trim)"),
                    )
                })?;
                self.ledger_trim_interval = (ms > 0).then(|| Duration::from_millis(ms));
            }
            "exactly.once.ledger.max.batch.age.ms" => {
                self.ledger_max_batch_age = Duration::from_millis(positive(name, value)?)
            }
            "exactly.once.ledger.trim.margin.ms" => {
                let ms = value
                    .trim()
                    .parse::<u64>()
                    .map_err(|_| err(name, format!("{value:?}: expected milliseconds")))?;
                self.ledger_trim_margin = Duration::from_millis(ms);
            }
            "exactly.once.ledger.check" => {
                self.ledger_check = LedgerCheck::parse(value)
                    .ok_or_else(|| err(name, format!("{value:?}: expected index or caught_up")))?
            }
            other if crate::client::security::is_security_setting(other) => {
                self.security.insert(other, value)
            }
            other => return Err(err(other, "unknown setting")),
        }
        Ok(self)
    }

    /// Checks the settings together (D11: exactly_once needs the share
    /// group and the outputs on one cluster).
    pub fn validate(&self) -> Result<(), RuntimeConfigError> {
        self.security_settings()?;
        if self.bootstrap_servers.is_empty() {
            return Err(err("bootstrap.servers", "at least one host:port is needed"));
        }
        if self.num_workers == 0 {
            return Err(err("num.workers", "must be at least 1"));
        }
        if self.max_records_per_transaction == 0 {
            return Err(err("max.records.per.transaction", "must be at least 1"));
        }
        if self.max_poll_records == 0 {
            return Err(err("max.poll.records", "must be at least 1"));
        }
        if self.commit_interval.is_zero() {
            return Err(err("commit.interval.ms", "must be positive"));
        }
        if let Some(id) = &self.application_instance_id
            && let Some(c) = id
                .chars()
                .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
        {
            return Err(err(
                "application.instance.id",
                format!(
                    "{id:?} contains {c:?}: use letters, digits, '.', '_' and '-' (it becomes \
                     part of the transactional and client ids)"
                ),
            ));
        }
        if self.processing_guarantee == ProcessingGuarantee::ExactlyOnce
            && self.transaction_timeout <= self.commit_interval
        {
            return Err(err(
                "transaction.timeout.ms",
                format!(
                    "{} ms is not above commit.interval.ms ({} ms): every transaction would \
                     time out; raise transaction.timeout.ms (default 10000) or lower \
                     commit.interval.ms",
                    self.transaction_timeout.as_millis(),
                    self.commit_interval.as_millis()
                ),
            ));
        }
        if self.processing_guarantee == ProcessingGuarantee::ExactlyOnce
            && self.is_cross_cluster()
            && self.exactly_once_mechanism == ExactlyOnceMechanism::Kip1289
        {
            return Err(err(
                "exactly.once.mechanism",
                "kip1289 needs the share group and the outputs on one cluster, and \
                 source.bootstrap.servers names another (a transaction lives on one cluster, \
                 D11); set exactly.once.mechanism=ledger (or auto) for exactly-once across \
                 two clusters",
            ));
        }
        if self.processing_guarantee == ProcessingGuarantee::ExactlyOnce
            && self.exactly_once_mechanism != ExactlyOnceMechanism::Kip1289
            && self.ledger_max_batch_age <= self.commit_interval
        {
            return Err(err(
                "exactly.once.ledger.max.batch.age.ms",
                format!(
                    "{} ms is not above commit.interval.ms ({} ms): a transaction's records \
                     are decided on at its commit, so every batch would be too old; raise \
                     exactly.once.ledger.max.batch.age.ms (default 300000) or lower \
                     commit.interval.ms",
                    self.ledger_max_batch_age.as_millis(),
                    self.commit_interval.as_millis()
                ),
            ));
        }
        if let Some(t) = &self.ledger_topic
            && let Some(c) = t
                .chars()
                .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
        {
            return Err(err(
                "exactly.once.ledger.topic",
                format!("{t:?} contains {c:?}: a topic name has letters, digits, '.', '_' and '-'"),
            ));
        }
        Ok(())
    }

    /// The clients' security settings (`security.protocol`, `ssl.*`,
    /// `sasl.*`); errors name the setting.
    pub fn security_settings(
        &self,
    ) -> Result<crate::client::security::SecuritySettings, RuntimeConfigError> {
        self.security
            .settings()
            .map_err(|e| err(&e.setting, e.message))
    }

    /// Whether the share group lives on another cluster than the outputs.
    pub fn is_cross_cluster(&self) -> bool {
        match &self.source_bootstrap_servers {
            None => false,
            Some(s) => {
                let mut a = s.clone();
                let mut b = self.bootstrap_servers.clone();
                a.sort();
                b.sort();
                a != b
            }
        }
    }

    /// The ledger topic's name (`exactly.once.ledger.topic`, else
    /// `<application.id>-eos-ledger`).
    pub fn ledger_topic_name(&self) -> String {
        self.ledger_topic
            .clone()
            .unwrap_or_else(|| format!("{}-eos-ledger", self.application_id))
    }

    /// How long after a trim point was seen it may be deleted:
    /// `exactly.once.ledger.max.batch.age.ms` plus
    /// `exactly.once.ledger.trim.margin.ms` (docs/EXACTLY-ONCE.md,
    /// "Trimming the ledger").
    pub fn ledger_trim_grace(&self) -> Duration {
        self.ledger_max_batch_age + self.ledger_trim_margin
    }

    /// How long to wait for an open intent before fencing its writer.
    pub fn ledger_fence_wait(&self) -> Duration {
        self.ledger_fence_wait.unwrap_or(self.commit_interval * 2)
    }

    /// The cluster the share group lives on.
    pub fn source_servers(&self) -> &[String] {
        self.source_bootstrap_servers
            .as_deref()
            .unwrap_or(&self.bootstrap_servers)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn properties_parse_and_errors_name_the_setting() {
        let c = RuntimeConfig::from_properties([
            ("application.id", "app"),
            ("bootstrap.servers", "a:1, b:2"),
            ("num.workers", "4"),
            ("processing.guarantee", "at_least_once"),
            ("commit.interval.ms", "250"),
            ("max.records.per.transaction", "77"),
            ("metrics.listen", "127.0.0.1:9464"),
        ])
        .unwrap();
        assert_eq!(c.application_id, "app");
        assert_eq!(c.bootstrap_servers, vec!["a:1", "b:2"]);
        assert_eq!(c.num_workers, 4);
        assert_eq!(c.processing_guarantee, ProcessingGuarantee::AtLeastOnce);
        assert_eq!(c.commit_interval, Duration::from_millis(250));
        assert_eq!(c.max_records_per_transaction, 77);
        assert_eq!(c.metrics_listen, Some("127.0.0.1:9464".parse().unwrap()));

        let e = RuntimeConfig::from_properties([("num.workers", "0")]).unwrap_err();
        assert_eq!(e.setting, "num.workers");
        let e = RuntimeConfig::from_properties([("processing.guarantee", "twice")]).unwrap_err();
        assert_eq!(e.setting, "processing.guarantee");
        assert!(e.to_string().contains("at_least_once"), "{e}");
        let e = RuntimeConfig::from_properties([("linger", "1")]).unwrap_err();
        assert_eq!(e.setting, "linger");
        let e = RuntimeConfig::from_properties([("metrics.listen", "nowhere")]).unwrap_err();
        assert_eq!(e.setting, "metrics.listen");
        let c = RuntimeConfig::from_properties([("share.acquire.mode", "record_limit")]).unwrap();
        assert_eq!(
            c.acquire_mode,
            Some(crate::client::share_consumer::config::AcquireMode::RecordLimit)
        );
        assert_eq!(RuntimeConfig::default().acquire_mode, None, "auto");
        let e = RuntimeConfig::from_properties([("share.acquire.mode", "all")]).unwrap_err();
        assert_eq!(e.setting, "share.acquire.mode");
        assert!(e.to_string().contains("record_limit"), "{e}");

        let d = RuntimeConfig::default();
        assert!(d.commit_within_interval && d.commit_aligned);
        let c = RuntimeConfig::from_properties([
            ("commit.within.interval", "false"),
            ("commit.aligned", "false"),
        ])
        .unwrap();
        assert!(!c.commit_within_interval && !c.commit_aligned);
        let e = RuntimeConfig::from_properties([("commit.aligned", "yes")]).unwrap_err();
        assert_eq!(e.setting, "commit.aligned");
    }

    #[test]
    fn poll_during_commit_is_off_unless_set() {
        assert!(!RuntimeConfig::default().poll_during_commit);
        let c = RuntimeConfig::from_properties([("poll.during.commit", "true")]).unwrap();
        assert!(c.poll_during_commit);
        let e = RuntimeConfig::from_properties([("poll.during.commit", "yes")]).unwrap_err();
        assert_eq!(e.setting, "poll.during.commit");
        assert!(e.to_string().contains("true or false"), "{e}");
    }

    #[test]
    fn instance_identity_and_transaction_timeout() {
        let d = RuntimeConfig::default();
        assert_eq!(d.application_instance_id, None);
        assert_eq!(d.transaction_timeout, Duration::from_secs(10));
        let c = RuntimeConfig::from_properties([("application.instance.id", " pod-3 ")]).unwrap();
        assert_eq!(c.application_instance_id.as_deref(), Some("pod-3"));
        let c = RuntimeConfig::from_properties([("application.instance.id", "")]).unwrap();
        assert_eq!(c.application_instance_id, None);
        let e = RuntimeConfig::from_properties([("application.instance.id", "a b")]).unwrap_err();
        assert_eq!(e.setting, "application.instance.id");
        let e = RuntimeConfig::from_properties([
            ("transaction.timeout.ms", "100"),
            ("commit.interval.ms", "100"),
        ])
        .unwrap_err();
        assert_eq!(e.setting, "transaction.timeout.ms");
        assert!(e.to_string().contains("commit.interval.ms"), "{e}");
    }

    #[test]
    fn delivery_limit_settings() {
        let d = RuntimeConfig::default();
        assert_eq!(d.delivery_count_limit, None);
        assert_eq!(d.delivery_limit_dead_letter_topic, None);
        let c = RuntimeConfig::from_properties([
            ("share.delivery.count.limit", "3"),
            ("delivery.limit.dead.letter.topic", "dlq"),
        ])
        .unwrap();
        assert_eq!(c.delivery_count_limit, Some(3));
        assert_eq!(c.delivery_limit_dead_letter_topic.as_deref(), Some("dlq"));
        let e = RuntimeConfig::from_properties([("share.delivery.count.limit", "11")]).unwrap_err();
        assert_eq!(e.setting, "share.delivery.count.limit");
    }

    #[test]
    fn cross_cluster_exactly_once_needs_the_ledger() {
        // auto (the default) takes the ledger across clusters.
        let c = RuntimeConfig::from_properties([
            ("bootstrap.servers", "target:9092"),
            ("source.bootstrap.servers", "source:9092"),
        ])
        .unwrap();
        assert!(c.is_cross_cluster());
        assert_eq!(c.exactly_once_mechanism, ExactlyOnceMechanism::Auto);
        // kip1289 cannot span two clusters.
        let e = RuntimeConfig::from_properties([
            ("bootstrap.servers", "target:9092"),
            ("source.bootstrap.servers", "source:9092"),
            ("exactly.once.mechanism", "kip1289"),
        ])
        .unwrap_err();
        assert_eq!(e.setting, "exactly.once.mechanism");
        assert!(e.message.contains("exactly.once.mechanism=ledger"), "{e}");
        let c = RuntimeConfig::from_properties([
            ("bootstrap.servers", "target:9092"),
            ("source.bootstrap.servers", "source:9092"),
            ("processing.guarantee", "at_least_once"),
        ])
        .unwrap();
        assert_eq!(c.source_servers(), ["source:9092"]);
        // The same cluster named twice is not cross-cluster.
        let c = RuntimeConfig::from_properties([
            ("bootstrap.servers", "a:1,b:2"),
            ("source.bootstrap.servers", "b:2,a:1"),
        ])
        .unwrap();
        assert!(!c.is_cross_cluster());
    }

    #[test]
    fn ledger_settings() {
        let d = RuntimeConfig {
            application_id: "app".into(),
            ..RuntimeConfig::default()
        };
        assert_eq!(d.ledger_topic_name(), "app-eos-ledger");
        assert_eq!(d.ledger_fence_wait(), Duration::from_millis(200));
        let c = RuntimeConfig::from_properties([
            ("exactly.once.mechanism", "LEDGER"),
            ("exactly.once.ledger.topic", "my-ledger"),
            ("exactly.once.ledger.partitions", "12"),
            ("exactly.once.ledger.replication.factor", "3"),
            ("exactly.once.ledger.fence.wait.ms", "750"),
        ])
        .unwrap();
        assert_eq!(c.exactly_once_mechanism, ExactlyOnceMechanism::Ledger);
        assert_eq!(c.ledger_topic_name(), "my-ledger");
        assert_eq!(c.ledger_partitions, Some(12));
        assert_eq!(c.ledger_replication_factor, Some(3));
        assert_eq!(c.ledger_fence_wait(), Duration::from_millis(750));
        let c = RuntimeConfig::from_properties([
            ("buffer.memory", "1048576"),
            ("max.block.ms", "500"),
            ("batch.size", "65536"),
        ])
        .unwrap();
        assert_eq!(c.buffer_memory, Some(1 << 20));
        assert_eq!(c.batch_size, Some(65536));
        assert_eq!(c.max_block, Some(Duration::from_millis(500)));
        for (k, v) in [
            ("buffer.memory", "0"),
            ("batch.size", "0"),
            ("batch.size", "4294967296"),
            ("max.block.ms", "soon"),
            ("exactly.once.mechanism", "twice"),
            ("exactly.once.ledger.partitions", "0"),
            ("exactly.once.ledger.topic", "a/b"),
            ("exactly.once.ledger.fence.wait.ms", "-1"),
            ("exactly.once.ledger.trim.interval.ms", "-5"),
            ("exactly.once.ledger.max.batch.age.ms", "0"),
            ("exactly.once.ledger.trim.margin.ms", "a minute"),
        ] {
            let e = RuntimeConfig::from_properties([(k, v)]).unwrap_err();
            assert_eq!(e.setting, k, "{e}");
        }
        // Trimming: on by default, 0 turns it off; the grace is the batch
        // age limit plus the margin.
        assert_eq!(d.ledger_trim_interval, Some(Duration::from_secs(60)));
        assert_eq!(d.ledger_trim_grace(), Duration::from_secs(360));
        let c = RuntimeConfig::from_properties([
            ("exactly.once.ledger.trim.interval.ms", "0"),
            ("exactly.once.ledger.max.batch.age.ms", "20000"),
            ("exactly.once.ledger.trim.margin.ms", "5000"),
        ])
        .unwrap();
        assert_eq!(c.ledger_trim_interval, None);
        assert_eq!(c.ledger_max_batch_age, Duration::from_secs(20));
        assert_eq!(c.ledger_trim_grace(), Duration::from_secs(25));
        // A batch age limit a transaction's own commit interval exceeds is
        // refused, naming both settings.
        let e = RuntimeConfig::from_properties([
            ("exactly.once.ledger.max.batch.age.ms", "100"),
            ("commit.interval.ms", "100"),
        ])
        .unwrap_err();
        assert_eq!(e.setting, "exactly.once.ledger.max.batch.age.ms");
        assert!(e.message.contains("commit.interval.ms"), "{e}");
    }
}
