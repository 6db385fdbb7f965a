//! The streams rebalance protocol of KIP-1071 (Kafka Streams'
//! `group.protocol=streams`): StreamsGroupHeartbeat and
//! StreamsGroupDescribe, as an I/O-free state machine that takes the
//! current time and the topics as inputs.
//!
//! - **Topology.** A member joins (epoch 0) with the application's
//!   topology: its subtopologies, their source topics, repartition and
//!   changelog topics and copartition groups. The first join sets the
//!   group's topology; a join with a higher topology epoch replaces it (a
//!   rolling upgrade), one with a lower epoch is told STALE_TOPOLOGY, and
//!   one with the same epoch and another topology is
//!   STREAMS_INVALID_TOPOLOGY_EPOCH. [`configure()`] turns the topology and
//!   the topics into task counts and the internal topics that must exist;
//!   the caller creates those before the heartbeat (the broker does, as
//!   Kafka's coordinator does), and what keeps tasks from being assigned
//!   is answered as the heartbeat's status.
//! - **Membership and epochs** as in the consumer protocol
//!   ([`super::consumer_protocol`]): 0 joins, -1 leaves (-2 too: a static
//!   member's temporary leave is not kept here), the epoch last given
//!   otherwise (FENCED_MEMBER_EPOCH for any other; UNKNOWN_MEMBER_ID for
//!   an unknown member). The group epoch rises with membership, topology
//!   and task counts; the target assignment ([`assignor`]) carries it.
//! - **Reconciliation**: a member told to give up tasks keeps its epoch
//!   until a heartbeat reports them no longer owned; only then does it
//!   move to the target epoch, with the tasks of its target that no other
//!   member still holds or is revoking. A task thus never has two active
//!   owners. A member that does not revoke within its rebalance timeout,
//!   or is silent for the session timeout, is removed.
//! - **Offsets**: a commit into a streams group is checked as Kafka checks
//!   it: the member must exist (UNKNOWN_MEMBER_ID) at its current epoch
//!   (STALE_MEMBER_EPOCH); a commit naming no member is an admin commit,
//!   allowed only while the group has no members.
//!
//! - **Standby tasks**: `streams.num.standby.replicas` copies of each
//!   active task on members of other processes ([`assignor`]). A member
//!   gets a standby of its target at once, except one it still holds or is
//!   giving up as active.
//! - **Configs** (`streams.session.timeout.ms`,
//!   `streams.heartbeat.interval.ms`, `streams.num.standby.replicas`) come
//!   with each heartbeat ([`StreamsTiming`]); a new standby count makes a
//!   new target.
//! - **Durability**: [`StreamsGroups::snapshot`] is a group's state without
//!   its clocks, journaled by the broker; [`StreamsGroups::restore`] puts
//!   it back with every session starting again.
//!
//! Not implemented (docs/DESIGN.md D56): warm-up tasks, the other
//! `streams.*` group configs, and static membership kept across a
//! temporary leave.

pub mod assignor;
pub mod configure;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

pub use configure::{Configured, configure};
use sharestream_protocol::ErrorCode;

use crate::consumer_group::consumer_protocol::{HeartbeatError, Topics};
use crate::consumer_group::partition_sets::{intersect, minus};

/// Tasks by subtopology id: the partitions (task numbers) of each.
pub type Tasks = crate::consumer_group::partition_sets::PartitionSets<String>;

/// Kafka's default `group.streams.session.timeout.ms`.
pub const SESSION_TIMEOUT_MS: i32 = 45_000;
/// Kafka's default `group.streams.heartbeat.interval.ms`.
pub const HEARTBEAT_INTERVAL_MS: i32 = 5_000;

/// A group's `streams.*` configs as of one heartbeat (Kafka reads them at
/// every heartbeat, so a change applies from the next one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamsTiming {
    /// `streams.session.timeout.ms`.
    pub session_timeout_ms: i32,
    /// `streams.heartbeat.interval.ms`.
    pub heartbeat_interval_ms: i32,
    /// `streams.num.standby.replicas`.
    pub num_standby_replicas: i32,
}

impl Default for StreamsTiming {
    fn default() -> Self {
        Self {
            session_timeout_ms: SESSION_TIMEOUT_MS,
            heartbeat_interval_ms: HEARTBEAT_INTERVAL_MS,
            num_standby_replicas: 0,
        }
    }
}

fn default_session_timeout_ms() -> i32 {
    SESSION_TIMEOUT_MS
}
/// Kafka Streams' default `acceptable.recovery.lag`, answered as
/// AcceptableRecoveryLag.
pub const ACCEPTABLE_RECOVERY_LAG: i32 = 10_000;
/// The interval at which members report their task offsets.
pub const TASK_OFFSET_INTERVAL_MS: i32 = 60_000;

