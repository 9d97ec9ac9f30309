//! The narrow file-system seam the bucket log is written against.
//!
//! Production uses [`GlommioStore`] (glommio `BufferedFile`: io_uring writes into the page cache
//! plus `fdatasync`). Tests use [`super::sim::SimStore`], an in-memory double that tears tails,
//! fails fsyncs and shortens writes on demand. Everything the log does to a disk goes through
//! these two traits, so the simulation covers every path.
//!
//! Why buffered and not DMA: appends are variable-sized Arrow IPC messages; O_DIRECT would need
//! 4 KiB-aligned writes (rewriting the tail block each time) and DMA buffers count against the
//! 8 MiB memlock limit. Buffered writes return once the bytes are in the page cache, which is
//! exactly the acks=1 promise; `fdatasync` gives the acks=-1 promise.

// The traits are used single-threaded on one glommio core (futures are `!Send` by design), so
// the auto-trait bounds that `async fn` in a public trait cannot name are not wanted anyway.
#![allow(async_fn_in_trait)]

use std::io;
use std::path::Path;
use std::time::SystemTime;

use glommio::io::{BufferedFile, Directory, OpenOptions};

use super::error::LogError;

/// `store.sync_dir(dir)`, a failure as the [`LogError`] that names the directory.
pub async fn sync_directory<S: SegmentStore>(store: &S, dir: &Path) -> Result<(), LogError> {
    store
        .sync_dir(dir)
        .await
        .map_err(|e| LogError::io(dir, "fsync directory", e))
}

/// One segment file, opened for reading and writing.
pub trait SegmentFile {
    /// Writes `buf` at `pos`; may write fewer bytes than given (like `pwrite`).
    async fn write_at(&self, buf: Vec<u8>, pos: u64) -> io::Result<usize>;
    /// Reads up to `len` bytes at `pos`; fewer only at the end of the file.
    async fn read_at(&self, pos: u64, len: usize) -> io::Result<Vec<u8>>;
    /// `fdatasync`: every write completed before the call is durable when it returns.
    async fn sync(&self) -> io::Result<()>;
    async fn truncate(&self, len: u64) -> io::Result<()>;
    async fn size(&self) -> io::Result<u64>;
}

/// The directory operations the log needs: list, create, open, remove, sync.
pub trait SegmentStore {
    type File: SegmentFile + 'static;
    async fn create_dir_all(&self, dir: &Path) -> io::Result<()>;
    /// File names (not paths) in `dir`, in no particular order.
    async fn list(&self, dir: &Path) -> io::Result<Vec<String>>;
    /// Opens an existing file for reading and writing.
    async fn open(&self, path: &Path) -> io::Result<Self::File>;
    /// Creates a new, empty file (an existing one is truncated).
    async fn create(&self, path: &Path) -> io::Result<Self::File>;
    async fn remove(&self, path: &Path) -> io::Result<()>;
    /// Renames `from` to `to` (same directory; `to` does not exist). Durable after `sync_dir`.
    async fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Makes directory entries (created or removed files) durable.
    async fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    /// Last modification time, used as the append time of a recovered segment's newest row.
    async fn modified(&self, path: &Path) -> io::Result<SystemTime>;
    /// The clock append times and retention are measured with (simulated in tests, so file
    /// times and append times agree).
    fn now(&self) -> SystemTime;
}

/// The production store: glommio buffered files on the calling core's io_uring.
#[derive(Debug, Default, Clone, Copy)]
pub struct GlommioStore;

/// A glommio buffered file; `!Send`, lives on the core that opened it.
#[derive(Debug)]
pub struct GlommioFile {
    file: BufferedFile,
}

fn to_io(err: glommio::GlommioError<()>) -> io::Error {
    io::Error::from(err)
}

impl SegmentFile for GlommioFile {
    async fn write_at(&self, buf: Vec<u8>, pos: u64) -> io::Result<usize> {
        self.file.write_at(buf, pos).await.map_err(to_io)
    }

    async fn read_at(&self, pos: u64, len: usize) -> io::Result<Vec<u8>> {
        let read = self.file.read_at(pos, len).await.map_err(to_io)?;
        Ok(read.to_vec())
    }

    async fn sync(&self) -> io::Result<()> {
        self.file.fdatasync().await.map_err(to_io)
    }

    async fn truncate(&self, len: u64) -> io::Result<()> {
        self.file.truncate(len).await.map_err(to_io)
    }

    async fn size(&self) -> io::Result<u64> {
        self.file.file_size().await.map_err(to_io)
    }
}

impl SegmentStore for GlommioStore {
    type File = GlommioFile;

    // Directory listing, creation, renaming and removal are rare (open, roll, retention, drop) and cheap
    // metadata calls, so they use std::fs; the byte path is io_uring.
    async fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        std::fs::create_dir_all(dir)
    }

    async fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(dir)? {
            let entry = entry?;
            names.push(entry.file_name().to_string_lossy().into_owned());
        }
        Ok(names)
    }

    async fn open(&self, path: &Path) -> io::Result<GlommioFile> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .buffered_open(path)
            .await
            .map_err(to_io)?;
        Ok(GlommioFile { file })
    }

    async fn create(&self, path: &Path) -> io::Result<GlommioFile> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .buffered_open(path)
            .await
            .map_err(to_io)?;
        Ok(GlommioFile { file })
    }

    async fn remove(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }

    async fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }

    async fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let directory = Directory::open(dir).await.map_err(to_io)?;
        let synced = directory.sync().await.map_err(to_io);
        let closed = directory.close().await.map_err(to_io);
        synced.and(closed)
    }

    async fn modified(&self, path: &Path) -> io::Result<SystemTime> {
        std::fs::metadata(path)?.modified()
    }

    fn now(&self) -> SystemTime {
        SystemTime::now()
    }
}
