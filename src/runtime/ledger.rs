//! The intent ledger's I/O (docs/EXACTLY-ONCE.md, sections 3 and 5): the
//! ledger topic on the target cluster, the process's index of it (one
//! tailing task, one long-polling Fetch per leader broker for every
//! ledger partition it leads, read_uncommitted, control batches kept),
//! and fencing. The decisions are in
//! [`eos::ledger`](crate::eos::ledger); the worker's steps in
//! `worker.rs` (`ledger_check`, `ledger_commit`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use futures::StreamExt;
use futures::stream::FuturesUnordered;

use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{FetchRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use parking_lot::Mutex;
use tokio::sync::watch;
use tokio::time::Instant;

use super::RuntimeError;
use super::config::RuntimeConfig;
use super::metrics::RuntimeMetrics;
use crate::client::admin::{AdminClient, NewTopic};
use crate::client::config::ProducerConfig;
use crate::client::producer::{Producer, ProducerRecord};
use crate::client::{BrokerConnection, ClientError, ConnectionConfig, Metadata};
use crate::eos::ledger::{
    IntentStatus, LedgerPartitionIndex, LedgerRecord, Look, SourcePartition, TrimSchedule, encode,
    ledger_key, ledger_partition, notice_partition,
};
use crate::failpoints;
use crate::protocol::ErrorCode;
use crate::protocol::records::RecordBatchView;

/// How long one index fetch waits at the broker for new ledger records.
const TAIL_MAX_WAIT_MS: i32 = 250;
/// Pause after a failed index fetch.
const TAIL_BACKOFF: Duration = Duration::from_millis(100);

struct Slot {
    index: Mutex<LedgerPartitionIndex>,
    /// The index position, published after each applied fetch.
    position: watch::Sender<i64>,
    /// High watermark minus position at the last fetch.
    lag: AtomicI64,
    /// Intents in the index (kept beside it, so that the metric does not
    /// lock every partition's index after each fetch).
    entries: AtomicI64,
    /// The log start offset after this process's last trim.
    trimmed: AtomicI64,
    /// When the tail last had an answer to a fetch.
    answered: Mutex<Option<Instant>>,
}

/// The process's view of the ledger, shared by its workers.
pub(crate) struct Ledger {
    topic: String,
    partitions: i32,
    slots: Vec<Slot>,
    metadata: Arc<Metadata>,
    admin: AdminClient,
    /// On the source cluster: the share group's start offsets, which say
    /// when an intent may be trimmed.
    source_admin: AdminClient,
    /// The share group.
    group: String,
    /// Writes fence notices (non-transactional, acks=all).
    notices: Producer,
    config: Arc<RuntimeConfig>,
    connection: ConnectionConfig,
    metrics: Arc<RuntimeMetrics>,
    /// Why the index stopped, when a tailing task met a ledger it cannot
    /// read (a foreign record, a changed partition count).
    failed: Mutex<Option<String>>,
}

impl std::fmt::Debug for Ledger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ledger")
            .field("topic", &self.topic)
            .field("partitions", &self.partitions)
            .finish_non_exhaustive()
    }
}

/// The ledger topic's configs where the runtime creates it: nothing is
/// deleted by time or size, nothing compacted (docs/EXACTLY-ONCE.md 3.6).
fn ledger_topic_configs(replication: i16) -> BTreeMap<String, String> {
    let mut c = BTreeMap::new();
    c.insert("cleanup.policy".into(), "delete".into());
    c.insert("retention.ms".into(), "-1".into());
    c.insert("retention.bytes".into(), "-1".into());
    if replication >= 2 {
        c.insert("min.insync.replicas".into(), "2".into());
    }
    c
}

