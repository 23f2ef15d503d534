//! Reading an image from an OCI directory through `puzzlefs-format`:
//! manifest and layers, file contents (with decompression), and a walk of
//! the tree.

use std::collections::{HashMap, HashSet, VecDeque};
use std::io::Read;
use std::sync::{Arc, Mutex};

use anyhow::{anyhow, bail, Context, Result};
use puzzlefs_format::{
    find_inode, BlobRef, Digest, Error as FmtError, File, HexDigest, Inode, InodeKind, Layer,
    Manifest, MetadataBlob, ROOT_INO,
};

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
        Self::open(oci, digest).with_context(|| format!("tag {tag:?}"))
    }

    /// Loads the image whose manifest is blob `digest`.
    pub fn open(oci: &'o OciDir, digest: Digest) -> Result<Self> {
        let manifest = oci.read_blob(&digest)?;
        let refs: Vec<BlobRef> = {
            let m = Manifest::parse(&manifest)
                .map_err(|e| anyhow!("manifest {}: {e}", HexDigest(&digest)))?;
            m.layers()
                .and_then(|l| l.collect::<Result<Vec<_>, FmtError>>())
                .map_err(|e| anyhow!("manifest {}: {e}", HexDigest(&digest)))?
        };
        let mut layers = Vec::new();
        for r in refs {
            if r.compressed || r.offset != 0 {
                bail!(
                    "metadata blob {}: compressed or offset metadata is not supported",
                    HexDigest(&r.digest)
                );
            }
            let blob = oci.read_blob(&r.digest)?;
            MetadataBlob::parse(&blob)
                .and_then(|b| b.layer().map(|_| ()))
                .map_err(|e| anyhow!("metadata blob {}: {e}", HexDigest(&r.digest)))?;
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
        .map(|b| b.layer().map_err(|e| anyhow!("metadata layer: {e}")))
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
                .with_context(|| format!("blob {}: bad zstd data", HexDigest(&blob.digest)))?;
            if out.len() as u64 > MAX_DECOMPRESSED {
                bail!(
                    "blob {}: decompresses to more than 64 MiB",
                    HexDigest(&blob.digest)
                );
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
    let size = file
        .size()
        .map_err(|e| anyhow!("inode {}: {e}", file.ino()))?;
    let mut done = 0u64;
    for piece in file
        .map(0, size)
        .map_err(|e| anyhow!("inode {}: {e}", file.ino()))?
    {
        let piece = piece.map_err(|e| anyhow!("inode {}: {e}", file.ino()))?;
        let data = cache.get(oci, &piece.blob)?;
        piece.check_within(data.len() as u64).map_err(|_| {
            anyhow!(
                "inode {}: chunk range {}+{} past the end of blob {} ({} bytes)",
                file.ino(),
                piece.blob.offset,
                piece.len,
                HexDigest(&piece.blob.digest),
                data.len()
            )
        })?;
        let start = piece.blob.offset as usize;
        out.write_all(&data[start..start + piece.len as usize])?;
        done += piece.len;
    }
    if done != size {
        bail!("inode {}: mapped {done} of {size} bytes", file.ino());
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
    let root = find_inode(layers.iter().copied(), ROOT_INO).map_err(|e| anyhow!("root: {e}"))?;
    if root.kind().map_err(|e| anyhow!("root: {e}"))? != InodeKind::Dir {
        bail!("root inode is not a directory");
    }
    let mut seen_dirs = HashSet::from([ROOT_INO]);
    let mut queue = std::collections::VecDeque::from([Node {
        path: Vec::new(),
        inode: root,
    }]);
    while let Some(node) = queue.pop_front() {
        visit(&node)?;
        if node.inode.kind().map_err(|e| anyhow!("{e}"))? != InodeKind::Dir {
            continue;
        }
        let dir = node.inode.dir().map_err(|e| anyhow!("{e}"))?;
        for e in dir.entries() {
            let e = e.map_err(|e| anyhow!("directory inode {}: {e}", dir.ino()))?;
            let mut path = node.path.clone();
            path.push(e.name.to_vec());
            let inode = match find_inode(layers.iter().copied(), e.ino) {
                Ok(i) => i,
                Err(FmtError::Whiteout(_)) => continue,
                Err(err) => bail!("{}: {err}", display_path(&path)),
            };
            if inode
                .kind()
                .map_err(|err| anyhow!("{}: {err}", display_path(&path)))?
                == InodeKind::Dir
                && !seen_dirs.insert(e.ino)
            {
                bail!(
                    "{}: directory inode {} reached twice (cycle or hard-linked directory)",
                    display_path(&path),
                    e.ino
                );
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
