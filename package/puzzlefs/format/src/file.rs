//! Regular files: the chunk list and byte-range mapping.

use crate::metadata_capnp::{file, file_chunk};
use crate::{BlobRef, Error, Result};

/// Largest file size accepted (`loff_t` max).
pub const MAX_FILE_SIZE: u64 = i64::MAX as u64;

/// One entry of a file's chunk list: `len` bytes starting at
/// `blob.offset` of the decompressed blob `blob.digest`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chunk {
    /// Where the bytes are.
    pub blob: BlobRef,
    /// How many bytes.
    pub len: u64,
}

impl Chunk {
    /// The chunk, if its bytes end where an offset can (`blob.offset + len`
    /// does not overflow).
    pub(crate) fn checked(self) -> Result<Self> {
        self.blob
            .offset
            .checked_add(self.len)
            .ok_or(Error::Overflow)?;
        Ok(self)
    }
}

/// A view of a regular file's contents.
#[derive(Clone, Copy)]
pub struct File<'m> {
    ino: u64,
    chunks: capnp::struct_list::Reader<'m, file_chunk::Owned>,
}

/// A piece of a mapped byte range: `len` bytes at `blob.offset` of the
/// decompressed blob `blob.digest`, which are the file's bytes
/// `[file_offset, file_offset + len)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Piece {
    /// Blob digest, compression flag, and the offset of this piece inside
    /// the decompressed blob.
    pub blob: BlobRef,
    /// Length of the piece (never 0).
    pub len: u64,
    /// Position of the piece in the file.
    pub file_offset: u64,
    /// Index of the chunk the piece comes from (a hint for [`ChunkList::map_from`]).
    pub chunk_index: u32,
    /// File offset where that chunk starts (a hint for [`ChunkList::map_from`]).
    pub chunk_file_offset: u64,
}

impl Piece {
    /// End of the piece inside the decompressed blob.
    pub fn blob_end(&self) -> Result<u64> {
        self.blob
            .offset
            .checked_add(self.len)
            .ok_or(Error::Overflow)
    }

    /// Checks that the piece lies inside a decompressed blob of `blob_len`
    /// bytes ([`Error::Bounds`] otherwise).
    pub fn check_within(&self, blob_len: u64) -> Result<()> {
        if self.blob_end()? > blob_len {
            return Err(Error::Bounds);
        }
        Ok(())
    }
}

impl<'m> File<'m> {
    pub(crate) fn new(ino: u64, r: file::Reader<'m>) -> Result<Self> {
        Ok(File {
            ino,
            chunks: r.get_chunks()?,
        })
    }

    /// Inode number of the file.
    pub fn ino(&self) -> u64 {
        self.ino
    }

    /// Number of chunks.
    pub fn chunk_count(&self) -> u32 {
        self.chunks.len()
    }

    /// Chunk number `i`; `blob.offset + len` is checked not to overflow.
    pub fn chunk(&self, i: u32) -> Result<Chunk> {
        let r = self.chunks.try_get(i).ok_or(Error::Bounds)?;
        Chunk {
            blob: BlobRef::from_reader(r.get_blob()?)?,
            len: r.get_len(),
        }
        .checked()
    }

    /// All chunks in order.
    pub fn chunks(&self) -> impl Iterator<Item = Result<Chunk>> + 'm {
        let this = *self;
        (0..this.chunk_count()).map(move |i| this.chunk(i))
    }

    /// File size: the sum of the chunk lengths, checked against overflow and
    /// [`MAX_FILE_SIZE`] ([`Error::Overflow`]).
    pub fn size(&self) -> Result<u64> {
        let mut total: u64 = 0;
        for r in self.chunks.iter() {
            total = total.checked_add(r.get_len()).ok_or(Error::Overflow)?;
            if total > MAX_FILE_SIZE {
                return Err(Error::Overflow);
            }
        }
        Ok(total)
    }

    /// Calls `f(i, start, len)` for every chunk `i` in order, with the file
    /// offset `start` where it begins and its length, and returns the file
    /// size. Reads every chunk length once, without decoding blob references;
    /// sums are checked as in [`File::size`]. A reader can keep some of the
    /// `(i, start)` pairs as an index for [`ChunkList::map_from`].
    pub fn for_each_chunk(&self, mut f: impl FnMut(u32, u64, u64) -> Result<()>) -> Result<u64> {
        let mut total: u64 = 0;
        for (i, r) in (0u32..).zip(self.chunks.iter()) {
            let len = r.get_len();
            f(i, total, len)?;
            total = total.checked_add(len).ok_or(Error::Overflow)?;
            if total > MAX_FILE_SIZE {
                return Err(Error::Overflow);
            }
        }
        Ok(total)
    }
}

