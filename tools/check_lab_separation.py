#!/usr/bin/env python3
"""Checks that the product stands without lab/: no tracked file outside lab/ names a path in it.

The lab (records, results pages, campaign tools) may be deleted; the product (harness, benches, baselines,
ci, docs, examples, cmake, tools) must build, test and read the same. Allowed: links from Markdown pages
to lab pages (the measured figures behind a statement), and the few places that use lab/ when it exists
(ALLOWED below).

  tools/check_lab_separation.py ROOT

Exit 0 none; 1 lists each FILE:LINE that names lab/; 2 bad arguments.
"""
import os
import re
import subprocess
import sys

# Files that deliberately use lab/ when present: the optional CMake registration of its tests, CI running
# them after the lab-less product CI, and the checks themselves.
ALLOWED = {"CMakeLists.txt", ".ci/run", "tools/check_lab_separation.py", "tools/check_doc_links.py",
           "tools/test_check_lab_separation.py", "tools/test_check_doc_links.py"}
LAB_PATH = re.compile(r"(?<![\w./-])(?:\.\./)*lab/")
MARKDOWN_LINK_TARGET = re.compile(r"\]\(\s*<?[^)\s>]*>?[^)]*\)|^\s{0,3}\[[^\]]+\]:\s*\S+")


def tracked_files(root):
    """The files git tracks; in a copy of the tree without .git (CI's lab-less copy), every file outside build*/."""
    if os.path.exists(os.path.join(root, ".git")):
        out = subprocess.run(["git", "-C", root, "ls-files", "-z"], capture_output=True, check=True)
        return [f for f in out.stdout.decode().split("\0") if f]
    files = []
    for folder, dirs, names in os.walk(root):
        if folder == root:
            dirs[:] = [d for d in dirs if not d.startswith("build")]
        files.extend(os.path.relpath(os.path.join(folder, n), root) for n in names)
    return sorted(files)


def offending_lines(text, markdown):
    for number, line in enumerate(text.splitlines(), 1):
        prose = MARKDOWN_LINK_TARGET.sub("", line) if markdown else line
        if LAB_PATH.search(prose):
            yield number, line.strip()


def product_files(root):
    for name in tracked_files(root):
        if name.startswith("lab/") or name in ALLOWED:
            continue
        path = os.path.join(root, name)
        if os.path.isfile(path) and os.path.getsize(path) < 4_000_000:
            yield name, path


def main(argv):
    if len(argv) != 2 or not os.path.isdir(argv[1]):
        print(__doc__, file=sys.stderr)
        return 2
    found = 0
    for name, path in product_files(argv[1]):
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except UnicodeDecodeError:
            continue
        for number, line in offending_lines(text, name.endswith(".md")):
            found += 1
            print(f"{name}:{number}: names lab/ outside a Markdown link: {line[:160]}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
