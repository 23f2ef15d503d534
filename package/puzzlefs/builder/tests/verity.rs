//! fs-verity measurements checked against the reference tool, `fsverity
//! digest` from fsverity-utils (Debian package `fsverity`, installed by
//! support/deps.sh), run at test time: on files of boundary sizes, on every
//! blob of the other implementation's fixture, and on every blob of images
//! built here. The fixture's tags rebuilt from their sources must give the
//! other implementation's manifests byte for byte.

mod common;

use std::collections::HashMap;
use std::fs;
use std::path::Path;
use std::process::Command;

use common::*;
use puzzlefs::format::Manifest;
use puzzlefs::oci::OciDir;

/// `fsverity digest` of `path` (sha256, 4 KiB blocks, no salt), as hex.
fn tool_digest(path: &Path) -> String {
    let out = Command::new("fsverity")
        .args(["digest", "--hash-alg=sha256", "--block-size=4096"])
        .arg(path)
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run `fsverity` ({e}): these tests need fsverity-utils \
                 (Debian package `fsverity`; support/deps.sh installs it)"
            )
        });
    assert!(
        out.status.success(),
        "fsverity digest {}: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    // "sha256:<hex> <path>"
    let text = String::from_utf8(out.stdout).expect("utf8");
    let first = text.split_whitespace().next().unwrap_or_default();
    let hex = first
        .strip_prefix("sha256:")
        .unwrap_or_else(|| panic!("unexpected `fsverity digest` output {text:?}"));
    assert_eq!(hex.len(), 64, "{text:?}");
    hex.to_owned()
}

/// Deterministic, non-repeating content (a repeated block would hide a
/// block-order mistake).
fn content(n: usize) -> Vec<u8> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15 ^ n as u64;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 32) as u8
        })
        .collect()
}

#[test]
fn measure_matches_fsverity_digest_at_boundary_sizes() {
    const B: usize = 4096;
    let dir = tempfile::tempdir().unwrap();
    // Tree depth (hash-block levels above the data): 0 for 0 and 1 block,
    // 1 up to 128 blocks, 2 from 129 blocks (1 MiB + 1 is 257 blocks), 3 from
    // 128 * 128 + 1 blocks.
    let sizes = [
        0,
        1,
        B - 1,
        B,
        B + 1,
        2 * B,
        128 * B,
        128 * B + 1,
        (1 << 20) + 1,
        128 * 128 * B + 1,
    ];
    for n in sizes {
        let data = content(n);
        let path = dir.path().join(format!("f{n}"));
        fs::write(&path, &data).unwrap();
        assert_eq!(
            hex::encode(puzzlefs::verity::measure(&data)),
            tool_digest(&path),
            "file of {n} bytes"
        );
    }
}

/// The (blob, recorded fs-verity digest) entries of manifest `digest`.
fn verity_entries(oci: &Path, digest: &[u8; 32]) -> Vec<([u8; 32], Vec<u8>)> {
    let bytes = OciDir::open(oci).unwrap().read_blob(digest).unwrap();
    let m = Manifest::parse(&bytes).unwrap();
    m.verity_entries()
        .unwrap()
        .map(|v| {
            let v = v.unwrap();
            (v.digest, v.verity.to_vec())
        })
        .collect()
}

/// The Merkle tree blobs named in manifest `digest`: (blob, tree blob).
fn trees(oci: &Path, digest: &[u8; 32]) -> HashMap<[u8; 32], [u8; 32]> {
    let bytes = OciDir::open(oci).unwrap().read_blob(digest).unwrap();
    let m = Manifest::parse(&bytes).unwrap();
    m.verity_entries()
        .unwrap()
        .filter_map(|v| {
            let v = v.unwrap();
            Some((v.digest, v.merkle_tree?))
        })
        .collect()
}

