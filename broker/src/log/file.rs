//! The narrow file-system seam the bucket log is written against.
//!
//! Production uses [`GlommioStore`] (glommio `BufferedFile`: writes into the page cache, up to
//! `log.inline-write.size` a `pwrite` on the core and larger ones through io_uring, plus
//! `fdatasync`). Tests use [`super::sim::SimStore`], an in-memory double that tears tails,
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

use std::cell::Cell;
use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::rc::Rc;
use std::sync::Arc;
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

/// The most zeros [`GlommioFile`] writes with one call of a prewrite: 1 MiB.
const PREWRITE_CHUNK: u64 = 1 << 20;

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
    /// Bytes `[start, end)` are written: asks the kernel to start writing them to disk and to
    /// drop the range's pages that are clean by now (written back after an earlier call) from
    /// the page cache. Never waits for either. Returns false, doing nothing, while this file's
    /// previous request is still being carried out; the caller asks again later with the range
    /// grown. A failure is not reported: the pages stay cached and `sync` still writes them.
    fn write_back(&self, start: u64, end: u64) -> bool;
    /// Asks the file system to allocate the blocks of `[start, end)`, past the bytes written,
    /// without changing the file's size (`fallocate` with `FALLOC_FL_KEEP_SIZE`): appends into
    /// allocated blocks skip the file system's per-page allocation work. Never waits for it.
    /// Returns false, doing nothing, while this file's previous request is still being carried
    /// out. A failure is not reported (appends then allocate as usual); a file system without
    /// the call is not asked again. [`SegmentFile::truncate`] to the file's size releases the
    /// blocks past it.
    fn preallocate(&self, start: u64, end: u64) -> bool;
    /// Writes zeros over `[start, end)`, past the bytes appended, and `fdatasync`s them through
    /// a descriptor of its own: appends later written into that range overwrite blocks that are
    /// allocated, written and inside the file's size, so an fsync after them writes no file
    /// system metadata (ext4: about half the time and CPU of an fsync after an append that
    /// grows the file; docs/benchmarks.md). The file's size grows to `end`. The caller never
    /// writes into the range before this returns. A failure (a full disk) may leave part of
    /// the zeros written; it never hides a write error from [`SegmentFile::sync`], which has
    /// its own descriptor.
    async fn prewrite(&self, start: u64, end: u64) -> io::Result<()>;
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
#[derive(Debug, Clone, Copy)]
pub struct GlommioStore {
    /// `log.inline-write.size`: writes of at most this many bytes are a plain `pwrite` on the
    /// calling core ([`SegmentFile::write_at`]); 0 sends every write through io_uring.
    inline_write_max: usize,
}

/// The default `log.inline-write.size`: 1 MiB.
pub const DEFAULT_INLINE_WRITE_SIZE: u64 = 1 << 20;

impl Default for GlommioStore {
    fn default() -> Self {
        GlommioStore::new(DEFAULT_INLINE_WRITE_SIZE)
    }
}

impl GlommioStore {
    /// A store whose files write up to `inline_write_max` bytes inline (`log.inline-write.size`).
    pub fn new(inline_write_max: u64) -> Self {
        GlommioStore {
            inline_write_max: usize::try_from(inline_write_max).unwrap_or(usize::MAX),
        }
    }
}

/// A glommio buffered file; `!Send`, lives on the core that opened it.
#[derive(Debug)]
pub struct GlommioFile {
    file: BufferedFile,
    /// A second descriptor of the same file for `posix_fadvise` and `fallocate`, which run on
    /// the core's blocking thread: that thread holds its own reference, so the descriptor stays
    /// this file's until the call returns even when the segment is closed meanwhile. None when
    /// it could not be opened: [`SegmentFile::write_back`] and [`SegmentFile::preallocate`]
    /// then do nothing.
    helper: Option<Arc<std::fs::File>>,
    /// A write-back request of this file is running on the blocking thread.
    advising: Rc<Cell<bool>>,
    /// A preallocation request of this file is running on the blocking thread.
    preallocating: Rc<Cell<bool>>,
    /// The file system refused `fallocate` for this file (`EOPNOTSUPP`): not asked again.
    no_preallocate: Rc<Cell<bool>>,
    /// [`GlommioStore`]'s `inline_write_max`.
    inline_write_max: usize,
}

impl GlommioFile {
    fn new(file: BufferedFile, path: &Path, inline_write_max: usize) -> Self {
        let helper = std::fs::OpenOptions::new().read(true).write(true).open(path);
        GlommioFile {
            file,
            helper: helper.ok().map(Arc::new),
            advising: Rc::new(Cell::new(false)),
            preallocating: Rc::new(Cell::new(false)),
            no_preallocate: Rc::new(Cell::new(false)),
            inline_write_max,
        }
    }

    /// Runs `job` with the helper descriptor on the core's blocking thread unless `busy` (the
    /// previous such job of this file is still running: returns false). `done` gets the job's
    /// result back on the core. True when there is no helper descriptor (nothing to do).
    fn on_blocking_thread<T: Send + 'static>(
        &self,
        busy: &Rc<Cell<bool>>,
        job: impl FnOnce(&std::fs::File) -> T + Send + 'static,
        done: impl FnOnce(T) + 'static,
    ) -> bool {
        let Some(helper) = self.helper.clone() else {
            return true;
        };
        if busy.get() {
            return false;
        }
        busy.set(true);
        let busy = busy.clone();
        glommio::spawn_local(async move {
            let result = glommio::executor().spawn_blocking(move || job(&helper)).await;
            busy.set(false);
            done(result);
        })
        .detach();
        true
    }
}

