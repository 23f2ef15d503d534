//! The library's errors are typed: a caller can tell them apart without
//! reading messages, and `{:#}` of the chain names each part once.

use std::fs;

use puzzlefs::build::{build, BuildOptions};
use puzzlefs::oci::OciError;
use puzzlefs::Error;

/// Every error crosses threads and can go into anyhow.
const _: fn() = || {
    fn check<T: std::error::Error + Send + Sync + 'static>() {}
    check::<Error>();
};

#[test]
fn build_errors_are_variants() {
    let t = tempfile::tempdir().unwrap();
    let file = t.path().join("file");
    fs::write(&file, b"x").unwrap();
    let oci = t.path().join("oci");

    let e = build(&file, &oci, "t", &BuildOptions::default()).unwrap_err();
    assert!(
        matches!(&e, Error::NotADirectory { path } if *path == file),
        "{e:?}"
    );

    let src = t.path().join("src");
    fs::create_dir(&src).unwrap();
    build(&src, &oci, "t", &BuildOptions::default()).unwrap();
    let opts = BuildOptions {
        base: Some("nope".into()),
        ..Default::default()
    };
    let e = build(&src, &oci, "t2", &opts).unwrap_err();
    match &e {
        Error::Context { what, source } => {
            assert_eq!(what, "base layer \"nope\"");
            assert!(
                matches!(&**source, Error::Oci(OciError::NoTag { tag, .. }) if tag == "nope"),
                "{source:?}"
            );
        }
        _ => panic!("{e:?}"),
    }
    let chain = format!("{:#}", anyhow::Error::from(e));
    assert_eq!(chain.matches("nope").count(), 2, "{chain}");
}

#[test]
fn extract_into_a_non_empty_directory_is_refused() {
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("src");
    fs::create_dir(&src).unwrap();
    let oci = t.path().join("oci");
    build(&src, &oci, "t", &BuildOptions::default()).unwrap();
    let dest = t.path().join("dest");
    fs::create_dir(&dest).unwrap();
    fs::write(dest.join("keep"), b"mine").unwrap();
    let e = puzzlefs::extract::extract(&oci, "t", &dest, &puzzlefs::progress::Progress::hidden())
        .unwrap_err();
    assert!(
        matches!(&e, Error::NotEmpty { path } if *path == dest),
        "{e:?}"
    );
    assert_eq!(fs::read(dest.join("keep")).unwrap(), b"mine");
}
