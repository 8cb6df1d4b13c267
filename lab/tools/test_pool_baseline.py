#!/usr/bin/env python3
"""pool_baseline.py against real perfgate and real archives: two hosts' A/A sessions pooled into one file that cites
the records and carries the note; an archive outside the records, and sessions with no suite in common, refused
(ctest lab.tools.pool_baseline; .ci/run gives it the product CI's binary). Needs the perfgate binary: PERFGATE_BIN
(which must then exist), else build/*/bin/perfgate; skipped without either."""
import glob
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import unittest

TOOLS = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(TOOLS))


def find_perfgate():
    if os.environ.get("PERFGATE_BIN"):
        return os.environ["PERFGATE_BIN"]
    found = sorted(glob.glob(os.path.join(ROOT, "build", "*", "bin", "perfgate")))
    return found[0] if found else None


PERFGATE = find_perfgate()


def run_file(times_us):
    """A Google Benchmark run of one suite `toy` with one benchmark, a repetition per time."""
    rows = [{"name": "toy/copy", "family_index": 0, "per_family_instance_index": 0, "run_name": "toy/copy",
             "run_type": "iteration", "repetitions": len(times_us), "repetition_index": i, "threads": 1,
             "iterations": 100, "real_time": t, "cpu_time": t, "time_unit": "us"} for i, t in enumerate(times_us)]
    context = {"date": "2026-11-30T00:00:00+00:00", "host_name": "h", "executable": "/x/bench_toy", "num_cpus": 2,
               "mhz_per_cpu": 2000, "cpu_scaling_enabled": False, "caches": [], "load_avg": [0, 0, 0],
               "library_build_type": "release"}
    return json.dumps({"context": context, "benchmarks": rows}).encode()


def write_archive(path, files):
    with tarfile.open(path, "w:gz") as archive:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))


@unittest.skipIf(PERFGATE is None, "no perfgate binary (set PERFGATE_BIN or build it)")
class PoolBaseline(unittest.TestCase):
    def setUp(self):
        self.assertTrue(os.access(PERFGATE, os.X_OK), f"PERFGATE_BIN={PERFGATE} is not an executable")
        self.tmp = tempfile.TemporaryDirectory()
        self.lab = os.path.join(self.tmp.name, "lab")
        self.records = os.path.join(self.lab, "records", "device", "pool")
        os.makedirs(self.records)
        self.h1 = os.path.join(self.records, "h1-sessions.tgz")
        self.h2 = os.path.join(self.records, "h2-sessions.tgz")
        write_archive(self.h1, {"aa-h1-g0/runs/toy.current.json": run_file([10.0, 10.1, 9.9]),
                                "aa-h1-g1/runs/toy.current.json": run_file([10.2, 10.0, 10.1])})
        write_archive(self.h2, {"aa-h2-g0/runs/toy.current.json": run_file([10.4, 10.3, 10.5])})
        self.out = os.path.join(self.tmp.name, "baselines")

    def tearDown(self):
        self.tmp.cleanup()

    def pool(self, *archives, cite_root=None):
        cmd = [sys.executable, os.path.join(TOOLS, "pool_baseline.py"), "--perfgate", PERFGATE, "--machine-class",
               "toy-c", "--commit", "abc1234", "--note", "pooled from two toy hosts", "--baseline-dir", self.out,
               "--cite-root", cite_root or self.lab, *archives]
        return subprocess.run(cmd, capture_output=True, text=True)

    def test_pools_every_session_and_cites_the_records(self):
        done = self.pool(self.h1, self.h2)
        self.assertEqual(done.returncode, 0, done.stderr)
        path = os.path.join(self.out, "toy-c", "toy.json")
        with open(path) as f:
            pooled = json.load(f)
        context = pooled["context"]
        self.assertEqual(context["perfgate.baseline.pooled"], "pooled from two toy hosts")
        self.assertEqual(context["perfgate.baseline.commit"], "abc1234")
        self.assertEqual(context["perfgate.baseline.process_runs"], "3")
        command = context["perfgate.baseline.command"]
        for cited in ("records/device/pool/h1-sessions.tgz:aa-h1-g0/runs/toy.current.json",
                      "records/device/pool/h1-sessions.tgz:aa-h1-g1/runs/toy.current.json",
                      "records/device/pool/h2-sessions.tgz:aa-h2-g0/runs/toy.current.json"):
            self.assertIn(cited, command)
        self.assertNotIn(self.tmp.name, command)  # no scratch or temporary path left in the provenance
        per_us = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}
        times = sorted(round(b["real_time"] * per_us[b["time_unit"]], 6) for b in pooled["benchmarks"]
                       if b["name"] == "toy/copy")
        self.assertEqual(times, sorted([10.0, 10.1, 9.9, 10.2, 10.0, 10.1, 10.4, 10.3, 10.5]))

    def test_an_archive_outside_the_records_is_refused(self):
        done = self.pool(self.h1, cite_root=os.path.join(self.tmp.name, "elsewhere"))
        self.assertNotEqual(done.returncode, 0)
        self.assertIn("h1-sessions.tgz: not under", done.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.out, "toy-c")))

    def test_sessions_without_a_common_suite_are_refused(self):
        other = os.path.join(self.records, "h3-sessions.tgz")
        write_archive(other, {"aa-h3-g0/runs/other.current.json": run_file([1.0, 1.1, 0.9])})
        done = self.pool(self.h1, other)
        self.assertNotEqual(done.returncode, 0)
        self.assertIn("no suite that every A/A session ran", done.stderr)

    def test_an_archive_without_an_aa_session_is_refused(self):
        planted_only = os.path.join(self.records, "h4-sessions.tgz")
        write_archive(planted_only, {"p02-h4-g0/runs/toy.current.json": run_file([10.0, 10.1, 9.9])})
        done = self.pool(planted_only)
        self.assertNotEqual(done.returncode, 0)
        self.assertIn("h4-sessions.tgz: no aa-* session inside", done.stderr)


if __name__ == "__main__":
    unittest.main()
