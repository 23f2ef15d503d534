//! `puzzlefs build`: a source tree to an image in an OCI directory.
//!
//! 1. Scan the tree depth-first, names of each directory sorted by bytes,
//!    numbering a directory's entries from 2 (root is 1) when it is visited,
//!    as the other implementation does; a hard link takes the number of the
//!    first path met (the counter still advances, so the same tree gets the
//!    same numbers).
//! 2. Stream the contents of every regular file through the chunker (see
//!    [`Chunking`]): in the order a depth-first reader of the tree opens
//!    them, or in inode order with [`Chunking::Stream`]; worker threads hash,
//!    compress and store the chunks while the chunker reads on. A small file
//!    whose contents an earlier file has shares that file's chunk pieces
//!    instead. At most a few chunks per worker are in memory; every file is
//!    read once and must keep its size.
//! 3. Write the metadata layer, then the manifest, then sync, then point the
//!    tag at the manifest in index.json, under the index lock (held for
//!    that step only); a failure leaves index.json as it was.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc;

use puzzlefs_format::{
    find_inode, BlobRef, Digest, Error as FmtError, InodeKind, LinkCount, MAX_LAYERS, NAME_MAX,
};

pub use crate::chunks::Chunking;
use crate::chunks::{chunk_and_store, FileMap, SrcFile};
use crate::error::{fmt_at, io_at, io_op, Context, Error, Result};
use crate::image::{self, Image};
use crate::model::{encode_layer, encode_manifest, FileChunk, InodeRec, Kind};
use crate::oci::OciDir;
use crate::progress::Progress;
use crate::sys;
use crate::verity;

pub use crate::chunks::{AVG_CHUNK, MAX_CHUNK, MIN_CHUNK};
/// Default zstd level for `--compression` (the other implementation's, so
/// that the same tree gives the same compressed chunks).
pub const ZSTD_LEVEL: i32 = 3;

/// Options of a build.
#[derive(Clone)]
pub struct BuildOptions {
    /// Tag to build on top of (delta layer).
    pub base: Option<String>,
    /// zstd-compress chunks (kept raw when that is not smaller).
    pub compression: bool,
    /// zstd level (1..=22) when compressing.
    pub zstd_level: i32,
    /// Worker threads for hashing and compression (0: one per CPU).
    pub threads: usize,
    /// How file contents are cut into chunks.
    pub chunking: Chunking,
    /// Store the fs-verity Merkle tree of each metadata layer of more than
    /// one block as a blob, named in the layer's fs-verity entry, so that
    /// a reader can check the layer page by page.
    pub metadata_trees: bool,
    /// Record the link counts of the image's file system in its manifest
    /// (`Rootfs.linkCounts`), so that a reader need not walk every
    /// directory to find them.
    pub link_counts: bool,
    /// Progress reporter.
    pub progress: Progress,
}

impl Default for BuildOptions {
    fn default() -> Self {
        BuildOptions {
            base: None,
            compression: false,
            zstd_level: ZSTD_LEVEL,
            threads: 0,
            chunking: Chunking::default(),
            metadata_trees: true,
            link_counts: true,
            progress: Progress::hidden(),
        }
    }
}

/// What a build did.
#[derive(Debug, Clone, Default)]
pub struct BuildStats {
    /// Inodes in the tree (hard links counted once).
    pub inodes: u64,
    /// Inodes written in the new layer.
    pub layer_inodes: u64,
    /// Regular file bytes read.
    pub logical_bytes: u64,
    /// Chunks cut.
    pub chunks: u64,
    /// Chunks that were not in the OCI directory yet.
    pub new_chunks: u64,
    /// Bytes of the new chunk blobs.
    pub new_chunk_bytes: u64,
    /// Files whose contents an earlier file has (stored once).
    pub same_files: u64,
}

