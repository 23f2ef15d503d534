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

use sha2::{Digest, Sha256};

/// Merkle tree block size (and data block size).
pub const BLOCK: usize = 4096;
/// `FS_VERITY_HASH_ALG_SHA256`.
pub const HASH_ALG_SHA256: u8 = 1;
/// log2 of [`BLOCK`].
pub const LOG_BLOCK: u8 = 12;

/// The fs-verity digest of a file holding `data`.
pub fn measure(data: &[u8]) -> [u8; 32] {
    descriptor_digest(data.len() as u64, &root_hash(data))
}

/// The root hash of the Merkle tree of `data`.
fn root_hash(data: &[u8]) -> [u8; 32] {
    if data.is_empty() {
        return [0u8; 32];
    }
    let mut level: Vec<u8> = Vec::with_capacity(data.len().div_ceil(BLOCK) * 32);
    for block in data.chunks(BLOCK) {
        level.extend_from_slice(&hash_block(block));
    }
    // Each level above hashes the blocks of the one below (128 digests per
    // block) until one digest is left; a one-block file stops right here.
    while level.len() > 32 {
        let mut next = Vec::with_capacity(level.len().div_ceil(BLOCK) * 32);
        for block in level.chunks(BLOCK) {
            next.extend_from_slice(&hash_block(block));
        }
        level = next;
    }
    let mut root = [0u8; 32];
    root.copy_from_slice(&level);
    root
}

/// sha256 of the fs-verity descriptor of a file of `size` bytes.
fn descriptor_digest(size: u64, root: &[u8; 32]) -> [u8; 32] {
    // struct fsverity_descriptor: version, hash_algorithm, log_blocksize,
    // salt_size, 4 reserved bytes, le64 data_size, root_hash[64], salt[32],
    // 144 reserved bytes.
    let mut desc = [0u8; 256];
    desc[0] = 1;
    desc[1] = HASH_ALG_SHA256;
    desc[2] = LOG_BLOCK;
    desc[3] = 0;
    desc[8..16].copy_from_slice(&size.to_le_bytes());
    desc[16..48].copy_from_slice(root);
    Sha256::digest(desc).into()
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
