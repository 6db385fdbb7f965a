//! The transaction state machine of a transactional producer, and the one
//! table that says which failures are fatal and which only abort the
//! transaction.
//!
//! ```text
//! Uninitialized --init_transactions--> Ready --begin--> InTransaction
//! InTransaction --commit--> Committing --EndTxn ok--> Ready
//! InTransaction --abort--> Aborting --EndTxn ok--> Ready
//! any --abortable error--> AbortableError --abort--> Aborting
//! any --fatal error--> FatalError (only close remains)
//! ```
//!
//! [`TransactionManager`] does no I/O; the producer drives it and performs
//! the requests. Errors of background work (produce responses, staged share
//! acknowledgements) are recorded with [`TransactionManager::record_error`]
//! and surface at the next commit, as the KIP's javadoc asks: staging
//! returns after enqueueing, its errors surface at commit.
//!
//! Fatal, as in the KIP: PRODUCER_FENCED (and INVALID_PRODUCER_EPOCH, its
//! older spelling), UNSUPPORTED_VERSION and the authorization failures
//! (transactional id, group, topic, cluster). Everything else is abortable.

use crate::protocol::ErrorCode;

use super::ProducerError;

/// Where a transactional producer is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxnState {
    /// `init_transactions` not called yet.
    Uninitialized,
    /// Initialized, no transaction open.
    Ready,
    /// Between `begin_transaction` and commit/abort.
    InTransaction,
    /// EndTxn(commit) under way.
    Committing,
    /// EndTxn(abort) under way.
    Aborting,
    /// The transaction failed; only `abort_transaction` is allowed.
    AbortableError,
    /// The producer can no longer be used.
    FatalError,
}

/// Whether a broker error code is fatal to a transactional producer.
pub fn is_fatal_code(code: ErrorCode) -> bool {
    matches!(
        code,
        ErrorCode::PRODUCER_FENCED
            | ErrorCode::INVALID_PRODUCER_EPOCH
            | ErrorCode::TRANSACTION_COORDINATOR_FENCED
            | ErrorCode::UNSUPPORTED_VERSION
            | ErrorCode::UNSUPPORTED_FOR_MESSAGE_FORMAT
            | ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            | ErrorCode::GROUP_AUTHORIZATION_FAILED
            | ErrorCode::TOPIC_AUTHORIZATION_FAILED
            | ErrorCode::CLUSTER_AUTHORIZATION_FAILED
    )
}

/// The transaction state and producer identity of one producer.
#[derive(Debug)]
pub struct TransactionManager {
    transactional_id: Option<String>,
    state: TxnState,
    producer_id: i64,
    producer_epoch: i16,
    /// Something was produced or staged in the current transaction.
    has_work: bool,
    error: Option<ProducerError>,
}

impl TransactionManager {
    /// A manager for a producer with this `transactional.id` (or none).
    pub fn new(transactional_id: Option<String>) -> Self {
        Self {
            transactional_id,
            state: TxnState::Uninitialized,
            producer_id: -1,
            producer_epoch: -1,
            has_work: false,
            error: None,
        }
    }

    /// The `transactional.id`.
    pub fn transactional_id(&self) -> Option<&str> {
        self.transactional_id.as_deref()
    }

    /// The current state.
    pub fn state(&self) -> TxnState {
        self.state
    }

    /// Producer id and epoch in use (-1 before initialization).
    pub fn producer_id_and_epoch(&self) -> (i64, i16) {
        (self.producer_id, self.producer_epoch)
    }

    fn txn_required(&self, what: &str) -> Result<(), ProducerError> {
        if self.transactional_id.is_none() {
            return Err(ProducerError::InvalidTxnState(format!(
                "{what} needs a transactional.id"
            )));
        }
        if let Some(e) = &self.error
            && self.state == TxnState::FatalError
        {
            return Err(e.clone());
        }
        Ok(())
    }

    /// May `init_transactions` start?
    pub fn begin_init(&mut self) -> Result<(), ProducerError> {
        self.txn_required("init_transactions")?;
        match self.state {
            TxnState::Uninitialized => Ok(()),
            s => Err(ProducerError::InvalidTxnState(format!(
                "init_transactions called in state {s:?}"
            ))),
        }
    }

    /// InitProducerId (or EndTxn v5) gave this identity; the producer is
    /// ready for a transaction (or, without a transactional id, for
    /// idempotent sends).
    pub fn set_producer(&mut self, producer_id: i64, producer_epoch: i16) {
        self.producer_id = producer_id;
        self.producer_epoch = producer_epoch;
        self.state = TxnState::Ready;
        self.has_work = false;
        self.error = None;
    }

    /// `begin_transaction`.
    pub fn begin(&mut self) -> Result<(), ProducerError> {
        self.txn_required("begin_transaction")?;
        match self.state {
            TxnState::Ready => {
                self.state = TxnState::InTransaction;
                self.has_work = false;
                Ok(())
            }
            s => Err(ProducerError::InvalidTxnState(format!(
                "begin_transaction called in state {s:?}"
            ))),
        }
    }

    /// May records be sent (or acknowledgements staged) now? Marks the
    /// transaction as having work.
    pub fn check_send(&mut self) -> Result<(), ProducerError> {
        if self.transactional_id.is_none() {
            return Ok(());
        }
        match self.state {
            TxnState::InTransaction => {
                self.has_work = true;
                Ok(())
            }
            TxnState::AbortableError | TxnState::FatalError => Err(self
                .error
                .clone()
                .unwrap_or_else(|| ProducerError::InvalidTxnState("transaction failed".into()))),
            s => Err(ProducerError::InvalidTxnState(format!(
                "cannot send in state {s:?}: call begin_transaction first"
            ))),
        }
    }

