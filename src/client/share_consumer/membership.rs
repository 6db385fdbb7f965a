//! Share group membership as a state machine without I/O: what to send in
//! the next ShareGroupHeartbeat and when, and what an answer changes.
//!
//! The member id is a UUID string generated once by the client (KIP-932
//! v1). Epoch 0 joins; the coordinator answers with the member epoch, the
//! heartbeat interval and, when it changed, the assignment (by topic id; a
//! non-null Assignment replaces the current one). Epoch -1 leaves.
//! UNKNOWN_MEMBER_ID and FENCED_MEMBER_EPOCH drop the assignment and join
//! again at epoch 0 with the same member id; NOT_COORDINATOR and
//! COORDINATOR_NOT_AVAILABLE make the driver look the coordinator up again;
//! retriable errors and failed requests are retried after the retry
//! backoff; anything else is fatal.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use kafka_protocol::messages::{
    GroupId, ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use tokio::time::Instant;
use uuid::Uuid;

use crate::eos::ShareGroupMetadata;
use crate::protocol::ErrorCode;

/// Partitions assigned to this member, by topic id.
pub type Assignment = BTreeMap<Uuid, BTreeSet<i32>>;

/// Where the member is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberState {
    /// No subscription: no heartbeats.
    Unsubscribed,
    /// Subscribed; heartbeating.
    Member,
    /// A leave heartbeat (epoch -1) is due.
    Leaving,
    /// Left (after unsubscribe or close).
    Left,
    /// A fatal error; see [`Membership::fatal`].
    Failed,
}

/// What the driver should do after an answer or a failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeartbeatOutcome {
    /// Nothing special.
    Ok,
    /// Look the coordinator up again before the next heartbeat.
    FindCoordinator,
    /// Membership failed for good.
    Fatal(String),
}

/// See the module documentation.
#[derive(Debug)]
pub struct Membership {
    group_id: String,
    member_id: String,
    epoch: i32,
    state: MemberState,
    subscription: BTreeSet<String>,
    subscription_changed: bool,
    interval: Duration,
    retry_backoff: Duration,
    next_at: Option<Instant>,
    in_flight: bool,
    assignment: Assignment,
    fatal: Option<String>,
}

impl Membership {
    /// A member of `group_id` with a fresh member id.
    pub fn new(group_id: impl Into<String>, retry_backoff: Duration) -> Self {
        Self::with_member_id(group_id, Uuid::new_v4().to_string(), retry_backoff)
    }

    /// A member with a given member id.
    pub fn with_member_id(
        group_id: impl Into<String>,
        member_id: impl Into<String>,
        retry_backoff: Duration,
    ) -> Self {
        Self {
            group_id: group_id.into(),
            member_id: member_id.into(),
            epoch: 0,
            state: MemberState::Unsubscribed,
            subscription: BTreeSet::new(),
            subscription_changed: false,
            interval: Duration::from_secs(5),
            retry_backoff,
            next_at: None,
            in_flight: false,
            assignment: Assignment::new(),
            fatal: None,
        }
    }

    /// The published snapshot.
    pub fn metadata(&self) -> ShareGroupMetadata {
        ShareGroupMetadata::new(&self.group_id, &self.member_id, self.epoch)
    }
    /// The state.
    pub fn state(&self) -> MemberState {
        self.state
    }
    /// The current assignment.
    pub fn assignment(&self) -> &Assignment {
        &self.assignment
    }
    /// The subscription.
    pub fn subscription(&self) -> &BTreeSet<String> {
        &self.subscription
    }
    /// The fatal error, once failed.
    pub fn fatal(&self) -> Option<&str> {
        self.fatal.as_deref()
    }
    /// The heartbeat interval the coordinator asked for.
    pub fn heartbeat_interval(&self) -> Duration {
        self.interval
    }

    /// Subscribes to `topics` (replacing the subscription); an empty set is
    /// an unsubscribe. The next heartbeat is due at once.
    pub fn subscribe(&mut self, topics: impl IntoIterator<Item = String>, now: Instant) {
        let topics: BTreeSet<String> = topics.into_iter().collect();
        if topics.is_empty() {
            self.unsubscribe(now);
            return;
        }
        if matches!(self.state, MemberState::Failed) {
            return;
        }
        self.subscription_changed =
            topics != self.subscription || self.state != MemberState::Member;
        self.subscription = topics;
        if matches!(self.state, MemberState::Left | MemberState::Unsubscribed) {
            self.epoch = 0;
        }
        self.state = MemberState::Member;
        self.next_at = Some(now);
    }

    /// A share request said this member is no longer in the group
    /// (UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH: its session expired, say
    /// while the process was paused): drop the assignment and rejoin at
    /// once, as a heartbeat with that answer does.
    pub fn member_lost(&mut self, now: Instant) {
        if matches!(self.state, MemberState::Failed) || self.subscription.is_empty() {
            return;
        }
        self.epoch = 0;
        self.assignment.clear();
        self.next_at = Some(now);
    }

