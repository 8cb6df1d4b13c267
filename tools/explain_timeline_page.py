#!/usr/bin/env python3
"""Writes docs/example-explain-timeline.md from the stored device output of tools/explain_timeline_evidence.sh.

    tools/explain_timeline_page.py [DATA_DIR]           (default: docs/examples-data/timeline)
    tools/explain_timeline_page.py --check [DATA_DIR]   exit 1 when the page differs from what it would write

DATA_DIR holds what one device call brought back: machine.txt, summary.txt and one <plant>.tgz per planted
regression (its perfgate ab report, log and explain/ files). Each report and its timeline pictures are
unpacked into DATA_DIR/<plant>/, and the page shows each plant's command, lead line, timeline table and
pictures, with a link to the whole report. Nothing is measured here: rerunning it rewrites the same page.
"""
import re
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "example-explain-timeline.md"

# plant -> (what it plants, whether it changes a kernel)
PLANTS = {
    "lost_overlap": ("`PERFGATE_EXPERT_GEMM_OVERLAP_SERIAL=1`: the light kernel and the cuBLAS calls on one stream", False),
    "host_sync": ("`PERFGATE_EXPERT_GEMM_HOST_SYNC_US=2000`: a host sync and 2 ms of host work after the gate|up GEMMs", False),
    "graphs_off": ("`PERFGATE_EXPERT_GEMM_GRAPHS=0`: direct launches instead of the captured CUDA graph", False),
    "light_ctas": ("`PERFGATE_EXPERT_GEMM_LIGHT_CTAS=8`: the light GEMM kernel on 8 CTAs instead of 52", True),
    "extra_gemm": ("`PERFGATE_GPU_SLOWDOWN=0.5`: the chosen experts' GEMMs run a second time", True),
}


def unpack(data: Path, plant: str) -> Path | None:
    archive = data / f"{plant}.tgz"
    if not archive.exists():
        return None
    target = data / plant
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            name = Path(member.name)
            if member.isfile() and name.suffix in (".md", ".svg") and ".." not in name.parts:
                member.name = str(Path(*name.parts[1:]))
                tar.extract(member, target, filter="data")
    return target


def section(lines: list[str], start: str, stop_blank_lines: int = 2) -> list[str]:
    """The lines from the first one starting with `start` to the `stop_blank_lines`-th blank line after it."""
    out, blanks = [], 0
    for i, line in enumerate(lines):
        if out or line.startswith(start):
            out.append(line)
            blanks += line.strip() == ""
            if blanks >= stop_blank_lines:
                break
    return out


def plant_section(data: Path, plant: str) -> str:
    what, changes_kernel = PLANTS[plant]
    folder = unpack(data, plant)
    head = f"## `{plant}`: {what}\n\n" + ("Changes a kernel.\n\n" if changes_kernel else "Changes no kernel.\n\n")
    reports = sorted(folder.glob("*.md")) if folder else []
    if folder is None:
        return head + "Not run: the device call's time ran out before it ([summary.txt](examples-data/timeline/summary.txt)).\n\n"
    if not reports:
        return head + ("Stopped at the device call's time limit before its report was written "
                       "([summary.txt](examples-data/timeline/summary.txt)).\n\n")
    report = reports[0]
    lines = report.read_text().splitlines()
    text = "\n".join(lines)
    verdict = next((l for l in lines if l.startswith("## perfgate ab")), "(no verdict line)")
    lead = next((l for l in lines if l.startswith("**Likeliest cause:**")), "(no explanation)")
    cost = next((l for l in lines if l.startswith("Cost of this explanation")), "")
    row = next((l for l in lines if re.match(r"\| 1 \| ", l)), "")
    out = head + f"{verdict.lstrip('# ')}\n\n"
    if row:
        out += "| # | verdict | benchmark | metric | baseline | current | change | 95% interval |" + \
            " p (adj.) | threshold | % of ceiling |\n| ---: | --- | --- | --- | ---: | ---: | ---: | --- | ---: | ---: | --- |\n"
        out += row + "\n\n"
    out += f"{lead}\n\n"
    timeline = section(lines, "**GPU timeline", 3)
    if timeline:
        out += "\n".join(timeline) + "\n"
    notes = [l for l in lines if l.startswith("> no GPU timeline")]
    out += "".join(n + "\n" for n in notes)
    for svg in sorted(folder.glob("explain/*.svg"), key=lambda p: ".after." in p.name):
        side = "before" if ".before." in svg.name else "after"
        out += f"![{side}]({svg.relative_to(PAGE.parent).as_posix()})\n"
    out += f"\n{cost}\n"
    m = re.search(r"ncu ([0-9.]+) s, timeline ([0-9.]+) s", cost)
    if m:
        ncu, timeline_s = float(m.group(1)), float(m.group(2))
        out += (f"The explanation's cost: {ncu:.1f} s before this change (ncu alone), {ncu + timeline_s:.1f} s with "
                f"the timeline pass ({100 * timeline_s / ncu:+.0f}%).\n")
    out += f"\nThe whole report: [{report.name}]({report.relative_to(PAGE.parent).as_posix()}).\n\n"
    return out


def main() -> int:
    args = sys.argv[1:]
    check = bool(args) and args[0] == "--check"
    if check:
        args = args[1:]
    data = Path(args[0]) if args else ROOT / "docs" / "examples-data" / "timeline"
    machine = (data / "machine.txt").read_text().strip() if (data / "machine.txt").exists() else "(missing)"
    page = (
        "# Example: `perfgate ab --explain` with the GPU timeline (issue 41)\n\n"
        "Five planted regressions of the expert FFN, each through `perfgate ab --explain` on one lent GPU "
        "machine: three that change no kernel's code (lost overlap, a host sync gap, CUDA graphs off), which "
        "the per-kernel profile alone cannot explain, and two that change a kernel, whose lead line must stay "
        "the kernel. Run by `tools/explain_timeline_evidence.sh` (its plant table gives each command: "
        "`perfgate ab --before bench_expert_gemm --after bench_expert_gemm --after-env <plant> --filter <case> "
        "--rounds 3 --repetitions 3 --min-time 0.05 --max-extra-rounds 0 --explain --explain-ncu-launches 300`); "
        "this page is written from the stored output in "
        "[examples-data/timeline/](examples-data/timeline/) by `tools/explain_timeline_page.py`. How the "
        "timeline is read: [profiling.md](profiling.md#the-gpu-timeline-what-a-per-kernel-profile-cannot-see).\n\n"
        "The reports were written by the device's build of commit `415b0e2`, whose critical-path rows come from "
        "the first form of the walk (back through finished work only, so before's shares do not add up); the "
        "walk now covers the span, and `perfgate timeline BEFORE.json AFTER.json --ranges ...` on the recordings "
        "inside each archive gives today's rows without a GPU.\n\n"
        f"The machine:\n\n```\n{machine}\n```\n\n"
    )
    for plant in PLANTS:
        page += plant_section(data, plant)
    if check:
        if PAGE.read_text() != page:
            print(f"{PAGE} differs from what tools/explain_timeline_page.py writes: rerun it", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(page)
    print(f"wrote {PAGE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
