#!/usr/bin/python3
"""Evidence for the gate with learned noise (lab/results/history-notebook.md, "Evidence on the CPU runner"): stored-baseline verdicts with the
class prior ("before") and with the noise learned from a history of real sessions ("after"), side by side.

Input: a folder of sessions measured by lab/tools/record_sessions.sh: <sessions>/<label>-NN/runs/<suite>.current.json
and session.txt. Labels starting with "aa" are unchanged code; "p10" and "p5" carry a planted +10% / +5%
slowdown (PERFGATE_SYNTHETIC_SLOWDOWN, PERFGATE_LORA_SLOWDOWN).

  A/A        every A/A session but the first is compared with the first (the stored baseline, as
             `ci/perf.sh --update-baseline` records it), per suite, once with the class prior and once with
             --history: a history of every *other* A/A session (leave one out: the session judged never
             teaches the noise it is judged with).
  detection  every planted session against the same baseline, the prior and a history of all A/A sessions.
  changes    `perfgate history changes` on (a) the A/A sessions alone (every change point is false) and (b) every
             A/A session followed by the planted ones, +5% then +10% (a creep: every gated series of a slowed
             benchmark should show a change at the first planted session).

  gate       with --gate-runs DIR: the verdicts of real `perfgate run` sessions of the stored gate (confirm step
             included) in DIR/*/perf-report.json, e.g. A/A sessions run against a baseline folder holding the
             first A/A session as the baseline and the learned-noise snapshot of the others.

Writes <out>/results.json and <out>/results.md and prints the Markdown.

  lab/tools/prove_history_gate.py --build build/ci --sessions /work/evidence/sessions --out build/proof/history \\
      --config baselines/cpu-epyc-avx512-2c/thresholds.json
"""
import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import time

from import_records import session_info  # lab/tools/import_records.py: session.txt of lab/tools/record_sessions.sh