/// The result of a build.
#[derive(Debug, Clone)]
pub struct BuildOutput {
    /// Image manifest digest (the `image_manifest=` mount option).
    pub digest: Digest,
    /// Manifest size in bytes.
    pub manifest_size: u64,
    /// Statistics.
    pub stats: BuildStats,
}

/// The stat fields of a source inode that the image keeps.
#[derive(Clone, Copy)]
struct Stat {
    mode: u32,
    uid: u32,
    gid: u32,
    size: u64,
    rdev: u64,
}

impl Stat {
    fn of(m: &fs::Metadata) -> Self {
        Stat {
            mode: m.mode(),
            uid: m.uid(),
            gid: m.gid(),
            size: m.len(),
            rdev: m.rdev(),
        }
    }

    fn fmt(&self) -> u32 {
        self.mode & libc::S_IFMT
    }

    fn is_dir(&self) -> bool {
        self.fmt() == libc::S_IFDIR
    }

    fn is_file(&self) -> bool {
        self.fmt() == libc::S_IFREG
    }
}

/// One inode of the source tree: a few words; its name and its entries
/// live in the scan's arenas, its path is made from its parents on demand
/// (a tree of millions of inodes costs tens of bytes per inode).
struct SrcInode {
    ino: u64,
    /// Index of the parent in [`Scan::inodes`] (the root's is 0, itself).
    parent: u32,
    /// Name: `Scan::names[name_at..name_at + name_len]`.
    name_at: usize,
    name_len: u8,
    stat: Stat,
    /// The source's (device, inode number), which the chunker checks again
    /// when it opens the file.
    id: (u64, u64),
    /// Directory entries: `Scan::entries[entries_at..entries_at + entries_len]`.
    entries_at: usize,
    entries_len: u32,
}

/// A directory entry in [`Scan::entries`]: name in [`Scan::names`], ino.
struct SrcEntry {
    name_at: usize,
    name_len: u8,
    ino: u64,
}

/// The scanned tree.
struct Scan {
    root: PathBuf,
    inodes: Vec<SrcInode>,
    names: Vec<u8>,
    entries: Vec<SrcEntry>,
    /// The regular files with contents, in the order they were streamed
    /// (indices into `inodes`).
    stream: Vec<usize>,
}

impl Scan {
    fn name(&self, at: usize, len: u8) -> &[u8] {
        &self.names[at..at + usize::from(len)]
    }

    /// Path components of inode `idx` from the root.
    fn components(&self, mut idx: usize) -> Vec<&[u8]> {
        let mut out = Vec::new();
        while idx != 0 {
            let i = &self.inodes[idx];
            out.push(self.name(i.name_at, i.name_len));
            idx = i.parent as usize;
        }
        out.reverse();
        out
    }

    fn rel(&self, idx: usize) -> RelPath {
        self.components(idx)
            .into_iter()
            .map(<[u8]>::to_vec)
            .collect()
    }

    fn path(&self, idx: usize) -> PathBuf {
        let mut p = self.root.clone();
        for c in self.components(idx) {
            p.push(std::ffi::OsStr::from_bytes(c));
        }
        p
    }

    fn entries(&self, idx: usize) -> Vec<(Vec<u8>, u64)> {
        let i = &self.inodes[idx];
        self.entries[i.entries_at..i.entries_at + i.entries_len as usize]
            .iter()
            .map(|e| (self.name(e.name_at, e.name_len).to_vec(), e.ino))
            .collect()
    }
}

/// A path as its components from the root.
type RelPath = Vec<Vec<u8>>;
/// Directory listing: (name, ino).
type Listing = Vec<(Vec<u8>, u64)>;

/// What the base image tells a delta build.
#[derive(Default)]
struct Base {
    paths: HashMap<RelPath, u64>,
    listings: HashMap<RelPath, Listing>,
    max_ino: u64,
}

