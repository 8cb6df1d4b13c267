#!/usr/bin/env python3
# usage: marginal.py ROWS_JSON [WITH:SKIP ...] [--drop-slow]   (default pairs off:off_skip il:il_skip)
# abmarg.py's rows as tables: per side the medians over processes; per pair of sides (with LoRA, LoRA skipped)
# the marginal LoRA cost per round (total with - total skipped, same round), its median, the speed-up
# (loop's D4+GU3 of the round's two processes, mean / marginal) and the share (marginal / total with); for the
# side "off" the seed-shaped D4+GU3, speed-up and share as measure_targets.py computes them (share of the phase
# sum); and the rounds in which one pair's numbers are lower or higher than the first pair's. The bootstrap column:
# a 95% interval of the median per-round marginal (2000 resamples of the rounds, seed 1). --drop-slow leaves out the
# rounds in which a process ran in a slow state (its loop D4+GU3 over 1.5x the median of all processes).
import json, random, statistics, sys

args = [a for a in sys.argv[1:] if a != "--drop-slow"]
rows = json.load(open(args[0]))
pairs = [p.split(":") for p in args[1:]] or [["off", "off_skip"], ["il", "il_skip"]]
if "--drop-slow" in sys.argv:  # rounds with a process in a slow state: loop's D4+GU3 > 1.5x its median
    limit = 1.5 * statistics.median(x["loop_d4gu3"] for x in rows)
    slow = {x["round"] for x in rows if x["loop_d4gu3"] > limit}
    rows = [x for x in rows if x["round"] not in slow]
    print(f"dropped rounds {sorted(slow)} (a process with loop D4+GU3 > {limit:.1f} ms)")
by = {}
for x in rows:
    by.setdefault(x["side"], {})[x["round"]] = x
med = statistics.median
loads = [x["load1"] for x in rows]
print(f"processes {len(rows)}, {rows[0]['utc']}-{rows[-1]['utc']} UTC, 1-min load {min(loads):.2f}-{max(loads):.2f}")
print("\n| side | processes | backward ms | D3 | D4 | GU1 | GU3 | D4+GU3 | loop D4+GU3 |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for side, rs in by.items():
    v = list(rs.values())
    print(f"| {side} | {len(v)} | {med(x['total'] for x in v):.3f} | {med(x['D3'] for x in v):.3f} | "
          f"{med(x['D4'] for x in v):.3f} | {med(x['GU1'] for x in v):.3f} | {med(x['GU3'] for x in v):.3f} | "
          f"{med(x['d4gu3'] for x in v):.3f} | {med(x['loop_d4gu3'] for x in v):.2f} |")
if "off" in by:
    v = list(by["off"].values())
    sp = med(x["loop_d4gu3"] / x["d4gu3"] for x in v)
    sh = med(100 * x["d4gu3"] / x["phase_sum"] for x in v)
    print(f"\nseed-shaped, side off (per process, medians): D4+GU3 {med(x['d4gu3'] for x in v):.3f} ms, "
          f"speed-up {sp:.1f}x, share {sh:.1f}%")
marg = {}
print("\n| pair | rounds | marginal ms, median of rounds (range) | median(with) - median(skip) | 95% bootstrap "
      "| speed-up | share |")
print("| --- | ---: | --- | ---: | --- | ---: | ---: |")
for w, s in pairs:
    rounds = sorted(set(by[w]) & set(by[s]))
    m = {r: by[w][r]["total"] - by[s][r]["total"] for r in rounds}
    marg[w] = m
    loop = {r: (by[w][r]["loop_d4gu3"] + by[s][r]["loop_d4gu3"]) / 2 for r in rounds}
    sp = med(loop[r] / m[r] for r in rounds if m[r] > 0)
    sh = med(100 * m[r] / by[w][r]["total"] for r in rounds)
    dm = med(by[w][r]["total"] for r in rounds) - med(by[s][r]["total"] for r in rounds)
    rng = random.Random(1)
    boot = sorted(med(rng.choices(list(m.values()), k=len(rounds))) for _ in range(2000))
    print(f"| {w} - {s} | {len(rounds)} | {med(m.values()):.3f} ({min(m.values()):.3f} to {max(m.values()):.3f}) | "
          f"{dm:.3f} | {boot[50]:.3f} to {boot[1949]:.3f} | {sp:.1f}x (loop {med(loop.values()):.2f} / {med(m.values()):.3f}: "
          f"{med(loop.values()) / med(m.values()):.1f}x) | {sh:.1f}% |")
(w0, s0), rest = pairs[0], pairs[1:]
for w, s in rest:
    for label, a, b in (("backward with LoRA", by[w], by[w0]), ("backward LoRA skipped", by[s], by[s0]))[: 1 if s == s0 else 2]:
        rr = sorted(set(a) & set(b))
        lo = sum(a[r]["total"] < b[r]["total"] for r in rr)
        print(f"{label}: {w if a is by[w] else s} lower than {w0 if a is by[w] else s0} in {lo} of {len(rr)} rounds "
              f"(median difference {med(a[r]['total'] - b[r]['total'] for r in rr):+.3f} ms)")
    rr = sorted(set(marg[w]) & set(marg[w0]))
    lo = sum(marg[w][r] < marg[w0][r] for r in rr)
    print(f"marginal: {w} lower than {w0} in {lo} of {len(rr)} rounds "
          f"(median difference {med(marg[w][r] - marg[w0][r] for r in rr):+.3f} ms)")
