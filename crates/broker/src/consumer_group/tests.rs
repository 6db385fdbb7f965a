//! The classic group coordinator with explicit time.

use bytes::Bytes;

use super::*;
use sharestream_protocol::ErrorCode;

const G: &str = "g";
const SESSION: i32 = 10_000;
const REBALANCE: i32 = 30_000;

fn config() -> ClassicGroupConfig {
    ClassicGroupConfig {
        initial_rebalance_delay_ms: 0,
        ..ClassicGroupConfig::default()
    }
}

fn join_req(member_id: &str, meta: &str) -> JoinGroupRequest {
    JoinGroupRequest {
        group_id: G.to_string(),
        member_id: member_id.to_string(),
        group_instance_id: None,
        protocol_type: "consumer".to_string(),
        protocols: vec![("range".to_string(), Bytes::from(meta.to_string()))],
        session_timeout_ms: SESSION,
        rebalance_timeout_ms: REBALANCE,
        require_known_member_id: true,
        supports_skip_assignment: true,
        client_id: "client".to_string(),
        client_host: "/127.0.0.1".to_string(),
    }
}

fn sync_req(member_id: &str, generation_id: i32, assignments: &[(&str, &str)]) -> SyncGroupRequest {
    SyncGroupRequest {
        group_id: G.to_string(),
        generation_id,
        member_id: member_id.to_string(),
        group_instance_id: None,
        protocol_type: Some("consumer".to_string()),
        protocol_name: Some("range".to_string()),
        assignments: assignments
            .iter()
            .map(|(m, a)| (m.to_string(), Bytes::from(a.to_string())))
            .collect(),
    }
}

fn join_completions(out: &[Completion]) -> Vec<JoinGroupResponse> {
    out.iter()
        .filter_map(|c| match c {
            Completion::Join { response, .. } => Some(response.clone()),
            Completion::Sync { .. } => None,
        })
        .collect()
}

fn sync_completion(out: &[Completion], member: &str) -> Option<SyncGroupResponse> {
    out.iter().find_map(|c| match c {
        Completion::Sync {
            member_id,
            response,
            ..
        } if member_id == member => Some(response.clone()),
        _ => None,
    })
}

/// First JoinGroup v4+: MEMBER_ID_REQUIRED with an id; returns it.
fn member_id_for(c: &mut GroupCoordinator, now: i64) -> String {
    let out = c.join(&join_req("", "m"), now);
    let Reply::Now(resp) = out.result else {
        panic!("expected an immediate answer, got {:?}", out.result)
    };
    assert_eq!(resp.error, ErrorCode::MEMBER_ID_REQUIRED);
    assert!(resp.member_id.starts_with("client-"), "{}", resp.member_id);
    resp.member_id
}

/// One member joins and syncs alone: generation 1, Stable.
fn single_member_group(c: &mut GroupCoordinator, now: i64) -> String {
    let id = member_id_for(c, now);
    let out = c.join(&join_req(&id, "m"), now);
    assert_eq!(
        out.result,
        Reply::Parked {
            member_id: id.clone()
        }
    );
    // Initial delay 0: the join phase ends at the next tick.
    let out = c.tick(now);
    let joins = join_completions(&out.completions);
    assert_eq!(joins.len(), 1);
    assert_eq!(joins[0].generation_id, 1);
    assert_eq!(joins[0].leader, id);
    let out = c.sync(&sync_req(&id, 1, &[(&id, "A")]), now);
    assert_eq!(
        out.result,
        Reply::Parked {
            member_id: id.clone()
        }
    );
    assert_eq!(
        sync_completion(&out.completions, &id).map(|r| r.assignment),
        Some(Bytes::from("A"))
    );
    assert_eq!(c.group_state(G), Some(GroupState::Stable));
    id
}

#[test]
fn kip394_first_join_without_member_id_gets_member_id_required() {
    let mut c = GroupCoordinator::new(config());
    let id = member_id_for(&mut c, 0);
    // Not a member yet: pending.
    assert!(c.member_ids(G).is_empty());
    // Joining with the id makes it one.
    let out = c.join(&join_req(&id, "m"), 1);
    assert_eq!(
        out.result,
        Reply::Parked {
            member_id: id.clone()
        }
    );
    assert_eq!(c.member_ids(G), vec![id]);
}

#[test]
fn old_join_versions_join_at_once() {
    let mut c = GroupCoordinator::new(config());
    let mut req = join_req("", "m");
    req.require_known_member_id = false;
    let out = c.join(&req, 0);
    let Reply::Parked { member_id } = out.result else {
        panic!("{:?}", out.result)
    };
    assert_eq!(c.member_ids(G), vec![member_id]);
}

