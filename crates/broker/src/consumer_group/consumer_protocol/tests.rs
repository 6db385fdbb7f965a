//! The KIP-848 state machine with explicit time: epochs, reconciliation
//! (a partition moves only once revoked), session and revocation timeouts,
//! regex subscriptions, assignors, and the offset commit check.

use super::*;

const T1: Uuid = Uuid::from_u128(0x71);
const T2: Uuid = Uuid::from_u128(0x72);
const X: Uuid = Uuid::from_u128(0x78);

fn topics() -> Topics {
    [
        ("t1".to_string(), (T1, 4)),
        ("t2".to_string(), (T2, 2)),
        ("x".to_string(), (X, 1)),
    ]
    .into_iter()
    .collect()
}

fn join(member: &str, names: &[&str]) -> ConsumerHeartbeat {
    ConsumerHeartbeat {
        group_id: "g".into(),
        member_id: member.into(),
        member_epoch: 0,
        rebalance_timeout_ms: 30_000,
        subscribed_topic_names: Some(names.iter().map(|s| s.to_string()).collect()),
        ..Default::default()
    }
}

fn beat(member: &str, epoch: i32, owned: Option<&Assignment>) -> ConsumerHeartbeat {
    ConsumerHeartbeat {
        group_id: "g".into(),
        member_id: member.into(),
        member_epoch: epoch,
        rebalance_timeout_ms: -1,
        owned: owned.cloned(),
        ..Default::default()
    }
}

/// An OffsetCommit v9 of `member` at `epoch`.
fn commit<'a>(member: &'a str, epoch: i32, partitions: &'a [(Uuid, i32)]) -> MemberCommit<'a> {
    MemberCommit {
        member_id: member,
        member_epoch: epoch,
        instance_id: None,
        transactional: false,
        api_version: 9,
        partitions,
    }
}

fn n(a: &Assignment) -> usize {
    a.values().map(BTreeSet::len).sum()
}

fn groups() -> ConsumerProtocolGroups {
    ConsumerProtocolGroups::new(ConsumerProtocolConfig::default())
}

/// At time 0: m1 joins on t1 and confirms it owns everything, then m2
/// joins (the group at epoch 2, m1 still at 1 holding all of t1). Returns
/// m1's first assignment.
fn m1_then_m2(g: &mut ConsumerProtocolGroups, t: &Topics) -> Assignment {
    let a1 = g
        .heartbeat(&join("m1", &["t1"]), t, 0)
        .unwrap()
        .assignment
        .unwrap();
    g.heartbeat(&beat("m1", 1, Some(&a1)), t, 0).unwrap();
    g.heartbeat(&join("m2", &["t1"]), t, 0).unwrap();
    a1
}

/// After [`m1_then_m2`]: m1 is told to give two partitions up, reports
/// them gone and moves to epoch 2. Returns what it kept.
fn m1_gives_up_half(g: &mut ConsumerProtocolGroups, t: &Topics) -> Assignment {
    let kept = g
        .heartbeat(&beat("m1", 1, None), t, 1)
        .unwrap()
        .assignment
        .unwrap();
    let r = g.heartbeat(&beat("m1", 1, Some(&kept)), t, 2).unwrap();
    assert_eq!(r.member_epoch, 2);
    kept
}

