//! Scenario tests of the share group coordinator, on explicit times.

use std::collections::{BTreeMap, BTreeSet};

use uuid::Uuid;

use super::config::*;
use super::*;
use sharestream_protocol::ErrorCode;

const G: &str = "g1";

#[derive(Default)]
struct Topics(BTreeMap<String, TopicInfo>);

impl Topics {
    fn with(mut self, name: &str, partitions: i32) -> Self {
        self.add(name, partitions);
        self
    }
    fn add(&mut self, name: &str, partitions: i32) {
        let id = self
            .0
            .get(name)
            .map(|t| t.id)
            .unwrap_or_else(|| Uuid::from_bytes([name.len() as u8 + name.as_bytes()[0]; 16]));
        self.0
            .insert(name.to_string(), TopicInfo { id, partitions });
    }
    fn id(&self, name: &str) -> Uuid {
        self.0[name].id
    }
}

impl TopicLookup for Topics {
    fn topic(&self, name: &str) -> Option<TopicInfo> {
        self.0.get(name).copied()
    }
}

fn req(member: &str, epoch: i32, subs: Option<&[&str]>) -> HeartbeatRequest {
    HeartbeatRequest {
        group_id: G.to_string(),
        member_id: member.to_string(),
        member_epoch: epoch,
        rack_id: None,
        subscribed_topic_names: subs.map(|s| s.iter().map(|t| t.to_string()).collect()),
        client_id: format!("client-{member}"),
        client_host: "/127.0.0.1".to_string(),
    }
}

fn coord() -> ShareGroupCoordinator {
    ShareGroupCoordinator::new(ShareGroupBrokerConfig::default())
}

fn join(
    c: &mut ShareGroupCoordinator,
    member: &str,
    subs: &[&str],
    now: i64,
    t: &Topics,
) -> HeartbeatOutcome {
    c.heartbeat(&req(member, 0, Some(subs)), now, t)
        .expect("join")
}

fn count(a: &Assignment) -> usize {
    a.values().map(BTreeSet::len).sum()
}

#[test]
fn first_join_gets_epoch_1_every_partition_and_the_heartbeat_interval() {
    let t = Topics::default().with("orders", 3);
    let mut c = coord();
    let out = join(&mut c, "m1", &["orders"], 0, &t);
    assert_eq!(out.member_id, "m1");
    assert_eq!(out.member_epoch, 1);
    assert_eq!(out.heartbeat_interval_ms, 5000);
    let a = out.assignment.expect("assignment on join");
    assert_eq!(a[&t.id("orders")], BTreeSet::from([0, 1, 2]));
    let in_use: BTreeSet<i32> = out
        .effects
        .partitions_in_use
        .iter()
        .map(|k| k.partition)
        .collect();
    assert_eq!(in_use, BTreeSet::from([0, 1, 2]));
    assert!(
        out.effects
            .partitions_in_use
            .iter()
            .all(|k| k.group_id == G)
    );
}

#[test]
fn steady_heartbeat_returns_null_assignment_and_same_epoch() {
    let t = Topics::default().with("orders", 2);
    let mut c = coord();
    join(&mut c, "m1", &["orders"], 0, &t);
    let out = c.heartbeat(&req("m1", 1, None), 1000, &t).unwrap();
    assert_eq!(out.member_epoch, 1);
    assert_eq!(out.assignment, None);
    assert!(out.effects.is_empty());
}

#[test]
fn second_member_bumps_epochs_and_both_get_new_assignments() {
    let t = Topics::default().with("orders", 4);
    let mut c = coord();
    join(&mut c, "m1", &["orders"], 0, &t);
    let b = join(&mut c, "m2", &["orders"], 10, &t);
    assert_eq!(b.member_epoch, 2);
    assert_eq!(count(&b.assignment.unwrap()), 2);
    // m1 learns at its next heartbeat: epoch 2, two partitions.
    let a = c.heartbeat(&req("m1", 1, None), 20, &t).unwrap();
    assert_eq!(a.member_epoch, 2);
    assert_eq!(count(&a.assignment.expect("changed")), 2);
    assert_eq!(c.validate_member(G, "m1", 2), Ok(()));
}

