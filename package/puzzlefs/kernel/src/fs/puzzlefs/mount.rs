// SPDX-License-Identifier: GPL-2.0

//! Mount options, verification of the image, and the per-mount data.
//!
//! Errors (each reported through the mount context, so `mount` can print it, and to the
//! kernel log):
//!
//! - `EINVAL`: an option is missing, given without a value, or `image_manifest` is not 64 hex
//!   digits; or the manifest has an unsupported version; or `oci_root_dir` is on a file system
//!   already stacked `FILESYSTEM_MAX_STACK_DEPTH` deep (puzzlefs stacks on it, as overlayfs
//!   does on its layers); or a blob is not a regular file.
//! - `ENOENT` (or the errno of the lookup): `oci_root_dir` or a blob does not exist.
//! - `EBADMSG`: the manifest or a metadata blob does not hash to its name.
//! - `EUCLEAN`: the manifest or a metadata layer cannot be parsed, or the root is not a
//!   directory.
//! - `EFBIG`: the manifest or a metadata blob is larger than this driver accepts.

#![forbid(unsafe_code)]

use crate::blob::BlobCache;
use crate::decompress::ChunkCache;
use crate::PuzzleFs;
use core::fmt;
use kernel::fs::{
    context::{FsContext, Param},
    file::{PrivateMount, RegularFile},
    sb::{New, Stat, SuperBlock, MAX_STACK_DEPTH},
    seq::SeqFile,
};
use kernel::pr_err_ratelimited;
use kernel::prelude::*;
use kernel::sha256;
use kernel::str::CString;
use kernel::sync::{Arc, Mutex};
use puzzlefs_format::{
    find_inode, parse_hex_digest, Digest, HexDigest, Inode, InodeKind, Layer, Manifest,
    MetadataBlob,
};

/// Magic number reported by `statfs` ("PZFS", include/uapi/linux/magic.h).
pub(crate) const PUZZLEFS_MAGIC: u32 = kernel::uapi::PUZZLEFS_MAGIC;

/// Largest manifest blob accepted.
const MAX_MANIFEST_SIZE: usize = 16 << 20;
/// Largest metadata blob accepted.
const MAX_METADATA_SIZE: usize = 512 << 20;
/// Most metadata layers accepted.
const MAX_LAYERS: usize = 256;

/// The mount options.
#[derive(Default)]
pub(crate) struct Options {
    oci_root_dir: Option<CString>,
    image_manifest: Option<Digest>,
}

/// The layer views of one operation, top first.
pub(crate) struct Layers<'a>(KVec<Layer<'a>>);

impl<'a> Layers<'a> {
    /// Finds inode `ino`: the top-most layer holding it wins (see `find_inode`).
    pub(crate) fn find(&self, ino: u64) -> puzzlefs_format::Result<Inode<'a>> {
        find_inode(self.0.iter().copied(), ino)
    }
}

/// Per-mount data.
pub(crate) struct Info {
    /// Open chunk blob files.
    blobs: Arc<Mutex<BlobCache>>,
    /// Private clone of the mount of `oci_root_dir`; blobs are opened below it.
    mount: PrivateMount,
    oci_root_dir: CString,
    manifest: Digest,
    /// The metadata blobs, top layer first (kvmalloc'ed, so 8-byte aligned).
    layers: KVec<KVVec<u8>>,
    /// Decompressed zstd chunks.
    pub(crate) chunks: Arc<Mutex<ChunkCache>>,
    max_ino: u64,
    metadata_bytes: u64,
}

impl Info {
    /// Runs `f` on the parsed metadata layers (top first).
    ///
    /// Parsing only reads the Cap'n Proto segment tables; each call gets a fresh read budget
    /// (see the `puzzlefs_format` crate docs), and each layer's inode list is followed once
    /// per call (following it again would charge the budget for the whole list again).
    pub(crate) fn with_layers<R>(
        &self,
        f: impl for<'a, 'b> FnOnce(&'b Layers<'a>) -> Result<R>,
    ) -> Result<R> {
        let mut blobs = KVec::with_capacity(self.layers.len(), GFP_KERNEL)?;
        for (i, bytes) in self.layers.iter().enumerate() {
            // Parsed successfully at mount; a failure now would be a bug, not bad data.
            let blob = MetadataBlob::parse(bytes).map_err(|e| {
                pr_err_ratelimited!("metadata layer {}: {}\n", i, e);
                EUCLEAN
            })?;
            blobs.push(blob, GFP_KERNEL)?;
        }
        let mut layers = KVec::with_capacity(blobs.len(), GFP_KERNEL)?;
        for (i, blob) in blobs.iter().enumerate() {
            let layer = blob.layer().map_err(|e| {
                pr_err_ratelimited!("metadata layer {}: {}\n", i, e);
                EUCLEAN
            })?;
            layers.push(layer, GFP_KERNEL)?;
        }
        let layers = Layers(layers);
        f(&layers)
    }

