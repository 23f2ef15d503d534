//! Metadata layers (`InodeVector`) and inode lookup across layers.

use capnp::serialize::NoAllocBufferSegments;

use crate::metadata_capnp::{inode, inode_vector};
use crate::{Error, Inode, InodeKind, Result};

/// A parsed metadata blob. Holds the message's read budget (see the crate
/// docs); cheap to create. [`MetadataBlob::layer`] gives the view to read it.
pub struct MetadataBlob<'a> {
    msg: capnp::message::Reader<NoAllocBufferSegments<&'a [u8]>>,
}

impl<'a> MetadataBlob<'a> {
    /// Parses a metadata blob. `buf` must be 8-byte aligned.
    pub fn parse(buf: &'a [u8]) -> Result<Self> {
        Ok(MetadataBlob {
            msg: crate::read_message(buf)?,
        })
    }

    /// The inode list of this blob.
    pub fn layer(&self) -> Result<Layer<'_>> {
        let root = self.msg.get_root::<inode_vector::Reader<'_>>()?;
        Ok(Layer {
            inodes: root.get_inodes()?,
        })
    }
}

/// A view of one metadata layer: its inodes, sorted by inode number.
#[derive(Clone, Copy)]
pub struct Layer<'m> {
    inodes: capnp::struct_list::Reader<'m, inode::Owned>,
}

impl<'m> Layer<'m> {
    /// Number of inodes in the layer.
    pub fn len(&self) -> u32 {
        self.inodes.len()
    }

    /// Whether the layer holds no inode.
    pub fn is_empty(&self) -> bool {
        self.inodes.len() == 0
    }

    /// The inode at position `idx` (not inode number) in the layer.
    pub fn inode_at(&self, idx: u32) -> Result<Inode<'m>> {
        self.inodes
            .try_get(idx)
            .map(Inode::new)
            .ok_or(Error::Bounds)
    }

    /// All inodes of the layer in stored order (whiteouts included).
    pub fn inodes(&self) -> Inodes<'m> {
        Inodes {
            layer: *self,
            pos: 0,
        }
    }

    /// Binary search for `ino` in this layer only. Returns the inode even
    /// when it is a whiteout. If the layer is not sorted the answer may be a
    /// false "absent" but never a wrong inode.
    pub fn find(&self, ino: u64) -> Result<Option<Inode<'m>>> {
        Ok(self.find_pos(ino)?.map(|(_, inode)| inode))
    }

    /// [`Layer::find`], also returning the position of the inode in the layer
    /// (for [`Layer::inode_at`], so that a reader can keep where an inode is).
    pub fn find_pos(&self, ino: u64) -> Result<Option<(u32, Inode<'m>)>> {
        Ok(self.search(ino)?.0)
    }

    /// Binary search: the inode and its position if the layer holds `ino`,
    /// and the position of the first inode numbered `ino` or more.
    fn search(&self, ino: u64) -> Result<(Option<(u32, Inode<'m>)>, u32)> {
        // The builders number a layer's inodes one after the other from its first (the base
        // layer from 1, with a few gaps): the search starts where `ino` is if there are none.
        let Some(first) = self.inodes.try_get(0).map(|r| r.get_ino()) else {
            return Ok((None, 0));
        };
        crate::search_from_first(self.inodes.len(), ino, first, |i| {
            let inode = self.inode_at(i)?;
            Ok((inode.ino(), inode))
        })
    }

    /// [`Layer::find_pos`] for a caller that looks up runs of consecutive
    /// inode numbers, such as the entries of a directory (which the builders
    /// number one after the other): `hint` is where the search for the
    /// previous number ended. If the inode just before `hint` is numbered
    /// below `ino`, the one at `hint` decides (`ino` or, numbered above, not
    /// in the layer): one or two reads instead of a binary search. Otherwise
    /// it is a binary search. `hint` is then left past the inode found, or
    /// where `ino` would be. In a sorted layer any `hint` gives the answer
    /// [`Layer::find_pos`] gives; in one that is not, either may miss an
    /// inode, and neither ever gives another one.
    pub fn find_pos_hinted(&self, ino: u64, hint: &mut u32) -> Result<Option<(u32, Inode<'m>)>> {
        let at = *hint;
        let before = match at.checked_sub(1) {
            None => Some(true),
            Some(prev) => self.inodes.try_get(prev).map(|r| r.get_ino() < ino),
        };
        if before == Some(true) {
            match self.inodes.try_get(at) {
                Some(r) if r.get_ino() == ino => {
                    *hint = at.saturating_add(1);
                    return Ok(Some((at, Inode::new(r))));
                }
                Some(r) if r.get_ino() > ino => return Ok(None),
                None if at == self.inodes.len() => return Ok(None),
                _ => {}
            }
        }
        let (found, lower) = self.search(ino)?;
        *hint = match found {
            Some((pos, _)) => pos.saturating_add(1),
            None => lower,
        };
        Ok(found)
    }

    /// Whether inode numbers are strictly ascending (O(n)).
    pub fn is_sorted(&self) -> bool {
        let mut prev: Option<u64> = None;
        for i in self.inodes.iter() {
            let ino = i.get_ino();
            if prev.is_some_and(|p| p >= ino) {
                return false;
            }
            prev = Some(ino);
        }
        true
    }

    /// Largest inode number in the layer (the last one, layers being sorted).
    pub fn max_ino(&self) -> Option<u64> {
        let last = self.inodes.len().checked_sub(1)?;
        self.inodes.try_get(last).map(|r| r.get_ino())
    }
}

