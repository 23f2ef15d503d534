//! Reading an image from an OCI directory through `puzzlefs-format`:
//! manifest and layers, file contents (with decompression), and a walk of
//! the tree.

use std::collections::{HashMap, HashSet, VecDeque};
use std::io::Read;
use std::sync::{Arc, Mutex};

use puzzlefs_format::{
    find_inode, BlobRef, ChunkList, Digest, Error as FmtError, File, HexDigest, Inode, InodeKind,
    Layer, Manifest, MetadataBlob, ROOT_INO,
};

use crate::error::{fmt_at, Context, Error, Result};
use crate::oci::{Aligned, OciDir};

/// Largest decompressed chunk blob accepted (chunks are at most 256 KiB).
pub const MAX_DECOMPRESSED: u64 = 64 << 20;

/// An image loaded in memory: the manifest and every metadata layer.
pub struct Image<'o> {
    /// The OCI directory it comes from.
    pub oci: &'o OciDir,
    /// Manifest digest.
    pub digest: Digest,
    manifest: Aligned,
    layers: Vec<(BlobRef, Aligned)>,
}

impl<'o> Image<'o> {
    /// Loads the image `tag` points to.
    pub fn open_tag(oci: &'o OciDir, tag: &str) -> Result<Self> {
        let digest = oci.resolve(tag)?;
        Self::open(oci, digest).context_with(|| format!("tag {tag:?}"))
    }

    /// Loads the image whose manifest is blob `digest`.
    pub fn open(oci: &'o OciDir, digest: Digest) -> Result<Self> {
        let manifest = oci.read_blob(&digest)?;
        let refs: Vec<BlobRef> = {
            let at = || format!("manifest {}", HexDigest(&digest));
            let m = Manifest::parse(&manifest).map_err(fmt_at(at()))?;
            m.layers()
                .and_then(|l| l.collect::<Result<Vec<_>, FmtError>>())
                .map_err(fmt_at(at()))?
        };
        let mut layers = Vec::new();
        for r in refs {
            if r.compressed || r.offset != 0 {
                return Err(Error::MetadataRef {
                    blob: HexDigest(&r.digest).to_string(),
                });
            }
            let blob = oci.read_blob(&r.digest)?;
            MetadataBlob::parse(&blob)
                .and_then(|b| b.layer().map(|_| ()))
                .map_err(fmt_at(format_args!(
                    "metadata blob {}",
                    HexDigest(&r.digest)
                )))?;
            layers.push((r, blob));
        }
        Ok(Image {
            oci,
            digest,
            manifest,
            layers,
        })
    }

    /// The parsed manifest.
    pub fn manifest(&self) -> Manifest<'_> {
        Manifest::parse(&self.manifest).expect("validated in open")
    }

    /// Metadata layer references, top first.
    pub fn layer_refs(&self) -> Vec<BlobRef> {
        self.layers.iter().map(|(r, _)| *r).collect()
    }

    /// Raw bytes of each metadata layer, top first.
    pub fn layer_bytes(&self) -> Vec<&[u8]> {
        self.layers.iter().map(|(_, b)| &**b).collect()
    }

    /// Parses every layer (cheap); keep the result alive while using the
    /// [`Layer`] views from [`Image::views`].
    pub fn blobs(&self) -> Vec<MetadataBlob<'_>> {
        self.layers
            .iter()
            .map(|(_, b)| MetadataBlob::parse(b).expect("validated in open"))
            .collect()
    }
}