#[test]
fn epoch_bumps_even_when_the_members_partitions_do_not_change_but_no_assignment_is_sent() {
    // Two topics subscribed by different members: m2 joining on "b" leaves
    // m1's partitions of "a" as they were.
    let t = Topics::default().with("a", 1).with("bb", 1);
    let mut c = coord();
    join(&mut c, "m1", &["a"], 0, &t);
    join(&mut c, "m2", &["bb"], 0, &t);
    let out = c.heartbeat(&req("m1", 1, None), 5, &t).unwrap();
    assert_eq!(out.member_epoch, 2);
    assert_eq!(out.assignment, None);
}

#[test]
fn more_members_than_partitions_share_the_partition() {
    let t = Topics::default().with("orders", 1);
    let mut c = coord();
    for m in ["m1", "m2", "m3"] {
        join(&mut c, m, &["orders"], 0, &t);
    }
    for (m, epoch) in [("m1", 1), ("m2", 2), ("m3", 3)] {
        let out = c.heartbeat(&req(m, epoch, None), 1, &t).unwrap();
        assert_eq!(out.member_epoch, 3);
        assert_eq!(
            c.assignment_of(G, m).unwrap()[&t.id("orders")],
            BTreeSet::from([0])
        );
    }
}

#[test]
fn leave_returns_epoch_minus_1_reports_departure_and_reassigns() {
    let t = Topics::default().with("orders", 2);
    let mut c = coord();
    join(&mut c, "m1", &["orders"], 0, &t);
    join(&mut c, "m2", &["orders"], 0, &t);
    let half = c.heartbeat(&req("m1", 1, None), 5, &t).unwrap();
    assert_eq!(count(&half.assignment.unwrap()), 1);
    let out = c.heartbeat(&req("m2", -1, None), 10, &t).unwrap();
    assert_eq!(out.member_epoch, -1);
    assert_eq!(out.member_id, "m2");
    assert_eq!(out.effects.departed.len(), 1);
    assert_eq!(out.effects.departed[0].member_id, "m2");
    assert_eq!(out.effects.departed[0].reason, DepartureReason::Left);
    assert!(!c.is_member_alive(G, "m2"));
    let a = c.heartbeat(&req("m1", 2, None), 20, &t).unwrap();
    assert_eq!(a.member_epoch, 3);
    assert_eq!(
        count(&a.assignment.unwrap()),
        2,
        "m1 takes both partitions back"
    );
}

#[test]
fn leave_of_unknown_member_is_unknown_member_id_and_unknown_group_is_group_id_not_found() {
    let t = Topics::default().with("orders", 1);
    let mut c = coord();
    assert_eq!(
        c.heartbeat(&req("m1", -1, None), 0, &t).unwrap_err().code,
        ErrorCode::GROUP_ID_NOT_FOUND
    );
    join(&mut c, "m1", &["orders"], 0, &t);
    assert_eq!(
        c.heartbeat(&req("zz", -1, None), 0, &t).unwrap_err().code,
        ErrorCode::UNKNOWN_MEMBER_ID
    );
}

#[test]
fn unknown_member_with_nonzero_epoch_is_unknown_member_id() {
    let t = Topics::default().with("orders", 1);
    let mut c = coord();
    let e = c.heartbeat(&req("m1", 3, None), 0, &t).unwrap_err();
    assert_eq!(e.code, ErrorCode::UNKNOWN_MEMBER_ID);
    join(&mut c, "m1", &["orders"], 0, &t);
    assert_eq!(
        c.heartbeat(&req("m9", 1, None), 0, &t).unwrap_err().code,
        ErrorCode::UNKNOWN_MEMBER_ID
    );
}

#[test]
fn greater_epoch_is_fenced() {
    let t = Topics::default().with("orders", 1);
    let mut c = coord();
    join(&mut c, "m1", &["orders"], 0, &t);
    let e = c.heartbeat(&req("m1", 2, None), 1, &t).unwrap_err();
    assert_eq!(e.code, ErrorCode::FENCED_MEMBER_EPOCH);
}

