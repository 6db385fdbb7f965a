//! The transaction coordinator state machine (see the module docs of
//! [`crate::txn`]).

use super::state::*;
use sharestream_protocol::ErrorCode;
use std::collections::{BTreeMap, BTreeSet};

/// Largest `transaction.timeout.ms` accepted (Kafka's
/// `transaction.max.timeout.ms` default, 15 minutes).
pub const DEFAULT_MAX_TRANSACTION_TIMEOUT_MS: i32 = 900_000;

/// Name of the consumer-offsets topic, registered by AddOffsetsToTxn.
pub const CONSUMER_OFFSETS_TOPIC: &str = "__consumer_offsets";

/// Coordinator settings.
#[derive(Clone, Debug)]
pub struct TxnCoordinatorConfig {
    /// `transaction.max.timeout.ms`: larger producer timeouts are refused
    /// with INVALID_TRANSACTION_TIMEOUT.
    pub max_transaction_timeout_ms: i32,
    /// Delay before a marker that was not acknowledged is sent again.
    pub marker_retry_backoff_ms: i64,
    /// Producer ids reserved (and persisted) per block.
    pub producer_id_block_size: i64,
    /// Transaction version used when the coordinator itself aborts a
    /// transaction (timeout, fencing): the finalized `transaction.version`.
    pub server_transaction_version: TransactionVersion,
    /// Partition count of `__consumer_offsets` (to pick the partition a
    /// group's offsets live in, as Kafka does).
    pub offsets_topic_partitions: i32,
}

impl Default for TxnCoordinatorConfig {
    fn default() -> Self {
        TxnCoordinatorConfig {
            max_transaction_timeout_ms: DEFAULT_MAX_TRANSACTION_TIMEOUT_MS,
            marker_retry_backoff_ms: 1_000,
            producer_id_block_size: 1_000,
            server_transaction_version: TransactionVersion::V2,
            offsets_topic_partitions: 50,
        }
    }
}

/// Something the broker must do after a coordinator call, in order.
///
/// Contract: `Persist` records must be durable before the response of the
/// call is sent and before any later effect of the same call is acted on
/// (Kafka answers only after its `__transaction_state` append). If an append
/// fails, the broker must drop this coordinator and [`recover`] a new one
/// from the log.
///
/// [`recover`]: TransactionCoordinator::recover
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TxnEffect {
    /// Append this record to the coordinator's durable log.
    Persist(TxnLogRecord),
    /// Write a commit/abort marker to each participant: a control batch for
    /// log participants, a share-partition resolution for share participants
    /// (D3). Report each result with
    /// [`TransactionCoordinator::marker_written`].
    WriteMarkers(MarkerRequest),
    /// The transaction finished: every participant acknowledged its marker.
    /// Wakes whoever waits on this transactional id.
    TransactionCompleted {
        /// Transactional id.
        transactional_id: String,
        /// Producer id of the markers.
        producer_id: i64,
        /// Epoch of the markers.
        producer_epoch: i16,
        /// Commit or abort.
        commit: bool,
    },
}

/// One WriteMarkers effect.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MarkerRequest {
    /// Transactional id, to report results with.
    pub transactional_id: String,
    /// Producer id of the transaction.
    pub producer_id: i64,
    /// Epoch the markers are written with (TV2: the bumped epoch).
    pub producer_epoch: i16,
    /// Coordinator epoch (partitions refuse markers of an older coordinator).
    pub coordinator_epoch: i32,
    /// Commit (`true`) or abort marker.
    pub commit: bool,
    /// Participants still waiting for this marker.
    pub participants: Vec<Participant>,
    /// Transaction version (WriteTxnMarkers v2).
    pub transaction_version: TransactionVersion,
    /// An abort the coordinator imposed (a fence by a new holder of the
    /// transactional id, or the transaction timeout), not one the producer
    /// asked for: its holder is a zombie, so share participants release
    /// the staged records to AVAILABLE at once instead of handing them back
    /// to the staging member (docs/DESIGN.md D6, D15).
    pub imposed: bool,
}

/// Result of a coordinator call: the answer for the client and the effects
/// the broker must carry out (even when the answer is an error, e.g. a
/// fencing InitProducerId answers CONCURRENT_TRANSACTIONS and starts an abort).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnOutput<T> {
    /// The answer.
    pub result: Result<T, ErrorCode>,
    /// Effects, in order.
    pub effects: Vec<TxnEffect>,
}

impl<T> TxnOutput<T> {
    fn new(result: Result<T, ErrorCode>, effects: Vec<TxnEffect>) -> Self {
        TxnOutput { result, effects }
    }
}

/// A producer id and epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ProducerIdAndEpoch {
    /// Producer id.
    pub producer_id: i64,
    /// Producer epoch.
    pub producer_epoch: i16,
}

impl ProducerIdAndEpoch {
    /// `-1`/`-1`, as EndTxn below v5 answers.
    pub const NONE: ProducerIdAndEpoch = ProducerIdAndEpoch {
        producer_id: NO_PRODUCER_ID,
        producer_epoch: NO_PRODUCER_EPOCH,
    };
}

/// An InitProducerId request (v0-v5).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InitProducerIdRequest {
    /// Request version (PRODUCER_FENCED is INVALID_PRODUCER_EPOCH below v4).
    pub api_version: i16,
    /// `transactional.id`, `None` for an idempotent producer.
    pub transactional_id: Option<String>,
    /// `transaction.timeout.ms`.
    pub transaction_timeout_ms: i32,
    /// v3+: current producer id when recovering (KIP-360), else `-1`.
    pub producer_id: i64,
    /// v3+: current producer epoch when recovering, else `-1`.
    pub producer_epoch: i16,
}

/// What a marker delivery to one participant produced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MarkerAck {
    /// Written (or already applied: duplicates are no-ops, D10).
    Written,
    /// Not written (leader moved, timeout...): send it again after the backoff.
    Retry,
    /// The partition no longer exists: stop waiting for it (Kafka drops
    /// deleted partitions from the pending set).
    PartitionGone,
}

