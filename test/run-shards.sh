#!/bin/bash
# The suite as SHARDS guests at once, each with its own console log in
# $OUT/shard-k/: a TCG guest keeps one host core busy, so two guests finish
# the debug suite in about half the time on an otherwise idle two-core
# machine. They share a claims directory (test/run.exp, SHARD_CLAIMS): each
# runs the next case in name order that no other has taken. Lines are prefixed with their shard; the
# last line sums the shards' counts. Exits non-zero if any shard failed or
# ended without its count, after printing that shard's last console lines.
# SHARDS=1 (the default) is test/run.exp as it is, with OUT as given.
set -uo pipefail
n=${SHARDS:-1}
out=${OUT:?OUT is the output directory}
case $n in '' | *[!0-9]* | 0) echo "run-shards: SHARDS must be a positive number, not '$n'" >&2; exit 2 ;; esac
[ "$n" -eq 1 ] && exec expect test/run.exp

claims=$out/claims
rm -rf "$claims"
mkdir -p "$claims"
for k in $(seq 1 "$n"); do
	d=$out/shard-$k
	mkdir -p "$d"
	rm -f "$d/rc"
	{ OUT=$d SHARD_CLAIMS=$claims expect test/run.exp 2>&1; echo $? >"$d/rc"; } |
		tee "$d/run.log" | sed -u "s|^|[$k/$n] |" &
done
wait

passed=0 failed=0 status=0
for k in $(seq 1 "$n"); do
	d=$out/shard-$k
	count=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$d/run.log" | tail -n 1)
	rc=$(cat "$d/rc" 2>/dev/null || echo missing)
	if [ -z "$count" ] || [ "$rc" != 0 ]; then
		status=1
		echo "run-shards: shard $k/$n exited $rc (${count:-no count}); last 60 lines of $d/console.log:"
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
for k in $(seq 1 "$n"); do
	grep -a '^FAIL ' "$out/shard-$k/run.log" 2>/dev/null | sed "s|^|[$k/$n] |"
done
echo "$passed passed, $failed failed (in $n shards)"
exit $status
