#!/usr/bin/env python3
"""Does a baseline pooled from several fresh H200 hosts judge better than the stored one-host snapshot?

    pool_h200_proof.py --perfgate BIN --new S1.tgz S2.tgz S3.tgz --old O1.tgz O2.tgz --out DIR [--commit C]

S*.tgz / O*.tgz: session archives of lab/tools/record_gpu_groups.sh (aa-<tag>-g0/ and p<N>-<tag>-g0/ inside; the
old ones aa-<tag>/ and p<N>-<tag>/). The gpu-h200-x1 class borrows gpu-h100-x1's learned noise, widened by a factor
from its own sessions (lab/tools/borrow_noise.py). Three ways of judging each new host's A/A and planted sessions:

  stored      the stored baseline (baselines/gpu-h200-x1) and its stored factor;
  loo-old     a baseline pooled from the OTHER new hosts' A/A runs, the factor from the old hosts' A/A sessions
              against it (hosts that are in neither the pool nor the judged session);
  loo-own     the same pool, the factor from the pooled hosts' own sessions against it (in-sample, optimistic).

Then writes DIR/candidate/gpu-h200-x1/: every new host's A/A runs pooled, and noise.json with the factor of the old
hosts' sessions against that pool. Prints Markdown tables; DIR/verdicts.jsonl holds every verdict.
"""
import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import tarfile
from types import SimpleNamespace

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import borrow_noise  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLASS = "gpu-h200-x1"
SIBLING = os.path.join(ROOT, "baselines", "gpu-h100-x1", "noise.json")


def unpack(archives, into):
    os.makedirs(into, exist_ok=True)
    for a in archives:
        with tarfile.open(a) as t:
            t.extractall(into)


def sessions(root, prefix):
    return sorted(d for d in glob.glob(os.path.join(root, prefix + "*")) if os.path.isdir(os.path.join(d, "runs")))


def host_of(session):
    """aa-h200s1-g0 -> h200s1, p2-h200ceo1 -> h200ceo1."""
    name = os.path.basename(session).split("-")
    return name[1]


def pool(perfgate, aa_sessions, baseline_root, commit):
    for suite in borrow_noise.SUITES:
        runs = [os.path.join(s, "runs", suite + ".current.json") for s in aa_sessions]
        runs = [r for r in runs if os.path.exists(r)]
        if not runs:
            continue
        cmd = [perfgate, "baseline", "update", "--suite", suite, "--machine-class", CLASS, "--baseline-dir",
               baseline_root, "--from", *runs]
        if commit:
            cmd += ["--commit", commit]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return os.path.join(baseline_root, CLASS)


def judge_args(perfgate, baseline_dir):
    return SimpleNamespace(perfgate=perfgate, baseline_dir=baseline_dir, sibling=SIBLING)


def widen(perfgate, baseline_dir, aa_sessions):
    factor, _ = borrow_noise.widen_factor(judge_args(perfgate, baseline_dir), aa_sessions)
    return factor


def verdicts(perfgate, baseline_dir, factor, session):
    for suite, report in borrow_noise.judge_session(judge_args(perfgate, baseline_dir), session, factor).items():
        for b in report["benchmarks"]:
            yield {"suite": suite, "benchmark": b["name"], "verdict": b["verdict"],
                   "detectable": b.get("detectable_change")}


def summarize(rows):
    """Counts of one session's verdicts (a planted session ran only the stable benchmarks: the rest are missing)."""
    judged = [r for r in rows if r["verdict"] not in ("new", "missing", "skipped")]
    count = {v: sum(r["verdict"] == v for r in judged) for v in ("regression", "improvement", "noisy", "unchanged")}
    detectable = [r["detectable"] for r in judged if r["detectable"] is not None]
    count["median detectable"] = f"{100 * statistics.median(detectable):.1f}%" if detectable else "-"
    count["n"] = len(judged)
    return count


def table(title, results):
    print(f"\n### {title}\n")
    print("| way | host | session | factor | judged | regression | improvement | noisy | unchanged | median detectable |")
    print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in results:
        c = r["count"]
        print(f"| {r['way']} | {r['host']} | {r['kind']} | {r['factor']:.2f} | {c['n']} | {c['regression']} | "
              f"{c['improvement']} | {c['noisy']} | {c['unchanged']} | {c['median detectable']} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--perfgate", required=True)
    ap.add_argument("--new", nargs="+", required=True)
    ap.add_argument("--old", nargs="+", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--commit", default="")
    a = ap.parse_args()
    perfgate = os.path.abspath(a.perfgate)
    work = os.path.abspath(a.out)
    unpack(a.new, os.path.join(work, "new"))
    unpack(a.old, os.path.join(work, "old"))
    new_aa = sessions(os.path.join(work, "new"), "aa-")
    new_planted = sessions(os.path.join(work, "new"), "p")
    old_aa = sessions(os.path.join(work, "old"), "aa-")
    if len(new_aa) < 2 or not old_aa:
        sys.exit(f"pool_h200_proof.py: need 2+ new A/A sessions and 1+ old (got {len(new_aa)}, {len(old_aa)})")

    stored_dir = os.path.join(ROOT, "baselines", CLASS)
    with open(os.path.join(stored_dir, "noise.json")) as f:
        stored_factor = json.load(f)["widen"]
    results = []
    with open(os.path.join(work, "verdicts.jsonl"), "w") as log:
        def record(way, host, kind, factor, baseline_dir, session):
            rows = list(verdicts(perfgate, baseline_dir, factor, session))
            for r in rows:
                log.write(json.dumps({"way": way, "host": host, "session": kind, **r}) + "\n")
            results.append({"way": way, "host": host, "kind": kind, "factor": factor, "count": summarize(rows)})

        for held in new_aa:
            host = host_of(held)
            planted = [p for p in new_planted if host_of(p) == host]
            others = [s for s in new_aa if s != held]
            loo_dir = pool(perfgate, others, os.path.join(work, "loo-" + host), a.commit)
            ways = [("stored", stored_dir, stored_factor),
                    ("loo-old", loo_dir, widen(perfgate, loo_dir, old_aa)),
                    ("loo-own", loo_dir, widen(perfgate, loo_dir, others))]
            for way, baseline_dir, factor in ways:
                record(way, host, "A/A", factor, baseline_dir, held)
                for p in planted:
                    record(way, host, os.path.basename(p).split("-")[0] + " planted", factor, baseline_dir, p)

    table("Each new host judged three ways (A/A: every judged benchmark; planted: the stable ones)", results)

    candidate = pool(perfgate, new_aa, os.path.join(work, "candidate"), a.commit)
    factor = widen(perfgate, candidate, old_aa)
    snap = borrow_noise.borrowing_snapshot(
        CLASS, "../gpu-h100-x1/noise.json", factor, len(old_aa),
        "the widening of the A/A sessions of other fresh H200 hosts (" + ", ".join(host_of(s) for s in old_aa) +
        ") against this baseline, pooled from " + ", ".join(host_of(s) for s in new_aa) + ", by the lab's borrow_noise.py")
    with open(os.path.join(candidate, "noise.json"), "w") as f:
        f.write(json.dumps(snap, indent=1) + "\n")
    print(f"\ncandidate: {candidate} (pooled from {len(new_aa)} hosts), widen {factor:.4f} from the old hosts")


if __name__ == "__main__":
    main()