impl MarkerAck {
    /// Classifies a WriteTxnMarkers partition error: NONE is written, any
    /// other error is retried. (The broker reports
    /// [`MarkerAck::PartitionGone`] itself when it knows the topic was deleted.)
    pub fn from_error(code: ErrorCode) -> Self {
        if code.is_ok() {
            MarkerAck::Written
        } else {
            MarkerAck::Retry
        }
    }
}

/// Outcome of the transaction a staged (producer id, epoch) belongs to (D9).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxnOutcome {
    /// Still open: wait for the marker or the timeout.
    Ongoing,
    /// Committed (or decided to commit; the marker follows).
    Committed,
    /// Aborted (or decided to abort; the marker follows).
    Aborted,
    /// The coordinator knows nothing about it.
    Unknown,
}

/// The Kafka APIs whose error codes depend on the request version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxnApi {
    /// InitProducerId (22).
    InitProducerId,
    /// AddPartitionsToTxn (24).
    AddPartitionsToTxn,
    /// AddOffsetsToTxn (25).
    AddOffsetsToTxn,
    /// EndTxn (26).
    EndTxn,
    /// TxnOffsetCommit (28).
    TxnOffsetCommit,
    /// Produce (0).
    Produce,
}

/// Translates an error into what a client speaking `api` at `version`
/// understands: PRODUCER_FENCED (KIP-588) became INVALID_PRODUCER_EPOCH for
/// InitProducerId < v4 and AddPartitionsToTxn / AddOffsetsToTxn / EndTxn < v2;
/// TRANSACTION_ABORTABLE (KIP-890) becomes INVALID_TXN_STATE for Produce < v11,
/// TxnOffsetCommit < v4, AddPartitionsToTxn < v5, AddOffsetsToTxn < v4,
/// EndTxn < v4 and InitProducerId < v5.
pub fn error_for_version(api: TxnApi, version: i16, code: ErrorCode) -> ErrorCode {
    if code == ErrorCode::PRODUCER_FENCED {
        let min = match api {
            TxnApi::InitProducerId => 4,
            TxnApi::AddPartitionsToTxn | TxnApi::AddOffsetsToTxn | TxnApi::EndTxn => 2,
            TxnApi::TxnOffsetCommit | TxnApi::Produce => 0,
        };
        if version < min {
            return ErrorCode::INVALID_PRODUCER_EPOCH;
        }
    }
    if code == ErrorCode::TRANSACTION_ABORTABLE {
        let min = match api {
            TxnApi::Produce => 11,
            TxnApi::TxnOffsetCommit => 4,
            TxnApi::AddPartitionsToTxn => 5,
            TxnApi::AddOffsetsToTxn | TxnApi::EndTxn => 4,
            TxnApi::InitProducerId => 5,
        };
        if version < min {
            return ErrorCode::INVALID_TXN_STATE;
        }
    }
    code
}

/// Partition of `__consumer_offsets` holding `group_id`'s offsets, computed
/// as Kafka does (Java `String.hashCode`, non-negative, modulo the count).
pub fn offsets_partition_for(group_id: &str, partitions: i32) -> i32 {
    let mut h: i32 = 0;
    for unit in group_id.encode_utf16() {
        h = h.wrapping_mul(31).wrapping_add(unit as i32);
    }
    let abs = if h == i32::MIN { 0 } else { h.abs() };
    abs % partitions.max(1)
}

/// A topic-partition with its error code.
pub type PartitionResult = ((String, i32), ErrorCode);

/// Counters and gauges of the coordinator.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TxnCoordinatorMetrics {
    /// Participants (log and share) of all open transactions
    /// (`Ongoing`, `PrepareCommit`, `PrepareAbort`).
    pub transaction_partitions_count: usize,
    /// Of which share participants.
    pub share_participants_count: usize,
    /// Open transactions (`Ongoing`, `PrepareCommit`, `PrepareAbort`).
    pub ongoing_transactions: usize,
    /// Markers sent and not yet acknowledged (one per participant).
    pub markers_pending: usize,
    /// Transactions completed with a commit.
    pub transactions_committed: u64,
    /// Transactions completed with an abort.
    pub transactions_aborted: u64,
    /// Transactions aborted by `transaction.timeout.ms`.
    pub transactions_timed_out: u64,
    /// Producers fenced by InitProducerId while a transaction was open.
    pub producers_fenced: u64,
    /// Markers sent again after a missing or failed acknowledgement.
    pub marker_retries: u64,
}

#[derive(Clone, Debug)]
struct PendingMarkers {
    producer_id: i64,
    producer_epoch: i16,
    commit: bool,
    transaction_version: TransactionVersion,
    imposed: bool,
    /// Participant -> time after which it is sent again.
    waiting: BTreeMap<Participant, i64>,
}

/// The transaction coordinator of the embedded broker: an I/O-free state
/// machine. Every method takes the current time and returns effects.
#[derive(Debug)]
pub struct TransactionCoordinator {
    config: TxnCoordinatorConfig,
    coordinator_epoch: i32,
    next_producer_id: i64,
    producer_id_block_end: i64,
    txns: BTreeMap<String, TransactionMetadata>,
    pending: BTreeMap<String, PendingMarkers>,
    counters: TxnCoordinatorMetrics,
}

fn kafka_fenced() -> ErrorCode {
    ErrorCode::PRODUCER_FENCED
}

/// Moves `md` to `next`, checking the transition is one Kafka allows.
fn set_state(md: &mut TransactionMetadata, next: TxnState) {
    assert!(
        md.state.can_transition_to(next),
        "illegal transaction state transition {} -> {} for {}",
        md.state.name(),
        next.name(),
        md.transactional_id
    );
    md.state = next;
}

