#!/usr/bin/env python3
"""Markdown tables from a bench_streaming_prefetch JSON run (--benchmark_repetitions=N): medians of the
repetitions per case, with the seed-002 metrics. Usage: summarize.py run.json [more.json ...]"""
import json
import math
import sys


def fmt(v, spec):
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, spec)


def main(paths):
    for path in paths:
        data = json.load(open(path))
        ctx = data.get("context", {})
        print(f"### {path}\n")
        print(f"GPU {ctx.get('perfgate.gpu0.name', '?')}, PCIe {ctx.get('perfgate.gpu0.pcie', '?')}, "
              f"driver {ctx.get('perfgate.driver', '?')}, date {ctx.get('date', '?')}\n")
        rows = {}
        for b in data["benchmarks"]:
            if b.get("aggregate_name") not in ("median", "cv"):
                continue
            rows.setdefault(b["run_name"], {})[b["aggregate_name"]] = b
        print("| case | step ms (median) | cv % | vs max(floors) | overlap % | sync wait % | H2D GB/s | % PCIe link "
              "| hit | ready | compute/transfer |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for name, agg in rows.items():
            m = agg.get("median", {})
            cv = agg.get("cv", {}).get("real_time")
            short = name.replace("streaming_prefetch/step/", "").replace("/manual_time", "")
            print(f"| {short} | {fmt(m.get('real_time'), '.3f')} | {fmt(cv * 100 if cv is not None else None, '.1f')} "
                  f"| {fmt(m.get('step_vs_floor'), '.3f')} | {fmt(m.get('pct.overlap_efficiency'), '.1f')} "
                  f"| {fmt(m.get('pct.sync_wait'), '.1f')} | {fmt(m.get('h2d_GBps'), '.1f')} "
                  f"| {fmt(m.get('pct.pcie_link'), '.1f')} | {fmt(m.get('cache_hit_rate'), '.2f')} "
                  f"| {fmt(m.get('ready_rate'), '.2f')} | {fmt(m.get('balance_ratio'), '.3f')} |")
        print()


if __name__ == "__main__":
    main(sys.argv[1:])
