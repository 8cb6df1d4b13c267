#!/usr/bin/env python3
"""Writes docs/example-explain-timeline.md from the stored device output of tools/explain_timeline_evidence.sh.

    tools/explain_timeline_page.py [DATA_DIR]           (default: docs/examples-data/timeline)
    tools/explain_timeline_page.py --check [DATA_DIR]   exit 1 when the page differs from what it would write
    tools/explain_timeline_page.py --relead PERFGATE [DATA_DIR]
        write <call>/leads.txt: the lead line this perfgate gives from each stored archive's recordings and ncu
        CSVs (`perfgate timeline ... --ncu ...`), without a GPU; the page shows it where it differs from the
        report's (a report written before the lead's rules changed)

DATA_DIR holds one folder per device call (e.g. h100/, h200/), each with what that call brought back:
machine.txt, summary.txt, call.txt (the commit its build ran and ncu's launch cap) and one <plant>.tgz per
planted regression (its perfgate ab report, log and explain/ files). For each plant the first call (folders in
name order) whose archive holds a finished report is shown: the report is read from the archive (it stays packed:
it carries the run's dates and paths), the timeline pictures are unpacked into <call>/<plant>/, and the page shows
the plant's command, lead line, timeline table and pictures, with a link to the archive and the machine it ran on. Nothing is measured here: rerunning it rewrites the same page.
"""
import re
import subprocess
import sys
import tarfile
import tempfile
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


def unpack(call: Path, plant: str) -> Path | None:
    """Unpacks the plant's timeline pictures into <call>/<plant>/explain/; None without an archive."""
    archive = call / f"{plant}.tgz"
    if not archive.exists():
        return None
    target = call / plant
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            name = Path(member.name)
            if member.isfile() and name.suffix == ".svg" and ".." not in name.parts:
                member.name = str(Path(*name.parts[1:]))
                tar.extract(member, target, filter="data")
    return target


def packed_report(call: Path, plant: str) -> tuple[str, str] | None:
    """The name and text of the plant's ab report (the first top-level .md in its archive), if it has one."""
    archive = call / f"{plant}.tgz"
    if not archive.exists():
        return None
    with tarfile.open(archive) as tar:
        reports = sorted(m.name for m in tar.getmembers()
                         if m.isfile() and len(Path(m.name).parts) == 2 and m.name.endswith(".md"))
        if not reports:
            return None
        return Path(reports[0]).name, tar.extractfile(reports[0]).read().decode()


def calls_of(data: Path) -> list[Path]:
    """The device calls stored under DATA_DIR, in name order."""
    return sorted(d for d in data.iterdir() if d.is_dir() and (d / "machine.txt").exists())


def finished_run(data: Path, plant: str) -> tuple[Path, tuple[str, str] | None]:
    """The first call whose archive of `plant` holds a report, and that report; else the last call tried."""
    tried = calls_of(data)
    for call in tried:
        report = packed_report(call, plant)
        if report is not None:
            return call, report
    return (tried[-1] if tried else data), None


def gpu_of(call: Path) -> str:
    lines = (call / "machine.txt").read_text().splitlines()
    return lines[1].split(",")[0].strip() if len(lines) > 1 else "(unknown GPU)"


def call_facts(call: Path) -> dict[str, str]:
    facts = {}
    path = call / "call.txt"
    for line in path.read_text().splitlines() if path.exists() else []:
        key, _, value = line.partition(" ")
        facts[key] = value
    return facts


def stored_leads(call: Path) -> dict[str, str]:
    path = call / "leads.txt"
    leads = {}
    for line in path.read_text().splitlines() if path.exists() else []:
        plant, _, lead = line.partition(": ")
        leads[plant] = lead
    return leads


def gateless(lead: str) -> str:
    """A lead line without the gate's figure, which a relead from the recordings cannot know."""
    return re.sub(r" \(the gate measured [^)]*\)", "", lead)


def relead(perfgate: str, data: Path) -> int:
    """Writes each call's leads.txt from its archives' recordings and ncu CSVs."""
    for call in calls_of(data):
        lines = []
        for plant in PLANTS:
            archive = call / f"{plant}.tgz"
            if not archive.exists():
                continue
            with tempfile.TemporaryDirectory() as tmp:
                with tarfile.open(archive) as tar:
                    tar.extractall(tmp, filter="data")
                lead = lead_from(perfgate, Path(tmp) / plant)
            if lead:
                lines.append(f"{plant}: {lead}")
        (call / "leads.txt").write_text("".join(l + "\n" for l in lines))
        print(f"wrote {call / 'leads.txt'} ({len(lines)} plants)")
    return 0


