//! Share sessions: per (group, member), the partitions its ShareFetches
//! cover and the epoch its next request must carry. A session outlives its
//! member's leave until its final epoch or one acquisition lock duration,
//! and ends with the connection it was last used on once its member is
//! gone (docs/DESIGN.md D18). Sessions are not persisted: a client opens a
//! new one after a restart.

use uuid::Uuid;

use super::{Inner, Pending, ShareService};
use sharestream_protocol::ErrorCode;

/// Kafka's default cap on share sessions per broker
/// (`group.share.max.share.sessions`).
pub const DEFAULT_MAX_SHARE_SESSIONS: usize = 2000;

/// Share session epoch that opens a session.
pub const INITIAL_SHARE_SESSION_EPOCH: i32 = 0;
/// Share session epoch that closes a session.
pub const FINAL_SHARE_SESSION_EPOCH: i32 = -1;

/// A partition named by topic id and index, without the topic name: how
/// ShareFetch, ShareAcknowledge and TxnShareAcknowledge name partitions,
/// and the key of share sessions. Not the vocabulary's
/// [`TopicIdPartition`](sharestream_protocol::share::TopicIdPartition),
/// which also carries the name (the broker has none at hand on this path);
/// its [`key`](sharestream_protocol::share::TopicIdPartition::key) gives
/// this form.
pub type TopicIdKey = (Uuid, i32);

/// The result of opening, continuing or closing a share session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionStep {
    /// The partitions the session covers after the request (for a closed
    /// session: the ones it covered).
    pub partitions: Vec<TopicIdKey>,
    /// Whether the request closed the session (epoch -1).
    pub closed: bool,
}

#[derive(Debug)]
pub(super) struct Session {
    next_epoch: i32,
    partitions: Vec<TopicIdKey>,
    /// Set when the member left the group (heartbeat epoch -1) while this
    /// session was open: the session outlives the departure, as Kafka's
    /// does, so that the member's final acknowledgements still count
    /// (issue #18: librdkafka sends the leave heartbeat and the final
    /// ShareAcknowledge at once). Past this time (one acquisition lock
    /// after the departure, when every lock it held has expired anyway)
    /// the session is dropped.
    pub(super) orphaned_until_ms: Option<i64>,
    /// The connection the session was last used on (0: none known). When
    /// it closes, an orphaned session ends with it, as Kafka's does.
    connection_id: u64,
    /// A request with the final epoch is closing the session: it applies
    /// its acknowledgements, then ends the session and releases the rest
    /// ([`ShareService::release_session_records_deferred`]). Until then the
    /// session stays in the table, so that a leave landing in between
    /// finds it and leaves the member's records to that release instead
    /// of releasing them under the acknowledgements. A closing session
    /// takes no further steps (SHARE_SESSION_NOT_FOUND).
    closing: bool,
}

fn next_epoch(e: i32) -> i32 {
    if e == i32::MAX { 1 } else { e + 1 }
}

impl ShareService {
    /// Whether ShareFetch and ShareAcknowledge may go on for this member:
    /// it is in the group, or it has a share session still open. Kafka
    /// ties acknowledgements to the share session, which outlives a leave
    /// until its final epoch (docs/DESIGN.md, "Share sessions and
    /// departures").
    pub fn has_member_or_session(&self, group_id: &str, member_id: &str) -> bool {
        let inner = self.inner.lock();
        inner.coordinator.is_member_alive(group_id, member_id)
            || inner
                .sessions
                .contains_key(&(group_id.to_string(), member_id.to_string()))
    }

    /// ShareFetch's session step. Epoch 0 opens a session covering `add`
    /// (replacing the member's old one); a positive epoch must be the
    /// session's next one (INVALID_SHARE_SESSION_EPOCH), on an existing
    /// session (SHARE_SESSION_NOT_FOUND), and adds `add` and removes
    /// `forget`; -1 closes the session.
    pub fn fetch_session(
        &self,
        group_id: &str,
        member_id: &str,
        epoch: i32,
        add: &[TopicIdKey],
        forget: &[TopicIdKey],
    ) -> Result<SessionStep, ErrorCode> {
        let mut inner = self.inner.lock();
        let k = (group_id.to_string(), member_id.to_string());
        match epoch {
            INITIAL_SHARE_SESSION_EPOCH => {
                if !inner.sessions.contains_key(&k) && inner.sessions.len() >= inner.max_sessions {
                    return Err(ErrorCode::SHARE_SESSION_LIMIT_REACHED);
                }
                let mut partitions = Vec::new();
                for tp in add {
                    if !partitions.contains(tp) {
                        partitions.push(*tp);
                    }
                }
                inner.sessions.insert(
                    k,
                    Session {
                        next_epoch: 1,
                        partitions: partitions.clone(),
                        orphaned_until_ms: None,
                        connection_id: 0,
                        closing: false,
                    },
                );
                Ok(SessionStep {
                    partitions,
                    closed: false,
                })
            }
            FINAL_SHARE_SESSION_EPOCH => match inner.sessions.get_mut(&k) {
                // Ended by the caller's release, after its acknowledgements.
                Some(s) if !s.closing => {
                    s.closing = true;
                    Ok(SessionStep {
                        partitions: s.partitions.clone(),
                        closed: true,
                    })
                }
                _ => Err(ErrorCode::SHARE_SESSION_NOT_FOUND),
            },
            e if e > 0 => {
                let s = inner
                    .sessions
                    .get_mut(&k)
                    .filter(|s| !s.closing)
                    .ok_or(ErrorCode::SHARE_SESSION_NOT_FOUND)?;
                if s.next_epoch != e {
                    return Err(ErrorCode::INVALID_SHARE_SESSION_EPOCH);
                }
                s.next_epoch = next_epoch(e);
                for tp in add {
                    if !s.partitions.contains(tp) {
                        s.partitions.push(*tp);
                    }
                }
                s.partitions.retain(|tp| !forget.contains(tp));
                Ok(SessionStep {
                    partitions: s.partitions.clone(),
                    closed: false,
                })
            }
            _ => Err(ErrorCode::INVALID_SHARE_SESSION_EPOCH),
        }
    }

