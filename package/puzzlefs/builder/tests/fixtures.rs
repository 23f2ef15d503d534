//! Compatibility with the images of the other implementation
//! (../shared/fixtures/upstream-v1): every tag reads back as its source
//! tree, and images built here from the same trees have the same layout and
//! (for plain and zstd) the same chunk and metadata blobs.

mod common;

use std::fs;
use std::path::Path;

use common::*;
use puzzlefs::format::{find_inode, ChunkList, Error, InodeKind, Manifest, MetadataBlob};
use puzzlefs::image::{self, Image};
use puzzlefs::oci::OciDir;
use puzzlefs::progress::Progress;

fn src_trees() -> tempfile::TempDir {
    let t = tempfile::tempdir().expect("tempdir");
    untar_fixture(t.path());
    t
}

#[test]
fn every_fixture_tag_reads_back_as_its_source() {
    let src = src_trees();
    let oci = OciDir::open(&fixture().join("oci")).expect("fixture OCI dir");
    for (tag, tree) in [("plain", "src"), ("zstd", "src"), ("delta", "src-delta")] {
        let out = tempfile::tempdir().expect("tempdir");
        let dest = out.path().join("x");
        let img = Image::open_tag(&oci, tag).expect("open tag");
        puzzlefs::extract::extract_image(&img, &dest, &Progress::hidden()).expect("extract");
        assert_same_tree(&src.path().join(tree), &dest);
    }
}

#[test]
fn fixture_through_the_format_crate() {
    let oci = OciDir::open(&fixture().join("oci")).expect("fixture");
    let img = Image::open_tag(&oci, "delta").expect("delta");
    let m = img.manifest();
    assert_eq!(m.version().expect("version"), 1);
    assert_eq!(m.layer_count().expect("layers"), 2);
    assert!(m
        .verity_for(&img.layer_refs()[0].digest)
        .expect("verity")
        .is_some());
    let blobs = img.blobs();
    let layers = image::views(&blobs).expect("views");
    // file2 (ino 8) and link-rel (ino 11) were deleted: whiteouts on top.
    assert_eq!(
        find_inode(layers.iter().copied(), 8).unwrap_err(),
        Error::Whiteout(8)
    );
    assert_eq!(
        find_inode(layers.iter().copied(), 11).unwrap_err(),
        Error::Whiteout(11)
    );
    assert_eq!(
        find_inode(layers.iter().copied(), 13).unwrap_err(),
        Error::InodeNotFound(13)
    );
    // Only the base knows ino 8 as a file.
    assert_eq!(
        layers[1].find(8).unwrap().unwrap().kind().unwrap(),
        InodeKind::File
    );
    let root = find_inode(layers.iter().copied(), 1)
        .unwrap()
        .dir()
        .unwrap();
    // The other implementation lists whiteouts first (unsorted): lookup
    // must still find every name.
    assert!(!root.is_sorted().unwrap());
    for e in root.entries() {
        let e = e.unwrap();
        assert_eq!(root.lookup(e.name).unwrap().unwrap().ino, e.ino);
    }
    assert_eq!(root.lookup(b"new-file").unwrap().unwrap().ino, 17);
    assert!(root.lookup(b"nope").unwrap().is_none());
    // file1: 300000 bytes over 5 chunks; map a range straddling chunks.
    let f = find_inode(layers.iter().copied(), 7)
        .unwrap()
        .file()
        .unwrap();
    assert_eq!(f.size().unwrap(), 300_000);
    let pieces: Vec<_> = f.map(65_000, 2_000).unwrap().map(|p| p.unwrap()).collect();
    assert_eq!(pieces.len(), 2);
    assert_eq!(pieces[0].file_offset, 65_000);
    assert_eq!(pieces[0].len + pieces[1].len, 2_000);
    assert_eq!(pieces[1].blob.offset, 0);
    assert_eq!(
        f.map(299_990, 100)
            .unwrap()
            .map(|p| p.unwrap().len)
            .sum::<u64>(),
        10
    );
    assert_eq!(f.map(300_000, 100).unwrap().count(), 0);
    // The hard link: dir-1/hardlink-to-file1 is ino 7 too.
    let dir1 = find_inode(layers.iter().copied(), 3)
        .unwrap()
        .dir()
        .unwrap();
    assert_eq!(
        dir1.lookup_sorted(b"hardlink-to-file1")
            .unwrap()
            .unwrap()
            .ino,
        7
    );
    assert_eq!(
        find_inode(layers.iter().copied(), 3)
            .unwrap()
            .xattr(b"user.dirattr")
            .unwrap(),
        Some(&b"\x00\x01binary"[..])
    );
    let lnk = find_inode(layers.iter().copied(), 9).unwrap();
    assert_eq!(lnk.kind().unwrap(), InodeKind::Lnk);
    assert_eq!(lnk.symlink_target().unwrap(), Some(&b"/etc/hostname"[..]));
    let sub = find_inode(layers.iter().copied(), 15).unwrap();
    assert_eq!(sub.permissions(), 0o4755);
    assert_eq!(sub.mode().unwrap(), 0o104755);
}

/// (layer digests, fs-verity entries) of a manifest.
type Parts = (Vec<[u8; 32]>, Vec<([u8; 32], Vec<u8>)>);

