//! One segment: a `.log` file of whole batches plus a sparse `.index`.
//!
//! Files are named by the segment's base offset, 20 digits:
//! `00000000000000000000.log` and `00000000000000000000.index`.
//!
//! The index gets an entry every `index_interval_bytes` of log: before a
//! batch is appended, if that many bytes went in since the last entry, an
//! entry for the batch is added. Each entry is 20 bytes:
//!
//! ```text
//! offset i64 | position u32 | maxTimestampBefore i64
//! ```
//!
//! `offset` is the batch's base offset and `position` its byte position;
//! `maxTimestampBefore` is the largest batch max timestamp in the segment
//! before `position`. That last column makes the index a time index too:
//! every batch before an entry whose `maxTimestampBefore` is below a target
//! timestamp has all its timestamps below the target, so a timestamp lookup
//! starts scanning at the last such entry.
//!
//! The in-memory copy of the index is authoritative while running; the file
//! is appended to as entries are made and rebuilt by [`Segment::recover`].

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use bytes::Bytes;

use super::store::Store;
use sharestream_protocol::records::RecordBatchView;
use sharestream_protocol::records::batch::{BATCH_HEADER_SIZE, BATCH_LOG_OVERHEAD};

/// Size of one index entry on disk.
pub(crate) const INDEX_ENTRY_SIZE: usize = 20;

/// Timestamp of an empty segment.
const NO_TIMESTAMP: i64 = -1;

/// One sparse index entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct IndexEntry {
    pub(crate) offset: i64,
    pub(crate) position: u32,
    pub(crate) max_timestamp_before: i64,
}

impl IndexEntry {
    fn encode(&self) -> [u8; INDEX_ENTRY_SIZE] {
        let mut b = [0u8; INDEX_ENTRY_SIZE];
        b[0..8].copy_from_slice(&self.offset.to_be_bytes());
        b[8..12].copy_from_slice(&self.position.to_be_bytes());
        b[12..20].copy_from_slice(&self.max_timestamp_before.to_be_bytes());
        b
    }

    fn decode(b: &[u8]) -> Self {
        IndexEntry {
            offset: i64::from_be_bytes(b[0..8].try_into().expect("8 bytes")),
            position: u32::from_be_bytes(b[8..12].try_into().expect("4 bytes")),
            max_timestamp_before: i64::from_be_bytes(b[12..20].try_into().expect("8 bytes")),
        }
    }
}

/// Header fields needed to walk a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BatchHeader {
    pub(crate) base_offset: i64,
    pub(crate) last_offset: i64,
    /// Whole batch size in bytes.
    pub(crate) size: u64,
    pub(crate) max_timestamp: i64,
}

/// Reads the header fields from the first [`BATCH_HEADER_SIZE`] bytes of
/// `b`; `None` when they cannot be a magic v2 batch header.
pub(crate) fn parse_header(b: &[u8]) -> Option<BatchHeader> {
    if b.len() < BATCH_HEADER_SIZE {
        return None;
    }
    let base_offset = i64::from_be_bytes(b[0..8].try_into().ok()?);
    let batch_length = i32::from_be_bytes(b[8..12].try_into().ok()?);
    let magic = b[16];
    let last_offset_delta = i32::from_be_bytes(b[23..27].try_into().ok()?);
    let max_timestamp = i64::from_be_bytes(b[35..43].try_into().ok()?);
    if magic != 2
        || batch_length < (BATCH_HEADER_SIZE - BATCH_LOG_OVERHEAD) as i32
        || last_offset_delta < 0
        || base_offset < 0
    {
        return None;
    }
    Some(BatchHeader {
        base_offset,
        last_offset: base_offset + last_offset_delta as i64,
        size: BATCH_LOG_OVERHEAD as u64 + batch_length as u64,
        max_timestamp,
    })
}

/// Suffix of the files a cleaning writes beside a segment before they
/// replace it (`<base>.log.cleaned.tmp`, `<base>.index.cleaned.tmp`);
/// opening a log deletes any left over (every `.tmp` file goes).
pub(crate) const CLEANED_SUFFIX: &str = ".cleaned.tmp";

fn cleaned_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(CLEANED_SUFFIX);
    path.with_file_name(name)
}

