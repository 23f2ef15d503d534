//! Metadata blobs read page by page: a Cap'n Proto decoder for the metadata
//! schema that never needs the message in one slice.
//!
//! The capnp-backed views ([`crate::Layer`] and the others) need the whole
//! blob in memory, and capnp bounds-checks (and charges to the read budget)
//! a whole list when it is first followed. The views of this module read
//! through a page source ([`Pages`]) instead, and read only the words a value
//! is made of: finding an inode in a layer of `n` inodes, or a name in a
//! directory of `n` entries, reads O(log n) pages.
//!
//! They give what the capnp-backed views give, on any input: the same value
//! where those succeed, an error where those fail (the error kind may
//! differ), with these exceptions, by design:
//!
//! - The read budget is charged per element read, not per list followed
//!   (below); a message on which a capnp view runs out of budget may read
//!   fine here.
//! - The blob need not be 8-byte aligned (capnp refuses an unaligned slice).
//! - Accessors that read the image return a [`Result`] even where the capnp
//!   view cannot fail (e.g. [`Inode::ino`]): a page may fail to read
//!   ([`Error::Io`]).
//!
//! # Decoding rules
//!
//! The standard serialization (segment table, then the segments) and the
//! encoding of <https://capnproto.org/encoding.html>, as capnp 0.27 reads
//! them: null pointers read as the default (empty list or data, a struct of
//! zeros); far pointers with one- and two-word landing pads, in any segment;
//! structs whose data or pointer section is smaller than the schema's read
//! the missing fields as zero (schema evolution); a struct list may be
//! encoded as a list of any element size but bits (its elements are then
//! structs of that one field); `Data` must be a byte list. Every bounds check
//! capnp makes is made here, on the segment table's sizes, so it costs no
//! page read. The nesting limit cannot be reached: the schema nests at most
//! 7 levels and [`crate::NESTING_LIMIT`] is above that.
//!
//! # Read budget
//!
//! A [`Blob`] is the object of one operation (a lookup, a `readdir` call):
//! it carries a budget of [`crate::BUDGET_FACTOR`] times the blob's size in
//! words (at least [`crate::MIN_BUDGET_WORDS`]) and the last few pages it read.
//! Each struct, landing pad and `Data` read is charged its size in words, as
//! capnp charges it; each list element read is charged its size in words
//! (capnp charges the whole list when the pointer is followed); lists of
//! zero-sized elements are charged their length when followed, as capnp
//! does. Running out is [`Error::Capnp`] (`ReadLimitExceeded`). Every loop
//! of this module is bounded by a list length, so a hostile message cannot
//! make a reader loop; the budget bounds the work of reading one value many
//! times (e.g. every name of a directory pointing at the same large blob).

use core::cell::Cell;
use core::cmp::Ordering;
use core::ops::Deref;

use capnp::ErrorKind;

use crate::{
    BlobRef, Chunk, Digest, Error, InodeKind, Rdev, Result, BUDGET_FACTOR, DIGEST_LEN,
    MAX_FILE_SIZE, MIN_BUDGET_WORDS, NAME_MAX, NESTING_LIMIT,
};

/// Size of a page of a [`Pages`] source, in bytes.
pub const PAGE: usize = 4096;
const PAGE_U64: u64 = PAGE as u64;

/// Most segments a message may have (as capnp: 512 is refused).
const MAX_SEGMENTS: u64 = 512;

// The deepest value read (a chunk's digest) is 7 pointers below the root;
// capnp charges the nesting limit once per struct or list followed and
// element read, 7 at most along that path.
const _: () = assert!(NESTING_LIMIT > 7);

/// A blob read page by page: page `i` holds bytes `i * PAGE ..
/// min(len, (i + 1) * PAGE)`.
///
/// The kernel implements it over the page cache of the blob's file (each
/// page verified by fs-verity when it is read in); userspace reads a slice,
/// which is its own page source.
pub trait Pages {
    /// A page, kept readable while the value lives (a kernel folio
    /// reference, a slice).
    type Page<'a>: Deref<Target = [u8]>
    where
        Self: 'a;

    /// Size of the blob in bytes.
    fn len(&self) -> u64;

    /// Whether the blob is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Page `index` (bytes `index * PAGE .. min(len, (index + 1) * PAGE)`);
    /// an error (e.g. [`Error::Io`]) if it cannot be read. A page shorter
    /// than that range is treated as a read error.
    fn page(&self, index: u64) -> Result<Self::Page<'_>>;

    /// The whole blob, if it is in memory as one slice of [`Pages::len`]
    /// bytes: readers then take bytes from it directly, without the
    /// page-by-page path (the same values, at the cost of a slice access).
    fn as_slice(&self) -> Option<&[u8]> {
        None
    }
}

impl Pages for [u8] {
    type Page<'a> = &'a [u8];

    fn len(&self) -> u64 {
        <[u8]>::len(self) as u64
    }

    fn page(&self, index: u64) -> Result<&[u8]> {
        let start = index
            .checked_mul(PAGE_U64)
            .and_then(|s| usize::try_from(s).ok())
            .ok_or(Error::Io)?;
        let end = start.saturating_add(PAGE).min(<[u8]>::len(self));
        self.get(start..end).ok_or(Error::Io)
    }

    fn as_slice(&self) -> Option<&[u8]> {
        Some(self)
    }
}

impl<P: Pages + ?Sized> Pages for &P {
    type Page<'a>
        = P::Page<'a>
    where
        Self: 'a;

    fn len(&self) -> u64 {
        (**self).len()
    }

    fn page(&self, index: u64) -> Result<Self::Page<'_>> {
        (**self).page(index)
    }

    fn as_slice(&self) -> Option<&[u8]> {
        (**self).as_slice()
    }
}

fn capnp(kind: ErrorKind) -> Error {
    Error::Capnp(kind)
}

/// Implements `Clone` and `Copy` for a view without bounding `P` by them.
macro_rules! copy_view {
    ($($t:ident),*) => {$(
        impl<P: Pages + ?Sized> Clone for $t<'_, '_, P> {
            fn clone(&self) -> Self {
                *self
            }
        }
        impl<P: Pages + ?Sized> Copy for $t<'_, '_, P> {}
    )*};
}

/// A segment: where it starts in the blob, its size in words.
#[derive(Clone, Copy, Debug)]
struct Seg {
    start: u64,
    words: u32,
}

impl Seg {
    /// Blob offset of word `word` of the segment (`word <= words`, or a
    /// value checked by [`in_seg`] before anything is read there).
    fn at(&self, word: u64) -> Result<u64> {
        word.checked_mul(8)
            .and_then(|b| b.checked_add(self.start))
            .ok_or(Error::Overflow)
    }
}

