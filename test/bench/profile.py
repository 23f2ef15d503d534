#!/usr/bin/env python3
"""`make bench BENCH_PROFILE=1`: where the guest's CPUs spend their time.

A sampling profiler for a TCG guest, through QEMU's gdb stub: it stops the
guest a few hundred times a second, reads each vCPU's instruction pointer and
the kernel text addresses found in the top 2 KiB of its stack, and lets it
run on. perf and ftrace are not in the appliance kernel; this needs nothing in
the guest but the module's symbols, which guest.sh prints (@@SYM lines).

  profile.py sample <port> <console log> <samples out>
      connect to the stub on 127.0.0.1:<port>, let the guest run, sample from
      the guest's "@@bench kernel" line to "@@bench-end@@"
  profile.py report <console log> <samples> <System.map> <report out>
      per workload run (from the @@R lines): the functions the samples were in
      ("self") and, less exactly, those found on the stack ("on stack": a
      stack scan, so it also counts stale return addresses)

Each sample is tagged with the number of @@R lines printed before it, i.e.
the run it belongs to, and whether that run's "@@T" line (printed right
before the timed command) was printed yet: the samples before it (the
drop_caches of a cold run, mounts, the shell) are reported apart, as one
"setup" group, so that a run's profile shows what its timing measured.
Stopping the guest slows it: a profiled run's timings are not figures.
"""
import bisect
import collections
import re
import socket
import sys
import time

KERNEL_TEXT = (0xFFFFFFFF80000000, 0xFFFFFFFFC0000000)  # vmlinux and modules, x86_64
IDLE = {"default_idle", "pv_native_safe_halt", "native_safe_halt", "mwait_idle"}
# A vCPU with nothing to run reports a program counter in the BIOS area below
# 1 MiB (0xfd09a here), not in the kernel's idle loop: those samples grow with
# the time spent waiting for the disk (over 1,000 per cold read of the bench
# tree, about 200 per warm one), and no guest code runs there (user programs
# start at 4 MiB), so they count as idle too.
HALTED_BELOW = 0x100000


class Stub:
    """The few packets of the gdb remote protocol this needs (no-ack mode)."""

    def __init__(self, port):
        for _ in range(600):
            try:
                self.sock = socket.create_connection(("127.0.0.1", port))
                break
            except OSError:
                time.sleep(0.5)
        else:
            raise SystemExit(f"profile: no gdb stub on port {port}")
        self.buf = b""
        self.ack = True
        self.send("QStartNoAckMode")
        self.drain()
        self.ack = False
        self.sock.sendall(b"+")
        # The stub stops the guest when a debugger attaches and may report it twice.
        self.send("?")
        self.drain()

    def send(self, p):
        self.sock.sendall(b"$" + p.encode() + b"#%02x" % (sum(p.encode()) & 0xFF))

    def drain(self):
        time.sleep(0.5)
        self.sock.settimeout(0.3)
        try:
            while self.sock.recv(65536):
                pass
        except socket.timeout:
            pass
        self.sock.settimeout(2)
        self.buf = b""

    def packet(self):
        while True:
            i = self.buf.find(b"$")
            j = self.buf.find(b"#", max(i, 0))
            if i >= 0 and j >= 0 and len(self.buf) >= j + 3:
                data, self.buf = self.buf[i + 1:j], self.buf[j + 3:]
                if self.ack:
                    self.sock.sendall(b"+")
                return data.decode(errors="replace")
            chunk = self.sock.recv(65536)
            if not chunk:
                raise EOFError
            self.buf += chunk

    def cmd(self, p):
        self.send(p)
        while True:
            r = self.packet()
            if r[:1] not in ("T", "S"):  # a late stop reply is not the answer
                return r

    def stop(self):
        self.sock.sendall(b"\x03")
        while self.packet()[:1] not in ("T", "S"):
            pass

    def threads(self):
        tids, r = [], self.cmd("qfThreadInfo")
        while r.startswith("m"):
            tids += r[1:].split(",")
            r = self.cmd("qsThreadInfo")
        return tids

    def sample(self, tid):
        """(instruction pointer, kernel text addresses on the stack) of one vCPU."""
        if self.cmd("Hg" + tid) != "OK":
            return None
        regs = self.cmd("g")
        # x86_64 'g' order: rax rbx rcx rdx rsi rdi rbp rsp r8-r15 rip, 8 bytes each.
        rsp = int.from_bytes(bytes.fromhex(regs[7 * 16:8 * 16]), "little")
        rip = int.from_bytes(bytes.fromhex(regs[16 * 16:17 * 16]), "little")
        stack = []
        # 2 KiB (what one reply of QEMU's stub holds): deep enough to reach the driver's and
        # the syscall's frames below the block layer's and the allocator's.
        mem = self.cmd("m%x,800" % rsp)
        if not mem.startswith("E"):
            b = bytes.fromhex(mem)
            for k in range(0, len(b) - 7, 8):
                w = int.from_bytes(b[k:k + 8], "little")
                if KERNEL_TEXT[0] <= w < KERNEL_TEXT[1]:
                    stack.append(w)
        return rip, stack[:64]


