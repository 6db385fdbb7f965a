//! Produce-then-fetch throughput and resident memory of the standalone
//! broker (`sharestream broker`), driven over TCP by our own protocol layer.
//!
//! The broker runs as a separate process (the release binary cargo builds
//! for benches) so that its resident set (`VmRSS`, `VmHWM` in
//! `/proc/<pid>/status`) is its own. The client side does as little as it
//! can, so the figures are the broker's:
//!
//! - Produce: each connection owns one partition and resends one
//!   pre-encoded Produce v9 frame (one uncompressed batch, no producer id)
//!   with up to [`IN_FLIGHT`] requests in flight, like a producer with
//!   `linger.ms` and `max.in.flight.requests.per.connection = 5`.
//! - Fetch: each connection reads its partition back from offset 0 with
//!   Fetch v12 (`max.partition.fetch.bytes` = 1 MiB, `fetch.max.bytes` =
//!   50 MiB, Kafka's consumer defaults), one request in flight, and counts
//!   the records from the batch headers (records are not decoded).
//!
//! Each run is bounded by [`DEFAULT_MB`] of record payload (env
//! `BENCH_MB`) or [`TIME_CAP`], repeated `BENCH_REPS` (default 3) times on a
//! fresh topic that is deleted afterwards; medians are printed as a
//! Markdown table. MB = 10^6 bytes of record value payload, as Kafka's
//! `kafka-producer-perf-test` counts them.
//!
//! Run with `cargo bench --bench broker_throughput`. Set `BENCH_DURABLE=0`
//! to skip the durable (`--data-dir`) variants, and `BENCH_BROKER_BIN` to
//! measure another `sharestream` binary with the same client.
//!
//! `BENCH_EXTERNAL=IP:PORT` drives a broker that is already running
//! instead (Apache Kafka on the same machine, for a side-by-side figure),
//! with the same client and the same grid; `BENCH_EXTERNAL_PID` names the
//! process whose memory to read. Topics are created with replication
//! factor -1 (the broker's default) and deleted after each run.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use sharestream::protocol::api::{ApiRequest, decode_response_header, encode_request_frame};
use sharestream::protocol::frame::FrameDecoder;
use sharestream::protocol::records::{BatchBuilder, BatchSpec, RecordBatchView};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

#[global_allocator]
static GLOBAL: sharestream::alloc::GuardedAlloc = sharestream::alloc::GuardedAlloc::new();

const PRODUCE_VERSION: i16 = 9;
const FETCH_VERSION: i16 = 12;
/// Connections, one partition each.
const CONNECTIONS: usize = 4;
/// Produce requests in flight per connection.
const IN_FLIGHT: usize = 5;
/// Record payload per run unless `BENCH_MB` says otherwise.
const DEFAULT_MB: usize = 128;
/// A run stops sending after this long whatever the byte count.
const TIME_CAP: Duration = Duration::from_secs(5);
const PARTITION_FETCH_BYTES: i32 = 1024 * 1024;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

// ---------------------------------------------------------------- process

struct BrokerProcess {
    /// None for an external broker (not ours to stop).
    child: Option<Child>,
    /// Process whose memory is read (0: unknown, RSS reads as 0).
    pid: u32,
    addr: SocketAddr,
}

/// The `sharestream` binary of this build: it belongs to the
/// `sharestream-cli` package, so it sits beside this bench's directory
/// (target/<profile>/deps/broker_throughput-<hash> -> target/<profile>/sharestream).
fn workspace_binary() -> String {
    let exe = std::env::current_exe().expect("own path");
    let bin = exe
        .parent()
        .and_then(|d| d.parent())
        .expect("target/<profile>")
        .join("sharestream");
    assert!(
        bin.exists(),
        "{} is missing: build it first (`cargo build --release -p sharestream-cli`)",
        bin.display()
    );
    bin.display().to_string()
}

impl BrokerProcess {
    fn start(extra: &[&str]) -> Self {
        // BENCH_BROKER_BIN runs another build (e.g. an older commit's) for
        // before/after comparisons under the same load.
        let bin = std::env::var("BENCH_BROKER_BIN").unwrap_or_else(|_| workspace_binary());
        let mut child = Command::new(bin)
            .args(["broker", "--listen", "127.0.0.1:0"])
            .args(extra)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start target/release/sharestream");
        let stdout = child.stdout.take().expect("piped stdout");
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("read the broker's first line");
        let addr = line
            .trim()
            .strip_prefix("sharestream broker listening on ")
            .unwrap_or_else(|| panic!("unexpected first line from the broker: {line:?}"))
            .parse()
            .expect("a socket address");
        let pid = child.id();
        Self {
            child: Some(child),
            pid,
            addr,
        }
    }

