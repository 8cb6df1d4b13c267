#!/usr/bin/env python3
"""Issue #42's rows from an expert_gemm JSON: per variant and routing, the medians of the whole FFN and of its
GEMM stages as % of the same run's roofline, the phase split and the SM clock. A file without median aggregates
(a main job's run file, runs/expert_gemm.current.json: the repetitions of all its process runs) gives the medians
of its repetitions.

    python3 lab/tools/ceiling_rows.py expert_gemm.json [more.json ...]
"""
import json
import statistics
import sys

PHASES = ("routing", "permute", "gate_up", "activation", "down", "combine")


MS_PER_UNIT = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}


def repetition_medians(benchmarks):
    """One row per benchmark: the median of every numeric field over its repetitions, real_time in ms."""
    by_name = {}
    for b in benchmarks:
        if b.get("run_type") == "iteration" and "/ffn/" in b["name"]:
            by_name.setdefault(b["name"], []).append(b)
    for name, reps in by_name.items():
        row = {"name": name}
        for key in reps[0]:
            values = [r[key] for r in reps if isinstance(r.get(key), (int, float)) and not isinstance(r[key], bool)]
            if len(values) == len(reps):
                row[key] = statistics.median(values)
        row["real_time"] *= MS_PER_UNIT[reps[0].get("time_unit", "ms")]
        yield row


def medians(path):
    with open(path) as f:
        doc = json.load(f)
    benchmarks = doc.get("benchmarks", [])
    aggregates = [b for b in benchmarks if b.get("aggregate_name") == "median" and "/ffn/" in b["name"]]
    yield from aggregates or repetition_medians(benchmarks)


def row(b):
    parts = b["name"].split("/")
    variant, routing = parts[2], next(p for p in parts if p.startswith("routing:"))[8:]
    shape = next(p for p in parts if p.startswith("shape:"))[6:]
    tokens = next(p for p in parts if p.startswith("tokens:"))[7:]
    other = sum(b.get(f"phase.{p}", 0.0) for p in ("routing", "permute", "activation", "combine"))
    return (f"| {variant} | {shape} x {tokens} | {routing} | {b['real_time']:.3f} | {b.get('pct.roofline', 0):.1f} | "
            f"{b.get('pct.gemm_roofline', 0):.1f} | {b.get('phase.gate_up', 0):.3f} | {b.get('phase.down', 0):.3f} | "
            f"{other:.3f} | {b.get('sm_clock_mhz', 0):.0f} | {b.get('roofline_ms', 0):.3f} |")


def main(paths):
    print("| variant | shape | routing | ms | % FFN roofline | % GEMM-stage roofline | gate_up ms | down ms | "
          "routing+permute+activation+combine ms | SM MHz | FFN roofline ms |")
    print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for path in paths:
        for b in medians(path):
            print(row(b))


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
