//! The link-count table a build records in its manifest (`Rootfs.linkCounts`)
//! against the source tree: for every name of the image, the table's count of
//! its inode (1 when not listed) is the number of names the source gives that
//! file (its `(st_dev, st_ino)` among the tree's paths), base and delta tags
//! alike; `--no-link-counts` records none.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use common::*;
use puzzlefs::format::{find_inode, InodeKind};
use puzzlefs::image::{views, walk, Image};
use puzzlefs::oci::OciDir;

/// A path as name components.
type Path8 = Vec<Vec<u8>>;

/// Every non-directory path of `root` (relative, as name components), with
/// the number of paths of the tree that name the same file.
fn source_names(root: &Path) -> BTreeMap<Path8, u32> {
    let mut paths: Vec<(Path8, (u64, u64))> = Vec::new();
    for e in walkdir::WalkDir::new(root).min_depth(1) {
        let e = e.unwrap();
        let m = fs::symlink_metadata(e.path()).unwrap();
        if m.is_dir() {
            continue;
        }
        let rel = e.path().strip_prefix(root).unwrap();
        let comps = rel
            .components()
            .map(|c| c.as_os_str().as_encoded_bytes().to_vec())
            .collect();
        paths.push((comps, (m.dev(), m.ino())));
    }
    let mut per_file: HashMap<(u64, u64), u32> = HashMap::new();
    for (_, key) in &paths {
        *per_file.entry(*key).or_default() += 1;
    }
    paths
        .into_iter()
        .map(|(p, key)| (p, per_file[&key]))
        .collect()
}

/// Every non-directory path of image `tag` with the count its manifest's
/// table gives its inode (1 if not listed); `None` if it records no table.
fn image_names(oci: &Path, tag: &str) -> Option<BTreeMap<Path8, u32>> {
    let dir = OciDir::open(oci).unwrap();
    let img = Image::open_tag(&dir, tag).unwrap();
    let table: HashMap<u64, u32> = img
        .manifest()
        .link_counts()
        .unwrap()?
        .map(|e| e.map(|e| (e.ino, e.count)))
        .collect::<Result<_, _>>()
        .unwrap();
    let blobs = img.blobs();
    let layers = views(&blobs).unwrap();
    let mut names = BTreeMap::new();
    walk(&layers, |node| {
        if node.inode.kind().unwrap() != InodeKind::Dir {
            let ino = node.inode.ino();
            // The walk found this inode where the layers say it is.
            assert_eq!(find_inode(layers.iter().copied(), ino).unwrap().ino(), ino);
            names.insert(node.path.clone(), table.get(&ino).copied().unwrap_or(1));
        }
        Ok(())
    })
    .unwrap();
    Some(names)
}

fn link(from: &Path, to: &Path) {
    fs::hard_link(from, to).unwrap();
}

fn tree(root: &Path) -> PathBuf {
    fs::create_dir_all(root.join("d/e")).unwrap();
    fs::create_dir_all(root.join("keep")).unwrap();
    fs::write(root.join("three"), b"four names").unwrap();
    link(&root.join("three"), &root.join("d/three-b"));
    link(&root.join("three"), &root.join("d/e/three-c"));
    link(&root.join("three"), &root.join("keep/three-k"));
    fs::write(root.join("d/two"), b"two names").unwrap();
    link(&root.join("d/two"), &root.join("two-b"));
    fs::write(root.join("one"), b"one name").unwrap();
    fs::write(root.join("d/e/alone"), b"").unwrap();
    std::os::unix::fs::symlink("one", root.join("sym")).unwrap();
    link(&root.join("sym"), &root.join("d/sym-b"));
    root.to_path_buf()
}

#[test]
fn recorded_counts_are_the_source_trees() {
    let t = tempfile::tempdir().unwrap();
    let v1 = tree(&t.path().join("v1"));
    let oci = t.path().join("oci");
    build(&v1, &oci, "v1", &[]);
    let want1 = source_names(&v1);
    assert_eq!(image_names(&oci, "v1").unwrap(), want1);
    assert!(want1.values().any(|&n| n == 4) && want1.values().any(|&n| n == 1));

    // v2 over v1: a name of "three" and the second name of "two" removed,
    // "one" gains a name, a new file with two names; keep/ is unchanged, so
    // only the base layer lists it: the delta's table is the whole v2's,
    // not the new layer's alone.
    let v2 = t.path().join("v2");
    copy_tree(&v1, &v2); // cp -a: the hard links too
    fs::remove_file(v2.join("d/e/three-c")).unwrap();
    fs::remove_file(v2.join("two-b")).unwrap();
    link(&v2.join("one"), &v2.join("d/e/one-b"));
    fs::write(v2.join("new"), b"new").unwrap();
    link(&v2.join("new"), &v2.join("d/new-b"));
    assert_eq!(source_names(&v2)[&vec![b"three".to_vec()]], 3);
    build(&v2, &oci, "v2", &["-b", "v1"]);
    assert_eq!(image_names(&oci, "v2").unwrap(), source_names(&v2));
    // v1 is still v1.
    assert_eq!(image_names(&oci, "v1").unwrap(), want1);

    build(&v1, &oci, "none", &["--no-link-counts"]);
    assert!(image_names(&oci, "none").is_none());

    // inspect says whether the table matches a walk of the image.
    let groups = want1.values().filter(|&&n| n > 1).count();
    assert!(groups < want1.len());
    let json = |tag: &str| -> serde_json::Value {
        let out = ok(&[&"inspect", &"--json", &oci, &tag]);
        serde_json::from_str(&out).unwrap()
    };
    let v1 = &json("v1")["images"][0];
    // Hard links of one file are one entry: "three" has 4 names, "two",
    // "sym" 2 each.
    assert_eq!(v1["link_counts"], 3);
    assert_eq!(v1["link_counts_match"], true);
    assert_eq!(json("v2")["images"][0]["link_counts_match"], true);
    assert!(json("none")["images"][0]["link_counts"].is_null());
    // A well-formed table that is wrong: one count off.
    rewrite_manifest(&oci, "v1", |m| {
        m.links.as_mut().unwrap()[0].count += 1;
    });
    let v1 = &json("v1")["images"][0];
    assert_eq!(v1["link_counts"], 3);
    assert_eq!(v1["link_counts_match"], false);
    let text = ok(&[&"inspect", &oci, &"v1"]);
    assert!(text.contains("NOT what the walk counts"), "{text}");
}

#[test]
fn a_tree_without_hard_links_records_an_empty_table() {
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("src");
    fs::create_dir_all(src.join("d")).unwrap();
    fs::write(src.join("a"), b"a").unwrap();
    fs::write(src.join("d/b"), b"b").unwrap();
    let oci = t.path().join("oci");
    build(&src, &oci, "t", &[]);
    let names = image_names(&oci, "t").unwrap();
    assert_eq!(names, source_names(&src));
    assert!(names.values().all(|&n| n == 1));
}