#[test]
fn unused_pending_member_id_expires_after_the_session_timeout() {
    let mut c = GroupCoordinator::new(config());
    let id = member_id_for(&mut c, 0);
    c.tick(i64::from(SESSION) + 1);
    let out = c.join(&join_req(&id, "m"), i64::from(SESSION) + 2);
    assert_eq!(
        out.result,
        Reply::Now(JoinGroupResponse::error(ErrorCode::UNKNOWN_MEMBER_ID, id))
    );
}

#[test]
fn join_and_sync_round_with_two_members() {
    let mut c = GroupCoordinator::new(config());
    let a = single_member_group(&mut c, 0);
    // B arrives: a rebalance starts, A must rejoin.
    let b = member_id_for(&mut c, 100);
    assert_eq!(
        c.join(&join_req(&b, "m"), 100).result,
        Reply::Parked {
            member_id: b.clone()
        }
    );
    assert_eq!(c.group_state(G), Some(GroupState::PreparingRebalance));
    assert_eq!(
        c.heartbeat(G, &a, None, 1, 150),
        ErrorCode::REBALANCE_IN_PROGRESS
    );
    // A rejoins: everybody is in, the join phase ends at once.
    let out = c.join(&join_req(&a, "m"), 200);
    assert_eq!(
        out.result,
        Reply::Parked {
            member_id: a.clone()
        }
    );
    let joins = join_completions(&out.completions);
    assert_eq!(joins.len(), 2);
    for j in &joins {
        assert_eq!(j.generation_id, 2);
        assert_eq!(j.leader, a);
        assert_eq!(j.protocol_name.as_deref(), Some("range"));
        if j.member_id == a {
            let mut listed: Vec<&str> = j.members.iter().map(|m| m.member_id.as_str()).collect();
            listed.sort_unstable();
            let mut want = vec![a.as_str(), b.as_str()];
            want.sort_unstable();
            assert_eq!(listed, want);
        } else {
            assert!(j.members.is_empty(), "only the leader gets the members");
        }
    }
    // The follower syncs first and waits for the leader.
    let out = c.sync(&sync_req(&b, 2, &[]), 210);
    assert_eq!(
        out.result,
        Reply::Parked {
            member_id: b.clone()
        }
    );
    assert!(out.completions.is_empty());
    // A commit while the assignment is outstanding: REBALANCE_IN_PROGRESS.
    assert_eq!(
        commit(&mut c, &b, 2, 5, 211).result,
        Err(ErrorCode::REBALANCE_IN_PROGRESS)
    );
    let out = c.sync(&sync_req(&a, 2, &[(&a, "A"), (&b, "B")]), 220);
    assert_eq!(
        sync_completion(&out.completions, &b).map(|r| r.assignment),
        Some(Bytes::from("B"))
    );
    assert_eq!(
        sync_completion(&out.completions, &a).map(|r| r.assignment),
        Some(Bytes::from("A"))
    );
    assert_eq!(c.group_state(G), Some(GroupState::Stable));
    assert_eq!(c.heartbeat(G, &b, None, 2, 230), ErrorCode::NONE);
    assert_eq!(
        c.heartbeat(G, &b, None, 1, 230),
        ErrorCode::ILLEGAL_GENERATION
    );
    assert_eq!(
        c.heartbeat(G, "nobody", None, 2, 230),
        ErrorCode::UNKNOWN_MEMBER_ID
    );
}

#[test]
fn a_member_that_does_not_rejoin_is_dropped_at_the_rebalance_timeout() {
    let mut c = GroupCoordinator::new(config());
    let a = single_member_group(&mut c, 0);
    let b = member_id_for(&mut c, 1_000);
    c.join(&join_req(&b, "m"), 1_000);
    // A keeps heartbeating but never rejoins.
    for t in (4_000..1_000 + i64::from(REBALANCE)).step_by(3_000) {
        assert_eq!(
            c.heartbeat(G, &a, None, 1, t),
            ErrorCode::REBALANCE_IN_PROGRESS
        );
        assert!(
            c.tick(t).completions.is_empty(),
            "not before the rebalance timeout"
        );
    }
    let out = c.tick(1_000 + i64::from(REBALANCE) - 1);
    assert!(
        out.completions.is_empty(),
        "not before the rebalance timeout"
    );
    let out = c.tick(1_000 + i64::from(REBALANCE));
    let joins = join_completions(&out.completions);
    assert_eq!(joins.len(), 1);
    assert_eq!(joins[0].member_id, b);
    assert_eq!(joins[0].leader, b, "B leads: A did not rejoin");
    assert_eq!(joins[0].generation_id, 2);
    assert_eq!(c.member_ids(G), vec![b]);
    assert_eq!(
        c.heartbeat(G, &a, None, 2, 31_001),
        ErrorCode::UNKNOWN_MEMBER_ID
    );
}

