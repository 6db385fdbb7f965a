//! The streams rebalance protocol (KIP-1071) on [`GroupService`]:
//! heartbeats, describe, timers, and the member check of offset commits
//! and fetches into such groups. The state machine is
//! [`StreamsGroups`](crate::consumer_group::streams_protocol); its
//! committed offsets are the classic coordinator's, in the same durable
//! log, which also journals each streams group's whole state whenever it
//! changes (a `StreamsGroup` record), restored at start-up with the
//! members' sessions starting again (docs/DESIGN.md D56).
//!
//! One group id is one kind of group: a streams heartbeat into a
//! consumer-protocol group, or a classic group with members, is
//! GROUP_ID_NOT_FOUND, and so is a consumer-protocol heartbeat into a
//! streams group. A classic JoinGroup takes an empty streams group over
//! (its offsets kept) and is INCONSISTENT_GROUP_PROTOCOL while it has
//! members, as for consumer-protocol groups.
//!
//! Lock order: the streams groups, then the consumer-protocol groups, then
//! the classic coordinator.

use super::GroupService;
use crate::consumer_group::consumer_protocol::{HeartbeatError, Topics};
use crate::consumer_group::streams_protocol::{
    DescribedStreamsGroup, StreamsGroups, StreamsHeartbeat, StreamsHeartbeatOk, StreamsMemberCheck,
};
use sharestream_protocol::ErrorCode;

impl GroupService {
    /// StreamsGroupHeartbeat.
    pub fn streams_heartbeat(
        &self,
        req: &StreamsHeartbeat,
        topics: &Topics,
        now_ms: i64,
    ) -> Result<StreamsHeartbeatOk, HeartbeatError> {
        let mut streams = self.streams.lock();
        self.check_kind(&streams, &req.group_id)?;
        let result = streams.heartbeat(req, topics, now_ms);
        if let Err(code) = self.persist_streams_group(&mut streams, &req.group_id, now_ms) {
            return Err(HeartbeatError {
                code,
                message: "The group's state could not be persisted.".into(),
            });
        }
        result
    }

    /// The checks of a StreamsGroupHeartbeat that change nothing (see
    /// [`StreamsGroups::precheck`]), and the group id's kind: run before
    /// the internal topics are created.
    pub fn streams_precheck(&self, req: &StreamsHeartbeat) -> Result<(), HeartbeatError> {
        let streams = self.streams.lock();
        streams.precheck(req)?;
        self.check_kind(&streams, &req.group_id)
    }

    /// GROUP_ID_NOT_FOUND for a group id held by a consumer-protocol
    /// group or a classic group with members.
    fn check_kind(&self, streams: &StreamsGroups, group_id: &str) -> Result<(), HeartbeatError> {
        if streams.contains(group_id) {
            return Ok(());
        }
        let other = self.modern.lock().contains(group_id)
            || self.with_coordinator(|c| !c.member_ids(group_id).is_empty());
        if other {
            return Err(HeartbeatError {
                code: ErrorCode::GROUP_ID_NOT_FOUND,
                message: format!("Group {group_id} is not a streams group."),
            });
        }
        Ok(())
    }

    /// StreamsGroupDescribe of one group.
    pub fn streams_describe(&self, group_id: &str) -> Option<DescribedStreamsGroup> {
        self.streams.lock().describe(group_id)
    }

    /// Read access to the streams groups.
    pub fn with_streams_groups<T>(&self, f: impl FnOnce(&StreamsGroups) -> T) -> T {
        f(&self.streams.lock())
    }

    /// Whether `group_id` is a streams group.
    pub fn is_streams_group(&self, group_id: &str) -> bool {
        self.streams.lock().contains(group_id)
    }

    /// Session and revocation timeouts of streams members.
    pub(super) fn streams_tick(&self, now_ms: i64) -> Vec<(String, String)> {
        let mut streams = self.streams.lock();
        if streams.next_deadline_ms().is_none_or(|d| d > now_ms) {
            return Vec::new();
        }
        let removed = streams.tick(now_ms);
        for (group, member) in &removed {
            tracing::info!(
                group,
                member,
                "streams group member removed (session or rebalance timeout)"
            );
        }
        let groups: std::collections::BTreeSet<&String> = removed.iter().map(|(g, _)| g).collect();
        for g in groups {
            let _ = self.persist_streams_group(&mut streams, g, now_ms);
        }
        removed
    }

    /// Whether a streams timer is due.
    pub(super) fn streams_is_due(&self, now_ms: i64) -> bool {
        self.streams
            .lock()
            .next_deadline_ms()
            .is_some_and(|d| d <= now_ms)
    }

    /// Before a classic JoinGroup or a consumer-protocol heartbeat: an
    /// empty streams group of that id is removed, its offsets kept; one
    /// with members is refused with `busy`.
    pub(super) fn release_empty_streams_group(
        &self,
        group_id: &str,
        busy: ErrorCode,
        now_ms: i64,
    ) -> Result<(), ErrorCode> {
        let mut streams = self.streams.lock();
        if !streams.contains(group_id) {
            return Ok(());
        }
        streams.delete_group(group_id).map_err(|_| busy)?;
        self.persist_streams_group(&mut streams, group_id, now_ms)
    }

    /// DeleteGroups of a streams group (None: not one).
    pub(super) fn delete_streams_group(&self, group_id: &str, now_ms: i64) -> Option<ErrorCode> {
        let mut streams = self.streams.lock();
        if !streams.contains(group_id) {
            return None;
        }
        if let Err(code) = streams.delete_group(group_id) {
            return Some(code);
        }
        Some(
            self.persist_streams_group(&mut streams, group_id, now_ms)
                .err()
                .unwrap_or(ErrorCode::NONE),
        )
    }

    /// The member check of an OffsetFetch v9+ naming a member: against
    /// the streams group or the consumer-protocol group of that id.
    pub fn validate_member_fetch(
        &self,
        group_id: &str,
        member_id: &str,
        member_epoch: i32,
    ) -> Result<(), ErrorCode> {
        {
            let streams = self.streams.lock();
            if streams.contains(group_id) {
                return streams.validate_fetch(
                    group_id,
                    &StreamsMemberCheck {
                        member_id,
                        member_epoch,
                    },
                );
            }
        }
        self.modern
            .lock()
            .validate_fetch(group_id, member_id, member_epoch)
    }
}
