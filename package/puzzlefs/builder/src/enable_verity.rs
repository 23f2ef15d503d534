//! `puzzlefs enable-fs-verity`: turn fs-verity on for every blob of an image
//! and check that the kernel's measurement of each is the one the image
//! records.
//!
//! The image manifest is authenticated by its digest (the tag names it); its
//! `fsVerityData` gives, for every chunk and metadata blob, the fs-verity
//! digest (sha256, 4 KiB blocks, no salt) the blob must have. Once fs-verity
//! is on, the file's contents can no longer change and every read of it is
//! checked against its Merkle tree by the kernel, so checking the measurement
//! once here (and at open by the puzzlefs driver's `verity=` option) covers
//! all later reads. The manifest has no entry of its own: its measurement is
//! computed from its bytes, which were checked against the tag's digest.
//!
//! Running it again is harmless: a blob that already has fs-verity with the
//! right digest is left as it is; one with another digest is an error naming
//! it (its contents differ from what the image was built with).

use std::collections::BTreeMap;
use std::fs::File;
use std::io;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

use puzzlefs_format::{Digest, HexDigest, InodeKind, Manifest, MetadataBlob};

use crate::oci::{OciDir, OciError};
use crate::verity::{self, BLOCK, HASH_ALG_SHA256};

/// Errors of [`enable_fs_verity`].
#[derive(Debug, thiserror::Error)]
pub enum VerityError {
    /// Reading the OCI directory, the manifest or a metadata blob failed.
    #[error(transparent)]
    Oci(#[from] OciError),
    /// The manifest or a metadata blob does not parse.
    #[error("{what} {blob}: {error}")]
    Format {
        /// `manifest` or `metadata blob`.
        what: &'static str,
        /// Its digest (hex).
        blob: String,
        /// The format error.
        error: puzzlefs_format::Error,
    },
    /// A blob the image uses has no entry in the manifest's `fsVerityData`.
    #[error("blob {blob}: no fs-verity digest recorded in manifest {manifest}")]
    NoEntry {
        /// The blob (hex).
        blob: String,
        /// The manifest (hex).
        manifest: String,
    },
    /// A recorded entry is not a sha256 digest.
    #[error("blob {blob}: recorded fs-verity digest has {len} bytes, not 32")]
    BadEntry {
        /// The blob (hex).
        blob: String,
        /// Its length.
        len: usize,
    },
    /// The file system holding the blob cannot do fs-verity.
    #[error("{path}: the file system does not support fs-verity (ext4 needs `-O verity`)")]
    Unsupported {
        /// The blob path.
        path: PathBuf,
    },
    /// The blob has fs-verity with another algorithm or block size.
    #[error("{path}: fs-verity uses hash algorithm {alg} with a {size}-byte digest, not sha256")]
    OtherAlgorithm {
        /// The blob path.
        path: PathBuf,
        /// `fsverity_digest.digest_algorithm`.
        alg: u16,
        /// `fsverity_digest.digest_size`.
        size: u16,
    },
    /// The kernel's measurement of the blob is not the recorded one.
    #[error("blob {path}: fs-verity digest is {actual}, the image records {expected}")]
    Mismatch {
        /// The blob path.
        path: PathBuf,
        /// Recorded (hex).
        expected: String,
        /// Measured (hex).
        actual: String,
    },
    /// An ioctl or open failed.
    #[error("{path}: {what}: {source}")]
    Io {
        /// The blob path.
        path: PathBuf,
        /// What was being done.
        what: &'static str,
        /// The error.
        source: io::Error,
    },
}

type Result<T> = std::result::Result<T, VerityError>;

/// What [`enable_fs_verity`] did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Summary {
    /// Blobs fs-verity was enabled on now.
    pub enabled: usize,
    /// Blobs that already had it (with the right digest).
    pub already: usize,
}

/// Enables fs-verity on the manifest and every blob of image `tag`, and
/// checks each blob's measurement against the manifest.
pub fn enable_fs_verity(oci_dir: &Path, tag: &str) -> Result<Summary> {
    let oci = OciDir::open(oci_dir)?;
    let manifest_digest = oci.resolve(tag)?;
    let manifest_bytes = oci.read_blob(&manifest_digest)?;
    let manifest_hex = hex::encode(manifest_digest);
    let format_err = |what, blob: &Digest| {
        let blob = hex::encode(blob);
        move |error| VerityError::Format {
            what,
            blob: blob.clone(),
            error,
        }
    };
    let manifest =
        Manifest::parse(&manifest_bytes).map_err(format_err("manifest", &manifest_digest))?;

    // The recorded digests, by blob.
    let mut expected: BTreeMap<Digest, [u8; 32]> = BTreeMap::new();
    for e in manifest
        .verity_entries()
        .map_err(format_err("manifest", &manifest_digest))?
    {
        let e = e.map_err(format_err("manifest", &manifest_digest))?;
        let v = <[u8; 32]>::try_from(e.verity).map_err(|_| VerityError::BadEntry {
            blob: hex::encode(e.digest),
            len: e.verity.len(),
        })?;
        expected.insert(e.digest, v);
    }

    // Every blob the image reads must have an entry: the metadata layers and
    // the chunks of every file of every layer.
    let no_entry = |blob: &Digest| VerityError::NoEntry {
        blob: hex::encode(blob),
        manifest: manifest_hex.clone(),
    };
    for layer in manifest
        .layers()
        .map_err(format_err("manifest", &manifest_digest))?
    {
        let layer = layer.map_err(format_err("manifest", &manifest_digest))?;
        if !expected.contains_key(&layer.digest) {
            return Err(no_entry(&layer.digest));
        }
        let bytes = oci.read_blob(&layer.digest)?;
        let err = format_err("metadata blob", &layer.digest);
        let blob = MetadataBlob::parse(&bytes).map_err(&err)?;
        for inode in blob.layer().map_err(&err)?.inodes() {
            if inode.kind().map_err(&err)? != InodeKind::File {
                continue;
            }
            for chunk in inode.file().map_err(&err)?.chunks() {
                let digest = chunk.map_err(&err)?.blob.digest;
                if !expected.contains_key(&digest) {
                    return Err(no_entry(&digest));
                }
            }
        }
    }

    let mut summary = Summary::default();
    let mut blobs: Vec<(Digest, [u8; 32])> = expected.into_iter().collect();
    // The manifest last: its measurement comes from its own checked bytes.
    blobs.push((manifest_digest, verity::measure(&manifest_bytes)));
    for (digest, want) in &blobs {
        let path = oci.blob_path(digest);
        if enable(&path)? {
            summary.enabled += 1;
        } else {
            summary.already += 1;
        }
        let got = measure(&path)?;
        if got != *want {
            return Err(VerityError::Mismatch {
                path,
                expected: HexDigest(want).to_string(),
                actual: HexDigest(&got).to_string(),
            });
        }
    }
    Ok(summary)
}

