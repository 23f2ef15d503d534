//! The few system calls std does not wrap: xattrs, mknod, lchown, device
//! numbers. Every `unsafe` block passes NUL-terminated paths and buffers it
//! owns, with their true lengths.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// A libc call's 0-or-minus-1 result as an `io::Result` (errno on failure).
fn check(r: libc::c_int) -> io::Result<()> {
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn cpath(p: &Path) -> io::Result<CString> {
    CString::new(p.as_os_str().as_bytes()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
}

/// Names of the xattrs of `path` (not following symlinks), sorted by bytes.
pub fn list_xattrs(path: &Path) -> io::Result<Vec<Vec<u8>>> {
    let c = cpath(path)?;
    let mut buf = vec![0u8; 1024];
    loop {
        // SAFETY: `c` is NUL-terminated; `buf` is writable for `buf.len()` bytes.
        let n = unsafe { libc::llistxattr(c.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
        if n >= 0 {
            buf.truncate(n as usize);
            break;
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::ERANGE) => buf.resize(buf.len() * 4, 0),
            Some(libc::ENOTSUP) => return Ok(Vec::new()),
            _ => return Err(e),
        }
    }
    let mut names: Vec<Vec<u8>> = buf
        .split(|&b| b == 0)
        .filter(|n| !n.is_empty())
        .map(<[u8]>::to_vec)
        .collect();
    names.sort();
    Ok(names)
}

/// Value of xattr `name` of `path` (not following symlinks).
pub fn get_xattr(path: &Path, name: &[u8]) -> io::Result<Vec<u8>> {
    let c = cpath(path)?;
    let n = CString::new(name).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    let mut buf = vec![0u8; 256];
    loop {
        // SAFETY: `c`, `n` are NUL-terminated; `buf` is writable for its length.
        let r =
            unsafe { libc::lgetxattr(c.as_ptr(), n.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
        if r >= 0 {
            buf.truncate(r as usize);
            return Ok(buf);
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::ERANGE) && buf.len() < (1 << 20) {
            buf.resize(buf.len() * 8, 0);
            continue;
        }
        return Err(e);
    }
}

/// Sets xattr `name` of `path` (not following symlinks).
pub fn set_xattr(path: &Path, name: &[u8], value: &[u8]) -> io::Result<()> {
    let c = cpath(path)?;
    let n = CString::new(name).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: `c`, `n` are NUL-terminated; `value` is readable for its length.
    let r = unsafe {
        libc::lsetxattr(
            c.as_ptr(),
            n.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            0,
        )
    };
    check(r)
}

/// Sets xattr `name` of an open file.
pub fn fset_xattr(file: &std::fs::File, name: &[u8], value: &[u8]) -> io::Result<()> {
    use std::os::unix::io::AsRawFd;
    let n = CString::new(name).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: the fd is open for the call; `n` is NUL-terminated; `value`
    // is readable for its length.
    let r = unsafe {
        libc::fsetxattr(
            file.as_raw_fd(),
            n.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            0,
        )
    };
    check(r)
}

/// mknod(2).
pub fn mknod(path: &Path, mode: u32, rdev: u64) -> io::Result<()> {
    let c = cpath(path)?;
    // SAFETY: `c` is NUL-terminated.
    check(unsafe { libc::mknod(c.as_ptr(), mode as libc::mode_t, rdev as libc::dev_t) })
}

/// lchown(2).
pub fn lchown(path: &Path, uid: u32, gid: u32) -> io::Result<()> {
    std::os::unix::fs::lchown(path, Some(uid), Some(gid))
}

/// Whether the process runs as root.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Major number of a Linux `dev_t`.
pub fn major(dev: u64) -> u64 {
    ((dev >> 32) & 0xffff_f000) | ((dev >> 8) & 0xfff)
}

/// Minor number of a Linux `dev_t`.
pub fn minor(dev: u64) -> u64 {
    ((dev >> 12) & 0xffff_ff00) | (dev & 0xff)
}

/// Linux `dev_t` from major and minor.
pub fn makedev(major: u64, minor: u64) -> u64 {
    ((major & 0xffff_f000) << 32)
        | ((major & 0xfff) << 8)
        | ((minor & 0xffff_ff00) << 12)
        | (minor & 0xff)
}