    /// Opens chunk blob `digest` of the image directory (or finds it open).
    pub(crate) fn open_blob(&self, digest: &Digest) -> Result<Arc<RegularFile>> {
        crate::blob::open(&self.mount, &self.blobs, digest)
    }
}

fn error(fc: &FsContext, errno: Error, args: fmt::Arguments<'_>) -> Error {
    fc.error(args);
    errno
}

/// Parses `oci_root_dir=` and `image_manifest=`.
pub(crate) fn parse_param(
    fc: &FsContext,
    opts: &mut Options,
    key: &CStr,
    value: Param<'_>,
) -> Result {
    let name = key.as_bytes();
    if name != b"oci_root_dir" && name != b"image_manifest" {
        return Err(ENOPARAM);
    }
    let Param::String(value) = value else {
        return Err(error(
            fc,
            EINVAL,
            format_args!("option {} needs a value", key),
        ));
    };
    if name == b"oci_root_dir" {
        if value.is_empty() {
            return Err(error(fc, EINVAL, format_args!("oci_root_dir is empty")));
        }
        opts.oci_root_dir = Some(value.to_cstring()?);
    } else {
        let hex = value.as_bytes();
        let hex = hex.strip_prefix(b"sha256:").unwrap_or(hex);
        let digest = parse_hex_digest(hex).map_err(|_| {
            error(
                fc,
                EINVAL,
                format_args!("image_manifest must be 64 hex digits, not '{}'", value),
            )
        })?;
        opts.image_manifest = Some(digest);
    }
    Ok(())
}

/// Opens blob `digest` and reads it whole (manifest and metadata only), checking its sha256.
fn read_verified_blob(
    fc: &FsContext,
    mount: &PrivateMount,
    dir: &CStr,
    what: &str,
    digest: &Digest,
    max: usize,
) -> Result<KVVec<u8>> {
    let hex = HexDigest(digest);
    let path = CString::try_from_fmt(format_args!("blobs/sha256/{}", hex))?;
    let file = mount.open(&path).map_err(|e| {
        error(
            fc,
            e,
            format_args!("cannot open {} blob {}/{}: {:?}", what, dir, &*path, e),
        )
    })?;
    let bytes = file.read_to_vec(max).map_err(|e| {
        error(
            fc,
            e,
            format_args!(
                "cannot read {} blob {} (limit {} bytes): {:?}",
                what, hex, max, e
            ),
        )
    })?;
    let actual = sha256::digest(&bytes)?;
    if actual != *digest {
        return Err(error(
            fc,
            EBADMSG,
            format_args!("{} blob {} has sha256 {}", what, hex, HexDigest(&actual)),
        ));
    }
    Ok(bytes)
}