/// Builds `rootfs` into `oci_dir` under `tag`.
pub fn build(rootfs: &Path, oci_dir: &Path, tag: &str, opts: &BuildOptions) -> Result<BuildOutput> {
    let meta = fs::symlink_metadata(rootfs).map_err(io_at(rootfs))?;
    if !meta.is_dir() {
        return Err(Error::NotADirectory {
            path: rootfs.to_owned(),
        });
    }
    crate::oci::check_tag(tag)?;
    let progress = &opts.progress;
    // A missing base is found before anything is created.
    let oci = match &opts.base {
        Some(t) => {
            crate::oci::check_tag(t)?;
            OciDir::open(oci_dir)?
        }
        None => OciDir::create(oci_dir)?,
    };
    let _gc_lock = oci.lock_for_build(&|| {
        progress.info(&format!(
            "{}: waiting for a gc to finish",
            oci.root().display()
        ))
    })?;
    let base_image = match &opts.base {
        Some(t) => Some(Image::open_tag(&oci, t).context_with(|| format!("base layer {t:?}"))?),
        None => None,
    };
    let base_blobs = base_image.as_ref().map(Image::blobs).unwrap_or_default();
    if let Some(base) = opts
        .base
        .as_ref()
        .filter(|_| base_blobs.len() >= MAX_LAYERS)
    {
        return Err(Error::TooManyLayers {
            base: base.clone(),
            layers: base_blobs.len(),
        });
    }
    let base_layers = image::views(&base_blobs)?;
    let base = if base_image.is_some() {
        scan_base(&base_layers)?
    } else {
        Base::default()
    };

    let threads = if opts.threads == 0 {
        std::thread::available_parallelism().map_or(2, |n| n.get())
    } else {
        opts.threads
    };
    let level = opts.compression.then_some(opts.zstd_level);
    // The scan feeds regular files to the chunker as it finds them, and
    // xattrs and symlink targets are read while the contents stream.
    let (file_tx, file_rx) = mpsc::channel::<SrcFile>();
    let (inodes, attrs, chunks) = std::thread::scope(|s| {
        let chunker =
            s.spawn(|| chunk_and_store(&oci, file_rx, opts.chunking, level, threads, progress));
        let inodes = scan(rootfs, &base, &file_tx, opts.chunking, progress);
        drop(file_tx);
        let attrs = inodes
            .as_ref()
            // On a failed scan its own error is returned, not this one.
            .map_err(|_| Error::Internal("attributes of a failed scan"))
            .and_then(|scan| {
                (0..scan.inodes.len())
                    .map(|idx| read_attrs(scan, idx))
                    .collect::<Result<Vec<_>>>()
            });
        let chunks = chunker.join().expect("chunker panicked");
        (inodes, attrs, chunks)
    });
    let scan = inodes?;
    let inodes = &scan.inodes;
    let attrs = attrs?;
    let crate::chunks::Stored {
        chunks,
        files: maps,
    } = chunks?;
    let total: u64 = inodes
        .iter()
        .filter(|i| i.stat.is_file())
        .map(|i| i.stat.size)
        .sum();
    progress.detail(&format!(
        "{}: {} inodes, {} bytes",
        rootfs.display(),
        inodes.len(),
        total
    ));

    progress.finish();

    let mut stats = BuildStats {
        inodes: inodes.len() as u64,
        logical_bytes: total,
        chunks: chunks.len() as u64,
        same_files: maps
            .iter()
            .filter(|m| matches!(m, FileMap::Same(_)))
            .count() as u64,
        ..Default::default()
    };
    for c in &chunks {
        if c.new {
            stats.new_chunks += 1;
            stats.new_chunk_bytes += c.stored_len;
        }
    }

    // File contents: each file's pieces; a file that repeats an earlier
    // one takes its pieces.
    let mut file_chunks: HashMap<u64, Vec<FileChunk>> = HashMap::new();
    {
        // Inode of each file, in stream order.
        let mut inos: Vec<u64> = Vec::with_capacity(maps.len());
        for (k, i) in scan.stream.iter().map(|&idx| &inodes[idx]).enumerate() {
            let map = maps
                .get(k)
                .ok_or(Error::Internal("fewer files streamed than scanned"))?;
            inos.push(i.ino);
            let pieces = match map {
                FileMap::Same(j) => inos
                    .get(*j)
                    .and_then(|o| file_chunks.get(o))
                    .ok_or(Error::Internal("a file repeats a later one"))?
                    .clone(),
                FileMap::Pieces(p) => p
                    .iter()
                    .map(|p| {
                        let c = chunks
                            .get(p.seq)
                            .ok_or(Error::Internal("a piece of a missing chunk"))?;
                        Ok(FileChunk {
                            blob: BlobRef {
                                digest: c.digest,
                                offset: p.offset,
                                compressed: c.compressed,
                            },
                            len: p.len,
                        })
                    })
                    .collect::<Result<Vec<_>>>()?,
            };
            file_chunks.insert(i.ino, pieces);
        }
    }

    let mut recs: BTreeMap<u64, InodeRec> = BTreeMap::new();
    let mut claimed: HashSet<u64> = inodes.iter().map(|i| i.ino).collect();
    for (idx, a) in attrs.into_iter().enumerate() {
        let rec = to_rec(
            &scan,
            idx,
            a,
            &mut file_chunks,
            &base,
            &mut claimed,
            &mut recs,
        )?;
        recs.insert(rec.ino, rec);
    }

    // Counted on the whole tree, before a delta drops what the base has.
    let links = opts.link_counts.then(|| link_counts(&recs));
    // A delta layer holds only what differs from the base.
    if !base_layers.is_empty() {
        recs.retain(
            |ino, rec| match find_inode(base_layers.iter().copied(), *ino) {
                Ok(old) => InodeRec::from_view(&old).map_or(true, |old| old != *rec),
                Err(_) => true,
            },
        );
    }
    stats.layer_inodes = recs.len() as u64;
    let recs: Vec<InodeRec> = recs.into_values().collect();

    let layer = encode_layer(&recs);
    let (layer_digest, _) = oci.put_blob(&layer)?;

    let mut verity_map: BTreeMap<Digest, [u8; 32]> = BTreeMap::new();
    let mut trees: HashMap<Digest, Digest> = HashMap::new();
    if let Some(b) = &base_image {
        // The delta reuses every blob of the base: its metadata layers and
        // the chunks of every file of every layer (shadowed ones included,
        // as `enable-fs-verity` checks them). Their entries are measured
        // again from the blob files, not copied from the base manifest:
        // older builds of this tool recorded wrong ones (every blob of one
        // block), and `enable-fs-verity` and the driver's verity=require
        // refuse a blob whose entry is wrong. A blob this build has just
        // measured (the same digest is the same bytes) or a metadata layer
        // already read is not read again.
        // The base's metadata layers get a Merkle tree blob if they have
        // none (built by an older version, or by the other implementation).
        for (r, bytes) in b.layer_refs().iter().zip(b.layer_bytes()) {
            put_metadata_tree(
                &oci,
                &r.digest,
                bytes,
                opts.metadata_trees,
                &mut verity_map,
                &mut trees,
            )?;
        }
        let known: HashMap<Digest, [u8; 32]> =
            chunks.iter().map(|c| (c.digest, c.verity)).collect();
        let mut todo = BTreeSet::new();
        for layer in &base_layers {
            for inode in layer.inodes() {
                let err = |e| fmt_at(format_args!("base image, inode {}", inode.ino()))(e);
                if inode.kind().map_err(err)? != InodeKind::File {
                    continue;
                }
                for c in inode.file().map_err(err)?.chunks() {
                    let d = c.map_err(err)?.blob.digest;
                    match known.get(&d) {
                        Some(v) => {
                            verity_map.insert(d, *v);
                        }
                        None => {
                            todo.insert(d);
                        }
                    }
                }
            }
        }
        let todo: Vec<Digest> = todo.into_iter().collect();
        verity_map.extend(measure_blobs(&oci, &todo, threads)?);
    }
    let used: HashSet<Digest> = recs
        .iter()
        .filter_map(|r| match &r.kind {
            Kind::File { chunks } => Some(chunks.iter().map(|c| c.blob.digest)),
            _ => None,
        })
        .flatten()
        .collect();
    for c in &chunks {
        if used.contains(&c.digest) {
            verity_map.insert(c.digest, c.verity);
        }
    }
    let with_tree = opts.metadata_trees;
    put_metadata_tree(
        &oci,
        &layer_digest,
        &layer,
        with_tree,
        &mut verity_map,
        &mut trees,
    )?;
    let verity: Vec<(Digest, [u8; 32])> = verity_map.into_iter().collect();

    let mut layers = vec![BlobRef {
        digest: layer_digest,
        offset: 0,
        compressed: false,
    }];
    if let Some(b) = &base_image {
        layers.extend(b.layer_refs());
    }
    let manifest = encode_manifest(&layers, &verity, &trees, links.as_deref());
    let (digest, _) = oci.put_blob(&manifest)?;
    oci.sync()?;
    oci.commit_tag(tag, &digest, manifest.len() as u64, &|| {
        progress.info(&format!(
            "{}: waiting for another build to update index.json",
            oci.root().display()
        ))
    })?;
    Ok(BuildOutput {
        digest,
        manifest_size: manifest.len() as u64,
        stats,
    })
}

