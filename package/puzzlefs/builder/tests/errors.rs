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

#[test]
fn a_delta_past_max_layers_is_refused_and_writes_nothing() {
    use puzzlefs::format::MAX_LAYERS;
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("src");
    fs::create_dir(&src).unwrap();
    let oci = t.path().join("oci");
    let delta = |base: usize| BuildOptions {
        base: Some(format!("l{base}")),
        ..Default::default()
    };
    fs::write(src.join("n"), b"0").unwrap();
    build(&src, &oci, "l0", &BuildOptions::default()).unwrap();
    for i in 1..MAX_LAYERS {
        fs::write(src.join("n"), i.to_string()).unwrap();
        build(&src, &oci, &format!("l{i}"), &delta(i - 1)).unwrap();
    }
    let top = MAX_LAYERS - 1;
    let listing = |dir: &std::path::Path| {
        let mut names: Vec<_> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        names.sort();
        names
    };
    let index = fs::read(oci.join("index.json")).unwrap();
    let blobs = listing(&oci.join("blobs/sha256"));

    fs::write(src.join("n"), b"past").unwrap();
    let e = build(&src, &oci, "past", &delta(top)).unwrap_err();
    assert!(
        matches!(&e, Error::TooManyLayers { base, layers } if *base == format!("l{top}") && *layers == MAX_LAYERS),
        "{e:?}"
    );
    assert!(e.to_string().contains("more than the 256"), "{e}");
    assert_eq!(fs::read(oci.join("index.json")).unwrap(), index);
    assert_eq!(listing(&oci.join("blobs/sha256")), blobs);

    // The image at the bound is whole: the top layer's contents come back.
    let dest = t.path().join("dest");
    puzzlefs::extract::extract(
        &oci,
        &format!("l{top}"),
        &dest,
        &puzzlefs::progress::Progress::hidden(),
    )
    .unwrap();
    assert_eq!(
        fs::read(dest.join("n")).unwrap(),
        top.to_string().as_bytes()
    );
}