/// Where a pointer is: word `word` of segment `seg`.
#[derive(Clone, Copy, Debug)]
struct Loc {
    seg: Seg,
    word: u64,
}

/// A struct: its data section (blob offset, size in bytes) and its pointer
/// section (first word, count). The default struct has empty sections.
#[derive(Clone, Copy, Debug)]
struct StructR {
    seg: Seg,
    data: u64,
    data_bytes: u64,
    ptrs: u64,
    ptr_count: u16,
}

impl StructR {
    const DEFAULT: StructR = StructR {
        seg: Seg { start: 0, words: 0 },
        data: 0,
        data_bytes: 0,
        ptrs: 0,
        ptr_count: 0,
    };

    /// Pointer field `i`, `None` (a null pointer) past the section.
    fn ptr(&self, i: u16) -> Option<Loc> {
        (i < self.ptr_count).then_some(Loc {
            seg: self.seg,
            word: self.ptrs.saturating_add(u64::from(i)),
        })
    }
}

/// A list read as a struct list: element `i` starts `i * step` bytes after
/// `first` (a byte offset in the segment) and is a struct of `data_bytes`
/// and `ptr_count` pointers; reading one costs `charge` words.
#[derive(Clone, Copy, Debug)]
struct ListR {
    seg: Seg,
    first: u64,
    count: u32,
    step: u64,
    data_bytes: u64,
    ptr_count: u16,
    charge: u64,
}

impl ListR {
    const EMPTY: ListR = ListR {
        seg: StructR::DEFAULT.seg,
        first: 0,
        count: 0,
        step: 0,
        data_bytes: 0,
        ptr_count: 0,
        charge: 0,
    };
}

/// A pointer followed through far pointers: the segment and word of its
/// target, and the word that describes the target (the pointer itself, or
/// the landing pad's). A double-far target is not bounds-checked yet.
struct Target {
    seg: Seg,
    word: u64,
    tag: u64,
}

/// Whether words `word .. word + n` lie in `seg` (capnp's bounds check).
fn in_seg(seg: Seg, word: u64, n: u64) -> Result<()> {
    let words = u64::from(seg.words);
    match words.checked_sub(word) {
        Some(room) if n <= room => Ok(()),
        _ => Err(capnp(ErrorKind::MessageContainsOutOfBoundsPointer)),
    }
}

/// The target of a near pointer (or a one-word landing pad) `ptr` at word
/// `word` of `seg`: one past the pointer plus its signed offset, within the
/// segment or just past its end.
fn near_target(seg: Seg, word: u64, ptr: u64) -> Result<u64> {
    let offset = i64::from((ptr as u32 as i32) >> 2);
    let target = i64::try_from(word)
        .ok()
        .and_then(|w| w.checked_add(offset))
        .and_then(|t| t.checked_add(1))
        .and_then(|t| u64::try_from(t).ok())
        .filter(|&t| t <= u64::from(seg.words));
    target.ok_or(capnp(ErrorKind::MessageContainsOutOfBoundsPointer))
}

/// Size in words of the struct a struct pointer (or tag) `w` describes.
fn struct_words(w: u64) -> (u16, u16, u64) {
    let data = (w >> 32) as u16;
    let ptrs = (w >> 48) as u16;
    (data, ptrs, u64::from(data).saturating_add(u64::from(ptrs)))
}

/// One metadata blob read through a page source, for one operation: it
/// holds the read budget and the last pages read (see the module docs). Cheap
/// to create: parsing reads the segment table only, and a blob made from a
/// [`Header`] reads nothing.
pub struct Blob<'p, P: Pages + ?Sized> {
    pages: &'p P,
    /// [`Pages::as_slice`], if it is `len` bytes long.
    whole: Option<&'p [u8]>,
    len: u64,
    segments: u32,
    seg0: Seg,
    budget: Cell<u64>,
    /// The pages read last, by page index (`NO_PAGE` for none): an operation
    /// goes back and forth between a few pages (an inode, its chunk list,
    /// the names it points to), each kept from one `Pages::page` call.
    cached: [Cell<u64>; CACHED_PAGES],
    cache: [Cell<Option<P::Page<'p>>>; CACHED_PAGES],
    /// The slot the next page read replaces.
    next_slot: Cell<usize>,
    /// The inode list, when the blob was made from a [`Header`].
    inodes: Option<ListR>,
}

/// What [`Blob::parse`] and [`Blob::layer`] read (the segment table, the
/// root, the inode list's pointer), kept from a first parse: the [`Blob`] of
/// each later operation is then made from it ([`Blob::from_header`]) without
/// reading them again. Plain data, to be kept as long as the blob does not
/// change.
#[derive(Clone, Copy, Debug)]
pub struct Header {
    len: u64,
    segments: u32,
    seg0: Seg,
    inodes: ListR,
}

/// Pages a [`Blob`] keeps.
const CACHED_PAGES: usize = 4;
/// No page cached in a slot (no page has this index: pages are 4 KiB).
const NO_PAGE: u64 = u64::MAX;

impl<'p, P: Pages + ?Sized> Blob<'p, P> {
    /// Reads the segment table of the blob `pages` holds.
    pub fn parse(pages: &'p P) -> Result<Self> {
        let len = pages.len();
        let mut blob = Self::unparsed(pages);
        let budget = blob.budget_left();
        let count = u64::from(blob.table_u32(0)?)
            .checked_add(1)
            .ok_or(Error::Overflow)?;
        if count >= MAX_SEGMENTS {
            return Err(capnp(ErrorKind::InvalidNumberOfSegments(
                usize::try_from(count).unwrap_or(usize::MAX),
            )));
        }
        let mut total_words = 0u64;
        for i in 0..count {
            let w = blob.table_u32(i.saturating_add(1))?;
            total_words = total_words.saturating_add(u64::from(w));
        }
        if total_words > budget {
            return Err(capnp(ErrorKind::MessageTooLarge(
                usize::try_from(total_words).unwrap_or(usize::MAX),
            )));
        }
        // Segment count and sizes, padded to a whole word.
        let table_end = (count / 2).saturating_add(1).saturating_mul(8);
        if count % 2 == 0 {
            blob.table_u32(count.saturating_add(1))?;
        }
        let room = len.saturating_sub(table_end);
        if room < total_words.saturating_mul(8) {
            return Err(capnp(ErrorKind::MessageEndsPrematurely(
                usize::try_from(total_words).unwrap_or(usize::MAX),
                usize::try_from(room / 8).unwrap_or(usize::MAX),
            )));
        }
        blob.segments = u32::try_from(count).map_err(|_| Error::Overflow)?;
        blob.seg0 = Seg {
            start: table_end,
            words: blob.table_u32(1)?,
        };
        Ok(blob)
    }

