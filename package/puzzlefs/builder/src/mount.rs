//! `puzzlefs mount`: resolve a tag and ask the kernel driver to mount it.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use anyhow::{bail, Context, Result};

use crate::oci::OciDir;

/// The `mount(2)` arguments for image `tag` of `oci_dir`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountArgs {
    /// Always `none`.
    pub source: String,
    /// Always `puzzlefs`.
    pub fstype: String,
    /// `oci_root_dir=<abs dir>,image_manifest=<hex>`.
    pub data: String,
}

/// Resolves `tag` and builds the mount(2) arguments.
pub fn mount_args(oci_dir: &Path, tag: &str) -> Result<MountArgs> {
    let oci = OciDir::open(oci_dir)?;
    let digest = oci.resolve(tag)?;
    let abs = std::fs::canonicalize(oci_dir).with_context(|| format!("{}", oci_dir.display()))?;
    let abs = abs.to_str().context("OCI directory path is not UTF-8")?;
    if abs.contains(',') {
        bail!("{abs}: the OCI directory path may not contain ',' (mount option separator)");
    }
    Ok(MountArgs {
        source: "none".into(),
        fstype: "puzzlefs".into(),
        data: format!("oci_root_dir={abs},image_manifest={}", hex::encode(digest)),
    })
}

/// Mounts image `tag` of `oci_dir` on `mnt` (read-only).
pub fn mount(oci_dir: &Path, tag: &str, mnt: &Path) -> Result<()> {
    let args = mount_args(oci_dir, tag)?;
    let c = |s: &[u8]| CString::new(s).context("NUL byte in a mount argument");
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
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::ENODEV) {
            bail!(
                "mount {}: the kernel has no puzzlefs file system ({e})",
                mnt.display()
            );
        }
        return Err(e)
            .with_context(|| format!("mount -t puzzlefs -o {} none {}", args.data, mnt.display()));
    }
    Ok(())
}
