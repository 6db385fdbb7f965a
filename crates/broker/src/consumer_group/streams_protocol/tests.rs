use super::*;
use uuid::Uuid;

const G: &str = "app";

fn topics(list: &[(&str, i32)]) -> Topics {
    list.iter()
        .map(|(n, p)| (n.to_string(), (Uuid::new_v4(), *p)))
        .collect()
}

fn spec(name: &str, partitions: i32) -> TopicSpec {
    TopicSpec {
        name: name.into(),
        partitions,
        replication_factor: 0,
        configs: vec![("cleanup.policy".into(), "compact".into())],
    }
}

/// A word count: subtopology 0 reads `in` and writes the repartition
/// topic; subtopology 1 reads it and keeps a store with a changelog.
fn word_count(epoch: i32) -> Topology {
    Topology {
        epoch,
        subtopologies: vec![
            Subtopology {
                id: "0".into(),
                source_topics: vec!["in".into()],
                repartition_sink_topics: vec!["app-rekey-repartition".into()],
                ..Subtopology::default()
            },
            Subtopology {
                id: "1".into(),
                repartition_source_topics: vec![spec("app-rekey-repartition", 0)],
                changelog_topics: vec![spec("app-counts-changelog", 0)],
                ..Subtopology::default()
            },
        ],
    }
}

fn join(member: &str) -> StreamsHeartbeat {
    StreamsHeartbeat {
        group_id: G.into(),
        member_id: member.into(),
        member_epoch: 0,
        rebalance_timeout_ms: 30_000,
        topology: Some(word_count(0)),
        process_id: Some(format!("process-{member}")),
        active_tasks: Some(Tasks::new()),
        ..StreamsHeartbeat::default()
    }
}

fn beat(member: &str, epoch: i32, owned: Option<Tasks>) -> StreamsHeartbeat {
    StreamsHeartbeat {
        group_id: G.into(),
        member_id: member.into(),
        member_epoch: epoch,
        rebalance_timeout_ms: -1,
        active_tasks: owned,
        ..StreamsHeartbeat::default()
    }
}

fn ready_topics() -> Topics {
    topics(&[
        ("in", 3),
        ("app-rekey-repartition", 3),
        ("app-counts-changelog", 3),
    ])
}

fn count(t: &Tasks) -> usize {
    t.values().map(BTreeSet::len).sum()
}

#[test]
fn configure_counts_tasks_and_names_the_internal_topics() {
    let c = configure(&word_count(0), &topics(&[("in", 4)]));
    assert!(!c.ready());
    assert!(c.tasks.is_empty());
    let missing: Vec<(&str, i32)> = c
        .missing_internal
        .iter()
        .map(|t| (t.name.as_str(), t.partitions))
        .collect();
    assert_eq!(
        missing,
        vec![("app-rekey-repartition", 4), ("app-counts-changelog", 4)]
    );
    assert_eq!(c.status[0].0, StreamsStatus::MissingInternalTopics);
    assert_eq!(c.missing_internal[1].configs[0].1, "compact");

    let c = configure(
        &word_count(0),
        &topics(&[
            ("in", 4),
            ("app-rekey-repartition", 4),
            ("app-counts-changelog", 4),
        ]),
    );
    assert!(c.ready(), "{:?}", c.status);
    assert_eq!(c.tasks, [("0".into(), 4), ("1".into(), 4)].into());
}

#[test]
fn configure_reports_missing_sources_and_wrong_partition_counts() {
    let c = configure(&word_count(0), &topics(&[]));
    assert_eq!(c.status[0].0, StreamsStatus::MissingSourceTopics);
    assert!(c.status[0].1.contains("in"));

    let c = configure(
        &word_count(0),
        &topics(&[
            ("in", 4),
            ("app-rekey-repartition", 2),
            ("app-counts-changelog", 4),
        ]),
    );
    assert_eq!(c.status[0].0, StreamsStatus::IncorrectlyPartitionedTopics);
    assert!(c.status[0].1.contains("app-rekey-repartition"));
    assert!(c.tasks.is_empty());
}

