//! The library's error type. Each message names what failed (a path, a
//! blob digest, an inode) and leaves the cause to the chain
//! (`std::error::Error::source`), so that `{:#}` (anyhow, in main) prints
//! every part once: `<what>: <cause>: ...`.

use std::io;
use std::path::PathBuf;

use puzzlefs_format::Error as FmtError;

use crate::oci::OciError;

/// Errors of the `puzzlefs` library (build, extract, inspect, gc and image
/// reading; `enable-fs-verity` and `mount` have their own, and the OCI layer
/// has [`OciError`]).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The OCI directory (index, blobs, locks).
    #[error(transparent)]
    Oci(#[from] OciError),
    /// An I/O error on a path.
    #[error("{}", path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// The cause.
        source: io::Error,
    },
    /// An I/O error of an operation on a path (`chown`, `listing xattrs`).
    #[error("{}: {op}", path.display())]
    IoOp {
        /// The path.
        path: PathBuf,
        /// What was being done.
        op: String,
        /// The cause.
        source: io::Error,
    },
    /// Image data that does not parse; `at` says where (a manifest or blob
    /// digest, an inode, a path).
    #[error("{at}")]
    Format {
        /// Where.
        at: String,
        /// The format error.
        source: FmtError,
    },
    /// A delta build on a base that has [`puzzlefs_format::MAX_LAYERS`]
    /// metadata layers already: the image would not mount.
    #[error(
        "base layer {base:?} has {layers} metadata layers: a delta on it would have {}, \
         more than the {max} a mount accepts",
        layers + 1,
        max = puzzlefs_format::MAX_LAYERS
    )]
    TooManyLayers {
        /// The base tag.
        base: String,
        /// Its number of metadata layers.
        layers: usize,
    },
    /// A manifest names a metadata layer this tool cannot read.
    #[error("metadata blob {blob}: compressed or offset metadata is not supported")]
    MetadataRef {
        /// The blob (hex).
        blob: String,
    },
    /// A compressed chunk blob that does not decompress.
    #[error("blob {blob}: bad zstd data")]
    Zstd {
        /// The blob (hex).
        blob: String,
        /// The decoder's error.
        source: io::Error,
    },
    /// A compressed chunk blob larger than [`crate::image::MAX_DECOMPRESSED`]
    /// once decompressed.
    #[error("blob {blob}: decompresses to more than 64 MiB")]
    TooLarge {
        /// The blob (hex).
        blob: String,
    },
    /// A piece of a file that lies past the end of its chunk.
    #[error(
        "inode {ino}: chunk range {offset}+{len} past the end of blob {blob} ({blob_len} bytes)"
    )]
    ChunkRange {
        /// The file's inode.
        ino: u64,
        /// Offset in the decompressed blob.
        offset: u64,
        /// Length of the piece.
        len: u64,
        /// The blob (hex).
        blob: String,
        /// Decompressed blob length.
        blob_len: usize,
    },
    /// A file whose pieces do not cover its size.
    #[error("inode {ino}: mapped {done} of {size} bytes")]
    ShortFile {
        /// The file's inode.
        ino: u64,
        /// Bytes the pieces cover.
        done: u64,
        /// The file's size.
        size: u64,
    },
    /// The image's root inode is not a directory.
    #[error("root inode is not a directory")]
    RootNotDir,
    /// A directory reached twice in a walk of the tree.
    #[error("{path}: directory inode {ino} reached twice (cycle or hard-linked directory)")]
    DirCycle {
        /// Its path in the image.
        path: String,
        /// Its inode.
        ino: u64,
    },
    /// A symlink inode with no target.
    #[error("{}: symlink without target", path.display())]
    NoTarget {
        /// Where it was being extracted.
        path: PathBuf,
    },
    /// A source file is no longer the regular file the scan saw (swapped
    /// for another file, a fifo or a symlink during the build).
    #[error("{}: replaced by another file during the build", path.display())]
    Replaced {
        /// The source path.
        path: PathBuf,
    },
    /// A source file changed size while the build read it.
    #[error("{}: file changed size while being read (was {size} bytes)", path.display())]
    SizeChanged {
        /// The source path.
        path: PathBuf,
        /// Its size at the scan.
        size: u64,
    },
    /// The build stopped reading after an error reported elsewhere.
    #[error("stopped after another error")]
    Aborted,
    /// The zstd encoder failed.
    #[error("zstd")]
    Compress(#[source] io::Error),
    /// Writing file data to the caller's writer failed.
    #[error("writing file data")]
    Write(#[source] io::Error),
    /// A path given as a directory is not one.
    #[error("{}: not a directory", path.display())]
    NotADirectory {
        /// The path.
        path: PathBuf,
    },
    /// `extract` into a directory that has entries.
    #[error("{}: destination exists and is not empty", path.display())]
    NotEmpty {
        /// The destination.
        path: PathBuf,
    },
    /// A source name longer than the format allows.
    #[error("{}: name cannot be stored in the image", path.display())]
    NameTooLong {
        /// The source path.
        path: PathBuf,
    },
    /// A source directory with more entries than a listing can hold.
    #[error("{}: too many entries", path.display())]
    TooManyEntries {
        /// The directory.
        path: PathBuf,
    },
    /// A source tree of more than 2^32 inodes.
    #[error("more than 2^32 inodes")]
    TooManyInodes,
    /// A bad digest string in index.json.
    #[error("index.json: bad digest {0:?}")]
    BadDigest(String),
    /// What was being done when `source` failed (a tag, a manifest, a blob).
    #[error("{what}")]
    Context {
        /// What.
        what: String,
        /// The error.
        source: Box<Error>,
    },
    /// A broken invariant of this crate (a bug, not bad input).
    #[error("internal: {0}")]
    Internal(&'static str),
}

/// The library's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Names where a format error was met.
pub(crate) fn fmt_at(at: impl std::fmt::Display) -> impl FnOnce(FmtError) -> Error {
    move |source| Error::Format {
        at: at.to_string(),
        source,
    }
}

/// Names the path of an I/O error.
pub(crate) fn io_at(path: impl Into<PathBuf>) -> impl FnOnce(io::Error) -> Error {
    move |source| Error::Io {
        path: path.into(),
        source,
    }
}

/// Names the path and operation of an I/O error.
pub(crate) fn io_op(
    path: impl Into<PathBuf>,
    op: impl Into<String>,
) -> impl FnOnce(io::Error) -> Error {
    move |source| Error::IoOp {
        path: path.into(),
        op: op.into(),
        source,
    }
}

/// Adds what was being done to an error.
pub(crate) trait Context<T> {
    /// Wraps the error with `what()`.
    fn context_with(self, what: impl FnOnce() -> String) -> Result<T>;
}

impl<T, E: Into<Error>> Context<T> for std::result::Result<T, E> {
    fn context_with(self, what: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|e| Error::Context {
            what: what(),
            source: Box::new(e.into()),
        })
    }
}