impl TransactionCoordinator {
    /// A coordinator with an empty log (coordinator epoch 0).
    pub fn new(config: TxnCoordinatorConfig) -> Self {
        TransactionCoordinator {
            config,
            coordinator_epoch: 0,
            next_producer_id: 0,
            producer_id_block_end: 0,
            txns: BTreeMap::new(),
            pending: BTreeMap::new(),
            counters: TxnCoordinatorMetrics::default(),
        }
    }

    /// Rebuilds the coordinator from every record it persisted, in order.
    ///
    /// The coordinator epoch is raised by one (and persisted); producer ids
    /// continue after the last reserved block; transactions in
    /// `PrepareCommit`/`PrepareAbort` re-emit their markers to every
    /// participant (duplicates are no-ops, D10); `Ongoing` ones keep their
    /// start time, so their timeout still runs.
    pub fn recover(
        config: TxnCoordinatorConfig,
        records: impl IntoIterator<Item = TxnLogRecord>,
        now_ms: i64,
    ) -> (Self, Vec<TxnEffect>) {
        let mut c = TransactionCoordinator::new(config);
        let mut last_epoch = -1;
        let mut max_seen_id = -1i64;
        for record in records {
            match record {
                TxnLogRecord::ProducerIdBlock { block_end } => {
                    c.producer_id_block_end = c.producer_id_block_end.max(block_end);
                }
                TxnLogRecord::CoordinatorEpoch(e) => last_epoch = last_epoch.max(e),
                TxnLogRecord::Transaction(md) => {
                    max_seen_id = max_seen_id
                        .max(md.producer_id)
                        .max(md.next_producer_id)
                        .max(md.prev_producer_id);
                    c.txns.insert(md.transactional_id.clone(), md);
                }
            }
        }
        // Ids inside the last block may have been handed out: skip the block.
        c.producer_id_block_end = c.producer_id_block_end.max(max_seen_id + 1);
        c.next_producer_id = c.producer_id_block_end;
        c.coordinator_epoch = last_epoch + 1;
        let mut effects = vec![TxnEffect::Persist(TxnLogRecord::CoordinatorEpoch(
            c.coordinator_epoch,
        ))];
        let preparing: Vec<String> = c
            .txns
            .values()
            .filter(|md| md.state.is_prepare())
            .map(|md| md.transactional_id.clone())
            .collect();
        for id in preparing {
            // Whether an abort was imposed is not persisted; after a
            // restart no staging member is alive anyway.
            c.start_markers(&id, false, now_ms, &mut effects);
        }
        (c, effects)
    }

    /// First producer id after the reserved block (for log compaction).
    pub fn producer_id_block_end(&self) -> i64 {
        self.producer_id_block_end
    }

    /// The current coordinator epoch.
    pub fn coordinator_epoch(&self) -> i32 {
        self.coordinator_epoch
    }

    /// Metadata of `transactional_id` (DescribeTransactions).
    pub fn describe(&self, transactional_id: &str) -> Option<&TransactionMetadata> {
        self.txns.get(transactional_id)
    }

    /// Every transactional id known (ListTransactions).
    pub fn transactions(&self) -> impl Iterator<Item = &TransactionMetadata> {
        self.txns.values()
    }

    fn allocate_producer_id(&mut self, effects: &mut Vec<TxnEffect>) -> i64 {
        if self.next_producer_id >= self.producer_id_block_end {
            self.producer_id_block_end =
                self.next_producer_id + self.config.producer_id_block_size.max(1);
            effects.push(TxnEffect::Persist(TxnLogRecord::ProducerIdBlock {
                block_end: self.producer_id_block_end,
            }));
        }
        let id = self.next_producer_id;
        self.next_producer_id += 1;
        id
    }

    fn persist(&self, id: &str, effects: &mut Vec<TxnEffect>) {
        let md = self.txns.get(id).expect("transaction metadata").clone();
        effects.push(TxnEffect::Persist(TxnLogRecord::Transaction(md)));
    }

    // ------------------------------------------------------------------
    // InitProducerId
    // ------------------------------------------------------------------

    /// InitProducerId v0-v5.
    ///
    /// Without a transactional id: a fresh producer id at epoch 0. With one:
    /// a new id at epoch 0 the first time; later, the epoch is bumped (a new
    /// producer id at epoch 0 once the epoch is exhausted); an open
    /// transaction is fenced and aborted with a bumped epoch and the caller
    /// gets CONCURRENT_TRANSACTIONS until the abort completed, as in Kafka.
    /// v3+ `producer_id`/`producer_epoch` give KIP-360 recovery semantics.
    pub fn init_producer_id(
        &mut self,
        now_ms: i64,
        req: &InitProducerIdRequest,
    ) -> TxnOutput<ProducerIdAndEpoch> {
        let mut effects = Vec::new();
        let result = self.init_producer_id_inner(now_ms, req, &mut effects);
        let result =
            result.map_err(|e| error_for_version(TxnApi::InitProducerId, req.api_version, e));
        TxnOutput::new(result, effects)
    }

