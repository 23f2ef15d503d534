// SPDX-License-Identifier: GPL-2.0

//! File contents and symlink targets, one folio at a time.
//!
//! A folio of a regular file is filled from the pieces of the chunks that back its byte range
//! (`puzzlefs_format::File::map`): uncompressed pieces are read straight into the folio from
//! their blob at their offset, compressed ones copied out of the decompressed chunk. Nothing
//! else of a blob is read. A missing or short blob fails the read with `EIO`.

#![forbid(unsafe_code)]

use crate::decompress;
use crate::error::ResultExt;
use crate::PuzzleFs;
use kernel::fs::{file::RegularFile, folio::LockedFolio, inode::INode};
use kernel::pr_err_ratelimited;
use kernel::prelude::*;
use kernel::sync::Arc;
use puzzlefs_format::{Digest, HexDigest, InodeKind};

/// Fills `folio` of `inode`.
pub(crate) fn read_folio(inode: &INode<PuzzleFs>, folio: &mut LockedFolio<'_>) -> Result {
    let ino = inode.ino();
    let info = inode.super_block().data();
    let pos = u64::try_from(folio.pos())?;
    let size = folio.size();
    let filled = info.with_layers(|blobs| {
        let i = blobs.find(ino).inode(ino)?;
        match i.kind().inode(ino)? {
            InodeKind::Lnk => {
                let target = i.symlink_target().data(ino)?.ok_or(EIO)?;
                if pos != 0 || target.len() > size {
                    return Err(EIO);
                }
                folio.write(0, target)?;
                Ok(target.len())
            }
            InodeKind::File => {
                let file = i.file().data(ino)?;
                let mut filled = 0usize;
                let mut open: Option<(Digest, Arc<RegularFile>)> = None;
                for piece in file.map(pos, size as u64).data(ino)? {
                    let piece = piece.data(ino)?;
                    let len = usize::try_from(piece.len)?;
                    if piece.file_offset != pos + filled as u64 || len > size - filled {
                        pr_err_ratelimited!("inode {}: chunk map is not contiguous\n", ino);
                        return Err(EIO);
                    }
                    if piece.blob.compressed {
                        let data = decompress::chunk(info, ino, &piece.blob.digest)?;
                        let src = usize::try_from(piece.blob.offset)
                            .ok()
                            .and_then(|start| data.get(start..start.checked_add(len)?))
                            .ok_or_else(|| {
                                pr_err_ratelimited!(
                                    "inode {}: piece beyond the end of chunk {}\n",
                                    ino,
                                    HexDigest(&piece.blob.digest)
                                );
                                EIO
                            })?;
                        folio.write(filled, src)?;
                    } else {
                        let blob = match open.take() {
                            Some((d, f)) if d == piece.blob.digest => (d, f),
                            _ => (
                                piece.blob.digest,
                                info.open_blob(&piece.blob.digest).map_err(|e| {
                                    pr_err_ratelimited!(
                                        "inode {}: cannot open chunk blob {}: {:?}\n",
                                        ino,
                                        HexDigest(&piece.blob.digest),
                                        e
                                    );
                                    EIO
                                })?,
                            ),
                        };
                        let mut at = piece.blob.offset;
                        folio
                            .for_each_page_mut(filled, len, |buf| {
                                blob.1.read_exact_at(buf, at)?;
                                at = at.checked_add(buf.len() as u64).ok_or(EIO)?;
                                Ok(())
                            })
                            .map_err(|e| {
                                pr_err_ratelimited!(
                                    "inode {}: cannot read {} bytes at {} of chunk blob {}: {:?}\n",
                                    ino,
                                    len,
                                    piece.blob.offset,
                                    HexDigest(&piece.blob.digest),
                                    e
                                );
                                EIO
                            })?;
                        open = Some(blob);
                    }
                    filled += len;
                }
                Ok(filled)
            }
            _ => Err(EIO),
        }
    })?;
    folio.zero(filled, size - filled)
}