/// Refuses an existing ledger topic whose configs could lose or reorder
/// intents; the error names the config.
fn check_ledger_topic_configs(
    topic: &str,
    configs: &BTreeMap<String, Option<String>>,
) -> Result<(), RuntimeError> {
    let get = |k: &str| configs.get(k).and_then(|v| v.as_deref());
    let refuse = |what: String| {
        Err(RuntimeError::Unsupported(format!(
            "the exactly-once ledger topic {topic:?} has {what}: intents could be deleted or \
             reordered, and records processed twice (docs/EXACTLY-ONCE.md 3.6); set it with \
             kafka-configs.sh --alter --entity-type topics --entity-name {topic} --add-config \
             'cleanup.policy=delete,retention.ms=-1,retention.bytes=-1', or name another topic \
             with exactly.once.ledger.topic"
        )))
    };
    if let Some(p) = get("cleanup.policy")
        && p.split(',').any(|x| x.trim() == "compact")
    {
        return refuse(format!("cleanup.policy={p}"));
    }
    if let Some(ms) = get("retention.ms")
        && ms.trim() != "-1"
    {
        return refuse(format!("retention.ms={ms}"));
    }
    if let Some(b) = get("retention.bytes")
        && b.trim() != "-1"
    {
        return refuse(format!("retention.bytes={b}"));
    }
    if get("unclean.leader.election.enable") == Some("true") {
        return refuse("unclean.leader.election.enable=true".into());
    }
    Ok(())
}

fn startup(what: &str, e: impl std::fmt::Display) -> RuntimeError {
    RuntimeError::Startup(format!("exactly-once ledger: {what}: {e}"))
}

