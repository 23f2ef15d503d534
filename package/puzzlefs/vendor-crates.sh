#!/bin/sh
# vendor-crates.sh <Cargo.lock> <dl-dir> <vendor-dir>: a cargo vendor
# directory made offline from the .crate files of <dl-dir> (Buildroot's
# download directory: they were fetched as downloads and hash-checked
# there). Every registry package of <Cargo.lock> must be there as
# <name>-<version>.crate with the lock file's checksum; it is unpacked
# into <vendor-dir>/<name>-<version> (cargo vendor --versioned-dirs
# layout). Use it with
#   cargo --offline --config 'source.crates-io.replace-with="vendored"' \
#         --config 'source.vendored.directory="<vendor-dir>"'
set -eu
LOCK=$1
DL=$2
VENDOR=$3
die() { echo "vendor-crates: $*" >&2; exit 1; }
[ -f "$LOCK" ] || die "$LOCK: no such file"
rm -rf "$VENDOR"
mkdir -p "$VENDOR"
awk '$1 == "[[package]]" { n = v = s = "" }
	$1 == "name" { n = $3 } $1 == "version" { v = $3 } $1 == "source" { s = $3 }
	$1 == "checksum" && s ~ /^"registry\+/ { gsub(/"/, "", n); gsub(/"/, "", v); gsub(/"/, "", $3); print n, v, $3 }' \
	"$LOCK" | while read -r name version sum; do
	crate=$DL/$name-$version.crate
	[ -f "$crate" ] || die "$crate missing (a download of the package)"
	[ "$(sha256sum "$crate" | cut -d' ' -f1)" = "$sum" ] || die "$crate: sha256 is not $LOCK's $sum"
	tar -xzf "$crate" -C "$VENDOR"
	[ -d "$VENDOR/$name-$version" ] || die "$crate does not hold $name-$version/"
	# cargo checks the package checksum; an empty file list is allowed.
	printf '{"files":{},"package":"%s"}\n' "$sum" >"$VENDOR/$name-$version/.cargo-checksum.json"
done
