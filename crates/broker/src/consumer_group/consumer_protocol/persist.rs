//! What a consumer-protocol group persists (docs/DESIGN.md D29a), and its
//! restoration after a restart.
//!
//! A [`PersistedConsumerGroup`] is the whole durable state of one group:
//! the group epoch, the target assignment and its epoch, the assignor, the
//! subscriptions as last resolved, and every member with its epoch,
//! instance id, subscriptions, current assignment, partitions pending
//! revocation and the partitions it last reported owning. What is not in
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

use super::{Assignment, ConsumerProtocolGroups, Group, Member};

/// One member as persisted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PersistedMember {
    /// Member epoch (-2: a static member that left temporarily).
    pub epoch: i32,
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
                (
                    id,
                    Member {
                        epoch: m.epoch,
                        instance_id: m.instance_id,
                        rack_id: m.rack_id,
                        client_id: m.client_id,
                        client_host: m.client_host,
                        rebalance_timeout_ms: m.rebalance_timeout_ms,
                        names: m.names,
                        regex: m.regex,
                        describable: m.describable,
                        last_heartbeat_ms: now_ms,
                        sent: Some(m.assigned.clone()),
                        assigned: m.assigned,
                        revoking: m.revoking,
                        revoke_deadline_ms,
                        owned: m.owned,
                    },
                )
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
