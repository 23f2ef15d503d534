//! The tool's contract with its users and other writers of the OCI
//! directory: argument checks, help, tags, index.json, temporary files,
//! gc, broken pipes, file capabilities, unprivileged runs.

mod common;

use std::fs;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::{Command, Stdio};

use common::*;

fn small_tree(root: &Path, seed: &str) {
    fs::create_dir_all(root.join("d")).unwrap();
    fs::write(root.join("a"), format!("file a of {seed}")).unwrap();
    fs::write(root.join("d/b"), seed.repeat(5000)).unwrap();
}

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn arguments_and_help() {
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("src");
    small_tree(&src, "x");
    let oci = t.path().join("oci");
    // A level without compression means nothing: refused.
    let o = run(&[&"build", &"-l", &"9", &src, &oci, &"t"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("--compression"), "{}", stderr(&o));
    assert!(!oci.exists(), "nothing created");
    build(&src, &oci, "t", &["-c", "-l", "9"]);
    let help = ok(&[&"build", &"--help"]);
    assert!(help.contains("number of CPUs"), "{help}");
    for arg in ["Directory tree to store", "OCI directory", "Tag to point"] {
        assert!(help.contains(arg), "{arg} in {help}");
    }
    let help = ok(&[&"extract", &"--help"]);
    assert!(help.contains("Destination"), "{help}");
}

#[test]
fn tags_follow_the_oci_grammar_and_a_missing_base_creates_nothing() {
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("src");
    small_tree(&src, "x");
    let oci = t.path().join("oci");
    let long = "a".repeat(129);
    for bad in ["", "-x", ".x", "a/b", "a:b", "a b", "é", long.as_str()] {
        let o = run(&[&"build", &"--", &src, &oci, &bad]);
        assert!(!o.status.success(), "tag {bad:?} accepted");
        assert!(stderr(&o).contains("invalid tag"), "{}", stderr(&o));
        assert!(!oci.exists(), "tag {bad:?}: nothing created");
    }
    let o = run(&[&"build", &"-b", &"nope", &src, &oci, &"t"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("nope") || stderr(&o).contains("oci-layout"));
    assert!(!oci.exists(), "a missing base creates nothing");
    for good in ["v1", "_x", "A.b-c_d", &"a".repeat(128)] {
        build(&src, &oci, good, &[]);
    }
    // A missing base tag in an existing directory: no new blob either.
    let before = blobs(&oci);
    let o = run(&[&"build", &"-b", &"nope", &src, &oci, &"t2"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("nope"), "{}", stderr(&o));
    assert_eq!(blobs(&oci), before);
}

#[test]
fn unknown_index_fields_are_kept() {
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("src");
    small_tree(&src, "x");
    let oci = t.path().join("oci");
    build(&src, &oci, "a", &[]);
    let path = oci.join("index.json");
    let mut v: serde_json::Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
    v["someone.else"] = serde_json::json!({"keep": [1, 2]});
    v["manifests"][0]["platform"] = serde_json::json!({"os": "linux"});
    v["manifests"][0]["annotations"]["org.example"] = "mine".into();
    fs::write(&path, serde_json::to_vec(&v).unwrap()).unwrap();
    small_tree(&src, "y");
    build(&src, &oci, "a", &[]);
    build(&src, &oci, "b", &[]);
    let w: serde_json::Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
    assert_eq!(w["someone.else"], v["someone.else"]);
    assert_eq!(w["manifests"][0]["platform"], v["manifests"][0]["platform"]);
    assert_eq!(w["manifests"].as_array().unwrap().len(), 2);
    assert_ne!(w["manifests"][0]["digest"], v["manifests"][0]["digest"]);
}

#[test]
fn temporary_files_of_dead_builds_are_swept() {
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("src");
    small_tree(&src, "x");
    let oci = t.path().join("oci");
    build(&src, &oci, "a", &[]);
    // What a killed build leaves (pid far above pid_max: no such process),
    // and a file of a live writer (this test), which must stay.
    let dead = oci.join("blobs/sha256/.0123.tmp.999999999.7");
    let live = oci.join(format!("blobs/sha256/.4567.tmp.{}.0", std::process::id()));
    let dead_index = oci.join(".index.json.tmp.999999999.1");
    for p in [&dead, &live, &dead_index] {
        fs::write(p, b"partial").unwrap();
    }
    build(&src, &oci, "b", &[]);
    assert!(!dead.exists() && !dead_index.exists(), "swept");
    assert!(live.exists(), "a running writer's file stays");
}

#[test]
fn gc_removes_what_no_tag_reaches() {
    let t = tempfile::tempdir().unwrap();
    let (s1, s2) = (t.path().join("s1"), t.path().join("s2"));
    small_tree(&s1, "one");
    small_tree(&s2, "two");
    fs::write(s2.join("big"), "two".repeat(100_000)).unwrap();
    let oci = t.path().join("oci");
    build(&s1, &oci, "a", &[]);
    let only_a = blobs(&oci);
    build(&s2, &oci, "b", &["-b", "a"]);
    build(&s2, &oci, "c", &["-c"]);
    let all = blobs(&oci);
    // Nothing unreachable yet.
    ok(&[&"gc", &oci]);
    assert_eq!(blobs(&oci), all);
    // Retag c to the contents of a: c's old blobs are unreachable, b's
    // stay (its delta layer and its base a's layer).
    build(&s1, &oci, "c", &[]);
    let o = run(&[&"-v", &"gc", &"--dry-run", &oci]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("would remove"), "{}", stderr(&o));
    assert_eq!(blobs(&oci), all, "a dry run removes nothing");
    ok(&[&"gc", &oci]);
    let left = blobs(&oci);
    assert!(left.len() < all.len());
    for b in &only_a {
        assert!(left.contains(b), "blob {b} of tag a removed");
    }
    for tag in ["a", "b", "c"] {
        let dest = t.path().join(format!("out-{tag}"));
        ok(&[&"-q", &"extract", &oci, &tag, &dest]);
        let want = if tag == "b" { &s2 } else { &s1 };
        assert_same_tree(want, &dest);
    }
    // Untag everything but a: only a's blobs remain.
    let path = oci.join("index.json");
    let mut v: serde_json::Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
    v["manifests"].as_array_mut().unwrap().truncate(1);
    fs::write(&path, serde_json::to_vec(&v).unwrap()).unwrap();
    ok(&[&"gc", &oci]);
    assert_eq!(blobs(&oci), only_a);
}

#[test]
fn a_closed_stdout_is_a_clean_exit() {
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("src");
    small_tree(&src, "x");
    let oci = t.path().join("oci");
    build(&src, &oci, "t", &[]);
    // Many tags: more JSON than a pipe holds, so the tool writes into a
    // closed pipe.
    let path = oci.join("index.json");
    let mut v: serde_json::Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
    let d = v["manifests"][0].clone();
    for i in 0..400 {
        let mut x = d.clone();
        x["annotations"]["org.opencontainers.image.ref.name"] = format!("t{i}").into();
        v["manifests"].as_array_mut().unwrap().push(x);
    }
    fs::write(&path, serde_json::to_vec(&v).unwrap()).unwrap();
    let mut child = Command::new(bin())
        .args(["inspect", "--json"])
        .arg(&oci)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 1];
    child.stdout.take().unwrap().read_exact(&mut first).unwrap();
    let o = child.wait_with_output().unwrap();
    assert_eq!(&first, b"{");
    assert!(o.status.success(), "{:?}: {}", o.status, stderr(&o));
    assert!(stderr(&o).is_empty(), "{}", stderr(&o));
}

/// A `security.capability` value (VFS_CAP_REVISION_2, effective,
/// cap_net_raw permitted), as setcap writes it.
fn capability() -> Vec<u8> {
    let mut v = Vec::new();
    for w in [0x0200_0001u32, 1 << 13, 0, 0, 0] {
        v.extend_from_slice(&w.to_le_bytes());
    }
    v
}

#[test]
fn file_capabilities_survive_extract() {
    if !is_root() {
        panic!("this test sets file capabilities: run it as root (make test does)");
    }
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("src");
    small_tree(&src, "x");
    let bin_path = src.join("ping");
    fs::write(&bin_path, b"\x7fELF pretend").unwrap();
    std::os::unix::fs::chown(&bin_path, Some(0), Some(4242)).unwrap();
    puzzlefs::sys::set_xattr(&bin_path, b"security.capability", &capability()).unwrap();
    let oci = t.path().join("oci");
    build(&src, &oci, "t", &[]);
    let dest = t.path().join("out");
    ok(&[&"-q", &"extract", &oci, &"t", &dest]);
    let out = dest.join("ping");
    assert_eq!(
        puzzlefs::sys::get_xattr(&out, b"security.capability").unwrap(),
        capability(),
        "the capability survives the chown"
    );
    assert_eq!(fs::metadata(&out).unwrap().gid(), 4242);
}

/// Runs the tool as uid/gid 65534 (setpriv), for what root would not see.
fn run_as_nobody(args: &[&dyn AsRef<std::ffi::OsStr>]) -> std::process::Output {
    let mut c = Command::new("setpriv");
    c.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"]);
    c.arg(bin());
    for a in args {
        c.arg(a.as_ref());
    }
    c.output().expect("setpriv")
}

#[test]
fn an_unreadable_file_is_an_error_naming_it() {
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("src");
    small_tree(&src, "x");
    fs::write(src.join("secret"), b"s").unwrap();
    fs::set_permissions(
        src.join("secret"),
        std::os::unix::fs::PermissionsExt::from_mode(0o000),
    )
    .unwrap();
    let oci = t.path().join("oci");
    let o = if is_root() {
        // Root reads everything: the unprivileged user does not.
        fs::set_permissions(
            t.path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        let st = Command::new("chown")
            .args(["-R", "65534:65534"])
            .arg(t.path())
            .status()
            .unwrap();
        assert!(st.success());
        run_as_nobody(&[&"build", &src, &oci, &"t"])
    } else {
        run(&[&"build", &src, &oci, &"t"])
    };
    assert!(!o.status.success());
    assert!(stderr(&o).contains("secret"), "{}", stderr(&o));
    assert!(!oci.join("index.json").exists(), "no tag written");
}
