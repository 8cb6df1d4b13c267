#!/usr/bin/python3
"""Issue 28's evidence tables from GPU sessions recorded by lab/tools/record_gpu_evidence.sh, on any machine.

Input: a folder of sessions <label>-<machine>/ (runs/<suite>.current.json and session.txt), where <label> is "aa"
(unchanged code: the main job's runs) or "pNN" (a planted +NN% slowdown of the stable benchmarks) and <machine>
names the fresh machine (one device-tool call) that measured it. Sessions of one machine's GPU groups
(lab/tools/record_gpu_groups.sh) are named <label>-<machine>-g<K>: each is its own session, but a leave-one-machine-out
judgement leaves out the whole host (the other groups of that call, and any call that got the same GPU again, by the
serial in session.txt), so that no session is judged against a neighbour or an earlier lease of the same GPUs.

  stored     every session against the stored baseline (--baseline-dir, e.g. baselines/gpu-h100-x1), per suite,
             with the class prior: the stored-baseline gate's first look, before its confirm step.
  stored-noise  the same with a learned-noise snapshot (--stored-noise FILE): the main job's look with the class's
             noise.json, or with a candidate one learned from other sessions.
  learned    the same with --history of the *other* machines' A/A sessions (leave one machine out), once at least
             --min-history of them exist: the gate with learned noise.
  pooled     as learned, against a baseline pooled from the other machines' A/A sessions (leave one machine out;
             `perfgate baseline update --from` of their run files) instead of the stored snapshot of one machine.
  same       each planted session against the A/A session of its own machine, with the class prior: what the
             comparison sees without the machine-to-machine spread.
  widths     per benchmark, the median detectable change of the A/A sessions with the prior and with learned noise
             (the interval's half-width plus the threshold): the before/after table of interval widths.
  spread     per benchmark, the session level (median of the process-run medians of the time) of every A/A machine and
             of the stored baseline's: each one's deviation from their mean and their SD, the between-machine noise
             that learned noise will measure, with the interval half-width it would give from 8 sessions.

  lab/tools/judge_gpu_sessions.py --build build/ci --sessions lab/records/device/2026-11-25_h100-x1_evidence/sessions.tgz \\
      lab/records/device/2026-11-26_h100-x1_evidence/sessions.tgz --baseline-dir baselines/gpu-h100-x1 --out build/proof/gpu

With --mark KEY=REGEX (e.g. perfgate.floor_bound=...), sessions recorded before their suite wrote that mark are judged
as the suite marks its benchmarks today: copies of their run files in <out>/marked/ get it in every context that lacks
it, for the comparisons, the pooled baselines and the histories alike.

With --write-noise ROOT it also records every A/A session into <out>/history-aa.db and writes the class's learned-noise
snapshot ROOT/<class>/noise.json from it (`perfgate baseline update --history`); a band replaces the prior only with
at least 5 sessions, and the command's line says how many series have that many.

Writes <out>/results.json and <out>/results.md and prints the Markdown.
"""
import argparse
import glob
import json
import math
import os
import re
import subprocess

from pool_baseline import common_runs, update_baselines
from prove_history_gate import judge, median, read_session, record, suite_files
from session_archives import session_roots


def machine_of(session):
    return session["name"].split("-", 1)[1] if "-" in session["name"] else session["name"]


def assign_hosts(sessions):
    """Sets each session's "host": sessions of one device call (any GPU group, -g<K>) or with the same first GPU (a
    machine lent again later) are one host, named after its first call, so that a leave-one-machine-out judgement
    leaves all of them out."""
    parent = {}

    def find(x):
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x

    for s in sessions:
        call = re.sub(r"-g\d+$", "", machine_of(s))
        keys = [call] + ([f"gpu {s['gpu']}"] if s.get("gpu") else [])
        for key in keys:
            a, b = sorted((find(call), find(key)), key=lambda k: (k.startswith("gpu "), k))
            parent[b] = a
    for s in sessions:
        s["host"] = find(re.sub(r"-g\d+$", "", machine_of(s)))


def stored_session(baseline_dir):
    """The stored baseline folder seen as a session: {suite: file}."""
    runs = sorted(f for f in glob.glob(os.path.join(baseline_dir, "*.json")) if not f.endswith(("thresholds.json",
                                                                                               "noise.json")))
    return {"name": "stored", "runs": runs}


