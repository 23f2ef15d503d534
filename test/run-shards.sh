#!/bin/bash
# The suite as SHARDS guests at once, each with its own console log in
# $OUT/shard-k/: a TCG guest keeps one host core busy, so two guests finish
# the debug suite in about half the time on an otherwise idle two-core
# machine. They share a claims directory (test/run.exp, SHARD_CLAIMS): each
# runs the next case in name order that no other has taken. Lines are prefixed with their shard; the
# last line sums the shards' counts. Exits non-zero if any shard failed or
# ended without its count, after printing that shard's last console lines.
# SHARDS=1 (the default) is test/run.exp as it is, with OUT as given.
#
# The debug suite (DEBUG_SUITE non-empty) boots the shards with kmemleak=off
# and runs test/debug (the kmemleak case) in a guest of its own, the last
# shard, with kmemleak on: kmemleak's tracking of every allocation halved
# the speed of the other cases (case 62: 83 s, 40 s with kmemleak=off), and
# only test/debug scans its records (after clearing what came before).
set -uo pipefail
n=${SHARDS:-1}
out=${OUT:?OUT is the output directory}
case $n in '' | *[!0-9]* | 0) echo "run-shards: SHARDS must be a positive number, not '$n'" >&2; exit 2 ;; esac
debug=${DEBUG_SUITE:-}
[ "$n" -eq 1 ] && [ -z "$debug" ] && exec expect test/run.exp

# selects <folder>: whether CASES (globs; empty: all) names a case of
# test/<folder>, as run.exp selects them.
selects() {
	[ -n "$(SUITE_PARTS=$1 LIST_CASES=1 expect test/run.exp)" ]
}

# One line per runner: <parts> <claims: yes/no> <extra kernel arguments>.
runners=()
if [ -z "$debug" ]; then
	for _ in $(seq 1 "$n"); do runners+=("cases yes -"); done
else
	if selects cases; then
		for _ in $(seq 1 "$n"); do runners+=("cases yes kmemleak=off"); done
	fi
	selects debug && runners+=("debug no -")
fi
m=${#runners[@]}
if [ "$m" -eq 0 ]; then
	echo "run-shards: CASES='${CASES:-}' names no case" >&2
	exit 2
fi

claims=$out/claims
rm -rf "$claims"
mkdir -p "$claims"
for k in $(seq 1 "$m"); do
	read -r parts shared append <<<"${runners[$((k - 1))]}"
	d=$out/shard-$k
	mkdir -p "$d"
	rm -f "$d/rc"
	[ "$m" -gt 1 ] && echo "[$k/$m] runs test/$parts$([ "$append" != - ] && echo ", kernel arguments $append")"
	c=
	[ "$shared" = yes ] && c=$claims
	[ "$append" = - ] && append=
	{ OUT=$d SHARD_CLAIMS=$c SUITE_PARTS=$parts PUZZLEFS_APPEND="${PUZZLEFS_APPEND:-}${append:+ $append}" \
		expect test/run.exp 2>&1; echo $? >"$d/rc"; } |
		tee "$d/run.log" | sed -u "s|^|[$k/$m] |" &
done
wait

passed=0 failed=0 status=0
for k in $(seq 1 "$m"); do
	d=$out/shard-$k
	count=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$d/run.log" | tail -n 1)
	rc=$(cat "$d/rc" 2>/dev/null || echo missing)
	if [ -z "$count" ] || [ "$rc" != 0 ]; then
		status=1
		echo "run-shards: shard $k/$m exited $rc (${count:-no count}); last 60 lines of $d/console.log:"
		tail -n 60 "$d/console.log" 2>/dev/null
	fi
	if [ -n "$count" ]; then
		read -r p _ f _ <<<"$count"
		passed=$((passed + p)) failed=$((failed + f))
	else
		failed=$((failed + 1))
	fi
done
# The failures again, last, where a reader of only the tail finds them.
for k in $(seq 1 "$m"); do
	grep -a '^FAIL ' "$out/shard-$k/run.log" 2>/dev/null | sed "s|^|[$k/$m] |"
done
echo "$passed passed, $failed failed (in $m shards)"
exit $status
