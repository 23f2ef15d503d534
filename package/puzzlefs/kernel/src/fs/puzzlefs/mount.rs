// SPDX-License-Identifier: GPL-2.0

//! Mount options, verification of the image, and the per-mount data.
//!
//! Errors (each reported through the mount context, so `mount` can print it, and to the
//! kernel log):
//!
//! - `EINVAL`: an option is missing, given without a value, `image_manifest` is not 64 hex
//!   digits, or `verity` is not `off`, `on` or `require`; or the manifest has an unsupported
//!   version; or `oci_root_dir` is on a file system already stacked
//!   `FILESYSTEM_MAX_STACK_DEPTH` deep (puzzlefs stacks on it, as overlayfs does on its
//!   layers); or a blob is not a regular file.
//! - `ENOENT` (or the errno of the lookup): `oci_root_dir` or a blob does not exist.
//! - `EBADMSG`: the manifest or a metadata blob does not hash to its name.
//! - `EIO`: a blob cannot be read (say, a block fails its fs-verity check); for a metadata
//!   blob read page by page (see `meta`), one of the pages the mount reads (the segment
//!   table, the root inode, the last inode), or one that does not match the blob's Merkle
//!   tree. A tree that cannot be used (missing, of the wrong size, whose root does not give
//!   the recorded fs-verity digest) is no error: the blob is read whole instead.
//! - `ELOOP`: a blob, or a directory on the way to it below `oci_root_dir`, is a symbolic link
//!   (never followed: see `PrivateMount::open`).
//! - `EUCLEAN`: the manifest or a metadata layer cannot be parsed, the manifest lists a
//!   metadata blob twice, or the root is not a directory; with `verity=on` or `require`, the
//!   manifest's `fsVerityData` cannot be read, has an entry that is not a sha256 digest, two
//!   different digests for one blob, or more than 2^20 entries.
//! - `EFBIG`: the manifest is larger than `MAX_MANIFEST_SIZE`, or the metadata blobs
//!   together are larger than `MAX_METADATA_TOTAL` (checked from their sizes, before any is
//!   read).
//!
//! With `verity=on` or `require`, a chunk blob that fails its check (see `blob.rs`: a digest
//! other than the recorded one, no recorded digest, no fs-verity under `require`) is not a
//! mount error: each read that needs it fails with `EIO` and a rate-limited log line naming it.
//!
//! Bounds: a mount holds at most `MAX_METADATA_TOTAL` bytes of metadata (plus the manifest,
//! freed once parsed), whatever the number of layers; every read and hash runs in steps of at
//! most 1 MiB with a `cond_resched()` between them, so that a mount of the largest image
//! accepted takes long but never stalls a CPU.

#![forbid(unsafe_code)]

use crate::blob::{self, BlobCache, BlobPath, OpenError, Verity};
use crate::decompress::DecompressedChunks;
use crate::meta::{Blob, Dir, Inode, Layer, Loaded, MerkleTree, Metadata, TreeError};
use crate::nlink::Nlinks;
use crate::PuzzleFs;
use core::fmt;
use kernel::c_str;
use kernel::fs::{
    context::{EnumValues, FsContext, ParamSpec, ParamTable, Parsed},
    dir,
    file::{PrivateMount, RegularFile},
    inode::{Params, Type},
    sb::{New, Stat, SuperBlock, MAX_STACK_DEPTH},
    seq::SeqFile,
};
use kernel::pr_err_ratelimited;
use kernel::prelude::*;
use kernel::sched::cond_resched;
use kernel::sha256;
use kernel::shrinker::Shrinker;
use kernel::str::CString;
use kernel::sync::{new_mutex, Arc, Mutex};
use puzzlefs_format::merkle::HASH_LEN;
use puzzlefs_format::paged::DirPlace;
use puzzlefs_format::{
    paged, parse_hex_digest, Digest, Error as FormatError, HexDigest, InodeKind, Manifest,
};

/// Magic number reported by `statfs` ("PZFS", include/uapi/linux/magic.h).
pub(crate) const PUZZLEFS_MAGIC: u32 = kernel::uapi::PUZZLEFS_MAGIC;