    /// A blob of `pages` of which nothing is read yet: a fresh budget, no
    /// page kept.
    fn unparsed(pages: &'p P) -> Self {
        let len = pages.len();
        let budget = (len / 8)
            .saturating_mul(BUDGET_FACTOR as u64)
            .max(MIN_BUDGET_WORDS as u64);
        Blob {
            pages,
            whole: pages.as_slice().filter(|w| <[u8]>::len(w) as u64 == len),
            len,
            segments: 0,
            seg0: StructR::DEFAULT.seg,
            budget: Cell::new(budget),
            cached: [const { Cell::new(NO_PAGE) }; CACHED_PAGES],
            cache: [const { Cell::new(None) }; CACHED_PAGES],
            next_slot: Cell::new(0),
            inodes: None,
        }
    }

    /// What parsing this blob and finding its inode list read, to make the
    /// blob of a later operation from ([`Blob::from_header`]).
    pub fn header(&self) -> Result<Header> {
        Ok(Header {
            len: self.len,
            segments: self.segments,
            seg0: self.seg0,
            inodes: self.layer()?.inodes,
        })
    }

    /// The blob `header` was taken from (the same bytes in `pages`), with a
    /// fresh read budget and no page kept, made without reading a page: it
    /// answers as a blob made by [`Blob::parse`] does, without reading (or
    /// charging) the segment table and the root again. [`Error::Bounds`] if
    /// `pages` is not the size the header was taken at.
    pub fn from_header(pages: &'p P, header: &Header) -> Result<Self> {
        let mut blob = Self::unparsed(pages);
        if blob.len != header.len {
            return Err(Error::Bounds);
        }
        blob.segments = header.segments;
        blob.seg0 = header.seg0;
        blob.inodes = Some(header.inodes);
        Ok(blob)
    }

    /// The file at `place`, taken from a [`File`] of this blob (of another
    /// blob, it reads other bytes, checked as any).
    pub fn file_at(&self, place: &FilePlace) -> File<'_, 'p, P> {
        File {
            blob: self,
            ino: place.ino,
            chunks: place.chunks,
        }
    }

    /// The directory at `place`, taken from a [`Dir`] of this blob (as
    /// [`Blob::file_at`]).
    pub fn dir_at(&self, place: &DirPlace) -> Dir<'_, 'p, P> {
        Dir {
            blob: self,
            ino: place.ino,
            entries: place.entries,
            look_below: place.look_below,
        }
    }

    /// The inode list of this blob.
    pub fn layer(&self) -> Result<Layer<'_, 'p, P>> {
        if let Some(inodes) = self.inodes {
            return Ok(Layer { blob: self, inodes });
        }
        // capnp checks (and charges) the root pointer's word first.
        in_seg(self.seg0, 0, 1)?;
        self.charge(1)?;
        let root = self.read_struct(Some(Loc {
            seg: self.seg0,
            word: 0,
        }))?;
        let inodes = self.read_list(root.ptr(0))?;
        Ok(Layer { blob: self, inodes })
    }

    /// Words of read budget left.
    pub fn budget_left(&self) -> u64 {
        self.budget.get()
    }

    fn charge(&self, words: u64) -> Result<()> {
        let left = self.budget.get();
        match left.checked_sub(words) {
            Some(rest) => {
                self.budget.set(rest);
                Ok(())
            }
            None => Err(capnp(ErrorKind::ReadLimitExceeded)),
        }
    }

    // ---- bytes through pages ----

    /// Runs `f` on page `index`, kept in the blob's cache or read now (and
    /// then kept, in place of the page read longest ago).
    fn with_page<R>(&self, index: u64, f: impl FnOnce(&[u8]) -> R) -> Result<R> {
        for (at, slot) in self.cached.iter().zip(&self.cache) {
            if at.get() != index {
                continue;
            }
            // `None` only if `f` reads the blob again (no caller does): the
            // page is then read again below.
            if let Some(page) = slot.take() {
                let r = f(&page);
                slot.set(Some(page));
                return Ok(r);
            }
        }
        let page = self.pages.page(index)?;
        let r = f(&page);
        let k = self.next_slot.get() % CACHED_PAGES;
        self.next_slot.set(k.wrapping_add(1));
        if let (Some(at), Some(slot)) = (self.cached.get(k), self.cache.get(k)) {
            at.set(index);
            slot.set(Some(page));
        }
        Ok(r)
    }

    /// Calls `f` on the bytes `pos .. pos + len` of the blob, one piece per
    /// page, until it returns `false`; returns whether every piece was
    /// visited.
    fn visit(&self, pos: u64, len: u64, mut f: impl FnMut(&[u8]) -> bool) -> Result<bool> {
        let end = pos.checked_add(len).ok_or(Error::Overflow)?;
        if end > self.len {
            return Err(Error::Bounds);
        }
        if let Some(whole) = self.whole {
            // In memory: one piece (none if empty, as below).
            let piece = usize::try_from(pos)
                .ok()
                .zip(usize::try_from(end).ok())
                .and_then(|(a, b)| whole.get(a..b))
                .ok_or(Error::Io)?;
            return Ok(piece.is_empty() || f(piece));
        }
        let mut at = pos;
        while at < end {
            let index = at / PAGE_U64;
            let off = (at % PAGE_U64) as usize;
            let piece = end
                .saturating_sub(at)
                .min(PAGE_U64.saturating_sub(at % PAGE_U64)) as usize;
            let go = self.with_page(index, |page| {
                page.get(off..off.saturating_add(piece)).map(&mut f)
            })?;
            match go {
                None => return Err(Error::Io),
                Some(false) => return Ok(false),
                Some(true) => {}
            }
            at = at.saturating_add(piece as u64);
        }
        Ok(true)
    }

    /// Copies the bytes at `pos` into `out`.
    fn read_into(&self, pos: u64, out: &mut [u8]) -> Result<()> {
        let mut rest: &mut [u8] = out;
        self.visit(pos, rest.len() as u64, |piece| {
            let (head, tail) = core::mem::take(&mut rest).split_at_mut(piece.len());
            head.copy_from_slice(piece);
            rest = tail;
            true
        })?;
        Ok(())
    }

