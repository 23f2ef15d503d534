//! Build -> extract round trips of a generated corpus, reproducibility,
//! dedup, delta layers, and the tool's error behaviour. These run the real
//! binary on temporary trees.

mod common;

use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::Path;

use common::*;
use rand::{RngCore, SeedableRng};

fn write_random(path: &Path, len: usize, seed: u64) {
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    let mut buf = vec![0u8; len];
    rng.fill_bytes(&mut buf);
    fs::write(path, buf).unwrap();
}

fn chmod(p: &Path, mode: u32) {
    fs::set_permissions(p, fs::Permissions::from_mode(mode)).unwrap();
}

fn mkfifo(p: &Path) {
    puzzlefs::sys::mknod(p, libc::S_IFIFO | 0o644, 0).unwrap();
}

/// One step of building the corpus.
type Step = Box<dyn Fn(&Path)>;

/// The corpus of the Tests section. `reverse` creates entries in the
/// opposite order (different readdir order and inode numbers, same tree).
fn corpus(root: &Path, reverse: bool) {
    fs::create_dir_all(root).unwrap();
    let mut steps: Vec<Step> = Vec::new();
    steps.push(Box::new(|r| fs::write(r.join("empty"), b"").unwrap()));
    for (i, len) in [1usize, 16383, 16384, 16385, 262143, 262145]
        .into_iter()
        .enumerate()
    {
        steps.push(Box::new(move |r| {
            write_random(&r.join(format!("size-{len}")), len, i as u64)
        }));
    }
    steps.push(Box::new(|r| {
        write_random(&r.join("big-10MiB"), 10 << 20, 99)
    }));
    steps.push(Box::new(|r| {
        let d = r.join("many");
        fs::create_dir(&d).unwrap();
        for i in 0..10_000 {
            fs::write(d.join(format!("f{i:05}")), format!("small file {i}\n")).unwrap();
        }
    }));
    steps.push(Box::new(|r| {
        let mut d = r.join("deep");
        for i in 0..40 {
            d.push(format!("d{i}"));
        }
        fs::create_dir_all(&d).unwrap();
        fs::write(d.join("bottom"), b"deep down").unwrap();
    }));
    steps.push(Box::new(|r| {
        let d = r.join("names");
        fs::create_dir(&d).unwrap();
        fs::write(d.join("n".repeat(255)), b"long name").unwrap();
        fs::write(d.join(OsStr::from_bytes(b"latin1-\xe9\xff")), b"not utf-8").unwrap();
        fs::write(d.join("with space and \u{e9}"), b"utf-8").unwrap();
    }));
    steps.push(Box::new(|r| {
        let d = r.join("links");
        fs::create_dir(&d).unwrap();
        symlink("../size-1", d.join("rel")).unwrap();
        symlink("/etc/passwd", d.join("abs")).unwrap();
        symlink("does/not/exist", d.join("dangling")).unwrap();
        fs::create_dir(r.join("hl-a")).unwrap();
        fs::create_dir(r.join("hl-b")).unwrap();
        write_random(&r.join("hl-a/orig"), 70_000, 7);
        fs::hard_link(r.join("hl-a/orig"), r.join("hl-b/link1")).unwrap();
        fs::hard_link(r.join("hl-a/orig"), r.join("hl-b/link2")).unwrap();
    }));
    steps.push(Box::new(|r| {
        let d = r.join("special");
        fs::create_dir(&d).unwrap();
        mkfifo(&d.join("fifo"));
        drop(std::os::unix::net::UnixListener::bind(d.join("sock")).unwrap());
        if is_root() {
            puzzlefs::sys::mknod(
                &d.join("null"),
                libc::S_IFCHR | 0o666,
                puzzlefs::sys::makedev(1, 3),
            )
            .unwrap();
            puzzlefs::sys::mknod(
                &d.join("blk"),
                libc::S_IFBLK | 0o600,
                puzzlefs::sys::makedev(7, 200),
            )
            .unwrap();
            puzzlefs::sys::mknod(
                &d.join("bigdev"),
                libc::S_IFCHR | 0o600,
                puzzlefs::sys::makedev(4095, 1 << 19),
            )
            .unwrap();
        }
    }));
    steps.push(Box::new(|r| {
        let d = r.join("modes");
        fs::create_dir(&d).unwrap();
        for (name, mode) in [
            ("suid", 0o4755),
            ("sgid", 0o2711),
            ("ro", 0o400),
            ("none", 0o000),
        ] {
            fs::write(d.join(name), name).unwrap();
            chmod(&d.join(name), mode);
        }
        fs::create_dir(d.join("sticky")).unwrap();
        chmod(&d.join("sticky"), 0o1777);
        fs::create_dir(d.join("rodir")).unwrap();
        fs::write(d.join("rodir/inside"), b"x").unwrap();
        chmod(&d.join("rodir"), 0o555);
        if is_root() {
            for (name, uid, gid) in [("suid", 0, 0), ("ro", 1234, 5678), ("none", 65534, 100)] {
                std::os::unix::fs::lchown(d.join(name), Some(uid), Some(gid)).unwrap();
            }
            std::os::unix::fs::lchown(d.join("sticky"), Some(42), Some(43)).unwrap();
            // chown cleared the bits; set them again.
            chmod(&d.join("suid"), 0o4755);
        }
    }));
    steps.push(Box::new(|r| {
        let d = r.join("xattrs");
        fs::create_dir(&d).unwrap();
        fs::write(d.join("f"), b"has xattrs").unwrap();
        puzzlefs::sys::set_xattr(&d.join("f"), b"user.one", b"1").unwrap();
        puzzlefs::sys::set_xattr(&d.join("f"), b"user.bin", b"\0\x01\x02\xff").unwrap();
        puzzlefs::sys::set_xattr(&d.join("f"), b"user.empty", b"").unwrap();
        puzzlefs::sys::set_xattr(&d, b"user.dir", b"on a directory").unwrap();
    }));
    if reverse {
        steps.reverse();
    }
    for s in steps {
        s(root);
    }
}

