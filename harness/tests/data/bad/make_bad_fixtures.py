#!/usr/bin/env python3
"""Writes the bad-input fixtures of loader_test.cpp (one file per case) into this folder.

Each case starts from a small valid Google Benchmark 1.7-style document and breaks one thing.
Cases that cannot be files in git are made by the test itself: a missing file, a 1 GB file
(sparse, made at test time), a directory (directory.json/ holds only a README).
"""
import copy
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))

CONTEXT = {
    "date": "2026-11-22T02:00:00+00:00", "host_name": "vm", "executable": "./bench_fixture", "num_cpus": 2,
    "mhz_per_cpu": 2596, "cpu_scaling_enabled": False, "caches": [], "load_avg": [0.1, 0.2, 0.3],
    "library_build_type": "release", "perfgate.suite": "fixture",
}


def rep(name, i, n=3, t=100.0, unit="ns", **extra):
    e = {"name": name, "family_index": 0, "per_family_instance_index": 0, "run_name": name,
         "run_type": "iteration", "repetitions": n, "repetition_index": i, "threads": 1, "iterations": 1000,
         "real_time": t + i, "cpu_time": t + i - 1, "time_unit": unit, "phase.a": 0.5, "bytes/s": 1e9}
    e.update(extra)
    return e


def good():
    return {"context": dict(CONTEXT),
            "benchmarks": [rep("fixture/a", i) for i in range(3)] +
                          [dict(rep("fixture/b", i), family_index=1) for i in range(3)]}


def dump(doc):
    return json.dumps(doc, indent=2)


def write(name, text):
    with open(os.path.join(HERE, name), "w") as f:
        f.write(text)


def main():
    text = dump(good())
    write("truncated.json", text[: len(text) * 2 // 3])
    write("malformed.json", text.replace('"iterations": 1000,', '"iterations": 1000', 1))
    write("trailing_garbage.json", text + "\n}\n")
    write("empty.json", "")
    write("not_json.json", "name,real_time\nfixture/a,100\n")
    # Google Benchmark's other output formats, saved where JSON was meant to go (stdout of a plain run, or
    # --benchmark_format=csv): named for what they hold, since users name them .json as often as not.
    write("gbench_console.json",
          "2026-12-01T06:17:35+00:00\nRunning ./bench_fixture\nRun on (2 X 2596.12 MHz CPU s)\nCPU Caches:\n"
          "  L1 Data 48 KiB (x2)\nLoad Average: 0.56, 0.81, 1.11\n" + "-" * 70 + "\n"
          "Benchmark            Time             CPU   Iterations\n" + "-" * 70 + "\n"
          "fixture/a          100 ns         99.0 ns      1000000\n")
    # --benchmark_format=json > FILE from a program that printed a line of its own first.
    write("gbench_after_banner.json", "my bench: 4 threads, seed 7\n" + text)
    write("gbench_csv.json",
          "name,iterations,real_time,cpu_time,time_unit,bytes_per_second,items_per_second,label,error_occurred,"
          "error_message\n\"fixture/a\",1000000,100,99,ns,,,,,\n")

    def mutate(fname, fn):
        doc = good()
        fn(doc)
        write(fname, dump(doc))

    def setf(i, **kv):
        return lambda d: d["benchmarks"][i].update(kv)

    mutate("wrong_type_real_time.json", setf(1, real_time="101.0"))
    mutate("wrong_type_name.json", setf(0, name=42))
    mutate("wrong_type_iterations.json", setf(2, iterations=10.5))
    mutate("wrong_type_error_occurred.json", setf(1, error_occurred="yes"))
    mutate("wrong_type_counter.json", setf(1, **{"phase.a": "0.5"}))
    mutate("negative_time.json", setf(1, real_time=-101.0))
    mutate("zero_time.json", setf(1, real_time=0.0))
    mutate("negative_cpu_time.json", setf(1, cpu_time=-1.0))
    mutate("missing_real_time.json", lambda d: d["benchmarks"][1].pop("real_time"))
    mutate("unit_mismatch.json", setf(1, time_unit="us"))
    mutate("unknown_unit.json", setf(0, time_unit="fortnights"))
    mutate("missing_repetition.json", lambda d: d["benchmarks"].pop(1))
    mutate("duplicate_repetition.json", setf(2, repetition_index=1))
    mutate("unknown_run_type.json", setf(0, run_type="summary"))

    def counter_gap(d):
        d["benchmarks"][2].pop("phase.a")
    mutate("counter_missing.json", counter_gap)

    def duplicate_name(d):
        # A second, different benchmark (family 2) registered under the name of fixture/a.
        d["benchmarks"] += [dict(rep("fixture/a", i), family_index=2) for i in range(3)]
    mutate("duplicate_name.json", duplicate_name)

    def duplicate_normalised(d):
        # "fixture/a" and "fixture/a/manual_time" are the same benchmark once suffixes are removed.
        d["benchmarks"] += [dict(rep("fixture/a/manual_time", i), family_index=2) for i in range(3)]
    mutate("duplicate_normalised.json", duplicate_normalised)

    mutate("no_benchmarks.json", lambda d: d.pop("benchmarks"))
    mutate("benchmarks_not_array.json", lambda d: d.update(benchmarks={"fixture/a": 1}))
    write("top_level_array.json", dump(good()["benchmarks"]))
    # perfgate's own JSON report given as results: its benchmarks are verdicts, not measurements.
    write("perfgate_report.json", dump({
        "schema": "perfgate.report/1", "title": "perfgate ab", "outcome": "FAIL", "exit_code": 1,
        "summary": "FAIL: 1 regression -- 1 benchmark: 1 regression (exit 1)", "counts": {"regression": 1, "total": 1},
        "baseline": {"files": ["runs/fixture.before.json"]}, "current": {"files": ["runs/fixture.after.json"]},
        "benchmarks": [{"name": "fixture/a", "suite": "fixture", "verdict": "regression",
                        "reason": "time 12.0% slower"}]}))
    mutate("entry_not_object.json", lambda d: d["benchmarks"].insert(1, "fixture/a"))

    # NaN and Infinity as Google Benchmark writes them: unquoted (not JSON).
    write("nan_time.json", text.replace('"real_time": 101.0', '"real_time": NaN', 1))
    write("inf_time.json", text.replace('"real_time": 102.0', '"real_time": Infinity', 1))
    # A NaN user counter is not bad input (the loader leaves the counter out): written beside the loader's fixtures.
    with open(os.path.join(HERE, "..", "loader", "non_finite_counter.json"), "w") as f:
        f.write(text.replace('"phase.a": 0.5', '"phase.a": -nan', 1))

    def baseline_bad_run(d):
        d["perfgate_process_runs"] = [dict(CONTEXT)]
        for e in d["benchmarks"]:
            e["perfgate_process_run"] = 0
        d["benchmarks"][4]["perfgate_process_run"] = 3
    mutate("baseline_bad_process_run.json", baseline_bad_run)

    os.makedirs(os.path.join(HERE, "directory.json"), exist_ok=True)
    write(os.path.join("directory.json", "README"),
          "A directory named like a results file: the loader must refuse it (exit 2), not crash.\n")
    write("good.json", text)


if __name__ == "__main__":
    main()
