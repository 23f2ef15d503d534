//! `puzzlefs extract`: an image back to a directory tree.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use puzzlefs_format::InodeKind;

use crate::error::{fmt_at, io_at, io_op, Context, Error, Result};
use crate::image::{self, BlobCache, Image};

/// Decompressed chunk blobs kept for the extraction's threads (a pack of
/// small files serves many files, written by different threads).
const CACHE_BYTES: usize = 64 << 20;
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
                return Err(Error::NotEmpty {
                    path: dest.to_owned(),
                });
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            fs::create_dir_all(dest).map_err(io_at(dest))?
        }
        Err(e) => return Err(io_at(dest)(e)),
    }
    let root = sys::is_root();
    let blobs = img.blobs();
    let layers = image::views(&blobs)?;
    let mut first_path: HashMap<u64, PathBuf> = HashMap::new();
    // Regular files are written after the walk, on all cores; their hard
    // links are made after that.
    let mut files: Vec<(PathBuf, u64, Attrs)> = Vec::new();
    let mut file_inos: HashSet<u64> = HashSet::new();
    let mut links: Vec<(PathBuf, PathBuf)> = Vec::new();
    let mut dirs: Vec<(PathBuf, Attrs)> = Vec::new();
    let mut stats = ExtractStats::default();
    image::walk(&layers, |node| {
        let mut path = dest.to_path_buf();
        for c in &node.path {
            path.push(std::ffi::OsStr::from_bytes(c));
        }
        let i = &node.inode;
        let ino = i.ino();
        let kind = i.kind().map_err(fmt_at(path.display()))?;
        let ctx = |e| fmt_at(format_args!("{}: inode {ino}", path.display()))(e);
        if kind != InodeKind::Dir {
            if let Some(first) = first_path.get(&ino) {
                if file_inos.contains(&ino) {
                    links.push((first.clone(), path));
                } else {
                    fs::hard_link(first, &path).map_err(io_at(&path))?;
                }
                stats.paths += 1;
                return Ok(());
            }
        }
        match kind {
            InodeKind::Dir => {
                if !node.path.is_empty() {
                    fs::create_dir(&path).map_err(io_at(&path))?;
                }
            }
            InodeKind::File => {
                // Checked here, so that the workers meet no surprise.
                i.file().map_err(ctx)?;
            }
            InodeKind::Lnk => {
                let target = i
                    .symlink_target()
                    .map_err(ctx)?
                    .ok_or_else(|| Error::NoTarget { path: path.clone() })?;
                std::os::unix::fs::symlink(std::ffi::OsStr::from_bytes(target), &path)
                    .map_err(io_at(&path))?;
            }
            InodeKind::Fifo | InodeKind::Sock => {
                let t = if kind == InodeKind::Fifo {
                    libc::S_IFIFO
                } else {
                    libc::S_IFSOCK
                };
                sys::mknod(&path, t | 0o600, 0).map_err(io_at(&path))?;
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
                    .map_err(io_at(&path))?;
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
        match kind {
            InodeKind::Dir => dirs.push((path, attrs)),
            InodeKind::File => {
                file_inos.insert(ino);
                first_path.insert(ino, path.clone());
                files.push((path, ino, attrs));
            }
            _ => {
                attrs.apply(&path, None, root, progress)?;
                first_path.insert(ino, path);
            }
        }
        Ok(())
    })?;
    stats.bytes = write_files(img, &files, root, progress)?;
    for (first, path) in links {
        fs::hard_link(&first, &path).map_err(io_at(&path))?;
    }
    // Directory attributes are applied last, deepest first, so that
    // read-only directories do not block their own contents.
    for (path, attrs) in dirs.iter().rev() {
        attrs.apply(path, None, root, progress)?;
    }
    Ok(stats)
}

/// Writes the regular files (path, inode, attributes) on all cores, each
/// thread with its own view of the metadata and one shared cache of
/// decompressed chunks; returns the bytes written.
fn write_files(
    img: &Image<'_>,
    files: &[(PathBuf, u64, Attrs)],
    root: bool,
    progress: &Progress,
) -> Result<u64> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(files.len().max(1));
    let cache = BlobCache::new(CACHE_BYTES);
    let next = AtomicUsize::new(0);
    let bytes = AtomicU64::new(0);
    let failed = AtomicBool::new(false);
    let first_err: Mutex<Option<Error>> = Mutex::new(None);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                let r = (|| -> Result<()> {
                    let blobs = img.blobs();
                    let layers = image::views(&blobs)?;
                    while !failed.load(Ordering::Relaxed) {
                        let Some((path, ino, attrs)) =
                            files.get(next.fetch_add(1, Ordering::Relaxed))
                        else {
                            break;
                        };
                        let inode = puzzlefs_format::find_inode(layers.iter().copied(), *ino)
                            .and_then(|i| i.file())
                            .map_err(fmt_at(format_args!("{}: inode {ino}", path.display())))?;
                        let mut f = fs::OpenOptions::new()
                            .write(true)
                            .create_new(true)
                            .mode(0o600)
                            .open(path)
                            .map_err(io_at(&path))?;
                        let n = image::read_file(img.oci, &cache, &inode, &mut f)
                            .context_with(|| path.display().to_string())?;
                        bytes.fetch_add(n, Ordering::Relaxed);
                        attrs.apply(path, Some(&f), root, progress)?;
                    }
                    Ok(())
                })();
                if let Err(e) = r {
                    failed.store(true, Ordering::Relaxed);
                    first_err
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .get_or_insert(e);
                }
            });
        }
    });
    match first_err.into_inner().unwrap_or_else(|p| p.into_inner()) {
        Some(e) => Err(e),
        None => Ok(bytes.into_inner()),
    }
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
            .map_err(io_op(path, "chown"))?;
        } else {
            self.set_xattrs(path, file, progress)?;
        }
        if self.kind != InodeKind::Lnk {
            let mode = fs::Permissions::from_mode(u32::from(self.perm));
            match file {
                Some(f) => f.set_permissions(mode),
                None => fs::set_permissions(path, mode),
            }
            .map_err(io_op(path, "chmod"))?;
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
                    return Err(io_op(path, format!("setting xattr {name}"))(e));
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
