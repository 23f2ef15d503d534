#!/bin/sh
# check-br2.sh [<repo>]: static checks of the Buildroot description of the
# appliance, the way Buildroot's utils/check-package and Kconfig would see
# it, without a Buildroot checkout:
#  - br2-external layout: external.desc name, Config.in, external.mk,
#    configs -> ../configs (relative symlink), linux/ extension files;
#  - .mk files: 80-hash banner, tab indentation inside define/endef and
#    continuation lines, one space before a backslash, no trailing
#    backslash, variables named after the package (check-package's
#    TypoInPackageVariable), package variables in the order _VERSION,
#    _SITE, _SITE_METHOD, _LICENSE, _LICENSE_FILES, _DEPENDENCIES, hooks
#    added to a *_HOOKS list, one $(eval $(...-package)) line per type;
#  - Config files: attributes indented with one tab, help text with a
#    tab and two spaces and at most 62 columns, attribute order, a help
#    text for every prompted symbol;
#  - configs/*_defconfig: every BR2_ symbol declared in this tree or
#    listed in known-buildroot-symbols.txt, no duplicates, and every
#    $(BR2_EXTERNAL_PUZZLEFS_PATH) path it names exists.
# Prints one line per problem and "check-br2: N problem(s)"; exits 1 if
# there is any.
set -u

REPO=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
EXT=$REPO/br2-external
KNOWN=$REPO/test/buildroot/known-buildroot-symbols.txt
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
: >"$TMP/problems"

problem() { printf '%s\n' "$*" >>"$TMP/problems"; }

# --- layout -----------------------------------------------------------------
for f in external.desc Config.in external.mk linux/Config.ext.in; do
	[ -f "$EXT/$f" ] || problem "br2-external/$f: missing"
done
if [ -f "$EXT/external.desc" ]; then
	name=$(sed -n 's/^name: \{1,\}//p' "$EXT/external.desc")
	[ "$name" = PUZZLEFS ] || problem "br2-external/external.desc: name is '$name', expected PUZZLEFS"
fi
if [ -L "$EXT/configs" ]; then
	[ "$(readlink "$EXT/configs")" = ../configs ] ||
		problem "br2-external/configs: must be the relative symlink ../configs"
	[ -d "$EXT/configs/." ] || problem "br2-external/configs: dangling symlink"
else
	problem "br2-external/configs: not a symlink to ../configs"
fi
ls "$EXT"/linux/linux-ext-*.mk >/dev/null 2>&1 ||
	problem "br2-external/linux: no linux-ext-*.mk"