    /// A broker already running at `addr` (e.g. Apache Kafka), whose
    /// memory is read from process `pid` when given.
    fn external(addr: SocketAddr, pid: Option<u32>) -> Self {
        Self {
            child: None,
            pid: pid.unwrap_or(0),
            addr,
        }
    }

    fn status_kib(&self, field: &str) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid)).ok()?;
        let line = status.lines().find(|l| l.starts_with(field))?;
        line.split_whitespace().nth(1)?.parse().ok()
    }

    /// Current resident set in MiB.
    fn rss_mib(&self) -> f64 {
        self.status_kib("VmRSS:").unwrap_or(0) as f64 / 1024.0
    }

    /// Peak resident set since start or the last reset, in MiB.
    fn hwm_mib(&self) -> f64 {
        self.status_kib("VmHWM:").unwrap_or(0) as f64 / 1024.0
    }

    /// Resets VmHWM to the current RSS (Linux >= 4.0, same user).
    fn reset_hwm(&self) -> bool {
        std::fs::write(format!("/proc/{}/clear_refs", self.pid), "5").is_ok()
    }
}

impl Drop for BrokerProcess {
    fn drop(&mut self) {
        let Some(child) = &mut self.child else {
            return;
        };
        // SIGTERM for a graceful stop, then reap.
        unsafe {
            libc::kill(child.id() as i32, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

// ----------------------------------------------------------------- client

struct Conn {
    stream: TcpStream,
    decoder: FrameDecoder,
    next_cid: i32,
}

impl Conn {
    async fn connect(addr: SocketAddr) -> Self {
        let stream = TcpStream::connect(addr).await.expect("connect");
        stream.set_nodelay(true).expect("nodelay");
        Self {
            stream,
            decoder: FrameDecoder::default(),
            next_cid: 1,
        }
    }

    fn frame<R: ApiRequest>(&mut self, req: &R, version: i16) -> (Bytes, i32) {
        let cid = self.next_cid;
        self.next_cid += 1;
        let mut out = BytesMut::new();
        encode_request_frame(req, version, cid, Some("broker-bench"), &mut out).expect("encode");
        (out.freeze(), cid)
    }

    async fn next_frame(&mut self) -> Bytes {
        loop {
            if let Some(f) = self.decoder.next_frame().expect("framing") {
                return f;
            }
            let need = self.decoder.bytes_needed().max(64 * 1024);
            self.decoder.buffer_mut().reserve(need);
            let n = self
                .stream
                .read_buf(self.decoder.buffer_mut())
                .await
                .expect("read");
            assert!(n > 0, "broker closed the connection");
        }
    }

    async fn recv<R: ApiRequest>(&mut self, version: i16, cid: i32) -> R::Response {
        let mut f = self.next_frame().await;
        let got = decode_response_header(&mut f, R::API_KEY, version).expect("header");
        assert_eq!(got, cid, "correlation id");
        R::decode_response(&mut f, version).expect("response body")
    }

    async fn send<R: ApiRequest>(&mut self, req: &R, version: i16) -> R::Response {
        let (f, cid) = self.frame(req, version);
        self.stream.write_all(&f).await.expect("write");
        self.recv::<R>(version, cid).await
    }
}

fn topic_name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

async fn create_topic(addr: SocketAddr, name: &str, partitions: i32) {
    let mut c = Conn::connect(addr).await;
    let resp = c
        .send(
            &CreateTopicsRequest::default()
                .with_topics(vec![
                    CreatableTopic::default()
                        .with_name(topic_name(name))
                        .with_num_partitions(partitions)
                        .with_replication_factor(-1),
                ])
                .with_timeout_ms(30_000),
            7,
        )
        .await;
    assert_eq!(resp.topics[0].error_code, 0, "create {name}: {resp:?}");
    // A multi-node or KRaft broker (Kafka) may answer before every
    // partition has a leader: wait until each answers ListOffsets.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let req = ListOffsetsRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_topics(vec![
                ListOffsetsTopic::default()
                    .with_name(topic_name(name))
                    .with_partitions(
                        (0..partitions)
                            .map(|p| {
                                ListOffsetsPartition::default()
                                    .with_partition_index(p)
                                    .with_timestamp(-1)
                            })
                            .collect(),
                    ),
            ]);
        let resp = c.send(&req, 6).await;
        let ready = resp
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .filter(|p| p.error_code == 0)
            .count();
        if ready == partitions as usize {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{name}: partitions without a leader after 30 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn delete_topic(addr: SocketAddr, name: &str) {
    let mut c = Conn::connect(addr).await;
    let resp = c
        .send(
            &DeleteTopicsRequest::default()
                .with_topic_names(vec![topic_name(name)])
                .with_timeout_ms(30_000),
            5,
        )
        .await;
    assert_eq!(resp.responses[0].error_code, 0, "delete {name}: {resp:?}");
}

/// One uncompressed batch of `count` records with `size`-byte values.
fn batch(count: usize, size: usize, seed: u64) -> Bytes {
    let mut x = seed | 1;
    let mut b = BatchBuilder::new(BatchSpec::default());
    for _ in 0..count {
        let v: Vec<u8> = (0..size)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                b'a' + (x % 26) as u8
            })
            .collect();
        b.append(1_700_000_000_000, None, Some(Bytes::from(v)), Vec::new());
    }
    b.build().expect("encode batch")
}

#[derive(Clone, Copy, Debug, Default)]
struct Tally {
    records: u64,
    payload_bytes: u64,
    secs: f64,
}

impl Tally {
    fn records_per_sec(&self) -> f64 {
        self.records as f64 / self.secs
    }
    fn mb_per_sec(&self) -> f64 {
        self.payload_bytes as f64 / self.secs / 1e6
    }
}

/// Produces on every partition; returns the tally and each partition's
/// log end offset.
async fn produce_run(
    addr: SocketAddr,
    topic: &str,
    record_size: usize,
    batch_bytes: usize,
    acks: i16,
    payload_target: usize,
) -> (Tally, Vec<i64>) {
    let per_batch = (batch_bytes / (record_size + 8)).max(1);
    let batches_per_conn = (payload_target / CONNECTIONS / (per_batch * record_size)).max(1);
    let mut conns = Vec::new();
    for p in 0..CONNECTIONS {
        let mut c = Conn::connect(addr).await;
        let records = batch(per_batch, record_size, p as u64 + 7);
        let req = ProduceRequest::default()
            .with_acks(acks)
            .with_timeout_ms(30_000)
            .with_topic_data(vec![
                TopicProduceData::default()
                    .with_name(topic_name(topic))
                    .with_partition_data(vec![
                        PartitionProduceData::default()
                            .with_index(p as i32)
                            .with_records(Some(records)),
                    ]),
            ]);
        // One frame resent every time: the correlation id repeats, which the
        // broker does not mind and which keeps the client side to a write.
        let (frame, cid) = c.frame(&req, PRODUCE_VERSION);
        conns.push((c, frame, cid));
    }
    let started = Instant::now();
    let tasks: Vec<_> = conns
        .into_iter()
        .map(|(mut c, frame, cid)| {
            tokio::spawn(async move {
                let (mut sent, mut acked, mut in_flight) = (0usize, 0usize, 0usize);
                let mut last_base = -1i64;
                loop {
                    while in_flight < IN_FLIGHT
                        && sent < batches_per_conn
                        && started.elapsed() < TIME_CAP
                    {
                        c.stream.write_all(&frame).await.expect("write produce");
                        sent += 1;
                        in_flight += 1;
                    }
                    if in_flight == 0 {
                        break;
                    }
                    let resp = c.recv::<ProduceRequest>(PRODUCE_VERSION, cid).await;
                    let p = &resp.responses[0].partition_responses[0];
                    assert_eq!(p.error_code, 0, "produce failed: {p:?}");
                    assert!(p.base_offset > last_base, "offsets must grow");
                    last_base = p.base_offset;
                    in_flight -= 1;
                    acked += 1;
                }
                (acked, last_base + per_batch as i64)
            })
        })
        .collect();
    let mut records = 0u64;
    let mut ends = Vec::new();
    for t in tasks {
        let (acked, end) = t.await.expect("producer task");
        records += (acked * per_batch) as u64;
        ends.push(end);
    }
    let secs = started.elapsed().as_secs_f64();
    (
        Tally {
            records,
            payload_bytes: records * record_size as u64,
            secs,
        },
        ends,
    )
}

/// Reads every partition back to its end offset.
async fn fetch_run(addr: SocketAddr, topic: &str, record_size: usize, ends: &[i64]) -> Tally {
    let started = Instant::now();
    let tasks: Vec<_> = ends
        .iter()
        .enumerate()
        .map(|(p, &end)| {
            let topic = topic.to_string();
            tokio::spawn(async move {
                let mut c = Conn::connect(addr).await;
                let mut offset = 0i64;
                let mut records = 0u64;
                while offset < end {
                    let req = FetchRequest::default()
                        .with_replica_id(BrokerId(-1))
                        .with_max_wait_ms(500)
                        .with_min_bytes(1)
                        .with_max_bytes(50 * 1024 * 1024)
                        .with_session_epoch(-1)
                        .with_topics(vec![
                            FetchTopic::default()
                                .with_topic(topic_name(&topic))
                                .with_partitions(vec![
                                    FetchPartition::default()
                                        .with_partition(p as i32)
                                        .with_current_leader_epoch(-1)
                                        .with_fetch_offset(offset)
                                        .with_log_start_offset(-1)
                                        .with_partition_max_bytes(PARTITION_FETCH_BYTES),
                                ]),
                        ]);
                    let resp = c.send(&req, FETCH_VERSION).await;
                    assert_eq!(resp.error_code, 0, "fetch failed");
                    let pd = &resp.responses[0].partitions[0];
                    assert_eq!(pd.error_code, 0, "fetch partition failed");
                    let mut data = pd.records.clone().unwrap_or_default();
                    let mut got_any = false;
                    while let Some(b) = RecordBatchView::split_from(&mut data).expect("batch") {
                        if b.last_offset() >= offset {
                            records += b.records_count() as u64;
                            offset = b.last_offset() + 1;
                            got_any = true;
                        }
                    }
                    assert!(
                        got_any,
                        "fetch at {offset} below end {end} returned nothing"
                    );
                }
                records
            })
        })
        .collect();
    let mut records = 0;
    for t in tasks {
        records += t.await.expect("consumer task");
    }
    Tally {
        records,
        payload_bytes: records * record_size as u64,
        secs: started.elapsed().as_secs_f64(),
    }
}

// ------------------------------------------------------------------ grid

#[derive(Clone, Copy)]
struct Case {
    record_size: usize,
    batch_bytes: usize,
    acks: i16,
}

struct Row {
    storage: String,
    case: Case,
    produce: Tally,
    fetch: Tally,
    peak_mib: f64,
    payload_mb: f64,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).expect("no NaN"));
    v[v.len() / 2]
}