/// The link-count table of the file system the image shows (`recs`: every
/// inode of the tree, and the whiteouts of a delta): the inodes more than one
/// directory entry names, sorted by ino, with their number of names. An
/// entry that names a whiteout is no name.
fn link_counts(recs: &BTreeMap<u64, InodeRec>) -> Vec<LinkCount> {
    let mut names: BTreeMap<u64, u32> = BTreeMap::new();
    for rec in recs.values() {
        let Kind::Dir { entries } = &rec.kind else {
            continue;
        };
        for (_, ino) in entries {
            if !matches!(recs.get(ino).map(|r| &r.kind), Some(Kind::Wht)) {
                let n = names.entry(*ino).or_default();
                *n = n.saturating_add(1);
            }
        }
    }
    names
        .into_iter()
        .filter(|&(_, count)| count > 1)
        .map(|(ino, count)| LinkCount { ino, count })
        .collect()
}

/// Records the fs-verity digest of metadata blob `digest` (holding `bytes`)
/// and, if `with_tree` and it is larger than one block, stores its Merkle
/// tree as a blob:
/// a reader can then check the metadata page by page against the digest
/// (see `puzzlefs_format::merkle`) instead of hashing it whole before its
/// first use. The tree blob has an fs-verity entry of its own, so that
/// `enable-fs-verity` covers it and `gc` keeps it.
fn put_metadata_tree(
    oci: &OciDir,
    digest: &Digest,
    bytes: &[u8],
    with_tree: bool,
    verity_map: &mut BTreeMap<Digest, [u8; 32]>,
    trees: &mut HashMap<Digest, Digest>,
) -> Result<()> {
    let merkle = verity::merkle(bytes);
    verity_map.insert(*digest, merkle.digest);
    if with_tree && !merkle.tree.is_empty() {
        let (tree_digest, _) = oci.put_blob(&merkle.tree)?;
        verity_map.insert(tree_digest, verity::measure(&merkle.tree));
        trees.insert(*digest, tree_digest);
    }
    Ok(())
}

