import json, glob, statistics, sys
for d in sys.argv[1:]:
    rs = []; f2 = []; d4 = []; gu = []
    for p in sorted(glob.glob(d + "/run*.json")):
        rows = {b["name"].split("/")[2]: b for b in json.load(open(p))["benchmarks"]}
        f = rows["fused"]["phase.D4"] + rows["fused"]["phase.GU3"]; g = rows["fused2"]
        l2 = g["phase.D4"] + g["phase.GU3"]; rs.append(l2 / f); f2.append(l2); d4.append(g["phase.D4"]); gu.append(g["phase.GU3"])
    print(f"{d}: fused2 D4 {statistics.median(d4):.3f} GU3 {statistics.median(gu):.3f}; fused2/fused per process {' '.join(f'{x:.3f}' for x in rs)} median {statistics.median(rs):.3f}")
