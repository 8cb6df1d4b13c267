#!/usr/bin/python3
"""Proven detection: measures how often perfgate's verdicts are right on this machine.

Experiments (each benchmark comparison is one trial; lab/results/statistics-evidence.md, "Proven detection"):
  ab        `perfgate ab` sessions of one bench binary against itself: A/A (no change), +10% and +5%
            injected work on the after side (the suite's slowdown variable). Verdicts at the default
            threshold come from the session's report; threshold 2% from `perfgate compare --threshold
            0.02` on the very same run files.
  stored    `perfgate compare` of two stored runs taken minutes apart (the CI situation with a stored
            baseline): the "before" run of one ab session against a run of a later session.
  run       `perfgate run` against a baseline recorded at the start, with the confirm step (A/A, +10%),
            and with --baseline-build (the confirm step alternates with a fresh baseline run).
  cost      wall time of K interleaved process rounds vs one process with the same repetitions.
Side by side, on the same samples: Google Benchmark's compare.py rule (Mann-Whitney U two-sided
p < 0.05 on the pooled repetitions, as tools/gbench/report.py calc_utest; counted as a regression
when the after median is also higher) and a plain "median changed by more than 5%" rule.

Writes <out>/results.json and <out>/results.md (the tables), and prints the Markdown.
Needs /usr/bin/python3 with scipy (Debian python3-scipy).

Example (the figures in lab/results/statistics-evidence.md):
  lab/tools/prove_detection.py --build build/runner --suite synthetic --out build/proof/synthetic \
      --aa 34 --slow10 20 --aa2 34 --slow5 20 --run-sessions 6 --realtime
"""
import argparse
import json
import math
import os
import subprocess
import sys
import time

from scipy.stats import mannwhitneyu

SLOWDOWN_ENV = {"synthetic": "PERFGATE_SYNTHETIC_SLOWDOWN", "lora_backward": "PERFGATE_LORA_SLOWDOWN"}


