#!/usr/bin/env python3
"""Per-kernel duration, DRAM rate and DRAM bytes (rate x duration) from `ncu` text output with the SpeedOfLight
section, one row per profiled launch; with --sum FIRST:LAST (1-based, inclusive) also the sum over those launches.

  python3 lab/tools/ncu_bytes.py NCU.txt [--sum 1:5 ...]
"""
import re
import sys


def launches(text):
    """(kernel, duration ms, DRAM TB/s, L2 throughput %, L2 hit %) per profiled launch, in order."""
    out = []
    for block in re.split(r"\n  (?=\S.*\(\d+, \d+, \d+\)x\()", text)[1:]:
        name = block.split("(")[0].strip()
        dur = re.search(r"Duration\s+(us|ms)\s+([\d.,]+)", block)
        rate = re.search(r"Memory Throughput\s+(Gbyte|Tbyte)/s\s+([\d.,]+)", block)
        l2 = re.search(r"L2 Cache Throughput\s+%\s+([\d.]+)", block)
        hit = re.search(r"L2 Hit Rate\s+%\s+([\d.]+)", block)
        if not (dur and rate):
            continue
        ms = float(dur.group(2).replace(",", "")) / (1000.0 if dur.group(1) == "us" else 1.0)
        tbs = float(rate.group(2).replace(",", "")) / (1000.0 if rate.group(1) == "Gbyte" else 1.0)
        out.append((name, ms, tbs, float(l2.group(1)) if l2 else float("nan"), float(hit.group(1)) if hit else float("nan")))
    return out


def launch_sum(rows, first, last):
    """(ms, DRAM GB) summed over launches first..last, 1-based and inclusive."""
    part = rows[first - 1:last]
    return sum(r[1] for r in part), sum(r[1] * r[2] for r in part)


def main():
    rows = launches(open(sys.argv[1]).read())
    print("| # | kernel | ms | DRAM TB/s | DRAM GB | L2 throughput % | L2 hit % |")
    print("| ---: | --- | ---: | ---: | ---: | ---: | ---: |")
    for i, (name, ms, tbs, l2, hit) in enumerate(rows, 1):
        print(f"| {i} | `{name}` | {ms:.3f} | {tbs:.2f} | {ms * tbs:.2f} | {l2:.1f} | {hit:.1f} |")
    args = sys.argv[2:]
    for spec in (args[i + 1] for i, a in enumerate(args) if a == "--sum"):
        first, last = (int(x) for x in spec.split(":"))
        ms, gb = launch_sum(rows, first, last)
        print(f"\nlaunches {first}-{last}: {ms:.3f} ms, {gb:.2f} GB of DRAM traffic, {gb / ms:.2f} TB/s")


if __name__ == "__main__":
    main()