#[test]
fn configure_copartitions_a_join() {
    // Subtopology 0 joins `left` (4 partitions) with a repartition topic
    // that has no count of its own: it must get 4.
    let t = Topology {
        epoch: 0,
        subtopologies: vec![
            Subtopology {
                id: "0".into(),
                source_topics: vec!["right".into()],
                repartition_sink_topics: vec!["r-repartition".into()],
                ..Subtopology::default()
            },
            Subtopology {
                id: "1".into(),
                source_topics: vec!["left".into()],
                repartition_source_topics: vec![spec("r-repartition", 0)],
                copartition_groups: vec![CopartitionGroup {
                    source_topics: vec![0],
                    repartition_source_topics: vec![0],
                    ..CopartitionGroup::default()
                }],
                ..Subtopology::default()
            },
        ],
    };
    let c = configure(&t, &topics(&[("left", 4), ("right", 2)]));
    assert_eq!(c.missing_internal[0].name, "r-repartition");
    assert_eq!(c.missing_internal[0].partitions, 4);

    // Two source topics of one copartition group that disagree.
    let mut bad = t.clone();
    bad.subtopologies[1].source_topics.push("other".into());
    bad.subtopologies[1].copartition_groups[0].source_topics = vec![0, 1];
    let c = configure(&bad, &topics(&[("left", 4), ("right", 2), ("other", 3)]));
    assert_eq!(c.status[0].0, StreamsStatus::IncorrectlyPartitionedTopics);
}

#[test]
fn configure_resolves_source_patterns() {
    let t = Topology {
        epoch: 0,
        subtopologies: vec![Subtopology {
            id: "0".into(),
            source_topic_regex: vec!["in-.*".into()],
            ..Subtopology::default()
        }],
    };
    let c = configure(&t, &topics(&[("in-a", 2), ("in-b", 5), ("xin-c", 9)]));
    assert_eq!(c.tasks, [("0".into(), 5)].into());
    let c = configure(&t, &topics(&[("other", 2)]));
    assert_eq!(c.status[0].0, StreamsStatus::MissingSourceTopics);
}

#[test]
fn a_lone_member_gets_every_task_at_its_join() {
    let mut g = StreamsGroups::default();
    let ok = g.heartbeat(&join("a"), &ready_topics(), 0).unwrap();
    assert_eq!(ok.member_epoch, 1);
    assert!(ok.status.is_empty(), "{:?}", ok.status);
    let tasks = ok.active_tasks().unwrap();
    assert_eq!(count(&tasks), 6);
    assert_eq!(
        g.describe(G).unwrap().state,
        StreamsGroupState::Stable,
        "one member at the target"
    );
    // Unchanged: no assignment in the answer.
    let ok = g
        .heartbeat(&beat("a", 1, None), &ready_topics(), 10)
        .unwrap();
    assert_eq!(ok.active_tasks(), None);
}

#[test]
fn without_internal_topics_the_group_is_not_ready_and_says_why() {
    let mut g = StreamsGroups::default();
    let ok = g.heartbeat(&join("a"), &topics(&[("in", 3)]), 0).unwrap();
    assert_eq!(ok.active_tasks(), Some(Tasks::new()));
    assert_eq!(ok.status[0].0, StreamsStatus::MissingInternalTopics);
    assert_eq!(g.describe(G).unwrap().state, StreamsGroupState::NotReady);
    // Once they exist, the next heartbeat brings the tasks.
    let ok = g
        .heartbeat(&beat("a", ok.member_epoch, None), &ready_topics(), 10)
        .unwrap();
    assert!(ok.status.is_empty());
    assert_eq!(count(&ok.active_tasks().unwrap()), 6);
}

#[test]
fn a_task_reaches_its_new_owner_only_after_the_old_one_gave_it_up() {
    let mut g = StreamsGroups::default();
    let t = ready_topics();
    let a = g.heartbeat(&join("a"), &t, 0).unwrap();
    let a_tasks = a.active_tasks().unwrap();
    assert_eq!(count(&a_tasks), 6);

    // b joins: the target splits the tasks, but b gets nothing a holds.
    let b = g.heartbeat(&join("b"), &t, 1).unwrap();
    assert_eq!(b.member_epoch, 2);
    assert_eq!(b.active_tasks(), Some(Tasks::new()));
    assert_eq!(g.describe(G).unwrap().state, StreamsGroupState::Reconciling);

    // a is told to keep half; its epoch stays until it reports the rest
    // given up.
    let a = g.heartbeat(&beat("a", 1, None), &t, 2).unwrap();
    assert_eq!(a.member_epoch, 1);
    let kept = a.active_tasks().unwrap();
    assert_eq!(count(&kept), 3);
    // Still owning everything: nothing moves.
    let a2 = g
        .heartbeat(&beat("a", 1, Some(a_tasks.clone())), &t, 3)
        .unwrap();
    assert_eq!(a2.member_epoch, 1);
    let b = g.heartbeat(&beat("b", 2, None), &t, 4).unwrap();
    assert_eq!(b.active_tasks(), None, "b still waits");

    // a reports the revoked tasks gone: it moves to epoch 2, and b gets
    // the other half at its next heartbeat.
    let a = g
        .heartbeat(&beat("a", 1, Some(kept.clone())), &t, 5)
        .unwrap();
    assert_eq!(a.member_epoch, 2);
    let b = g.heartbeat(&beat("b", 2, None), &t, 6).unwrap();
    let b_tasks = b.active_tasks().unwrap();
    assert_eq!(count(&b_tasks), 3);
    assert!(intersect(&b_tasks, &kept).is_empty(), "one owner per task");
    assert_eq!(g.describe(G).unwrap().state, StreamsGroupState::Stable);
}