/// The fs-verity measurement of each blob of `digests`, read from the OCI
/// directory (and checked against its name, so that a damaged blob is an
/// error rather than a recorded measurement of the damage), on `threads`
/// threads.
fn measure_blobs(
    oci: &OciDir,
    digests: &[Digest],
    threads: usize,
) -> Result<Vec<(Digest, [u8; 32])>> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let work = || -> Result<Vec<(Digest, [u8; 32])>> {
        let mut out = Vec::new();
        loop {
            let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let Some(d) = digests.get(i) else {
                return Ok(out);
            };
            let blob = oci
                .read_blob(d)
                .context_with(|| format!("blob {} of the base image", hex::encode(d)))?;
            out.push((*d, verity::measure(&blob)));
        }
    };
    let parts: Vec<Result<Vec<_>>> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads.clamp(1, digests.len().max(1)))
            .map(|_| s.spawn(work))
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().expect("verity worker panicked"))
            .collect()
    });
    let mut all = Vec::with_capacity(digests.len());
    for p in parts {
        all.extend(p?);
    }
    Ok(all)
}

fn scan_base(layers: &[puzzlefs_format::Layer<'_>]) -> Result<Base> {
    let mut base = Base::default();
    for l in layers {
        if let Some(m) = l.max_ino() {
            base.max_ino = base.max_ino.max(m);
        }
    }
    image::walk(layers, |node| {
        let ino = node.inode.ino();
        base.max_ino = base.max_ino.max(ino);
        base.paths.insert(node.path.clone(), ino);
        let at = || format!("base image, {}", image::display_path(&node.path));
        if node.inode.kind().map_err(fmt_at(at()))? == InodeKind::Dir {
            let mut list = Vec::new();
            for e in node.inode.dir().map_err(fmt_at(at()))?.entries() {
                let e = e.map_err(fmt_at(at()))?;
                match find_inode(layers.iter().copied(), e.ino) {
                    Err(FmtError::Whiteout(_)) => {}
                    _ => list.push((e.name.to_vec(), e.ino)),
                }
            }
            base.listings.insert(node.path.clone(), list);
        }
        Ok(())
    })?;
    Ok(base)
}

/// The state of a [`scan`]: the tree so far and the numbering.
struct Scanner<'a> {
    out: Scan,
    base: &'a Base,
    files: &'a mpsc::Sender<SrcFile>,
    progress: &'a Progress,
    chunking: Chunking,
    delta: bool,
    /// Inode of each (dev, ino) with more than one link, once met.
    links: HashMap<(u64, u64), u64>,
    claimed: HashSet<u64>,
    counter: u64,
    next_new: u64,
}