MKS=$(ls "$EXT"/linux/linux-ext-*.mk "$REPO"/package/*/*.mk 2>/dev/null)
CONFIGS=$(ls "$EXT/Config.in" "$EXT/linux/Config.ext.in" \
	"$REPO"/package/*/Config.in "$REPO"/package/*/Config.in.host 2>/dev/null)

# --- generic text rules, for all files ------------------------------------
for f in $MKS $CONFIGS "$EXT/external.mk" "$EXT/external.desc"; do
	[ -f "$f" ] || continue
	r=${f#"$REPO"/}
	awk -v F="$r" '
		/[ \t]$/ { printf "%s:%d: trailing whitespace\n", F, NR }
		/^$/ { if (prev_empty) printf "%s:%d: consecutive empty lines\n", F, NR; prev_empty = 1; next }
		{ prev_empty = 0 }
		END { if (prev_empty) printf "%s:%d: empty last line\n", F, NR }
	' "$f" >>"$TMP/problems"
	[ -z "$(tail -c 1 "$f")" ] || problem "$r: no newline at end of file"
done

# --- .mk files ------------------------------------------------------------
for f in $MKS; do
	r=${f#"$REPO"/}
	base=$(basename "$f" .mk)
	case $base in
	linux-ext-*) pkg=${base#linux-ext-}; kind=ext ;;
	*) pkg=$base; kind=pkg ;;
	esac
	PKG=$(printf '%s' "$pkg" | tr 'a-z-' 'A-Z_')
	awk -v F="$r" -v PKG="$PKG" -v NAME="$pkg" -v KIND="$kind" '
	function err(msg) { printf "%s:%d: %s\n", F, NR, msg }
	BEGIN {
		hashes = "################################################################################"
		# check-package TypoInPackageVariable allowlist, plus the linux
		# variables an extension has to extend (see linux-ext-puzzlefs.mk).
		allowed = "^(BR_NO_CHECK_HASH_FOR|LINUX_EXTENSIONS|LINUX_POST_PATCH_HOOKS|TARGET_FINALIZE_HOOKS)$"
		if (KIND == "ext")
			allowed = "^(BR_NO_CHECK_HASH_FOR|LINUX_EXTENSIONS|LINUX_POST_PATCH_HOOKS|TARGET_FINALIZE_HOOKS|LINUX_EXTRACT_DEPENDENCIES|LINUX_KCONFIG_DEPENDENCIES|LINUX_MAKE_FLAGS|LINUX_MAKE_ENV|LINUX_EXTRA_DOWNLOADS)$"
		n_order = split("VERSION SITE SITE_METHOD LICENSE LICENSE_FILES DEPENDENCIES", order, " ")
		for (i = 1; i <= n_order; i++) rank[order[i]] = i
		last_rank = 0
	}
	NR == 1 || NR == 5 { if ($0 != hashes) err("banner: should be 80 hashes") }
	NR == 2 || NR == 4 { if ($0 != "#") err("banner: should be one hash") }
	NR == 3 { if ($0 != "# " NAME) err("banner: should be \"# " NAME "\"") }
	NR == 6 { if ($0 != "") err("banner: should be followed by an empty line") }
	{
		line = $0
		expect_tab = in_define || cont
		is_cond = (line ~ /^[ \t]*(ifeq|ifneq|ifdef|ifndef|else|endif)([ \t]|$)/)
		if (line ~ /^[ \t]*define[ \t]/) { in_define = 1; defname = line; sub(/^[ \t]*define[ \t]+/, "", defname); defined[defname] = NR; cont = 0; next }
		if (line ~ /^[ \t]*endef([ \t]|$)/) { in_define = 0; cont = 0; next }
		if (!cont && is_cond) expect_tab = 0
		if (line ~ /^ /) err("indent with spaces")
		if (line != "" && !(in_define && line ~ /^[ \t]*#/)) {
			if (expect_tab && line !~ /^\t/) err("expected indent with tabs")
			if (!expect_tab && line ~ /^\t/) err("unexpected indent with tabs")
		}
		if (line ~ /(  |\t ?)\\$/) err("use only one space before backslash")
		if (cont && line ~ /^[ \t]*$/) err("remove trailing backslash on the previous line")
		was_cont = cont
		cont = (line ~ /^[^#].*\\$/)
		if (in_define || was_cont) next
		if (match(line, /^[A-Z0-9_]+[ \t]*(\+=|:=|\?=|=)/)) {
			var = line; sub(/[ \t]*(\+=|:=|\?=|=).*/, "", var)
			if (var !~ ("^(HOST_)?" PKG "_") && var !~ allowed)
				err("possible typo: " var " -> *" PKG "*")
			if (KIND == "pkg" && var ~ ("^" PKG "_")) {
				suffix = substr(var, length(PKG) + 2)
				if (suffix in rank) {
					if (rank[suffix] < last_rank) err(var " out of order (" "_VERSION _SITE _SITE_METHOD _LICENSE _LICENSE_FILES _DEPENDENCIES)")
					if (rank[suffix] > last_rank) last_rank = rank[suffix]
					seen[suffix] = 1
				}
			}
			if (var ~ /_HOOKS$/) {
				hook = line; sub(/^[^=]*=[ \t]*/, "", hook)
				hooks[hook] = NR
			}
		}
		if (line ~ /^\$\(eval \$\((host-)?[a-z0-9-]+-package\)\)$/) {
			evals++
			t = line; gsub(/[$()]/, "", t); sub(/^eval /, "", t)
			if (t in evtype) err("second " t " eval line")
			evtype[t] = 1
			last_eval = NR
		} else if (line ~ /\$\(eval/) {
			err("unexpected $(eval ...) line")
		} else if (evals && line != "") {
			err("statement after the $(eval ...) lines")
		}
	}
	END {
		if (KIND == "pkg") {
			if (!evals) { NR = 0; err("no $(eval $(...-package)) line") }
			split("VERSION SITE SITE_METHOD LICENSE", must, " ")
			for (i in must) if (!(must[i] in seen)) { NR = 0; err("missing " PKG "_" must[i]) }
		} else {
			if (evals) { NR = 0; err("a linux extension must not instantiate a package") }
			if (!((PKG "_PREPARE_KERNEL") in defined)) { NR = 0; err("missing define " PKG "_PREPARE_KERNEL") }
		}
		for (h in hooks) if (!(h in defined)) { NR = hooks[h]; err("hook " h " is not defined") }
	}
	' "$f" >>"$TMP/problems"
done

