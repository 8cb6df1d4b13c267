#!/usr/bin/env python3
"""Writes a large Google Benchmark 1.7-style JSON results file for the harness performance benchmark.

Default shape: 10,000 benchmarks x 20 repetitions x 3 counters (phase.compute, bytes/s, pct.peak),
per-repetition entries followed by the mean/median/stddev/cv aggregates as Google Benchmark writes them
(~150 MB). Deterministic for a given --seed. --slow-fraction/--slow-factor make a "current" file in
which a fraction of the benchmarks got slower (and their rate lower), so that compare has work to do.

  make_large_json.py big_a.json --seed 1
  make_large_json.py big_b.json --seed 2 --slow-fraction 0.01 --slow-factor 1.10
"""
import argparse
import math
import random
import statistics
import sys


def fmt(x):
    return "%.16e" % x


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--benchmarks", type=int, default=10000)
    ap.add_argument("--repetitions", type=int, default=20)
    ap.add_argument("--counters", type=int, default=3, choices=[0, 1, 2, 3])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--noise", type=float, default=0.02, help="relative sd of the repetitions")
    ap.add_argument("--slow-fraction", type=float, default=0.0)
    ap.add_argument("--slow-factor", type=float, default=1.10)
    ap.add_argument("--no-aggregates", action="store_true")
    a = ap.parse_args()

    rng = random.Random(a.seed)
    base_rng = random.Random(12345)  # the "true" per-benchmark times are the same in every file
    counter_names = ["bytes/s", "pct.peak", "phase.compute"][: a.counters]
    out = open(a.out, "w")
    w = out.write
    w('{\n  "context": {\n    "date": "2026-11-22T02:00:00+00:00",\n    "host_name": "perfgate-scale",\n'
      '    "executable": "./bench_scale",\n    "num_cpus": 2,\n    "mhz_per_cpu": 2596,\n'
      '    "cpu_scaling_enabled": false,\n    "caches": [\n    ],\n    "load_avg": [0.5,0.4,0.3],\n'
      '    "library_build_type": "release",\n    "perfgate.suite": "scale",\n'
      '    "perfgate.cpu_model": "AMD EPYC",\n    "perfgate.cpu_cores": "2",\n    "perfgate.amx": "no"\n  },\n'
      '  "benchmarks": [\n')
    first = True
    for i in range(a.benchmarks):
        true_ns = math.exp(base_rng.uniform(math.log(50.0), math.log(5e7)))
        bytes_per_iter = base_rng.choice([4096, 65536, 1 << 20, 1 << 24])
        slow = a.slow_fraction > 0 and (i % max(1, int(round(1 / a.slow_fraction)))) == 0
        factor = a.slow_factor if slow else 1.0
        # Names shaped like the project's (suite/case/variant/param:value...), every third one a
        # manual-time (GPU) benchmark as Google Benchmark names them.
        name = "scale/expert_gemm/forward/case%05d/variant:%d/tokens:%d" % (i, i % 7, 1 << (i % 12))
        if i % 3 == 0:
            name += "/manual_time"
        rows = []
        for r in range(a.repetitions):
            t = true_ns * factor * (1.0 + rng.gauss(0.0, a.noise))
            t = max(t, true_ns * 0.5)
            cpu = t * rng.uniform(0.97, 1.0)
            iters = max(1, int(1e9 / true_ns * 0.5))
            vals = {"bytes/s": bytes_per_iter / (t * 1e-9), "pct.peak": 100.0 * true_ns / t * 0.6,
                    "phase.compute": t * 1e-6 * 0.8}
            rows.append((t, cpu, iters, vals))
            parts = ['    {\n      "name": "%s",\n      "family_index": %d,\n      "per_family_instance_index": 0,\n'
                     '      "run_name": "%s",\n      "run_type": "iteration",\n      "repetitions": %d,\n'
                     '      "repetition_index": %d,\n      "threads": 1,\n      "iterations": %d,\n'
                     '      "real_time": %s,\n      "cpu_time": %s,\n      "time_unit": "ns"'
                     % (name, i, name, a.repetitions, r, iters, fmt(t), fmt(cpu))]
            for c in counter_names:
                parts.append(',\n      "%s": %s' % (c, fmt(vals[c])))
            parts.append("\n    }")
            w(("" if first else ",\n") + "".join(parts))
            first = False
        if a.no_aggregates or a.repetitions < 2:
            continue
        for agg in ("mean", "median", "stddev", "cv"):
            def stat(xs):
                if agg == "mean":
                    return statistics.fmean(xs)
                if agg == "median":
                    return statistics.median(xs)
                sd = statistics.stdev(xs)
                return sd if agg == "stddev" else sd / statistics.fmean(xs)
            parts = [',\n    {\n      "name": "%s_%s",\n      "family_index": %d,\n      "per_family_instance_index": 0,\n'
                     '      "run_name": "%s",\n      "run_type": "aggregate",\n      "repetitions": %d,\n'
                     '      "threads": 1,\n      "aggregate_name": "%s",\n      "aggregate_unit": "%s",\n'
                     '      "iterations": %d,\n      "real_time": %s,\n      "cpu_time": %s,\n      "time_unit": "ns"'
                     % (name, agg, i, name, a.repetitions, agg, "percentage" if agg == "cv" else "time",
                        a.repetitions, fmt(stat([x[0] for x in rows])), fmt(stat([x[1] for x in rows])))]
            for c in counter_names:
                parts.append(',\n      "%s": %s' % (c, fmt(stat([x[3][c] for x in rows]))))
            parts.append("\n    }")
            w("".join(parts))
    w("\n  ]\n}\n")
    out.close()


if __name__ == "__main__":
    sys.exit(main())