/// Iterator over the inodes of a layer.
pub struct Inodes<'m> {
    layer: Layer<'m>,
    pos: u32,
}

impl<'m> Iterator for Inodes<'m> {
    type Item = Inode<'m>;
    fn next(&mut self) -> Option<Self::Item> {
        let r = self.layer.inodes.try_get(self.pos)?;
        self.pos = self.pos.saturating_add(1);
        Some(Inode::new(r))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.layer.len().saturating_sub(self.pos) as usize;
        (left, Some(left))
    }
}

/// Finds inode `ino` in an ordered list of layers (top first): the first
/// layer that holds it wins; a whiteout there answers [`Error::Whiteout`],
/// no layer holding it [`Error::InodeNotFound`].
///
/// `layers` is anything that yields [`Layer`] views the caller owns, e.g.
/// `layers.iter().copied()` for a slice.
pub fn find_inode<'m, I>(layers: I, ino: u64) -> Result<Inode<'m>>
where
    I: IntoIterator<Item = Layer<'m>>,
{
    find_inode_hinted(layers, ino, &mut [])
}

/// [`find_inode`] with a hint per layer (see [`Layer::find_pos_hinted`]):
/// `hints[i]` is layer `i`'s, for a caller that looks up runs of consecutive
/// inode numbers. A layer past the end of `hints` is searched without one.
pub fn find_inode_hinted<'m, I>(layers: I, ino: u64, hints: &mut [u32]) -> Result<Inode<'m>>
where
    I: IntoIterator<Item = Layer<'m>>,
{
    find_across(layers, ino, hints)
}

/// A layer view inodes are found in: [`Layer`] and [`crate::paged::Layer`].
pub(crate) trait FindIn {
    /// The layer's inode view.
    type Inode;
    /// [`Layer::find_pos_hinted`] with `hint`, [`Layer::find`] without.
    fn find_with(&self, ino: u64, hint: Option<&mut u32>) -> Result<Option<Self::Inode>>;
    /// The kind of `inode`.
    fn kind_of(inode: &Self::Inode) -> Result<InodeKind>;
}

impl<'m> FindIn for Layer<'m> {
    type Inode = Inode<'m>;

    fn find_with(&self, ino: u64, hint: Option<&mut u32>) -> Result<Option<Inode<'m>>> {
        match hint {
            Some(hint) => Ok(self.find_pos_hinted(ino, hint)?.map(|(_, inode)| inode)),
            None => self.find(ino),
        }
    }

    fn kind_of(inode: &Inode<'m>) -> Result<InodeKind> {
        inode.kind()
    }
}

/// [`find_inode_hinted`] over any layer views: the first layer that holds
/// `ino` wins, a whiteout there is [`Error::Whiteout`].
pub(crate) fn find_across<L, I>(layers: I, ino: u64, hints: &mut [u32]) -> Result<L::Inode>
where
    L: FindIn,
    I: IntoIterator<Item = L>,
{
    let mut hints = hints.iter_mut();
    for layer in layers {
        if let Some(inode) = layer.find_with(ino, hints.next())? {
            if L::kind_of(&inode)? == InodeKind::Wht {
                return Err(Error::Whiteout(ino));
            }
            return Ok(inode);
        }
    }
    Err(Error::InodeNotFound(ino))
}

/// [`find_inode`] over parsed metadata blobs, top layer first.
pub fn find_inode_in<'m>(blobs: &'m [MetadataBlob<'_>], ino: u64) -> Result<Inode<'m>> {
    for blob in blobs {
        if let Some(inode) = blob.layer()?.find(ino)? {
            if inode.kind()? == InodeKind::Wht {
                return Err(Error::Whiteout(ino));
            }
            return Ok(inode);
        }
    }
    Err(Error::InodeNotFound(ino))
}
