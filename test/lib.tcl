# Procs shared by test/run.exp and the cases in test/cases/.
#
# A case is a Tcl file sourced by the runner with the appliance booted and a
# shell prompt waiting. It drives the guest with `run` / `run_ok` and ends with
# exactly one `pass` or `fail <reason>`; an error thrown by a proc counts as a
# failure with that message.

set prompt "puzzlefs# "
set default_timeout 60
# A debug kernel (KASAN, kmemleak, lockdep) under TCG runs several times
# slower: every timeout given to `run` is scaled by this factor.
set timeout_scale [expr {[info exists env(TIMEOUT_SCALE)] && $env(TIMEOUT_SCALE) ne "" ? $env(TIMEOUT_SCALE) : 1}]
# The debug suite (make test-debug: DEBUG_SUITE set) runs every case but those
# marked normal_suite_only (below), some at a smaller size: KASAN and lockdep
# check the same code paths at several times the cost, and CI runs both
# suites. `sized <normal> <debug>` picks the size.
set debug_suite [expr {[info exists env(DEBUG_SUITE)] && $env(DEBUG_SUITE) ne ""}]
proc sized {normal debug} {
	expr {$::debug_suite ? $debug : $normal}
}
# `normal_suite_only <reason>`, first in a case: the debug suite does not run
# it (the reason names the case that gives the same code paths under the debug
# kernel at a smaller size). The runner reports it as not run, never as passed.
proc normal_suite_only {reason} {
	if {!$::debug_suite} return
	set ::verdict "not run: $reason"
	error "not run in the debug suite"
}
set verdict ""
set oops_seen ""
# (milliseconds, command) of each `run` in the current case: the runner names
# the slowest ones after the case, to show where a suite's time goes.
set cmd_times {}

# Kernel lines that fail the run wherever they show up on the console.
set oops_re {(Oops|BUG:|WARNING:|Kernel panic|KASAN|general protection fault|panicked at|blocked for more than|Call Trace:)[^\r\n]*}

proc note {msg} {
	send_user -- "  .. $msg\n"
}

proc pass {} {
	if {$::verdict eq ""} { set ::verdict pass }
}

proc fail {reason} {
	if {$::verdict eq ""} { set ::verdict "fail: $reason" }
	error "case failed: $reason"
}

# Every expect in the suite also watches for kernel trouble.
proc watch_oops {} {
	expect_before {
		-re $::oops_re {
			if {$::oops_seen eq ""} { set ::oops_seen $expect_out(0,string) }
			exp_continue
		}
	}
}

# boot: start QEMU through the board script and wait for the shell. QEMU
# logs each CPU reset, with the CPU's registers, to reset_log: the last one
# says where a guest that reset itself was.
proc boot {images timeout_s reset_log} {
	global spawn_id prompt
	spawn -noecho board/qemu/start-qemu.sh $images -d cpu_reset -D $reset_log
	set ::qemu_spawn $spawn_id
	watch_oops
	set timeout $timeout_s
	expect {
		-ex "appliance: " {}
		timeout { error "no init banner within ${timeout_s}s" }
		eof { error "QEMU exited during boot" }
	}
	expect {
		-ex $prompt {}
		timeout { error "no shell prompt within ${timeout_s}s" }
		eof { error "QEMU exited during boot" }
	}
	# No echo: output read back is exactly what the commands print, and
	# busybox's line editor stays out of the way.
	send "stty -echo\r"
	expect -ex $prompt
	set timeout 10
	send "echo sync-\$((6*7))\r"
	expect {
		-ex "sync-42" {}
		timeout { error "shell does not answer" }
	}
	expect -ex $prompt
	# From here on only emergencies reach the console (an oops raises the
	# level itself): any other kernel line could land inside a command's
	# output. Each case's kernel messages are checked by kmsg_check instead.
	run_ok "echo 1 >/proc/sys/kernel/printk"
	# What stays mounted between cases; cleanup removes anything else.
	run_ok "cut -d' ' -f2 /proc/mounts >/run/pzk-boot-mounts"
}

# kmsg_check <from>: the kernel's messages numbered <from> and up (boot's
# too for 0), read from /dev/kmsg so a case's `dmesg -c` hides nothing.
# Returns [list <next seq> <the lines that match oops_re> <the last lines>].
proc kmsg_check {from} {
	# The console watch would eat the very lines looked for here.
	expect_before
	set err [catch {run_ok "/usr/libexec/pzk/pzk-tool kmsg $from" 120} out]
	watch_oops
	if {$err} { error $out }
	set lines [split [string trimright $out "\n"] "\n"]
	set next $from
	regexp {^next=([0-9]+)$} [lindex $lines end] -> next
	set bad {}
	foreach l [lrange $lines 0 end-1] {
		if {[regexp -- $::oops_re $l]} { lappend bad $l }
	}
	return [list $next $bad [lrange $lines end-20 end-1]]
}