    /// ShareAcknowledge's session step: epoch 0 is refused
    /// (INVALID_SHARE_SESSION_EPOCH: acknowledging cannot open a session),
    /// a positive epoch must be the next one, -1 closes.
    pub fn acknowledge_session(
        &self,
        group_id: &str,
        member_id: &str,
        epoch: i32,
    ) -> Result<SessionStep, ErrorCode> {
        if epoch == INITIAL_SHARE_SESSION_EPOCH {
            return Err(ErrorCode::INVALID_SHARE_SESSION_EPOCH);
        }
        self.fetch_session(group_id, member_id, epoch, &[], &[])
    }

    /// Records that the member's share session was just used on
    /// `connection_id` (after a successful session step).
    pub fn session_used_on(&self, group_id: &str, member_id: &str, connection_id: u64) {
        let mut inner = self.inner.lock();
        if let Some(s) = inner
            .sessions
            .get_mut(&(group_id.to_string(), member_id.to_string()))
        {
            s.connection_id = connection_id;
        }
    }

    /// A client connection closed: share sessions of departed members last
    /// used on it end, releasing what those members still hold (Kafka ends
    /// every session of a closed connection; ours keep a live member's
    /// session across reconnections, D18). Nobody is answered, so the
    /// release is queued to the journal without waiting.
    pub fn connection_closed(&self, connection_id: u64, now_ms: i64) {
        self.connection_closed_deferred(connection_id, now_ms)
            .forget()
    }

    /// [`Self::connection_closed`] with the wait for its records.
    pub fn connection_closed_deferred(&self, connection_id: u64, now_ms: i64) -> Pending<()> {
        let mut inner = self.inner.lock();
        let mark = self.mark();
        let ended: Vec<(String, String)> = inner
            .sessions
            .iter()
            .filter(|(_, s)| s.connection_id == connection_id && s.orphaned_until_ms.is_some())
            .map(|(k, _)| k.clone())
            .collect();
        let mut available = false;
        for (group_id, member_id) in ended {
            inner
                .sessions
                .remove(&(group_id.clone(), member_id.clone()));
            available |= inner.release_member_everywhere(&group_id, &member_id, now_ms);
        }
        let durable = self.durable_since(mark);
        drop(inner);
        if available {
            self.wake();
        }
        Pending::new((), durable)
    }

    /// Number of open share sessions.
    pub fn session_count(&self) -> usize {
        self.inner.lock().sessions.len()
    }
}

impl Inner {
    /// Removes the member's session if a final-epoch step left it closing
    /// (a session opened again since, with epoch 0, stays).
    pub(super) fn end_closing_session(&mut self, group_id: &str, member_id: &str) {
        let k = (group_id.to_string(), member_id.to_string());
        if self.sessions.get(&k).is_some_and(|s| s.closing) {
            self.sessions.remove(&k);
        }
    }

    /// Ends the sessions of departed members whose grace time is over,
    /// releasing what those members hold. Returns whether records became
    /// AVAILABLE.
    pub(super) fn end_orphaned_sessions(&mut self, now_ms: i64) -> bool {
        let orphans: Vec<(String, String)> = self
            .sessions
            .iter()
            .filter(|(_, s)| s.orphaned_until_ms.is_some_and(|t| t <= now_ms))
            .map(|(k, _)| k.clone())
            .collect();
        let mut available = false;
        for (group_id, member_id) in orphans {
            self.sessions.remove(&(group_id.clone(), member_id.clone()));
            available |= self.release_member_everywhere(&group_id, &member_id, now_ms);
        }
        available
    }
}
