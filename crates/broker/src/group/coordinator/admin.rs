//! Administrative operations on share groups: the emptiness checks of
//! AlterShareGroupOffsets, DeleteShareGroupOffsets and DeleteGroups, and
//! the removal of a group.
//!
//! Kafka's rules (GroupMetadataManager, Kafka 4.4): altering offsets
//! creates the group when it does not exist yet (so that an operator can
//! place a new group's start offsets before its first consumer arrives) and
//! refuses a group with members (NON_EMPTY_GROUP); deleting offsets or the
//! group needs an existing share group (GROUP_ID_NOT_FOUND) without members
//! (NON_EMPTY_GROUP). Group configs are kept when a group is deleted: in
//! Kafka they live apart from the group, in the cluster metadata.

use super::{GroupError, ShareGroupCoordinator};
use sharestream_protocol::ErrorCode;

impl ShareGroupCoordinator {
    /// For AlterShareGroupOffsets: the group, created empty if it does not
    /// exist, must have no members.
    pub fn ensure_empty_group(&mut self, group_id: &str) -> Result<(), GroupError> {
        if group_id.is_empty() {
            return Err(GroupError::new(
                ErrorCode::INVALID_GROUP_ID,
                "The group id must not be empty.",
            ));
        }
        let group = self.groups.entry(group_id.to_string()).or_default();
        if group.members.is_empty() {
            Ok(())
        } else {
            Err(non_empty(group_id))
        }
    }

    /// For DeleteShareGroupOffsets and DeleteGroups: the group must exist
    /// and have no members.
    pub fn check_empty_group(&self, group_id: &str) -> Result<(), GroupError> {
        if group_id.is_empty() {
            return Err(GroupError::new(
                ErrorCode::INVALID_GROUP_ID,
                "The group id must not be empty.",
            ));
        }
        match self.groups.get(group_id) {
            None => Err(GroupError::new(
                ErrorCode::GROUP_ID_NOT_FOUND,
                format!("Group {group_id} is not a share group."),
            )),
            Some(g) if !g.members.is_empty() => Err(non_empty(group_id)),
            Some(_) => Ok(()),
        }
    }

    /// DeleteGroups of a share group: removes an existing, empty group
    /// (its configs stay, see the module docs).
    pub fn delete_group(&mut self, group_id: &str) -> Result<(), GroupError> {
        self.check_empty_group(group_id)?;
        self.groups.remove(group_id);
        Ok(())
    }
}

fn non_empty(group_id: &str) -> GroupError {
    GroupError::new(
        ErrorCode::NON_EMPTY_GROUP,
        format!("The group {group_id} is not empty: stop its consumers first."),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::{HeartbeatRequest, ShareGroupBrokerConfig, TopicInfo};
    use uuid::Uuid;

    fn join(c: &mut ShareGroupCoordinator, group: &str, member: &str) {
        let topics = |name: &str| {
            (name == "t").then_some(TopicInfo {
                id: Uuid::from_u128(7),
                partitions: 1,
            })
        };
        let req = HeartbeatRequest {
            group_id: group.into(),
            member_id: member.into(),
            member_epoch: 0,
            subscribed_topic_names: Some(vec!["t".into()]),
            ..Default::default()
        };
        c.heartbeat(&req, 0, &topics).unwrap();
    }

    #[test]
    fn alter_creates_a_missing_group_and_refuses_one_with_members() {
        let mut c = ShareGroupCoordinator::new(ShareGroupBrokerConfig::default());
        assert!(!c.group_exists("g"));
        c.ensure_empty_group("g").unwrap();
        assert!(c.group_exists("g"), "created empty, as Kafka 4.4 does");
        join(&mut c, "g", "m1");
        let e = c.ensure_empty_group("g").unwrap_err();
        assert_eq!(e.code, ErrorCode::NON_EMPTY_GROUP);
        assert_eq!(
            c.ensure_empty_group("").unwrap_err().code,
            ErrorCode::INVALID_GROUP_ID
        );
    }

    #[test]
    fn delete_needs_an_existing_empty_group() {
        let mut c = ShareGroupCoordinator::new(ShareGroupBrokerConfig::default());
        assert_eq!(
            c.delete_group("g").unwrap_err().code,
            ErrorCode::GROUP_ID_NOT_FOUND
        );
        join(&mut c, "g", "m1");
        assert_eq!(
            c.delete_group("g").unwrap_err().code,
            ErrorCode::NON_EMPTY_GROUP
        );
        c.set_config("g", "share.auto.offset.reset", Some("earliest"))
            .unwrap();
        let leave = HeartbeatRequest {
            group_id: "g".into(),
            member_id: "m1".into(),
            member_epoch: -1,
            ..Default::default()
        };
        c.heartbeat(&leave, 1, &|_: &str| None).unwrap();
        c.delete_group("g").unwrap();
        assert!(!c.group_exists("g"));
        assert!(c.snapshot().group_epochs.is_empty());
        assert_eq!(
            c.snapshot().configs["g"]["share.auto.offset.reset"],
            "earliest",
            "configs outlive the group"
        );
    }
}