def config_of(baseline_dir):
    path = os.path.join(baseline_dir, "thresholds.json")
    return path if os.path.exists(path) else None


def marked(session, marks, out):
    """The session, its run files replaced by copies whose contexts carry every mark ({key: pattern}) they lack."""
    if not marks:
        return session
    folder = os.path.join(out, "marked", session["name"])
    os.makedirs(folder, exist_ok=True)
    runs = []
    for path in session["runs"]:
        with open(path) as f:
            data = json.load(f)
        for context in [data.get("context", {})] + data.get("perfgate_process_runs", []):
            for key, pattern in marks.items():
                context.setdefault(key, pattern)
        runs.append(os.path.join(folder, os.path.basename(path)))
        with open(runs[-1], "w") as f:
            json.dump(data, f)
    return dict(session, runs=runs)


def completed(session, aa, out):
    """A planted session that measured only the stable benchmarks, as the main job would have measured it: each suite's
    run file gets the benchmarks it lacks from the A/A session of the same host (unplanted code there, as in the
    main job), in the same process-run slots. Without them a suite whose every measured benchmark was planted moves
    as a whole, and the learned gate takes that move out as the suite's common mode (statistics.md)."""
    own = [x for x in aa if x["host"] == session["host"]]
    if session["label"] == "aa" or not own:
        return session
    folder = os.path.join(out, "completed", session["name"])
    os.makedirs(folder, exist_ok=True)
    theirs, runs, measured = suite_files(own[0]), [], set()
    for path in session["runs"]:
        with open(path) as f:
            data = json.load(f)
        suite = os.path.basename(path).split(".")[0]
        if suite in theirs:
            with open(theirs[suite]) as f:
                extra = json.load(f)["benchmarks"]
            have = {b["name"] for b in data["benchmarks"]}
            measured |= {n.removesuffix("/manual_time") for n in have}
            slots = {b.get("perfgate_process_run", 0) for b in data["benchmarks"]}
            data["benchmarks"] += [b for b in extra if b["name"] not in have and b.get("perfgate_process_run", 0) in slots]
        runs.append(os.path.join(folder, os.path.basename(path)))
        with open(runs[-1], "w") as f:
            json.dump(data, f)
    return dict(session, runs=runs, name=session["name"] + "+aa", measured=measured)


def judge_rows(perfgate, baseline, session, config, history, scratch, kind, extra=(), noise=""):
    """Every compared benchmark's verdict, judged as `perfgate run` judges against a stored baseline from another
    machine (`perfgate compare --across-hosts`: host-dependent benchmarks are reported, not gated); `extra`: more
    `perfgate compare` flags (--noise-min-sessions N for the learned kinds); `noise`: a noise.json to judge with."""
    rows = []
    for name, (verdict, change, detectable, learned) in judge(perfgate, baseline, session, config, history,
                                                              scratch, ["--across-hosts", *extra], noise).items():
        if verdict in ("missing", "new", "skipped", "failed"):
            continue
        if "measured" in session and name.removesuffix("/manual_time") not in session["measured"]:
            continue  # a completed planted session: only the benchmarks it measured planted are its evidence
        rows.append({"session": session["name"], "label": session["label"], "machine": machine_of(session),
                     "benchmark": name, "kind": kind, "verdict": verdict, "change": change,
                     "detectable": detectable, "learned": learned})
    return rows


def learned_history(perfgate, out, aa, machine, cache):
    """The history of every other machine's A/A session (leave one machine out), recorded once per machine."""
    if machine not in cache:
        cache[machine] = os.path.join(out, f"history-without-{machine}.db")
        record(perfgate, cache[machine], [s for s in aa if s["host"] != machine])
    return cache[machine]


def pooled_baseline(perfgate, out, aa, machine, machine_class, cache):
    """A baseline session pooled from every other machine's A/A runs (leave one machine out), written once per machine
    with `perfgate baseline update`, as a class's baselines/<class>/ would be."""
    if machine not in cache:
        root = os.path.join(out, f"pooled-without-{machine}")
        others = [s for s in aa if s["host"] != machine]
        update_baselines(perfgate, root, machine_class, common_runs([suite_files(s) for s in others]), quiet=True)
        cache[machine] = {"name": f"pooled-without-{machine}",
                          "runs": sorted(glob.glob(os.path.join(root, machine_class, "*.json")))}
    return cache[machine]