    fn init_producer_id_inner(
        &mut self,
        now_ms: i64,
        req: &InitProducerIdRequest,
        effects: &mut Vec<TxnEffect>,
    ) -> Result<ProducerIdAndEpoch, ErrorCode> {
        let Some(id) = req.transactional_id.as_deref() else {
            let producer_id = self.allocate_producer_id(effects);
            return Ok(ProducerIdAndEpoch {
                producer_id,
                producer_epoch: 0,
            });
        };
        if id.is_empty() {
            return Err(ErrorCode::INVALID_REQUEST);
        }
        let timeout = req.transaction_timeout_ms;
        if timeout <= 0 || timeout > self.config.max_transaction_timeout_ms {
            return Err(ErrorCode::INVALID_TRANSACTION_TIMEOUT);
        }
        let expected = (req.producer_id != NO_PRODUCER_ID).then_some(ProducerIdAndEpoch {
            producer_id: req.producer_id,
            producer_epoch: req.producer_epoch,
        });
        if !self.txns.contains_key(id) {
            let producer_id = self.allocate_producer_id(effects);
            self.txns.insert(
                id.to_string(),
                TransactionMetadata {
                    transactional_id: id.to_string(),
                    producer_id,
                    prev_producer_id: NO_PRODUCER_ID,
                    next_producer_id: NO_PRODUCER_ID,
                    producer_epoch: NO_PRODUCER_EPOCH,
                    last_producer_epoch: NO_PRODUCER_EPOCH,
                    txn_timeout_ms: timeout,
                    state: TxnState::Empty,
                    participants: BTreeSet::new(),
                    txn_start_ms: -1,
                    txn_last_update_ms: now_ms,
                    transaction_version: self.config.server_transaction_version,
                    last_outcome: None,
                },
            );
        }
        let md = self.txns.get(id).expect("just inserted");
        if let Some(exp) = expected {
            // KIP-360: fence unless the metadata is fresh, the id is current,
            // or it is the previous id with an exhausted epoch (a retry after
            // a rotation whose answer was lost).
            let valid = md.producer_epoch == NO_PRODUCER_EPOCH
                || exp.producer_id == md.producer_id
                || (exp.producer_id == md.prev_producer_id
                    && is_epoch_exhausted(exp.producer_epoch));
            if !valid {
                return Err(kafka_fenced());
            }
        }
        match md.state {
            TxnState::PrepareCommit | TxnState::PrepareAbort | TxnState::PrepareEpochFence => {
                Err(ErrorCode::CONCURRENT_TRANSACTIONS)
            }
            TxnState::Ongoing => {
                self.fence_and_abort(id, now_ms, effects);
                self.counters.producers_fenced += 1;
                Err(ErrorCode::CONCURRENT_TRANSACTIONS)
            }
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort => {
                let exhausted = is_epoch_exhausted(md.producer_epoch);
                let rotate =
                    exhausted && expected.is_none_or(|e| e.producer_epoch == md.producer_epoch);
                let new_id = if rotate {
                    Some(self.allocate_producer_id(effects))
                } else {
                    None
                };
                let md = self.txns.get_mut(id).expect("present");
                if let Some(new_id) = new_id {
                    md.last_producer_epoch = if expected.is_some() {
                        md.producer_epoch
                    } else {
                        NO_PRODUCER_EPOCH
                    };
                    md.prev_producer_id = md.producer_id;
                    md.producer_id = new_id;
                    md.producer_epoch = 0;
                } else {
                    if exhausted {
                        // The expected epoch is not the exhausted one: an
                        // older producer.
                        return Err(kafka_fenced());
                    }
                    let bumped = md.producer_epoch + 1;
                    match expected {
                        None => {
                            md.producer_epoch = bumped;
                            md.last_producer_epoch = NO_PRODUCER_EPOCH;
                        }
                        Some(e)
                            if md.producer_epoch == NO_PRODUCER_EPOCH
                                || e.producer_epoch == md.producer_epoch =>
                        {
                            md.last_producer_epoch = md.producer_epoch;
                            md.producer_epoch = bumped;
                        }
                        Some(e) if e.producer_epoch == md.last_producer_epoch => {
                            // Retry of a successful call: answer the current epoch.
                        }
                        Some(_) => return Err(kafka_fenced()),
                    }
                    md.prev_producer_id = md.producer_id;
                }
                set_state(md, TxnState::Empty);
                md.txn_timeout_ms = timeout;
                md.participants.clear();
                md.txn_start_ms = -1;
                md.txn_last_update_ms = now_ms;
                let answer = ProducerIdAndEpoch {
                    producer_id: md.producer_id,
                    producer_epoch: md.producer_epoch,
                };
                self.persist(id, effects);
                Ok(answer)
            }
        }
    }

    /// Ongoing -> PrepareEpochFence -> PrepareAbort with the epoch bumped
    /// once (used by fencing and by the transaction timeout).
    fn fence_and_abort(&mut self, id: &str, now_ms: i64, effects: &mut Vec<TxnEffect>) {
        let tv = self.config.server_transaction_version;
        let md = self.txns.get_mut(id).expect("present");
        set_state(md, TxnState::PrepareEpochFence);
        // i16::MAX is reserved for exactly this: an epoch above any the
        // producer could hold. One bump only, also with TV2, so that the
        // marker epoch is the staged epoch + 1 (D4).
        md.producer_epoch = md.producer_epoch.saturating_add(1);
        md.last_producer_epoch = NO_PRODUCER_EPOCH;
        md.prev_producer_id = md.producer_id;
        md.next_producer_id = NO_PRODUCER_ID;
        md.transaction_version = tv;
        md.txn_last_update_ms = now_ms;
        set_state(md, TxnState::PrepareAbort);
        self.persist(id, effects);
        self.start_markers(id, true, now_ms, effects);
    }

    // ------------------------------------------------------------------
    // Registration of participants
    // ------------------------------------------------------------------

    /// Checks common to every registration path, as Kafka orders them.
    fn check_producer(
        &self,
        id: &str,
        producer_id: i64,
        producer_epoch: i16,
        unknown: ErrorCode,
    ) -> Result<&TransactionMetadata, ErrorCode> {
        let md = self.txns.get(id).ok_or(unknown)?;
        if md.state.is_prepare()
            && md.next_producer_id != NO_PRODUCER_ID
            && md.next_producer_id == producer_id
        {
            // TV2 overflow: the client already holds the next producer id
            // while the markers of the last transaction are still pending.
            return Err(ErrorCode::CONCURRENT_TRANSACTIONS);
        }
        if md.producer_id != producer_id {
            return Err(ErrorCode::INVALID_PRODUCER_ID_MAPPING);
        }
        if md.producer_epoch != producer_epoch {
            return Err(ErrorCode::PRODUCER_FENCED);
        }
        if md.state.is_prepare() || md.state == TxnState::PrepareEpochFence {
            return Err(ErrorCode::CONCURRENT_TRANSACTIONS);
        }
        Ok(md)
    }

