#!/usr/bin/env python3
"""Checks the ready-made CI definitions (ctest ci.definitions): they parse as YAML, every repository script
they call exists and is executable, and the fleet is wired as docs/ci.md describes it (GPU runner labels,
the shard matrix and the merge job agree on the shard count, the merge runs after every shard, the report
goes to the job summary / a comment, JUnit is published). The posting is tried, too: each job's report steps run
in a scratch folder on a report of 70,000 characters with a summary beside it, and the comment step must get
the summary, at most 65,536 characters, and must not be able to fail the job (continue-on-error); the job
summary must get the full report when it fits 1 MiB.

  check_ci_definitions.py ROOT [--github FILE] [--gitlab FILE]

Exit 0 when all holds, 1 with one line per problem, 77 without PyYAML (python3-yaml).
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

try:
    import yaml
except ImportError:
    print("SKIP: no PyYAML (apt-get install python3-yaml; ci/setup.sh installs it)")
    sys.exit(77)

# A repository script called from a shell line: ci/perf.sh, ./ci/merge.sh, bash ci/x.sh, harness/....py
SCRIPT = re.compile(r"(?:^|[\s;&|(\"'])(?:bash\s+|\./)?((?:ci|harness|tools|benches)/[\w./-]+\.(?:sh|py))")


def scripts_in(text):
    return SCRIPT.findall(text or "")


def load(path, problems):
    try:
        with open(path, encoding="utf-8") as f:
            return yaml.safe_load(f)
    except (OSError, yaml.YAMLError) as e:
        problems.append(f"{path}: does not parse: {e}".replace("\n", " "))
        return None


def check_scripts(root, where, lines, problems):
    for line in lines:
        for script in scripts_in(line):
            path = os.path.join(root, script)
            if not os.path.isfile(path):
                problems.append(f"{where}: calls {script}, which is not in the repository")
            elif not os.access(path, os.X_OK):
                problems.append(f"{where}: calls {script}, which is not executable")


def shard_count_of(text):
    m = re.search(r"--shard\s+[^/\n]*/(\d+)", text or "")
    return int(m.group(1)) if m else None


# The jobs every CI definition must have, and the script each must run (scripts: job name -> its shell text).
REQUIRED_JOBS = (("test", "ci/test.sh"), ("perf", "ci/perf.sh"), ("perf-shard", "ci/perf.sh"), ("perf-merge", "ci/merge.sh"))


def check_required_jobs(path, jobs, scripts, problems):
    for name, script in REQUIRED_JOBS:
        if name not in jobs:
            problems.append(f"{path}: no job {name}")
        elif script not in scripts[name]:
            problems.append(f"{path}: job {name} does not run {script}")


def check_github(root, path, problems):
    doc = load(path, problems)
    if doc is None:
        return
    jobs = doc.get("jobs") or {}
    # YAML 1.1 reads the key `on` as True.
    if not (doc.get("on") or doc.get(True)):
        problems.append(f"{path}: no `on:` triggers")
    runs = {}
    for name, job in jobs.items():
        steps = job.get("steps") or []
        lines = [s.get("run", "") for s in steps if isinstance(s, dict)]
        runs[name] = "\n".join(lines)
        check_scripts(root, f"{path}: job {name}", lines, problems)
        for s in steps:
            uses = s.get("uses") if isinstance(s, dict) else None
            if uses and "@" not in uses:
                problems.append(f"{path}: job {name}: action {uses} is not pinned to a version")
    check_required_jobs(path, jobs, runs, problems)
    if problems:
        return
    for name in ("perf", "perf-shard"):
        labels = jobs[name].get("runs-on")
        labels = labels if isinstance(labels, list) else [labels]
        if "gpu" not in labels:
            problems.append(f"{path}: job {name} does not ask for a GPU runner (runs-on: {labels})")
    matrix = ((jobs["perf-shard"].get("strategy") or {}).get("matrix") or {}).get("shard") or []
    count = shard_count_of(runs["perf-shard"])
    if matrix != list(range(1, len(matrix) + 1)) or count != len(matrix):
        problems.append(f"{path}: the shard matrix {matrix} and `--shard I/{count}` disagree")
    m = re.search(r"ci/merge\.sh\s+(\d+)", runs["perf-merge"])
    if not m or int(m.group(1)) != len(matrix):
        problems.append(f"{path}: perf-merge does not merge {len(matrix)} shards")
    needs = jobs["perf-merge"].get("needs")
    needs = needs if isinstance(needs, list) else [needs]
    if "perf-shard" not in needs or "always()" not in str(jobs["perf-merge"].get("if", "")):
        problems.append(f"{path}: perf-merge must run after perf-shard even when a shard failed (needs + always())")
    if (jobs["perf-shard"].get("strategy") or {}).get("fail-fast", True):
        problems.append(f"{path}: perf-shard must set fail-fast: false, or one failed shard cancels the others")
    for name in ("perf", "perf-merge"):
        if "$GITHUB_STEP_SUMMARY" not in runs[name]:
            problems.append(f"{path}: job {name} does not write the report to $GITHUB_STEP_SUMMARY")
        if not any("comment" in (s.get("uses") or "") for s in jobs[name]["steps"]):
            problems.append(f"{path}: job {name} does not post the report as a pull-request comment")
    text = open(path, encoding="utf-8").read()
    for junit in ("build/ci/ctest-junit.xml", "build/merge/perf-junit.xml"):
        if junit not in text:
            problems.append(f"{path}: does not publish {junit}")
    if "secrets.PERFGATE_HISTORY" not in text:
        problems.append(f"{path}: never records into PERFGATE_HISTORY")
    for name in ("perf", "perf-merge"):
        check_github_posting(root, path, name, jobs[name], problems)


COMMENT_LIMIT = 65536          # characters of a GitHub comment / GitLab note
STEP_SUMMARY_LIMIT = 1024 * 1024
BIG_REPORT_CHARS = 70000


def report_folder(text):
    """build/perf or build/merge: the folder of the report a job posts."""
    m = re.search(r"(build/[\w-]+)/perf-report\.md", text or "")
    return m.group(1) if m else None


def write_inputs(work, folder, summary):
    """A full report over the comment limit and, when `summary`, a short summary beside it."""
    os.makedirs(os.path.join(work, folder), exist_ok=True)
    row = "| `suite/bench` | time 1.0% slower | 0.5% to 1.5% slower |\n"
    with open(os.path.join(work, folder, "perf-report.md"), "w", encoding="utf-8") as f:
        f.write("## perfgate run: PASS: no regression\n\n" + row * (BIG_REPORT_CHARS // len(row) + 1))
    if summary:
        with open(os.path.join(work, folder, "perf-summary.md"), "w", encoding="utf-8") as f:
            f.write("## perfgate run: PASS: no regression\n\nthe summary\n")


def run_steps(root, work, shell_lines):
    """Runs a job's shell lines in `work`, where ci/ is the repository's; returns (exit code, output)."""
    os.symlink(os.path.join(os.path.abspath(root), "ci"), os.path.join(work, "ci"))
    env = dict(os.environ, GITHUB_STEP_SUMMARY=os.path.join(work, "step-summary-file"))
    r = subprocess.run(["bash", "-euo", "pipefail", "-c", "\n".join(shell_lines)], cwd=work, env=env,
                       capture_output=True, text=True, timeout=60)
    return r.returncode, r.stdout + r.stderr


def read_chars(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def check_github_posting(root, path, name, job, problems):
    """Runs the job's steps after the main job on a big report: the comment gets the summary, within the limit."""
    steps = [s for s in job.get("steps") or [] if isinstance(s, dict)]
    comment = [s for s in steps if "comment" in (s.get("uses") or "")]
    if not comment:
        return
    comment = comment[0]
    if comment.get("continue-on-error") is not True:
        problems.append(f"{path}: job {name}: the comment step must not fail the job (continue-on-error: true)")
    body = (comment.get("with") or {}).get("path", "")
    folder = report_folder("\n".join(s.get("run", "") for s in steps))
    if folder is None:
        problems.append(f"{path}: job {name}: posts no build/.../perf-report.md")
        return
    # The steps that prepare the bodies: every `run` after the one that writes the report.
    main = next((i for i, s in enumerate(steps) if re.search(r"ci/(perf|merge)\.sh", s.get("run", ""))), None)
    lines = [s["run"] for s in steps[main + 1:] if s.get("run")] if main is not None else []
    for with_summary in (True, False):
        work = tempfile.mkdtemp(prefix="perfgate_ci_")
        try:
            write_inputs(work, folder, with_summary)
            code, output = run_steps(root, work, lines)
            what = f"{path}: job {name} (report of {BIG_REPORT_CHARS} characters{', summary beside it' if with_summary else ''})"
            if code != 0:
                problems.append(f"{what}: its report steps failed: {output.strip()[-300:]}")
                continue
            posted = os.path.join(work, body)
            if not os.path.isfile(posted):
                problems.append(f"{what}: the comment step's file {body} was not written")
                continue
            text = read_chars(posted)
            if len(text) > COMMENT_LIMIT:
                problems.append(f"{what}: the comment is {len(text)} characters, over {COMMENT_LIMIT}")
            if with_summary and text != read_chars(os.path.join(work, folder, "perf-summary.md")):
                problems.append(f"{what}: the comment is not the summary")
            summary_file = os.path.join(work, "step-summary-file")
            if not os.path.isfile(summary_file) or len(read_chars(summary_file)) < BIG_REPORT_CHARS:
                problems.append(f"{what}: the job summary does not hold the full report, which fits {STEP_SUMMARY_LIMIT} bytes")
        finally:
            shutil.rmtree(work, ignore_errors=True)


