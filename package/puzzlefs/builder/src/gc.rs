//! `puzzlefs gc`: removes the blobs that no tag reaches.
//!
//! A blob is kept when a tag's manifest is it, or names it as a metadata
//! layer or an fs-verity entry, or a file of one of its layers has a chunk
//! in it. Builds hold the gc lock shared until their tag is committed, so a
//! gc never removes the blobs of a build in progress. Temporary files of
//! dead writers go too.

use std::collections::HashSet;
use std::path::Path;

use puzzlefs_format::{Digest, HexDigest, InodeKind};

use crate::error::{fmt_at, io_at, Context, Error, Result};
use crate::image::Image;
use crate::oci::{parse_digest, OciDir};
use crate::progress::Progress;

/// What a gc found (and removed unless it was a dry run).
#[derive(Debug, Default, Clone)]
pub struct GcStats {
    /// Blobs kept.
    pub kept: u64,
    /// Blobs no tag reaches.
    pub unreachable: u64,
    /// Their bytes.
    pub unreachable_bytes: u64,
    /// Temporary files of dead writers removed.
    pub tmp_files: u64,
}

/// Collects the unreachable blobs of `oci_dir`, and removes them unless
/// `dry_run`; names each on the verbose channel.
pub fn gc(oci_dir: &Path, dry_run: bool, progress: &Progress) -> Result<GcStats> {
    let oci = OciDir::open(oci_dir)?;
    let _gc = oci.lock_for_gc(&|| {
        progress.info(&format!(
            "{}: waiting for running builds to finish",
            oci_dir.display()
        ))
    })?;
    let _index = oci.lock_index(&|| {
        progress.info(&format!(
            "{}: waiting for the index lock",
            oci_dir.display()
        ))
    })?;
    let mut keep: HashSet<Digest> = HashSet::new();
    for d in oci.index()?.manifests {
        let digest = parse_digest(&d.digest).ok_or_else(|| Error::BadDigest(d.digest.clone()))?;
        let img = Image::open(&oci, digest).context_with(|| format!("manifest {}", d.digest))?;
        reach(&img, &mut keep)?;
    }
    let mut stats = GcStats {
        tmp_files: if dry_run { 0 } else { oci.sweep_tmp()? },
        ..Default::default()
    };
    let dir = oci.root().join("blobs/sha256");
    for e in std::fs::read_dir(&dir).map_err(io_at(&dir))? {
        let e = e.map_err(io_at(&dir))?;
        let name = e.file_name();
        let Some(d) = parse_digest(&name.to_string_lossy()) else {
            // Not a blob (a temporary file of a running writer).
            continue;
        };
        if keep.contains(&d) {
            stats.kept += 1;
            continue;
        }
        let len = e.metadata().map_or(0, |m| m.len());
        stats.unreachable += 1;
        stats.unreachable_bytes += len;
        progress.detail(&format!(
            "{} {}",
            if dry_run { "would remove" } else { "removing" },
            e.path().display()
        ));
        if !dry_run {
            std::fs::remove_file(e.path()).map_err(io_at(e.path()))?;
        }
    }
    Ok(stats)
}

/// Adds every blob `img` uses to `keep`.
fn reach(img: &Image<'_>, keep: &mut HashSet<Digest>) -> Result<()> {
    keep.insert(img.digest);
    for r in img.layer_refs() {
        keep.insert(r.digest);
    }
    let m = img.manifest();
    let at = || format!("manifest {}", HexDigest(&img.digest));
    for e in m.verity_entries().map_err(fmt_at(at()))? {
        let e = e.map_err(fmt_at(at()))?;
        keep.insert(e.digest);
        keep.extend(e.merkle_tree);
    }
    // Every inode of every layer, shadowed ones included: a blob stays as
    // long as any layer of a tagged image names it.
    for blob in img.blobs() {
        let layer = blob.layer().map_err(fmt_at("metadata layer"))?;
        for inode in layer.inodes() {
            let at = || format!("inode {}", inode.ino());
            if inode.kind().map_err(fmt_at(at()))? != InodeKind::File {
                continue;
            }
            let f = inode.file().map_err(fmt_at(at()))?;
            for c in f.chunks() {
                keep.insert(c.map_err(fmt_at(at()))?.blob.digest);
            }
        }
    }
    Ok(())
}
