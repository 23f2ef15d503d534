#!/bin/sh
# prepare-tree.sh <linux-dir> [part...]: the PuzzleFS linux extension.
#
# Puts the kernel-side sources kept in (or fetched by) this repo into a
# kernel source tree. Runs before the glue patches are applied (Buildroot:
# LINUX_PRE_PATCH_HOOKS; host build: support/linux.sh) and again on every
# host build. Only files whose content changed are rewritten, so kbuild
# rebuilds only what changed.
#
# Parts (default: all of them):
#   <path>   a file or directory under src/ (laid out as in the kernel tree)
#   crates   rust/capnp (sources pinned by crates/Cargo.lock,
#            patched with crates/patches/<crate>/*.patch),
#            rust/puzzlefs_format (package/puzzlefs/format/src) and
#            rust/puzzlefs_format/generated/*_capnp.rs (capnpc-rust output
#            for package/puzzlefs/format/schema/*.capnp). These directories
#            belong to this script: files not produced by it are removed.
#
# Environment:
#   PUZZLEFS_KERNEL_CACHE  where fetched crates and the capnpc-rust plugin
#                          are kept (default: <linux-dir>/../puzzlefs-kernel-crates)
#   CARGO, CAPNP           cargo and the Cap'n Proto compiler (default: from PATH)
#   PUZZLEFS_KERNEL_CRATES_DL  a directory holding crates/Cargo.lock's crates as
#                          <name>-<version>.crate files (Buildroot: the linux
#                          download directory, LINUX_EXTRA_DOWNLOADS): they are
#                          vendored from there and nothing is fetched. Unset
#                          (host build): `cargo vendor` fetches them.
set -eu

