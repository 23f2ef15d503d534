//! The data path of a build: the contents of all regular files, one after
//! the other in the order the scan sends them (see [`Chunking`]), form one
//! stream cut by FastCDC (2020); worker
//! threads compress, hash and store the chunks while the stream is read on.
//!
//! A reader thread reads the files straight into blocks of [`BLOCK_SIZE`]
//! bytes and cuts chunks in place. A chunk goes to a worker as a reference
//! into its block, not as a copy; a block returns to a small pool when its
//! last chunk is stored, and the reader waits for one when the pool is empty.
//! Only the uncut tail of a full block (less than one maximum chunk) is
//! copied, to the head of the next block. Memory is bounded by the pool,
//! whatever the size of the tree.
//!
//! A file of at most [`SAME_MAX`] bytes is read whole into its block and
//! hashed (BLAKE3); when an earlier file had the same contents, its bytes
//! leave the stream again and the file shares that file's chunk pieces
//! (FileChunk ranges may point anywhere in a blob). Larger files go through
//! the chunker as they are read: their chunks deduplicate by content.
//!
//! Each worker keeps its zstd context and output buffer for the whole build.
//! Every stored byte is hashed twice, and that is the format: once for the
//! blob's name (sha256) and once for its fs-verity measurement (a sha256
//! Merkle tree).

use std::collections::hash_map::{Entry, HashMap};
use std::collections::VecDeque;
use std::fs;
use std::io::{self, Read};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use sha2::{Digest as _, Sha256};
use zstd::stream::raw::{Encoder, InBuffer, Operation, OutBuffer};

use puzzlefs_format::Digest;

use crate::error::{io_at, Error, Result};
use crate::oci::OciDir;
use crate::progress::Progress;
use crate::verity;

/// FastCDC minimum chunk size.
pub const MIN_CHUNK: u32 = 16 * 1024;
/// FastCDC average chunk size.
pub const AVG_CHUNK: u32 = 64 * 1024;
/// FastCDC maximum chunk size.
pub const MAX_CHUNK: u32 = 256 * 1024;

/// Size of a read block (16 maximum chunks).
const BLOCK_SIZE: usize = 4 << 20;

/// Blocks in the pool, whatever the number of workers: two being filled and
/// handed over, the rest (each holding 16 or more chunks) in the workers'
/// hands, which keeps any number of workers busy.
const POOL_BLOCKS: usize = 8;

/// Files up to this size are stored once per distinct contents. A block
/// always has room for one such file after its tail is carried over.
const SAME_MAX: u64 = 1 << 20;
const _: () = assert!((SAME_MAX as usize) < BLOCK_SIZE - MAX_CHUNK as usize);

/// With [`Chunking::Files`], files smaller than this are packed together.
pub const SMALL_MAX: u64 = 64 * 1024;
/// A pack may end after a file once it holds this much.
pub const PACK_MIN: u64 = 32 * 1024;
/// A pack never holds more than this (one maximum chunk).
pub const PACK_MAX: u64 = MAX_CHUNK as u64;
/// A pack ends after a file whose path key has these bits clear (one file
/// in 4), once it holds [`PACK_MIN`] bytes.
pub const PACK_MASK: u64 = 3;
const _: () = assert!(SMALL_MAX <= PACK_MAX && PACK_MIN < PACK_MAX);

/// How file contents are cut into chunks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Chunking {
    /// Each file of at least [`SMALL_MAX`] bytes is cut by FastCDC on its
    /// own, its last chunk ending with it (a file or a rest of at most
    /// [`MAX_CHUNK`] bytes is one chunk), so that an unchanged file keeps
    /// its chunks whatever changed around it. Smaller files are packed, in
    /// the order a depth-first reader of the tree opens them, into chunks of
    /// at most [`PACK_MAX`] bytes, ending after a
    /// file chosen by its path (not its contents), so that a changed,
    /// added or removed file changes its own pack and no other. zstd frames
    /// record their content size.
    #[default]
    Files,
    /// The contents of all files, in inode order, as one FastCDC stream,
    /// zstd frames without content size: the other implementation's images,
    /// byte for byte.
    Stream,
}

/// Where a piece of a file is: `len` bytes at `offset` of chunk `seq`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Piece {
    /// Chunk number (index into [`Stored::chunks`]).
    pub seq: usize,
    /// Offset in the chunk.
    pub offset: u64,
    /// Length.
    pub len: u64,
}

/// Where a file's contents went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileMap {
    /// The same bytes as file `j` (earlier): it shares that file's pieces.
    Same(usize),
    /// Its pieces, in order.
    Pieces(Vec<Piece>),
}

/// One stored chunk.
pub struct ChunkInfo {
    /// Name of the blob (sha256 of the stored bytes).
    pub digest: Digest,
    /// Stored as a zstd frame.
    pub compressed: bool,
    /// Length of the chunk (uncompressed).
    pub len: u64,
    /// Length of the blob.
    pub stored_len: u64,
    /// The blob was not in the OCI directory yet.
    pub new: bool,
    /// fs-verity measurement of the blob.
    pub verity: [u8; 32],
}

