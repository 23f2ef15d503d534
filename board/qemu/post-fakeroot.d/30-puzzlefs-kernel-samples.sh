#!/bin/sh
# Sample images for the kernel driver's cases (test/cases/3N-puzzlefs-*.exp):
#   /root/pzk/fixture/oci        copy of the upstream-v1 fixture OCI directory
#   /root/pzk/fixture/src{,-delta}  its source trees (from src.tar)
#   /root/pzk/plain/oci          image of /root/pzk/plain/src built by this repo's
#                                builder (tag plain), with the target's busybox in it
#   /root/pzk/<name>.digest      manifest digest of each image/tag
#   /root/pzk/rootfs/oci         the target's busybox, and its pzt-helper with its dynamic
#                                loader and shared libraries (tag rootfs, zstd)
#   /root/pzk/nested/oci         an image holding an image holding an image (tags
#                                outer, middle, inner: nested-<tag>.digest)
# (/usr/libexec/pzk/listing, which prints a tree listing, is in overlay/;
# /usr/libexec/pzk/pzk-tool comes from package/puzzlefs-test-tools.)
# A post-fakeroot script: the plain tree has owners, device nodes and a
# trusted.* xattr. Its busybox is the target's ($TARGET_DIR/bin/busybox).
# Usage (as root): 30-puzzlefs-kernel-samples.sh <TARGET_DIR>; HOST_DIR/bin/puzzlefs is the builder.
set -eu
TARGET_DIR=$1
FIXTURE=${PUZZLEFS_FIXTURE:-/work/shared/fixtures/upstream-v1}
PUZZLEFS=${HOST_DIR:?}/bin/puzzlefs
D=$TARGET_DIR/root/pzk
die() { echo "pzk samples: $*" >&2; exit 1; }

rm -rf "$D"
mkdir -p "$D/fixture" "$D/plain"

# digest_of <oci dir> <tag>: the manifest digest of <tag> in index.json.
digest_of() {
	sed 's/},{/}\n{/g' "$1/index.json" | grep "\"org.opencontainers.image.ref.name\":\"$2\"" \
		| grep -o '"digest":"sha256:[0-9a-f]*"' | head -n1 | sed 's/.*sha256:\([0-9a-f]*\)"/\1/'
}

if [ -d "$FIXTURE/oci" ]; then
	cp -a "$FIXTURE/oci" "$D/fixture/oci"
	tar -xf "$FIXTURE/src.tar" -C "$D/fixture" --numeric-owner
	for tag in plain zstd delta; do
		digest_of "$D/fixture/oci" "$tag" >"$D/fixture-$tag.digest"
		[ -s "$D/fixture-$tag.digest" ] || die "no tag $tag in the fixture"
	done
fi

# A plain tree: every kind the format holds, owners, modes, a static
# busybox to execute, a file spanning many chunks, an empty file.
S=$D/plain/src
mkdir -p "$S/bin" "$S/dir/sub" "$S/sticky"
cp "$TARGET_DIR/bin/busybox" "$S/bin/busybox"
chmod 0755 "$S/bin/busybox"
printf 'hello from puzzlefs\n' >"$S/hello.txt"
: >"$S/empty"
head -c 1000000 /dev/urandom >"$S/dir/random.bin"
seq 1 200000 >"$S/dir/sub/numbers.txt"
ln "$S/dir/random.bin" "$S/hardlink.bin"
ln -s hello.txt "$S/link-rel"
ln -s /etc/passwd "$S/link-abs"
ln -s does/not/exist "$S/link-dangling"
mkfifo "$S/fifo"
mknod "$S/null" c 1 3
mknod "$S/loop0" b 7 0
printf '#!/bin/sh\necho script-ran\n' >"$S/bin/script.sh"
chmod 0755 "$S/bin/script.sh"
chmod 4755 "$S/bin/busybox"
chmod 1777 "$S/sticky"
printf 'owned\n' >"$S/owned"
chown 1234:5678 "$S/owned"
chmod 0640 "$S/owned"
printf 'x\n' >"$S/name with space"
printf 'y\n' >"$S/$(printf 'caf\303\251')"
setfattr -n user.comment -v hello "$S/hello.txt"
setfattr -n user.long -v "$(printf '%0300d' 7)" "$S/hello.txt"
setfattr -n user.dirattr -v dir-value "$S/dir"
setfattr -n trusted.t -v trusted-value "$S/owned"
setfattr -n security.pzk -v security-value "$S/owned"
"$PUZZLEFS" -q build "$S" "$D/plain/oci" plain >/dev/null || die "puzzlefs build failed"
"$PUZZLEFS" -q build -c "$S" "$D/plain/oci" zstd >/dev/null || die "puzzlefs build -c failed"
for tag in plain zstd; do
	digest_of "$D/plain/oci" "$tag" >"$D/plain-$tag.digest"
	[ -s "$D/plain-$tag.digest" ] || die "no tag $tag in $D/plain/oci"
done

