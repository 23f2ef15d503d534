// SPDX-License-Identifier: GPL-2.0

//! Metadata blobs, read through `puzzlefs_format::paged`.
//!
//! The blobs are read whole at mount and checked against their sha256 (the name the manifest
//! gives them); operations then decode only the words they need, through a page source
//! ([`Pages`]) over the bytes in memory.

#![forbid(unsafe_code)]

use core::ops::Deref;
use kernel::prelude::*;
use puzzlefs_format::paged::{self, Pages};

/// One metadata blob.
pub(crate) enum Metadata {
    /// Read whole at mount and checked against its sha256 (kvmalloc'ed, for as long as the
    /// image is mounted).
    Mem(KVVec<u8>),
}

impl Metadata {
    /// Size of the blob in bytes.
    pub(crate) fn size(&self) -> u64 {
        Pages::len(self)
    }
}

/// A page of a [`Metadata`] blob.
pub(crate) enum Page<'a> {
    Mem(&'a [u8]),
}

impl Deref for Page<'_> {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            Page::Mem(bytes) => bytes,
        }
    }
}

impl Pages for Metadata {
    type Page<'a> = Page<'a>;

    fn len(&self) -> u64 {
        match self {
            Metadata::Mem(bytes) => bytes.len() as u64,
        }
    }

    fn page(&self, index: u64) -> puzzlefs_format::Result<Page<'_>> {
        match self {
            Metadata::Mem(bytes) => <[u8] as Pages>::page(bytes.as_slice(), index).map(Page::Mem),
        }
    }
}

/// The views of the metadata the driver uses.
pub(crate) type Blob<'p> = paged::Blob<'p, Metadata>;
pub(crate) type Layer<'b, 'p> = paged::Layer<'b, 'p, Metadata>;
pub(crate) type Inode<'b, 'p> = paged::Inode<'b, 'p, Metadata>;
pub(crate) type Dir<'b, 'p> = paged::Dir<'b, 'p, Metadata>;
pub(crate) type Bytes<'b, 'p> = paged::Bytes<'b, 'p, Metadata>;
