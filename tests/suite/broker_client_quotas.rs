//! Client quotas over the wire: AlterClientQuotas and DescribeClientQuotas
//! as Kafka answers them, the quotas kept across a restart, and a Produce
//! or Fetch above its byte rate answered with a throttle time, after which
//! the connection reads nothing for that long (KIP-219).

use std::sync::Arc;

use crate::common;

use bytes::Bytes;
use common::RawClient;
use common::broker::TestBroker;
use common::kip::{create_topic, produce_req, s};
use kafka_protocol::messages::*;
use sharestream::broker::clock::TokioClock;
use sharestream::protocol::ErrorCode;
use sharestream::protocol::records::{BatchSpec, Record, encode_batch};

/// The client id of [`RawClient`]'s requests.
const CLIENT: &str = "test-client";

fn entity(parts: &[(&str, Option<&str>)]) -> Vec<alter_client_quotas_request::EntityData> {
    parts
        .iter()
        .map(|(t, n)| {
            alter_client_quotas_request::EntityData::default()
                .with_entity_type(s(t))
                .with_entity_name(n.map(s))
        })
        .collect()
}

/// An entry setting (`Some`) or removing (`None`) quotas on an entity.
fn entry(
    parts: &[(&str, Option<&str>)],
    ops: &[(&str, Option<f64>)],
) -> alter_client_quotas_request::EntryData {
    alter_client_quotas_request::EntryData::default()
        .with_entity(entity(parts))
        .with_ops(
            ops.iter()
                .map(|(k, v)| {
                    alter_client_quotas_request::OpData::default()
                        .with_key(s(k))
                        .with_value(v.unwrap_or(0.0))
                        .with_remove(v.is_none())
                })
                .collect(),
        )
}

async fn alter(
    c: &mut RawClient,
    entries: Vec<alter_client_quotas_request::EntryData>,
    validate_only: bool,
) -> Vec<(i16, Option<String>)> {
    let r = c
        .send(
            &AlterClientQuotasRequest::default()
                .with_entries(entries)
                .with_validate_only(validate_only),
            1,
        )
        .await;
    r.entries
        .iter()
        .map(|e| {
            (
                e.error_code,
                e.error_message.as_ref().map(|m| m.to_string()),
            )
        })
        .collect()
}

/// (entity as "type=name" pairs, sorted quotas) of a describe.
type Described = Vec<(Vec<(String, Option<String>)>, Vec<(String, f64)>)>;