impl Ledger {
    /// Creates the ledger topic if absent (refusing an existing one with
    /// unsafe configs), starts the index tasks and returns once the index
    /// has read the whole ledger as it is now.
    pub(crate) async fn open(
        config: Arc<RuntimeConfig>,
        connection: ConnectionConfig,
        group: &str,
        source_partitions: usize,
        metrics: Arc<RuntimeMetrics>,
        shutdown: watch::Receiver<bool>,
    ) -> Result<Arc<Ledger>, RuntimeError> {
        let topic = config.ledger_topic_name();
        let metadata = Arc::new(Metadata::new(
            config.bootstrap_servers.clone(),
            connection.clone(),
        ));
        let admin = AdminClient::with_metadata(metadata.clone(), config.request_timeout);
        let _ = metadata.refresh(&[topic.as_str()]).await;
        if metadata.topic(&topic).is_none() {
            let brokers = admin
                .describe_cluster()
                .await
                .map(|c| c.brokers.len().max(1))
                .unwrap_or(1);
            let replication = config
                .ledger_replication_factor
                .unwrap_or(3.min(brokers as i16));
            let partitions = config
                .ledger_partitions
                .unwrap_or(source_partitions.clamp(1, 50) as i32);
            if replication < 2 {
                tracing::warn!(
                    topic = %topic,
                    "the exactly-once ledger topic gets replication factor 1 (a one-broker \
                     cluster): losing that broker's disk loses the ledger"
                );
            }
            let new = NewTopic {
                name: topic.clone(),
                num_partitions: partitions,
                replication_factor: replication,
                configs: ledger_topic_configs(replication),
            };
            match admin.create_topic(new).await {
                Ok(_) => tracing::info!(
                    topic = %topic,
                    partitions,
                    replication,
                    "created the exactly-once ledger topic"
                ),
                Err(ClientError::Broker {
                    code: ErrorCode::TOPIC_ALREADY_EXISTS,
                    ..
                }) => {}
                Err(e) => {
                    return Err(startup(
                        &format!(
                            "cannot create the ledger topic {topic:?} (create it yourself with \
                             cleanup.policy=delete, retention.ms=-1, retention.bytes=-1, or name \
                             one with exactly.once.ledger.topic)"
                        ),
                        e,
                    ));
                }
            }
        } else {
            match admin.describe_configs(2, &topic).await {
                Ok(c) => check_ledger_topic_configs(&topic, &c)?,
                Err(e) => {
                    tracing::warn!(topic = %topic, error = %e, "cannot read the ledger topic's configs; not checked")
                }
            }
        }
        let meta = metadata
            .wait_for_topic(&topic, config.request_timeout)
            .await
            .map_err(|e| startup("the ledger topic has no metadata", e))?;
        let partitions = meta.partition_count() as i32;
        let notices = Producer::new(
            ProducerConfig::builder()
                .bootstrap_servers(config.bootstrap_servers.join(","))
                .client_id(format!("{}-ledger-notices", config.application_id))
                .request_timeout(config.request_timeout)
                .security(connection.security.clone())
                .build()
                .map_err(|e| startup("notice producer settings", e))?,
        )
        .await
        .map_err(|e| startup("notice producer", e))?;
        let ledger = Arc::new(Ledger {
            topic,
            partitions,
            slots: (0..partitions)
                .map(|_| Slot {
                    index: Mutex::new(LedgerPartitionIndex::new(0)),
                    position: watch::channel(0).0,
                    lag: Default::default(),
                    entries: Default::default(),
                    trimmed: Default::default(),
                    answered: Mutex::new(None),
                })
                .collect(),
            metadata,
            admin,
            source_admin: AdminClient::with_metadata(
                Arc::new(Metadata::new(
                    config.source_servers().to_vec(),
                    connection.clone(),
                )),
                config.request_timeout,
            ),
            group: group.to_string(),
            notices,
            config,
            connection,
            metrics,
            failed: Mutex::new(None),
        });
        // The tail's own metadata and connections: a broker answers the
        // requests of one connection in order, so a long-polling Fetch
        // would hold back every other request sent on it (a worker's
        // ListOffsets) for its whole wait.
        let tail_metadata = Arc::new(Metadata::new(
            ledger.config.bootstrap_servers.clone(),
            ledger.connection.clone(),
        ));
        tokio::spawn(tail(ledger.clone(), tail_metadata, shutdown.clone()));
        if let Some(every) = ledger.config.ledger_trim_interval {
            tokio::spawn(trim(ledger.clone(), every, shutdown.clone()));
        }
        // Read the ledger as it is before any worker decides.
        let all: BTreeSet<i32> = (0..partitions).collect();
        // A topic just created (here or by a sibling process) may not be
        // served by its leader yet: retry for a while.
        let deadline = Instant::now() + ledger.config.request_timeout.max(Duration::from_secs(30));
        let ends = loop {
            match ledger.end_offsets(&all).await {
                Ok(e) => break e,
                Err(e) if Instant::now() < deadline => {
                    tracing::debug!(error = %e, "ledger end offsets not available yet; retrying");
                    ledger.metadata.invalidate(&ledger.topic);
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(e) => return Err(startup("ListOffsets on the ledger", e)),
            }
        };
        let t0 = Instant::now();
        for (p, e) in ends {
            ledger
                .catch_up(
                    p,
                    e,
                    ledger.config.request_timeout.max(Duration::from_secs(60)),
                )
                .await?;
        }
        tracing::info!(
            topic = %ledger.topic,
            partitions,
            intents = ledger.entries(),
            replay_ms = t0.elapsed().as_millis() as u64,
            "exactly-once ledger index caught up"
        );
        Ok(ledger)
    }

    /// The ledger topic.
    pub(crate) fn topic(&self) -> &str {
        &self.topic
    }

    /// Its partition count.
    pub(crate) fn partitions(&self) -> i32 {
        self.partitions
    }

    /// The ledger partition of a source partition.
    pub(crate) fn partition_of(&self, source: SourcePartition) -> i32 {
        ledger_partition(source, self.partitions)
    }

    fn entries(&self) -> i64 {
        self.slots
            .iter()
            .map(|s| s.entries.load(Ordering::Relaxed))
            .sum()
    }

    fn check_failed(&self) -> Result<(), RuntimeError> {
        match &*self.failed.lock() {
            Some(why) => Err(RuntimeError::Unsupported(format!(
                "exactly-once ledger {:?} cannot be read: {why}",
                self.topic
            ))),
            None => Ok(()),
        }
    }

    /// The ledger partitions' end offsets (high watermarks), read now.
    pub(crate) async fn end_offsets(
        &self,
        partitions: &BTreeSet<i32>,
    ) -> Result<BTreeMap<i32, i64>, ClientError> {
        let asked: Vec<(String, i32)> = partitions
            .iter()
            .map(|p| (self.topic.clone(), *p))
            .collect();
        let mut out = BTreeMap::new();
        for ((_, p), r) in self.admin.list_end_offsets(&asked, false).await? {
            out.insert(p, r?);
        }
        Ok(out)
    }

    /// The positions of the indexes of `partitions` (every record below is
    /// read), if each index is *fresh*: the tail's last fetch was answered,
    /// no longer ago than one long poll plus `request.timeout.ms` (a fetch
    /// to a target that hangs fails within that), and the index has not
    /// failed. `None` otherwise: the caller reads the end offsets instead,
    /// and so learns of an outage at once.
    pub(crate) fn fresh_positions(&self, partitions: &BTreeSet<i32>) -> Option<BTreeMap<i32, i64>> {
        if self.failed.lock().is_some() {
            return None;
        }
        let now = Instant::now();
        let fresh = Duration::from_millis(TAIL_MAX_WAIT_MS as u64) + self.config.request_timeout;
        partitions
            .iter()
            .map(|&p| {
                let slot = &self.slots[p as usize];
                let answered = (*slot.answered.lock())?;
                (now.saturating_duration_since(answered) <= fresh)
                    .then(|| (p, *slot.position.borrow()))
            })
            .collect()
    }

    /// Waits until the index of ledger partition `p` has read every record
    /// below `target`.
    pub(crate) async fn catch_up(
        &self,
        p: i32,
        target: i64,
        timeout: Duration,
    ) -> Result<(), RuntimeError> {
        let mut rx = self.slots[p as usize].position.subscribe();
        let waited = tokio::time::timeout(timeout, async {
            loop {
                if *rx.borrow_and_update() >= target {
                    return Ok(());
                }
                self.check_failed()?;
                if rx.changed().await.is_err() {
                    return Err(RuntimeError::Startup("the ledger index stopped".into()));
                }
            }
        })
        .await;
        match waited {
            Ok(r) => r,
            Err(_) => {
                self.check_failed()?;
                Err(RuntimeError::Startup(format!(
                    "exactly-once ledger: the index of {}-{p} did not reach offset {target} within \
                     {} ms (is the target cluster reachable?)",
                    self.topic,
                    timeout.as_millis()
                )))
            }
        }
    }

    /// What the index says of `first..=last` of `source` before ledger
    /// offset `before`.
    pub(crate) fn look(&self, source: SourcePartition, first: i64, last: i64, before: i64) -> Look {
        let p = self.partition_of(source);
        self.slots[p as usize]
            .index
            .lock()
            .look(source, first, last, before)
    }

    /// What covers `first..=last` of `source` before ledger offset
    /// `before`, once no open intent is left among them: each open one is
    /// resolved ([`Self::resolve`]) and the index looked at again. `None`:
    /// free to process; `Some(o)`: the committed intent at ledger offset
    /// `o` produced one of them. `me` is the caller's transactional id.
    pub(crate) async fn settle(
        &self,
        source: SourcePartition,
        first: i64,
        last: i64,
        before: i64,
        me: &str,
    ) -> Result<Option<i64>, RuntimeError> {
        let p = self.partition_of(source);
        loop {
            match self.look(source, first, last, before) {
                Look::Free => return Ok(None),
                Look::Committed(o) => return Ok(Some(o)),
                Look::Open {
                    offset,
                    transactional_id,
                    ..
                } => self.resolve(p, offset, &transactional_id, me).await?,
            }
        }
    }

    /// Resolves the open intent at `offset` of ledger partition `p`
    /// written by `transactional_id`: waits up to
    /// `exactly.once.ledger.fence.wait.ms` for its marker, else announces
    /// and fences (InitProducerId on that transactional id, which ends its
    /// transaction), then waits for the marker. `fencer` is the caller's
    /// transactional id.
    pub(crate) async fn resolve(
        &self,
        p: i32,
        offset: i64,
        transactional_id: &str,
        fencer: &str,
    ) -> Result<(), RuntimeError> {
        if transactional_id == fencer {
            // Our own earlier transaction: it ended before this one began
            // (commit or abort returned), so its marker is on its way;
            // fencing would fence ourselves.
            return if self
                .wait_ended(p, offset, self.config.request_timeout)
                .await?
            {
                Ok(())
            } else {
                Err(startup(
                    "waiting for this worker's own earlier intent",
                    format!("{}-{p}@{offset} is still open", self.topic),
                ))
            };
        }
        if self
            .wait_ended(p, offset, self.config.ledger_fence_wait())
            .await?
        {
            self.metrics
                .ledger
                .fence_waits
                .fetch_add(1, Ordering::Relaxed);
            return Ok(());
        }
        tracing::info!(
            ledger_partition = p,
            intent_offset = offset,
            transactional_id,
            fence_wait_ms = self.config.ledger_fence_wait().as_millis() as u64,
            "an open intent covers records this worker holds; fencing its writer"
        );
        self.announce_fence(fencer, transactional_id).await?;
        self.fence(transactional_id).await?;
        self.metrics.ledger.fences.fetch_add(1, Ordering::Relaxed);
        // InitProducerId answers once the markers are written; the end
        // offset read now is past them.
        let ends = self
            .end_offsets(&BTreeSet::from([p]))
            .await
            .map_err(|e| startup("ListOffsets on the ledger", e))?;
        if let Some(e) = ends.get(&p) {
            self.catch_up(p, *e, self.config.request_timeout).await?;
        }
        Ok(())
    }

    /// Waits up to `wait` for the intent at `offset` of partition `p` to
    /// end; whether it did.
    async fn wait_ended(&self, p: i32, offset: i64, wait: Duration) -> Result<bool, RuntimeError> {
        let slot = &self.slots[p as usize];
        let mut rx = slot.position.subscribe();
        let deadline = Instant::now() + wait;
        loop {
            if slot.index.lock().status(offset) != Some(IntentStatus::Open) {
                return Ok(true);
            }
            self.check_failed()?;
            match tokio::time::timeout_at(deadline, rx.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => return Err(RuntimeError::Startup("the ledger index stopped".into())),
                Err(_) => return Ok(false),
            }
        }
    }

    /// Writes a fence notice for `target` (so that its worker does not take
    /// the fence for a second process with its identity).
    async fn announce_fence(&self, fencer: &str, target: &str) -> Result<(), RuntimeError> {
        let value = encode(&LedgerRecord::Fence {
            fencer: fencer.to_string(),
            target: target.to_string(),
        });
        let record = ProducerRecord {
            topic: self.topic.clone(),
            partition: Some(notice_partition(target, self.partitions)),
            key: Some(ledger_key((uuid::Uuid::nil(), -1))),
            value: Some(value),
            headers: Vec::new(),
            timestamp: None,
        };
        self.notices
            .send(record)
            .await
            .await
            .map(|_| ())
            .map_err(|e| startup("writing a fence notice", e))
    }

    /// InitProducerId on `transactional_id`: its coordinator ends its open
    /// transaction (abort) and bumps its epoch; returns once that is done.
    async fn fence(&self, transactional_id: &str) -> Result<(), RuntimeError> {
        let pc = ProducerConfig::builder()
            .bootstrap_servers(self.config.bootstrap_servers.join(","))
            .client_id(format!("{}-ledger-fence", self.config.application_id))
            .transactional_id(transactional_id)
            .transaction_timeout(self.config.transaction_timeout)
            .request_timeout(self.config.request_timeout)
            .security(self.connection.security.clone())
            .build()
            .map_err(|e| startup("fencing producer settings", e))?;
        let producer = Producer::new(pc)
            .await
            .map_err(|e| startup("fencing producer", e))?;
        let r = producer.init_transactions().await;
        producer.close().await;
        r.map_err(|e| startup(&format!("fencing {transactional_id:?}"), e))
    }

    /// Whether a peer announced fencing `transactional_id` (consumes the
    /// notice). Reads the notice partition up to its end first.
    pub(crate) async fn fenced_by_peer(&self, transactional_id: &str) -> bool {
        let p = notice_partition(transactional_id, self.partitions);
        if let Ok(ends) = self.end_offsets(&BTreeSet::from([p])).await
            && let Some(e) = ends.get(&p)
            && self
                .catch_up(p, *e, self.config.request_timeout)
                .await
                .is_ok()
        {
            return self.slots[p as usize]
                .index
                .lock()
                .take_notice(transactional_id, 0);
        }
        false
    }
}

/// A leader broker and the ledger partitions to ask it for, each from its
/// index position.
type TailFetch = (Arc<BrokerConnection>, Vec<(i32, i64)>);

/// Tails every ledger partition into its index until shutdown: one
/// long-polling Fetch per leader broker, naming every partition that
/// broker leads (D51). A transaction's intents and markers land on
/// several ledger partitions at once, and one answer carries them all;
/// a Fetch per partition woke once per partition. A broker's Fetch is
/// sent again as soon as it is answered, whatever the others do.
async fn tail(ledger: Arc<Ledger>, metadata: Arc<Metadata>, mut shutdown: watch::Receiver<bool>) {
    let topic = ledger.topic.clone();
    let mut in_flight = FuturesUnordered::new();
    // Partitions named by a Fetch in flight, and the brokers it went to.
    let mut busy: BTreeSet<i32> = BTreeSet::new();
    let mut busy_leaders: BTreeSet<i32> = BTreeSet::new();
    // Partitions whose last fetch failed wait until then.
    let mut resume: BTreeMap<i32, Instant> = BTreeMap::new();
    loop {
        if *shutdown.borrow() {
            return;
        }
        let now = Instant::now();
        resume.retain(|_, at| *at > now);
        let mut by_leader: BTreeMap<i32, TailFetch> = BTreeMap::new();
        let mut leaderless = Vec::new();
        for p in 0..ledger.partitions {
            if busy.contains(&p) || resume.contains_key(&p) {
                continue;
            }
            let Some(leader) = metadata.leader(&topic, p) else {
                leaderless.push(p);
                continue;
            };
            if busy_leaders.contains(&leader.node_id()) {
                // Named in the next Fetch to that broker.
                continue;
            }
            let position = ledger.slots[p as usize].index.lock().position();
            by_leader
                .entry(leader.node_id())
                .or_insert_with(|| (leader.clone(), Vec::new()))
                .1
                .push((p, position));
        }
        if !leaderless.is_empty() {
            let topics = [topic.as_str()];
            let refreshed = tokio::select! {
                r = metadata.refresh(&topics) => r,
                _ = shutdown.changed() => return,
            };
            let known = refreshed.is_ok()
                && leaderless
                    .iter()
                    .all(|&p| metadata.leader(&topic, p).is_some());
            if !known {
                for p in leaderless {
                    tracing::debug!(topic = %topic, partition = p, "no leader for a ledger partition; retrying");
                    *ledger.slots[p as usize].answered.lock() = None;
                    resume.insert(p, now + TAIL_BACKOFF);
                }
            }
            continue;
        }
        for (node, (leader, parts)) in by_leader {
            busy_leaders.insert(node);
            busy.extend(parts.iter().map(|&(p, _)| p));
            let topic = topic.clone();
            in_flight.push(async move {
                let r = fetch(&leader, &topic, &parts).await;
                (node, parts, r)
            });
        }
        let next_resume = resume.values().min().copied();
        let (node, parts, fetched) = tokio::select! {
            Some(done) = in_flight.next(), if !in_flight.is_empty() => done,
            _ = tokio::time::sleep_until(next_resume.unwrap_or(now)), if next_resume.is_some() => continue,
            _ = shutdown.changed() => return,
        };
        busy_leaders.remove(&node);
        for &(p, _) in &parts {
            busy.remove(&p);
        }
        // Each named partition's answer; a failed request (connection,
        // timeout) fails every partition it named, and one the broker left
        // out fails alone. A failed partition is stale at once (the check
        // then reads the end offsets, which fail the same way, and holds).
        let mut fetched = fetched.inspect_err(|e| {
            tracing::debug!(topic = %topic, broker = node, error = %e, "ledger fetch failed; retrying");
        });
        let answers: Vec<(i32, i64, Result<Fetched, ClientError>)> = parts
            .iter()
            .map(|&(p, position)| {
                let answer = match &mut fetched {
                    Ok(answers) => answers.remove(&p).unwrap_or_else(|| {
                        Err(ClientError::Poisoned(format!(
                            "the Fetch answer left out {topic}-{p}"
                        )))
                    }),
                    Err(e) => Err(e.clone()),
                };
                (p, position, answer)
            })
            .collect();
        // An answered partition is fresh from now on, even before its
        // answer is applied (the index is then read as it stands).
        let answered = Instant::now();
        for (p, _, answer) in &answers {
            *ledger.slots[*p as usize].answered.lock() = answer.is_ok().then_some(answered);
        }
        failpoints::pause("runtime.ledger.tail_apply").await;
        let mut refresh = false;
        for (p, position, answer) in answers {
            let slot = &ledger.slots[p as usize];
            match answer {
                Ok(Fetched::Data {
                    batches,
                    high_watermark,
                }) => {
                    if !ledger.apply_fetched(p, position, &batches, high_watermark) {
                        return;
                    }
                }
                Ok(Fetched::OutOfRange) => {
                    // The log start moved past the index (a trim): Kafka
                    // does not say where it is in the Fetch answer,
                    // ListOffsets does.
                    let asked = [(topic.clone(), p)];
                    let start = match ledger.admin.list_start_offsets(&asked).await {
                        Ok(mut m) => m.remove(&asked[0]).and_then(|r| r.ok()),
                        Err(_) => None,
                    };
                    match start {
                        Some(start) if start > position => {
                            tracing::info!(
                                topic = %topic,
                                partition = p,
                                position,
                                log_start = start,
                                "the ledger's log start moved past the index (trimmed); reading on from it"
                            );
                            slot.index.lock().prune(start);
                            slot.position.send_replace(start);
                        }
                        other => {
                            tracing::debug!(topic = %topic, partition = p, position, log_start = ?other, "ledger fetch out of range; retrying");
                            refresh = true;
                            resume.insert(p, Instant::now() + TAIL_BACKOFF);
                        }
                    }
                }
                Err(e) => {
                    tracing::debug!(topic = %topic, partition = p, error = %e, "ledger fetch failed; retrying");
                    refresh = true;
                    resume.insert(p, Instant::now() + TAIL_BACKOFF);
                }
            }
        }
        if refresh {
            metadata.invalidate(&topic);
            let _ = metadata.refresh(&[topic.as_str()]).await;
        }
    }
}

impl Ledger {
    /// Applies one fetched answer of ledger partition `p` (asked from
    /// `position`) to its index. `false` when the ledger cannot be read
    /// (a foreign record, a changed partition count): the index stops and
    /// the workers with it.
    fn apply_fetched(
        &self,
        p: i32,
        position: i64,
        batches: &[RecordBatchView],
        high_watermark: i64,
    ) -> bool {
        let slot = &self.slots[p as usize];
        let mut ix = slot.index.lock();
        for b in batches {
            if let Err(e) = ix.apply(b, self.partitions) {
                tracing::error!(topic = %self.topic, partition = p, error = %e, "the exactly-once ledger cannot be read; workers stop");
                *self.failed.lock() = Some(e.to_string());
                drop(ix);
                slot.position.send_modify(|_| {});
                return false;
            }
        }
        let pos = ix.position().max(position);
        slot.entries.store(ix.len() as i64, Ordering::Relaxed);
        drop(ix);
        slot.lag
            .store((high_watermark - pos).max(0), Ordering::Relaxed);
        slot.position.send_replace(pos);
        let m = &self.metrics.ledger;
        m.index_entries.store(self.entries(), Ordering::Relaxed);
        m.index_lag.store(
            self.slots
                .iter()
                .map(|s| s.lag.load(Ordering::Relaxed))
                .sum(),
            Ordering::Relaxed,
        );
        true
    }
}

/// Trims the ledger every `every` until shutdown (docs/EXACTLY-ONCE.md,
/// "Trimming the ledger"). Each round reads the share group's start
/// offsets on the source, computes each ledger partition's trim point from
/// the index, and deletes up to the points seen at least
/// [`RuntimeConfig::ledger_trim_grace`] ago. Every process of the
/// application trims; each one's decision is safe on its own, and
/// DeleteRecords below the log start changes nothing.
async fn trim(ledger: Arc<Ledger>, every: Duration, mut shutdown: watch::Receiver<bool>) {
    let clock = Instant::now();
    let mut schedules: Vec<TrimSchedule> = (0..ledger.partitions)
        .map(|_| TrimSchedule::default())
        .collect();
    let mut tick = tokio::time::interval_at(Instant::now() + every, every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shutdown.changed() => return,
        }
        if *shutdown.borrow() {
            return;
        }
        if let Err(e) = ledger.trim_round(&mut schedules, clock).await {
            tracing::debug!(topic = %ledger.topic, error = %e, "ledger trim round failed; trying again next round");
        }
    }
}

