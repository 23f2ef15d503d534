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
//! Each worker keeps its zstd context and output buffer for the whole build.
//! Every stored byte is hashed twice, and that is the format: once for the
//! blob's name (sha256) and once for its fs-verity measurement (a sha256
//! Merkle tree).

use std::fs;
use std::io::{self, Read};
use std::path::PathBuf;
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

/// Cuts the contents of `files` (path, size as scanned), in order, into
/// chunks and stores them in `oci`, zstd-compressed at level `compression`
/// when given. Returns the chunks in stream order.
pub fn chunk_and_store(
    oci: &OciDir,
    files: mpsc::Receiver<(PathBuf, u64)>,
    compression: Option<i32>,
    threads: usize,
    progress: &Progress,
) -> Result<Vec<ChunkInfo>> {
    let threads = threads.max(1);
    let abort = AtomicBool::new(false);
    let (job_tx, job_rx) = mpsc::channel::<Job>();
    let job_rx = Mutex::new(job_rx);
    let (res_tx, res_rx) = mpsc::channel::<Result<(usize, ChunkInfo)>>();
    let mut out: Vec<Option<ChunkInfo>> = Vec::new();
    let mut first_err: Option<anyhow::Error> = None;
    std::thread::scope(|s| {
        {
            let res_tx = res_tx.clone();
            let abort = &abort;
            s.spawn(move || {
                let mut stream = FileStream {
                    files,
                    idx: 0,
                    cur: None,
                    abort,
                    progress,
                };
                // Two blocks being filled and handed over, the rest in the
                // workers' hands.
                let mut pool = Pool::new(2 + 2 * threads);
                if let Err(e) = read_and_cut(&mut stream, &mut pool, &job_tx) {
                    let _ = res_tx.send(Err(anyhow!(e)));
                }
            });
        }
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
    });
    if let Some(e) = first_err {
        return Err(e);
    }
    out.into_iter()
        .map(|c| c.ok_or_else(|| anyhow!("internal: missing chunk result")))
        .collect()
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

/// Reads the stream into pool blocks and sends its chunks to the workers.
fn read_and_cut(
    stream: &mut FileStream<'_>,
    pool: &mut Pool,
    jobs: &mpsc::Sender<Job>,
) -> io::Result<()> {
    let cutter = Cutter::new();
    let max = MAX_CHUNK as usize;
    let mut buf = pool.get();
    let mut len = 0usize;
    let mut seq = 0usize;
    loop {
        let mut eof = false;
        while len < buf.len() {
            let n = stream.fill(&mut buf[len..])?;
            if n == 0 {
                eof = true;
                break;
            }
            len += n;
        }
        let block = Arc::new(Block {
            data: buf,
            home: pool.tx.clone(),
        });
        let mut start = 0usize;
        while len - start >= max || (eof && start < len) {
            let n = cutter.cut(&block.data[start..len]);
            let job = Job {
                seq,
                block: Arc::clone(&block),
                start,
                end: start + n,
            };
            if jobs.send(job).is_err() {
                // The workers are gone: an error was reported.
                return Ok(());
            }
            seq += 1;
            start += n;
        }
        if eof {
            return Ok(());
        }
        buf = pool.get();
        let tail = len - start;
        buf[..tail].copy_from_slice(&block.data[start..len]);
        len = tail;
    }
}

/// A file being read.
struct OpenFile {
    path: PathBuf,
    size: u64,
    file: fs::File,
    read: u64,
}

/// The regular files' contents, one after the other, each checked to have
/// the size the scan saw.
struct FileStream<'a> {
    files: mpsc::Receiver<(PathBuf, u64)>,
    idx: usize,
    cur: Option<OpenFile>,
    abort: &'a AtomicBool,
    progress: &'a Progress,
}

