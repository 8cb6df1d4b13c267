#!/usr/bin/env python3
"""Measures the lora_backward performance targets with the suite itself (issue 3).

Runs bench_lora_backward N times as separate processes (a process-to-process drift is the largest
noise on shared machines, so one run is never enough), each with backward of `loop` and `onednn`
(and `fused`, `fused2` when registered) on cfg ci at one qlen and thread count, and prints per-run
figures and their medians:
  * LoRA-gradient phases (D4 + GU3): loop / onednn speed-up          target >= 10x
  * LoRA share of the onednn backward                                  target <= 15%
  * D3 and GU1 of onednn as % of their roofline                        target >= 70%
    roofline = max(FLOPs / calibration matmul rate, weight bytes / calibration bandwidth)
and, for `fused2`, how far the runner's memory lets the LoRA go: its % of its own floor (`pct.roofline.lora`), and
the speed-up and share it would have at that floor. Where the share at the floor is above a target, no LoRA pass
that keeps its own reads and writes meets it on that runner. The share bound is that share with the base GEMMs (D3,
GU1) at their roofline too: where the base and the LoRA are both bound by memory, the ratio of their bytes.

usage: measure_targets.py BENCH [--runs 5] [--threads 2] [--qlen 128] [--min-time 1] [--json-dir DIR] [--cpus 0]
                          [--config ci] [--marginal SECONDS [--marginal-processes 5]]
  --config: the config with its overrides, e.g. ci+grads=bf16 (kt-kernel's bf16 LoRA gradients).
  --cpus pins every bench process to those CPUs (as perfgate --pin-cpus): on a VM whose vCPUs differ in
  speed an unpinned process lands on either, and that decides its figures more than the code does.
  --marginal then also measures fused2's LoRA by its marginal cost (lora_marginal, built beside BENCH:
  backward with the LoRA minus backward without it, alternated inside each process; marginal_cost.py) and
  judges the fused targets by it, >= 20x and <= 10%, at the 95% interval's ends.
"""
import argparse
import importlib.util
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def benchmark_filter(config, qlen, threads):
    """The backward benchmarks of every variant for one config (its overrides' + and = taken literally)."""
    return (f"^lora_backward/backward/(loop|onednn|fused|fused2)/cfg:{re.escape(config)}/qlen:{qlen}"
            f"/threads:{threads}(/|$)")


def run_once(bench, threads, qlen, min_time, out_path, extra_env, cpus=None, config="ci"):
    env = dict(os.environ)
    env.update({"PERFGATE_LORA_CONFIGS": config, "PERFGATE_LORA_QLENS": str(qlen),
                "PERFGATE_LORA_THREADS": str(threads)})
    env.update(extra_env)
    filt = benchmark_filter(config, qlen, threads)
    load_before = os.getloadavg()[0]
    proc = subprocess.run([bench, f"--benchmark_filter={filt}", f"--benchmark_min_time={min_time}",
                           f"--benchmark_out={out_path}", "--benchmark_out_format=json"],
                          env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None)
    if proc.returncode != 0:
        sys.exit(f"bench failed (exit {proc.returncode}):\n{proc.stderr}")
    with open(out_path) as f:
        data = json.load(f)
    rows = {}
    for b in data["benchmarks"]:
        variant = b["name"].split("/")[2]
        rows[variant] = b
    return rows, load_before


VARIANT_FIGURES = ("backward_ms", "lora_ms", "speedup", "share_pct", "pct_floor", "floor_speedup", "floor_share_pct",
                   "share_bound_pct")


def base_gemms_at_roofline_ms(row):
    """D3 + GU1 as they would take at their rooflines (pct.roofline.D3 / .GU1 of their measured ms); NaN without."""
    pcts = [row.get(f"pct.roofline.{p}", float("nan")) for p in ("D3", "GU1")]
    return sum(row[f"phase.{p}"] * pct / 100.0 for p, pct in zip(("D3", "GU1"), pcts))


