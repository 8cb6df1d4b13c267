#!/usr/bin/env python3
# usage: abenv.py ROUNDS BIN KNOB...: alternating processes of BIN without a knob and with each KNOB=1; per process 6 randomly
# interleaved repetitions of fused and fused2 (0.25 s each), the per-process median fused2/fused D4+GU3 ratio
import json, os, subprocess, sys, statistics
rounds = int(sys.argv[1]); b = sys.argv[2]; knobs = sys.argv[3:]
sides = ["off"] + knobs; knob = "knob"
res = {s: [] for s in sides}; abs2 = {s: [] for s in sides}; d4 = {s: [] for s in sides}; gu3 = {s: [] for s in sides}
for r in range(rounds):
    for side in (sides if r % 2 == 0 else sides[::-1]):
        name = "off" if side == "off" else side.replace("PERFGATE_LORA_FUSED2_", "")
        env = dict(os.environ, PERFGATE_LORA_CONFIGS="ci", PERFGATE_LORA_QLENS="128", PERFGATE_LORA_THREADS="2")
        if side != "off": env[side] = "1"
        out = f"/tmp/lora5/abenv_{os.getpid()}_{r}_{side}.json"
        subprocess.run(["taskset", "-c", "0,1", b, "--benchmark_filter=^lora_backward/backward/(fused|fused2)/cfg:ci/qlen:128/threads:2(/|$)",
                        "--benchmark_min_time=0.25s", "--benchmark_repetitions=6", "--benchmark_enable_random_interleaving=true",
                        f"--benchmark_out={out}", "--benchmark_out_format=json"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        d = json.load(open(out))
        L = {"fused": [], "fused2": []}; D = []; G = []
        for x in d["benchmarks"]:
            if x.get("run_type") != "iteration": continue
            v = x["name"].split("/")[2]
            L[v].append(x["phase.D4"] + x["phase.GU3"])
            if v == "fused2": D.append(x["phase.D4"]); G.append(x["phase.GU3"])
        f = statistics.median(L["fused"]); f2 = statistics.median(L["fused2"])
        res[side].append(f2 / f); abs2[side].append(f2); d4[side].append(statistics.median(D)); gu3[side].append(statistics.median(G))
        print(f"{r} {name:>16}: fused {f:.3f} fused2 {f2:.3f} (D4 {statistics.median(D):.3f} GU3 {statistics.median(G):.3f}) ratio {f2/f:.3f}", flush=True)
for s in sides: print(s, "median ratio", round(statistics.median(res[s]), 3), "fused2 median", round(statistics.median(abs2[s]), 3),
                      "D4", round(statistics.median(d4[s]), 3), "GU3", round(statistics.median(gu3[s]), 3), [round(x, 3) for x in res[s]])
