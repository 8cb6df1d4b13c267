#!/usr/bin/env python3
"""How much session levels spread between machines of one class, with each process run levelled by its median
repetition or by its fastest one (docs/statistics.md, "A run's level").

    lab/tools/run_level_spread.py --suite transfers --benchmark 'h2d/pinned/bytes:268435456' \\
        --sessions lab/records/device/2026-11-25_h100-x1_evidence/sessions.tgz lab/records/device/2026-11-26_h100-x1_evidence/sessions.tgz

Each session folder (as lab/tools/record_gpu_evidence.sh writes them) holds runs/<suite>.current.json, the main job's
process runs. A/A sessions are those named aa-*; the SD of their log levels around the class median is printed per
statistic, then every session's level relative to that median (planted sessions included, pNN-*).

With --against SUITE:BENCHMARK it also says, per statistic, how the two benchmarks' A/A session levels move together
between machines: their correlation and the SD of the difference of their log levels. A high correlation with a
benchmark that a change would slow alike (the same kernels) means the spread is the cards' own speed, which no
ratio between the two can remove.
"""
import argparse
import glob
import math
import os
import statistics
import sys
import tempfile

from judge_gpu_sessions import repetition_times
from session_archives import session_roots


def runs_of(path, benchmark):
    """Repetition times of the benchmarks whose name contains `benchmark`, by process run."""
    by_run = {}
    for name, runs in repetition_times([path]).items():
        if benchmark in name:
            for run, times in runs.items():
                by_run.setdefault(run, []).extend(times)
    return by_run


STATISTICS = {"median": statistics.median, "fastest": min}


def session_levels(folders, suite, benchmark):
    rows = []
    for folder in folders:
        for path in sorted(glob.glob(os.path.join(folder, "*", "runs", f"{suite}.current.json"))):
            runs = runs_of(path, benchmark)
            if not runs:
                continue
            session = path.split(os.sep)[-3]
            rows.append((session, {name: statistics.median([f(v) for v in runs.values()])
                                   for name, f in STATISTICS.items()}))
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--suite", required=True)
    p.add_argument("--benchmark", required=True, help="a part of the benchmark's name")
    p.add_argument("--sessions", nargs="+", required=True, help="folders of session folders, or session archives (.tgz)")
    p.add_argument("--against", default="", metavar="SUITE:BENCHMARK",
                   help="a second benchmark: the correlation of the two benchmarks' A/A session levels")
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        roots = session_roots(a.sessions, scratch)
        rows = session_levels(roots, a.suite, a.benchmark)
        other = session_levels(roots, *a.against.split(":", 1)) if a.against else []
    aa = [levels for name, levels in rows if name.startswith("aa-")]
    if len(aa) < 2:
        sys.exit(f"run_level_spread: fewer than 2 A/A sessions hold '{a.benchmark}' in {a.suite}")
    for name in STATISTICS:
        centre = statistics.median(levels[name] for levels in aa)
        sd = statistics.stdev(math.log(levels[name] / centre) for levels in aa)
        each = " ".join(f"{s}:{100 * (levels[name] / centre - 1):+.1f}%" for s, levels in rows)
        print(f"{name:8s} A/A SD {100 * sd:.2f}% over {len(aa)} machines | {each}")
    if a.against:
        print_co_movement(rows, other, a.against)


def print_co_movement(rows, other, label):
    """Per statistic: the correlation of two benchmarks' A/A log levels and the SD of their difference."""
    theirs = dict(other)
    pairs = [(mine, theirs[s]) for s, mine in rows if s.startswith("aa-") and s in theirs]
    if len(pairs) < 3:
        sys.exit(f"run_level_spread: fewer than 3 A/A sessions hold both benchmarks ('{label}')")
    for name in STATISTICS:
        x = [math.log(mine[name]) for mine, _ in pairs]
        y = [math.log(other_levels[name]) for _, other_levels in pairs]
        diff = statistics.stdev(u - v for u, v in zip(x, y))
        print(f"{name:8s} against {label}: correlation {statistics.correlation(x, y):+.2f}, "
              f"SD of the difference {100 * diff:.2f}% over {len(pairs)} machines")


if __name__ == "__main__":
    main()