fn to_io(err: glommio::GlommioError<()>) -> io::Error {
    io::Error::from(err)
}

impl SegmentFile for GlommioFile {
    /// At most `log.inline-write.size` bytes: a plain `pwrite` through the helper descriptor,
    /// on the core. ext4 refuses buffered writes that must not block (`RWF_NOWAIT`:
    /// `EOPNOTSUPP`), so io_uring hands every buffered segment write to a worker thread, pinned
    /// to the core's CPU, and the core sleeps and wakes for its completion; the copy into the
    /// page cache costs less than that round trip (docs/benchmarks.md, "Segment writes on the
    /// core"). Larger writes, and every write of a file without the helper, go through io_uring.
    async fn write_at(&self, buf: Vec<u8>, pos: u64) -> io::Result<usize> {
        if buf.len() <= self.inline_write_max {
            if let Some(helper) = &self.helper {
                use std::os::unix::fs::FileExt;
                return helper.write_at(&buf, pos);
            }
        }
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

    /// `posix_fadvise(POSIX_FADV_DONTNEED)` over the range, which on Linux starts the writeback
    /// of its dirty pages and drops its clean ones. It can block for as long as the disk's queue
    /// is full (185 ms was seen when it ran on the core), so it runs on glommio's blocking thread
    /// and the core only notes that it is running.
    fn write_back(&self, start: u64, end: u64) -> bool {
        let (Ok(offset), Ok(len)) = (i64::try_from(start), i64::try_from(end.saturating_sub(start))) else {
            return true;
        };
        self.on_blocking_thread(
            &self.advising,
            move |file| {
                let advised = nix::fcntl::posix_fadvise(
                    file.as_raw_fd(),
                    offset,
                    len,
                    nix::fcntl::PosixFadviseAdvice::POSIX_FADV_DONTNEED,
                );
                if let Err(errno) = advised {
                    tracing::debug!(%errno, offset, len, "segment write-back request failed");
                }
            },
            |()| {},
        )
    }

    /// `pwrite` of zeros and `fdatasync` with the helper descriptor on the blocking thread: a
    /// failed fsync there is reported to that descriptor and still to the one group commit
    /// syncs (Linux reports a writeback error to every open file description once).
    async fn prewrite(&self, start: u64, end: u64) -> io::Result<()> {
        let Some(helper) = self.helper.clone() else {
            return Err(io::Error::other("no second descriptor of the segment file"));
        };
        glommio::executor()
            .spawn_blocking(move || {
                use std::os::unix::fs::FileExt;
                // At most 1 MiB of zeros in memory, whatever the range.
                let zeros = vec![0u8; end.saturating_sub(start).min(PREWRITE_CHUNK) as usize];
                let mut pos = start;
                while pos < end {
                    let len = (end - pos).min(zeros.len() as u64) as usize;
                    helper.write_all_at(&zeros[..len], pos)?;
                    pos += len as u64;
                }
                helper.sync_data()
            })
            .await
    }

    /// `fallocate(FALLOC_FL_KEEP_SIZE)` on the blocking thread: it takes the inode's lock, which
    /// an append being written by an io_uring worker may hold.
    fn preallocate(&self, start: u64, end: u64) -> bool {
        if self.no_preallocate.get() {
            return true;
        }
        let (Ok(offset), Ok(len)) = (i64::try_from(start), i64::try_from(end.saturating_sub(start))) else {
            return true;
        };
        if len == 0 {
            return true;
        }
        let no_preallocate = self.no_preallocate.clone();
        self.on_blocking_thread(
            &self.preallocating,
            move |file| {
                nix::fcntl::fallocate(
                    file.as_raw_fd(),
                    nix::fcntl::FallocateFlags::FALLOC_FL_KEEP_SIZE,
                    offset,
                    len,
                )
            },
            move |result| match result {
                Ok(()) => {}
                Err(nix::errno::Errno::EOPNOTSUPP) => no_preallocate.set(true),
                Err(errno) => tracing::debug!(%errno, offset, len, "segment preallocation failed"),
            },
        )
    }
}

impl SegmentStore for GlommioStore {
    type File = GlommioFile;

    // Directory listing, creation and renaming are rare (open, roll) and cheap metadata calls,
    // so they use std::fs on the core; the byte path is io_uring. Removing a file is not cheap
    // (its blocks are freed in the call): `remove` runs on the blocking thread.
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
        Ok(GlommioFile::new(file, path, self.inline_write_max))
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
        Ok(GlommioFile::new(file, path, self.inline_write_max))
    }

    /// On the core's blocking thread (glommio's `spawn_blocking`, as prewrites, write-back
    /// requests and preallocation run): unlinking a segment frees its blocks in the call, about
    /// 0.2 s for 256 MiB on ext4, which on the core would stall every connection it serves.
    async fn remove(&self, path: &Path) -> io::Result<()> {
        let path = path.to_path_buf();
        glommio::executor()
            .spawn_blocking(move || std::fs::remove_file(path))
            .await
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