    fn bytes<const N: usize>(&self, pos: u64) -> Result<[u8; N]> {
        if let Some(whole) = self.whole {
            // The checks of `visit`, then a copy the compiler inlines: words
            // and fields are most of what the readers read.
            let end = pos.checked_add(N as u64).ok_or(Error::Overflow)?;
            if end > self.len {
                return Err(Error::Bounds);
            }
            return usize::try_from(pos)
                .ok()
                .and_then(|p| whole.get(p..)?.first_chunk::<N>())
                .copied()
                .ok_or(Error::Io);
        }
        // Within one page (most reads): copied out of it directly.
        let off = (pos % PAGE_U64) as usize;
        if off.saturating_add(N) <= PAGE {
            let end = pos.checked_add(N as u64).ok_or(Error::Overflow)?;
            if end > self.len {
                return Err(Error::Bounds);
            }
            return self
                .with_page(pos / PAGE_U64, |page| {
                    page.get(off..).and_then(|p| p.first_chunk::<N>()).copied()
                })?
                .ok_or(Error::Io);
        }
        let mut b = [0u8; N];
        self.read_into(pos, &mut b)?;
        Ok(b)
    }

    fn word(&self, pos: u64) -> Result<u64> {
        Ok(u64::from_le_bytes(self.bytes(pos)?))
    }

    /// The `i`th u32 of the segment table (0: segment count minus one).
    fn table_u32(&self, i: u64) -> Result<u32> {
        let pos = i.checked_mul(4).ok_or(Error::Overflow)?;
        if pos.saturating_add(4) > self.len {
            return Err(capnp(ErrorKind::MessageEndsPrematurely(
                4,
                usize::try_from(self.len.saturating_sub(pos)).unwrap_or(usize::MAX),
            )));
        }
        Ok(u32::from_le_bytes(self.bytes(pos)?))
    }

    fn segment(&self, id: u32) -> Result<Seg> {
        if id == 0 {
            return Ok(self.seg0);
        }
        if id >= self.segments {
            return Err(capnp(ErrorKind::InvalidSegmentId(id)));
        }
        let mut start = self.seg0.start;
        for i in 0..id {
            let words = self.table_u32(u64::from(i).saturating_add(1))?;
            start = start.saturating_add(u64::from(words).saturating_mul(8));
        }
        let words = self.table_u32(u64::from(id).saturating_add(1))?;
        Ok(Seg { start, words })
    }

    // ---- pointers ----

    /// Follows the pointer at `at` (`None`: a field past the pointer
    /// section, read as null) through far pointers; `None` if it is null.
    fn follow(&self, at: Option<Loc>) -> Result<Option<Target>> {
        let Some(at) = at else { return Ok(None) };
        let w = self.word(at.seg.at(at.word)?)?;
        if w == 0 {
            return Ok(None);
        }
        if w & 3 != 2 {
            let word = near_target(at.seg, at.word, w)?;
            return Ok(Some(Target {
                seg: at.seg,
                word,
                tag: w,
            }));
        }
        let seg = self.segment((w >> 32) as u32)?;
        let pad = u64::from((w as u32) >> 3);
        let double = (w >> 2) & 1 == 1;
        let pad_words = if double { 2 } else { 1 };
        in_seg(seg, pad, pad_words)?;
        self.charge(pad_words)?;
        let p = self.word(seg.at(pad)?)?;
        if !double {
            // The pad is read as a near pointer, whatever its kind says.
            let word = near_target(seg, pad, p)?;
            return Ok(Some(Target { seg, word, tag: p }));
        }
        // The pad is read as a far pointer to the start of the object,
        // whatever its kind says; the word after it describes the object.
        let tag = self.word(seg.at(pad.saturating_add(1))?)?;
        Ok(Some(Target {
            seg: self.segment((p >> 32) as u32)?,
            word: u64::from((p as u32) >> 3),
            tag,
        }))
    }

    /// Whether the pointer at `at` is null (the generated `has_*`: the
    /// word itself, far pointers not followed).
    fn is_null(&self, at: Option<Loc>) -> Result<bool> {
        match at {
            None => Ok(true),
            Some(at) => Ok(self.word(at.seg.at(at.word)?)? == 0),
        }
    }

    fn read_struct(&self, at: Option<Loc>) -> Result<StructR> {
        let Some(t) = self.follow(at)? else {
            return Ok(StructR::DEFAULT);
        };
        if t.tag & 3 != 0 {
            return Err(capnp(
                ErrorKind::MessageContainsNonStructPointerWhereStructPointerWasExpected,
            ));
        }
        let (data, ptr_count, words) = struct_words(t.tag);
        in_seg(t.seg, t.word, words)?;
        self.charge(words)?;
        Ok(StructR {
            seg: t.seg,
            data: t.seg.at(t.word)?,
            data_bytes: u64::from(data).saturating_mul(8),
            ptrs: t.word.saturating_add(u64::from(data)),
            ptr_count,
        })
    }

    /// Reads a pointer to a list of structs. Bounds-checks the whole list
    /// but charges only its tag (elements are charged when read).
    fn read_list(&self, at: Option<Loc>) -> Result<ListR> {
        let Some(t) = self.follow(at)? else {
            return Ok(ListR::EMPTY);
        };
        if t.tag & 3 != 1 {
            return Err(capnp(
                ErrorKind::MessageContainsNonListPointerWhereListPointerWasExpected,
            ));
        }
        let size = (t.tag >> 32) as u32 & 7;
        let count = (t.tag >> 35) as u32;
        if size == 7 {
            let word_count = u64::from(count);
            in_seg(t.seg, t.word, word_count.saturating_add(1))?;
            self.charge(1)?;
            let tag = self.word(t.seg.at(t.word)?)?;
            if tag & 3 != 0 {
                return Err(capnp(
                    ErrorKind::InlineCompositeListsOfNonStructTypeAreNotSupported,
                ));
            }
            let elements = (tag as u32) >> 2;
            let (data, ptr_count, words) = struct_words(tag);
            if u64::from(elements).saturating_mul(words) > word_count {
                return Err(capnp(
                    ErrorKind::InlineCompositeListsElementsOverrunItsWordCount,
                ));
            }
            if words == 0 {
                self.charge(u64::from(elements))?;
            }
            return Ok(ListR {
                seg: t.seg,
                first: t.word.saturating_add(1).saturating_mul(8),
                count: elements,
                step: words.saturating_mul(8),
                data_bytes: u64::from(data).saturating_mul(8),
                ptr_count,
                charge: words,
            });
        }
        // A list of primitives or pointers read as a list of structs of one
        // field: (data bits, pointers) per element.
        let (bits, ptr_count) = match size {
            0 => (0u64, 0u16),
            1 => (1, 0),
            2 => (8, 0),
            3 => (16, 0),
            4 => (32, 0),
            5 => (64, 0),
            _ => (0, 1),
        };
        let step = bits.saturating_add(u64::from(ptr_count).saturating_mul(64));
        let words = u64::from(count).saturating_mul(step).div_ceil(64);
        in_seg(t.seg, t.word, words)?;
        if size == 0 {
            self.charge(u64::from(count))?;
        }
        if size == 1 {
            return Err(capnp(ErrorKind::FoundBitListWhereStructListWasExpected));
        }
        Ok(ListR {
            seg: t.seg,
            first: t.word.saturating_mul(8),
            count,
            step: step / 8,
            data_bytes: bits / 8,
            ptr_count,
            charge: step / 64,
        })
    }

