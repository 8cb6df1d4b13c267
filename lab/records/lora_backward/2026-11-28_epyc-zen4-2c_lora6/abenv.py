#!/usr/bin/env python3
# usage: abenv.py ROUNDS BIN KNOB...: alternating processes of BIN without a knob and with each KNOB=1 (KNOB may be
# NAME=VALUE); per process 6 randomly interleaved repetitions of fused and fused2 (0.25 s each): the per-process
# median fused2/fused D4+GU3 ratio, fused2's D4, GU3, D3, GU1 and LoRA share medians
import json, os, subprocess, sys, statistics
rounds = int(sys.argv[1]); b = sys.argv[2]; knobs = sys.argv[3:]
sides = ["off"] + knobs
res = {s: [] for s in sides}; gres = {s: [] for s in sides}; cols = {s: {k: [] for k in ("f2", "D4", "GU3", "D3", "GU1", "share")} for s in sides}
for r in range(rounds):
    for side in (sides if r % 2 == 0 else sides[::-1]):
        name = "off" if side == "off" else side.replace("PERFGATE_LORA_FUSED2_", "").replace(",", "+")
        env = dict(os.environ, PERFGATE_LORA_CONFIGS="ci", PERFGATE_LORA_QLENS="128", PERFGATE_LORA_THREADS="2")
        if side != "off":
            for kv in side.split(","):
                k, _, v = kv.partition("=")
                env[k] = v or "1"
        out = f"/tmp/lora6/abenv_{os.getpid()}_{r}_{name}.json"
        subprocess.run(["taskset", "-c", "0,1", b, "--benchmark_filter=^lora_backward/backward/(fused|fused2)/cfg:ci/qlen:128/threads:2(/|$)",
                        "--benchmark_min_time=0.25s", "--benchmark_repetitions=6", "--benchmark_enable_random_interleaving=true",
                        f"--benchmark_out={out}", "--benchmark_out_format=json"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        d = json.load(open(out))
        L = {"fused": [], "fused2": []}; GF = {"fused": [], "fused2": []}; P = {k: [] for k in ("D4", "GU3", "D3", "GU1", "share")}
        for x in d["benchmarks"]:
            if x.get("run_type") != "iteration": continue
            v = x["name"].split("/")[2]
            L[v].append(x["phase.D4"] + x["phase.GU3"]); GF[v].append(x["phase.GU3"])
            if v == "fused2":
                for k in ("D4", "GU3", "D3", "GU1"): P[k].append(x["phase." + k])
                tot = sum(x[k] for k in x if k.startswith("phase."))
                P["share"].append(100 * (x["phase.D4"] + x["phase.GU3"]) / tot)
        f = statistics.median(L["fused"]); f2 = statistics.median(L["fused2"])
        res[side].append(f2 / f); gr = statistics.median(GF["fused2"]) / statistics.median(GF["fused"]); gres[side].append(gr); cols[side]["f2"].append(f2)
        for k in P: cols[side][k].append(statistics.median(P[k]))
        m = {k: statistics.median(P[k]) for k in P}
        print(f"{r} {name:>16}: fused {f:.3f} fused2 {f2:.3f} (D4 {m['D4']:.3f} GU3 {m['GU3']:.3f} D3 {m['D3']:.3f} GU1 {m['GU1']:.3f} share {m['share']:.1f}%) ratio {f2/f:.3f} GU3 ratio {gr:.3f}", flush=True)
for s in sides:
    c = {k: round(statistics.median(v), 3) for k, v in cols[s].items()}
    print(s, "median ratio", round(statistics.median(res[s]), 3), "GU3 ratio", round(statistics.median(gres[s]), 3), "fused2", c, [round(x, 3) for x in res[s]])