/// A regular file as the scan saw it; the reader opens it again and
/// checks that it is still that file.
#[derive(Debug, Clone)]
pub struct SrcFile {
    /// Path.
    pub path: PathBuf,
    /// Size in bytes.
    pub size: u64,
    /// Device.
    pub dev: u64,
    /// Inode number.
    pub ino: u64,
    /// Hash of the path in the tree (where packs of small files end).
    pub key: u64,
}

impl SrcFile {
    /// The file at `path` with metadata `meta` (from the scan), `rel` its
    /// path from the root of the tree.
    pub fn new(path: PathBuf, meta: &fs::Metadata, rel: &[u8]) -> Self {
        use std::os::unix::fs::MetadataExt;
        SrcFile {
            path,
            size: meta.len(),
            dev: meta.dev(),
            ino: meta.ino(),
            key: path_key(rel),
        }
    }

    /// Opens the file without following a symlink and without blocking on
    /// a fifo, and checks that it is the regular file the scan saw: a file
    /// swapped for another, a fifo or a symlink during the build is an error
    /// naming it, not a hang or a read of something else.
    fn open(&self) -> Result<fs::File> {
        use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
        let f = fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
            .open(&self.path)
            .map_err(io_at(&self.path))?;
        let m = f.metadata().map_err(io_at(&self.path))?;
        if !m.is_file() || m.dev() != self.dev || m.ino() != self.ino {
            return Err(Error::Replaced {
                path: self.path.clone(),
            });
        }
        if m.len() != self.size {
            return Err(Error::SizeChanged {
                path: self.path.clone(),
                size: self.size,
            });
        }
        Ok(f)
    }
}

/// The key of a file's path in the tree (`a/b/c`), for [`SrcFile::key`].
pub fn path_key(rel: &[u8]) -> u64 {
    let h = blake3::hash(rel);
    let mut key = [0u8; 8];
    key.copy_from_slice(&h.as_bytes()[..8]);
    u64::from_le_bytes(key)
}

/// What [`chunk_and_store`] made of the files.
pub struct Stored {
    /// The chunks, by number.
    pub chunks: Vec<ChunkInfo>,
    /// For each file, in the order received, where its bytes are.
    pub files: Vec<FileMap>,
}

/// Cuts the contents of `files` (as scanned), in order, into chunks as
/// `chunking` says and stores them in `oci`, zstd-compressed at level
/// `compression` when given.
pub fn chunk_and_store(
    oci: &OciDir,
    files: mpsc::Receiver<SrcFile>,
    chunking: Chunking,
    compression: Option<i32>,
    threads: usize,
    progress: &Progress,
) -> Result<Stored> {
    let threads = threads.max(1);
    let abort = AtomicBool::new(false);
    let (job_tx, job_rx) = mpsc::channel::<Job>();
    let job_rx = Mutex::new(job_rx);
    let (res_tx, res_rx) = mpsc::channel::<Result<(usize, ChunkInfo)>>();
    let mut out: Vec<Option<ChunkInfo>> = Vec::new();
    let mut first_err: Option<Error> = None;
    let mut maps = Vec::new();
    std::thread::scope(|s| {
        let reader = {
            let res_tx = res_tx.clone();
            let abort = &abort;
            s.spawn(move || {
                let pool = Pool::new(POOL_BLOCKS);
                let r = Reader::new(pool, job_tx, chunking, abort, progress);
                match r.read_all(&files) {
                    Ok(maps) => maps,
                    Err(e) => {
                        let _ = res_tx.send(Err(e));
                        Vec::new()
                    }
                }
            })
        };
        for _ in 0..threads {
            let res_tx = res_tx.clone();
            let job_rx = &job_rx;
            let abort = &abort;
            s.spawn(move || {
                let mut worker = match Worker::new(oci, compression, chunking == Chunking::Files) {
                    Ok(w) => w,
                    Err(e) => {
                        let _ = res_tx.send(Err(e));
                        return;
                    }
                };
                loop {
                    let job = job_rx.lock().expect("job queue lock").recv();
                    let Ok(job) = job else { break };
                    if abort.load(Ordering::Relaxed) {
                        continue;
                    }
                    let r = worker.store(job.data()).map(|c| (job.seq, c));
                    drop(job);
                    if res_tx.send(r).is_err() {
                        break;
                    }
                }
            });
        }
        drop(res_tx);
        for r in res_rx {
            match r {
                Ok((seq, c)) => {
                    if out.len() <= seq {
                        out.resize_with(seq + 1, || None);
                    }
                    out[seq] = Some(c);
                }
                Err(e) => {
                    abort.store(true, Ordering::Relaxed);
                    first_err.get_or_insert(e);
                }
            }
        }
        match reader.join() {
            Ok(m) => maps = m,
            Err(_) => {
                first_err.get_or_insert(Error::Internal("the reader thread panicked"));
            }
        }
    });
    if let Some(e) = first_err {
        return Err(e);
    }
    let chunks = out
        .into_iter()
        .map(|c| c.ok_or(Error::Internal("missing chunk result")))
        .collect::<Result<_>>()?;
    Ok(Stored {
        chunks,
        files: maps,
    })
}