#[test]
fn a_member_that_never_syncs_is_removed_and_the_group_rebalances() {
    let mut c = GroupCoordinator::new(config());
    let a = single_member_group(&mut c, 0);
    let b = member_id_for(&mut c, 100);
    c.join(&join_req(&b, "m"), 100);
    c.join(&join_req(&a, "m"), 100);
    assert_eq!(c.group_state(G), Some(GroupState::CompletingRebalance));
    // A (the leader) syncs; B never does, but heartbeats.
    let out = c.sync(&sync_req(&a, 2, &[(&a, "A"), (&b, "B")]), 200);
    assert!(sync_completion(&out.completions, &a).is_some());
    let deadline = 100 + i64::from(REBALANCE);
    for t in (3_000..deadline).step_by(3_000) {
        assert_eq!(c.heartbeat(G, &b, None, 2, t), ErrorCode::NONE);
        assert_eq!(c.heartbeat(G, &a, None, 2, t), ErrorCode::NONE);
        c.tick(t);
    }
    c.tick(deadline - 1);
    assert_eq!(c.member_ids(G).len(), 2);
    c.tick(deadline);
    assert_eq!(c.member_ids(G), vec![a.clone()]);
    assert_eq!(c.group_state(G), Some(GroupState::PreparingRebalance));
    // A is told to rejoin.
    assert_eq!(
        c.heartbeat(G, &a, None, 2, deadline + 1),
        ErrorCode::REBALANCE_IN_PROGRESS
    );
}

#[test]
fn the_followers_parked_sync_learns_of_a_new_round() {
    let mut c = GroupCoordinator::new(config());
    let a = single_member_group(&mut c, 0);
    let b = member_id_for(&mut c, 100);
    c.join(&join_req(&b, "m"), 100);
    c.join(&join_req(&a, "m"), 100);
    c.sync(&sync_req(&b, 2, &[]), 110);
    // A third member arrives before the leader syncs.
    let x = member_id_for(&mut c, 120);
    let out = c.join(&join_req(&x, "m"), 120);
    assert_eq!(
        sync_completion(&out.completions, &b).map(|r| r.error),
        Some(ErrorCode::REBALANCE_IN_PROGRESS)
    );
    assert_eq!(
        c.sync(&sync_req(&a, 2, &[]), 130).result,
        Reply::Now(SyncGroupResponse::error(ErrorCode::REBALANCE_IN_PROGRESS))
    );
}

#[test]
fn session_expiry_removes_a_silent_member() {
    let mut c = GroupCoordinator::new(config());
    let a = single_member_group(&mut c, 0);
    assert_eq!(c.heartbeat(G, &a, None, 1, 4_000), ErrorCode::NONE);
    c.tick(4_000 + i64::from(SESSION) - 1);
    assert_eq!(c.member_ids(G), vec![a.clone()]);
    let out = c.tick(4_000 + i64::from(SESSION));
    assert!(c.member_ids(G).is_empty());
    // Alone in the group: the group is Empty at the next generation.
    assert_eq!(c.group_state(G), Some(GroupState::Empty));
    assert_eq!(c.generation(G), Some(2));
    assert!(out.records.iter().any(|r| matches!(
        r,
        GroupRecord::Generation {
            generation_id: 2,
            ..
        }
    )));
    assert_eq!(
        c.heartbeat(G, &a, None, 1, 15_000),
        ErrorCode::UNKNOWN_MEMBER_ID
    );
}

#[test]
fn initial_rebalance_delay_gathers_members_and_is_bounded_by_the_rebalance_timeout() {
    let mut c = GroupCoordinator::new(ClassicGroupConfig {
        initial_rebalance_delay_ms: 3_000,
        ..ClassicGroupConfig::default()
    });
    let a = member_id_for(&mut c, 0);
    c.join(&join_req(&a, "m"), 0);
    let b = member_id_for(&mut c, 2_000);
    c.join(&join_req(&b, "m"), 2_000);
    // All joined, but the initial delay holds the phase open.
    assert!(c.tick(2_999).completions.is_empty());
    // At 3000 a new member was added: extended by another delay.
    assert!(c.tick(3_000).completions.is_empty());
    let out = c.tick(6_000);
    assert_eq!(join_completions(&out.completions).len(), 2);
    assert_eq!(c.generation(G), Some(1));
}

