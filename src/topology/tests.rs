//! Unit tests of the topology DSL: no broker, no I/O.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::Poll;

use ::serde::{Deserialize, Serialize};
use bytes::Bytes;
use futures::StreamExt;
use futures::executor::block_on;
use parking_lot::Mutex;

use super::*;
use crate::eos::AcknowledgeType;
use crate::protocol::records::RecordHeader;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Order {
    id: u64,
    amount: u64,
}

fn src(topic: &str, key: Option<&str>, value: Option<&str>) -> SourceRecord {
    SourceRecord {
        topic: topic.into(),
        partition: 3,
        offset: 100,
        delivery_count: 2,
        key: key.map(|k| Bytes::copy_from_slice(k.as_bytes())),
        value: value.map(|v| Bytes::copy_from_slice(v.as_bytes())),
        headers: vec![RecordHeader {
            key: "trace".into(),
            value: Some(Bytes::from_static(b"t-1")),
        }],
        timestamp: 1_000,
    }
}

fn run(t: &CompiledTopology, r: SourceRecord) -> ProcessResult {
    block_on(t.process(r))
}

fn text(b: &Option<Bytes>) -> &str {
    std::str::from_utf8(b.as_deref().expect("not null")).unwrap()
}

fn values(r: &ProcessResult) -> Vec<(String, String)> {
    r.records
        .iter()
        .map(|o| (o.topic.clone(), text(&o.value).to_string()))
        .collect()
}

fn strings(builder: &StreamsBuilder, topic: &str) -> KStream<String, String> {
    builder.stream(topic, Serdes::string(), Serdes::string())
}

fn header<'a>(o: &'a OutputRecord, key: &str) -> Option<&'a str> {
    o.headers
        .iter()
        .rev()
        .find(|h| h.key == key)
        .map(|h| std::str::from_utf8(h.value.as_deref().unwrap()).unwrap())
}

fn build_err(builder: StreamsBuilder) -> BuildError {
    builder.build().expect_err("the build must be refused")
}

// ---------------------------------------------------------------- serdes