#[test]
fn kip848_a_partition_moves_only_after_its_owner_revoked_it() {
    let mut g = groups();
    let t = topics();
    let r1 = g.heartbeat(&join("m1", &["t1"]), &t, 0).unwrap();
    assert_eq!(r1.member_epoch, 1);
    let a1 = r1.assignment.unwrap();
    assert_eq!(n(&a1), 4, "alone: every partition");
    // m1 confirms it owns them.
    let r = g.heartbeat(&beat("m1", 1, Some(&a1)), &t, 10).unwrap();
    assert_eq!((r.member_epoch, r.assignment), (1, None), "nothing changed");

    // m2 joins: epoch 2; m1 still owns everything, so m2 gets nothing yet.
    let r2 = g.heartbeat(&join("m2", &["t1"]), &t, 20).unwrap();
    assert_eq!(r2.member_epoch, 2);
    assert_eq!(n(&r2.assignment.unwrap()), 0, "held by m1: not given yet");
    assert_eq!(
        g.describe("g").unwrap().state,
        ConsumerGroupState::Reconciling
    );

    // m1 is told to drop two; its epoch stays until it has.
    let r = g.heartbeat(&beat("m1", 1, None), &t, 30).unwrap();
    assert_eq!(r.member_epoch, 1, "epoch held while revoking");
    let kept = r.assignment.unwrap();
    assert_eq!(n(&kept), 2);
    // m2 heartbeats before m1 confirmed: still nothing.
    let r = g.heartbeat(&beat("m2", 2, None), &t, 35).unwrap();
    assert_eq!(r.assignment, None);
    assert_eq!(n(g.assigned("g", "m2").unwrap()), 0);
    // m1 reports it owns only the kept two: it moves to epoch 2.
    let r = g.heartbeat(&beat("m1", 1, Some(&kept)), &t, 40).unwrap();
    assert_eq!(r.member_epoch, 2);
    // Now m2 gets the two m1 gave up.
    let r = g.heartbeat(&beat("m2", 2, None), &t, 50).unwrap();
    let got = r.assignment.unwrap();
    assert_eq!(n(&got), 2);
    assert!(intersect(&got, &kept).is_empty(), "never two owners");
    assert_eq!(g.describe("g").unwrap().state, ConsumerGroupState::Stable);
}

#[test]
fn kip848_session_timeout_on_the_given_clock_and_a_leave() {
    let mut g = groups();
    let t = topics();
    m1_then_m2(&mut g, &t);
    assert_eq!(g.next_deadline_ms(), Some(45_000));
    // m1 keeps heartbeating (reporting what it owns), m2 goes silent.
    for now in [10_000, 20_000, 30_000, 40_000, 44_000] {
        let epoch = g.describe("g").unwrap().members[0].member_epoch;
        let owned = g.assigned("g", "m1").cloned();
        let r = g.heartbeat(&beat("m1", epoch, owned.as_ref()), &t, now);
        assert!(r.is_ok(), "{r:?}");
    }
    assert_eq!(g.describe("g").unwrap().members[0].member_epoch, 2);
    assert!(g.tick(44_999).is_empty());
    assert_eq!(g.tick(45_000), vec![("g".to_string(), "m2".to_string())]);
    let d = g.describe("g").unwrap();
    assert_eq!(d.members.len(), 1);
    assert_eq!(
        n(&d.members[0].target_assignment),
        4,
        "m1's target is everything again"
    );
    // A leave: epoch -1 echoed, the group becomes Empty.
    let epoch = d.members[0].member_epoch;
    let r = g.heartbeat(&beat("m1", -1, None), &t, 45_001).unwrap();
    assert_eq!(r.member_epoch, -1);
    assert_eq!(g.describe("g").unwrap().state, ConsumerGroupState::Empty);
    assert_eq!(
        g.heartbeat(&beat("m1", epoch, None), &t, 45_002)
            .unwrap_err()
            .code,
        ErrorCode::UNKNOWN_MEMBER_ID
    );
}

