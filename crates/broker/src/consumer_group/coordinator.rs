//! The classic group protocol as a state machine.
//!
//! States, as Kafka's classic groups have them:
//!
//! ```text
//!  Empty ──join──▶ PreparingRebalance ──join phase ends──▶ CompletingRebalance
//!    ▲                 ▲      │ (no member left)                 │ leader's SyncGroup
//!    └─────────────────┼──────┘                                  ▼
//!                      └──── member joins, leaves, expires ── Stable
//! ```
//!
//! - **Join phase.** A JoinGroup parks until every member has rejoined (and
//!   no member id handed out by MEMBER_ID_REQUIRED is still outstanding),
//!   or until the group's rebalance timeout (the largest of its members')
//!   passes. A group leaving Empty waits `initial_rebalance_delay_ms`
//!   first, extended while new members keep arriving, never beyond the
//!   rebalance timeout. At the end, dynamic members that did not rejoin are
//!   removed, the generation rises, the protocol is chosen by vote among
//!   those every member supports, and every parked JoinGroup is answered:
//!   the leader's answer lists the members with their metadata.
//! - **Sync phase.** SyncGroup parks until the leader's SyncGroup brings
//!   the assignment; then every parked SyncGroup is answered (a member the
//!   leader left out gets empty bytes) and the group is Stable. A member
//!   that has not sent SyncGroup within the rebalance timeout after the
//!   join phase is removed and the group rebalances.
//! - **Member ids (KIP-394).** A JoinGroup v4+ without a member id gets
//!   MEMBER_ID_REQUIRED with a generated id and must join again with it;
//!   that id is *pending* until then and expires after the session timeout.
//! - **Static members (KIP-345).** A member with a `group.instance.id`
//!   joins without the extra round. When it comes back with no member id
//!   while its instance id is known, it takes over the old member's place
//!   under a new member id (the old id is fenced: FENCED_INSTANCE_ID) and,
//!   in a Stable group whose chosen protocol it does not change, gets the
//!   current generation and its old assignment without any rebalance.
//! - **Sessions.** Each member must heartbeat within its session timeout,
//!   except while it waits in JoinGroup or SyncGroup (the rebalance and
//!   sync deadlines bound those). A new member waiting in the join phase
//!   is removed after `new_member_join_timeout_ms`.
//!
//! Nothing here does I/O: the caller passes the time, carries out the
//! [`Output`]'s completions (answers to parked requests) and persists its
//! records.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use uuid::Uuid;

use super::offsets::{CommittedOffset, PendingTxnOffsets};
use super::record::GroupRecord;
use sharestream_protocol::ErrorCode;

/// Broker settings of classic groups (Kafka's `group.*` broker configs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassicGroupConfig {
    /// `group.min.session.timeout.ms` (6000).
    pub min_session_timeout_ms: i32,
    /// `group.max.session.timeout.ms` (1800000).
    pub max_session_timeout_ms: i32,
    /// `group.initial.rebalance.delay.ms` (3000).
    pub initial_rebalance_delay_ms: i32,
    /// `group.max.size` (unbounded).
    pub max_size: usize,
    /// How long a new member may wait in the join phase (300000, Kafka's
    /// `group.classic.new.member.join.timeout.ms` default).
    pub new_member_join_timeout_ms: i32,
    /// `offset.metadata.max.bytes` (4096).
    pub offset_metadata_max_bytes: usize,
}

impl Default for ClassicGroupConfig {
    fn default() -> Self {
        Self {
            min_session_timeout_ms: 6_000,
            max_session_timeout_ms: 1_800_000,
            initial_rebalance_delay_ms: 3_000,
            max_size: usize::MAX,
            new_member_join_timeout_ms: 300_000,
            offset_metadata_max_bytes: 4096,
        }
    }
}

/// Classic group states, with Kafka's names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupState {
    /// No members (offsets may exist).
    Empty,
    /// Waiting for members to (re)join.
    PreparingRebalance,
    /// Waiting for the leader's assignment.
    CompletingRebalance,
    /// Every member has its assignment.
    Stable,
}

impl GroupState {
    /// Kafka's spelling (ListGroups, DescribeGroups).
    pub fn as_str(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
        }
    }
}

/// The fields of a JoinGroup request plus what the broker knows of the
/// connection.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JoinGroupRequest {
    /// GroupId.
    pub group_id: String,
    /// MemberId ("" = unknown).
    pub member_id: String,
    /// GroupInstanceId (v5+; static membership).
    pub group_instance_id: Option<String>,
    /// ProtocolType (e.g. "consumer").
    pub protocol_type: String,
    /// Protocols: (name, metadata), most preferred first.
    pub protocols: Vec<(String, Bytes)>,
    /// SessionTimeoutMs.
    pub session_timeout_ms: i32,
    /// RebalanceTimeoutMs (v1+; the session timeout for v0).
    pub rebalance_timeout_ms: i32,
    /// Request version >= 4: a new dynamic member must ask for its id
    /// first (MEMBER_ID_REQUIRED).
    pub require_known_member_id: bool,
    /// Request version >= 9: a static leader that rejoins may be told to
    /// skip the assignment (KIP-814).
    pub supports_skip_assignment: bool,
    /// The request header's client id.
    pub client_id: String,
    /// The client's address.
    pub client_host: String,
}

/// One member as the leader's JoinGroup answer lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinedMember {
    /// MemberId.
    pub member_id: String,
    /// GroupInstanceId.
    pub group_instance_id: Option<String>,
    /// Its metadata for the chosen protocol.
    pub metadata: Bytes,
}

/// A JoinGroup answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinGroupResponse {
    /// ErrorCode.
    pub error: ErrorCode,
    /// GenerationId (-1 on error).
    pub generation_id: i32,
    /// ProtocolType.
    pub protocol_type: Option<String>,
    /// ProtocolName.
    pub protocol_name: Option<String>,
    /// Leader member id ("" on error).
    pub leader: String,
    /// SkipAssignment (v9+).
    pub skip_assignment: bool,
    /// MemberId.
    pub member_id: String,
    /// Members (only in the leader's answer).
    pub members: Vec<JoinedMember>,
}