/// A buffer of the pool; goes back to the pool when dropped.
struct Block {
    data: Box<[u8]>,
    home: mpsc::SyncSender<Box<[u8]>>,
}

impl Drop for Block {
    fn drop(&mut self) {
        // The pool is gone once the reader is done: then just free it.
        let _ = self.home.try_send(std::mem::take(&mut self.data));
    }
}

/// At most `max` blocks, allocated on first need.
struct Pool {
    tx: mpsc::SyncSender<Box<[u8]>>,
    rx: mpsc::Receiver<Box<[u8]>>,
    made: usize,
    max: usize,
}

impl Pool {
    fn new(max: usize) -> Self {
        let (tx, rx) = mpsc::sync_channel(max);
        Pool {
            tx,
            rx,
            made: 0,
            max,
        }
    }

    /// A free block, waiting for one if all are in use.
    fn get(&mut self) -> Box<[u8]> {
        if let Ok(b) = self.rx.try_recv() {
            return b;
        }
        if self.made < self.max {
            self.made += 1;
            return vec![0u8; BLOCK_SIZE].into_boxed_slice();
        }
        // We hold a sender, so this only waits.
        self.rx.recv().expect("block pool sender alive")
    }
}

/// Chunk `seq` of the stream: `start..end` of `block`.
struct Job {
    seq: usize,
    block: Arc<Block>,
    start: usize,
    end: usize,
}

impl Job {
    fn data(&self) -> &[u8] {
        &self.block.data[self.start..self.end]
    }
}

/// Length of the FastCDC (2020, normalization level 1) chunk at the start
/// of `data`: the cut point `StreamCDC` finds when `data` holds the next
/// `MAX_CHUNK` bytes of the stream, or what is left at its end.
fn cdc_cut(data: &[u8]) -> usize {
    fastcdc::v2020::FastCDC::new(data, MIN_CHUNK, AVG_CHUNK, MAX_CHUNK)
        .cut(0, data.len())
        .1
}

/// What a lane cuts its bytes with.
#[derive(Clone, Copy, PartialEq, Eq)]
enum LaneKind {
    /// FastCDC over the bytes.
    Cdc,
    /// Whole packs of small files, cut where the packing rule says.
    Pack,
}

/// A stream of bytes being read into a pool block and cut into chunks.
/// Cuts are recorded as they are decided and sent to the workers with
/// the block when it is handed over (the block is written to until then).
struct Lane {
    buf: Box<[u8]>,
    /// Bytes of `buf` in the stream.
    len: usize,
    /// End of the last cut in `buf`.
    cut: usize,
    /// Cuts of this block not sent yet: (seq, start, end).
    cuts: Vec<(usize, usize, usize)>,
    /// Position in the lane's stream of `buf[0]`.
    base: u64,
    /// Files whose bytes are not all in a cut yet: (file, start, end) in
    /// stream positions, in order.
    open: VecDeque<(usize, u64, u64)>,
}

impl Lane {
    fn new(buf: Box<[u8]>) -> Self {
        Lane {
            buf,
            len: 0,
            cut: 0,
            cuts: Vec::new(),
            base: 0,
            open: VecDeque::new(),
        }
    }

    /// Bytes after the last cut.
    fn uncut(&self) -> usize {
        self.len - self.cut
    }
}

/// Reads the files into pool blocks and sends their chunks to the workers.
struct Reader<'a> {
    pool: Pool,
    jobs: mpsc::Sender<Job>,
    abort: &'a AtomicBool,
    progress: &'a Progress,
    chunking: Chunking,
    /// Large files (and, with [`Chunking::Stream`], every file).
    big: Lane,
    /// Small files, packed ([`Chunking::Files`]).
    pack: Lane,
    /// Number of the next chunk.
    seq: usize,
    /// Where each file's bytes went.
    maps: Vec<FileMap>,
    /// The workers are gone (they reported an error).
    stopped: bool,
}

impl<'a> Reader<'a> {
    fn new(
        mut pool: Pool,
        jobs: mpsc::Sender<Job>,
        chunking: Chunking,
        abort: &'a AtomicBool,
        progress: &'a Progress,
    ) -> Self {
        let big = Lane::new(pool.get());
        // The pack lane is not used by the stream policy.
        let pack = Lane::new(match chunking {
            Chunking::Files => pool.get(),
            Chunking::Stream => Box::default(),
        });
        Reader {
            pool,
            jobs,
            abort,
            progress,
            chunking,
            big,
            pack,
            seq: 0,
            maps: Vec::new(),
            stopped: false,
        }
    }

    fn lane(&mut self, which: LaneKind) -> &mut Lane {
        match which {
            LaneKind::Cdc => &mut self.big,
            LaneKind::Pack => &mut self.pack,
        }
    }