fn manifest_parts(oci: &Path, digest: &str) -> Parts {
    let d = puzzlefs::oci::parse_digest(digest).unwrap();
    let bytes = OciDir::open(oci).unwrap().read_blob(&d).unwrap();
    let m = Manifest::parse(&bytes).unwrap();
    let layers = m.layers().unwrap().map(|l| l.unwrap().digest).collect();
    let verity = m
        .verity_entries()
        .unwrap()
        .map(|v| {
            let v = v.unwrap();
            (v.digest, v.verity.to_vec())
        })
        .collect();
    (layers, verity)
}

#[test]
fn building_the_fixture_sources_matches_the_other_implementation() {
    let src = src_trees();
    let oci = tempfile::tempdir().unwrap();
    let fx = fixture().join("oci");
    // The stream chunking policy is the other implementation's.
    let stream = [
        "--chunking",
        "stream",
        "--no-metadata-tree",
        "--no-link-counts",
    ];
    let plain = build(&src.path().join("src"), oci.path(), "plain", &stream);
    let zstd = build(
        &src.path().join("src"),
        oci.path(),
        "zstd",
        &[
            "-c",
            "--chunking",
            "stream",
            "--no-metadata-tree",
            "--no-link-counts",
        ],
    );
    build(
        &src.path().join("src-delta"),
        oci.path(),
        "delta",
        &[
            "-b",
            "plain",
            "--chunking",
            "stream",
            "--no-metadata-tree",
            "--no-link-counts",
        ],
    );

    // Layout: oci-layout byte for byte, index.json of the same shape.
    assert_eq!(
        fs::read(oci.path().join("oci-layout")).unwrap(),
        fs::read(fx.join("oci-layout")).unwrap()
    );
    let ours: serde_json::Value =
        serde_json::from_slice(&fs::read(oci.path().join("index.json")).unwrap()).unwrap();
    let theirs: serde_json::Value =
        serde_json::from_slice(&fs::read(fx.join("index.json")).unwrap()).unwrap();
    let shape = |v: &serde_json::Value| -> Vec<String> {
        let mut keys: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
        for m in v["manifests"].as_array().unwrap() {
            keys.extend(m.as_object().unwrap().keys().map(|k| format!("m.{k}")));
            keys.push(m["media_type"].as_str().unwrap().to_owned());
            keys.push(
                m["annotations"]["org.opencontainers.image.ref.name"]
                    .as_str()
                    .unwrap()
                    .into(),
            );
        }
        keys
    };
    assert_eq!(shape(&ours), shape(&theirs));
    assert_eq!(ours["schemaVersion"], -1);
    let raw = fs::read_to_string(oci.path().join("index.json")).unwrap();
    assert!(
        !raw.contains(' ') && !raw.contains('\n'),
        "index.json is compact"
    );

    // Same chunk and metadata blobs for plain and zstd.
    let theirs_plain = theirs["manifests"][0]["digest"].as_str().unwrap();
    let theirs_zstd = theirs["manifests"][1]["digest"].as_str().unwrap();
    for (mine, theirs) in [(plain.as_str(), theirs_plain), (zstd.as_str(), theirs_zstd)] {
        let (ml, mv) = manifest_parts(oci.path(), mine);
        let (tl, tv) = manifest_parts(&fx, theirs);
        assert_eq!(ml, tl, "metadata layer blobs are identical");
        let md: Vec<_> = mv.iter().map(|v| v.0).collect();
        let td: Vec<_> = tv.iter().map(|v| v.0).collect();
        assert_eq!(md, td, "the same blobs, in the same (digest) order");
        for blob in &md {
            assert!(fx.join("blobs/sha256").join(hex::encode(blob)).exists());
        }
    }
    // fs-verity entries: builder/tests/verity.rs, against `fsverity digest`.

    // The default policy's images (other chunks, sized zstd frames) too.
    build(&src.path().join("src"), oci.path(), "files", &["-c"]);
    build(
        &src.path().join("src-delta"),
        oci.path(),
        "files-delta",
        &["-c", "-b", "files"],
    );
    // And our images read back as the trees.
    for (tag, tree) in [
        ("plain", "src"),
        ("zstd", "src"),
        ("delta", "src-delta"),
        ("files", "src"),
        ("files-delta", "src-delta"),
    ] {
        let out = tempfile::tempdir().unwrap();
        let dest = out.path().join("x");
        ok(&[&"-q", &"extract", &oci.path(), &tag, &dest]);
        assert_same_tree(&src.path().join(tree), &dest);
    }
}

#[test]
fn metadata_blob_parses_only_when_aligned_or_errors() {
    let oci = OciDir::open(&fixture().join("oci")).unwrap();
    let img = Image::open_tag(&oci, "plain").unwrap();
    let bytes = img.layer_bytes()[0].to_vec();
    let mut padded = vec![0u8; bytes.len() + 9];
    let start = padded.as_ptr().align_offset(8) + 1;
    padded[start..start + bytes.len()].copy_from_slice(&bytes);
    // Unaligned input: an error, not a panic.
    let r = MetadataBlob::parse(&padded[start..start + bytes.len()])
        .and_then(|b| b.layer().map(|l| l.len()));
    assert!(r.is_err());
}