    /// A failure of background work in the current transaction: fatal ones
    /// make the producer unusable, others make the transaction abortable.
    /// The first error is kept.
    pub fn record_error(&mut self, err: ProducerError) {
        if self.state == TxnState::FatalError {
            return;
        }
        if err.is_fatal() {
            self.state = TxnState::FatalError;
            self.error = Some(err);
        } else if self.transactional_id.is_some()
            && matches!(self.state, TxnState::InTransaction | TxnState::Committing)
        {
            self.state = TxnState::AbortableError;
            if self.error.is_none() {
                self.error = Some(ProducerError::Abortable(Box::new(err)));
            }
        }
    }

    /// `commit_transaction` may start: the state becomes Committing.
    /// Fails with the recorded error if the transaction already failed.
    pub fn begin_commit(&mut self) -> Result<(), ProducerError> {
        self.txn_required("commit_transaction")?;
        match self.state {
            TxnState::InTransaction => {
                self.state = TxnState::Committing;
                Ok(())
            }
            TxnState::AbortableError | TxnState::FatalError => Err(self.current_error()),
            s => Err(ProducerError::InvalidTxnState(format!(
                "commit_transaction called in state {s:?}"
            ))),
        }
    }

    /// After waiting for outstanding work: the error recorded meanwhile, if
    /// any (then commit must not send EndTxn).
    pub fn commit_blocked(&self) -> Option<ProducerError> {
        match self.state {
            TxnState::AbortableError | TxnState::FatalError => Some(self.current_error()),
            _ => None,
        }
    }

    /// `abort_transaction` may start: the state becomes Aborting.
    pub fn begin_abort(&mut self) -> Result<(), ProducerError> {
        self.txn_required("abort_transaction")?;
        match self.state {
            TxnState::InTransaction | TxnState::AbortableError | TxnState::Committing => {
                self.state = TxnState::Aborting;
                Ok(())
            }
            s => Err(ProducerError::InvalidTxnState(format!(
                "abort_transaction called in state {s:?}"
            ))),
        }
    }

    /// Whether EndTxn must be sent (something was produced or staged).
    pub fn has_work(&self) -> bool {
        self.has_work
    }

    /// EndTxn failed for good: fatal errors stick, others leave the
    /// transaction abortable.
    pub fn end_failed(&mut self, err: ProducerError) {
        if err.is_fatal() {
            self.state = TxnState::FatalError;
            self.error = Some(err);
        } else {
            self.state = TxnState::AbortableError;
            self.error = Some(ProducerError::Abortable(Box::new(err)));
        }
    }

    fn current_error(&self) -> ProducerError {
        self.error
            .clone()
            .unwrap_or_else(|| ProducerError::InvalidTxnState("transaction failed".into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::ClientError;

    fn broker(code: ErrorCode) -> ProducerError {
        ProducerError::Client(ClientError::Broker {
            api: "Produce",
            code,
            message: None,
        })
    }

    #[test]
    fn happy_path_and_misuse() {
        let mut t = TransactionManager::new(Some("tx".into()));
        assert!(matches!(t.begin(), Err(ProducerError::InvalidTxnState(_))));
        assert!(t.check_send().is_err());
        t.begin_init().unwrap();
        t.set_producer(7, 0);
        t.begin().unwrap();
        assert!(t.begin().is_err(), "no nested transaction");
        t.check_send().unwrap();
        assert!(t.has_work());
        t.begin_commit().unwrap();
        assert!(t.commit_blocked().is_none());
        t.set_producer(7, 1);
        assert_eq!(t.state(), TxnState::Ready);
        assert_eq!(t.producer_id_and_epoch(), (7, 1));
        assert!(t.begin_commit().is_err());
        let mut plain = TransactionManager::new(None);
        assert!(matches!(
            plain.begin_init(),
            Err(ProducerError::InvalidTxnState(_))
        ));
        plain.check_send().unwrap();
    }

    #[test]
    fn abortable_errors_surface_at_commit_and_allow_abort() {
        let mut t = TransactionManager::new(Some("tx".into()));
        t.begin_init().unwrap();
        t.set_producer(1, 0);
        t.begin().unwrap();
        t.record_error(broker(ErrorCode::INVALID_RECORD_STATE));
        t.record_error(broker(ErrorCode::REQUEST_TIMED_OUT));
        let e = t.begin_commit().unwrap_err();
        assert!(e.is_abortable(), "{e}");
        assert!(
            e.to_string().contains("INVALID_RECORD_STATE"),
            "first error kept: {e}"
        );
        t.begin_abort().unwrap();
        t.set_producer(1, 1);
        t.begin().unwrap();
    }

    #[test]
    fn fatal_errors_stick() {
        for code in [
            ErrorCode::PRODUCER_FENCED,
            ErrorCode::UNSUPPORTED_VERSION,
            ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            ErrorCode::GROUP_AUTHORIZATION_FAILED,
            ErrorCode::TOPIC_AUTHORIZATION_FAILED,
        ] {
            let mut t = TransactionManager::new(Some("tx".into()));
            t.begin_init().unwrap();
            t.set_producer(1, 0);
            t.begin().unwrap();
            t.record_error(broker(code));
            assert_eq!(t.state(), TxnState::FatalError);
            assert!(t.begin_abort().unwrap_err().is_fatal());
            assert!(t.begin_commit().unwrap_err().is_fatal());
        }
        assert!(!is_fatal_code(ErrorCode::CONCURRENT_TRANSACTIONS));
        assert!(!is_fatal_code(ErrorCode::INVALID_RECORD_STATE));
    }
}