/// The heartbeat's status codes (KIP-1071).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum StreamsStatus {
    /// 0: the member's topology epoch is lower than the group's.
    StaleTopology = 0,
    /// 1: a source topic is missing, or a pattern matches no topic.
    MissingSourceTopics = 1,
    /// 2: partition counts that must agree do not.
    IncorrectlyPartitionedTopics = 2,
    /// 3: internal topics are missing (and could not be created).
    MissingInternalTopics = 3,
    /// 4: a member asked the whole application to shut down.
    ShutdownApplication = 4,
}

/// An internal topic as the topology describes it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicSpec {
    /// Name.
    pub name: String,
    /// Partitions (0: computed).
    pub partitions: i32,
    /// ReplicationFactor (0: the broker's default).
    pub replication_factor: i16,
    /// TopicConfigs.
    pub configs: Vec<(String, String)>,
}

/// A copartition group: indexes into its subtopology's lists.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CopartitionGroup {
    /// Into `source_topics`.
    pub source_topics: Vec<i16>,
    /// Into `source_topic_regex`.
    pub source_topic_regex: Vec<i16>,
    /// Into `repartition_source_topics`.
    pub repartition_source_topics: Vec<i16>,
}

/// One subtopology.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Subtopology {
    /// SubtopologyId.
    pub id: String,
    /// SourceTopics.
    pub source_topics: Vec<String>,
    /// SourceTopicRegex.
    pub source_topic_regex: Vec<String>,
    /// StateChangelogTopics.
    pub changelog_topics: Vec<TopicSpec>,
    /// RepartitionSinkTopics.
    pub repartition_sink_topics: Vec<String>,
    /// RepartitionSourceTopics.
    pub repartition_source_topics: Vec<TopicSpec>,
    /// CopartitionGroups.
    pub copartition_groups: Vec<CopartitionGroup>,
}

/// A streams application's topology.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Topology {
    /// Epoch.
    pub epoch: i32,
    /// Subtopologies.
    pub subtopologies: Vec<Subtopology>,
}

/// A member's endpoint for interactive queries.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Endpoint {
    /// Host.
    pub host: String,
    /// Port.
    pub port: u16,
}

/// The fields of a StreamsGroupHeartbeat request (v0), plus the
/// connection's client id and host.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StreamsHeartbeat {
    /// GroupId.
    pub group_id: String,
    /// MemberId.
    pub member_id: String,
    /// MemberEpoch.
    pub member_epoch: i32,
    /// EndpointInformationEpoch.
    pub endpoint_information_epoch: i32,
    /// InstanceId.
    pub instance_id: Option<String>,
    /// RackId.
    pub rack_id: Option<String>,
    /// RebalanceTimeoutMs (-1: unchanged).
    pub rebalance_timeout_ms: i32,
    /// Topology (joins only).
    pub topology: Option<Topology>,
    /// ActiveTasks: what the member owns (None: unchanged).
    pub active_tasks: Option<Tasks>,
    /// ProcessId (None: unchanged).
    pub process_id: Option<String>,
    /// UserEndpoint (None: unchanged or none).
    pub user_endpoint: Option<Endpoint>,
    /// ClientTags (None: unchanged).
    pub client_tags: Option<Vec<(String, String)>>,
    /// ShutdownApplication.
    pub shutdown_application: bool,
    /// The group's configs as of this heartbeat (None: Kafka's defaults).
    pub timing: Option<StreamsTiming>,
    /// The connection's client id.
    pub client_id: String,
    /// The connection's host.
    pub client_host: String,
}

/// The partitions an endpoint's active tasks read, for interactive
/// queries.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EndpointPartitions {
    /// The member's endpoint.
    pub endpoint: Endpoint,
    /// Topic -> partitions, through its active tasks.
    pub active: BTreeMap<String, BTreeSet<i32>>,
    /// Topic -> partitions, through its standby tasks.
    pub standby: BTreeMap<String, BTreeSet<i32>>,
}

/// A successful heartbeat's answer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StreamsHeartbeatOk {
    /// MemberId (echoed).
    pub member_id: String,
    /// MemberEpoch (-1 after a leave).
    pub member_epoch: i32,
    /// HeartbeatIntervalMs.
    pub heartbeat_interval_ms: i32,
    /// Status.
    pub status: Vec<(StreamsStatus, String)>,
    /// ActiveTasks and StandbyTasks, when either changed (or the member
    /// sent its own).
    pub tasks: Option<(Tasks, Tasks)>,
    /// The endpoint information epoch, and the information when the member
    /// is behind it.
    pub endpoint_information_epoch: i32,
    /// PartitionsByUserEndpoint (None: unchanged).
    pub partitions_by_endpoint: Option<Vec<EndpointPartitions>>,
}