#[test]
fn inconsistent_protocols_and_bad_session_timeouts_are_refused() {
    let mut c = GroupCoordinator::new(config());
    let _a = single_member_group(&mut c, 0);
    let mut other = join_req("", "m");
    other.protocols = vec![("roundrobin".to_string(), Bytes::new())];
    assert_eq!(
        c.join(&other, 10).result,
        Reply::Now(JoinGroupResponse::error(
            ErrorCode::INCONSISTENT_GROUP_PROTOCOL,
            ""
        ))
    );
    let mut other = join_req("", "m");
    other.protocol_type = "connect".to_string();
    assert!(matches!(
        c.join(&other, 10).result,
        Reply::Now(JoinGroupResponse {
            error: ErrorCode::INCONSISTENT_GROUP_PROTOCOL,
            ..
        })
    ));
    let mut bad = join_req("", "m");
    bad.session_timeout_ms = 5_999;
    assert!(matches!(
        c.join(&bad, 10).result,
        Reply::Now(JoinGroupResponse {
            error: ErrorCode::INVALID_SESSION_TIMEOUT,
            ..
        })
    ));
    let mut empty = join_req("", "m");
    empty.group_id.clear();
    assert!(matches!(
        c.join(&empty, 10).result,
        Reply::Now(JoinGroupResponse {
            error: ErrorCode::INVALID_GROUP_ID,
            ..
        })
    ));
    // A known member id in a group that does not exist.
    let mut stray = join_req("ghost", "m");
    stray.group_id = "other".to_string();
    assert!(matches!(
        c.join(&stray, 10).result,
        Reply::Now(JoinGroupResponse {
            error: ErrorCode::UNKNOWN_MEMBER_ID,
            ..
        })
    ));
}

#[test]
fn protocol_chosen_by_vote_among_common_ones() {
    let mut c = GroupCoordinator::new(config());
    let mut ra = join_req("", "");
    ra.require_known_member_id = false;
    ra.protocols = vec![
        ("cooperative-sticky".to_string(), Bytes::from("a1")),
        ("range".to_string(), Bytes::from("a2")),
    ];
    let Reply::Parked { member_id: a } = c.join(&ra, 0).result else {
        panic!()
    };
    c.tick(0);
    let mut rb = ra.clone();
    rb.protocols = vec![
        ("range".to_string(), Bytes::from("b2")),
        ("cooperative-sticky".to_string(), Bytes::from("b1")),
    ];
    let Reply::Parked { member_id: b } = c.join(&rb, 10).result else {
        panic!()
    };
    let mut ra2 = ra.clone();
    ra2.member_id = a.clone();
    let out = c.join(&ra2, 20);
    let joins = join_completions(&out.completions);
    assert_eq!(joins.len(), 2);
    // One vote each: the tie goes to the first name.
    let chosen = joins[0].protocol_name.clone().unwrap();
    assert_eq!(chosen, "cooperative-sticky");
    let leader = joins.iter().find(|j| !j.members.is_empty()).unwrap();
    let meta_b = leader.members.iter().find(|m| m.member_id == b).unwrap();
    assert_eq!(
        meta_b.metadata,
        Bytes::from("b1"),
        "metadata of the chosen protocol"
    );
}

#[test]
fn batched_leave_removes_members_and_reports_each() {
    let mut c = GroupCoordinator::new(config());
    let a = single_member_group(&mut c, 0);
    let b = member_id_for(&mut c, 100);
    c.join(&join_req(&b, "m"), 100);
    c.join(&join_req(&a, "m"), 100);
    c.sync(&sync_req(&a, 2, &[]), 110);
    c.sync(&sync_req(&b, 2, &[]), 110);
    let out = c.leave(
        G,
        &[
            LeaveMember {
                member_id: a.clone(),
                group_instance_id: None,
            },
            LeaveMember {
                member_id: "nobody".to_string(),
                group_instance_id: None,
            },
        ],
        200,
    );
    assert_eq!(
        out.result,
        Ok(vec![ErrorCode::NONE, ErrorCode::UNKNOWN_MEMBER_ID])
    );
    assert_eq!(c.member_ids(G), vec![b.clone()]);
    assert_eq!(c.group_state(G), Some(GroupState::PreparingRebalance));
    // B rejoins alone and leads.
    let out = c.join(&join_req(&b, "m"), 210);
    let joins = join_completions(&out.completions);
    assert_eq!(joins.len(), 1);
    assert_eq!(joins[0].leader, b);
    assert_eq!(
        c.leave("missing", &[LeaveMember::default()], 300).result,
        Err(ErrorCode::UNKNOWN_MEMBER_ID)
    );
}

