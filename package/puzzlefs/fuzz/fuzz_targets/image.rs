//! Open a manifest, walk every inode of its layers, map every file.
//!
//! Input layout: `[n: u8][len_0: u32 le]...[len_n-1: u32 le][manifest][layer_0]...`
//! where the first blob is the manifest and the others are metadata layers
//! (top first); lengths are clipped to the input. Each blob is copied into
//! an 8-byte aligned buffer (as the kernel's are), except when the top bit
//! of `n` asks for a misaligned copy, which must fail cleanly.
#![no_main]

use libfuzzer_sys::fuzz_target;
use puzzlefs_format::{check_layers, find_inode, ChunkList, Manifest, MetadataBlob};

const MAX_LAYERS: usize = 4;

/// A blob copied into its own buffer at an 8-byte aligned (or, on request,
/// misaligned) address.
struct Blob {
    buf: Vec<u8>,
    off: usize,
    len: usize,
}

impl Blob {
    fn new(data: &[u8], misalign: bool) -> Self {
        let mut buf = vec![0u8; data.len() + 16];
        let mut off = buf.as_ptr().align_offset(8);
        if misalign {
            off += 1;
        }
        buf[off..off + data.len()].copy_from_slice(data);
        Blob { buf, off, len: data.len() }
    }

    fn bytes(&self) -> &[u8] {
        &self.buf[self.off..self.off + self.len]
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&head, mut rest)) = data.split_first() else { return };
    let misalign = head & 0x80 != 0;
    let n = usize::from(head & 0x7f) % (MAX_LAYERS + 1) + 1;
    let mut lens = Vec::new();
    for _ in 0..n {
        if rest.len() < 4 {
            return;
        }
        let (l, r) = rest.split_at(4);
        lens.push(u32::from_le_bytes([l[0], l[1], l[2], l[3]]) as usize);
        rest = r;
    }
    let mut blobs = Vec::new();
    for l in lens {
        let l = l.min(rest.len());
        let (b, r) = rest.split_at(l);
        blobs.push(Blob::new(b, misalign));
        rest = r;
    }
    let (manifest, layers) = blobs.split_first().expect("n >= 1");

    if let Ok(m) = Manifest::parse(manifest.bytes()) {
        let _ = m.version();
        if let Ok(l) = m.layers() {
            for r in l.take(64) {
                let _ = r;
            }
        }
        if let Ok(v) = m.verity_entries() {
            for e in v.take(64).flatten() {
                let _ = m.verity_for(&e.digest);
            }
        }
        let _ = m.layer(0);
        if let Ok(Some(links)) = m.link_counts() {
            let _ = links.len();
            // Each entry checked; a reader stops at the first bad one.
            for e in links.take(64) {
                if e.is_err() {
                    break;
                }
            }
        }
    }

    let parsed: Vec<MetadataBlob<'_>> =
        layers.iter().filter_map(|b| MetadataBlob::parse(b.bytes()).ok()).collect();
    let views: Vec<_> = parsed.iter().filter_map(|b| b.layer().ok()).collect();
    let _ = check_layers(&views);
    // Lookups that check_layers does not make.
    for ino in [0u64, 1, 2, u64::MAX] {
        if let Ok(i) = find_inode(views.iter().copied(), ino) {
            if let Ok(d) = i.dir() {
                let _ = d.lookup(b"x");
                let _ = d.lookup_sorted(b"\xff");
                let _ = d.entries_from(u32::MAX).count();
            }
            if let Ok(f) = i.file() {
                let _ = f.map(u64::MAX, 1).map(|p| p.count());
                let _ = f.map(1, u64::MAX).map(|p| p.count());
                let _ = f.map_from(u32::MAX, 0, 0, 100).map(|p| p.count());
            }
        }
    }
});