/// `fsverity digest --out-merkle-tree` of `path`.
fn tool_tree(path: &Path, out: &Path) -> Vec<u8> {
    let st = Command::new("fsverity")
        .args(["digest", "--hash-alg=sha256", "--block-size=4096"])
        .arg(format!("--out-merkle-tree={}", out.display()))
        .arg(path)
        .output()
        .unwrap();
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    fs::read(out).unwrap()
}

/// The Merkle trees the builder stores are the ones fs-verity itself keeps
/// (as `fsverity digest --out-merkle-tree` writes them), of the size the
/// format crate's tree shape gives, with the digest the tool reports.
#[test]
fn merkle_tree_matches_fsverity_digest_at_boundary_sizes() {
    const B: usize = 4096;
    let dir = tempfile::tempdir().unwrap();
    for n in [
        0,
        1,
        B,
        B + 1,
        128 * B,
        128 * B + 1,
        (1 << 20) + 1,
        128 * 128 * B + 1,
    ] {
        let data = content(n);
        let path = dir.path().join(format!("f{n}"));
        fs::write(&path, &data).unwrap();
        let m = puzzlefs::verity::merkle(&data);
        let tool = tool_tree(&path, &dir.path().join(format!("t{n}")));
        assert!(m.tree == tool, "tree of a file of {n} bytes");
        assert_eq!(hex::encode(m.digest), tool_digest(&path), "{n} bytes");
        let shape = puzzlefs::format::merkle::Tree::new(n as u64).unwrap();
        assert_eq!(shape.size(), m.tree.len() as u64, "{n} bytes");
    }
}

/// Each metadata layer of more than one block gets its Merkle tree as a
/// blob, named in its fs-verity entry (a delta's base layers too), with an
/// entry of its own; `gc` keeps it; `--no-metadata-tree` stores none.
#[test]
fn metadata_layers_get_their_merkle_trees() {
    let src = tempfile::tempdir().unwrap();
    let v1 = src.path().join("v1");
    fs::create_dir_all(&v1).unwrap();
    // About 100 bytes of metadata an inode: several blocks.
    for i in 0..300 {
        fs::write(v1.join(format!("file-{i:04}")), content(i)).unwrap();
    }
    let tmp = tempfile::tempdir().unwrap();
    let oci = tmp.path();
    build(&v1, oci, "v1", &[]);
    let v2 = src.path().join("v2");
    copy_tree(&v1, &v2);
    fs::write(v2.join("new"), content(10)).unwrap();
    build(&v2, oci, "v2", &["-b", "v1"]);
    build(&v1, oci, "none", &["--no-metadata-tree"]);

    let dir = OciDir::open(oci).unwrap();
    for (tag, big_layers) in [("v1", 1), ("v2", 1), ("none", 0)] {
        let digest = dir.resolve(tag).unwrap();
        let img = puzzlefs::image::Image::open_tag(&dir, tag).unwrap();
        let trees = trees(oci, &digest);
        let entries = verity_entries(oci, &digest);
        let mut with_tree = 0;
        for layer in img.layer_refs() {
            let bytes = blob(oci, &layer.digest);
            match trees.get(&layer.digest) {
                Some(t) => {
                    with_tree += 1;
                    assert!(bytes.len() > 4096, "{tag}: a tree for one block");
                    let stored = blob(oci, t);
                    assert!(stored == puzzlefs::verity::merkle(&bytes).tree, "{tag}");
                    assert!(entries.iter().any(|(d, _)| d == t), "{tag}: no entry");
                }
                None => assert!(
                    tag == "none" || bytes.len() <= 4096,
                    "{tag}: layer of {} bytes has no tree",
                    bytes.len()
                ),
            }
        }
        assert!(with_tree >= big_layers, "{tag}: {with_tree} trees");
        assert!(check_entries(oci, tag).is_empty(), "{tag}");
    }
    // gc keeps every tree a tag names.
    ok(&[&"gc", &oci]);
    for tag in ["v1", "v2"] {
        for t in trees(oci, &dir.resolve(tag).unwrap()).values() {
            assert!(dir.blob_path(t).exists(), "{tag}: gc removed a tree");
        }
    }
}