/// Layer views of parsed blobs.
pub fn views<'m>(blobs: &'m [MetadataBlob<'_>]) -> Result<Vec<Layer<'m>>> {
    blobs
        .iter()
        .map(|b| b.layer().map_err(fmt_at("metadata layer")))
        .collect()
}

/// Decompressed chunk blobs, shared by threads, at most about `cap` bytes
/// (the oldest go first). Two threads missing the same blob at once both
/// read it; the cache stays correct.
pub struct BlobCache {
    cap: usize,
    inner: Mutex<CacheInner>,
}

#[derive(Default)]
struct CacheInner {
    map: HashMap<Digest, Arc<[u8]>>,
    order: VecDeque<Digest>,
    bytes: usize,
}

impl Default for BlobCache {
    fn default() -> Self {
        BlobCache::new(16 << 20)
    }
}

impl BlobCache {
    /// A cache of about `cap` bytes.
    pub fn new(cap: usize) -> Self {
        BlobCache {
            cap,
            inner: Mutex::default(),
        }
    }

    /// The decompressed contents of `blob`.
    pub fn get(&self, oci: &OciDir, blob: &BlobRef) -> Result<Arc<[u8]>> {
        if let Some(d) = self.lock().map.get(&blob.digest) {
            return Ok(Arc::clone(d));
        }
        let stored = oci.read_blob(&blob.digest)?;
        let data: Arc<[u8]> = if blob.compressed {
            let mut out = Vec::new();
            zstd::stream::read::Decoder::new(&*stored)
                .and_then(|d| d.take(MAX_DECOMPRESSED + 1).read_to_end(&mut out))
                .map_err(|source| Error::Zstd {
                    blob: HexDigest(&blob.digest).to_string(),
                    source,
                })?;
            if out.len() as u64 > MAX_DECOMPRESSED {
                return Err(Error::TooLarge {
                    blob: HexDigest(&blob.digest).to_string(),
                });
            }
            out.into()
        } else {
            stored.to_vec().into()
        };
        let mut c = self.lock();
        if c.map.insert(blob.digest, Arc::clone(&data)).is_none() {
            c.order.push_back(blob.digest);
            c.bytes += data.len();
        }
        while c.bytes > self.cap && c.order.len() > 1 {
            let Some(old) = c.order.pop_front() else {
                break;
            };
            if let Some(d) = c.map.remove(&old) {
                c.bytes -= d.len();
            }
        }
        Ok(data)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, CacheInner> {
        // The data is consistent whatever a panicking holder did.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Reads a whole regular file, checking each piece against its blob.
pub fn read_file(
    oci: &OciDir,
    cache: &BlobCache,
    file: &File<'_>,
    out: &mut dyn std::io::Write,
) -> Result<u64> {
    let at = || format!("inode {}", file.ino());
    let size = file.size().map_err(fmt_at(at()))?;
    let mut done = 0u64;
    for piece in file.map(0, size).map_err(fmt_at(at()))? {
        let piece = piece.map_err(fmt_at(at()))?;
        let data = cache.get(oci, &piece.blob)?;
        piece
            .check_within(data.len() as u64)
            .map_err(|_| Error::ChunkRange {
                ino: file.ino(),
                offset: piece.blob.offset,
                len: piece.len,
                blob: HexDigest(&piece.blob.digest).to_string(),
                blob_len: data.len(),
            })?;
        let start = piece.blob.offset as usize;
        out.write_all(&data[start..start + piece.len as usize])
            .map_err(Error::Write)?;
        done += piece.len;
    }
    if done != size {
        return Err(Error::ShortFile {
            ino: file.ino(),
            done,
            size,
        });
    }
    Ok(done)
}

/// One node met by [`walk`].
pub struct Node<'m> {
    /// Path components from the root (empty for the root).
    pub path: Vec<Vec<u8>>,
    /// The inode.
    pub inode: Inode<'m>,
}

/// Walks the tree breadth-first from the root, names in stored order,
/// skipping whiteouts. Each directory inode is entered once; a directory
/// met twice (a cycle or a hard-linked directory) is an error.
pub fn walk<'m>(
    layers: &[Layer<'m>],
    mut visit: impl FnMut(&Node<'m>) -> Result<()>,
) -> Result<()> {
    let root = find_inode(layers.iter().copied(), ROOT_INO).map_err(fmt_at("root"))?;
    if root.kind().map_err(fmt_at("root"))? != InodeKind::Dir {
        return Err(Error::RootNotDir);
    }
    let mut seen_dirs = HashSet::from([ROOT_INO]);
    let mut queue = std::collections::VecDeque::from([Node {
        path: Vec::new(),
        inode: root,
    }]);
    while let Some(node) = queue.pop_front() {
        visit(&node)?;
        let at = || display_path(&node.path);
        if node.inode.kind().map_err(fmt_at(at()))? != InodeKind::Dir {
            continue;
        }
        let dir = node.inode.dir().map_err(fmt_at(at()))?;
        for e in dir.entries() {
            let e = e.map_err(fmt_at(format_args!("directory inode {}", dir.ino())))?;
            let mut path = node.path.clone();
            path.push(e.name.to_vec());
            let inode = match find_inode(layers.iter().copied(), e.ino) {
                Ok(i) => i,
                Err(FmtError::Whiteout(_)) => continue,
                Err(err) => return Err(fmt_at(display_path(&path))(err)),
            };
            if inode.kind().map_err(fmt_at(display_path(&path)))? == InodeKind::Dir
                && !seen_dirs.insert(e.ino)
            {
                return Err(Error::DirCycle {
                    path: display_path(&path),
                    ino: e.ino,
                });
            }
            queue.push_back(Node { path, inode });
        }
    }
    Ok(())
}

/// `/a/b` for display.
pub fn display_path(p: &[Vec<u8>]) -> String {
    if p.is_empty() {
        return "/".into();
    }
    let mut s = String::new();
    for c in p {
        s.push('/');
        s.push_str(&String::from_utf8_lossy(c));
    }
    s
}