def text(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except FileNotFoundError:
        return ""


def sample(port, log, out):
    stub = Stub(int(port))
    stub.send("c")
    while "@@bench kernel" not in text(log):
        if "@@bench-end@@" in text(log):
            break
        time.sleep(0.2)
    rows, run, n, lost = [], "0s", 0, 0
    while True:
        n += 1
        try:
            stub.stop()
            for tid in stub.threads():
                s = stub.sample(tid)
                if s:
                    rows.append((run, s[0], s[1]))
        except socket.timeout:
            lost += 1
            stub.drain()
        except EOFError:
            break
        try:
            stub.send("c")
        except OSError:
            break
        time.sleep(0.002)
        if n % 20 == 0:
            t = text(log)
            # Inside a timed run once its "@@T" is printed, until its "@@R".
            done = t.count("@@R ")
            run = done if t.count("@@T") > done else f"{done}s"
            if "@@bench-end@@" in t:
                break
    with open(out, "w") as f:
        for run_no, rip, stack in rows:
            f.write(f"{run_no} {rip:x} {' '.join('%x' % w for w in stack)}\n")
    print(f"profile: {len(rows)} samples ({lost} stops lost) in {out}")


def symbols(system_map, log):
    syms = []
    with open(system_map) as f:
        for line in f:
            p = line.split()
            if len(p) >= 3 and p[1] in "tTwW":
                syms.append((int(p[0], 16), p[2]))
    for m in re.finditer(r"@@SYM ([0-9a-f]+) ([tT]) (\S+)", text(log)):
        syms.append((int(m.group(1), 16), "[puzzlefs] " + m.group(3)))
    syms.sort()
    return [a for a, _ in syms], [n for _, n in syms]


def check_map(system_map, log):
    """None if the vmlinux symbols the guest printed (@@KSYM) are where
    `system_map` puts them, else why not: a System.map of another build
    names the wrong functions for every sample in vmlinux, silently."""
    printed = re.findall(r"@@KSYM ([0-9a-f]+) (\S+)", text(log))
    if not printed:
        return "the guest printed no @@KSYM line (an older guest.sh): System.map not checked"
    want = {n: int(a, 16) for a, n in printed}
    have = {}
    with open(system_map) as f:
        for line in f:
            p = line.split()
            if len(p) >= 3 and p[2] in want:
                have[p[2]] = int(p[0], 16)
    bad = [n for n, a in want.items() if have.get(n) != a]
    if bad:
        return (f"{system_map} is not the booted kernel's: {', '.join(sorted(bad))} "
                "not where the guest has it (BENCH_SYSTEM_MAP names the right one)")
    return None


def short(name):
    # Rust v0 names: drop the crate disambiguators, which only add noise here.
    return re.sub(r"Cs[0-9A-Za-z_]{6,14}_", "", name)[:120]


def report(log, samples, system_map, out):
    why = check_map(system_map, log)
    if why and "not checked" not in why:
        sys.exit(f"profile: {why}")
    addrs, names = symbols(system_map, log)

    def name(a):
        i = bisect.bisect_right(addrs, a) - 1
        # Past the end of vmlinux's text and below the modules: not code.
        return short(names[i]) if i >= 0 and names[i] != "_etext" else None

    runs = []
    for m in re.finditer(r"@@R ([^\r\n]*)", text(log)):
        kv = dict(p.split("=", 1) for p in m.group(1).split() if "=" in p)
        runs.append(f"{kv.get('fs')} {kv.get('wl')} {kv.get('mode')}")
    groups = collections.defaultdict(lambda: [0, 0, collections.Counter(), collections.Counter()])
    with open(samples) as f:
        for line in f:
            p = line.split()
            # "<n>s": before run n was timed (drop_caches, mounts, the shell).
            setup = p[0].endswith("s")
            run = int(p[0].rstrip("s"))
            key = runs[run] if run < len(runs) else "after the last run"
            g = groups["setup (drop_caches, mounts) of every run" if setup else key]
            g[0] += 1
            pc = int(p[1], 16)
            s = name(pc) or "?"
            if s in IDLE or pc < HALTED_BELOW:
                continue
            g[1] += 1
            g[2][s] += 1
            seen = {s}
            for w in p[2:]:
                n = name(int(w, 16))
                if n and n not in seen:
                    seen.add(n)
                    g[3][n] += 1
    with open(out, "w") as o:
        o.write("# make bench BENCH_PROFILE=1\n\nSamples of each vCPU (test/bench/profile.py); "
                "percentages of the busy ones (not idle). Grouped by the run they preceded.\n")
        if why:
            o.write(f"\nNote: {why}.\n")
        for key, (total, busy, self_c, stack_c) in groups.items():
            if not busy:
                continue
            o.write(f"\n## {key}: {total} samples, {busy} busy ({100 * busy / total:.0f}%)\n\n")
            o.write("| self | % | | on stack | % |\n|---|---|---|---|---|\n")
            a, b = self_c.most_common(25), stack_c.most_common(25)
            for k in range(max(len(a), len(b))):
                left = f"| {a[k][0]} | {100 * a[k][1] / busy:.1f} |" if k < len(a) else "| | |"
                r = f" | {b[k][0]} | {100 * b[k][1] / busy:.1f} |" if k < len(b) else " | | |"
                o.write(left + r + "\n")
    print(f"profile: {out}")


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "sample":
        sample(*sys.argv[2:])
    elif len(sys.argv) == 6 and sys.argv[1] == "report":
        report(*sys.argv[2:])
    else:
        sys.exit(__doc__)
