//! [`ShareGroupMetadata`]: which share-group member's acknowledgements a
//! transaction stages (KIP-1289). The consumer hands it out; the producer's
//! `send_share_acknowledgements_to_transaction` sends it with the staged
//! acknowledgements so the share partition leader can check the member is
//! still current.

use std::fmt;

/// The share group, member id and member epoch of a share consumer at the
/// time it handed acknowledgements to a transaction. Immutable.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ShareGroupMetadata {
    group_id: String,
    member_id: String,
    member_epoch: i32,
}

impl ShareGroupMetadata {
    /// Metadata of member `member_id` at `member_epoch` in `group_id`.
    pub fn new(
        group_id: impl Into<String>,
        member_id: impl Into<String>,
        member_epoch: i32,
    ) -> Self {
        Self {
            group_id: group_id.into(),
            member_id: member_id.into(),
            member_epoch,
        }
    }

    /// The share group id.
    pub fn group_id(&self) -> &str {
        &self.group_id
    }

    /// The member id.
    pub fn member_id(&self) -> &str {
        &self.member_id
    }

    /// The member epoch.
    pub fn member_epoch(&self) -> i32 {
        self.member_epoch
    }
}

impl fmt::Display for ShareGroupMetadata {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "ShareGroupMetadata(groupId={}, memberId={}, memberEpoch={})",
            self.group_id, self.member_id, self.member_epoch
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accessors_and_display() {
        let m = ShareGroupMetadata::new("g", "m-1", 4);
        assert_eq!(
            (m.group_id(), m.member_id(), m.member_epoch()),
            ("g", "m-1", 4)
        );
        assert_eq!(
            m.to_string(),
            "ShareGroupMetadata(groupId=g, memberId=m-1, memberEpoch=4)"
        );
        assert_eq!(m.clone(), m);
    }
}