/// File name of a segment's log.
pub(crate) fn log_file_name(base_offset: i64) -> String {
    format!("{base_offset:020}.log")
}

/// File name of a segment's index.
pub(crate) fn index_file_name(base_offset: i64) -> String {
    format!("{base_offset:020}.index")
}

/// A log segment. See the module docs.
#[derive(Debug)]
pub(crate) struct Segment {
    pub(crate) base_offset: i64,
    log: Store,
    /// None in memory mode (the in-memory entries suffice).
    index: Option<Store>,
    paths: Option<(PathBuf, PathBuf)>,
    entries: Vec<IndexEntry>,
    /// Offset after the last batch (the base offset when empty).
    pub(crate) next_offset: i64,
    /// Largest batch max timestamp (-1 when empty).
    pub(crate) max_timestamp: i64,
    bytes_since_index: u64,
    index_interval: u64,
}

impl Segment {
    /// A new empty segment (files created, or truncated if left over).
    pub(crate) fn create(
        dir: Option<&Path>,
        base_offset: i64,
        index_interval: u64,
    ) -> io::Result<Self> {
        let (log, index, paths) = match dir {
            Some(dir) => {
                let lp = dir.join(log_file_name(base_offset));
                let ip = dir.join(index_file_name(base_offset));
                let mut log = Store::open_file(&lp)?;
                let mut index = Store::open_file(&ip)?;
                log.truncate(0)?;
                index.truncate(0)?;
                (log, Some(index), Some((lp, ip)))
            }
            None => (Store::memory(), None, None),
        };
        Ok(Segment {
            base_offset,
            log,
            index,
            paths,
            entries: Vec::new(),
            next_offset: base_offset,
            max_timestamp: NO_TIMESTAMP,
            bytes_since_index: 0,
            index_interval: index_interval.max(1),
        })
    }

    /// Opens an existing segment without verifying CRCs: loads the index
    /// and walks the batch headers after its last entry. Returns whether
    /// the segment must go through [`Self::recover`] (index missing or
    /// inconsistent, or a header in the tail that does not parse).
    pub(crate) fn open(
        dir: &Path,
        base_offset: i64,
        index_interval: u64,
    ) -> io::Result<(Self, bool)> {
        let lp = dir.join(log_file_name(base_offset));
        let ip = dir.join(index_file_name(base_offset));
        let index_existed = ip.exists();
        let log = Store::open_file(&lp)?;
        let index = Store::open_file(&ip)?;
        let mut seg = Segment {
            base_offset,
            log,
            index: Some(index),
            paths: Some((lp, ip)),
            entries: Vec::new(),
            next_offset: base_offset,
            max_timestamp: NO_TIMESTAMP,
            bytes_since_index: 0,
            index_interval: index_interval.max(1),
        };
        let healthy =
            (index_existed || seg.log.len() == 0) && seg.load_index()? && seg.scan_tail()?;
        Ok((seg, !healthy))
    }

    fn load_index(&mut self) -> io::Result<bool> {
        let index = self.index.as_ref().expect("file segment has an index");
        let len = index.len() as usize;
        if !len.is_multiple_of(INDEX_ENTRY_SIZE) {
            return Ok(false);
        }
        let raw = index.read_vec(0, len)?;
        let log_len = self.log.len();
        let mut entries: Vec<IndexEntry> = Vec::with_capacity(len / INDEX_ENTRY_SIZE);
        for chunk in raw.chunks_exact(INDEX_ENTRY_SIZE) {
            let e = IndexEntry::decode(chunk);
            let ordered = match entries.last() {
                Some(prev) => {
                    e.offset > prev.offset
                        && e.position > prev.position
                        && e.max_timestamp_before >= prev.max_timestamp_before
                }
                None => e.offset >= self.base_offset,
            };
            if !ordered || e.position as u64 >= log_len {
                return Ok(false);
            }
            entries.push(e);
        }
        self.entries = entries;
        Ok(true)
    }

