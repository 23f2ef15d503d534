//! Inodes: kind, owner, permission bits, device numbers, xattrs, symlink
//! target.

use crate::metadata_capnp::{inode, xattr};
use crate::{Dir, Error, File, Result};

/// Where `Inode.mode`'s discriminant is: its offset in the struct's data
/// section, in 16-bit units, as the schema compiler laid it out (the generated
/// `which()` reads the same field).
const MODE_DISCRIMINANT: usize = 4;

/// The file type of an inode (the `mode` union of the schema).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum InodeKind {
    /// `unknown` in the schema.
    Unknown,
    /// Named pipe.
    Fifo,
    /// Character device.
    Chr,
    /// Directory.
    Dir,
    /// Block device.
    Blk,
    /// Regular file.
    File,
    /// Symbolic link.
    Lnk,
    /// Unix socket.
    Sock,
    /// Whiteout: deleted in this layer.
    Wht,
}

impl InodeKind {
    /// The kind of `mode` union discriminant `d` (the schema's member order).
    pub(crate) fn from_discriminant(d: u16) -> Result<Self> {
        Ok(match d {
            0 => InodeKind::Unknown,
            1 => InodeKind::Fifo,
            2 => InodeKind::Chr,
            3 => InodeKind::Dir,
            4 => InodeKind::Blk,
            5 => InodeKind::File,
            6 => InodeKind::Lnk,
            7 => InodeKind::Sock,
            8 => InodeKind::Wht,
            d => return Err(Error::NotInSchema(d)),
        })
    }

    /// The `S_IFMT` bits of this kind (0 for `Unknown` and `Wht`).
    pub fn file_type_bits(self) -> u32 {
        match self {
            InodeKind::Fifo => 0o010000,
            InodeKind::Chr => 0o020000,
            InodeKind::Dir => 0o040000,
            InodeKind::Blk => 0o060000,
            InodeKind::File => 0o100000,
            InodeKind::Lnk => 0o120000,
            InodeKind::Sock => 0o140000,
            InodeKind::Unknown | InodeKind::Wht => 0,
        }
    }
}

/// Device numbers of a character or block device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Rdev {
    /// Major number.
    pub major: u64,
    /// Minor number.
    pub minor: u64,
}

/// A view of one inode.
#[derive(Clone, Copy)]
pub struct Inode<'m> {
    r: inode::Reader<'m>,
}

impl<'m> Inode<'m> {
    pub(crate) fn new(r: inode::Reader<'m>) -> Self {
        Inode { r }
    }