# cleanup: after a failed case, unmount what the case left mounted (not what
# boot mounted) and unload puzzlefs, so that one failure is reported once and
# not again by every case after it.
proc cleanup {} {
	run {cut -d' ' -f2 /proc/mounts | grep -vxF -f /run/pzk-boot-mounts | sort -r | while read -r m; do umount "$m" 2>/dev/null || umount -l "$m"; done; rmmod puzzlefs 2>/dev/null; true} 120
}

# slowest <n>: the case's n slowest commands, "<seconds>s: <command>" each.
proc slowest {n} {
	set out {}
	foreach t [lrange [lsort -integer -decreasing -index 0 $::cmd_times] 0 [expr {$n - 1}]] {
		lassign $t ms cmd
		regsub -all {\s+} $cmd " " cmd
		lappend out "[format %.1f [expr {$ms / 1000.0}]]s: [string range $cmd 0 100]"
	}
	return $out
}

# guest_cpu: the CPU time (user + system, seconds) QEMU has used so far, all
# its vCPU threads together; "" once it is gone. The machine's cores are
# shared by every guest and build of a CI run, so a case's cost is this, not
# its wall time.
proc guest_cpu {} {
	if {![info exists ::clk_tck]} { set ::clk_tck [exec getconf CLK_TCK] }
	if {[catch {
		set fh [open /proc/[exp_pid -i $::qemu_spawn]/stat]
		set stat [read $fh]
		close $fh
	}]} { return "" }
	# Fields after the command name (which may hold spaces): state is the
	# first, utime the 12th, stime the 13th.
	set f [split [string trim [string range $stat [expr {[string last ")" $stat] + 1}] end]]]
	return [expr {([lindex $f 11] + [lindex $f 12]) / double($::clk_tck)}]
}

# qemu_cpus: the number of CPUs the running QEMU was given, read from its
# command line (`-smp [cpus=]N,...`; 1 without -smp); "" if it cannot be read.
proc qemu_cpus {} {
	if {[catch {
		set fh [open /proc/[exp_pid -i $::qemu_spawn]/cmdline]
		set argv [split [read $fh] "\0"]
		close $fh
	}]} { return "" }
	set i [lsearch -exact $argv -smp]
	if {$i < 0} { return 1 }
	set v [lindex $argv [expr {$i + 1}]]
	if {[regexp {(?:^|,)cpus=([0-9]+)} $v -> n] || [regexp {^([0-9]+)(?:,|$)} $v -> n]} {
		return $n
	}
	return ""
}

# run <cmd> ?timeout?: run a shell command in the guest; returns
# [list <exit status> <output>], output without \r.
proc run {cmd {timeout_s ""}} {
	global prompt
	if {$timeout_s eq ""} { set timeout_s $::default_timeout }
	set timeout_s [expr {$timeout_s * $::timeout_scale}]
	set timeout $timeout_s
	set t0 [clock milliseconds]
	send -- "$cmd; echo \"@@rc=\$?@@\"\r"
	expect {
		-re {(.*)@@rc=([0-9]+)@@\r*\n} {
			# Not expect_out(1,string): expect reports an empty first
			# group wrongly, so strip the marker from the whole match.
			set rc $expect_out(2,string)
			regsub {@@rc=[0-9]+@@\r*\n$} $expect_out(0,string) "" out
			set out [string map {"\r" ""} $out]
		}
		timeout { error "timeout after ${timeout_s}s running: $cmd" }
		eof { error "QEMU exited running: $cmd" }
	}
	expect {
		-ex $prompt {}
		timeout { error "no prompt after: $cmd" }
		eof { error "QEMU exited after: $cmd" }
	}
	# A command near its timeout is a failure waiting for a busier machine:
	# say so while it still passes.
	set ms [expr {[clock milliseconds] - $t0}]
	lappend ::cmd_times [list $ms $cmd]
	set secs [expr {$ms / 1000}]
	if {$secs * 2 > $timeout_s} {
		note "slow: ${secs}s of its ${timeout_s}s timeout: [string range $cmd 0 120]"
	}
	return [list $rc $out]
}

# run_ok <cmd>: run and require exit status 0; returns the output.
proc run_ok {cmd {timeout_s ""}} {
	lassign [run $cmd $timeout_s] rc out
	if {$rc != 0} {
		fail "'$cmd' exited $rc: [string trim [string range $out 0 400]]"
	}
	return $out
}

# run_fails <cmd> <errno-text>: the command must fail and print the text
# (e.g. "Invalid argument", the strerror of the expected errno).
proc run_fails {cmd expected} {
	lassign [run $cmd] rc out
	if {$rc == 0} { fail "'$cmd' succeeded, expected failure ($expected)" }
	if {[string first $expected $out] < 0} {
		fail "'$cmd' failed without '$expected': [string trim $out]"
	}
	return $out
}

# check <cond> <reason>: fail unless the Tcl expression is true.
proc check {cond reason} {
	if {![uplevel 1 [list expr $cond]]} { fail $reason }
}

# recover: after a timeout, get a prompt back (Ctrl-C, then an empty line).
proc recover {} {
	global prompt
	set timeout 10
	send "\003\r"
	expect {
		-ex $prompt { return 1 }
		timeout { return 0 }
		eof { return 0 }
	}
}