#[test]
fn epochs_are_checked_and_a_lost_answer_is_taken_back() {
    let mut g = StreamsGroups::default();
    let t = ready_topics();
    let a = g.heartbeat(&join("a"), &t, 0).unwrap();
    let owned = a.active_tasks().unwrap();
    let e = g.heartbeat(&beat("a", 7, None), &t, 1).unwrap_err();
    assert_eq!(e.code, ErrorCode::FENCED_MEMBER_EPOCH);
    let e = g.heartbeat(&beat("x", 1, None), &t, 1).unwrap_err();
    assert_eq!(e.code, ErrorCode::UNKNOWN_MEMBER_ID);
    let mut other = beat("a", 1, None);
    other.group_id = "nope".into();
    assert_eq!(
        g.heartbeat(&other, &t, 1).unwrap_err().code,
        ErrorCode::UNKNOWN_MEMBER_ID
    );

    // b joins and leaves: a's epoch moves on twice; a retry at its
    // previous epoch that owns only what it holds gets the answer again.
    g.heartbeat(&join("b"), &t, 2).unwrap();
    let a1 = g
        .heartbeat(&beat("a", 1, Some(owned.clone())), &t, 3)
        .unwrap();
    let half = a1.active_tasks().unwrap();
    let a2 = g
        .heartbeat(&beat("a", 1, Some(half.clone())), &t, 4)
        .unwrap();
    assert_eq!(a2.member_epoch, 2);
    let retry = g.heartbeat(&beat("a", 1, Some(half)), &t, 5).unwrap();
    assert_eq!(retry.member_epoch, 2);
    assert!(retry.active_tasks().is_some());
}

#[test]
fn invalid_requests_are_refused_with_kafkas_codes() {
    let mut g = StreamsGroups::default();
    let t = ready_topics();
    let mut r = join("a");
    r.topology = None;
    assert_eq!(
        g.heartbeat(&r, &t, 0).unwrap_err().code,
        ErrorCode::INVALID_REQUEST
    );
    let mut r = join("a");
    r.member_id = String::new();
    assert_eq!(
        g.heartbeat(&r, &t, 0).unwrap_err().code,
        ErrorCode::INVALID_REQUEST
    );
    let mut r = join("a");
    r.topology.as_mut().unwrap().subtopologies[1].id = "0".into();
    assert_eq!(
        g.heartbeat(&r, &t, 0).unwrap_err().code,
        ErrorCode::STREAMS_INVALID_TOPOLOGY
    );
    // Same epoch, another topology.
    g.heartbeat(&join("a"), &t, 0).unwrap();
    let mut r = join("b");
    r.topology.as_mut().unwrap().subtopologies[0]
        .source_topics
        .push("in2".into());
    assert_eq!(
        g.heartbeat(&r, &t, 1).unwrap_err().code,
        ErrorCode::STREAMS_INVALID_TOPOLOGY_EPOCH
    );
}

#[test]
fn a_higher_topology_epoch_replaces_the_topology_and_a_lower_one_is_stale() {
    let mut g = StreamsGroups::default();
    let t = ready_topics();
    g.heartbeat(&join("a"), &t, 0).unwrap();
    let mut r = join("b");
    r.topology = Some(word_count(2));
    let b = g.heartbeat(&r, &t, 1).unwrap();
    assert!(b.status.is_empty());
    assert_eq!(g.describe(G).unwrap().topology.unwrap().epoch, 2);
    let a = g.heartbeat(&beat("a", 1, None), &t, 2).unwrap();
    assert_eq!(a.status[0].0, StreamsStatus::StaleTopology);
}