fn static_join(instance: &str, member_id: &str, meta: &str) -> JoinGroupRequest {
    let mut r = join_req(member_id, meta);
    r.group_instance_id = Some(instance.to_string());
    r
}

#[test]
fn kip345_static_member_rejoins_without_a_rebalance() {
    let mut c = GroupCoordinator::new(config());
    // Static members skip MEMBER_ID_REQUIRED.
    let Reply::Parked { member_id: s1 } = c.join(&static_join("i-1", "", "m"), 0).result else {
        panic!()
    };
    assert!(s1.starts_with("i-1-"));
    let Reply::Parked { member_id: d } = c
        .join(
            &JoinGroupRequest {
                require_known_member_id: false,
                ..join_req("", "m")
            },
            0,
        )
        .result
    else {
        panic!()
    };
    let out = c.tick(0);
    assert_eq!(join_completions(&out.completions).len(), 2);
    let leader = c.leader(G).unwrap();
    let mut sreq = sync_req(&leader, 1, &[(&s1, "S"), (&d, "D")]);
    if leader == s1 {
        sreq.group_instance_id = Some("i-1".to_string());
    }
    c.sync(&sreq, 10);
    let mut sreq = sync_req(&s1, 1, &[]);
    sreq.group_instance_id = Some("i-1".to_string());
    c.sync(&sreq, 10);
    c.sync(&sync_req(&d, 1, &[]), 10);
    assert_eq!(c.group_state(G), Some(GroupState::Stable));

    // The static member restarts: same instance id, no member id.
    let out = c.join(&static_join("i-1", "", "m"), 1_000);
    let Reply::Now(resp) = out.result else {
        panic!("no rebalance expected: {:?}", out.result)
    };
    assert_eq!(resp.error, ErrorCode::NONE);
    assert_eq!(resp.generation_id, 1, "same generation");
    let s2 = resp.member_id.clone();
    assert_ne!(s2, s1);
    assert_eq!(c.group_state(G), Some(GroupState::Stable));
    assert_eq!(c.generation(G), Some(1));
    // It gets its old assignment back through SyncGroup.
    let mut sreq = sync_req(&s2, 1, &[]);
    sreq.group_instance_id = Some("i-1".to_string());
    assert_eq!(
        c.sync(&sreq, 1_010).result,
        Reply::Now(SyncGroupResponse {
            error: ErrorCode::NONE,
            protocol_type: Some("consumer".to_string()),
            protocol_name: Some("range".to_string()),
            assignment: Bytes::from("S"),
        })
    );
    // The old incarnation is fenced.
    assert_eq!(
        c.heartbeat(G, &s1, Some("i-1"), 1, 1_020),
        ErrorCode::FENCED_INSTANCE_ID
    );
    assert_eq!(c.heartbeat(G, &s2, Some("i-1"), 1, 1_020), ErrorCode::NONE);
    // The dynamic member did not notice anything.
    assert_eq!(c.heartbeat(G, &d, None, 1, 1_020), ErrorCode::NONE);
    // Its commits with the new id are accepted, the old id's refused.
    let mut req = commit_req(&s2, 1, 7);
    req.group_instance_id = Some("i-1".to_string());
    assert_eq!(
        c.commit_offsets(&req, 1_030).result,
        Ok(vec![ErrorCode::NONE])
    );
    let mut req = commit_req(&s1, 1, 8);
    req.group_instance_id = Some("i-1".to_string());
    assert_eq!(
        c.commit_offsets(&req, 1_030).result,
        Err(ErrorCode::FENCED_INSTANCE_ID)
    );
}

#[test]
fn static_member_with_changed_protocols_triggers_a_rebalance() {
    let mut c = GroupCoordinator::new(config());
    let Reply::Parked { member_id: s1 } = c.join(&static_join("i-1", "", "m"), 0).result else {
        panic!()
    };
    c.tick(0);
    let mut sreq = sync_req(&s1, 1, &[(&s1, "S")]);
    sreq.group_instance_id = Some("i-1".to_string());
    c.sync(&sreq, 0);
    let mut r = static_join("i-1", "", "m");
    r.protocols = vec![
        ("roundrobin".to_string(), Bytes::new()),
        r.protocols[0].clone(),
    ];
    // roundrobin now wins the vote (only member): the chosen protocol changes.
    let out = c.join(&r, 100);
    assert!(
        matches!(out.result, Reply::Parked { .. }),
        "{:?}",
        out.result
    );
    let joins = join_completions(&out.completions);
    assert_eq!(joins.len(), 1);
    assert_eq!(joins[0].generation_id, 2);
    assert_eq!(joins[0].protocol_name.as_deref(), Some("roundrobin"));
}

