//! The paged metadata reader (`format::paged`) against the capnp-backed
//! views: the same value for every accessor where capnp succeeds, an error
//! where it fails, on generated layers, the upstream fixture, multi-segment
//! messages with far and double-far pointers, hand-made messages of other
//! struct sizes and list encodings, and every byte of small layers
//! mutated; a page source that fails pages; and the pages a lookup reads in
//! a 100,000-entry layer.

mod common;
use common::Rng;

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;

use puzzlefs::format::metadata_capnp::inode_vector;
use puzzlefs::format::paged::{self, Pages, PAGE};
use puzzlefs::format::{BlobRef, ChunkList, Error, MetadataBlob, NAME_MAX};
use puzzlefs::model::{encode_layer, FileChunk, InodeRec, Kind};
use puzzlefs::oci::Aligned;

// ---------------------------------------------------------------------------
// Page sources

/// A page source over bytes that records the distinct pages read, counts
/// `page()` calls, and fails the pages in `fail`.
struct Counting<'a> {
    data: &'a [u8],
    seen: RefCell<BTreeSet<u64>>,
    calls: Cell<u64>,
    fail: BTreeSet<u64>,
}

impl<'a> Counting<'a> {
    fn new(data: &'a [u8]) -> Self {
        Counting {
            data,
            seen: RefCell::new(BTreeSet::new()),
            calls: Cell::new(0),
            fail: BTreeSet::new(),
        }
    }

    fn failing(data: &'a [u8], fail: impl IntoIterator<Item = u64>) -> Self {
        let mut c = Counting::new(data);
        c.fail = fail.into_iter().collect();
        c
    }

    fn distinct(&self) -> usize {
        self.seen.borrow().len()
    }

    fn reset(&self) {
        self.seen.borrow_mut().clear();
        self.calls.set(0);
    }
}

impl Pages for Counting<'_> {
    type Page<'b>
        = &'b [u8]
    where
        Self: 'b;

    fn len(&self) -> u64 {
        self.data.len() as u64
    }

    fn page(&self, index: u64) -> puzzlefs::format::Result<&[u8]> {
        self.calls.set(self.calls.get() + 1);
        self.seen.borrow_mut().insert(index);
        if self.fail.contains(&index) {
            return Err(Error::Io);
        }
        self.data.page(index)
    }
}

// ---------------------------------------------------------------------------
// Observations: every accessor's answer, keyed, for both readers.

/// What one accessor answered: its value, or that it failed (and whether
/// with capnp's read limit, which the paged reader charges differently).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Ans {
    Val(String),
    Err,
    Budget,
}

fn ans<T: Debug>(r: puzzlefs::format::Result<T>) -> Ans {
    match r {
        Ok(v) => Ans::Val(format!("{v:?}")),
        Err(Error::Capnp(capnp::ErrorKind::ReadLimitExceeded)) => Ans::Budget,
        Err(_) => Ans::Err,
    }
}

type Obs = BTreeMap<String, Ans>;

/// Query inputs, taken from the capnp side so both sides ask the same.
#[derive(Default)]
struct Queries {
    /// Names to look up, per directory inode position.
    names: BTreeMap<u32, Vec<Vec<u8>>>,
    /// Xattr keys to look up, per inode position.
    keys: BTreeMap<u32, Vec<Vec<u8>>>,
    /// Inode numbers to find.
    inos: Vec<u64>,
}