#[test]
fn leaving_and_expiring_members_free_their_tasks() {
    let mut g = StreamsGroups::default();
    let t = ready_topics();
    g.heartbeat(&join("a"), &t, 0).unwrap();
    let left = g.heartbeat(&beat("a", -1, None), &t, 1).unwrap();
    assert_eq!(left.member_epoch, -1);
    assert_eq!(g.describe(G).unwrap().state, StreamsGroupState::Empty);

    g.heartbeat(&join("a"), &t, 10).unwrap();
    let b = g.heartbeat(&join("b"), &t, 20).unwrap();
    assert_eq!(
        g.next_deadline_ms(),
        Some(10 + i64::from(SESSION_TIMEOUT_MS))
    );
    // a never heartbeats again; b does.
    g.heartbeat(&beat("b", b.member_epoch, None), &t, 30_000)
        .unwrap();
    let removed = g.tick(10 + i64::from(SESSION_TIMEOUT_MS));
    assert_eq!(removed, vec![(G.to_string(), "a".to_string())]);
    let b = g
        .heartbeat(&beat("b", b.member_epoch, None), &t, 40_000)
        .unwrap();
    assert_eq!(count(&b.active_tasks().unwrap()), 6);
}

#[test]
fn a_member_that_does_not_revoke_in_time_is_removed() {
    let mut g = StreamsGroups::default();
    let t = ready_topics();
    let a = g.heartbeat(&join("a"), &t, 0).unwrap();
    let all = a.active_tasks().unwrap();
    g.heartbeat(&join("b"), &t, 1).unwrap();
    g.heartbeat(&beat("a", 1, Some(all)), &t, 2).unwrap();
    // The revocation deadline: 30 s from the heartbeat that asked it.
    assert!(g.tick(2 + 29_999).is_empty());
    assert_eq!(g.tick(2 + 30_000), vec![(G.to_string(), "a".to_string())]);
}

#[test]
fn shutdown_requests_reach_every_member_until_the_group_empties() {
    let mut g = StreamsGroups::default();
    let t = ready_topics();
    g.heartbeat(&join("a"), &t, 0).unwrap();
    let b = g.heartbeat(&join("b"), &t, 1).unwrap();
    let mut r = beat("b", b.member_epoch, None);
    r.shutdown_application = true;
    g.heartbeat(&r, &t, 2).unwrap();
    let a = g.heartbeat(&beat("a", 1, None), &t, 3).unwrap();
    assert!(
        a.status
            .iter()
            .any(|(s, _)| *s == StreamsStatus::ShutdownApplication)
    );
}

#[test]
fn endpoints_map_to_the_partitions_their_tasks_read() {
    let mut g = StreamsGroups::default();
    let t = ready_topics();
    let mut r = join("a");
    r.user_endpoint = Some(Endpoint {
        host: "h".into(),
        port: 7,
    });
    let a = g.heartbeat(&r, &t, 0).unwrap();
    let e = a.partitions_by_endpoint.unwrap();
    assert_eq!(e.len(), 1);
    assert_eq!(e[0].active["in"], [0, 1, 2].into());
    assert_eq!(e[0].active["app-rekey-repartition"], [0, 1, 2].into());
    // Up to date: not sent again.
    let mut r = beat("a", a.member_epoch, None);
    r.endpoint_information_epoch = a.endpoint_information_epoch;
    assert!(
        g.heartbeat(&r, &t, 1)
            .unwrap()
            .partitions_by_endpoint
            .is_none()
    );
}

#[test]
fn offsets_are_checked_against_the_member_epoch() {
    let mut g = StreamsGroups::default();
    let t = ready_topics();
    let check = |member_id, member_epoch| StreamsMemberCheck {
        member_id,
        member_epoch,
    };
    // Not a streams group: nothing to check here.
    assert_eq!(g.validate_commit(G, &check("", -1)), Ok(()));
    g.heartbeat(&join("a"), &t, 0).unwrap();
    assert_eq!(g.validate_commit(G, &check("a", 1)), Ok(()));
    assert_eq!(
        g.validate_commit(G, &check("a", 0)),
        Err(ErrorCode::STALE_MEMBER_EPOCH)
    );
    assert_eq!(
        g.validate_commit(G, &check("x", 1)),
        Err(ErrorCode::UNKNOWN_MEMBER_ID)
    );
    assert_eq!(
        g.validate_commit(G, &check("", -1)),
        Err(ErrorCode::UNKNOWN_MEMBER_ID),
        "no admin commit while the group has members"
    );
    assert_eq!(g.validate_fetch(G, &check("", -1)), Ok(()));
    assert_eq!(
        g.validate_fetch(G, &check("a", 5)),
        Err(ErrorCode::STALE_MEMBER_EPOCH)
    );
    g.heartbeat(&beat("a", -1, None), &t, 1).unwrap();
    assert_eq!(g.validate_commit(G, &check("", -1)), Ok(()));
    assert_eq!(g.delete_group(G), Ok(()));
    assert!(!g.contains(G));
}