def lead_from(perfgate: str, folder: Path) -> str:
    before = sorted(folder.glob("explain/*.before.timeline.json"))
    ranges = next((m.group(1) for f in folder.glob("runs/*.json")
                   for m in [re.search(r'"perfgate.nvtx_ranges": *"([^"]*)"', f.read_text())] if m), "")
    if not before or not ranges:
        return ""
    stem = str(before[0])[: -len(".before.timeline.json")]
    args = [perfgate, "timeline", stem + ".before.timeline.json", stem + ".after.timeline.json", "--ranges", ranges,
            "--ncu", stem + ".before.ncu.csv", stem + ".after.ncu.csv"]
    out = subprocess.run(args, capture_output=True, text=True, check=False).stdout
    return next((l.removeprefix("Likeliest cause (with ncu): ") for l in out.splitlines()
                 if l.startswith("Likeliest cause (with ncu): ")), "")


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
    call, report = finished_run(data, plant)
    head = f"## `{plant}`: {what}\n\n" + ("Changes a kernel.\n\n" if changes_kernel else "Changes no kernel.\n\n")
    summary = (call / "summary.txt").relative_to(PAGE.parent).as_posix() if (call / "summary.txt").exists() else ""
    if report is None:
        return head + f"No finished report in any stored call ([summary.txt]({summary})).\n\n"
    report_name, report_text = report
    folder = unpack(call, plant)
    facts = call_facts(call)
    head += (f"Ran on an {gpu_of(call)} ([{call.name}/machine.txt]({(call / 'machine.txt').relative_to(PAGE.parent).as_posix()})), "
             f"build of commit `{facts.get('commit', '?')}`, ncu capped at {facts.get('ncu', '?').replace('launches ', '')} "
             f"launches.\n\n")
    lines = report_text.splitlines()
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
    today = stored_leads(call).get(plant, "")
    if today and gateless(today) != gateless(lead.removeprefix("**Likeliest cause:** ")):
        out += ("Today's code leads differently from these stored recordings "
                f"([{call.name}/leads.txt]({(call / 'leads.txt').relative_to(PAGE.parent).as_posix()}), "
                "`tools/explain_timeline_page.py --relead PERFGATE`; the GPU span's change stands in for the "
                f"gate's): {today}\n\n")
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
    archive = (call / f"{plant}.tgz").relative_to(PAGE.parent).as_posix()
    out += f"\nThe whole report: `{plant}/{report_name}` in [{call.name}/{plant}.tgz]({archive}).\n\n"
    return out


def main() -> int:
    args = sys.argv[1:]
    if args and args[0] == "--relead":
        if len(args) < 2:
            print("usage: tools/explain_timeline_page.py --relead PERFGATE [DATA_DIR]", file=sys.stderr)
            return 2
        return relead(args[1], Path(args[2]) if len(args) > 2 else ROOT / "docs" / "examples-data" / "timeline")
    check = bool(args) and args[0] == "--check"
    if check:
        args = args[1:]
    data = Path(args[0]) if args else ROOT / "docs" / "examples-data" / "timeline"
    page = (
        "# Example: `perfgate ab --explain` with the GPU timeline (issue 41)\n\n"
        "Five planted regressions of the expert FFN, each through `perfgate ab --explain` on one lent GPU "
        "machine: three that change no kernel's code (lost overlap, a host sync gap, CUDA graphs off), which "
        "the per-kernel profile alone cannot explain, and two that change a kernel, whose lead line must stay "
        "the kernel. Run by `tools/explain_timeline_evidence.sh` (its plant table gives each command: "
        "`perfgate ab --before bench_expert_gemm --after bench_expert_gemm --after-env <plant> --filter <case> "
        "--rounds 3 --repetitions 3 --min-time 0.05 --max-extra-rounds 0 --explain --explain-ncu-launches N`); "
        "this page is written from the stored output in "
        "[examples-data/timeline/](examples-data/timeline/) by `tools/explain_timeline_page.py`. How the "
        "timeline is read: [profiling.md](profiling.md#the-gpu-timeline-what-a-per-kernel-profile-cannot-see).\n\n"
        "Each plant names the machine and the commit its report came from. Reports built at `415b0e2` have "
        "critical-path rows from the first form of the walk (back through finished work only, so before's shares "
        "do not add up); the walk now covers the span, and `perfgate timeline BEFORE.json AFTER.json --ranges ...` "
        "on the recordings inside each archive gives today's rows without a GPU.\n\n"
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
