// SPDX-License-Identifier: GPL-2.0

//! File contents and symlink targets, one folio or one readahead window at a time.
//!
//! A range of a regular file is filled from the pieces of the chunks that back it
//! (`puzzlefs_format::ChunkList::map_from`, started from the inode's index of chunk offsets, so
//! that mapping a range costs a binary search and a few chunk steps whatever its offset: reading a
//! file is linear in its size). Pieces are copied out of their chunk, read whole (decompressed if
//! compressed) and kept in the per-mount chunk cache (`decompress`), so that a chunk is read once
//! however many folios, readahead windows and small files its pieces fill. An uncompressed chunk
//! too large to read whole, or one more than a call may read whole, is read piece by piece, page by
//! page straight into the folio, and the blob's pages are then dropped from its page cache, so that
//! the bytes are cached once. A missing or short blob fails the read with `EIO`.

#![forbid(unsafe_code)]

use crate::decompress::{self, Key, Keys, Whole};
use crate::error::ResultExt;
use crate::inode::{Extra, CHUNK_STRIDE};
use crate::meta::Blob;
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
use puzzlefs_format::{ChunkList, Digest, HexDigest, InodeKind, Piece, Pieces};

/// Pieces filled between two `cond_resched()` calls.
const RESCHED_EVERY: usize = 64;

/// Most pieces of a readahead window looked at for the chunks to read at once.
const PREFETCH_PIECES: usize = 4 * decompress::PREFETCH;

/// Inodes after a file's, in its layer, looked at for the chunks the next files need.
const AHEAD_INODES: u32 = 16;
/// Most chunks of those files read with the last window of a file.
const AHEAD_CHUNKS: usize = 3;

/// Where to start mapping file offset `pos`: the last indexed chunk starting at or before it
/// (chunk 0 if none is indexed).
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

/// The chunks one `read_folio` or `readahead` call uses: each is read whole (or taken from
/// the per-mount cache) at most once per call, however the file's pieces interleave them. A
/// piece list that needs more distinct chunks, or more chunk bytes, than a range of its size
/// can legitimately touch is refused (`EIO`) if the chunks are compressed, and read piece by
/// piece otherwise: that bounds the work and memory of one call.
struct Chunks {
    /// The chunk used last: the only one of most calls, which then allocate nothing here.
    last: Option<(Key, Arc<KVVec<u8>>)>,
    /// The others.
    more: KVec<(Key, Arc<KVVec<u8>>)>,
    bytes: usize,
    max_count: usize,
    max_bytes: usize,
}

impl Chunks {
    /// For reading `len` bytes of a file (one folio, or a readahead window).
    fn new(len: usize) -> Self {
        Chunks {
            last: None,
            more: KVec::new(),
            bytes: 0,
            // Chunks written by the builders are 16 KiB or more: one new chunk per page at
            // most, plus the two at the ends.
            max_count: len / kernel::page::PAGE_SIZE + 2,
            // Two whole chunks at the ends, plus the bytes of the folio many times over.
            max_bytes: 2 * decompress::MAX_CHUNK + len.saturating_mul(16),
        }
    }

    /// Chunk `digest`; `None` for an uncompressed one to be read piece by piece.
    fn get(
        &mut self,
        info: &Info,
        ino: u64,
        digest: &Digest,
        compressed: bool,
    ) -> Result<Option<Arc<KVVec<u8>>>> {
        // Consecutive pieces usually come from the same chunk: look at the last one first.
        // (A blob is compressed or not for all its pieces: one read otherwise does not match.)
        let key = (*digest, compressed);
        if let Some((k, data)) = &self.last {
            if decompress::same(k, &key) {
                return Ok(Some(data.clone()));
            }
        }
        if let Some((_, data)) = self.more.iter().find(|(k, _)| decompress::same(k, &key)) {
            return Ok(Some(data.clone()));
        }
        let held = self.more.len() + usize::from(self.last.is_some());
        if held >= self.max_count {
            if !compressed {
                return Ok(None);
            }
            pr_err_ratelimited!(
                "inode {}: more than {} chunks in one folio\n",
                ino,
                self.max_count
            );
            return Err(EIO);
        }
        let data = match decompress::chunk(info, ino, digest, compressed)? {
            Whole::Bytes(data) => data,
            Whole::Ranged => return Ok(None),
        };
        self.bytes = self.bytes.saturating_add(data.len());
        if self.bytes > self.max_bytes {
            if !compressed {
                return Ok(None);
            }
            pr_err_ratelimited!(
                "inode {}: one folio needs more than {} bytes of decompressed chunks\n",
                ino,
                self.max_bytes
            );
            return Err(EIO);
        }
        if let Some(old) = self.last.take() {
            self.more.push(old, GFP_KERNEL)?;
        }
        self.last = Some((key, data.clone()));
        Ok(Some(data))
    }
}

