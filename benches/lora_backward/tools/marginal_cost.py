#!/usr/bin/env python3
"""The LoRA's marginal cost in the fused2 backward, and the targets' speed-up and share computed from it.

Runs lora_marginal (built beside bench_lora_backward) as N processes one after another, each pinned to --cpus,
each alternating every side's two layers (with the LoRA, and made with PERFGATE_LORA_SKIP_LORA=1) for --seconds,
then summarises all rounds of all processes:
  marginal  = backward with the LoRA - backward without it, per round (medians of the round's passes)
  speed-up  = the seed-style loops' D4 + GU3 / marginal                       target >= 20x
  share     = marginal / backward with the LoRA                                target <= 10%
with a 95% percentile-bootstrap interval of the median that resamples whole processes (rounds of one process share
its state, so they are not independent), and each side against the first. More, shorter processes give a
truer interval than a few long ones.

usage: marginal_cost.py LORA_MARGINAL [--processes 5] [--seconds 60] [--cpus 0,1] [--threads 2] [--qlen 128]
                        [--side NAME[:KNOB[=V],...]]... [--json-dir DIR] [--config ci+grads=bf16]
       marginal_cost.py --summarize FILE.json...       (the tables of earlier processes' JSON)
"""
import argparse
import os
import json
import random
import statistics
import subprocess
import sys
import tempfile

BOOTSTRAP_RESAMPLES = 2000
MIN_PROCESSES = 5  # fewer, and resampling processes can only return a few distinct intervals


def bootstrap_median_interval(values, resamples=BOOTSTRAP_RESAMPLES, seed=1, confidence=0.95):
    """Percentile bootstrap of the median: (lower, upper)."""
    return cluster_bootstrap_interval([values], resamples, seed, confidence, within=True)


def cluster_bootstrap_interval(groups, resamples=BOOTSTRAP_RESAMPLES, seed=1, confidence=0.95, within=False):
    """Percentile bootstrap of the median of pooled groups, the groups (processes) resampled with replacement:
    rounds of one process share its state, so the process, not the round, is the independent unit. With
    within=True the values inside each group are resampled too (one group: the plain bootstrap)."""
    rng = random.Random(seed)
    meds = []
    for _ in range(resamples):
        pooled = []
        for g in rng.choices(groups, k=len(groups)) if len(groups) > 1 else groups:
            pooled += rng.choices(g, k=len(g)) if within else g
        meds.append(statistics.median(pooled))
    meds.sort()
    tail = (1 - confidence) / 2
    return meds[int(tail * resamples)], meds[int((1 - tail) * resamples) - 1]


REQUIRED = {"sides": list, "loop_lora_phase_ms": list, "visits": list}
VISIT_FIELDS = {"round": int, "side": str, "lora": bool, "ms": list}


def load_doc(path):
    """One lora_marginal JSON, checked: a clear error names the file and the field."""
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        sys.exit(f"{path}: {e}")
    if not isinstance(doc, dict):
        sys.exit(f"{path}: not a lora_marginal JSON object")
    for field, kind in REQUIRED.items():
        if not isinstance(doc.get(field), kind):
            sys.exit(f"{path}: field '{field}' missing or not a {kind.__name__}")
    for i, v in enumerate(doc["visits"]):
        for field, kind in VISIT_FIELDS.items():
            if not isinstance(v.get(field) if isinstance(v, dict) else None, kind):
                sys.exit(f"{path}: visits[{i}]: field '{field}' missing or not a {kind.__name__}")
        if v["side"] not in doc["sides"]:
            sys.exit(f"{path}: visits[{i}]: side '{v['side']}' is not one of 'sides' {doc['sides']}")
        if not v["ms"]:
            sys.exit(f"{path}: visits[{i}]: field 'ms' is empty")
    if not doc["loop_lora_phase_ms"]:
        sys.exit(f"{path}: field 'loop_lora_phase_ms' is empty")
    return doc


def round_medians(doc, process):
    """{(process, round): {(side, lora): median ms of the round's passes}} of one process's JSON."""
    out = {}
    for v in doc["visits"]:
        out.setdefault((process, v["round"]), {})[(v["side"], v["lora"])] = statistics.median(v["ms"])
    return out


def per_round(rounds, side):
    """Per process: a list of (with LoRA ms, marginal ms) of one side, a pair per round."""
    out = {}
    for (process, _), r in sorted(rounds.items()):
        if (side, True) in r and (side, False) in r:
            out.setdefault(process, []).append((r[(side, True)], r[(side, True)] - r[(side, False)]))
    return out


def side_row(rounds, side, loop_ms):
    by_process = per_round(rounds, side)
    if not by_process:
        sys.exit(f"side '{side}': no round has both its layers (with the LoRA and without)")
    groups = [[m for _, m in pairs] for pairs in by_process.values()]
    marginal = [m for g in groups for m in g]
    with_lora = statistics.median(w for pairs in by_process.values() for w, _ in pairs)
    med = statistics.median(marginal)
    lo, hi = cluster_bootstrap_interval(groups, within=len(groups) == 1)
    return {"side": side, "rounds": len(marginal), "with_ms": with_lora, "marginal_ms": med, "interval": (lo, hi),
            "process_medians": [statistics.median(g) for g in groups],
            "speedup": loop_ms / med if med > 0 else float("inf"), "share_pct": 100 * med / with_lora,
            # the interval's ends as targets see them: the high marginal gives the low speed-up and high share
            "speedup_range": (loop_ms / hi if hi > 0 else float("inf"), loop_ms / lo if lo > 0 else float("inf")),
            "share_range": (100 * lo / with_lora, 100 * hi / with_lora)}