/// `consumer.session.timeout.ms` and `consumer.heartbeat.interval.ms` as
/// the group's configs give them at each heartbeat: the interval is
/// answered, and the session runs from each heartbeat with the value that
/// heartbeat carried.
#[test]
fn kip848_the_group_configs_set_the_session_and_the_interval() {
    let mut g = groups();
    let t = topics();
    let with = |mut hb: ConsumerHeartbeat, session: i32, interval: i32| {
        hb.group_timing = Some(GroupTiming {
            session_timeout_ms: session,
            heartbeat_interval_ms: interval,
        });
        hb
    };
    let r = g
        .heartbeat(&with(join("m1", &["t1"]), 50_000, 15_000), &t, 0)
        .unwrap();
    assert_eq!(r.heartbeat_interval_ms, 15_000);
    assert_eq!(g.next_deadline_ms(), Some(50_000));
    assert!(g.tick(49_999).is_empty());
    // The group's config changed: the next heartbeat carries the new values.
    let r = g
        .heartbeat(
            &with(beat("m1", r.member_epoch, None), 45_000, 5_000),
            &t,
            40_000,
        )
        .unwrap();
    assert_eq!(r.heartbeat_interval_ms, 5_000);
    assert_eq!(g.next_deadline_ms(), Some(85_000));
    assert!(g.tick(84_999).is_empty());
    assert_eq!(g.tick(85_000), vec![("g".to_string(), "m1".to_string())]);
    // Without the group's values (None), the broker's defaults.
    let r = g.heartbeat(&join("m2", &["t1"]), &t, 90_000).unwrap();
    assert_eq!(r.heartbeat_interval_ms, 5_000);
    assert_eq!(g.next_deadline_ms(), Some(135_000));
    // A leave answers with the group's interval too.
    let r = g
        .heartbeat(&with(beat("m2", -1, None), 60_000, 12_000), &t, 91_000)
        .unwrap();
    assert_eq!((r.member_epoch, r.heartbeat_interval_ms), (-1, 12_000));
}

#[test]
fn kip848_a_member_that_does_not_revoke_in_time_is_removed() {
    let mut g = groups();
    let t = topics();
    let a1 = m1_then_m2(&mut g, &t);
    g.heartbeat(&beat("m1", 1, None), &t, 1_000).unwrap(); // told to revoke
    // It keeps heartbeating but never reports the partitions dropped.
    g.heartbeat(&beat("m1", 1, Some(&a1)), &t, 20_000).unwrap();
    assert!(g.tick(30_999).is_empty());
    let gone = g.tick(31_000);
    assert_eq!(gone, vec![("g".to_string(), "m1".to_string())]);
    let r = g.heartbeat(&beat("m2", 2, None), &t, 31_001).unwrap();
    assert_eq!((r.member_epoch, n(&r.assignment.unwrap())), (3, 4));
}

#[test]
fn kip848_epochs_fence_and_stale_commits_are_refused() {
    let mut g = groups();
    let t = topics();
    let r = g.heartbeat(&join("m1", &["t1"]), &t, 0).unwrap();
    assert_eq!(
        g.heartbeat(&beat("m1", 7, None), &t, 1).unwrap_err().code,
        ErrorCode::FENCED_MEMBER_EPOCH
    );
    assert_eq!(
        g.heartbeat(&beat("nobody", 1, None), &t, 1)
            .unwrap_err()
            .code,
        ErrorCode::UNKNOWN_MEMBER_ID
    );
    g.heartbeat(&beat("m1", r.member_epoch, r.assignment.as_ref()), &t, 1)
        .unwrap();
    g.heartbeat(&join("m2", &["t1"]), &t, 2).unwrap();
    let e1 = g.heartbeat(&beat("m1", 1, None), &t, 3).unwrap();
    let kept = e1.assignment.unwrap();
    let e1 = g
        .heartbeat(&beat("m1", 1, Some(&kept)), &t, 4)
        .unwrap()
        .member_epoch;
    assert_eq!(e1, 2);
    let mine: Vec<(Uuid, i32)> = kept
        .iter()
        .flat_map(|(t, ps)| ps.iter().map(|p| (*t, *p)))
        .collect();
    assert_eq!(mine.len(), 2);
    let all: Vec<(Uuid, i32)> = (0..4).map(|p| (T1, p)).collect();
    assert_eq!(g.validate_commit("g", &commit("m1", 2, &all)), Ok(()));
    assert_eq!(
        g.validate_commit("g", &commit("m1", 3, &mine)),
        Err(ErrorCode::STALE_MEMBER_EPOCH),
        "newer than the member's epoch"
    );
    assert_eq!(
        g.validate_commit("g", &commit("zz", 2, &mine)),
        Err(ErrorCode::UNKNOWN_MEMBER_ID)
    );
    assert_eq!(
        g.validate_commit("g", &commit("", -1, &mine)),
        Err(ErrorCode::UNKNOWN_MEMBER_ID),
        "an admin commit into a group with members"
    );
    assert_eq!(
        g.validate_commit("h", &commit("m1", 2, &mine)),
        Err(ErrorCode::GROUP_ID_NOT_FOUND)
    );
    assert_eq!(g.validate_fetch("g", "m1", 2), Ok(()));
    assert_eq!(
        g.validate_fetch("g", "m1", 1),
        Err(ErrorCode::STALE_MEMBER_EPOCH)
    );
    assert_eq!(
        g.validate_fetch("g", "zz", 2),
        Err(ErrorCode::UNKNOWN_MEMBER_ID)
    );
    assert_eq!(
        g.validate_fetch("classic", "m1", 1),
        Ok(()),
        "not ours to check"
    );
}

