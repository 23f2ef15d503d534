//! Inode lookup with per-layer hints (`find_inode_hinted`, what the kernel's
//! readdir uses) gives what a linear scan of the layers gives, whatever the
//! hints and the order of the lookups; in a layer that is not sorted it may
//! miss an inode but never returns another.

mod common;
use common::Rng;
use puzzlefs::format::{find_inode, find_inode_hinted, Error, Layer, MetadataBlob};
use puzzlefs::model::{encode_layer, InodeRec, Kind};
use puzzlefs::oci::Aligned;

fn rec(ino: u64, kind: Kind) -> InodeRec {
    InodeRec {
        ino,
        kind,
        uid: 0,
        gid: 0,
        permissions: 0o644,
        xattrs: vec![],
        symlink: None,
    }
}

/// What a reader must answer: the first layer that holds `ino` (by a scan
/// of every inode) decides; `None` for no layer, `Some(None)` for a
/// whiteout, `Some(Some(layer))` for an inode.
fn oracle(layers: &[Vec<u64>], whts: &[Vec<u64>], ino: u64) -> Option<Option<usize>> {
    for (i, l) in layers.iter().enumerate() {
        if l.contains(&ino) {
            return Some((!whts[i].contains(&ino)).then_some(i));
        }
    }
    None
}

/// The answer as the oracle gives it, and the layer told by the inode's
/// permissions (each layer's inodes carry its index).
fn answer(r: puzzlefs::format::Result<puzzlefs::format::Inode<'_>>) -> Option<Option<u16>> {
    match r {
        Ok(i) => Some(Some(i.permissions())),
        Err(Error::Whiteout(_)) => Some(None),
        Err(Error::InodeNotFound(_)) => None,
        Err(e) => panic!("unexpected error {e}"),
    }
}

/// Layers whose inodes carry their layer's index as permissions.
fn layers_of(sets: &[Vec<u64>], whts: &[Vec<u64>]) -> Vec<Aligned> {
    sets.iter()
        .zip(whts)
        .enumerate()
        .map(|(i, (inos, w))| {
            let recs: Vec<InodeRec> = inos
                .iter()
                .map(|&n| {
                    let mut r = rec(
                        n,
                        if w.contains(&n) {
                            Kind::Wht
                        } else {
                            Kind::Fifo
                        },
                    );
                    r.permissions = i as u16;
                    r
                })
                .collect();
            Aligned::copy_from(&encode_layer(&recs))
        })
        .collect()
}

#[test]
fn hinted_lookups_agree_with_a_scan_of_sorted_layers() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    // Top first: a delta with runs and gaps, one with whiteouts, a full base.
    let sets: Vec<Vec<u64>> = vec![
        (1..=40).filter(|i| i % 7 < 3).chain(200..230).collect(),
        (5..=120).step_by(3).collect(),
        (1..=300).collect(),
    ];
    let whts: Vec<Vec<u64>> = vec![vec![], (5..=120).step_by(9).collect(), vec![]];
    let bufs = layers_of(&sets, &whts);
    let blobs: Vec<MetadataBlob<'_>> = bufs
        .iter()
        .map(|b| MetadataBlob::parse(b).unwrap())
        .collect();
    let views: Vec<Layer<'_>> = blobs.iter().map(|b| b.layer().unwrap()).collect();
    let max = 302u64;
    let expect = |ino: u64| oracle(&sets, &whts, ino).map(|o| o.map(|l| l as u16));

    // Ascending runs (readdir's case), descending, and random orders, each
    // from zeroed, random and out-of-range hints; and fewer hints than
    // layers.
    let ascending: Vec<u64> = (0..=max).collect();
    let descending: Vec<u64> = (0..=max).rev().collect();
    let random: Vec<u64> = (0..2000).map(|_| rng.next() % (max + 1)).collect();
    for order in [&ascending, &descending, &random] {
        for start in 0..4 {
            let mut hints: Vec<u32> = match start {
                0 => vec![0; views.len()],
                1 => (0..views.len()).map(|_| rng.next() as u32 % 320).collect(),
                2 => vec![u32::MAX; views.len()],
                _ => vec![0; 1],
            };
            for &ino in order.iter() {
                let hinted = find_inode_hinted(views.iter().copied(), ino, &mut hints);
                assert_eq!(answer(hinted), expect(ino), "ino {ino}, hints {hints:?}");
                // The plain binary search agrees too.
                assert_eq!(answer(find_inode(views.iter().copied(), ino)), expect(ino));
            }
        }
    }

    // A hint left right before each inode of a run finds it in place and
    // moves past it.
    let mut hint = 0u32;
    for (pos, &ino) in sets[2].iter().enumerate() {
        let found = views[2].find_pos_hinted(ino, &mut hint).unwrap();
        assert_eq!(found.map(|(p, i)| (p, i.ino())), Some((pos as u32, ino)));
        assert_eq!(hint, pos as u32 + 1);
    }
}