#[test]
fn leave_by_instance_id() {
    let mut c = GroupCoordinator::new(config());
    let Reply::Parked { member_id: s1 } = c.join(&static_join("i-1", "", "m"), 0).result else {
        panic!()
    };
    c.tick(0);
    let out = c.leave(
        G,
        &[
            LeaveMember {
                member_id: String::new(),
                group_instance_id: Some("i-1".to_string()),
            },
            LeaveMember {
                member_id: "other".to_string(),
                group_instance_id: Some("i-2".to_string()),
            },
        ],
        10,
    );
    assert_eq!(
        out.result,
        Ok(vec![ErrorCode::NONE, ErrorCode::UNKNOWN_MEMBER_ID])
    );
    assert!(!c.member_ids(G).contains(&s1));
}

fn commit_req(member: &str, generation: i32, offset: i64) -> OffsetCommitRequest {
    OffsetCommitRequest {
        group_id: G.to_string(),
        generation_id: generation,
        member_id: member.to_string(),
        group_instance_id: None,
        api_version: 8,
        offsets: vec![PartitionOffset {
            topic: "t".to_string(),
            partition: 0,
            offset: CommittedOffset {
                offset,
                leader_epoch: -1,
                metadata: String::new(),
                commit_timestamp_ms: 0,
            },
        }],
        topic_ids: Default::default(),
    }
}

fn commit(
    c: &mut GroupCoordinator,
    member: &str,
    generation: i32,
    offset: i64,
    now: i64,
) -> Output<Result<Vec<ErrorCode>, ErrorCode>> {
    c.commit_offsets(&commit_req(member, generation, offset), now)
}

#[test]
fn commits_of_a_fenced_generation_are_refused() {
    let mut c = GroupCoordinator::new(config());
    let a = single_member_group(&mut c, 0);
    assert_eq!(
        commit(&mut c, &a, 1, 10, 10).result,
        Ok(vec![ErrorCode::NONE])
    );
    assert_eq!(c.committed(G, "t", 0).map(|o| o.offset), Some(10));
    // A second member: generation 2. A's generation-1 commit is fenced.
    let b = member_id_for(&mut c, 20);
    c.join(&join_req(&b, "m"), 20);
    c.join(&join_req(&a, "m"), 20);
    c.sync(&sync_req(&a, 2, &[]), 30);
    c.sync(&sync_req(&b, 2, &[]), 30);
    assert_eq!(
        commit(&mut c, &a, 1, 99, 40).result,
        Err(ErrorCode::ILLEGAL_GENERATION)
    );
    assert_eq!(c.committed(G, "t", 0).map(|o| o.offset), Some(10));
    assert_eq!(
        commit(&mut c, "stranger", 2, 99, 40).result,
        Err(ErrorCode::UNKNOWN_MEMBER_ID)
    );
    // A non-member (generation -1) may not commit into an active group.
    assert_eq!(
        commit(&mut c, "", -1, 99, 40).result,
        Err(ErrorCode::UNKNOWN_MEMBER_ID)
    );
    assert_eq!(
        commit(&mut c, &b, 2, 11, 40).result,
        Ok(vec![ErrorCode::NONE])
    );
    assert_eq!(c.committed(G, "t", 0).map(|o| o.offset), Some(11));
}

#[test]
fn simple_commits_create_an_empty_group_and_missing_groups_refuse_generations() {
    let mut c = GroupCoordinator::new(config());
    let out = commit(&mut c, "", -1, 5, 0);
    assert_eq!(out.result, Ok(vec![ErrorCode::NONE]));
    assert_eq!(out.records.len(), 1);
    assert_eq!(c.group_state(G), Some(GroupState::Empty));
    let mut req = commit_req("m", 3, 1);
    req.group_id = "absent".to_string();
    assert_eq!(
        c.commit_offsets(&req, 0).result,
        Err(ErrorCode::ILLEGAL_GENERATION)
    );
    req.api_version = 9;
    assert_eq!(
        c.commit_offsets(&req, 0).result,
        Err(ErrorCode::GROUP_ID_NOT_FOUND)
    );
    let mut big = commit_req("", -1, 1);
    big.offsets[0].offset.metadata = "x".repeat(4097);
    assert_eq!(
        c.commit_offsets(&big, 0).result,
        Ok(vec![ErrorCode::OFFSET_METADATA_TOO_LARGE])
    );
    assert_eq!(c.committed(G, "t", 0).map(|o| o.offset), Some(5));
}