/// KIP-1251 (Kafka 4.3+): a commit at an epoch older than the member's
/// passes for the partitions the member was given no later than that
/// epoch, and is stale for any other.
#[test]
fn kip1251_an_older_epoch_commits_what_the_member_held_since_then() {
    let mut g = groups();
    let t = topics();
    let a1 = m1_then_m2(&mut g, &t);
    let kept = m1_gives_up_half(&mut g, &t);
    let r2 = g.heartbeat(&beat("m2", 2, None), &t, 3).unwrap();
    let theirs = r2.assignment.unwrap();
    assert_eq!((n(&kept), n(&theirs)), (2, 2));
    let pairs = |a: &Assignment| -> Vec<(Uuid, i32)> {
        a.iter()
            .flat_map(|(t, ps)| ps.iter().map(move |p| (*t, *p)))
            .collect()
    };
    let (mine, given, all) = (pairs(&kept), pairs(&theirs), pairs(&a1));

    // The commit m1 sent before its heartbeat's answer raised its epoch.
    assert_eq!(g.validate_commit("g", &commit("m1", 1, &mine)), Ok(()));
    assert_eq!(
        g.validate_commit("g", &commit("m1", 1, &all)),
        Err(ErrorCode::STALE_MEMBER_EPOCH),
        "two of them are m2's now"
    );
    assert_eq!(
        g.validate_commit("g", &commit("m1", 1, &given)),
        Err(ErrorCode::STALE_MEMBER_EPOCH)
    );
    // m2 was given its partitions at epoch 2.
    assert_eq!(g.validate_commit("g", &commit("m2", 2, &given)), Ok(()));
    assert_eq!(
        g.validate_commit("g", &commit("m2", 1, &given)),
        Err(ErrorCode::STALE_MEMBER_EPOCH)
    );

    // TxnOffsetCommit: stale is ILLEGAL_GENERATION below v6; a producer
    // that names only the group is not checked; an OffsetCommit of a
    // consumer-protocol member must be v9+.
    let txn = |member, epoch, version, parts| MemberCommit {
        transactional: true,
        api_version: version,
        ..commit(member, epoch, parts)
    };
    assert_eq!(g.validate_commit("g", &txn("m1", 1, 5, &mine)), Ok(()));
    assert_eq!(
        g.validate_commit("g", &txn("m1", 1, 5, &given)),
        Err(ErrorCode::ILLEGAL_GENERATION)
    );
    assert_eq!(
        g.validate_commit("g", &txn("m1", 1, 6, &given)),
        Err(ErrorCode::STALE_MEMBER_EPOCH)
    );
    assert_eq!(g.validate_commit("g", &txn("", -1, 5, &given)), Ok(()));
    assert_eq!(
        g.validate_commit(
            "g",
            &MemberCommit {
                api_version: 8,
                ..commit("m1", 2, &mine)
            }
        ),
        Err(ErrorCode::UNSUPPORTED_VERSION)
    );

    // The epochs are durable; a snapshot written before they were kept
    // restores to the strict check.
    let snap = g.snapshot("g").unwrap();
    let mut back = groups();
    back.restore("g", Some(snap.clone()), 10);
    assert_eq!(back.validate_commit("g", &commit("m1", 1, &mine)), Ok(()));
    let mut old = snap;
    for m in old.members.values_mut() {
        m.assignment_epochs.clear();
    }
    let mut back = groups();
    back.restore("g", Some(old), 10);
    assert_eq!(
        back.validate_commit("g", &commit("m1", 1, &mine)),
        Err(ErrorCode::STALE_MEMBER_EPOCH)
    );
    assert_eq!(back.validate_commit("g", &commit("m1", 2, &mine)), Ok(()));
}

