//! Byte stores behind segments: a file addressed by explicit positions, or a
//! list of immutable chunks for in-memory mode. Nothing here knows about
//! batches.
//!
//! The in-memory store keeps each append as its own [`Bytes`] chunk rather
//! than one growing vector: growing a vector copies the whole log at every
//! doubling (and briefly holds two copies of it), and chunks let a read that
//! falls inside one append be handed out without copying.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

use bytes::Bytes;

/// An append-only byte store with positional reads.
#[derive(Debug)]
pub(crate) enum Store {
    /// A file; `len` is the logical length (writes go to `len`).
    File { file: File, len: u64 },
    /// In-memory bytes.
    Memory(MemoryStore),
}

/// In-memory bytes as a list of appended chunks.
#[derive(Debug, Default)]
pub(crate) struct MemoryStore {
    chunks: Vec<Bytes>,
    /// Store position of each chunk's first byte.
    starts: Vec<u64>,
    len: u64,
}

impl MemoryStore {
    fn push(&mut self, chunk: Bytes) {
        if chunk.is_empty() {
            return;
        }
        self.starts.push(self.len);
        self.len += chunk.len() as u64;
        self.chunks.push(chunk);
    }

    /// Index of the chunk holding position `pos` (< len).
    fn chunk_at(&self, pos: u64) -> usize {
        self.starts.partition_point(|&s| s <= pos) - 1
    }

    fn copy_out(&self, pos: u64, buf: &mut [u8]) {
        let mut i = self.chunk_at(pos);
        let mut at = (pos - self.starts[i]) as usize;
        let mut done = 0;
        while done < buf.len() {
            let c = &self.chunks[i];
            let n = (c.len() - at).min(buf.len() - done);
            buf[done..done + n].copy_from_slice(&c[at..at + n]);
            done += n;
            i += 1;
            at = 0;
        }
    }

    fn truncate(&mut self, new_len: u64) {
        if new_len >= self.len {
            return;
        }
        let keep = self.starts.partition_point(|&s| s < new_len);
        self.chunks.truncate(keep);
        self.starts.truncate(keep);
        if let (Some(last), Some(&start)) = (self.chunks.last_mut(), self.starts.last()) {
            last.truncate((new_len - start) as usize);
        }
        self.len = new_len;
    }
}

