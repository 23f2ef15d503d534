//! The data path of a build: the contents of all regular files, one after
//! the other in inode order, form one stream cut by FastCDC (2020); worker
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
use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use anyhow::{anyhow, Context, Result};
use sha2::{Digest as _, Sha256};
use zstd::stream::raw::{Encoder, InBuffer, Operation, OutBuffer};

use puzzlefs_format::Digest;

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
}

impl SrcFile {
    /// The file at `path` with metadata `meta` (from the scan).
    pub fn new(path: PathBuf, meta: &fs::Metadata) -> Self {
        use std::os::unix::fs::MetadataExt;
        SrcFile {
            path,
            size: meta.len(),
            dev: meta.dev(),
            ino: meta.ino(),
        }
    }

    /// Opens the file without following a symlink and without blocking on
    /// a fifo, and checks that it is the regular file the scan saw: a file
    /// swapped for another, a fifo or a symlink during the build is an error
    /// naming it, not a hang or a read of something else.
    fn open(&self) -> io::Result<fs::File> {
        use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
        let named =
            |e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", self.path.display()));
        let f = fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
            .open(&self.path)
            .map_err(named)?;
        let m = f.metadata().map_err(named)?;
        if !m.is_file() || m.dev() != self.dev || m.ino() != self.ino {
            return Err(io::Error::other(format!(
                "{}: replaced by another file during the build",
                self.path.display()
            )));
        }
        if m.len() != self.size {
            return Err(io::Error::other(format!(
                "{}: file changed size while being read (was {} bytes)",
                self.path.display(),
                self.size
            )));
        }
        Ok(f)
    }
}

/// What [`chunk_and_store`] made of the files.
pub struct Stored {
    /// The chunks, in stream order.
    pub chunks: Vec<ChunkInfo>,
    /// For each file, in the order received: `Some(j)` when its contents
    /// are those of file `j` (earlier), whose pieces it shares; its bytes
    /// are not in the stream. `None`: its bytes follow in the stream.
    pub same_as: Vec<Option<usize>>,
}