def log(msg):
    print(f"[prove {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def run(cmd, env=None, check_codes=(0, 1, 3, 77)):
    t0 = time.monotonic()
    full_env = dict(os.environ)
    full_env.update(env or {})
    p = subprocess.run([str(c) for c in cmd], env=full_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wall = time.monotonic() - t0
    if p.returncode not in check_codes:
        raise SystemExit(f"command failed ({p.returncode}): {' '.join(map(str, cmd))}\n{p.stderr[-3000:]}")
    return p.returncode, wall, p.stdout, p.stderr


def load_samples(run_file):
    """benchmark name -> list of latency samples (real_time of every repetition), as compare.py reads them."""
    with open(run_file) as f:
        doc = json.load(f)
    out = {}
    for b in doc.get("benchmarks", []):
        if b.get("run_type", "iteration") != "iteration" or b.get("error_occurred"):
            continue
        name = b.get("run_name", b["name"])
        # Google Benchmark's suffixes, as perfgate normalises them (verdicts carry normalised names).
        changed = True
        while changed:
            changed = False
            for suffix in ("/manual_time", "/real_time", "/process_time"):
                if name.endswith(suffix):
                    name = name[: -len(suffix)]
                    changed = True
        out.setdefault(name, []).append(float(b["real_time"]))
    return out


def median(xs):
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def other_rules(before, after):
    """compare.py's U-test decision and the plain median rule on the same samples."""
    rows = {}
    for name, a in before.items():
        b = after.get(name)
        if not b or len(a) < 2 or len(b) < 2:
            continue
        p = mannwhitneyu(a, b, alternative="two-sided").pvalue
        change = median(b) / median(a) - 1
        rows[name] = {"utest_p": p, "utest_regression": bool(p < 0.05 and change > 0),
                      "median_change": change, "median_regression": bool(change > 0.05)}
    return rows


def verdicts_of(report_file):
    with open(report_file) as f:
        doc = json.load(f)
    return {b["name"]: b["verdict"] for b in doc["benchmarks"]}, doc


def wilson(k, n, z=1.96):
    if n == 0:
        return (float("nan"), float("nan"))
    p = k / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return (max(0.0, c - h), min(1.0, c + h))


def rate(k, n):
    lo, hi = wilson(k, n)
    return {"k": k, "n": n, "rate": (k / n if n else float("nan")), "ci95": [lo, hi]}


class Experiment:
    def __init__(self, a):
        self.a = a
        self.perfgate = os.path.abspath(os.path.join(a.build, "bin", "perfgate"))
        self.bench = os.path.abspath(os.path.join(a.build, "bin", f"bench_{a.suite}"))
        self.out = os.path.abspath(a.out)
        self.env_var = SLOWDOWN_ENV[a.suite]
        os.makedirs(self.out, exist_ok=True)
        self.trials = []     # one row per benchmark comparison
        self.compare_paired = "--paired" in run([self.perfgate, "compare", "--help"])[2]
        self.sessions = []   # one row per session (walls, notes)

    def measure_flags(self, rounds=None, session=False):
        """Flags of perfgate run/ab; `session`: also the ab/confirm-only flags (--session-flags)."""
        a = self.a
        flags = ["--rounds", rounds or a.rounds, "--repetitions", a.repetitions, "--quiet"]
        if session:
            flags += a.session_flags
        if a.min_time:
            flags += ["--min-time", a.min_time]
        if a.filter:
            flags += ["--filter", a.filter]
        for e in a.env:
            flags += ["--env", e]
        if a.realtime:
            flags += ["--realtime"]
        if a.pin_cpus:
            flags += ["--pin-cpus", a.pin_cpus]
        return flags + a.rule

    def compare(self, base, cur, out, threshold=None, paired=False):
        cmd = [self.perfgate, "compare", base, cur, "--json", out, "-q", "--no-config"] + self.a.rule
        if threshold is not None:
            cmd += ["--threshold", threshold]
        if paired:
            cmd += ["--paired"]
        run(cmd)
        return verdicts_of(out)[0]

    # ---- ab ----------------------------------------------------------------------------------------
    def ab_session(self, idx, kind, slowdown, threshold):
        d = os.path.join(self.out, "ab", f"{idx:03d}-{kind}")
        cmd = [self.perfgate, "ab", "--before", self.bench, "--after", self.bench, "--report-dir", d,
               "--seed", 1000 + idx] + self.measure_flags(session=True)
        if slowdown:
            cmd += ["--after-env", f"{self.env_var}={slowdown}"]
        if threshold is not None:
            cmd += ["--threshold", threshold]
        rc, wall, _, _ = run(cmd)
        verdicts, doc = verdicts_of(os.path.join(d, "ab-report.json"))
        before = os.path.join(d, "runs", f"{self.a.suite}.before.json")
        after = os.path.join(d, "runs", f"{self.a.suite}.after.json")
        # The same run files re-judged at the other threshold, when `perfgate compare --paired` exists.
        # Not with adaptive extra rounds: which benchmarks got them depends on the session's threshold,
        # so a re-judgement at another threshold is no sequential procedure (sessions run at each).
        other = {}
        adaptive_note = next((n for n in doc.get("notes", []) if n.startswith("adaptive rounds:")), "")
        adaptive = bool(adaptive_note) and "extra rounds off" not in adaptive_note
        if self.compare_paired and not adaptive:
            other_thr = 0.05 if threshold is not None else 0.02
            other = self.compare(before, after, os.path.join(d, "rejudge.json"), other_thr, paired=True)
        rules = other_rules(load_samples(before), load_samples(after))
        thr = threshold if threshold is not None else 0.05
        for name, verdict in verdicts.items():
            r = rules.get(name, {})
            row = {"experiment": "ab", "kind": kind, "slowdown": slowdown, "threshold": thr, "session": idx,
                   "benchmark": name, f"verdict_thr{round(100 * thr)}": verdict, **r}
            if other:
                row[f"verdict_thr{round(100 * (0.05 if threshold is not None else 0.02))}"] = other.get(name)
            self.trials.append(row)
        self.sessions.append({"experiment": "ab", "kind": kind, "session": idx, "wall": wall, "rc": rc,
                              "before": before, "after": after, "time": time.time(), "slowdown": slowdown,
                              "adaptive": adaptive_note})
        log(f"ab {idx:3d} {kind:8s} rc={rc} {wall:5.1f}s  " + " ".join(f"{v[:5]}" for v in verdicts.values()))

    # ---- stored runs at different times ---------------------------------------------------------------
    def stored_pairs(self):
        ab = [s for s in self.sessions if s["experiment"] == "ab"]
        n = len(ab)
        gap = max(1, n // 2)
        for i in range(n):
            j = i + gap
            if j >= n:
                break
            base = ab[i]["before"]
            # A/A: the clean (before) run of a later session; detection: that session's slowed after run.
            pairs = [("aa", 0.0, ab[j]["before"])]
            if ab[j]["slowdown"]:
                pairs.append(({0.10: "slow10", 0.05: "slow5"}[ab[j]["slowdown"]], ab[j]["slowdown"], ab[j]["after"]))
            for kind, slowdown, cur in pairs:
                d = os.path.join(self.out, "stored", f"{i:03d}-{j:03d}-{kind}")
                os.makedirs(d, exist_ok=True)
                v = self.compare(base, cur, os.path.join(d, "cmp.json"))
                rules = other_rules(load_samples(base), load_samples(cur))
                minutes = (ab[j]["time"] - ab[i]["time"]) / 60
                for name, verdict in v.items():
                    self.trials.append({"experiment": "stored", "kind": kind, "slowdown": slowdown, "session": i,
                                        "benchmark": name, "verdict_thr5": verdict, "minutes_apart": minutes,
                                        **rules.get(name, {})})
        log(f"stored: {sum(1 for t in self.trials if t['experiment'] == 'stored')} comparisons")

    # ---- perfgate run with the confirm step ---------------------------------------------------------
    def run_sessions(self, n):
        bl = os.path.join(self.out, "run", "baselines")
        rc, wall, _, _ = run([self.perfgate, "run", "--bench", self.bench, "--update-baseline", "--baseline-dir", bl,
                              "--report-dir", os.path.join(self.out, "run", "record")] + self.measure_flags())
        log(f"run: baseline recorded ({wall:.1f}s)")
        plan = []
        for i in range(n):
            plan += [("aa", 0, False), ("slow10", 0.10, False), ("aa", 0, True), ("slow10", 0.10, True)]
        for idx, (kind, slowdown, with_build) in enumerate(plan):
            mode = "run+build" if with_build else "run"
            d = os.path.join(self.out, "run", f"{idx:03d}-{mode}-{kind}")
            cmd = [self.perfgate, "run", "--bench", self.bench, "--baseline-dir", bl, "--report-dir", d,
                   "--seed", 5000 + idx] + self.measure_flags(session=True)
            if with_build:
                cmd += ["--baseline-build", self.bench]
            if slowdown:
                cmd += ["--env", f"{self.env_var}={slowdown}"]
            rc, wall, _, err = run(cmd)
            v, doc = verdicts_of(os.path.join(d, "perf-report.json"))
            notes = doc.get("notes", [])
            confirm = next((x for x in notes if x.startswith("confirm step:")), "")
            confirm_adaptive = next((x for x in notes if x.startswith("confirm step, adaptive rounds:")), "")
            measured = next((x for x in notes if x.startswith("measured:")), "")
            for name, verdict in v.items():
                self.trials.append({"experiment": mode, "kind": kind, "slowdown": slowdown, "session": idx,
                                    "benchmark": name, "verdict_thr5": verdict})
            self.sessions.append({"experiment": mode, "kind": kind, "session": idx, "wall": wall, "rc": rc,
                                  "confirm": confirm, "measured": measured, "time": time.time(),
                                  "confirm_adaptive": confirm_adaptive})
            log(f"{mode:9s} {idx:3d} {kind:6s} rc={rc} {wall:5.1f}s {confirm} {confirm_adaptive}")

    # ---- cost of interleaving ----------------------------------------------------------------------------
    def interleave_cost(self, n):
        a = self.a
        for i in range(n):
            for mode in ("interleaved", "single"):
                d = os.path.join(self.out, "cost", f"{i:02d}-{mode}")
                flags = self.measure_flags()
                if mode == "single":
                    flags = self.measure_flags(rounds=1)
                    k = flags.index("--repetitions")
                    flags[k + 1] = a.rounds * a.repetitions
                    flags += ["--no-interleave"]
                rc, wall, _, _ = run([self.perfgate, "run", "--bench", self.bench, "--record-only", "--report-dir", d]
                                     + flags)
                self.sessions.append({"experiment": "cost", "kind": mode, "session": i, "wall": wall, "rc": rc})
        log("cost: done")

    def recompute_rules(self):
        """compare.py / median rules again from the stored run files (after a fix to the rules)."""
        ab = {s["session"]: s for s in self.sessions if s["experiment"] == "ab"}
        cache = {}

        def rules(base, cur):
            if (base, cur) not in cache:
                cache[(base, cur)] = other_rules(load_samples(base), load_samples(cur))
            return cache[(base, cur)]

        stored_dirs = {}
        sd = os.path.join(self.out, "stored")
        if os.path.isdir(sd):
            for d in os.listdir(sd):
                i, j, kind = d.split("-", 2)
                stored_dirs[(int(i), kind)] = int(j)
        for t in self.trials:
            if t["experiment"] == "ab" and t["session"] in ab:
                r = rules(ab[t["session"]]["before"], ab[t["session"]]["after"]).get(t["benchmark"])
            elif t["experiment"] == "stored" and (t["session"], t["kind"]) in stored_dirs:
                j = stored_dirs[(t["session"], t["kind"])]
                cur = ab[j]["before"] if t["kind"] == "aa" else ab[j]["after"]
                r = rules(ab[t["session"]]["before"], cur).get(t["benchmark"])
            else:
                continue
            if r:
                t.update(r)

    # ---- summary -----------------------------------------------------------------------------------------
    def summarise(self):
        rows = []

        def add(label, experiment, kinds, key="verdict_thr5", want="regression"):
            ts = [t for t in self.trials if t["experiment"] == experiment and t["kind"] in kinds and t.get(key)]
            if not ts:
                return
            n = len(ts)
            row = {"label": label, "experiment": experiment, "kind": "+".join(kinds), "rule": key, "n": n,
                   "perfgate": rate(sum(1 for t in ts if t[key] == want), n),
                   "noisy": rate(sum(1 for t in ts if t[key] == "noisy"), n),
                   "failed": sum(1 for t in ts if t[key] == "failed")}
            with_rules = [t for t in ts if "utest_regression" in t]
            if with_rules:
                row["compare_py"] = rate(sum(1 for t in with_rules if t["utest_regression"]), len(with_rules))
                row["median5"] = rate(sum(1 for t in with_rules if t["median_regression"]), len(with_rules))
            rows.append(row)

        add("ab A/A, default threshold (5%)", "ab", ("aa", "aa2"))
        add("ab +10%, default threshold", "ab", ("slow10",))
        add("ab +5%, default threshold", "ab", ("slow5",))
        add("ab A/A, threshold 2%", "ab", ("aa", "aa2"), key="verdict_thr2")
        add("ab +5%, threshold 2%", "ab", ("slow5",), key="verdict_thr2")
        add("ab +10%, threshold 2%", "ab", ("slow10",), key="verdict_thr2")
        add("stored runs minutes apart (compare), A/A", "stored", ("aa",))
        add("stored runs minutes apart (compare), +10%", "stored", ("slow10",))
        add("stored runs minutes apart (compare), +5%", "stored", ("slow5",))
        add("run + confirm vs stored baseline, A/A", "run", ("aa",))
        add("run + confirm vs stored baseline, +10%", "run", ("slow10",))
        add("run + confirm with --baseline-build, A/A", "run+build", ("aa",))
        add("run + confirm with --baseline-build, +10%", "run+build", ("slow10",))

        costs = {}
        for exp in ("ab", "run", "run+build", "cost"):
            for kind in sorted({s["kind"] for s in self.sessions if s["experiment"] == exp}):
                walls = [s["wall"] for s in self.sessions if s["experiment"] == exp and s["kind"] == kind]
                costs[f"{exp}/{kind}"] = {"sessions": len(walls), "median_wall_s": median(walls),
                                          "total_wall_s": sum(walls)}
        # Adaptive extra rounds of ab sessions: extra repetitions and seconds per session (mean), per kind.
        import re as _re
        for kind in sorted({s["kind"] for s in self.sessions if s["experiment"] == "ab"}):
            ss = [s for s in self.sessions if s["experiment"] == "ab" and s["kind"] == kind]
            reps, secs, rounds, extended = [], [], [], []
            for s in ss:
                note = s.get("adaptive", "")
                m = _re.search(r"(\d+) extra repetitions, ([\d.]+) s", note)
                reps.append(int(m.group(1)) if m else 0)
                secs.append(float(m.group(2)) if m else 0.0)
                m = _re.search(r"(\d+) undecided benchmark\(s\) re-measured in (\d+) extra round", note)
                extended.append(int(m.group(1)) if m else 0)
                rounds.append(int(m.group(2)) if m else 0)
            if ss and any(s.get("adaptive") for s in ss):
                costs[f"adaptive ab/{kind}"] = {
                    "sessions": len(ss), "mean_extended": sum(extended) / len(ss),
                    "mean_extra_rounds": sum(rounds) / len(ss), "max_extra_rounds": max(rounds),
                    "mean_adaptive_repetitions": sum(reps) / len(ss), "mean_adaptive_s": sum(secs) / len(ss),
                    "median_session_wall_s": median([s["wall"] for s in ss])}
        confirm = [s["confirm"] for s in self.sessions if s.get("confirm")]
        # Confirm-step cost per mode and kind: extra repetitions and seconds vs the main measurement.
        import re
        for mode in ("run", "run+build"):
            for kind in ("aa", "slow10"):
                ss = [s for s in self.sessions if s["experiment"] == mode and s["kind"] == kind]
                if not ss:
                    continue
                extra_reps, extra_s, main_reps, main_s = [], [], [], []
                for s in ss:
                    m = re.search(r"(\d+) extra repetitions, ([\d.]+) s", s.get("confirm", ""))
                    extra_reps.append(int(m.group(1)) if m else 0)
                    extra_s.append(float(m.group(2)) if m else 0.0)
                    mm = re.search(r"(\d+) repetitions, ([\d.]+) s", s.get("measured", ""))
                    if mm:
                        main_reps.append(int(mm.group(1)))
                        main_s.append(float(mm.group(2)))
                costs[f"confirm {mode}/{kind}"] = {
                    "sessions": len(ss), "mean_extra_repetitions": sum(extra_reps) / len(ss),
                    "mean_extra_s": sum(extra_s) / len(ss),
                    "mean_main_repetitions": sum(main_reps) / len(main_reps) if main_reps else float("nan"),
                    "mean_main_s": sum(main_s) / len(main_s) if main_s else float("nan")}
        return rows, costs, confirm

    def write(self):
        rows, costs, confirm = self.summarise()
        a = self.a
        doc = {"suite": a.suite, "settings": vars(a), "rows": rows, "costs": costs, "confirm_notes": confirm,
               "trials": self.trials, "sessions": self.sessions}
        with open(os.path.join(self.out, "results.json"), "w") as f:
            json.dump(doc, f, indent=1, default=str)

        def pct(r):
            if not r or not r["n"]:
                return "-"
            lo, hi = r["ci95"]
            return f"{r['k']}/{r['n']} = {100 * r['rate']:.1f}% [{100 * lo:.1f}, {100 * hi:.1f}]"

        md = [f"Suite `{a.suite}`, {a.rounds} rounds x {a.repetitions} repetitions per side"
              f"{', SCHED_FIFO (--realtime)' if a.realtime else ', normal priority'}"
              f"{', pinned to CPU(s) ' + a.pin_cpus if a.pin_cpus else ''}"
              f"{', rule flags ' + ' '.join(a.rule) if a.rule else ', default rule'}"
              f"{', min time ' + str(a.min_time) + ' s' if a.min_time else ''}"
              f"{', filter ' + a.filter if a.filter else ''}; counts are benchmark comparisons, "
              "rates with Wilson 95% intervals.", "",
              "| experiment | comparisons | perfgate: regression | perfgate: noisy | compare.py rule (U p<0.05) | median > 5% |",
              "| --- | ---: | --- | --- | --- | --- |"]
        for r in rows:
            md.append(f"| {r['label']} | {r['n']} | {pct(r['perfgate'])} | {pct(r['noisy'])} | "
                      f"{pct(r.get('compare_py'))} | {pct(r.get('median5'))} |")
        md += ["", "| sessions | count | median wall (s) | total wall (s) |", "| --- | ---: | ---: | ---: |"]
        for k, c in costs.items():
            if "median_wall_s" in c:
                md.append(f"| {k} | {c['sessions']} | {c['median_wall_s']:.1f} | {c['total_wall_s']:.0f} |")
        md += ["", "| confirm step | sessions | extra repetitions (mean) | extra s (mean) | main measurement: repetitions, s (mean) |",
               "| --- | ---: | ---: | ---: | --- |"]
        for k, c in costs.items():
            if "mean_extra_s" in c:
                md.append(f"| {k} | {c['sessions']} | {c['mean_extra_repetitions']:.0f} | {c['mean_extra_s']:.1f} | "
                          f"{c['mean_main_repetitions']:.0f}, {c['mean_main_s']:.1f} |")
        ad = [(k, c) for k, c in costs.items() if "mean_adaptive_s" in c]
        if ad:
            md += ["", "| adaptive extra rounds (ab) | sessions | benchmarks extended (mean) | extra rounds (mean / max) | "
                   "extra repetitions (mean) | extra s (mean) | session wall, median (s) |",
                   "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
            for k, c in ad:
                md.append(f"| {k} | {c['sessions']} | {c['mean_extended']:.2f} | {c['mean_extra_rounds']:.1f} / "
                          f"{c['max_extra_rounds']} | {c['mean_adaptive_repetitions']:.0f} | {c['mean_adaptive_s']:.1f} | "
                          f"{c['median_session_wall_s']:.1f} |")
        # Per benchmark: where the misses are.
        names = sorted({t["benchmark"] for t in self.trials if t["experiment"] == "ab"})
        cols = [("A/A @5%", ("aa", "aa2"), "verdict_thr5"), ("+10% @5%", ("slow10",), "verdict_thr5"),
                ("+5% @2%", ("slow5",), "verdict_thr2"), ("A/A @2%", ("aa", "aa2"), "verdict_thr2")]
        if names:
            md += ["", "Per benchmark (ab): regression / noisy / comparisons", "",
                   "| benchmark | " + " | ".join(c[0] for c in cols) + " |", "| --- |" + " ---: |" * len(cols)]
            for name in names:
                cells = []
                for _, kinds, key in cols:
                    ts = [t for t in self.trials if t["experiment"] == "ab" and t["benchmark"] == name
                          and t["kind"] in kinds and t.get(key)]
                    cells.append(f"{sum(1 for t in ts if t[key] == 'regression')} / "
                                 f"{sum(1 for t in ts if t[key] == 'noisy')} / {len(ts)}")
                md.append(f"| {name} | " + " | ".join(cells) + " |")
        if confirm:
            md += ["", "Confirm step, as reported by `perfgate run` (first 6):", ""]
            md += [f"- {c}" for c in confirm[:6]]
        text = "\n".join(md) + "\n"
        with open(os.path.join(self.out, "results.md"), "w") as f:
            f.write(text)
        print(text)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default="build/runner", help="build folder with bin/perfgate and bin/bench_<suite>")
    p.add_argument("--suite", default="synthetic", choices=sorted(SLOWDOWN_ENV))
    p.add_argument("--out", default="build/proof")
    p.add_argument("--aa", type=int, default=34, help="A/A ab sessions at the default threshold")
    p.add_argument("--slow10", type=int, default=20, help="+10%% ab sessions at the default threshold")
    p.add_argument("--aa2", type=int, default=34, help="A/A ab sessions at threshold 2%%")
    p.add_argument("--slow5", type=int, default=20, help="+5%% ab sessions at threshold 2%%")
    p.add_argument("--run-sessions", type=int, default=6, help="perfgate run sessions per kind and mode")
    p.add_argument("--cost-sessions", type=int, default=3)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--repetitions", type=int, default=4)
    p.add_argument("--min-time", type=float, default=0.01)
    p.add_argument("--filter", default="")
    p.add_argument("--env", action="append", default=[], help="KEY=VALUE for every bench process")
    p.add_argument("--realtime", action="store_true", help="bench processes run SCHED_FIFO (perfgate --realtime)")
    p.add_argument("--pin-cpus", default="", help="bench processes run on these CPUs only (perfgate --pin-cpus)")
    p.add_argument("--rule", default="", help="rule flags for ab/run/compare alike, e.g. '--run-noise 0.01'")
    p.add_argument("--session-flags", default="",
                   help="flags for perfgate ab / run only, e.g. '--max-extra-rounds 0' (the rule before adaptive rounds)")
    p.add_argument("--max-minutes", type=float, default=30, help="stop starting new sessions after this")
    p.add_argument("--summarise-only", action="store_true", help="rewrite the tables from <out>/results.json")
    a = p.parse_args()
    a.rule = a.rule.split()
    a.session_flags = a.session_flags.split()

    e = Experiment(a)
    if a.summarise_only:
        with open(os.path.join(e.out, "results.json")) as f:
            doc = json.load(f)
        e.trials, e.sessions = doc["trials"], doc["sessions"]
        e.recompute_rules()
        e.write()
        return
    t0 = time.monotonic()
    # Kinds interleaved in time, so load changes of the machine hit every kind alike. Without
    # `perfgate compare --paired` each threshold needs its own sessions: aa/slow10 at the default
    # threshold, aa2/slow5 at 2%; with it every session is judged at both.
    kinds = {"aa": (0.0, None), "slow10": (0.10, None), "aa2": (0.0, 0.02), "slow5": (0.05, 0.02)}
    counts = {"aa": a.aa, "slow10": a.slow10, "aa2": a.aa2, "slow5": a.slow5}
    plan = []
    while any(counts.values()):
        for kind in ("aa", "slow10", "aa2", "slow5"):
            if counts[kind] > 0:
                plan.append(kind)
                counts[kind] -= 1
    for idx, kind in enumerate(plan):
        if time.monotonic() - t0 > a.max_minutes * 60:
            log("time budget reached: stopping ab sessions")
            break
        e.ab_session(idx, kind, *kinds[kind])
    e.stored_pairs()
    if a.run_sessions:
        e.run_sessions(a.run_sessions)
    if a.cost_sessions:
        e.interleave_cost(a.cost_sessions)
    e.write()
    log(f"done in {(time.monotonic() - t0) / 60:.1f} min; {os.path.join(e.out, 'results.md')}")


if __name__ == "__main__":
    main()
