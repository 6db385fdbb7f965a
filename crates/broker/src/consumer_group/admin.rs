//! DeleteGroups and OffsetDelete, with Kafka's rules for classic groups:
//! - a group is deleted only while Empty (NON_EMPTY_GROUP otherwise;
//!   GROUP_ID_NOT_FOUND when it does not exist), offsets and all;
//! - offsets of an Empty group can be deleted; in a group with members
//!   only those of topics no member subscribes to, and only when the group
//!   speaks the `consumer` protocol, whose subscriptions the coordinator
//!   can read (GROUP_SUBSCRIBED_TO_TOPIC per partition); other protocols
//!   get NON_EMPTY_GROUP.

use std::collections::BTreeSet;

use super::coordinator::{GroupCoordinator, GroupState};
use super::record::GroupRecord;
use sharestream_protocol::ErrorCode;

/// The topics of a `consumer` protocol subscription: every version starts
/// with `Version int16, Topics [string]`.
pub fn subscribed_topics(metadata: &[u8]) -> Option<Vec<String>> {
    let mut rest = metadata;
    let mut take = |n: usize| -> Option<&[u8]> {
        if rest.len() < n {
            return None;
        }
        let (head, tail) = rest.split_at(n);
        rest = tail;
        Some(head)
    };
    let _version = i16::from_be_bytes(take(2)?.try_into().ok()?);
    let count = i32::from_be_bytes(take(4)?.try_into().ok()?);
    if count < 0 {
        return Some(Vec::new());
    }
    let mut topics = Vec::new();
    for _ in 0..count {
        let len = i16::from_be_bytes(take(2)?.try_into().ok()?);
        if len < 0 {
            return None;
        }
        let name = take(len as usize)?;
        topics.push(String::from_utf8(name.to_vec()).ok()?);
    }
    Some(topics)
}

impl GroupCoordinator {
    /// DeleteGroups of one group: the record to persist.
    pub fn delete_group(&mut self, group_id: &str) -> Result<GroupRecord, ErrorCode> {
        let exists = self.groups.contains_key(group_id) || self.offsets.contains_key(group_id);
        if !exists {
            return Err(ErrorCode::GROUP_ID_NOT_FOUND);
        }
        if self
            .groups
            .get(group_id)
            .is_some_and(|g| g.state != GroupState::Empty)
        {
            return Err(ErrorCode::NON_EMPTY_GROUP);
        }
        let record = GroupRecord::DeleteGroup {
            group_id: group_id.to_string(),
        };
        self.apply(&record);
        Ok(record)
    }

    /// OffsetDelete: one code per partition, or a top-level error; the
    /// record to persist when something was deleted.
    #[allow(clippy::type_complexity)]
    pub fn delete_offsets(
        &mut self,
        group_id: &str,
        partitions: &[(String, i32)],
    ) -> Result<(Vec<ErrorCode>, Option<GroupRecord>), ErrorCode> {
        if group_id.is_empty() {
            return Err(ErrorCode::INVALID_GROUP_ID);
        }
        let Some(group) = self.groups.get(group_id) else {
            return Err(ErrorCode::GROUP_ID_NOT_FOUND);
        };
        let subscribed: BTreeSet<String> = if group.state == GroupState::Empty {
            BTreeSet::new()
        } else if group.protocol_type.as_deref() == Some("consumer") {
            let protocol = group.protocol_name.clone().unwrap_or_default();
            group
                .members
                .values()
                .flat_map(|m| {
                    m.protocols
                        .iter()
                        .find(|(n, _)| *n == protocol)
                        .and_then(|(_, meta)| subscribed_topics(meta))
                        .unwrap_or_default()
                })
                .collect()
        } else {
            return Err(ErrorCode::NON_EMPTY_GROUP);
        };
        let mut codes = Vec::with_capacity(partitions.len());
        let mut deleted = Vec::new();
        for (t, p) in partitions {
            if subscribed.contains(t) {
                codes.push(ErrorCode::GROUP_SUBSCRIBED_TO_TOPIC);
            } else {
                codes.push(ErrorCode::NONE);
                if self.committed(group_id, t, *p).is_some() {
                    deleted.push((t.clone(), *p));
                }
            }
        }
        let record = (!deleted.is_empty()).then(|| GroupRecord::DeleteOffsets {
            group_id: group_id.to_string(),
            partitions: deleted,
        });
        if let Some(r) = &record {
            self.apply(r);
        }
        Ok((codes, record))
    }
}