fn median_by<T: Copy>(v: &[T], key: impl Fn(&T) -> f64) -> T {
    let mut sorted: Vec<T> = v.to_vec();
    sorted.sort_by(|a, b| key(a).partial_cmp(&key(b)).expect("no NaN"));
    sorted[sorted.len() / 2]
}

fn run_cases(
    rt: &tokio::runtime::Runtime,
    storage: &str,
    broker: BrokerProcess,
    cases: &[Case],
    reps: usize,
    payload_target: usize,
    rows: &mut Vec<Row>,
) -> (f64, f64) {
    let addr = broker.addr;
    // Idle: after start and one connection's worth of admin traffic.
    rt.block_on(async {
        create_topic(addr, "warmup", 1).await;
        delete_topic(addr, "warmup").await;
    });
    std::thread::sleep(Duration::from_millis(200));
    let idle = broker.rss_mib();
    let mut n = 0;
    for case in cases {
        let mut produces = Vec::new();
        let mut fetches = Vec::new();
        let mut peaks = Vec::new();
        let mut payloads = Vec::new();
        for _ in 0..reps {
            n += 1;
            let topic = format!("bench-{n}");
            broker.reset_hwm();
            let (p, f) = rt.block_on(async {
                create_topic(addr, &topic, CONNECTIONS as i32).await;
                let (p, ends) = produce_run(
                    addr,
                    &topic,
                    case.record_size,
                    case.batch_bytes,
                    case.acks,
                    payload_target,
                )
                .await;
                let f = fetch_run(addr, &topic, case.record_size, &ends).await;
                assert_eq!(f.records, p.records, "fetched what was produced");
                (p, f)
            });
            peaks.push(broker.hwm_mib());
            payloads.push(p.payload_bytes as f64 / 1e6);
            rt.block_on(delete_topic(addr, &topic));
            produces.push(p);
            fetches.push(f);
        }
        let row = Row {
            storage: storage.to_string(),
            case: *case,
            produce: median_by(&produces, |t| t.records_per_sec()),
            fetch: median_by(&fetches, |t| t.records_per_sec()),
            peak_mib: median(peaks),
            payload_mb: median(payloads),
        };
        eprintln!(
            "{storage} {} B batch {} KiB acks={}: produce {:.0} rec/s {:.1} MB/s, fetch {:.0} rec/s {:.1} MB/s, peak RSS {:.0} MiB",
            case.record_size,
            case.batch_bytes / 1024,
            case.acks,
            row.produce.records_per_sec(),
            row.produce.mb_per_sec(),
            row.fetch.records_per_sec(),
            row.fetch.mb_per_sec(),
            row.peak_mib
        );
        rows.push(row);
    }
    let after = broker.rss_mib();
    (idle, after)
}

