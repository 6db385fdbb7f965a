//! What a consumer-protocol group persists (docs/DESIGN.md D29a), and its
//! restoration after a restart.
//!
//! A [`PersistedConsumerGroup`] is the whole durable state of one group:
//! the group epoch, the target assignment and its epoch, the assignor, the
//! subscriptions as last resolved, and every member with its epoch,
//! instance id, subscriptions, current assignment, partitions pending
//! revocation with the epochs they were assigned at, and the partitions it
//! last reported owning. What is not in
//! it is time: a restored member's session (and a pending revocation's
//! deadline) starts again at the restoration, as Kafka reschedules every
//! member's session when a coordinator loads a group.
//!
//! The state machine does no I/O: [`ConsumerProtocolGroups::snapshot`]
//! gives a group's durable state, the broker compares it with what it last
//! wrote and journals it when it differs;
//! [`ConsumerProtocolGroups::restore`] puts it back.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::{Assignment, AssignmentEpochs, ConsumerProtocolGroups, Group, Member};

fn no_epoch() -> i32 {
    -1
}

/// One member as persisted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PersistedMember {
    /// Member epoch (-2: a static member that left temporarily).
    pub epoch: i32,
    /// The epoch before its last move (-1: none, or a journal older than
    /// this field).
    #[serde(default = "no_epoch")]
    pub previous_epoch: i32,
    /// `group.instance.id`.
    pub instance_id: Option<String>,
    /// `client.rack`.
    pub rack_id: Option<String>,
    /// Client id.
    pub client_id: String,
    /// Client host.
    pub client_host: String,
    /// Rebalance timeout.
    pub rebalance_timeout_ms: i32,
    /// Subscribed topic names.
    pub names: BTreeSet<String>,
    /// Subscribed regular expression.
    pub regex: Option<String>,
    /// The topics its principal may Describe (None: all).
    #[serde(default)]
    pub describable: Option<BTreeSet<String>>,
    /// The current assignment.
    pub assigned: Assignment,
    /// Partitions pending revocation.
    pub revoking: Assignment,
    /// What the member last reported owning.
    pub owned: Assignment,
    /// (topic id, partition, epoch): the epoch at which each partition of
    /// `assigned` and `revoking` was assigned to it (absent from journals
    /// older than KIP-1251 support: such partitions count as assigned at
    /// the member's epoch).
    #[serde(default)]
    pub assignment_epochs: Vec<(Uuid, i32, i32)>,
}

/// One group as persisted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PersistedConsumerGroup {
    /// Group epoch.
    pub epoch: i32,
    /// The target assignment's epoch.
    pub assignment_epoch: i32,
    /// Server assignor.
    pub assignor: String,
    /// Members by member id.
    pub members: BTreeMap<String, PersistedMember>,
    /// Target assignment by member id.
    pub target: BTreeMap<String, Assignment>,
    /// Subscriptions resolved to (topic id, partition count) by member id,
    /// as the target was computed with them.
    pub resolved: BTreeMap<String, BTreeMap<Uuid, i32>>,
}

impl ConsumerProtocolGroups {
    /// The durable state of a group (None: no such group).
    pub fn snapshot(&self, group_id: &str) -> Option<PersistedConsumerGroup> {
        let g = self.groups.get(group_id)?;
        Some(PersistedConsumerGroup {
            epoch: g.epoch,
            assignment_epoch: g.assignment_epoch,
            assignor: g.assignor.clone(),
            members: g
                .members
                .iter()
                .map(|(id, m)| {
                    (
                        id.clone(),
                        PersistedMember {
                            epoch: m.epoch,
                            previous_epoch: m.previous_epoch,
                            instance_id: m.instance_id.clone(),
                            rack_id: m.rack_id.clone(),
                            client_id: m.client_id.clone(),
                            client_host: m.client_host.clone(),
                            rebalance_timeout_ms: m.rebalance_timeout_ms,
                            names: m.names.clone(),
                            regex: m.regex.clone(),
                            describable: m.describable.clone(),
                            assigned: m.assigned.clone(),
                            revoking: m.revoking.clone(),
                            owned: m.owned.clone(),
                            assignment_epochs: m
                                .assignment_epochs
                                .iter()
                                .flat_map(|(t, ps)| ps.iter().map(|(p, e)| (*t, *p, *e)))
                                .collect(),
                        },
                    )
                })
                .collect(),
            target: g.target.clone(),
            resolved: g.resolved.clone(),
        })
    }

    /// Every group id (compaction, recovery checks).
    pub fn group_ids(&self) -> Vec<String> {
        self.groups.keys().cloned().collect()
    }

    /// Puts a group back as persisted (None removes it). Sessions and
    /// pending revocations start again at `now_ms`; the member is taken
    /// to have been sent its current assignment.
    pub fn restore(&mut self, group_id: &str, state: Option<PersistedConsumerGroup>, now_ms: i64) {
        let Some(p) = state else {
            self.groups.remove(group_id);
            return;
        };
        let members = p
            .members
            .into_iter()
            .map(|(id, m)| {
                let revoke_deadline_ms = (!m.revoking.is_empty())
                    .then(|| now_ms + i64::from(m.rebalance_timeout_ms.max(0)));
                let mut member = Member {
                    epoch: m.epoch,
                    previous_epoch: m.previous_epoch,
                    instance_id: m.instance_id,
                    rack_id: m.rack_id,
                    client_id: m.client_id,
                    client_host: m.client_host,
                    rebalance_timeout_ms: m.rebalance_timeout_ms,
                    names: m.names,
                    regex: m.regex,
                    describable: m.describable,
                    last_heartbeat_ms: now_ms,
                    // The group's own value comes back with the member's
                    // next heartbeat (at most a heartbeat interval away).
                    session_timeout_ms: self.config.session_timeout_ms,
                    sent: Some(m.assigned.clone()),
                    assigned: m.assigned,
                    revoking: m.revoking,
                    revoke_deadline_ms,
                    owned: m.owned,
                    assignment_epochs: m.assignment_epochs.into_iter().fold(
                        AssignmentEpochs::new(),
                        |mut out, (t, p, e)| {
                            out.entry(t).or_default().insert(p, e);
                            out
                        },
                    ),
                };
                member.stamp_assignment_epochs(member.epoch);
                (id, member)
            })
            .collect();
        self.groups.insert(
            group_id.to_string(),
            Group {
                epoch: p.epoch,
                assignment_epoch: p.assignment_epoch,
                assignor: p.assignor,
                members,
                target: p.target,
                resolved: p.resolved,
            },
        );
    }
}
