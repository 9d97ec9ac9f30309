//! Producer ids, unique for the node's lifetime and across restarts.
//!
//! Ids are handed out from blocks of [`BLOCK_SIZE`]. Before the first id of a block is handed
//! out, the start of the *next* block is written to `data.dir/producer-ids.next` crash-safely
//! (temp file, fsync, rename, fsync of the directory: the catalog's `write_atomically`). A
//! restart continues at the stored value, so an id is never handed out twice, even after a
//! crash; at most one block per start is skipped. The first block is reserved when the server
//! starts; later reservations happen on the InitProducerId that exhausts a block (one small
//! fsync'd write per [`BLOCK_SIZE`] producers), under a mutex every core shares.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::catalog::store::{write_atomically, StoreError};

/// The file holding the first id of the next unreserved block (decimal, one line).
pub const IDS_FILE: &str = "producer-ids.next";

/// Ids reserved per durable write (as Kafka's producer id blocks).
pub const BLOCK_SIZE: i64 = 1000;

#[derive(Debug, thiserror::Error)]
pub enum ProducerIdError {
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{} is corrupt: {content:?} is not a producer id", path.display())]
    Corrupt { path: PathBuf, content: String },
    #[error("cannot reserve producer ids: {0}")]
    Reserve(#[source] StoreError),
    #[error("every producer id has been handed out")]
    Exhausted,
}

#[derive(Debug)]
struct Block {
    /// The next id to hand out.
    next: i64,
    /// Ids below this are reserved on disk.
    end: i64,
}

/// The node's producer id source; shared by every core.
#[derive(Debug)]
pub struct ProducerIds {
    path: PathBuf,
    block_size: i64,
    block: Mutex<Block>,
}

impl ProducerIds {
    /// Reads `data_dir/producer-ids.next` (0 when missing) and reserves the first block.
    pub fn open(data_dir: &Path) -> Result<Self, ProducerIdError> {
        Self::open_with_block_size(data_dir, BLOCK_SIZE)
    }

    /// [`ProducerIds::open`] with another block size (tests).
    pub fn open_with_block_size(data_dir: &Path, block_size: i64) -> Result<Self, ProducerIdError> {
        let path = data_dir.join(IDS_FILE);
        let start = match std::fs::read_to_string(&path) {
            Ok(text) => text
                .trim()
                .parse::<i64>()
                .ok()
                .filter(|id| *id >= 0)
                .ok_or_else(|| ProducerIdError::Corrupt {
                    path: path.clone(),
                    content: text.chars().take(64).collect(),
                })?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => 0,
            Err(source) => return Err(ProducerIdError::Read { path, source }),
        };
        let ids = Self {
            path,
            block_size: block_size.max(1),
            block: Mutex::new(Block {
                next: start,
                end: start,
            }),
        };
        {
            let mut block = ids.lock();
            ids.reserve(&mut block)?;
        }
        Ok(ids)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Block> {
        // The block is two integers updated together after the durable write: a panic while
        // holding the lock cannot leave them inconsistent.
        self.block.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Makes the block after `block.end` durable, then makes it usable.
    fn reserve(&self, block: &mut Block) -> Result<(), ProducerIdError> {
        let end = block
            .end
            .checked_add(self.block_size)
            .ok_or(ProducerIdError::Exhausted)?;
        write_atomically(&self.path, format!("{end}\n").as_bytes(), None)
            .map_err(ProducerIdError::Reserve)?;
        block.next = block.end.max(block.next);
        block.end = end;
        Ok(())
    }

    /// A producer id never handed out before by this data directory.
    pub fn allocate(&self) -> Result<i64, ProducerIdError> {
        let mut block = self.lock();
        if block.next >= block.end {
            self.reserve(&mut block)?;
        }
        let id = block.next;
        block.next += 1;
        Ok(id)
    }

    /// Whether `id` may have been handed out by this data directory (it is below every id
    /// still to come).
    pub fn may_have_issued(&self, id: i64) -> bool {
        id >= 0 && id < self.lock().next
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_across_restarts_and_blocks_are_reserved_first() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(IDS_FILE);
        let ids = ProducerIds::open_with_block_size(dir.path(), 3).unwrap();
        // The first block is reserved at open, before any id is handed out.
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "3\n");
        let first: Vec<i64> = (0..4).map(|_| ids.allocate().unwrap()).collect();
        assert_eq!(first, vec![0, 1, 2, 3]);
        // The fourth id needed the second block, reserved before it was handed out.
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "6\n");
        assert!(ids.may_have_issued(3) && !ids.may_have_issued(4) && !ids.may_have_issued(-1));
        drop(ids);
        // A restart (or a crash: nothing else is written) continues after the reserved block.
        let ids = ProducerIds::open_with_block_size(dir.path(), 3).unwrap();
        assert_eq!(ids.allocate().unwrap(), 6);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "9\n");
        let ids = std::sync::Arc::new(ids);
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let ids = ids.clone();
                std::thread::spawn(move || (0..10).map(|_| ids.allocate().unwrap()).collect::<Vec<_>>())
            })
            .collect();
        let mut all: Vec<i64> = threads.into_iter().flat_map(|t| t.join().unwrap()).collect();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all, (7..47).collect::<Vec<_>>());
        assert!(!dir.path().join(format!("{IDS_FILE}.tmp")).exists());
    }

    #[test]
    fn a_corrupt_file_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(IDS_FILE), "banana").unwrap();
        let error = ProducerIds::open(dir.path()).unwrap_err();
        assert!(
            error.to_string().contains("producer-ids.next is corrupt"),
            "{error}"
        );
        std::fs::write(dir.path().join(IDS_FILE), "-5\n").unwrap();
        assert!(ProducerIds::open(dir.path()).is_err());
    }
}
