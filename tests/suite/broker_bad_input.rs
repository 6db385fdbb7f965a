//! Bad input at the broker: thousands of random and mutated frames over many
//! connections must not take the broker down, disturb other clients, or
//! change a stored record.
//!
//! The frames come from a seeded RNG (the seed is printed on failure, and
//! `BAD_INPUT_SEED` replays one): valid headers with random bodies for every
//! advertised API key and version, mutated valid requests (flipped bytes,
//! cut or extended bodies, a body sent under another version), random length
//! prefixes, truncated frames, and garbage after valid requests. The test
//! produces known records first, and afterwards checks that a normal client
//! still gets a produce + fetch round trip and that the first records come
//! back byte for byte.

use crate::common;

use std::net::SocketAddr;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use common::RawClient;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use rand::rngs::StdRng;
use rand::{Rng, RngCore, SeedableRng};
use sharestream::broker::{Broker, BrokerConfig};
use sharestream::protocol::api::{ApiRequest, encode_request_frame, request_header_version};
use sharestream::protocol::records::{BatchBuilder, BatchSpec};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const FRAMES: usize = 3000;
const CONNECTIONS_AT_ONCE: usize = 24;
/// How long a hostile connection waits for the broker's answers before it
/// hangs up (a random Fetch may long-poll for days).
const DRAIN: Duration = Duration::from_millis(150);

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

fn records(seed: u64, count: usize) -> Bytes {
    let mut b = BatchBuilder::new(BatchSpec::default());
    for i in 0..count {
        let v = format!("keep-{seed}-{i}-{}", "x".repeat(i * 7 % 50));
        b.append(
            1_700_000_000_000 + i as i64,
            Some(Bytes::from(format!("k{i}"))),
            Some(Bytes::from(v)),
            Vec::new(),
        );
    }
    b.build().unwrap()
}

fn api_versions() -> ApiVersionsRequest {
    ApiVersionsRequest::default()
        .with_client_software_name(StrBytes::from_static_str("bad-input"))
        .with_client_software_version(StrBytes::from_static_str("1.0"))
}

fn produce_req(topic: &str, partition: i32, batch: Bytes) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(5_000)
        .with_topic_data(vec![
            TopicProduceData::default()
                .with_name(name(topic))
                .with_partition_data(vec![
                    PartitionProduceData::default()
                        .with_index(partition)
                        .with_records(Some(batch)),
                ]),
        ])
}

fn fetch_req(topic: &str, partition: i32, offset: i64, max_wait_ms: i32) -> FetchRequest {
    FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(max_wait_ms)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_session_epoch(-1)
        .with_topics(vec![
            FetchTopic::default()
                .with_topic(name(topic))
                .with_partitions(vec![
                    FetchPartition::default()
                        .with_partition(partition)
                        .with_current_leader_epoch(-1)
                        .with_fetch_offset(offset)
                        .with_log_start_offset(-1)
                        .with_partition_max_bytes(1 << 20),
                ]),
        ])
}

/// The raw bytes of partition `p` of `topic` from offset 0 to `end`.
async fn read_all(c: &mut RawClient, topic: &str, p: i32, end: i64) -> Vec<u8> {
    let mut out = Vec::new();
    let mut offset = 0;
    while offset < end {
        let resp = c.send(&fetch_req(topic, p, offset, 0), 12).await;
        let pd = &resp.responses[0].partitions[0];
        assert_eq!(pd.error_code, 0, "fetch {topic}-{p} at {offset}");
        let mut data = pd.records.clone().unwrap_or_default();
        assert!(
            !data.is_empty(),
            "fetch {topic}-{p} at {offset} below {end} is empty"
        );
        // Only the batches below `end`: later appends are not compared.
        while let Some(b) =
            sharestream::protocol::records::RecordBatchView::split_from(&mut data).unwrap()
        {
            if b.base_offset() >= end {
                break;
            }
            out.extend_from_slice(b.bytes());
            offset = b.last_offset() + 1;
        }
    }
    out
}

/// Header bytes for `key` at `version` (request header v1 or v2).
fn header(key: i16, version: i16, cid: i32) -> BytesMut {
    let mut out = BytesMut::new();
    let hv = request_header_version(key, version).unwrap_or(1);
    RequestHeader::default()
        .with_request_api_key(key)
        .with_request_api_version(version)
        .with_correlation_id(cid)
        .with_client_id(Some(StrBytes::from_static_str("bad-input")))
        .encode(&mut out, hv)
        .unwrap();
    out
}