    /// Leaves the group (epoch -1 heartbeat), keeping the member id.
    pub fn unsubscribe(&mut self, now: Instant) {
        self.subscription.clear();
        self.assignment.clear();
        match self.state {
            MemberState::Member if self.epoch > 0 || self.in_flight => {
                self.state = MemberState::Leaving;
                self.next_at = Some(now);
            }
            MemberState::Member => {
                self.state = MemberState::Left;
                self.epoch = -1;
                self.next_at = None;
            }
            _ => {}
        }
    }

    /// When the next heartbeat is due (`None`: none planned).
    pub fn next_heartbeat_at(&self) -> Option<Instant> {
        if self.in_flight {
            return None;
        }
        match self.state {
            MemberState::Member | MemberState::Leaving => self.next_at,
            _ => None,
        }
    }

    /// The heartbeat to send at `now`, if one is due. The driver must
    /// report its answer or failure before asking again.
    pub fn poll_heartbeat(&mut self, now: Instant) -> Option<ShareGroupHeartbeatRequest> {
        let at = self.next_heartbeat_at()?;
        if at > now {
            return None;
        }
        let epoch = match self.state {
            MemberState::Leaving => -1,
            _ => self.epoch,
        };
        let topics = (self.state == MemberState::Member
            && (self.subscription_changed || self.epoch == 0))
            .then(|| {
                self.subscription
                    .iter()
                    .map(|t| TopicName(StrBytes::from_string(t.clone())))
                    .collect()
            });
        self.in_flight = true;
        Some(
            ShareGroupHeartbeatRequest::default()
                .with_group_id(GroupId(StrBytes::from_string(self.group_id.clone())))
                .with_member_id(StrBytes::from_string(self.member_id.clone()))
                .with_member_epoch(epoch)
                .with_subscribed_topic_names(topics),
        )
    }

    /// Applies the answer to the heartbeat sent last.
    pub fn on_response(
        &mut self,
        now: Instant,
        resp: &ShareGroupHeartbeatResponse,
    ) -> HeartbeatOutcome {
        self.in_flight = false;
        let code = ErrorCode(resp.error_code);
        if self.state == MemberState::Leaving {
            // Whatever the answer, the member is gone (Kafka does not retry
            // a leave either).
            self.state = MemberState::Left;
            self.epoch = -1;
            self.next_at = None;
            return HeartbeatOutcome::Ok;
        }
        if code.is_ok() {
            self.subscription_changed = false;
            self.epoch = resp.member_epoch;
            if resp.heartbeat_interval_ms > 0 {
                self.interval = Duration::from_millis(resp.heartbeat_interval_ms as u64);
            }
            if let Some(a) = &resp.assignment {
                self.assignment = a
                    .topic_partitions
                    .iter()
                    .map(|t| (t.topic_id, t.partitions.iter().copied().collect()))
                    .collect();
            }
            self.next_at = Some(now + self.interval);
            return HeartbeatOutcome::Ok;
        }
        match code {
            ErrorCode::UNKNOWN_MEMBER_ID | ErrorCode::FENCED_MEMBER_EPOCH => {
                self.epoch = 0;
                self.assignment.clear();
                self.next_at = Some(now);
                HeartbeatOutcome::Ok
            }
            ErrorCode::NOT_COORDINATOR | ErrorCode::COORDINATOR_NOT_AVAILABLE => {
                self.next_at = Some(now + self.retry_backoff);
                HeartbeatOutcome::FindCoordinator
            }
            c if c.is_retriable() || c == ErrorCode::COORDINATOR_LOAD_IN_PROGRESS => {
                self.next_at = Some(now + self.retry_backoff);
                HeartbeatOutcome::Ok
            }
            c => {
                let msg = format!(
                    "ShareGroupHeartbeat failed with {c}{}",
                    resp.error_message
                        .as_ref()
                        .map(|m| format!(": {}", m.as_str()))
                        .unwrap_or_default()
                );
                self.fail(msg.clone());
                HeartbeatOutcome::Fatal(msg)
            }
        }
    }

    /// The heartbeat could not be sent or got no answer.
    pub fn on_failure(&mut self, now: Instant, retriable: bool, reason: &str) -> HeartbeatOutcome {
        self.in_flight = false;
        if self.state == MemberState::Leaving {
            self.state = MemberState::Left;
            self.epoch = -1;
            self.next_at = None;
            return HeartbeatOutcome::Ok;
        }
        if retriable {
            self.next_at = Some(now + self.retry_backoff);
            HeartbeatOutcome::FindCoordinator
        } else {
            self.fail(reason.to_string());
            HeartbeatOutcome::Fatal(reason.to_string())
        }
    }

