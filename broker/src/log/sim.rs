//! An in-memory, fault-injecting [`SegmentStore`] for deterministic simulation tests.
//!
//! Each file keeps two images: `volatile` (what reads see, the page cache) and `durable` (what
//! survives a crash, updated by a successful `sync`). [`SimStore::crash`] replaces every file by
//! its durable image plus a random part of the unsynced tail, which is how a torn tail looks
//! after power loss on an append-only file. Faults (failed writes, short writes, failed fsyncs)
//! are drawn from a seeded PRNG, so a seed replays a run exactly.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::{Duration, SystemTime};

use super::file::{SegmentFile, SegmentStore};

/// Returns Pending once (waking itself), then Ready.
struct YieldOnce(bool);

impl std::future::Future for YieldOnce {
    type Output = ();

    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        if self.0 {
            return std::task::Poll::Ready(());
        }
        self.0 = true;
        cx.waker().wake_by_ref();
        std::task::Poll::Pending
    }
}

/// Waits while its file's fsyncs are held ([`SimStore::hold_syncs`]).
struct HeldSync<'a> {
    disk: &'a Rc<RefCell<SimDisk>>,
    path: &'a Path,
    /// Counted in `waiting`.
    counted: bool,
}

impl std::future::Future for HeldSync<'_> {
    type Output = ();

    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        let this = &mut *self;
        let mut disk = this.disk.borrow_mut();
        if disk.held.contains(this.path) {
            if !this.counted {
                disk.waiting += 1;
                this.counted = true;
            }
            disk.wakers.push(cx.waker().clone());
            return std::task::Poll::Pending;
        }
        if this.counted {
            disk.waiting -= 1;
            this.counted = false;
        }
        std::task::Poll::Ready(())
    }
}

impl Drop for HeldSync<'_> {
    fn drop(&mut self) {
        if self.counted {
            self.disk.borrow_mut().waiting -= 1;
        }
    }
}

/// splitmix64: tiny, seedable, good enough to pick faults and tear points.
#[derive(Debug, Clone)]
pub struct SimRng(u64);