#[test]
fn transactional_offsets_wait_for_their_marker() {
    let mut c = GroupCoordinator::new(config());
    let req = commit_req("", -1, 42);
    assert_eq!(
        c.commit_txn_offsets(7, 0, &req, 0).result,
        Ok(vec![ErrorCode::NONE])
    );
    assert_eq!(c.committed(G, "t", 0), None);
    assert!(c.has_pending_offset(G, "t", 0));
    c.complete_txn(7, 0, false, false);
    assert_eq!(c.committed(G, "t", 0), None);
    assert!(!c.has_pending_offset(G, "t", 0));
    c.commit_txn_offsets(7, 1, &commit_req("", -1, 43), 0);
    c.complete_txn(7, 1, true, false);
    assert_eq!(c.committed(G, "t", 0).map(|o| o.offset), Some(43));
}

#[test]
fn recovery_from_records_restores_offsets_and_generations() {
    let mut c = GroupCoordinator::new(config());
    let mut log = Vec::new();
    let a = single_member_group(&mut c, 0);
    let out = commit(&mut c, &a, 1, 10, 0);
    log.extend(out.records);
    let out = c.commit_txn_offsets(9, 0, &commit_req(&a, 1, 20), 0);
    log.extend(out.records);
    let out = c.tick(100_000);
    log.extend(out.records);
    let encoded: Vec<Vec<u8>> = log.iter().map(GroupRecord::encode).collect();
    let decoded = encoded.iter().map(|b| GroupRecord::decode(b).unwrap());
    let r = GroupCoordinator::recover(config(), decoded);
    assert_eq!(r.committed(G, "t", 0).map(|o| o.offset), Some(10));
    assert!(r.has_pending_offset(G, "t", 0));
    assert_eq!(r.generation(G), c.generation(G));
    assert_eq!(r.group_state(G), Some(GroupState::Empty));
    // A snapshot replays to the same state.
    let again = GroupCoordinator::recover(config(), r.snapshot_records());
    assert_eq!(again.committed_all(G), r.committed_all(G));
    assert_eq!(again.generation(G), r.generation(G));
    assert!(again.has_pending_offset(G, "t", 0));
}

#[test]
fn next_deadline_tracks_sessions_and_phases() {
    let mut c = GroupCoordinator::new(config());
    assert_eq!(c.next_deadline_ms(), None);
    let a = single_member_group(&mut c, 0);
    assert_eq!(c.next_deadline_ms(), Some(i64::from(SESSION)));
    c.heartbeat(G, &a, None, 1, 500);
    assert_eq!(c.next_deadline_ms(), Some(500 + i64::from(SESSION)));
}

#[test]
fn delete_group_only_when_empty_and_offsets_of_unsubscribed_topics() {
    let mut c = GroupCoordinator::new(config());
    assert_eq!(c.delete_group(G), Err(ErrorCode::GROUP_ID_NOT_FOUND));
    // A consumer-protocol member subscribed to "t": version 0, ["t"].
    let sub = Bytes::from_static(&[0, 0, 0, 0, 0, 1, 0, 1, b't']);
    assert_eq!(
        super::admin::subscribed_topics(&sub),
        Some(vec!["t".to_string()])
    );
    let mut r = join_req("", "");
    r.require_known_member_id = false;
    r.protocols = vec![("range".to_string(), sub)];
    let Reply::Parked { member_id: a } = c.join(&r, 0).result else {
        panic!()
    };
    c.tick(0);
    c.sync(&sync_req(&a, 1, &[]), 0);
    let mut both = commit_req(&a, 1, 3);
    both.offsets.push(PartitionOffset {
        topic: "u".to_string(),
        ..both.offsets[0].clone()
    });
    assert_eq!(
        c.commit_offsets(&both, 0).result,
        Ok(vec![ErrorCode::NONE, ErrorCode::NONE])
    );
    assert_eq!(c.delete_group(G), Err(ErrorCode::NON_EMPTY_GROUP));
    let parts = [("t".to_string(), 0), ("u".to_string(), 0)];
    let (codes, record) = c.delete_offsets(G, &parts).unwrap();
    assert_eq!(
        codes,
        vec![ErrorCode::GROUP_SUBSCRIBED_TO_TOPIC, ErrorCode::NONE]
    );
    assert!(record.is_some());
    assert_eq!(c.committed(G, "u", 0), None);
    assert!(c.committed(G, "t", 0).is_some());
    // Once Empty, the group and its offsets can go.
    c.leave(
        G,
        &[LeaveMember {
            member_id: a,
            group_instance_id: None,
        }],
        10,
    );
    assert_eq!(c.group_state(G), Some(GroupState::Empty));
    let record = c.delete_group(G).unwrap();
    assert_eq!(c.group_state(G), None);
    assert_eq!(c.committed(G, "t", 0), None);
    // And it stays deleted after recovery.
    let again = GroupCoordinator::recover(config(), [record]);
    assert_eq!(again.group_state(G), None);
}