    /// Element `i` of `l` (`i < l.count`).
    fn element(&self, l: &ListR, i: u32) -> Result<StructR> {
        if i >= l.count {
            return Err(Error::Bounds);
        }
        self.charge(l.charge)?;
        let start = u64::from(i)
            .checked_mul(l.step)
            .and_then(|o| o.checked_add(l.first))
            .ok_or(Error::Overflow)?;
        Ok(StructR {
            seg: l.seg,
            data: l.seg.start.checked_add(start).ok_or(Error::Overflow)?,
            data_bytes: l.data_bytes,
            ptrs: start.saturating_add(l.data_bytes) / 8,
            ptr_count: l.ptr_count,
        })
    }

    fn read_data(&self, at: Option<Loc>) -> Result<Bytes<'_, 'p, P>> {
        let Some(t) = self.follow(at)? else {
            return Ok(Bytes {
                blob: self,
                pos: 0,
                len: 0,
            });
        };
        if t.tag & 3 != 1 {
            return Err(capnp(
                ErrorKind::MessageContainsNonListPointerWhereDataWasExpected,
            ));
        }
        if (t.tag >> 32) & 7 != 2 {
            return Err(capnp(
                ErrorKind::MessageContainsListPointerOfNonBytesWhereDataWasExpected,
            ));
        }
        let len = (t.tag >> 35) as u32;
        let words = u64::from(len).div_ceil(8);
        in_seg(t.seg, t.word, words)?;
        self.charge(words)?;
        Ok(Bytes {
            blob: self,
            pos: t.seg.at(t.word)?,
            len,
        })
    }

    // ---- data fields ----

    /// The `N` bytes at byte `off` of the data section, zeros past it.
    fn field<const N: usize>(&self, s: &StructR, off: u64) -> Result<[u8; N]> {
        let end = off.checked_add(N as u64).ok_or(Error::Overflow)?;
        if end > s.data_bytes {
            return Ok([0; N]);
        }
        self.bytes(s.data.checked_add(off).ok_or(Error::Overflow)?)
    }

    fn u64_field(&self, s: &StructR, i: u64) -> Result<u64> {
        Ok(u64::from_le_bytes(self.field(s, i.saturating_mul(8))?))
    }

    fn u32_field(&self, s: &StructR, i: u64) -> Result<u32> {
        Ok(u32::from_le_bytes(self.field(s, i.saturating_mul(4))?))
    }

    fn u16_field(&self, s: &StructR, i: u64) -> Result<u16> {
        Ok(u16::from_le_bytes(self.field(s, i.saturating_mul(2))?))
    }

    fn bool_field(&self, s: &StructR, bit: u64) -> Result<bool> {
        let [b] = self.field::<1>(s, bit / 8)?;
        Ok(b & (1u8 << (bit % 8)) != 0)
    }
}

/// `Data` (a byte list) in a blob, read through its pages.
pub struct Bytes<'b, 'p, P: Pages + ?Sized> {
    blob: &'b Blob<'p, P>,
    pos: u64,
    len: u32,
}

copy_view!(Bytes);

impl<P: Pages + ?Sized> Bytes<'_, '_, P> {
    /// Length in bytes.
    pub fn len(&self) -> u32 {
        self.len
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Copies the bytes from `offset` on into `out`, as many as fit; returns
    /// how many were copied (0 at or past the end).
    pub fn read_at(&self, offset: u32, out: &mut [u8]) -> Result<usize> {
        let left = self.len.saturating_sub(offset) as usize;
        let n = left.min(out.len());
        if n == 0 {
            return Ok(0);
        }
        let out = out.get_mut(..n).ok_or(Error::Bounds)?;
        self.blob
            .read_into(self.pos.saturating_add(u64::from(offset)), out)?;
        Ok(n)
    }

    /// Copies all the bytes into `out` and returns them; [`Error::Bounds`]
    /// if `out` is too small.
    pub fn copy_to<'o>(&self, out: &'o mut [u8]) -> Result<&'o [u8]> {
        let out = out.get_mut(..self.len as usize).ok_or(Error::Bounds)?;
        self.blob.read_into(self.pos, out)?;
        Ok(out)
    }

    /// Calls `f` on the bytes in order, in pieces of at most a page (one
    /// piece for a blob in memory; none if empty), until it returns
    /// `false`; returns whether every piece was visited. For a reader that
    /// scans or copies the bytes where they are, without a buffer.
    pub fn for_each_piece(&self, f: impl FnMut(&[u8]) -> bool) -> Result<bool> {
        self.blob.visit(self.pos, u64::from(self.len), f)
    }

    /// Compares with `other` bytewise, as slices compare, without a copy.
    pub fn cmp_slice(&self, other: &[u8]) -> Result<Ordering> {
        let mut rest = other;
        let mut order = Ordering::Equal;
        self.blob.visit(self.pos, u64::from(self.len), |piece| {
            let n = piece.len().min(rest.len());
            let (head, tail) = rest.split_at(n);
            order = piece.get(..n).map_or(Ordering::Greater, |p| p.cmp(head));
            if order == Ordering::Equal && n < piece.len() {
                order = Ordering::Greater;
            }
            rest = tail;
            order == Ordering::Equal
        })?;
        if order == Ordering::Equal && !rest.is_empty() {
            order = Ordering::Less;
        }
        Ok(order)
    }

    /// Whether the bytes are `other`.
    pub fn eq_slice(&self, other: &[u8]) -> Result<bool> {
        if self.len as usize != other.len() {
            return Ok(false);
        }
        Ok(self.cmp_slice(other)? == Ordering::Equal)
    }

    /// Compares with other bytes of the blob, as slices compare.
    pub fn cmp_bytes(&self, other: &Self) -> Result<Ordering> {
        const CHUNK: usize = 64;
        let (mut a, mut b) = ([0u8; CHUNK], [0u8; CHUNK]);
        let mut off = 0u32;
        loop {
            let na = self.read_at(off, &mut a)?;
            let nb = other.read_at(off, &mut b)?;
            let n = na.min(nb);
            let order = a.get(..n).cmp(&b.get(..n));
            if order != Ordering::Equal {
                return Ok(order);
            }
            if n < CHUNK {
                return Ok(na.cmp(&nb));
            }
            off = off.saturating_add(CHUNK as u32);
        }
    }
}

