//! `puzzlefs mount`: resolve a tag and ask the kernel driver to mount it.

use std::ffi::CString;
use std::fmt;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::oci::{OciDir, OciError};

/// Errors of [`mount_args`] and [`mount`].
#[derive(Debug, thiserror::Error)]
pub enum MountError {
    /// Resolving the tag failed.
    #[error(transparent)]
    Oci(#[from] OciError),
    /// The OCI directory cannot be made absolute.
    #[error("{path}: {source}")]
    Path {
        /// The directory.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
    /// The OCI directory's path cannot be passed as a mount option.
    #[error("{0}: the OCI directory path must be UTF-8 without ',' (the mount option separator)")]
    BadPath(PathBuf),
    /// An argument holds a NUL byte.
    #[error("NUL byte in a mount argument")]
    Nul,
    /// The kernel has no puzzlefs driver.
    #[error("mount {mnt}: the kernel has no puzzlefs file system ({source})")]
    NoDriver {
        /// The mount point.
        mnt: PathBuf,
        /// ENODEV.
        source: io::Error,
    },
    /// mount(2) failed.
    #[error("mount -t puzzlefs -o {data} none {mnt}: {source}")]
    Mount {
        /// The options.
        data: String,
        /// The mount point.
        mnt: PathBuf,
        /// The error.
        source: io::Error,
    },
}

type Result<T> = std::result::Result<T, MountError>;

/// The driver's `verity=` mount option (overlayfs's names and meanings).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Verity {
    /// Chunk blobs are not checked (the driver's default).
    #[default]
    Off,
    /// Chunk blobs with fs-verity must have the digest the image records.
    On,
    /// Every chunk blob must have fs-verity and the recorded digest.
    Require,
}

impl fmt::Display for Verity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Verity::Off => "off",
            Verity::On => "on",
            Verity::Require => "require",
        })
    }
}

/// The `mount(2)` arguments for image `tag` of `oci_dir`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountArgs {
    /// Always `none`.
    pub source: String,
    /// Always `puzzlefs`.
    pub fstype: String,
    /// `oci_root_dir=<abs dir>,image_manifest=<hex>[,verity=<mode>]`.
    pub data: String,
}

/// Resolves `tag` and builds the mount(2) arguments; `verity` other than
/// [`Verity::Off`] adds the driver's `verity=` option.
pub fn mount_args(oci_dir: &Path, tag: &str, verity: Verity) -> Result<MountArgs> {
    let oci = OciDir::open(oci_dir)?;
    let digest = oci.resolve(tag)?;
    let abs = std::fs::canonicalize(oci_dir).map_err(|source| MountError::Path {
        path: oci_dir.to_owned(),
        source,
    })?;
    let s = match abs.to_str() {
        Some(s) if !s.contains(',') => s,
        _ => return Err(MountError::BadPath(abs)),
    };
    let mut data = format!("oci_root_dir={s},image_manifest={}", hex::encode(digest));
    if verity != Verity::Off {
        data.push_str(&format!(",verity={verity}"));
    }
    Ok(MountArgs {
        source: "none".into(),
        fstype: "puzzlefs".into(),
        data,
    })
}

/// Mounts image `tag` of `oci_dir` on `mnt` (read-only).
pub fn mount(oci_dir: &Path, tag: &str, mnt: &Path, verity: Verity) -> Result<()> {
    let args = mount_args(oci_dir, tag, verity)?;
    let c = |s: &[u8]| CString::new(s).map_err(|_| MountError::Nul);
    let source = c(args.source.as_bytes())?;
    let target = c(mnt.as_os_str().as_bytes())?;
    let fstype = c(args.fstype.as_bytes())?;
    let data = c(args.data.as_bytes())?;
    // SAFETY: all pointers are NUL-terminated strings alive for the call.
    let rc = unsafe {
        libc::mount(
            source.as_ptr(),
            target.as_ptr(),
            fstype.as_ptr(),
            libc::MS_RDONLY,
            data.as_ptr().cast(),
        )
    };
    if rc != 0 {
        let source = io::Error::last_os_error();
        if source.raw_os_error() == Some(libc::ENODEV) {
            return Err(MountError::NoDriver {
                mnt: mnt.to_owned(),
                source,
            });
        }
        return Err(MountError::Mount {
            data: args.data,
            mnt: mnt.to_owned(),
            source,
        });
    }
    Ok(())
}
