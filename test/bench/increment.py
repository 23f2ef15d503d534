#!/usr/bin/env python3
"""What one build added to a puzzlefs OCI directory, by kind of blob.

    increment.py PUZZLEFS OCI_DIR TAG SEEN

SEEN lists the blob names (hex) present before the build, one a line; it is
rewritten with the names present now. Prints one line (tab-separated):
new chunk blobs, their apparent and du (4 KiB blocks) bytes, then the same
for the new metadata layers and the new manifest, e.g.
    chunks 412 3456789 3500032 metadata 1 254608 258048 manifest 1 121368 122880
A blob is a manifest if index.json names it, a metadata layer if a tag's
manifest lists it (puzzlefs inspect), a chunk otherwise.
"""

import json
import os
import subprocess
import sys


def main():
    tool, oci, tag, seen_path = sys.argv[1:]
    blobs = os.path.join(oci, "blobs", "sha256")
    try:
        with open(seen_path) as f:
            seen = {line.strip() for line in f if line.strip()}
    except FileNotFoundError:
        seen = set()
    now = sorted(os.listdir(blobs))
    with open(seen_path, "w") as f:
        f.writelines(n + "\n" for n in now)

    with open(os.path.join(oci, "index.json")) as f:
        index = json.load(f)
    manifests = {m["digest"].split(":", 1)[1] for m in index["manifests"]}
    report = json.loads(
        subprocess.run([tool, "inspect", "--json", oci, tag], check=True,
                       capture_output=True, text=True).stdout)
    layers = {layer["digest"] for img in report["images"]
              for layer in img["layers"]}

    kinds = {"chunks": [0, 0, 0], "metadata": [0, 0, 0], "manifest": [0, 0, 0]}
    for name in now:
        if name in seen:
            continue
        st = os.stat(os.path.join(blobs, name))
        kind = ("manifest" if name in manifests else
                "metadata" if name in layers else "chunks")
        k = kinds[kind]
        k[0] += 1
        k[1] += st.st_size
        k[2] += st.st_blocks * 512
    print("\t".join(f"{kind}\t{n}\t{app}\t{du}"
                    for kind, (n, app, du) in kinds.items()))


if __name__ == "__main__":
    main()
