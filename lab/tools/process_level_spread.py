#!/usr/bin/env python3
"""How much process levels spread on one machine, with each process levelled by its median repetition or by its
fastest one (docs/statistics.md, "A run's level"): the numbers behind lab/results/first-contact.md's tables.

  process_level_spread.py rounds RELATIVE_DIR      a relative gate's raw rounds (raw/<run>/relative/): per
                                                   benchmark, the SD of the per-round differences current -
                                                   reference (log scale), and the 99% half-width they give
  process_level_spread.py processes FILE ... [--first N]
                                                   one build's processes (bench JSON files): per benchmark, the SD
                                                   of the process levels, from each process's first N repetitions
"""
import argparse
import glob
import math
import os
import re
import statistics

from judge_gpu_sessions import repetition_times
from run_level_spread import STATISTICS

T_995 = {9: 3.250, 19: 2.861}  # Student t quantile (0.995, d.f.): the paired rule's 99% interval


def process_times(path, first=None):
    """{benchmark: the process's repetition times} of one run file (one process)."""
    return {name: [t for times in runs.values() for t in times][:first] for name, runs in repetition_times([path]).items()}


def round_files(folder, side):
    files = glob.glob(os.path.join(folder, f"relative.{side}*.json"))
    return sorted(files, key=lambda f: int(re.search(r"\.r(\d+)\.json$", f).group(1)))


def rounds(folder):
    pairs = list(zip(round_files(folder, "reference"), round_files(folder, "current.")))
    for stat, level in STATISTICS.items():
        diffs = {}
        for ref, cur in pairs:
            a, b = process_times(ref), process_times(cur)
            for name in a.keys() & b.keys():
                diffs.setdefault(name, []).append(math.log(level(b[name]) / level(a[name])))
        print(stat)
        for name, d in sorted(diffs.items()):
            sd = statistics.stdev(d)
            half = T_995.get(len(d) - 1, 3.0) * sd / math.sqrt(len(d))
            print(f"  {name:70s} k={len(d)} mean {100 * statistics.mean(d):+6.2f}%  SD/round {100 * sd:5.2f}%  "
                  f"99% half {100 * half:5.2f}%")


def processes(files, first):
    for stat, level in STATISTICS.items():
        levels = {}
        for path in files:
            for name, times in process_times(path, first).items():
                levels.setdefault(name, []).append(level(times))
        print(f"{stat}, first {first or 'all'} repetitions")
        for name, v in sorted(levels.items()):
            sd = statistics.stdev(math.log(x) for x in v)
            print(f"  {name:70s} {' '.join(f'{x:7.1f}' for x in v)}  SD {100 * sd:5.1f}%")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="mode", required=True)
    r = sub.add_parser("rounds")
    r.add_argument("relative_dir")
    p = sub.add_parser("processes")
    p.add_argument("files", nargs="+")
    p.add_argument("--first", type=int, default=None)
    a = ap.parse_args()
    if a.mode == "rounds":
        rounds(a.relative_dir)
    else:
        processes(a.files, a.first)


if __name__ == "__main__":
    main()
