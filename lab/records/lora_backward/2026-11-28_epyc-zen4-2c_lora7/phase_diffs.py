#!/usr/bin/env python3
# usage: phase_diffs.py ROWS_JSON [DROP_ROUND ...]: per side the median of each phase over processes, and per pair
# (off, off_skip) and (il, il_skip) the median over rounds of the same round's difference, phase by phase (medians
# of differences: they do not add up to the difference of the totals exactly).
import json, statistics as st, sys
drop = {int(r) for r in sys.argv[2:]}
rows = [x for x in json.load(open(sys.argv[1])) if x["round"] not in drop]
P = ("D0", "D1", "D2", "D3", "D4", "A1", "GU0", "GU1", "GU2", "GU3", "phase_sum", "total")
by = {}
for x in rows:
    by.setdefault(x["side"], {})[x["round"]] = x
for side in ("off", "off_skip", "il", "il_skip"):
    print(side, " ".join(f"{p}={st.median(x[p] for x in by[side].values()):.3f}" for p in P))
for a, b in (("off", "off_skip"), ("il", "il_skip")):
    rr = sorted(set(by[a]) & set(by[b]))
    print(f"{a} - {b} ({len(rr)} rounds)", " ".join(f"{p}={st.median(by[a][r][p] - by[b][r][p] for r in rr):+.3f}" for p in P))