def repetition_times(files):
    """{benchmark: {process run: its repetitions' real times}} of run files (failed repetitions left out)."""
    runs = {}
    for path in files:
        with open(path) as f:
            for b in json.load(f)["benchmarks"]:
                if b.get("run_type", "iteration") != "iteration" or b.get("error_occurred"):
                    continue
                runs.setdefault(b["name"], {}).setdefault(b.get("perfgate_process_run", 0), []).append(b["real_time"])
    return runs


def session_levels(files):
    """{benchmark: the median over process runs of each run's median time} of one session's run files."""
    return {name: median([median(v) for v in by_run.values()]) for name, by_run in repetition_times(files).items()}


T_975_DF8 = 2.306  # Student t quantile (0.975, 8 d.f.): the gate's two-sided 95% interval with 8 learned sessions


def spread_rows(stored, aa, pattern):
    """Per benchmark present on every machine and matching `pattern`: [(machine, log deviation from the mean)], SD of
    the log levels."""
    machines = [("stored", session_levels(stored["runs"]))] if stored["runs"] else []  # a class with none yet
    machines += [(machine_of(s), session_levels(s["runs"])) for s in aa]
    rows = []
    for name in sorted(set.intersection(*(set(levels) for _, levels in machines))):
        if not pattern.search(name):
            continue
        logs = [math.log(levels[name]) for _, levels in machines if levels[name] > 0]
        if len(logs) != len(machines) or len(logs) < 3:
            continue
        mean = sum(logs) / len(logs)
        sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / (len(logs) - 1))
        rows.append((name, [(m, x - mean) for (m, _), x in zip(machines, logs)], sd))
    return rows


def render_spread(stored, aa, pattern):
    rows = spread_rows(stored, aa, pattern)
    if not rows:
        return []
    header = [m for m, _ in rows[0][1]]
    lines = ["## Between-machine spread of the session level (A/A sessions and the stored baseline)", "",
             "| benchmark | " + " | ".join(header) + " | SD | half-width, 8 learned sessions |",
             "| --- | " + " | ".join("---:" for _ in header) + " | ---: | ---: |"]
    for name, devs, sd in rows:
        lines.append(f"| `{name}` | " + " | ".join(f"{100 * d:+.2f}%" for _, d in devs) +
                     f" | {100 * sd:.2f}% | ±{100 * T_975_DF8 * sd * math.sqrt(2):.2f}% |")
    return lines + [""]


GROUPS = [("expert GEMM, DeepSeek-V3", "expert_gemm/ffn/.*/shape:deepseek-v3/"), ("d2d", "transfers/d2d/"),
          ("d2h pinned", "transfers/d2h/pinned/"), ("h2d pinned", "transfers/h2d/pinned/"),
          ("peer copies, 256 MiB", "transfers/peer/on/src:\\d+/dst:\\d+/bytes:268435456"),
          ("dispatch / combine, 4096 tokens, uniform", "expert_parallel/(dispatch|combine)/.*/tokens:4096/routing:uniform"),
          ("serial layers, uniform", "expert_parallel/layer/serial/.*/tokens:4096/routing:uniform"),
          ("streaming steps", "streaming_prefetch/step/")]