impl StreamsHeartbeatOk {
    /// The active tasks in the answer (None: not sent).
    pub fn active_tasks(&self) -> Option<Tasks> {
        self.tasks.as_ref().map(|(a, _)| a.clone())
    }

    /// The standby tasks in the answer (None: not sent).
    pub fn standby_tasks(&self) -> Option<Tasks> {
        self.tasks.as_ref().map(|(_, s)| s.clone())
    }
}

/// Group states as Kafka names them for streams groups.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamsGroupState {
    /// No members.
    Empty,
    /// Members, but the topology cannot be assigned (topics missing or
    /// wrongly partitioned).
    NotReady,
    /// Members are moving to the target assignment.
    Reconciling,
    /// Every member is at the target assignment.
    Stable,
}

impl StreamsGroupState {
    /// Kafka's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Empty => "Empty",
            Self::NotReady => "NotReady",
            Self::Reconciling => "Reconciling",
            Self::Stable => "Stable",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Member {
    epoch: i32,
    previous_epoch: i32,
    instance_id: Option<String>,
    rack_id: Option<String>,
    client_id: String,
    client_host: String,
    rebalance_timeout_ms: i32,
    topology_epoch: i32,
    process_id: String,
    user_endpoint: Option<Endpoint>,
    client_tags: Vec<(String, String)>,
    last_heartbeat_ms: i64,
    /// The session timeout its last heartbeat was given.
    #[serde(default = "default_session_timeout_ms")]
    session_timeout_ms: i32,
    /// What the member may own now (last told, or about to be).
    assigned: Tasks,
    /// Its standby tasks now: its target's, less any it holds or is giving
    /// up as active.
    #[serde(default)]
    standby: Tasks,
    /// Tasks it was told to give up and has not reported given up.
    revoking: Tasks,
    revoke_deadline_ms: Option<i64>,
    /// What it last reported owning.
    owned: Tasks,
    /// What it was last sent, active and standby (None: never).
    sent: Option<(Tasks, Tasks)>,
}

/// One streams group's state. What the broker journals
/// ([`StreamsGroups::snapshot`]) is this without time: a restored
/// member's session, and a pending revocation's deadline, start again at
/// the restoration, as for consumer-protocol groups (docs/DESIGN.md D29a).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamsGroup {
    epoch: i32,
    assignment_epoch: i32,
    topology: Option<Topology>,
    /// The task counts the target was computed with.
    tasks: BTreeMap<String, i32>,
    /// The configuration as of the last heartbeat.
    configured: Configured,
    members: BTreeMap<String, Member>,
    target: BTreeMap<String, Tasks>,
    /// Standby tasks of the target assignment.
    #[serde(default)]
    target_standby: BTreeMap<String, Tasks>,
    /// The `streams.num.standby.replicas` the target was computed with.
    #[serde(default)]
    num_standby: i32,
    endpoint_epoch: i32,
    /// A member asked the application to shut down (until the group is
    /// empty).
    shutdown: Option<String>,
}

/// One member in StreamsGroupDescribe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribedStreamsMember {
    /// MemberId.
    pub member_id: String,
    /// MemberEpoch.
    pub member_epoch: i32,
    /// InstanceId.
    pub instance_id: Option<String>,
    /// RackId.
    pub rack_id: Option<String>,
    /// ClientId.
    pub client_id: String,
    /// ClientHost.
    pub client_host: String,
    /// TopologyEpoch.
    pub topology_epoch: i32,
    /// ProcessId.
    pub process_id: String,
    /// UserEndpoint.
    pub user_endpoint: Option<Endpoint>,
    /// ClientTags.
    pub client_tags: Vec<(String, String)>,
    /// Assignment: active tasks.
    pub assignment: Tasks,
    /// Assignment: standby tasks.
    pub standby: Tasks,
    /// TargetAssignment: active tasks.
    pub target_assignment: Tasks,
    /// TargetAssignment: standby tasks.
    pub target_standby: Tasks,
}

/// One group in StreamsGroupDescribe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribedStreamsGroup {
    /// GroupState.
    pub state: StreamsGroupState,
    /// GroupEpoch.
    pub group_epoch: i32,
    /// AssignmentEpoch.
    pub assignment_epoch: i32,
    /// Topology, with the partition counts as configured.
    pub topology: Option<Topology>,
    /// The configured task counts (internal topics' partitions follow).
    pub tasks: BTreeMap<String, i32>,
    /// Members.
    pub members: Vec<DescribedStreamsMember>,
}

