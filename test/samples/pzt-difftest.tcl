# Procs of the differential-test and mutation cases (test/cases/65-69, issue 16).
# Guest side: overlay/usr/libexec/puzzlefs-test/{difftest,mutants}; data made by
# board/qemu/post-fakeroot.d/65-puzzlefs-difftest.sh.
#
# Environment (host, read here):
#   PZT_DIFFTEST_OPS   operations per image and user (default 20000; the debug
#                      suite sets fewer: KASAN under TCG is slow)
#   PZT_DIFFTEST_SEED  the seed (default: a fresh one, printed)

set pzt_bin /usr/libexec/puzzlefs-test
match_max 400000

proc pzt_env {name default} {
	if {[info exists ::env($name)] && $::env($name) ne ""} { return $::env($name) }
	return $default
}

# pzt_difftest <images> <users>: pzt-difftest of each image as each user ("root"
# or uid:gid), the same seed for all (printed, so a failure replays with
# `difftest <image> <ops> <seed> [<uid:gid>]` in the guest). An image may be
# given as <name>:<divisor>: PZT_DIFFTEST_OPS / divisor operations there (a tree
# whose operations cost more). <env>, if given, goes before the guest command:
# DIFFTEST_IMG=<dir> (the images' OCI directories from copies in <dir>) and
# DIFFTEST_OPTS=<options> (more mount options) of the guest's difftest. Every
# difference is a note; fails with the list of runs that differed or died.
# Returns the /proc/mounts line of the image's mount in each run ("" for a run
# that printed none), image by image, user by user.
proc pzt_difftest {images users {env ""}} {
	global pzt_bin
	set all [pzt_env PZT_DIFFTEST_OPS 20000]
	set seed [pzt_env PZT_DIFFTEST_SEED [expr {[clock milliseconds] % 1000000007}]]
	note "pzt-difftest seed $seed, $all operations per image and user"
	run_ok "modprobe puzzlefs"
	set bad {}
	set mounts {}
	foreach spec $images {
		lassign [split $spec :] img divisor
		if {$divisor eq ""} { set divisor 1 }
		set ops [expr {$all / $divisor}]
		foreach user $users {
			set u [expr {$user eq "root" ? "" : $user}]
			set t0 [clock milliseconds]
			# generous: ~4 ms per operation measured under TCG, x10
			lassign [run [string trim "$env $pzt_bin/difftest $img $ops $seed $u"] [expr {120 + $ops / 25}]] rc out
			set secs [expr {([clock milliseconds] - $t0) / 1000.0}]
			set ndiff 0
			set mounted ""
			foreach l [split $out "\n"] {
				if {[regexp {^difftest: mounted: (.*)$} $l -> mounted]} {
					note "$img/$user: $l"
				} elseif {[string match "DIFF *" $l] || [string match "  ext4: *" $l] || [string match "  puzzlefs: *" $l]} {
					if {[incr ndiff] <= 30} { note "$img/$user: [string range $l 0 400]" }
				} elseif {[string match "difftest: *" $l] || [string match "pzt-difftest: *differences" $l]} {
					note "$img/$user: $l"
				} elseif {[regexp {^pzt-difftest: seed=\S+ uid=\S+ (\d+) ops in (\S+)s \((\S+) ms/op\)} $l -> n s ms]} {
					note "$img/$user: $n ops in ${s}s ($ms ms/op), ${secs}s with mount"
				} elseif {[regexp {^ +[0-9]+ .*puzzlefs} $l]} {
					note "$img/$user: dmesg: [string trim $l]"
				}
			}
			lappend mounts $mounted
			if {$rc != 0} { lappend bad "$img/$user (exit $rc)" }
		}
	}
	if {[llength $bad]} { fail "differences or a dead tester (seed $seed, notes above): $bad" }
	return $mounts
}

# pzt_mutants: the mutation campaign over every mutant on the data disk (the
# build made them: a fresh seed each build, N from `make fuzz N=`).
proc pzt_mutants {} {
	global pzt_bin
	run_ok "modprobe puzzlefs"
	set n [string trim [run_ok "wc -l </disk/mutants/list.txt"]]
	set seed [string trim [run_ok "cat /disk/mutants/seed"]]
	note "mutation campaign: seed $seed, $n mutants (regenerate: make fuzz N=$n SEED=$seed)"
	check {$n > 0} "no mutants on the data disk"
	# A walk takes well under a second; one that hangs is cut at 60 s.
	lassign [run "$pzt_bin/mutants" [expr {300 + $n * 4}]] rc out
	set summary ""
	set failed 0
	foreach l [split $out "\n"] {
		if {[string match "FAILED *" $l]} {
			if {[incr failed] <= 30} { note [string range $l 0 400] }
		} elseif {[string match "mutants: *" $l]} {
			note $l
			set summary $l
		}
	}
	if {![regexp {mutants: seed \S+, ([0-9]+) run} $summary -> nrun] || $nrun != $n} {
		fail "the campaign did not run all $n mutants: [string range $out end-600 end]"
	}
	if {$rc != 0} { fail "$failed mutants failed (seed $seed, notes above)" }
}