/// Positions to visit in a list of `n` (all, or the first and last `cap / 2`).
fn positions(n: u32, cap: u32) -> Vec<u32> {
    if n <= cap {
        (0..n).collect()
    } else {
        (0..cap / 2).chain(n - cap / 2..n).collect()
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn extra_names(q: &mut Vec<Vec<u8>>) {
    for n in [&b""[..], b"a", b"zzzz", b"\xff\xff", b"."] {
        q.push(n.to_vec());
    }
    if let Some(first) = q.first().cloned() {
        let mut longer = first.clone();
        longer.push(0);
        q.push(longer);
        if first.len() > 1 {
            q.push(first[..first.len() - 1].to_vec());
        }
    }
}

/// Walks a layer through the capnp-backed views (a fresh `MetadataBlob`,
/// i.e. a fresh read budget, per inode and per lookup, as a reader that
/// parses a blob per operation would).
fn walk_capnp(buf: &[u8], cap: u32) -> (Obs, Queries) {
    let mut o = Obs::new();
    let mut q = Queries::default();
    let fresh = || MetadataBlob::parse(buf);
    let with_layer = |f: &mut dyn FnMut(puzzlefs::format::Layer<'_>) -> Ans| -> Ans {
        match fresh() {
            Err(e) => ans::<()>(Err(e)),
            Ok(b) => match b.layer() {
                Err(e) => ans::<()>(Err(e)),
                Ok(l) => f(l),
            },
        }
    };
    let head = with_layer(&mut |l| ans(Ok((l.len(), l.is_sorted(), l.max_ino()))));
    let ok = matches!(head, Ans::Val(_));
    o.insert("layer".into(), head);
    if !ok {
        return (o, q);
    }
    let blob = fresh().unwrap();
    let len = blob.layer().unwrap().len();
    let mut inos = BTreeSet::from([0u64, 1, 2, u64::MAX]);
    for pos in positions(len, cap) {
        let blob = fresh().unwrap();
        let layer = blob.layer().unwrap();
        let i = layer.inode_at(pos).unwrap();
        let k = |s: &str| format!("{pos}.{s}");
        inos.insert(i.ino());
        inos.insert(i.ino().wrapping_add(1));
        o.insert(k("ino"), ans(Ok(i.ino())));
        o.insert(k("kind"), ans(i.kind()));
        o.insert(k("uid"), ans(Ok(i.uid())));
        o.insert(k("gid"), ans(Ok(i.gid())));
        o.insert(k("perm"), ans(Ok(i.permissions())));
        o.insert(k("mode"), ans(i.mode()));
        o.insert(k("rdev"), ans(i.rdev()));
        o.insert(
            k("symlink"),
            ans(i.symlink_target().map(|t| t.map(|t| t.to_vec()))),
        );
        let xs = i.xattrs();
        o.insert(
            k("xattrs"),
            ans(xs.as_ref().map(|x| x.len()).map_err(|e| *e)),
        );
        let mut keys = vec![b"user.nope".to_vec(), vec![]];
        if let Ok(xs) = xs {
            for (j, x) in (0u32..).zip(xs).take(cap as usize) {
                if let Ok(x) = &x {
                    keys.push(x.key.to_vec());
                }
                o.insert(
                    k(&format!("x{j}")),
                    ans(x.map(|x| (x.key.to_vec(), x.value.to_vec()))),
                );
            }
        }
        for key in &keys {
            o.insert(
                k(&format!("xget.{}", hex(key))),
                ans(i.xattr(key).map(|v| v.map(|v| v.to_vec()))),
            );
        }
        q.keys.insert(pos, keys);
        match i.dir() {
            Err(e) => {
                o.insert(k("dir"), ans::<()>(Err(e)));
            }
            Ok(d) => {
                o.insert(k("dir"), ans(Ok((d.ino(), d.look_below(), d.len()))));
                o.insert(k("dir.sorted"), ans(d.is_sorted()));
                let mut names = vec![];
                for j in positions(d.len(), cap) {
                    o.insert(
                        k(&format!("d{j}")),
                        ans(d.entry(j).map(|e| (e.index, e.name.to_vec(), e.ino))),
                    );
                    o.insert(k(&format!("d{j}.ino")), ans(d.entry_ino(j)));
                    let name = d.entry_name(j);
                    if let Ok(n) = name {
                        names.push(n.to_vec());
                    }
                    o.insert(k(&format!("d{j}.name")), ans(name.map(|n| n.to_vec())));
                }
                extra_names(&mut names);
                q.names.insert(pos, names);
            }
        }
        match i.file() {
            Err(e) => {
                o.insert(k("file"), ans::<()>(Err(e)));
            }
            Ok(f) => {
                o.insert(k("file"), ans(Ok((f.ino(), f.chunk_count()))));
                o.insert(k("file.size"), ans(f.size()));
                let mut walked = vec![];
                let total = f.for_each_chunk(|i, s, l| {
                    walked.push((i, s, l));
                    Ok(())
                });
                o.insert(k("file.walk"), ans(total.map(|t| (t, walked))));
                // A range across chunk boundaries, through the shared mapper.
                let mapped = f
                    .map(1_000, 200_000)
                    .and_then(|p| p.collect::<Result<Vec<_>, _>>());
                o.insert(k("file.map"), ans(mapped));
                for j in positions(f.chunk_count(), cap) {
                    o.insert(k(&format!("c{j}")), ans(f.chunk(j)));
                }
            }
        }
    }
    // Lookups, each with a fresh blob.
    for (&pos, names) in &q.names {
        for name in names {
            for (what, sorted) in [("ls", true), ("l", false)] {
                let a = with_layer(&mut |l| {
                    let d = match l.inode_at(pos).and_then(|i| i.dir()) {
                        Ok(d) => d,
                        Err(e) => return ans::<()>(Err(e)),
                    };
                    let r = if sorted {
                        d.lookup_sorted(name)
                    } else {
                        d.lookup(name)
                    };
                    ans(r.map(|e| e.map(|e| (e.index, e.name.to_vec(), e.ino))))
                });
                o.insert(format!("{pos}.{what}.{}", hex(name)), a);
            }
        }
    }
    q.inos = inos.into_iter().collect();
    for &ino in &q.inos {
        let a = with_layer(&mut |l| ans(l.find_pos(ino).map(|f| f.map(|(p, i)| (p, i.ino())))));
        o.insert(format!("find.{ino}"), a);
        for hint in [0u32, 1, len / 2, len.saturating_sub(1), len, u32::MAX] {
            let a = with_layer(&mut |l| {
                let mut h = hint;
                let r = l.find_pos_hinted(ino, &mut h);
                ans(r.map(|f| (f.map(|(p, i)| (p, i.ino())), h)))
            });
            o.insert(format!("findh.{ino}.{hint}"), a);
        }
    }
    (o, q)
}

/// The same walk through the paged views.
/// Every answer of the paged reader; with `header`, each blob made from the
/// header of a first parse (`Blob::from_header`, as the kernel makes them).
fn walk_paged<P: Pages + ?Sized>(pages: &P, cap: u32, q: &Queries, header: bool) -> Obs {
    let mut o = Obs::new();
    let header = match header {
        true => paged::Blob::parse(pages).and_then(|b| b.header()).ok(),
        false => None,
    };
    let fresh = || match &header {
        Some(h) => paged::Blob::from_header(pages, h),
        None => paged::Blob::parse(pages),
    };
    let with_layer = |f: &mut dyn FnMut(paged::Layer<'_, '_, P>) -> Ans| -> Ans {
        match fresh() {
            Err(e) => ans::<()>(Err(e)),
            Ok(b) => match b.layer() {
                Err(e) => ans::<()>(Err(e)),
                Ok(l) => f(l),
            },
        }
    };
    let head = with_layer(&mut |l| {
        let sorted = match l.is_sorted() {
            Ok(s) => s,
            Err(e) => return ans::<()>(Err(e)),
        };
        ans(l.max_ino().map(|m| (l.len(), sorted, m)))
    });
    let ok = matches!(head, Ans::Val(_));
    o.insert("layer".into(), head);
    if !ok {
        return o;
    }
    let Ok(blob) = fresh() else { return o };
    let Ok(layer) = blob.layer() else { return o };
    let len = layer.len();
    let mut name = [0u8; NAME_MAX];
    for pos in positions(len, cap) {
        let Ok(blob) = fresh() else { continue };
        let Ok(layer) = blob.layer() else { continue };
        let k = |s: &str| format!("{pos}.{s}");
        let i = match layer.inode_at(pos) {
            Ok(i) => i,
            Err(e) => {
                o.insert(k("ino"), ans::<()>(Err(e)));
                continue;
            }
        };
        o.insert(k("ino"), ans(i.ino()));
        o.insert(k("kind"), ans(i.kind()));
        o.insert(k("uid"), ans(i.uid()));
        o.insert(k("gid"), ans(i.gid()));
        o.insert(k("perm"), ans(i.permissions()));
        o.insert(k("mode"), ans(i.mode()));
        o.insert(k("rdev"), ans(i.rdev()));
        o.insert(
            k("symlink"),
            ans(i.symlink_target().and_then(|t| t.map(to_vec).transpose())),
        );
        let xs = i.xattrs();
        o.insert(k("xattrs"), ans(xs.map(|x| x.len())));
        if let Ok(xs) = xs {
            for j in 0..xs.len().min(cap) {
                let x = xs
                    .get(j)
                    .and_then(|(key, v)| Ok((to_vec(key)?, to_vec(v)?)));
                o.insert(k(&format!("x{j}")), ans(x));
            }
        }
        for key in q.keys.get(&pos).into_iter().flatten() {
            o.insert(
                k(&format!("xget.{}", hex(key))),
                ans(i.xattr(key).and_then(|v| v.map(to_vec).transpose())),
            );
        }
        match i.dir() {
            Err(e) => {
                o.insert(k("dir"), ans::<()>(Err(e)));
            }
            Ok(d) => {
                o.insert(k("dir"), ans(Ok((d.ino(), d.look_below(), d.len()))));
                o.insert(k("dir.sorted"), ans(d.is_sorted()));
                for j in positions(d.len(), cap) {
                    let e = d
                        .entry(j, &mut name)
                        .map(|e| (e.index, name[..e.name_len].to_vec(), e.ino));
                    o.insert(k(&format!("d{j}")), ans(e));
                    o.insert(k(&format!("d{j}.ino")), ans(d.entry_ino(j)));
                    let n = d.entry_name(j).and_then(to_vec);
                    o.insert(k(&format!("d{j}.name")), ans(n));
                }
            }
        }
        match i.file() {
            Err(e) => {
                o.insert(k("file"), ans::<()>(Err(e)));
            }
            Ok(f) => {
                o.insert(k("file"), ans(Ok((f.ino(), f.chunk_count()))));
                o.insert(k("file.size"), ans(f.size()));
                let mut walked = vec![];
                let total = f.for_each_chunk(|i, s, l| {
                    walked.push((i, s, l));
                    Ok(())
                });
                o.insert(k("file.walk"), ans(total.map(|t| (t, walked))));
                // A range across chunk boundaries, through the shared mapper.
                let mapped = f
                    .map(1_000, 200_000)
                    .and_then(|p| p.collect::<Result<Vec<_>, _>>());
                o.insert(k("file.map"), ans(mapped));
                for j in positions(f.chunk_count(), cap) {
                    o.insert(k(&format!("c{j}")), ans(f.chunk(j)));
                }
            }
        }
    }
    for (&pos, names) in &q.names {
        for n in names {
            for (what, sorted) in [("ls", true), ("l", false)] {
                let a = with_layer(&mut |l| {
                    let d = match l.inode_at(pos).and_then(|i| i.dir()) {
                        Ok(d) => d,
                        Err(e) => return ans::<()>(Err(e)),
                    };
                    let r = if sorted {
                        d.lookup_sorted(n, &mut name)
                    } else {
                        d.lookup(n, &mut name)
                    };
                    ans(r.map(|e| e.map(|e| (e.index, name[..e.name_len].to_vec(), e.ino))))
                });
                o.insert(format!("{pos}.{what}.{}", hex(n)), a);
            }
        }
    }
    for &ino in &q.inos {
        let a = with_layer(&mut |l| {
            let r = l.find_pos(ino).and_then(|f| match f {
                None => Ok(None),
                Some((p, i)) => Ok(Some((p, i.ino()?))),
            });
            ans(r)
        });
        o.insert(format!("find.{ino}"), a);
        for hint in [0u32, 1, len / 2, len.saturating_sub(1), len, u32::MAX] {
            let a = with_layer(&mut |l| {
                let mut h = hint;
                let r = l.find_pos_hinted(ino, &mut h).and_then(|f| match f {
                    None => Ok(None),
                    Some((p, i)) => Ok(Some((p, i.ino()?))),
                });
                ans(r.map(|f| (f, h)))
            });
            o.insert(format!("findh.{ino}.{hint}"), a);
        }
    }
    o
}

fn to_vec<P: Pages + ?Sized>(b: paged::Bytes<'_, '_, P>) -> puzzlefs::format::Result<Vec<u8>> {
    let mut v = vec![0u8; b.len() as usize];
    let copied = b.copy_to(&mut v).map(|_| ());
    // The piece visitor gives the same bytes, in order, or the same error.
    let mut pieces = Vec::new();
    let visited = b.for_each_piece(|p| {
        assert!(
            !p.is_empty() && p.len() <= PAGE,
            "piece of {} bytes",
            p.len()
        );
        pieces.extend_from_slice(p);
        true
    });
    assert_eq!(
        visited.map(|all| (all, &pieces)),
        copied.map(|()| (true, &v))
    );
    copied.map(|()| v)
}

/// How the two walks compare.
#[derive(Default, Debug)]
struct Tally {
    /// Observations compared.
    compared: usize,
    /// capnp ran out of read budget where the paged reader answered.
    budget_only_capnp: usize,
    /// Observations where the paged reader failed because a page failed.
    io: usize,
}

/// Compares: every capnp answer must be given by the paged reader (the same
/// value, or an error for an error); an accessor the capnp side could not
/// reach (its view failed) must not be reached on the paged side either.
/// With `io`, the paged reader may also fail where capnp answers.
fn compare(what: &str, c: &Obs, p: &Obs, io: bool, t: &mut Tally) {
    for (key, ca) in c {
        let pa = p.get(key);
        t.compared += 1;
        let same = match (ca, pa) {
            (Ans::Val(a), Some(Ans::Val(b))) => a == b,
            (Ans::Err | Ans::Budget, Some(Ans::Err | Ans::Budget)) => true,
            (Ans::Budget, Some(Ans::Val(_))) => {
                t.budget_only_capnp += 1;
                true
            }
            (Ans::Val(_), Some(Ans::Err)) if io => {
                t.io += 1;
                true
            }
            (_, None) if io => true,
            _ => false,
        };
        assert!(
            same,
            "{what}: {key}: capnp {ca:?}, paged {pa:?}\n(first keys: {:?})",
            c.keys().take(5).collect::<Vec<_>>()
        );
    }
    for key in p.keys() {
        assert!(
            c.contains_key(key),
            "{what}: {key}: paged answered {:?}, capnp never reached it",
            p[key]
        );
    }
}

fn differential(what: &str, buf: &[u8], cap: u32) -> Tally {
    let mut t = Tally::default();
    let (c, q) = walk_capnp(buf, cap);
    let p = walk_paged(buf, cap, &q, false);
    compare(what, &c, &p, false, &mut t);
    // A page source that is not a slice gives the same answers.
    let counting = Counting::new(buf);
    let p2 = walk_paged(&counting, cap, &q, false);
    assert_eq!(p, p2, "{what}: slice and page source differ");
    // Blobs made from a header answer as parsed ones.
    let p3 = walk_paged(&counting, cap, &q, true);
    assert_eq!(p, p3, "{what}: parsed and from_header blobs differ");
    t
}

// ---------------------------------------------------------------------------
// Layers

fn rec(ino: u64, kind: Kind) -> InodeRec {
    InodeRec {
        ino,
        kind,
        uid: 1000,
        gid: 100,
        permissions: 0o755,
        xattrs: vec![],
        symlink: None,
    }
}

fn digest(n: u64) -> [u8; 32] {
    let mut d = [0u8; 32];
    for (i, b) in d.iter_mut().enumerate() {
        *b = (n.wrapping_mul(31).wrapping_add(i as u64 * 7)) as u8;
    }
    d
}

/// A layer with every kind, long and short names, many chunks, xattrs
/// (empty and 3,000-byte values), symlinks, an unsorted directory and
/// entries with invalid names.
fn rich_layer(seed: u64, n: u64) -> Vec<u8> {
    let mut rng = Rng(seed);
    let mut recs = vec![];
    // Root: n - 1 entries, names of 1..=255 bytes, sorted, unique.
    let mut names: BTreeMap<Vec<u8>, u64> = BTreeMap::new();
    let mut ino = 2;
    while (names.len() as u64) < n.saturating_sub(1) {
        let len = 1 + rng.below(255) as usize;
        let name: Vec<u8> = (0..len).map(|_| b'a' + rng.below(26) as u8).collect();
        if let std::collections::btree_map::Entry::Vacant(e) = names.entry(name) {
            e.insert(ino);
            ino += 1;
        }
    }
    recs.push(rec(
        1,
        Kind::Dir {
            entries: names.into_iter().collect(),
        },
    ));
    for i in 2..=n {
        let kind = match i % 9 {
            0 => Kind::Fifo,
            1 => Kind::Chr {
                major: rng.next(),
                minor: rng.below(1 << 20),
            },
            2 => Kind::Blk {
                major: 8,
                minor: rng.next(),
            },
            3 => Kind::File {
                chunks: (0..rng.below(if i % 5 == 0 { 300 } else { 4 }))
                    .map(|c| FileChunk {
                        blob: BlobRef {
                            digest: digest(c),
                            offset: rng.below(1 << 40),
                            compressed: c % 2 == 0,
                        },
                        len: rng.below(1 << 20),
                    })
                    .collect(),
            },
            4 => Kind::Lnk,
            5 => Kind::Sock,
            6 => Kind::Wht,
            7 => Kind::Unknown,
            _ => Kind::Dir {
                // Unsorted, duplicates and invalid names too.
                entries: vec![
                    (b"zeta".to_vec(), i + 1),
                    (b"alpha".to_vec(), 7),
                    (b"".to_vec(), 3),
                    (b".".to_vec(), 4),
                    (b"a/b".to_vec(), 5),
                    (vec![b'x'; 300], 6),
                    (b"alpha".to_vec(), 8),
                    (b"nul\0".to_vec(), 9),
                ],
            },
        };
        let mut r = rec(i, kind);
        r.uid = rng.next() as u32;
        r.gid = rng.next() as u32;
        r.permissions = rng.next() as u16; // high bits must be masked
        if matches!(r.kind, Kind::Lnk) {
            let len = rng.below(4096) as usize;
            r.symlink = Some(rng.bytes(len));
        }
        if i % 4 == 0 {
            r.xattrs = vec![
                (b"user.empty".to_vec(), vec![]),
                (b"user.big".to_vec(), rng.bytes(3000)),
                (b"security.selinux".to_vec(), b"system_u:object_r".to_vec()),
            ];
        }
        if i % 11 == 0 {
            // An empty symlink target on a non-link, and an empty key.
            r.symlink = Some(vec![]);
            r.xattrs.push((vec![], b"v".to_vec()));
        }
        recs.push(r);
    }
    encode_layer(&recs)
}

fn aligned(v: &[u8]) -> Aligned {
    Aligned::copy_from(v)
}

#[test]
fn generated_layers_agree() {
    for (seed, n) in [(1u64, 1u64), (2, 10), (3, 200), (4, 1200)] {
        let buf = aligned(&rich_layer(seed, n));
        let t = differential(&format!("rich layer {n}"), &buf, u32::MAX);
        assert!(t.compared > 10, "{t:?}");
        assert_eq!(t.budget_only_capnp, 0);
        eprintln!("rich layer of {n} inodes: {t:?}");
    }
    // Only unusual values: the empty layer.
    let buf = aligned(&encode_layer(&[]));
    differential("empty layer", &buf, u32::MAX);
}

#[test]
fn upstream_fixture_agrees() {
    use puzzlefs::image::Image;
    use puzzlefs::oci::OciDir;
    let oci = OciDir::open(&common::fixture().join("oci")).expect("fixture");
    let index = oci.index().expect("index.json");
    let mut layers = 0;
    for tag in index.tags() {
        let img = Image::open_tag(&oci, &tag).expect("open tag");
        let bytes: Vec<Aligned> = img.layer_bytes().into_iter().map(aligned).collect();
        for (i, b) in bytes.iter().enumerate() {
            let t = differential(&format!("{tag} layer {i}"), b, u32::MAX);
            assert!(t.compared > 20);
            layers += 1;
        }
        // find_inode over the paged layers gives what it gives over capnp's.
        let blobs: Vec<MetadataBlob<'_>> = bytes
            .iter()
            .map(|b| MetadataBlob::parse(b).unwrap())
            .collect();
        let views: Vec<_> = blobs.iter().map(|b| b.layer().unwrap()).collect();
        let pblobs: Vec<_> = bytes
            .iter()
            .map(|b| paged::Blob::parse(&b[..]).unwrap())
            .collect();
        let pviews: Vec<_> = pblobs.iter().map(|b| b.layer().unwrap()).collect();
        for ino in 0..40u64 {
            let c = puzzlefs::format::find_inode(views.iter().copied(), ino).map(|i| i.ino());
            let p = paged::find_inode(pviews.iter().copied(), ino).map(|i| i.ino().unwrap());
            assert_eq!(c, p, "{tag}: find_inode({ino})");
            let mut h1 = vec![0u32; views.len()];
            let mut h2 = h1.clone();
            let c = puzzlefs::format::find_inode_hinted(views.iter().copied(), ino, &mut h1)
                .map(|i| i.ino());
            let p = paged::find_inode_hinted(pviews.iter().copied(), ino, &mut h2)
                .map(|i| i.ino().unwrap());
            assert_eq!((c, h1), (p, h2), "{tag}: find_inode_hinted({ino})");
        }
    }
    assert!(
        layers >= 4,
        "the fixture has plain, zstd and a two-layer delta"
    );
}

// ---------------------------------------------------------------------------
// Raw messages: segments, far pointers, hand-made encodings

/// A message as words, segment by segment.
#[derive(Clone)]
struct Msg {
    segs: Vec<Vec<u64>>,
}

impl Msg {
    fn parse(b: &[u8]) -> Msg {
        let u32at = |i: usize| u32::from_le_bytes(b[i * 4..i * 4 + 4].try_into().unwrap());
        let n = u32at(0) as usize + 1;
        let mut pos = (n / 2 + 1) * 8;
        let mut segs = vec![];
        for i in 0..n {
            let words = u32at(1 + i) as usize;
            segs.push(
                (0..words)
                    .map(|w| {
                        u64::from_le_bytes(b[pos + w * 8..pos + w * 8 + 8].try_into().unwrap())
                    })
                    .collect(),
            );
            pos += words * 8;
        }
        Msg { segs }
    }

    fn bytes(&self) -> Vec<u8> {
        let n = self.segs.len();
        let mut out = vec![];
        out.extend((n as u32 - 1).to_le_bytes());
        for s in &self.segs {
            out.extend((s.len() as u32).to_le_bytes());
        }
        if n % 2 == 0 {
            out.extend(0u32.to_le_bytes());
        }
        for s in &self.segs {
            for w in s {
                out.extend(w.to_le_bytes());
            }
        }
        out
    }

    /// Resolves the pointer at (seg, word): (target seg, target word, tag).
    fn follow(&self, s: usize, w: usize) -> (usize, usize, u64) {
        let p = self.segs[s][w];
        let near = |w: usize, p: u64| -> usize {
            (w as i64 + 1 + ((p as u32 as i32) >> 2) as i64) as usize
        };
        if p & 3 != 2 {
            return (s, near(w, p), p);
        }
        let fs = (p >> 32) as usize;
        let pad = ((p as u32) >> 3) as usize;
        let pw = self.segs[fs][pad];
        if (p >> 2) & 1 == 0 {
            (fs, near(pad, pw), pw)
        } else {
            let tag = self.segs[fs][pad + 1];
            ((pw >> 32) as usize, ((pw as u32) >> 3) as usize, tag)
        }
    }

    /// Every non-null pointer reachable from the root, schema-agnostic.
    fn pointers(&self) -> Vec<(usize, usize)> {
        let mut out = vec![];
        let mut stack = vec![(0usize, 0usize)];
        while let Some((s, w)) = stack.pop() {
            if self.segs[s][w] == 0 {
                continue;
            }
            out.push((s, w));
            let (ts, tw, tag) = self.follow(s, w);
            match tag & 3 {
                0 => {
                    let data = (tag >> 32) as u16 as usize;
                    let ptrs = (tag >> 48) as usize;
                    stack.extend((0..ptrs).map(|i| (ts, tw + data + i)));
                }
                1 => match (tag >> 32) & 7 {
                    6 => {
                        let n = (tag >> 35) as usize;
                        stack.extend((0..n).map(|i| (ts, tw + i)));
                    }
                    7 => {
                        let t = self.segs[ts][tw];
                        let n = ((t as u32) >> 2) as usize;
                        let data = (t >> 32) as u16 as usize;
                        let ptrs = (t >> 48) as usize;
                        for e in 0..n {
                            let base = tw + 1 + e * (data + ptrs);
                            stack.extend((0..ptrs).map(|i| (ts, base + data + i)));
                        }
                    }
                    _ => {}
                },
                _ => {}
            }
        }
        out
    }

    /// Turns the near pointers that `pick` selects into double-far pointers
    /// whose two-word landing pads live in a new segment.
    fn double_far(&mut self, mut pick: impl FnMut(usize) -> bool) -> usize {
        let ptrs = self.pointers();
        let pad_seg = self.segs.len();
        let mut pads = vec![];
        for (i, (s, w)) in ptrs.into_iter().enumerate() {
            let p = self.segs[s][w];
            if p & 3 == 2 || !pick(i) {
                continue;
            }
            let (_, t, _) = self.follow(s, w);
            let at = pads.len();
            pads.push(((t as u64) << 3) | 2 | ((s as u64) << 32));
            pads.push(p & 0xffff_ffff_0000_0003);
            self.segs[s][w] = ((at as u64) << 3) | 4 | 2 | ((pad_seg as u64) << 32);
        }
        let n = pads.len() / 2;
        self.segs.push(pads);
        n
    }
}

/// Copies a layer into a message whose segments hold `words` words each:
/// objects that do not fit land in other segments, behind far pointers.
fn resegment(buf: &[u8], words: u32) -> Vec<u8> {
    let mut slice = buf;
    let reader = capnp::serialize::read_message_from_flat_slice(
        &mut slice,
        capnp::message::ReaderOptions::new(),
    )
    .unwrap();
    let root = reader.get_root::<inode_vector::Reader<'_>>().unwrap();
    let alloc = capnp::message::HeapAllocator::new()
        .first_segment_words(words)
        .allocation_strategy(capnp::message::AllocationStrategy::FixedSize);
    let mut b = capnp::message::Builder::new(alloc);
    b.set_root(root).unwrap();
    let mut out = vec![];
    capnp::serialize::write_message(&mut out, &b).unwrap();
    out
}

#[test]
fn multi_segment_messages_agree() {
    let base = rich_layer(7, 60);
    for words in [4u32, 16, 64, 300] {
        let buf = resegment(&base, words);
        let m = Msg::parse(&buf);
        let fars = m
            .pointers()
            .iter()
            .filter(|&&(s, w)| m.segs[s][w] & 3 == 2)
            .count();
        assert!(
            m.segs.len() > 1 && fars > 0,
            "{words}: {} segments",
            m.segs.len()
        );
        let t = differential(&format!("{words}-word segments"), &aligned(&buf), u32::MAX);
        eprintln!(
            "{words}-word segments: {} segments, {fars} far pointers, {t:?}",
            m.segs.len()
        );
        // And double-far pointers on top, for every other near pointer.
        let mut m2 = m.clone();
        let mut flip = false;
        let n = m2.double_far(|_| {
            flip = !flip;
            flip
        });
        assert!(n > 10);
        differential(
            &format!("{words}-word segments, double far"),
            &aligned(&m2.bytes()),
            u32::MAX,
        );
    }
    // Every pointer of a single-segment layer made double-far.
    let mut m = Msg::parse(&base);
    let n = m.double_far(|_| true);
    assert!(n > 50);
    differential("all double far", &aligned(&m.bytes()), u32::MAX);
}

/// Builds a layer message by hand: root struct (0 data, 1 pointer) to a
/// list whose pointer and contents the caller writes.
fn hand_layer(list_ptr: u64, contents: &[u64]) -> Vec<u8> {
    // Root pointer -> struct at word 1 (0 data, 1 ptr); its pointer at word
    // 1 points to word 2.
    let mut seg = vec![1u64 << 48, list_ptr];
    seg.extend_from_slice(contents);
    Msg { segs: vec![seg] }.bytes()
}

fn list_ptr(offset_from_next: i32, size: u64, count: u64) -> u64 {
    ((offset_from_next as u32 as u64) << 2) | 1 | (size << 32) | (count << 35)
}

fn struct_tag(n: u64, data: u64, ptrs: u64) -> u64 {
    (n << 2) | (data << 32) | (ptrs << 48)
}

#[test]
fn other_struct_sizes_and_list_encodings_agree() {
    let mut cases: Vec<(&str, Vec<u8>)> = vec![];
    // Inodes of 1 data word (ino only), no pointers.
    cases.push((
        "1 word inodes",
        hand_layer(list_ptr(0, 7, 3), &[struct_tag(3, 1, 0), 5, 6, 7]),
    ));
    // Inodes of 2 data words (ino, discriminant, permissions; no uid/gid)
    // and one pointer (a mode payload, no `additional`).
    // Word 1 of an inode: discriminant (bits 0..16), permissions (16..32), uid.
    let chr = 2u64 | 0o644 << 16;
    cases.push((
        "2 word inodes with a chr",
        hand_layer(
            list_ptr(0, 7, 6),
            &[
                struct_tag(2, 2, 1),
                9,
                chr,
                (3 << 2) | (2u64 << 32), // -> the 2-word struct after the list
                10,
                3, // a directory whose pointer is null
                0,
                11,
                22,
            ],
        ),
    ));
    // Larger inodes than the schema's (a newer writer): 5 data words, 3 ptrs.
    let mut big = vec![struct_tag(2, 5, 3)];
    for ino in [3u64, 4] {
        big.extend([
            ino,
            6 | 0o777 << 16 | 55 << 32,
            0xdead_beef_0000_0000 | 7,
            0,
            0,
            0,
            0,
            0,
        ]);
    }
    cases.push(("8 word inodes", hand_layer(list_ptr(0, 7, 16), &big)));
    // The inode list as a list of u64 (each inode is its ino), of bytes, of
    // u16, u32, pointers, void; a bit list (refused).
    cases.push(("u64 list", hand_layer(list_ptr(0, 5, 3), &[1, 2, 3])));
    cases.push((
        "byte list",
        hand_layer(list_ptr(0, 2, 11), &[0x0102_0304_0506_0708, 0x000a_0b0c]),
    ));
    cases.push((
        "u16 list",
        hand_layer(list_ptr(0, 3, 4), &[0x0004_0003_0002_0001]),
    ));
    cases.push((
        "u32 list",
        hand_layer(list_ptr(0, 4, 3), &[0x2_0000_0001, 3]),
    ));
    cases.push((
        "pointer list",
        hand_layer(list_ptr(0, 6, 2), &[(1 << 2) | (1u64 << 32), 0, 77]),
    ));
    cases.push(("void list", hand_layer(list_ptr(0, 0, 1000), &[])));
    cases.push((
        "huge void list",
        hand_layer(list_ptr(0, 0, (1 << 29) - 1), &[]),
    ));
    cases.push(("bit list", hand_layer(list_ptr(0, 1, 64), &[u64::MAX])));
    // Zero-sized structs, many of them (charged when followed).
    cases.push((
        "zero-size structs",
        hand_layer(list_ptr(0, 7, 0), &[struct_tag(5000, 0, 0)]),
    ));
    cases.push((
        "zero-size structs, too many",
        hand_layer(list_ptr(0, 7, 0), &[struct_tag((1 << 30) - 1, 0, 0)]),
    ));
    // Composite list whose elements overrun its word count.
    cases.push((
        "overrun",
        hand_layer(list_ptr(0, 7, 2), &[struct_tag(3, 1, 0), 1, 2, 3]),
    ));
    // A struct pointer where the list is expected, and a far pointer to a
    // missing segment.
    cases.push(("struct for list", hand_layer(1u64 << 32, &[1])));
    cases.push(("far to nowhere", hand_layer(2 | (5u64 << 32), &[])));
    // Names and data as other lists than bytes; xattrs and symlinks.
    let dir_inode = |name_ptr: u64| {
        hand_layer(
            list_ptr(0, 7, 5),
            &[
                struct_tag(1, 3, 2),
                1,
                3,
                0,
                (1 << 2) | (1u64 << 32) | (1u64 << 48), // -> dir struct at +1
                0,
                0,                 // dir: data
                list_ptr(0, 7, 2), // dir.entries
                struct_tag(1, 1, 1),
                2,
                name_ptr,
                0x63_6261,
            ],
        )
    };
    cases.push(("name as bytes", dir_inode(list_ptr(0, 2, 3))));
    cases.push(("name as u16s", dir_inode(list_ptr(0, 3, 1))));
    cases.push(("name as structs", dir_inode(list_ptr(0, 7, 0))));
    cases.push(("name out of bounds", dir_inode(list_ptr(0, 2, 9))));
    cases.push(("name far", dir_inode(2)));
    for (what, bytes) in cases {
        let buf = aligned(&bytes);
        let t = differential(what, &buf, 64);
        eprintln!("{what}: {t:?}");
    }
}

// ---------------------------------------------------------------------------
// Hostile bytes

fn small_layers() -> Vec<Vec<u8>> {
    let mut a = rec(
        1,
        Kind::Dir {
            entries: vec![(b"b".to_vec(), 2), (b"c".to_vec(), 3), (b"d".to_vec(), 4)],
        },
    );
    a.xattrs = vec![(b"user.k".to_vec(), b"vv".to_vec())];
    let b = rec(
        2,
        Kind::File {
            chunks: vec![
                FileChunk {
                    blob: BlobRef {
                        digest: digest(1),
                        offset: 3,
                        compressed: true,
                    },
                    len: 100,
                },
                FileChunk {
                    blob: BlobRef {
                        digest: digest(2),
                        offset: 0,
                        compressed: false,
                    },
                    len: 5,
                },
            ],
        },
    );
    let mut c = rec(3, Kind::Lnk);
    c.symlink = Some(b"../target".to_vec());
    let d = rec(4, Kind::Chr { major: 1, minor: 3 });
    let e = rec(6, Kind::Wht);
    let small = encode_layer(&[a.clone(), b.clone(), c.clone(), d.clone(), e.clone()]);
    // The same, two segments with far pointers.
    let multi = resegment(&small, 24);
    let mut dbl = Msg::parse(&encode_layer(&[a, c, d]));
    dbl.double_far(|i| i % 2 == 0);
    vec![small, multi, dbl.bytes()]
}

#[test]
fn hostile_bytes_agree_and_never_panic() {
    let mut total = Tally::default();
    let mut mutants = 0;
    for (l, layer) in small_layers().into_iter().enumerate() {
        for at in 0..layer.len() {
            let orig = layer[at];
            let mut values: BTreeSet<u8> = [0u8, 1, 0x7f, 0x80, 0xff].into();
            values.extend((0..8).map(|bit| orig ^ (1 << bit)));
            values.remove(&orig);
            for v in values {
                let mut m = layer.clone();
                m[at] = v;
                let buf = aligned(&m);
                let (c, q) = walk_capnp(&buf, 24);
                for header in [false, true] {
                    let p = walk_paged(&buf[..], 24, &q, header);
                    compare(
                        &format!("layer {l}, byte {at} = {v:#x}, header {header}"),
                        &c,
                        &p,
                        false,
                        &mut total,
                    );
                }
                mutants += 1;
            }
        }
    }
    eprintln!("{mutants} mutants: {total:?}");
    assert!(mutants > 3000);
}

#[test]
fn failing_pages_are_errors() {
    // A layer of several pages; each page failing in turn, then all but
    // the first.
    let buf = aligned(&rich_layer(11, 150));
    let pages = (buf.len() as u64).div_ceil(PAGE as u64);
    assert!(pages > 4);
    let (c, q) = walk_capnp(&buf, u32::MAX);
    let mut t = Tally::default();
    let mut fails = vec![vec![], (1..pages).collect::<Vec<_>>()];
    fails.extend((0..pages).map(|p| vec![p]));
    let mut touched_and_failed = 0;
    let failing = fails.len() - 1;
    for fail in fails {
        let src = Counting::failing(&buf, fail.iter().copied());
        let p = walk_paged(&src, u32::MAX, &q, false);
        let before = t.io;
        compare(&format!("failing {fail:?}"), &c, &p, true, &mut t);
        if fail.is_empty() {
            assert_eq!(t.io, 0);
        } else if t.io > before {
            touched_and_failed += 1;
        }
    }
    // Every page holds something the walk reads: every failure shows.
    assert_eq!(touched_and_failed, failing);
    // Page 0 holds the segment table: nothing parses.
    let src = Counting::failing(&buf, [0]);
    assert_eq!(paged::Blob::parse(&src).err(), Some(Error::Io));
    // A source that gives short pages fails the same way.
    struct Short<'a>(&'a [u8]);
    impl Pages for Short<'_> {
        type Page<'b>
            = &'b [u8]
        where
            Self: 'b;
        fn len(&self) -> u64 {
            self.0.len() as u64
        }
        fn page(&self, index: u64) -> puzzlefs::format::Result<&[u8]> {
            let p = self.0.page(index)?;
            Ok(&p[..p.len() / 2])
        }
    }
    let short = Short(&buf);
    let r = paged::Blob::parse(&short).and_then(|b| {
        let l = b.layer()?;
        for i in 0..l.len() {
            l.inode_at(i)?.ino()?;
        }
        Ok(())
    });
    assert_eq!(r.err(), Some(Error::Io));
    eprintln!("failing pages: {t:?}");
}