def variant_figures(name, row, loop_lora_ms, phases):
    """A LoRA variant's D4+GU3 ms, backward, speed-up over the loops and LoRA share; from its pct.roofline.lora,
    its floor's ms and the speed-up and share at the floor; and the share with the base GEMMs at their roofline too,
    the bench's lora_share_bound_pct (NaN where the row lacks the counters)."""
    nan = float("nan")
    if row is None:
        return {f"{name}_{k}": nan for k in VARIANT_FIGURES}
    lora = row["phase.D4"] + row["phase.GU3"]
    bwd = sum(row[k] for k in phases)
    pct = row.get("pct.roofline.lora", nan)
    floor = lora * pct / 100.0
    return {f"{name}_backward_ms": row["real_time"], f"{name}_lora_ms": lora,
            f"{name}_speedup": loop_lora_ms / lora, f"{name}_share_pct": 100.0 * lora / bwd,
            f"{name}_pct_floor": pct, f"{name}_floor_speedup": loop_lora_ms / floor if floor > 0 else nan,
            f"{name}_floor_share_pct": 100.0 * floor / (bwd - lora + floor) if floor > 0 else nan,
            f"{name}_share_bound_pct": share_bound_pct(row, bwd, lora, floor)}


def share_bound_pct(row, bwd, lora, floor):
    """The LoRA share with the LoRA at its floor and the base GEMMs at their roofline, other phases as measured."""
    base = row["phase.D3"] + row["phase.GU1"]
    bound_bwd = bwd - lora - base + base_gemms_at_roofline_ms(row) + floor
    return 100.0 * floor / bound_bwd if floor > 0 and bound_bwd > 0 else float("nan")