/// A metadata layer's inode list, read through pages.
pub struct Layer<'b, 'p, P: Pages + ?Sized> {
    blob: &'b Blob<'p, P>,
    inodes: ListR,
}

copy_view!(Layer);

impl<'b, 'p, P: Pages + ?Sized> Layer<'b, 'p, P> {
    /// The blob the layer is read from.
    pub fn blob(&self) -> &'b Blob<'p, P> {
        self.blob
    }

    /// Number of inodes in the layer.
    pub fn len(&self) -> u32 {
        self.inodes.count
    }

    /// Whether the layer holds no inode.
    pub fn is_empty(&self) -> bool {
        self.inodes.count == 0
    }

    /// The inode at position `idx` (not inode number); [`Error::Bounds`]
    /// past the end.
    pub fn inode_at(&self, idx: u32) -> Result<Inode<'b, 'p, P>> {
        Ok(Inode {
            blob: self.blob,
            s: self.blob.element(&self.inodes, idx)?,
        })
    }

    /// The inode at `idx`, `None` past the end (capnp's `try_get`).
    fn try_at(&self, idx: u32) -> Result<Option<Inode<'b, 'p, P>>> {
        if idx >= self.inodes.count {
            return Ok(None);
        }
        self.inode_at(idx).map(Some)
    }

    /// Binary search for `ino` in this layer only, whiteouts included (see
    /// [`crate::Layer::find`]).
    pub fn find(&self, ino: u64) -> Result<Option<Inode<'b, 'p, P>>> {
        Ok(self.find_pos(ino)?.map(|(_, inode)| inode))
    }

    /// [`Layer::find`], also returning the position of the inode (see
    /// [`crate::Layer::find_pos`]).
    pub fn find_pos(&self, ino: u64) -> Result<Option<(u32, Inode<'b, 'p, P>)>> {
        Ok(self.search(ino)?.0)
    }

    /// As [`crate::Layer`]'s: from the position the builders' numbering
    /// gives (`search_from_first`).
    #[allow(clippy::type_complexity)]
    fn search(&self, ino: u64) -> Result<(Option<(u32, Inode<'b, 'p, P>)>, u32)> {
        let Some(first) = self.try_at(0)? else {
            return Ok((None, 0));
        };
        crate::search_from_first(self.inodes.count, ino, first.ino()?, |i| {
            let inode = self.inode_at(i)?;
            Ok((inode.ino()?, inode))
        })
    }

    /// [`Layer::find_pos`] with a hint (see [`crate::Layer::find_pos_hinted`]).
    pub fn find_pos_hinted(
        &self,
        ino: u64,
        hint: &mut u32,
    ) -> Result<Option<(u32, Inode<'b, 'p, P>)>> {
        let at = *hint;
        let before = match at.checked_sub(1) {
            None => Some(true),
            Some(prev) => match self.try_at(prev)? {
                Some(r) => Some(r.ino()? < ino),
                None => None,
            },
        };
        if before == Some(true) {
            match self.try_at(at)? {
                Some(r) => {
                    let found = r.ino()?;
                    if found == ino {
                        *hint = at.saturating_add(1);
                        return Ok(Some((at, r)));
                    }
                    if found > ino {
                        return Ok(None);
                    }
                }
                None if at == self.inodes.count => return Ok(None),
                None => {}
            }
        }
        let (found, lower) = self.search(ino)?;
        *hint = match &found {
            Some((pos, _)) => pos.saturating_add(1),
            None => lower,
        };
        Ok(found)
    }

    /// Whether inode numbers are strictly ascending (O(n)).
    pub fn is_sorted(&self) -> Result<bool> {
        let mut prev: Option<u64> = None;
        for i in 0..self.inodes.count {
            let ino = self.inode_at(i)?.ino()?;
            if prev.is_some_and(|p| p >= ino) {
                return Ok(false);
            }
            prev = Some(ino);
        }
        Ok(true)
    }

    /// Largest inode number in the layer (the last one).
    pub fn max_ino(&self) -> Result<Option<u64>> {
        match self.inodes.count.checked_sub(1) {
            None => Ok(None),
            Some(last) => Ok(Some(self.inode_at(last)?.ino()?)),
        }
    }
}

/// [`crate::find_inode`] over paged layers (top first).
pub fn find_inode<'b, 'p, P, I>(layers: I, ino: u64) -> Result<Inode<'b, 'p, P>>
where
    P: Pages + ?Sized + 'p,
    I: IntoIterator<Item = Layer<'b, 'p, P>>,
{
    find_inode_hinted(layers, ino, &mut [])
}

/// [`crate::find_inode_hinted`] over paged layers (top first).
pub fn find_inode_hinted<'b, 'p, P, I>(
    layers: I,
    ino: u64,
    hints: &mut [u32],
) -> Result<Inode<'b, 'p, P>>
where
    P: Pages + ?Sized + 'p,
    I: IntoIterator<Item = Layer<'b, 'p, P>>,
{
    crate::layer::find_across(layers, ino, hints)
}

impl<'b, 'p, P: Pages + ?Sized> crate::layer::FindIn for Layer<'b, 'p, P> {
    type Inode = Inode<'b, 'p, P>;

    fn find_with(&self, ino: u64, hint: Option<&mut u32>) -> Result<Option<Self::Inode>> {
        match hint {
            Some(hint) => Ok(self.find_pos_hinted(ino, hint)?.map(|(_, inode)| inode)),
            None => self.find(ino),
        }
    }

    fn kind_of(inode: &Self::Inode) -> Result<InodeKind> {
        inode.kind()
    }
}

// Field offsets of schema/metadata.capnp as the schema compiler laid them
// out (the generated readers use the same).
/// `Inode`: `ino` (u64 #0), `mode` discriminant (u16 #4), `uid` (u32 #3),
/// `gid` (u32 #4), `permissions` (u16 #5); pointers `mode` payload (#0),
/// `additional` (#1).
const INODE_MODE: u64 = 4;

/// An inode, read through pages.
pub struct Inode<'b, 'p, P: Pages + ?Sized> {
    blob: &'b Blob<'p, P>,
    s: StructR,
}

copy_view!(Inode);

impl<'b, 'p, P: Pages + ?Sized> Inode<'b, 'p, P> {
    /// Inode number.
    pub fn ino(&self) -> Result<u64> {
        self.blob.u64_field(&self.s, 0)
    }