    /// Streams every file, in order; returns where each file's bytes are.
    fn read_all(mut self, files: &mpsc::Receiver<SrcFile>) -> Result<Vec<FileMap>> {
        let mut seen: HashMap<[u8; 32], usize> = HashMap::new();
        for (idx, src) in files.iter().enumerate() {
            if self.stopped {
                break;
            }
            if self.abort.load(Ordering::Relaxed) {
                return Err(Error::Aborted);
            }
            let file = src.open()?;
            self.progress.files(idx as u64 + 1);
            self.maps.push(FileMap::Pieces(Vec::new()));
            let which = match self.chunking {
                Chunking::Files if src.size < SMALL_MAX => LaneKind::Pack,
                _ => LaneKind::Cdc,
            };
            if which == LaneKind::Pack && self.pack.uncut() as u64 + src.size > PACK_MAX {
                self.close(LaneKind::Pack);
            }
            if src.size > SAME_MAX {
                self.stream_file(which, idx, file, &src)?;
            } else {
                // The whole file (and the byte that shows it grew) in this
                // block, to hash it before any of it is cut.
                if self.lane(which).buf.len() - self.lane(which).len < src.size as usize + 1 {
                    self.hand_over(which, false);
                }
                let start = self.lane(which).len;
                self.stream_file(which, idx, file, &src)?;
                let lane = self.lane(which);
                let hash = *blake3::hash(&lane.buf[start..lane.len]).as_bytes();
                match seen.entry(hash) {
                    Entry::Occupied(e) => {
                        // Its bytes leave the stream again.
                        lane.len = start;
                        lane.open.pop_back();
                        self.maps[idx] = FileMap::Same(*e.get());
                        continue;
                    }
                    Entry::Vacant(e) => {
                        e.insert(idx);
                    }
                }
            }
            match which {
                // A large file's chunks end with it: they do not depend
                // on the files around it.
                LaneKind::Cdc if self.chunking == Chunking::Files => self.cut_all(),
                LaneKind::Cdc => {}
                LaneKind::Pack => {
                    if self.pack.uncut() as u64 >= PACK_MIN && src.key & PACK_MASK == 0 {
                        self.close(LaneKind::Pack);
                    }
                }
            }
        }
        if self.chunking == Chunking::Files {
            self.close(LaneKind::Pack);
            self.hand_over(LaneKind::Pack, true);
        }
        self.hand_over(LaneKind::Cdc, true);
        Ok(self.maps)
    }

    /// Appends file `idx`, which must hold `src.size` bytes, to a lane.
    ///
    /// Each read asks for one byte more than the file should still hold, so
    /// that a file that grew is seen, and a shorter answer ends the file
    /// without another read (regular files return less than asked only at
    /// their end); a file that shrank is seen when a read returns nothing.
    fn stream_file(
        &mut self,
        which: LaneKind,
        idx: usize,
        mut file: fs::File,
        src: &SrcFile,
    ) -> Result<()> {
        let (path, size) = (&src.path, src.size);
        {
            let lane = self.lane(which);
            let start = lane.base + lane.len as u64;
            lane.open.push_back((idx, start, start + size));
        }
        let mut read = 0u64;
        loop {
            if self.lane(which).len == self.lane(which).buf.len() {
                self.hand_over(which, false);
            }
            let lane = self.lane(which);
            let room = lane.buf.len() - lane.len;
            let want = room.min(usize::try_from(size - read + 1).unwrap_or(usize::MAX));
            let n = match file.read(&mut lane.buf[lane.len..lane.len + want]) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(io_at(path)(e)),
            };
            read += n as u64;
            if read > size || (n == 0 && read != size) {
                return Err(Error::SizeChanged {
                    path: path.clone(),
                    size,
                });
            }
            lane.len += n;
            self.progress.add_bytes(n as u64);
            if n == 0 || (read == size && n < want) {
                return Ok(());
            }
        }
    }

    /// Records the chunk `cut..end` of a lane's block and which pieces of
    /// which files it holds.
    fn record(&mut self, which: LaneKind, end: usize) {
        let seq = self.seq;
        self.seq += 1;
        let Reader {
            big, pack, maps, ..
        } = self;
        let lane = match which {
            LaneKind::Cdc => big,
            LaneKind::Pack => pack,
        };
        let (a, b) = (lane.base + lane.cut as u64, lane.base + end as u64);
        while let Some(&(f, s, e)) = lane.open.front() {
            let (from, to) = (s.max(a), e.min(b));
            if from >= to {
                break;
            }
            if let Some(FileMap::Pieces(p)) = maps.get_mut(f) {
                p.push(Piece {
                    seq,
                    offset: from - a,
                    len: to - from,
                });
            }
            if e <= b {
                lane.open.pop_front();
            } else {
                break;
            }
        }
        lane.cuts.push((seq, lane.cut, end));
        lane.cut = end;
    }

    /// Cuts the rest of the big lane with FastCDC, the last chunk ending at
    /// the end of what was read; what fits in one maximum chunk stays one
    /// chunk (better compressed, fewer blobs; the chunks before it, cut by
    /// content, do not depend on it).
    fn cut_all(&mut self) {
        if self.big.len - self.big.cut <= MAX_CHUNK as usize {
            let end = self.big.len;
            self.record(LaneKind::Cdc, end);
            return;
        }
        while self.big.cut < self.big.len {
            let n = cdc_cut(&self.big.buf[self.big.cut..self.big.len]);
            let end = self.big.cut + n;
            self.record(LaneKind::Cdc, end);
        }
    }

    /// Ends the open chunk of a lane (a pack) where it is.
    fn close(&mut self, which: LaneKind) {
        let lane = self.lane(which);
        if lane.len > lane.cut {
            let end = lane.len;
            self.record(which, end);
        }
    }

    /// Sends the cuts of a lane's block to the workers. The big lane first
    /// cuts every chunk followed by at least a maximum chunk's worth of
    /// bytes (so its cut point is final), or all of them at the end of the
    /// stream. What is not cut moves to the head of a fresh block.
    fn hand_over(&mut self, which: LaneKind, end: bool) {
        if which == LaneKind::Cdc {
            let max = MAX_CHUNK as usize;
            while self.big.len - self.big.cut >= max || (end && self.big.cut < self.big.len) {
                let n = cdc_cut(&self.big.buf[self.big.cut..self.big.len]);
                let to = self.big.cut + n;
                self.record(LaneKind::Cdc, to);
            }
        }
        let next = if end { Box::default() } else { self.pool.get() };
        let home = self.pool.tx.clone();
        let lane = self.lane(which);
        let data = std::mem::replace(&mut lane.buf, next);
        let cuts = std::mem::take(&mut lane.cuts);
        let (cut, len) = (lane.cut, lane.len);
        let block = Arc::new(Block { data, home });
        let mut stopped = false;
        for (seq, start, end) in cuts {
            let job = Job {
                seq,
                block: Arc::clone(&block),
                start,
                end,
            };
            if !stopped && self.jobs.send(job).is_err() {
                // The workers are gone: an error was reported.
                stopped = true;
            }
        }
        self.stopped |= stopped;
        let lane = self.lane(which);
        let tail = len - cut;
        if !end {
            lane.buf[..tail].copy_from_slice(&block.data[cut..len]);
        }
        lane.base += cut as u64;
        lane.len = tail;
        lane.cut = 0;
    }
}