/// A commit or fetch of offsets as [`StreamsGroups::validate_commit`]
/// checks it.
#[derive(Debug, Clone, Copy)]
pub struct StreamsMemberCheck<'a> {
    /// MemberId ("" = none).
    pub member_id: &'a str,
    /// The member epoch (-1 = not a member).
    pub member_epoch: i32,
}

/// Every streams group of the broker.
#[derive(Debug, Clone, Default)]
pub struct StreamsGroups {
    groups: BTreeMap<String, StreamsGroup>,
}

fn refuse(code: ErrorCode, message: impl Into<String>) -> HeartbeatError {
    HeartbeatError {
        code,
        message: message.into(),
    }
}

fn same_epoch_other_topology(epoch: i32) -> HeartbeatError {
    refuse(
        ErrorCode::STREAMS_INVALID_TOPOLOGY_EPOCH,
        format!(
            "The topology epoch {epoch} is the group's, but the topology differs from the group's: \
             bump the topology epoch when the topology changes."
        ),
    )
}

/// Drops empty entries, so that equal task sets compare equal.
fn normalized(t: Tasks) -> Tasks {
    t.into_iter().filter(|(_, ps)| !ps.is_empty()).collect()
}

/// KIP-1071's rules for a topology: unique subtopology ids, copartition
/// indexes inside their lists, and no topic both a subtopology's source
/// and an internal topic.
fn validate_topology(t: &Topology) -> Result<(), HeartbeatError> {
    let invalid = |m: String| Err(refuse(ErrorCode::STREAMS_INVALID_TOPOLOGY, m));
    if t.subtopologies.is_empty() {
        return invalid("The topology has no subtopology.".into());
    }
    let mut ids = BTreeSet::new();
    for s in &t.subtopologies {
        if !ids.insert(&s.id) {
            return invalid(format!("Subtopology {} appears twice.", s.id));
        }
        for g in &s.copartition_groups {
            let out_of = |ix: &[i16], len: usize| ix.iter().any(|&i| i < 0 || i as usize >= len);
            if out_of(&g.source_topics, s.source_topics.len())
                || out_of(&g.source_topic_regex, s.source_topic_regex.len())
                || out_of(
                    &g.repartition_source_topics,
                    s.repartition_source_topics.len(),
                )
            {
                return invalid(format!(
                    "A copartition group of subtopology {} names a topic it does not have.",
                    s.id
                ));
            }
        }
        for r in &s.source_topic_regex {
            if configure::compile_checked(r).is_err() {
                return invalid(format!(
                    "Source topic pattern `{r}` is not a valid regular expression."
                ));
            }
        }
    }
    let internal: BTreeSet<&String> = t
        .subtopologies
        .iter()
        .flat_map(|s| {
            s.changelog_topics
                .iter()
                .chain(&s.repartition_source_topics)
        })
        .map(|x| &x.name)
        .collect();
    for s in &t.subtopologies {
        if let Some(x) = s.source_topics.iter().find(|x| internal.contains(x)) {
            return invalid(format!(
                "Topic {x} is both a source topic and an internal topic."
            ));
        }
    }
    Ok(())
}

impl Member {
    fn session_deadline_ms(&self) -> i64 {
        self.last_heartbeat_ms + i64::from(self.session_timeout_ms)
    }
}

impl StreamsGroup {
    fn state(&self) -> StreamsGroupState {
        if self.members.is_empty() {
            StreamsGroupState::Empty
        } else if !self.configured.ready() {
            StreamsGroupState::NotReady
        } else if self.members.iter().all(|(id, m)| {
            m.epoch == self.assignment_epoch
                && m.revoking.is_empty()
                && self.target.get(id).is_none_or(|t| *t == m.assigned)
        }) {
            StreamsGroupState::Stable
        } else {
            StreamsGroupState::Reconciling
        }
    }

    /// Bumps the group epoch and recomputes the target assignment.
    fn rebalance(&mut self) {
        self.epoch += 1;
        let ids: BTreeSet<String> = self.members.keys().cloned().collect();
        self.target = assignor::assign(&ids, &self.tasks, &self.target);
        let processes: BTreeMap<String, String> = self
            .members
            .iter()
            .map(|(id, m)| (id.clone(), m.process_id.clone()))
            .collect();
        let stateful: BTreeSet<String> = self
            .topology
            .iter()
            .flat_map(|t| &t.subtopologies)
            .filter(|s| !s.changelog_topics.is_empty())
            .map(|s| s.id.clone())
            .collect();
        self.target_standby = assignor::assign_standby(
            &processes,
            &self.target,
            &stateful,
            self.num_standby,
            &self.target_standby,
        );
        self.assignment_epoch = self.epoch;
        self.endpoint_epoch += 1;
    }