/// Cuts the contents of `files` (path, size as scanned), in order, into
/// chunks and stores them in `oci`, zstd-compressed at level `compression`
/// when given.
pub fn chunk_and_store(
    oci: &OciDir,
    files: mpsc::Receiver<SrcFile>,
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
    let mut first_err: Option<anyhow::Error> = None;
    let mut same_as = Vec::new();
    std::thread::scope(|s| {
        let reader = {
            let res_tx = res_tx.clone();
            let abort = &abort;
            s.spawn(move || {
                let pool = Pool::new(POOL_BLOCKS);
                let mut r = Reader::new(pool, job_tx, abort, progress);
                match r.read_all(&files) {
                    Ok(same) => same,
                    Err(e) => {
                        let _ = res_tx.send(Err(anyhow!(e)));
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
                let mut worker = match Worker::new(oci, compression) {
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
            Ok(same) => same_as = same,
            Err(_) => {
                first_err.get_or_insert(anyhow!("internal: the reader thread panicked"));
            }
        }
    });
    if let Some(e) = first_err {
        return Err(e);
    }
    let chunks = out
        .into_iter()
        .map(|c| c.ok_or_else(|| anyhow!("internal: missing chunk result")))
        .collect::<Result<_>>()?;
    Ok(Stored { chunks, same_as })
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

/// FastCDC (2020) cut points exactly as `fastcdc::v2020::StreamCDC` finds
/// them (normalization level 1): the next chunk is cut from the next
/// `MAX_CHUNK` bytes, or from what is left at the end of the stream.
struct Cutter {
    mask_s: u64,
    mask_l: u64,
}

impl Cutter {
    fn new() -> Self {
        use fastcdc::v2020::{logarithm2, Normalization, MASKS};
        let bits = logarithm2(AVG_CHUNK);
        let norm = Normalization::Level1.bits();
        Cutter {
            mask_s: MASKS[(bits + norm) as usize],
            mask_l: MASKS[(bits - norm) as usize],
        }
    }

    /// Length of the chunk at the start of `data` (not empty).
    fn cut(&self, data: &[u8]) -> usize {
        let (_, n) = fastcdc::v2020::cut(
            data,
            MIN_CHUNK as usize,
            AVG_CHUNK as usize,
            MAX_CHUNK as usize,
            self.mask_s,
            self.mask_l,
            self.mask_s << 1,
            self.mask_l << 1,
        );
        n
    }
}

/// Reads the files into pool blocks and sends their chunks to the workers.
struct Reader<'a> {
    pool: Pool,
    jobs: mpsc::Sender<Job>,
    cutter: Cutter,
    abort: &'a AtomicBool,
    progress: &'a Progress,
    buf: Box<[u8]>,
    /// Bytes of `buf` in the stream.
    len: usize,
    /// Number of the next chunk.
    seq: usize,
    /// The workers are gone (they reported an error).
    stopped: bool,
}

impl<'a> Reader<'a> {
    fn new(
        mut pool: Pool,
        jobs: mpsc::Sender<Job>,
        abort: &'a AtomicBool,
        progress: &'a Progress,
    ) -> Self {
        let buf = pool.get();
        Reader {
            pool,
            jobs,
            cutter: Cutter::new(),
            abort,
            progress,
            buf,
            len: 0,
            seq: 0,
            stopped: false,
        }
    }

    /// Streams every file, in order; returns which files repeat an earlier
    /// one (see [`Stored::same_as`]).
    fn read_all(&mut self, files: &mpsc::Receiver<SrcFile>) -> io::Result<Vec<Option<usize>>> {
        let mut seen: HashMap<[u8; 32], usize> = HashMap::new();
        let mut same_as = Vec::new();
        for (idx, src) in files.iter().enumerate() {
            if self.stopped {
                break;
            }
            if self.abort.load(Ordering::Relaxed) {
                return Err(io::Error::other("aborted"));
            }
            let file = src.open()?;
            let (path, size) = (src.path, src.size);
            self.progress.files(idx as u64 + 1);
            if size > SAME_MAX {
                self.stream_file(file, &path, size)?;
                same_as.push(None);
                continue;
            }
            // The whole file (and the byte that shows it grew) in this block.
            let size = size as usize;
            if self.buf.len() - self.len < size + 1 {
                self.hand_over(false);
            }
            let start = self.len;
            self.stream_file(file, &path, size as u64)?;
            let hash = *blake3::hash(&self.buf[start..self.len]).as_bytes();
            match seen.entry(hash) {
                Entry::Occupied(e) => {
                    same_as.push(Some(*e.get()));
                    self.len = start;
                }
                Entry::Vacant(e) => {
                    e.insert(idx);
                    same_as.push(None);
                }
            }
        }
        self.hand_over(true);
        Ok(same_as)
    }

    /// Appends `file`, which must hold `size` bytes, to the stream.
    ///
    /// Each read asks for one byte more than the file should still hold, so
    /// that a file that grew is seen, and a shorter answer ends the file
    /// without another read (regular files return less than asked only at
    /// their end); a file that shrank is seen when a read returns nothing.
    fn stream_file(&mut self, mut file: fs::File, path: &Path, size: u64) -> io::Result<()> {
        let mut read = 0u64;
        loop {
            if self.len == self.buf.len() {
                self.hand_over(false);
            }
            let room = self.buf.len() - self.len;
            let want = room.min(usize::try_from(size - read + 1).unwrap_or(usize::MAX));
            let n = match file.read(&mut self.buf[self.len..self.len + want]) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(io::Error::new(e.kind(), format!("{}: {e}", path.display()))),
            };
            read += n as u64;
            if read > size || (n == 0 && read != size) {
                return Err(io::Error::other(format!(
                    "{}: file changed size while being read (was {size} bytes)",
                    path.display()
                )));
            }
            self.len += n;
            self.progress.add_bytes(n as u64);
            if n == 0 || (read == size && n < want) {
                return Ok(());
            }
        }
    }

    /// Sends the chunks of the current block: every chunk that is followed
    /// by at least a maximum chunk's worth of bytes (so its cut point is
    /// final), or all of them at the end of the stream. The rest moves to
    /// the head of a fresh block.
    fn hand_over(&mut self, end: bool) {
        let max = MAX_CHUNK as usize;
        let len = self.len;
        let next = if end { None } else { Some(self.pool.get()) };
        let data = std::mem::replace(&mut self.buf, next.unwrap_or_default());
        let block = Arc::new(Block {
            data,
            home: self.pool.tx.clone(),
        });
        let mut start = 0usize;
        while !self.stopped && (len - start >= max || (end && start < len)) {
            let n = self.cutter.cut(&block.data[start..len]);
            let job = Job {
                seq: self.seq,
                block: Arc::clone(&block),
                start,
                end: start + n,
            };
            if self.jobs.send(job).is_err() {
                // The workers are gone: an error was reported.
                self.stopped = true;
            }
            self.seq += 1;
            start += n;
        }
        let tail = len - start;
        if !end {
            self.buf[..tail].copy_from_slice(&block.data[start..len]);
        }
        self.len = tail;
    }
}

/// What one worker thread keeps from chunk to chunk.
struct Worker<'a> {
    oci: &'a OciDir,
    encoder: Option<Encoder<'static>>,
    zbuf: Vec<u8>,
}

impl<'a> Worker<'a> {
    fn new(oci: &'a OciDir, compression: Option<i32>) -> Result<Self> {
        let encoder = compression.map(Encoder::new).transpose().context("zstd")?;
        let zbuf = if encoder.is_some() {
            Vec::with_capacity(zstd::zstd_safe::compress_bound(MAX_CHUNK as usize))
        } else {
            Vec::new()
        };
        Ok(Worker { oci, encoder, zbuf })
    }

    /// Compresses (if asked and smaller), hashes and stores one chunk.
    fn store(&mut self, data: &[u8]) -> Result<ChunkInfo> {
        let compressed = match &mut self.encoder {
            Some(enc) => {
                compress(enc, data, &mut self.zbuf).context("zstd")?;
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

/// One zstd frame of `data` into `out`, with the context reused: the same
/// bytes as `zstd::stream::encode_all(data, level)` (a stream of unknown
/// size, so no content size in the frame header), which is what the other
/// implementation writes.
fn compress(enc: &mut Encoder<'static>, data: &[u8], out: &mut Vec<u8>) -> io::Result<()> {
    enc.reinit()?;
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

    /// Runs the reader over `list`: the chunks' bytes (in order) and the
    /// repeats it found.
    fn read(list: &[(PathBuf, u64)]) -> io::Result<(Vec<Job>, Vec<Option<usize>>)> {
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
                }
            })
            .collect::<Vec<_>>();
        read_scanned(&scanned)
    }

    fn read_scanned(list: &[SrcFile]) -> io::Result<(Vec<Job>, Vec<Option<usize>>)> {
        let (tx, files) = mpsc::channel();
        for f in list {
            tx.send(f.clone()).unwrap();
        }
        drop(tx);
        let (abort, progress) = (AtomicBool::new(false), Progress::hidden());
        let (jobs_tx, jobs_rx) = mpsc::channel();
        let mut r = Reader::new(Pool::new(64), jobs_tx, &abort, &progress);
        let same = r.read_all(&files)?;
        drop(r);
        Ok((jobs_rx.into_iter().collect(), same))
    }

    fn joined(jobs: &[Job]) -> Vec<u8> {
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
            let scanned = SrcFile::new(a.clone(), &fs::symlink_metadata(&a).unwrap());
            // Kept alive elsewhere, so that the new file cannot reuse its
            // inode number.
            let kept = t.path().join(format!("kept-{what}"));
            fs::rename(&a, &kept).unwrap();
            swap(&a, &other);
            let Err(e) = read_scanned(&[scanned]) else {
                panic!("a file swapped for a {what} was read");
            };
            assert!(e.to_string().contains(&*a.to_string_lossy()), "{what}: {e}");
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
                compress(&mut enc, &data, &mut out).unwrap();
                assert_eq!(out, zstd::stream::encode_all(&data[..], level).unwrap());
            }
        }
    }
}