    fn register(
        &mut self,
        id: &str,
        participants: &[Participant],
        tv: TransactionVersion,
        now_ms: i64,
        effects: &mut Vec<TxnEffect>,
    ) {
        let md = self.txns.get_mut(id).expect("checked");
        if md.state == TxnState::Ongoing && participants.iter().all(|p| md.participants.contains(p))
        {
            return;
        }
        if md.state != TxnState::Ongoing {
            md.txn_start_ms = now_ms;
            md.transaction_version = tv;
            md.prev_producer_id = md.producer_id;
        }
        set_state(md, TxnState::Ongoing);
        md.participants.extend(participants.iter().cloned());
        md.txn_last_update_ms = now_ms;
        self.persist(id, effects);
    }

    /// AddPartitionsToTxn. Versions 0-3 are the client path (TV1); v4+ is
    /// the broker path a partition leader takes for Produce v12+ implicit
    /// registration (TV2). For the "verify only" mode use
    /// [`verify_partitions_in_txn`](Self::verify_partitions_in_txn).
    pub fn add_partitions_to_txn(
        &mut self,
        now_ms: i64,
        api_version: i16,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        partitions: &[(String, i32)],
    ) -> TxnOutput<()> {
        let tv = if api_version >= 4 {
            TransactionVersion::V2
        } else {
            TransactionVersion::V1
        };
        let participants: Vec<Participant> = partitions
            .iter()
            .map(|(t, p)| Participant::log(t.clone(), *p))
            .collect();
        let out = self.add_participants(
            now_ms,
            transactional_id,
            producer_id,
            producer_epoch,
            &participants,
            tv,
        );
        TxnOutput::new(
            out.result
                .map_err(|e| error_for_version(TxnApi::AddPartitionsToTxn, api_version, e)),
            out.effects,
        )
    }

    /// AddOffsetsToTxn: registers the `__consumer_offsets` partition of
    /// `group_id` (TxnOffsetCommit writes there; the marker makes the
    /// offsets visible or drops them).
    pub fn add_offsets_to_txn(
        &mut self,
        now_ms: i64,
        api_version: i16,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        group_id: &str,
    ) -> TxnOutput<()> {
        let partition = offsets_partition_for(group_id, self.config.offsets_topic_partitions);
        let participant = Participant::log(CONSUMER_OFFSETS_TOPIC, partition);
        let out = self.add_participants(
            now_ms,
            transactional_id,
            producer_id,
            producer_epoch,
            &[participant],
            TransactionVersion::V1,
        );
        TxnOutput::new(
            out.result
                .map_err(|e| error_for_version(TxnApi::AddOffsetsToTxn, api_version, e)),
            out.effects,
        )
    }

    /// Registers participants (log or share) in the transaction of
    /// `transactional_id`, starting it if none is open. Errors follow
    /// Kafka's AddPartitionsToTxn: INVALID_PRODUCER_ID_MAPPING for an
    /// unknown id or another producer id, PRODUCER_FENCED for another epoch,
    /// CONCURRENT_TRANSACTIONS while markers are pending. (Callers translate
    /// with [`error_for_version`].)
    pub fn add_participants(
        &mut self,
        now_ms: i64,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        participants: &[Participant],
        transaction_version: TransactionVersion,
    ) -> TxnOutput<()> {
        if transactional_id.is_empty() {
            return TxnOutput::new(Err(ErrorCode::INVALID_REQUEST), vec![]);
        }
        let mut effects = Vec::new();
        let result = self
            .check_producer(
                transactional_id,
                producer_id,
                producer_epoch,
                ErrorCode::INVALID_PRODUCER_ID_MAPPING,
            )
            .map(|_| ());
        if result.is_ok() {
            self.register(
                transactional_id,
                participants,
                transaction_version,
                now_ms,
                &mut effects,
            );
        }
        TxnOutput::new(result, effects)
    }

    /// AddPartitionsToTxn v4+ with VerifyOnly (KIP-890 part 1, Produce
    /// below v12): per partition NONE if registered, TRANSACTION_ABORTABLE
    /// otherwise; a top-level error when the producer does not match.
    pub fn verify_partitions_in_txn(
        &self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        partitions: &[(String, i32)],
    ) -> Result<Vec<PartitionResult>, ErrorCode> {
        if transactional_id.is_empty() {
            return Err(ErrorCode::INVALID_REQUEST);
        }
        let md = self.check_producer(
            transactional_id,
            producer_id,
            producer_epoch,
            ErrorCode::INVALID_PRODUCER_ID_MAPPING,
        )?;
        Ok(partitions
            .iter()
            .map(|(t, p)| {
                let registered = md.participants.contains(&Participant::log(t.clone(), *p));
                let code = if registered && md.state == TxnState::Ongoing {
                    ErrorCode::NONE
                } else {
                    ErrorCode::TRANSACTION_ABORTABLE
                };
                ((t.clone(), *p), code)
            })
            .collect())
    }

    /// Validation for the TxnShareAcknowledge handler before it stages
    /// anything (corner cases 2, 3, 14): TRANSACTIONAL_ID_NOT_FOUND for an
    /// unknown id, INVALID_PRODUCER_ID_MAPPING for another producer id,
    /// PRODUCER_FENCED for an older epoch, INVALID_PRODUCER_EPOCH for a
    /// newer one, CONCURRENT_TRANSACTIONS (retriable, as Kafka answers
    /// AddPartitionsToTxn) while the last transaction's markers are pending.
    pub fn verify_txn_for_staging(
        &self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
    ) -> Result<(), ErrorCode> {
        if transactional_id.is_empty() {
            return Err(ErrorCode::INVALID_REQUEST);
        }
        match self.check_producer(
            transactional_id,
            producer_id,
            producer_epoch,
            ErrorCode::TRANSACTIONAL_ID_NOT_FOUND,
        ) {
            Err(ErrorCode::PRODUCER_FENCED) => {
                let current = self.txns[transactional_id].producer_epoch;
                if producer_epoch > current {
                    Err(ErrorCode::INVALID_PRODUCER_EPOCH)
                } else {
                    Err(ErrorCode::PRODUCER_FENCED)
                }
            }
            other => other.map(|_| ()),
        }
    }

