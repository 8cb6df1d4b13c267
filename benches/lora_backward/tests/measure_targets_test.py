#!/usr/bin/env python3
"""measure_targets.py's per-variant figures against hand-computed values and against the bench's own
lora_floor_share_pct and lora_share_bound_pct counters of recorded runs (fused2 rows, 2 threads, cfg ci)."""
import importlib.util
import math
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("measure_targets", os.path.join(HERE, "..", "tools", "measure_targets.py"))
mt = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mt)

PHASES = ["phase.D0", "phase.D1", "phase.D2", "phase.D3", "phase.D4", "phase.A1", "phase.GU0", "phase.GU1",
          "phase.GU2", "phase.GU3"]


def row(**phases):
    r = {p: 0.0 for p in PHASES}
    r.update({f"phase.{k}": v for k, v in phases.items() if k in {p[6:] for p in PHASES}})
    r["real_time"] = phases.get("real_time", sum(r[p] for p in PHASES))
    if "pct" in phases:
        r["pct.roofline.lora"] = phases["pct"]
    for p in ("D3", "GU1"):
        if f"roof_{p}" in phases:
            r[f"pct.roofline.{p}"] = phases[f"roof_{p}"]
    return r


class VariantFigures(unittest.TestCase):
    def test_hand_computed(self):
        f = mt.variant_figures("fused2", row(D3=3.0, D4=0.4, GU1=6.0, GU3=0.8, pct=60.0), 24.0, PHASES)
        self.assertAlmostEqual(f["fused2_lora_ms"], 1.2)
        self.assertAlmostEqual(f["fused2_speedup"], 20.0)
        self.assertAlmostEqual(f["fused2_share_pct"], 100 * 1.2 / 10.2)
        self.assertAlmostEqual(f["fused2_pct_floor"], 60.0)
        self.assertAlmostEqual(f["fused2_floor_speedup"], 24.0 / 0.72)
        self.assertAlmostEqual(f["fused2_floor_share_pct"], 100 * 0.72 / (9.0 + 0.72))

    def test_share_bound_puts_the_base_gemms_at_their_roofline(self):
        f = mt.variant_figures("fused2", row(D3=3.0, D4=0.4, GU1=6.0, GU3=0.8, pct=60.0, roof_D3=50.0, roof_GU1=75.0),
                               24.0, PHASES)
        self.assertAlmostEqual(f["fused2_share_bound_pct"], 100 * 0.72 / (1.5 + 4.5 + 0.72))
        self.assertGreater(f["fused2_share_bound_pct"], f["fused2_floor_share_pct"])  # a faster base, a larger share

    def test_share_bound_matches_the_bench_counter(self):
        # A fused2 row of a 2-vCPU Xeon runner with AMX (family 6 model 207), 2 threads, cfg ci, qlen 128.
        r = row(A1=1.0264061971830984, D0=0.04731811267605634, D1=0.1179692253521127, D2=0.18146742253521128,
                D3=2.471196323943662, D4=0.49996028169014084, GU0=0.025650295774647884, GU1=5.07472147887324,
                GU2=0.00013364788732394368, GU3=1.019157802816901, real_time=10.46596391548314,
                pct=72.90497155665591, roof_D3=92.6458160291515, roof_GU1=90.22997654280478)
        f = mt.variant_figures("fused2", r, 36.0, PHASES)
        self.assertAlmostEqual(f["fused2_share_bound_pct"], 11.81367257169726, places=9)  # lora_share_bound_pct
        self.assertAlmostEqual(f["fused2_floor_share_pct"], 11.017421983226697, places=9)  # lora_floor_share_pct

    def test_matches_the_bench_counter(self):
        r = row(A1=1.59041075, D0=0.07070869047619047, D1=0.18785058333333332, D2=0.26315086904761914,
                D3=4.676521011904761, D4=0.7398739047619046, GU0=0.04742647619047619, GU1=9.283319166666669,
                GU2=0.00017009523809523815, GU3=1.6292706190476185, real_time=18.491272511904675,
                pct=70.49435678469611)
        f = mt.variant_figures("fused2", r, 38.195816, PHASES)
        self.assertAlmostEqual(f["fused2_floor_share_pct"], 9.38810621475542, places=9)  # lora_floor_share_pct
        self.assertAlmostEqual(f["fused2_share_pct"], 12.814012051537404, places=9)  # lora_share_pct

    def test_missing_row_or_counter_gives_nan(self):
        self.assertTrue(all(math.isnan(v) for v in mt.variant_figures("fused", None, 24.0, PHASES).values()))
        f = mt.variant_figures("fused2", row(D4=0.4, GU3=0.8, D3=3.0), 24.0, PHASES)
        self.assertTrue(math.isnan(f["fused2_floor_speedup"]) and math.isnan(f["fused2_floor_share_pct"]))
        self.assertTrue(math.isnan(f["fused2_share_bound_pct"]))
        f = mt.variant_figures("fused2", row(D4=0.4, GU3=0.8, D3=3.0, pct=60.0), 24.0, PHASES)
        self.assertTrue(math.isnan(f["fused2_share_bound_pct"]))  # no base rooflines in the row
        self.assertAlmostEqual(f["fused2_speedup"], 20.0)


class Verdict(unittest.TestCase):
    def test_speedup_interval(self):
        self.assertEqual(mt.verdict(21.0, 23.0, 20, True), "met")
        self.assertEqual(mt.verdict(20.0, 23.0, 20, True), "met")
        self.assertTrue(mt.verdict(19.0, 21.0, 20, True).startswith("open"))
        self.assertEqual(mt.verdict(17.0, 19.9, 20, True), "NOT met")

    def test_share_interval(self):
        self.assertEqual(mt.verdict(8.0, 10.0, 10, False), "met")
        self.assertTrue(mt.verdict(9.5, 10.5, 10, False).startswith("open"))
        self.assertEqual(mt.verdict(10.2, 11.0, 10, False), "NOT met")


class BenchmarkFilter(unittest.TestCase):
    NAME = "lora_backward/backward/{}/cfg:{}/qlen:128/threads:2"

    def test_matches_only_the_config_asked(self):
        import re
        filt = re.compile(mt.benchmark_filter("ci+grads=bf16", 128, 2))
        self.assertTrue(filt.search(self.NAME.format("fused2", "ci+grads=bf16")))
        self.assertTrue(filt.search(self.NAME.format("loop", "ci+grads=bf16") + "/real_time"))
        self.assertFalse(filt.search(self.NAME.format("fused2", "ci")))
        self.assertFalse(re.compile(mt.benchmark_filter("ci", 128, 2)).search(self.NAME.format("fused2", "ci+grads=bf16")))


if __name__ == "__main__":
    sys.exit(unittest.main())