def render_groups(rows, kind):
    """Planted sessions found per group of stable benchmarks, and the A/A alarms, under one kind of judgement."""
    lines = [f"## Per group of stable benchmarks (`{kind}`)", "",
             "| sessions | group | comparisons | regression | improvement | median change | median detectable |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    labels = sorted({r["label"] for r in rows}, key=lambda s: -1 if s == "aa" else int(s[1:]))
    for label in labels:
        for group, prefix in GROUPS:
            sel = [r for r in rows if r["label"] == label and r["kind"] == kind and re.match(prefix, r["benchmark"])]
            if not sel:
                continue
            count = {v: sum(1 for r in sel if r["verdict"] == v) for v in ("regression", "improvement")}
            name = "A/A" if label == "aa" else f"+{label[1:]}%"
            lines.append(f"| {name} | {group} | {len(sel)} | {count['regression']} | {count['improvement']} | "
                         f"{pct(median([r['change'] for r in sel]))} | {pct(median([r['detectable'] for r in sel]))} |")
    return lines + [""]


def pct(x):
    return "" if x is None else f"{100 * x:+.1f}%"


def render(rows, aa_count, min_history):
    lines = ["## A/A sessions against the stored baseline", "",
             "| session | kind | benchmarks | regression | noisy | unchanged | median detectable |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for (session, kind) in sorted({(r["session"], r["kind"]) for r in rows if r["label"] == "aa"}):
        sel = [r for r in rows if r["session"] == session and r["kind"] == kind]
        count = {v: sum(1 for r in sel if r["verdict"] == v) for v in ("regression", "noisy", "unchanged")}
        lines.append(f"| {session} | {kind} | {len(sel)} | {count['regression']} | {count['noisy']} | "
                     f"{count['unchanged']} | {pct(median([r['detectable'] for r in sel]))} |")
    if aa_count < min_history + 1:
        lines += ["", f"Learned noise: {aa_count} A/A machine(s); the `learned` column needs at least "
                  f"{min_history} other machines' sessions per judged session, so it is not computed."]
    lines += ["", "## Interval widths per benchmark (A/A sessions): the class prior against learned noise", "",
              "| benchmark | median detectable, prior | median detectable, learned | judged with a learned band |",
              "| --- | ---: | ---: | ---: |"]
    aa_rows = [r for r in rows if r["label"] == "aa"]
    for name in sorted({r["benchmark"] for r in aa_rows}):
        prior = [r["detectable"] for r in aa_rows if r["benchmark"] == name and r["kind"] == "stored"]
        learned = [r for r in aa_rows if r["benchmark"] == name and r["kind"] == "learned"]
        banded = sum(1 for r in learned if r["learned"])
        lines.append(f"| `{name}` | {pct(median(prior))} | {pct(median([r['detectable'] for r in learned]))} | "
                     f"{f'{banded}/{len(learned)}' if learned else ''} |")
    lines += ["", "## Planted sessions", "",
              "| session | benchmark | kind | change | verdict | detectable |", "| --- | --- | --- | ---: | --- | ---: |"]
    for r in sorted((r for r in rows if r["label"] != "aa"), key=lambda r: (r["session"], r["benchmark"], r["kind"])):
        lines.append(f"| {r['session']} | `{r['benchmark']}` | {r['kind']} | {pct(r['change'])} | {r['verdict']} | "
                     f"{pct(r['detectable'])} |")
    lines += ["", "| planted | kind | comparisons | regression (found) | median change | median detectable |",
              "| --- | --- | ---: | ---: | ---: | ---: |"]
    for label in sorted({r["label"] for r in rows if r["label"] != "aa"}, key=lambda s: int(s[1:])):
        for kind in ("stored", "learned", "pooled-prior", "pooled", "same"):
            sel = [r for r in rows if r["label"] == label and r["kind"] == kind]
            if not sel:
                continue
            found = sum(1 for r in sel if r["verdict"] == "regression")
            lines.append(f"| +{label[1:]}% | {kind} | {len(sel)} | {found} | {pct(median([r['change'] for r in sel]))} | "
                         f"{pct(median([r['detectable'] for r in sel]))} |")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", required=True)
    ap.add_argument("--sessions", required=True, nargs="+", help="folders of sessions (one per recording day, say), or session archives (.tgz)")
    ap.add_argument("--baseline-dir", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--min-history", type=int, default=5, help="other machines' A/A sessions the learned column needs")
    ap.add_argument("--noise-min-sessions", type=int, default=0, metavar="N",
                    help="the learned kinds let a band of N sessions replace the prior (perfgate compare "
                         "--noise-min-sessions; default: perfgate's 5). With --min-history below 5, a class with "
                         "few hosts sees what its bands would do; the gate itself keeps noise.json's min_sessions")
    ap.add_argument("--complete-planted", action="store_true",
                    help="judge each planted session with the benchmarks it did not measure taken from its host's A/A "
                         "session (a planted session of the stable set only, lab/tools/record_gpu4_call.sh)")
    ap.add_argument("--write-noise", default="", metavar="ROOT",
                    help="write ROOT/<class>/noise.json learned from the A/A sessions (e.g. baselines)")
    ap.add_argument("--stored-noise", default="", metavar="FILE",
                    help="add the `stored-noise` kind: the stored baseline judged with this learned-noise snapshot, "
                         "as the main job judges with baselines/<class>/noise.json")
    ap.add_argument("--pooled", action="store_true",
                    help="add the `pooled` kind: learned noise against a leave-one-machine-out pooled baseline")
    ap.add_argument("--mark", action="append", default=[], metavar="KEY=REGEX",
                    help="a suite's mark (perfgate.floor_bound=...) for run files recorded before it wrote it")
    ap.add_argument("--spread-filter", default="",
                    help="regex over benchmark names: adds the between-machine spread table for those that match")
    ap.add_argument("--spread-only", action="store_true",
                    help="only the between-machine spread table (a class with no stored baseline or learned noise yet)")
    a = ap.parse_args()
    perfgate = os.path.join(a.build, "bin", "perfgate")
    os.makedirs(a.out, exist_ok=True)
    marks = dict(m.split("=", 1) for m in a.mark)
    sessions = [marked(read_session(f), marks, a.out) for folder in session_roots(a.sessions, a.out)
                for f in sorted(glob.glob(os.path.join(folder, "*"))) if os.path.exists(os.path.join(f, "session.txt"))]
    if not sessions:
        raise SystemExit(f"no sessions (folders with session.txt) in {' '.join(a.sessions)}")
    assign_hosts(sessions)
    aa = [s for s in sessions if s["label"] == "aa"]
    if a.complete_planted:
        sessions = [completed(s, aa, a.out) for s in sessions]
    stored, config = stored_session(a.baseline_dir), config_of(a.baseline_dir)
    if a.spread_only:
        markdown = "\n".join(render_spread(stored, aa, re.compile(a.spread_filter))) + "\n"
        with open(os.path.join(a.out, "spread.md"), "w") as f:
            f.write(markdown)
        print(markdown)
        return
    scratch = os.path.join(a.out, "compare.json")
    rows, histories, pools = [], {}, {}
    machine_class = os.path.basename(os.path.normpath(a.baseline_dir))
    learned_flags = ["--noise-min-sessions", str(a.noise_min_sessions)] if a.noise_min_sessions else []
    for s in sessions:
        if stored["runs"]:
            rows += judge_rows(perfgate, stored, s, config, None, scratch, "stored")
            if a.stored_noise:
                rows += judge_rows(perfgate, stored, s, config, None, scratch, "stored-noise", noise=a.stored_noise)
        if len([x for x in aa if x["host"] != s["host"]]) >= a.min_history:
            history = learned_history(perfgate, a.out, aa, s["host"], histories)
            if stored["runs"]:
                rows += judge_rows(perfgate, stored, s, config, history, scratch, "learned", learned_flags)
            if a.pooled:
                pool = pooled_baseline(perfgate, a.out, aa, s["host"], machine_class, pools)
                rows += judge_rows(perfgate, pool, s, config, None, scratch, "pooled-prior")
                rows += judge_rows(perfgate, pool, s, config, history, scratch, "pooled", learned_flags)
        own = [x for x in aa if machine_of(x) == machine_of(s)]
        if s["label"] != "aa" and own:
            rows += judge_rows(perfgate, own[0], s, config, None, scratch, "same")
    with open(os.path.join(a.out, "results.json"), "w") as f:
        json.dump({"sessions": [s["name"] for s in sessions], "rows": rows}, f, indent=1)
    markdown = render(rows, len({machine_of(x) for x in aa}), a.min_history)
    for kind in ("pooled", "pooled-prior", "learned", "stored-noise"):
        if any(r["kind"] == kind for r in rows):
            markdown += "\n" + "\n".join(render_groups(rows, kind))
    if a.spread_filter:
        markdown += "\n" + "\n".join(render_spread(stored, aa, re.compile(a.spread_filter))) + "\n"
    with open(os.path.join(a.out, "results.md"), "w") as f:
        f.write(markdown)
    print(markdown)
    if a.write_noise:
        db = os.path.join(a.out, "history-aa.db")
        record(perfgate, db, aa)
        subprocess.run([perfgate, "baseline", "update", "--history", db, "--baseline-dir", a.write_noise], check=True)


if __name__ == "__main__":
    main()
