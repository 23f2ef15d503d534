//! Helpers shared by the integration tests: run the real binary, snapshot
//! and compare trees.
#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_puzzlefs"))
}

pub fn run(args: &[&dyn AsRef<std::ffi::OsStr>]) -> Output {
    let mut c = Command::new(bin());
    for a in args {
        c.arg(a.as_ref());
    }
    c.output().expect("running puzzlefs")
}

/// Runs puzzlefs, expects success, returns stdout.
pub fn ok(args: &[&dyn AsRef<std::ffi::OsStr>]) -> String {
    let o = run(args);
    assert!(
        o.status.success(),
        "puzzlefs failed: {}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).expect("utf8 stdout")
}

/// Builds and returns the digest printed.
pub fn build(src: &Path, oci: &Path, tag: &str, extra: &[&str]) -> String {
    let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![&"-q", &"build"];
    for e in extra {
        args.push(e);
    }
    args.push(&src);
    args.push(&oci);
    args.push(&tag);
    let out = ok(&args);
    let d = out.trim().to_owned();
    assert_eq!(d.len(), 64, "digest line: {out:?}");
    d
}

pub fn is_root() -> bool {
    // Tests use the library's own check.
    puzzlefs::sys::is_root()
}

/// What the comparison looks at for one path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub kind: String,
    pub perm: u32,
    pub owner: Option<(u32, u32)>,
    pub data: Option<Vec<u8>>,
    pub target: Option<Vec<u8>>,
    pub rdev: Option<u64>,
    pub xattrs: BTreeMap<Vec<u8>, Vec<u8>>,
    /// Index of the hard-link group (first path's order), for regular files.
    pub link_group: Option<usize>,
}

/// Snapshot of a tree: relative path -> entry. Owners are compared only
/// when `owners` is set (root extracts them).
pub fn snapshot(root: &Path, owners: bool) -> BTreeMap<Vec<u8>, Entry> {
    let mut out = BTreeMap::new();
    let mut groups: HashMap<(u64, u64), usize> = HashMap::new();
    let mut paths: Vec<PathBuf> = walkdir::WalkDir::new(root)
        .sort_by_file_name()
        .into_iter()
        .map(|e| e.expect("walk").path().to_owned())
        .collect();
    paths.sort();
    for p in paths {
        let rel = p
            .strip_prefix(root)
            .expect("prefix")
            .as_os_str()
            .as_bytes()
            .to_vec();
        let m = fs::symlink_metadata(&p).expect("lstat");
        let ft = m.file_type();
        let kind = if ft.is_dir() {
            "dir"
        } else if ft.is_file() {
            "file"
        } else if ft.is_symlink() {
            "lnk"
        } else if ft.is_fifo() {
            "fifo"
        } else if ft.is_socket() {
            "sock"
        } else if ft.is_char_device() {
            "chr"
        } else if ft.is_block_device() {
            "blk"
        } else {
            "?"
        };
        let mut xattrs = BTreeMap::new();
        for n in puzzlefs::sys::list_xattrs(&p).expect("listxattr") {
            // Only user.* xattrs are guaranteed to round trip everywhere.
            if n.starts_with(b"user.") {
                let v = puzzlefs::sys::get_xattr(&p, &n).expect("getxattr");
                xattrs.insert(n, v);
            }
        }
        let link_group = if ft.is_file() {
            let next = groups.len();
            Some(*groups.entry((m.dev(), m.ino())).or_insert(next))
        } else {
            None
        };
        out.insert(
            rel,
            Entry {
                kind: kind.into(),
                perm: if ft.is_symlink() {
                    0
                } else {
                    m.mode() & 0o7777
                },
                owner: owners.then(|| (m.uid(), m.gid())),
                data: ft.is_file().then(|| fs::read(&p).expect("read")),
                target: ft.is_symlink().then(|| {
                    fs::read_link(&p)
                        .expect("readlink")
                        .as_os_str()
                        .as_bytes()
                        .to_vec()
                }),
                rdev: (ft.is_char_device() || ft.is_block_device()).then(|| m.rdev()),
                xattrs,
                link_group,
            },
        );
    }
    out
}