# Images inside images, for the stacking depth: nested/oci (tag outer) holds
# oci/, an image (tag middle) that holds oci/, an image (tag inner) of one file.
N=$D/nested
mkdir -p "$N/inner" "$N/middle"
printf 'innermost\n' >"$N/inner/file"
"$PUZZLEFS" -q build "$N/inner" "$N/middle/oci" inner >/dev/null || die "puzzlefs build (inner) failed"
digest_of "$N/middle/oci" inner >"$D/nested-inner.digest"
mkdir -p "$N/outer"
"$PUZZLEFS" -q build "$N/middle" "$N/outer/oci" middle >/dev/null || die "puzzlefs build (middle) failed"
digest_of "$N/outer/oci" middle >"$D/nested-middle.digest"
"$PUZZLEFS" -q build "$N/outer" "$N/oci" outer >/dev/null || die "puzzlefs build (outer) failed"
digest_of "$N/oci" outer >"$D/nested-outer.digest"
rm -rf "$N/inner" "$N/middle" "$N/outer"
for n in inner middle outer; do [ -s "$D/nested-$n.digest" ] || die "no digest for nested $n"; done

# A small real root file system, all from the target tree (never the build
# machine's): the target's busybox and pzt-helper (package
# puzzlefs-test-tools, a dynamically linked program: it must be one, so that
# the chroot case runs the image's ld.so), with the dynamic loader and every
# library it needs (DT_NEEDED, recursively) from the target's lib dirs, read
# with the target toolchain's readelf where Buildroot has one.
R=$D/rootfs/src
READELF=readelf
for r in "$HOST_DIR"/bin/*-readelf; do [ -x "$r" ] && READELF=$r; done
mkdir -p "$R/bin" "$R/usr/bin" "$R/etc" "$R/tmp"
# in_target <absolute path in the target>: that file in $TARGET_DIR with every
# symlink resolved inside the target tree (an absolute link such as Debian's
# /lib64/ld-linux-x86-64.so.2 must not lead to the build machine's file).
in_target() {
	p=$1 n=0
	while [ -L "$TARGET_DIR$p" ]; do
		n=$((n + 1))
		[ "$n" -le 40 ] || die "symlink loop at $TARGET_DIR$1"
		l=$(readlink "$TARGET_DIR$p")
		case $l in /*) p=$l ;; *) p=$(dirname "$p")/$l ;; esac
	done
	[ -f "$TARGET_DIR$p" ] || die "$1 is not in the target tree"
	echo "$TARGET_DIR$p"
}
# copy_in <path in the target>: that file into $R at the same path.
copy_in() {
	mkdir -p "$R$(dirname "$1")"
	cp "$(in_target "$1")" "$R$1"
}
# needs <file>: its DT_NEEDED names, one a line.
needs() { "$READELF" -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]$/\1/p'; }
# find_lib <name>: where the target's dynamic loader finds it (Buildroot:
# /lib, /usr/lib; Debian's multiarch directories in the host build).
find_lib() {
	for dir in "$TARGET_DIR"/lib "$TARGET_DIR"/usr/lib "$TARGET_DIR"/lib64 "$TARGET_DIR"/usr/lib64 \
		"$TARGET_DIR"/lib/*-linux-gnu "$TARGET_DIR"/usr/lib/*-linux-gnu; do
		[ -e "$dir/$1" ] || [ -L "$dir/$1" ] || continue
		echo "${dir#"$TARGET_DIR"}/$1"
		return
	done
	return 1
}

cp "$(in_target /bin/busybox)" "$R/bin/busybox"
for applet in sh echo cat ls; do ln -s busybox "$R/bin/$applet"; done
PROG=/usr/libexec/puzzlefs-test/pzt-helper
interp=$("$READELF" -l "$(in_target "$PROG")" | sed -n 's/.*\[Requesting program interpreter: \(.*\)\]$/\1/p')
[ -n "$interp" ] || die "$PROG in the target is not dynamically linked: the rootfs sample needs a program that is"
cp "$(in_target "$PROG")" "$R/usr/bin/pzt-helper"
copy_in "$interp"
todo=$(needs "$R/usr/bin/pzt-helper")
done_libs=" "
while [ -n "$todo" ]; do
	lib=$(echo "$todo" | head -n1)
	todo=$(echo "$todo" | sed 1d)
	case $done_libs in *" $lib "*) continue ;; esac
	done_libs="$done_libs$lib "
	path=$(find_lib "$lib") || die "library $lib (needed by $PROG) is not in the target's lib directories"
	copy_in "$path"
	todo=$(printf '%s\n%s' "$todo" "$(needs "$R$path")" | sed '/^$/d')
done
echo 'root:x:0:0:root:/:/bin/sh' >"$R/etc/passwd"
"$PUZZLEFS" -q build -c "$R" "$D/rootfs/oci" rootfs >/dev/null || die "puzzlefs build (rootfs) failed"
digest_of "$D/rootfs/oci" rootfs >"$D/rootfs.digest"
