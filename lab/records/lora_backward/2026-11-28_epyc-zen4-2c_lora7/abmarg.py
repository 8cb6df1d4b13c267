#!/usr/bin/env python3
# usage: abmarg.py ROUNDS BIN OUTDIR SIDE...   SIDE = NAME[:KNOB[,KNOB...]], KNOB = NAME[=VALUE] (VALUE default 1)
# Alternating processes of one binary, one process per side per round, the side order reversed every other round.
# Each process: the `loop` and `fused2` backward (ci, qlen 128, 2 threads), 6 randomly interleaved repetitions of
# 0.25 s each (fused2 is named fused2_skip_lora under PERFGATE_LORA_SKIP_LORA=1). Per process it keeps the medians
# over the repetitions of fused2's real time (ms per backward), its phases, its D4+GU3, the sum of its phases, and
# loop's D4+GU3 and real time. Writes OUTDIR/rows.json (one row per process) and the bench JSON files; prints one
# line per process. Summaries: marginal.py. Environment: ABMARG_CPUS, the CPUs the processes are pinned to
# (default 0,1); ABMARG_SECONDS, no new round once that many seconds have passed (default: none).
import json, os, statistics, subprocess, sys, time

rounds, binary, outdir = int(sys.argv[1]), sys.argv[2], sys.argv[3]
sides = []
for spec in sys.argv[4:]:
    name, _, knobs = spec.partition(":")
    env = {}
    for kv in filter(None, knobs.split(",")):
        k, _, v = kv.partition("=")
        env[k] = v or "1"
    sides.append((name, env))
os.makedirs(outdir, exist_ok=True)
PHASES = ("D0", "D1", "D2", "D3", "D4", "A1", "GU0", "GU1", "GU2", "GU3")
rows = []
cpus = os.environ.get("ABMARG_CPUS", "0,1")
deadline = time.time() + float(os.environ.get("ABMARG_SECONDS", "inf"))
for r in range(rounds):
    if time.time() > deadline:
        break
    for name, knobs in sides if r % 2 == 0 else sides[::-1]:
        env = dict(os.environ, PERFGATE_LORA_CONFIGS="ci", PERFGATE_LORA_QLENS="128", PERFGATE_LORA_THREADS="2", **knobs)
        out = f"{outdir}/r{r:02d}_{name}.json"
        t0 = time.time()
        subprocess.run(["taskset", "-c", cpus, binary,
                        "--benchmark_filter=^lora_backward/backward/(loop|fused2|fused2_skip_lora)/cfg:ci/qlen:128/threads:2(/|$)",
                        "--benchmark_min_time=0.25s", "--benchmark_repetitions=6",
                        "--benchmark_enable_random_interleaving=true", f"--benchmark_out={out}",
                        "--benchmark_out_format=json"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       check=True)
        d = json.load(open(out))
        it = {"loop": [], "fused2": []}
        for x in d["benchmarks"]:
            if x.get("run_type") == "iteration":
                it["loop" if x["name"].split("/")[2] == "loop" else "fused2"].append(x)
        med = lambda xs, f: statistics.median(f(x) for x in xs)
        f2 = it["fused2"]
        row = {"round": r, "side": name, "utc": time.strftime("%H:%M:%S", time.gmtime(t0)),
               "load1": os.getloadavg()[0],
               "total": med(f2, lambda x: x["real_time"]),
               "phase_sum": med(f2, lambda x: sum(x["phase." + p] for p in PHASES)),
               "d4gu3": med(f2, lambda x: x["phase.D4"] + x["phase.GU3"]),
               "loop_d4gu3": med(it["loop"], lambda x: x["phase.D4"] + x["phase.GU3"]),
               "loop_total": med(it["loop"], lambda x: x["real_time"])}
        for p in PHASES:
            row[p] = med(f2, lambda x: x["phase." + p])
        rows.append(row)
        json.dump(rows, open(f"{outdir}/rows.json", "w"), indent=1)
        print(f"{r:2d} {name:>8} {row['utc']} total {row['total']:.3f} D3 {row['D3']:.3f} D4 {row['D4']:.3f} "
              f"GU1 {row['GU1']:.3f} GU3 {row['GU3']:.3f} d4gu3 {row['d4gu3']:.3f} loop d4gu3 {row['loop_d4gu3']:.2f} "
              f"load {row['load1']:.2f}", flush=True)