/// Largest manifest blob accepted.
const MAX_MANIFEST_SIZE: usize = 16 << 20;
/// Largest total size of the metadata blobs of one image (all layers together).
///
/// The metadata stays in kernel memory (kvmalloc, not swappable) for as long as the image is
/// mounted, so the bound is on the sum, not per layer (256 layers of a per-layer bound would
/// be no bound). 256 MiB is a quarter of the appliance's RAM, and room for about 1.7 million
/// inodes: 85 times the largest metadata in the corpus (2.9 MiB for 20 000 files in one
/// directory, about 150 bytes an inode; the 48 MB Debian tree's is 0.2 MiB). It is also what
/// one mount may cost in reading and hashing, in preemptible 1 MiB steps.
const MAX_METADATA_TOTAL: usize = 256 << 20;
/// Most metadata layers accepted (the builder adds none past it).
const MAX_LAYERS: usize = puzzlefs_format::MAX_LAYERS;
/// Bytes hashed between two `cond_resched()` calls.
const HASH_STEP: usize = 1 << 20;
/// Largest readahead window. Filling a window waits for its chunk reads (64 KiB chunks on
/// average), one after the other: a window of several chunks lets the work item filling the
/// next window read while the reader copies this one (`make bench`: a 128 MiB file reads in
/// 0.75 of the time 128 KiB windows take; 2 and 4 MiB gain nothing more).
const READ_AHEAD: usize = 1 << 20;

/// The mount options.
#[derive(Default)]
pub(crate) struct Options {
    oci_root_dir: Option<CString>,
    image_manifest: Option<Digest>,
    verity: blob::Mode,
}

/// The layer views of one operation, top first.
pub(crate) struct Layers<'b, 'p>(KVec<Layer<'b, 'p>>);

impl<'b, 'p> Layers<'b, 'p> {
    /// Finds inode `ino`: the top-most layer holding it wins (see `find_inode`).
    pub(crate) fn find(&self, ino: u64) -> puzzlefs_format::Result<Inode<'b, 'p>> {
        paged::find_inode(self.0.iter().copied(), ino)
    }

    /// [`Layers::find`] for runs of consecutive inode numbers: `hints` holds, per layer, where
    /// the previous search ended (see `find_inode_hinted`).
    pub(crate) fn find_hinted(
        &self,
        ino: u64,
        hints: &mut [u32],
    ) -> puzzlefs_format::Result<Inode<'b, 'p>> {
        paged::find_inode_hinted(self.0.iter().copied(), ino, hints)
    }

    /// The directory at `place` of layer `layer` (see `paged::DirPlace`).
    pub(crate) fn dir_at(&self, layer: u32, place: &DirPlace) -> Result<Dir<'b, 'p>> {
        let layer = usize::try_from(layer)
            .ok()
            .and_then(|l| self.0.get(l))
            .ok_or(EINVAL)?;
        Ok(layer.blob().dir_at(place))
    }

    /// The number of layers.
    pub(crate) fn count(&self) -> usize {
        self.0.len()
    }
}

/// Per-mount data.
pub(crate) struct Info {
    /// Open chunk blob files.
    blobs: Arc<Mutex<BlobCache>>,
    /// Private clone of the mount of `oci_root_dir`; blobs are opened below it.
    mount: PrivateMount,
    /// The `verity=` policy and the recorded fs-verity digests.
    verity: Verity,
    oci_root_dir: CString,
    manifest: Digest,
    /// The metadata blobs, top layer first.
    layers: KVec<Metadata>,
    /// What parsing each of `layers` at mount read (same order): each operation makes its
    /// [`Blob`] from it, without reading the segment table and the root again.
    headers: KVec<paged::Header>,
    /// Decompressed zstd chunks, given back to memory reclaim on demand.
    chunks: Shrinker<DecompressedChunks>,
    max_ino: u64,
    metadata_bytes: u64,
    /// Link counts above 1 (see `nlink`): the manifest's table, or counted when a
    /// non-directory is first described rather than at mount, so that a mount costs the same
    /// whatever the image's size.
    nlinks: Arc<Mutex<Option<Nlinks>>>,
}