    /// Tasks another member holds or is revoking.
    fn held_by_others(&self, member_id: &str) -> Tasks {
        let mut out = Tasks::new();
        for (id, m) in &self.members {
            if id == member_id {
                continue;
            }
            for a in [&m.assigned, &m.revoking] {
                for (s, ps) in a {
                    out.entry(s.clone()).or_default().extend(ps.iter().copied());
                }
            }
        }
        out
    }

    /// Moves the member toward its target (see the module docs).
    fn reconcile(&mut self, member_id: &str, now_ms: i64) {
        let target = self.target.get(member_id).cloned().unwrap_or_default();
        let standby = self
            .target_standby
            .get(member_id)
            .cloned()
            .unwrap_or_default();
        let held = self.held_by_others(member_id);
        let assignment_epoch = self.assignment_epoch;
        let m = self.members.get_mut(member_id).expect("a member");
        if !m.revoking.is_empty() {
            if intersect(&m.owned, &m.revoking).is_empty() {
                m.revoking.clear();
                m.revoke_deadline_ms = None;
            } else {
                m.standby = minus(&minus(&standby, &m.assigned), &m.revoking);
                return;
            }
        }
        let revoke = minus(&m.assigned, &target);
        if !revoke.is_empty() {
            m.assigned = intersect(&m.assigned, &target);
            m.revoking = revoke;
            m.revoke_deadline_ms = Some(now_ms + i64::from(m.rebalance_timeout_ms.max(0)));
            m.standby = minus(&minus(&standby, &m.assigned), &m.revoking);
            return;
        }
        m.assigned = minus(&target, &held);
        m.standby = minus(&standby, &m.assigned);
        if m.epoch != assignment_epoch {
            m.previous_epoch = m.epoch;
            m.epoch = assignment_epoch;
        }
    }

    /// The partitions each member with an endpoint reads through its
    /// active tasks.
    fn endpoints(&self) -> Vec<EndpointPartitions> {
        type ByTopic = BTreeMap<String, BTreeSet<i32>>;
        let mut by_endpoint: BTreeMap<Endpoint, (ByTopic, ByTopic)> = BTreeMap::new();
        let add = |row: &mut ByTopic, tasks: &Tasks| {
            for (s, ps) in tasks {
                for t in self.configured.inputs.get(s).into_iter().flatten() {
                    row.entry(t.clone()).or_default().extend(ps.iter().copied());
                }
            }
        };
        for m in self.members.values() {
            let Some(e) = &m.user_endpoint else {
                continue;
            };
            let (active, standby) = by_endpoint.entry(e.clone()).or_default();
            add(active, &m.assigned);
            add(standby, &m.standby);
        }
        by_endpoint
            .into_iter()
            .map(|(endpoint, (active, standby))| EndpointPartitions {
                endpoint,
                active,
                standby,
            })
            .collect()
    }
}

impl StreamsGroups {
    /// The durable state of `group_id` (None: no such group): the group
    /// without its members' session and revocation clocks.
    pub fn snapshot(&self, group_id: &str) -> Option<StreamsGroup> {
        let mut g = self.groups.get(group_id)?.clone();
        for m in g.members.values_mut() {
            m.last_heartbeat_ms = 0;
            m.revoke_deadline_ms = None;
        }
        Some(g)
    }

    /// Puts `group_id` back as `state` (None: removes it), its members'
    /// sessions, and pending revocations, starting at `now_ms`.
    pub fn restore(&mut self, group_id: &str, state: Option<StreamsGroup>, now_ms: i64) {
        match state {
            None => {
                self.groups.remove(group_id);
            }
            Some(mut g) => {
                for m in g.members.values_mut() {
                    m.last_heartbeat_ms = now_ms;
                    m.revoke_deadline_ms = (!m.revoking.is_empty())
                        .then(|| now_ms + i64::from(m.rebalance_timeout_ms.max(0)));
                }
                self.groups.insert(group_id.to_string(), g);
            }
        }
    }

    /// Whether `group_id` is a streams group here.
    pub fn contains(&self, group_id: &str) -> bool {
        self.groups.contains_key(group_id)
    }

    /// Whether `group_id` is a streams group with members.
    pub fn has_members(&self, group_id: &str) -> bool {
        self.groups
            .get(group_id)
            .is_some_and(|g| !g.members.is_empty())
    }

    /// The topology a heartbeat of `group_id` would be configured with:
    /// the one it carries when that replaces the group's, else the
    /// group's.
    pub fn topology_for(&self, group_id: &str, carried: Option<&Topology>) -> Option<Topology> {
        let current = self.groups.get(group_id).and_then(|g| g.topology.as_ref());
        match (current, carried) {
            (Some(c), Some(n)) if n.epoch > c.epoch => Some(n.clone()),
            (Some(c), _) => Some(c.clone()),
            (None, n) => n.cloned(),
        }
    }

