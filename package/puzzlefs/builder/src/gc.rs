//! `puzzlefs gc`: removes the blobs that no tag reaches.
//!
//! A blob is kept when a tag's manifest is it, or names it as a metadata
//! layer or an fs-verity entry, or a file of one of its layers has a chunk
//! in it. Builds hold the gc lock shared until their tag is committed, so a
//! gc never removes the blobs of a build in progress. Temporary files of
//! dead writers go too.

use std::collections::HashSet;
use std::path::Path;

use anyhow::{anyhow, Context, Result};
use puzzlefs_format::{Digest, InodeKind};

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
        let digest = parse_digest(&d.digest)
            .ok_or_else(|| anyhow!("index.json: bad digest {:?}", d.digest))?;
        let img = Image::open(&oci, digest).with_context(|| format!("manifest {}", d.digest))?;
        reach(&img, &mut keep)?;
    }
    let mut stats = GcStats {
        tmp_files: if dry_run { 0 } else { oci.sweep_tmp()? },
        ..Default::default()
    };
    let dir = oci.root().join("blobs/sha256");
    for e in std::fs::read_dir(&dir).with_context(|| format!("{}", dir.display()))? {
        let e = e.with_context(|| format!("{}", dir.display()))?;
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
            std::fs::remove_file(e.path()).with_context(|| format!("{}", e.path().display()))?;
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
    for e in m.verity_entries().map_err(|e| anyhow!("manifest: {e}"))? {
        keep.insert(e.map_err(|e| anyhow!("manifest: {e}"))?.digest);
    }
    // Every inode of every layer, shadowed ones included: a blob stays as
    // long as any layer of a tagged image names it.
    for blob in img.blobs() {
        let layer = blob.layer().map_err(|e| anyhow!("metadata layer: {e}"))?;
        for inode in layer.inodes() {
            if inode
                .kind()
                .map_err(|e| anyhow!("inode {}: {e}", inode.ino()))?
                != InodeKind::File
            {
                continue;
            }
            let f = inode
                .file()
                .map_err(|e| anyhow!("inode {}: {e}", inode.ino()))?;
            for c in f.chunks() {
                keep.insert(
                    c.map_err(|e| anyhow!("inode {}: {e}", inode.ino()))?
                        .blob
                        .digest,
                );
            }
        }
    }
    Ok(())
}
