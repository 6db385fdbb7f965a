//! Small durable state for the rest of the broker: topic metadata, the
//! transaction coordinator, share-partition state.
//!
//! [`StateLog`] is an append-only file of framed records:
//!
//! ```text
//! length u32 BE | crc32c(payload) u32 BE | payload (length bytes)
//! ```
//!
//! Opening it replays every whole, CRC-valid record and cuts the file at the
//! first frame that is not (a torn tail left by a crash mid-append, or
//! garbage), so later appends continue after the last good record. Records
//! after a damaged frame are dropped with it: a frame boundary cannot be
//! trusted past a bad length.
//!
//! [`StateLog::rewrite`] compacts the log to a snapshot of records
//! atomically with [`write_atomic`]: write a temporary file, fsync it,
//! rename it over the log, fsync the directory. A crash leaves either the
//! old log or the new one, never a mix.
//!
//! In `--memory` mode [`StateLog::in_memory`] keeps the records in a vector
//! with the same API.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use bytes::Bytes;

use super::store::sync_dir;

/// Bytes of framing before each record's payload.
pub const STATE_RECORD_OVERHEAD: usize = 8;

/// Largest accepted record payload (a length above it is treated as a torn
/// or corrupt frame).
pub const MAX_STATE_RECORD_SIZE: usize = 64 * 1024 * 1024;

/// Writes `bytes` to `path` atomically: a temporary sibling file is written
/// and fsynced, renamed over `path`, and the directory is fsynced.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let tmp = temp_path(path);
    {
        let mut f = File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    fs::rename(&tmp, path)?;
    sync_dir(parent_dir(path))
}

fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

fn temp_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".tmp");
    path.with_file_name(name)
}

/// Frames one record.
fn frame(out: &mut Vec<u8>, payload: &[u8]) {
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    out.extend_from_slice(&crc32c::crc32c(payload).to_be_bytes());
    out.extend_from_slice(payload);
}

/// Parses frames from `buf`; returns the records and the length of the
/// valid prefix.
fn parse_frames(buf: &[u8]) -> (Vec<Bytes>, usize) {
    let mut out = Vec::new();
    let mut pos = 0usize;
    while buf.len() - pos >= STATE_RECORD_OVERHEAD {
        let len = u32::from_be_bytes(buf[pos..pos + 4].try_into().expect("4 bytes")) as usize;
        let crc = u32::from_be_bytes(buf[pos + 4..pos + 8].try_into().expect("4 bytes"));
        if len > MAX_STATE_RECORD_SIZE || buf.len() - pos - STATE_RECORD_OVERHEAD < len {
            break;
        }
        let payload = &buf[pos + STATE_RECORD_OVERHEAD..pos + STATE_RECORD_OVERHEAD + len];
        if crc32c::crc32c(payload) != crc {
            break;
        }
        out.push(Bytes::copy_from_slice(payload));
        pos += STATE_RECORD_OVERHEAD + len;
    }
    (out, pos)
}

#[derive(Debug)]
enum Inner {
    File { path: PathBuf, file: File, len: u64 },
    Memory(Vec<Bytes>),
}

/// An append-only log of CRC-framed state records. See the module docs.
#[derive(Debug)]
pub struct StateLog {
    inner: Inner,
    sync_on_append: bool,
}

/// What [`StateLog::open`] found.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StateLogRecovery {
    /// Bytes cut off the end (a torn or corrupt tail); 0 after a clean run.
    pub truncated_bytes: u64,
}

