#!/usr/bin/env python3
"""Prints a table of bench_transfers Google Benchmark JSON files: one row per benchmark (the median
aggregate when repetitions were run, else the single run), with GB/s and the percentage counters."""
import json
import sys


def pick(runs):
    by_name = {}
    order = []
    for r in runs:
        name = r["run_name"]
        if name not in by_name:
            by_name[name] = {}
            order.append(name)
        slot = by_name[name]
        if r.get("run_type") == "aggregate":
            if r.get("aggregate_name") == "median":
                slot["median"] = r
        else:
            slot.setdefault("first", r)
    for name in order:
        slot = by_name[name]
        yield name, slot.get("median") or slot.get("first")


def cell(r, key, fmt):
    v = r.get(key)
    return fmt.format(v) if isinstance(v, (int, float)) else "-"


def main():
    for path in sys.argv[1:]:
        with open(path) as f:
            data = json.load(f)
        print(f"== {path}")
        print(f"{'benchmark':66s} {'GB/s':>9s} {'%link':>6s} {'%meas':>6s} {'%peer':>6s} {'us/iter':>10s} "
              f"{'lat_us':>7s} blk")
        for name, r in pick(data.get("benchmarks", [])):
            short = name.replace("/manual_time", "")
            if r.get("error_occurred") or r.get("skipped"):
                print(f"{short:66s} {r.get('error_message') or r.get('skip_message') or 'skipped'}")
                continue
            print(f"{short:66s} {cell(r, 'GB/s', '{:9.2f}'):>9s} {cell(r, 'pct.link_theoretical', '{:.1f}'):>6s} "
                  f"{cell(r, 'pct.measured_ceiling', '{:.1f}'):>6s} {cell(r, 'pct.peer_copy', '{:.1f}'):>6s} "
                  f"{cell(r, 'real_time', '{:.2f}'):>10s} {cell(r, 'latency_us', '{:.2f}'):>7s} "
                  f"{cell(r, 'blocked', '{:.0f}'):>3s}")


if __name__ == "__main__":
    main()