/// Scans the tree depth-first, numbering each directory's entries when it is
/// visited (the other implementation's numbering, see `FORMAT.md`), and feeds
/// the regular files to the chunker: in inode order with
/// [`Chunking::Stream`] (the other implementation's stream), in the order a
/// depth-first reader of the mounted tree opens them otherwise (`tar`,
/// `cp -a`, `find`: each directory's entries in name order, a subdirectory's
/// files before the entries after it), so that the small files packed into
/// one chunk are read one after the other and the chunk once.
fn scan(
    root: &Path,
    base: &Base,
    files: &mpsc::Sender<SrcFile>,
    chunking: Chunking,
    progress: &Progress,
) -> Result<Scan> {
    let root_meta = fs::symlink_metadata(root).map_err(io_at(root))?;
    let mut s = Scanner {
        out: Scan {
            root: root.to_owned(),
            inodes: vec![SrcInode {
                ino: 1,
                parent: 0,
                name_at: 0,
                name_len: 0,
                stat: Stat::of(&root_meta),
                id: (root_meta.dev(), root_meta.ino()),
                entries_at: 0,
                entries_len: 0,
            }],
            names: Vec::new(),
            entries: Vec::new(),
            stream: Vec::new(),
        },
        base,
        files,
        progress,
        chunking,
        delta: !base.paths.is_empty(),
        links: HashMap::new(),
        claimed: HashSet::from([1]),
        counter: 2,
        next_new: base.max_ino.max(1) + 1,
    };
    // The directories being walked, each as the range of its children in
    // `out.inodes` not walked yet (hard links add no inode).
    let mut stack = vec![s.visit(0)?];
    while let Some(top) = stack.last_mut() {
        let Some(idx) = top.next() else {
            stack.pop();
            continue;
        };
        let stat = s.out.inodes[idx].stat;
        if stat.is_dir() {
            let children = s.visit(idx)?;
            stack.push(children);
        } else if s.chunking == Chunking::Files {
            s.stream(idx);
        }
    }
    Ok(s.out)
}

