# Procs shared by test/cases/5N-7N-*.exp (issue 6's corpus, hostile and
# stress cases). Sourced by a case after test/lib.tcl; the guest side is
# overlay/usr/libexec/puzzlefs-test/, the data /root/corpus (made by
# test/samples/gen-corpus.sh through board/qemu/post-fakeroot.d/50-*).

set pzt_bin /usr/libexec/puzzlefs-test
# Long outputs (diffs, sub-case lists) must reach the case whole.
match_max 400000

proc pzt_setup {} {
	run_ok "modprobe puzzlefs"
	run_ok "mkdir -p /mnt/corpus /mnt/hostile /mnt/stress"
	run "umount /mnt/corpus 2>/dev/null"
}

# pzt_corpus <image>...: corpus-check each image; one note per image; fails
# with the list of images that differ (their differences as notes).
proc pzt_corpus {images {timeout_s 600}} {
	global pzt_bin
	pzt_setup
	set bad {}
	foreach img $images {
		set t0 [clock milliseconds]
		lassign [run "$pzt_bin/corpus-check $img" $timeout_s] rc out
		set secs [expr {([clock milliseconds] - $t0) / 1000.0}]
		# Only corpus-check's own lines (each starts with the image name),
		# not kernel messages that reach the same console.
		set mine {}
		foreach l [split $out "\n"] {
			if {[string match "$img: *" $l]} { lappend mine $l }
		}
		if {$rc == 0} {
			note "[lindex $mine end] (${secs}s)"
		} else {
			lappend bad $img
			foreach l [lrange $mine 0 30] { note $l }
			if {![llength $mine]} { note "$img: exit $rc: [string range $out 0 300]" }
		}
	}
	if {[llength $bad]} { fail "failed the comparison (notes above): $bad" }
}

# pzt_hostile <glob>...: run the hostile cases matching the globs; every
# sub-case that did not behave as its table line states is a note, and the
# case fails with their list.
proc pzt_hostile {globs {timeout_s 900}} {
	global pzt_bin
	pzt_setup
	set quoted {}
	foreach g $globs { lappend quoted "'$g'" }
	lassign [run "$pzt_bin/hostile [join $quoted]" $timeout_s] rc out
	set failed {}
	set summary ""
	foreach l [split $out "\n"] {
		if {[regexp {^FAILED ([^:]+): (.*)$} $l -> name why]} {
			lappend failed $name
			note "FAILED $name: $why"
		} elseif {[regexp {^hostile: } $l]} {
			set summary $l
		}
	}
	if {$summary eq ""} { fail "no summary from the hostile runner: [string range $out end-600 end]" }
	note $summary
	if {![regexp {hostile: ([0-9]+) ok} $summary -> nok] || $nok + [llength $failed] == 0} {
		fail "no sub-case ran"
	}
	if {[llength $failed]} {
		fail "[llength $failed] sub-cases did not behave as stated: $failed"
	}
	run "rmmod puzzlefs"
	set lsmod [run_ok "lsmod"]
	check {![string match "*puzzlefs*" $lsmod]} "the module does not unload after the hostile cases"
}

# pzt_digest <image>: the manifest digest of a corpus image.
proc pzt_digest {img} {
	set line [run_ok "grep '^$img ' /root/corpus/images.txt"]
	return [lindex $line 4]
}

proc pzt_opts {img} {
	set line [run_ok "grep '^$img ' /root/corpus/images.txt"]
	return "-o oci_root_dir=/root/corpus/img/[lindex $line 1],image_manifest=[lindex $line 4]"
}