#[test]
fn previous_epoch_is_accepted_and_resends_the_assignment_older_is_fenced() {
    let t = Topics::default().with("orders", 4);
    let mut c = coord();
    join(&mut c, "m1", &["orders"], 0, &t); // m1 epoch 1
    join(&mut c, "m2", &["orders"], 0, &t); // group epoch 2
    c.heartbeat(&req("m1", 1, None), 1, &t).unwrap(); // m1 -> 2, prev 1
    join(&mut c, "m3", &["orders"], 0, &t); // group epoch 3
    c.heartbeat(&req("m1", 2, None), 2, &t).unwrap(); // m1 -> 3, prev 2
    // The response bumping m1 to 3 got lost: m1 sends 2 again.
    let out = c.heartbeat(&req("m1", 2, None), 3, &t).unwrap();
    assert_eq!(out.member_epoch, 3);
    assert!(
        out.assignment.is_some(),
        "resent for a member that missed its bump"
    );
    // Two behind is fenced.
    let e = c.heartbeat(&req("m1", 1, None), 4, &t).unwrap_err();
    assert_eq!(e.code, ErrorCode::FENCED_MEMBER_EPOCH);
}

#[test]
fn rejoin_with_epoch_0_reports_the_old_incarnation_departed_and_sends_full_assignment() {
    let t = Topics::default().with("orders", 2);
    let mut c = coord();
    join(&mut c, "m1", &["orders"], 0, &t);
    let out = join(&mut c, "m1", &["orders"], 100, &t);
    assert_eq!(out.member_epoch, 2);
    assert_eq!(count(&out.assignment.unwrap()), 2);
    assert_eq!(
        out.effects.departed,
        vec![DepartedMember {
            group_id: G.into(),
            member_id: "m1".into(),
            reason: DepartureReason::Rejoined
        }]
    );
    assert!(
        out.effects.partitions_in_use.is_empty(),
        "same partitions stay in use"
    );
}

#[test]
fn invalid_requests_are_invalid_request() {
    let t = Topics::default().with("orders", 1);
    let mut c = coord();
    let cases = [
        req("", 0, Some(&["orders"])),
        req("   ", 0, Some(&["orders"])),
        req(&"x".repeat(37), 0, Some(&["orders"])),
        req("m1", 0, None),
        req("m1", 0, Some(&[])),
        req("m1", -2, None),
        HeartbeatRequest {
            group_id: String::new(),
            ..req("m1", 0, Some(&["orders"]))
        },
        HeartbeatRequest {
            rack_id: Some(String::new()),
            ..req("m1", 0, Some(&["orders"]))
        },
    ];
    for r in cases {
        let e = c.heartbeat(&r, 0, &t).unwrap_err();
        assert_eq!(e.code, ErrorCode::INVALID_REQUEST, "{r:?}");
    }
    assert!(!c.group_exists(G), "nothing created by refused requests");
    // 36 characters is fine.
    assert!(
        c.heartbeat(&req(&"x".repeat(36), 0, Some(&["orders"])), 0, &t)
            .is_ok()
    );
}

#[test]
fn members_that_stop_heartbeating_expire_after_the_session_timeout() {
    let t = Topics::default().with("orders", 2);
    let mut c = coord();
    join(&mut c, "m1", &["orders"], 0, &t);
    join(&mut c, "m2", &["orders"], 1_000, &t);
    c.heartbeat(&req("m2", 2, None), 30_000, &t).unwrap();
    assert_eq!(c.next_expiry_ms(), Some(45_000));
    assert!(c.tick(44_999).is_empty());
    let eff = c.tick(45_000);
    assert_eq!(eff.departed.len(), 1);
    assert_eq!(eff.departed[0].member_id, "m1");
    assert_eq!(eff.departed[0].reason, DepartureReason::SessionExpired);
    assert!(!c.is_member_alive(G, "m1"));
    assert!(c.is_member_alive(G, "m2"));
    // m2 takes over both partitions at its next heartbeat.
    let out = c.heartbeat(&req("m2", 2, None), 46_000, &t).unwrap();
    assert_eq!(out.member_epoch, 3);
    assert_eq!(count(&out.assignment.unwrap()), 2);
    // An expired member heartbeating again is unknown and must rejoin.
    assert_eq!(
        c.heartbeat(&req("m1", 1, None), 46_000, &t)
            .unwrap_err()
            .code,
        ErrorCode::UNKNOWN_MEMBER_ID
    );
}