impl Store {
    /// Opens (creating if needed) a file store; the length is the file's.
    pub(crate) fn open_file(path: &Path) -> io::Result<Self> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        let len = file.metadata()?.len();
        Ok(Store::File { file, len })
    }

    /// An empty in-memory store.
    pub(crate) fn memory() -> Self {
        Store::Memory(MemoryStore::default())
    }

    /// Logical length in bytes.
    pub(crate) fn len(&self) -> u64 {
        match self {
            Store::File { len, .. } => *len,
            Store::Memory(m) => m.len,
        }
    }

    /// Appends `data` at the end. On a failed file write the logical length
    /// is left unchanged, so the next write overwrites the partial bytes.
    pub(crate) fn append(&mut self, data: &[u8]) -> io::Result<()> {
        match self {
            Store::File { file, len } => {
                file.write_all_at(data, *len)?;
                *len += data.len() as u64;
                Ok(())
            }
            Store::Memory(m) => {
                m.push(Bytes::copy_from_slice(data));
                Ok(())
            }
        }
    }

    /// Like [`Self::append`], taking ownership so the in-memory store keeps
    /// the buffer without copying it.
    pub(crate) fn append_owned(&mut self, data: Vec<u8>) -> io::Result<()> {
        match self {
            Store::Memory(m) => {
                m.push(Bytes::from(data));
                Ok(())
            }
            Store::File { .. } => self.append(&data),
        }
    }

    /// Fills `buf` from `pos`; fails if the store is too short.
    pub(crate) fn read_exact_at(&self, pos: u64, buf: &mut [u8]) -> io::Result<()> {
        if pos + buf.len() as u64 > self.len() {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "read past the end of the store",
            ));
        }
        match self {
            Store::File { file, .. } => file.read_exact_at(buf, pos),
            Store::Memory(m) => {
                if !buf.is_empty() {
                    m.copy_out(pos, buf);
                }
                Ok(())
            }
        }
    }

    /// Whether this is the in-memory store (where reads are cheap and
    /// positioned header reads cost no system call).
    pub(crate) fn is_memory(&self) -> bool {
        matches!(self, Store::Memory(_))
    }

    /// Reads `n` bytes from `pos`; in memory, a range inside one appended
    /// chunk is shared rather than copied.
    pub(crate) fn read_bytes(&self, pos: u64, n: usize) -> io::Result<Bytes> {
        if let Store::Memory(m) = self
            && n > 0
            && pos + n as u64 <= m.len
        {
            let i = m.chunk_at(pos);
            let at = (pos - m.starts[i]) as usize;
            if at + n <= m.chunks[i].len() {
                return Ok(m.chunks[i].slice(at..at + n));
            }
        }
        Ok(Bytes::from(self.read_vec(pos, n)?))
    }

    /// Reads `n` bytes from `pos` into a fresh vector.
    pub(crate) fn read_vec(&self, pos: u64, n: usize) -> io::Result<Vec<u8>> {
        let mut buf = vec![0u8; n];
        self.read_exact_at(pos, &mut buf)?;
        Ok(buf)
    }

    /// Cuts the store to `new_len` bytes.
    pub(crate) fn truncate(&mut self, new_len: u64) -> io::Result<()> {
        match self {
            Store::File { file, len } => {
                file.set_len(new_len)?;
                *len = new_len;
                Ok(())
            }
            Store::Memory(m) => {
                m.truncate(new_len);
                Ok(())
            }
        }
    }

    /// A second handle on the file, for a flush on another thread; `None`
    /// in memory.
    pub(crate) fn file_handle(&self) -> Option<io::Result<File>> {
        match self {
            Store::File { file, .. } => Some(file.try_clone()),
            Store::Memory(_) => None,
        }
    }

    /// Makes written data durable (`fdatasync`); a no-op in memory.
    pub(crate) fn sync(&self) -> io::Result<()> {
        match self {
            Store::File { file, .. } => file.sync_data(),
            Store::Memory(_) => Ok(()),
        }
    }
}

/// fsyncs a directory so that creations, renames and deletions in it are
/// durable. Failpoint `log.sync_dir`: the fsync fails.
pub(crate) fn sync_dir(dir: &Path) -> io::Result<()> {
    if sharestream_common::failpoints::hit("log.sync_dir") {
        return Err(io::Error::other(format!(
            "fsync of directory {} failed (failpoint log.sync_dir)",
            dir.display()
        )));
    }
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_store_reads_across_chunks_and_truncates_inside_one() {
        let mut s = Store::memory();
        s.append(b"hello").unwrap();
        s.append_owned(b" wide".to_vec()).unwrap();
        s.append_owned(Vec::new()).unwrap();
        s.append(b" world").unwrap();
        assert_eq!(s.len(), 16);
        assert_eq!(s.read_vec(3, 10).unwrap(), b"lo wide wo");
        // Inside one chunk: shared, and still the right bytes.
        assert_eq!(&s.read_bytes(6, 4).unwrap()[..], b"wide");
        assert_eq!(&s.read_bytes(0, 16).unwrap()[..], b"hello wide world");
        assert!(s.read_vec(10, 7).is_err());
        s.truncate(8).unwrap();
        assert_eq!(s.len(), 8);
        assert_eq!(s.read_vec(0, 8).unwrap(), b"hello wi");
        s.append(b"!").unwrap();
        assert_eq!(s.read_vec(5, 4).unwrap(), b" wi!");
        s.truncate(0).unwrap();
        assert_eq!(s.len(), 0);
        assert_eq!(s.read_bytes(0, 0).unwrap().len(), 0);
    }
}
