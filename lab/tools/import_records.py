#!/usr/bin/python3
"""Imports the measured records under lab/records/ into a results history (lab/results/history-notebook.md, "Importing the stored records").

Every Google Benchmark JSON under the folder becomes one session (`perfgate history record`), or, for a session
folder written by lab/tools/record_sessions.sh (a session.txt beside runs/*.current.json), its run files together.
The commit and time come from session.txt, else from the file's context (perfgate.git_commit / commit, date);
a file without a commit is recorded as commit "unknown". Files that are not Google Benchmark result files (logs,
Markdown, ncu output, the suites' own sweep formats) are listed as skipped, with the reason.

  lab/tools/import_records.py --perfgate build/ci/bin/perfgate --db history.db [records]
"""
import argparse
import glob
import json
import os
import subprocess
import sys


def session_info(folder):
    info = {}
    with open(os.path.join(folder, "session.txt")) as f:
        for line in f:
            key, _, value = line.rstrip("\n").partition("=")
            info[key] = value
    return info


def context_of(path):
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        return None, f"not JSON: {e}"
    if not isinstance(doc, dict) or not isinstance(doc.get("benchmarks"), list) or not isinstance(doc.get("context"), dict):
        return None, "not a Google Benchmark result file (no context and benchmarks)"
    return doc["context"], ""


def units(root):
    """(files, commit, time, label) per session to record, and (path, reason) per skipped file."""
    sessions, skipped, claimed = [], [], set()
    for marker in sorted(glob.glob(os.path.join(root, "**", "session.txt"), recursive=True)):
        folder = os.path.dirname(marker)
        runs = sorted(glob.glob(os.path.join(folder, "runs", "*.json")))
        info = session_info(folder)
        if runs:
            sessions.append((runs, info.get("commit", "unknown"), info.get("time", ""), info.get("label", "")))
            claimed.update(runs)
    for path in sorted(glob.glob(os.path.join(root, "**", "*.json"), recursive=True)):
        if path in claimed:
            continue
        context, why = context_of(path)
        if context is None:
            skipped.append((path, why))
            continue
        commit = str(context.get("perfgate.git_commit") or context.get("perfgate.baseline.commit") or
                     context.get("commit") or "unknown")
        sessions.append(([path], commit, str(context.get("date", "")), ""))
    return sessions, skipped


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--perfgate", required=True)
    ap.add_argument("--db", required=True)
    ap.add_argument("root", nargs="?", default=os.path.join(os.path.dirname(__file__), "..", "records"))
    a = ap.parse_args()
    sessions, skipped = units(a.root)
    recorded, failed = 0, []
    for files, commit, when, label in sessions:
        cmd = [a.perfgate, "history", "record", "--db", a.db, "--commit", commit]
        if when:
            cmd += ["--time", when]
        if label:
            cmd += ["--branch", label]
        p = subprocess.run(cmd + files, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if p.returncode == 0:
            recorded += 1
        else:
            failed.append((files[0], p.stderr.strip().splitlines()[-1] if p.stderr.strip() else f"exit {p.returncode}"))
    for path, why in skipped + failed:
        print(f"skipped {os.path.relpath(path, a.root)}: {why}", file=sys.stderr)
    print(f"imported {recorded} session(s) into {a.db}; {len(skipped)} file(s) are not result files, "
          f"{len(failed)} result file(s) could not be recorded")
    return 0 if recorded > 0 or not sessions else 1


if __name__ == "__main__":
    sys.exit(main())
