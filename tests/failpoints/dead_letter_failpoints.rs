//! KIP-1191 across a killed broker (docs/DESIGN.md D24): an ARCHIVING
//! record whose dead-letter record was not written yet is written after
//! the restart, exactly once; one whose record was written but not yet
//! made ARCHIVED is written again (at least once, never lost). Failpoints
//! are process-wide: each test holds [`SERIAL`].
#![cfg(feature = "failpoints")]

use crate::common;

use common::broker::{Started, TestBroker};
use common::dlq::*;
use common::kip::*;
use sharestream::broker::BrokerHandle;
use sharestream::broker::share::RecordState;
use sharestream::failpoints;
use uuid::Uuid;

use crate::SERIAL;

const REJECT: i8 = 3;
const ACCEPT: i8 = 1;
const DLQ: &str = "dlq.in";

struct Disarm;
impl Drop for Disarm {
    fn drop(&mut self) {
        failpoints::disarm("dead_letters.hold");
        failpoints::disarm("dead_letters.after_append");
    }
}

/// A broker on disk in `dir` with INPUT (3 records), the dead-letter topic,
/// GROUP pointed at it (copy on), "m1" holding the records, and offset 1
/// rejected (0 and 2 accepted).
async fn rejected_on_disk(dir: &std::path::Path) -> (BrokerHandle, Uuid) {
    let Started {
        b, mut c, topics, ..
    } = TestBroker::on_disk(dir)
        .topic(INPUT, 1)
        .earliest(GROUP)
        .start()
        .await;
    create_dlq_topic(&mut c, DLQ, 1, Some(true)).await;
    let (code, msg) = set_group_configs(
        &mut c,
        GROUP,
        &[
            ("errors.deadletterqueue.topic.name", DLQ),
            ("errors.deadletterqueue.copy.record.enable", "true"),
        ],
    )
    .await;
    assert_eq!(code, 0, "{msg:?}");
    produce_plain(&mut c, INPUT, 0, 3).await;
    join(&mut c, "m1").await;
    let topic = topics[0];
    assert_eq!(acquire(&mut c, "m1", topic, &[0], 0).await, vec![(0, 0, 2)]);
    let r = share_acknowledge(
        &mut c,
        "m1",
        1,
        topic,
        &[(0, 0, ACCEPT), (1, 1, REJECT), (2, 2, ACCEPT)],
    )
    .await;
    assert_eq!(r.responses[0].partitions[0].error_code, 0);
    (b, topic)
}

/// Restarts on `dir` (the failpoints disarmed) and waits for the dead
/// letter of offset 1 to be ARCHIVED; returns the dead-letter records.
async fn restart_and_finish(dir: &std::path::Path, topic: Uuid, expect: usize) -> Vec<String> {
    failpoints::disarm("dead_letters.hold");
    failpoints::disarm("dead_letters.after_append");
    let Started { b, .. } = TestBroker::on_disk(dir).topic(INPUT, 1).start().await;
    let got = wait_for_records(&b, DLQ, expect).await;
    wait_until("ARCHIVED after the restart", || {
        b.core()
            .shares()
            .partition_offsets(GROUP, topic, 0)
            .map(|o| o.0)
            == Some(3)
    })
    .await;
    // Nothing more comes once it is ARCHIVED.
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert_eq!(records_of(&b, DLQ).len(), expect);
    b.shutdown().await;
    got.iter()
        .map(|(_, r)| header(r, "__dlq.errors.offset").unwrap())
        .collect()
}

#[tokio::test]
async fn an_archiving_record_at_a_kill_is_dead_lettered_once_after_the_restart() {
    let _serial = SERIAL.lock().await;
    let _disarm = Disarm;
    let dir = tempfile::tempdir().unwrap();
    failpoints::arm("dead_letters.hold", None);
    let (b, topic) = rejected_on_disk(dir.path()).await;
    // Held: ARCHIVING (persisted before the acknowledgement was answered),
    // no dead letter yet, the start offset waits at it.
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    assert_eq!(info(&b, topic, 0, 1).state, RecordState::Archiving);
    assert_eq!(
        b.core().shares().partition_offsets(GROUP, topic, 0),
        Some((1, 3))
    );
    assert!(records_of(&b, DLQ).is_empty());
    let metrics = sharestream::broker::metrics_http::render(b.core());
    let gauge = format!(
        "sharestream_share_partition_archiving_records{{group=\"{GROUP}\",topic_id=\"{topic}\",partition=\"0\"}} 1"
    );
    assert!(metrics.contains(&gauge), "{gauge} in {metrics}");
    b.kill().await;
    assert_eq!(restart_and_finish(dir.path(), topic, 1).await, ["1"]);
}

#[tokio::test]
async fn a_dead_letter_written_but_not_archived_at_a_kill_is_written_again() {
    let _serial = SERIAL.lock().await;
    let _disarm = Disarm;
    let dir = tempfile::tempdir().unwrap();
    failpoints::arm("dead_letters.after_append", None);
    let (b, topic) = rejected_on_disk(dir.path()).await;
    // Appended (fsynced), still ARCHIVING: the crash window of D24.
    let got = wait_for_records(&b, DLQ, 1).await;
    assert_eq!(
        header(&got[0].1, "__dlq.errors.offset").as_deref(),
        Some("1")
    );
    assert_eq!(info(&b, topic, 0, 1).state, RecordState::Archiving);
    b.kill().await;
    // At least once: the restart writes it again, and then archives it.
    assert_eq!(restart_and_finish(dir.path(), topic, 2).await, ["1", "1"]);
}