#[test]
fn hinted_lookups_in_an_unsorted_layer_never_return_another_inode() {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    // A hostile layer: numbers out of order, repeated, and huge.
    let inos: Vec<u64> = vec![9, 3, 3, 50, 7, 1, u64::MAX, 2, 40, 8, 0, 41];
    let bufs = layers_of(std::slice::from_ref(&inos), &[vec![]]);
    let blob = MetadataBlob::parse(&bufs[0]).unwrap();
    let layer = blob.layer().unwrap();
    for _ in 0..5000 {
        let ino = match rng.next() % 4 {
            0 => inos[(rng.next() % inos.len() as u64) as usize],
            1 => rng.next() % 60,
            2 => u64::MAX - rng.next() % 2,
            _ => rng.next(),
        };
        let mut hint = match rng.next() % 3 {
            0 => (rng.next() % 16) as u32,
            1 => u32::MAX - (rng.next() % 2) as u32,
            _ => 0,
        };
        if let Some((pos, i)) = layer.find_pos_hinted(ino, &mut hint).unwrap() {
            assert_eq!(i.ino(), ino);
            assert_eq!(inos[pos as usize], ino);
        }
    }
}

/// The kind as the generated `which()` reads it, following the member's
/// pointer (what `Inode::kind` did before it read the discriminant only).
fn kind_by_which(
    i: &puzzlefs::format::Inode<'_>,
) -> puzzlefs::format::Result<puzzlefs::format::InodeKind> {
    use puzzlefs::format::metadata_capnp::inode::mode::Which;
    use puzzlefs::format::InodeKind;
    Ok(match i.raw().get_mode().which()? {
        Which::Unknown(()) => InodeKind::Unknown,
        Which::Fifo(()) => InodeKind::Fifo,
        Which::Chr(_) => InodeKind::Chr,
        Which::Dir(_) => InodeKind::Dir,
        Which::Blk(_) => InodeKind::Blk,
        Which::File(_) => InodeKind::File,
        Which::Lnk(()) => InodeKind::Lnk,
        Which::Sock(()) => InodeKind::Sock,
        Which::Wht(()) => InodeKind::Wht,
    })
}

#[test]
fn the_kind_read_from_the_discriminant_is_the_kind_which_reads() {
    use puzzlefs::format::{BlobRef, InodeKind};
    use puzzlefs::model::FileChunk;
    let kinds = vec![
        Kind::Unknown,
        Kind::Fifo,
        Kind::Chr { major: 4, minor: 5 },
        Kind::Dir {
            entries: vec![(b"a".to_vec(), 3)],
        },
        Kind::Blk { major: 8, minor: 1 },
        Kind::File {
            chunks: vec![FileChunk {
                blob: BlobRef {
                    digest: [7; 32],
                    offset: 0,
                    compressed: false,
                },
                len: 10,
            }],
        },
        Kind::Lnk,
        Kind::Sock,
        Kind::Wht,
        // Payload-less members whose pointer is absent.
        Kind::Dir { entries: vec![] },
        Kind::File { chunks: vec![] },
    ];
    let recs: Vec<InodeRec> = kinds
        .into_iter()
        .enumerate()
        .map(|(i, k)| rec(i as u64 + 1, k))
        .collect();
    let layer = encode_layer(&recs);
    let expected = [
        InodeKind::Unknown,
        InodeKind::Fifo,
        InodeKind::Chr,
        InodeKind::Dir,
        InodeKind::Blk,
        InodeKind::File,
        InodeKind::Lnk,
        InodeKind::Sock,
        InodeKind::Wht,
        InodeKind::Dir,
        InodeKind::File,
    ];
    let buf = Aligned::copy_from(&layer);
    let blob = MetadataBlob::parse(&buf).unwrap();
    let got: Vec<InodeKind> = blob
        .layer()
        .unwrap()
        .inodes()
        .map(|i| i.kind().unwrap())
        .collect();
    assert_eq!(got, expected);

    // Every byte of the layer changed to each of a few values: the two
    // readers agree on every inode still reachable (kind or error).
    let mut seen_bad = 0;
    for at in 0..layer.len() {
        for v in [0u8, 1, 8, 9, 0x7f, 0xff] {
            let mut bad = layer.clone();
            bad[at] = v;
            let buf = Aligned::copy_from(&bad);
            let Ok(blob) = MetadataBlob::parse(&buf) else {
                continue;
            };
            let Ok(l) = blob.layer() else {
                continue;
            };
            for i in l.inodes() {
                let (a, b) = (i.kind(), kind_by_which(&i));
                match (&a, &b) {
                    (Ok(x), Ok(y)) => assert_eq!(x, y, "byte {at} = {v}"),
                    (Err(Error::NotInSchema(x)), Err(Error::NotInSchema(y))) => {
                        assert_eq!(x, y);
                        seen_bad += 1;
                    }
                    _ => panic!("byte {at} = {v}: {a:?} against {b:?}"),
                }
            }
        }
    }
    assert!(seen_bad > 0, "some change hit a discriminant");
}
