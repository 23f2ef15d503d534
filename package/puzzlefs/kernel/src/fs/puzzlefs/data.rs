// SPDX-License-Identifier: GPL-2.0

//! File contents and symlink targets, one folio or one readahead window at a time.
//!
//! A range of a regular file is filled from the pieces of the chunks that back it
//! (`puzzlefs_format::File::map_from`, started from the inode's index of chunk offsets, so that
//! mapping a range costs a binary search and a few chunk steps whatever its offset: reading a
//! file is linear in its size). Uncompressed pieces are read from their blob at their offset:
//! by `read_folio` page by page straight into the folio, by `readahead` the rest of the piece
//! within the window in one read, then copied into the folios it covers; the blob's pages are
//! then dropped from its page cache, so that the bytes are cached once. Compressed pieces are
//! copied out of the decompressed chunk. Nothing else of a blob is read. A missing or short
//! blob fails the read with `EIO`.

#![forbid(unsafe_code)]

use crate::decompress;
use crate::error::ResultExt;
use crate::inode::{Extra, CHUNK_STRIDE};
use crate::mount::Info;
use crate::PuzzleFs;
use kernel::fs::{
    file::RegularFile,
    folio::{LockedFolio, Readahead},
    inode::INode,
};
use kernel::pr_err_ratelimited;
use kernel::prelude::*;
use kernel::sched::cond_resched;
use kernel::sync::Arc;
use puzzlefs_format::{Digest, File, HexDigest, InodeKind, Piece, Pieces};

/// Pieces filled between two `cond_resched()` calls.
const RESCHED_EVERY: usize = 64;
/// Largest range of a blob that readahead reads in one call (into a bounce buffer).
const MAX_READ: usize = 512 << 10;

/// Where to start mapping file offset `pos`: the last indexed chunk starting at or before it.
fn hint(starts: &[u64], pos: u64) -> (u32, u64) {
    // Number of indexed chunks that start at or before `pos` (chunk 0 starts at 0).
    let k = starts.partition_point(|&s| s <= pos);
    match k.checked_sub(1).and_then(|k| Some((k, *starts.get(k)?))) {
        Some((k, start)) => (
            u32::try_from(k)
                .ok()
                .and_then(|k| k.checked_mul(CHUNK_STRIDE))
                .unwrap_or(0),
            start,
        ),
        None => (0, 0),
    }
}

/// The decompressed chunks one `read_folio` call uses: each is decompressed (or taken from the
/// per-mount cache) at most once per call, however the file's pieces interleave them. A piece
/// list that needs more distinct chunks, or more decompressed bytes, than a folio of its size
/// can legitimately touch is refused (`EIO`): that bounds the work and memory of one call.
struct Chunks {
    held: KVec<(Digest, Arc<KVVec<u8>>)>,
    bytes: usize,
    max_count: usize,
    max_bytes: usize,
}

impl Chunks {
    /// For reading `len` bytes of a file (one folio, or a readahead window).
    fn new(len: usize) -> Self {
        Chunks {
            held: KVec::new(),
            bytes: 0,
            // Chunks written by the builders are 16 KiB or more: one new chunk per page at
            // most, plus the two at the ends.
            max_count: len / kernel::page::PAGE_SIZE + 2,
            // Two whole chunks at the ends, plus the bytes of the folio many times over.
            max_bytes: 2 * decompress::MAX_CHUNK + len.saturating_mul(16),
        }
    }

    fn get(&mut self, info: &Info, ino: u64, digest: &Digest) -> Result<Arc<KVVec<u8>>> {
        // Consecutive pieces usually come from the same chunk: look at the last one first.
        if let Some((d, data)) = self.held.last() {
            if d == digest {
                return Ok(data.clone());
            }
        }
        if let Some((_, data)) = self.held.iter().find(|(d, _)| d == digest) {
            return Ok(data.clone());
        }
        if self.held.len() >= self.max_count {
            pr_err_ratelimited!(
                "inode {}: more than {} compressed chunks in one folio\n",
                ino,
                self.max_count
            );
            return Err(EIO);
        }
        let data = decompress::chunk(info, ino, digest)?;
        self.bytes = self.bytes.saturating_add(data.len());
        if self.bytes > self.max_bytes {
            pr_err_ratelimited!(
                "inode {}: one folio needs more than {} bytes of decompressed chunks\n",
                ino,
                self.max_bytes
            );
            return Err(EIO);
        }
        self.held.push((*digest, data.clone()), GFP_KERNEL)?;
        Ok(data)
    }
}

