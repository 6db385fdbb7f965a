//! [`TestBroker`]: the one way an integration test starts an embedded
//! broker: its configuration, its clock, the topics it starts with and the
//! share groups that read from the earliest offset, and a raw client
//! connected to it.

use std::path::Path;
use std::sync::Arc;

use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::{CreateTopicsRequest, TopicName};
use sharestream::broker::clock::{ManualClock, wall_clock_ms};
use sharestream::broker::group::config::AbortedRecordState;
use sharestream::broker::{Broker, BrokerConfig, BrokerHandle};
use sharestream::protocol::ErrorCode;
use uuid::Uuid;

use super::RawClient;
use super::kip::{earliest, s};

/// A broker to start. See the module docs.
#[must_use]
pub struct TestBroker {
    config: BrokerConfig,
    clock: Option<Arc<ManualClock>>,
    topics: Vec<(String, i32)>,
    earliest: Vec<String>,
}

/// A started [`TestBroker`].
pub struct Started {
    /// The broker.
    pub b: BrokerHandle,
    /// A raw client connected to it.
    pub c: RawClient,
    /// The ids of the topics it was started with, in order.
    pub topics: Vec<Uuid>,
    /// The manual clock, if the broker runs on one.
    pub clock: Option<Arc<ManualClock>>,
}

impl TestBroker {
    /// A broker with `config`.
    pub fn with_config(config: BrokerConfig) -> Self {
        Self {
            config,
            clock: None,
            topics: Vec::new(),
            earliest: Vec::new(),
        }
    }

    /// An in-memory broker.
    pub fn in_memory() -> Self {
        Self::with_config(BrokerConfig::in_memory())
    }

    /// A broker storing its data in `dir` (fsync on every write).
    pub fn on_disk(dir: &Path) -> Self {
        Self::with_config(BrokerConfig::with_data_dir(dir))
    }

    /// Changes the configuration.
    pub fn configure(mut self, f: impl FnOnce(&mut BrokerConfig)) -> Self {
        f(&mut self.config);
        self
    }

    /// Share groups' acquisition locks last `ms` (and may be that short).
    pub fn lock_duration_ms(self, ms: i32) -> Self {
        self.configure(|c| {
            c.share_groups.record_lock_duration_ms = ms;
            c.share_groups.min_record_lock_duration_ms = ms;
        })
    }

    /// What a KIP-1289 abort the producer asked for does to its staged
    /// records (`group.share.transaction.abort.record.state`, D25).
    pub fn aborted_records(self, state: AbortedRecordState) -> Self {
        self.configure(|c| c.share_groups.transaction_abort_record_state = state)
    }

    /// Runs the broker on a manual clock (starting at the wall-clock time
    /// now), moved by [`Started::advance`]: lock, session and transaction
    /// deadlines then pass without real waiting.
    pub fn manual_clock(mut self) -> Self {
        let clock = ManualClock::new(wall_clock_ms());
        self.config.clock = clock.clone();
        self.clock = Some(clock);
        self
    }

    /// A topic to create at start (kept if it exists already, as after a
    /// restart on disk).
    pub fn topic(mut self, name: &str, partitions: i32) -> Self {
        self.topics.push((name.to_string(), partitions));
        self
    }

    /// A share group to read from the earliest offset.
    pub fn earliest(mut self, group: &str) -> Self {
        self.earliest.push(group.to_string());
        self
    }

    /// Starts the broker, creates the topics, sets the groups.
    pub async fn start(self) -> Started {
        let b = Broker::start(self.config).await.expect("start the broker");
        let mut c = RawClient::connect(b.local_addr()).await;
        let mut topics = Vec::new();
        for (name, partitions) in &self.topics {
            let r = c
                .send(
                    &CreateTopicsRequest::default().with_topics(vec![
                        CreatableTopic::default()
                            .with_name(TopicName(s(name)))
                            .with_num_partitions(*partitions)
                            .with_replication_factor(-1),
                    ]),
                    7,
                )
                .await;
            let code = r.topics[0].error_code;
            assert!(
                code == 0 || code == ErrorCode::TOPIC_ALREADY_EXISTS.0,
                "create {name}: {code}"
            );
            let id = b
                .core()
                .topics()
                .read()
                .get(name)
                .map(|t| t.id)
                .expect("the topic exists");
            topics.push(id);
        }
        for g in &self.earliest {
            earliest(&mut c, g).await;
        }
        Started {
            b,
            c,
            topics,
            clock: self.clock,
        }
    }
}

impl Started {
    /// The id of the first topic.
    pub fn topic(&self) -> Uuid {
        self.topics[0]
    }

    /// Moves the manual clock forward by `ms` and runs the broker's
    /// timers at the new time (share groups, transactions, consumer
    /// groups), so that what falls due is done when this returns.
    pub fn advance(&self, ms: i64) {
        advance(
            &self.b,
            self.clock
                .as_ref()
                .expect("advance needs TestBroker::manual_clock"),
            ms,
        );
    }
}

/// Moves `clock` (the broker's) forward by `ms` and runs `b`'s timers at
/// the new time: share groups (session and lock expiry), transactions
/// (timeouts, marker retries), consumer groups.
pub fn advance(b: &BrokerHandle, clock: &ManualClock, ms: i64) {
    clock.advance(ms);
    let core = b.core();
    let now = core.now_ms();
    core.shares().tick(now);
    core.txn_tick();
    core.consumer_groups().tick(now);
}