#[test]
fn a_late_v2_marker_does_not_settle_the_next_transactions_offsets() {
    let mut c = GroupCoordinator::new(config());
    // Transaction 1 stages at epoch 0; its v2 marker comes at epoch 1.
    c.commit_txn_offsets(7, 0, &commit_req("", -1, 10), 0);
    assert!(c.complete_txn(7, 1, true, true).is_some());
    assert_eq!(c.committed(G, "t", 0).map(|o| o.offset), Some(10));
    // Transaction 2 stages at epoch 1.
    c.commit_txn_offsets(7, 1, &commit_req("", -1, 20), 0);
    // A late copy of transaction 1's marker: nothing happens.
    assert_eq!(c.complete_txn(7, 1, false, true), None);
    assert!(c.has_pending_offset(G, "t", 0));
    // Transaction 2's own marker (epoch 2) settles it.
    assert!(c.complete_txn(7, 2, true, true).is_some());
    assert_eq!(c.committed(G, "t", 0).map(|o| o.offset), Some(20));
}

fn commit_at(c: &mut GroupCoordinator, member: &str, generation: i32, offset: i64, now: i64) {
    let mut req = commit_req(member, generation, offset);
    req.offsets[0].offset.commit_timestamp_ms = now;
    assert_eq!(
        c.commit_offsets(&req, now).result,
        Ok(vec![ErrorCode::NONE])
    );
}

#[test]
fn offsets_expire_retention_after_the_group_became_empty_then_the_group_goes() {
    let mut c = GroupCoordinator::new(config());
    let a = single_member_group(&mut c, 0);
    commit_at(&mut c, &a, 1, 10, 10);
    // While the group has a member nothing expires, however old.
    assert!(
        c.expire_offsets(10_000_000, 100, |_| None)
            .records
            .is_empty()
    );
    // The session ends: the group becomes Empty.
    c.tick(20_000);
    c.tick(20_000 + REBALANCE as i64);
    assert_eq!(c.group_state(G), Some(GroupState::Empty));
    let since = c.groups[G].state_since_ms;
    assert!(
        c.expire_offsets(since + 99, 100, |_| None)
            .records
            .is_empty()
    );
    assert_eq!(c.committed(G, "t", 0).map(|o| o.offset), Some(10));
    let e = c.expire_offsets(since + 100, 100, |_| None);
    assert_eq!(e.expired, vec![(G.to_string(), "t".to_string(), 0)]);
    assert_eq!(e.deleted_groups, vec![G.to_string()]);
    assert_eq!(c.committed(G, "t", 0), None);
    assert_eq!(c.group_state(G), None);
    // The records replay to the same state (what a restart sees).
    let committed = GroupRecord::Offsets {
        group_id: G.to_string(),
        offsets: commit_req(&a, 1, 10).offsets,
    };
    let replayed = GroupCoordinator::recover(config(), std::iter::once(committed).chain(e.records));
    assert_eq!(replayed.committed(G, "t", 0), None);
    assert_eq!(replayed.group_state(G), None);
}

#[test]
fn standalone_commits_expire_retention_after_the_commit_unless_the_group_is_active() {
    let mut c = GroupCoordinator::new(config());
    commit_at(&mut c, "", -1, 5, 50);
    assert!(c.expire_offsets(149, 100, |_| None).records.is_empty());
    // A consumer-protocol group with members keeps its offsets; one
    // without members since 900 keeps them until 1000.
    assert!(
        c.expire_offsets(1_000, 100, |_| Some(i64::MAX))
            .records
            .is_empty()
    );
    assert!(c.expire_offsets(999, 100, |_| Some(900)).records.is_empty());
    let e = c.expire_offsets(1_000, 100, |_| Some(900));
    assert_eq!(e.expired.len(), 1);
    assert_eq!(e.deleted_groups, vec![G.to_string()]);
    assert_eq!(c.committed(G, "t", 0), None);
}