    fn fail(&mut self, msg: String) {
        self.state = MemberState::Failed;
        self.assignment.clear();
        self.next_at = None;
        self.fatal = Some(msg);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::share_group_heartbeat_response::{
        Assignment as WireAssignment, TopicPartitions,
    };

    fn answer(
        epoch: i32,
        assignment: Option<Vec<(u128, Vec<i32>)>>,
    ) -> ShareGroupHeartbeatResponse {
        ShareGroupHeartbeatResponse::default()
            .with_member_id(Some(StrBytes::from_static_str("m")))
            .with_member_epoch(epoch)
            .with_heartbeat_interval_ms(3000)
            .with_assignment(assignment.map(|a| {
                WireAssignment::default().with_topic_partitions(
                    a.into_iter()
                        .map(|(id, ps)| {
                            TopicPartitions::default()
                                .with_topic_id(Uuid::from_u128(id))
                                .with_partitions(ps)
                        })
                        .collect(),
                )
            }))
    }

    #[test]
    fn join_heartbeat_and_leave() {
        let t0 = Instant::now();
        let mut m = Membership::with_member_id("g", "m", Duration::from_millis(100));
        assert!(
            m.poll_heartbeat(t0).is_none(),
            "no heartbeat before subscribe"
        );
        m.subscribe(["a".to_string()], t0);
        let join = m.poll_heartbeat(t0).unwrap();
        assert_eq!(join.member_epoch, 0);
        assert_eq!(join.member_id.as_str(), "m");
        assert_eq!(join.subscribed_topic_names.as_ref().unwrap().len(), 1);
        assert!(m.poll_heartbeat(t0).is_none(), "one heartbeat in flight");
        m.on_response(t0, &answer(1, Some(vec![(9, vec![0, 1])])));
        assert_eq!(m.metadata(), ShareGroupMetadata::new("g", "m", 1));
        assert_eq!(m.assignment()[&Uuid::from_u128(9)], [0, 1].into());
        assert_eq!(m.next_heartbeat_at(), Some(t0 + Duration::from_secs(3)));
        let t1 = t0 + Duration::from_secs(3);
        let hb = m.poll_heartbeat(t1).unwrap();
        assert_eq!(hb.member_epoch, 1);
        assert!(
            hb.subscribed_topic_names.is_none(),
            "unchanged subscription not repeated"
        );
        // A null assignment keeps the current one.
        m.on_response(t1, &answer(1, None));
        assert_eq!(m.assignment().len(), 1);
        m.unsubscribe(t1);
        let leave = m.poll_heartbeat(t1).unwrap();
        assert_eq!(leave.member_epoch, -1);
        m.on_response(t1, &answer(-1, None));
        assert_eq!(m.state(), MemberState::Left);
        assert_eq!(m.metadata().member_epoch(), -1);
        assert!(m.assignment().is_empty());
    }

    #[test]
    fn fenced_member_rejoins_at_epoch_zero_and_errors_are_sorted() {
        let t0 = Instant::now();
        let mut m = Membership::with_member_id("g", "m", Duration::from_millis(100));
        m.subscribe(["a".to_string()], t0);
        m.poll_heartbeat(t0).unwrap();
        m.on_response(t0, &answer(4, Some(vec![(9, vec![0])])));
        let t1 = t0 + Duration::from_secs(3);
        m.poll_heartbeat(t1).unwrap();
        let fenced = ShareGroupHeartbeatResponse::default()
            .with_error_code(ErrorCode::FENCED_MEMBER_EPOCH.0);
        assert_eq!(m.on_response(t1, &fenced), HeartbeatOutcome::Ok);
        assert!(m.assignment().is_empty());
        let rejoin = m.poll_heartbeat(t1).unwrap();
        assert_eq!(rejoin.member_epoch, 0);
        assert_eq!(rejoin.member_id.as_str(), "m", "same member id");
        let moved =
            ShareGroupHeartbeatResponse::default().with_error_code(ErrorCode::NOT_COORDINATOR.0);
        assert_eq!(m.on_response(t1, &moved), HeartbeatOutcome::FindCoordinator);
        assert_eq!(m.next_heartbeat_at(), Some(t1 + Duration::from_millis(100)));
        m.poll_heartbeat(t1 + Duration::from_millis(100)).unwrap();
        let denied = ShareGroupHeartbeatResponse::default()
            .with_error_code(ErrorCode::GROUP_AUTHORIZATION_FAILED.0);
        assert!(matches!(
            m.on_response(t1, &denied),
            HeartbeatOutcome::Fatal(_)
        ));
        assert_eq!(m.state(), MemberState::Failed);
        assert!(m.poll_heartbeat(t1 + Duration::from_secs(60)).is_none());
    }
}
