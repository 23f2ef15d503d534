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

impl HexDigest<'_> {
    /// The 64 lowercase hex digits, as bytes: for names built without the formatting
    /// machinery (the kernel driver builds a blob path at each blob it opens).
    pub fn digits(&self) -> [u8; 2 * DIGEST_LEN] {
        // `n` is a nibble (0..=15): always found.
        fn digit(n: u8) -> u8 {
            b"0123456789abcdef"
                .get(usize::from(n))
                .copied()
                .unwrap_or(b'?')
        }
        let mut out = [0u8; 2 * DIGEST_LEN];
        for (pair, byte) in out.chunks_exact_mut(2).zip(self.0.iter()) {
            if let [hi, lo] = pair {
                *hi = digit(byte >> 4);
                *lo = digit(byte & 0xf);
            }
        }
        out
    }
}

impl fmt::Display for HexDigest<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let digits = self.digits();
        f.write_str(core::str::from_utf8(&digits).map_err(|_| fmt::Error)?)
    }
}

impl fmt::Debug for HexDigest<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::string::ToString;

    #[test]
    fn hex_round_trip() {
        let hex = b"4c76052ab5321d55d2a76edd5ef4832cd3ce837eebf92ce8c3b30b4bb3729538";
        let d = parse_hex_digest(hex);
        assert!(matches!(d, Ok(d) if d[0] == 0x4c && d[31] == 0x38));
        if let Ok(d) = d {
            assert_eq!(HexDigest(&d).to_string().as_bytes(), &hex[..]);
        }
        let upper = b"4C76052AB5321D55D2A76EDD5EF4832CD3CE837EEBF92CE8C3B30B4BB3729538";
        assert_eq!(parse_hex_digest(upper), d);
    }

    #[test]
    fn hex_digits_are_each_byte_in_lowercase_hex() {
        let mut d = [0u8; DIGEST_LEN];
        for (i, b) in d.iter_mut().enumerate() {
            *b = (i as u8).wrapping_mul(37).wrapping_add(200);
        }
        let expected: std::string::String = d.iter().map(|b| std::format!("{b:02x}")).collect();
        assert_eq!(&HexDigest(&d).digits()[..], expected.as_bytes());
        assert_eq!(HexDigest(&d).to_string(), expected);
        assert_eq!(
            &HexDigest(&[0xff; DIGEST_LEN]).digits()[..],
            &[b'f'; 64][..]
        );
    }

    #[test]
    fn hex_rejects_bad_input() {
        assert!(parse_hex_digest(b"").is_err());
        assert!(parse_hex_digest(&[b'0'; 63]).is_err());
        assert!(parse_hex_digest(&[b'0'; 65]).is_err());
        let mut bad = [b'0'; 64];
        bad[10] = b'g';
        assert!(parse_hex_digest(&bad).is_err());
        assert!(digest_from(&[0u8; 31]).is_err());
        assert!(digest_from(&[0u8; 32]).is_ok());
    }

    #[test]
    fn midpoint_never_overflows() {
        assert_eq!(crate::mid(0, 0), 0);
        assert_eq!(crate::mid(0, 1), 0);
        assert_eq!(crate::mid(u32::MAX - 1, u32::MAX), u32::MAX - 1);
        assert_eq!(crate::mid(10, 20), 15);
    }
}
