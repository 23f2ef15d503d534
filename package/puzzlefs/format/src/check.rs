//! A full consistency walk over an image's layers, without allocation:
//! every inode of every layer is decoded, every directory entry resolved
//! and looked up by name, every file sized and mapped. Used by the fuzz
//! target and the tests; a mount-time `check` option could use it too.

use crate::{find_inode, ChunkList, Error, InodeKind, Layer, Result};

/// What [`check_layers`] saw.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CheckStats {
    /// Inodes decoded (all layers).
    pub inodes: u64,
    /// Directory entries resolved.
    pub entries: u64,
    /// File pieces mapped.
    pub pieces: u64,
    /// Sum of the sizes of the files of all layers.
    pub bytes: u64,
}

/// Decodes everything reachable from `layers` (top first). Stops at the
/// first error. Directory entries that point at a whiteout or at no inode
/// are accepted (the first is how deletions look, the second is left to
/// readers to report when they meet it); everything else malformed is an
/// error.
pub fn check_layers(layers: &[Layer<'_>]) -> Result<CheckStats> {
    let mut st = CheckStats::default();
    for layer in layers {
        let mut prev: Option<u64> = None;
        for (idx, inode) in (0u32..).zip(layer.inodes()) {
            st.inodes = st.inodes.saturating_add(1);
            let ino = inode.ino();
            if prev.is_some_and(|p| p >= ino) {
                return Err(Error::Corrupt {
                    what: "inodes not sorted by number",
                });
            }
            prev = Some(ino);
            // Readers keep an inode's position (find_pos, then inode_at).
            match layer.find_pos(ino)? {
                Some((pos, found)) if pos == idx && found.ino() == ino => {}
                _ => {
                    return Err(Error::Corrupt {
                        what: "inode not found at its position",
                    })
                }
            }
            let kind = inode.kind()?;
            inode.mode()?;
            inode.rdev()?;
            for x in inode.xattrs()? {
                x?;
            }
            let target = inode.symlink_target()?;
            if kind == InodeKind::Lnk && target.is_none() {
                return Err(Error::Corrupt {
                    what: "symlink without target",
                });
            }
            match kind {
                InodeKind::Dir => {
                    let dir = inode.dir()?;
                    for e in dir.entries() {
                        let e = e?;
                        st.entries = st.entries.saturating_add(1);
                        match find_inode(layers.iter().copied(), e.ino) {
                            Ok(child) => {
                                child.kind()?;
                            }
                            Err(Error::Whiteout(_) | Error::InodeNotFound(_)) => {}
                            Err(err) => return Err(err),
                        }
                        if dir.lookup(e.name)?.is_none() {
                            return Err(Error::Corrupt {
                                what: "directory entry not found by its own name",
                            });
                        }
                    }
                }
                InodeKind::File => {
                    let file = inode.file()?;
                    let size = file.size()?;
                    st.bytes = st.bytes.saturating_add(size);
                    let mut expect = 0u64;
                    for p in file.map(0, size)? {
                        let p = p?;
                        if p.file_offset != expect || p.len == 0 {
                            return Err(Error::Corrupt {
                                what: "file pieces do not tile the file",
                            });
                        }
                        p.blob_end()?;
                        expect = expect.checked_add(p.len).ok_or(Error::Overflow)?;
                        st.pieces = st.pieces.saturating_add(1);
                    }
                    if expect != size {
                        return Err(Error::Corrupt {
                            what: "file pieces do not add up to its size",
                        });
                    }
                    // The chunk-start index readers build: the walk sums as size() does,
                    // and mapping from the last indexed chunk at or before an offset
                    // gives the pieces mapping from chunk 0 gives.
                    let mid = size / 2;
                    let mut from = (0u32, 0u64);
                    let walked = file.for_each_chunk(|i, start, _| {
                        if i % 16 == 0 && start <= mid {
                            from = (i, start);
                        }
                        Ok(())
                    })?;
                    if walked != size {
                        return Err(Error::Corrupt {
                            what: "chunk walk and file size differ",
                        });
                    }
                    if !file
                        .map(mid, 70_000)?
                        .eq(file.map_from(from.0, from.1, mid, 70_000)?)
                    {
                        return Err(Error::Corrupt {
                            what: "mapping from a chunk index differs",
                        });
                    }
                    // A range in the middle, resumed from a hint.
                    let mut hint = (0u32, 0u64);
                    for p in file.map(mid, 1 << 20)? {
                        let p = p?;
                        hint = (p.chunk_index, p.chunk_file_offset);
                    }
                    for p in file.map_from(hint.0, hint.1, mid, 4096)? {
                        p?;
                    }
                }
                _ => {}
            }
        }
    }
    Ok(st)
}