usage() { echo "usage: $0 <linux-dir> [crates|<path under src/>]..." >&2; exit 2; }
[ $# -ge 1 ] || usage
LINUX_DIR=$1
shift
HERE=$(cd "$(dirname "$0")" && pwd)
CRATES=$HERE/crates
FORMAT=$(cd "$HERE/../format" && pwd)
CARGO=${CARGO:-cargo}
CAPNP=${CAPNP:-capnp}

die() { echo "prepare-tree: $*" >&2; exit 1; }
[ -f "$LINUX_DIR/Makefile" ] || die "$LINUX_DIR is not a kernel tree"
LINUX_DIR=$(cd "$LINUX_DIR" && pwd)
CACHE=${PUZZLEFS_KERNEL_CACHE:-$(dirname "$LINUX_DIR")/puzzlefs-kernel-crates}
PLUGIN=$CACHE/target/release/capnpc-rust

# install_if_changed <src> <dst>
install_if_changed() {
	if ! cmp -s "$1" "$2"; then
		mkdir -p "$(dirname "$2")"
		cp "$1" "$2"
	fi
}

# sync_dir <from> <to>: make <to> hold exactly the files of <from>,
# rewriting only the files whose content differs.
sync_dir() {
	(cd "$1" && find . -type f) | while IFS= read -r f; do
		install_if_changed "$1/$f" "$2/$f"
	done
	(cd "$2" && find . -type f) | while IFS= read -r f; do
		[ -e "$1/$f" ] || rm -f "$2/$f"
	done
	find "$2" -depth -type d -empty -delete
}

# add_spdx <file> <license>: the kernel wants an SPDX line first in every file.
add_spdx() {
	if ! head -n1 "$1" | grep -q 'SPDX-License-Identifier'; then
		{ echo "// SPDX-License-Identifier: $2"; echo; cat "$1"; } >"$1.spdx"
		mv "$1.spdx" "$1"
	fi
}

# locked_version <crate>: its version in crates/Cargo.lock.
locked_version() {
	awk -v n="$1" '$1 == "name" && $3 == "\"" n "\"" { getline; gsub(/"/, "", $3); print $3; exit }' \
		"$CRATES/Cargo.lock"
}

# Third-party crates compiled into the kernel, as <crate>:<SPDX licence
# without spaces>, separated by spaces.
VENDORED="capnp:MIT"

# Fetches the pinned crates and builds the capnpc-rust plugin, once per
# change of the pins or the local patches; the result is kept in $CACHE.
fetch_crates() {
	sum=$( { cat "$CRATES/Cargo.toml" "$CRATES/Cargo.lock" "$CRATES"/*/README.md \
		"$CRATES"/patches/*/*.patch "$0"; echo "${PUZZLEFS_KERNEL_CRATES_DL:+offline}"; } \
		| sha256sum | cut -d' ' -f1)
	[ "$(cat "$CACHE/.stamp" 2>/dev/null)" = "$sum" ] && [ -x "$PLUGIN" ] && return 0
	echo "prepare-tree: fetching capnp $(locked_version capnp) into $CACHE" >&2
	rm -rf "$CACHE/vendor" "$CACHE/stage"
	mkdir -p "$CACHE"
	if [ -n "${PUZZLEFS_KERNEL_CRATES_DL:-}" ]; then
		"$HERE/../vendor-crates.sh" "$CRATES/Cargo.lock" "$PUZZLEFS_KERNEL_CRATES_DL" "$CACHE/vendor"
		set -- --offline --config 'source.crates-io.replace-with="vendored"' \
			--config "source.vendored.directory=\"$CACHE/vendor\""
	else
		"$CARGO" vendor --quiet --locked --versioned-dirs --manifest-path "$CRATES/Cargo.toml" \
			"$CACHE/vendor" >/dev/null || die "cargo vendor failed"
		set --
	fi
	# A host tool: a cross target from the environment must not apply.
	env -u CARGO_BUILD_TARGET "$CARGO" build "$@" --locked --release --quiet \
		--manifest-path "$CRATES/Cargo.toml" --target-dir "$CACHE/target" \
		-p capnpc --bin capnpc-rust || die "building capnpc-rust failed"
	for c in $VENDORED; do
		name=${c%%:*}
		version=$(locked_version "$name")
		[ -n "$version" ] || die "$name is not in $CRATES/Cargo.lock"
		dst=$CACHE/stage/$name
		mkdir -p "$dst"
		cp -R "$CACHE/vendor/$name-$version/src/." "$dst/"
		for p in "$CRATES/patches/$name"/*.patch; do
			[ -e "$p" ] || continue
			(cd "$dst" && patch -p2 -s --no-backup-if-mismatch) <"$p" || die "$p does not apply"
		done
		find "$dst" -name '*.rs' | while IFS= read -r f; do add_spdx "$f" "${c#*:}"; done
		sed "s/@VERSION@/$version/g" "$CRATES/$name/README.md" >"$dst/README.md"
	done
	echo "$sum" >"$CACHE/.stamp"
}

# The format crate and the generated readers: cheap, staged on every run
# (in a directory of this run's own, so that runs can share a cache).
stage_format() {
	dst=$1
	mkdir -p "$dst/generated"
	cp -R "$FORMAT/src/." "$dst/"
	(cd "$FORMAT" && "$CAPNP" compile -o"$PLUGIN:$dst/generated" \
		--src-prefix=schema schema/manifest.capnp schema/metadata.capnp) \
		|| die "capnp compile failed (is the Cap'n Proto compiler installed?)"
	find "$dst" -name '*.rs' | while IFS= read -r f; do add_spdx "$f" "Apache-2.0 OR MIT"; done
	sed "s/@VERSION@/$(locked_version capnpc)/g" "$CRATES/puzzlefs_format/README.md" >"$dst/README.md"
}

prepare_crates() {
	command -v "$CARGO" >/dev/null || die "cargo not found (set CARGO)"
	fetch_crates
	for c in $VENDORED; do
		name=${c%%:*}
		sync_dir "$CACHE/stage/$name" "$LINUX_DIR/rust/$name"
	done
	tmp=$(mktemp -d "$CACHE/format.XXXXXX")
	trap 'rm -rf "$tmp"' EXIT
	stage_format "$tmp"
	sync_dir "$tmp" "$LINUX_DIR/rust/puzzlefs_format"
	rm -rf "$tmp"
	trap - EXIT
}

# prepare_src <path under src/>
prepare_src() {
	if [ ! -e "$HERE/src/$1" ]; then
		[ "$1" = . ] && return 0 # no src/ yet (git keeps no empty directories)
		die "src/$1 does not exist"
	fi
	(cd "$HERE/src" && find "./$1" -type f) | while IFS= read -r f; do
		install_if_changed "$HERE/src/$f" "$LINUX_DIR/$f"
	done
}

if [ $# -eq 0 ]; then
	prepare_src .
	prepare_crates
else
	for part; do
		case $part in
		crates) prepare_crates ;;
		*) prepare_src "$part" ;;
		esac
	done
fi
