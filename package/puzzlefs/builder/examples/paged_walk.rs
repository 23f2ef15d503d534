//! The metadata reads of a cold `readall` of one directory tree, as the kernel driver makes
//! them (`fs/puzzlefs`: readdir, lookup, iget, readahead), replayed in userspace over a
//! metadata blob read page by page through a page source like the driver's (each page copied
//! once, kept behind a mutex, shared by reference count). Prints the operations and `page()`
//! calls made; run under `valgrind --tool=callgrind` it counts the instructions of the paged
//! reader, repeatably, to compare two versions of it (README.md, "Benchmarks"). The calls
//! are the driver's copied by hand: a change to what the driver reads belongs here too.
//!
//! Usage: paged_walk <metadata blob> [<name of a directory below the root>]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::{anyhow, bail, Context, Result};
use puzzlefs::format::paged::{self, DirPlace, FilePlace, Pages, PAGE};
use puzzlefs::format::{ChunkList, InodeKind, NAME_MAX};

/// Pages copied on first use and kept, as `Metadata::Verified` keeps them.
struct Kept {
    data: Vec<u8>,
    /// Parsed once, as at mount.
    header: paged::Header,
    loaded: Mutex<Vec<Option<Arc<Vec<u8>>>>>,
    calls: AtomicU64,
}

struct Page(Arc<Vec<u8>>);

impl std::ops::Deref for Page {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0
    }
}

impl Pages for Kept {
    type Page<'a> = Page;

    fn len(&self) -> u64 {
        self.data.len() as u64
    }

    fn page(&self, index: u64) -> puzzlefs::format::Result<Page> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        let slot = usize::try_from(index).map_err(|_| puzzlefs::format::Error::Io)?;
        if let Some(Some(p)) = self.loaded.lock().unwrap().get(slot) {
            return Ok(Page(p.clone()));
        }
        let page = Arc::new(self.data.page(index)?.to_vec());
        if let Some(s @ None) = self.loaded.lock().unwrap().get_mut(slot) {
            *s = Some(page.clone());
        }
        Ok(Page(page))
    }
}

#[derive(Default)]
struct Count {
    readdir: u64,
    lookups: u64,
    igets: u64,
    windows: u64,
    pieces: u64,
}

const WINDOW: u64 = 1 << 20;

/// Where an inode's chunk or entry list is, as the driver's inodes keep it.
enum Place {
    File(FilePlace),
    Dir(DirPlace),
    Other,
}

/// What iget reads: the inode found by number, its VFS description, its chunk index and where
/// its chunk or entry list is.
fn iget(m: &Kept, ino: u64, c: &mut Count) -> Result<Place> {
    c.igets += 1;
    let blob = paged::Blob::from_header(m, &m.header)?;
    let layer = blob.layer()?;
    let inode = layer
        .find(ino)?
        .ok_or_else(|| anyhow!("inode {ino} missing"))?;
    let kind = inode.kind()?;
    if kind == InodeKind::Wht {
        bail!("whiteout");
    }
    let mut place = Place::Other;
    if kind == InodeKind::File {
        let f = inode.file()?;
        f.for_each_chunk(|_, _, _| Ok(()))?;
        place = Place::File(f.place());
    }
    if kind == InodeKind::Dir {
        place = Place::Dir(inode.dir()?.place());
    }
    if kind == InodeKind::Lnk {
        inode.symlink_target()?;
    }
    inode.permissions()?;
    inode.uid()?;
    inode.gid()?;
    Ok(place)
}

/// What readahead reads for a file: one mapping per window.
fn read(m: &Kept, place: &FilePlace, c: &mut Count) -> Result<()> {
    let size = {
        let blob = paged::Blob::from_header(m, &m.header)?;
        let size = blob.file_at(place).size()?;
        size
    };
    let mut off = 0;
    while off < size {
        let blob = paged::Blob::from_header(m, &m.header)?;
        let file = blob.file_at(place);
        let mut n = 0;
        for p in file.map(off, WINDOW)? {
            p?;
            n += 1;
        }
        c.windows += 1;
        c.pieces += n;
        off += WINDOW;
    }
    Ok(())
}

fn walk(m: &Kept, dir: &DirPlace, c: &mut Count) -> Result<()> {
    // readdir: every entry, its inode's kind found from a hint.
    let mut entries = Vec::new();
    {
        c.readdir += 1;
        let blob = paged::Blob::from_header(m, &m.header)?;
        let layer = blob.layer()?;
        let d = blob.dir_at(dir);
        let mut hints = [0u32];
        let mut name = [0u8; NAME_MAX];
        for i in 0..d.len() {
            let e = d.entry(i, &mut name)?;
            paged::find_inode_hinted([layer], e.ino, &mut hints)?.kind()?;
            entries.push(name[..e.name_len].to_vec());
        }
    }
    for name in entries {
        // lookup: a binary search of the directory's names.
        c.lookups += 1;
        let ino = {
            let blob = paged::Blob::from_header(m, &m.header)?;
            let d = blob.dir_at(dir);
            let (mut lo, mut hi) = (0, d.len());
            while lo < hi {
                let mid = lo + (hi - lo) / 2;
                if d.entry_name(mid)?.cmp_slice(&name)?.is_lt() {
                    lo = mid + 1;
                } else {
                    hi = mid;
                }
            }
            if !d.entry_name(lo)?.eq_slice(&name)? {
                bail!("name not found");
            }
            d.entry_ino(lo)?
        };
        match iget(m, ino, c)? {
            Place::Dir(d) => walk(m, &d, c)?,
            Place::File(f) => read(m, &f, c)?,
            Place::Other => {}
        }
    }
    Ok(())
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let path = args
        .first()
        .context("usage: paged_walk <metadata blob> [<dir>]")?;
    let data = std::fs::read(path).with_context(|| format!("reading {path}"))?;
    let pages = data.len().div_ceil(PAGE);
    let header = paged::Blob::parse(&data[..])?.header()?;
    let m = Kept {
        header,
        data,
        loaded: Mutex::new(vec![None; pages]),
        calls: AtomicU64::new(0),
    };
    let mut c = Count::default();
    let Place::Dir(mut dir) = iget(&m, 1, &mut c)? else {
        bail!("inode 1 is not a directory");
    };
    if let Some(sub) = args.get(1) {
        let blob = paged::Blob::from_header(&m, &m.header)?;
        let mut buf = [0u8; NAME_MAX];
        let e = blob
            .dir_at(&dir)
            .lookup(sub.as_bytes(), &mut buf)?
            .context("no such directory")?;
        let Place::Dir(sub) = iget(&m, e.ino, &mut c)? else {
            bail!("{sub} is not a directory");
        };
        dir = sub;
    }
    walk(&m, &dir, &mut c)?;
    let kept = m.loaded.lock().unwrap().iter().flatten().count();
    println!(
        "readdir {} lookups {} igets {} windows {} pieces {}; page() calls {}, pages kept {} of {}",
        c.readdir,
        c.lookups,
        c.igets,
        c.windows,
        c.pieces,
        m.calls.load(Ordering::Relaxed),
        kept,
        pages
    );
    Ok(())
}