impl Ledger {
    async fn trim_round(
        &self,
        schedules: &mut [TrimSchedule],
        clock: Instant,
    ) -> Result<(), ClientError> {
        // The start offsets first: the records below them were terminal
        // when they were read, so a point computed with them was true then.
        let spso: BTreeMap<(String, i32), i64> = self
            .source_admin
            .describe_share_group_offsets(&self.group, None)
            .await?
            .into_iter()
            .filter_map(|(k, r)| r.ok().filter(|&o| o >= 0).map(|o| (k, o)))
            .collect();
        let now_ms = clock.elapsed().as_millis() as u64;
        let grace_ms = self.config.ledger_trim_grace().as_millis() as u64;
        let mut delete = Vec::new();
        for (p, (slot, schedule)) in self.slots.iter().zip(schedules.iter_mut()).enumerate() {
            let point = slot.index.lock().trim_point(|group, topic, partition| {
                (group == self.group)
                    .then(|| spso.get(&(topic.to_string(), partition)).copied())
                    .flatten()
            });
            schedule.observe(now_ms, point);
            if let Some(k) = schedule.due(now_ms, grace_ms)
                && k > slot.trimmed.load(Ordering::Relaxed)
            {
                delete.push((self.topic.clone(), p as i32, k));
            }
        }
        if delete.is_empty() {
            return Ok(());
        }
        for ((_, p), r) in self.admin.delete_records(&delete).await? {
            let slot = &self.slots[p as usize];
            match r {
                Ok(start) => {
                    let before = slot.trimmed.swap(start, Ordering::Relaxed);
                    {
                        let mut ix = slot.index.lock();
                        ix.prune(start);
                        slot.entries.store(ix.len() as i64, Ordering::Relaxed);
                    }
                    if start > before {
                        let m = &self.metrics.ledger;
                        m.trims.fetch_add(1, Ordering::Relaxed);
                        m.log_start.fetch_add(start - before, Ordering::Relaxed);
                        tracing::info!(topic = %self.topic, partition = p, log_start = start, "trimmed the exactly-once ledger");
                    }
                }
                Err(e) => {
                    tracing::warn!(topic = %self.topic, partition = p, error = %e, "cannot trim the exactly-once ledger (DeleteRecords); it keeps growing until this is fixed")
                }
            }
        }
        self.metrics
            .ledger
            .index_entries
            .store(self.entries(), Ordering::Relaxed);
        Ok(())
    }
}