// ---------------------------------------------------------------------------
// Laziness

fn big_layer(n: u64, step: u64) -> (Vec<u8>, Vec<Vec<u8>>) {
    let mut rng = Rng(0x1234_5678);
    let mut names: BTreeMap<Vec<u8>, u64> = BTreeMap::new();
    let mut i = 0u64;
    while (names.len() as u64) < n {
        let len = 4 + rng.below(28) as usize;
        let name: Vec<u8> = (0..len).map(|_| b'a' + rng.below(26) as u8).collect();
        if names.insert(name, 0).is_none() {
            i += 1;
        }
    }
    let ino = |k: u64| 1 + k * step;
    let entries: Vec<(Vec<u8>, u64)> = names
        .keys()
        .cloned()
        .enumerate()
        .map(|(k, nm)| (nm, ino(k as u64 + 1)))
        .collect();
    let all: Vec<Vec<u8>> = entries.iter().map(|(nm, _)| nm.clone()).collect();
    let mut recs = vec![rec(1, Kind::Dir { entries })];
    for k in 1..=i {
        recs.push(rec(ino(k), Kind::Fifo));
    }
    (encode_layer(&recs), all)
}

#[test]
fn lookups_in_100000_entries_read_few_pages() {
    const N: u64 = 100_000;
    for step in [1u64, 3] {
        let (bytes, names) = big_layer(N, step);
        let buf = aligned(&bytes);
        let total_pages = (buf.len() as u64).div_ceil(PAGE as u64);
        let src = Counting::new(&buf);
        let mut rng = Rng(99);
        let (mut max_find, mut max_lookup, mut max_calls) = (0, 0, 0);
        let (mut sum_find, mut sum_lookup) = (0, 0);
        let mut name = [0u8; NAME_MAX];
        for round in 0..300 {
            // An inode: any of them, the first, the last, one absent.
            let k = match round {
                0 => 0,
                1 => N,
                2 => N + 5,
                _ => rng.below(N + 1),
            };
            let ino = 1 + k * step;
            src.reset();
            let blob = paged::Blob::parse(&src).unwrap();
            let layer = blob.layer().unwrap();
            let found = layer.find_pos(ino).unwrap();
            assert_eq!(found.is_some(), k <= N, "ino {ino}");
            if let Some((pos, i)) = found {
                assert_eq!((pos as u64, i.ino().unwrap()), (k, ino));
            }
            max_find = max_find.max(src.distinct());
            sum_find += src.distinct();
            max_calls = max_calls.max(src.calls.get());
            // A name: the root directory found, then the name looked up.
            let j = rng.below(N) as usize;
            let query: &[u8] = if round == 3 {
                b"no such name"
            } else {
                &names[j]
            };
            src.reset();
            let blob = paged::Blob::parse(&src).unwrap();
            let layer = blob.layer().unwrap();
            let root = paged::find_inode([layer], 1).unwrap().dir().unwrap();
            assert_eq!(root.len() as u64, N);
            let e = root.lookup_sorted(query, &mut name).unwrap();
            if round == 3 {
                assert!(e.is_none());
            } else {
                let e = e.unwrap();
                assert_eq!((e.index as usize, &name[..e.name_len]), (j, query));
                assert_eq!(e.ino, 1 + (j as u64 + 1) * step);
            }
            max_lookup = max_lookup.max(src.distinct());
            sum_lookup += src.distinct();
            max_calls = max_calls.max(src.calls.get());
        }
        eprintln!(
            "step {step}: {total_pages} pages; find_pos reads at most {max_find} distinct pages \
             (mean {:.1}), find root + lookup_sorted at most {max_lookup} (mean {:.1}); \
             at most {max_calls} page() calls",
            sum_find as f64 / 300.0,
            sum_lookup as f64 / 300.0
        );
        assert!(total_pages > 1000);
        assert!(max_find <= 40, "find_pos read {max_find} pages");
        assert!(max_lookup <= 40, "lookup read {max_lookup} pages");
    }
}