    /// Owner user id.
    pub fn uid(&self) -> Result<u32> {
        self.blob.u32_field(&self.s, 3)
    }

    /// Owner group id.
    pub fn gid(&self) -> Result<u32> {
        self.blob.u32_field(&self.s, 4)
    }

    /// The 12 permission bits (higher bits of the stored value ignored).
    pub fn permissions(&self) -> Result<u16> {
        Ok(self.blob.u16_field(&self.s, 5)? & 0o7777)
    }

    fn discriminant(&self) -> Result<u16> {
        self.blob.u16_field(&self.s, INODE_MODE)
    }

    /// The inode's kind, from the `mode` union's discriminant only (see
    /// [`crate::Inode::kind`]).
    pub fn kind(&self) -> Result<InodeKind> {
        InodeKind::from_discriminant(self.discriminant()?)
    }

    /// `st_mode`: file type bits and permission bits.
    pub fn mode(&self) -> Result<u32> {
        Ok(self.kind()?.file_type_bits() | u32::from(self.permissions()?))
    }

    /// The `mode` union member with a pointer (`chr`, `dir`, `blk`,
    /// `file`), read as the generated `which()` does: an unknown
    /// discriminant is an error, `Some` the struct if the discriminant is
    /// `want`, `None` otherwise.
    fn member(&self, want: u16) -> Result<Option<StructR>> {
        let d = self.discriminant()?;
        if d > 8 {
            return Err(Error::NotInSchema(d));
        }
        if d != want {
            return Ok(None);
        }
        self.blob.read_struct(self.s.ptr(0)).map(Some)
    }

    /// Device numbers for `Chr` and `Blk` inodes, `None` for other kinds.
    pub fn rdev(&self) -> Result<Option<Rdev>> {
        let d = self.discriminant()?;
        let dev = match d {
            2 | 4 => self.member(d)?,
            // Other members: only an unknown discriminant is an error.
            _ => self.member(u16::MAX)?,
        };
        let Some(s) = dev else { return Ok(None) };
        Ok(Some(Rdev {
            major: self.blob.u64_field(&s, 0)?,
            minor: self.blob.u64_field(&s, 1)?,
        }))
    }

    /// The directory view, or [`Error::NotADirectory`].
    pub fn dir(&self) -> Result<Dir<'b, 'p, P>> {
        match self.member(3)? {
            Some(d) => Ok(Dir {
                blob: self.blob,
                ino: self.ino()?,
                entries: self.blob.read_list(d.ptr(0))?,
                look_below: self.blob.bool_field(&d, 0)?,
            }),
            None => Err(Error::NotADirectory(self.ino()?)),
        }
    }

    /// The regular file view, or [`Error::NotAFile`].
    pub fn file(&self) -> Result<File<'b, 'p, P>> {
        match self.member(5)? {
            Some(f) => Ok(File {
                blob: self.blob,
                ino: self.ino()?,
                chunks: self.blob.read_list(f.ptr(0))?,
            }),
            None => Err(Error::NotAFile(self.ino()?)),
        }
    }

    /// The `additional` struct, `None` if its pointer is null.
    fn additional(&self) -> Result<Option<StructR>> {
        let at = self.s.ptr(1);
        if self.blob.is_null(at)? {
            return Ok(None);
        }
        self.blob.read_struct(at).map(Some)
    }

    /// The extended attributes (possibly none).
    pub fn xattrs(&self) -> Result<Xattrs<'b, 'p, P>> {
        let list = match self.additional()? {
            Some(add) if !self.blob.is_null(add.ptr(0))? => self.blob.read_list(add.ptr(0))?,
            _ => ListR::EMPTY,
        };
        Ok(Xattrs {
            blob: self.blob,
            list,
        })
    }

    /// The value of the xattr with key `key` (linear; the first readable
    /// match, an error at the first xattr that cannot be read before it).
    pub fn xattr(&self, key: &[u8]) -> Result<Option<Bytes<'b, 'p, P>>> {
        let xattrs = self.xattrs()?;
        for i in 0..xattrs.len() {
            let (k, v) = xattrs.get(i)?;
            if k.eq_slice(key)? {
                return Ok(Some(v));
            }
        }
        Ok(None)
    }

    /// The symlink target stored with the inode, if any (set for `Lnk`).
    pub fn symlink_target(&self) -> Result<Option<Bytes<'b, 'p, P>>> {
        match self.additional()? {
            Some(add) if !self.blob.is_null(add.ptr(1))? => {
                self.blob.read_data(add.ptr(1)).map(Some)
            }
            _ => Ok(None),
        }
    }
}

/// An inode's extended attributes, read through pages.
pub struct Xattrs<'b, 'p, P: Pages + ?Sized> {
    blob: &'b Blob<'p, P>,
    list: ListR,
}

copy_view!(Xattrs);

impl<'b, 'p, P: Pages + ?Sized> Xattrs<'b, 'p, P> {
    /// Number of xattrs.
    pub fn len(&self) -> u32 {
        self.list.count
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.list.count == 0
    }

    /// Xattr `i`: (key, value); an error if either cannot be read.
    pub fn get(&self, i: u32) -> Result<(Bytes<'b, 'p, P>, Bytes<'b, 'p, P>)> {
        let x = self.blob.element(&self.list, i)?;
        let key = self.blob.read_data(x.ptr(0))?;
        let value = self.blob.read_data(x.ptr(1))?;
        Ok((key, value))
    }
}

/// What [`Dir::entry`] gives: the name is in the caller's buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    /// Position of the entry in the directory.
    pub index: u32,
    /// Inode number the entry points to.
    pub ino: u64,
    /// Length of the name (1..=[`NAME_MAX`]).
    pub name_len: usize,
}

/// A directory's entries, read through pages.
pub struct Dir<'b, 'p, P: Pages + ?Sized> {
    blob: &'b Blob<'p, P>,
    ino: u64,
    entries: ListR,
    look_below: bool,
}

copy_view!(Dir);

/// Where a directory's entry list is in its blob (plain data, from
/// [`Dir::place`]): kept, it makes the directory's [`Dir`] again
/// ([`Blob::dir_at`]) without finding the inode and its entry list.
#[derive(Clone, Copy, Debug)]
pub struct DirPlace {
    ino: u64,
    entries: ListR,
    look_below: bool,
}

impl<'b, 'p, P: Pages + ?Sized> Dir<'b, 'p, P> {
    /// Where this directory's entry list is.
    pub fn place(&self) -> DirPlace {
        DirPlace {
            ino: self.ino,
            entries: self.entries,
            look_below: self.look_below,
        }
    }

    /// Inode number of the directory itself.
    pub fn ino(&self) -> u64 {
        self.ino
    }