/// Blob `digest` of `oci`, as stored.
fn blob(oci: &Path, digest: &[u8; 32]) -> Vec<u8> {
    fs::read(OciDir::open(oci).unwrap().blob_path(digest)).unwrap()
}

fn is_zstd_frame(data: &[u8]) -> bool {
    data.starts_with(&[0x28, 0xb5, 0x2f, 0xfd])
}

/// Checks every entry of image `tag` against `fsverity digest` of its blob
/// (and our function against the tool on the same blob); the metadata
/// layers must have entries. Returns the entries the tool disagrees with.
fn check_entries(oci: &Path, tag: &str) -> Vec<[u8; 32]> {
    let dir = OciDir::open(oci).unwrap();
    let manifest = dir.resolve(tag).unwrap();
    let entries = verity_entries(oci, &manifest);
    assert!(!entries.is_empty(), "{tag}: no fsVerityData");
    let mut wrong = Vec::new();
    for (digest, recorded) in &entries {
        let tool = tool_digest(&dir.blob_path(digest));
        assert_eq!(
            hex::encode(puzzlefs::verity::measure(&blob(oci, digest))),
            tool,
            "{tag}: blob {}",
            hex::encode(digest)
        );
        if hex::encode(recorded) != tool {
            wrong.push(*digest);
        }
    }
    let img = puzzlefs::image::Image::open_tag(&dir, tag).unwrap();
    for layer in img.layer_refs() {
        assert!(
            entries.iter().any(|(b, _)| *b == layer.digest),
            "{tag}: no entry for metadata blob {}",
            hex::encode(layer.digest)
        );
    }
    wrong
}

#[test]
fn the_other_implementations_entries_against_fsverity_digest() {
    let oci = fixture().join("oci");
    // plain and delta: every entry, the metadata blob's included, is the
    // blob's measurement.
    for tag in ["plain", "delta"] {
        assert_eq!(check_entries(&oci, tag), Vec::<[u8; 32]>::new(), "{tag}");
    }
    // zstd: the other implementation keeps a chunk uncompressed when zstd
    // does not make it smaller, but records for it a value that is not the
    // stored file's measurement (`fsverity digest` of these blobs disagrees).
    // Exactly those entries are wrong; the zstd frames and metadata are right.
    let wrong = check_entries(&oci, "zstd");
    assert!(!wrong.is_empty());
    for d in &wrong {
        assert!(!is_zstd_frame(&blob(&oci, d)), "{}", hex::encode(d));
    }
}

#[test]
fn rebuilt_fixture_manifests_match_the_other_implementation() {
    let src = tempfile::tempdir().unwrap();
    untar_fixture(src.path());
    let oci = tempfile::tempdir().unwrap();
    // The stream chunking policy is the other implementation's.
    let plain = build(
        &src.path().join("src"),
        oci.path(),
        "plain",
        &[
            "--chunking",
            "stream",
            "--no-metadata-tree",
            "--no-link-counts",
        ],
    );
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
    let fx = fixture().join("oci");
    let fxd = OciDir::open(&fx).unwrap();
    // The same manifest digest means the same manifest bytes: layers and
    // every fsVerityData entry.
    assert_eq!(plain, hex::encode(fxd.resolve("plain").unwrap()), "plain");
    // zstd: the same blobs and entries, except that ours are right where
    // the other implementation's are not (see above).
    let ours = verity_entries(oci.path(), &puzzlefs::oci::parse_digest(&zstd).unwrap());
    let theirs = verity_entries(&fx, &fxd.resolve("zstd").unwrap());
    let wrong = check_entries(&fx, "zstd");
    assert_eq!(ours.len(), theirs.len());
    for ((d, v), (td, tv)) in ours.iter().zip(&theirs) {
        assert_eq!(d, td, "the same blobs in the same order");
        if wrong.contains(d) {
            assert_ne!(v, tv);
        } else {
            assert_eq!(v, tv, "blob {}", hex::encode(d));
        }
    }
    for tag in ["plain", "zstd"] {
        assert!(check_entries(oci.path(), tag).is_empty(), "{tag}");
    }
}

