//! The error type of every fallible operation.

use core::fmt;

/// Why reading an image failed. Variants are meant to be mapped to errnos by
/// the kernel driver (suggested mapping in each variant's doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// The Cap'n Proto message could not be decoded, or the read budget or
    /// nesting limit was exceeded (EINVAL / EUCLEAN).
    Capnp(capnp::ErrorKind),
    /// A union discriminant unknown to the schema (EINVAL).
    NotInSchema(u16),
    /// The manifest's version is not [`crate::MANIFEST_VERSION`] (EINVAL).
    BadVersion(u64),
    /// No layer holds this inode (ENOENT).
    InodeNotFound(u64),
    /// The top-most layer holding this inode says it was deleted (ENOENT).
    Whiteout(u64),
    /// The inode is not a directory (ENOTDIR).
    NotADirectory(u64),
    /// The inode is not a regular file (EISDIR / EINVAL).
    NotAFile(u64),
    /// A size or offset computation overflowed, or a value exceeds a limit
    /// (EFBIG / EOVERFLOW).
    Overflow,
    /// An index or byte range is outside the data it refers to (EINVAL / EIO).
    Bounds,
    /// The data is structurally valid Cap'n Proto but violates the format
    /// (EUCLEAN / EIO); `what` names the broken rule.
    Corrupt {
        /// The rule that was broken.
        what: &'static str,
    },
    /// A page of a blob could not be read: the page source
    /// ([`crate::paged::Pages`]) failed, or gave a page shorter than the
    /// blob's length says (EIO).
    Io,
}

/// Result type of this crate.
pub type Result<T> = core::result::Result<T, Error>;

impl From<capnp::Error> for Error {
    fn from(e: capnp::Error) -> Self {
        Error::Capnp(e.kind)
    }
}

impl From<capnp::NotInSchema> for Error {
    fn from(e: capnp::NotInSchema) -> Self {
        Error::NotInSchema(e.0)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Capnp(kind) => write!(f, "malformed Cap'n Proto message: {kind}"),
            Error::NotInSchema(d) => write!(f, "union discriminant {d} not in schema"),
            Error::BadVersion(v) => write!(f, "unsupported manifest version {v}"),
            Error::InodeNotFound(ino) => write!(f, "inode {ino} not found"),
            Error::Whiteout(ino) => write!(f, "inode {ino} is a whiteout"),
            Error::NotADirectory(ino) => write!(f, "inode {ino} is not a directory"),
            Error::NotAFile(ino) => write!(f, "inode {ino} is not a regular file"),
            Error::Overflow => f.write_str("size or offset overflow"),
            Error::Bounds => f.write_str("index or range out of bounds"),
            Error::Corrupt { what } => write!(f, "corrupt image: {what}"),
            Error::Io => f.write_str("a page of the blob could not be read"),
        }
    }
}

// The cause chain ends here: no variant wraps another error (a Cap'n Proto
// error is kept as its kind, already in the message).
impl core::error::Error for Error {}
