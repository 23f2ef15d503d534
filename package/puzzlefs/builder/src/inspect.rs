//! `puzzlefs inspect`: what an OCI directory and its images hold.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;

use puzzlefs_format::{Digest, HexDigest, InodeKind};
use serde::Serialize;

use crate::error::{fmt_at, Result};
use crate::image::{self, Image};
use crate::oci::OciDir;

/// Summary of one metadata layer.
#[derive(Debug, Clone, Serialize)]
pub struct LayerInfo {
    /// Blob digest (hex).
    pub digest: String,
    /// Blob size.
    pub size: u64,
    /// Inodes in the layer (whiteouts included).
    pub inodes: u64,
    /// Whiteout inodes.
    pub whiteouts: u64,
    /// The blob holding the layer's fs-verity Merkle tree (hex), if the
    /// image stores one.
    pub merkle_tree: Option<String>,
}

/// Summary of one image.
#[derive(Debug, Clone, Serialize)]
pub struct ImageInfo {
    /// Tag.
    pub tag: String,
    /// Manifest digest (hex).
    pub manifest: String,
    /// Manifest size.
    pub manifest_size: u64,
    /// Layers, top first.
    pub layers: Vec<LayerInfo>,
    /// Reachable inodes by kind.
    pub kinds: BTreeMap<String, u64>,
    /// Reachable inodes (hard links once).
    pub inodes: u64,
    /// Paths (hard links counted each).
    pub paths: u64,
    /// Chunk pieces referenced by files.
    pub chunk_refs: u64,
    /// Distinct chunk blobs.
    pub chunks: u64,
    /// Sum of file sizes.
    pub logical_bytes: u64,
    /// Bytes of the distinct chunks, decompressed.
    pub unique_bytes: u64,
    /// Bytes of the distinct chunk blobs as stored.
    pub stored_chunk_bytes: u64,
    /// Stored chunk, metadata and manifest bytes.
    pub stored_bytes: u64,
    /// logical / unique.
    pub dedup_ratio: f64,
    /// unique / stored chunk bytes.
    pub compression_ratio: f64,
    /// logical / stored.
    pub total_ratio: f64,
    /// fs-verity entries in the manifest.
    pub verity_entries: u64,
    /// Entries of the manifest's link-count table (`Rootfs.linkCounts`),
    /// if it records one.
    pub link_counts: Option<u64>,
    /// Whether that table is well-formed and gives every reachable
    /// non-directory the number of paths the walk finds for it.
    pub link_counts_match: Option<bool>,
}

/// Everything `inspect` reports.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The OCI directory.
    pub oci_dir: String,
    /// Tags in index order.
    pub tags: Vec<String>,
    /// Blobs in the directory.
    pub blobs: u64,
    /// Their total size.
    pub blob_bytes: u64,
    /// Per image.
    pub images: Vec<ImageInfo>,
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        1.0
    } else {
        a as f64 / b as f64
    }
}

/// Inspects `tag`, or every tag.
pub fn inspect(oci_dir: &Path, tag: Option<&str>) -> Result<Report> {
    let oci = OciDir::open(oci_dir)?;
    let tags = oci.index()?.tags();
    let mut blobs = 0;
    let mut blob_bytes = 0;
    if let Ok(rd) = std::fs::read_dir(oci.root().join("blobs/sha256")) {
        for e in rd.flatten() {
            if let Ok(m) = e.metadata() {
                if m.is_file() {
                    blobs += 1;
                    blob_bytes += m.len();
                }
            }
        }
    }
    let chosen: Vec<String> = match tag {
        Some(t) => vec![t.to_owned()],
        None => tags.clone(),
    };
    let mut images = Vec::new();
    for t in chosen {
        let img = Image::open_tag(&oci, &t)?;
        images.push(image_info(&oci, &img, &t)?);
    }
    Ok(Report {
        oci_dir: oci_dir.display().to_string(),
        tags,
        blobs,
        blob_bytes,
        images,
    })
}

fn blob_size(oci: &OciDir, d: &Digest) -> u64 {
    std::fs::metadata(oci.blob_path(d)).map_or(0, |m| m.len())
}

