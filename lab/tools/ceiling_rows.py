#!/usr/bin/env python3
"""Issue #42's rows from an expert_gemm JSON: per variant and routing, the medians of the whole FFN and of its
GEMM stages as % of the same run's roofline, the phase split and the SM clock.

    python3 lab/tools/ceiling_rows.py expert_gemm.json [more.json ...]
"""
import json
import sys

PHASES = ("routing", "permute", "gate_up", "activation", "down", "combine")


def medians(path):
    with open(path) as f:
        doc = json.load(f)
    for b in doc.get("benchmarks", []):
        if b.get("aggregate_name") == "median" and "/ffn/" in b["name"]:
            yield b


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
