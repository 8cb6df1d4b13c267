#!/usr/bin/env python3
"""Summary of lab/tools/ep_planted_calibration.sh: per benchmark, how much slower the planted side ran.

Reads OUT_DIR/round<K>-unplanted.json and round<K>-planted.json (Google Benchmark JSON). Within a round, each
side's time is the median of its repetitions; the ratio planted / unplanted of that round pairs the two
processes that ran back to back, so that drift between rounds cancels. Prints per benchmark the median of the
rounds' ratios - 1 in percent, each round's, and the planted share the bench reports (planted.share).
Exit status 1 when a benchmark has no round with both sides, else 0.
"""

import argparse
import json
import re
import statistics
import sys
from pathlib import Path

_UNIT_S = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}


def read_side(path):
    """{benchmark: ([seconds per repetition], planted share or None)} of one process's JSON."""
    data = json.loads(path.read_text())
    out = {}
    for b in data.get("benchmarks", []):
        if b.get("run_type", "iteration") != "iteration" or b.get("error_occurred"):
            continue
        name = b.get("run_name", b["name"])
        times, share = out.setdefault(name, ([], None))
        times.append(float(b["real_time"]) * _UNIT_S[b.get("time_unit", "ns")])
        if "planted.share" in b:
            share = float(b["planted.share"])
        out[name] = (times, share)
    return out


def load(out_dir):
    """{round: {"unplanted": side, "planted": side}} of every round whose two files exist."""
    rounds = {}
    for path in sorted(Path(out_dir).glob("round*-*planted.json")):
        m = re.fullmatch(r"round(\d+)-(unplanted|planted)\.json", path.name)
        if not m:
            continue
        try:
            rounds.setdefault(int(m.group(1)), {})[m.group(2)] = read_side(path)
        except (OSError, ValueError, KeyError) as e:
            print(f"warning: {path}: {e}", file=sys.stderr)
    return {k: v for k, v in sorted(rounds.items()) if len(v) == 2}


def summarize(rounds):
    """[(benchmark, [round ratio], share)] for every benchmark seen on either side, sorted by name."""
    names = sorted({n for r in rounds.values() for side in r.values() for n in side})
    rows = []
    for name in names:
        ratios, shares = [], []
        for r in rounds.values():
            base, planted = r["unplanted"].get(name), r["planted"].get(name)
            if not base or not planted:
                continue
            ratios.append(statistics.median(planted[0]) / statistics.median(base[0]))
            if planted[1] is not None:
                shares.append(planted[1])
        rows.append((name, ratios, statistics.median(shares) if shares else None))
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir")
    parser.add_argument("--fraction", type=float, default=None, help="the planted fraction, for the header")
    args = parser.parse_args(argv)
    rounds = load(args.out_dir)
    if not rounds:
        print(f"error: no round with both sides in {args.out_dir}", file=sys.stderr)
        return 1
    rows = summarize(rounds)
    target = f", nominal +{100 * args.fraction:.1f}%" if args.fraction is not None else ""
    print(f"planted vs unplanted, {len(rounds)} round(s){target}: median over rounds of the per-round ratio - 1")
    width = max(len(n) for n, _, _ in rows)
    missing = 0
    for name, ratios, share in rows:
        if not ratios:
            print(f"{name:<{width}}  (no round with both sides)")
            missing += 1
            continue
        each = " ".join(f"{100 * (x - 1):+.1f}" for x in ratios)
        share_text = f"  share {100 * share:.2f}%" if share is not None else ""
        print(f"{name:<{width}}  {100 * (statistics.median(ratios) - 1):+6.2f}%  (rounds: {each}){share_text}")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