/// A heartbeat whose answer (the move to a new epoch) was lost is sent
/// again at the previous epoch: taken back when what it reports owning is
/// all still assigned, fenced otherwise, as Kafka does.
#[test]
fn kip848_a_heartbeat_whose_answer_was_lost_is_taken_back_at_the_previous_epoch() {
    let mut g = groups();
    let t = topics();
    let a1 = m1_then_m2(&mut g, &t);
    // The answer that moved m1 to epoch 2 never reaches it.
    let kept = m1_gives_up_half(&mut g, &t);

    // Owning more than is assigned now: fenced.
    assert_eq!(
        g.heartbeat(&beat("m1", 1, Some(&a1)), &t, 3)
            .unwrap_err()
            .code,
        ErrorCode::FENCED_MEMBER_EPOCH
    );
    // Not saying what it owns: fenced.
    assert_eq!(
        g.heartbeat(&beat("m1", 1, None), &t, 3).unwrap_err().code,
        ErrorCode::FENCED_MEMBER_EPOCH
    );
    // The retry as it was: epoch 2 and the assignment again.
    let again = g.heartbeat(&beat("m1", 1, Some(&kept)), &t, 3).unwrap();
    assert_eq!(
        (again.member_epoch, again.assignment),
        (2, Some(kept.clone()))
    );
    // Once m1 moved again, its old previous epoch is fenced.
    g.heartbeat(&join("m3", &["t1"]), &t, 4).unwrap();
    let r = g.heartbeat(&beat("m1", 2, Some(&kept)), &t, 5).unwrap();
    let now_kept = r.assignment.unwrap_or(kept.clone());
    g.heartbeat(&beat("m1", 2, Some(&now_kept)), &t, 6).unwrap();
    assert_eq!(
        g.heartbeat(&beat("m1", 1, Some(&now_kept)), &t, 7)
            .unwrap_err()
            .code,
        ErrorCode::FENCED_MEMBER_EPOCH
    );
}

#[test]
fn kip848_regex_subscriptions_follow_new_topics() {
    let mut g = groups();
    let mut t = topics();
    let mut req = join("m1", &[]);
    req.subscribed_topic_names = None;
    req.subscribed_topic_regex = Some("t.*".into());
    let r = g.heartbeat(&req, &t, 0).unwrap();
    let a = r.assignment.unwrap();
    assert_eq!(a.keys().copied().collect::<Vec<_>>(), vec![T1, T2], "not x");
    g.heartbeat(&beat("m1", 1, Some(&a)), &t, 1).unwrap();
    // A new matching topic: a new epoch with it.
    let t3 = Uuid::from_u128(0x73);
    t.insert("t3".into(), (t3, 1));
    let r = g.heartbeat(&beat("m1", 1, Some(&a)), &t, 2).unwrap();
    assert_eq!(r.member_epoch, 2);
    assert!(r.assignment.unwrap().contains_key(&t3));
    let mut bad = join("m2", &[]);
    bad.subscribed_topic_names = None;
    bad.subscribed_topic_regex = Some("(".into());
    assert_eq!(
        g.heartbeat(&bad, &t, 3).unwrap_err().code,
        INVALID_REGULAR_EXPRESSION
    );
}

