//! Malformed inputs: truncated and bit-flipped metadata and manifests,
//! directory cycles, chunk ranges past the end of a blob. Every case must
//! end in an error (or a clean read), never a panic.

mod common;

use std::fs;

use common::*;
use puzzlefs::format::{
    check_layers, find_inode, BlobRef, ChunkList, Error, Manifest, MetadataBlob,
};
use puzzlefs::model::{encode_layer, encode_manifest, FileChunk, InodeRec, Kind};
use puzzlefs::oci::{Aligned, OciDir};
use puzzlefs::progress::Progress;

/// Everything a reader would do with a manifest and its layers.
fn exercise(manifest: &[u8], layers: &[&[u8]]) {
    let m = Aligned::copy_from(manifest);
    if let Ok(m) = Manifest::parse(&m) {
        let _ = m.layer_count();
        if let Ok(l) = m.layers() {
            for b in l {
                let _ = b;
            }
        }
        if let Ok(v) = m.verity_entries() {
            for e in v.flatten() {
                let _ = m.verity_for(&e.digest);
            }
        }
        let _ = m.layer(u32::MAX);
    }
    let bufs: Vec<Aligned> = layers.iter().map(|l| Aligned::copy_from(l)).collect();
    let blobs: Vec<MetadataBlob<'_>> = bufs
        .iter()
        .filter_map(|b| MetadataBlob::parse(b).ok())
        .collect();
    let views: Vec<_> = blobs.iter().filter_map(|b| b.layer().ok()).collect();
    let _ = check_layers(&views);
    for ino in [0, 1, 2, 3, 7, 8, u64::MAX] {
        if let Ok(i) = find_inode(views.iter().copied(), ino) {
            let _ = i.kind();
            let _ = i.xattrs().map(|x| x.count());
            let _ = i.symlink_target();
            if let Ok(d) = i.dir() {
                let _ = d.lookup(b"file1");
                let _ = d.entries_from(u32::MAX).count();
            }
            if let Ok(f) = i.file() {
                let _ = f.size();
                let _ = f.map(u64::MAX - 1, 10).map(|p| p.count());
                let _ = f.map(0, u64::MAX).map(|p| p.count());
            }
        }
    }
}

#[test]
fn truncated_and_bit_flipped_fixture_blobs() {
    let fx = fixture().join("oci");
    let oci = OciDir::open(&fx).unwrap();
    let manifest_digest = oci.resolve("delta").unwrap();
    let manifest = oci.read_blob(&manifest_digest).unwrap().to_vec();
    let m = Manifest::parse(&Aligned::copy_from(&manifest))
        .unwrap()
        .layers()
        .unwrap()
        .map(|l| l.unwrap())
        .collect::<Vec<_>>();
    let top = oci.read_blob(&m[0].digest).unwrap().to_vec();
    let base = oci.read_blob(&m[1].digest).unwrap().to_vec();
    exercise(&manifest, &[&top, &base]);
    for len in 0..top.len() {
        exercise(&manifest[..len.min(manifest.len())], &[&top[..len], &base]);
    }
    let mut cases = 0;
    for pos in 0..top.len() {
        for bit in [0u8, 3, 7] {
            let mut t = top.clone();
            t[pos] ^= 1 << bit;
            let mut mm = manifest.clone();
            if pos < mm.len() {
                mm[pos] ^= 1 << bit;
            }
            exercise(&mm, &[&t, &base]);
            cases += 1;
        }
    }
    assert!(cases > 6000);
}

#[test]
fn wrong_version_and_garbage() {
    let m = encode_manifest(&[], &[], &Default::default(), None);
    assert!(Manifest::parse(&Aligned::copy_from(&m)).is_ok());
    let mut bad = m.clone();
    // manifestVersion is the root struct's only data word; find and bump it.
    let pos = bad
        .windows(8)
        .position(|w| w == 1u64.to_le_bytes())
        .unwrap();
    bad[pos] = 2;
    match Manifest::parse(&Aligned::copy_from(&bad)) {
        Err(Error::BadVersion(2)) => {}
        other => panic!("expected BadVersion, got {:?}", other.err()),
    }
    for junk in [
        &b""[..],
        b"\0\0\0\0",
        b"\xff\xff\xff\xff\0\0\0\0",
        &[0u8; 64],
    ] {
        let a = Aligned::copy_from(junk);
        let _ = Manifest::parse(&a);
        let _ = MetadataBlob::parse(&a).map(|b| b.layer().map(|l| check_layers(&[l])));
    }
}

fn dir(ino: u64, entries: &[(&str, u64)]) -> InodeRec {
    InodeRec {
        ino,
        kind: Kind::Dir {
            entries: entries
                .iter()
                .map(|(n, i)| (n.as_bytes().to_vec(), *i))
                .collect(),
        },
        uid: 0,
        gid: 0,
        permissions: 0o755,
        xattrs: vec![],
        symlink: None,
    }
}