/// What one worker thread keeps from chunk to chunk.
struct Worker<'a> {
    oci: &'a OciDir,
    encoder: Option<Encoder<'static>>,
    /// Record the content size in each frame.
    sized: bool,
    zbuf: Vec<u8>,
}

impl<'a> Worker<'a> {
    fn new(oci: &'a OciDir, compression: Option<i32>, sized: bool) -> Result<Self> {
        let encoder = compression
            .map(Encoder::new)
            .transpose()
            .map_err(Error::Compress)?;
        let zbuf = if encoder.is_some() {
            Vec::with_capacity(zstd::zstd_safe::compress_bound(MAX_CHUNK as usize))
        } else {
            Vec::new()
        };
        Ok(Worker {
            oci,
            encoder,
            sized,
            zbuf,
        })
    }

    /// Compresses (if asked and smaller), hashes and stores one chunk.
    fn store(&mut self, data: &[u8]) -> Result<ChunkInfo> {
        let compressed = match &mut self.encoder {
            Some(enc) => {
                compress(enc, data, self.sized, &mut self.zbuf).map_err(Error::Compress)?;
                self.zbuf.len() < data.len()
            }
            None => false,
        };
        let stored: &[u8] = if compressed { &self.zbuf } else { data };
        let digest: Digest = Sha256::digest(stored).into();
        let new = self.oci.put_blob_with_digest(&digest, stored)?;
        Ok(ChunkInfo {
            digest,
            compressed,
            len: data.len() as u64,
            stored_len: stored.len() as u64,
            new,
            verity: verity::measure(stored),
        })
    }
}