    /// Walks the headers after the last index entry to learn the next
    /// offset and max timestamp.
    fn scan_tail(&mut self) -> io::Result<bool> {
        let (mut pos, mut max_ts) = match self.entries.last() {
            Some(e) => (e.position as u64, e.max_timestamp_before),
            None => (0, NO_TIMESTAMP),
        };
        let start = pos;
        let size = self.log.len();
        let mut next = self.base_offset;
        let mut first = true;
        while pos < size {
            let Some(h) = self.read_header(pos)? else {
                return Ok(false);
            };
            if pos + h.size > size || h.base_offset < next {
                return Ok(false);
            }
            if first {
                if self
                    .entries
                    .last()
                    .is_some_and(|e| e.offset != h.base_offset)
                {
                    return Ok(false);
                }
                first = false;
            }
            max_ts = max_ts.max(h.max_timestamp);
            next = h.last_offset + 1;
            pos += h.size;
        }
        self.next_offset = next;
        self.max_timestamp = max_ts;
        self.bytes_since_index = size - start;
        Ok(true)
    }

    /// Size of the log in bytes.
    pub(crate) fn size(&self) -> u64 {
        self.log.len()
    }

    /// Appends batches already laid out in `buf` (whole batches, offsets
    /// assigned), described in order by `headers`.
    pub(crate) fn append(&mut self, buf: Vec<u8>, headers: &[BatchHeader]) -> io::Result<()> {
        let start = self.log.len();
        let mut new_entries = Vec::new();
        let mut since = self.bytes_since_index;
        let mut max_ts = self.max_timestamp;
        let mut pos = start;
        for h in headers {
            if since >= self.index_interval {
                new_entries.push(IndexEntry {
                    offset: h.base_offset,
                    position: pos as u32,
                    max_timestamp_before: max_ts,
                });
                since = 0;
            }
            since += h.size;
            max_ts = max_ts.max(h.max_timestamp);
            pos += h.size;
        }
        if let Err(e) = self.log.append_owned(buf) {
            let _ = self.log.truncate(start);
            return Err(e);
        }
        if let Some(index) = &mut self.index
            && !new_entries.is_empty()
        {
            let mut raw = Vec::with_capacity(new_entries.len() * INDEX_ENTRY_SIZE);
            for e in &new_entries {
                raw.extend_from_slice(&e.encode());
            }
            // The index is rebuilt on recovery, so a failed write here only
            // costs lookup speed until then; the entries stay in memory.
            if let Err(err) = index.append(&raw) {
                tracing::warn!(error = %err, "could not append to the offset index");
            }
        }
        self.entries.extend(new_entries);
        self.bytes_since_index = since;
        self.max_timestamp = max_ts;
        if let Some(last) = headers.last() {
            self.next_offset = last.last_offset + 1;
        }
        Ok(())
    }

    /// The header of the batch at `pos`, or `None` if there is no whole
    /// header there or it does not parse.
    pub(crate) fn read_header(&self, pos: u64) -> io::Result<Option<BatchHeader>> {
        if pos + BATCH_HEADER_SIZE as u64 > self.log.len() {
            return Ok(None);
        }
        let mut b = [0u8; BATCH_HEADER_SIZE];
        self.log.read_exact_at(pos, &mut b)?;
        Ok(parse_header(&b))
    }

    /// Reads `len` bytes at `pos`.
    pub(crate) fn read_bytes(&self, pos: u64, len: u64) -> io::Result<Bytes> {
        self.log.read_bytes(pos, len as usize)
    }

    /// Position of the batch containing `offset` or, in a gap, the first
    /// batch after it; `None` if this segment ends before `offset`.
    pub(crate) fn find_position(&self, offset: i64) -> io::Result<Option<u64>> {
        if offset >= self.next_offset {
            return Ok(None);
        }
        let i = self.entries.partition_point(|e| e.offset <= offset);
        let mut pos = if i == 0 {
            0
        } else {
            self.entries[i - 1].position as u64
        };
        let size = self.log.len();
        while pos < size {
            let Some(h) = self.read_header(pos)? else {
                return Ok(None);
            };
            if h.last_offset >= offset {
                return Ok(Some(pos));
            }
            pos += h.size;
        }
        Ok(None)
    }

