//! sha256 digests: the names of blobs.

use core::fmt;

use crate::{Error, Result};

/// Length of a sha256 digest in bytes.
pub const DIGEST_LEN: usize = 32;

/// A sha256 digest (blob name).
pub type Digest = [u8; DIGEST_LEN];

/// Converts a Cap'n Proto `Data` field into a digest.
pub(crate) fn digest_from(data: &[u8]) -> Result<Digest> {
    data.try_into().map_err(|_| Error::Corrupt {
        what: "digest is not 32 bytes",
    })
}

fn nibble(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => c.checked_sub(b'0'),
        b'a'..=b'f' => c.checked_sub(b'a' - 10),
        b'A'..=b'F' => c.checked_sub(b'A' - 10),
        _ => None,
    }
}

/// Parses 64 hex digits (the `image_manifest=` mount option) into a digest.
pub fn parse_hex_digest(hex: &[u8]) -> Result<Digest> {
    let mut out = [0u8; DIGEST_LEN];
    if hex.len() != DIGEST_LEN * 2 {
        return Err(Error::Corrupt {
            what: "hex digest is not 64 digits",
        });
    }
    for (byte, pair) in out.iter_mut().zip(hex.chunks_exact(2)) {
        let (hi, lo) = match pair {
            [hi, lo] => (nibble(*hi), nibble(*lo)),
            _ => (None, None),
        };
        match (hi, lo) {
            (Some(hi), Some(lo)) => *byte = (hi << 4) | lo,
            _ => {
                return Err(Error::Corrupt {
                    what: "hex digest has a non-hex digit",
                })
            }
        }
    }
    Ok(out)
}

/// Displays a digest as 64 lowercase hex digits (no allocation).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct HexDigest<'a>(pub &'a Digest);

impl fmt::Display for HexDigest<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for HexDigest<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}
