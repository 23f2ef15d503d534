#!/usr/bin/env python3
"""`make bench`, host side: turn the @@R lines of the console logs into
<out>/results.json (every run, and the medians) and <out>/report.md (one
table), and print the table.

    report.py <out dir> <console log>...

A cell is the median of the runs of that workload, mode and file system, in
milliseconds. A run that hit the time limit makes the cell "timeout", with the
time per operation it showed extrapolated to the full count (marked "~").
"""
import json
import os
import re
import statistics
import sys
from pathlib import Path

FS_ORDER = ["tmpfs", "erofs", "erofs-dio", "puzzlefs", "puzzlefs-verity", "erofs-lz4hc", "squashfs-zstd",
            "puzzlefs-zstd"]
FS_TITLE = {
    "tmpfs": "tmpfs", "erofs": "erofs", "erofs-dio": "erofs directio", "puzzlefs": "puzzlefs",
    "puzzlefs-verity": "puzzlefs verity=require",
    "erofs-lz4hc": "erofs lz4hc",
    "squashfs-zstd": "squashfs zstd", "puzzlefs-zstd": "puzzlefs zstd",
}
# (workload, mode, row title)
ROWS = [
    ("readall", "cold", "read every file (debian/), cold"),
    ("readall", "warm", "read every file (debian/), warm"),
    ("stat", "cold", "readdir + lstat every entry (debian/), cold"),
    ("stat", "warm", "readdir + lstat every entry (debian/), warm"),
    ("seq32", "cold", "32 MiB file, cold"),
    ("seq32", "warm", "32 MiB file, warm"),
    ("seq128", "cold", "128 MiB file, cold"),
    ("seq128", "warm", "128 MiB file, warm"),
    ("rand", "cold", "{rand} random 4 KiB preads (128 MiB file), cold"),
    ("rand", "warm", "{rand} random 4 KiB preads (128 MiB file), warm"),
    ("neg", "cold", "{neg} negative lookups, 100k dir, cold"),
    ("neg", "warm", "{neg} negative lookups, 100k dir, warm"),
    ("pos", "cold", "{pos} positive lookups, 100k dir, cold"),
    ("pos", "warm", "{pos} positive lookups, 100k dir, warm"),
    ("mount10", "cold", "mount, 10-inode image, cold"),
    ("mount10k", "cold", "mount, 10,000-inode image, cold"),
    ("mount100k", "cold", "mount, 100,000-inode image, cold"),
    ("vmount10", "cold", "mount, 10-inode image with fs-verity, verity=require, cold"),
    ("vmount10k", "cold", "mount, 10,000-inode image with fs-verity, verity=require, cold"),
    ("vmount100k", "cold", "mount, 100,000-inode image with fs-verity, verity=require, cold"),
    ("cache", "cold", "page cache KiB per MiB read (read every file, cold)"),
    ("disk", "cold", "MiB read from the disk (read every file, cold)"),
    ("cpu", "cold", "CPU busy, ms, all CPUs (read every file, cold)"),
    ("iowait", "cold", "CPU idle waiting for the disk, ms, all CPUs (read every file, cold)"),
    ("versions", "cold", "three versions of debian/ side by side, each read whole in turn, cold"),
    ("vcache", "cold", "three versions: page-cache growth, MiB"),
    ("vdisk", "cold", "three versions: MiB read from the disk"),
]
# Rows that show a field of another workload's runs: (workload, field, divisor).
FIELD_ROWS = {"disk": ("readall", "io_kib", 1024), "cpu": ("readall", "cpu_ms", 1),
              "iowait": ("readall", "iowait_ms", 1), "vcache": ("versions", "cached_kib", 1024),
              "vdisk": ("versions", "io_kib", 1024)}