    /// Reads whole batches from `pos`: as many as fit in `budget` bytes,
    /// but at least one when `at_least_one`, stopping before the first batch
    /// whose last offset is at or above `upper`. Returns the bytes and
    /// whether the read reached the end of the segment.
    pub(crate) fn read_batches(
        &self,
        pos: u64,
        budget: u64,
        upper: i64,
        at_least_one: bool,
    ) -> io::Result<(Bytes, bool)> {
        let size = self.log.len();
        let Some(first) = self.read_header(pos)? else {
            return Ok((Bytes::new(), true));
        };
        if first.last_offset >= upper {
            return Ok((Bytes::new(), false));
        }
        if first.size > budget {
            if !at_least_one || pos + first.size > size {
                return Ok((Bytes::new(), false));
            }
            let bytes = self.read_bytes(pos, first.size)?;
            return Ok((bytes, pos + first.size == size));
        }
        if self.log.is_memory() {
            // Walk the headers first, then take the range in one read that
            // shares the stored bytes when they are one chunk.
            let mut end = pos;
            while let Some(h) = self.read_header(end)? {
                if end + h.size > size || end + h.size - pos > budget || h.last_offset >= upper {
                    break;
                }
                end += h.size;
            }
            let bytes = self.log.read_bytes(pos, (end - pos) as usize)?;
            return Ok((bytes, end == size));
        }
        let chunk = budget.min(size - pos) as usize;
        let mut buf = self.log.read_vec(pos, chunk)?;
        let mut off = 0usize;
        while off + BATCH_HEADER_SIZE <= buf.len() {
            let Some(h) = parse_header(&buf[off..]) else {
                break;
            };
            if off as u64 + h.size > buf.len() as u64 || h.last_offset >= upper {
                break;
            }
            off += h.size as usize;
        }
        buf.truncate(off);
        Ok((Bytes::from(buf), pos + off as u64 == size))
    }

    /// Position and header of the first batch at or after position `from`
    /// whose max timestamp is at least `timestamp` (the index skips the
    /// batches that cannot qualify).
    pub(crate) fn next_batch_with_timestamp(
        &self,
        timestamp: i64,
        from: u64,
    ) -> io::Result<Option<(u64, BatchHeader)>> {
        if self.max_timestamp < timestamp {
            return Ok(None);
        }
        let i = self
            .entries
            .partition_point(|e| e.max_timestamp_before < timestamp);
        let indexed = if i == 0 {
            0
        } else {
            self.entries[i - 1].position as u64
        };
        let mut pos = from.max(indexed);
        let size = self.log.len();
        while pos < size {
            let Some(h) = self.read_header(pos)? else {
                break;
            };
            if h.max_timestamp >= timestamp {
                return Ok(Some((pos, h)));
            }
            pos += h.size;
        }
        Ok(None)
    }

    /// Scans the whole segment, verifying every batch (framing, magic, CRC,
    /// offsets increasing), cuts the log at the first bad batch and rebuilds
    /// the index. Returns the number of bytes cut.
    pub(crate) fn recover(&mut self) -> io::Result<u64> {
        let size = self.log.len();
        let mut pos = 0u64;
        let mut next = self.base_offset;
        self.entries.clear();
        self.bytes_since_index = 0;
        self.max_timestamp = NO_TIMESTAMP;
        while pos < size {
            if size - pos < BATCH_LOG_OVERHEAD as u64 {
                break;
            }
            let mut lb = [0u8; BATCH_LOG_OVERHEAD];
            self.log.read_exact_at(pos, &mut lb)?;
            let batch_length = i32::from_be_bytes(lb[8..12].try_into().expect("4 bytes"));
            if batch_length < (BATCH_HEADER_SIZE - BATCH_LOG_OVERHEAD) as i32 {
                break;
            }
            let total = BATCH_LOG_OVERHEAD as u64 + batch_length as u64;
            if pos + total > size {
                break;
            }
            let mut bytes = self.read_bytes(pos, total)?;
            let view = match RecordBatchView::split_from(&mut bytes) {
                Ok(Some(v)) => v,
                _ => break,
            };
            if view.verify_crc().is_err() || view.base_offset() < next {
                break;
            }
            if self.bytes_since_index >= self.index_interval {
                self.entries.push(IndexEntry {
                    offset: view.base_offset(),
                    position: pos as u32,
                    max_timestamp_before: self.max_timestamp,
                });
                self.bytes_since_index = 0;
            }
            self.bytes_since_index += total;
            self.max_timestamp = self.max_timestamp.max(view.max_timestamp());
            next = view.last_offset() + 1;
            pos += total;
        }
        self.next_offset = next;
        let cut = size - pos;
        if cut > 0 {
            self.log.truncate(pos)?;
        }
        if let Some(index) = &mut self.index {
            index.truncate(0)?;
            let mut raw = Vec::with_capacity(self.entries.len() * INDEX_ENTRY_SIZE);
            for e in &self.entries {
                raw.extend_from_slice(&e.encode());
            }
            index.append(&raw)?;
        }
        Ok(cut)
    }