impl FileStream<'_> {
    /// Fills `buf` as far as the stream goes; 0 only at its end.
    ///
    /// Each read asks for one byte more than the file should still hold, so
    /// that a file that grew is seen, and a shorter answer ends the file
    /// without another read (regular files return less than asked only at
    /// their end); a file that shrank is seen when a read returns nothing.
    fn fill(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut done = 0usize;
        while done < buf.len() {
            if self.abort.load(Ordering::Relaxed) {
                return Err(io::Error::other("aborted"));
            }
            if self.cur.is_none() {
                let Ok((path, size)) = self.files.recv() else {
                    break;
                };
                let file = fs::File::open(&path)
                    .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
                self.cur = Some(OpenFile {
                    path,
                    size,
                    file,
                    read: 0,
                });
                self.idx += 1;
                self.progress.files(self.idx as u64);
            }
            let f = self.cur.as_mut().expect("opened above");
            let left = f.size - f.read;
            let want = (buf.len() - done).min(usize::try_from(left + 1).unwrap_or(usize::MAX));
            let n = match f.file.read(&mut buf[done..done + want]) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    return Err(io::Error::new(
                        e.kind(),
                        format!("{}: {e}", f.path.display()),
                    ))
                }
            };
            f.read += n as u64;
            if f.read > f.size || (n == 0 && f.read != f.size) {
                return Err(io::Error::other(format!(
                    "{}: file changed size while being read (was {} bytes)",
                    f.path.display(),
                    f.size
                )));
            }
            done += n;
            self.progress.add_bytes(n as u64);
            if n == 0 || (f.read == f.size && n < want) {
                self.cur = None;
            }
        }
        Ok(done)
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

    fn stream_of<'a>(
        list: &[(PathBuf, u64)],
        abort: &'a AtomicBool,
        progress: &'a Progress,
    ) -> FileStream<'a> {
        let (tx, files) = mpsc::channel();
        for f in list {
            tx.send(f.clone()).unwrap();
        }
        FileStream {
            files,
            idx: 0,
            cur: None,
            abort,
            progress,
        }
    }

    fn read_all(list: &[(PathBuf, u64)], bufsize: usize) -> io::Result<Vec<u8>> {
        let (abort, progress) = (AtomicBool::new(false), Progress::hidden());
        let mut s = stream_of(list, &abort, &progress);
        let mut out = Vec::new();
        let mut buf = vec![0u8; bufsize];
        loop {
            let n = s.fill(&mut buf)?;
            if n == 0 {
                return Ok(out);
            }
            out.extend_from_slice(&buf[..n]);
        }
    }

    #[test]
    fn file_stream_concatenates_and_checks_sizes() {
        let t = tempfile::tempdir().unwrap();
        let a = t.path().join("a");
        let b = t.path().join("b");
        fs::write(&a, b"hello ").unwrap();
        fs::write(&b, b"world").unwrap();
        for bufsize in [1, 5, 6, 7, 11, 64] {
            assert_eq!(
                read_all(&[(a.clone(), 6), (b.clone(), 5)], bufsize).unwrap(),
                b"hello world",
                "buffer of {bufsize}"
            );
            // The file is longer or shorter than when it was scanned.
            for size in [4, 9] {
                let e = read_all(&[(a.clone(), 6), (b.clone(), size)], bufsize).unwrap_err();
                assert!(e.to_string().contains("changed size"), "{e}");
                assert!(e.to_string().contains(&*b.to_string_lossy()), "{e}");
            }
        }
        let e = read_all(&[(t.path().join("gone"), 1)], 8).unwrap_err();
        assert!(e.to_string().contains("gone"), "{e}");
    }

    /// The in-place cutter finds the cut points of `StreamCDC`, whatever
    /// the block boundaries.
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
        for (i, len) in [0usize, 1, 100_000, BLOCK_SIZE + 3, 777, 5 << 20]
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

        let (abort, progress) = (AtomicBool::new(false), Progress::hidden());
        let mut s = stream_of(&list, &abort, &progress);
        let mut pool = Pool::new(64);
        let (tx, rx) = mpsc::channel();
        read_and_cut(&mut s, &mut pool, &tx).unwrap();
        drop(tx);
        let jobs: Vec<Job> = rx.into_iter().collect();
        let got: Vec<usize> = jobs.iter().map(|j| j.end - j.start).collect();
        assert_eq!(got, expect);
        let mut joined = Vec::new();
        for (i, j) in jobs.iter().enumerate() {
            assert_eq!(j.seq, i);
            joined.extend_from_slice(j.data());
        }
        assert!(joined == data, "the chunks are the stream");
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
