//! The transaction coordinator (KIP-98, KIP-890 transaction version 2) as an
//! I/O-free state machine.
//!
//! # Design
//!
//! [`TransactionCoordinator`] is a plain struct. The broker calls it with the
//! current time (`now_ms`) for each request (InitProducerId,
//! AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, the share-acknowledgement
//! staging of KIP-1289) and from a timer ([`TransactionCoordinator::tick`]),
//! and carries out the [`TxnEffect`]s it gets back, in order:
//!
//! - [`TxnEffect::Persist`]: append a [`TxnLogRecord`] to the coordinator's
//!   durable log before answering (the role of `__transaction_state`);
//!   [`TransactionCoordinator::recover`] replays them after a restart.
//! - [`TxnEffect::WriteMarkers`]: write a commit or abort marker to every
//!   participant and report each result with
//!   [`TransactionCoordinator::marker_written`]. Markers not acknowledged are
//!   sent again by `tick` after `marker_retry_backoff_ms`, for ever (corner
//!   case 13); a transaction moves to `CompleteCommit`/`CompleteAbort` only
//!   once all participants acknowledged.
//! - [`TxnEffect::TransactionCompleted`]: wake waiters.
//!
//! A participant is a log partition ([`Participant::Log`]: the marker becomes
//! a control batch; the partition log keeps the LSO and the aborted
//! transaction index) or a share partition ([`Participant::Share`], D3: the
//! marker is delivered to the leader of the source partition, which resolves
//! the TX_PENDING records of that share partition and writes nothing to the
//! log). Both go through the same marker path.
//!
//! # States
//!
//! `Empty -> Ongoing -> PrepareCommit|PrepareAbort -> CompleteCommit|CompleteAbort`,
//! `Ongoing -> PrepareEpochFence -> PrepareAbort` when InitProducerId fences an
//! open transaction, and (TV2) `Empty|Complete* -> PrepareAbort` for an abort
//! with nothing registered. [`TxnState::valid_previous_states`] is the table;
//! every transition is checked against it.
//!
//! # Protocol versions
//!
//! The version is chosen per request, as Kafka does: AddPartitionsToTxn v0-3
//! and EndTxn v0-4 run as TV1; AddPartitionsToTxn v4+ (the broker path of
//! Produce v12+ implicit registration) and EndTxn v5+ as TV2. With TV2 every
//! EndTxn bumps the epoch, markers carry the bumped epoch, the answer carries
//! the new producer id/epoch (a new id at epoch 0 when the epoch is
//! exhausted; `i16::MAX` is reserved for markers), and a retried EndTxn that
//! already took effect is answered with success again. Error codes are
//! translated per request version by [`error_for_version`].
//!
//! # Where we differ from Kafka
//!
//! - Fencing and timeout aborts bump the epoch once, also with TV2 (Kafka
//!   bumps twice with TV2). The marker epoch is then always the staged epoch
//!   or the staged epoch + 1, which is the rule share partitions resolve
//!   staged acknowledgements with (D4). The fenced producer still gets
//!   PRODUCER_FENCED, and the new producer still gets an epoch above the
//!   marker's.
//! - Transitions are applied at once and the broker persists before
//!   answering, instead of Kafka's pending-state bookkeeping around an
//!   asynchronous append; a failed append means recovering from the log.
//! - Transactional ids never expire (no `Dead` state).

mod coordinator;
mod state;

pub use coordinator::*;
pub use state::*;

#[cfg(test)]
mod tests;