#[test]
fn kip848_assignors_and_request_checks() {
    let mut g = groups();
    let t = topics();
    let mut req = join("m1", &["t1"]);
    req.server_assignor = Some("sticky".into());
    assert_eq!(
        g.heartbeat(&req, &t, 0).unwrap_err().code,
        ErrorCode::UNSUPPORTED_ASSIGNOR
    );
    req.server_assignor = Some("range".into());
    let a = g.heartbeat(&req, &t, 0).unwrap().assignment.unwrap();
    g.heartbeat(&beat("m1", 1, Some(&a)), &t, 0).unwrap();
    assert_eq!(g.describe("g").unwrap().assignor_name, "range");
    let r = g.heartbeat(&join("m2", &["t1"]), &t, 0).unwrap();
    assert_eq!(r.member_epoch, 2);
    let d = g.describe("g").unwrap();
    let target = |m: &str| {
        d.members
            .iter()
            .find(|x| x.member_id == m)
            .unwrap()
            .target_assignment[&T1]
            .iter()
            .copied()
            .collect::<Vec<_>>()
    };
    assert_eq!(
        (target("m1"), target("m2")),
        (vec![0, 1], vec![2, 3]),
        "range"
    );

    let mut no_timeout = join("m3", &["t1"]);
    no_timeout.rebalance_timeout_ms = -1;
    assert_eq!(
        g.heartbeat(&no_timeout, &t, 0).unwrap_err().code,
        ErrorCode::INVALID_REQUEST
    );
    assert_eq!(
        g.heartbeat(&join("", &["t1"]), &t, 0).unwrap_err().code,
        ErrorCode::INVALID_REQUEST
    );
    assert_eq!(
        g.heartbeat(&join("m3", &[]), &t, 0).unwrap_err().code,
        ErrorCode::INVALID_REQUEST
    );
    assert_eq!(
        g.heartbeat(&beat("m1", -3, None), &t, 0).unwrap_err().code,
        ErrorCode::INVALID_REQUEST
    );
    assert_eq!(g.delete_group("g"), Err(ErrorCode::NON_EMPTY_GROUP));
}

fn static_join(member: &str, instance: &str) -> ConsumerHeartbeat {
    ConsumerHeartbeat {
        instance_id: Some(instance.into()),
        ..join(member, &["t1"])
    }
}

fn static_beat(member: &str, instance: &str, epoch: i32) -> ConsumerHeartbeat {
    ConsumerHeartbeat {
        instance_id: Some(instance.into()),
        ..beat(member, epoch, None)
    }
}

/// D29a: a snapshot restores to the same group, a member in the middle of
/// a revocation included, and the revocation still gates the move.
#[test]
fn kip848_a_restored_group_is_the_persisted_one() {
    let mut g = groups();
    let t = topics();
    m1_then_m2(&mut g, &t);
    let kept = g
        .heartbeat(&beat("m1", 1, None), &t, 0)
        .unwrap()
        .assignment
        .unwrap();
    let snap = g.snapshot("g").unwrap();
    let json = serde_json::to_vec(&snap).unwrap();
    let back: PersistedConsumerGroup = serde_json::from_slice(&json).unwrap();
    assert_eq!(back, snap);

    let mut r = groups();
    r.restore("g", Some(back), 1_000);
    assert_eq!(r.snapshot("g").unwrap(), snap);
    assert_eq!(r.next_deadline_ms(), Some(31_000), "revocation restarts");
    assert_eq!(
        r.heartbeat(&beat("m2", 2, None), &t, 1_000)
            .unwrap()
            .assignment,
        None,
        "m1 has not revoked"
    );
    let ok = r.heartbeat(&beat("m1", 1, Some(&kept)), &t, 1_000).unwrap();
    assert_eq!(ok.member_epoch, 2);
    let got = r
        .heartbeat(&beat("m2", 2, None), &t, 1_000)
        .unwrap()
        .assignment
        .unwrap();
    assert_eq!(n(&got), 2);
    r.restore("g", None, 2_000);
    assert!(!r.contains("g"));
}

