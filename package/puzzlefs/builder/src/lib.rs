//! The `puzzlefs` tool as a library: build, extract, inspect and mount
//! PuzzleFS (format v1) images. The on-disk format itself is read by the
//! shared `puzzlefs-format` crate; this crate adds the OCI directory, the
//! builder, decompression and hashing.

pub mod build;
pub mod chunks;
pub mod enable_verity;
pub mod error;
pub mod extract;
pub mod gc;
pub mod image;
pub mod inspect;
pub mod model;
pub mod mount;
pub mod oci;
pub mod progress;
pub mod sys;
pub mod verity;

pub use error::{Error, Result};
pub use puzzlefs_format as format;