    /// The checks of a heartbeat that change nothing: the request's
    /// fields, its topology, and a topology that differs from the group's
    /// at the same epoch. The broker runs them before it creates the
    /// topology's internal topics, so that a refused request creates none;
    /// [`heartbeat`](Self::heartbeat) runs them again.
    pub fn precheck(&self, req: &StreamsHeartbeat) -> Result<(), HeartbeatError> {
        Self::validate(req)?;
        if let (Some(t), Some(current)) = (
            &req.topology,
            self.groups
                .get(&req.group_id)
                .and_then(|g| g.topology.as_ref()),
        ) && t.epoch == current.epoch
            && t != current
        {
            return Err(same_epoch_other_topology(t.epoch));
        }
        Ok(())
    }

    fn validate(req: &StreamsHeartbeat) -> Result<(), HeartbeatError> {
        let invalid = |m: &str| Err(refuse(ErrorCode::INVALID_REQUEST, m));
        if req.group_id.is_empty() {
            return invalid("GroupId can't be empty.");
        }
        if req.member_id.is_empty() {
            return invalid("MemberId can't be empty.");
        }
        if req.member_epoch < -2 {
            return invalid("MemberEpoch is invalid.");
        }
        if req.member_epoch == 0 {
            if req.rebalance_timeout_ms <= 0 {
                return invalid("RebalanceTimeoutMs must be provided in first request.");
            }
            if req.topology.is_none() {
                return invalid("Topology must be non-null when joining the group.");
            }
            if req.process_id.is_none() {
                return invalid("ProcessId can't be null when joining the group.");
            }
        }
        if let Some(t) = &req.topology {
            validate_topology(t)?;
        }
        Ok(())
    }