/// Rewrites the manifest of `tag` with the fs-verity entry of `blob` set to
/// `value` (everything else as it was) and points the tag at it.
fn rewrite_entry(oci: &Path, tag: &str, blob: &[u8; 32], value: [u8; 32]) {
    let new = rewrite_manifest(oci, tag, |m| {
        let e = m.entries.iter_mut().find(|(d, _)| d == blob).unwrap();
        assert_ne!(e.1, value);
        e.1 = value;
    });
    assert!(new);
}

/// A delta build does not carry the base manifest's fs-verity entries over
/// as they are: images of older versions of this tool hold wrong ones for
/// blobs of one block, and the other implementation's zstd images for raw
/// chunks; the delta's entries are the measurements of the blob files.
#[test]
fn a_delta_build_measures_the_blobs_it_reuses() {
    let src = tempfile::tempdir().unwrap();
    let v1 = src.path().join("v1");
    fs::create_dir_all(v1.join("d")).unwrap();
    // Small files (one-block blobs: the sizes the old tool got wrong), one
    // of several blocks, and a large one of several chunks.
    fs::write(v1.join("small"), content(100)).unwrap();
    fs::write(v1.join("d/block"), content(4096)).unwrap();
    fs::write(v1.join("d/blocks"), content(3 * 4096 + 5)).unwrap();
    fs::write(v1.join("big"), content(1 << 20)).unwrap();
    let oci = tempfile::tempdir().unwrap();
    let oci = oci.path();
    build(&v1, oci, "v1", &[]);

    // Make the base carry a wrong entry for each blob of at most one block,
    // as the older tool did, and check that it does.
    let dir = OciDir::open(oci).unwrap();
    let base = verity_entries(oci, &dir.resolve("v1").unwrap());
    let small: Vec<[u8; 32]> = base
        .iter()
        .map(|(d, _)| *d)
        .filter(|d| blob(oci, d).len() <= 4096)
        .collect();
    assert!(!small.is_empty());
    for d in &small {
        rewrite_entry(oci, "v1", d, [0x5a; 32]);
    }
    let mut wrong = check_entries(oci, "v1");
    wrong.sort();
    let mut want = small.clone();
    want.sort();
    assert_eq!(wrong, want, "the base carries the wrong entries");

    // v2 keeps v1's files (their blobs come from the base) and adds one.
    let v2 = src.path().join("v2");
    copy_tree(&v1, &v2);
    fs::write(v2.join("d/new"), content(7000)).unwrap();
    build(&v2, oci, "v2", &["-b", "v1"]);
    assert_eq!(check_entries(oci, "v2"), Vec::<[u8; 32]>::new());
    let delta = verity_entries(oci, &dir.resolve("v2").unwrap());
    for d in &small {
        assert!(delta.iter().any(|(b, _)| b == d), "{}", hex::encode(d));
    }
    // Every blob the delta reads has an entry: its layers and every chunk.
    assert!(base.iter().all(|(d, _)| delta.iter().any(|(b, _)| b == d)));

    // A delta on the other implementation's zstd image, whose raw chunks
    // have wrong entries (see above), gets them right.
    let tmp = tempfile::tempdir().unwrap();
    let fx = tmp.path().join("oci");
    copy_tree(&fixture().join("oci"), &fx);
    // The fixture is read-only; its copy must take new blobs and a tag.
    let st = Command::new("chmod")
        .arg("-R")
        .arg("u+w")
        .arg(&fx)
        .status()
        .unwrap();
    assert!(st.success());
    let trees = tempfile::tempdir().unwrap();
    untar_fixture(trees.path());
    assert!(!check_entries(&fx, "zstd").is_empty());
    build(
        &trees.path().join("src-delta"),
        &fx,
        "zstd-delta",
        &["-c", "-b", "zstd"],
    );
    assert_eq!(check_entries(&fx, "zstd-delta"), Vec::<[u8; 32]>::new());
}