/// Verifies and loads the image.
pub(crate) fn fill_super(
    fc: &FsContext,
    opts: &mut Options,
    sb: &mut SuperBlock<PuzzleFs, New>,
) -> Result<Info> {
    let Some(dir) = opts.oci_root_dir.take() else {
        return Err(error(
            fc,
            EINVAL,
            format_args!("missing option oci_root_dir=<dir>"),
        ));
    };
    let Some(manifest_digest) = opts.image_manifest.take() else {
        return Err(error(
            fc,
            EINVAL,
            format_args!("missing option image_manifest=<sha256 of the image manifest>"),
        ));
    };
    sb.set_magic(PUZZLEFS_MAGIC);

    let mount = PrivateMount::new(&dir).map_err(|e| {
        error(
            fc,
            e,
            format_args!("cannot use oci_root_dir {}: {:?}", &*dir, e),
        )
    })?;
    // The blobs are read from the file system of `oci_root_dir`: this one stacks on it.
    sb.stack_on(&mount).map_err(|e| {
        error(
            fc,
            e,
            format_args!(
                "cannot use oci_root_dir {}: maximum file system stacking depth ({}) exceeded",
                &*dir, MAX_STACK_DEPTH
            ),
        )
    })?;
    let manifest_bytes = read_verified_blob(
        fc,
        &mount,
        &dir,
        "manifest",
        &manifest_digest,
        MAX_MANIFEST_SIZE,
    )?;
    let hex = HexDigest(&manifest_digest);
    let manifest = Manifest::parse(&manifest_bytes).map_err(|e| match e {
        puzzlefs_format::Error::BadVersion(v) => error(
            fc,
            EINVAL,
            format_args!(
                "manifest {}: unsupported version {} (this driver reads 1)",
                hex, v
            ),
        ),
        e => error(fc, EUCLEAN, format_args!("manifest {}: {}", hex, e)),
    })?;
    let count = manifest
        .layer_count()
        .map_err(|e| error(fc, EUCLEAN, format_args!("manifest {}: {}", hex, e)))?;
    let count = usize::try_from(count).map_err(|_| EUCLEAN)?;
    if count == 0 || count > MAX_LAYERS {
        return Err(error(
            fc,
            EUCLEAN,
            format_args!(
                "manifest {}: {} metadata layers (1 to {} accepted)",
                hex, count, MAX_LAYERS
            ),
        ));
    }

    let mut layers = KVec::with_capacity(count, GFP_KERNEL)?;
    let (mut max_ino, mut metadata_bytes) = (0u64, 0u64);
    for blob in manifest
        .layers()
        .map_err(|e| error(fc, EUCLEAN, format_args!("manifest {}: {}", hex, e)))?
    {
        let blob = blob.map_err(|e| error(fc, EUCLEAN, format_args!("manifest {}: {}", hex, e)))?;
        if blob.compressed || blob.offset != 0 {
            return Err(error(
                fc,
                EUCLEAN,
                format_args!(
                    "manifest {}: metadata blob {} is compressed or at an offset",
                    hex,
                    HexDigest(&blob.digest)
                ),
            ));
        }
        let bytes = read_verified_blob(
            fc,
            &mount,
            &dir,
            "metadata",
            &blob.digest,
            MAX_METADATA_SIZE,
        )?;
        {
            let parsed = MetadataBlob::parse(&bytes).and_then(|m| {
                let layer = m.layer()?;
                Ok(layer.max_ino().unwrap_or(0))
            });
            let top = parsed.map_err(|e| {
                error(
                    fc,
                    EUCLEAN,
                    format_args!("metadata blob {}: {}", HexDigest(&blob.digest), e),
                )
            })?;
            max_ino = max_ino.max(top);
        }
        metadata_bytes = metadata_bytes.saturating_add(bytes.len() as u64);
        layers.push(bytes, GFP_KERNEL)?;
    }

    let info = Info {
        blobs: Arc::pin_init(BlobCache::new(), GFP_KERNEL)?,
        mount,
        oci_root_dir: dir,
        manifest: manifest_digest,
        layers,
        chunks: Arc::pin_init(ChunkCache::new(), GFP_KERNEL)?,
        max_ino,
        metadata_bytes,
    };
    let root_kind = info.with_layers(|blobs| {
        let root = blobs.find(puzzlefs_format::ROOT_INO).and_then(|i| i.kind());
        Ok(root)
    })?;
    match root_kind {
        Ok(InodeKind::Dir) => Ok(info),
        Ok(kind) => Err(error(
            fc,
            EUCLEAN,
            format_args!("image {}: root inode is a {:?}, not a directory", hex, kind),
        )),
        Err(e) => Err(error(
            fc,
            EUCLEAN,
            format_args!("image {}: root inode: {}", hex, e),
        )),
    }
}

/// What `statfs` reports: the metadata size, the highest inode number and an fsid made from
/// the manifest digest.
pub(crate) fn statfs(info: &Info) -> Stat {
    Stat {
        magic: PUZZLEFS_MAGIC,
        namelen: 255,
        bsize: kernel::page::PAGE_SIZE as i64,
        blocks: info.metadata_bytes.div_ceil(kernel::page::PAGE_SIZE as u64),
        files: info.max_ino,
        // The image's identity: the first 8 bytes of its manifest digest.
        fsid: info
            .manifest
            .first_chunk::<8>()
            .map_or(0, |b| u64::from_le_bytes(*b)),
    }
}

/// Writes the two options for `/proc/mounts`.
pub(crate) fn show_options(info: &Info, seq: &mut SeqFile) {
    seq.show_option(b"oci_root_dir", info.oci_root_dir.as_bytes());
    let mut hex = [0u8; 64];
    for (pair, byte) in hex.chunks_exact_mut(2).zip(info.manifest.iter()) {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        if let [hi, lo] = pair {
            *hi = DIGITS[usize::from(byte >> 4)];
            *lo = DIGITS[usize::from(byte & 0xf)];
        }
    }
    seq.show_option(b"image_manifest", &hex);
}
