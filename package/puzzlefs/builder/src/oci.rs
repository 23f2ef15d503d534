//! The OCI directory: `oci-layout`, `index.json` and `blobs/sha256/<hex>`,
//! laid out exactly as the other implementation writes them.
//!
//! Writes are atomic: a blob is written to a temporary file in the blob
//! directory and renamed to its digest; `index.json` is replaced the same
//! way, and only by [`OciDir::commit_tag`] once every blob of the image is
//! in place and synced.
//!
//! Two locks (`flock`): `.puzzlefs.lock`, exclusive, only around the
//! read-modify-write of index.json, so concurrent builds run side by side
//! and serialise only there; `.puzzlefs.gc.lock`, shared by every build for
//! its whole duration and exclusive for `gc`, so that `gc` never deletes the
//! blobs of a build that has not committed its tag yet. Temporary files
//! carry their writer's pid; those of dead writers are swept under the
//! index lock.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use puzzlefs_format::{Digest, MEDIA_TYPE_ROOTFS};

/// Contents of `oci-layout` (no trailing newline).
pub const OCI_LAYOUT: &str = r#"{"imageLayoutVersion":"puzzlefs-dev"}"#;
/// Annotation key holding a tag.
pub const REF_NAME: &str = "org.opencontainers.image.ref.name";

/// Errors of the OCI directory layer.
#[derive(Debug, thiserror::Error)]
pub enum OciError {
    /// An I/O error on a named path (the cause follows in the chain).
    #[error("{path}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
    /// index.json does not parse.
    #[error("{path}: invalid index.json")]
    Index {
        /// The path.
        path: PathBuf,
        /// The error.
        source: serde_json::Error,
    },
    /// The tag is not in index.json.
    #[error("{dir}: no tag {tag:?} in index.json")]
    NoTag {
        /// OCI dir.
        dir: PathBuf,
        /// The tag.
        tag: String,
    },
    /// A descriptor's digest is not `sha256:<64 hex>`.
    #[error("{dir}: bad digest {digest:?} in index.json")]
    BadDigest {
        /// OCI dir.
        dir: PathBuf,
        /// The digest string.
        digest: String,
    },
    /// A blob's content does not hash to its name.
    #[error("{path}: blob content does not match its digest")]
    Corrupt {
        /// The blob path.
        path: PathBuf,
    },
    /// A tag outside the OCI tag grammar.
    #[error("invalid tag {tag:?} (OCI tags are [a-zA-Z0-9_][a-zA-Z0-9._-]{{0,127}})")]
    BadTag {
        /// The tag.
        tag: String,
    },
    /// Not an OCI directory of this format.
    #[error("{path}: not a puzzlefs OCI directory (oci-layout missing or different)")]
    NotOci {
        /// The path.
        path: PathBuf,
    },
}

type Result<T> = std::result::Result<T, OciError>;

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> OciError + '_ {
    move |source| OciError::Io {
        path: path.to_owned(),
        source,
    }
}

/// One descriptor of index.json (field order as the other implementation).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Descriptor {
    /// `sha256:<hex>`.
    pub digest: String,
    /// Blob size in bytes.
    pub size: u64,
    /// Media type (snake_case key on purpose).
    pub media_type: String,
    /// Annotations (the tag).
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    /// Fields this tool does not know, kept as read.
    #[serde(flatten)]
    pub other: serde_json::Map<String, serde_json::Value>,
}

/// index.json.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Index {
    /// Always -1.
    #[serde(rename = "schemaVersion")]
    pub schema_version: i32,
    /// Image manifests, one per tag.
    #[serde(default)]
    pub manifests: Vec<Descriptor>,
    /// Unused, kept as read.
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    /// Fields this tool does not know, kept as read.
    #[serde(flatten)]
    pub other: serde_json::Map<String, serde_json::Value>,
}

impl Default for Index {
    fn default() -> Self {
        Index {
            schema_version: -1,
            manifests: Vec::new(),
            annotations: BTreeMap::new(),
            other: serde_json::Map::new(),
        }
    }
}

impl Index {
    /// The descriptor of `tag`.
    pub fn find(&self, tag: &str) -> Option<&Descriptor> {
        self.manifests
            .iter()
            .find(|d| d.annotations.get(REF_NAME).map(String::as_str) == Some(tag))
    }