    /// Registers share participants for TxnShareAcknowledge (D3, D13), after
    /// the same checks as [`verify_txn_for_staging`](Self::verify_txn_for_staging).
    /// Only [`Participant::Share`] entries are accepted (INVALID_REQUEST
    /// otherwise). A transaction started here runs with TV2 (key 95 needs
    /// `transaction.version >= 2`, D2).
    pub fn add_share_participants(
        &mut self,
        now_ms: i64,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        participants: &[Participant],
    ) -> TxnOutput<()> {
        if participants.iter().any(|p| !p.is_share()) {
            return TxnOutput::new(Err(ErrorCode::INVALID_REQUEST), vec![]);
        }
        if let Err(e) = self.verify_txn_for_staging(transactional_id, producer_id, producer_epoch) {
            return TxnOutput::new(Err(e), vec![]);
        }
        let mut effects = Vec::new();
        self.register(
            transactional_id,
            participants,
            TransactionVersion::V2,
            now_ms,
            &mut effects,
        );
        TxnOutput::new(Ok(()), effects)
    }

    // ------------------------------------------------------------------
    // EndTxn
    // ------------------------------------------------------------------

    /// EndTxn. v0-v4 run as TV1 (no epoch bump, the answer carries -1/-1);
    /// v5+ run as TV2: every commit or abort bumps the epoch (a new producer
    /// id at epoch 0 when the epoch is exhausted) and the answer carries the
    /// new producer id/epoch; a retry of an EndTxn that already completed is
    /// answered again with success.
    pub fn end_txn(
        &mut self,
        now_ms: i64,
        api_version: i16,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
    ) -> TxnOutput<ProducerIdAndEpoch> {
        let mut effects = Vec::new();
        let result = if transactional_id.is_empty() {
            Err(ErrorCode::INVALID_REQUEST)
        } else if api_version >= 5 {
            self.end_txn_v2(
                now_ms,
                transactional_id,
                producer_id,
                producer_epoch,
                commit,
                &mut effects,
            )
        } else {
            self.end_txn_v1(
                now_ms,
                transactional_id,
                producer_id,
                producer_epoch,
                commit,
                &mut effects,
            )
        };
        let result = result.map_err(|e| error_for_version(TxnApi::EndTxn, api_version, e));
        TxnOutput::new(result, effects)
    }

    fn end_txn_v1(
        &mut self,
        now_ms: i64,
        id: &str,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        effects: &mut Vec<TxnEffect>,
    ) -> Result<ProducerIdAndEpoch, ErrorCode> {
        let md = self
            .txns
            .get(id)
            .ok_or(ErrorCode::INVALID_PRODUCER_ID_MAPPING)?;
        if md.producer_id != producer_id {
            return Err(ErrorCode::INVALID_PRODUCER_ID_MAPPING);
        }
        if md.producer_epoch != producer_epoch {
            return Err(kafka_fenced());
        }
        use TxnState::*;
        if md.state == Ongoing && md.participants.iter().any(Participant::is_share) {
            // A transaction with share acknowledgements runs with TV2 (D2):
            // its markers need the epoch bump, without which the next
            // transaction stages at the marker's own epoch and a late copy
            // of the marker could resolve it (D16). Clients that send
            // TxnShareAcknowledge end their transactions with EndTxn v5+.
            return Err(ErrorCode::INVALID_TXN_STATE);
        }
        match (md.state, commit) {
            (Ongoing, _) => {
                self.begin_completion(id, commit, TransactionVersion::V1, now_ms, effects);
                Ok(ProducerIdAndEpoch::NONE)
            }
            (CompleteCommit, true) | (CompleteAbort, false) => Ok(ProducerIdAndEpoch::NONE),
            (PrepareCommit, true) | (PrepareAbort, false) => {
                Err(ErrorCode::CONCURRENT_TRANSACTIONS)
            }
            (PrepareEpochFence, _) => Err(ErrorCode::CONCURRENT_TRANSACTIONS),
            _ => Err(ErrorCode::INVALID_TXN_STATE),
        }
    }

