#!/usr/bin/env python3
"""Re-judges the interleaved rounds of a relative gate (the raw/<run>/relative/ folder of a main job's report
folder, or the raw/ab-*/ folder of perfgate ab) as the main job's first look judged them, with the run files given
a floor-bound mark (docs/statistics.md), the way lab/tools/judge_gpu_sessions.py --mark gives it:

  lab/tools/rejudge_floor_bound.py PERFGATE RELATIVE_DIR [--mark REGEX] [-- COMPARE_FLAG ...]

The rule is the first look's: paired rounds, alpha 0.0125 (0.05 over 4 planned looks), threshold 5%. Without
--mark the files are judged as they are. Prints the verdict and one line per benchmark.
"""
import argparse
import glob
import os
import re
import subprocess
import sys
import tempfile

from judge_gpu_sessions import marked


# The two sides' file names: a main job's relative gate (relative.reference…, relative.current.…) or perfgate ab's
# raw folder (ab.before.…, ab.after.…).
SIDE_PREFIXES = (("relative.reference", "relative.current."), ("ab.before.", "ab.after."))


def rounds(folder, prefix):
    """The side's run files in round order (…r1.json, …r2.json, …)."""
    files = glob.glob(os.path.join(folder, f"{prefix}*.json"))
    return sorted(files, key=lambda f: int(re.search(r"\.r(\d+)\.json$", f).group(1)))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("perfgate")
    ap.add_argument("relative_dir")
    ap.add_argument("--mark", default="", help="the perfgate.floor_bound regex the run files get")
    a, compare_flags = ap.parse_known_args()
    a.compare_flags = [f for f in compare_flags if f != "--"]
    marks = {"perfgate.floor_bound": a.mark} if a.mark else {}
    with tempfile.TemporaryDirectory() as tmp:
        prefixes = next((p for p in SIDE_PREFIXES if all(rounds(a.relative_dir, side) for side in p)), None)
        if prefixes is None:
            sys.exit(f"{a.relative_dir}: no relative.reference* / relative.current.* "
                     "(or ab.before.* / ab.after.*) run files")
        sides = [marked({"name": side, "runs": rounds(a.relative_dir, side)}, marks, tmp)["runs"] for side in prefixes]
        out = subprocess.run([a.perfgate, "compare", "--paired", "--alpha", "0.0125", "--threshold", "0.05",
                              "--no-config", *a.compare_flags, "-v", ",".join(sides[0]), ",".join(sides[1])],
                             capture_output=True, text=True, check=False)
    for line in (out.stdout + out.stderr).splitlines():
        if re.match(r"^(PASS|FAIL|NOT JUDGED|SKIPPED)|^(regression|improvement|noisy|unchanged) ", line):
            print(line)


if __name__ == "__main__":
    main()