# --- Config files ---------------------------------------------------------
for f in $CONFIGS; do
	r=${f#"$REPO"/}
	awk -v F="$r" '
	function err(msg) { printf "%s:%d: %s\n", F, NR, msg }
	function close_entry() {
		if (entry != "" && prompted && !has_help) { printf "%s:%d: %s has a prompt but no help text\n", F, entry_line, entry }
		entry = ""; prompted = 0; has_help = 0
	}
	BEGIN {
		ord["bool"] = 1; ord["prompt"] = 1; ord["string"] = 1; ord["default"] = 2
		ord["depends"] = 3; ord["select"] = 4; ord["help"] = 5
		top = "^(choice|comment|config|endchoice|endif|endmenu|if|menu|menuconfig|source)$"
	}
	{
		line = $0
		if (in_help) {
			if (line == "") next
			if (line ~ /^\t  /) {
				# <tab><2 spaces><62 chars>, the first one not blank
				bad = (length(line) > 65) || (first_help && line !~ /^\t  [^ \t]/)
				if (bad && line !~ /^\t  (http|https|git):\/\/[^ ]*$/)
					err("help text: <tab><2 spaces><62 chars>")
				first_help = 0
				next
			}
			in_help = 0
		}
		if (line ~ /^[ \t]*$/ || line ~ /^[ \t]*#/) next
		word = line; sub(/^[ \t]+/, "", word); sub(/[ \t].*/, "", word)
		if (word ~ top) {
			if (line ~ /^[ \t]/) err("should not be indented")
			close_entry()
			state = 0
			if (word == "config" || word == "menuconfig") {
				entry = $2; entry_line = NR
				if (entry !~ /^BR2_/) err("symbol " entry " should start with BR2_")
				if (entry in declared) err("config " entry " redeclared")
				declared[entry] = 1
			}
			next
		}
		if (word in ord) {
			if (line !~ ("^\t" word)) err("should be indented with one tab")
			if (ord[word] < state) err("attributes order: type, default, depends on, select, help")
			state = ord[word]
			if ((word == "bool" || word == "string" || word == "prompt") && line ~ /"/) prompted = 1
			if (word == "help") { has_help = 1; in_help = 1; first_help = 1 }
			if (line ~ /^\tdefault n([ \t]|$)/) err("default n is redundant")
		}
	}
	END { close_entry() }
	' "$f" >>"$TMP/problems"
done

# --- symbols --------------------------------------------------------------
# Declared here, and referenced by depends/select.
cat $CONFIGS 2>/dev/null | sed -n 's/^\(menu\)\{0,1\}config \(BR2_[A-Za-z0-9_]*\).*/\2/p' | sort -u >"$TMP/declared"
if [ -f "$KNOWN" ]; then
	sed -n 's/^\(BR2_[A-Za-z0-9_]*\).*/\1/p' "$KNOWN" | sort -u >"$TMP/known"
	awk '/^BR2_/ && NF < 2 { printf "test/buildroot/known-buildroot-symbols.txt:%d: %s: say where it was verified\n", NR, $1 }' "$KNOWN" >>"$TMP/problems"
else
	problem "test/buildroot/known-buildroot-symbols.txt: missing"
	: >"$TMP/known"
fi
sort -u "$TMP/declared" "$TMP/known" >"$TMP/all"

for f in $CONFIGS; do
	r=${f#"$REPO"/}
	grep -n '^[[:space:]]*\(depends on\|select\)' "$f" | sed 's/#.*//' | while IFS=: read -r n text; do
		for s in $(printf '%s\n' "$text" | grep -o 'BR2_[A-Za-z0-9_]*'); do
			grep -qx "$s" "$TMP/all" || echo "$r:$n: $s is neither declared here nor a verified Buildroot symbol"
		done
	done >>"$TMP/problems"
done

for f in "$REPO"/configs/*_defconfig; do
	[ -f "$f" ] || { problem "configs/: no defconfig"; continue; }
	r=${f#"$REPO"/}
	n=0
	while IFS= read -r line; do
		n=$((n + 1))
		case $line in
		'') continue ;;
		'# BR2_'*' is not set') s=${line#\# }; s=${s%% *} ;;
		'#'*) problem "$r:$n: savedefconfig writes no comments"; continue ;;
		BR2_*=*) s=${line%%=*} ;;
		*) problem "$r:$n: not a Buildroot defconfig line: $line"; continue ;;
		esac
		grep -qx "$s" "$TMP/all" || problem "$r:$n: $s is neither declared in this tree nor in known-buildroot-symbols.txt"
		echo "$s" >>"$TMP/defsyms"
		case $line in
		*'"'*)
			v=${line#*=\"}; v=${v%\"}
			for p in $v; do
				case $p in
				'$(BR2_EXTERNAL_PUZZLEFS_PATH)'*)
					path=$EXT${p#'$(BR2_EXTERNAL_PUZZLEFS_PATH)'}
					[ -e "$path" ] || problem "$r:$n: $p does not exist"
					;;
				/*|*/*) problem "$r:$n: path $p should start with \$(BR2_EXTERNAL_PUZZLEFS_PATH)" ;;
				esac
			done
			;;
		esac
	done <"$f"
	[ -f "$TMP/defsyms" ] && sort "$TMP/defsyms" | uniq -d | sed "s|^|$r: set twice: |" >>"$TMP/problems"
	rm -f "$TMP/defsyms"
done

count=$(grep -c . "$TMP/problems")
cat "$TMP/problems"
echo "check-br2: $count problem(s)"
[ "$count" -eq 0 ]