/// Fills consecutive folios of a regular file, in order, from the pieces of its chunks.
///
/// The range is mapped once (from the inode's chunk index); each piece is used for as many
/// folios as it covers. With `read_ahead`, the rest of an uncompressed piece within the range
/// is read from its blob in one call (up to [`MAX_READ`] bytes) and copied into the folios it
/// covers, instead of one read per page.
struct Filler<'a, 'm> {
    info: &'a Info,
    ino: u64,
    pieces: Pieces<'m>,
    /// The piece being used, and how many of its bytes were.
    cur: Option<(Piece, u64)>,
    pieces_seen: usize,
    /// File offset of the next folio expected, and the end of the range.
    pos: u64,
    end: u64,
    open: Option<(Digest, Arc<RegularFile>)>,
    chunks: Chunks,
    read_ahead: bool,
    /// Bytes of a blob read ahead: its digest, the blob offset of the first byte, the bytes.
    buf: Option<(Digest, u64, KVVec<u8>)>,
}

impl<'a, 'm> Filler<'a, 'm> {
    fn new(
        info: &'a Info,
        ino: u64,
        file: &File<'m>,
        starts: &[u64],
        pos: u64,
        len: usize,
        read_ahead: bool,
    ) -> Result<Self> {
        let (chunk, chunk_start) = hint(starts, pos);
        Ok(Filler {
            info,
            ino,
            pieces: file
                .map_from(chunk, chunk_start, pos, len as u64)
                .data(ino)?,
            cur: None,
            pieces_seen: 0,
            pos,
            end: pos.checked_add(len as u64).ok_or(EOVERFLOW)?,
            open: None,
            chunks: Chunks::new(len),
            read_ahead,
            buf: None,
        })
    }

    fn blob(&mut self, digest: &Digest) -> Result<Arc<RegularFile>> {
        if let Some((d, f)) = &self.open {
            if d == digest {
                return Ok(f.clone());
            }
        }
        let file = self.info.open_blob(digest).map_err(|e| {
            pr_err_ratelimited!(
                "inode {}: cannot open chunk blob {}: {:?}\n",
                self.ino,
                HexDigest(digest),
                e
            );
            EIO
        })?;
        self.open = Some((*digest, file.clone()));
        Ok(file)
    }

    /// The next piece to use, and how much of it was used.
    fn piece(&mut self) -> Result<Option<(Piece, u64)>> {
        if let Some((p, used)) = self.cur {
            if used < p.len {
                return Ok(Some((p, used)));
            }
        }
        let Some(p) = self.pieces.next() else {
            return Ok(None);
        };
        self.pieces_seen += 1;
        if self.pieces_seen % RESCHED_EVERY == 0 {
            cond_resched();
        }
        Ok(Some((p.data(self.ino)?, 0)))
    }

    /// Copies `n` bytes at `off` of uncompressed blob `digest` into `folio` at `at`; `left` is
    /// what the piece has from `off` on within the range.
    fn read_raw(
        &mut self,
        digest: &Digest,
        off: u64,
        n: usize,
        left: u64,
        folio: &mut LockedFolio<'_>,
        at: usize,
    ) -> Result {
        let ino = self.ino;
        let blob = self.blob(digest)?;
        let fail = |e: Error| {
            pr_err_ratelimited!(
                "inode {}: cannot read {} bytes at {} of chunk blob {}: {:?}\n",
                ino,
                n,
                off,
                HexDigest(digest),
                e
            );
            EIO
        };
        if !self.read_ahead {
            let mut pos = off;
            folio
                .for_each_page_mut(at, n, |buf| {
                    blob.read_exact_at(buf, pos)?;
                    pos = pos.checked_add(buf.len() as u64).ok_or(EIO)?;
                    Ok(())
                })
                .map_err(fail)?;
            blob.drop_cached(off, off.checked_add(n as u64).ok_or(EIO)?);
            return Ok(());
        }
        let end = off.checked_add(n as u64).ok_or(EIO)?;
        let held = match &self.buf {
            Some((d, start, b)) => {
                d == digest && *start <= off && end <= start.saturating_add(b.len() as u64)
            }
            None => false,
        };
        if !held {
            // One read for the rest of the piece in the range (at least what this folio needs).
            let want = usize::try_from(left)
                .unwrap_or(MAX_READ)
                .min(MAX_READ)
                .max(n);
            let mut b = KVVec::from_elem(0u8, want, GFP_KERNEL)?;
            blob.read_exact_at(&mut b, off).map_err(fail)?;
            // The bytes are about to be in this file's page cache: do not keep them cached a
            // second time as the blob's pages.
            blob.drop_cached(off, off.checked_add(want as u64).ok_or(EIO)?);
            self.buf = Some((*digest, off, b));
        }
        let src = match &self.buf {
            Some((_, start, b)) => usize::try_from(off - start)
                .ok()
                .and_then(|s| b.get(s..s.checked_add(n)?)),
            None => None,
        }
        .ok_or(EIO)?;
        folio.write(at, src)
    }

