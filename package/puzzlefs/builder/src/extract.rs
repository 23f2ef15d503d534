//! `puzzlefs extract`: an image back to a directory tree.

use std::collections::HashMap;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use puzzlefs_format::InodeKind;

use crate::image::{self, BlobCache, Image};
use crate::oci::OciDir;
use crate::progress::Progress;
use crate::sys;

/// What an extraction did.
#[derive(Debug, Default, Clone)]
pub struct ExtractStats {
    /// Paths created (hard links included).
    pub paths: u64,
    /// Bytes of file data written.
    pub bytes: u64,
    /// Entries skipped (device nodes when not root, unknown kinds).
    pub skipped: u64,
}

/// Extracts image `tag` of `oci_dir` into `dest` (created; must not exist
/// or be empty).
pub fn extract(
    oci_dir: &Path,
    tag: &str,
    dest: &Path,
    progress: &Progress,
) -> Result<ExtractStats> {
    let oci = OciDir::open(oci_dir)?;
    let img = Image::open_tag(&oci, tag)?;
    extract_image(&img, dest, progress)
}

/// Extracts a loaded image into `dest`.
pub fn extract_image(img: &Image<'_>, dest: &Path, progress: &Progress) -> Result<ExtractStats> {
    match fs::read_dir(dest) {
        Ok(mut d) => {
            if d.next().is_some() {
                bail!("{}: destination exists and is not empty", dest.display());
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            fs::create_dir_all(dest).with_context(|| format!("{}", dest.display()))?
        }
        Err(e) => return Err(e).with_context(|| format!("{}", dest.display())),
    }
    let root = sys::is_root();
    let blobs = img.blobs();
    let layers = image::views(&blobs)?;
    let mut cache = BlobCache::default();
    let mut first_path: HashMap<u64, PathBuf> = HashMap::new();
    let mut dirs: Vec<(PathBuf, Attrs)> = Vec::new();
    let mut stats = ExtractStats::default();
    image::walk(&layers, |node| {
        let mut path = dest.to_path_buf();
        for c in &node.path {
            path.push(std::ffi::OsStr::from_bytes(c));
        }
        let i = &node.inode;
        let ino = i.ino();
        let kind = i.kind().map_err(|e| anyhow!("{}: {e}", path.display()))?;
        let ctx = |e: puzzlefs_format::Error| anyhow!("{}: inode {ino}: {e}", path.display());
        if kind != InodeKind::Dir {
            if let Some(first) = first_path.get(&ino) {
                fs::hard_link(first, &path).with_context(|| format!("{}", path.display()))?;
                stats.paths += 1;
                return Ok(());
            }
        }
        // The new regular file, kept open to set its attributes.
        let mut open: Option<fs::File> = None;
        match kind {
            InodeKind::Dir => {
                if !node.path.is_empty() {
                    fs::create_dir(&path).with_context(|| format!("{}", path.display()))?;
                }
            }
            InodeKind::File => {
                let file = i.file().map_err(ctx)?;
                let f = open.insert(
                    fs::OpenOptions::new()
                        .write(true)
                        .create_new(true)
                        .mode(0o600)
                        .open(&path)
                        .with_context(|| format!("{}", path.display()))?,
                );
                stats.bytes += image::read_file(img.oci, &mut cache, &file, f)
                    .with_context(|| format!("{}", path.display()))?;
            }
            InodeKind::Lnk => {
                let target = i
                    .symlink_target()
                    .map_err(ctx)?
                    .ok_or_else(|| anyhow!("{}: symlink without target", path.display()))?;
                std::os::unix::fs::symlink(std::ffi::OsStr::from_bytes(target), &path)
                    .with_context(|| format!("{}", path.display()))?;
            }
            InodeKind::Fifo | InodeKind::Sock => {
                let t = if kind == InodeKind::Fifo {
                    libc::S_IFIFO
                } else {
                    libc::S_IFSOCK
                };
                sys::mknod(&path, t | 0o600, 0).with_context(|| format!("{}", path.display()))?;
            }
            InodeKind::Chr | InodeKind::Blk => {
                if !root {
                    progress.detail(&format!(
                        "{}: device node skipped (not root)",
                        path.display()
                    ));
                    stats.skipped += 1;
                    return Ok(());
                }
                let r = i
                    .rdev()
                    .map_err(ctx)?
                    .unwrap_or(puzzlefs_format::Rdev { major: 0, minor: 0 });
                let t = if kind == InodeKind::Chr {
                    libc::S_IFCHR
                } else {
                    libc::S_IFBLK
                };
                sys::mknod(&path, t | 0o600, sys::makedev(r.major, r.minor))
                    .with_context(|| format!("{}", path.display()))?;
            }
            InodeKind::Unknown | InodeKind::Wht => {
                progress.info(&format!(
                    "{}: inode {ino} of unknown kind skipped",
                    path.display()
                ));
                stats.skipped += 1;
                return Ok(());
            }
        }
        stats.paths += 1;
        let mut xattrs = Vec::new();
        for x in i.xattrs().map_err(ctx)? {
            let x = x.map_err(ctx)?;
            xattrs.push((x.key.to_vec(), x.value.to_vec()));
        }
        let attrs = Attrs {
            kind,
            uid: i.uid(),
            gid: i.gid(),
            perm: i.permissions(),
            xattrs,
        };
        if kind == InodeKind::Dir {
            dirs.push((path, attrs));
        } else {
            attrs.apply(&path, open.as_ref(), root, progress)?;
            first_path.insert(ino, path);
        }
        Ok(())
    })?;
    // Directory attributes are applied last, deepest first, so that
    // read-only directories do not block their own contents.
    for (path, attrs) in dirs.iter().rev() {
        attrs.apply(path, None, root, progress)?;
    }
    Ok(stats)
}

/// What is applied to a path once its contents are in place.
struct Attrs {
    kind: InodeKind,
    uid: u32,
    gid: u32,
    perm: u16,
    xattrs: Vec<(Vec<u8>, Vec<u8>)>,
}

impl Attrs {
    /// As root: owner, then mode (a chown clears set-id bits), then xattrs
    /// (a chown also clears `security.capability`). Otherwise xattrs before
    /// the mode, which may take away the write permission user xattrs need.
    /// Through the open file when there is one.
    fn apply(
        &self,
        path: &Path,
        file: Option<&fs::File>,
        root: bool,
        progress: &Progress,
    ) -> Result<()> {
        if root {
            match file {
                Some(f) => std::os::unix::fs::fchown(f, Some(self.uid), Some(self.gid)),
                None => sys::lchown(path, self.uid, self.gid),
            }
            .with_context(|| format!("{}: chown", path.display()))?;
        } else {
            self.set_xattrs(path, file, progress)?;
        }
        if self.kind != InodeKind::Lnk {
            let mode = fs::Permissions::from_mode(u32::from(self.perm));
            match file {
                Some(f) => f.set_permissions(mode),
                None => fs::set_permissions(path, mode),
            }
            .with_context(|| format!("{}: chmod", path.display()))?;
        }
        if root {
            self.set_xattrs(path, file, progress)?;
        }
        Ok(())
    }

    fn set_xattrs(&self, path: &Path, file: Option<&fs::File>, progress: &Progress) -> Result<()> {
        for (key, value) in &self.xattrs {
            let r = match file {
                Some(f) => sys::fset_xattr(f, key, value),
                None => sys::set_xattr(path, key, value),
            };
            if let Err(e) = r {
                let name = String::from_utf8_lossy(key);
                if key.starts_with(b"user.") && self.kind != InodeKind::Lnk {
                    return Err(e)
                        .with_context(|| format!("{}: setting xattr {name}", path.display()));
                }
                progress.detail(&format!(
                    "{}: xattr {name} not restored: {e}",
                    path.display()
                ));
            }
        }
        Ok(())
    }
}