impl JoinGroupResponse {
    /// An error answer.
    pub fn error(error: ErrorCode, member_id: impl Into<String>) -> Self {
        Self {
            error,
            generation_id: -1,
            protocol_type: None,
            protocol_name: None,
            leader: String::new(),
            skip_assignment: false,
            member_id: member_id.into(),
            members: Vec::new(),
        }
    }
}

/// The fields of a SyncGroup request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SyncGroupRequest {
    /// GroupId.
    pub group_id: String,
    /// GenerationId.
    pub generation_id: i32,
    /// MemberId.
    pub member_id: String,
    /// GroupInstanceId.
    pub group_instance_id: Option<String>,
    /// ProtocolType (v5+; checked when present).
    pub protocol_type: Option<String>,
    /// ProtocolName (v5+; checked when present).
    pub protocol_name: Option<String>,
    /// Assignments (from the leader): member id -> bytes.
    pub assignments: Vec<(String, Bytes)>,
}

/// A SyncGroup answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncGroupResponse {
    /// ErrorCode.
    pub error: ErrorCode,
    /// ProtocolType.
    pub protocol_type: Option<String>,
    /// ProtocolName.
    pub protocol_name: Option<String>,
    /// The member's assignment.
    pub assignment: Bytes,
}

impl SyncGroupResponse {
    /// An error answer.
    pub fn error(error: ErrorCode) -> Self {
        Self {
            error,
            protocol_type: None,
            protocol_name: None,
            assignment: Bytes::new(),
        }
    }
}

/// One member of a LeaveGroup request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LeaveMember {
    /// MemberId ("" = by instance id).
    pub member_id: String,
    /// GroupInstanceId.
    pub group_instance_id: Option<String>,
}

/// An answer: now, or later through a [`Completion`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply<T> {
    /// The answer.
    Now(T),
    /// The request is parked; its answer will come as a [`Completion`] for
    /// this member id.
    Parked {
        /// The member the completion will name.
        member_id: String,
    },
}

/// The answer to a parked request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Completion {
    /// A parked JoinGroup.
    Join {
        /// Group id.
        group_id: String,
        /// The member id it was parked under.
        member_id: String,
        /// The answer.
        response: JoinGroupResponse,
    },
    /// A parked SyncGroup.
    Sync {
        /// Group id.
        group_id: String,
        /// The member id it was parked under.
        member_id: String,
        /// The answer.
        response: SyncGroupResponse,
    },
}

/// What a call returns: its result, the parked answers it completed, and
/// the records to persist (before answering the request itself).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Output<T> {
    /// The call's own answer.
    pub result: T,
    /// Answers to requests parked earlier (or by this very call).
    pub completions: Vec<Completion>,
    /// Records to persist.
    pub records: Vec<GroupRecord>,
}

/// Completions and records gathered during a call.
#[derive(Debug, Default)]
pub(crate) struct Effects {
    pub completions: Vec<Completion>,
    pub records: Vec<GroupRecord>,
}