#[test]
fn inodes_numbered_with_gaps_are_found_in_a_few_reads() {
    // 100,000 inodes numbered from 1 with a number left out every 2,500
    // (the builders leave a few, for hard links): every inode is found, at
    // its position, by both readers, reading a few pages; the numbers left
    // out are absent.
    const N: u64 = 100_000;
    const EVERY: u64 = 2_500;
    let ino = |k: u64| 1 + k + k / EVERY;
    let mut recs = vec![rec(1, Kind::Dir { entries: vec![] })];
    recs.extend((1..N).map(|k| rec(ino(k), Kind::Fifo)));
    let buf = aligned(&encode_layer(&recs));
    let blob = MetadataBlob::parse(&buf).unwrap();
    let capnp_layer = blob.layer().unwrap();
    let src = Counting::new(&buf);
    let header = paged::Blob::parse(&src).unwrap().header().unwrap();
    let (mut max_distinct, mut max_calls) = (0, 0);
    let mut rng = Rng(7);
    let sample: Vec<u64> = (0..2_000)
        .map(|_| rng.below(N))
        .chain([0, 1, EVERY - 1, EVERY, N - 1])
        .collect();
    for k in sample {
        src.reset();
        let blob = paged::Blob::from_header(&src, &header).unwrap();
        let (pos, i) = blob.layer().unwrap().find_pos(ino(k)).unwrap().unwrap();
        assert_eq!((u64::from(pos), i.ino().unwrap()), (k, ino(k)));
        max_distinct = max_distinct.max(src.distinct());
        max_calls = max_calls.max(src.calls.get());
        let (cpos, c) = capnp_layer.find_pos(ino(k)).unwrap().unwrap();
        assert_eq!((u64::from(cpos), c.ino()), (k, ino(k)));
    }
    for gap in (1..N / EVERY).map(|g| ino(g * EVERY) - 1) {
        let blob = paged::Blob::from_header(&src, &header).unwrap();
        assert!(
            blob.layer().unwrap().find_pos(gap).unwrap().is_none(),
            "{gap}"
        );
        assert!(capnp_layer.find_pos(gap).unwrap().is_none(), "{gap}");
    }
    eprintln!(
        "gapped layer: find_pos read at most {max_distinct} pages in {max_calls} page() calls"
    );
    // A binary search of 100,000 inodes reads 17 of them.
    assert!(max_distinct <= 4, "{max_distinct} pages");
}