impl StateLog {
    /// Opens (creating if needed) the log at `path`, replays it and cuts a
    /// torn tail. Returns the log, its records in append order, and what
    /// recovery did. Appends are fsynced by default.
    pub fn open(path: impl AsRef<Path>) -> io::Result<(Self, Vec<Bytes>, StateLogRecovery)> {
        let path = path.as_ref().to_path_buf();
        // A temporary file left by a crash during rewrite is never the log.
        let _ = fs::remove_file(temp_path(&path));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)?;
        let buf = fs::read(&path)?;
        let (records, valid) = parse_frames(&buf);
        let mut recovery = StateLogRecovery::default();
        if valid < buf.len() {
            recovery.truncated_bytes = (buf.len() - valid) as u64;
            tracing::warn!(
                path = %path.display(),
                truncated = recovery.truncated_bytes,
                "state log: cutting a torn or corrupt tail"
            );
            file.set_len(valid as u64)?;
            file.sync_all()?;
        }
        sync_dir(parent_dir(&path))?;
        Ok((
            StateLog {
                inner: Inner::File {
                    path,
                    file,
                    len: valid as u64,
                },
                sync_on_append: true,
            },
            records,
            recovery,
        ))
    }

    /// An empty in-memory log (nothing survives the process).
    pub fn in_memory() -> Self {
        StateLog {
            inner: Inner::Memory(Vec::new()),
            sync_on_append: false,
        }
    }

    /// Whether each append is fsynced before returning (default for files:
    /// yes). With `false`, call [`Self::sync`] yourself.
    pub fn set_sync_on_append(&mut self, sync: bool) {
        self.sync_on_append = sync;
    }

    /// Appends one record.
    pub fn append(&mut self, record: &[u8]) -> io::Result<()> {
        self.append_all(std::iter::once(record))
    }

    /// Appends several records with one write (and one fsync).
    pub fn append_all<'a>(
        &mut self,
        records: impl IntoIterator<Item = &'a [u8]>,
    ) -> io::Result<()> {
        match &mut self.inner {
            Inner::Memory(v) => {
                v.extend(records.into_iter().map(Bytes::copy_from_slice));
                Ok(())
            }
            Inner::File { file, len, .. } => {
                let mut buf = Vec::new();
                for r in records {
                    if r.len() > MAX_STATE_RECORD_SIZE {
                        return Err(io::Error::new(
                            io::ErrorKind::InvalidInput,
                            format!("state record of {} bytes is too large", r.len()),
                        ));
                    }
                    frame(&mut buf, r);
                }
                if let Err(e) = file.write_all_at(&buf, *len) {
                    // Drop whatever part landed so the next append starts clean.
                    let _ = file.set_len(*len);
                    return Err(e);
                }
                *len += buf.len() as u64;
                if self.sync_on_append {
                    file.sync_data()?;
                }
                Ok(())
            }
        }
    }

    /// fsyncs appended records.
    pub fn sync(&self) -> io::Result<()> {
        match &self.inner {
            Inner::File { file, .. } => file.sync_data(),
            Inner::Memory(_) => Ok(()),
        }
    }

    /// Reads every record back, stopping at a torn tail.
    pub fn replay(&self) -> io::Result<Vec<Bytes>> {
        match &self.inner {
            Inner::Memory(v) => Ok(v.clone()),
            Inner::File { file, len, .. } => {
                let mut buf = vec![0u8; *len as usize];
                file.read_exact_at(&mut buf, 0)?;
                Ok(parse_frames(&buf).0)
            }
        }
    }

    /// Replaces the whole log with `records` atomically (compaction to a
    /// snapshot).
    pub fn rewrite<R: AsRef<[u8]>>(&mut self, records: &[R]) -> io::Result<()> {
        match &mut self.inner {
            Inner::Memory(v) => {
                *v = records
                    .iter()
                    .map(|r| Bytes::copy_from_slice(r.as_ref()))
                    .collect();
                Ok(())
            }
            Inner::File { path, file, len } => {
                let mut buf = Vec::new();
                for r in records {
                    frame(&mut buf, r.as_ref());
                }
                write_atomic(path, &buf)?;
                *file = OpenOptions::new().read(true).write(true).open(&*path)?;
                *len = buf.len() as u64;
                Ok(())
            }
        }
    }

    /// Size of the log in bytes (framing included; for deciding when to
    /// rewrite).
    pub fn size_bytes(&self) -> u64 {
        match &self.inner {
            Inner::File { len, .. } => *len,
            Inner::Memory(v) => v
                .iter()
                .map(|r| (r.len() + STATE_RECORD_OVERHEAD) as u64)
                .sum(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_log_round_trip_and_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("topics.state");
        let (mut log, records, rec) = StateLog::open(&path).unwrap();
        assert!(records.is_empty());
        assert_eq!(rec.truncated_bytes, 0);
        log.append(b"one").unwrap();
        log.append_all([&b"two"[..], &b""[..], &b"three"[..]])
            .unwrap();
        assert_eq!(log.replay().unwrap(), vec!["one", "two", "", "three"]);
        drop(log);
        let (_, records, rec) = StateLog::open(&path).unwrap();
        assert_eq!(records, vec!["one", "two", "", "three"]);
        assert_eq!(rec.truncated_bytes, 0);
    }

    #[test]
    fn state_log_torn_tail_is_cut_and_appends_continue() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("txn.state");
        let (mut log, _, _) = StateLog::open(&path).unwrap();
        log.append(b"first").unwrap();
        log.append(b"second").unwrap();
        drop(log);
        // A crash mid-append: a frame header promising more than was written.
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(&100u32.to_be_bytes()).unwrap();
        f.write_all(&[1, 2, 3, 4, 5, 6]).unwrap();
        drop(f);
        let (mut log, records, rec) = StateLog::open(&path).unwrap();
        assert_eq!(records, vec!["first", "second"]);
        assert_eq!(rec.truncated_bytes, 10);
        log.append(b"third").unwrap();
        drop(log);
        let (_, records, _) = StateLog::open(&path).unwrap();
        assert_eq!(records, vec!["first", "second", "third"]);
    }

    #[test]
    fn state_log_corrupt_crc_stops_replay() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("share.state");
        let (mut log, _, _) = StateLog::open(&path).unwrap();
        log.append(b"good").unwrap();
        log.append(b"flipped").unwrap();
        drop(log);
        let mut bytes = fs::read(&path).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 0x40;
        fs::write(&path, &bytes).unwrap();
        let (_, records, rec) = StateLog::open(&path).unwrap();
        assert_eq!(records, vec!["good"]);
        assert_eq!(rec.truncated_bytes, (STATE_RECORD_OVERHEAD + 7) as u64);
    }

    #[test]
    fn state_log_rewrite_is_atomic_and_replaces_content() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("meta.state");
        let (mut log, _, _) = StateLog::open(&path).unwrap();
        for i in 0..10u8 {
            log.append(&[i]).unwrap();
        }
        log.rewrite(&[b"snapshot".to_vec()]).unwrap();
        log.append(b"after").unwrap();
        assert_eq!(log.replay().unwrap(), vec!["snapshot", "after"]);
        assert!(!temp_path(&path).exists());
        // A stale temporary file from a crash mid-rewrite is ignored.
        fs::write(temp_path(&path), b"half-written").unwrap();
        drop(log);
        let (_, records, _) = StateLog::open(&path).unwrap();
        assert_eq!(records, vec!["snapshot", "after"]);
        assert!(!temp_path(&path).exists());
    }

    #[test]
    fn state_log_in_memory() {
        let mut log = StateLog::in_memory();
        log.append(b"a").unwrap();
        log.rewrite(&[b"b", b"c"]).unwrap();
        log.append(b"d").unwrap();
        assert_eq!(log.replay().unwrap(), vec!["b", "c", "d"]);
        assert_eq!(log.size_bytes(), 3 * (STATE_RECORD_OVERHEAD as u64 + 1));
    }

    #[test]
    fn write_atomic_replaces_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.json");
        write_atomic(&path, b"v1").unwrap();
        write_atomic(&path, b"v2").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"v2");
        assert!(!temp_path(&path).exists());
    }
}