    /// The schema's `lookBelow` flag.
    pub fn look_below(&self) -> bool {
        self.look_below
    }

    /// Number of entries.
    pub fn len(&self) -> u32 {
        self.entries.count
    }

    /// Whether the directory has no entry.
    pub fn is_empty(&self) -> bool {
        self.entries.count == 0
    }

    /// Inode number of entry `index`, its name not read.
    pub fn entry_ino(&self, index: u32) -> Result<u64> {
        let e = self.blob.element(&self.entries, index)?;
        self.blob.u64_field(&e, 0)
    }

    /// Name of entry `index`, not validated.
    pub fn entry_name(&self, index: u32) -> Result<Bytes<'b, 'p, P>> {
        let e = self.blob.element(&self.entries, index)?;
        self.blob.read_data(e.ptr(0))
    }

    /// Entry `index`, its name copied into `name` and validated (as
    /// [`crate::Dir::entry`] does).
    pub fn entry(&self, index: u32, name: &mut [u8; NAME_MAX]) -> Result<Entry> {
        let e = self.blob.element(&self.entries, index)?;
        let bytes = self.blob.read_data(e.ptr(0))?;
        if bytes.len() as usize > NAME_MAX {
            return Err(Error::Corrupt {
                what: "invalid directory entry name",
            });
        }
        let copied = bytes.copy_to(name)?;
        crate::dir::check_name(copied)?;
        Ok(Entry {
            index,
            ino: self.blob.u64_field(&e, 0)?,
            name_len: copied.len(),
        })
    }

    /// Binary search for `name`, assuming entries sorted by name bytes (see
    /// [`crate::Dir::lookup_sorted`]); names are compared page by page, not
    /// copied. The entry found is copied into `buf` as by [`Dir::entry`].
    pub fn lookup_sorted(&self, name: &[u8], buf: &mut [u8; NAME_MAX]) -> Result<Option<Entry>> {
        let (mut lo, mut hi) = (0u32, self.entries.count);
        while lo < hi {
            let mid = crate::mid(lo, hi);
            match self.entry_name(mid)?.cmp_slice(name)? {
                Ordering::Equal => return self.entry(mid, buf).map(Some),
                Ordering::Less => lo = mid.checked_add(1).ok_or(Error::Overflow)?,
                Ordering::Greater => hi = mid,
            }
        }
        Ok(None)
    }

    /// [`Dir::lookup_sorted`], then a linear scan when it misses (see
    /// [`crate::Dir::lookup`]).
    pub fn lookup(&self, name: &[u8], buf: &mut [u8; NAME_MAX]) -> Result<Option<Entry>> {
        if let Some(e) = self.lookup_sorted(name, buf)? {
            return Ok(Some(e));
        }
        for index in 0..self.entries.count {
            if self.entry_name(index)?.eq_slice(name)? {
                return self.entry(index, buf).map(Some);
            }
        }
        Ok(None)
    }

    /// Whether names are strictly ascending by bytes (O(n)).
    pub fn is_sorted(&self) -> Result<bool> {
        let mut prev: Option<Bytes<'b, 'p, P>> = None;
        for index in 0..self.entries.count {
            let name = self.entry_name(index)?;
            if let Some(p) = prev {
                if p.cmp_bytes(&name)? != Ordering::Less {
                    return Ok(false);
                }
            }
            prev = Some(name);
        }
        Ok(true)
    }
}

/// A regular file's chunk list, read through pages.
pub struct File<'b, 'p, P: Pages + ?Sized> {
    blob: &'b Blob<'p, P>,
    ino: u64,
    chunks: ListR,
}

copy_view!(File);

/// Where a regular file's chunk list is in its blob (plain data, from
/// [`File::place`]): kept, it makes the file's [`File`] again
/// ([`Blob::file_at`]) without finding the inode and its chunk list.
#[derive(Clone, Copy, Debug)]
pub struct FilePlace {
    ino: u64,
    chunks: ListR,
}

impl<'b, 'p, P: Pages + ?Sized> File<'b, 'p, P> {
    /// Where this file's chunk list is.
    pub fn place(&self) -> FilePlace {
        FilePlace {
            ino: self.ino,
            chunks: self.chunks,
        }
    }
}

impl<P: Pages + ?Sized> File<'_, '_, P> {
    /// Inode number of the file.
    pub fn ino(&self) -> u64 {
        self.ino
    }

    /// Number of chunks.
    pub fn chunk_count(&self) -> u32 {
        self.chunks.count
    }

    /// Chunk `i`; `blob.offset + len` is checked not to overflow.
    pub fn chunk(&self, i: u32) -> Result<Chunk> {
        let c = self.blob.element(&self.chunks, i)?;
        let b = self.blob.read_struct(c.ptr(0))?;
        let digest = self.blob.read_data(b.ptr(0))?;
        let mut d: Digest = [0; DIGEST_LEN];
        if digest.len() as usize != DIGEST_LEN {
            return Err(Error::Corrupt {
                what: "digest is not 32 bytes",
            });
        }
        digest.copy_to(&mut d)?;
        Chunk {
            blob: BlobRef {
                digest: d,
                offset: self.blob.u64_field(&b, 0)?,
                compressed: self.blob.bool_field(&b, 64)?,
            },
            len: self.blob.u64_field(&c, 0)?,
        }
        .checked()
    }

    /// Length of chunk `i`, its blob reference not read.
    pub fn chunk_len(&self, i: u32) -> Result<u64> {
        let c = self.blob.element(&self.chunks, i)?;
        self.blob.u64_field(&c, 0)
    }

    /// File size (see [`crate::File::size`]).
    pub fn size(&self) -> Result<u64> {
        self.for_each_chunk(|_, _, _| Ok(()))
    }

    /// Calls `f(i, start, len)` for every chunk in order and returns the
    /// file size (see [`crate::File::for_each_chunk`]).
    pub fn for_each_chunk(&self, mut f: impl FnMut(u32, u64, u64) -> Result<()>) -> Result<u64> {
        let mut total: u64 = 0;
        for i in 0..self.chunks.count {
            let len = self.chunk_len(i)?;
            f(i, total, len)?;
            total = total.checked_add(len).ok_or(Error::Overflow)?;
            if total > MAX_FILE_SIZE {
                return Err(Error::Overflow);
            }
        }
        Ok(total)
    }
}

impl<P: Pages + ?Sized> crate::ChunkList for File<'_, '_, P> {
    fn chunk_count(&self) -> u32 {
        File::chunk_count(self)
    }

    fn chunk(&self, i: u32) -> Result<Chunk> {
        File::chunk(self, i)
    }
}
