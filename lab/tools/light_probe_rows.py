#!/usr/bin/env python3
"""The light kernel's share of an `overlap` pass run with OVERLAP_SERIAL=1: per JSON file and case (medians),
the light and heavy parts' experts, milliseconds and weight bandwidth, and the pass's % of its rooflines.

    lab/tools/light_probe_rows.py RESULT.json [RESULT.json ...]
"""
import json
import sys

EXPERT_WEIGHT_BYTES = 3 * 7168 * 2048 * 2  # DeepSeek-V3: gate, up and down of one expert, bf16
EXPERTS = 256


def rows_of(path):
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    copy = next((b.get("GB/s") for b in doc["benchmarks"]
                 if b.get("aggregate_name") == "median" and "calibration/copy" in b["name"]), None)
    for b in doc["benchmarks"]:
        if b.get("aggregate_name") != "median" or "light.experts" not in b:
            continue
        light = b["light.experts"]
        light_ms = b["light.gate_up_ms"] + b["light.down_ms"]
        heavy_ms = b["heavy.gate_up_ms"] + b["heavy.down_ms"]
        light_gbps = light * EXPERT_WEIGHT_BYTES / light_ms / 1e6
        heavy_gbps = (EXPERTS - light) * EXPERT_WEIGHT_BYTES / heavy_ms / 1e6 if heavy_ms > 0 else float("nan")
        routing = b["name"].split("routing:")[1].split("/")[0]
        yield (path, routing, int(b.get("light.form", 0)), int(light), int(b["light.rows"]),
               f"{b['light.gate_up_ms']:.3f} + {b['light.down_ms']:.3f}", round(light_gbps),
               f"{100 * light_gbps / copy:.0f}%" if copy else "-", round(heavy_gbps),
               f"{b['pct.gemm_roofline']:.1f}", f"{b['pct.roofline']:.1f}", round(b.get("sm_clock_mhz", 0)))


def main(paths):
    print("| file | routing | form | light experts | light rows | light ms (gate_up + down) | light GB/s | of copy "
          "| heavy GB/s | GEMM stages % | FFN % | SM MHz |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for path in paths:
        for row in rows_of(path):
            print("| " + " | ".join(str(v) for v in row) + " |")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