impl Scanner<'_> {
    /// Lists directory `qi`, sorted by name, and numbers its entries; returns
    /// the indices of the inodes added for them.
    fn visit(&mut self, qi: usize) -> Result<std::ops::Range<usize>> {
        let parent = u32::try_from(qi).map_err(|_| Error::TooManyInodes)?;
        let dir = self.out.path(qi);
        let rel = if self.delta {
            self.out.rel(qi)
        } else {
            Vec::new()
        };
        // Each entry is stat'ed relative to the open directory (no walk of
        // the whole path), then the entries are sorted by name.
        // (name, stat, (dev, ino), nlink)
        type Listed = (Vec<u8>, Stat, (u64, u64), u64);
        let mut names: Vec<Listed> = Vec::new();
        for e in fs::read_dir(&dir).map_err(io_at(&dir))? {
            let e = e.map_err(io_at(&dir))?;
            let meta = e.metadata().map_err(io_at(e.path()))?;
            let id = (meta.dev(), meta.ino());
            names.push((
                e.file_name().as_bytes().to_vec(),
                Stat::of(&meta),
                id,
                meta.nlink(),
            ));
        }
        names.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let entries_at = self.out.entries.len();
        let entries_len =
            u32::try_from(names.len()).map_err(|_| Error::TooManyEntries { path: dir.clone() })?;
        let first = self.out.inodes.len();
        for (name, stat, key, nlink) in names {
            let name_len = u8::try_from(name.len())
                .ok()
                .filter(|_| name.len() <= NAME_MAX && !name.contains(&0) && !name.contains(&b'/'));
            let Some(name_len) = name_len else {
                let path = dir.join(std::ffi::OsStr::from_bytes(&name));
                return Err(Error::NameTooLong { path });
            };
            let name_at = self.out.names.len();
            self.out.names.extend_from_slice(&name);
            let counted = self.counter;
            self.counter += 1;
            if !stat.is_dir() && nlink > 1 {
                if let Some(&ino) = self.links.get(&key) {
                    self.out.entries.push(SrcEntry {
                        name_at,
                        name_len,
                        ino,
                    });
                    continue;
                }
            }
            let ino = if self.delta {
                let mut crel = rel.clone();
                crel.push(name.clone());
                match self.base.paths.get(&crel) {
                    Some(&b) if !self.claimed.contains(&b) => b,
                    _ => {
                        self.next_new += 1;
                        self.next_new - 1
                    }
                }
            } else {
                counted
            };
            self.claimed.insert(ino);
            if !stat.is_dir() && nlink > 1 {
                self.links.insert(key, ino);
            }
            self.out.entries.push(SrcEntry {
                name_at,
                name_len,
                ino,
            });
            if stat.is_file() && stat.size > 0 {
                self.progress.add_total(stat.size);
            }
            self.out.inodes.push(SrcInode {
                ino,
                parent,
                name_at,
                name_len,
                stat,
                id: key,
                entries_at: 0,
                entries_len: 0,
            });
            if self.chunking == Chunking::Stream {
                self.stream(self.out.inodes.len() - 1);
            }
        }
        self.out.inodes[qi].entries_at = entries_at;
        self.out.inodes[qi].entries_len = entries_len;
        Ok(first..self.out.inodes.len())
    }

    /// Feeds inode `idx` to the chunker if it is a regular file with
    /// contents.
    fn stream(&mut self, idx: usize) {
        let i = &self.out.inodes[idx];
        if !i.stat.is_file() || i.stat.size == 0 {
            return;
        }
        let (size, (dev, ino)) = (i.stat.size, i.id);
        let rel_path = self.out.components(idx).join(&b'/');
        // The chunker stops early only after an error of its own, which it
        // reports; nothing to do here if it is gone.
        let _ = self.files.send(SrcFile {
            path: self.out.path(idx),
            size,
            dev,
            ino,
            key: crate::chunks::path_key(&rel_path),
        });
        self.out.stream.push(idx);
    }
}