fn image_info(oci: &OciDir, img: &Image<'_>, tag: &str) -> Result<ImageInfo> {
    let blobs = img.blobs();
    let layers = image::views(&blobs)?;
    let mut layer_infos = Vec::new();
    for (r, l) in img.layer_refs().iter().zip(&layers) {
        let whiteouts = l
            .inodes()
            .filter(|i| matches!(i.kind(), Ok(InodeKind::Wht)))
            .count() as u64;
        let merkle_tree = img
            .manifest()
            .verity_entry_for(&r.digest)
            .map_err(fmt_at(format!("manifest {}", HexDigest(&img.digest))))?
            .and_then(|e| e.merkle_tree);
        layer_infos.push(LayerInfo {
            digest: hex::encode(r.digest),
            size: blob_size(oci, &r.digest),
            inodes: u64::from(l.len()),
            whiteouts,
            merkle_tree: merkle_tree.map(hex::encode),
        });
    }
    let mut kinds: BTreeMap<String, u64> = BTreeMap::new();
    let mut seen: HashSet<u64> = HashSet::new();
    let mut paths = 0u64;
    let mut logical = 0u64;
    let mut refs = 0u64;
    let mut chunk_len: HashMap<Digest, u64> = HashMap::new();
    // Paths of each non-directory, to check the recorded link counts.
    let mut names: BTreeMap<u64, u32> = BTreeMap::new();
    image::walk(&layers, |node| {
        paths += 1;
        let at = || image::display_path(&node.path);
        let kind = node.inode.kind().map_err(fmt_at(at()))?;
        if kind != InodeKind::Dir {
            let n = names.entry(node.inode.ino()).or_default();
            *n = n.saturating_add(1);
        }
        if !seen.insert(node.inode.ino()) {
            return Ok(());
        }
        *kinds.entry(format!("{kind:?}").to_lowercase()).or_default() += 1;
        if kind == InodeKind::File {
            let f = node.inode.file().map_err(fmt_at(at()))?;
            logical += f.size().map_err(fmt_at(at()))?;
            for c in f.chunks() {
                let c = c.map_err(fmt_at(at()))?;
                refs += 1;
                let end = c.blob.offset.saturating_add(c.len);
                let e = chunk_len.entry(c.blob.digest).or_default();
                *e = (*e).max(end);
            }
        }
        Ok(())
    })?;
    let unique: u64 = chunk_len.values().sum();
    let stored_chunks: u64 = chunk_len.keys().map(|d| blob_size(oci, d)).sum();
    let manifest_size = blob_size(oci, &img.digest);
    let stored = stored_chunks + layer_infos.iter().map(|l| l.size).sum::<u64>() + manifest_size;
    let verity_entries = img
        .manifest()
        .verity_entries()
        .map(|v| v.count() as u64)
        .unwrap_or(0);
    let at = || format!("manifest {}", HexDigest(&img.digest));
    let (link_counts, link_counts_match) =
        match img.manifest().link_counts().map_err(fmt_at(at()))? {
            None => (None, None),
            Some(table) => {
                let len = u64::from(table.len());
                let recorded: Option<Vec<(u64, u32)>> =
                    table.map(|e| e.ok().map(|e| (e.ino, e.count))).collect();
                let walked: Vec<(u64, u32)> = names.into_iter().filter(|&(_, n)| n > 1).collect();
                (Some(len), Some(recorded.as_ref() == Some(&walked)))
            }
        };
    Ok(ImageInfo {
        tag: tag.to_owned(),
        manifest: HexDigest(&img.digest).to_string(),
        manifest_size,
        layers: layer_infos,
        kinds,
        inodes: seen.len() as u64,
        paths,
        chunk_refs: refs,
        chunks: chunk_len.len() as u64,
        logical_bytes: logical,
        unique_bytes: unique,
        stored_chunk_bytes: stored_chunks,
        stored_bytes: stored,
        dedup_ratio: ratio(logical, unique),
        compression_ratio: ratio(unique, stored_chunks),
        total_ratio: ratio(logical, stored),
        verity_entries,
        link_counts,
        link_counts_match,
    })
}

/// Human-readable report.
pub fn render(r: &Report) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{}: {} tags, {} blobs, {} bytes",
        r.oci_dir,
        r.tags.len(),
        r.blobs,
        r.blob_bytes
    );
    for i in &r.images {
        let _ = writeln!(
            s,
            "tag {}: manifest {} ({} bytes, {} fs-verity entries)",
            i.tag, i.manifest, i.manifest_size, i.verity_entries
        );
        for (n, l) in i.layers.iter().enumerate() {
            let tree = l
                .merkle_tree
                .as_ref()
                .map_or(String::new(), |t| format!(", Merkle tree {t}"));
            let _ = writeln!(
                s,
                "  layer {n}: {} ({} bytes, {} inodes, {} whiteouts{tree})",
                l.digest, l.size, l.inodes, l.whiteouts
            );
        }
        let kinds: Vec<String> = i.kinds.iter().map(|(k, v)| format!("{k} {v}")).collect();
        let _ = writeln!(
            s,
            "  inodes: {} ({}), paths: {}",
            i.inodes,
            kinds.join(", "),
            i.paths
        );
        let links = match (i.link_counts, i.link_counts_match) {
            (Some(n), Some(true)) => format!("recorded, {n} with more than one name, as walked"),
            (Some(n), _) => format!("recorded ({n} entries), NOT what the walk counts"),
            (None, _) => "not recorded".to_owned(),
        };
        let _ = writeln!(s, "  link counts: {links}");
        let _ = writeln!(
            s,
            "  chunks: {} distinct, {} references",
            i.chunks, i.chunk_refs
        );
        let _ = writeln!(
            s,
            "  bytes: logical {}, distinct {}, stored chunks {}, stored total {}",
            i.logical_bytes, i.unique_bytes, i.stored_chunk_bytes, i.stored_bytes
        );
        let _ = writeln!(
            s,
            "  ratios: dedup {:.3}, compression {:.3}, logical/stored {:.3}",
            i.dedup_ratio, i.compression_ratio, i.total_ratio
        );
    }
    s
}