# Ratio columns: puzzlefs time / peer time (> 1: puzzlefs is slower).
RATIOS = [("puzzlefs", "tmpfs"), ("puzzlefs", "erofs"), ("puzzlefs", "erofs-dio"),
          ("puzzlefs-verity", "puzzlefs"),
          ("puzzlefs-zstd", "erofs-lz4hc"), ("puzzlefs-zstd", "squashfs-zstd")]

SEQ_BYTES = {"seq32": 32 << 20, "seq128": 128 << 20}
LINE = re.compile(r"@@R (.*)")


def parse(logs):
    runs = []
    for boot, log in enumerate(logs, 1):
        for line in Path(log).read_text(errors="replace").splitlines():
            m = LINE.search(line)
            if not m:
                continue
            kv = dict(p.split("=", 1) for p in m.group(1).strip().split() if "=" in p)
            run = {k: kv[k] for k in ("label", "fs", "wl", "mode") if k in kv}
            run["rep"] = int(kv.get("rep", 0))
            run["boot"] = boot
            if "error" in kv:
                run["error"] = kv["error"]
            else:
                for k in ("ms",):
                    run[k] = float(kv[k])
                for k in ("ops", "bytes", "cached_kib", "timeout"):
                    run[k] = int(kv[k])
                # Disk reads during the run (guests of older bench scripts lack them).
                for k in ("io_reads", "io_kib", "cpu_ms", "iowait_ms"):
                    if k in kv:
                        run[k] = int(kv[k])
            runs.append(run)
    return runs


def cell(runs, full_ops, unit="ops"):
    """The summary of the runs of one (label, fs, workload, mode); full_ops:
    the count of `unit` (ops or bytes) a complete run does."""
    if not runs:
        return None
    errs = [r for r in runs if "error" in r]
    if errs:
        return {"error": errs[0]["error"]}
    out = [r for r in runs if r["timeout"]]
    if out:
        r = out[0]
        est = r["ms"] / r[unit] * full_ops if r[unit] and full_ops else None
        return {"timeout": True, "ms": r["ms"], "ops": r["ops"], "bytes": r["bytes"], "estimate_ms": est}
    return {"ms": statistics.median(r["ms"] for r in runs), "runs": len(runs)}


def fmt(c):
    if c is None:
        return "–"
    if "error" in c:
        return "error"
    if c.get("timeout"):
        est = c.get("estimate_ms")
        return f"timeout (~{est:,.0f})" if est else "timeout"
    v = c["ms"]
    return f"{v:,.0f}" if v >= 10 else f"{v:.2f}"


def value(c):
    if c is None or "error" in c:
        return None
    return c.get("estimate_ms") if c.get("timeout") else c["ms"]