impl Effects {
    pub(crate) fn into_output<T>(self, result: T) -> Output<T> {
        Output {
            result,
            completions: self.completions,
            records: self.records,
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Member {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: i32,
    pub session_timeout_ms: i32,
    pub protocol_type: String,
    pub protocols: Vec<(String, Bytes)>,
    pub assignment: Bytes,
    pub awaiting_join: bool,
    pub awaiting_sync: bool,
    /// Joined in the current join phase (the new-member join timeout
    /// applies to it, not its session).
    pub is_new: bool,
    /// When the member's session (or new-member timeout) ends; `None` while
    /// it is parked and the group's deadlines govern it.
    pub deadline_ms: Option<i64>,
}

impl Member {
    fn vote(&self, candidates: &BTreeSet<String>) -> Option<String> {
        self.protocols
            .iter()
            .map(|(n, _)| n)
            .find(|n| candidates.contains(*n))
            .cloned()
    }

    fn metadata(&self, protocol: &str) -> Bytes {
        self.protocols
            .iter()
            .find(|(n, _)| n == protocol)
            .map(|(_, m)| m.clone())
            .unwrap_or_default()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum JoinTimer {
    /// The initial delay of a group leaving Empty: at `at`, complete unless
    /// new members arrived and time remains.
    Initial { at: i64, delay: i64, remaining: i64 },
    /// The rebalance timeout.
    Rebalance { at: i64 },
}

impl JoinTimer {
    fn at(self) -> i64 {
        match self {
            JoinTimer::Initial { at, .. } | JoinTimer::Rebalance { at } => at,
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Group {
    pub state: GroupState,
    pub previous_state: GroupState,
    pub generation_id: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub leader: Option<String>,
    pub members: BTreeMap<String, Member>,
    /// Member ids handed out with MEMBER_ID_REQUIRED, with their expiry.
    pub pending_members: BTreeMap<String, i64>,
    /// Members that have not sent SyncGroup since the join phase ended.
    pub pending_sync: BTreeSet<String>,
    /// instance id -> member id.
    pub static_members: BTreeMap<String, String>,
    pub join_timer: Option<JoinTimer>,
    /// (deadline, generation) of the sync phase.
    pub sync_deadline: Option<(i64, i32)>,
    pub new_member_added: bool,
    /// When the group entered its current state.
    pub state_since_ms: i64,
}

impl Group {
    pub(crate) fn new(now_ms: i64) -> Self {
        Self {
            state: GroupState::Empty,
            previous_state: GroupState::Empty,
            generation_id: 0,
            protocol_type: None,
            protocol_name: None,
            leader: None,
            members: BTreeMap::new(),
            pending_members: BTreeMap::new(),
            pending_sync: BTreeSet::new(),
            static_members: BTreeMap::new(),
            join_timer: None,
            sync_deadline: None,
            new_member_added: false,
            state_since_ms: now_ms,
        }
    }

    fn transition(&mut self, to: GroupState, now_ms: i64) {
        self.previous_state = self.state;
        self.state = to;
        self.state_since_ms = now_ms;
    }

    fn is_leader(&self, member_id: &str) -> bool {
        self.leader.as_deref() == Some(member_id)
    }

    fn rebalance_timeout_ms(&self) -> i64 {
        self.members
            .values()
            .map(|m| i64::from(m.rebalance_timeout_ms))
            .max()
            .unwrap_or(0)
    }

    fn awaiting_join_count(&self) -> usize {
        self.members.values().filter(|m| m.awaiting_join).count()
    }

    fn all_members_joined(&self) -> bool {
        self.members.len() == self.awaiting_join_count() && self.pending_members.is_empty()
    }

    fn candidate_protocols(&self) -> BTreeSet<String> {
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for m in self.members.values() {
            for (n, _) in &m.protocols {
                *counts.entry(n.as_str()).or_default() += 1;
            }
        }
        counts
            .into_iter()
            .filter(|(_, c)| *c == self.members.len())
            .map(|(n, _)| n.to_string())
            .collect()
    }

    /// Kafka's rule: an Empty group takes any non-empty type and protocol
    /// list; otherwise the type must match and one of the protocols must be
    /// supported by every current member.
    fn supports_protocols(&self, protocol_type: &str, protocols: &[(String, Bytes)]) -> bool {
        if self.state == GroupState::Empty {
            return !protocol_type.is_empty() && !protocols.is_empty();
        }
        if self.protocol_type.as_deref() != Some(protocol_type) {
            return false;
        }
        let candidates = self.candidate_protocols();
        protocols.iter().any(|(n, _)| candidates.contains(n))
    }

    fn select_protocol(&self) -> Option<String> {
        let candidates = self.candidate_protocols();
        let mut votes: BTreeMap<String, usize> = BTreeMap::new();
        for m in self.members.values() {
            if let Some(v) = m.vote(&candidates) {
                *votes.entry(v).or_default() += 1;
            }
        }
        // Most votes; ties broken by name so the choice is deterministic.
        votes
            .into_iter()
            .max_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.cmp(&a.0)))
            .map(|(n, _)| n)
    }

    fn add_member(&mut self, member: Member) {
        if self.members.is_empty() {
            self.protocol_type = Some(member.protocol_type.clone());
        }
        if self.leader.is_none() {
            self.leader = Some(member.member_id.clone());
        }
        if let Some(i) = &member.instance_id {
            self.static_members
                .insert(i.clone(), member.member_id.clone());
        }
        self.members.insert(member.member_id.clone(), member);
    }

    fn remove_member(&mut self, member_id: &str) -> Option<Member> {
        let m = self.members.remove(member_id)?;
        if let Some(i) = &m.instance_id
            && self.static_members.get(i).map(String::as_str) == Some(member_id)
        {
            self.static_members.remove(i);
        }
        self.pending_sync.remove(member_id);
        if self.is_leader(member_id) {
            self.leader = self.members.keys().next().cloned();
        }
        if self.members.is_empty() {
            // Kafka keeps the protocol type while Empty only in the persisted
            // record; a new first member sets it again.
            self.leader = None;
        }
        Some(m)
    }

    /// Kafka's `validateMember`: the instance id, when given, must map to
    /// this member id; the member must exist.
    fn validate_member(&self, member_id: &str, instance_id: Option<&str>) -> Result<(), ErrorCode> {
        if let Some(i) = instance_id {
            match self.static_members.get(i) {
                None => return Err(ErrorCode::UNKNOWN_MEMBER_ID),
                Some(existing) if existing != member_id => {
                    return Err(ErrorCode::FENCED_INSTANCE_ID);
                }
                Some(_) => {}
            }
        }
        if !self.members.contains_key(member_id) {
            return Err(ErrorCode::UNKNOWN_MEMBER_ID);
        }
        Ok(())
    }

    fn joined_members(&self) -> Vec<JoinedMember> {
        let protocol = self.protocol_name.clone().unwrap_or_default();
        self.members
            .values()
            .map(|m| JoinedMember {
                member_id: m.member_id.clone(),
                group_instance_id: m.instance_id.clone(),
                metadata: m.metadata(&protocol),
            })
            .collect()
    }

    fn current_join_response(&self, member_id: &str, with_members: bool) -> JoinGroupResponse {
        JoinGroupResponse {
            error: ErrorCode::NONE,
            generation_id: self.generation_id,
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol_name.clone(),
            leader: self.leader.clone().unwrap_or_default(),
            skip_assignment: false,
            member_id: member_id.to_string(),
            members: if with_members {
                self.joined_members()
            } else {
                Vec::new()
            },
        }
    }

    fn generation_record(&self, group_id: &str) -> GroupRecord {
        GroupRecord::Generation {
            group_id: group_id.to_string(),
            generation_id: self.generation_id,
            protocol_type: self.protocol_type.clone(),
        }
    }
}

/// The consumer group coordinator: classic groups and committed offsets.
#[derive(Debug, Clone, Default)]
pub struct GroupCoordinator {
    pub(crate) config: ClassicGroupConfig,
    pub(crate) groups: BTreeMap<String, Group>,
    /// Committed offsets: group -> (topic, partition) -> offset.
    pub(crate) offsets: BTreeMap<String, BTreeMap<(String, i32), CommittedOffset>>,
    /// Transactional offsets waiting for their marker, by producer id.
    pub(crate) pending_txn: BTreeMap<i64, PendingTxnOffsets>,
    /// Highest transactions-v2 marker epoch applied, by producer id.
    pub(crate) marker_floor: BTreeMap<i64, i16>,
}

impl GroupCoordinator {
    /// A coordinator with no groups.
    pub fn new(config: ClassicGroupConfig) -> Self {
        Self {
            config,
            ..Self::default()
        }
    }

    /// The settings.
    pub fn config(&self) -> &ClassicGroupConfig {
        &self.config
    }

    /// The group's state, `None` for a group that does not exist.
    pub fn group_state(&self, group_id: &str) -> Option<GroupState> {
        self.groups.get(group_id).map(|g| g.state)
    }

    /// The group's generation, `None` for a group that does not exist.
    pub fn generation(&self, group_id: &str) -> Option<i32> {
        self.groups.get(group_id).map(|g| g.generation_id)
    }

    /// The group's member ids.
    pub fn member_ids(&self, group_id: &str) -> Vec<String> {
        self.groups
            .get(group_id)
            .map(|g| g.members.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// The group's leader.
    pub fn leader(&self, group_id: &str) -> Option<String> {
        self.groups.get(group_id).and_then(|g| g.leader.clone())
    }

    /// Classic groups and their states, for ListGroups.
    pub fn list_groups(&self) -> Vec<(String, GroupState, String)> {
        let mut ids: BTreeSet<&String> = self.groups.keys().collect();
        ids.extend(self.offsets.keys());
        ids.into_iter()
            .map(|id| match self.groups.get(id) {
                Some(g) => (
                    id.clone(),
                    g.state,
                    g.protocol_type.clone().unwrap_or_default(),
                ),
                None => (id.clone(), GroupState::Empty, String::new()),
            })
            .collect()
    }

    fn new_member_id(prefix: &str) -> String {
        format!("{prefix}-{}", Uuid::new_v4())
    }

    /// JoinGroup.
    pub fn join(
        &mut self,
        req: &JoinGroupRequest,
        now_ms: i64,
    ) -> Output<Reply<JoinGroupResponse>> {
        let mut fx = Effects::default();
        let result = self.join_inner(req, now_ms, &mut fx);
        fx.into_output(result)
    }

    fn join_inner(
        &mut self,
        req: &JoinGroupRequest,
        now_ms: i64,
        fx: &mut Effects,
    ) -> Reply<JoinGroupResponse> {
        let err = |code: ErrorCode, id: &str| Reply::Now(JoinGroupResponse::error(code, id));
        if req.group_id.is_empty() {
            return err(ErrorCode::INVALID_GROUP_ID, &req.member_id);
        }
        if req.session_timeout_ms < self.config.min_session_timeout_ms
            || req.session_timeout_ms > self.config.max_session_timeout_ms
        {
            return err(ErrorCode::INVALID_SESSION_TIMEOUT, &req.member_id);
        }
        let unknown = req.member_id.is_empty();
        if !self.groups.contains_key(&req.group_id) {
            if !unknown {
                return err(ErrorCode::UNKNOWN_MEMBER_ID, &req.member_id);
            }
            self.groups.insert(req.group_id.clone(), Group::new(now_ms));
        }
        let max_size = self.config.max_size;
        let group = self.groups.get_mut(&req.group_id).expect("present");
        let accept = match group.state {
            GroupState::Empty => true,
            GroupState::PreparingRebalance => {
                group
                    .members
                    .get(&req.member_id)
                    .is_some_and(|m| m.awaiting_join)
                    || group.awaiting_join_count() < max_size
            }
            GroupState::CompletingRebalance | GroupState::Stable => {
                group.members.contains_key(&req.member_id) || group.members.len() < max_size
            }
        };
        if !accept {
            // Kafka removes the member so that the group shrinks to its cap.
            if group.remove_member(&req.member_id).is_some() {
                self.maybe_prepare_rebalance_or_complete_join(&req.group_id, now_ms, fx);
            }
            return err(ErrorCode::GROUP_MAX_SIZE_REACHED, "");
        }
        if unknown {
            self.join_new_member(req, now_ms, fx)
        } else {
            self.join_existing_member(req, now_ms, fx)
        }
    }

    fn join_new_member(
        &mut self,
        req: &JoinGroupRequest,
        now_ms: i64,
        fx: &mut Effects,
    ) -> Reply<JoinGroupResponse> {
        let group = self.groups.get_mut(&req.group_id).expect("present");
        if !group.supports_protocols(&req.protocol_type, &req.protocols) {
            return Reply::Now(JoinGroupResponse::error(
                ErrorCode::INCONSISTENT_GROUP_PROTOCOL,
                "",
            ));
        }
        match &req.group_instance_id {
            Some(instance) => {
                let new_id = Self::new_member_id(instance);
                match group.static_members.get(instance).cloned() {
                    Some(old_id) => self.replace_static_member(req, &old_id, &new_id, now_ms, fx),
                    None => self.add_member_and_rebalance(req, new_id, now_ms, fx),
                }
            }
            None => {
                let new_id = Self::new_member_id(&req.client_id);
                if req.require_known_member_id {
                    let expiry = now_ms + i64::from(req.session_timeout_ms);
                    group.pending_members.insert(new_id.clone(), expiry);
                    Reply::Now(JoinGroupResponse::error(
                        ErrorCode::MEMBER_ID_REQUIRED,
                        new_id,
                    ))
                } else {
                    self.add_member_and_rebalance(req, new_id, now_ms, fx)
                }
            }
        }
    }

    fn join_existing_member(
        &mut self,
        req: &JoinGroupRequest,
        now_ms: i64,
        fx: &mut Effects,
    ) -> Reply<JoinGroupResponse> {
        let group = self.groups.get_mut(&req.group_id).expect("present");
        let member_id = req.member_id.clone();
        if !group.supports_protocols(&req.protocol_type, &req.protocols) {
            return Reply::Now(JoinGroupResponse::error(
                ErrorCode::INCONSISTENT_GROUP_PROTOCOL,
                member_id,
            ));
        }
        if group.pending_members.contains_key(&member_id) {
            if req.group_instance_id.is_some() {
                // A pending id was handed to a dynamic member; a static
                // member cannot hold one.
                return Reply::Now(JoinGroupResponse::error(
                    ErrorCode::INVALID_REQUEST,
                    member_id,
                ));
            }
            group.pending_members.remove(&member_id);
            return self.add_member_and_rebalance(req, member_id, now_ms, fx);
        }
        if let Err(code) = group.validate_member(&member_id, req.group_instance_id.as_deref()) {
            return Reply::Now(JoinGroupResponse::error(code, member_id));
        }
        let matches = group.members[&member_id].protocols == req.protocols;
        match group.state {
            GroupState::PreparingRebalance => {
                self.update_member_and_rebalance(req, now_ms, fx);
                Reply::Parked { member_id }
            }
            GroupState::CompletingRebalance if matches => {
                // The member lost its JoinGroup answer: the same answer again.
                let leader = group.is_leader(&member_id);
                Reply::Now(group.current_join_response(&member_id, leader))
            }
            GroupState::Stable if matches && !group.is_leader(&member_id) => {
                Reply::Now(group.current_join_response(&member_id, false))
            }
            GroupState::CompletingRebalance | GroupState::Stable => {
                // Changed metadata, or the leader asking for a new
                // assignment (e.g. topic metadata changed).
                self.update_member_and_rebalance(req, now_ms, fx);
                Reply::Parked { member_id }
            }
            GroupState::Empty => Reply::Now(JoinGroupResponse::error(
                ErrorCode::UNKNOWN_MEMBER_ID,
                member_id,
            )),
        }
    }

    fn add_member_and_rebalance(
        &mut self,
        req: &JoinGroupRequest,
        member_id: String,
        now_ms: i64,
        fx: &mut Effects,
    ) -> Reply<JoinGroupResponse> {
        let new_member_timeout = i64::from(self.config.new_member_join_timeout_ms);
        let group = self.groups.get_mut(&req.group_id).expect("present");
        if group.state == GroupState::PreparingRebalance
            && group.previous_state == GroupState::Empty
        {
            group.new_member_added = true;
        }
        group.add_member(Member {
            member_id: member_id.clone(),
            instance_id: req.group_instance_id.clone(),
            client_id: req.client_id.clone(),
            client_host: req.client_host.clone(),
            rebalance_timeout_ms: req.rebalance_timeout_ms,
            session_timeout_ms: req.session_timeout_ms,
            protocol_type: req.protocol_type.clone(),
            protocols: req.protocols.clone(),
            assignment: Bytes::new(),
            awaiting_join: true,
            awaiting_sync: false,
            is_new: true,
            deadline_ms: Some(now_ms + new_member_timeout),
        });
        self.maybe_prepare_rebalance_or_complete_join(&req.group_id, now_ms, fx);
        Reply::Parked { member_id }
    }

    fn update_member_and_rebalance(
        &mut self,
        req: &JoinGroupRequest,
        now_ms: i64,
        fx: &mut Effects,
    ) {
        let group = self.groups.get_mut(&req.group_id).expect("present");
        let m = group.members.get_mut(&req.member_id).expect("validated");
        m.protocols = req.protocols.clone();
        m.rebalance_timeout_ms = req.rebalance_timeout_ms;
        m.session_timeout_ms = req.session_timeout_ms;
        m.awaiting_join = true;
        m.deadline_ms = None;
        self.maybe_prepare_rebalance_or_complete_join(&req.group_id, now_ms, fx);
    }

    fn replace_static_member(
        &mut self,
        req: &JoinGroupRequest,
        old_id: &str,
        new_id: &str,
        now_ms: i64,
        fx: &mut Effects,
    ) -> Reply<JoinGroupResponse> {
        let group_id = req.group_id.clone();
        let group = self.groups.get_mut(&group_id).expect("present");
        let Some(mut member) = group.members.remove(old_id) else {
            return Reply::Now(JoinGroupResponse::error(ErrorCode::UNKNOWN_MEMBER_ID, ""));
        };
        // Fence whatever the old incarnation has parked.
        if member.awaiting_join {
            fx.completions.push(Completion::Join {
                group_id: group_id.clone(),
                member_id: old_id.to_string(),
                response: JoinGroupResponse::error(ErrorCode::FENCED_INSTANCE_ID, old_id),
            });
        }
        if member.awaiting_sync {
            fx.completions.push(Completion::Sync {
                group_id: group_id.clone(),
                member_id: old_id.to_string(),
                response: SyncGroupResponse::error(ErrorCode::FENCED_INSTANCE_ID),
            });
        }
        let previous_leader = group.leader.clone();
        let old_protocols = std::mem::replace(&mut member.protocols, req.protocols.clone());
        member.member_id = new_id.to_string();
        member.rebalance_timeout_ms = req.rebalance_timeout_ms;
        member.session_timeout_ms = req.session_timeout_ms;
        member.client_id = req.client_id.clone();
        member.client_host = req.client_host.clone();
        member.awaiting_join = true;
        member.awaiting_sync = false;
        member.deadline_ms = Some(now_ms + i64::from(req.session_timeout_ms));
        let _ = old_protocols;
        group.members.insert(new_id.to_string(), member);
        if group.pending_sync.remove(old_id) {
            group.pending_sync.insert(new_id.to_string());
        }
        if group.is_leader(old_id) {
            group.leader = Some(new_id.to_string());
        }
        if let Some(i) = &req.group_instance_id {
            group.static_members.insert(i.clone(), new_id.to_string());
        }
        match group.state {
            GroupState::Stable => {
                if group.select_protocol() == group.protocol_name {
                    // KIP-345: no rebalance; the member gets the current
                    // generation and keeps its assignment.
                    let m = group.members.get_mut(new_id).expect("inserted");
                    m.awaiting_join = false;
                    let is_leader = group.is_leader(new_id);
                    let mut resp = group.current_join_response(new_id, false);
                    if req.supports_skip_assignment {
                        if is_leader {
                            resp.members = group.joined_members();
                            resp.skip_assignment = true;
                        }
                    } else {
                        // Older clients: a rejoining leader must not think
                        // it leads, or it would reassign (KIP-814).
                        resp.leader = previous_leader.unwrap_or_default();
                        if resp.leader == new_id {
                            resp.leader = old_id.to_string();
                        }
                    }
                    fx.records.push(group.generation_record(&group_id));
                    Reply::Now(resp)
                } else {
                    self.maybe_prepare_rebalance_or_complete_join(&group_id, now_ms, fx);
                    Reply::Parked {
                        member_id: new_id.to_string(),
                    }
                }
            }
            GroupState::CompletingRebalance => {
                // The leader may have been given the old id: start over.
                self.prepare_rebalance(&group_id, now_ms, fx);
                Reply::Parked {
                    member_id: new_id.to_string(),
                }
            }
            GroupState::PreparingRebalance => {
                self.maybe_complete_join_phase(&group_id, now_ms, fx);
                Reply::Parked {
                    member_id: new_id.to_string(),
                }
            }
            GroupState::Empty => {
                // Cannot hold a static member; treat as a fresh join.
                self.maybe_prepare_rebalance_or_complete_join(&group_id, now_ms, fx);
                Reply::Parked {
                    member_id: new_id.to_string(),
                }
            }
        }
    }

    fn maybe_prepare_rebalance_or_complete_join(
        &mut self,
        group_id: &str,
        now_ms: i64,
        fx: &mut Effects,
    ) {
        let state = self.groups[group_id].state;
        match state {
            GroupState::Empty | GroupState::CompletingRebalance | GroupState::Stable => {
                self.prepare_rebalance(group_id, now_ms, fx)
            }
            GroupState::PreparingRebalance => self.maybe_complete_join_phase(group_id, now_ms, fx),
        }
    }

    fn prepare_rebalance(&mut self, group_id: &str, now_ms: i64, fx: &mut Effects) {
        let initial_delay = i64::from(self.config.initial_rebalance_delay_ms);
        let group = self.groups.get_mut(group_id).expect("present");
        if group.state == GroupState::CompletingRebalance {
            // Parked SyncGroups learn that a new round started.
            for m in group.members.values_mut() {
                m.assignment = Bytes::new();
                if m.awaiting_sync {
                    m.awaiting_sync = false;
                    m.deadline_ms = Some(now_ms + i64::from(m.session_timeout_ms));
                    fx.completions.push(Completion::Sync {
                        group_id: group_id.to_string(),
                        member_id: m.member_id.clone(),
                        response: SyncGroupResponse::error(ErrorCode::REBALANCE_IN_PROGRESS),
                    });
                }
            }
        }
        group.pending_sync.clear();
        group.sync_deadline = None;
        let initial = group.state == GroupState::Empty;
        group.transition(GroupState::PreparingRebalance, now_ms);
        if initial {
            let remaining = (group.rebalance_timeout_ms() - initial_delay).max(0);
            group.join_timer = Some(JoinTimer::Initial {
                at: now_ms + initial_delay,
                delay: initial_delay,
                remaining,
            });
        } else if group.all_members_joined() {
            self.complete_join(group_id, now_ms, fx);
        } else {
            group.join_timer = Some(JoinTimer::Rebalance {
                at: now_ms + group.rebalance_timeout_ms(),
            });
        }
    }

    fn maybe_complete_join_phase(&mut self, group_id: &str, now_ms: i64, fx: &mut Effects) {
        let group = &self.groups[group_id];
        if group.state == GroupState::PreparingRebalance
            && group.all_members_joined()
            && group.previous_state != GroupState::Empty
        {
            self.complete_join(group_id, now_ms, fx);
        }
    }

    /// Ends the join phase (Kafka's `completeClassicGroupJoin`).
    fn complete_join(&mut self, group_id: &str, now_ms: i64, fx: &mut Effects) {
        let group = self.groups.get_mut(group_id).expect("present");
        group.join_timer = None;
        let gone: Vec<String> = group
            .members
            .values()
            .filter(|m| !m.awaiting_join && m.instance_id.is_none())
            .map(|m| m.member_id.clone())
            .collect();
        for id in gone {
            group.remove_member(&id);
        }
        // A leader that did not rejoin hands over to one that did.
        let leader_joined = group
            .leader
            .as_ref()
            .and_then(|l| group.members.get(l))
            .is_some_and(|m| m.awaiting_join);
        if !leader_joined
            && let Some(id) = group
                .members
                .values()
                .find(|m| m.awaiting_join)
                .map(|m| m.member_id.clone())
        {
            group.leader = Some(id);
        }
        let leader_joined = group
            .leader
            .as_ref()
            .and_then(|l| group.members.get(l))
            .is_some_and(|m| m.awaiting_join);
        if !group.members.is_empty() && !leader_joined {
            // Only static members that have not rejoined: wait another round
            // (their sessions will remove them if they are gone).
            group.join_timer = Some(JoinTimer::Rebalance {
                at: now_ms + group.rebalance_timeout_ms(),
            });
            return;
        }
        group.generation_id += 1;
        if group.members.is_empty() {
            group.protocol_name = None;
            group.transition(GroupState::Empty, now_ms);
            group.pending_sync.clear();
            fx.records.push(group.generation_record(group_id));
            return;
        }
        group.protocol_name = group.select_protocol();
        group.transition(GroupState::CompletingRebalance, now_ms);
        group.pending_sync.clear();
        fx.records.push(group.generation_record(group_id));
        let leader = group.leader.clone().unwrap_or_default();
        let all = group.joined_members();
        let ids: Vec<String> = group.members.keys().cloned().collect();
        for id in ids {
            let mut resp = group.current_join_response(&id, false);
            if id == leader {
                resp.members = all.clone();
            }
            let m = group.members.get_mut(&id).expect("listed");
            if m.awaiting_join {
                m.awaiting_join = false;
                fx.completions.push(Completion::Join {
                    group_id: group_id.to_string(),
                    member_id: id.clone(),
                    response: resp,
                });
            }
            m.is_new = false;
            m.deadline_ms = Some(now_ms + i64::from(m.session_timeout_ms));
            group.pending_sync.insert(id);
        }
        group.sync_deadline = Some((now_ms + group.rebalance_timeout_ms(), group.generation_id));
    }

    /// SyncGroup.
    pub fn sync(
        &mut self,
        req: &SyncGroupRequest,
        now_ms: i64,
    ) -> Output<Reply<SyncGroupResponse>> {
        let mut fx = Effects::default();
        let result = self.sync_inner(req, now_ms, &mut fx);
        fx.into_output(result)
    }

    fn sync_inner(
        &mut self,
        req: &SyncGroupRequest,
        now_ms: i64,
        fx: &mut Effects,
    ) -> Reply<SyncGroupResponse> {
        let err = |code| Reply::Now(SyncGroupResponse::error(code));
        if req.group_id.is_empty() {
            return err(ErrorCode::INVALID_GROUP_ID);
        }
        let Some(group) = self.groups.get_mut(&req.group_id) else {
            return err(ErrorCode::UNKNOWN_MEMBER_ID);
        };
        if let Err(code) = group.validate_member(&req.member_id, req.group_instance_id.as_deref()) {
            return err(code);
        }
        if req.generation_id != group.generation_id {
            return err(ErrorCode::ILLEGAL_GENERATION);
        }
        let inconsistent = |asked: &Option<String>, ours: &Option<String>| {
            asked.is_some() && ours.is_some() && asked != ours
        };
        if inconsistent(&req.protocol_type, &group.protocol_type)
            || inconsistent(&req.protocol_name, &group.protocol_name)
        {
            return err(ErrorCode::INCONSISTENT_GROUP_PROTOCOL);
        }
        match group.state {
            GroupState::Empty => err(ErrorCode::UNKNOWN_MEMBER_ID),
            GroupState::PreparingRebalance => err(ErrorCode::REBALANCE_IN_PROGRESS),
            GroupState::CompletingRebalance => {
                group.pending_sync.remove(&req.member_id);
                let m = group.members.get_mut(&req.member_id).expect("validated");
                m.awaiting_sync = true;
                m.deadline_ms = None;
                if group.is_leader(&req.member_id) {
                    let given: BTreeMap<&str, &Bytes> = req
                        .assignments
                        .iter()
                        .map(|(id, a)| (id.as_str(), a))
                        .collect();
                    for m in group.members.values_mut() {
                        m.assignment = given
                            .get(m.member_id.as_str())
                            .map(|b| (*b).clone())
                            .unwrap_or_default();
                    }
                    group.transition(GroupState::Stable, now_ms);
                    if group.pending_sync.is_empty() {
                        group.sync_deadline = None;
                    }
                    fx.records.push(group.generation_record(&req.group_id));
                    for m in group.members.values_mut() {
                        if m.awaiting_sync {
                            m.awaiting_sync = false;
                            m.deadline_ms = Some(now_ms + i64::from(m.session_timeout_ms));
                            fx.completions.push(Completion::Sync {
                                group_id: req.group_id.clone(),
                                member_id: m.member_id.clone(),
                                response: SyncGroupResponse {
                                    error: ErrorCode::NONE,
                                    protocol_type: group.protocol_type.clone(),
                                    protocol_name: group.protocol_name.clone(),
                                    assignment: m.assignment.clone(),
                                },
                            });
                        }
                    }
                } else if group.pending_sync.is_empty() {
                    group.sync_deadline = None;
                }
                Reply::Parked {
                    member_id: req.member_id.clone(),
                }
            }
            GroupState::Stable => {
                group.pending_sync.remove(&req.member_id);
                if group.pending_sync.is_empty() {
                    group.sync_deadline = None;
                }
                let m = group.members.get_mut(&req.member_id).expect("validated");
                m.deadline_ms = Some(now_ms + i64::from(m.session_timeout_ms));
                Reply::Now(SyncGroupResponse {
                    error: ErrorCode::NONE,
                    protocol_type: group.protocol_type.clone(),
                    protocol_name: group.protocol_name.clone(),
                    assignment: m.assignment.clone(),
                })
            }
        }
    }

    /// Heartbeat: the error code to answer.
    pub fn heartbeat(
        &mut self,
        group_id: &str,
        member_id: &str,
        group_instance_id: Option<&str>,
        generation_id: i32,
        now_ms: i64,
    ) -> ErrorCode {
        if group_id.is_empty() {
            return ErrorCode::INVALID_GROUP_ID;
        }
        let Some(group) = self.groups.get_mut(group_id) else {
            return ErrorCode::UNKNOWN_MEMBER_ID;
        };
        if let Err(code) = group.validate_member(member_id, group_instance_id) {
            return code;
        }
        if generation_id != group.generation_id {
            return ErrorCode::ILLEGAL_GENERATION;
        }
        let state = group.state;
        let m = group.members.get_mut(member_id).expect("validated");
        match state {
            GroupState::Empty => ErrorCode::UNKNOWN_MEMBER_ID,
            GroupState::PreparingRebalance => {
                if !m.awaiting_join {
                    m.deadline_ms = Some(now_ms + i64::from(m.session_timeout_ms));
                }
                ErrorCode::REBALANCE_IN_PROGRESS
            }
            GroupState::CompletingRebalance | GroupState::Stable => {
                if !m.awaiting_sync {
                    m.deadline_ms = Some(now_ms + i64::from(m.session_timeout_ms));
                }
                ErrorCode::NONE
            }
        }
    }

    /// LeaveGroup (v3+ batches members; older versions send one member id):
    /// the top-level error and one code per member, in request order.
    pub fn leave(
        &mut self,
        group_id: &str,
        members: &[LeaveMember],
        now_ms: i64,
    ) -> Output<Result<Vec<ErrorCode>, ErrorCode>> {
        let mut fx = Effects::default();
        if group_id.is_empty() {
            return fx.into_output(Err(ErrorCode::INVALID_GROUP_ID));
        }
        let Some(group) = self.groups.get_mut(group_id) else {
            return fx.into_output(Err(ErrorCode::UNKNOWN_MEMBER_ID));
        };
        let mut codes = Vec::with_capacity(members.len());
        let mut removed = false;
        for lm in members {
            let target = if lm.member_id.is_empty() {
                match lm
                    .group_instance_id
                    .as_ref()
                    .and_then(|i| group.static_members.get(i))
                {
                    Some(id) => Ok(id.clone()),
                    None => Err(ErrorCode::UNKNOWN_MEMBER_ID),
                }
            } else if group.pending_members.remove(&lm.member_id).is_some() {
                codes.push(ErrorCode::NONE);
                continue;
            } else {
                group
                    .validate_member(&lm.member_id, lm.group_instance_id.as_deref())
                    .map(|()| lm.member_id.clone())
            };
            match target {
                Ok(id) => {
                    if let Some(m) = group.remove_member(&id) {
                        park_answers_on_removal(group_id, &m, &mut fx);
                        removed = true;
                    }
                    codes.push(ErrorCode::NONE);
                }
                Err(code) => codes.push(code),
            }
        }
        if removed {
            match group.state {
                GroupState::Stable | GroupState::CompletingRebalance => {
                    self.maybe_prepare_rebalance_or_complete_join(group_id, now_ms, &mut fx)
                }
                GroupState::PreparingRebalance => {
                    self.maybe_complete_join_phase(group_id, now_ms, &mut fx)
                }
                GroupState::Empty => {}
            }
        }
        fx.into_output(Ok(codes))
    }

    /// Runs the timers due at `now_ms`: pending member ids and sessions
    /// expire, join phases end at their deadline, members that did not
    /// sync in time are removed.
    pub fn tick(&mut self, now_ms: i64) -> Output<()> {
        let mut fx = Effects::default();
        let ids: Vec<String> = self.groups.keys().cloned().collect();
        for group_id in ids {
            self.tick_group(&group_id, now_ms, &mut fx);
        }
        fx.into_output(())
    }

    fn tick_group(&mut self, group_id: &str, now_ms: i64, fx: &mut Effects) {
        let group = self.groups.get_mut(group_id).expect("listed");
        // Pending member ids that were never used.
        let before = group.pending_members.len();
        group.pending_members.retain(|_, at| *at > now_ms);
        if group.pending_members.len() != before {
            self.maybe_complete_join_phase(group_id, now_ms, fx);
        }
        // Sessions (and the new-member join timeout).
        let group = self.groups.get_mut(group_id).expect("listed");
        let expired: Vec<String> = group
            .members
            .values()
            .filter(|m| m.deadline_ms.is_some_and(|d| d <= now_ms))
            .map(|m| m.member_id.clone())
            .collect();
        for id in expired {
            let group = self.groups.get_mut(group_id).expect("listed");
            let Some(m) = group.members.get_mut(&id) else {
                continue;
            };
            if !m.is_new && (m.awaiting_join || m.awaiting_sync) {
                // Parked: the group's deadlines govern it.
                m.deadline_ms = None;
                continue;
            }
            let m = group.remove_member(&id).expect("present");
            park_answers_on_removal(group_id, &m, fx);
            match group.state {
                GroupState::Stable | GroupState::CompletingRebalance => {
                    self.maybe_prepare_rebalance_or_complete_join(group_id, now_ms, fx)
                }
                GroupState::PreparingRebalance => {
                    if group.all_members_joined() {
                        self.complete_join(group_id, now_ms, fx);
                    }
                }
                GroupState::Empty => {}
            }
        }
        // The join phase's deadline.
        let initial_delay = i64::from(self.config.initial_rebalance_delay_ms);
        // (A zero initial delay reschedules at `now`: run it again; the
        // bound only guards against a configuration with zero timeouts.)
        for _ in 0..4 {
            let group = self.groups.get_mut(group_id).expect("listed");
            let Some(timer) = group.join_timer else {
                break;
            };
            if timer.at() > now_ms {
                break;
            }
            match timer {
                JoinTimer::Initial {
                    delay, remaining, ..
                } if group.new_member_added && remaining > 0 => {
                    group.new_member_added = false;
                    let next_delay = initial_delay.min(remaining);
                    group.join_timer = Some(JoinTimer::Initial {
                        at: now_ms + next_delay,
                        delay: next_delay,
                        remaining: (remaining - delay).max(0),
                    });
                }
                _ => self.complete_join(group_id, now_ms, fx),
            }
        }
        // Members that did not sync in time.
        let group = self.groups.get_mut(group_id).expect("listed");
        if let Some((at, generation)) = group.sync_deadline
            && at <= now_ms
        {
            group.sync_deadline = None;
            if generation == group.generation_id
                && matches!(
                    group.state,
                    GroupState::CompletingRebalance | GroupState::Stable
                )
                && !group.pending_sync.is_empty()
            {
                let late: Vec<String> = group.pending_sync.iter().cloned().collect();
                for id in late {
                    if let Some(m) = group.remove_member(&id) {
                        park_answers_on_removal(group_id, &m, fx);
                    }
                }
                self.prepare_rebalance(group_id, now_ms, fx);
            }
        }
    }

    /// The earliest time [`tick`](Self::tick) has something to do.
    pub fn next_deadline_ms(&self) -> Option<i64> {
        self.groups
            .values()
            .flat_map(|g| {
                g.pending_members
                    .values()
                    .copied()
                    .chain(g.members.values().filter_map(|m| m.deadline_ms))
                    .chain(g.join_timer.map(JoinTimer::at))
                    .chain(g.sync_deadline.map(|(at, _)| at))
            })
            .min()
    }

    /// Answers every parked request with `code` and forgets membership
    /// (broker shutdown).
    pub fn release_all(&mut self, code: ErrorCode) -> Vec<Completion> {
        let mut out = Vec::new();
        for (group_id, g) in &mut self.groups {
            for m in g.members.values_mut() {
                if m.awaiting_join {
                    m.awaiting_join = false;
                    out.push(Completion::Join {
                        group_id: group_id.clone(),
                        member_id: m.member_id.clone(),
                        response: JoinGroupResponse::error(code, m.member_id.clone()),
                    });
                }
                if m.awaiting_sync {
                    m.awaiting_sync = false;
                    out.push(Completion::Sync {
                        group_id: group_id.clone(),
                        member_id: m.member_id.clone(),
                        response: SyncGroupResponse::error(code),
                    });
                }
            }
        }
        out
    }
}

/// A removed member's parked JoinGroup gets UNKNOWN_MEMBER_ID (it may retry
/// as a new member); a parked SyncGroup gets the same.
fn park_answers_on_removal(group_id: &str, m: &Member, fx: &mut Effects) {
    if m.awaiting_join {
        fx.completions.push(Completion::Join {
            group_id: group_id.to_string(),
            member_id: m.member_id.clone(),
            response: JoinGroupResponse::error(ErrorCode::UNKNOWN_MEMBER_ID, ""),
        });
    }
    if m.awaiting_sync {
        fx.completions.push(Completion::Sync {
            group_id: group_id.to_string(),
            member_id: m.member_id.clone(),
            response: SyncGroupResponse::error(ErrorCode::UNKNOWN_MEMBER_ID),
        });
    }
}