#[test]
fn serdes_round_trip_and_refuse_bad_data() {
    let s = Serdes::string();
    assert_eq!(
        Serializer::serialize(&s, "t", &"héllo".to_string()).unwrap(),
        Some(Bytes::from("héllo"))
    );
    let e = Deserializer::deserialize(&s, "t", Some(&[0xff, 0xfe][..])).unwrap_err();
    assert!(e.message().contains("invalid UTF-8"), "{e}");
    let e = Deserializer::<String>::deserialize(&s, "t", None).unwrap_err();
    assert!(e.message().contains("Serdes::optional"), "{e}");

    let order = Order { id: 1, amount: 5 };
    let j = Serdes::json::<Order>();
    let bytes = j.serialize("t", &order).unwrap().unwrap();
    assert_eq!(&bytes[..], br#"{"id":1,"amount":5}"#);
    assert_eq!(j.deserialize("t", Some(&bytes)).unwrap(), order);
    assert!(
        j.deserialize("t", Some(b"{"))
            .unwrap_err()
            .message()
            .starts_with("JSON")
    );

    let m = Serdes::msgpack::<Order>();
    let bytes = m.serialize("t", &order).unwrap().unwrap();
    assert_eq!(m.deserialize("t", Some(&bytes)).unwrap(), order);
    assert!(m.deserialize("t", Some(b"\xc1")).is_err());

    let b = Serdes::bytes();
    assert_eq!(
        b.deserialize("t", Some(b"\x00\x01")).unwrap(),
        Bytes::from_static(b"\x00\x01")
    );

    let o = Serdes::optional(Serdes::string());
    assert_eq!(o.deserialize("t", None).unwrap(), None);
    assert_eq!(
        o.deserialize("t", Some(b"x")).unwrap(),
        Some("x".to_string())
    );
    assert_eq!(o.serialize("t", &None).unwrap(), None);
    assert_eq!(Serializer::<Option<String>>::format(&o), "string");

    let u = Serdes::unit();
    assert_eq!(u.serialize("t", &()).unwrap(), None);
    u.deserialize("t", Some(b"ignored")).unwrap();
}

// ------------------------------------------------------------- operators

#[test]
fn filter_filter_not_and_filter_record() {
    let b = StreamsBuilder::new("g");
    strings(&b, "in")
        .filter(|_, v| v.len() > 2)
        .filter_not(|k, _| k == "skip")
        .filter_record(|r| r.headers.last_str("trace") == Some("t-1"))
        .to("out", Serdes::string(), Serdes::string());
    let t = b.build().unwrap().compile();
    assert_eq!(
        values(&run(&t, src("in", Some("k"), Some("long")))).len(),
        1
    );
    let short = run(&t, src("in", Some("k"), Some("ab")));
    assert_eq!(
        short.outcome,
        Outcome::Accept,
        "a filtered record is accepted"
    );
    assert!(short.records.is_empty());
    assert!(
        run(&t, src("in", Some("skip"), Some("long")))
            .records
            .is_empty()
    );
    let mut no_trace = src("in", Some("k"), Some("long"));
    no_trace.headers.clear();
    assert!(run(&t, no_trace).records.is_empty());
}

#[test]
fn map_map_values_select_key() {
    let b = StreamsBuilder::new("g");
    strings(&b, "in")
        .map(|k, v| (v, k))
        .map_values(|v: String| v.to_uppercase())
        .select_key(|k: &String, v: &String| format!("{k}/{v}"))
        .to("out", Serdes::string(), Serdes::string());
    let t = b.build().unwrap().compile();
    let r = run(&t, src("in", Some("key"), Some("val")));
    assert_eq!(r.outcome, Outcome::Accept);
    assert_eq!(text(&r.records[0].key), "val/KEY");
    assert_eq!(text(&r.records[0].value), "KEY");
}

#[test]
fn flat_map_and_flat_map_values_keep_headers_and_order() {
    let b = StreamsBuilder::new("g");
    strings(&b, "in")
        .flat_map(|k, v| {
            v.split(',')
                .map(|p| (k.clone(), p.to_string()))
                .collect::<Vec<_>>()
        })
        .flat_map_values(|v| vec![format!("{v}1"), format!("{v}2")])
        .to("out", Serdes::string(), Serdes::string());
    let t = b.build().unwrap().compile();
    let r = run(&t, src("in", Some("k"), Some("a,b")));
    let got: Vec<_> = r
        .records
        .iter()
        .map(|o| text(&o.value).to_string())
        .collect();
    assert_eq!(got, ["a1", "a2", "b1", "b2"]);
    for o in &r.records {
        assert_eq!(text(&o.key), "k");
        assert_eq!(header(o, "trace"), Some("t-1"));
        assert_eq!(o.timestamp, Some(1_000));
    }
    assert!(run(&t, src("in", Some("k"), Some(""))).records.len() == 2);
}

#[test]
fn peek_and_foreach_see_every_record() {
    let peeked = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let b = StreamsBuilder::new("g");
    let (p, s) = (peeked.clone(), seen.clone());
    strings(&b, "in")
        .peek(move |k, v| p.lock().push(format!("{k}={v}")))
        .foreach(move |k, v| s.lock().push((k, v)));
    let t = b.build().unwrap().compile();
    let r = run(&t, src("in", Some("a"), Some("1")));
    assert_eq!(r.outcome, Outcome::Accept);
    assert!(r.records.is_empty(), "foreach produces nothing");
    run(&t, src("in", Some("b"), Some("2")));
    assert_eq!(*peeked.lock(), ["a=1", "b=2"]);
    assert_eq!(
        *seen.lock(),
        [("a".into(), "1".into()), ("b".into(), "2".into())]
    );
}

#[test]
fn record_level_operators_see_headers_timestamp_and_source() {
    let b = StreamsBuilder::new("g");
    strings(&b, "in")
        .map_record(|mut r| {
            let meta = r.source().clone();
            r.headers.add(
                "from",
                Some(Bytes::from(format!(
                    "{}-{}@{}",
                    meta.topic, meta.partition, meta.offset
                ))),
            );
            r.timestamp += 5;
            let dc = meta.delivery_count;
            r.with_value(format!("dc={dc}"))
        })
        .process(|r: Record<String, String>| -> Result<_, BoxError> {
            let copy = r.derive(r.key.clone(), format!("{}!", r.value));
            Ok(vec![r, copy])
        })
        .to("out", Serdes::string(), Serdes::string());
    let t = b.build().unwrap().compile();
    let r = run(&t, src("in", Some("k"), Some("v")));
    assert_eq!(
        values(&r),
        [
            ("out".into(), "dc=2".into()),
            ("out".into(), "dc=2!".into())
        ]
    );
    for o in &r.records {
        assert_eq!(header(o, "from"), Some("in-3@100"));
        assert_eq!(header(o, "trace"), Some("t-1"));
        assert_eq!(o.timestamp, Some(1_005));
    }
}

#[test]
fn try_operators_errors_go_to_the_policy() {
    let mut b = StreamsBuilder::new("g");
    b.error_policy(ErrorPolicy::Reject);
    strings(&b, "in")
        .try_filter(|_, v| {
            if v == "bad-filter" {
                Err("filter says no")
            } else {
                Ok(true)
            }
        })
        .try_map(|k, v| {
            if v == "bad-map" {
                Err(format!("cannot map {v}"))
            } else {
                Ok((k, v))
            }
        })
        .try_map_values(|v: String| v.parse::<u32>())
        .to("out", Serdes::string(), Serdes::json());
    let t = b.build().unwrap().compile();
    assert_eq!(
        run(&t, src("in", Some("k"), Some("7"))).outcome,
        Outcome::Accept
    );
    for (v, msg) in [
        ("bad-filter", "filter says no"),
        ("bad-map", "cannot map bad-map"),
        ("x", "invalid digit"),
    ] {
        let r = run(&t, src("in", Some("k"), Some(v)));
        let Outcome::Reject { error } = &r.outcome else {
            panic!("{:?}", r.outcome)
        };
        assert_eq!(error.kind, ErrorKind::Operator);
        assert!(error.message.contains(msg), "{error}");
        assert!(r.records.is_empty());
        assert_eq!(r.outcome.acknowledge_type(), Some(AcknowledgeType::Reject));
    }
}

// --------------------------------------------------------- split / merge

#[test]
fn split_routes_to_first_matching_branch_then_default() {
    let b = StreamsBuilder::new("g");
    let mut br = b
        .stream::<String, Order>("orders", Serdes::string(), Serdes::json())
        .split()
        .branch("big", |_, o| o.amount >= 100)
        .branch("medium", |_, o| o.amount >= 10)
        .branch_record("vip", |r| r.headers.last_str("vip").is_some())
        .default_branch("rest");
    assert_eq!(br.names(), ["big", "medium", "rest", "vip"]);
    for name in ["big", "medium", "vip", "rest"] {
        br.take(name)
            .unwrap()
            .to(name, Serdes::string(), Serdes::json());
    }
    let t = b.build().unwrap().compile();
    let topic_of = |amount: u64, vip: bool| {
        let mut r = src(
            "orders",
            Some("c"),
            Some(&format!(r#"{{"id":1,"amount":{amount}}}"#)),
        );
        if vip {
            r.headers.push(RecordHeader {
                key: "vip".into(),
                value: Some(Bytes::from_static(b"y")),
            });
        }
        let res = run(&t, r);
        assert_eq!(res.records.len(), 1);
        res.records[0].topic.clone()
    };
    assert_eq!(topic_of(500, true), "big", "first matching branch wins");
    assert_eq!(topic_of(50, false), "medium");
    assert_eq!(topic_of(5, true), "vip");
    assert_eq!(topic_of(5, false), "rest");
}

#[test]
fn split_without_default_drops_unmatched() {
    let b = StreamsBuilder::new("g");
    let mut br = strings(&b, "in")
        .split()
        .branch("a", |_, v| v.starts_with('a'))
        .no_default_branch();
    br.take("a")
        .unwrap()
        .to("out-a", Serdes::string(), Serdes::string());
    let t = b.build().unwrap().compile();
    assert_eq!(
        run(&t, src("in", Some("k"), Some("apple"))).records.len(),
        1
    );
    let r = run(&t, src("in", Some("k"), Some("pear")));
    assert_eq!(r.outcome, Outcome::Accept);
    assert!(r.records.is_empty());
}

#[test]
fn merge_two_sources_and_branches() {
    let b = StreamsBuilder::new("g");
    let a = strings(&b, "in-a").map_values(|v| format!("a:{v}"));
    let c = strings(&b, "in-b").map_values(|v| format!("b:{v}"));
    let mut br = a
        .merge(c)
        .split()
        .branch("x", |_, v| v.ends_with('x'))
        .default_branch("y");
    let x = br.take("x").unwrap();
    let y = br.take("y").unwrap().map_values(|v| format!("{v}!"));
    x.merge(y).to("out", Serdes::string(), Serdes::string());
    let topo = b.build().unwrap();
    assert_eq!(topo.source_topics(), ["in-a", "in-b"]);
    let t = topo.compile();
    assert_eq!(
        values(&run(&t, src("in-a", Some("k"), Some("1x"))))[0].1,
        "a:1x"
    );
    assert_eq!(
        values(&run(&t, src("in-b", Some("k"), Some("2"))))[0].1,
        "b:2!"
    );
}

#[test]
fn cloned_stream_fans_out_depth_first() {
    let b = StreamsBuilder::new("g");
    let s = strings(&b, "in").flat_map_values(|v| v.chars().map(String::from).collect::<Vec<_>>());
    s.clone()
        .map_values(|v| format!("first-{v}"))
        .to("one", Serdes::string(), Serdes::string());
    s.to("two", Serdes::string(), Serdes::string());
    let t = b.build().unwrap().compile();
    let r = run(&t, src("in", Some("k"), Some("ab")));
    let got: Vec<_> = values(&r)
        .into_iter()
        .map(|(t, v)| format!("{t}:{v}"))
        .collect();
    assert_eq!(got, ["one:first-a", "two:a", "one:first-b", "two:b"]);
}

// ----------------------------------------------------------------- sinks

#[test]
fn to_keeps_key_headers_and_timestamp() {
    let b = StreamsBuilder::new("g");
    b.stream::<Option<String>, Option<String>>(
        "in",
        Serdes::optional(Serdes::string()),
        Serdes::optional(Serdes::string()),
    )
    .to(
        "out",
        Serdes::optional(Serdes::string()),
        Serdes::optional(Serdes::string()),
    );
    let t = b.build().unwrap().compile();
    let r = run(&t, src("in", None, None));
    assert_eq!(
        r.outcome,
        Outcome::Accept,
        "null key and tombstone read as None"
    );
    let o = &r.records[0];
    assert_eq!((o.key.clone(), o.value.clone()), (None, None));
    assert_eq!(o.partition, None);
    assert_eq!(o.timestamp, Some(1_000));
    assert_eq!(o.headers, src("in", None, None).headers);
}

#[test]
fn to_dynamic_controls_topic_partition_timestamp_headers_and_key() {
    let b = StreamsBuilder::new("g");
    strings(&b, "in").to_dynamic(Serdes::string(), Serdes::string(), |r| {
        match r.value.as_str() {
            "p" => SinkRecord::topic("parts").partition(7).timestamp(42),
            "h" => SinkRecord::topic("heads")
                .headers(Headers::new())
                .header("only", "this")
                .producer_timestamp(),
            "n" => SinkRecord::topic("nulls").null_key(),
            "bad" => SinkRecord::topic("no spaces allowed"),
            other => SinkRecord::topic(format!("t-{other}")),
        }
    });
    let t = b.build().unwrap().compile();
    let o = run(&t, src("in", Some("k"), Some("p"))).records.remove(0);
    assert_eq!(
        (o.topic.as_str(), o.partition, o.timestamp),
        ("parts", Some(7), Some(42))
    );
    assert_eq!(header(&o, "trace"), Some("t-1"));
    let o = run(&t, src("in", Some("k"), Some("h"))).records.remove(0);
    assert_eq!(o.headers.len(), 1);
    assert_eq!(header(&o, "only"), Some("this"));
    assert_eq!(o.timestamp, None);
    let o = run(&t, src("in", Some("k"), Some("n"))).records.remove(0);
    assert_eq!((o.topic.as_str(), o.key), ("nulls", None));
    let o = run(&t, src("in", Some("k"), Some("z"))).records.remove(0);
    assert_eq!(o.topic, "t-z");
    let r = run(&t, src("in", Some("k"), Some("bad")));
    let Outcome::Fail { error } = r.outcome else {
        panic!()
    };
    assert!(
        error
            .message
            .contains("invalid topic name 'no spaces allowed'"),
        "{error}"
    );
}

struct FailingSerde;
impl Serializer<String> for FailingSerde {
    fn serialize(&self, _: &str, _: &String) -> Result<Option<Bytes>, SerdeError> {
        Err(SerdeError::new("cannot write"))
    }
}

#[test]
fn serialization_error_uses_the_sink_policy() {
    let mut b = StreamsBuilder::new("g");
    b.error_policy(ErrorPolicy::Fail);
    strings(&b, "in")
        .to("out", Serdes::string(), FailingSerde)
        .named("failing-sink")
        .on_error(ErrorPolicy::Reject);
    let t = b.build().unwrap().compile();
    let r = run(&t, src("in", Some("k"), Some("v")));
    let Outcome::Reject { error } = r.outcome else {
        panic!()
    };
    assert_eq!(error.kind, ErrorKind::Serialization);
    assert_eq!(error.node, "failing-sink");
    assert_eq!(error.message, "value: cannot write");
}

// ----------------------------------------------------------- error policy

fn policy_topology(default: ErrorPolicy, source_policy: Option<ErrorPolicy>) -> CompiledTopology {
    let mut b = StreamsBuilder::new("g");
    b.error_policy(default);
    let mut s = b.stream::<String, Order>("orders", Serdes::string(), Serdes::json());
    if let Some(p) = source_policy {
        s = s.on_error(p);
    }
    let s = s.named("orders-source");
    s.clone().to("copy", Serdes::string(), Serdes::json());
    s.try_map_values(|o: Order| {
        if o.amount == 0 {
            Err("amount is zero")
        } else {
            Ok(o)
        }
    })
    .named("check")
    .to("checked", Serdes::string(), Serdes::json());
    b.build().unwrap().compile()
}

#[test]
fn default_policy_is_fail() {
    let t = policy_topology(ErrorPolicy::default(), None);
    let r = run(&t, src("orders", Some("k"), Some(r#"{"id":1,"amount":0}"#)));
    let Outcome::Fail { error } = &r.outcome else {
        panic!("{:?}", r.outcome)
    };
    assert_eq!(error.node, "check");
    assert!(
        r.records.is_empty(),
        "outputs made before the error are dropped"
    );
    assert_eq!(r.outcome.acknowledge_type(), None);
}

#[test]
fn reject_drops_all_outputs_of_the_source_record() {
    let t = policy_topology(ErrorPolicy::Reject, None);
    let ok = run(&t, src("orders", Some("k"), Some(r#"{"id":1,"amount":3}"#)));
    assert_eq!(ok.records.len(), 2);
    let r = run(&t, src("orders", Some("k"), Some(r#"{"id":1,"amount":0}"#)));
    assert!(matches!(r.outcome, Outcome::Reject { .. }));
    assert!(
        r.records.is_empty(),
        "the 'copy' output was made first, and dropped"
    );
}

#[test]
fn dead_letter_record_has_original_bytes_and_error_headers() {
    let t = policy_topology(ErrorPolicy::dead_letter("orders-dlq"), None);
    let source = src("orders", Some("k"), Some(r#"{"id":1,"amount":0}"#));
    let r = run(&t, source.clone());
    let Outcome::DeadLetter { topic, error } = &r.outcome else {
        panic!("{:?}", r.outcome)
    };
    assert_eq!(topic, "orders-dlq");
    assert_eq!(r.outcome.acknowledge_type(), Some(AcknowledgeType::Reject));
    assert_eq!(r.records.len(), 1, "only the dead-letter record");
    let d = &r.records[0];
    assert_eq!(d.topic, "orders-dlq");
    assert_eq!((&d.key, &d.value), (&source.key, &source.value));
    assert_eq!((d.partition, d.timestamp), (None, None));
    assert_eq!(
        d.headers[0], source.headers[0],
        "original headers come first"
    );
    let expect = [
        (error::DLQ_ORIGINAL_TOPIC, "orders"),
        (error::DLQ_ORIGINAL_PARTITION, "3"),
        (error::DLQ_ORIGINAL_OFFSET, "100"),
        (error::DLQ_ORIGINAL_TIMESTAMP, "1000"),
        (error::DLQ_DELIVERY_COUNT, "2"),
        (error::DLQ_ATTEMPTS, "2"),
        (error::DLQ_ERROR_KIND, "operator"),
        (error::DLQ_ERROR_NODE, "check"),
        (error::DLQ_ERROR_MESSAGE, "amount is zero"),
    ];
    assert_eq!(d.headers.len(), 1 + expect.len());
    for (k, v) in expect {
        assert_eq!(header(d, k), Some(v), "header {k}");
    }
    assert_eq!(error.message, "amount is zero");
}

#[test]
fn dead_letter_attempts_header_adds_in_process_retries_to_earlier_deliveries() {
    let mut b = StreamsBuilder::new("g");
    b.error_policy(ErrorPolicy::dead_letter("dlq"));
    b.stream::<String, String>("orders", Serdes::string(), Serdes::string())
        .map_async(4, |v: String| async move {
            let mut last = String::new();
            for attempt in 1..=3u32 {
                last = format!("declined {v} on attempt {attempt}");
            }
            Err::<String, _>(error::AttemptsExhausted::new(3, last))
        })
        .named("pay")
        .to("out", Serdes::string(), Serdes::string());
    let t = b.build().unwrap().compile();
    // src() is a second delivery: one earlier attempt + 3 in process.
    let r = run(&t, src("orders", Some("k"), Some("x")));
    let Outcome::DeadLetter { error, .. } = &r.outcome else {
        panic!("{:?}", r.outcome)
    };
    assert_eq!(error.attempts, 3);
    assert_eq!(error.message, "declined x on attempt 3");
    let d = &r.records[0];
    assert_eq!(header(d, error::DLQ_DELIVERY_COUNT), Some("2"));
    assert_eq!(header(d, error::DLQ_ATTEMPTS), Some("4"));
    assert_eq!(
        header(d, error::DLQ_ERROR_MESSAGE),
        Some("declined x on attempt 3")
    );
    // A plain error is one attempt; a first delivery has no earlier ones.
    let mut first = src("orders", Some("k"), Some("x"));
    first.delivery_count = 1;
    let plain = {
        let mut b = StreamsBuilder::new("g");
        b.error_policy(ErrorPolicy::dead_letter("dlq"));
        b.stream::<String, String>("orders", Serdes::string(), Serdes::string())
            .try_map_values(|_v: String| Err::<String, _>("no"))
            .to("out", Serdes::string(), Serdes::string());
        b.build().unwrap().compile()
    };
    let r = run(&plain, first);
    assert_eq!(header(&r.records[0], error::DLQ_ATTEMPTS), Some("1"));
}

#[test]
fn deserialization_errors_go_through_the_source_policy() {
    // Source policy overrides the default.
    let t = policy_topology(
        ErrorPolicy::Fail,
        Some(ErrorPolicy::dead_letter("bad-input")),
    );
    let r = run(&t, src("orders", Some("k"), Some("not json")));
    let Outcome::DeadLetter { topic, error } = &r.outcome else {
        panic!("{:?}", r.outcome)
    };
    assert_eq!(topic, "bad-input");
    assert_eq!(error.kind, ErrorKind::Deserialization);
    assert_eq!(error.node, "orders-source");
    assert!(error.message.starts_with("value: JSON"), "{error}");
    assert_eq!(
        header(&r.records[0], error::DLQ_ERROR_KIND),
        Some("deserialization")
    );
    assert_eq!(r.records[0].value.as_deref(), Some(&b"not json"[..]));
    // An operator error still uses the default.
    let r = run(&t, src("orders", Some("k"), Some(r#"{"id":1,"amount":0}"#)));
    assert!(matches!(r.outcome, Outcome::Fail { .. }));
    // A null key is a deserialization error that says what to do.
    let r = run(&t, src("orders", None, Some(r#"{"id":1,"amount":1}"#)));
    let error = r.outcome.error().unwrap();
    assert!(
        error.message.starts_with("key: null data") && error.message.contains("Serdes::optional"),
        "{error}"
    );
}

#[test]
fn per_operator_policy_overrides_the_default() {
    let mut b = StreamsBuilder::new("g");
    b.error_policy(ErrorPolicy::dead_letter("dlq"));
    strings(&b, "in")
        .try_map_values(|v: String| if v == "r" { Err("reject me") } else { Ok(v) })
        .on_error(ErrorPolicy::Reject)
        .try_map_values(|v: String| {
            if v == "d" {
                Err("dead-letter me")
            } else {
                Ok(v)
            }
        })
        .to("out", Serdes::string(), Serdes::string());
    let t = b.build().unwrap().compile();
    assert!(matches!(
        run(&t, src("in", Some("k"), Some("r"))).outcome,
        Outcome::Reject { .. }
    ));
    assert!(matches!(
        run(&t, src("in", Some("k"), Some("d"))).outcome,
        Outcome::DeadLetter { .. }
    ));
    assert_eq!(
        run(&t, src("in", Some("k"), Some("ok"))).outcome,
        Outcome::Accept
    );
}

#[test]
fn panics_in_user_code_are_operator_errors() {
    let mut b = StreamsBuilder::new("g");
    b.error_policy(ErrorPolicy::Reject);
    let mut br = strings(&b, "in")
        .map_values(|v: String| if v == "boom" { panic!("boom!") } else { v })
        .split()
        .branch("x", |_, v| {
            if v == "pred" {
                panic!("predicate {v}")
            } else {
                true
            }
        })
        .no_default_branch();
    br.take("x")
        .unwrap()
        .map_async(2, |v: String| async move {
            if v == "async" {
                panic!("in the future");
            }
            Ok::<_, BoxError>(v)
        })
        .to("out", Serdes::string(), Serdes::string());
    let t = b.build().unwrap().compile();
    for (v, node, msg) in [
        ("boom", "map-values-1", "panicked: boom!"),
        ("pred", "split-2", "panicked: predicate pred"),
        ("async", "map-async-4", "panicked: in the future"),
    ] {
        let r = run(&t, src("in", Some("k"), Some(v)));
        let Outcome::Reject { error } = &r.outcome else {
            panic!("{:?}", r.outcome)
        };
        assert_eq!(
            (error.kind, error.node.as_str(), error.message.as_str()),
            (ErrorKind::Operator, node, msg)
        );
    }
    assert_eq!(
        run(&t, src("in", Some("k"), Some("fine"))).outcome,
        Outcome::Accept
    );
}

#[test]
fn record_of_an_unknown_topic_fails() {
    let b = StreamsBuilder::new("g");
    strings(&b, "in").to("out", Serdes::string(), Serdes::string());
    let t = b.build().unwrap().compile();
    let r = run(&t, src("elsewhere", None, Some("v")));
    let Outcome::Fail { error } = r.outcome else {
        panic!()
    };
    assert_eq!(error.kind, ErrorKind::UnknownTopic);
}

// ------------------------------------------------------------ async map

/// Pending once (waking itself), then ready: lets other futures run.
fn yield_now() -> impl std::future::Future<Output = ()> {
    let mut yielded = false;
    futures::future::poll_fn(move |cx| {
        if yielded {
            Poll::Ready(())
        } else {
            yielded = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    })
}

fn counting_topology(in_flight: Arc<AtomicUsize>, peak: Arc<AtomicUsize>) -> Topology {
    let b = StreamsBuilder::new("g");
    strings(&b, "in")
        .map_async(3, move |v: String| {
            let (in_flight, peak) = (in_flight.clone(), peak.clone());
            async move {
                let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                peak.fetch_max(now, Ordering::SeqCst);
                // Later records finish sooner: completion order is reversed.
                let n: usize = v.parse().unwrap();
                for _ in 0..(20 - n) {
                    yield_now().await;
                }
                in_flight.fetch_sub(1, Ordering::SeqCst);
                Ok::<_, BoxError>(format!("done-{v}"))
            }
        })
        .to("out", Serdes::string(), Serdes::string());
    b.build().unwrap()
}

#[test]
fn map_async_bound_holds_even_when_more_records_are_driven() {
    let (in_flight, peak) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let topo = counting_topology(in_flight.clone(), peak.clone());
    assert_eq!(topo.max_concurrency(), 3);
    let t = topo.compile();
    // Drive 12 records at once: the operator's semaphore caps its calls.
    let results: Vec<ProcessResult> = block_on(
        futures::stream::iter((0..12).map(|i| src("in", Some("k"), Some(&i.to_string()))))
            .map(|r| t.process(r))
            .buffer_unordered(12)
            .collect(),
    );
    assert_eq!(results.len(), 12);
    assert!(results.iter().all(|r| r.outcome == Outcome::Accept));
    assert_eq!(
        peak.load(Ordering::SeqCst),
        3,
        "bounded by max_in_flight, and reached"
    );
    assert_eq!(in_flight.load(Ordering::SeqCst), 0);
}

#[test]
fn process_batch_keeps_source_order_despite_completion_order() {
    let (in_flight, peak) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let t = counting_topology(in_flight, peak.clone()).compile();
    let batch: Vec<_> = (0..10)
        .map(|i| src("in", Some("k"), Some(&i.to_string())))
        .collect();
    let results = block_on(t.process_batch(batch));
    let got: Vec<_> = results.iter().map(|r| values(r)[0].1.clone()).collect();
    let want: Vec<_> = (0..10).map(|i| format!("done-{i}")).collect();
    assert_eq!(got, want);
    assert!(peak.load(Ordering::SeqCst) <= 3);
}

#[test]
fn map_async_errors_and_record_variant() {
    let mut b = StreamsBuilder::new("g");
    b.error_policy(ErrorPolicy::Reject);
    strings(&b, "in")
        .map_async(1, |v: String| async move {
            if v == "down" {
                Err("service unavailable")
            } else {
                Ok(v.len())
            }
        })
        .map_record_async(1, |r: Record<String, usize>| async move {
            let n = r.value;
            Ok::<_, BoxError>(r.with_value(format!("len={n}")))
        })
        .to("out", Serdes::string(), Serdes::string());
    let t = b.build().unwrap().compile();
    assert_eq!(
        values(&run(&t, src("in", Some("k"), Some("abc"))))[0].1,
        "len=3"
    );
    let r = run(&t, src("in", Some("k"), Some("down")));
    assert_eq!(r.outcome.error().unwrap().message, "service unavailable");
}

#[test]
fn process_future_is_send_and_static() {
    fn assert_send_static<T: Send + 'static>(_: &T) {}
    let b = StreamsBuilder::new("g");
    strings(&b, "in").to("out", Serdes::string(), Serdes::string());
    let t = b.build().unwrap().compile();
    let fut = t.process(src("in", Some("k"), Some("v")));
    assert_send_static(&fut);
    drop(t);
    assert_eq!(block_on(fut).outcome, Outcome::Accept);
}

// ------------------------------------------------------ build refusals

fn messages(e: &BuildError) -> Vec<String> {
    e.errors.iter().map(|e| e.to_string()).collect()
}

#[test]
fn refuses_no_source_and_no_sink() {
    let e = build_err(StreamsBuilder::new("g"));
    assert_eq!(e.errors, [TopologyError::NoSource]);
    assert_eq!(
        messages(&e),
        ["topology has no source: call builder.stream(...)"]
    );

    let b = StreamsBuilder::new("g");
    let _ = strings(&b, "in").map_values(|v| v);
    let e = build_err(b);
    assert_eq!(e.errors, [TopologyError::NoSink]);
    assert!(e.to_string().contains("end a stream with .to(...)"), "{e}");
}

#[test]
fn refuses_dangling_streams_with_what_to_fix() {
    let b = StreamsBuilder::new("g");
    strings(&b, "in").to("out", Serdes::string(), Serdes::string());
    let _lonely = b.stream::<String, String>(["a", "b"], Serdes::string(), Serdes::string());
    let mut br = strings(&b, "orders")
        .split()
        .branch("big", |_, _| true)
        .default_branch("rest");
    br.take("rest")
        .unwrap()
        .to("rest-out", Serdes::string(), Serdes::string());
    let _ = strings(&b, "other").peek(|_, _| {});
    let e = build_err(b);
    assert_eq!(
        messages(&e),
        [
            "stream from source 'source-2' (topics: a, b) never reaches a sink: add .to(...) or .foreach(...)",
            "branch 'big' of split 'split-4' has no downstream: add .to(...) or an operator to it (or leave it out of the split)",
            "operator 'peek-9' has no downstream, so its records would be dropped: add .to(...) or .foreach(...) after it",
        ]
    );
}

#[test]
fn refuses_bad_splits() {
    let b = StreamsBuilder::new("g");
    strings(&b, "in").to("out", Serdes::string(), Serdes::string());
    let br = strings(&b, "x")
        .split()
        .named("s1")
        .branch("dup", |_, _| true)
        .default_branch("dup");
    for s in br.into_map().into_values() {
        s.to("y", Serdes::string(), Serdes::string());
    }
    let _unfinished = strings(&b, "z")
        .split()
        .named("s2")
        .branch("a", |_, _| true);
    let mut br = strings(&b, "w").split().named("s3").default_branch("only");
    br.take("only")
        .unwrap()
        .to("v", Serdes::string(), Serdes::string());
    let e = build_err(b);
    let m = messages(&e);
    assert!(
        m.contains(
            &"duplicate branch name 'dup' in split 's1': give each branch its own name".to_string()
        ),
        "{m:?}"
    );
    assert!(m.contains(&"split 's2' is not finished: end it with .default_branch(name) or .no_default_branch()".to_string()), "{m:?}");
    assert!(
        m.contains(
            &"split 's3' has no branches: add .branch(name, predicate) before ending it"
                .to_string()
        ),
        "{m:?}"
    );
}

#[test]
fn refuses_topic_subscribed_twice_and_bad_names() {
    let mut b = StreamsBuilder::new("");
    b.error_policy(ErrorPolicy::dead_letter("in"));
    strings(&b, "in").to("out", Serdes::string(), Serdes::string());
    strings(&b, "in")
        .named("again")
        .to("bad topic", Serdes::string(), Serdes::string())
        .named("again");
    let e = build_err(b);
    let m = messages(&e);
    for want in [
        "the share group name is empty: pass it to StreamsBuilder::new(\"my-group\")",
        "duplicate node name 'again': give each operator a unique name with .named(...)",
        "topic 'in' is subscribed twice (source-0 and again): consume it once and use .split() or a cloned stream to process it in several ways",
        "invalid topic name 'bad topic' (sink 'again'): use 1 to 249 characters of [a-zA-Z0-9._-], not '.' or '..'",
        "dead-letter topic 'in' is also a source topic: dead-lettered records would be processed again; use a separate topic",
    ] {
        assert!(m.contains(&want.to_string()), "missing {want:?} in {m:?}");
    }
}

#[test]
fn refuses_serde_mismatch_on_a_topic_written_and_read() {
    let b = StreamsBuilder::new("g");
    strings(&b, "in")
        .map_values(|v| vec![v])
        .to("mid", Serdes::string(), Serdes::json());
    b.stream::<String, Vec<String>>("mid", Serdes::string(), Serdes::msgpack())
        .to("out", Serdes::string(), Serdes::json());
    let e = build_err(b);
    assert_eq!(
        messages(&e),
        [
            "serde mismatch on topic 'mid': sink 'sink-2' writes the value as json but source 'source-3' reads it as msgpack; use the same serde on both"
        ]
    );
    // Same formats: accepted.
    let b = StreamsBuilder::new("g");
    strings(&b, "in").to("mid", Serdes::string(), Serdes::string());
    b.stream::<Option<String>, String>("mid", Serdes::optional(Serdes::string()), Serdes::string())
        .to("out", Serdes::optional(Serdes::string()), Serdes::string());
    b.build().unwrap();
}

#[test]
fn refuses_zero_concurrency_and_foreign_merge() {
    let b = StreamsBuilder::new("g");
    let other = StreamsBuilder::new("h");
    strings(&b, "in")
        .map_async(0, |v: String| async move { Ok::<_, BoxError>(v) })
        .merge(strings(&other, "x"))
        .to("out", Serdes::string(), Serdes::string());
    let e = build_err(b);
    assert_eq!(
        messages(&e),
        [
            "async operator 'map-async-1' has max_in_flight 0: allow at least 1 call in flight",
            "'merge-2' merges a stream of another StreamsBuilder: build each topology from one builder",
        ]
    );
}

// -------------------------------------------------------------- describe

#[test]
fn describe_prints_the_dag() {
    let b = StreamsBuilder::new("orders-app");
    let orders = b.stream::<String, Order>("orders", Serdes::string(), Serdes::json());
    let mut br = orders
        .filter(|_, o| o.amount > 0)
        .split()
        .branch("big", |_, o| o.amount >= 1000)
        .default_branch("small");
    br.take("big")
        .unwrap()
        .to("big-orders", Serdes::string(), Serdes::json())
        .on_error(ErrorPolicy::dead_letter("orders-dlq"));
    br.take("small")
        .unwrap()
        .map_async(4, |o: Order| async move { Ok::<_, BoxError>(o) })
        .to_dynamic(Serdes::string(), Serdes::msgpack(), |_| {
            SinkRecord::topic("small")
        });
    let topo = b.build().unwrap();
    assert_eq!(topo.output_topics(), ["big-orders", "orders-dlq"]);
    let want = "\
Topology (share group: orders-app, error policy: fail)
  Source: source-0 (topics: [orders], key: string, value: json)
    --> filter-1
  Processor: filter-1 (filter)
    --> split-2
    <-- source-0
  Split: split-2 (branches: [big], default: small)
    --> split-2-big
    --> split-2-small
    <-- filter-1
  Branch: split-2-big (branch: big)
    --> sink-5
    <-- split-2
  Branch: split-2-small (branch: small)
    --> map-async-6
    <-- split-2
  Sink: sink-5 (topic: big-orders, key: string, value: json) [on error: dead-letter to orders-dlq]
    <-- split-2-big
  Processor: map-async-6 (map-async, max in flight: 4)
    --> sink-7
    <-- split-2-small
  Sink: sink-7 (topic: (chosen per record), key: string, value: msgpack)
    <-- map-async-6
";
    assert_eq!(topo.describe().to_string(), want);
}

#[test]
fn headers_keep_order_and_duplicates() {
    let mut h = Headers::new();
    h.add("a", Some(Bytes::from_static(b"1")));
    h.add("b", None);
    h.add("a", Some(Bytes::from_static(b"2")));
    assert_eq!(h.len(), 3);
    assert_eq!(h.last_str("a"), Some("2"));
    assert_eq!(h.last("b"), Some(None), "a header with a null value");
    assert_eq!(h.last("c"), None);
    assert_eq!(h.all("a").count(), 2);
    assert_eq!(h.remove("a"), 2);
    assert_eq!(h.iter().map(|x| x.key.as_str()).collect::<Vec<_>>(), ["b"]);
}