fn main() {
    // `cargo bench` passes `--bench`; nothing else is understood.
    let reps = env_usize("BENCH_REPS", 3).max(1);
    let payload_target = env_usize("BENCH_MB", DEFAULT_MB) * 1_000_000;
    let durable = env_usize("BENCH_DURABLE", 1) != 0;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let mut rows = Vec::new();
    let mut rss = Vec::new();
    let started = Instant::now();

    let mut cases = Vec::new();
    for record_size in [100, 1024] {
        for batch_bytes in [16 * 1024, 512 * 1024] {
            for acks in [1, -1] {
                cases.push(Case {
                    record_size,
                    batch_bytes,
                    acks,
                });
            }
        }
    }
    if let Ok(external) = std::env::var("BENCH_EXTERNAL") {
        let addr = external
            .parse()
            .expect("BENCH_EXTERNAL takes IP:PORT, e.g. 127.0.0.1:9092");
        let pid = std::env::var("BENCH_EXTERNAL_PID")
            .ok()
            .map(|p| p.parse().expect("BENCH_EXTERNAL_PID takes a process id"));
        let (idle, after) = run_cases(
            &rt,
            "external",
            BrokerProcess::external(addr, pid),
            &cases,
            reps,
            payload_target,
            &mut rows,
        );
        rss.push(("external".to_string(), idle, after));
    } else {
        let (idle, after) = run_cases(
            &rt,
            "memory",
            BrokerProcess::start(&["--memory"]),
            &cases,
            reps,
            payload_target,
            &mut rows,
        );
        rss.push(("memory".to_string(), idle, after));
    }

    if durable && std::env::var("BENCH_EXTERNAL").is_err() {
        let durable_cases: Vec<Case> = [100, 1024]
            .into_iter()
            .map(|record_size| Case {
                record_size,
                batch_bytes: 512 * 1024,
                acks: -1,
            })
            .collect();
        for fsync in ["never", "every-batch"] {
            let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("temp dir");
            let path = dir.path().to_str().expect("utf-8 path").to_string();
            let label = format!("disk, fsync {fsync}");
            let (idle, after) = run_cases(
                &rt,
                &label,
                BrokerProcess::start(&["--data-dir", &path, "--fsync", fsync]),
                &durable_cases,
                reps,
                payload_target,
                &mut rows,
            );
            rss.push((label, idle, after));
        }
    }

    println!();
    println!(
        "Medians of {reps} runs, {CONNECTIONS} connections x 1 partition, up to {} MB payload or {} s per run",
        payload_target / 1_000_000,
        TIME_CAP.as_secs()
    );
    println!();
    println!(
        "| storage | record | batch | acks | produce rec/s | produce MB/s | fetch rec/s | fetch MB/s | payload MB | peak RSS MiB |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for r in &rows {
        println!(
            "| {} | {} B | {} KiB | {} | {:.0} | {:.1} | {:.0} | {:.1} | {:.0} | {:.0} |",
            r.storage,
            r.case.record_size,
            r.case.batch_bytes / 1024,
            r.case.acks,
            r.produce.records_per_sec(),
            r.produce.mb_per_sec(),
            r.fetch.records_per_sec(),
            r.fetch.mb_per_sec(),
            r.payload_mb,
            r.peak_mib
        );
    }
    println!();
    println!("| broker | idle RSS MiB | RSS after the runs (topics deleted) MiB |");
    println!("|---|---|---|");
    for (label, idle, after) in &rss {
        println!("| {label} | {idle:.1} | {after:.1} |");
    }
    println!();
    println!("total time {:.1} s", started.elapsed().as_secs_f64());
}
