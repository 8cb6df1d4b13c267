#!/usr/bin/env python3
"""Re-judge the stored-run pairs of a lab/tools/prove_detection.py output folder at other session_noise values.

prove_detection.py compares the `before` run of ab session i with runs of session i + n/2 (the CI
situation: a baseline stored some time ago). This re-runs `perfgate compare` on exactly those pairs with
`--session-noise S` for each S given, and prints regression / noisy / unchanged counts per kind
(aa = the later session's clean run, slow10 / slow5 = its slowed run). lab/results/statistics-evidence.md, "Stored runs
and session drift".

  lab/tools/rejudge_stored.py --perfgate build/ci/bin/perfgate --suite lora_backward \\
      --session-noise 0 0.06 0.10 -- build/proof/lora-q128-fast-r10 build/proof/lora-q128-pin0
"""
import argparse
import collections
import glob
import json
import os
import subprocess
import sys
import tempfile


def verdicts(perfgate, base, cur, session_noise):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "cmp.json")
        cmd = [perfgate, "compare", base, cur, "--json", out, "-q", "--no-config", "--session-noise", str(session_noise)]
        rc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if rc.returncode not in (0, 1, 3) or not os.path.exists(out):
            sys.exit(f"error: {' '.join(cmd)} exited {rc.returncode}: {rc.stderr.strip()}")
        with open(out) as f:
            return {b["name"]: b["verdict"] for b in json.load(f)["benchmarks"]}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--perfgate", default="build/ci/bin/perfgate")
    p.add_argument("--suite", default="lora_backward")
    p.add_argument("--session-noise", type=float, nargs="+", default=[0.0, 0.10])
    p.add_argument("proofs", nargs="+", help="prove_detection.py --out folders")
    a = p.parse_args()
    print("| proof | session_noise | kind | regression | noisy | unchanged |")
    print("| --- | ---: | --- | ---: | ---: | ---: |")
    for proof in a.proofs:
        sessions = sorted(d for d in glob.glob(os.path.join(proof, "ab", "*")) if os.path.isdir(d))
        if not sessions:
            sys.exit(f"error: {proof}: no ab/<session> folders (a prove_detection.py --out folder?)")
        gap = max(1, len(sessions) // 2)
        for s in a.session_noise:
            count = collections.Counter()
            for i in range(len(sessions) - gap):
                j = i + gap
                base = os.path.join(sessions[i], "runs", f"{a.suite}.before.json")
                pairs = [("aa", os.path.join(sessions[j], "runs", f"{a.suite}.before.json"))]
                kind = os.path.basename(sessions[j]).split("-", 1)[1]
                if kind.startswith("slow"):
                    pairs.append((kind, os.path.join(sessions[j], "runs", f"{a.suite}.after.json")))
                for k, cur in pairs:
                    for verdict in verdicts(a.perfgate, base, cur, s).values():
                        count[(k, verdict)] += 1
            for k in sorted({k for k, _ in count}):
                n = sum(c for (kk, _), c in count.items() if kk == k)
                print(f"| {os.path.basename(proof.rstrip('/'))} | {s:g} | {k} | {count[(k, 'regression')]}/{n} | "
                      f"{count[(k, 'noisy')]} | {count[(k, 'unchanged')]} |")


if __name__ == "__main__":
    main()