    fn end_txn_v2(
        &mut self,
        now_ms: i64,
        id: &str,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        effects: &mut Vec<TxnEffect>,
    ) -> Result<ProducerIdAndEpoch, ErrorCode> {
        let md = self
            .txns
            .get(id)
            .ok_or(ErrorCode::INVALID_PRODUCER_ID_MAPPING)?;
        let current = ProducerIdAndEpoch {
            producer_id: md.producer_id,
            producer_epoch: md.producer_epoch,
        };
        // A retry after the epoch was bumped by this same EndTxn. (A bump by
        // fencing or timeout leaves the last epoch at -1, so the fenced
        // producer's EndTxn is not taken for a retry: it is PRODUCER_FENCED,
        // as in Kafka.)
        let retry_on_bump = md.producer_epoch as i32 == producer_epoch as i32 + 1
            && md.last_producer_epoch == producer_epoch;
        // ... or after the bump overflowed into a new producer id.
        let retry_on_overflow = md.prev_producer_id == producer_id
            && producer_epoch == i16::MAX - 1
            && md.producer_epoch == 0;
        use TxnState::*;
        let valid_epoch = match md.state {
            Ongoing | Empty | PrepareEpochFence => producer_epoch == md.producer_epoch,
            PrepareCommit | PrepareAbort => retry_on_bump,
            CompleteCommit | CompleteAbort => {
                retry_on_bump || retry_on_overflow || producer_epoch == md.producer_epoch
            }
        };
        let is_retry = retry_on_bump || retry_on_overflow;
        if md.producer_id != producer_id && !retry_on_overflow {
            return Err(ErrorCode::INVALID_PRODUCER_ID_MAPPING);
        }
        if !valid_epoch {
            return Err(kafka_fenced());
        }
        let start = |c: &mut Self,
                     effects: &mut Vec<TxnEffect>,
                     commit: bool|
         -> Result<ProducerIdAndEpoch, ErrorCode> {
            Ok(c.begin_completion(id, commit, TransactionVersion::V2, now_ms, effects))
        };
        match (md.state, commit) {
            (Ongoing, _) => start(self, effects, commit),
            (Empty, false) => start(self, effects, false),
            (CompleteCommit, true) if is_retry => Ok(current),
            (CompleteCommit, false) if !is_retry => start(self, effects, false),
            (CompleteAbort, false) if is_retry => Ok(current),
            (CompleteAbort, false) => start(self, effects, false),
            (PrepareCommit, true) | (PrepareAbort, false) => {
                Err(ErrorCode::CONCURRENT_TRANSACTIONS)
            }
            (PrepareEpochFence, _) => Err(ErrorCode::CONCURRENT_TRANSACTIONS),
            _ => Err(ErrorCode::INVALID_TXN_STATE),
        }
    }

    /// Enters PrepareCommit/PrepareAbort (persisted), then writes markers.
    /// Returns the producer id/epoch the client continues with (TV2).
    fn begin_completion(
        &mut self,
        id: &str,
        commit: bool,
        tv: TransactionVersion,
        now_ms: i64,
        effects: &mut Vec<TxnEffect>,
    ) -> ProducerIdAndEpoch {
        let needs_new_id = {
            let md = &self.txns[id];
            tv.bumps_epoch() && is_epoch_exhausted(md.producer_epoch)
        };
        let next_id = if needs_new_id {
            self.allocate_producer_id(effects)
        } else {
            NO_PRODUCER_ID
        };
        let md = self.txns.get_mut(id).expect("present");
        let was_ongoing = md.state == TxnState::Ongoing;
        set_state(
            md,
            if commit {
                TxnState::PrepareCommit
            } else {
                TxnState::PrepareAbort
            },
        );
        md.prev_producer_id = md.producer_id;
        if tv.bumps_epoch() {
            md.last_producer_epoch = md.producer_epoch;
            md.producer_epoch = md.producer_epoch.saturating_add(1);
        }
        md.next_producer_id = next_id;
        if !was_ongoing {
            // TV2 abort with nothing registered.
            md.txn_start_ms = now_ms;
            md.participants.clear();
        }
        md.transaction_version = tv;
        md.txn_last_update_ms = now_ms;
        let answer = if next_id != NO_PRODUCER_ID {
            ProducerIdAndEpoch {
                producer_id: next_id,
                producer_epoch: 0,
            }
        } else {
            ProducerIdAndEpoch {
                producer_id: md.producer_id,
                producer_epoch: md.producer_epoch,
            }
        };
        self.persist(id, effects);
        self.start_markers(id, false, now_ms, effects);
        if tv.bumps_epoch() {
            answer
        } else {
            ProducerIdAndEpoch::NONE
        }
    }

    /// Sends the markers of a transaction in Prepare*; completes it at once
    /// when it has no participant.
    fn start_markers(
        &mut self,
        id: &str,
        imposed: bool,
        now_ms: i64,
        effects: &mut Vec<TxnEffect>,
    ) {
        let md = &self.txns[id];
        debug_assert!(md.state.is_prepare());
        if md.participants.is_empty() {
            self.complete(id, now_ms, effects);
            return;
        }
        let retry_at = now_ms + self.config.marker_retry_backoff_ms;
        let pending = PendingMarkers {
            producer_id: md.producer_id,
            producer_epoch: md.producer_epoch,
            commit: md.state == TxnState::PrepareCommit,
            transaction_version: md.transaction_version,
            imposed,
            waiting: md
                .participants
                .iter()
                .map(|p| (p.clone(), retry_at))
                .collect(),
        };
        effects.push(TxnEffect::WriteMarkers(MarkerRequest {
            transactional_id: id.to_string(),
            producer_id: pending.producer_id,
            producer_epoch: pending.producer_epoch,
            coordinator_epoch: self.coordinator_epoch,
            commit: pending.commit,
            participants: md.participants.iter().cloned().collect(),
            transaction_version: pending.transaction_version,
            imposed: pending.imposed,
        }));
        self.pending.insert(id.to_string(), pending);
    }

    fn complete(&mut self, id: &str, now_ms: i64, effects: &mut Vec<TxnEffect>) {
        self.pending.remove(id);
        let md = self.txns.get_mut(id).expect("present");
        let commit = md.state == TxnState::PrepareCommit;
        let marker_id = md.producer_id;
        let marker_epoch = md.producer_epoch;
        set_state(
            md,
            if commit {
                TxnState::CompleteCommit
            } else {
                TxnState::CompleteAbort
            },
        );
        md.prev_producer_id = md.producer_id;
        if md.transaction_version.bumps_epoch() && md.next_producer_id != NO_PRODUCER_ID {
            // Epoch overflow: continue with the new producer id. The last
            // epoch stays the one the client saw before (MAX - 1).
            md.producer_id = md.next_producer_id;
            md.producer_epoch = 0;
        }
        md.next_producer_id = NO_PRODUCER_ID;
        md.participants.clear();
        md.txn_last_update_ms = now_ms;
        md.last_outcome = Some(CompletedTxn {
            producer_id: marker_id,
            marker_epoch,
            committed: commit,
        });
        if commit {
            self.counters.transactions_committed += 1;
        } else {
            self.counters.transactions_aborted += 1;
        }
        self.persist(id, effects);
        effects.push(TxnEffect::TransactionCompleted {
            transactional_id: id.to_string(),
            producer_id: marker_id,
            producer_epoch: marker_epoch,
            commit,
        });
    }

