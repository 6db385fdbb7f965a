//! The broker's one atomic file replace, `write_atomic`, reports a failed
//! fsync of the directory (the rename is durable only after it) instead
//! of ignoring it.

use sharestream::broker::log::write_atomic;
use sharestream::failpoints;

use crate::SERIAL;

#[tokio::test]
async fn a_failed_directory_fsync_is_reported() {
    let _serial = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("metadata.json");
    write_atomic(&path, b"v1").unwrap();
    failpoints::arm("log.sync_dir", Some(1));
    let e = write_atomic(&path, b"v2").expect_err("the directory fsync failed");
    failpoints::disarm("log.sync_dir");
    assert!(e.to_string().contains("log.sync_dir"), "{e}");
    // Disarmed, it succeeds again.
    write_atomic(&path, b"v3").unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"v3");
}