#[test]
fn consecutive_reads_on_a_page_reuse_it() {
    // Reading every field of an inode is one page() call when the inode
    // lies in one page (after the call for the segment table and root).
    let buf = aligned(&rich_layer(5, 400));
    let src = Counting::new(&buf);
    let blob = paged::Blob::parse(&src).unwrap();
    let layer = blob.layer().unwrap();
    let i = layer.inode_at(layer.len() - 1).unwrap();
    src.reset();
    for _ in 0..10 {
        i.ino().unwrap();
        i.uid().unwrap();
        i.gid().unwrap();
        i.kind().unwrap();
        i.permissions().unwrap();
    }
    assert_eq!((src.calls.get(), src.distinct()), (1, 1));
    assert!(*src.seen.borrow().first().unwrap() > 0);
    // Walking the inode list reads each of its pages once.
    src.reset();
    for pos in 0..layer.len() {
        layer.inode_at(pos).unwrap().ino().unwrap();
    }
    assert_eq!(src.calls.get() as usize, src.distinct());
}

#[test]
fn read_budget_stops_amplification() {
    // 2,000 directory entries whose names all point at the same 64 KiB
    // blob: reading them all costs 2,000 x 8,192 words, more than 8 times
    // the message; both readers stop.
    let mut seg = vec![
        1u64 << 48,        // root: 0 data, 1 ptr
        list_ptr(0, 7, 5), // inodes
        struct_tag(1, 3, 2),
        1,
        3,
        0,
        (1 << 2) | (1u64 << 32) | (1u64 << 48), // -> dir struct at +1
        0,
        0,
    ];
    let n = 2000u64;
    let entries_at = seg.len() + 1; // after the list pointer
    seg.push(list_ptr(0, 7, n * 2));
    seg.push(struct_tag(n, 1, 1));
    let blob_at = entries_at + 1 + (n as usize) * 2;
    for e in 0..n as usize {
        seg.push(e as u64);
        let here = entries_at + 1 + e * 2 + 1;
        let off = (blob_at - here - 1) as u64;
        seg.push((off << 2) | 1 | (2u64 << 32) | ((65536u64) << 35));
    }
    seg.extend(std::iter::repeat_n(0x6161_6161_6161_6161, 8192));
    let buf = aligned(&Msg { segs: vec![seg] }.bytes());
    let blob = paged::Blob::parse(&buf[..]).unwrap();
    let dir = blob.layer().unwrap().inode_at(0).unwrap().dir().unwrap();
    assert_eq!(dir.len() as u64, n);
    let mut name = [0u8; NAME_MAX];
    assert_eq!(
        dir.lookup(b"zzz", &mut name).err(),
        Some(Error::Capnp(capnp::ErrorKind::ReadLimitExceeded))
    );
    let c = MetadataBlob::parse(&buf).unwrap();
    let cdir = c.layer().unwrap().inode_at(0).unwrap().dir().unwrap();
    assert!(cdir.lookup(b"zzz").is_err());
    // Before it ran out, the paged reader read what it was charged for.
    let blob = paged::Blob::parse(&buf[..]).unwrap();
    let before = blob.budget_left();
    let dir = blob.layer().unwrap().inode_at(0).unwrap().dir().unwrap();
    dir.entry_name(7).unwrap();
    assert!(before - blob.budget_left() < 8300);
}