    /// StreamsGroupHeartbeat at `now_ms`, against `topics` (after the
    /// caller created the internal topics [`configure()`] asked for).
    pub fn heartbeat(
        &mut self,
        req: &StreamsHeartbeat,
        topics: &Topics,
        now_ms: i64,
    ) -> Result<StreamsHeartbeatOk, HeartbeatError> {
        Self::validate(req)?;
        let timing = req.timing.unwrap_or_default();
        if req.member_epoch < 0 {
            return self.leave(req);
        }
        if req.member_epoch > 0 && !self.groups.contains_key(&req.group_id) {
            return Err(refuse(
                ErrorCode::UNKNOWN_MEMBER_ID,
                format!("Group {} has no member {}.", req.group_id, req.member_id),
            ));
        }
        let group = self.groups.entry(req.group_id.clone()).or_default();
        let mut changed = false;
        let mut status = Vec::new();

        // The topology.
        let member_topology_epoch;
        if let Some(t) = &req.topology {
            member_topology_epoch = t.epoch;
            match &group.topology {
                None => {
                    group.topology = Some(t.clone());
                    changed = true;
                }
                Some(c) if t.epoch > c.epoch => {
                    group.topology = Some(t.clone());
                    changed = true;
                }
                Some(c) if t.epoch == c.epoch && t != c => {
                    return Err(same_epoch_other_topology(t.epoch));
                }
                Some(_) => {}
            }
        } else {
            member_topology_epoch = group
                .members
                .get(&req.member_id)
                .map_or(0, |m| m.topology_epoch);
        }

        // The member.
        if req.member_epoch == 0 {
            // A (re)join: the member starts from nothing, and the
            // membership changed.
            group.members.remove(&req.member_id);
            changed = true;
            group.members.insert(
                req.member_id.clone(),
                Member {
                    epoch: 0,
                    previous_epoch: -1,
                    instance_id: req.instance_id.clone(),
                    rack_id: req.rack_id.clone(),
                    client_id: req.client_id.clone(),
                    client_host: req.client_host.clone(),
                    rebalance_timeout_ms: req.rebalance_timeout_ms,
                    topology_epoch: member_topology_epoch,
                    process_id: req.process_id.clone().unwrap_or_default(),
                    user_endpoint: req.user_endpoint.clone(),
                    client_tags: req.client_tags.clone().unwrap_or_default(),
                    last_heartbeat_ms: now_ms,
                    session_timeout_ms: timing.session_timeout_ms,
                    assigned: Tasks::new(),
                    standby: Tasks::new(),
                    revoking: Tasks::new(),
                    revoke_deadline_ms: None,
                    owned: Tasks::new(),
                    sent: None,
                },
            );
        } else {
            let Some(m) = group.members.get_mut(&req.member_id) else {
                return Err(refuse(
                    ErrorCode::UNKNOWN_MEMBER_ID,
                    format!("Member {} is not in group {}.", req.member_id, req.group_id),
                ));
            };
            // The retry of a heartbeat whose answer was lost: at the
            // previous epoch, owning nothing beyond the current assignment.
            let lost_answer = req.member_epoch < m.epoch
                && req.member_epoch == m.previous_epoch
                && req
                    .active_tasks
                    .as_ref()
                    .is_some_and(|o| minus(o, &m.assigned).is_empty());
            if lost_answer {
                m.sent = None;
            } else if req.member_epoch != m.epoch {
                return Err(refuse(
                    ErrorCode::FENCED_MEMBER_EPOCH,
                    format!(
                        "The member epoch {} is not the current one ({}): rejoin with epoch 0.",
                        req.member_epoch, m.epoch
                    ),
                ));
            }
            m.last_heartbeat_ms = now_ms;
            m.session_timeout_ms = timing.session_timeout_ms;
            m.client_id = req.client_id.clone();
            m.client_host = req.client_host.clone();
            if req.rebalance_timeout_ms > 0 {
                m.rebalance_timeout_ms = req.rebalance_timeout_ms;
            }
            if let Some(r) = &req.rack_id {
                m.rack_id = Some(r.clone());
            }
            if let Some(p) = &req.process_id {
                m.process_id = p.clone();
            }
            if req.user_endpoint.is_some() && req.user_endpoint != m.user_endpoint {
                m.user_endpoint = req.user_endpoint.clone();
                group.endpoint_epoch += 1;
            }
            if let Some(t) = &req.client_tags {
                m.client_tags = t.clone();
            }
        }
        let m = group.members.get_mut(&req.member_id).expect("present");
        if let Some(owned) = &req.active_tasks {
            m.owned = normalized(owned.clone());
        }
        if req.shutdown_application && group.shutdown.is_none() {
            group.shutdown = Some(req.member_id.clone());
        }

        // The configuration, and a new target when anything changed.
        let topology = group.topology.clone().expect("set at the first join");
        group.configured = configure(&topology, topics);
        if group.configured.tasks != group.tasks {
            group.tasks = group.configured.tasks.clone();
            changed = true;
        }
        if timing.num_standby_replicas != group.num_standby {
            group.num_standby = timing.num_standby_replicas;
            changed = true;
        }
        if changed {
            group.rebalance();
        }
        group.reconcile(&req.member_id, now_ms);

        // The answer.
        let topology_epoch = group.topology.as_ref().map_or(0, |t| t.epoch);
        if member_topology_epoch < topology_epoch {
            status.push((
                StreamsStatus::StaleTopology,
                format!(
                    "The member's topology epoch {member_topology_epoch} is lower than the group's ({topology_epoch})."
                ),
            ));
        }
        status.extend(group.configured.status.iter().cloned());
        if let Some(who) = &group.shutdown {
            status.push((
                StreamsStatus::ShutdownApplication,
                format!("Member {who} requested the shutdown of the application."),
            ));
        }
        let endpoints =
            (req.endpoint_information_epoch < group.endpoint_epoch).then(|| group.endpoints());
        let endpoint_epoch = group.endpoint_epoch;
        let m = group.members.get_mut(&req.member_id).expect("present");
        let now = (m.assigned.clone(), m.standby.clone());
        let send =
            req.member_epoch == 0 || req.active_tasks.is_some() || m.sent.as_ref() != Some(&now);
        let tasks = send.then(|| {
            m.sent = Some(now.clone());
            now
        });
        Ok(StreamsHeartbeatOk {
            member_id: req.member_id.clone(),
            member_epoch: m.epoch,
            heartbeat_interval_ms: timing.heartbeat_interval_ms,
            status,
            tasks,
            endpoint_information_epoch: endpoint_epoch,
            partitions_by_endpoint: endpoints,
        })
    }

    fn leave(&mut self, req: &StreamsHeartbeat) -> Result<StreamsHeartbeatOk, HeartbeatError> {
        let Some(group) = self.groups.get_mut(&req.group_id) else {
            return Err(refuse(
                ErrorCode::UNKNOWN_MEMBER_ID,
                format!("Group {} has no member {}.", req.group_id, req.member_id),
            ));
        };
        if group.members.remove(&req.member_id).is_none() {
            return Err(refuse(
                ErrorCode::UNKNOWN_MEMBER_ID,
                format!("Member {} is not in group {}.", req.member_id, req.group_id),
            ));
        }
        Self::after_removal(group);
        Ok(StreamsHeartbeatOk {
            member_id: req.member_id.clone(),
            member_epoch: req.member_epoch,
            heartbeat_interval_ms: 0,
            endpoint_information_epoch: group.endpoint_epoch,
            ..StreamsHeartbeatOk::default()
        })
    }

