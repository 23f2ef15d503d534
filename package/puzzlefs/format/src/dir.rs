//! Directories: sorted (name, ino) entries.

use core::cmp::Ordering;

use crate::metadata_capnp::{dir, dir_entry};
use crate::{Error, Result};

/// Longest name a directory entry may have (Linux `NAME_MAX`).
pub const NAME_MAX: usize = 255;

/// A view of a directory's entries (no `.` or `..`).
#[derive(Clone, Copy)]
pub struct Dir<'m> {
    ino: u64,
    entries: capnp::struct_list::Reader<'m, dir_entry::Owned>,
    look_below: bool,
}

/// One directory entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DirEntry<'m> {
    /// Position of the entry in the directory (for `readdir` cookies).
    pub index: u32,
    /// Entry name: 1..=255 bytes, no `/` or NUL, not `.` or `..`.
    pub name: &'m [u8],
    /// Inode number the entry points to.
    pub ino: u64,
}

impl<'m> Dir<'m> {
    pub(crate) fn new(ino: u64, r: dir::Reader<'m>) -> Result<Self> {
        Ok(Dir {
            ino,
            entries: r.get_entries()?,
            look_below: r.get_look_below(),
        })
    }

    /// Inode number of the directory itself.
    pub fn ino(&self) -> u64 {
        self.ino
    }

    /// The schema's `lookBelow` flag (false in every image written so far).
    pub fn look_below(&self) -> bool {
        self.look_below
    }

    /// Number of entries (whiteout entries included).
    pub fn len(&self) -> u32 {
        self.entries.len()
    }

    /// Whether the directory has no entry.
    pub fn is_empty(&self) -> bool {
        self.entries.len() == 0
    }

    /// Entry number `index`; its name is validated.
    pub fn entry(&self, index: u32) -> Result<DirEntry<'m>> {
        let r = self.entries.try_get(index).ok_or(Error::Bounds)?;
        let name = r.get_name()?;
        check_name(name)?;
        Ok(DirEntry {
            index,
            name,
            ino: r.get_ino(),
        })
    }

    /// Inode number of entry `index`, without validating its name (to tell an
    /// entry with an invalid name, which [`Dir::entry`] refuses, from damage
    /// of the list itself).
    pub fn entry_ino(&self, index: u32) -> Result<u64> {
        let r = self.entries.try_get(index).ok_or(Error::Bounds)?;
        Ok(r.get_ino())
    }

    /// Entries from position `pos` on (for `readdir` resuming at a cookie).
    /// A `pos` past the end yields nothing.
    pub fn entries_from(&self, pos: u32) -> DirEntries<'m> {
        DirEntries { dir: *self, pos }
    }

    /// All entries in stored order.
    pub fn entries(&self) -> DirEntries<'m> {
        self.entries_from(0)
    }

    /// Binary search for `name`, assuming entries sorted by name bytes (as
    /// the format requires). On unsorted data the answer may be a false
    /// "absent", never a wrong entry, and never a panic.
    pub fn lookup_sorted(&self, name: &[u8]) -> Result<Option<DirEntry<'m>>> {
        let (mut lo, mut hi) = (0u32, self.entries.len());
        while lo < hi {
            let mid = crate::mid(lo, hi);
            let r = self.entries.try_get(mid).ok_or(Error::Bounds)?;
            match r.get_name()?.cmp(name) {
                Ordering::Equal => return self.entry(mid).map(Some),
                Ordering::Less => lo = mid.checked_add(1).ok_or(Error::Overflow)?,
                Ordering::Greater => hi = mid,
            }
        }
        Ok(None)
    }

    /// Name of entry `index`, not validated (for sorting and searching; use
    /// [`Dir::entry`] to return an entry).
    pub fn entry_name(&self, index: u32) -> Result<&'m [u8]> {
        let r = self.entries.try_get(index).ok_or(Error::Bounds)?;
        Ok(r.get_name()?)
    }

    /// Looks `name` up: binary search first; when that misses, a linear scan
    /// so that directories written unsorted (some builders list whiteouts
    /// first) still answer correctly. Use [`Dir::is_sorted`] once and then
    /// [`Dir::lookup_sorted`] to keep misses logarithmic.
    pub fn lookup(&self, name: &[u8]) -> Result<Option<DirEntry<'m>>> {
        if let Some(e) = self.lookup_sorted(name)? {
            return Ok(Some(e));
        }
        for (index, r) in (0u32..).zip(self.entries.iter()) {
            if r.get_name()? == name {
                return self.entry(index).map(Some);
            }
        }
        Ok(None)
    }

    /// Whether names are strictly ascending by bytes (O(n)); strictness also
    /// means no duplicate names.
    pub fn is_sorted(&self) -> Result<bool> {
        let mut prev: Option<&[u8]> = None;
        for r in self.entries.iter() {
            let name = r.get_name()?;
            if prev.is_some_and(|p| p >= name) {
                return Ok(false);
            }
            prev = Some(name);
        }
        Ok(true)
    }
}

pub(crate) fn check_name(name: &[u8]) -> Result<()> {
    if name.is_empty()
        || name.len() > NAME_MAX
        || name == b"."
        || name == b".."
        || name.iter().any(|&b| b == b'/' || b == 0)
    {
        return Err(Error::Corrupt {
            what: "invalid directory entry name",
        });
    }
    Ok(())
}

/// Iterator over directory entries.
pub struct DirEntries<'m> {
    dir: Dir<'m>,
    pos: u32,
}

impl<'m> Iterator for DirEntries<'m> {
    type Item = Result<DirEntry<'m>>;
    fn next(&mut self) -> Option<Self::Item> {
        if self.pos >= self.dir.len() {
            return None;
        }
        let e = self.dir.entry(self.pos);
        self.pos = self.pos.saturating_add(1);
        Some(e)
    }
}
