#!/usr/bin/env python3
"""Median phase split (ms, share) per variant from measure_targets run*.json or a bench JSON with repetitions."""
import json, statistics, sys, glob, collections
PH = ["D0","D1","D2","D3","D4","A1","GU0","GU1","GU2","GU3"]
rows = collections.defaultdict(list)
for path in sys.argv[1:]:
    for f in glob.glob(path):
        d = json.load(open(f))
        for b in d["benchmarks"]:
            if b.get("run_type") == "aggregate" or "phase.D3" not in b: continue
            rows[b["name"].split("/")[2] + ("" if "/backward/" in b["name"] else "?")].append(b)
for v, bs in rows.items():
    med = {p: statistics.median(b["phase."+p] for b in bs) for p in PH}
    tot = sum(med.values())
    lora = [b["phase.D4"] + b["phase.GU3"] for b in bs]
    share = [100*(b["phase.D4"] + b["phase.GU3"]) / sum(b["phase."+p] for p in PH) for b in bs]
    print(f"\n{v}: n={len(bs)}  backward (sum of phases) {tot:.3f} ms  real_time median {statistics.median(b['real_time'] for b in bs):.3f} ms")
    print(f"  LoRA D4+GU3 median {statistics.median(lora):.3f} ms (min {min(lora):.3f}, max {max(lora):.3f}); share median {statistics.median(share):.1f}% ; lora_share_pct counter median {statistics.median(b['lora_share_pct'] for b in bs):.1f}%")
    for k in ("pct.roofline.lora","lora_floor_share_pct"):
        if k in bs[0]: print(f"  {k} median {statistics.median(b[k] for b in bs):.1f}")
    print("  | stage | ms | share |")
    for p in PH: print(f"  | {p} | {med[p]:.3f} | {100*med[p]/tot:.1f}% |")