/// Kafka's static membership: -2 keeps the assignment until the session
/// expires, a new member id with the instance id takes it over with no
/// rebalance, a second live holder is UNRELEASED_INSTANCE_ID.
#[test]
fn kip848_static_member_leave_replace_and_unreleased_instance_id() {
    let mut g = groups();
    let t = topics();
    let a = g
        .heartbeat(&static_join("a1", "A"), &t, 0)
        .unwrap()
        .assignment
        .unwrap();
    g.heartbeat(&beat("a1", 1, Some(&a)), &t, 0).unwrap();
    let b = g.heartbeat(&join("b1", &["t1"]), &t, 0).unwrap();
    assert_eq!(b.member_epoch, 2);
    let kept = g
        .heartbeat(&static_beat("a1", "A", 1), &t, 10)
        .unwrap()
        .assignment
        .unwrap();
    g.heartbeat(&beat("a1", 1, Some(&kept)), &t, 10).unwrap();
    let b_got = g
        .heartbeat(&beat("b1", 2, None), &t, 10)
        .unwrap()
        .assignment
        .unwrap();
    g.heartbeat(&beat("b1", 2, Some(&b_got)), &t, 10).unwrap();
    assert_eq!(g.describe("g").unwrap().state, ConsumerGroupState::Stable);

    // A second process with the same instance id while a1 is live.
    let e = g.heartbeat(&static_join("a2", "A"), &t, 20).unwrap_err();
    assert_eq!(e.code, ErrorCode::UNRELEASED_INSTANCE_ID);
    // a2 naming the instance id at a non-zero epoch is fenced.
    let e = g.heartbeat(&static_beat("a2", "A", 2), &t, 20).unwrap_err();
    assert_eq!(e.code, ErrorCode::FENCED_INSTANCE_ID);
    let e = g.heartbeat(&static_beat("a2", "Z", 2), &t, 20).unwrap_err();
    assert_eq!(e.code, ErrorCode::UNKNOWN_MEMBER_ID);

    // a1 leaves temporarily: no rebalance, its partitions stay its own.
    let r = g.heartbeat(&static_beat("a1", "A", -2), &t, 1_000).unwrap();
    assert_eq!(r.member_epoch, -2);
    let d = g.describe("g").unwrap();
    assert_eq!(d.group_epoch, 2, "no new group epoch");
    assert_eq!(d.state, ConsumerGroupState::Stable);
    assert_eq!(g.assigned("g", "a1"), Some(&kept));
    let r = g.heartbeat(&beat("b1", 2, None), &t, 1_000).unwrap();
    assert_eq!(r.assignment, None, "b1 gets nothing of a1's");

    // The restarted process: a new member id, the same instance id.
    let r = g.heartbeat(&static_join("a2", "A"), &t, 2_000).unwrap();
    assert_eq!((r.member_epoch, r.assignment), (2, Some(kept.clone())));
    assert_eq!(g.describe("g").unwrap().group_epoch, 2, "no rebalance");
    assert!(g.assigned("g", "a1").is_none(), "replaced");
    // The new instance holds a1's partitions from its own epoch on.
    let held: Vec<(Uuid, i32)> = kept
        .iter()
        .flat_map(|(t, ps)| ps.iter().map(move |p| (*t, *p)))
        .collect();
    assert_eq!(g.validate_commit("g", &commit("a2", 2, &held)), Ok(()));
    assert_eq!(
        g.validate_commit("g", &commit("a2", 1, &held)),
        Err(ErrorCode::STALE_MEMBER_EPOCH)
    );
    let e = g
        .heartbeat(&static_beat("a1", "A", 2), &t, 2_000)
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::FENCED_INSTANCE_ID);

    // Left again with -2 and never back: the session (from its last
    // heartbeat, 2 000) expires and b1 gets everything.
    g.heartbeat(&static_beat("a2", "A", -2), &t, 10_000)
        .unwrap();
    g.heartbeat(&beat("b1", 2, None), &t, 40_000).unwrap();
    assert!(g.tick(46_999).is_empty());
    assert_eq!(g.tick(47_000), vec![("g".to_string(), "a2".to_string())]);
    let r = g.heartbeat(&beat("b1", 2, None), &t, 47_000).unwrap();
    assert_eq!((r.member_epoch, r.assignment.map(|a| n(&a))), (3, Some(4)));

    // -1 by a static member is a real leave.
    g.heartbeat(&static_join("c1", "C"), &t, 48_000).unwrap();
    let before = g.describe("g").unwrap().group_epoch;
    g.heartbeat(&static_beat("c1", "C", -1), &t, 48_000)
        .unwrap();
    assert_eq!(g.describe("g").unwrap().group_epoch, before + 1);
    assert_eq!(g.describe("g").unwrap().members.len(), 1);
}