def load_marginal_cost():
    spec = importlib.util.spec_from_file_location("marginal_cost", os.path.join(HERE, "marginal_cost.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def verdict(low, high, limit, higher_is_better):
    """'met', 'NOT met' or 'open' (the interval straddles the limit) for an interval [low, high]."""
    good = (low >= limit) if higher_is_better else (high <= limit)
    bad = (high < limit) if higher_is_better else (low > limit)
    return "met" if good else "NOT met" if bad else "open (the interval straddles it)"


def report_marginal(args):
    tool = os.path.join(os.path.dirname(os.path.abspath(args.bench)), "lora_marginal")
    if not os.access(tool, os.X_OK):
        sys.exit(f"--marginal: {tool} not found (built beside bench_lora_backward)")
    mc = load_marginal_cost()
    json_dir = os.path.join(args.json_dir, "marginal") if args.json_dir else None
    summary = mc.summarize(mc.run_processes(tool, args.marginal_processes, args.marginal, args.cpus, args.threads,
                                            args.qlen, ["fused2"], json_dir, args.config))
    print()
    mc.print_summary(summary)
    row = summary["sides"][0]
    print(f"\nfused2 by its marginal cost: speed-up {row['speedup']:.1f}x (>= 20 at the interval's ends "
          f"{row['speedup_range'][0]:.1f}-{row['speedup_range'][1]:.1f}x: "
          f"{verdict(*row['speedup_range'], 20, True)}), share {row['share_pct']:.1f}% (<= 10 at "
          f"{row['share_range'][0]:.1f}-{row['share_range'][1]:.1f}%: {verdict(*row['share_range'], 10, False)})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bench")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--qlen", type=int, default=128)
    ap.add_argument("--min-time", default="1")
    ap.add_argument("--json-dir", default=None)
    ap.add_argument("--cpus", default="", help="comma list of CPUs every bench process is pinned to")
    ap.add_argument("--marginal", type=float, default=0, metavar="SECONDS",
                    help="also measure fused2's marginal LoRA cost, SECONDS per lora_marginal process")
    ap.add_argument("--marginal-processes", type=int, default=5)
    ap.add_argument("--config", default="ci", help="config with overrides (ci, ci+grads=bf16)")
    args = ap.parse_args()
    out_dir = args.json_dir or tempfile.mkdtemp(prefix="lora_targets_")
    os.makedirs(out_dir, exist_ok=True)

    per_run = []
    print("| run | load | loop bwd ms | loop D4+GU3 ms | onednn bwd ms | onednn D4+GU3 ms | speed-up | LoRA share % "
          "| D3 ms | D3 % roofline | GU1 ms | GU1 % roofline | fused bwd ms | fused D4+GU3 ms | fused speed-up "
          "| fused LoRA share % | fused2 bwd ms | fused2 D4+GU3 ms | fused2 speed-up | fused2 LoRA share % "
          "| fused2 % of floor | at the floor: speed-up | at the floor: share % | share bound % |")
    print("|---" * 24 + "|")
    for i in range(args.runs):
        rows, load = run_once(args.bench, args.threads, args.qlen, args.min_time,
                              os.path.join(out_dir, f"run{i}.json"), {},
                              [int(c) for c in args.cpus.split(",")] if args.cpus else None, args.config)
        lp, od = rows["loop"], rows["onednn"]
        phases = [k for k in od if k.startswith("phase.")]
        od_bwd = sum(od[k] for k in phases)
        lp_bwd = sum(lp[k] for k in phases)
        lp_lora = lp["phase.D4"] + lp["phase.GU3"]
        od_lora = od["phase.D4"] + od["phase.GU3"]
        r = {"backward_ms": od["real_time"], "loop_backward_ms": lp["real_time"], "loop_lora_ms": lp_lora,
             "onednn_lora_ms": od_lora, "speedup": lp_lora / od_lora, "share_pct": 100 * od_lora / od_bwd,
             "roof_D3": od.get("pct.roofline.D3", float("nan")), "roof_GU1": od.get("pct.roofline.GU1", float("nan")),
             "onednn_D3_ms": od["phase.D3"], "onednn_GU1_ms": od["phase.GU1"], "load": load}
        for name in ("fused", "fused2"):
            r.update(variant_figures(name, rows.get(name), lp_lora, phases))
        per_run.append(r)
        print(f"| {i} | {load:.1f} | {r['loop_backward_ms']:.1f} | {lp_lora:.2f} | {r['backward_ms']:.2f} | {od_lora:.2f} "
              f"| {r['speedup']:.1f}x | {r['share_pct']:.1f} | {r['onednn_D3_ms']:.2f} | {r['roof_D3']:.0f} "
              f"| {r['onednn_GU1_ms']:.2f} | {r['roof_GU1']:.0f} | {r['fused_backward_ms']:.2f} | {r['fused_lora_ms']:.2f} "
              f"| {r['fused_speedup']:.1f}x | {r['fused_share_pct']:.1f} | {r['fused2_backward_ms']:.2f} "
              f"| {r['fused2_lora_ms']:.2f} | {r['fused2_speedup']:.1f}x | {r['fused2_share_pct']:.1f} "
              f"| {r['fused2_pct_floor']:.0f} | {r['fused2_floor_speedup']:.1f}x | {r['fused2_floor_share_pct']:.1f} "
              f"| {r['fused2_share_bound_pct']:.1f} |", flush=True)
    med = {k: statistics.median(r[k] for r in per_run) for k in per_run[0]}
    print(f"| **median** | {med['load']:.1f} | {med['loop_backward_ms']:.1f} | {med['loop_lora_ms']:.2f} "
          f"| {med['backward_ms']:.2f} | {med['onednn_lora_ms']:.2f} | {med['speedup']:.1f}x | {med['share_pct']:.1f} "
          f"| {med['onednn_D3_ms']:.2f} | {med['roof_D3']:.0f} | {med['onednn_GU1_ms']:.2f} | {med['roof_GU1']:.0f} "
          f"| {med['fused_backward_ms']:.2f} | {med['fused_lora_ms']:.2f} | {med['fused_speedup']:.1f}x "
          f"| {med['fused_share_pct']:.1f} | {med['fused2_backward_ms']:.2f} | {med['fused2_lora_ms']:.2f} "
          f"| {med['fused2_speedup']:.1f}x | {med['fused2_share_pct']:.1f} | {med['fused2_pct_floor']:.0f} "
          f"| {med['fused2_floor_speedup']:.1f}x | {med['fused2_floor_share_pct']:.1f} "
          f"| {med['fused2_share_bound_pct']:.1f} |")
    print(f"\nconfig {args.config}; JSON of every run: {out_dir}")
    print(f"targets (medians): speed-up {med['speedup']:.1f}x (>= 10: {'met' if med['speedup'] >= 10 else 'NOT met'}), "
          f"LoRA share {med['share_pct']:.1f}% (<= 15: {'met' if med['share_pct'] <= 15 else 'NOT met'}), "
          f"D3 {med['roof_D3']:.0f}% / GU1 {med['roof_GU1']:.0f}% of roofline "
          f"(>= 70: {'met' if min(med['roof_D3'], med['roof_GU1']) >= 70 else 'NOT met'}); "
          f"fused: speed-up {med['fused_speedup']:.1f}x, LoRA share {med['fused_share_pct']:.1f}%; "
          f"fused2: speed-up {med['fused2_speedup']:.1f}x, LoRA share {med['fused2_share_pct']:.1f}%, "
          f"at {med['fused2_pct_floor']:.0f}% of its floor (at the floor: {med['fused2_floor_speedup']:.1f}x, "
          f"{med['fused2_floor_share_pct']:.1f}%; with the base GEMMs at their roofline too, the share's bound: "
          f"{med['fused2_share_bound_pct']:.1f}%)")
    if args.marginal > 0:
        report_marginal(args)


if __name__ == "__main__":
    main()