/// The smallest traversal limit with which capnp's generated readers read
/// the symlink target of inode `k` (root, inode list, the inode, its
/// `additional`, the target: structs, far pads, data and the whole list).
fn capnp_cost(buf: &[u8], k: u32) -> usize {
    let mut slice = buf;
    let unlimited = capnp::message::ReaderOptions {
        traversal_limit_in_words: None,
        nesting_limit: 64,
    };
    let segments = capnp::serialize::read_message_from_flat_slice(&mut slice, unlimited)
        .unwrap()
        .into_segments();
    let ok = |limit: usize| -> bool {
        let opts = capnp::message::ReaderOptions {
            traversal_limit_in_words: Some(limit),
            nesting_limit: 64,
        };
        let r = capnp::message::Reader::new(&segments, opts);
        let read = || -> capnp::Result<()> {
            let root = r.get_root::<inode_vector::Reader<'_>>()?;
            let i = root.get_inodes()?.get(k);
            i.get_additional()?.get_symlink_target()?;
            Ok(())
        };
        read().is_ok()
    };
    let (mut lo, mut hi) = (0usize, 1 << 24);
    assert!(ok(hi));
    while lo < hi {
        let mid = (lo + hi) / 2;
        if ok(mid) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    lo
}

#[test]
fn charges_structs_pads_and_data_as_capnp() {
    // Inodes with symlink targets of several lengths.
    let recs: Vec<InodeRec> = (1..=12u64)
        .map(|i| {
            let mut r = rec(i, Kind::Lnk);
            r.symlink = Some(vec![b'x'; (i * i * 3) as usize]);
            r
        })
        .collect();
    let base = encode_layer(&recs);
    let mut dbl = Msg::parse(&base);
    dbl.double_far(|i| i % 3 != 1);
    let mut dbl2 = Msg::parse(&resegment(&base, 24));
    dbl2.double_far(|i| i % 2 == 0);
    let msgs = [
        ("one segment", base.clone()),
        ("double far", dbl.bytes()),
        ("24-word segments", resegment(&base, 24)),
        ("24-word segments, double far", dbl2.bytes()),
    ];
    for (what, bytes) in msgs {
        let buf = aligned(&bytes);
        let m = Msg::parse(&buf);
        // The inode list: capnp charges all of it (word count + tag) when
        // the pointer is followed; the paged reader its tag, then each
        // element read.
        let (rs, rw, rtag) = m.follow(0, 0);
        let (ls, lw, ltag) = m.follow(rs, rw + (rtag >> 32) as u16 as usize);
        let list_words = (ltag >> 35) as usize;
        let elem_words = {
            let t = m.segs[ls][lw];
            ((t >> 32) as u16 as usize) + ((t >> 48) as usize)
        };
        for k in 0..12u32 {
            let blob = paged::Blob::parse(&buf[..]).unwrap();
            let start = blob.budget_left();
            let t = blob.layer().unwrap().inode_at(k).unwrap();
            let target = t.symlink_target().unwrap().unwrap();
            assert_eq!(target.len() as u64, (k as u64 + 1).pow(2) * 3);
            let used = (start - blob.budget_left()) as usize;
            let capnp = capnp_cost(&buf, k);
            assert_eq!(
                used,
                capnp - (list_words + 1) + 1 + elem_words,
                "{what}, inode {k}: paged charged {used}, capnp {capnp}"
            );
        }
    }
}