def check_gitlab_posting(root, path, name, job, problems):
    """The job's note goes through ci/post-report.sh with the summary beside the full report."""
    after = "\n".join(str(x) for x in job.get("after_script") or [])
    m = re.search(r"ci/post-report\.sh\s+(\S+)(?:\s+(\S+))?", after)
    if not m:
        return
    full, summary = m.group(1), m.group(2)
    if not summary or not summary.endswith("perf-summary.md"):
        problems.append(f"{path}: job {name}: ci/post-report.sh gets no summary beside {full}")
    paths = (job.get("artifacts") or {}).get("paths") or []
    if full not in paths:
        problems.append(f"{path}: job {name}: the full report {full} is not kept as an artifact")


def check_gitlab(root, path, problems):
    doc = load(path, problems)
    if doc is None:
        return
    jobs = {k: v for k, v in doc.items() if isinstance(v, dict) and not k.startswith(".") and k not in ("variables", "workflow", "default")}
    hidden = {k: v for k, v in doc.items() if k.startswith(".") and isinstance(v, dict)}
    scripts = {}
    for name, job in list(jobs.items()) + list(hidden.items()):
        lines = []
        for key in ("before_script", "script", "after_script"):
            value = job.get(key) or []
            lines += value if isinstance(value, list) else [value]
        scripts[name] = "\n".join(str(x) for x in lines)
        check_scripts(root, f"{path}: job {name}", [str(x) for x in lines], problems)
    stages = doc.get("stages") or []
    for name, job in jobs.items():
        if job.get("stage") not in stages:
            problems.append(f"{path}: job {name} has stage {job.get('stage')!r}, not one of {stages}")
    check_required_jobs(path, jobs, scripts, problems)
    if problems:
        return
    for name in ("perf", "perf-shard"):
        if "gpu" not in (jobs[name].get("tags") or []):
            problems.append(f"{path}: job {name} does not ask for a GPU runner (tags)")
    parallel = jobs["perf-shard"].get("parallel")
    default = str((doc.get("variables") or {}).get("PERFGATE_SHARDS", ""))
    if str(parallel) != default or "$CI_NODE_INDEX/$CI_NODE_TOTAL" not in scripts["perf-shard"]:
        problems.append(f"{path}: perf-shard parallel ({parallel}) and PERFGATE_SHARDS ({default}) or its --shard disagree")
    needs = [n["job"] if isinstance(n, dict) else n for n in jobs["perf-merge"].get("needs") or []]
    if "perf-shard" not in needs:
        problems.append(f"{path}: perf-merge does not need perf-shard")
    if not any(r.get("when") == "always" for r in jobs["perf-merge"].get("rules") or []):
        problems.append(f"{path}: perf-merge must run when a shard failed (when: always)")
    junit = ((jobs["perf-merge"].get("artifacts") or {}).get("reports") or {}).get("junit")
    if junit != "build/merge/perf-junit.xml":
        problems.append(f"{path}: perf-merge does not publish build/merge/perf-junit.xml as JUnit")
    if ((jobs["test"].get("artifacts") or {}).get("reports") or {}).get("junit") != "build/ci/ctest-junit.xml":
        problems.append(f"{path}: test does not publish build/ci/ctest-junit.xml as JUnit")
    for name in ("perf", "perf-merge"):
        if "ci/post-report.sh" not in scripts[name]:
            problems.append(f"{path}: job {name} does not post the report as a merge-request note")
        check_gitlab_posting(root, path, name, jobs[name], problems)


def main(argv):
    if len(argv) < 2:
        print(__doc__)
        return 2
    root = argv[1]
    github = os.path.join(root, "ci/github/perfgate.yml")
    gitlab = os.path.join(root, "ci/gitlab/perfgate.gitlab-ci.yml")
    rest = argv[2:]
    while rest:
        flag, value, rest = rest[0], rest[1], rest[2:]
        if flag == "--github":
            github = value
        elif flag == "--gitlab":
            gitlab = value
        else:
            print(f"unknown flag {flag}")
            return 2
    problems, gitlab_problems = [], []
    check_github(root, github, problems)
    check_gitlab(root, gitlab, gitlab_problems)
    problems += gitlab_problems
    # The junit file the test job publishes is the one ci/test.sh writes.
    if "ctest-junit.xml" not in open(os.path.join(root, "ci/test.sh"), encoding="utf-8").read():
        problems.append("ci/test.sh does not write ctest-junit.xml")
    for p in problems:
        print(p)
    if not problems:
        print(f"OK: {github} and {gitlab}: every called script exists; shards, merge, summary, comments and JUnit wired")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