def main():
    out = Path(sys.argv[1])
    runs = parse(sys.argv[2:])
    if not runs:
        sys.exit("report: no @@R lines in " + " ".join(sys.argv[2:]))
    labels = []
    for r in runs:
        if r["label"] not in labels:
            labels.append(r["label"])
    cur = labels[0]
    # The counts the guest was given (bench.sh exports them).
    full = {"rand": int(os.environ.get("RAND_READS", 3000)),
            "neg": int(os.environ.get("NEG_LOOKUPS", 20000)),
            "pos": int(os.environ.get("POS_LOOKUPS", 20000))}
    counts = full

    def runs_of(label, fs, wl, mode):
        return [r for r in runs if r["label"] == label and r["fs"] == fs and r["wl"] == wl and r["mode"] == mode]

    def cache_cell(label, fs):
        rs = [r for r in runs_of(label, fs, "readall", "cold") if "error" not in r and not r["timeout"]]
        vals = [r["cached_kib"] / (r["bytes"] / 1048576) for r in rs if r["bytes"]]
        return {"ms": statistics.median(vals), "runs": len(vals)} if vals else None

    def field_cell(label, fs, wl, field, div):
        rs = [r for r in runs_of(label, fs, wl, "cold") if "error" not in r and not r["timeout"] and field in r]
        return {"ms": statistics.median(r[field] / div for r in rs), "runs": len(rs)} if rs else None

    table = {}
    for label in labels:
        for fs in FS_ORDER:
            for wl, mode, _ in ROWS:
                if wl == "cache":
                    c = cache_cell(label, fs)
                elif wl in FIELD_ROWS:
                    c = field_cell(label, fs, *FIELD_ROWS[wl])
                elif wl in SEQ_BYTES:
                    c = cell(runs_of(label, fs, wl, mode), SEQ_BYTES[wl], "bytes")
                else:
                    c = cell(runs_of(label, fs, wl, mode), full.get(wl))
                if c is not None:
                    table.setdefault(label, {}).setdefault(fs, {})[f"{wl}/{mode}"] = c

    # The first log's build is "this build". A file system it did not run
    # (e.g. a puzzlefs-only run compared with a full one) comes from the
    # first other build that ran it, named in its column title.
    src = {}
    for fs in FS_ORDER:
        for lb in labels:
            if fs in table.get(lb, {}):
                src[fs] = lb
                break
    cols = [(src[fs], fs, FS_TITLE[fs] if src[fs] == cur else f"{FS_TITLE[fs]} ({src[fs]})")
            for fs in FS_ORDER if fs in src]
    prev = [lb for lb in labels if lb != cur]
    for lb in prev:
        for fs in ("puzzlefs", "puzzlefs-zstd"):
            if fs in table.get(lb, {}) and src.get(fs) == cur:
                cols.append((lb, fs, f"{FS_TITLE[fs]} ({lb})"))

    # Per boot: the median of each boot's runs, and puzzlefs ÷ that boot's
    # erofs (both builds' boots run erofs, see bench.sh).
    def boots(label, fs, wl, mode):
        by = {}
        for r in runs_of(label, fs, wl, mode):
            if "error" not in r and not r["timeout"]:
                by.setdefault(r["boot"], []).append(r["ms"])
        return {b: statistics.median(v) for b, v in sorted(by.items())}

    def normalized(label, fs, wl, mode):
        """Median over the label's boots of (fs ÷ that boot's erofs)."""
        mine, ref = boots(label, fs, wl, mode), boots(label, "erofs", wl, mode)
        vals = [mine[b] / ref[b] for b in mine if ref.get(b)]
        return statistics.median(vals) if vals else None

    pairs = [(lb, fs) for lb in prev for fs in ("puzzlefs", "puzzlefs-zstd")
             if fs in table.get(lb, {}) and src.get(fs) == cur]
    head = [""] + [t for _, _, t in cols] + [f"{FS_TITLE[a]} ÷ {FS_TITLE[b]}" for a, b in RATIOS]
    # Boots of both builds ran erofs (older runs' prev boots did not).
    norm = {lb: "erofs" in table.get(cur, {}) and "erofs" in table.get(lb, {}) for lb in prev}
    for lb, fs in pairs:
        head.append(f"{FS_TITLE[fs]}: {cur} ÷ {lb}")
        if norm[lb]:
            head.append(f"{FS_TITLE[fs]}: {cur} ÷ {lb}, each boot ÷ its erofs")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for wl, mode, title in ROWS:
        cells = [table.get(lb, {}).get(fs, {}).get(f"{wl}/{mode}") for lb, fs, _ in cols]
        if all(c is None for c in cells):
            continue
        row = [title.format(**{k: f"{v:,}" for k, v in counts.items()})] + [fmt(c) for c in cells]
        for a, b in RATIOS:
            va = value(table.get(src.get(a), {}).get(a, {}).get(f"{wl}/{mode}"))
            vb = value(table.get(src.get(b), {}).get(b, {}).get(f"{wl}/{mode}"))
            row.append(f"{va / vb:.2f}" if va is not None and vb else "–")
        for lb, fs in pairs:
            va = value(table.get(cur, {}).get(fs, {}).get(f"{wl}/{mode}"))
            vb = value(table.get(lb, {}).get(fs, {}).get(f"{wl}/{mode}"))
            row.append(f"{va / vb:.2f}" if va is not None and vb else "–")
            if norm[lb]:
                na = normalized(cur, fs, wl, mode) if wl not in FIELD_ROWS and wl != "cache" else None
                nb = normalized(lb, fs, wl, mode) if na is not None else None
                row.append(f"{na / nb:.2f}" if na is not None and nb else "–")
        lines.append("| " + " | ".join(row) + " |")

    # Boot to boot: each boot's median, so that a ratio can be read against
    # the spread it comes from.
    nboots = len({r["boot"] for r in runs})
    if nboots > 1:
        bcols = [(lb, fs) for lb in labels for fs in ("erofs", "puzzlefs", "puzzlefs-zstd") if fs in table.get(lb, {})]
        lines += ["", "Each boot's median, ms, in boot order:", "",
                  "| | " + " | ".join(f"{FS_TITLE[fs]} ({lb})" for lb, fs in bcols) + " |",
                  "|" + "---|" * (len(bcols) + 1)]
        for wl, mode, title in ROWS:
            if wl == "cache" or wl in FIELD_ROWS:
                continue
            per = [boots(lb, fs, wl, mode) for lb, fs in bcols]
            if not any(per):
                continue
            row = [title.format(**{k: f"{v:,}" for k, v in counts.items()})]
            row += [" / ".join(f"{v:,.0f}" for v in p.values()) or "–" for p in per]
            lines.append("| " + " | ".join(row) + " |")

    # Round by round: this build's boot ÷ the other build's boot of the same
    # round (bench.sh boots them in turn), so that one can see whether the
    # rounds agree before reading the ratio of the medians above.
    rounds = {lb: len({r["boot"] for r in runs if r["label"] == lb}) for lb in labels}
    for lb, fs in pairs:
        if rounds[cur] < 2 or rounds[lb] < 2:
            continue
        rr = []
        for wl, mode, title in ROWS:
            if wl == "cache" or wl in FIELD_ROWS:
                continue
            a, b = boots(cur, fs, wl, mode), boots(lb, fs, wl, mode)
            ratios = [x / y for x, y in zip(a.values(), b.values()) if y]
            if ratios:
                title = title.format(**{k: f"{v:,}" for k, v in counts.items()})
                rr.append(f"| {title} | " + " / ".join(f"{q:.2f}" for q in ratios) + " |")
        if rr:
            lines += ["", f"{FS_TITLE[fs]}: {cur} ÷ {lb}, round by round (each round's medians):", "",
                      "| | rounds |", "|---|---|"] + rr

    # The targets of issue 12, from this run (this build's columns).
    def v(fs, key):
        return value(table.get(src.get(fs), {}).get(fs, {}).get(key))

    def target(text, got, ok, each=()):
        if got is None:
            return f"- {text}: not measured"
        line = f"- {text}: {got:.2f} ({'met' if ok(got) else 'not met'})"
        # With several boots of this build, the same ratio boot by boot: a peer's
        # cold figures move from one boot to the next, and the ratio of medians
        # over all boots can hide that.
        if len(each) > 1:
            m = statistics.median(each)
            line += (f"; boot by boot {' / '.join(f'{x:.2f}' for x in each)}, median {m:.2f}"
                     f" ({'met' if ok(m) else 'not met'})")
        return line

    def ratio(a, b):
        return a / b if a is not None and b else None

    def per_boot(fa, ka, fb, kb):
        """a's median ÷ b's, in each boot of this build that ran both."""
        if src.get(fa) != cur or src.get(fb) != cur:
            return []
        a, b = boots(cur, fa, *ka.split("/")), boots(cur, fb, *kb.split("/"))
        return [a[x] / b[x] for x in a if b.get(x)]

    tg = ["", "Targets (issue 12), this build:"]
    for fs in ("puzzlefs", "puzzlefs-zstd"):
        r = ratio(v(fs, "seq128/cold"), v(fs, "seq32/cold"))
        tg.append(target(f"{FS_TITLE[fs]}: 128 MiB ÷ 32 MiB file time, cold (≤ 4.4)", r, lambda x: x <= 4.4,
                         per_boot(fs, "seq128/cold", fs, "seq32/cold")))
    r = ratio(v("erofs", "readall/cold"), v("puzzlefs", "readall/cold"))
    tg.append(target("read every file cold, puzzlefs throughput ÷ erofs (≥ 0.8)", r, lambda x: x >= 0.8,
                     per_boot("erofs", "readall/cold", "puzzlefs", "readall/cold")))
    r = ratio(v("squashfs-zstd", "readall/cold"), v("puzzlefs-zstd", "readall/cold"))
    tg.append(target("read every file cold, puzzlefs zstd throughput ÷ squashfs zstd (≥ 0.8)", r, lambda x: x >= 0.8,
                     per_boot("squashfs-zstd", "readall/cold", "puzzlefs-zstd", "readall/cold")))
    r = ratio(v("tmpfs", "readall/warm"), v("puzzlefs", "readall/warm"))
    tg.append(target("read every file warm, puzzlefs throughput ÷ tmpfs (≥ 0.9)", r, lambda x: x >= 0.9,
                     per_boot("tmpfs", "readall/warm", "puzzlefs", "readall/warm")))
    r = ratio(v("erofs", "stat/cold"), v("puzzlefs", "stat/cold"))
    tg.append(target("readdir + lstat cold, puzzlefs speed ÷ erofs (≥ 0.8)", r, lambda x: x >= 0.8,
                     per_boot("erofs", "stat/cold", "puzzlefs", "stat/cold")))
    r = ratio(v("puzzlefs", "neg/cold"), v("erofs", "neg/cold"))
    tg.append(target("negative lookups cold, puzzlefs time ÷ erofs (≤ 2)", r, lambda x: x <= 2,
                     per_boot("puzzlefs", "neg/cold", "erofs", "neg/cold")))
    r = ratio(v("puzzlefs", "mount100k/cold"), v("puzzlefs", "mount10/cold"))
    tg.append(target("mount time, 100,000-inode ÷ 10-inode image (≤ 2)", r, lambda x: x <= 2,
                     per_boot("puzzlefs", "mount100k/cold", "puzzlefs", "mount10/cold")))
    r = ratio(v("puzzlefs", "vmount100k/cold"), v("puzzlefs", "vmount10/cold"))
    tg.append(target("mount time with fs-verity (metadata read page by page), 100,000 ÷ 10 inodes (≤ 2)",
                     r, lambda x: x <= 2))
    c = v("puzzlefs", "cache/cold")
    tg.append(target("puzzlefs page-cache growth, MiB per MiB read (≤ 1.1)", c / 1024 if c is not None else None,
                     lambda x: x <= 1.1))
    lines += tg

    setup = (out / "setup.txt").read_text() if (out / "setup.txt").exists() else ""
    md = ["# make bench", "", "Milliseconds, median of the runs (page cache row: KiB of page-cache growth per",
          "MiB read). \"timeout (~N)\": the run hit TIMEOUT_S; N extrapolates its time per",
          "operation to the full count. Ratio columns: puzzlefs time ÷ the peer's (> 1 = puzzlefs slower).",
          "Compressed peers are compared with puzzlefs zstd, the others with plain puzzlefs.", ""]
    md += ["    " + s for s in setup.splitlines()] + [""]
    md += lines
    (out / "report.md").write_text("\n".join(md) + "\n")
    results = {"runs": runs, "summary": table, "counts": counts}
    (out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    print("\n".join(lines))
    print(f"\n(written: {out / 'report.md'}, {out / 'results.json'})")


if __name__ == "__main__":
    main()