/// What is read from a source inode besides its contents.
#[derive(Default)]
struct Attrs {
    xattrs: Vec<(Vec<u8>, Vec<u8>)>,
    symlink: Option<Vec<u8>>,
}

fn read_attrs(scan: &Scan, idx: usize) -> Result<Attrs> {
    let path = scan.path(idx);
    let mut xattrs = Vec::new();
    let names = sys::list_xattrs(&path).map_err(io_op(&path, "listing xattrs"))?;
    for n in names {
        match sys::get_xattr(&path, &n) {
            Ok(v) => xattrs.push((n, v)),
            // Removed between list and get: nothing to store.
            Err(e) if e.raw_os_error() == Some(libc::ENODATA) => {}
            Err(e) => {
                return Err(io_op(
                    &path,
                    format!("xattr {}", String::from_utf8_lossy(&n)),
                )(e))
            }
        }
    }
    let symlink = if scan.inodes[idx].stat.fmt() == libc::S_IFLNK {
        let t = fs::read_link(&path).map_err(io_at(&path))?;
        Some(t.as_os_str().as_bytes().to_vec())
    } else {
        None
    };
    Ok(Attrs { xattrs, symlink })
}

fn to_rec(
    scan: &Scan,
    idx: usize,
    attrs: Attrs,
    file_chunks: &mut HashMap<u64, Vec<FileChunk>>,
    base: &Base,
    claimed: &mut HashSet<u64>,
    recs: &mut BTreeMap<u64, InodeRec>,
) -> Result<InodeRec> {
    let i = &scan.inodes[idx];
    let st = i.stat;
    let symlink = attrs.symlink;
    let kind = if st.is_dir() {
        let mut entries = scan.entries(idx);
        let old = if base.listings.is_empty() {
            None
        } else {
            base.listings.get(&scan.rel(idx))
        };
        if let Some(old) = old {
            let names: HashSet<&[u8]> = entries.iter().map(|(n, _)| n.as_slice()).collect();
            let mut wht = Vec::new();
            for (name, ino) in old {
                if !names.contains(name.as_slice()) && !claimed.contains(ino) {
                    wht.push((name.clone(), *ino));
                }
            }
            for (_, ino) in &wht {
                recs.insert(
                    *ino,
                    InodeRec {
                        ino: *ino,
                        kind: Kind::Wht,
                        uid: 0,
                        gid: 0,
                        permissions: 0o644,
                        xattrs: Vec::new(),
                        symlink: None,
                    },
                );
            }
            entries.extend(wht);
            entries.sort();
        }
        Kind::Dir { entries }
    } else {
        match st.fmt() {
            libc::S_IFREG => Kind::File {
                chunks: file_chunks.remove(&i.ino).unwrap_or_default(),
            },
            libc::S_IFLNK => Kind::Lnk,
            libc::S_IFIFO => Kind::Fifo,
            libc::S_IFSOCK => Kind::Sock,
            libc::S_IFCHR => Kind::Chr {
                major: sys::major(st.rdev),
                minor: sys::minor(st.rdev),
            },
            libc::S_IFBLK => Kind::Blk {
                major: sys::major(st.rdev),
                minor: sys::minor(st.rdev),
            },
            _ => Kind::Unknown,
        }
    };
    let xattrs = attrs.xattrs;
    claimed.insert(i.ino);
    Ok(InodeRec {
        ino: i.ino,
        kind,
        uid: st.uid,
        gid: st.gid,
        permissions: (st.mode & 0o7777) as u16,
        xattrs,
        symlink,
    })
}