    /// Replaces the segment's batches by `buf` (whole batches described in
    /// order by `headers`, offsets within the segment's range), keeping
    /// its base offset: what the log cleaner does with a cleaned segment.
    ///
    /// On disk the new log and index are written beside the old ones
    /// (`CLEANED_SUFFIX`) and fsynced, then swapped in: the old index is
    /// removed, the new log renamed over the old (atomic), the new index
    /// renamed into place. Whenever the process dies, the directory holds
    /// the old log or the new one, each with its own index or none (a
    /// missing index is rebuilt at open), and leftovers are deleted at
    /// open; the caller syncs the directory. Failpoints
    /// `log.clean.before_swap` (new files written, nothing swapped) and
    /// `log.clean.mid_swap` (new log in place, its index not yet) fail
    /// the call there, leaving the files as a kill would.
    pub(crate) fn replace(&mut self, buf: Vec<u8>, headers: &[BatchHeader]) -> io::Result<()> {
        let mut new = match &self.paths {
            None => Segment::create(None, self.base_offset, self.index_interval)?,
            Some((lp, ip)) => {
                let (tl, ti) = (cleaned_path(lp), cleaned_path(ip));
                let mut log = Store::open_file(&tl)?;
                let mut index = Store::open_file(&ti)?;
                log.truncate(0)?;
                index.truncate(0)?;
                Segment {
                    base_offset: self.base_offset,
                    log,
                    index: Some(index),
                    paths: Some((tl, ti)),
                    entries: Vec::new(),
                    next_offset: self.base_offset,
                    max_timestamp: NO_TIMESTAMP,
                    bytes_since_index: 0,
                    index_interval: self.index_interval,
                }
            }
        };
        if !headers.is_empty() {
            new.append(buf, headers)?;
        }
        if let (Some((lp, ip)), Some((tl, ti))) = (self.paths.clone(), new.paths.clone()) {
            new.flush()?;
            if sharestream_common::failpoints::hit("log.clean.before_swap") {
                return Err(io::Error::other(
                    "failpoint log.clean.before_swap: cleaned segment written, not swapped in",
                ));
            }
            match fs::remove_file(&ip) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
            fs::rename(&tl, &lp)?;
            if sharestream_common::failpoints::hit("log.clean.mid_swap") {
                return Err(io::Error::other(
                    "failpoint log.clean.mid_swap: cleaned log swapped in, its index not",
                ));
            }
            fs::rename(&ti, &ip)?;
            new.paths = Some((lp, ip));
        }
        *self = new;
        Ok(())
    }

    /// Second handles on the log and index files, so that another thread
    /// can make them durable (empty in memory).
    pub(crate) fn file_handles(&self) -> io::Result<Vec<std::fs::File>> {
        let mut files = Vec::new();
        for store in std::iter::once(&self.log).chain(self.index.as_ref()) {
            if let Some(f) = store.file_handle() {
                files.push(f?);
            }
        }
        Ok(files)
    }

    /// Makes the log and index durable.
    pub(crate) fn flush(&self) -> io::Result<()> {
        self.log.sync()?;
        if let Some(index) = &self.index {
            index.sync()?;
        }
        Ok(())
    }

    /// Deletes the segment's files.
    pub(crate) fn delete(self) -> io::Result<()> {
        if let Some((lp, ip)) = &self.paths {
            fs::remove_file(lp)?;
            match fs::remove_file(ip) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        Ok(())
    }

    /// Number of index entries (for tests and metrics).
    pub(crate) fn index_entries(&self) -> usize {
        self.entries.len()
    }
}