async fn describe(
    c: &mut RawClient,
    filter: &[(&str, i8, Option<&str>)],
    strict: bool,
) -> Described {
    let r = c
        .send(
            &DescribeClientQuotasRequest::default()
                .with_components(
                    filter
                        .iter()
                        .map(|(t, m, n)| {
                            describe_client_quotas_request::ComponentData::default()
                                .with_entity_type(s(t))
                                .with_match_type(*m)
                                .with_match(n.map(s))
                        })
                        .collect(),
                )
                .with_strict(strict),
            1,
        )
        .await;
    assert_eq!(r.error_code, 0, "{:?}", r.error_message);
    let mut out: Described = r
        .entries
        .unwrap_or_default()
        .into_iter()
        .map(|e| {
            let mut ent: Vec<_> = e
                .entity
                .iter()
                .map(|d| {
                    (
                        d.entity_type.to_string(),
                        d.entity_name.as_ref().map(|n| n.to_string()),
                    )
                })
                .collect();
            ent.sort();
            let mut vals: Vec<_> = e
                .values
                .iter()
                .map(|v| (v.key.to_string(), v.value))
                .collect();
            vals.sort_by(|a, b| a.0.cmp(&b.0));
            (ent, vals)
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// A broker on tokio's paused clock, which the broker follows
/// (TokioClock): rates and mutes are measured in the test's time.
fn paused() -> TestBroker {
    TestBroker::in_memory().configure(|c| c.clock = Arc::new(TokioClock::new()))
}

/// Sets (`Some`) or removes (`None`) quotas on one entity, which must be
/// accepted.
async fn set_quota(c: &mut RawClient, parts: &[(&str, Option<&str>)], ops: &[(&str, Option<f64>)]) {
    assert_eq!(
        alter(c, vec![entry(parts, ops)], false).await,
        vec![(0, None)]
    );
}

fn named(parts: &[(&str, Option<&str>)]) -> Vec<(String, Option<String>)> {
    let mut v: Vec<_> = parts
        .iter()
        .map(|(t, n)| (t.to_string(), n.map(str::to_string)))
        .collect();
    v.sort();
    v
}

#[tokio::test]
async fn alter_and_describe_answer_as_kafka_does() {
    let t = TestBroker::in_memory().start().await;
    let (b, mut c) = (t.b, t.c);
    assert!(describe(&mut c, &[], false).await.is_empty());

    let r = alter(
        &mut c,
        vec![
            entry(
                &[("client-id", Some("app"))],
                &[("producer_byte_rate", Some(1024.0))],
            ),
            entry(&[("user", None)], &[("consumer_byte_rate", Some(4096.0))]),
            entry(&[("user", Some("bob"))], &[("no_such_rate", Some(1.0))]),
            entry(
                &[("user", Some("carol"))],
                &[("producer_byte_rate", Some(1.5))],
            ),
            entry(
                &[("user", Some("alice"))],
                &[("request_percentage", Some(50.0))],
            ),
            entry(&[], &[("producer_byte_rate", Some(1.0))]),
            entry(&[("user", None)], &[("producer_byte_rate", Some(1.0))]),
        ],
        false,
    )
    .await;
    assert_eq!(r[0], (0, None));
    assert_eq!(r[1], (0, None));
    for (i, want) in [
        (2, "Invalid configuration key no_such_rate"),
        (3, "producer_byte_rate cannot be a fractional value."),
        (4, "not enforced by this broker"),
        (5, "Invalid empty client quota entity"),
        (6, "Ignoring duplicate entity"),
    ] {
        assert_eq!(r[i].0, ErrorCode::INVALID_REQUEST.0, "{i}: {:?}", r[i]);
        assert!(
            r[i].1.as_deref().unwrap_or("").contains(want),
            "{i}: {:?}",
            r[i]
        );
    }

    // validate_only answers the same and changes nothing.
    let r = alter(
        &mut c,
        vec![entry(
            &[("client-id", Some("other"))],
            &[("producer_byte_rate", Some(1.0))],
        )],
        true,
    )
    .await;
    assert_eq!(r, vec![(0, None)]);

    let app = named(&[("client-id", Some("app"))]);
    let default_user = named(&[("user", None)]);
    assert_eq!(
        describe(&mut c, &[], false).await,
        vec![
            (app.clone(), vec![("producer_byte_rate".into(), 1024.0)]),
            (
                default_user.clone(),
                vec![("consumer_byte_rate".into(), 4096.0)]
            ),
        ]
    );
    assert_eq!(
        describe(&mut c, &[("client-id", 0, Some("app"))], true).await,
        vec![(app.clone(), vec![("producer_byte_rate".into(), 1024.0)])]
    );
    assert_eq!(
        describe(&mut c, &[("user", 1, None)], true).await,
        vec![(default_user, vec![("consumer_byte_rate".into(), 4096.0)])]
    );
    assert!(
        describe(&mut c, &[("user", 0, Some("alice"))], false)
            .await
            .is_empty()
    );
    // An invalid filter is refused as a whole.
    let r = c
        .send(
            &DescribeClientQuotasRequest::default().with_components(vec![
                describe_client_quotas_request::ComponentData::default()
                    .with_entity_type(s("user"))
                    .with_match_type(0)
                    .with_match(None),
            ]),
            1,
        )
        .await;
    assert_eq!(r.error_code, ErrorCode::INVALID_REQUEST.0);

    // Removing the last key forgets the entity.
    set_quota(
        &mut c,
        &[("client-id", Some("app"))],
        &[("producer_byte_rate", None)],
    )
    .await;
    assert_eq!(
        describe(&mut c, &[("client-id", 2, None)], false).await,
        vec![]
    );
    b.shutdown().await;
}

#[tokio::test]
async fn the_quotas_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let t = TestBroker::on_disk(dir.path()).start().await;
    let (b, mut c) = (t.b, t.c);
    set_quota(
        &mut c,
        &[("user", Some("alice")), ("client-id", None)],
        &[
            ("producer_byte_rate", Some(2048.0)),
            ("consumer_byte_rate", Some(8192.0)),
        ],
    )
    .await;
    drop(c);
    b.shutdown().await;

    let t = TestBroker::on_disk(dir.path()).start().await;
    let (b, mut c) = (t.b, t.c);
    assert_eq!(
        describe(&mut c, &[("user", 0, Some("alice"))], false).await,
        vec![(
            named(&[("user", Some("alice")), ("client-id", None)]),
            vec![
                ("consumer_byte_rate".into(), 8192.0),
                ("producer_byte_rate".into(), 2048.0)
            ]
        )]
    );
    b.shutdown().await;
}

#[tokio::test]
async fn altering_quotas_needs_alter_configs_on_the_cluster() {
    let t = TestBroker::in_memory()
        .sasl(true, &[("bob", "bob-pw")])
        .start()
        .await;
    let (b, mut admin) = (t.b, t.c);
    let mut bob = common::sasl::plain(&b, "bob", "bob-pw").await;
    let e = || {
        vec![entry(
            &[("user", Some("bob"))],
            &[("producer_byte_rate", Some(1.0))],
        )]
    };
    let r = alter(&mut bob, e(), false).await;
    assert_eq!(r[0].0, ErrorCode::CLUSTER_AUTHORIZATION_FAILED.0);
    let r = bob.send(&DescribeClientQuotasRequest::default(), 1).await;
    assert_eq!(r.error_code, ErrorCode::CLUSTER_AUTHORIZATION_FAILED.0);
    // The super user may; bob's quota is then in force for bob.
    assert_eq!(alter(&mut admin, e(), false).await, vec![(0, None)]);
    assert_eq!(
        b.core()
            .quotas()
            .resolve("producer_byte_rate", "bob", "any")
            .map(|q| q.0),
        Some(1.0)
    );
    b.shutdown().await;
}

fn batch_of(bytes: usize) -> Bytes {
    let records = vec![Record::new(
        0,
        1,
        None,
        Some(Bytes::from(vec![b'x'; bytes])),
    )];
    encode_batch(&BatchSpec::default(), &records).unwrap()
}

fn fetch_req(topic: &str) -> FetchRequest {
    FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_max_bytes(1 << 20)
        .with_topics(vec![
            fetch_request::FetchTopic::default()
                .with_topic(TopicName(s(topic)))
                .with_partitions(vec![
                    fetch_request::FetchPartition::default()
                        .with_partition(0)
                        .with_fetch_offset(0)
                        .with_partition_max_bytes(1 << 20),
                ]),
        ])
}

/// Sends a Metadata request and returns how long (on tokio's clock) its
/// answer took.
async fn metadata_wait(c: &mut RawClient) -> u128 {
    let started = tokio::time::Instant::now();
    c.send(&MetadataRequest::default().with_topics(Some(vec![])), 12)
        .await;
    started.elapsed().as_millis()
}

/// On tokio's paused clock, which the broker follows (TokioClock): the
/// rates and the mute are measured in the test's time, not the machine's.
#[tokio::test(start_paused = true)]
async fn a_client_above_its_byte_rate_is_throttled_and_muted() {
    let t = paused().start().await;
    let (b, mut c) = (t.b, t.c);
    create_topic(&mut c, "q", 1).await;

    // No quota: nothing is throttled.
    let r = c
        .send(&produce_req("q", 0, batch_of(20_000), None), 9)
        .await;
    assert_eq!(r.responses[0].partition_responses[0].error_code, 0);
    assert_eq!(r.throttle_time_ms, 0);

    // 1000 B/s for this client id: the next 20 kB (about 2 kB/s over the
    // 10 s measured, twice the quota) are throttled.
    set_quota(
        &mut c,
        &[("client-id", Some(CLIENT))],
        &[
            ("producer_byte_rate", Some(1000.0)),
            ("consumer_byte_rate", Some(1000.0)),
        ],
    )
    .await;
    let r = c
        .send(&produce_req("q", 0, batch_of(20_000), None), 9)
        .await;
    assert_eq!(
        r.responses[0].partition_responses[0].error_code, 0,
        "the data is written"
    );
    let throttle = r.throttle_time_ms;
    assert!(throttle > 0, "throttle {throttle}");
    // The connection read nothing for the throttle time.
    assert!(metadata_wait(&mut c).await >= throttle as u128);
    // A Fetch asks for at most 10 s of its quota (10 kB): it gets the
    // first batch only (20 kB: at least one batch comes back), not the two
    // there are, and is throttled on the consumer rate.
    let f = c.send(&fetch_req("q"), 12).await;
    assert_eq!(f.responses[0].partitions[0].error_code, 0);
    let got = f.responses[0].partitions[0].records.as_ref().unwrap().len();
    assert!((20_000..40_000).contains(&got), "{got} bytes fetched");
    let throttle = f.throttle_time_ms;
    assert!(throttle > 0, "fetch throttle {throttle}");
    assert!(metadata_wait(&mut c).await >= throttle as u128);
    assert!(b.core().metrics().counter("quota_throttled_responses") >= 2);

    // The quota removed, the same client is not throttled any more.
    set_quota(
        &mut c,
        &[("client-id", Some(CLIENT))],
        &[("producer_byte_rate", None), ("consumer_byte_rate", None)],
    )
    .await;
    let r = c
        .send(&produce_req("q", 0, batch_of(20_000), None), 9)
        .await;
    assert_eq!(r.throttle_time_ms, 0);
    b.shutdown().await;
}

/// KIP-612 on tokio's paused clock: past its address's
/// connection_creation_rate, a new connection is held before it is served.
#[tokio::test(start_paused = true)]
async fn a_connection_over_its_address_rate_is_held() {
    let t = paused().start().await;
    let (b, mut c) = (t.b, t.c);
    set_quota(
        &mut c,
        &[("ip", None)],
        &[("connection_creation_rate", Some(1.0))],
    )
    .await;
    assert_eq!(
        describe(&mut c, &[("ip", 1, None)], true).await,
        vec![(
            named(&[("ip", None)]),
            vec![("connection_creation_rate".into(), 1.0)]
        )]
    );
    // Ten seconds of the quota are let through at once (Kafka's rates are
    // measured over ten seconds at least); the eleventh connection is held
    // a tenth of that.
    let mut open = Vec::new();
    for _ in 0..10 {
        open.push(RawClient::connect(b.local_addr()).await);
    }
    let started = tokio::time::Instant::now();
    let mut late = RawClient::connect(b.local_addr()).await;
    late.send(&MetadataRequest::default().with_topics(Some(vec![])), 12)
        .await;
    assert!(
        started.elapsed().as_millis() >= 1_000,
        "answered after {:?}",
        started.elapsed()
    );
    assert_eq!(b.core().metrics().counter("connections_throttled"), 1);
    b.shutdown().await;
}

/// A ShareFetch over its consumer rate: its records come back acquired
/// (dropping them would leave them locked), with a throttle time, and the
/// connection is muted for it.
#[tokio::test(start_paused = true)]
async fn a_share_fetch_over_its_rate_keeps_its_records_and_is_throttled() {
    use common::kip::{GROUP, INPUT, join, share_fetch_req};
    let t = paused().topic(INPUT, 1).earliest(GROUP).start().await;
    let (b, mut c, topic) = (t.b, t.c, t.topics[0]);
    for _ in 0..2 {
        let r = c
            .send(&produce_req(INPUT, 0, batch_of(20_000), None), 9)
            .await;
        assert_eq!(r.responses[0].partition_responses[0].error_code, 0);
    }
    set_quota(
        &mut c,
        &[("client-id", Some(CLIENT))],
        &[("consumer_byte_rate", Some(1000.0))],
    )
    .await;
    join(&mut c, "m").await;
    let fetch = share_fetch_req("m", topic, &[0], 0);
    let r = c.send(&fetch, 1).await;
    assert_eq!(r.error_code, 0);
    let p = &r.responses[0].partitions[0];
    // Capped at 10 s of the quota (10 kB): the first batch only.
    assert_eq!(p.acquired_records.len(), 1, "{:?}", p.acquired_records);
    assert!(p.records.as_ref().is_some_and(|r| r.len() > 20_000));
    let throttle = r.throttle_time_ms;
    assert!(throttle > 0, "throttle {throttle}");
    assert!(metadata_wait(&mut c).await >= throttle as u128);
    b.shutdown().await;
}

fn create_req(topics: &[(&str, i32)]) -> CreateTopicsRequest {
    CreateTopicsRequest::default().with_topics(
        topics
            .iter()
            .map(|(n, p)| {
                create_topics_request::CreatableTopic::default()
                    .with_name(TopicName(s(n)))
                    .with_num_partitions(*p)
                    .with_replication_factor(-1)
            })
            .collect(),
    )
}

/// KIP-599 on tokio's paused clock: partitions created or deleted draw on
/// a bucket of 11 s of controller_mutation_rate; the strict versions
/// refuse a topic once it is below zero, the older ones take it and
/// throttle.
#[tokio::test(start_paused = true)]
async fn partition_mutations_are_limited_by_controller_mutation_rate() {
    let t = paused().start().await;
    let (b, mut c) = (t.b, t.c);
    set_quota(
        &mut c,
        &[("client-id", Some(CLIENT))],
        &[("controller_mutation_rate", Some(1.0))],
    )
    .await;
    // 11 tokens: 10 partitions, then 5 (the bucket is not below zero
    // before them: -4 after), then none.
    let r = c
        .send(&create_req(&[("ma", 10), ("mb", 5), ("mc", 1)]), 7)
        .await;
    let codes: Vec<i16> = r.topics.iter().map(|t| t.error_code).collect();
    assert_eq!(codes, vec![0, 0, ErrorCode::THROTTLING_QUOTA_EXCEEDED.0]);
    assert_eq!(
        r.topics[2].error_message.as_deref(),
        Some("The throttling quota has been exceeded.")
    );
    assert_eq!(r.throttle_time_ms, 4_000);
    // The connection is muted for it; by then the bucket is back at zero.
    assert!(metadata_wait(&mut c).await >= 4_000);
    // A refused topic does not exist; a topic that fails its own checks
    // (here: it exists) draws nothing.
    let r = c.send(&create_req(&[("mb", 3), ("mc", 1)]), 7).await;
    let codes: Vec<i16> = r.topics.iter().map(|t| t.error_code).collect();
    assert_eq!(codes, vec![ErrorCode::TOPIC_ALREADY_EXISTS.0, 0]);
    assert_eq!(r.throttle_time_ms, 1_000);
    assert!(metadata_wait(&mut c).await >= 1_000);
    // Deleting draws the topic's partitions: 10 from zero.
    let del = |name: &str| {
        DeleteTopicsRequest::default().with_topics(vec![
            delete_topics_request::DeleteTopicState::default().with_name(Some(TopicName(s(name)))),
        ])
    };
    let r = c.send(&del("ma"), 6).await;
    assert_eq!(r.responses[0].error_code, 0);
    assert_eq!(r.throttle_time_ms, 10_000);
    // An older CreateTopics (v5) is not refused: taken, and throttled.
    let started = tokio::time::Instant::now();
    let r = c.send(&create_req(&[("md", 2)]), 5).await;
    assert!(
        started.elapsed().as_millis() >= 10_000,
        "muted after the delete"
    );
    assert_eq!(r.topics[0].error_code, 0);
    assert_eq!(r.throttle_time_ms, 2_000);
    b.shutdown().await;
}