    /// Fills `folio`, the next one of the range.
    fn fill(&mut self, folio: &mut LockedFolio<'_>) -> Result {
        let ino = self.ino;
        let fpos = u64::try_from(folio.pos())?;
        let size = folio.size();
        if fpos != self.pos {
            pr_err_ratelimited!("inode {}: folios out of order\n", ino);
            return Err(EIO);
        }
        let mut filled = 0usize;
        while filled < size {
            let Some((piece, used)) = self.piece()? else {
                // End of file: the rest of the folio is zeroed.
                break;
            };
            let at = fpos.checked_add(filled as u64).ok_or(EIO)?;
            if piece.file_offset.checked_add(used) != Some(at) {
                pr_err_ratelimited!("inode {}: chunk map is not contiguous\n", ino);
                return Err(EIO);
            }
            let left = piece.len - used;
            let n = usize::try_from(left.min((size - filled) as u64))?;
            let off = piece.blob.offset.checked_add(used).ok_or(EIO)?;
            if piece.blob.compressed {
                let data = self.chunks.get(self.info, ino, &piece.blob.digest)?;
                let src = usize::try_from(off)
                    .ok()
                    .and_then(|start| data.get(start..start.checked_add(n)?))
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
                let in_range = left.min(self.end.saturating_sub(at));
                self.read_raw(&piece.blob.digest, off, n, in_range, folio, filled)?;
            }
            filled += n;
            self.cur = Some((piece, used + n as u64));
        }
        folio.zero(filled, size - filled)?;
        self.pos = fpos.checked_add(size as u64).ok_or(EOVERFLOW)?;
        Ok(())
    }
}

/// Fills `folio` of `inode`.
pub(crate) fn read_folio(inode: &INode<PuzzleFs>, folio: &mut LockedFolio<'_>) -> Result {
    let ino = inode.ino();
    let info = inode.super_block().data();
    let data = inode.data();
    let pos = u64::try_from(folio.pos())?;
    let size = folio.size();
    info.with_inode(ino, data.layer, data.pos, |i| {
        match i.kind().inode(ino)? {
            InodeKind::Lnk => {
                let target = i.symlink_target().data(ino)?.ok_or(EIO)?;
                if pos != 0 || target.len() > size {
                    return Err(EIO);
                }
                folio.write(0, target)?;
                folio.zero(target.len(), size - target.len())
            }
            InodeKind::File => {
                let Extra::File { starts } = &data.extra else {
                    return Err(EIO);
                };
                let file = i.file().data(ino)?;
                Filler::new(info, ino, &file, starts, pos, size, false)?.fill(folio)
            }
            _ => Err(EIO),
        }
    })
}

/// Fills the folios of a readahead request of regular file `inode`, mapping the range once.
pub(crate) fn readahead(inode: &INode<PuzzleFs>, ra: &mut Readahead<'_>) -> Result {
    let ino = inode.ino();
    let info = inode.super_block().data();
    let data = inode.data();
    let Extra::File { starts } = &data.extra else {
        // Not a regular file: the folios are left to read_folio.
        return Ok(());
    };
    let pos = u64::try_from(ra.pos())?;
    let len = ra.len();
    info.with_inode(ino, data.layer, data.pos, |i| {
        let file = i.file().data(ino)?;
        let mut filler = Filler::new(info, ino, &file, starts, pos, len, true)?;
        ra.for_each_folio(|folio| filler.fill(folio))
    })
}