/// Fills consecutive folios of a regular file, in order, from the pieces of its chunks.
///
/// The range is mapped once (from the inode's chunk index); each piece is used for as many
/// folios as it covers.
struct Filler<'a, F> {
    info: &'a Info,
    ino: u64,
    pieces: Pieces<F>,
    /// The piece being used, and how many of its bytes were.
    cur: Option<(Piece, u64)>,
    pieces_seen: usize,
    /// File offset of the next folio expected.
    pos: u64,
    open: Option<(Digest, Arc<RegularFile>)>,
    chunks: Chunks,
}

impl<'a, F: ChunkList> Filler<'a, F> {
    fn new(
        info: &'a Info,
        ino: u64,
        file: &F,
        starts: &[u64],
        pos: u64,
        len: usize,
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
            open: None,
            chunks: Chunks::new(len),
        })
    }

    fn blob(&mut self, digest: &Digest) -> Result<Arc<RegularFile>> {
        if let Some((d, f)) = &self.open {
            if d == digest {
                return Ok(f.clone());
            }
        }
        let file = self
            .info
            .open_blob(digest)
            .map_err(|e| e.log(self.ino, digest))?;
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

    /// Reads `n` bytes at `off` of uncompressed blob `digest` into `folio` at `at`, page by
    /// page, then drops them from the blob's page cache.
    fn read_ranged(
        &mut self,
        digest: &Digest,
        off: u64,
        n: usize,
        folio: &mut LockedFolio<'_>,
        at: usize,
    ) -> Result {
        let ino = self.ino;
        let blob = self.blob(digest)?;
        let mut pos = off;
        folio
            .for_each_page_mut(at, n, |buf| {
                blob.read_exact_at(buf, pos)?;
                pos = pos.checked_add(buf.len() as u64).ok_or(EIO)?;
                Ok(())
            })
            .map_err(|e| {
                pr_err_ratelimited!(
                    "inode {}: cannot read {} bytes at {} of chunk blob {}: {:?}\n",
                    ino,
                    n,
                    off,
                    HexDigest(digest),
                    e
                );
                EIO
            })?;
        blob.drop_cached(off, off.checked_add(n as u64).ok_or(EIO)?);
        Ok(())
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
            let (digest, compressed) = (&piece.blob.digest, piece.blob.compressed);
            if let Some(data) = self.chunks.get(self.info, ino, digest, compressed)? {
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
                self.read_ranged(digest, off, n, folio, filled)?;
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
    if let Extra::File { starts, place } = &data.extra {
        return info.with_blob(data.layer, |blob| {
            Filler::new(info, ino, &blob.file_at(place), starts, pos, size)?.fill(folio)
        });
    }
    info.with_inode(ino, data.layer, data.pos, |i| {
        match i.kind().inode(ino)? {
            InodeKind::Lnk => {
                let target = i.symlink_target().data(ino)?.ok_or(EIO)?;
                let len = target.len() as usize;
                if pos != 0 || len > size {
                    return Err(EIO);
                }
                // Copied from where the target is stored, piece by piece.
                let (mut done, mut written) = (0usize, Ok(()));
                target
                    .for_each_piece(|piece| {
                        written = folio.write(done, piece);
                        done += piece.len();
                        written.is_ok()
                    })
                    .data(ino)?;
                written?;
                folio.zero(len, size - len)
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
    let Extra::File { starts, place } = &data.extra else {
        // Not a regular file: the folios are left to read_folio.
        return Ok(());
    };
    let pos = u64::try_from(ra.pos())?;
    let len = ra.len();
    // The last window of the file: the next files' chunks may be read with its own.
    let last = pos.saturating_add(len as u64) >= u64::try_from(inode.size()).unwrap_or(0);
    info.with_blob(data.layer, |blob| {
        let file = blob.file_at(place);
        let next = last.then_some((blob, data.pos));
        prefetch(info, next, &file, starts, pos, len);
        let mut filler = Filler::new(info, ino, &file, starts, pos, len)?;
        ra.for_each_folio(|folio| filler.fill(folio))
    })
}

/// Reads the chunks that bytes `pos..pos + len` of `file` need, when there are several, all at
/// once (`decompress::prefetch`), before the window is filled from them. A range that cannot
/// be mapped is left to the fill, which reports it.
///
/// With `next`, the layer and position of the file, for the last window of a file that needs
/// a chunk not read yet: the first chunks of the files after it in the layer are read with
/// its own (see [`ahead`]), so that reading a tree of small files waits for the device once
/// per few chunks rather than once per chunk.
fn prefetch<F: ChunkList>(
    info: &Info,
    next: Option<(&Blob<'_>, u32)>,
    file: &F,
    starts: &[u64],
    pos: u64,
    len: usize,
) {
    let (chunk, chunk_start) = hint(starts, pos);
    let Ok(pieces) = file.map_from(chunk, chunk_start, pos, len as u64) else {
        return;
    };
    let mut keys = Keys::new();
    // However the pieces of a hostile image interleave, a bounded look.
    for piece in pieces.take(PREFETCH_PIECES) {
        let Ok(piece) = piece else { break };
        let key = (piece.blob.digest, piece.blob.compressed);
        if keys.contains(&key) {
            continue;
        }
        if !keys.push(key) {
            break;
        }
    }
    // Looked for only when the window waits for the device anyway: most windows of small
    // files find their chunk cached, read with an earlier file's.
    if let Some((blob, at)) = next {
        if decompress::any_wanted(info, &keys) {
            ahead(blob, at, &mut keys);
        }
    }
    decompress::prefetch(info, &keys);
}

/// Adds to `keys` the first chunks of the regular files among the [`AHEAD_INODES`] inodes
/// after position `at` of `blob`'s layer, up to [`AHEAD_CHUNKS`] new ones (and
/// [`decompress::PREFETCH`] keys in all).
///
/// The builders number a directory's entries consecutively and store the contents of its
/// files in that order, so the files after a file in its layer are usually the ones read
/// next, and their first chunks the next chunks read. A guess only: a chunk read here that no
/// reader needs is a wasted read, nothing more, and anything unreadable ends the look.
fn ahead(blob: &Blob<'_>, at: u32, keys: &mut Keys) {
    let Ok(layer) = blob.layer() else { return };
    let end = at
        .saturating_add(AHEAD_INODES)
        .min(layer.len().saturating_sub(1));
    let mut added = 0;
    for p in at.saturating_add(1)..=end {
        let Ok(inode) = layer.inode_at(p) else { return };
        if !matches!(inode.kind(), Ok(InodeKind::File)) {
            continue;
        }
        let Ok(file) = inode.file() else { return };
        // A file's first two chunks at most: the rest its own windows read.
        for i in 0..file.chunk_count().min(2) {
            let Ok(chunk) = file.chunk(i) else { return };
            let key = (chunk.blob.digest, chunk.blob.compressed);
            if keys.contains(&key) {
                continue;
            }
            if !keys.push(key) {
                return;
            }
            added += 1;
            if added == AHEAD_CHUNKS {
                return;
            }
        }
    }
}