/// Kafka filters the topics of a regular expression by the member's
/// Describe permission (KAFKA-18813): a topic the principal may not
/// Describe is not assigned, and is once the permission is there.
#[test]
fn kip848_a_regex_resolves_only_to_describable_topics() {
    let mut g = groups();
    let t = topics();
    let only_t1: BTreeSet<String> = ["t1".to_string(), "x".to_string()].into();
    let req = ConsumerHeartbeat {
        subscribed_topic_names: None,
        subscribed_topic_regex: Some("t.*".into()),
        describable: Some(only_t1.clone()),
        ..join("m1", &[])
    };
    let a = g.heartbeat(&req, &t, 0).unwrap().assignment.unwrap();
    assert_eq!(a.keys().copied().collect::<Vec<_>>(), vec![T1], "t2 hidden");
    let hidden = ConsumerHeartbeat {
        describable: Some(only_t1),
        ..beat("m1", 1, Some(&a))
    };
    assert_eq!(g.heartbeat(&hidden, &t, 10).unwrap().assignment, None);
    // Describe on t2 granted: the next heartbeat resolves it.
    let r = g.heartbeat(&beat("m1", 1, Some(&a)), &t, 20).unwrap();
    assert_eq!(r.member_epoch, 2);
    assert_eq!(n(&r.assignment.unwrap()), 6);
}

/// Kafka's server-side assignors are not rack-aware (KAFKA-16694): a rack
/// id is kept and described, and neither it nor its change moves a
/// partition or bumps the group epoch.
#[test]
fn kip848_rack_ids_are_described_and_do_not_change_the_assignment() {
    let mut g = groups();
    let t = topics();
    let with_rack = |m: &str, rack: &str| ConsumerHeartbeat {
        rack_id: Some(rack.into()),
        ..join(m, &["t1"])
    };
    g.heartbeat(&with_rack("m1", "r1"), &t, 0).unwrap();
    g.heartbeat(&with_rack("m2", "r2"), &t, 0).unwrap();
    let before = g.describe("g").unwrap();
    let racks: Vec<_> = before.members.iter().map(|m| m.rack_id.clone()).collect();
    assert_eq!(racks, vec![Some("r1".into()), Some("r2".into())]);
    let moved = ConsumerHeartbeat {
        rack_id: Some("r3".into()),
        ..beat("m1", 1, None)
    };
    g.heartbeat(&moved, &t, 10).unwrap();
    let after = g.describe("g").unwrap();
    assert_eq!(after.group_epoch, before.group_epoch);
    assert_eq!(after.members[0].rack_id.as_deref(), Some("r3"));
    assert_eq!(
        after.members[0].target_assignment,
        before.members[0].target_assignment
    );
}