    /// Tags in index order.
    pub fn tags(&self) -> Vec<String> {
        self.manifests
            .iter()
            .filter_map(|d| d.annotations.get(REF_NAME).cloned())
            .collect()
    }
}

/// Bytes read into an 8-byte aligned buffer (Cap'n Proto needs alignment).
pub struct Aligned {
    buf: Vec<u8>,
    off: usize,
    len: usize,
}

impl Aligned {
    /// Copies `data` into an aligned buffer.
    pub fn copy_from(data: &[u8]) -> Self {
        let mut a = Aligned::zeroed(data.len());
        a.as_mut().copy_from_slice(data);
        a
    }

    fn zeroed(len: usize) -> Self {
        let buf = vec![0u8; len + 8];
        let off = buf.as_ptr().align_offset(8);
        assert!(off < 8, "align_offset on a u8 buffer");
        Aligned { buf, off, len }
    }

    fn as_mut(&mut self) -> &mut [u8] {
        &mut self.buf[self.off..self.off + self.len]
    }
}

impl std::ops::Deref for Aligned {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.buf[self.off..self.off + self.len]
    }
}

/// Parses `sha256:<hex>` or `<hex>`.
pub fn parse_digest(s: &str) -> Option<Digest> {
    let hex = s.strip_prefix("sha256:").unwrap_or(s);
    puzzlefs_format::parse_hex_digest(hex.as_bytes()).ok()
}

/// An open OCI directory.
pub struct OciDir {
    root: PathBuf,
}

/// An exclusive lock on an OCI directory, released on drop.
pub struct Lock {
    _file: File,
}

impl OciDir {
    /// Opens an existing OCI directory (checks `oci-layout`).
    pub fn open(root: &Path) -> Result<Self> {
        let layout = root.join("oci-layout");
        match fs::read(&layout) {
            Ok(b) if b.trim_ascii() == OCI_LAYOUT.as_bytes() => {}
            Ok(_) => return Err(OciError::NotOci { path: layout }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(OciError::NotOci { path: layout })
            }
            Err(e) => return Err(io_err(&layout)(e)),
        }
        Ok(OciDir {
            root: root.to_owned(),
        })
    }

    /// Opens an OCI directory, creating it (and `oci-layout`, `blobs/sha256`)
    /// if missing.
    pub fn create(root: &Path) -> Result<Self> {
        fs::create_dir_all(root.join("blobs/sha256")).map_err(io_err(root))?;
        let layout = root.join("oci-layout");
        if !layout.exists() {
            write_atomic(&layout, OCI_LAYOUT.as_bytes())?;
        }
        Self::open(root)
    }

    /// The directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Takes the lock guarding index.json, calling `on_wait` first when
    /// another process holds it.
    pub fn lock_index(&self, on_wait: &dyn Fn()) -> Result<Lock> {
        self.flock(".puzzlefs.lock", libc::LOCK_EX, on_wait)
    }

    /// Shared by builds for their whole duration; `gc` takes it exclusively
    /// (see the module doc).
    pub fn lock_for_build(&self, on_wait: &dyn Fn()) -> Result<Lock> {
        self.flock(".puzzlefs.gc.lock", libc::LOCK_SH, on_wait)
    }

    /// Excludes builds while `gc` runs.
    pub fn lock_for_gc(&self, on_wait: &dyn Fn()) -> Result<Lock> {
        self.flock(".puzzlefs.gc.lock", libc::LOCK_EX, on_wait)
    }

