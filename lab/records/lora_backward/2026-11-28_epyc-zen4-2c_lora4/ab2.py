#!/usr/bin/env python3
# usage: ab2.py ROUNDS bin...: per process 6 randomly interleaved repetitions of fused and fused2 (0.25 s each);
# per process the median fused2/fused LoRA ratio over the repetitions
import json, os, subprocess, sys, statistics
rounds = int(sys.argv[1]); bins = sys.argv[2:]
env = dict(os.environ, PERFGATE_LORA_CONFIGS="ci", PERFGATE_LORA_QLENS="128", PERFGATE_LORA_THREADS="2")
res = {b: [] for b in bins}; abs2 = {b: [] for b in bins}
for r in range(rounds):
    for b in bins:
        out = f"/tmp/lora4/ab2_{os.getpid()}.json"
        subprocess.run(["taskset", "-c", "0,1", b, "--benchmark_filter=^lora_backward/backward/(fused|fused2)/cfg:ci/qlen:128/threads:2(/|$)",
                        "--benchmark_min_time=0.25s", "--benchmark_repetitions=6", "--benchmark_enable_random_interleaving=true",
                        f"--benchmark_out={out}", "--benchmark_out_format=json"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        d = json.load(open(out))
        L = {"fused": [], "fused2": []}
        for x in d["benchmarks"]:
            if x.get("run_type") != "iteration": continue
            L[x["name"].split("/")[2]].append(x["phase.D4"] + x["phase.GU3"])
        f = statistics.median(L["fused"]); f2 = statistics.median(L["fused2"])
        res[b].append(f2 / f); abs2[b].append(f2)
        print(f"{r} {os.path.basename(b):>16}: fused {f:.3f} fused2 {f2:.3f} ratio {f2/f:.3f}  fused2 reps {' '.join(f'{v:.2f}' for v in L['fused2'])}", flush=True)
for b in bins: print(os.path.basename(b), "median ratio", round(statistics.median(res[b]), 3), "fused2 median", round(statistics.median(abs2[b]), 3), [round(x, 3) for x in res[b]])
