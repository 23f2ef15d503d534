// SPDX-License-Identifier: GPL-2.0

//! PuzzleFS: a read-only file system for container images in an OCI image directory.
//!
//! ```text
//! mount -t puzzlefs -o oci_root_dir=<dir>,image_manifest=<sha256 hex>[,verity=<mode>] none <mnt>
//! ```
//!
//! The image manifest blob `<dir>/blobs/sha256/<hex>` must hash to `image_manifest`; it lists
//! the metadata layers (Cap'n Proto inode vectors), which are read into memory and verified
//! at mount, or, with `verity=on` or `require`, checked by their fs-verity digests and read
//! page by page as operations need them (`meta.rs`). Nothing else is read at mount: inodes and
//! directory entries are looked up in the layers on demand, and file data is read through the
//! page cache, one folio at a time, from the byte ranges of the chunk blobs that hold it
//! (zstd-compressed chunks are decompressed whole and kept in a small per-mount cache).
//!
//! The manifest and metadata are authenticated by that digest (the metadata by the fs-verity
//! digests the manifest records, when they are used). Chunk blobs are opened later, at read
//! time; `verity=<mode>` (overlayfs's option names and meanings) says how they are checked:
//!
//! - `off` (the default): not at all;
//! - `on`: a chunk blob with fs-verity enabled must have the fs-verity digest (sha256) that the
//!   manifest's `fsVerityData` records for it; one without fs-verity is read unchecked;
//! - `require`: every chunk blob must have fs-verity and the recorded digest; a blob without
//!   fs-verity or without a recorded digest is refused.
//!
//! A blob that fails its check fails each read that needs it with `EIO` and one rate-limited
//! log line naming it. A blob is checked on the open file, right after it is opened (`blob.rs`
//! keeps a few open; each reopen is checked again), so a file renamed over it later cannot be
//! read in its place; fs-verity then checks every read of the open file by itself.
//! `puzzlefs enable-fs-verity <dir> <tag>` enables fs-verity on the blobs of an image.
//!
//! The on-disk format is parsed by the `puzzlefs_format` crate only; this driver maps it to
//! the VFS: `mount.rs` (options, super block), `inode.rs`, `dir.rs` (lookup, readdir),
//! `data.rs` (file contents and symlink targets), `xattr.rs`, `decompress.rs` (zstd chunks),
//! `blob.rs` (open chunk blobs and their fs-verity checks), `meta.rs` (the metadata blobs).

#![forbid(unsafe_code)]

use kernel::c_str;
use kernel::fs::{
    context::{FsContext, ParamTableRef, Parsed},
    dir::DirEmitter,
    folio::{LockedFolio, Readahead},
    inode::{INode, INodeRef},
    sb::{New, Stat, SuperBlock},
    seq::SeqFile,
    xattr::XattrList,
    FileSystem,
};
use kernel::prelude::*;

mod blob;
mod data;
mod decompress;
mod dir;
mod error;
mod inode;
mod meta;
mod mount;
mod nlink;
mod sort;
mod xattr;

module! {
    type: PuzzleFsModule,
    name: "puzzlefs",
    author: "PuzzleFS developers",
    description: "PuzzleFS container image file system",
    license: "GPL",
}

struct PuzzleFsModule {
    _fs: kernel::fs::Registration,
}

impl kernel::Module for PuzzleFsModule {
    fn init(module: &'static ThisModule) -> Result<Self> {
        Ok(Self {
            _fs: kernel::fs::Registration::new::<PuzzleFs>(module)?,
        })
    }
}

/// The PuzzleFS file system type.
pub(crate) struct PuzzleFs;

#[vtable]
impl FileSystem for PuzzleFs {
    const NAME: &'static CStr = c_str!("puzzlefs");
    // `readahead` waits for its chunk reads (see `data`): a reader going through a large file
    // would otherwise stop at each window until its chunks are read.
    const DEFER_READAHEAD: bool = true;
    type Options = mount::Options;
    type Data = mount::Info;
    type INodeData = inode::InodeData;

    const PARAMS: ParamTableRef = mount::PARAMS.params();

    fn parse_param(fc: &FsContext, opts: &mut mount::Options, param: &Parsed<'_>) -> Result {
        mount::parse_param(fc, opts, param)
    }

    fn fill_super(
        fc: &FsContext,
        opts: &mut mount::Options,
        sb: &mut SuperBlock<Self, New>,
    ) -> Result<mount::Info> {
        mount::fill_super(fc, opts, sb)
    }

    fn init_root(sb: &SuperBlock<Self>) -> Result<INodeRef<Self>> {
        inode::iget(sb, puzzlefs_format::ROOT_INO)
    }

    fn lookup(parent: &INode<Self>, name: &[u8]) -> Result<Option<INodeRef<Self>>> {
        dir::lookup(parent, name)
    }

    fn read_dir(inode: &INode<Self>, emitter: &mut DirEmitter<'_>) -> Result {
        dir::read_dir(inode, emitter)
    }

    fn read_folio(inode: &INode<Self>, folio: &mut LockedFolio<'_>) -> Result {
        data::read_folio(inode, folio)
    }

    fn readahead(inode: &INode<Self>, ra: &mut Readahead<'_>) -> Result {
        data::readahead(inode, ra)
    }

    fn statfs(sb: &SuperBlock<Self>) -> Result<Stat> {
        Ok(mount::statfs(sb.data()))
    }

    fn show_options(sb: &SuperBlock<Self>, seq: &mut SeqFile) -> Result {
        mount::show_options(sb.data(), seq);
        Ok(())
    }

    fn list_xattrs(inode: &INode<Self>, list: &mut XattrList<'_>) -> Result {
        xattr::list(inode, list)
    }

    fn get_xattr(inode: &INode<Self>, name: &[u8], buf: &mut [u8]) -> Result<usize> {
        xattr::get(inode, name, buf)
    }
}