enum Fetched {
    Data {
        batches: Vec<RecordBatchView>,
        high_watermark: i64,
    },
    /// The offset is below the log start (or above the end).
    OutOfRange,
}

/// One read_uncommitted Fetch of the ledger partitions `parts` (each
/// from its offset) from their leader, control batches kept: the answer
/// of each partition the broker answered for.
async fn fetch(
    leader: &BrokerConnection,
    topic: &str,
    parts: &[(i32, i64)],
) -> Result<BTreeMap<i32, Result<Fetched, ClientError>>, ClientError> {
    let req = FetchRequest::default()
        .with_max_wait_ms(TAIL_MAX_WAIT_MS)
        .with_min_bytes(1)
        .with_max_bytes(16 << 20)
        .with_isolation_level(0)
        .with_session_epoch(-1)
        .with_topics(vec![
            FetchTopic::default()
                .with_topic(TopicName(StrBytes::from_string(topic.to_string())))
                .with_partitions(
                    parts
                        .iter()
                        .map(|&(p, offset)| {
                            FetchPartition::default()
                                .with_partition(p)
                                .with_fetch_offset(offset)
                                .with_partition_max_bytes(8 << 20)
                        })
                        .collect(),
                ),
        ]);
    let resp = leader
        .connection()
        .await?
        .send_with_version(&req, 12)
        .await?;
    ClientError::check("Fetch", resp.error_code, None)?;
    let mut out = BTreeMap::new();
    for part in resp.responses.into_iter().flat_map(|t| t.partitions) {
        let answer = if part.error_code == ErrorCode::OFFSET_OUT_OF_RANGE.0 {
            Ok(Fetched::OutOfRange)
        } else {
            ClientError::check("Fetch", part.error_code, None).and_then(|()| {
                RecordBatchView::parse_all(part.records.unwrap_or_default())
                    .map(|batches| Fetched::Data {
                        batches,
                        high_watermark: part.high_watermark,
                    })
                    .map_err(|e| ClientError::Poisoned(format!("bad fetch data: {e}")))
            })
        };
        out.entry(part.partition_index).or_insert(answer);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsafe_ledger_topic_configs_are_refused_by_name() {
        let ok: BTreeMap<String, Option<String>> = ledger_topic_configs(3)
            .into_iter()
            .map(|(k, v)| (k, Some(v)))
            .collect();
        assert!(check_ledger_topic_configs("l", &ok).is_ok());
        for (k, v) in [
            ("cleanup.policy", "compact,delete"),
            ("retention.ms", "604800000"),
            ("retention.bytes", "1000"),
            ("unclean.leader.election.enable", "true"),
        ] {
            let mut c = ok.clone();
            c.insert(k.into(), Some(v.into()));
            let e = check_ledger_topic_configs("l", &c).unwrap_err().to_string();
            assert!(e.contains(&format!("{k}={v}")), "{e}");
            assert!(e.contains("exactly.once.ledger.topic"), "{e}");
        }
        assert!(!ledger_topic_configs(1).contains_key("min.insync.replicas"));
    }
}