/// A file's chunk list, as both readers of the metadata give it (the
/// capnp-backed [`File`] and [`crate::paged::File`]): what [`ChunkList::map`]
/// needs.
pub trait ChunkList: Copy {
    /// Number of chunks.
    fn chunk_count(&self) -> u32;

    /// Chunk `i` (its blob reference checked as [`File::chunk`] does).
    fn chunk(&self, i: u32) -> Result<Chunk>;

    /// Maps the file bytes `[off, off + len)` to the pieces of chunks that
    /// hold them, in file order. The range is clipped at end of file; an
    /// empty or past-the-end range yields nothing.
    fn map(&self, off: u64, len: u64) -> Result<Pieces<Self>> {
        self.map_from(0, 0, off, len)
    }

    /// Like [`ChunkList::map`] but starts scanning the chunk list at chunk
    /// `chunk_index`, which starts at file offset `chunk_file_offset` (both
    /// from a [`Piece`] of an earlier mapping of this file, or from an index
    /// of chunk offsets built with [`File::for_each_chunk`]), so
    /// that reading a file does not rescan the list from chunk 0 for every
    /// range: the cost is the number of chunks between the hint and `off`
    /// plus the pieces mapped. A hint past `off` is ignored (the scan starts
    /// at chunk 0). A wrong hint yields wrong pieces, never a panic.
    fn map_from(
        &self,
        chunk_index: u32,
        chunk_file_offset: u64,
        off: u64,
        len: u64,
    ) -> Result<Pieces<Self>> {
        let end = off.checked_add(len).ok_or(Error::Overflow)?;
        let (idx, start) = if chunk_file_offset <= off && chunk_index <= self.chunk_count() {
            (chunk_index, chunk_file_offset)
        } else {
            (0, 0)
        };
        Ok(Pieces {
            file: *self,
            idx,
            chunk_start: start,
            pos: off,
            end,
            done: false,
        })
    }
}

impl ChunkList for File<'_> {
    fn chunk_count(&self) -> u32 {
        File::chunk_count(self)
    }

    fn chunk(&self, i: u32) -> Result<Chunk> {
        File::chunk(self, i)
    }
}

/// Iterator over the pieces of a mapped byte range.
pub struct Pieces<F> {
    file: F,
    idx: u32,
    chunk_start: u64,
    pos: u64,
    end: u64,
    done: bool,
}

impl<F: ChunkList> Pieces<F> {
    fn step(&mut self) -> Result<Option<Piece>> {
        loop {
            if self.pos >= self.end || self.idx >= self.file.chunk_count() {
                return Ok(None);
            }
            let chunk = self.file.chunk(self.idx)?;
            let chunk_end = self
                .chunk_start
                .checked_add(chunk.len)
                .filter(|&e| e <= MAX_FILE_SIZE)
                .ok_or(Error::Overflow)?;
            if chunk_end <= self.pos {
                self.idx = self.idx.checked_add(1).ok_or(Error::Overflow)?;
                self.chunk_start = chunk_end;
                continue;
            }
            let within = self
                .pos
                .checked_sub(self.chunk_start)
                .ok_or(Error::Bounds)?;
            let piece_end = chunk_end.min(self.end);
            let piece_len = piece_end.checked_sub(self.pos).ok_or(Error::Bounds)?;
            let piece = Piece {
                blob: BlobRef {
                    offset: chunk
                        .blob
                        .offset
                        .checked_add(within)
                        .ok_or(Error::Overflow)?,
                    ..chunk.blob
                },
                len: piece_len,
                file_offset: self.pos,
                chunk_index: self.idx,
                chunk_file_offset: self.chunk_start,
            };
            self.pos = piece_end;
            if piece_end == chunk_end {
                self.idx = self.idx.checked_add(1).ok_or(Error::Overflow)?;
                self.chunk_start = chunk_end;
            }
            return Ok(Some(piece));
        }
    }
}

impl<F: ChunkList> Iterator for Pieces<F> {
    type Item = Result<Piece>;
    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.step() {
            Ok(Some(p)) => Some(Ok(p)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}