#[test]
fn a_group_with_members_is_not_deleted() {
    let mut g = StreamsGroups::default();
    g.heartbeat(&join("a"), &ready_topics(), 0).unwrap();
    assert_eq!(g.delete_group(G), Err(ErrorCode::NON_EMPTY_GROUP));
    assert_eq!(g.delete_group("other"), Err(ErrorCode::GROUP_ID_NOT_FOUND));
}

fn with_standby(mut r: StreamsHeartbeat, replicas: i32) -> StreamsHeartbeat {
    r.timing = Some(StreamsTiming {
        num_standby_replicas: replicas,
        ..StreamsTiming::default()
    });
    r
}

/// The stateful tasks of `t` (subtopology 1 holds the store).
fn stateful(t: &Tasks) -> Tasks {
    t.iter()
        .filter(|(s, _)| s.as_str() == "1")
        .map(|(s, ps)| (s.clone(), ps.clone()))
        .collect()
}

#[test]
fn standby_tasks_are_copies_on_other_processes_never_of_a_task_held_active() {
    let mut g = StreamsGroups::default();
    let t = ready_topics();
    let a = g.heartbeat(&with_standby(join("a"), 1), &t, 0).unwrap();
    // Alone: no other process to hold a standby.
    assert_eq!(count(&a.active_tasks().unwrap()), 6);
    assert_eq!(a.standby_tasks(), Some(Tasks::new()));
    let all = a.active_tasks().unwrap();

    // b joins: each subtopology is split between a and b; b backs up at
    // once the stateful tasks a keeps (subtopology 0 is stateless: no
    // standby).
    let b = g.heartbeat(&with_standby(join("b"), 1), &t, 1).unwrap();
    let b_standby = b.standby_tasks().unwrap();
    let a = g
        .heartbeat(&with_standby(beat("a", 1, Some(all.clone())), 1), &t, 2)
        .unwrap();
    let kept = a.active_tasks().unwrap();
    assert_eq!(count(&kept), 3);
    assert!(kept.contains_key("0") && kept.contains_key("1"), "{kept:?}");
    assert_eq!(b_standby, stateful(&kept));
    // While a gives up b's half, it holds no standby of it.
    assert_eq!(a.standby_tasks(), Some(Tasks::new()));
    let a = g
        .heartbeat(&with_standby(beat("a", 1, Some(kept.clone())), 1), &t, 3)
        .unwrap();
    assert_eq!(a.member_epoch, 2);
    let a_standby = a.standby_tasks().unwrap();
    let b = g
        .heartbeat(&with_standby(beat("b", 2, None), 1), &t, 4)
        .unwrap();
    let b_active = b.active_tasks().unwrap();
    assert_eq!(
        a_standby,
        stateful(&b_active),
        "a backs up b's stateful tasks"
    );
    assert!(intersect(&a_standby, &kept).is_empty());
    assert_eq!(count(&a_standby) + count(&b_standby), 3);

    // Back to no standby: a new target without them.
    let a = g.heartbeat(&beat("a", 2, None), &t, 5).unwrap();
    assert_eq!(a.member_epoch, 3);
    assert_eq!(a.standby_tasks(), Some(Tasks::new()));
}

#[test]
fn the_group_session_timeout_comes_with_each_heartbeat() {
    let mut g = StreamsGroups::default();
    let t = ready_topics();
    let mut r = join("a");
    r.timing = Some(StreamsTiming {
        session_timeout_ms: 60_000,
        heartbeat_interval_ms: 7_000,
        num_standby_replicas: 0,
    });
    let a = g.heartbeat(&r, &t, 0).unwrap();
    assert_eq!(a.heartbeat_interval_ms, 7_000);
    assert_eq!(g.next_deadline_ms(), Some(60_000));
    assert!(g.tick(59_999).is_empty());
    assert_eq!(g.tick(60_000).len(), 1);
}