#[test]
fn session_timeout_follows_the_group_config() {
    let t = Topics::default().with("orders", 1);
    let mut c = coord();
    c.set_config(G, SHARE_SESSION_TIMEOUT_MS, Some("60000"))
        .unwrap();
    join(&mut c, "m1", &["orders"], 0, &t);
    assert!(c.tick(59_999).is_empty());
    assert_eq!(c.tick(60_000).departed.len(), 1);
}

#[test]
fn heartbeat_interval_follows_the_group_config() {
    let t = Topics::default().with("orders", 1);
    let mut c = coord();
    c.set_config(G, SHARE_HEARTBEAT_INTERVAL_MS, Some("7000"))
        .unwrap();
    assert_eq!(
        join(&mut c, "m1", &["orders"], 0, &t).heartbeat_interval_ms,
        7000
    );
}

#[test]
fn subscription_change_reassigns_and_null_subscription_keeps_it() {
    let t = Topics::default().with("a", 1).with("bb", 2);
    let mut c = coord();
    join(&mut c, "m1", &["a"], 0, &t);
    let same = c.heartbeat(&req("m1", 1, None), 1, &t).unwrap();
    assert_eq!((same.member_epoch, same.assignment), (1, None));
    let out = c
        .heartbeat(&req("m1", 1, Some(&["a", "bb"])), 2, &t)
        .unwrap();
    assert_eq!(out.member_epoch, 2);
    let a = out.assignment.unwrap();
    assert_eq!(a[&t.id("bb")], BTreeSet::from([0, 1]));
    assert_eq!(out.effects.partitions_in_use.len(), 2);
    let out = c.heartbeat(&req("m1", 2, Some(&["bb"])), 3, &t).unwrap();
    assert!(!out.assignment.unwrap().contains_key(&t.id("a")));
    assert_eq!(out.effects.partitions_unused.len(), 1);
}

#[test]
fn subscribing_to_a_missing_topic_assigns_it_once_created() {
    let mut t = Topics::default();
    let mut c = coord();
    let out = join(&mut c, "m1", &["later"], 0, &t);
    assert!(out.assignment.unwrap().is_empty());
    t.add("later", 2);
    let eff = c.on_topics_changed(10, &t);
    assert_eq!(eff.partitions_in_use.len(), 2);
    let out = c.heartbeat(&req("m1", 1, None), 20, &t).unwrap();
    assert_eq!(out.member_epoch, 2);
    assert_eq!(
        out.assignment.unwrap()[&t.id("later")],
        BTreeSet::from([0, 1])
    );
}

#[test]
fn added_partitions_are_picked_up_by_heartbeat_even_without_on_topics_changed() {
    let mut t = Topics::default().with("orders", 1);
    let mut c = coord();
    join(&mut c, "m1", &["orders"], 0, &t);
    t.add("orders", 3);
    let out = c.heartbeat(&req("m1", 1, None), 5, &t).unwrap();
    assert_eq!(out.member_epoch, 2);
    assert_eq!(out.assignment.unwrap()[&t.id("orders")].len(), 3);
    assert_eq!(out.effects.partitions_in_use.len(), 2);
}

#[test]
fn on_topics_changed_without_change_does_not_bump_epochs() {
    let t = Topics::default().with("orders", 1);
    let mut c = coord();
    join(&mut c, "m1", &["orders"], 0, &t);
    assert!(c.on_topics_changed(1, &t).is_empty());
    assert_eq!(c.describe(&[G.into()])[0].group_epoch, 1);
}

#[test]
fn deleted_topic_is_unassigned() {
    let mut t = Topics::default().with("orders", 2).with("x", 1);
    let mut c = coord();
    join(&mut c, "m1", &["orders", "x"], 0, &t);
    t.0.remove("orders");
    let eff = c.on_topics_changed(1, &t);
    assert_eq!(eff.partitions_unused.len(), 2);
    let out = c.heartbeat(&req("m1", 1, None), 2, &t).unwrap();
    assert_eq!(
        out.assignment.unwrap().keys().collect::<Vec<_>>(),
        vec![&t.id("x")]
    );
}