/// Writes a one-layer image with `inodes` into a fresh OCI dir.
fn image_with(inodes: &[InodeRec], extra_blobs: &[Vec<u8>]) -> (tempfile::TempDir, String) {
    let t = tempfile::tempdir().unwrap();
    let oci = OciDir::create(&t.path().join("oci")).unwrap();
    for b in extra_blobs {
        oci.put_blob(b).unwrap();
    }
    let layer = encode_layer(inodes);
    let (ld, _) = oci.put_blob(&layer).unwrap();
    let m = encode_manifest(
        &[BlobRef {
            digest: ld,
            offset: 0,
            compressed: false,
        }],
        &[],
        &Default::default(),
        None,
    );
    let (md, _) = oci.put_blob(&m).unwrap();
    oci.commit_tag("t", &md, m.len() as u64, &|| {}).unwrap();
    (t, hex::encode(md))
}

#[test]
fn directory_cycles_are_errors() {
    for inodes in [
        vec![dir(1, &[("self", 1)])],
        vec![dir(1, &[("a", 2)]), dir(2, &[("up", 1)])],
        vec![dir(1, &[("a", 2), ("b", 2)]), dir(2, &[])],
    ] {
        let (t, _) = image_with(&inodes, &[]);
        let dest = t.path().join("out");
        let o = run(&[&"extract", &t.path().join("oci"), &"t", &dest]);
        assert!(!o.status.success());
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("reached twice"),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        // Reading through the format crate stays fine.
        let oci = OciDir::open(&t.path().join("oci")).unwrap();
        let img = puzzlefs::image::Image::open_tag(&oci, "t").unwrap();
        let blobs = img.blobs();
        let layers = puzzlefs::image::views(&blobs).unwrap();
        check_layers(&layers).unwrap();
    }
}

#[test]
fn chunk_ranges_past_the_blob_end_are_errors() {
    let data = b"only twelve!".to_vec();
    let digest: [u8; 32] = <sha2::Sha256 as sha2::Digest>::digest(&data).into();
    for (offset, len) in [(0u64, 13u64), (12, 1), (u64::MAX - 2, 1), (4, u64::MAX)] {
        let file = InodeRec {
            ino: 2,
            kind: Kind::File {
                chunks: vec![FileChunk {
                    blob: BlobRef {
                        digest,
                        offset,
                        compressed: false,
                    },
                    len,
                }],
            },
            uid: 0,
            gid: 0,
            permissions: 0o644,
            xattrs: vec![],
            symlink: None,
        };
        let (t, _) = image_with(&[dir(1, &[("f", 2)]), file], std::slice::from_ref(&data));
        let dest = t.path().join("out");
        let oci = OciDir::open(&t.path().join("oci")).unwrap();
        let img = puzzlefs::image::Image::open_tag(&oci, "t").unwrap();
        let r = puzzlefs::extract::extract_image(&img, &dest, &Progress::hidden());
        assert!(r.is_err(), "offset {offset} len {len}");
    }
    // A missing chunk blob is an error too.
    let file = InodeRec {
        ino: 2,
        kind: Kind::File {
            chunks: vec![FileChunk {
                blob: BlobRef {
                    digest: [7; 32],
                    offset: 0,
                    compressed: false,
                },
                len: 1,
            }],
        },
        uid: 0,
        gid: 0,
        permissions: 0o644,
        xattrs: vec![],
        symlink: None,
    };
    let (t, _) = image_with(&[dir(1, &[("f", 2)]), file], &[]);
    let o = run(&[
        &"extract",
        &t.path().join("oci"),
        &"t",
        &t.path().join("out"),
    ]);
    assert!(!o.status.success());
}

#[test]
fn hostile_names_and_unsorted_data() {
    for bad in ["..", ".", "a/b", ""] {
        let (t, _) = image_with(
            &[dir(1, &[(bad, 2)]), dir(2, &[("b", 3)]), dir(3, &[])],
            &[],
        );
        let o = run(&[
            &"extract",
            &t.path().join("oci"),
            &"t",
            &t.path().join("out"),
        ]);
        assert!(!o.status.success(), "name {bad:?} must be refused");
        // Nothing was made outside the destination, nor under the bad name
        // inside it.
        let mut top: Vec<String> = fs::read_dir(t.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        top.sort();
        assert!(
            top == ["oci"] || top == ["oci", "out"],
            "name {bad:?}: {top:?}"
        );
        for inside in ["a", "b"] {
            assert!(!t.path().join("out").join(inside).exists(), "name {bad:?}");
        }
    }
    // Unsorted inodes: binary search may miss, never panics; check says so.
    let (t, _) = image_with(&[dir(3, &[]), dir(1, &[("x", 3)])], &[]);
    let oci = OciDir::open(&t.path().join("oci")).unwrap();
    let img = puzzlefs::image::Image::open_tag(&oci, "t").unwrap();
    let blobs = img.blobs();
    let layers = puzzlefs::image::views(&blobs).unwrap();
    assert!(!layers[0].is_sorted());
    assert!(check_layers(&layers).is_err());
    // A corrupted blob on disk is caught by its digest.
    let d = oci.resolve("t").unwrap();
    let p = oci.blob_path(&d);
    let mut b = fs::read(&p).unwrap();
    b[0] ^= 1;
    fs::write(&p, b).unwrap();
    assert!(oci.read_blob(&d).is_err());
}