fn xattrs_supported(dir: &Path) -> bool {
    let p = dir.join(".xattr-probe");
    fs::write(&p, b"").unwrap();
    let ok = puzzlefs::sys::set_xattr(&p, b"user.probe", b"1").is_ok();
    fs::remove_file(&p).unwrap();
    ok
}

#[test]
fn corpus_round_trips_with_and_without_compression() {
    let t = tempfile::tempdir().unwrap();
    assert!(
        xattrs_supported(t.path()),
        "user xattrs not supported on {}: run the tests on a file system that has them",
        t.path().display()
    );
    let src = t.path().join("src");
    corpus(&src, false);
    let oci = t.path().join("oci");
    let plain = build(&src, &oci, "plain", &[]);
    let zstd = build(&src, &oci, "zstd", &["-c"]);
    assert_ne!(plain, zstd);
    for tag in ["plain", "zstd"] {
        let dest = t.path().join(format!("out-{tag}"));
        ok(&[&"-q", &"extract", &oci, &tag, &dest]);
        assert_same_tree(&src, &dest);
    }
    // Compression made the small text files' chunks smaller.
    let json = ok(&[&"inspect", &"--json", &oci]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let imgs = v["images"].as_array().unwrap();
    assert_eq!(imgs.len(), 2);
    let logical = imgs[0]["logical_bytes"].as_u64().unwrap();
    assert_eq!(logical, imgs[1]["logical_bytes"].as_u64().unwrap());
    assert!(
        imgs[1]["stored_chunk_bytes"].as_u64().unwrap()
            < imgs[0]["stored_chunk_bytes"].as_u64().unwrap()
    );
    assert!(imgs[0]["inodes"].as_u64().unwrap() > 10_000);
    // Human-readable inspect works too.
    let text = ok(&[&"inspect", &oci, &"zstd"]);
    assert!(text.contains("tag zstd"), "{text}");
    // The format crate's full walk accepts our images.
    let o = puzzlefs::oci::OciDir::open(&oci).unwrap();
    for tag in ["plain", "zstd"] {
        let img = puzzlefs::image::Image::open_tag(&o, tag).unwrap();
        let blobs = img.blobs();
        let layers = puzzlefs::image::views(&blobs).unwrap();
        let st = puzzlefs::format::check_layers(&layers).unwrap();
        assert_eq!(st.bytes, logical);
    }
}

#[test]
fn builds_are_reproducible() {
    let t = tempfile::tempdir().unwrap();
    let a = t.path().join("a");
    let b = t.path().join("b");
    corpus(&a, false);
    std::thread::sleep(std::time::Duration::from_millis(20));
    corpus(&b, true);
    let d1 = build(&a, &t.path().join("oci1"), "t", &[]);
    let d2 = build(&b, &t.path().join("oci2"), "t", &["-j", "1"]);
    let d3 = build(&a, &t.path().join("oci3"), "t", &["-j", "4"]);
    assert_eq!(
        d1, d2,
        "creation order, inode numbers, timestamps and threads do not matter"
    );
    assert_eq!(d1, d3);
    assert_eq!(blobs(&t.path().join("oci1")), blobs(&t.path().join("oci2")));
    // Rebuilding into the same directory changes nothing.
    let before = blobs(&t.path().join("oci1"));
    assert_eq!(build(&a, &t.path().join("oci1"), "t", &[]), d1);
    assert_eq!(blobs(&t.path().join("oci1")), before);
    let c1 = build(&a, &t.path().join("oci1"), "c", &["-c"]);
    let c2 = build(&b, &t.path().join("oci2"), "c", &["-c", "-j", "1"]);
    assert_eq!(c1, c2);
}

fn dir_bytes(p: &Path) -> u64 {
    fs::read_dir(p.join("blobs/sha256"))
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum()
}

#[test]
fn identical_data_is_stored_once() {
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("src");
    fs::create_dir_all(src.join("x")).unwrap();
    fs::create_dir_all(src.join("y")).unwrap();
    write_random(&src.join("x/data"), 4 << 20, 5);
    fs::copy(src.join("x/data"), src.join("y/copy")).unwrap();
    let oci = t.path().join("oci");
    build(&src, &oci, "t", &[]);
    let stored = dir_bytes(&oci);
    // Two copies of 4 MiB; a chunk or two around the seam are not shared.
    assert!(
        stored < (4 << 20) + (600 << 10),
        "stored {stored} bytes for 2 x 4 MiB"
    );
    let dest = t.path().join("out");
    ok(&[&"-q", &"extract", &oci, &"t", &dest]);
    assert_same_tree(&src, &dest);
    // The same data under another tag costs no chunk blob at all.
    let src2 = t.path().join("src2");
    fs::create_dir_all(&src2).unwrap();
    fs::copy(src.join("x/data"), src2.join("again")).unwrap();
    let n = blobs(&oci).len();
    build(&src2, &oci, "t2", &[]);
    assert_eq!(
        blobs(&oci).len(),
        n + 2,
        "only a metadata blob and a manifest are new"
    );
}

#[test]
fn small_files_with_the_same_contents_are_stored_once() {
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("src");
    // 200 distinct 20 KiB files, each also copied (in the reverse order,
    // every copy followed by a distinct file, so that no chunk of the
    // stream repeats) into another directory: the copies add no stored byte.
    for d in ["a", "b"] {
        fs::create_dir_all(src.join(d)).unwrap();
    }
    for i in 0..200u64 {
        write_random(&src.join(format!("a/{i:03}")), 20 << 10, 1000 + i);
    }
    for i in 0..200u64 {
        let copy = src.join(format!("b/{i:03}-copy"));
        fs::copy(src.join(format!("a/{:03}", 199 - i)), copy).unwrap();
        write_random(&src.join(format!("b/{i:03}-other")), 3000, 5000 + i);
    }
    fs::write(src.join("b/zz-empty"), b"").unwrap();
    for flags in [&[][..], &["-c"][..]] {
        let oci = t.path().join(format!("oci{}", flags.len()));
        build(&src, &oci, "t", flags);
        let stored = dir_bytes(&oci);
        let data = 200 * ((20 << 10) + 3000);
        assert!(
            stored < data + (300 << 10),
            "stored {stored} bytes for {data} bytes of distinct data ({flags:?})"
        );
        let dest = t.path().join(format!("out{}", flags.len()));
        ok(&[&"-q", &"extract", &oci, &"t", &dest]);
        assert_same_tree(&src, &dest);
        // Not hard links: two inodes.
        assert_ne!(
            ino_of(&oci, "t", &["a", "007"]),
            ino_of(&oci, "t", &["b", "007"])
        );
    }
}

fn ino_of(oci: &Path, tag: &str, path: &[&str]) -> Option<u64> {
    let o = puzzlefs::oci::OciDir::open(oci).unwrap();
    let img = puzzlefs::image::Image::open_tag(&o, tag).unwrap();
    let blobs = img.blobs();
    let layers = puzzlefs::image::views(&blobs).unwrap();
    let mut ino = 1;
    for c in path {
        let dir = puzzlefs::format::find_inode(layers.iter().copied(), ino)
            .ok()?
            .dir()
            .ok()?;
        ino = dir.lookup(c.as_bytes()).unwrap()?.ino;
        puzzlefs::format::find_inode(layers.iter().copied(), ino).ok()?;
    }
    Some(ino)
}

#[test]
fn delta_layers() {
    let t = tempfile::tempdir().unwrap();
    let v1 = t.path().join("v1");
    fs::create_dir_all(v1.join("dir/sub")).unwrap();
    fs::create_dir_all(v1.join("gone-dir/inner")).unwrap();
    fs::write(v1.join("keep"), b"unchanged").unwrap();
    fs::write(v1.join("delete-me"), b"bye").unwrap();
    write_random(&v1.join("replace"), 200_000, 1);
    fs::write(v1.join("becomes-dir"), b"a file for now").unwrap();
    fs::write(v1.join("dir/becomes-file-later"), b"x").unwrap();
    fs::write(v1.join("gone-dir/inner/f"), b"in a deleted dir").unwrap();
    symlink("keep", v1.join("link")).unwrap();
    let oci = t.path().join("oci");
    build(&v1, &oci, "v1", &[]);

    let v2 = t.path().join("v2");
    copy_tree(&v1, &v2);
    fs::remove_file(v2.join("delete-me")).unwrap();
    fs::remove_dir_all(v2.join("gone-dir")).unwrap();
    write_random(&v2.join("replace"), 210_000, 2);
    fs::remove_file(v2.join("becomes-dir")).unwrap();
    fs::create_dir(v2.join("becomes-dir")).unwrap();
    fs::write(v2.join("becomes-dir/child"), b"new child").unwrap();
    fs::write(v2.join("new-file"), b"fresh").unwrap();
    fs::write(v2.join("dir/sub/new-deep"), b"fresh too").unwrap();
    fs::remove_file(v2.join("link")).unwrap();
    symlink("new-file", v2.join("link")).unwrap();
    build(&v2, &oci, "v2", &["-b", "v1"]);

    let dest = t.path().join("out-v2");
    ok(&[&"-q", &"extract", &oci, &"v2", &dest]);
    assert_same_tree(&v2, &dest);
    // The base still reads as it was.
    let dest1 = t.path().join("out-v1");
    ok(&[&"-q", &"extract", &oci, &"v1", &dest1]);
    assert_same_tree(&v1, &dest1);

    // Paths that existed keep their inode numbers; new ones go above.
    for p in [
        &["keep"][..],
        &["replace"],
        &["becomes-dir"],
        &["dir", "sub"],
        &["link"],
    ] {
        assert_eq!(ino_of(&oci, "v1", p), ino_of(&oci, "v2", p), "{p:?}");
    }
    let max_v1 = 11;
    assert!(ino_of(&oci, "v2", &["new-file"]).unwrap() > max_v1);
    assert!(ino_of(&oci, "v2", &["becomes-dir", "child"]).unwrap() > max_v1);
    assert_eq!(ino_of(&oci, "v2", &["delete-me"]), None);

    // Two layers, the new one with whiteouts for the deleted names and
    // without the inodes that did not change.
    let json = ok(&[&"inspect", &"--json", &oci, &"v2"]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let layers = v["images"][0]["layers"].as_array().unwrap();
    assert_eq!(layers.len(), 2);
    assert_eq!(
        layers[0]["whiteouts"].as_u64(),
        Some(2),
        "delete-me and gone-dir"
    );
    assert!(layers[0]["inodes"].as_u64().unwrap() < layers[1]["inodes"].as_u64().unwrap() + 2);

    // A third layer on top of the delta, turning a directory into a file.
    let v3 = t.path().join("v3");
    copy_tree(&v2, &v3);
    fs::remove_dir_all(v3.join("dir")).unwrap();
    fs::write(v3.join("dir"), b"now a file").unwrap();
    build(&v3, &oci, "v3", &["-b", "v2"]);
    let dest3 = t.path().join("out-v3");
    ok(&[&"-q", &"extract", &oci, &"v3", &dest3]);
    assert_same_tree(&v3, &dest3);
    assert_eq!(ino_of(&oci, "v1", &["dir"]), ino_of(&oci, "v3", &["dir"]));
}

#[test]
fn errors_name_the_path_and_leave_the_index_alone() {
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("src");
    fs::create_dir_all(&src).unwrap();
    fs::write(src.join("a"), b"a").unwrap();
    let oci = t.path().join("oci");
    build(&src, &oci, "good", &[]);
    let index = fs::read(oci.join("index.json")).unwrap();

    let o = run(&[&"build", &"-b", &"missing-tag", &src, &oci, &"t"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("missing-tag"), "{err}");
    assert_eq!(fs::read(oci.join("index.json")).unwrap(), index);

    let o = run(&[&"build", &t.path().join("nope"), &oci, &"t"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("nope"));
    assert_eq!(fs::read(oci.join("index.json")).unwrap(), index);

    // An unreadable file: tests/cli.rs (run as an unprivileged user).

    let o = run(&[&"extract", &oci, &"no-such-tag", &t.path().join("x")]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("no-such-tag"));

    let o = run(&[&"extract", &oci, &"good", &src]);
    assert!(!o.status.success(), "refuses a non-empty destination");

    // mount: the arguments the kernel driver gets.
    let out = ok(&[&"mount", &"--dry-run", &oci, &"good", &"/mnt"]);
    let abs = fs::canonicalize(&oci).unwrap();
    let digest = serde_json::from_slice::<serde_json::Value>(&index).unwrap()["manifests"][0]
        ["digest"]
        .as_str()
        .unwrap()
        .trim_start_matches("sha256:")
        .to_owned();
    assert_eq!(
        out.trim(),
        format!(
            "mount -t puzzlefs -o ro,oci_root_dir={},image_manifest={digest} none /mnt",
            abs.display()
        )
    );
}

#[test]
fn concurrent_builds_into_one_directory() {
    let t = tempfile::tempdir().unwrap();
    let oci = t.path().join("oci");
    let mut handles = Vec::new();
    for i in 0..4 {
        let src = t.path().join(format!("src{i}"));
        fs::create_dir_all(&src).unwrap();
        write_random(&src.join("data"), 300_000 + i * 1000, i as u64);
        let oci = oci.clone();
        handles.push(std::thread::spawn(move || {
            build(&src, &oci, &format!("t{i}"), &[])
        }));
    }
    let digests: Vec<String> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let index: serde_json::Value =
        serde_json::from_slice(&fs::read(oci.join("index.json")).unwrap()).unwrap();
    let tags: Vec<&str> = index["manifests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            m["annotations"]["org.opencontainers.image.ref.name"]
                .as_str()
                .unwrap()
        })
        .collect();
    assert_eq!(tags.len(), 4, "{tags:?}");
    for (i, d) in digests.iter().enumerate() {
        let m = index["manifests"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["annotations"]["org.opencontainers.image.ref.name"] == format!("t{i}"))
            .unwrap();
        assert_eq!(m["digest"].as_str().unwrap(), format!("sha256:{d}"));
    }
    // No temporary files left behind.
    for e in fs::read_dir(oci.join("blobs/sha256")).unwrap() {
        let n = e.unwrap().file_name();
        assert!(!n.to_string_lossy().starts_with('.'), "{n:?}");
    }
}
