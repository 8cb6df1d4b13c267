#!/usr/bin/env python3
"""A class's stored baseline pooled from the A/A sessions of several hosts, with its provenance in the files.

    pool_baseline.py --perfgate BIN --machine-class C --commit X --note TEXT --baseline-dir ROOT ARCHIVE...

ARCHIVE: session archives of lab/tools/record_gpu_groups.sh kept under lab/records/ (TAG-sessions.tgz, with
aa-TAG-gK/runs/SUITE.current.json inside). For every suite that all A/A sessions ran, `perfgate baseline update`
pools their process runs into ROOT/C/SUITE.json. The files then name what they were pooled from as the records hold
it ("records/device/.../TAG-sessions.tgz:aa-TAG-g0/runs/SUITE.current.json", not this run's scratch folder), and
carry TEXT as `perfgate.baseline.pooled`, the note a reader of the baseline sees first. The class folder's other files
(thresholds.json, noise.json) are left alone.
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from prove_history_gate import suite_files  # noqa: E402
from session_archives import session_roots  # noqa: E402

LAB = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def record_name(archive, cite_root):
    """The archive as the baseline files cite it: relative to cite_root (lab/, where the records live)."""
    path = os.path.relpath(os.path.abspath(archive), os.path.abspath(cite_root))
    if path.startswith(".."):
        raise SystemExit(f"{archive}: not under {cite_root}; pool from the stored records so the files can cite them")
    return path


def aa_sessions(archives, scratch, cite_root):
    """(session folder, its citation prefix) for every A/A session of the archives, in archive order."""
    names = [record_name(archive, cite_root) for archive in archives]
    sessions = []
    for archive, name, root in zip(archives, names, session_roots(archives, scratch)):
        found = sorted(d for d in glob.glob(os.path.join(root, "aa-*")) if os.path.isdir(d))
        if not found:
            raise SystemExit(f"{archive}: no aa-* session inside")
        sessions += [(d, f"{name}:{os.path.basename(d)}") for d in found]
    return sessions


def runs_by_suite(folder):
    """A session folder's run files by suite (runs/SUITE.current.json)."""
    return suite_files({"runs": sorted(glob.glob(os.path.join(folder, "runs", "*.current.json")))})


def common_runs(run_maps):
    """{suite: every session's run file} for the suites that every session ran, from each session's {suite: file}."""
    suites = sorted(set.intersection(*(set(m) for m in run_maps)))
    return {suite: [m[suite] for m in run_maps] for suite in suites}


def update_baselines(perfgate, root, machine_class, suite_runs, extra=(), quiet=False):
    """`perfgate baseline update` of each suite from its run files into ROOT/<class>/SUITE.json; the files' paths."""
    paths = []
    for suite, files in suite_runs.items():
        cmd = [perfgate, "baseline", "update", "--suite", suite, "--baseline-dir", root, "--machine-class",
               machine_class, *extra]
        for f in files:
            cmd += ["--from", f]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL if quiet else None)
        paths.append(os.path.join(root, machine_class, f"{suite}.json"))
    return paths


def cite_records(path, sessions, note):
    """Rewrites the scratch paths in the file's perfgate.baseline.command and adds the pooled note, text-wise, so
    that the rest of the file stays byte for byte what perfgate wrote."""
    with open(path) as f:
        text = f.read()
    for folder, cited in sessions:
        text = text.replace(folder + "/", cited + "/")
    anchor = ' "perfgate.baseline.machine": '
    start = text.find(anchor)
    if start < 0:
        raise SystemExit(f"{path}: no perfgate.baseline.machine line to put the pooled note after")
    end = text.index("\n", start) + 1
    text = text[:end] + f' "perfgate.baseline.pooled": {json.dumps(note)},\n' + text[end:]
    json.loads(text)  # still JSON
    with open(path, "w") as f:
        f.write(text)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--perfgate", required=True)
    ap.add_argument("--machine-class", required=True)
    ap.add_argument("--commit", required=True, help="the tree the sessions measured (its suites' code)")
    ap.add_argument("--note", required=True, help="perfgate.baseline.pooled: hosts, GPUs, runs and trees pooled")
    ap.add_argument("--baseline-dir", required=True, help="the root of the class folders (baselines/)")
    ap.add_argument("--cite-root", default=LAB, help="what the files cite the archives relative to (default: lab/)")
    ap.add_argument("archives", nargs="+")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="pool-baseline-") as scratch:
        sessions = aa_sessions(a.archives, scratch, a.cite_root)
        suite_runs = common_runs([runs_by_suite(d) for d, _ in sessions])
        if not suite_runs:
            raise SystemExit("no suite that every A/A session ran")
        for path in update_baselines(a.perfgate, a.baseline_dir, a.machine_class, suite_runs, ["--commit", a.commit]):
            cite_records(path, sessions, a.note)
            print(f"pooled {len(sessions)} sessions into {path}")


if __name__ == "__main__":
    main()