impl Info {
    /// The blob of layer `layer` for one operation: a fresh read budget (see
    /// `puzzlefs_format::paged`), made from what its parse at mount read. The one place a
    /// layer index is checked: one past the layers is [`FormatError::Bounds`].
    fn blob(&self, layer: u32) -> puzzlefs_format::Result<Blob<'_>> {
        let i = usize::try_from(layer).map_err(|_| FormatError::Bounds)?;
        match (self.layers.get(i), self.headers.get(i)) {
            (Some(meta), Some(header)) => Blob::from_header(meta, header),
            _ => Err(FormatError::Bounds),
        }
    }

    /// The layer indexes, top first (at most `MAX_LAYERS`, so each fits a `u32`).
    fn layer_indexes(&self) -> impl Iterator<Item = u32> {
        (0u32..).take(self.layers.len())
    }

    /// Runs `f` on the metadata layers (top first), each with a fresh read budget.
    pub(crate) fn with_layers<'s, R>(
        &'s self,
        f: impl for<'b> FnOnce(&Layers<'b, 's>) -> Result<R>,
    ) -> Result<R> {
        let mut blobs = KVec::with_capacity(self.layers.len(), GFP_KERNEL)?;
        for i in self.layer_indexes() {
            // Parsed at mount: a failure now is a bug.
            let blob = self.blob(i).map_err(|e| {
                pr_err_ratelimited!("metadata layer {}: {}\n", i, e);
                crate::error::format_errno(&e)
            })?;
            blobs.push(blob, GFP_KERNEL)?;
        }
        let mut layers = KVec::with_capacity(blobs.len(), GFP_KERNEL)?;
        for (i, blob) in blobs.iter().enumerate() {
            let layer = blob.layer().map_err(|e| {
                pr_err_ratelimited!("metadata layer {}: {}\n", i, e);
                crate::error::format_errno(&e)
            })?;
            layers.push(layer, GFP_KERNEL)?;
        }
        let layers = Layers(layers);
        f(&layers)
    }

    /// `params` of inode `ino` with its link count ([`Nlinks::apply`]), counting the names of
    /// every inode of the image the first time it is needed if the manifest records no table.
    pub(crate) fn apply_nlink(&self, ino: u64, params: Params) -> Params {
        if params.typ == Type::Dir {
            return params;
        }
        let mut nlinks = self.nlinks.lock();
        nlinks
            .get_or_insert_with(|| Nlinks::count(&self.layers))
            .apply(ino, params)
    }

    /// Finds inode `ino` (the top-most layer holding it wins, as in `find_inode`) and runs `f`
    /// on it with its layer index and position there (what [`Info::with_inode`] takes) and its
    /// kind (read here to tell a whiteout, and not again by `f`).
    ///
    /// Layers are searched one at a time, without allocating, until one holds the inode; each
    /// gets a fresh read budget (see [`Info::with_layers`]). A whiteout is
    /// [`FormatError::Whiteout`], an inode no layer holds [`FormatError::InodeNotFound`].
    pub(crate) fn find_inode<'s, R>(
        &'s self,
        ino: u64,
        f: impl for<'b> FnOnce(u32, u32, InodeKind, Inode<'b, 's>) -> Result<R>,
    ) -> Result<core::result::Result<R, FormatError>> {
        let mut f = Some(f);
        for i in self.layer_indexes() {
            let found = self.blob(i).and_then(|blob| {
                let Some((pos, inode)) = blob.layer()?.find_pos(ino)? else {
                    return Ok(None);
                };
                match inode.kind()? {
                    InodeKind::Wht => Err(FormatError::Whiteout(ino)),
                    kind => Ok(f.take().map(|f| f(i, pos, kind, inode))),
                }
            });
            match found {
                Ok(Some(r)) => return r.map(Ok),
                Ok(None) => {}
                Err(e) => return Ok(Err(e)),
            }
        }
        Ok(Err(FormatError::InodeNotFound(ino)))
    }

    /// Runs `f` on inode `ino`, which [`Info::find_inode`] found at position `pos` of layer
    /// `layer`: only that layer is read, with a fresh read budget.
    pub(crate) fn with_inode<'s, R>(
        &'s self,
        ino: u64,
        layer: u32,
        pos: u32,
        f: impl for<'b> FnOnce(Inode<'b, 's>) -> Result<R>,
    ) -> Result<R> {
        let inode = self.blob(layer).and_then(|blob| {
            let inode = blob.layer()?.inode_at(pos)?;
            if inode.ino()? != ino {
                return Err(FormatError::Corrupt {
                    what: "inode moved in its layer",
                });
            }
            Ok(f(inode))
        });
        match inode {
            Ok(r) => r,
            Err(e) => Err(crate::error::inode_error(ino, e)),
        }
    }

    /// Runs `f` on the blob of layer `layer` (with a fresh read budget), for the operations on
    /// a file or directory whose list's place in it the inode keeps.
    pub(crate) fn with_blob<'s, R>(
        &'s self,
        layer: u32,
        f: impl for<'b> FnOnce(&'b Blob<'s>) -> Result<R>,
    ) -> Result<R> {
        let blob = self.blob(layer).map_err(|e| {
            pr_err_ratelimited!("metadata layer {}: {}\n", layer, e);
            crate::error::format_errno(&e)
        })?;
        f(&blob)
    }

    /// The decompressed-chunk cache.
    pub(crate) fn chunks(&self) -> &DecompressedChunks {
        self.chunks.data()
    }

    /// Opens chunk blob `digest` of the image directory (or finds it open).
    pub(crate) fn open_blob(&self, digest: &Digest) -> Result<Arc<RegularFile>, OpenError> {
        crate::blob::open(&self.mount, &self.blobs, &self.verity, digest)
    }
}