fn framed(body: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(body.len() + 4);
    f.extend_from_slice(&(body.len() as i32).to_be_bytes());
    f.extend_from_slice(body);
    f
}

fn random_bytes(rng: &mut StdRng, max: usize) -> Vec<u8> {
    let n = rng.random_range(0..=max);
    let mut v = vec![0u8; n];
    rng.fill_bytes(&mut v);
    v
}

/// Valid requests to mutate, as (key, version, encoded frame without the
/// length prefix). None of them names the `keep` topic in a way that can
/// write to it: produce goes to `fuzz`, admin requests name `fuzz-*`.
fn templates() -> Vec<(i16, i16, Bytes)> {
    fn enc<R: ApiRequest>(r: &R, v: i16) -> (i16, i16, Bytes) {
        let mut out = BytesMut::new();
        encode_request_frame(r, v, 7, Some("bad-input"), &mut out).unwrap();
        (R::API_KEY, v, out.freeze().slice(4..))
    }
    vec![
        enc(&api_versions(), 3),
        enc(
            &MetadataRequest::default().with_topics(Some(vec![
                MetadataRequestTopic::default().with_name(Some(name("keep"))),
                MetadataRequestTopic::default().with_name(Some(name("fuzz"))),
            ])),
            12,
        ),
        enc(&produce_req("fuzz", 0, records(99, 3)), 9),
        enc(&produce_req("fuzz", 1, records(98, 1)), 3),
        enc(&fetch_req("keep", 0, 0, 0), 12),
        enc(&fetch_req("fuzz", 0, 0, 0), 4),
        enc(
            &ListOffsetsRequest::default()
                .with_replica_id(BrokerId(-1))
                .with_topics(vec![
                    ListOffsetsTopic::default()
                        .with_name(name("keep"))
                        .with_partitions(vec![ListOffsetsPartition::default().with_timestamp(-1)]),
                ]),
            6,
        ),
        enc(
            &CreateTopicsRequest::default().with_topics(vec![
                CreatableTopic::default()
                    .with_name(name("fuzz-new"))
                    .with_num_partitions(1)
                    .with_replication_factor(-1),
            ]),
            7,
        ),
        enc(&DescribeClusterRequest::default(), 0),
        enc(
            &FindCoordinatorRequest::default().with_key(StrBytes::from_static_str("g")),
            3,
        ),
    ]
}

/// One hostile frame (or frames, or partial frame) as bytes to write.
fn hostile_frame(
    rng: &mut StdRng,
    served: &[(i16, i16, i16)],
    templates: &[(i16, i16, Bytes)],
    cid: i32,
) -> Vec<u8> {
    match rng.random_range(0..8) {
        // A valid header for a served key and version, random body.
        0 | 1 => {
            let &(key, min, max) = &served[rng.random_range(0..served.len())];
            let version = rng.random_range(min..=max);
            let mut body = header(key, version, cid);
            body.extend_from_slice(&random_bytes(rng, 300));
            framed(&body)
        }
        // A mutated valid request: flipped bytes.
        2 | 3 => {
            let (_, _, t) = &templates[rng.random_range(0..templates.len())];
            let mut body = t.to_vec();
            for _ in 0..rng.random_range(1..=6) {
                let i = rng.random_range(0..body.len());
                body[i] ^= 1 << rng.random_range(0..8);
            }
            framed(&body)
        }
        // A valid request cut short, or extended with junk, inside its frame.
        4 => {
            let (_, _, t) = &templates[rng.random_range(0..templates.len())];
            let mut body = t.to_vec();
            if rng.random_bool(0.5) {
                body.truncate(rng.random_range(0..body.len()));
            } else {
                body.extend_from_slice(&random_bytes(rng, 64));
            }
            framed(&body)
        }
        // A body sent under another version (or an unserved one) of its key.
        5 => {
            let (key, version, t) = &templates[rng.random_range(0..templates.len())];
            let hv = request_header_version(*key, *version).unwrap();
            let mut old = t.clone();
            let _ = RequestHeader::decode(&mut old, hv);
            let other = rng.random_range(-1..=20);
            let mut body = header(*key, other, cid);
            body.extend_from_slice(&old);
            framed(&body)
        }
        // Random length prefix (negative, huge, or just wrong) and junk.
        6 => {
            let mut f = Vec::new();
            let len: i32 = match rng.random_range(0..4) {
                0 => rng.random_range(i32::MIN..0),
                1 => rng.random_range(100 << 20..i32::MAX),
                2 => rng.random_range(0..16),
                _ => rng.random(),
            };
            f.extend_from_slice(&len.to_be_bytes());
            f.extend_from_slice(&random_bytes(rng, 64));
            f
        }
        // A valid frame followed by garbage, or truncated on the wire.
        _ => {
            let (_, _, t) = &templates[rng.random_range(0..templates.len())];
            let mut f = framed(t);
            if rng.random_bool(0.5) {
                f.extend_from_slice(&random_bytes(rng, 32));
            } else {
                f.truncate(rng.random_range(1..f.len()));
            }
            f
        }
    }
}

