//! What ListGroups and DescribeGroups show of classic groups.

use bytes::Bytes;

use super::coordinator::{GroupCoordinator, GroupState};

/// One member as DescribeGroups shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribedMember {
    /// MemberId.
    pub member_id: String,
    /// GroupInstanceId.
    pub group_instance_id: Option<String>,
    /// ClientId.
    pub client_id: String,
    /// ClientHost.
    pub client_host: String,
    /// Its metadata for the chosen protocol (Stable groups only, as Kafka).
    pub metadata: Bytes,
    /// Its assignment (Stable groups only, as Kafka).
    pub assignment: Bytes,
}

/// One group as DescribeGroups shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribedGroup {
    /// State ("Dead" for a group that does not exist).
    pub state: &'static str,
    /// ProtocolType.
    pub protocol_type: String,
    /// ProtocolData: the chosen protocol (Stable groups only).
    pub protocol: String,
    /// Members, by member id.
    pub members: Vec<DescribedMember>,
}

impl GroupCoordinator {
    /// DescribeGroups of one group: "Dead" with no members when it does
    /// not exist.
    pub fn describe(&self, group_id: &str) -> DescribedGroup {
        let Some(g) = self.groups.get(group_id) else {
            return DescribedGroup {
                state: "Dead",
                protocol_type: String::new(),
                protocol: String::new(),
                members: Vec::new(),
            };
        };
        let stable = g.state == GroupState::Stable;
        let protocol = g.protocol_name.clone().unwrap_or_default();
        DescribedGroup {
            state: g.state.as_str(),
            protocol_type: g.protocol_type.clone().unwrap_or_default(),
            protocol: if stable {
                protocol.clone()
            } else {
                String::new()
            },
            members: g
                .members
                .values()
                .map(|m| DescribedMember {
                    member_id: m.member_id.clone(),
                    group_instance_id: m.instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    metadata: if stable {
                        m.protocols
                            .iter()
                            .find(|(n, _)| *n == protocol)
                            .map(|(_, b)| b.clone())
                            .unwrap_or_default()
                    } else {
                        Bytes::new()
                    },
                    assignment: if stable {
                        m.assignment.clone()
                    } else {
                        Bytes::new()
                    },
                })
                .collect(),
        }
    }
}