impl SimRng {
    pub fn new(seed: u64) -> Self {
        SimRng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[low, high]` (inclusive); `low` when the range is empty.
    pub fn range(&mut self, low: u64, high: u64) -> u64 {
        if high <= low {
            return low;
        }
        low + self.next_u64() % (high - low + 1)
    }

    /// True with probability `per_million / 1_000_000`.
    pub fn chance(&mut self, per_million: u32) -> bool {
        self.next_u64() % 1_000_000 < u64::from(per_million)
    }
}

/// Fault probabilities, in parts per million per call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SimFaults {
    pub fail_write: u32,
    pub short_write: u32,
    pub fail_sync: u32,
    /// A disk that fills up: the bytes writes may still store, counted down by each write. A
    /// write larger than what is left stores what fits (a short write); one with nothing left
    /// fails with ENOSPC, "No space left on device", as a full file system answers.
    pub space_left: Option<u64>,
}

#[derive(Debug, Clone)]
struct SimFileData {
    volatile: Vec<u8>,
    durable: Vec<u8>,
    /// The directory entry survives a crash (created before the last `sync_dir`).
    entry_durable: bool,
    /// Renamed from this path since the last `sync_dir`: a crash may bring the old name back.
    renamed_from: Option<PathBuf>,
    modified: SystemTime,
    /// Bytes of the file that have blocks: its length, or more after a
    /// [`SegmentFile::preallocate`]; a truncate releases the blocks past its length.
    allocated: u64,
}

impl SimDisk {
    /// Where the file a handle opened at `path` is now.
    fn current(&self, path: &Path) -> PathBuf {
        let mut path = path.to_path_buf();
        while let Some(next) = self.renamed.get(&path) {
            if self.files.contains_key(&path) {
                break;
            }
            path = next.clone();
        }
        path
    }
}

#[derive(Debug)]
struct SimDisk {
    files: BTreeMap<PathBuf, SimFileData>,
    dirs: BTreeSet<PathBuf>,
    faults: SimFaults,
    rng: SimRng,
    syncs: u64,
    writes: u64,
    clock: SystemTime,
    /// Files whose fsyncs wait until [`SimStore::release_syncs`] (a slow disk, on demand).
    held: BTreeSet<PathBuf>,
    /// Renames done (old path → new path): an open handle follows its file, as an fd does.
    renamed: BTreeMap<PathBuf, PathBuf>,
    /// fsyncs waiting on `held` right now, and their wakers.
    waiting: usize,
    wakers: Vec<std::task::Waker>,
    /// Every accepted [`SegmentFile::write_back`] request: (file as opened, start, end).
    write_backs: Vec<(PathBuf, u64, u64)>,
    /// While set, `write_back` answers "still busy" (false) and records nothing.
    write_back_busy: bool,
    /// Every accepted [`SegmentFile::preallocate`] request: (file as opened, start, end).
    preallocations: Vec<(PathBuf, u64, u64)>,
    /// While set, `preallocate` answers "still busy" (false) and records nothing.
    preallocate_busy: bool,
    /// Every [`SegmentFile::prewrite`] started: (file as opened, start, end).
    prewrites: Vec<(PathBuf, u64, u64)>,
    /// Every directory [`SegmentStore::sync_dir`] was called for, in order.
    dir_syncs: Vec<PathBuf>,
}

/// The shared simulated disk; clones see the same files.
#[derive(Debug, Clone)]
pub struct SimStore {
    disk: Rc<RefCell<SimDisk>>,
}

/// A handle to one simulated file.
#[derive(Debug)]
pub struct SimFile {
    disk: Rc<RefCell<SimDisk>>,
    path: PathBuf,
}

fn not_found(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!("{} does not exist", path.display()),
    )
}

fn injected(what: &str) -> io::Error {
    io::Error::other(format!("injected {what} failure"))
}

impl SimStore {
    pub fn new(seed: u64) -> Self {
        SimStore {
            disk: Rc::new(RefCell::new(SimDisk {
                files: BTreeMap::new(),
                dirs: BTreeSet::new(),
                faults: SimFaults::default(),
                rng: SimRng::new(seed),
                syncs: 0,
                writes: 0,
                clock: SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000),
                held: BTreeSet::new(),
                renamed: BTreeMap::new(),
                waiting: 0,
                wakers: Vec::new(),
                write_backs: Vec::new(),
                write_back_busy: false,
                preallocations: Vec::new(),
                preallocate_busy: false,
                prewrites: Vec::new(),
                dir_syncs: Vec::new(),
            })),
        }
    }

    pub fn set_faults(&self, faults: SimFaults) {
        self.disk.borrow_mut().faults = faults;
    }

    /// The write-back requests accepted so far, in order: (path the file was opened as, start, end).
    pub fn write_backs(&self) -> Vec<(PathBuf, u64, u64)> {
        self.disk.borrow().write_backs.clone()
    }

    /// Makes every file's write-back requests answer "the previous one is still running".
    pub fn set_write_back_busy(&self, busy: bool) {
        self.disk.borrow_mut().write_back_busy = busy;
    }

    /// The preallocation requests accepted so far, in order: (path the file was opened as,
    /// start, end).
    pub fn preallocations(&self) -> Vec<(PathBuf, u64, u64)> {
        self.disk.borrow().preallocations.clone()
    }

    /// The prewrites started so far, in order: (path the file was opened as, start, end).
    pub fn prewrites(&self) -> Vec<(PathBuf, u64, u64)> {
        self.disk.borrow().prewrites.clone()
    }

    /// Makes every file's preallocation requests answer "the previous one is still running".
    pub fn set_preallocate_busy(&self, busy: bool) {
        self.disk.borrow_mut().preallocate_busy = busy;
    }

    /// Bytes of the file now at `path` that have blocks (its length, or more while
    /// preallocated blocks past its end are held); None if there is no such file.
    pub fn allocated(&self, path: &Path) -> Option<u64> {
        self.disk.borrow().files.get(path).map(|f| f.allocated)
    }

    /// File writes (`write_at` calls, failed ones included) so far.
    pub fn write_count(&self) -> u64 {
        self.disk.borrow().writes
    }

    /// File fsyncs that succeeded or failed so far (directory syncs not counted).
    pub fn sync_count(&self) -> u64 {
        self.disk.borrow().syncs
    }

    /// From now on an fsync of `path` waits (after its usual yield) until
    /// [`SimStore::release_syncs`]: a disk whose fsync of that file takes as long as a test
    /// wants, without any timing.
    pub fn hold_syncs(&self, path: &Path) {
        self.disk.borrow_mut().held.insert(path.to_path_buf());
    }

    /// Lets every held fsync go on (and later ones pass).
    pub fn release_syncs(&self) {
        let wakers = {
            let mut disk = self.disk.borrow_mut();
            disk.held.clear();
            std::mem::take(&mut disk.wakers)
        };
        for waker in wakers {
            waker.wake();
        }
    }

    /// Every directory fsync'd so far, in order.
    pub fn dir_syncs(&self) -> Vec<PathBuf> {
        self.disk.borrow().dir_syncs.clone()
    }

    /// fsyncs waiting on [`SimStore::hold_syncs`] right now.
    pub fn waiting_syncs(&self) -> usize {
        self.disk.borrow().waiting
    }

    /// Whether everything written to `path` is durable (its last write was fsync'd).
    pub fn is_synced(&self, path: &Path) -> bool {
        self.disk
            .borrow()
            .files
            .get(path)
            .is_some_and(|f| f.durable == f.volatile)
    }

    /// Moves the simulated clock (file modification times) forward.
    pub fn advance_clock(&self, by: Duration) {
        let mut disk = self.disk.borrow_mut();
        disk.clock += by;
    }

    pub fn now(&self) -> SystemTime {
        self.disk.borrow().clock
    }

    /// Power loss: each file keeps its durable image plus a random prefix of the bytes written
    /// after its last sync; files whose directory entry was never synced may vanish, and a
    /// file renamed since may be back under its old name instead.
    pub fn crash(&self) {
        let _ = self.crash_writing_back(None);
    }

    /// Power loss after a write-back out of order ([`SimStore::crash`] otherwise): of the
    /// bytes written after each file's last sync, each `page`-sized block (at multiples of
    /// `page`) made it to the disk or not, at random; one that did not holds what the last sync
    /// left there (zeros past the synced length), and the file is as long as its synced length or
    /// its last block that made it. Returns how many files lost a block before one that made
    /// it (what only a write-back out of order leaves).
    pub fn crash_out_of_order(&self, page: u64) -> usize {
        self.crash_writing_back(Some(page.max(1) as usize))
    }

    fn crash_writing_back(&self, out_of_order: Option<usize>) -> usize {
        let mut holes = 0;
        let mut disk = self.disk.borrow_mut();
        let disk = &mut *disk;
        let mut vanished = Vec::new();
        let mut reverted = Vec::new();
        for (path, data) in disk.files.iter_mut() {
            if !data.entry_durable && disk.rng.chance(500_000) {
                match data.renamed_from.take() {
                    // Torn like any other file below, then back under its old name.
                    Some(old) if disk.rng.chance(500_000) => reverted.push((path.clone(), old)),
                    _ => {
                        vanished.push(path.clone());
                        continue;
                    }
                }
            }
            let common = data
                .volatile
                .iter()
                .zip(&data.durable)
                .take_while(|(a, b)| a == b)
                .count();
            if let Some(page) = out_of_order {
                let mut disk_image = data.durable.clone();
                let mut start = common;
                let mut lost = false;
                let mut hole = false;
                while start < data.volatile.len() {
                    let end = ((start / page + 1) * page).min(data.volatile.len());
                    if disk.rng.chance(500_000) {
                        if disk_image.len() < end {
                            disk_image.resize(end, 0);
                        }
                        disk_image[start..end].copy_from_slice(&data.volatile[start..end]);
                        hole |= lost;
                    } else {
                        lost = true;
                    }
                    start = end;
                }
                holes += usize::from(hole);
                data.volatile = disk_image.clone();
                data.durable = disk_image;
                continue;
            }
            let keep = disk.rng.range(common as u64, data.volatile.len() as u64) as usize;
            data.volatile.truncate(keep);
            // Past the bytes that made it, the file keeps what its last sync made durable (the
            // zeros of a prewrite), as a real file keeps its synced size and blocks.
            if data.durable.len() > keep {
                data.volatile.extend_from_slice(&data.durable[keep..]);
            }
            data.durable = data.volatile.clone();
        }
        for path in vanished {
            disk.files.remove(&path);
        }
        for (path, old) in reverted {
            if let Some(mut data) = disk.files.remove(&path) {
                data.entry_durable = true;
                disk.files.insert(old, data);
            }
        }
        for data in disk.files.values_mut() {
            data.renamed_from = None;
        }
        holes
    }

    /// The bytes reads would see now.
    pub fn file_bytes(&self, path: &Path) -> Option<Vec<u8>> {
        self.disk.borrow().files.get(path).map(|f| f.volatile.clone())
    }

    /// Replaces a file's content (volatile and durable), e.g. to corrupt or tear it by hand.
    pub fn set_file_bytes(&self, path: &Path, bytes: Vec<u8>) {
        let mut disk = self.disk.borrow_mut();
        let clock = disk.clock;
        let allocated = bytes.len() as u64;
        disk.files.insert(
            path.to_path_buf(),
            SimFileData {
                durable: bytes.clone(),
                volatile: bytes,
                entry_durable: true,
                renamed_from: None,
                modified: clock,
                allocated,
            },
        );
    }

    /// Paths of all files, sorted.
    pub fn paths(&self) -> Vec<PathBuf> {
        self.disk.borrow().files.keys().cloned().collect()
    }
}

impl SegmentFile for SimFile {
    async fn write_at(&self, buf: Vec<u8>, pos: u64) -> io::Result<usize> {
        let mut disk = self.disk.borrow_mut();
        let disk = &mut *disk;
        disk.writes += 1;
        if disk.rng.chance(disk.faults.fail_write) {
            return Err(injected("write"));
        }
        let mut len = buf.len();
        if len > 1 && disk.rng.chance(disk.faults.short_write) {
            len = disk.rng.range(1, len as u64 - 1) as usize;
        }
        if let Some(left) = disk.faults.space_left.as_mut() {
            if *left == 0 && len > 0 {
                return Err(io::Error::from_raw_os_error(nix::errno::Errno::ENOSPC as i32));
            }
            len = len.min(usize::try_from(*left).unwrap_or(usize::MAX));
            *left -= len as u64;
        }
        let clock = disk.clock;
        let path = disk.current(&self.path);
        let file = disk.files.get_mut(&path).ok_or_else(|| not_found(&self.path))?;
        let start = usize::try_from(pos).map_err(|_| io::Error::other("position too large"))?;
        let end = start + len;
        if file.volatile.len() < end {
            file.volatile.resize(end, 0);
        }
        file.volatile[start..end].copy_from_slice(&buf[..len]);
        file.modified = clock;
        file.allocated = file.allocated.max(end as u64);
        Ok(len)
    }

    async fn read_at(&self, pos: u64, len: usize) -> io::Result<Vec<u8>> {
        let disk = self.disk.borrow();
        let path = disk.current(&self.path);
        let file = disk.files.get(&path).ok_or_else(|| not_found(&self.path))?;
        let start = usize::try_from(pos)
            .unwrap_or(usize::MAX)
            .min(file.volatile.len());
        let end = start.saturating_add(len).min(file.volatile.len());
        Ok(file.volatile[start..end].to_vec())
    }

    async fn sync(&self) -> io::Result<()> {
        // A real fsync suspends the caller; yielding once lets other tasks pile up behind it,
        // which is what group commit is about.
        YieldOnce(false).await;
        HeldSync {
            disk: &self.disk,
            path: &self.path,
            counted: false,
        }
        .await;
        let mut disk = self.disk.borrow_mut();
        let disk = &mut *disk;
        disk.syncs += 1;
        if disk.rng.chance(disk.faults.fail_sync) {
            return Err(injected("fsync"));
        }
        let path = disk.current(&self.path);
        let file = disk.files.get_mut(&path).ok_or_else(|| not_found(&self.path))?;
        file.durable = file.volatile.clone();
        Ok(())
    }

    async fn truncate(&self, len: u64) -> io::Result<()> {
        let mut disk = self.disk.borrow_mut();
        let path = disk.current(&self.path);
        let file = disk.files.get_mut(&path).ok_or_else(|| not_found(&self.path))?;
        file.allocated = len;
        let len = usize::try_from(len).map_err(|_| io::Error::other("length too large"))?;
        file.volatile.resize(len, 0);
        Ok(())
    }

    async fn size(&self) -> io::Result<u64> {
        let disk = self.disk.borrow();
        let path = disk.current(&self.path);
        let file = disk.files.get(&path).ok_or_else(|| not_found(&self.path))?;
        Ok(file.volatile.len() as u64)
    }

    fn write_back(&self, start: u64, end: u64) -> bool {
        let mut disk = self.disk.borrow_mut();
        if disk.write_back_busy {
            return false;
        }
        disk.write_backs.push((self.path.clone(), start, end));
        true
    }

    /// Zeros written over the range (overwriting whatever is there, so an append written into
    /// a range being prewritten would show up as lost bytes), then a sync like any other (held
    /// with [`SimStore::hold_syncs`], failed by `fail_sync`). Recorded in
    /// [`SimStore::prewrites`] when it starts.
    async fn prewrite(&self, start: u64, end: u64) -> io::Result<()> {
        {
            let mut disk = self.disk.borrow_mut();
            disk.prewrites.push((self.path.clone(), start, end));
            let path = disk.current(&self.path);
            let file = disk.files.get_mut(&path).ok_or_else(|| not_found(&self.path))?;
            let (start, end) = (start as usize, end as usize);
            if file.volatile.len() < end {
                file.volatile.resize(end, 0);
            }
            file.volatile[start..end].fill(0);
            file.allocated = file.allocated.max(end as u64);
        }
        self.sync().await
    }

    fn preallocate(&self, start: u64, end: u64) -> bool {
        let mut disk = self.disk.borrow_mut();
        if disk.preallocate_busy {
            return false;
        }
        disk.preallocations.push((self.path.clone(), start, end));
        let path = disk.current(&self.path);
        if let Some(file) = disk.files.get_mut(&path) {
            file.allocated = file.allocated.max(end);
        }
        true
    }
}

impl SegmentStore for SimStore {
    type File = SimFile;

    async fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        self.disk.borrow_mut().dirs.insert(dir.to_path_buf());
        Ok(())
    }

    async fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let disk = self.disk.borrow();
        if !disk.dirs.contains(dir) {
            return Err(not_found(dir));
        }
        Ok(disk
            .files
            .keys()
            .filter(|path| path.parent() == Some(dir))
            .filter_map(|path| path.file_name().map(|n| n.to_string_lossy().into_owned()))
            .collect())
    }

    async fn open(&self, path: &Path) -> io::Result<SimFile> {
        if !self.disk.borrow().files.contains_key(path) {
            return Err(not_found(path));
        }
        Ok(SimFile {
            disk: self.disk.clone(),
            path: path.to_path_buf(),
        })
    }

    async fn create(&self, path: &Path) -> io::Result<SimFile> {
        let mut disk = self.disk.borrow_mut();
        let clock = disk.clock;
        disk.files.insert(
            path.to_path_buf(),
            SimFileData {
                volatile: Vec::new(),
                durable: Vec::new(),
                entry_durable: false,
                renamed_from: None,
                modified: clock,
                allocated: 0,
            },
        );
        Ok(SimFile {
            disk: self.disk.clone(),
            path: path.to_path_buf(),
        })
    }

    async fn remove(&self, path: &Path) -> io::Result<()> {
        self.disk
            .borrow_mut()
            .files
            .remove(path)
            .map(|_| ())
            .ok_or_else(|| not_found(path))
    }

    async fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut disk = self.disk.borrow_mut();
        if disk.files.contains_key(to) {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("{} exists", to.display()),
            ));
        }
        let mut data = disk.files.remove(from).ok_or_else(|| not_found(from))?;
        data.entry_durable = false;
        data.renamed_from = Some(from.to_path_buf());
        disk.files.insert(to.to_path_buf(), data);
        disk.renamed.insert(from.to_path_buf(), to.to_path_buf());
        Ok(())
    }

    async fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let mut disk = self.disk.borrow_mut();
        disk.dir_syncs.push(dir.to_path_buf());
        for (path, file) in disk.files.iter_mut() {
            if path.parent() == Some(dir) {
                file.entry_durable = true;
                file.renamed_from = None;
            }
        }
        Ok(())
    }

    async fn modified(&self, path: &Path) -> io::Result<SystemTime> {
        let disk = self.disk.borrow();
        disk.files
            .get(path)
            .map(|f| f.modified)
            .ok_or_else(|| not_found(path))
    }

    fn now(&self) -> SystemTime {
        self.disk.borrow().clock
    }
}