    /// A member is gone: a new target, which the others move toward at
    /// their next heartbeats (a member's epoch changes only in the answer
    /// to its own heartbeat).
    fn after_removal(group: &mut StreamsGroup) {
        group.target.retain(|id, _| group.members.contains_key(id));
        if group.members.is_empty() {
            group.shutdown = None;
        }
        group.rebalance();
    }

    /// When the next session or revocation deadline falls.
    pub fn next_deadline_ms(&self) -> Option<i64> {
        self.groups
            .values()
            .flat_map(|g| g.members.values())
            .flat_map(|m| [Some(m.session_deadline_ms()), m.revoke_deadline_ms])
            .flatten()
            .min()
    }

    /// Removes the members whose session or revocation deadline passed;
    /// returns them as (group, member).
    pub fn tick(&mut self, now_ms: i64) -> Vec<(String, String)> {
        let mut removed = Vec::new();
        for (gid, group) in &mut self.groups {
            let gone: Vec<String> = group
                .members
                .iter()
                .filter(|(_, m)| {
                    m.session_deadline_ms() <= now_ms
                        || m.revoke_deadline_ms.is_some_and(|d| d <= now_ms)
                })
                .map(|(id, _)| id.clone())
                .collect();
            if gone.is_empty() {
                continue;
            }
            for id in &gone {
                group.members.remove(id);
                removed.push((gid.clone(), id.clone()));
            }
            Self::after_removal(group);
        }
        removed
    }

    /// StreamsGroupDescribe of one group.
    pub fn describe(&self, group_id: &str) -> Option<DescribedStreamsGroup> {
        let g = self.groups.get(group_id)?;
        Some(DescribedStreamsGroup {
            state: g.state(),
            group_epoch: g.epoch,
            assignment_epoch: g.assignment_epoch,
            topology: g.topology.clone(),
            tasks: g.configured.tasks.clone(),
            members: g
                .members
                .iter()
                .map(|(id, m)| DescribedStreamsMember {
                    member_id: id.clone(),
                    member_epoch: m.epoch,
                    instance_id: m.instance_id.clone(),
                    rack_id: m.rack_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    topology_epoch: m.topology_epoch,
                    process_id: m.process_id.clone(),
                    user_endpoint: m.user_endpoint.clone(),
                    client_tags: m.client_tags.clone(),
                    assignment: m.assigned.clone(),
                    standby: m.standby.clone(),
                    target_assignment: g.target.get(id).cloned().unwrap_or_default(),
                    target_standby: g.target_standby.get(id).cloned().unwrap_or_default(),
                })
                .collect(),
        })
    }

    /// Every group with its state (ListGroups).
    pub fn list_groups(&self) -> Vec<(String, StreamsGroupState)> {
        self.groups
            .iter()
            .map(|(id, g)| (id.clone(), g.state()))
            .collect()
    }

    /// DeleteGroups: NON_EMPTY_GROUP while it has members.
    pub fn delete_group(&mut self, group_id: &str) -> Result<(), ErrorCode> {
        match self.groups.get(group_id) {
            None => Err(ErrorCode::GROUP_ID_NOT_FOUND),
            Some(g) if !g.members.is_empty() => Err(ErrorCode::NON_EMPTY_GROUP),
            Some(_) => {
                self.groups.remove(group_id);
                Ok(())
            }
        }
    }

    /// The member check of an OffsetFetch (v9+) naming a member of a
    /// streams group: it must exist (UNKNOWN_MEMBER_ID) at its current
    /// epoch (STALE_MEMBER_EPOCH). A fetch naming no member is an admin's.
    pub fn validate_fetch(
        &self,
        group_id: &str,
        check: &StreamsMemberCheck<'_>,
    ) -> Result<(), ErrorCode> {
        if check.member_id.is_empty() {
            return Ok(());
        }
        self.validate_commit(group_id, check)
    }

    /// The member check of an OffsetCommit or TxnOffsetCommit into a
    /// streams group: an admin commit (no member, epoch < 0) only while the
    /// group has no members; otherwise the member must exist
    /// (UNKNOWN_MEMBER_ID) at its current epoch (STALE_MEMBER_EPOCH).
    pub fn validate_commit(
        &self,
        group_id: &str,
        check: &StreamsMemberCheck<'_>,
    ) -> Result<(), ErrorCode> {
        let Some(g) = self.groups.get(group_id) else {
            return Ok(());
        };
        if check.member_epoch < 0 && check.member_id.is_empty() && g.members.is_empty() {
            return Ok(());
        }
        let Some(m) = g.members.get(check.member_id) else {
            return Err(ErrorCode::UNKNOWN_MEMBER_ID);
        };
        if m.epoch != check.member_epoch {
            return Err(ErrorCode::STALE_MEMBER_EPOCH);
        }
        Ok(())
    }
}