def log(msg):
    print(f"[prove-history {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def run(cmd, ok=(0, 1)):
    p = subprocess.run([str(c) for c in cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode not in ok:
        raise SystemExit(f"command failed ({p.returncode}): {' '.join(map(str, cmd))}\n{p.stderr[-3000:]}")
    return p


def read_session(folder):
    info = session_info(folder)
    info["folder"] = folder
    info["name"] = os.path.basename(folder)
    info["runs"] = sorted(glob.glob(os.path.join(folder, "runs", "*.current.json")))
    return info


def suite_files(session):
    return {os.path.basename(f).split(".")[0]: f for f in session["runs"]}


def record(perfgate, db, sessions):
    if os.path.exists(db):
        os.remove(db)
    for s in sessions:
        run([perfgate, "history", "record", "--db", db, "--commit", s["commit"], "--branch", s["label"],
             "--time", s["time"], *s["runs"]], ok=(0,))


def judge(perfgate, baseline, current, config, history, out_json, extra=(), noise=""):
    """Per-suite verdicts of current against baseline: {benchmark: (verdict, change, detectable, learned)}; learned
    noise from `history` (a results history) or `noise` (a noise.json snapshot), else the class prior; `extra`: more
    `perfgate compare` flags."""
    verdicts = {}
    base, cur = suite_files(baseline), suite_files(current)
    for suite in sorted(set(base) & set(cur)):
        cmd = [perfgate, "compare", base[suite], cur[suite], "--quiet", "--json", out_json]
        cmd += ["--config", config] if config else ["--no-config"]
        cmd += ["--history", history] if history else ["--noise", noise] if noise else ["--no-learned-noise"]
        cmd += list(extra)
        run(cmd, ok=(0, 1, 77))  # 77: nothing could be judged to its threshold (every benchmark noisy), a verdict too
        with open(out_json) as f:
            report = json.load(f)
        for b in report["benchmarks"]:
            learned = any(m.get("learned_noise") for m in b["metrics"])
            time_metric = next((m for m in b["metrics"] if m["name"] == "time"), None)
            verdicts[b["name"]] = (b["verdict"], time_metric["change"] if time_metric else None,
                                   b.get("detectable_change"), learned)
    return verdicts


def slowed(name):
    """Benchmarks the planted slowdown reaches (the calibration kernels of lora_backward do not change)."""
    return "/calibration/" not in name


def tally(rows, kind):
    counts = {}
    for r in rows:
        counts[r[kind]] = counts.get(r[kind], 0) + 1
    return counts


def median(xs):
    s = sorted(x for x in xs if x is not None)
    if not s:
        return None
    n = len(s)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def changes(perfgate, db, out_json):
    run([perfgate, "history", "changes", "--db", db, "--json", out_json, "--quiet"], ok=(0,))
    with open(out_json) as f:
        return json.load(f)["changes"]


def tally_gate_runs(folder):
    """Markdown table of the verdicts of perfgate run sessions (folder/*/perf-report.json)."""
    lines = ["| session | exit | benchmarks | regression | noisy | unchanged | judged with a learned band |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    total = {"benchmarks": 0, "regression": 0, "noisy": 0, "unchanged": 0}
    for report in sorted(glob.glob(os.path.join(folder, "*", "perf-report.json"))):
        with open(report) as f:
            r = json.load(f)
        judged = [b for b in r["benchmarks"] if b["verdict"] not in ("skipped", "failed", "new", "missing")]
        counts = {v: sum(1 for b in judged if b["verdict"] == v) for v in ("regression", "noisy", "unchanged")}
        learned = sum(1 for b in judged if any(m.get("learned_noise") for m in b["metrics"]))
        total["benchmarks"] += len(judged)
        for v in counts:
            total[v] += counts[v]
        lines.append(f"| {os.path.basename(os.path.dirname(report))} | {r['exit_code']} | {len(judged)} | "
                     f"{counts['regression']} | {counts['noisy']} | {counts['unchanged']} | {learned} |")
    lines.append(f"| all | | {total['benchmarks']} | {total['regression']} | {total['noisy']} | {total['unchanged']} | |")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", required=True)
    ap.add_argument("--sessions", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--config", default="", help="thresholds.json of the class (the prior 'before' uses)")
    ap.add_argument("--gate-runs", default="", help="only tally the perfgate run sessions in this folder")
    a = ap.parse_args()
    if a.gate_runs:
        print(tally_gate_runs(a.gate_runs))
        return
    perfgate = os.path.join(a.build, "bin", "perfgate")
    os.makedirs(a.out, exist_ok=True)
    sessions = [read_session(d) for d in sorted(glob.glob(os.path.join(a.sessions, "*-*"))) if os.path.isdir(d)]
    sessions = [s for s in sessions if s["runs"]]
    sessions.sort(key=lambda s: s["time"])
    aa = [s for s in sessions if s["label"].startswith("aa")]
    planted = [s for s in sessions if s["label"].startswith("p")]
    if len(aa) < 7:
        raise SystemExit(f"need at least 7 A/A sessions, have {len(aa)}")
    baseline = aa[0]
    log(f"{len(aa)} A/A sessions, {len(planted)} planted; baseline {baseline['name']}")
    tmp_json = os.path.join(a.out, "compare.json")

    aa_rows = []
    for s in aa[1:]:
        db = os.path.join(a.out, "loo.db")
        record(perfgate, db, [x for x in aa if x is not s])
        before = judge(perfgate, baseline, s, a.config, "", tmp_json)
        after = judge(perfgate, baseline, s, a.config, db, tmp_json)
        for name in sorted(before):
            aa_rows.append({"session": s["name"], "benchmark": name, "before": before[name][0], "after": after[name][0],
                            "change": before[name][1], "detectable_before": before[name][2],
                            "detectable_after": after[name][2], "learned": after[name][3]})
        log(f"A/A {s['name']}: before {tally([r for r in aa_rows if r['session'] == s['name']], 'before')}, "
            f"after {tally([r for r in aa_rows if r['session'] == s['name']], 'after')}")

    full_db = os.path.join(a.out, "aa.db")
    record(perfgate, full_db, aa)
    det_rows = []
    for s in planted:
        before = judge(perfgate, baseline, s, a.config, "", tmp_json)
        after = judge(perfgate, baseline, s, a.config, full_db, tmp_json)
        for name in sorted(before):
            if not slowed(name):
                continue
            det_rows.append({"session": s["name"], "planted": s["label"].split("-")[0], "benchmark": name,
                             "before": before[name][0], "after": after[name][0], "change": before[name][1],
                             "detectable_before": before[name][2], "detectable_after": after[name][2],
                             "learned": after[name][3]})

    aa_changes = changes(perfgate, full_db, os.path.join(a.out, "aa_changes.json"))
    half = aa
    creep = [x for x in planted if x["label"].startswith("p5")] + [x for x in planted if x["label"].startswith("p10")]
    step_db = os.path.join(a.out, "creep.db")
    step_changes = []
    if len(creep) >= 3:
        # Every A/A session first, then the planted ones in creep order (+5% sessions, then +10%): the sessions
        # are re-timed in that order, one minute apart, from the first A/A session's time.
        ordered = [dict(x) for x in half] + [dict(x) for x in creep]
        start = int(time.mktime(time.strptime(half[0]["time"], "%Y-%m-%dT%H:%M:%SZ")))
        for i, x in enumerate(ordered):
            x["time"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.localtime(start + 60 * i))
        record(perfgate, step_db, ordered)
        step_changes = changes(perfgate, step_db, os.path.join(a.out, "creep_changes.json"))
    shutil.copy(full_db, os.path.join(a.out, "history.db"))

    results = {"baseline": baseline["name"], "aa_sessions": [s["name"] for s in aa],
               "planted_sessions": [s["name"] for s in planted], "aa": aa_rows, "detection": det_rows,
               "aa_changes": aa_changes, "creep_changes": step_changes,
               "creep_sessions": [x["name"] for x in half] + [x["name"] for x in creep]}
    with open(os.path.join(a.out, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    md = render(results)
    with open(os.path.join(a.out, "results.md"), "w") as f:
        f.write(md)
    print(md)


def render(r):
    lines = [f"Baseline: session `{r['baseline']}`; A/A sessions: {len(r['aa_sessions'])}; planted: "
             f"{', '.join(r['planted_sessions']) or 'none'}.", ""]
    aa = r["aa"]
    n = len(aa)
    lines += ["| A/A comparisons | before (class prior) | after (learned noise) |", "| --- | ---: | ---: |"]
    for verdict in ("regression", "noisy", "unchanged", "improvement"):
        b = sum(1 for x in aa if x["before"] == verdict)
        a = sum(1 for x in aa if x["after"] == verdict)
        lines.append(f"| {verdict} | {b}/{n} | {a}/{n} |")
    lines.append(f"| judged with a learned band | | {sum(1 for x in aa if x['learned'])}/{n} |")
    lines.append("")
    det = r["detection"]
    if det:
        lines += ["| planted | comparisons | found before | found after | median detectable before | after |",
                  "| --- | ---: | ---: | ---: | ---: | ---: |"]
        for planted in sorted({x["planted"] for x in det}):
            rows = [x for x in det if x["planted"] == planted]
            fb = sum(1 for x in rows if x["before"] == "regression")
            fa = sum(1 for x in rows if x["after"] == "regression")
            db = median([x["detectable_before"] for x in rows])
            da = median([x["detectable_after"] for x in rows])
            fmt = lambda v: "-" if v is None else f"{100 * v:+.1f}%"
            lines.append(f"| {planted} | {len(rows)} | {fb} | {fa} | {fmt(db)} | {fmt(da)} |")
        lines.append("")
        lines += ["Per benchmark (after / before, over the planted sessions):", "",
                  "| benchmark | " + " | ".join(sorted({x['planted'] for x in det})) + " |",
                  "| --- |" + " ---: |" * len({x['planted'] for x in det})]
        for name in sorted({x["benchmark"] for x in det}):
            cells = []
            for planted in sorted({x["planted"] for x in det}):
                rows = [x for x in det if x["benchmark"] == name and x["planted"] == planted]
                cells.append(f"{sum(1 for x in rows if x['after'] == 'regression')}/"
                             f"{sum(1 for x in rows if x['before'] == 'regression')} of {len(rows)}")
            lines.append(f"| `{name}` | " + " | ".join(cells) + " |")
        lines.append("")
    lines.append(f"Change points on the A/A history ({len(r['aa_sessions'])} sessions): {len(r['aa_changes'])} "
                 "(every one is false).")
    if r["creep_sessions"]:
        found = {(c["benchmark"], c["metric"]) for c in r["creep_changes"]}
        lines.append(f"Creep history ({', '.join(r['creep_sessions'])}): {len(r['creep_changes'])} change points on "
                     f"{len({c['benchmark'] for c in r['creep_changes']})} benchmarks; "
                     f"{len({b for b, m in found if m == 'time'})} benchmarks with a change of their time.")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