    // ------------------------------------------------------------------
    // Markers and time
    // ------------------------------------------------------------------

    /// Reports what writing the marker to one participant produced. Acks
    /// that match no pending marker (duplicates, an older epoch, another
    /// coordinator epoch's retry) are ignored. Once every participant is
    /// acknowledged the transaction completes (persisted).
    pub fn marker_written(
        &mut self,
        now_ms: i64,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        participant: &Participant,
        ack: MarkerAck,
    ) -> Vec<TxnEffect> {
        let mut effects = Vec::new();
        let backoff = self.config.marker_retry_backoff_ms;
        let Some(p) = self.pending.get_mut(transactional_id) else {
            return effects;
        };
        if p.producer_id != producer_id || p.producer_epoch != producer_epoch {
            return effects;
        }
        let Some(retry_at) = p.waiting.get_mut(participant) else {
            return effects;
        };
        match ack {
            MarkerAck::Written | MarkerAck::PartitionGone => {
                p.waiting.remove(participant);
            }
            MarkerAck::Retry => *retry_at = now_ms + backoff,
        }
        if p.waiting.is_empty() {
            self.complete(transactional_id, now_ms, &mut effects);
        }
        effects
    }

    /// Advances time: aborts transactions open longer than their
    /// `transaction.timeout.ms` (epoch bumped, as Kafka fences them) and
    /// sends again the markers not acknowledged within the backoff.
    pub fn tick(&mut self, now_ms: i64) -> Vec<TxnEffect> {
        let mut effects = Vec::new();
        let expired: Vec<String> = self
            .txns
            .values()
            .filter(|md| {
                md.state == TxnState::Ongoing
                    && now_ms > md.txn_start_ms.saturating_add(md.txn_timeout_ms as i64)
            })
            .map(|md| md.transactional_id.clone())
            .collect();
        for id in expired {
            self.counters.transactions_timed_out += 1;
            self.fence_and_abort(&id, now_ms, &mut effects);
        }
        let backoff = self.config.marker_retry_backoff_ms;
        let epoch = self.coordinator_epoch;
        for (id, p) in self.pending.iter_mut() {
            let due: Vec<Participant> = p
                .waiting
                .iter()
                .filter(|(_, at)| **at <= now_ms)
                .map(|(part, _)| part.clone())
                .collect();
            if due.is_empty() {
                continue;
            }
            for part in &due {
                p.waiting.insert(part.clone(), now_ms + backoff);
            }
            self.counters.marker_retries += due.len() as u64;
            effects.push(TxnEffect::WriteMarkers(MarkerRequest {
                transactional_id: id.clone(),
                producer_id: p.producer_id,
                producer_epoch: p.producer_epoch,
                coordinator_epoch: epoch,
                commit: p.commit,
                participants: due,
                transaction_version: p.transaction_version,
                imposed: p.imposed,
            }));
        }
        effects
    }

    /// Earliest time at which [`tick`](Self::tick) has something to do.
    pub fn next_deadline_ms(&self) -> Option<i64> {
        let timeouts = self
            .txns
            .values()
            .filter(|md| md.state == TxnState::Ongoing)
            .map(|md| md.txn_start_ms.saturating_add(md.txn_timeout_ms as i64) + 1);
        let retries = self
            .pending
            .values()
            .flat_map(|p| p.waiting.values().copied());
        timeouts.chain(retries).min()
    }

    // ------------------------------------------------------------------
    // Queries
    // ------------------------------------------------------------------

    /// Outcome of the transaction in which something was staged with
    /// `producer_id`/`producer_epoch` (D9: resolving recovered TX_PENDING
    /// records). A marker epoch is the staged epoch (TV1 EndTxn) or the
    /// staged epoch + 1 (TV2, fencing, timeout), so a staged epoch `e`
    /// belongs to a transaction whose marker epoch is `e` or `e + 1` (D4).
    /// A decided transaction (Prepare*) answers its decision.
    pub fn transaction_outcome(&self, producer_id: i64, producer_epoch: i16) -> TxnOutcome {
        let belongs = |marker_epoch: i16| {
            producer_epoch == marker_epoch || producer_epoch as i32 + 1 == marker_epoch as i32
        };
        for md in self.txns.values() {
            if md.producer_id == producer_id {
                match md.state {
                    TxnState::Ongoing if producer_epoch == md.producer_epoch => {
                        return TxnOutcome::Ongoing;
                    }
                    TxnState::PrepareCommit if belongs(md.producer_epoch) => {
                        return TxnOutcome::Committed;
                    }
                    TxnState::PrepareAbort if belongs(md.producer_epoch) => {
                        return TxnOutcome::Aborted;
                    }
                    _ => {}
                }
            }
            if let Some(last) = md.last_outcome
                && last.producer_id == producer_id
                && belongs(last.marker_epoch)
            {
                return if last.committed {
                    TxnOutcome::Committed
                } else {
                    TxnOutcome::Aborted
                };
            }
        }
        TxnOutcome::Unknown
    }

    /// Current metrics.
    pub fn metrics(&self) -> TxnCoordinatorMetrics {
        let mut m = self.counters;
        m.transaction_partitions_count = 0;
        m.share_participants_count = 0;
        m.ongoing_transactions = 0;
        for md in self.txns.values() {
            if md.state == TxnState::Ongoing || md.state.is_prepare() {
                m.ongoing_transactions += 1;
                m.transaction_partitions_count += md.participants.len();
                m.share_participants_count +=
                    md.participants.iter().filter(|p| p.is_share()).count();
            }
        }
        m.markers_pending = self.pending.values().map(|p| p.waiting.len()).sum();
        m
    }
}
