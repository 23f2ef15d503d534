//! fs-verity's Merkle tree of a blob (sha256, 4 KiB blocks, no salt): where
//! each hash lives in the tree, and the descriptor whose sha256 is the blob's
//! fs-verity digest (Documentation/filesystems/fsverity.rst).
//!
//! Level 0 of the tree holds the hashes of the blob's 4 KiB blocks (the last
//! one zero-padded), each level above the hashes of the blocks of the level
//! below (128 to a block, the last block zero-padded), up to a level of one
//! block: the hash of that block is the root hash. A blob of at most one
//! block has no tree; its root hash is the hash of its only block, or zero
//! when it is empty. Stored as fs-verity stores it (and as `fsverity digest
//! --out-merkle-tree` writes it): the top level first, level 0 last.
//!
//! An image may store the tree of a metadata blob as a blob of its own (see
//! [`crate::VerityEntry::merkle_tree`]), so that a reader checks the blob
//! page by page against the fs-verity digest the manifest records for it
//! instead of hashing it whole before its first use. The tree needs no name
//! of its own to be trusted: its top block hashes to the root, which the
//! recorded digest fixes.

use crate::{Error, Result};

/// Block size of the data and of the tree.
pub const BLOCK: usize = 4096;
/// Size of a sha256 hash.
pub const HASH_LEN: usize = 32;
/// Hashes in one tree block.
const ARITY: u64 = (BLOCK / HASH_LEN) as u64;
/// Most levels fs-verity allows (`FS_VERITY_MAX_LEVELS`); 8 levels cover
/// 2^68 bytes.
pub const MAX_LEVELS: usize = 8;
/// `FS_VERITY_HASH_ALG_SHA256`.
pub const HASH_ALG_SHA256: u8 = 1;
/// log2 of [`BLOCK`].
pub const LOG_BLOCK: u8 = 12;
/// Size of `struct fsverity_descriptor`.
pub const DESCRIPTOR_LEN: usize = 256;

/// Where one hash is stored: tree block `block`, at byte `offset` of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    /// Block number in the tree blob.
    pub block: u64,
    /// Byte offset of the hash in that block.
    pub offset: usize,
}

/// The shape of the Merkle tree of a blob of a given size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tree {
    data_size: u64,
    levels: usize,
    /// First tree block of each level (level 0 holds the data blocks' hashes).
    start: [u64; MAX_LEVELS],
    blocks: u64,
}

impl Tree {
    /// The tree of a blob of `data_size` bytes.
    pub fn new(data_size: u64) -> Result<Self> {
        let mut count = [0u64; MAX_LEVELS];
        let mut levels = 0usize;
        let mut n = data_size.div_ceil(BLOCK as u64);
        // Each level hashes the `n` blocks below it, until one block is left.
        while n > 1 {
            n = n.div_ceil(ARITY);
            *count.get_mut(levels).ok_or(Error::Overflow)? = n;
            levels = levels.checked_add(1).ok_or(Error::Overflow)?;
        }
        // Stored top level first.
        let mut start = [0u64; MAX_LEVELS];
        let mut blocks = 0u64;
        for level in (0..levels).rev() {
            *start.get_mut(level).ok_or(Error::Overflow)? = blocks;
            let here = *count.get(level).ok_or(Error::Overflow)?;
            blocks = blocks.checked_add(here).ok_or(Error::Overflow)?;
        }
        Ok(Tree {
            data_size,
            levels,
            start,
            blocks,
        })
    }

    /// The blob size the tree is for.
    pub fn data_size(&self) -> u64 {
        self.data_size
    }

    /// Number of levels (0 for a blob of at most one block).
    pub fn levels(&self) -> usize {
        self.levels
    }

    /// Number of tree blocks.
    pub fn blocks(&self) -> u64 {
        self.blocks
    }

    /// Size of the tree in bytes (a whole number of blocks).
    pub fn size(&self) -> u64 {
        // At most 2^64 / 127 blocks: no overflow (see `new`).
        self.blocks.saturating_mul(BLOCK as u64)
    }

    /// Number of data blocks.
    pub fn data_blocks(&self) -> u64 {
        self.data_size.div_ceil(BLOCK as u64)
    }

    /// Where the hash of data block `index` is stored; `None` if the blob
    /// has no such block, or no tree (its root hash is then the hash of its
    /// only block).
    pub fn data_hash(&self, index: u64) -> Option<Slot> {
        if self.levels == 0 || index >= self.data_blocks() {
            return None;
        }
        self.slot(0, index)
    }