#[test]
fn group_max_size_refuses_new_members_but_not_existing_ones() {
    let t = Topics::default().with("orders", 1);
    let mut c = ShareGroupCoordinator::new(ShareGroupBrokerConfig {
        max_size: 2,
        ..Default::default()
    });
    join(&mut c, "m1", &["orders"], 0, &t);
    join(&mut c, "m2", &["orders"], 0, &t);
    let e = c
        .heartbeat(&req("m3", 0, Some(&["orders"])), 0, &t)
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::GROUP_MAX_SIZE_REACHED);
    assert!(
        c.heartbeat(&req("m1", 0, Some(&["orders"])), 0, &t).is_ok(),
        "rejoin allowed"
    );
}

#[test]
fn validate_member_distinguishes_unknown_stale_and_fenced() {
    let t = Topics::default().with("orders", 2);
    let mut c = coord();
    assert_eq!(
        c.validate_member(G, "m1", 1),
        Err(ErrorCode::UNKNOWN_MEMBER_ID)
    );
    join(&mut c, "m1", &["orders"], 0, &t);
    join(&mut c, "m2", &["orders"], 0, &t);
    c.heartbeat(&req("m1", 1, None), 1, &t).unwrap(); // m1 at 2
    assert_eq!(c.validate_member(G, "m1", 2), Ok(()));
    assert_eq!(
        c.validate_member(G, "m1", 1),
        Err(ErrorCode::STALE_MEMBER_EPOCH)
    );
    assert_eq!(
        c.validate_member(G, "m1", 3),
        Err(ErrorCode::FENCED_MEMBER_EPOCH)
    );
    assert_eq!(
        c.validate_member(G, "nope", 2),
        Err(ErrorCode::UNKNOWN_MEMBER_ID)
    );
    assert_eq!(
        c.validate_member("other", "m1", 2),
        Err(ErrorCode::UNKNOWN_MEMBER_ID)
    );
}

#[test]
fn describe_reports_state_epochs_members_and_assignor() {
    let t = Topics::default().with("orders", 2);
    let mut c = coord();
    let mut r = req("m1", 0, Some(&["orders"]));
    r.rack_id = Some("rack-a".into());
    c.heartbeat(&r, 0, &t).unwrap();
    let d = &c.describe(&[G.into(), "missing".into()]);
    assert_eq!(d.len(), 2);
    let g = &d[0];
    assert_eq!(g.error, None);
    assert_eq!(g.state, ShareGroupState::Stable);
    assert_eq!(g.state.as_str(), "Stable");
    assert_eq!((g.group_epoch, g.assignment_epoch), (1, 1));
    assert_eq!(g.assignor_name, "simple");
    let m = &g.members[0];
    assert_eq!(m.member_id, "m1");
    assert_eq!(m.rack_id.as_deref(), Some("rack-a"));
    assert_eq!(m.member_epoch, 1);
    assert_eq!(m.client_id, "client-m1");
    assert_eq!(m.client_host, "/127.0.0.1");
    assert_eq!(m.subscribed_topic_names, vec!["orders".to_string()]);
    assert_eq!(
        m.assignment,
        vec![DescribedTopicPartitions {
            topic_id: t.id("orders"),
            topic_name: "orders".into(),
            partitions: vec![0, 1]
        }]
    );
    let missing = &d[1];
    assert_eq!(
        missing.error.as_ref().unwrap().code,
        ErrorCode::GROUP_ID_NOT_FOUND
    );
}

#[test]
fn group_with_no_members_left_is_described_empty() {
    let t = Topics::default().with("orders", 1);
    let mut c = coord();
    join(&mut c, "m1", &["orders"], 0, &t);
    c.heartbeat(&req("m1", -1, None), 1, &t).unwrap();
    let d = &c.describe(&[G.into()])[0];
    assert_eq!(d.state, ShareGroupState::Empty);
    assert_eq!(d.group_epoch, 2);
    assert!(d.members.is_empty());
    assert_eq!(
        c.list_groups(),
        vec![(G.to_string(), ShareGroupState::Empty)]
    );
}

