//! fs-verity file measurement (sha256, 4 KiB blocks, no salt), as the
//! kernel's `FS_IOC_MEASURE_VERITY` and `fsverity digest` report it.
//!
//! The measurement is the sha256 of the 256-byte `fsverity_descriptor`
//! (Documentation/filesystems/fsverity.rst), which holds the file size and
//! the root hash of the Merkle tree. The tree hashes the data blocks (the
//! last one zero-padded), then the blocks of those hashes, level by level,
//! until a single hash is left: that hash is the root. A file of one block
//! has no hash blocks at all (its root is the hash of its only data block),
//! and an empty file has an all-zero root.

use puzzlefs_format::merkle::{descriptor, Tree, HASH_LEN};
use sha2::{Digest, Sha256};

pub use puzzlefs_format::merkle::{BLOCK, HASH_ALG_SHA256, LOG_BLOCK};

/// The fs-verity digest of a file holding `data`.
pub fn measure(data: &[u8]) -> [u8; 32] {
    let (root, _) = hash_levels(data);
    descriptor_digest(data.len() as u64, &root)
}

/// A blob's Merkle tree as fs-verity stores it (top level first), and the
/// blob's fs-verity digest.
pub struct Merkle {
    /// The tree's bytes: empty for a blob of at most one block.
    pub tree: Vec<u8>,
    /// The fs-verity digest of the blob.
    pub digest: [u8; 32],
}

/// The Merkle tree of `data` (see [`puzzlefs_format::merkle`]).
pub fn merkle(data: &[u8]) -> Merkle {
    let (root, levels) = hash_levels(data);
    let mut tree = Vec::new();
    // Levels are stored top first, each padded to whole blocks.
    for level in levels.iter().rev() {
        tree.extend_from_slice(level);
        tree.resize(tree.len().next_multiple_of(BLOCK), 0);
    }
    debug_assert_eq!(
        Some(tree.len() as u64),
        Tree::new(data.len() as u64).ok().map(|t| t.size())
    );
    Merkle {
        tree,
        digest: descriptor_digest(data.len() as u64, &root),
    }
}

/// The root hash of the Merkle tree of `data` and its levels of hashes,
/// level 0 (the hashes of the data blocks) first: none for a file of at
/// most one block.
fn hash_levels(data: &[u8]) -> ([u8; 32], Vec<Vec<u8>>) {
    if data.is_empty() {
        return ([0u8; 32], Vec::new());
    }
    let mut level: Vec<u8> = Vec::with_capacity(data.len().div_ceil(BLOCK) * HASH_LEN);
    for block in data.chunks(BLOCK) {
        level.extend_from_slice(&hash_block(block));
    }
    // Each level above hashes the blocks of the one below (128 digests per
    // block) until one digest is left; a one-block file stops right here.
    let mut levels = Vec::new();
    while level.len() > HASH_LEN {
        let mut next = Vec::with_capacity(level.len().div_ceil(BLOCK) * HASH_LEN);
        for block in level.chunks(BLOCK) {
            next.extend_from_slice(&hash_block(block));
        }
        levels.push(std::mem::replace(&mut level, next));
    }
    let mut root = [0u8; 32];
    root.copy_from_slice(&level);
    (root, levels)
}

/// sha256 of the fs-verity descriptor of a file of `size` bytes.
fn descriptor_digest(size: u64, root: &[u8; 32]) -> [u8; 32] {
    Sha256::digest(descriptor(size, root)).into()
}

fn hash_block(block: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(block);
    if block.len() < BLOCK {
        h.update(&[0u8; BLOCK][..BLOCK - block.len()]);
    }
    h.finalize().into()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Known answers recorded once from fsverity-utils 1.5 (Debian 12):
    /// `fsverity digest --hash-alg=sha256 --block-size=4096 <file>` on files
    /// of `n` bytes whose byte `i` is `i % 251`. builder/tests/verity.rs runs
    /// the tool itself on these and more sizes.
    #[test]
    fn known_answers_from_fsverity_utils() {
        for (n, want) in KNOWN {
            let data: Vec<u8> = (0..*n).map(|i| (i % 251) as u8).collect();
            assert_eq!(hex::encode(measure(&data)), *want, "{n} bytes");
        }
    }

    const KNOWN: &[(usize, &str)] = &[
        (
            0,
            "3d248ca542a24fc62d1c43b916eae5016878e2533c88238480b26128a1f1af95",
        ),
        (
            1,
            "b803429503d95915829b29fdbc8bbad142f3abfd11b1cadf5526582e685c0551",
        ),
        (
            4095,
            "5f4953aad672b0188023d6cd6fbce9d09508eb7dad165b6298ce0086bc1e72db",
        ),
        (
            4096,
            "13e9b8848ae484a36acb3f3cac0ceb2f7601e96633d15c92f9bd3dd44e492157",
        ),
        (
            4097,
            "b0d074abef4d544404facfab6ba242f6a8ccbde90f1325cd286f3c8aa8d0f8aa",
        ),
        (
            8192,
            "e48d50c56c4f0178a98a035cb91d66be328eeff78bbddaa35c5ec4cc0d8340c0",
        ),
        (
            1048577,
            "89f2376c7699bfe271478a8e3356d434d4a35784edce47fac74c8e5bc7456c1d",
        ),
    ];
}
