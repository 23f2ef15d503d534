//! PuzzleFS on-disk format, version 1: a zero-copy, allocation-free reader.
//!
//! This crate is shared by the userspace `puzzlefs` tool and the Linux kernel
//! driver, which compiles this file directly with `rustc` (edition 2021,
//! `core` only, `--extern capnp`). It therefore uses no `std`, no `alloc`, no
//! floating point and no `unsafe`, and every value read from an image is
//! bounds- and overflow-checked: a malformed image yields an [`Error`], never
//! a panic.
//!
//! The structured blobs are Cap'n Proto messages (schemas in `schema/`,
//! generated readers in [`manifest_capnp`] and [`metadata_capnp`]).
//!
//! # Reading an image
//!
//! ```text
//! manifest bytes --Manifest::parse--> Manifest --layer(i)--> BlobRef (digest of a metadata blob)
//! metadata bytes --MetadataBlob::parse--> MetadataBlob --layer()--> Layer
//! find_inode([Layer, ...], ino) --> Inode --dir()/file()/xattrs()/symlink_target()
//! ```
//!
//! # Read budget
//!
//! Cap'n Proto's traversal limit stays on: every [`Manifest`] and
//! [`MetadataBlob`] value carries a read budget of [`BUDGET_FACTOR`] times its
//! size in words (at least [`MIN_BUDGET_WORDS`]). Reads charge it, so a
//! message crafted to make readers visit the same data over and over ends in
//! [`Error::Capnp`] instead of unbounded work. Parsing is cheap (it reads the
//! segment table only), so a long-lived user such as a mounted file system
//! should keep the blob *bytes* and parse a fresh [`MetadataBlob`] per
//! operation rather than keep one value forever.

#![no_std]
#![forbid(unsafe_code)]
#![deny(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects,
    clippy::unreachable,
    clippy::todo,
    clippy::unimplemented
)]

/// Generated reader/builder code for `schema/manifest.capnp` (do not edit).
#[allow(
    missing_docs,
    unreachable_pub,
    rust_2018_idioms,
    unused,
    unexpected_cfgs,
    clippy::all,
    clippy::pedantic,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects,
    clippy::unreachable
)]
pub mod manifest_capnp {
    include!(concat!(env!("OUT_DIR"), "/manifest_capnp.rs"));
}

/// Generated reader/builder code for `schema/metadata.capnp` (do not edit).
#[allow(
    missing_docs,
    unreachable_pub,
    rust_2018_idioms,
    unused,
    unexpected_cfgs,
    clippy::all,
    clippy::pedantic,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects,
    clippy::unreachable
)]
pub mod metadata_capnp {
    include!(concat!(env!("OUT_DIR"), "/metadata_capnp.rs"));
}

#[cfg(test)]
extern crate std;

mod check;
mod digest;
mod dir;
mod error;
mod file;
mod inode;
mod layer;
mod manifest;
pub mod merkle;
pub mod paged;

pub use check::{check_layers, CheckStats};
pub use digest::{parse_hex_digest, Digest, HexDigest, DIGEST_LEN};
pub use dir::{Dir, DirEntries, DirEntry, NAME_MAX};
pub use error::{Error, Result};
pub use file::{Chunk, ChunkList, File, Piece, Pieces, MAX_FILE_SIZE};
pub use inode::{Inode, InodeKind, Rdev, Xattr, Xattrs};
pub use layer::{find_inode, find_inode_hinted, find_inode_in, Inodes, Layer, MetadataBlob};
pub use manifest::{
    BlobRef, BlobRefs, LinkCount, LinkCounts, Manifest, VerityEntries, VerityEntry, MAX_LAYERS,
};

/// The only manifest version this crate reads and writes.
pub const MANIFEST_VERSION: u64 = 1;
/// Inode number of the root directory.
pub const ROOT_INO: u64 = 1;
/// Read budget, in multiples of the message size (see the crate docs).
pub const BUDGET_FACTOR: usize = 8;
/// Smallest read budget, in 8-byte words.
pub const MIN_BUDGET_WORDS: usize = 1 << 14;
/// Cap'n Proto nesting limit; the schemas nest 6 levels deep.
pub const NESTING_LIMIT: i32 = 16;