/// `struct fsverity_enable_arg` (linux/fsverity.h).
#[repr(C)]
struct EnableArg {
    version: u32,
    hash_algorithm: u32,
    block_size: u32,
    salt_size: u32,
    salt_ptr: u64,
    sig_size: u32,
    reserved1: u32,
    sig_ptr: u64,
    reserved2: [u64; 11],
}

/// `struct fsverity_digest` with room for the largest digest (sha512).
#[repr(C)]
struct DigestArg {
    digest_algorithm: u16,
    digest_size: u16,
    digest: [u8; 64],
}

/// `_IOW('f', 133, struct fsverity_enable_arg)`.
const FS_IOC_ENABLE_VERITY: libc::c_ulong =
    (1 << 30) | ((std::mem::size_of::<EnableArg>() as libc::c_ulong) << 16) | (0x66 << 8) | 133;
/// `_IOWR('f', 134, struct fsverity_digest)` (the fixed header: 4 bytes).
const FS_IOC_MEASURE_VERITY: libc::c_ulong = (3 << 30) | (4 << 16) | (0x66 << 8) | 134;

const _: () = assert!(std::mem::size_of::<EnableArg>() == 128);
const _: () = assert!(FS_IOC_ENABLE_VERITY == 0x4080_6685);
const _: () = assert!(FS_IOC_MEASURE_VERITY == 0xc004_6686);

fn open(path: &Path) -> Result<File> {
    // Read-only: the kernel refuses to enable fs-verity on a file open for
    // writing (ETXTBSY), and so would any other writer.
    File::open(path).map_err(|source| VerityError::Io {
        path: path.to_owned(),
        what: "open",
        source,
    })
}

fn unsupported(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EOPNOTSUPP) | Some(libc::ENOTTY)
    )
}

/// Enables fs-verity on `path`; false if it was already enabled.
fn enable(path: &Path) -> Result<bool> {
    let f = open(path)?;
    let arg = EnableArg {
        version: 1,
        hash_algorithm: HASH_ALG_SHA256.into(),
        block_size: BLOCK as u32,
        salt_size: 0,
        salt_ptr: 0,
        sig_size: 0,
        reserved1: 0,
        sig_ptr: 0,
        reserved2: [0; 11],
    };
    // SAFETY: the fd is open for the call; `arg` is a valid
    // fsverity_enable_arg with no salt or signature pointers.
    let rc = unsafe { libc::ioctl(f.as_raw_fd(), FS_IOC_ENABLE_VERITY as _, &arg) };
    if rc == 0 {
        return Ok(true);
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EEXIST) => Ok(false),
        _ if unsupported(&e) => Err(VerityError::Unsupported {
            path: path.to_owned(),
        }),
        _ => Err(VerityError::Io {
            path: path.to_owned(),
            what: "FS_IOC_ENABLE_VERITY",
            source: e,
        }),
    }
}

/// The kernel's fs-verity measurement of `path` (sha256 only).
fn measure(path: &Path) -> Result<[u8; 32]> {
    let f = open(path)?;
    let mut arg = DigestArg {
        digest_algorithm: 0,
        digest_size: 64,
        digest: [0; 64],
    };
    // SAFETY: the fd is open for the call; `arg` has room for
    // `digest_size` bytes after its header.
    let rc = unsafe { libc::ioctl(f.as_raw_fd(), FS_IOC_MEASURE_VERITY as _, &mut arg) };
    if rc != 0 {
        let e = io::Error::last_os_error();
        if unsupported(&e) {
            return Err(VerityError::Unsupported {
                path: path.to_owned(),
            });
        }
        return Err(VerityError::Io {
            path: path.to_owned(),
            what: "FS_IOC_MEASURE_VERITY",
            source: e,
        });
    }
    if arg.digest_algorithm != u16::from(HASH_ALG_SHA256) || arg.digest_size != 32 {
        return Err(VerityError::OtherAlgorithm {
            path: path.to_owned(),
            alg: arg.digest_algorithm,
            size: arg.digest_size,
        });
    }
    let mut d = [0u8; 32];
    d.copy_from_slice(&arg.digest[..32]);
    Ok(d)
}