/// Sends `frames` on one connection, half-closes, and reads whatever comes
/// back for a short while.
async fn hostile_connection(addr: SocketAddr, frames: Vec<Vec<u8>>) {
    let Ok(mut s) = TcpStream::connect(addr).await else {
        panic!("the broker stopped accepting connections");
    };
    for f in frames {
        if s.write_all(&f).await.is_err() {
            break; // closed by the broker: expected for bad framing
        }
    }
    let _ = s.shutdown().await;
    let mut sink = vec![0u8; 64 * 1024];
    let _ = tokio::time::timeout(DRAIN, async {
        while let Ok(n) = s.read(&mut sink).await {
            if n == 0 {
                break;
            }
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_and_mutated_frames_leave_the_broker_serving_and_the_log_intact() {
    assert!(sharestream::alloc::is_installed());
    let seed: u64 = std::env::var("BAD_INPUT_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x05ee_d0b4_d1a9_u64);
    eprintln!("BAD_INPUT_SEED={seed}");
    let broker = Broker::start(BrokerConfig::in_memory()).await.unwrap();
    let addr = broker.local_addr();
    let mut c = RawClient::connect(addr).await;

    // Known data first.
    for t in ["keep", "fuzz"] {
        let resp = c
            .send(
                &CreateTopicsRequest::default().with_topics(vec![
                    CreatableTopic::default()
                        .with_name(name(t))
                        .with_num_partitions(2)
                        .with_replication_factor(-1),
                ]),
                7,
            )
            .await;
        assert_eq!(resp.topics[0].error_code, 0);
    }
    let mut ends = [0i64; 2];
    for i in 0..12u64 {
        let p = (i % 2) as i32;
        let resp = c
            .send(&produce_req("keep", p, records(i, 1 + i as usize * 3)), 9)
            .await;
        let pr = &resp.responses[0].partition_responses[0];
        assert_eq!(pr.error_code, 0);
        ends[p as usize] = pr.base_offset + 1 + i as i64 * 3;
    }
    let before = [
        read_all(&mut c, "keep", 0, ends[0]).await,
        read_all(&mut c, "keep", 1, ends[1]).await,
    ];

    // What the broker serves, from its own ApiVersions answer.
    let av = c.send(&api_versions(), 3).await;
    let served: Vec<(i16, i16, i16)> = av
        .api_keys
        .iter()
        .map(|k| (k.api_key, k.min_version, k.max_version))
        .collect();
    assert!(served.len() >= 10, "{served:?}");
    let templates = templates();

    // The storm: FRAMES frames over many short connections, a few dozen
    // at a time.
    let mut rng = StdRng::seed_from_u64(seed);
    let mut conns: Vec<Vec<Vec<u8>>> = Vec::new();
    let mut made = 0;
    while made < FRAMES {
        let n = rng.random_range(1..=3).min(FRAMES - made);
        conns.push(
            (0..n)
                .map(|i| hostile_frame(&mut rng, &served, &templates, (made + i) as i32))
                .collect(),
        );
        made += n;
    }
    let total_conns = conns.len();
    let mut pending = conns.into_iter();
    let mut running = tokio::task::JoinSet::new();
    loop {
        while running.len() < CONNECTIONS_AT_ONCE {
            match pending.next() {
                Some(frames) => {
                    running.spawn(hostile_connection(addr, frames));
                }
                None => break,
            }
        }
        match running.join_next().await {
            Some(r) => r.expect("hostile connection task"),
            None => break,
        }
    }
    let m = broker.core().metrics();
    let handled: u64 = (0..100).filter_map(|k| m.api(k)).map(|s| s.count).sum();
    eprintln!(
        "{FRAMES} hostile frames over {total_conns} connections: {} accepted, {} closed as malformed, {handled} requests answered",
        m.counter("connections_accepted"),
        m.counter("connections_closed_malformed"),
    );
    assert!(m.counter("connections_accepted") as usize > total_conns);
    // Most frames are refused, but valid-looking ones are answered: the
    // storm exercised the handlers, not only the framing.
    assert!(handled > 300, "{handled} requests answered");

    // Many distinct unknown API keys: each is refused, and they must not
    // each cost the broker a metrics entry.
    let mut unknown = tokio::task::JoinSet::new();
    for (i, key) in (1000i16..1400).enumerate() {
        let mut body = Vec::new();
        body.extend_from_slice(&key.to_be_bytes());
        body.extend_from_slice(&0i16.to_be_bytes());
        body.extend_from_slice(&(i as i32).to_be_bytes());
        body.extend_from_slice(&(-1i16).to_be_bytes());
        unknown.spawn(hostile_connection(addr, vec![framed(&body)]));
        if unknown.len() >= CONNECTIONS_AT_ONCE {
            unknown.join_next().await.unwrap().unwrap();
        }
    }
    while let Some(r) = unknown.join_next().await {
        r.unwrap();
    }
    let text = broker.core().metrics().render_prometheus(&[]);
    assert_eq!(
        text.matches("sharestream_request_errors_total{api=\"Unknown\"}")
            .count(),
        1,
        "unknown keys share one metrics entry"
    );

    // The old connection still works, and a new one too.
    let av = c.send(&api_versions(), 3).await;
    assert_eq!(av.error_code, 0);
    let mut fresh = RawClient::connect(addr).await;
    let batch = records(1000, 5);
    let resp = fresh.send(&produce_req("keep", 0, batch.clone()), 9).await;
    let pr = &resp.responses[0].partition_responses[0];
    assert_eq!(pr.error_code, 0, "produce after the storm: {pr:?}");
    let new_base = pr.base_offset;
    assert!(new_base >= ends[0]);
    let got = fresh.send(&fetch_req("keep", 0, new_base, 0), 12).await;
    let data = got.responses[0].partitions[0].records.clone().unwrap();
    let mut data_tail = data.clone();
    let view = sharestream::protocol::records::RecordBatchView::split_from(&mut data_tail)
        .unwrap()
        .unwrap();
    assert_eq!(view.base_offset(), new_base);
    assert_eq!(view.records(1 << 20).unwrap().len(), 5);
    assert_eq!(
        view.records_section(),
        sharestream::protocol::records::RecordBatchView::split_from(&mut batch.clone())
            .unwrap()
            .unwrap()
            .records_section(),
        "the new records came back as sent"
    );

    // Nothing stored before the storm changed.
    let after = [
        read_all(&mut fresh, "keep", 0, ends[0]).await,
        read_all(&mut fresh, "keep", 1, ends[1]).await,
    ];
    assert!(before[0] == after[0], "partition 0 changed");
    assert!(before[1] == after[1], "partition 1 changed");
    // Partition 1 got nothing new: the storm never wrote to `keep`.
    let lo = fresh
        .send(
            &ListOffsetsRequest::default()
                .with_replica_id(BrokerId(-1))
                .with_topics(vec![
                    ListOffsetsTopic::default()
                        .with_name(name("keep"))
                        .with_partitions(vec![
                            ListOffsetsPartition::default()
                                .with_partition_index(1)
                                .with_timestamp(-1),
                        ]),
                ]),
            6,
        )
        .await;
    assert_eq!(lo.topics[0].partitions[0].offset, ends[1]);
    assert!(
        broker
            .core()
            .metrics()
            .counter("connections_closed_malformed")
            > 0,
        "the storm did reach the broker"
    );
    // A random Fetch may long-poll for days; do not wait for it at shutdown.
    drop(broker);
}
