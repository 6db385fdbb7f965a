//! Byte stores behind segments: a file addressed by explicit positions, or a
//! growable buffer for in-memory mode. Nothing here knows about batches.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

/// An append-only byte store with positional reads.
#[derive(Debug)]
pub(crate) enum Store {
    /// A file; `len` is the logical length (writes go to `len`).
    File { file: File, len: u64 },
    /// In-memory bytes.
    Memory(Vec<u8>),
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
        Store::Memory(Vec::new())
    }

    /// Logical length in bytes.
    pub(crate) fn len(&self) -> u64 {
        match self {
            Store::File { len, .. } => *len,
            Store::Memory(v) => v.len() as u64,
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
            Store::Memory(v) => {
                v.extend_from_slice(data);
                Ok(())
            }
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
            Store::Memory(v) => {
                let p = pos as usize;
                buf.copy_from_slice(&v[p..p + buf.len()]);
                Ok(())
            }
        }
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
            Store::Memory(v) => {
                v.truncate(new_len as usize);
                Ok(())
            }
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
/// durable.
pub(crate) fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}