    /// The generated reader, for fields this view does not expose.
    pub fn raw(&self) -> inode::Reader<'m> {
        self.r
    }

    /// Inode number.
    pub fn ino(&self) -> u64 {
        self.r.get_ino()
    }

    /// Owner user id.
    pub fn uid(&self) -> u32 {
        self.r.get_uid()
    }

    /// Owner group id.
    pub fn gid(&self) -> u32 {
        self.r.get_gid()
    }

    /// The 12 permission bits (rwx for u/g/o, setuid, setgid, sticky);
    /// higher bits of the stored value are ignored.
    pub fn permissions(&self) -> u16 {
        self.r.get_permissions() & 0o7777
    }

    /// The inode's kind. An unknown discriminant is [`Error::NotInSchema`].
    ///
    /// Reads the `mode` union's discriminant only. The generated `which()`
    /// also follows the pointer of a `chr`, `dir`, `blk` or `file` member
    /// (bounds checks, far pointers, the read budget) to hand out its reader,
    /// which this throws away: a directory listing asks the kind of every
    /// entry, and every lookup asks whether the inode found is a whiteout.
    pub fn kind(&self) -> Result<InodeKind> {
        use capnp::traits::IntoInternalStructReader;
        let reader = self.r.into_internal_struct_reader();
        InodeKind::from_discriminant(reader.get_data_field::<u16>(MODE_DISCRIMINANT))
    }

    /// `st_mode`: file type bits and permission bits.
    pub fn mode(&self) -> Result<u32> {
        Ok(self.kind()?.file_type_bits() | u32::from(self.permissions()))
    }

    /// Device numbers for `Chr` and `Blk` inodes, `None` for other kinds.
    pub fn rdev(&self) -> Result<Option<Rdev>> {
        use inode::mode::Which;
        Ok(match self.r.get_mode().which()? {
            Which::Chr(c) => {
                let c = c?;
                Some(Rdev {
                    major: c.get_major(),
                    minor: c.get_minor(),
                })
            }
            Which::Blk(b) => {
                let b = b?;
                Some(Rdev {
                    major: b.get_major(),
                    minor: b.get_minor(),
                })
            }
            _ => None,
        })
    }

    /// The directory view, or [`Error::NotADirectory`].
    pub fn dir(&self) -> Result<Dir<'m>> {
        match self.r.get_mode().which()? {
            inode::mode::Which::Dir(d) => Dir::new(self.ino(), d?),
            _ => Err(Error::NotADirectory(self.ino())),
        }
    }

    /// The regular file view, or [`Error::NotAFile`].
    pub fn file(&self) -> Result<File<'m>> {
        match self.r.get_mode().which()? {
            inode::mode::Which::File(f) => File::new(self.ino(), f?),
            _ => Err(Error::NotAFile(self.ino())),
        }
    }

    /// The extended attributes (possibly none).
    pub fn xattrs(&self) -> Result<Xattrs<'m>> {
        if !self.r.has_additional() {
            return Ok(Xattrs { list: None, pos: 0 });
        }
        let add = self.r.get_additional()?;
        if !add.has_xattrs() {
            return Ok(Xattrs { list: None, pos: 0 });
        }
        Ok(Xattrs {
            list: Some(add.get_xattrs()?),
            pos: 0,
        })
    }

    /// Looks one xattr up by exact key (linear; inodes have few xattrs).
    pub fn xattr(&self, key: &[u8]) -> Result<Option<&'m [u8]>> {
        for x in self.xattrs()? {
            let x = x?;
            if x.key == key {
                return Ok(Some(x.value));
            }
        }
        Ok(None)
    }

    /// The symlink target stored with the inode, if any (set for `Lnk`).
    pub fn symlink_target(&self) -> Result<Option<&'m [u8]>> {
        if !self.r.has_additional() {
            return Ok(None);
        }
        let add = self.r.get_additional()?;
        if !add.has_symlink_target() {
            return Ok(None);
        }
        Ok(Some(add.get_symlink_target()?))
    }
}

impl core::fmt::Debug for Inode<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Inode")
            .field("ino", &self.ino())
            .field("kind", &self.kind())
            .field("uid", &self.uid())
            .field("gid", &self.gid())
            .field("permissions", &self.permissions())
            .finish()
    }
}

/// One extended attribute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Xattr<'m> {
    /// Full name, e.g. `user.comment`.
    pub key: &'m [u8],
    /// Value bytes.
    pub value: &'m [u8],
}

/// Iterator over an inode's xattrs.
pub struct Xattrs<'m> {
    list: Option<capnp::struct_list::Reader<'m, xattr::Owned>>,
    pos: u32,
}

impl Xattrs<'_> {
    /// Number of xattrs (in total, not left to iterate).
    pub fn len(&self) -> u32 {
        self.list.map_or(0, |l| l.len())
    }

    /// Whether the inode has no xattr.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<'m> Iterator for Xattrs<'m> {
    type Item = Result<Xattr<'m>>;
    fn next(&mut self) -> Option<Self::Item> {
        let r = self.list?.try_get(self.pos)?;
        self.pos = self.pos.saturating_add(1);
        Some(xattr_from(r))
    }
}

fn xattr_from(r: xattr::Reader<'_>) -> Result<Xattr<'_>> {
    Ok(Xattr {
        key: r.get_key()?,
        value: r.get_val()?,
    })
}