/// Media type of an image manifest blob (`Rootfs`).
pub const MEDIA_TYPE_ROOTFS: &str = "application/vnd.puzzlefs.image.rootfs.v1";
/// Media type of a metadata layer blob (`InodeVector`).
pub const MEDIA_TYPE_INODES: &str = "application/vnd.puzzlefs.image.inodes.v1";
/// Media type of an uncompressed file data chunk.
pub const MEDIA_TYPE_CHUNK: &str = "application/vnd.puzzlefs.image.layer.puzzlefs.v1";
/// Media type of a zstd-compressed file data chunk.
pub const MEDIA_TYPE_CHUNK_ZSTD: &str = "application/vnd.puzzlefs.image.layer.puzzlefs.v1+zstd";

/// Parses a Cap'n Proto message (standard serialization, 8-byte aligned)
/// with the crate's read limits.
fn read_message(
    buf: &[u8],
) -> Result<capnp::message::Reader<capnp::serialize::NoAllocBufferSegments<&[u8]>>> {
    let words = buf.len() / 8;
    let budget = words.saturating_mul(BUDGET_FACTOR).max(MIN_BUDGET_WORDS);
    let options = capnp::message::ReaderOptions {
        traversal_limit_in_words: Some(budget),
        nesting_limit: NESTING_LIMIT,
    };
    let mut rest = buf;
    let segments = capnp::serialize::NoAllocBufferSegments::from_slice(&mut rest, options)
        .map_err(Error::from)?;
    Ok(capnp::message::Reader::new(segments, options))
}

/// Midpoint of `lo..hi` for binary searches (`lo <= hi`).
fn mid(lo: u32, hi: u32) -> u32 {
    lo.wrapping_add(hi.wrapping_sub(lo).wrapping_shr(1))
}

/// Most reads of [`search_from_first`] before it searches by halves.
const GALLOP_READS: u32 = 8;

/// Search of positions `0..len` for `key` in a list whose element 0 has key
/// `first` and whose keys ascend strictly, as inode numbers do in a layer:
/// then the element at position `i` has a key of at least `first + i`, so
/// `key` is at position `key - first` or before it. That position is read
/// first, then positions below it at doubling distances (at most
/// [`GALLOP_READS`] reads) until one has a smaller key, then the range left
/// is searched by halves: for a list numbered with a few gaps (as the
/// builders number inodes: hard links leave some) a few reads instead of a
/// binary search of the whole list, and for any other list at most
/// `GALLOP_READS` more than that. Returns what [`search_sorted`] returns; on
/// an unsorted list the answer may be a false "absent", never another
/// element.
fn search_from_first<T>(
    len: u32,
    key: u64,
    first: u64,
    mut probe: impl FnMut(u32) -> Result<(u64, T)>,
) -> Result<(Option<(u32, T)>, u32)> {
    let Some(guess) = key.checked_sub(first) else {
        return Ok((None, 0));
    };
    // Positions at or past `hi` have keys above `key`.
    let mut hi = u32::try_from(guess.saturating_add(1))
        .unwrap_or(u32::MAX)
        .min(len);
    let mut lo = 0u32;
    let mut stride = 1u32;
    for _ in 0..GALLOP_READS {
        let Some(at) = hi.checked_sub(stride) else {
            break;
        };
        let (found, element) = probe(at)?;
        if found == key {
            return Ok((Some((at, element)), at));
        }
        if found < key {
            lo = at.checked_add(1).ok_or(Error::Overflow)?;
            break;
        }
        hi = at;
        stride = stride.saturating_mul(2);
    }
    let (found, at) = search_sorted(hi.saturating_sub(lo), key, |i| probe(lo.saturating_add(i)))?;
    Ok((
        found.map(|(i, element)| (lo.saturating_add(i), element)),
        lo.saturating_add(at),
    ))
}

/// Binary search of positions `0..len` for `key`; `probe(i)` reads the
/// element at `i` and its key (ascending in a sorted list). Returns the
/// element and its position if found, and the position of the first element
/// whose key is `key` or more. On an unsorted list the answer may be a false
/// "absent", never another element.
fn search_sorted<T>(
    len: u32,
    key: u64,
    mut probe: impl FnMut(u32) -> Result<(u64, T)>,
) -> Result<(Option<(u32, T)>, u32)> {
    let (mut lo, mut hi) = (0u32, len);
    while lo < hi {
        let mid = mid(lo, hi);
        let (at, element) = probe(mid)?;
        if at == key {
            return Ok((Some((mid, element)), mid));
        }
        if at < key {
            lo = mid.checked_add(1).ok_or(Error::Overflow)?;
        } else {
            hi = mid;
        }
    }
    Ok((None, lo))
}