fn error(fc: &FsContext, errno: Error, args: fmt::Arguments<'_>) -> Error {
    fc.error(args);
    errno
}

const OPT_OCI_ROOT_DIR: u8 = 0;
const OPT_IMAGE_MANIFEST: u8 = 1;
const OPT_VERITY: u8 = 2;

/// The values of `verity=`, numbered as [`blob::Mode::from_index`] reads them.
const VERITY_MODES: EnumValues<3> = EnumValues::new([
    (c_str!("off"), 0),
    (c_str!("on"), 1),
    (c_str!("require"), 2),
]);

/// The mount parameters: the VFS refuses unknown ones, a missing or empty string and a
/// `verity=` other than these names ("Bad value for ...") before [`parse_param`].
pub(crate) const PARAMS: ParamTable<3> = ParamTable::new([
    ParamSpec::string(c_str!("oci_root_dir"), OPT_OCI_ROOT_DIR),
    ParamSpec::string(c_str!("image_manifest"), OPT_IMAGE_MANIFEST),
    ParamSpec::enumerated(c_str!("verity"), OPT_VERITY, &VERITY_MODES),
]);

/// Takes `oci_root_dir=`, `image_manifest=` and `verity=`.
pub(crate) fn parse_param(fc: &FsContext, opts: &mut Options, param: &Parsed<'_>) -> Result {
    match (param.opt(), param.string()) {
        (OPT_OCI_ROOT_DIR, Some(dir)) => opts.oci_root_dir = Some(dir.to_cstring()?),
        (OPT_IMAGE_MANIFEST, Some(value)) => {
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
        (OPT_VERITY, _) => {
            opts.verity = blob::Mode::from_index(param.enum_value()).ok_or(EINVAL)?;
        }
        _ => return Err(EINVAL),
    }
    Ok(())
}

/// Opens blob `digest` (a regular file, reached without following any symbolic link).
fn open_blob(
    fc: &FsContext,
    mount: &PrivateMount,
    dir: &CStr,
    what: &str,
    digest: &Digest,
) -> Result<RegularFile> {
    let path = BlobPath::new(digest);
    mount.open(path.as_cstr()?).map_err(|e| {
        let why = if e.to_errno() == -(kernel::bindings::ELOOP as i32) {
            " (a symbolic link: blobs must be regular files)"
        } else if e == EINVAL {
            " (not a regular file)"
        } else {
            ""
        };
        error(
            fc,
            e,
            format_args!("cannot open {} blob {}/{}: {:?}{}", what, dir, path, e, why),
        )
    })
}

/// Reads an open blob whole (manifest and metadata only) and checks its sha256, in steps.
fn read_verified(
    fc: &FsContext,
    file: &RegularFile,
    what: &str,
    digest: &Digest,
    max: usize,
) -> Result<KVVec<u8>> {
    let hex = HexDigest(digest);
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
    // The bytes stay in memory for as long as the image is mounted: not in the page cache too.
    file.drop_cached(0, u64::MAX);
    let mut hash = sha256::Sha256::new();
    for step in bytes.chunks(HASH_STEP) {
        hash.update(step);
        cond_resched();
    }
    let actual = hash.finish();
    if actual != *digest {
        return Err(error(
            fc,
            EBADMSG,
            format_args!("{} blob {} has sha256 {}", what, hex, HexDigest(&actual)),
        ));
    }
    Ok(bytes)
}

/// The Merkle tree of metadata blob `digest` (of `len` bytes), if the manifest (its bytes)
/// names one and its top block gives the fs-verity digest the manifest records for the blob.
/// A tree that cannot be used is not a mount error (the blob is read whole and hashed
/// instead, as for an image without trees): a log line says why. A manifest whose entry for
/// the blob cannot be read is `EUCLEAN`.
fn merkle_tree(
    fc: &FsContext,
    mount: &PrivateMount,
    manifest: &[u8],
    digest: &Digest,
    len: u64,
) -> Result<Option<MerkleTree>> {
    let hex = HexDigest(digest);
    // A fresh parse, with a fresh read budget: each search charges the whole entry list, and
    // an image may have 256 layers.
    let entry = Manifest::parse(manifest).and_then(|m| {
        let e = m.verity_entry_for(digest)?;
        Ok(e.and_then(|e| Some((e.merkle_tree?, <[u8; HASH_LEN]>::try_from(e.verity)))))
    });
    let entry = entry.map_err(|e| {
        error(
            fc,
            EUCLEAN,
            format_args!("metadata blob {}: fsVerityData: {}", hex, e),
        )
    })?;
    let Some((tree, verity)) = entry else {
        return Ok(None);
    };
    let Ok(verity) = verity else {
        pr_err_ratelimited!(
            "metadata blob {}: recorded fs-verity digest is not a sha256 digest; reading it whole\n",
            hex
        );
        return Ok(None);
    };
    let opened = BlobPath::new(&tree)
        .as_cstr()
        .and_then(|path| mount.open(path))
        .map_err(TreeError::Read)
        .and_then(|tree_file| MerkleTree::new(tree_file, tree, len, &verity));
    match opened {
        Ok(t) => Ok(Some(t)),
        Err(e) => {
            pr_err_ratelimited!(
                "metadata blob {}: Merkle tree blob {}: {}; reading the blob whole\n",
                hex,
                HexDigest(&tree),
                e
            );
            Ok(None)
        }
    }
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
    sb.set_magic(PUZZLEFS_MAGIC).set_read_ahead(READ_AHEAD);

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
    let manifest_file = open_blob(fc, &mount, &dir, "manifest", &manifest_digest)?;
    let manifest_bytes = read_verified(
        fc,
        &manifest_file,
        "manifest",
        &manifest_digest,
        MAX_MANIFEST_SIZE,
    )?;
    drop(manifest_file);
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
    let recorded = Nlinks::recorded(&manifest, &manifest_digest);
    let verity = Verity::new(opts.verity, &manifest)
        .map_err(|e| error(fc, e.errno(), format_args!("manifest {}: {}", hex, e)))?;
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

    // First every blob is opened and sized, so that duplicates and an oversized total are
    // refused before any memory is allocated for them or any byte read.
    let mut blobs: KVec<(Digest, RegularFile)> = KVec::with_capacity(count, GFP_KERNEL)?;
    let mut total = 0usize;
    for blob in manifest
        .layers()
        .map_err(|e| error(fc, EUCLEAN, format_args!("manifest {}: {}", hex, e)))?
    {
        cond_resched();
        let blob = blob.map_err(|e| error(fc, EUCLEAN, format_args!("manifest {}: {}", hex, e)))?;
        let blob_hex = HexDigest(&blob.digest);
        if blob.compressed || blob.offset != 0 {
            return Err(error(
                fc,
                EUCLEAN,
                format_args!(
                    "manifest {}: metadata blob {} is compressed or at an offset",
                    hex, blob_hex
                ),
            ));
        }
        // At most `MAX_LAYERS` (256) blobs: the quadratic check is at most 32640 comparisons.
        if blobs.iter().any(|(d, _)| *d == blob.digest) {
            return Err(error(
                fc,
                EUCLEAN,
                format_args!(
                    "manifest {}: metadata blob {} is listed more than once",
                    hex, blob_hex
                ),
            ));
        }
        let file = open_blob(fc, &mount, &dir, "metadata", &blob.digest)?;
        let size = file.size().ok().and_then(|s| usize::try_from(s).ok());
        let Some(new_total) = size
            .and_then(|s| total.checked_add(s))
            .filter(|t| *t <= MAX_METADATA_TOTAL)
        else {
            return Err(error(
                fc,
                EFBIG,
                format_args!(
                    "manifest {}: metadata blobs larger than {} bytes in total (at blob {})",
                    hex, MAX_METADATA_TOTAL, blob_hex
                ),
            ));
        };
        total = new_total;
        blobs.push((blob.digest, file), GFP_KERNEL)?;
    }

    let mut layers = KVec::with_capacity(count, GFP_KERNEL)?;
    let mut headers = KVec::with_capacity(count, GFP_KERNEL)?;
    let (mut max_ino, mut metadata_bytes) = (0u64, 0u64);
    for (digest, file) in blobs {
        // A blob with the fs-verity digest the manifest records, or with a Merkle tree that
        // gives it, is read page by page as operations need it (see `meta`); any other is read
        // whole and hashed now.
        // The total of the sizes read at open is checked above; a blob that grew since then is
        // held to what is left of it (read whole: refused; a tree is checked for the size the
        // manifest's digest records, so one of another size is not used).
        let left = MAX_METADATA_TOTAL.saturating_sub(usize::try_from(metadata_bytes)?);
        let len = file.size()?;
        let tree = if verity.verified(&digest, &file) {
            Some(None)
        } else if usize::try_from(len).is_ok_and(|l| l <= left) {
            merkle_tree(fc, &mount, &manifest_bytes, &digest, len)?.map(Some)
        } else {
            None
        };
        let meta = if let Some(tree) = tree {
            Metadata::Verified {
                file,
                len,
                digest,
                loaded: Loaded::new(len)?,
                tree,
            }
        } else {
            Metadata::Mem(read_verified(fc, &file, "metadata", &digest, left)?)
        };
        {
            let parsed = Blob::parse(&meta)
                .and_then(|m| Ok((m.layer()?.max_ino()?.unwrap_or(0), m.header()?)));
            let (top, header) = parsed.map_err(|e| {
                error(
                    fc,
                    crate::error::format_errno(&e),
                    format_args!("metadata blob {}: {}", HexDigest(&digest), e),
                )
            })?;
            max_ino = max_ino.max(top);
            headers.push(header, GFP_KERNEL)?;
        }
        metadata_bytes = metadata_bytes.saturating_add(meta.size());
        layers.push(meta, GFP_KERNEL)?;
    }

    let info = Info {
        blobs: Arc::pin_init(BlobCache::new(), GFP_KERNEL)?,
        mount,
        verity,
        oci_root_dir: dir,
        manifest: manifest_digest,
        layers,
        headers,
        chunks: Shrinker::register(
            c_str!("puzzlefs-chunks"),
            Arc::pin_init(DecompressedChunks::new(), GFP_KERNEL)?,
        )?,
        max_ino,
        metadata_bytes,
        nlinks: Arc::pin_init(new_mutex!(recorded), GFP_KERNEL)?,
    };
    let root_kind = info.with_layers(|blobs| {
        let root = blobs.find(puzzlefs_format::ROOT_INO).and_then(|i| i.kind());
        Ok(root)
    })?;
    match root_kind {
        Ok(InodeKind::Dir) => {
            for meta in info.layers.iter() {
                meta.ask_windows();
            }
            Ok(info)
        }
        Ok(kind) => Err(error(
            fc,
            EUCLEAN,
            format_args!("image {}: root inode is a {:?}, not a directory", hex, kind),
        )),
        Err(e) => Err(error(
            fc,
            crate::error::format_errno(&e),
            format_args!("image {}: root inode: {}", hex, e),
        )),
    }
}

/// What `statfs` reports: the metadata size, the highest inode number and an fsid made from
/// the manifest digest.
pub(crate) fn statfs(info: &Info) -> Stat {
    Stat {
        magic: PUZZLEFS_MAGIC,
        namelen: dir::NAME_MAX as i64,
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

/// Writes the options for `/proc/mounts` (`verity=` unless it is `off`, the default).
pub(crate) fn show_options(info: &Info, seq: &mut SeqFile) {
    seq.show_option(b"oci_root_dir", info.oci_root_dir.as_bytes());
    seq.show_option(b"image_manifest", &HexDigest(&info.manifest).digits());
    if info.verity.mode() != blob::Mode::Off {
        seq.show_option(b"verity", info.verity.mode().name().as_bytes());
    }
}
