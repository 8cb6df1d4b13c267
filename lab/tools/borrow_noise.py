#!/usr/bin/env python3
"""Borrowed learned noise for a class with too few sessions of its own (a sibling class's bands, widened).

A class such as gpu-h200-x1 (the H100's chip with more, faster memory) has a stored baseline but too few sessions
to learn its own between-session noise. It borrows the sibling's bands (baselines/gpu-h100-x1/noise.json) and
widens them by what its own sessions show against its baseline: each own session's change of every learned metric,
as a multiple z of the borrowed band's session difference (band x sqrt 2); the factor is the root mean square of z
over all of them, never below 1.

  borrow_noise.py widen   --perfgate BIN --baseline-dir baselines/gpu-h200-x1 --sibling ../gpu-h100-x1/noise.json \
                          --sessions S1 S2 ...            prints the factor from those sessions
  borrow_noise.py write   ... --out baselines/gpu-h200-x1/noise.json      writes the borrowing snapshot
  borrow_noise.py judge   ... --widen W --session S       judges one session with the borrowed bands (JSON lines)

A session folder holds runs/<suite>.current.json (the main job's run files, tools/record_gpu_evidence.sh).
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

SUITES = ("expert_gemm", "transfers", "streaming_prefetch")


def borrowing_snapshot(machine_class, sibling, widen, own_sessions, source):
    return {"perfgate_noise": 1, "machine_class": machine_class, "borrow_from": sibling, "widen": round(widen, 4),
            "own_sessions": own_sessions, "source": source}


def compare(perfgate, baseline, run, noise_file):
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        subprocess.run([perfgate, "compare", baseline, run, "--noise", noise_file, "--json", out.name, "-q"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        with open(out.name) as f:
            return json.load(f)


def judge_session(a, session, widen):
    """The session's comparison per suite, with the sibling's bands widened by `widen`."""
    baseline_dir = os.path.abspath(a.baseline_dir)
    sibling = os.path.abspath(os.path.join(baseline_dir, a.sibling))
    machine_class = os.path.basename(baseline_dir.rstrip("/"))
    reports = {}
    with tempfile.TemporaryDirectory() as tmp:
        noise = os.path.join(tmp, "noise.json")
        with open(noise, "w") as f:
            json.dump(borrowing_snapshot(machine_class, sibling, widen, 0, "borrow_noise.py"), f)
        for suite in SUITES:
            run = os.path.join(session, "runs", suite + ".current.json")
            base = os.path.join(baseline_dir, suite + ".json")
            if os.path.exists(run) and os.path.exists(base):
                reports[suite] = compare(a.perfgate, base, run, noise)
    return reports


def learned_z(reports):
    """z of every metric judged with a learned band: its log change over the band's session difference."""
    for suite, r in reports.items():
        for b in r["benchmarks"]:
            for m in b["metrics"]:
                if not m.get("learned_noise") or not m.get("gated") or m.get("change") is None:
                    continue
                sd = m.get("run_noise") or 0
                if sd > 0 and m["change"] > -1:
                    yield b["name"], m["name"], math.log1p(m["change"]) / (sd * math.sqrt(2))


def widen_factor(a, sessions):
    zs = [z for s in sessions for _, _, z in learned_z(judge_session(a, s, 1.0))]
    if not zs:
        sys.exit("borrow_noise.py: no learned metric in those sessions")
    return max(1.0, math.sqrt(sum(z * z for z in zs) / len(zs))), len(zs)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("action", choices=["widen", "write", "judge"])
    ap.add_argument("--perfgate", required=True)
    ap.add_argument("--baseline-dir", required=True)
    ap.add_argument("--sibling", required=True, help="the sibling's noise.json, relative to --baseline-dir")
    ap.add_argument("--sessions", nargs="*", default=[])
    ap.add_argument("--session")
    ap.add_argument("--widen", type=float)
    ap.add_argument("--out")
    a = ap.parse_args()
    if a.action == "judge":
        for suite, r in judge_session(a, a.session, a.widen).items():
            for b in r["benchmarks"]:
                print(json.dumps({"suite": suite, "benchmark": b["name"], "verdict": b["verdict"],
                                  "detectable": b.get("detectable_change")}))
        return
    widen, n = widen_factor(a, a.sessions)
    print(f"widen {widen:.4f} from {n} learned metrics of {len(a.sessions)} session(s)")
    if a.action == "write":
        machine_class = os.path.basename(os.path.abspath(a.baseline_dir).rstrip("/"))
        snap = borrowing_snapshot(machine_class, a.sibling, widen, len(a.sessions),
                                  "the lab's borrow_noise.py from " + ", ".join(os.path.basename(s) for s in a.sessions))
        with open(a.out, "w") as f:
            f.write(json.dumps(snap, indent=1) + "\n")
        print("wrote", a.out)


if __name__ == "__main__":
    main()