    /// Where the hash of tree block `block` is stored; `None` if it is the
    /// top block (its hash is the root hash) or not a block of the tree.
    pub fn block_hash(&self, block: u64) -> Option<Slot> {
        if block >= self.blocks {
            return None;
        }
        // The level holding `block`: levels are stored top first, so the
        // first (lowest) level whose start is at or below it.
        let level = (0..self.levels).find(|&l| self.start.get(l).is_some_and(|&s| s <= block))?;
        let index = block.checked_sub(*self.start.get(level)?)?;
        self.slot(level.checked_add(1)?, index)
    }

    /// Slot of hash `index` of level `level`, if that level exists.
    fn slot(&self, level: usize, index: u64) -> Option<Slot> {
        if level >= self.levels {
            return None;
        }
        let block = self.start.get(level)?.checked_add(index / ARITY)?;
        // Below `BLOCK`: fits in a usize.
        let offset = ((index % ARITY) as usize).checked_mul(HASH_LEN)?;
        Some(Slot { block, offset })
    }
}

/// The `struct fsverity_descriptor` of a blob of `data_size` bytes whose
/// Merkle tree has root hash `root`: its sha256 is the blob's fs-verity
/// digest.
pub fn descriptor(data_size: u64, root: &[u8; HASH_LEN]) -> [u8; DESCRIPTOR_LEN] {
    // version, hash_algorithm, log_blocksize, salt_size, 4 reserved bytes,
    // le64 data_size, root_hash[64], salt[32], 144 reserved bytes.
    let mut desc = [0u8; DESCRIPTOR_LEN];
    let head = [1, HASH_ALG_SHA256, LOG_BLOCK, 0, 0, 0, 0, 0];
    for (d, s) in desc.iter_mut().zip(
        head.iter()
            .chain(data_size.to_le_bytes().iter())
            .chain(root.iter()),
    ) {
        *d = *s;
    }
    desc
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::arithmetic_side_effects)]
mod tests {
    use super::*;

    #[test]
    fn shapes() {
        // (data size, levels, tree blocks)
        let cases = [
            (0u64, 0usize, 0u64),
            (1, 0, 0),
            (4096, 0, 0),
            (4097, 1, 1),
            (128 * 4096, 1, 1),
            (128 * 4096 + 1, 2, 3),
            (128 * 128 * 4096, 2, 129),
            (128 * 128 * 4096 + 1, 3, 132),
        ];
        for (size, levels, blocks) in cases {
            let t = Tree::new(size).unwrap();
            assert_eq!((t.levels(), t.blocks()), (levels, blocks), "{size} bytes");
            assert_eq!(t.size(), blocks * 4096);
        }
        // The largest size still has at most MAX_LEVELS levels.
        assert!(Tree::new(u64::MAX).unwrap().levels() <= MAX_LEVELS);
    }

    #[test]
    fn slots_of_a_three_level_tree() {
        // 2 blocks at level 1 under one top block; level 0 has 129 blocks.
        let t = Tree::new(128 * 128 * 4096 + 1).unwrap();
        assert_eq!(t.block_hash(0), None, "the top block's hash is the root");
        assert_eq!(
            t.block_hash(1),
            Some(Slot {
                block: 0,
                offset: 0
            })
        );
        assert_eq!(
            t.block_hash(2),
            Some(Slot {
                block: 0,
                offset: 32
            })
        );
        assert_eq!(
            t.block_hash(3),
            Some(Slot {
                block: 1,
                offset: 0
            })
        );
        assert_eq!(
            t.block_hash(131),
            Some(Slot {
                block: 2,
                offset: 0
            })
        );
        assert_eq!(t.block_hash(132), None);
        assert_eq!(
            t.data_hash(0),
            Some(Slot {
                block: 3,
                offset: 0
            })
        );
        assert_eq!(
            t.data_hash(129),
            Some(Slot {
                block: 4,
                offset: 32
            })
        );
        assert_eq!(
            t.data_hash(128 * 128),
            Some(Slot {
                block: 131,
                offset: 0
            })
        );
        assert_eq!(t.data_hash(128 * 128 + 1), None);
        assert_eq!(Tree::new(4096).unwrap().data_hash(0), None);
    }
}