    fn flock(&self, name: &str, how: libc::c_int, on_wait: &dyn Fn()) -> Result<Lock> {
        let path = self.root.join(name);
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(io_err(&path))?;
        let lock = |how| {
            // SAFETY: flock on a file descriptor we own for the call's duration.
            if unsafe { libc::flock(file.as_raw_fd(), how) } == 0 {
                Ok(())
            } else {
                Err(io::Error::last_os_error())
            }
        };
        match lock(how | libc::LOCK_NB) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::EWOULDBLOCK) => {
                on_wait();
                loop {
                    match lock(how) {
                        Ok(()) => break,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                        Err(e) => return Err(io_err(&path)(e)),
                    }
                }
            }
            Err(e) => return Err(io_err(&path)(e)),
        }
        Ok(Lock { _file: file })
    }

    /// Removes the temporary files of writers that are no longer running
    /// (a killed build). Call it with the index lock held.
    pub fn sweep_tmp(&self) -> Result<u64> {
        let mut n = 0;
        for dir in [self.root.clone(), self.root.join("blobs/sha256")] {
            let rd = match fs::read_dir(&dir) {
                Ok(rd) => rd,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(io_err(&dir)(e)),
            };
            for e in rd {
                let e = e.map_err(io_err(&dir))?;
                let name = e.file_name();
                let Some(pid) = tmp_owner(&name.to_string_lossy()) else {
                    continue;
                };
                if !pid_alive(pid) {
                    let p = e.path();
                    match fs::remove_file(&p) {
                        Ok(()) => n += 1,
                        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                        Err(e) => return Err(io_err(&p)(e)),
                    }
                }
            }
        }
        Ok(n)
    }

    /// Path of blob `digest`.
    pub fn blob_path(&self, digest: &Digest) -> PathBuf {
        self.root.join("blobs/sha256").join(hex::encode(digest))
    }

    /// Whether blob `digest` exists.
    pub fn has_blob(&self, digest: &Digest) -> bool {
        self.blob_path(digest).exists()
    }

    /// Stores `data` as a blob named by its sha256, unless already there.
    /// Returns the digest and whether the blob was new.
    pub fn put_blob(&self, data: &[u8]) -> Result<(Digest, bool)> {
        let digest: Digest = Sha256::digest(data).into();
        let new = self.put_blob_with_digest(&digest, data)?;
        Ok((digest, new))
    }

    /// Stores `data` (whose sha256 the caller computed) unless present.
    /// The blob appears under its name complete or not at all (temporary
    /// file + rename); durability comes from [`OciDir::sync`] before the
    /// index is committed. An existing blob is trusted only if it holds
    /// exactly `data` (compared byte for byte, cheaper than hashing it): a
    /// blob damaged on disk, or left short by a crash of the file system,
    /// is replaced.
    pub fn put_blob_with_digest(&self, digest: &Digest, data: &[u8]) -> Result<bool> {
        let path = self.blob_path(digest);
        if same_contents(&path, data) {
            return Ok(false);
        }
        write_file_atomic(&path, data, false)?;
        Ok(true)
    }

    /// Flushes everything written to the directory's file system (syncfs).
    pub fn sync(&self) -> Result<()> {
        let d = File::open(&self.root).map_err(io_err(&self.root))?;
        // SAFETY: syncfs on a file descriptor we own for the call's duration.
        if unsafe { libc::syncfs(d.as_raw_fd()) } != 0 {
            return Err(io_err(&self.root)(io::Error::last_os_error()));
        }
        Ok(())
    }

    /// Reads blob `digest` into an aligned buffer and checks its sha256.
    pub fn read_blob(&self, digest: &Digest) -> Result<Aligned> {
        let path = self.blob_path(digest);
        let mut f = File::open(&path).map_err(io_err(&path))?;
        let len = f.metadata().map_err(io_err(&path))?.len() as usize;
        let mut a = Aligned::zeroed(len);
        f.read_exact(a.as_mut()).map_err(io_err(&path))?;
        let mut extra = [0u8; 1];
        if f.read(&mut extra).map_err(io_err(&path))? != 0 {
            return Err(OciError::Corrupt { path });
        }
        if Sha256::digest(&*a).as_slice() != digest {
            return Err(OciError::Corrupt { path });
        }
        Ok(a)
    }

    /// Reads index.json (an empty index if the file does not exist).
    pub fn index(&self) -> Result<Index> {
        let path = self.root.join("index.json");
        match fs::read(&path) {
            Ok(b) => serde_json::from_slice(&b).map_err(|source| OciError::Index { path, source }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Index::default()),
            Err(e) => Err(io_err(&path)(e)),
        }
    }

    /// The image manifest digest of `tag`.
    pub fn resolve(&self, tag: &str) -> Result<Digest> {
        let index = self.index()?;
        let d = index.find(tag).ok_or_else(|| OciError::NoTag {
            dir: self.root.clone(),
            tag: tag.to_owned(),
        })?;
        parse_digest(&d.digest).ok_or_else(|| OciError::BadDigest {
            dir: self.root.clone(),
            digest: d.digest.clone(),
        })
    }

    /// Points `tag` at manifest blob `digest` (of `size` bytes), replacing
    /// any previous descriptor of that tag, and atomically rewrites
    /// index.json under the index lock (`on_wait` is called if another
    /// process holds it). Call it only once every blob of the image is
    /// stored and synced.
    pub fn commit_tag(
        &self,
        tag: &str,
        digest: &Digest,
        size: u64,
        on_wait: &dyn Fn(),
    ) -> Result<()> {
        check_tag(tag)?;
        let _lock = self.lock_index(on_wait)?;
        self.sweep_tmp()?;
        let mut index = self.index()?;
        let desc = Descriptor {
            digest: format!("sha256:{}", hex::encode(digest)),
            size,
            media_type: MEDIA_TYPE_ROOTFS.to_owned(),
            annotations: BTreeMap::from([(REF_NAME.to_owned(), tag.to_owned())]),
            other: serde_json::Map::new(),
        };
        match index
            .manifests
            .iter_mut()
            .find(|d| d.annotations.get(REF_NAME).map(String::as_str) == Some(tag))
        {
            // Fields of the old descriptor this tool does not know stay.
            Some(slot) => {
                let other = std::mem::take(&mut slot.other);
                *slot = Descriptor { other, ..desc };
            }
            None => index.manifests.push(desc),
        }
        let json = serde_json::to_vec(&index).expect("index.json serialises");
        write_atomic(&self.root.join("index.json"), &json)
    }
}