/// One zstd frame of `data` into `out`, with the context reused. `sized`:
/// the frame header records the content size (a reader can then decompress
/// straight into a buffer of that size). Otherwise the same bytes as
/// `zstd::stream::encode_all(data, level)` (a stream of unknown size),
/// which is what the other implementation writes.
fn compress(
    enc: &mut Encoder<'static>,
    data: &[u8],
    sized: bool,
    out: &mut Vec<u8>,
) -> io::Result<()> {
    enc.reinit()?;
    if sized {
        enc.set_pledged_src_size(Some(data.len() as u64))?;
    }
    out.clear();
    out.reserve(zstd::zstd_safe::compress_bound(data.len()));
    let mut input = InBuffer::around(data);
    let mut output = OutBuffer::around(out);
    while input.pos() < data.len() {
        enc.run(&mut input, &mut output)?;
    }
    // The output has room for the whole frame, so one call ends it.
    if enc.finish(&mut output, true)? != 0 {
        return Err(io::Error::other("frame larger than its bound"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{RngCore, SeedableRng};
    use std::path::Path;

    /// Runs the stream policy over `list`: the chunks (by number) and the
    /// repeats it found.
    fn read(list: &[(PathBuf, u64)]) -> Result<(Vec<Job>, Vec<Option<usize>>)> {
        let scanned = list
            .iter()
            .map(|(p, size)| {
                use std::os::unix::fs::MetadataExt;
                let (dev, ino) = fs::symlink_metadata(p).map_or((0, 0), |m| (m.dev(), m.ino()));
                SrcFile {
                    path: p.clone(),
                    size: *size,
                    dev,
                    ino,
                    key: 0,
                }
            })
            .collect::<Vec<_>>();
        read_scanned(&scanned)
    }

    fn read_scanned(list: &[SrcFile]) -> Result<(Vec<Job>, Vec<Option<usize>>)> {
        let (jobs, maps) = read_with(Chunking::Stream, list)?;
        let same = maps
            .iter()
            .map(|m| match m {
                FileMap::Same(j) => Some(*j),
                FileMap::Pieces(_) => None,
            })
            .collect();
        Ok((jobs, same))
    }

    /// Runs the reader: the chunks, by number, and where each file went.
    fn read_with(chunking: Chunking, list: &[SrcFile]) -> Result<(Vec<Job>, Vec<FileMap>)> {
        let (tx, files) = mpsc::channel();
        for f in list {
            tx.send(f.clone()).unwrap();
        }
        drop(tx);
        let (abort, progress) = (AtomicBool::new(false), Progress::hidden());
        let (jobs_tx, jobs_rx) = mpsc::channel();
        let r = Reader::new(Pool::new(64), jobs_tx, chunking, &abort, &progress);
        let maps = r.read_all(&files)?;
        let mut jobs: Vec<Job> = jobs_rx.into_iter().collect();
        jobs.sort_by_key(|j| j.seq);
        Ok((jobs, maps))
    }

    /// Each file's bytes as its pieces give them.
    fn rebuilt(jobs: &[Job], maps: &[FileMap]) -> Vec<Vec<u8>> {
        let mut out: Vec<Vec<u8>> = Vec::new();
        for m in maps {
            let bytes = match m {
                FileMap::Same(j) => out[*j].clone(),
                FileMap::Pieces(p) => {
                    let mut v = Vec::new();
                    for piece in p {
                        let d = jobs[piece.seq].data();
                        let o = piece.offset as usize;
                        v.extend_from_slice(&d[o..o + piece.len as usize]);
                    }
                    v
                }
            };
            out.push(bytes);
        }
        out
    }

    /// Writes `files` (name, contents) under `dir` as scanned files.
    fn tree(dir: &Path, files: &[(String, Vec<u8>)]) -> Vec<SrcFile> {
        files
            .iter()
            .map(|(name, data)| {
                let p = dir.join(name);
                fs::write(&p, data).unwrap();
                SrcFile::new(p.clone(), &fs::metadata(&p).unwrap(), name.as_bytes())
            })
            .collect()
    }

    fn random(rng: &mut rand::rngs::SmallRng, len: usize) -> Vec<u8> {
        let mut v = vec![0u8; len];
        // Half random, half text-like: compressible, as real files are.
        rng.fill_bytes(&mut v[..len / 2]);
        for (i, b) in v[len / 2..].iter_mut().enumerate() {
            *b = b"puzzlefs packs small files "[i % 27];
        }
        v
    }

    /// A version of a tree: 400 small files and 6 large ones, interleaved.
    fn version(seed: u64) -> Vec<(String, Vec<u8>)> {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
        let mut files = Vec::new();
        for i in 0..406 {
            let len = if i % 70 == 5 {
                (rng.next_u32() as usize % (3 << 20)) + SMALL_MAX as usize
            } else {
                (rng.next_u32() as usize % 20_000) + 1
            };
            files.push((format!("f{i:04}"), random(&mut rng, len)));
        }
        files
    }

    /// Digests of the chunks each file's pieces are in.
    fn chunk_sets(jobs: &[Job], maps: &[FileMap]) -> Vec<Vec<[u8; 32]>> {
        let mut out: Vec<Vec<[u8; 32]>> = Vec::new();
        for m in maps {
            let set = match m {
                FileMap::Same(j) => out[*j].clone(),
                FileMap::Pieces(p) => p
                    .iter()
                    .map(|piece| *blake3::hash(jobs[piece.seq].data()).as_bytes())
                    .collect(),
            };
            out.push(set);
        }
        out
    }

    #[test]
    fn both_policies_give_back_every_file() {
        let t = tempfile::tempdir().unwrap();
        let mut files = version(1);
        // Repeats, small and large, and a file of exactly the threshold.
        files.push(("copy-small".into(), files[0].1.clone()));
        files.push(("copy-big".into(), files[5].1.clone()));
        files.push(("threshold".into(), vec![7u8; SMALL_MAX as usize]));
        let list = tree(t.path(), &files);
        for chunking in [Chunking::Files, Chunking::Stream] {
            let (jobs, maps) = read_with(chunking, &list).unwrap();
            let back = rebuilt(&jobs, &maps);
            for ((name, data), got) in files.iter().zip(&back) {
                assert!(data == got, "{chunking:?}: {name} differs");
            }
            assert!(jobs.iter().all(|j| j.end - j.start <= MAX_CHUNK as usize));
            assert_eq!(maps[406], FileMap::Same(0), "{chunking:?}");
        }
    }

    /// With the file policy, a file of at least SMALL_MAX bytes keeps its
    /// chunks whatever changed around it, and a change among small files
    /// changes few packs; the stream policy does not have that property.
    #[test]
    fn unchanged_files_keep_their_chunks() {
        let t = tempfile::tempdir().unwrap();
        let old = version(2);
        let mut new = old.clone();
        // One small file changed, one inserted, one removed; one large
        // file changed in one byte.
        new[100].1[10] ^= 1;
        new.insert(200, ("f0199-new".into(), b"a new small file".repeat(50)));
        new.remove(301);
        let big = new
            .iter()
            .position(|(_, d)| d.len() >= SMALL_MAX as usize)
            .unwrap();
        new[big].1[1000] ^= 1;
        let (d1, d2) = (t.path().join("1"), t.path().join("2"));
        fs::create_dir_all(&d1).unwrap();
        fs::create_dir_all(&d2).unwrap();
        let (l1, l2) = (tree(&d1, &old), tree(&d2, &new));
        let mut changed_small = HashMap::new();
        for chunking in [Chunking::Files, Chunking::Stream] {
            let (j1, m1) = read_with(chunking, &l1).unwrap();
            let (j2, m2) = read_with(chunking, &l2).unwrap();
            let (s1, s2) = (chunk_sets(&j1, &m1), chunk_sets(&j2, &m2));
            let by_name: HashMap<&str, &Vec<[u8; 32]>> =
                old.iter().map(|(n, _)| n.as_str()).zip(&s1).collect();
            let mut big_moved = 0;
            let mut small_moved = 0;
            for ((name, data), set) in new.iter().zip(&s2) {
                let Some(before) = by_name.get(name.as_str()) else {
                    continue;
                };
                if old.iter().any(|(n, d)| n == name && d != data) {
                    continue;
                }
                if *before != set {
                    if data.len() >= SMALL_MAX as usize {
                        big_moved += 1;
                    } else {
                        small_moved += 1;
                    }
                }
            }
            changed_small.insert(format!("{chunking:?}"), small_moved);
            if chunking == Chunking::Files {
                assert_eq!(big_moved, 0, "an unchanged large file lost its chunks");
                // Three changes, each dirtying its pack (and perhaps the
                // next one): of ~400 small files, few move.
                assert!(
                    small_moved < 60,
                    "{small_moved} unchanged small files moved"
                );
            } else {
                assert!(
                    big_moved > 0,
                    "the stream policy is expected to move chunks"
                );
            }
        }
        assert!(
            changed_small["Files"] < changed_small["Stream"],
            "{changed_small:?}"
        );
    }

    fn joined(jobs: &[Job]) -> Vec<u8> {
        // The stream policy numbers its chunks in stream order.
        let mut out = Vec::new();
        for (i, j) in jobs.iter().enumerate() {
            assert_eq!(j.seq, i);
            out.extend_from_slice(j.data());
        }
        out
    }

    #[test]
    fn files_are_read_in_order_and_keep_their_size() {
        let t = tempfile::tempdir().unwrap();
        let a = t.path().join("a");
        let b = t.path().join("b");
        fs::write(&a, b"hello ").unwrap();
        fs::write(&b, b"world").unwrap();
        let (jobs, same) = read(&[(a.clone(), 6), (b.clone(), 5)]).unwrap();
        assert_eq!(joined(&jobs), b"hello world");
        assert_eq!(same, [None, None]);
        // The file is longer or shorter than when it was scanned.
        for size in [4, 9] {
            let Err(e) = read(&[(a.clone(), 6), (b.clone(), size)]) else {
                panic!("size {size} accepted");
            };
            assert!(
                matches!(&e, Error::SizeChanged { path, size: s } if *path == b && *s == size),
                "{e:?}"
            );
            assert!(e.to_string().contains("changed size"), "{e}");
            assert!(e.to_string().contains(&*b.to_string_lossy()), "{e}");
        }
        let Err(e) = read(&[(t.path().join("gone"), 1)]) else {
            panic!("a missing file accepted");
        };
        assert!(e.to_string().contains("gone"), "{e}");
    }

    /// A file swapped for a fifo, a symlink or another file after the scan
    /// is an error naming it (and the fifo does not block the build).
    #[test]
    fn a_file_swapped_after_the_scan_is_an_error() {
        let t = tempfile::tempdir().unwrap();
        let a = t.path().join("a");
        let other = t.path().join("other");
        fs::write(&other, b"secret").unwrap();
        type Swap = fn(&Path, &Path);
        let swaps: [(&str, Swap); 3] = [
            ("fifo", |a, _| {
                crate::sys::mknod(a, libc::S_IFIFO | 0o644, 0).unwrap()
            }),
            ("symlink", |a, other| {
                std::os::unix::fs::symlink(other, a).unwrap()
            }),
            ("file", |a, _| fs::write(a, b"hello!").unwrap()),
        ];
        for (what, swap) in swaps {
            fs::write(&a, b"hello!").unwrap();
            let scanned = SrcFile::new(a.clone(), &fs::symlink_metadata(&a).unwrap(), b"a");
            // Kept alive elsewhere, so that the new file cannot reuse its
            // inode number.
            let kept = t.path().join(format!("kept-{what}"));
            fs::rename(&a, &kept).unwrap();
            swap(&a, &other);
            let Err(e) = read_scanned(&[scanned]) else {
                panic!("a file swapped for a {what} was read");
            };
            assert!(e.to_string().contains(&*a.to_string_lossy()), "{what}: {e}");
            // O_NOFOLLOW refuses the symlink (ELOOP); the fifo and the other
            // file open, and are not the file the scan saw.
            match what {
                "symlink" => assert!(
                    matches!(&e, Error::Io { source, .. } if source.raw_os_error() == Some(libc::ELOOP)),
                    "{e:?}"
                ),
                _ => assert!(matches!(&e, Error::Replaced { .. }), "{what}: {e:?}"),
            }
            fs::remove_file(&a).unwrap();
        }
    }

    #[test]
    fn a_small_file_seen_before_leaves_the_stream() {
        let t = tempfile::tempdir().unwrap();
        let mut rng = rand::rngs::SmallRng::seed_from_u64(5);
        let mut big = vec![0u8; SAME_MAX as usize + 1];
        rng.fill_bytes(&mut big);
        let mut list = Vec::new();
        for (name, data) in [
            ("a", &b"same bytes"[..]),
            ("b", b"other"),
            ("c", b"same bytes"),
            ("big1", &big),
            ("big2", &big),
            ("d", b"other"),
        ] {
            let p = t.path().join(name);
            fs::write(&p, data).unwrap();
            list.push((p, data.len() as u64));
        }
        let (jobs, same) = read(&list).unwrap();
        assert_eq!(same, [None, None, Some(0), None, None, Some(1)]);
        // Large files stay in the stream: their chunks deduplicate.
        let mut expect = b"same bytesother".to_vec();
        expect.extend_from_slice(&big);
        expect.extend_from_slice(&big);
        assert!(joined(&jobs) == expect);
    }

    /// The in-place cutter finds the cut points of `StreamCDC`, whatever
    /// the block and file boundaries.
    #[test]
    fn cuts_like_stream_cdc() {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
        let mut data = vec![0u8; 3 * BLOCK_SIZE + 12345];
        rng.fill_bytes(&mut data);
        // Long runs of one byte give maximum-size chunks.
        data[BLOCK_SIZE - 1000..BLOCK_SIZE + 600_000].fill(0);
        let expect: Vec<usize> =
            fastcdc::v2020::StreamCDC::new(&data[..], MIN_CHUNK, AVG_CHUNK, MAX_CHUNK)
                .map(|c| c.unwrap().length)
                .collect();

        let t = tempfile::tempdir().unwrap();
        let mut list = Vec::new();
        let mut off = 0;
        // Small files (read whole) and large ones (streamed), across blocks.
        for (i, len) in [
            1usize,
            100_000,
            BLOCK_SIZE + 3,
            777,
            1 << 20,
            900_000,
            5 << 20,
        ]
        .into_iter()
        .enumerate()
        {
            let len = len.min(data.len() - off);
            let p = t.path().join(i.to_string());
            fs::write(&p, &data[off..off + len]).unwrap();
            if len > 0 {
                list.push((p, len as u64));
            }
            off += len;
        }
        let p = t.path().join("rest");
        fs::write(&p, &data[off..]).unwrap();
        list.push((p, (data.len() - off) as u64));

        let (jobs, same) = read(&list).unwrap();
        assert!(same.iter().all(Option::is_none));
        let got: Vec<usize> = jobs.iter().map(|j| j.end - j.start).collect();
        assert_eq!(got, expect);
        assert!(joined(&jobs) == data, "the chunks are the stream");
    }

    #[test]
    fn reused_context_gives_encode_all_frames() {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(3);
        for level in [1, 3, 19] {
            let mut enc = Encoder::new(level).unwrap();
            let mut out = Vec::new();
            for len in [1usize, 5000, 70_000, 262_144] {
                let mut data = vec![0u8; len];
                rng.fill_bytes(&mut data[..len / 2]);
                compress(&mut enc, &data, false, &mut out).unwrap();
                assert_eq!(out, zstd::stream::encode_all(&data[..], level).unwrap());
                // The sized frame says its size and decodes to the data.
                compress(&mut enc, &data, true, &mut out).unwrap();
                assert_eq!(
                    zstd::zstd_safe::get_frame_content_size(&out).ok(),
                    Some(Some(len as u64))
                );
                assert!(zstd::stream::decode_all(&out[..]).unwrap() == data);
            }
        }
    }
}
