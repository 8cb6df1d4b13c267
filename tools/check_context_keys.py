#!/usr/bin/env python3
"""Checks that the context keys are defined once: no C++ or CUDA source spells a "perfgate." string literal
except harness/contract/include/perfgate/context_keys.hpp.

A bench binary writes context keys and the harness reads them (and the harness writes run and baseline keys
that it reads back): each is a constant in context_keys.hpp, which both sides include. Comments may name a
key; tests may spell them (they check the JSON a binary writes). ALLOWED lists the literals that start with
"perfgate." but are no context key.

  tools/check_context_keys.py ROOT

Exit 0 none; 1 lists each FILE:LINE: "LITERAL"; 2 bad arguments.
"""
import os
import re
import subprocess
import sys

HEADER = "harness/contract/include/perfgate/context_keys.hpp"
EXTENSIONS = (".cpp", ".cu", ".hpp", ".cuh", ".h")
# (file, literal): why it is no context key.
ALLOWED = {
    ("harness/src/report/dashboard.cpp", "perfgate."): "the dashboard page's JavaScript namespace",
    ("harness/src/report/report_record.cpp", "perfgate.measurement"): "a record's kind",
    ("harness/src/report/report_json.cpp", "perfgate.report/1"): "the JSON report's schema",
    ("harness/cli/cmd_history.cpp", "perfgate.report/1"): "the JSON report's schema",
    ("harness/src/report/fleet_report.cpp", "perfgate."): "a JUnit class name, perfgate.<suite>",
    ("harness/src/report/fleet_report.cpp", "perfgate.merge/1"): "the merged shards' schema",
    ("harness/src/io/loader.cpp", "perfgate."): "the prefix of perfgate's own schemas, refused as results",
    ("harness/src/io/loader.cpp", "perfgate.report/"): "the JSON report's schema, refused as results",
}


def source_files(root):
    if os.path.exists(os.path.join(root, ".git")):
        out = subprocess.run(["git", "-C", root, "ls-files", "-z"], capture_output=True, check=True)
        names = [f for f in out.stdout.decode().split("\0") if f]
    else:
        names = []
        for folder, dirs, files in os.walk(root):
            dirs[:] = sorted(d for d in dirs if not d.startswith("build"))
            names.extend(os.path.relpath(os.path.join(folder, f), root) for f in sorted(files))
    for name in names:
        parts = name.split("/")
        if name.endswith(EXTENSIONS) and name != HEADER and "tests" not in parts and parts[0] != "lab":
            yield name


def string_literals(text):
    """(line, contents) of every string literal outside comments; raw strings' contents are skipped."""
    i, n, line = 0, len(text), 1
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            line += text.count("\n", i, end)
            i = end
        elif c == "'" and not (i > 0 and (text[i - 1].isalnum() or text[i - 1] == "_")):
            j = i + 1
            while j < n and text[j] != "'" and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            i = j + 1
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"' and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            yield line, text[i + 1:j]
            i = j + 1
        else:
            line += c == "\n"
            i += 1


def offending(root):
    for name in source_files(root):
        with open(os.path.join(root, name), encoding="utf-8", errors="replace") as f:
            text = f.read()
        for line, literal in string_literals(text):
            if literal.startswith("perfgate.") and (name, literal) not in ALLOWED:
                yield f'{name}:{line}: "{literal}"'


def main(argv):
    if len(argv) != 1 or not os.path.isdir(argv[0]):
        print(__doc__, file=sys.stderr)
        return 2
    found = list(offending(argv[0]))
    for f in found:
        print(f)
    if found:
        print(f"{len(found)} context key literal(s) outside {HEADER}: use its constants (perfgate::context_keys)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
