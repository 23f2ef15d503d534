#!/usr/bin/python3
"""Every busybox applet the appliance's scripts and test cases call is in the
busybox config fragment of the defconfig.

Usage: check-applets.py <fragment> <applet list> [<busybox.config>]

<applet list>: the names busybox can provide, one a line (`busybox --list`
of Debian's busybox-static, which has them all). Commands are read from the
shell the guest runs: the overlay's scripts (every file under overlay/ that
starts with #!/bin/sh, and etc/inittab) and the strings test/cases/*.exp,
test/debug/*.exp, test/lib.tcl and test/samples/*.tcl give to run, run_ok
run_fails and send. A word in command position (line start, after | ; & && ||
$( ` then do else, find -exec, or after chroot <dir>, timeout <n>, setpriv <opts>, env
VAR=..., xargs, sh -c ') that is an applet needs CONFIG_<APPLET>=y in the
fragment. With <busybox.config> (Buildroot's package/busybox/busybox.config)
each fragment symbol must exist there, and the applets that default config
leaves out are listed.
"""
import os
import re
import sys

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
KEYWORDS = {"if", "then", "else", "elif", "fi", "for", "in", "do", "done", "while", "until",
            "case", "esac", "function", "!", "{", "}", "[[", "]]", "time"}
# Commands whose arguments start another command.
PREFIXES = {"chroot": 1, "timeout": 1, "nice": 0, "nohup": 0, "exec": 0, "env": 0,
            "xargs": 0, "setpriv": 0, "su": 0, "watch": 0, "time": 0}
# Applets whose Kconfig symbol is not CONFIG_<NAME>.
SYMBOL = {"[": "TEST1", "[[": "TEST2", "sh": "SH_IS_ASH", "ash": "ASH"}


def tcl_strings(text):
    """The first argument of each run/run_ok/run_fails call."""
    out = []
    for m in re.finditer(r"\b(?:run(?:_ok|_fails)?|send(?: --)?)\s+", text):
        i = m.end()
        if i >= len(text):
            continue
        if text[i] == '"':
            j, buf = i + 1, []
            while j < len(text) and text[j] != '"':
                if text[j] == "\\" and j + 1 < len(text):
                    buf.append({"r": "\n", "n": "\n"}.get(text[j + 1], text[j + 1]))
                    j += 2
                    continue
                buf.append(text[j])
                j += 1
            out.append("".join(buf))
        elif text[i] == "{":
            depth, j = 1, i + 1
            while j < len(text) and depth:
                depth += {"{": 1, "}": -1}.get(text[j], 0)
                j += 1
            out.append(text[i + 1:j - 1])
        elif text[i] == "$":
            continue  # a variable: its value is a string checked where it is set
    return out


def commands(shell):
    """Words in command position of a shell text."""
    found = set()
    shell = re.sub(r"\$\{[^}]*\}|\[[a-z_]+ [^]]*\]", " x ", shell)  # ${...} and Tcl [cmd ...]
    # A double-quoted word is data, except for the $(...) commands in it.
    shell = re.sub(r'"(?:[^"\\]|\\.)*"',
                   lambda m: " ; ".join(re.findall(r"\$\(([^()]*)\)", m.group(0))) or " x ", shell)
    for seg in re.split(r"\|\||&&|[|;&\n`]|\$\(|\(|\)|\bsh -c ['\"]?|\s-exec\s", shell):
        words = seg.replace("'", " ").replace('"', " ").split()
        while words:
            w = words.pop(0)
            if w in KEYWORDS or re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", w) or w.startswith(("<", ">", "2>", "#")):
                continue
            if w.startswith("-") and found:
                continue
            name = os.path.basename(w)
            found.add(name)
            if name in PREFIXES:
                skip = PREFIXES[name]
                # options of the prefix command, then its fixed arguments
                while words and (words[0].startswith("-") or re.match(r"^[A-Za-z_]+=", words[0])):
                    words.pop(0)
                del words[:skip]
                continue
            break
    return found


def main():
    fragment, applet_list = sys.argv[1], sys.argv[2]
    br_config = sys.argv[3] if len(sys.argv) > 3 else None
    applets = {line.strip() for line in open(applet_list) if line.strip()}
    used = {}
    sources = []
    for d in ("test/cases", "test/debug"):
        p = os.path.join(REPO, d)
        if os.path.isdir(p):
            sources += [os.path.join(p, f) for f in sorted(os.listdir(p)) if f.endswith(".exp")]
    sources.append(os.path.join(REPO, "test", "lib.tcl"))
    samples = os.path.join(REPO, "test", "samples")
    sources += [os.path.join(samples, f) for f in sorted(os.listdir(samples)) if f.endswith(".tcl")]
    for src in sources:
        for s in tcl_strings(open(src, errors="replace").read()):
            for c in commands(s):
                used.setdefault(c, set()).add(os.path.relpath(src, REPO))
    for root, _, files in os.walk(os.path.join(REPO, "overlay")):
        for f in files:
            path = os.path.join(root, f)
            text = open(path, errors="replace").read()
            if f == "inittab":
                text = "\n".join(line.split(":", 3)[-1] for line in text.splitlines() if ":" in line)
            elif not text.startswith("#!/bin/sh"):
                continue
            text = re.sub(r"(?m)#.*$", "", text)
            for c in commands(text):
                used.setdefault(c, set()).add(os.path.relpath(path, REPO))
    needed = sorted(c for c in used if c in applets)
    have = set()
    for line in open(fragment):
        m = re.match(r"^CONFIG_([A-Z0-9_]+)=y$", line.strip())
        if m:
            have.add(m.group(1))
    bad = 0
    for c in needed:
        sym = SYMBOL.get(c, re.sub(r"[^A-Z0-9]", "_", c.upper()))
        if sym not in have:
            print(f"applets: FAIL: {c} (CONFIG_{sym}) is not in {os.path.relpath(fragment, REPO)};"
                  f" used by {', '.join(sorted(used[c]))}")
            bad = 1
    if br_config:
        known = set(re.findall(r"^(?:# )?CONFIG_([A-Z0-9_]+)[= ]", open(br_config).read(), re.M))
        default_on = set(re.findall(r"^CONFIG_([A-Z0-9_]+)=y", open(br_config).read(), re.M))
        for sym in sorted(have - known):
            print(f"applets: FAIL: CONFIG_{sym} of the fragment is not a symbol of {br_config}")
            bad = 1
        off = sorted(s for s in have if s in known and s not in default_on)
        print(f"applets: the fragment turns on what Buildroot's busybox.config leaves off: {' '.join(off)}")
    print(f"applets: {len(needed)} applets called: {' '.join(needed)}")
    print("applets: " + ("FAILED" if bad else "all in the fragment"))
    return bad


if __name__ == "__main__":
    sys.exit(main())