/// Whether `tag` follows the OCI distribution spec's tag grammar,
/// `[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}`.
pub fn check_tag(tag: &str) -> Result<()> {
    let b = tag.as_bytes();
    let ok = !b.is_empty()
        && b.len() <= 128
        && (b[0].is_ascii_alphanumeric() || b[0] == b'_')
        && b[1..]
            .iter()
            .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(OciError::BadTag {
            tag: tag.to_owned(),
        })
    }
}

/// Whether the file at `path` holds exactly `data`.
fn same_contents(path: &Path, data: &[u8]) -> bool {
    let Ok(mut f) = File::open(path) else {
        return false;
    };
    match f.metadata() {
        Ok(m) if m.is_file() && m.len() == data.len() as u64 => {}
        _ => return false,
    }
    let mut buf = vec![0u8; data.len().clamp(1, 1 << 20)];
    let mut off = 0;
    loop {
        let n = match f.read(&mut buf) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => return false,
        };
        if n == 0 {
            return off == data.len();
        }
        if off + n > data.len() || buf[..n] != data[off..off + n] {
            return false;
        }
        off += n;
    }
}

/// The pid in a temporary file name `.<name>.tmp.<pid>.<seq>`.
fn tmp_owner(name: &str) -> Option<i32> {
    let rest = name.strip_prefix('.')?;
    let (_, tail) = rest.rsplit_once(".tmp.")?;
    let (pid, seq) = tail.split_once('.')?;
    seq.parse::<u64>().ok()?;
    pid.parse().ok()
}

fn pid_alive(pid: i32) -> bool {
    if pid <= 0 {
        return false;
    }
    // SAFETY: kill with signal 0 only checks that the process exists.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

/// Writes `data` to `path` through a temporary file in the same directory,
/// fsync and rename, then syncs the directory.
pub fn write_atomic(path: &Path, data: &[u8]) -> Result<()> {
    write_file_atomic(path, data, true)
}

fn write_file_atomic(path: &Path, data: &[u8], durable: bool) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp.{}.{}", std::process::id(), tmp_seq()));
    let res = (|| {
        let mut f = OpenOptions::new().write(true).create_new(true).open(&tmp)?;
        f.write_all(data)?;
        if durable {
            f.sync_all()?;
        }
        fs::rename(&tmp, path)?;
        if durable {
            if let Ok(d) = File::open(dir) {
                let _ = d.sync_all();
            }
        }
        Ok(())
    })();
    res.map_err(|e| {
        let _ = fs::remove_file(&tmp);
        io_err(path)(e)
    })
}

fn tmp_seq() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static SEQ: AtomicU64 = AtomicU64::new(0);
    SEQ.fetch_add(1, Ordering::Relaxed)
}