#[test]
fn configs_can_be_set_before_the_group_exists_and_describe_shows_sources() {
    let mut c = coord();
    c.set_config("future", SHARE_AUTO_OFFSET_RESET, Some("earliest"))
        .unwrap();
    assert!(!c.group_exists("future"));
    let entries = c.describe_config("future");
    assert_eq!(entries.len(), GROUP_CONFIG_NAMES.len());
    let aor = entries
        .iter()
        .find(|e| e.name == SHARE_AUTO_OFFSET_RESET)
        .unwrap();
    assert_eq!(
        (aor.value.as_str(), aor.source),
        ("earliest", ConfigSource::Group)
    );
    let lock = entries
        .iter()
        .find(|e| e.name == SHARE_RECORD_LOCK_DURATION_MS)
        .unwrap();
    assert_eq!(
        (lock.value.as_str(), lock.source),
        ("30000", ConfigSource::Default)
    );
    assert_eq!(
        c.group_config("future").auto_offset_reset,
        AutoOffsetReset::Earliest
    );
    assert_eq!(
        c.group_config("other").auto_offset_reset,
        AutoOffsetReset::Latest
    );
}

#[test]
fn invalid_config_is_refused_and_leaves_the_old_value() {
    let mut c = coord();
    c.set_config(G, SHARE_DELIVERY_COUNT_LIMIT, Some("7"))
        .unwrap();
    let e = c
        .set_config(G, SHARE_DELIVERY_COUNT_LIMIT, Some("11"))
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::INVALID_CONFIG);
    assert!(e.message.contains(SHARE_DELIVERY_COUNT_LIMIT));
    assert_eq!(c.group_config(G).delivery_count_limit, 7);
    let e = c
        .set_config("", SHARE_DELIVERY_COUNT_LIMIT, Some("3"))
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::INVALID_REQUEST);
}

#[test]
fn validate_only_changes_nothing() {
    let mut c = coord();
    c.alter_configs(G, &[(SHARE_ISOLATION_LEVEL, Some("read_committed"))], true)
        .unwrap();
    assert_eq!(
        c.group_config(G).isolation_level,
        IsolationLevel::ReadUncommitted
    );
    c.alter_configs(G, &[(SHARE_ISOLATION_LEVEL, Some("read_committed"))], false)
        .unwrap();
    assert_eq!(
        c.group_config(G).isolation_level,
        IsolationLevel::ReadCommitted
    );
}

#[test]
fn snapshot_round_trips_configs_and_group_epochs_through_msgpack() {
    let t = Topics::default().with("orders", 1);
    let mut c = coord();
    c.set_config(G, SHARE_RECORD_LOCK_DURATION_MS, Some("20000"))
        .unwrap();
    join(&mut c, "m1", &["orders"], 0, &t);
    join(&mut c, "m2", &["orders"], 0, &t);
    let bytes = rmp_serde::to_vec_named(&c.snapshot()).unwrap();
    let snap: CoordinatorSnapshot = rmp_serde::from_slice(&bytes).unwrap();
    let mut r = ShareGroupCoordinator::restore(ShareGroupBrokerConfig::default(), snap);
    assert_eq!(r.group_config(G).record_lock_duration_ms, 20_000);
    // Membership is gone: members must rejoin, and epochs keep rising.
    assert_eq!(
        r.heartbeat(&req("m1", 2, None), 0, &t).unwrap_err().code,
        ErrorCode::UNKNOWN_MEMBER_ID
    );
    let out = join(&mut r, "m1", &["orders"], 0, &t);
    assert_eq!(out.member_epoch, 3);
}

#[test]
fn effects_of_tick_cover_all_groups() {
    let t = Topics::default().with("orders", 1);
    let mut c = coord();
    join(&mut c, "m1", &["orders"], 0, &t);
    let mut other = req("m1", 0, Some(&["orders"]));
    other.group_id = "g2".into();
    c.heartbeat(&other, 0, &t).unwrap();
    let eff = c.tick(45_000);
    let groups: BTreeSet<&str> = eff.departed.iter().map(|d| d.group_id.as_str()).collect();
    assert_eq!(groups, BTreeSet::from([G, "g2"]));
    assert_eq!(eff.partitions_unused.len(), 2);
    assert_eq!(c.next_expiry_ms(), None);
}

#[test]
fn topic_registry_serves_as_topic_lookup() {
    let mut reg = crate::topics::TopicRegistry::default();
    let meta = reg.create("orders", 2, 1, BTreeMap::new()).unwrap();
    let mut c = coord();
    let out = c
        .heartbeat(&req("m1", 0, Some(&["orders"])), 0, &reg)
        .unwrap();
    assert_eq!(out.assignment.unwrap()[&meta.id], BTreeSet::from([0, 1]));
}