def against_first(rounds, first, side):
    """Per round: side's marginal and with-LoRA time minus the first side's, intervals over processes."""
    dm, dw = {}, {}
    for (process, _), r in sorted(rounds.items()):
        if all((s, l) in r for s in (first, side) for l in (True, False)):
            dm.setdefault(process, []).append((r[(side, True)] - r[(side, False)]) -
                                              (r[(first, True)] - r[(first, False)]))
            dw.setdefault(process, []).append(r[(side, True)] - r[(first, True)])
    one = len(dm) == 1
    flat_m, flat_w = [d for g in dm.values() for d in g], [d for g in dw.values() for d in g]
    return {"side": side, "first": first, "rounds": len(flat_m), "marginal_diff": statistics.median(flat_m),
            "marginal_interval": cluster_bootstrap_interval(list(dm.values()), within=one),
            "marginal_lower": sum(d < 0 for d in flat_m), "with_diff": statistics.median(flat_w),
            "with_interval": cluster_bootstrap_interval(list(dw.values()), within=one),
            "with_lower": sum(d < 0 for d in flat_w)}


def summarize(docs):
    rounds, loop = {}, []
    for i, doc in enumerate(docs):
        rounds.update(round_medians(doc, i))
        loop += doc["loop_lora_phase_ms"]
    loop_ms = statistics.median(loop)
    sides = docs[0]["sides"]  # in the order they were asked for
    return {"loop_ms": loop_ms, "processes": len(docs), "cpu": docs[0].get("cpu", ""),
            "products": docs[0].get("fused2_products", "not recorded"),
            "sides": [side_row(rounds, s, loop_ms) for s in sides],
            "against_first": [against_first(rounds, sides[0], s) for s in sides[1:]]}


def print_summary(s):
    print(f"{s['processes']} processes on {s['cpu']} (the default fused2's products: {s['products']}); "
          f"seed-style loops' D4+GU3 {s['loop_ms']:.2f} ms (median)\n")
    print("| side | rounds | backward with LoRA ms | marginal ms | 95% interval | speed-up | share | "
          "at the interval's ends |")
    print("| --- | ---: | ---: | ---: | --- | ---: | ---: | --- |")
    for r in s["sides"]:
        print(f"| {r['side']} | {r['rounds']} | {r['with_ms']:.3f} | {r['marginal_ms']:.3f} | "
              f"{r['interval'][0]:.3f}-{r['interval'][1]:.3f} | {r['speedup']:.1f}x | {r['share_pct']:.1f}% | "
              f"{r['speedup_range'][0]:.1f}-{r['speedup_range'][1]:.1f}x / "
              f"{r['share_range'][0]:.1f}-{r['share_range'][1]:.1f}% |")
    print("\nThe interval resamples whole processes (their rounds share the process's state); with one process it "
          "resamples rounds and is too narrow.")
    if s["processes"] < MIN_PROCESSES:
        print(f"Only {s['processes']} process(es): the interval is rough; {MIN_PROCESSES} or more give a fair one.")
    for r in s["sides"]:
        print(f"{r['side']}: marginal ms per process " + ", ".join(f"{m:.3f}" for m in r["process_medians"]))
    for a in s["against_first"]:
        print(f"\n{a['side']} - {a['first']}, {a['rounds']} rounds: marginal {a['marginal_diff']:+.3f} ms "
              f"({a['marginal_interval'][0]:+.3f} to {a['marginal_interval'][1]:+.3f}), lower in {a['marginal_lower']}; "
              f"backward with LoRA {a['with_diff']:+.3f} ms ({a['with_interval'][0]:+.3f} to "
              f"{a['with_interval'][1]:+.3f}), lower in {a['with_lower']}")


def run_processes(tool, processes, seconds, cpus="", threads=2, qlen=128, sides=(), json_dir=None, config="ci"):
    """Runs lora_marginal `processes` times, one after another, each pinned to `cpus` (a comma list; "" leaves
    them free); returns every process's JSON."""
    json_dir = json_dir or tempfile.mkdtemp(prefix="lora-marginal-")
    os.makedirs(json_dir, exist_ok=True)
    pinned = {int(c) for c in cpus.split(",")} if cpus else None
    docs = []
    for p in range(processes):
        out = os.path.join(json_dir, f"process{p + 1}.json")
        cmd = [tool, "--config", config, "--threads", str(threads), "--qlen", str(qlen), "--seconds", str(seconds),
               "--seed", str(p + 1), "--out", out] + [a for s in sides for a in ("--side", s)]
        print(f"process {p + 1}/{processes}: {' '.join(cmd)}", file=sys.stderr, flush=True)
        proc = subprocess.run(cmd, stderr=subprocess.PIPE, text=True,
                              preexec_fn=(lambda: os.sched_setaffinity(0, pinned)) if pinned else None)
        if proc.returncode != 0:
            sys.exit(f"lora_marginal failed (exit {proc.returncode}):\n{proc.stderr}")
        docs.append(load_doc(out))
    print(f"raw passes: {json_dir}", file=sys.stderr)
    return docs


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("tool", nargs="?")
    ap.add_argument("--summarize", nargs="+", metavar="FILE")
    ap.add_argument("--processes", type=int, default=MIN_PROCESSES)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--cpus", default="")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--qlen", type=int, default=128)
    ap.add_argument("--side", action="append", default=[])
    ap.add_argument("--json-dir")
    ap.add_argument("--config", default="ci")
    args = ap.parse_args()
    if args.summarize:
        docs = [load_doc(path) for path in args.summarize]
    elif args.tool:
        docs = run_processes(args.tool, args.processes, args.seconds, args.cpus, args.threads, args.qlen, args.side,
                             args.json_dir, args.config)
    else:
        ap.error("name the lora_marginal binary, or --summarize FILE...")
    print_summary(summarize(docs))


if __name__ == "__main__":
    main()