/// Asserts two trees are the same (see [`snapshot`]).
pub fn assert_same_tree(a: &Path, b: &Path) {
    let owners = is_root();
    let sa = snapshot(a, owners);
    let sb = snapshot(b, owners);
    let ka: Vec<_> = sa
        .keys()
        .map(|k| String::from_utf8_lossy(k).into_owned())
        .collect();
    let kb: Vec<_> = sb
        .keys()
        .map(|k| String::from_utf8_lossy(k).into_owned())
        .collect();
    assert_eq!(
        ka,
        kb,
        "paths differ between {} and {}",
        a.display(),
        b.display()
    );
    for (k, ea) in &sa {
        let eb = &sb[k];
        let name = String::from_utf8_lossy(k);
        assert_eq!(ea.kind, eb.kind, "{name}: kind");
        assert_eq!(ea.perm, eb.perm, "{name}: permissions");
        assert_eq!(ea.owner, eb.owner, "{name}: owner");
        assert!(ea.data == eb.data, "{name}: contents differ");
        assert_eq!(ea.target, eb.target, "{name}: symlink target");
        assert_eq!(ea.rdev, eb.rdev, "{name}: rdev");
        assert_eq!(ea.xattrs, eb.xattrs, "{name}: xattrs");
        assert_eq!(ea.link_group, eb.link_group, "{name}: hard-link identity");
    }
}

/// The fixture directory (../shared/fixtures/upstream-v1 of the project).
pub fn fixture() -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let candidates = [
        here.join("../../../../shared/fixtures/upstream-v1"),
        here.join("../../../shared/fixtures/upstream-v1"),
    ];
    for c in &candidates {
        if c.join("oci/index.json").exists() {
            return c.clone();
        }
    }
    panic!("fixture not found from {}", here.display());
}

/// Extracts the fixture's src.tar into `dir` (with xattrs, numeric owners).
pub fn untar_fixture(dir: &Path) {
    let st = Command::new("tar")
        .args(["--xattrs", "--xattrs-include=*", "--numeric-owner", "-xpf"])
        .arg(fixture().join("src.tar"))
        .arg("-C")
        .arg(dir)
        .status()
        .expect("tar");
    assert!(st.success(), "tar failed");
}

/// Copies a directory tree (`cp -a`).
pub fn copy_tree(from: &Path, to: &Path) {
    let st = Command::new("cp")
        .arg("-a")
        .arg(from)
        .arg(to)
        .status()
        .expect("cp");
    assert!(st.success());
}

/// Names of the blobs of an OCI dir.
pub fn blobs(oci: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(oci.join("blobs/sha256"))
        .expect("blobs dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// A small seeded generator (xorshift64) for reproducible test inputs.
pub struct Rng(pub u64);

impl Rng {
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A value below `n` (below 1 if `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// `n` bytes.
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

/// The parts of a manifest a test may rewrite: its fs-verity entries and
/// its link-count table (layers and Merkle tree names are kept).
pub struct ManifestParts {
    pub entries: Vec<([u8; 32], [u8; 32])>,
    pub links: Option<Vec<puzzlefs::format::LinkCount>>,
}

/// Points `tag` at a copy of its manifest after `edit` changed its parts
/// (everything else as it was); returns whether the copy is a new blob.
pub fn rewrite_manifest(oci: &Path, tag: &str, edit: impl FnOnce(&mut ManifestParts)) -> bool {
    let dir = puzzlefs::oci::OciDir::open(oci).unwrap();
    let img = puzzlefs::image::Image::open_tag(&dir, tag).unwrap();
    let m = img.manifest();
    let mut trees = HashMap::new();
    let mut parts = ManifestParts {
        entries: Vec::new(),
        links: m
            .link_counts()
            .unwrap()
            .map(|l| l.collect::<Result<_, _>>().unwrap()),
    };
    for e in m.verity_entries().unwrap() {
        let e = e.unwrap();
        parts
            .entries
            .push((e.digest, <[u8; 32]>::try_from(e.verity).unwrap()));
        if let Some(t) = e.merkle_tree {
            trees.insert(e.digest, t);
        }
    }
    edit(&mut parts);
    let manifest = puzzlefs::model::encode_manifest(
        &img.layer_refs(),
        &parts.entries,
        &trees,
        parts.links.as_deref(),
    );
    let (digest, new) = dir.put_blob(&manifest).unwrap();
    dir.commit_tag(tag, &digest, manifest.len() as u64, &|| {})
        .unwrap();
    new
}
